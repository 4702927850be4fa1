//! A mock host: two in-memory QUIC-like endpoints joined by a link with a
//! fixed one-way delay, on a virtual clock.
//!
//! It is what `pluginop`'s mock connection was for Core QUIC: enough of a
//! QUIC connection to drive every routine — transport parameters, the
//! paper's Algorithm 1 send loop (first / after-ACK / end positions),
//! ACK processing with per-frame ack and loss notification, PATH_CHALLENGE /
//! PATH_RESPONSE, a STREAM transfer that must arrive byte-exact, plugin
//! timers and `sending-halted` — without TLS, encryption or sockets. Tests
//! and benchmarks use it; real stacks live in the host adapters.
//!
//! Wire format of a mock packet: one header byte (0x40), a 4-byte packet
//! number, RFC 9000 frames, then 16 zero bytes standing in for the AEAD tag.

#![warn(missing_docs)]

use corequic_runtime::abi::{
    AckFrame, Anchor, Error, ExtFrame, FieldId, FieldRef, Frame, FrameOutcome, PacketType,
    PluginVal, PnSpace, RxContext, SendContext, SendPosition, StreamFrame,
};
use corequic_runtime::{
    FieldSet, FrameRejected, HostConnection, LoadError, LogRecord, Plugin, PluginSet, Runtime,
    WrittenFrame,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// Bytes of the mock packet header (flags + 4-byte packet number).
pub const HEADER_LEN: usize = 5;
/// Bytes of the stand-in AEAD tag.
pub const TAG_LEN: usize = 16;
/// QUIC transport error FRAME_ENCODING_ERROR.
pub const FRAME_ENCODING_ERROR: u64 = 0x07;
/// QUIC transport error TRANSPORT_PARAMETER_ERROR.
pub const TRANSPORT_PARAMETER_ERROR: u64 = 0x08;
/// QUIC transport error PROTOCOL_VIOLATION.
pub const PROTOCOL_VIOLATION: u64 = 0x0a;

const MS: u64 = 1_000_000;

/// Encode a QUIC varint.
pub fn put_varint(v: u64, out: &mut Vec<u8>) {
    match v {
        0..=63 => out.push(v as u8),
        64..=16_383 => out.extend_from_slice(&(0x4000 | v as u16).to_be_bytes()),
        16_384..=1_073_741_823 => out.extend_from_slice(&(0x8000_0000 | v as u32).to_be_bytes()),
        _ => out.extend_from_slice(&(0xc000_0000_0000_0000 | v).to_be_bytes()),
    }
}

/// Decode a QUIC varint at `buf[*pos..]`, advancing `pos`.
pub fn get_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let first = *buf.get(*pos)?;
    let n = 1usize << (first >> 6);
    let bytes = buf.get(*pos..*pos + n)?;
    let mut v = u64::from(first & 0x3f);
    for b in &bytes[1..] {
        v = (v << 8) | u64::from(*b);
    }
    *pos += n;
    Some(v)
}

/// The connection state a mock endpoint exposes to plugins (the
/// [`HostConnection`] of the mock host).
#[derive(Debug, Clone)]
pub struct MockConnection {
    /// This endpoint is the server.
    pub is_server: bool,
    /// Current virtual time (ns).
    pub now: u64,
    /// The "handshake" (transport-parameter exchange) is done.
    pub established: bool,
    /// Send limit granted by the peer.
    pub max_tx_data: u64,
    /// Stream bytes sent.
    pub tx_data: u64,
    /// Receive limit granted to the peer.
    pub max_rx_data: u64,
    /// Stream bytes received.
    pub rx_data: u64,
    /// Maximum datagram size on the path.
    pub mtu: u64,
    /// `sending-halted`.
    pub sending_halted: bool,
    /// Next packet number.
    pub next_pn: u64,
    /// Largest packet number the peer acknowledged.
    pub largest_acked: Option<u64>,
    /// Largest packet number received.
    pub largest_received: Option<u64>,
    /// RTT estimates (ns).
    pub latest_rtt: u64,
    /// Smoothed RTT (ns).
    pub smoothed_rtt: u64,
    /// Minimum RTT (ns).
    pub min_rtt: u64,
    /// RTT variation (ns).
    pub rttvar: u64,
    /// PTO count.
    pub pto_count: u32,
    /// Bytes in flight.
    pub bytes_in_flight: u64,
    /// Congestion window.
    pub cwnd: u64,
    /// Slow-start threshold (`None` = infinite).
    pub ssthresh: Option<u64>,
    /// Frames queued by plugins through `send-frame`.
    pub queued: Vec<Frame>,
    /// Log records plugins emitted (while `keep_logs`).
    pub logs: Vec<LogRecord>,
    /// Whether `log` keeps each record in `logs` and `events` (the
    /// default); off, it only counts them in `logged`, for a benchmark of
    /// what the runtime itself spends on a record.
    pub keep_logs: bool,
    /// Log records received, kept or not.
    pub logged: u64,
    /// What happened, in order (native processing and plugin logs), for
    /// tests of anchor ordering.
    pub events: Vec<String>,
    /// Fields this mock pretends not to support (for negative tests).
    pub unsupported: FieldSet,
    /// Count of `set-field` calls per field, for tests.
    pub writes: BTreeMap<String, u64>,
}

