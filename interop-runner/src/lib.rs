//! The corequic interop runner: every client host ×
//! server host × test case through a userspace link emulator, judged on
//! evidence from the link trace, the endpoints' stats JSON and their logs,
//! and published as Protocol Buffers results and a static HTML report.

#![warn(missing_docs)]

pub mod browser;
pub mod cases;
pub mod execute;
pub mod hosts;
pub mod link;
pub mod perf;
pub mod report;
pub mod results;
pub mod runner;

/// Types generated from `proto/results.proto`.
#[allow(missing_docs, clippy::all, unused_qualifications)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/proto/mod.rs"));
}
