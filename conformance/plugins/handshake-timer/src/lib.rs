//! Arms a timer in `init`, [`TIMER_AFTER_NS`] later, and logs how late it
//! fired. On the kit's delayed link of
//! `routines.a-timer-armed-in-init-fires-during-the-handshake` the handshake
//! is still in flight then, and the host must handle the timeout no later
//! than its deadline all the same (CQ-TIMER-4). It changes nothing else.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use corequic_sdk::*;

/// Its one timer.
const TIMER: u64 = 1;
/// From `init` to the deadline: less than the link's round trip, so that a
/// client's handshake is still in flight.
pub const TIMER_AFTER_NS: u64 = 50_000_000;

#[derive(Default)]
struct HandshakeTimer {
    /// The timer's deadline.
    deadline: u64,
}

impl Plugin for HandshakeTimer {
    fn manifest() -> Manifest {
        Manifest::new("handshake-timer", "0.2.0")
            .permission(permission::TIMERS)
            .permission(permission::LOGGING)
    }

    fn init(&mut self) -> Result<()> {
        self.deadline = host::now().saturating_add(TIMER_AFTER_NS);
        host::set_timer(TIMER, self.deadline)
    }

    fn on_plugin_timeout(&mut self, _: u64, now: u64) -> Result<()> {
        host::log(
            LogLevel::Info,
            "timer fired",
            &[(
                "late-ms",
                PluginVal::U64(now.saturating_sub(self.deadline) / 1_000_000),
            )],
        )
    }
}

export_plugin!(HandshakeTimer);