impl MockConnection {
    fn new(is_server: bool, mtu: u64) -> Self {
        MockConnection {
            is_server,
            now: 0,
            established: false,
            max_tx_data: 1 << 30,
            tx_data: 0,
            max_rx_data: 1 << 30,
            rx_data: 0,
            mtu,
            sending_halted: false,
            next_pn: 0,
            largest_acked: None,
            largest_received: None,
            latest_rtt: 0,
            smoothed_rtt: 333 * MS,
            min_rtt: 0,
            rttvar: 0,
            pto_count: 0,
            bytes_in_flight: 0,
            cwnd: 10 * mtu,
            ssthresh: None,
            queued: Vec::new(),
            logs: Vec::new(),
            keep_logs: true,
            logged: 0,
            events: Vec::new(),
            unsupported: FieldSet::EMPTY,
            writes: BTreeMap::new(),
        }
    }
}

impl MockConnection {
    /// How many log records `plugin` emitted (with `message`, if given).
    pub fn log_count(&self, plugin: &str, message: Option<&str>) -> usize {
        self.logs
            .iter()
            .filter(|r| r.plugin == plugin && message.is_none_or(|m| r.message == m))
            .count()
    }

    /// The log records `plugin` emitted, in order.
    pub fn logs_of(&self, plugin: &str) -> Vec<&LogRecord> {
        self.logs.iter().filter(|r| r.plugin == plugin).collect()
    }
}

fn opt(v: Option<u64>) -> PluginVal {
    v.map_or(PluginVal::None, PluginVal::U64)
}

impl HostConnection for MockConnection {
    fn get_field(&mut self, field: FieldRef) -> Result<PluginVal, Error> {
        if self.unsupported.contains(field.id) {
            return Err(Error::Unsupported(format!("field {}", field.id.name())));
        }
        Ok(match field.id {
            FieldId::IsServer => PluginVal::Bool(self.is_server),
            FieldId::Version => PluginVal::U32(1),
            FieldId::IsEstablished => PluginVal::Bool(self.established),
            FieldId::MaxTxData => PluginVal::U64(self.max_tx_data),
            FieldId::TxData => PluginVal::U64(self.tx_data),
            FieldId::MaxRxData => PluginVal::U64(self.max_rx_data),
            FieldId::RxData => PluginVal::U64(self.rx_data),
            FieldId::MaxSendUdpPayload | FieldId::MaxDatagramSize => PluginVal::U64(self.mtu),
            FieldId::LocalAddress | FieldId::PeerAddress => {
                PluginVal::SocketAddr(corequic_runtime::abi::SocketAddr {
                    ip: corequic_runtime::abi::IpAddr::V4((127, 0, 0, 1)),
                    port: if self.is_server == (field.id == FieldId::LocalAddress) {
                        4433
                    } else {
                        50000
                    },
                })
            }
            FieldId::IdleTimeout => PluginVal::Duration(30_000 * MS),
            FieldId::SendingHalted => PluginVal::Bool(self.sending_halted),
            FieldId::NextPacketNumber => PluginVal::U64(self.next_pn),
            FieldId::LargestAcked => opt(self.largest_acked),
            FieldId::LargestReceived => opt(self.largest_received),
            FieldId::LatestRtt => PluginVal::Duration(self.latest_rtt),
            FieldId::SmoothedRtt => PluginVal::Duration(self.smoothed_rtt),
            FieldId::MinRtt => PluginVal::Duration(self.min_rtt),
            FieldId::Rttvar => PluginVal::Duration(self.rttvar),
            FieldId::MaxAckDelay => PluginVal::Duration(25 * MS),
            FieldId::PtoCount => PluginVal::U32(self.pto_count),
            FieldId::BytesInFlight => PluginVal::U64(self.bytes_in_flight),
            FieldId::CongestionWindow => PluginVal::U64(self.cwnd),
            FieldId::Ssthresh => opt(self.ssthresh),
            // A fixed handshake: the server's ID is 8 bytes of 0x5e, the
            // client's 8 bytes of 0xc1; each endpoint sends to the other's.
            FieldId::SourceConnectionId | FieldId::DestinationConnectionId => {
                let server = self.is_server == (field.id == FieldId::SourceConnectionId);
                PluginVal::Bytes(vec![if server { 0x5e } else { 0xc1 }; 8])
            }
            // The mock validates the peer's address at once.
            FieldId::AmplificationBudget => PluginVal::None,
            // The mock reads no ECN codepoints.
            FieldId::EcnEct0Count | FieldId::EcnEct1Count | FieldId::EcnCeCount => PluginVal::None,
            FieldId::PeerIdleTimeout => PluginVal::Duration(30_000 * MS),
            FieldId::PeerMaxUdpPayloadSize => PluginVal::U64(65_527),
            FieldId::PeerAckDelayExponent => PluginVal::U64(3),
            FieldId::PeerActiveConnectionIdLimit => PluginVal::U64(2),
            FieldId::LocalMaxAckDelay => PluginVal::Duration(25 * MS),
        })
    }

