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

pub(crate) mod v0_1;

/// A routine's outcome: a trap (outer) or the plugin's own result (inner).
type Call<T> = wasmtime::Result<Result<T, Error>>;

/// Add the host imports of every supported WIT version to `linker`.
pub(crate) fn add_to_linker(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    v0_1::add_to_linker(linker)
}

/// A plugin component linked and checked against one WIT version's world,
/// ready to be instantiated on any number of connections.
pub(crate) enum GuestPre {
    /// A `core-quic:plugin@0.1.x` plugin.
    V0_1(v0_1::PluginPre<PluginState>),
}

impl GuestPre {
    /// Check that the linked component exports the plugin world.
    #[inline]
    pub(crate) fn new(instance_pre: InstancePre<PluginState>) -> wasmtime::Result<GuestPre> {
        Ok(GuestPre::V0_1(v0_1::PluginPre::new(instance_pre)?))
    }

    /// A new instance in `store`.
    #[inline]
    pub(crate) fn instantiate(&self, store: &mut Store<PluginState>) -> wasmtime::Result<Guest> {
        match self {
            GuestPre::V0_1(pre) => Ok(Guest::V0_1(v0_1::Guest::new(pre.instantiate(store)?))),
        }
    }
}

/// One plugin instance's exports, called with the model's types.
///
/// The routines that take a buffer lend the one in the store's
/// [`PluginState`] (`out` for an `out-buf`, `input` for an `in-buf`): the
/// caller fills or reads it around the call.
pub(crate) enum Guest {
    /// A `core-quic:plugin@0.1.x` plugin.
    V0_1(v0_1::Guest),
}

impl Guest {
    /// Export `manifest`.
    #[inline]
    pub(crate) fn manifest(
        &mut self,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<PluginManifest> {
        match self {
            Guest::V0_1(g) => g.manifest(store),
        }
    }

    /// Export `init`.
    #[inline]
    pub(crate) fn init(&mut self, store: &mut Store<PluginState>) -> Call<()> {
        match self {
            Guest::V0_1(g) => g.init(store),
        }
    }

    /// Export `write-transport-parameter`, writing into the store's `out`.
    #[inline]
    pub(crate) fn write_transport_parameter(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: Anchor,
        id: u64,
    ) -> Call<()> {
        match self {
            Guest::V0_1(g) => g.write_transport_parameter(store, anchor, id),
        }
    }

    /// Export `decode-transport-parameter`, reading the store's `input`.
    #[inline]
    pub(crate) fn decode_transport_parameter(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: Anchor,
        id: u64,
    ) -> Call<()> {
        match self {
            Guest::V0_1(g) => g.decode_transport_parameter(store, anchor, id),
        }
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
        match self {
            Guest::V0_1(g) => g.should_send_frame(store, anchor, frame_type, ctx),
        }
    }

    /// Export `prepare-frame`.
    #[inline]
    pub(crate) fn prepare_frame(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: Anchor,
        frame_type: u64,
        ctx: SendContext,
    ) -> Call<Option<ExtFrame>> {
        match self {
            Guest::V0_1(g) => g.prepare_frame(store, anchor, frame_type, ctx),
        }
    }

    /// Export `frame-wire-len`.
    #[inline]
    pub(crate) fn frame_wire_len(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: Anchor,
        frame: ExtFrame,
    ) -> Call<u64> {
        match self {
            Guest::V0_1(g) => g.frame_wire_len(store, anchor, frame),
        }
    }

    /// Export `write-frame`, writing into the store's `out`.
    #[inline]
    pub(crate) fn write_frame(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: Anchor,
        frame: ExtFrame,
    ) -> Call<()> {
        match self {
            Guest::V0_1(g) => g.write_frame(store, anchor, frame),
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
        match self {
            Guest::V0_1(g) => g.on_frame_reserved(store, anchor, frame, ctx),
        }
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
        match self {
            Guest::V0_1(g) => g.notify_frame(store, anchor, frame, outcome),
        }
    }

    /// Export `parse-frame`, reading the store's `input`.
    #[inline]
    pub(crate) fn parse_frame(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: Anchor,
        frame_type: u64,
    ) -> Call<ParsedFrame> {
        match self {
            Guest::V0_1(g) => g.parse_frame(store, anchor, frame_type),
        }
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
        match self {
            Guest::V0_1(g) => g.process_frame(store, anchor, frame, ctx),
        }
    }

    /// Export `log-frame`.
    #[inline]
    pub(crate) fn log_frame(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: Anchor,
        frame: &Frame,
    ) -> Call<String> {
        match self {
            Guest::V0_1(g) => g.log_frame(store, anchor, frame),
        }
    }

    /// Export `on-plugin-timeout`.
    #[inline]
    pub(crate) fn on_plugin_timeout(
        &mut self,
        store: &mut Store<PluginState>,
        id: u64,
        now: u64,
    ) -> Call<()> {
        match self {
            Guest::V0_1(g) => g.on_plugin_timeout(store, id, now),
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
        match self {
            Guest::V0_1(g) => g.plugin_control(store, id, args),
        }
    }
}
