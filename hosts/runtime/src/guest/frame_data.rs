//! Frames as data (specification §9.6): how ABI 0.2 carries a frame as its
//! type, a list of integers and a list of bytes, and how the host's model
//! of frames ([`abi::Frame`]) maps to that layout and back.

use crate::abi::{
    self, AckFrame, ConnectionCloseFrame, CryptoFrame, EcnCounts, ExtFrame, MaxStreamDataFrame,
    NewConnectionIdFrame, ResetStreamFrame, StopSendingFrame, StreamDataBlockedFrame, StreamFrame,
    StreamsFrame,
};

/// The length of a NEW_CONNECTION_ID frame's stateless reset token.
const RESET_TOKEN_LEN: usize = 16;

/// A frame in the layout of §9.6: `(frame-type, values, data)`.
pub(crate) type FrameData = (u64, Vec<u64>, Vec<u8>);

/// The frame as data.
pub(crate) fn to_data(frame: abi::Frame) -> FrameData {
    let (mut values, mut data) = (Vec::new(), Vec::new());
    let ty = write_data(&frame, &mut values, &mut data);
    (ty, values, data)
}

/// Lay `frame` out into `values` and `data` (cleared first) and return its
/// frame type: with buffers kept from call to call, lending a frame to a
/// routine allocates nothing.
pub(crate) fn write_data(frame: &abi::Frame, values: &mut Vec<u64>, data: &mut Vec<u8>) -> u64 {
    use abi::Frame as F;
    values.clear();
    data.clear();
    match frame {
        F::Padding(n) | F::MaxData(n) | F::DataBlocked(n) | F::RetireConnectionId(n) => {
            values.push(*n)
        }
        F::PathChallenge(d) | F::PathResponse(d) | F::Datagram(d) => values.push(*d),
        F::Ping | F::HandshakeDone => {}
        F::Ack(a) => {
            values.extend([a.largest_acknowledged, a.ack_delay]);
            if let Some(e) = a.ecn {
                values.extend([e.ect0, e.ect1, e.ce]);
            }
            values.extend(a.ranges.iter().flat_map(|&(s, l)| [s, l]));
        }
        F::ResetStream(f) => values.extend([f.stream_id, f.error_code, f.final_size]),
        F::StopSending(f) => values.extend([f.stream_id, f.error_code]),
        F::Crypto(f) => values.extend([f.offset, f.length]),
        F::NewToken(token) => data.extend_from_slice(token),
        F::Stream(f) => values.extend([f.stream_id, f.offset, f.length, u64::from(f.fin)]),
        F::MaxStreamData(f) => values.extend([f.stream_id, f.maximum]),
        F::MaxStreams(f) | F::StreamsBlocked(f) => values.push(f.maximum),
        F::StreamDataBlocked(f) => values.extend([f.stream_id, f.limit]),
        F::NewConnectionId(f) => {
            values.extend([f.sequence, f.retire_prior_to]);
            data.extend_from_slice(&f.connection_id);
            data.extend_from_slice(&f.stateless_reset_token);
        }
        F::ConnectionClose(f) => {
            values.push(f.error_code);
            if !f.application {
                values.push(f.frame_type.unwrap_or(0));
            }
            data.extend_from_slice(&f.reason);
        }
        F::Extension(e) => values.push(e.tag),
    }
    frame.frame_type()
}

