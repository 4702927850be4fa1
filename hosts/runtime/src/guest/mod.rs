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
    ReceivedFrame, RxContext, SendContext, SentFrame,
};
use crate::state::PluginState;
use wasmtime::Store;
use wasmtime::component::{InstancePre, Linker};

/// Enums whose cases match one to one.
macro_rules! same_cases {
    ($($ty:ident { $($case:ident),* $(,)? })*) => {$(
        impl From<m::$ty> for t::$ty {
            #[inline]
            fn from(v: m::$ty) -> Self {
                match v {
                    $(m::$ty::$case => t::$ty::$case,)*
                }
            }
        }

        impl From<t::$ty> for m::$ty {
            #[inline]
            fn from(v: t::$ty) -> Self {
                match v {
                    $(t::$ty::$case => m::$ty::$case,)*
                }
            }
        }
    )*};
}

/// Variants whose cases match one to one, each payload converted with `From`.
macro_rules! same_variants {
    ($($ty:ident { $($case:ident $(($x:ident))?),* $(,)? })*) => {$(
        #[allow(clippy::useless_conversion)]
        impl From<m::$ty> for t::$ty {
            #[inline]
            fn from(v: m::$ty) -> Self {
                match v {
                    $(m::$ty::$case $(($x))? => t::$ty::$case $(($x.into()))?,)*
                }
            }
        }

        #[allow(clippy::useless_conversion)]
        impl From<t::$ty> for m::$ty {
            #[inline]
            fn from(v: t::$ty) -> Self {
                match v {
                    $(t::$ty::$case $(($x))? => m::$ty::$case $(($x.into()))?,)*
                }
            }
        }
    )*};
}

/// Records whose fields match one to one, each converted with `From`.
macro_rules! same_fields {
    ($($ty:ident { $($field:ident),* $(,)? })*) => {$(
        #[allow(clippy::useless_conversion)]
        impl From<m::$ty> for t::$ty {
            #[inline]
            fn from(v: m::$ty) -> Self {
                t::$ty { $($field: v.$field.into(),)* }
            }
        }

        #[allow(clippy::useless_conversion)]
        impl From<t::$ty> for m::$ty {
            #[inline]
            fn from(v: t::$ty) -> Self {
                m::$ty { $($field: v.$field.into(),)* }
            }
        }
    )*};
}

/// The `out-buf` and `in-buf` resources and the empty `types` host trait
/// of one WIT version's bindings (`$host`, `$t`), onto [`PluginState`]'s
/// buffer methods: every version lends the same buffers.
macro_rules! buffer_resources {
    ($host:ident, $t:ident) => {
        impl $host::HostOutBuf for PluginState {
            #[inline]
            fn capacity(&mut self, _: Resource<OutBufRep>) -> u64 {
                self.out_buf_capacity()
            }

            #[inline]
            fn written(&mut self, _: Resource<OutBufRep>) -> u64 {
                self.out_buf_written()
            }

            #[inline]
            fn put(&mut self, _: Resource<OutBufRep>, data: Vec<u8>) -> Result<(), $t::Error> {
                Ok(self.out_buf_put(&data)?)
            }

            #[inline]
            fn put_zeros(&mut self, _: Resource<OutBufRep>, count: u64) -> Result<(), $t::Error> {
                Ok(self.out_buf_put_zeros(count)?)
            }

            #[inline]
            fn drop(&mut self, _: Resource<OutBufRep>) -> wasmtime::Result<()> {
                Ok(())
            }
        }

        impl $host::HostInBuf for PluginState {
            #[inline]
            fn len(&mut self, _: Resource<InBufRep>) -> u64 {
                self.in_buf_len()
            }

            #[inline]
            fn read(
                &mut self,
                _: Resource<InBufRep>,
                offset: u64,
                len: u64,
            ) -> Result<Vec<u8>, $t::Error> {
                Ok(self.in_buf_read(offset, len)?)
            }

            #[inline]
            fn drop(&mut self, _: Resource<InBufRep>) -> wasmtime::Result<()> {
                Ok(())
            }
        }

        impl $t::Host for PluginState {}
    };
}

/// The host calls whose signatures no WIT version has changed, for one
/// version's `host` trait (`$t` its types module).
macro_rules! version_independent_host_calls {
    ($t:ident) => {
        #[inline]
        fn register_frame(&mut self, registration: $t::FrameRegistration) -> Result<(), $t::Error> {
            Ok(PluginState::register_frame(self, registration.into())?)
        }

        #[inline]
        fn unregister_frame(&mut self, frame_type: u64) -> Result<(), $t::Error> {
            Ok(PluginState::unregister_frame(self, frame_type)?)
        }

        #[inline]
        fn register_transport_parameter(&mut self, id: u64) -> Result<(), $t::Error> {
            Ok(PluginState::register_transport_parameter(self, id)?)
        }

        #[inline]
        fn enable(&mut self) {
            PluginState::enable(self)
        }

        #[inline]
        fn set_timer(&mut self, id: u64, at: u64) -> Result<(), $t::Error> {
            Ok(PluginState::set_timer(self, id, at)?)
        }

        #[inline]
        fn cancel_timer(&mut self, id: u64) -> Result<(), $t::Error> {
            Ok(PluginState::cancel_timer(self, id)?)
        }

        #[inline]
        fn now(&mut self) -> u64 {
            PluginState::now(self)
        }

        #[inline]
        fn random_bytes(&mut self, len: u32) -> Result<Vec<u8>, $t::Error> {
            Ok(PluginState::random_bytes(self, len)?)
        }
    };
}

