//! quiche client ↔ quiche server, both with the hook patch, over real UDP on
//! loopback through a recording relay: what is specific to quiche's patch.
//! The behaviour every host shares (each reference plugin's effect, faults
//! and their closes) is certified by the conformance kit.

use corequic_endpoint::udp::Socket;
use corequic_endpoint::{PAYLOAD_CHUNK, payload};
use corequic_quiche::{Attachment, PluginFactory};
use corequic_quiche_endpoint::driver::{self, App, Command, HqServer};
use corequic_runtime::{Grants, Plugin, Runtime, RuntimeConfig};
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
        .load_file(
            &corequic_endpoint::testing::plugin_path(name),
            &Grants::all(),
        )
        .expect("plugin loads")
}

fn config(server: bool, plugins: &[&str]) -> quiche::Config {
    let mut config = if server {
        driver::server_config()
    } else {
        driver::client_config()
    }
    .expect("config");
    if !plugins.is_empty() {
        let plugins = plugins.iter().map(|p| plugin(p)).collect();
        let factory = PluginFactory(Attachment::new(runtime(), plugins));
        config.set_extension_factory(Some(Arc::new(factory)));
    }
    config
}

/// One datagram seen by the relay.
#[derive(Debug, Clone, Copy)]
struct Seen {
    from_server: bool,
    size: usize,
    short_header: bool,
}

/// A request to the relay: drop the client's next datagram, then report
/// that it did.
type DropNextFromClient = Arc<Mutex<Option<oneshot::Sender<()>>>>;

/// A UDP relay between client and server that records every datagram (and
/// drops one of the client's on request).
async fn relay(server: SocketAddr) -> (SocketAddr, Arc<Mutex<Vec<Seen>>>, DropNextFromClient) {
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .expect("relay socket");
    let addr = socket.local_addr().expect("relay address");
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let record = seen.clone();
    let drop_next: DropNextFromClient = Arc::default();
    let dropping = drop_next.clone();
    tokio::spawn(async move {
        let mut client = None;
        let mut buf = vec![0u8; 65_536];
        while let Ok((n, from)) = socket.recv_from(&mut buf).await {
            let from_server = from == server;
            if !from_server {
                client = Some(from);
                let dropped = dropping.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some(done) = dropped {
                    let _ = done.send(());
                    continue;
                }
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
    (addr, seen, drop_next)
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
    drop_next_from_client: DropNextFromClient,
}

/// A quiche server answering `GET /<n>` and a quiche client connected to it
/// through the relay, both with their handshake complete.
async fn pair(client_plugins: &[&str], server_plugins: &[&str]) -> Pair {
    pair_of(config(false, client_plugins), config(true, server_plugins)).await
}

/// [`pair`] with the given configurations.
async fn pair_of(mut client_config: quiche::Config, mut server_config: quiche::Config) -> Pair {
    let server_socket = Socket::bind((Ipv4Addr::LOCALHOST, 0).into()).expect("server socket");
    let server_addr = server_socket.local_addr().expect("server address");
    let (relay_addr, seen, drop_next_from_client) = relay(server_addr).await;

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
            first,
        )
        .await
        .expect("server driver");
        conn
    });

    let client_socket = Socket::bind((Ipv4Addr::LOCALHOST, 0).into()).expect("client socket");
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
            Vec::new(),
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
            task: Some(client_task),
        },
        server: Side {
            tx: server_tx,
            task: Some(server_task),
        },
        downloads,
        next_stream: 0,
        seen,
        drop_next_from_client,
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

    /// A switch that makes the relay drop the client's next datagram, and a
    /// receiver that fires when it has.
    fn drop_next_from_client(&self) -> (impl FnOnce() + Send + 'static, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        let request = self.drop_next_from_client.clone();
        let arm = move || *request.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
        (arm, rx)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
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
async fn a_lost_close_is_sent_again_when_the_peer_speaks() {
    // The client's PTO includes its peer's max_ack_delay: 1 s makes the
    // client's closing period (3 PTO) outlast the server's probe by far.
    let mut server_config = config(true, &[]);
    server_config.set_max_ack_delay(1000);
    let mut p = pair_of(config(false, &[]), server_config).await;
    p.download(10_000).await.expect("byte-exact download");
    // Armed inside the driver, so that the next datagram is the close.
    let (arm, dropped) = p.drop_next_from_client();
    p.client
        .call(move |conn| {
            arm();
            conn.close(true, 0x17, b"bye")
        })
        .await
        .expect("close");
    tokio::time::timeout(PATIENCE, dropped)
        .await
        .expect("the relay dropped the close")
        .expect("relay");
    // The server, which never saw the close, speaks: the closing client
    // answers with its close (RFC 9000 section 10.2.1).
    p.server
        .call(|conn| conn.send_ack_eliciting())
        .await
        .expect("ping");
    let server = p.server.closed().await;
    let close = server
        .peer_error()
        .expect("the server received the close it had missed");
    assert!(close.is_app && close.error_code == 0x17, "{close:?}");
    p.client.closed().await;
}
