//! What a frame registration may put in a packet (CQ-API-6, CQ-SEND-11):
//! the frame it registered and nothing else. Without these checks a
//! registration could write a STREAM or CONNECTION_CLOSE frame in place of
//! its own and corrupt the peer's view of the connection.

/// Whether `frame_type` is a frame type that QUIC stacks process natively:
/// RFC 9000's (0x00–0x1e), RFC 9221's DATAGRAM (0x30, 0x31) and the
/// acknowledgement-frequency extension's (0x1f, 0xaf).
pub(crate) fn is_standard(frame_type: u64) -> bool {
    frame_type <= 0x1f || matches!(frame_type, 0x30 | 0x31 | 0xaf)
}

/// Whether a plugin may register `frame_type`: any type that is not
/// standard, and the standard types whose frames the runtime can check
/// completely: PADDING, PING, PATH_CHALLENGE and PATH_RESPONSE.
pub(crate) fn registrable(frame_type: u64) -> bool {
    !is_standard(frame_type) || matches!(frame_type, 0x00 | 0x01 | 0x1a | 0x1b)
}

/// The shortest varint encoding of `v` (RFC 9000 §16), `v` < 2^62.
fn varint(v: u64) -> ([u8; 8], usize) {
    let (len, tag) = match v {
        0..=0x3f => (1, 0x00),
        0x40..=0x3fff => (2, 0x40),
        0x4000..=0x3fff_ffff => (4, 0x80),
        _ => (8, 0xc0),
    };
    let mut out = [0u8; 8];
    out[..len].copy_from_slice(&v.to_be_bytes()[8 - len..]);
    out[0] |= tag;
    (out, len)
}

/// Checks the bytes a registration of `frame_type` wrote: they start with
/// the type in its shortest encoding (RFC 9000 §12.4), and a standard type
/// is exactly one well-formed frame of that type, or a run of PADDING.
/// The error says what is wrong.
pub(crate) fn check_written(frame_type: u64, bytes: &[u8]) -> Result<(), String> {
    let (prefix, n) = varint(frame_type);
    if bytes.len() < n || bytes[..n] != prefix[..n] {
        return Err(format!(
            "the bytes do not start with the registered frame type {frame_type:#x}"
        ));
    }
    let well_formed = match frame_type {
        0x00 => bytes.iter().all(|&b| b == 0),
        0x01 => bytes.len() == 1,
        0x1a | 0x1b => bytes.len() == 9,
        _ => true,
    };
    if well_formed {
        Ok(())
    } else {
        Err(format!(
            "the bytes are not one well-formed frame of type {frame_type:#x}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registered_type_must_come_first_in_its_shortest_encoding() {
        assert!(check_written(0x21, &[0x21, 7]).is_ok());
        assert!(check_written(0x42, &[0x40, 0x42, 7]).is_ok());
        assert!(check_written(0xbd, &[0x40, 0xbd, 0, 0]).is_ok());
        // A STREAM frame instead of the registered type.
        assert!(check_written(0x42, &[0x08, 0, 1]).is_err());
        // 0x21 in a two-byte encoding.
        assert!(check_written(0x21, &[0x40, 0x21]).is_err());
        assert!(check_written(0x4c59, &[]).is_err());
    }

    #[test]
    fn standard_types_must_be_well_formed() {
        assert!(check_written(0x00, &[0; 30]).is_ok());
        // PADDING followed by a CONNECTION_CLOSE.
        assert!(check_written(0x00, &[0, 0, 0x1c, 0, 0, 0]).is_err());
        assert!(check_written(0x01, &[0x01]).is_ok());
        assert!(check_written(0x01, &[0x01, 0x01]).is_err());
        assert!(check_written(0x1a, &[0x1a; 9]).is_ok());
        assert!(check_written(0x1a, &[0x1a; 10]).is_err());
    }

    #[test]
    fn only_checkable_standard_types_can_be_registered() {
        for t in [0x00, 0x01, 0x1a, 0x1b, 0x20, 0x42, 0xbd, 0x4c59] {
            assert!(registrable(t), "{t:#x}");
        }
        for t in [
            0x02, 0x06, 0x08, 0x0f, 0x10, 0x1c, 0x1d, 0x1e, 0x1f, 0x30, 0x31, 0xaf,
        ] {
            assert!(!registrable(t), "{t:#x}");
        }
    }
}
