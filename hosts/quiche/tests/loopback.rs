//! quiche client ↔ quiche server, both with the hook patch, over real UDP on
//! loopback through a recording relay: one test per reference plugin, each
//! with a byte-exact download and the plugin's effect observed.

mod common;

use corequic_endpoint::{PAYLOAD_CHUNK, payload};
use corequic_quiche::driver::{self, App, Command, HqServer};
use corequic_quiche::{PluginFactory, plugin_control, with_plugins};
use corequic_runtime::abi::{self, PluginVal};
use corequic_runtime::{Grants, LogRecord, Plugin, Runtime, RuntimeConfig};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// The endpoints' datagram size (no PMTU discovery).
const MTU: usize = 1200;
/// How long any awaited event may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(20);

fn runtime() -> Arc<Runtime> {
    static RUNTIME: OnceLock<Arc<Runtime>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            Arc::new(
                Runtime::new(RuntimeConfig::default(), corequic_quiche::capabilities())
                    .expect("runtime"),
            )
        })
        .clone()
}

fn plugin(name: &str) -> Arc<Plugin> {
    runtime()
        .load_file(&common::plugin_path(name), &Grants::all())
        .expect("plugin loads")
}

/// Log records of one side, as a stream of events and a list.
struct Logs {
    rx: mpsc::UnboundedReceiver<LogRecord>,
    all: Arc<Mutex<Vec<LogRecord>>>,
}

impl Logs {
    /// Wait until a record from `plugin` with `message` arrives.
    async fn wait_for(&mut self, plugin: &str, message: &str) -> LogRecord {
        let wait = async {
            while let Some(r) = self.rx.recv().await {
                if r.plugin == plugin && r.message == message {
                    return r;
                }
            }
            panic!("log channel closed before {plugin}: {message}");
        };
        tokio::time::timeout(PATIENCE, wait)
            .await
            .unwrap_or_else(|_| panic!("no log `{message}` from {plugin}"))
    }

    fn all(&self, plugin: &str, message: &str) -> Vec<LogRecord> {
        let all = self.all.lock().unwrap_or_else(|e| e.into_inner());
        all.iter()
            .filter(|r| r.plugin == plugin && r.message == message)
            .cloned()
            .collect()
    }
}

fn config(server: bool, plugins: &[&str]) -> (quiche::Config, Logs) {
    let (tx, rx) = mpsc::unbounded_channel();
    let all: Arc<Mutex<Vec<LogRecord>>> = Arc::default();
    let sink_all = all.clone();
    let mut config = if server {
        driver::server_config()
    } else {
        driver::client_config()
    }
    .expect("config");
    if !plugins.is_empty() {
        let factory = PluginFactory::new(runtime(), plugins.iter().map(|p| plugin(p)).collect())
            .log_sink(Arc::new(move |r: &LogRecord| {
                sink_all
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(r.clone());
                let _ = tx.send(r.clone());
            }));
        config.set_extension_factory(Some(Arc::new(factory)));
    }
    (config, Logs { rx, all })
}

/// One datagram seen by the relay.
#[derive(Debug, Clone, Copy)]
struct Seen {
    from_server: bool,
    size: usize,
    short_header: bool,
}

/// A UDP relay between client and server that records every datagram.
async fn relay(server: SocketAddr) -> (SocketAddr, Arc<Mutex<Vec<Seen>>>) {
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .expect("relay socket");
    let addr = socket.local_addr().expect("relay address");
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let record = seen.clone();
    tokio::spawn(async move {
        let mut client = None;
        let mut buf = vec![0u8; 65_536];
        while let Ok((n, from)) = socket.recv_from(&mut buf).await {
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
                let _ = socket.send_to(&buf[..n], to).await;
            }
        }
    });
    (addr, seen)
}

/// A download the test asked the client for.
struct Download {
    stream: u64,
    size: u64,
    received: u64,
    requested: bool,
    first_bytes: Option<oneshot::Sender<()>>,
    done: Option<oneshot::Sender<Result<(), String>>>,
}

type Downloads = Arc<Mutex<Vec<Download>>>;

/// The test application: an hq-interop server, or a client running the
/// downloads the test queues; both report when the handshake is complete.
struct TestApp {
    server: Option<HqServer>,
    downloads: Downloads,
    established: Option<oneshot::Sender<()>>,
}

