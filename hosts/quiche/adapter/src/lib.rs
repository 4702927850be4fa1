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
//! # use corequic_quiche::Attachment;
//! # fn f(config: &mut quiche::Config) -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = Arc::new(Runtime::new(RuntimeConfig::default(), corequic_quiche::capabilities())?);
//! let padding = runtime.load_file("padding.wasm".as_ref(), &Grants::all())?;
//! let factory = corequic_quiche::PluginFactory(Attachment::new(runtime, vec![padding]));
//! // Before `quiche::connect`/`accept`: a client encodes its transport
//! // parameters inside `connect`.
//! config.set_extension_factory(Some(Arc::new(factory)));
//! # Ok(()) }
//! ```
//!
//! The application reaches its plugins with [`plugin_control`] and
//! [`with_plugins`].

#![warn(missing_docs)]

pub use corequic_adapter::{AdapterExtension, Attachment, ConnectionReport, FrameCounts, LogSink};
use corequic_adapter::{
    ConnectionInfo, ConnectionPlugins, Epoch, FrameRefused, MAX_USIZE_CONGESTION_WINDOW,
    StackConnection, answered_by_core, optional_u64, ssthresh_usize,
};
use corequic_runtime::abi::{self, FieldId, FieldRef, PluginVal};
use corequic_runtime::{HostCapabilities, RoutineError};
use quiche::{
    Extension, ExtensionContext, ExtensionFactory, ExtensionFrame, ObservedFrame, SendContext,
    SendPosition,
};
use std::net::SocketAddr;
use std::time::Instant;

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

/// Creates the plugins of each new connection (set it with
/// `quiche::Config::set_extension_factory` before `connect`/`accept`).
pub struct PluginFactory(pub Attachment);

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
            epoch: Epoch::new(now),
        }))
    }
}

/// The plugins of one quiche connection: quiche's extension.
pub struct QuichePlugins {
    plugins: ConnectionPlugins,
    epoch: Epoch,
}

/// quiche's connection during one hook.
struct Quiche<'a, 'b> {
    cx: &'a mut ExtensionContext<'b>,
    epoch: Epoch,
}

impl StackConnection for Quiche<'_, '_> {
    fn now(&self) -> u64 {
        self.epoch.ns(self.cx.now())
    }

    fn get_field(&mut self, field: FieldRef) -> Result<PluginVal, abi::Error> {
        let info = self.cx.info();
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
            FieldId::LocalAddress | FieldId::PeerAddress => {
                corequic_adapter::path_address(field.id, info.addresses)?
            }
            FieldId::IdleTimeout => PluginVal::from(info.idle_timeout.unwrap_or_default()),
            FieldId::NextPacketNumber => PluginVal::U64(info.next_packet_number),
            FieldId::LargestAcked => optional_u64(info.largest_acked[space]),
            FieldId::LargestReceived => optional_u64(info.largest_received[space]),
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
            FieldId::SourceConnectionId => PluginVal::Bytes(
                self.cx
                    .connection_ids()
                    .0
                    .ok_or_else(|| {
                        abi::Error::NotFound(format!("{}: not chosen yet", field.id.name()))
                    })?
                    .to_vec(),
            ),
            FieldId::DestinationConnectionId => {
                PluginVal::Bytes(self.cx.connection_ids().1.to_vec())
            }
            FieldId::AmplificationBudget => {
                optional_u64(info.amplification_budget.map(|b| b as u64))
            }
            // quiche does not read the ECN codepoints of received datagrams
            // (its `RecvInfo` has none) and sends ACK frames without ECN
            // counts.
            FieldId::EcnEct0Count | FieldId::EcnEct1Count | FieldId::EcnCeCount => PluginVal::None,
            FieldId::PeerIdleTimeout => PluginVal::from(info.peer_idle_timeout),
            FieldId::PeerMaxUdpPayloadSize => PluginVal::U64(info.peer_max_udp_payload_size),
            FieldId::PeerAckDelayExponent => PluginVal::U64(info.peer_ack_delay_exponent),
            FieldId::PeerActiveConnectionIdLimit => PluginVal::U64(info.peer_active_conn_id_limit),
            FieldId::LocalMaxAckDelay => PluginVal::from(info.local_max_ack_delay),
            id @ (FieldId::IsServer | FieldId::SendingHalted) => return Err(answered_by_core(id)),
        })
    }

    fn set_congestion_window(&mut self, bytes: u64) -> Result<bool, abi::Error> {
        // quiche adds to and multiplies the window in usize: a window near
        // usize::MAX overflows (a chaos seed aborted the process in
        // cwnd_available). A larger value is refused, never clamped
        // (CQ-FIELD-8).
        let window =
            corequic_adapter::congestion_window(bytes, MAX_USIZE_CONGESTION_WINDOW, "quiche")?;
        Ok(self.cx.set_cwnd(window))
    }

    fn set_ssthresh(&mut self, bytes: Option<u64>) -> Result<bool, abi::Error> {
        Ok(self.cx.set_ssthresh(ssthresh_usize(bytes)))
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

impl AdapterExtension for QuichePlugins {
    type Context<'c> = ExtensionContext<'c>;
    type Error = quiche::Error;
    type Time = Instant;

    fn plugins(&self) -> &ConnectionPlugins {
        &self.plugins
    }

    fn plugins_mut(&mut self) -> &mut ConnectionPlugins {
        &mut self.plugins
    }

    fn with_connection<R>(
        &mut self,
        cx: &mut ExtensionContext<'_>,
        f: impl FnOnce(&mut ConnectionPlugins, &mut dyn StackConnection) -> R,
    ) -> R {
        let mut stack = Quiche {
            cx,
            epoch: self.epoch,
        };
        f(&mut self.plugins, &mut stack)
    }

    fn parameter_refused(_reason: String) -> quiche::Error {
        quiche::Error::InvalidTransportParam
    }

    /// quiche's errors carry no reason: the detail is in the log.
    fn frame_refused(_refused: FrameRefused) -> quiche::Error {
        quiche::Error::InvalidFrame
    }

    fn stack_time(&self, ns: u64) -> Option<Instant> {
        self.epoch.instant(ns)
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
}

/// Run `f` with a quiche connection's plugins. `None` when the connection
/// has no plugins.
pub fn with_plugins<R>(
    conn: &mut quiche::Connection,
    f: impl FnOnce(&mut QuichePlugins, &mut ExtensionContext<'_>) -> R,
) -> Option<R> {
    conn.with_extension(|ext, cx| QuichePlugins::from_any(ext.as_any_mut()).map(|p| f(p, cx)))
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
