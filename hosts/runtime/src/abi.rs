//! The host's model of the ABI: hand-written Rust types for the values hosts
//! and plugins exchange, and small helpers over them.
//!
//! Hosts convert their own representations to and from these types; they are
//! the runtime's single, version-independent rendering of the WIT package.
//! The bindings of each WIT version a plugin may target (`crate::guest`)
//! convert to and from them at the component boundary, so a host built on
//! this module runs plugins of every version the runtime supports.
//!
//! The names, variants and fields are those of `core-quic:plugin@0.1.0`
//! (`releases/0.1.0/wit/types.wit`), and `Debug` prints values the way the
//! component bindings print them (`Frame::Ping`, WIT field names).

use std::fmt;

/// `Debug` for a record, as the component bindings print it: the type's
/// name and its WIT field names.
macro_rules! record_debug {
    ($ty:ident { $($wit:literal => $field:ident),* $(,)? }) => {
        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($ty))
                    $(.field($wit, &self.$field))*
                    .finish()
            }
        }
    };
}

/// `Debug` for an enum or a variant, as the component bindings print it:
/// `Type::Case`, with the payload if any.
macro_rules! cases_debug {
    ($ty:ident { $($case:ident $(($payload:ident))?),* $(,)? }) => {
        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    $($ty::$case $(($payload))? => {
                        #[allow(unused_mut)]
                        let mut t = f.debug_tuple(concat!(stringify!($ty), "::", stringify!($case)));
                        $(t.field($payload);)?
                        t.finish()
                    })*
                }
            }
        }
    };
}

/// QUIC packet types (RFC 9000 section 17).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PacketType {
    /// Initial packet.
    Initial,
    /// 0-RTT packet.
    ZeroRtt,
    /// Handshake packet.
    Handshake,
    /// 1-RTT (short header) packet.
    OneRtt,
    /// Retry packet.
    Retry,
    /// Version Negotiation packet.
    VersionNegotiation,
}
cases_debug!(PacketType {
    Initial,
    ZeroRtt,
    Handshake,
    OneRtt,
    Retry,
    VersionNegotiation
});

/// Packet-number spaces (RFC 9000 section 12.3).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PnSpace {
    /// The Initial space.
    Initial,
    /// The Handshake space.
    Handshake,
    /// The application data space (0-RTT and 1-RTT packets).
    ApplicationData,
}
cases_debug!(PnSpace {
    Initial,
    Handshake,
    ApplicationData
});

/// Where a plugin attaches to a protocol routine.
///
/// `define` replaces the routine (at most one plugin per routine and
/// parameter); `before` and `after` observe it and may not mutate state.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Anchor {
    /// Replaces the routine.
    Define,
    /// Observes the routine before it runs.
    Before,
    /// Observes the routine after it ran.
    After,
}
cases_debug!(Anchor {
    Define,
    Before,
    After
});

/// An IP address.
#[derive(Clone, Copy, PartialEq)]
pub enum IpAddr {
    /// Four octets, network order.
    V4((u8, u8, u8, u8)),
    /// Eight 16-bit groups, network order.
    V6((u16, u16, u16, u16, u16, u16, u16, u16)),
}
cases_debug!(IpAddr { V4(a), V6(a) });

/// A UDP socket address.
#[derive(Clone, Copy, PartialEq)]
pub struct SocketAddr {
    /// The IP address.
    pub ip: IpAddr,
    /// The UDP port.
    pub port: u16,
}
record_debug!(SocketAddr { "ip" => ip, "port" => port });

/// A frame defined by a plugin. The plugin keeps the frame's content in
/// its own memory and refers to it by `tag`; the host carries the pair in
/// its sent-packet bookkeeping so acknowledgements and losses come back
/// per frame.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ExtFrame {
    /// The frame type (up to 2^62 - 1).
    pub frame_type: u64,
    /// The plugin's reference to the frame's content.
    pub tag: u64,
}
record_debug!(ExtFrame { "frame-type" => frame_type, "tag" => tag });

/// ECN counts of an ACK frame (type 0x03).
#[derive(Clone, Copy, PartialEq)]
pub struct EcnCounts {
    /// ECT(0) count.
    pub ect0: u64,
    /// ECT(1) count.
    pub ect1: u64,
    /// ECN-CE count.
    pub ce: u64,
}
record_debug!(EcnCounts { "ect0" => ect0, "ect1" => ect1, "ce" => ce });

/// ACK / ACK_ECN (0x02 / 0x03). `ranges` lists acknowledged packet
/// numbers as inclusive `(smallest, largest)` pairs, largest range first.
#[derive(Clone, PartialEq)]
pub struct AckFrame {
    /// The largest packet number acknowledged.
    pub largest_acknowledged: u64,
    /// The decoded ACK delay in nanoseconds (already scaled by the peer's
    /// ack_delay_exponent).
    pub ack_delay: u64,
    /// Acknowledged packet numbers as inclusive `(smallest, largest)`
    /// pairs, largest range first.
    pub ranges: Vec<(u64, u64)>,
    /// The ECN counts (ACK_ECN only).
    pub ecn: Option<EcnCounts>,
}
record_debug!(AckFrame {
    "largest-acknowledged" => largest_acknowledged,
    "ack-delay" => ack_delay,
    "ranges" => ranges,
    "ecn" => ecn,
});

/// RESET_STREAM (0x04).
#[derive(Clone, Copy, PartialEq)]
pub struct ResetStreamFrame {
    /// The stream being reset.
    pub stream_id: u64,
    /// The application error code.
    pub error_code: u64,
    /// The final size of the stream.
    pub final_size: u64,
}
record_debug!(ResetStreamFrame {
    "stream-id" => stream_id,
    "error-code" => error_code,
    "final-size" => final_size,
});

/// STOP_SENDING (0x05).
#[derive(Clone, Copy, PartialEq)]
pub struct StopSendingFrame {
    /// The stream being stopped.
    pub stream_id: u64,
    /// The application error code.
    pub error_code: u64,
}
record_debug!(StopSendingFrame { "stream-id" => stream_id, "error-code" => error_code });

/// CRYPTO (0x06). The data itself stays with the host.
#[derive(Clone, Copy, PartialEq)]
pub struct CryptoFrame {
    /// The byte offset in the crypto stream.
    pub offset: u64,
    /// The number of bytes.
    pub length: u64,
}
record_debug!(CryptoFrame { "offset" => offset, "length" => length });

