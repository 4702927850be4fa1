//! The conformance kit's API probe. It runs on both endpoints of a
//! connection (it negotiates transport parameter 0x6171 and sends its own
//! frame 0x6172) and reports what the host answered, as log records the
//! kit's cases check (conformance/cases/host-calls.txtpb and others):
//!
//! - `call` {`phase`, `call`, `result`}: the same host calls made once in
//!   each phase (`init`, `write-transport-parameter`,
//!   `decode-transport-parameter`, `define` = its DEFINE `write-frame`,
//!   `observer` = its AFTER `process-frame` of ACK, `control` = an
//!   embedder's plugin-control call, `timeout` = `on-plugin-timeout`).
//!   `result` is `ok` or the error kind's registry name.
//! - `check` {`what`, `result`}: buffer, context and value checks, `result`
//!   `ok` or what was wrong.
//! - `routine <name>`: the first call of each routine, in call order.
//! - `field` {`name`, `space`, `result`}: control 0x617003 reads every
//!   field; `result` is the value's WIT case (`u64`, `duration`, …, `none`)
//!   or the error kind's registry name, `number` the value as a number
//!   (integers, a duration in nanoseconds, the length of bytes; empty
//!   otherwise).
//!
//! - Control 0x617004 exists only if the host denied the host call that
//!   `manifest` makes; control 0x617005 echoes its arguments.
//! - Control 0x617009 makes a record `shaped` of a declared log shape, with
//!   a value of each kind, and logs the shaped log's refusals as `call`
//!   records of phase `control`.
//! - Control 0x61700a makes three records `batched` of a declared log
//!   shape in one `log-shaped-records` call (ABI 0.2.6), and logs that
//!   call's refusals as `call` records of phase `control`.
//! - Its AFTER observer returns an error, which the host must count and
//!   ignore.
//!
//! It does not hold the `randomness` permission and does not declare
//! `ssthresh`, so those calls must be denied in every phase.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::{string::String, string::ToString, vec, vec::Vec};
use corequic_sdk::text::error_kind;
use corequic_sdk::*;
use cq_probe_protocol::{FRAME_BODY, FRAME_PROBE, TP_PROBE, TP_VALUE};

const ACK: u64 = 0x02;
/// Run the call table in the `control` phase and arm the timer.
const CONTROL_TABLE: u64 = 0x61_7001;
/// The plugin's own control, called by itself to check re-entry.
const CONTROL_SELF: u64 = 0x61_7002;
/// Read every field and log each answer.
const CONTROL_FIELDS: u64 = 0x61_7003;
/// Bound only if the host denied the host call `manifest` made
/// (CQ-PERM-6): the manifest is the only way to tell.
const CONTROL_MANIFEST_DENIED: u64 = 0x61_7004;
/// Returns its arguments unchanged (CQ-CTRL-5).
const CONTROL_ECHO: u64 = 0x61_7005;
/// Calls test-observer's trapping control (0x4f0006) and returns the WIT
/// name of the error it got (CQ-CTRL-7).
const CONTROL_CALL_TRAPPING: u64 = 0x61_7006;
/// Asks for one more frame, sent on its own once the connection is idle
/// (CQ-SEND-6); its acknowledgement is logged as `late frame acked`.
const CONTROL_LATE_FRAME: u64 = 0x61_7007;
/// Fails with an error of kind 0x3ffe, which no release allocated: the host
/// passes it to the caller as it is (CQ-API-19).
const CONTROL_LATER_ERROR: u64 = 0x61_7008;
/// The unallocated error kind CONTROL_LATER_ERROR returns.
const LATER_ERROR_KIND: ErrorKind = 0x3ffe;
/// Makes a record of a declared shape with a value of each kind, and the
/// shaped log's refusals (CQ-API-20, CQ-API-21), logged as `call` records of
/// the `control` phase.
const CONTROL_SHAPED_LOG: u64 = 0x61_7009;
/// Makes three records of a declared shape in one call, and that call's
/// refusals (CQ-API-23), logged as `call` records of the `control` phase.
const CONTROL_SHAPED_RECORDS: u64 = 0x61_700a;
const OBSERVER_TRAP: u64 = 0x4f_0006;
const LATE_TAG: u64 = 100;
/// The error the AFTER observer returns: the host counts it and ignores it.
const OBSERVER_ERROR: u64 = 0x0b5e;
const TIMER: u64 = 7;

