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
    assert_bad_arguments_exit_1, assert_failed_plugin_load_exits_1, assert_unknown_test_exits_127,
    free_port,
};
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

const QUICHE: &str = env!("CARGO_BIN_EXE_quiche-endpoint");

/// The other hosts' endpoints: (host, binary, cargo package). Adding a
/// host to the cross-host tests is adding a line here.
const PEERS: &[(&str, &str, &str)] = &[("quinn", "quinn-endpoint", "corequic-quinn")];

/// A peer's endpoint binary, next to `quiche-endpoint`.
fn peer_binary(binary: &str, package: &str) -> String {
    let path =
        PathBuf::from(QUICHE).with_file_name(format!("{binary}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is missing: run `cargo build -p {package}`",
        path.display()
    );
    path.display().to_string()
}

fn plugin(name: &str) -> String {
    common::plugin_path(name).display().to_string()
}

/// One datagram seen by the relay.
#[derive(Debug, Clone, Copy)]
struct Seen {
    from_server: bool,
    size: usize,
    short_header: bool,
}

/// A UDP relay in front of `server` recording every datagram; it runs until
/// the test process ends.
fn relay(server: SocketAddr) -> (SocketAddr, Arc<Mutex<Vec<Seen>>>) {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("relay socket");
    let addr = socket.local_addr().expect("relay address");
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let record = seen.clone();
    std::thread::spawn(move || {
        let mut client = None;
        let mut buf = vec![0u8; 65_536];
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            let from_server = from == server;
            if !from_server {
                client = Some(from);
            }
            record.lock().unwrap_or_else(|e| e.into_inner()).push(Seen {
                from_server,
                size: n,
                short_header: buf[0] & 0x80 == 0,
            });
            let to = if from_server { client } else { Some(server) };
            if let Some(to) = to {
                let _ = socket.send_to(&buf[..n], to);
            }
        }
    });
    (addr, seen)
}

/// What one client/server run left behind.
struct Run {
    client: serde_json::Value,
    server: serde_json::Value,
    seen: Vec<Seen>,
}

impl Run {
    fn logs(
        &self,
        side: &serde_json::Value,
        plugin: &str,
        message: &str,
    ) -> Vec<serde_json::Value> {
        side["logs"]
            .as_array()
            .expect("logs")
            .iter()
            .filter(|l| l["plugin"] == plugin && l["message"] == message)
            .cloned()
            .collect()
    }
}

/// Run `server_bin` and `client_bin` for `test` with the given plugins and
/// extra client flags; both must exit 0 and write their stats.
fn run(
    client_bin: &str,
    server_bin: &str,
    test: &str,
    client_plugins: &[&str],
    server_plugins: &[&str],
    client_flags: &[&str],
) -> Run {
    let (client, server, run) = run_with(
        client_bin,
        server_bin,
        test,
        (client_plugins, client_flags),
        (server_plugins, &[]),
    );
    assert_eq!(client, Some(0), "the client passed: {}", run.client);
    assert_eq!(server, Some(0), "the server passed");
    run
}

/// Run a client and a server, each with its plugins and extra flags; returns
/// their exit codes and what they wrote.
fn run_with(
    client_bin: &str,
    server_bin: &str,
    test: &str,
    (client_plugins, client_flags): (&[&str], &[&str]),
    (server_plugins, server_flags): (&[&str], &[&str]),
) -> (Option<i32>, Option<i32>, Run) {
    let dir = std::env::temp_dir().join(format!(
        "quiche-endpoint-test-{}-{test}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let server_addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("addr");
    let (server_stats, client_stats) = (dir.join("server.json"), dir.join("client.json"));
    let plugin_args = |names: &[&str]| -> Vec<String> {
        names
            .iter()
            .flat_map(|n| ["--plugin".to_string(), plugin(n)])
            .collect()
    };
    let mut server = Command::new(server_bin)
        .args(["--role", "server", "--addr", &server_addr.to_string()])
        .args(["--test", test, "--timeout", "30"])
        .args(["--stats", &server_stats.display().to_string()])
        .args(plugin_args(server_plugins))
        .args(server_flags)
        .stderr(Stdio::piped())
        .spawn()
        .expect("server");
    // Start the client once the server says it listens.
    let mut lines = BufReader::new(server.stderr.take().expect("stderr")).lines();
    let listening = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.contains("listening on"));
    assert!(listening, "the server did not start");
    let (relay_addr, seen) = relay(server_addr);

    let client = Command::new(client_bin)
        .args(["--role", "client", "--addr", &relay_addr.to_string()])
        .args(["--test", test, "--timeout", "30"])
        .args(["--stats", &client_stats.display().to_string()])
        .args(plugin_args(client_plugins))
        .args(client_flags)
        .status()
        .expect("client");
    let server_status = server.wait().expect("server exit");
    let read = |p: &PathBuf| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
            .expect("json")
    };
    let run = Run {
        client: read(&client_stats),
        server: read(&server_stats),
        seen: seen.lock().unwrap_or_else(|e| e.into_inner()).clone(),
    };
    let _ = std::fs::remove_dir_all(&dir);
    (client.code(), server_status.code(), run)
}

