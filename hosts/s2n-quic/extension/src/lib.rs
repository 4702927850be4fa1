//! The per-connection extension interface of s2n-quic-transport, kept out of its patch series.
//!
//! The series (`hosts/s2n-quic/patches/s2n-quic-transport/`) makes s2n-quic-transport create an
//! [`Extension`] for each connection with the endpoint's [`ExtensionFactory`] and call its hooks;
//! it re-exports this crate as `s2n_quic_transport::extension`. Everything here needs only the
//! public API of s2n-quic-core, so it lives in a crate of its own rather than in the fork: the
//! hooks, the values they get and the codecs of the frames and transport parameters an
//! extension adds. The state s2n-quic keeps around the extension (`ExtState`) needs the
//! transport's private types and stays in the series. Generic: no Wasm and no corequic types.
//!
//! Every hook has a no-op default, and a connection without an extension behaves exactly as
//! before. Hooks get an [`ExtensionContext`]: a snapshot of the connection taken just before
//! the hook runs, plus [`Requests`] (congestion window, ssthresh, flow limits, PING, close)
//! applied right after it returns.
#![no_std]

extern crate alloc;

use alloc::{boxed::Box, vec::Vec};
use bytes::Bytes;
use core::{any::Any, net::SocketAddr, time::Duration};
use s2n_codec::{DecoderBufferMut, Encoder, EncoderValue};
use s2n_quic_core::transport::parameters as tp;
use s2n_quic_core::{
    connection,
    event::{IntoEvent, builder},
    frame::{
        Frame, FrameMut,
        ack::EcnCounts,
        ack_elicitation::{AckElicitable, AckElicitation},
        congestion_controlled::CongestionControlled,
        path_validation,
    },
    inet::SocketAddress,
    stream::StreamType,
    time::Timestamp,
    transport,
    varint::VarInt,
};

/// Creates the [`Extension`] of each new connection
pub trait ExtensionFactory: 'static + Send {
    /// Called once per connection, before its transport parameters are encoded; `None` means
    /// no extension for this connection
    fn new_extension(&mut self, info: &ExtensionInfo) -> Option<Box<dyn Extension>>;
}

/// No extension for any connection (the default)
#[derive(Debug, Default, Clone, Copy)]
pub struct Disabled;

impl ExtensionFactory for Disabled {
    fn new_extension(&mut self, _info: &ExtensionInfo) -> Option<Box<dyn Extension>> {
        None
    }
}

/// What is known of a connection when its extension is created
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ExtensionInfo {
    /// Whether this endpoint is the server
    pub is_server: bool,
    /// The peer's address
    pub remote_address: SocketAddr,
    /// The local address (unspecified on a client, which does not know it yet)
    pub local_address: SocketAddr,
    /// The time of creation; later timestamps are never earlier
    pub now: Timestamp,
}

impl ExtensionInfo {
    /// For the stack: what it knows of a new connection
    pub fn new(
        is_server: bool,
        remote_address: SocketAddress,
        local_address: SocketAddress,
        now: Timestamp,
    ) -> Self {
        Self {
            is_server,
            remote_address: remote_address.into(),
            local_address: local_address.into(),
            now,
        }
    }
}

/// Where in a 1-RTT packet [`Extension::write_frames`] is offered room
#[derive(Debug, Copy, Clone, PartialEq, Eq)]
pub enum SendPosition {
    /// Before any other frame
    First,
    /// Right after the ACK frame, or where it would have been
    AfterAck,
    /// After all other frames, just before the packet is sealed
    End,
}

/// The 1-RTT packet being built
#[derive(Debug, Copy, Clone)]
pub struct SendContext {
    /// Where the frames go
    pub position: SendPosition,
    /// The packet's number
    pub packet_number: u64,
    /// Bytes the extension may append
    pub room: usize,
    /// Whether frames that count in flight may be written; false when congestion control
    /// lets the packet out only because it is not in flight (an ACK-only packet)
    pub in_flight: bool,
}

/// A frame written by an extension, kept with its packet until acknowledged or lost
#[derive(Debug, Copy, Clone, PartialEq, Eq)]
pub struct ExtensionFrame {
    /// Frame type
    pub frame_type: u64,
    /// Identifier chosen by the extension
    pub tag: u64,
    /// Whether the frame makes its packet ack-eliciting
    pub ack_eliciting: bool,
    /// Whether the frame's bytes count in flight
    pub in_flight: bool,
}

