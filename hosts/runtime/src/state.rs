//! The store data of one plugin instance and the host API it calls, in the
//! model's types ([`crate::abi`]): each WIT version's host imports
//! (`crate::guest`) are thin conversions onto these methods.
//!
//! Every host call checks, in order: that it is made during a routine call
//! (not from `manifest()`), that mutating calls come from a DEFINE anchor,
//! and that the plugin's manifest declared (and the embedder granted) the
//! permission or field. A failed check returns `error::denied` and is counted.

use crate::abi::{
    Anchor, Error, FieldId, FieldRef, Frame, FrameRegistration, LogLevel, LogValueKind, Permission,
    PluginVal,
};
use crate::config::{
    InjectedFault, InjectedFaults, MAX_LOG_BYTES, MAX_LOG_FIELDS, MAX_LOG_MESSAGE,
    MAX_LOG_SHAPE_BYTES, MAX_LOG_SHAPES, MAX_RANDOM_BYTES, RuntimeConfig,
};
use crate::host::{HostConnection, LogRecord, truncate_log_text};
use crate::limits::PluginLimits;
use crate::runtime::PluginInfo;
use crate::set::PluginSet;
use std::sync::Arc;

/// Host-side representation of an `out-buf` handle (the bytes live in
/// [`PluginState`]; at most one buffer is lent per call).
pub struct OutBufRep;
/// Host-side representation of an `in-buf` handle.
pub struct InBufRep;

/// What a plugin may reach while one of its routines runs: the connection
/// and the plugin set (for plugin-control). Set by [`PluginSet`] right before
/// a call and cleared right after it, so the pointers never outlive the
/// borrows they were made from.
#[derive(Clone, Copy)]
pub(crate) struct Scope {
    pub(crate) conn: *mut (dyn HostConnection + 'static),
    pub(crate) set: *mut PluginSet,
    pub(crate) anchor: Anchor,
}

// SAFETY: a `Scope` only exists while the thread that created it is inside a
// plugin call; it is cleared before the call returns, so it is never used
// from another thread even when the store moves between threads.
unsafe impl Send for Scope {}

/// A shape of log records that a plugin declared on its connection
/// (`declare-log-shape`, CQ-API-20): what its records repeat.
#[derive(PartialEq)]
pub(crate) struct LogShape {
    level: LogLevel,
    message: String,
    keys: Vec<(String, LogValueKind)>,
}

impl LogShape {
    /// Fill `record` with this shape and `values`, each read as its key's
    /// kind (or, with `kinds_ignored`, as a `u64`); `values` has one value
    /// per key.
    fn fill(&self, record: &mut LogRecord, values: &[u64], kinds_ignored: bool) {
        record.level = self.level;
        record.message.clear();
        record.message.push_str(&self.message);
        record.fields.truncate(self.keys.len());
        for (i, (key, _)) in self.keys.iter().enumerate() {
            match record.fields.get_mut(i) {
                Some(slot) => {
                    slot.0.clear();
                    slot.0.push_str(key);
                }
                None => record.fields.push((key.clone(), PluginVal::None)),
            }
        }
        self.fill_values(record, values, kinds_ignored);
    }

