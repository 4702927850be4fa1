//! A seeded chaos plugin for the chaos harness (`make chaos`,
//! conformance/README.md). It is written against the raw generated WIT
//! bindings, not the SDK's `Plugin` trait: nothing checks its arguments,
//! guards re-entry or encodes its frames for it.
//!
//! Everything it does is drawn from a 64-bit seed that the harness writes
//! into [`SEED_BLOCK`] of a copy of the component: the bindings of its
//! manifest, the frames and transport parameters it registers, its timers,
//! the host calls it makes from every routine (valid, boundary and
//! out-of-range arguments), and the faults it commits (traps, CPU spins,
//! memory growth, log floods, lies about frame lengths, malformed frames and
//! parameters, stale buffer handles). The same seed gives the same plugin.
//! The runtime's in-process fuzzer writes bytes into [`FUZZ_BLOCK`] instead,
//! and the plugin draws the same decisions from them.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::{format, string::String, vec, vec::Vec};
use core::cell::RefCell;
use corequic_sdk::bindings::core_quic::plugin::host::{self, InBuf, OutBuf};
use corequic_sdk::bindings::core_quic::plugin::types::*;
use corequic_sdk::bindings::exports::core_quic::plugin::routines::Guest;
use corequic_sdk::{field, permission, routine, trap, varint};

/// Every field of the ABI.
const FIELDS: [FieldId; 36] = field::ALL;

/// `CQCHAOS!` followed by the seed, little-endian. The harness finds the
/// marker in the component and overwrites the 8 bytes after it.
#[used]
#[unsafe(no_mangle)]
pub static SEED_BLOCK: [u8; 16] = *b"CQCHAOS!\0\0\0\0\0\0\0\0";

/// Its own plugin-control id (callable by the embedder and by itself).
const CONTROL: u64 = 0x3c_0001;
/// Base of the private frame types (16 of them, as test-chaos-sink knows)
/// and transport parameter ids it uses.
const FRAME_BASE: u64 = 0x3c_0000;
const TP_BASE: u64 = 0x3c00;

fn seed() -> u64 {
    // Volatile: the value is patched in the binary after compilation.
    let block = unsafe { core::ptr::read_volatile(&raw const SEED_BLOCK) };
    let mut s = [0u8; 8];
    s.copy_from_slice(&block[8..]);
    u64::from_le_bytes(s)
}

/// The fuzzer's input: `CQFUZZ!!`, a little-endian u32 length, then up to
/// [`FUZZ_CAPACITY`] bytes. The runtime's in-process fuzzer
/// (hosts/runtime/tests/fuzz_host_calls.rs) writes it into a copy of the
/// component; with a length of 0 (as built) the plugin follows its seed.
#[used]
#[unsafe(no_mangle)]
pub static FUZZ_BLOCK: [u8; 12 + FUZZ_CAPACITY] = fuzz_block();

/// The most fuzzer bytes the plugin takes.
pub const FUZZ_CAPACITY: usize = 4096;

const fn fuzz_block() -> [u8; 12 + FUZZ_CAPACITY] {
    let mut block = [0u8; 12 + FUZZ_CAPACITY];
    let marker = *b"CQFUZZ!!";
    let mut i = 0;
    while i < marker.len() {
        block[i] = marker[i];
        i += 1;
    }
    block
}

/// The fuzzer's bytes, if it wrote any.
fn fuzz_input() -> Option<Vec<u8>> {
    // Volatile: the block is patched in the binary after compilation.
    let block = unsafe { core::ptr::read_volatile(&raw const FUZZ_BLOCK) };
    let mut len = [0u8; 4];
    len.copy_from_slice(&block[8..12]);
    let len = (u32::from_le_bytes(len) as usize).min(FUZZ_CAPACITY);
    (len > 0).then(|| block[12..12 + len].to_vec())
}

