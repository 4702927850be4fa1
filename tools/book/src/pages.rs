//! The generated pages: the requirements index and the status page.

use anyhow::{Context, Result};
use corequic_conformance::cases;
use corequic_conformance::expectations::CoverageFile;
use corequic_conformance::proto::Level;
use corequic_conformance::spec;
use std::collections::BTreeMap;
use std::path::Path;

fn level_name(level: Level) -> &'static str {
    match level {
        Level::LEVEL_REQUIRED => "MUST",
        Level::LEVEL_RECOMMENDED => "SHOULD",
        Level::LEVEL_OPTIONAL => "MAY",
        _ => "—",
    }
}

/// Every requirement with an anchor named by its ID, its level, and the
/// conformance cases that check it (or where it is checked instead).
pub fn requirements(root: &Path) -> Result<String> {
    let requirements = spec::load(&root.join("spec")).map_err(anyhow::Error::msg)?;
    let loaded = cases::load_dir(&root.join("conformance/cases")).map_err(anyhow::Error::msg)?;
    let coverage =
        CoverageFile::read(&root.join("conformance/coverage.toml")).map_err(anyhow::Error::msg)?;
    let mut checked_by: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
    for c in &loaded {
        for id in &c.case.requirements {
            checked_by
                .entry(id.as_str())
                .or_default()
                .push((c.case.name.as_str(), c.category.as_str()));
        }
    }
    let mut text = String::from(
        "# Requirements index\n\n\
         Every requirement of the [specification](spec/index.md), with its level \
         (its strongest BCP 14 keyword) and the conformance cases that check it \
         through a host's endpoint. Each ID is an anchor of this page \
         (`requirements.html#CQ-LOAD-7`) and of its paragraph in the spec. \
         The cases are in [`conformance/cases/`](conformance/index.md).\n\n\
         | requirement | level | checked by |\n|---|---|---|\n",
    );
    let (mut covered, mut elsewhere) = (0, 0);
    for r in &requirements {
        let checks = match (
            checked_by.get(r.id.as_str()),
            coverage.not_testable.iter().find(|n| n.id == r.id),
        ) {
            (Some(list), _) => {
                covered += 1;
                list.iter()
                    .map(|(name, category)| format!("`{name}` ({category})"))
                    .collect::<Vec<_>>()
                    .join("<br>")
            }
            (None, Some(n)) => {
                elsewhere += 1;
                format!("not through an endpoint ({}): {}", n.reason, n.covered_by)
            }
            (None, None) => "—".to_string(),
        };
        text.push_str(&format!(
            "| <a id=\"{id}\"></a>[{id}](spec/{file}#{id}) | {level} | {checks} |\n",
            id = r.id,
            file = r.file,
            level = level_name(r.level),
            checks = checks.replace('|', "\\|"),
        ));
    }
    text.push_str(&format!(
        "\n{} requirements: {covered} checked by a case, {elsewhere} checked elsewhere.\n",
        requirements.len()
    ));
    Ok(text)
}

