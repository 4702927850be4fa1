//! The guest SDK for Core QUIC plugins.
//!
//! A plugin is a type implementing [`Plugin`] — one method per protocol
//! routine, each with a default that reports the routine as not implemented —
//! exported with [`export_plugin!`]. The host calls only the routines the
//! plugin's [`Manifest`] binds. Host services (fields, timers, logging,
//! registration, plugin-control) are plain functions in [`host`].
//!
//! ```no_run
//! use corequic_sdk::*;
//!
//! #[derive(Default)]
//! struct Hello;
//!
//! impl Plugin for Hello {
//!     fn manifest() -> Manifest {
//!         Manifest::new("hello", "0.1.0").permission(permission::LOGGING)
//!     }
//!     fn init(&mut self) -> Result<()> {
//!         host::log(LogLevel::Info, "hello", &[])
//!     }
//! }
//!
//! export_plugin!(Hello);
//! ```
//!
//! Build for `wasm32-unknown-unknown` and turn the module into a component
//! (the repository's Makefile does both). No WASI is needed. The SDK is
//! `no_std`: it brings a small size-class allocator and a panic handler that
//! traps, so a plugin component is mostly its export glue (see
//! `docs/measurements.md` for sizes). Plugin crates declare
//! `#![cfg_attr(target_arch = "wasm32", no_std)]` and `extern crate alloc;`.

#![no_std]
#![warn(missing_docs)]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use core::cell::{Cell, UnsafeCell};

/// Bindings generated from `wit/` by `wit-bindgen`.
#[allow(missing_docs, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "plugin",
        // `export_plugin!` writes the exports itself (see `export`), so the
        // world with its exports is encoded here, not in an export macro.
        pub_export_macro: false,
    });
}

pub use bindings::core_quic::plugin::host::{InBuf, OutBuf};
pub use bindings::core_quic::plugin::types::{
    Anchor, Binding, Error, ErrorKind, ExtFrame, FieldId, FieldRef, Frame, FrameOutcome,
    FrameRegistration, LogLevel, LogValueKind, PacketType, ParsedFrame, PermissionId,
    PluginManifest, PluginVal, PnSpace, RoutineId, RxContext, SendContext, SendPosition,
};

/// The result type of routines and host calls.
pub type Result<T> = core::result::Result<T, Error>;

/// The ABI version this SDK targets (the WIT package version).
pub const ABI_VERSION: &str = "0.2.6";

#[doc(hidden)]
pub mod abi;
pub mod error_kind;
pub mod export;
pub mod field;
pub mod frame;
mod fused;
pub mod host;
mod manifest;
pub mod observe;
pub mod permission;
pub mod routine;
pub mod text;
pub mod varint;

pub use fused::{ReceivedFrame, SentFrame};
pub use manifest::Manifest;
pub use observe::ObservedFrames;

#[cfg(all(target_arch = "wasm32", not(test)))]
mod rt;

/// Trap: end the current call with a fault, which the host reports and
/// answers by removing the plugin (spec CQ-LIMIT-4). Outside wasm (host-side
/// unit tests of a plugin) it panics.
pub fn trap() -> ! {
    #[cfg(target_arch = "wasm32")]
    core::arch::wasm32::unreachable();
    #[cfg(not(target_arch = "wasm32"))]
    panic!("trap")
}

