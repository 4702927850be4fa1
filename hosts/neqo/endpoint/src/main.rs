//! The neqo endpoint of the interop matrix: HTTP/0.9 (`hq-interop`) client or
//! server on the patched neqo-transport, with Core QUIC plugins from the
//! command line. The contract (flags, stats JSON, exit codes) is
//! `interop-runner/ENDPOINT.md`, shared by every host.
//!
//! neqo is sans-IO and single-threaded: one loop feeds it datagrams from a
//! tokio UDP socket, sends what it writes, runs the application on its
//! events, and sleeps until the delay neqo asks for (which includes the
//! plugins' timers), a `--control` call, or the next datagram. Datagrams go
//! through quinn-udp (`corequic_endpoint::udp`): a read reports each one's
//! ECN codepoint (neqo counts them for its ACK_ECN frames) and takes a GRO
//! batch, and consecutive datagrams to one peer leave in one GSO send.

use corequic_endpoint::udp::{self, EcnCodepoint, SendBatch, Socket};
use corequic_endpoint::{
    ALPN_NAME, Args, ClientTally, ControlSchedule, FLOW_CONTROL_WINDOW, Logs, PAYLOAD_CHUNK, Role,
    ServerTally, announce_listening, check_payload, describe_plugins_close, earliest,
    parse_request, payload,
};
use corequic_neqo::{AdapterExtension, PluginFactory, plugin_control, with_plugins};
use corequic_runtime::PluginStats;
use neqo_common::{Datagram, IpTos, IpTosEcn, event::Provider as _};
use neqo_crypto::{AllowZeroRtt, AntiReplay, AuthenticationStatus};
use neqo_transport::{
    CloseReason, Connection, ConnectionEvent, ConnectionParameters, Output,
    RandomConnectionIdGenerator, State, StreamId, StreamType,
    server::{ConnectionRef, Server},
};
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The receive buffer: the largest UDP datagram, and the largest GRO batch
/// (the kernel coalesces up to 64 KiB).
const RECV_BUFFER: usize = 65_536;

/// The largest UDP payload sent: QUIC's minimum, as every endpoint of the
/// matrix sends (the emulated links carry no more).
const MAX_SEND_UDP_PAYLOAD: usize = 1200;

/// The server certificate's nickname in the NSS database.
const CERT_NICKNAME: &str = "key";

/// The NSS database with the server's self-signed certificate for
/// `localhost` (made by `tools/neqo-source.sh` with NSS's certutil), built
/// into the binary so that it runs anywhere.
const NSS_DB: [(&str, &[u8]); 3] = [
    (
        "cert9.db",
        include_bytes!(concat!(env!("COREQUIC_NEQO_DB"), "/cert9.db")),
    ),
    (
        "key4.db",
        include_bytes!(concat!(env!("COREQUIC_NEQO_DB"), "/key4.db")),
    ),
    (
        "pkcs11.txt",
        include_bytes!(concat!(env!("COREQUIC_NEQO_DB"), "/pkcs11.txt")),
    ),
];

fn main() -> ExitCode {
    corequic_endpoint::main("neqo-endpoint", "neqo", corequic_neqo::capabilities(), run)
}

/// NSS, with the server's certificate database written to a private
/// temporary folder (NSS opens it by path).
fn init_nss() -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("corequic-neqo-db-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for (name, bytes) in NSS_DB {
        std::fs::write(dir.join(name), bytes).map_err(|e| format!("{name}: {e}"))?;
    }
    neqo_crypto::init_db(dir.clone()).map_err(|e| format!("NSS: {e:?}"))?;
    Ok(dir)
}

/// The connection parameters of both roles: the contract's flow-control
/// windows and the plugins' factory.
fn parameters(args: &Args, logs: &Logs) -> Result<ConnectionParameters, String> {
    let mut params = ConnectionParameters::default()
        .max_data(FLOW_CONTROL_WINDOW)
        .max_stream_data(StreamType::BiDi, false, FLOW_CONTROL_WINDOW)
        .max_stream_data(StreamType::BiDi, true, FLOW_CONTROL_WINDOW)
        .idle_timeout(Duration::from_secs(30))
        .max_send_udp_payload(MAX_SEND_UDP_PAYLOAD);
    if let Some(attachment) = args.attachment(corequic_neqo::capabilities(), logs)? {
        let factory = PluginFactory(attachment);
        params = params.extension_factory(Some(Rc::new(factory)));
    }
    Ok(params)
}