const ROUTINES: [&str; 10] = [
    "init",
    "write-transport-parameter",
    "decode-transport-parameter",
    "should-send-frame",
    "write-frame",
    "on-frame-reserved",
    "notify-frame",
    "parse-frame",
    "process-frame",
    "on-plugin-timeout",
];

#[derive(Default)]
struct ApiProbe {
    /// Phases whose table was logged, by index of `PHASES`.
    phases_done: u32,
    /// Routines whose first call was logged, by index of `ROUTINES`.
    routines_seen: u32,
    /// Frames sent so far (only a few are sent).
    sent: u64,
    timer_at: u64,
    /// A frame was asked for through CONTROL_LATE_FRAME.
    late: bool,
    /// The packet number of the last packet that took the registration.
    last_offer: Option<u64>,
}

const PHASES: [&str; 7] = [
    "init",
    "write-transport-parameter",
    "decode-transport-parameter",
    "define",
    "observer",
    "control",
    "timeout",
];

fn result_name(r: &Result<()>) -> &'static str {
    match r {
        Ok(()) => "ok",
        Err(e) => error_kind(e),
    }
}

fn log(message: &str, fields: &[(&str, &str)]) {
    let fields: Vec<(&str, PluginVal)> = fields
        .iter()
        .map(|(k, v)| (*k, PluginVal::String(String::from(*v))))
        .collect();
    let _ = host::log(LogLevel::Info, message, &fields);
}

/// Whether `r` failed with `buffer-too-short` for `needed` bytes.
fn too_short<T>(r: &Result<T>, needed: u64) -> bool {
    matches!(r, Err(e) if e.kind == error_kind::BUFFER_TOO_SHORT && e.value == needed)
}

/// A `call` record: the host call `name` made in `phase` and its answer.
fn log_call(phase: &str, name: &str, r: Result<()>) {
    log(
        "call",
        &[
            ("phase", phase),
            ("call", name),
            ("result", result_name(&r)),
        ],
    );
}

fn check(what: &str, ok: bool) {
    log(
        "check",
        &[("what", what), ("result", if ok { "ok" } else { "wrong" })],
    );
}

fn value_kind(v: &PluginVal) -> &'static str {
    match v {
        PluginVal::None => "none",
        PluginVal::Bool(_) => "bool",
        PluginVal::U32(_) => "u32",
        PluginVal::U64(_) => "u64",
        PluginVal::S64(_) => "s64",
        PluginVal::F64(_) => "f64",
        PluginVal::Bytes(_) => "bytes",
        PluginVal::String(_) => "string",
        PluginVal::Duration(_) => "duration",
        PluginVal::Instant(_) => "instant",
        PluginVal::SocketAddr(_) => "socket-addr",
        PluginVal::Frame(_) => "frame",
        PluginVal::PacketType(_) => "packet-type",
        PluginVal::PnSpace(_) => "pn-space",
    }
}

