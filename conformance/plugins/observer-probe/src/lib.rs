//! The conformance kit's observer probe. It runs beside `cq-api-probe` and
//! observes what that plugin defines, and reports what the host did as log
//! records the kit's cases check (conformance/cases/observers.txtpb):
//!
//! - `observed` {`routine`, `anchor`}: the first BEFORE and AFTER call of
//!   each routine it binds for cq-api-probe's transport parameter 0x6171 and
//!   frame 0x6172 (CQ-ANCHOR-1).
//! - `check` {`what`, `result`}: an AFTER call got the arguments of the BEFORE
//!   call of the same event, and in-bufs hold exactly the bytes the DEFINE
//!   gets (CQ-ANCHOR-5); out-bufs have the DEFINE's capacity, and what it
//!   writes there never reaches the peer (CQ-ANCHOR-8); buffer methods work
//!   at every anchor (CQ-BUF-7); a re-armed timer never fires twice in one
//!   handling of timeouts (CQ-TIMER-6).
//! - `dispatched` {`frame`}: the frame case of each AFTER `process-frame`
//!   call for dispatch types 0x02, 0x08 and 0x1e (CQ-ROUTINE-5).
//! - `check` "after process-frame of an ack gets the arguments of before":
//!   every ACK frame the stack processes is observed BEFORE, and AFTER with
//!   the same arguments (CQ-RECV-5); an AFTER call without a BEFORE call
//!   for the same frame is `wrong`.
//! - `init`: logged by `init`, so that cases can compare load orders
//!   (CQ-LOAD-11).
//! - `timer fired` {`id`}: its timers, whose ids are those cq-api-probe uses
//!   (CQ-TIMER-1).
//!
//! Its controls: 0x6f7001 arms and cancels timer 7 (cq-api-probe's id) and
//! arms timer 9, which re-arms itself at its own `now` twice; 0x6f7002 arms
//! timer 11 and then traps, so the host must remove the plugin and never
//! fire timer 11 (CQ-TIMER-8); 0x6f7003 uses the handle of an out-buf kept
//! from an earlier call, which must trap (CQ-BUF-1).
//!
//! The SDK traps if the host starts a call while another is in progress, so
//! a host that does is seen as this plugin's removal (CQ-ROUTINE-2).

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::{format, string::String, vec, vec::Vec};
use corequic_sdk::*;
use cq_probe_protocol::{FRAME_BODY, FRAME_PROBE, TP_PROBE, TP_VALUE};

/// Dispatch types whose frames it observes (CQ-ROUTINE-5).
const ACK: u64 = 0x02;
const STREAM: u64 = 0x08;
const HANDSHAKE_DONE: u64 = 0x1e;

const CONTROL_TIMERS: u64 = 0x6f_7001;
const CONTROL_ARM_AND_TRAP: u64 = 0x6f_7002;
const CONTROL_STALE_HANDLE: u64 = 0x6f_7003;
/// cq-api-probe's timer id.
const SHARED_TIMER: u64 = 7;
const REARMED_TIMER: u64 = 9;
const ORPHAN_TIMER: u64 = 11;
/// How often timer 9 re-arms itself at its own `now`.
const REARMS: u32 = 2;

/// The routines it observes for cq-api-probe's parameter and frame.
const OBSERVED: [(RoutineId, &str, u64); 9] = [
    (
        routine::WRITE_TRANSPORT_PARAMETER,
        "write-transport-parameter",
        TP_PROBE,
    ),
    (
        routine::DECODE_TRANSPORT_PARAMETER,
        "decode-transport-parameter",
        TP_PROBE,
    ),
    (routine::SHOULD_SEND_FRAME, "should-send-frame", FRAME_PROBE),
    (routine::WRITE_FRAME, "write-frame", FRAME_PROBE),
    (routine::ON_FRAME_RESERVED, "on-frame-reserved", FRAME_PROBE),
    (routine::NOTIFY_FRAME, "notify-frame", FRAME_PROBE),
    (routine::PARSE_FRAME, "parse-frame", FRAME_PROBE),
    (routine::PROCESS_FRAME, "process-frame", FRAME_PROBE),
    (routine::LOG_FRAME, "log-frame", FRAME_PROBE),
];

#[derive(Default)]
struct ObserverProbe {
    /// (routine index × 2 + anchor) pairs already logged as `observed`.
    seen: u32,
    /// The arguments of the last BEFORE call of each routine, rendered.
    before: [Option<String>; 9],
    /// Checks already logged, so each is logged once per result.
    checked: Vec<(String, bool)>,
    /// Frame cases already logged as `dispatched`.
    dispatched: Vec<&'static str>,
    /// The arguments of the BEFORE call of the ACK frame being processed.
    ack_before: Option<String>,
    /// `now` of the handling in which timer 9 last fired.
    rearmed_now: Option<u64>,
    rearms: u32,
    /// An out-buf handle kept past its call (CONTROL_STALE_HANDLE).
    kept_handle: Option<u32>,
}

