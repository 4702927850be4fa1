//! The fused frame routines of ABI 0.2.4, `send-frame` and
//! `receive-frame`: the host calls them in place of the separate routines
//! when no plugin observes those (CQ-ROUTINE-29, CQ-ROUTINE-30), and the
//! separate ones when a plugin does. The conformance kit checks the fused
//! path through every host (`routines.send-frame-replaces-…`,
//! `routines.receive-frame-replaces-…`); the fallback is the runtime's
//! alone, so it is tested here.

mod common;

use common::*;
use corequic_mock::{MockEndpoint, MockPair};
use corequic_runtime::abi::PluginVal;

/// cq-fused-frames' frame type.
const FRAME: u64 = 0x6675;
const DUMMY: u64 = 0x42;

/// The `by` field of each `message` record of fused-frames, in order.
fn by(ep: &MockEndpoint, message: &str) -> Vec<String> {
    ep.conn
        .logs_of("fused-frames")
        .iter()
        .filter(|r| r.message == message)
        .filter_map(|r| match r.fields.first() {
            Some((k, PluginVal::String(v))) if k == "by" => Some(v.clone()),
            _ => None,
        })
        .collect()
}

fn watched(ep: &MockEndpoint) -> Vec<String> {
    ep.conn
        .logs_of("frame-watcher")
        .iter()
        .filter(|r| r.message == "watched")
        .filter_map(|r| match r.fields.first() {
            Some((_, PluginVal::String(v))) => Some(v.clone()),
            _ => None,
        })
        .collect()
}

/// A pair run until the client sent `frames` frames of `frame_type`.
fn exchange(mut p: MockPair, frame_type: u64, frames: u64) -> MockPair {
    p.handshake();
    assert!(p.run_until(10_000 * MS, |p| {
        p.client
            .plugin_frames_sent
            .get(&frame_type)
            .is_some_and(|&n| n >= frames)
            && p.server
                .plugin_frames_sent
                .get(&frame_type)
                .is_some_and(|&n| n >= frames)
    }));
    p
}

#[test]
fn unobserved_frames_take_the_fused_routines() {
    let p = exchange(pair(&["cq-fused-frames"], &["cq-fused-frames"]), FRAME, 4);
    for ep in [&p.client, &p.server] {
        assert_eq!(by(ep, "sent"), ["send-frame"]);
        assert_eq!(by(ep, "received"), ["receive-frame"]);
    }
}

#[test]
fn an_observer_of_the_separate_routines_makes_the_host_call_them() {
    let plugins = ["cq-fused-frames", "test-frame-watcher"];
    let p = exchange(pair(&plugins, &plugins), FRAME, 4);
    for ep in [&p.client, &p.server] {
        assert_eq!(by(ep, "sent"), ["write-frame"]);
        assert_eq!(by(ep, "received"), ["process-frame"]);
        let mut seen = watched(ep);
        seen.sort();
        assert_eq!(
            seen,
            [
                "on-frame-reserved",
                "parse-frame",
                "process-frame",
                "should-send-frame",
                "write-frame"
            ]
        );
    }
}

/// DUMMY's frames cost its host two calls a round trip instead of eight:
/// `send-frame` for each frame it sends, `receive-frame` for each it
/// receives, and `should-send-frame` only when the host asks whether to
/// build a packet at all. Its registration is one in flight (ABI 0.2.5):
/// the host offers it again when the frame is acknowledged or lost, with no
/// `notify-frame` call.
#[test]
fn dummy_makes_fewer_calls_per_frame_through_the_fused_routines() {
    let p = exchange(pair(&["dummy"], &["dummy"]), DUMMY, 20);
    let c = &p.client;
    let sent = c.plugin_frames_sent[&DUMMY];
    let stats = &c.plugins.stats()[0];
    // Separately, each frame sent is should-send, write, reserved, log and
    // notify, and each received parse, process and log: at least 8 per
    // round trip. Fused, 2, plus a would-build question per round trip and
    // the three calls of setting up (init and the transport parameter).
    // With a `notify-frame` per frame it was 81 calls for 20 frames.
    assert!(
        stats.calls <= 3 * sent + 5,
        "{} calls for {sent} DUMMY frames sent",
        stats.calls
    );
    assert_eq!(stats.errors, 0);
    let described = c
        .conn
        .logs_of("dummy")
        .iter()
        .filter(|r| r.message == "frame sent")
        .count() as u64;
    assert_eq!(described, sent, "one description per frame sent");
}