impl App for TestApp {
    fn progress(&mut self, conn: &mut quiche::Connection) {
        if conn.is_established()
            && let Some(tx) = self.established.take()
        {
            let _ = tx.send(());
        }
        if let Some(server) = &mut self.server {
            server.progress(conn);
            return;
        }
        let mut downloads = self.downloads.lock().unwrap_or_else(|e| e.into_inner());
        let mut buf = vec![0u8; PAYLOAD_CHUNK];
        for d in downloads.iter_mut() {
            if !d.requested {
                let request = format!("GET /{}\r\n", d.size);
                d.requested = conn.stream_send(d.stream, request.as_bytes(), true).is_ok();
                continue;
            }
            while d.done.is_some()
                && let Ok((n, fin)) = conn.stream_recv(d.stream, &mut buf)
            {
                let mut result = None;
                if buf[..n] != *payload(d.received, n) {
                    result = Some(Err(format!("bytes at {} differ", d.received)));
                }
                d.received += n as u64;
                if n > 0
                    && let Some(tx) = d.first_bytes.take()
                {
                    let _ = tx.send(());
                }
                if fin && result.is_none() {
                    result = Some(if d.received == d.size {
                        Ok(())
                    } else {
                        Err(format!("{} of {} bytes", d.received, d.size))
                    });
                }
                if let Some(r) = result
                    && let Some(tx) = d.done.take()
                {
                    let _ = tx.send(r);
                }
            }
        }
    }
}

/// One side of a running connection.
struct Side {
    tx: mpsc::UnboundedSender<Command>,
    logs: Logs,
    task: Option<JoinHandle<quiche::Connection>>,
}

impl Side {
    /// Run `f` on the connection inside its driver.
    async fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut quiche::Connection) -> R + Send + 'static,
    ) -> R {
        let (tx, rx) = oneshot::channel();
        let sent = self.tx.send(Box::new(move |conn| {
            let _ = tx.send(f(conn));
        }));
        assert!(sent.is_ok(), "the connection's driver has ended");
        tokio::time::timeout(PATIENCE, rx)
            .await
            .expect("the driver answers")
            .expect("the connection's driver has ended")
    }

    async fn control(&self, id: u64, args: Vec<PluginVal>) -> Result<Vec<PluginVal>, String> {
        self.call(move |conn| plugin_control(conn, id, &args))
            .await
            .expect("plugins on this connection")
            .map_err(|e| e.to_string())
    }

    async fn frame_counts(&self, frame_type: u64) -> (u64, u64, u64) {
        self.call(move |conn| with_plugins(conn, |p, _| p.frame_counts(frame_type)))
            .await
            .expect("plugins on this connection")
    }

    async fn stats(&self) -> Vec<corequic_runtime::PluginStats> {
        self.call(|conn| with_plugins(conn, |p, _| p.stats()))
            .await
            .expect("plugins on this connection")
    }

    /// Wait until the connection is closed and return it.
    async fn closed(&mut self) -> quiche::Connection {
        let task = self.task.take().expect("not awaited yet");
        tokio::time::timeout(PATIENCE, task)
            .await
            .expect("the connection closes")
            .expect("driver task")
    }
}

struct Pair {
    client: Side,
    server: Side,
    downloads: Downloads,
    next_stream: u64,
    seen: Arc<Mutex<Vec<Seen>>>,
}

