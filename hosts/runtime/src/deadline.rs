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
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};
use std::thread::Thread;
use std::time::{Duration, Instant};
use wasmtime::{Engine, Store, UpdateDeadline};

use crate::state::PluginState;

/// How many ticks the ticker idles between wake-ups while no checked call
/// runs (and until it sleeps until a call starts): it then wakes 200 times
/// a second instead of 1,000 (each wake-up costs a timer
/// interrupt and two context switches, on a machine whose cores run the
/// stack). The epochs count the wall time of the whole sleep, and a call's
/// first check comes after half its deadline (`Ticker::first_check_ticks`):
/// within 10 ms even if the ticker idled, and every tick from then on, so
/// the check that finds a call past its budget is still a tick apart from
/// the one that interrupts it.
const IDLE_TICKS: u32 = 5;

/// The most idle periods the ticker stays awake before it tries to sleep
/// until a call starts (one second at the default tick). It starts at one
/// period and doubles each time a call cut such a sleep short within a
/// period: while calls come that often, sleeping would only move the
/// wake-up onto a calling thread, as a system call.
const MAX_LINGER: u32 = 200;

/// What the epoch ticker and the calls into plugins share.
struct Shared {
    /// The ticker sleeps until a call starts: no epoch moves meanwhile.
    asleep: AtomicBool,
    /// Calls that a deadline check has seen and that have not returned.
    /// While there is one, the ticker ticks every period: the check's next
    /// deadline is one tick away.
    checked_calls: AtomicUsize,
    /// The runtime is dropped.
    stop: AtomicBool,
    /// Sleeps until a call started, so far (diagnostics and tests).
    sleeps: AtomicU64,
    /// Epochs the ticker added, so far (tests).
    epochs: AtomicU64,
}

/// A runtime's epoch ticker: a thread that moves the engine's epoch on, one
/// epoch per tick of wall time, so that calls reach their deadline checks.
///
/// - While a checked call runs (one that has reached its first check), it
///   ticks every period.
/// - Otherwise it ticks every [`IDLE_TICKS`] periods.
/// - Once it has idled long enough, it sleeps until a call starts, and so
///   does not wake at all while the process calls no plugin.
///
/// Before it sleeps, it moves the epoch on by a whole first-check deadline,
/// so that every call that started earlier reaches its check at once, and
/// the check wakes it. A call that starts later sets its deadline first and
/// then sees that the ticker sleeps, and wakes it (see [`start_call`]). A
/// call costs no shared write either way; only a call that finds the ticker
/// asleep makes a system call, to wake it.
#[derive(Clone)]
pub(crate) struct Ticker {
    shared: Arc<Shared>,
    thread: Thread,
    /// Epoch ticks before a call's first check (the most any call waits).
    pub(crate) first_check_ticks: u64,
}

impl Ticker {
    /// Start the epoch ticker of `engine`: one epoch per `tick` of wall
    /// time. `first_check_ticks` is the most ticks any call waits for its
    /// first check.
    pub(crate) fn start(
        engine: Engine,
        tick: Duration,
        first_check_ticks: u64,
    ) -> std::io::Result<Ticker> {
        let shared = Arc::new(Shared {
            asleep: AtomicBool::new(false),
            checked_calls: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            sleeps: AtomicU64::new(0),
            epochs: AtomicU64::new(0),
        });
        let state = shared.clone();
        let thread = std::thread::Builder::new()
            .name("corequic-epoch".into())
            .spawn(move || tick_until_stopped(&engine, &state, tick, first_check_ticks))?
            .thread()
            .clone();
        Ok(Ticker {
            shared,
            thread,
            first_check_ticks,
        })
    }

    /// Stop the ticker thread (the runtime is dropped).
    pub(crate) fn stop(&self) {
        self.shared.stop.store(true, Ordering::Release);
        self.thread.unpark();
    }

    /// The ticker sleeps until a call starts.
    pub(crate) fn asleep(&self) -> bool {
        self.shared.asleep.load(Ordering::Acquire)
    }

    /// A call starts and found the ticker asleep: wake it (one caller does).
    #[cold]
    fn wake(&self) {
        if self.shared.asleep.swap(false, Ordering::AcqRel) {
            self.thread.unpark();
        }
    }