/// The source of every decision: splitmix64 from the seed (small, and good
/// enough to spread the seed's bits), or the fuzzer's bytes, followed by
/// splitmix64 seeded from them once they run out. Small draws take one or
/// two bytes, so a fuzzer's byte maps to one decision.
struct Rng {
    state: u64,
    input: Vec<u8>,
    at: usize,
}

impl Rng {
    fn seeded(seed: u64) -> Rng {
        Rng {
            state: seed,
            input: Vec::new(),
            at: 0,
        }
    }
    fn from_input(input: Vec<u8>) -> Rng {
        // FNV-1a: the fallback stream differs from input to input.
        let state = input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
        });
        Rng {
            state,
            input,
            at: 0,
        }
    }
    fn splitmix(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// The next `width` bytes of the input (little-endian), or a splitmix64
    /// draw once it is used up.
    fn take(&mut self, width: usize) -> u64 {
        if self.at >= self.input.len() {
            return self.splitmix();
        }
        let end = (self.at + width).min(self.input.len());
        let v = self.input[self.at..end]
            .iter()
            .rev()
            .fold(0u64, |v, b| (v << 8) | u64::from(*b));
        self.at = end;
        v
    }
    fn next(&mut self) -> u64 {
        self.take(8)
    }
    /// A number in 0..n (0 when n is 0).
    fn below(&mut self, n: u64) -> u64 {
        let width = match n {
            0 => return 0,
            1..=256 => 1,
            257..=65_536 => 2,
            _ => 8,
        };
        self.take(width) % n
    }
    /// True with probability `per_mille` / 1000.
    fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
    /// A u64 with a bias towards boundaries.
    fn value(&mut self) -> u64 {
        match self.below(8) {
            0 => 0,
            1 => 1,
            2 => u64::MAX,
            3 => 1 << 62,
            4 => (1 << 62) - 1,
            5 => self.below(2000),
            6 => u32::MAX as u64,
            _ => self.next(),
        }
    }
}

/// What a seed makes of the plugin, fixed for every connection.
struct Plan {
    frame_type: u64,
    registration: FrameRegistration,
    transport_parameters: Vec<u64>,
    observed_frames: Vec<u64>,
    reads: Vec<FieldId>,
    writes: Vec<FieldId>,
    /// Per mille: a host call with random arguments in a routine.
    call_rate: u64,
    /// Per mille: a fault in a routine.
    fault_rate: u64,
    /// Timers armed at init, and the largest re-arm delay in ns.
    timers: u64,
    timer_delay: u64,
    enables: bool,
}

/// Writable fields every host supports.
const WRITABLE: [FieldId; 3] = [
    field::SENDING_HALTED,
    field::CONGESTION_WINDOW,
    field::SSTHRESH,
];

/// Standard frame types it may observe.
const STANDARD_TYPES: [u64; 8] = [0x00, 0x01, 0x02, 0x06, 0x08, 0x10, 0x1a, 0x1e];

impl Plan {
    fn new(r: &mut Rng) -> Plan {
        let frame_type = FRAME_BASE + r.below(16);
        let position = match r.below(3) {
            0 => SendPosition::First,
            1 => SendPosition::AfterAck,
            _ => SendPosition::End,
        };
        let registration = FrameRegistration {
            frame_type,
            position,
            ack_eliciting: r.chance(600),
            in_flight: r.chance(600),
        };
        let mut transport_parameters = Vec::new();
        for _ in 0..r.below(4) {
            transport_parameters.push(match r.below(10) {
                // A standard id or one the stack sends: the host refuses it.
                0 => r.below(0x20),
                _ => TP_BASE + r.below(256),
            });
        }
        let observed_frames = STANDARD_TYPES
            .iter()
            .copied()
            .filter(|_| r.chance(300))
            .collect();
        let reads = FIELDS.iter().copied().filter(|_| r.chance(700)).collect();
        // Only fields every host can write: a host refuses a plugin that
        // asks for more at load, which the conformance cases check.
        let writes = WRITABLE.iter().copied().filter(|_| r.chance(500)).collect();
        Plan {
            frame_type,
            registration,
            transport_parameters,
            observed_frames,
            reads,
            writes,
            call_rate: [0, 5, 50, 300][r.below(4) as usize],
            fault_rate: [0, 0, 1, 5, 30][r.below(5) as usize],
            timers: r.below(6),
            timer_delay: [0, 1_000, 1_000_000, 20_000_000][r.below(4) as usize],
            enables: r.chance(900),
        }
    }
}

