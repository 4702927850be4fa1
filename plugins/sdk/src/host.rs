//! The host API, as plain functions.

use alloc::vec::Vec;

use crate::bindings::core_quic::plugin::host as raw;
use core::cell::Cell;

use crate::{
    Error, FieldId, FieldRef, Frame, FrameRegistration, LogLevel, LogValueKind, PluginVal, PnSpace,
    Result,
};

/// Read a connection-wide field.
pub fn get(field: FieldId) -> Result<PluginVal> {
    crate::abi::get_field(FieldRef {
        id: field,
        space: None,
    })
}

/// Read a per-space field.
pub fn get_in(space: PnSpace, field: FieldId) -> Result<PluginVal> {
    crate::abi::get_field(FieldRef {
        id: field,
        space: Some(space),
    })
}

/// Read several fields in one host call.
pub fn get_many(fields: &[FieldRef]) -> Result<Vec<PluginVal>> {
    raw::get_fields(fields)
}

/// Read a `u64` field; `invalid-argument` if the host returns another type.
pub fn get_u64(field: FieldId) -> Result<u64> {
    match get(field)? {
        PluginVal::U64(v) => Ok(v),
        _ => Err(Error::invalid_argument("the field is not a u64")),
    }
}

/// Read a duration field, in nanoseconds.
pub fn get_duration(field: FieldId) -> Result<u64> {
    match get(field)? {
        PluginVal::Duration(v) => Ok(v),
        _ => Err(Error::invalid_argument("the field is not a duration")),
    }
}

/// Write a connection-wide field.
pub fn set(field: FieldId, value: PluginVal) -> Result<()> {
    raw::set_field(
        FieldRef {
            id: field,
            space: None,
        },
        &value,
    )
}

/// Offer frames of this type to the send routines.
pub fn register_frame(registration: FrameRegistration) -> Result<()> {
    raw::register_frame(registration)
}

/// Offer frames of this type to the send routines one at a time (ABI
/// 0.2.5): once a frame of it is sent, the host stops offering the type
/// until that frame is acknowledged or lost, then offers it again by itself.
/// A plugin that sends one frame at a time needs no [`unregister_frame`]
/// when it is sent and no `notify-frame` to register it again (see
/// [`crate::Manifest::define_frame_one_in_flight`]).
pub fn register_frame_one_in_flight(registration: FrameRegistration) -> Result<()> {
    raw::register_frame_one_in_flight(registration)
}

/// Stop offering frames of this type (register again to resume).
pub fn unregister_frame(frame_type: u64) -> Result<()> {
    raw::unregister_frame(frame_type)
}

/// Have the host call the transport-parameter routines for `id`.
pub fn register_transport_parameter(id: u64) -> Result<()> {
    raw::register_transport_parameter(id)
}

/// Second phase of loading: every bound routine may now run.
pub fn enable() {
    raw::enable()
}

/// Arm timer `id` to fire at `at` (connection time, nanoseconds).
pub fn set_timer(id: u64, at: u64) -> Result<()> {
    raw::set_timer(id, at)
}

/// Disarm timer `id`.
pub fn cancel_timer(id: u64) -> Result<()> {
    raw::cancel_timer(id)
}

/// The connection's current time, in nanoseconds.
pub fn now() -> u64 {
    raw::now()
}

/// Random bytes from the host's CSPRNG.
pub fn random_bytes(len: u32) -> Result<Vec<u8>> {
    raw::random_bytes(len)
}

/// A random `u64`.
pub fn random_u64() -> Result<u64> {
    let b = raw::random_bytes(8)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    Ok(u64::from_le_bytes(a))
}

/// A structured log record. Once the host has reported the plugin's log
/// budget spent, the budget stays spent for the rest of the connection and
/// records are neither built nor sent (the host would drop them).
pub fn log(level: LogLevel, message: &str, fields: &[(&str, PluginVal)]) -> Result<()> {
    within_log_budget(|| crate::abi::log(level, message, fields)).map(|_| ())
}

/// Make a record with `send` (a host call that returns the bytes left in
/// the log budget) unless the host reported the budget spent, and note
/// whether it is now; the bytes left.
fn within_log_budget(send: impl FnOnce() -> Result<u64>) -> Result<u64> {
    if LOG_BUDGET_SPENT.get() {
        return Ok(0);
    }
    let left = send()?;
    LOG_BUDGET_SPENT.set(left == 0);
    Ok(left)
}

/// Declare a shape of log records on this connection (ABI 0.2.2): the
/// host call beneath [`LogShape`], which most plugins use instead. Returns
/// the shape's handle for [`log_shaped`]; declaring an equal shape again
/// returns the same handle.
pub fn declare_log_shape(
    level: LogLevel,
    message: &str,
    keys: &[(&str, LogValueKind)],
) -> Result<u32> {
    crate::abi::declare_log_shape(level, message, keys)
}