/// STREAM (0x08-0x0f). The data itself stays with the host.
#[derive(Clone, Copy, PartialEq)]
pub struct StreamFrame {
    /// The stream.
    pub stream_id: u64,
    /// The byte offset in the stream.
    pub offset: u64,
    /// The number of bytes.
    pub length: u64,
    /// Whether the frame ends the stream.
    pub fin: bool,
}
record_debug!(StreamFrame {
    "stream-id" => stream_id,
    "offset" => offset,
    "length" => length,
    "fin" => fin,
});

/// MAX_STREAM_DATA (0x11).
#[derive(Clone, Copy, PartialEq)]
pub struct MaxStreamDataFrame {
    /// The stream.
    pub stream_id: u64,
    /// The maximum amount of data that can be sent on the stream.
    pub maximum: u64,
}
record_debug!(MaxStreamDataFrame { "stream-id" => stream_id, "maximum" => maximum });

/// MAX_STREAMS (0x12 / 0x13) and STREAMS_BLOCKED (0x16 / 0x17).
#[derive(Clone, Copy, PartialEq)]
pub struct StreamsFrame {
    /// True for bidirectional streams (0x12, 0x16).
    pub bidirectional: bool,
    /// The cumulative stream count.
    pub maximum: u64,
}
record_debug!(StreamsFrame { "bidirectional" => bidirectional, "maximum" => maximum });

/// STREAM_DATA_BLOCKED (0x15).
#[derive(Clone, Copy, PartialEq)]
pub struct StreamDataBlockedFrame {
    /// The blocked stream.
    pub stream_id: u64,
    /// The offset at which blocking occurred.
    pub limit: u64,
}
record_debug!(StreamDataBlockedFrame { "stream-id" => stream_id, "limit" => limit });

/// NEW_CONNECTION_ID (0x18).
#[derive(Clone, PartialEq)]
pub struct NewConnectionIdFrame {
    /// The sequence number of the connection ID.
    pub sequence: u64,
    /// Connection IDs below this sequence number are to be retired.
    pub retire_prior_to: u64,
    /// The connection ID.
    pub connection_id: Vec<u8>,
    /// The 16-byte stateless reset token.
    pub stateless_reset_token: Vec<u8>,
}
record_debug!(NewConnectionIdFrame {
    "sequence" => sequence,
    "retire-prior-to" => retire_prior_to,
    "connection-id" => connection_id,
    "stateless-reset-token" => stateless_reset_token,
});

/// CONNECTION_CLOSE (0x1c / 0x1d).
#[derive(Clone, PartialEq)]
pub struct ConnectionCloseFrame {
    /// True for 0x1d (application error space).
    pub application: bool,
    /// The error code.
    pub error_code: u64,
    /// The frame type that triggered the error (0x1c only).
    pub frame_type: Option<u64>,
    /// The reason phrase.
    pub reason: Vec<u8>,
}
record_debug!(ConnectionCloseFrame {
    "application" => application,
    "error-code" => error_code,
    "frame-type" => frame_type,
    "reason" => reason,
});

/// A QUIC frame as RFC 9000 defines it, plus frames defined by plugins.
#[derive(Clone, PartialEq)]
pub enum Frame {
    /// PADDING (0x00); the payload is the number of consecutive padding bytes.
    Padding(u64),
    /// PING (0x01).
    Ping,
    /// ACK (0x02) and ACK_ECN (0x03).
    Ack(AckFrame),
    /// RESET_STREAM (0x04).
    ResetStream(ResetStreamFrame),
    /// STOP_SENDING (0x05).
    StopSending(StopSendingFrame),
    /// CRYPTO (0x06).
    Crypto(CryptoFrame),
    /// NEW_TOKEN (0x07).
    NewToken(Vec<u8>),
    /// STREAM (0x08-0x0f).
    Stream(StreamFrame),
    /// MAX_DATA (0x10).
    MaxData(u64),
    /// MAX_STREAM_DATA (0x11).
    MaxStreamData(MaxStreamDataFrame),
    /// MAX_STREAMS (0x12, 0x13).
    MaxStreams(StreamsFrame),
    /// DATA_BLOCKED (0x14).
    DataBlocked(u64),
    /// STREAM_DATA_BLOCKED (0x15).
    StreamDataBlocked(StreamDataBlockedFrame),
    /// STREAMS_BLOCKED (0x16, 0x17).
    StreamsBlocked(StreamsFrame),
    /// NEW_CONNECTION_ID (0x18).
    NewConnectionId(NewConnectionIdFrame),
    /// RETIRE_CONNECTION_ID (0x19).
    RetireConnectionId(u64),
    /// PATH_CHALLENGE (0x1a); the 8 data bytes as a big-endian integer.
    PathChallenge(u64),
    /// PATH_RESPONSE (0x1b); the 8 data bytes as a big-endian integer.
    PathResponse(u64),
    /// CONNECTION_CLOSE (0x1c, 0x1d).
    ConnectionClose(ConnectionCloseFrame),
    /// HANDSHAKE_DONE (0x1e).
    HandshakeDone,
    /// DATAGRAM (0x30, 0x31, RFC 9221); the payload length.
    Datagram(u64),
    /// A frame type defined by a plugin.
    Extension(ExtFrame),
}
cases_debug!(Frame {
    Padding(x),
    Ping,
    Ack(x),
    ResetStream(x),
    StopSending(x),
    Crypto(x),
    NewToken(x),
    Stream(x),
    MaxData(x),
    MaxStreamData(x),
    MaxStreams(x),
    DataBlocked(x),
    StreamDataBlocked(x),
    StreamsBlocked(x),
    NewConnectionId(x),
    RetireConnectionId(x),
    PathChallenge(x),
    PathResponse(x),
    ConnectionClose(x),
    HandshakeDone,
    Datagram(x),
    Extension(x),
});

