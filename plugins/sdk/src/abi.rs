//! Canonical-ABI glue written by hand for the calls that pass `plugin-val`s:
//! `get-field`, `log` and `call-plugin-control` among the host calls, and
//! the `plugin-control` and `call-routine` exports; and for the shaped log
//! (`declare-log-shape`, `log-shaped`), whose keys and values it passes from
//! where the plugin keeps them.
//!
//! `wit-bindgen` inlines the lifting and lowering of `plugin-val`, a
//! 14-case variant with lists, strings and addresses among its cases, into
//! every function that passes one, and its `log` takes owned field names and
//! values, so the SDK had to copy a record's fields before sending it. Here
//! [`lift_val`] and [`lower_val`] are written once, and lowering borrows: a
//! `log` record or a control's arguments are read from where the plugin
//! keeps them. This is most of the code of a plugin with controls or logs
//! (see `docs/measurements.md`, "Plugin component sizes").
//!
//! Layouts (canonical ABI, wasm32): a `plugin-val` is 32 bytes, aligned to
//! 8, its case in the first byte and its payload at offset 8; a `frame` is
//! its type (u64) then two lists of (pointer, length); an `error` is its
//! kind (u32), its value (u64) at 8 and its message at 16; a `result` puts
//! its case in the first byte and its payload at 8. The component's
//! validation checks each function's core signature against the WIT when
//! the plugin is componentized.

use alloc::alloc::{Layout, dealloc};
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::mem::MaybeUninit;

use crate::bindings::core_quic::plugin::types::{IpAddr, SocketAddr};
use crate::bindings::exports::core_quic::plugin::routines::Guest;
use crate::{
    Anchor, Error, FieldRef, Frame, LogLevel, LogValueKind, PacketType, PluginVal, PnSpace, Result,
    trap,
};

/// Size of a lowered `plugin-val`.
const VAL_SIZE: usize = 32;

/// A lowered `plugin-val`.
#[repr(C, align(8))]
struct RawVal([u8; VAL_SIZE]);

/// A lowered `tuple<string, plugin-val>`: the name, then the value at 8.
#[repr(C, align(8))]
struct RawField([u8; 8 + VAL_SIZE]);

/// Room for the largest result these functions return:
/// `result<plugin-val, error>`.
#[repr(C, align(8))]
struct RetArea(MaybeUninit<[u8; 8 + VAL_SIZE]>);

impl RetArea {
    /// Room the host writes a result into (not initialised: the host writes
    /// what is read).
    fn new() -> RetArea {
        RetArea(MaybeUninit::uninit())
    }

    fn ptr(&mut self) -> *mut u8 {
        self.0.as_mut_ptr().cast()
    }
}

#[cfg(target_arch = "wasm32")]
#[link(wasm_import_module = "core-quic:plugin/host@0.2.6")]
unsafe extern "C" {
    #[link_name = "get-field"]
    fn get_field_import(id: u32, has_space: u32, space: u32, ret: *mut u8);
    #[link_name = "log"]
    fn log_import(
        level: u32,
        message: *const u8,
        message_len: usize,
        fields: *const u8,
        fields_len: usize,
        ret: *mut u8,
    );
    #[link_name = "call-plugin-control"]
    fn call_plugin_control_import(id: u64, args: *const u8, args_len: usize, ret: *mut u8);
    #[link_name = "declare-log-shape"]
    fn declare_log_shape_import(
        level: u32,
        message: *const u8,
        message_len: usize,
        keys: *const u8,
        keys_len: usize,
        ret: *mut u8,
    );
    #[link_name = "log-shaped"]
    fn log_shaped_import(shape: u32, values: *const u64, values_len: usize, ret: *mut u8);
    #[link_name = "log-shaped-records"]
    fn log_shaped_records_import(shape: u32, values: *const u64, values_len: usize, ret: *mut u8);
}

