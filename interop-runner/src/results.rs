//! Results as Protocol Buffers (`proto/results.proto`), binary and JSON.

use crate::cases::{Check, transfer_ms};
use crate::execute::{EndpointOutcome, RunOutcome};
use crate::link::{DatagramRecord, Direction, Fate};
use crate::proto::results as pb;
use protobuf::{EnumOrUnknown, Message};
use std::path::Path;

/// The schema version written into [`pb::Results::schema_version`].
pub const SCHEMA_VERSION: u32 = 1;

/// A cell's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every check held.
    Pass,
    /// Some check failed.
    Fail,
    /// An endpoint answered 127.
    Unsupported,
}

impl Outcome {
    /// `pass`, `fail` or `unsupported`.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Unsupported => "unsupported",
        }
    }
}

/// One (server, client, test) cell with its runs and evidence.
#[derive(Debug, Clone)]
pub struct CellResult {
    /// Server host name.
    pub server: String,
    /// Client host name.
    pub client: String,
    /// Test case.
    pub test: String,
    /// Verdict.
    pub outcome: Outcome,
    /// Evidence.
    pub checks: Vec<Check>,
    /// Folder relative to the results folder.
    pub folder: String,
    /// The runs.
    pub runs: Vec<RunOutcome>,
}

impl CellResult {
    /// `server/client/test`, the key of `required.txt`.
    pub fn key(&self) -> String {
        format!("{}/{}/{}", self.server, self.client, self.test)
    }
}

/// A host that took part.
#[derive(Debug, Clone)]
pub struct HostSummary {
    /// Its name.
    pub name: String,
    /// Its binary's file name.
    pub binary: String,
    /// Whether it answered 127 to an unknown test.
    pub answers_unsupported: bool,
}

fn endpoint(
    role: &str,
    host: &str,
    plugins: &[String],
    controls: &[String],
    e: &EndpointOutcome,
) -> pb::Endpoint {
    let mut out = pb::Endpoint::new();
    out.role = role.into();
    out.host = host.into();
    out.plugins = plugins.to_vec();
    out.controls = controls.to_vec();
    out.exit_code = e.exit_code.unwrap_or(-1);
    out.stats_json = e.stats_json.clone();
    out
}

fn summary(
    trace: &[DatagramRecord],
    direction: Direction,
    full_size: usize,
) -> pb::DirectionSummary {
    let mut s = pb::DirectionSummary::new();
    for r in trace.iter().filter(|r| r.direction == direction) {
        s.datagrams += 1;
        s.bytes += r.size as u64;
        match r.fate {
            Fate::Delivered { .. } => s.delivered += 1,
            Fate::Dropped(_) => s.dropped += 1,
        }
        if r.short_header {
            s.short_header_datagrams += 1;
            if r.size == full_size {
                s.short_header_full_size += 1;
            }
        }
    }
    s
}

/// The protobuf message of a whole run of the runner.
pub fn to_proto(
    matrix: &str,
    started: &str,
    hosts: &[HostSummary],
    tests: &[&str],
    cells: &[CellResult],
    results_dir: &Path,
) -> pb::Results {
    let mut out = pb::Results::new();
    out.schema_version = SCHEMA_VERSION;
    out.matrix = matrix.into();
    out.started = started.into();
    out.tests = tests.iter().map(|t| t.to_string()).collect();
    out.hosts = hosts
        .iter()
        .map(|h| {
            let mut p = pb::Host::new();
            p.name = h.name.clone();
            p.binary = h.binary.clone();
            p.answers_unsupported = h.answers_unsupported;
            p
        })
        .collect();
    for c in cells {
        let mut cell = pb::Cell::new();
        cell.server = c.server.clone();
        cell.client = c.client.clone();
        cell.test = c.test.clone();
        cell.outcome = EnumOrUnknown::new(match c.outcome {
            Outcome::Pass => pb::Outcome::OUTCOME_PASS,
            Outcome::Fail => pb::Outcome::OUTCOME_FAIL,
            Outcome::Unsupported => pb::Outcome::OUTCOME_UNSUPPORTED,
        });
        cell.folder = c.folder.clone();
        cell.checks = c
            .checks
            .iter()
            .map(|k| {
                let mut p = pb::Check::new();
                p.name = k.name.clone();
                p.passed = k.passed;
                p.detail = k.detail.clone();
                p
            })
            .collect();
        for r in &c.runs {
            let mut run = pb::Run::new();
            run.label = r.spec.label.clone();
            let mut link = pb::Link::new();
            link.one_way_delay_ms = r.spec.link.one_way_delay.as_secs_f64() * 1e3;
            link.rate_bits_per_second = r.spec.link.rate_bits_per_second.unwrap_or(0);
            link.queue_bytes = r.spec.link.queue_bytes;
            link.loss = r.spec.link.loss;
            link.max_datagram_size = r.spec.link.max_datagram_size as u32;
            link.seed = r.spec.link.seed;
            run.link = Some(link).into();
            run.file_size = r.spec.file_size;
            run.server = Some(endpoint(
                "server",
                &c.server,
                &r.spec.server.plugins,
                &r.spec.server.controls,
                &r.server,
            ))
            .into();
            run.client = Some(endpoint(
                "client",
                &c.client,
                &r.spec.client.plugins,
                &r.spec.client.controls,
                &r.client,
            ))
            .into();
            run.transfer_ms = transfer_ms(r).unwrap_or(0.0);
            let full = r.spec.link.max_datagram_size;
            run.client_to_server = Some(summary(&r.trace, Direction::ClientToServer, full)).into();
            run.server_to_client = Some(summary(&r.trace, Direction::ServerToClient, full)).into();
            run.trace_file = r
                .folder
                .join("link.csv")
                .strip_prefix(results_dir)
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            cell.runs.push(run);
        }
        out.cells.push(cell);
    }
    out
}

/// Write `results.pb` (binary) and `results.json` (the protobuf JSON
/// mapping) into `dir`.
pub fn write(results: &pb::Results, dir: &Path) -> Result<(), String> {
    let binary = results.write_to_bytes().map_err(|e| e.to_string())?;
    std::fs::write(dir.join("results.pb"), binary).map_err(|e| e.to_string())?;
    let json = protobuf_json_mapping::print_to_string(results).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("results.json"), json).map_err(|e| e.to_string())
}

/// Read a `results.pb` back.
pub fn read(path: &Path) -> Result<pb::Results, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    pb::Results::parse_from_bytes(&bytes).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_round_trip_through_binary_and_json() {
        let mut r = pb::Results::new();
        r.schema_version = SCHEMA_VERSION;
        r.matrix = "reduced".into();
        let mut cell = pb::Cell::new();
        cell.server = "quinn".into();
        cell.client = "quiche".into();
        cell.test = "padding".into();
        cell.outcome = EnumOrUnknown::new(pb::Outcome::OUTCOME_UNSUPPORTED);
        r.cells.push(cell);
        let bytes = r.write_to_bytes().expect("encode");
        assert_eq!(pb::Results::parse_from_bytes(&bytes).expect("decode"), r);
        let json = protobuf_json_mapping::print_to_string(&r).expect("json");
        assert!(json.contains("\"OUTCOME_UNSUPPORTED\""), "{json}");
        assert!(json.contains("\"schemaVersion\": 1"), "{json}");
        let back: pb::Results = protobuf_json_mapping::parse_from_str(&json).expect("parse json");
        assert_eq!(back, r);
    }
}