    /// Replace the values of `record`, which [`Self::fill`] filled with
    /// this shape, with `values`: a record of the same shape.
    fn fill_values(&self, record: &mut LogRecord, values: &[u64], kinds_ignored: bool) {
        for (((_, kind), &bits), field) in self.keys.iter().zip(values).zip(&mut record.fields) {
            field.1 = if kinds_ignored {
                PluginVal::U64(bits)
            } else {
                kind.value(bits)
            };
        }
    }
}

/// A new, empty log record of the plugin `info` names.
fn new_log_record(info: &Option<Arc<PluginInfo>>) -> LogRecord {
    LogRecord {
        plugin: info.as_ref().map(|i| i.name.clone()).unwrap_or_default(),
        level: LogLevel::Info,
        message: String::new(),
        fields: Vec::new(),
    }
}

/// The data of one plugin's wasmtime store.
pub(crate) struct PluginState {
    pub(crate) info: Option<Arc<PluginInfo>>,
    pub(crate) index: usize,
    pub(crate) limits: PluginLimits,
    pub(crate) scope: Option<Scope>,
    pub(crate) out: Vec<u8>,
    pub(crate) out_capacity: usize,
    pub(crate) input: Vec<u8>,
    pub(crate) enabled: bool,
    pub(crate) frames: Vec<FrameRegistration>,
    /// The frame types of `frames` registered with
    /// `register-frame-one-in-flight` (CQ-API-22).
    pub(crate) one_in_flight: Vec<u64>,
    /// The frame types of `frames` whose registration is held: made with
    /// `register-frame-one-in-flight`, with a frame in flight. They keep
    /// their place among the plugin's registrations and are not offered
    /// until the frame's fate is known (CQ-API-22).
    pub(crate) held: Vec<u64>,
    /// `enabled`, `frames` or `timers` changed, or the log budget was spent
    /// (which silences some observers, CQ-ANCHOR-12): the set recomputes its
    /// summary for the host when the call returns.
    pub(crate) summary_changed: bool,
    pub(crate) transport_parameters: Vec<u64>,
    pub(crate) timers: Vec<(u64, u64)>,
    pub(crate) max_timers: usize,
    pub(crate) denied: u64,
    /// This plugin's last successful write of `sending-halted` was `true`.
    pub(crate) halted_sending: bool,
    /// Log bytes this plugin may still pass on this connection (CQ-LIMIT-12).
    pub(crate) log_budget: usize,
    /// Log records dropped because the budget was spent.
    pub(crate) logs_dropped: u64,
    /// The record `log` fills, kept between calls so that a plugin's
    /// records reuse its message and key strings (`None` while a call
    /// fills it).
    pub(crate) log_record: Option<LogRecord>,
    /// The keys of the fields a 0.2 `log` call keeps, while it lifts them
    /// (kept between calls so that the call does not allocate).
    pub(crate) log_keys: Vec<wasmtime::component::WasmStr>,
    /// The log shapes this plugin declared on this connection, by handle.
    pub(crate) log_shapes: Vec<LogShape>,
    /// The values of a `log-shaped` call, copied out of the plugin's memory
    /// (kept between calls so that the call does not allocate).
    pub(crate) log_values: Vec<u64>,
    /// The thread's CPU time when the current call started.
    pub(crate) call_started: std::time::Duration,
    /// CPU budget of one call.
    pub(crate) call_deadline: std::time::Duration,
    /// The thread's CPU time when a check first found the current call past
    /// its budget (see `deadline`).
    pub(crate) over_deadline_at: Option<std::time::Duration>,
    /// CPU time the call had used when it was interrupted.
    pub(crate) interrupted_after: Option<std::time::Duration>,
    /// Period of the deadline check.
    pub(crate) call_tick: std::time::Duration,
    /// Set once a deadline check has seen the current call: keeps the epoch
    /// ticker ticking every period until the call returns.
    pub(crate) checked_call: Option<crate::deadline::CheckedCall>,
    /// Test-only deviations (`RuntimeConfig::injected_faults`).
    pub(crate) injected: InjectedFaults,
}

impl PluginState {
    /// Bounds `record` (at most [`MAX_LOG_FIELDS`] fields, keys and string
    /// or byte values cut to [`MAX_LOG_MESSAGE`] bytes) and charges its size
    /// to this plugin's log budget. `false`: the budget is spent, the record
    /// is to be dropped, and the drop is counted.
    pub(crate) fn charge_log(&mut self, record: &mut LogRecord) -> bool {
        record.fields.truncate(MAX_LOG_FIELDS);
        for (key, value) in &mut record.fields {
            truncate_log_text(key);
            match value {
                PluginVal::String(text) => truncate_log_text(text),
                PluginVal::Bytes(bytes) => bytes.truncate(MAX_LOG_MESSAGE),
                _ => {}
            }
        }
        let size = if self.injected.has(InjectedFault::LogTextOnly) {
            record.text_size()
        } else {
            record.charged_size()
        };
        let had_budget = self.log_budget > 0;
        let kept = size <= self.log_budget;
        if kept {
            self.log_budget -= size;
        } else {
            // A record that does not fit spends the budget: every later
            // record is dropped too, and `log` answers 0 (CQ-LIMIT-12).
            self.log_budget = 0;
            self.logs_dropped += 1;
        }
        self.summary_changed |= had_budget && self.log_budget == 0;
        kept
    }

