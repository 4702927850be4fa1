//! `core-quic:plugin@0.2.x`: the bindings of `wit/` and their conversions to
//! and from the host's model ([`crate::abi`]).
//!
//! 0.2 names fields, routines, permissions and error kinds by registry
//! identifiers and carries frames as data (specification §2.1, §9.6): the
//! conversions map identifiers to the model's enums and refuse the ones this
//! host does not know, and lay frames out with [`super::frame_data`]. The
//! host imports are thin conversions onto [`PluginState`]'s
//! version-independent host API; the exports are called through [`Guest`].

use super::frame_data;
use crate::abi as m;
use crate::state::{InBufRep, OutBufRep, PluginState};
use std::cell::OnceCell;
use std::sync::atomic::{AtomicBool, Ordering};
use wasmtime::Store;
use wasmtime::component::{
    ComponentExportIndex, Func, HasSelf, Instance, InstancePre, Linker, Resource, TypedFunc,
    WasmList, WasmStr,
};

#[allow(missing_docs, clippy::all)]
mod generated {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "plugin",
        with: {
            "core-quic:plugin/host.out-buf": crate::state::OutBufRep,
            "core-quic:plugin/host.in-buf": crate::state::InBufRep,
        },
    });
}

use generated::core_quic::plugin::host;
use generated::core_quic::plugin::types as t;
use generated::{Plugin, PluginPre};

/// Add the 0.2 host imports to `linker`.
pub(crate) fn add_to_linker(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    Plugin::add_to_linker::<PluginState, HasSelf<PluginState>>(linker, |s| s)?;
    // `log`, `log-shaped` and `log-shaped-records` again, in place of the
    // generated ones: see `log`, `log_shaped` and `log_shaped_records`.
    linker.allow_shadowing(true);
    let mut host = linker.instance(&format!("core-quic:plugin/host@{}", m::ABI_VERSION))?;
    host.func_wrap("log", log)?;
    host.func_wrap("log-shaped", log_shaped)?;
    host.func_wrap("log-shaped-records", log_shaped_records)?;
    linker.allow_shadowing(false);
    Ok(())
}

/// `log-shaped`, copying the values into the plugin's reused buffer: the
/// generated binding copies them into a new vector on every call, and a
/// plugin that makes a shaped record per packet (the ACK logger) would pay
/// that allocation per packet. At most [`crate::config::MAX_LOG_FIELDS`]
/// values are copied: a shape has no more keys, so a longer list is refused
/// whatever it holds.
fn log_shaped(
    mut store: wasmtime::StoreContextMut<'_, PluginState>,
    (shape, values): (t::LogShape, WasmList<u64>),
) -> wasmtime::Result<(Result<u64, t::Error>,)> {
    let given = values.len();
    let result = with_log_values(
        &mut store,
        &values,
        crate::config::MAX_LOG_FIELDS,
        |state, copied| state.log_shaped(shape, copied, given),
    );
    Ok((result.map_err(Into::into),))
}

/// `log-shaped-records`, copying all the values into the plugin's reused
/// buffer (see [`log_shaped`]) in one pass, then making the records.
fn log_shaped_records(
    mut store: wasmtime::StoreContextMut<'_, PluginState>,
    (shape, values): (t::LogShape, WasmList<u64>),
) -> wasmtime::Result<(Result<u64, t::Error>,)> {
    let result = with_log_values(&mut store, &values, usize::MAX, |state, copied| {
        state.log_shaped_records(shape, copied)
    });
    Ok((result.map_err(Into::into),))
}

/// The values the plugin's reused buffer keeps room for between calls: 64
/// records of 32 keys (a `log-shaped-records` call of an `observe-frames`
/// batch, a record per observation record). A longer list is served, and
/// the buffer shrinks back after it.
const KEPT_LOG_VALUES: usize = 64 * crate::config::MAX_LOG_FIELDS;

/// Run `log` on the first `most` of `values`, copied from the plugin's
/// memory into its reused buffer.
fn with_log_values<R>(
    store: &mut wasmtime::StoreContextMut<'_, PluginState>,
    values: &WasmList<u64>,
    most: usize,
    log: impl FnOnce(&mut PluginState, &[u64]) -> R,
) -> R {
    let mut copied = std::mem::take(&mut store.data_mut().log_values);
    copied.clear();
    let in_memory = values.as_le_slice(&*store);
    let kept = in_memory.len().min(most);
    copied.extend(in_memory[..kept].iter().map(|&v| u64::from_le(v)));
    let state = store.data_mut();
    let result = log(state, &copied);
    copied.truncate(KEPT_LOG_VALUES);
    copied.shrink_to(KEPT_LOG_VALUES);
    state.log_values = copied;
    result
}

