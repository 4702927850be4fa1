//! Scale: one quinn server holding many concurrent connections, each with
//! the four non-padding reference plugins (probe, BDP, DUMMY, ACK logger),
//! against the same server without plugins (`make scale`).
//!
//! A quinn-proto server and client run in this process over an in-memory
//! link: the client opens N connections at once, and datagrams are handed
//! between the two endpoints until every handshake has completed on both
//! sides. Measured:
//!
//! - the handshake rate, N divided by the time from the first `connect` to
//!   the last completed handshake (client and server work together, the
//!   client without plugins in both configurations);
//! - the resident memory the N open connections hold (`VmRSS` after the
//!   handshakes minus `VmRSS` before the first `connect`), per connection.
//!
//! Each count is measured twice: on a fresh process, where every plugin
//! instance takes a pool slot no instance used before, and on a server
//! that already opened and closed as many connections, whose instances
//! take the slots those returned, as on a server that has run for a while.
//!
//! Every run is a fresh child process, so that memory an earlier run freed
//! but the allocator kept does not hide a later run's; the two
//! configurations alternate, nine runs each for every N (25 for a single
//! connection, whose one handshake spreads more), and the table shows
//! the medians.
//! A socket per connection would add the kernel's buffers, the same with
//! and without plugins; the endpoint binaries serve one connection at a
//! time, so the in-memory link is how one server holds N of them.

// The bench shares the tests' endpoint setup, not their one-connection Pair.
#[allow(dead_code)]
#[path = "../tests/common/mod.rs"]
mod common;

use bytes::BytesMut;
use corequic_endpoint::rss_kib;
use corequic_endpoint::testing::plugin_path;
use corequic_quinn::{AdapterExtension, Attachment, QuinnPlugins};
use corequic_runtime::{Grants, Runtime, RuntimeConfig};
use quinn_proto::{Connection, ConnectionHandle, DatagramEvent, Endpoint, Event, TransportConfig};
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

/// The plugins of the server's connections.
const PLUGINS: [&str; 4] = ["probe", "bdp", "dummy", "ack-logger"];
/// Connection counts.
const COUNTS: [usize; 3] = [1, 100, 1000];
/// Runs per (count, configuration), alternating the two configurations;
/// the table shows the medians.
const RUNS: usize = 9;
/// Runs for a single connection: its one handshake spreads by a factor of
/// two between runs (281–596 µs without plugins), and a run is short.
const RUNS_ONE: usize = 25;

/// One quinn endpoint's side of the in-memory link.
struct Side {
    endpoint: Endpoint,
    connections: HashMap<ConnectionHandle, Connection>,
    addr: SocketAddr,
    established: usize,
}

impl Side {
    fn new(endpoint: Endpoint, port: u16) -> Side {
        Side {
            endpoint,
            connections: HashMap::new(),
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            established: 0,
        }
    }

    /// Every datagram this side's connections send now, and the events they
    /// raise on the way.
    fn transmit(&mut self, now: Instant) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = Vec::new();
        for (ch, conn) in &mut self.connections {
            loop {
                buf.clear();
                let Some(t) = conn.poll_transmit(now, 1, &mut buf) else {
                    break;
                };
                out.push(buf[..t.size].to_vec());
            }
            while let Some(ev) = conn.poll_endpoint_events() {
                if let Some(ev) = self.endpoint.handle_event(*ch, ev) {
                    conn.handle_event(ev);
                }
            }
            while let Some(ev) = conn.poll() {
                if matches!(ev, Event::Connected) {
                    self.established += 1;
                }
            }
        }
        out
    }

    fn receive(&mut self, now: Instant, from: SocketAddr, datagrams: Vec<Vec<u8>>) {
        let mut buf = Vec::new();
        for d in datagrams {
            buf.clear();
            match self
                .endpoint
                .handle(now, from, None, None, BytesMut::from(&d[..]), &mut buf)
            {
                Some(DatagramEvent::NewConnection(incoming)) => {
                    let (ch, conn) = self
                        .endpoint
                        .accept(incoming, now, &mut buf, None)
                        .expect("accept");
                    self.connections.insert(ch, conn);
                }
                Some(DatagramEvent::ConnectionEvent(ch, ev)) => {
                    if let Some(conn) = self.connections.get_mut(&ch) {
                        conn.handle_event(ev);
                    }
                }
                Some(DatagramEvent::Response(_)) | None => {}
            }
        }
    }
}

/// A transport, with the four plugins on every connection when
/// `connections` is given: the runtime's instance pool is sized for them
/// (the default pool, 256 instances, holds 64 connections of four plugins;
/// a connection beyond it would run without plugins).
fn transport(connections: Option<usize>) -> TransportConfig {
    let mut t = common::transport();
    if let Some(n) = connections {
        let config = RuntimeConfig {
            pool_instances: u32::try_from(PLUGINS.len() * n).expect("pool size"),
            ..RuntimeConfig::default()
        };
        let runtime =
            Arc::new(Runtime::new(config, corequic_quinn::capabilities()).expect("runtime"));
        let plugins = PLUGINS
            .iter()
            .map(|p| {
                runtime
                    .load_file(&plugin_path(p), &Grants::all())
                    .expect("plugin")
            })
            .collect();
        let factory = corequic_quinn::PluginFactory(Attachment::new(runtime, plugins));
        t.extension_factory(Some(Arc::new(factory)));
    }
    t
}

