//! Errors the runtime reports to the embedding stack.

use crate::abi::{self, Anchor, Routine};
use std::fmt;

/// Why a plugin could not be loaded or attached to a connection.
#[derive(Debug, Clone, PartialEq)]
pub enum LoadError {
    /// The file could not be read, compiled or instantiated.
    Compile {
        /// The plugin file or name.
        plugin: String,
        /// What wasmtime reported.
        message: String,
    },
    /// The plugin targets an ABI version this host does not implement.
    AbiVersion {
        /// The plugin's name.
        plugin: String,
        /// The version the plugin was built against.
        plugin_abi: String,
        /// The version this host implements.
        host_abi: String,
    },
    /// The host lacks something the plugin declares it needs.
    Unsupported {
        /// The plugin's name.
        plugin: String,
        /// Everything missing, one item per entry (e.g. `field pto-count (read)`).
        missing: Vec<String>,
    },
    /// The plugin asks for permissions or field access it was not granted.
    NotGranted {
        /// The plugin's name.
        plugin: String,
        /// Everything not granted, one item per entry.
        missing: Vec<String>,
    },
    /// The manifest itself is inconsistent (e.g. plugin-control with a
    /// `before` anchor).
    InvalidManifest {
        /// The plugin's name.
        plugin: String,
        /// What is wrong.
        reason: String,
    },
    /// Two plugins of one connection DEFINE the same routine and parameter.
    DefineConflict {
        /// The routine.
        routine: Routine,
        /// Its parameter (frame type, TP id, control id).
        param: u64,
        /// The plugin loaded first.
        first: String,
        /// The plugin that conflicts with it.
        second: String,
    },
    /// The per-connection instance could not be created (e.g. the pool is exhausted).
    Instantiate {
        /// The plugin's name.
        plugin: String,
        /// What wasmtime reported.
        message: String,
    },
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Compile { plugin, message } => {
                write!(f, "cannot load plugin {plugin}: {message}")
            }
            LoadError::AbiVersion {
                plugin,
                plugin_abi,
                host_abi,
            } => write!(
                f,
                "plugin {plugin} targets Core QUIC ABI {plugin_abi}, but this host implements ABI {host_abi} and runs plugins of {} through its compatibility layer (CQ-VER-6)",
                crate::abi::COMPATIBLE_ABI_VERSIONS.join(", ")
            ),
            LoadError::Unsupported { plugin, missing } => write!(
                f,
                "plugin {plugin} needs what this host does not support: {}",
                missing.join(", ")
            ),
            LoadError::NotGranted { plugin, missing } => write!(
                f,
                "plugin {plugin} requests what it was not granted: {}",
                missing.join(", ")
            ),
            LoadError::InvalidManifest { plugin, reason } => {
                write!(f, "plugin {plugin} has an invalid manifest: {reason}")
            }
            LoadError::DefineConflict {
                routine,
                param,
                first,
                second,
            } => write!(
                f,
                "plugins {first} and {second} both DEFINE {} for {param:#x}",
                routine.name()
            ),
            LoadError::Instantiate { plugin, message } => {
                write!(f, "cannot instantiate plugin {plugin}: {message}")
            }
        }
    }
}

impl std::error::Error for LoadError {}

/// Why a plugin was removed from a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultKind {
    /// The plugin trapped (e.g. `unreachable`, a panic, an out-of-bounds access).
    Trap,
    /// The call ran past its CPU deadline.
    Deadline,
    /// The plugin tried to grow its memory past the limit.
    Memory,
    /// `init` returned an error (not a fault, but the plugin is removed so
    /// that a half-initialised plugin never runs).
    InitFailed,
}

/// A plugin fault: the plugin is removed from the connection.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// The plugin's name.
    pub plugin: String,
    /// The routine (or `init`, `on-plugin-timeout`) that faulted.
    pub routine: &'static str,
    /// The anchor of the faulting call.
    pub anchor: Anchor,
    /// What kind of fault.
    pub kind: FaultKind,
    /// wasmtime's description.
    pub message: String,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            FaultKind::Trap => "trapped",
            FaultKind::Deadline => "exceeded its CPU deadline",
            FaultKind::Memory => "exceeded its memory limit",
            FaultKind::InitFailed => "failed",
        };
        write!(
            f,
            "plugin {} {kind} in {} ({}): {}",
            self.plugin,
            self.routine,
            self.anchor.name(),
            self.message
        )
    }
}

/// The outcome of a routine call that did not succeed.
#[derive(Debug, Clone, PartialEq)]
pub enum RoutineError {
    /// No enabled plugin is bound to this routine and parameter.
    NotBound,
    /// The DEFINE plugin returned an error.
    Plugin {
        /// The plugin's name (for the stack's close reason, CQ-ROUTINE-21).
        plugin: String,
        /// What it returned.
        error: abi::Error,
    },
    /// The DEFINE plugin returned a result that breaks the specification
    /// (e.g. `parse-frame` consumed more bytes than available).
    InvalidResult(String),
    /// The DEFINE plugin faulted and was removed from the connection.
    Fault(Fault),
    /// The plugin that DEFINEs this plugin-control id was removed earlier.
    Removed(Fault),
}

impl fmt::Display for RoutineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RoutineError::NotBound => write!(f, "no plugin is bound to this routine"),
            RoutineError::Plugin { plugin, error } => {
                write!(f, "plugin {plugin} returned an error: {error}")
            }
            RoutineError::InvalidResult(m) => write!(f, "plugin returned an invalid result: {m}"),
            RoutineError::Fault(fault) => fault.fmt(f),
            RoutineError::Removed(fault) => write!(f, "the plugin was removed: {fault}"),
        }
    }
}

impl std::error::Error for RoutineError {}

/// A request from the runtime that the stack close the connection, made when a
/// plugin that defines protocol behaviour fails.
#[derive(Debug, Clone, PartialEq)]
pub struct CloseRequest {
    /// The application error code ([`abi::PLUGIN_FAILURE_ERROR_CODE`]).
    pub error_code: u64,
    /// A reason phrase naming the plugin, routine and cause.
    pub reason: String,
}

/// Why a plugin frame the peer sent closes the connection (CQ-RECV-2), by
/// the QUIC error it closes with.
#[derive(Debug, Clone, PartialEq)]
pub enum FrameRejected {
    /// FRAME_ENCODING_ERROR (0x07): the frame could not be parsed
    /// (CQ-ROUTINE-16, CQ-ROUTINE-30).
    Encoding(RoutineError),
    /// PROTOCOL_VIOLATION (0x0a): processing it failed (CQ-ROUTINE-17,
    /// CQ-ROUTINE-30).
    Violation(RoutineError),
}

impl fmt::Display for FrameRejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameRejected::Encoding(e) | FrameRejected::Violation(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for FrameRejected {}