/// `log`, lifting the message and the keys straight from the plugin's
/// memory into the strings of the plugin's reusable record. The generated
/// binding lifts them as new strings in a new vector, converted into a
/// third one, on every call, which a plugin that logs per packet (the ACK
/// logger) pays per packet (docs/measurements.md). Arguments that cannot
/// be lifted trap, as with the generated binding.
fn log(
    mut store: wasmtime::StoreContextMut<'_, PluginState>,
    (level, message, fields): (t::LogLevel, WasmStr, WasmList<(WasmStr, t::PluginVal)>),
) -> wasmtime::Result<(Result<u64, t::Error>,)> {
    let mut record = store.data_mut().take_log_record();
    let filled = fill_log_record(&mut store, &mut record, &message, &fields);
    let filled = match filled {
        Ok(filled) => filled,
        Err(trap) => {
            store.data_mut().log_record = Some(record);
            return Err(trap);
        }
    };
    let result = store.data_mut().log_filled(level.into(), record, filled);
    Ok((result.map_err(Into::into),))
}

/// Fill `record` with a `log` call's message and fields (at most
/// [`crate::config::MAX_LOG_FIELDS`], the ones after them lifted and
/// checked, not kept); `Ok(Err(reason))` when a value is not valid.
///
/// The fields are lifted in one pass over the list, which sets up
/// wasmtime's lift context once: lifting them one by one (`WasmList::get`)
/// set it up per field and was a fifth of a logging call. The keys kept are
/// read after that pass, which holds the store; the keys of fields not kept
/// are checked in a second pass, as the generated binding checks every
/// string.
fn fill_log_record(
    store: &mut wasmtime::StoreContextMut<'_, PluginState>,
    record: &mut crate::host::LogRecord,
    message: &WasmStr,
    fields: &WasmList<(WasmStr, t::PluginVal)>,
) -> wasmtime::Result<Result<(), String>> {
    use crate::host::push_log_text;
    record.message.clear();
    push_log_text(&mut record.message, &message.to_str(&*store)?);
    let mut keys = std::mem::take(&mut store.data_mut().log_keys);
    let kept = fill_log_fields(store, record, fields, &mut keys);
    keys.clear();
    store.data_mut().log_keys = keys;
    let (invalid, some_not_kept) = kept?;
    if some_not_kept {
        for i in 0..fields.len() {
            if let Some(field) = fields.get(&mut *store, i) {
                field?.0.to_str(&*store)?;
            }
        }
    }
    Ok(invalid.map_or(Ok(()), Err))
}

/// The first pass of [`fill_log_record`]: lift every field, keep the first
/// [`crate::config::MAX_LOG_FIELDS`] with a valid value in `record` (their
/// keys through `keys`, a scratch buffer); the first invalid value's
/// reason, and whether any field was not kept.
fn fill_log_fields(
    store: &mut wasmtime::StoreContextMut<'_, PluginState>,
    record: &mut crate::host::LogRecord,
    fields: &WasmList<(WasmStr, t::PluginVal)>,
    keys: &mut Vec<WasmStr>,
) -> wasmtime::Result<(Option<String>, bool)> {
    keys.clear();
    let mut invalid = None;
    let mut some_not_kept = false;
    for field in fields.iter(&mut *store)? {
        let (key, value) = field?;
        match val_into_model(value) {
            Ok(value) if keys.len() < crate::config::MAX_LOG_FIELDS => {
                match record.fields.get_mut(keys.len()) {
                    Some(slot) => slot.1 = value,
                    None => record.fields.push((String::new(), value)),
                }
                keys.push(key);
            }
            Ok(_) => some_not_kept = true,
            Err(reason) => {
                invalid.get_or_insert(reason);
                some_not_kept = true;
            }
        }
    }
    record.fields.truncate(keys.len());
    for (slot, key) in record.fields.iter_mut().zip(keys.iter()) {
        slot.0.clear();
        crate::host::push_log_text(&mut slot.0, &key.to_str(&*store)?);
    }
    Ok((invalid, some_not_kept))
}

/// The routine `name` of `instance`, found at `index` among its component's
/// exports.
fn routine(
    store: &mut Store<PluginState>,
    instance: &Instance,
    index: &ComponentExportIndex,
    name: &str,
) -> wasmtime::Result<Func> {
    instance
        .get_func(&mut *store, index)
        .ok_or_else(|| wasmtime::format_err!("no function `{name}`"))
}

