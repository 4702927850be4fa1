//! A plugin that misbehaves on request, for the runtime's negative tests.
//! Each plugin-control id triggers one misbehaviour right away or arms it
//! for a later routine call (plugin-control ids 0x480001..0x48000e). It DEFINEs routines, so its faults close the
//! connection; `observer` is its counterpart that only observes.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::{string::String, vec, vec::Vec};
use corequic_sdk::bindings::core_quic::plugin::host::log as raw_log;
use corequic_sdk::*;

/// A frame it DEFINEs, so a fault there is a DEFINE fault.
const FRAME_HOSTILE: u64 = 0x4854;
/// A transport parameter whose value it writes past the buffer's bound.
const TP_HOSTILE: u64 = 0x4854;

const LOOP_FOREVER: u64 = 0x48_0001;
const MEMORY_BOMB: u64 = 0x48_0002;
const TRAP: u64 = 0x48_0003;
const READ_UNDECLARED: u64 = 0x48_0004;
const WRITE_UNDECLARED: u64 = 0x48_0005;
const LAST_ERROR: u64 = 0x48_0006;
const ARM_TRAP_IN_DEFINE: u64 = 0x48_0007;
const ECHO: u64 = 0x48_0008;
/// Set `sending-halted` (then TRAP removes it with the connection halted).
const HALT: u64 = 0x48_0009;
/// The result of the plugin-control call `init` made to padding's toggle
/// (0x80001), which may not run before padding's own `init`.
const INIT_CONTROL_RESULT: u64 = 0x48_000a;
/// Log `u64` records, each with a message of 4 KiB or of the second
/// argument's length (`0`: records with no text at all).
const LOG_FLOOD: u64 = 0x48_000b;
/// Call plugin-control `id` `n` times with `arg` (`u64`s `id`, `n`, `arg`).
const CALL_REPEATEDLY: u64 = 0x48_000c;
/// Log `u64` records with no message and one field: a NEW_TOKEN frame whose
/// token is 64 KiB, or the second argument's length.
const LOG_FRAME_FLOOD: u64 = 0x48_000d;
/// Log `u64` records with no text at all: the log flood with a length of
/// 0, for callers that pass one argument (an endpoint's `--control`).
const LOG_EMPTY_FLOOD: u64 = 0x48_000e;
/// NEW_TOKEN: `[]`, the token as its bytes.
const NEW_TOKEN: u64 = 0x07;
/// Padding's toggle.
const PADDING_TOGGLE: u64 = 0x8_0001;

#[derive(Default)]
struct Hostile {
    trap_in_define: bool,
    last_error: Option<Error>,
    init_control: Option<Result<Vec<PluginVal>>>,
}

impl Plugin for Hostile {
    fn manifest() -> Manifest {
        [
            LOOP_FOREVER,
            MEMORY_BOMB,
            TRAP,
            READ_UNDECLARED,
            WRITE_UNDECLARED,
            LAST_ERROR,
        ]
        .into_iter()
        .chain([
            ARM_TRAP_IN_DEFINE,
            ECHO,
            HALT,
            INIT_CONTROL_RESULT,
            LOG_FLOOD,
            CALL_REPEATEDLY,
            LOG_FRAME_FLOOD,
            LOG_EMPTY_FLOOD,
        ])
        .fold(Manifest::new("hostile", "0.2.0"), |m, id| m.control(id))
        .bind(routine::SHOULD_SEND_FRAME, Anchor::Define, FRAME_HOSTILE)
        .bind(
            routine::WRITE_TRANSPORT_PARAMETER,
            Anchor::Define,
            TP_HOSTILE,
        )
        .reads(&[field::IS_SERVER])
        .writes(&[field::SENDING_HALTED])
        .permission(permission::REGISTRATION)
        .permission(permission::PLUGIN_CONTROL)
        .permission(permission::LOGGING)
    }

    fn init(&mut self) -> Result<()> {
        host::register_transport_parameter(TP_HOSTILE)?;
        host::register_frame(FrameRegistration {
            frame_type: FRAME_HOSTILE,
            position: SendPosition::End,
            ack_eliciting: false,
            in_flight: false,
        })?;
        host::enable();
        self.init_control = Some(host::call_plugin_control(
            PADDING_TOGGLE,
            &[PluginVal::Bool(true)],
        ));
        Ok(())
    }

