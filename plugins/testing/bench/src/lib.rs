//! Benchmark plugin, the wasm side of the runtime's criterion benches (named
//! like pluginop's): an empty plugin-control (run and return), two inputs and
//! four outputs (input outputs), a field read-modify-write (increase max
//! data), and a MAX_DATA-like extension frame sent and received through the
//! full Algorithm 1 (max-data send and receive).

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::{string::String, vec, vec::Vec};
use corequic_sdk::*;

/// The extension frame carrying a MAX_DATA value (a varint).
pub const FRAME_MAX_DATA: u64 = 0x3f5e;
const CONTROL_EMPTY: u64 = 0;
const CONTROL_ARITH: u64 = 1;
const CONTROL_INCREASE_MAX_DATA: u64 = 2;

#[derive(Default)]
struct Bench;

impl Plugin for Bench {
    fn manifest() -> Manifest {
        // Only the routines the frame needs: the host calls nothing else.
        [
            Routine::ShouldSendFrame,
            Routine::PrepareFrame,
            Routine::FrameWireLen,
            Routine::WriteFrame,
            Routine::ParseFrame,
            Routine::ProcessFrame,
        ]
        .into_iter()
        .fold(Manifest::new("bench", "0.1.0"), |m, r| {
            m.bind(r, Anchor::Define, FRAME_MAX_DATA)
        })
        .control(CONTROL_EMPTY)
        .control(CONTROL_ARITH)
        .control(CONTROL_INCREASE_MAX_DATA)
        .reads(&[FieldId::MaxTxData, FieldId::MaxRxData])
        .writes(&[FieldId::MaxTxData])
        .permission(Permission::Registration)
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

    fn prepare_frame(&mut self, _: Anchor, ty: u64, _: SendContext) -> Result<Option<ExtFrame>> {
        Ok(Some(ExtFrame {
            frame_type: ty,
            tag: host::get_u64(FieldId::MaxRxData)?,
        }))
    }

    fn frame_wire_len(&mut self, _: Anchor, frame: ExtFrame) -> Result<u64> {
        let len = varint::len(FRAME_MAX_DATA).zip(varint::len(frame.tag));
        len.map(|(a, b)| (a + b) as u64)
            .ok_or(Error::InvalidArgument("value too large".into()))
    }

    fn write_frame(&mut self, _: Anchor, frame: ExtFrame, out: &OutBuf) -> Result<()> {
        let mut bytes = Vec::with_capacity(12);
        varint::encode(FRAME_MAX_DATA, &mut bytes);
        varint::encode(frame.tag, &mut bytes);
        out.put(&bytes)
    }

    fn parse_frame(&mut self, _: Anchor, ty: u64, payload: &InBuf) -> Result<ParsedFrame> {
        // One host call in the common case: a varint is at most 8 bytes.
        let head = match payload.read(0, 8) {
            Ok(head) => head,
            Err(Error::BufferTooShort(_)) => payload.read(0, payload.len())?,
            Err(e) => return Err(e),
        };
        let (value, len) = varint::decode(&head).ok_or(Error::BufferTooShort(1))?;
        Ok(ParsedFrame {
            frame: ExtFrame {
                frame_type: ty,
                tag: value,
            },
            consumed: len as u64,
        })
    }

    fn process_frame(&mut self, _: Anchor, frame: Frame, _: RxContext) -> Result<()> {
        match frame {
            Frame::Extension(f) => host::set(FieldId::MaxTxData, PluginVal::U64(f.tag)),
            _ => Ok(()),
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
                let v = host::get_u64(FieldId::MaxTxData)?;
                host::set(FieldId::MaxTxData, PluginVal::U64(v + 1))?;
                Ok(Vec::new())
            }
            _ => Err(Error::NotFound(String::from("unknown plugin-control id"))),
        }
    }
}

export_plugin!(Bench);
