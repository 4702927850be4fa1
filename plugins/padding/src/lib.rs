//! Privacy padding (Core QUIC paper, section VI-B).
//!
//! Pads every 1-RTT packet to the path MTU with PADDING and, after each such
//! packet, halts sending for a random 0–10 ms; a plugin timer resumes it. A
//! packet the host already filled (no room left) is MTU-sized as it is, and
//! is followed by a halt too, so the timing is hidden whatever the stack's
//! packet filling.
//! Needs no negotiation, so one side may load it alone. Plugin-control
//! `0x80001(bool)` turns it on or off at run time.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::{vec, vec::Vec};
use corequic_sdk::*;

/// PADDING, offered at the end of every packet.
const PADDING: u64 = 0x00;
/// plugin-control: enable (`true`) or disable (`false`) padding.
const CONTROL_TOGGLE: u64 = 0x80001;
/// The timer that ends a halt.
const RESUME_TIMER: u64 = 0;
/// Upper bound of the random delay after each packet.
const MAX_DELAY_NS: u64 = 10_000_000;

#[derive(Default)]
struct Padding {
    disabled: bool,
    halted: bool,
}

impl Padding {
    /// Halt sending after the packet being built, for a random 0–10 ms.
    fn halt(&mut self) -> Result<()> {
        let delay = host::random_u64()? % (MAX_DELAY_NS + 1);
        host::set(field::SENDING_HALTED, PluginVal::Bool(true))?;
        self.halted = true;
        host::set_timer(RESUME_TIMER, host::now().saturating_add(delay))
    }

    fn resume(&mut self) -> Result<()> {
        self.halted = false;
        host::set(field::SENDING_HALTED, PluginVal::Bool(false))
    }
}

impl Plugin for Padding {
    fn manifest() -> Manifest {
        let send = [
            routine::SHOULD_SEND_FRAME,
            routine::WRITE_FRAME,
            routine::ON_FRAME_RESERVED,
        ];
        send.into_iter()
            .fold(Manifest::new("padding", "0.2.0"), |m, r| {
                m.bind(r, Anchor::Define, PADDING)
            })
            .control(CONTROL_TOGGLE)
            .writes(&[field::SENDING_HALTED])
            .permission(permission::REGISTRATION)
            .permission(permission::TIMERS)
            .permission(permission::RANDOMNESS)
    }

    fn init(&mut self) -> Result<()> {
        host::register_frame(FrameRegistration {
            frame_type: PADDING,
            position: SendPosition::End,
            ack_eliciting: false,
            // Padding follows the packet: a padded ACK-only packet elicits
            // no acknowledgement, so counting it in flight would fill the
            // congestion window with bytes the peer has no reason to
            // acknowledge soon, and the host could then only send its ACKs
            // unpadded (CQ-SEND-10). Packets with data are in flight anyway.
            in_flight: false,
        })?;
        // No negotiation: everything runs from the start.
        host::enable();
        Ok(())
    }

    fn should_send_frame(&mut self, _: Anchor, _: u64, ctx: SendContext) -> Result<bool> {
        if self.disabled || ctx.packet_type != PacketType::OneRtt {
            return Ok(false);
        }
        if ctx.room == 0 {
            // Already full-sized: nothing to pad, but the delay still applies.
            self.halt()?;
            return Ok(false);
        }
        Ok(true)
    }

    fn write_frame(
        &mut self,
        _: Anchor,
        _: u64,
        ctx: SendContext,
        out: &OutBuf,
    ) -> Result<Option<u64>> {
        // All the room left, as a run of PADDING frames; the tag is their
        // number of bytes.
        out.put_zeros(ctx.room)?;
        Ok(Some(ctx.room))
    }

    fn on_frame_reserved(&mut self, _: Anchor, _: ExtFrame, _: SendContext) -> Result<()> {
        self.halt()
    }

    fn on_plugin_timeout(&mut self, _: u64, _: u64) -> Result<()> {
        self.resume()
    }

    fn plugin_control(&mut self, id: u64, args: Vec<PluginVal>) -> Result<Vec<PluginVal>> {
        match (id, args.as_slice()) {
            (CONTROL_TOGGLE, [PluginVal::Bool(on)]) => {
                self.disabled = !on;
                if self.disabled && self.halted {
                    let _ = host::cancel_timer(RESUME_TIMER);
                    self.resume()?;
                }
                Ok(vec![PluginVal::Bool(*on)])
            }
            (CONTROL_TOGGLE, _) => Err(Error::invalid_argument("expected one bool")),
            _ => Err(Error::not_found("unknown plugin-control id")),
        }
    }
}

export_plugin!(
    Padding,
    routines: [
        should_send_frame,
        write_frame,
        on_frame_reserved,
        plugin_control,
    ]
);
