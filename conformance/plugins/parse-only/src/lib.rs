//! Negotiates cq-api-probe's extension (transport parameter 0x6171) and
//! DEFINEs `parse-frame` for its frame 0x6172, but binds no `process-frame`
//! for it: the frames the peer's api-probe sends are parsed and must have no
//! effect (CQ-RECV-3). It logs `parsed` for each frame it parses. Its
//! control 0x706f01 does nothing: a case schedules it to keep a client's
//! connection open until the frames are acknowledged.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::vec::Vec;
use corequic_sdk::*;
use cq_probe_protocol::{FRAME_BODY, FRAME_PROBE, TP_PROBE, TP_VALUE};

const CONTROL_NOOP: u64 = 0x70_6f01;

#[derive(Default)]
struct ParseOnly;

impl Plugin for ParseOnly {
    fn manifest() -> Manifest {
        Manifest::new("parse-only", "0.2.0")
            .define_transport_parameter(TP_PROBE)
            .bind(routine::PARSE_FRAME, Anchor::Define, FRAME_PROBE)
            .control(CONTROL_NOOP)
            .permission(permission::REGISTRATION)
            .permission(permission::LOGGING)
    }

    fn init(&mut self) -> Result<()> {
        host::register_transport_parameter(TP_PROBE)
    }

    fn write_transport_parameter(&mut self, _: Anchor, _: u64, out: &OutBuf) -> Result<()> {
        out.put(&TP_VALUE)
    }

    fn decode_transport_parameter(&mut self, _: Anchor, _: u64, _: &InBuf) -> Result<()> {
        host::enable();
        Ok(())
    }

    fn parse_frame(&mut self, _: Anchor, frame_type: u64, payload: &InBuf) -> Result<ParsedFrame> {
        let len = FRAME_BODY.len() as u64;
        if payload.read(0, len)? != FRAME_BODY {
            return Err(Error::invalid_argument("not a probe frame"));
        }
        let _ = host::log(LogLevel::Info, "parsed", &[]);
        Ok(ParsedFrame {
            frame: ExtFrame { frame_type, tag: 0 },
            consumed: len,
        })
    }

    fn plugin_control(&mut self, _: u64, _: Vec<PluginVal>) -> Result<Vec<PluginVal>> {
        Ok(Vec::new())
    }
}

export_plugin!(ParseOnly);
