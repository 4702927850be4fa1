//! `interop-runner`: run the interop matrix, or check a report in headless
//! chromium. See `interop-runner/README.md`.

use corequic_interop::browser::{
    FIRST_SERIES_RGB, PASS_RGB, count_colour, count_dom, render_with_chromium,
};
use corequic_interop::cases::{Matrix, TESTS};
use corequic_interop::execute::Environment;
use corequic_interop::hosts::{Host, answers_unsupported, parse_hosts, select_hosts};
use corequic_interop::perf::{
    PerfLink, PerfRun, default_plugins, markdown as perf_markdown, run_perf,
};
use corequic_interop::runner::{
    MatrixRun, default_out, missing_required, now_rfc3339, parse_required, run_matrix,
    summarize_hosts,
};
use corequic_interop::{report, results};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "\
usage: interop-runner [options]            run the matrix
       interop-runner check-report DIR [--chromium BIN]
       interop-runner perf [--hosts a,b] [--links loopback,1gbit] [--runs N] [--size BYTES]
                           [--bin-dir DIR] [--plugin-dir DIR] [--out DIR] [--markdown FILE]
                           [--plugins a,b]   (default probe,bdp,dummy,ack-logger;
                                              `none`: both modes plugin-free, an A/A run
                                              that shows the measurement's own spread)
                           --size: bytes per run on every link (default 200000000
                           over loopback, 50000000 through the 1 Gbit/s link)
options:
  --matrix reduced|default|paper   sizes, links and repetitions (default: default)
  --hosts a,b                      hosts to pair (default: every host in the hosts
                                   file whose endpoint binary exists)
  --tests t1,t2                    test cases (default: the matrix's)
  --hosts-file FILE                default interop-runner/hosts.toml
  --bin-dir DIR                    endpoint binaries (default target/debug)
  --plugin-dir DIR                 plugin components (default build/plugins)
  --out DIR                        results folder (default target/interop/<matrix>-<time>)
  --required FILE                  exit 1 unless every listed server/client/test passed
  --queue BYTES                    bottleneck queue of every link (default: the matrix's)
exit codes: 0 every cell passed (or, with --required, every required one), 1 otherwise";

/// The value after `flag`, or an error that names the flag.
fn value_of<'a>(it: &mut impl Iterator<Item = &'a String>, flag: &str) -> Result<String, String> {
    it.next()
        .cloned()
        .ok_or_else(|| format!("{flag} needs a value"))
}

/// The hosts of `hosts_file` (only those in `filter`, when given) whose
/// endpoint binary is in `bin_dir`; an error when none is.
fn load_hosts(
    hosts_file: &Path,
    bin_dir: &Path,
    filter: Option<&[String]>,
) -> Result<Vec<Host>, String> {
    let text = std::fs::read_to_string(hosts_file)
        .map_err(|e| format!("{}: {e}", hosts_file.display()))?;
    let entries = parse_hosts(&text).map_err(|e| format!("{}: {e}", hosts_file.display()))?;
    let hosts = select_hosts(&entries, bin_dir, filter)?;
    if hosts.is_empty() {
        return Err(format!(
            "no endpoint binary of {} found in {}",
            hosts_file.display(),
            bin_dir.display()
        ));
    }
    Ok(hosts)
}

/// The plugin folder as an absolute path (endpoints run elsewhere).
fn plugin_folder(dir: &Path) -> Result<PathBuf, String> {
    dir.canonicalize()
        .map_err(|e| format!("{}: {e} (run `make plugins`)", dir.display()))
}

/// A comma-separated list, without empty items.
fn list(v: &str) -> Vec<String> {
    v.split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

struct Options {
    matrix: Matrix,
    hosts: Option<Vec<String>>,
    tests: Option<Vec<String>>,
    hosts_file: PathBuf,
    bin_dir: PathBuf,
    plugin_dir: PathBuf,
    out: Option<PathBuf>,
    required: Option<PathBuf>,
    queue_bytes: Option<u64>,
}

fn parse_options(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        matrix: Matrix::Default,
        hosts: None,
        tests: None,
        hosts_file: "interop-runner/hosts.toml".into(),
        bin_dir: "target/debug".into(),
        plugin_dir: "build/plugins".into(),
        out: None,
        required: None,
        queue_bytes: None,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || value_of(&mut it, flag);
        match flag.as_str() {
            "--matrix" => {
                let v = value()?;
                o.matrix = Matrix::parse(&v).ok_or_else(|| format!("unknown matrix `{v}`"))?;
            }
            "--hosts" => o.hosts = Some(list(&value()?)),
            "--tests" => o.tests = Some(list(&value()?)),
            "--hosts-file" => o.hosts_file = value()?.into(),
            "--bin-dir" => o.bin_dir = value()?.into(),
            "--plugin-dir" => o.plugin_dir = value()?.into(),
            "--out" => o.out = Some(value()?.into()),
            "--required" => o.required = Some(value()?.into()),
            "--queue" => {
                let v = value()?;
                let bytes = v
                    .parse::<u64>()
                    .ok()
                    .filter(|&b| b >= 1500)
                    .ok_or_else(|| {
                        format!("--queue: `{v}` is not a byte count of at least 1500")
                    })?;
                o.queue_bytes = Some(bytes);
            }
            other => return Err(format!("unknown option `{other}`\n{USAGE}")),
        }
    }
    Ok(o)
}

fn run(args: &[String]) -> Result<bool, String> {
    let o = parse_options(args)?;
    let hosts = load_hosts(&o.hosts_file, &o.bin_dir, o.hosts.as_deref())?;
    let tests: Vec<String> = match o.tests {
        Some(t) => {
            if let Some(bad) = t.iter().find(|t| !TESTS.contains(&t.as_str())) {
                return Err(format!("unknown test `{bad}`"));
            }
            t
        }
        None => o.matrix.tests().iter().map(|t| t.to_string()).collect(),
    };
    let plugin_dir = plugin_folder(&o.plugin_dir)?;
    // Before the run: each endpoint must answer 127 to an unknown test.
    let mut answers = Vec::new();
    for h in &hosts {
        let ok = answers_unsupported(h)?;
        eprintln!(
            "host {:<9} {}  {}",
            h.name,
            h.binary.display(),
            if ok {
                "answers 127 to an unknown test"
            } else {
                "does NOT answer 127 to an unknown test"
            }
        );
        if !ok {
            return Err(format!(
                "host `{}` does not answer 127 to an unknown test",
                h.name
            ));
        }
        answers.push(ok);
    }
    let started = now_rfc3339();
    let out = o
        .out
        .unwrap_or_else(|| default_out(Path::new("target/interop"), o.matrix, &started));
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let spec = MatrixRun {
        matrix: o.matrix,
        hosts: hosts.clone(),
        tests: tests.clone(),
        env: Environment { plugin_dir },
        out: out.clone(),
        queue_bytes: o.queue_bytes,
    };
    eprintln!(
        "matrix {}: {} host(s), {} test(s), {} cell(s) -> {}",
        o.matrix.name(),
        hosts.len(),
        tests.len(),
        hosts.len() * hosts.len() * tests.len(),
        out.display()
    );
    let cells = run_matrix(&spec);
    let host_summaries = summarize_hosts(&hosts, &answers);
    let test_names: Vec<&str> = tests.iter().map(String::as_str).collect();
    let proto = results::to_proto(
        o.matrix.name(),
        &started,
        &host_summaries,
        &test_names,
        &cells,
        &out,
    );
    results::write(&proto, &out)?;
    let html = report::render(
        o.matrix.name(),
        &started,
        &host_summaries,
        &test_names,
        &cells,
    );
    let index = out.join("index.html");
    std::fs::write(&index, html).map_err(|e| format!("{}: {e}", index.display()))?;
    let passed = cells
        .iter()
        .filter(|c| c.outcome == results::Outcome::Pass)
        .count();
    eprintln!("{passed} of {} cells passed", cells.len());
    println!("report: {}", index.display());
    match o.required {
        Some(path) => {
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let missing = missing_required(&parse_required(&text), &cells);
            for m in &missing {
                eprintln!("required cell did not pass: {m}");
            }
            Ok(missing.is_empty())
        }
        None => Ok(cells.iter().all(|c| c.outcome != results::Outcome::Fail)),
    }
}

/// `check-report DIR`: render `DIR/index.html` in headless chromium and
/// check the matrix and plots are there, in the DOM and on screen.
fn check_report(args: &[String]) -> Result<bool, String> {
    let dir = PathBuf::from(args.first().ok_or(USAGE)?);
    let chromium = match args.get(1..3) {
        Some([flag, bin]) if flag == "--chromium" => bin.clone(),
        _ => "chromium".to_string(),
    };
    let results = results::read(&dir.join("results.pb"))?;
    let hosts = results.hosts.len();
    let tests = results.tests.len();
    let has_test = |t: &str| results.cells.iter().any(|c| c.test == t);
    let screenshot = dir.join("screenshot.png");
    let dom = render_with_chromium(&chromium, &dir.join("index.html"), &screenshot)?;
    let counts = count_dom(&dom);
    let png = std::fs::read(&screenshot).map_err(|e| format!("{}: {e}", screenshot.display()))?;
    let pass_pixels = count_colour(&png, PASS_RGB)?;
    let series_pixels = count_colour(&png, FIRST_SERIES_RGB)?;
    let pass_cells = results
        .cells
        .iter()
        .filter(|c| {
            c.outcome.enum_value_or_default()
                == corequic_interop::proto::results::Outcome::OUTCOME_PASS
        })
        .count();
    let mut failures = Vec::new();
    let mut expect = |ok: bool, what: String| {
        eprintln!("{} {what}", if ok { "ok  " } else { "FAIL" });
        if !ok {
            failures.push(what);
        }
    };
    expect(
        counts.matrix_tables == tests,
        format!(
            "{} matrix tables rendered, {tests} tests",
            counts.matrix_tables
        ),
    );
    expect(
        counts.verdict_cells == hosts * hosts * tests,
        format!(
            "{} verdict cells rendered, {} expected",
            counts.verdict_cells,
            hosts * hosts * tests
        ),
    );
    for (i, (fig, test)) in [
        ("fig3", "padding"),
        ("fig4", "padding"),
        ("fig5", "bdp"),
        ("fig6", "dummy+padding"),
    ]
    .iter()
    .enumerate()
    {
        if has_test(test) {
            expect(
                counts.plots[i] >= 1,
                format!("{} {fig} plot(s) rendered", counts.plots[i]),
            );
        }
    }
    expect(
        counts.series >= 1,
        format!("{} plot series in the DOM", counts.series),
    );
    // A passing cell is a 90x25 px green box at least.
    expect(
        pass_cells == 0 || pass_pixels >= pass_cells * 500,
        format!("{pass_pixels} pass-green pixels on screen for {pass_cells} passing cells"),
    );
    expect(
        series_pixels >= 100,
        format!("{series_pixels} first-series pixels on screen"),
    );
    Ok(failures.is_empty())
}

/// `perf`: goodput with and without the reference plugins on every pair of
/// hosts (`corequic_interop::perf`); prints the Markdown table.
fn perf(args: &[String]) -> Result<bool, String> {
    let mut hosts_filter = None;
    let mut hosts_file = PathBuf::from("interop-runner/hosts.toml");
    let mut links = vec![PerfLink::Loopback, PerfLink::Gigabit];
    let mut runs = 10;
    let mut size = None;
    let mut bin_dir = PathBuf::from("target/release");
    let mut plugin_dir = PathBuf::from("build/plugins");
    let mut out = PathBuf::from("target/interop/perf");
    let mut markdown_file = None;
    let mut plugins = default_plugins();
    let mut it = args.iter();
    let number = |flag: &str, v: String| {
        v.parse::<u64>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("{flag}: `{v}` is not a positive number"))
    };
    while let Some(flag) = it.next() {
        let mut value = || value_of(&mut it, flag);
        match flag.as_str() {
            "--hosts" => hosts_filter = Some(list(&value()?)),
            "--hosts-file" => hosts_file = value()?.into(),
            "--links" => {
                links = value()?
                    .split(',')
                    .map(|l| PerfLink::parse(l).ok_or_else(|| format!("unknown link `{l}`")))
                    .collect::<Result<_, _>>()?
            }
            "--runs" => runs = number(flag, value()?)? as usize,
            "--size" => size = Some(number(flag, value()?)?),
            "--bin-dir" => bin_dir = value()?.into(),
            "--plugin-dir" => plugin_dir = value()?.into(),
            "--out" => out = value()?.into(),
            "--markdown" => markdown_file = Some(PathBuf::from(value()?)),
            "--plugins" => plugins = list(&value()?),
            other => return Err(format!("unknown option `{other}`\n{USAGE}")),
        }
    }
    if plugins.is_empty() {
        return Err(format!(
            "--plugins: name at least one plugin, or none\n{USAGE}"
        ));
    }
    if plugins == ["none"] {
        plugins.clear();
    }
    let hosts = load_hosts(&hosts_file, &bin_dir, hosts_filter.as_deref())?;
    let env = Environment {
        plugin_dir: plugin_folder(&plugin_dir)?,
    };
    if let Some(missing) = plugins.iter().find(|p| !env.plugin_path(p).is_file()) {
        return Err(format!(
            "--plugins: no {} (run `make plugins`)",
            env.plugin_path(missing).display()
        ));
    }
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let spec = PerfRun {
        hosts,
        links,
        runs,
        size,
        plugins,
        env,
        out: out.clone(),
    };
    let cells = run_perf(&spec);
    let json = serde_json::to_string_pretty(&cells).map_err(|e| e.to_string())?;
    let results = out.join("perf.json");
    std::fs::write(&results, json).map_err(|e| format!("{}: {e}", results.display()))?;
    let table = perf_markdown(&cells, runs, &spec.plugins);
    if let Some(path) = markdown_file {
        std::fs::write(&path, &table).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    println!("{table}");
    Ok(cells.iter().all(|c| c.ratio().is_some()))
}

/// `--help`: the usage on stdout, exit 0 (1 if stdout cannot be written,
/// where `println!` would panic).
fn print_usage() -> ExitCode {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{USAGE}").and_then(|_| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return print_usage();
    }
    let outcome = match args.first().map(String::as_str) {
        Some("check-report") => check_report(&args[1..]),
        Some("perf") => perf(&args[1..]),
        _ => run(&args),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("interop-runner: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn queue_overrides_take_a_byte_count() {
        let o = parse_options(&args(&["--queue", "1200000"])).expect("valid");
        assert_eq!(o.queue_bytes, Some(1_200_000));
        assert_eq!(parse_options(&args(&[])).expect("valid").queue_bytes, None);
        for bad in ["", "1.5MB", "100", "-3"] {
            let err = parse_options(&args(&["--queue", bad])).err();
            assert!(
                err.as_deref().is_some_and(|e| e.contains("--queue")),
                "{bad:?}: {err:?}"
            );
        }
        assert!(parse_options(&args(&["--queue"])).is_err());
    }
}
