//! DEFINEs transport parameter 0x6171 (the api-probe's) and refuses the
//! peer's value: the host closes the connection with
//! TRANSPORT_PARAMETER_ERROR (CQ-ROUTINE-9). It sends an empty value itself.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use corequic_sdk::*;
use cq_probe_protocol::TP_PROBE as TP;

#[derive(Default)]
struct TpReject;

impl Plugin for TpReject {
    fn manifest() -> Manifest {
        Manifest::new("tp-reject", "0.2.0")
            .define_transport_parameter(TP)
            .permission(permission::REGISTRATION)
    }

    fn init(&mut self) -> Result<()> {
        host::register_transport_parameter(TP)
    }

    fn write_transport_parameter(&mut self, _: Anchor, _: u64, _: &OutBuf) -> Result<()> {
        Ok(())
    }

    fn decode_transport_parameter(&mut self, _: Anchor, _: u64, _: &InBuf) -> Result<()> {
        Err(Error::invalid_argument("refused by tp-reject"))
    }
}

export_plugin!(TpReject);
