//! What the server endpoint learns from s2n-quic's event subscriber:
//!
//! - connections that s2n-quic never hands to `accept()`, and why they
//!   closed: those whose handshake failed, and those that closed in the
//!   very datagram that completed their handshake (a client's Finished
//!   coalesced with its CONNECTION_CLOSE);
//! - when each connection is freed, after its closing period: a server that
//!   exits before then would take the CONNECTION_CLOSE of a connection that
//!   just failed with it, and strand the client.

use s2n_quic::provider::event::{
    ConnectionInfo, ConnectionMeta, Subscriber,
    events::{ConnectionClosed, HandshakeStatus, HandshakeStatusUpdated},
};
use tokio::sync::mpsc;

/// Sends the rendered close of every connection that closed before its
/// handshake completed, and a [`Freed`] message when any connection is freed.
pub struct Recorder {
    failed_handshakes: mpsc::UnboundedSender<String>,
    freed: mpsc::UnboundedSender<Freed>,
}

/// A connection s2n-quic has freed.
pub struct Freed {
    /// Its id, as `s2n_quic::Connection::id` gives it.
    pub id: u64,
    /// How it closed, if it closed after completing its handshake (whether
    /// the application accepted it is for the receiver to know).
    pub closed_after_handshake: Option<String>,
}

/// The receiving ends of a [`Recorder`].
pub struct Events {
    /// The close of each connection whose handshake failed.
    pub failed_handshakes: mpsc::UnboundedReceiver<String>,
    /// One message per freed connection.
    pub freed: mpsc::UnboundedReceiver<Freed>,
}

impl Recorder {
    /// A recorder and the receiving ends of its events.
    pub fn new() -> (Self, Events) {
        let (failed_handshakes, failed_rx) = mpsc::unbounded_channel();
        let (freed, freed_rx) = mpsc::unbounded_channel();
        (
            Recorder {
                failed_handshakes,
                freed,
            },
            Events {
                failed_handshakes: failed_rx,
                freed: freed_rx,
            },
        )
    }
}

/// Per-connection state; s2n-quic drops it when it frees the connection.
pub struct Connection {
    id: u64,
    complete: bool,
    closed_after_handshake: Option<String>,
    freed: mpsc::UnboundedSender<Freed>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        let _ = self.freed.send(Freed {
            id: self.id,
            closed_after_handshake: self.closed_after_handshake.take(),
        });
    }
}

impl Subscriber for Recorder {
    type ConnectionContext = Connection;

    fn create_connection_context(
        &mut self,
        meta: &ConnectionMeta,
        _: &ConnectionInfo,
    ) -> Connection {
        Connection {
            id: meta.id,
            complete: false,
            closed_after_handshake: None,
            freed: self.freed.clone(),
        }
    }

    fn on_handshake_status_updated(
        &mut self,
        connection: &mut Connection,
        _: &ConnectionMeta,
        event: &HandshakeStatusUpdated,
    ) {
        if matches!(event.status, HandshakeStatus::Complete { .. }) {
            connection.complete = true;
        }
    }

    fn on_connection_closed(
        &mut self,
        connection: &mut Connection,
        _: &ConnectionMeta,
        event: &ConnectionClosed,
    ) {
        let close = crate::describe_close(&event.error);
        if connection.complete {
            connection.closed_after_handshake = Some(close);
        } else {
            let _ = self.failed_handshakes.send(close);
        }
    }
}
