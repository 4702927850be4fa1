//! A defining plugin (it DEFINEs transport parameter 0x6866) that arms a
//! timer in `init` and traps when it fires, [`FAULT_AFTER_NS`] later. On the
//! kit's delayed link of `limits.a-fault-during-the-handshake-reaches-the-peer`
//! a server's fault lands after its first flight and before the client's
//! reply: the client may have discarded its Initial keys, and the server
//! cannot know it. The close must reach the peer all the same (CQ-LIMIT-9,
//! RFC 9000 §10.2.3: a server sends it in Initial and Handshake packets).

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use corequic_sdk::*;

/// The transport parameter it DEFINEs, so that its fault closes the
/// connection (CQ-LIMIT-8). It is sent empty; peers ignore it.
const TP: u64 = 0x6866;
/// Its one timer.
const FAULT_TIMER: u64 = 1;
/// From `init` to the fault: the one-way delay of the case's link, so that a
/// server faults half a round trip after its first flight left.
pub const FAULT_AFTER_NS: u64 = 50_000_000;

#[derive(Default)]
struct HandshakeFault;

impl Plugin for HandshakeFault {
    fn manifest() -> Manifest {
        Manifest::new("handshake-fault", "0.2.0")
            .define_transport_parameter(TP)
            .permission(permission::REGISTRATION)
            .permission(permission::TIMERS)
    }

    fn init(&mut self) -> Result<()> {
        host::register_transport_parameter(TP)?;
        host::set_timer(FAULT_TIMER, host::now().saturating_add(FAULT_AFTER_NS))
    }

    fn write_transport_parameter(&mut self, _: Anchor, _: u64, _: &OutBuf) -> Result<()> {
        Ok(())
    }

    fn on_plugin_timeout(&mut self, _: u64, _: u64) -> Result<()> {
        trap()
    }
}

export_plugin!(HandshakeFault);
