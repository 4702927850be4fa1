//! A plugin whose frame registration lies about its length, for the hosts'
//! negative tests (CQ-ROUTINE-12, CQ-ROUTINE-13). It
//! registers an ack-eliciting frame, so the host builds packets for it, but
//! no frame ever reaches a packet: plugin-control `0x4c0001(mode)` picks the
//! lie, 0 (the default) sends nothing.
//!
//! | mode | `frame-wire-len` | `write-frame` writes |
//! |---|---|---|
//! | 1 | the room + 1 | — |
//! | 2 | 8 | 4 bytes (a short write) |
//! | 3 | 0 | — |
//! | 4 | 8 | as many bytes as the buffer takes, then more (a long write) |
//! | 5 | 8 | 8 bytes of a CONNECTION_CLOSE frame (another frame than its own) |
//!
//! Its `init` also tries to register STREAM (0x08), a standard frame type;
//! plugin-control `0x4c0002` returns what that registration returned.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::{string::String, vec, vec::Vec};
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
    room: u64,
    stream_registration: Option<Result<()>>,
}

impl Plugin for Liar {
    fn manifest() -> Manifest {
        [
            Routine::ShouldSendFrame,
            Routine::PrepareFrame,
            Routine::FrameWireLen,
            Routine::WriteFrame,
        ]
        .into_iter()
        .fold(Manifest::new("liar", "0.1.0"), |m, r| {
            m.bind(r, Anchor::Define, FRAME_LIAR)
        })
        .control(CONTROL_MODE)
        .control(CONTROL_STREAM_REGISTRATION)
        .permission(Permission::Registration)
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

    fn should_send_frame(&mut self, _: Anchor, _: u64, ctx: SendContext) -> Result<bool> {
        self.room = ctx.room;
        Ok(self.mode != 0)
    }

    fn prepare_frame(
        &mut self,
        _: Anchor,
        frame_type: u64,
        _: SendContext,
    ) -> Result<Option<ExtFrame>> {
        Ok(Some(ExtFrame { frame_type, tag: 0 }))
    }

    fn frame_wire_len(&mut self, _: Anchor, _: ExtFrame) -> Result<u64> {
        Ok(match self.mode {
            1 => self.room + 1,
            3 => 0,
            _ => 8,
        })
    }

    fn write_frame(&mut self, _: Anchor, _: ExtFrame, out: &OutBuf) -> Result<()> {
        match self.mode {
            2 => out.put(&[0x40, 0x4c, 0x59, 0]),
            5 => out.put(&[0x1c, 0, 0, 0, 0, 0, 0, 0]),
            _ => {
                out.put(&vec![0u8; out.capacity() as usize])?;
                out.put(&[0])
            }
        }
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
            _ => Err(Error::InvalidArgument(String::from("mode 0..=5 expected"))),
        }
    }
}

export_plugin!(Liar);