/// A dynamically typed value: field contents and plugin-control arguments
/// and results.
#[derive(Clone, PartialEq)]
pub enum PluginVal {
    /// No value (e.g. `largest-acked` before any acknowledgement).
    None,
    /// A boolean.
    Bool(bool),
    /// An unsigned 32-bit integer.
    U32(u32),
    /// An unsigned 64-bit integer.
    U64(u64),
    /// A signed 64-bit integer.
    S64(i64),
    /// A 64-bit float.
    F64(f64),
    /// Bytes.
    Bytes(Vec<u8>),
    /// A string.
    String(String),
    /// A span of time in nanoseconds.
    Duration(u64),
    /// A point in time: nanoseconds since the connection's epoch.
    Instant(u64),
    /// A UDP socket address.
    SocketAddr(SocketAddr),
    /// A frame.
    Frame(Frame),
    /// A packet type.
    PacketType(PacketType),
    /// A packet-number space.
    PnSpace(PnSpace),
}
cases_debug!(PluginVal {
    None,
    Bool(x),
    U32(x),
    U64(x),
    S64(x),
    F64(x),
    Bytes(x),
    String(x),
    Duration(x),
    Instant(x),
    SocketAddr(x),
    Frame(x),
    PacketType(x),
    PnSpace(x),
});

/// What went wrong. Every host call and every routine reports failure
/// with this type.
#[derive(Clone, PartialEq)]
pub enum Error {
    /// The plugin's permissions do not allow this call, or a mutating
    /// call was made from a `before` or `after` anchor.
    Denied(String),
    /// The host does not implement this field, routine or call.
    Unsupported(String),
    /// An argument is malformed or out of range.
    InvalidArgument(String),
    /// A buffer holds fewer bytes than requested (read) or has less room
    /// than needed (write); the payload is the number of bytes needed.
    BufferTooShort(u64),
    /// The named object (plugin-control id, timer, field value) does not exist.
    NotFound(String),
    /// The callee failed: a plugin trapped, ran out of time or memory, or
    /// was removed from the connection.
    Failed(String),
    /// A plugin-defined error code.
    Plugin(u64),
    /// An error of a kind this host does not know (a plugin built against a
    /// later release reported it), kept as it is (CQ-API-19).
    Other {
        /// The kind's registry identifier.
        kind: u32,
        /// The error's value.
        value: u64,
        /// The error's message.
        message: String,
    },
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (case, payload): (&str, &dyn fmt::Debug) = match self {
            Error::Denied(x) => ("Error::Denied", x),
            Error::Unsupported(x) => ("Error::Unsupported", x),
            Error::InvalidArgument(x) => ("Error::InvalidArgument", x),
            Error::BufferTooShort(x) => ("Error::BufferTooShort", x),
            Error::NotFound(x) => ("Error::NotFound", x),
            Error::Failed(x) => ("Error::Failed", x),
            Error::Plugin(x) => ("Error::Plugin", x),
            Error::Other {
                kind,
                value,
                message,
            } => {
                return f
                    .debug_struct("Error::Other")
                    .field("kind", kind)
                    .field("value", value)
                    .field("message", message)
                    .finish();
            }
        };
        f.debug_tuple(case).field(payload).finish()
    }
}

/// The kinds of [`Error`]: each discriminant is the kind's identifier in the
/// codepoint registry (`spec/registry.toml`, kind `error-kind`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[repr(u32)]
pub enum ErrorKind {
    /// [`Error::Denied`].
    Denied = 1,
    /// [`Error::Unsupported`].
    Unsupported = 2,
    /// [`Error::InvalidArgument`].
    InvalidArgument = 3,
    /// [`Error::BufferTooShort`].
    BufferTooShort = 4,
    /// [`Error::NotFound`].
    NotFound = 5,
    /// [`Error::Failed`].
    Failed = 6,
    /// [`Error::Plugin`].
    Plugin = 7,
}

impl Error {
    /// The error as (kind identifier, value, message), the record of ABI
    /// 0.2 (CQ-API-18): `value` is the bytes needed for `buffer-too-short`
    /// and the code for `plugin`, 0 otherwise.
    pub fn into_parts(self) -> (u32, u64, String) {
        let kind = |k: ErrorKind| k as u32;
        match self {
            Error::Denied(m) => (kind(ErrorKind::Denied), 0, m),
            Error::Unsupported(m) => (kind(ErrorKind::Unsupported), 0, m),
            Error::InvalidArgument(m) => (kind(ErrorKind::InvalidArgument), 0, m),
            Error::BufferTooShort(n) => (kind(ErrorKind::BufferTooShort), n, String::new()),
            Error::NotFound(m) => (kind(ErrorKind::NotFound), 0, m),
            Error::Failed(m) => (kind(ErrorKind::Failed), 0, m),
            Error::Plugin(code) => (kind(ErrorKind::Plugin), code, String::new()),
            Error::Other {
                kind,
                value,
                message,
            } => (kind, value, message),
        }
    }

    /// The error an ABI 0.2 record describes; a kind this host does not know
    /// is kept as [`Error::Other`].
    pub fn from_parts(kind: u32, value: u64, message: String) -> Error {
        const DENIED: u32 = ErrorKind::Denied as u32;
        const UNSUPPORTED: u32 = ErrorKind::Unsupported as u32;
        const INVALID: u32 = ErrorKind::InvalidArgument as u32;
        const TOO_SHORT: u32 = ErrorKind::BufferTooShort as u32;
        const NOT_FOUND: u32 = ErrorKind::NotFound as u32;
        const FAILED: u32 = ErrorKind::Failed as u32;
        const PLUGIN: u32 = ErrorKind::Plugin as u32;
        match kind {
            DENIED => Error::Denied(message),
            UNSUPPORTED => Error::Unsupported(message),
            INVALID => Error::InvalidArgument(message),
            TOO_SHORT => Error::BufferTooShort(value),
            NOT_FOUND => Error::NotFound(message),
            FAILED => Error::Failed(message),
            PLUGIN => Error::Plugin(value),
            kind => Error::Other {
                kind,
                value,
                message,
            },
        }
    }
}

/// Printed as its `Debug` form (`Error::Denied("...")`), as the component
/// bindings print it.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

impl std::error::Error for Error {}

