//! CQ-SEND-10 on quinn: an ACK-only packet that congestion control lets out
//! only because it is not in flight is offered the registrations that are not
//! in flight (padding), and no others (the BDP plugin's in-flight frame).
//!
//! Two quinn-proto connections are wired together in memory on a virtual
//! clock, with a congestion controller whose window the test sets, so that
//! "the window is full" is a fact the test controls rather than a race with a
//! real link. Time never advances and nothing sleeps: every step is a
//! function call, and the outcome is read from the adapter's per-type frame
//! counters, the datagram's size and quinn's bytes in flight.
//!
//! The in-flight frame is BDP's (after-ack, ack-eliciting, in flight, sent
//! by a client once plugin-control gives it a window), because the test
//! decides when it is due. test-bench's frame would do too, but test-bench
//! also writes `max-tx-data`, which would move the flow limits the test
//! leaves alone; DUMMY's is sent whenever none is in flight and toggles padding on
//! its own.

use bytes::BytesMut;
use corequic_endpoint::testing::load_plugins;
use corequic_quinn::{AdapterExtension, Attachment, PluginFactory, QuinnPlugins};
use corequic_runtime::abi::PluginVal;
use quinn_proto::congestion::{Controller, ControllerFactory};
use quinn_proto::{
    ClientConfig, Connection, ConnectionHandle, DatagramEvent, Endpoint, EndpointConfig,
    ExtensionContext, ServerConfig, TransportConfig,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::any::Any;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// quinn's datagram size (no MTU discovery).
const MTU: usize = 1200;
/// The BDP plugin's frame: at after-ack, ack-eliciting, in flight.
const BDP: u64 = 0xBD;
/// The BDP plugin's plugin-control: the window a client sends.
const BDP_SET_WINDOW: u64 = 0x80000;
/// The padding plugin's frame: at end, not ack-eliciting, not in flight.
const PADDING: u64 = 0x00;
/// The padding plugin's on/off plugin-control.
const PADDING_TOGGLE: u64 = 0x80001;
/// An open congestion window.
const OPEN: u64 = 1 << 20;
/// A window that every packet overflows (non-zero: quinn's pacer rejects 0).
const FULL: u64 = 1;

/// A congestion controller whose window is whatever the test stores.
#[derive(Clone)]
struct Knob(Arc<AtomicU64>);

impl Knob {
    fn set(&self, window: u64) {
        self.0.store(window, Ordering::SeqCst);
    }
}

impl Controller for Knob {
    fn on_congestion_event(&mut self, _: Instant, _: Instant, _: bool, _: u64) {}
    fn on_mtu_update(&mut self, _: u16) {}
    fn window(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }
    fn initial_window(&self) -> u64 {
        OPEN
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

impl ControllerFactory for Knob {
    fn build(self: Arc<Self>, _: Instant, _: u16) -> Box<dyn Controller> {
        Box::new((*self).clone())
    }
}

fn transport(plugins: &[&str], knob: &Knob) -> TransportConfig {
    let paths: Vec<_> = plugins
        .iter()
        .map(|p| corequic_endpoint::testing::plugin_path(p))
        .collect();
    let (runtime, plugins) = load_plugins(corequic_quinn::capabilities(), &paths);
    let mut t = TransportConfig::default();
    t.mtu_discovery_config(None);
    t.congestion_controller_factory(Arc::new(knob.clone()));
    t.extension_factory(Some(Arc::new(PluginFactory(Attachment::new(
        runtime, plugins,
    )))));
    t
}

/// Run `f` with a connection's plugins.
fn plugins<R>(
    conn: &mut Connection,
    now: Instant,
    f: impl FnOnce(&mut QuinnPlugins, &mut ExtensionContext<'_>) -> R,
) -> R {
    conn.with_extension(now, |ext, cx| {
        f(
            QuinnPlugins::from_any(ext.as_any_mut()).expect("corequic plugins"),
            cx,
        )
    })
    .expect("an extension")
}

/// Frames of `frame_type` the adapter has written so far.
fn sent(conn: &mut Connection, now: Instant, frame_type: u64) -> u64 {
    plugins(conn, now, |p, _| p.frame_counts(frame_type).sent)
}

fn bytes_in_flight(conn: &mut Connection, now: Instant) -> u64 {
    plugins(conn, now, |_, cx| cx.bytes_in_flight())
}

/// A quinn client and server wired together in memory.
struct Pair {
    now: Instant,
    client_ep: Endpoint,
    server_ep: Endpoint,
    client: (ConnectionHandle, Connection),
    server: Option<(ConnectionHandle, Connection)>,
    client_addr: SocketAddr,
    server_addr: SocketAddr,
    client_window: Knob,
}

impl Pair {
    fn new(client_plugins: &[&str], server_plugins: &[&str]) -> Pair {
        let now = Instant::now();
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("cert");
        let cert_der = CertificateDer::from(cert.cert.der().to_vec());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der()));
        let client_window = Knob(Arc::new(AtomicU64::new(OPEN)));
        let server_window = Knob(Arc::new(AtomicU64::new(OPEN)));

        let mut server_config =
            ServerConfig::with_single_cert(vec![cert_der.clone()], key).expect("server config");
        server_config.transport_config(Arc::new(transport(server_plugins, &server_window)));
        let server_ep = Endpoint::new(
            Arc::new(EndpointConfig::default()),
            Some(Arc::new(server_config)),
            false,
            Some([1; 32]),
        );

        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert_der).expect("root");
        let mut client_config =
            ClientConfig::with_root_certificates(Arc::new(roots)).expect("client config");
        client_config.transport_config(Arc::new(transport(client_plugins, &client_window)));
        let mut client_ep = Endpoint::new(
            Arc::new(EndpointConfig::default()),
            None,
            false,
            Some([2; 32]),
        );
        let server_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 4433));
        let client = client_ep
            .connect(now, client_config, server_addr, "localhost")
            .expect("connect");
        Pair {
            now,
            client_ep,
            server_ep,
            client,
            server: None,
            client_addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 4434)),
            server_addr,
            client_window,
        }
    }

    fn server(&mut self) -> &mut Connection {
        &mut self.server.as_mut().expect("server connection").1
    }

    /// Up to `max` datagrams the client sends now.
    fn client_transmit(&mut self, max: usize) -> Vec<Vec<u8>> {
        let (ch, conn) = &mut self.client;
        let out = transmit(conn, self.now, max);
        while let Some(ev) = conn.poll_endpoint_events() {
            if let Some(ev) = self.client_ep.handle_event(*ch, ev) {
                conn.handle_event(ev);
            }
        }
        out
    }

    /// Up to `max` datagrams the server sends now.
    fn server_transmit(&mut self, max: usize) -> Vec<Vec<u8>> {
        let Some((ch, conn)) = &mut self.server else {
            return Vec::new();
        };
        let out = transmit(conn, self.now, max);
        while let Some(ev) = conn.poll_endpoint_events() {
            if let Some(ev) = self.server_ep.handle_event(*ch, ev) {
                conn.handle_event(ev);
            }
        }
        out
    }

    fn deliver_to_server(&mut self, datagrams: Vec<Vec<u8>>) {
        for d in datagrams {
            let mut buf = Vec::new();
            let event = self.server_ep.handle(
                self.now,
                self.client_addr,
                None,
                None,
                BytesMut::from(&d[..]),
                &mut buf,
            );
            match event {
                Some(DatagramEvent::NewConnection(incoming)) => {
                    let accepted = self
                        .server_ep
                        .accept(incoming, self.now, &mut buf, None)
                        .expect("accept");
                    self.server = Some(accepted);
                }
                Some(DatagramEvent::ConnectionEvent(_, ev)) => self.server().handle_event(ev),
                Some(DatagramEvent::Response(_)) | None => {}
            }
        }
    }

    fn deliver_to_client(&mut self, datagrams: Vec<Vec<u8>>) {
        for d in datagrams {
            let mut buf = Vec::new();
            let event = self.client_ep.handle(
                self.now,
                self.server_addr,
                None,
                None,
                BytesMut::from(&d[..]),
                &mut buf,
            );
            if let Some(DatagramEvent::ConnectionEvent(_, ev)) = event {
                self.client.1.handle_event(ev);
            }
        }
    }

    /// Exchange datagrams until neither side sends any more, at most
    /// `rounds` times; returns whether they went quiet.
    fn settle(&mut self, rounds: usize) -> bool {
        for _ in 0..rounds {
            let c = self.client_transmit(usize::MAX);
            let quiet_client = c.is_empty();
            self.deliver_to_server(c);
            let s = self.server_transmit(usize::MAX);
            if quiet_client && s.is_empty() {
                return true;
            }
            self.deliver_to_client(s);
        }
        false
    }
}

