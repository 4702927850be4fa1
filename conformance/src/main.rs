//! `conformance`: run the kit (see `conformance/README.md`).
//!
//! ```text
//! conformance run --endpoint PATH --host NAME [options]   certify one host
//! conformance all --bin-dir DIR [options]                 certify every host of hosts.toml
//! conformance coverage [options]                          the requirement-coverage gate
//! conformance chaos --bin-dir DIR [options]               the chaos harness
//! ```

use corequic_conformance::cases::{self, LoadedCase};
use corequic_conformance::chaos::ChaosConfig;
use corequic_conformance::expectations::{CoverageFile, Expectations};
use corequic_conformance::proto::{CaseResult, Claim, HostReport, Report, Verdict};
use corequic_conformance::report;
use corequic_conformance::run::{Capabilities, Target, run_all};
use corequic_conformance::spec::{self, Requirement};
use corequic_interop::hosts::{HostEntry, parse_hosts, select_hosts};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "usage:
  conformance run --endpoint PATH --host NAME [--peer-endpoint PATH] [--subject-arg ARG]... [common]
  conformance all --bin-dir DIR [--hosts-file FILE] [--hosts A,B] [--claims DIR [--write-claims]] [common]
  conformance coverage [common]
  conformance chaos --bin-dir DIR [--hosts A,B] [--seeds N] [--first-seed S] [--also S1,S2,...] [--size BYTES]
                    [--timeout SECS] [--rss-limit-mib M] [common]
common options:
  --root DIR          the repository (spec/, conformance/; default .)
  --plugin-dir DIR    plugin components (default build/plugins)
  --out DIR           report folder (default target/conformance)
  --only TEXT         run only the cases whose name contains TEXT
";

#[derive(Debug, Default)]
struct Options {
    endpoint: Option<PathBuf>,
    host: Option<String>,
    peer: Option<PathBuf>,
    subject_args: Vec<String>,
    bin_dir: Option<PathBuf>,
    hosts_file: Option<PathBuf>,
    hosts: Option<Vec<String>>,
    claims: Option<PathBuf>,
    write_claims: bool,
    root: PathBuf,
    plugin_dir: Option<PathBuf>,
    out: Option<PathBuf>,
    only: Option<String>,
    seeds: u64,
    first_seed: u64,
    also: Vec<u64>,
    size: u64,
    timeout: u64,
    rss_limit_mib: u64,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        root: PathBuf::from("."),
        seeds: 12,
        size: 1_000_000,
        timeout: 10,
        rss_limit_mib: 256,
        ..Default::default()
    };
    let number = |flag: &str, v: &str| {
        v.parse::<u64>()
            .map_err(|_| format!("{flag} needs a number, got `{v}`"))
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "--write-claims" {
            o.write_claims = true;
            continue;
        }
        let value = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value"))?
            .clone();
        match flag.as_str() {
            "--endpoint" => o.endpoint = Some(value.into()),
            "--host" => o.host = Some(value),
            "--peer-endpoint" => o.peer = Some(value.into()),
            "--subject-arg" => o.subject_args.push(value),
            "--bin-dir" => o.bin_dir = Some(value.into()),
            "--hosts-file" => o.hosts_file = Some(value.into()),
            "--hosts" => o.hosts = Some(value.split(',').map(str::to_string).collect()),
            "--claims" => o.claims = Some(value.into()),
            "--root" => o.root = value.into(),
            "--plugin-dir" => o.plugin_dir = Some(value.into()),
            "--out" => o.out = Some(value.into()),
            "--only" => o.only = Some(value),
            "--seeds" => o.seeds = number(flag, &value)?,
            "--first-seed" => o.first_seed = number(flag, &value)?,
            "--also" => {
                for seed in value.split(',').filter(|s| !s.is_empty()) {
                    o.also.push(number(flag, seed)?);
                }
            }
            "--size" => o.size = number(flag, &value)?,
            "--timeout" => o.timeout = number(flag, &value)?,
            "--rss-limit-mib" => o.rss_limit_mib = number(flag, &value)?,
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(o)
}

/// Everything the kit reads from the repository.
struct Kit {
    spec: Vec<Requirement>,
    cases: Vec<LoadedCase>,
    coverage_file: CoverageFile,
}

fn load_kit(o: &Options) -> Result<Kit, String> {
    let spec = spec::load(&o.root.join("spec"))?;
    let cases = cases::load_dir(&o.root.join("conformance/cases"))?;
    cases::validate(&cases, &spec).map_err(|p| format!("invalid cases:\n  {}", p.join("\n  ")))?;
    let coverage_file = CoverageFile::read(&o.root.join("conformance/coverage.toml"))?;
    Ok(Kit {
        spec,
        cases,
        coverage_file,
    })
}

fn gate(kit: &Kit) -> Result<String, String> {
    let coverage = report::coverage(&kit.spec, &kit.cases, &kit.coverage_file);
    report::coverage_gate(&kit.spec, &coverage, &kit.coverage_file)
        .map_err(|p| format!("coverage gate:\n  {}", p.join("\n  ")))
}

fn selected(kit: &Kit, o: &Options) -> Vec<LoadedCase> {
    kit.cases
        .iter()
        .filter(|c| {
            o.only
                .as_ref()
                .is_none_or(|t| c.case.name.contains(t.as_str()))
        })
        .cloned()
        .collect()
}

fn certify(
    o: &Options,
    kit: &Kit,
    host: &str,
    endpoint: &Path,
    stack: &str,
    out: &Path,
) -> Result<HostReport, String> {
    if !endpoint.exists() {
        return Err(format!("{}: no such endpoint binary", endpoint.display()));
    }
    let expectations =
        Expectations::read(&o.root.join(format!("conformance/expectations/{host}.toml")))?;
    for d in &expectations.deviations {
        if !kit.cases.iter().any(|c| c.case.name == d.case) {
            return Err(format!(
                "expectations/{host}.toml names case {}, which does not exist",
                d.case
            ));
        }
    }
    let target = Target {
        host: host.to_string(),
        endpoint: endpoint.to_path_buf(),
        peer: o.peer.clone().unwrap_or_else(|| endpoint.to_path_buf()),
        plugin_dir: o
            .plugin_dir
            .clone()
            .unwrap_or_else(|| o.root.join("build/plugins")),
        subject_args: o.subject_args.clone(),
    };
    let capabilities = Capabilities::query(endpoint);
    let (cases, not_applicable): (Vec<LoadedCase>, Vec<LoadedCase>) = selected(kit, o)
        .into_iter()
        .partition(|c| capabilities.applies(&c.case));
    for c in &not_applicable {
        eprintln!(
            "{host}: {} does not apply ({})",
            c.case.name,
            capabilities.why_not(&c.case)
        );
    }
    let results: Vec<CaseResult> = run_all(&target, &cases, &expectations, out);
    Ok(report::host_report(
        host,
        &endpoint.display().to_string(),
        stack,
        results,
    ))
}

fn started() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    corequic_interop::runner::rfc3339(secs)
}