async fn run(args: Args) -> Result<bool, String> {
    let db = init_nss()?;
    let logs: Logs = Arc::default();
    let result = match args.role {
        Role::Server => server(&args, &logs).await,
        Role::Client => client(&args, &logs).await,
    };
    // NSS keeps the files open; on Linux they can go now.
    let _ = std::fs::remove_dir_all(db);
    result
}

/// Send everything `output` yields and return how long the stack may sleep.
/// Consecutive datagrams to one peer go out together, in one system call
/// where the socket has GSO ([`udp::Socket`]): the datagrams on the wire are the
/// same as sent one by one, not-ECT as before (neqo's ECN marks are not
/// applied, so its ECN validation fails and it sends as without ECN).
async fn send_all(
    socket: &Socket,
    batch: &mut SendBatch,
    mut output: impl FnMut() -> Output,
) -> Result<Option<Duration>, String> {
    let delay = loop {
        match output() {
            Output::Datagram(d) => {
                socket
                    .queue(batch, d.destination(), None, &d)
                    .await
                    .map_err(|e| format!("send: {e}"))?;
            }
            Output::Callback(delay) => break Some(delay),
            Output::None => break None,
        }
    };
    socket.send(batch).await.map_err(|e| format!("send: {e}"))?;
    Ok(delay)
}

/// Wait for datagrams, or until `deadline`: one read, a datagram or a GRO
/// batch of several from the same peer, goes onto `input`.
async fn wait(
    socket: &Socket,
    local: SocketAddr,
    buf: &mut [u8],
    deadline: Option<Instant>,
    input: &mut impl Extend<Datagram>,
) -> Result<(), String> {
    let recv = socket.recv(buf);
    let received = match deadline {
        Some(d) => match tokio::time::timeout_at(d.into(), recv).await {
            Ok(r) => r,
            Err(_) => return Ok(()),
        },
        None => recv.await,
    };
    let meta = received.map_err(|e| format!("recv: {e}"))?;
    let tos = ip_tos(meta.ecn);
    input.extend(udp::datagrams(buf, &meta).map(|d| Datagram::new(meta.addr, local, tos, &*d)));
    Ok(())
}

/// neqo's TOS byte for the ECN codepoint a datagram came with.
fn ip_tos(ecn: Option<EcnCodepoint>) -> IpTos {
    IpTos::from(match ecn {
        Some(EcnCodepoint::Ect0) => IpTosEcn::Ect0,
        Some(EcnCodepoint::Ect1) => IpTosEcn::Ect1,
        Some(EcnCodepoint::Ce) => IpTosEcn::Ce,
        None => IpTosEcn::NotEct,
    })
}

/// Make the `--control` calls of `conn` that are due; true when one was
/// made. The handshake counts as complete once confirmed: a client's close
/// before that also goes out in a Handshake packet, where it loses its
/// code.
fn run_controls(controls: &mut ControlSchedule, conn: &mut Connection, now: Instant) -> bool {
    if *conn.state() == State::Confirmed {
        controls.establish(now);
    }
    controls.run_due(now, |id, args| plugin_control(conn, now, id, args))
}

/// Why a connection closed, if not with application code 0: its plugins'
/// own close (a faulting plugin), or neqo's reason.
fn close_reason(conn: &mut Connection, now: Instant) -> Option<String> {
    if let Some((code, reason)) = with_plugins(conn, now, |p, _| p.local_close()).flatten() {
        return Some(describe_plugins_close(code, &reason));
    }
    use neqo_transport::Error;
    let error = match conn.state() {
        State::Closing { error, .. } | State::Draining { error, .. } | State::Closed(error) => {
            error
        }
        _ => return None,
    };
    // neqo keeps the codes, not the reason phrases.
    match error {
        CloseReason::Application(0) | CloseReason::Transport(Error::PeerApplicationError(0)) => {
            None
        }
        CloseReason::Application(code) => Some(format!("local application close {code:#x}")),
        CloseReason::Transport(Error::IdleTimeout) => Some("idle timeout".into()),
        CloseReason::Transport(Error::PeerApplicationError(code)) => {
            Some(format!("peer application close {code:#x}"))
        }
        CloseReason::Transport(Error::PeerError(code)) => Some(format!(
            "peer transport close {code:#x}: {}",
            transport_error_name(*code)
        )),
        CloseReason::Transport(e) => Some(format!("local transport close {:#x}: {e:?}", e.code())),
    }
}

