//! The endpoint contract every corequic host binary implements (see
//! `interop-runner/ENDPOINT.md`): the command line, the stats JSON, the exit
//! codes and the hq-interop payload. Stack-agnostic: each host's binary
//! parses its arguments with [`Args::parse`] and reports with [`Stats`].

#![warn(missing_docs)]

#[cfg(feature = "testing")]
pub mod testing;
#[cfg(feature = "rustls")]
pub mod tls;
pub mod udp;

use corequic_adapter::Attachment;
use corequic_runtime::abi::{LogLevel, PluginVal};
use corequic_runtime::{
    Grants, HostCapabilities, InjectedFault, InjectedFaults, LogRecord, PluginStats, RoutineError,
    Runtime, RuntimeConfig,
};
use serde::Serialize;
use std::future::Future;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use corequic_contract::{
    ALPN, ALPN_NAME, EXIT_FAIL, EXIT_PASS, EXIT_UNSUPPORTED, LISTENING, PLUGIN_CACHE_VAR,
    parse_listening,
};

/// Flow-control windows every endpoint uses, bytes: the stream and
/// connection receive windows it advertises and, where the stack has one,
/// its send buffer limit.
///
/// The interop matrix measures congestion control (the BDP plugin against
/// slow start), so flow control must never be the bottleneck. A sender can
/// have at most one receive window in flight per RTT: with quinn's default
/// stream window (1.25 MB) the paper's link (50 Mbit/s, 500 ms RTT, BDP
/// 3.125 MB) carries at most 20 Mbit/s whatever the congestion window. At
/// the bottleneck queue's limit (one BDP) a sender can have two BDPs in
/// flight, and a receiver that releases credit when half of it is used
/// needs twice that; 32 MiB leaves room above 4 × 3.125 MB.
pub const FLOW_CONTROL_WINDOW: u64 = 32 << 20;

/// The receive and send buffers every endpoint asks for on its UDP socket,
/// bytes (the kernel caps them at `net.core.rmem_max` / `wmem_max`).
///
/// A default buffer (about 200 kB, some 90 full-size datagrams) overflows
/// whenever the process is not scheduled for a few milliseconds while the
/// link delivers 50 Mbit/s, or when a peer bursts a whole window: datagrams
/// the kernel drops there are losses outside the emulated link, which the
/// link trace does not show.
pub const SOCKET_BUFFER: usize = 8 << 20;

/// A UDP socket bound to `addr` with buffers of [`SOCKET_BUFFER`] (best
/// effort: a smaller kernel limit is not an error).
pub fn bind_udp(addr: SocketAddr) -> std::io::Result<std::net::UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

/// A tokio UDP socket bound to `addr` with buffers of [`SOCKET_BUFFER`],
/// for the endpoints that drive a sans-IO stack themselves.
pub fn bind_tokio_udp(addr: SocketAddr) -> Result<tokio::net::UdpSocket, String> {
    let socket = bind_udp(addr).map_err(|e| format!("bind {addr}: {e}"))?;
    socket.set_nonblocking(true).map_err(|e| e.to_string())?;
    tokio::net::UdpSocket::from_std(socket).map_err(|e| e.to_string())
}

/// Write a line to stderr, like `eprintln!`, but drop it when stderr cannot
/// be written (a runner's log file on a full disk) instead of panicking:
/// the exit code still tells the outcome (ENDPOINT.md), where a panic would
/// exit 101.
#[macro_export]
macro_rules! complain {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

/// Tell whoever started this server where it listens: one
/// [`LISTENING`] line on stdout, flushed at once.
pub fn announce_listening(addr: SocketAddr) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    // A closed stdout only means nobody waits for the line.
    let _ = writeln!(out, "{LISTENING} {addr}");
    let _ = out.flush();
}

/// Client or server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Connects and downloads.
    Client,
    /// Listens and serves.
    Server,
}

impl Role {
    /// The role's name, as the stats JSON and the qlog file name write it.
    pub fn name(self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Server => "server",
        }
    }
}

/// A plugin to load, with the grants given to it.
#[derive(Debug, Clone)]
pub struct PluginArg {
    /// The component file.
    pub path: PathBuf,
    /// What it may do.
    pub grants: Grants,
}

/// A plugin-control call scheduled after the handshake.
#[derive(Debug, Clone, PartialEq)]
pub struct ControlArg {
    /// Delay after the handshake completed.
    pub at: Duration,
    /// The control id.
    pub id: u64,
    /// Arguments.
    pub args: Vec<PluginVal>,
}

/// Parsed command line.
#[derive(Debug, Clone)]
pub struct Args {
    /// Client or server.
    pub role: Role,
    /// Server: where to listen; client: where to connect.
    pub addr: SocketAddr,
    /// The test case name.
    pub test: String,
    /// Plugins in load order.
    pub plugins: Vec<PluginArg>,
    /// Client: bytes to download.
    pub size: u64,
    /// Plugin-control calls.
    pub controls: Vec<ControlArg>,
    /// Where to write the stats JSON.
    pub stats: Option<PathBuf>,
    /// Folder for the qlog file (`<role>.qlog`, JSON-SEQ).
    pub qlog: Option<PathBuf>,
    /// Server: exit after this many connections (0 = serve forever).
    pub connections: u64,
    /// Give up after this long.
    pub timeout: Duration,
    /// Test-only deviations from the specification (`--inject-fault`), with
    /// which the conformance kit's own tests show that its cases fail.
    pub injected_faults: InjectedFaults,
}

/// The usage text.
pub const USAGE: &str = "\
usage: ENDPOINT --role client|server --addr HOST:PORT --test NAME [options]
       ENDPOINT --capabilities   print the host's capabilities as JSON
       ENDPOINT --help           print this text
  --plugin PATH[=GRANTS]   load a plugin component (repeatable, in order);
                           GRANTS e.g. all | read=is-server,perm=logging
  --size BYTES             client: bytes to GET (default 1000000)
  --control MS:ID[:ARG]    client or server: call plugin-control ID MS ms after
                           the handshake; ARG is a u64 or true/false (repeatable)
  --stats FILE             write the stats JSON there
  --qlog DIR               write DIR/<role>.qlog (JSON-SEQ qlog)
  --connections N          server: exit after N connections (default 1; 0 = forever)
  --timeout SECONDS        give up after this long, and fail (default 60)
  --inject-fault NAME      testing only: deviate from the spec in one way
                           (names: corequic_runtime::InjectedFault)
exit codes: 0 pass, 1 fail, 127 unsupported test";

fn parse_control(spec: &str) -> Result<ControlArg, String> {
    let mut parts = spec.splitn(3, ':');
    let at = parts.next().and_then(|s| s.parse::<u64>().ok());
    let id = parts.next().and_then(|s| match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    });
    let (Some(at), Some(id)) = (at, id) else {
        return Err(format!("--control `{spec}` is not MS:ID[:ARG]"));
    };
    let args = match parts.next() {
        None => Vec::new(),
        Some("true") => vec![PluginVal::Bool(true)],
        Some("false") => vec![PluginVal::Bool(false)],
        Some(v) => vec![PluginVal::U64(v.parse().map_err(|_| {
            format!("--control argument `{v}` is not a u64 or bool")
        })?)],
    };
    Ok(ControlArg {
        at: Duration::from_millis(at),
        id,
        args,
    })
}

