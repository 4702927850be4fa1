//! The plugins of one connection: dispatch of routines to anchors, two-phase
//! enabling, timers, plugin-control, and fault isolation.
//!
//! Each plugin has its own wasmtime store, so a fault poisons only that
//! plugin's instance; the faulty plugin is removed from this connection and
//! the others keep running.

use crate::abi::{
    self, Anchor, Error, ExtFrame, Frame, FrameOutcome, FrameRegistration, ParsedFrame, PluginVal,
    Routine, RxContext, SendContext, SendPosition,
};
use crate::config::{
    InjectedFault, InjectedFaults, MAX_OBSERVATION_BATCH, MAX_OBSERVATION_DELAY_NS,
    MAX_PLUGIN_TRANSPORT_PARAMETERS, MAX_TRANSPORT_PARAMETER_LEN, is_standard_transport_parameter,
};
use crate::error::{CloseRequest, Fault, FaultKind, FrameRejected, LoadError, RoutineError};
use crate::guest::Guest;
use crate::host::{HostConnection, LogRecord, truncate_log_text};
use crate::limits::GrowthRefused;
use crate::runtime::{Plugin, PluginInfo, Runtime};
use crate::state::{PluginState, Scope};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use wasmtime::Store;

struct Live {
    store: Store<PluginState>,
    guest: Guest,
}

struct Slot {
    info: Arc<PluginInfo>,
    /// `None` while the plugin runs (taken out for the call) or once removed.
    live: Option<Box<Live>>,
    removed: Option<Fault>,
    calls: u64,
    errors: u64,
    /// Time inside the calls the host made into the plugin (see
    /// [`PluginStats::call_time_ns`]).
    call_time: Duration,
    /// `init` has run (CQ-LOAD-14): no other routine is called before.
    initialised: bool,
    /// Log records dropped, kept here once the plugin is removed.
    logs_dropped_when_removed: u64,
    /// Observation records queued for the plugin's `observe-frames`.
    batch: Batch,
}

/// The observation records queued for one plugin's `observe-frames`
/// (CQ-ROUTINE-25), delivered together in one call (CQ-ROUTINE-26).
#[derive(Default)]
struct Batch {
    /// The frame type of every record queued: the call's parameter.
    frame_type: u64,
    /// Records queued; 0 when the batch is empty.
    records: usize,
    /// `now` of the first record queued: the batch is delivered by this
    /// plus [`MAX_OBSERVATION_DELAY_NS`].
    first_now: u64,
    /// The records, encoded (CQ-ROUTINE-27). Kept allocated from one batch
    /// to the next.
    bytes: Vec<u8>,
}

impl Batch {
    /// When the batch must be delivered, if it holds any record.
    fn due(&self) -> Option<u64> {
        (self.records > 0).then(|| self.first_now.saturating_add(MAX_OBSERVATION_DELAY_NS))
    }
}

/// Appends the observation record of `frame`, received in the packet `ctx`
/// describes, to `out` (CQ-ROUTINE-27): seven little-endian words (frame
/// type, packet type, space, packet number, now, value count, data length),
/// the values, and the data padded with zeros to a multiple of 8 bytes.
/// `values` and `data` are scratch buffers.
fn encode_observation(
    out: &mut Vec<u8>,
    frame: &Frame,
    ctx: RxContext,
    values: &mut Vec<u64>,
    data: &mut Vec<u8>,
) {
    let frame_type = crate::guest::frame_data::write_data(frame, values, data);
    let header = [
        frame_type,
        ctx.packet_type as u64,
        ctx.space as u64,
        ctx.packet_number,
        ctx.now,
        values.len() as u64,
        data.len() as u64,
    ];
    out.reserve((header.len() + values.len()) * 8 + data.len().next_multiple_of(8));
    for word in header.iter().chain(values.iter()) {
        out.extend_from_slice(&word.to_le_bytes());
    }
    out.extend_from_slice(data);
    out.resize(out.len().next_multiple_of(8), 0);
}

/// A fast hasher for the (routine, parameter) route keys, which are looked up
/// on every routine call; SipHash's DoS resistance buys nothing here because
/// the keys come from manifests validated at load time.
#[derive(Default)]
struct RouteHasher(u64);

impl Hasher for RouteHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }
    fn write_u8(&mut self, n: u8) {
        self.write_u64(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type RouteMap = HashMap<(u8, u64), usize, BuildHasherDefault<RouteHasher>>;

/// Which plugin's fused routine the host calls for one frame type.
struct FusedRoute {
    routine: Routine,
    frame_type: u64,
    define: Option<usize>,
}

/// The plugins bound to one (routine, parameter), as slot indices in load order.
#[derive(Default)]
struct Route {
    define: Option<usize>,
    before: Vec<usize>,
    after: Vec<usize>,
}

/// A frame a plugin wrote into a packet during [`PluginSet::write_frames`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrittenFrame {
    /// The frame, to be reported back through [`PluginSet::notify_frame`].
    pub frame: ExtFrame,
    /// Whether it makes the packet ack-eliciting.
    pub ack_eliciting: bool,
    /// Whether its bytes count in flight.
    pub in_flight: bool,
    /// Its length on the wire.
    pub len: usize,
}

/// Counters of one plugin on one connection.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PluginStats {
    /// The plugin's name.
    pub name: String,
    /// Whether the plugin has called `enable`.
    pub enabled: bool,
    /// Routine calls made into the plugin.
    pub calls: u64,
    /// Calls that returned an error.
    pub errors: u64,
    /// Host calls denied by permissions or anchors.
    pub denied: u64,
    /// Why the plugin was removed from the connection, if it was.
    pub removed: Option<String>,
    /// Log records dropped because the plugin spent its log budget
    /// (CQ-LIMIT-12).
    pub logs_dropped: u64,
    /// Wall time, in nanoseconds, inside the calls the host made into the
    /// plugin: what it costs the host's thread in place, caches as the host
    /// left them. A plugin-control call one plugin makes to another counts
    /// as the caller's.
    pub call_time_ns: u64,
}

enum CallFailure {
    Unavailable,
    Plugin(Error),
    Fault(Fault),
}

/// What hosts ask of the plugins before every packet: a summary of their
/// frame registrations and timers.
#[derive(Debug, Default, Clone, Copy)]
struct Summary {
    /// Bit `position as u8`: an enabled plugin registered a frame type at
    /// that position.
    positions: u8,
    /// An enabled plugin registered an ack-eliciting frame type.
    ack_eliciting: bool,
    /// The earliest timer of any plugin.
    next_timeout: Option<u64>,
}

/// A set's [`Summary`], which hosts read before every packet or every poll,
/// shared so that a reader needs no `&mut` to the set: an adapter whose
/// stack calls these hooks through `&self` would otherwise lock the set's
/// mutex per packet (about 1 % of a quinn server's samples in a loopback
/// download). The set keeps its summary here only, and writes it whenever
/// it recomputes it; its own [`PluginSet::offers_frames_at`],
/// [`PluginSet::offers_ack_eliciting_frames`] and [`PluginSet::next_timeout`]
/// read it here too.
#[derive(Clone, Debug, Default)]
pub struct SummaryReader(Arc<SharedSummary>);

#[derive(Debug)]
struct SharedSummary {
    /// [`Summary::positions`].
    positions: AtomicU8,
    /// [`Summary::ack_eliciting`].
    ack_eliciting: AtomicBool,
    /// [`Summary::next_timeout`], `u64::MAX` for none.
    next_timeout: AtomicU64,
}

impl Default for SharedSummary {
    /// The summary of a set that offers nothing and has no timer.
    fn default() -> Self {
        SharedSummary {
            positions: AtomicU8::new(0),
            ack_eliciting: AtomicBool::new(false),
            next_timeout: AtomicU64::new(u64::MAX),
        }
    }
}

impl SummaryReader {
    /// [`PluginSet::offers_frames_at`].
    pub fn offers_frames_at(&self, position: SendPosition) -> bool {
        self.0.positions.load(Ordering::Relaxed) & (1 << position as u8) != 0
    }

    /// [`PluginSet::offers_ack_eliciting_frames`].
    pub fn offers_ack_eliciting_frames(&self) -> bool {
        self.0.ack_eliciting.load(Ordering::Relaxed)
    }

    /// [`PluginSet::next_timeout`].
    pub fn next_timeout(&self) -> Option<u64> {
        Some(self.0.next_timeout.load(Ordering::Relaxed)).filter(|&t| t != u64::MAX)
    }

    /// Brings [`Self::next_timeout`] forward to `at` if that is earlier,
    /// without recomputing the rest of the summary.
    fn advance_next_timeout(&self, at: u64) {
        self.0.next_timeout.fetch_min(at, Ordering::Relaxed);
    }

