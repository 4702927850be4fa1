//! Criterion benchmarks of the runtime through the mock host, named like
//! pluginop's benches so the numbers can be put side by side.
//! Each wasm benchmark that has a native counterpart is measured in the same
//! run, so the wasm/native ratio is meaningful on a noisy machine.
//!
//! Needs the plugin components: `make bench` builds them first.

mod common;

use common::{EVICT_BYTES, bench_pair, evicted, plugin_bytes, send_ctx};
use corequic_mock::{MockPair, get_varint, put_varint};
use corequic_runtime::abi::{
    AckFrame, Anchor, FieldId, FieldRef, Frame, FrameOutcome, PacketType, PluginVal, PnSpace,
    RxContext,
};
use corequic_runtime::{
    Compiler, Grants, HostCapabilities, HostConnection, RoutineError, Runtime, RuntimeConfig,
    WrittenFrame,
};
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::{Duration, Instant};

const FRAME_MAX_DATA: u64 = 0x3f5e;
const FRAME_DUMMY: u64 = 0x42;

/// The component bytes of plugin `name` as built against ABI `abi_version`
/// and kept in `plugins/prebuilt/`.
fn prebuilt_bytes(abi_version: &str, name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../plugins/prebuilt")
        .join(abi_version)
        .join(format!("{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn rx_ctx(pn: u64) -> RxContext {
    RxContext {
        packet_type: PacketType::OneRtt,
        space: PnSpace::ApplicationData,
        packet_number: pn,
        now: 0,
    }
}

fn field(id: FieldId) -> FieldRef {
    FieldRef { id, space: None }
}

/// Algorithm 1 on the client at the after-ACK position, then the receive
/// path of the first frame on the server (`receive_frame`: the plugin's
/// `receive-frame`, or `parse-frame` and `process-frame`). Returns the
/// frame type.
fn send_and_receive(
    pair: &mut MockPair,
    packet: &mut Vec<u8>,
    written: &mut Vec<WrittenFrame>,
) -> u64 {
    packet.clear();
    written.clear();
    let c = &mut pair.client;
    c.plugins
        .write_frames(&mut c.conn, send_ctx(1), packet, written);
    let s = &mut pair.server;
    let mut pos = 0;
    let ty = get_varint(packet, &mut pos).expect("type");
    s.plugins
        .receive_frame(&mut s.conn, ty, &packet[pos..], rx_ctx(1))
        .expect("receive");
    ty
}

fn benches(c: &mut Criterion) {
    let runtime =
        Runtime::new(RuntimeConfig::default(), HostCapabilities::full()).expect("runtime");
    let load = |name: &str| {
        runtime
            .load_bytes(name, &plugin_bytes(name), &Grants::all())
            .expect("load")
    };
    let dummy = load("dummy");
    let reference = [load("padding"), load("probe"), load("bdp"), dummy.clone()];

    let mut pair = bench_pair(&runtime);

    c.bench_function("run and return", |b| {
        let ep = &mut pair.client;
        b.iter(|| {
            ep.plugins
                .plugin_control(&mut ep.conn, 0, &[])
                .expect("call")
        })
    });
    // The same call after the caches were filled with other data, as a
    // stack's packet work does between two plugin calls: close to what a
    // call costs in a transfer (docs/measurements.md).
    c.bench_function("run and return, caches evicted", |b| {
        let ep = &mut pair.client;
        let mut other = vec![0u8; EVICT_BYTES];
        b.iter_custom(|iters| {
            evicted(&mut other, iters, || {
                ep.plugins
                    .plugin_control(&mut ep.conn, 0, &[])
                    .expect("call")
            })
        })
    });
    c.bench_function("input outputs", |b| {
        let ep = &mut pair.client;
        let args = [PluginVal::S64(42), PluginVal::S64(7)];
        b.iter(|| {
            ep.plugins
                .plugin_control(&mut ep.conn, 1, black_box(&args))
                .expect("call")
        })
    });
    c.bench_function("increase-max-data", |b| {
        let ep = &mut pair.client;
        b.iter(|| {
            ep.plugins
                .plugin_control(&mut ep.conn, 2, &[])
                .expect("call")
        })
    });

    // MAX_DATA-like frame: the sender reads its receive limit and writes the
    // frame; the receiver parses it and sets its send limit.
    let mut group = c.benchmark_group("max-data send and receive");
    group.bench_function("native", |b| {
        let (client, server) = (&mut pair.client.conn, &mut pair.server.conn);
        let mut packet = Vec::with_capacity(1200);
        b.iter(|| {
            packet.clear();
            let PluginVal::U64(limit) = client.get_field(field(FieldId::MaxRxData)).expect("read")
            else {
                unreachable!()
            };
            put_varint(FRAME_MAX_DATA, &mut packet);
            put_varint(black_box(limit), &mut packet);
            let mut pos = 0;
            let ty = get_varint(&packet, &mut pos).expect("type");
            let value = get_varint(&packet, &mut pos).expect("value");
            assert_eq!(ty, FRAME_MAX_DATA);
            server
                .set_field(field(FieldId::MaxTxData), PluginVal::U64(value))
                .expect("write");
        })
    });
    group.bench_function("wasm", |b| {
        let mut packet = Vec::with_capacity(1200);
        let mut written = Vec::new();
        b.iter(|| send_and_receive(&mut pair, &mut packet, &mut written))
    });
    group.finish();

    // DUMMY ("super-frame"): send, receive, and the acknowledgement that
    // frees the in-flight slot for the next iteration. The current DUMMY
    // sends and receives through the fused routines of ABI 0.2.4
    // (`send-frame`, `receive-frame`) and is offered again on the
    // acknowledgement with no call (0.2.5); its build against 0.2.0,
    // measured in the same run, through the separate ones and
    // `notify-frame`.
    let dummy_0_2_0 = runtime
        .load_bytes(
            "dummy-0.2.0",
            &prebuilt_bytes("0.2.0", "dummy"),
            &Grants::all(),
        )
        .expect("load");
    for (name, dummy) in [
        ("super-frame send and receive", &dummy),
        (
            "super-frame send and receive, separate routines (DUMMY of 0.2.0)",
            &dummy_0_2_0,
        ),
    ] {
        let mut dummies = MockPair::new(
            &runtime,
            std::slice::from_ref(dummy),
            std::slice::from_ref(dummy),
            1200,
            0,
        )
        .expect("pair");
        dummies.handshake();
        c.bench_function(name, |b| {
            let mut packet = Vec::with_capacity(1200);
            let mut written = Vec::new();
            b.iter(|| {
                assert_eq!(
                    send_and_receive(&mut dummies, &mut packet, &mut written),
                    FRAME_DUMMY
                );
                // The current DUMMY binds no `notify-frame` (ABI 0.2.5):
                // the host offers its held registration again itself.
                let c = &mut dummies.client;
                match c
                    .plugins
                    .notify_frame(&mut c.conn, written[0].frame, FrameOutcome::Acked)
                {
                    Ok(()) | Err(RoutineError::NotBound) => {}
                    Err(e) => panic!("notify-frame: {e}"),
                }
            })
        });
    }

    // The ACK logger observing an ACK frame: one `log` call per frame while
    // its log budget lasts, with the mock keeping every record as the
    // endpoints do for their stats; then the same call once the budget is
    // spent and records are only counted. A fresh connection every
    // `LOGGED_PER_CONNECTION` calls keeps the first case within the budget;
    // only the calls are timed.
    let ack_logger = load("ack-logger");
    let ack = Frame::Ack(AckFrame {
        largest_acknowledged: 1_000,
        ack_delay: 25_000,
        ranges: vec![(990, 1_000), (900, 980)],
        ecn: None,
    });
    // A multiple of the 64 records of a batch of observe-frames.
    const LOGGED_PER_CONNECTION: u64 = 1_024;
    let mut group = c.benchmark_group("ack-logger observes an ACK");
    // ACKs observed by the ACK logger, as a stack reports them after it
    // processed them, on fresh connections of LOGGED_PER_CONNECTION ACKs
    // each (the log budget allows that many records); `keep` is the mock's
    // `keep_logs`. Since 0.2.3 the logger is entered once per 64 ACKs
    // (`observe-frames`); with `COREQUIC_PLUGIN_DIR` pointing at a build of
    // it that binds `process-frame`, once per ACK.
    // With `evict`, 16 MiB are written before each call and only the calls
    // are timed, as for run-and-return above: a server calls the logger once
    // every 25-45 packets of its own work (docs/measurements.md).
    let mut other = vec![0u8; EVICT_BYTES];
    let mut logged = |iters: u64, keep: bool, evict: bool| {
        let mut timed = Duration::ZERO;
        let mut left = iters;
        while left > 0 {
            let calls = left.min(LOGGED_PER_CONNECTION);
            let mut ep = MockPair::new(&runtime, std::slice::from_ref(&ack_logger), &[], 1200, 0)
                .expect("pair")
                .client;
            ep.conn.keep_logs = keep;
            let mut pn = 0;
            let mut observe = || {
                ep.plugins
                    .observe_frame(&mut ep.conn, Anchor::After, black_box(&ack), rx_ctx(pn));
                pn += 1;
            };
            if evict {
                timed += evicted(&mut other, calls, observe);
            } else {
                let start = Instant::now();
                for _ in 0..calls {
                    observe();
                }
                timed += start.elapsed();
            }
            // The records of a last batch that is not full (when `iters` is
            // not a multiple of 64), as the connection's end delivers them.
            let start = Instant::now();
            ep.plugins.deliver_observations(&mut ep.conn);
            timed += start.elapsed();
            assert_eq!(ep.conn.logged, calls);
            if keep {
                assert_eq!(ep.conn.log_count("ack-logger", None), calls as usize);
            }
            left -= calls;
        }
        timed
    };
    group.bench_function("logged and kept", |b| {
        b.iter_custom(|iters| logged(iters, true, false))
    });
    // The runtime's own cost of a record: a host that keeps records copies
    // them (the endpoints into one text buffer, the mock whole), which the
    // benchmark above includes.
    group.bench_function("logged, the host keeps nothing", |b| {
        b.iter_custom(|iters| logged(iters, false, false))
    });
    group.bench_function("logged, the host keeps nothing, caches evicted", |b| {
        b.iter_custom(|iters| logged(iters, false, true))
    });
    let mut spent = MockPair::new(&runtime, std::slice::from_ref(&ack_logger), &[], 1200, 0)
        .expect("pair")
        .client;
    while spent.plugins.stats()[0].logs_dropped == 0 {
        spent
            .plugins
            .observe_frame(&mut spent.conn, Anchor::After, &ack, rx_ctx(0));
    }
    group.bench_function("budget spent", |b| {
        b.iter(|| {
            spent
                .plugins
                .observe_frame(&mut spent.conn, Anchor::After, black_box(&ack), rx_ctx(1))
        })
    });
    group.finish();

    let mut group = c.benchmark_group("loading plugins");
    group.sample_size(10);
    let padding = plugin_bytes("padding");
    group.bench_function("compile", |b| {
        b.iter(|| {
            runtime
                .load_bytes("padding", black_box(&padding), &Grants::all())
                .expect("load")
        })
    });
    // A process start with a warm on-disk cache: the four reference plugins
    // that the interop tests load (ack logger, BDP, DUMMY, probe), each
    // read, checked against its length and CRC-32, and deserialized.
    let cache = std::env::temp_dir().join(format!("corequic-bench-cache-{}", std::process::id()));
    let cached = Runtime::new(
        RuntimeConfig {
            cache_dir: Some(cache.clone()),
            ..RuntimeConfig::default()
        },
        HostCapabilities::full(),
    )
    .expect("runtime");
    let four: Vec<(&str, Vec<u8>)> = ["ack-logger", "bdp", "dummy", "probe"]
        .into_iter()
        .map(|name| (name, plugin_bytes(name)))
        .collect();
    let load_four = || {
        for (name, bytes) in &four {
            cached
                .load_bytes(name, black_box(bytes), &Grants::all())
                .expect("load");
        }
    };
    load_four();
    group.bench_function("load 4 reference plugins from a warm cache", |b| {
        b.iter(load_four)
    });
    group.finish();
    let _ = std::fs::remove_dir_all(&cache);

    // wasmtime's baseline compiler (RuntimeConfig::compiler): compiling,
    // and the call paths above, for the choice between the two compilers.
    let winch = Runtime::new(
        RuntimeConfig {
            compiler: Compiler::Winch,
            ..RuntimeConfig::default()
        },
        HostCapabilities::full(),
    )
    .expect("runtime");
    let mut group = c.benchmark_group("winch");
    group.sample_size(10);
    group.bench_function("compile", |b| {
        b.iter(|| {
            winch
                .load_bytes("padding", black_box(&padding), &Grants::all())
                .expect("load")
        })
    });
    let mut winch_pair = bench_pair(&winch);
    group.bench_function("run and return", |b| {
        let ep = &mut winch_pair.client;
        b.iter(|| {
            ep.plugins
                .plugin_control(&mut ep.conn, 0, &[])
                .expect("call")
        })
    });
    group.bench_function("max-data send and receive", |b| {
        let mut packet = Vec::with_capacity(1200);
        let mut written = Vec::new();
        b.iter(|| send_and_receive(&mut winch_pair, &mut packet, &mut written))
    });
    group.finish();

    // Per connection: instantiation alone, and with every plugin's `init`.
    let mut group = c.benchmark_group("instantiate 4 reference plugins");
    group.bench_function("instantiate", |b| {
        b.iter(|| runtime.connection(&reference).expect("attach"))
    });
    let mut conn = pair.client.conn.clone();
    group.bench_function("instantiate and init", |b| {
        b.iter(|| {
            let mut set = runtime.connection(&reference).expect("attach");
            assert!(set.init(&mut conn).is_empty());
            set
        })
    });
    group.finish();
}

criterion_group!(runtime_benches, benches);
criterion_main!(runtime_benches);