struct Chaos {
    plan: Plan,
    rng: Rng,
    /// A buffer handle kept past its call.
    kept_handle: Option<u32>,
    /// Memory held on purpose.
    hoard: Vec<Vec<u8>>,
}

static STATE: Global = Global(RefCell::new(None));

struct Global(RefCell<Option<Chaos>>);
// SAFETY: a wasm plugin instance has one thread.
unsafe impl Sync for Global {}

/// Run `f` on the instance's state. A host that re-entered the plugin would
/// make `borrow_mut` panic, which traps: re-entry is not this plugin's test.
fn with<R>(f: impl FnOnce(&mut Chaos) -> R) -> R {
    let mut state = STATE.0.borrow_mut();
    let chaos = state.get_or_insert_with(|| {
        let (plan, rng) = match fuzz_input() {
            Some(input) => {
                let mut rng = Rng::from_input(input);
                (Plan::new(&mut rng), rng)
            }
            None => {
                let seed = seed();
                (
                    Plan::new(&mut Rng::seeded(seed)),
                    Rng::seeded(seed ^ 0x5eed),
                )
            }
        };
        Chaos {
            plan,
            rng,
            kept_handle: None,
            hoard: Vec::new(),
        }
    });
    f(chaos)
}

impl Chaos {
    /// Maybe commit a fault, maybe make random host calls.
    fn step(&mut self) -> Result<(), Error> {
        if self.rng.chance(self.plan.fault_rate) {
            self.fault()?;
        }
        let mut calls = 0;
        while calls < 4 && self.rng.chance(self.plan.call_rate) {
            self.random_call();
            calls += 1;
        }
        Ok(())
    }

    fn fault(&mut self) -> Result<(), Error> {
        match self.rng.below(9) {
            0 => trap(),
            1 => {
                // Spin until the CPU deadline interrupts the call.
                let mut x = self.rng.next();
                loop {
                    x = x.rotate_left(5) ^ 0x9e37;
                    core::hint::black_box(x);
                }
            }
            2 => {
                // Grow memory until the limit.
                loop {
                    self.hoard.push(vec![1u8; 1 << 20]);
                }
            }
            3 => {
                // A log flood: many records of 4 KiB.
                let big = "x".repeat(4096);
                for _ in 0..25 {
                    let _ = host::log(LogLevel::Info, &big, &[]);
                }
                Ok(())
            }
            4 => {
                if let Some(handle) = self.kept_handle {
                    // SAFETY: deliberately not: the handle is stale.
                    let stale = unsafe { OutBuf::from_handle(handle) };
                    let _ = stale.put(&[0xff]);
                    core::mem::forget(stale);
                }
                Ok(())
            }
            5 => Err(Error::plugin(self.rng.value())),
            6 => Err(Error::invalid_argument("chaos")),
            7 => {
                // Re-enter itself.
                let _ = host::call_plugin_control(CONTROL, &[]);
                Ok(())
            }
            _ => {
                self.hoard.push(vec![0u8; self.rng.below(4 << 20) as usize]);
                Ok(())
            }
        }
    }

    fn random_field(&mut self) -> FieldRef {
        // Mostly fields of the ABI, sometimes an identifier no host knows.
        let id = match self.rng.below(10) {
            0 => self.rng.value() as u32,
            _ => FIELDS[self.rng.below(FIELDS.len() as u64) as usize],
        };
        let space = match self.rng.below(5) {
            0 => Some(PnSpace::Initial),
            1 => Some(PnSpace::Handshake),
            2 => Some(PnSpace::ApplicationData),
            _ => None,
        };
        FieldRef { id, space }
    }

