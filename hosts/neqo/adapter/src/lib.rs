//! Core QUIC host adapter for neqo.
//!
//! neqo-transport 0.13.4, with the hook patch in `hosts/neqo/patches/`,
//! calls a per-connection [`neqo_transport::Extension`] at its routine
//! points. This crate implements that extension on [`corequic_adapter`]:
//! each connection gets the plugins the application chose, and every hook
//! forwards to them, converting between neqo's types and the ABI's. neqo is
//! sans-IO, and so is this crate; the endpoint that runs neqo over a socket
//! is `hosts/neqo/endpoint`.
//!
//! ```no_run
//! # use std::{rc::Rc, sync::Arc};
//! # use corequic_runtime::{Grants, Runtime, RuntimeConfig};
//! # use corequic_neqo::Attachment;
//! # fn f() -> Result<neqo_transport::ConnectionParameters, Box<dyn std::error::Error>> {
//! let runtime = Arc::new(Runtime::new(RuntimeConfig::default(), corequic_neqo::capabilities())?);
//! let padding = runtime.load_file("padding.wasm".as_ref(), &Grants::all())?;
//! let factory = corequic_neqo::PluginFactory(Attachment::new(runtime, vec![padding]));
//! // Both roles: neqo's `Server` clones these parameters for each connection.
//! let params = neqo_transport::ConnectionParameters::default()
//!     .extension_factory(Some(Rc::new(factory)));
//! # Ok(params) }
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
use neqo_common::{IpTosEcn, Role};
use neqo_transport::{
    Extension, ExtensionContext, ExtensionFactory, ExtensionFrame, ObservedFrame, SendContext,
    SendPosition,
};
use std::net::SocketAddr;
use std::time::Instant;

/// The adapter's name in its log records.
const ADAPTER: &str = "corequic-neqo";

/// neqo's own transport parameter beyond RFC 9000's: `min_ack_delay`
/// (draft-ietf-quic-ack-frequency), which it always sends.
const NEQO_MIN_ACK_DELAY: u64 = 0xff02_de1a;

/// What the neqo host supports: every routine; every field (the hook patch
/// exposes what neqo keeps private: the latest RTT, the PTO count, the
/// peer's max ACK delay, ssthresh, connection flow control, and for ABI
/// 0.2.1's fields the connection IDs, the anti-amplification budget, the
/// ECN counts and the transport parameters); the writable fields are
/// `sending-halted`, `congestion-window` and `ssthresh` (neqo's congestion
/// controllers, CUBIC and NewReno), `max-tx-data` and `max-rx-data`.
pub fn capabilities() -> HostCapabilities {
    corequic_adapter::capabilities(vec![NEQO_MIN_ACK_DELAY])
}

/// Creates the plugins of each new connection (set it with
/// `ConnectionParameters::extension_factory`).
pub struct PluginFactory(pub Attachment);

impl ExtensionFactory for PluginFactory {
    fn new_extension(
        &self,
        role: Role,
        local: SocketAddr,
        peer: SocketAddr,
        now: Instant,
    ) -> Option<Box<dyn Extension>> {
        let info = ConnectionInfo {
            is_server: role == Role::Server,
            local: Some(local),
            remote: peer,
        };
        Some(Box::new(NeqoPlugins {
            plugins: self.0.attach(ADAPTER, info)?,
            epoch: Epoch::new(now),
        }))
    }
}

/// The plugins of one neqo connection: neqo's extension.
pub struct NeqoPlugins {
    plugins: ConnectionPlugins,
    epoch: Epoch,
}

/// neqo's connection during one hook.
struct Neqo<'a, 'b> {
    cx: &'a mut ExtensionContext<'b>,
    epoch: Epoch,
}

