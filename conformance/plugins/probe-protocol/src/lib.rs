//! The extension the conformance kit's probe plugins speak: cq-api-probe's
//! transport parameter and frame, which cq-observer-probe observes,
//! cq-parse-only parses and cq-tp-reject refuses. One definition, so that
//! the probes cannot drift apart.

#![no_std]

/// cq-api-probe's transport parameter.
pub const TP_PROBE: u64 = 0x6171;
/// cq-api-probe's frame type.
pub const FRAME_PROBE: u64 = 0x6172;
/// The transport parameter's value: the peer must receive exactly these.
pub const TP_VALUE: [u8; 5] = [0xc0, 0x4e, 0x51, 0x00, 0xff];
/// The frame's body after its type.
pub const FRAME_BODY: [u8; 4] = [0xde, 0xad, 0xbe, 0xef];
