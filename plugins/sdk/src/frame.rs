//! Frames as data (specification chapter 9): a [`Frame`] is its type, a
//! list of integers and a list of bytes, laid out per frame type. These
//! helpers build the frames plugins send and read the ones they observe,
//! without lifting a 22-case variant into every plugin.

use alloc::vec;
use alloc::vec::Vec;

use crate::{ExtFrame, Frame};

/// PADDING: `[length]`.
pub const PADDING: u64 = 0x00;
/// PING: `[]`.
pub const PING: u64 = 0x01;
/// ACK: `[largest-acknowledged, ack-delay, s1, l1, s2, l2, …]`.
pub const ACK: u64 = 0x02;
/// ACK with ECN counts: `[largest-acknowledged, ack-delay, ect0, ect1, ce, s1, l1, …]`.
pub const ACK_ECN: u64 = 0x03;
/// STREAM (every type 0x08–0x0f): `[stream-id, offset, length, fin]`.
pub const STREAM: u64 = 0x08;
/// MAX_DATA: `[maximum]`.
pub const MAX_DATA: u64 = 0x10;
/// PATH_CHALLENGE: `[data]` (the 8 bytes, big-endian).
pub const PATH_CHALLENGE: u64 = 0x1a;
/// PATH_RESPONSE: `[data]` (the 8 bytes, big-endian).
pub const PATH_RESPONSE: u64 = 0x1b;
/// HANDSHAKE_DONE: `[]`.
pub const HANDSHAKE_DONE: u64 = 0x1e;

impl Frame {
    /// A frame of `frame_type` with `values` and no bytes.
    pub fn new(frame_type: u64, values: Vec<u64>) -> Frame {
        Frame {
            frame_type,
            values,
            data: Vec::new(),
        }
    }

    /// PING.
    pub fn ping() -> Frame {
        Frame::new(PING, Vec::new())
    }

    /// PATH_CHALLENGE with the 8 data bytes as a big-endian integer.
    pub fn path_challenge(data: u64) -> Frame {
        Frame::new(PATH_CHALLENGE, vec![data])
    }

    /// The frame's single value, for the one-integer layouts (PADDING,
    /// MAX_DATA, PATH_CHALLENGE, PATH_RESPONSE, a plugin frame's tag, …).
    pub fn value(&self) -> Option<u64> {
        match self.values.as_slice() {
            [v] => Some(*v),
            _ => None,
        }
    }

    /// The plugin frame `[tag]` of type `frame_type`, as an [`ExtFrame`].
    pub fn ext(&self) -> Option<ExtFrame> {
        Some(ExtFrame {
            frame_type: self.frame_type,
            tag: self.value()?,
        })
    }

    /// The ACK this frame is, if it is one (0x02 or 0x03) with a valid layout.
    pub fn ack(&self) -> Option<Ack<'_>> {
        let (fixed, ecn) = match self.frame_type {
            ACK => (2, false),
            ACK_ECN => (5, true),
            _ => return None,
        };
        let v = self.values.as_slice();
        if v.len() < fixed || !(v.len() - fixed).is_multiple_of(2) {
            return None;
        }
        Some(Ack {
            largest_acknowledged: v[0],
            ack_delay: v[1],
            ecn: ecn.then(|| (v[2], v[3], v[4])),
            ranges: &v[fixed..],
        })
    }
}

/// An ACK frame read from its data.
pub struct Ack<'a> {
    /// The largest packet number acknowledged.
    pub largest_acknowledged: u64,
    /// The decoded ACK delay, in nanoseconds.
    pub ack_delay: u64,
    /// ECT(0), ECT(1) and CE counts, for 0x03.
    pub ecn: Option<(u64, u64, u64)>,
    ranges: &'a [u64],
}

impl Ack<'_> {
    /// The number of acknowledged ranges.
    pub fn range_count(&self) -> usize {
        self.ranges.len() / 2
    }

    /// The acknowledged ranges as inclusive `(smallest, largest)`, largest first.
    pub fn ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.ranges.as_chunks::<2>().0.iter().map(|[s, l]| (*s, *l))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acks_read_their_layout() {
        let plain = Frame::new(ACK, vec![10, 25_000, 8, 10, 1, 5]);
        let ack = plain.ack().expect("an ACK");
        assert_eq!((ack.largest_acknowledged, ack.ack_delay), (10, 25_000));
        assert_eq!(ack.ecn, None);
        assert_eq!(ack.ranges().collect::<Vec<_>>(), [(8, 10), (1, 5)]);
        let ecn = Frame::new(ACK_ECN, vec![3, 0, 1, 2, 3, 0, 3]);
        assert_eq!(ecn.ack().expect("an ACK_ECN").ecn, Some((1, 2, 3)));
        assert!(
            Frame::new(ACK, vec![3, 0, 1]).ack().is_none(),
            "half a range"
        );
        assert!(
            Frame::new(ACK_ECN, vec![3, 0]).ack().is_none(),
            "no ECN counts"
        );
        assert!(Frame::ping().ack().is_none());
    }

    #[test]
    fn one_value_layouts() {
        assert_eq!(Frame::path_challenge(7).value(), Some(7));
        assert_eq!(Frame::ping().value(), None);
        let ext = Frame::new(0x42, vec![9]).ext().expect("a plugin frame");
        assert_eq!((ext.frame_type, ext.tag), (0x42, 9));
    }
}