/// The frame that data in the layout of §9.6 describes, or why it does not
/// fit its type's layout (an `invalid-argument` for the plugin).
pub(crate) fn from_data(ty: u64, values: Vec<u64>, data: Vec<u8>) -> Result<abi::Frame, String> {
    use abi::Frame as F;
    let no_data = |frame: F| match data.is_empty() {
        true => Ok(frame),
        false => Err(format!("frame type {ty:#x} carries no bytes")),
    };
    let layout = || format!("the values do not match the layout of frame type {ty:#x}");
    match (ty, values.as_slice()) {
        (0x00, &[n]) => no_data(F::Padding(n)),
        (0x01, &[]) => no_data(F::Ping),
        (0x02 | 0x03, v) => {
            let fixed = if ty == 0x03 { 5 } else { 2 };
            // At least one range, in complete pairs, each smallest ≤ largest.
            let ranges_fit = v.len() >= fixed + 2
                && (v.len() - fixed).is_multiple_of(2)
                && v[fixed..].as_chunks::<2>().0.iter().all(|[s, l]| s <= l);
            if !ranges_fit {
                return Err(layout());
            }
            let ecn = (ty == 0x03).then(|| EcnCounts {
                ect0: v[2],
                ect1: v[3],
                ce: v[4],
            });
            let ranges = v[fixed..]
                .as_chunks::<2>()
                .0
                .iter()
                .map(|&[s, l]| (s, l))
                .collect();
            no_data(F::Ack(AckFrame {
                largest_acknowledged: v[0],
                ack_delay: v[1],
                ranges,
                ecn,
            }))
        }
        (0x04, &[stream_id, error_code, final_size]) => no_data(F::ResetStream(ResetStreamFrame {
            stream_id,
            error_code,
            final_size,
        })),
        (0x05, &[stream_id, error_code]) => no_data(F::StopSending(StopSendingFrame {
            stream_id,
            error_code,
        })),
        (0x06, &[offset, length]) => no_data(F::Crypto(CryptoFrame { offset, length })),
        (0x07, &[]) => Ok(F::NewToken(data)),
        (0x08, &[stream_id, offset, length, fin @ (0 | 1)]) => no_data(F::Stream(StreamFrame {
            stream_id,
            offset,
            length,
            fin: fin == 1,
        })),
        (0x10, &[maximum]) => no_data(F::MaxData(maximum)),
        (0x11, &[stream_id, maximum]) => {
            no_data(F::MaxStreamData(MaxStreamDataFrame { stream_id, maximum }))
        }
        (0x12 | 0x13, &[maximum]) => no_data(F::MaxStreams(StreamsFrame {
            bidirectional: ty == 0x12,
            maximum,
        })),
        (0x14, &[limit]) => no_data(F::DataBlocked(limit)),
        (0x15, &[stream_id, limit]) => no_data(F::StreamDataBlocked(StreamDataBlockedFrame {
            stream_id,
            limit,
        })),
        (0x16 | 0x17, &[maximum]) => no_data(F::StreamsBlocked(StreamsFrame {
            bidirectional: ty == 0x16,
            maximum,
        })),
        (0x18, &[sequence, retire_prior_to]) => {
            // A connection ID of 1 to 20 bytes (RFC 9000 §19.15), then the token.
            if !(RESET_TOKEN_LEN + 1..=RESET_TOKEN_LEN + 20).contains(&data.len()) {
                return Err(format!(
                    "a NEW_CONNECTION_ID frame's bytes are a connection ID of 1 to 20 bytes and a {RESET_TOKEN_LEN}-byte token"
                ));
            }
            let mut connection_id = data;
            let stateless_reset_token =
                connection_id.split_off(connection_id.len() - RESET_TOKEN_LEN);
            Ok(F::NewConnectionId(NewConnectionIdFrame {
                sequence,
                retire_prior_to,
                connection_id,
                stateless_reset_token,
            }))
        }
        (0x19, &[sequence]) => no_data(F::RetireConnectionId(sequence)),
        (0x1a, &[d]) => no_data(F::PathChallenge(d)),
        (0x1b, &[d]) => no_data(F::PathResponse(d)),
        (0x1c, &[error_code, frame_type]) => Ok(F::ConnectionClose(ConnectionCloseFrame {
            application: false,
            error_code,
            frame_type: Some(frame_type),
            reason: data,
        })),
        (0x1d, &[error_code]) => Ok(F::ConnectionClose(ConnectionCloseFrame {
            application: true,
            error_code,
            frame_type: None,
            reason: data,
        })),
        (0x1e, &[]) => no_data(F::HandshakeDone),
        (0x30 | 0x31, &[length]) => no_data(F::Datagram(length)),
        (ty, &[tag]) if !abi::is_standard_frame_type(ty) => no_data(F::Extension(ExtFrame {
            frame_type: ty,
            tag,
        })),
        _ => Err(layout()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use abi::Frame as F;

    fn every_kind() -> Vec<F> {
        vec![
            F::Padding(7),
            F::Ping,
            F::Ack(AckFrame {
                largest_acknowledged: 10,
                ack_delay: 25_000,
                ranges: vec![(8, 10), (1, 5)],
                ecn: None,
            }),
            F::Ack(AckFrame {
                largest_acknowledged: 3,
                ack_delay: 0,
                ranges: vec![(0, 3)],
                ecn: Some(EcnCounts {
                    ect0: 1,
                    ect1: 2,
                    ce: 3,
                }),
            }),
            F::ResetStream(ResetStreamFrame {
                stream_id: 4,
                error_code: 5,
                final_size: 6,
            }),
            F::StopSending(StopSendingFrame {
                stream_id: 4,
                error_code: 5,
            }),
            F::Crypto(CryptoFrame {
                offset: 1,
                length: 2,
            }),
            F::NewToken(vec![1, 2, 3]),
            F::Stream(StreamFrame {
                stream_id: 0,
                offset: 10,
                length: 20,
                fin: true,
            }),
            F::MaxData(1 << 40),
            F::MaxStreamData(MaxStreamDataFrame {
                stream_id: 8,
                maximum: 9,
            }),
            F::MaxStreams(StreamsFrame {
                bidirectional: false,
                maximum: 100,
            }),
            F::DataBlocked(11),
            F::StreamDataBlocked(StreamDataBlockedFrame {
                stream_id: 1,
                limit: 2,
            }),
            F::StreamsBlocked(StreamsFrame {
                bidirectional: true,
                maximum: 3,
            }),
            F::NewConnectionId(NewConnectionIdFrame {
                sequence: 1,
                retire_prior_to: 0,
                connection_id: vec![0xc1; 8],
                stateless_reset_token: vec![0x7e; 16],
            }),
            F::RetireConnectionId(2),
            F::PathChallenge(0x0102_0304_0506_0708),
            F::PathResponse(9),
            F::ConnectionClose(ConnectionCloseFrame {
                application: false,
                error_code: 0x0a,
                frame_type: Some(0x08),
                reason: b"bad".to_vec(),
            }),
            F::ConnectionClose(ConnectionCloseFrame {
                application: true,
                error_code: 0x4351_0001,
                frame_type: None,
                reason: Vec::new(),
            }),
            F::HandshakeDone,
            F::Datagram(1200),
            F::Extension(ExtFrame {
                frame_type: 0xbd,
                tag: 60_000,
            }),
        ]
    }

    #[test]
    fn every_frame_round_trips_through_its_layout() {
        for frame in every_kind() {
            let (ty, values, data) = to_data(frame.clone());
            assert_eq!(ty, frame.frame_type());
            assert_eq!(from_data(ty, values, data), Ok(frame));
        }
    }

    #[test]
    fn layouts_are_those_of_the_specification() {
        let (ty, values, _) = to_data(every_kind()[3].clone());
        assert_eq!((ty, values), (0x03, vec![3, 0, 1, 2, 3, 0, 3]));
        let (ty, values, data) = to_data(every_kind()[15].clone());
        assert_eq!((ty, values, data.len()), (0x18, vec![1, 0], 8 + 16));
        let (ty, values, data) = to_data(every_kind()[19].clone());
        assert_eq!(
            (ty, values, data),
            (0x1c, vec![0x0a, 0x08], b"bad".to_vec())
        );
    }

    #[test]
    fn data_that_does_not_fit_its_layout_is_refused() {
        for (ty, values, data) in [
            (0x01, vec![1], Vec::new()),
            (0x02, vec![1, 2, 3], Vec::new()),
            (0x02, vec![1, 2], Vec::new()),
            (0x02, vec![9, 0, 5, 4], Vec::new()),
            (0x18, vec![1, 0], vec![0; 16 + 21]),
            (0x03, vec![1, 2, 3, 4], Vec::new()),
            (0x08, vec![0, 0, 0, 2], Vec::new()),
            (0x10, vec![], Vec::new()),
            (0x10, vec![1], vec![0]),
            (0x18, vec![1, 0], vec![0; 16]),
            (0x1f, vec![], Vec::new()),
            (0xbd, vec![1, 2], Vec::new()),
        ] {
            assert!(
                from_data(ty, values.clone(), data).is_err(),
                "{ty:#x} {values:?}"
            );
        }
    }
}
