//! The `s2n-endpoint` binary over real UDP on loopback, through a recording
//! relay: the endpoint contract (`interop-runner/ENDPOINT.md`), and one test
//! per reference plugin with the same `.wasm` files for s2n↔s2n and s2n
//! against quinn and quiche in both directions.
//!
//! The other hosts' endpoints are found next to `s2n-endpoint` in the target
//! folder (`make test` builds every host).

use corequic_endpoint::testing::{
    Run, Side, assert_bad_arguments_exit_1, assert_failed_plugin_load_exits_1,
    assert_unknown_test_exits_127, plugin_path, run, sibling_binary,
};
use std::path::Path;

const S2N: &str = env!("CARGO_BIN_EXE_s2n-endpoint");

fn plugin(name: &str) -> String {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    plugin_path(&workspace, name).display().to_string()
}

fn plugins(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| plugin(n)).collect()
}

/// Every (client, server, label) pair with s2n on at least one side:
/// s2n↔s2n, then s2n against each other host in both directions.
fn pairs() -> Vec<(String, String, String)> {
    let mut pairs = vec![(S2N.to_string(), S2N.to_string(), "s2n→s2n".to_string())];
    for (peer, name) in [("quinn-endpoint", "quinn"), ("quiche-endpoint", "quiche")] {
        let peer = sibling_binary(S2N, peer);
        pairs.push((
            S2N.to_string(),
            peer.clone(),
            format!("s2n client, {name} server"),
        ));
        pairs.push((peer, S2N.to_string(), format!("{name} client, s2n server")));
    }
    pairs
}

#[test]
fn an_unknown_test_exits_127() {
    assert_unknown_test_exits_127(S2N);
}

#[test]
fn bad_arguments_exit_1_with_a_message() {
    assert_bad_arguments_exit_1(S2N);
}

#[test]
fn a_plugin_that_fails_to_load_exits_1() {
    assert_failed_plugin_load_exits_1(S2N, "server", "/nonexistent/plugin.wasm");
}

#[test]
fn transfer_without_plugins_is_plain_s2n() {
    for (client, server, pair) in pairs() {
        let run = run(
            &Side::new(&client),
            &Side::new(&server),
            "transfer",
            500_000,
        );
        run.assert_download(500_000);
        assert!(
            run.client["plugins"].as_array().is_some_and(Vec::is_empty),
            "{pair}"
        );
    }
}