/// A per-connection protocol extension; all hooks default to doing nothing
#[allow(unused_variables)]
pub trait Extension: Send {
    /// Transport parameters to send, as (id, value) pairs; ids s2n-quic encodes itself are
    /// ignored
    fn transport_parameters(&mut self) -> Vec<(u64, Vec<u8>)> {
        Vec::new()
    }

    /// The peer sent a transport parameter s2n-quic does not know; an error closes the
    /// connection
    fn decode_transport_parameter(
        &mut self,
        cx: &mut ExtensionContext,
        id: u64,
        value: &[u8],
    ) -> Result<(), transport::Error> {
        Ok(())
    }

    /// Whether the extension has an ack-eliciting frame to send now; asked only when
    /// `offers_frames_at` is true at some position. Must have no side effects
    fn wants_to_send(&mut self, cx: &mut ExtensionContext, ctx: &SendContext) -> bool {
        false
    }

    /// Whether `write_frames` at `position` may write anything; when false the stack skips
    /// the call and what it builds for it. Read when the extension is created and after every
    /// hook that is given a context (`cx`): the answer may change only in those
    fn offers_frames_at(&self, position: SendPosition) -> bool {
        true
    }

    /// Append frames of at most `ctx.room` bytes to `buf`, describing each one in `frames`
    fn write_frames(
        &mut self,
        cx: &mut ExtensionContext,
        ctx: &SendContext,
        buf: &mut Vec<u8>,
        frames: &mut Vec<ExtensionFrame>,
    ) {
    }

    /// Frames written by `write_frames` were acknowledged (`acked`) or declared lost
    fn on_frames(&mut self, cx: &mut ExtensionContext, frames: &[ExtensionFrame], acked: bool) {}

    /// Parse and process a frame of a type s2n-quic does not know; `payload` starts right after
    /// the type. Returns the number of bytes consumed. An error closes the connection.
    fn process_frame(
        &mut self,
        cx: &mut ExtensionContext,
        frame_type: u64,
        payload: &[u8],
        packet_number: u64,
    ) -> Result<usize, transport::Error> {
        Err(transport::Error::FRAME_ENCODING_ERROR.with_reason("invalid frame"))
    }

    /// Whether `observe_frame` wants standard frames of this type (ACK_ECN as 0x03, STREAM as
    /// 0x08..=0x0f, DATAGRAM as 0x30..=0x31)
    fn observes_frame(&mut self, frame_type: u64) -> bool {
        false
    }

    /// A received standard frame in a 1-RTT packet, before (`after == false`) and after
    /// s2n-quic processed it. Not called for PADDING, nor after CONNECTION_CLOSE.
    fn observe_frame(
        &mut self,
        cx: &mut ExtensionContext,
        frame: &ObservedFrame,
        after: bool,
        packet_number: u64,
    ) {
    }

    /// When `on_timeout` should next be called
    fn next_timeout(&self) -> Option<Timestamp> {
        None
    }

    /// The time returned by `next_timeout` has come
    fn on_timeout(&mut self, cx: &mut ExtensionContext) {}

    /// While true the connection sends nothing, except when closing. Read like
    /// `offers_frames_at`, after every hook that is given a context
    fn sending_halted(&self) -> bool {
        false
    }