/// The connection fields a plugin may read or write (see the
/// specification for each field's type, unit and access). Each variant's
/// discriminant is the field's identifier in the codepoint registry
/// (`spec/registry.toml`, kind `field`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FieldId {
    /// bool, read-only: this endpoint is the server.
    IsServer = 1,
    /// u32, read-only: the negotiated QUIC version.
    Version = 2,
    /// bool, read-only: the handshake is complete.
    IsEstablished = 3,
    /// u64 bytes, read-write: the connection-level send limit granted by the peer (MAX_DATA).
    MaxTxData = 4,
    /// u64 bytes, read-only: stream bytes sent so far.
    TxData = 5,
    /// u64 bytes, read-write: the connection-level receive limit granted to the peer.
    MaxRxData = 6,
    /// u64 bytes, read-only: stream bytes received so far.
    RxData = 7,
    /// u64 bytes, read-only: the largest UDP payload the path allows sending.
    MaxSendUdpPayload = 8,
    /// socket-addr, read-only.
    LocalAddress = 9,
    /// socket-addr, read-only.
    PeerAddress = 10,
    /// duration, read-only: the negotiated idle timeout (0 = none).
    IdleTimeout = 11,
    /// bool, read-write: while true the host sends no packets; see the
    /// specification of the send loop.
    SendingHalted = 12,
    /// u64, read-only: the next packet number to send.
    NextPacketNumber = 13,
    /// u64 or none, read-only: the largest packet number acknowledged by the peer.
    LargestAcked = 14,
    /// u64 or none, read-only: the largest packet number received.
    LargestReceived = 15,
    /// duration, read-only.
    LatestRtt = 16,
    /// duration, read-only.
    SmoothedRtt = 17,
    /// duration, read-only.
    MinRtt = 18,
    /// duration, read-only.
    Rttvar = 19,
    /// duration, read-only: the peer's max_ack_delay.
    MaxAckDelay = 20,
    /// u32, read-only.
    PtoCount = 21,
    /// u64 bytes, read-only.
    BytesInFlight = 22,
    /// u64 bytes, read-write.
    CongestionWindow = 23,
    /// u64 bytes or none (infinite), read-write.
    Ssthresh = 24,
    /// u64 bytes, read-only.
    MaxDatagramSize = 25,
    /// bytes, read-only (since 0.2.1): the Source Connection ID this
    /// endpoint chose in the handshake (its initial_source_connection_id).
    SourceConnectionId = 26,
    /// bytes, read-only (since 0.2.1): the Destination Connection ID this
    /// endpoint puts in the packets it sends on the current path.
    DestinationConnectionId = 27,
    /// u64 bytes or none, read-only (since 0.2.1): what this endpoint may
    /// still send before the peer's address is validated; none once it is.
    AmplificationBudget = 28,
    /// u64 or none, read-only, per space (since 0.2.1): ECT(0) packets received.
    EcnEct0Count = 29,
    /// u64 or none, read-only, per space (since 0.2.1): ECT(1) packets received.
    EcnEct1Count = 30,
    /// u64 or none, read-only, per space (since 0.2.1): ECN-CE packets received.
    EcnCeCount = 31,
    /// duration, read-only (since 0.2.1): the peer's max_idle_timeout.
    PeerIdleTimeout = 32,
    /// u64 bytes, read-only (since 0.2.1): the peer's max_udp_payload_size.
    PeerMaxUdpPayloadSize = 33,
    /// u64, read-only (since 0.2.1): the peer's ack_delay_exponent.
    PeerAckDelayExponent = 34,
    /// u64, read-only (since 0.2.1): the peer's active_connection_id_limit.
    PeerActiveConnectionIdLimit = 35,
    /// duration, read-only (since 0.2.1): this endpoint's max_ack_delay.
    LocalMaxAckDelay = 36,
}
cases_debug!(FieldId {
    IsServer,
    Version,
    IsEstablished,
    MaxTxData,
    TxData,
    MaxRxData,
    RxData,
    MaxSendUdpPayload,
    LocalAddress,
    PeerAddress,
    IdleTimeout,
    SendingHalted,
    NextPacketNumber,
    LargestAcked,
    LargestReceived,
    LatestRtt,
    SmoothedRtt,
    MinRtt,
    Rttvar,
    MaxAckDelay,
    PtoCount,
    BytesInFlight,
    CongestionWindow,
    Ssthresh,
    MaxDatagramSize,
    SourceConnectionId,
    DestinationConnectionId,
    AmplificationBudget,
    EcnEct0Count,
    EcnEct1Count,
    EcnCeCount,
    PeerIdleTimeout,
    PeerMaxUdpPayloadSize,
    PeerAckDelayExponent,
    PeerActiveConnectionIdLimit,
    LocalMaxAckDelay,
});

/// A reference to one field: `space` is required for per-space fields
/// and must be absent otherwise.
#[derive(Clone, Copy, PartialEq)]
pub struct FieldRef {
    /// The field.
    pub id: FieldId,
    /// The packet-number space, for per-space fields.
    pub space: Option<PnSpace>,
}
record_debug!(FieldRef { "id" => id, "space" => space });

/// The protocol routines a plugin may attach to. Each variant's
/// discriminant is the routine's identifier in the codepoint registry
/// (`spec/registry.toml`, kind `routine`), except for the two routines that
/// only 0.1.0 plugins bind (see [`Routine::LEGACY`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Routine {
    /// `write-transport-parameter`.
    WriteTransportParameter = 1,
    /// `decode-transport-parameter`.
    DecodeTransportParameter = 2,
    /// `should-send-frame`.
    ShouldSendFrame = 3,
    /// `write-frame`: since 0.2.0 it writes the whole frame in one call;
    /// in a 0.1.0 plugin's manifest it is the third of its three send
    /// routines.
    WriteFrame = 4,
    /// `on-frame-reserved`.
    OnFrameReserved = 5,
    /// `notify-frame`.
    NotifyFrame = 6,
    /// `parse-frame`.
    ParseFrame = 7,
    /// `process-frame`.
    ProcessFrame = 8,
    /// `log-frame`.
    LogFrame = 9,
    /// `plugin-control`.
    PluginControl = 10,
    /// `observe-frames` (since 0.2.3): the frames of one type the connection
    /// processed, as observation records delivered in batches through
    /// `call-routine` (CQ-ROUTINE-25).
    ObserveFrames = 11,
    /// `send-frame` (since 0.2.4): `should-send-frame`, `write-frame` and
    /// `on-frame-reserved` in one call through `call-routine`, the frame's
    /// bytes returned (CQ-ROUTINE-29).
    SendFrame = 12,
    /// `receive-frame` (since 0.2.4): `parse-frame` and `process-frame` in
    /// one call through `call-routine` (CQ-ROUTINE-30).
    ReceiveFrame = 13,
    /// `prepare-frame` of ABI 0.1.0, which 0.2.0 merged into `write-frame`;
    /// it has no registry identifier and appears only in the manifests of
    /// 0.1.0 plugins (specification §2.2).
    PrepareFrame = 0xf1,
    /// `frame-wire-len` of ABI 0.1.0, merged into `write-frame` like
    /// [`Routine::PrepareFrame`].
    FrameWireLen = 0xf2,
}
cases_debug!(Routine {
    WriteTransportParameter,
    DecodeTransportParameter,
    ShouldSendFrame,
    WriteFrame,
    OnFrameReserved,
    NotifyFrame,
    ParseFrame,
    ProcessFrame,
    LogFrame,
    PluginControl,
    ObserveFrames,
    SendFrame,
    ReceiveFrame,
    PrepareFrame,
    FrameWireLen,
});

