//! Test support for host crates (feature `testing`): run two endpoint
//! binaries against each other over real UDP on loopback, through a relay
//! that records every datagram, and read back what both sides reported.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A plugin component built by `make plugins` (the folder can be overridden
/// with `COREQUIC_PLUGIN_DIR`).
pub fn plugin_path(name: &str) -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::var_os("COREQUIC_PLUGIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("build/plugins"));
    let path = dir.join(format!("{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: run `make plugins`",
        path.display()
    );
    path
}

/// A runtime with the default limits and a host's `capabilities`, and the
/// plugins at `paths` loaded into it with every grant: what a host's
/// in-process tests hand to that host's extension factory.
pub fn load_plugins(
    capabilities: corequic_runtime::HostCapabilities,
    paths: &[PathBuf],
) -> (
    Arc<corequic_runtime::Runtime>,
    Vec<Arc<corequic_runtime::Plugin>>,
) {
    let runtime = Arc::new(
        corequic_runtime::Runtime::new(corequic_runtime::RuntimeConfig::default(), capabilities)
            .expect("runtime"),
    );
    let plugins = paths
        .iter()
        .map(|p| {
            runtime
                .load_file(p, &corequic_runtime::Grants::all())
                .unwrap_or_else(|e| panic!("{} loads: {e}", p.display()))
        })
        .collect();
    (runtime, plugins)
}

/// Another endpoint binary of the workspace, next to `own` (a test's
/// `CARGO_BIN_EXE_*`) in the target folder.
pub fn sibling_binary(own: &str, name: &str) -> String {
    let path = PathBuf::from(own).with_file_name(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is missing: build it first (`make test` builds every host)",
        path.display()
    );
    path.display().to_string()
}

/// Start a server (`server` has its arguments, with `--addr 127.0.0.1:0`)
/// and wait for the address it announces on stdout (ENDPOINT.md's
/// [`crate::LISTENING`] line). Its further output is copied to stderr,
/// marked `[server]`, so that the pipe never fills.
pub fn start_server(server: &mut Command) -> (Child, SocketAddr) {
    let mut child = server.stdout(Stdio::piped()).spawn().expect("server");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(addr) = crate::parse_listening(&line)
                && let Some(tx) = tx.take()
            {
                let _ = tx.send(addr);
            }
            eprintln!("[server] {line}");
        }
    });
    let addr = rx.recv().expect("the server exited before it listened");
    (child, addr)
}

/// One datagram seen by the relay.
#[derive(Debug, Clone, Copy)]
pub struct Seen {
    /// Sent by the server.
    pub from_server: bool,
    /// UDP payload size.
    pub size: usize,
    /// The first packet has a short header (1-RTT).
    pub short_header: bool,
}

/// A UDP relay in front of `server` recording every datagram; it runs until
/// the test process ends.
pub fn relay(server: SocketAddr) -> (SocketAddr, Arc<Mutex<Vec<Seen>>>) {
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
                short_header: n > 0 && buf[0] & 0x80 == 0,
            });
            let to = if from_server { client } else { Some(server) };
            if let Some(to) = to {
                let _ = socket.send_to(&buf[..n], to);
            }
        }
    });
    (addr, seen)
}

/// One side of a run: its binary, plugins (paths, with optional `=GRANTS`)
/// and extra flags.
#[derive(Debug, Clone, Default)]
pub struct Side {
    /// Endpoint binary.
    pub binary: String,
    /// `--plugin` values.
    pub plugins: Vec<String>,
    /// Further flags.
    pub flags: Vec<String>,
}

impl Side {
    /// `binary` without plugins.
    pub fn new(binary: &str) -> Self {
        Side {
            binary: binary.into(),
            ..Side::default()
        }
    }

    /// Adds `--plugin` values.
    pub fn plugins(mut self, plugins: impl IntoIterator<Item = String>) -> Self {
        self.plugins.extend(plugins);
        self
    }

    /// Adds flags.
    pub fn flags(mut self, flags: &[&str]) -> Self {
        self.flags.extend(flags.iter().map(|f| f.to_string()));
        self
    }
}

/// What one client/server run left behind.
#[derive(Debug)]
pub struct Run {
    /// Client exit code.
    pub client_exit: Option<i32>,
    /// Server exit code.
    pub server_exit: Option<i32>,
    /// Client stats JSON.
    pub client: serde_json::Value,
    /// Server stats JSON.
    pub server: serde_json::Value,
    /// Every datagram the relay forwarded.
    pub seen: Vec<Seen>,
}

