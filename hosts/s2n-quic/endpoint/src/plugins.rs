//! An s2n-quic connection's plugins, reached through its connection handle.

use corequic_runtime::RoutineError;
use corequic_runtime::abi::PluginVal;
use corequic_s2n::{AdapterExtension, S2nPlugins};
use s2n_quic::provider::extension::ExtensionContext;

/// Run `f` with an s2n-quic connection's plugins. `None` when the
/// connection has no plugins or is closed.
pub fn with_plugins<R>(
    conn: &s2n_quic::connection::Handle,
    f: impl FnOnce(&mut S2nPlugins, &mut ExtensionContext) -> R,
) -> Option<R> {
    conn.extension_mut(|ext, cx| S2nPlugins::from_any(ext.as_any_mut()).map(|p| f(p, cx)))
        .ok()
        .flatten()
        .flatten()
}

/// Call plugin-control `id` on an s2n-quic connection's plugins. `None`
/// when the connection has no plugins (or is closed).
pub fn plugin_control(
    conn: &s2n_quic::connection::Handle,
    id: u64,
    args: &[PluginVal],
) -> Option<Result<Vec<PluginVal>, RoutineError>> {
    with_plugins(conn, |plugins, cx| plugins.plugin_control(cx, id, args))
}
