//! The s2n-quic endpoint of the interop matrix: HTTP/0.9 (`hq-interop`)
//! client or server on the patched s2n-quic, with Core QUIC plugins from the
//! command line. The contract (flags, stats JSON, exit codes) is
//! `interop-runner/ENDPOINT.md`, shared by every host.

use bytes::Bytes;
use corequic_endpoint::{
    ALPN, Args, ClientTally, ControlResult, FLOW_CONTROL_WINDOW, Logs, PAYLOAD_CHUNK, Role,
    SOCKET_BUFFER, ServerTally, Stats, announce_listening, check_payload, parse_request, payload,
};
use corequic_runtime::PluginStats;
use corequic_s2n::{AdapterExtension, ConnectionReport, PluginFactory};
use plugins::{plugin_control, with_plugins};
use s2n_quic::provider::extension::{Extension, ExtensionFactory, ExtensionInfo};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

mod connection_events;
mod plugins;
mod qlog;

/// The plugins of the command line, or none at all (then there is no
/// runtime: the baseline is plain s2n-quic).
#[derive(Debug)]
struct Plugins(Option<PluginFactory>);

impl ExtensionFactory for Plugins {
    fn new_extension(&mut self, info: &ExtensionInfo) -> Option<Box<dyn Extension>> {
        self.0.as_mut()?.new_extension(info)
    }
}

fn main() -> ExitCode {
    corequic_endpoint::main(
        "s2n-endpoint",
        "s2n-quic",
        corequic_s2n::capabilities(),
        run,
    )
}

/// Everything a run needs besides the arguments.
struct Setup {
    plugins: Plugins,
    logs: Logs,
    reports: mpsc::UnboundedReceiver<ConnectionReport>,
    qlog: qlog::Writer,
}

async fn run(args: Args) -> Result<bool, String> {
    seed_random()?;
    let logs: Logs = Arc::default();
    let (report_tx, reports) = mpsc::unbounded_channel();
    let mut factory = None;
    if let Some(attachment) = args.attachment(corequic_s2n::capabilities(), &logs)? {
        factory = Some(PluginFactory(attachment.report_sink(Arc::new(
            move |report| {
                let _ = report_tx.send(report);
            },
        ))));
    }
    let qlog = qlog::Writer::create(args.qlog_file()?.as_deref(), args.role, &args.test)?;
    let setup = Setup {
        plugins: Plugins(factory),
        logs,
        reports,
        qlog,
    };
    let deadline = args.timeout;
    let work = async {
        match args.role {
            Role::Server => server(&args, setup).await,
            Role::Client => client(&args, setup).await,
        }
    };
    tokio::time::timeout(deadline, work)
        .await
        .map_err(|_| corequic_endpoint::timed_out(deadline))?
}

/// aws-lc seeds its random generator from CPU jitter entropy once per
/// process, on first use: about 60 ms of CPU on this project's machines (the
/// jitter code is built at `-O0` on purpose, in every profile). Seeded here,
/// before the endpoint listens or connects, that time is not spent inside the
/// first handshake, where it held back the connection's timers: a plugin
/// timer armed in `init` fired up to 24 ms late (CQ-TIMER-4). s2n-quic
/// re-exports rustls only through a deprecated path, as for [`client_tls`].
#[allow(deprecated)]
fn seed_random() -> Result<(), String> {
    use s2n_quic::provider::tls::rustls::rustls;
    rustls::crypto::aws_lc_rs::default_provider()
        .secure_random
        .fill(&mut [0u8; 16])
        .map_err(|_| "aws-lc's random generator failed".to_string())
}

/// The endpoint's UDP socket: bound to `addr`, with socket buffers of
/// [`SOCKET_BUFFER`] like every endpoint's, and 1200-byte UDP payloads
/// (an MTU of 1228, no path MTU probing), the datagram size the interop
/// runner's link carries.
fn io(addr: SocketAddr) -> Result<s2n_quic::provider::io::tokio::Provider, String> {
    let buffer = SOCKET_BUFFER;
    s2n_quic::provider::io::tokio::Builder::default()
        .with_receive_address(addr)
        .and_then(|b| b.with_recv_buffer_size(buffer))
        .and_then(|b| b.with_send_buffer_size(buffer))
        .and_then(|b| b.with_max_mtu(1228))
        .and_then(|b| b.build())
        .map_err(|e| format!("bind {addr}: {e}"))
}

