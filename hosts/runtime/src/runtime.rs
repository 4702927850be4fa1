//! The per-process runtime: one wasmtime engine, plugins compiled once,
//! validated against the host's capabilities and the embedder's grants.

use crate::abi::{self, Anchor, FieldId, Permission, PluginManifest, Routine};
use crate::cache;
use crate::config::{InjectedFault, RuntimeConfig};
use crate::error::{FaultKind, LoadError};
use crate::guest::GuestPre;
use crate::set::PluginSet;
use crate::state::PluginState;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, Store};

/// A set of fields, as a bit mask over [`FieldId`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FieldSet(u64);

impl FieldSet {
    /// No field.
    pub const EMPTY: FieldSet = FieldSet(0);

    /// Every field of the ABI.
    pub fn all() -> FieldSet {
        FieldSet::from_iter(FieldId::ALL)
    }

    /// Every field the ABI lets plugins write.
    pub fn all_writable() -> FieldSet {
        FieldSet::from_iter(FieldId::ALL.into_iter().filter(|f| f.writable()))
    }

    /// Whether `field` is in the set.
    pub fn contains(self, field: FieldId) -> bool {
        self.0 & (1 << field as u8) != 0
    }

    /// Add `field`.
    pub fn insert(&mut self, field: FieldId) {
        self.0 |= 1 << field as u8;
    }

    /// Remove `field`.
    pub fn remove(&mut self, field: FieldId) {
        self.0 &= !(1 << field as u8);
    }
}

impl FromIterator<FieldId> for FieldSet {
    fn from_iter<I: IntoIterator<Item = FieldId>>(iter: I) -> Self {
        let mut set = FieldSet::EMPTY;
        for f in iter {
            set.insert(f);
        }
        set
    }
}

/// What the embedding application allows one plugin to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grants {
    /// Fields the plugin may read.
    pub read: FieldSet,
    /// Fields the plugin may write.
    pub write: FieldSet,
    /// Host API groups the plugin may call.
    pub permissions: Vec<Permission>,
}

impl Grants {
    /// Everything: every field (read, and write where the ABI allows) and
    /// every permission. For trusted plugins.
    pub fn all() -> Grants {
        Grants {
            read: FieldSet::all(),
            write: FieldSet::all_writable(),
            permissions: Permission::ALL.to_vec(),
        }
    }

    /// Nothing.
    pub fn none() -> Grants {
        Grants {
            read: FieldSet::EMPTY,
            write: FieldSet::EMPTY,
            permissions: Vec::new(),
        }
    }

    /// Parse a grant list such as `read=all,write=congestion-window+ssthresh,perm=timers+logging`
    /// (`all` and `none` are accepted as whole specifications).
    pub fn parse(spec: &str) -> Result<Grants, String> {
        match spec.trim() {
            "all" => return Ok(Grants::all()),
            "none" | "" => return Ok(Grants::none()),
            _ => {}
        }
        let mut grants = Grants::none();
        for part in spec.split(',') {
            let (key, values) = part
                .split_once('=')
                .ok_or_else(|| format!("grant `{part}` is not of the form key=value"))?;
            for value in values.split('+').map(str::trim) {
                match key.trim() {
                    "read" | "write" => {
                        let fields: Vec<FieldId> = if value == "all" {
                            FieldId::ALL.to_vec()
                        } else {
                            vec![
                                FieldId::from_name(value)
                                    .ok_or_else(|| format!("unknown field `{value}`"))?,
                            ]
                        };
                        for f in fields {
                            if key.trim() == "read" {
                                grants.read.insert(f);
                            } else if f.writable() {
                                grants.write.insert(f);
                            }
                        }
                    }
                    "perm" => {
                        if value == "all" {
                            grants.permissions = Permission::ALL.to_vec();
                        } else {
                            let p = Permission::from_name(value)
                                .ok_or_else(|| format!("unknown permission `{value}`"))?;
                            grants.permissions.push(p);
                        }
                    }
                    other => return Err(format!("unknown grant key `{other}`")),
                }
            }
        }
        Ok(grants)
    }
}

