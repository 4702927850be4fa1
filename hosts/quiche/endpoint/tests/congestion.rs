//! CQ-SEND-10 on quiche: an ACK-only packet that congestion control lets out
//! only because it is not in flight is offered the registrations that are not
//! in flight (padding), and no others (the BDP plugin's in-flight frame).
//!
//! Two quiche connections are wired together in memory: datagrams are handed
//! from `send` to `recv` by the test, which drops the client's stream
//! packets so that they stay in flight, and then shrinks the client's
//! congestion window below them. Nothing sleeps and no timer is run (quiche
//! reads its own clock, but only timers act on it, and `on_timeout` is never
//! called), so every step is deterministic. The outcome is read from the
//! adapter's per-type frame counters and per-plugin routine calls, the
//! datagram's size and quiche's bytes in flight.
//!
//! The in-flight frame is BDP's (after-ack, ack-eliciting, in flight, sent
//! by a client once plugin-control gives it a window), because the test
//! decides when it is due. test-bench's frame would do too, but test-bench
//! also writes `max-tx-data`, which would move the flow limits the test
//! leaves alone. quiche already limits the after-ack room by the window, so
//! a full window left no room for BDP's frame before CQ-SEND-10 either; what
//! CQ-SEND-10 changes is that BDP is not offered at all: its routines are not
//! called for that packet.

use corequic_endpoint::testing::load_plugins;
use corequic_quiche::{AdapterExtension, Attachment, PluginFactory, with_plugins};
use corequic_quiche_endpoint::driver;
use corequic_runtime::abi::PluginVal;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

/// The endpoints' datagram size.
const MTU: usize = 1200;
/// The BDP plugin's frame: at after-ack, ack-eliciting, in flight.
const BDP: u64 = 0xBD;
/// The BDP plugin's plugin-control: the window a client sends.
const BDP_SET_WINDOW: u64 = 0x80000;
/// The padding plugin's frame: at end, not ack-eliciting, not in flight.
const PADDING: u64 = 0x00;
/// The padding plugin's on/off plugin-control.
const PADDING_TOGGLE: u64 = 0x80001;

fn config(server: bool, plugins: &[&str]) -> quiche::Config {
    let paths: Vec<_> = plugins
        .iter()
        .map(|p| corequic_endpoint::testing::plugin_path(p))
        .collect();
    let (runtime, plugins) = load_plugins(corequic_quiche::capabilities(), &paths);
    let mut config = if server {
        driver::server_config()
    } else {
        driver::client_config()
    }
    .expect("quiche config");
    config.set_extension_factory(Some(Arc::new(PluginFactory(Attachment::new(
        runtime, plugins,
    )))));
    config
}

struct Pair {
    client: quiche::Connection,
    server: quiche::Connection,
    client_addr: SocketAddr,
    server_addr: SocketAddr,
}

impl Pair {
    /// A client and a server through their handshake.
    fn new(client_plugins: &[&str], server_plugins: &[&str]) -> Pair {
        let client_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 4434));
        let server_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 4433));
        let mut client = quiche::connect(
            Some("localhost"),
            &driver::new_cid(),
            client_addr,
            server_addr,
            &mut config(false, client_plugins),
        )
        .expect("connect");
        // Padding off, so that the client never halts (a halt ends on a
        // plugin timer, and no timer runs here).
        set_padding(&mut client, false);
        let first = transmit(&mut client, usize::MAX);
        let server = quiche::accept(
            &driver::new_cid(),
            None,
            server_addr,
            client_addr,
            &mut config(true, server_plugins),
        )
        .expect("accept");
        let mut p = Pair {
            client,
            server,
            client_addr,
            server_addr,
        };
        p.deliver_to_server(first);
        assert!(p.settle(100), "the handshake went quiet");
        assert!(p.client.is_established() && p.server.is_established());
        p
    }

    fn deliver_to_server(&mut self, datagrams: Vec<Vec<u8>>) {
        let info = quiche::RecvInfo {
            from: self.client_addr,
            to: self.server_addr,
        };
        for mut d in datagrams {
            self.server.recv(&mut d, info).expect("server recv");
        }
    }

    fn deliver_to_client(&mut self, datagrams: Vec<Vec<u8>>) {
        let info = quiche::RecvInfo {
            from: self.server_addr,
            to: self.client_addr,
        };
        for mut d in datagrams {
            self.client.recv(&mut d, info).expect("client recv");
        }
    }

    /// Exchange datagrams until neither side sends any more, at most
    /// `rounds` times; returns whether they went quiet.
    fn settle(&mut self, rounds: usize) -> bool {
        for _ in 0..rounds {
            let c = transmit(&mut self.client, usize::MAX);
            let quiet_client = c.is_empty();
            self.deliver_to_server(c);
            let s = transmit(&mut self.server, usize::MAX);
            if quiet_client && s.is_empty() {
                return true;
            }
            self.deliver_to_client(s);
        }
        false
    }
}