fn log(message: &str, fields: &[(&str, &str)]) {
    let fields: Vec<(&str, PluginVal)> = fields
        .iter()
        .map(|(k, v)| (*k, PluginVal::String(String::from(*v))))
        .collect();
    let _ = host::log(LogLevel::Info, message, &fields);
}

fn anchor_name(anchor: Anchor) -> &'static str {
    match anchor {
        Anchor::Define => "define",
        Anchor::Before => "before",
        Anchor::After => "after",
    }
}

/// The frame's kind, by its type (frames as data, CQ-ROUTINE-5).
fn frame_case(frame: &Frame) -> &'static str {
    match frame.frame_type {
        0x00 => "padding",
        0x01 => "ping",
        0x02 | 0x03 => "ack",
        0x06 => "crypto",
        0x08 => "stream",
        0x1e => "handshake-done",
        ty if ty > 0x1e && ty != 0x30 && ty != 0x31 => "extension",
        _ => "other",
    }
}

impl ObserverProbe {
    fn check(&mut self, what: &str, ok: bool) {
        if self.checked.iter().any(|(w, r)| w == what && *r == ok) {
            return;
        }
        self.checked.push((String::from(what), ok));
        log(
            "check",
            &[("what", what), ("result", if ok { "ok" } else { "wrong" })],
        );
    }

    /// Record a BEFORE or AFTER call of `routine` with its rendered
    /// arguments, and check that AFTER gets what BEFORE got (CQ-ANCHOR-5).
    fn observe(&mut self, routine: RoutineId, anchor: Anchor, args: String) {
        let Some(i) = OBSERVED.iter().position(|(r, _, _)| *r == routine) else {
            return;
        };
        let name = OBSERVED[i].1;
        let bit = 1u32 << (i * 2 + usize::from(matches!(anchor, Anchor::After)));
        if self.seen & bit == 0 {
            self.seen |= bit;
            log(
                "observed",
                &[("routine", name), ("anchor", anchor_name(anchor))],
            );
        }
        match anchor {
            Anchor::Before => self.before[i] = Some(args),
            Anchor::After => {
                if let Some(before) = self.before[i].take() {
                    let what = format!("after {name} gets the arguments of before");
                    self.check(&what, before == args);
                }
            }
            Anchor::Define => {}
        }
    }

    /// An observer's out-buf: the DEFINE's capacity; writes work and are
    /// discarded by the host (CQ-ANCHOR-8, CQ-BUF-7).
    fn scribble(&mut self, what: &str, out: &OutBuf, capacity: Option<u64>) {
        if let Some(capacity) = capacity {
            let ok = out.capacity() == capacity;
            self.check(
                &format!("{what}: the out-buf has the define's capacity"),
                ok,
            );
        }
        let garbage = vec![0xa5u8; out.capacity() as usize];
        let ok = out.put(&garbage).is_ok() && out.written() == out.capacity();
        self.check(&format!("{what}: buffer methods work"), ok);
        self.kept_handle = Some(out.handle());
    }

    /// An observer's in-buf holds exactly the DEFINE's bytes.
    fn read_all(&mut self, what: &str, value: &InBuf, expected: &[u8]) -> String {
        let bytes = value.read(0, value.len());
        let ok = bytes.as_deref().is_ok_and(|b| b == expected);
        self.check(&format!("{what}: the in-buf holds the define's bytes"), ok);
        format!("{bytes:?}")
    }
}

impl Plugin for ObserverProbe {
    fn manifest() -> Manifest {
        let mut manifest = Manifest::new("observer-probe", "0.2.0");
        for (routine, _, param) in OBSERVED {
            manifest =
                manifest
                    .bind(routine, Anchor::Before, param)
                    .bind(routine, Anchor::After, param);
        }
        for ty in [ACK, STREAM, HANDSHAKE_DONE] {
            manifest = manifest.bind(routine::PROCESS_FRAME, Anchor::After, ty);
        }
        // Standard frames are observed BEFORE the stack processes them too.
        manifest = manifest.bind(routine::PROCESS_FRAME, Anchor::Before, ACK);
        manifest
            .control(CONTROL_TIMERS)
            .control(CONTROL_ARM_AND_TRAP)
            .control(CONTROL_STALE_HANDLE)
            .permission(permission::LOGGING)
            .permission(permission::TIMERS)
    }

    fn init(&mut self) -> Result<()> {
        log("init", &[]);
        host::enable();
        Ok(())
    }

    fn write_transport_parameter(&mut self, anchor: Anchor, id: u64, out: &OutBuf) -> Result<()> {
        self.observe(
            routine::WRITE_TRANSPORT_PARAMETER,
            anchor,
            format!("{id} {} {}", out.capacity(), out.written()),
        );
        self.scribble("write-transport-parameter", out, None);
        Ok(())
    }

    fn decode_transport_parameter(&mut self, anchor: Anchor, id: u64, value: &InBuf) -> Result<()> {
        let bytes = self.read_all("decode-transport-parameter", value, &TP_VALUE);
        self.observe(
            routine::DECODE_TRANSPORT_PARAMETER,
            anchor,
            format!("{id} {bytes}"),
        );
        Ok(())
    }

