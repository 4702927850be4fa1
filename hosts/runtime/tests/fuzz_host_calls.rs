//! In-process fuzzing of the host-call surface against the mock host.
//!
//! The chaos plugin (plugins/testing/chaos) draws every decision from a byte
//! stream: its manifest, registrations and transport parameters, the host
//! calls it makes from each routine with valid, boundary and out-of-range
//! arguments, and the faults it commits. Here proptest writes that stream
//! into a copy of the component, loads it on one side of a [`MockPair`] (the
//! other side plugin-free or with `test-chaos-sink`), runs a transfer on the
//! virtual clock and checks what every host must guarantee whatever a plugin
//! does (spec section 10):
//!
//! - nothing panics (runtime, mock host);
//! - the run ends: the transfer completes or a side closes before the
//!   virtual deadline, and the clock is not held in one place;
//! - no stream byte arrives corrupted;
//! - a close the plugin causes names it;
//! - the plugin's log output stays within its budget.
//!
//! Inputs that once broke an invariant are kept in
//! `fuzz_host_calls.proptest-regressions` and replayed first; the corpus in
//! `corpus/host-calls/` (one input per outcome seen, as hex) is replayed by
//! [`corpus_keeps_the_invariants`]. `COREQUIC_FUZZ_CASES` sets the number of
//! new inputs (default 32, `make test`); `COREQUIC_FUZZ_CORPUS_OUT=DIR`
//! writes an input for every outcome not seen before into DIR.

mod common;

use common::{MS, MTU, plugin, plugin_path, runtime};
use corequic_mock::{MockPair, stream_byte};
use corequic_runtime::Grants;
use corequic_runtime::LogRecord;
use corequic_runtime::abi::PLUGIN_FAILURE_ERROR_CODE;
use corequic_runtime::config::MAX_LOG_BYTES;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Marker of the chaos plugin's fuzz block: then a u32 length and the bytes.
const FUZZ_MARKER: &[u8] = b"CQFUZZ!!";
/// The most bytes the block holds (the plugin's `FUZZ_CAPACITY`).
const FUZZ_CAPACITY: usize = 4096;
/// The chaos plugin's own plugin-control id, which the harness also calls.
const CHAOS_CONTROL: u64 = 0x3c_0001;
/// Stream bytes the server sends.
const TRANSFER: u64 = 200_000;
/// Virtual time by which the run must have ended.
const DEADLINE: u64 = 30_000 * MS;
/// Steps (arrivals and timer firings) a run may take.
const MAX_STEPS: u64 = 200_000;
/// When the embedder calls the plugin's control routine, as `make chaos` does.
const CONTROL_AT: u64 = 50 * MS;

/// How one input ended, in a word or two (the corpus keeps one per kind).
#[derive(Debug)]
struct Outcome {
    kind: String,
}

/// A copy of the chaos component whose decisions come from `input`.
fn fuzzed_component(input: &[u8]) -> Vec<u8> {
    static COMPONENT: OnceLock<Vec<u8>> = OnceLock::new();
    let component = COMPONENT
        .get_or_init(|| std::fs::read(plugin_path("test-chaos")).expect("test-chaos.wasm reads"));
    let at = component
        .windows(FUZZ_MARKER.len())
        .position(|w| w == FUZZ_MARKER)
        .expect("the chaos plugin holds its fuzz block")
        + FUZZ_MARKER.len();
    let input = &input[..input.len().min(FUZZ_CAPACITY)];
    let mut out = component.clone();
    out[at..at + 4].copy_from_slice(&(input.len() as u32).to_le_bytes());
    out[at + 4..at + 4 + input.len()].copy_from_slice(input);
    out
}