/// RFC 9000's name of a transport error code (§20.1).
fn transport_error_name(code: u64) -> &'static str {
    match code {
        0x0 => "no error",
        0x1 => "internal error",
        0x2 => "connection refused",
        0x3 => "flow control error",
        0x4 => "stream limit error",
        0x5 => "stream state error",
        0x6 => "final size error",
        0x7 => "frame encoding error",
        0x8 => "transport parameter error",
        0x9 => "connection id limit error",
        0xa => "protocol violation",
        0xb => "invalid token",
        0xc => "application error",
        0xd => "crypto buffer exceeded",
        0xe => "key update error",
        0xf => "aead limit reached",
        0x10 => "no viable path",
        0x100..=0x1ff => "crypto error",
        _ => "unknown error",
    }
}

fn plugin_stats(conn: &mut Connection, now: Instant) -> Vec<PluginStats> {
    with_plugins(conn, now, |p, _| p.stats()).unwrap_or_default()
}

fn extra(conn: &Connection) -> Vec<(String, String)> {
    let stats = conn.stats();
    vec![
        (
            "rtt_ms".into(),
            format!("{:.3}", stats.rtt.as_secs_f64() * 1e3),
        ),
        ("packets_tx".into(), stats.packets_tx.to_string()),
        ("lost".into(), stats.lost.to_string()),
    ]
}

/// The server side of one connection: its requests and what it owes them.
struct Served {
    conn: ConnectionRef,
    controls: ControlSchedule,
    /// Per request stream: the request line so far, then the bytes left.
    streams: HashMap<StreamId, Response>,
    served: u64,
    done: bool,
}

enum Response {
    Reading(Vec<u8>),
    Sending { offset: u64, size: u64 },
}

impl Served {
    /// Handle the connection's events; true when anything was done.
    fn progress(&mut self, now: Instant) -> bool {
        let mut conn = self.conn.borrow_mut();
        let mut acted = run_controls(&mut self.controls, &mut conn, now);
        while let Some(event) = conn.next_event() {
            acted = true;
            match event {
                ConnectionEvent::NewStream { stream_id } => {
                    self.streams
                        .entry(stream_id)
                        .or_insert(Response::Reading(Vec::new()));
                }
                ConnectionEvent::RecvStreamReadable { stream_id } => {
                    let mut buf = [0u8; 1024];
                    let response = self
                        .streams
                        .entry(stream_id)
                        .or_insert(Response::Reading(Vec::new()));
                    if let Response::Reading(request) = response {
                        let mut ended = false;
                        while let Ok((n, fin)) = conn.stream_recv(stream_id, &mut buf) {
                            request.extend_from_slice(&buf[..n]);
                            ended |= fin;
                            if fin || n == 0 {
                                break;
                            }
                        }
                        // The request is a line, ended by a newline or the
                        // stream's FIN.
                        if ended || request.ends_with(b"\n") || request.len() > 1024 {
                            match parse_request(request) {
                                Some(size) => *response = Response::Sending { offset: 0, size },
                                None => {
                                    let _ = conn.stream_close_send(stream_id);
                                    self.streams.remove(&stream_id);
                                }
                            }
                        }
                    }
                }
                ConnectionEvent::StateChange(State::Closed(_)) => self.done = true,
                _ => {}
            }
        }
        // Write what the stream takes of every pending response.
        for (id, response) in &mut self.streams {
            let Response::Sending { offset, size } = response else {
                continue;
            };
            while *offset < *size {
                let len = (*size - *offset).min(PAYLOAD_CHUNK as u64) as usize;
                match conn.stream_send(*id, payload(*offset, len)) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        *offset += n as u64;
                        self.served += n as u64;
                        acted = true;
                    }
                }
            }
            if *offset == *size {
                let _ = conn.stream_close_send(*id);
                *size = u64::MAX;
            }
        }
        self.streams
            .retain(|_, r| !matches!(r, Response::Sending { size: u64::MAX, .. }));
        if matches!(conn.state(), State::Closed(_)) {
            self.done = true;
        }
        acted
    }
}

