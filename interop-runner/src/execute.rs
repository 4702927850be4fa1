//! Running one client/server pair through the link emulator.

use crate::hosts::Host;
use crate::link::{DatagramRecord, LinkParams, Relay, trace_csv};
use serde::Deserialize;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

/// The plugins and plugin-control calls of one side.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SideSpec {
    /// Plugin names (`build/plugins/<name>.wasm`), in load order; a name
    /// may carry its grant as `name=GRANTS` (ENDPOINT.md).
    pub plugins: Vec<String>,
    /// `--control` values (`MS:ID[:ARG]`).
    pub controls: Vec<String>,
    /// Further endpoint arguments, appended as given.
    pub extra_args: Vec<String>,
}

impl SideSpec {
    /// A side with these plugins and no controls.
    pub fn with(plugins: &[&str]) -> SideSpec {
        SideSpec {
            plugins: plugins.iter().map(|p| p.to_string()).collect(),
            controls: Vec::new(),
            extra_args: Vec::new(),
        }
    }

    /// Add a control call.
    pub fn control(mut self, spec: impl Into<String>) -> SideSpec {
        self.controls.push(spec.into());
        self
    }
}

/// One run of a cell.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// Its label in the cell (`baseline`, `plugin`, `padded-3`, ...).
    pub label: String,
    /// The emulated path.
    pub link: LinkParams,
    /// Bytes the client downloads.
    pub file_size: u64,
    /// The server side.
    pub server: SideSpec,
    /// The client side.
    pub client: SideSpec,
    /// The endpoints' `--timeout`, seconds.
    pub timeout_seconds: u64,
    /// A performance measurement: the endpoints write no qlog.
    pub measurement: bool,
    /// The client connects to the server directly, without the link
    /// emulator (`link` is then ignored and there is no trace).
    pub direct: bool,
}

/// One plugin's counters in the stats JSON.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct PluginCounters {
    /// Plugin name.
    pub name: String,
    /// Whether it was enabled.
    pub enabled: bool,
    /// Routine calls.
    pub calls: u64,
    /// Why it was removed, if it was.
    pub removed: Option<String>,
    /// Wall time inside the calls the host made into the plugin, ns, where
    /// the endpoint reports it.
    pub call_time_ns: Option<u64>,
}

/// One plugin-control call in the stats JSON.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ControlRecord {
    /// ms after the handshake.
    pub at_ms: u64,
    /// The control id.
    pub id: u64,
    /// Rendered results.
    pub result: Option<Vec<String>>,
    /// The error, if it failed.
    pub error: Option<String>,
}

/// One plugin log line in the stats JSON.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct LogRecord {
    /// The plugin.
    pub plugin: String,
    /// Level name.
    pub level: String,
    /// The message.
    pub message: String,
    /// Rendered fields.
    pub fields: Vec<(String, String)>,
}

impl LogRecord {
    /// The value of a field.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The parts of the stats JSON (schema 1, ENDPOINT.md) the checks use.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct EndpointStats {
    /// Schema version.
    pub schema: u32,
    /// Whether the endpoint considers the test passed.
    pub ok: bool,
    /// Bytes received (client) or served (server).
    pub bytes: u64,
    /// Transfer time (client) or run time (server), ms.
    pub duration_ms: f64,
    /// The connection's error, if it closed with one.
    pub close: Option<String>,
    /// Per-plugin counters.
    pub plugins: Vec<PluginCounters>,
    /// Plugin-control results.
    pub controls: Vec<ControlRecord>,
    /// Plugin log lines.
    pub logs: Vec<LogRecord>,
    /// The process's peak resident set size, KiB, where the endpoint
    /// reports it.
    pub peak_rss_kib: Option<u64>,
    /// The CPU time the process had used when it wrote its stats, ms,
    /// where the endpoint reports it.
    pub cpu_ms: Option<f64>,
}

impl EndpointStats {
    /// Log lines of `plugin` with `message`.
    pub fn logs_of<'a>(
        &'a self,
        plugin: &'a str,
        message: &'a str,
    ) -> impl Iterator<Item = &'a LogRecord> + 'a {
        self.logs
            .iter()
            .filter(move |l| l.plugin == plugin && l.message == message)
    }
}

/// What one endpoint process did.
#[derive(Debug, Clone)]
pub struct EndpointOutcome {
    /// Exit code; `None` when it was killed.
    pub exit_code: Option<i32>,
    /// The parsed stats JSON, if it wrote one.
    pub stats: Option<EndpointStats>,
    /// The stats JSON text.
    pub stats_json: String,
    /// The command line arguments it was given.
    pub args: Vec<String>,
}