    fn set_field(&mut self, field: FieldRef, value: PluginVal) -> Result<(), Error> {
        if self.unsupported.contains(field.id) {
            return Err(Error::Unsupported(format!("field {}", field.id.name())));
        }
        *self.writes.entry(field.id.name().to_string()).or_default() += 1;
        match (field.id, value) {
            (FieldId::MaxTxData, PluginVal::U64(v)) => self.max_tx_data = v,
            (FieldId::MaxRxData, PluginVal::U64(v)) => self.max_rx_data = v,
            (FieldId::SendingHalted, PluginVal::Bool(v)) => self.sending_halted = v,
            // The minimum window of RFC 9002 §7.2, as the hosts' controllers keep it
            (FieldId::CongestionWindow, PluginVal::U64(v)) => self.cwnd = v.max(2 * self.mtu),
            (FieldId::Ssthresh, PluginVal::U64(v)) => self.ssthresh = Some(v),
            (FieldId::Ssthresh, PluginVal::None) => self.ssthresh = None,
            (id, _) => {
                return Err(Error::InvalidArgument(format!(
                    "cannot write field {}",
                    id.name()
                )));
            }
        }
        Ok(())
    }

    fn now(&self) -> u64 {
        self.now
    }

    fn send_frame(&mut self, frame: Frame) -> Result<(), Error> {
        match frame {
            Frame::Ping | Frame::PathChallenge(_) => {
                self.queued.push(frame);
                Ok(())
            }
            other => Err(Error::Unsupported(format!(
                "the mock host cannot queue frame type {:#x}",
                other.frame_type()
            ))),
        }
    }

    fn log(&mut self, record: &LogRecord) {
        self.logged += 1;
        if self.keep_logs {
            self.events
                .push(format!("log {}: {}", record.plugin, record.message));
            self.logs.push(record.clone());
        }
    }
}

/// One packet the endpoint sent and has not seen acknowledged or lost.
#[derive(Debug, Clone)]
struct SentPacket {
    time: u64,
    size: u64,
    ack_eliciting: bool,
    in_flight: bool,
    plugin_frames: Vec<ExtFrame>,
    stream: Option<(u64, u64)>,
}

/// A datagram sent by an endpoint, as the link saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatagramRecord {
    /// Send time (ns).
    pub time: u64,
    /// Size in bytes.
    pub size: usize,
}

/// How a mock endpoint closed its connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closed {
    /// The QUIC or application error code.
    pub error_code: u64,
    /// The reason phrase.
    pub reason: String,
}

/// One side of a mock connection: the connection state, its plugins, and
/// the send/receive machinery.
pub struct MockEndpoint {
    /// The state plugins see.
    pub conn: MockConnection,
    /// The connection's plugins.
    pub plugins: PluginSet,
    sent: BTreeMap<u64, SentPacket>,
    received: BTreeSet<u64>,
    ack_pending: bool,
    /// Stream bytes this endpoint still has to send (offset, len) ranges.
    to_send: VecDeque<(u64, u64)>,
    /// Stream bytes queued so far (the next offset).
    stream_queued: u64,
    /// Bytes received on the stream, by offset.
    stream_in: Vec<u8>,
    stream_seen: BTreeSet<u64>,
    /// Set when the connection closed (locally or by the peer).
    pub closed: Option<Closed>,
    /// Every datagram this endpoint sent.
    pub datagrams: Vec<DatagramRecord>,
    /// Plugin frames written, by frame type (counts every transmission).
    pub plugin_frames_sent: BTreeMap<u64, u64>,
    /// Plugin frames acknowledged, by frame type.
    pub plugin_frames_acked: BTreeMap<u64, u64>,
    /// Plugin frames declared lost, by frame type.
    pub plugin_frames_lost: BTreeMap<u64, u64>,
    /// ACK frames this endpoint processed.
    pub acks_processed: u64,
    /// The largest number of plugin frames of one type in flight at once.
    pub max_in_flight_by_type: BTreeMap<u64, u64>,
    scratch: Vec<u8>,
    written: Vec<WrittenFrame>,
}

