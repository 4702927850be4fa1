//! The ABI types, generated from `wit/` by wasmtime's `bindgen!`, and small
//! helpers over them.
//!
//! Hosts convert their own representations to and from these types; they are
//! the single Rust rendering of the WIT package.

#[allow(missing_docs, clippy::all)]
mod generated {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "plugin",
        additional_derives: [PartialEq],
        with: {
            "core-quic:plugin/host.out-buf": crate::state::OutBufRep,
            "core-quic:plugin/host.in-buf": crate::state::InBufRep,
        },
    });
}

pub(crate) use generated::Plugin as Bindings;
pub(crate) use generated::PluginPre as BindingsPre;
pub(crate) use generated::core_quic::plugin::host as host_api;
pub(crate) use generated::core_quic::plugin::types as generated_types_host;

pub use generated::core_quic::plugin::types::{
    AckFrame, Anchor, Binding, ConnectionCloseFrame, CryptoFrame, EcnCounts, Error, ExtFrame,
    FieldId, FieldRef, Frame, FrameOutcome, FrameRegistration, IpAddr, LogLevel,
    MaxStreamDataFrame, NewConnectionIdFrame, PacketType, ParsedFrame, Permission, PluginManifest,
    PluginVal, PnSpace, ResetStreamFrame, Routine, RxContext, SendContext, SendPosition,
    SocketAddr, StopSendingFrame, StreamDataBlockedFrame, StreamFrame, StreamsFrame,
};

/// The version of the WIT package this runtime implements.
pub const ABI_VERSION: &str = "0.1.0";

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

impl Eq for ExtFrame {}

impl FieldId {
    /// Every field of the ABI, in WIT order.
    pub const ALL: [FieldId; 25] = [
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
    ];

    /// Whether a reference to this field must name a packet-number space.
    pub fn per_space(self) -> bool {
        matches!(
            self,
            FieldId::NextPacketNumber | FieldId::LargestAcked | FieldId::LargestReceived
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
        }
    }

    /// Parse a WIT field name.
    pub fn from_name(name: &str) -> Option<FieldId> {
        FieldId::ALL.into_iter().find(|f| f.name() == name)
    }
}

impl Routine {
    /// Every routine that takes bindings, in WIT order.
    pub const ALL: [Routine; 12] = [
        Routine::WriteTransportParameter,
        Routine::DecodeTransportParameter,
        Routine::ShouldSendFrame,
        Routine::PrepareFrame,
        Routine::FrameWireLen,
        Routine::WriteFrame,
        Routine::OnFrameReserved,
        Routine::NotifyFrame,
        Routine::ParseFrame,
        Routine::ProcessFrame,
        Routine::LogFrame,
        Routine::PluginControl,
    ];

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
