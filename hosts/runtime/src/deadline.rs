//! The CPU deadline of one call into a plugin (CQ-LIMIT-2).
//!
//! wasmtime's epoch ticker wakes a check once the call's ticks have passed;
//! the check charges the call only for the CPU time of the thread running
//! it. On a loaded machine a thread can be off the CPU for longer than the
//! whole deadline, and a wall-clock budget would then fault a plugin that
//! did almost nothing.

use std::time::Duration;
use wasmtime::{Store, UpdateDeadline};

use crate::state::PluginState;

/// CPU time consumed so far by the calling thread.
#[cfg(unix)]
pub(crate) fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant
    // every supported unix provides.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return fallback_clock();
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// CPU time consumed so far by the calling thread (wall time where the
/// platform has no per-thread CPU clock).
#[cfg(not(unix))]
pub(crate) fn thread_cpu_time() -> Duration {
    fallback_clock()
}

/// A monotonic wall clock, for platforms without a thread CPU clock.
fn fallback_clock() -> Duration {
    use std::sync::OnceLock;
    use std::time::Instant;
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed()
}

/// Install the deadline check on a plugin's store: past the call's epoch
/// ticks, it interrupts the call if the thread has spent the whole budget on
/// the CPU since the call started, and otherwise looks again one tick later.
pub(crate) fn install(store: &mut Store<PluginState>, ticks: u64) {
    store.data_mut().call_started = thread_cpu_time();
    store.set_epoch_deadline(ticks);
    store.epoch_deadline_callback(|state| {
        let data = state.data();
        let used = thread_cpu_time().saturating_sub(data.call_started);
        Ok(if used >= data.call_deadline {
            UpdateDeadline::Interrupt
        } else {
            UpdateDeadline::Continue(1)
        })
    });
}

/// Start the clock of a new call on a store set up by [`install`].
pub(crate) fn start_call(store: &mut Store<PluginState>, ticks: u64) {
    store.data_mut().call_started = thread_cpu_time();
    store.set_epoch_deadline(ticks);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thread_clock_advances_with_work_and_not_with_sleep() {
        let start = thread_cpu_time();
        std::thread::sleep(Duration::from_millis(30));
        let slept = thread_cpu_time().saturating_sub(start);
        let mut x = 0u64;
        let busy_start = thread_cpu_time();
        while thread_cpu_time().saturating_sub(busy_start) < Duration::from_millis(5) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(x > 0);
        // Sleeping is (almost) free; the busy loop was charged.
        assert!(slept < Duration::from_millis(20), "slept {slept:?}");
    }
}