fn assert_download(run: &Run, size: u64) {
    assert_eq!(run.client["ok"], true, "{}", run.client);
    assert_eq!(run.client["bytes"], size, "byte-exact download");
    assert_eq!(run.server["bytes"], size);
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
    assert_failed_plugin_load_exits_1(QUICHE, "client", &plugin("test-abi-mismatch"));
}

#[test]
fn quiche_client_and_server_run_bdp_and_report_stats() {
    let dir = std::env::temp_dir().join(format!("quiche-endpoint-qlog-{}", std::process::id()));
    let run = run(
        QUICHE,
        QUICHE,
        "bdp",
        &["bdp"],
        &["bdp"],
        &[
            "--size",
            "300000",
            "--control",
            "0:0x80000:400000",
            "--qlog",
            &dir.display().to_string(),
        ],
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
    let resumed = run.logs(&run.server, "bdp", "congestion window resumed");
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
    for (host, binary, package) in PEERS {
        let peer = peer_binary(binary, package);
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
            &client,
            &server,
            "bdp",
            &["bdp"],
            &["bdp"],
            &["--size", "300000", "--control", "0:0x80000:450000"],
        );
        assert_download(&run, 300_000);
        let resumed = run.logs(&run.server, "bdp", "congestion window resumed");
        assert_eq!(resumed.len(), 1, "{pair}: {}", run.server);
        assert_eq!(resumed[0]["fields"][0][1], "450000", "{pair}");
    }
}

#[test]
fn padding_across_quiche_and_quinn() {
    for (client, server, pair) in directions() {
        let run = run(
            &client,
            &server,
            "padding",
            &[],
            &["padding"],
            &["--size", "300000"],
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
        let run = run(
            &client,
            &server,
            "probe",
            &["probe"],
            &[],
            // A second probe after the download: a PATH_RESPONSE is never
            // retransmitted, so a lost one is not measured.
            &[
                "--size",
                "100000",
                "--control",
                "0:1",
                "--control",
                "300:1",
                "--control",
                "600:2",
            ],
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
    }
}

#[test]
fn dummy_across_quiche_and_quinn() {
    for (client, server, pair) in directions() {
        let run = run(
            &client,
            &server,
            "dummy+padding",
            &["padding", "dummy"],
            &["dummy"],
            // The client stays 400 ms after the handshake (until its
            // control ran), so DUMMY frames keep flowing both ways after a
            // fast loopback transfer.
            &["--size", "1000000", "--control", "400:0x80001:true"],
        );
        assert_download(&run, 1_000_000);
        let toggled = run.logs(&run.client, "dummy", "padding toggled");
        assert!(toggled.len() >= 2, "{pair}: {}", run.client["logs"]);
        assert_eq!(
            toggled[0]["fields"][0][1], "false",
            "{pair}: {}",
            toggled[0]
        );
        assert_eq!(toggled[1]["fields"][0][1], "true", "{pair}: {}", toggled[1]);
        assert!(
            !run.logs(&run.server, "dummy", "padding not available")
                .is_empty(),
            "{pair}: DUMMY frames reached the client, and the server's toggles failed cleanly"
        );
    }
}

#[test]
fn ack_logger_across_quiche_and_quinn() {
    for (client, server, pair) in directions() {
        let run = run(
            &client,
            &server,
            "ack-logger",
            &[],
            &["ack-logger"],
            &["--size", "200000"],
        );
        assert_download(&run, 200_000);
        let acks = run.logs(&run.server, "ack-logger", "ack processed");
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
            &client,
            &server,
            "bdp",
            &["bdp", "dummy"],
            &[],
            &["--size", "200000", "--control", "0:0x80000:500000"],
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
            peer_binary("quinn-endpoint", "corequic-quinn"),
            QUICHE.to_string(),
            "quinn client, quiche server",
        );
        // The server arms a trap in the hostile plugin's should-send-frame
        // (DEFINE) right after the handshake: it closes the connection with
        // the plugin-failure code, the download fails, nothing panics.
        let (client_code, server_code, run) = run_with(
            &client,
            &server,
            "hostile",
            (&[], &["--size", "2000000"]),
            (&["test-hostile"], &["--control", "0:0x480007"]),
        );
        assert_eq!(client_code, Some(1), "{pair}: the download failed");
        assert_eq!(server_code, Some(0), "{pair}: the server ran as specified");
        assert_eq!(run.client["ok"], false);
        let close = run.client["close"].as_str().unwrap_or_default();
        assert!(
            close.contains("hostile") && close.contains("should-send-frame"),
            "{pair}: {close}"
        );
        assert!(
            close.contains("0x43510001") || close.contains("1129381889"),
            "{pair}: the plugin-failure code in {close}"
        );
    }
}
