//! A plugin that declares a future ABI version; hosts must refuse it at load.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use corequic_sdk::*;

#[derive(Default)]
struct FutureAbi;

impl Plugin for FutureAbi {
    fn manifest() -> Manifest {
        // It also asks for a permission, so that a grant of `none` fails
        // too: the version check must come first (CQ-LOAD-4).
        Manifest::new("future-abi", "0.2.0")
            .abi_version("0.3.0")
            .permission(permission::LOGGING)
    }
}

export_plugin!(FutureAbi);
