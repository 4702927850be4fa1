//! The CPU deadline of one call into a plugin (CQ-LIMIT-2).
//!
//! wasmtime's epoch ticker wakes a check once the call's ticks have passed;
//! the check charges the call only for the CPU time of the thread running
//! it. On a loaded machine a thread can be off the CPU for longer than the
//! whole deadline, and a wall-clock budget would then fault a plugin that
//! did almost nothing.
//!
//! The thread's CPU clock is not only the plugin's work either: the kernel
//! charges the running thread for interrupts it serves and, in a virtual
//! machine, for time the hypervisor took the CPU away (gaps of several
//! milliseconds between two consecutive reads are measurable on a busy
//! 2-core VM). A call is therefore interrupted only once it has kept running
//! for half a tick of CPU time after a check found it past its budget: a
//! trivial call that was charged a burst it did not use has returned long
//! before that second check, a looping one has not. A check counts a call
//! past its budget half a tick early, so that a loop found just short of it
//! at the check after 10 ms of wall time is not confirmed only two ticks
//! later, past the 12 ms bound.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::Thread;
use std::time::{Duration, Instant};
use wasmtime::{Engine, Store, UpdateDeadline};

use crate::state::PluginState;

/// How many ticks the ticker sleeps while no deadline check runs: it then
/// wakes 200 times a second instead of 1,000 (each wake-up costs a timer
/// interrupt and two context switches, on a machine whose cores run the
/// stack). The epochs count the wall time of the whole sleep, and a call's
/// first check comes after half its deadline (`Runtime::deadline_ticks`):
/// within 10 ms even if the ticker idled, and every tick from then on, so
/// the check that finds a call past its budget is still a tick apart from
/// the one that interrupts it.
const IDLE_TICKS: u32 = 5;

/// How a runtime's deadline checks reach its epoch ticker. Only the checks
/// use it, so a call that returns before its first check writes nothing
/// shared.
#[derive(Clone)]
pub(crate) struct Ticker {
    /// A check ran since the ticker last looked.
    checking: Arc<AtomicBool>,
    thread: Thread,
}

impl Ticker {
    /// Start the epoch ticker of `engine`, until `stop`: one epoch per
    /// `tick` of wall time, at every tick while deadline checks run and
    /// every [`IDLE_TICKS`] ticks otherwise.
    pub(crate) fn start(
        engine: Engine,
        tick: Duration,
        stop: Arc<AtomicBool>,
    ) -> std::io::Result<Ticker> {
        let checking = Arc::new(AtomicBool::new(false));
        let seen = checking.clone();
        let thread = std::thread::Builder::new()
            .name("corequic-epoch".into())
            .spawn(move || {
                let idle = tick * IDLE_TICKS;
                let mut counted = Instant::now();
                let mut last_check: Option<Instant> = None;
                while !stop.load(Ordering::Relaxed) {
                    // Every tick until an idle period passes without a check:
                    // a check may come just after this look.
                    if seen.swap(false, Ordering::Relaxed) {
                        last_check = Some(Instant::now());
                    }
                    let fast = last_check.is_some_and(|at| at.elapsed() < idle);
                    std::thread::park_timeout(if fast { tick } else { idle });
                    // Woken early by a check, no tick may have passed yet.
                    let ticks = counted.elapsed().as_nanos() / tick.as_nanos();
                    for _ in 0..ticks {
                        engine.increment_epoch();
                    }
                    counted += tick * u32::try_from(ticks).unwrap_or(u32::MAX);
                }
            })?
            .thread()
            .clone();
        Ok(Ticker { checking, thread })
    }

    /// A check ran: tick every period from now on, starting at once.
    fn checked(&self) {
        self.checking.store(true, Ordering::Relaxed);
        self.thread.unpark();
    }
}

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
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed()
}

/// Install the deadline check on a plugin's store: past the call's epoch
/// ticks, it interrupts the call once the thread has spent the whole budget
/// on the CPU since the call started and then half a tick more since an
/// earlier check saw that (see the module docs); otherwise it looks again
/// one tick later.
pub(crate) fn install(store: &mut Store<PluginState>, ticks: u64, ticker: &Ticker) {
    start_call(store, ticks);
    let ticker = ticker.clone();
    store.epoch_deadline_callback(move |mut state| {
        ticker.checked();
        let now = thread_cpu_time();
        let data = state.data_mut();
        Ok(
            match check(
                data.call_started,
                data.over_deadline_at,
                now,
                data.call_deadline,
                data.call_tick,
            ) {
                Check::Within => UpdateDeadline::Continue(1),
                Check::Over => {
                    data.over_deadline_at = Some(now);
                    UpdateDeadline::Continue(1)
                }
                Check::Interrupt => {
                    data.interrupted_after = Some(now.saturating_sub(data.call_started));
                    UpdateDeadline::Interrupt
                }
            },
        )
    });
}