/// Run one input; `Err` names the broken invariant.
fn run(input: &[u8], subject_is_server: bool, peer_sink: bool) -> Result<Outcome, String> {
    // A plugin refused at load or attach, with an error, is a kept promise.
    let refused = |stage: &str, e: corequic_runtime::LoadError| Outcome {
        kind: format!(
            "refused at {stage}: {}",
            e.to_string().split(':').next().unwrap_or("")
        ),
    };
    let chaos = match runtime().load_bytes("chaos", &fuzzed_component(input), &Grants::all()) {
        Ok(p) => p,
        Err(e) => return Ok(refused("load", e)),
    };
    let peer: Vec<_> = if peer_sink {
        vec![plugin("test-chaos-sink")]
    } else {
        Vec::new()
    };
    let subject = vec![chaos];
    let (client, server) = if subject_is_server {
        (&peer, &subject)
    } else {
        (&subject, &peer)
    };
    let mut pair = match MockPair::new(runtime(), client, server, MTU, 10 * MS) {
        Ok(pair) => pair,
        Err(e) => return Ok(refused("attach", e)),
    };
    pair.handshake();
    pair.server.send_stream(TRANSFER);

    let mut control_called = false;
    let mut steps = 0u64;
    let ended = |p: &MockPair| {
        p.client.stream_complete(TRANSFER) || p.client.closed.is_some() || p.server.closed.is_some()
    };
    while !ended(&pair) && pair.now <= DEADLINE {
        if !control_called && pair.now >= CONTROL_AT {
            control_called = true;
            let ep = if subject_is_server {
                &mut pair.server
            } else {
                &mut pair.client
            };
            let _ = ep.plugins.plugin_control(&mut ep.conn, CHAOS_CONTROL, &[]);
        }
        steps += 1;
        if steps > MAX_STEPS {
            return Err(format!(
                "the run did not end within {MAX_STEPS} steps (virtual clock at {} ms)",
                pair.now / MS
            ));
        }
        if !pair.step() {
            break;
        }
    }

    let received = pair.client.stream_received();
    if let Some(i) = received
        .iter()
        .enumerate()
        .position(|(i, b)| *b != 0 && *b != stream_byte(i as u64))
    {
        return Err(format!("stream byte {i} arrived corrupted"));
    }
    let (subject_ep, peer_ep) = if subject_is_server {
        (&pair.server, &pair.client)
    } else {
        (&pair.client, &pair.server)
    };
    let logged: usize = subject_ep
        .conn
        .logs
        .iter()
        .filter(|r| r.plugin == "chaos")
        .map(LogRecord::charged_size)
        .sum();
    if logged > MAX_LOG_BYTES {
        return Err(format!(
            "the plugin logged {logged} bytes, past its budget of {MAX_LOG_BYTES}"
        ));
    }
    if let Some(closed) = &subject_ep.closed
        && closed.error_code == PLUGIN_FAILURE_ERROR_CODE
        && !closed.reason.contains("chaos")
    {
        return Err(format!(
            "a close for a plugin failure does not name the plugin: {:?}",
            closed.reason
        ));
    }
    let kind = if pair.client.stream_complete(TRANSFER) {
        "byte-exact".to_string()
    } else if let Some(closed) = &subject_ep.closed {
        let reason: Vec<&str> = closed.reason.split_whitespace().take(5).collect();
        format!(
            "subject closed {:#x}: {}",
            closed.error_code,
            reason.join(" ")
        )
    } else if let Some(closed) = &peer_ep.closed {
        format!("peer closed {:#x}", closed.error_code)
    } else {
        let server = &pair.server.conn;
        return Err(format!(
            "stalled: {} of {TRANSFER} bytes arrived, nobody closed, virtual clock at {} ms \
             (server: congestion window {}, in flight {}, sending halted {})",
            received.len(),
            pair.now / MS,
            server.cwnd,
            server.bytes_in_flight,
            server.sending_halted
        ));
    };
    Ok(Outcome { kind })
}

/// Writes `input` into `COREQUIC_FUZZ_CORPUS_OUT` if its outcome is new.
fn keep_if_new(input: &[u8], subject_is_server: bool, peer_sink: bool, outcome: &Outcome) {
    let Some(dir) = std::env::var_os("COREQUIC_FUZZ_CORPUS_OUT") else {
        return;
    };
    let dir = PathBuf::from(dir);
    let _ = std::fs::create_dir_all(&dir);
    let key: String = outcome
        .kind
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let role = if subject_is_server {
        "server"
    } else {
        "client"
    };
    let sink = if peer_sink { "-sink" } else { "" };
    let path = dir.join(format!("{role}{sink}-{key}.hex"));
    if !path.exists() {
        let _ = std::fs::write(&path, hex(input));
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut text: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    text.push('\n');
    text
}

fn unhex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text
        .bytes()
        .filter(u8::is_ascii_hexdigit)
        .map(|c| (c as char).to_digit(16).unwrap_or(0) as u8)
        .collect();
    digits
        .chunks(2)
        .map(|p| p[0] << 4 | p.get(1).copied().unwrap_or(0))
        .collect()
}

/// The corpus entry's role and peer, from its name (`server-sink-…`).
fn corpus_roles(path: &Path) -> (bool, bool) {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    (name.starts_with("server"), name.contains("-sink-"))
}

#[test]
fn corpus_keeps_the_invariants() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/host-calls");
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the corpus folder reads")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "hex"))
        .collect();
    entries.sort();
    assert!(
        entries.len() >= 8,
        "the corpus has {} entries",
        entries.len()
    );
    let mut failures = Vec::new();
    for path in &entries {
        let input = unhex(&std::fs::read_to_string(path).expect("corpus entry reads"));
        let (subject_is_server, peer_sink) = corpus_roles(path);
        if let Err(e) = run(&input, subject_is_server, peer_sink) {
            failures.push(format!("{}: {e}", path.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn cases() -> u32 {
    std::env::var("COREQUIC_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32)
}

proptest! {
    #![proptest_config(Config {
        cases: cases(),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..Config::default()
    })]

    #[test]
    fn host_calls_keep_the_invariants(
        input in prop::collection::vec(any::<u8>(), 0..1024),
        subject_is_server in any::<bool>(),
        peer_sink in any::<bool>(),
    ) {
        match run(&input, subject_is_server, peer_sink) {
            Ok(outcome) => keep_if_new(&input, subject_is_server, peer_sink, &outcome),
            Err(e) => prop_assert!(false, "{}", e),
        }
    }
}