    /// For the application to reach its extension (`Connection::extension_mut`)
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// A standard frame received in a 1-RTT packet, as shown to [`Extension::observe_frame`]
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ObservedFrame {
    /// PING
    Ping,
    /// ACK: largest acknowledged, ACK delay (as encoded, in microseconds before the peer's
    /// ack_delay_exponent is applied), ranges as inclusive (smallest, largest) with the largest
    /// first, ECN counts (ect0, ect1, ce)
    Ack(u64, Duration, Vec<(u64, u64)>, Option<(u64, u64, u64)>),
    /// RESET_STREAM: stream id, error code, final size
    ResetStream(u64, u64, u64),
    /// STOP_SENDING: stream id, error code
    StopSending(u64, u64),
    /// CRYPTO: offset, length
    Crypto(u64, u64),
    /// NEW_TOKEN: the token
    NewToken(Bytes),
    /// STREAM: stream id, offset, length, fin
    Stream(u64, u64, u64, bool),
    /// MAX_DATA
    MaxData(u64),
    /// MAX_STREAM_DATA: stream id, maximum
    MaxStreamData(u64, u64),
    /// MAX_STREAMS: bidirectional, count
    MaxStreams(bool, u64),
    /// DATA_BLOCKED: limit
    DataBlocked(u64),
    /// STREAM_DATA_BLOCKED: stream id, limit
    StreamDataBlocked(u64, u64),
    /// STREAMS_BLOCKED: bidirectional, limit
    StreamsBlocked(bool, u64),
    /// NEW_CONNECTION_ID: sequence, retire prior to, connection id, stateless reset token
    NewConnectionId(u64, u64, Bytes, Bytes),
    /// RETIRE_CONNECTION_ID: sequence
    RetireConnectionId(u64),
    /// PATH_CHALLENGE: the 8 data bytes, big-endian
    PathChallenge(u64),
    /// PATH_RESPONSE: the 8 data bytes, big-endian
    PathResponse(u64),
    /// CONNECTION_CLOSE: application (0x1d), error code, offending frame type, reason
    Close(bool, u64, Option<u64>, Bytes),
    /// HANDSHAKE_DONE
    HandshakeDone,
    /// DATAGRAM: payload length
    Datagram(u64),
    /// Any other frame, by type
    Other(u64),
}

impl ObservedFrame {
    /// The frame's type as s2n-quic reports it
    pub fn frame_type(frame: &FrameMut) -> u64 {
        match frame {
            Frame::DcStatelessResetTokens(f) => f.tag().as_u64(),
            Frame::MtuProbingComplete(f) => f.tag().as_u64(),
            Frame::Ack(f) => f.tag().into(),
            Frame::Stream(f) => f.tag().into(),
            Frame::Datagram(f) => f.tag().into(),
            Frame::MaxStreams(f) => f.tag().into(),
            Frame::StreamsBlocked(f) => f.tag().into(),
            Frame::ConnectionClose(f) => f.tag().into(),
            Frame::Padding(_) => 0x00,
            Frame::Ping(_) => 0x01,
            Frame::ResetStream(_) => 0x04,
            Frame::StopSending(_) => 0x05,
            Frame::Crypto(_) => 0x06,
            Frame::NewToken(_) => 0x07,
            Frame::MaxData(_) => 0x10,
            Frame::MaxStreamData(_) => 0x11,
            Frame::DataBlocked(_) => 0x14,
            Frame::StreamDataBlocked(_) => 0x15,
            Frame::NewConnectionId(_) => 0x18,
            Frame::RetireConnectionId(_) => 0x19,
            Frame::PathChallenge(_) => 0x1a,
            Frame::PathResponse(_) => 0x1b,
            Frame::HandshakeDone(_) => 0x1e,
        }
    }

