//! Running a quiche connection over a UDP socket, with the hq-interop
//! application of the endpoint contract (`interop-runner/ENDPOINT.md`):
//! shared by the `quiche-endpoint` binary and the tests.
//!
//! quiche is sans-IO except for its clock: [`run`] feeds it datagrams, sends
//! what it writes, and sleeps until `Connection::timeout()` (which includes
//! the plugins' timers), an application deadline, or a command arrives.

use corequic_endpoint::udp::{self, SendBatch, Socket};
use corequic_endpoint::{
    FLOW_CONTROL_WINDOW, PAYLOAD_CHUNK, check_payload, parse_request, payload,
};
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Largest UDP datagram read or written.
const MAX_DATAGRAM: usize = 65_535;

/// The max_udp_payload_size transport parameter: the largest UDP payload.
const MAX_UDP_PAYLOAD: usize = 65_527;

/// Work the owner of a running connection asks its driver to do, e.g. a
/// plugin-control call.
pub type Command = Box<dyn FnOnce(&mut quiche::Connection) + Send>;

/// The application protocol on a connection.
pub trait App: Send {
    /// Make progress after any event: read what arrived, write what fits.
    fn progress(&mut self, conn: &mut quiche::Connection);

    /// When `progress` must run next even without an event.
    fn deadline(&self) -> Option<Instant> {
        None
    }
}

/// A connection ID from the process's randomly seeded hasher (good enough
/// for interop endpoints; not a cryptographic source).
pub fn new_cid() -> quiche::ConnectionId<'static> {
    let state = std::collections::hash_map::RandomState::new();
    let mut id = Vec::with_capacity(16);
    for i in 0..2u64 {
        let mut h = state.build_hasher();
        h.write_u64(i);
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos(),
        );
        id.extend_from_slice(&h.finish().to_be_bytes());
    }
    quiche::ConnectionId::from_vec(id)
}