    pub(crate) fn new(config: &RuntimeConfig, info: Option<Arc<PluginInfo>>, index: usize) -> Self {
        PluginState {
            info,
            index,
            limits: PluginLimits::new(config.max_memory_bytes),
            scope: None,
            out: Vec::new(),
            out_capacity: 0,
            input: Vec::new(),
            enabled: false,
            frames: Vec::new(),
            one_in_flight: Vec::new(),
            held: Vec::new(),
            summary_changed: false,
            transport_parameters: Vec::new(),
            timers: Vec::new(),
            max_timers: config.max_timers,
            denied: 0,
            halted_sending: false,
            log_budget: MAX_LOG_BYTES,
            logs_dropped: 0,
            log_record: None,
            log_keys: Vec::new(),
            log_shapes: Vec::new(),
            log_values: Vec::new(),
            call_started: std::time::Duration::ZERO,
            call_deadline: config.call_deadline,
            over_deadline_at: None,
            interrupted_after: None,
            call_tick: config.epoch_tick,
            checked_call: None,
            injected: config.injected_faults,
        }
    }

    pub(crate) fn for_manifest(config: &RuntimeConfig) -> Self {
        Self::new(config, None, usize::MAX)
    }

    /// A denied call: counted (CQ-PERM-9), with `message`.
    pub(crate) fn deny(&mut self, message: String) -> Error {
        if !self.injected.has(InjectedFault::UncountedDenials) {
            self.denied += 1;
        }
        Error::Denied(message)
    }

    /// The current scope, checking that a mutating call comes from DEFINE.
    fn scope(&mut self, call: &str, mutating: bool) -> Result<Scope, Error> {
        match self.scope {
            None => Err(self.deny(format!("{call} may only be called during a routine call"))),
            Some(s) if mutating && s.anchor != Anchor::Define => Err(self.deny(format!(
                "{call} mutates the connection and is not allowed from a {} anchor",
                s.anchor.name()
            ))),
            Some(s) => Ok(s),
        }
    }

    fn permit(&mut self, call: &str, permission: Permission) -> Result<(), Error> {
        let allowed = self.info.as_ref().is_some_and(|i| i.may(permission));
        if allowed {
            Ok(())
        } else {
            Err(self.deny(format!("{call} needs the {} permission", permission.name())))
        }
    }

    fn check_field_ref(field: &FieldRef) -> Result<(), Error> {
        match (field.id.per_space(), field.space.is_some()) {
            (true, false) => Err(Error::InvalidArgument(format!(
                "field {} needs a packet-number space",
                field.id.name()
            ))),
            (false, true) => Err(Error::InvalidArgument(format!(
                "field {} is connection-wide and takes no packet-number space",
                field.id.name()
            ))),
            _ => Ok(()),
        }
    }

    fn read_field(&mut self, scope: Scope, field: FieldRef) -> Result<PluginVal, Error> {
        Self::check_field_ref(&field)?;
        let allowed = self
            .info
            .as_ref()
            .is_some_and(|i| i.reads.contains(field.id));
        if !allowed {
            return Err(self.deny(format!("read of field {} was not granted", field.id.name())));
        }
        // SAFETY: see `Scope`: the connection outlives the call.
        let value = unsafe { &mut *scope.conn }.get_field(field)?;
        if self.injected.has(InjectedFault::NoneReadsAsZero) && value == PluginVal::None {
            return Ok(PluginVal::U64(0));
        }
        if self.injected.has(InjectedFault::EcnMarksNotRead)
            && matches!(
                field.id,
                FieldId::EcnEct0Count | FieldId::EcnEct1Count | FieldId::EcnCeCount
            )
        {
            return Ok(PluginVal::U64(0));
        }
        Ok(value)
    }
}

/// The buffers lent to a routine (`out-buf`, `in-buf`): what every WIT
/// version's resource methods call.
impl PluginState {
    /// `out-buf.capacity`: total bytes the buffer accepts.
    pub(crate) fn out_buf_capacity(&self) -> u64 {
        self.out_capacity as u64
    }

