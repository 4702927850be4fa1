//! How [`export_plugin!`](crate::export_plugin) turns a [`Plugin`](crate::Plugin)
//! into the component's exports, exporting only the routines the plugin
//! implements.
//!
//! Every export of the `routines` interface must exist in a component, but a
//! host calls a routine only for a binding in the plugin's manifest
//! (CQ-ANCHOR-3, CQ-ROUTINE-20, CQ-ROUTINE-22). The `wit-bindgen` glue of a
//! routine (lifting its arguments, lowering its result) is most of a small
//! plugin's code, so a routine the plugin does not list gets a stub that
//! traps instead, without a post-return function: `export_plugin!(Probe,
//! routines: [process_frame, plugin_control])` is 6.0 KB smaller than
//! `export_plugin!(Probe)`, which exports them all. `manifest`, `init` and
//! `on-plugin-timeout` (which answers the plugin's timers, not a binding)
//! always get their glue.
//!
//! A stub is never reached: `manifest` traps if a binding names a routine
//! that is not listed, so the plugin fails to load (and `corequic
//! embed-manifest`, which asks for the manifest, fails to build it).

use crate::{PluginManifest, RoutineId};

/// The bit of a listed routine in an export set: routine identifier `id`
/// (1 to 10) is bit `id`.
#[doc(hidden)]
pub const fn routine_bit(id: RoutineId) -> u32 {
    if id >= 1 && id <= 10 {
        1 << id
    } else {
        CALL_ROUTINE
    }
}

/// `call-routine`, which carries the routines added after 0.2.0, in an
/// export set.
#[doc(hidden)]
pub const CALL_ROUTINE: u32 = 1 << 31;

/// Every routine: what `export_plugin!(T)` exports, and how
/// `on-plugin-timeout` is always exported.
#[doc(hidden)]
pub const ALL: u32 = u32::MAX;

/// The first binding of `manifest` whose routine is not in `exported`.
#[doc(hidden)]
pub fn unexported_binding(manifest: &PluginManifest, exported: u32) -> Option<RoutineId> {
    manifest
        .bindings
        .iter()
        .map(|b| b.routine)
        .find(|&routine| exported & routine_bit(routine) == 0)
}

/// One export of the `routines` interface: the `wit-bindgen` glue when
/// `$bit` is in `$exported`, a trap otherwise. The core signatures are those
/// of the canonical ABI for 0.2.6; componentizing checks them against the
/// WIT.
#[doc(hidden)]
#[macro_export]
macro_rules! __export_routine {
    ($exported:expr, $bit:expr, $adapter:ty, $name:literal, abi::$glue:ident,
     ($($arg:ident: $t:ty),*)) => {
        $crate::__export_routine!(@export $exported, $bit, $name,
            [$crate::abi::$glue::<$adapter>], ($($arg: $t),*));
    };
    ($exported:expr, $bit:expr, $adapter:ty, $name:literal, $cabi:ident,
     ($($arg:ident: $t:ty),*)) => {
        $crate::__export_routine!(@export $exported, $bit, $name,
            [$crate::bindings::exports::core_quic::plugin::routines::$cabi::<$adapter>],
            ($($arg: $t),*));
    };
    (@export $exported:expr, $bit:expr, $name:literal, [$($glue:tt)*],
     ($($arg:ident: $t:ty),*)) => {
        const _: () = {
            #[unsafe(export_name = concat!("core-quic:plugin/routines@0.2.6#", $name))]
            unsafe extern "C" fn export($($arg: $t),*) -> i32 {
                if $exported & $bit != 0 {
                    // SAFETY: the host calls this export as the canonical
                    // ABI lowers it, which is what the glue expects.
                    unsafe { $($glue)*($($arg as _),*) as _ }
                } else {
                    $crate::trap()
                }
            }
        };
    };
}

