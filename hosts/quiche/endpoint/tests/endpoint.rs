//! The `quiche-endpoint` binary: the endpoint contract of
//! `interop-runner/ENDPOINT.md` (flags, exit codes, stats JSON, qlog), over
//! real UDP on loopback through a recording relay. Behaviour with plugins is
//! certified by the conformance kit (`conformance/`), across hosts by the
//! interop runner.

use corequic_endpoint::testing::{
    Run, Side, assert_endpoint_contract, assert_failed_plugin_load_exits_1, run,
};

const QUICHE: &str = env!("CARGO_BIN_EXE_quiche-endpoint");

fn plugins(names: &[&str]) -> Vec<String> {
    names
        .iter()
        .map(|n| {
            corequic_endpoint::testing::plugin_path(n)
                .display()
                .to_string()
        })
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
fn the_endpoint_contract_holds() {
    assert_endpoint_contract(QUICHE);
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
