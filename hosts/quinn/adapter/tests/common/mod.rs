//! A quinn-proto client and server wired together in memory, shared by this
//! crate's integration tests (`mod common;`) and, for the endpoint setup
//! alone, by the scale bench (`#[path = "../tests/common/mod.rs"]`).
//!
//! Nothing here sleeps or reads the clock after setup: the [`Pair`] runs on
//! one virtual instant, and every step (transmit, deliver) is a call the
//! test makes. What the tests vary is a parameter: each side's
//! [`TransportConfig`] (extension factory, congestion controller, idle
//! timeout), the ECN codepoint delivered datagrams carry, and how many
//! datagrams a transmit polls.

use bytes::BytesMut;
use quinn_proto::{
    ClientConfig, Connection, ConnectionHandle, DatagramEvent, EcnCodepoint, Endpoint,
    EndpointConfig, ServerConfig, TransportConfig,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

/// quinn's default transport without MTU discovery, so that every datagram
/// is at most quinn's initial 1200 bytes; the callers add what they test.
pub fn transport() -> TransportConfig {
    let mut t = TransportConfig::default();
    t.mtu_discovery_config(None);
    t
}

/// A client and a server endpoint that trust one fresh self-signed
/// certificate for `localhost`, with fixed RNG seeds, and the config the
/// client connects with.
pub struct Endpoints {
    pub client: Endpoint,
    pub server: Endpoint,
    /// Trusts the server's certificate and carries the client's transport.
    pub client_config: ClientConfig,
}

impl Endpoints {
    /// Endpoints whose connections use `client_transport` and
    /// `server_transport` respectively.
    pub fn new(client_transport: TransportConfig, server_transport: TransportConfig) -> Endpoints {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("cert");
        let cert_der = CertificateDer::from(cert.cert.der().to_vec());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der()));
        let mut server_config =
            ServerConfig::with_single_cert(vec![cert_der.clone()], key).expect("server config");
        server_config.transport_config(Arc::new(server_transport));
        let server = Endpoint::new(
            Arc::new(EndpointConfig::default()),
            Some(Arc::new(server_config)),
            false,
            Some([1; 32]),
        );
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert_der).expect("root");
        let mut client_config =
            ClientConfig::with_root_certificates(Arc::new(roots)).expect("client config");
        client_config.transport_config(Arc::new(client_transport));
        let client = Endpoint::new(
            Arc::new(EndpointConfig::default()),
            None,
            false,
            Some([2; 32]),
        );
        Endpoints {
            client,
            server,
            client_config,
        }
    }
}

/// One client connection and the server connection it opens, on a virtual
/// clock that never advances.
pub struct Pair {
    /// The instant every call is made at.
    pub now: Instant,
    client_ep: Endpoint,
    server_ep: Endpoint,
    client: (ConnectionHandle, Connection),
    /// `None` until the server accepts the client's first Initial.
    server: Option<(ConnectionHandle, Connection)>,
    client_addr: SocketAddr,
    server_addr: SocketAddr,
}

impl Pair {
    /// A client connecting (nothing sent yet) to a server, each side with
    /// its transport.
    pub fn new(client_transport: TransportConfig, server_transport: TransportConfig) -> Pair {
        let now = Instant::now();
        let Endpoints {
            client: mut client_ep,
            server: server_ep,
            client_config,
        } = Endpoints::new(client_transport, server_transport);
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

    pub fn client(&mut self) -> &mut Connection {
        &mut self.client.1
    }

    /// Panics before the server has accepted the connection.
    pub fn server(&mut self) -> &mut Connection {
        &mut self.server.as_mut().expect("server connection").1
    }

    /// Up to `max` datagrams the client sends now (`usize::MAX`: all).
    pub fn client_transmit(&mut self, max: usize) -> Vec<Vec<u8>> {
        let (ch, conn) = &mut self.client;
        let out = transmit(conn, self.now, max);
        while let Some(ev) = conn.poll_endpoint_events() {
            if let Some(ev) = self.client_ep.handle_event(*ch, ev) {
                conn.handle_event(ev);
            }
        }
        out
    }

    /// Up to `max` datagrams the server sends now (`usize::MAX`: all); none
    /// before it has accepted the connection.
    pub fn server_transmit(&mut self, max: usize) -> Vec<Vec<u8>> {
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

    /// Hand the client's `datagrams` to the server, each marked `ecn`; the
    /// first Initial makes the server accept the connection.
    pub fn deliver_to_server(&mut self, datagrams: Vec<Vec<u8>>, ecn: Option<EcnCodepoint>) {
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

    /// Hand the server's `datagrams` to the client, each marked `ecn`.
    pub fn deliver_to_client(&mut self, datagrams: Vec<Vec<u8>>, ecn: Option<EcnCodepoint>) {
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