#[test]
fn bdp_sets_the_servers_window_and_reports_stats() {
    let dir = std::env::temp_dir().join(format!("s2n-endpoint-qlog-{}", std::process::id()));
    let qlog = dir.display().to_string();
    for (client, server, pair) in pairs() {
        let run = run(
            &Side::new(&client).plugins(plugins(&["bdp"])).flags(&[
                "--control",
                "0:0x80000:450000",
                "--qlog",
                &qlog,
            ]),
            &Side::new(&server).plugins(plugins(&["bdp"])),
            "bdp",
            300_000,
        );
        run.assert_download(300_000);
        let resumed = Run::logs(&run.server, "bdp", "congestion window resumed");
        assert_eq!(resumed.len(), 1, "{pair}: {}", run.server);
        assert_eq!(resumed[0]["fields"][0][1], "450000", "{pair}");
        assert_eq!(run.client["controls"][0]["id"], 0x80000, "{pair}");
        assert!(run.client["controls"][0]["error"].is_null(), "{pair}");
        if client == S2N {
            let c = &run.client;
            assert_eq!(
                (c["schema"].clone(), c["host"].clone()),
                (1.into(), "s2n-quic".into())
            );
            assert_eq!(c["plugins"][0]["name"], "bdp", "{pair}");
            assert_eq!(c["plugins"][0]["enabled"], true, "{pair}");
            let text = std::fs::read_to_string(dir.join("client.qlog")).expect("client qlog");
            assert!(text.contains("packet_sent") && text.contains("packet_received"));
        }
        if server == S2N {
            // The server's plugin counters arrive after its connection closed.
            assert_eq!(
                run.server["plugins"][0]["name"], "bdp",
                "{pair}: {}",
                run.server
            );
            assert_eq!(run.server["plugins"][0]["enabled"], true, "{pair}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn padding_makes_the_padded_sides_datagrams_full_sized() {
    for (client, server, pair) in pairs() {
        let run = run(
            &Side::new(&client),
            &Side::new(&server).plugins(plugins(&["padding"])),
            "padding",
            300_000,
        );
        run.assert_download(300_000);
        // Nothing is padded when closing: the client closes, and a quinn
        // server answers with one CONNECTION_CLOSE of its own (RFC 9000
        // §10.2.2), so the server's last datagram is left out.
        let mut server_1rtt: Vec<usize> = run
            .seen
            .iter()
            .filter(|s| s.from_server && s.short_header)
            .map(|s| s.size)
            .collect();
        server_1rtt.pop();
        assert!(
            server_1rtt.len() > 100,
            "{pair}: {} datagrams",
            server_1rtt.len()
        );
        assert!(
            server_1rtt.iter().all(|&s| s >= 1200),
            "{pair}: smallest {:?}",
            server_1rtt.iter().min()
        );
        assert!(
            run.seen
                .iter()
                .any(|s| !s.from_server && s.short_header && s.size < 1200),
            "{pair}: the unpadded client sends small datagrams"
        );
    }
}

#[test]
fn probe_returns_a_latency_through_plugin_control() {
    for (client, server, pair) in pairs() {
        let run = run(
            &Side::new(&client).plugins(plugins(&["probe"])).flags(&[
                "--control",
                "0:1",
                // A second probe after the download: a PATH_RESPONSE is
                // never retransmitted, so a lost one is not measured.
                "--control",
                "300:1",
                "--control",
                "600:2",
            ]),
            &Side::new(&server),
            "probe",
            100_000,
        );
        run.assert_download(100_000);
        let controls = run.client["controls"].as_array().expect("controls");
        assert_eq!(controls.len(), 3, "{pair}: {}", run.client);
        assert!(controls[0]["error"].is_null(), "{pair}: {}", controls[0]);
        let latency = controls[2]["result"][0].as_str().unwrap_or_default();
        let ns: u64 = latency
            .strip_suffix("ns")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{pair}: latency {}", controls[2]));
        assert!(ns > 0 && ns < 1_000_000_000, "{pair}: {ns} ns");
    }
}

#[test]
fn dummy_frames_flow_both_ways_and_toggle_padding() {
    for (client, server, pair) in pairs() {
        let run = run(
            // The client stays 400 ms after the handshake (until its control
            // ran), so DUMMY frames keep flowing after a fast transfer.
            &Side::new(&client)
                .plugins(plugins(&["padding", "dummy"]))
                .flags(&["--control", "400:0x80001:true"]),
            &Side::new(&server).plugins(plugins(&["dummy"])),
            "dummy+padding",
            1_000_000,
        );
        run.assert_download(1_000_000);
        let toggled = Run::logs(&run.client, "dummy", "padding toggled");
        assert!(toggled.len() >= 2, "{pair}: {}", run.client["logs"]);
        assert_eq!(toggled[0]["fields"][0][1], "false", "{pair}");
        assert_eq!(toggled[1]["fields"][0][1], "true", "{pair}");
        assert!(
            !Run::logs(&run.server, "dummy", "padding not available").is_empty(),
            "{pair}: DUMMY frames reached the server, whose toggles failed cleanly"
        );
    }
}

#[test]
fn ack_logger_logs_processed_acks() {
    for (client, server, pair) in pairs() {
        let run = run(
            &Side::new(&client),
            &Side::new(&server).plugins(plugins(&["ack-logger"])),
            "ack-logger",
            200_000,
        );
        run.assert_download(200_000);
        let acks = Run::logs(&run.server, "ack-logger", "ack processed");
        assert!(!acks.is_empty(), "{pair}: {}", run.server);
        assert!(
            acks.iter().all(|a| a["fields"]
                .as_array()
                .is_some_and(|f| f.iter().any(|kv| kv[0] == "largest-acknowledged"))),
            "{pair}"
        );
    }
}

#[test]
fn one_sided_plugins_against_a_peer_without_plugins() {
    for (client, server, pair) in pairs() {
        let run = run(
            &Side::new(&client)
                .plugins(plugins(&["bdp", "dummy"]))
                .flags(&["--control", "0:0x80000:500000"]),
            &Side::new(&server),
            "bdp",
            200_000,
        );
        run.assert_download(200_000);
        let plugins = run.client["plugins"].as_array().expect("plugins");
        assert!(
            plugins.iter().all(|p| p["enabled"] == false),
            "{pair}: nothing negotiated: {}",
            run.client
        );
    }
}

#[test]
fn a_trap_in_a_define_routine_closes_with_the_plugin_failure_code() {
    for (client, server, pair) in pairs().into_iter().filter(|(_, s, _)| s == S2N) {
        // The s2n server arms a trap in the hostile plugin's
        // should-send-frame (DEFINE) right after the handshake: it closes the
        // connection with the plugin-failure code, the download fails,
        // nothing panics.
        let run = run(
            &Side::new(&client),
            &Side::new(&server)
                .plugins(plugins(&["test-hostile"]))
                .flags(&["--control", "0:0x480007"]),
            "hostile",
            2_000_000,
        );
        run.assert_closed_by_plugin_failure(&pair);
        let warned = run.server["logs"].as_array().is_some_and(|logs| {
            logs.iter().any(|l| {
                let m = l["message"].as_str().unwrap_or_default();
                m.contains("hostile") && m.contains("should-send-frame")
            })
        });
        assert!(
            warned,
            "{pair}: the server names the plugin and routine: {}",
            run.server
        );
    }
}

#[test]
fn an_infinite_loop_is_cut_by_the_deadline_and_closes_the_connection() {
    let (client, server) = (S2N, S2N);
    // plugin-control 0x480001 loops forever inside the hostile plugin.
    let run = run(
        &Side::new(client),
        &Side::new(server)
            .plugins(plugins(&["test-hostile"]))
            .flags(&["--control", "0:0x480001"]),
        "hostile",
        2_000_000,
    );
    assert_eq!(
        run.server_exit,
        Some(0),
        "the server ran as specified: {}",
        run.server
    );
    let error = run.server["controls"][0]["error"]
        .as_str()
        .unwrap_or_default();
    assert!(
        error.contains("deadline"),
        "the call was cut: {}",
        run.server
    );
    assert!(
        !run.server["plugins"][0]["removed"].is_null(),
        "{}",
        run.server
    );
    assert_eq!(
        run.client_exit,
        Some(1),
        "the download failed: {}",
        run.client
    );
    let close = run.client["close"].as_str().unwrap_or_default();
    assert!(
        close.contains("1129381889") || close.to_lowercase().contains("0x43510001"),
        "the plugin-failure code in {close}"
    );
}