/// What one deadline check decides.
#[derive(Debug, PartialEq, Eq)]
enum Check {
    /// The call is within its budget.
    Within,
    /// The call is past its budget for the first time; confirm at a later
    /// check that it keeps running.
    Over,
    /// The call is past its budget and kept running: interrupt it.
    Interrupt,
}

/// Decide one check from CPU times of the calling thread: when the call
/// started, when a check first found it over budget, and now.
fn check(
    started: Duration,
    over_at: Option<Duration>,
    now: Duration,
    deadline: Duration,
    tick: Duration,
) -> Check {
    if now.saturating_sub(started) + tick / 2 < deadline {
        return Check::Within;
    }
    match over_at {
        Some(at) if now.saturating_sub(at) >= tick / 2 => Check::Interrupt,
        Some(_) => Check::Within,
        None => Check::Over,
    }
}

/// The thread's CPU time for the start of a call, read again only when the
/// last reading on this thread is half a tick of wall time old. Reading the
/// thread CPU clock is a system call (about half a microsecond on a 2-core
/// VM: more than a whole plugin call), and an older reading only charges the
/// call with CPU time the thread spent before it started, less than the
/// wall time since that reading: less than half a tick. A check first finds
/// a call over budget once it is charged the deadline less half a tick, and
/// interrupts it half a tick of CPU time later, so no call is interrupted
/// before it has itself used the deadline less half a tick (CQ-LIMIT-2
/// allows one tick less).
fn call_start_cpu_time(tick: Duration) -> Duration {
    use std::cell::Cell;
    thread_local! {
        static LAST: Cell<Option<(Instant, Duration)>> = const { Cell::new(None) };
    }
    let now = Instant::now();
    LAST.with(|last| match last.get() {
        Some((at, cpu)) if now.saturating_duration_since(at) < tick / 2 => cpu,
        _ => {
            let cpu = thread_cpu_time();
            last.set(Some((now, cpu)));
            cpu
        }
    })
}

/// Start the clock of a new call on a store set up by [`install`].
pub(crate) fn start_call(store: &mut Store<PluginState>, ticks: u64) {
    let data = store.data_mut();
    data.call_started = call_start_cpu_time(data.call_tick);
    data.over_deadline_at = None;
    data.interrupted_after = None;
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

    const MS: Duration = Duration::from_millis(1);

    fn burn_cpu(amount: Duration) {
        let start = thread_cpu_time();
        let mut x = 0u64;
        while thread_cpu_time().saturating_sub(start) < amount {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    }

    #[test]
    fn a_call_start_reading_is_reused_for_half_a_tick_and_never_ahead() {
        let tick = 400 * MS;
        let first = call_start_cpu_time(tick);
        burn_cpu(2 * MS);
        // Within half a tick of wall time: the same reading, a lower bound.
        let again = call_start_cpu_time(tick);
        assert_eq!(first, again);
        assert!(again + 2 * MS <= thread_cpu_time());
        // Half a tick later a new reading, which includes the work.
        std::thread::sleep(tick / 2);
        let later = call_start_cpu_time(tick);
        assert!(later >= first + 2 * MS, "{first:?} then {later:?}");
        assert!(later <= thread_cpu_time());
    }

    #[test]
    fn a_call_within_its_budget_is_never_interrupted() {
        assert_eq!(check(MS, None, 10 * MS, 10 * MS, MS), Check::Within);
        assert_eq!(check(MS, None, 5 * MS, 10 * MS, MS), Check::Within);
    }

    #[test]
    fn a_burst_charged_to_a_call_is_confirmed_before_interrupting() {
        // First seen past the budget: not yet interrupted.
        assert_eq!(
            check(Duration::ZERO, None, 12 * MS, 10 * MS, MS),
            Check::Over
        );
        // A later check with less than half a tick of progress since.
        let at = Some(12 * MS);
        let little = 12 * MS + MS / 4;
        assert_eq!(
            check(Duration::ZERO, at, little, 10 * MS, MS),
            Check::Within
        );
        // Still running half a tick later: interrupted.
        assert_eq!(
            check(Duration::ZERO, at, 12 * MS + MS / 2, 10 * MS, MS),
            Check::Interrupt
        );
    }

    #[test]
    fn a_call_half_a_tick_short_of_its_budget_is_past_it() {
        let short = 10 * MS - MS / 2;
        assert_eq!(check(Duration::ZERO, None, short, 10 * MS, MS), Check::Over);
        assert_eq!(
            check(Duration::ZERO, None, short - MS / 10, 10 * MS, MS),
            Check::Within
        );
    }

    #[test]
    fn a_looping_call_is_interrupted_within_the_deadline_plus_a_tick() {
        // Checks one tick apart, from the deadline on (CQ-LIMIT-2).
        let first = check(Duration::ZERO, None, 10 * MS, 10 * MS, MS);
        assert_eq!(first, Check::Over);
        let second = check(Duration::ZERO, Some(10 * MS), 11 * MS, 10 * MS, MS);
        assert_eq!(second, Check::Interrupt);
    }
}
