//! What went wrong, by the identifiers of the codepoint registry
//! (`spec/registry.toml`, kind `error-kind`). A release of the ABI adds
//! identifiers; it never changes or reuses one.

use crate::ErrorKind;

/// `denied`: the permissions or the anchor do not allow the call. Since 0.2.0.
pub const DENIED: ErrorKind = 1;

/// `unsupported`: the host or plugin does not implement this field, routine or call. Since 0.2.0.
pub const UNSUPPORTED: ErrorKind = 2;

/// `invalid-argument`: an argument is malformed or out of range. Since 0.2.0.
pub const INVALID_ARGUMENT: ErrorKind = 3;

/// `buffer-too-short`: a buffer is too short; `value` is the number of bytes needed. Since 0.2.0.
pub const BUFFER_TOO_SHORT: ErrorKind = 4;

/// `not-found`: the named object does not exist. Since 0.2.0.
pub const NOT_FOUND: ErrorKind = 5;

/// `failed`: the callee failed (trapped, ran out of time or memory, or was removed). Since 0.2.0.
pub const FAILED: ErrorKind = 6;

/// `plugin`: a plugin-defined error; `value` is its code. Since 0.2.0.
pub const PLUGIN: ErrorKind = 7;
