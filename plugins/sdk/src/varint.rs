//! QUIC variable-length integers (RFC 9000 section 16).

use alloc::vec::Vec;

/// Bytes needed to encode `v` (1, 2, 4 or 8), or `None` above 2^62 - 1.
pub fn len(v: u64) -> Option<usize> {
    match v {
        0..=63 => Some(1),
        64..=16_383 => Some(2),
        16_384..=1_073_741_823 => Some(4),
        1_073_741_824..=4_611_686_018_427_387_903 => Some(8),
        _ => None,
    }
}

/// Append `v` to `out`; `false` (nothing written) above 2^62 - 1.
pub fn encode(v: u64, out: &mut Vec<u8>) -> bool {
    match len(v) {
        Some(1) => out.push(v as u8),
        Some(2) => out.extend_from_slice(&(0x4000 | v as u16).to_be_bytes()),
        Some(4) => out.extend_from_slice(&(0x8000_0000 | v as u32).to_be_bytes()),
        Some(_) => out.extend_from_slice(&(0xc000_0000_0000_0000 | v).to_be_bytes()),
        None => return false,
    }
    true
}

/// Decode a varint at the start of `buf`: the value and its length.
pub fn decode(buf: &[u8]) -> Option<(u64, usize)> {
    let first = *buf.first()?;
    let n = 1usize << (first >> 6);
    let bytes = buf.get(..n)?;
    let mut v = u64::from(first & 0x3f);
    for b in &bytes[1..] {
        v = (v << 8) | u64::from(*b);
    }
    Some((v, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_rfc_examples() {
        // RFC 9000 appendix A.1 examples.
        for (bytes, value) in [
            (
                &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c][..],
                151_288_809_941_952_652u64,
            ),
            (&[0x9d, 0x7f, 0x3e, 0x7d][..], 494_878_333),
            (&[0x7b, 0xbd][..], 15_293),
            (&[0x25][..], 37),
        ] {
            assert_eq!(decode(bytes), Some((value, bytes.len())));
            let mut out = Vec::new();
            assert!(encode(value, &mut out));
            assert_eq!(out, bytes);
        }
        assert_eq!(decode(&[0x40]), None);
        assert!(!encode(1 << 62, &mut Vec::new()));
    }
}
