//! Application-controlled path probing (Core QUIC paper, section VI-C).
//!
//! plugin-control `1` sends a PATH_CHALLENGE with random data; the matching
//! PATH_RESPONSE, observed after the stack processed it, yields the latency.
//! plugin-control `2` returns the last latency (a duration, or none yet).

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::{vec, vec::Vec};
use corequic_sdk::*;

const PATH_RESPONSE: u64 = 0x1b;
/// plugin-control: send a probe; returns the challenge data.
const CONTROL_PROBE: u64 = 1;
/// plugin-control: the last measured latency (duration, ns), or none.
const CONTROL_LATENCY: u64 = 2;

#[derive(Default)]
struct Probe {
    /// The outstanding challenge: its data and when it was queued.
    pending: Option<(u64, u64)>,
    latency: Option<u64>,
}

impl Plugin for Probe {
    fn manifest() -> Manifest {
        Manifest::new("probe", "0.2.0")
            .bind(routine::PROCESS_FRAME, Anchor::After, PATH_RESPONSE)
            .control(CONTROL_PROBE)
            .control(CONTROL_LATENCY)
            .permission(permission::SEND_FRAMES)
            .permission(permission::RANDOMNESS)
    }

    fn init(&mut self) -> Result<()> {
        host::enable();
        Ok(())
    }

    fn process_frame(&mut self, _: Anchor, frame: Frame, ctx: RxContext) -> Result<()> {
        if let (PATH_RESPONSE, Some(data), Some((sent, at))) =
            (frame.frame_type, frame.value(), self.pending)
            && data == sent
        {
            self.latency = Some(ctx.now.saturating_sub(at));
            self.pending = None;
        }
        Ok(())
    }

    fn plugin_control(&mut self, id: u64, _: Vec<PluginVal>) -> Result<Vec<PluginVal>> {
        match id {
            CONTROL_PROBE => {
                let data = host::random_u64()?;
                host::send_frame(Frame::path_challenge(data))?;
                self.pending = Some((data, host::now()));
                Ok(vec![PluginVal::U64(data)])
            }
            CONTROL_LATENCY => Ok(vec![match self.latency {
                Some(l) => PluginVal::Duration(l),
                None => PluginVal::None,
            }]),
            _ => Err(Error::not_found("unknown plugin-control id")),
        }
    }
}

export_plugin!(Probe, routines: [process_frame, plugin_control]);