/// Declares [`Routines`], the exports of one instance as typed functions,
/// and [`RoutineIndices`], which finds them, from one table: each routine's
/// call method, arguments, result, export name and field.
macro_rules! routines {
    ($(fn $call:ident($($arg:ident: $param:ty),*) -> $result:ty = $export:literal as $field:ident;)*) => {
        /// The routines' exports of one 0.2 instance, each looked up on its
        /// first call: a connection calls a few of the fifteen, and looking
        /// one up (a `Func` and its `VMFuncRef`) costs about as much as a
        /// call.
        #[allow(dead_code)]
        pub(crate) struct Routines {
            instance: Instance,
            indices: RoutineIndices,
            $($field: OnceCell<Func>,)*
        }

        /// Where the routines are among a component's exports, looked up
        /// once per component.
        #[derive(Clone, Copy)]
        struct RoutineIndices {
            $($field: ComponentExportIndex,)*
        }

        impl RoutineIndices {
            fn new(instance_pre: &InstancePre<PluginState>) -> wasmtime::Result<RoutineIndices> {
                let component = instance_pre.component();
                let interface = component
                    .get_export_index(None, ROUTINES)
                    .ok_or_else(|| wasmtime::format_err!("no exported instance `{ROUTINES}`"))?;
                Ok(RoutineIndices {
                    $($field: component
                        .get_export_index(Some(&interface), $export)
                        .ok_or_else(|| wasmtime::format_err!("`{ROUTINES}` has no `{}`", $export))?,)*
                })
            }

            /// Every routine of `instance` as a function, its signature
            /// checked against the component: done on a component's first
            /// instance (see [`Pre`]), so that a routine a later instance
            /// looks up on its first call needs no check.
            fn check(
                &self,
                store: &mut Store<PluginState>,
                instance: &Instance,
            ) -> wasmtime::Result<()> {
                $(
                    routine(store, instance, &self.$field, $export)?
                        .typed::<($($param,)*), ($result,)>(&*store)?;
                )*
                Ok(())
            }
        }

        #[allow(dead_code)]
        impl Routines {
            fn new(instance: Instance, indices: RoutineIndices) -> Routines {
                Routines {
                    instance,
                    indices,
                    $($field: OnceCell::new(),)*
                }
            }

            $(
                #[inline]
                pub(crate) fn $call(
                    &self,
                    store: &mut Store<PluginState>,
                    $($arg: $param),*
                ) -> wasmtime::Result<$result> {
                    let func = match self.$field.get() {
                        Some(func) => *func,
                        None => {
                            let func =
                                routine(store, &self.instance, &self.indices.$field, $export)?;
                            *self.$field.get_or_init(|| func)
                        }
                    };
                    // SAFETY: `Pre::instantiate` checked this signature
                    // against the component with `Func::typed` on its first
                    // instance; every instance of a component has the same
                    // types.
                    let func = unsafe {
                        TypedFunc::<($($param,)*), ($result,)>::new_unchecked(func)
                    };
                    func.call(store, ($($arg,)*)).map(|(r,)| r)
                }
            )*
        }
    };
}

/// The routines' interface, as a 0.2 plugin exports it (an earlier 0.2
/// plugin's is found under this name too, semver-compatible).
const ROUTINES: &str = "core-quic:plugin/routines@0.2.6";

routines! {
    fn call_manifest() -> t::PluginManifest = "manifest" as manifest;
    fn call_init() -> Result<(), t::Error> = "init" as init;
    fn call_write_transport_parameter(anchor: t::Anchor, id: t::TpId, out: Resource<OutBufRep>)
        -> Result<(), t::Error> = "write-transport-parameter" as write_transport_parameter;
    fn call_decode_transport_parameter(anchor: t::Anchor, id: t::TpId, value: Resource<InBufRep>)
        -> Result<(), t::Error> = "decode-transport-parameter" as decode_transport_parameter;
    fn call_should_send_frame(anchor: t::Anchor, frame_type: t::FrameType, ctx: t::SendContext)
        -> Result<bool, t::Error> = "should-send-frame" as should_send_frame;
    fn call_write_frame(
        anchor: t::Anchor,
        frame_type: t::FrameType,
        ctx: t::SendContext,
        out: Resource<OutBufRep>
    ) -> Result<Option<u64>, t::Error> = "write-frame" as write_frame;
    fn call_on_frame_reserved(anchor: t::Anchor, frame: t::ExtFrame, ctx: t::SendContext)
        -> Result<(), t::Error> = "on-frame-reserved" as on_frame_reserved;
    fn call_notify_frame(anchor: t::Anchor, frame: t::ExtFrame, outcome: t::FrameOutcome)
        -> Result<(), t::Error> = "notify-frame" as notify_frame;
    fn call_parse_frame(anchor: t::Anchor, frame_type: t::FrameType, payload: Resource<InBufRep>)
        -> Result<t::ParsedFrame, t::Error> = "parse-frame" as parse_frame;
    fn call_process_frame(anchor: t::Anchor, frame: &t::Frame, ctx: t::RxContext)
        -> Result<(), t::Error> = "process-frame" as process_frame;
    fn call_log_frame(anchor: t::Anchor, frame: &t::Frame)
        -> Result<String, t::Error> = "log-frame" as log_frame;
    fn call_on_plugin_timeout(id: t::TimerId, now: t::Instant)
        -> Result<(), t::Error> = "on-plugin-timeout" as on_plugin_timeout;
    fn call_plugin_control(id: t::ControlId, args: &[t::PluginVal])
        -> Result<Vec<t::PluginVal>, t::Error> = "plugin-control" as plugin_control;
    fn call_call_routine(
        routine: t::RoutineId,
        anchor: t::Anchor,
        param: u64,
        args: &[t::PluginVal]
    ) -> Result<Vec<t::PluginVal>, t::Error> = "call-routine" as call_routine;
}

/// A 0.2 plugin component linked and checked against the world, ready to
/// be instantiated on any number of connections.
///
/// The generated `PluginPre::instantiate` looks each export up with
/// `get_typed_func`, which type-checks its signature again on every
/// instance although `PluginPre::new` checked the component once: about a
/// sixth of attaching a plugin to a connection. Here the first instance
/// checks [`Routines`]' signatures (at load, where the manifest is asked
/// for) and later ones look each function up on its first call.
pub(crate) struct Pre {
    instance_pre: InstancePre<PluginState>,
    indices: RoutineIndices,
    checked: AtomicBool,
}