    fn random_value(&mut self) -> PluginVal {
        match self.rng.below(8) {
            0 => PluginVal::None,
            1 => PluginVal::Bool(self.rng.chance(500)),
            2 => PluginVal::U32(self.rng.value() as u32),
            3 => PluginVal::U64(self.rng.value()),
            4 => PluginVal::Duration(self.rng.value()),
            5 => PluginVal::Bytes(vec![0xab; self.rng.below(64) as usize]),
            6 => PluginVal::String(String::from("chaos")),
            _ => PluginVal::S64(self.rng.value() as i64),
        }
    }

    /// A frame as data: a standard or its own type, with a well-formed
    /// layout or random values and bytes.
    fn random_frame(&mut self) -> Frame {
        let (frame_type, values) = match self.rng.below(8) {
            0 => (0x01, Vec::new()),
            1 => (0x00, vec![self.rng.below(2000)]),
            2 => (0x1a, vec![self.rng.next()]),
            3 => (0x10, vec![self.rng.value()]),
            4 => (0x1e, Vec::new()),
            5 => (0x19, vec![self.rng.value()]),
            6 => (self.rng.below(0x40), Vec::new()),
            _ => (self.plan.frame_type, vec![self.rng.value()]),
        };
        let mut values = values;
        if self.rng.chance(100) {
            values.extend((0..self.rng.below(6)).map(|_| self.rng.value()));
        }
        let data = match self.rng.chance(100) {
            true => vec![0xcd; self.rng.below(64) as usize],
            false => Vec::new(),
        };
        Frame {
            frame_type,
            values,
            data,
        }
    }

    fn random_call(&mut self) {
        match self.rng.below(13) {
            0 => {
                let f = self.random_field();
                let _ = host::get_field(f);
            }
            1 => {
                let fields: Vec<FieldRef> = (0..self.rng.below(30))
                    .map(|_| self.random_field())
                    .collect();
                let _ = host::get_fields(&fields);
            }
            2 => {
                let f = self.random_field();
                let v = match self.random_value() {
                    PluginVal::Bool(true) if matches!(f.id, field::SENDING_HALTED) => {
                        PluginVal::Bool(false)
                    }
                    v => v,
                };
                let _ = host::set_field(f, &v);
            }
            3 => {
                let f = FieldRef {
                    id: WRITABLE[self.rng.below(3) as usize],
                    space: None,
                };
                let v = match f.id {
                    // Halting for good would stall the connection by design:
                    // the plugin only ever releases it.
                    field::SENDING_HALTED => PluginVal::Bool(false),
                    _ => PluginVal::U64(self.rng.value()),
                };
                let _ = host::set_field(f, &v);
            }
            4 => {
                let frame = self.random_frame();
                let _ = host::send_frame(&frame);
            }
            5 => {
                // One registration in three is held while its frame is in
                // flight (ABI 0.2.5), from the same draws as before.
                let (frame_type, one_in_flight) = match self.rng.below(3) {
                    0 => (self.rng.value(), false),
                    held => (FRAME_BASE + self.rng.below(16), held == 2),
                };
                let reg = FrameRegistration {
                    frame_type,
                    ..self.plan.registration
                };
                let _ = match one_in_flight {
                    true => host::register_frame_one_in_flight(reg),
                    false => host::register_frame(reg),
                };
            }
            6 => {
                let _ = host::unregister_frame(FRAME_BASE + self.rng.below(16));
            }
            7 => {
                let _ = host::register_transport_parameter(self.rng.value());
            }
            8 => {
                let at = host::now().saturating_add(self.rng.below(self.plan.timer_delay + 1));
                let _ = host::set_timer(self.rng.below(8), at);
            }
            9 => {
                let _ = host::cancel_timer(self.rng.value());
            }
            10 => {
                let _ = host::random_bytes(self.rng.below(70_000) as u32);
            }
            11 => {
                let args: Vec<PluginVal> = (0..self.rng.below(4))
                    .map(|_| self.random_value())
                    .collect();
                let id = match self.rng.below(2) {
                    0 => CONTROL,
                    _ => self.rng.value(),
                };
                let _ = host::call_plugin_control(id, &args);
            }
            _ => match self.random_value() {
                // A drawn u64 also says how many values to pass as records
                // of a 2-key shape (ABI 0.2.6), often not whole records,
                // with no draw more than before.
                PluginVal::U64(x) => {
                    let keys = [
                        (String::from("a"), LogValueKind::U64),
                        (String::from("b"), LogValueKind::Duration),
                    ];
                    let values = vec![x; (x % 7) as usize];
                    let _ = host::declare_log_shape(LogLevel::Debug, "chaos", &keys)
                        .and_then(|shape| host::log_shaped_records(shape, &values));
                }
                v => {
                    let _ = host::log(LogLevel::Debug, "chaos", &[(String::from("v"), v)]);
                }
            },
        }
    }

