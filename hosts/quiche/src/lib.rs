//! Core QUIC host adapter for quiche.
//!
//! quiche 0.30.0, with the hook patch in `hosts/quiche/patches/`, calls a
//! per-connection [`quiche::Extension`] at its routine points. This crate
//! implements that extension with `corequic-runtime`: each connection gets a
//! [`PluginSet`] of the plugins the application chose, and every hook
//! forwards to it, converting between quiche's types and the ABI's.
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
//! [`with_plugins`]. [`driver`] runs a connection over a UDP socket with the
//! hq-interop application of the endpoint contract.

#![warn(missing_docs)]

pub mod driver;

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
use quiche::{
    Extension, ExtensionContext, ExtensionFactory, ExtensionFrame, ObservedFrame, SendContext,
    SendPosition,
};
use std::any::Any;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// PATH_CHALLENGE, which the adapter writes itself for `send-frame`.
const PATH_CHALLENGE: u64 = 0x1a;

/// What the quiche host supports: every routine; every field (the hook
/// patch exposes `latest-rtt` and `pto-count`, which quiche keeps private);
/// the writable fields are `sending-halted`, `congestion-window` and
/// `ssthresh` (the latter two with quiche's default congestion controllers,
/// CUBIC and Reno).
pub fn capabilities() -> HostCapabilities {
    let readable = FieldSet::all();
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
        readable,
        writable,
        routines: Routine::ALL.to_vec(),
        // quiche sends only standard parameters.
        stack_transport_parameters: Vec::new(),
    }
}

/// The largest congestion window a plugin may write, 2^48 bytes: far above
/// any real window, with room left for quiche's arithmetic on it.
pub const MAX_CONGESTION_WINDOW: usize = 1 << 48;

/// Receives the plugins' log records (and the adapter's own warnings).
pub type LogSink = Arc<dyn Fn(LogRecord) + Send + Sync>;

/// Creates the plugin set of each new connection (set it with
/// `quiche::Config::set_extension_factory` before `connect`/`accept`).
pub struct PluginFactory {
    runtime: Arc<Runtime>,
    plugins: Vec<Arc<Plugin>>,
    log: Option<LogSink>,
}

impl PluginFactory {
    /// A factory attaching `plugins` (in this order) to every connection.
    pub fn new(runtime: Arc<Runtime>, plugins: Vec<Arc<Plugin>>) -> Self {
        PluginFactory {
            runtime,
            plugins,
            log: None,
        }
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
        is_server: bool,
        local: SocketAddr,
        peer: SocketAddr,
        now: Instant,
    ) -> Option<Box<dyn Extension>> {
        let mut state = AdapterState {
            epoch: now,
            is_server,
            local,
            peer,
            sending_halted: false,
            ping_pending: false,
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
        // quiche encodes the transport parameters while it creates the
        // connection: `init` and the parameters run against what is known
        // now (side, addresses, time).
        let mut conn = QuicheConn {
            cx: None,
            st: &mut state,
        };
        for (plugin, e) in set.init(&mut conn) {
            conn.st
                .warn(format!("plugin {plugin} removed at init: {e}"));
        }
        let transport_parameters = set.transport_parameters(&mut conn);
        Some(Box::new(QuichePlugins {
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
    local: SocketAddr,
    peer: SocketAddr,
    sending_halted: bool,
    /// A PING asked for through `send-frame` before the connection existed.
    ping_pending: bool,
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
                plugin: "corequic-quiche".into(),
                level: abi::LogLevel::Warn,
                message,
                fields: Vec::new(),
            });
        }
    }

    fn ns(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.epoch)
            .as_nanos()
            .min(u128::from(u64::MAX)) as u64
    }
}

/// The plugins of one quiche connection: quiche's extension.
pub struct QuichePlugins {
    /// `PluginSet` is `Send` but not `Sync`; hooks with `&mut self` reach it
    /// through `Mutex::get_mut`, without locking.
    set: Mutex<PluginSet>,
    state: AdapterState,
    transport_parameters: Vec<(u64, Vec<u8>)>,
}

/// The connection as the runtime sees it during one hook.
struct QuicheConn<'a, 'b, 'c> {
    cx: Option<&'a mut ExtensionContext<'b>>,
    st: &'c mut AdapterState,
}

fn unavailable(field: FieldId) -> abi::Error {
    abi::Error::NotFound(format!(
        "{} is not known before the connection exists",
        field.name()
    ))
}

fn space_index(space: Option<PnSpace>) -> usize {
    match space {
        Some(PnSpace::Initial) => 0,
        Some(PnSpace::Handshake) => 1,
        _ => 2,
    }
}