    fn store(&self, summary: &Summary) {
        self.0.positions.store(summary.positions, Ordering::Relaxed);
        self.0
            .ack_eliciting
            .store(summary.ack_eliciting, Ordering::Relaxed);
        self.0
            .next_timeout
            .store(summary.next_timeout.unwrap_or(u64::MAX), Ordering::Relaxed);
    }
}

/// The plugin instances of one connection.
pub struct PluginSet {
    slots: Vec<Slot>,
    route_index: RouteMap,
    routes: Vec<Route>,
    /// The runtime's epoch ticker, which a call wakes if it sleeps.
    ticker: crate::deadline::Ticker,
    close: Option<CloseRequest>,
    /// Reused by `write_frames` so the send path does not allocate.
    regs_scratch: Vec<(usize, FrameRegistration)>,
    /// What hosts ask before every packet, shared with the hooks that have
    /// no `&mut` to the set; recomputed only when a call changed what it
    /// sums up.
    summary: SummaryReader,
    /// Registrations, timers or a plugin's usability changed since `summary`
    /// (and `observed_frames`) were computed.
    summary_stale: bool,
    /// Bit `t` for each standard frame type `t` (all are below 64) that a
    /// usable plugin observes (`process-frame` BEFORE or AFTER): what
    /// [`Self::observes_frame_type`] answers for every frame a stack
    /// receives, without a lookup. Recomputed with `summary` and after
    /// `init`; it changes only in calls, and when a plugin's log budget is
    /// spent.
    observed_frames: u64,
    /// Bit `t` for each standard frame type `t` that a usable plugin
    /// observes in batches (`observe-frames`), like `observed_frames`.
    batched_frames: u64,
    /// Which plugins could observe frames (a bit per slot) when the two
    /// masks above and `fused` were last computed: they depend on nothing
    /// else (the routes never change), and `refresh_summary`, which runs
    /// after every registration a plugin changes, recomputes them only when
    /// it changed. `None` when unknown.
    frame_observers: Option<u64>,
    /// For each frame type with a fused routine bound, the plugin whose
    /// `send-frame` and `receive-frame` the host calls ([`Self::fused_define`],
    /// `None` for the separate routines), computed with the masks above.
    fused: Vec<FusedRoute>,
    /// Scratch buffers for a frame's values and data while its observation
    /// record is encoded.
    record_values: Vec<u64>,
    record_data: Vec<u8>,
    /// The record of the last frame described (`log_plugin_frame`), kept
    /// so that describing a frame costs no allocation but its text.
    frame_record: Option<LogRecord>,
    /// Faults not yet taken by the stack.
    faults: Vec<Fault>,
    /// Transport parameter ids the stack sends itself (CQ-API-8).
    stack_transport_parameters: Vec<u64>,
    /// Frame types whose registration last said it had a frame to send and
    /// then produced none (CQ-SEND-6).
    unproductive: std::collections::HashSet<u64>,
    /// The frame type for which the would-build question last answered yes
    /// and no frame was committed since: a `send-frame` that then returns
    /// nothing makes its registration unproductive.
    wanted: Option<u64>,
    /// The thread CPU time at which the outermost call into a plugin of this
    /// connection started, while it runs.
    outer_call_started: Option<std::time::Duration>,
    /// Test-only deviations (`RuntimeConfig::injected_faults`).
    injected: InjectedFaults,
}