/// Drive `conn` on `socket` with `peer` until it is closed. `first` holds
/// datagrams already received for it (a server's first Initial). Datagrams
/// from other addresses are dropped.
pub async fn run(
    conn: &mut quiche::Connection,
    socket: &Socket,
    peer: SocketAddr,
    app: &mut dyn App,
    commands: &mut mpsc::UnboundedReceiver<Command>,
    first: Vec<Vec<u8>>,
) -> Result<(), String> {
    let local = socket.local_addr().map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut out = vec![0u8; MAX_DATAGRAM];
    let mut batch = SendBatch::new();
    let mut commands_open = true;
    for mut datagram in first {
        // A bad first datagram shows up as a closed connection.
        receive(conn, &mut datagram, peer, peer, local);
    }
    loop {
        app.progress(conn);
        flush(conn, socket, &mut out, &mut batch).await?;
        if conn.is_closed() {
            return Ok(());
        }
        let now = Instant::now();
        let timer = conn.timeout().map(|d| now + d);
        let wake = match (timer, app.deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let sleep = async {
            match wake {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = socket.recv(&mut buf) => {
                let mut read = Some(r.map_err(|e| e.to_string())?);
                // Take whatever else is queued before answering.
                while let Some(meta) = read {
                    for datagram in udp::datagrams(&mut buf, &meta) {
                        receive(conn, datagram, meta.addr, peer, local);
                    }
                    read = socket.try_recv(&mut buf).ok().flatten();
                }
            }
            () = sleep => {
                if timer.is_some_and(|t| t <= Instant::now()) {
                    conn.on_timeout();
                }
            }
            cmd = commands.recv(), if commands_open => match cmd {
                Some(cmd) => cmd(conn),
                None => commands_open = false,
            },
        }
    }
}

fn receive(
    conn: &mut quiche::Connection,
    datagram: &mut [u8],
    from: SocketAddr,
    peer: SocketAddr,
    local: SocketAddr,
) {
    if from != peer {
        return;
    }
    // Errors close the connection inside quiche (or drop the packet).
    let _ = conn.recv(datagram, quiche::RecvInfo { from, to: local });
}

/// Send everything quiche has to send. Consecutive datagrams to the peer
/// leave together, in one system call where the socket has GSO (see
/// [`Socket`]); on the wire they are the datagrams quiche wrote.
async fn flush(
    conn: &mut quiche::Connection,
    socket: &Socket,
    out: &mut [u8],
    batch: &mut SendBatch,
) -> Result<(), String> {
    // Until Done, or a fatal error, on which quiche closes the connection
    // itself.
    while let Ok((n, info)) = conn.send(out) {
        socket
            .queue(batch, info.to, None, &out[..n])
            .await
            .map_err(|e| e.to_string())?;
    }
    socket.send(batch).await.map_err(|e| e.to_string())
}

/// Wait on `socket` for a client's first Initial packet; returns the
/// datagrams of the read that carried it (the Initial first, and more if
/// the kernel batched them with GRO), its sender and the client's
/// destination connection ID.
pub async fn wait_for_initial(
    socket: &Socket,
) -> Result<(Vec<Vec<u8>>, SocketAddr, Vec<u8>), String> {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        let meta = socket.recv(&mut buf).await.map_err(|e| e.to_string())?;
        let mut datagrams: Vec<Vec<u8>> = udp::datagrams(&mut buf, &meta)
            .map(|d| d.to_vec())
            .collect();
        let Some(first) = datagrams.first_mut() else {
            continue;
        };
        let dcid = match quiche::Header::from_slice(first, quiche::MAX_CONN_ID_LEN) {
            Ok(hdr)
                if hdr.ty == quiche::Type::Initial && quiche::version_is_supported(hdr.version) =>
            {
                hdr.dcid.to_vec()
            }
            _ => continue,
        };
        return Ok((datagrams, meta.addr, dcid));
    }
}

/// The hq-interop server: answers `GET /<n>` on each bidirectional stream
/// with `n` payload bytes.
#[derive(Default)]
pub struct HqServer {
    requests: HashMap<u64, Vec<u8>>,
    responses: Vec<(u64, u64, u64)>,
    /// Bytes of completed responses.
    pub served: u64,
}

impl App for HqServer {
    fn progress(&mut self, conn: &mut quiche::Connection) {
        let mut buf = [0u8; 256];
        for id in conn.readable() {
            while let Ok((n, fin)) = conn.stream_recv(id, &mut buf) {
                let request = self.requests.entry(id).or_default();
                if request.len() + n <= 256 {
                    request.extend_from_slice(&buf[..n]);
                }
                if fin {
                    let request = self.requests.remove(&id).unwrap_or_default();
                    match parse_request(&request) {
                        Some(total) => self.responses.push((id, 0, total)),
                        None => {
                            let _ = conn.stream_shutdown(id, quiche::Shutdown::Write, 1);
                        }
                    }
                    break;
                }
            }
        }
        let mut finished = 0;
        for (id, sent, total) in &mut self.responses {
            loop {
                let len = (*total - *sent).min(PAYLOAD_CHUNK as u64) as usize;
                let fin = *sent + len as u64 == *total;
                match conn.stream_send(*id, payload(*sent, len), fin) {
                    Ok(n) => {
                        *sent += n as u64;
                        if fin && n == len {
                            self.served += *total;
                            *total = u64::MAX;
                            finished += 1;
                            break;
                        }
                        if n < len {
                            break;
                        }
                    }
                    Err(_) => {
                        // Done (no capacity) or a reset stream: try later or drop.
                        break;
                    }
                }
            }
        }
        if finished > 0 {
            self.responses.retain(|(_, _, total)| *total != u64::MAX);
        }
    }
}

/// The hq-interop client: GETs `size` bytes on stream 0 once the handshake
/// is complete, checks every byte, and closes with code 0 when done.
pub struct HqClient {
    size: u64,
    requested: bool,
    received: u64,
    /// When the request was sent.
    pub started: Option<Instant>,
    /// How long the download took, once it ended.
    pub duration: Option<Duration>,
    /// `Ok(bytes)` after a byte-exact download, `Err` on a mismatch.
    pub result: Option<Result<u64, String>>,
    /// Keep the connection open after the download (the caller closes it).
    pub keep_open: bool,
}

impl HqClient {
    /// A client downloading `size` bytes.
    pub fn new(size: u64) -> Self {
        HqClient {
            size,
            requested: false,
            received: 0,
            started: None,
            duration: None,
            result: None,
            keep_open: false,
        }
    }

    fn finish(&mut self, conn: &mut quiche::Connection, result: Result<u64, String>) {
        self.duration = self.started.map(|s| s.elapsed());
        let failed = result.is_err();
        self.result = Some(result);
        if failed || !self.keep_open {
            let _ = conn.close(true, if failed { 1 } else { 0 }, b"done");
        }
    }
}

impl App for HqClient {
    fn progress(&mut self, conn: &mut quiche::Connection) {
        if !conn.is_established() || self.result.is_some() {
            return;
        }
        if !self.requested {
            let request = format!("GET /{}\r\n", self.size);
            if conn.stream_send(0, request.as_bytes(), true).is_ok() {
                self.requested = true;
                self.started = Some(Instant::now());
            }
            return;
        }
        let mut buf = vec![0u8; PAYLOAD_CHUNK];
        while let Ok((n, fin)) = conn.stream_recv(0, &mut buf) {
            if let Err(e) = check_payload(self.received, &buf[..n]) {
                self.finish(conn, Err(e));
                return;
            }
            self.received += n as u64;
            if self.received > self.size {
                self.finish(conn, Err(format!("more than {} bytes", self.size)));
                return;
            }
            if fin {
                let r = if self.received == self.size {
                    Ok(self.received)
                } else {
                    Err(format!("{} of {} bytes", self.received, self.size))
                };
                self.finish(conn, r);
                return;
            }
        }
    }
}

/// The base configuration of the hq-interop endpoints: ALPN `hq-interop`,
/// 1200-byte datagrams (no PMTU discovery), flow control windows of
/// [`FLOW_CONTROL_WINDOW`].
pub fn base_config() -> Result<quiche::Config, String> {
    let mut config = quiche::Config::new(quiche::PROTOCOL_VERSION).map_err(|e| e.to_string())?;
    config
        .set_application_protos(&[corequic_endpoint::ALPN])
        .map_err(|e| e.to_string())?;
    config.set_max_idle_timeout(30_000);
    // The largest value RFC 9000 §18.2 allows; s2n-quic rejects anything above it
    config.set_max_recv_udp_payload_size(MAX_UDP_PAYLOAD);
    config.set_max_send_udp_payload_size(1200);
    // Flow control must never be what the matrix measures (see
    // FLOW_CONTROL_WINDOW): the initial windows and the caps of quiche's
    // window autotuning (by default 24 MB connection, 16 MB stream) are the
    // same as every endpoint's. Congestion control stays quiche's default.
    config.set_initial_max_data(FLOW_CONTROL_WINDOW);
    config.set_initial_max_stream_data_bidi_local(FLOW_CONTROL_WINDOW);
    config.set_initial_max_stream_data_bidi_remote(FLOW_CONTROL_WINDOW);
    config.set_max_connection_window(FLOW_CONTROL_WINDOW);
    config.set_max_stream_window(FLOW_CONTROL_WINDOW);
    config.set_initial_max_stream_data_uni(1 << 20);
    config.set_initial_max_streams_bidi(100);
    config.set_initial_max_streams_uni(100);
    config.set_disable_active_migration(true);
    Ok(config)
}

/// A server configuration with a fresh self-signed certificate for
/// `localhost` (written to a private temporary folder that is removed
/// again once quiche has loaded it).
pub fn server_config() -> Result<quiche::Config, String> {
    let mut config = base_config()?;
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".into()]).map_err(|e| e.to_string())?;
    let dir = std::env::temp_dir().join(format!(
        "corequic-quiche-{}-{:x}",
        std::process::id(),
        u64::from_be_bytes(
            new_cid()
                .as_ref()
                .get(..8)
                .and_then(|b| b.try_into().ok())
                .unwrap_or_default()
        )
    ));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    let loaded = (|| {
        std::fs::write(&cert_path, cert.cert.pem()).map_err(|e| e.to_string())?;
        std::fs::write(&key_path, cert.signing_key.serialize_pem()).map_err(|e| e.to_string())?;
        let path = |p: &std::path::Path| p.to_str().map(str::to_owned).ok_or("non-UTF-8 temp path");
        config
            .load_cert_chain_from_pem_file(&path(&cert_path)?)
            .map_err(|e| format!("certificate: {e}"))?;
        config
            .load_priv_key_from_pem_file(&path(&key_path)?)
            .map_err(|e| format!("key: {e}"))?;
        Ok::<(), String>(())
    })();
    let _ = std::fs::remove_dir_all(&dir);
    loaded?;
    Ok(config)
}

/// A client configuration: the server's certificate chain is not checked
/// (interop endpoints use throwaway certificates), its handshake signature
/// is.
pub fn client_config() -> Result<quiche::Config, String> {
    let mut config = base_config()?;
    config.verify_peer(false);
    Ok(config)
}
