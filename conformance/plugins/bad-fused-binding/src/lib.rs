//! A manifest that binds `send-frame` (ABI 0.2.4) for its frame at the
//! `after` anchor, which only `define` may have: the host refuses the
//! plugin at load, and its error names the routine and the anchor
//! (CQ-ROUTINE-28).

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use corequic_sdk::*;

/// fused-frames' frame type, which this plugin would observe.
const FRAME: u64 = 0x6675;

#[derive(Default)]
struct BadFusedBinding;

impl Plugin for BadFusedBinding {
    fn manifest() -> Manifest {
        Manifest::new("bad-fused-binding", "0.1.0")
            .bind(routine::SEND_FRAME, Anchor::After, FRAME)
            .permission(permission::LOGGING)
    }

    fn send_frame(&mut self, _: u64, _: SendContext) -> Result<Option<SentFrame>> {
        // A host that accepted the binding would call this after a frame
        // was sent; the log shows it did.
        host::log(LogLevel::Info, "observed send-frame", &[])?;
        Ok(None)
    }
}

export_plugin!(BadFusedBinding, routines: [call_routine]);
