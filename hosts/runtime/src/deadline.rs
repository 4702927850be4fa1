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

/// How many ticks the ticker sleeps while calls start but no deadline
/// check runs: it then wakes 200 times a second instead of 1,000 (each
/// wake-up costs a timer interrupt and two context switches, on a machine
/// whose cores run the stack). The epochs count the wall time of the whole
/// sleep, and a call's first check comes after half its deadline
/// (`Runtime::deadline_ticks`): within 10 ms even if the ticker idled, and
/// every tick from then on, so the check that finds a call past its budget
/// is still a tick apart from the one that interrupts it.
const IDLE_TICKS: u32 = 5;

/// What the calls and the ticker tell each other.
struct Signals {
    /// A deadline check ran since the ticker last looked.
    checking: AtomicBool,
    /// A call started since the ticker last looked.
    calling: AtomicBool,
    /// The ticker sleeps until a call starts or a check runs.
    asleep: AtomicBool,
}

/// How a runtime's calls and deadline checks reach its epoch ticker.
///
/// While no call starts for a whole idle period the ticker sleeps without
/// a timeout, so that a process whose plugins are not called does not wake
/// 200 times a second (on a 2-core machine those wake-ups cost a CPU-bound
/// endpoint a measurable share of its goodput, docs/measurements.md). A
/// call then pays one shared load; the first call of an idle period also
/// one store, and the first after the ticker fell asleep wakes it.
#[derive(Clone)]
pub(crate) struct Ticker {
    signals: Arc<Signals>,
    thread: Thread,
}