// Outside wasm (host-side unit tests of plugins) there is no host to call.
#[cfg(not(target_arch = "wasm32"))]
unsafe fn get_field_import(_: u32, _: u32, _: u32, _: *mut u8) {
    trap()
}
#[cfg(not(target_arch = "wasm32"))]
unsafe extern "C" fn level_message_list_import(
    _: u32,
    _: *const u8,
    _: usize,
    _: *const u8,
    _: usize,
    _: *mut u8,
) {
    trap()
}
#[cfg(not(target_arch = "wasm32"))]
use level_message_list_import as log_import;
#[cfg(not(target_arch = "wasm32"))]
use level_message_list_import as declare_log_shape_import;
#[cfg(not(target_arch = "wasm32"))]
unsafe fn call_plugin_control_import(_: u64, _: *const u8, _: usize, _: *mut u8) {
    trap()
}
#[cfg(not(target_arch = "wasm32"))]
unsafe fn log_shaped_import(_: u32, _: *const u64, _: usize, _: *mut u8) {
    trap()
}
#[cfg(not(target_arch = "wasm32"))]
use log_shaped_import as log_shaped_records_import;

unsafe fn read<T: Copy>(p: *const u8) -> T {
    // SAFETY: the caller points at a lowered value of type T.
    unsafe { p.cast::<T>().read() }
}

unsafe fn write<T>(p: *mut u8, value: T) {
    // SAFETY: the caller points at room for a T.
    unsafe { p.cast::<T>().write(value) }
}

/// Take ownership of the list at `p` (pointer, length), which the host
/// allocated with `cabi_realloc`.
unsafe fn lift_list<T>(p: *const u8) -> Vec<T> {
    // SAFETY: the host wrote a list of `len` T at `ptr` into memory it got
    // from this plugin's allocator, and gives it up.
    unsafe {
        let len = read::<u32>(p.add(4)) as usize;
        if len == 0 {
            return Vec::new();
        }
        Vec::from_raw_parts(read::<u32>(p) as usize as *mut T, len, len)
    }
}

/// Write `items` at `p` as (pointer, length), borrowing them.
unsafe fn lower_list<T>(p: *mut u8, items: &[T]) {
    // SAFETY: the caller points at 8 bytes of room.
    unsafe {
        write(p, items.as_ptr() as usize as u32);
        write(p.add(4), items.len() as u32);
    }
}

unsafe fn lift_string(p: *const u8) -> String {
    // SAFETY: the canonical ABI lowers only valid UTF-8 as a string.
    unsafe { String::from_utf8_unchecked(lift_list(p)) }
}

/// The value of the enum case `case`; a trap if the enum has no such case
/// (it has `cases`).
unsafe fn lift_enum<T>(case: u32, cases: u32, lift: unsafe fn(u8) -> T) -> T {
    if case >= cases {
        trap();
    }
    // SAFETY: `case` is one of the enum's cases.
    unsafe { lift(case as u8) }
}

/// Lift the `plugin-val` at `p`, taking ownership of its lists.
unsafe fn lift_val(p: *const u8) -> PluginVal {
    // SAFETY: `p` points at a lowered plugin-val (see the module docs).
    unsafe {
        let at = |offset: usize| p.add(8 + offset);
        match *p {
            0 => PluginVal::None,
            1 => PluginVal::Bool(*at(0) != 0),
            2 => PluginVal::U32(read(at(0))),
            3 => PluginVal::U64(read(at(0))),
            4 => PluginVal::S64(read(at(0))),
            5 => PluginVal::F64(read(at(0))),
            6 => PluginVal::Bytes(lift_list(at(0))),
            7 => PluginVal::String(lift_string(at(0))),
            8 => PluginVal::Duration(read(at(0))),
            9 => PluginVal::Instant(read(at(0))),
            10 => {
                let u16_at = |i: usize| read::<u16>(at(2 + 2 * i));
                let ip = match *at(0) {
                    0 => IpAddr::V4((*at(2), *at(3), *at(4), *at(5))),
                    1 => IpAddr::V6((
                        u16_at(0),
                        u16_at(1),
                        u16_at(2),
                        u16_at(3),
                        u16_at(4),
                        u16_at(5),
                        u16_at(6),
                        u16_at(7),
                    )),
                    _ => trap(),
                };
                PluginVal::SocketAddr(SocketAddr {
                    ip,
                    port: read(at(18)),
                })
            }
            11 => PluginVal::Frame(Frame {
                frame_type: read(at(0)),
                values: lift_list(at(8)),
                data: lift_list(at(16)),
            }),
            12 => PluginVal::PacketType(lift_enum(u32::from(*at(0)), 6, PacketType::_lift)),
            13 => PluginVal::PnSpace(lift_enum(u32::from(*at(0)), 3, PnSpace::_lift)),
            _ => trap(),
        }
    }
}

