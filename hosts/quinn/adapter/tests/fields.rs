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

mod common;

use common::Pair;
use quinn_proto::{
    Connection, EcnCodepoint, Extension, ExtensionContext, ExtensionFactory, Side, SpaceId,
    TransportConfig,
};
use std::any::Any;
use std::net::SocketAddr;
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

/// A transport with the empty extension and `idle` as its idle timeout.
fn transport(idle: Duration) -> TransportConfig {
    let mut t = common::transport();
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
    let mut p = Pair::new(transport(CLIENT_IDLE), transport(SERVER_IDLE));
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
    let initial = p.client_transmit(usize::MAX);
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
    let flight = p.server_transmit(usize::MAX);
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
    let finished = p.client_transmit(usize::MAX);
    p.deliver_to_server(finished, Some(EcnCodepoint::Ect1));
    assert_eq!(read(p.server(), now, |cx| cx.amplification_budget()), None);
    let server_ecn = ecn(p.server(), now);
    assert!(server_ecn[1].1 >= 1, "{server_ecn:?}");

    // Settle the handshake without marks, then count 1-RTT PINGs exactly.
    for _ in 0..10 {
        let s = p.server_transmit(usize::MAX);
        p.deliver_to_client(s, None);
        let c = p.client_transmit(usize::MAX);
        if c.is_empty() {
            break;
        }
        p.deliver_to_server(c, None);
    }
    assert!(!p.client().is_handshaking() && !p.server().is_handshaking());
    let before = ecn(p.server(), now);
    for _ in 0..3 {
        p.client().ping();
        let c = p.client_transmit(usize::MAX);
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