impl Ticker {
    /// Start the epoch ticker of `engine`, until `stop`: one epoch per
    /// `tick` of wall time, at every tick while deadline checks run, every
    /// [`IDLE_TICKS`] ticks while calls start, and none while no call
    /// starts. `nudge` is the most ticks a call waits for its first check.
    pub(crate) fn start(
        engine: Engine,
        tick: Duration,
        nudge: u64,
        stop: Arc<AtomicBool>,
    ) -> std::io::Result<Ticker> {
        let signals = Arc::new(Signals {
            checking: AtomicBool::new(false),
            calling: AtomicBool::new(false),
            asleep: AtomicBool::new(false),
        });
        let seen = signals.clone();
        let thread = std::thread::Builder::new()
            .name("corequic-epoch".into())
            .spawn(move || {
                let idle = tick * IDLE_TICKS;
                let mut counted = Instant::now();
                let mut last_check: Option<Instant> = None;
                while !stop.load(Ordering::Relaxed) {
                    // Every tick until an idle period passes without a check:
                    // a check may come just after this look.
                    if seen.checking.swap(false, Ordering::Relaxed) {
                        last_check = Some(Instant::now());
                    }
                    let fast = last_check.is_some_and(|at| at.elapsed() < idle);
                    if !fast && !seen.calling.swap(false, Ordering::SeqCst) {
                        // No call started for an idle period. A call still
                        // running started before it: every call has its first
                        // check once the epoch moves `nudge` ticks on, and
                        // that check wakes the ticker.
                        for _ in 0..nudge {
                            engine.increment_epoch();
                        }
                        seen.asleep.store(true, Ordering::SeqCst);
                        // A call that started after the swap either sees
                        // `asleep` and wakes the ticker, or is seen here.
                        if !seen.calling.load(Ordering::SeqCst) {
                            while seen.asleep.load(Ordering::SeqCst)
                                && !stop.load(Ordering::Relaxed)
                            {
                                std::thread::park();
                            }
                        }
                        seen.asleep.store(false, Ordering::SeqCst);
                        // No call ran while the ticker slept: the epochs
                        // count from the call or check that woke it, which
                        // the next look sees.
                        counted = Instant::now();
                        continue;
                    }
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
        Ok(Ticker { signals, thread })
    }

    /// A call starts: the ticker must be awake and count it.
    #[inline]
    fn call_started(&self) {
        // A load per call; the store only once per ticker period.
        if !self.signals.calling.load(Ordering::SeqCst) {
            self.signals.calling.store(true, Ordering::SeqCst);
            self.wake();
        }
    }

    /// A check ran: tick every period from now on, starting at once.
    fn checked(&self) {
        self.signals.checking.store(true, Ordering::Relaxed);
        self.signals.asleep.store(false, Ordering::SeqCst);
        self.thread.unpark();
    }

    /// Wake the ticker if it sleeps.
    fn wake(&self) {
        if self.signals.asleep.swap(false, Ordering::SeqCst) {
            self.thread.unpark();
        }
    }

    /// Let the ticker see its stop flag now, asleep or not.
    pub(crate) fn stop(&self) {
        self.signals.asleep.store(false, Ordering::SeqCst);
        self.thread.unpark();
    }

    /// Whether the ticker sleeps until the next call.
    #[cfg(test)]
    fn is_asleep(&self) -> bool {
        self.signals.asleep.load(Ordering::SeqCst)
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
    start_call(store, ticks, ticker);
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
pub(crate) fn start_call(store: &mut Store<PluginState>, ticks: u64, ticker: &Ticker) {
    ticker.call_started();
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

    /// Wait, yielding, until the ticker has fallen asleep; false if it has
    /// not within `bound`.
    fn falls_asleep(ticker: &Ticker, bound: Duration) -> bool {
        let start = Instant::now();
        while !ticker.is_asleep() {
            if start.elapsed() > bound {
                return false;
            }
            std::thread::yield_now();
        }
        true
    }

    fn epoch_engine() -> Engine {
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(true);
        Engine::new(&config).expect("engine")
    }

    #[test]
    fn the_ticker_sleeps_while_no_call_starts_and_a_call_wakes_it() {
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = Ticker::start(epoch_engine(), MS, 5, stop.clone()).expect("ticker");
        assert!(falls_asleep(&ticker, Duration::from_secs(10)));
        ticker.call_started();
        assert!(!ticker.is_asleep(), "a call wakes the ticker");
        // Calls that keep starting keep it awake; without them it sleeps
        // again.
        assert!(falls_asleep(&ticker, Duration::from_secs(10)));
        stop.store(true, Ordering::Relaxed);
        ticker.stop();
    }

    /// A core module exporting `spin`, a loop that never ends.
    fn spin_module(engine: &Engine) -> wasmtime::Module {
        use wasm_encoder::{
            BlockType, CodeSection, ExportKind, ExportSection, Function, FunctionSection,
            Instruction, Module, TypeSection,
        };
        let mut types = TypeSection::new();
        types.ty().function([], []);
        let mut functions = FunctionSection::new();
        functions.function(0);
        let mut exports = ExportSection::new();
        exports.export("spin", ExportKind::Func, 0);
        let mut body = Function::new([]);
        body.instruction(&Instruction::Loop(BlockType::Empty))
            .instruction(&Instruction::Br(0))
            .instruction(&Instruction::End)
            .instruction(&Instruction::End);
        let mut code = CodeSection::new();
        code.function(&body);
        let mut module = Module::new();
        module
            .section(&types)
            .section(&functions)
            .section(&exports)
            .section(&code);
        wasmtime::Module::new(engine, module.finish()).expect("spin module")
    }

    #[test]
    fn a_loop_is_interrupted_whether_the_ticker_slept_or_not() {
        let engine = epoch_engine();
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = Ticker::start(engine.clone(), MS, 5, stop.clone()).expect("ticker");
        // Were the ticker to miss a call, nothing would end the loop: this
        // thread would then move the epoch after 20 s, and say so.
        let rescued = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let rescuer = {
            let (engine, rescued, done) = (engine.clone(), rescued.clone(), done.clone());
            std::thread::spawn(move || {
                let start = Instant::now();
                while !done.load(Ordering::Relaxed) {
                    if start.elapsed() > Duration::from_secs(20) {
                        rescued.store(true, Ordering::Relaxed);
                        engine.increment_epoch();
                    }
                    std::thread::park_timeout(Duration::from_millis(100));
                }
            })
        };
        let module = spin_module(&engine);
        let config = crate::RuntimeConfig::default();
        // The first loop starts while the ticker sleeps; the second right
        // after the first, while it is awake.
        assert!(falls_asleep(&ticker, Duration::from_secs(10)));
        for round in ["asleep", "awake"] {
            let mut store = Store::new(&engine, PluginState::for_manifest(&config));
            install(&mut store, 5, &ticker);
            let instance = wasmtime::Instance::new(&mut store, &module, &[]).expect("instance");
            let spin = instance
                .get_typed_func::<(), ()>(&mut store, "spin")
                .expect("spin");
            let result = spin.call(&mut store, ());
            assert!(result.is_err(), "{round}: the loop returned");
            assert!(
                !rescued.load(Ordering::Relaxed),
                "{round}: the ticker missed the call"
            );
            let used = store
                .data()
                .interrupted_after
                .expect("interrupted by the check");
            // CQ-LIMIT-2: never before the deadline less the tolerance.
            assert!(used >= 9 * MS, "{round}: interrupted after {used:?}");
        }
        done.store(true, Ordering::Relaxed);
        rescuer.thread().unpark();
        rescuer.join().expect("rescuer");
        stop.store(true, Ordering::Relaxed);
        ticker.stop();
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
