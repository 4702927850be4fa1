//! The state behind the fields of ABI 0.2.1 that the hook patch exposes
//! (`0008-fields-of-abi-0-2-1.patch`): connection IDs (CQ-FIELD-14), the
//! peer's transport parameters and the local max_ack_delay (CQ-FIELD-15) and
//! the anti-amplification budget (CQ-FIELD-16), read through the extension's
//! context of a quiche client and server wired together in memory, as in
//! `congestion.rs`. The extension here is a bare one (no plugins): the test
//! is about quiche's state, not about a plugin's view of it, which the
//! conformance kit's field cases certify.

use corequic_quiche_endpoint::driver;
use quiche::{ConnectionInfo, Extension, ExtensionContext, ExtensionFactory};
use std::any::Any;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Bare;

impl Extension for Bare {
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

struct BareFactory;

impl ExtensionFactory for BareFactory {
    fn new_extension(
        &self,
        _is_server: bool,
        _local: SocketAddr,
        _peer: SocketAddr,
        _now: Instant,
    ) -> Option<Box<dyn Extension>> {
        Some(Box::new(Bare))
    }
}

fn with_cx<R>(conn: &mut quiche::Connection, f: impl FnOnce(&mut ExtensionContext<'_>) -> R) -> R {
    conn.with_extension(|_, cx| f(cx))
        .expect("the connection has its extension")
}

fn info(conn: &mut quiche::Connection) -> ConnectionInfo {
    with_cx(conn, |cx| cx.info())
}

/// (initial source connection ID, destination connection ID).
fn ids(conn: &mut quiche::Connection) -> (Vec<u8>, Vec<u8>) {
    with_cx(conn, |cx| {
        let (scid, dcid) = cx.connection_ids();
        (scid.expect("the initial SCID").to_vec(), dcid.to_vec())
    })
}

fn transmit(conn: &mut quiche::Connection) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = [0u8; 65_536];
    loop {
        match conn.send(&mut buf) {
            Ok((n, _)) => out.push(buf[..n].to_vec()),
            Err(quiche::Error::Done) => return out,
            Err(e) => panic!("send: {e}"),
        }
    }
}

fn deliver(
    conn: &mut quiche::Connection,
    datagrams: Vec<Vec<u8>>,
    from: SocketAddr,
    to: SocketAddr,
) {
    for mut d in datagrams {
        conn.recv(&mut d, quiche::RecvInfo { from, to })
            .expect("recv");
    }
}

#[test]
fn connection_ids_parameters_and_amplification_budget_come_from_the_connection() {
    let client_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 4434));
    let server_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 4433));
    let mut client_config = driver::client_config().expect("client config");
    client_config.set_extension_factory(Some(Arc::new(BareFactory)));
    client_config.set_max_ack_delay(40);
    let mut server_config = driver::server_config().expect("server config");
    server_config.set_extension_factory(Some(Arc::new(BareFactory)));
    // Not the defaults, so that the client cannot read them by chance.
    server_config.set_max_idle_timeout(7_000);
    server_config.set_max_recv_udp_payload_size(1_452);
    server_config.set_ack_delay_exponent(5);
    server_config.set_active_connection_id_limit(4);

    let client_scid = driver::new_cid();
    let server_scid = driver::new_cid();
    let mut client = quiche::connect(
        Some("localhost"),
        &client_scid,
        client_addr,
        server_addr,
        &mut client_config,
    )
    .expect("connect");

    // Before the server's parameters: their defaults; the local max_ack_delay
    // is what the client advertises.
    let c = info(&mut client);
    assert_eq!(c.peer_idle_timeout, Duration::ZERO);
    assert_eq!(c.peer_max_udp_payload_size, 65_527);
    assert_eq!(c.peer_ack_delay_exponent, 3);
    assert_eq!(c.peer_active_conn_id_limit, 2);
    assert_eq!(c.local_max_ack_delay, Duration::from_millis(40));
    assert_eq!(c.amplification_budget, None);
    let (scid, dcid) = ids(&mut client);
    assert_eq!(scid, client_scid.to_vec());
    // The client's first Destination Connection ID is its own random one.
    assert_eq!(dcid, client.destination_id().to_vec());

    let first = transmit(&mut client);
    let received: usize = first.iter().map(Vec::len).sum();
    let mut server = quiche::accept(
        &server_scid,
        None,
        server_addr,
        client_addr,
        &mut server_config,
    )
    .expect("accept");
    deliver(&mut server, first, client_addr, server_addr);
    // The server's budget: three times what it received, less nothing sent.
    assert_eq!(info(&mut server).amplification_budget, Some(3 * received));
    let flight = transmit(&mut server);
    let sent: usize = flight.iter().map(Vec::len).sum();
    assert!(sent > 0);
    // quiche subtracts the packets it writes, but not the padding it adds
    // after them to a datagram that carries an Initial packet
    // (`send_on_path`): its budget exceeds the RFC's by that padding.
    let budget = info(&mut server)
        .amplification_budget
        .expect("a budget before validation");
    assert!(
        budget < 3 * received && budget >= (3 * received).saturating_sub(sent),
        "budget {budget} after receiving {received} and sending {sent}"
    );
    deliver(&mut client, flight, server_addr, client_addr);
    assert_eq!(info(&mut client).amplification_budget, None);

    // The handshake, to the end.
    for _ in 0..20 {
        let c = transmit(&mut client);
        let quiet = c.is_empty();
        deliver(&mut server, c, client_addr, server_addr);
        let s = transmit(&mut server);
        if quiet && s.is_empty() {
            break;
        }
        deliver(&mut client, s, server_addr, client_addr);
    }
    assert!(client.is_established() && server.is_established());

    // Validated: no budget.
    assert_eq!(info(&mut server).amplification_budget, None);

    let c = info(&mut client);
    assert_eq!(c.peer_idle_timeout, Duration::from_secs(7));
    assert_eq!(c.peer_max_udp_payload_size, 1_452);
    assert_eq!(c.peer_ack_delay_exponent, 5);
    assert_eq!(c.peer_active_conn_id_limit, 4);
    let s = info(&mut server);
    assert_eq!(s.peer_idle_timeout, Duration::from_secs(30));
    assert_eq!(s.peer_max_udp_payload_size, 65_527);
    assert_eq!(s.local_max_ack_delay, Duration::from_millis(25));

    // No new connection ID was switched to: each side's destination is the
    // other's initial source connection ID, and what quiche puts in its
    // packets.
    let (client_s, client_d) = ids(&mut client);
    let (server_s, server_d) = ids(&mut server);
    assert_eq!(client_s, client_scid.to_vec());
    assert_eq!(server_s, server_scid.to_vec());
    assert_eq!(client_d, server_s);
    assert_eq!(server_d, client_s);
    assert_eq!(client_d, client.destination_id().to_vec());
    assert_eq!(server_d, server.destination_id().to_vec());
}