    fn should_send_frame(&mut self, anchor: Anchor, ty: u64, ctx: SendContext) -> Result<bool> {
        self.observe(routine::SHOULD_SEND_FRAME, anchor, format!("{ty} {ctx:?}"));
        Ok(false)
    }

    fn write_frame(
        &mut self,
        anchor: Anchor,
        ty: u64,
        ctx: SendContext,
        out: &OutBuf,
    ) -> Result<Option<u64>> {
        self.observe(
            routine::WRITE_FRAME,
            anchor,
            format!("{ty} {ctx:?} {}", out.capacity()),
        );
        self.scribble("write-frame", out, Some(ctx.room));
        Ok(None)
    }

    fn on_frame_reserved(
        &mut self,
        anchor: Anchor,
        frame: ExtFrame,
        ctx: SendContext,
    ) -> Result<()> {
        self.observe(
            routine::ON_FRAME_RESERVED,
            anchor,
            format!("{frame:?} {ctx:?}"),
        );
        Ok(())
    }

    fn notify_frame(
        &mut self,
        anchor: Anchor,
        frame: ExtFrame,
        outcome: FrameOutcome,
    ) -> Result<()> {
        self.observe(
            routine::NOTIFY_FRAME,
            anchor,
            format!("{frame:?} {outcome:?}"),
        );
        Ok(())
    }

    fn parse_frame(&mut self, anchor: Anchor, ty: u64, payload: &InBuf) -> Result<ParsedFrame> {
        // The payload may run past the frame: only its first bytes are known.
        let head = payload.read(0, FRAME_BODY.len() as u64);
        let ok = head.as_deref().is_ok_and(|b| b == FRAME_BODY);
        self.check("parse-frame: the in-buf holds the define's bytes", ok);
        self.observe(
            routine::PARSE_FRAME,
            anchor,
            format!("{ty} {} {head:?}", payload.len()),
        );
        Ok(ParsedFrame {
            frame: ExtFrame {
                frame_type: ty,
                tag: 0,
            },
            consumed: 0,
        })
    }

    fn process_frame(&mut self, anchor: Anchor, frame: Frame, ctx: RxContext) -> Result<()> {
        let case = frame_case(&frame);
        if case == "ack" {
            let args = format!("{frame:?} {ctx:?}");
            match anchor {
                Anchor::Before => self.ack_before = Some(args),
                _ => {
                    let ok = self.ack_before.take().is_some_and(|before| before == args);
                    self.check(
                        "after process-frame of an ack gets the arguments of before",
                        ok,
                    );
                }
            }
        }
        if case == "extension" {
            self.observe(routine::PROCESS_FRAME, anchor, format!("{frame:?} {ctx:?}"));
        } else if matches!(anchor, Anchor::After) && !self.dispatched.contains(&case) {
            self.dispatched.push(case);
            log("dispatched", &[("frame", case)]);
        }
        Ok(())
    }

    fn log_frame(&mut self, anchor: Anchor, frame: Frame) -> Result<String> {
        self.observe(routine::LOG_FRAME, anchor, format!("{frame:?}"));
        Ok(String::new())
    }

    fn on_plugin_timeout(&mut self, id: u64, now: u64) -> Result<()> {
        log("timer fired", &[("id", &text::decimal(id))]);
        if id == REARMED_TIMER {
            // Re-armed at its own `now`: it must fire in a later handling,
            // whose `now` is later (CQ-TIMER-6).
            if let Some(last) = self.rearmed_now {
                self.check("a re-armed timer fires in a later handling", now > last);
            }
            self.rearmed_now = Some(now);
            if self.rearms < REARMS {
                self.rearms += 1;
                host::set_timer(REARMED_TIMER, now)?;
            }
        }
        Ok(())
    }

    fn plugin_control(&mut self, id: u64, _: Vec<PluginVal>) -> Result<Vec<PluginVal>> {
        match id {
            CONTROL_TIMERS => {
                // If timer ids were shared, cancelling 7 would cancel
                // cq-api-probe's timer 7 (CQ-TIMER-1).
                let later = host::now().saturating_add(1_000_000_000);
                host::set_timer(SHARED_TIMER, later)?;
                host::cancel_timer(SHARED_TIMER)?;
                host::set_timer(REARMED_TIMER, host::now().saturating_add(10_000_000))?;
                Ok(Vec::new())
            }
            CONTROL_ARM_AND_TRAP => {
                host::set_timer(ORPHAN_TIMER, host::now().saturating_add(50_000_000))?;
                trap()
            }
            CONTROL_STALE_HANDLE => {
                let Some(handle) = self.kept_handle else {
                    return Err(Error::not_found("no out-buf seen yet"));
                };
                // SAFETY: deliberately not: the handle was borrowed for a call
                // that has returned, and the host must trap on its use.
                let stale = unsafe { OutBuf::from_handle(handle) };
                let _ = stale.put(&[0]);
                core::mem::forget(stale);
                Err(Error::invalid_argument("a stale out-buf handle worked"))
            }
            _ => Err(Error::not_found("unknown plugin-control id")),
        }
    }
}

export_plugin!(ObserverProbe);