/// What a host stack implements; plugins needing more are refused at load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostCapabilities {
    /// Fields the host can read.
    pub readable: FieldSet,
    /// Fields the host can write.
    pub writable: FieldSet,
    /// Routines the host calls.
    pub routines: Vec<Routine>,
    /// Transport parameter ids the stack sends itself beyond the standard
    /// ones every host refuses ([`crate::config::is_standard_transport_parameter`]):
    /// a plugin may not register them either (CQ-API-8).
    pub stack_transport_parameters: Vec<u64>,
}

impl HostCapabilities {
    /// A host that implements the whole ABI.
    pub fn full() -> HostCapabilities {
        HostCapabilities {
            readable: FieldSet::all(),
            writable: FieldSet::all_writable(),
            routines: Routine::ALL.to_vec(),
            stack_transport_parameters: Vec::new(),
        }
    }
}

/// A plugin that carries its manifest in a custom section (CQ-LOAD-23) must
/// carry the one its `manifest` export returns: tools read the section
/// without running the plugin, and must not be told something else.
fn check_embedded_manifest(
    bytes: &[u8],
    manifest: &PluginManifest,
    origin: &str,
) -> Result<(), LoadError> {
    let invalid = |reason: String| LoadError::InvalidManifest {
        plugin: origin.into(),
        reason,
    };
    let section = crate::embedded::find(bytes).map_err(invalid)?;
    let Some(section) = section else {
        return Ok(());
    };
    let embedded = crate::embedded::decode(section).map_err(|e| {
        invalid(format!(
            "its {} section does not decode: {e}",
            crate::embedded::SECTION
        ))
    })?;
    if embedded != *manifest {
        return Err(invalid(format!(
            "its {} section differs from what its manifest export returns",
            crate::embedded::SECTION
        )));
    }
    Ok(())
}

/// A compiled component, with its manifest when the cache had it.
struct Compiled {
    component: Component,
    manifest: Option<PluginManifest>,
    /// The cache entry to write once the manifest is known, if any.
    uncached: Option<cache::Entry>,
}

/// Per-plugin facts the runtime derives from a validated manifest.
#[derive(Debug)]
pub(crate) struct PluginInfo {
    pub(crate) name: String,
    pub(crate) manifest: PluginManifest,
    pub(crate) reads: FieldSet,
    pub(crate) writes: FieldSet,
    pub(crate) permissions: Vec<Permission>,
    /// The plugin DEFINEs protocol behaviour (any routine but plugin-control),
    /// so losing it must close the connection.
    pub(crate) defines_protocol: bool,
    /// Once its log budget is spent, the plugin is no longer called
    /// (CQ-ANCHOR-12; see `silent_once_log_spent`).
    pub(crate) silent_once_log_spent: bool,
}

/// Whether a plugin of `manifest` can give nothing but log records: every
/// binding is BEFORE or AFTER (no DEFINE, no plugin-control), it writes no
/// field, and `logging` is its only permission. Observer calls may not
/// mutate (CQ-ANCHOR-7) and their results are ignored (CQ-ANCHOR-6), so
/// once its log budget is spent nothing it does reaches a peer, the
/// connection, another plugin or the embedder (CQ-ANCHOR-12).
fn silent_once_log_spent(manifest: &PluginManifest) -> bool {
    manifest.bindings.iter().all(|b| b.anchor != Anchor::Define)
        && manifest.writes.is_empty()
        && manifest
            .permissions
            .iter()
            .all(|&p| p == Permission::Logging)
}

impl PluginInfo {
    pub(crate) fn may(&self, p: Permission) -> bool {
        self.permissions.contains(&p)
    }
}

/// A plugin compiled and validated once per process; attach it to as many
/// connections as needed with [`Runtime::connection`].
pub struct Plugin {
    pub(crate) info: Arc<PluginInfo>,
    pub(crate) pre: GuestPre,
}

impl Plugin {
    /// The name the plugin's manifest gives.
    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// The plugin's manifest.
    pub fn manifest(&self) -> &PluginManifest {
        &self.info.manifest
    }
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("name", &self.info.name)
            .finish()
    }
}

