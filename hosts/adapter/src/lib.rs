//! What every Core QUIC host adapter shares, whatever its stack.
//!
//! A stack's hook patch calls a per-connection extension at its routine
//! points (the hook vocabulary of `hosts/README.md`). The adapter's
//! extension holds a [`ConnectionPlugins`] and forwards each hook to the
//! method of the same name here, passing a view of the stack's connection
//! that implements [`StackConnection`]. Everything that is not about one
//! stack lives here:
//!
//! - the fields every host answers the same way (`is-server`,
//!   `sending-halted`, the addresses before the connection exists) and the
//!   write rules of `congestion-window`, `ssthresh`, `max-tx-data` and
//!   `max-rx-data` (CQ-FIELD-8, CQ-FIELD-9);
//! - `send-frame`: a PING asked for before the connection exists is sent
//!   from the next hook that has it, PATH_CHALLENGEs are written by the
//!   adapter at the front of the next packet (CQ-API-14);
//! - the send loop's frame bookkeeping (written, acknowledged and lost
//!   plugin frames by type), the close a faulting plugin asks for
//!   (CQ-LIMIT-8), the mapping of parse/process errors to refusals, and the
//!   timer's conversion to the stack's clock;
//! - [`observed_frame_to_abi!`], the conversion of the stacks' observed
//!   frames (every patch declares the same `ObservedFrame` variants), and
//!   [`extension_hooks!`], every hook's body;
//! - the application's side: the [`Attachment`] a factory holds (plugins,
//!   log and report sinks, the local address a stack may not know) and the
//!   calls of [`AdapterExtension`] (`plugin-control`, counters, closes).
//!
//! An adapter keeps only its stack's glue: its [`StackConnection`] (field
//! reads, the setters, ping, close, the clock), its factory, and its
//! [`AdapterExtension`] impl (the stack's types and errors).

#![warn(missing_docs)]

use corequic_runtime::abi::{
    self, Anchor, ExtFrame, FieldId, FieldRef, Frame, FrameOutcome, PacketType, PluginVal, PnSpace,
    Routine, RxContext, SendPosition,
};
use corequic_runtime::{
    FieldSet, FrameRejected, HostCapabilities, LogRecord, Plugin, PluginSet, PluginStats,
    RoutineError, Runtime, SummaryReader, WrittenFrame,
};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

#[doc(hidden)]
pub use corequic_runtime::abi as __abi;

/// PATH_CHALLENGE, which the adapter writes itself for `send-frame`.
const PATH_CHALLENGE: u64 = 0x1a;

/// Bytes of a PATH_CHALLENGE frame: its type and 8 bytes of data.
const PATH_CHALLENGE_LEN: usize = 9;

/// Receives the plugins' log records (and the adapter's own warnings). The
/// runtime reuses a record's strings for the plugin's next one: a sink
/// copies what it keeps.
pub type LogSink = Arc<dyn Fn(&LogRecord) + Send + Sync>;

/// The capabilities of a host on this core: every routine and every field;
/// writable are `sending-halted`, `congestion-window`, `ssthresh`,
/// `max-tx-data` and `max-rx-data` (a stack whose congestion controller
/// cannot take a write refuses it with `unsupported`, CQ-FIELD-8).
/// `stack_transport_parameters` are the stack's own parameter IDs, which
/// plugins may not send (CQ-API-8).
pub fn capabilities(stack_transport_parameters: Vec<u64>) -> HostCapabilities {
    let writable = [
        FieldId::SendingHalted,
        FieldId::CongestionWindow,
        FieldId::Ssthresh,
        FieldId::MaxTxData,
        FieldId::MaxRxData,
    ]
    .into_iter()
    .collect();
    HostCapabilities {
        readable: FieldSet::all(),
        writable,
        routines: Routine::ALL.to_vec(),
        stack_transport_parameters,
    }
}

/// Receives the [`ConnectionReport`] of each connection with plugins when
/// the stack frees it (after it closed): how an application learns the
/// final counters of a connection that its stack's API no longer reaches
/// (s2n-quic).
pub type ReportSink = Arc<dyn Fn(ConnectionReport) + Send + Sync>;

/// The plugins an application attaches to every connection, and where
/// their log records and final reports go: what each adapter's
/// `PluginFactory` holds.
#[derive(Clone)]
pub struct Attachment {
    runtime: Arc<Runtime>,
    plugins: Vec<Arc<Plugin>>,
    log: Option<LogSink>,
    report: Option<ReportSink>,
    local: Option<SocketAddr>,
}

impl Attachment {
    /// Attach `plugins` (in this order) to every connection.
    pub fn new(runtime: Arc<Runtime>, plugins: Vec<Arc<Plugin>>) -> Self {
        Attachment {
            runtime,
            plugins,
            log: None,
            report: None,
            local: None,
        }
    }

    /// Where log records go (by default they are dropped).
    pub fn log_sink(mut self, sink: LogSink) -> Self {
        self.log = Some(sink);
        self
    }

    /// Where each connection's final [`ConnectionReport`] goes, when the
    /// stack frees the connection.
    pub fn report_sink(mut self, sink: ReportSink) -> Self {
        self.report = Some(sink);
        self
    }

    /// The endpoint's bound address, for the `local-address` field on a
    /// stack that does not know its local address (quinn).
    pub fn local_address(mut self, local: SocketAddr) -> Self {
        self.local = Some(local);
        self
    }

    /// The plugins of a new connection (see [`ConnectionPlugins::new`]);
    /// `info.local` defaults to [`Attachment::local_address`].
    pub fn attach(&self, adapter: &'static str, info: ConnectionInfo) -> Option<ConnectionPlugins> {
        let info = ConnectionInfo {
            local: info.local.or(self.local),
            ..info
        };
        let mut plugins = ConnectionPlugins::new(
            adapter,
            &self.runtime,
            &self.plugins,
            info,
            self.log.clone(),
        )?;
        plugins.report = self.report.clone();
        Some(plugins)
    }
}

impl std::fmt::Debug for Attachment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attachment")
            .field("plugins", &self.plugins.len())
            .finish()
    }
}

/// The stack's connection during one hook, as an adapter exposes it.
///
/// The core answers `is-server` and `sending-halted` itself and validates
/// values before a setter is called: an implementation only reads and
/// writes the stack's own state.
pub trait StackConnection {
    /// The connection's time: nanoseconds since its extension was created
    /// (the ABI epoch).
    fn now(&self) -> u64;

    /// Read a field other than `is-server` and `sending-halted`.
    fn get_field(&mut self, field: FieldRef) -> Result<PluginVal, abi::Error>;

    /// Set the congestion window, bytes. `Ok(false)` when the stack's
    /// congestion controller cannot take a window; `Err` refuses the value
    /// (CQ-FIELD-8: never clamp).
    fn set_congestion_window(&mut self, bytes: u64) -> Result<bool, abi::Error>;

    /// Set or clear (`None`) the slow-start threshold; as
    /// [`StackConnection::set_congestion_window`].
    fn set_ssthresh(&mut self, bytes: Option<u64>) -> Result<bool, abi::Error>;

    /// Set `max-tx-data` or `max-rx-data` (`field` says which). `Ok(false)`
    /// when the stack cannot apply that value (CQ-FIELD-9); `Err` when it
    /// cannot write the limit now at all.
    fn set_flow_limit(&mut self, field: FieldId, max: u64) -> Result<bool, abi::Error>;

    /// Make the next packet ack-eliciting (a PING, or any frame that
    /// elicits an acknowledgement).
    fn ping(&mut self) -> Result<(), abi::Error>;

    /// Close the connection with an application error (a faulting plugin,
    /// CQ-LIMIT-8). A connection that is already closing ignores it.
    fn close(&mut self, error_code: u64, reason: &str);
}

