//! The corequic conformance kit: it certifies a host against the
//! specification (`spec/`) through the host's endpoint binary
//! (`interop-runner/ENDPOINT.md`), so a stack in any language can be
//! certified. Cases are Protocol Buffers text files (`cases/`) that cite the
//! requirements they check; per-host expectation files list known
//! deviations; a coverage gate keeps every MUST-level requirement covered;
//! the report and a claim per host are written as protobuf, JSON and HTML.

#![warn(missing_docs)]

pub mod cases;
pub mod chaos;
pub mod checks;
pub mod expectations;
pub mod report;
pub mod run;
pub mod spec;

/// Types generated from `proto/conformance.proto`.
#[allow(missing_docs, clippy::all, unused_qualifications)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/proto/mod.rs"));
    pub use conformance::*;
}