/// The endpoint's limits: flow-control windows and the send buffer of
/// [`FLOW_CONTROL_WINDOW`] (s2n-quic's defaults, a few MB, would cap a
/// transfer over a long-RTT link whatever the congestion window).
fn limits() -> Result<s2n_quic::provider::limits::Limits, String> {
    let window = FLOW_CONTROL_WINDOW;
    let limits = s2n_quic::provider::limits::Limits::new()
        .with_max_idle_timeout(Duration::from_secs(10))
        .and_then(|l| l.with_data_window(window))
        .and_then(|l| l.with_bidirectional_local_data_window(window))
        .and_then(|l| l.with_bidirectional_remote_data_window(window))
        .and_then(|l| l.with_unidirectional_data_window(window))
        .and_then(|l| l.with_max_send_buffer_size(window as u32));
    limits.map_err(|e| e.to_string())
}

async fn server(args: &Args, setup: Setup) -> Result<bool, String> {
    let started = Instant::now();
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".into()]).map_err(|e| e.to_string())?;
    let tls = s2n_quic::provider::tls::rustls::Server::builder()
        .with_certificate(cert.cert.pem(), cert.signing_key.serialize_pem())
        .map_err(|e| e.to_string())?
        .with_application_protocols([ALPN].iter())
        .map_err(|e| e.to_string())?
        .build()
        .map_err(|e| e.to_string())?;
    let (recorder, mut events) = connection_events::Recorder::new();
    let mut server = s2n_quic::Server::builder()
        .with_tls(tls)
        .map_err(|e| e.to_string())?
        .with_io(io(args.addr)?)
        .map_err(|e| e.to_string())?
        .with_limits(limits()?)
        .map_err(|e| e.to_string())?
        .with_event((setup.qlog, recorder))
        .map_err(|e| e.to_string())?
        .with_extension(setup.plugins)
        .map_err(|e| e.to_string())?
        .start()
        .map_err(|e| format!("bind {}: {e}", args.addr))?;
    announce_listening(server.local_addr().map_err(|e| e.to_string())?);

    let with_plugins_loaded = !args.plugins.is_empty();
    let mut reports = setup.reports;
    let mut tally = ServerTally::default();
    // Plugin reports that arrived while the loop waited for a connection.
    let mut early_reports = Vec::new();
    let mut accepted_ids = Vec::new();
    let mut freed = 0u64;
    while tally.wants_more(args) {
        let accepted = tokio::select! {
            // Biased: a connection accepted and since freed is in the accept
            // queue before its `Freed` message, and must be taken from there
            biased;
            conn = server.accept() => conn,
            Some(failed) = events.failed_handshakes.recv() => {
                tally.handled += 1;
                tally.close = Some(failed);
                continue;
            }
            Some(gone) = events.freed.recv() => {
                freed += 1;
                // Closed in the datagram that completed its handshake: s2n-quic
                // never hands such a connection to `accept()`
                if let Some(closed) = gone.closed_after_handshake
                    && !accepted_ids.contains(&gone.id)
                {
                    tally.handled += 1;
                    tally.close = Some(closed);
                }
                continue;
            }
            Some(report) = reports.recv(), if with_plugins_loaded => {
                early_reports.push(report);
                continue;
            }
        };
        let Some(mut conn) = accepted else {
            break;
        };
        accepted_ids.push(conn.id());
        tally.handled += 1;
        let scheduled = tokio::spawn(run_controls(conn.handle(), args.controls.clone()));
        let mut streams = Vec::new();
        loop {
            match conn.accept_bidirectional_stream().await {
                Ok(Some(stream)) => streams.push(tokio::spawn(serve(stream))),
                Ok(None) => break,
                Err(e) => {
                    if !is_clean_close(&e) {
                        tally.close = Some(describe_close(&e));
                    }
                    break;
                }
            }
        }
        for s in streams {
            match s.await {
                Ok(Ok(n)) => tally.served += n,
                Ok(Err(e)) => corequic_endpoint::complain!("s2n-endpoint: stream: {e}"),
                Err(e) => corequic_endpoint::complain!("s2n-endpoint: stream task: {e}"),
            }
        }
        tally.controls.extend(scheduled.await.unwrap_or_default());
    }
    // The plugins' counters arrive when s2n-quic frees each connection.
    if with_plugins_loaded {
        for _ in 0..tally.handled {
            let report = match early_reports.pop() {
                Some(report) => report,
                None => match next_report(&mut reports).await {
                    Some(report) => report,
                    None => break,
                },
            };
            tally.plugins.extend(report.stats);
            tally.close = tally.close.map(|c| with_plugin_reason(c, report.close));
        }
    }
    // Exit only once s2n-quic has freed every connection, after its closing
    // period: the CONNECTION_CLOSE of a connection that failed just now is
    // still to be sent, and the client would wait for its idle timeout.
    for _ in freed..tally.handled {
        match tokio::time::timeout(Duration::from_secs(5), events.freed.recv()).await {
            Ok(Some(_)) => {}
            _ => {
                corequic_endpoint::complain!("s2n-endpoint: a connection was not freed within 5 s");
                break;
            }
        }
    }
    tally.finish("s2n-endpoint", "s2n-quic", args, started, &setup.logs)
}