/// The post-return function of an export with glue, which frees what the
/// export returned once the host has read it. A stub has none.
#[doc(hidden)]
#[macro_export]
macro_rules! __export_post_return {
    ($adapter:ty, $name:literal, $post:ident) => {
        const _: () = {
            #[unsafe(export_name = concat!("cabi_post_core-quic:plugin/routines@0.2.6#", $name))]
            unsafe extern "C" fn post_return(ret: i32) {
                // SAFETY: `ret` is what the export returned.
                unsafe {
                    $crate::bindings::exports::core_quic::plugin::routines::$post::<$adapter>(
                        ret as _,
                    )
                }
            }
        };
    };
    ($adapter:ty, write_transport_parameter) => {
        $crate::__export_post_return!(
            $adapter,
            "write-transport-parameter",
            __post_return_write_transport_parameter
        );
    };
    ($adapter:ty, decode_transport_parameter) => {
        $crate::__export_post_return!(
            $adapter,
            "decode-transport-parameter",
            __post_return_decode_transport_parameter
        );
    };
    ($adapter:ty, should_send_frame) => {
        $crate::__export_post_return!(
            $adapter,
            "should-send-frame",
            __post_return_should_send_frame
        );
    };
    ($adapter:ty, write_frame) => {
        $crate::__export_post_return!($adapter, "write-frame", __post_return_write_frame);
    };
    ($adapter:ty, on_frame_reserved) => {
        $crate::__export_post_return!(
            $adapter,
            "on-frame-reserved",
            __post_return_on_frame_reserved
        );
    };
    ($adapter:ty, notify_frame) => {
        $crate::__export_post_return!($adapter, "notify-frame", __post_return_notify_frame);
    };
    ($adapter:ty, parse_frame) => {
        $crate::__export_post_return!($adapter, "parse-frame", __post_return_parse_frame);
    };
    ($adapter:ty, process_frame) => {
        $crate::__export_post_return!($adapter, "process-frame", __post_return_process_frame);
    };
    ($adapter:ty, log_frame) => {
        $crate::__export_post_return!($adapter, "log-frame", __post_return_log_frame);
    };
    (@vals $name:literal) => {
        const _: () = {
            #[unsafe(export_name = concat!("cabi_post_core-quic:plugin/routines@0.2.6#", $name))]
            unsafe extern "C" fn post_return(_ret: i32) {
                // SAFETY: called once after the export returned.
                unsafe { $crate::abi::post_return_vals() }
            }
        };
    };
    ($adapter:ty, plugin_control) => {
        $crate::__export_post_return!(@vals "plugin-control");
    };
    ($adapter:ty, call_routine) => {
        $crate::__export_post_return!(@vals "call-routine");
    };
    ($adapter:ty, define_transport_parameter) => {
        $crate::__export_post_return!($adapter, write_transport_parameter);
        $crate::__export_post_return!($adapter, decode_transport_parameter);
    };
    ($adapter:ty, define_frame) => {
        $crate::__export_post_return!($adapter, define_frame_one_in_flight);
        $crate::__export_post_return!($adapter, notify_frame);
    };
    ($adapter:ty, define_frame_one_in_flight) => {
        $crate::__export_post_return!($adapter, should_send_frame);
        $crate::__export_post_return!($adapter, write_frame);
        $crate::__export_post_return!($adapter, on_frame_reserved);
        $crate::__export_post_return!($adapter, parse_frame);
        $crate::__export_post_return!($adapter, process_frame);
        $crate::__export_post_return!($adapter, log_frame);
    };
}

/// The bit of a routine named in `export_plugin!`'s list, or the bits of a
/// group of them: `define_transport_parameter`, `define_frame` and
/// `define_frame_one_in_flight` are the routines that
/// [`Manifest`](crate::Manifest)'s methods of those names bind. Any other name is a compile error.
#[doc(hidden)]
#[macro_export]
macro_rules! __routine_export_bit {
    (write_transport_parameter) => {
        $crate::export::routine_bit($crate::routine::WRITE_TRANSPORT_PARAMETER)
    };
    (decode_transport_parameter) => {
        $crate::export::routine_bit($crate::routine::DECODE_TRANSPORT_PARAMETER)
    };
    (should_send_frame) => {
        $crate::export::routine_bit($crate::routine::SHOULD_SEND_FRAME)
    };
    (write_frame) => {
        $crate::export::routine_bit($crate::routine::WRITE_FRAME)
    };
    (on_frame_reserved) => {
        $crate::export::routine_bit($crate::routine::ON_FRAME_RESERVED)
    };
    (notify_frame) => {
        $crate::export::routine_bit($crate::routine::NOTIFY_FRAME)
    };
    (parse_frame) => {
        $crate::export::routine_bit($crate::routine::PARSE_FRAME)
    };
    (process_frame) => {
        $crate::export::routine_bit($crate::routine::PROCESS_FRAME)
    };
    (log_frame) => {
        $crate::export::routine_bit($crate::routine::LOG_FRAME)
    };
    (plugin_control) => {
        $crate::export::routine_bit($crate::routine::PLUGIN_CONTROL)
    };
    (call_routine) => {
        $crate::export::CALL_ROUTINE
    };
    (define_transport_parameter) => {
        $crate::__routine_export_bit!(write_transport_parameter)
            | $crate::__routine_export_bit!(decode_transport_parameter)
    };
    (define_frame) => {
        $crate::__routine_export_bit!(define_frame_one_in_flight)
            | $crate::__routine_export_bit!(notify_frame)
    };
    (define_frame_one_in_flight) => {
        $crate::__routine_export_bit!(should_send_frame)
            | $crate::__routine_export_bit!(write_frame)
            | $crate::__routine_export_bit!(on_frame_reserved)
            | $crate::__routine_export_bit!(parse_frame)
            | $crate::__routine_export_bit!(process_frame)
            | $crate::__routine_export_bit!(log_frame)
    };
}