/// Host API groups a plugin must be granted before it may call them.
/// Field access is granted per field, separately. Each variant's
/// discriminant is the permission's identifier in the codepoint registry
/// (`spec/registry.toml`, kind `permission`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Permission {
    /// `set-timer`, `cancel-timer`.
    Timers = 1,
    /// `random-bytes`.
    Randomness = 2,
    /// `log`.
    Logging = 3,
    /// `register-frame`, `register-transport-parameter`.
    Registration = 4,
    /// `send-frame` (standard frames queued on request).
    SendFrames = 5,
    /// `call-plugin-control` towards other plugins of the connection.
    PluginControl = 6,
}
cases_debug!(Permission {
    Timers,
    Randomness,
    Logging,
    Registration,
    SendFrames,
    PluginControl,
});

/// One attachment of a plugin to a routine.
#[derive(Clone, Copy, PartialEq)]
pub struct Binding {
    /// The routine.
    pub routine: Routine,
    /// The anchor.
    pub anchor: Anchor,
    /// The routine's parameter: the frame type, transport parameter id
    /// or control id. Required.
    pub param: u64,
}
record_debug!(Binding { "routine" => routine, "anchor" => anchor, "param" => param });

/// What a plugin declares about itself; the host validates it before the
/// plugin runs on any connection.
#[derive(Clone, PartialEq)]
pub struct PluginManifest {
    /// The plugin's name.
    pub name: String,
    /// The plugin's version.
    pub version: String,
    /// The ABI version the plugin was built against (its WIT package's version).
    pub abi_version: String,
    /// The routines the plugin attaches to.
    pub bindings: Vec<Binding>,
    /// The fields the plugin reads.
    pub reads: Vec<FieldId>,
    /// The fields the plugin writes.
    pub writes: Vec<FieldId>,
    /// The host API groups the plugin calls.
    pub permissions: Vec<Permission>,
}
record_debug!(PluginManifest {
    "name" => name,
    "version" => version,
    "abi-version" => abi_version,
    "bindings" => bindings,
    "reads" => reads,
    "writes" => writes,
    "permissions" => permissions,
});

/// Where in a packet the host offers a registered frame type
/// (Algorithm 1 of the Core QUIC paper).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum SendPosition {
    /// Before any other frame.
    First,
    /// Right after the ACK frame, if any.
    AfterAck,
    /// After all of the host's own frames, just before the packet is sealed.
    End,
}
cases_debug!(SendPosition {
    First,
    AfterAck,
    End
});

/// A frame type registration made by a plugin (from `init` or later).
#[derive(Clone, Copy, PartialEq)]
pub struct FrameRegistration {
    /// The frame type.
    pub frame_type: u64,
    /// Where in a packet the host offers it.
    pub position: SendPosition,
    /// Whether a packet carrying the frame elicits an acknowledgement.
    pub ack_eliciting: bool,
    /// Whether the frame's bytes count towards bytes in flight.
    pub in_flight: bool,
}
record_debug!(FrameRegistration {
    "frame-type" => frame_type,
    "position" => position,
    "ack-eliciting" => ack_eliciting,
    "in-flight" => in_flight,
});

/// The packet being built, as offered to the send routines.
#[derive(Clone, Copy, PartialEq)]
pub struct SendContext {
    /// The packet's type.
    pub packet_type: PacketType,
    /// The packet's packet-number space.
    pub space: PnSpace,
    /// The packet's number.
    pub packet_number: u64,
    /// The position in the packet being offered.
    pub position: SendPosition,
    /// Bytes still available for frames in this packet.
    pub room: u64,
    /// The connection's current time.
    pub now: u64,
}
record_debug!(SendContext {
    "packet-type" => packet_type,
    "space" => space,
    "packet-number" => packet_number,
    "position" => position,
    "room" => room,
    "now" => now,
});

/// The packet a frame was received in.
#[derive(Clone, Copy, PartialEq)]
pub struct RxContext {
    /// The packet's type.
    pub packet_type: PacketType,
    /// The packet's packet-number space.
    pub space: PnSpace,
    /// The packet's number.
    pub packet_number: u64,
    /// The connection's current time.
    pub now: u64,
}
record_debug!(RxContext {
    "packet-type" => packet_type,
    "space" => space,
    "packet-number" => packet_number,
    "now" => now,
});

/// The fate of a sent plugin frame.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameOutcome {
    /// The packet carrying the frame was acknowledged.
    Acked,
    /// The packet carrying the frame was declared lost.
    Lost,
}
cases_debug!(FrameOutcome { Acked, Lost });

/// The result of parsing a plugin frame.
#[derive(Clone, Copy, PartialEq)]
pub struct ParsedFrame {
    /// The parsed frame.
    pub frame: ExtFrame,
    /// Bytes consumed after the frame type.
    pub consumed: u64,
}
record_debug!(ParsedFrame { "frame" => frame, "consumed" => consumed });

/// A frame a plugin's `send-frame` returned (ABI 0.2.4, CQ-ROUTINE-29); its
/// bytes were appended to the packet buffer the call was given.
#[derive(Clone, Debug, PartialEq)]
pub struct SentFrame {
    /// The frame's tag, given back to `notify-frame`.
    pub tag: u64,
    /// The frame's description for the log, in place of `log-frame`.
    pub description: Option<String>,
}