impl Error {
    /// An error of `kind` with `value` and `message`.
    pub fn new(kind: ErrorKind, value: u64, message: &str) -> Error {
        Error {
            kind,
            value,
            message: message.into(),
        }
    }
    /// `denied`: the call is not allowed.
    pub fn denied(message: &str) -> Error {
        Error::new(error_kind::DENIED, 0, message)
    }
    /// `unsupported`: not implemented.
    pub fn unsupported(message: &str) -> Error {
        Error::new(error_kind::UNSUPPORTED, 0, message)
    }
    /// `invalid-argument`: an argument is malformed or out of range.
    pub fn invalid_argument(message: &str) -> Error {
        Error::new(error_kind::INVALID_ARGUMENT, 0, message)
    }
    /// `buffer-too-short`: `needed` bytes are needed.
    pub fn buffer_too_short(needed: u64) -> Error {
        Error::new(error_kind::BUFFER_TOO_SHORT, needed, "")
    }
    /// `not-found`: the named object does not exist.
    pub fn not_found(message: &str) -> Error {
        Error::new(error_kind::NOT_FOUND, 0, message)
    }
    /// `failed`: the operation failed.
    pub fn failed(message: &str) -> Error {
        Error::new(error_kind::FAILED, 0, message)
    }
    /// `plugin`: the plugin's own error `code`.
    pub fn plugin(code: u64) -> Error {
        Error::new(error_kind::PLUGIN, code, "")
    }
}

fn not_implemented<T>(routine: &str) -> Result<T> {
    let mut message = String::from(routine);
    message.push_str(" is not implemented by this plugin");
    Err(Error {
        kind: error_kind::UNSUPPORTED,
        value: 0,
        message,
    })
}