    /// For the stack: a received frame as the extension is shown it
    pub fn new(frame: &FrameMut) -> Self {
        use ObservedFrame as O;
        let v = |v: VarInt| v.as_u64();
        let bidi = |t: StreamType| t == StreamType::Bidirectional;
        match frame {
            Frame::Ping(_) => O::Ping,
            Frame::Ack(ack) => O::Ack(
                v(ack.largest_acknowledged()),
                ack.ack_delay(),
                ack.ack_ranges()
                    .map(|r| (v(*r.start()), v(*r.end())))
                    .collect(),
                ack.ecn_counts
                    .map(|e| (v(e.ect_0_count), v(e.ect_1_count), v(e.ce_count))),
            ),
            Frame::ResetStream(f) => {
                O::ResetStream(v(f.stream_id), v(f.application_error_code), v(f.final_size))
            }
            Frame::StopSending(f) => O::StopSending(v(f.stream_id), v(f.application_error_code)),
            Frame::Crypto(f) => O::Crypto(v(f.offset), f.data.len() as u64),
            Frame::NewToken(f) => O::NewToken(Bytes::copy_from_slice(f.token)),
            Frame::Stream(f) => {
                O::Stream(v(f.stream_id), v(f.offset), f.data.len() as u64, f.is_fin)
            }
            Frame::MaxData(f) => O::MaxData(v(f.maximum_data)),
            Frame::MaxStreamData(f) => O::MaxStreamData(v(f.stream_id), v(f.maximum_stream_data)),
            Frame::MaxStreams(f) => O::MaxStreams(bidi(f.stream_type), v(f.maximum_streams)),
            Frame::DataBlocked(f) => O::DataBlocked(v(f.data_limit)),
            Frame::StreamDataBlocked(f) => {
                O::StreamDataBlocked(v(f.stream_id), v(f.stream_data_limit))
            }
            Frame::StreamsBlocked(f) => O::StreamsBlocked(bidi(f.stream_type), v(f.stream_limit)),
            Frame::NewConnectionId(f) => O::NewConnectionId(
                v(f.sequence_number),
                v(f.retire_prior_to),
                Bytes::copy_from_slice(f.connection_id),
                Bytes::copy_from_slice(f.stateless_reset_token),
            ),
            Frame::RetireConnectionId(f) => O::RetireConnectionId(v(f.sequence_number)),
            Frame::PathChallenge(f) => O::PathChallenge(u64::from_be_bytes(*f.data)),
            Frame::PathResponse(f) => O::PathResponse(u64::from_be_bytes(*f.data)),
            Frame::ConnectionClose(f) => O::Close(
                f.tag() == 0x1d,
                v(f.error_code),
                f.frame_type.map(v),
                Bytes::copy_from_slice(f.reason.unwrap_or_default()),
            ),
            Frame::HandshakeDone(_) => O::HandshakeDone,
            Frame::Datagram(f) => O::Datagram(f.data.len() as u64),
            other => O::Other(Self::frame_type(other)),
        }
    }
}

/// What an extension may read and change of its connection while one of its hooks runs
///
/// The fields are a snapshot taken just before the hook; the requests are applied right after
/// it returns.
#[derive(Debug, Clone)]
pub struct ExtensionContext {
    /// The current time
    pub now: Timestamp,
    /// Whether this endpoint is the server
    pub is_server: bool,
    /// Whether 1-RTT keys are available (false while transport parameters are decoded)
    pub is_established: bool,
    /// The QUIC version
    pub version: u32,
    /// The local address of the active path
    pub local_address: SocketAddr,
    /// The peer's address on the active path
    pub remote_address: SocketAddr,
    /// Latest RTT sample
    pub latest_rtt: Duration,
    /// Smoothed RTT
    pub smoothed_rtt: Duration,
    /// Minimum RTT
    pub min_rtt: Duration,
    /// RTT variation
    pub rttvar: Duration,
    /// The peer's max_ack_delay
    pub max_ack_delay: Duration,
    /// Probe timeouts since the last acknowledgement
    pub pto_count: u32,
    /// Congestion window in bytes
    pub congestion_window: u32,
    /// Slow start threshold, if the congestion controller has one
    pub ssthresh: Option<u32>,
    /// Bytes in flight
    pub bytes_in_flight: u32,
    /// Maximum datagram size of the active path
    pub max_datagram_size: u16,
    /// The next 1-RTT packet number
    pub next_packet_number: u64,
    /// The largest 1-RTT packet number the peer acknowledged, `None` before any acknowledgement
    pub largest_acked: Option<u64>,
    /// The largest 1-RTT packet number received, `None` before any packet
    pub largest_received: Option<u64>,
    /// Connection flow control: (send limit, bytes sent, receive limit, bytes received)
    pub flow_control: (u64, u64, u64, u64),
    /// The configured idle timeout
    pub idle_timeout: Option<Duration>,
    /// The Destination Connection ID of the packets sent on the active path
    pub destination_connection_id: connection::PeerId,
    /// What the active path may still send before its address is validated; `None` once it is
    pub amplification_budget: Option<u32>,
    /// ECN counts of the 1-RTT packets received (zero before the 1-RTT space exists)
    pub ecn_counts: EcnCounts,
    /// Transport parameters: ours and the peer's
    pub parameters: ParameterView,
    /// What the hook asks for, applied by the stack when it returns
    pub requests: Requests,
}

impl ExtensionContext {
    /// Ask to set the congestion window after the hook returns
    pub fn set_congestion_window(&mut self, bytes: u32) {
        self.requests.window = Some(bytes);
    }

    /// Ask to set the slow start threshold after the hook returns
    pub fn set_ssthresh(&mut self, bytes: u32) {
        self.requests.ssthresh = Some(bytes);
    }

    /// Whether [`Self::set_max_tx_data`] and [`Self::set_max_rx_data`] can apply: only
    /// once the 1-RTT packet space exists
    pub fn flow_limits_writable(&self) -> bool {
        self.requests.flow_limits_writable
    }