/// Poll up to `max` datagrams, one per transmit.
fn transmit(conn: &mut Connection, now: Instant, max: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while out.len() < max {
        buf.clear();
        let Some(t) = conn.poll_transmit(now, 1, &mut buf) else {
            break;
        };
        out.push(buf[..t.size].to_vec());
    }
    out
}

fn control(conn: &mut Connection, now: Instant, id: u64, arg: PluginVal) -> Vec<PluginVal> {
    plugins(conn, now, |p, cx| p.plugin_control(cx, id, &[arg])).expect("plugin-control")
}

fn set_padding(conn: &mut Connection, now: Instant, on: bool) {
    let r = control(conn, now, PADDING_TOGGLE, PluginVal::Bool(on));
    assert_eq!(r, vec![PluginVal::Bool(on)]);
}

#[test]
fn an_ack_only_packet_under_a_full_window_is_padded_without_in_flight_frames() {
    let mut p = Pair::new(&["bdp", "padding"], &["bdp"]);
    let now = p.now;
    // Handshake with padding off, so that the client never halts (a halt
    // ends on a plugin timer, and time does not advance here).
    set_padding(&mut p.client.1, now, false);
    assert!(p.settle(100), "the handshake went quiet");
    assert!(!p.client.1.is_handshaking() && !p.server().is_handshaking());

    // Two server PINGs make an ACK due at the client: once with the window
    // open, so that the client's replies settle what the handshake left
    // (connection IDs), then with the window full.
    for window in [OPEN, FULL] {
        p.client_window.set(window);
        for _ in 0..2 {
            p.server().ping();
            let s = p.server_transmit(usize::MAX);
            assert!(!s.is_empty());
            p.deliver_to_client(s);
        }
        if window == OPEN {
            assert!(p.settle(100), "quiet again");
        }
    }
    // BDP now has an in-flight frame to send, and padding is on.
    let client = &mut p.client.1;
    control(client, now, BDP_SET_WINDOW, PluginVal::U64(100_000));
    set_padding(client, now, true);
    let (bdp, padding) = (sent(client, now, BDP), sent(client, now, PADDING));
    let in_flight = bytes_in_flight(client, now);

    // The ACK goes, padded to the MTU, without BDP's frame, out of flight.
    let datagrams = p.client_transmit(usize::MAX);
    let client = &mut p.client.1;
    assert_eq!(datagrams.len(), 1, "the ACK goes under a full window");
    assert_eq!(datagrams[0].len(), MTU, "padded");
    assert_eq!(sent(client, now, PADDING), padding + 1);
    assert_eq!(
        sent(client, now, BDP),
        bdp,
        "no in-flight frame in a packet let out because it is not in flight"
    );
    assert_eq!(bytes_in_flight(client, now), in_flight);

    // Control: once the window opens, BDP's frame goes (turning padding off
    // ends the halt that followed the padded packet).
    set_padding(client, now, false);
    p.client_window.set(OPEN);
    assert_eq!(p.client_transmit(1).len(), 1);
    let client = &mut p.client.1;
    assert_eq!(sent(client, now, BDP), bdp + 1);
    assert!(bytes_in_flight(client, now) > in_flight);
}
