//! Shared helpers for the runtime's integration tests: one runtime per test
//! process, and the plugin components `make plugins` builds.

#![allow(dead_code)]

use corequic_mock::MockPair;
use corequic_runtime::{Grants, HostCapabilities, Plugin, Runtime, RuntimeConfig};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

pub const MS: u64 = 1_000_000;
pub const MTU: u64 = 1200;

/// Where `make plugins` puts the components (override with COREQUIC_PLUGIN_DIR).
pub fn plugin_dir() -> PathBuf {
    std::env::var_os("COREQUIC_PLUGIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../build/plugins"))
}

pub fn plugin_path(name: &str) -> PathBuf {
    let path = plugin_dir().join(format!("{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: run `make plugins` (or `make test`) first",
        path.display()
    );
    path
}

pub fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        Runtime::new(RuntimeConfig::default(), HostCapabilities::full()).expect("runtime")
    })
}

/// The reference plugins as built against an earlier ABI version
/// (`plugins/prebuilt/<version>/`), kept to show that hosts still run them.
pub fn prebuilt_dir(abi_version: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../plugins/prebuilt")
        .join(abi_version)
}

/// Load a plugin with every grant (compiled once per process).
pub fn plugin(name: &str) -> Arc<Plugin> {
    load(&plugin_path(name))
}

/// Load the plugin at `path` with every grant (compiled once per process).
pub fn load(path: &std::path::Path) -> Arc<Plugin> {
    type Loaded = std::sync::Mutex<Vec<(PathBuf, Arc<Plugin>)>>;
    static CACHE: OnceLock<Loaded> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = cache.iter().find(|(n, _)| n == path) {
        return p.clone();
    }
    let p = runtime()
        .load_file(path, &Grants::all())
        .unwrap_or_else(|e| panic!("{} loads: {e}", path.display()));
    cache.push((path.to_path_buf(), p.clone()));
    p
}

pub fn pair(client: &[&str], server: &[&str]) -> MockPair {
    pair_in(None, client, server)
}

/// [`pair`] with each plugin that `plugins/prebuilt/<abi_version>/` has
/// taken from there (the others, such as test plugins, are the current
/// build's).
pub fn pair_in(abi_version: Option<&str>, client: &[&str], server: &[&str]) -> MockPair {
    let c: Vec<_> = client.iter().map(|n| plugin_in(abi_version, n)).collect();
    let s: Vec<_> = server.iter().map(|n| plugin_in(abi_version, n)).collect();
    MockPair::new(runtime(), &c, &s, MTU, 10 * MS).expect("plugins attach")
}

/// Plugin `name` from `plugins/prebuilt/<abi_version>/` if it is there,
/// else from the current build.
pub fn plugin_in(abi_version: Option<&str>, name: &str) -> Arc<Plugin> {
    let prebuilt = abi_version.map(|v| prebuilt_dir(v).join(format!("{name}.wasm")));
    match prebuilt {
        Some(path) if path.exists() => load(&path),
        _ => plugin(name),
    }
}
