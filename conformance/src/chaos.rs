//! The chaos harness (`conformance chaos`, `make chaos`): the seeded chaos
//! plugin (`plugins/testing/chaos`) on one endpoint, a plugin-free peer, and
//! the invariants every host must keep whatever a plugin does (spec section
//! 10, security considerations):
//!
//! - no endpoint process dies (a panic, an abort or a signal);
//! - nothing hangs: both endpoints end on their own, before their timeout;
//! - the client's download is byte-exact, or the connection ends with a
//!   close that both sides see (no side is left to idle out);
//! - each endpoint's peak RSS stays under a bound.
//!
//! Seed `s` picks the subject host, its role and the peer host, so a range
//! of seeds covers every host in both roles and across host pairs. A
//! failing seed prints a one-line reproduction.

use corequic_interop::execute::{
    EndpointOutcome, Environment, RunOutcome, RunSpec, SideSpec, run_pair,
};
use corequic_interop::hosts::Host;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The marker the chaos plugin's seed follows in its component.
const SEED_MARKER: &[u8; 8] = b"CQCHAOS!";
/// The chaos plugin's control, called once by the embedder.
const CHAOS_CONTROL: u64 = 0x3c_0001;
/// The test name of the endpoint contract the runs use.
const TEST_NAME: &str = corequic_contract::CONFORMANCE_TEST;

/// What a chaos run takes.
#[derive(Debug, Clone)]
pub struct ChaosConfig {
    /// The hosts, by name and endpoint binary.
    pub hosts: Vec<Host>,
    /// The chaos plugin component (`test-chaos.wasm`).
    pub plugin: PathBuf,
    /// The peer's sink plugin component (`test-chaos-sink.wasm`).
    pub sink: PathBuf,
    /// The first seed.
    pub first_seed: u64,
    /// How many seeds, from the first.
    pub seeds: u64,
    /// More seeds run after those (the seeds of fixed defects, say).
    pub also: Vec<u64>,
    /// Bytes the client downloads.
    pub size: u64,
    /// The endpoints' own timeout, seconds.
    pub timeout_seconds: u64,
    /// The bound on each endpoint's peak RSS, KiB.
    pub rss_limit_kib: u64,
    /// Where runs and the summary go.
    pub out: PathBuf,
}

/// Which pair a seed runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// Index of the host that loads the chaos plugin.
    pub subject: usize,
    /// Index of the plugin-free peer's host.
    pub peer: usize,
    /// Whether the subject is the server.
    pub subject_is_server: bool,
    /// Whether the peer loads test-chaos-sink, which parses and ignores the
    /// chaos plugin's well-formed frames (without it, the first frame the
    /// plugin sends closes the connection).
    pub peer_sink: bool,
}

/// Seed `s` → subject host, role, peer host and peer plugin: consecutive
/// seeds rotate the subject, then the role, then the peer, so every
/// `2 × hosts²` seeds cover every ordered pair in both roles; the next
/// `2 × hosts²` do it again with the sink on the peer.
pub fn assign(seed: u64, hosts: usize) -> Assignment {
    let h = hosts.max(1) as u64;
    Assignment {
        subject: (seed % h) as usize,
        subject_is_server: (seed / h).is_multiple_of(2),
        peer: ((seed / h / 2 + seed % h) % h) as usize,
        peer_sink: !(seed / (2 * h * h)).is_multiple_of(2),
    }
}

/// A copy of the chaos component with `seed` written after its marker.
pub fn seeded_plugin(component: &[u8], seed: u64) -> Result<Vec<u8>, String> {
    let found: Vec<usize> = component
        .windows(SEED_MARKER.len())
        .enumerate()
        .filter(|(_, w)| *w == SEED_MARKER)
        .map(|(i, _)| i)
        .collect();
    let [at] = found[..] else {
        return Err(format!(
            "the chaos plugin holds its seed marker {} times, not once",
            found.len()
        ));
    };
    let start = at + SEED_MARKER.len();
    let mut out = component.to_vec();
    out.get_mut(start..start + 8)
        .ok_or("the chaos plugin ends inside its seed block")?
        .copy_from_slice(&seed.to_le_bytes());
    Ok(out)
}

/// The verdict on one seed.
#[derive(Debug, Clone)]
pub struct SeedResult {
    /// The seed.
    pub seed: u64,
    /// The host that loaded the chaos plugin.
    pub subject: String,
    /// The plugin-free peer's host.
    pub peer: String,
    /// `server` or `client`.
    pub subject_role: &'static str,
    /// Whether the peer loaded test-chaos-sink.
    pub peer_sink: bool,
    /// Broken invariants; empty when the run kept them all.
    pub violations: Vec<String>,
    /// How the run ended, in a few words.
    pub outcome: String,
    /// The larger of the two endpoints' peak RSS, KiB.
    pub peak_rss_kib: Option<u64>,
    /// The run's folder (commands, logs, stats, link trace, qlogs).
    pub folder: PathBuf,
}