impl Pre {
    /// `instance_pre` as a 0.2 plugin, or why it is not one.
    pub(crate) fn new(instance_pre: InstancePre<PluginState>) -> wasmtime::Result<Pre> {
        // The generated bindings' check of the whole world.
        PluginPre::new(instance_pre.clone())?;
        Ok(Pre {
            indices: RoutineIndices::new(&instance_pre)?,
            instance_pre,
            checked: AtomicBool::new(false),
        })
    }

    /// A new instance in `store`.
    #[inline]
    pub(crate) fn instantiate(&self, store: &mut Store<PluginState>) -> wasmtime::Result<Guest> {
        let instance = self.instance_pre.instantiate(&mut *store)?;
        if !self.checked.load(Ordering::Acquire) {
            self.indices.check(store, &instance)?;
            self.checked.store(true, Ordering::Release);
        }
        Ok(Guest::new(Routines::new(instance, self.indices)))
    }
}

/// One instance of a 0.2 plugin.
pub(crate) struct Guest {
    routines: Routines,
    /// Reused for `plugin-control`'s arguments.
    args: Vec<t::PluginVal>,
    /// Reused for the frames lent to `process-frame` and `log-frame`
    /// (observers of ACK see one per packet received).
    lent: Option<t::Frame>,
    /// Reused for the payload lent to `receive-frame`.
    payload: Vec<u8>,
}

/// A routine's outcome with the generated error type.
type Call<T> = wasmtime::Result<Result<T, t::Error>>;

/// The inner result in the model's error type.
#[inline]
fn model<T, U: From<T>>(r: Call<T>) -> super::Call<U> {
    r.map(|r| r.map(U::from).map_err(m::Error::from))
}

impl Guest {
    version_independent_exports!();

    /// The instance's routines.
    #[inline]
    fn routines(&self) -> &Routines {
        &self.routines
    }

    #[inline]
    fn new(routines: Routines) -> Guest {
        Guest {
            routines,
            args: Vec::new(),
            lent: None,
            payload: Vec::new(),
        }
    }