/// The plugins' counters of a connection out of the API's reach, and `close`
/// with the reason of a plugin failure: both arrive when s2n-quic frees the
/// connection, after its closing period.
async fn freed_connection_report(
    args: &Args,
    reports: &mut mpsc::UnboundedReceiver<ConnectionReport>,
    close: Option<String>,
) -> (Vec<PluginStats>, Option<String>) {
    if args.plugins.is_empty() {
        return (Vec::new(), close);
    }
    match next_report(reports).await {
        Some(report) => (
            report.stats,
            close.map(|c| with_plugin_reason(c, report.close)),
        ),
        None => (Vec::new(), close),
    }
}

/// The next connection's plugin report, or `None` (with a message) when it
/// does not come within 5 s.
async fn next_report(
    reports: &mut mpsc::UnboundedReceiver<ConnectionReport>,
) -> Option<ConnectionReport> {
    match tokio::time::timeout(Duration::from_secs(5), reports.recv()).await {
        Ok(Some(report)) => Some(report),
        _ => {
            corequic_endpoint::complain!(
                "s2n-endpoint: a connection's plugin report did not arrive"
            );
            None
        }
    }
}

/// s2n-quic sends and reports a close without its reason phrase; the reason
/// of a close the plugins caused (plugin, routine, cause) comes from the
/// adapter.
fn with_plugin_reason(close: String, plugins: Option<(u64, String)>) -> String {
    match plugins {
        Some((code, reason)) => format!("{close} ({code:#x}: {reason})"),
        None => close,
    }
}

/// A close as the other endpoints render it, with its code ("peer transport
/// close 0x8: …"): s2n-quic's own text names the error but omits the code.
fn describe_close(e: &s2n_quic::connection::Error) -> String {
    use s2n_quic::connection::Error;
    let who = |local: bool| if local { "local" } else { "peer" };
    match e {
        Error::Transport {
            code, initiator, ..
        } => format!(
            "{} transport close {:#x}: {e}",
            who(initiator.is_local()),
            code.as_u64()
        ),
        Error::Application {
            error, initiator, ..
        } => format!(
            "{} application close {:#x}: {e}",
            who(initiator.is_local()),
            u64::from(*error)
        ),
        _ => e.to_string(),
    }
}

/// A stream error, with the close that caused it rendered by [`describe_close`].
fn describe_stream_error(e: &s2n_quic::stream::Error) -> String {
    match e {
        s2n_quic::stream::Error::ConnectionError { error, .. } => describe_close(error),
        _ => e.to_string(),
    }
}

/// Whether a connection ended the normal way: the peer closed with
/// application code 0.
fn is_clean_close(e: &s2n_quic::connection::Error) -> bool {
    matches!(e, s2n_quic::connection::Error::Application { error, .. } if u64::from(*error) == 0)
}

async fn serve(stream: s2n_quic::stream::BidirectionalStream) -> Result<u64, String> {
    let (mut recv, mut send) = stream.split();
    let mut request = Vec::new();
    while let Some(chunk) = recv.receive().await.map_err(|e| e.to_string())? {
        request.extend_from_slice(&chunk);
        if request.len() > 256 {
            return Err("request too long".into());
        }
    }
    let n = parse_request(&request).ok_or("bad request")?;
    let mut sent = 0u64;
    while sent < n {
        let len = (n - sent).min(PAYLOAD_CHUNK as u64) as usize;
        send.send(Bytes::from_static(payload(sent, len)))
            .await
            .map_err(|e| e.to_string())?;
        sent += len as u64;
    }
    send.finish().map_err(|e| e.to_string())?;
    Ok(sent)
}

async fn run_controls(
    conn: s2n_quic::connection::Handle,
    controls: Vec<corequic_endpoint::ControlArg>,
) -> Vec<ControlResult> {
    corequic_endpoint::run_controls(&controls, Instant::now(), |id, args| {
        plugin_control(&conn, id, args)
    })
    .await
}

