//! Frames observed in batches: the routine `observe-frames` (ABI 0.2.3).
//!
//! A plugin that binds `observe-frames` AFTER for a frame type gets the
//! frames of that type the connection processed as *observation records*,
//! up to 64 in one call (specification CQ-ROUTINE-25 to CQ-ROUTINE-27):
//! where `process-frame` AFTER enters the plugin once per frame, this
//! enters it once per batch. The host reaches it through `call-routine`;
//! the SDK's default [`crate::Plugin::call_routine`] decodes the records and
//! calls [`crate::Plugin::observe_frames`].

use crate::{Error, Frame, PacketType, PnSpace, Result, RxContext};
use alloc::vec::Vec;

/// Words before a record's values: frame type, packet type, space, packet
/// number, now, value count and data length (CQ-ROUTINE-27).
const HEADER_WORDS: usize = 7;

/// The observation records of one `observe-frames` call, as the host encoded
/// them (CQ-ROUTINE-27).
pub struct ObservedFrames<'a> {
    records: &'a [u8],
}

impl<'a> ObservedFrames<'a> {
    /// The records in `records`, which are checked as they are read.
    pub fn new(records: &'a [u8]) -> Self {
        ObservedFrames { records }
    }

    /// Calls `f` with each frame and the packet it came in, in the order the
    /// host processed them. One [`Frame`] is reused for every record, so a
    /// batch allocates once. Stops at the first error `f` returns, and
    /// returns `invalid-argument` at a record that is malformed, after the
    /// records before it.
    pub fn for_each(&self, mut f: impl FnMut(&Frame, RxContext) -> Result<()>) -> Result<()> {
        let mut frame = Frame {
            frame_type: 0,
            values: Vec::new(),
            data: Vec::new(),
        };
        let mut at = 0;
        while at < self.records.len() {
            let ctx = self.read_record(&mut at, &mut frame)?;
            f(&frame, ctx)?;
        }
        Ok(())
    }

    /// The number of records, or `invalid-argument` if one is malformed.
    pub fn count(&self) -> Result<usize> {
        let mut n = 0;
        self.for_each(|_, _| {
            n += 1;
            Ok(())
        })?;
        Ok(n)
    }

    /// Reads the record at byte `*at` into `frame`, moves `*at` past it and
    /// returns its packet's context.
    fn read_record(&self, at: &mut usize, frame: &mut Frame) -> Result<RxContext> {
        let mut header = [0u64; HEADER_WORDS];
        for word in &mut header {
            *word = self.word(at)?;
        }
        let [
            frame_type,
            packet_type,
            space,
            packet_number,
            now,
            values,
            data,
        ] = header;
        let packet_type = packet_type_at(packet_type).ok_or_else(malformed)?;
        let space = space_at(space).ok_or_else(malformed)?;
        let values = usize::try_from(values).map_err(|_| malformed())?;
        let data = usize::try_from(data).map_err(|_| malformed())?;
        // Both counts are checked against what is left before anything is
        // reserved, so a lying count cannot make the plugin allocate.
        let left = self.records.len() - *at;
        if values > left / 8 || data > left - values * 8 {
            return Err(malformed());
        }
        frame.frame_type = frame_type;
        frame.values.clear();
        for _ in 0..values {
            let value = self.word(at)?;
            frame.values.push(value);
        }
        frame.data.clear();
        frame.data.extend_from_slice(&self.records[*at..*at + data]);
        // The data is padded to a multiple of 8 bytes.
        *at = (*at + data).next_multiple_of(8).min(self.records.len());
        Ok(RxContext {
            packet_type,
            space,
            packet_number,
            now,
        })
    }

    /// The little-endian word at byte `*at`, moving `*at` past it.
    fn word(&self, at: &mut usize) -> Result<u64> {
        let bytes = self.records.get(*at..*at + 8).ok_or_else(malformed)?;
        *at += 8;
        let mut word = [0u8; 8];
        word.copy_from_slice(bytes);
        Ok(u64::from_le_bytes(word))
    }
}

fn malformed() -> Error {
    Error::invalid_argument("malformed observation record")
}