/// A frame a plugin's `receive-frame` took (ABI 0.2.4, CQ-ROUTINE-30).
#[derive(Clone, Debug, PartialEq)]
pub struct ReceivedFrame {
    /// The frame as `parse-frame` would have returned it.
    pub frame: ExtFrame,
    /// Bytes of the payload the frame occupies after its type.
    pub consumed: u64,
    /// The frame's description for the log, in place of `log-frame`.
    pub description: Option<String>,
}

/// Log levels of the structured log.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum LogLevel {
    /// Errors.
    Error,
    /// Warnings.
    Warn,
    /// Information.
    Info,
    /// Debugging detail.
    Debug,
    /// Tracing detail.
    Trace,
}
cases_debug!(LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace
});

/// How `log-shaped` reads a value of a declared log shape from its `u64`
/// (CQ-API-21; ABI 0.2.2).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum LogValueKind {
    /// The value as it is.
    U64,
    /// Its bits as a two's complement signed integer.
    S64,
    /// Its bits as an IEEE 754 double.
    F64,
    /// 0 is false, any other value true.
    Bool,
    /// Nanoseconds.
    Duration,
    /// Nanoseconds since the connection's epoch.
    Instant,
}

impl LogValueKind {
    /// `bits` read as a value of this kind: the value `log` is given for it.
    pub fn value(self, bits: u64) -> PluginVal {
        match self {
            LogValueKind::U64 => PluginVal::U64(bits),
            LogValueKind::S64 => PluginVal::S64(bits as i64),
            LogValueKind::F64 => PluginVal::F64(f64::from_bits(bits)),
            LogValueKind::Bool => PluginVal::Bool(bits != 0),
            LogValueKind::Duration => PluginVal::Duration(bits),
            LogValueKind::Instant => PluginVal::Instant(bits),
        }
    }
}

/// The version of the WIT package this runtime implements.
pub const ABI_VERSION: &str = "0.2.6";

/// The earlier ABI versions whose plugins this runtime also runs, through
/// its compatibility layer (specification §2.2): one release back.
pub const COMPATIBLE_ABI_VERSIONS: [&str; 1] = ["0.1.0"];

/// Whether this runtime runs a plugin built for ABI version `plugin`: a
/// version compatible with [`ABI_VERSION`] (CQ-VER-6), or one of
/// [`COMPATIBLE_ABI_VERSIONS`] exactly.
pub fn abi_supported(plugin: &str) -> bool {
    abi_compatible(plugin, ABI_VERSION) || COMPATIBLE_ABI_VERSIONS.contains(&plugin)
}

/// Application error code with which a host closes a connection whose
/// protocol-defining plugin failed ("CQ" followed by 0x0001).
pub const PLUGIN_FAILURE_ERROR_CODE: u64 = 0x4351_0001;

/// The `invalid-argument` of a write of `max-tx-data` or `max-rx-data` that
/// the stack cannot apply (CQ-FIELD-9), in one wording for every host.
pub fn flow_limit_refused(field: FieldId, value: u64) -> Error {
    let floor = match field {
        FieldId::MaxTxData => "the bytes already sent",
        _ => "the limit already advertised to the peer",
    };
    Error::InvalidArgument(format!(
        "{} {value} is below {floor}, or above the largest varint",
        field.name()
    ))
}

impl FieldId {
    /// Every field of the ABI, in identifier order.
    pub const ALL: [FieldId; 36] = [
        FieldId::IsServer,
        FieldId::Version,
        FieldId::IsEstablished,
        FieldId::MaxTxData,
        FieldId::TxData,
        FieldId::MaxRxData,
        FieldId::RxData,
        FieldId::MaxSendUdpPayload,
        FieldId::LocalAddress,
        FieldId::PeerAddress,
        FieldId::IdleTimeout,
        FieldId::SendingHalted,
        FieldId::NextPacketNumber,
        FieldId::LargestAcked,
        FieldId::LargestReceived,
        FieldId::LatestRtt,
        FieldId::SmoothedRtt,
        FieldId::MinRtt,
        FieldId::Rttvar,
        FieldId::MaxAckDelay,
        FieldId::PtoCount,
        FieldId::BytesInFlight,
        FieldId::CongestionWindow,
        FieldId::Ssthresh,
        FieldId::MaxDatagramSize,
        FieldId::SourceConnectionId,
        FieldId::DestinationConnectionId,
        FieldId::AmplificationBudget,
        FieldId::EcnEct0Count,
        FieldId::EcnEct1Count,
        FieldId::EcnCeCount,
        FieldId::PeerIdleTimeout,
        FieldId::PeerMaxUdpPayloadSize,
        FieldId::PeerAckDelayExponent,
        FieldId::PeerActiveConnectionIdLimit,
        FieldId::LocalMaxAckDelay,
    ];

    /// The fields of ABI 0.2.0 (and, through the compatibility layer, of
    /// 0.1.0): identifiers 1 to 25.
    pub const SINCE_0_2_0: usize = 25;

    /// Whether a reference to this field must name a packet-number space.
    pub fn per_space(self) -> bool {
        matches!(
            self,
            FieldId::NextPacketNumber
                | FieldId::LargestAcked
                | FieldId::LargestReceived
                | FieldId::EcnEct0Count
                | FieldId::EcnEct1Count
                | FieldId::EcnCeCount
        )
    }

    /// Whether the ABI allows plugins to write this field at all.
    pub fn writable(self) -> bool {
        matches!(
            self,
            FieldId::MaxTxData
                | FieldId::MaxRxData
                | FieldId::SendingHalted
                | FieldId::CongestionWindow
                | FieldId::Ssthresh
        )
    }

    /// Whether `value` has the type the specification gives this field for writes.
    pub fn accepts(self, value: &PluginVal) -> bool {
        match self {
            FieldId::SendingHalted => matches!(value, PluginVal::Bool(_)),
            FieldId::Ssthresh => matches!(value, PluginVal::U64(_) | PluginVal::None),
            FieldId::MaxTxData | FieldId::MaxRxData | FieldId::CongestionWindow => {
                matches!(value, PluginVal::U64(_))
            }
            _ => false,
        }
    }