/// What the stack says about a connection when its extension is created.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionInfo {
    /// This endpoint is the server.
    pub is_server: bool,
    /// The local address, where the stack knows it.
    pub local: Option<SocketAddr>,
    /// The peer's address.
    pub remote: SocketAddr,
}

/// The send loop's slot for plugin frames in one packet, as the stack's
/// `SendContext` gives it.
#[derive(Debug, Clone, Copy)]
pub struct SendSlot {
    /// The packet's number.
    pub packet_number: u64,
    /// Where in the packet the frames go.
    pub position: SendPosition,
    /// Bytes left for frames.
    pub room: usize,
    /// The packet counts in flight (false: an ACK-only packet under a full
    /// congestion window, which takes only frames that are not in flight,
    /// CQ-SEND-10).
    pub in_flight: bool,
}

/// A frame the adapter wrote into a packet: what the stack keeps to report
/// its fate back through [`ConnectionPlugins::on_frames`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SentFrame {
    /// Its frame type.
    pub frame_type: u64,
    /// The plugin's tag (the data, for a PATH_CHALLENGE).
    pub tag: u64,
    /// It makes the packet ack-eliciting.
    pub ack_eliciting: bool,
    /// Its bytes count in flight.
    pub in_flight: bool,
}

/// Why a plugin frame the peer sent was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameRefused {
    /// No plugin parses this frame type.
    Unknown,
    /// The plugin could not parse it: FRAME_ENCODING_ERROR.
    Encoding(String),
    /// The plugin refused to process it: PROTOCOL_VIOLATION.
    Violation(String),
}

/// Plugin frames of one type: written, acknowledged and lost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameCounts {
    /// Written into packets.
    pub sent: u64,
    /// Acknowledged by the peer.
    pub acked: u64,
    /// Declared lost.
    pub lost: u64,
}

/// What the plugins of a connection did: its final counters.
#[derive(Debug, Clone)]
pub struct ConnectionReport {
    /// Per-plugin counters.
    pub stats: Vec<PluginStats>,
    /// Plugin frames by frame type.
    pub frames: BTreeMap<u64, FrameCounts>,
    /// The close the plugins caused (error code, and a reason naming the
    /// plugin, routine and cause), if they did.
    pub close: Option<(u64, String)>,
}

/// Adapter state beside the plugin set.
struct State {
    adapter: &'static str,
    info: ConnectionInfo,
    sending_halted: bool,
    /// A PING asked for before the connection existed (`init`, the first
    /// transport parameters), sent from the next hook that has it.
    ping_pending: bool,
    /// PATH_CHALLENGE data queued through `send-frame`.
    challenges: Vec<u64>,
    log: Option<LogSink>,
    frames: BTreeMap<u64, FrameCounts>,
    /// The close the plugins caused: error code and reason.
    close: Option<(u64, String)>,
}

impl State {
    fn warn(&self, message: String) {
        if let Some(log) = &self.log {
            log(&LogRecord {
                plugin: self.adapter.into(),
                level: abi::LogLevel::Warn,
                message,
                fields: Vec::new(),
            });
        }
    }
}

/// The connection as the runtime sees it during one hook.
struct View<'a, C: ?Sized> {
    cx: Option<&'a mut C>,
    st: &'a mut State,
}

fn unavailable(field: FieldId) -> abi::Error {
    abi::Error::NotFound(format!(
        "{} is not known before the connection exists or after it ended",
        field.name()
    ))
}

impl<C: StackConnection + ?Sized> corequic_runtime::HostConnection for View<'_, C> {
    fn get_field(&mut self, field: FieldRef) -> Result<PluginVal, abi::Error> {
        match field.id {
            FieldId::IsServer => return Ok(PluginVal::Bool(self.st.info.is_server)),
            FieldId::SendingHalted => return Ok(PluginVal::Bool(self.st.sending_halted)),
            _ => {}
        }
        let read = match self.cx.as_deref_mut() {
            Some(cx) => cx.get_field(field),
            None => Err(unavailable(field.id)),
        };
        // The addresses the connection was created with, where the stack
        // shows none (no connection or no path yet, or a stack that does
        // not know its local address).
        match (read, field.id) {
            (Err(abi::Error::NotFound(_)), FieldId::PeerAddress) => {
                Ok(PluginVal::from(self.st.info.remote))
            }
            (Err(abi::Error::NotFound(why)), FieldId::LocalAddress) => self
                .st
                .info
                .local
                .map(PluginVal::from)
                .ok_or(abi::Error::NotFound(why)),
            (read, _) => read,
        }
    }

    fn set_field(&mut self, field: FieldRef, value: PluginVal) -> Result<(), abi::Error> {
        if let (FieldId::SendingHalted, PluginVal::Bool(halt)) = (field.id, &value) {
            self.st.sending_halted = *halt;
            return Ok(());
        }
        let Some(cx) = self.cx.as_deref_mut() else {
            return Err(unavailable(field.id));
        };
        let applied = match (field.id, value) {
            (FieldId::CongestionWindow, PluginVal::U64(w)) => cx.set_congestion_window(w)?,
            (FieldId::Ssthresh, PluginVal::U64(s)) => cx.set_ssthresh(Some(s))?,
            (FieldId::Ssthresh, PluginVal::None) => cx.set_ssthresh(None)?,
            (id @ (FieldId::MaxTxData | FieldId::MaxRxData), PluginVal::U64(max)) => {
                return match cx.set_flow_limit(id, max)? {
                    true => Ok(()),
                    false => Err(abi::flow_limit_refused(id, max)),
                };
            }
            _ => false,
        };
        if applied {
            Ok(())
        } else {
            Err(abi::Error::Unsupported(format!(
                "{} cannot write {} with this congestion controller",
                self.st.adapter,
                field.id.name()
            )))
        }
    }

    fn now(&self) -> u64 {
        self.cx.as_deref().map_or(0, |cx| cx.now())
    }

    fn send_frame(&mut self, frame: Frame) -> Result<(), abi::Error> {
        match frame {
            Frame::Ping => match self.cx.as_deref_mut() {
                Some(cx) => cx.ping(),
                None => {
                    // CQ-API-14: accepted in every phase; sent once the
                    // connection exists.
                    self.st.ping_pending = true;
                    Ok(())
                }
            },
            Frame::PathChallenge(data) => {
                self.st.challenges.push(data);
                Ok(())
            }
            other => Err(abi::Error::Unsupported(format!(
                "{} cannot queue frame type {:#x}",
                self.st.adapter,
                other.frame_type()
            ))),
        }
    }

    fn log(&mut self, record: &LogRecord) {
        if let Some(log) = &self.st.log {
            log(record);
        }
    }
}

/// The plugins of one connection and the adapter state beside them: the
/// stack-independent half of every adapter's extension.
pub struct ConnectionPlugins {
    /// `PluginSet` is `Send` but not `Sync`, and some stacks want a `Sync`
    /// extension; hooks with `&mut self` reach it through `Mutex::get_mut`,
    /// without locking.
    set: Mutex<PluginSet>,
    /// What the hooks through `&self` read of the set, without locking it.
    summary: SummaryReader,
    state: State,
    transport_parameters: Vec<(u64, Vec<u8>)>,
    /// Where the final report goes when the connection is dropped.
    report: Option<ReportSink>,
    /// Buffers the hooks reuse, so that a packet's frames cost no
    /// allocation once the connection has run a while.
    scratch: Scratch,
}

/// Buffers kept between hooks: emptied after each use, their capacity kept.
#[derive(Default)]
struct Scratch {
    /// The ranges of the last ACK frame observed (`observe_frame`).
    ack_ranges: Vec<(u64, u64)>,
    /// The frames the plugins wrote into the last packet (`write_frames`).
    written: Vec<WrittenFrame>,
}

