//! A manifest that binds plugin-control 0x617101 at the `before` anchor,
//! which only `define` may have: the host refuses the plugin at load, and
//! its error names the control id and the anchor (CQ-LOAD-5), even when its
//! grant lacks the permission it asks for (CQ-LOAD-4).

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use corequic_sdk::*;

#[derive(Default)]
struct BadManifest;

impl Plugin for BadManifest {
    fn manifest() -> Manifest {
        // It also asks for a permission, so that a grant of `none` fails
        // too: the consistency check must come first (CQ-LOAD-4).
        Manifest::new("bad-manifest", "0.2.0")
            .bind(routine::PLUGIN_CONTROL, Anchor::Before, 0x61_7101)
            .permission(permission::LOGGING)
    }
}

export_plugin!(BadManifest);
