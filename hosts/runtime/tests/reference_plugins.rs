//! The five reference plugins, each through the mock host (spec appendix
//! A): the plugins this repository builds against the current ABI, and the
//! same suite with the plugins as built against earlier releases: 0.2.0
//! (`plugins/prebuilt/0.2.0`), which a 0.2.6 runtime runs unchanged
//! (CQ-VER-6), and 0.1.0 (`plugins/prebuilt/0.1.0`), which it runs through
//! its compatibility layer (spec §2.2).

mod common;

use common::*;
use corequic_runtime::LogRecord;
use corequic_runtime::abi::{FieldId, LogLevel, PluginVal};

const PADDING_TOGGLE: u64 = 0x80001;
const BDP_SET_WINDOW: u64 = 0x80000;
const FRAME_BDP: u64 = 0xBD;
const FRAME_DUMMY: u64 = 0x42;

/// The reference plugins' behaviour, with the plugins of one ABI version.
macro_rules! reference_suite {
    ($abi_version:expr, $expected:expr) => {
        use super::*;

        fn pair(client: &[&str], server: &[&str]) -> corequic_mock::MockPair {
            pair_in($abi_version, client, server)
        }

        /// The suite runs the plugins of the ABI version it names.
        #[test]
        fn the_reference_plugins_are_of_the_suites_abi_version() {
            let names = ["padding", "probe", "bdp", "dummy", "ack-logger", "ack-logger-c"];
            let versions: Vec<String> = names
                .iter()
                .map(|n| plugin_in($abi_version, n).manifest().abi_version.clone())
                .collect();
            assert_eq!(versions, [$expected; 6]);
        }

        /// Appendix A (padding); CQ-SEND-3 (the `end` position gets the remaining room).
        #[test]
        fn padding_fills_every_datagram_to_the_mtu() {
            let mut p = pair(&[], &["padding"]);
            p.handshake();
            assert!(
                p.transfer(60_000, 30_000 * MS),
                "transfer completes byte-exact"
            );
            assert!(p.server.datagrams.len() > 10);
            for d in &p.server.datagrams {
                assert_eq!(
                    d.size as u64, MTU,
                    "every server datagram is padded to the MTU"
                );
            }
            // The unpadded client sends small ACK-only datagrams.
            assert!(p.client.datagrams.iter().any(|d| (d.size as u64) < MTU));
        }

        /// CQ-SEND-8 (`sending-halted`), CQ-TIMER-5 (the resume timer fires once).
        #[test]
        fn padding_halts_after_each_packet_and_resumes_on_its_timer() {
            let mut p = pair(&[], &["padding"]);
            p.handshake();
            p.server.send_stream(10_000);
            let first = p.server.poll_transmit().expect("a first datagram");
            assert_eq!(first.len() as u64, MTU);
            assert!(p.server.conn.sending_halted, "the plugin halted sending");
            assert!(
                p.server.poll_transmit().is_none(),
                "nothing is sent while halted"
            );
            let resume = p.server.next_timeout().expect("a resume timer is armed");
            let reader = p.server.plugins.summary_reader();
            assert_eq!(reader.next_timeout(), Some(resume), "the shared reader agrees");
            assert!(
                resume <= p.server.conn.now + 10 * MS,
                "the halt lasts at most 10 ms"
            );
            p.server.conn.now = resume;
            p.server.handle_timeout();
            assert!(!p.server.conn.sending_halted, "the timer resumed sending");
            assert_eq!(reader.next_timeout(), p.server.plugins.next_timeout());
            assert!(p.server.poll_transmit().is_some());
        }

        /// CQ-CTRL-2, CQ-CTRL-5 (plugin-control from the application).
        /// CQ-SEND-10: a packet that goes out only because it is not in flight (an
        /// ACK-only packet under a full congestion window) is offered padding, which
        /// is not in flight, but not the in-flight frame of another plugin.
        #[test]
        fn an_ack_only_packet_under_a_full_window_gets_padding_but_no_in_flight_frame() {
            use corequic_runtime::abi::{PacketType, PnSpace, SendContext, SendPosition};
            let mut p = pair(&["test-bench", "padding"], &[]);
            p.handshake();
            let ctx = |position, room| SendContext {
                packet_type: PacketType::OneRtt,
                space: PnSpace::ApplicationData,
                packet_number: 100,
                position,
                room,
                now: 0,
            };
            let client = &mut p.client;
            let (mut out, mut written) = (Vec::new(), Vec::new());
            // An ordinary packet takes test-bench's in-flight frame after the ACK.
            client.plugins.write_frames(
                &mut client.conn,
                ctx(SendPosition::AfterAck, 1000),
                &mut out,
                &mut written,
            );
            assert_eq!(written.len(), 1, "{written:?}");
            assert!(written[0].in_flight);
            // The ACK-only packet does not, and is still padded at the end.
            let (mut out, mut written) = (Vec::new(), Vec::new());
            for (position, room) in [(SendPosition::AfterAck, 1000), (SendPosition::End, 1000)] {
                let room = room - out.len() as u64;
                client.plugins.write_frames_not_in_flight(
                    &mut client.conn,
                    ctx(position, room),
                    &mut out,
                    &mut written,
                );
            }
            assert_eq!(written.len(), 1, "{written:?}");
            assert_eq!(written[0].frame.frame_type, 0x00, "padding");
            assert!(!written[0].in_flight);
            assert_eq!(out.len(), 1000, "padded to the room");
        }

        #[test]
        fn padding_toggles_through_plugin_control() {
            let mut p = pair(&[], &["padding"]);
            p.handshake();
            let control = |p: &mut corequic_mock::MockPair, on: bool| {
                p.server
                    .plugins
                    .plugin_control(&mut p.server.conn, PADDING_TOGGLE, &[PluginVal::Bool(on)])
            };
            assert_eq!(control(&mut p, false), Ok(vec![PluginVal::Bool(false)]));
            assert!(p.transfer(30_000, 30_000 * MS));
            assert!(
                p.server.datagrams.iter().any(|d| (d.size as u64) < MTU),
                "padding is off"
            );

            assert_eq!(control(&mut p, true), Ok(vec![PluginVal::Bool(true)]));
            let mark = p.server.datagrams.len();
            assert!(
                p.transfer(30_000, 30_000 * MS),
                "more data on the same connection"
            );
            let padded = &p.server.datagrams[mark..];
            assert!(!padded.is_empty());
            assert!(
                padded.iter().all(|d| d.size as u64 == MTU),
                "padding is on again"
            );
        }

        /// CQ-API-14 (PATH_CHALLENGE through send-frame), CQ-RECV-5 (AFTER observer of PATH_RESPONSE).
        #[test]
        fn probe_returns_the_path_latency_through_plugin_control() {
            let mut p = pair(&["probe"], &[]);
            p.handshake();
            let none = p
                .client
                .plugins
                .plugin_control(&mut p.client.conn, 2, &[])
                .expect("latency query");
            assert_eq!(none.len(), 1);
            assert!(
                matches!(none[0], PluginVal::None),
                "no latency before a probe"
            );

            let sent = p
                .client
                .plugins
                .plugin_control(&mut p.client.conn, 1, &[])
                .expect("probe sent");
            assert!(matches!(sent.as_slice(), [PluginVal::U64(_)]));
            let done = p.run_until(5_000 * MS, |p| {
                p.client
                    .conn
                    .events
                    .iter()
                    .any(|e| e.starts_with("processed PATH_RESPONSE"))
            });
            assert!(done, "the PATH_RESPONSE came back");
            let latency = p
                .client
                .plugins
                .plugin_control(&mut p.client.conn, 2, &[])
                .expect("latency");
            let PluginVal::Duration(ns) = latency[0] else {
                panic!("expected a duration, got {latency:?}")
            };
            // Two one-way delays of 10 ms on the mock link, no queueing.
            assert_eq!(ns, 2 * p.one_way_delay);
        }

        fn bdp_pair(window: u64) -> corequic_mock::MockPair {
            let mut p = pair(&["bdp"], &["bdp"]);
            // plugin-control runs before the plugin is enabled (before negotiation).
            let r = p.client.plugins.plugin_control(
                &mut p.client.conn,
                BDP_SET_WINDOW,
                &[PluginVal::U64(window)],
            );
            assert_eq!(r, Ok(vec![]));
            p.handshake();
            assert!(p.client.plugins.is_enabled("bdp") && p.server.plugins.is_enabled("bdp"));
            p
        }

        /// CQ-ROUTINE-7 (TP sent), CQ-LOAD-16 (enable after negotiation), CQ-ROUTINE-15 (notify once).
        #[test]
        fn bdp_sets_the_servers_window_from_frame_0xbd_once() {
            let mut p = bdp_pair(60_000);
            let initial = p.server.conn.cwnd;
            assert_ne!(initial, 60_000);
            assert!(p.run_until(5_000 * MS, |p| p.server.conn.cwnd == 60_000));
            assert_eq!(p.server.conn.ssthresh, Some(60_000));
            assert!(
                p.run_until(5_000 * MS, |p| p.client.plugin_frames_acked.get(&FRAME_BDP)
                    == Some(&1))
            );
            p.run_until(200 * MS + p.now, |_| false);
            assert_eq!(
                p.client.plugin_frames_sent.get(&FRAME_BDP),
                Some(&1),
                "sent exactly once"
            );
            assert_eq!(
                p.server
                    .conn
                    .log_count("bdp", Some("congestion window resumed")),
                1
            );
        }

        /// CQ-SEND-7, CQ-ROUTINE-15 (loss reported per frame; the plugin resends).
        #[test]
        fn bdp_resends_frame_0xbd_when_lost() {
            let mut p = bdp_pair(60_000);
            let needle: Vec<u8> = [0x40, 0xBD]
                .into_iter()
                .chain(60_000u64.to_be_bytes())
                .collect();
            let mut dropped = false;
            p.set_drop_filter(Box::new(move |from_client, d| {
                let hit =
                    from_client && !dropped && d.windows(needle.len()).any(|w| w == needle.as_slice());
                dropped |= hit;
                hit
            }));
            assert!(p.run_until(10_000 * MS, |p| p.server.conn.cwnd == 60_000));
            assert_eq!(p.client.plugin_frames_lost.get(&FRAME_BDP), Some(&1));
            assert_eq!(p.client.plugin_frames_sent.get(&FRAME_BDP), Some(&2));
        }

        /// CQ-FIELD-8: a controller that cannot take a window write refuses it with
        /// `unsupported`; BDP logs it and the connection goes on.
        #[test]
        fn bdp_carries_on_when_the_window_write_is_unsupported() {
            let mut p = bdp_pair(60_000);
            // The frame is not processed yet: the handshake just completed.
            p.server.conn.unsupported.insert(FieldId::CongestionWindow);
            let warn = bdp_window_kept(&mut p, "congestion window not resumed");
            assert!(
                warn.fields
                    .iter()
                    .any(|f| f.0 == "error" && f.1 == PluginVal::String("unsupported".into())),
                "{warn:?}"
            );
            assert!(p.transfer(40_000, 10_000 * MS));
        }

        /// Appendix A (BDP validates the window).
        #[test]
        fn bdp_refuses_an_absurd_window() {
            let mut p = bdp_pair(1 << 40);
            bdp_window_kept(&mut p, "refusing implausible BDP window");
            assert_eq!(p.server.conn.ssthresh, None);
        }

        /// Run until the client's BDP frame is acknowledged; check that the server
        /// kept its window and both sides stayed open, and return the server's
        /// warning `message`.
        fn bdp_window_kept(p: &mut corequic_mock::MockPair, message: &str) -> LogRecord {
            let initial = p.server.conn.cwnd;
            assert!(p.run_until(5_000 * MS, |p| {
                p.client.plugin_frames_acked.contains_key(&FRAME_BDP)
            }));
            assert_eq!(p.server.conn.cwnd, initial, "the window is unchanged");
            assert!(p.server.closed.is_none() && p.client.closed.is_none());
            let warn = p.server.conn.logs.iter().find(|r| r.message == message);
            let warn = warn
                .cloned()
                .unwrap_or_else(|| panic!("no `{message}` record"));
            assert_eq!(warn.level, LogLevel::Warn);
            warn
        }

        /// CQ-LOAD-19 (no peer TP: the plugin stays disabled).
        #[test]
        fn bdp_against_a_peer_without_it_negotiates_nothing() {
            let mut p = pair(&["bdp"], &[]);
            let _ = p.client.plugins.plugin_control(
                &mut p.client.conn,
                BDP_SET_WINDOW,
                &[PluginVal::U64(60_000)],
            );
            p.handshake();
            assert!(!p.client.plugins.is_enabled("bdp"));
            assert!(p.transfer(20_000, 10_000 * MS));
            assert_eq!(p.client.plugin_frames_sent.get(&FRAME_BDP), None);
        }

        /// CQ-CTRL-3 (plugin-control between plugins), CQ-CTRL-2 (`not-found` without a callee).
        #[test]
        fn dummy_keeps_one_frame_in_flight_and_toggles_padding_every_four() {
            let mut p = pair(&["padding", "dummy"], &["dummy"]);
            p.handshake();
            let toggled = p.run_until(20_000 * MS, |p| {
                p.client.conn.log_count("dummy", Some("padding toggled")) >= 2
            });
            assert!(toggled, "two toggles happened");
            for ep in [&p.client, &p.server] {
                assert_eq!(
                    ep.max_in_flight_by_type.get(&FRAME_DUMMY),
                    Some(&1),
                    "at most one DUMMY in flight"
                );
                assert!(
                    ep.plugin_frames_sent
                        .get(&FRAME_DUMMY)
                        .copied()
                        .unwrap_or(0)
                        >= 8
                );
            }
            let toggles: Vec<(bool, u64)> = p
                .client
                .conn
                .logs
                .iter()
                .filter(|r| r.plugin == "dummy" && r.message == "padding toggled")
                .map(|r| {
                    let padding = r
                        .fields
                        .iter()
                        .find(|f| f.0 == "padding")
                        .map(|f| f.1.clone());
                    let received = r
                        .fields
                        .iter()
                        .find(|f| f.0 == "received")
                        .map(|f| f.1.clone());
                    match (padding, received) {
                        (Some(PluginVal::Bool(b)), Some(PluginVal::U64(n))) => (b, n),
                        other => panic!("unexpected fields {other:?}"),
                    }
                })
                .collect();
            assert_eq!(
                toggles[..2],
                [(false, 4), (true, 8)],
                "the first toggle disables padding"
            );
            // The server has no padding plugin: the call fails cleanly.
            let missing = p
                .server
                .conn
                .logs
                .iter()
                .find(|r| r.message == "padding not available");
            let error = missing
                .and_then(|r| r.fields.iter().find(|f| f.0 == "error"))
                .map(|f| f.1.clone());
            assert!(matches!(error, Some(PluginVal::String(ref s)) if s == "not-found"));
            assert!(p.client.closed.is_none() && p.server.closed.is_none());
        }

        /// CQ-ROUTINE-18: each DUMMY frame sent and received is described by the
        /// plugin's `log-frame` in a `debug` record of the connection's log.
        #[test]
        fn log_frame_describes_every_plugin_frame_sent_and_received() {
            let mut p = pair(&["dummy"], &["dummy"]);
            p.handshake();
            assert!(p.run_until(10_000 * MS, |p| {
                p.client
                    .plugin_frames_sent
                    .get(&FRAME_DUMMY)
                    .copied()
                    .unwrap_or(0)
                    >= 4
            }));
            let described = |ep: &corequic_mock::MockEndpoint, message: &str| -> Vec<String> {
                ep.conn
                    .logs
                    .iter()
                    .filter(|r| r.plugin == "dummy" && r.message == message)
                    .map(|r| {
                        assert_eq!(r.level, LogLevel::Debug);
                        assert_eq!(
                            r.fields[0],
                            ("frame-type".into(), PluginVal::U64(FRAME_DUMMY))
                        );
                        match &r.fields[1] {
                            (k, PluginVal::String(d)) if k == "description" => d.clone(),
                            other => panic!("unexpected field {other:?}"),
                        }
                    })
                    .collect()
            };
            let sent = described(&p.client, "frame sent");
            assert_eq!(
                sent.len() as u64,
                p.client.plugin_frames_sent[&FRAME_DUMMY],
                "one record per DUMMY frame sent"
            );
            assert!(
                sent.iter().all(|d| d.starts_with("DUMMY counter=")),
                "{sent:?}"
            );
            let received = described(&p.server, "frame received");
            assert!(!received.is_empty());
            assert!(received.iter().all(|d| d.starts_with("DUMMY counter=")));
        }

        /// Appendix A (DUMMY + padding, the paper's Fig. 6).
        #[test]
        fn dummy_toggles_are_visible_in_the_clients_datagram_sizes() {
            let mut p = pair(&["padding", "dummy"], &["dummy"]);
            p.handshake();
            p.run_until(20_000 * MS, |p| {
                p.client.conn.log_count("dummy", Some("padding toggled")) >= 1
            });
            let toggled_at = p.now;
            let before: Vec<_> = p
                .client
                .datagrams
                .iter()
                .filter(|d| d.time < toggled_at)
                .collect();
            assert!(!before.is_empty());
            assert!(
                before.iter().all(|d| d.size as u64 == MTU),
                "padded until the first toggle"
            );
            p.run_until(p.now + 15 * MS, |_| false);
            let after: Vec<_> = p
                .client
                .datagrams
                .iter()
                .filter(|d| d.time >= toggled_at)
                .collect();
            assert!(
                after.iter().any(|d| (d.size as u64) < MTU),
                "smaller datagrams once padding is off"
            );
        }

        /// CQ-ANCHOR-3 (AFTER runs after native processing), CQ-RECV-5.
        #[test]
        fn ack_logger_logs_each_ack_after_it_was_processed() {
            logs_each_ack_after_it_was_processed("ack-logger");
        }

        /// The C build of the ACK logger behaves as the Rust one.
        #[test]
        fn ack_logger_in_c_logs_each_ack_after_it_was_processed() {
            logs_each_ack_after_it_was_processed("ack-logger-c");
        }

        /// CQ-ANCHOR-12: the ACK logger can give nothing but log records, so
        /// once its log budget (CQ-LIMIT-12) is spent the host stops calling
        /// it, and stops showing it ACK frames at all.
        #[test]
        fn ack_logger_is_not_called_once_its_log_budget_is_spent() {
            use corequic_runtime::abi::{AckFrame, Anchor, Frame, PacketType, PnSpace, RxContext};
            const ACK: u64 = 0x02;
            let ack = Frame::Ack(AckFrame {
                largest_acknowledged: 1_000,
                ack_delay: 25_000,
                ranges: vec![(990, 1_000)],
                ecn: None,
            });
            let ctx = |packet_number| RxContext {
                packet_type: PacketType::OneRtt,
                space: PnSpace::ApplicationData,
                packet_number,
                now: 0,
            };
            let mut p = pair(&["ack-logger"], &[]);
            p.handshake();
            let c = &mut p.client;
            let mut offered = 0;
            while c.plugins.observes_frame_type(ACK) {
                assert!(offered < 100_000, "the budget is never spent");
                c.plugins
                    .observe_frame(&mut c.conn, Anchor::After, &ack, ctx(offered));
                offered += 1;
            }
            let logged = c.conn.log_count("ack-logger", Some("ack processed")) as u64;
            let stats = &c.plugins.stats()[0];
            assert!(logged > 1_000, "{logged} records before the budget was spent");
            assert!(stats.logs_dropped > 0, "the budget is spent");
            if $expected == corequic_runtime::abi::ABI_VERSION {
                // In batches of 64 (observe-frames): no time passes here,
                // so only a full batch is delivered. The plugin passes each
                // batch's records in one call (log-shaped-records, ABI
                // 0.2.6), so the records of the batch that spent the budget
                // past that point are dropped and counted (CQ-API-23).
                assert_eq!(offered % 64, 0, "{offered} ACKs offered");
                assert_eq!(stats.calls, 1 + offered / 64, "init, then every batch");
                assert_eq!(offered, logged + stats.logs_dropped);
            } else {
                assert_eq!(stats.calls, 1 + offered, "init, then every ACK offered");
                assert!(offered <= logged + stats.logs_dropped);
            }

            // Offered anyway, as a host that does not ask first would, and
            // delivered if it were queued.
            let calls = stats.calls;
            c.plugins
                .observe_frame(&mut c.conn, Anchor::After, &ack, ctx(offered));
            c.plugins.deliver_observations(&mut c.conn);
            assert_eq!(c.plugins.stats()[0].calls, calls, "not called again");
        }

        fn logs_each_ack_after_it_was_processed(plugin: &str) {
            // The current Rust ACK logger observes ACKs in batches
            // (`observe-frames`, ABI 0.2.3); its C build and the builds of
            // earlier releases observe each with `process-frame`.
            let batched = plugin == "ack-logger" && $expected == corequic_runtime::abi::ABI_VERSION;
            let mut p = pair(&[], &[plugin]);
            p.handshake();
            assert!(p.transfer(40_000, 10_000 * MS));
            // What is still queued is delivered when the connection ends
            // (CQ-ROUTINE-26).
            let s = &mut p.server;
            s.plugins.deliver_observations(&mut s.conn);
            let logs = p.server.conn.log_count(plugin, Some("ack processed"));
            assert!(logs > 0);
            assert_eq!(
                logs as u64, p.server.acks_processed,
                "one line per processed ACK"
            );
            let calls = p.server.plugins.stats()[0].calls - 1;
            if batched {
                // ACKs further apart than the 10 ms a record may wait come
                // one per call; the budget test above sees full batches.
                assert!(
                    calls <= p.server.acks_processed,
                    "{calls} calls for {} ACKs",
                    p.server.acks_processed
                );
            } else {
                assert_eq!(calls, p.server.acks_processed, "one call per ACK");
            }
            let events = &p.server.conn.events;
            let mut processed = 0;
            let mut logged = 0;
            for (i, e) in events.iter().enumerate() {
                if e.starts_with("processed ACK") {
                    processed += 1;
                }
                if *e == format!("log {plugin}: ack processed") {
                    logged += 1;
                    assert!(logged <= processed, "logged after processing: {e}");
                    assert!(
                        batched || events[i - 1].starts_with("processed ACK"),
                        "logged right after processing: {e}"
                    );
                }
            }
            // In the order the ACKs were processed.
            let packet_numbers: Vec<u64> = p
                .server
                .conn
                .logs_of(plugin)
                .iter()
                .filter_map(|r| match r.fields.get(3) {
                    Some((_, PluginVal::U64(pn))) => Some(*pn),
                    _ => None,
                })
                .collect();
            assert_eq!(packet_numbers.len(), logs);
            assert!(
                packet_numbers.windows(2).all(|w| w[0] < w[1]),
                "{packet_numbers:?}"
            );
            // Every record has the same level, message, keys and value
            // kinds, whether the plugin logs them with `log` or with a
            // declared shape (`log-shaped`, ABI 0.2.2).
            for record in &p.server.conn.logs {
                assert_eq!(record.level, LogLevel::Info);
                assert_eq!(record.message, "ack processed");
                let keys: Vec<&str> = record.fields.iter().map(|f| f.0.as_str()).collect();
                assert_eq!(
                    keys,
                    ["largest-acknowledged", "ack-delay", "ranges", "packet-number"]
                );
                assert!(
                    matches!(
                        &record.fields[..],
                        [
                            (_, PluginVal::U64(_)),
                            (_, PluginVal::Duration(_)),
                            (_, PluginVal::U64(ranges)),
                            (_, PluginVal::U64(_)),
                        ] if *ranges >= 1
                    ),
                    "{record:?}"
                );
            }
        }
    };
}

/// The reference plugins as `make plugins` builds them.
mod current {
    reference_suite!(None, corequic_runtime::abi::ABI_VERSION);
}

/// The reference plugins as built against ABI 0.2.0, six releases before
/// this runtime's own 0.2.6: no compatibility layer, the component's
/// 0.2.0 imports and exports resolve to 0.2.6's. The ACK logger of 0.2.0
/// observes each ACK with `process-frame` and logs with `log`, the current
/// one observes ACKs in batches (`observe-frames`) and logs each batch's
/// records with `log-shaped-records`: the same suite checks that both make
/// the same records.
mod abi_0_2_0 {
    reference_suite!(Some("0.2.0"), "0.2.0");
}

/// The reference plugins as built against ABI 0.1.0, through the
/// compatibility layer; `test-bench` beside padding is a current plugin, so
/// plugins of both versions share a connection there.
mod abi_0_1_0 {
    reference_suite!(Some("0.1.0"), "0.1.0");
}