    /// `out-buf.written`: bytes written so far.
    pub(crate) fn out_buf_written(&self) -> u64 {
        self.out.len() as u64
    }

    /// `out-buf.put`: append `data`, or nothing if it does not fit.
    pub(crate) fn out_buf_put(&mut self, data: &[u8]) -> Result<(), Error> {
        let needed = self.out.len().saturating_add(data.len());
        if needed > self.out_capacity {
            return Err(Error::BufferTooShort(needed as u64));
        }
        self.out.extend_from_slice(data);
        Ok(())
    }

    /// `out-buf.put-zeros`: append `count` zero bytes, or nothing if they do
    /// not fit.
    pub(crate) fn out_buf_put_zeros(&mut self, count: u64) -> Result<(), Error> {
        let needed = (self.out.len() as u64).saturating_add(count);
        if needed > self.out_capacity as u64 {
            return Err(Error::BufferTooShort(needed));
        }
        self.out.resize(needed as usize, 0);
        Ok(())
    }

    /// `in-buf.len`: bytes available.
    pub(crate) fn in_buf_len(&self) -> u64 {
        self.input.len() as u64
    }

    /// `in-buf.read`: `len` bytes from `offset`.
    pub(crate) fn in_buf_read(&self, offset: u64, len: u64) -> Result<Vec<u8>, Error> {
        let end = offset.saturating_add(len);
        if end > self.input.len() as u64 {
            return Err(Error::BufferTooShort(end));
        }
        Ok(self.input[offset as usize..end as usize].to_vec())
    }
}

/// The host API (`core-quic:plugin/host`) in the model's types: what every
/// WIT version's imports call.
impl PluginState {
    pub(crate) fn get_field(&mut self, field: FieldRef) -> Result<PluginVal, Error> {
        let scope = self.scope("get-field", false)?;
        self.read_field(scope, field)
    }

    pub(crate) fn get_fields(
        &mut self,
        fields: impl IntoIterator<Item = FieldRef>,
    ) -> Result<Vec<PluginVal>, Error> {
        let scope = self.scope("get-fields", false)?;
        fields
            .into_iter()
            .map(|f| self.read_field(scope, f))
            .collect()
    }

    pub(crate) fn set_field(&mut self, field: FieldRef, value: PluginVal) -> Result<(), Error> {
        let scope = self.scope("set-field", true)?;
        Self::check_field_ref(&field)?;
        let allowed = self
            .info
            .as_ref()
            .is_some_and(|i| i.writes.contains(field.id));
        if !allowed {
            return Err(self.deny(format!(
                "write of field {} was not granted",
                field.id.name()
            )));
        }
        if !field.id.accepts(&value) {
            return Err(Error::InvalidArgument(format!(
                "field {} does not take this value type",
                field.id.name()
            )));
        }
        let halt = match (field.id, &value) {
            (FieldId::SendingHalted, PluginVal::Bool(b)) => Some(*b),
            _ => None,
        };
        if self.injected.has(InjectedFault::IgnoreFlowLimitWrites)
            && matches!(field.id, FieldId::MaxTxData | FieldId::MaxRxData)
        {
            return Ok(());
        }
        // SAFETY: see `Scope`.
        unsafe { &mut *scope.conn }.set_field(field, value)?;
        if let Some(halt) = halt {
            self.halted_sending = halt;
        }
        Ok(())
    }

    pub(crate) fn register_frame(&mut self, registration: FrameRegistration) -> Result<(), Error> {
        self.register("register-frame", registration, false)
    }

    /// `register-frame-one-in-flight` (CQ-API-22): `register-frame`, and
    /// the registration is held while a frame of it is in flight.
    pub(crate) fn register_frame_one_in_flight(
        &mut self,
        registration: FrameRegistration,
    ) -> Result<(), Error> {
        self.register("register-frame-one-in-flight", registration, true)
    }