/// A record of a declared shape with `values`, one per key (ABI 0.2.2): the
/// host call beneath [`LogShape::log`]. Returns the bytes left in the log
/// budget, and sends nothing once it is spent, as [`log`].
pub fn log_shaped(shape: u32, values: &[u64]) -> Result<u64> {
    within_log_budget(|| crate::abi::log_shaped(shape, values))
}

/// Several records of a declared shape in one host call (ABI 0.2.6):
/// `values` holds each record's values in turn, one per key. The host call
/// beneath [`LogShape::log_records`]. Returns the bytes left in the log
/// budget after the last record, and sends nothing once it is spent, as
/// [`log`].
pub fn log_shaped_records(shape: u32, values: &[u64]) -> Result<u64> {
    within_log_budget(|| crate::abi::log_shaped_records(shape, values))
}

/// A shape of log records that a plugin makes often: their level, message
/// and keys, each key with the kind of its value (ABI 0.2.2). The shape is
/// declared to the host on its first record on each connection, and every
/// record passes only its values, which costs the host far less than
/// [`log`]'s strings and `plugin-val`s: the record the host logs is the one
/// [`log`] would make with the same level, message, keys and values.
///
/// ```no_run
/// use corequic_sdk::*;
///
/// static ACK: host::LogShape<2> = host::LogShape::new(
///     LogLevel::Info,
///     "ack processed",
///     [("largest-acknowledged", LogValueKind::U64), ("ack-delay", LogValueKind::Duration)],
/// );
///
/// fn on_ack(largest: u64, delay_ns: u64) -> Result<()> {
///     ACK.log([largest, delay_ns])
/// }
/// ```
///
/// A value is passed as a `u64`: an `S64` as its two's complement bits
/// (`v as u64`), an `F64` as `v.to_bits()`, a `Bool` as 0 or 1.
pub struct LogShape<const N: usize> {
    level: LogLevel,
    message: &'static str,
    keys: [(&'static str, LogValueKind); N],
    /// The host's handle plus one on this instance's connection; 0 until
    /// declared.
    declared: Cell<u32>,
}

// SAFETY: core wasm plugins have a single thread.
unsafe impl<const N: usize> Sync for LogShape<N> {}

impl<const N: usize> LogShape<N> {
    /// The shape of records with this level, message and keys.
    pub const fn new(
        level: LogLevel,
        message: &'static str,
        keys: [(&'static str, LogValueKind); N],
    ) -> Self {
        LogShape {
            level,
            message,
            keys,
            declared: Cell::new(0),
        }
    }

    /// A record of this shape with `values`, one per key, in order. Like
    /// [`log`], it sends nothing once the log budget is spent.
    pub fn log(&self, values: [u64; N]) -> Result<()> {
        if LOG_BUDGET_SPENT.get() {
            return Ok(());
        }
        log_shaped(self.handle()?, &values).map(|_| ())
    }

    /// A record of this shape for each of `records`, in order, in one host
    /// call (ABI 0.2.6): what [`Self::log`] of each would log, for one
    /// crossing instead of one per record. Sends nothing when `records` is
    /// empty or the log budget is spent.
    pub fn log_records(&self, records: &[[u64; N]]) -> Result<()> {
        if records.is_empty() || LOG_BUDGET_SPENT.get() {
            return Ok(());
        }
        log_shaped_records(self.handle()?, records.as_flattened()).map(|_| ())
    }

    /// The shape's handle on this connection, declared on first use.
    fn handle(&self) -> Result<u32> {
        Ok(match self.declared.get() {
            0 => {
                let handle = declare_log_shape(self.level, self.message, &self.keys)?;
                self.declared.set(handle.wrapping_add(1));
                handle
            }
            declared => declared - 1,
        })
    }
}

/// Whether the host has reported this plugin's log budget spent on this
/// connection: [`log`] then sends nothing.
pub fn log_budget_spent() -> bool {
    LOG_BUDGET_SPENT.get()
}

/// Whether the host reported the log budget spent (one flag per instance,
/// that is per connection).
static LOG_BUDGET_SPENT: crate::InstanceFlag = crate::InstanceFlag::new();

/// Queue a standard frame (PING, PATH_CHALLENGE, …).
pub fn send_frame(frame: Frame) -> Result<()> {
    raw::send_frame(&frame)
}

/// Call plugin-control `id` of another plugin of this connection.
pub fn call_plugin_control(id: u64, args: &[PluginVal]) -> Result<Vec<PluginVal>> {
    crate::abi::call_plugin_control(id, args)
}