/// Every field with its WIT name, and whether it is read per space.
const FIELD_TABLE: [(FieldId, &str, bool); 36] = [
    (field::IS_SERVER, "is-server", false),
    (field::VERSION, "version", false),
    (field::IS_ESTABLISHED, "is-established", false),
    (field::MAX_TX_DATA, "max-tx-data", false),
    (field::TX_DATA, "tx-data", false),
    (field::MAX_RX_DATA, "max-rx-data", false),
    (field::RX_DATA, "rx-data", false),
    (field::MAX_SEND_UDP_PAYLOAD, "max-send-udp-payload", false),
    (field::LOCAL_ADDRESS, "local-address", false),
    (field::PEER_ADDRESS, "peer-address", false),
    (field::IDLE_TIMEOUT, "idle-timeout", false),
    (field::SENDING_HALTED, "sending-halted", false),
    (field::NEXT_PACKET_NUMBER, "next-packet-number", true),
    (field::LARGEST_ACKED, "largest-acked", true),
    (field::LARGEST_RECEIVED, "largest-received", true),
    (field::LATEST_RTT, "latest-rtt", false),
    (field::SMOOTHED_RTT, "smoothed-rtt", false),
    (field::MIN_RTT, "min-rtt", false),
    (field::RTTVAR, "rttvar", false),
    (field::MAX_ACK_DELAY, "max-ack-delay", false),
    (field::PTO_COUNT, "pto-count", false),
    (field::BYTES_IN_FLIGHT, "bytes-in-flight", false),
    (field::CONGESTION_WINDOW, "congestion-window", false),
    (field::SSTHRESH, "ssthresh", false),
    (field::MAX_DATAGRAM_SIZE, "max-datagram-size", false),
    (field::SOURCE_CONNECTION_ID, "source-connection-id", false),
    (
        field::DESTINATION_CONNECTION_ID,
        "destination-connection-id",
        false,
    ),
    (field::AMPLIFICATION_BUDGET, "amplification-budget", false),
    (field::ECN_ECT0_COUNT, "ecn-ect0-count", true),
    (field::ECN_ECT1_COUNT, "ecn-ect1-count", true),
    (field::ECN_CE_COUNT, "ecn-ce-count", true),
    (field::PEER_IDLE_TIMEOUT, "peer-idle-timeout", false),
    (
        field::PEER_MAX_UDP_PAYLOAD_SIZE,
        "peer-max-udp-payload-size",
        false,
    ),
    (
        field::PEER_ACK_DELAY_EXPONENT,
        "peer-ack-delay-exponent",
        false,
    ),
    (
        field::PEER_ACTIVE_CONNECTION_ID_LIMIT,
        "peer-active-connection-id-limit",
        false,
    ),
    (field::LOCAL_MAX_ACK_DELAY, "local-max-ack-delay", false),
];

/// A value as a number the kit can bound: integers as they are, a
/// duration in nanoseconds, bytes by their length; empty for the rest.
fn value_number(v: &PluginVal) -> String {
    match v {
        PluginVal::U32(n) => n.to_string(),
        PluginVal::U64(n) | PluginVal::Duration(n) => n.to_string(),
        PluginVal::Bytes(b) => b.len().to_string(),
        _ => String::new(),
    }
}

impl ApiProbe {
    fn routine(&mut self, name: &str) {
        if let Some(i) = ROUTINES.iter().position(|r| *r == name)
            && self.routines_seen & (1 << i) == 0
        {
            self.routines_seen |= 1 << i;
            let mut message = String::from("routine ");
            message.push_str(name);
            log(&message, &[]);
        }
    }

