//! `core-quic:plugin@0.1.0`: the bindings of `releases/0.1.0/wit` and their
//! conversions to and from the host's model ([`crate::abi`]).
//!
//! The host imports are thin conversions onto [`PluginState`]'s
//! version-independent host API; the exports are called through [`Guest`].
//! Conversions move lists and strings, so they cost no allocation, except
//! where a routine lends a value the host keeps (`process-frame`'s frame,
//! `plugin-control`'s arguments): that is copied for the call, into buffers
//! kept from call to call for ACK ranges and the arguments themselves.

use crate::abi as m;
use crate::state::{InBufRep, OutBufRep, PluginState};
use wasmtime::Store;
use wasmtime::component::{HasSelf, Linker, Resource};

#[allow(missing_docs, clippy::all)]
mod generated {
    wasmtime::component::bindgen!({
        path: "../../releases/0.1.0/wit",
        world: "plugin",
        with: {
            "core-quic:plugin/host.out-buf": crate::state::OutBufRep,
            "core-quic:plugin/host.in-buf": crate::state::InBufRep,
        },
    });
}

use generated::core_quic::plugin::host;
use generated::core_quic::plugin::types as t;
pub(crate) use generated::{Plugin, PluginPre};

/// A routine's outcome with the generated error type.
type Call<T> = wasmtime::Result<Result<T, t::Error>>;

/// Add the 0.1 host imports to `linker`.
pub(crate) fn add_to_linker(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    Plugin::add_to_linker::<PluginState, HasSelf<PluginState>>(linker, |s| s)
}

/// Which of 0.1.0's three send routines (prepare-frame, frame-wire-len,
/// write-frame) a plugin binds at each anchor, for each frame type: 0.2
/// merged them into one `write-frame`, which a 0.1.0 plugin is asked as
/// the three it bound (specification §2.2).
#[derive(Default)]
struct LegacySend(Vec<(u64, m::Anchor, m::Routine)>);

impl LegacySend {
    fn of(manifest: Option<&m::PluginManifest>) -> LegacySend {
        let send = [
            m::Routine::PrepareFrame,
            m::Routine::FrameWireLen,
            m::Routine::WriteFrame,
        ];
        LegacySend(
            manifest
                .map(|m| &m.bindings[..])
                .unwrap_or_default()
                .iter()
                .filter(|b| send.contains(&b.routine))
                .map(|b| (b.param, b.anchor, b.routine))
                .collect(),
        )
    }

    fn binds(&self, frame_type: u64, anchor: m::Anchor, routine: m::Routine) -> bool {
        self.0.contains(&(frame_type, anchor, routine))
    }
}

/// One instance of a 0.1 plugin.
pub(crate) struct Guest {
    bindings: Plugin,
    legacy_send: LegacySend,
    /// Reused for `plugin-control`'s arguments, so calls with arguments that
    /// own no heap memory do not allocate.
    args: Vec<t::PluginVal>,
    /// Reused for the ranges of the ACK frames lent to `process-frame` and
    /// `log-frame` (observers of ACK see one per packet received).
    ack_ranges: Vec<(u64, u64)>,
}

/// The inner result in the model's error type.
#[inline]
fn model<T, U: From<T>>(r: Call<T>) -> wasmtime::Result<Result<U, m::Error>> {
    r.map(|r| r.map(U::from).map_err(m::Error::from))
}

impl Guest {
    version_independent_exports!();

    /// The instance's routines.
    #[inline]
    fn routines(&self) -> &generated::exports::core_quic::plugin::routines::Guest {
        self.bindings.core_quic_plugin_routines()
    }

    #[inline]
    pub(crate) fn new(bindings: Plugin, manifest: Option<&m::PluginManifest>) -> Guest {
        Guest {
            bindings,
            legacy_send: LegacySend::of(manifest),
            args: Vec::new(),
            ack_ranges: Vec::new(),
        }
    }