    pub(crate) fn manifest(
        &mut self,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<Result<m::PluginManifest, super::UnknownIds>> {
        let routines = &self.routines;
        routines.call_manifest(store).map(manifest_into_model)
    }

    /// `write-frame` into the store's `out`, whose capacity the caller set.
    #[inline]
    pub(crate) fn write_frame(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: m::Anchor,
        frame_type: u64,
        ctx: m::SendContext,
    ) -> super::Call<Option<u64>> {
        let out = Resource::<OutBufRep>::new_borrow(0);
        let routines = &self.routines;
        model(routines.call_write_frame(store, anchor.into(), frame_type, ctx.into(), out))
    }

    #[inline]
    pub(crate) fn process_frame(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: m::Anchor,
        frame: &m::Frame,
        ctx: m::RxContext,
    ) -> super::Call<()> {
        let lent = self.lend_frame(frame);
        let routines = &self.routines;
        let r = routines.call_process_frame(store, anchor.into(), &lent, ctx.into());
        self.lent = Some(lent);
        model(r)
    }

    #[inline]
    pub(crate) fn log_frame(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: m::Anchor,
        frame: &m::Frame,
    ) -> super::Call<String> {
        let lent = self.lend_frame(frame);
        let routines = &self.routines;
        let r = routines.call_log_frame(store, anchor.into(), &lent);
        self.lent = Some(lent);
        model(r)
    }

    /// Routine `observe-frames` (0.2.3, CQ-ROUTINE-25) through
    /// `call-routine`: `records` are the observation records of one batch,
    /// passed as the one `bytes` argument. The buffer is lent and given back
    /// in `records`, so a connection's batches reuse one allocation.
    pub(crate) fn observe_frames(
        &mut self,
        store: &mut Store<PluginState>,
        frame_type: u64,
        records: &mut Vec<u8>,
    ) -> super::Call<()> {
        self.args.push(t::PluginVal::Bytes(std::mem::take(records)));
        let r = self.routines.call_call_routine(
            store,
            m::Routine::ObserveFrames as u32,
            t::Anchor::After,
            frame_type,
            &self.args,
        );
        if let Some(t::PluginVal::Bytes(lent)) = self.args.pop() {
            *records = lent;
        }
        Ok(match r? {
            Ok(results) if results.is_empty() => Ok(()),
            Ok(results) => Err(m::Error::InvalidArgument(format!(
                "observe-frames returned {} values; it returns none",
                results.len()
            ))),
            Err(e) => Err(e.into()),
        })
    }

    /// Routine `send-frame` (0.2.4, CQ-ROUTINE-29) through `call-routine`:
    /// the send context as six values. The frame's bytes, if the plugin
    /// returned one, are appended to `out`; a result of another shape is
    /// `Ok(Err(why))`.
    pub(crate) fn send_frame(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: m::Anchor,
        frame_type: u64,
        ctx: m::SendContext,
        out: &mut Vec<u8>,
    ) -> super::Call<Result<Option<m::SentFrame>, String>> {
        self.args.extend([
            t::PluginVal::PacketType(ctx.packet_type.into()),
            t::PluginVal::PnSpace(ctx.space.into()),
            t::PluginVal::U64(ctx.packet_number),
            t::PluginVal::U64(ctx.position as u64),
            t::PluginVal::U64(ctx.room),
            t::PluginVal::Instant(ctx.now),
        ]);
        let r = self.routines.call_call_routine(
            store,
            m::Routine::SendFrame as u32,
            anchor.into(),
            frame_type,
            &self.args,
        );
        self.args.clear();
        Ok(match r? {
            Err(e) => Err(e.into()),
            Ok(mut results) => Ok(match results.as_mut_slice() {
                [] => Ok(None),
                [
                    t::PluginVal::Bytes(bytes),
                    t::PluginVal::U64(tag),
                    rest @ ..,
                ] => match description(rest) {
                    Some(description) => {
                        out.extend_from_slice(bytes);
                        Ok(Some(m::SentFrame {
                            tag: *tag,
                            description,
                        }))
                    }
                    None => Err(shape_error(SENT_FRAME, &results)),
                },
                _ => Err(shape_error(SENT_FRAME, &results)),
            }),
        })
    }

    /// Routine `receive-frame` (0.2.4, CQ-ROUTINE-30) through
    /// `call-routine`: the payload and the rx-context as five values. A
    /// result of another shape is `Ok(Err(why))`.
    pub(crate) fn receive_frame(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: m::Anchor,
        frame_type: u64,
        payload: &[u8],
        ctx: m::RxContext,
    ) -> super::Call<Result<m::ReceivedFrame, String>> {
        let mut lent = std::mem::take(&mut self.payload);
        lent.clear();
        lent.extend_from_slice(payload);
        self.args.extend([
            t::PluginVal::Bytes(lent),
            t::PluginVal::PacketType(ctx.packet_type.into()),
            t::PluginVal::PnSpace(ctx.space.into()),
            t::PluginVal::U64(ctx.packet_number),
            t::PluginVal::Instant(ctx.now),
        ]);
        let r = self.routines.call_call_routine(
            store,
            m::Routine::ReceiveFrame as u32,
            anchor.into(),
            frame_type,
            &self.args,
        );
        // Empties the arguments, and takes the payload's buffer back.
        if let Some(t::PluginVal::Bytes(lent)) = self.args.drain(..).next() {
            self.payload = lent;
        }
        Ok(match r? {
            Err(e) => Err(e.into()),
            Ok(mut results) => Ok(match results.as_mut_slice() {
                [
                    t::PluginVal::U64(consumed),
                    t::PluginVal::U64(tag),
                    rest @ ..,
                ] => match description(rest) {
                    Some(description) => Ok(m::ReceivedFrame {
                        frame: m::ExtFrame {
                            frame_type,
                            tag: *tag,
                        },
                        consumed: *consumed,
                        description,
                    }),
                    None => Err(shape_error(RECEIVED_FRAME, &results)),
                },
                _ => Err(shape_error(RECEIVED_FRAME, &results)),
            }),
        })
    }

    /// A frame the host keeps, as data, in the buffers of the last frame
    /// lent (the caller puts them back in `lent`).
    #[inline]
    fn lend_frame(&mut self, frame: &m::Frame) -> t::Frame {
        let mut lent = self.lent.take().unwrap_or(t::Frame {
            frame_type: 0,
            values: Vec::new(),
            data: Vec::new(),
        });
        lent.frame_type = frame_data::write_data(frame, &mut lent.values, &mut lent.data);
        lent
    }

    #[inline]
    pub(crate) fn plugin_control(
        &mut self,
        store: &mut Store<PluginState>,
        id: u64,
        args: &[m::PluginVal],
    ) -> super::Call<Vec<m::PluginVal>> {
        if !args.is_empty() {
            self.args.extend(args.iter().cloned().map(val_into_wit));
        }
        let routines = &self.routines;
        let r = routines.call_plugin_control(store, id, &self.args);
        if !self.args.is_empty() {
            self.args.clear();
        }
        results_into_model(r)
    }
}

/// A routine's list of values; one that carries a frame that does not fit
/// its layout is the plugin's `invalid-argument` (CQ-RECV-9).
fn results_into_model(r: Call<Vec<t::PluginVal>>) -> super::Call<Vec<m::PluginVal>> {
    Ok(match r? {
        Ok(vals) if vals.is_empty() => Ok(Vec::new()),
        Ok(vals) => vals_into_model(vals).map_err(m::Error::InvalidArgument),
        Err(e) => Err(e.into()),
    })
}

/// The results of `send-frame` (CQ-ROUTINE-29), for its errors.
const SENT_FRAME: &str = "nothing, or bytes, a u64 tag and optionally a string";
/// The results of `receive-frame` (CQ-ROUTINE-30), for its errors.
const RECEIVED_FRAME: &str = "a u64 consumed, a u64 tag and optionally a string";

/// The optional last value of a fused frame routine's results
/// (CQ-ROUTINE-29, CQ-ROUTINE-30): `Some(None)` for none, `Some(Some(d))`
/// for one string, `None` for anything else.
fn description(rest: &mut [t::PluginVal]) -> Option<Option<String>> {
    match rest {
        [] => Some(None),
        [t::PluginVal::String(d)] => Some(Some(std::mem::take(d))),
        _ => None,
    }
}

/// What a fused frame routine returned instead of the results it
/// `expected`, by the cases of the list: `returned [u64, bytes]; …`.
fn shape_error(expected: &str, vals: &[t::PluginVal]) -> String {
    let cases: Vec<&str> = vals
        .iter()
        .map(|v| match v {
            t::PluginVal::None => "none",
            t::PluginVal::Bool(_) => "bool",
            t::PluginVal::U32(_) => "u32",
            t::PluginVal::U64(_) => "u64",
            t::PluginVal::S64(_) => "s64",
            t::PluginVal::F64(_) => "f64",
            t::PluginVal::Bytes(_) => "bytes",
            t::PluginVal::String(_) => "string",
            t::PluginVal::Duration(_) => "duration",
            t::PluginVal::Instant(_) => "instant",
            t::PluginVal::SocketAddr(_) => "socket-addr",
            t::PluginVal::Frame(_) => "frame",
            t::PluginVal::PacketType(_) => "packet-type",
            t::PluginVal::PnSpace(_) => "pn-space",
        })
        .collect();
    format!("returned [{}]; it returns {expected}", cases.join(", "))
}

fn vals_into_model(vals: Vec<t::PluginVal>) -> Result<Vec<m::PluginVal>, String> {
    let mut out = Vec::with_capacity(vals.len());
    for v in vals {
        out.push(val_into_model(v)?);
    }
    Ok(out)
}

/// The manifest in the model, or the identifiers this host does not know.
fn manifest_into_model(v: t::PluginManifest) -> Result<m::PluginManifest, super::UnknownIds> {
    let mut missing = Vec::new();
    let mut unknown = |what: String| {
        if !missing.contains(&what) {
            missing.push(what);
        }
    };
    let mut bindings = Vec::with_capacity(v.bindings.len());
    for b in &v.bindings {
        match m::Routine::from_id(b.routine) {
            Some(routine) => bindings.push(m::Binding {
                routine,
                anchor: b.anchor.into(),
                param: b.param,
            }),
            None => unknown(format!("routine {}", b.routine)),
        }
    }
    let mut fields = |ids: &[u32], access: &str| {
        let mut out = Vec::with_capacity(ids.len());
        for &id in ids {
            match m::FieldId::from_id(id) {
                Some(f) => out.push(f),
                None => unknown(format!("field {id} ({access})")),
            }
        }
        out
    };
    let reads = fields(&v.reads, "read");
    let writes = fields(&v.writes, "write");
    let mut permissions = Vec::with_capacity(v.permissions.len());
    for &id in &v.permissions {
        match m::Permission::from_id(id) {
            Some(p) => permissions.push(p),
            None => unknown(format!("permission {id}")),
        }
    }
    if !missing.is_empty() {
        return Err(super::UnknownIds {
            name: v.name,
            missing,
        });
    }
    Ok(m::PluginManifest {
        name: v.name,
        version: v.version,
        abi_version: v.abi_version,
        bindings,
        reads,
        writes,
        permissions,
    })
}

// The host imports: conversions onto `PluginState`'s host API.

buffer_resources!(host, t);

impl PluginState {
    /// A field reference in the model; an identifier this host does not
    /// implement cannot have been granted, so its use is a denial
    /// (CQ-FIELD-13).
    fn field_ref(&mut self, field: t::FieldRef) -> Result<m::FieldRef, m::Error> {
        match m::FieldId::from_id(field.id) {
            Some(id) => Ok(m::FieldRef {
                id,
                space: field.space.map(Into::into),
            }),
            None => Err(self.deny(format!(
                "field {} is not implemented by this host (ABI {})",
                field.id,
                m::ABI_VERSION
            ))),
        }
    }
}

impl host::Host for PluginState {
    version_independent_host_calls!(t);