fn read_json(path: &Path) -> Result<serde_json::Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// The conformance claim of every host, and the interop matrix of `interop`.
pub fn status(root: &Path, interop: &Path, report: Option<&Path>) -> Result<String> {
    let mut text = String::from(
        "# Status\n\n## Conformance claims\n\n\
         What `make conformance-claims` certified for each host, committed in \
         [`docs/conformance/`](docs/conformance/index.md); `make test` fails when a \
         host no longer earns its claim.\n\n\
         | host | stack | ABI | Required | claim |\n|---|---|---|---|---|\n",
    );
    let claims_dir = root.join("docs/conformance");
    let mut claims: Vec<_> = std::fs::read_dir(&claims_dir)
        .with_context(|| format!("reading {}", claims_dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    claims.sort();
    for path in claims {
        let c = read_json(&path)?;
        text.push_str(&format!(
            "| {} | {} | `{}` | {}/{} | {} |\n",
            c["host"].as_str().unwrap_or("?"),
            c["stack"].as_str().unwrap_or("?"),
            c["abi"].as_str().unwrap_or("?"),
            c["requiredPassed"],
            c["requiredTotal"],
            c["text"].as_str().unwrap_or("?"),
        ));
    }
    let results = read_json(interop)?;
    text.push_str(&format!(
        "\n## Interop matrix\n\n\
         The `{}` matrix run of {}: every server × client pair of hosts, every test \
         (✓ passed, ✗ failed, – not run).",
        results["matrix"].as_str().unwrap_or("?"),
        results["started"].as_str().unwrap_or("?"),
    ));
    if let Some(report) = report {
        text.push_str(&format!(
            " Its full report, with every run's evidence: [the interop report]({}).",
            report.display()
        ));
    }
    let tests: Vec<&str> = results["tests"]
        .as_array()
        .map(|a| a.iter().filter_map(|t| t.as_str()).collect())
        .unwrap_or_default();
    let hosts: Vec<&str> = results["hosts"]
        .as_array()
        .map(|a| a.iter().filter_map(|h| h["name"].as_str()).collect())
        .unwrap_or_default();
    // (test, server, client) → mark
    let mut marks: BTreeMap<(String, String, String), &str> = BTreeMap::new();
    for cell in results["cells"].as_array().into_iter().flatten() {
        let field = |k: &str| cell[k].as_str().unwrap_or("?").to_string();
        let mark = match cell["outcome"].as_str() {
            Some("OUTCOME_PASS") => "✓",
            Some("OUTCOME_FAIL") => "✗",
            _ => "–",
        };
        marks.insert((field("test"), field("server"), field("client")), mark);
    }
    text.push_str("\n\n| test | server | ");
    text.push_str(
        &hosts
            .iter()
            .map(|h| format!("client {h}"))
            .collect::<Vec<_>>()
            .join(" | "),
    );
    text.push_str(" |\n|---|---|");
    text.push_str(&"---|".repeat(hosts.len()));
    text.push('\n');
    for test in &tests {
        for server in &hosts {
            text.push_str(&format!("| {test} | {server} |"));
            for client in &hosts {
                let key = (test.to_string(), server.to_string(), client.to_string());
                text.push_str(&format!(" {} |", marks.get(&key).copied().unwrap_or("–")));
            }
            text.push('\n');
        }
    }
    Ok(text)
}

/// The codepoint registry (`spec/registry.toml`) as tables: the ranges and
/// their policies, then the codepoints of each kind.
pub fn registry(root: &Path) -> Result<String> {
    let registry = corequic_registry::Registry::load(&root.join("spec/registry.toml"))
        .map_err(anyhow::Error::msg)?;
    let cell = |t: &str| t.replace('|', "\\|");
    let mut text = String::from(
        "# Codepoint registry\n\n\
         Every frame type, transport parameter ID, plugin-control ID, close code and \
         log message that the ABI or a plugin of this repository uses, rendered from \
         [`spec/registry.toml`](spec/registry.toml); \
         [Appendix B](spec/B-codepoint-registry.md) explains it. `make test` checks \
         that the constants of the plugins, the runtime and the runner agree with it.\n",
    );
    for kind in corequic_registry::KINDS {
        text.push_str(&format!("\n## {kind}\n\n| range | policy |\n|---|---|\n"));
        for r in registry.ranges.iter().filter(|r| r.kind == kind) {
            let range = match (r.first, r.last) {
                (Some(f), Some(l)) if f == l => format!("`{f:#x}`"),
                (Some(f), Some(l)) => format!("`{f:#x}`–`{l:#x}`"),
                _ => "—".to_string(),
            };
            text.push_str(&format!("| {range} | {} |\n", cell(&r.policy)));
        }
        text.push_str("\n| value | name | owner | reference |\n|---|---|---|---|\n");
        for c in registry.codepoints.iter().filter(|c| c.kind == kind) {
            let value = match c.value {
                Some(v) => format!("`{v:#x}`"),
                None => format!("fields: {}", c.fields.join(", ")),
            };
            text.push_str(&format!(
                "| {value} | {} | `{}` | `{}` |\n",
                cell(&c.name),
                c.owner,
                c.reference
            ));
        }
    }
    Ok(text)
}
