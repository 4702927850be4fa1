//! The quiche endpoint of the interop matrix: HTTP/0.9 (`hq-interop`) client
//! or server on the patched quiche, with Core QUIC plugins from the command
//! line. The contract (flags, stats JSON, exit codes) is
//! `interop-runner/ENDPOINT.md`, shared by every host.

use corequic_endpoint::udp::Socket;
use corequic_endpoint::{
    Args, ClientTally, ControlSchedule, Logs, Role, ServerTally, announce_listening, earliest,
};
use corequic_quiche::{AdapterExtension, PluginFactory, plugin_control, with_plugins};
use corequic_quiche_endpoint::driver::{self, App, Command, HqClient, HqServer};
use corequic_runtime::PluginStats;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;

fn main() -> ExitCode {
    corequic_endpoint::main(
        "quiche-endpoint",
        "quiche",
        corequic_quiche::capabilities(),
        run,
    )
}

/// Plugins and qlog settings applied to every connection.
fn configure(args: &Args, config: &mut quiche::Config, logs: &Logs) -> Result<(), String> {
    if let Some(attachment) = args.attachment(corequic_quiche::capabilities(), logs)? {
        let factory = PluginFactory(attachment);
        // Before `connect`/`accept`: the client encodes its transport
        // parameters inside `connect`.
        config.set_extension_factory(Some(Arc::new(factory)));
    }
    Ok(())
}

fn set_qlog(args: &Args, conn: &mut quiche::Connection) -> Result<(), String> {
    let Some(path) = args.qlog_file()? else {
        return Ok(());
    };
    let role = args.role.name();
    // A server appends every connection to the same file.
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    conn.set_qlog(
        Box::new(std::io::BufWriter::new(file)),
        format!("corequic quiche {role} {}", args.test),
        format!("quiche-endpoint {role}"),
    );
    Ok(())
}

/// The application plus the scheduled plugin-control calls, run
/// `--control` milliseconds after the handshake completed.
struct WithControls<A> {
    app: A,
    controls: ControlSchedule,
}

impl<A> WithControls<A> {
    fn new(app: A, args: &Args) -> Self {
        WithControls {
            app,
            controls: ControlSchedule::new(&args.controls),
        }
    }
}

impl<A: App> App for WithControls<A> {
    fn progress(&mut self, conn: &mut quiche::Connection) {
        // Controls start on the call after the one that saw the handshake
        // complete, so the client's Finished has been sent by then: a
        // control that closes the connection (a plugin fault) right after
        // `is_established()` turns true would leave quiche with handshake
        // data it no longer sends and an application close it sends only in
        // 1-RTT packets, so it would send nothing and strand the peer.
        let ready = self.controls.is_established();
        if conn.is_established() {
            self.controls.establish(Instant::now());
        }
        if ready {
            self.controls
                .run_due(Instant::now(), |id, args| plugin_control(conn, id, args));
        }
        self.app.progress(conn);
    }

    fn deadline(&self) -> Option<Instant> {
        earliest(self.controls.deadline(), self.app.deadline())
    }
}

/// Why a connection closed, if not with application code 0.
fn close_reason(conn: &quiche::Connection) -> Option<String> {
    let describe = |side: &str, e: &quiche::ConnectionError| {
        format!(
            "{side} {} close {:#x}: {}",
            if e.is_app { "application" } else { "transport" },
            e.error_code,
            String::from_utf8_lossy(&e.reason)
        )
    };
    if let Some(e) = conn.peer_error()
        && !(e.is_app && e.error_code == 0)
    {
        return Some(describe("peer", e));
    }
    if let Some(e) = conn.local_error()
        && !(e.is_app && e.error_code == 0)
    {
        return Some(describe("local", e));
    }
    if conn.is_timed_out() {
        return Some("idle timeout".into());
    }
    None
}

fn extra(conn: &quiche::Connection) -> Vec<(String, String)> {
    match conn.path_stats().next() {
        Some(p) => vec![
            ("rtt_ms".into(), format!("{:.3}", p.rtt.as_secs_f64() * 1e3)),
            ("cwnd".into(), p.cwnd.to_string()),
        ],
        None => Vec::new(),
    }
}

fn plugin_stats(conn: &mut quiche::Connection) -> Vec<PluginStats> {
    with_plugins(conn, |p, _| p.stats()).unwrap_or_default()
}

async fn run(args: Args) -> Result<bool, String> {
    let logs: Logs = Arc::default();
    match args.role {
        Role::Server => server(&args, logs).await,
        Role::Client => client(&args, logs).await,
    }
}

