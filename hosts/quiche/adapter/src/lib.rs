//! Core QUIC host adapter for quiche.
//!
//! quiche 0.30.0, with the hook patch in `hosts/quiche/patches/`, calls a
//! per-connection [`quiche::Extension`] at its routine points. This crate
//! implements that extension on [`corequic_adapter`]: each connection gets
//! the plugins the application chose, and every hook forwards to them,
//! converting between quiche's types and the ABI's. quiche is sans-IO, and
//! so is this crate; the endpoint that runs quiche over a socket is
//! `hosts/quiche/endpoint`.
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use corequic_runtime::{Grants, Runtime, RuntimeConfig};
//! # fn f(config: &mut quiche::Config) -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = Arc::new(Runtime::new(RuntimeConfig::default(), corequic_quiche::capabilities())?);
//! let padding = runtime.load_file("padding.wasm".as_ref(), &Grants::all())?;
//! let factory = corequic_quiche::PluginFactory::new(runtime, vec![padding]);
//! // Before `quiche::connect`/`accept`: a client encodes its transport
//! // parameters inside `connect`.
//! config.set_extension_factory(Some(Arc::new(factory)));
//! # Ok(()) }
//! ```
//!
//! The application reaches its plugins with [`plugin_control`] and
//! [`with_plugins`].

#![warn(missing_docs)]

use corequic_adapter::{
    Attachment, ConnectionInfo, ConnectionPlugins, FrameRefused, StackConnection,
};
pub use corequic_adapter::{ConnectionReport, FrameCounts, LogSink};
use corequic_runtime::abi::{self, FieldId, FieldRef, PluginVal};
use corequic_runtime::{HostCapabilities, Plugin, PluginStats, RoutineError, Runtime};
use quiche::{
    Extension, ExtensionContext, ExtensionFactory, ExtensionFrame, ObservedFrame, SendContext,
    SendPosition,
};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The adapter's name in its log records.
const ADAPTER: &str = "corequic-quiche";

/// What the quiche host supports: every routine; every field (the hook
/// patch exposes `latest-rtt` and `pto-count`, which quiche keeps private);
/// the writable fields are `sending-halted`, `congestion-window` and
/// `ssthresh` (the latter two with quiche's default congestion controllers,
/// CUBIC and Reno), `max-tx-data` and `max-rx-data`.
pub fn capabilities() -> HostCapabilities {
    // quiche sends only standard parameters.
    corequic_adapter::capabilities(Vec::new())
}

/// The largest congestion window a plugin may write, 2^48 bytes: far above
/// any real window, with room left for quiche's arithmetic on it.
pub const MAX_CONGESTION_WINDOW: usize = 1 << 48;

/// Creates the plugins of each new connection (set it with
/// `quiche::Config::set_extension_factory` before `connect`/`accept`).
pub struct PluginFactory(Attachment);

impl PluginFactory {
    /// A factory attaching `plugins` (in this order) to every connection.
    pub fn new(runtime: Arc<Runtime>, plugins: Vec<Arc<Plugin>>) -> Self {
        PluginFactory(Attachment::new(runtime, plugins))
    }

    /// Where log records go (by default they are dropped).
    pub fn log_sink(self, sink: LogSink) -> Self {
        PluginFactory(self.0.log_sink(sink))
    }
}

impl ExtensionFactory for PluginFactory {
    fn new_extension(
        &self,
        is_server: bool,
        local: SocketAddr,
        peer: SocketAddr,
        now: Instant,
    ) -> Option<Box<dyn Extension>> {
        let info = ConnectionInfo {
            is_server,
            local: Some(local),
            remote: peer,
        };
        Some(Box::new(QuichePlugins {
            plugins: self.0.attach(ADAPTER, info)?,
            epoch: now,
            addresses: (local, peer),
        }))
    }
}

