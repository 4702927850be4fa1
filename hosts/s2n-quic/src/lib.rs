//! Core QUIC host adapter for s2n-quic.
//!
//! s2n-quic 1.91.0 (with s2n-quic-transport and s2n-quic-core 0.91.0), with the
//! hook patches in `hosts/s2n-quic/patches/`, calls a per-connection
//! [`Extension`] at its routine points. This crate implements that extension
//! with `corequic-runtime`: each connection gets a [`PluginSet`] of the
//! plugins the application chose, and every hook forwards to it, converting
//! between s2n-quic's types and the ABI's.
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use corequic_runtime::{Grants, Runtime, RuntimeConfig};
//! # fn f() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = Arc::new(Runtime::new(RuntimeConfig::default(), corequic_s2n::capabilities())?);
//! let padding = runtime.load_file("padding.wasm".as_ref(), &Grants::all())?;
//! let factory = corequic_s2n::PluginFactory::new(runtime, vec![padding]);
//! // s2n_quic::Server::builder().with_extension(factory)?...
//! # Ok(()) }
//! ```
//!
//! The application reaches its plugins with [`plugin_control`].
//!
//! Time: the ABI clock counts nanoseconds of s2n-quic's own clock from the
//! connection's creation, so plugin timers map exactly onto s2n-quic
//! timestamps. s2n-quic's API calls carry no time, so a plugin-control call
//! sees the time of the connection's last event.

#![warn(missing_docs)]

use corequic_runtime::abi::{
    self, AckFrame, Anchor, ConnectionCloseFrame, CryptoFrame, EcnCounts, ExtFrame, FieldId,
    FieldRef, Frame, FrameOutcome, MaxStreamDataFrame, NewConnectionIdFrame, PacketType, PluginVal,
    PnSpace, ResetStreamFrame, Routine, RxContext, SendPosition as AbiPosition, StopSendingFrame,
    StreamDataBlockedFrame, StreamFrame, StreamsFrame,
};
use corequic_runtime::{
    FieldSet, HostCapabilities, HostConnection, LogRecord, Plugin, PluginSet, PluginStats,
    RoutineError, Runtime,
};
use s2n_quic::provider::extension::{
    Extension, ExtensionContext, ExtensionFactory, ExtensionFrame, ExtensionInfo, ObservedFrame,
    SendContext, SendPosition,
};
use s2n_quic_core::time::Timestamp;
use s2n_quic_core::transport;
use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// PATH_CHALLENGE, which the adapter writes itself for `send-frame`.
const PATH_CHALLENGE: u64 = 0x1a;

/// What the s2n-quic host supports: every routine and field; the writable
/// fields are `sending-halted`, `congestion-window` and `ssthresh` (with the
/// default Cubic controller). Packet-number fields are those of the
/// application space only.
pub fn capabilities() -> HostCapabilities {
    let writable = [
        FieldId::SendingHalted,
        FieldId::CongestionWindow,
        FieldId::Ssthresh,
        FieldId::MaxTxData,
        FieldId::MaxRxData,
    ]
    .into_iter()
    .collect();
    HostCapabilities {
        readable: FieldSet::all(),
        writable,
        routines: Routine::ALL.to_vec(),
        // s2n-quic's own parameters (dc and MTU probing extensions).
        stack_transport_parameters: vec![0xdc_0000, 0xdc_0002],
    }
}

/// Receives the plugins' log records (and the adapter's own warnings).
pub type LogSink = Arc<dyn Fn(LogRecord) + Send + Sync>;

/// What the plugins of a connection did, reported when s2n-quic frees the
/// connection (after it closed): s2n-quic's API cannot reach a closed
/// connection, so this is how a server learns its plugins' final counters.
#[derive(Debug, Clone)]
pub struct ConnectionReport {
    /// Per-plugin counters.
    pub stats: Vec<PluginStats>,
    /// Plugin frames (sent, acknowledged, lost) by frame type.
    pub frames: BTreeMap<u64, (u64, u64, u64)>,
    /// The close the plugins caused (error code, reason naming the plugin,
    /// routine and cause), if they did. s2n-quic sends the code without the
    /// reason phrase, so this is where the reason is.
    pub close: Option<(u64, String)>,
}