async fn server(args: &Args, logs: Logs) -> Result<bool, String> {
    let started = Instant::now();
    let mut config = driver::server_config()?;
    configure(args, &mut config, &logs)?;
    let socket = Socket::bind(args.addr)?;
    let local = socket.local_addr().map_err(|e| e.to_string())?;
    announce_listening(local);

    let mut tally = ServerTally::default();
    while tally.wants_more(args) {
        let remaining = args.timeout.saturating_sub(started.elapsed());
        let Ok(initial) = tokio::time::timeout(remaining, driver::wait_for_initial(&socket)).await
        else {
            tally.time_out(args);
            break;
        };
        let (first, peer, _dcid) = initial?;
        tally.handled += 1;
        let scid = driver::new_cid();
        let mut conn = match quiche::accept(&scid, None, local, peer, &mut config) {
            Ok(conn) => conn,
            Err(e) => {
                tally.close = Some(format!("accept: {e}"));
                continue;
            }
        };
        set_qlog(args, &mut conn)?;
        let mut app = WithControls::new(HqServer::default(), args);
        let (_tx, mut rx) = mpsc::unbounded_channel::<Command>();
        let run = driver::run(&mut conn, &socket, peer, &mut app, &mut rx, first);
        let remaining = args.timeout.saturating_sub(started.elapsed());
        match tokio::time::timeout(remaining, run).await {
            Ok(r) => r?,
            Err(_) => {
                tally.time_out(args);
                tally.controls.extend(app.controls.results);
                tally.plugins.extend(plugin_stats(&mut conn));
                break;
            }
        }
        tally.served += app.app.served;
        if let Some(reason) = close_reason(&conn) {
            tally.close = Some(reason);
        }
        tally.controls.extend(app.controls.results);
        tally.plugins.extend(plugin_stats(&mut conn));
    }
    tally.finish("quiche-endpoint", "quiche", args, started, &logs)
}

async fn client(args: &Args, logs: Logs) -> Result<bool, String> {
    let mut config = driver::client_config()?;
    configure(args, &mut config, &logs)?;
    let socket = Socket::bind(args.client_bind_addr())?;
    let local = socket.local_addr().map_err(|e| e.to_string())?;
    let started = Instant::now();
    let scid = driver::new_cid();
    let mut conn = quiche::connect(Some("localhost"), &scid, local, args.addr, &mut config)
        .map_err(|e| format!("connect: {e}"))?;
    set_qlog(args, &mut conn)?;

    let mut app = ClientApp {
        inner: WithControls::new(HqClient::new(args.size), args),
        handshake: None,
        started,
        closed: false,
    };
    let (_tx, mut rx) = mpsc::unbounded_channel::<Command>();
    let run = driver::run(&mut conn, &socket, args.addr, &mut app, &mut rx, Vec::new());
    let timed_out = match tokio::time::timeout(args.timeout, run).await {
        Ok(r) => {
            r?;
            false
        }
        Err(_) => true,
    };

    let client = app.inner.app;
    let tally = ClientTally {
        download: client.result,
        duration: client.duration.unwrap_or_default(),
        handshake: app.handshake,
        close: if timed_out {
            Some(corequic_endpoint::timed_out(args.timeout))
        } else {
            close_reason(&conn)
        },
        plugins: plugin_stats(&mut conn),
        controls: app.inner.controls.results,
        extra: extra(&conn),
    };
    tally.finish("quiche-endpoint", "quiche", args, &logs)
}

/// The client: the download plus the scheduled controls; it keeps the
/// connection open until every control has run (they are part of the test),
/// then closes it with code 0 (1 if the download failed).
struct ClientApp {
    inner: WithControls<HqClient>,
    handshake: Option<std::time::Duration>,
    started: Instant,
    closed: bool,
}

impl App for ClientApp {
    fn progress(&mut self, conn: &mut quiche::Connection) {
        if self.handshake.is_none() && conn.is_established() {
            self.handshake = Some(self.started.elapsed());
        }
        self.inner.app.keep_open = true;
        self.inner.progress(conn);
        if let Some(result) = &self.inner.app.result
            && self.inner.controls.is_done()
            && !self.closed
        {
            self.closed = true;
            let code = if result.is_ok() { 0 } else { 1 };
            let _ = conn.close(true, code, b"done");
        }
    }

    fn deadline(&self) -> Option<Instant> {
        self.inner.deadline()
    }
}
