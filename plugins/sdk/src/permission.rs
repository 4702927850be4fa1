//! Groups of host calls a plugin must be granted, by their identifiers in the codepoint registry
//! (`spec/registry.toml`, kind `permission`). A release of the ABI adds
//! identifiers; it never changes or reuses one.

use crate::PermissionId;

/// `timers`: `set-timer`, `cancel-timer`. Since 0.2.0.
pub const TIMERS: PermissionId = 1;

/// `randomness`: `random-bytes`. Since 0.2.0.
pub const RANDOMNESS: PermissionId = 2;

/// `logging`: `log`. Since 0.2.0.
pub const LOGGING: PermissionId = 3;

/// `registration`: `register-frame`, `register-transport-parameter`. Since 0.2.0.
pub const REGISTRATION: PermissionId = 4;

/// `send-frames`: `send-frame`. Since 0.2.0.
pub const SEND_FRAMES: PermissionId = 5;

/// `plugin-control`: `call-plugin-control` towards other plugins of the connection. Since 0.2.0.
pub const PLUGIN_CONTROL: PermissionId = 6;