/// The stack-agnostic Core QUIC runtime of one process.
pub struct Runtime {
    pub(crate) engine: Engine,
    linker: Linker<PluginState>,
    pub(crate) config: RuntimeConfig,
    capabilities: HostCapabilities,
    pub(crate) ticker: crate::deadline::Ticker,
}

impl Runtime {
    /// Create a runtime for a host with the given capabilities.
    pub fn new(config: RuntimeConfig, capabilities: HostCapabilities) -> Result<Runtime, String> {
        let mut wasm = Config::new();
        wasm.epoch_interruption(true);
        wasm.wasm_component_model(true);
        wasm.max_wasm_stack(256 << 10);
        // Copy a plugin's few kilobytes of data segments into its memory at
        // instantiation instead of mapping its memory image copy-on-write:
        // a fresh pooled slot then needs no mmap, and attaching four
        // plugins to a connection takes about 80 µs instead of 124 µs
        // (docs/measurements.md, "Scale").
        wasm.memory_init_cow(false);
        wasm.strategy(match config.compiler {
            crate::config::Compiler::Cranelift => wasmtime::Strategy::Cranelift,
            crate::config::Compiler::Winch => wasmtime::Strategy::Winch,
        });
        if config.pooling {
            let mut pool = wasmtime::PoolingAllocationConfig::default();
            let n = config.pool_instances;
            // A returned memory's first 64 KiB are zeroed in place and stay
            // resident; the rest is decommitted, a system call. The SDK's
            // plugins start with one 64 KiB page (`.cargo/config.toml`), so
            // one that did not grow costs none.
            pool.total_component_instances(n)
                .total_core_instances(n * 4)
                .total_memories(n)
                .total_tables(n * 4)
                .max_memory_size(config.max_memory_bytes)
                .max_memories_per_component(2)
                .linear_memory_keep_resident(64 << 10)
                .table_keep_resident(4 << 10);
            wasm.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
        }
        let engine = Engine::new(&wasm).map_err(|e| format!("cannot create engine: {e}"))?;
        let mut linker = Linker::new(&engine);
        crate::guest::add_to_linker(&mut linker)
            .map_err(|e| format!("cannot link the host API: {e}"))?;

        // The epoch ticker: each tick moves every store one step towards its
        // call deadline. It stops when the runtime is dropped.
        let tick = config.epoch_tick.max(Duration::from_micros(100));
        let ticker =
            crate::deadline::Ticker::start(engine.clone(), tick, first_check_ticks(&config))
                .map_err(|e| format!("cannot start the epoch ticker: {e}"))?;
        Ok(Runtime {
            engine,
            linker,
            config,
            capabilities,
            ticker,
        })
    }

    /// The capabilities this runtime validates plugins against.
    pub fn capabilities(&self) -> &HostCapabilities {
        &self.capabilities
    }

    /// Whether the epoch ticker sleeps until a call starts: no call into a
    /// plugin has run for a while, and the ticker does not wake the process
    /// until one does. For diagnostics and tests.
    pub fn epoch_ticker_asleep(&self) -> bool {
        self.ticker.asleep()
    }

    /// Load a plugin component from a file.
    pub fn load_file(&self, path: &Path, grants: &Grants) -> Result<Arc<Plugin>, LoadError> {
        let bytes = std::fs::read(path).map_err(|e| LoadError::Compile {
            plugin: path.display().to_string(),
            message: e.to_string(),
        })?;
        self.load_bytes(&path.display().to_string(), &bytes, grants)
    }

