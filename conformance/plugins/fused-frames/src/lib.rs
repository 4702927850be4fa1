//! The conformance kit's fused-frames probe (ABI 0.2.4). Like DUMMY, it
//! negotiates its frame type with an empty transport parameter and then
//! sends one frame whenever none is in flight. It binds the separate frame
//! routines and the fused ones, `send-frame` and `receive-frame`, and each
//! path marks what it did, so that a peer and the log tell which one the
//! host called (CQ-ROUTINE-29, CQ-ROUTINE-30):
//!
//! - a frame is its type and one byte, the tag: 1 when `write-frame` wrote
//!   it, 2 when `send-frame` returned it;
//! - `sent` {`by`} is logged the first time each path sends a frame, and
//!   `received` {`by`, `tag`} the first time each path takes a frame of each
//!   tag;
//! - the description of a frame is `fused-frames via log-frame` from
//!   `log-frame`, `fused-frames via send-frame` and `fused-frames via
//!   receive-frame` from the fused routines;
//! - `check` {`what`, `result`} records, each logged once per result, say
//!   whether the fused routines got the context and payload the
//!   specification gives them.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use corequic_sdk::*;

/// The probe's frame type and transport parameter.
const FRAME: u64 = 0x6675;
const TP: u64 = 0x6675;
/// The tag, and only payload byte, of a frame each send path makes.
const TAG_WRITE_FRAME: u8 = 1;
const TAG_SEND_FRAME: u8 = 2;

fn register_frame() -> Result<()> {
    host::register_frame(FrameRegistration {
        frame_type: FRAME,
        position: SendPosition::AfterAck,
        ack_eliciting: true,
        in_flight: true,
    })
}

#[derive(Default)]
struct FusedFrames {
    in_flight: bool,
    /// Records already logged (`sent`, `received` and `check`), so that
    /// each is logged once.
    logged: Vec<String>,
}

impl FusedFrames {
    fn once(&mut self, key: String, message: &str, fields: &[(&str, PluginVal)]) {
        if self.logged.contains(&key) {
            return;
        }
        self.logged.push(key);
        let _ = host::log(LogLevel::Info, message, fields);
    }

    fn sent(&mut self, by: &str) {
        self.once(
            String::from("sent ") + by,
            "sent",
            &[("by", PluginVal::String(by.into()))],
        );
    }

    fn received(&mut self, by: &str, tag: u8) {
        self.once(
            String::from("received ") + by + &text::decimal(u64::from(tag)),
            "received",
            &[
                ("by", PluginVal::String(by.into())),
                ("tag", PluginVal::U64(u64::from(tag))),
            ],
        );
    }

    fn check(&mut self, what: &str, ok: bool) {
        let result = if ok { "ok" } else { "wrong" };
        self.once(
            String::from(what) + result,
            "check",
            &[
                ("what", PluginVal::String(what.into())),
                ("result", PluginVal::String(result.into())),
            ],
        );
    }

    fn frame(tag: u8) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(3);
        varint::encode(FRAME, &mut bytes);
        bytes.push(tag);
        bytes
    }

    fn reserve(&mut self) -> Result<()> {
        self.in_flight = true;
        host::unregister_frame(FRAME)
    }
}

impl Plugin for FusedFrames {
    fn manifest() -> Manifest {
        Manifest::new("fused-frames", "0.1.0")
            .define_transport_parameter(TP)
            .define_frame(FRAME)
            .fuse_frame_routines(FRAME)
            .permission(permission::REGISTRATION)
            .permission(permission::LOGGING)
    }

    fn init(&mut self) -> Result<()> {
        host::register_transport_parameter(TP)?;
        register_frame()
    }

    fn write_transport_parameter(&mut self, _: Anchor, _: u64, _: &OutBuf) -> Result<()> {
        Ok(())
    }

    fn decode_transport_parameter(&mut self, _: Anchor, _: u64, _: &InBuf) -> Result<()> {
        host::enable();
        Ok(())
    }

    fn should_send_frame(&mut self, _: Anchor, _: u64, ctx: SendContext) -> Result<bool> {
        Ok(!self.in_flight && ctx.packet_type == PacketType::OneRtt)
    }

    fn write_frame(
        &mut self,
        _: Anchor,
        _: u64,
        _: SendContext,
        out: &OutBuf,
    ) -> Result<Option<u64>> {
        out.put(&Self::frame(TAG_WRITE_FRAME))?;
        Ok(Some(u64::from(TAG_WRITE_FRAME)))
    }

    fn on_frame_reserved(&mut self, _: Anchor, _: ExtFrame, _: SendContext) -> Result<()> {
        self.sent("write-frame");
        self.reserve()
    }

    fn send_frame(&mut self, frame_type: u64, ctx: SendContext) -> Result<Option<SentFrame>> {
        self.check(
            "send-frame: the frame type and a 1-RTT packet of the application-data space with room for the frame",
            frame_type == FRAME
                && ctx.packet_type == PacketType::OneRtt
                && ctx.space == PnSpace::ApplicationData
                && ctx.position == SendPosition::AfterAck
                && ctx.room >= 3,
        );
        if self.in_flight {
            return Ok(None);
        }
        self.sent("send-frame");
        let _ = self.reserve();
        Ok(Some(SentFrame {
            bytes: Self::frame(TAG_SEND_FRAME),
            tag: u64::from(TAG_SEND_FRAME),
            description: Some("fused-frames via send-frame".into()),
        }))
    }

    fn notify_frame(&mut self, _: Anchor, _: ExtFrame, _: FrameOutcome) -> Result<()> {
        self.in_flight = false;
        register_frame()
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

    fn process_frame(&mut self, _: Anchor, frame: Frame, _: RxContext) -> Result<()> {
        let tag = frame.ext().map_or(0, |f| f.tag as u8);
        self.received("process-frame", tag);
        Ok(())
    }

    fn receive_frame(
        &mut self,
        frame_type: u64,
        payload: &[u8],
        ctx: RxContext,
    ) -> Result<ReceivedFrame> {
        self.check(
            "receive-frame: the frame type and a 1-RTT packet of the application-data space",
            frame_type == FRAME
                && ctx.packet_type == PacketType::OneRtt
                && ctx.space == PnSpace::ApplicationData,
        );
        let Some(&tag) = payload.first() else {
            return Err(Error::buffer_too_short(1));
        };
        self.check(
            "receive-frame: the payload starts after the frame type",
            tag == TAG_WRITE_FRAME || tag == TAG_SEND_FRAME,
        );
        self.received("receive-frame", tag);
        Ok(ReceivedFrame {
            consumed: 1,
            tag: u64::from(tag),
            description: Some("fused-frames via receive-frame".into()),
        })
    }

    fn log_frame(&mut self, _: Anchor, _: Frame) -> Result<String> {
        Ok("fused-frames via log-frame".into())
    }
}

export_plugin!(
    FusedFrames,
    routines: [define_transport_parameter, define_frame, call_routine]
);