    /// A deadline check saw a call for the first time: tick every period
    /// until the returned guard drops with the call.
    fn checked_call(&self) -> CheckedCall {
        self.shared.checked_calls.fetch_add(1, Ordering::AcqRel);
        // Wakes the ticker whether it is asleep, idling or about to sleep:
        // the wake is kept until it parks.
        self.thread.unpark();
        CheckedCall(self.shared.clone())
    }
}

/// A call that a deadline check has seen, until it returns (it is kept in
/// the plugin's store; dropping it ends the fast ticking it asked for).
pub(crate) struct CheckedCall(Arc<Shared>);

impl Drop for CheckedCall {
    fn drop(&mut self) {
        self.0.checked_calls.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The ticker thread's loop (see [`Ticker`]).
fn tick_until_stopped(engine: &Engine, shared: &Shared, tick: Duration, first_check_ticks: u64) {
    let idle = tick * IDLE_TICKS;
    let add_epochs = |n: u64| {
        for _ in 0..n {
            engine.increment_epoch();
        }
        shared.epochs.fetch_add(n, Ordering::Relaxed);
    };
    let mut counted = Instant::now();
    let mut linger = 1;
    let mut idled = 0;
    while !shared.stop.load(Ordering::Acquire) {
        if shared.checked_calls.load(Ordering::Acquire) > 0 {
            idled = 0;
            std::thread::park_timeout(tick);
        } else if idled < linger {
            idled += 1;
            std::thread::park_timeout(idle);
        } else {
            shared.asleep.store(true, Ordering::Relaxed);
            // Pairs with the fence in `start_call`: a call that reads an
            // epoch moved on below also reads `asleep` as set.
            fence(Ordering::SeqCst);
            // Every call that started before now is due for its first
            // check, which wakes the ticker.
            add_epochs(first_check_ticks);
            let since = Instant::now();
            if shared.checked_calls.load(Ordering::Acquire) == 0
                && !shared.stop.load(Ordering::Acquire)
            {
                shared.sleeps.fetch_add(1, Ordering::Relaxed);
                std::thread::park();
            }
            shared.asleep.store(false, Ordering::Release);
            linger = match since.elapsed() < idle {
                true => (linger * 2).min(MAX_LINGER),
                false => 1,
            };
            idled = 0;
            // No call ran unchecked while it slept: the epochs count from
            // the wake-up.
            counted = Instant::now();
            continue;
        }
        // Woken early, no tick may have passed yet.
        let ticks = counted.elapsed().as_nanos() / tick.as_nanos();
        add_epochs(u64::try_from(ticks).unwrap_or(u64::MAX));
        counted += tick * u32::try_from(ticks).unwrap_or(u32::MAX);
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

/// Install the deadline check on a plugin's store and start a call's clock
/// (its first check after the ticker's `first_check_ticks`): past the call's
/// epoch ticks, it interrupts the call once the thread has spent the whole budget
/// on the CPU since the call started and then half a tick more since an
/// earlier check saw that (see the module docs); otherwise it looks again
/// one tick later.
pub(crate) fn install(store: &mut Store<PluginState>, ticker: &Ticker) {
    start_call(store, ticker.first_check_ticks, ticker, Instant::now());
    let ticker = ticker.clone();
    store.epoch_deadline_callback(move |mut state| {
        let data = state.data_mut();
        if data.checked_call.is_none() {
            data.checked_call = Some(ticker.checked_call());
        }
        let now = thread_cpu_time();
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
/// last reading on this thread is a tick of wall time old. Reading the
/// thread CPU clock is a system call (one to two microseconds on a 2-core
/// VM: more than a whole plugin call), and an older reading only charges the
/// call with CPU time the thread spent before it started, less than the
/// wall time since that reading: less than a tick. A check first finds a
/// call over budget once it is charged the deadline less half a tick, and
/// interrupts it half a tick of CPU time later, so no call is interrupted
/// before it has itself used more than the deadline less a tick, which is
/// CQ-LIMIT-2's tolerance. A neqo server downloading 200 MB over loopback
/// read the clock at 1,566 of its 3,560 calls when a reading was reused for
/// half a tick, and at 761-805 when for a tick.
fn call_start_cpu_time(tick: Duration, now: Instant) -> Duration {
    use std::cell::Cell;
    thread_local! {
        static LAST: Cell<Option<(Instant, Duration)>> = const { Cell::new(None) };
    }
    LAST.with(|last| match last.get() {
        Some((at, cpu)) if now.saturating_duration_since(at) < tick => cpu,
        _ => {
            let cpu = thread_cpu_time();
            last.set(Some((now, cpu)));
            cpu
        }
    })
}

/// Start the clock of a new call on a store set up by [`install`], whose
/// first check comes after `ticks` epochs (at most the ticker's
/// `first_check_ticks`); `now` is when the call starts.
pub(crate) fn start_call(
    store: &mut Store<PluginState>,
    ticks: u64,
    ticker: &Ticker,
    now: Instant,
) {
    let data = store.data_mut();
    data.call_started = call_start_cpu_time(data.call_tick, now);
    data.over_deadline_at = None;
    data.interrupted_after = None;
    data.checked_call = None;
    store.set_epoch_deadline(ticks);
    // Pairs with the ticker's fence before it moves the epoch on and
    // sleeps. The deadline above was set from an epoch read before that
    // move, and the ticker's move makes the call due for a check that wakes
    // the ticker; or from an epoch read after it, and then `asleep` reads
    // as set here.
    fence(Ordering::Acquire);
    if ticker.shared.asleep.load(Ordering::Relaxed) {
        ticker.wake();
    }
}

/// The call on `store` returned: if a check saw it, the ticker need no
/// longer tick every period for it.
pub(crate) fn end_call(store: &mut Store<PluginState>) {
    store.data_mut().checked_call = None;
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Wait for `ready` (polling, up to ten seconds: the ticker thread may
    /// be slow to run on a loaded machine, never to act).
    fn eventually(what: &str, ready: impl Fn() -> bool) {
        let give_up = Instant::now() + Duration::from_secs(10);
        while !ready() {
            assert!(Instant::now() < give_up, "timed out waiting until {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn ticker() -> (Engine, Ticker) {
        ticker_with_first_check(5)
    }

    /// A ticker with a 1 ms tick, whose calls wait at most
    /// `first_check_ticks` for their first check.
    fn ticker_with_first_check(first_check_ticks: u64) -> (Engine, Ticker) {
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(true);
        let engine = Engine::new(&config).expect("engine");
        let ticker = Ticker::start(engine.clone(), MS, first_check_ticks).expect("ticker");
        (engine, ticker)
    }

    fn epochs(ticker: &Ticker) -> u64 {
        ticker.shared.epochs.load(Ordering::Relaxed)
    }

    fn sleeps(ticker: &Ticker) -> u64 {
        ticker.shared.sleeps.load(Ordering::Relaxed)
    }

    #[test]
    fn an_idle_ticker_sleeps_until_a_call_starts() {
        let (engine, ticker) = ticker();
        eventually("the ticker sleeps", || ticker.asleep());
        // Asleep, it moves no epoch: it does not wake at all.
        let before = epochs(&ticker);
        std::thread::sleep(20 * MS);
        assert_eq!(epochs(&ticker), before);
        assert!(ticker.asleep());
        // A call starts: it wakes the ticker, which ticks again.
        let config = crate::config::RuntimeConfig::default();
        let mut store = Store::new(&engine, PluginState::for_manifest(&config));
        install(&mut store, &ticker);
        assert!(!ticker.asleep());
        eventually("the ticker ticks again", || epochs(&ticker) > before + 5);
        ticker.stop();
    }

    #[test]
    fn a_checked_call_keeps_the_ticker_ticking_until_it_returns() {
        let (_engine, ticker) = ticker();
        eventually("the ticker sleeps", || ticker.asleep());
        let call = ticker.checked_call();
        let asleep_before = sleeps(&ticker);
        let from = epochs(&ticker);
        // Twenty ticks: four times the idle period after which an idle
        // ticker sleeps.
        eventually("twenty ticks pass", || epochs(&ticker) >= from + 20);
        assert_eq!(
            sleeps(&ticker),
            asleep_before,
            "slept during a checked call"
        );
        assert!(!ticker.asleep());
        drop(call);
        eventually("the ticker sleeps again", || ticker.asleep());
        ticker.stop();
    }

    /// `(func (export "spin") (loop (br 0)))`: a call that never returns.
    const SPIN: &[u8] = &[
        0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
        0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type 0: [] -> []
        0x03, 0x02, 0x01, 0x00, // func 0: type 0
        0x07, 0x08, 0x01, 0x04, b's', b'p', b'i', b'n', 0x00, 0x00, // export
        0x0a, 0x09, 0x01, 0x07, 0x00, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b, // code
    ];

    /// A store with the deadline check installed, for a call whose first
    /// check comes after the ticker's first-check ticks, and its endless
    /// function.
    fn spinning_call(
        module: &wasmtime::Module,
        ticker: &Ticker,
    ) -> (Store<PluginState>, wasmtime::TypedFunc<(), ()>) {
        let config = crate::config::RuntimeConfig::default();
        let mut store = Store::new(module.engine(), PluginState::for_manifest(&config));
        install(&mut store, ticker);
        let instance = wasmtime::Instance::new(&mut store, module, &[]).expect("instance");
        let spin = instance
            .get_typed_func::<(), ()>(&mut store, "spin")
            .expect("spin");
        (store, spin)
    }

    /// Run the endless call and check that its deadline interrupted it. A
    /// call that is never interrupted fails the test run after a minute
    /// instead of hanging it.
    fn assert_interrupted(mut store: Store<PluginState>, spin: wasmtime::TypedFunc<(), ()>) {
        let (done, finished) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                finished.recv_timeout(Duration::from_secs(60))
            {
                eprintln!("an endless call was not interrupted within a minute");
                std::process::exit(101);
            }
        });
        let trap = spin.call(&mut store, ()).expect_err("interrupted");
        let _ = done.send(());
        assert_eq!(
            trap.downcast_ref::<wasmtime::Trap>(),
            Some(&wasmtime::Trap::Interrupt),
            "{trap:#}"
        );
        let used = store.data().interrupted_after.expect("CPU time recorded");
        assert!(used >= 9 * MS, "cut after {used:?}");
    }

    #[test]
    fn a_call_that_starts_while_the_ticker_sleeps_is_interrupted() {
        let (engine, ticker) = ticker_with_first_check(50);
        let module = wasmtime::Module::new(&engine, SPIN).expect("module");
        eventually("the ticker sleeps", || ticker.asleep());
        let (store, spin) = spinning_call(&module, &ticker);
        assert_interrupted(store, spin);
        ticker.stop();
    }

    #[test]
    fn a_call_that_runs_on_while_the_ticker_falls_asleep_is_interrupted() {
        // The ticker idles five ticks at a time; a call's first check is 50
        // ticks away. Only the ticker's move before it sleeps makes the call
        // due: without it, the call would wait for ticks that never come.
        let (engine, ticker) = ticker_with_first_check(50);
        let module = wasmtime::Module::new(&engine, SPIN).expect("module");
        eventually("the ticker sleeps", || ticker.asleep());
        let slept = sleeps(&ticker);
        // One call wakes the ticker; the next starts while it is awake.
        let (_waking, _) = spinning_call(&module, &ticker);
        let (store, spin) = spinning_call(&module, &ticker);
        eventually("the ticker sleeps again", || sleeps(&ticker) > slept);
        assert_interrupted(store, spin);
        ticker.stop();
    }

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

    fn burn_cpu(amount: Duration) {
        let start = thread_cpu_time();
        let mut x = 0u64;
        while thread_cpu_time().saturating_sub(start) < amount {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    }

    #[test]
    fn a_call_start_reading_is_reused_for_a_tick_and_never_ahead() {
        let tick = 400 * MS;
        let first = call_start_cpu_time(tick, Instant::now());
        burn_cpu(2 * MS);
        // Within a tick of wall time: the same reading, a lower bound.
        let again = call_start_cpu_time(tick, Instant::now());
        assert_eq!(first, again);
        assert!(again + 2 * MS <= thread_cpu_time());
        // A tick later a new reading, which includes the work.
        std::thread::sleep(tick);
        let later = call_start_cpu_time(tick, Instant::now());
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