/// A Core QUIC plugin. One value exists per connection, created with
/// `Default` right before [`Plugin::init`].
///
/// Implement the routines the manifest binds; the `anchor` argument tells
/// whether the call is the DEFINE or a BEFORE/AFTER observation.
#[allow(unused_variables)]
pub trait Plugin: Default + 'static {
    /// What the plugin binds and needs. Must not call the host.
    fn manifest() -> Manifest;

    /// Called once per connection before anything else.
    fn init(&mut self) -> Result<()> {
        Ok(())
    }

    /// Encode transport parameter `id` into `out`.
    fn write_transport_parameter(&mut self, anchor: Anchor, id: u64, out: &OutBuf) -> Result<()> {
        not_implemented("write-transport-parameter")
    }

    /// The peer sent transport parameter `id`.
    fn decode_transport_parameter(&mut self, anchor: Anchor, id: u64, value: &InBuf) -> Result<()> {
        not_implemented("decode-transport-parameter")
    }

    /// Whether to send a frame of `frame_type` in the packet `ctx` describes.
    /// Must have no side effects (hosts may ask more than once).
    fn should_send_frame(
        &mut self,
        anchor: Anchor,
        frame_type: u64,
        ctx: SendContext,
    ) -> Result<bool> {
        not_implemented("should-send-frame")
    }

    /// Write a frame of `frame_type`, type included, into `out` (whose
    /// capacity is the room the packet offers) and return its tag, which
    /// comes back to [`Plugin::on_frame_reserved`] and
    /// [`Plugin::notify_frame`]; `None`, with nothing written, sends nothing.
    fn write_frame(
        &mut self,
        anchor: Anchor,
        frame_type: u64,
        ctx: SendContext,
        out: &OutBuf,
    ) -> Result<Option<u64>> {
        not_implemented("write-frame")
    }

    /// The frame is part of packet `ctx.packet_number`.
    fn on_frame_reserved(
        &mut self,
        anchor: Anchor,
        frame: ExtFrame,
        ctx: SendContext,
    ) -> Result<()> {
        not_implemented("on-frame-reserved")
    }

    /// The frame was acknowledged or lost.
    fn notify_frame(
        &mut self,
        anchor: Anchor,
        frame: ExtFrame,
        outcome: FrameOutcome,
    ) -> Result<()> {
        not_implemented("notify-frame")
    }

    /// Parse a received frame; `payload` starts after the type.
    fn parse_frame(
        &mut self,
        anchor: Anchor,
        frame_type: u64,
        payload: &InBuf,
    ) -> Result<ParsedFrame> {
        not_implemented("parse-frame")
    }

    /// Process a received frame (plugin frames at DEFINE, any frame at BEFORE/AFTER).
    fn process_frame(&mut self, anchor: Anchor, frame: Frame, ctx: RxContext) -> Result<()> {
        not_implemented("process-frame")
    }

    /// Describe a frame for the host's logs.
    fn log_frame(&mut self, anchor: Anchor, frame: Frame) -> Result<String> {
        not_implemented("log-frame")
    }

    /// Timer `id` fired.
    fn on_plugin_timeout(&mut self, id: u64, now: u64) -> Result<()> {
        not_implemented("on-plugin-timeout")
    }

    /// The plugin-control entry point `id`.
    fn plugin_control(&mut self, id: u64, args: Vec<PluginVal>) -> Result<Vec<PluginVal>> {
        not_implemented("plugin-control")
    }

    /// The frames of type `frame_type` that the connection processed since
    /// the last call, in order, each with the packet it came in
    /// (`observe-frames`, ABI 0.2.3, AFTER only). Bind it with
    /// `.bind(routine::OBSERVE_FRAMES, Anchor::After, frame_type)` and list
    /// `call_routine` in [`export_plugin!`].
    fn observe_frames(&mut self, frame_type: u64, frames: &ObservedFrames<'_>) -> Result<()> {
        not_implemented("observe-frames")
    }

    /// Offer a frame of `frame_type` for the packet `ctx` describes, in one
    /// call: the work of [`Plugin::should_send_frame`],
    /// [`Plugin::write_frame`] and [`Plugin::on_frame_reserved`]
    /// (`send-frame`, ABI 0.2.4, DEFINE only). Return the frame's bytes,
    /// type included and at most `ctx.room` long, or `None` to send
    /// nothing. A frame returned is committed to the packet when it is one
    /// whole frame of `frame_type`, so it counts as reserved. Bind it with
    /// [`Manifest::fuse_frame_routines`] and list `call_routine` in
    /// [`export_plugin!`]; keep the separate routines too, which the host
    /// still asks whether to build a packet at all, and uses when another
    /// plugin observes them.
    fn send_frame(&mut self, frame_type: u64, ctx: SendContext) -> Result<Option<SentFrame>> {
        not_implemented("send-frame")
    }

    /// Take a received frame of `frame_type` in one call: the work of
    /// [`Plugin::parse_frame`] and [`Plugin::process_frame`] (`receive-frame`,
    /// ABI 0.2.4, DEFINE only). `payload` starts after the type and runs to
    /// the end of the packet payload. An error of kind `invalid-argument`
    /// or `buffer-too-short` says the frame is malformed (the host closes
    /// with FRAME_ENCODING_ERROR); any other kind that processing it failed
    /// (PROTOCOL_VIOLATION).
    fn receive_frame(
        &mut self,
        frame_type: u64,
        payload: &[u8],
        ctx: RxContext,
    ) -> Result<ReceivedFrame> {
        not_implemented("receive-frame")
    }

    /// A routine added to the ABI after 0.2.0, by its identifier; see the
    /// specification for its arguments and results. The default,
    /// [`dispatch_routine`], passes `observe-frames` to
    /// [`Plugin::observe_frames`], `send-frame` to [`Plugin::send_frame`]
    /// and `receive-frame` to [`Plugin::receive_frame`], and answers
    /// `unsupported` for any other routine.
    fn call_routine(
        &mut self,
        routine: RoutineId,
        anchor: Anchor,
        param: u64,
        args: Vec<PluginVal>,
    ) -> Result<Vec<PluginVal>> {
        dispatch_routine(self, routine, anchor, param, args)
    }
}

