//! A plugin that only observes (AFTER process-frame of ACK and of STREAM)
//! and, when armed through plugin-control, traps or attempts a mutation
//! there. It observes both so that either side of a download keeps seeing
//! frames after it is armed: a server receives ACKs for what it sends, a
//! client receives the STREAM frames of its download (it may receive no
//! ACK at all once its request is acknowledged). Its faults must leave the
//! connection running. Through plugin-control it can also halt sending and
//! trap at once, to show that its removal releases the halt, and it can
//! call another plugin's control or log its arguments, which the runtime's
//! `values` tests use to pass every kind of value through the SDK's glue.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::vec::Vec;
use corequic_sdk::*;

const ACK: u64 = 0x02;
/// Every STREAM type (observers bind the first of the family).
const STREAM: u64 = 0x08;
const ARM_TRAP: u64 = 0x4f_0001;
const ARM_MUTATE: u64 = 0x4f_0002;
/// Returns the error the last mutation attempt got (or nothing).
const LAST_ERROR: u64 = 0x4f_0003;
/// Returns the number of ACK and STREAM frames observed.
const OBSERVED: u64 = 0x4f_0004;
/// Sets `sending-halted` (allowed: plugin-control is not an observer call).
const HALT: u64 = 0x4f_0005;
/// Traps right away.
const TRAP: u64 = 0x4f_0006;
/// Counts to its `u64` argument: CPU work of a predictable size.
const SPIN: u64 = 0x4f_0007;
/// Calls the plugin-control its first argument (`u64`) names with the
/// other arguments and returns what that returns.
const CALL_CONTROL: u64 = 0x4f_0008;
/// Logs its arguments as the fields of one record, named `a`, `b`, ….
const LOG_ARGS: u64 = 0x4f_0009;
/// The names of LOG_ARGS's fields: more than the 32 a host keeps
/// (CQ-LIMIT-12).
const FIELD_NAMES: [&str; 40] = [
    "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s",
    "t", "u", "v", "w", "x", "y", "z", "aa", "ab", "ac", "ad", "ae", "af", "ag", "ah", "ai", "aj",
    "ak", "al", "am", "an",
];

#[derive(Default)]
struct Observer {
    trap: bool,
    mutate: bool,
    observed: u64,
    last_error: Option<Error>,
}

impl Plugin for Observer {
    fn manifest() -> Manifest {
        Manifest::new("observer", "0.2.0")
            .bind(routine::PROCESS_FRAME, Anchor::After, ACK)
            .bind(routine::PROCESS_FRAME, Anchor::After, STREAM)
            .control(ARM_TRAP)
            .control(ARM_MUTATE)
            .control(LAST_ERROR)
            .control(OBSERVED)
            .control(HALT)
            .control(TRAP)
            .control(SPIN)
            .control(CALL_CONTROL)
            .control(LOG_ARGS)
            .permission(permission::LOGGING)
            .permission(permission::PLUGIN_CONTROL)
            .writes(&[field::SENDING_HALTED])
    }

    fn init(&mut self) -> Result<()> {
        host::enable();
        Ok(())
    }

    fn process_frame(&mut self, _: Anchor, _: Frame, _: RxContext) -> Result<()> {
        self.observed += 1;
        if self.trap {
            core::arch::wasm32::unreachable();
        }
        if self.mutate {
            self.mutate = false;
            if let Err(e) = host::set(field::SENDING_HALTED, PluginVal::Bool(true)) {
                self.last_error = Some(e);
            }
        }
        Ok(())
    }

    fn plugin_control(&mut self, id: u64, args: Vec<PluginVal>) -> Result<Vec<PluginVal>> {
        match id {
            ARM_TRAP => self.trap = true,
            ARM_MUTATE => self.mutate = true,
            LAST_ERROR => {
                if let Some(e) = self.last_error.take() {
                    return Err(e);
                }
            }
            OBSERVED => return Ok(alloc::vec![PluginVal::U64(self.observed)]),
            HALT => host::set(field::SENDING_HALTED, PluginVal::Bool(true))?,
            TRAP => core::arch::wasm32::unreachable(),
            SPIN => {
                let n = match args.as_slice() {
                    [PluginVal::U64(n)] => *n,
                    _ => 0,
                };
                let mut x: u64 = 0;
                while x < n {
                    x = core::hint::black_box(x + 1);
                }
            }
            CALL_CONTROL => {
                return match args.split_first() {
                    Some((PluginVal::U64(id), rest)) => host::call_plugin_control(*id, rest),
                    _ => Err(Error::invalid_argument("expected a control id first")),
                };
            }
            LOG_ARGS => {
                let fields: Vec<(&str, PluginVal)> = FIELD_NAMES.into_iter().zip(args).collect();
                host::log(LogLevel::Info, "arguments", &fields)?;
            }
            _ => return Err(Error::not_found("unknown plugin-control id")),
        }
        Ok(Vec::new())
    }
}

export_plugin!(Observer);
