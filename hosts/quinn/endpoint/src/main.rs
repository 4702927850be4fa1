//! The quinn endpoint of the interop matrix: HTTP/0.9 (`hq-interop`) client
//! or server on the patched quinn, with Core QUIC plugins from the command
//! line. The contract (flags, stats JSON, exit codes) is
//! `interop-runner/ENDPOINT.md`, shared by every host.

use corequic_endpoint::{
    ALPN, Args, ClientTally, ControlResult, FLOW_CONTROL_WINDOW, Logs, PAYLOAD_CHUNK, Role,
    ServerTally, Stats, announce_listening, bind_udp, check_payload, describe_plugins_close,
    parse_request, payload,
};
mod plugins;

use corequic_quinn::{AdapterExtension, PluginFactory};
use plugins::{plugin_control, with_plugins};
use quinn::VarInt;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

fn main() -> ExitCode {
    corequic_endpoint::main(
        "quinn-endpoint",
        "quinn",
        corequic_quinn::capabilities(),
        run,
    )
}

/// The client's socket, bound to the local address of the route to the
/// server (learnt by connecting an unbound probe socket), so that the
/// path's local address is known (`local-address`, CQ-FIELD-1): quinn does
/// not learn it for a socket bound to the unspecified address.
fn client_socket(args: &Args) -> Result<std::net::UdpSocket, String> {
    let (server, unspecified) = (args.addr, args.client_bind_addr());
    let probe = std::net::UdpSocket::bind(unspecified).map_err(|e| e.to_string())?;
    probe
        .connect(server)
        .map_err(|e| format!("no route to {server}: {e}"))?;
    let ip = probe.local_addr().map_err(|e| e.to_string())?.ip();
    bind_udp(std::net::SocketAddr::new(ip, 0)).map_err(|e| format!("bind {ip}: {e}"))
}

async fn run(args: Args) -> Result<bool, String> {
    let logs: Logs = Arc::default();
    // Bound first: the plugins' `local-address` is the socket's, and a
    // server bound to port 0 learns its port here.
    let socket = match args.role {
        Role::Client => client_socket(&args)?,
        Role::Server => bind_udp(args.addr).map_err(|e| format!("bind {}: {e}", args.addr))?,
    };
    let local = socket.local_addr().map_err(|e| e.to_string())?;
    let mut transport = quinn::TransportConfig::default();
    // quinn's default stream window (1.25 MB) would cap the long-RTT
    // transfers below the link rate: flow control must not be what the
    // matrix measures (see FLOW_CONTROL_WINDOW). Congestion control stays
    // quinn's default.
    let window = VarInt::from_u64(FLOW_CONTROL_WINDOW).map_err(|e| e.to_string())?;
    transport
        .stream_receive_window(window)
        .receive_window(window)
        .send_window(FLOW_CONTROL_WINDOW);
    // Without plugins there is no runtime at all (no engine, no epoch
    // ticker): the baseline is plain quinn.
    if let Some(attachment) = args.attachment(corequic_quinn::capabilities(), &logs)? {
        let factory = PluginFactory(attachment.local_address(local));
        transport.extension_factory(Some(Arc::new(factory)));
    }
    if let Some(path) = args.qlog_file()? {
        let role = args.role.name();
        let file = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut qlog = quinn::QlogConfig::default();
        qlog.writer(Box::new(std::io::BufWriter::new(file)))
            .title(Some(format!("corequic quinn {role} {}", args.test)));
        transport.qlog_stream(qlog.into_stream());
    }
    let transport = Arc::new(transport);
    let deadline = args.timeout;
    let work = async {
        match args.role {
            Role::Server => server(&args, socket, transport, logs).await,
            Role::Client => client(&args, socket, transport, logs).await,
        }
    };
    tokio::time::timeout(deadline, work)
        .await
        .map_err(|_| corequic_endpoint::timed_out(deadline))?
}

/// The close the connection's own plugins made (a defining plugin faulted),
/// if they did: quinn reports it as the peer's.
fn plugins_close(conn: &quinn::Connection) -> Option<String> {
    let (code, reason) = with_plugins(conn, |p, _| p.local_close()).flatten()?;
    Some(describe_plugins_close(code, &reason))
}