/// Receives the [`ConnectionReport`] of each connection with plugins.
pub type ReportSink = Arc<dyn Fn(ConnectionReport) + Send + Sync>;

/// Creates the plugin set of each new connection (give it to the server or
/// client builder with `with_extension`).
pub struct PluginFactory {
    runtime: Arc<Runtime>,
    plugins: Vec<Arc<Plugin>>,
    log: Option<LogSink>,
    report: Option<ReportSink>,
}

impl fmt::Debug for PluginFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginFactory")
            .field("plugins", &self.plugins.len())
            .finish()
    }
}

impl PluginFactory {
    /// A factory attaching `plugins` (in this order) to every connection.
    pub fn new(runtime: Arc<Runtime>, plugins: Vec<Arc<Plugin>>) -> Self {
        PluginFactory {
            runtime,
            plugins,
            log: None,
            report: None,
        }
    }

    /// Where each connection's final [`ConnectionReport`] goes.
    pub fn report_sink(mut self, sink: ReportSink) -> Self {
        self.report = Some(sink);
        self
    }

    /// Where log records go (by default they are dropped).
    pub fn log_sink(mut self, sink: LogSink) -> Self {
        self.log = Some(sink);
        self
    }
}

impl ExtensionFactory for PluginFactory {
    fn new_extension(&mut self, info: &ExtensionInfo) -> Option<Box<dyn Extension>> {
        let mut state = AdapterState {
            epoch: info.now,
            is_server: info.is_server,
            local: (!info.local_address.ip().is_unspecified()).then_some(info.local_address),
            remote: info.remote_address,
            sending_halted: false,
            challenges: Vec::new(),
            ping_pending: false,
            log: self.log.clone(),
            frames_sent: BTreeMap::new(),
            frames_acked: BTreeMap::new(),
            frames_lost: BTreeMap::new(),
            close: None,
            last_hook: None,
        };
        let mut set = match self.runtime.connection(&self.plugins) {
            Ok(set) => set,
            Err(e) => {
                state.warn(format!("plugins not attached: {e}"));
                return None;
            }
        };
        // The transport parameters are encoded before the connection exists,
        // so `init` and the parameters run against what is known now.
        let mut conn = S2nConn {
            cx: None,
            st: &mut state,
        };
        for (plugin, e) in set.init(&mut conn) {
            conn.st
                .warn(format!("plugin {plugin} removed at init: {e}"));
        }
        let transport_parameters = set.transport_parameters(&mut conn);
        Some(Box::new(S2nPlugins {
            set,
            state,
            transport_parameters,
            report: self.report.clone(),
        }))
    }
}

/// Adapter state that lives beside the plugin set.
struct AdapterState {
    epoch: Timestamp,
    is_server: bool,
    local: Option<SocketAddr>,
    remote: SocketAddr,
    sending_halted: bool,
    /// PATH_CHALLENGE data queued by plugins through `send-frame`.
    challenges: Vec<u64>,
    /// A PING asked for before the connection existed (`init`, the first
    /// transport parameters), sent from the next hook that has it
    /// (CQ-API-14).
    ping_pending: bool,
    log: Option<LogSink>,
    frames_sent: BTreeMap<u64, u64>,
    frames_acked: BTreeMap<u64, u64>,
    frames_lost: BTreeMap<u64, u64>,
    /// The close the plugins asked for: error code and reason.
    close: Option<(u64, String)>,
    /// The connection time of the last hook, and the moment it ran.
    last_hook: Option<(Timestamp, std::time::Instant)>,
}

impl AdapterState {
    fn warn(&self, message: String) {
        if let Some(log) = &self.log {
            log(LogRecord {
                plugin: "corequic-s2n".into(),
                level: abi::LogLevel::Warn,
                message,
                fields: Vec::new(),
            });
        }
    }

    fn now_ns(&self, cx: &ExtensionContext) -> u64 {
        cx.now.saturating_duration_since(self.epoch).as_nanos() as u64
    }
}