impl Args {
    /// Parse the command line (without the program name).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
        let mut it = args.into_iter();
        let (mut role, mut addr, mut test) = (None, None, None);
        let mut parsed = Args {
            role: Role::Client,
            addr: SocketAddr::from(([127, 0, 0, 1], 4433)),
            test: String::new(),
            plugins: Vec::new(),
            size: 1_000_000,
            controls: Vec::new(),
            stats: None,
            qlog: None,
            connections: 1,
            timeout: Duration::from_secs(60),
            injected_faults: InjectedFaults::default(),
        };
        while let Some(flag) = it.next() {
            let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--role" => {
                    role = Some(match value()?.as_str() {
                        "client" => Role::Client,
                        "server" => Role::Server,
                        other => return Err(format!("unknown role `{other}`")),
                    })
                }
                "--addr" => {
                    let v = value()?;
                    addr = Some(v.parse().map_err(|_| format!("bad address `{v}`"))?);
                }
                "--test" => test = Some(value()?),
                "--plugin" => {
                    let v = value()?;
                    let (path, grants) = match v.split_once('=') {
                        Some((p, g)) => (p.to_string(), Grants::parse(g)?),
                        None => (v, Grants::all()),
                    };
                    parsed.plugins.push(PluginArg {
                        path: path.into(),
                        grants,
                    });
                }
                "--size" => {
                    parsed.size = value()?.parse().map_err(|_| "--size needs bytes")?;
                }
                "--control" => parsed.controls.push(parse_control(&value()?)?),
                "--stats" => parsed.stats = Some(value()?.into()),
                "--qlog" => parsed.qlog = Some(value()?.into()),
                "--connections" => {
                    parsed.connections = value()?
                        .parse()
                        .map_err(|_| "--connections needs a count")?;
                }
                "--timeout" => {
                    let s: u64 = value()?.parse().map_err(|_| "--timeout needs seconds")?;
                    parsed.timeout = Duration::from_secs(s);
                }
                "--inject-fault" => {
                    let v = value()?;
                    let fault = InjectedFault::parse(&v)
                        .ok_or_else(|| format!("unknown fault `{v}` for --inject-fault"))?;
                    parsed.injected_faults = parsed.injected_faults.with(fault);
                }
                other => return Err(format!("unknown option `{other}`")),
            }
        }
        parsed.role = role.ok_or("--role is required")?;
        parsed.addr = addr.ok_or("--addr is required")?;
        parsed.test = test.ok_or("--test is required")?;
        Ok(parsed)
    }

    /// The runtime configuration: the specification's defaults, plus the
    /// injected faults of a test run.
    pub fn runtime_config(&self) -> RuntimeConfig {
        RuntimeConfig {
            injected_faults: self.injected_faults,
            cache_dir: plugin_cache_dir(),
            ..RuntimeConfig::default()
        }
    }

    /// The `--qlog` file of this run, `DIR/<role>.qlog`, with its folder
    /// created; `None` without `--qlog`.
    pub fn qlog_file(&self) -> Result<Option<PathBuf>, String> {
        let Some(dir) = &self.qlog else {
            return Ok(None);
        };
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(Some(dir.join(format!("{}.qlog", self.role.name()))))
    }

    /// Where a client binds: the wildcard address of the server address's
    /// family, port 0.
    pub fn client_bind_addr(&self) -> SocketAddr {
        match self.addr {
            SocketAddr::V4(_) => SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, 0)),
            SocketAddr::V6(_) => SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0)),
        }
    }

    /// Whether this endpoint knows the test (otherwise exit 127).
    pub fn test_supported(&self) -> bool {
        corequic_contract::is_test(&self.test)
    }
}

/// The directory named by [`PLUGIN_CACHE_VAR`], where the runtime keeps
/// compiled plugins across processes; none when it is unset or empty.
pub fn plugin_cache_dir() -> Option<PathBuf> {
    std::env::var_os(PLUGIN_CACHE_VAR)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The payload of `GET /<n>`: byte `i` is `(i * 31) % 251`, so the client can
/// check every byte without a file.
pub fn payload_byte(i: u64) -> u8 {
    (i.wrapping_mul(31) % 251) as u8
}

/// Longest slice [`payload`] returns.
pub const PAYLOAD_CHUNK: usize = 64 * 1024;

/// Bytes `offset .. offset + len` of the payload (`len` ≤ [`PAYLOAD_CHUNK`]),
/// from a table built once: the pattern repeats every 251 bytes.
pub fn payload(offset: u64, len: usize) -> &'static [u8] {
    static TABLE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        (0..(PAYLOAD_CHUNK + 251) as u64)
            .map(payload_byte)
            .collect()
    });
    let start = (offset % 251) as usize;
    &table[start..start + len.min(PAYLOAD_CHUNK)]
}

/// Parse an hq-interop request line `GET /<n>`.
pub fn parse_request(request: &[u8]) -> Option<u64> {
    std::str::from_utf8(request)
        .ok()?
        .trim()
        .strip_prefix("GET /")?
        .parse()
        .ok()
}

/// Check `bytes` received at `offset` of a `GET /<n>` response against the
/// payload; the error names the first byte that differs.
pub fn check_payload(offset: u64, bytes: &[u8]) -> Result<(), String> {
    for (i, chunk) in bytes.chunks(PAYLOAD_CHUNK).enumerate() {
        let at = offset + (i * PAYLOAD_CHUNK) as u64;
        if chunk != payload(at, chunk.len()) {
            let wrong = (0..chunk.len())
                .find(|&j| chunk[j] != payload_byte(at + j as u64))
                .unwrap_or(0);
            return Err(format!("byte {} differs", at + wrong as u64));
        }
    }
    Ok(())
}

/// The result of one plugin-control call.
#[derive(Debug, Clone, Serialize)]
pub struct ControlResult {
    /// When it was made, ms after the handshake.
    pub at_ms: u64,
    /// The control id.
    pub id: u64,
    /// The returned values, rendered.
    pub result: Option<Vec<String>>,
    /// The error, if it failed.
    pub error: Option<String>,
}

impl ControlResult {
    /// The result of `control`, made with the stack's plugin-control call
    /// returning `returned` (`None`: the connection has no plugins).
    pub fn of(
        control: &ControlArg,
        returned: Option<Result<Vec<PluginVal>, RoutineError>>,
    ) -> ControlResult {
        let (result, error) = match returned {
            Some(Ok(vals)) => (Some(vals.iter().map(render).collect()), None),
            Some(Err(e)) => (None, Some(e.to_string())),
            None => (None, Some("no plugins on this connection".into())),
        };
        ControlResult {
            at_ms: control.at.as_millis() as u64,
            id: control.id,
            result,
            error,
        }
    }
}