    /// The call table, once per phase.
    fn table(&mut self, phase: &str) {
        let Some(i) = PHASES.iter().position(|p| *p == phase) else {
            return;
        };
        if self.phases_done & (1 << i) != 0 {
            return;
        }
        self.phases_done |= 1 << i;
        let call = |name: &str, r: Result<()>| log_call(phase, name, r);
        call(
            "get-field is-server",
            host::get(field::IS_SERVER).map(|_| ()),
        );
        call(
            "get-field sending-halted",
            host::get(field::SENDING_HALTED).map(|_| ()),
        );
        call(
            "get-field ssthresh (undeclared)",
            host::get(field::SSTHRESH).map(|_| ()),
        );
        call(
            "get-fields with an undeclared field",
            host::get_many(&[
                FieldRef {
                    id: field::IS_SERVER,
                    space: None,
                },
                FieldRef {
                    id: field::SSTHRESH,
                    space: None,
                },
            ])
            .map(|_| ()),
        );
        call(
            "get-field largest-received without a space",
            host::get_many(&[FieldRef {
                id: field::LARGEST_RECEIVED,
                space: None,
            }])
            .map(|_| ()),
        );
        call(
            "get-field is-server with a space",
            host::get_many(&[FieldRef {
                id: field::IS_SERVER,
                space: Some(PnSpace::ApplicationData),
            }])
            .map(|_| ()),
        );
        call(
            "set-field sending-halted",
            host::set(field::SENDING_HALTED, PluginVal::Bool(false)),
        );
        call(
            "set-field sending-halted with a u64",
            host::set(field::SENDING_HALTED, PluginVal::U64(1)),
        );
        call(
            "register-frame",
            host::register_frame(FrameRegistration {
                frame_type: FRAME_PROBE,
                position: SendPosition::End,
                ack_eliciting: true,
                in_flight: true,
            }),
        );
        call(
            "register-frame 2^62",
            host::register_frame(FrameRegistration {
                frame_type: 1 << 62,
                position: SendPosition::End,
                ack_eliciting: true,
                in_flight: true,
            }),
        );
        call(
            "register-frame-one-in-flight 2^62",
            host::register_frame_one_in_flight(FrameRegistration {
                frame_type: 1 << 62,
                position: SendPosition::End,
                ack_eliciting: true,
                in_flight: true,
            }),
        );
        let in_a_second = host::now().saturating_add(1_000_000_000);
        call("set-timer", host::set_timer(TIMER + 1, in_a_second));
        call("cancel-timer", host::cancel_timer(TIMER + 1));
        call(
            "random-bytes (no permission)",
            host::random_bytes(8).map(|_| ()),
        );
        call("send-frame ping", host::send_frame(Frame::ping()));
        // MAX_DATA is [maximum]: a frame without it does not fit its layout
        // (CQ-RECV-9).
        call(
            "send-frame max-data without its value",
            host::send_frame(Frame::new(frame::MAX_DATA, Vec::new())),
        );
        // No host implements field 0x3fff (CQ-FIELD-13).
        call("get-field 16383 (unknown)", host::get(0x3fff).map(|_| ()));
        call(
            "call-plugin-control itself",
            host::call_plugin_control(CONTROL_SELF, &[]).map(|_| ()),
        );
        call("log", host::log(LogLevel::Debug, "probe", &[]));
        let shape = host::declare_log_shape(LogLevel::Debug, "probe", &[("n", LogValueKind::U64)]);
        call("declare-log-shape", shape.clone().map(|_| ()));
        call(
            "log-shaped",
            shape
                .clone()
                .and_then(|shape| host::log_shaped(shape, &[1]))
                .map(|_| ()),
        );
        call(
            "log-shaped-records",
            shape
                .and_then(|shape| host::log_shaped_records(shape, &[2, 3]))
                .map(|_| ()),
        );
        call(
            "register-transport-parameter 2^62",
            host::register_transport_parameter(1 << 62),
        );
        call(
            "register-transport-parameter its own again",
            host::register_transport_parameter(TP_PROBE),
        );
    }

    fn fields(&self) {
        for (id, name, per_space) in FIELD_TABLE {
            let spaces: &[(Option<PnSpace>, &str)] = if per_space {
                &[
                    (Some(PnSpace::Initial), "initial"),
                    (Some(PnSpace::Handshake), "handshake"),
                    (Some(PnSpace::ApplicationData), "application-data"),
                ]
            } else {
                &[(None, "")]
            };
            for (space, space_name) in spaces {
                let r = host::get_many(&[FieldRef { id, space: *space }]);
                let result = match &r {
                    Ok(v) => v.first().map(value_kind).unwrap_or("empty"),
                    Err(e) => error_kind(e),
                };
                let number = match &r {
                    Ok(v) => v.first().map(value_number).unwrap_or_default(),
                    Err(_) => String::new(),
                };
                log(
                    "field",
                    &[
                        ("name", name),
                        ("space", space_name),
                        ("result", result),
                        ("number", &number),
                    ],
                );
            }
        }
    }
}