/// The plugins of one s2n-quic connection: s2n-quic's extension.
pub struct S2nPlugins {
    set: PluginSet,
    state: AdapterState,
    transport_parameters: Vec<(u64, Vec<u8>)>,
    report: Option<ReportSink>,
}

impl Drop for S2nPlugins {
    fn drop(&mut self) {
        if let Some(report) = &self.report {
            let frames = self
                .state
                .frames_sent
                .keys()
                .map(|ty| (*ty, self.frame_counts(*ty)))
                .collect();
            report(ConnectionReport {
                stats: self.set.stats(),
                frames,
                close: self.state.close.clone(),
            });
        }
    }
}

/// The connection as the runtime sees it during one hook.
struct S2nConn<'a> {
    cx: Option<&'a mut ExtensionContext>,
    st: &'a mut AdapterState,
}

fn unavailable(field: FieldId) -> abi::Error {
    abi::Error::NotFound(format!(
        "{} is not known before the connection exists",
        field.name()
    ))
}

impl HostConnection for S2nConn<'_> {
    fn get_field(&mut self, field: FieldRef) -> Result<PluginVal, abi::Error> {
        let id = field.id;
        match id {
            FieldId::IsServer => return Ok(PluginVal::Bool(self.st.is_server)),
            FieldId::SendingHalted => return Ok(PluginVal::Bool(self.st.sending_halted)),
            _ => {}
        }
        let Some(cx) = self.cx.as_deref() else {
            return match id {
                FieldId::PeerAddress => Ok(PluginVal::from(self.st.remote)),
                FieldId::LocalAddress => self.st.local.map(PluginVal::from).ok_or(unavailable(id)),
                _ => Err(unavailable(id)),
            };
        };
        if matches!(
            id,
            FieldId::NextPacketNumber | FieldId::LargestAcked | FieldId::LargestReceived
        ) && matches!(field.space, Some(PnSpace::Initial | PnSpace::Handshake))
        {
            return Err(abi::Error::NotFound(format!(
                "s2n-quic shows {} of the application space only",
                id.name()
            )));
        }
        let (max_tx, tx, max_rx, rx) = cx.flow_control;
        let opt = |v: Option<u64>| v.map_or(PluginVal::None, PluginVal::U64);
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
            FieldId::LargestAcked => opt(cx.largest_acked),
            FieldId::LargestReceived => opt(cx.largest_received),
            FieldId::LatestRtt => PluginVal::from(cx.latest_rtt),
            FieldId::SmoothedRtt => PluginVal::from(cx.smoothed_rtt),
            FieldId::MinRtt => PluginVal::from(cx.min_rtt),
            FieldId::Rttvar => PluginVal::from(cx.rttvar),
            FieldId::MaxAckDelay => PluginVal::from(cx.max_ack_delay),
            FieldId::PtoCount => PluginVal::U32(cx.pto_count),
            FieldId::BytesInFlight => PluginVal::U64(u64::from(cx.bytes_in_flight)),
            FieldId::CongestionWindow => PluginVal::U64(u64::from(cx.congestion_window)),
            FieldId::Ssthresh => opt(cx.ssthresh.map(u64::from)),
            FieldId::IsServer | FieldId::SendingHalted => {
                return Err(abi::Error::Failed("unreachable field dispatch".into()));
            }
        })
    }

    fn set_field(&mut self, field: FieldRef, value: PluginVal) -> Result<(), abi::Error> {
        // s2n-quic's congestion controllers count in u32 bytes: a larger
        // value is refused, never clamped (CQ-FIELD-8).
        let bytes = |v: u64| {
            u32::try_from(v).map_err(|_| {
                abi::Error::InvalidArgument(format!(
                    "{}: s2n-quic's congestion controller holds at most {} bytes, not {v}",
                    field.id.name(),
                    u32::MAX
                ))
            })
        };
        match (field.id, value) {
            (FieldId::SendingHalted, PluginVal::Bool(halt)) => {
                self.st.sending_halted = halt;
                Ok(())
            }
            (FieldId::CongestionWindow, PluginVal::U64(w)) => match self.cx.as_deref_mut() {
                Some(cx) => {
                    cx.set_congestion_window(bytes(w)?);
                    Ok(())
                }
                None => Err(unavailable(field.id)),
            },
            (FieldId::Ssthresh, PluginVal::U64(s)) => match self.cx.as_deref_mut() {
                Some(cx) => {
                    cx.set_ssthresh(bytes(s)?);
                    Ok(())
                }
                None => Err(unavailable(field.id)),
            },
            (FieldId::MaxTxData | FieldId::MaxRxData, PluginVal::U64(max)) => {
                let Some(cx) = self.cx.as_deref_mut() else {
                    return Err(unavailable(field.id));
                };
                // s2n-quic's connection-level limits live in the 1-RTT
                // space's stream manager, which the handshake creates.
                if !cx.flow_limits_writable() {
                    return Err(abi::Error::Unsupported(format!(
                        "s2n-quic writes {} once its 1-RTT packet space exists, not during the handshake",
                        field.id.name()
                    )));
                }
                abi::write_flow_limit(
                    cx,
                    field.id,
                    max,
                    ExtensionContext::set_max_tx_data,
                    ExtensionContext::set_max_rx_data,
                )
            }
            _ => Err(abi::Error::Unsupported(format!(
                "s2n-quic cannot write {} with this value",
                field.id.name()
            ))),
        }
    }

    fn now(&self) -> u64 {
        self.cx.as_deref().map_or(0, |cx| self.st.now_ns(cx))
    }

    fn send_frame(&mut self, frame: Frame) -> Result<(), abi::Error> {
        match frame {
            Frame::Ping => match self.cx.as_deref_mut() {
                Some(cx) => {
                    cx.ping();
                    Ok(())
                }
                None => {
                    self.st.ping_pending = true;
                    Ok(())
                }
            },
            Frame::PathChallenge(data) => {
                self.st.challenges.push(data);
                Ok(())
            }
            other => Err(abi::Error::Unsupported(format!(
                "s2n-quic cannot queue frame type {:#x}",
                other.frame_type()
            ))),
        }
    }

    fn log(&mut self, record: LogRecord) {
        if let Some(log) = &self.st.log {
            log(record);
        }
    }
}

