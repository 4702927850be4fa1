//! Writes the connection-level flow limits `max-tx-data` and `max-rx-data`
//! (CQ-FIELD-9). A host that cannot write them refuses the plugin at load,
//! naming each missing write (CQ-LOAD-6). On a host that can, two
//! plugin-controls check the writes from inside a transfer:
//!
//! - [`RX_CHECK`] (on the receiver): a `max-rx-data` of 0, below the limit
//!   already advertised, fails with `invalid-argument`; [`RAISED_RX`] is
//!   applied and read back. It returns those three outcomes. The peer,
//!   running this plugin too, logs `max-data raised` when a MAX_DATA frame
//!   announcing at least [`RAISED_RX`] arrives.
//! - [`TX_CHECK`] (on the sender, mid-transfer): a `max-tx-data` below the
//!   bytes already sent fails with `invalid-argument`; the limit is then
//!   lowered to exactly the bytes sent and read back. For [`HOLD_TICKS`]
//!   milliseconds a timer checks that `tx-data` stays within it (logging
//!   `sent past the written limit` otherwise, `held at the written limit`
//!   when done); then the plugin restores the peer's limit and the transfer
//!   goes on.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::{string::String, vec, vec::Vec};
use corequic_sdk::*;

/// Check the `max-rx-data` writes; returns [outcome of 0, outcome of
/// [`RAISED_RX`], value read back].
pub const RX_CHECK: u64 = 0x66_0001;
/// Check the `max-tx-data` writes; returns [outcome below `tx-data`,
/// outcome at `tx-data`, whether the value read back is the one written].
pub const TX_CHECK: u64 = 0x66_0002;
/// The receive limit `RX_CHECK` writes: 2^40 bytes.
pub const RAISED_RX: u64 = 1 << 40;
/// How many 1 ms ticks `TX_CHECK` holds the lowered send limit.
pub const HOLD_TICKS: u32 = 20;
/// MAX_DATA's frame type, observed to see the raised limit arrive.
const MAX_DATA: u64 = 0x10;
const HOLD_TIMER: u64 = 1;
const TICK_NS: u64 = 1_000_000;

#[derive(Default)]
struct WritesFlowLimits {
    /// The lowered send limit and the peer's limit to restore, while held.
    held: Option<(u64, u64)>,
    ticks: u32,
    exceeded: bool,
    raise_seen: bool,
}

fn get_u64(field: FieldId) -> Result<u64> {
    match host::get(field)? {
        PluginVal::U64(v) => Ok(v),
        _ => Err(Error::failed("not a u64")),
    }
}

/// The outcome of a call, as the kit reads it: `ok` or the error's case.
fn outcome(r: Result<()>) -> PluginVal {
    PluginVal::String(String::from(match r {
        Ok(()) => "ok",
        Err(e) => text::error_kind(&e),
    }))
}

fn log(message: &str) {
    let _ = host::log(LogLevel::Info, message, &[]);
}

impl WritesFlowLimits {
    fn rx_check(&mut self) -> Result<Vec<PluginVal>> {
        let below = outcome(host::set(field::MAX_RX_DATA, PluginVal::U64(0)));
        let raised = outcome(host::set(field::MAX_RX_DATA, PluginVal::U64(RAISED_RX)));
        Ok(vec![
            below,
            raised,
            PluginVal::U64(get_u64(field::MAX_RX_DATA)?),
        ])
    }

    fn tx_check(&mut self) -> Result<Vec<PluginVal>> {
        let sent = get_u64(field::TX_DATA)?;
        let peer_limit = get_u64(field::MAX_TX_DATA)?;
        if sent == 0 {
            return Err(Error::failed("nothing sent yet"));
        }
        let below = outcome(host::set(field::MAX_TX_DATA, PluginVal::U64(sent - 1)));
        let at_sent = outcome(host::set(field::MAX_TX_DATA, PluginVal::U64(sent)));
        let read_back = get_u64(field::MAX_TX_DATA)? == sent;
        self.held = Some((sent, peer_limit));
        host::set_timer(HOLD_TIMER, host::now().saturating_add(TICK_NS))?;
        Ok(vec![below, at_sent, PluginVal::Bool(read_back)])
    }
}

impl Plugin for WritesFlowLimits {
    fn manifest() -> Manifest {
        Manifest::new("writes-flow-limits", "0.2.0")
            .reads(&[field::MAX_TX_DATA, field::MAX_RX_DATA, field::TX_DATA])
            .writes(&[field::MAX_TX_DATA, field::MAX_RX_DATA])
            .control(RX_CHECK)
            .control(TX_CHECK)
            .bind(routine::PROCESS_FRAME, Anchor::After, MAX_DATA)
            .permission(permission::TIMERS)
            .permission(permission::LOGGING)
    }

    fn init(&mut self) -> Result<()> {
        host::enable();
        Ok(())
    }

    fn process_frame(&mut self, _: Anchor, frame: Frame, _: RxContext) -> Result<()> {
        if let (frame::MAX_DATA, Some(max)) = (frame.frame_type, frame.value())
            && max >= RAISED_RX
            && !self.raise_seen
        {
            self.raise_seen = true;
            log("max-data raised");
        }
        Ok(())
    }

    fn on_plugin_timeout(&mut self, _: u64, now: u64) -> Result<()> {
        let Some((limit, peer_limit)) = self.held else {
            return Ok(());
        };
        // While the limit is the one written (the peer has not raised it),
        // nothing beyond it may be sent.
        if get_u64(field::MAX_TX_DATA)? == limit && get_u64(field::TX_DATA)? > limit {
            self.exceeded = true;
        }
        self.ticks += 1;
        if self.ticks < HOLD_TICKS {
            return host::set_timer(HOLD_TIMER, now.saturating_add(TICK_NS));
        }
        self.held = None;
        log(if self.exceeded {
            "sent past the written limit"
        } else {
            "held at the written limit"
        });
        let current = get_u64(field::MAX_TX_DATA)?;
        host::set(field::MAX_TX_DATA, PluginVal::U64(current.max(peer_limit)))
    }

    fn plugin_control(&mut self, id: u64, _: Vec<PluginVal>) -> Result<Vec<PluginVal>> {
        match id {
            RX_CHECK => self.rx_check(),
            TX_CHECK => self.tx_check(),
            _ => Err(Error::not_found("no such control")),
        }
    }
}

export_plugin!(WritesFlowLimits);