impl HostConnection for QuicheConn<'_, '_, '_> {
    fn get_field(&mut self, field: FieldRef) -> Result<PluginVal, abi::Error> {
        let id = field.id;
        match id {
            FieldId::IsServer => return Ok(PluginVal::Bool(self.st.is_server)),
            FieldId::SendingHalted => return Ok(PluginVal::Bool(self.st.sending_halted)),
            _ => {}
        }
        let Some(cx) = self.cx.as_ref() else {
            return match id {
                FieldId::PeerAddress => Ok(PluginVal::from(self.st.peer)),
                FieldId::LocalAddress => Ok(PluginVal::from(self.st.local)),
                _ => Err(unavailable(id)),
            };
        };
        let info = cx.info();
        let (local, peer) = info.addresses.unwrap_or((self.st.local, self.st.peer));
        let space = space_index(field.space);
        Ok(match id {
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
            (FieldId::CongestionWindow, PluginVal::U64(w)) => {
                // quiche adds to and multiplies the window in usize: a window
                // near usize::MAX overflows (a chaos seed aborted the process
                // in cwnd_available). A larger value is refused, never
                // clamped (CQ-FIELD-8).
                let w = usize::try_from(w)
                    .ok()
                    .filter(|w| *w <= MAX_CONGESTION_WINDOW)
                    .ok_or_else(|| {
                        abi::Error::InvalidArgument(format!(
                            "congestion-window: quiche's congestion controller holds at most {MAX_CONGESTION_WINDOW} bytes, not {w}"
                        ))
                    })?;
                match self.cx.as_mut() {
                    Some(cx) => cx.set_cwnd(w),
                    None => return Err(unavailable(field.id)),
                }
            }
            (FieldId::Ssthresh, v @ (PluginVal::U64(_) | PluginVal::None)) => {
                let s = match v {
                    PluginVal::U64(s) => Some(usize::try_from(s).unwrap_or(usize::MAX)),
                    _ => None,
                };
                match self.cx.as_mut() {
                    Some(cx) => cx.set_ssthresh(s),
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
                "quiche cannot write {} with this congestion controller",
                field.id.name()
            )))
        }
    }

    fn now(&self) -> u64 {
        match &self.cx {
            Some(cx) => self.st.ns(cx.now()),
            None => 0,
        }
    }

    fn send_frame(&mut self, frame: Frame) -> Result<(), abi::Error> {
        match frame {
            Frame::Ping => match self.cx.as_mut() {
                Some(cx) => cx
                    .send_ack_eliciting()
                    .map_err(|e| abi::Error::Failed(format!("PING: {e}"))),
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
                "quiche cannot queue frame type {:#x}",
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
        ObservedFrame::NewToken(token) => Frame::NewToken(token.clone()),
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
                connection_id: cid.clone(),
                stateless_reset_token: token.to_be_bytes().to_vec(),
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
                reason: reason.clone(),
            })
        }
        ObservedFrame::HandshakeDone => Frame::HandshakeDone,
        ObservedFrame::Datagram(len) => Frame::Datagram(*len),
        _ => return None,
    })
}

fn abi_position(p: SendPosition) -> AbiPosition {
    match p {
        SendPosition::First => AbiPosition::First,
        SendPosition::AfterAck => AbiPosition::AfterAck,
        SendPosition::End => AbiPosition::End,
    }
}

