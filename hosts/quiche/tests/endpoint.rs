//! The `quiche-endpoint` binary: the endpoint contract of
//! `interop-runner/ENDPOINT.md` (flags, exit codes, stats JSON), against
//! itself and against `quinn-endpoint` in both directions, one test per
//! reference plugin, over real UDP on loopback through a recording relay.
//!
//! `quinn-endpoint` is found next to `quiche-endpoint` in the target folder
//! (`make test` and `cargo test --workspace` build it; alone, run
//! `cargo build -p corequic-quinn` first).

mod common;

use corequic_endpoint::testing::{
    Run, Side, assert_bad_arguments_exit_1, assert_failed_plugin_load_exits_1,
    assert_unknown_test_exits_127, run, sibling_binary,
};

const QUICHE: &str = env!("CARGO_BIN_EXE_quiche-endpoint");

/// The other hosts' endpoint binaries, found next to `quiche-endpoint`.
/// Adding a host to the cross-host tests is adding a line here (s2n-quic's
/// own tests pair it with quiche).
const PEERS: &[(&str, &str)] = &[("quinn", "quinn-endpoint")];

fn plugins(names: &[&str]) -> Vec<String> {
    names
        .iter()
        .map(|n| common::plugin_path(n).display().to_string())
        .collect()
}

/// `binary` with these plugins and flags.
fn side(binary: &str, plugin_names: &[&str], flags: &[&str]) -> Side {
    Side::new(binary)
        .plugins(plugins(plugin_names))
        .flags(flags)
}

/// Both sides exited 0, the download was byte-exact and the client saw no
/// close from its peer.
fn assert_download(run: &Run, size: u64) {
    run.assert_download(size);
    assert!(run.client["close"].is_null(), "{}", run.client["close"]);
}

#[test]
fn an_unknown_test_exits_127() {
    assert_unknown_test_exits_127(QUICHE);
}

#[test]
fn bad_arguments_exit_1_with_a_message() {
    assert_bad_arguments_exit_1(QUICHE);
}

#[test]
fn a_plugin_that_fails_to_load_exits_1() {
    assert_failed_plugin_load_exits_1(QUICHE, "client", &plugins(&["test-abi-mismatch"])[0]);
}

