//! A plugin whose manifest binds `process-frame` while its `export_plugin!`
//! list leaves the routine out, so its export is the SDK's trapping stub. The
//! SDK's `manifest` traps rather than return that manifest, and the host
//! refuses the plugin at load: the stub can never be called.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use corequic_sdk::*;

#[derive(Default)]
struct UnlistedRoutine;

impl Plugin for UnlistedRoutine {
    fn manifest() -> Manifest {
        Manifest::new("unlisted-routine", "0.1.0").bind(routine::PROCESS_FRAME, Anchor::After, 0x01)
    }

    fn process_frame(&mut self, _: Anchor, _: Frame, _: RxContext) -> Result<()> {
        Ok(())
    }
}

export_plugin!(UnlistedRoutine, routines: []);
