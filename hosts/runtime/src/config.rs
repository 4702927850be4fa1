//! Runtime configuration: resource limits and compilation options.

use std::path::PathBuf;
use std::time::Duration;

/// Limits and options for a [`crate::Runtime`]. The defaults are those of
/// the specification.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// CPU-time budget of one plugin call: the calling thread's CPU time,
    /// checked at each epoch tick once half this much wall time has passed.
    pub call_deadline: Duration,
    /// Period of the epoch ticker that wakes the `call_deadline` check
    /// while checks run; otherwise the ticker wakes every five periods, and
    /// once no plugin has been called for a while it sleeps until a call
    /// starts.
    pub epoch_tick: Duration,
    /// Maximum linear memory of one plugin instance, in bytes.
    pub max_memory_bytes: usize,
    /// Maximum number of armed timers per plugin instance.
    pub max_timers: usize,
    /// Use wasmtime's pooling allocator for per-connection instances.
    pub pooling: bool,
    /// How many plugin instances the pool holds (all connections together).
    pub pool_instances: u32,
    /// Directory where compiled plugins are cached, if any: entries are
    /// keyed by SHA-256 over the wasmtime version, the engine configuration
    /// and the component, written atomically, and checked against their
    /// length and CRC-32 before they are used; an entry also keeps the
    /// plugin's manifest (validated again on every load). It must be
    /// writable by the embedder only: an entry runs as native code, and its
    /// files are mapped, so they must not be modified in place.
    pub cache_dir: Option<PathBuf>,
    /// The compiler that turns plugins into native code.
    pub compiler: Compiler,
    /// Deliberate deviations from the specification, for testing only: the
    /// conformance kit's own tests use them to show that its cases fail
    /// against a host that is wrong in each way. Empty by default.
    pub injected_faults: InjectedFaults,
}

/// wasmtime's compilers ([`RuntimeConfig::compiler`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Compiler {
    /// The optimizing compiler (the default): slower to compile, and the
    /// compiled code is cached ([`RuntimeConfig::cache_dir`]).
    #[default]
    Cranelift,
    /// The baseline compiler: compiles about three times faster, for a
    /// process that loads plugins without a cache (docs/measurements.md).
    Winch,
}

/// One deliberate deviation from the specification (test-only; see
/// [`RuntimeConfig::injected_faults`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InjectedFault {
    /// Load plugins whose `abi-version` is not compatible (CQ-VER-7).
    AcceptForeignAbi,
    /// Do not count denied host calls (CQ-PERM-9).
    UncountedDenials,
    /// Leave `sending-halted` set when the plugin that set it is removed
    /// (CQ-LIMIT-7).
    KeepHaltAfterRemoval,
    /// Do not close the connection when a defining plugin faults
    /// (CQ-LIMIT-8).
    NoPluginFailureClose,
    /// Read a field that has no value yet as 0 instead of `none`
    /// (CQ-FIELD-1).
    NoneReadsAsZero,
    /// Do not call `process-frame` for received plugin frames (CQ-RECV-2).
    SkipProcessFrame,
    /// Do not call AFTER observers (CQ-ANCHOR-3).
    SkipAfterObservers,
    /// Refuse `send-frame(ping)` with `unsupported` (CQ-API-14).
    RefusePing,
    /// Send a PING where a plugin asked for a PATH_CHALLENGE (CQ-API-15,
    /// RFC 9000 §8.2.1).
    PathChallengeAsPing,
    /// Accept writes of `max-tx-data` and `max-rx-data` without applying
    /// them (CQ-FIELD-9).
    IgnoreFlowLimitWrites,
    /// Load a plugin whose embedded manifest differs from the one its
    /// `manifest` export returns (CQ-LOAD-23).
    TrustLyingEmbeddedManifest,
    /// Refuse plugins of ABI 0.1.0, as a host without the compatibility
    /// layer would (CQ-VER-10).
    NoCompatibilityLayer,
    /// Take a frame from a plugin whose values do not fit its type's layout
    /// as a PING instead of refusing it (CQ-RECV-9).
    UncheckedFrameLayouts,
    /// Report an error of a kind no release allocated as `failed`, losing
    /// its kind and value (CQ-API-19).
    UnknownErrorKindsAsFailed,
    /// Load only plugins of exactly the host's own version, refusing those
    /// of an earlier release of its line (0.2.0 on a 0.2.6 host), as a host
    /// that compares versions for equality would (CQ-VER-6).
    ExactAbiVersionOnly,
    /// Count no ECN marks and still answer the ECN counts with numbers (0),
    /// as a host whose endpoint does not pass the sockets' ECN bits to a
    /// stack that counts them would (CQ-FIELD-17).
    EcnMarksNotRead,
    /// Count a log record against its plugin's budget by its text alone,
    /// as 0.2.1 wrote CQ-LIMIT-12: nothing for the record itself, 16 bytes
    /// for a frame whatever it carries (CQ-LIMIT-12).
    LogTextOnly,
    /// Log every value of a shaped record as a `u64`, whatever the kind its
    /// shape declares (CQ-API-21).
    ShapedLogKindsIgnored,
    /// Call a plugin's other routines while observation records are still
    /// queued for its `observe-frames`, so it sees events out of order
    /// (CQ-ROUTINE-26).
    ObservedFramesOutOfOrder,
    /// Accept a binding of `observe-frames` at any anchor, not only
    /// `after` (CQ-ROUTINE-24).
    ObserveFramesAtAnyAnchor,
    /// Run `should-send-frame`, `write-frame` and `on-frame-reserved` for a
    /// registration whose plugin defines `send-frame` (CQ-ROUTINE-29).
    SeparateSendRoutines,
    /// Run `parse-frame` and `process-frame` for a frame whose plugin
    /// defines `receive-frame` (CQ-ROUTINE-30).
    SeparateReceiveRoutines,
    /// Accept a binding of `send-frame` or `receive-frame` at any anchor,
    /// not only `define` (CQ-ROUTINE-28).
    FusedFrameRoutinesAtAnyAnchor,
    /// Do not call the BEFORE observers of `process-frame` for the standard
    /// frames the stack processes, only the AFTER ones (CQ-RECV-5).
    SkipBeforeObserversOfStandardFrames,
    /// Keep offering a registration made with `register-frame-one-in-flight`
    /// while its frame is in flight, as `register-frame` would (CQ-API-22).
    OneInFlightNotHeld,
    /// Never offer a held `register-frame-one-in-flight` registration again
    /// once its frame is acknowledged or lost (CQ-API-22).
    OneInFlightNeverOfferedAgain,
    /// Make only the first record of a `log-shaped-records` call
    /// (CQ-API-23).
    ShapedRecordsOnlyFirst,
    /// Accept a `log-shaped-records` call whose values do not divide into
    /// whole records, and make the whole ones (CQ-API-23).
    ShapedRecordsRaggedAccepted,
}

