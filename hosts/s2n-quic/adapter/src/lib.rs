//! Core QUIC host adapter for s2n-quic.
//!
//! s2n-quic 1.91.0 (with s2n-quic-transport and s2n-quic-core 0.91.0), with the
//! hook patches in `hosts/s2n-quic/patches/`, calls a per-connection
//! [`Extension`] at its routine points. This crate implements that extension
//! on [`corequic_adapter`]: each connection gets the plugins the application
//! chose, and every hook forwards to them, converting between s2n-quic's
//! types and the ABI's. It depends on s2n-quic-transport only, which does no
//! I/O; the endpoint that runs s2n-quic is `hosts/s2n-quic/endpoint`.
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use corequic_runtime::{Grants, Runtime, RuntimeConfig};
//! # use corequic_s2n::Attachment;
//! # fn f() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = Arc::new(Runtime::new(RuntimeConfig::default(), corequic_s2n::capabilities())?);
//! let padding = runtime.load_file("padding.wasm".as_ref(), &Grants::all())?;
//! let factory = corequic_s2n::PluginFactory(Attachment::new(runtime, vec![padding]));
//! // s2n_quic::Server::builder().with_extension(factory)?...
//! # Ok(()) }
//! ```
//!
//! The application reaches a connection's plugins through s2n-quic's
//! `Handle::extension_mut` and [`AdapterExtension::from_any`].
//!
//! Time: the ABI clock counts nanoseconds of s2n-quic's own clock from the
//! connection's creation, so plugin timers map exactly onto s2n-quic
//! timestamps. s2n-quic's API calls carry no time, so a plugin-control call
//! sees the time of the connection's last event, advanced by the time
//! elapsed since.

#![warn(missing_docs)]

pub use corequic_adapter::{
    AdapterExtension, Attachment, ConnectionReport, FrameCounts, LogSink, ReportSink,
};
use corequic_adapter::{
    ConnectionInfo, ConnectionPlugins, FrameRefused, StackConnection, answered_by_core,
    optional_u64,
};
use corequic_runtime::abi::{self, FieldId, FieldRef, PluginVal, PnSpace};
use corequic_runtime::{HostCapabilities, RoutineError};
use s2n_quic_core::time::Timestamp;
use s2n_quic_core::transport;
use s2n_quic_transport::extension::{
    Extension, ExtensionContext, ExtensionFactory, ExtensionFrame, ExtensionInfo, ObservedFrame,
    SendContext, SendPosition,
};
use std::fmt;
use std::time::Duration;

/// The adapter's name in its log records.
const ADAPTER: &str = "corequic-s2n";

/// What the s2n-quic host supports: every routine and field; the writable
/// fields are `sending-halted`, `congestion-window` and `ssthresh` (with the
/// default Cubic controller), `max-tx-data` and `max-rx-data`.
/// Per-space fields (packet numbers, ECN counts) are those of the application
/// space only.
pub fn capabilities() -> HostCapabilities {
    // s2n-quic's own parameters (dc and MTU probing extensions).
    corequic_adapter::capabilities(vec![0xdc_0000, 0xdc_0002])
}

/// Creates the plugins of each new connection (give it to the server or
/// client builder with `with_extension`). s2n-quic's API cannot reach a
/// closed connection: a server learns its plugins' final counters from
/// [`Attachment::report_sink`]. s2n-quic sends a close's code without its
/// reason phrase, so the report's close is where the reason is.
pub struct PluginFactory(pub Attachment);

impl fmt::Debug for PluginFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PluginFactory").field(&self.0).finish()
    }
}

impl ExtensionFactory for PluginFactory {
    fn new_extension(&mut self, info: &ExtensionInfo) -> Option<Box<dyn Extension>> {
        let connection = ConnectionInfo {
            is_server: info.is_server,
            // A client does not know its local address yet.
            local: (!info.local_address.ip().is_unspecified()).then_some(info.local_address),
            remote: info.remote_address,
        };
        Some(Box::new(S2nPlugins {
            plugins: self.0.attach(ADAPTER, connection)?,
            epoch: info.now,
            // A connection may see no hook before an embedder's first
            // plugin-control call: most of a bulk transfer's packets skip
            // `write_frames` (`offers_frames_at`).
            clock_pairing: (info.now, std::time::Instant::now()),
        }))
    }
}

/// The plugins of one s2n-quic connection: s2n-quic's extension.
pub struct S2nPlugins {
    plugins: ConnectionPlugins,
    /// The ABI epoch: when the extension was created.
    epoch: Timestamp,
    /// s2n-quic's time at the extension's creation or in a hook, paired
    /// with the process clock's reading then: what `plugin_control`, which
    /// runs outside hooks, advances to the current time. Both clocks are
    /// monotonic and run at one rate, so a pairing stays valid; it is
    /// renewed once per [`CLOCK_PAIRING_PERIOD`] of connection time, not in
    /// every hook, since a clock read in every hook was 4 % of a loaded
    /// server's CPU.
    clock_pairing: (Timestamp, std::time::Instant),
}

