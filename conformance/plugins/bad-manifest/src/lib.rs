//! A manifest that binds plugin-control 0x617101 at the `before` anchor,
//! which only `define` may have: the host refuses the plugin at load, and
//! its error names the control id and the anchor (CQ-LOAD-5).

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use corequic_sdk::*;

#[derive(Default)]
struct BadManifest;

impl Plugin for BadManifest {
    fn manifest() -> Manifest {
        Manifest::new("bad-manifest", "0.1.0").bind(
            Routine::PluginControl,
            Anchor::Before,
            0x61_7101,
        )
    }
}

export_plugin!(BadManifest);
