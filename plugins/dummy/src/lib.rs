//! DUMMY frame (Core QUIC paper, section VI-E).
//!
//! Negotiated with the empty transport parameter `0xAAAAAAAA`. Sends frame
//! `0x42` (a 1-byte counter) whenever none is in flight, so about once per
//! RTT. Every 4 DUMMY frames received it toggles the padding plugin through
//! its plugin-control `0x80001(bool)` — the first toggle disables padding.
//! Without a padding plugin the call fails cleanly and is logged.

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
    host::register_frame(FrameRegistration {
        frame_type: FRAME_DUMMY,
        position: SendPosition::AfterAck,
        ack_eliciting: true,
        in_flight: true,
    })
}

struct Dummy {
    in_flight: bool,
    counter: u8,
    received: u64,
    padding_on: bool,
}

impl Default for Dummy {
    fn default() -> Self {
        Dummy {
            in_flight: false,
            counter: 0,
            received: 0,
            padding_on: true,
        }
    }
}

impl Plugin for Dummy {
    fn manifest() -> Manifest {
        Manifest::new("dummy", "0.2.0")
            .define_transport_parameter(TP_DUMMY)
            .define_frame(FRAME_DUMMY)
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
        Ok(!self.in_flight && ctx.packet_type == PacketType::OneRtt)
    }

    fn write_frame(
        &mut self,
        _: Anchor,
        _: u64,
        _: SendContext,
        out: &OutBuf,
    ) -> Result<Option<u64>> {
        let mut bytes = Vec::with_capacity(FRAME_LEN);
        varint::encode(FRAME_DUMMY, &mut bytes);
        bytes.push(self.counter);
        out.put(&bytes)?;
        Ok(Some(u64::from(self.counter)))
    }

    fn on_frame_reserved(&mut self, _: Anchor, _: ExtFrame, _: SendContext) -> Result<()> {
        self.in_flight = true;
        self.counter = self.counter.wrapping_add(1);
        // Nothing to offer while the frame is in flight.
        host::unregister_frame(FRAME_DUMMY)
    }

    fn notify_frame(&mut self, _: Anchor, _: ExtFrame, _: FrameOutcome) -> Result<()> {
        // Acked or lost, the slot is free again; a lost DUMMY is not resent.
        self.in_flight = false;
        register_frame()
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

    fn log_frame(&mut self, _: Anchor, frame: Frame) -> Result<String> {
        match frame.ext() {
            Some(f) => Ok(String::from("DUMMY counter=") + &text::decimal(f.tag)),
            None => Err(Error::invalid_argument("not a DUMMY frame")),
        }
    }
}

export_plugin!(
    Dummy,
    routines: [define_transport_parameter, define_frame]
);
