//! A defining plugin (it DEFINEs frame 0x6173) whose `init` returns an
//! error. The host removes it from the connection, and the connection goes
//! on without it: a failed `init` never closes the connection (CQ-LOAD-15).

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use corequic_sdk::*;

const FRAME: u64 = 0x6173;

#[derive(Default)]
struct InitFails;

impl Plugin for InitFails {
    fn manifest() -> Manifest {
        Manifest::new("init-fails", "0.2.0").define_frame(FRAME)
    }

    fn init(&mut self) -> Result<()> {
        Err(Error::plugin(0x1417))
    }
}

export_plugin!(InitFails);
