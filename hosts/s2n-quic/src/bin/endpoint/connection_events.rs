//! What the server endpoint learns from s2n-quic's event subscriber:
//!
//! - connections whose handshake failed, which s2n-quic never hands to
//!   `accept()`, and why they closed;
//! - when each connection is freed, after its closing period: a server that
//!   exits before then would take the CONNECTION_CLOSE of a connection that
//!   just failed with it, and strand the client.

use s2n_quic::provider::event::{
    ConnectionInfo, ConnectionMeta, Subscriber,
    events::{ConnectionClosed, HandshakeStatus, HandshakeStatusUpdated},
};
use tokio::sync::mpsc;

/// Sends the rendered close of every connection that closed before its
/// handshake completed, and a signal when any connection is freed.
pub struct Recorder {
    failed_handshakes: mpsc::UnboundedSender<String>,
    freed: mpsc::UnboundedSender<()>,
}

/// The receiving ends of a [`Recorder`].
pub struct Events {
    /// The close of each connection whose handshake failed.
    pub failed_handshakes: mpsc::UnboundedReceiver<String>,
    /// One message per freed connection.
    pub freed: mpsc::UnboundedReceiver<()>,
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
    complete: bool,
    freed: mpsc::UnboundedSender<()>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        let _ = self.freed.send(());
    }
}

impl Subscriber for Recorder {
    type ConnectionContext = Connection;

    fn create_connection_context(&mut self, _: &ConnectionMeta, _: &ConnectionInfo) -> Connection {
        Connection {
            complete: false,
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
        if !connection.complete {
            let _ = self
                .failed_handshakes
                .send(crate::describe_close(&event.error));
        }
    }
}