    /// The WIT name of the field.
    pub fn name(self) -> &'static str {
        match self {
            FieldId::IsServer => "is-server",
            FieldId::Version => "version",
            FieldId::IsEstablished => "is-established",
            FieldId::MaxTxData => "max-tx-data",
            FieldId::TxData => "tx-data",
            FieldId::MaxRxData => "max-rx-data",
            FieldId::RxData => "rx-data",
            FieldId::MaxSendUdpPayload => "max-send-udp-payload",
            FieldId::LocalAddress => "local-address",
            FieldId::PeerAddress => "peer-address",
            FieldId::IdleTimeout => "idle-timeout",
            FieldId::SendingHalted => "sending-halted",
            FieldId::NextPacketNumber => "next-packet-number",
            FieldId::LargestAcked => "largest-acked",
            FieldId::LargestReceived => "largest-received",
            FieldId::LatestRtt => "latest-rtt",
            FieldId::SmoothedRtt => "smoothed-rtt",
            FieldId::MinRtt => "min-rtt",
            FieldId::Rttvar => "rttvar",
            FieldId::MaxAckDelay => "max-ack-delay",
            FieldId::PtoCount => "pto-count",
            FieldId::BytesInFlight => "bytes-in-flight",
            FieldId::CongestionWindow => "congestion-window",
            FieldId::Ssthresh => "ssthresh",
            FieldId::MaxDatagramSize => "max-datagram-size",
            FieldId::SourceConnectionId => "source-connection-id",
            FieldId::DestinationConnectionId => "destination-connection-id",
            FieldId::AmplificationBudget => "amplification-budget",
            FieldId::EcnEct0Count => "ecn-ect0-count",
            FieldId::EcnEct1Count => "ecn-ect1-count",
            FieldId::EcnCeCount => "ecn-ce-count",
            FieldId::PeerIdleTimeout => "peer-idle-timeout",
            FieldId::PeerMaxUdpPayloadSize => "peer-max-udp-payload-size",
            FieldId::PeerAckDelayExponent => "peer-ack-delay-exponent",
            FieldId::PeerActiveConnectionIdLimit => "peer-active-connection-id-limit",
            FieldId::LocalMaxAckDelay => "local-max-ack-delay",
        }
    }

    /// Parse a WIT field name.
    pub fn from_name(name: &str) -> Option<FieldId> {
        FieldId::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The field's identifier in the codepoint registry.
    pub fn id(self) -> u32 {
        self as u32
    }

    /// The field with registry identifier `id`, if this host knows it.
    pub fn from_id(id: u32) -> Option<FieldId> {
        FieldId::ALL.into_iter().find(|f| f.id() == id)
    }
}

impl Routine {
    /// Every routine of the ABI that takes bindings, in identifier order.
    pub const ALL: [Routine; 13] = [
        Routine::WriteTransportParameter,
        Routine::DecodeTransportParameter,
        Routine::ShouldSendFrame,
        Routine::WriteFrame,
        Routine::OnFrameReserved,
        Routine::NotifyFrame,
        Routine::ParseFrame,
        Routine::ProcessFrame,
        Routine::LogFrame,
        Routine::PluginControl,
        Routine::ObserveFrames,
        Routine::SendFrame,
        Routine::ReceiveFrame,
    ];

    /// The routines that only 0.1.0 plugins bind; a host runs them as part
    /// of `write-frame` (specification §2.2).
    pub const LEGACY: [Routine; 2] = [Routine::PrepareFrame, Routine::FrameWireLen];

    /// The routine's identifier in the codepoint registry; `None` for the
    /// [`Routine::LEGACY`] routines.
    pub fn id(self) -> Option<u32> {
        (!Routine::LEGACY.contains(&self)).then_some(self as u32)
    }

    /// The routine with registry identifier `id`, if this host knows it.
    pub fn from_id(id: u32) -> Option<Routine> {
        Routine::ALL.into_iter().find(|r| r.id() == Some(id))
    }

    /// The routine whose place a 0.1.0 plugin's binding of `self` takes:
    /// the legacy send routines are part of `write-frame`.
    pub fn merged(self) -> Routine {
        match self {
            Routine::PrepareFrame | Routine::FrameWireLen => Routine::WriteFrame,
            r => r,
        }
    }

    /// The WIT name of the routine.
    pub fn name(self) -> &'static str {
        match self {
            Routine::WriteTransportParameter => "write-transport-parameter",
            Routine::DecodeTransportParameter => "decode-transport-parameter",
            Routine::ShouldSendFrame => "should-send-frame",
            Routine::PrepareFrame => "prepare-frame",
            Routine::FrameWireLen => "frame-wire-len",
            Routine::WriteFrame => "write-frame",
            Routine::OnFrameReserved => "on-frame-reserved",
            Routine::NotifyFrame => "notify-frame",
            Routine::ParseFrame => "parse-frame",
            Routine::ProcessFrame => "process-frame",
            Routine::LogFrame => "log-frame",
            Routine::PluginControl => "plugin-control",
            Routine::ObserveFrames => "observe-frames",
            Routine::SendFrame => "send-frame",
            Routine::ReceiveFrame => "receive-frame",
        }
    }

    /// Whether the routine reaches plugins through `call-routine` (a routine
    /// a release after 0.2.0 added, CQ-ROUTINE-22) rather than an export of
    /// its own.
    pub fn through_call_routine(self) -> bool {
        matches!(
            self,
            Routine::ObserveFrames | Routine::SendFrame | Routine::ReceiveFrame
        )
    }

    /// Parse a WIT routine name (the legacy names included).
    pub fn from_name(name: &str) -> Option<Routine> {
        Routine::ALL
            .into_iter()
            .chain(Routine::LEGACY)
            .find(|r| r.name() == name)
    }

    /// The one anchor the routine may be bound at, for a routine that
    /// allows only one: `define` for `plugin-control` (CQ-LOAD-5), `send-frame`
    /// and `receive-frame` (CQ-ROUTINE-28), `after` for `observe-frames`
    /// (CQ-ROUTINE-24).
    pub fn only_anchor(self) -> Option<Anchor> {
        match self {
            Routine::PluginControl | Routine::SendFrame | Routine::ReceiveFrame => {
                Some(Anchor::Define)
            }
            Routine::ObserveFrames => Some(Anchor::After),
            _ => None,
        }
    }

    /// Whether the routine may run before the plugin has called `enable`.
    pub fn before_enable(self) -> bool {
        matches!(
            self,
            Routine::WriteTransportParameter
                | Routine::DecodeTransportParameter
                | Routine::PluginControl
        )
    }
}