fn finish(o: &Options, kit: &Kit, hosts: Vec<HostReport>) -> Result<bool, String> {
    let out = o
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("target/conformance"));
    let mut r = Report::new();
    r.schema_version = report::SCHEMA_VERSION;
    r.started = started();
    r.abi = report::abi();
    r.coverage = report::coverage(&kit.spec, &kit.cases, &kit.coverage_file);
    r.hosts = hosts;
    let spec_dir =
        std::fs::canonicalize(o.root.join("spec")).unwrap_or_else(|_| o.root.join("spec"));
    let html = report::html(&r, &kit.spec, &|file| {
        format!("file://{}/{file}", spec_dir.display())
    });
    report::write(&r, &html, &out)?;
    let mut ok = true;
    for h in &r.hosts {
        let bad: Vec<&CaseResult> = h
            .results
            .iter()
            .filter(|x| {
                matches!(
                    x.verdict.enum_value_or_default(),
                    Verdict::VERDICT_FAIL | Verdict::VERDICT_UNEXPECTED_PASS
                )
            })
            .collect();
        eprintln!("{}: {}", h.host, h.claim.text);
        for b in &bad {
            eprintln!(
                "  {} {}: {}",
                b.case,
                b.role,
                corequic_conformance::run::verdict_label(b.verdict.enum_value_or_default())
            );
        }
        ok &= bad.is_empty();
    }
    if let Some(dir) = &o.claims {
        ok &= claims(dir, &r.hosts, o.write_claims, o.only.is_some())?;
    }
    eprintln!("report: {}", out.join("index.html").display());
    Ok(ok)
}

/// Compare (or with `write`, replace) the committed claims with this run's.
fn claims(dir: &Path, hosts: &[HostReport], write: bool, partial: bool) -> Result<bool, String> {
    if partial {
        eprintln!("claims: not compared (--only ran a subset of the cases)");
        return Ok(true);
    }
    let mut ok = true;
    for h in hosts {
        let path = dir.join(format!("{}.json", h.host));
        let json = protobuf_json_mapping::print_to_string(&*h.claim).map_err(|e| e.to_string())?;
        if write {
            std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
            std::fs::write(&path, format!("{json}\n"))
                .map_err(|e| format!("{}: {e}", path.display()))?;
            eprintln!("claim written: {}", path.display());
            continue;
        }
        let committed = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| protobuf_json_mapping::parse_from_str::<Claim>(&t).ok());
        match committed {
            Some(c) if c.text == h.claim.text => {}
            Some(c) => {
                eprintln!(
                    "claim of {} changed:\n  committed: {}\n  now:       {}\n  (run `make conformance-claims` to update {})",
                    h.host,
                    c.text,
                    h.claim.text,
                    path.display()
                );
                ok = false;
            }
            None => {
                eprintln!(
                    "no committed claim for {} in {} (run `make conformance-claims`)",
                    h.host,
                    path.display()
                );
                ok = false;
            }
        }
    }
    Ok(ok)
}