    /// `register-frame` (CQ-API-5) or, with `one_in_flight`,
    /// `register-frame-one-in-flight`: either replaces the plugin's
    /// registration of the frame type, held or not.
    fn register(
        &mut self,
        call: &str,
        registration: FrameRegistration,
        one_in_flight: bool,
    ) -> Result<(), Error> {
        self.scope(call, true)?;
        self.permit(call, Permission::Registration)?;
        let frame_type = registration.frame_type;
        if frame_type >= 1 << 62 {
            return Err(Error::InvalidArgument("frame type exceeds 2^62 - 1".into()));
        }
        if !crate::frames::registrable(frame_type) {
            return Err(Error::InvalidArgument(format!(
                "frame type {frame_type:#x} is a standard frame the stack writes itself; only \
                 PADDING, PING, PATH_CHALLENGE and PATH_RESPONSE may be registered"
            )));
        }
        // Held until the frame's fate is known, the registration must be of
        // a frame whose fate every host learns: a plugin frame (standard
        // frames are the stack's to track) in a packet that is acknowledged
        // or declared lost, that is an ack-eliciting one.
        if one_in_flight && crate::frames::is_standard(frame_type) {
            return Err(Error::InvalidArgument(format!(
                "frame type {frame_type:#x} is a standard frame: only plugin frames may be \
                 registered one in flight"
            )));
        }
        if one_in_flight && !registration.ack_eliciting {
            return Err(Error::InvalidArgument(
                "a frame registered one in flight must be ack-eliciting: the fate of a frame \
                 that elicits no acknowledgement may never be known"
                    .into(),
            ));
        }
        self.forget_registration(frame_type);
        self.frames.push(registration);
        if one_in_flight {
            self.one_in_flight.push(frame_type);
        }
        self.summary_changed = true;
        Ok(())
    }

    /// Remove the registration of `frame_type`, offered or held; whether
    /// there was one.
    fn forget_registration(&mut self, frame_type: u64) -> bool {
        let before = self.frames.len();
        self.frames.retain(|r| r.frame_type != frame_type);
        self.held.retain(|&t| t != frame_type);
        self.one_in_flight.retain(|&t| t != frame_type);
        self.frames.len() != before
    }

    pub(crate) fn unregister_frame(&mut self, frame_type: u64) -> Result<(), Error> {
        self.scope("unregister-frame", true)?;
        self.permit("unregister-frame", Permission::Registration)?;
        if !self.forget_registration(frame_type) {
            return Err(Error::NotFound(format!(
                "frame type {frame_type:#x} is not registered"
            )));
        }
        self.summary_changed = true;
        Ok(())
    }

    /// The send loop committed a frame of `frame_type` from this plugin's
    /// registration: hold it if it was made with
    /// `register-frame-one-in-flight` (CQ-API-22). Whether it was held.
    pub(crate) fn hold_registration(&mut self, frame_type: u64) -> bool {
        if !self.one_in_flight.contains(&frame_type)
            || self.held.contains(&frame_type)
            || self.injected.has(InjectedFault::OneInFlightNotHeld)
        {
            return false;
        }
        self.held.push(frame_type);
        true
    }

    /// A frame of `frame_type` was acknowledged or declared lost: offer a
    /// held registration of it again (CQ-API-22). Whether one was held.
    pub(crate) fn release_registration(&mut self, frame_type: u64) -> bool {
        if self.held.is_empty()
            || self
                .injected
                .has(InjectedFault::OneInFlightNeverOfferedAgain)
        {
            return false;
        }
        let before = self.held.len();
        self.held.retain(|&t| t != frame_type);
        self.held.len() != before
    }

    /// The registrations the send loop offers: all but the held ones.
    pub(crate) fn offered_frames(&self) -> impl Iterator<Item = FrameRegistration> + '_ {
        self.frames
            .iter()
            .filter(|r| !self.held.contains(&r.frame_type))
            .copied()
    }

    pub(crate) fn register_transport_parameter(&mut self, id: u64) -> Result<(), Error> {
        let scope = self.scope("register-transport-parameter", true)?;
        self.permit("register-transport-parameter", Permission::Registration)?;
        if id >= 1 << 62 {
            return Err(Error::InvalidArgument(
                "transport parameter id exceeds 2^62 - 1".into(),
            ));
        }
        // SAFETY: see `Scope`; only the set's configuration and other
        // plugins' (inactive) stores are read.
        let set = unsafe { &*scope.set };
        if set.is_stack_transport_parameter(id) {
            return Err(Error::InvalidArgument(format!(
                "transport parameter {id:#x} is one the stack sends itself; a plugin may not register it"
            )));
        }
        if let Some(owner) = set.transport_parameter_owner(id, self.index) {
            return Err(Error::InvalidArgument(format!(
                "transport parameter {id:#x} is already registered by plugin {owner}"
            )));
        }
        if !self.transport_parameters.contains(&id) {
            self.transport_parameters.push(id);
        }
        Ok(())
    }