#[test]
fn quiche_client_and_server_run_bdp_and_report_stats() {
    let dir = std::env::temp_dir().join(format!("quiche-endpoint-qlog-{}", std::process::id()));
    let qlog_dir = dir.display().to_string();
    let client_flags = ["--control", "0:0x80000:400000", "--qlog", &qlog_dir];
    let run = run(
        &side(QUICHE, &["bdp"], &client_flags),
        &side(QUICHE, &["bdp"], &[]),
        "bdp",
        300_000,
    );
    assert_download(&run, 300_000);
    let client = &run.client;
    assert_eq!(client["schema"], 1);
    assert_eq!(client["host"], "quiche");
    assert_eq!(client["role"], "client");
    assert_eq!(client["test"], "bdp");
    assert!(client["handshake_ms"].as_f64().is_some_and(|ms| ms > 0.0));
    assert_eq!(client["plugins"][0]["name"], "bdp");
    assert_eq!(client["plugins"][0]["enabled"], true);
    assert_eq!(client["controls"][0]["id"], 0x80000);
    assert!(client["controls"][0]["error"].is_null());
    assert!(client["extra"].as_array().is_some_and(|e| !e.is_empty()));
    let resumed = Run::logs(&run.server, "bdp", "congestion window resumed");
    assert_eq!(resumed.len(), 1, "{}", run.server);
    assert_eq!(resumed[0]["fields"][0][1], "400000");
    let qlog = std::fs::read_to_string(dir.join("client.qlog")).expect("client qlog");
    assert!(
        qlog.contains("packet_sent") && qlog.contains("packet_received"),
        "qlog events"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Both directions against every peer: (client, server, description).
fn directions() -> Vec<(String, String, String)> {
    let mut pairs = Vec::new();
    for (host, binary) in PEERS {
        let peer = sibling_binary(QUICHE, binary);
        pairs.push((
            QUICHE.to_string(),
            peer.clone(),
            format!("quiche client, {host} server"),
        ));
        pairs.push((
            peer,
            QUICHE.to_string(),
            format!("{host} client, quiche server"),
        ));
    }
    pairs
}

#[test]
fn bdp_across_quiche_and_quinn() {
    for (client, server, pair) in directions() {
        let run = run(
            &side(&client, &["bdp"], &["--control", "0:0x80000:450000"]),
            &side(&server, &["bdp"], &[]),
            "bdp",
            300_000,
        );
        assert_download(&run, 300_000);
        let resumed = Run::logs(&run.server, "bdp", "congestion window resumed");
        assert_eq!(resumed.len(), 1, "{pair}: {}", run.server);
        assert_eq!(resumed[0]["fields"][0][1], "450000", "{pair}");
    }
}

#[test]
fn padding_across_quiche_and_quinn() {
    for (client, server, pair) in directions() {
        let run = run(
            &side(&client, &[], &[]),
            &side(&server, &["padding"], &[]),
            "padding",
            300_000,
        );
        assert_download(&run, 300_000);
        // Up to the client's last datagram (its CONNECTION_CLOSE): the
        // server's answer to a close is not padded (nothing is, when closing).
        let last_client = run.seen.iter().rposition(|s| !s.from_server).unwrap_or(0);
        let server_1rtt: Vec<_> = run.seen[..last_client]
            .iter()
            .filter(|s| s.from_server && s.short_header)
            .collect();
        assert!(
            server_1rtt.len() > 100,
            "{pair}: {} datagrams",
            server_1rtt.len()
        );
        // Padded to the path MTU: never below QUIC's minimum of 1200.
        assert!(
            server_1rtt.iter().all(|s| s.size >= 1200),
            "{pair}: {:?}",
            server_1rtt.iter().map(|s| s.size).min()
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
fn probe_across_quiche_and_quinn() {
    for (client, server, pair) in directions() {
        // A second probe after the download: a PATH_RESPONSE is never
        // retransmitted, so a lost one is not measured.
        let probes = [
            "--control",
            "0:1",
            "--control",
            "300:1",
            "--control",
            "600:2",
        ];
        let run = run(
            &side(&client, &["probe"], &probes),
            &side(&server, &[], &[]),
            "probe",
            100_000,
        );
        assert_download(&run, 100_000);
        let controls = run.client["controls"].as_array().expect("controls");
        assert_eq!(controls.len(), 3, "{pair}: {}", run.client);
        assert!(controls[0]["error"].is_null(), "{pair}: {}", controls[0]);
        let latency = controls[2]["result"][0].as_str().unwrap_or_default();
        let ns: u64 = latency
            .strip_suffix("ns")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{pair}: latency {}", controls[2]));
        assert!(ns > 0 && ns < 1_000_000_000, "{pair}: {ns} ns");
        // RFC 9000 §8.2.1 (CQ-API-15): a datagram carrying a PATH_CHALLENGE
        // is expanded to at least 1200 bytes. The probe at 300 ms goes out
        // after the download, alone in a 1-RTT datagram (the one at 0 ms may
        // share the client's last handshake datagram, which starts with a
        // long header). Without the probe the client sends no 1-RTT
        // datagram that large: it sends the request and ACKs only.
        let full_sized = run
            .seen
            .iter()
            .filter(|s| !s.from_server && s.short_header && s.size >= 1200)
            .count();
        assert!(
            full_sized >= 1,
            "{pair}: {full_sized} padded client datagrams"
        );
    }
}

#[test]
fn dummy_across_quiche_and_quinn() {
    for (client, server, pair) in directions() {
        // The client stays 400 ms after the handshake (until its control
        // ran), so DUMMY frames keep flowing both ways after a fast loopback
        // transfer.
        let run = run(
            &side(
                &client,
                &["padding", "dummy"],
                &["--control", "400:0x80001:true"],
            ),
            &side(&server, &["dummy"], &[]),
            "dummy+padding",
            1_000_000,
        );
        assert_download(&run, 1_000_000);
        let toggled = Run::logs(&run.client, "dummy", "padding toggled");
        assert!(toggled.len() >= 2, "{pair}: {}", run.client["logs"]);
        assert_eq!(
            toggled[0]["fields"][0][1], "false",
            "{pair}: {}",
            toggled[0]
        );
        assert_eq!(toggled[1]["fields"][0][1], "true", "{pair}: {}", toggled[1]);
        assert!(
            !Run::logs(&run.server, "dummy", "padding not available").is_empty(),
            "{pair}: DUMMY frames reached the client, and the server's toggles failed cleanly"
        );
    }
}

#[test]
fn ack_logger_across_quiche_and_quinn() {
    for (client, server, pair) in directions() {
        let run = run(
            &side(&client, &[], &[]),
            &side(&server, &["ack-logger"], &[]),
            "ack-logger",
            200_000,
        );
        assert_download(&run, 200_000);
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
fn one_sided_bdp_against_quinn_without_plugins() {
    for (client, server, pair) in directions() {
        let run = run(
            &side(
                &client,
                &["bdp", "dummy"],
                &["--control", "0:0x80000:500000"],
            ),
            &side(&server, &[], &[]),
            "bdp",
            200_000,
        );
        assert_download(&run, 200_000);
        let plugins = run.client["plugins"].as_array().expect("plugins");
        assert!(
            plugins.iter().all(|p| p["enabled"] == false),
            "{pair}: nothing negotiated: {}",
            run.client
        );
    }
}

#[test]
fn a_trap_in_a_define_routine_closes_a_quinn_clients_connection() {
    // Only this direction: a quinn server closing mid-flood is seen by its
    // client as a stateless reset or not at all, with or without plugins
    // (quinn's own behaviour, hosts/quinn/README.md).
    {
        let (client, server, pair) = (
            sibling_binary(QUICHE, "quinn-endpoint"),
            QUICHE.to_string(),
            "quinn client, quiche server",
        );
        // The server arms a trap in the hostile plugin's should-send-frame
        // (DEFINE) right after the handshake: it closes the connection with
        // the plugin-failure code, the download fails, nothing panics.
        let run = run(
            &side(&client, &[], &[]),
            &side(&server, &["test-hostile"], &["--control", "0:0x480007"]),
            "hostile",
            2_000_000,
        );
        let close = run.assert_closed_by_plugin_failure(pair);
        assert!(
            close.contains("hostile") && close.contains("should-send-frame"),
            "{pair}: {close}"
        );
    }
}