fn observed_to_abi(frame: &ObservedFrame) -> Option<Frame> {
    let ns = |d: &Duration| d.as_nanos().min(u128::from(u64::MAX)) as u64;
    Some(match frame {
        ObservedFrame::Ping => Frame::Ping,
        ObservedFrame::Ack(largest, delay, ranges, ecn) => Frame::Ack(AckFrame {
            largest_acknowledged: *largest,
            ack_delay: ns(delay),
            ranges: ranges.clone(),
            ecn: ecn.map(|(ect0, ect1, ce)| EcnCounts { ect0, ect1, ce }),
        }),
        ObservedFrame::ResetStream(id, code, size) => Frame::ResetStream(ResetStreamFrame {
            stream_id: *id,
            error_code: *code,
            final_size: *size,
        }),
        ObservedFrame::StopSending(id, code) => Frame::StopSending(StopSendingFrame {
            stream_id: *id,
            error_code: *code,
        }),
        ObservedFrame::Crypto(offset, length) => Frame::Crypto(CryptoFrame {
            offset: *offset,
            length: *length,
        }),
        ObservedFrame::NewToken(token) => Frame::NewToken(token.to_vec()),
        ObservedFrame::Stream(id, offset, length, fin) => Frame::Stream(StreamFrame {
            stream_id: *id,
            offset: *offset,
            length: *length,
            fin: *fin,
        }),
        ObservedFrame::MaxData(v) => Frame::MaxData(*v),
        ObservedFrame::MaxStreamData(id, max) => Frame::MaxStreamData(MaxStreamDataFrame {
            stream_id: *id,
            maximum: *max,
        }),
        ObservedFrame::MaxStreams(bidi, max) => Frame::MaxStreams(StreamsFrame {
            bidirectional: *bidi,
            maximum: *max,
        }),
        ObservedFrame::DataBlocked(v) => Frame::DataBlocked(*v),
        ObservedFrame::StreamDataBlocked(id, limit) => {
            Frame::StreamDataBlocked(StreamDataBlockedFrame {
                stream_id: *id,
                limit: *limit,
            })
        }
        ObservedFrame::StreamsBlocked(bidi, max) => Frame::StreamsBlocked(StreamsFrame {
            bidirectional: *bidi,
            maximum: *max,
        }),
        ObservedFrame::NewConnectionId(seq, retire, cid, token) => {
            Frame::NewConnectionId(NewConnectionIdFrame {
                sequence: *seq,
                retire_prior_to: *retire,
                connection_id: cid.to_vec(),
                stateless_reset_token: token.to_vec(),
            })
        }
        ObservedFrame::RetireConnectionId(seq) => Frame::RetireConnectionId(*seq),
        ObservedFrame::PathChallenge(d) => Frame::PathChallenge(*d),
        ObservedFrame::PathResponse(d) => Frame::PathResponse(*d),
        ObservedFrame::Close(application, code, ty, reason) => {
            Frame::ConnectionClose(ConnectionCloseFrame {
                application: *application,
                error_code: *code,
                frame_type: *ty,
                reason: reason.to_vec(),
            })
        }
        ObservedFrame::HandshakeDone => Frame::HandshakeDone,
        ObservedFrame::Datagram(len) => Frame::Datagram(*len),
        _ => return None,
    })
}