/// Make the `--control` calls at their times after `start` (the end of the
/// handshake), in order, through `call` (the stack's plugin-control call on
/// one connection).
pub async fn run_controls(
    controls: &[ControlArg],
    start: std::time::Instant,
    mut call: impl FnMut(u64, &[PluginVal]) -> Option<Result<Vec<PluginVal>, RoutineError>>,
) -> Vec<ControlResult> {
    let mut results = Vec::new();
    for c in controls {
        if let Some(wait) = c.at.checked_sub(start.elapsed()) {
            tokio::time::sleep(wait).await;
        }
        results.push(ControlResult::of(c, call(c.id, &c.args)));
    }
    results
}

/// The `--control` calls of one connection on an endpoint that drives its
/// stack from a poll loop (the sans-IO stacks): each is made `at` after the
/// handshake completed, in order; calls due at the same time keep their
/// command-line order.
#[derive(Debug, Clone)]
pub struct ControlSchedule {
    /// Latest first: the next call is popped from the end.
    pending: Vec<ControlArg>,
    established: Option<std::time::Instant>,
    /// The calls made so far.
    pub results: Vec<ControlResult>,
}

impl ControlSchedule {
    /// The schedule of `controls`, waiting for the handshake.
    pub fn new(controls: &[ControlArg]) -> Self {
        let mut pending = controls.to_vec();
        pending.sort_by_key(|c| c.at);
        pending.reverse();
        ControlSchedule {
            pending,
            established: None,
            results: Vec::new(),
        }
    }

    /// The handshake completed at `at` (only the first call counts).
    pub fn establish(&mut self, at: std::time::Instant) {
        self.established.get_or_insert(at);
    }

    /// Whether the handshake has completed.
    pub fn is_established(&self) -> bool {
        self.established.is_some()
    }

    /// Whether every call has been made.
    pub fn is_done(&self) -> bool {
        self.pending.is_empty()
    }

    /// Make the calls due at `now` through `call` (the stack's
    /// plugin-control call on the connection); true when one was made.
    pub fn run_due(
        &mut self,
        now: std::time::Instant,
        mut call: impl FnMut(u64, &[PluginVal]) -> Option<Result<Vec<PluginVal>, RoutineError>>,
    ) -> bool {
        let Some(start) = self.established else {
            return false;
        };
        let mut called = false;
        while self.pending.last().is_some_and(|c| start + c.at <= now) {
            let Some(c) = self.pending.pop() else { break };
            let returned = call(c.id, &c.args);
            self.results.push(ControlResult::of(&c, returned));
            called = true;
        }
        called
    }

    /// When the next call is due (`None`: before the handshake, or none
    /// left).
    pub fn deadline(&self) -> Option<std::time::Instant> {
        self.established
            .and_then(|s| self.pending.last().map(|c| s + c.at))
    }
}

/// The earlier of two optional deadlines.
pub fn earliest(
    a: Option<std::time::Instant>,
    b: Option<std::time::Instant>,
) -> Option<std::time::Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A plugin value as stats text: numbers in decimal, strings as they are,
/// bytes in hex (`0x…`), durations `…ns`, instants `@…ns`, addresses
/// `ip:port`; frames and packet types in their debug form.
struct Rendered<'a>(&'a PluginVal);

impl std::fmt::Display for Rendered<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            PluginVal::None => f.write_str("none"),
            PluginVal::Bool(b) => write!(f, "{b}"),
            PluginVal::U32(n) => write!(f, "{n}"),
            PluginVal::U64(n) => write!(f, "{n}"),
            PluginVal::S64(n) => write!(f, "{n}"),
            PluginVal::F64(n) => write!(f, "{n}"),
            PluginVal::String(s) => f.write_str(s),
            PluginVal::Bytes(b) => {
                f.write_str("0x")?;
                write_hex(f, b)
            }
            PluginVal::Duration(ns) => write!(f, "{ns}ns"),
            PluginVal::Instant(ns) => write!(f, "@{ns}ns"),
            PluginVal::SocketAddr(a) => write!(f, "{}", std::net::SocketAddr::from(*a)),
            // A frame may carry a plugin's whole log budget in bytes, each of
            // which `Debug` writes as a decimal list item: only its start is
            // rendered, so keeping it costs the plugin's call little.
            PluginVal::Frame(frame) => {
                use std::fmt::Write as _;
                let mut capped = Capped {
                    out: f,
                    left: RENDERED_FRAME_CHARS,
                };
                match write!(capped, "{frame:?}") {
                    Ok(()) => Ok(()),
                    Err(_) if capped.left == 0 => f.write_str("…"),
                    Err(e) => Err(e),
                }
            }
            other => write!(f, "{other:?}"),
        }
    }
}

/// At most this many bytes of a frame's `Debug` text are rendered.
const RENDERED_FRAME_CHARS: usize = 512;

/// `bytes` in lowercase hex, a chunk at a time rather than a `write!` per
/// byte.
fn write_hex(f: &mut std::fmt::Formatter<'_>, bytes: &[u8]) -> std::fmt::Result {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut chunk = [0u8; 128];
    for part in bytes.chunks(chunk.len() / 2) {
        let (pairs, _) = chunk.as_chunks_mut::<2>();
        for (pair, byte) in pairs.iter_mut().zip(part) {
            *pair = [
                DIGITS[usize::from(byte >> 4)],
                DIGITS[usize::from(byte & 0xf)],
            ];
        }
        // Only ASCII hex digits were written.
        f.write_str(std::str::from_utf8(&chunk[..part.len() * 2]).unwrap_or_default())?;
    }
    Ok(())
}

/// A writer that passes on at most `left` bytes, cut at a character
/// boundary, and fails once it has cut, which stops the formatting.
struct Capped<'a, 'f> {
    out: &'a mut std::fmt::Formatter<'f>,
    left: usize,
}

impl std::fmt::Write for Capped<'_, '_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if s.len() <= self.left {
            self.left -= s.len();
            return self.out.write_str(s);
        }
        let mut end = self.left;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.out.write_str(&s[..end])?;
        self.left = 0;
        Err(std::fmt::Error)
    }
}

/// One kept record as a stats log line: `{"plugin", "level", "message",
/// "fields": [[key, rendered value], …]}`.
#[derive(Serialize)]
struct LogLine<'a> {
    plugin: &'a str,
    level: &'static str,
    message: &'a str,
    fields: KeptFields<'a>,
}

/// The fields of a kept record, as `[key, value]` pairs.
struct KeptFields<'a> {
    text: &'a str,
    /// The keys, as ranges of `text` (the record's shape's).
    keys: &'a [Range<usize>],
    /// The values, one per key.
    values: &'a [KeptValue],
}

impl Serialize for KeptFields<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.keys.iter().zip(self.values).map(|(key, value)| {
            (
                &self.text[key.clone()],
                KeptValueText {
                    value,
                    text: self.text,
                },
            )
        }))
    }
}

/// A kept field's value. Numbers are kept as they are and rendered when the
/// stats are written, not in the plugin's call: rendering the ACK logger's
/// four numbers cost it about a third of its `log` call. Anything else is
/// rendered into the kept text at once.
#[derive(Clone, Copy)]
enum KeptValue {
    /// A value rendered without text of its own: none, a boolean, a number,
    /// a duration or an instant.
    Plain(PlainValue),
    /// A value rendered into [`KeptLogs::text`], where it is.
    Text(usize, usize),
}