    /// Set the connection-level send limit when the hook returns; false if it is below
    /// the bytes already handed to streams, or not a varint. A later MAX_DATA from the
    /// peer raises it as usual.
    pub fn set_max_tx_data(&mut self, max: u64) -> bool {
        if !self.flow_limits_writable() || max < self.flow_control.1 || VarInt::new(max).is_err() {
            return false;
        }
        self.flow_control.0 = max;
        self.requests.max_tx_data = Some(max);
        true
    }

    /// Set the connection-level receive limit when the hook returns, announced in a
    /// MAX_DATA frame; false if it is below the current limit, or not a varint
    pub fn set_max_rx_data(&mut self, max: u64) -> bool {
        if !self.flow_limits_writable() || max < self.flow_control.2 || VarInt::new(max).is_err() {
            return false;
        }
        self.flow_control.2 = max;
        self.requests.max_rx_data = Some(max);
        true
    }

    /// Ask to send a PING
    pub fn ping(&mut self) {
        self.requests.ping = true;
    }

    /// Ask to close the connection with an application error (the reason is for logs only:
    /// s2n-quic sends application closes without a reason phrase)
    pub fn close(&mut self, error_code: u64, reason: Bytes) {
        self.requests.close.get_or_insert((error_code, reason));
    }
}

/// What a hook asked of its connection through its [`ExtensionContext`]
#[derive(Debug, Clone, Default)]
pub struct Requests {
    flow_limits_writable: bool,
    window: Option<u32>,
    ssthresh: Option<u32>,
    max_tx_data: Option<u64>,
    max_rx_data: Option<u64>,
    ping: bool,
    close: Option<(u64, Bytes)>,
}

impl Requests {
    /// For the stack: no request yet; flow limits may be asked for once the 1-RTT space
    /// exists, whose stream manager applies them
    pub fn new(flow_limits_writable: bool) -> Self {
        Self {
            flow_limits_writable,
            ..Self::default()
        }
    }

    /// The congestion window asked for
    pub fn congestion_window(&self) -> Option<u32> {
        self.window
    }

    /// The slow start threshold asked for
    pub fn ssthresh(&self) -> Option<u32> {
        self.ssthresh
    }

    /// The connection-level send limit asked for (checked)
    pub fn max_tx_data(&self) -> Option<u64> {
        self.max_tx_data
    }

    /// The connection-level receive limit asked for (checked)
    pub fn max_rx_data(&self) -> Option<u64> {
        self.max_rx_data
    }

    /// Whether a PING was asked for
    pub fn ping(&self) -> bool {
        self.ping
    }

