//! A quinn connection's plugins, reached through quinn's connection handle.

use corequic_quinn::{AdapterExtension, QuinnPlugins};
use corequic_runtime::RoutineError;
use corequic_runtime::abi::PluginVal;
use quinn_proto::ExtensionContext;
use std::time::Instant;

/// Run `f` with a quinn connection's plugins. `None` when the connection
/// has no plugins.
pub fn with_plugins<R>(
    conn: &quinn::Connection,
    f: impl FnOnce(&mut QuinnPlugins, &mut ExtensionContext<'_>) -> R,
) -> Option<R> {
    conn.with_proto(|c| {
        c.with_extension(Instant::now(), |ext, cx| {
            QuinnPlugins::from_any(ext.as_any_mut()).map(|p| f(p, cx))
        })
    })
    .flatten()
}

/// Call plugin-control `id` on a quinn connection's plugins. `None` when
/// the connection has no plugins.
pub fn plugin_control(
    conn: &quinn::Connection,
    id: u64,
    args: &[PluginVal],
) -> Option<Result<Vec<PluginVal>, RoutineError>> {
    with_plugins(conn, |plugins, cx| plugins.plugin_control(cx, id, args))
}