/// The export set of a list of routines (`every` is every routine).
#[doc(hidden)]
#[macro_export]
macro_rules! __routine_set {
    (every) => {
        $crate::export::ALL
    };
    ([$($routine:ident),*]) => {
        0 $(| $crate::__routine_export_bit!($routine))*
    };
}

/// Every export of the `routines` interface for `$adapter`, with the listed
/// routines bound to their glue.
#[doc(hidden)]
#[macro_export]
macro_rules! __export_routines {
    ($adapter:ty, every) => {
        $crate::__export_routines!(
            $adapter,
            [define_transport_parameter, define_frame, plugin_control, call_routine]
        );
    };
    ($adapter:ty, [$($routine:ident),*]) => {
        $crate::__export_routines!(@exports $adapter, $crate::__routine_set!([$($routine),*]));
        $($crate::__export_post_return!($adapter, $routine);)*
    };
    (@exports $adapter:ty, $exported:expr) => {
        const _: () = {
            #[unsafe(export_name = "core-quic:plugin/routines@0.2.6#manifest")]
            unsafe extern "C" fn export_manifest() -> i32 {
                // SAFETY: called by the host as the canonical ABI lowers it.
                unsafe {
                    $crate::bindings::exports::core_quic::plugin::routines::_export_manifest_cabi::<$adapter>() as _
                }
            }
            #[unsafe(export_name = "cabi_post_core-quic:plugin/routines@0.2.6#manifest")]
            unsafe extern "C" fn post_return_manifest(ret: i32) {
                // SAFETY: `ret` is what `export_manifest` returned.
                unsafe {
                    $crate::bindings::exports::core_quic::plugin::routines::__post_return_manifest::<$adapter>(ret as _)
                }
            }
            #[unsafe(export_name = "core-quic:plugin/routines@0.2.6#init")]
            unsafe extern "C" fn export_init() -> i32 {
                // SAFETY: called by the host as the canonical ABI lowers it.
                unsafe {
                    $crate::bindings::exports::core_quic::plugin::routines::_export_init_cabi::<$adapter>() as _
                }
            }
            #[unsafe(export_name = "cabi_post_core-quic:plugin/routines@0.2.6#init")]
            unsafe extern "C" fn post_return_init(ret: i32) {
                // SAFETY: `ret` is what `export_init` returned.
                unsafe {
                    $crate::bindings::exports::core_quic::plugin::routines::__post_return_init::<$adapter>(ret as _)
                }
            }
        };
        $crate::__export_routine!($exported, $crate::__routine_export_bit!(write_transport_parameter), $adapter,
            "write-transport-parameter", _export_write_transport_parameter_cabi,
            (a0: i32, a1: i64, a2: i32));
        $crate::__export_routine!($exported, $crate::__routine_export_bit!(decode_transport_parameter), $adapter,
            "decode-transport-parameter", _export_decode_transport_parameter_cabi,
            (a0: i32, a1: i64, a2: i32));
        $crate::__export_routine!($exported, $crate::__routine_export_bit!(should_send_frame), $adapter,
            "should-send-frame", _export_should_send_frame_cabi,
            (a0: i32, a1: i64, a2: i32, a3: i32, a4: i64, a5: i32, a6: i64, a7: i64));
        $crate::__export_routine!($exported, $crate::__routine_export_bit!(write_frame), $adapter,
            "write-frame", _export_write_frame_cabi,
            (a0: i32, a1: i64, a2: i32, a3: i32, a4: i64, a5: i32, a6: i64, a7: i64, a8: i32));
        $crate::__export_routine!($exported, $crate::__routine_export_bit!(on_frame_reserved), $adapter,
            "on-frame-reserved", _export_on_frame_reserved_cabi,
            (a0: i32, a1: i64, a2: i64, a3: i32, a4: i32, a5: i64, a6: i32, a7: i64, a8: i64));
        $crate::__export_routine!($exported, $crate::__routine_export_bit!(notify_frame), $adapter,
            "notify-frame", _export_notify_frame_cabi,
            (a0: i32, a1: i64, a2: i64, a3: i32));
        $crate::__export_routine!($exported, $crate::__routine_export_bit!(parse_frame), $adapter,
            "parse-frame", _export_parse_frame_cabi,
            (a0: i32, a1: i64, a2: i32));
        $crate::__export_routine!($exported, $crate::__routine_export_bit!(process_frame), $adapter,
            "process-frame", _export_process_frame_cabi,
            (a0: i32, a1: i64, a2: i32, a3: i32, a4: i32, a5: i32, a6: i32, a7: i32, a8: i64, a9: i64));
        $crate::__export_routine!($exported, $crate::__routine_export_bit!(log_frame), $adapter,
            "log-frame", _export_log_frame_cabi,
            (a0: i32, a1: i64, a2: i32, a3: i32, a4: i32, a5: i32));
        $crate::__export_routine!($crate::export::ALL, $crate::export::ALL, $adapter,
            "on-plugin-timeout", _export_on_plugin_timeout_cabi,
            (a0: i64, a1: i64));
        $crate::__export_post_return!($adapter, "on-plugin-timeout", __post_return_on_plugin_timeout);
        $crate::__export_routine!($exported, $crate::__routine_export_bit!(plugin_control), $adapter,
            "plugin-control", abi::export_plugin_control,
            (a0: i64, a1: i32, a2: i32));
        $crate::__export_routine!($exported, $crate::__routine_export_bit!(call_routine), $adapter,
            "call-routine", abi::export_call_routine,
            (a0: i32, a1: i32, a2: i64, a3: i32, a4: i32));
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Anchor, Manifest, routine};

    #[test]
    fn a_binding_of_an_unlisted_routine_is_found() {
        let manifest = Manifest::new("t", "0.1.0")
            .bind(routine::PROCESS_FRAME, Anchor::After, 0x1b)
            .control(1)
            .into_wit();
        let listed = routine_bit(routine::PROCESS_FRAME) | routine_bit(routine::PLUGIN_CONTROL);
        assert_eq!(unexported_binding(&manifest, listed), None);
        assert_eq!(unexported_binding(&manifest, ALL), None);
        assert_eq!(
            unexported_binding(&manifest, routine_bit(routine::PROCESS_FRAME)),
            Some(routine::PLUGIN_CONTROL)
        );
        assert_eq!(
            unexported_binding(&manifest, CALL_ROUTINE),
            Some(routine::PROCESS_FRAME)
        );
    }

    #[test]
    fn routines_after_0_2_0_need_call_routine() {
        let manifest = Manifest::new("t", "0.1.0")
            .bind(11, Anchor::Define, 0)
            .into_wit();
        assert_eq!(unexported_binding(&manifest, CALL_ROUTINE), None);
        assert_eq!(unexported_binding(&manifest, !CALL_ROUTINE), Some(11));
    }

    #[test]
    fn the_groups_export_what_the_manifest_helpers_bind() {
        let frame = Manifest::new("t", "0.1.0").define_frame(0x42).into_wit();
        let one_in_flight = Manifest::new("t", "0.1.0")
            .define_frame_one_in_flight(0x42)
            .into_wit();
        let parameter = Manifest::new("t", "0.1.0")
            .define_transport_parameter(0x42)
            .into_wit();
        let define_frame = crate::__routine_export_bit!(define_frame);
        let define_one_in_flight = crate::__routine_export_bit!(define_frame_one_in_flight);
        let define_parameter = crate::__routine_export_bit!(define_transport_parameter);
        assert_eq!(unexported_binding(&frame, define_frame), None);
        assert_eq!(unexported_binding(&parameter, define_parameter), None);
        assert!(unexported_binding(&frame, define_parameter).is_some());
        assert!(unexported_binding(&parameter, define_frame).is_some());
        let bits = |m: &crate::PluginManifest| {
            m.bindings
                .iter()
                .fold(0, |all, b| all | routine_bit(b.routine))
        };
        assert_eq!(bits(&frame), define_frame);
        assert_eq!(bits(&one_in_flight), define_one_in_flight);
        assert_eq!(
            define_frame & !define_one_in_flight,
            crate::__routine_export_bit!(notify_frame)
        );
        assert_eq!(bits(&parameter), define_parameter);
    }

    #[test]
    fn the_bits_of_listed_routines_are_distinct() {
        let bits = [
            crate::__routine_export_bit!(write_transport_parameter),
            crate::__routine_export_bit!(decode_transport_parameter),
            crate::__routine_export_bit!(should_send_frame),
            crate::__routine_export_bit!(write_frame),
            crate::__routine_export_bit!(on_frame_reserved),
            crate::__routine_export_bit!(notify_frame),
            crate::__routine_export_bit!(parse_frame),
            crate::__routine_export_bit!(process_frame),
            crate::__routine_export_bit!(log_frame),
            crate::__routine_export_bit!(plugin_control),
            crate::__routine_export_bit!(call_routine),
        ];
        let union = bits.iter().fold(0, |all, bit| {
            assert_eq!(all & bit, 0, "bit {bit:#x} twice");
            all | bit
        });
        assert_eq!(union.count_ones(), 11);
    }
}
