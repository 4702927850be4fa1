//! `observe-frames` (ABI 0.2.3): when the host delivers the observation
//! records it queues (CQ-ROUTINE-25, CQ-ROUTINE-26), shown with the ACK
//! logger, which observes ACK frames in batches. The conformance kit checks
//! the records' contents and their order against `process-frame` through
//! every host (`routines.observe-frames-delivers-every-frame-in-order`).

mod common;

use common::*;
use corequic_mock::MockEndpoint;
use corequic_runtime::abi::{AckFrame, Anchor, Frame, PacketType, PluginVal, PnSpace, RxContext};

const MAX_BATCH: u64 = corequic_runtime::config::MAX_OBSERVATION_BATCH as u64;
const DELAY: u64 = corequic_runtime::config::MAX_OBSERVATION_DELAY_NS;

fn ack(largest: u64, ecn: bool) -> Frame {
    Frame::Ack(AckFrame {
        largest_acknowledged: largest,
        ack_delay: 25_000,
        ranges: vec![(largest.saturating_sub(3), largest)],
        ecn: ecn.then_some(corequic_runtime::abi::EcnCounts {
            ect0: 1,
            ect1: 0,
            ce: 0,
        }),
    })
}

fn ctx(packet_number: u64, now: u64) -> RxContext {
    RxContext {
        packet_type: PacketType::OneRtt,
        space: PnSpace::ApplicationData,
        packet_number,
        now,
    }
}

/// The client of a pair with the ACK logger, past the handshake, with
/// every record of the handshake's ACKs delivered.
fn logger() -> corequic_mock::MockPair {
    let mut p = pair(&["ack-logger"], &[]);
    p.handshake();
    let c = &mut p.client;
    c.plugins.deliver_observations(&mut c.conn);
    p
}

/// The packet numbers of the ACK logger's records, in order.
fn logged(c: &MockEndpoint) -> Vec<u64> {
    c.conn
        .logs_of("ack-logger")
        .iter()
        .filter(|r| r.message == "ack processed")
        .filter_map(|r| match r.fields.get(3) {
            Some((_, PluginVal::U64(pn))) => Some(*pn),
            _ => None,
        })
        .collect()
}

fn calls(c: &MockEndpoint) -> u64 {
    c.plugins.stats()[0].calls
}

#[test]
fn a_record_waits_at_most_ten_milliseconds() {
    let mut p = logger();
    let c = &mut p.client;
    let (before, calls_before) = (logged(c).len(), calls(c));
    let t0 = c.conn.now + 1_000 * MS;
    for i in 0..3 {
        c.plugins.observe_frame(
            &mut c.conn,
            Anchor::After,
            &ack(i, false),
            ctx(1_000 + i, t0 + i * MS),
        );
    }
    assert_eq!(logged(c).len(), before, "queued, not delivered");
    assert_eq!(
        c.plugins.next_timeout(),
        Some(t0 + DELAY),
        "due 10 ms after the first"
    );
    assert_eq!(c.plugins.summary_reader().next_timeout(), Some(t0 + DELAY));
    c.plugins.handle_timeout(&mut c.conn, t0 + DELAY - 1);
    assert_eq!(logged(c).len(), before, "not due yet");
    c.plugins.handle_timeout(&mut c.conn, t0 + DELAY);
    assert_eq!(logged(c)[before..], [1_000, 1_001, 1_002]);
    assert_eq!(calls(c), calls_before + 1, "in one call");
    assert_eq!(c.plugins.next_timeout(), None, "nothing is due any more");
}

#[test]
fn a_batch_holds_one_frame_type() {
    let mut p = logger();
    let c = &mut p.client;
    let (before, calls_before) = (logged(c).len(), calls(c));
    let now = c.conn.now;
    c.plugins
        .observe_frame(&mut c.conn, Anchor::After, &ack(1, false), ctx(10, now));
    c.plugins
        .observe_frame(&mut c.conn, Anchor::After, &ack(2, false), ctx(11, now));
    assert_eq!(logged(c).len(), before);
    // An ACK with ECN counts (0x03) delivers the batch of 0x02 first.
    c.plugins
        .observe_frame(&mut c.conn, Anchor::After, &ack(3, true), ctx(12, now));
    assert_eq!(logged(c)[before..], [10, 11]);
    c.plugins.deliver_observations(&mut c.conn);
    assert_eq!(logged(c)[before..], [10, 11, 12]);
    assert_eq!(calls(c), calls_before + 2);
}

#[test]
fn a_batch_holds_at_most_64_records() {
    let mut p = logger();
    let c = &mut p.client;
    let (before, calls_before) = (logged(c).len(), calls(c));
    let now = c.conn.now;
    let offered = 2 * MAX_BATCH + 2;
    for pn in 0..offered {
        c.plugins
            .observe_frame(&mut c.conn, Anchor::After, &ack(pn, false), ctx(pn, now));
    }
    assert_eq!(logged(c).len() - before, 2 * MAX_BATCH as usize);
    assert_eq!(calls(c), calls_before + 2);
    c.plugins.deliver_observations(&mut c.conn);
    assert_eq!(logged(c)[before..], (0..offered).collect::<Vec<_>>()[..]);
    assert_eq!(calls(c), calls_before + 3);
    // Nothing is left to deliver.
    c.plugins.deliver_observations(&mut c.conn);
    assert_eq!(calls(c), calls_before + 3);
}

#[test]
fn before_observers_queue_nothing() {
    let mut p = logger();
    let c = &mut p.client;
    let before = logged(c).len();
    let now = c.conn.now;
    c.plugins
        .observe_frame(&mut c.conn, Anchor::Before, &ack(1, false), ctx(5, now));
    assert_eq!(c.plugins.next_timeout(), None);
    c.plugins.deliver_observations(&mut c.conn);
    assert_eq!(logged(c).len(), before);
}
