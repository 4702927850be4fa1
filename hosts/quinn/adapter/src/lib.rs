//! Core QUIC host adapter for quinn.
//!
//! quinn-proto 0.11.19, with the hook patch in `hosts/quinn/patches/`, calls a
//! per-connection [`quinn_proto::Extension`] at its routine points. This
//! crate implements that extension on [`corequic_adapter`]: each connection
//! gets the plugins the application chose, and every hook forwards to them,
//! converting between quinn-proto's types and the ABI's. It is sans-IO, like
//! quinn-proto: the endpoint that runs it over sockets is
//! `hosts/quinn/endpoint`.
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use corequic_runtime::{Grants, Runtime, RuntimeConfig};
//! # use corequic_quinn::Attachment;
//! # fn f(transport: &mut quinn_proto::TransportConfig) -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = Arc::new(Runtime::new(RuntimeConfig::default(), corequic_quinn::capabilities())?);
//! let padding = runtime.load_file("padding.wasm".as_ref(), &Grants::all())?;
//! let factory = corequic_quinn::PluginFactory(Attachment::new(runtime, vec![padding]));
//! transport.extension_factory(Some(Arc::new(factory)));
//! # Ok(()) }
//! ```
//!
//! The application reaches a connection's plugins through
//! `Connection::with_extension` and [`AdapterExtension::from_any`].

#![warn(missing_docs)]

pub use corequic_adapter::{AdapterExtension, Attachment, ConnectionReport, FrameCounts, LogSink};
use corequic_adapter::{
    ConnectionInfo, ConnectionPlugins, Epoch, FrameRefused, StackConnection, answered_by_core,
    optional_u64,
};
use corequic_runtime::HostCapabilities;
use corequic_runtime::abi::{self, FieldId, FieldRef, PluginVal, PnSpace};
use quinn_proto::{
    Extension, ExtensionContext, ExtensionFactory, ExtensionFrame, ObservedFrame, SendContext,
    SendPosition, Side, SpaceId, TransportError, TransportErrorCode, VarInt,
};
use std::net::SocketAddr;
use std::time::Instant;

/// The adapter's name in its log records.
const ADAPTER: &str = "corequic-quinn";

/// What the quinn host supports: every routine and field; the writable
/// fields are `sending-halted`, `congestion-window`, `ssthresh`,
/// `max-tx-data` and `max-rx-data`.
pub fn capabilities() -> HostCapabilities {
    // min_ack_delay of the ack-frequency draft, which quinn sends when
    // acknowledgement frequency is configured.
    corequic_adapter::capabilities(vec![0xff04_de1b])
}

/// Creates the plugins of each new connection (set it with
/// `TransportConfig::extension_factory`). quinn does not know its local
/// port: give the endpoint's bound address with
/// [`Attachment::local_address`] for the `local-address` field.
pub struct PluginFactory(pub Attachment);

impl ExtensionFactory for PluginFactory {
    fn new_extension(
        &self,
        side: Side,
        remote: SocketAddr,
        now: Instant,
    ) -> Option<Box<dyn Extension>> {
        let info = ConnectionInfo {
            is_server: side.is_server(),
            local: None,
            remote,
        };
        Some(Box::new(QuinnPlugins {
            plugins: self.0.attach(ADAPTER, info)?,
            epoch: Epoch::new(now),
        }))
    }
}

/// The plugins of one quinn connection: quinn-proto's extension.
pub struct QuinnPlugins {
    plugins: ConnectionPlugins,
    epoch: Epoch,
}

/// quinn-proto's connection during one hook.
struct Quinn<'a, 'b> {
    cx: &'a mut ExtensionContext<'b>,
    epoch: Epoch,
}

fn space_id(space: Option<PnSpace>) -> SpaceId {
    match space {
        Some(PnSpace::Initial) => SpaceId::Initial,
        Some(PnSpace::Handshake) => SpaceId::Handshake,
        _ => SpaceId::Data,
    }
}

impl StackConnection for Quinn<'_, '_> {
    fn now(&self) -> u64 {
        self.epoch.ns(self.cx.now())
    }

