//! What the neqo patch `0010-packet-numbers-decoded-across-a-key-update`
//! fixes: a neqo receiver decodes every packet of its peer's new key phase,
//! however many arrive before it rotates its read keys.
//!
//! Chaos seeds 9016 and 10232 found it: a quinn server updates its keys after
//! 10 to 1,000 packets, and a neqo client that received more than 128 packets
//! of the new phase before its read keys rotated (one PTO later) decoded
//! their one-byte packet numbers 256 too low and failed to decrypt them. The
//! server's CONNECTION_CLOSE was among them, and the client waited out its
//! idle timeout. Here a neqo server initiates the update, which the client
//! receives through the same path; the client's replies reach the server
//! before its next datagram is sent, so that its packet numbers stay one
//! byte long. The server's close comes last, and the client must read it.
//!
//! Two neqo connections are wired together in memory. The virtual clock
//! advances only by the pacing delays the server asks for, far less than a
//! PTO, so the client's read keys are not rotated while most of the
//! datagrams arrive. Without the patch the client drops 18 of the 300
//! (the 255th to the 272nd) and the first assertion fails. The close
//! check passes either way here, since the drops have stopped by the time
//! it is sent; in the chaos runs the close was among the dropped packets.

use neqo_common::event::Provider as _;
use neqo_crypto::AuthenticationStatus;
use neqo_transport::{
    CloseReason, Connection, ConnectionEvent, ConnectionParameters, Error, Output,
    RandomConnectionIdGenerator, State, StreamType,
};
use std::cell::RefCell;
use std::net::{Ipv4Addr, SocketAddr};
use std::rc::Rc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The server's certificate in the database `make neqo-source` makes.
const CERT_NICKNAME: &str = "key";
const ALPN: &str = "hq-interop";
/// Stream data the server has ready: more than the test sends.
const STREAM_BYTES: usize = 1 << 20;
/// Datagrams of the new key phase delivered before the close: more than the
/// 128 that a one-byte packet number can be ahead of the current read keys.
const NEW_PHASE_DATAGRAMS: usize = 300;
/// The application error the server closes with.
const CLOSE_CODE: u64 = 7;
/// Steps any exchange may take before the test fails.
const MAX_STEPS: usize = 10_000;

/// NSS with the endpoint's certificate database, once per process (NSS
/// opens it by path).
fn init_nss() {
    static DB: OnceLock<()> = OnceLock::new();
    DB.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("corequic-neqo-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("database folder");
        let db = env!("COREQUIC_NEQO_DB");
        for name in ["cert9.db", "key4.db", "pkcs11.txt"] {
            std::fs::copy(format!("{db}/{name}"), dir.join(name)).expect("database file");
        }
        neqo_crypto::init_db(dir.clone()).expect("NSS");
        // NSS has the files open; on Linux they can go now.
        let _ = std::fs::remove_dir_all(dir);
    });
}

fn address(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// Windows large enough that flow control never holds the server back.
fn parameters() -> ConnectionParameters {
    ConnectionParameters::default()
        .max_data(4 * STREAM_BYTES as u64)
        .max_stream_data(StreamType::UniDi, true, 4 * STREAM_BYTES as u64)
}

/// A neqo client and server connected in memory.
struct Pair {
    client: Connection,
    server: Connection,
    now: Instant,
}

impl Pair {
    /// Both sides with their handshake confirmed.
    fn confirmed() -> Pair {
        init_nss();
        let now = Instant::now();
        let cid = || Rc::new(RefCell::new(RandomConnectionIdGenerator::new(8)));
        let client = Connection::new_client(
            "localhost",
            &[ALPN],
            cid(),
            address(1),
            address(2),
            parameters(),
            now,
        )
        .expect("client");
        let server =
            Connection::new_server(&[CERT_NICKNAME], &[ALPN], cid(), parameters()).expect("server");
        let mut pair = Pair {
            client,
            server,
            now,
        };
        for _ in 0..MAX_STEPS {
            if *pair.client.state() == State::Confirmed && *pair.server.state() == State::Confirmed
            {
                return pair;
            }
            pair.client_to_server();
            pair.server_to_client();
            while let Some(event) = pair.client.next_event() {
                if event == ConnectionEvent::AuthenticationNeeded {
                    pair.client
                        .authenticated(AuthenticationStatus::Ok, pair.now);
                }
            }
        }
        panic!(
            "no handshake: client {:?}, server {:?}",
            pair.client.state(),
            pair.server.state()
        );
    }

    /// Deliver everything the client has to send.
    fn client_to_server(&mut self) {
        while let Output::Datagram(d) = self.client.process_output(self.now) {
            self.server.process_input(d, self.now);
        }
    }

    /// Deliver everything the server has to send.
    fn server_to_client(&mut self) {
        while let Output::Datagram(d) = self.server.process_output(self.now) {
            self.client.process_input(d, self.now);
        }
    }

    /// Deliver the server's next datagram and the client's reply to it,
    /// advancing the clock by the pacing delay the server asks for, if any.
    fn server_datagram_and_reply(&mut self) {
        for _ in 0..MAX_STEPS {
            match self.server.process_output(self.now) {
                Output::Datagram(d) => {
                    self.client.process_input(d, self.now);
                    self.client_to_server();
                    return;
                }
                Output::Callback(delay) => self.now += delay.max(Duration::from_micros(1)),
                Output::None => panic!("the server has nothing to send"),
            }
        }
        panic!("the server sent nothing in {MAX_STEPS} steps");
    }
}

#[test]
fn every_packet_of_a_new_key_phase_is_read_and_so_is_the_close() {
    let mut pair = Pair::confirmed();
    // neqo updates its keys only once a packet of the current phase is
    // acknowledged: let the client acknowledge the server's last packets.
    let stream = pair
        .server
        .stream_create(StreamType::UniDi)
        .expect("stream");
    let data = vec![0x5a; STREAM_BYTES];
    let mut queued = pair.server.stream_send(stream, &data).expect("send");
    let updated = (0..MAX_STEPS).any(|_| {
        pair.server_datagram_and_reply();
        pair.server.initiate_key_update().is_ok()
    });
    assert!(updated, "the server could not initiate a key update");

    let dropped_before = pair.client.stats().dropped_rx;
    let received_before = pair.client.stats().packets_rx;
    for _ in 0..NEW_PHASE_DATAGRAMS {
        if queued < data.len() {
            queued += pair
                .server
                .stream_send(stream, &data[queued..])
                .expect("send");
        }
        pair.server_datagram_and_reply();
    }
    let stats = pair.client.stats();
    assert_eq!(
        stats.dropped_rx - dropped_before,
        0,
        "the client dropped packets of the new key phase ({} received)",
        stats.packets_rx - received_before
    );

    pair.server
        .close(pair.now, CLOSE_CODE, "closed during a key update");
    pair.server_to_client();
    match pair.client.state() {
        State::Draining {
            error: CloseReason::Transport(Error::PeerApplicationError(code)),
            ..
        } => assert_eq!(*code, CLOSE_CODE),
        other => panic!("the client did not read the server's close: {other:?}"),
    }
}