    fn write_transport_parameter(&mut self, _: Anchor, _: u64, out: &OutBuf) -> Result<()> {
        let too_much = vec![0xAB; out.capacity() as usize + 1];
        let r = out.put(&too_much);
        if let Err(e) = &r {
            self.last_error = Some(e.clone());
        }
        r
    }

    fn should_send_frame(&mut self, _: Anchor, _: u64, _: SendContext) -> Result<bool> {
        if self.trap_in_define {
            trap();
        }
        Ok(false)
    }

    fn plugin_control(&mut self, id: u64, args: Vec<PluginVal>) -> Result<Vec<PluginVal>> {
        match id {
            LOOP_FOREVER => {
                let mut x: u64 = 0;
                loop {
                    x = core::hint::black_box(x.wrapping_add(1));
                }
            }
            MEMORY_BOMB => {
                // Reserved, not written: the memory grows as fast as the
                // host lets it, and the call does not spend its CPU time on
                // page faults, which on a loaded machine once took it past
                // the CPU deadline before the memory limit.
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(Vec::with_capacity(1 << 20));
                    core::hint::black_box(&hoard);
                }
            }
            TRAP => trap(),
            READ_UNDECLARED => host::get(field::CONGESTION_WINDOW).map(|v| vec![v]),
            WRITE_UNDECLARED => {
                host::set(field::CONGESTION_WINDOW, PluginVal::U64(1)).map(|()| Vec::new())
            }
            LAST_ERROR => match self.last_error.take() {
                Some(e) => Err(e),
                None => Ok(Vec::new()),
            },
            ARM_TRAP_IN_DEFINE => {
                self.trap_in_define = true;
                Ok(Vec::new())
            }
            ECHO => Ok(args),
            HALT => host::set(field::SENDING_HALTED, PluginVal::Bool(true)).map(|()| Vec::new()),
            CALL_REPEATEDLY => {
                if let [PluginVal::U64(id), PluginVal::U64(n), PluginVal::U64(arg)] =
                    args.as_slice()
                {
                    for _ in 0..*n {
                        // Callee failures (a removed callee) do not stop the loop.
                        let _ = host::call_plugin_control(*id, &[PluginVal::U64(*arg)]);
                    }
                }
                Ok(Vec::new())
            }
            INIT_CONTROL_RESULT => self
                .init_control
                .take()
                .unwrap_or_else(|| Err(Error::not_found("no init control"))),
            LOG_FLOOD | LOG_EMPTY_FLOOD => {
                let default_len = if id == LOG_EMPTY_FLOOD { 0 } else { 4096 };
                let (n, len) = flood_args(&args, default_len);
                let text = String::from_utf8(vec![b'x'; len.min(4096)]).unwrap_or_default();
                flood(n, &text, &[])
            }
            LOG_FRAME_FLOOD => {
                let (n, len) = flood_args(&args, 64 * 1024);
                // A frame carries bytes that a host must count too.
                let token = PluginVal::Frame(Frame {
                    frame_type: NEW_TOKEN,
                    values: Vec::new(),
                    data: vec![b't'; len],
                });
                flood(n, "", &[(String::from("frame"), token)])
            }
            _ => Err(Error::not_found("unknown plugin-control id")),
        }
    }
}

/// A log flood's arguments: `[n]` or `[n, len]`, as the record count and
/// length (`default_len` when not given).
fn flood_args(args: &[PluginVal], default_len: usize) -> (u64, usize) {
    match args {
        [PluginVal::U64(n)] => (*n, default_len),
        [PluginVal::U64(n), PluginVal::U64(len)] => (*n, *len as usize),
        _ => (0, 0),
    }
}

/// Log `n` records of `message` and `fields` through the raw host call, not
/// the SDK's `host::log`, which stops once the budget is spent: the host
/// must bound a plugin that does not. Returns what `log` said was left.
fn flood(n: u64, message: &str, fields: &[(String, PluginVal)]) -> Result<Vec<PluginVal>> {
    let mut left = u64::MAX;
    for _ in 0..n {
        left = raw_log(LogLevel::Info, message, fields)?;
    }
    Ok(vec![PluginVal::U64(left)])
}

export_plugin!(Hostile);
