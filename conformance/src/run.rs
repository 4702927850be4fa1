//! Running the cases against one host's endpoint binary.

use crate::cases::LoadedCase;
use crate::checks::{Check, Observed, check_datagrams, check_endpoint, check_rss_above_peer};
use crate::expectations::Expectations;
use crate::proto::{Case, CaseResult, Role, Side, Verdict};
use corequic_interop::execute::{Environment, RunSpec, SideSpec, run_pair};
use corequic_interop::hosts::Host;
use corequic_interop::link::LinkParams;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The endpoint test name of every kit run (ENDPOINT.md).
pub const TEST_NAME: &str = corequic_contract::CONFORMANCE_TEST;
/// Default download size of a case.
pub const DEFAULT_SIZE: u64 = 100_000;
/// Default endpoint timeout of a case, seconds.
pub const DEFAULT_TIMEOUT: u32 = 20;

/// What a kit run against one host needs.
#[derive(Debug, Clone)]
pub struct Target {
    /// The host's name (its expectation file is `<name>.toml`).
    pub host: String,
    /// The endpoint binary under test.
    pub endpoint: PathBuf,
    /// The peer's endpoint binary (the subject's own by default).
    pub peer: PathBuf,
    /// Folder of the `<plugin>.wasm` components.
    pub plugin_dir: PathBuf,
    /// Arguments added to every subject invocation (for example a test-only
    /// fault switch).
    pub subject_args: Vec<String>,
}

/// The link of every kit run: loopback through the recording relay, with
/// no rate limit or loss, no delay unless a case asks for one, and Not-ECT
/// datagrams unless a case asks for ECT(0) marks.
pub fn kit_link(one_way_delay: Duration, mark_ect0: bool) -> LinkParams {
    LinkParams {
        one_way_delay,
        rate_bits_per_second: None,
        queue_bytes: 0,
        loss: 0.0,
        max_datagram_size: 1500,
        seed: 1,
        ecn_mark: mark_ect0.then_some(0b10),
    }
}

fn side_spec(side: Option<&Side>, extra: &[String]) -> SideSpec {
    let mut spec = SideSpec::default();
    if let Some(side) = side {
        for p in &side.plugins {
            spec.plugins.push(match p.grants.as_str() {
                "" => p.name.clone(),
                grants => format!("{}={grants}", p.name),
            });
        }
        spec.controls = side.controls.clone();
    }
    spec.extra_args = extra.to_vec();
    spec
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::ROLE_CLIENT => "client",
        Role::ROLE_SERVER => "server",
        Role::ROLE_UNSPECIFIED => "",
    }
}