/// Lower `value` at `p`, borrowing its lists: `value` must outlive the
/// host's reading of it.
unsafe fn lower_val(value: &PluginVal, p: *mut u8) {
    // SAFETY: `p` points at VAL_SIZE bytes of room, aligned to 8.
    unsafe {
        let at = |offset: usize| p.add(8 + offset);
        let case = match value {
            PluginVal::None => 0,
            PluginVal::Bool(v) => {
                *at(0) = *v as u8;
                1
            }
            PluginVal::U32(v) => {
                write(at(0), *v);
                2
            }
            PluginVal::U64(v) => {
                write(at(0), *v);
                3
            }
            PluginVal::S64(v) => {
                write(at(0), *v);
                4
            }
            PluginVal::F64(v) => {
                write(at(0), *v);
                5
            }
            PluginVal::Bytes(v) => {
                lower_list(at(0), v);
                6
            }
            PluginVal::String(v) => {
                lower_list(at(0), v.as_bytes());
                7
            }
            PluginVal::Duration(v) => {
                write(at(0), *v);
                8
            }
            PluginVal::Instant(v) => {
                write(at(0), *v);
                9
            }
            PluginVal::SocketAddr(a) => {
                match a.ip {
                    IpAddr::V4((a0, a1, a2, a3)) => {
                        *at(0) = 0;
                        for (i, b) in [a0, a1, a2, a3].into_iter().enumerate() {
                            *at(2 + i) = b;
                        }
                    }
                    IpAddr::V6((a0, a1, a2, a3, a4, a5, a6, a7)) => {
                        *at(0) = 1;
                        for (i, s) in [a0, a1, a2, a3, a4, a5, a6, a7].into_iter().enumerate() {
                            write(at(2 + 2 * i), s);
                        }
                    }
                }
                write(at(18), a.port);
                10
            }
            PluginVal::Frame(f) => {
                write(at(0), f.frame_type);
                lower_list(at(8), &f.values);
                lower_list(at(16), &f.data);
                11
            }
            PluginVal::PacketType(t) => {
                *at(0) = *t as u8;
                12
            }
            PluginVal::PnSpace(s) => {
                *at(0) = *s as u8;
                13
            }
        };
        *p = case;
    }
}

/// Lift the `error` at `p`, taking ownership of its message.
unsafe fn lift_error(p: *const u8) -> Error {
    // SAFETY: `p` points at a lowered error record.
    unsafe {
        Error {
            kind: read(p),
            value: read(p.add(8)),
            message: lift_string(p.add(16)),
        }
    }
}

/// Lift the `result<T, error>` at `ret`, with `ok` lifting T from its
/// payload.
unsafe fn lift_result<T>(ret: &mut RetArea, ok: impl FnOnce(*const u8) -> T) -> Result<T> {
    let p = ret.ptr().cast_const();
    // SAFETY: the host wrote a result at `ret`; its payload is at 8.
    unsafe {
        match *p {
            0 => Ok(ok(p.add(8))),
            _ => Err(lift_error(p.add(8))),
        }
    }
}

/// Lift the list of `plugin-val`s at `p`, taking ownership of it.
unsafe fn lift_vals(base: *mut u8, len: usize) -> Vec<PluginVal> {
    let mut vals = Vec::with_capacity(len);
    // SAFETY: the host wrote `len` plugin-vals at `base` into memory from
    // this plugin's allocator, and gives it up.
    unsafe {
        for i in 0..len {
            vals.push(lift_val(base.add(i * VAL_SIZE)));
        }
        if len != 0 {
            dealloc(base, Layout::from_size_align_unchecked(len * VAL_SIZE, 8));
        }
    }
    vals
}

