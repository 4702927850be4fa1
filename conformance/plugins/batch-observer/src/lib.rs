//! The conformance kit's batch observer. It observes ACK frames (0x02 and
//! 0x03) twice: each one with `process-frame` AFTER, and in batches with
//! `observe-frames` AFTER (ABI 0.2.3). The host queues a frame's
//! observation record after its `process-frame` AFTER calls and must
//! deliver the plugin's queued records before it calls any other routine of
//! the plugin (CQ-ROUTINE-26), so at each `process-frame` call every earlier
//! ACK has come as a record, and each record is the ACK that `process-frame`
//! saw last, with the same values and packet (CQ-ROUTINE-25,
//! CQ-ROUTINE-27).
//!
//! It reports what it saw as `check` {`what`, `result`} log records, each
//! logged once per result:
//! - "records come before other routines": no record was still queued when
//!   `process-frame` was called;
//! - "records match process-frame": each record has the frame type, values,
//!   data and packet of the ACK that `process-frame` saw;
//! - "one frame type per batch": every record of a call has the call's
//!   frame type, and a call has 1 to 64 records;
//! - "records are well formed": the records decode (the SDK checks their
//!   layout).

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use corequic_sdk::*;

const ACK: u64 = 0x02;
const ACK_ECN: u64 = 0x03;
/// Records in one `observe-frames` call at most (CQ-ROUTINE-25).
const MAX_BATCH: usize = 64;

#[derive(Default)]
struct BatchObserver {
    /// ACKs `process-frame` saw.
    processed: u64,
    /// Records `observe-frames` delivered.
    delivered: u64,
    /// The last ACK `process-frame` saw, until its record comes.
    pending: Option<(Frame, u64)>,
    /// Checks already logged, with their result.
    checked: Vec<(&'static str, bool)>,
}

impl BatchObserver {
    fn check(&mut self, what: &'static str, ok: bool) {
        if self.checked.contains(&(what, ok)) {
            return;
        }
        self.checked.push((what, ok));
        let result = if ok { "ok" } else { "wrong" };
        let _ = host::log(
            LogLevel::Info,
            "check",
            &[
                ("what", PluginVal::String(String::from(what))),
                ("result", PluginVal::String(String::from(result))),
            ],
        );
    }
}

impl Plugin for BatchObserver {
    fn manifest() -> Manifest {
        Manifest::new("batch-observer", "0.1.0")
            .bind(routine::PROCESS_FRAME, Anchor::After, ACK)
            .bind(routine::PROCESS_FRAME, Anchor::After, ACK_ECN)
            .bind(routine::OBSERVE_FRAMES, Anchor::After, ACK)
            .bind(routine::OBSERVE_FRAMES, Anchor::After, ACK_ECN)
            .permission(permission::LOGGING)
    }

    fn init(&mut self) -> Result<()> {
        host::enable();
        Ok(())
    }

    fn process_frame(&mut self, _: Anchor, frame: Frame, ctx: RxContext) -> Result<()> {
        let in_order = self.delivered == self.processed;
        self.check("records come before other routines", in_order);
        self.processed += 1;
        self.pending = Some((frame, ctx.packet_number));
        Ok(())
    }

    fn observe_frames(&mut self, frame_type: u64, frames: &ObservedFrames<'_>) -> Result<()> {
        let mut records = 0;
        let mut matching = true;
        let mut one_type = true;
        let decoded = frames.for_each(|frame, ctx| {
            records += 1;
            one_type &= frame.frame_type == frame_type;
            matching &= match self.pending.take() {
                Some((seen, packet_number)) => {
                    seen.frame_type == frame.frame_type
                        && seen.values == frame.values
                        && seen.data == frame.data
                        && packet_number == ctx.packet_number
                }
                None => false,
            };
            Ok(())
        });
        self.delivered += records as u64;
        self.check("records are well formed", decoded.is_ok());
        self.check("records match process-frame", matching);
        self.check(
            "one frame type per batch",
            one_type && (1..=MAX_BATCH).contains(&records),
        );
        Ok(())
    }
}

export_plugin!(BatchObserver, routines: [process_frame, call_routine]);
