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

/// Load a plugin with every grant (compiled once per process).
pub fn plugin(name: &str) -> Arc<Plugin> {
    type Loaded = std::sync::Mutex<Vec<(String, Arc<Plugin>)>>;
    static CACHE: OnceLock<Loaded> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = cache.iter().find(|(n, _)| n == name) {
        return p.clone();
    }
    let p = runtime()
        .load_file(&plugin_path(name), &Grants::all())
        .expect("plugin loads");
    cache.push((name.to_string(), p.clone()));
    p
}

pub fn pair(client: &[&str], server: &[&str]) -> MockPair {
    let c: Vec<_> = client.iter().map(|n| plugin(n)).collect();
    let s: Vec<_> = server.iter().map(|n| plugin(n)).collect();
    MockPair::new(runtime(), &c, &s, MTU, 10 * MS).expect("plugins attach")
}
