//! The stack-agnostic Core QUIC host runtime.
//!
//! A QUIC stack becomes Core QUIC compliant by implementing
//! [`HostConnection`] (field access and a few actions) and calling a
//! [`PluginSet`] at its routine points: transport-parameter encode/decode,
//! the send loop ([`PluginSet::write_frames`]), frame parsing and processing,
//! ack/loss notification and timers. Everything else — compiling plugins once
//! per process, validating manifests against the host's
//! [`HostCapabilities`] and the embedder's [`Grants`], permissions, anchors,
//! two-phase enabling, CPU and memory bounds, fault isolation — lives here.
//!
//! ```no_run
//! use corequic_runtime::{Grants, HostCapabilities, Runtime, RuntimeConfig};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = Runtime::new(RuntimeConfig::default(), HostCapabilities::full())?;
//! let padding = runtime.load_file("padding.wasm".as_ref(), &Grants::all())?;
//! let mut plugins = runtime.connection(&[padding])?; // one per connection
//! # Ok(()) }
//! ```
//!
//! `corequic-mock` (`hosts/mock`) is an in-memory host connection running
//! the paper's send loop, for the runtime's tests and benchmarks.

#![warn(missing_docs)]

pub mod abi;
mod cache;
pub mod config;
mod deadline;
pub mod embedded;
mod error;
mod frames;
mod guest;
mod host;
mod limits;
mod runtime;
mod set;
mod state;

pub use config::{Compiler, InjectedFault, InjectedFaults, RuntimeConfig};
pub use error::{CloseRequest, Fault, FaultKind, FrameRejected, LoadError, RoutineError};
pub use host::{HostConnection, LogRecord};
pub use runtime::{FieldSet, Grants, HostCapabilities, Plugin, Runtime};
pub use set::{PluginSet, PluginStats, SummaryReader, WrittenFrame};