/// The plugins of one quiche connection: quiche's extension.
pub struct QuichePlugins {
    plugins: ConnectionPlugins,
    /// The ABI epoch: when the extension was created.
    epoch: Instant,
    /// The addresses the connection was created with, for a connection
    /// that has no active path.
    addresses: (SocketAddr, SocketAddr),
}

/// quiche's connection during one hook.
struct Quiche<'a, 'b> {
    cx: &'a mut ExtensionContext<'b>,
    epoch: Instant,
    addresses: (SocketAddr, SocketAddr),
}

impl StackConnection for Quiche<'_, '_> {
    fn now(&self) -> u64 {
        corequic_adapter::duration_ns(&self.cx.now().saturating_duration_since(self.epoch))
    }

    fn get_field(&mut self, field: FieldRef) -> Result<PluginVal, abi::Error> {
        let info = self.cx.info();
        let (local, peer) = info.addresses.unwrap_or(self.addresses);
        let space = corequic_adapter::space_index(field.space);
        Ok(match field.id {
            FieldId::Version => PluginVal::U32(info.version),
            FieldId::IsEstablished => PluginVal::Bool(info.is_established),
            FieldId::MaxTxData => PluginVal::U64(info.max_tx_data),
            FieldId::TxData => PluginVal::U64(info.tx_data),
            FieldId::MaxRxData => PluginVal::U64(info.max_rx_data),
            FieldId::RxData => PluginVal::U64(info.rx_data),
            FieldId::MaxSendUdpPayload | FieldId::MaxDatagramSize => {
                PluginVal::U64(info.max_datagram_size as u64)
            }
            FieldId::LocalAddress => PluginVal::from(local),
            FieldId::PeerAddress => PluginVal::from(peer),
            FieldId::IdleTimeout => PluginVal::from(info.idle_timeout.unwrap_or_default()),
            FieldId::NextPacketNumber => PluginVal::U64(info.next_packet_number),
            FieldId::LargestAcked => {
                info.largest_acked[space].map_or(PluginVal::None, PluginVal::U64)
            }
            FieldId::LargestReceived => {
                info.largest_received[space].map_or(PluginVal::None, PluginVal::U64)
            }
            FieldId::LatestRtt => PluginVal::from(info.latest_rtt),
            FieldId::PtoCount => PluginVal::U32(info.pto_count),
            FieldId::SmoothedRtt => PluginVal::from(info.smoothed_rtt),
            FieldId::MinRtt => PluginVal::from(info.min_rtt.unwrap_or(info.smoothed_rtt)),
            FieldId::Rttvar => PluginVal::from(info.rttvar),
            FieldId::MaxAckDelay => PluginVal::from(info.peer_max_ack_delay),
            FieldId::BytesInFlight => PluginVal::U64(info.bytes_in_flight as u64),
            FieldId::CongestionWindow => PluginVal::U64(info.cwnd as u64),
            FieldId::Ssthresh => match info.ssthresh {
                Some(s) if s != usize::MAX => PluginVal::U64(s as u64),
                _ => PluginVal::None,
            },
            FieldId::IsServer | FieldId::SendingHalted => {
                return Err(abi::Error::Failed("answered by the adapter core".into()));
            }
        })
    }

    fn set_congestion_window(&mut self, bytes: u64) -> Result<bool, abi::Error> {
        // quiche adds to and multiplies the window in usize: a window near
        // usize::MAX overflows (a chaos seed aborted the process in
        // cwnd_available). A larger value is refused, never clamped
        // (CQ-FIELD-8).
        let window = corequic_adapter::congestion_window(bytes, MAX_CONGESTION_WINDOW, "quiche")?;
        Ok(self.cx.set_cwnd(window))
    }

    fn set_ssthresh(&mut self, bytes: Option<u64>) -> Result<bool, abi::Error> {
        let bytes = bytes.map(|s| usize::try_from(s).unwrap_or(usize::MAX));
        Ok(self.cx.set_ssthresh(bytes))
    }