/// The values a [`KeptValue`] keeps as they are.
#[derive(Clone, Copy)]
enum PlainValue {
    None,
    Bool(bool),
    U64(u64),
    S64(i64),
    F64(f64),
    Duration(u64),
    Instant(u64),
}

impl PlainValue {
    fn of(value: &PluginVal) -> Option<PlainValue> {
        Some(match *value {
            PluginVal::None => PlainValue::None,
            PluginVal::Bool(b) => PlainValue::Bool(b),
            PluginVal::U32(n) => PlainValue::U64(n.into()),
            PluginVal::U64(n) => PlainValue::U64(n),
            PluginVal::S64(n) => PlainValue::S64(n),
            PluginVal::F64(n) => PlainValue::F64(n),
            PluginVal::Duration(ns) => PlainValue::Duration(ns),
            PluginVal::Instant(ns) => PlainValue::Instant(ns),
            _ => return None,
        })
    }

    /// The value it was made of, as far as [`Rendered`] tells them apart.
    fn value(self) -> PluginVal {
        match self {
            PlainValue::None => PluginVal::None,
            PlainValue::Bool(b) => PluginVal::Bool(b),
            PlainValue::U64(n) => PluginVal::U64(n),
            PlainValue::S64(n) => PluginVal::S64(n),
            PlainValue::F64(n) => PluginVal::F64(n),
            PlainValue::Duration(ns) => PluginVal::Duration(ns),
            PlainValue::Instant(ns) => PluginVal::Instant(ns),
        }
    }
}

/// A [`KeptValue`] as the JSON string the stats show.
struct KeptValueText<'a> {
    value: &'a KeptValue,
    text: &'a str,
}

impl Serialize for KeptValueText<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match *self.value {
            KeptValue::Plain(plain) => serializer.collect_str(&Rendered(&plain.value())),
            KeptValue::Text(start, end) => serializer.serialize_str(&self.text[start..end]),
        }
    }
}

/// What records of one shape share: their plugin, level, message and
/// keys, kept once. A plugin's records mostly repeat a few shapes (every
/// record of the ACK logger has the same), so a record keeps only its
/// shape and its values.
struct KeptShape {
    /// Index into [`KeptLogs::plugins`].
    plugin: usize,
    level: LogLevel,
    /// A range of [`KeptLogs::text`].
    message: Range<usize>,
    /// A range of [`KeptLogs::keys`].
    keys: Range<usize>,
}

/// One kept record: its shape, and where its values start.
struct KeptRecord {
    /// Index into [`KeptLogs::shapes`].
    shape: usize,
    /// Index into [`KeptLogs::values`] of the first of the record's values,
    /// one per key of its shape.
    values: usize,
}

/// How many of the shapes used last a record is compared with before a new
/// shape is kept for it: enough for a few plugins logging alternately, and
/// a bound on the work of a record whose shape is always new (its text is
/// then kept whole, as every record's was before shapes).
const RECENT_SHAPES: usize = 4;

/// The kept records: their shapes' text in one string, and their values.
#[derive(Default)]
struct KeptLogs {
    /// Messages, keys and rendered values.
    text: String,
    shapes: Vec<KeptShape>,
    /// Each shape's keys, as ranges of `text`.
    keys: Vec<Range<usize>>,
    /// Each record's values, in order.
    values: Vec<KeptValue>,
    records: Vec<KeptRecord>,
    /// The plugins' names, each kept once.
    plugins: Vec<String>,
    /// The shapes used last, the last first.
    recent: Vec<usize>,
}

impl KeptLogs {
    fn keep(&mut self, text: &str) -> Range<usize> {
        let start = self.text.len();
        self.text.push_str(text);
        start..self.text.len()
    }

    /// Whether `record` has shape `shape`.
    fn has_shape(&self, shape: usize, record: &LogRecord) -> bool {
        let shape = &self.shapes[shape];
        shape.level == record.level
            && self.plugins[shape.plugin] == record.plugin
            && self.text[shape.message.clone()] == record.message
            && shape.keys.len() == record.fields.len()
            && self.keys[shape.keys.clone()]
                .iter()
                .zip(&record.fields)
                .all(|(key, (name, _))| self.text[key.clone()] == **name)
    }

    /// The shape of `record`: one of the recent shapes, or a new one.
    fn shape_of(&mut self, record: &LogRecord) -> usize {
        let found = self
            .recent
            .iter()
            .position(|&shape| self.has_shape(shape, record));
        let shape = match found {
            // The shape used last, as every record of a plugin that logs one
            // shape: the order stays.
            Some(0) => return self.recent[0],
            Some(i) => self.recent.remove(i),
            None => self.new_shape(record),
        };
        self.recent.insert(0, shape);
        self.recent.truncate(RECENT_SHAPES);
        shape
    }

    fn new_shape(&mut self, record: &LogRecord) -> usize {
        let plugin = match self.plugins.iter().position(|p| *p == record.plugin) {
            Some(i) => i,
            None => {
                self.plugins.push(record.plugin.clone());
                self.plugins.len() - 1
            }
        };
        let message = self.keep(&record.message);
        let first_key = self.keys.len();
        for (key, _) in &record.fields {
            let key = self.keep(key);
            self.keys.push(key);
        }
        self.shapes.push(KeptShape {
            plugin,
            level: record.level,
            message,
            keys: first_key..self.keys.len(),
        });
        self.shapes.len() - 1
    }
}

/// The plugins' log records of one run, kept for the stats JSON.
///
/// A record arrives inside the plugin's `log` call, on the plugin's CPU
/// deadline, so keeping it must cost little: its plugin, level, message and
/// keys are kept once per shape (records that repeat them share them), its
/// numbers are kept as they are (rendered when the JSON is written), other
/// values are rendered into one string, and the record is dropped. That
/// costs no allocation per record once the buffers have grown, and 24 bytes
/// a field and 16 a record in memory: the ACK logger's records took 1.4 KB
/// of heap each when they were kept whole, and 277 bytes with their text
/// appended every time (the kernel cleared a fresh page every 15 records);
/// now 112. The JSON is written once, by [`LogBook::lines`].
#[derive(Default)]
pub struct LogBook {
    kept: Mutex<KeptLogs>,
}

impl std::fmt::Debug for LogBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        f.debug_struct("LogBook")
            .field("records", &kept.records.len())
            .field("shapes", &kept.shapes.len())
            .field("bytes", &kept.text.len())
            .finish()
    }
}

impl LogBook {
    /// Keep `record`.
    pub fn push(&self, record: &LogRecord) {
        use std::fmt::Write;
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let kept = &mut *kept;
        let shape = kept.shape_of(record);
        let values = kept.values.len();
        for (_, value) in &record.fields {
            let value = match PlainValue::of(value) {
                Some(plain) => KeptValue::Plain(plain),
                None => {
                    let start = kept.text.len();
                    // Writing into a `String` cannot fail.
                    let _ = write!(kept.text, "{}", Rendered(value));
                    KeptValue::Text(start, kept.text.len())
                }
            };
            kept.values.push(value);
        }
        kept.records.push(KeptRecord { shape, values });
    }