/// The packet type of index `i` of the WIT enum `packet-type`.
fn packet_type_at(i: u64) -> Option<PacketType> {
    Some(match i {
        0 => PacketType::Initial,
        1 => PacketType::ZeroRtt,
        2 => PacketType::Handshake,
        3 => PacketType::OneRtt,
        4 => PacketType::Retry,
        5 => PacketType::VersionNegotiation,
        _ => return None,
    })
}

/// The space of index `i` of the WIT enum `pn-space`.
fn space_at(i: u64) -> Option<PnSpace> {
    Some(match i {
        0 => PnSpace::Initial,
        1 => PnSpace::Handshake,
        2 => PnSpace::ApplicationData,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    /// A record as CQ-ROUTINE-27 lays it out.
    fn record(out: &mut Vec<u8>, frame_type: u64, pn: u64, values: &[u64], data: &[u8]) {
        for w in [
            frame_type,
            3,
            2,
            pn,
            1000 + pn,
            values.len() as u64,
            data.len() as u64,
        ]
        .iter()
        .chain(values)
        {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.extend_from_slice(data);
        out.resize(out.len().next_multiple_of(8), 0);
    }

    /// A record read back: frame type, values, data, packet number, now.
    type Read = (u64, Vec<u64>, Vec<u8>, u64, u64);

    fn read(records: &[u8]) -> Result<Vec<Read>> {
        let mut seen = Vec::new();
        ObservedFrames::new(records).for_each(|f, ctx| {
            assert_eq!(ctx.packet_type, PacketType::OneRtt);
            assert_eq!(ctx.space, PnSpace::ApplicationData);
            seen.push((
                f.frame_type,
                f.values.clone(),
                f.data.clone(),
                ctx.packet_number,
                ctx.now,
            ));
            Ok(())
        })?;
        Ok(seen)
    }

    #[test]
    fn records_are_read_in_order_with_their_values_and_data() {
        let mut bytes = Vec::new();
        record(&mut bytes, 0x02, 7, &[10, 25_000, 3], &[]);
        record(&mut bytes, 0x07, 8, &[], b"token");
        record(&mut bytes, 0x02, 9, &[12, 0, 1, 2, 3], &[]);
        assert_eq!(
            read(&bytes).unwrap(),
            vec![
                (0x02, vec![10, 25_000, 3], vec![], 7, 1007),
                (0x07, vec![], b"token".to_vec(), 8, 1008),
                (0x02, vec![12, 0, 1, 2, 3], vec![], 9, 1009),
            ]
        );
        assert_eq!(ObservedFrames::new(&bytes).count().unwrap(), 3);
        assert_eq!(ObservedFrames::new(&[]).count().unwrap(), 0);
    }

    #[test]
    fn malformed_records_are_invalid_arguments_and_never_panic() {
        let mut good = Vec::new();
        record(&mut good, 0x02, 7, &[10, 25_000, 3], b"xyz");
        // Every truncation of a record.
        for cut in 1..good.len() - 5 {
            let err = read(&good[..cut]).unwrap_err();
            assert_eq!(
                err.kind,
                crate::error_kind::INVALID_ARGUMENT,
                "cut at {cut}"
            );
        }
        // Counts that lie, and enum indices out of range.
        for (word, value) in [
            (5, u64::MAX),
            (5, 4),
            (6, u64::MAX),
            (6, 1 << 40),
            (1, 6),
            (2, 3),
        ] {
            let mut bad = good.clone();
            bad[word * 8..word * 8 + 8].copy_from_slice(&value.to_le_bytes());
            let err = read(&bad).unwrap_err();
            assert_eq!(
                err.kind,
                crate::error_kind::INVALID_ARGUMENT,
                "word {word} = {value}"
            );
        }
    }

    #[test]
    fn an_error_of_the_callback_stops_the_walk() {
        let mut bytes = Vec::new();
        record(&mut bytes, 0x02, 1, &[1, 0, 0], &[]);
        record(&mut bytes, 0x02, 2, &[2, 0, 0], &[]);
        let mut calls = 0;
        let r = ObservedFrames::new(&bytes).for_each(|_, _| {
            calls += 1;
            Err(Error::plugin(9))
        });
        assert_eq!(r.unwrap_err().value, 9);
        assert_eq!(calls, 1);
    }
}