    fn get_field(&mut self, field: FieldRef) -> Result<PluginVal, abi::Error> {
        let cx = &mut *self.cx;
        let (max_tx, tx, max_rx, rx) = cx.flow_control();
        Ok(match field.id {
            FieldId::Version => PluginVal::U32(cx.version()),
            FieldId::IsEstablished => PluginVal::Bool(cx.is_established()),
            FieldId::MaxTxData => PluginVal::U64(max_tx),
            FieldId::TxData => PluginVal::U64(tx),
            FieldId::MaxRxData => PluginVal::U64(max_rx),
            FieldId::RxData => PluginVal::U64(rx),
            FieldId::MaxSendUdpPayload | FieldId::MaxDatagramSize => {
                PluginVal::U64(u64::from(cx.connection().current_mtu()))
            }
            FieldId::LocalAddress => {
                // The core answers the address the application gave.
                return Err(abi::Error::NotFound(
                    "quinn does not know its local address".into(),
                ));
            }
            FieldId::PeerAddress => PluginVal::from(cx.connection().remote_address()),
            FieldId::IdleTimeout => PluginVal::from(cx.idle_timeout().unwrap_or_default()),
            FieldId::NextPacketNumber => PluginVal::U64(cx.packet_numbers(space_id(field.space)).0),
            FieldId::LargestAcked => optional_u64(cx.packet_numbers(space_id(field.space)).1),
            FieldId::LargestReceived => optional_u64(cx.packet_numbers(space_id(field.space)).2),
            FieldId::LatestRtt => PluginVal::from(cx.rtt().latest()),
            FieldId::SmoothedRtt => PluginVal::from(cx.rtt().get()),
            FieldId::MinRtt => PluginVal::from(cx.rtt().min()),
            FieldId::Rttvar => PluginVal::from(cx.rtt().var()),
            FieldId::MaxAckDelay => PluginVal::from(cx.peer_max_ack_delay()),
            FieldId::PtoCount => PluginVal::U32(cx.pto_count()),
            FieldId::BytesInFlight => PluginVal::U64(cx.bytes_in_flight()),
            FieldId::CongestionWindow => PluginVal::U64(cx.congestion().window()),
            FieldId::Ssthresh => match cx.congestion().metrics().ssthresh {
                Some(s) if s != u64::MAX => PluginVal::U64(s),
                _ => PluginVal::None,
            },
            FieldId::SourceConnectionId => PluginVal::Bytes(cx.connection_ids().0.to_vec()),
            FieldId::DestinationConnectionId => PluginVal::Bytes(cx.connection_ids().1.to_vec()),
            FieldId::AmplificationBudget => optional_u64(cx.amplification_budget()),
            FieldId::EcnEct0Count => PluginVal::U64(cx.ecn_counts(space_id(field.space)).0),
            FieldId::EcnEct1Count => PluginVal::U64(cx.ecn_counts(space_id(field.space)).1),
            FieldId::EcnCeCount => PluginVal::U64(cx.ecn_counts(space_id(field.space)).2),
            FieldId::PeerIdleTimeout => PluginVal::from(cx.peer_transport_parameters().0),
            FieldId::PeerMaxUdpPayloadSize => PluginVal::U64(cx.peer_transport_parameters().1),
            FieldId::PeerAckDelayExponent => PluginVal::U64(cx.peer_transport_parameters().2),
            FieldId::PeerActiveConnectionIdLimit => {
                PluginVal::U64(cx.peer_transport_parameters().3)
            }
            FieldId::LocalMaxAckDelay => PluginVal::from(cx.local_max_ack_delay()),
            id @ (FieldId::IsServer | FieldId::SendingHalted) => return Err(answered_by_core(id)),
        })
    }

    fn set_congestion_window(&mut self, bytes: u64) -> Result<bool, abi::Error> {
        Ok(self.cx.congestion().set_window(bytes))
    }

    fn set_ssthresh(&mut self, bytes: Option<u64>) -> Result<bool, abi::Error> {
        Ok(self.cx.congestion().set_ssthresh(bytes))
    }

    fn set_flow_limit(&mut self, field: FieldId, max: u64) -> Result<bool, abi::Error> {
        Ok(match field {
            FieldId::MaxTxData => self.cx.set_max_tx_data(max),
            _ => self.cx.set_max_rx_data(max),
        })
    }

    fn ping(&mut self) -> Result<(), abi::Error> {
        self.cx.ping();
        Ok(())
    }

    fn close(&mut self, error_code: u64, reason: &str) {
        let code = VarInt::from_u64(error_code).unwrap_or(VarInt::MAX);
        self.cx.close(code, reason.as_bytes().to_vec().into());
    }
}

fn transport_error(code: TransportErrorCode, reason: String) -> TransportError {
    TransportError {
        code,
        frame: None,
        reason,
    }
}

impl AdapterExtension for QuinnPlugins {
    type Context<'c> = ExtensionContext<'c>;
    type Error = TransportError;
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
        let mut stack = Quinn {
            cx,
            epoch: self.epoch,
        };
        f(&mut self.plugins, &mut stack)
    }

    fn parameter_refused(reason: String) -> TransportError {
        transport_error(TransportErrorCode::TRANSPORT_PARAMETER_ERROR, reason)
    }

    fn frame_refused(refused: FrameRefused) -> TransportError {
        match refused {
            FrameRefused::Unknown => transport_error(
                TransportErrorCode::FRAME_ENCODING_ERROR,
                "invalid frame ID".into(),
            ),
            FrameRefused::Encoding(reason) => {
                transport_error(TransportErrorCode::FRAME_ENCODING_ERROR, reason)
            }
            FrameRefused::Violation(reason) => {
                transport_error(TransportErrorCode::PROTOCOL_VIOLATION, reason)
            }
        }
    }

    fn stack_time(&self, ns: u64) -> Option<Instant> {
        self.epoch.instant(ns)
    }
}

impl Extension for QuinnPlugins {
    corequic_adapter::extension_hooks!(
        ExtensionContext<'_>,
        SendContext,
        SendPosition,
        ExtensionFrame,
        ObservedFrame
    );
}