fn read_text(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn read_json(path: &Path) -> Option<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// Run a load-only case: the subject alone, as a server, must refuse its
/// plugins before it serves anything.
fn run_load_only(target: &Target, case: &LoadedCase, folder: &Path) -> Vec<Check> {
    let timeout = case.case.timeout_seconds.clamp(1, DEFAULT_TIMEOUT);
    let stats = folder.join("subject.json");
    let mut args: Vec<String> = [
        "--role",
        "server",
        "--addr",
        "127.0.0.1:0",
        "--test",
        TEST_NAME,
        "--stats",
        &stats.display().to_string(),
        "--timeout",
        &timeout.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for p in &case.case.subject.plugins {
        let path = target.plugin_dir.join(format!("{}.wasm", p.name));
        args.push("--plugin".into());
        args.push(match p.grants.as_str() {
            "" => path.display().to_string(),
            g => format!("{}={g}", path.display()),
        });
    }
    args.extend(target.subject_args.iter().cloned());
    let log = folder.join("subject.log");
    let _ = std::fs::write(
        folder.join("commands.txt"),
        format!(
            "subject: {} {}\n",
            target.endpoint.display(),
            args.join(" ")
        ),
    );
    let exit_code = match std::fs::File::create(&log).and_then(|out| {
        let err = out.try_clone()?;
        Command::new(&target.endpoint)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
    }) {
        Ok(mut child) => {
            let deadline = Instant::now() + Duration::from_secs(u64::from(timeout) + 10);
            loop {
                match child.try_wait() {
                    Ok(Some(status)) => break status.code(),
                    Ok(None) if Instant::now() >= deadline => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break None;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                    Err(_) => break None,
                }
            }
        }
        Err(e) => {
            return vec![Check {
                ok: false,
                text: format!("starting {}: {e}", target.endpoint.display()),
            }];
        }
    };
    let seen = Observed {
        role: "subject".into(),
        exit_code,
        stats: read_json(&stats),
        output: read_text(&log),
    };
    check_endpoint("subject", &case.case.expect_subject, &seen, 0)
}

/// Run a connection case with the subject in `role`.
fn run_connection(target: &Target, case: &LoadedCase, role: Role, folder: &Path) -> Vec<Check> {
    let c = &case.case;
    let size = if c.size == 0 { DEFAULT_SIZE } else { c.size };
    let timeout = if c.timeout_seconds == 0 {
        DEFAULT_TIMEOUT
    } else {
        c.timeout_seconds
    };
    let subject = side_spec(c.subject.as_ref(), &target.subject_args);
    let peer = side_spec(c.peer.as_ref(), &[]);
    let subject_is_server = role == Role::ROLE_SERVER;
    let (server, client) = if subject_is_server {
        (subject, peer)
    } else {
        (peer, subject)
    };
    let spec = RunSpec {
        label: c.name.clone(),
        link: kit_link(
            Duration::from_millis(u64::from(c.one_way_delay_ms)),
            c.mark_ect0,
        ),
        file_size: size,
        server,
        client,
        timeout_seconds: u64::from(timeout),
        measurement: false,
        direct: false,
    };
    let subject_host = Host {
        name: target.host.clone(),
        binary: target.endpoint.clone(),
    };
    let peer_host = Host {
        name: "peer".into(),
        binary: target.peer.clone(),
    };
    let (server_host, client_host) = if subject_is_server {
        (&subject_host, &peer_host)
    } else {
        (&peer_host, &subject_host)
    };
    let env = Environment {
        plugin_dir: target.plugin_dir.clone(),
    };
    let outcome = run_pair(&env, server_host, client_host, TEST_NAME, &spec, folder);
    let mut checks = Vec::new();
    if let Some(e) = &outcome.runner_error {
        checks.push(Check {
            ok: false,
            text: format!("the run itself failed: {e}"),
        });
    }
    let observed = |r: &str, exit_code| Observed {
        role: r.into(),
        exit_code,
        stats: read_json(&folder.join(format!("{r}.json"))),
        output: read_text(&folder.join(format!("{r}.log"))),
    };
    let server_seen = observed("server", outcome.server.exit_code);
    let client_seen = observed("client", outcome.client.exit_code);
    let (subject_seen, peer_seen) = if subject_is_server {
        (&server_seen, &client_seen)
    } else {
        (&client_seen, &server_seen)
    };
    checks.extend(check_endpoint(
        "subject",
        &c.expect_subject,
        subject_seen,
        size,
    ));
    checks.extend(check_endpoint("peer", &c.expect_peer, peer_seen, size));
    if c.max_rss_above_peer_mib > 0 {
        checks.push(check_rss_above_peer(
            c.max_rss_above_peer_mib,
            subject_seen,
            peer_seen,
        ));
    }
    for d in &c.datagrams {
        checks.push(check_datagrams(d, &outcome.trace, subject_is_server));
    }
    checks
}

/// Run every case against `target`, printing progress; results in case
/// order. `out` receives one folder per case run.
pub fn run_all(
    target: &Target,
    cases: &[LoadedCase],
    expectations: &Expectations,
    out: &Path,
) -> Vec<CaseResult> {
    let mut results = Vec::new();
    let total: usize = cases.iter().map(|c| c.roles().len()).sum();
    let mut n = 0;
    for case in cases {
        for role in case.roles() {
            n += 1;
            let role = role_name(role);
            let rel = PathBuf::from(&target.host)
                .join(&case.case.name)
                .join(if role.is_empty() { "load" } else { role });
            let folder = out.join(&rel);
            let _ = std::fs::remove_dir_all(&folder);
            let _ = std::fs::create_dir_all(&folder);
            eprint!(
                "[{n}/{total}] {} {}{}{} ... ",
                target.host,
                case.case.name,
                if role.is_empty() { "" } else { " as " },
                role
            );
            let _ = std::io::stderr().flush();
            let started = Instant::now();
            let checks = if case.case.load_only {
                run_load_only(target, case, &folder)
            } else {
                let r = if role == "server" {
                    Role::ROLE_SERVER
                } else {
                    Role::ROLE_CLIENT
                };
                run_connection(target, case, r, &folder)
            };
            let passed = !checks.is_empty() && checks.iter().all(|c| c.ok);
            let deviation = expectations.find(&case.case.name, role);
            let verdict = match (passed, deviation) {
                (true, None) => Verdict::VERDICT_PASS,
                (false, None) => Verdict::VERDICT_FAIL,
                (false, Some(_)) => Verdict::VERDICT_EXPECTED_FAIL,
                (true, Some(_)) => Verdict::VERDICT_UNEXPECTED_PASS,
            };
            let duration = started.elapsed();
            eprintln!(
                "{} ({:.1} s)",
                verdict_label(verdict),
                duration.as_secs_f64()
            );
            if matches!(verdict, Verdict::VERDICT_FAIL) {
                for c in checks.iter().filter(|c| !c.ok) {
                    eprintln!("    ✗ {}", c.text);
                }
                eprintln!("    see {}", folder.display());
            }
            let mut r = CaseResult::new();
            r.case = case.case.name.clone();
            r.category = case.category.clone();
            r.level = case.case.level;
            r.requirements = case.case.requirements.clone();
            r.role = role.to_string();
            r.verdict = verdict.into();
            r.evidence = checks
                .iter()
                .map(|c| format!("{} {}", if c.ok { "✓" } else { "✗" }, c.text))
                .collect();
            r.expected_failure_reason = deviation
                .map(|d| format!("{} ({})", d.reason, d.requirement))
                .unwrap_or_default();
            r.duration_ms = duration.as_secs_f64() * 1000.0;
            r.folder = rel.display().to_string();
            results.push(r);
        }
    }
    results
}

/// A verdict's short label.
pub fn verdict_label(v: Verdict) -> &'static str {
    match v {
        Verdict::VERDICT_PASS => "pass",
        Verdict::VERDICT_FAIL => "FAIL",
        Verdict::VERDICT_EXPECTED_FAIL => "expected failure",
        Verdict::VERDICT_UNEXPECTED_PASS => "UNEXPECTED PASS (stale expectation)",
        Verdict::VERDICT_UNSPECIFIED => "?",
    }
}

/// What a host declares through `ENDPOINT --capabilities` (ENDPOINT.md):
/// the cases that need a capability run only where it is (or is not)
/// declared.
#[derive(Debug, Clone, Default)]
pub struct Capabilities {
    /// The fields it declares writable; `None` when the endpoint does not
    /// answer the query (then no case that needs a capability applies).
    pub writable: Option<Vec<String>>,
}

impl Capabilities {
    /// Ask `endpoint --capabilities`.
    pub fn query(endpoint: &Path) -> Capabilities {
        let output = Command::new(endpoint)
            .arg("--capabilities")
            .stdin(Stdio::null())
            .output();
        let writable = output
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
            .and_then(|v| {
                v["writable"].as_array().map(|a| {
                    a.iter()
                        .filter_map(|f| f.as_str().map(str::to_string))
                        .collect()
                })
            });
        Capabilities { writable }
    }

    /// Whether `case` applies to this host.
    pub fn applies(&self, case: &Case) -> bool {
        self.why_not(case).is_empty()
    }

    /// Why `case` does not apply, or an empty string.
    pub fn why_not(&self, case: &Case) -> String {
        if case.needs_writable.is_empty() && case.needs_not_writable.is_empty() {
            return String::new();
        }
        let Some(writable) = &self.writable else {
            return "the endpoint does not answer --capabilities".into();
        };
        let mut missing = Vec::new();
        for f in &case.needs_writable {
            if !writable.contains(f) {
                missing.push(format!("needs {f} writable"));
            }
        }
        for f in &case.needs_not_writable {
            if writable.contains(f) {
                missing.push(format!("needs {f} not writable"));
            }
        }
        missing.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_that_needs_a_capability_applies_only_where_it_is_declared() {
        let mut needs_write = Case::new();
        needs_write.needs_writable.push("max-rx-data".into());
        let mut needs_no_write = Case::new();
        needs_no_write.needs_not_writable.push("max-rx-data".into());
        let plain = Case::new();

        let writes = Capabilities {
            writable: Some(vec!["max-rx-data".into()]),
        };
        let reads_only = Capabilities {
            writable: Some(Vec::new()),
        };
        let silent = Capabilities { writable: None };

        assert!(writes.applies(&needs_write) && !writes.applies(&needs_no_write));
        assert!(!reads_only.applies(&needs_write) && reads_only.applies(&needs_no_write));
        assert!(!silent.applies(&needs_write) && !silent.applies(&needs_no_write));
        assert!(
            [writes, reads_only, silent]
                .iter()
                .all(|c| c.applies(&plain))
        );
        assert_eq!(
            Capabilities {
                writable: Some(Vec::new())
            }
            .why_not(&needs_write),
            "needs max-rx-data writable"
        );
    }
}