    /// Load a plugin component from its bytes; `origin` names it in errors
    /// until its manifest is known.
    pub fn load_bytes(
        &self,
        origin: &str,
        bytes: &[u8],
        grants: &Grants,
    ) -> Result<Arc<Plugin>, LoadError> {
        let compile_err = |e: wasmtime::Error| LoadError::Compile {
            plugin: origin.into(),
            message: e.to_string(),
        };
        let compiled = self.compile(bytes).map_err(compile_err)?;
        let component = compiled.component;
        let pre = self.link(origin, &component)?;
        let manifest = match compiled.manifest {
            Some(manifest) => manifest,
            None => self.run_manifest(&pre, origin)?,
        };
        // Checked on every load, cached manifest or not: the cache may have
        // been written by a process that did not check.
        if !self
            .config
            .injected_faults
            .has(InjectedFault::TrustLyingEmbeddedManifest)
        {
            check_embedded_manifest(bytes, &manifest, origin)?;
        }
        if let Some(entry) = compiled.uncached {
            entry.store(&component, &manifest);
        }
        let info = self.validate(manifest, grants)?;
        if !self.accepts_foreign_abi() {
            check_world_version(&pre, &info.manifest)?;
        }
        Ok(Arc::new(Plugin {
            info: Arc::new(info),
            pre,
        }))
    }

    /// What a plugin's `manifest` export returns, not validated: for tools
    /// that write it into the plugin's custom section (CQ-LOAD-22,
    /// `corequic embed-manifest`). The plugin is compiled, linked and asked
    /// as `load_bytes` would; the cache is not used.
    pub fn read_manifest(&self, origin: &str, bytes: &[u8]) -> Result<PluginManifest, LoadError> {
        let component = Component::new(&self.engine, bytes).map_err(|e| LoadError::Compile {
            plugin: origin.into(),
            message: e.to_string(),
        })?;
        let pre = self.link(origin, &component)?;
        self.run_manifest(&pre, origin)
    }

    /// Link a compiled component against the host interface.
    fn link(&self, origin: &str, component: &Component) -> Result<GuestPre, LoadError> {
        let compile_err = |e: wasmtime::Error| LoadError::Compile {
            plugin: origin.into(),
            message: e.to_string(),
        };
        // A component built against another package version fails to link;
        // say so the way CQ-VER-7 asks instead of with the linker's error.
        if let Some(version) = self.foreign_abi_version(component) {
            return Err(LoadError::AbiVersion {
                plugin: origin.into(),
                plugin_abi: version,
                host_abi: abi::ABI_VERSION.into(),
            });
        }
        let instance_pre = self
            .linker
            .instantiate_pre(component)
            .map_err(compile_err)?;
        GuestPre::new(instance_pre).map_err(compile_err)
    }

    /// The `core-quic:plugin` package version a component imports or
    /// exports, when it is not one this host is compatible with.
    fn foreign_abi_version(&self, component: &Component) -> Option<String> {
        let ty = component.component_type();
        let names: Vec<String> = ty
            .imports(&self.engine)
            .map(|(name, _)| name.to_string())
            .chain(ty.exports(&self.engine).map(|(name, _)| name.to_string()))
            .collect();
        names.into_iter().find_map(|name| {
            let version = name.strip_prefix("core-quic:plugin/")?.split_once('@')?.1;
            (!self.abi_supported(version) && !self.accepts_foreign_abi())
                .then(|| version.to_string())
        })
    }

    /// [`abi::abi_supported`], unless a fault injection switches off the
    /// compatibility layer or every version but the host's own.
    fn abi_supported(&self, version: &str) -> bool {
        let faults = self.config.injected_faults;
        if faults.has(InjectedFault::ExactAbiVersionOnly) {
            return version == abi::ABI_VERSION;
        }
        match faults.has(InjectedFault::NoCompatibilityLayer) {
            true => abi::abi_compatible(version, abi::ABI_VERSION),
            false => abi::abi_supported(version),
        }
    }

    fn accepts_foreign_abi(&self) -> bool {
        self.config
            .injected_faults
            .has(InjectedFault::AcceptForeignAbi)
    }

