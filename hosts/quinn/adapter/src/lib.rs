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
//! # fn f(transport: &mut quinn_proto::TransportConfig) -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = Arc::new(Runtime::new(RuntimeConfig::default(), corequic_quinn::capabilities())?);
//! let padding = runtime.load_file("padding.wasm".as_ref(), &Grants::all())?;
//! let factory = corequic_quinn::PluginFactory::new(runtime, vec![padding]);
//! transport.extension_factory(Some(Arc::new(factory)));
//! # Ok(()) }
//! ```
//!
//! The application reaches a connection's plugins through
//! `Connection::with_extension` and [`QuinnPlugins::from_extension`].

#![warn(missing_docs)]

use corequic_adapter::{
    Attachment, ConnectionInfo, ConnectionPlugins, FrameRefused, StackConnection,
};
pub use corequic_adapter::{ConnectionReport, FrameCounts, LogSink};
use corequic_runtime::abi::{self, FieldId, FieldRef, PluginVal, PnSpace};
use corequic_runtime::{HostCapabilities, Plugin, PluginStats, RoutineError, Runtime};
use quinn_proto::{
    Extension, ExtensionContext, ExtensionFactory, ExtensionFrame, ObservedFrame, SendContext,
    SendPosition, Side, SpaceId, TransportError, TransportErrorCode, VarInt,
};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
/// `TransportConfig::extension_factory`).
pub struct PluginFactory {
    attachment: Attachment,
    local: Option<SocketAddr>,
}

impl PluginFactory {
    /// A factory attaching `plugins` (in this order) to every connection.
    pub fn new(runtime: Arc<Runtime>, plugins: Vec<Arc<Plugin>>) -> Self {
        PluginFactory {
            attachment: Attachment::new(runtime, plugins),
            local: None,
        }
    }

    /// The endpoint's bound address, for the `local-address` field (quinn
    /// does not know its local port).
    pub fn local_address(mut self, local: SocketAddr) -> Self {
        self.local = Some(local);
        self
    }

    /// Where log records go (by default they are dropped).
    pub fn log_sink(mut self, sink: LogSink) -> Self {
        self.attachment = self.attachment.log_sink(sink);
        self
    }
}

impl ExtensionFactory for PluginFactory {
    fn new_extension(
        &self,
        side: Side,
        remote: SocketAddr,
        now: Instant,
    ) -> Option<Box<dyn Extension>> {
        let info = ConnectionInfo {
            is_server: side.is_server(),
            local: self.local,
            remote,
        };
        Some(Box::new(QuinnPlugins {
            plugins: self.attachment.attach(ADAPTER, info)?,
            epoch: now,
            local: self.local,
        }))
    }
}

/// The plugins of one quinn connection: quinn-proto's extension.
pub struct QuinnPlugins {
    plugins: ConnectionPlugins,
    /// The ABI epoch: when the extension was created.
    epoch: Instant,
    local: Option<SocketAddr>,
}

/// quinn-proto's connection during one hook.
struct Quinn<'a, 'b> {
    cx: &'a mut ExtensionContext<'b>,
    epoch: Instant,
    local: Option<SocketAddr>,
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
        corequic_adapter::duration_ns(&self.cx.now().saturating_duration_since(self.epoch))
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
            FieldId::LocalAddress => self.local.map(PluginVal::from).ok_or(
                abi::Error::NotFound("the application did not give the local address".into()),
            )?,
            FieldId::PeerAddress => PluginVal::from(cx.connection().remote_address()),
            FieldId::IdleTimeout => PluginVal::from(cx.idle_timeout().unwrap_or_default()),
            FieldId::NextPacketNumber => PluginVal::U64(cx.packet_numbers(space_id(field.space)).0),
            FieldId::LargestAcked => cx
                .packet_numbers(space_id(field.space))
                .1
                .map_or(PluginVal::None, PluginVal::U64),
            FieldId::LargestReceived => cx
                .packet_numbers(space_id(field.space))
                .2
                .map_or(PluginVal::None, PluginVal::U64),
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
            FieldId::IsServer | FieldId::SendingHalted => {
                return Err(abi::Error::Failed("answered by the adapter core".into()));
            }
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

impl QuinnPlugins {
    fn stack<'a, 'b>(&self, cx: &'a mut ExtensionContext<'b>) -> Quinn<'a, 'b> {
        Quinn {
            cx,
            epoch: self.epoch,
            local: self.local,
        }
    }

    /// The plugins of a connection, from its extension (`None` when the
    /// extension is not this adapter's).
    pub fn from_extension(ext: &mut dyn Extension) -> Option<&mut QuinnPlugins> {
        ext.as_any_mut().downcast_mut::<QuinnPlugins>()
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

    /// The close this connection's plugins caused, if they did. quinn
    /// reports such a close as the application's, which it cannot tell
    /// from the peer's.
    pub fn local_close(&self) -> Option<(u64, String)> {
        self.plugins.local_close()
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

    fn decode_transport_parameter(
        &mut self,
        cx: &mut ExtensionContext<'_>,
        id: u64,
        value: &[u8],
    ) -> Result<(), TransportError> {
        let mut stack = self.stack(cx);
        self.plugins
            .decode_transport_parameter(&mut stack, id, value)
            .map_err(|reason| {
                transport_error(TransportErrorCode::TRANSPORT_PARAMETER_ERROR, reason)
            })
    }

    fn process_frame(
        &mut self,
        cx: &mut ExtensionContext<'_>,
        frame_type: u64,
        payload: &[u8],
        packet_number: u64,
    ) -> Result<usize, TransportError> {
        let mut stack = self.stack(cx);
        self.plugins
            .process_frame(&mut stack, frame_type, payload, packet_number)
            .map_err(|refused| match refused {
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
            })
    }

    fn next_timeout(&self) -> Option<Instant> {
        let ns = self.plugins.next_timeout()?;
        Some(self.epoch + Duration::from_nanos(ns))
    }
}
