//! Protocol routines a plugin binds, by their identifiers in the codepoint registry
//! (`spec/registry.toml`, kind `routine`). A release of the ABI adds
//! identifiers; it never changes or reuses one.

use crate::RoutineId;

/// `write-transport-parameter`: encode a registered transport parameter. Since 0.2.0.
pub const WRITE_TRANSPORT_PARAMETER: RoutineId = 1;

/// `decode-transport-parameter`: the peer sent a registered transport parameter. Since 0.2.0.
pub const DECODE_TRANSPORT_PARAMETER: RoutineId = 2;

/// `should-send-frame`: whether a registered frame goes into the packet being built. Since 0.2.0.
pub const SHOULD_SEND_FRAME: RoutineId = 3;

/// `write-frame`: write a registered frame into the packet being built. Since 0.2.0.
pub const WRITE_FRAME: RoutineId = 4;

/// `on-frame-reserved`: a written frame is part of a packet being sent. Since 0.2.0.
pub const ON_FRAME_RESERVED: RoutineId = 5;

/// `notify-frame`: the packet carrying a plugin frame was acknowledged or lost. Since 0.2.0.
pub const NOTIFY_FRAME: RoutineId = 6;

/// `parse-frame`: parse a received plugin frame. Since 0.2.0.
pub const PARSE_FRAME: RoutineId = 7;

/// `process-frame`: process a received frame (plugin frames at DEFINE, any frame when observing). Since 0.2.0.
pub const PROCESS_FRAME: RoutineId = 8;

/// `log-frame`: describe a frame for the host's logs. Since 0.2.0.
pub const LOG_FRAME: RoutineId = 9;

/// `plugin-control`: the `ioctl`-like entry point. Since 0.2.0.
pub const PLUGIN_CONTROL: RoutineId = 10;

/// `observe-frames`: the frames of one type the connection processed, as
/// observation records, up to 64 in one call (AFTER only; reached through
/// `call-routine`, see [`crate::observe`]). Since 0.2.3.
pub const OBSERVE_FRAMES: RoutineId = 11;

/// `send-frame`: `should-send-frame`, `write-frame` and `on-frame-reserved`
/// in one call, the frame's bytes returned (DEFINE only; reached through
/// `call-routine`, see [`crate::Plugin::send_frame`]). Since 0.2.4.
pub const SEND_FRAME: RoutineId = 12;

/// `receive-frame`: `parse-frame` and `process-frame` in one call (DEFINE
/// only; reached through `call-routine`, see
/// [`crate::Plugin::receive_frame`]). Since 0.2.4.
pub const RECEIVE_FRAME: RoutineId = 13;