/// The pattern of the mock stream: byte `i` of the transfer.
pub fn stream_byte(i: u64) -> u8 {
    (i.wrapping_mul(31) % 251) as u8
}

impl MockEndpoint {
    fn new(plugins: PluginSet, is_server: bool, mtu: u64) -> Self {
        MockEndpoint {
            conn: MockConnection::new(is_server, mtu),
            plugins,
            sent: BTreeMap::new(),
            received: BTreeSet::new(),
            ack_pending: false,
            to_send: VecDeque::new(),
            stream_queued: 0,
            stream_in: Vec::new(),
            stream_seen: BTreeSet::new(),
            closed: None,
            datagrams: Vec::new(),
            plugin_frames_sent: BTreeMap::new(),
            plugin_frames_acked: BTreeMap::new(),
            plugin_frames_lost: BTreeMap::new(),
            acks_processed: 0,
            max_in_flight_by_type: BTreeMap::new(),
            scratch: Vec::with_capacity(2048),
            written: Vec::new(),
        }
    }

    /// Queue `len` more bytes of the stream pattern for sending.
    pub fn send_stream(&mut self, len: u64) {
        self.to_send.push_back((self.stream_queued, len));
        self.stream_queued += len;
    }

    /// The stream bytes received so far, in order, if they are contiguous.
    pub fn stream_received(&self) -> &[u8] {
        &self.stream_in
    }

    /// Whether every received stream byte matches the pattern and `len`
    /// bytes arrived.
    pub fn stream_complete(&self, len: u64) -> bool {
        self.stream_in.len() as u64 == len
            && self
                .stream_in
                .iter()
                .enumerate()
                .all(|(i, b)| *b == stream_byte(i as u64))
    }

    fn close(&mut self, error_code: u64, reason: String) {
        if self.closed.is_none() {
            self.conn
                .events
                .push(format!("close {error_code:#x}: {reason}"));
            self.closed = Some(Closed { error_code, reason });
        }
    }

    fn check_close_request(&mut self) {
        if let Some(req) = self.plugins.take_close_request() {
            self.close(req.error_code, req.reason);
        }
    }

    fn send_context(&self, position: SendPosition, room: u64) -> SendContext {
        SendContext {
            packet_type: PacketType::OneRtt,
            space: PnSpace::ApplicationData,
            packet_number: self.conn.next_pn,
            position,
            room,
            now: self.conn.now,
        }
    }

    fn stream_sendable(&self) -> bool {
        !self.to_send.is_empty() && self.conn.bytes_in_flight + self.conn.mtu <= self.conn.cwnd
    }

    /// Build the next datagram, if there is anything to send and sending is
    /// not halted (Algorithm 1 at the three positions).
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        if self.closed.is_some() || !self.conn.established || self.conn.sending_halted {
            return None;
        }
        let room = self.conn.mtu as usize - HEADER_LEN - TAG_LEN;
        let own = self.ack_pending || !self.conn.queued.is_empty() || self.stream_sendable();
        if !own {
            let ctx = self.send_context(SendPosition::First, room as u64);
            if !self.plugins.wants_to_send(&mut self.conn, ctx) {
                self.check_close_request();
                return None;
            }
        }
        let mut payload = std::mem::take(&mut self.scratch);
        payload.clear();
        self.written.clear();
        let mut ack_eliciting = false;

        let ctx = self.send_context(SendPosition::First, room as u64);
        self.plugins
            .write_frames(&mut self.conn, ctx, &mut payload, &mut self.written);

        if self.ack_pending {
            self.encode_ack(&mut payload);
            self.ack_pending = false;
        }

        let ctx = self.send_context(SendPosition::AfterAck, (room - payload.len()) as u64);
        self.plugins
            .write_frames(&mut self.conn, ctx, &mut payload, &mut self.written);

        for frame in std::mem::take(&mut self.conn.queued) {
            match frame {
                Frame::Ping => payload.push(0x01),
                Frame::PathChallenge(d) => {
                    payload.push(0x1a);
                    payload.extend_from_slice(&d.to_be_bytes());
                }
                Frame::PathResponse(d) => {
                    payload.push(0x1b);
                    payload.extend_from_slice(&d.to_be_bytes());
                }
                _ => continue,
            }
            ack_eliciting = true;
        }

        // STREAM (type 0x0e: offset and length present), leaving 64 bytes
        // for plugin frames at the end position.
        let mut stream = None;
        if self.stream_sendable() {
            let avail = room.saturating_sub(payload.len() + 64 + 1 + 1 + 8 + 2);
            if let Some((off, len)) = self.to_send.pop_front() {
                let n = len.min(avail as u64);
                if n > 0 {
                    payload.push(0x0e);
                    put_varint(0, &mut payload);
                    put_varint(off, &mut payload);
                    put_varint(n, &mut payload);
                    payload.extend((off..off + n).map(stream_byte));
                    stream = Some((off, n));
                    self.conn.tx_data += n;
                    ack_eliciting = true;
                }
                if n < len {
                    self.to_send.push_front((off + n, len - n));
                }
            }
        }