impl Drop for ConnectionPlugins {
    fn drop(&mut self) {
        // The records still queued for observe-frames are delivered now
        // (CQ-ROUTINE-26), on a view without the stack's connection, which
        // is gone: field reads answer `not-found`.
        let set = self.set.get_mut().unwrap_or_else(|e| e.into_inner());
        let mut view = View::<dyn StackConnection> {
            cx: None,
            st: &mut self.state,
        };
        set.deliver_observations(&mut view);
        if let Some(report) = &self.report {
            report(self.report());
        }
    }
}

impl ConnectionPlugins {
    /// Attach `plugins` to a new connection: instantiate them, run `init`
    /// and encode their transport parameters, against what is known before
    /// the stack's connection exists (every stack encodes its parameters
    /// then). `adapter` names the adapter in its log records. `None` when
    /// the plugins could not be instantiated (logged).
    pub fn new(
        adapter: &'static str,
        runtime: &Runtime,
        plugins: &[Arc<Plugin>],
        info: ConnectionInfo,
        log: Option<LogSink>,
    ) -> Option<ConnectionPlugins> {
        let mut state = State {
            adapter,
            info,
            sending_halted: false,
            ping_pending: false,
            challenges: Vec::new(),
            log,
            frames: BTreeMap::new(),
            close: None,
        };
        let mut set = match runtime.connection(plugins) {
            Ok(set) => set,
            Err(e) => {
                state.warn(format!("plugins not attached: {e}"));
                return None;
            }
        };
        let mut view = View::<dyn StackConnection> {
            cx: None,
            st: &mut state,
        };
        for (plugin, e) in set.init(&mut view) {
            view.st
                .warn(format!("plugin {plugin} removed at init: {e}"));
        }
        let transport_parameters = set.transport_parameters(&mut view);
        Some(ConnectionPlugins {
            summary: set.summary_reader(),
            set: Mutex::new(set),
            state,
            transport_parameters,
            report: None,
            scratch: Scratch::default(),
        })
    }

    fn set_mut(&mut self) -> &mut PluginSet {
        self.set.get_mut().unwrap_or_else(|e| e.into_inner())
    }

