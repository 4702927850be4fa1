//! Helpers shared by the quiche host's tests.

use std::path::{Path, PathBuf};

/// A plugin component built by `make plugins` (override the folder with
/// COREQUIC_PLUGIN_DIR).
pub fn plugin_path(name: &str) -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    corequic_endpoint::testing::plugin_path(&workspace, name)
}