/// ABI frame type of a frame as s2n-quic reports it (STREAM and DATAGRAM
/// families collapse to their first type, as [`Frame::frame_type`] does).
fn abi_frame_type(ty: u64) -> u64 {
    match ty {
        0x08..=0x0f => 0x08,
        0x31 => 0x30,
        other => other,
    }
}

fn abi_position(p: SendPosition) -> AbiPosition {
    match p {
        SendPosition::First => AbiPosition::First,
        SendPosition::AfterAck => AbiPosition::AfterAck,
        SendPosition::End => AbiPosition::End,
    }
}

impl S2nPlugins {
    /// Run `f` with the plugin set and the connection view, then act on a
    /// close request (a plugin that defines protocol behaviour faulted).
    fn with<R>(
        &mut self,
        cx: &mut ExtensionContext,
        f: impl FnOnce(&mut PluginSet, &mut S2nConn<'_>) -> R,
    ) -> R {
        self.state.last_hook = Some((cx.now, std::time::Instant::now()));
        let mut conn = S2nConn {
            cx: Some(cx),
            st: &mut self.state,
        };
        let r = f(&mut self.set, &mut conn);
        if let Some(cx) = conn.cx.as_deref_mut()
            && std::mem::take(&mut conn.st.ping_pending)
        {
            cx.ping();
        }
        if let Some(close) = self.set.take_close_request() {
            conn.st.warn(format!(
                "closing with {:#x}: {}",
                close.error_code, close.reason
            ));
            if let Some(cx) = conn.cx.as_deref_mut() {
                cx.close(close.error_code, close.reason.clone().into_bytes().into());
            }
            conn.st
                .close
                .get_or_insert((close.error_code, close.reason));
        }
        r
    }

    fn rx_context(&self, cx: &ExtensionContext, packet_number: u64) -> RxContext {
        RxContext {
            packet_type: PacketType::OneRtt,
            space: PnSpace::ApplicationData,
            packet_number,
            now: self.state.now_ns(cx),
        }
    }

    /// Call plugin-control `id` (the application side of the ABI).
    pub fn plugin_control(
        &mut self,
        cx: &mut ExtensionContext,
        id: u64,
        args: &[PluginVal],
    ) -> Result<Vec<PluginVal>, RoutineError> {
        // s2n-quic's API calls carry no time: `cx.now` is the time of the
        // connection's last event, which on an idle connection is long past.
        // Advance it by the time elapsed since that hook ran, so the plugin
        // sees the current time (a probe is timed from this call).
        if let Some((at, instant)) = self.state.last_hook {
            let now = at + instant.elapsed();
            if now > cx.now {
                cx.now = now;
            }
        }
        self.with(cx, |set, conn| set.plugin_control(conn, id, args))
    }

    /// Per-plugin counters of this connection.
    pub fn stats(&self) -> Vec<PluginStats> {
        self.set.stats()
    }

    /// Plugin frames written, acknowledged and lost, by frame type.
    pub fn frame_counts(&self, frame_type: u64) -> (u64, u64, u64) {
        let get = |m: &BTreeMap<u64, u64>| m.get(&frame_type).copied().unwrap_or(0);
        (
            get(&self.state.frames_sent),
            get(&self.state.frames_acked),
            get(&self.state.frames_lost),
        )
    }

    fn abi_send_context(&self, cx: &ExtensionContext, ctx: &SendContext) -> abi::SendContext {
        abi::SendContext {
            packet_type: PacketType::OneRtt,
            space: PnSpace::ApplicationData,
            packet_number: ctx.packet_number,
            position: abi_position(ctx.position),
            room: ctx.room as u64,
            now: self.state.now_ns(cx),
        }
    }
}

impl Extension for S2nPlugins {
    fn transport_parameters(&mut self) -> Vec<(u64, Vec<u8>)> {
        std::mem::take(&mut self.transport_parameters)
    }

