//! Helpers shared by the quiche host's tests.

use std::path::PathBuf;

/// A plugin component built by `make plugins` (override the folder with
/// COREQUIC_PLUGIN_DIR).
pub fn plugin_path(name: &str) -> PathBuf {
    let dir = std::env::var_os("COREQUIC_PLUGIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../build/plugins"));
    let path = dir.join(format!("{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: run `make plugins`",
        path.display()
    );
    path
}