/// `values` lowered, borrowing their lists.
fn lower_vals(values: &[PluginVal]) -> Vec<RawVal> {
    values
        .iter()
        .map(|v| {
            let mut raw = RawVal([0; VAL_SIZE]);
            // SAFETY: `raw` is a plugin-val's room.
            unsafe { lower_val(v, raw.0.as_mut_ptr()) };
            raw
        })
        .collect()
}

/// `get-field`.
pub(crate) fn get_field(field: FieldRef) -> Result<PluginVal> {
    let mut ret = RetArea::new();
    let (has_space, space) = match field.space {
        Some(space) => (1, space as u32),
        None => (0, 0),
    };
    // SAFETY: the signature is the canonical ABI's for get-field, and `ret`
    // has room for its result.
    unsafe {
        get_field_import(field.id, has_space, space, ret.ptr());
        lift_result(&mut ret, |p| lift_val(p))
    }
}

/// The core signature of the host calls that take a level, a message and a
/// list, and return a result: `log` and `declare-log-shape`.
type LevelMessageList = unsafe extern "C" fn(u32, *const u8, usize, *const u8, usize, *mut u8);

/// Call `import` with `level`, `message` and `items`, each lowered as the
/// import's list elements; `ok` lifts the payload of its `ok` result.
fn call_level_message_list<I, T>(
    import: LevelMessageList,
    level: LogLevel,
    message: &str,
    items: &[I],
    ok: impl FnOnce(*const u8) -> T,
) -> Result<T> {
    let mut ret = RetArea::new();
    // SAFETY: `import` has the canonical ABI's signature for a call of a
    // level, a message and a list whose elements are laid out as `I`; what
    // `items` points to lives until the call returns.
    unsafe {
        import(
            level as u32,
            message.as_ptr(),
            message.len(),
            items.as_ptr().cast(),
            items.len(),
            ret.ptr(),
        );
        lift_result(&mut ret, ok)
    }
}

/// `log`, with the fields borrowed: returns the budget left.
pub(crate) fn log(level: LogLevel, message: &str, fields: &[(&str, PluginVal)]) -> Result<u64> {
    let raw: Vec<RawField> = fields
        .iter()
        .map(|(name, value)| {
            let mut raw = RawField([0; 8 + VAL_SIZE]);
            // SAFETY: `raw` has room for the name and, at 8, the value.
            unsafe {
                lower_list(raw.0.as_mut_ptr(), name.as_bytes());
                lower_val(value, raw.0.as_mut_ptr().add(8));
            }
            raw
        })
        .collect();
    // SAFETY (of the read): a `log` result's payload is a u64.
    call_level_message_list(log_import, level, message, &raw, |p| unsafe {
        read::<u64>(p)
    })
}

/// A lowered `tuple<string, log-value-kind>`: the key, then the kind at 8.
#[repr(C)]
struct RawShapeKey {
    key: *const u8,
    key_len: usize,
    kind: u32,
}

/// `declare-log-shape`.
pub(crate) fn declare_log_shape(
    level: LogLevel,
    message: &str,
    keys: &[(&str, LogValueKind)],
) -> Result<u32> {
    let raw: Vec<RawShapeKey> = keys
        .iter()
        .map(|(key, kind)| RawShapeKey {
            key: key.as_ptr(),
            key_len: key.len(),
            kind: *kind as u32,
        })
        .collect();
    // SAFETY (of the read): a `declare-log-shape` result's payload is a u32.
    call_level_message_list(declare_log_shape_import, level, message, &raw, |p| unsafe {
        read::<u32>(p)
    })
}

/// `log-shaped`.
pub(crate) fn log_shaped(shape: u32, values: &[u64]) -> Result<u64> {
    let mut ret = RetArea::new();
    // SAFETY: the signature is the canonical ABI's for log-shaped; `values`
    // lives until the call returns.
    unsafe {
        log_shaped_import(shape, values.as_ptr(), values.len(), ret.ptr());
        lift_result(&mut ret, |p| read::<u64>(p))
    }
}

