//! The `quinn-endpoint` binary against itself over loopback: the endpoint
//! contract of `interop-runner/ENDPOINT.md` (flags, exit codes, stats JSON).

use corequic_endpoint::testing::{assert_endpoint_contract, start_server};
use std::process::Command;

const ENDPOINT: &str = env!("CARGO_BIN_EXE_quinn-endpoint");

fn plugin(name: &str) -> String {
    corequic_endpoint::testing::plugin_path(name)
        .display()
        .to_string()
}

#[test]
fn the_endpoint_contract_holds() {
    assert_endpoint_contract(ENDPOINT);
}

#[test]
fn client_and_server_run_bdp_and_report_stats() {
    let dir = std::env::temp_dir().join(format!("quinn-endpoint-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (server_stats, client_stats) = (dir.join("server.json"), dir.join("client.json"));
    let bdp = plugin("bdp");

    let (mut server, addr) = start_server(
        Command::new(ENDPOINT)
            .args(["--role", "server", "--addr", "127.0.0.1:0", "--test", "bdp"])
            .args(["--plugin", &bdp])
            .args(["--stats", &server_stats.display().to_string()])
            .args(["--timeout", "30"]),
    );
    let addr = addr.to_string();

    let client = Command::new(ENDPOINT)
        .args([
            "--role", "client", "--addr", &addr, "--test", "bdp", "--plugin", &bdp,
        ])
        .args(["--size", "300000", "--control", "0:0x80000:400000"])
        .args([
            "--stats",
            &client_stats.display().to_string(),
            "--timeout",
            "30",
        ])
        .args(["--qlog", &dir.display().to_string()])
        .status()
        .expect("client");
    assert_eq!(client.code(), Some(0), "the client passed");
    assert_eq!(
        server.wait().expect("server exit").code(),
        Some(0),
        "the server passed"
    );

    let client: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&client_stats).expect("client stats")).expect("json");
    assert_eq!(client["schema"], 1);
    assert_eq!(client["host"], "quinn");
    assert_eq!(client["role"], "client");
    assert_eq!(client["ok"], true);
    assert_eq!(client["bytes"], 300_000);
    assert_eq!(client["plugins"][0]["name"], "bdp");
    assert_eq!(client["plugins"][0]["enabled"], true);
    assert_eq!(client["controls"][0]["id"], 0x80000);
    assert!(client["controls"][0]["error"].is_null());

    let server: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&server_stats).expect("server stats")).expect("json");
    assert_eq!(server["bytes"], 300_000);
    let resumed = server["logs"]
        .as_array()
        .expect("logs")
        .iter()
        .any(|l| l["message"] == "congestion window resumed" && l["fields"][0][1] == "400000");
    assert!(
        resumed,
        "the server's window was set from frame 0xBD: {server}"
    );
    let qlog = std::fs::read_to_string(dir.join("client.qlog")).expect("client qlog");
    assert!(
        qlog.contains("packet_sent") && qlog.contains("packet_received"),
        "qlog events"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