impl Run {
    /// Log lines of `side` from `plugin` with this message.
    pub fn logs(side: &serde_json::Value, plugin: &str, message: &str) -> Vec<serde_json::Value> {
        side["logs"]
            .as_array()
            .map(|logs| {
                logs.iter()
                    .filter(|l| l["plugin"] == plugin && l["message"] == message)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Both sides exited 0 and the download was byte-exact.
    pub fn assert_download(&self, size: u64) {
        // Either side's failure is usually explained by the other side's
        // stats (a plugin fault closes the peer's connection), so both go
        // into every message.
        let both = format!("client: {}\nserver: {}", self.client, self.server);
        assert_eq!(self.client_exit, Some(0), "{both}");
        assert_eq!(self.server_exit, Some(0), "{both}");
        assert_eq!(self.client["ok"], true, "{}", self.client);
        assert_eq!(self.client["bytes"], size, "byte-exact download");
        assert_eq!(self.server["bytes"], size, "{}", self.server);
    }

    /// The server's plugins closed the connection as CQ-LIMIT-8 says: the
    /// client's download failed (exit 1) with the plugin-failure code
    /// (0x43510001, shown in decimal or hex), the server ran as specified
    /// (exit 0). Returns the client's close reason for further checks.
    pub fn assert_closed_by_plugin_failure(&self, pair: &str) -> String {
        assert_eq!(self.client_exit, Some(1), "{pair}: the download failed");
        assert_eq!(
            self.server_exit,
            Some(0),
            "{pair}: the server ran as specified"
        );
        assert_eq!(self.client["ok"], false, "{pair}: {}", self.client);
        let close = self.client["close"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            close.contains("1129381889") || close.to_lowercase().contains("0x43510001"),
            "{pair}: the plugin-failure code in {close}"
        );
        close
    }
}

/// A fresh folder for one test run's files.
fn run_folder() -> PathBuf {
    static RUNS: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "corequic-endpoint-test-{}-{}",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Run `server` and `client` for `test` (the client GETs `size` bytes).
pub fn run(client: &Side, server: &Side, test: &str, size: u64) -> Run {
    let dir = run_folder();
    let (server_stats, client_stats) = (dir.join("server.json"), dir.join("client.json"));
    let plugin_args = |plugins: &[String]| -> Vec<String> {
        plugins
            .iter()
            .flat_map(|p| ["--plugin".to_string(), p.clone()])
            .collect()
    };
    let (mut server_child, server_addr) = start_server(
        Command::new(&server.binary)
            .args(["--role", "server", "--addr", "127.0.0.1:0"])
            .args(["--test", test, "--timeout", "30"])
            .args(["--stats", &server_stats.display().to_string()])
            .args(plugin_args(&server.plugins))
            .args(&server.flags),
    );
    let (relay_addr, seen) = relay(server_addr);
    let client_status = Command::new(&client.binary)
        .args(["--role", "client", "--addr", &relay_addr.to_string()])
        .args(["--test", test, "--timeout", "30"])
        .args(["--size", &size.to_string()])
        .args(["--stats", &client_stats.display().to_string()])
        .args(plugin_args(&client.plugins))
        .args(&client.flags)
        .status()
        .expect("client");
    let server_status = server_child.wait().expect("server exit");
    let read = |p: &PathBuf| -> serde_json::Value {
        std::fs::read(p)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(serde_json::Value::Null)
    };
    let run = Run {
        client_exit: client_status.code(),
        server_exit: server_status.code(),
        client: read(&client_stats),
        server: read(&server_stats),
        seen: seen.lock().unwrap_or_else(|e| e.into_inner()).clone(),
    };
    let _ = std::fs::remove_dir_all(&dir);
    run
}

/// The command line and exit codes of ENDPOINT.md that need no peer,
/// checked on any endpoint binary: every check below.
pub fn assert_endpoint_contract(binary: &str) {
    assert_unknown_test_exits_127(binary);
    assert_bad_arguments_exit_1(binary);
    assert_help_prints_the_usage(binary);
    assert_capabilities_print_json(binary);
    assert_server_timeout_fails(binary);
}

/// `/dev/full`, where every write fails: a runner's log file on a full disk.
#[cfg(target_os = "linux")]
fn full_device() -> std::fs::File {
    std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full")
}

/// `--help` prints the usage on stdout and exits 0; an unknown option exits
/// 1 and names it, with the usage once.
pub fn assert_help_prints_the_usage(binary: &str) {
    let out = Command::new(binary)
        .arg("--help")
        .output()
        .expect("run endpoint");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{binary} --help");
    assert!(stdout.starts_with("usage: "), "{binary}: {stdout}");
    assert!(stdout.contains("--timeout"), "{binary}: {stdout}");

    let out = Command::new(binary)
        .args(["--role", "client", "--no-such-option"])
        .output()
        .expect("run endpoint");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{binary}: {stderr}");
    assert!(
        stderr.contains("unknown option `--no-such-option`"),
        "{binary}: {stderr}"
    );
    assert_eq!(stderr.matches("usage: ").count(), 1, "{binary}: {stderr}");
}

/// `--capabilities` prints one JSON object with the ABI version and the
/// field and routine lists and exits 0; on a stdout that cannot be written
/// it exits 1, not with a panic's 101.
pub fn assert_capabilities_print_json(binary: &str) {
    let out = Command::new(binary)
        .arg("--capabilities")
        .output()
        .expect("run endpoint");
    assert_eq!(out.status.code(), Some(0), "{binary} --capabilities");
    let caps: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{binary} --capabilities: {e}"));
    assert!(caps["abi_version"].is_string(), "{binary}: {caps}");
    for list in ["readable", "writable", "routines"] {
        assert!(caps[list].is_array(), "{binary}: `{list}` in {caps}");
    }
    #[cfg(target_os = "linux")]
    {
        let status = Command::new(binary)
            .arg("--capabilities")
            .stdout(full_device())
            .stderr(Stdio::null())
            .status()
            .expect("run endpoint");
        assert_eq!(status.code(), Some(1), "{binary}, stdout on /dev/full");
    }
}

/// A server that has not handled its `--connections` when `--timeout`
/// passes fails: exit 1, a message on stderr, and stats with `ok: false`
/// whose `close` says it timed out.
pub fn assert_server_timeout_fails(binary: &str) {
    let dir = run_folder();
    let stats = dir.join("server.json");
    let out = Command::new(binary)
        .args(["--role", "server", "--addr", "127.0.0.1:0"])
        .args(["--test", "transfer", "--timeout", "1"])
        .args(["--stats", &stats.display().to_string()])
        .stdin(Stdio::null())
        .output()
        .expect("run endpoint");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{binary}: {stderr}");
    assert!(stderr.contains("timed out after 1s"), "{binary}: {stderr}");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&stats).expect("server stats")).expect("json");
    assert_eq!(json["role"], "server", "{binary}: {json}");
    assert_eq!(json["ok"], false, "{binary}: {json}");
    assert!(
        json["close"]
            .as_str()
            .is_some_and(|c| c.contains("timed out after 1s")),
        "{binary}: {json}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// ENDPOINT.md's exit codes, checked on any endpoint binary: an unknown
/// test exits 127 (the runner's "unsupported").
pub fn assert_unknown_test_exits_127(binary: &str) {
    let status = Command::new(binary)
        .args(["--role", "client", "--addr", "127.0.0.1:9"])
        .args(["--test", "no-such-test"])
        .status()
        .expect("run endpoint");
    assert_eq!(status.code(), Some(127), "{binary}");
}

/// Bad arguments exit 1 with a message naming the problem, and exit 1 too
/// when the message cannot be written (stderr on a full device, as a log
/// file on a full disk), not with a panic's 101.
pub fn assert_bad_arguments_exit_1(binary: &str) {
    const BAD: [&str; 2] = ["--role", "sideways"];
    let out = Command::new(binary)
        .args(BAD)
        .output()
        .expect("run endpoint");
    assert_eq!(out.status.code(), Some(1), "{binary}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown role"),
        "{binary}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    #[cfg(target_os = "linux")]
    {
        let status = Command::new(binary)
            .args(BAD)
            .stderr(full_device())
            .status()
            .expect("run endpoint");
        assert_eq!(status.code(), Some(1), "{binary}, stderr on /dev/full");
    }
}

/// A plugin that fails to load (missing file, ABI mismatch, ...) exits 1
/// with a message, before any connection.
pub fn assert_failed_plugin_load_exits_1(binary: &str, role: &str, plugin: &str) {
    let out = Command::new(binary)
        .args([
            "--role",
            role,
            "--addr",
            "127.0.0.1:9",
            "--test",
            "transfer",
        ])
        .args(["--plugin", plugin])
        .output()
        .expect("run endpoint");
    assert_eq!(out.status.code(), Some(1), "{binary}");
    assert!(!out.stderr.is_empty(), "{binary}: an error message");
}
