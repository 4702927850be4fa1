//! A plugin whose `manifest` never returns, for the runtime's loading tests
//! (CQ-LOAD-3, CQ-LIMIT-2): the host interrupts it at the CPU deadline and
//! refuses the plugin with an error that names that cause.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use corequic_sdk::*;

#[derive(Default)]
struct EndlessManifest;

impl Plugin for EndlessManifest {
    fn manifest() -> Manifest {
        let mut x: u64 = 0;
        loop {
            x = core::hint::black_box(x.wrapping_add(1));
        }
    }
}

export_plugin!(EndlessManifest);