impl StackConnection for Neqo<'_, '_> {
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
            FieldId::IdleTimeout => PluginVal::from(info.idle_timeout),
            // A space whose keys are gone (or not yet there) sends nothing.
            FieldId::NextPacketNumber => PluginVal::U64(
                info.next_packet_number[space]
                    .or(info.largest_acked[space].map(|pn| pn + 1))
                    .unwrap_or(0),
            ),
            FieldId::LargestAcked => optional_u64(info.largest_acked[space]),
            FieldId::LargestReceived => optional_u64(info.largest_received[space]),
            FieldId::LatestRtt => PluginVal::from(info.latest_rtt),
            FieldId::PtoCount => PluginVal::U32(info.pto_count),
            FieldId::SmoothedRtt => PluginVal::from(info.smoothed_rtt),
            FieldId::MinRtt => PluginVal::from(info.min_rtt),
            FieldId::Rttvar => PluginVal::from(info.rttvar),
            FieldId::MaxAckDelay => PluginVal::from(info.peer_max_ack_delay),
            FieldId::BytesInFlight => PluginVal::U64(info.bytes_in_flight as u64),
            FieldId::CongestionWindow => PluginVal::U64(info.cwnd as u64),
            FieldId::Ssthresh => optional_u64(info.ssthresh.map(|s| s as u64)),
            FieldId::SourceConnectionId => PluginVal::Bytes(info.initial_source_cid.to_vec()),
            FieldId::DestinationConnectionId => PluginVal::Bytes(
                info.remote_cid
                    .ok_or_else(|| abi::Error::NotFound(format!("{}: no path", field.id.name())))?
                    .to_vec(),
            ),
            // A client's address needs no validation (neqo validates its
            // path when it sets it up).
            FieldId::AmplificationBudget => optional_u64(
                info.amplification_limit
                    .filter(|_| info.is_server)
                    .map(|b| b as u64),
            ),
            FieldId::EcnEct0Count | FieldId::EcnEct1Count | FieldId::EcnCeCount => {
                let mark = match field.id {
                    FieldId::EcnEct0Count => IpTosEcn::Ect0,
                    FieldId::EcnEct1Count => IpTosEcn::Ect1,
                    _ => IpTosEcn::Ce,
                };
                // neqo drops a space's counts with its keys.
                let counts = info.ecn_received[space].ok_or_else(|| {
                    abi::Error::NotFound(format!("{}: the space is discarded", field.id.name()))
                })?;
                PluginVal::U64(counts[mark])
            }
            FieldId::PeerIdleTimeout => PluginVal::from(info.peer_idle_timeout),
            FieldId::PeerMaxUdpPayloadSize => PluginVal::U64(info.peer_max_udp_payload_size),
            FieldId::PeerAckDelayExponent => PluginVal::U64(info.peer_ack_delay_exponent),
            FieldId::PeerActiveConnectionIdLimit => {
                PluginVal::U64(info.peer_active_connection_id_limit)
            }
            FieldId::LocalMaxAckDelay => PluginVal::from(info.local_max_ack_delay),
            id @ (FieldId::IsServer | FieldId::SendingHalted) => return Err(answered_by_core(id)),
        })
    }

    fn set_congestion_window(&mut self, bytes: u64) -> Result<bool, abi::Error> {
        // neqo adds to and multiplies the window in usize; a larger value
        // is refused, never clamped (CQ-FIELD-8).
        let window =
            corequic_adapter::congestion_window(bytes, MAX_USIZE_CONGESTION_WINDOW, "neqo")?;
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
            .map_err(|e| abi::Error::Failed(format!("PING: {e:?}")))
    }

    fn close(&mut self, error_code: u64, reason: &str) {
        self.cx.close(error_code, reason);
    }
}

impl AdapterExtension for NeqoPlugins {
    type Context<'c> = ExtensionContext<'c>;
    type Error = neqo_transport::Error;
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
        let mut stack = Neqo {
            cx,
            epoch: self.epoch,
        };
        f(&mut self.plugins, &mut stack)
    }

    fn parameter_refused(_reason: String) -> neqo_transport::Error {
        neqo_transport::Error::TransportParameterError
    }

    /// neqo's errors carry no reason: the detail is in the log.
    fn frame_refused(refused: FrameRefused) -> neqo_transport::Error {
        match refused {
            FrameRefused::Violation(_) => neqo_transport::Error::ProtocolViolation,
            FrameRefused::Unknown | FrameRefused::Encoding(_) => {
                neqo_transport::Error::FrameEncodingError
            }
        }
    }

    fn stack_time(&self, ns: u64) -> Option<Instant> {
        self.epoch.instant(ns)
    }
}

impl Extension for NeqoPlugins {
    corequic_adapter::extension_hooks!(
        ExtensionContext<'_>,
        SendContext,
        SendPosition,
        ExtensionFrame,
        ObservedFrame
    );
}

/// Run `f` with a neqo connection's plugins. `None` when the connection
/// has no plugins. Call `process_output` afterwards.
pub fn with_plugins<R>(
    conn: &mut neqo_transport::Connection,
    now: Instant,
    f: impl FnOnce(&mut NeqoPlugins, &mut ExtensionContext<'_>) -> R,
) -> Option<R> {
    conn.with_extension(now, |ext, cx| {
        NeqoPlugins::from_any(ext.as_any_mut()).map(|p| f(p, cx))
    })
    .flatten()
}

/// Call plugin-control `id` on a neqo connection's plugins. `None` when
/// the connection has no plugins.
pub fn plugin_control(
    conn: &mut neqo_transport::Connection,
    now: Instant,
    id: u64,
    args: &[PluginVal],
) -> Option<Result<Vec<PluginVal>, RoutineError>> {
    with_plugins(conn, now, |plugins, cx| {
        plugins.plugin_control(cx, id, args)
    })
}