    /// The records kept so far, as the stats JSON's `logs` array.
    pub fn lines(&self) -> LogLines {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let lines: Vec<LogLine<'_>> = kept
            .records
            .iter()
            .map(|r| {
                let shape = &kept.shapes[r.shape];
                LogLine {
                    plugin: &kept.plugins[shape.plugin],
                    level: shape.level.name(),
                    message: &kept.text[shape.message.clone()],
                    fields: KeptFields {
                        text: &kept.text,
                        keys: &kept.keys[shape.keys.clone()],
                        values: &kept.values[r.values..r.values + shape.keys.len()],
                    },
                }
            })
            .collect();
        serde_json::value::to_raw_value(&lines)
            .map(LogLines)
            .unwrap_or_default()
    }
}

/// The stats JSON's `logs` array: the log lines of a [`LogBook`], as
/// JSON text.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct LogLines(Box<serde_json::value::RawValue>);

impl Default for LogLines {
    fn default() -> Self {
        LogLines(empty_array())
    }
}

impl LogLines {
    /// The JSON text of the array.
    pub fn json(&self) -> &str {
        self.0.get()
    }
}

/// A plugin value as stats text (see [`LogBook`]'s log lines).
pub fn render(v: &PluginVal) -> String {
    Rendered(v).to_string()
}

fn empty_array() -> Box<serde_json::value::RawValue> {
    serde_json::value::RawValue::from_string("[]".into()).expect("valid JSON")
}

/// The stats JSON every endpoint writes (schema version 1).
#[derive(Debug, Clone, Serialize)]
pub struct Stats {
    /// Schema version.
    pub schema: u32,
    /// The host stack (`quinn`, `s2n-quic`, `quiche`).
    pub host: String,
    /// Client or server.
    pub role: Role,
    /// The test case.
    pub test: String,
    /// Whether this endpoint considers the test passed.
    pub ok: bool,
    /// Client: bytes received and verified; server: bytes served.
    pub bytes: u64,
    /// Wall time of the transfer (client) or of the run (server), ms.
    pub duration_ms: f64,
    /// Handshake duration, ms (client).
    pub handshake_ms: Option<f64>,
    /// Why the connection closed, if it did with an error.
    pub close: Option<String>,
    /// Per-plugin counters.
    pub plugins: Vec<PluginStats>,
    /// Plugin-control calls and their results.
    pub controls: Vec<ControlResult>,
    /// Plugin log lines.
    pub logs: LogLines,
    /// Stack-specific numbers (congestion window, RTT, ...).
    pub extra: Vec<(String, String)>,
    /// CPU time the process had used when its work ended, user and
    /// system, in ms: read before the log lines are rendered, which only
    /// the stats JSON needs (`None` where the platform does not report it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_ms: Option<f64>,
}

impl Stats {
    /// The stats of a run that ended with `error` before it could report
    /// anything else (a failed handshake, the overall timeout): every
    /// endpoint writes its stats JSON, so the reason reaches the runner.
    pub fn failed(host: &str, args: &Args, error: &str) -> Stats {
        Stats {
            close: Some(error.into()),
            ..Stats::of(host, args)
        }
    }

    /// The stats of a run of `args` on `host` that has shown nothing yet
    /// (not passed, nothing transferred), with the CPU time the process has
    /// used so far: endpoints fill in what they saw.
    pub fn of(host: &str, args: &Args) -> Stats {
        Stats {
            schema: 1,
            host: host.into(),
            role: args.role,
            test: args.test.clone(),
            ok: false,
            bytes: 0,
            duration_ms: 0.0,
            handshake_ms: None,
            close: None,
            plugins: Vec::new(),
            controls: Vec::new(),
            logs: LogLines::default(),
            extra: Vec::new(),
            cpu_ms: process_cpu_ms(),
        }
    }

    /// Write the JSON to `path` (if given), with the process's peak RSS
    /// (`peak_rss_kib`), where the system reports it.
    pub fn write(&self, path: Option<&PathBuf>) -> Result<(), String> {
        let Some(path) = path else { return Ok(()) };
        #[derive(Serialize)]
        struct Written<'a> {
            #[serde(flatten)]
            stats: &'a Stats,
            #[serde(skip_serializing_if = "Option::is_none")]
            peak_rss_kib: Option<u64>,
        }
        let written = Written {
            stats: self,
            peak_rss_kib: peak_rss_kib(),
        };
        let json = serde_json::to_string_pretty(&written).map_err(|e| e.to_string())?;
        std::fs::write(path, json).map_err(|e| format!("writing {}: {e}", path.display()))
    }
}

/// What a server saw over the connections it handled, for its stats JSON.
#[derive(Debug, Default)]
pub struct ServerTally {
    /// Connections handled: served, or failed in their handshake.
    pub handled: u64,
    /// Bytes served.
    pub served: u64,
    /// Why the last connection that ended with an error ended.
    pub close: Option<String>,
    /// The plugins' counters, connection after connection.
    pub plugins: Vec<PluginStats>,
    /// The plugin-control calls made.
    pub controls: Vec<ControlResult>,
    /// The server reached its `--timeout` first ([`ServerTally::time_out`]).
    timed_out: bool,
}

impl ServerTally {
    /// Whether the server waits for another connection (`--connections`).
    pub fn wants_more(&self, args: &Args) -> bool {
        args.connections == 0 || self.handled < args.connections
    }

    /// The server's `--timeout` passed before it had handled its
    /// `--connections` (or, with `--connections 0`, at all): the run fails
    /// (ENDPOINT.md), and its stats keep what it saw until then.
    pub fn time_out(&mut self, args: &Args) {
        self.timed_out = true;
        self.close = Some(timed_out(args.timeout));
    }

    /// Write the stats JSON of the server run on `host` that started at
    /// `started`, with the plugins' log lines of `logs`. A server that
    /// reaches its end passes, the client judges the transfer; one that
    /// timed out fails, and says so on stderr (`binary` names the program).
    pub fn finish(
        self,
        binary: &str,
        host: &str,
        args: &Args,
        started: std::time::Instant,
        logs: &Logs,
    ) -> Result<bool, String> {
        if self.timed_out {
            let wanted = match args.connections {
                0 => String::new(),
                n => format!(" of {n}"),
            };
            complain!(
                "{binary}: {} ({}{wanted} connections handled)",
                timed_out(args.timeout),
                self.handled,
            );
        }
        let duration_ms = started.elapsed().as_secs_f64() * 1e3;
        // The CPU time is read here, before the log lines are rendered.
        let ended = Stats::of(host, args);
        let stats = Stats {
            ok: !self.timed_out,
            bytes: self.served,
            duration_ms,
            close: self.close,
            plugins: self.plugins,
            controls: self.controls,
            logs: logs.lines(),
            ..ended
        };
        stats.write(args.stats.as_ref())?;
        Ok(stats.ok)
    }
}