    #[inline]
    fn register_frame_one_in_flight(
        &mut self,
        registration: t::FrameRegistration,
    ) -> Result<(), t::Error> {
        Ok(PluginState::register_frame_one_in_flight(
            self,
            registration.into(),
        )?)
    }

    #[inline]
    fn get_field(&mut self, field: t::FieldRef) -> Result<t::PluginVal, t::Error> {
        let field = self.field_ref(field)?;
        Ok(val_into_wit(PluginState::get_field(self, field)?))
    }

    fn get_fields(&mut self, fields: Vec<t::FieldRef>) -> Result<Vec<t::PluginVal>, t::Error> {
        let fields = fields
            .into_iter()
            .map(|f| self.field_ref(f))
            .collect::<Result<Vec<_>, _>>()?;
        let vals = PluginState::get_fields(self, fields)?;
        Ok(vals.into_iter().map(val_into_wit).collect())
    }

    #[inline]
    fn set_field(&mut self, field: t::FieldRef, value: t::PluginVal) -> Result<(), t::Error> {
        let field = self.field_ref(field)?;
        let value = val_into_model(value).map_err(m::Error::InvalidArgument)?;
        Ok(PluginState::set_field(self, field, value)?)
    }

    /// Not called: the linker defines `log` with the function of that name
    /// above, which lifts without allocating. The generated trait still
    /// requires it.
    fn log(
        &mut self,
        level: t::LogLevel,
        message: String,
        fields: Vec<(String, t::PluginVal)>,
    ) -> Result<u64, t::Error> {
        let fields = fields
            .into_iter()
            .map(|(k, v)| Ok((k, val_into_model(v)?)))
            .collect::<Result<Vec<_>, String>>();
        Ok(PluginState::log(self, level.into(), message, fields)?)
    }

