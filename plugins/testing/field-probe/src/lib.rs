//! A plugin that reads `largest-received` of the application-data space
//! when the peer's transport parameters arrive, before any 1-RTT packet can
//! have been received (CQ-FIELD-1: `none` before any packet; CQ-FIELD-12:
//! `not-found` while the connection does not exist yet), and logs the
//! answer: message `largest-received`, field `value` (the value as text, or
//! the error's WIT name). Both sides need it: it negotiates transport
//! parameter 0x6670.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::string::String;
use corequic_sdk::*;

const TP_PROBE: u64 = 0x6670;

#[derive(Default)]
struct FieldProbe;

impl Plugin for FieldProbe {
    fn manifest() -> Manifest {
        Manifest::new("field-probe", "0.2.0")
            .define_transport_parameter(TP_PROBE)
            .reads(&[field::LARGEST_RECEIVED])
            .permission(permission::REGISTRATION)
            .permission(permission::LOGGING)
    }

    fn init(&mut self) -> Result<()> {
        host::register_transport_parameter(TP_PROBE)
    }

    fn write_transport_parameter(&mut self, _: Anchor, _: u64, _: &OutBuf) -> Result<()> {
        Ok(())
    }

    fn decode_transport_parameter(&mut self, _: Anchor, _: u64, _: &InBuf) -> Result<()> {
        let read = host::get_in(PnSpace::ApplicationData, field::LARGEST_RECEIVED);
        let value = match read {
            Ok(PluginVal::None) => String::from("none"),
            Ok(PluginVal::U64(n)) => text::decimal(n),
            Ok(_) => String::from("other"),
            Err(e) if e.kind == error_kind::NOT_FOUND => String::from("not-found"),
            Err(_) => String::from("error"),
        };
        host::log(
            LogLevel::Info,
            "largest-received",
            &[("value", PluginVal::String(value))],
        )?;
        host::enable();
        Ok(())
    }
}

export_plugin!(FieldProbe);