    /// A frame the host keeps, as the generated type: copied, with an ACK
    /// frame's ranges in the reused buffer (see [`Self::reclaim_frame`]).
    #[inline]
    fn lend_frame(&mut self, frame: &m::Frame) -> t::Frame {
        match frame {
            m::Frame::Ack(ack) => {
                let mut ranges = std::mem::take(&mut self.ack_ranges);
                ranges.extend_from_slice(&ack.ranges);
                t::Frame::Ack(t::AckFrame {
                    largest_acknowledged: ack.largest_acknowledged,
                    ack_delay: ack.ack_delay,
                    ranges,
                    ecn: ack.ecn.map(Into::into),
                })
            }
            other => t::Frame::from(other),
        }
    }

    /// Takes back the buffer a lent ACK frame's ranges used.
    #[inline]
    fn reclaim_frame(&mut self, frame: t::Frame) {
        if let t::Frame::Ack(ack) = frame {
            self.ack_ranges = ack.ranges;
            self.ack_ranges.clear();
        }
    }

    #[inline]
    pub(crate) fn manifest(
        &mut self,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<Result<m::PluginManifest, super::UnknownIds>> {
        let routines = self.routines();
        routines
            .call_manifest(store)
            .map(|m| Ok(m::PluginManifest::from(m)))
    }

    /// 0.2's `write-frame` as 0.1.0's three send routines, each called only
    /// if the plugin binds it at `anchor` (CQ-VER-14, CQ-VER-15). The
    /// DEFINE: prepare-frame, then frame-wire-len (1 to the room), then
    /// write-frame into a buffer of exactly that length; a frame of another
    /// type, a length out of range or a write of another length returns the
    /// tag with nothing written, which the caller refuses as an invalid
    /// result. A BEFORE observer is asked
    /// prepare-frame; an AFTER observer prepare-frame, then, if the DEFINE
    /// wrote `defined`, frame-wire-len and write-frame (into a scratch
    /// buffer of the frame's length).
    pub(crate) fn write_frame(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: m::Anchor,
        frame_type: u64,
        ctx: m::SendContext,
        defined: Option<(m::ExtFrame, u64)>,
    ) -> super::Call<Option<u64>> {
        use m::Routine::{FrameWireLen, PrepareFrame, WriteFrame};
        let binds = |g: &Self, r| g.legacy_send.binds(frame_type, anchor, r);
        let prepared = match binds(self, PrepareFrame) {
            true => match self.prepare_frame(store, anchor, frame_type, ctx)? {
                Ok(frame) => frame,
                Err(e) => return Ok(Err(e)),
            },
            false => None,
        };
        // An invalid result of the three (CQ-VER-14) is reported as a tag with
        // nothing written, which the caller refuses as an invalid result.
        let invalid = |store: &mut Store<PluginState>, frame: m::ExtFrame| {
            store.data_mut().out.clear();
            Ok(Ok(Some(frame.tag)))
        };
        let frame = match anchor {
            m::Anchor::Define => match prepared {
                Some(frame) if frame.frame_type == frame_type => frame,
                Some(frame) => return invalid(store, frame),
                None => return Ok(Ok(None)),
            },
            m::Anchor::Before => return Ok(Ok(None)),
            m::Anchor::After => match defined {
                Some((frame, _)) => frame,
                None => return Ok(Ok(None)),
            },
        };
        let len = match binds(self, FrameWireLen) {
            true => match self.frame_wire_len(store, anchor, frame)? {
                Ok(len) => len,
                Err(e) => return Ok(Err(e)),
            },
            false if anchor == m::Anchor::After => 0,
            false => return Ok(Ok(None)),
        };
        if !binds(self, WriteFrame) {
            return Ok(Ok(None));
        }
        let capacity = match anchor {
            m::Anchor::After => defined.map_or(0, |(_, len)| len),
            _ if len == 0 || len > ctx.room => return invalid(store, frame),
            _ => len,
        };
        let data = store.data_mut();
        data.out.clear();
        data.out_capacity = usize::try_from(capacity).unwrap_or(usize::MAX);
        if let Err(e) = self.write_frame_v0_1(store, anchor, frame)? {
            return Ok(Err(e));
        }
        if anchor == m::Anchor::Define && store.data().out.len() as u64 != len {
            return invalid(store, frame);
        }
        Ok(Ok(Some(frame.tag)))
    }

    #[inline]
    fn prepare_frame(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: m::Anchor,
        frame_type: u64,
        ctx: m::SendContext,
    ) -> super::Call<Option<m::ExtFrame>> {
        let routines = self.routines();
        routines
            .call_prepare_frame(store, anchor.into(), frame_type, ctx.into())
            .map(|r| r.map(|f| f.map(m::ExtFrame::from)).map_err(m::Error::from))
    }

    #[inline]
    fn frame_wire_len(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: m::Anchor,
        frame: m::ExtFrame,
    ) -> super::Call<u64> {
        let routines = self.routines();
        model(routines.call_frame_wire_len(store, anchor.into(), frame.into()))
    }

    #[inline]
    fn write_frame_v0_1(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: m::Anchor,
        frame: m::ExtFrame,
    ) -> super::Call<()> {
        let out = Resource::<OutBufRep>::new_borrow(0);
        let routines = self.routines();
        model(routines.call_write_frame(store, anchor.into(), frame.into(), out))
    }

    #[inline]
    pub(crate) fn process_frame(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: m::Anchor,
        frame: &m::Frame,
        ctx: m::RxContext,
    ) -> super::Call<()> {
        let frame = self.lend_frame(frame);
        let routines = self.routines();
        let r = routines.call_process_frame(store, anchor.into(), &frame, ctx.into());
        self.reclaim_frame(frame);
        model(r)
    }

    #[inline]
    pub(crate) fn log_frame(
        &mut self,
        store: &mut Store<PluginState>,
        anchor: m::Anchor,
        frame: &m::Frame,
    ) -> super::Call<String> {
        let frame = self.lend_frame(frame);
        let routines = self.routines();
        let r = routines.call_log_frame(store, anchor.into(), &frame);
        self.reclaim_frame(frame);
        model(r)
    }

    #[inline]
    pub(crate) fn plugin_control(
        &mut self,
        store: &mut Store<PluginState>,
        id: u64,
        args: &[m::PluginVal],
    ) -> super::Call<Vec<m::PluginVal>> {
        // `args` is left empty after each call, and most calls pass none.
        if !args.is_empty() {
            self.args.extend(args.iter().map(t::PluginVal::from));
        }
        let routines = self.routines();
        let r = routines.call_plugin_control(store, id, &self.args);
        if !self.args.is_empty() {
            self.args.clear();
        }
        r.map(|r| r.map(vals_into_model).map_err(m::Error::from))
    }
}

#[inline]
fn vals_into_model(vals: Vec<t::PluginVal>) -> Vec<m::PluginVal> {
    // Most results are empty; the conversion in place is not free even then.
    if vals.is_empty() {
        return Vec::new();
    }
    vals.into_iter().map(m::PluginVal::from).collect()
}

#[inline]
fn vals_from_model(vals: Vec<m::PluginVal>) -> Vec<t::PluginVal> {
    vals.into_iter().map(t::PluginVal::from).collect()
}

// The host imports: conversions onto `PluginState`'s host API.

buffer_resources!(host, t);

impl host::Host for PluginState {
    version_independent_host_calls!(t);

