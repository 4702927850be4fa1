//! Watches the frame of the conformance kit's fused-frames probe (0x6675)
//! at the BEFORE anchor of the routines that `send-frame` and
//! `receive-frame` replace. With an observer of them on the connection, the
//! host must call them and not the fused routines, or the observer would
//! miss its calls (CQ-ROUTINE-29, CQ-ROUTINE-30). It logs `watched`
//! {`routine`} at its first call of each routine.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::vec::Vec;
use corequic_sdk::*;

/// cq-fused-frames' frame type.
const FRAME: u64 = 0x6675;

#[derive(Default)]
struct FrameWatcher {
    watched: Vec<&'static str>,
}

impl FrameWatcher {
    fn watched(&mut self, routine: &'static str) -> Result<()> {
        if self.watched.contains(&routine) {
            return Ok(());
        }
        self.watched.push(routine);
        host::log(
            LogLevel::Info,
            "watched",
            &[("routine", PluginVal::String(routine.into()))],
        )
    }
}

impl Plugin for FrameWatcher {
    fn manifest() -> Manifest {
        [
            routine::SHOULD_SEND_FRAME,
            routine::WRITE_FRAME,
            routine::ON_FRAME_RESERVED,
            routine::PARSE_FRAME,
            routine::PROCESS_FRAME,
        ]
        .into_iter()
        .fold(Manifest::new("frame-watcher", "0.1.0"), |m, r| {
            m.bind(r, Anchor::Before, FRAME)
        })
        .permission(permission::LOGGING)
    }

    fn init(&mut self) -> Result<()> {
        host::enable();
        Ok(())
    }

    fn should_send_frame(&mut self, _: Anchor, _: u64, _: SendContext) -> Result<bool> {
        self.watched("should-send-frame").map(|()| false)
    }

    fn write_frame(
        &mut self,
        _: Anchor,
        _: u64,
        _: SendContext,
        _: &OutBuf,
    ) -> Result<Option<u64>> {
        self.watched("write-frame").map(|()| None)
    }

    fn on_frame_reserved(&mut self, _: Anchor, _: ExtFrame, _: SendContext) -> Result<()> {
        self.watched("on-frame-reserved")
    }

    fn parse_frame(&mut self, _: Anchor, _: u64, _: &InBuf) -> Result<ParsedFrame> {
        self.watched("parse-frame")?;
        Err(Error::unsupported("an observer parses nothing"))
    }

    fn process_frame(&mut self, _: Anchor, _: Frame, _: RxContext) -> Result<()> {
        self.watched("process-frame")
    }
}

export_plugin!(
    FrameWatcher,
    routines: [should_send_frame, write_frame, on_frame_reserved, parse_frame, process_frame]
);