    fn set_ref(&self) -> MutexGuard<'_, PluginSet> {
        self.set.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Run `f` with the plugin set and the connection view, then send a
    /// PING asked for before the connection existed and act on a close
    /// request (a plugin that defines protocol behaviour faulted).
    fn with<C: StackConnection + ?Sized, R>(
        &mut self,
        cx: &mut C,
        f: impl FnOnce(&mut PluginSet, &mut View<'_, C>) -> R,
    ) -> R {
        let set = self.set.get_mut().unwrap_or_else(|e| e.into_inner());
        let mut view = View {
            cx: Some(cx),
            st: &mut self.state,
        };
        let r = f(set, &mut view);
        let Some(cx) = view.cx else { return r };
        if std::mem::take(&mut view.st.ping_pending) {
            // Only a closing connection refuses: nothing to send then.
            let _ = cx.ping();
        }
        if let Some(close) = set.take_close_request() {
            view.st.warn(format!(
                "closing with {:#x}: {}",
                close.error_code, close.reason
            ));
            cx.close(close.error_code, &close.reason);
            view.st
                .close
                .get_or_insert((close.error_code, close.reason));
        }
        r
    }

    fn rx_context(now: u64, packet_number: u64) -> RxContext {
        RxContext {
            packet_type: PacketType::OneRtt,
            space: PnSpace::ApplicationData,
            packet_number,
            now,
        }
    }

    fn send_context(now: u64, slot: &SendSlot, room: usize) -> abi::SendContext {
        abi::SendContext {
            packet_type: PacketType::OneRtt,
            space: PnSpace::ApplicationData,
            packet_number: slot.packet_number,
            position: slot.position,
            room: room as u64,
            now,
        }
    }

    /// Hook `transport_parameters`: the plugins' parameters, encoded when
    /// the extension was created (taken once).
    pub fn transport_parameters(&mut self) -> Vec<(u64, Vec<u8>)> {
        std::mem::take(&mut self.transport_parameters)
    }

    /// Hook `decode_transport_parameter`: `Err` with the reason when a
    /// plugin refused the peer's parameter (TRANSPORT_PARAMETER_ERROR). A
    /// plugin that faulted has already asked for its own close.
    pub fn decode_transport_parameter<C: StackConnection + ?Sized>(
        &mut self,
        cx: &mut C,
        id: u64,
        value: &[u8],
    ) -> Result<(), String> {
        match self.with(cx, |set, view| {
            set.decode_transport_parameter(view, id, value)
        }) {
            Ok(_) | Err(RoutineError::Fault(_)) => Ok(()),
            Err(e) => {
                let reason = format!("transport parameter {id:#x} refused: {e}");
                self.state.warn(reason.clone());
                self.state.close.get_or_insert((0x08, reason.clone()));
                Err(reason)
            }
        }
    }

    /// Hook `wants_to_send`: a plugin (or a queued PATH_CHALLENGE) has a
    /// frame for this packet.
    pub fn wants_to_send<C: StackConnection + ?Sized>(
        &mut self,
        cx: &mut C,
        slot: &SendSlot,
    ) -> bool {
        if !self.state.challenges.is_empty() {
            return true;
        }
        // Most packets of a bulk transfer: nothing registered, so neither
        // the time nor a view of the connection is needed.
        if !self.state.ping_pending && !self.set_mut().offers_ack_eliciting_frames() {
            return false;
        }
        let ctx = Self::send_context(cx.now(), slot, slot.room);
        self.with(cx, |set, view| set.wants_to_send(view, ctx))
    }

    /// Hook `offers_frames_at`: whether [`Self::write_frames`] at
    /// `position` can write anything (a PATH_CHALLENGE queued, a PING asked
    /// for before the connection existed, or a plugin's registration there).
    /// When not, the stack skips it and whatever it builds for it: most
    /// packets of a bulk transfer.
    pub fn offers_frames_at(&self, position: SendPosition) -> bool {
        (position == SendPosition::First && !self.state.challenges.is_empty())
            || self.state.ping_pending
            || self.summary.offers_frames_at(position)
    }

    /// Hook `write_frames`: write the queued PATH_CHALLENGEs (first in an
    /// in-flight packet) and the plugins' frames into `buf`; `sent` gets
    /// each frame written, for the stack to report back.
    pub fn write_frames<C: StackConnection + ?Sized>(
        &mut self,
        cx: &mut C,
        slot: &SendSlot,
        buf: &mut Vec<u8>,
        mut sent: impl FnMut(SentFrame),
    ) {
        let mut room = slot.room;
        if slot.position == SendPosition::First && slot.in_flight {
            while room >= PATH_CHALLENGE_LEN {
                let Some(data) = self.state.challenges.pop() else {
                    break;
                };
                buf.push(PATH_CHALLENGE as u8);
                buf.extend_from_slice(&data.to_be_bytes());
                sent(SentFrame {
                    frame_type: PATH_CHALLENGE,
                    tag: data,
                    ack_eliciting: true,
                    in_flight: true,
                });
                room -= PATH_CHALLENGE_LEN;
            }
        }
        if !self.state.ping_pending && !self.set_mut().offers_frames_at(slot.position) {
            return;
        }
        let ctx = Self::send_context(cx.now(), slot, room);
        let mut written = std::mem::take(&mut self.scratch.written);
        let in_flight = slot.in_flight;
        self.with(cx, |set, view| {
            if in_flight {
                set.write_frames(view, ctx, buf, &mut written)
            } else {
                set.write_frames_not_in_flight(view, ctx, buf, &mut written)
            }
        });
        for w in written.drain(..) {
            self.state
                .frames
                .entry(w.frame.frame_type)
                .or_default()
                .sent += 1;
            sent(SentFrame {
                frame_type: w.frame.frame_type,
                tag: w.frame.tag,
                ack_eliciting: w.ack_eliciting,
                in_flight: w.in_flight,
            });
        }
        self.scratch.written = written;
    }

    /// Hook `on_frames`: frames written by [`ConnectionPlugins::write_frames`]
    /// were acknowledged (`acked`) or declared lost.
    pub fn on_frames<C: StackConnection + ?Sized>(
        &mut self,
        cx: &mut C,
        frames: impl IntoIterator<Item = (u64, u64)>,
        acked: bool,
    ) {
        let outcome = if acked {
            FrameOutcome::Acked
        } else {
            FrameOutcome::Lost
        };
        for (frame_type, tag) in frames {
            if frame_type == PATH_CHALLENGE {
                continue;
            }
            let counts = self.state.frames.entry(frame_type).or_default();
            if acked {
                counts.acked += 1;
            } else {
                counts.lost += 1;
            }
            let frame = ExtFrame { frame_type, tag };
            // Errors are logged by the runtime; there is nothing to undo.
            let _ = self.with(cx, |set, view| set.notify_frame(view, frame, outcome));
        }
    }

    /// Hook `process_frame`: parse and process a plugin frame the peer
    /// sent; the bytes of `payload` it took, or why it was refused (logged).
    pub fn process_frame<C: StackConnection + ?Sized>(
        &mut self,
        cx: &mut C,
        frame_type: u64,
        payload: &[u8],
        packet_number: u64,
    ) -> Result<usize, FrameRefused> {
        let rx = Self::rx_context(cx.now(), packet_number);
        let r = self.with(cx, |set, view| {
            if !set.parses_frame_type(frame_type) {
                return Err(FrameRefused::Unknown);
            }
            match set.receive_frame(view, frame_type, payload, rx) {
                Ok(consumed) => Ok(consumed as usize),
                Err(FrameRejected::Encoding(e)) => Err(FrameRefused::Encoding(format!(
                    "frame {frame_type:#x}: {e}"
                ))),
                Err(FrameRejected::Violation(e)) => Err(FrameRefused::Violation(format!(
                    "frame {frame_type:#x}: {e}"
                ))),
            }
        });
        if let Err(FrameRefused::Encoding(reason) | FrameRefused::Violation(reason)) = &r {
            self.state.warn(reason.clone());
        }
        r
    }

    /// Hook `observes_frame`: a plugin observes standard frames of this type
    /// (the stack then converts and reports them). STREAM and DATAGRAM
    /// types collapse to the first of their family, as
    /// [`Frame::frame_type`] does.
    pub fn observes_frame(&mut self, frame_type: u64) -> bool {
        let frame_type = match frame_type {
            0x08..=0x0f => 0x08,
            0x31 => 0x30,
            other => other,
        };
        self.set_mut().observes_frame_type(frame_type)
    }

    /// Hook `observe_frame`: a standard frame the peer sent, before or
    /// (`after`) the stack processed it. `frame` is `None` for a frame the
    /// ABI has no value for. An ACK frame's ranges are best built in
    /// [`Self::take_ack_ranges`], which this hook takes back.
    pub fn observe_frame<C: StackConnection + ?Sized>(
        &mut self,
        cx: &mut C,
        frame: Option<Frame>,
        after: bool,
        packet_number: u64,
    ) {
        let Some(frame) = frame else { return };
        // Most observers watch AFTER the stack (`observe-frames` has no
        // other anchor): the BEFORE call is then skipped here.
        if after || self.set_mut().observes_frame_before(frame.frame_type()) {
            let rx = Self::rx_context(cx.now(), packet_number);
            let anchor = if after { Anchor::After } else { Anchor::Before };
            self.with(cx, |set, view| set.observe_frame(view, anchor, &frame, rx));
        }
        if let Frame::Ack(ack) = frame {
            self.scratch.ack_ranges = ack.ranges;
        }
    }

    /// An empty buffer for the ranges of an ACK frame to observe, which
    /// [`Self::observe_frame`] takes back with the frame: a connection
    /// observing every ACK it receives allocates for the first only.
    pub fn take_ack_ranges(&mut self) -> Vec<(u64, u64)> {
        let mut ranges = std::mem::take(&mut self.scratch.ack_ranges);
        ranges.clear();
        ranges
    }

    /// Hook `next_timeout`: the earliest plugin timer, in nanoseconds since
    /// the ABI epoch.
    pub fn next_timeout(&self) -> Option<u64> {
        self.summary.next_timeout()
    }

    /// Hook `on_timeout`: run the plugin timers that are due.
    pub fn on_timeout<C: StackConnection + ?Sized>(&mut self, cx: &mut C) {
        let now = cx.now();
        self.with(cx, |set, view| set.handle_timeout(view, now));
    }

    /// Hook `sending_halted`: a plugin halted sending (the `sending-halted`
    /// field).
    pub fn sending_halted(&self) -> bool {
        self.state.sending_halted
    }

    /// Call plugin-control `id` (the application side of the ABI).
    pub fn plugin_control<C: StackConnection + ?Sized>(
        &mut self,
        cx: &mut C,
        id: u64,
        args: &[PluginVal],
    ) -> Result<Vec<PluginVal>, RoutineError> {
        self.with(cx, |set, view| set.plugin_control(view, id, args))
    }

    /// Per-plugin counters of this connection.
    pub fn stats(&self) -> Vec<PluginStats> {
        self.set_ref().stats()
    }

    /// Plugin frames of `frame_type` written, acknowledged and lost.
    pub fn frame_counts(&self, frame_type: u64) -> FrameCounts {
        self.state
            .frames
            .get(&frame_type)
            .copied()
            .unwrap_or_default()
    }

    /// The error code and reason with which this connection's plugins
    /// closed it (a defining plugin faulted, CQ-LIMIT-8, or a refused
    /// transport parameter), if they did. Stacks that report such a close
    /// without its reason, or as the application's, are told it here.
    pub fn local_close(&self) -> Option<(u64, String)> {
        self.state.close.clone()
    }

    /// What the stack said about the connection when its extension was
    /// created.
    pub fn info(&self) -> ConnectionInfo {
        self.state.info
    }

    /// Everything the plugins did on this connection.
    pub fn report(&self) -> ConnectionReport {
        ConnectionReport {
            stats: self.stats(),
            frames: self.state.frames.clone(),
            close: self.local_close(),
        }
    }
}

/// An adapter's per-connection extension: the connection's
/// [`ConnectionPlugins`] beside the stack glue that shows the stack's
/// connection to them. An adapter implements this trait with its stack's
/// types, and the stack's `Extension` trait with [`extension_hooks!`],
/// which forwards every hook through it; the application's calls below are
/// the same on every stack.
pub trait AdapterExtension {
    /// The stack's hook context (the `ExtensionContext` of its patch).
    type Context<'c>: ?Sized;
    /// The error with which the stack closes a connection.
    type Error;
    /// The stack's clock.
    type Time;

    /// The connection's plugins.
    fn plugins(&self) -> &ConnectionPlugins;

    /// The connection's plugins, for the hooks that need no connection.
    fn plugins_mut(&mut self) -> &mut ConnectionPlugins;

    /// Run `f` with the plugins and the stack's connection as `cx` shows it
    /// during one hook or application call.
    fn with_connection<R>(
        &mut self,
        cx: &mut Self::Context<'_>,
        f: impl FnOnce(&mut ConnectionPlugins, &mut dyn StackConnection) -> R,
    ) -> R;

    /// The stack's error for a peer transport parameter a plugin refused
    /// (TRANSPORT_PARAMETER_ERROR), with the refusal's reason.
    fn parameter_refused(reason: String) -> Self::Error;

    /// The stack's error for a plugin frame the plugins refused.
    fn frame_refused(refused: FrameRefused) -> Self::Error;

