//! The chaos harness's peer plugin: it parses the frames of the chaos
//! plugin's 16 private types (type, one byte of body length, body) and
//! ignores them, so that a connection whose chaos plugin sends well-formed
//! frames runs on, and the harness sees the rest of what the plugin does.
//! A malformed frame is refused, and the peer's host closes the connection.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use corequic_sdk::*;

/// The chaos plugin's frame types: FRAME_BASE to FRAME_BASE + 15.
const FRAME_BASE: u64 = 0x3c_0000;

#[derive(Default)]
struct ChaosSink;

impl Plugin for ChaosSink {
    fn manifest() -> Manifest {
        (FRAME_BASE..FRAME_BASE + 16).fold(Manifest::new("chaos-sink", "0.2.0"), |m, ty| {
            m.bind(routine::PARSE_FRAME, Anchor::Define, ty).bind(
                routine::PROCESS_FRAME,
                Anchor::Define,
                ty,
            )
        })
    }

    fn init(&mut self) -> Result<()> {
        host::enable();
        Ok(())
    }

    fn parse_frame(&mut self, _: Anchor, frame_type: u64, payload: &InBuf) -> Result<ParsedFrame> {
        let body = payload.read(0, 1)?;
        let len = 1 + u64::from(body[0]);
        if payload.len() < len {
            return Err(Error::invalid_argument("truncated chaos frame"));
        }
        Ok(ParsedFrame {
            frame: ExtFrame { frame_type, tag: 0 },
            consumed: len,
        })
    }

    fn process_frame(&mut self, _: Anchor, _: Frame, _: RxContext) -> Result<()> {
        Ok(())
    }
}

export_plugin!(ChaosSink);
