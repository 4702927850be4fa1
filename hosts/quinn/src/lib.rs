//! Core QUIC host adapter for quinn.
//!
//! quinn-proto 0.11.19, with the hook patch in `hosts/quinn/patches/`, calls a
//! per-connection [`quinn_proto::Extension`] at its routine points. This
//! crate implements that extension with `corequic-runtime`: each connection
//! gets a [`PluginSet`] of the plugins the application chose, and every hook
//! forwards to it, converting between quinn's types and the ABI's.
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use corequic_runtime::{Grants, Runtime, RuntimeConfig};
//! # fn f(transport: &mut quinn::TransportConfig) -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = Arc::new(Runtime::new(RuntimeConfig::default(), corequic_quinn::capabilities())?);
//! let padding = runtime.load_file("padding.wasm".as_ref(), &Grants::all())?;
//! let factory = corequic_quinn::PluginFactory::new(runtime, vec![padding]);
//! transport.extension_factory(Some(Arc::new(factory)));
//! # Ok(()) }
//! ```
//!
//! The application reaches its plugins with [`plugin_control`].

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
use quinn_proto::{
    Extension, ExtensionContext, ExtensionFactory, ExtensionFrame, ObservedFrame, SendContext,
    SendPosition, Side, SpaceId, TransportError, TransportErrorCode, VarInt,
};
use std::any::Any;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// PATH_CHALLENGE, which the adapter writes itself for `send-frame`.
const PATH_CHALLENGE: u64 = 0x1a;

/// What the quinn host supports: every routine and field; the writable
/// fields are `sending-halted`, `congestion-window` and `ssthresh` (quinn's
/// flow-control limits follow MAX_DATA frames and are read-only here).
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
        // min_ack_delay of the ack-frequency draft, which quinn sends when
        // acknowledgement frequency is configured.
        stack_transport_parameters: vec![0xff04_de1b],
    }
}

/// Receives the plugins' log records (and the adapter's own warnings).
pub type LogSink = Arc<dyn Fn(LogRecord) + Send + Sync>;

/// Creates the plugin set of each new connection (set it with
/// `TransportConfig::extension_factory`).
pub struct PluginFactory {
    runtime: Arc<Runtime>,
    plugins: Vec<Arc<Plugin>>,
    local: Option<SocketAddr>,
    log: Option<LogSink>,
}

