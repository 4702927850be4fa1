//! ACK logger (Core QUIC paper, section VI-A).
//!
//! Observes ACK processing (types 0x02 and 0x03, after the host processed
//! them) and logs the largest acknowledged packet, the ACK delay and the
//! number of ranges through the host's structured log, as records of one
//! declared shape (ABI 0.2.2). It changes nothing.
//!
//! It observes the ACKs in batches (`observe-frames`, ABI 0.2.3): the host
//! enters it once per up to 64 ACKs, at most 10 ms after the first of them
//! was processed, instead of once per ACK. It passes a batch's records to
//! the host in one call too (`log-shaped-records`, ABI 0.2.6), instead of
//! one `log-shaped` call per ACK.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use corequic_sdk::*;

const ACK: u64 = 0x02;
const ACK_ECN: u64 = 0x03;

#[derive(Default)]
struct AckLogger;

impl Plugin for AckLogger {
    fn manifest() -> Manifest {
        Manifest::new("ack-logger", "0.2.0")
            .bind(routine::OBSERVE_FRAMES, Anchor::After, ACK)
            .bind(routine::OBSERVE_FRAMES, Anchor::After, ACK_ECN)
            .permission(permission::LOGGING)
    }

    fn init(&mut self) -> Result<()> {
        host::enable();
        Ok(())
    }

    fn observe_frames(&mut self, _: u64, frames: &ObservedFrames<'_>) -> Result<()> {
        let mut records = [[0; 4]; BATCH];
        let mut n = 0;
        frames.for_each(|frame, ctx| {
            let Some(ack) = frame.ack() else {
                return Ok(());
            };
            records[n] = [
                ack.largest_acknowledged,
                ack.ack_delay,
                ack.range_count() as u64,
                ctx.packet_number,
            ];
            n += 1;
            // A host delivers at most BATCH records a call (CQ-ROUTINE-25);
            // more are logged all the same, a batch at a time.
            if n == BATCH {
                ACK_PROCESSED.log_records(&records)?;
                n = 0;
            }
            Ok(())
        })?;
        ACK_PROCESSED.log_records(&records[..n])
    }
}

/// The most observation records an `observe-frames` call delivers.
const BATCH: usize = 64;

/// The record of each ACK, declared once per connection: each record then
/// passes only its four values to the host.
static ACK_PROCESSED: host::LogShape<4> = host::LogShape::new(
    LogLevel::Info,
    "ack processed",
    [
        ("largest-acknowledged", LogValueKind::U64),
        ("ack-delay", LogValueKind::Duration),
        ("ranges", LogValueKind::U64),
        ("packet-number", LogValueKind::U64),
    ],
);

export_plugin!(AckLogger, routines: [call_routine]);