async fn server(args: &Args, logs: &Logs) -> Result<bool, String> {
    let started = Instant::now();
    let params = parameters(args, logs)?;
    let mut server = Server::new(
        Instant::now(),
        &[CERT_NICKNAME],
        &[ALPN_NAME],
        AntiReplay::new(Instant::now(), Duration::from_secs(10), 7, 14)
            .map_err(|e| format!("anti-replay: {e:?}"))?,
        Box::new(AllowZeroRtt {}),
        Rc::new(RefCell::new(RandomConnectionIdGenerator::new(10))),
        params,
    )
    .map_err(|e| format!("server: {e:?}"))?;
    let socket = Socket::bind(args.addr)?;
    let local = socket.local_addr().map_err(|e| e.to_string())?;
    announce_listening(local);

    let mut buf = vec![0u8; RECV_BUFFER];
    let mut connections: Vec<Served> = Vec::new();
    let mut tally = ServerTally::default();
    let mut input = VecDeque::new();
    let mut batch = SendBatch::new();
    loop {
        let now = Instant::now();
        // neqo reads no clock: each call gets the time it runs at. Every
        // datagram read goes in; an input's delay only counts for the last.
        let delay = send_all(&socket, &mut batch, || {
            loop {
                let Some(d) = input.pop_front() else {
                    return server.process_output(Instant::now());
                };
                let out = server.process(Some(d), Instant::now());
                if input.is_empty() || matches!(out, Output::Datagram(_)) {
                    return out;
                }
            }
        })
        .await?;
        // New connections, then the application on every connection.
        for c in server.active_connections() {
            if !connections.iter().any(|s| s.conn == c) {
                connections.push(Served {
                    conn: c,
                    controls: ControlSchedule::new(&args.controls),
                    streams: HashMap::new(),
                    served: 0,
                    done: false,
                });
            }
        }
        let mut acted = false;
        for s in &mut connections {
            acted |= s.progress(now);
        }
        // Connections that ended are reported and dropped.
        let mut i = 0;
        while i < connections.len() {
            if connections[i].done {
                let mut s = connections.remove(i);
                let mut conn = s.conn.borrow_mut();
                tally.handled += 1;
                tally.served += s.served;
                if let Some(reason) = close_reason(&mut conn, now) {
                    tally.close = Some(reason);
                }
                tally.plugins.extend(plugin_stats(&mut conn, now));
                tally.controls.append(&mut s.controls.results);
            } else {
                i += 1;
            }
        }
        if !tally.wants_more(args) {
            break;
        }
        if acted {
            continue;
        }
        if started.elapsed() >= args.timeout {
            tally.time_out(args);
            break;
        }
        let deadline = connections
            .iter()
            .filter_map(|s| s.controls.deadline())
            .fold(delay.map(|d| now + d), |a, b| earliest(a, Some(b)));
        let deadline = earliest(deadline, Some(started + args.timeout));
        wait(&socket, local, &mut buf, deadline, &mut input).await?;
    }
    for s in &mut connections {
        let mut conn = s.conn.borrow_mut();
        tally
            .plugins
            .extend(plugin_stats(&mut conn, Instant::now()));
        tally.controls.append(&mut s.controls.results);
    }
    tally.finish("neqo-endpoint", "neqo", args, started, logs)
}

/// The client: one download, checked byte by byte.
struct Download {
    size: u64,
    stream: Option<StreamId>,
    received: u64,
    started: Option<Instant>,
    duration: Option<Duration>,
    result: Option<Result<u64, String>>,
}

impl Download {
    fn progress(&mut self, conn: &mut Connection, now: Instant) -> bool {
        let mut acted = false;
        while let Some(event) = conn.next_event() {
            acted = true;
            match event {
                ConnectionEvent::AuthenticationNeeded => {
                    // The interop endpoints use self-signed certificates.
                    conn.authenticated(AuthenticationStatus::Ok, now);
                }
                ConnectionEvent::StateChange(State::Connected | State::Confirmed)
                    if self.stream.is_none() =>
                {
                    match conn.stream_create(StreamType::BiDi) {
                        Ok(id) => {
                            let request = format!("GET /{}\r\n", self.size);
                            let sent = conn.stream_send(id, request.as_bytes());
                            if sent != Ok(request.len()) {
                                self.result = Some(Err(format!("request not sent: {sent:?}")));
                            }
                            let _ = conn.stream_close_send(id);
                            self.stream = Some(id);
                            self.started = Some(now);
                        }
                        Err(e) => self.result = Some(Err(format!("stream: {e:?}"))),
                    }
                }
                ConnectionEvent::RecvStreamReadable { stream_id }
                    if Some(stream_id) == self.stream && self.result.is_none() =>
                {
                    self.read(conn, stream_id, now);
                }
                ConnectionEvent::RecvStreamReset { app_error, .. } => {
                    self.result = Some(Err(format!("stream reset with {app_error:#x}")));
                }
                _ => {}
            }
        }
        acted
    }