/// How a connection whose handshake failed ended: its plugins' own close,
/// or quinn's error.
fn describe_handshake_failure(
    conn: Option<&quinn::Connection>,
    error: &quinn::ConnectionError,
) -> String {
    conn.and_then(plugins_close)
        .unwrap_or_else(|| error.to_string())
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

async fn server(
    args: &Args,
    socket: std::net::UdpSocket,
    transport: Arc<quinn::TransportConfig>,
    logs: Logs,
) -> Result<bool, String> {
    let started = Instant::now();
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".into()]).map_err(|e| e.to_string())?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der()));
    let mut tls = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(vec![CertificateDer::from(cert.cert.der().to_vec())], key)
        .map_err(|e| e.to_string())?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto =
        quinn::crypto::rustls::QuicServerConfig::try_from(tls).map_err(|e| e.to_string())?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(transport);
    let endpoint = quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        Some(config),
        socket,
        Arc::new(quinn::TokioRuntime),
    )
    .map_err(|e| format!("bind {}: {e}", args.addr))?;
    announce_listening(endpoint.local_addr().map_err(|e| e.to_string())?);

    let mut tally = ServerTally::default();
    while tally.wants_more(args) {
        let Some(incoming) = endpoint.accept().await else {
            break;
        };
        tally.handled += 1;
        let connecting = match incoming.accept() {
            Ok(connecting) => connecting,
            Err(e) => {
                tally.close = Some(e.to_string());
                continue;
            }
        };
        // Kept for a failed handshake: quinn reports a close that the
        // connection's own plugin caused as the peer's, and the plugins'
        // counters are reachable only through the connection.
        let pending = connecting.connection();
        let conn = match connecting.await {
            Ok(conn) => conn,
            Err(e) => {
                tally.close = Some(describe_handshake_failure(pending.as_ref(), &e));
                if let Some(c) = &pending {
                    let stats = with_plugins(c, |p, _| p.stats()).unwrap_or_default();
                    tally.plugins.extend(stats);
                }
                continue;
            }
        };
        let scheduled = tokio::spawn(run_controls(conn.clone(), args.controls.clone()));
        let mut streams = Vec::new();
        while let Ok((mut send, mut recv)) = conn.accept_bi().await {
            streams.push(tokio::spawn(async move {
                let request = recv.read_to_end(256).await.map_err(|e| e.to_string())?;
                let n = parse_request(&request).ok_or("bad request")?;
                let mut sent = 0u64;
                while sent < n {
                    let len = (n - sent).min(PAYLOAD_CHUNK as u64) as usize;
                    send.write_all(payload(sent, len))
                        .await
                        .map_err(|e| e.to_string())?;
                    sent += len as u64;
                }
                send.finish().map_err(|e| e.to_string())?;
                Ok::<u64, String>(sent)
            }));
        }
        for s in streams {
            if let Ok(Ok(n)) = s.await {
                tally.served += n;
            }
        }
        let reason = conn.closed().await;
        if let Some(own) = plugins_close(&conn) {
            tally.close = Some(own);
        } else if !matches!(reason, quinn::ConnectionError::ApplicationClosed(ref c) if c.error_code.into_inner() == 0)
        {
            tally.close = Some(reason.to_string());
        }
        tally.controls.extend(scheduled.await.unwrap_or_default());
        if let Some(stats) = with_plugins(&conn, |p, _| p.stats()) {
            tally.plugins.extend(stats);
        }
    }
    // The CONNECTION_CLOSE of a connection that just closed is sent by its
    // driver: exiting now could leave the peer to its idle timeout
    // (CQ-LIMIT-9).
    endpoint.wait_idle().await;
    tally.finish("quinn-endpoint", "quinn", args, started, &logs)
}

async fn run_controls(
    conn: quinn::Connection,
    controls: Vec<corequic_endpoint::ControlArg>,
) -> Vec<ControlResult> {
    corequic_endpoint::run_controls(&controls, Instant::now(), |id, args| {
        plugin_control(&conn, id, args)
    })
    .await
}

async fn client(
    args: &Args,
    socket: std::net::UdpSocket,
    transport: Arc<quinn::TransportConfig>,
    logs: Logs,
) -> Result<bool, String> {
    let tls = corequic_endpoint::tls::client_config(provider())?;
    let crypto =
        quinn::crypto::rustls::QuicClientConfig::try_from(tls).map_err(|e| e.to_string())?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(transport);
    let mut endpoint = quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        None,
        socket,
        Arc::new(quinn::TokioRuntime),
    )
    .map_err(|e| e.to_string())?;
    endpoint.set_default_client_config(config);

    let started = Instant::now();
    let connecting = endpoint
        .connect(args.addr, "localhost")
        .map_err(|e| e.to_string())?;
    let pending = connecting.connection();
    let conn = match connecting.await {
        Ok(conn) => conn,
        Err(e) => {
            // The close of a connection that failed in its handshake (a
            // plugin fault, say) is sent by its driver: exiting now could
            // leave the server to its idle timeout (CQ-LIMIT-9).
            endpoint.wait_idle().await;
            let why = describe_handshake_failure(pending.as_ref(), &e);
            corequic_endpoint::complain!("quinn-endpoint: handshake: {why}");
            // The plugins' counters say which one failed, and why.
            let mut stats = Stats::failed("quinn", args, &format!("handshake: {why}"));
            stats.plugins = pending
                .as_ref()
                .and_then(|c| with_plugins(c, |p, _| p.stats()))
                .unwrap_or_default();
            stats.logs = logs.lines();
            stats.write(args.stats.as_ref())?;
            return Ok(false);
        }
    };
    let handshake = started.elapsed();
    let scheduled = tokio::spawn(run_controls(conn.clone(), args.controls.clone()));

    let transfer_start = Instant::now();
    let outcome = download(&conn, args.size).await;
    let duration = transfer_start.elapsed();
    // Let the scheduled controls finish (they are part of the test).
    let controls = scheduled.await.unwrap_or_default();
    let plugins = with_plugins(&conn, |p, _| p.stats()).unwrap_or_default();
    let extra = vec![
        (
            "rtt_ms".into(),
            format!("{:.3}", conn.rtt().as_secs_f64() * 1e3),
        ),
        ("cwnd".into(), conn.congestion_state().window().to_string()),
    ];
    let close = match conn.close_reason() {
        Some(reason) => Some(reason.to_string()),
        None => {
            conn.close(0u32.into(), b"done");
            None
        }
    };
    endpoint.wait_idle().await;
    let tally = ClientTally {
        download: Some(outcome),
        duration,
        handshake: Some(handshake),
        close,
        plugins,
        controls,
        extra,
    };
    tally.finish("quinn-endpoint", "quinn", args, &logs)
}

