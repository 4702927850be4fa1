//! A plugin whose fused frame routines (ABI 0.2.4) return invalid results
//! on request, for the runtime's negative tests (CQ-ROUTINE-29,
//! CQ-ROUTINE-30): the liar's counterpart for `send-frame` and
//! `receive-frame`. It registers an ack-eliciting frame and DEFINEs
//! `should-send-frame` (the would-build question), `send-frame`,
//! `parse-frame` (which makes the type known, CQ-RECV-1) and
//! `receive-frame`. Plugin-control `0x4d0001(mode)` picks the behaviour; 0
//! (the default) sends nothing.
//!
//! | mode | `send-frame` returns | `receive-frame` returns |
//! |---|---|---|
//! | 1 | bytes that do not start with its frame type, a tag | — |
//! | 2 | a CONNECTION_CLOSE frame (another frame than its own), a tag | — |
//! | 3 | its frame, one byte longer than the room | — |
//! | 4 | `[u64]`: a list of another shape | — |
//! | 5 | its frame, a tag and a `u64` where the description goes | — |
//! | 6 | its frame (type and one byte), a tag; three in all | `consumed` 1, the tag |
//! | 7 | as 6 | `consumed` one past the payload |
//! | 8 | as 6 | `err(invalid-argument)` |
//! | 9 | as 6 | `err(failed)` |
//! | 10 | as 6 | `[u64]`: a list of another shape |

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::{vec, vec::Vec};
use corequic_sdk::*;

/// The frame it sends (a type no stack knows).
const FRAME: u64 = 0x4c5a;
/// Plugin-control: set the mode (u64).
const CONTROL_MODE: u64 = 0x4d_0001;

#[derive(Default)]
struct FusedLiar {
    mode: u64,
    /// Valid frames sent (modes 6 to 10 send three, then stop).
    sent: u64,
}

impl FusedLiar {
    fn frame() -> Vec<u8> {
        let mut bytes = Vec::with_capacity(3);
        varint::encode(FRAME, &mut bytes);
        bytes.push(7);
        bytes
    }
}

impl Plugin for FusedLiar {
    fn manifest() -> Manifest {
        [routine::SHOULD_SEND_FRAME, routine::PARSE_FRAME]
            .into_iter()
            .fold(Manifest::new("fused-liar", "0.1.0"), |m, r| {
                m.bind(r, Anchor::Define, FRAME)
            })
            .fuse_frame_routines(FRAME)
            .control(CONTROL_MODE)
            .permission(permission::REGISTRATION)
    }

    fn init(&mut self) -> Result<()> {
        host::register_frame(FrameRegistration {
            frame_type: FRAME,
            position: SendPosition::End,
            ack_eliciting: true,
            in_flight: true,
        })?;
        host::enable();
        Ok(())
    }

    fn should_send_frame(&mut self, _: Anchor, _: u64, _: SendContext) -> Result<bool> {
        Ok(self.mode != 0 && self.sent < 3)
    }

    fn send_frame(&mut self, _: u64, ctx: SendContext) -> Result<Option<SentFrame>> {
        let frame = |bytes: Vec<u8>| {
            Some(SentFrame {
                bytes,
                tag: 1,
                description: None,
            })
        };
        Ok(match self.mode {
            0 => None,
            1 => frame(vec![0x40, 0x4c, 0x5b, 0]),
            2 => frame(vec![0x1c, 0, 0, 0, 0, 0, 0, 0]),
            3 => {
                let mut bytes = Self::frame();
                bytes.resize(ctx.room as usize + 1, 0);
                frame(bytes)
            }
            // Returned through `call_routine` below, which knows the lists.
            4 | 5 => None,
            _ if self.sent < 3 => {
                self.sent += 1;
                frame(Self::frame())
            }
            _ => None,
        })
    }

    fn parse_frame(&mut self, _: Anchor, _: u64, payload: &InBuf) -> Result<ParsedFrame> {
        payload.read(0, 1)?;
        Ok(ParsedFrame {
            frame: ExtFrame {
                frame_type: FRAME,
                tag: 1,
            },
            consumed: 1,
        })
    }

    fn receive_frame(&mut self, _: u64, payload: &[u8], _: RxContext) -> Result<ReceivedFrame> {
        let consumed = match self.mode {
            7 => payload.len() as u64 + 1,
            8 => return Err(Error::invalid_argument("a lie")),
            9 => return Err(Error::failed("a lie")),
            _ => 1,
        };
        Ok(ReceivedFrame {
            consumed,
            tag: 1,
            description: None,
        })
    }

    fn plugin_control(&mut self, id: u64, args: Vec<PluginVal>) -> Result<Vec<PluginVal>> {
        match (id, args.as_slice()) {
            (CONTROL_MODE, [PluginVal::U64(mode)]) if *mode <= 10 => {
                self.mode = *mode;
                Ok(Vec::new())
            }
            _ => Err(Error::invalid_argument("mode 0..=10 expected")),
        }
    }

    fn call_routine(
        &mut self,
        routine: RoutineId,
        anchor: Anchor,
        param: u64,
        args: Vec<PluginVal>,
    ) -> Result<Vec<PluginVal>> {
        // The lists no `SentFrame` or `ReceivedFrame` can make.
        match (routine, self.mode) {
            (routine::SEND_FRAME, 4) | (routine::RECEIVE_FRAME, 10) => {
                return Ok(vec![PluginVal::U64(1)]);
            }
            (routine::SEND_FRAME, 5) => {
                return Ok(vec![
                    PluginVal::Bytes(Self::frame()),
                    PluginVal::U64(1),
                    PluginVal::U64(2),
                ]);
            }
            _ => {}
        }
        dispatch_routine(self, routine, anchor, param, args)
    }
}

export_plugin!(
    FusedLiar,
    routines: [should_send_frame, parse_frame, plugin_control, call_routine]
);