    /// Ask a throwaway instance for the plugin's manifest; host calls are
    /// denied there because no connection scope is set.
    fn run_manifest(&self, pre: &GuestPre, origin: &str) -> Result<PluginManifest, LoadError> {
        let mut store = Store::new(&self.engine, PluginState::for_manifest(&self.config));
        store.limiter(|s| &mut s.limits);
        crate::deadline::install(&mut store, &self.ticker);
        let manifest = pre
            .instantiate(&mut store, None)
            .and_then(|mut guest| guest.manifest(&mut store))
            .map_err(|e| {
                // Name the cause (CQ-LOAD-3): a deadline interrupt reads as
                // a bare "interrupt" otherwise.
                let cause = match crate::set::classify(&e) {
                    FaultKind::Deadline => "exceeded its CPU deadline",
                    FaultKind::Memory => "exceeded its memory limit",
                    _ => "trapped",
                };
                LoadError::Compile {
                    plugin: origin.into(),
                    message: format!("the plugin {cause} in manifest: {e:#}"),
                }
            })?;
        // Identifiers this host does not implement refuse the plugin like a
        // routine or field it does not support (CQ-LOAD-6).
        manifest.map_err(|unknown| LoadError::Unsupported {
            plugin: unknown.name,
            missing: unknown.missing,
        })
    }

    /// The compiled component, from the cache when it has the entry.
    fn compile(&self, bytes: &[u8]) -> wasmtime::Result<Compiled> {
        let Some(dir) = &self.config.cache_dir else {
            return Ok(Compiled {
                component: Component::new(&self.engine, bytes)?,
                manifest: None,
                uncached: None,
            });
        };
        let entry = cache::Entry::new(dir, &self.engine, bytes);
        if let Some(cached) = entry.load(&self.engine) {
            // A manifest that did not survive is asked for and the entry
            // written again with it.
            let uncached = cached.manifest.is_none().then_some(entry);
            return Ok(Compiled {
                component: cached.component,
                manifest: cached.manifest,
                uncached,
            });
        }
        Ok(Compiled {
            component: Component::new(&self.engine, bytes)?,
            manifest: None,
            uncached: Some(entry),
        })
    }

    fn validate(&self, manifest: PluginManifest, grants: &Grants) -> Result<PluginInfo, LoadError> {
        let name = manifest.name.clone();
        if !self.abi_supported(&manifest.abi_version) && !self.accepts_foreign_abi() {
            return Err(LoadError::AbiVersion {
                plugin: name,
                plugin_abi: manifest.abi_version.clone(),
                host_abi: abi::ABI_VERSION.into(),
            });
        }
        let injected = self.config.injected_faults;
        let any_anchor = |routine| match routine {
            Routine::ObserveFrames => injected.has(InjectedFault::ObserveFramesAtAnyAnchor),
            Routine::SendFrame | Routine::ReceiveFrame => {
                injected.has(InjectedFault::FusedFrameRoutinesAtAnyAnchor)
            }
            _ => false,
        };
        for b in &manifest.bindings {
            let Some(only) = b.routine.only_anchor() else {
                continue;
            };
            if b.anchor != only && !any_anchor(b.routine) {
                return Err(LoadError::InvalidManifest {
                    plugin: name,
                    reason: format!(
                        "{} {:#x} is bound with the {} anchor; only {} is allowed",
                        b.routine.name(),
                        b.param,
                        b.anchor.name(),
                        only.name()
                    ),
                });
            }
        }
        for f in &manifest.writes {
            if !f.writable() {
                return Err(LoadError::InvalidManifest {
                    plugin: name,
                    reason: format!("field {} is read-only in the ABI", f.name()),
                });
            }
        }

        let caps = &self.capabilities;
        let mut missing = Vec::new();
        for b in &manifest.bindings {
            // A 0.1.0 plugin's legacy send routines run as write-frame.
            let routine = b.routine.merged();
            let what = format!("routine {}", routine.name());
            if !caps.routines.contains(&routine) && !missing.contains(&what) {
                missing.push(what);
            }
        }
        for f in &manifest.reads {
            if !caps.readable.contains(*f) {
                missing.push(format!("field {} (read)", f.name()));
            }
        }
        for f in &manifest.writes {
            if !caps.writable.contains(*f) {
                missing.push(format!("field {} (write)", f.name()));
            }
        }
        if !missing.is_empty() {
            return Err(LoadError::Unsupported {
                plugin: name,
                missing,
            });
        }

        let mut not_granted = Vec::new();
        for f in &manifest.reads {
            if !grants.read.contains(*f) {
                not_granted.push(format!("read {}", f.name()));
            }
        }
        for f in &manifest.writes {
            if !grants.write.contains(*f) {
                not_granted.push(format!("write {}", f.name()));
            }
        }
        for p in &manifest.permissions {
            if !grants.permissions.contains(p) {
                not_granted.push(format!("permission {}", p.name()));
            }
        }
        if !not_granted.is_empty() {
            return Err(LoadError::NotGranted {
                plugin: name,
                missing: not_granted,
            });
        }

        let defines_protocol = manifest
            .bindings
            .iter()
            .any(|b| b.anchor == Anchor::Define && b.routine != Routine::PluginControl);
        let silent_once_log_spent = silent_once_log_spent(&manifest);
        Ok(PluginInfo {
            name,
            reads: manifest.reads.iter().copied().collect(),
            writes: manifest.writes.iter().copied().collect(),
            permissions: manifest.permissions.clone(),
            defines_protocol,
            silent_once_log_spent,
            manifest,
        })
    }