/// CONTROL_SHAPED_LOG: a record `shaped` with one value of each kind, then
/// the calls that the host must refuse, each answer a `call` record.
fn shaped_log() {
    let call = |name: &str, r: Result<()>| log_call("control", name, r);
    const KINDS: [(&str, LogValueKind); 6] = [
        ("u64", LogValueKind::U64),
        ("s64", LogValueKind::S64),
        ("f64", LogValueKind::F64),
        ("bool", LogValueKind::Bool),
        ("duration", LogValueKind::Duration),
        ("instant", LogValueKind::Instant),
    ];
    let shape = host::declare_log_shape(LogLevel::Info, "shaped", &KINDS);
    let again = host::declare_log_shape(LogLevel::Info, "shaped", &KINDS);
    check(
        "an equal shape declared again has the same handle",
        matches!((&shape, &again), (Ok(a), Ok(b)) if a == b),
    );
    let Ok(shape) = shape else {
        call("declare-log-shape", shape.map(|_| ()));
        return;
    };
    let values = [u64::MAX, -5i64 as u64, 1.5f64.to_bits(), 1, 25_000, 7];
    call("log-shaped", host::log_shaped(shape, &values).map(|_| ()));
    call(
        "log-shaped with a value missing",
        host::log_shaped(shape, &values[..5]).map(|_| ()),
    );
    call(
        "log-shaped with 100000 values",
        host::log_shaped(shape, &vec![0; 100_000]).map(|_| ()),
    );
    call(
        "log-shaped of an undeclared shape",
        host::log_shaped(shape + 1000, &values).map(|_| ()),
    );
    let too_many = [("k", LogValueKind::U64); 33];
    call(
        "declare-log-shape with 33 keys",
        host::declare_log_shape(LogLevel::Info, "shaped", &too_many).map(|_| ()),
    );
    let long = "x".repeat(4090);
    call(
        "declare-log-shape of 4097 bytes",
        host::declare_log_shape(LogLevel::Info, &long, &[("1234567", LogValueKind::U64)])
            .map(|_| ()),
    );
    // The shapes declared so far (this one and the table's) and new ones,
    // up to the 33rd, which the host refuses.
    let mut last = Ok(());
    for n in 0..32u64 {
        let message = String::from("shape ") + &n.to_string();
        last = host::declare_log_shape(LogLevel::Info, &message, &[]).map(|_| ());
        if last.is_err() {
            break;
        }
    }
    call("declare-log-shape beyond 32 shapes", last);
}

/// CONTROL_SHAPED_RECORDS: three records `batched` {`n`, `delay`} in one
/// call, (1, 10 ns), (2, 20 ns), (3, 30 ns), then the calls that the host
/// must refuse, each answer a `call` record.
fn shaped_records() {
    let call = |name: &str, r: Result<()>| log_call("control", name, r);
    const KEYS: [(&str, LogValueKind); 2] =
        [("n", LogValueKind::U64), ("delay", LogValueKind::Duration)];
    let shape = match host::declare_log_shape(LogLevel::Info, "batched", &KEYS) {
        Ok(shape) => shape,
        Err(e) => return call("declare-log-shape", Err(e)),
    };
    call(
        "log-shaped-records",
        host::log_shaped_records(shape, &[1, 10, 2, 20, 3, 30]).map(|_| ()),
    );
    call(
        "log-shaped-records of no records",
        host::log_shaped_records(shape, &[]).map(|_| ()),
    );
    // Two whole records and one value more: none of them is made.
    call(
        "log-shaped-records with a value missing",
        host::log_shaped_records(shape, &[7, 70, 8, 80, 9]).map(|_| ()),
    );
    call(
        "log-shaped-records of an undeclared shape",
        host::log_shaped_records(shape + 1000, &[1, 10]).map(|_| ()),
    );
    let no_keys = host::declare_log_shape(LogLevel::Info, "batched without keys", &[]);
    call(
        "log-shaped-records of a shape without keys",
        no_keys
            .and_then(|s| host::log_shaped_records(s, &[]))
            .map(|_| ()),
    );
}

impl Plugin for ApiProbe {
    fn manifest() -> Manifest {
        let denied = matches!(host::get(field::IS_SERVER), Err(e) if e.kind == error_kind::DENIED);
        let manifest = Manifest::new("api-probe", "0.2.0");
        let manifest = if denied {
            manifest.control(CONTROL_MANIFEST_DENIED)
        } else {
            manifest
        };
        manifest
            .define_transport_parameter(TP_PROBE)
            .define_frame(FRAME_PROBE)
            .bind(routine::PROCESS_FRAME, Anchor::After, ACK)
            .control(CONTROL_TABLE)
            .control(CONTROL_SELF)
            .control(CONTROL_FIELDS)
            .control(CONTROL_ECHO)
            .control(CONTROL_CALL_TRAPPING)
            .control(CONTROL_LATE_FRAME)
            .control(CONTROL_LATER_ERROR)
            .control(CONTROL_SHAPED_LOG)
            .control(CONTROL_SHAPED_RECORDS)
            // Duplicates have the effect of one entry (CQ-LOAD-8).
            .control(CONTROL_ECHO)
            .reads(&[field::IS_SERVER])
            .permission(permission::LOGGING)
            // Every field but ssthresh, whose reads must be denied.
            .reads(
                &field::ALL
                    .iter()
                    .copied()
                    .filter(|f| *f != field::SSTHRESH)
                    .collect::<Vec<_>>(),
            )
            .writes(&[field::SENDING_HALTED])
            .permission(permission::REGISTRATION)
            .permission(permission::LOGGING)
            .permission(permission::TIMERS)
            .permission(permission::SEND_FRAMES)
            .permission(permission::PLUGIN_CONTROL)
    }

