//! The conformance kit's one-in-flight probe (ABI 0.2.5). Like DUMMY, it
//! negotiates its frame type with an empty transport parameter, and it
//! registers the frame with `register-frame-one-in-flight` (CQ-API-22). It
//! answers yes whenever the host asks whether to send the frame in a 1-RTT
//! packet, so that only the host's hold keeps a second frame from going out
//! while one is in flight, and it counts the frames sent and the outcomes
//! `notify-frame` reports:
//!
//! - `check` {`what`, `result`} records, each logged once per result:
//!   whether the host offered the frame while one was in flight (`wrong`),
//!   whether `unregister-frame` removed the registration while it was held
//!   (the second frame's), and whether `init`'s registrations of a standard
//!   frame (PING) and of a frame that is not ack-eliciting were refused with
//!   `invalid-argument`;
//! - `sent` {`count`} is logged once, when the third frame is sent: the
//!   host offered the registration again after the first frames' fate was
//!   known.
//!
//! After unregistering during the second frame's flight, it registers again
//! (one in flight) when that frame's outcome arrives.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use corequic_sdk::*;

/// The probe's frame type and transport parameter.
const FRAME: u64 = 0x6f31;
const TP: u64 = 0x6f31;
/// The frame sent while the registration is held and then removed.
const UNREGISTERED_WHILE_HELD: u64 = 2;
/// Frames sent when the `sent` record is logged.
const SENT_RECORD_AT: u64 = 3;

fn register() -> Result<()> {
    host::register_frame_one_in_flight(registration(FRAME, true))
}

fn registration(frame_type: u64, ack_eliciting: bool) -> FrameRegistration {
    FrameRegistration {
        frame_type,
        position: SendPosition::AfterAck,
        ack_eliciting,
        in_flight: true,
    }
}

/// Whether `result` is an error of kind `invalid-argument`.
fn invalid_argument(result: Result<()>) -> bool {
    result.is_err_and(|e| e.kind == error_kind::INVALID_ARGUMENT)
}

#[derive(Default)]
struct OneInFlight {
    /// Frames committed to packets (`on-frame-reserved`).
    sent: u64,
    /// Their outcomes so far (`notify-frame`).
    outcomes: u64,
    /// `check` records already logged, so that each is logged once.
    logged: Vec<String>,
}

impl OneInFlight {
    fn check(&mut self, what: &str, ok: bool) {
        let result = if ok { "ok" } else { "wrong" };
        let key = String::from(what) + result;
        if self.logged.contains(&key) {
            return;
        }
        self.logged.push(key);
        let _ = host::log(
            LogLevel::Info,
            "check",
            &[
                ("what", PluginVal::String(what.into())),
                ("result", PluginVal::String(result.into())),
            ],
        );
    }
}

impl Plugin for OneInFlight {
    fn manifest() -> Manifest {
        Manifest::new("one-in-flight", "0.1.0")
            .define_transport_parameter(TP)
            .define_frame(FRAME)
            .permission(permission::REGISTRATION)
            .permission(permission::LOGGING)
    }

    fn init(&mut self) -> Result<()> {
        host::register_transport_parameter(TP)?;
        let ping = host::register_frame_one_in_flight(registration(0x01, true));
        self.check(
            "a standard frame is refused with invalid-argument",
            invalid_argument(ping),
        );
        let silent = host::register_frame_one_in_flight(registration(FRAME, false));
        self.check(
            "a frame that is not ack-eliciting is refused with invalid-argument",
            invalid_argument(silent),
        );
        register()
    }

    fn write_transport_parameter(&mut self, _: Anchor, _: u64, _: &OutBuf) -> Result<()> {
        Ok(())
    }

    fn decode_transport_parameter(&mut self, _: Anchor, _: u64, _: &InBuf) -> Result<()> {
        host::enable();
        Ok(())
    }

    fn should_send_frame(&mut self, _: Anchor, _: u64, ctx: SendContext) -> Result<bool> {
        self.check(
            "the frame is offered only while none is in flight",
            self.sent == self.outcomes,
        );
        Ok(ctx.packet_type == PacketType::OneRtt)
    }

    fn write_frame(
        &mut self,
        _: Anchor,
        _: u64,
        _: SendContext,
        out: &OutBuf,
    ) -> Result<Option<u64>> {
        let tag = self.sent + 1;
        let mut bytes = Vec::with_capacity(3);
        varint::encode(FRAME, &mut bytes);
        bytes.push(tag as u8);
        out.put(&bytes)?;
        Ok(Some(tag))
    }

    fn on_frame_reserved(&mut self, _: Anchor, _: ExtFrame, _: SendContext) -> Result<()> {
        self.sent += 1;
        if self.sent == UNREGISTERED_WHILE_HELD {
            self.check(
                "unregister-frame removes a held registration",
                host::unregister_frame(FRAME).is_ok(),
            );
        }
        if self.sent == SENT_RECORD_AT {
            let _ = host::log(
                LogLevel::Info,
                "sent",
                &[("count", PluginVal::U64(self.sent))],
            );
        }
        Ok(())
    }

    fn notify_frame(&mut self, _: Anchor, frame: ExtFrame, _: FrameOutcome) -> Result<()> {
        self.outcomes += 1;
        if frame.tag == UNREGISTERED_WHILE_HELD {
            register()?;
        }
        Ok(())
    }

    fn parse_frame(&mut self, _: Anchor, _: u64, payload: &InBuf) -> Result<ParsedFrame> {
        let tag = payload.read(0, 1)?[0];
        Ok(ParsedFrame {
            frame: ExtFrame {
                frame_type: FRAME,
                tag: u64::from(tag),
            },
            consumed: 1,
        })
    }

    fn process_frame(&mut self, _: Anchor, _: Frame, _: RxContext) -> Result<()> {
        Ok(())
    }

    fn log_frame(&mut self, _: Anchor, frame: Frame) -> Result<String> {
        let tag = frame.ext().map_or(0, |f| f.tag);
        Ok(String::from("one-in-flight ") + &text::decimal(tag))
    }
}

export_plugin!(
    OneInFlight,
    routines: [define_transport_parameter, define_frame]
);