/// What a client saw, for its stats JSON.
#[derive(Debug, Default)]
pub struct ClientTally {
    /// The download: the bytes received and checked, or why it failed;
    /// `None` when the connection closed before it ended.
    pub download: Option<Result<u64, String>>,
    /// How long the download took.
    pub duration: Duration,
    /// How long the handshake took, if it completed.
    pub handshake: Option<Duration>,
    /// Why the connection closed, if it did with an error.
    pub close: Option<String>,
    /// The plugins' counters.
    pub plugins: Vec<PluginStats>,
    /// The plugin-control calls made.
    pub controls: Vec<ControlResult>,
    /// Stack-specific numbers (congestion window, RTT, ...).
    pub extra: Vec<(String, String)>,
}

impl ClientTally {
    /// Write the stats JSON of the client run on `host`, with the plugins'
    /// log lines of `logs`, and say on stderr why a download failed
    /// (`binary` names the program). The client passes when its download
    /// did.
    pub fn finish(
        self,
        binary: &str,
        host: &str,
        args: &Args,
        logs: &Logs,
    ) -> Result<bool, String> {
        let (ok, bytes) = match &self.download {
            Some(Ok(n)) => (true, *n),
            Some(Err(e)) => {
                complain!("{binary}: download failed: {e}");
                (false, 0)
            }
            None => {
                complain!("{binary}: the connection closed before the download ended");
                (false, 0)
            }
        };
        // The CPU time is read here, before the log lines are rendered.
        let ended = Stats::of(host, args);
        let stats = Stats {
            ok,
            bytes,
            duration_ms: self.duration.as_secs_f64() * 1e3,
            handshake_ms: self.handshake.map(|d| d.as_secs_f64() * 1e3),
            close: self.close,
            plugins: self.plugins,
            controls: self.controls,
            logs: logs.lines(),
            extra: self.extra,
            ..ended
        };
        stats.write(args.stats.as_ref())?;
        Ok(ok)
    }
}

/// Why a run that reached its `--timeout` failed, in the same words on
/// every host (stderr and the stats' `close`).
pub fn timed_out(timeout: Duration) -> String {
    format!("timed out after {timeout:?}")
}

/// How a close that a connection's own plugins caused (a defining plugin
/// faulted, or refused a transport parameter) is told in the stats JSON.
pub fn describe_plugins_close(code: u64, reason: &str) -> String {
    format!("local application close {code:#x}: {reason}")
}

/// Whether the command line asks for the host's capabilities
/// (`--capabilities`, ENDPOINT.md) instead of a run.
pub fn capabilities_requested() -> bool {
    std::env::args().skip(1).any(|a| a == "--capabilities")
}

/// Write `text` and a newline to stdout and flush it: an error where
/// `println!` would panic (exit 101) on a stdout that cannot be written,
/// so that the endpoint exits 1 as the contract says.
fn print_line(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()
}

/// Whether the command line asks for the usage text (`--help` or `-h`)
/// instead of a run.
pub fn help_requested() -> bool {
    std::env::args().skip(1).any(|a| a == "--help" || a == "-h")
}

/// The host's capabilities as the JSON object `--capabilities` prints: the
/// ABI version and the WIT names of the fields it can read and write and of
/// the routines it calls (CQ-LOAD-6), and the transport parameters the
/// stack sends itself (CQ-API-8).
pub fn capabilities_json(caps: &corequic_runtime::HostCapabilities) -> String {
    use corequic_runtime::abi::FieldId;
    let names = |set: corequic_runtime::FieldSet| -> Vec<&'static str> {
        FieldId::ALL
            .iter()
            .filter(|f| set.contains(**f))
            .map(|f| f.name())
            .collect()
    };
    let routines: Vec<&'static str> = caps.routines.iter().map(|r| r.name()).collect();
    serde_json::json!({
        "abi_version": corequic_runtime::abi::ABI_VERSION,
        "readable": names(caps.readable),
        "writable": names(caps.writable),
        "routines": routines,
        "stack_transport_parameters": caps.stack_transport_parameters,
    })
    .to_string()
}

/// The plugins' log records of one run, kept for the stats JSON.
pub type Logs = Arc<LogBook>;

/// A log sink (for [`Attachment::log_sink`]) that keeps records in `logs`.
pub fn log_sink(logs: &Logs) -> corequic_adapter::LogSink {
    let logs = logs.clone();
    Arc::new(move |record| logs.push(record))
}

impl Args {
    /// The `--plugin`s loaded into a runtime for a host with
    /// `capabilities`, attached with their log records collected in `logs`:
    /// what the host's `PluginFactory` holds. `None` when there are none:
    /// without plugins an endpoint runs its plain stack, with no runtime at
    /// all (no engine, no epoch ticker), which is what plugin-free
    /// baselines measure.
    pub fn attachment(
        &self,
        capabilities: HostCapabilities,
        logs: &Logs,
    ) -> Result<Option<Attachment>, String> {
        if self.plugins.is_empty() {
            return Ok(None);
        }
        let runtime = Arc::new(
            Runtime::new(self.runtime_config(), capabilities)
                .map_err(|e| format!("runtime: {e}"))?,
        );
        let plugins = self
            .plugins
            .iter()
            .map(|p| runtime.load_file(&p.path, &p.grants))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        Ok(Some(
            Attachment::new(runtime, plugins).log_sink(log_sink(logs)),
        ))
    }
}

/// An endpoint's `main`: `--capabilities`, the command line, the test name,
/// then `run` on a single-threaded tokio runtime, and the exit code of
/// ENDPOINT.md. A run that fails with an error still writes its stats JSON,
/// with the error as its close reason. `binary` names the program in its
/// messages, `host` the stack in its stats.
pub fn main<F>(
    binary: &str,
    host: &str,
    capabilities: HostCapabilities,
    run: impl FnOnce(Args) -> F,
) -> ExitCode
where
    F: Future<Output = Result<bool, String>>,
{
    if capabilities_requested() {
        return match print_line(&capabilities_json(&capabilities)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                complain!("{binary}: writing the capabilities: {e}");
                ExitCode::from(EXIT_FAIL as u8)
            }
        };
    }
    if help_requested() {
        return match print_line(USAGE) {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::from(EXIT_FAIL as u8),
        };
    }
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(e) => {
            complain!("{binary}: {e}\n{USAGE}");
            return ExitCode::from(EXIT_FAIL as u8);
        }
    };
    if !args.test_supported() {
        complain!("{binary}: unsupported test `{}`", args.test);
        return ExitCode::from(EXIT_UNSUPPORTED as u8);
    }
    // One thread: the stack, its socket and the application share it. On a
    // multi-thread runtime the connection's driver and the application task
    // could land on different workers and contend for the connection, which
    // made a download's CPU time bimodal (about 5,000 or 11,000 context
    // switches of a quinn server per 500 MB); with one thread a loopback
    // download is about 35 % faster (docs/measurements.md, "one thread per
    // endpoint").
    let tokio = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            complain!("{binary}: cannot start tokio: {e}");
            return ExitCode::from(EXIT_FAIL as u8);
        }
    };
    let reported = args.clone();
    let code = match tokio.block_on(run(args)) {
        Ok(true) => EXIT_PASS,
        Ok(false) => EXIT_FAIL,
        Err(e) => {
            complain!("{binary}: {e}");
            let failed = Stats::failed(host, &reported, &e);
            if let Err(w) = failed.write(reported.stats.as_ref()) {
                complain!("{binary}: {w}");
            }
            EXIT_FAIL
        }
    };
    ExitCode::from(code as u8)
}