    pub(crate) fn enable(&mut self) {
        if self.scope("enable", true).is_ok() {
            self.summary_changed |= !self.enabled;
            self.enabled = true;
        }
    }

    pub(crate) fn set_timer(&mut self, id: u64, at: u64) -> Result<(), Error> {
        self.scope("set-timer", true)?;
        self.permit("set-timer", Permission::Timers)?;
        if let Some(t) = self.timers.iter_mut().find(|t| t.0 == id) {
            t.1 = at;
            self.summary_changed = true;
            return Ok(());
        }
        if self.timers.len() >= self.max_timers {
            return Err(Error::InvalidArgument(format!(
                "at most {} timers may be armed at once",
                self.max_timers
            )));
        }
        self.timers.push((id, at));
        self.summary_changed = true;
        Ok(())
    }

    pub(crate) fn cancel_timer(&mut self, id: u64) -> Result<(), Error> {
        self.scope("cancel-timer", true)?;
        self.permit("cancel-timer", Permission::Timers)?;
        let before = self.timers.len();
        self.timers.retain(|t| t.0 != id);
        if self.timers.len() == before {
            return Err(Error::NotFound(format!("timer {id} is not armed")));
        }
        self.summary_changed = true;
        Ok(())
    }

    pub(crate) fn now(&mut self) -> u64 {
        match self.scope("now", false) {
            // SAFETY: see `Scope`.
            Ok(scope) => unsafe { &*scope.conn }.now(),
            Err(_) => 0,
        }
    }

    pub(crate) fn random_bytes(&mut self, len: u32) -> Result<Vec<u8>, Error> {
        self.scope("random-bytes", false)?;
        self.permit("random-bytes", Permission::Randomness)?;
        if len > MAX_RANDOM_BYTES {
            return Err(Error::InvalidArgument(format!(
                "at most {MAX_RANDOM_BYTES} random bytes per call"
            )));
        }
        let mut buf = vec![0; len as usize];
        getrandom::fill(&mut buf)
            .map_err(|e| Error::Failed(format!("the system random source failed: {e}")))?;
        Ok(buf)
    }

    /// `log`: the bytes left in the log budget after the record. `fields`
    /// is `Err` when a frame among the values does not fit the layout of its
    /// type (a 0.2 plugin's frames as data).
    pub(crate) fn log(
        &mut self,
        level: LogLevel,
        message: String,
        fields: Result<Vec<(String, PluginVal)>, String>,
    ) -> Result<u64, Error> {
        let mut record = self.take_log_record();
        record.message = message;
        let filled = fields.map(|fields| record.fields = fields);
        self.log_filled(level, record, filled)
    }

    /// `declare-log-shape` (CQ-API-20): the handle of the shape `level`,
    /// `message` and `keys`, declared now or earlier.
    pub(crate) fn declare_log_shape(
        &mut self,
        level: LogLevel,
        message: String,
        keys: Vec<(String, LogValueKind)>,
    ) -> Result<u32, Error> {
        self.scope("declare-log-shape", false)?;
        self.permit("declare-log-shape", Permission::Logging)?;
        if keys.len() > MAX_LOG_FIELDS {
            return Err(Error::InvalidArgument(format!(
                "a log shape has at most {MAX_LOG_FIELDS} keys, not {}",
                keys.len()
            )));
        }
        let bytes = message.len() + keys.iter().map(|(key, _)| key.len()).sum::<usize>();
        if bytes > MAX_LOG_SHAPE_BYTES {
            return Err(Error::InvalidArgument(format!(
                "a log shape's message and keys are at most {MAX_LOG_SHAPE_BYTES} bytes, not {bytes}"
            )));
        }
        let shape = LogShape {
            level,
            message,
            keys,
        };
        if let Some(known) = self.log_shapes.iter().position(|s| *s == shape) {
            return Ok(known as u32);
        }
        if self.log_shapes.len() == MAX_LOG_SHAPES {
            return Err(Error::Failed(format!(
                "{MAX_LOG_SHAPES} log shapes are declared on this connection already"
            )));
        }
        self.log_shapes.push(shape);
        Ok(self.log_shapes.len() as u32 - 1)
    }