    fn declare_log_shape(
        &mut self,
        level: t::LogLevel,
        message: String,
        keys: Vec<(String, t::LogValueKind)>,
    ) -> Result<t::LogShape, t::Error> {
        let keys = keys.into_iter().map(|(k, kind)| (k, kind.into())).collect();
        Ok(PluginState::declare_log_shape(
            self,
            level.into(),
            message,
            keys,
        )?)
    }

    /// Not called: the linker defines `log-shaped` with the function of that
    /// name above, which copies the values into a reused buffer. The
    /// generated trait still requires it.
    fn log_shaped(&mut self, shape: t::LogShape, values: Vec<u64>) -> Result<u64, t::Error> {
        Ok(PluginState::log_shaped(self, shape, &values, values.len())?)
    }

    /// Not called: the linker defines `log-shaped-records` with the
    /// function of that name above. The generated trait still requires it.
    fn log_shaped_records(
        &mut self,
        shape: t::LogShape,
        values: Vec<u64>,
    ) -> Result<u64, t::Error> {
        Ok(PluginState::log_shaped_records(self, shape, &values)?)
    }

    #[inline]
    fn send_frame(&mut self, frame: t::Frame) -> Result<(), t::Error> {
        Ok(PluginState::send_frame(self, frame_into_model(frame))?)
    }