/// What one run produced.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The run's specification.
    pub spec: RunSpec,
    /// The server process.
    pub server: EndpointOutcome,
    /// The client process.
    pub client: EndpointOutcome,
    /// Every datagram the link saw.
    pub trace: Vec<DatagramRecord>,
    /// The run's folder.
    pub folder: PathBuf,
    /// Trouble of the runner itself (server never bound, ...).
    pub runner_error: Option<String>,
}

impl RunOutcome {
    /// Whether an endpoint answered "unsupported" (127).
    pub fn unsupported(&self) -> bool {
        let unsupported = Some(corequic_contract::EXIT_UNSUPPORTED);
        self.server.exit_code == unsupported || self.client.exit_code == unsupported
    }
}

/// Where plugins and binaries are.
#[derive(Debug, Clone)]
pub struct Environment {
    /// Folder of the `<plugin>.wasm` components.
    pub plugin_dir: PathBuf,
}

/// The environment variable through which endpoints learn where to cache
/// compiled plugins (ENDPOINT.md); an endpoint may ignore it.
pub use corequic_contract::PLUGIN_CACHE_VAR;

impl Environment {
    /// Where the endpoints keep compiled plugins: `plugin-cache` beside the
    /// plugin folder, so that a plugin is compiled once per run and not once
    /// per endpoint process.
    pub fn plugin_cache(&self) -> PathBuf {
        self.plugin_dir.with_file_name("plugin-cache")
    }

    /// The component of the plugin `name`.
    pub fn plugin_path(&self, name: &str) -> PathBuf {
        self.plugin_dir.join(format!("{name}.wasm"))
    }
}

fn side_args(env: &Environment, side: &SideSpec) -> Vec<String> {
    let mut args = Vec::new();
    for p in &side.plugins {
        let (name, grants) = match p.split_once('=') {
            Some((name, grants)) => (name, format!("={grants}")),
            None => (p.as_str(), String::new()),
        };
        args.push("--plugin".into());
        args.push(format!("{}{grants}", env.plugin_path(name).display()));
    }
    for c in &side.controls {
        args.push("--control".into());
        args.push(c.clone());
    }
    args.extend(side.extra_args.iter().cloned());
    args
}

/// An endpoint's command: its arguments and the plugin cache of the run.
fn endpoint_command(env: &Environment, binary: &Path, args: &[String]) -> Command {
    let mut command = Command::new(binary);
    command
        .args(args)
        .env(PLUGIN_CACHE_VAR, env.plugin_cache())
        .stdin(Stdio::null());
    command
}

fn spawn(env: &Environment, binary: &Path, args: &[String], log: &Path) -> std::io::Result<Child> {
    let out = File::create(log)?;
    let err = out.try_clone()?;
    endpoint_command(env, binary, args)
        .stdout(out)
        .stderr(err)
        .spawn()
}

/// Wait for a child until `deadline`, then kill it.
fn wait_or_kill(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => return None,
        }
    }
}

/// A server started on port 0, and the address it announced on stdout
/// (ENDPOINT.md's [`corequic_contract::LISTENING`] line). Its stdout and
/// stderr go to `log`.
pub fn start_server(
    env: &Environment,
    binary: &Path,
    args: &[String],
    log: &Path,
    deadline: Instant,
) -> Result<(Child, SocketAddr), (Option<Child>, String)> {
    let spawned = File::create(log).and_then(|out| {
        endpoint_command(env, binary, args)
            .stdout(Stdio::piped())
            .stderr(out)
            .spawn()
    });
    let mut child = spawned.map_err(|e| (None, format!("starting the server: {e}")))?;
    let Some(stdout) = child.stdout.take() else {
        return Err((Some(child), "the server's stdout is not a pipe".into()));
    };
    // Copy stdout into the log, and hand over the first LISTENING line;
    // the pipe is drained until the server exits, so it never blocks.
    let (tx, rx) = std::sync::mpsc::channel();
    let log_path = log.to_path_buf();
    std::thread::spawn(move || {
        let mut log = std::fs::OpenOptions::new().append(true).open(log_path).ok();
        let mut tx = Some(tx);
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(addr) = corequic_contract::parse_listening(&line)
                && let Some(tx) = tx.take()
            {
                let _ = tx.send(addr);
            }
            if let Some(log) = log.as_mut() {
                let _ = writeln!(log, "{line}");
            }
        }
    });
    loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(addr) => return Ok((child, addr)),
            Err(RecvTimeoutError::Disconnected) => {
                let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
                return Err((
                    Some(child),
                    format!("the server exited before listening ({status})"),
                ));
            }
            Err(RecvTimeoutError::Timeout) if Instant::now() >= deadline => {
                return Err((Some(child), "the server did not listen in time".into()));
            }
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
}