/// A quiche server answering `GET /<n>` and a quiche client connected to it
/// through the relay, both with their handshake complete.
async fn pair(client_plugins: &[&str], server_plugins: &[&str]) -> Pair {
    let (mut server_config, server_logs) = config(true, server_plugins);
    let (mut client_config, client_logs) = config(false, client_plugins);
    let server_socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .expect("server socket");
    let server_addr = server_socket.local_addr().expect("server address");
    let (relay_addr, seen) = relay(server_addr).await;

    let (server_tx, mut server_rx) = mpsc::unbounded_channel::<Command>();
    let (server_up, server_established) = oneshot::channel();
    let server_task = tokio::spawn(async move {
        let (first, peer, _) = driver::wait_for_initial(&server_socket)
            .await
            .expect("initial");
        let mut conn = quiche::accept(
            &driver::new_cid(),
            None,
            server_addr,
            peer,
            &mut server_config,
        )
        .expect("accept");
        let mut app = TestApp {
            server: Some(HqServer::default()),
            downloads: Arc::default(),
            established: Some(server_up),
        };
        driver::run(
            &mut conn,
            &server_socket,
            peer,
            &mut app,
            &mut server_rx,
            Some(first),
        )
        .await
        .expect("server driver");
        conn
    });

    let client_socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .expect("client socket");
    let client_addr = client_socket.local_addr().expect("client address");
    let downloads: Downloads = Arc::default();
    let (client_tx, mut client_rx) = mpsc::unbounded_channel::<Command>();
    let (client_up, client_established) = oneshot::channel();
    let client_downloads = downloads.clone();
    let client_task = tokio::spawn(async move {
        let mut conn = quiche::connect(
            Some("localhost"),
            &driver::new_cid(),
            client_addr,
            relay_addr,
            &mut client_config,
        )
        .expect("connect");
        let mut app = TestApp {
            server: None,
            downloads: client_downloads,
            established: Some(client_up),
        };
        driver::run(
            &mut conn,
            &client_socket,
            relay_addr,
            &mut app,
            &mut client_rx,
            None,
        )
        .await
        .expect("client driver");
        // The connection is over: unfinished downloads end with an error.
        app.downloads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        conn
    });
    for (name, up) in [
        ("client", client_established),
        ("server", server_established),
    ] {
        tokio::time::timeout(PATIENCE, up)
            .await
            .unwrap_or_else(|_| panic!("{name} handshake"))
            .unwrap_or_else(|_| panic!("{name} closed during the handshake"));
    }
    Pair {
        client: Side {
            tx: client_tx,
            logs: client_logs,
            task: Some(client_task),
        },
        server: Side {
            tx: server_tx,
            logs: server_logs,
            task: Some(server_task),
        },
        downloads,
        next_stream: 0,
        seen,
    }
}