    fn init(&mut self) -> Result<()> {
        self.routine("init");
        self.table("init");
        host::register_transport_parameter(TP_PROBE)
    }

    fn write_transport_parameter(&mut self, _: Anchor, _: u64, out: &OutBuf) -> Result<()> {
        self.routine("write-transport-parameter");
        self.table("write-transport-parameter");
        // CQ-FIELD-12: a field is its value or not-found, never a
        // placeholder. The parameters being encoded advertise the receive
        // limit, and every host advertises one above 0.
        if let Ok(v) = host::get(field::MAX_RX_DATA) {
            check(
                "max-rx-data while the parameters are encoded is the advertised limit",
                !matches!(v, PluginVal::U64(0)),
            );
        }
        let capacity = out.capacity();
        check("out-buf starts empty", out.written() == 0);
        let over = vec![0u8; capacity as usize + 1];
        let r = out.put(&over);
        check(
            "put past capacity fails with buffer-too-short(written + len)",
            too_short(&r, capacity + 1),
        );
        check("a failed put appends nothing", out.written() == 0);
        let r = out.put_zeros(capacity + 1);
        check(
            "put-zeros past capacity fails",
            matches!(&r, Err(e) if e.kind == error_kind::BUFFER_TOO_SHORT),
        );
        check(
            "an empty put succeeds",
            out.put(&[]).is_ok() && out.written() == 0,
        );
        out.put(&TP_VALUE)?;
        check(
            "written counts the bytes put",
            out.written() == TP_VALUE.len() as u64,
        );
        check("capacity is constant", out.capacity() == capacity);
        Ok(())
    }

    fn decode_transport_parameter(&mut self, _: Anchor, _: u64, value: &InBuf) -> Result<()> {
        self.routine("decode-transport-parameter");
        self.table("decode-transport-parameter");
        let len = value.len();
        check(
            "the peer's parameter arrives with exactly its bytes",
            len == TP_VALUE.len() as u64 && value.read(0, len).is_ok_and(|b| b == TP_VALUE),
        );
        check(
            "a read past the end fails with buffer-too-short(offset + n)",
            too_short(&value.read(1, len), len + 1),
        );
        check(
            "a read whose end overflows saturates",
            too_short(&value.read(u64::MAX, 2), u64::MAX),
        );
        check(
            "reads do not consume",
            value.read(0, 1).ok() == value.read(0, 1).ok(),
        );
        host::enable();
        Ok(())
    }

    fn should_send_frame(&mut self, _: Anchor, _: u64, ctx: SendContext) -> Result<bool> {
        self.routine("should-send-frame");
        Ok((self.sent < 3 || self.late) && ctx.room >= 16)
    }

    fn write_frame(
        &mut self,
        _: Anchor,
        _: u64,
        ctx: SendContext,
        out: &OutBuf,
    ) -> Result<Option<u64>> {
        self.routine("write-frame");
        // should-send-frame may be asked more than once, but a packet takes
        // a registration's frame at most once (CQ-SEND-4).
        if self.last_offer.is_none() {
            check("a registration is offered at most once per packet", true);
        } else if self.last_offer == Some(ctx.packet_number) {
            check("a registration is offered at most once per packet", false);
        }
        self.last_offer = Some(ctx.packet_number);
        self.table("define");
        if self.sent == 0 {
            check(
                "send-context: the 1-RTT packet of the application-data space",
                matches!(ctx.space, PnSpace::ApplicationData)
                    && matches!(ctx.packet_type, PacketType::OneRtt),
            );
            check(
                "write-frame's buffer holds the room the packet offers",
                out.capacity() == ctx.room && out.written() == 0,
            );
        }
        let mut bytes = Vec::new();
        varint::encode(FRAME_PROBE, &mut bytes);
        bytes.extend_from_slice(&FRAME_BODY);
        out.put(&bytes)?;
        self.sent += 1;
        let late = core::mem::take(&mut self.late);
        Ok(Some(if late { LATE_TAG } else { self.sent }))
    }