    /// Instantiate `plugins` for one new connection, in this order. Fails on
    /// DEFINE conflicts; nothing is attached then.
    pub fn connection(&self, plugins: &[Arc<Plugin>]) -> Result<PluginSet, LoadError> {
        PluginSet::new(self, plugins)
    }
}

/// A plugin's manifest names the ABI version whose world the component
/// exports: 0.1.0 for a 0.1 world, a 0.2 version for a 0.2 world
/// (CQ-LOAD-24).
fn check_world_version(pre: &GuestPre, manifest: &PluginManifest) -> Result<(), LoadError> {
    let (world, fits) = match pre {
        GuestPre::V0_1(_) => ("0.1.0", manifest.abi_version == "0.1.0"),
        GuestPre::V0_2(_) => (
            abi::ABI_VERSION,
            abi::abi_compatible(&manifest.abi_version, abi::ABI_VERSION),
        ),
    };
    if fits {
        return Ok(());
    }
    Err(LoadError::InvalidManifest {
        plugin: manifest.name.clone(),
        reason: format!(
            "its manifest names ABI {} but the component is built against the {world} world",
            manifest.abi_version
        ),
    })
}

/// Epoch ticks before a call's first deadline check: half the deadline, so
/// that the first check comes before the deadline even when the ticker was
/// idling (`deadline::IDLE_TICKS`).
fn first_check_ticks(config: &RuntimeConfig) -> u64 {
    let tick = config.epoch_tick.max(Duration::from_micros(100)).as_nanos();
    (config.call_deadline.as_nanos() / 2).div_ceil(tick).max(1) as u64
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.ticker.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::Binding;

    fn observer_that_logs() -> PluginManifest {
        PluginManifest {
            name: "ack-logger".into(),
            version: "1".into(),
            abi_version: abi::ABI_VERSION.into(),
            bindings: vec![Binding {
                routine: Routine::ProcessFrame,
                anchor: Anchor::After,
                param: 0x02,
            }],
            reads: vec![FieldId::IsServer],
            writes: Vec::new(),
            permissions: vec![Permission::Logging],
        }
    }

    /// CQ-ANCHOR-12: only a plugin whose log records are all it can give
    /// stops being called once its log budget is spent.
    #[test]
    fn only_plugins_that_can_give_nothing_but_logs_fall_silent() {
        assert!(silent_once_log_spent(&observer_that_logs()));
        let mut before = observer_that_logs();
        before.bindings[0].anchor = Anchor::Before;
        assert!(silent_once_log_spent(&before), "BEFORE observes too");

        let mut defines = observer_that_logs();
        defines.bindings[0].anchor = Anchor::Define;
        let mut control = observer_that_logs();
        control.bindings.push(Binding {
            routine: Routine::PluginControl,
            anchor: Anchor::Define,
            param: 1,
        });
        let mut writes = observer_that_logs();
        writes.writes.push(FieldId::SendingHalted);
        let mut timers = observer_that_logs();
        timers.permissions.push(Permission::Timers);
        for (what, manifest) in [
            ("a DEFINE", defines),
            ("a plugin-control", control),
            ("a written field", writes),
            ("another permission", timers),
        ] {
            assert!(
                !silent_once_log_spent(&manifest),
                "{what} is another output"
            );
        }
    }
}
