//! A plugin whose `write-frame` lies about the frame it wrote, for the
//! hosts' negative tests (CQ-ROUTINE-11 to CQ-ROUTINE-13, CQ-SEND-11). It
//! registers an ack-eliciting frame, so the host builds packets for it, but
//! no frame ever reaches a packet: plugin-control `0x4c0001(mode)` picks the
//! lie, 0 (the default) sends nothing.
//!
//! | mode | `write-frame` writes | and returns |
//! |---|---|---|
//! | 1 | nothing | a tag |
//! | 2 | 4 bytes that do not start with its frame type | a tag |
//! | 3 | 8 bytes of its frame | `none` |
//! | 4 | as many bytes as the buffer takes, then more (a long write) | the error of the failed `put` |
//! | 5 | 8 bytes of a CONNECTION_CLOSE frame (another frame than its own) | a tag |
//!
//! Its `init` also tries to register STREAM (0x08), a standard frame type;
//! plugin-control `0x4c0002` returns what that registration returned.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::{vec, vec::Vec};
use corequic_sdk::*;

/// The frame it pretends to send (a type no stack knows).
const FRAME_LIAR: u64 = 0x4c59;
/// Plugin-control: set the mode (u64).
const CONTROL_MODE: u64 = 0x4c_0001;
/// Plugin-control: the result of registering STREAM in `init`.
const CONTROL_STREAM_REGISTRATION: u64 = 0x4c_0002;

#[derive(Default)]
struct Liar {
    mode: u64,
    stream_registration: Option<Result<()>>,
}

impl Plugin for Liar {
    fn manifest() -> Manifest {
        [routine::SHOULD_SEND_FRAME, routine::WRITE_FRAME]
            .into_iter()
            .fold(Manifest::new("liar", "0.2.0"), |m, r| {
                m.bind(r, Anchor::Define, FRAME_LIAR)
            })
            .control(CONTROL_MODE)
            .control(CONTROL_STREAM_REGISTRATION)
            .permission(permission::REGISTRATION)
    }

    fn init(&mut self) -> Result<()> {
        host::register_frame(FrameRegistration {
            frame_type: FRAME_LIAR,
            position: SendPosition::End,
            ack_eliciting: true,
            in_flight: true,
        })?;
        self.stream_registration = Some(host::register_frame(FrameRegistration {
            frame_type: 0x08,
            position: SendPosition::End,
            ack_eliciting: true,
            in_flight: true,
        }));
        host::enable();
        Ok(())
    }

    fn should_send_frame(&mut self, _: Anchor, _: u64, _: SendContext) -> Result<bool> {
        Ok(self.mode != 0)
    }

    fn write_frame(
        &mut self,
        _: Anchor,
        _: u64,
        _: SendContext,
        out: &OutBuf,
    ) -> Result<Option<u64>> {
        // FRAME_LIAR as a 4-byte varint, then 4 bytes.
        const OWN: [u8; 8] = [0x80, 0x00, 0x4c, 0x59, 0, 0, 0, 0];
        match self.mode {
            1 => {}
            2 => out.put(&[0x40, 0x4c, 0x59, 0])?,
            3 => {
                out.put(&OWN)?;
                return Ok(None);
            }
            5 => out.put(&[0x1c, 0, 0, 0, 0, 0, 0, 0])?,
            _ => {
                out.put(&vec![0u8; out.capacity() as usize])?;
                out.put(&[0])?;
            }
        }
        Ok(Some(0))
    }

    fn plugin_control(&mut self, id: u64, args: Vec<PluginVal>) -> Result<Vec<PluginVal>> {
        match (id, args.as_slice()) {
            (CONTROL_MODE, [PluginVal::U64(mode)]) if *mode <= 5 => {
                self.mode = *mode;
                Ok(Vec::new())
            }
            (CONTROL_STREAM_REGISTRATION, _) => self
                .stream_registration
                .take()
                .map_or_else(|| Ok(Vec::new()), |r| r.map(|()| Vec::new())),
            _ => Err(Error::invalid_argument("mode 0..=5 expected")),
        }
    }
}

export_plugin!(Liar);