impl InjectedFault {
    /// Every switch, in declaration order.
    pub const ALL: [InjectedFault; 28] = [
        InjectedFault::AcceptForeignAbi,
        InjectedFault::UncountedDenials,
        InjectedFault::KeepHaltAfterRemoval,
        InjectedFault::NoPluginFailureClose,
        InjectedFault::NoneReadsAsZero,
        InjectedFault::SkipProcessFrame,
        InjectedFault::SkipAfterObservers,
        InjectedFault::RefusePing,
        InjectedFault::PathChallengeAsPing,
        InjectedFault::IgnoreFlowLimitWrites,
        InjectedFault::TrustLyingEmbeddedManifest,
        InjectedFault::NoCompatibilityLayer,
        InjectedFault::UncheckedFrameLayouts,
        InjectedFault::UnknownErrorKindsAsFailed,
        InjectedFault::ExactAbiVersionOnly,
        InjectedFault::EcnMarksNotRead,
        InjectedFault::LogTextOnly,
        InjectedFault::ShapedLogKindsIgnored,
        InjectedFault::ObservedFramesOutOfOrder,
        InjectedFault::ObserveFramesAtAnyAnchor,
        InjectedFault::SeparateSendRoutines,
        InjectedFault::SeparateReceiveRoutines,
        InjectedFault::FusedFrameRoutinesAtAnyAnchor,
        InjectedFault::SkipBeforeObserversOfStandardFrames,
        InjectedFault::OneInFlightNotHeld,
        InjectedFault::OneInFlightNeverOfferedAgain,
        InjectedFault::ShapedRecordsOnlyFirst,
        InjectedFault::ShapedRecordsRaggedAccepted,
    ];