    fn on_frame_reserved(&mut self, _: Anchor, _: ExtFrame, _: SendContext) -> Result<()> {
        self.routine("on-frame-reserved");
        Ok(())
    }

    fn notify_frame(&mut self, _: Anchor, frame: ExtFrame, outcome: FrameOutcome) -> Result<()> {
        self.routine("notify-frame");
        if matches!(outcome, FrameOutcome::Acked) {
            log("notified", &[("outcome", "acked")]);
            if frame.tag == LATE_TAG {
                log("late frame acked", &[]);
            }
        }
        Ok(())
    }

    fn parse_frame(&mut self, _: Anchor, frame_type: u64, payload: &InBuf) -> Result<ParsedFrame> {
        self.routine("parse-frame");
        let len = FRAME_BODY.len() as u64;
        let body = payload.read(0, len)?;
        if body != FRAME_BODY {
            return Err(Error::invalid_argument("not a probe frame"));
        }
        Ok(ParsedFrame {
            frame: ExtFrame { frame_type, tag: 0 },
            consumed: len,
        })
    }

    fn process_frame(&mut self, anchor: Anchor, frame: Frame, ctx: RxContext) -> Result<()> {
        match anchor {
            Anchor::After => {
                self.table("observer");
                // The host counts this and changes nothing (CQ-ANCHOR-6).
                return Err(Error::plugin(OBSERVER_ERROR));
            }
            _ => {
                self.routine("process-frame");
                if frame.frame_type == FRAME_PROBE {
                    check(
                        "rx-context: a 1-RTT packet of the application-data space",
                        matches!(ctx.space, PnSpace::ApplicationData)
                            && matches!(ctx.packet_type, PacketType::OneRtt),
                    );
                }
            }
        }
        Ok(())
    }

    fn log_frame(&mut self, _: Anchor, _: Frame) -> Result<String> {
        Ok(String::from("probe frame"))
    }

    fn on_plugin_timeout(&mut self, id: u64, now: u64) -> Result<()> {
        self.routine("on-plugin-timeout");
        check(
            "the timer fires at or after its deadline",
            id == TIMER && now >= self.timer_at,
        );
        self.table("timeout");
        Ok(())
    }

    fn plugin_control(&mut self, id: u64, args: Vec<PluginVal>) -> Result<Vec<PluginVal>> {
        match id {
            CONTROL_TABLE => {
                self.table("control");
                let halted = |v: bool| {
                    host::set(field::SENDING_HALTED, PluginVal::Bool(v)).is_ok()
                        && matches!(host::get(field::SENDING_HALTED), Ok(PluginVal::Bool(b)) if b == v)
                };
                check(
                    "set-field takes effect before it returns",
                    halted(true) && halted(false),
                );
                self.timer_at = host::now().saturating_add(20_000_000);
                host::set_timer(TIMER, self.timer_at)?;
                Ok(Vec::new())
            }
            CONTROL_FIELDS => {
                self.fields();
                Ok(Vec::new())
            }
            CONTROL_SELF | CONTROL_MANIFEST_DENIED => Ok(Vec::new()),
            CONTROL_ECHO => Ok(args),
            CONTROL_CALL_TRAPPING => {
                let kind = match host::call_plugin_control(OBSERVER_TRAP, &[]) {
                    Ok(_) => "ok",
                    Err(e) => error_kind(&e),
                };
                Ok(vec![PluginVal::String(String::from(kind))])
            }
            CONTROL_SHAPED_LOG => {
                shaped_log();
                Ok(Vec::new())
            }
            CONTROL_SHAPED_RECORDS => {
                shaped_records();
                Ok(Vec::new())
            }
            CONTROL_LATE_FRAME => {
                self.late = true;
                Ok(Vec::new())
            }
            CONTROL_LATER_ERROR => Err(Error::new(
                LATER_ERROR_KIND,
                7,
                "an error of a later release",
            )),
            _ => Err(Error::not_found("unknown plugin-control id")),
        }
    }
}

export_plugin!(ApiProbe);