    /// The stack's time of ABI time `ns` (a plugin timer's deadline).
    fn stack_time(&self, ns: u64) -> Option<Self::Time>;

    /// The adapter's extension behind a stack's `dyn Extension` (given as
    /// its `as_any_mut()`); `None` when the extension is not this adapter's.
    fn from_any(any: &mut dyn std::any::Any) -> Option<&mut Self>
    where
        Self: Sized + 'static,
    {
        any.downcast_mut::<Self>()
    }

    /// Call plugin-control `id` (the application side of the ABI).
    fn plugin_control(
        &mut self,
        cx: &mut Self::Context<'_>,
        id: u64,
        args: &[PluginVal],
    ) -> Result<Vec<PluginVal>, RoutineError> {
        self.with_connection(cx, |plugins, stack| plugins.plugin_control(stack, id, args))
    }

    /// Per-plugin counters of this connection.
    fn stats(&self) -> Vec<PluginStats> {
        self.plugins().stats()
    }

    /// Plugin frames of `frame_type` written, acknowledged and lost.
    fn frame_counts(&self, frame_type: u64) -> FrameCounts {
        self.plugins().frame_counts(frame_type)
    }

    /// The close this connection's plugins caused, with its reason, if they
    /// did (see [`ConnectionPlugins::local_close`]): stacks report such a
    /// close as the application's, or keep only its code.
    fn local_close(&self) -> Option<(u64, String)> {
        self.plugins().local_close()
    }
}

/// The ABI clock of a connection on a stack that keeps time in
/// [`std::time::Instant`]: nanoseconds since the connection's extension was
/// created.
#[derive(Debug, Clone, Copy)]
pub struct Epoch(std::time::Instant);

impl Epoch {
    /// The clock of a connection whose extension was created at `created`.
    pub fn new(created: std::time::Instant) -> Self {
        Epoch(created)
    }

    /// `now` on the ABI clock (0 before the epoch).
    pub fn ns(self, now: std::time::Instant) -> u64 {
        duration_ns(&now.saturating_duration_since(self.0))
    }