impl Pair {
    /// Start downloading `size` bytes on a new stream; the receivers fire
    /// on the first bytes and at the end (with the byte-exact check).
    async fn start_download(
        &mut self,
        size: u64,
    ) -> (oneshot::Receiver<()>, oneshot::Receiver<Result<(), String>>) {
        let (first_tx, first_rx) = oneshot::channel();
        let (done_tx, done_rx) = oneshot::channel();
        self.downloads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Download {
                stream: self.next_stream,
                size,
                received: 0,
                requested: false,
                first_bytes: Some(first_tx),
                done: Some(done_tx),
            });
        self.next_stream += 4;
        // Wake the driver so that it sends the request.
        self.client.call(|_| ()).await;
        (first_rx, done_rx)
    }

    /// Download `size` bytes and check them byte by byte.
    async fn download(&mut self, size: u64) -> Result<(), String> {
        let (_, done) = self.start_download(size).await;
        tokio::time::timeout(PATIENCE, done)
            .await
            .map_err(|_| "download timed out".to_string())?
            .map_err(|_| "the connection closed during the download".to_string())?
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[tokio::test]
async fn padding_makes_every_1rtt_datagram_mtu_sized() {
    let mut p = pair(&[], &["padding"]).await;
    p.download(300_000).await.expect("byte-exact download");
    let seen = p.seen();
    let server_1rtt: Vec<_> = seen
        .iter()
        .filter(|s| s.from_server && s.short_header)
        .collect();
    assert!(
        server_1rtt.len() > 100,
        "{} server datagrams",
        server_1rtt.len()
    );
    for s in &server_1rtt {
        assert_eq!(s.size, MTU, "server 1-RTT datagram of {} bytes", s.size);
    }
    // The unpadded client sends small ACK-only datagrams.
    assert!(
        seen.iter()
            .any(|s| !s.from_server && s.short_header && s.size < MTU)
    );
}

#[tokio::test]
async fn probe_returns_a_latency_through_plugin_control() {
    let mut p = pair(&["probe"], &[]).await;
    let sent = p.client.control(1, vec![]).await.expect("probe");
    assert!(matches!(sent.as_slice(), [PluginVal::U64(_)]));
    // A download takes several round trips: the PATH_RESPONSE is back by then.
    p.download(100_000).await.expect("byte-exact download");
    let latency = p.client.control(2, vec![]).await.expect("latency");
    let [PluginVal::Duration(ns)] = latency.as_slice() else {
        panic!("expected a duration, got {latency:?}")
    };
    assert!(
        *ns > 0 && *ns < 1_000_000_000,
        "loopback round trip of {ns} ns"
    );
}

#[tokio::test]
async fn bdp_sets_the_servers_window_from_frame_0xbd() {
    let mut p = pair(&["bdp"], &["bdp"]).await;
    let window = 500_000u64;
    let r = p
        .client
        .control(0x80000, vec![PluginVal::U64(window)])
        .await;
    assert_eq!(r, Ok(vec![]));
    let resumed = p
        .server
        .logs
        .wait_for("bdp", "congestion window resumed")
        .await;
    assert_eq!(resumed.fields[0].1, PluginVal::U64(window));
    let cwnd = p
        .server
        .call(|conn| conn.path_stats().next().map(|s| s.cwnd))
        .await
        .expect("a path");
    assert!(cwnd as u64 >= window, "server cwnd {cwnd}");
    p.download(200_000).await.expect("byte-exact download");
    assert_eq!(
        p.client.frame_counts(0xBD).await,
        (1, 1, 0),
        "0xBD sent once and acknowledged"
    );
}

#[tokio::test]
async fn dummy_frames_flow_both_ways_and_toggle_padding() {
    let mut p = pair(&["padding", "dummy"], &["dummy"]).await;
    p.download(100_000).await.expect("byte-exact download");
    let off = p.client.logs.wait_for("dummy", "padding toggled").await;
    assert!(
        off.fields
            .contains(&("padding".into(), PluginVal::Bool(false)))
    );
    let on = p.client.logs.wait_for("dummy", "padding toggled").await;
    assert!(
        on.fields
            .contains(&("padding".into(), PluginVal::Bool(true)))
    );
    for side in [&p.client, &p.server] {
        let (sent, acked, _) = side.frame_counts(0x42).await;
        // At most one in flight, so about one per round trip each way.
        assert!(
            sent >= 4 && acked + 1 >= sent,
            "DUMMY sent {sent}, acked {acked}"
        );
    }
    // The server has no padding plugin: its toggle calls fail cleanly.
    p.server
        .logs
        .wait_for("dummy", "padding not available")
        .await;
    assert!(p.server.logs.all("dummy", "padding toggled").is_empty());
}

#[tokio::test]
async fn ack_logger_logs_processed_acks() {
    let mut p = pair(&[], &["ack-logger"]).await;
    p.download(200_000).await.expect("byte-exact download");
    let first = p.server.logs.wait_for("ack-logger", "ack processed").await;
    assert!(
        first
            .fields
            .iter()
            .any(|(k, _)| k == "largest-acknowledged")
    );
    // Read the log and the server's packet count inside the driver, so that
    // no ACK is processed in between.
    let all = p.server.logs.all.clone();
    let (largest, sent) = p
        .server
        .call(move |conn| {
            let all = all.lock().unwrap_or_else(|e| e.into_inner());
            let largest: Vec<u64> = all
                .iter()
                .filter(|r| r.plugin == "ack-logger" && r.message == "ack processed")
                .filter_map(|r| {
                    r.fields.iter().find_map(|(k, v)| match (k.as_str(), v) {
                        ("largest-acknowledged", PluginVal::U64(n)) => Some(*n),
                        _ => None,
                    })
                })
                .collect();
            (largest, conn.stats().sent as u64)
        })
        .await;
    // The client's 1-RTT datagrams carry its ACKs (it sends nothing else
    // but the request): one log line per ACK the server processed, each
    // acknowledging a packet the server sent, in order.
    let client_1rtt = p
        .seen()
        .iter()
        .filter(|s| !s.from_server && s.short_header)
        .count();
    assert!(
        !largest.is_empty() && largest.len() <= client_1rtt && largest.len() + 2 >= client_1rtt,
        "{} ACKs logged, {client_1rtt} client 1-RTT datagrams",
        largest.len()
    );
    assert!(largest.windows(2).all(|w| w[0] <= w[1]), "{largest:?}");
    assert!(largest.iter().all(|&n| n < sent), "{largest:?} of {sent}");
}

#[tokio::test]
async fn bdp_against_a_peer_without_plugins_negotiates_nothing() {
    let mut p = pair(&["bdp", "dummy"], &[]).await;
    let _ = p
        .client
        .control(0x80000, vec![PluginVal::U64(500_000)])
        .await;
    p.download(200_000).await.expect("byte-exact download");
    let stats = p.client.stats().await;
    assert!(
        stats.iter().all(|s| !s.enabled),
        "nothing negotiated: {stats:?}"
    );
    assert_eq!(p.client.frame_counts(0xBD).await, (0, 0, 0));
    assert_eq!(p.client.frame_counts(0x42).await, (0, 0, 0));
}

#[tokio::test]
async fn padding_alone_on_the_client_works() {
    let mut p = pair(&["padding"], &[]).await;
    p.download(100_000).await.expect("byte-exact download");
    let client_1rtt: Vec<_> = p
        .seen()
        .into_iter()
        .filter(|s| !s.from_server && s.short_header)
        .collect();
    assert!(!client_1rtt.is_empty());
    assert!(client_1rtt.iter().all(|s| s.size == MTU), "{client_1rtt:?}");
}

#[tokio::test]
async fn padding_also_pads_the_connection_close() {
    let mut p = pair(&["padding"], &[]).await;
    p.download(100_000).await.expect("byte-exact download");
    p.client
        .call(|conn| conn.close(true, 0, b"done"))
        .await
        .expect("close");
    p.client.closed().await;
    let server = p.server.closed().await;
    // The server read the padded close; the relay saw it before passing it on.
    let close = server.peer_error().expect("the server received the close");
    assert!(close.is_app && close.error_code == 0, "{close:?}");
    let client_1rtt: Vec<_> = p
        .seen()
        .into_iter()
        .filter(|s| !s.from_server && s.short_header)
        .collect();
    assert!(client_1rtt.iter().all(|s| s.size == MTU), "{client_1rtt:?}");
}

#[tokio::test]
async fn a_trap_in_a_define_routine_closes_with_the_plugin_failure_code() {
    let mut p = pair(&[], &["test-hostile"]).await;
    // Arm a trap in the hostile plugin's should-send-frame (DEFINE).
    assert_eq!(p.server.control(0x48_0007, vec![]).await, Ok(vec![]));
    let err = p
        .download(100_000)
        .await
        .expect_err("the connection closes");
    assert!(err.contains("closed"), "{err}");
    let client = p.client.closed().await;
    let err = client.peer_error().expect("closed by the server");
    assert!(err.is_app, "{err:?}");
    assert_eq!(err.error_code, abi::PLUGIN_FAILURE_ERROR_CODE);
    let text = String::from_utf8_lossy(&err.reason);
    assert!(
        text.contains("hostile") && text.contains("should-send-frame"),
        "{text}"
    );
}

#[tokio::test]
async fn a_trap_in_an_after_observer_leaves_the_transfer_intact() {
    let mut p = pair(&[], &["test-observer", "ack-logger"]).await;
    assert_eq!(p.server.control(0x4f_0001, vec![]).await, Ok(vec![]));
    p.download(300_000)
        .await
        .expect("byte-exact download despite the fault");
    let stats = p.server.stats().await;
    assert!(
        stats[0]
            .removed
            .as_deref()
            .is_some_and(|r| r.contains("process-frame (after)")),
        "{stats:?}"
    );
    assert_eq!(stats[1].removed, None);
    p.download(10_000)
        .await
        .expect("the connection still works");
}

#[tokio::test]
async fn an_infinite_loop_mid_transfer_is_cut_by_the_deadline() {
    let mut p = pair(&[], &["test-hostile"]).await;
    let (first, done) = p.start_download(50_000_000).await;
    // Mid-transfer: the first bytes have arrived.
    tokio::time::timeout(PATIENCE, first)
        .await
        .expect("data")
        .expect("first bytes");
    let r = p
        .server
        .call(|conn| plugin_control(conn, 0x48_0001, &[]))
        .await
        .expect("plugins");
    assert!(
        matches!(&r, Err(corequic_runtime::RoutineError::Fault(f))
            if f.kind == corequic_runtime::FaultKind::Deadline),
        "{r:?}"
    );
    // The server closes with the plugin-failure code and a reason naming
    // the plugin, routine and cause.
    let server = p.server.closed().await;
    let local = server.local_error().expect("closed by the server");
    assert!(local.is_app);
    assert_eq!(local.error_code, abi::PLUGIN_FAILURE_ERROR_CODE);
    let text = String::from_utf8_lossy(&local.reason);
    assert!(
        text.contains("hostile") && text.contains("deadline"),
        "{text}"
    );
    // The client sees that close, and the transfer did not complete.
    let client = p.client.closed().await;
    let peer = client.peer_error().unwrap_or_else(|| {
        panic!(
            "the client saw no close: local {:?}, timed out {}",
            client.local_error(),
            client.is_timed_out()
        )
    });
    assert_eq!(peer.error_code, abi::PLUGIN_FAILURE_ERROR_CODE);
    let outcome = tokio::time::timeout(PATIENCE, done).await.expect("ended");
    assert!(
        !matches!(outcome, Ok(Ok(()))),
        "the transfer did not complete"
    );
}