/// `log-shaped-records`: `values` holds the records' values in turn.
pub(crate) fn log_shaped_records(shape: u32, values: &[u64]) -> Result<u64> {
    let mut ret = RetArea::new();
    // SAFETY: the signature is the canonical ABI's for log-shaped-records
    // (that of log-shaped); `values` lives until the call returns.
    unsafe {
        log_shaped_records_import(shape, values.as_ptr(), values.len(), ret.ptr());
        lift_result(&mut ret, |p| read::<u64>(p))
    }
}

/// `call-plugin-control`.
pub(crate) fn call_plugin_control(id: u64, args: &[PluginVal]) -> Result<Vec<PluginVal>> {
    let raw = lower_vals(args);
    let mut ret = RetArea::new();
    // SAFETY: the signature is the canonical ABI's for
    // call-plugin-control; `args` lives until the call returns.
    unsafe {
        call_plugin_control_import(id, raw.as_ptr().cast(), raw.len(), ret.ptr());
        lift_result(&mut ret, |p| {
            lift_vals(
                read::<u32>(p) as usize as *mut u8,
                read::<u32>(p.add(4)) as usize,
            )
        })
    }
}

/// What an export that returns `result<list<plugin-val>, error>` returned,
/// kept (with its lowered list) until its post-return function.
struct Returned {
    result: UnsafeCell<Option<Result<Vec<PluginVal>>>>,
    lowered: UnsafeCell<Vec<RawVal>>,
    area: UnsafeCell<RetArea>,
}

// SAFETY: core wasm plugins have a single thread.
unsafe impl Sync for Returned {}

static RETURNED: Returned = Returned {
    result: UnsafeCell::new(None),
    lowered: UnsafeCell::new(Vec::new()),
    area: UnsafeCell::new(RetArea(MaybeUninit::zeroed())),
};

/// Lower what an export returns into the return area, keeping it until the
/// post-return function.
fn return_vals(result: Result<Vec<PluginVal>>) -> *mut u8 {
    // SAFETY: the host calls one export at a time and the post-return
    // function before the next, so nothing else uses RETURNED now.
    unsafe {
        let ret = (*RETURNED.area.get()).ptr();
        match &result {
            Ok(values) => {
                let lowered = lower_vals(values);
                *ret = 0;
                lower_list(ret.add(8), &lowered);
                *RETURNED.lowered.get() = lowered;
            }
            Err(e) => {
                *ret = 1;
                write(ret.add(8), e.kind);
                write(ret.add(16), e.value);
                lower_list(ret.add(24), e.message.as_bytes());
            }
        }
        *RETURNED.result.get() = Some(result);
        ret
    }
}

/// The post-return function of `plugin-control` and `call-routine`.
#[doc(hidden)]
pub unsafe fn post_return_vals() {
    // SAFETY: as in `return_vals`.
    unsafe {
        *RETURNED.result.get() = None;
        *RETURNED.lowered.get() = Vec::new();
    }
}

/// The `plugin-control` export.
#[doc(hidden)]
pub unsafe fn export_plugin_control<G: Guest>(id: i64, args: i32, args_len: i32) -> i32 {
    // SAFETY: the host lowered the arguments as the canonical ABI says.
    let args = unsafe { lift_vals(args as usize as *mut u8, args_len as usize) };
    return_vals(G::plugin_control(id as u64, args)) as usize as i32
}

/// The `call-routine` export.
#[doc(hidden)]
pub unsafe fn export_call_routine<G: Guest>(
    routine: i32,
    anchor: i32,
    param: i64,
    args: i32,
    args_len: i32,
) -> i32 {
    // SAFETY: the host lowered the arguments as the canonical ABI says.
    let (anchor, args) = unsafe {
        (
            lift_enum(anchor as u32, 3, Anchor::_lift),
            lift_vals(args as usize as *mut u8, args_len as usize),
        )
    };
    return_vals(G::call_routine(routine as u32, anchor, param as u64, args)) as usize as i32
}
