//! The kit's outputs: the report as Protocol Buffers, JSON and a static HTML
//! page (requirements × hosts, then every case run with its evidence), and a
//! conformance claim per host.

use crate::expectations::CoverageFile;
use crate::proto::{CaseResult, Claim, Coverage, HostReport, Level, Report, Verdict};
use crate::spec::Requirement;
use protobuf::Message;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

/// Version of the report schema.
pub const SCHEMA_VERSION: u32 = 1;

/// The ABI this kit certifies, from the WIT package it was built with.
pub fn abi() -> String {
    let wit = include_str!("../../wit/host.wit");
    wit.lines()
        .find_map(|l| l.trim().strip_prefix("package "))
        .map(|p| p.trim_end_matches(';').trim().to_string())
        .unwrap_or_else(|| "core-quic:plugin".into())
}

/// A host's claim from its results. A case counts as passed when every
/// role of it passed.
pub fn claim(host: &str, stack: &str, results: &[CaseResult]) -> Claim {
    let mut cases: BTreeMap<&str, (Level, bool)> = BTreeMap::new();
    for r in results {
        let passed = r.verdict.enum_value_or_default() == Verdict::VERDICT_PASS;
        let entry = cases
            .entry(r.case.as_str())
            .or_insert((r.level.enum_value_or_default(), true));
        entry.1 &= passed;
    }
    let count = |level: Level| {
        let of: Vec<bool> = cases
            .values()
            .filter(|(l, _)| *l == level)
            .map(|(_, p)| *p)
            .collect();
        (of.iter().filter(|p| **p).count() as u32, of.len() as u32)
    };
    let mut c = Claim::new();
    c.host = host.to_string();
    c.stack = stack.to_string();
    c.abi = abi();
    (c.required_passed, c.required_total) = count(Level::LEVEL_REQUIRED);
    (c.recommended_passed, c.recommended_total) = count(Level::LEVEL_RECOMMENDED);
    (c.optional_passed, c.optional_total) = count(Level::LEVEL_OPTIONAL);
    let percent = |p: u32, t: u32| (p * 100).checked_div(t).unwrap_or(100);
    c.text = format!(
        "{} + corequic: {}, Required {} % ({}/{}), Recommended {}/{}, Optional {}/{}",
        if stack.is_empty() { host } else { stack },
        c.abi,
        percent(c.required_passed, c.required_total),
        c.required_passed,
        c.required_total,
        c.recommended_passed,
        c.recommended_total,
        c.optional_passed,
        c.optional_total
    );
    c
}

/// The coverage of the spec's requirements by the cases.
pub fn coverage(
    spec: &[Requirement],
    cases: &[crate::cases::LoadedCase],
    file: &CoverageFile,
) -> Vec<Coverage> {
    spec.iter()
        .map(|r| {
            let mut c = Coverage::new();
            c.requirement = r.id.clone();
            c.level = r.level.into();
            c.cases = cases
                .iter()
                .filter(|k| k.case.requirements.contains(&r.id))
                .map(|k| k.case.name.clone())
                .collect();
            if let Some(n) = file.not_testable.iter().find(|n| n.id == r.id) {
                c.not_testable_reason = n.reason.clone();
                c.covered_by = n.covered_by.clone();
            }
            c
        })
        .collect()
}