    /// Write `len` bytes of its frame, or a lie about it.
    fn frame_bytes(&mut self, frame_type: u64, len: u64) -> Vec<u8> {
        let mut bytes = Vec::new();
        match self.rng.below(20) {
            // Another frame than the one registered.
            0 => bytes.extend_from_slice(&[0x1c, 0x00, 0x00, 0x00]),
            1 => bytes.extend(vec![0xffu8; len as usize + 1]),
            2 => {}
            // Its frame: the type, one byte that gives the body's length,
            // the body (what test-chaos-sink parses).
            _ => {
                encode_varint(frame_type, &mut bytes);
                let body = (len as usize).saturating_sub(bytes.len() + 1).min(255);
                bytes.push(body as u8);
                bytes.resize(bytes.len() + body, 0x5a);
                bytes.truncate(len as usize);
            }
        }
        bytes
    }
}

fn varint_len(v: u64) -> u64 {
    varint::len(v).unwrap_or(8) as u64
}

fn encode_varint(v: u64, out: &mut Vec<u8>) {
    varint::encode(v, out);
}

struct ChaosPlugin;

impl Guest for ChaosPlugin {
    fn manifest() -> PluginManifest {
        with(|c| {
            let p = &c.plan;
            let mut bindings = Vec::new();
            let mut bind = |routine, anchor, param| {
                bindings.push(Binding {
                    routine,
                    anchor,
                    param,
                })
            };
            for routine in [
                routine::SHOULD_SEND_FRAME,
                routine::WRITE_FRAME,
                routine::ON_FRAME_RESERVED,
                routine::NOTIFY_FRAME,
                routine::PARSE_FRAME,
                routine::PROCESS_FRAME,
                routine::LOG_FRAME,
            ] {
                bind(routine, Anchor::Define, p.frame_type);
            }
            for &id in &p.transport_parameters {
                bind(routine::WRITE_TRANSPORT_PARAMETER, Anchor::Define, id);
                bind(routine::DECODE_TRANSPORT_PARAMETER, Anchor::Define, id);
            }
            for &ty in &p.observed_frames {
                bind(routine::PROCESS_FRAME, Anchor::After, ty);
                bind(routine::PROCESS_FRAME, Anchor::Before, ty);
            }
            bind(routine::PLUGIN_CONTROL, Anchor::Define, CONTROL);
            PluginManifest {
                name: String::from("chaos"),
                version: String::from("0.2.0"),
                abi_version: String::from(corequic_sdk::ABI_VERSION),
                bindings,
                reads: p.reads.clone(),
                writes: p.writes.clone(),
                permissions: vec![
                    permission::TIMERS,
                    permission::RANDOMNESS,
                    permission::LOGGING,
                    permission::REGISTRATION,
                    permission::SEND_FRAMES,
                    permission::PLUGIN_CONTROL,
                ],
            }
        })
    }

