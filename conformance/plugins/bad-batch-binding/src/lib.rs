//! A manifest that binds `observe-frames` (ABI 0.2.3) for ACK frames at the
//! `before` anchor, which only `after` may have: the host refuses the plugin
//! at load, and its error names the routine and the anchor (CQ-ROUTINE-24).

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use corequic_sdk::*;

#[derive(Default)]
struct BadBatchBinding;

impl Plugin for BadBatchBinding {
    fn manifest() -> Manifest {
        Manifest::new("bad-batch-binding", "0.1.0")
            .bind(routine::OBSERVE_FRAMES, Anchor::Before, 0x02)
            .permission(permission::LOGGING)
    }

    fn observe_frames(&mut self, _: u64, _: &ObservedFrames<'_>) -> Result<()> {
        // A host that accepted the binding would call this before the ACKs
        // are processed; the log shows it did.
        host::log(LogLevel::Info, "observed before", &[])
    }
}

export_plugin!(BadBatchBinding, routines: [call_routine]);