/// The coverage gate: every required requirement has a case, is listed as
/// not testable through an endpoint, or is pending; a pending one that has
/// a case, or a listed id the spec lacks, is an error too (the lists only
/// shrink). Returns the summary line or the problems.
pub fn coverage_gate(
    spec: &[Requirement],
    coverage: &[Coverage],
    file: &CoverageFile,
) -> Result<String, Vec<String>> {
    let mut problems = Vec::new();
    let known: std::collections::HashSet<&str> = spec.iter().map(|r| r.id.as_str()).collect();
    for id in file
        .pending
        .iter()
        .chain(file.not_testable.iter().map(|n| &n.id))
    {
        if !known.contains(id.as_str()) {
            problems.push(format!("coverage.toml lists {id}, which the spec lacks"));
        }
    }
    let mut required = 0;
    let mut with_case = 0;
    let mut elsewhere = 0;
    for c in coverage {
        if c.level.enum_value_or_default() != Level::LEVEL_REQUIRED {
            continue;
        }
        required += 1;
        let pending = file.pending.contains(&c.requirement);
        let not_testable = !c.not_testable_reason.is_empty();
        match (!c.cases.is_empty(), not_testable, pending) {
            (true, _, true) => problems.push(format!(
                "{} has a case now ({}): remove it from `pending` in coverage.toml",
                c.requirement,
                c.cases.join(", ")
            )),
            (true, true, _) => problems.push(format!(
                "{} has a case ({}) and is listed as not testable",
                c.requirement,
                c.cases.join(", ")
            )),
            (true, false, false) => with_case += 1,
            (false, true, _) => elsewhere += 1,
            (false, false, true) => {}
            (false, false, false) => problems.push(format!(
                "{} is a MUST-level requirement without a case: add one, or list it in coverage.toml",
                c.requirement
            )),
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let testable = required - elsewhere;
    Ok(format!(
        "requirement coverage: {with_case} of {testable} MUST-level requirements testable through an endpoint have a case ({} %); {elsewhere} more are checked elsewhere (coverage.toml); {} pending",
        if testable == 0 {
            100
        } else {
            with_case * 100 / testable
        },
        testable - with_case
    ))
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn verdict_class(v: Verdict) -> &'static str {
    match v {
        Verdict::VERDICT_PASS => "pass",
        Verdict::VERDICT_EXPECTED_FAIL => "xfail",
        _ => "fail",
    }
}

/// The HTML page of a report. `spec_link` maps a spec file name to a URL.
pub fn html(report: &Report, spec: &[Requirement], spec_link: &dyn Fn(&str) -> String) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>corequic conformance</title><style>\
         body{{font-family:sans-serif;margin:1.5em;}} table{{border-collapse:collapse;margin:1em 0;}} \
         td,th{{border:1px solid #bbb;padding:2px 6px;font-size:13px;vertical-align:top;}} \
         .pass{{background:#c8efc8;}} .fail{{background:#f4b4b4;}} .xfail{{background:#f6e2a8;}} \
         .none{{background:#eee;}} details{{font-size:12px;}} code{{font-size:12px;}}</style></head><body>\
         <h1>corequic conformance: {}</h1><p>Report schema {}, started {}.</p><h2>Claims</h2><ul>",
        escape(&report.abi),
        report.schema_version,
        escape(&report.started)
    );
    for host in &report.hosts {
        let _ = write!(h, "<li class=\"claim\">{}</li>", escape(&host.claim.text));
    }
    h.push_str("</ul><h2>Requirements × hosts</h2><table><tr><th>Requirement</th><th>Level</th>");
    for host in &report.hosts {
        let _ = write!(h, "<th>{}</th>", escape(&host.host));
    }
    h.push_str("<th>Cases</th></tr>");
    let file_of: BTreeMap<&str, &str> = spec
        .iter()
        .map(|r| (r.id.as_str(), r.file.as_str()))
        .collect();
    for c in &report.coverage {
        let level = match c.level.enum_value_or_default() {
            Level::LEVEL_REQUIRED => "MUST",
            Level::LEVEL_RECOMMENDED => "SHOULD",
            Level::LEVEL_OPTIONAL => "MAY",
            Level::LEVEL_UNSPECIFIED => "",
        };
        let file = file_of
            .get(c.requirement.as_str())
            .copied()
            .unwrap_or_default();
        let _ = write!(
            h,
            "<tr id=\"{id}\"><td><a href=\"{}\">{id}</a></td><td>{level}</td>",
            escape(&spec_link(file)),
            id = escape(&c.requirement)
        );
        for host in &report.hosts {
            let runs: Vec<&CaseResult> = host
                .results
                .iter()
                .filter(|r| r.requirements.contains(&c.requirement))
                .collect();
            if runs.is_empty() {
                let text = if c.not_testable_reason.is_empty() {
                    "no case"
                } else {
                    "elsewhere"
                };
                let _ = write!(h, "<td class=\"none\">{text}</td>");
                continue;
            }
            let worst = runs
                .iter()
                .map(|r| r.verdict.enum_value_or_default())
                .max_by_key(|v| match v {
                    Verdict::VERDICT_PASS => 0,
                    Verdict::VERDICT_EXPECTED_FAIL => 1,
                    _ => 2,
                })
                .unwrap_or(Verdict::VERDICT_UNSPECIFIED);
            let passed = runs
                .iter()
                .filter(|r| r.verdict.enum_value_or_default() == Verdict::VERDICT_PASS)
                .count();
            let _ = write!(
                h,
                "<td class=\"{}\">{passed}/{}</td>",
                verdict_class(worst),
                runs.len()
            );
        }
        let cases = if c.cases.is_empty() {
            if c.not_testable_reason.is_empty() {
                String::new()
            } else {
                format!(
                    "not through an endpoint: {} (covered by {})",
                    escape(&c.not_testable_reason),
                    escape(&c.covered_by)
                )
            }
        } else {
            c.cases
                .iter()
                .map(|n| format!("<a href=\"#case-{0}\">{0}</a>", escape(n)))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let _ = write!(h, "<td>{cases}</td></tr>");
    }
    h.push_str("</table>");
    for host in &report.hosts {
        let _ = write!(
            h,
            "<h2>{}</h2><p>Endpoint <code>{}</code></p><table><tr><th>Case</th><th>Role</th><th>Level</th><th>Verdict</th><th>Evidence</th></tr>",
            escape(&host.host),
            escape(&host.endpoint)
        );
        for r in &host.results {
            let v = r.verdict.enum_value_or_default();
            let _ = write!(
                h,
                "<tr id=\"case-{case}\" class=\"{class}\"><td>{case}<br><small>{reqs}</small></td><td>{role}</td><td>{level:?}</td><td>{verdict}{reason}</td><td><details><summary>{n} checks, <code>{folder}</code></summary><ul>{evidence}</ul></details></td></tr>",
                case = escape(&r.case),
                class = verdict_class(v),
                reqs = escape(&r.requirements.join(", ")),
                role = escape(&r.role),
                level = r.level.enum_value_or_default(),
                verdict = crate::run::verdict_label(v),
                reason = if r.expected_failure_reason.is_empty() {
                    String::new()
                } else {
                    format!("<br><small>{}</small>", escape(&r.expected_failure_reason))
                },
                n = r.evidence.len(),
                folder = escape(&r.folder),
                evidence = r
                    .evidence
                    .iter()
                    .map(|e| format!("<li>{}</li>", escape(e)))
                    .collect::<String>(),
            );
        }
        h.push_str("</table>");
    }
    h.push_str("</body></html>\n");
    h
}

/// Write `report.pb`, `report.json` and `index.html` into `dir`.
pub fn write(report: &Report, html_text: &str, dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let bytes = report.write_to_bytes().map_err(|e| e.to_string())?;
    let json = protobuf_json_mapping::print_to_string(report).map_err(|e| e.to_string())?;
    for (name, data) in [
        ("report.pb", bytes),
        ("report.json", json.into_bytes()),
        ("index.html", html_text.as_bytes().to_vec()),
    ] {
        std::fs::write(dir.join(name), data).map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(())
}

/// A host report from its results.
pub fn host_report(
    host: &str,
    endpoint: &str,
    stack: &str,
    results: Vec<CaseResult>,
) -> HostReport {
    let mut r = HostReport::new();
    r.host = host.to_string();
    r.endpoint = endpoint.to_string();
    r.claim = protobuf::MessageField::some(claim(host, stack, &results));
    r.results = results;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(case: &str, level: Level, verdict: Verdict) -> CaseResult {
        let mut r = CaseResult::new();
        r.case = case.into();
        r.level = level.into();
        r.verdict = verdict.into();
        r
    }

    #[test]
    fn a_case_counts_as_passed_only_when_every_role_passed() {
        let results = [
            result("a", Level::LEVEL_REQUIRED, Verdict::VERDICT_PASS),
            result("a", Level::LEVEL_REQUIRED, Verdict::VERDICT_EXPECTED_FAIL),
            result("b", Level::LEVEL_REQUIRED, Verdict::VERDICT_PASS),
            result("c", Level::LEVEL_RECOMMENDED, Verdict::VERDICT_PASS),
        ];
        let c = claim("h", "stack 1.0", &results);
        assert_eq!((c.required_passed, c.required_total), (1, 2));
        assert_eq!((c.recommended_passed, c.recommended_total), (1, 1));
        assert!(
            c.text
                .starts_with("stack 1.0 + corequic: core-quic:plugin@"),
            "{}",
            c.text
        );
        assert!(
            c.text.contains("Required 50 % (1/2), Recommended 1/1"),
            "{}",
            c.text
        );
    }

    #[test]
    fn the_gate_fails_on_an_uncovered_must_and_on_a_stale_pending_entry() {
        let spec = vec![
            Requirement {
                id: "CQ-A-1".into(),
                level: Level::LEVEL_REQUIRED,
                file: "a.md".into(),
            },
            Requirement {
                id: "CQ-A-2".into(),
                level: Level::LEVEL_REQUIRED,
                file: "a.md".into(),
            },
        ];
        let mut covered = Coverage::new();
        covered.requirement = "CQ-A-1".into();
        covered.level = Level::LEVEL_REQUIRED.into();
        covered.cases = vec!["x.y".into()];
        let mut bare = Coverage::new();
        bare.requirement = "CQ-A-2".into();
        bare.level = Level::LEVEL_REQUIRED.into();
        let coverage = vec![covered, bare];
        let none = CoverageFile::default();
        assert!(coverage_gate(&spec, &coverage, &none).is_err());
        let pending = CoverageFile {
            pending: vec!["CQ-A-2".into()],
            ..Default::default()
        };
        let line = coverage_gate(&spec, &coverage, &pending).expect("passes");
        assert!(line.contains("1 of 2"), "{line}");
        let stale = CoverageFile {
            pending: vec!["CQ-A-1".into(), "CQ-A-2".into()],
            ..Default::default()
        };
        assert!(coverage_gate(&spec, &coverage, &stale).is_err());
    }
}