/// Drive `n` new connections from `client` to `server` until every
/// handshake has completed on both sides.
fn handshakes(client: &mut Side, server: &mut Side, config: &quinn_proto::ClientConfig, n: usize) {
    let (client_before, server_before) = (client.established, server.established);
    for _ in 0..n {
        let (ch, conn) = client
            .endpoint
            .connect(Instant::now(), config.clone(), server.addr, "localhost")
            .expect("connect");
        client.connections.insert(ch, conn);
    }
    while client.established - client_before < n || server.established - server_before < n {
        let now = Instant::now();
        let to_server = client.transmit(now);
        let to_client = server.transmit(now);
        assert!(
            !(to_server.is_empty() && to_client.is_empty()),
            "the handshakes stalled: {} of {n} client and {} server connections established",
            client.established - client_before,
            server.established - server_before
        );
        server.receive(now, client.addr, to_server);
        client.receive(now, server.addr, to_client);
    }
}

/// One measurement: `n` connections, the server with plugins or without,
/// its pool slots fresh or `reused`; prints `handshakes_per_second
/// kib_per_connection close_us_per_connection`.
fn measure(n: usize, with_plugins: bool, reused: bool) {
    // Plugins are compiled and loaded here, before the baseline is taken:
    // what is measured is what each connection adds.
    let server_transport = transport(with_plugins.then_some(n));
    let common::Endpoints {
        client: client_ep,
        server: server_ep,
        client_config,
    } = common::Endpoints::new(transport(None), server_transport);
    let mut server = Side::new(server_ep, 4433);
    let mut client = Side::new(client_ep, 4434);
    if reused {
        // A first round, closed before the measured one: its connections
        // return their plugins' instances to the pool.
        handshakes(&mut client, &mut server, &client_config, n);
        server.connections.clear();
        client.connections.clear();
    }

    let before = rss_kib().expect("VmRSS");
    let started = Instant::now();
    handshakes(&mut client, &mut server, &client_config, n);
    let elapsed = started.elapsed().as_secs_f64();
    let after = rss_kib().expect("VmRSS");
    assert_eq!(server.connections.len(), n);
    // Every server connection holds its plugins (none was refused for lack
    // of pool room).
    let mut attached = 0;
    for conn in server.connections.values_mut() {
        let plugins = conn.with_extension(Instant::now(), |ext, _| {
            QuinnPlugins::from_any(ext.as_any_mut()).map(|p| p.stats().len())
        });
        if plugins.flatten() == Some(PLUGINS.len()) {
            attached += 1;
        }
    }
    assert_eq!(
        attached,
        if with_plugins { n } else { 0 },
        "connections with plugins"
    );
    // Closing: what dropping the server's connections costs, plugins'
    // instances returned to the pool included.
    let closing = Instant::now();
    server.connections.clear();
    let closed = closing.elapsed().as_secs_f64();
    println!(
        "{:.1} {:.1} {:.1}",
        n as f64 / elapsed,
        after.saturating_sub(before) as f64 / n as f64,
        closed * 1e6 / n as f64
    );
}

/// The median of each of the three measures over the runs.
fn medians(runs: &[[f64; 3]]) -> [f64; 3] {
    [0, 1, 2].map(|i| {
        let mut v: Vec<f64> = runs.iter().map(|r| r[i]).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // A child: one measurement.
    if let [flag, n, plugins, slots] = args.as_slice()
        && flag == "--measure"
    {
        measure(
            n.parse().expect("count"),
            plugins == "plugins",
            slots == "reused",
        );
        return;
    }
    // cargo bench passes `--bench`; anything else is ignored.
    let exe = std::env::current_exe().expect("own path");
    let run = |n: usize, config: &str, slots: &str| -> [f64; 3] {
        let out = Command::new(&exe)
            .args(["--measure", &n.to_string(), config, slots])
            .output()
            .expect("child");
        assert!(
            out.status.success(),
            "{n} connections, {config}, {slots} slots: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let mut fields = text
            .split_whitespace()
            .map(|f| f.parse::<f64>().expect("number"));
        [(); 3].map(|_| fields.next().expect("rate, memory and close"))
    };
    println!(
        "| connections | pool slots | handshakes/s, no plugins | handshakes/s, 4 plugins | ratio | KiB/connection, no plugins | KiB/connection, 4 plugins | extra KiB/connection | close µs/connection, no plugins | close µs/connection, 4 plugins |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for slots in ["fresh", "reused"] {
        for n in COUNTS {
            // The two configurations alternate, so that a slow minute of the
            // machine weighs on both alike.
            let mut without = Vec::new();
            let mut with = Vec::new();
            for _ in 0..if n == 1 { RUNS_ONE } else { RUNS } {
                without.push(run(n, "none", slots));
                with.push(run(n, "plugins", slots));
            }
            let [rate0, kib0, close0] = medians(&without);
            let [rate4, kib4, close4] = medians(&with);
            // Memory is what the measured connections added: with reused
            // slots, the first round's already made them resident.
            let memory = if slots == "fresh" {
                format!("{kib0:.1} | {kib4:.1} | {:.1}", kib4 - kib0)
            } else {
                "— | — | —".to_string()
            };
            println!(
                "| {n} | {slots} | {rate0:.0} | {rate4:.0} | {:.1} % | {memory} | {close0:.1} | {close4:.1} |",
                100.0 * rate4 / rate0,
            );
        }
    }
}