    /// `log-shaped` (CQ-API-21): the record of shape `shape` with `values`,
    /// passed as `log` passes it. The call passed `given` values; `values`
    /// holds them all when they are at most [`MAX_LOG_FIELDS`], the most
    /// keys a shape has (beyond that, the call is refused whatever they are).
    pub(crate) fn log_shaped(
        &mut self,
        shape: u32,
        values: &[u64],
        given: usize,
    ) -> Result<u64, Error> {
        let (scope, keys) = self.shaped_log_call("log-shaped", shape)?;
        if given != keys || values.len() != given {
            return Err(Error::InvalidArgument(format!(
                "log shape {shape} has {keys} keys, and {given} values were given"
            )));
        }
        Ok(self.pass_shaped_records(scope, shape, values, keys, 1))
    }

    /// `log-shaped-records` (CQ-API-23): one record of shape `shape` per
    /// run of as many of `values` as the shape has keys, in order, each
    /// passed as `log-shaped` passes it. A shape of no keys cannot count its
    /// records and is refused, as is a list that does not divide into whole
    /// records; then no record is made.
    pub(crate) fn log_shaped_records(&mut self, shape: u32, values: &[u64]) -> Result<u64, Error> {
        let (scope, keys) = self.shaped_log_call("log-shaped-records", shape)?;
        let ragged = keys == 0 || !values.len().is_multiple_of(keys);
        if ragged
            && !self
                .injected
                .has(InjectedFault::ShapedRecordsRaggedAccepted)
        {
            return Err(Error::InvalidArgument(format!(
                "log shape {shape} has {keys} keys, and {} values do not make whole records of it",
                values.len()
            )));
        }
        let count = values.len() / keys.max(1);
        let count = match self.injected.has(InjectedFault::ShapedRecordsOnlyFirst) {
            true => count.min(1),
            false => count,
        };
        Ok(self.pass_shaped_records(scope, shape, values, keys, count))
    }

    /// What `log-shaped` and `log-shaped-records` check first: the scope,
    /// the `logging` permission and the shape (CQ-API-21, CQ-API-23). The
    /// scope and the shape's number of keys.
    fn shaped_log_call(&mut self, call: &str, shape: u32) -> Result<(Scope, usize), Error> {
        let scope = self.scope(call, false)?;
        self.permit(call, Permission::Logging)?;
        match self.log_shapes.get(shape as usize) {
            Some(declared) => Ok((scope, declared.keys.len())),
            None => Err(Error::NotFound(format!(
                "log shape {shape} is not declared on this connection"
            ))),
        }
    }

    /// Pass `count` records of the declared shape `shape`, record j with
    /// the `keys` values from `values[j * keys]`, as `log` passes a record;
    /// the bytes left in the log budget. The shape's level, message and
    /// keys are filled into the record once; each record after the first
    /// changes only its values. Once the budget is spent, the records left
    /// are counted as dropped at once, so that a plugin's longest list
    /// costs the host no more than its budget's worth of records.
    fn pass_shaped_records(
        &mut self,
        scope: Scope,
        shape: u32,
        values: &[u64],
        keys: usize,
        count: usize,
    ) -> u64 {
        let kinds_ignored = self.injected.has(InjectedFault::ShapedLogKindsIgnored);
        let mut record = self
            .log_record
            .take()
            .unwrap_or_else(|| new_log_record(&self.info));
        for made in 0..count {
            if self.log_budget == 0 {
                self.logs_dropped += (count - made) as u64;
                break;
            }
            // The callers checked both: declared shapes are never removed,
            // and `values` holds `count` records.
            let (Some(declared), Some(values)) = (
                self.log_shapes.get(shape as usize),
                values.get(made * keys..(made + 1) * keys),
            ) else {
                break;
            };
            match made {
                0 => declared.fill(&mut record, values, kinds_ignored),
                _ => declared.fill_values(&mut record, values, kinds_ignored),
            }
            self.pass_permitted_log_record(scope, &mut record);
        }
        self.keep_log_record(record);
        self.log_budget as u64
    }