    fn init() -> Result<(), Error> {
        with(|c| {
            let _ = host::register_frame(c.plan.registration);
            for id in c.plan.transport_parameters.clone() {
                let _ = host::register_transport_parameter(id);
            }
            for id in 0..c.plan.timers {
                let delay = c.rng.below(c.plan.timer_delay + 1);
                let _ = host::set_timer(id, host::now().saturating_add(delay));
            }
            if c.plan.enables {
                host::enable();
            }
            c.step()
        })
    }

    fn write_transport_parameter(_: Anchor, id: u64, out: &OutBuf) -> Result<(), Error> {
        with(|c| {
            c.kept_handle = Some(out.handle());
            c.step()?;
            let len = match c.rng.below(10) {
                0 => out.capacity() + 1,
                1 => c.rng.below(2048),
                _ => c.rng.below(16),
            };
            let _ = out.put(&vec![(id & 0xff) as u8; len as usize]);
            Ok(())
        })
    }

    fn decode_transport_parameter(_: Anchor, _: u64, value: &InBuf) -> Result<(), Error> {
        with(|c| {
            let _ = value.read(c.rng.value(), c.rng.value());
            c.step()
        })
    }

    fn should_send_frame(_: Anchor, _: u64, _: SendContext) -> Result<bool, Error> {
        with(|c| {
            c.step()?;
            Ok(c.rng.chance(300))
        })
    }

    fn write_frame(
        _: Anchor,
        frame_type: u64,
        ctx: SendContext,
        out: &OutBuf,
    ) -> Result<Option<u64>, Error> {
        with(|c| {
            c.kept_handle = Some(out.handle());
            c.step()?;
            let tag = c.rng.value();
            // Mostly an honest length, sometimes none, more than the room or
            // a frame written and then withdrawn.
            let len = match c.rng.below(20) {
                0 => 0,
                1 => ctx.room + 1 + c.rng.below(64),
                _ => (varint_len(frame_type) + 1 + (tag % 64)).min(ctx.room),
            };
            let bytes = c.frame_bytes(frame_type, len);
            let _ = out.put(&bytes);
            Ok(c.rng.chance(900).then_some(tag))
        })
    }

    fn on_frame_reserved(_: Anchor, _: ExtFrame, _: SendContext) -> Result<(), Error> {
        with(|c| c.step())
    }

    fn notify_frame(_: Anchor, _: ExtFrame, _: FrameOutcome) -> Result<(), Error> {
        with(|c| c.step())
    }

    fn parse_frame(_: Anchor, frame_type: u64, payload: &InBuf) -> Result<ParsedFrame, Error> {
        with(|c| {
            c.step()?;
            let consumed = match c.rng.below(10) {
                0 => c.rng.value(),
                1 => payload.len().saturating_add(1),
                _ => payload.len().min(63),
            };
            Ok(ParsedFrame {
                frame: ExtFrame { frame_type, tag: 0 },
                consumed,
            })
        })
    }

    fn process_frame(_: Anchor, _: Frame, _: RxContext) -> Result<(), Error> {
        with(|c| c.step())
    }

    fn log_frame(_: Anchor, frame: Frame) -> Result<String, Error> {
        with(|c| {
            c.step()?;
            Ok(format!("{frame:?}").repeat(c.rng.below(4) as usize))
        })
    }

    fn on_plugin_timeout(id: u64, now: u64) -> Result<(), Error> {
        with(|c| {
            c.step()?;
            if c.rng.chance(800) {
                let delay = c.rng.below(c.plan.timer_delay + 1);
                let _ = host::set_timer(id, now.saturating_add(delay));
            }
            Ok(())
        })
    }

    fn plugin_control(_: u64, args: Vec<PluginVal>) -> Result<Vec<PluginVal>, Error> {
        with(|c| {
            c.step()?;
            Ok(args)
        })
    }

    fn call_routine(
        _: RoutineId,
        _: Anchor,
        _: u64,
        args: Vec<PluginVal>,
    ) -> Result<Vec<PluginVal>, Error> {
        with(|c| {
            c.step()?;
            Ok(args)
        })
    }
}

corequic_sdk::export_guest!(ChaosPlugin);