fn erase(conn: &mut dyn HostConnection) -> *mut (dyn HostConnection + 'static) {
    let ptr: *mut (dyn HostConnection + '_) = conn;
    // SAFETY: only the lifetime bound changes; the pointer is stored in a
    // `Scope` that is cleared before the borrow it came from ends.
    unsafe { std::mem::transmute(ptr) }
}

pub(crate) fn classify(err: &wasmtime::Error) -> FaultKind {
    if err.downcast_ref::<wasmtime::Trap>() == Some(&wasmtime::Trap::Interrupt) {
        return FaultKind::Deadline;
    }
    match err.downcast_ref::<GrowthRefused>() {
        Some(refused) if refused.memory => FaultKind::Memory,
        _ => FaultKind::Trap,
    }
}

impl PluginSet {
    pub(crate) fn new(runtime: &Runtime, plugins: &[Arc<Plugin>]) -> Result<PluginSet, LoadError> {
        // Sized for every binding up front: growing them one binding at a
        // time cost about 0.25 µs per connection with four plugins.
        let bindings = plugins.iter().map(|p| p.info.manifest.bindings.len()).sum();
        let mut route_index = RouteMap::with_capacity_and_hasher(bindings, Default::default());
        let mut routes: Vec<Route> = Vec::with_capacity(bindings);
        for (idx, plugin) in plugins.iter().enumerate() {
            for b in &plugin.info.manifest.bindings {
                let rid = *route_index
                    .entry((b.routine.merged() as u8, b.param))
                    .or_insert_with(|| {
                        routes.push(Route::default());
                        routes.len() - 1
                    });
                let route = &mut routes[rid];
                match b.anchor {
                    Anchor::Define => match route.define {
                        Some(first) if first != idx => {
                            return Err(LoadError::DefineConflict {
                                routine: b.routine.merged(),
                                param: b.param,
                                first: plugins[first].info.name.clone(),
                                second: plugin.info.name.clone(),
                            });
                        }
                        _ => route.define = Some(idx),
                    },
                    Anchor::Before if !route.before.contains(&idx) => route.before.push(idx),
                    Anchor::After if !route.after.contains(&idx) => route.after.push(idx),
                    _ => {}
                }
            }
        }

        let mut slots = Vec::with_capacity(plugins.len());
        for (idx, plugin) in plugins.iter().enumerate() {
            let state = PluginState::new(&runtime.config, Some(plugin.info.clone()), idx);
            let mut store = Store::new(&runtime.engine, state);
            store.limiter(|s| &mut s.limits);
            crate::deadline::install(&mut store, &runtime.ticker);
            let guest = plugin
                .pre
                .instantiate(&mut store, Some(&plugin.info.manifest))
                .map_err(|e| LoadError::Instantiate {
                    plugin: plugin.info.name.clone(),
                    message: e.to_string(),
                })?;
            slots.push(Slot {
                info: plugin.info.clone(),
                live: Some(Box::new(Live { store, guest })),
                removed: None,
                calls: 0,
                errors: 0,
                call_time: Duration::ZERO,
                initialised: false,
                logs_dropped_when_removed: 0,
                batch: Batch::default(),
            });
        }
        Ok(PluginSet {
            slots,
            route_index,
            routes,
            ticker: runtime.ticker.clone(),
            close: None,
            regs_scratch: Vec::new(),
            summary: SummaryReader::default(),
            summary_stale: false,
            observed_frames: 0,
            batched_frames: 0,
            frame_observers: None,
            fused: Vec::new(),
            record_values: Vec::new(),
            record_data: Vec::new(),
            frame_record: None,
            faults: Vec::new(),
            stack_transport_parameters: runtime.capabilities().stack_transport_parameters.clone(),
            unproductive: Default::default(),
            wanted: None,
            outer_call_started: None,
            injected: runtime.config.injected_faults,
        })
    }

    /// Call into plugin `idx`. The plugin's store is taken out of its slot
    /// for the duration of the call, which is what makes re-entrant
    /// plugin-control calls (cycles) fail cleanly instead of aliasing.
    fn invoke<R>(
        &mut self,
        conn: &mut dyn HostConnection,
        idx: usize,
        anchor: Anchor,
        routine: &'static str,
        f: impl FnOnce(&mut Guest, &mut Store<PluginState>) -> wasmtime::Result<Result<R, Error>>,
    ) -> Result<R, CallFailure> {
        // A plugin sees the frames it observes in batches before anything
        // that happened after them (CQ-ROUTINE-26).
        if self.slots[idx].batch.records > 0
            && !self.injected.has(InjectedFault::ObservedFramesOutOfOrder)
        {
            self.deliver_batch(conn, idx);
        }
        let Some(mut live) = self.slots[idx].live.take() else {
            return Err(CallFailure::Unavailable);
        };
        let scope = Scope {
            conn: erase(conn),
            set: self as *mut PluginSet,
            anchor,
        };
        live.store.data_mut().scope = Some(scope);
        // A plugin-control callee is checked from the next tick on, not
        // after half a deadline: its caller may have used most of the
        // budget already.
        let first_check = match self.outer_call_started {
            Some(_) => 1,
            None => self.ticker.first_check_ticks,
        };
        let entered = Instant::now();
        crate::deadline::start_call(&mut live.store, first_check, &self.ticker, entered);
        // A plugin-control callee runs on its caller's CPU budget: time in
        // callees counts towards the caller's deadline (CQ-LIMIT-2), so a
        // caller cannot stretch one call by spreading work over callees.
        let outermost = match self.outer_call_started {
            Some(started) => {
                live.store.data_mut().call_started = started;
                false
            }
            None => {
                self.outer_call_started = Some(live.store.data().call_started);
                true
            }
        };
        let Live { store, guest } = &mut *live;
        let result = f(guest, store);
        crate::deadline::end_call(store);
        if outermost {
            self.outer_call_started = None;
            self.slots[idx].call_time += entered.elapsed();
        }
        live.store.data_mut().scope = None;
        // The call changed a registration or a timer, or enabled its
        // plugin (or, below, the plugin is removed with them).
        self.summary_stale |= std::mem::take(&mut live.store.data_mut().summary_changed);
        let slot = &mut self.slots[idx];
        slot.calls += 1;
        let result = match result {
            Ok(Ok(r)) => {
                slot.live = Some(live);
                Ok(r)
            }
            Ok(Err(e)) => {
                slot.errors += 1;
                slot.live = Some(live);
                let e = match e {
                    Error::Other { message, .. }
                        if self.injected.has(InjectedFault::UnknownErrorKindsAsFailed) =>
                    {
                        Error::Failed(message)
                    }
                    e => e,
                };
                Err(CallFailure::Plugin(e))
            }
            Err(trap) => {
                let fault = Fault {
                    plugin: slot.info.name.clone(),
                    routine,
                    anchor,
                    kind: classify(&trap),
                    message: match live.store.data().interrupted_after {
                        Some(used) => format!("{trap:#} after {used:.1?} of CPU time"),
                        None => format!("{trap:#}"),
                    },
                };
                // A plugin that defines protocol behaviour cannot vanish
                // mid-connection unnoticed (CQ-LIMIT-8); a failed `init`
                // only removes the plugin (CQ-LOAD-15).
                if slot.info.defines_protocol
                    && routine != "init"
                    && self.close.is_none()
                    && !self.injected.has(InjectedFault::NoPluginFailureClose)
                {
                    self.close = Some(CloseRequest {
                        error_code: abi::PLUGIN_FAILURE_ERROR_CODE,
                        reason: fault.to_string(),
                    });
                }
                slot.removed = Some(fault.clone());
                // Its queued observation records go with it.
                slot.batch.records = 0;
                slot.batch.bytes.clear();
                self.faults.push(fault.clone());
                let halted = live.store.data().halted_sending;
                slot.logs_dropped_when_removed = live.store.data().logs_dropped;
                // Dropping the store releases the instance back to the pool.
                drop(live);
                self.summary_stale = true;
                self.release_halt(conn, halted);
                Err(CallFailure::Fault(fault))
            }
        };
        // Not within a plugin-control call, while its caller is out of its
        // slot: its registrations and timers would be missed.
        if outermost && self.summary_stale {
            self.refresh_summary();
        }
        result
    }

    fn usable(&self, idx: usize, routine: Routine) -> bool {
        let slot = &self.slots[idx];
        if !slot.initialised {
            return false;
        }
        match &slot.live {
            Some(live) => {
                let state = live.store.data();
                (routine.before_enable() || state.enabled)
                    && !(slot.info.silent_once_log_spent && state.log_budget == 0)
            }
            None => false,
        }
    }

    /// Run a routine: BEFORE observers, the DEFINE, then AFTER observers.
    fn run<R>(
        &mut self,
        conn: &mut dyn HostConnection,
        routine: Routine,
        param: u64,
        mut f: impl FnMut(
            &mut Guest,
            &mut Store<PluginState>,
            Anchor,
        ) -> wasmtime::Result<Result<R, Error>>,
    ) -> Result<R, RoutineError> {
        let Some(&rid) = self.route_index.get(&(routine as u8, param)) else {
            return Err(RoutineError::NotBound);
        };
        self.observe(conn, rid, routine, Anchor::Before, &mut f);
        let result = match self.routes[rid].define {
            Some(idx) if self.usable(idx, routine) => {
                match self.invoke(conn, idx, Anchor::Define, routine.name(), |g, s| {
                    f(g, s, Anchor::Define)
                }) {
                    Ok(r) => Ok(r),
                    Err(CallFailure::Unavailable) => Err(RoutineError::NotBound),
                    Err(CallFailure::Plugin(error)) => Err(RoutineError::Plugin {
                        plugin: self.slots[idx].info.name.clone(),
                        error,
                    }),
                    Err(CallFailure::Fault(fault)) => Err(RoutineError::Fault(fault)),
                }
            }
            _ => Err(RoutineError::NotBound),
        };
        self.observe(conn, rid, routine, Anchor::After, &mut f);
        result
    }

    fn observe<R>(
        &mut self,
        conn: &mut dyn HostConnection,
        rid: usize,
        routine: Routine,
        anchor: Anchor,
        f: &mut impl FnMut(
            &mut Guest,
            &mut Store<PluginState>,
            Anchor,
        ) -> wasmtime::Result<Result<R, Error>>,
    ) {
        let count = match anchor {
            Anchor::Before => self.routes[rid].before.len(),
            _ if self.injected.has(InjectedFault::SkipAfterObservers) => 0,
            _ => self.routes[rid].after.len(),
        };
        for k in 0..count {
            let idx = match anchor {
                Anchor::Before => self.routes[rid].before[k],
                _ => self.routes[rid].after[k],
            };
            if self.usable(idx, routine) {
                // Observers' results and errors do not change the routine
                // (CQ-ANCHOR-6); errors are counted by `invoke` and logged.
                let r = self.invoke(conn, idx, anchor, routine.name(), |g, s| f(g, s, anchor));
                self.log_ignored(conn, idx, routine.name(), anchor, r);
            }
        }
    }

    /// Log an error result the routine ignores (observers, on-frame-reserved,
    /// notify-frame, timeouts).
    fn log_ignored<R>(
        &mut self,
        conn: &mut dyn HostConnection,
        idx: usize,
        routine: &str,
        anchor: Anchor,
        result: Result<R, CallFailure>,
    ) {
        if let Err(CallFailure::Plugin(error)) = result {
            self.log_at(
                conn,
                idx,
                &mut LogRecord {
                    plugin: self.slots[idx].info.name.clone(),
                    level: abi::LogLevel::Warn,
                    message: format!("{routine} ({}) returned an error: {error}", anchor.name()),
                    fields: Vec::new(),
                },
            );
        }
    }

    /// Call `init` on every plugin, in load order. Returns the plugins that
    /// failed (they are removed from the connection on a fault; on an error
    /// they are removed too, so a half-initialised plugin never runs).
    pub fn init(&mut self, conn: &mut dyn HostConnection) -> Vec<(String, RoutineError)> {
        let mut failures = Vec::new();
        for idx in 0..self.slots.len() {
            let r = self.invoke(conn, idx, Anchor::Define, "init", |g, s| g.init(s));
            self.slots[idx].initialised = true;
            let name = self.slots[idx].info.name.clone();
            match r {
                Ok(()) | Err(CallFailure::Unavailable) => {}
                Err(CallFailure::Plugin(error)) => {
                    let halted = self.slots[idx]
                        .live
                        .take()
                        .is_some_and(|l| l.store.data().halted_sending);
                    self.refresh_summary();
                    self.release_halt(conn, halted);
                    self.slots[idx].removed = Some(Fault {
                        plugin: name.clone(),
                        routine: "init",
                        anchor: Anchor::Define,
                        kind: FaultKind::InitFailed,
                        message: error.to_string(),
                    });
                    failures.push((
                        name.clone(),
                        RoutineError::Plugin {
                            plugin: name,
                            error,
                        },
                    ));
                }
                Err(CallFailure::Fault(f)) => failures.push((name, RoutineError::Fault(f))),
            }
        }
        // The plugins are initialised now, which makes their observers usable
        // (the rest of the summary does not depend on it).
        self.refresh_observed_frames();
        failures
    }

    /// Encode the transport parameters the plugins registered, in load order.
    /// A parameter whose DEFINE fails is omitted, and so is one that would
    /// take the plugins' parameters past [`MAX_PLUGIN_TRANSPORT_PARAMETERS`]
    /// bytes (CQ-LIMIT-11): that is logged and counted as an error of the
    /// plugin that registered it.
    pub fn transport_parameters(&mut self, conn: &mut dyn HostConnection) -> Vec<(u64, Vec<u8>)> {
        let mut ids = Vec::new();
        for slot in &self.slots {
            if let Some(live) = &slot.live {
                ids.extend_from_slice(&live.store.data().transport_parameters);
            }
        }
        let mut out = Vec::new();
        let mut budget = MAX_PLUGIN_TRANSPORT_PARAMETERS;
        for id in ids {
            let r = self.run(
                conn,
                Routine::WriteTransportParameter,
                id,
                |g, s, anchor| {
                    let data = s.data_mut();
                    data.out.clear();
                    data.out_capacity = MAX_TRANSPORT_PARAMETER_LEN;
                    let r = g.write_transport_parameter(s, anchor, id)?;
                    Ok(r.map(|()| std::mem::take(&mut s.data_mut().out)))
                },
            );
            let Ok(value) = r else { continue };
            let encoded = varint_len(id) + varint_len(value.len() as u64) + value.len();
            if encoded > budget {
                self.refuse_transport_parameter(conn, id, encoded, budget);
                continue;
            }
            budget -= encoded;
            out.push((id, value));
        }
        out
    }

    /// A transport parameter that does not fit the plugins' budget: the
    /// registering plugin gets an error counted and a warning in the log.
    fn refuse_transport_parameter(
        &mut self,
        conn: &mut dyn HostConnection,
        id: u64,
        encoded: usize,
        left: usize,
    ) {
        let Some(idx) = self.slots.iter().position(|s| {
            s.live
                .as_ref()
                .is_some_and(|l| l.store.data().transport_parameters.contains(&id))
        }) else {
            return;
        };
        let slot = &mut self.slots[idx];
        slot.errors += 1;
        let plugin = slot.info.name.clone();
        self.log_at(conn, idx, &mut LogRecord {
            plugin,
            level: abi::LogLevel::Warn,
            message: format!(
                "transport parameter {id:#x} omitted: its {encoded} bytes exceed the {left} bytes \
                 left of the plugins' {MAX_PLUGIN_TRANSPORT_PARAMETERS}-byte budget"
            ),
            fields: Vec::new(),
        });
    }

    /// A DEFINE result the runtime discarded as invalid (a length that
    /// disagrees with `frame-wire-len`, bytes that are not the registered
    /// frame): an error of the defining plugin, counted and logged.
    fn count_invalid_result(
        &mut self,
        conn: &mut dyn HostConnection,
        routine: Routine,
        param: u64,
        why: &str,
    ) {
        let Some(idx) = self
            .route_index
            .get(&(routine as u8, param))
            .and_then(|&rid| self.routes[rid].define)
        else {
            return;
        };
        let slot = &mut self.slots[idx];
        slot.errors += 1;
        let plugin = slot.info.name.clone();
        self.log_at(
            conn,
            idx,
            &mut LogRecord {
                plugin,
                level: abi::LogLevel::Warn,
                message: format!("discarded: {why}"),
                fields: Vec::new(),
            },
        );
    }

    /// Pass a record attributed to a plugin to the connection's log, within
    /// that plugin's log budget (CQ-LIMIT-12): the runtime's records about a
    /// plugin count against it like the plugin's own.
    fn log_for(&mut self, conn: &mut dyn HostConnection, record: &mut LogRecord) {
        match self.slots.iter().position(|s| s.info.name == record.plugin) {
            Some(idx) => self.log_at(conn, idx, record),
            None => conn.log(record),
        }
    }

    /// [`Self::log_for`] the plugin of slot `idx`, which the caller knows:
    /// no lookup by name (a described frame takes this path).
    fn log_at(&mut self, conn: &mut dyn HostConnection, idx: usize, record: &mut LogRecord) {
        let live = self.slots[idx].live.as_mut();
        let mut spent = false;
        let kept = live.is_none_or(|l| {
            let state = l.store.data_mut();
            let kept = state.charge_log(record);
            // Spending the budget may silence the plugin's observers.
            spent = std::mem::take(&mut state.summary_changed);
            kept
        });
        if kept {
            conn.log(record);
        }
        if spent {
            self.summary_stale = true;
            // Within a call, the outermost call refreshes it when it returns.
            if self.outer_call_started.is_none() {
                self.refresh_summary();
            }
        }
    }

    /// A plugin that had set `sending-halted` was removed: clear the field
    /// unless another live plugin holds it, so the connection does not stall
    /// for ever (CQ-LIMIT-7).
    fn release_halt(&mut self, conn: &mut dyn HostConnection, removed_had_halted: bool) {
        if self.injected.has(InjectedFault::KeepHaltAfterRemoval) {
            return;
        }
        let held_by_another = self
            .slots
            .iter()
            .filter_map(|s| s.live.as_ref())
            .any(|l| l.store.data().halted_sending);
        if removed_had_halted && !held_by_another {
            let field = abi::FieldRef {
                id: abi::FieldId::SendingHalted,
                space: None,
            };
            // A host that lets plugins write the field can also clear it.
            let _ = conn.set_field(field, PluginVal::Bool(false));
        }
    }

    /// Whether the stack sends transport parameter `id` itself (CQ-API-8).
    pub(crate) fn is_stack_transport_parameter(&self, id: u64) -> bool {
        is_standard_transport_parameter(id) || self.stack_transport_parameters.contains(&id)
    }

    /// The peer sent transport parameter `id`. `Ok(false)` when no plugin
    /// handles it (the stack ignores it as usual); an error means the stack
    /// closes the connection with TRANSPORT_PARAMETER_ERROR.
    pub fn decode_transport_parameter(
        &mut self,
        conn: &mut dyn HostConnection,
        id: u64,
        value: &[u8],
    ) -> Result<bool, RoutineError> {
        let r = self.run(
            conn,
            Routine::DecodeTransportParameter,
            id,
            |g, s, anchor| {
                let data = s.data_mut();
                data.input.clear();
                data.input.extend_from_slice(value);
                g.decode_transport_parameter(s, anchor, id)
            },
        );
        match r {
            Ok(()) => Ok(true),
            Err(RoutineError::NotBound) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The frame registrations of enabled plugins at `position`, in load order.
    pub fn registrations(
        &self,
        position: SendPosition,
    ) -> impl Iterator<Item = FrameRegistration> + '_ {
        self.enabled_registrations()
            .filter(move |r| r.position == position)
    }

    /// Whether an enabled plugin registered a frame type to be offered at
    /// `position`. When none did, `write_frames` there writes nothing, and a
    /// host may skip the call and whatever it builds for it.
    pub fn offers_frames_at(&self, position: SendPosition) -> bool {
        self.summary.offers_frames_at(position)
    }

    /// Whether an enabled plugin registered an ack-eliciting frame type.
    /// When none did, `wants_to_send` is `false`, and a host may skip it.
    pub fn offers_ack_eliciting_frames(&self) -> bool {
        self.summary.offers_ack_eliciting_frames()
    }

    /// [`Self::refresh_summary`] if a change since made it stale, unless
    /// within a plugin-control call, whose caller is out of its slot (its
    /// registrations and timers would be missed): the outermost call does it.
    fn refresh_stale_summary(&mut self) {
        if self.summary_stale && self.outer_call_started.is_none() {
            self.refresh_summary();
        }
    }

    /// Recompute `summary` from the registrations of the enabled plugins
    /// and the timers of all.
    fn refresh_summary(&mut self) {
        self.summary_stale = false;
        let mut summary = self
            .enabled_registrations()
            .fold(Summary::default(), |summary, r| Summary {
                positions: summary.positions | 1 << r.position as u8,
                ack_eliciting: summary.ack_eliciting || r.ack_eliciting,
                next_timeout: None,
            });
        summary.next_timeout = self.next_timeout_of_slots();
        self.summary.store(&summary);
        self.refresh_observed_frames();
    }

    /// Recompute [`Self::observed_frames`] and [`Self::batched_frames`] if
    /// a plugin became usable or unusable since they were computed.
    fn refresh_observed_frames(&mut self) {
        // `usable` answers alike for both routines, which work only once
        // the plugin is enabled; the routes never change.
        let observers = (self.slots.len() <= 64).then(|| {
            (0..self.slots.len())
                .filter(|&idx| self.usable(idx, Routine::ProcessFrame))
                .fold(0u64, |bits, idx| bits | 1 << idx)
        });
        if observers.is_some() && observers == self.frame_observers {
            return;
        }
        self.frame_observers = observers;
        self.observed_frames = self.observed_standard_frames(Routine::ProcessFrame);
        self.batched_frames = self.observed_standard_frames(Routine::ObserveFrames);
        let mut fused = std::mem::take(&mut self.fused);
        fused.clear();
        for routine in [Routine::SendFrame, Routine::ReceiveFrame] {
            for &(r, frame_type) in self.route_index.keys() {
                if r == routine as u8 {
                    fused.push(FusedRoute {
                        routine,
                        frame_type,
                        define: self.fused_define_now(routine, frame_type),
                    });
                }
            }
        }
        self.fused = fused;
    }

    /// The earliest plugin timer or batch of observation records due.
    fn next_timeout_of_slots(&self) -> Option<u64> {
        let timers = self
            .slots
            .iter()
            .filter_map(|s| s.live.as_ref())
            .flat_map(|l| l.store.data().timers.iter().map(|t| t.1));
        let batches = self.slots.iter().filter_map(|s| s.batch.due());
        timers.chain(batches).min()
    }

    /// [`Self::observed_frames`] (`routine` `process-frame`) or
    /// [`Self::batched_frames`] (`observe-frames`) as the routes and the
    /// plugins are now.
    fn observed_standard_frames(&self, routine: Routine) -> u64 {
        self.route_index
            .iter()
            .filter(|&(&(r, frame_type), _)| r == routine as u8 && frame_type < 64)
            .filter(|&(_, &rid)| self.route_observed(rid, routine))
            .fold(0, |mask, (&(_, frame_type), _)| mask | 1 << frame_type)
    }

    /// Whether a usable plugin observes (BEFORE or AFTER) route `rid` of
    /// `routine`.
    fn route_observed(&self, rid: usize, routine: Routine) -> bool {
        let r = &self.routes[rid];
        self.any_usable(&r.before, routine) || self.any_usable(&r.after, routine)
    }

    /// Whether any of the plugins of slots `idxs` is usable for `routine`.
    fn any_usable(&self, idxs: &[usize], routine: Routine) -> bool {
        idxs.iter().any(|&idx| self.usable(idx, routine))
    }

    /// A shared reader of what [`Self::offers_frames_at`] and
    /// [`Self::next_timeout`] answer, kept up to date by the set.
    pub fn summary_reader(&self) -> SummaryReader {
        self.summary.clone()
    }

    /// The frame registrations of every enabled plugin, in load order.
    fn enabled_registrations(&self) -> impl Iterator<Item = FrameRegistration> + '_ {
        self.enabled_registrations_by_slot().map(|(_, r)| r)
    }

    /// [`Self::enabled_registrations`], each with its plugin's slot.
    fn enabled_registrations_by_slot(
        &self,
    ) -> impl Iterator<Item = (usize, FrameRegistration)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(idx, s)| s.live.as_ref().map(|l| (idx, l)))
            .filter(|(_, l)| l.store.data().enabled)
            .flat_map(|(idx, l)| l.store.data().offered_frames().map(move |r| (idx, r)))
    }

    /// Whether any enabled plugin has an ack-eliciting frame to send now
    /// (asks `should-send-frame`, which has no side effects). Hosts use it to
    /// decide whether to build a packet at all; frames that are not
    /// ack-eliciting only ride on packets the host sends anyway.
    pub fn wants_to_send(&mut self, conn: &mut dyn HostConnection, ctx: SendContext) -> bool {
        // Called whenever the stack has nothing of its own to send: no
        // allocation, and nothing at all when no frame is registered.
        let mut regs = std::mem::take(&mut self.regs_scratch);
        regs.clear();
        // One walk over the plugins, then the packet's order: FIRST,
        // AFTER-ACK, END, each in load order (the sort is stable).
        regs.extend(
            self.enabled_registrations_by_slot()
                .filter(|(_, r)| r.ack_eliciting && !self.unproductive.contains(&r.frame_type)),
        );
        regs.sort_by_key(|(_, r)| r.position as u8);
        let wanted = regs.iter().map(|(_, r)| r).find(|r| {
            let ctx = SendContext {
                position: r.position,
                ..ctx
            };
            matches!(self.should_send_frame(conn, r.frame_type, ctx), Ok(true))
        });
        let wanted = wanted.map(|r| r.frame_type);
        if wanted.is_some() {
            self.wanted = wanted;
        }
        self.regs_scratch = regs;
        wanted.is_some()
    }

    /// Routine `should-send-frame`.
    pub fn should_send_frame(
        &mut self,
        conn: &mut dyn HostConnection,
        frame_type: u64,
        ctx: SendContext,
    ) -> Result<bool, RoutineError> {
        self.run(
            conn,
            Routine::ShouldSendFrame,
            frame_type,
            |g, s, anchor| g.should_send_frame(s, anchor, frame_type, ctx),
        )
    }

    /// Routine `write-frame`: the DEFINE writes a frame of `frame_type`
    /// into a buffer of `ctx.room` bytes and names its tag; the bytes are
    /// appended to `out` only when they are one frame of that type
    /// (CQ-ROUTINE-11 to CQ-ROUTINE-13, CQ-SEND-11). `Ok(None)`: nothing to
    /// send. Observers write into scratch buffers of the same capacity, which
    /// are discarded (CQ-ANCHOR-8); AFTER observers of a 0.1.0 plugin are
    /// told the frame the DEFINE wrote (specification §2.2).
    pub fn write_frame(
        &mut self,
        conn: &mut dyn HostConnection,
        frame_type: u64,
        ctx: SendContext,
        out: &mut Vec<u8>,
    ) -> Result<Option<(ExtFrame, usize)>, RoutineError> {
        let start = out.len();
        let room = usize::try_from(ctx.room).unwrap_or(usize::MAX);
        let mut defined: Option<(ExtFrame, u64)> = None;
        let written = self.run(conn, Routine::WriteFrame, frame_type, |g, s, anchor| {
            let data = s.data_mut();
            data.out.clear();
            data.out_capacity = room;
            let r = g.write_frame(s, anchor, frame_type, ctx, defined)?;
            if let (Anchor::Define, Ok(tag)) = (anchor, &r) {
                let bytes = &s.data().out;
                out.extend_from_slice(bytes);
                defined = tag.map(|tag| (ExtFrame { frame_type, tag }, bytes.len() as u64));
            }
            Ok(r)
        });
        let n = out.len() - start;
        let refuse = |out: &mut Vec<u8>, why: String| {
            out.truncate(start);
            Err(RoutineError::InvalidResult(format!("write-frame: {why}")))
        };
        match written {
            Ok(Some(_)) if n == 0 => refuse(out, "returned a tag but wrote nothing".into()),
            // Only the registered frame may reach the packet (CQ-SEND-11).
            Ok(Some(tag)) => match crate::frames::check_written(frame_type, &out[start..]) {
                Ok(()) => Ok(Some((ExtFrame { frame_type, tag }, n))),
                Err(why) => refuse(out, why),
            },
            Ok(None) if n > 0 => refuse(out, format!("returned none but wrote {n} bytes")),
            Ok(None) => Ok(None),
            Err(e) => {
                out.truncate(start);
                Err(e)
            }
        }
    }

    /// Routine `on-frame-reserved`.
    pub fn on_frame_reserved(
        &mut self,
        conn: &mut dyn HostConnection,
        frame: ExtFrame,
        ctx: SendContext,
    ) -> Result<(), RoutineError> {
        self.run(
            conn,
            Routine::OnFrameReserved,
            frame.frame_type,
            |g, s, anchor| g.on_frame_reserved(s, anchor, frame, ctx),
        )
    }

    /// Algorithm 1 of the Core QUIC paper for one send position: for every
    /// registration at `ctx.position`, should-send → write (≤ room) →
    /// on-frame-reserved. Frames are appended to `out` and described in
    /// `written`. Returns the bytes written.
    pub fn write_frames(
        &mut self,
        conn: &mut dyn HostConnection,
        ctx: SendContext,
        out: &mut Vec<u8>,
        written: &mut Vec<WrittenFrame>,
    ) -> usize {
        self.write_frames_where(conn, ctx, out, written, true)
    }

    /// [`Self::write_frames`] for a packet that congestion control lets out
    /// only because it is not in flight, e.g. an ACK-only packet while the
    /// congestion window is full: only registrations with `in-flight` =
    /// false and `ack-eliciting` = false are offered, since either flag puts
    /// the packet in flight (CQ-SEND-5, CQ-SEND-10).
    pub fn write_frames_not_in_flight(
        &mut self,
        conn: &mut dyn HostConnection,
        ctx: SendContext,
        out: &mut Vec<u8>,
        written: &mut Vec<WrittenFrame>,
    ) -> usize {
        self.write_frames_where(conn, ctx, out, written, false)
    }

    fn write_frames_where(
        &mut self,
        conn: &mut dyn HostConnection,
        mut ctx: SendContext,
        out: &mut Vec<u8>,
        written: &mut Vec<WrittenFrame>,
        in_flight_allowed: bool,
    ) -> usize {
        let mut regs = std::mem::take(&mut self.regs_scratch);
        regs.clear();
        regs.extend(
            self.enabled_registrations_by_slot()
                .filter(|(_, r)| r.position == ctx.position)
                .filter(|(_, r)| in_flight_allowed || !(r.in_flight || r.ack_eliciting)),
        );
        let start = out.len();
        for &(owner, reg) in &regs {
            ctx.room = ctx.room.saturating_sub((out.len() - start) as u64);
            let ty = reg.frame_type;
            let fused = self.fused_define(Routine::SendFrame, ty);
            if fused.is_none() && !matches!(self.should_send_frame(conn, ty, ctx), Ok(true)) {
                continue;
            }
            // Until it commits a frame, a registration that said it had one
            // and then produced none no longer makes the host build packets
            // for it (`wants_to_send`): it would otherwise spin the send loop.
            // `send-frame` says both at once, so it counts as having said so
            // when the would-build question last answered yes for it.
            if fused.is_none() || self.wanted == Some(ty) {
                self.unproductive.insert(ty);
            }
            let sent = match fused {
                Some(_) => self.send_frame(conn, ty, ctx, out),
                None => self
                    .write_frame(conn, ty, ctx, out)
                    .map(|w| w.map(|(frame, len)| (frame, len, None))),
            };
            let (frame, len, description) = match sent {
                Ok(Some(sent)) => sent,
                Ok(None) => continue,
                Err(e) => {
                    if let RoutineError::InvalidResult(why) = e {
                        let routine = match fused {
                            Some(_) => Routine::SendFrame,
                            None => Routine::WriteFrame,
                        };
                        self.count_invalid_result(conn, routine, ty, &why);
                    }
                    continue;
                }
            };
            self.unproductive.remove(&ty);
            if self.wanted == Some(ty) {
                self.wanted = None;
            }
            written.push(WrittenFrame {
                frame,
                ack_eliciting: reg.ack_eliciting,
                in_flight: reg.in_flight,
                len,
            });
            self.log_plugin_frame(conn, frame, "frame sent", fused.zip(description));
            // A registration made with `register-frame-one-in-flight` is
            // held until this frame's fate is known (CQ-API-22).
            if let Some(live) = self.slots[owner].live.as_mut()
                && live.store.data_mut().hold_registration(ty)
            {
                self.summary_stale = true;
            }
            // `send-frame` took the frame as reserved when it returned it.
            if fused.is_some() {
                continue;
            }
            // Errors of on-frame-reserved cannot take the frame back; they
            // are logged (CQ-ROUTINE-14).
            if let Err(e @ RoutineError::Plugin { .. }) = self.on_frame_reserved(conn, frame, ctx) {
                self.log_routine_error(conn, "on-frame-reserved", &e);
            }
        }
        self.regs_scratch = regs;
        self.refresh_stale_summary();
        out.len() - start
    }

    /// The plugin whose fused routine (`send-frame` or `receive-frame`, ABI
    /// 0.2.4) takes the place of the separate ones for frame type `t`: the
    /// usable plugin with its DEFINE binding, when no plugin observes one of
    /// the routines it replaces (a usable plugin with a BEFORE or AFTER
    /// binding), whose calls would otherwise be missed (CQ-ROUTINE-29,
    /// CQ-ROUTINE-30). A received frame takes the fused path only from the
    /// plugin that parses it.
    fn fused_define(&self, fused: Routine, t: u64) -> Option<usize> {
        self.fused
            .iter()
            .find(|f| f.routine == fused && f.frame_type == t)
            .and_then(|f| f.define)
    }

    /// [`Self::fused_define`] as the routes and the plugins are now.
    fn fused_define_now(&self, fused: Routine, t: u64) -> Option<usize> {
        let (replaced, switch): (&[Routine], _) = match fused {
            Routine::SendFrame => (
                &[
                    Routine::ShouldSendFrame,
                    Routine::WriteFrame,
                    Routine::OnFrameReserved,
                ],
                InjectedFault::SeparateSendRoutines,
            ),
            _ => (
                &[Routine::ParseFrame, Routine::ProcessFrame],
                InjectedFault::SeparateReceiveRoutines,
            ),
        };
        // A host that skips `process-frame` (a fault switch) only parses:
        // it has no use for the routine that also processes.
        if self.injected.has(switch)
            || (fused == Routine::ReceiveFrame
                && self.injected.has(InjectedFault::SkipProcessFrame))
        {
            return None;
        }
        let define = |routine: Routine| {
            self.route_index
                .get(&(routine as u8, t))
                .and_then(|&rid| self.routes[rid].define)
        };
        let idx = define(fused).filter(|&idx| self.usable(idx, fused))?;
        if fused == Routine::ReceiveFrame && define(Routine::ParseFrame) != Some(idx) {
            return None;
        }
        let observed = replaced.iter().any(|&routine| {
            self.route_index
                .get(&(routine as u8, t))
                .is_some_and(|&rid| self.route_observed(rid, routine))
        });
        (!observed).then_some(idx)
    }

    /// Routine `send-frame` (ABI 0.2.4): the DEFINE returns a frame of
    /// `frame_type` of at most `ctx.room` bytes, appended to `out` only when
    /// it is one frame of that type (CQ-ROUTINE-29, CQ-SEND-11), with its
    /// tag and length and the description it gave, if any.
    fn send_frame(
        &mut self,
        conn: &mut dyn HostConnection,
        frame_type: u64,
        ctx: SendContext,
        out: &mut Vec<u8>,
    ) -> Result<Option<(ExtFrame, usize, Option<String>)>, RoutineError> {
        let start = out.len();
        let sent = self.run(conn, Routine::SendFrame, frame_type, |g, s, anchor| {
            // Only the DEFINE's frame may reach the packet.
            let mut discarded = Vec::new();
            let buf = match anchor {
                Anchor::Define => &mut *out,
                _ => &mut discarded,
            };
            g.send_frame(s, anchor, frame_type, ctx, buf)
        });
        let refuse = |out: &mut Vec<u8>, why: String| {
            out.truncate(start);
            Err(RoutineError::InvalidResult(format!("send-frame: {why}")))
        };
        match sent {
            Ok(Ok(None)) => Ok(None),
            Ok(Ok(Some(sent))) => {
                let bytes = &out[start..];
                let len = bytes.len();
                if len as u64 > ctx.room {
                    return refuse(
                        out,
                        format!("returned {len} bytes for a room of {}", ctx.room),
                    );
                }
                match crate::frames::check_written(frame_type, bytes) {
                    Ok(()) => Ok(Some((
                        ExtFrame {
                            frame_type,
                            tag: sent.tag,
                        },
                        len,
                        sent.description,
                    ))),
                    Err(why) => refuse(out, why),
                }
            }
            Ok(Err(why)) => refuse(out, why),
            Err(e) => {
                out.truncate(start);
                Err(e)
            }
        }
    }

    /// Routine `notify-frame`: the packet carrying `frame` was acked or
    /// lost. Errors the plugin returns are logged (CQ-ROUTINE-15) and
    /// returned for information; the stack has nothing to undo.
    pub fn notify_frame(
        &mut self,
        conn: &mut dyn HostConnection,
        frame: ExtFrame,
        outcome: FrameOutcome,
    ) -> Result<(), RoutineError> {
        // A held `register-frame-one-in-flight` registration is offered
        // again before `notify-frame` runs (CQ-API-22). The host sees it in
        // the summary once the call returns, or at once if none is bound.
        for slot in &mut self.slots {
            if let Some(live) = slot.live.as_mut()
                && live.store.data_mut().release_registration(frame.frame_type)
            {
                self.summary_stale = true;
            }
        }
        let r = self.run(
            conn,
            Routine::NotifyFrame,
            frame.frame_type,
            |g, s, anchor| g.notify_frame(s, anchor, frame, outcome),
        );
        self.refresh_stale_summary();
        if let Err(e @ RoutineError::Plugin { .. }) = &r {
            self.log_routine_error(conn, "notify-frame", e);
        }
        r
    }

    fn log_routine_error(
        &mut self,
        conn: &mut dyn HostConnection,
        routine: &str,
        e: &RoutineError,
    ) {
        if let RoutineError::Plugin { plugin, error } = e {
            self.log_for(
                conn,
                &mut LogRecord {
                    plugin: plugin.clone(),
                    level: abi::LogLevel::Warn,
                    message: format!("{routine} returned an error: {error}"),
                    fields: Vec::new(),
                },
            );
        }
    }

    /// Whether an enabled plugin DEFINEs `parse-frame` for this frame type.
    pub fn parses_frame_type(&self, frame_type: u64) -> bool {
        self.route_index
            .get(&(Routine::ParseFrame as u8, frame_type))
            .and_then(|&rid| self.routes[rid].define)
            .is_some_and(|idx| self.usable(idx, Routine::ParseFrame))
    }

    /// Whether any enabled plugin observes (BEFORE/AFTER) `process-frame` of
    /// this type, or observes its frames in batches (`observe-frames`).
    ///
    /// Stacks ask for every frame they receive; a standard frame type is
    /// answered from a bit mask kept up to date by the set.
    pub fn observes_frame_type(&self, frame_type: u64) -> bool {
        if frame_type < 64 {
            return (self.observed_frames | self.batched_frames) & 1 << frame_type != 0;
        }
        [Routine::ProcessFrame, Routine::ObserveFrames]
            .into_iter()
            .any(|routine| {
                self.route_index
                    .get(&(routine as u8, frame_type))
                    .is_some_and(|&rid| self.route_observed(rid, routine))
            })
    }

    /// Whether a usable plugin observes `process-frame` BEFORE for frames
    /// of this type, so that [`Self::observe_frame`] at [`Anchor::Before`]
    /// would call one. Hosts that are asked for each anchor skip the
    /// BEFORE call when it would not.
    pub fn observes_frame_before(&self, frame_type: u64) -> bool {
        if frame_type < 64 && self.observed_frames & 1 << frame_type == 0 {
            return false;
        }
        self.route_index
            .get(&(Routine::ProcessFrame as u8, frame_type))
            .is_some_and(|&rid| self.any_usable(&self.routes[rid].before, Routine::ProcessFrame))
    }

    /// Routine `parse-frame`; `payload` starts right after the frame type.
    pub fn parse_frame(
        &mut self,
        conn: &mut dyn HostConnection,
        frame_type: u64,
        payload: &[u8],
    ) -> Result<ParsedFrame, RoutineError> {
        let parsed = self.run(conn, Routine::ParseFrame, frame_type, |g, s, anchor| {
            let data = s.data_mut();
            data.input.clear();
            data.input.extend_from_slice(payload);
            g.parse_frame(s, anchor, frame_type)
        })?;
        if parsed.consumed > payload.len() as u64 {
            return Err(RoutineError::InvalidResult(format!(
                "parse-frame consumed {} bytes of {}",
                parsed.consumed,
                payload.len()
            )));
        }
        if parsed.frame.frame_type != frame_type {
            return Err(RoutineError::InvalidResult(format!(
                "parse-frame for {frame_type:#x} returned a frame of type {:#x}",
                parsed.frame.frame_type
            )));
        }
        Ok(parsed)
    }

    /// Routine `process-frame` for a plugin frame (BEFORE, DEFINE, AFTER).
    /// The frame is then described in the connection's log if a plugin binds
    /// `log-frame` for its type (CQ-ROUTINE-18).
    pub fn process_frame(
        &mut self,
        conn: &mut dyn HostConnection,
        frame: &Frame,
        ctx: RxContext,
    ) -> Result<(), RoutineError> {
        if self.injected.has(InjectedFault::SkipProcessFrame)
            && matches!(frame, Frame::Extension(_))
        {
            return Ok(());
        }
        let r = self.run(
            conn,
            Routine::ProcessFrame,
            frame.frame_type(),
            |g, s, anchor| g.process_frame(s, anchor, frame, ctx),
        );
        if let Frame::Extension(ext) = frame {
            self.log_plugin_frame(conn, *ext, "frame received", None);
        }
        self.queue_observation(conn, frame, ctx);
        // A frame parsed for a type no enabled plugin processes has no
        // effect (CQ-RECV-3): it is not an error of the connection.
        match r {
            Err(RoutineError::NotBound) => Ok(()),
            r => r,
        }
    }

    /// A plugin frame the peer sent, on the plugin path (CQ-RECV-2): its
    /// plugin's `receive-frame` when it defines one and nothing observes the
    /// routines it replaces (CQ-ROUTINE-30), `parse-frame` and
    /// `process-frame` otherwise. `payload` starts right after the frame
    /// type. Returns the bytes of `payload` the frame occupies, or why the
    /// connection closes, with which error.
    pub fn receive_frame(
        &mut self,
        conn: &mut dyn HostConnection,
        frame_type: u64,
        payload: &[u8],
        ctx: RxContext,
    ) -> Result<u64, FrameRejected> {
        let Some(idx) = self.fused_define(Routine::ReceiveFrame, frame_type) else {
            let parsed = self
                .parse_frame(conn, frame_type, payload)
                .map_err(FrameRejected::Encoding)?;
            self.process_frame(conn, &Frame::Extension(parsed.frame), ctx)
                .map_err(FrameRejected::Violation)?;
            return Ok(parsed.consumed);
        };
        let received = self.run(conn, Routine::ReceiveFrame, frame_type, |g, s, anchor| {
            g.receive_frame(s, anchor, frame_type, payload, ctx)
        });
        let received = match received {
            Ok(Ok(received)) if received.consumed <= payload.len() as u64 => received,
            Ok(Ok(received)) => {
                return Err(FrameRejected::Encoding(RoutineError::InvalidResult(
                    format!(
                        "receive-frame consumed {} bytes of {}",
                        received.consumed,
                        payload.len()
                    ),
                )));
            }
            Ok(Err(why)) => {
                return Err(FrameRejected::Encoding(RoutineError::InvalidResult(
                    format!("receive-frame {why}"),
                )));
            }
            // A malformed frame, as parse-frame would have found it; any
            // other error is process-frame's (CQ-ROUTINE-30).
            Err(
                e @ RoutineError::Plugin {
                    error: abi::Error::InvalidArgument(_) | abi::Error::BufferTooShort(_),
                    ..
                },
            ) => return Err(FrameRejected::Encoding(e)),
            Err(e @ RoutineError::Plugin { .. }) => return Err(FrameRejected::Violation(e)),
            Err(e) => return Err(FrameRejected::Encoding(e)),
        };
        let frame = received.frame;
        let described = received.description.map(|d| (idx, d));
        self.log_plugin_frame(conn, frame, "frame received", described);
        self.queue_observation(conn, &Frame::Extension(frame), ctx);
        Ok(received.consumed)
    }

    /// Run the BEFORE or AFTER observers of `process-frame` for a standard
    /// frame the stack processes natively.
    pub fn observe_frame(
        &mut self,
        conn: &mut dyn HostConnection,
        anchor: Anchor,
        frame: &Frame,
        ctx: RxContext,
    ) {
        // Under the fault switch that models a host calling only the AFTER
        // observers of standard frames, every host skips the BEFORE ones here.
        let skipped = anchor == Anchor::Before
            && self
                .injected
                .has(InjectedFault::SkipBeforeObserversOfStandardFrames);
        if let Some(&rid) = self
            .route_index
            .get(&(Routine::ProcessFrame as u8, frame.frame_type()))
            .filter(|_| !skipped)
        {
            let mut f = |g: &mut Guest, s: &mut Store<PluginState>, anchor| {
                g.process_frame(s, anchor, frame, ctx)
            };
            self.observe(conn, rid, Routine::ProcessFrame, anchor, &mut f);
        }
        if anchor == Anchor::After {
            self.queue_observation(conn, frame, ctx);
        }
    }

    /// Queue the observation record of a frame the connection processed
    /// for every usable plugin that observes its type in batches
    /// (`observe-frames`, CQ-ROUTINE-25), after the frame's `process-frame`
    /// AFTER calls; a batch that is full, or holds another frame type, is
    /// delivered first (CQ-ROUTINE-26).
    fn queue_observation(&mut self, conn: &mut dyn HostConnection, frame: &Frame, ctx: RxContext) {
        let frame_type = frame.frame_type();
        if frame_type < 64 && self.batched_frames & 1 << frame_type == 0 {
            return;
        }
        let Some(&rid) = self
            .route_index
            .get(&(Routine::ObserveFrames as u8, frame_type))
        else {
            return;
        };
        for k in 0..self.routes[rid].after.len() {
            let idx = self.routes[rid].after[k];
            if !self.usable(idx, Routine::ObserveFrames) {
                continue;
            }
            let batch = &self.slots[idx].batch;
            if batch.records > 0 && batch.frame_type != frame_type {
                self.deliver_batch(conn, idx);
            }
            let batch = &mut self.slots[idx].batch;
            let first = batch.records == 0;
            if first {
                batch.frame_type = frame_type;
                batch.first_now = ctx.now;
            }
            encode_observation(
                &mut batch.bytes,
                frame,
                ctx,
                &mut self.record_values,
                &mut self.record_data,
            );
            batch.records += 1;
            if batch.records >= MAX_OBSERVATION_BATCH {
                self.deliver_batch(conn, idx);
            } else if let Some(due) = batch.due().filter(|_| first) {
                // The batch's deadline is a new timeout for the stack.
                self.summary.advance_next_timeout(due);
            }
        }
    }

    /// Deliver the observation records queued for plugin `idx` in one
    /// `observe-frames` call (CQ-ROUTINE-26). The records are dropped if
    /// the plugin can no longer be called (removed, or silenced by its
    /// spent log budget).
    fn deliver_batch(&mut self, conn: &mut dyn HostConnection, idx: usize) {
        let batch = &mut self.slots[idx].batch;
        let frame_type = batch.frame_type;
        let mut records = std::mem::take(&mut batch.bytes);
        batch.records = 0;
        // The batch's deadline is gone: the outermost call refreshes the
        // summary once, the plugin's own changes with it.
        self.summary_stale = true;
        if self.usable(idx, Routine::ObserveFrames) {
            let r = self.invoke(conn, idx, Anchor::After, "observe-frames", |g, s| {
                g.observe_frames(s, frame_type, &mut records)
            });
            self.log_ignored(conn, idx, "observe-frames", Anchor::After, r);
        }
        records.clear();
        self.slots[idx].batch.bytes = records;
        self.refresh_stale_summary();
    }

    /// Deliver every observation record queued on this connection
    /// (CQ-ROUTINE-26): call it when the connection ends, so that no record
    /// is lost. Field reads in these calls see what `conn` answers then.
    pub fn deliver_observations(&mut self, conn: &mut dyn HostConnection) {
        for idx in 0..self.slots.len() {
            if self.slots[idx].batch.records > 0 {
                self.deliver_batch(conn, idx);
            }
        }
    }

    /// Routine `log-frame`: a description of the frame, if a plugin gives one.
    pub fn log_frame(&mut self, conn: &mut dyn HostConnection, frame: &Frame) -> Option<String> {
        self.run(
            conn,
            Routine::LogFrame,
            frame.frame_type(),
            |g, s, anchor| g.log_frame(s, anchor, frame),
        )
        .ok()
    }

    /// Passes a description of a plugin frame the host sent or received to
    /// the connection's log, when a plugin binds `log-frame` for its type
    /// (CQ-ROUTINE-18): a `debug` record of the defining plugin with the
    /// frame type and the description. Costs nothing for unbound types.
    fn log_plugin_frame(
        &mut self,
        conn: &mut dyn HostConnection,
        frame: ExtFrame,
        message: &str,
        described: Option<(usize, String)>,
    ) {
        // A fused routine's description stands in for `log-frame`
        // (CQ-ROUTINE-29, CQ-ROUTINE-30), unless a plugin observes
        // `log-frame` for the type and would miss the call.
        let log_frame_observed = || {
            self.route_index
                .get(&(Routine::LogFrame as u8, frame.frame_type))
                .is_some_and(|&rid| self.route_observed(rid, Routine::LogFrame))
        };
        let (idx, description) = match described {
            Some((idx, description)) if !log_frame_observed() => (idx, Some(description)),
            _ => {
                let Some(&rid) = self
                    .route_index
                    .get(&(Routine::LogFrame as u8, frame.frame_type))
                else {
                    return;
                };
                let Some(idx) = self.routes[rid].define else {
                    return;
                };
                (idx, self.log_frame(conn, &Frame::Extension(frame)))
            }
        };
        let Some(mut description) = description else {
            return;
        };
        truncate_log_text(&mut description);
        let mut record = self.frame_record.take().unwrap_or_else(|| LogRecord {
            plugin: String::new(),
            level: abi::LogLevel::Debug,
            message: String::new(),
            fields: Vec::new(),
        });
        record.plugin.clear();
        record.plugin.push_str(&self.slots[idx].info.name);
        record.message.clear();
        record.message.push_str(message);
        if record.fields.len() != 2 {
            record.fields = vec![
                ("frame-type".into(), PluginVal::U64(0)),
                ("description".into(), PluginVal::String(String::new())),
            ];
        }
        record.fields[0].1 = PluginVal::U64(frame.frame_type);
        record.fields[1].1 = PluginVal::String(description);
        self.log_at(conn, idx, &mut record);
        self.frame_record = Some(record);
    }

    /// The earliest armed plugin timer or batch of observation records
    /// due, in connection time.
    pub fn next_timeout(&self) -> Option<u64> {
        self.summary.next_timeout()
    }

    /// Deliver the batches of observation records due at `now`
    /// (CQ-ROUTINE-26), then fire every plugin timer due at `now`, each once
    /// and disarmed first. Timers a plugin re-arms while this runs fire at
    /// the next call (CQ-TIMER-6), so a plugin cannot keep this loop busy.
    pub fn handle_timeout(&mut self, conn: &mut dyn HostConnection, now: u64) {
        for idx in 0..self.slots.len() {
            if self.slots[idx].batch.due().is_some_and(|due| due <= now) {
                self.deliver_batch(conn, idx);
            }
        }
        for idx in 0..self.slots.len() {
            let due: Vec<u64> = match &mut self.slots[idx].live {
                Some(live) => {
                    let timers = &mut live.store.data_mut().timers;
                    let due: Vec<u64> = timers.iter().filter(|t| t.1 <= now).map(|t| t.0).collect();
                    timers.retain(|t| t.1 > now);
                    due
                }
                None => continue,
            };
            self.summary_stale |= !due.is_empty();
            for id in due {
                let _ = self.invoke(conn, idx, Anchor::Define, "on-plugin-timeout", |g, s| {
                    g.on_plugin_timeout(s, id, now)
                });
            }
        }
        if self.summary_stale {
            self.refresh_summary();
        }
    }

    /// Call plugin-control `id` on behalf of the application. `NotBound`
    /// when no plugin offers `id`; `Removed` when the one that did faulted.
    pub fn plugin_control(
        &mut self,
        conn: &mut dyn HostConnection,
        id: u64,
        args: &[PluginVal],
    ) -> Result<Vec<PluginVal>, RoutineError> {
        if let Some(fault) = self.removed_definer(Routine::PluginControl, id) {
            return Err(RoutineError::Removed(fault));
        }
        self.run(conn, Routine::PluginControl, id, |g, s, _| {
            g.plugin_control(s, id, args)
        })
    }

    /// plugin-control from another plugin: failures come back as ABI errors.
    pub(crate) fn control_from_plugin(
        &mut self,
        conn: &mut dyn HostConnection,
        id: u64,
        args: &[PluginVal],
    ) -> Result<Vec<PluginVal>, Error> {
        let Some(idx) = self
            .route_index
            .get(&(Routine::PluginControl as u8, id))
            .and_then(|&rid| self.routes[rid].define)
        else {
            return Err(Error::NotFound(format!(
                "no plugin defines plugin-control {id:#x}"
            )));
        };
        if let Some(fault) = &self.slots[idx].removed {
            return Err(Error::Failed(format!("the callee was removed: {fault}")));
        }
        if !self.slots[idx].initialised {
            return Err(Error::Failed(format!(
                "plugin {} has not been initialised yet (CQ-LOAD-14)",
                self.slots[idx].info.name
            )));
        }
        if !self.usable(idx, Routine::PluginControl) {
            return Err(Error::Failed("plugin busy".into()));
        }
        match self.invoke(conn, idx, Anchor::Define, "plugin-control", |g, s| {
            g.plugin_control(s, id, args)
        }) {
            Ok(r) => Ok(r),
            Err(CallFailure::Unavailable) => Err(Error::Failed("plugin busy".into())),
            Err(CallFailure::Plugin(e)) => Err(e),
            Err(CallFailure::Fault(f)) => Err(Error::Failed(f.to_string())),
        }
    }

    fn removed_definer(&self, routine: Routine, param: u64) -> Option<Fault> {
        let &rid = self.route_index.get(&(routine as u8, param))?;
        let idx = self.routes[rid].define?;
        self.slots[idx].removed.clone()
    }

    pub(crate) fn transport_parameter_owner(&self, id: u64, except: usize) -> Option<&str> {
        self.slots.iter().enumerate().find_map(|(i, s)| {
            let live = s.live.as_ref()?;
            (i != except && live.store.data().transport_parameters.contains(&id))
                .then_some(s.info.name.as_str())
        })
    }

    /// Faults since the last call, oldest first: each names the plugin, the
    /// routine, the anchor and the cause (CQ-LIMIT-6). Faults the stack saw
    /// as a [`RoutineError::Fault`] are included too.
    pub fn take_faults(&mut self) -> Vec<Fault> {
        std::mem::take(&mut self.faults)
    }

    /// A request to close the connection, set when a plugin that defines
    /// protocol behaviour faulted. The stack should close with it once.
    pub fn take_close_request(&mut self) -> Option<CloseRequest> {
        self.close.take()
    }

    /// Whether the plugin named `name` is loaded, not removed, and enabled.
    pub fn is_enabled(&self, name: &str) -> bool {
        self.slots
            .iter()
            .any(|s| s.info.name == name && s.live.as_ref().is_some_and(|l| l.store.data().enabled))
    }

    /// Per-plugin counters.
    pub fn stats(&self) -> Vec<PluginStats> {
        self.slots
            .iter()
            .map(|s| PluginStats {
                name: s.info.name.clone(),
                enabled: s.live.as_ref().is_some_and(|l| l.store.data().enabled),
                calls: s.calls,
                errors: s.errors,
                denied: s.live.as_ref().map_or(0, |l| l.store.data().denied),
                removed: s.removed.as_ref().map(|f| f.to_string()),
                logs_dropped: s
                    .live
                    .as_ref()
                    .map_or(s.logs_dropped_when_removed, |l| l.store.data().logs_dropped),
                call_time_ns: u64::try_from(s.call_time.as_nanos()).unwrap_or(u64::MAX),
            })
            .collect()
    }
}

/// Bytes of `v` as a QUIC varint (RFC 9000 §16).
fn varint_len(v: u64) -> usize {
    match v {
        0..=0x3f => 1,
        0x40..=0x3fff => 2,
        0x4000..=0x3fff_ffff => 4,
        _ => 8,
    }
}