impl QuichePlugins {
    /// Run `f` with the plugin set and the connection view, then act on a
    /// close request (a plugin that defines protocol behaviour faulted).
    fn with<R>(
        &mut self,
        cx: Option<&mut ExtensionContext<'_>>,
        f: impl FnOnce(&mut PluginSet, &mut QuicheConn<'_, '_, '_>) -> R,
    ) -> R {
        let set = self.set.get_mut().unwrap_or_else(|e| e.into_inner());
        let mut conn = QuicheConn {
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
            // Already closing is the only error: nothing to send then.
            let _ = cx.send_ack_eliciting();
        }
        if let Some(cx) = conn.cx.as_mut()
            && let Some(close) = set.take_close_request()
        {
            // Already closing is the only error: nothing more to do.
            let _ = cx.close(true, close.error_code, close.reason.as_bytes());
        }
        r
    }

    fn rx_context(&self, cx: &ExtensionContext<'_>, packet_number: u64) -> RxContext {
        RxContext {
            packet_type: PacketType::OneRtt,
            space: PnSpace::ApplicationData,
            packet_number,
            now: self.state.ns(cx.now()),
        }
    }

    fn abi_send_context(
        &self,
        cx: &ExtensionContext<'_>,
        ctx: &SendContext,
        room: usize,
    ) -> abi::SendContext {
        abi::SendContext {
            packet_type: PacketType::OneRtt,
            space: PnSpace::ApplicationData,
            packet_number: ctx.packet_number,
            position: abi_position(ctx.position),
            room: room as u64,
            now: self.state.ns(cx.now()),
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
}

impl Extension for QuichePlugins {
    fn transport_parameters(&mut self) -> Vec<(u64, Vec<u8>)> {
        std::mem::take(&mut self.transport_parameters)
    }

    fn on_peer_transport_parameter(
        &mut self,
        cx: &mut ExtensionContext<'_>,
        id: u64,
        value: &[u8],
    ) -> quiche::Result<()> {
        match self.with(Some(cx), |set, conn| {
            set.decode_transport_parameter(conn, id, value)
        }) {
            Ok(_) => Ok(()),
            // A fault already asked for the plugin-failure close.
            Err(RoutineError::Fault(_)) => Ok(()),
            Err(e) => {
                self.state
                    .warn(format!("transport parameter {id:#x} refused: {e}"));
                Err(quiche::Error::InvalidTransportParam)
            }
        }
    }

    fn wants_to_send(&mut self, cx: &mut ExtensionContext<'_>, ctx: &SendContext) -> bool {
        if !self.state.challenges.is_empty() {
            return true;
        }
        let abi_ctx = self.abi_send_context(cx, ctx, ctx.room);
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
        let abi_ctx = self.abi_send_context(cx, ctx, room);
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

    fn on_frame(&mut self, cx: &mut ExtensionContext<'_>, frame: &ExtensionFrame, acked: bool) {
        if frame.frame_type == PATH_CHALLENGE {
            return;
        }
        let (counts, outcome) = if acked {
            (&mut self.state.frames_acked, FrameOutcome::Acked)
        } else {
            (&mut self.state.frames_lost, FrameOutcome::Lost)
        };
        *counts.entry(frame.frame_type).or_default() += 1;
        let frame = ExtFrame {
            frame_type: frame.frame_type,
            tag: frame.tag,
        };
        // Errors are logged by the runtime; there is nothing to undo.
        let _ = self.with(Some(cx), |set, conn| set.notify_frame(conn, frame, outcome));
    }

    fn process_frame(
        &mut self,
        cx: &mut ExtensionContext<'_>,
        frame_type: u64,
        payload: &[u8],
        packet_number: u64,
    ) -> quiche::Result<usize> {
        let rx = self.rx_context(cx, packet_number);
        let r = self.with(Some(cx), |set, conn| {
            if !set.parses_frame_type(frame_type) {
                return Err(None);
            }
            let parsed = set
                .parse_frame(conn, frame_type, payload)
                .map_err(|e| Some(format!("frame {frame_type:#x}: {e}")))?;
            set.process_frame(conn, &Frame::Extension(parsed.frame), rx)
                .map_err(|e| Some(format!("frame {frame_type:#x}: {e}")))?;
            Ok(parsed.consumed as usize)
        });
        r.map_err(|reason| {
            if let Some(reason) = reason {
                self.state.warn(reason);
            }
            quiche::Error::InvalidFrame
        })
    }

    fn observes_frame(&mut self, frame_type: u64) -> bool {
        self.set
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .observes_frame_type(frame_type)
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

    fn next_timeout(&self) -> Option<Instant> {
        let ns = self
            .set
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .next_timeout()?;
        Some(self.state.epoch + Duration::from_nanos(ns))
    }

    fn on_timeout(&mut self, cx: &mut ExtensionContext<'_>) {
        let now = self.state.ns(cx.now());
        self.with(Some(cx), |set, conn| set.handle_timeout(conn, now));
    }

    fn sending_halted(&self) -> bool {
        self.state.sending_halted
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Call plugin-control `id` on a quiche connection's plugins. `None` when the
/// connection has no plugins.
pub fn plugin_control(
    conn: &mut quiche::Connection,
    id: u64,
    args: &[PluginVal],
) -> Option<Result<Vec<PluginVal>, RoutineError>> {
    with_plugins(conn, |plugins, cx| plugins.plugin_control(cx, id, args))
}

/// Run `f` with a quiche connection's plugins (e.g. for
/// [`QuichePlugins::stats`]).
pub fn with_plugins<R>(
    conn: &mut quiche::Connection,
    f: impl FnOnce(&mut QuichePlugins, &mut ExtensionContext<'_>) -> R,
) -> Option<R> {
    conn.with_extension(|ext, cx| {
        ext.as_any_mut()
            .downcast_mut::<QuichePlugins>()
            .map(|p| f(p, cx))
    })
    .flatten()
}