    fn read(&mut self, conn: &mut Connection, stream_id: StreamId, now: Instant) {
        let mut buf = vec![0u8; PAYLOAD_CHUNK];
        loop {
            match conn.stream_recv(stream_id, &mut buf) {
                Ok((n, fin)) => {
                    if let Err(e) = check_payload(self.received, &buf[..n]) {
                        self.result = Some(Err(e));
                        return;
                    }
                    self.received += n as u64;
                    if fin {
                        self.duration = self.started.map(|s| now - s);
                        self.result = Some(if self.received == self.size {
                            Ok(self.received)
                        } else {
                            Err(format!("got {} of {} bytes", self.received, self.size))
                        });
                        return;
                    }
                    if n == 0 {
                        return;
                    }
                }
                Err(e) => {
                    self.result = Some(Err(format!("read: {e:?}")));
                    return;
                }
            }
        }
    }
}

async fn client(args: &Args, logs: &Logs) -> Result<bool, String> {
    let params = parameters(args, logs)?;
    let socket = Socket::bind(args.client_bind_addr())?;
    let mut local = socket.local_addr().map_err(|e| e.to_string())?;
    // neqo wants the address datagrams come in on: the wildcard is not one.
    if local.ip().is_unspecified() {
        local.set_ip(if args.addr.is_ipv4() {
            std::net::Ipv4Addr::LOCALHOST.into()
        } else {
            std::net::Ipv6Addr::LOCALHOST.into()
        });
    }
    let started = Instant::now();
    let mut conn = Connection::new_client(
        "localhost",
        &[ALPN_NAME],
        Rc::new(RefCell::new(RandomConnectionIdGenerator::new(10))),
        local,
        args.addr,
        params,
        started,
    )
    .map_err(|e| format!("connect: {e:?}"))?;
    let mut download = Download {
        size: args.size,
        stream: None,
        received: 0,
        started: None,
        duration: None,
        result: None,
    };
    let mut controls = ControlSchedule::new(&args.controls);
    let mut handshake = None;
    let mut closing = false;
    let mut timed_out = false;
    let mut buf = vec![0u8; RECV_BUFFER];
    let mut input = Vec::new();
    let mut batch = SendBatch::new();
    loop {
        let now = Instant::now();
        conn.process_multiple_input(input.drain(..), now);
        let delay = send_all(&socket, &mut batch, || conn.process_output(Instant::now())).await?;
        let mut acted = download.progress(&mut conn, now);
        if handshake.is_none() && conn.state().connected() {
            handshake = Some(now - started);
        }
        acted |= run_controls(&mut controls, &mut conn, now);
        // Every control has run and the download ended: close with 0 (1
        // when it failed).
        if let Some(result) = &download.result
            && controls.is_done()
            && !closing
        {
            closing = true;
            acted = true;
            conn.close(now, u64::from(result.is_err()), "done");
        }
        if matches!(conn.state(), State::Closed(_)) {
            break;
        }
        if acted {
            continue;
        }
        if started.elapsed() >= args.timeout {
            timed_out = true;
            break;
        }
        let deadline = earliest(delay.map(|d| now + d), controls.deadline());
        let deadline = earliest(deadline, Some(started + args.timeout));
        wait(&socket, local, &mut buf, deadline, &mut input).await?;
    }

    let now = Instant::now();
    let tally = ClientTally {
        download: download.result,
        duration: download.duration.unwrap_or_default(),
        handshake,
        close: if timed_out {
            Some(corequic_endpoint::timed_out(args.timeout))
        } else {
            close_reason(&mut conn, now)
        },
        plugins: plugin_stats(&mut conn, now),
        controls: controls.results,
        extra: extra(&conn),
    };
    tally.finish("neqo-endpoint", "neqo", args, logs)
}