    fn call_plugin_control(
        &mut self,
        id: u64,
        args: Vec<t::PluginVal>,
    ) -> Result<Vec<t::PluginVal>, t::Error> {
        // Arguments the callee could not be given fail the call before it.
        let args = vals_into_model(args).map_err(m::Error::InvalidArgument)?;
        let results = PluginState::call_plugin_control(self, id, &args)?;
        Ok(results.into_iter().map(val_into_wit).collect())
    }
}

// Conversions between the generated types and the model.

/// A frame as data (§9.6). Out of line, so that the scalar cases of
/// `plugin-val`, which are most values, inline into the loops over lists.
#[inline(never)]
fn frame_into_wit(frame: m::Frame) -> t::Frame {
    let (frame_type, values, data) = frame_data::to_data(frame);
    t::Frame {
        frame_type,
        values,
        data,
    }
}

/// The frame a plugin's data describes, or why it does not fit its layout.
/// Out of line, as [`frame_into_wit`].
#[inline(never)]
fn frame_into_model(frame: t::Frame) -> Result<m::Frame, String> {
    frame_data::from_data(frame.frame_type, frame.values, frame.data)
}

/// `plugin-val` to the plugin.
#[inline]
fn val_into_wit(v: m::PluginVal) -> t::PluginVal {
    match v {
        m::PluginVal::None => t::PluginVal::None,
        m::PluginVal::Bool(x) => t::PluginVal::Bool(x),
        m::PluginVal::U32(x) => t::PluginVal::U32(x),
        m::PluginVal::U64(x) => t::PluginVal::U64(x),
        m::PluginVal::S64(x) => t::PluginVal::S64(x),
        m::PluginVal::F64(x) => t::PluginVal::F64(x),
        m::PluginVal::Bytes(x) => t::PluginVal::Bytes(x),
        m::PluginVal::String(x) => t::PluginVal::String(x),
        m::PluginVal::Duration(x) => t::PluginVal::Duration(x),
        m::PluginVal::Instant(x) => t::PluginVal::Instant(x),
        m::PluginVal::SocketAddr(x) => t::PluginVal::SocketAddr(x.into()),
        m::PluginVal::Frame(x) => t::PluginVal::Frame(frame_into_wit(x)),
        m::PluginVal::PacketType(x) => t::PluginVal::PacketType(x.into()),
        m::PluginVal::PnSpace(x) => t::PluginVal::PnSpace(x.into()),
    }
}

/// `plugin-val` from the plugin: a frame that does not fit its layout is
/// refused.
#[inline]
fn val_into_model(v: t::PluginVal) -> Result<m::PluginVal, String> {
    Ok(match v {
        t::PluginVal::None => m::PluginVal::None,
        t::PluginVal::Bool(x) => m::PluginVal::Bool(x),
        t::PluginVal::U32(x) => m::PluginVal::U32(x),
        t::PluginVal::U64(x) => m::PluginVal::U64(x),
        t::PluginVal::S64(x) => m::PluginVal::S64(x),
        t::PluginVal::F64(x) => m::PluginVal::F64(x),
        t::PluginVal::Bytes(x) => m::PluginVal::Bytes(x),
        t::PluginVal::String(x) => m::PluginVal::String(x),
        t::PluginVal::Duration(x) => m::PluginVal::Duration(x),
        t::PluginVal::Instant(x) => m::PluginVal::Instant(x),
        t::PluginVal::SocketAddr(x) => m::PluginVal::SocketAddr(x.into()),
        t::PluginVal::Frame(x) => m::PluginVal::Frame(frame_into_model(x)?),
        t::PluginVal::PacketType(x) => m::PluginVal::PacketType(x.into()),
        t::PluginVal::PnSpace(x) => m::PluginVal::PnSpace(x.into()),
    })
}

impl From<m::Error> for t::Error {
    #[inline]
    fn from(e: m::Error) -> Self {
        let (kind, value, message) = e.into_parts();
        t::Error {
            kind,
            value,
            message,
        }
    }
}

impl From<t::Error> for m::Error {
    #[inline]
    fn from(e: t::Error) -> Self {
        m::Error::from_parts(e.kind, e.value, e.message)
    }
}

same_cases! {
    PacketType { Initial, ZeroRtt, Handshake, OneRtt, Retry, VersionNegotiation }
    PnSpace { Initial, Handshake, ApplicationData }
    Anchor { Define, Before, After }
    SendPosition { First, AfterAck, End }
    FrameOutcome { Acked, Lost }
    LogLevel { Error, Warn, Info, Debug, Trace }
    LogValueKind { U64, S64, F64, Bool, Duration, Instant }
}

same_fields! {
    SocketAddr { ip, port }
    ExtFrame { frame_type, tag }
    FrameRegistration { frame_type, position, ack_eliciting, in_flight }
    SendContext { packet_type, space, packet_number, position, room, now }
    RxContext { packet_type, space, packet_number, now }
    ParsedFrame { frame, consumed }
}

impl From<m::IpAddr> for t::IpAddr {
    #[inline]
    fn from(v: m::IpAddr) -> Self {
        match v {
            m::IpAddr::V4(a) => t::IpAddr::V4(a),
            m::IpAddr::V6(a) => t::IpAddr::V6(a),
        }
    }
}

impl From<t::IpAddr> for m::IpAddr {
    #[inline]
    fn from(v: t::IpAddr) -> Self {
        match v {
            t::IpAddr::V4(a) => m::IpAddr::V4(a),
            t::IpAddr::V6(a) => m::IpAddr::V6(a),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(reads: Vec<u32>, routine: u32, permission: u32) -> t::PluginManifest {
        t::PluginManifest {
            name: "p".into(),
            version: "1".into(),
            abi_version: "0.2.0".into(),
            bindings: vec![t::Binding {
                routine,
                anchor: t::Anchor::Define,
                param: 0x42,
            }],
            reads,
            writes: Vec::new(),
            permissions: vec![permission],
        }
    }

    #[test]
    fn manifests_map_registry_identifiers_to_the_model() {
        let m = manifest_into_model(manifest(vec![1, 23], 4, 3)).expect("known ids");
        assert_eq!(
            m.reads,
            [m::FieldId::IsServer, m::FieldId::CongestionWindow]
        );
        assert_eq!(m.bindings[0].routine, m::Routine::WriteFrame);
        assert_eq!(m.permissions, [m::Permission::Logging]);
    }

    #[test]
    fn manifests_naming_unknown_identifiers_are_refused_with_each_one() {
        let e = manifest_into_model(manifest(vec![1, 999], 0xf1, 77)).expect_err("unknown ids");
        assert_eq!(e.name, "p");
        // 0xf1 is the model's legacy prepare-frame, which has no identifier.
        assert_eq!(
            e.missing,
            ["routine 241", "field 999 (read)", "permission 77"]
        );
    }

    #[test]
    fn errors_keep_their_kind_value_and_message() {
        for e in [
            m::Error::Denied("no".into()),
            m::Error::BufferTooShort(9),
            m::Error::Plugin(0xb5e),
            m::Error::Other {
                kind: 900,
                value: 1,
                message: "later".into(),
            },
        ] {
            assert_eq!(m::Error::from(t::Error::from(e.clone())), e);
        }
        let too_short = t::Error::from(m::Error::BufferTooShort(9));
        assert_eq!((too_short.kind, too_short.value), (4, 9));
    }

    #[test]
    fn plugin_values_refuse_frames_that_do_not_fit_their_layout() {
        let good = t::PluginVal::Frame(t::Frame {
            frame_type: 0x10,
            values: vec![5],
            data: Vec::new(),
        });
        assert_eq!(
            val_into_model(good),
            Ok(m::PluginVal::Frame(m::Frame::MaxData(5)))
        );
        let bad = t::PluginVal::Frame(t::Frame {
            frame_type: 0x10,
            values: Vec::new(),
            data: Vec::new(),
        });
        assert!(val_into_model(bad).is_err());
    }
}