    /// The stack's instant of ABI time `ns` (a plugin timer's deadline).
    pub fn instant(self, ns: u64) -> Option<std::time::Instant> {
        self.0.checked_add(std::time::Duration::from_nanos(ns))
    }
}

/// A field that [`StackConnection::get_field`] is never asked for, because
/// the core answers it (`is-server`, `sending-halted`): the error a stack
/// returns for it.
pub fn answered_by_core(field: FieldId) -> abi::Error {
    abi::Error::Failed(format!("{} is answered by the adapter core", field.name()))
}

/// An optional number field: `none` when the stack does not know it.
pub fn optional_u64(value: Option<u64>) -> PluginVal {
    value.map_or(PluginVal::None, PluginVal::U64)
}

/// Bytes of a frame field as a stack's `ObservedFrame` holds them.
pub trait FrameBytes {
    /// The bytes, in wire order.
    fn frame_bytes(&self) -> Vec<u8>;
}

impl FrameBytes for [u8] {
    fn frame_bytes(&self) -> Vec<u8> {
        self.to_vec()
    }
}

impl FrameBytes for Vec<u8> {
    fn frame_bytes(&self) -> Vec<u8> {
        self.clone()
    }
}

impl<const N: usize> FrameBytes for [u8; N] {
    fn frame_bytes(&self) -> Vec<u8> {
        self.to_vec()
    }
}

impl FrameBytes for bytes::Bytes {
    fn frame_bytes(&self) -> Vec<u8> {
        self.to_vec()
    }
}

/// A stateless reset token held as a number (big-endian on the wire).
impl FrameBytes for u128 {
    fn frame_bytes(&self) -> Vec<u8> {
        self.to_be_bytes().to_vec()
    }
}

/// Nanoseconds of a duration, saturating.
pub fn duration_ns(d: &std::time::Duration) -> u64 {
    d.as_nanos().min(u128::from(u64::MAX)) as u64
}

/// `local-address` or `peer-address` (`field`) of the connection's current
/// path, `(local, peer)`. A connection without a path answers `not-found`,
/// and the core then answers the address the connection was created with.
pub fn path_address(
    field: FieldId,
    path: Option<(SocketAddr, SocketAddr)>,
) -> Result<PluginVal, abi::Error> {
    let (local, peer) =
        path.ok_or_else(|| abi::Error::NotFound(format!("{}: no path", field.name())))?;
    Ok(PluginVal::from(match field {
        FieldId::LocalAddress => local,
        _ => peer,
    }))
}

/// The index of a field's packet number space in a stack's per-space
/// arrays ordered Initial, Handshake, Application; a field read without a
/// space is the application space's.
pub fn space_index(space: Option<PnSpace>) -> usize {
    match space {
        Some(PnSpace::Initial) => 0,
        Some(PnSpace::Handshake) => 1,
        _ => 2,
    }
}

/// The largest congestion window a plugin may write on a stack that adds
/// to and multiplies its window in `usize` (quiche, neqo), 2^48 bytes: far
/// above any real window, with room left for the stack's arithmetic on it
/// (a window near `usize::MAX` overflows: a chaos seed aborted quiche in
/// `cwnd_available`).
pub const MAX_USIZE_CONGESTION_WINDOW: usize = 1 << 48;

/// A slow-start threshold a plugin writes (`None` clears it), as a stack
/// that keeps it in `usize` takes it: a value above `usize::MAX` is the
/// largest.
pub fn ssthresh_usize(bytes: Option<u64>) -> Option<usize> {
    bytes.map(|s| usize::try_from(s).unwrap_or(usize::MAX))
}

/// A congestion window a plugin writes, as a stack that keeps it in `usize`
/// takes it: at most `max` bytes, so that the stack's arithmetic on its
/// window cannot overflow. A larger value is refused, never clamped
/// (CQ-FIELD-8); `stack` names the stack in the error.
pub fn congestion_window(bytes: u64, max: usize, stack: &str) -> Result<usize, abi::Error> {
    usize::try_from(bytes)
        .ok()
        .filter(|w| *w <= max)
        .ok_or_else(|| {
            abi::Error::InvalidArgument(format!(
                "congestion-window: {stack}'s congestion controller holds at most {max} bytes, not {bytes}"
            ))
        })
}

/// Convert a stack's observed frame to the ABI's [`Frame`] (`None` for a
/// frame the ABI has no value for). Every hook patch declares the same
/// `ObservedFrame` variants (`hosts/README.md`); name the type in scope:
///
/// ```text
/// use quinn_proto::ObservedFrame;
/// let frame = corequic_adapter::observed_frame_to_abi!(ObservedFrame, observed);
/// ```
///
/// A third argument gives the empty buffer an ACK frame's ranges are
/// copied into ([`ConnectionPlugins::take_ack_ranges`]); it is evaluated
/// for an ACK frame only.
#[macro_export]
macro_rules! observed_frame_to_abi {
    ($observed:ident, $frame:expr) => {
        $crate::observed_frame_to_abi!($observed, $frame, ::std::vec::Vec::new())
    };
    ($observed:ident, $frame:expr, $ranges:expr) => {{
        use $crate::__abi as abi;
        use $crate::FrameBytes as _;
        #[allow(unreachable_patterns)]
        let frame: Option<abi::Frame> = match $frame {
            $observed::Ping => Some(abi::Frame::Ping),
            $observed::Ack(largest, delay, ranges, ecn) => Some(abi::Frame::Ack(abi::AckFrame {
                largest_acknowledged: *largest,
                ack_delay: $crate::duration_ns(delay),
                ranges: {
                    let mut buf: ::std::vec::Vec<(u64, u64)> = $ranges;
                    buf.extend_from_slice(ranges);
                    buf
                },
                ecn: ecn.map(|(ect0, ect1, ce)| abi::EcnCounts { ect0, ect1, ce }),
            })),
            $observed::ResetStream(id, code, size) => {
                Some(abi::Frame::ResetStream(abi::ResetStreamFrame {
                    stream_id: *id,
                    error_code: *code,
                    final_size: *size,
                }))
            }
            $observed::StopSending(id, code) => {
                Some(abi::Frame::StopSending(abi::StopSendingFrame {
                    stream_id: *id,
                    error_code: *code,
                }))
            }
            $observed::Crypto(offset, length) => Some(abi::Frame::Crypto(abi::CryptoFrame {
                offset: *offset,
                length: *length,
            })),
            $observed::NewToken(token) => Some(abi::Frame::NewToken(token.frame_bytes())),
            $observed::Stream(id, offset, length, fin) => {
                Some(abi::Frame::Stream(abi::StreamFrame {
                    stream_id: *id,
                    offset: *offset,
                    length: *length,
                    fin: *fin,
                }))
            }
            $observed::MaxData(v) => Some(abi::Frame::MaxData(*v)),
            $observed::MaxStreamData(id, max) => {
                Some(abi::Frame::MaxStreamData(abi::MaxStreamDataFrame {
                    stream_id: *id,
                    maximum: *max,
                }))
            }
            $observed::MaxStreams(bidi, max) => Some(abi::Frame::MaxStreams(abi::StreamsFrame {
                bidirectional: *bidi,
                maximum: *max,
            })),
            $observed::DataBlocked(v) => Some(abi::Frame::DataBlocked(*v)),
            $observed::StreamDataBlocked(id, limit) => {
                Some(abi::Frame::StreamDataBlocked(abi::StreamDataBlockedFrame {
                    stream_id: *id,
                    limit: *limit,
                }))
            }
            $observed::StreamsBlocked(bidi, max) => {
                Some(abi::Frame::StreamsBlocked(abi::StreamsFrame {
                    bidirectional: *bidi,
                    maximum: *max,
                }))
            }
            $observed::NewConnectionId(seq, retire, cid, token) => {
                Some(abi::Frame::NewConnectionId(abi::NewConnectionIdFrame {
                    sequence: *seq,
                    retire_prior_to: *retire,
                    connection_id: cid.frame_bytes(),
                    stateless_reset_token: token.frame_bytes(),
                }))
            }
            $observed::RetireConnectionId(seq) => Some(abi::Frame::RetireConnectionId(*seq)),
            $observed::PathChallenge(d) => Some(abi::Frame::PathChallenge(*d)),
            $observed::PathResponse(d) => Some(abi::Frame::PathResponse(*d)),
            $observed::Close(application, code, ty, reason) => {
                Some(abi::Frame::ConnectionClose(abi::ConnectionCloseFrame {
                    application: *application,
                    error_code: *code,
                    frame_type: *ty,
                    reason: reason.frame_bytes(),
                }))
            }
            $observed::HandshakeDone => Some(abi::Frame::HandshakeDone),
            $observed::Datagram(len) => Some(abi::Frame::Datagram(*len)),
            _ => None,
        };
        frame
    }};
}

/// Every hook of the vocabulary (`hosts/README.md`), for an adapter's
/// `impl Extension` block: each forwards to the [`ConnectionPlugins`]
/// method of the same name through the adapter's [`AdapterExtension`],
/// which gives the stack's error and time types.
///
/// Name the stack's types as they are in scope: the hook context type, and
/// the `SendContext`, `SendPosition`, `ExtensionFrame` and `ObservedFrame`
/// of its patch.
///
/// ```text
/// impl Extension for QuinnPlugins {
///     corequic_adapter::extension_hooks!(
///         ExtensionContext<'_>, SendContext, SendPosition, ExtensionFrame, ObservedFrame
///     );
/// }
/// ```
#[macro_export]
macro_rules! extension_hooks {
    ($cx:ty, $send:ident, $position:ident, $frame:ident, $observed:ident) => {
        fn transport_parameters(&mut self) -> Vec<(u64, Vec<u8>)> {
            $crate::AdapterExtension::plugins_mut(self).transport_parameters()
        }

        fn decode_transport_parameter(
            &mut self,
            cx: &mut $cx,
            id: u64,
            value: &[u8],
        ) -> Result<(), <Self as $crate::AdapterExtension>::Error> {
            $crate::AdapterExtension::with_connection(self, cx, |plugins, stack| {
                plugins.decode_transport_parameter(stack, id, value)
            })
            .map_err(<Self as $crate::AdapterExtension>::parameter_refused)
        }

        fn wants_to_send(&mut self, cx: &mut $cx, ctx: &$send) -> bool {
            let slot = $crate::send_slot!(ctx, $position);
            $crate::AdapterExtension::with_connection(self, cx, |plugins, stack| {
                plugins.wants_to_send(stack, &slot)
            })
        }

        fn offers_frames_at(&self, position: $position) -> bool {
            $crate::AdapterExtension::plugins(self)
                .offers_frames_at($crate::abi_position!(position, $position))
        }

        fn write_frames(
            &mut self,
            cx: &mut $cx,
            ctx: &$send,
            buf: &mut Vec<u8>,
            frames: &mut Vec<$frame>,
        ) {
            let slot = $crate::send_slot!(ctx, $position);
            $crate::AdapterExtension::with_connection(self, cx, |plugins, stack| {
                plugins.write_frames(stack, &slot, buf, |f| {
                    frames.push($frame {
                        frame_type: f.frame_type,
                        tag: f.tag,
                        ack_eliciting: f.ack_eliciting,
                        in_flight: f.in_flight,
                    })
                })
            });
        }

        fn on_frames(&mut self, cx: &mut $cx, frames: &[$frame], acked: bool) {
            let frames = frames.iter().map(|f| (f.frame_type, f.tag));
            $crate::AdapterExtension::with_connection(self, cx, |plugins, stack| {
                plugins.on_frames(stack, frames, acked)
            });
        }

        fn process_frame(
            &mut self,
            cx: &mut $cx,
            frame_type: u64,
            payload: &[u8],
            packet_number: u64,
        ) -> Result<usize, <Self as $crate::AdapterExtension>::Error> {
            $crate::AdapterExtension::with_connection(self, cx, |plugins, stack| {
                plugins.process_frame(stack, frame_type, payload, packet_number)
            })
            .map_err(<Self as $crate::AdapterExtension>::frame_refused)
        }

        fn observes_frame(&mut self, frame_type: u64) -> bool {
            $crate::AdapterExtension::plugins_mut(self).observes_frame(frame_type)
        }

        fn observe_frame(
            &mut self,
            cx: &mut $cx,
            frame: &$observed,
            after: bool,
            packet_number: u64,
        ) {
            let frame = $crate::observed_frame_to_abi!(
                $observed,
                frame,
                $crate::AdapterExtension::plugins_mut(self).take_ack_ranges()
            );
            $crate::AdapterExtension::with_connection(self, cx, |plugins, stack| {
                plugins.observe_frame(stack, frame, after, packet_number)
            });
        }

        fn next_timeout(&self) -> Option<<Self as $crate::AdapterExtension>::Time> {
            let ns = $crate::AdapterExtension::plugins(self).next_timeout()?;
            $crate::AdapterExtension::stack_time(self, ns)
        }

        fn on_timeout(&mut self, cx: &mut $cx) {
            $crate::AdapterExtension::with_connection(self, cx, |plugins, stack| {
                plugins.on_timeout(stack)
            });
        }

        fn sending_halted(&self) -> bool {
            $crate::AdapterExtension::plugins(self).sending_halted()
        }

        fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
            self
        }
    };
}