    fn set_flow_limit(&mut self, field: FieldId, max: u64) -> Result<bool, abi::Error> {
        Ok(match field {
            FieldId::MaxTxData => self.cx.set_max_tx_data(max),
            _ => self.cx.set_max_rx_data(max),
        })
    }

    fn ping(&mut self) -> Result<(), abi::Error> {
        self.cx
            .send_ack_eliciting()
            .map_err(|e| abi::Error::Failed(format!("PING: {e}")))
    }

    fn close(&mut self, error_code: u64, reason: &str) {
        // Already closing is the only error: nothing more to do.
        let _ = self.cx.close(true, error_code, reason.as_bytes());
    }
}

impl QuichePlugins {
    fn stack<'a, 'b>(&self, cx: &'a mut ExtensionContext<'b>) -> Quiche<'a, 'b> {
        Quiche {
            cx,
            epoch: self.epoch,
            addresses: self.addresses,
        }
    }

    /// The plugins of a connection, from its extension (`None` when the
    /// extension is not this adapter's).
    pub fn from_extension(ext: &mut dyn Extension) -> Option<&mut QuichePlugins> {
        ext.as_any_mut().downcast_mut::<QuichePlugins>()
    }

    /// Call plugin-control `id` (the application side of the ABI).
    pub fn plugin_control(
        &mut self,
        cx: &mut ExtensionContext<'_>,
        id: u64,
        args: &[PluginVal],
    ) -> Result<Vec<PluginVal>, RoutineError> {
        let mut stack = self.stack(cx);
        self.plugins.plugin_control(&mut stack, id, args)
    }

    /// Per-plugin counters of this connection.
    pub fn stats(&self) -> Vec<PluginStats> {
        self.plugins.stats()
    }

    /// Plugin frames of `frame_type` written, acknowledged and lost.
    pub fn frame_counts(&self, frame_type: u64) -> FrameCounts {
        self.plugins.frame_counts(frame_type)
    }
}

impl Extension for QuichePlugins {
    corequic_adapter::extension_hooks!(
        ExtensionContext<'_>,
        SendContext,
        SendPosition,
        ExtensionFrame,
        ObservedFrame
    );

    fn decode_transport_parameter(
        &mut self,
        cx: &mut ExtensionContext<'_>,
        id: u64,
        value: &[u8],
    ) -> quiche::Result<()> {
        let mut stack = self.stack(cx);
        self.plugins
            .decode_transport_parameter(&mut stack, id, value)
            .map_err(|_| quiche::Error::InvalidTransportParam)
    }

    fn process_frame(
        &mut self,
        cx: &mut ExtensionContext<'_>,
        frame_type: u64,
        payload: &[u8],
        packet_number: u64,
    ) -> quiche::Result<usize> {
        let mut stack = self.stack(cx);
        // quiche's errors carry no reason: the detail is in the log.
        self.plugins
            .process_frame(&mut stack, frame_type, payload, packet_number)
            .map_err(|_: FrameRefused| quiche::Error::InvalidFrame)
    }

    fn next_timeout(&self) -> Option<Instant> {
        let ns = self.plugins.next_timeout()?;
        Some(self.epoch + Duration::from_nanos(ns))
    }
}

/// Run `f` with a quiche connection's plugins. `None` when the connection
/// has no plugins.
pub fn with_plugins<R>(
    conn: &mut quiche::Connection,
    f: impl FnOnce(&mut QuichePlugins, &mut ExtensionContext<'_>) -> R,
) -> Option<R> {
    conn.with_extension(|ext, cx| QuichePlugins::from_extension(ext).map(|p| f(p, cx)))
        .flatten()
}

/// Call plugin-control `id` on a quiche connection's plugins. `None` when
/// the connection has no plugins.
pub fn plugin_control(
    conn: &mut quiche::Connection,
    id: u64,
    args: &[PluginVal],
) -> Option<Result<Vec<PluginVal>, RoutineError>> {
    with_plugins(conn, |plugins, cx| plugins.plugin_control(cx, id, args))
}
