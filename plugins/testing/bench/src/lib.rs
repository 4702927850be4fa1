//! Benchmark plugin, the wasm side of the runtime's criterion benches (named
//! like pluginop's): an empty plugin-control (run and return), two inputs and
//! four outputs (input outputs), a field read-modify-write (increase max
//! data), and a MAX_DATA-like extension frame sent and received through the
//! full Algorithm 1 (max-data send and receive). A control that returns its
//! arguments serves the runtime's `values` tests.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::{vec, vec::Vec};
use corequic_sdk::*;

/// The extension frame carrying a MAX_DATA value (a varint).
pub const FRAME_MAX_DATA: u64 = 0x3f5e;
const CONTROL_EMPTY: u64 = 0;
const CONTROL_ARITH: u64 = 1;
const CONTROL_INCREASE_MAX_DATA: u64 = 2;
/// Returns its arguments (the runtime's `values` tests).
const CONTROL_ECHO: u64 = 3;

#[derive(Default)]
struct Bench;

impl Plugin for Bench {
    fn manifest() -> Manifest {
        // Only the routines the frame needs: the host calls nothing else.
        [
            routine::SHOULD_SEND_FRAME,
            routine::WRITE_FRAME,
            routine::PARSE_FRAME,
            routine::PROCESS_FRAME,
        ]
        .into_iter()
        .fold(Manifest::new("bench", "0.2.0"), |m, r| {
            m.bind(r, Anchor::Define, FRAME_MAX_DATA)
        })
        .control(CONTROL_EMPTY)
        .control(CONTROL_ARITH)
        .control(CONTROL_INCREASE_MAX_DATA)
        .control(CONTROL_ECHO)
        .reads(&[field::MAX_TX_DATA, field::MAX_RX_DATA])
        .writes(&[field::MAX_TX_DATA])
        .permission(permission::REGISTRATION)
    }

    fn init(&mut self) -> Result<()> {
        host::register_frame(FrameRegistration {
            frame_type: FRAME_MAX_DATA,
            position: SendPosition::AfterAck,
            ack_eliciting: true,
            in_flight: true,
        })?;
        host::enable();
        Ok(())
    }

    fn should_send_frame(&mut self, _: Anchor, _: u64, _: SendContext) -> Result<bool> {
        Ok(true)
    }

    fn write_frame(
        &mut self,
        _: Anchor,
        _: u64,
        _: SendContext,
        out: &OutBuf,
    ) -> Result<Option<u64>> {
        let value = host::get_u64(field::MAX_RX_DATA)?;
        let mut bytes = Vec::with_capacity(12);
        if !(varint::encode(FRAME_MAX_DATA, &mut bytes) && varint::encode(value, &mut bytes)) {
            return Err(Error::invalid_argument("value too large"));
        }
        out.put(&bytes)?;
        Ok(Some(value))
    }

    fn parse_frame(&mut self, _: Anchor, ty: u64, payload: &InBuf) -> Result<ParsedFrame> {
        // One host call in the common case: a varint is at most 8 bytes.
        let head = match payload.read(0, 8) {
            Ok(head) => head,
            Err(e) if e.kind == error_kind::BUFFER_TOO_SHORT => payload.read(0, payload.len())?,
            Err(e) => return Err(e),
        };
        let (value, len) = varint::decode(&head).ok_or_else(|| Error::buffer_too_short(1))?;
        Ok(ParsedFrame {
            frame: ExtFrame {
                frame_type: ty,
                tag: value,
            },
            consumed: len as u64,
        })
    }

    fn process_frame(&mut self, _: Anchor, frame: Frame, _: RxContext) -> Result<()> {
        match frame.ext() {
            Some(f) => host::set(field::MAX_TX_DATA, PluginVal::U64(f.tag)),
            None => Ok(()),
        }
    }

    fn plugin_control(&mut self, id: u64, args: Vec<PluginVal>) -> Result<Vec<PluginVal>> {
        match (id, args.as_slice()) {
            (CONTROL_EMPTY, _) => Ok(Vec::new()),
            (CONTROL_ARITH, [PluginVal::S64(a), PluginVal::S64(b)]) => Ok(vec![
                PluginVal::S64(a.wrapping_add(*b)),
                PluginVal::S64(a.wrapping_sub(*b)),
                PluginVal::S64(a.wrapping_mul(*b)),
                PluginVal::S64(a.checked_div(*b).unwrap_or(0)),
            ]),
            (CONTROL_INCREASE_MAX_DATA, _) => {
                let v = host::get_u64(field::MAX_TX_DATA)?;
                host::set(field::MAX_TX_DATA, PluginVal::U64(v + 1))?;
                Ok(Vec::new())
            }
            (CONTROL_ECHO, _) => Ok(args),
            _ => Err(Error::not_found("unknown plugin-control id")),
        }
    }
}

export_plugin!(Bench);
