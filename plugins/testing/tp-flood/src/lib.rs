//! A plugin that asks for more transport parameters than any handshake can
//! carry, for the hosts' negative tests (CQ-LIMIT-11, CQ-API-8): 70 parameters of 1,024 bytes (ids
//! 0x7000–0x7045), more than the 65,535 bytes of the TLS extension that
//! carries them; and registrations of ids the stack sends itself
//! (initial_max_data 0x04, initial_source_connection_id 0x0f), whose
//! results it logs (message `register`, fields `id` and `result`: `ok` or
//! the error's WIT name).

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::{string::String, vec};
use corequic_sdk::*;

const FIRST: u64 = 0x7000;
const COUNT: u64 = 70;
/// Ids every stack sends itself.
const STACK_OWNED: [u64; 2] = [0x04, 0x0f];

#[derive(Default)]
struct TpFlood;

fn error_name(r: &Result<()>) -> String {
    String::from(match r {
        Ok(()) => "ok",
        Err(e) if e.kind == error_kind::INVALID_ARGUMENT => "invalid-argument",
        Err(e) if e.kind == error_kind::DENIED => "denied",
        Err(_) => "other",
    })
}

impl Plugin for TpFlood {
    fn manifest() -> Manifest {
        (FIRST..FIRST + COUNT)
            .chain(STACK_OWNED)
            .fold(Manifest::new("tp-flood", "0.2.0"), |m, id| {
                m.bind(routine::WRITE_TRANSPORT_PARAMETER, Anchor::Define, id)
            })
            .permission(permission::REGISTRATION)
            .permission(permission::LOGGING)
    }

    fn init(&mut self) -> Result<()> {
        for id in STACK_OWNED {
            let r = host::register_transport_parameter(id);
            host::log(
                LogLevel::Info,
                "register",
                &[
                    ("id", PluginVal::U64(id)),
                    ("result", PluginVal::String(error_name(&r))),
                ],
            )?;
        }
        for id in FIRST..FIRST + COUNT {
            host::register_transport_parameter(id)?;
        }
        host::enable();
        Ok(())
    }

    fn write_transport_parameter(&mut self, _: Anchor, _: u64, out: &OutBuf) -> Result<()> {
        out.put(&vec![0x54; out.capacity() as usize])
    }
}

export_plugin!(TpFlood);