        let ctx = self.send_context(SendPosition::End, (room - payload.len()) as u64);
        self.plugins
            .write_frames(&mut self.conn, ctx, &mut payload, &mut self.written);

        ack_eliciting |= self.written.iter().any(|w| w.ack_eliciting);
        let in_flight = ack_eliciting || self.written.iter().any(|w| w.in_flight);
        let pn = self.conn.next_pn;
        self.conn.next_pn += 1;
        let mut datagram = Vec::with_capacity(HEADER_LEN + payload.len() + TAG_LEN);
        datagram.push(0x40);
        datagram.extend_from_slice(&(pn as u32).to_be_bytes());
        datagram.extend_from_slice(&payload);
        datagram.extend_from_slice(&[0; TAG_LEN]);
        let size = datagram.len() as u64;
        for w in &self.written {
            *self
                .plugin_frames_sent
                .entry(w.frame.frame_type)
                .or_default() += 1;
        }
        self.sent.insert(
            pn,
            SentPacket {
                time: self.conn.now,
                size,
                ack_eliciting,
                in_flight,
                plugin_frames: self.written.iter().map(|w| w.frame).collect(),
                stream,
            },
        );
        if in_flight {
            self.conn.bytes_in_flight += size;
        }
        self.track_in_flight();
        self.datagrams.push(DatagramRecord {
            time: self.conn.now,
            size: datagram.len(),
        });
        self.scratch = payload;
        self.check_close_request();
        Some(datagram)
    }

    fn track_in_flight(&mut self) {
        let mut counts: BTreeMap<u64, u64> = BTreeMap::new();
        for p in self.sent.values() {
            for f in &p.plugin_frames {
                *counts.entry(f.frame_type).or_default() += 1;
            }
        }
        for (ty, n) in counts {
            let max = self.max_in_flight_by_type.entry(ty).or_default();
            *max = (*max).max(n);
        }
    }

    fn encode_ack(&self, out: &mut Vec<u8>) {
        let ranges = self.ack_ranges();
        let Some(&(_, largest)) = ranges.first() else {
            return;
        };
        out.push(0x02);
        put_varint(largest, out);
        put_varint(0, out);
        put_varint(ranges.len() as u64 - 1, out);
        put_varint(ranges[0].1 - ranges[0].0, out);
        for w in ranges.windows(2) {
            let (prev_smallest, (smallest, largest)) = (w[0].0, w[1]);
            put_varint(prev_smallest - largest - 2, out);
            put_varint(largest - smallest, out);
        }
    }

    /// Received packet numbers as inclusive ranges, largest first (at most 32).
    fn ack_ranges(&self) -> Vec<(u64, u64)> {
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for &pn in self.received.iter().rev() {
            if let Some(last) = ranges.last_mut().filter(|r| r.0 == pn + 1) {
                last.0 = pn;
            } else if ranges.len() == 32 {
                break;
            } else {
                ranges.push((pn, pn));
            }
        }
        ranges
    }

    /// Process one datagram from the peer.
    pub fn recv(&mut self, datagram: &[u8]) {
        if self.closed.is_some() || datagram.len() < HEADER_LEN + TAG_LEN {
            return;
        }
        let mut pn_bytes = [0u8; 4];
        pn_bytes.copy_from_slice(&datagram[1..5]);
        let pn = u64::from(u32::from_be_bytes(pn_bytes));
        let payload = &datagram[HEADER_LEN..datagram.len() - TAG_LEN];
        self.conn.largest_received = Some(self.conn.largest_received.map_or(pn, |l| l.max(pn)));
        let ctx = RxContext {
            packet_type: PacketType::OneRtt,
            space: PnSpace::ApplicationData,
            packet_number: pn,
            now: self.conn.now,
        };
        let mut pos = 0;
        let mut ack_eliciting = false;
        while pos < payload.len() && self.closed.is_none() {
            let Some(ty) = get_varint(payload, &mut pos) else {
                self.close(FRAME_ENCODING_ERROR, "truncated frame type".into());
                break;
            };
            ack_eliciting |= !matches!(ty, 0x00 | 0x02 | 0x03 | 0x1c | 0x1d);
            if let Err(reason) = self.recv_frame(ty, payload, &mut pos, ctx) {
                // A plugin fault's close comes first (CQ-LIMIT-10).
                self.check_close_request();
                self.close(FRAME_ENCODING_ERROR, reason);
            }
            self.check_close_request();
        }
        self.received.insert(pn);
        if ack_eliciting {
            self.ack_pending = true;
        }
    }

    fn observed(&mut self, anchor: Anchor, frame: &Frame, ctx: RxContext) {
        self.plugins
            .observe_frame(&mut self.conn, anchor, frame, ctx);
    }

    /// Observers around a standard frame with no native processing to do.
    fn observe_native(&mut self, frame: Frame, ctx: RxContext) {
        if self.plugins.observes_frame_type(frame.frame_type()) {
            self.observed(Anchor::Before, &frame, ctx);
            self.observed(Anchor::After, &frame, ctx);
        }
    }

    fn recv_frame(
        &mut self,
        ty: u64,
        payload: &[u8],
        pos: &mut usize,
        ctx: RxContext,
    ) -> Result<(), String> {
        let short = || "truncated frame".to_string();
        match ty {
            0x00 => {
                let start = *pos - 1;
                while payload.get(*pos) == Some(&0) {
                    *pos += 1;
                }
                self.observe_native(Frame::Padding((*pos - start) as u64), ctx);
            }
            0x01 => self.observe_native(Frame::Ping, ctx),
            0x02 => {
                let largest = get_varint(payload, pos).ok_or_else(short)?;
                let delay = get_varint(payload, pos).ok_or_else(short)?;
                let count = get_varint(payload, pos).ok_or_else(short)?;
                let first = get_varint(payload, pos).ok_or_else(short)?;
                let mut ranges = vec![(largest.checked_sub(first).ok_or_else(short)?, largest)];
                for _ in 0..count {
                    let gap = get_varint(payload, pos).ok_or_else(short)?;
                    let len = get_varint(payload, pos).ok_or_else(short)?;
                    let prev = ranges.last().map_or(0, |r| r.0);
                    let hi = prev.checked_sub(gap + 2).ok_or_else(short)?;
                    ranges.push((hi.checked_sub(len).ok_or_else(short)?, hi));
                }
                let frame = Frame::Ack(AckFrame {
                    largest_acknowledged: largest,
                    ack_delay: delay * 1000,
                    ranges: ranges.clone(),
                    ecn: None,
                });
                self.observed(Anchor::Before, &frame, ctx);
                self.on_ack(&ranges);
                self.observed(Anchor::After, &frame, ctx);
            }
            0x08..=0x0f => {
                let _id = get_varint(payload, pos).ok_or_else(short)?;
                let off = if ty & 0x04 != 0 {
                    get_varint(payload, pos).ok_or_else(short)?
                } else {
                    0
                };
                let len = if ty & 0x02 != 0 {
                    get_varint(payload, pos).ok_or_else(short)?
                } else {
                    (payload.len() - *pos) as u64
                };
                let data = payload.get(*pos..*pos + len as usize).ok_or_else(short)?;
                *pos += len as usize;
                let end = (off + len) as usize;
                if self.stream_in.len() < end {
                    self.stream_in.resize(end, 0);
                }
                let frame = Frame::Stream(StreamFrame {
                    stream_id: 0,
                    offset: off,
                    length: len,
                    fin: ty & 0x01 != 0,
                });
                if self.plugins.observes_frame_type(0x08) {
                    self.observed(Anchor::Before, &frame, ctx);
                }
                self.stream_in[off as usize..end].copy_from_slice(data);
                if self.stream_seen.insert(off) {
                    self.conn.rx_data += len;
                }
                if self.plugins.observes_frame_type(0x08) {
                    self.observed(Anchor::After, &frame, ctx);
                }
            }
            0x1a | 0x1b => {
                let bytes = payload.get(*pos..*pos + 8).ok_or_else(short)?;
                *pos += 8;
                let mut d = [0u8; 8];
                d.copy_from_slice(bytes);
                let data = u64::from_be_bytes(d);
                if ty == 0x1a {
                    let frame = Frame::PathChallenge(data);
                    self.observed(Anchor::Before, &frame, ctx);
                    self.conn.queued.push(Frame::PathResponse(data));
                    self.observed(Anchor::After, &frame, ctx);
                } else {
                    let frame = Frame::PathResponse(data);
                    self.observed(Anchor::Before, &frame, ctx);
                    self.conn
                        .events
                        .push(format!("processed PATH_RESPONSE {data:#x}"));
                    self.observed(Anchor::After, &frame, ctx);
                }
            }
            0x1c | 0x1d => {
                let code = get_varint(payload, pos).ok_or_else(short)?;
                self.closed = Some(Closed {
                    error_code: code,
                    reason: "closed by peer".into(),
                });
                *pos = payload.len();
            }
            _ if self.plugins.parses_frame_type(ty) => {
                match self
                    .plugins
                    .receive_frame(&mut self.conn, ty, &payload[*pos..], ctx)
                {
                    Ok(consumed) => *pos += consumed as usize,
                    Err(FrameRejected::Encoding(e)) => return Err(format!("frame {ty:#x}: {e}")),
                    Err(FrameRejected::Violation(e)) => {
                        self.check_close_request();
                        self.close(PROTOCOL_VIOLATION, format!("frame {ty:#x}: {e}"));
                    }
                }
            }
            _ => return Err(format!("unknown frame type {ty:#x}")),
        }
        Ok(())
    }

    fn on_ack(&mut self, ranges: &[(u64, u64)]) {
        self.acks_processed += 1;
        let Some(&(_, largest)) = ranges.first() else {
            return;
        };
        self.conn
            .events
            .push(format!("processed ACK largest={largest}"));
        let acked: Vec<u64> = self
            .sent
            .keys()
            .copied()
            .filter(|pn| ranges.iter().any(|(lo, hi)| (lo..=hi).contains(&pn)))
            .collect();
        if acked.is_empty() {
            return;
        }
        if self.conn.largest_acked.is_none_or(|l| largest > l) {
            self.conn.largest_acked = Some(largest);
            if let Some(p) = self.sent.get(&largest) {
                self.update_rtt(self.conn.now - p.time);
            }
        }
        for pn in acked {
            if let Some(p) = self.sent.remove(&pn) {
                if p.in_flight {
                    self.conn.bytes_in_flight -= p.size;
                    if self.conn.ssthresh.is_none_or(|s| self.conn.cwnd < s) {
                        // Saturating: a plugin may have written any window
                        self.conn.cwnd = self.conn.cwnd.saturating_add(p.size);
                    }
                }
                for f in p.plugin_frames {
                    *self.plugin_frames_acked.entry(f.frame_type).or_default() += 1;
                    let _ = self
                        .plugins
                        .notify_frame(&mut self.conn, f, FrameOutcome::Acked);
                }
            }
        }
        self.conn.pto_count = 0;
        // Packet threshold 1: the mock link never reorders.
        let lost: Vec<u64> = self.sent.range(..largest).map(|(pn, _)| *pn).collect();
        self.declare_lost(lost);
    }

    fn declare_lost(&mut self, lost: Vec<u64>) {
        for pn in lost {
            if let Some(p) = self.sent.remove(&pn) {
                if p.in_flight {
                    self.conn.bytes_in_flight -= p.size;
                }
                if let Some(range) = p.stream {
                    self.to_send.push_front(range);
                }
                for f in p.plugin_frames {
                    *self.plugin_frames_lost.entry(f.frame_type).or_default() += 1;
                    let _ = self
                        .plugins
                        .notify_frame(&mut self.conn, f, FrameOutcome::Lost);
                }
            }
        }
    }

    fn update_rtt(&mut self, sample: u64) {
        let c = &mut self.conn;
        c.latest_rtt = sample;
        if c.min_rtt == 0 || sample < c.min_rtt {
            c.min_rtt = sample;
        }
        if c.rttvar == 0 && c.smoothed_rtt == 333 * MS {
            c.smoothed_rtt = sample;
            c.rttvar = sample / 2;
        } else {
            c.rttvar = (3 * c.rttvar + c.smoothed_rtt.abs_diff(sample)) / 4;
            c.smoothed_rtt = (7 * c.smoothed_rtt + sample) / 8;
        }
    }

    fn pto_deadline(&self) -> Option<u64> {
        let first = self
            .sent
            .values()
            .filter(|p| p.ack_eliciting)
            .map(|p| p.time)
            .min()?;
        let pto = (self.conn.smoothed_rtt + 4 * self.conn.rttvar.max(MS) + 25 * MS)
            << self.conn.pto_count.min(10);
        Some(first + pto)
    }

    /// The earliest timer: a plugin timer or the probe timeout.
    pub fn next_timeout(&self) -> Option<u64> {
        if self.closed.is_some() {
            return None;
        }
        match (self.plugins.next_timeout(), self.pto_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Fire what is due at the current time.
    pub fn handle_timeout(&mut self) {
        let now = self.conn.now;
        self.plugins.handle_timeout(&mut self.conn, now);
        if self.pto_deadline().is_some_and(|d| d <= now) {
            // Mock PTO: every ack-eliciting packet in flight is lost.
            self.conn.pto_count += 1;
            let lost: Vec<u64> = self
                .sent
                .iter()
                .filter(|(_, p)| p.ack_eliciting)
                .map(|(pn, _)| *pn)
                .collect();
            self.declare_lost(lost);
            self.conn.queued.push(Frame::Ping);
        }
        self.check_close_request();
    }
}

/// Which datagrams the link drops.
pub type DropFilter = Box<dyn FnMut(bool, &[u8]) -> bool + Send>;

/// A client and a server joined by an in-memory link.
pub struct MockPair {
    /// The client.
    pub client: MockEndpoint,
    /// The server.
    pub server: MockEndpoint,
    /// Virtual time (ns).
    pub now: u64,
    /// One-way delay of the link (ns).
    pub one_way_delay: u64,
    in_transit: VecDeque<(u64, bool, Vec<u8>)>,
    drop_filter: Option<DropFilter>,
}

impl MockPair {
    /// Attach plugins to both sides and run `init`. MTU is the datagram
    /// size limit; the link delay is one way. The transport-parameter
    /// exchange happens in [`MockPair::handshake`].
    pub fn new(
        runtime: &Runtime,
        client_plugins: &[Arc<Plugin>],
        server_plugins: &[Arc<Plugin>],
        mtu: u64,
        one_way_delay: u64,
    ) -> Result<MockPair, LoadError> {
        let client = MockEndpoint::new(runtime.connection(client_plugins)?, false, mtu);
        let server = MockEndpoint::new(runtime.connection(server_plugins)?, true, mtu);
        let mut pair = MockPair {
            client,
            server,
            now: 0,
            one_way_delay,
            in_transit: VecDeque::new(),
            drop_filter: None,
        };
        for ep in [&mut pair.client, &mut pair.server] {
            let _ = ep.plugins.init(&mut ep.conn);
        }
        Ok(pair)
    }

    /// Exchange transport parameters (both directions) and mark both sides
    /// established. A decode error closes the receiving side with
    /// TRANSPORT_PARAMETER_ERROR.
    pub fn handshake(&mut self) {
        let client_tps = self
            .client
            .plugins
            .transport_parameters(&mut self.client.conn);
        let server_tps = self
            .server
            .plugins
            .transport_parameters(&mut self.server.conn);
        for (ep, tps) in [
            (&mut self.server, client_tps),
            (&mut self.client, server_tps),
        ] {
            for (id, value) in tps {
                if let Err(e) = ep
                    .plugins
                    .decode_transport_parameter(&mut ep.conn, id, &value)
                {
                    ep.close(
                        TRANSPORT_PARAMETER_ERROR,
                        format!("transport parameter {id:#x}: {e}"),
                    );
                }
            }
            ep.conn.established = true;
        }
    }

    /// Drop datagrams for which `filter(from_client, datagram)` is true.
    pub fn set_drop_filter(&mut self, filter: DropFilter) {
        self.drop_filter = Some(filter);
    }

    fn flush(&mut self) {
        for from_client in [true, false] {
            let ep = if from_client {
                &mut self.client
            } else {
                &mut self.server
            };
            // A cap keeps a misbehaving plugin from spinning the loop.
            for _ in 0..10_000 {
                let Some(d) = ep.poll_transmit() else { break };
                let dropped = self
                    .drop_filter
                    .as_mut()
                    .is_some_and(|f| f(from_client, &d));
                if !dropped {
                    self.in_transit
                        .push_back((self.now + self.one_way_delay, from_client, d));
                }
            }
        }
    }

    /// Advance to the next event (arrival or timer) and handle it. Returns
    /// false when nothing is left to happen.
    pub fn step(&mut self) -> bool {
        self.flush();
        let next_arrival = self.in_transit.front().map(|t| t.0);
        let next_timer = match (self.client.next_timeout(), self.server.next_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let next = match (next_arrival, next_timer) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => return false,
        };
        self.now = self.now.max(next);
        self.client.conn.now = self.now;
        self.server.conn.now = self.now;
        while self.in_transit.front().is_some_and(|t| t.0 <= self.now) {
            if let Some((_, from_client, d)) = self.in_transit.pop_front() {
                let to = if from_client {
                    &mut self.server
                } else {
                    &mut self.client
                };
                to.recv(&d);
            }
        }
        for ep in [&mut self.client, &mut self.server] {
            if ep.next_timeout().is_some_and(|t| t <= self.now) {
                ep.handle_timeout();
            }
        }
        self.flush();
        true
    }

    /// Step until `done` holds (true) or the virtual clock passes `limit`
    /// nanoseconds or nothing is left to happen (false).
    pub fn run_until(&mut self, limit: u64, mut done: impl FnMut(&MockPair) -> bool) -> bool {
        loop {
            if done(self) {
                return true;
            }
            if self.now > limit || !self.step() {
                return done(self);
            }
        }
    }

    /// Serve `len` more stream bytes from the server and run until the
    /// client has the whole stream byte-exact (true) or the clock passes
    /// `limit` from now (false).
    pub fn transfer(&mut self, len: u64, limit: u64) -> bool {
        self.server.send_stream(len);
        let total = self.server.stream_queued;
        let deadline = self.now + limit;
        self.run_until(deadline, |p| {
            p.client.stream_received().len() as u64 >= total
        }) && self.client.stream_complete(total)
    }
}
