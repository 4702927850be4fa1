//! One in-memory connection through the mock host with all five reference
//! plugins, printing what each plugin did. `make interop` runs this until
//! the interop runner exists.
//!
//! Usage: `demo [PLUGIN_DIR]` (default `build/plugins`).

use corequic_mock::MockPair;
use corequic_runtime::abi::PluginVal;
use corequic_runtime::{Grants, HostCapabilities, Runtime, RuntimeConfig};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

const MS: u64 = 1_000_000;
const MTU: u64 = 1200;
const FILE: u64 = 200_000;

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("demo: FAILED");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("demo: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<bool, Box<dyn std::error::Error>> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "build/plugins".into()),
    );
    let runtime = Runtime::new(RuntimeConfig::default(), HostCapabilities::full())?;
    let started = Instant::now();
    let load = |name: &str| runtime.load_file(&dir.join(format!("{name}.wasm")), &Grants::all());
    let (padding, probe, bdp, dummy, acks) = (
        load("padding")?,
        load("probe")?,
        load("bdp")?,
        load("dummy")?,
        load("ack-logger")?,
    );
    println!(
        "compiled 5 plugins in {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    );

    let client = [padding, probe, bdp.clone(), dummy.clone()];
    let server = [bdp, dummy, acks];
    let mut pair = MockPair::new(&runtime, &client, &server, MTU, 25 * MS)?;
    let c = &mut pair.client;
    c.plugins
        .plugin_control(&mut c.conn, 0x80000, &[PluginVal::U64(150_000)])?;
    pair.handshake();
    let c = &mut pair.client;
    c.plugins.plugin_control(&mut c.conn, 1, &[])?;
    let initial_window = pair.server.conn.cwnd;
    let ok = pair.transfer(FILE, 60_000 * MS);
    // Keep the connection alive until DUMMY has toggled padding twice.
    pair.run_until(pair.now + 5_000 * MS, |p| {
        p.client.conn.log_count("dummy", Some("padding toggled")) >= 2
    });
    let c = &mut pair.client;
    let latency = c.plugins.plugin_control(&mut c.conn, 2, &[])?;

    println!(
        "mock connection: {FILE} bytes, byte-exact: {ok}; {:.0} ms of virtual time in all",
        pair.now as f64 / 1e6
    );
    let sizes = &pair.client.datagrams;
    let full = sizes.iter().filter(|d| d.size as u64 == MTU).count();
    println!(
        "padding     client datagrams: {} of {} MTU-sized ({MTU} B)",
        full,
        sizes.len()
    );
    println!("probe       PATH_CHALLENGE round trip: {latency:?} (link RTT 50 ms)");
    println!(
        "bdp         server congestion window {initial_window} B -> {} B, ssthresh {:?} (frame 0xBD sent {} time(s))",
        pair.server.conn.cwnd,
        pair.server.conn.ssthresh,
        pair.client
            .plugin_frames_sent
            .get(&0xBD)
            .copied()
            .unwrap_or(0)
    );
    let toggles = pair
        .client
        .conn
        .logs
        .iter()
        .filter(|r| r.message == "padding toggled")
        .count();
    println!(
        "dummy       frames 0x42 sent client/server: {}/{}; padding toggled {toggles} time(s)",
        pair.client
            .plugin_frames_sent
            .get(&0x42)
            .copied()
            .unwrap_or(0),
        pair.server
            .plugin_frames_sent
            .get(&0x42)
            .copied()
            .unwrap_or(0)
    );
    let logged = pair.server.conn.log_count("ack-logger", None);
    println!(
        "ack-logger  {logged} log lines for {} ACKs processed by the server",
        pair.server.acks_processed
    );
    for (side, ep) in [("client", &pair.client), ("server", &pair.server)] {
        for s in ep.plugins.stats() {
            println!(
                "  {side} {:<10} enabled={} calls={} errors={} denied={} removed={}",
                s.name,
                s.enabled,
                s.calls,
                s.errors,
                s.denied,
                s.removed.as_deref().unwrap_or("no")
            );
        }
    }
    Ok(ok && pair.client.closed.is_none() && pair.server.closed.is_none())
}