/// What [`Plugin::call_routine`] does unless a plugin overrides it: the
/// routines added after 0.2.0 decoded from their `plugin-val` arguments and
/// passed to their methods, their results encoded back. A plugin that
/// overrides `call_routine` for some routines calls it for the others.
pub fn dispatch_routine<P: Plugin>(
    plugin: &mut P,
    routine: RoutineId,
    _anchor: Anchor,
    param: u64,
    args: Vec<PluginVal>,
) -> Result<Vec<PluginVal>> {
    match (routine, args.as_slice()) {
        (routine::OBSERVE_FRAMES, [PluginVal::Bytes(records)]) => plugin
            .observe_frames(param, &ObservedFrames::new(records))
            .map(|()| Vec::new()),
        (routine::OBSERVE_FRAMES, _) => Err(Error::invalid_argument(
            "observe-frames takes one bytes value",
        )),
        (routine::SEND_FRAME, args) => {
            let ctx = fused::send_context(args)?;
            Ok(match plugin.send_frame(param, ctx)? {
                Some(frame) => frame.into_vals(),
                None => Vec::new(),
            })
        }
        (routine::RECEIVE_FRAME, [PluginVal::Bytes(payload), rest @ ..]) => {
            let ctx = fused::rx_context(rest)?;
            plugin
                .receive_frame(param, payload, ctx)
                .map(ReceivedFrame::into_vals)
        }
        (routine::RECEIVE_FRAME, _) => Err(Error::invalid_argument(
            "receive-frame takes a bytes value and an rx-context",
        )),
        _ => not_implemented("call-routine"),
    }
}

/// Storage for a plugin's single per-instance value. Wasm instances are
/// single-threaded and the host never re-enters a running plugin, so a
/// plain cell with a re-entrancy guard suffices.
#[doc(hidden)]
pub struct InstanceCell<T> {
    value: UnsafeCell<Option<T>>,
    busy: Cell<bool>,
}

// SAFETY: core wasm plugins have a single thread.
unsafe impl<T> Sync for InstanceCell<T> {}

impl<T: Default> InstanceCell<T> {
    #[doc(hidden)]
    pub const fn new() -> Self {
        InstanceCell {
            value: UnsafeCell::new(None),
            busy: Cell::new(false),
        }
    }

    #[doc(hidden)]
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        if self.busy.replace(true) {
            // The host never re-enters a running plugin; trap if it does.
            trap();
        }
        // SAFETY: the busy flag guarantees this is the only live borrow.
        let value = unsafe { &mut *self.value.get() }.get_or_insert_with(T::default);
        let r = f(value);
        self.busy.set(false);
        r
    }
}

/// A per-instance flag (wasm instances are single-threaded).
#[doc(hidden)]
pub struct InstanceFlag(Cell<bool>);

// SAFETY: core wasm plugins have a single thread.
unsafe impl Sync for InstanceFlag {}

impl InstanceFlag {
    #[doc(hidden)]
    pub const fn new() -> Self {
        InstanceFlag(Cell::new(false))
    }
    #[doc(hidden)]
    pub fn get(&self) -> bool {
        self.0.get()
    }
    #[doc(hidden)]
    pub fn set(&self, value: bool) {
        self.0.set(value)
    }
}

/// Gives the adapter access to the plugin's per-instance value.
#[doc(hidden)]
pub trait Instance: Plugin {
    /// The routines `export_plugin!` exported (see `export`).
    const EXPORTED: u32;
    fn with<R>(f: impl FnOnce(&mut Self) -> R) -> R;
}

/// Connects the generated export trait to a [`Plugin`].
#[doc(hidden)]
pub struct Adapter<P>(core::marker::PhantomData<P>);