    #[inline]
    fn get_field(&mut self, field: t::FieldRef) -> Result<t::PluginVal, t::Error> {
        Ok(PluginState::get_field(self, field.into())?.into())
    }

    #[inline]
    fn get_fields(&mut self, fields: Vec<t::FieldRef>) -> Result<Vec<t::PluginVal>, t::Error> {
        let fields = fields.into_iter().map(m::FieldRef::from);
        Ok(vals_from_model(PluginState::get_fields(self, fields)?))
    }

    #[inline]
    fn set_field(&mut self, field: t::FieldRef, value: t::PluginVal) -> Result<(), t::Error> {
        Ok(PluginState::set_field(self, field.into(), value.into())?)
    }

    #[inline]
    fn log(
        &mut self,
        level: t::LogLevel,
        message: String,
        fields: Vec<(String, t::PluginVal)>,
    ) -> Result<(), t::Error> {
        let fields = fields.into_iter().map(|(k, v)| (k, v.into())).collect();
        PluginState::log(self, level.into(), message, Ok(fields))?;
        Ok(())
    }

    #[inline]
    fn send_frame(&mut self, frame: t::Frame) -> Result<(), t::Error> {
        Ok(PluginState::send_frame(self, Ok(frame.into()))?)
    }

    #[inline]
    fn call_plugin_control(
        &mut self,
        id: u64,
        args: Vec<t::PluginVal>,
    ) -> Result<Vec<t::PluginVal>, t::Error> {
        let args = vals_into_model(args);
        Ok(vals_from_model(PluginState::call_plugin_control(
            self, id, &args,
        )?))
    }
}

// Conversions between the generated types and the model.

same_cases! {
    PacketType { Initial, ZeroRtt, Handshake, OneRtt, Retry, VersionNegotiation }
    PnSpace { Initial, Handshake, ApplicationData }
    Anchor { Define, Before, After }
    Permission { Timers, Randomness, Logging, Registration, SendFrames, PluginControl }
    SendPosition { First, AfterAck, End }
    FrameOutcome { Acked, Lost }
    LogLevel { Error, Warn, Info, Debug, Trace }
}

/// An enum of 0.1.0 whose cases are those of the model's enum `$ty` that
/// 0.1.0 has: a case a later release added has none in it, so a 0.1.0
/// plugin can never name it.
macro_rules! cases_of_0_1 {
    ($ty:ident { $($case:ident),* $(,)? }) => {
        impl From<t::$ty> for m::$ty {
            #[inline]
            fn from(v: t::$ty) -> Self {
                match v {
                    $(t::$ty::$case => m::$ty::$case,)*
                }
            }
        }

        // Only the tests go from the model back to 0.1.0's enum.
        #[cfg(test)]
        impl TryFrom<m::$ty> for t::$ty {
            type Error = m::$ty;

            /// The 0.1.0 case, or the value back if 0.1.0 has none.
            fn try_from(v: m::$ty) -> Result<Self, m::$ty> {
                match v {
                    $(m::$ty::$case => Ok(t::$ty::$case),)*
                    other => Err(other),
                }
            }
        }
    };
}

// The routines of 0.1.0: `observe-frames` (0.2.3) has no case.
cases_of_0_1!(Routine {
    WriteTransportParameter,
    DecodeTransportParameter,
    ShouldSendFrame,
    PrepareFrame,
    FrameWireLen,
    WriteFrame,
    OnFrameReserved,
    NotifyFrame,
    ParseFrame,
    ProcessFrame,
    LogFrame,
    PluginControl,
});

// The fields of identifiers 1 to 25, in identifier order (CQ-VER-11): the
// fields of 0.2.1 have no case.
cases_of_0_1!(FieldId {
    IsServer,
    Version,
    IsEstablished,
    MaxTxData,
    TxData,
    MaxRxData,
    RxData,
    MaxSendUdpPayload,
    LocalAddress,
    PeerAddress,
    IdleTimeout,
    SendingHalted,
    NextPacketNumber,
    LargestAcked,
    LargestReceived,
    LatestRtt,
    SmoothedRtt,
    MinRtt,
    Rttvar,
    MaxAckDelay,
    PtoCount,
    BytesInFlight,
    CongestionWindow,
    Ssthresh,
    MaxDatagramSize,
});

same_variants! {
    IpAddr { V4(a), V6(a) }
    Frame {
        Padding(x), Ping, Ack(x), ResetStream(x), StopSending(x), Crypto(x), NewToken(x),
        Stream(x), MaxData(x), MaxStreamData(x), MaxStreams(x), DataBlocked(x),
        StreamDataBlocked(x), StreamsBlocked(x), NewConnectionId(x), RetireConnectionId(x),
        PathChallenge(x), PathResponse(x), ConnectionClose(x), HandshakeDone, Datagram(x),
        Extension(x),
    }
}

impl From<m::Error> for t::Error {
    /// A kind 0.1.0 has no case for reaches a 0.1.0 plugin as `failed`,
    /// with the kind in the message (specification §2.2).
    #[inline]
    fn from(v: m::Error) -> Self {
        match v {
            m::Error::Denied(x) => t::Error::Denied(x),
            m::Error::Unsupported(x) => t::Error::Unsupported(x),
            m::Error::InvalidArgument(x) => t::Error::InvalidArgument(x),
            m::Error::BufferTooShort(x) => t::Error::BufferTooShort(x),
            m::Error::NotFound(x) => t::Error::NotFound(x),
            m::Error::Failed(x) => t::Error::Failed(x),
            m::Error::Plugin(x) => t::Error::Plugin(x),
            m::Error::Other { kind, message, .. } => {
                t::Error::Failed(format!("error of kind {kind}: {message}"))
            }
        }
    }
}

impl From<t::Error> for m::Error {
    #[inline]
    fn from(v: t::Error) -> Self {
        match v {
            t::Error::Denied(x) => m::Error::Denied(x),
            t::Error::Unsupported(x) => m::Error::Unsupported(x),
            t::Error::InvalidArgument(x) => m::Error::InvalidArgument(x),
            t::Error::BufferTooShort(x) => m::Error::BufferTooShort(x),
            t::Error::NotFound(x) => m::Error::NotFound(x),
            t::Error::Failed(x) => m::Error::Failed(x),
            t::Error::Plugin(x) => m::Error::Plugin(x),
        }
    }
}

/// A 0.1.0 binding names a routine of 0.1.0 (`cases_of_0_1!`).
impl From<t::Binding> for m::Binding {
    #[inline]
    fn from(v: t::Binding) -> Self {
        m::Binding {
            routine: v.routine.into(),
            anchor: v.anchor.into(),
            param: v.param,
        }
    }
}

same_fields! {
    SocketAddr { ip, port }
    ExtFrame { frame_type, tag }
    EcnCounts { ect0, ect1, ce }
    ResetStreamFrame { stream_id, error_code, final_size }
    StopSendingFrame { stream_id, error_code }
    CryptoFrame { offset, length }
    StreamFrame { stream_id, offset, length, fin }
    MaxStreamDataFrame { stream_id, maximum }
    StreamsFrame { bidirectional, maximum }
    StreamDataBlockedFrame { stream_id, limit }
    NewConnectionIdFrame { sequence, retire_prior_to, connection_id, stateless_reset_token }
    ConnectionCloseFrame { application, error_code, frame_type, reason }
    FrameRegistration { frame_type, position, ack_eliciting, in_flight }
    SendContext { packet_type, space, packet_number, position, room, now }
    RxContext { packet_type, space, packet_number, now }
    ParsedFrame { frame, consumed }
}

impl From<m::AckFrame> for t::AckFrame {
    #[inline]
    fn from(v: m::AckFrame) -> Self {
        t::AckFrame {
            largest_acknowledged: v.largest_acknowledged,
            ack_delay: v.ack_delay,
            ranges: v.ranges,
            ecn: v.ecn.map(Into::into),
        }
    }
}

impl From<t::AckFrame> for m::AckFrame {
    #[inline]
    fn from(v: t::AckFrame) -> Self {
        m::AckFrame {
            largest_acknowledged: v.largest_acknowledged,
            ack_delay: v.ack_delay,
            ranges: v.ranges,
            ecn: v.ecn.map(Into::into),
        }
    }
}

impl From<t::FieldRef> for m::FieldRef {
    #[inline]
    fn from(v: t::FieldRef) -> Self {
        m::FieldRef {
            id: v.id.into(),
            space: v.space.map(Into::into),
        }
    }
}

impl From<t::PluginManifest> for m::PluginManifest {
    #[inline]
    fn from(v: t::PluginManifest) -> Self {
        m::PluginManifest {
            name: v.name,
            version: v.version,
            abi_version: v.abi_version,
            bindings: v.bindings.into_iter().map(Into::into).collect(),
            reads: v.reads.into_iter().map(Into::into).collect(),
            writes: v.writes.into_iter().map(Into::into).collect(),
            permissions: v.permissions.into_iter().map(Into::into).collect(),
        }
    }
}

/// A frame the host keeps, lent to a routine: copied, since the generated
/// type owns its lists (only ACK ranges, tokens, connection ids and close
/// reasons allocate).
impl From<&m::Frame> for t::Frame {
    #[inline]
    fn from(v: &m::Frame) -> Self {
        v.clone().into()
    }
}

/// `plugin-val`, case by case. Written out rather than generated so that
/// the scalar cases, which are most values, inline into the loops over
/// argument and result lists; a frame, the largest case, converts out of line.
macro_rules! plugin_val {
    ($from:ident => $to:ident, $v:expr, $copy:expr, $frame:expr, |$x:ident| $own:expr) => {
        match $v {
            $from::PluginVal::None => $to::PluginVal::None,
            $from::PluginVal::Bool($x) => $to::PluginVal::Bool($copy($x)),
            $from::PluginVal::U32($x) => $to::PluginVal::U32($copy($x)),
            $from::PluginVal::U64($x) => $to::PluginVal::U64($copy($x)),
            $from::PluginVal::S64($x) => $to::PluginVal::S64($copy($x)),
            $from::PluginVal::F64($x) => $to::PluginVal::F64($copy($x)),
            $from::PluginVal::Duration($x) => $to::PluginVal::Duration($copy($x)),
            $from::PluginVal::Instant($x) => $to::PluginVal::Instant($copy($x)),
            $from::PluginVal::PacketType($x) => $to::PluginVal::PacketType($copy($x).into()),
            $from::PluginVal::PnSpace($x) => $to::PluginVal::PnSpace($copy($x).into()),
            $from::PluginVal::SocketAddr($x) => $to::PluginVal::SocketAddr($copy($x).into()),
            $from::PluginVal::Bytes($x) => $to::PluginVal::Bytes($own),
            $from::PluginVal::String($x) => $to::PluginVal::String($own),
            $from::PluginVal::Frame($x) => $to::PluginVal::Frame($frame($x)),
        }
    };
}

impl From<m::PluginVal> for t::PluginVal {
    #[inline]
    fn from(v: m::PluginVal) -> Self {
        #[inline(never)]
        fn frame(f: m::Frame) -> t::Frame {
            f.into()
        }
        plugin_val!(m => t, v, std::convert::identity, frame, |x| x)
    }
}

impl From<t::PluginVal> for m::PluginVal {
    #[inline]
    fn from(v: t::PluginVal) -> Self {
        #[inline(never)]
        fn frame(f: t::Frame) -> m::Frame {
            f.into()
        }
        plugin_val!(t => m, v, std::convert::identity, frame, |x| x)
    }
}

/// A value the host keeps, lent to a routine: copied.
impl From<&m::PluginVal> for t::PluginVal {
    #[inline]
    fn from(v: &m::PluginVal) -> Self {
        #[inline(never)]
        fn frame(f: &m::Frame) -> t::Frame {
            f.into()
        }
        plugin_val!(m => t, v, Clone::clone, frame, |x| x.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::{m, t};

    fn frames() -> Vec<m::Frame> {
        let ext = m::ExtFrame {
            frame_type: 0x3f5e,
            tag: 7,
        };
        vec![
            m::Frame::Padding(3),
            m::Frame::Ping,
            m::Frame::Ack(m::AckFrame {
                largest_acknowledged: 9,
                ack_delay: 25_000,
                ranges: vec![(7, 9), (1, 3)],
                ecn: Some(m::EcnCounts {
                    ect0: 1,
                    ect1: 2,
                    ce: 3,
                }),
            }),
            m::Frame::ResetStream(m::ResetStreamFrame {
                stream_id: 4,
                error_code: 5,
                final_size: 6,
            }),
            m::Frame::StopSending(m::StopSendingFrame {
                stream_id: 4,
                error_code: 5,
            }),
            m::Frame::Crypto(m::CryptoFrame {
                offset: 1,
                length: 2,
            }),
            m::Frame::NewToken(vec![1, 2, 3]),
            m::Frame::Stream(m::StreamFrame {
                stream_id: 8,
                offset: 0,
                length: 10,
                fin: true,
            }),
            m::Frame::MaxData(1 << 20),
            m::Frame::MaxStreamData(m::MaxStreamDataFrame {
                stream_id: 8,
                maximum: 100,
            }),
            m::Frame::MaxStreams(m::StreamsFrame {
                bidirectional: true,
                maximum: 10,
            }),
            m::Frame::DataBlocked(5),
            m::Frame::StreamDataBlocked(m::StreamDataBlockedFrame {
                stream_id: 8,
                limit: 100,
            }),
            m::Frame::StreamsBlocked(m::StreamsFrame {
                bidirectional: false,
                maximum: 3,
            }),
            m::Frame::NewConnectionId(m::NewConnectionIdFrame {
                sequence: 1,
                retire_prior_to: 0,
                connection_id: vec![0xab; 8],
                stateless_reset_token: vec![0xcd; 16],
            }),
            m::Frame::RetireConnectionId(1),
            m::Frame::PathChallenge(0x0102_0304_0506_0708),
            m::Frame::PathResponse(0x0807_0605_0403_0201),
            m::Frame::ConnectionClose(m::ConnectionCloseFrame {
                application: false,
                error_code: 0x0a,
                frame_type: Some(0x06),
                reason: b"bye".to_vec(),
            }),
            m::Frame::HandshakeDone,
            m::Frame::Datagram(1200),
            m::Frame::Extension(ext),
        ]
    }

    fn values() -> Vec<m::PluginVal> {
        let addr: std::net::SocketAddr = "[2001:db8::1]:4433".parse().unwrap();
        let mut values = vec![
            m::PluginVal::None,
            m::PluginVal::Bool(true),
            m::PluginVal::U32(7),
            m::PluginVal::U64(u64::MAX),
            m::PluginVal::S64(-42),
            m::PluginVal::F64(0.5),
            m::PluginVal::Bytes(vec![1, 2]),
            m::PluginVal::String("text".into()),
            m::PluginVal::Duration(1_000),
            m::PluginVal::Instant(2_000),
            m::PluginVal::from(addr),
            m::PluginVal::from("192.0.2.1:443".parse::<std::net::SocketAddr>().unwrap()),
            m::PluginVal::PacketType(m::PacketType::ZeroRtt),
            m::PluginVal::PnSpace(m::PnSpace::ApplicationData),
        ];
        values.extend(frames().into_iter().map(m::PluginVal::Frame));
        values
    }

    fn errors() -> Vec<m::Error> {
        vec![
            m::Error::Denied("no".into()),
            m::Error::Unsupported("field".into()),
            m::Error::InvalidArgument("arg".into()),
            m::Error::BufferTooShort(12),
            m::Error::NotFound("timer 3".into()),
            m::Error::Failed("trap".into()),
            m::Error::Plugin(99),
        ]
    }

    /// Every value converts to the generated type and back unchanged, and
    /// prints (`Debug`, and `Display` for errors) as the bindings print it.
    #[test]
    fn values_round_trip_and_print_as_the_bindings_do() {
        for v in values() {
            let g = t::PluginVal::from(&v);
            assert_eq!(format!("{v:?}"), format!("{g:?}"));
            assert_eq!(m::PluginVal::from(g), v);
        }
        for e in errors() {
            let g = t::Error::from(e.clone());
            assert_eq!(format!("{e:?}"), format!("{g:?}"));
            assert_eq!(e.to_string(), g.to_string());
            assert_eq!(m::Error::from(g), e);
        }
        let manifest = t::PluginManifest {
            name: "p".into(),
            version: "1.0.0".into(),
            abi_version: "0.1.0".into(),
            bindings: vec![t::Binding {
                routine: t::Routine::PluginControl,
                anchor: t::Anchor::Define,
                param: 3,
            }],
            reads: vec![t::FieldId::LargestAcked],
            writes: vec![t::FieldId::Ssthresh],
            permissions: vec![t::Permission::SendFrames],
        };
        let printed = format!("{manifest:?}");
        assert_eq!(format!("{:?}", m::PluginManifest::from(manifest)), printed);
        let ctx = m::SendContext {
            packet_type: m::PacketType::OneRtt,
            space: m::PnSpace::ApplicationData,
            packet_number: 5,
            position: m::SendPosition::AfterAck,
            room: 1200,
            now: 9,
        };
        assert_eq!(
            format!("{ctx:?}"),
            format!("{:?}", t::SendContext::from(ctx))
        );
        let reg = m::FrameRegistration {
            frame_type: 0x42,
            position: m::SendPosition::End,
            ack_eliciting: true,
            in_flight: false,
        };
        assert_eq!(
            format!("{reg:?}"),
            format!("{:?}", t::FrameRegistration::from(reg))
        );
        let field = m::FieldRef {
            id: m::FieldId::NextPacketNumber,
            space: Some(m::PnSpace::Handshake),
        };
        let old = t::FieldRef {
            id: t::FieldId::NextPacketNumber,
            space: Some(t::PnSpace::Handshake),
        };
        assert_eq!(m::FieldRef::from(old), field);
    }

    /// 0.1.0's enums map to the registry identifiers of 0.2 as the
    /// specification says (§2.2): field and permission case N is
    /// identifier N + 1; every routine keeps its name.
    #[test]
    fn enums_map_to_the_registry_identifiers() {
        for (n, f) in m::FieldId::ALL.into_iter().enumerate() {
            match t::FieldId::try_from(f) {
                Ok(old) => {
                    assert_eq!(old as u32 + 1, f.id());
                    assert_eq!(m::FieldId::from(old), f);
                    assert_eq!(format!("{f:?}"), format!("{old:?}"));
                }
                // Only the fields a later release added have no 0.1.0 case.
                Err(_) => assert!(n >= m::FieldId::SINCE_0_2_0, "{f:?}"),
            }
        }
        for r in m::Routine::ALL.into_iter().chain(m::Routine::LEGACY) {
            match t::Routine::try_from(r) {
                Ok(old) => {
                    assert_eq!(m::Routine::from(old), r);
                    assert_eq!(format!("{r:?}"), format!("{old:?}"));
                }
                // Only the routines reached through call-routine have no
                // 0.1.0 case.
                Err(_) => assert!(r.through_call_routine(), "{r:?}"),
            }
        }
        for p in m::Permission::ALL {
            assert_eq!(t::Permission::from(p) as u32 + 1, p.id());
        }
        for a in m::Anchor::ALL {
            assert_eq!(m::Anchor::from(t::Anchor::from(a)), a);
        }
    }
}
