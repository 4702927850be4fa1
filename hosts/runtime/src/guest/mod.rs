//! The plugin side of the component boundary: the bindings of each WIT
//! version the runtime runs plugins of, behind one [`Guest`] that speaks the
//! host's model ([`crate::abi`]).
//!
//! Each version's module holds its `bindgen!` output, converts its generated
//! types to and from the model, and implements its host imports as thin
//! conversions onto [`PluginState`]'s version-independent host API. The rest
//! of the runtime only sees [`Guest`], [`GuestPre`] and [`add_to_linker`].

use crate::abi::{
    Anchor, Error, ExtFrame, Frame, FrameOutcome, ParsedFrame, PluginManifest, PluginVal,
    RxContext, SendContext,
};
use crate::state::PluginState;
use wasmtime::Store;
use wasmtime::component::{InstancePre, Linker};

pub(crate) mod frame_data;
pub(crate) mod v0_1;
pub(crate) mod v0_2;

/// A routine's outcome: a trap (outer) or the plugin's own result (inner).
type Call<T> = wasmtime::Result<Result<T, Error>>;

/// A manifest naming identifiers this host does not implement: the
/// plugin's name and each identifier, as `field 99 (read)` (CQ-LOAD-6).
#[derive(Debug)]
pub(crate) struct UnknownIds {
    pub name: String,
    pub missing: Vec<String>,
}

/// Call the same method on whichever version's guest this is.
macro_rules! dispatch {
    ($self:ident, $method:ident($($arg:expr),*)) => {
        match $self {
            Guest::V0_1(g) => g.$method($($arg),*),
            Guest::V0_2(g) => g.$method($($arg),*),
        }
    };
}

/// Add the host imports of every supported WIT version to `linker`.
pub(crate) fn add_to_linker(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    v0_2::add_to_linker(linker)?;
    v0_1::add_to_linker(linker)
}

/// A plugin component linked and checked against one WIT version's world,
/// ready to be instantiated on any number of connections.
pub(crate) enum GuestPre {
    /// A `core-quic:plugin@0.1.0` plugin, run through the compatibility
    /// layer (specification §2.2).
    V0_1(v0_1::PluginPre<PluginState>),
    /// A `core-quic:plugin@0.2.x` plugin.
    V0_2(v0_2::PluginPre<PluginState>),
}

impl GuestPre {
    /// The linked component as a plugin of the WIT version whose world it
    /// exports (CQ-LOAD-24).
    #[inline]
    pub(crate) fn new(instance_pre: InstancePre<PluginState>) -> wasmtime::Result<GuestPre> {
        match v0_2::PluginPre::new(instance_pre.clone()) {
            Ok(pre) => Ok(GuestPre::V0_2(pre)),
            Err(e) => match v0_1::PluginPre::new(instance_pre) {
                Ok(pre) => Ok(GuestPre::V0_1(pre)),
                Err(_) => Err(e),
            },
        }
    }

    /// A new instance in `store`. `manifest` is the plugin's, once known:
    /// a 0.1.0 plugin's send routines are called as it bound them.
    #[inline]
    pub(crate) fn instantiate(
        &self,
        store: &mut Store<PluginState>,
        manifest: Option<&PluginManifest>,
    ) -> wasmtime::Result<Guest> {
        Ok(match self {
            GuestPre::V0_1(pre) => Guest::V0_1(v0_1::Guest::new(pre.instantiate(store)?, manifest)),
            GuestPre::V0_2(pre) => Guest::V0_2(v0_2::Guest::new(pre.instantiate(store)?)),
        })
    }
}

/// One plugin instance's exports, called with the model's types.
///
/// The routines that take a buffer lend the one in the store's
/// [`PluginState`] (`out` for an `out-buf`, `input` for an `in-buf`): the
/// caller fills or reads it around the call.
pub(crate) enum Guest {
    /// A `core-quic:plugin@0.1.0` plugin.
    V0_1(v0_1::Guest),
    /// A `core-quic:plugin@0.2.x` plugin.
    V0_2(v0_2::Guest),
}

