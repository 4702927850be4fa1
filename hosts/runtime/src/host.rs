//! The one trait a QUIC stack implements to host plugins.

use crate::abi::{self, FieldRef, Frame, LogLevel, PluginVal};

/// A structured log record emitted by a plugin through the host API.
#[derive(Debug, Clone)]
pub struct LogRecord {
    /// The plugin's name.
    pub plugin: String,
    /// Severity.
    pub level: LogLevel,
    /// The message (truncated to [`crate::config::MAX_LOG_MESSAGE`] bytes).
    pub message: String,
    /// Key/value pairs.
    pub fields: Vec<(String, PluginVal)>,
}

impl LogRecord {
    /// The bytes this record is charged against its plugin's log budget
    /// (CQ-LIMIT-12): [`crate::config::LOG_RECORD_BYTES`] for the record,
    /// its text (message, keys, and each string or bytes value by its
    /// length, any other value as 16 bytes), and what its frames carry
    /// besides (`frame_log_bytes`).
    pub fn charged_size(&self) -> usize {
        crate::config::LOG_RECORD_BYTES
            + self.text_size()
            + self
                .fields
                .iter()
                .map(|(_, value)| match value {
                    PluginVal::Frame(frame) => frame_log_bytes(frame),
                    _ => 0,
                })
                .sum::<usize>()
    }

    /// The message, each key, and each string or bytes value by its
    /// length, any other value as 16 bytes.
    pub(crate) fn text_size(&self) -> usize {
        self.message.len()
            + self
                .fields
                .iter()
                .map(|(key, value)| {
                    key.len()
                        + match value {
                            PluginVal::String(text) => text.len(),
                            PluginVal::Bytes(bytes) => bytes.len(),
                            _ => 16,
                        }
                })
                .sum::<usize>()
    }
}

/// What a frame logged as a value carries besides its fixed fields, in
/// bytes (CQ-LIMIT-12): its token, reason phrase, or connection ID and
/// reset token, and 16 bytes per ACK range. Counted at 16 bytes like the
/// other values, a frame let a plugin pass its host any amount of data (20
/// MiB of NEW_TOKEN frames left a 1 MiB budget almost whole).
fn frame_log_bytes(frame: &abi::Frame) -> usize {
    match frame {
        abi::Frame::NewToken(token) => token.len(),
        abi::Frame::Ack(ack) => 16 * ack.ranges.len(),
        abi::Frame::NewConnectionId(f) => f.connection_id.len() + f.stateless_reset_token.len(),
        abi::Frame::ConnectionClose(f) => f.reason.len(),
        _ => 0,
    }
}

/// Cuts plugin-supplied log text to [`crate::config::MAX_LOG_MESSAGE`]
/// bytes at a UTF-8 character boundary (CQ-API-12).
pub(crate) fn truncate_log_text(text: &mut String) {
    let kept = log_text_prefix(text).len();
    text.truncate(kept);
}

/// Appends plugin-supplied log text to `text`, cut as
/// [`truncate_log_text`] cuts it, so that a reused string never grows past
/// [`crate::config::MAX_LOG_MESSAGE`] bytes.
pub(crate) fn push_log_text(text: &mut String, from: &str) {
    text.push_str(log_text_prefix(from));
}

/// The longest prefix of `text` of at most
/// [`crate::config::MAX_LOG_MESSAGE`] bytes that ends at a character
/// boundary.
fn log_text_prefix(text: &str) -> &str {
    let mut cut = crate::config::MAX_LOG_MESSAGE.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    &text[..cut]
}

/// The connection a plugin runs on, as the stack exposes it to the runtime:
/// field access and the few actions plugins may request. The runtime has
/// already checked permissions, anchors and value types before calling it.
pub trait HostConnection {
    /// Read a field. Return `unsupported` for fields the stack did not
    /// declare readable in its [`crate::HostCapabilities`].
    fn get_field(&mut self, field: FieldRef) -> Result<PluginVal, abi::Error>;

    /// Write a field (the value has the type the specification requires).
    fn set_field(&mut self, field: FieldRef, value: PluginVal) -> Result<(), abi::Error>;

    /// The connection's current time, in nanoseconds since its epoch.
    fn now(&self) -> u64;

    /// Queue a standard frame for the next packet. Hosts must accept PING
    /// and PATH_CHALLENGE (CQ-API-14) and may return `unsupported` for
    /// other frames.
    fn send_frame(&mut self, frame: Frame) -> Result<(), abi::Error>;

    /// Receive a plugin's log record. The runtime reuses the record's
    /// strings for the plugin's next one: copy what you keep.
    fn log(&mut self, record: &LogRecord) {
        let _ = record;
    }
}
