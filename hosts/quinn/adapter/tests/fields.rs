//! The context getters behind the fields of ABI 0.2.1 (patch
//! `0009-fields-of-abi-0-2-1`), read from a quinn-proto client and server
//! wired together in memory: the connection IDs each side chose and sends
//! to, the server's anti-amplification budget before and after the client's
//! address is validated, the ECN counts of each packet-number space for
//! datagrams the test marks, and the transport parameters as negotiated.
//!
//! The extension here is an empty one: the test reads quinn's state through
//! `ExtensionContext`, the same getters the adapter's `get_field` maps
//! (the conformance kit's `fields.*` cases check that mapping end to end).

use bytes::BytesMut;
use quinn_proto::{
    ClientConfig, Connection, ConnectionHandle, DatagramEvent, EcnCodepoint, Endpoint,
    EndpointConfig, Extension, ExtensionContext, ExtensionFactory, ServerConfig, Side, SpaceId,
    TransportConfig,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::any::Any;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An extension that does nothing: it only makes `with_extension` reach
/// the connection's context.
struct Empty;

impl Extension for Empty {
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl ExtensionFactory for Empty {
    fn new_extension(&self, _: Side, _: SocketAddr, _: Instant) -> Option<Box<dyn Extension>> {
        Some(Box::new(Empty))
    }
}

fn transport(idle: Duration) -> TransportConfig {
    let mut t = TransportConfig::default();
    t.mtu_discovery_config(None);
    t.max_idle_timeout(Some(idle.try_into().expect("idle timeout")));
    t.extension_factory(Some(Arc::new(Empty)));
    t
}

fn read<R>(conn: &mut Connection, now: Instant, f: impl FnOnce(&ExtensionContext<'_>) -> R) -> R {
    conn.with_extension(now, |_, cx| f(cx))
        .expect("an extension")
}

const CLIENT_IDLE: Duration = Duration::from_secs(7);
const SERVER_IDLE: Duration = Duration::from_secs(11);

struct Pair {
    now: Instant,
    client_ep: Endpoint,
    server_ep: Endpoint,
    client: (ConnectionHandle, Connection),
    server: Option<(ConnectionHandle, Connection)>,
    client_addr: SocketAddr,
    server_addr: SocketAddr,
}

impl Pair {
    fn new() -> Pair {
        let now = Instant::now();
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("cert");
        let cert_der = CertificateDer::from(cert.cert.der().to_vec());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der()));
        let mut server_config =
            ServerConfig::with_single_cert(vec![cert_der.clone()], key).expect("server config");
        server_config.transport_config(Arc::new(transport(SERVER_IDLE)));
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
        client_config.transport_config(Arc::new(transport(CLIENT_IDLE)));
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
        }
    }

    fn client(&mut self) -> &mut Connection {
        &mut self.client.1
    }

    fn server(&mut self) -> &mut Connection {
        &mut self.server.as_mut().expect("server connection").1
    }

    fn client_transmit(&mut self) -> Vec<Vec<u8>> {
        let (ch, conn) = &mut self.client;
        let out = transmit(conn, self.now);
        while let Some(ev) = conn.poll_endpoint_events() {
            if let Some(ev) = self.client_ep.handle_event(*ch, ev) {
                conn.handle_event(ev);
            }
        }
        out
    }

    fn server_transmit(&mut self) -> Vec<Vec<u8>> {
        let Some((ch, conn)) = &mut self.server else {
            return Vec::new();
        };
        let out = transmit(conn, self.now);
        while let Some(ev) = conn.poll_endpoint_events() {
            if let Some(ev) = self.server_ep.handle_event(*ch, ev) {
                conn.handle_event(ev);
            }
        }
        out
    }

    fn deliver_to_server(&mut self, datagrams: Vec<Vec<u8>>, ecn: Option<EcnCodepoint>) {
        for d in datagrams {
            let mut buf = Vec::new();
            let event = self.server_ep.handle(
                self.now,
                self.client_addr,
                None,
                ecn,
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

    fn deliver_to_client(&mut self, datagrams: Vec<Vec<u8>>, ecn: Option<EcnCodepoint>) {
        for d in datagrams {
            let mut buf = Vec::new();
            let event = self.client_ep.handle(
                self.now,
                self.server_addr,
                None,
                ecn,
                BytesMut::from(&d[..]),
                &mut buf,
            );
            if let Some(DatagramEvent::ConnectionEvent(_, ev)) = event {
                self.client().handle_event(ev);
            }
        }
    }
}

fn transmit(conn: &mut Connection, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let Some(t) = conn.poll_transmit(now, 1, &mut buf) else {
            break;
        };
        out.push(buf[..t.size].to_vec());
    }
    out
}

fn total(datagrams: &[Vec<u8>]) -> u64 {
    datagrams.iter().map(|d| d.len() as u64).sum()
}

fn ecn(conn: &mut Connection, now: Instant) -> [(u64, u64, u64); 3] {
    read(conn, now, |cx| {
        [SpaceId::Initial, SpaceId::Handshake, SpaceId::Data].map(|s| cx.ecn_counts(s))
    })
}

#[test]
fn the_fields_of_abi_0_2_1_read_quinns_state() {
    let mut p = Pair::new();
    let now = p.now;

    // Before anything is received: the peer's parameters are their defaults,
    // the client has no budget, and sends to the random Initial DCID.
    let (client_scid, first_dcid) = read(p.client(), now, |cx| cx.connection_ids());
    assert_eq!(
        read(p.client(), now, |cx| cx.peer_transport_parameters()),
        (Duration::ZERO, 65527, 3, 2)
    );
    assert_eq!(
        read(p.client(), now, |cx| cx.local_max_ack_delay()),
        Duration::from_millis(25)
    );
    assert_eq!(read(p.client(), now, |cx| cx.amplification_budget()), None);
    assert_eq!(ecn(p.client(), now), [(0, 0, 0); 3]);

    // The client's Initial, marked ECT(0).
    let initial = p.client_transmit();
    let received = total(&initial);
    p.deliver_to_server(initial, Some(EcnCodepoint::Ect0));
    let (server_scid, server_dcid) = read(p.server(), now, |cx| cx.connection_ids());
    assert_eq!(
        server_dcid, client_scid,
        "the server sends to the client's SCID"
    );
    assert_ne!(server_scid, first_dcid, "the server chose its own SCID");
    // quinn counts the first packet without its AEAD tag (the rest of the
    // datagram in full): a limit a little stricter than 3 × the datagram.
    let budget = read(p.server(), now, |cx| cx.amplification_budget()).expect("a budget");
    assert!(
        budget <= 3 * received && budget >= 3 * (received - 16),
        "{budget}"
    );
    // The server read the client's parameters from its Initial.
    let client_params = read(p.server(), now, |cx| cx.peer_transport_parameters());
    assert_eq!(client_params.0, CLIENT_IDLE);
    assert_eq!(ecn(p.server(), now)[0], (1, 0, 0));

    // The server's flight, marked CE, uses up part of the budget.
    let flight = p.server_transmit();
    let sent = total(&flight);
    assert_eq!(
        read(p.server(), now, |cx| cx.amplification_budget()),
        Some(budget.saturating_sub(sent)),
        "the flight ({sent} bytes) used up part of it"
    );
    println!(
        "server budget: {budget} after the client's {received}-byte Initial, then {}",
        budget.saturating_sub(sent)
    );
    p.deliver_to_client(flight, Some(EcnCodepoint::Ce));
    let (scid, dcid) = read(p.client(), now, |cx| cx.connection_ids());
    assert_eq!(scid, client_scid, "the SCID never changes");
    assert_eq!(
        dcid, server_scid,
        "the client switched to the server's SCID"
    );
    let client_ecn = ecn(p.client(), now);
    assert!(
        client_ecn[0].2 >= 1 && client_ecn[1].2 >= 1,
        "{client_ecn:?}"
    );
    assert_eq!((client_ecn[0].0, client_ecn[0].1), (0, 0));
    let server_params = read(p.client(), now, |cx| cx.peer_transport_parameters());
    assert_eq!(server_params.0, SERVER_IDLE);
    assert_eq!(server_params.2, 3);
    assert!(server_params.3 >= 2);
    assert!((1200..=65527).contains(&server_params.1));

    // The client's Handshake validates its address: no budget any more.
    let finished = p.client_transmit();
    p.deliver_to_server(finished, Some(EcnCodepoint::Ect1));
    assert_eq!(read(p.server(), now, |cx| cx.amplification_budget()), None);
    let server_ecn = ecn(p.server(), now);
    assert!(server_ecn[1].1 >= 1, "{server_ecn:?}");

    // Settle the handshake without marks, then count 1-RTT PINGs exactly.
    for _ in 0..10 {
        let s = p.server_transmit();
        p.deliver_to_client(s, None);
        let c = p.client_transmit();
        if c.is_empty() {
            break;
        }
        p.deliver_to_server(c, None);
    }
    assert!(!p.client().is_handshaking() && !p.server().is_handshaking());
    let before = ecn(p.server(), now);
    for _ in 0..3 {
        p.client().ping();
        let c = p.client_transmit();
        assert_eq!(c.len(), 1);
        p.deliver_to_server(c, Some(EcnCodepoint::Ect0));
    }
    let after = ecn(p.server(), now);
    assert_eq!(after[2].0, before[2].0 + 3, "one per 1-RTT packet");
    assert_eq!(
        &after[..2],
        &before[..2],
        "the discarded spaces keep their counts"
    );

    // Both sides agree on the connection IDs, and each reads the other's
    // parameters as the other advertised them.
    let (c_scid, c_dcid) = read(p.client(), now, |cx| cx.connection_ids());
    let (s_scid, s_dcid) = read(p.server(), now, |cx| cx.connection_ids());
    println!(
        "client scid {c_scid} dcid {c_dcid}, server scid {s_scid} dcid {s_dcid}; \
         server budget None; client ECN {:?}; server ECN {after:?}; \
         client reads server params {:?}; server reads client params {:?}",
        ecn(p.client(), now),
        read(p.client(), now, |cx| cx.peer_transport_parameters()),
        read(p.server(), now, |cx| cx.peer_transport_parameters()),
    );
    assert_eq!(c_scid, client_scid);
    assert_eq!(s_scid, server_scid);
    assert_eq!(
        c_dcid, s_scid,
        "the client still sends to the server's SCID"
    );
    // quinn's server moves to the first connection ID the client issues in
    // NEW_CONNECTION_ID ("switch immediately to enable clientside stateless
    // resets", connection/mod.rs), so it no longer sends to the client's
    // handshake SCID.
    assert_ne!(s_dcid, c_scid, "the server switched to a NEW_CONNECTION_ID");
    assert!((0..=20).contains(&c_scid.len()) && (0..=20).contains(&s_scid.len()));
    assert_eq!(
        read(p.server(), now, |cx| cx.local_max_ack_delay()),
        read(p.client(), now, |cx| cx.peer_max_ack_delay()),
        "the client reads the server's max_ack_delay as the server advertised it"
    );
}
