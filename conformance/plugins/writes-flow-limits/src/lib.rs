//! A manifest that declares writes of `max-tx-data` and `max-rx-data`, which
//! the ABI allows and a host may not support: a host that cannot write them
//! refuses the plugin at load, naming each missing write (CQ-LOAD-6).

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use corequic_sdk::*;

#[derive(Default)]
struct WritesFlowLimits;

impl Plugin for WritesFlowLimits {
    fn manifest() -> Manifest {
        Manifest::new("writes-flow-limits", "0.1.0")
            .reads(&[FieldId::MaxTxData, FieldId::MaxRxData])
            .writes(&[FieldId::MaxTxData, FieldId::MaxRxData])
    }

    fn init(&mut self) -> Result<()> {
        host::enable();
        Ok(())
    }
}

export_plugin!(WritesFlowLimits);
