//! The matrix: every (server, client, test) cell, with progress output, the
//! results folder, the required-cells gate.

use crate::cases::{Matrix, judge, plan};
use crate::execute::{Environment, run_pair};
use crate::hosts::Host;
use crate::results::{CellResult, HostSummary, Outcome};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What to run.
#[derive(Debug, Clone)]
pub struct MatrixRun {
    /// The matrix size.
    pub matrix: Matrix,
    /// The hosts (every pair is run).
    pub hosts: Vec<Host>,
    /// The test cases.
    pub tests: Vec<String>,
    /// Plugins and their folder.
    pub env: Environment,
    /// The results folder.
    pub out: PathBuf,
    /// Bottleneck queue of every link, bytes, instead of the matrix's (for
    /// studies of how a result depends on the queue).
    pub queue_bytes: Option<u64>,
}

/// A cell's folder name under the results folder.
pub fn cell_folder(test: &str, server: &str, client: &str) -> String {
    format!("{test}/server-{server}_client-{client}")
}

/// Run every cell, printing progress to stderr.
pub fn run_matrix(spec: &MatrixRun) -> Vec<CellResult> {
    let total = spec.tests.len() * spec.hosts.len() * spec.hosts.len();
    let mut cells = Vec::new();
    let mut n = 0;
    for test in &spec.tests {
        for server in &spec.hosts {
            for client in &spec.hosts {
                n += 1;
                let folder = cell_folder(test, &server.name, &client.name);
                eprint!(
                    "[{n}/{total}] {test:<18} server {:<9} client {:<9} ",
                    server.name, client.name
                );
                let _ = std::io::stderr().flush();
                let started = Instant::now();
                let mut runs = Vec::new();
                let mut plans = plan(test, spec.matrix);
                if let Some(queue) = spec.queue_bytes {
                    plans.iter_mut().for_each(|r| r.link.queue_bytes = queue);
                }
                for (i, run) in plans.iter().enumerate() {
                    let outcome = run_pair(
                        &spec.env,
                        server,
                        client,
                        test,
                        run,
                        &spec.out.join(&folder).join(&run.label),
                    );
                    let unsupported = outcome.unsupported();
                    runs.push(outcome);
                    if plans.len() > 2 && (i + 1) % 5 == 0 {
                        eprint!(".");
                        let _ = std::io::stderr().flush();
                    }
                    if unsupported {
                        break;
                    }
                }
                let (outcome, checks) = if runs.iter().any(|r| r.unsupported()) {
                    (Outcome::Unsupported, Vec::new())
                } else {
                    let checks = judge(test, &runs);
                    let pass = !checks.is_empty() && checks.iter().all(|c| c.passed);
                    (if pass { Outcome::Pass } else { Outcome::Fail }, checks)
                };
                let text: String = checks
                    .iter()
                    .map(|c| {
                        format!(
                            "{} {}: {}\n",
                            if c.passed { "PASS" } else { "FAIL" },
                            c.name,
                            c.detail
                        )
                    })
                    .collect();
                let _ = std::fs::create_dir_all(spec.out.join(&folder));
                let _ = std::fs::write(spec.out.join(&folder).join("checks.txt"), &text);
                eprintln!(
                    "{} ({:.1} s)",
                    outcome.label(),
                    started.elapsed().as_secs_f64()
                );
                if outcome == Outcome::Fail {
                    for c in checks.iter().filter(|c| !c.passed) {
                        eprintln!("      ✗ {}: {}", c.name, c.detail);
                    }
                }
                cells.push(CellResult {
                    server: server.name.clone(),
                    client: client.name.clone(),
                    test: test.clone(),
                    outcome,
                    checks,
                    folder,
                    runs,
                });
            }
        }
    }
    cells
}

/// Parse a required-cells list: one `server/client/test` per line, `#`
/// comments.
pub fn parse_required(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

/// The required cells that did not pass (missing ones included).
pub fn missing_required(required: &[String], cells: &[CellResult]) -> Vec<String> {
    required
        .iter()
        .filter(|key| {
            !cells
                .iter()
                .any(|c| &c.key() == *key && c.outcome == Outcome::Pass)
        })
        .cloned()
        .collect()
}

/// Host summaries for the results.
pub fn summarize_hosts(hosts: &[Host], answers: &[bool]) -> Vec<HostSummary> {
    hosts
        .iter()
        .zip(answers)
        .map(|(h, a)| HostSummary {
            name: h.name.clone(),
            binary: h
                .binary
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default(),
            answers_unsupported: *a,
        })
        .collect()
}

/// The current time as RFC 3339 UTC (seconds).
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    rfc3339(secs)
}

/// Seconds since the Unix epoch as RFC 3339 UTC.
pub fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A results folder name for a matrix started at `started`.
pub fn default_out(base: &Path, matrix: Matrix, started: &str) -> PathBuf {
    base.join(format!("{}-{}", matrix.name(), started.replace(':', "")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_709_251_199), "2024-02-29T23:59:59Z");
    }

    #[test]
    fn required_cells_are_parsed_and_gate_on_pass() {
        let req =
            parse_required("# comment\nquinn/quinn/transfer\n\n quinn/quinn/bdp # long RTT\n");
        assert_eq!(req, ["quinn/quinn/transfer", "quinn/quinn/bdp"]);
        let cell = |test: &str, outcome| CellResult {
            server: "quinn".into(),
            client: "quinn".into(),
            test: test.into(),
            outcome,
            checks: Vec::new(),
            folder: String::new(),
            runs: Vec::new(),
        };
        let cells = [
            cell("transfer", Outcome::Pass),
            cell("bdp", Outcome::Unsupported),
        ];
        assert_eq!(missing_required(&req, &cells), ["quinn/quinn/bdp"]);
    }
}