    /// Its command-line name.
    pub fn name(self) -> &'static str {
        match self {
            InjectedFault::AcceptForeignAbi => "accept-foreign-abi",
            InjectedFault::UncountedDenials => "uncounted-denials",
            InjectedFault::KeepHaltAfterRemoval => "keep-halt-after-removal",
            InjectedFault::NoPluginFailureClose => "no-plugin-failure-close",
            InjectedFault::NoneReadsAsZero => "none-reads-as-zero",
            InjectedFault::SkipProcessFrame => "skip-process-frame",
            InjectedFault::SkipAfterObservers => "skip-after-observers",
            InjectedFault::RefusePing => "refuse-ping",
            InjectedFault::PathChallengeAsPing => "path-challenge-as-ping",
            InjectedFault::IgnoreFlowLimitWrites => "ignore-flow-limit-writes",
            InjectedFault::TrustLyingEmbeddedManifest => "trust-lying-embedded-manifest",
            InjectedFault::NoCompatibilityLayer => "no-compatibility-layer",
            InjectedFault::UncheckedFrameLayouts => "unchecked-frame-layouts",
            InjectedFault::UnknownErrorKindsAsFailed => "unknown-error-kinds-as-failed",
            InjectedFault::ExactAbiVersionOnly => "exact-abi-version-only",
            InjectedFault::EcnMarksNotRead => "ecn-marks-not-read",
            InjectedFault::LogTextOnly => "log-text-only",
            InjectedFault::ShapedLogKindsIgnored => "shaped-log-kinds-ignored",
            InjectedFault::ObservedFramesOutOfOrder => "observed-frames-out-of-order",
            InjectedFault::ObserveFramesAtAnyAnchor => "observe-frames-at-any-anchor",
            InjectedFault::SeparateSendRoutines => "separate-send-routines",
            InjectedFault::SeparateReceiveRoutines => "separate-receive-routines",
            InjectedFault::FusedFrameRoutinesAtAnyAnchor => "fused-frame-routines-at-any-anchor",
            InjectedFault::SkipBeforeObserversOfStandardFrames => {
                "skip-before-observers-of-standard-frames"
            }
            InjectedFault::OneInFlightNotHeld => "one-in-flight-not-held",
            InjectedFault::OneInFlightNeverOfferedAgain => "one-in-flight-never-offered-again",
            InjectedFault::ShapedRecordsOnlyFirst => "shaped-records-only-first",
            InjectedFault::ShapedRecordsRaggedAccepted => "shaped-records-ragged-accepted",
        }
    }

    /// The switch with this name.
    pub fn parse(name: &str) -> Option<InjectedFault> {
        InjectedFault::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// A set of [`InjectedFault`]s.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InjectedFaults(u32);

impl InjectedFaults {
    /// The set with `fault` added.
    pub fn with(self, fault: InjectedFault) -> InjectedFaults {
        InjectedFaults(self.0 | 1 << fault as u32)
    }

    /// Whether `fault` is in the set.
    pub fn has(self, fault: InjectedFault) -> bool {
        self.0 & (1 << fault as u32) != 0
    }
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            call_deadline: Duration::from_millis(10),
            epoch_tick: Duration::from_millis(1),
            max_memory_bytes: 4 << 20,
            max_timers: 64,
            pooling: true,
            pool_instances: 256,
            cache_dir: None,
            compiler: Compiler::Cranelift,
            injected_faults: InjectedFaults::default(),
        }
    }
}

/// Largest transport parameter value a plugin may write, in bytes.
pub const MAX_TRANSPORT_PARAMETER_LEN: usize = 1024;
/// Bytes that all plugins of a connection together may add to the transport
/// parameters, ids and lengths included (CQ-LIMIT-11). TLS carries every
/// parameter in one extension of at most 65,535 bytes, which the stack's own
/// parameters share; rustls aborts the process on more.
pub const MAX_PLUGIN_TRANSPORT_PARAMETERS: usize = 4096;
/// Transport parameter ids no plugin may register on any host (CQ-API-8):
/// RFC 9000's (0x00–0x10), version_information (RFC 9368, 0x11),
/// max_datagram_frame_size (RFC 9221, 0x20) and grease_quic_bit (RFC 9287,
/// 0x2ab2). A host adds the other ids its stack sends in
/// [`crate::HostCapabilities::stack_transport_parameters`].
pub fn is_standard_transport_parameter(id: u64) -> bool {
    id <= 0x11 || id == 0x20 || id == 0x2ab2
}
/// Log shapes one plugin instance may declare (`declare-log-shape`,
/// CQ-API-20). With [`MAX_LOG_SHAPE_BYTES`] it bounds what the host keeps
/// for a plugin's shapes: 128 KiB per instance at most.
pub const MAX_LOG_SHAPES: usize = 32;
/// Bytes of a log shape's message and keys together (CQ-API-20).
pub const MAX_LOG_SHAPE_BYTES: usize = 4096;
/// Observation records in one `observe-frames` call at most
/// (CQ-ROUTINE-25): a plugin is entered once per this many frames at most.
pub const MAX_OBSERVATION_BATCH: usize = 64;
/// How long, in connection time, an observation record may wait for the
/// rest of its batch (CQ-ROUTINE-26): 10 ms.
pub const MAX_OBSERVATION_DELAY_NS: u64 = 10_000_000;
/// Largest `random-bytes` request.
pub const MAX_RANDOM_BYTES: u32 = 1024;
/// Log bytes (messages, field keys and values) that one plugin may pass to
/// the embedder on one connection; further records are dropped and counted
/// (CQ-LIMIT-12). A plugin logging 100 KiB per observed frame made a host
/// take over a gigabyte for one 5 MB transfer before this bound.
pub const MAX_LOG_BYTES: usize = 1 << 20;
/// What every log record counts against [`MAX_LOG_BYTES`] besides its text
/// (CQ-LIMIT-12): without it, records with an empty message and no fields
/// counted nothing, and a plugin could make its host keep any number of
/// them (20,000 passed a 1 MiB budget untouched).
pub const LOG_RECORD_BYTES: usize = 64;
/// Fields kept of one log record.
pub const MAX_LOG_FIELDS: usize = 32;
/// Log messages are truncated to this many bytes.
pub const MAX_LOG_MESSAGE: usize = 4096;