    /// The record for a `log` call to fill: the one the plugin's last call
    /// used, with its strings, or a new one.
    pub(crate) fn take_log_record(&mut self) -> LogRecord {
        self.log_record
            .take()
            .unwrap_or_else(|| new_log_record(&self.info))
    }

    /// `log` of a `record` whose message and fields a call filled;
    /// `filled` is `Err` when a value among the fields was not valid. The
    /// record is kept for the plugin's next call, without its values: they
    /// may be large (strings, bytes, frames), while its message and keys
    /// are at most [`crate::config::MAX_LOG_MESSAGE`] bytes each.
    pub(crate) fn log_filled(
        &mut self,
        level: LogLevel,
        mut record: LogRecord,
        filled: Result<(), String>,
    ) -> Result<u64, Error> {
        let result = self.pass_log_record(level, &mut record, filled);
        self.keep_log_record(record);
        result
    }

    /// Keep `record` for the plugin's next call, without its values.
    fn keep_log_record(&mut self, mut record: LogRecord) {
        // A record filled from owned strings (`log`) may hold more than it
        // passed on.
        record.message.shrink_to(MAX_LOG_MESSAGE);
        record.fields.truncate(MAX_LOG_FIELDS);
        record.fields.shrink_to(MAX_LOG_FIELDS);
        for (key, value) in &mut record.fields {
            key.shrink_to(MAX_LOG_MESSAGE);
            *value = PluginVal::None;
        }
        self.log_record = Some(record);
    }

    fn pass_log_record(
        &mut self,
        level: LogLevel,
        record: &mut LogRecord,
        filled: Result<(), String>,
    ) -> Result<u64, Error> {
        let scope = self.scope("log", false)?;
        self.permit("log", Permission::Logging)?;
        filled.map_err(Error::InvalidArgument)?;
        record.level = level;
        truncate_log_text(&mut record.message);
        Ok(self.pass_permitted_log_record(scope, record))
    }

    /// Pass `record` to the embedder within the log budget, from a call
    /// whose checks passed; the bytes left in the budget. Over the budget
    /// the call still succeeds; the record is dropped and counted (CQ-API-12,
    /// CQ-LIMIT-12).
    fn pass_permitted_log_record(&mut self, scope: Scope, record: &mut LogRecord) -> u64 {
        if self.charge_log(record) {
            // SAFETY: see `Scope`.
            unsafe { &mut *scope.conn }.log(record);
        }
        self.log_budget as u64
    }

    /// `send-frame`; `frame` is `Err` when a 0.2 plugin's frame does not fit
    /// the layout of its type (CQ-RECV-9).
    pub(crate) fn send_frame(&mut self, frame: Result<Frame, String>) -> Result<(), Error> {
        let scope = self.scope("send-frame", true)?;
        self.permit("send-frame", Permission::SendFrames)?;
        let frame = match frame {
            Err(_) if self.injected.has(InjectedFault::UncheckedFrameLayouts) => Ok(Frame::Ping),
            other => other,
        };
        let frame = match frame.map_err(Error::InvalidArgument)? {
            Frame::PathChallenge(_) if self.injected.has(InjectedFault::PathChallengeAsPing) => {
                Frame::Ping
            }
            Frame::Ping if self.injected.has(InjectedFault::RefusePing) => {
                return Err(Error::Unsupported("send-frame(ping)".into()));
            }
            other => other,
        };
        // SAFETY: see `Scope`.
        unsafe { &mut *scope.conn }.send_frame(frame)
    }

    pub(crate) fn call_plugin_control(
        &mut self,
        id: u64,
        args: &[PluginVal],
    ) -> Result<Vec<PluginVal>, Error> {
        let scope = self.scope("call-plugin-control", true)?;
        self.permit("call-plugin-control", Permission::PluginControl)?;
        // SAFETY: see `Scope`. This plugin's own store is not in the set
        // while it runs, so the callee can never be this instance.
        let set = unsafe { &mut *scope.set };
        let conn = unsafe { &mut *scope.conn };
        set.control_from_plugin(conn, id, args)
    }
}