/// Up to `max` datagrams a connection sends now.
fn transmit(conn: &mut quiche::Connection, max: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = [0u8; 65_536];
    while out.len() < max {
        match conn.send(&mut buf) {
            Ok((n, _)) => out.push(buf[..n].to_vec()),
            Err(quiche::Error::Done) => break,
            Err(e) => panic!("send: {e}"),
        }
    }
    out
}

fn control(conn: &mut quiche::Connection, id: u64, arg: PluginVal) -> Vec<PluginVal> {
    with_plugins(conn, |p, cx| p.plugin_control(cx, id, &[arg]))
        .expect("plugins")
        .expect("plugin-control")
}

fn set_padding(conn: &mut quiche::Connection, on: bool) {
    let r = control(conn, PADDING_TOGGLE, PluginVal::Bool(on));
    assert_eq!(r, vec![PluginVal::Bool(on)]);
}

/// Frames of `frame_type` the adapter has written so far.
fn sent(conn: &mut quiche::Connection, frame_type: u64) -> u64 {
    with_plugins(conn, |p, _| p.frame_counts(frame_type).sent).expect("plugins")
}

/// Routine calls made into the plugin `name`.
fn calls(conn: &mut quiche::Connection, name: &str) -> u64 {
    with_plugins(conn, |p, _| p.stats())
        .expect("plugins")
        .into_iter()
        .find(|s| s.name == name)
        .map(|s| s.calls)
        .expect("the plugin's stats")
}

fn bytes_in_flight(conn: &mut quiche::Connection) -> usize {
    with_plugins(conn, |_, cx| cx.info().bytes_in_flight).expect("plugins")
}

fn set_cwnd(conn: &mut quiche::Connection, cwnd: usize) {
    assert!(with_plugins(conn, |_, cx| cx.set_cwnd(cwnd)).expect("plugins"));
}

#[test]
fn an_ack_only_packet_under_a_full_window_is_padded_without_in_flight_frames() {
    let mut p = Pair::new(&["bdp", "padding"], &["bdp"]);

    // Stream packets the server never gets stay in flight; the window then
    // shrinks below them (to quiche's minimum), so it is full.
    p.client
        .stream_send(0, &[0x55; 8 * MTU], false)
        .expect("stream data");
    let lost = transmit(&mut p.client, 4);
    assert_eq!(lost.len(), 4);
    assert!(bytes_in_flight(&mut p.client) > 2 * MTU);
    set_cwnd(&mut p.client, 0);
    assert!(transmit(&mut p.client, 1).is_empty(), "the window is full");

    // A server PING makes an ACK due at the client, and BDP now has an
    // in-flight frame to send.
    p.server.send_ack_eliciting().expect("PING");
    let ping = transmit(&mut p.server, usize::MAX);
    assert!(!ping.is_empty());
    p.deliver_to_client(ping);
    assert!(control(&mut p.client, BDP_SET_WINDOW, PluginVal::U64(100_000)).is_empty());
    set_padding(&mut p.client, true);
    let (bdp, padding) = (sent(&mut p.client, BDP), sent(&mut p.client, PADDING));
    let bdp_calls = calls(&mut p.client, "bdp");
    let in_flight = bytes_in_flight(&mut p.client);

    // The ACK goes, padded to the MTU, out of flight, and BDP is not even
    // offered the packet.
    let datagrams = transmit(&mut p.client, usize::MAX);
    assert_eq!(datagrams.len(), 1, "the ACK goes under a full window");
    assert_eq!(datagrams[0].len(), MTU, "padded");
    assert_eq!(sent(&mut p.client, PADDING), padding + 1);
    assert_eq!(sent(&mut p.client, BDP), bdp, "no in-flight frame");
    assert_eq!(
        calls(&mut p.client, "bdp"),
        bdp_calls,
        "an in-flight registration offered a packet let out because it is not in flight"
    );
    assert_eq!(bytes_in_flight(&mut p.client), in_flight);

    // Control: once the window opens, BDP's frame goes (turning padding off
    // ends the halt that followed the padded packet).
    set_padding(&mut p.client, false);
    set_cwnd(&mut p.client, 1 << 20);
    assert!(!transmit(&mut p.client, 1).is_empty());
    assert_eq!(sent(&mut p.client, BDP), bdp + 1);
    assert!(calls(&mut p.client, "bdp") > bdp_calls);
}