impl Permission {
    /// Every permission, in WIT order.
    pub const ALL: [Permission; 6] = [
        Permission::Timers,
        Permission::Randomness,
        Permission::Logging,
        Permission::Registration,
        Permission::SendFrames,
        Permission::PluginControl,
    ];

    /// The WIT name of the permission.
    pub fn name(self) -> &'static str {
        match self {
            Permission::Timers => "timers",
            Permission::Randomness => "randomness",
            Permission::Logging => "logging",
            Permission::Registration => "registration",
            Permission::SendFrames => "send-frames",
            Permission::PluginControl => "plugin-control",
        }
    }

    /// Parse a WIT permission name.
    pub fn from_name(name: &str) -> Option<Permission> {
        Permission::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The permission's identifier in the codepoint registry.
    pub fn id(self) -> u32 {
        self as u32
    }

    /// The permission with registry identifier `id`, if this host knows it.
    pub fn from_id(id: u32) -> Option<Permission> {
        Permission::ALL.into_iter().find(|p| p.id() == id)
    }
}

impl LogLevel {
    /// The WIT name of the level.
    pub fn name(self) -> &'static str {
        match self {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Trace => "trace",
        }
    }
}

impl Anchor {
    /// Every anchor, in WIT order.
    pub const ALL: [Anchor; 3] = [Anchor::Define, Anchor::Before, Anchor::After];

    /// The WIT name of the anchor.
    pub fn name(self) -> &'static str {
        match self {
            Anchor::Define => "define",
            Anchor::Before => "before",
            Anchor::After => "after",
        }
    }
}

impl Frame {
    /// The frame's type on the wire (the first type of its family: ACK is
    /// 0x02, or 0x03 when it carries ECN counts; STREAM is 0x08).
    pub fn frame_type(&self) -> u64 {
        match self {
            Frame::Padding(_) => 0x00,
            Frame::Ping => 0x01,
            Frame::Ack(a) if a.ecn.is_some() => 0x03,
            Frame::Ack(_) => 0x02,
            Frame::ResetStream(_) => 0x04,
            Frame::StopSending(_) => 0x05,
            Frame::Crypto(_) => 0x06,
            Frame::NewToken(_) => 0x07,
            Frame::Stream(_) => 0x08,
            Frame::MaxData(_) => 0x10,
            Frame::MaxStreamData(_) => 0x11,
            Frame::MaxStreams(s) if s.bidirectional => 0x12,
            Frame::MaxStreams(_) => 0x13,
            Frame::DataBlocked(_) => 0x14,
            Frame::StreamDataBlocked(_) => 0x15,
            Frame::StreamsBlocked(s) if s.bidirectional => 0x16,
            Frame::StreamsBlocked(_) => 0x17,
            Frame::NewConnectionId(_) => 0x18,
            Frame::RetireConnectionId(_) => 0x19,
            Frame::PathChallenge(_) => 0x1a,
            Frame::PathResponse(_) => 0x1b,
            Frame::ConnectionClose(c) if c.application => 0x1d,
            Frame::ConnectionClose(_) => 0x1c,
            Frame::HandshakeDone => 0x1e,
            Frame::Datagram(_) => 0x30,
            Frame::Extension(e) => e.frame_type,
        }
    }
}

/// Whether RFC 9000 (or RFC 9221) defines this frame type, i.e. the stack
/// parses it itself and plugins may only observe it.
pub fn is_standard_frame_type(ty: u64) -> bool {
    ty <= 0x1e || ty == 0x30 || ty == 0x31
}

/// Whether a plugin built for `plugin` can run on a host implementing `host`
/// (same major; while major is 0, same minor and plugin patch ≤ host patch;
/// from 1.0, plugin (minor, patch) ≤ host (minor, patch)).
pub fn abi_compatible(plugin: &str, host: &str) -> bool {
    // Three decimal numbers: digits only, no sign, no white space, no
    // leading zeros (CQ-VER-5, CQ-VER-6).
    fn number(part: &str) -> Option<u64> {
        let digits = !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
        let leading_zero = part.len() > 1 && part.starts_with('0');
        (digits && !leading_zero).then(|| part.parse().ok())?
    }
    fn parse(v: &str) -> Option<(u64, u64, u64)> {
        let mut it = v.split('.');
        let version = (
            number(it.next()?)?,
            number(it.next()?)?,
            number(it.next()?)?,
        );
        it.next().is_none().then_some(version)
    }
    match (parse(plugin), parse(host)) {
        (Some((pm, pn, pp)), Some((hm, hn, hp))) => {
            pm == hm
                && (if pm == 0 {
                    pn == hn && pp <= hp
                } else {
                    (pn, pp) <= (hn, hp)
                })
        }
        _ => false,
    }
}

/// A `duration` field value (nanoseconds, saturating): what every host
/// reports for its RTT and timeout fields.
impl From<std::time::Duration> for PluginVal {
    fn from(d: std::time::Duration) -> Self {
        PluginVal::Duration(d.as_nanos().min(u128::from(u64::MAX)) as u64)
    }
}

/// A `socket-addr` field value: what every host reports for its addresses.
impl From<std::net::SocketAddr> for PluginVal {
    fn from(addr: std::net::SocketAddr) -> Self {
        let ip = match addr.ip() {
            std::net::IpAddr::V4(v4) => {
                let o = v4.octets();
                IpAddr::V4((o[0], o[1], o[2], o[3]))
            }
            std::net::IpAddr::V6(v6) => {
                let s = v6.segments();
                IpAddr::V6((s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]))
            }
        };
        PluginVal::SocketAddr(SocketAddr {
            ip,
            port: addr.port(),
        })
    }
}

/// A `socket-addr` value as the standard library's address.
impl From<SocketAddr> for std::net::SocketAddr {
    fn from(addr: SocketAddr) -> Self {
        let ip = match addr.ip {
            IpAddr::V4((a, b, c, d)) => std::net::IpAddr::from([a, b, c, d]),
            IpAddr::V6((a, b, c, d, e, f, g, h)) => {
                std::net::IpAddr::from([a, b, c, d, e, f, g, h])
            }
        };
        std::net::SocketAddr::new(ip, addr.port)
    }
}
