//! Connections whose handshake failed: s2n-quic never hands them to a
//! server's `accept()`, so the endpoint learns that they ended, and why, from
//! s2n-quic's event subscriber.

use s2n_quic::provider::event::{
    ConnectionInfo, ConnectionMeta, Subscriber,
    events::{ConnectionClosed, HandshakeStatus, HandshakeStatusUpdated},
};
use tokio::sync::mpsc;

/// Sends the rendered close of every connection that closed before its
/// handshake completed.
pub struct Recorder {
    closes: mpsc::UnboundedSender<String>,
}

impl Recorder {
    /// A recorder and the receiving end of its closes.
    pub fn new() -> (Self, mpsc::UnboundedReceiver<String>) {
        let (closes, rx) = mpsc::unbounded_channel();
        (Recorder { closes }, rx)
    }
}

impl Subscriber for Recorder {
    /// Whether the connection's handshake completed.
    type ConnectionContext = bool;

    fn create_connection_context(&mut self, _: &ConnectionMeta, _: &ConnectionInfo) -> bool {
        false
    }

    fn on_handshake_status_updated(
        &mut self,
        complete: &mut bool,
        _: &ConnectionMeta,
        event: &HandshakeStatusUpdated,
    ) {
        if matches!(event.status, HandshakeStatus::Complete { .. }) {
            *complete = true;
        }
    }

    fn on_connection_closed(
        &mut self,
        complete: &mut bool,
        _: &ConnectionMeta,
        event: &ConnectionClosed,
    ) {
        if !*complete {
            let _ = self.closes.send(crate::describe_close(&event.error));
        }
    }
}