/// How much connection time passes before a hook pairs s2n-quic's time
/// with the process clock again (see `S2nPlugins::clock_pairing`).
const CLOCK_PAIRING_PERIOD: std::time::Duration = std::time::Duration::from_millis(1);

/// s2n-quic's connection during one hook.
struct S2n<'a> {
    cx: &'a mut ExtensionContext,
    epoch: Timestamp,
}

/// A value for s2n-quic's congestion controllers, which count in u32
/// bytes: a larger value is refused, never clamped (CQ-FIELD-8).
fn controller_bytes(field: FieldId, v: u64) -> Result<u32, abi::Error> {
    u32::try_from(v).map_err(|_| {
        abi::Error::InvalidArgument(format!(
            "{}: s2n-quic's congestion controller holds at most {} bytes, not {v}",
            field.name(),
            u32::MAX
        ))
    })
}

impl StackConnection for S2n<'_> {
    fn now(&self) -> u64 {
        corequic_adapter::duration_ns(&self.cx.now.saturating_duration_since(self.epoch))
    }

    fn get_field(&mut self, field: FieldRef) -> Result<PluginVal, abi::Error> {
        let cx = &*self.cx;
        let id = field.id;
        if id.per_space() && matches!(field.space, Some(PnSpace::Initial | PnSpace::Handshake)) {
            return Err(abi::Error::NotFound(format!(
                "s2n-quic shows {} of the application space only",
                id.name()
            )));
        }
        let (max_tx, tx, max_rx, rx) = cx.flow_control;
        let tp = &cx.parameters;
        Ok(match id {
            FieldId::Version => PluginVal::U32(cx.version),
            FieldId::IsEstablished => PluginVal::Bool(cx.is_established),
            FieldId::MaxTxData => PluginVal::U64(max_tx),
            FieldId::TxData => PluginVal::U64(tx),
            FieldId::MaxRxData => PluginVal::U64(max_rx),
            FieldId::RxData => PluginVal::U64(rx),
            FieldId::MaxSendUdpPayload | FieldId::MaxDatagramSize => {
                PluginVal::U64(u64::from(cx.max_datagram_size))
            }
            FieldId::PeerAddress => PluginVal::from(cx.remote_address),
            FieldId::LocalAddress => PluginVal::from(cx.local_address),
            FieldId::IdleTimeout => PluginVal::from(cx.idle_timeout.unwrap_or_default()),
            FieldId::NextPacketNumber => PluginVal::U64(cx.next_packet_number),
            FieldId::LargestAcked => optional_u64(cx.largest_acked),
            FieldId::LargestReceived => optional_u64(cx.largest_received),
            FieldId::LatestRtt => PluginVal::from(cx.latest_rtt),
            FieldId::SmoothedRtt => PluginVal::from(cx.smoothed_rtt),
            FieldId::MinRtt => PluginVal::from(cx.min_rtt),
            FieldId::Rttvar => PluginVal::from(cx.rttvar),
            FieldId::MaxAckDelay => PluginVal::from(cx.max_ack_delay),
            FieldId::PtoCount => PluginVal::U32(cx.pto_count),
            FieldId::BytesInFlight => PluginVal::U64(u64::from(cx.bytes_in_flight)),
            FieldId::CongestionWindow => PluginVal::U64(u64::from(cx.congestion_window)),
            FieldId::Ssthresh => optional_u64(cx.ssthresh.map(u64::from)),
            FieldId::SourceConnectionId => match tp.initial_source_connection_id {
                Some(id) => PluginVal::Bytes(id.as_bytes().to_vec()),
                None => {
                    return Err(abi::Error::NotFound(
                        "s2n-quic sent no initial_source_connection_id".into(),
                    ));
                }
            },
            FieldId::DestinationConnectionId => {
                PluginVal::Bytes(cx.destination_connection_id.as_bytes().to_vec())
            }
            FieldId::AmplificationBudget => optional_u64(cx.amplification_budget.map(u64::from)),
            FieldId::EcnEct0Count => PluginVal::U64(cx.ecn_counts.ect_0_count.as_u64()),
            FieldId::EcnEct1Count => PluginVal::U64(cx.ecn_counts.ect_1_count.as_u64()),
            FieldId::EcnCeCount => PluginVal::U64(cx.ecn_counts.ce_count.as_u64()),
            FieldId::PeerIdleTimeout => PluginVal::from(Duration::from(tp.peer_max_idle_timeout)),
            FieldId::PeerMaxUdpPayloadSize => PluginVal::U64(tp.peer_max_udp_payload_size.as_u64()),
            FieldId::PeerAckDelayExponent => {
                PluginVal::U64(u64::from(tp.peer_ack_delay_exponent.as_u8()))
            }
            FieldId::PeerActiveConnectionIdLimit => {
                PluginVal::U64(tp.peer_active_connection_id_limit.as_u64())
            }
            FieldId::LocalMaxAckDelay => PluginVal::from(tp.local_max_ack_delay.as_duration()),
            id @ (FieldId::IsServer | FieldId::SendingHalted) => return Err(answered_by_core(id)),
        })
    }

    fn set_congestion_window(&mut self, bytes: u64) -> Result<bool, abi::Error> {
        let bytes = controller_bytes(FieldId::CongestionWindow, bytes)?;
        self.cx.set_congestion_window(bytes);
        Ok(true)
    }

    fn set_ssthresh(&mut self, bytes: Option<u64>) -> Result<bool, abi::Error> {
        // The controller's threshold cannot be cleared.
        let Some(bytes) = bytes else { return Ok(false) };
        let bytes = controller_bytes(FieldId::Ssthresh, bytes)?;
        self.cx.set_ssthresh(bytes);
        Ok(true)
    }

    fn set_flow_limit(&mut self, field: FieldId, max: u64) -> Result<bool, abi::Error> {
        // s2n-quic's connection-level limits live in the 1-RTT space's
        // stream manager, which the handshake creates.
        if !self.cx.flow_limits_writable() {
            return Err(abi::Error::Unsupported(format!(
                "s2n-quic writes {} once its 1-RTT packet space exists, not during the handshake",
                field.name()
            )));
        }
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
        self.cx.close(error_code, reason.as_bytes().to_vec().into());
    }
}