/// A stack's `SendPosition` (named `$position`, with the vocabulary's
/// variants) as the ABI's.
#[doc(hidden)]
#[macro_export]
macro_rules! abi_position {
    ($value:expr, $position:ident) => {
        match $value {
            $position::First => $crate::__abi::SendPosition::First,
            $position::AfterAck => $crate::__abi::SendPosition::AfterAck,
            $position::End => $crate::__abi::SendPosition::End,
        }
    };
}

/// A [`SendSlot`] from a stack's `SendContext` (every patch declares the
/// same fields, and a `SendPosition` with the same variants).
#[macro_export]
macro_rules! send_slot {
    ($ctx:expr, $position:ident) => {{
        let ctx = $ctx;
        $crate::SendSlot {
            packet_number: ctx.packet_number,
            position: $crate::abi_position!(ctx.position, $position),
            room: ctx.room,
            in_flight: ctx.in_flight,
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;
    use corequic_runtime::{HostConnection, RuntimeConfig};

    /// A stack connection that records what the core asked of it.
    #[derive(Default)]
    struct FakeStack {
        /// How often the core read the time.
        time_reads: std::cell::Cell<u32>,
        pings: u32,
        closes: Vec<(u64, String)>,
        window: Option<u64>,
        /// What the stack's setters answer.
        applies: bool,
    }

    impl StackConnection for FakeStack {
        fn now(&self) -> u64 {
            self.time_reads.set(self.time_reads.get() + 1);
            42
        }
        fn get_field(&mut self, field: FieldRef) -> Result<PluginVal, abi::Error> {
            match field.id {
                FieldId::CongestionWindow => Ok(PluginVal::U64(self.window.unwrap_or(0))),
                id => Err(abi::Error::NotFound(id.name().into())),
            }
        }
        fn set_congestion_window(&mut self, bytes: u64) -> Result<bool, abi::Error> {
            if self.applies {
                self.window = Some(bytes);
            }
            Ok(self.applies)
        }
        fn set_ssthresh(&mut self, _bytes: Option<u64>) -> Result<bool, abi::Error> {
            Ok(self.applies)
        }
        fn set_flow_limit(&mut self, _field: FieldId, _max: u64) -> Result<bool, abi::Error> {
            Ok(self.applies)
        }
        fn ping(&mut self) -> Result<(), abi::Error> {
            self.pings += 1;
            Ok(())
        }
        fn close(&mut self, error_code: u64, reason: &str) {
            self.closes.push((error_code, reason.into()));
        }
    }

    fn field(id: FieldId) -> FieldRef {
        FieldRef { id, space: None }
    }

    fn info() -> ConnectionInfo {
        ConnectionInfo {
            is_server: true,
            local: None,
            remote: "192.0.2.1:443".parse().expect("address"),
        }
    }

    /// A connection with no plugins: the core's own behaviour.
    fn plugins() -> ConnectionPlugins {
        let runtime =
            Runtime::new(RuntimeConfig::default(), capabilities(Vec::new())).expect("runtime");
        ConnectionPlugins::new("test", &runtime, &[], info(), None).expect("attached")
    }

    #[test]
    fn a_window_above_the_stacks_maximum_is_refused_not_clamped() {
        assert_eq!(congestion_window(4096, 1 << 20, "stack"), Ok(4096));
        assert_eq!(congestion_window(1 << 20, 1 << 20, "stack"), Ok(1 << 20));
        let refused = congestion_window((1 << 20) + 1, 1 << 20, "stack");
        assert!(
            matches!(&refused, Err(abi::Error::InvalidArgument(m)) if m.contains("stack")),
            "{refused:?}"
        );
        assert!(congestion_window(u64::MAX, usize::MAX, "stack").is_ok() == (usize::BITS >= 64));
    }

    /// The send hooks run for most packets; with no frame registered they
    /// neither read the time nor call into the plugins.
    #[test]
    fn send_hooks_with_nothing_registered_cost_no_time_read() {
        let mut plugins = plugins();
        let mut stack = FakeStack::default();
        let mut buf = Vec::new();
        for position in [
            SendPosition::First,
            SendPosition::AfterAck,
            SendPosition::End,
        ] {
            let slot = SendSlot {
                packet_number: 7,
                position,
                room: 1200,
                in_flight: true,
            };
            assert!(!plugins.wants_to_send(&mut stack, &slot));
            plugins.write_frames(&mut stack, &slot, &mut buf, |f| panic!("wrote {f:?}"));
        }
        assert!(buf.is_empty());
        assert_eq!(stack.time_reads.get(), 0);
    }

    #[test]
    fn fields_without_a_space_read_the_application_space() {
        assert_eq!(space_index(Some(PnSpace::Initial)), 0);
        assert_eq!(space_index(Some(PnSpace::Handshake)), 1);
        assert_eq!(space_index(Some(PnSpace::ApplicationData)), 2);
        assert_eq!(space_index(None), 2);
    }

    #[test]
    fn before_the_connection_the_core_answers_what_it_knows() {
        let mut plugins = plugins();
        let st = &mut plugins.state;
        let mut view = View::<dyn StackConnection> {
            cx: None,
            st: &mut *st,
        };
        assert_eq!(
            view.get_field(field(FieldId::IsServer)),
            Ok(PluginVal::Bool(true))
        );
        assert_eq!(
            view.get_field(field(FieldId::PeerAddress)),
            Ok(PluginVal::from(info().remote))
        );
        assert!(matches!(
            view.get_field(field(FieldId::LocalAddress)),
            Err(abi::Error::NotFound(_))
        ));
        assert!(matches!(
            view.get_field(field(FieldId::CongestionWindow)),
            Err(abi::Error::NotFound(_))
        ));
        assert!(matches!(
            view.set_field(field(FieldId::CongestionWindow), PluginVal::U64(1)),
            Err(abi::Error::NotFound(_))
        ));
        // sending-halted is the core's own state, writable in every phase.
        assert_eq!(
            view.set_field(field(FieldId::SendingHalted), PluginVal::Bool(true)),
            Ok(())
        );
        assert!(st.sending_halted);
    }

    #[test]
    fn addresses_the_stack_does_not_show_are_those_the_connection_was_created_with() {
        let mut plugins = plugins();
        let mut stack = FakeStack::default();
        let mut view = View {
            cx: Some(&mut stack),
            st: &mut plugins.state,
        };
        assert_eq!(
            view.get_field(field(FieldId::PeerAddress)),
            Ok(PluginVal::from(info().remote))
        );
        assert!(matches!(
            view.get_field(field(FieldId::LocalAddress)),
            Err(abi::Error::NotFound(_))
        ));
        let local: SocketAddr = "192.0.2.2:4433".parse().expect("address");
        view.st.info.local = Some(local);
        assert_eq!(
            view.get_field(field(FieldId::LocalAddress)),
            Ok(PluginVal::from(local))
        );
        let path = Some((local, info().remote));
        assert_eq!(
            path_address(FieldId::PeerAddress, path),
            Ok(PluginVal::from(info().remote))
        );
        assert!(matches!(
            path_address(FieldId::LocalAddress, None),
            Err(abi::Error::NotFound(_))
        ));
    }

    #[test]
    fn the_report_goes_to_its_sink_when_the_connection_is_dropped() {
        let runtime =
            Runtime::new(RuntimeConfig::default(), capabilities(Vec::new())).expect("runtime");
        let reports = Arc::new(Mutex::new(Vec::new()));
        let sink = reports.clone();
        let local: SocketAddr = "192.0.2.2:4433".parse().expect("address");
        let attachment = Attachment::new(Arc::new(runtime), Vec::new())
            .local_address(local)
            .report_sink(Arc::new(move |r| sink.lock().expect("lock").push(r)));
        let plugins = attachment.attach("test", info()).expect("attached");
        assert_eq!(plugins.info().local, Some(local));
        assert!(reports.lock().expect("lock").is_empty());
        drop(plugins);
        assert_eq!(reports.lock().expect("lock").len(), 1);
    }

    #[test]
    fn writes_the_stack_cannot_apply_are_refused_with_the_spec_errors() {
        let mut plugins = plugins();
        let st = &mut plugins.state;
        let mut stack = FakeStack::default();
        let mut view = View {
            cx: Some(&mut stack),
            st: &mut *st,
        };
        assert!(matches!(
            view.set_field(field(FieldId::CongestionWindow), PluginVal::U64(10_000)),
            Err(abi::Error::Unsupported(_))
        ));
        assert_eq!(
            view.set_field(field(FieldId::MaxRxData), PluginVal::U64(5)),
            Err(abi::flow_limit_refused(FieldId::MaxRxData, 5))
        );
        let mut stack = FakeStack {
            applies: true,
            ..FakeStack::default()
        };
        let mut view = View {
            cx: Some(&mut stack),
            st: &mut *st,
        };
        assert_eq!(
            view.set_field(field(FieldId::CongestionWindow), PluginVal::U64(10_000)),
            Ok(())
        );
        assert_eq!(
            view.get_field(field(FieldId::CongestionWindow)),
            Ok(PluginVal::U64(10_000))
        );
        assert_eq!(
            view.set_field(field(FieldId::Ssthresh), PluginVal::None),
            Ok(())
        );
    }

    #[test]
    fn a_ping_asked_for_before_the_connection_goes_out_at_the_next_hook() {
        let mut plugins = plugins();
        assert!(
            !plugins.offers_frames_at(SendPosition::End),
            "no plugin frame"
        );
        let mut view = View::<dyn StackConnection> {
            cx: None,
            st: &mut plugins.state,
        };
        assert_eq!(view.send_frame(Frame::Ping), Ok(()));
        // The stack calls `write_frames`, which sends it.
        assert!(plugins.offers_frames_at(SendPosition::End));
        let mut stack = FakeStack::default();
        plugins.on_timeout(&mut stack);
        assert_eq!(stack.pings, 1);
        plugins.on_timeout(&mut stack);
        assert_eq!(stack.pings, 1, "sent once");
    }

    #[test]
    fn path_challenges_go_first_in_in_flight_packets_only() {
        let mut plugins = plugins();
        let mut view = View::<dyn StackConnection> {
            cx: None,
            st: &mut plugins.state,
        };
        assert_eq!(view.send_frame(Frame::PathChallenge(7)), Ok(()));
        assert!(matches!(
            view.send_frame(Frame::MaxData(1)),
            Err(abi::Error::Unsupported(_))
        ));
        // The stack calls `write_frames` at FIRST for it, and only there.
        assert!(plugins.offers_frames_at(SendPosition::First));
        assert!(!plugins.offers_frames_at(SendPosition::AfterAck));
        let mut stack = FakeStack::default();
        let slot = |position, in_flight| SendSlot {
            packet_number: 1,
            position,
            room: 100,
            in_flight,
        };
        let (mut buf, mut sent) = (Vec::new(), Vec::new());
        for s in [
            slot(SendPosition::First, false),
            slot(SendPosition::End, true),
        ] {
            assert!(plugins.wants_to_send(&mut stack, &s));
            plugins.write_frames(&mut stack, &s, &mut buf, |f| sent.push(f));
            assert!(buf.is_empty(), "not in this packet");
        }
        plugins.write_frames(
            &mut stack,
            &slot(SendPosition::First, true),
            &mut buf,
            |f| sent.push(f),
        );
        assert_eq!(buf, [0x1a, 0, 0, 0, 0, 0, 0, 0, 7]);
        assert!(!plugins.offers_frames_at(SendPosition::First), "written");
        assert_eq!(
            sent,
            [SentFrame {
                frame_type: PATH_CHALLENGE,
                tag: 7,
                ack_eliciting: true,
                in_flight: true,
            }]
        );
        // Its fate is the stack's: it is not a plugin frame.
        plugins.on_frames(&mut stack, [(PATH_CHALLENGE, 7), (0xbd, 1)], true);
        plugins.on_frames(&mut stack, [(0xbd, 2)], false);
        assert_eq!(plugins.frame_counts(PATH_CHALLENGE), FrameCounts::default());
        let bdp = plugins.frame_counts(0xbd);
        assert_eq!((bdp.acked, bdp.lost), (1, 1));
    }

    /// The variants every hook patch declares.
    #[allow(dead_code)]
    enum ObservedFrame {
        Ping,
        Ack(
            u64,
            std::time::Duration,
            Vec<(u64, u64)>,
            Option<(u64, u64, u64)>,
        ),
        ResetStream(u64, u64, u64),
        StopSending(u64, u64),
        Crypto(u64, u64),
        NewToken(Vec<u8>),
        Stream(u64, u64, u64, bool),
        MaxData(u64),
        MaxStreamData(u64, u64),
        MaxStreams(bool, u64),
        DataBlocked(u64),
        StreamDataBlocked(u64, u64),
        StreamsBlocked(bool, u64),
        NewConnectionId(u64, u64, Vec<u8>, u128),
        RetireConnectionId(u64),
        PathChallenge(u64),
        PathResponse(u64),
        Close(bool, u64, Option<u64>, bytes::Bytes),
        HandshakeDone,
        Datagram(u64),
        Other(u64),
    }

    /// The ranges of one ACK frame observed never leak into the next one's,
    /// although both are built in the buffer the hook takes back.
    #[test]
    fn an_ack_frames_ranges_are_its_own_in_the_reused_buffer() {
        let mut plugins = plugins();
        let mut stack = FakeStack::default();
        let delay = std::time::Duration::ZERO;
        let mut seen = Vec::new();
        for observed in [
            ObservedFrame::Ack(20, delay, vec![(12, 20), (0, 9)], None),
            ObservedFrame::Ack(30, delay, vec![(25, 30)], None),
        ] {
            let frame = observed_frame_to_abi!(ObservedFrame, &observed, plugins.take_ack_ranges());
            let Some(Frame::Ack(ack)) = &frame else {
                panic!("an ACK");
            };
            seen.push(ack.ranges.clone());
            plugins.observe_frame(&mut stack, frame, true, 1);
        }
        assert_eq!(seen, [vec![(12, 20), (0, 9)], vec![(25, 30)]]);
        assert!(plugins.take_ack_ranges().is_empty());
    }

    #[test]
    fn observed_frames_convert_to_abi_frames() {
        let ack = ObservedFrame::Ack(
            9,
            std::time::Duration::from_micros(25),
            vec![(0, 9)],
            Some((1, 2, 3)),
        );
        assert_eq!(
            observed_frame_to_abi!(ObservedFrame, &ack),
            Some(Frame::Ack(abi::AckFrame {
                largest_acknowledged: 9,
                ack_delay: 25_000,
                ranges: vec![(0, 9)],
                ecn: Some(abi::EcnCounts {
                    ect0: 1,
                    ect1: 2,
                    ce: 3
                }),
            }))
        );
        let cid = ObservedFrame::NewConnectionId(3, 1, vec![0xaa; 8], 0x0102);
        let Some(Frame::NewConnectionId(cid)) = observed_frame_to_abi!(ObservedFrame, &cid) else {
            panic!("a NEW_CONNECTION_ID");
        };
        assert_eq!(cid.stateless_reset_token.len(), 16);
        assert_eq!(cid.stateless_reset_token[14..], [1, 2]);
        let close = ObservedFrame::Close(true, 7, None, bytes::Bytes::from_static(b"bye"));
        assert!(matches!(
            observed_frame_to_abi!(ObservedFrame, &close),
            Some(Frame::ConnectionClose(c)) if c.reason == b"bye" && c.application
        ));
        assert_eq!(
            observed_frame_to_abi!(ObservedFrame, &ObservedFrame::Other(0x99)),
            None
        );
    }
}