impl<P: Instance> bindings::exports::core_quic::plugin::routines::Guest for Adapter<P> {
    fn manifest() -> PluginManifest {
        let manifest = P::manifest().into_wit();
        // A binding of a routine that `export_plugin!` did not list would
        // reach a stub: refuse to load instead (see `export`).
        if export::unexported_binding(&manifest, P::EXPORTED).is_some() {
            trap();
        }
        manifest
    }
    fn init() -> Result<()> {
        P::with(|p| p.init())
    }
    fn write_transport_parameter(anchor: Anchor, id: u64, out: &OutBuf) -> Result<()> {
        P::with(|p| p.write_transport_parameter(anchor, id, out))
    }
    fn decode_transport_parameter(anchor: Anchor, id: u64, value: &InBuf) -> Result<()> {
        P::with(|p| p.decode_transport_parameter(anchor, id, value))
    }
    fn should_send_frame(anchor: Anchor, frame_type: u64, ctx: SendContext) -> Result<bool> {
        P::with(|p| p.should_send_frame(anchor, frame_type, ctx))
    }
    fn write_frame(
        anchor: Anchor,
        frame_type: u64,
        ctx: SendContext,
        out: &OutBuf,
    ) -> Result<Option<u64>> {
        P::with(|p| p.write_frame(anchor, frame_type, ctx, out))
    }
    fn on_frame_reserved(anchor: Anchor, frame: ExtFrame, ctx: SendContext) -> Result<()> {
        P::with(|p| p.on_frame_reserved(anchor, frame, ctx))
    }
    fn notify_frame(anchor: Anchor, frame: ExtFrame, outcome: FrameOutcome) -> Result<()> {
        P::with(|p| p.notify_frame(anchor, frame, outcome))
    }
    fn parse_frame(anchor: Anchor, frame_type: u64, payload: &InBuf) -> Result<ParsedFrame> {
        P::with(|p| p.parse_frame(anchor, frame_type, payload))
    }
    fn process_frame(anchor: Anchor, frame: Frame, ctx: RxContext) -> Result<()> {
        P::with(|p| p.process_frame(anchor, frame, ctx))
    }
    fn log_frame(anchor: Anchor, frame: Frame) -> Result<String> {
        P::with(|p| p.log_frame(anchor, frame))
    }
    fn on_plugin_timeout(id: u64, now: u64) -> Result<()> {
        P::with(|p| p.on_plugin_timeout(id, now))
    }
    fn plugin_control(id: u64, args: Vec<PluginVal>) -> Result<Vec<PluginVal>> {
        P::with(|p| p.plugin_control(id, args))
    }
    fn call_routine(
        routine: RoutineId,
        anchor: Anchor,
        param: u64,
        args: Vec<PluginVal>,
    ) -> Result<Vec<PluginVal>> {
        P::with(|p| p.call_routine(routine, anchor, param, args))
    }
}

/// Export a type that implements the generated
/// `bindings::exports::core_quic::plugin::routines::Guest` trait itself, not
/// [`Plugin`], as the component's routines, every one of them: for a plugin
/// that handles the ABI's types without the SDK's help.
#[macro_export]
macro_rules! export_guest {
    ($ty:ty) => {
        $crate::__export_routines!($ty, every);
    };
}

/// Export a [`Plugin`] type as the component's routines.
///
/// `export_plugin!(MyPlugin)` exports every routine.
/// `export_plugin!(MyPlugin, routines: [process_frame, plugin_control])`
/// exports only the listed ones, besides `manifest` and `init`, and makes the
/// plugin smaller: every other routine's export traps without the glue that
/// lifts its arguments (see [`export`](crate::export)). The names are those
/// of [`Plugin`]'s methods. List every routine the manifest binds, and
/// `plugin_control` for a plugin with controls: `manifest` traps otherwise,
/// and the plugin does not load. `on_plugin_timeout` always has its glue.
#[macro_export]
macro_rules! export_plugin {
    ($ty:ty) => {
        $crate::__export_plugin!($ty, every);
    };
    ($ty:ty, routines: [$($routine:ident),* $(,)?]) => {
        $crate::__export_plugin!($ty, [$($routine),*]);
    };
}

/// The body of [`export_plugin!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __export_plugin {
    ($ty:ty, $routines:tt) => {
        impl $crate::Instance for $ty {
            const EXPORTED: u32 = $crate::__routine_set!($routines);
            fn with<R>(f: impl FnOnce(&mut Self) -> R) -> R {
                static CELL: $crate::InstanceCell<$ty> = $crate::InstanceCell::new();
                CELL.with(f)
            }
        }
        type CorequicAdapter = $crate::Adapter<$ty>;
        $crate::__export_routines!(CorequicAdapter, $routines);
    };
}