impl AdapterExtension for S2nPlugins {
    type Context<'c> = ExtensionContext;
    type Error = transport::Error;
    type Time = Timestamp;

    fn plugins(&self) -> &ConnectionPlugins {
        &self.plugins
    }

    fn plugins_mut(&mut self) -> &mut ConnectionPlugins {
        &mut self.plugins
    }

    /// Pairs s2n-quic's time with the process clock, for `plugin_control`.
    fn with_connection<R>(
        &mut self,
        cx: &mut ExtensionContext,
        f: impl FnOnce(&mut ConnectionPlugins, &mut dyn StackConnection) -> R,
    ) -> R {
        if cx.now.saturating_duration_since(self.clock_pairing.0) >= CLOCK_PAIRING_PERIOD {
            self.clock_pairing = (cx.now, std::time::Instant::now());
        }
        let mut stack = S2n {
            cx,
            epoch: self.epoch,
        };
        f(&mut self.plugins, &mut stack)
    }

    /// s2n-quic's close reasons are static: the detail goes to the log and
    /// to the connection's report.
    fn parameter_refused(_reason: String) -> transport::Error {
        transport::Error::TRANSPORT_PARAMETER_ERROR.with_reason("refused by a plugin")
    }

    /// s2n-quic's reasons are static: the detail is in the log.
    fn frame_refused(refused: FrameRefused) -> transport::Error {
        match refused {
            FrameRefused::Unknown => {
                transport::Error::FRAME_ENCODING_ERROR.with_reason("invalid frame")
            }
            FrameRefused::Encoding(_) => {
                transport::Error::FRAME_ENCODING_ERROR.with_reason("plugin frame")
            }
            FrameRefused::Violation(_) => {
                transport::Error::PROTOCOL_VIOLATION.with_reason("plugin frame")
            }
        }
    }

    fn stack_time(&self, ns: u64) -> Option<Timestamp> {
        self.epoch.checked_add(Duration::from_nanos(ns))
    }

    fn plugin_control(
        &mut self,
        cx: &mut ExtensionContext,
        id: u64,
        args: &[PluginVal],
    ) -> Result<Vec<PluginVal>, RoutineError> {
        // s2n-quic's API calls carry no time: `cx.now` is the time of the
        // connection's last event, which on an idle connection is long past.
        // Advance it to the current time through the clock pairing, so the
        // plugin sees the current time (a probe is timed from this call).
        let (at, instant) = self.clock_pairing;
        let now = at + instant.elapsed();
        if now > cx.now {
            cx.now = now;
        }
        self.with_connection(cx, |plugins, stack| plugins.plugin_control(stack, id, args))
    }
}

impl Extension for S2nPlugins {
    corequic_adapter::extension_hooks!(
        ExtensionContext,
        SendContext,
        SendPosition,
        ExtensionFrame,
        ObservedFrame
    );
}
