//! DUMMY frame (Core QUIC paper, section VI-E).
//!
//! Negotiated with the empty transport parameter `0xAAAAAAAA`. Sends frame
//! `0x42` (a 1-byte counter) whenever none is in flight, so about once per
//! RTT: it registers the frame with `register-frame-one-in-flight` (ABI
//! 0.2.5), so the host stops offering it while one is in flight and offers
//! it again once that one is acknowledged or lost, with no call to DUMMY.
//! Every 4 DUMMY frames received it toggles the padding plugin through its
//! plugin-control `0x80001(bool)` — the first toggle disables padding.
//! Without a padding plugin the call fails cleanly and is logged.
//!
//! A frame per round trip is the plugin's whole traffic, so it also binds
//! the fused frame routines of ABI 0.2.4: `send-frame` and `receive-frame`
//! do in one call each what the separate routines do in four (should-send,
//! write, reserved, log) and three (parse, process, log). The separate
//! routines stay: the host still asks `should-send-frame` whether to build
//! a packet at all, and uses them when another plugin observes them.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::{string::String, vec::Vec};
use corequic_sdk::*;

const TP_DUMMY: u64 = 0xAAAA_AAAA;
const FRAME_DUMMY: u64 = 0x42;
const PADDING_TOGGLE: u64 = 0x80001;
/// Frame type (2-byte varint) plus the counter byte.
const FRAME_LEN: usize = 3;

fn register_frame() -> Result<()> {
    host::register_frame_one_in_flight(FrameRegistration {
        frame_type: FRAME_DUMMY,
        position: SendPosition::AfterAck,
        ack_eliciting: true,
        in_flight: true,
    })
}

struct Dummy {
    counter: u8,
    received: u64,
    padding_on: bool,
}

impl Default for Dummy {
    fn default() -> Self {
        Dummy {
            counter: 0,
            received: 0,
            padding_on: true,
        }
    }
}

impl Dummy {
    /// Whether a DUMMY frame goes into this packet: the host offers the
    /// frame only while none is in flight, and only 1-RTT packets carry it.
    fn wants_to_send(ctx: &SendContext) -> bool {
        ctx.packet_type == PacketType::OneRtt
    }

    /// The frame: its type, then the counter.
    fn frame_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(FRAME_LEN);
        varint::encode(FRAME_DUMMY, &mut bytes);
        bytes.push(self.counter);
        bytes
    }

    /// The frame is in a packet being sent: the next one counts one more.
    /// The host holds the registration until this one is acknowledged or
    /// lost; a lost DUMMY is not resent.
    fn reserved(&mut self) {
        self.counter = self.counter.wrapping_add(1);
    }

    /// A DUMMY frame arrived: every fourth toggles the padding plugin.
    fn received(&mut self) -> Result<()> {
        self.received += 1;
        if !self.received.is_multiple_of(4) {
            return Ok(());
        }
        self.padding_on = !self.padding_on;
        match host::call_plugin_control(PADDING_TOGGLE, &[PluginVal::Bool(self.padding_on)]) {
            Ok(_) => host::log(
                LogLevel::Info,
                "padding toggled",
                &[
                    ("padding", PluginVal::Bool(self.padding_on)),
                    ("received", PluginVal::U64(self.received)),
                ],
            ),
            Err(e) => host::log(
                LogLevel::Info,
                "padding not available",
                &[("error", PluginVal::String(text::error_kind(&e).into()))],
            ),
        }
    }

    fn describe(counter: u64) -> String {
        String::from("DUMMY counter=") + &text::decimal(counter)
    }
}

impl Plugin for Dummy {
    fn manifest() -> Manifest {
        Manifest::new("dummy", "0.2.0")
            .define_transport_parameter(TP_DUMMY)
            .define_frame_one_in_flight(FRAME_DUMMY)
            .fuse_frame_routines(FRAME_DUMMY)
            .permission(permission::REGISTRATION)
            .permission(permission::PLUGIN_CONTROL)
            .permission(permission::LOGGING)
    }

    fn init(&mut self) -> Result<()> {
        host::register_transport_parameter(TP_DUMMY)?;
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
        Ok(Self::wants_to_send(&ctx))
    }

    fn write_frame(
        &mut self,
        _: Anchor,
        _: u64,
        _: SendContext,
        out: &OutBuf,
    ) -> Result<Option<u64>> {
        out.put(&self.frame_bytes())?;
        Ok(Some(u64::from(self.counter)))
    }

    fn on_frame_reserved(&mut self, _: Anchor, _: ExtFrame, _: SendContext) -> Result<()> {
        self.reserved();
        Ok(())
    }

    fn send_frame(&mut self, _: u64, ctx: SendContext) -> Result<Option<SentFrame>> {
        if !Self::wants_to_send(&ctx) {
            return Ok(None);
        }
        let tag = u64::from(self.counter);
        let frame = SentFrame {
            bytes: self.frame_bytes(),
            tag,
            description: Some(Self::describe(tag)),
        };
        // Returned, the frame is committed: it is reserved now.
        self.reserved();
        Ok(Some(frame))
    }

    fn parse_frame(&mut self, _: Anchor, _: u64, payload: &InBuf) -> Result<ParsedFrame> {
        let counter = payload.read(0, 1)?[0];
        Ok(ParsedFrame {
            frame: ExtFrame {
                frame_type: FRAME_DUMMY,
                tag: u64::from(counter),
            },
            consumed: 1,
        })
    }

    fn process_frame(&mut self, _: Anchor, _: Frame, _: RxContext) -> Result<()> {
        self.received()
    }

    fn receive_frame(&mut self, _: u64, payload: &[u8], _: RxContext) -> Result<ReceivedFrame> {
        let Some(&counter) = payload.first() else {
            return Err(Error::buffer_too_short(1));
        };
        self.received()?;
        let tag = u64::from(counter);
        Ok(ReceivedFrame {
            consumed: 1,
            tag,
            description: Some(Self::describe(tag)),
        })
    }

    fn log_frame(&mut self, _: Anchor, frame: Frame) -> Result<String> {
        match frame.ext() {
            Some(f) => Ok(Self::describe(f.tag)),
            None => Err(Error::invalid_argument("not a DUMMY frame")),
        }
    }
}

export_plugin!(
    Dummy,
    routines: [define_transport_parameter, define_frame_one_in_flight, call_routine]
);