impl PluginFactory {
    /// A factory attaching `plugins` (in this order) to every connection.
    pub fn new(runtime: Arc<Runtime>, plugins: Vec<Arc<Plugin>>) -> Self {
        PluginFactory {
            runtime,
            plugins,
            local: None,
            log: None,
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
        self.log = Some(sink);
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
        let mut state = AdapterState {
            epoch: now,
            is_server: side.is_server(),
            local: self.local,
            remote,
            sending_halted: false,
            ping_pending: false,
            local_close: None,
            challenges: Vec::new(),
            log: self.log.clone(),
            frames_sent: BTreeMap::new(),
            frames_acked: BTreeMap::new(),
            frames_lost: BTreeMap::new(),
        };
        let mut set = match self.runtime.connection(&self.plugins) {
            Ok(set) => set,
            Err(e) => {
                state.warn(format!("plugins not attached: {e}"));
                return None;
            }
        };
        // No quinn connection exists yet: the transport parameters are
        // encoded before it is created, so `init` and the parameters run
        // against what is known now (side, addresses, time).
        let mut conn = QuinnConn {
            cx: None,
            st: &mut state,
        };
        for (plugin, e) in set.init(&mut conn) {
            conn.st
                .warn(format!("plugin {plugin} removed at init: {e}"));
        }
        let transport_parameters = set.transport_parameters(&mut conn);
        Some(Box::new(QuinnPlugins {
            set: Mutex::new(set),
            state,
            transport_parameters,
        }))
    }
}

/// Adapter state that lives beside the plugin set.
struct AdapterState {
    epoch: Instant,
    is_server: bool,
    local: Option<SocketAddr>,
    remote: SocketAddr,
    sending_halted: bool,
    /// A PING asked for through `send-frame` before the connection existed.
    ping_pending: bool,
    /// The close this connection's plugins asked for (CQ-LIMIT-8).
    local_close: Option<(u64, String)>,
    /// PATH_CHALLENGE data queued by plugins through `send-frame`.
    challenges: Vec<u64>,
    log: Option<LogSink>,
    frames_sent: BTreeMap<u64, u64>,
    frames_acked: BTreeMap<u64, u64>,
    frames_lost: BTreeMap<u64, u64>,
}

impl AdapterState {
    fn warn(&self, message: String) {
        if let Some(log) = &self.log {
            log(LogRecord {
                plugin: "corequic-quinn".into(),
                level: abi::LogLevel::Warn,
                message,
                fields: Vec::new(),
            });
        }
    }
}

/// The plugins of one quinn connection: quinn-proto's extension.
pub struct QuinnPlugins {
    /// `PluginSet` is `Send` but not `Sync`; every hook has `&mut self`, so
    /// `Mutex::get_mut` reaches it without locking.
    set: Mutex<PluginSet>,
    state: AdapterState,
    transport_parameters: Vec<(u64, Vec<u8>)>,
}

/// The connection as the runtime sees it during one hook.
struct QuinnConn<'a, 'b> {
    cx: Option<&'a mut ExtensionContext<'b>>,
    st: &'a mut AdapterState,
}

fn unavailable(field: FieldId) -> abi::Error {
    abi::Error::NotFound(format!(
        "{} is not known before the connection exists",
        field.name()
    ))
}

fn space_id(space: Option<PnSpace>) -> SpaceId {
    match space {
        Some(PnSpace::Initial) => SpaceId::Initial,
        Some(PnSpace::Handshake) => SpaceId::Handshake,
        _ => SpaceId::Data,
    }
}

impl QuinnConn<'_, '_> {
    fn now_ns(&self) -> u64 {
        match &self.cx {
            Some(cx) => cx.now().saturating_duration_since(self.st.epoch).as_nanos() as u64,
            None => 0,
        }
    }
}

impl HostConnection for QuinnConn<'_, '_> {
    fn get_field(&mut self, field: FieldRef) -> Result<PluginVal, abi::Error> {
        let id = field.id;
        match id {
            FieldId::IsServer => return Ok(PluginVal::Bool(self.st.is_server)),
            FieldId::SendingHalted => return Ok(PluginVal::Bool(self.st.sending_halted)),
            FieldId::LocalAddress => {
                return self
                    .st
                    .local
                    .map(PluginVal::from)
                    .ok_or(abi::Error::NotFound(
                        "the application did not give the local address".into(),
                    ));
            }
            _ => {}
        }
        let Some(cx) = self.cx.as_mut() else {
            return match id {
                FieldId::PeerAddress => Ok(PluginVal::from(self.st.remote)),
                _ => Err(unavailable(id)),
            };
        };
        let (max_tx, tx, max_rx, rx) = cx.flow_control();
        Ok(match id {
            FieldId::Version => PluginVal::U32(cx.version()),
            FieldId::IsEstablished => PluginVal::Bool(cx.is_established()),
            FieldId::MaxTxData => PluginVal::U64(max_tx),
            FieldId::TxData => PluginVal::U64(tx),
            FieldId::MaxRxData => PluginVal::U64(max_rx),
            FieldId::RxData => PluginVal::U64(rx),
            FieldId::MaxSendUdpPayload | FieldId::MaxDatagramSize => {
                PluginVal::U64(u64::from(cx.connection().current_mtu()))
            }
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
            FieldId::IsServer | FieldId::SendingHalted | FieldId::LocalAddress => {
                return Err(abi::Error::Failed("unreachable field dispatch".into()));
            }
        })
    }

    fn set_field(&mut self, field: FieldRef, value: PluginVal) -> Result<(), abi::Error> {
        let supported = match (field.id, value) {
            (FieldId::SendingHalted, PluginVal::Bool(halt)) => {
                self.st.sending_halted = halt;
                true
            }
            (FieldId::CongestionWindow, PluginVal::U64(w)) => match self.cx.as_mut() {
                Some(cx) => cx.congestion().set_window(w),
                None => return Err(unavailable(field.id)),
            },
            (FieldId::Ssthresh, v @ (PluginVal::U64(_) | PluginVal::None)) => {
                let s = match v {
                    PluginVal::U64(s) => Some(s),
                    _ => None,
                };
                match self.cx.as_mut() {
                    Some(cx) => cx.congestion().set_ssthresh(s),
                    None => return Err(unavailable(field.id)),
                }
            }
            (FieldId::MaxTxData | FieldId::MaxRxData, PluginVal::U64(max)) => {
                let Some(cx) = self.cx.as_deref_mut() else {
                    return Err(unavailable(field.id));
                };
                abi::write_flow_limit(
                    cx,
                    field.id,
                    max,
                    ExtensionContext::set_max_tx_data,
                    ExtensionContext::set_max_rx_data,
                )?;
                true
            }
            _ => false,
        };
        if supported {
            Ok(())
        } else {
            Err(abi::Error::Unsupported(format!(
                "quinn cannot write {} with this congestion controller",
                field.id.name()
            )))
        }
    }

    fn now(&self) -> u64 {
        self.now_ns()
    }

