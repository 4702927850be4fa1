//! Connection fields, by their identifiers in the codepoint registry
//! (`spec/registry.toml`, kind `field`). A release of the ABI adds
//! identifiers; it never changes or reuses one.

use crate::FieldId;

/// `is-server`: bool, read-only: this endpoint is the server. Since 0.2.0.
pub const IS_SERVER: FieldId = 1;

/// `version`: u32, read-only: the negotiated QUIC version. Since 0.2.0.
pub const VERSION: FieldId = 2;

/// `is-established`: bool, read-only: the handshake is complete. Since 0.2.0.
pub const IS_ESTABLISHED: FieldId = 3;

/// `max-tx-data`: u64 bytes, read-write: the connection-level send limit granted by the peer (MAX_DATA). Since 0.2.0.
pub const MAX_TX_DATA: FieldId = 4;

/// `tx-data`: u64 bytes, read-only: stream bytes sent so far. Since 0.2.0.
pub const TX_DATA: FieldId = 5;

/// `max-rx-data`: u64 bytes, read-write: the connection-level receive limit granted to the peer. Since 0.2.0.
pub const MAX_RX_DATA: FieldId = 6;

/// `rx-data`: u64 bytes, read-only: stream bytes received so far. Since 0.2.0.
pub const RX_DATA: FieldId = 7;

/// `max-send-udp-payload`: u64 bytes, read-only: the largest UDP payload the path allows sending. Since 0.2.0.
pub const MAX_SEND_UDP_PAYLOAD: FieldId = 8;

/// `local-address`: socket-addr, read-only. Since 0.2.0.
pub const LOCAL_ADDRESS: FieldId = 9;

/// `peer-address`: socket-addr, read-only. Since 0.2.0.
pub const PEER_ADDRESS: FieldId = 10;

/// `idle-timeout`: duration, read-only: the negotiated idle timeout (0 = none). Since 0.2.0.
pub const IDLE_TIMEOUT: FieldId = 11;

/// `sending-halted`: bool, read-write: while true the host sends no packets. Since 0.2.0.
pub const SENDING_HALTED: FieldId = 12;

/// `next-packet-number`: u64, read-only, per space: the next packet number to send. Since 0.2.0.
pub const NEXT_PACKET_NUMBER: FieldId = 13;

/// `largest-acked`: u64 or none, read-only, per space: the largest packet number acknowledged by the peer. Since 0.2.0.
pub const LARGEST_ACKED: FieldId = 14;

/// `largest-received`: u64 or none, read-only, per space: the largest packet number received. Since 0.2.0.
pub const LARGEST_RECEIVED: FieldId = 15;

/// `latest-rtt`: duration, read-only. Since 0.2.0.
pub const LATEST_RTT: FieldId = 16;

/// `smoothed-rtt`: duration, read-only. Since 0.2.0.
pub const SMOOTHED_RTT: FieldId = 17;

/// `min-rtt`: duration, read-only. Since 0.2.0.
pub const MIN_RTT: FieldId = 18;

/// `rttvar`: duration, read-only. Since 0.2.0.
pub const RTTVAR: FieldId = 19;

/// `max-ack-delay`: duration, read-only: the peer's max_ack_delay. Since 0.2.0.
pub const MAX_ACK_DELAY: FieldId = 20;

/// `pto-count`: u32, read-only. Since 0.2.0.
pub const PTO_COUNT: FieldId = 21;

/// `bytes-in-flight`: u64 bytes, read-only. Since 0.2.0.
pub const BYTES_IN_FLIGHT: FieldId = 22;

/// `congestion-window`: u64 bytes, read-write. Since 0.2.0.
pub const CONGESTION_WINDOW: FieldId = 23;

/// `ssthresh`: u64 bytes or none (infinite), read-write. Since 0.2.0.
pub const SSTHRESH: FieldId = 24;

/// `max-datagram-size`: u64 bytes, read-only. Since 0.2.0.
pub const MAX_DATAGRAM_SIZE: FieldId = 25;