    fn decode_transport_parameter(
        &mut self,
        cx: &mut ExtensionContext,
        id: u64,
        value: &[u8],
    ) -> Result<(), transport::Error> {
        match self.with(cx, |set, conn| {
            set.decode_transport_parameter(conn, id, value)
        }) {
            Ok(_) => Ok(()),
            // A fault already asked for the plugin-failure close.
            Err(RoutineError::Fault(_)) => Ok(()),
            Err(e) => {
                let reason = format!("transport parameter {id:#x} refused: {e}");
                self.state.warn(reason.clone());
                // s2n-quic's close reasons are static: the detail goes to the log
                // and to the connection's report.
                self.state.close.get_or_insert((0x08, reason));
                Err(transport::Error::TRANSPORT_PARAMETER_ERROR.with_reason("refused by a plugin"))
            }
        }
    }

    fn wants_to_send(&mut self, cx: &mut ExtensionContext, ctx: &SendContext) -> bool {
        if !self.state.challenges.is_empty() {
            return true;
        }
        let abi_ctx = self.abi_send_context(cx, ctx);
        self.with(cx, |set, conn| set.wants_to_send(conn, abi_ctx))
    }

    fn write_frames(
        &mut self,
        cx: &mut ExtensionContext,
        ctx: &SendContext,
        buf: &mut Vec<u8>,
        frames: &mut Vec<ExtensionFrame>,
    ) {
        let mut room = ctx.room;
        if ctx.position == SendPosition::First && ctx.in_flight {
            // PATH_CHALLENGEs queued through `send-frame` (CQ-API-14).
            while room >= 9 {
                let Some(data) = self.state.challenges.pop() else {
                    break;
                };
                buf.push(PATH_CHALLENGE as u8);
                buf.extend_from_slice(&data.to_be_bytes());
                frames.push(ExtensionFrame {
                    frame_type: PATH_CHALLENGE,
                    tag: data,
                    ack_eliciting: true,
                    in_flight: true,
                });
                room -= 9;
            }
        }
        let mut abi_ctx = self.abi_send_context(cx, ctx);
        abi_ctx.room = room as u64;
        let mut written = Vec::new();
        // An ACK-only packet under a full congestion window takes only
        // frames that are not in flight (CQ-SEND-10).
        let in_flight = ctx.in_flight;
        self.with(cx, |set, conn| {
            if in_flight {
                set.write_frames(conn, abi_ctx, buf, &mut written)
            } else {
                set.write_frames_not_in_flight(conn, abi_ctx, buf, &mut written)
            }
        });
        for w in written {
            *self
                .state
                .frames_sent
                .entry(w.frame.frame_type)
                .or_default() += 1;
            frames.push(ExtensionFrame {
                frame_type: w.frame.frame_type,
                tag: w.frame.tag,
                ack_eliciting: w.ack_eliciting,
                in_flight: w.in_flight,
            });
        }
    }