    fn send_frame(&mut self, frame: Frame) -> Result<(), abi::Error> {
        match frame {
            Frame::Ping => match self.cx.as_mut() {
                Some(cx) => {
                    cx.ping();
                    Ok(())
                }
                None => {
                    // CQ-API-14: accepted in every phase; sent once the
                    // connection exists.
                    self.st.ping_pending = true;
                    Ok(())
                }
            },
            Frame::PathChallenge(data) => {
                self.st.challenges.push(data);
                Ok(())
            }
            other => Err(abi::Error::Unsupported(format!(
                "quinn cannot queue frame type {:#x}",
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

/// ABI frame type of a frame as quinn reports it (STREAM and DATAGRAM
/// families collapse to their first type, as [`Frame::frame_type`] does).
fn abi_frame_type(ty: u64) -> u64 {
    match ty {
        0x08..=0x0f => 0x08,
        0x31 => 0x30,
        other => other,
    }
}

fn transport_error(code: TransportErrorCode, reason: String) -> TransportError {
    TransportError {
        code,
        frame: None,
        reason,
    }
}

fn abi_position(p: SendPosition) -> AbiPosition {
    match p {
        SendPosition::First => AbiPosition::First,
        SendPosition::AfterAck => AbiPosition::AfterAck,
        SendPosition::End => AbiPosition::End,
    }
}

impl QuinnPlugins {
    /// Run `f` with the plugin set and the connection view, then act on a
    /// close request (a plugin that defines protocol behaviour faulted).
    fn with<R>(
        &mut self,
        cx: Option<&mut ExtensionContext<'_>>,
        f: impl FnOnce(&mut PluginSet, &mut QuinnConn<'_, '_>) -> R,
    ) -> R {
        let set = self.set.get_mut().unwrap_or_else(|e| e.into_inner());
        let mut conn = QuinnConn {
            cx,
            st: &mut self.state,
        };
        let r = f(set, &mut conn);
        // Before the stack's connection exists (a client's transport
        // parameters) there is nothing to close or ping yet: the requests
        // stay pending until the next hook that has the connection.
        if let Some(cx) = conn.cx.as_mut()
            && std::mem::take(&mut conn.st.ping_pending)
        {
            cx.ping();
        }
        if let Some(cx) = conn.cx.as_mut()
            && let Some(close) = set.take_close_request()
        {
            let code = VarInt::from_u64(close.error_code).unwrap_or(VarInt::MAX);
            cx.close(code, close.reason.clone().into_bytes().into());
            conn.st
                .local_close
                .get_or_insert((close.error_code, close.reason));
        }
        r
    }

    fn now_ns(&self, cx: &ExtensionContext<'_>) -> u64 {
        cx.now()
            .saturating_duration_since(self.state.epoch)
            .as_nanos() as u64
    }

    fn rx_context(&self, cx: &ExtensionContext<'_>, packet_number: u64) -> RxContext {
        RxContext {
            packet_type: PacketType::OneRtt,
            space: PnSpace::ApplicationData,
            packet_number,
            now: self.now_ns(cx),
        }
    }

    /// Call plugin-control `id` (the application side of the ABI).
    pub fn plugin_control(
        &mut self,
        cx: &mut ExtensionContext<'_>,
        id: u64,
        args: &[PluginVal],
    ) -> Result<Vec<PluginVal>, RoutineError> {
        self.with(Some(cx), |set, conn| set.plugin_control(conn, id, args))
    }

    /// The error code and reason with which this connection's plugins
    /// closed it (a defining plugin faulted, CQ-LIMIT-8), if they did. quinn
    /// reports such a close as the application's, which it cannot tell
    /// from the peer's.
    pub fn local_close(&self) -> Option<(u64, String)> {
        self.state.local_close.clone()
    }

    /// Per-plugin counters of this connection.
    pub fn stats(&mut self) -> Vec<PluginStats> {
        self.set
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .stats()
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

    fn abi_send_context(&self, cx: &ExtensionContext<'_>, ctx: &SendContext) -> abi::SendContext {
        abi::SendContext {
            packet_type: PacketType::OneRtt,
            space: PnSpace::ApplicationData,
            packet_number: ctx.packet_number,
            position: abi_position(ctx.position),
            room: ctx.room as u64,
            now: self.now_ns(cx),
        }
    }
}

impl Extension for QuinnPlugins {
    fn transport_parameters(&mut self) -> Vec<(u64, Vec<u8>)> {
        std::mem::take(&mut self.transport_parameters)
    }

    fn decode_transport_parameter(
        &mut self,
        cx: &mut ExtensionContext<'_>,
        id: u64,
        value: &[u8],
    ) -> Result<(), TransportError> {
        match self.with(Some(cx), |set, conn| {
            set.decode_transport_parameter(conn, id, value)
        }) {
            Ok(_) => Ok(()),
            // A fault already asked for the plugin-failure close.
            Err(RoutineError::Fault(_)) => Ok(()),
            Err(e) => Err(transport_error(
                TransportErrorCode::TRANSPORT_PARAMETER_ERROR,
                format!("transport parameter {id:#x}: {e}"),
            )),
        }
    }

    fn wants_to_send(&mut self, cx: &mut ExtensionContext<'_>, ctx: &SendContext) -> bool {
        if !self.state.challenges.is_empty() {
            return true;
        }
        let abi_ctx = self.abi_send_context(cx, ctx);
        self.with(Some(cx), |set, conn| set.wants_to_send(conn, abi_ctx))
    }

    fn write_frames(
        &mut self,
        cx: &mut ExtensionContext<'_>,
        ctx: &SendContext,
        buf: &mut Vec<u8>,
        frames: &mut Vec<ExtensionFrame>,
    ) {
        let mut room = ctx.room;
        // A packet that goes out only because it is not in flight (an
        // ACK-only packet under a full congestion window) takes no
        // PATH_CHALLENGE and only the registrations that are not in flight
        // (CQ-SEND-10).
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
        self.with(Some(cx), |set, conn| match ctx.in_flight {
            true => set.write_frames(conn, abi_ctx, buf, &mut written),
            false => set.write_frames_not_in_flight(conn, abi_ctx, buf, &mut written),
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

    fn on_frames(&mut self, cx: &mut ExtensionContext<'_>, frames: &[ExtensionFrame], acked: bool) {
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
            let _ = self.with(Some(&mut *cx), |set, conn| {
                set.notify_frame(conn, frame, outcome)
            });
        }
    }

    fn process_frame(
        &mut self,
        cx: &mut ExtensionContext<'_>,
        frame_type: u64,
        payload: &[u8],
        packet_number: u64,
    ) -> Result<usize, TransportError> {
        let rx = self.rx_context(cx, packet_number);
        self.with(Some(cx), |set, conn| {
            if !set.parses_frame_type(frame_type) {
                return Err(transport_error(
                    TransportErrorCode::FRAME_ENCODING_ERROR,
                    "invalid frame ID".into(),
                ));
            }
            let parsed = set.parse_frame(conn, frame_type, payload).map_err(|e| {
                transport_error(
                    TransportErrorCode::FRAME_ENCODING_ERROR,
                    format!("frame {frame_type:#x}: {e}"),
                )
            })?;
            set.process_frame(conn, &Frame::Extension(parsed.frame), rx)
                .map_err(|e| {
                    transport_error(
                        TransportErrorCode::PROTOCOL_VIOLATION,
                        format!("frame {frame_type:#x}: {e}"),
                    )
                })?;
            Ok(parsed.consumed as usize)
        })
    }

    fn observes_frame(&mut self, frame_type: u64) -> bool {
        self.set
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .observes_frame_type(abi_frame_type(frame_type))
    }

    fn observe_frame(
        &mut self,
        cx: &mut ExtensionContext<'_>,
        frame: &ObservedFrame,
        after: bool,
        packet_number: u64,
    ) {
        let Some(frame) = observed_to_abi(frame) else {
            return;
        };
        let rx = self.rx_context(cx, packet_number);
        let anchor = if after { Anchor::After } else { Anchor::Before };
        self.with(Some(cx), |set, conn| {
            set.observe_frame(conn, anchor, &frame, rx)
        });
    }

    fn next_timeout(&mut self) -> Option<Instant> {
        let ns = self
            .set
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .next_timeout()?;
        Some(self.state.epoch + Duration::from_nanos(ns))
    }

    fn on_timeout(&mut self, cx: &mut ExtensionContext<'_>) {
        let now = self.now_ns(cx);
        self.with(Some(cx), |set, conn| set.handle_timeout(conn, now));
    }

    fn sending_halted(&mut self) -> bool {
        self.state.sending_halted
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Call plugin-control `id` on a quinn connection's plugins. `None` when the
/// connection has no plugins.
pub fn plugin_control(
    conn: &quinn::Connection,
    id: u64,
    args: &[PluginVal],
) -> Option<Result<Vec<PluginVal>, RoutineError>> {
    with_plugins(conn, |plugins, cx| plugins.plugin_control(cx, id, args))
}

/// Run `f` with a quinn connection's plugins (e.g. for [`QuinnPlugins::stats`]).
pub fn with_plugins<R>(
    conn: &quinn::Connection,
    f: impl FnOnce(&mut QuinnPlugins, &mut ExtensionContext<'_>) -> R,
) -> Option<R> {
    conn.with_proto(|c| {
        c.with_extension(Instant::now(), |ext, cx| {
            ext.as_any_mut()
                .downcast_mut::<QuinnPlugins>()
                .map(|p| f(p, cx))
        })
    })
    .flatten()
}