impl Guest {
    /// Export `manifest`, in the model; a 0.2 manifest may name
    /// identifiers this host does not know.
    #[inline]
    pub(crate) fn manifest(
        &mut self,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<Result<PluginManifest, UnknownIds>> {
        dispatch!(self, manifest(store))
    }

    /// Export `init`.
    #[inline]
    pub(crate) fn init(&mut self, store: &mut Store<PluginState>) -> Call<()> {
        dispatch!(self, init(store))
    }

    /// Export `write-transport-parameter`, writing into the store's `out`.
    #[inline]
    pub(crate) fn write_transport_parameter(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: Anchor,
        id: u64,
    ) -> Call<()> {
        dispatch!(self, write_transport_parameter(store, anchor, id))
    }

    /// Export `decode-transport-parameter`, reading the store's `input`.
    #[inline]
    pub(crate) fn decode_transport_parameter(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: Anchor,
        id: u64,
    ) -> Call<()> {
        dispatch!(self, decode_transport_parameter(store, anchor, id))
    }

    /// Export `should-send-frame`.
    #[inline]
    pub(crate) fn should_send_frame(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: Anchor,
        frame_type: u64,
        ctx: SendContext,
    ) -> Call<bool> {
        dispatch!(self, should_send_frame(store, anchor, frame_type, ctx))
    }

    /// Export `write-frame`, writing into the store's `out`, whose capacity
    /// the caller sets to the packet's room. `defined` is the frame the
    /// DEFINE wrote and its length, for AFTER observers.
    #[inline]
    pub(crate) fn write_frame(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: Anchor,
        frame_type: u64,
        ctx: SendContext,
        defined: Option<(ExtFrame, u64)>,
    ) -> Call<Option<u64>> {
        match self {
            Guest::V0_1(g) => g.write_frame(store, anchor, frame_type, ctx, defined),
            Guest::V0_2(g) => g.write_frame(store, anchor, frame_type, ctx),
        }
    }

    /// Export `on-frame-reserved`.
    #[inline]
    pub(crate) fn on_frame_reserved(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: Anchor,
        frame: ExtFrame,
        ctx: SendContext,
    ) -> Call<()> {
        dispatch!(self, on_frame_reserved(store, anchor, frame, ctx))
    }

    /// Export `notify-frame`.
    #[inline]
    pub(crate) fn notify_frame(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: Anchor,
        frame: ExtFrame,
        outcome: FrameOutcome,
    ) -> Call<()> {
        dispatch!(self, notify_frame(store, anchor, frame, outcome))
    }

    /// Export `parse-frame`, reading the store's `input`.
    #[inline]
    pub(crate) fn parse_frame(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: Anchor,
        frame_type: u64,
    ) -> Call<ParsedFrame> {
        dispatch!(self, parse_frame(store, anchor, frame_type))
    }

    /// Export `process-frame`.
    #[inline]
    pub(crate) fn process_frame(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: Anchor,
        frame: &Frame,
        ctx: RxContext,
    ) -> Call<()> {
        dispatch!(self, process_frame(store, anchor, frame, ctx))
    }

    /// Export `log-frame`.
    #[inline]
    pub(crate) fn log_frame(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: Anchor,
        frame: &Frame,
    ) -> Call<String> {
        dispatch!(self, log_frame(store, anchor, frame))
    }

    /// Export `on-plugin-timeout`.
    #[inline]
    pub(crate) fn on_plugin_timeout(
        &mut self,
        store: &mut Store<PluginState>,
        id: u64,
        now: u64,
    ) -> Call<()> {
        dispatch!(self, on_plugin_timeout(store, id, now))
    }

    /// Export `call-routine` (routines added after 0.2.0; a 0.1.0 plugin
    /// has none).
    #[inline]
    #[allow(dead_code)] // no routine is dispatched through it in 0.2.0
    pub(crate) fn call_routine(
        &mut self,
        store: &mut Store<PluginState>,
        routine: u32,
        anchor: Anchor,
        param: u64,
        args: &[PluginVal],
    ) -> Call<Vec<PluginVal>> {
        match self {
            Guest::V0_1(_) => Ok(Err(Error::Unsupported(
                "a 0.1.0 plugin has no routine added after 0.2.0".into(),
            ))),
            Guest::V0_2(g) => g.call_routine(store, routine, anchor, param, args),
        }
    }

    /// Export `plugin-control`.
    #[inline]
    pub(crate) fn plugin_control(
        &mut self,
        store: &mut Store<PluginState>,
        id: u64,
        args: &[PluginVal],
    ) -> Call<Vec<PluginVal>> {
        dispatch!(self, plugin_control(store, id, args))
    }
}
