//! A small qlog writer (JSON-SEQ, `packet_sent` / `packet_received` /
//! `connection_closed`) on
//! s2n-quic's event subscriber, for `--qlog DIR`.

use corequic_endpoint::Role;
use s2n_quic::provider::event::{
    ConnectionInfo, ConnectionMeta, Subscriber,
    events::{
        ConnectionClosed, DatagramDropped, PacketDropped, PacketHeader, PacketReceived, PacketSent,
    },
};
use s2n_quic_core::event::Timestamp;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// Writes `DIR/<role>.qlog`, or nothing without `--qlog`.
pub struct Writer {
    out: Option<BufWriter<File>>,
    start: Option<Timestamp>,
}

impl Writer {
    /// Creates the file `path` (none: write nothing) and writes the qlog
    /// header.
    pub fn create(path: Option<&Path>, role: Role, test: &str) -> Result<Self, String> {
        let Some(path) = path else {
            return Ok(Writer {
                out: None,
                start: None,
            });
        };
        let role = role.name();
        let file = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut out = BufWriter::new(file);
        let header = format!(
            "\u{1e}{{\"qlog_version\":\"0.3\",\"qlog_format\":\"JSON-SEQ\",\"title\":\"corequic s2n-quic {role} {test}\",\"trace\":{{\"vantage_point\":{{\"type\":\"{role}\"}}}}}}\n"
        );
        out.write_all(header.as_bytes())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Writer {
            out: Some(out),
            start: None,
        })
    }

    /// Milliseconds since the first event.
    fn time(&mut self, now: Timestamp) -> f64 {
        let start = *self.start.get_or_insert(now);
        now.saturating_duration_since(start).as_secs_f64() * 1e3
    }

    fn event(&mut self, now: Timestamp, name: &str, header: &PacketHeader, len: usize) {
        let ms = self.time(now);
        let Some(out) = self.out.as_mut() else {
            return;
        };
        let (packet_type, number) = match header {
            PacketHeader::Initial { number, .. } => ("initial", Some(number)),
            PacketHeader::Handshake { number, .. } => ("handshake", Some(number)),
            PacketHeader::ZeroRtt { number, .. } => ("0RTT", Some(number)),
            PacketHeader::OneRtt { number, .. } => ("1RTT", Some(number)),
            PacketHeader::Retry { .. } => ("retry", None),
            _ => ("unknown", None),
        };
        let number = number.map_or(String::new(), |n| format!(",\"packet_number\":{n}"));
        // A failed write loses trace lines, never the transfer.
        let _ = writeln!(
            out,
            "\u{1e}{{\"time\":{ms:.3},\"name\":\"transport:{name}\",\"data\":{{\"header\":{{\"packet_type\":\"{packet_type}\"{number}}},\"raw\":{{\"length\":{len}}}}}}}"
        );
    }
}

impl Writer {
    /// A dropped packet or datagram, with s2n-quic's reason as its trigger.
    fn dropped(&mut self, now: Timestamp, name: &str, reason: &str) {
        let ms = self.time(now);
        let Some(out) = self.out.as_mut() else {
            return;
        };
        let trigger = serde_json::to_string(reason).unwrap_or_default();
        let _ = writeln!(
            out,
            "\u{1e}{{\"time\":{ms:.3},\"name\":\"transport:{name}\",\"data\":{{\"trigger\":{trigger}}}}}"
        );
    }
}

impl Subscriber for Writer {
    type ConnectionContext = ();

    fn create_connection_context(&mut self, _: &ConnectionMeta, _: &ConnectionInfo) {}

    fn on_packet_sent(&mut self, _: &mut (), meta: &ConnectionMeta, event: &PacketSent) {
        self.event(
            meta.timestamp,
            "packet_sent",
            &event.packet_header,
            event.packet_len,
        );
    }

    fn on_packet_received(&mut self, _: &mut (), meta: &ConnectionMeta, event: &PacketReceived) {
        self.event(
            meta.timestamp,
            "packet_received",
            &event.packet_header,
            event.packet_len,
        );
    }

    fn on_packet_dropped(&mut self, _: &mut (), meta: &ConnectionMeta, event: &PacketDropped) {
        self.dropped(
            meta.timestamp,
            "packet_dropped",
            &format!("{:?}", event.reason),
        );
    }

    fn on_datagram_dropped(&mut self, _: &mut (), meta: &ConnectionMeta, event: &DatagramDropped) {
        self.dropped(
            meta.timestamp,
            "datagram_dropped",
            &format!("{:?}", event.reason),
        );
    }

    fn on_connection_closed(
        &mut self,
        _: &mut (),
        meta: &ConnectionMeta,
        event: &ConnectionClosed,
    ) {
        let ms = self.time(meta.timestamp);
        let Some(out) = self.out.as_mut() else {
            return;
        };
        // The error's Display text, as a JSON string
        let reason = serde_json::to_string(&event.error.to_string()).unwrap_or_default();
        let _ = writeln!(
            out,
            "\u{1e}{{\"time\":{ms:.3},\"name\":\"connectivity:connection_closed\",\"data\":{{\"reason\":{reason}}}}}"
        );
    }
}