/// The process's peak resident set size in KiB (`VmHWM` of
/// `/proc/self/status`; `None` where there is no such file).
pub fn peak_rss_kib() -> Option<u64> {
    proc_status_kib("VmHWM:")
}

/// CPU time the process has used so far, user and system, in ms: what a
/// measurement compares besides goodput, since goodput on a 2-core machine
/// also depends on how the two endpoints and the emulator share the cores
/// (`None` where the platform does not report it).
#[cfg(unix)]
pub fn process_cpu_ms() -> Option<f64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and the clock id a
    // constant every supported unix provides.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6)
}

/// CPU time the process has used so far (not reported on this platform).
#[cfg(not(unix))]
pub fn process_cpu_ms() -> Option<f64> {
    None
}

/// The process's resident set size now, in KiB (`VmRSS`).
pub fn rss_kib() -> Option<u64> {
    proc_status_kib("VmRSS:")
}

fn proc_status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Result<Args, String> {
        Args::parse(s.split_whitespace().map(String::from))
    }

    #[test]
    fn log_lines_use_wit_level_names_and_plain_text_values() {
        let book = LogBook::default();
        assert_eq!(book.lines().json(), "[]");
        let record = LogRecord {
            plugin: "p".into(),
            level: corequic_runtime::abi::LogLevel::Debug,
            message: "m \"quoted\"".into(),
            fields: vec![
                ("s".into(), PluginVal::String("DUMMY counter=3".into())),
                ("b".into(), PluginVal::Bytes(vec![0x0a, 0xff])),
                (
                    "a".into(),
                    PluginVal::from("[::1]:4433".parse::<std::net::SocketAddr>().unwrap()),
                ),
                ("n".into(), PluginVal::None),
                ("d".into(), PluginVal::Duration(25_000)),
                ("t".into(), PluginVal::Bool(true)),
                ("u".into(), PluginVal::U32(9)),
                ("i".into(), PluginVal::S64(-3)),
                ("f".into(), PluginVal::F64(1.5)),
                ("at".into(), PluginVal::Instant(7)),
            ],
        };
        book.push(&record);
        book.push(&LogRecord {
            plugin: "q".into(),
            fields: vec![("n".into(), PluginVal::U64(7))],
            ..record.clone()
        });
        book.push(&LogRecord {
            fields: Vec::new(),
            ..record
        });
        let lines: serde_json::Value = serde_json::from_str(book.lines().json()).unwrap();
        assert_eq!(
            lines,
            serde_json::json!([
                {
                    "plugin": "p",
                    "level": "debug",
                    "message": "m \"quoted\"",
                    "fields": [
                        ["s", "DUMMY counter=3"],
                        ["b", "0x0aff"],
                        ["a", "[::1]:4433"],
                        ["n", "none"],
                        ["d", "25000ns"],
                        ["t", "true"],
                        ["u", "9"],
                        ["i", "-3"],
                        ["f", "1.5"],
                        ["at", "@7ns"],
                    ],
                },
                {"plugin": "q", "level": "debug", "message": "m \"quoted\"", "fields": [["n", "7"]]},
                {"plugin": "p", "level": "debug", "message": "m \"quoted\"", "fields": []},
            ])
        );
    }

    /// Records that share a plugin, level, message and keys share their
    /// shape; any difference, or a shape used longer ago than
    /// [`RECENT_SHAPES`] records, keeps a shape of its own, and every record
    /// reads back as it was logged.
    #[test]
    fn records_of_one_shape_share_it_and_read_back_as_logged() {
        let record = |plugin: &str, level, message: &str, fields: &[(&str, u64)]| LogRecord {
            plugin: plugin.into(),
            level,
            message: message.into(),
            fields: fields
                .iter()
                .map(|&(k, v)| (k.into(), PluginVal::U64(v)))
                .collect(),
        };
        use LogLevel::{Debug, Info};
        let fields = [("largest", 1), ("delay", 2)];
        let ack = |n| record("ack", Info, "ack", &[("largest", n), ("delay", 2)]);
        // Each differs from the ACK records in one part of their shape.
        let others = [
            record("ack", Info, "ack", &fields[..1]),
            record("ack", Info, "ack", &[("largest", 1), ("delai", 2)]),
            record("ack", Debug, "ack", &fields),
            record("dummy", Info, "ack", &fields),
            record("ack", Info, "acks", &fields),
            record("ack", Info, "ack", &[]),
        ];
        let book = LogBook::default();
        let mut logged = Vec::new();
        for n in 0..3 {
            logged.push(ack(n));
        }
        // More shapes than are compared with: the first comes back as new.
        logged.extend(others.iter().cloned());
        logged.push(ack(3));
        logged.push(ack(4));
        for r in &logged {
            book.push(r);
        }
        let kept = book.kept.lock().unwrap();
        assert_eq!(kept.records.len(), logged.len());
        assert_eq!(
            kept.shapes.len(),
            1 + others.len() + 1,
            "the three first ACK records share a shape, each other record has \
             its own, and the ACK records after six others a new one"
        );
        assert_eq!(kept.records[0].shape, kept.records[2].shape);
        assert_eq!(kept.records[9].shape, kept.records[10].shape);
        drop(kept);
        let expected: Vec<serde_json::Value> = logged
            .iter()
            .map(|r| {
                serde_json::json!({
                    "plugin": r.plugin,
                    "level": r.level.name(),
                    "message": r.message,
                    "fields": r.fields.iter().map(|(k, v)| (k.clone(), render(v))).collect::<Vec<_>>(),
                })
            })
            .collect();
        let lines: serde_json::Value = serde_json::from_str(book.lines().json()).unwrap();
        assert_eq!(lines, serde_json::Value::Array(expected));
    }

    /// A frame's rendering stops after [`RENDERED_FRAME_CHARS`], however
    /// many bytes it carries; a short one is rendered whole, and bytes of
    /// any length in full hex.
    #[test]
    fn a_frame_is_rendered_up_to_a_cap_and_bytes_in_full() {
        use corequic_runtime::abi::Frame;
        let small = render(&PluginVal::Frame(Frame::MaxData(1_000)));
        assert_eq!(small, format!("{:?}", Frame::MaxData(1_000)));
        assert!(!small.ends_with('…'), "{small}");
        let token = PluginVal::Frame(Frame::NewToken(vec![b't'; 64 * 1024]));
        let rendered = render(&token);
        assert!(rendered.ends_with('…'), "{rendered}");
        assert_eq!(rendered.len(), RENDERED_FRAME_CHARS + '…'.len_utf8());
        let whole = format!("{:?}", Frame::NewToken(vec![b't'; 64 * 1024]));
        assert!(whole.starts_with(rendered.trim_end_matches('…')));
        let bytes: Vec<u8> = (0..=255).cycle().take(1_000).collect();
        let hex = render(&PluginVal::Bytes(bytes.clone()));
        let expected: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, format!("0x{expected}"));
    }

    /// `stats` as its JSON file says it, written to a scratch file named
    /// after `test`.
    fn written_json(stats: &Stats, test: &str) -> serde_json::Value {
        let path =
            std::env::temp_dir().join(format!("corequic-stats-{test}-{}.json", std::process::id()));
        stats.write(Some(&path)).unwrap();
        let written = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let _ = std::fs::remove_file(&path);
        written
    }

    #[test]
    fn stats_json_carries_the_log_lines_and_peak_rss() {
        let args = args("--role client --addr 127.0.0.1:1 --test transfer").unwrap();
        let logs: Logs = Arc::default();
        logs.push(&LogRecord {
            plugin: "ack-logger".into(),
            level: corequic_runtime::abi::LogLevel::Info,
            message: "ack processed".into(),
            fields: vec![("largest-acknowledged".into(), PluginVal::U64(7))],
        });
        let peak_before = peak_rss_kib();
        let stats = Stats {
            logs: logs.lines(),
            ..Stats::of("mock", &args)
        };
        let written = written_json(&stats, "logs");
        assert_eq!(written["host"], "mock");
        assert_eq!(
            written["logs"],
            serde_json::json!([{
                "plugin": "ack-logger",
                "level": "info",
                "message": "ack processed",
                "fields": [["largest-acknowledged", "7"]],
            }])
        );
        // Linux syncs its RSS counters lazily, so only presence is exact.
        let written_peak = written["peak_rss_kib"].as_u64();
        assert_eq!(written_peak.is_some(), peak_before.is_some());
        assert!(written_peak.is_none_or(|kib| kib > 0));
    }

    #[test]
    fn stats_json_carries_the_cpu_time_used() {
        let args = args("--role server --addr 127.0.0.1:1 --test transfer").unwrap();
        let before = process_cpu_ms().expect("a unix process CPU clock");
        // Work the clock must see: 20 ms of CPU on this thread.
        let mut x = 0u64;
        while process_cpu_ms().unwrap_or(f64::MAX) < before + 20.0 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(x > 0);
        let written = written_json(&Stats::of("mock", &args), "cpu");
        let cpu = written["cpu_ms"].as_f64().expect("cpu_ms written");
        assert!(cpu >= before + 20.0, "{before} ms, then {cpu} ms");
    }

    /// The CPU time is read when the run's work ends, before its log lines
    /// are rendered (thousands of records for a long transfer with the ACK
    /// logger), not again when the JSON is written.
    #[test]
    fn stats_json_carries_the_cpu_time_read_when_the_work_ended() {
        let args = args("--role client --addr 127.0.0.1:1 --test transfer").unwrap();
        let stats = Stats {
            cpu_ms: Some(1.25),
            ..Stats::of("mock", &args)
        };
        let written = written_json(&stats, "cpu-ended");
        assert_eq!(written["cpu_ms"].as_f64(), Some(1.25));
    }

    #[test]
    fn parses_the_contract() {
        let a = args(
            "--role client --addr 127.0.0.1:4433 --test bdp --plugin bdp.wasm \
             --plugin p.wasm=perm=logging --size 20 --control 10:0x80000:500000 --control 0:1",
        )
        .expect("valid");
        assert_eq!(a.role, Role::Client);
        assert_eq!(a.plugins.len(), 2);
        assert_eq!(a.plugins[1].grants.permissions.len(), 1);
        assert_eq!(a.size, 20);
        assert_eq!(
            a.controls,
            vec![
                ControlArg {
                    at: Duration::from_millis(10),
                    id: 0x80000,
                    args: vec![PluginVal::U64(500_000)]
                },
                ControlArg {
                    at: Duration::ZERO,
                    id: 1,
                    args: vec![]
                },
            ]
        );
        assert!(a.test_supported());
        assert!(
            !args("--role client --addr 127.0.0.1:1 --test nope")
                .unwrap()
                .test_supported()
        );
    }

    #[test]
    fn rejects_bad_input_with_a_message() {
        assert!(
            args("--role client --test x")
                .unwrap_err()
                .contains("--addr")
        );
        assert!(
            args("--role peer --addr 127.0.0.1:1 --test x")
                .unwrap_err()
                .contains("role")
        );
        assert!(args("--role client --addr 127.0.0.1:1 --test x --control zz").is_err());
        assert!(args("--role client --addr 127.0.0.1:1 --test x --bogus").is_err());
    }

    #[test]
    fn payload_checks_name_the_first_wrong_byte() {
        let offset = 1000;
        let mut bytes = payload(offset, PAYLOAD_CHUNK).to_vec();
        bytes.extend_from_slice(payload(offset + PAYLOAD_CHUNK as u64, 10));
        assert_eq!(check_payload(offset, &bytes), Ok(()));
        let wrong = PAYLOAD_CHUNK + 3;
        bytes[wrong] ^= 1;
        assert_eq!(
            check_payload(offset, &bytes),
            Err(format!("byte {} differs", offset + wrong as u64))
        );
    }

    #[test]
    fn controls_run_in_order_after_the_handshake() {
        let control = |at, id| ControlArg {
            at: Duration::from_millis(at),
            id,
            args: Vec::new(),
        };
        let mut schedule = ControlSchedule::new(&[control(20, 1), control(0, 2), control(20, 3)]);
        let start = std::time::Instant::now();
        let mut calls = Vec::new();
        let mut call = |id: u64, _: &[PluginVal]| -> Option<Result<Vec<PluginVal>, RoutineError>> {
            calls.push(id);
            Some(Ok(Vec::new()))
        };
        assert!(!schedule.run_due(start, &mut call), "before the handshake");
        assert_eq!(schedule.deadline(), None);
        schedule.establish(start);
        schedule.establish(start + Duration::from_secs(1));
        assert!(schedule.run_due(start, &mut call));
        assert_eq!(schedule.deadline(), Some(start + Duration::from_millis(20)));
        assert!(schedule.run_due(start + Duration::from_millis(20), &mut call));
        assert!(schedule.is_done());
        assert_eq!(calls, [2, 1, 3]);
        assert_eq!(schedule.results.len(), 3);
        assert_eq!(earliest(None, Some(start)), Some(start));
    }

    #[test]
    fn requests_and_payloads() {
        assert_eq!(parse_request(b"GET /1234\r\n"), Some(1234));
        assert_eq!(parse_request(b"POST /1"), None);
        assert_eq!(payload_byte(0), 0);
        assert_eq!(payload_byte(9), 28);
        let expected: Vec<u8> = (1000..1000 + 5000).map(payload_byte).collect();
        assert_eq!(payload(1000, 5000), &expected[..]);
        assert_eq!(payload(7, PAYLOAD_CHUNK + 10).len(), PAYLOAD_CHUNK);
    }
}