/// The calls of the exports whose signatures no WIT version has changed,
/// for one version's `Guest` (its `bindings`, and `model` converting the
/// result).
macro_rules! version_independent_exports {
    () => {
        #[inline]
        pub(crate) fn init(&mut self, store: &mut Store<PluginState>) -> super::Call<()> {
            model(self.routines().call_init(store))
        }

        #[inline]
        pub(crate) fn write_transport_parameter(
            &mut self,
            store: &mut Store<PluginState>,
            anchor: m::Anchor,
            id: u64,
        ) -> super::Call<()> {
            let out = Resource::<OutBufRep>::new_borrow(0);
            let routines = self.routines();
            model(routines.call_write_transport_parameter(store, anchor.into(), id, out))
        }

        #[inline]
        pub(crate) fn decode_transport_parameter(
            &mut self,
            store: &mut Store<PluginState>,
            anchor: m::Anchor,
            id: u64,
        ) -> super::Call<()> {
            let value = Resource::<InBufRep>::new_borrow(0);
            let routines = self.routines();
            model(routines.call_decode_transport_parameter(store, anchor.into(), id, value))
        }

        #[inline]
        pub(crate) fn should_send_frame(
            &mut self,
            store: &mut Store<PluginState>,
            anchor: m::Anchor,
            frame_type: u64,
            ctx: m::SendContext,
        ) -> super::Call<bool> {
            let routines = self.routines();
            model(routines.call_should_send_frame(store, anchor.into(), frame_type, ctx.into()))
        }

        #[inline]
        pub(crate) fn on_frame_reserved(
            &mut self,
            store: &mut Store<PluginState>,
            anchor: m::Anchor,
            frame: m::ExtFrame,
            ctx: m::SendContext,
        ) -> super::Call<()> {
            let routines = self.routines();
            model(routines.call_on_frame_reserved(store, anchor.into(), frame.into(), ctx.into()))
        }

        #[inline]
        pub(crate) fn notify_frame(
            &mut self,
            store: &mut Store<PluginState>,
            anchor: m::Anchor,
            frame: m::ExtFrame,
            outcome: m::FrameOutcome,
        ) -> super::Call<()> {
            let routines = self.routines();
            model(routines.call_notify_frame(store, anchor.into(), frame.into(), outcome.into()))
        }

        #[inline]
        pub(crate) fn parse_frame(
            &mut self,
            store: &mut Store<PluginState>,
            anchor: m::Anchor,
            frame_type: u64,
        ) -> super::Call<m::ParsedFrame> {
            let payload = Resource::<InBufRep>::new_borrow(0);
            let routines = self.routines();
            model(routines.call_parse_frame(store, anchor.into(), frame_type, payload))
        }

        #[inline]
        pub(crate) fn on_plugin_timeout(
            &mut self,
            store: &mut Store<PluginState>,
            id: u64,
            now: u64,
        ) -> super::Call<()> {
            model(self.routines().call_on_plugin_timeout(store, id, now))
        }
    };
}

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
    V0_2(v0_2::Pre),
}

impl GuestPre {
    /// The linked component as a plugin of the WIT version whose world it
    /// exports (CQ-LOAD-24).
    #[inline]
    pub(crate) fn new(instance_pre: InstancePre<PluginState>) -> wasmtime::Result<GuestPre> {
        match v0_2::Pre::new(instance_pre.clone()) {
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
            GuestPre::V0_2(pre) => Guest::V0_2(pre.instantiate(store)?),
        })
    }
}

/// One plugin instance's exports, called with the model's types.
///
/// The routines that take a buffer lend the one in the store's
/// [`PluginState`] (`out` for an `out-buf`, `input` for an `in-buf`): the
/// caller fills or reads it around the call.
// Every guest already lives in its slot's boxed `Live`: boxing the larger
// variant again would add a pointer chase to every call.
#[allow(clippy::large_enum_variant)]
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

    /// Routine `observe-frames` through `call-routine` (0.2.3): a 0.1.0
    /// plugin cannot bind it, and is never asked.
    #[inline]
    pub(crate) fn observe_frames(
        &mut self,
        store: &mut Store<PluginState>,
        frame_type: u64,
        records: &mut Vec<u8>,
    ) -> Call<()> {
        match self {
            Guest::V0_1(_) => Ok(Err(crate::abi::Error::Unsupported(
                "a 0.1.0 plugin has no observe-frames".into(),
            ))),
            Guest::V0_2(g) => g.observe_frames(store, frame_type, records),
        }
    }

    /// Routine `send-frame` through `call-routine` (0.2.4): a 0.1.0 plugin
    /// cannot bind it, and is never asked.
    #[inline]
    pub(crate) fn send_frame(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: Anchor,
        frame_type: u64,
        ctx: SendContext,
        out: &mut Vec<u8>,
    ) -> Call<Result<Option<SentFrame>, String>> {
        match self {
            Guest::V0_1(_) => Ok(Err(crate::abi::Error::Unsupported(
                "a 0.1.0 plugin has no send-frame".into(),
            ))),
            Guest::V0_2(g) => g.send_frame(store, anchor, frame_type, ctx, out),
        }
    }

    /// Routine `receive-frame` through `call-routine` (0.2.4): a 0.1.0
    /// plugin cannot bind it, and is never asked.
    #[inline]
    pub(crate) fn receive_frame(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: Anchor,
        frame_type: u64,
        payload: &[u8],
        ctx: RxContext,
    ) -> Call<Result<ReceivedFrame, String>> {
        match self {
            Guest::V0_1(_) => Ok(Err(crate::abi::Error::Unsupported(
                "a 0.1.0 plugin has no receive-frame".into(),
            ))),
            Guest::V0_2(g) => g.receive_frame(store, anchor, frame_type, payload, ctx),
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