    /// The application close asked for: error code and reason
    pub fn close(&self) -> Option<&(u64, Bytes)> {
        self.close.as_ref()
    }
}

/// The transport parameters an [`ExtensionContext`] shows: the peer's keep their defaults
/// until its parameters are processed
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct ParameterView {
    /// initial_source_connection_id of our transport parameters
    pub initial_source_connection_id: Option<tp::InitialSourceConnectionId>,
    /// max_ack_delay of our transport parameters
    pub local_max_ack_delay: tp::MaxAckDelay,
    /// The peer's max_idle_timeout
    pub peer_max_idle_timeout: tp::MaxIdleTimeout,
    /// The peer's max_udp_payload_size
    pub peer_max_udp_payload_size: tp::MaxUdpPayloadSize,
    /// The peer's ack_delay_exponent
    pub peer_ack_delay_exponent: tp::AckDelayExponent,
    /// The peer's active_connection_id_limit
    pub peer_active_connection_id_limit: tp::ActiveConnectionIdLimit,
}

/// Frame types s2n-quic decodes itself
pub fn s2n_knows_frame(frame_type: u64) -> bool {
    frame_type <= 0x1e || matches!(frame_type, 0x30 | 0x31 | 0xdc0000 | 0xdc0002)
}

/// The frame type at the start of `payload`, without consuming it
pub fn peek_frame_type(payload: &DecoderBufferMut) -> Option<u64> {
    let first = payload.peek_byte(0).ok()?;
    let len = 1usize << (first >> 6);
    let mut value = u64::from(first & 0x3f);
    for i in 1..len {
        value = (value << 8) | u64::from(payload.peek_byte(i).ok()?);
    }
    Some(value)
}

/// The peer's transport parameters that s2n-quic does not know, GREASE excluded
pub fn unknown_parameters(bytes: &[u8]) -> Vec<(u64, &[u8])> {
    let mut out = Vec::new();
    let mut buffer = s2n_codec::DecoderBuffer::new(bytes);
    while !buffer.is_empty() {
        let Ok((id, rest)) = buffer.decode::<VarInt>() else {
            break;
        };
        let Ok((value, rest)) = rest.decode_slice_with_len_prefix::<VarInt>() else {
            break;
        };
        buffer = rest;
        let id = id.as_u64();
        if !is_s2n_parameter(id) && id % 31 != 27 {
            out.push((id, value.into_less_safe_slice()));
        }
    }
    out
}

fn is_s2n_parameter(id: u64) -> bool {
    use s2n_quic_core::transport::parameters::{
        DcSupportedVersions, MaxDatagramFrameSize, MtuProbingCompleteSupport, TransportParameter,
    };
    id <= 0x10
        || id == MaxDatagramFrameSize::ID.as_u64()
        || id == DcSupportedVersions::ID.as_u64()
        || id == MtuProbingCompleteSupport::ID.as_u64()
}

/// Extension transport parameters, encoded after s2n-quic's own (ids s2n-quic encodes itself
/// are skipped)
pub struct RawParameters(pub Vec<(u64, Vec<u8>)>);

impl EncoderValue for RawParameters {
    fn encode<E: Encoder>(&self, buffer: &mut E) {
        for (id, value) in self.0.iter().filter(|(id, _)| !is_s2n_parameter(*id)) {
            if let (Ok(id), Ok(len)) = (VarInt::new(*id), VarInt::try_from(value.len())) {
                buffer.encode(&id);
                buffer.encode(&len);
                buffer.write_slice(value);
            }
        }
    }
}

/// Frames written by the extension, as one opaque frame for s2n-quic's packet writer
pub struct RawFrames<'a> {
    /// The frames' bytes
    pub bytes: &'a [u8],
    /// Whether one of them is ack-eliciting
    pub ack_eliciting: bool,
    /// Whether one of them counts in flight
    pub in_flight: bool,
}

impl EncoderValue for RawFrames<'_> {
    fn encode<E: Encoder>(&self, buffer: &mut E) {
        buffer.write_slice(self.bytes);
    }
}

impl AckElicitable for RawFrames<'_> {
    fn ack_elicitation(&self) -> AckElicitation {
        if self.ack_eliciting {
            AckElicitation::Eliciting
        } else {
            AckElicitation::NonEliciting
        }
    }
}

impl CongestionControlled for RawFrames<'_> {
    fn is_congestion_controlled(&self) -> bool {
        self.in_flight
    }
}

impl path_validation::Probing for RawFrames<'_> {}

impl IntoEvent<builder::Frame> for &RawFrames<'_> {
    fn into_event(self) -> builder::Frame {
        // The event schema has no variant for extension frames
        builder::Frame::Padding {
            len: self.bytes.len() as u16,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn frame_types_peek_as_varints() {
        let mut one = [0x1fu8, 0xff];
        assert_eq!(
            peek_frame_type(&DecoderBufferMut::new(&mut one)),
            Some(0x1f)
        );
        let mut two = [0x40u8, 0x42];
        assert_eq!(
            peek_frame_type(&DecoderBufferMut::new(&mut two)),
            Some(0x42)
        );
        let mut four = [0x80u8, 0x43, 0x51, 0x01];
        assert_eq!(
            peek_frame_type(&DecoderBufferMut::new(&mut four)),
            Some(0x435101)
        );
        let mut short = [0x80u8, 0x43];
        assert_eq!(peek_frame_type(&DecoderBufferMut::new(&mut short)), None);
    }

    #[test]
    fn standard_frame_types_are_s2ns() {
        assert!(s2n_knows_frame(0x1e) && s2n_knows_frame(0x31) && s2n_knows_frame(0xdc0000));
        assert!(!s2n_knows_frame(0x42) && !s2n_knows_frame(0xbd) && !s2n_knows_frame(0x1f));
    }

    #[test]
    fn unknown_parameters_skip_known_and_grease() {
        // initial_max_data (0x04) = 0x10, GREASE 27 = empty, 0xbf = [1, 2]
        let bytes = [0x04, 0x01, 0x10, 27, 0x00, 0x40, 0xbf, 0x02, 1, 2];
        let params = unknown_parameters(&bytes);
        assert_eq!(params, vec![(0xbf, &[1u8, 2][..])]);
    }
}