/// `source-connection-id`: bytes, read-only: the Source Connection ID this endpoint chose in the handshake (its initial_source_connection_id). Since 0.2.1.
pub const SOURCE_CONNECTION_ID: FieldId = 26;

/// `destination-connection-id`: bytes, read-only: the Destination Connection ID this endpoint puts in the packets it sends on the current path. Since 0.2.1.
pub const DESTINATION_CONNECTION_ID: FieldId = 27;

/// `amplification-budget`: u64 bytes or none, read-only: what this endpoint may still send before the peer's address is validated (RFC 9000 §8.1); none once it is, and on a client. Since 0.2.1.
pub const AMPLIFICATION_BUDGET: FieldId = 28;

/// `ecn-ect0-count`: u64 or none, read-only, per space: packets received with ECT(0), as reported in ACK frames (RFC 9000 §13.4.1); none if the endpoint does not count ECN codepoints. Since 0.2.1.
pub const ECN_ECT0_COUNT: FieldId = 29;

/// `ecn-ect1-count`: u64 or none, read-only, per space: packets received with ECT(1). Since 0.2.1.
pub const ECN_ECT1_COUNT: FieldId = 30;

/// `ecn-ce-count`: u64 or none, read-only, per space: packets received with ECN-CE. Since 0.2.1.
pub const ECN_CE_COUNT: FieldId = 31;

/// `peer-idle-timeout`: duration, read-only: the peer's max_idle_timeout (0 = none). Since 0.2.1.
pub const PEER_IDLE_TIMEOUT: FieldId = 32;

/// `peer-max-udp-payload-size`: u64 bytes, read-only: the peer's max_udp_payload_size. Since 0.2.1.
pub const PEER_MAX_UDP_PAYLOAD_SIZE: FieldId = 33;

/// `peer-ack-delay-exponent`: u64, read-only: the peer's ack_delay_exponent. Since 0.2.1.
pub const PEER_ACK_DELAY_EXPONENT: FieldId = 34;

/// `peer-active-connection-id-limit`: u64, read-only: the peer's active_connection_id_limit. Since 0.2.1.
pub const PEER_ACTIVE_CONNECTION_ID_LIMIT: FieldId = 35;

/// `local-max-ack-delay`: duration, read-only: this endpoint's own max_ack_delay. Since 0.2.1.
pub const LOCAL_MAX_ACK_DELAY: FieldId = 36;

/// Every field of ABI 0.2.4 (the last fields came with 0.2.1), in identifier
/// order.
pub const ALL: [FieldId; 36] = [
    IS_SERVER,
    VERSION,
    IS_ESTABLISHED,
    MAX_TX_DATA,
    TX_DATA,
    MAX_RX_DATA,
    RX_DATA,
    MAX_SEND_UDP_PAYLOAD,
    LOCAL_ADDRESS,
    PEER_ADDRESS,
    IDLE_TIMEOUT,
    SENDING_HALTED,
    NEXT_PACKET_NUMBER,
    LARGEST_ACKED,
    LARGEST_RECEIVED,
    LATEST_RTT,
    SMOOTHED_RTT,
    MIN_RTT,
    RTTVAR,
    MAX_ACK_DELAY,
    PTO_COUNT,
    BYTES_IN_FLIGHT,
    CONGESTION_WINDOW,
    SSTHRESH,
    MAX_DATAGRAM_SIZE,
    SOURCE_CONNECTION_ID,
    DESTINATION_CONNECTION_ID,
    AMPLIFICATION_BUDGET,
    ECN_ECT0_COUNT,
    ECN_ECT1_COUNT,
    ECN_CE_COUNT,
    PEER_IDLE_TIMEOUT,
    PEER_MAX_UDP_PAYLOAD_SIZE,
    PEER_ACK_DELAY_EXPONENT,
    PEER_ACTIVE_CONNECTION_ID_LIMIT,
    LOCAL_MAX_ACK_DELAY,
];