fn side_name(subject_is_server: bool, server: bool) -> &'static str {
    if subject_is_server == server {
        "subject"
    } else {
        "peer"
    }
}

/// Check the invariants on one run: the broken ones, and how it ended.
pub fn judge(
    run: &RunOutcome,
    size: u64,
    rss_limit_kib: u64,
    subject_is_server: bool,
) -> (Vec<String>, String) {
    let mut violations = Vec::new();
    if let Some(e) = &run.runner_error {
        violations.push(format!("runner: {e}"));
    }
    let sides = [(true, &run.server), (false, &run.client)];
    for (server, side) in sides {
        let who = format!(
            "{} ({})",
            if server { "server" } else { "client" },
            side_name(subject_is_server, server)
        );
        match side.exit_code {
            Some(0 | 1) => {}
            Some(code) => violations.push(format!("{who} died: exit code {code}")),
            None => violations.push(format!(
                "{who} died by a signal or hung until it was killed (no exit code)"
            )),
        }
        let close = side.stats.as_ref().and_then(|s| s.close.clone());
        if let Some(close) = &close {
            let lower = close.to_ascii_lowercase();
            if lower.contains("timed out") || lower.contains("idle timeout") {
                violations.push(format!("{who} was left waiting: {close}"));
            }
        }
        if side.stats.is_none() && side.exit_code.is_some() {
            violations.push(format!("{who} wrote no stats"));
        }
        if let Some(kib) = side.stats.as_ref().and_then(|s| s.peak_rss_kib)
            && kib > rss_limit_kib
        {
            violations.push(format!("{who} peak RSS {kib} KiB > {rss_limit_kib} KiB"));
        }
    }
    let client = run.client.stats.as_ref();
    let exact = client.is_some_and(|s| s.ok && s.bytes == size);
    let outcome = if exact {
        "byte-exact".to_string()
    } else {
        let close = client
            .and_then(|s| s.close.clone())
            .unwrap_or_else(|| "no close".into());
        let lower = close.to_ascii_lowercase();
        if lower.contains("differs") || lower.contains("more than") {
            violations.push(format!("the download is corrupt: {close}"));
        }
        if client.is_some_and(|s| s.close.is_none()) {
            violations.push("the download failed without a close".into());
        }
        format!("closed: {}", close.lines().next().unwrap_or_default())
    };
    (violations, outcome)
}

fn peak(side: &EndpointOutcome) -> Option<u64> {
    side.stats.as_ref().and_then(|s| s.peak_rss_kib)
}

/// Run every seed; returns the results in seed order.
pub fn run(config: &ChaosConfig) -> Result<Vec<SeedResult>, String> {
    if config.hosts.is_empty() {
        return Err("no host selected".into());
    }
    let component = std::fs::read(&config.plugin)
        .map_err(|e| format!("{}: {e} (run `make plugins`)", config.plugin.display()))?;
    let plugin_dir = config.out.join("plugins");
    std::fs::create_dir_all(&plugin_dir).map_err(|e| e.to_string())?;
    std::fs::copy(&config.sink, plugin_dir.join("test-chaos-sink.wasm"))
        .map_err(|e| format!("{}: {e} (run `make plugins`)", config.sink.display()))?;
    let env = Environment {
        plugin_dir: plugin_dir.clone(),
    };
    let mut results = Vec::new();
    let seeds = (config.first_seed..config.first_seed + config.seeds).chain(config.also.clone());
    for seed in seeds {
        let a = assign(seed, config.hosts.len());
        let subject = &config.hosts[a.subject];
        let peer = &config.hosts[a.peer];
        let name = format!("chaos-{seed}");
        let wasm = plugin_dir.join(format!("{name}.wasm"));
        std::fs::write(&wasm, seeded_plugin(&component, seed)?)
            .map_err(|e| format!("{}: {e}", wasm.display()))?;
        let chaos = SideSpec::with(&[&name]).control(format!("50:{CHAOS_CONTROL:#x}"));
        let plain = if a.peer_sink {
            SideSpec::with(&["test-chaos-sink"])
        } else {
            SideSpec::default()
        };
        let (server_host, client_host, server, client) = if a.subject_is_server {
            (subject, peer, chaos, plain)
        } else {
            (peer, subject, plain, chaos)
        };
        let spec = RunSpec {
            label: name.clone(),
            link: crate::run::kit_link(Duration::ZERO, false),
            file_size: config.size,
            server,
            client,
            timeout_seconds: config.timeout_seconds,
            measurement: false,
            direct: false,
        };
        let folder = config.out.join("runs").join(&name);
        let started = Instant::now();
        let outcome = run_pair(&env, server_host, client_host, TEST_NAME, &spec, &folder);
        let (violations, summary) = judge(
            &outcome,
            config.size,
            config.rss_limit_kib,
            a.subject_is_server,
        );
        let role = if a.subject_is_server {
            "server"
        } else {
            "client"
        };
        let result = SeedResult {
            seed,
            subject: subject.name.clone(),
            peer: peer.name.clone(),
            subject_role: role,
            peer_sink: a.peer_sink,
            violations,
            outcome: summary,
            peak_rss_kib: peak(&outcome.server).max(peak(&outcome.client)),
            folder,
        };
        eprintln!(
            "seed {seed}: {} as {role} with {}{} ... {} ({:.1} s) {}",
            result.subject,
            result.peer,
            if a.peer_sink { " (sink)" } else { "" },
            if result.violations.is_empty() {
                "ok"
            } else {
                "VIOLATION"
            },
            started.elapsed().as_secs_f64(),
            result.outcome
        );
        for v in &result.violations {
            eprintln!("    ✗ {v}");
        }
        if !result.violations.is_empty() {
            eprintln!(
                "    reproduce: conformance chaos --bin-dir <dir> --hosts {} --first-seed {seed} --seeds 1   (see {})",
                hosts_list(&config.hosts),
                result.folder.display()
            );
            // Keep the failing seed's plugin beside its run.
            let _ = std::fs::copy(&wasm, result.folder.join(format!("{name}.wasm")));
        }
        let _ = std::fs::remove_file(&wasm);
        results.push(result);
    }
    Ok(results)
}

