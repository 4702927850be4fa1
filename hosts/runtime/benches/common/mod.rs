//! What the runtime's benchmark files share: the plugin components, the
//! send context of a 1-RTT packet, a mock connection pair running the
//! `test-bench` plugin, and calls timed with the caches evicted.

use corequic_mock::MockPair;
use corequic_runtime::abi::{PacketType, PnSpace, SendContext, SendPosition};
use corequic_runtime::{Grants, Runtime};
use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Bytes written between two timed calls: more than this machine's L2 and
/// half its L3.
pub const EVICT_BYTES: usize = 16 << 20;

/// Time `iters` calls of `call`, with `other` written through before each
/// one, as a stack's packet work does between two plugin calls.
pub fn evicted<R>(other: &mut [u8], iters: u64, mut call: impl FnMut() -> R) -> Duration {
    let mut timed = Duration::ZERO;
    for i in 0..iters {
        for line in other.chunks_mut(64) {
            line[0] = line[0].wrapping_add(i as u8);
        }
        black_box(&*other);
        let start = Instant::now();
        black_box(call());
        timed += start.elapsed();
    }
    timed
}

/// A plugin component built by `make plugins` (the folder can be
/// overridden with `COREQUIC_PLUGIN_DIR`).
pub fn plugin_bytes(name: &str) -> Vec<u8> {
    let dir = std::env::var_os("COREQUIC_PLUGIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../build/plugins"));
    let path = dir.join(format!("{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e} (run `make plugins`)", path.display()))
}

/// The context of 1-RTT packet `pn` at the after-ACK position, with room
/// for 1,200 bytes.
pub fn send_ctx(pn: u64) -> SendContext {
    SendContext {
        packet_type: PacketType::OneRtt,
        space: PnSpace::ApplicationData,
        packet_number: pn,
        position: SendPosition::AfterAck,
        room: 1200,
        now: 0,
    }
}

/// A client and a server on `runtime`, each with `test-bench`, after their
/// handshake.
pub fn bench_pair(runtime: &Runtime) -> MockPair {
    let bench = runtime
        .load_bytes("test-bench", &plugin_bytes("test-bench"), &Grants::all())
        .expect("load");
    let mut pair = MockPair::new(
        runtime,
        std::slice::from_ref(&bench),
        std::slice::from_ref(&bench),
        1200,
        0,
    )
    .expect("pair");
    pair.handshake();
    pair
}