async fn client(args: &Args, mut setup: Setup) -> Result<bool, String> {
    let tls = client_tls()?;
    let bind = args.client_bind_addr();
    let mut client = s2n_quic::Client::builder()
        .with_tls(tls)
        .map_err(|e| e.to_string())?
        .with_io(io(bind)?)
        .map_err(|e| e.to_string())?
        .with_limits(limits()?)
        .map_err(|e| e.to_string())?
        .with_event(setup.qlog)
        .map_err(|e| e.to_string())?
        .with_extension(setup.plugins)
        .map_err(|e| e.to_string())?
        .start()
        .map_err(|e| e.to_string())?;

    let started = Instant::now();
    let connect = s2n_quic::client::Connect::new(args.addr).with_server_name("localhost");
    let mut conn = match client.connect(connect).await {
        Ok(conn) => conn,
        Err(e) => {
            // A handshake the plugins failed: their counters and the reason
            // arrive when s2n-quic frees the connection.
            let close = format!("handshake: {}", describe_close(&e));
            let mut stats = Stats::failed("s2n-quic", args, &close);
            (stats.plugins, stats.close) =
                freed_connection_report(args, &mut setup.reports, Some(close)).await;
            stats.logs = setup.logs.lines();
            stats.write(args.stats.as_ref())?;
            let _ = tokio::time::timeout(Duration::from_secs(1), client.wait_idle()).await;
            return Ok(false);
        }
    };
    let handshake = started.elapsed();
    let handle = conn.handle();
    let scheduled = tokio::spawn(run_controls(handle.clone(), args.controls.clone()));

    let transfer_start = Instant::now();
    let outcome = download(&mut conn, args.size).await;
    let duration = transfer_start.elapsed();
    // Let the scheduled controls finish (they are part of the test).
    let controls = scheduled.await.unwrap_or_default();
    let live_plugins = with_plugins(&handle, |p, _| p.stats());
    let mut extra = Vec::new();
    if let Some((rtt, cwnd)) =
        with_plugins(&handle, |_, cx| (cx.smoothed_rtt, cx.congestion_window))
    {
        extra.push(("rtt_ms".into(), format!("{:.3}", rtt.as_secs_f64() * 1e3)));
        extra.push(("cwnd".into(), cwnd.to_string()));
    }
    let close = outcome.as_ref().err().cloned();
    conn.close(0u32.into());
    // A connection that closed before the download ended is out of reach of
    // the API: its plugins' counters (and the reason of a plugin failure)
    // arrive when s2n-quic frees it, after the closing period.
    let (plugins, close) = match live_plugins {
        Some(stats) => (stats, close),
        None => {
            drop((conn, handle));
            freed_connection_report(args, &mut setup.reports, close).await
        }
    };
    let tally = ClientTally {
        download: Some(outcome),
        duration,
        handshake: Some(handshake),
        close,
        plugins,
        controls,
        extra,
    };
    let ok = tally.finish("s2n-endpoint", "s2n-quic", args, &setup.logs)?;
    // Give the CONNECTION_CLOSE a chance to leave before the process exits.
    let _ = tokio::time::timeout(Duration::from_secs(1), client.wait_idle()).await;
    Ok(ok)
}

/// Interop endpoints use throwaway self-signed certificates, as the QUIC
/// interop runner does: the client checks signatures but not the chain.
#[allow(deprecated)]
fn client_tls() -> Result<s2n_quic::provider::tls::rustls::Client, String> {
    use s2n_quic::provider::tls::rustls::rustls;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = corequic_endpoint::tls::client_config(provider)?;
    config.max_fragment_size = None;
    Ok(s2n_quic::provider::tls::rustls::Client::from(config))
}

/// GET `n` bytes and check every one.
async fn download(conn: &mut s2n_quic::Connection, n: u64) -> Result<u64, String> {
    let stream = conn
        .open_bidirectional_stream()
        .await
        .map_err(|e| describe_close(&e))?;
    let (mut recv, mut send) = stream.split();
    send.send(Bytes::from(format!("GET /{n}\r\n")))
        .await
        .map_err(|e| describe_stream_error(&e))?;
    send.finish().map_err(|e| describe_stream_error(&e))?;
    let mut got = 0u64;
    while let Some(chunk) = recv
        .receive()
        .await
        .map_err(|e| describe_stream_error(&e))?
    {
        check_payload(got, &chunk)?;
        got += chunk.len() as u64;
        if got > n {
            return Err(format!("more than {n} bytes"));
        }
    }
    if got != n {
        return Err(format!("{got} of {n} bytes"));
    }
    Ok(got)
}