    fn on_frames(&mut self, cx: &mut ExtensionContext, frames: &[ExtensionFrame], acked: bool) {
        let outcome = if acked {
            FrameOutcome::Acked
        } else {
            FrameOutcome::Lost
        };
        for f in frames.iter().filter(|f| f.frame_type != PATH_CHALLENGE) {
            let counts = if acked {
                &mut self.state.frames_acked
            } else {
                &mut self.state.frames_lost
            };
            *counts.entry(f.frame_type).or_default() += 1;
            let frame = ExtFrame {
                frame_type: f.frame_type,
                tag: f.tag,
            };
            // Errors are logged by the runtime; there is nothing to undo.
            let _ = self.with(cx, |set, conn| set.notify_frame(conn, frame, outcome));
        }
    }

    fn process_frame(
        &mut self,
        cx: &mut ExtensionContext,
        frame_type: u64,
        payload: &[u8],
        packet_number: u64,
    ) -> Result<usize, transport::Error> {
        let rx = self.rx_context(cx, packet_number);
        let r = self.with(cx, |set, conn| {
            if !set.parses_frame_type(frame_type) {
                return Err((
                    transport::Error::FRAME_ENCODING_ERROR.with_reason("invalid frame"),
                    format!("no plugin parses frame {frame_type:#x}"),
                ));
            }
            let parsed = set.parse_frame(conn, frame_type, payload).map_err(|e| {
                (
                    transport::Error::FRAME_ENCODING_ERROR.with_reason("plugin frame"),
                    format!("frame {frame_type:#x}: {e}"),
                )
            })?;
            set.process_frame(conn, &Frame::Extension(parsed.frame), rx)
                .map_err(|e| {
                    (
                        transport::Error::PROTOCOL_VIOLATION.with_reason("plugin frame"),
                        format!("frame {frame_type:#x}: {e}"),
                    )
                })?;
            Ok(parsed.consumed as usize)
        });
        r.map_err(|(error, detail)| {
            self.state.warn(detail);
            error
        })
    }

    fn observes_frame(&mut self, frame_type: u64) -> bool {
        self.set.observes_frame_type(abi_frame_type(frame_type))
    }

    fn observe_frame(
        &mut self,
        cx: &mut ExtensionContext,
        frame: &ObservedFrame,
        after: bool,
        packet_number: u64,
    ) {
        let Some(frame) = observed_to_abi(frame) else {
            return;
        };
        let rx = self.rx_context(cx, packet_number);
        let anchor = if after { Anchor::After } else { Anchor::Before };
        self.with(cx, |set, conn| set.observe_frame(conn, anchor, &frame, rx));
    }

    fn next_timeout(&mut self) -> Option<Timestamp> {
        let ns = self.set.next_timeout()?;
        self.state.epoch.checked_add(Duration::from_nanos(ns))
    }

    fn on_timeout(&mut self, cx: &mut ExtensionContext) {
        let now = self.state.now_ns(cx);
        self.with(cx, |set, conn| set.handle_timeout(conn, now));
    }

    fn sending_halted(&mut self) -> bool {
        self.state.sending_halted
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Call plugin-control `id` on an s2n-quic connection's plugins. `None` when
/// the connection has no plugins (or is closed).
pub fn plugin_control(
    conn: &s2n_quic::connection::Handle,
    id: u64,
    args: &[PluginVal],
) -> Option<Result<Vec<PluginVal>, RoutineError>> {
    with_plugins(conn, |plugins, cx| plugins.plugin_control(cx, id, args))
}

/// Run `f` with an s2n-quic connection's plugins (e.g. for
/// [`S2nPlugins::stats`]). `None` when the connection has no plugins or is
/// closed.
pub fn with_plugins<R>(
    conn: &s2n_quic::connection::Handle,
    f: impl FnOnce(&mut S2nPlugins, &mut ExtensionContext) -> R,
) -> Option<R> {
    conn.extension_mut(|ext, cx| {
        ext.as_any_mut()
            .downcast_mut::<S2nPlugins>()
            .map(|p| f(p, cx))
    })
    .ok()
    .flatten()
    .flatten()
}