fn read_stats(path: &Path) -> (Option<EndpointStats>, String) {
    match std::fs::read_to_string(path) {
        Ok(text) => (serde_json::from_str(&text).ok(), text),
        Err(_) => (None, String::new()),
    }
}

/// Run one client/server pair through the link; everything goes to `folder`.
pub fn run_pair(
    env: &Environment,
    server_host: &Host,
    client_host: &Host,
    test: &str,
    spec: &RunSpec,
    folder: &Path,
) -> RunOutcome {
    let _ = std::fs::create_dir_all(folder.join("qlog"));
    let timeout = spec.timeout_seconds.to_string();
    let common = |role: &str, addr: SocketAddr| -> Vec<String> {
        let mut args: Vec<String> = [
            "--role",
            role,
            "--addr",
            &addr.to_string(),
            "--test",
            test,
            "--stats",
            &folder.join(format!("{role}.json")).display().to_string(),
            "--timeout",
            &timeout,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if !spec.measurement {
            args.extend(["--qlog".into(), folder.join("qlog").display().to_string()]);
        }
        args
    };
    let server_args_for = |addr: SocketAddr| {
        let mut args = common("server", addr);
        args.extend(["--connections".into(), "1".into()]);
        args.extend(side_args(env, &spec.server));
        args
    };
    let mut outcome = RunOutcome {
        spec: spec.clone(),
        server: EndpointOutcome {
            exit_code: None,
            stats: None,
            stats_json: String::new(),
            args: Vec::new(),
        },
        client: EndpointOutcome {
            exit_code: None,
            stats: None,
            stats_json: String::new(),
            args: Vec::new(),
        },
        trace: Vec::new(),
        folder: folder.to_path_buf(),
        runner_error: None,
    };
    // Grace beyond the endpoints' own timeout before the runner kills them.
    let grace = Duration::from_secs(spec.timeout_seconds + 15);
    let server_log = folder.join("server.log");
    let server_args = server_args_for(SocketAddr::from(([127, 0, 0, 1], 0)));
    outcome.server.args = server_args.clone();
    let started = start_server(
        env,
        &server_host.binary,
        &server_args,
        &server_log,
        Instant::now() + grace,
    );
    let (mut server, server_addr) = match started {
        Ok(started) => started,
        Err((child, e)) => {
            // An endpoint that rejects the test exits before listening.
            outcome.server.exit_code = child
                .and_then(|mut c| wait_or_kill(&mut c, Instant::now()))
                .and_then(|s| s.code());
            outcome.runner_error = Some(e);
            return outcome;
        }
    };
    outcome.server.exit_code = None;
    let relay = if spec.direct {
        None
    } else {
        match Relay::start(server_addr, spec.link.clone()) {
            Ok(relay) => Some(relay),
            Err(e) => {
                let _ = server.kill();
                let _ = server.wait();
                outcome.runner_error = Some(format!("starting the link: {e}"));
                return outcome;
            }
        }
    };
    let client_addr = relay
        .as_ref()
        .map_or(server_addr, Relay::client_facing_addr);
    let mut client_args = common("client", client_addr);
    client_args.extend(["--size".into(), spec.file_size.to_string()]);
    client_args.extend(side_args(env, &spec.client));
    outcome.client.args = client_args.clone();
    let client_status = match spawn(
        env,
        &client_host.binary,
        &client_args,
        &folder.join("client.log"),
    ) {
        Ok(mut child) => wait_or_kill(&mut child, Instant::now() + grace),
        Err(e) => {
            outcome.runner_error = Some(format!("starting the client: {e}"));
            None
        }
    };
    outcome.client.exit_code = client_status.and_then(|s| s.code());
    // The server exits after its one connection; a server that never saw
    // the client (or hangs) is killed after its own timeout.
    let server_deadline = Instant::now() + grace;
    outcome.server.exit_code = wait_or_kill(&mut server, server_deadline).and_then(|s| s.code());
    outcome.trace = relay.map(Relay::stop).unwrap_or_default();
    let _ = std::fs::write(folder.join("link.csv"), trace_csv(&outcome.trace));
    (outcome.server.stats, outcome.server.stats_json) = read_stats(&folder.join("server.json"));
    (outcome.client.stats, outcome.client.stats_json) = read_stats(&folder.join("client.json"));
    let _ = std::fs::write(
        folder.join("commands.txt"),
        format!(
            "link: {}\nserver: {} {}\nclient: {} {}\n",
            if spec.direct {
                "none (direct)".to_string()
            } else {
                spec.link.describe()
            },
            server_host.binary.display(),
            server_args.join(" "),
            client_host.binary.display(),
            client_args.join(" ")
        ),
    );
    outcome
}