/// GET `n` bytes and check every one.
///
/// Chunks are read as they arrive, in any order (quinn's unordered reads),
/// and checked at their offsets. An ordered reader leaves everything after
/// the first hole in quinn's reassembly buffer, and quinn fails the
/// connection ("too many gaps in stream buffer") when more than 1024
/// separate spans are waiting there: with a window of FLOW_CONTROL_WINDOW
/// and a slow start overshooting the bottleneck queue (which then drops
/// every other datagram), that happens at the paper's BDP link.
async fn download(conn: &quinn::Connection, n: u64) -> Result<u64, String> {
    let (mut send, mut recv) = conn.open_bi().await.map_err(|e| e.to_string())?;
    send.write_all(format!("GET /{n}\r\n").as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    send.finish().map_err(|e| e.to_string())?;
    let mut received = Coverage::default();
    while let Some(chunk) = recv
        .read_chunk(PAYLOAD_CHUNK, false)
        .await
        .map_err(|e| e.to_string())?
    {
        let (offset, bytes) = (chunk.offset, chunk.bytes);
        if bytes.is_empty() {
            continue;
        }
        let end = offset + bytes.len() as u64;
        if end > n {
            return Err(format!("more than {n} bytes"));
        }
        check_payload(offset, &bytes)?;
        received.insert(offset, end)?;
    }
    match received.contiguous() {
        Some(got) if got == n => Ok(got),
        Some(got) => Err(format!("{got} of {n} bytes")),
        None => Err(format!("holes in the {n} bytes")),
    }
}

/// The byte ranges received so far, merged.
#[derive(Default)]
struct Coverage(std::collections::BTreeMap<u64, u64>);

impl Coverage {
    /// Add `start..end`; bytes received twice are an error.
    fn insert(&mut self, mut start: u64, mut end: u64) -> Result<(), String> {
        if let Some((&s, &e)) = self.0.range(..end).next_back()
            && e > start
        {
            return Err(format!("bytes {start}..{end} overlap {s}..{e}"));
        }
        // Merge with the ranges ending at `start` and starting at `end`.
        if let Some((&s, &e)) = self.0.range(..start).next_back()
            && e == start
        {
            self.0.remove(&s);
            start = s;
        }
        if let Some(e) = self.0.remove(&end) {
            end = e;
        }
        self.0.insert(start, end);
        Ok(())
    }

    /// The byte count, if the ranges are exactly `0..count`.
    fn contiguous(&self) -> Option<u64> {
        let mut ranges = self.0.iter();
        match (ranges.next(), ranges.next()) {
            (None, _) => Some(0),
            (Some((&0, &end)), None) => Some(end),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Coverage;

    #[test]
    fn coverage_merges_ranges_received_in_any_order() {
        let mut c = Coverage::default();
        for (start, end) in [(20, 30), (0, 10), (40, 50), (10, 20), (30, 40)] {
            c.insert(start, end).expect("no overlap");
        }
        assert_eq!(c.contiguous(), Some(50));
    }

    #[test]
    fn coverage_reports_holes_and_overlaps() {
        let mut c = Coverage::default();
        c.insert(0, 10).expect("first range");
        c.insert(20, 30).expect("after a hole");
        assert_eq!(c.contiguous(), None);
        assert!(c.insert(5, 15).is_err());
        assert!(c.insert(15, 25).is_err());
        assert!(c.insert(25, 26).is_err());
        c.insert(10, 20).expect("fills the hole");
        assert_eq!(c.contiguous(), Some(30));
    }
}