fn main_with(args: &[String]) -> Result<bool, String> {
    let Some(command) = args.first() else {
        return Err(USAGE.into());
    };
    // Before the kit is loaded: help and a misspelt command need no
    // repository.
    match command.as_str() {
        "help" | "--help" | "-h" => {
            use std::io::Write;
            // `print!` would panic on a stdout that cannot be written.
            let mut out = std::io::stdout().lock();
            write!(out, "{USAGE}")
                .and_then(|_| out.flush())
                .map_err(|e| format!("writing the usage: {e}"))?;
            return Ok(true);
        }
        "coverage" | "run" | "all" | "chaos" => {}
        other => return Err(format!("unknown command {other}\n{USAGE}")),
    }
    let o = parse(&args[1..])?;
    let kit = load_kit(&o)?;
    let out = o
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("target/conformance"));
    match command.as_str() {
        "coverage" => {
            eprintln!("{} cases, {} requirements", kit.cases.len(), kit.spec.len());
            eprintln!("{}", gate(&kit)?);
            Ok(true)
        }
        "run" => {
            let endpoint = o.endpoint.clone().ok_or("run needs --endpoint PATH")?;
            let host = o.host.clone().ok_or("run needs --host NAME")?;
            let report = certify(&o, &kit, &host, &endpoint, "", &out)?;
            finish(&o, &kit, vec![report])
        }
        "all" => {
            eprintln!("{}", gate(&kit)?);
            let bin_dir = o.bin_dir.clone().ok_or("all needs --bin-dir DIR")?;
            let entries = host_entries(&o)?;
            let mut reports = Vec::new();
            for e in &entries {
                if o.hosts.as_ref().is_some_and(|w| !w.contains(&e.name)) {
                    continue;
                }
                let endpoint = bin_dir.join(&e.binary);
                reports.push(certify(&o, &kit, &e.name, &endpoint, &e.stack, &out)?);
            }
            if reports.is_empty() {
                return Err("no host selected".into());
            }
            finish(&o, &kit, reports)
        }
        "chaos" => chaos(&o),
        other => Err(format!("unknown command {other}\n{USAGE}")),
    }
}

/// The hosts of `--hosts-file` (default `interop-runner/hosts.toml`).
fn host_entries(o: &Options) -> Result<Vec<HostEntry>, String> {
    let hosts_file = o
        .hosts_file
        .clone()
        .unwrap_or_else(|| o.root.join("interop-runner/hosts.toml"));
    let text = std::fs::read_to_string(&hosts_file)
        .map_err(|e| format!("{}: {e}", hosts_file.display()))?;
    parse_hosts(&text)
}

/// `conformance chaos`: the seeded chaos plugin against every selected host.
fn chaos(o: &Options) -> Result<bool, String> {
    let bin_dir = o.bin_dir.clone().ok_or("chaos needs --bin-dir DIR")?;
    let hosts = select_hosts(&host_entries(o)?, &bin_dir, o.hosts.as_deref())?;
    let plugin_dir = o
        .plugin_dir
        .clone()
        .unwrap_or_else(|| o.root.join("build/plugins"));
    let config = ChaosConfig {
        hosts,
        plugin: plugin_dir.join("test-chaos.wasm"),
        sink: plugin_dir.join("test-chaos-sink.wasm"),
        first_seed: o.first_seed,
        seeds: o.seeds,
        also: o.also.clone(),
        size: o.size,
        timeout_seconds: o.timeout,
        rss_limit_kib: o.rss_limit_mib * 1024,
        out: o
            .out
            .clone()
            .unwrap_or_else(|| PathBuf::from("target/chaos")),
    };
    let started = std::time::Instant::now();
    let results = corequic_conformance::chaos::run(&config)?;
    let summary =
        corequic_conformance::chaos::summary(&results, &config, started.elapsed().as_secs_f64());
    eprint!("{summary}");
    corequic_conformance::chaos::write_summary(&config.out, &summary, &results)?;
    eprintln!("chaos: {}", config.out.join("summary.txt").display());
    Ok(results.iter().all(|r| r.violations.is_empty()))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match main_with(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("conformance: {e}");
            ExitCode::from(2)
        }
    }
}
