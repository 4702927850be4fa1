//! The resource limits of a plugin's store (CQ-LIMIT-3): memory, tables,
//! instances. Growth past a limit traps with a [`GrowthRefused`], which
//! fault classification recognizes by its type.

use std::fmt;
use wasmtime::ResourceLimiter;

/// Instances, tables and memories a plugin component may create.
const MAX_INSTANCES: usize = 8;
const MAX_TABLES: usize = 8;
const MAX_MEMORIES: usize = 2;
/// Elements of one table.
const MAX_TABLE_ELEMENTS: usize = 10_000;

/// A plugin's memory or table would grow past its limit (or the system
/// could not give it the memory it may have): the trap that ends the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GrowthRefused {
    /// A linear memory (false: a table).
    pub(crate) memory: bool,
    /// The size asked for (bytes or elements), when it is known.
    pub(crate) desired: Option<usize>,
    /// The limit.
    pub(crate) limit: usize,
}

impl fmt::Display for GrowthRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (what, unit) = match self.memory {
            true => ("memory", "bytes"),
            false => ("table", "elements"),
        };
        match self.desired {
            Some(desired) => write!(
                f,
                "growing its {what} to {desired} {unit}, past its limit of {} {unit}",
                self.limit
            ),
            None => write!(
                f,
                "growing its {what} failed below its limit of {} {unit}",
                self.limit
            ),
        }
    }
}

impl std::error::Error for GrowthRefused {}

/// The limiter of a plugin's store.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PluginLimits {
    memory_bytes: usize,
}

impl PluginLimits {
    /// Limits with `memory_bytes` of linear memory.
    pub(crate) fn new(memory_bytes: usize) -> Self {
        PluginLimits { memory_bytes }
    }

    fn refuse(memory: bool, desired: Option<usize>, limit: usize) -> wasmtime::Error {
        wasmtime::Error::new(GrowthRefused {
            memory,
            desired,
            limit,
        })
    }
}

impl ResourceLimiter for PluginLimits {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let limit = maximum.map_or(self.memory_bytes, |m| m.min(self.memory_bytes));
        if desired > limit {
            return Err(Self::refuse(true, Some(desired), limit));
        }
        Ok(true)
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        Err(Self::refuse(true, None, self.memory_bytes))
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let limit = maximum.map_or(MAX_TABLE_ELEMENTS, |m| m.min(MAX_TABLE_ELEMENTS));
        if desired > limit {
            return Err(Self::refuse(false, Some(desired), limit));
        }
        Ok(true)
    }

    fn table_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        Err(Self::refuse(false, None, MAX_TABLE_ELEMENTS))
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
}