const LIAR_FRAME: u64 = 0x4c5a;
const LIAR_MODE: u64 = 0x4d_0001;

fn set_mode(ep: &mut MockEndpoint, mode: u64) {
    let set = ep
        .plugins
        .plugin_control(&mut ep.conn, LIAR_MODE, &[PluginVal::U64(mode)]);
    assert_eq!(set, Ok(Vec::new()));
}

/// CQ-ROUTINE-29, CQ-SEND-11: whatever invalid result `send-frame` returns
/// (bytes of another type or of another frame, a frame longer than the
/// room, a list of another shape), nothing of it reaches a packet: it is
/// discarded, counted as the plugin's error and logged, the connection
/// stays open and the transfer is byte-exact.
#[test]
fn an_invalid_send_frame_result_reaches_no_packet() {
    for (mode, why) in [
        (
            1,
            "send-frame: the bytes do not start with the registered frame type",
        ),
        (
            2,
            "send-frame: the bytes do not start with the registered frame type",
        ),
        (3, "send-frame: returned "),
        (4, "send-frame: returned [u64]"),
        (5, "send-frame: returned [bytes, u64, u64]"),
    ] {
        let mut p = pair(&["test-fused-liar"], &[]);
        p.handshake();
        set_mode(&mut p.client, mode);
        assert!(p.transfer(50_000, 20_000 * MS), "mode {mode}: byte-exact");
        assert!(p.client.closed.is_none() && p.server.closed.is_none());
        assert_eq!(p.client.plugin_frames_sent.get(&LIAR_FRAME), None);
        let discarded = p
            .client
            .conn
            .logs
            .iter()
            .filter(|r| r.message.starts_with(&format!("discarded: {why}")))
            .count();
        let errors = p.client.plugins.stats()[0].errors;
        assert!(
            discarded > 0 && errors >= discarded as u64,
            "mode {mode}: {discarded} discarded, {errors} errors"
        );
    }
}

/// CQ-ROUTINE-30: what `receive-frame` returns decides the close: a
/// `consumed` beyond the payload, an error of kind `invalid-argument` or a
/// list of another shape close with FRAME_ENCODING_ERROR, an error of any
/// other kind with PROTOCOL_VIOLATION; a valid result takes the frame.
#[test]
fn receive_frame_results_close_with_the_error_the_spec_names() {
    use corequic_mock::{FRAME_ENCODING_ERROR, PROTOCOL_VIOLATION};
    for (mode, close) in [
        (6, None),
        (7, Some(FRAME_ENCODING_ERROR)),
        (8, Some(FRAME_ENCODING_ERROR)),
        (9, Some(PROTOCOL_VIOLATION)),
        (10, Some(FRAME_ENCODING_ERROR)),
    ] {
        let mut p = pair(&["test-fused-liar"], &["test-fused-liar"]);
        p.handshake();
        set_mode(&mut p.client, 6);
        set_mode(&mut p.server, mode);
        p.run_until(2_000 * MS, |p| p.server.closed.is_some());
        assert!(
            p.client
                .plugin_frames_sent
                .get(&LIAR_FRAME)
                .is_some_and(|&n| n > 0),
            "mode {mode}: the client sent its frames"
        );
        assert_eq!(
            p.server.closed.as_ref().map(|c| c.error_code),
            close,
            "mode {mode}: {:?}",
            p.server.closed
        );
    }
}