fn hosts_list(hosts: &[Host]) -> String {
    hosts
        .iter()
        .map(|h| h.name.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// The summary: per host, runs, violations and the largest peak RSS.
pub fn summary(results: &[SeedResult], config: &ChaosConfig, wall_seconds: f64) -> String {
    let also: String = config.also.iter().map(|s| format!(", {s}")).collect();
    let mut text = format!(
        "chaos: seeds {}..{}{also} ({} runs) in {wall_seconds:.0} s, {} byte downloads, RSS bound {} MiB\n",
        config.first_seed,
        config.first_seed + config.seeds,
        results.len(),
        config.size,
        config.rss_limit_kib / 1024
    );
    for host in &config.hosts {
        let runs: Vec<&SeedResult> = results.iter().filter(|r| r.subject == host.name).collect();
        let bad = runs.iter().filter(|r| !r.violations.is_empty()).count();
        let exact = runs.iter().filter(|r| r.outcome == "byte-exact").count();
        let peak = runs
            .iter()
            .filter_map(|r| r.peak_rss_kib)
            .max()
            .unwrap_or(0);
        text.push_str(&format!(
            "  {}: {} runs as subject, {} byte-exact, {} closed, {} violations, peak RSS {:.1} MiB\n",
            host.name,
            runs.len(),
            exact,
            runs.len() - exact,
            bad,
            peak as f64 / 1024.0
        ));
    }
    text
}

/// Write `summary.txt` and `violations.txt` into the output folder.
pub fn write_summary(out: &Path, summary: &str, results: &[SeedResult]) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| e.to_string())?;
    std::fs::write(out.join("summary.txt"), summary).map_err(|e| e.to_string())?;
    let mut lines = String::new();
    for r in results.iter().filter(|r| !r.violations.is_empty()) {
        lines.push_str(&format!(
            "seed {} {} as {} with {}: {}\n",
            r.seed,
            r.subject,
            r.subject_role,
            r.peer,
            r.violations.join("; ")
        ));
    }
    std::fs::write(out.join("violations.txt"), lines).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_cover_every_ordered_pair_in_both_roles() {
        let hosts = 3;
        let mut seen = std::collections::HashSet::new();
        for seed in 0..(2 * hosts * hosts) as u64 {
            let a = assign(seed, hosts);
            assert!(!a.peer_sink);
            seen.insert((a.subject, a.peer, a.subject_is_server));
        }
        assert_eq!(seen.len(), 2 * hosts * hosts);
        let sunk: std::collections::HashSet<_> = (2 * hosts * hosts..4 * hosts * hosts)
            .map(|seed| assign(seed as u64, hosts))
            .filter(|a| a.peer_sink)
            .map(|a| (a.subject, a.peer, a.subject_is_server))
            .collect();
        assert_eq!(sunk.len(), 2 * hosts * hosts);
    }

    #[test]
    fn the_seed_goes_after_the_only_marker() {
        let mut component = b"head".to_vec();
        component.extend_from_slice(SEED_MARKER);
        component.extend_from_slice(&[0; 8]);
        component.extend_from_slice(b"tail");
        let seeded = seeded_plugin(&component, 0x0102_0304_0506_0708).expect("one marker");
        assert_eq!(&seeded[12..20], &0x0102_0304_0506_0708u64.to_le_bytes());
        assert_eq!(&seeded[20..], b"tail");
        let mut twice = component.clone();
        twice.extend_from_slice(SEED_MARKER);
        assert!(seeded_plugin(&twice, 1).is_err());
        assert!(seeded_plugin(b"nothing", 1).is_err());
    }
}
