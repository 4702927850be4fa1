//! `interop-runner perf`: what the reference plugins cost in bulk goodput,
//! on every server × client pair of hosts, measured against the same pair
//! without plugins in one run (`make perf`, `docs/measurements.md`).
//!
//! Each pair downloads a file with no plugins and with the four
//! non-padding reference plugins loaded on both sides, alternately, so that
//! drifts of the machine hit both modes alike. Padding is left out: it
//! halts after every packet by design.

use crate::execute::{Environment, RunSpec, SideSpec, run_pair};
use crate::hosts::Host;
use crate::link::{DatagramRecord, Direction, Fate, LinkParams};
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// The plugins loaded on both sides in the "plugins" mode, unless
/// [`PerfRun::plugins`] names others.
pub const PERF_PLUGINS: &[&str] = &["probe", "bdp", "dummy", "ack-logger"];

/// [`PERF_PLUGINS`], as [`PerfRun::plugins`] takes them.
pub fn default_plugins() -> Vec<String> {
    PERF_PLUGINS.iter().map(|p| p.to_string()).collect()
}

/// The paths a measurement runs over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PerfLink {
    /// The client talks to the server directly over loopback: no emulator,
    /// no bottleneck, the harshest case for per-packet costs.
    Loopback,
    /// Through the link emulator at 1 Gbit/s with a 2 ms RTT.
    Gigabit,
}

impl PerfLink {
    /// Parse `loopback` or `1gbit`.
    pub fn parse(name: &str) -> Option<PerfLink> {
        match name {
            "loopback" => Some(PerfLink::Loopback),
            "1gbit" => Some(PerfLink::Gigabit),
            _ => None,
        }
    }

    /// Its name on the command line and in the table.
    pub fn name(self) -> &'static str {
        match self {
            PerfLink::Loopback => "loopback",
            PerfLink::Gigabit => "1gbit",
        }
    }

    /// Bytes each run downloads unless `--size` says otherwise: enough for
    /// the transfer to spend most of its time in steady state. Over loopback
    /// 50 MB took 70–120 ms, slow start and scheduling moved runs of one
    /// mode by 15–40 %, and a cell's interval was wider than the plugins'
    /// cost; 200 MB takes 0.3–1 s. Through the 1 Gbit/s link 50 MB already
    /// takes 0.45 s.
    pub fn default_size(self) -> u64 {
        match self {
            PerfLink::Loopback => 200_000_000,
            PerfLink::Gigabit => 50_000_000,
        }
    }

    /// The emulated path; `None` for a direct connection.
    fn params(self) -> Option<LinkParams> {
        match self {
            PerfLink::Loopback => None,
            PerfLink::Gigabit => Some(LinkParams {
                one_way_delay: Duration::from_millis(1),
                rate_bits_per_second: Some(1_000_000_000),
                // Two bandwidth-delay products.
                queue_bytes: 500_000,
                loss: 0.0,
                max_datagram_size: 1472,
                seed: 1,
                ecn_mark: None,
            }),
        }
    }
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct PerfRun {
    /// The hosts; every server × client pair is measured.
    pub hosts: Vec<Host>,
    /// The paths.
    pub links: Vec<PerfLink>,
    /// Runs per mode, per pair and path.
    pub runs: usize,
    /// Bytes the client downloads in each run; `None`: each link's
    /// [`PerfLink::default_size`].
    pub size: Option<u64>,
    /// The plugins loaded on both sides in the "plugins" mode (by default
    /// [`PERF_PLUGINS`]; one of them alone shows what it costs; none makes
    /// both modes the same, an A/A run).
    pub plugins: Vec<String>,
    /// Plugins and their folder.
    pub env: Environment,
    /// The results folder (every run's stats and logs).
    pub out: PathBuf,
}

/// Goodput figures of one mode, Mbit/s.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ModeFigures {
    /// Every successful run, in run order.
    pub runs_mbps: Vec<f64>,
    /// What the emulated link saw in each successful run, in run order
    /// (empty over loopback, where no emulator sits between the sides).
    pub link: Vec<LinkFacts>,
    /// The CPU time of each side in each successful run where both
    /// reported it, in run order.
    pub cpu: Vec<RunCpu>,
    /// Runs that did not complete byte-exact (not counted in the figures).
    pub failed: usize,
}

/// Each side's CPU time in one run, ms, and how much of it the side spent
/// inside its plugins' calls (0 where it reported none).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RunCpu {
    /// The server process's CPU time.
    pub server_ms: f64,
    /// The client process's CPU time.
    pub client_ms: f64,
    /// The server's time inside its plugins' calls.
    pub server_in_plugins_ms: f64,
    /// The client's time inside its plugins' calls.
    pub client_in_plugins_ms: f64,
}

/// What the emulated link saw in one run. A download's client sends
/// almost only acknowledgements, so its datagram count shows how often it
/// acknowledged; and a stack's congestion controller (and, in neqo, the
/// acknowledgement rate it asks of its peer) changes at the first drop.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LinkFacts {
    /// Datagrams the client sent.
    pub client_datagrams: u64,
    /// Datagrams the link dropped, both directions.
    pub dropped: u64,
    /// When the link dropped its first datagram, in ms since it started.
    pub first_drop_ms: Option<f64>,
}

impl LinkFacts {
    /// The facts of one run's link trace.
    pub fn of(trace: &[DatagramRecord]) -> LinkFacts {
        let dropped = || trace.iter().filter(|d| matches!(d.fate, Fate::Dropped(_)));
        LinkFacts {
            client_datagrams: trace
                .iter()
                .filter(|d| d.direction == Direction::ClientToServer)
                .count() as u64,
            dropped: dropped().count() as u64,
            first_drop_ms: dropped()
                .map(|d| d.sent.as_secs_f64() * 1e3)
                .min_by(f64::total_cmp),
        }
    }
}

impl ModeFigures {
    /// Median CPU time of the server and of the client over the runs that
    /// reported it, ms.
    fn cpu_medians(&self) -> Option<(f64, f64)> {
        Some((
            median(self.cpu.iter().map(|c| c.server_ms))?,
            median(self.cpu.iter().map(|c| c.client_ms))?,
        ))
    }

    /// Median time inside plugin calls of the server and of the client,
    /// ms, and the median share of its run's CPU time that was, per side;
    /// `None` when no run reported CPU time or no plugin was called.
    fn plugin_medians(&self) -> Option<[(f64, f64); 2]> {
        if self
            .cpu
            .iter()
            .all(|c| c.server_in_plugins_ms == 0.0 && c.client_in_plugins_ms == 0.0)
        {
            return None;
        }
        let share = |part: f64, whole: f64| if whole > 0.0 { part / whole } else { 0.0 };
        let side = |in_plugins: fn(&RunCpu) -> f64, whole: fn(&RunCpu) -> f64| {
            Some((
                median(self.cpu.iter().map(in_plugins))?,
                median(self.cpu.iter().map(|c| share(in_plugins(c), whole(c))))?,
            ))
        };
        Some([
            side(|c| c.server_in_plugins_ms, |c| c.server_ms)?,
            side(|c| c.client_in_plugins_ms, |c| c.client_ms)?,
        ])
    }

    /// Median client datagrams and median drops over the runs with link
    /// facts, and the median time of the first drop over the runs that had
    /// one, with how many had none.
    fn link_medians(&self) -> Option<(f64, f64, Option<f64>, usize)> {
        let datagrams = median(self.link.iter().map(|l| l.client_datagrams as f64))?;
        let dropped = median(self.link.iter().map(|l| l.dropped as f64))?;
        let first = median(self.link.iter().filter_map(|l| l.first_drop_ms));
        let none = self
            .link
            .iter()
            .filter(|l| l.first_drop_ms.is_none())
            .count();
        Some((datagrams, dropped, first, none))
    }
}

/// The median of `values`; `None` for none.
fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut sorted: Vec<f64> = values.collect();
    sorted.sort_by(f64::total_cmp);
    quantile(&sorted, 0.5)
}

/// The cells for which both modes give `figure`, with the two figures
/// (without plugins, with).
fn in_both_modes<T>(
    cells: &[PerfCell],
    figure: impl Fn(&ModeFigures) -> Option<T>,
) -> Vec<(&PerfCell, T, T)> {
    cells
        .iter()
        .filter_map(|c| Some((c, figure(&c.without)?, figure(&c.with)?)))
        .collect()
}

impl ModeFigures {
    /// Median, first and third quartile of the successful runs.
    pub fn quartiles(&self) -> Option<(f64, f64, f64)> {
        let mut sorted = self.runs_mbps.clone();
        sorted.sort_by(f64::total_cmp);
        Some((
            quantile(&sorted, 0.5)?,
            quantile(&sorted, 0.25)?,
            quantile(&sorted, 0.75)?,
        ))
    }
}

/// Resamples behind [`PerfCell::ratio_interval`].
const BOOTSTRAP_RESAMPLES: usize = 2000;

/// One server × client × path measurement.
#[derive(Debug, Clone, Serialize)]
pub struct PerfCell {
    /// Server host.
    pub server: String,
    /// Client host.
    pub client: String,
    /// The path.
    pub link: PerfLink,
    /// Bytes downloaded in each run.
    pub size: u64,
    /// Without plugins.
    pub without: ModeFigures,
    /// With [`PerfRun::plugins`] on both sides.
    pub with: ModeFigures,
    /// Goodput with plugins over goodput without, in each round where both
    /// modes completed, in round order. The two runs of a round ran back to
    /// back, so a drift of the machine from one round to the next cancels
    /// out of their ratio.
    pub round_ratios: Vec<f64>,
}

impl PerfCell {
    /// Median goodput with plugins over median goodput without.
    pub fn ratio(&self) -> Option<f64> {
        let (with, ..) = self.with.quartiles()?;
        let (without, ..) = self.without.quartiles()?;
        (without > 0.0).then(|| with / without)
    }

    /// A 95 % interval of [`Self::ratio`]: the 2.5th and 97.5th percentiles
    /// of the ratio of medians over runs resampled with replacement
    /// (percentile bootstrap), from a fixed seed so that a table is
    /// reproducible from its runs. With ten runs a mode whose runs spread
    /// widely gives a wide interval: a cell whose interval holds the goal
    /// has not shown that it misses it, nor that it meets it.
    pub fn ratio_interval(&self) -> Option<(f64, f64)> {
        let (with, without) = (&self.with.runs_mbps, &self.without.runs_mbps);
        if with.is_empty() || without.is_empty() {
            return None;
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        bootstrap_interval(|rng| {
            resample(with, rng, &mut a);
            resample(without, rng, &mut b);
            let (w, wo) = (quantile(&a, 0.5)?, quantile(&b, 0.5)?);
            (wo > 0.0).then(|| w / wo)
        })
    }

    /// The median of [`Self::round_ratios`], each the ratio of two runs
    /// that ran back to back.
    pub fn paired_ratio(&self) -> Option<f64> {
        median(self.round_ratios.iter().copied())
    }

    /// A 95 % interval of [`Self::paired_ratio`], by percentile bootstrap
    /// over the rounds. Narrower than [`Self::ratio_interval`] when the
    /// machine drifts between rounds more than within one.
    pub fn paired_interval(&self) -> Option<(f64, f64)> {
        if self.round_ratios.is_empty() {
            return None;
        }
        let mut a = Vec::new();
        bootstrap_interval(|rng| {
            resample(&self.round_ratios, rng, &mut a);
            quantile(&a, 0.5)
        })
    }
}

/// `into` becomes a sorted resample of `runs`, drawn with replacement.
fn resample(runs: &[f64], rng: &mut SplitMix64, into: &mut Vec<f64>) {
    into.clear();
    into.extend((0..runs.len()).map(|_| runs[rng.below(runs.len())]));
    into.sort_by(f64::total_cmp);
}

/// The 2.5th and 97.5th percentiles of `statistic` over
/// [`BOOTSTRAP_RESAMPLES`] resamples, from a fixed seed so that a table is
/// reproducible from its runs.
fn bootstrap_interval(
    mut statistic: impl FnMut(&mut SplitMix64) -> Option<f64>,
) -> Option<(f64, f64)> {
    let mut rng = SplitMix64(0x5eed_c0de_0001);
    let mut values: Vec<f64> = (0..BOOTSTRAP_RESAMPLES)
        .filter_map(|_| statistic(&mut rng))
        .collect();
    values.sort_by(f64::total_cmp);
    Some((quantile(&values, 0.025)?, quantile(&values, 0.975)?))
}

/// A small deterministic generator (SplitMix64) for the bootstrap: the
/// table must not change between two renderings of the same runs.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0); the modulo bias is below 2^-50 for the
    /// run counts used here.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The `q` quantile (0 ..= 1) of sorted values, interpolated linearly
/// between the two nearest ranks; `None` for no values.
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let pos = q.clamp(0.0, 1.0) * last as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64))
}

fn spec(label: &str, link: PerfLink, size: u64, plugins: &[&str]) -> RunSpec {
    let params = link.params();
    RunSpec {
        label: label.into(),
        direct: params.is_none(),
        // Unused by a direct run.
        link: params.unwrap_or(LinkParams {
            one_way_delay: Duration::ZERO,
            rate_bits_per_second: None,
            queue_bytes: 0,
            loss: 0.0,
            max_datagram_size: 65_527,
            seed: 1,
            ecn_mark: None,
        }),
        file_size: size,
        server: SideSpec::with(plugins),
        client: SideSpec::with(plugins),
        timeout_seconds: 120,
        measurement: true,
    }
}

/// Goodput of a run in Mbit/s, if the client got every byte.
fn goodput_mbps(outcome: &crate::execute::RunOutcome, size: u64) -> Option<f64> {
    let stats = outcome.client.stats.as_ref()?;
    (outcome.client.exit_code == Some(0)
        && stats.ok
        && stats.bytes == size
        && stats.duration_ms > 0.0)
        .then(|| size as f64 * 8.0 / (stats.duration_ms / 1000.0) / 1e6)
}

/// Run every measurement, printing progress to stderr.
pub fn run_perf(spec_run: &PerfRun) -> Vec<PerfCell> {
    let mut cells = Vec::new();
    for link in &spec_run.links {
        for server in &spec_run.hosts {
            for client in &spec_run.hosts {
                eprint!(
                    "perf {:<8} server {:<9} client {:<9} ",
                    link.name(),
                    server.name,
                    client.name
                );
                let size = spec_run.size.unwrap_or(link.default_size());
                let mut cell = PerfCell {
                    server: server.name.clone(),
                    client: client.name.clone(),
                    link: *link,
                    size,
                    without: ModeFigures::default(),
                    with: ModeFigures::default(),
                    round_ratios: Vec::new(),
                };
                let plugins: Vec<&str> = spec_run.plugins.iter().map(String::as_str).collect();
                for i in 0..spec_run.runs {
                    // Alternate which mode goes first.
                    let modes: [(&str, &[&str]); 2] = if i % 2 == 0 {
                        [("without", &[]), ("with", &plugins)]
                    } else {
                        [("with", &plugins), ("without", &[])]
                    };
                    // This round's goodput, with plugins and without.
                    let mut round = (None, None);
                    for (mode, plugins) in modes {
                        let label = format!("{mode}-{i}");
                        let run = spec(&label, *link, size, plugins);
                        let folder = spec_run
                            .out
                            .join(link.name())
                            .join(format!("server-{}_client-{}", server.name, client.name))
                            .join(&label);
                        let outcome =
                            run_pair(&spec_run.env, server, client, "transfer", &run, &folder);
                        let (figures, goodput) = if mode == "with" {
                            (&mut cell.with, &mut round.0)
                        } else {
                            (&mut cell.without, &mut round.1)
                        };
                        match goodput_mbps(&outcome, size) {
                            Some(g) => {
                                *goodput = Some(g);
                                figures.runs_mbps.push(g);
                                if !run.direct {
                                    figures.link.push(LinkFacts::of(&outcome.trace));
                                }
                                let cpu = |side: &crate::execute::EndpointOutcome| {
                                    side.stats.as_ref().and_then(|s| s.cpu_ms)
                                };
                                let in_plugins = |side: &crate::execute::EndpointOutcome| {
                                    side.stats.as_ref().map_or(0.0, |s| {
                                        s.plugins.iter().filter_map(|p| p.call_time_ns).sum::<u64>()
                                            as f64
                                            / 1e6
                                    })
                                };
                                if let (Some(server), Some(client)) =
                                    (cpu(&outcome.server), cpu(&outcome.client))
                                {
                                    figures.cpu.push(RunCpu {
                                        server_ms: server,
                                        client_ms: client,
                                        server_in_plugins_ms: in_plugins(&outcome.server),
                                        client_in_plugins_ms: in_plugins(&outcome.client),
                                    });
                                }
                            }
                            None => figures.failed += 1,
                        }
                    }
                    if let (Some(with), Some(without)) = round {
                        cell.round_ratios.push(with / without);
                    }
                    eprint!(".");
                    let _ = std::io::stderr().flush();
                    // A pair that transfers nothing in either mode (an
                    // endpoint that cannot start, say) would fail every
                    // run, each after the endpoints' whole timeout.
                    if cell.with.runs_mbps.is_empty() && cell.without.runs_mbps.is_empty() {
                        eprint!(" first round failed in both modes, pair skipped;");
                        break;
                    }
                }
                match cell.ratio() {
                    Some(r) => eprintln!(" {:.1} %", r * 100.0),
                    None => eprintln!(" no result"),
                }
                cells.push(cell);
            }
        }
    }
    cells
}

/// The results as a Markdown table, one row per pair and path.
pub fn markdown(cells: &[PerfCell], runs: usize, plugins: &[String]) -> String {
    let plugins = if plugins.is_empty() {
        "none in either mode (an A/A run: the two modes are the same, and their ratios \
         show how far the measurement alone spreads)"
            .to_string()
    } else {
        format!("{} on both sides", plugins.join(", "))
    };
    let mut sizes: Vec<String> = Vec::new();
    for c in cells {
        let size = format!("{} bytes over {}", c.size, c.link.name());
        if !sizes.contains(&size) {
            sizes.push(size);
        }
    }
    let sizes = sizes.join(", ");
    let mut out = format!(
        "Bulk download of {sizes}, {runs} runs per mode alternated; goodput in Mbit/s \
         as median (first–third quartile); plugins: {plugins}. The ratio of medians has \
         its 95 % interval by percentile bootstrap over the runs; the paired ratio is the \
         median, over the rounds, of the ratio of a round's two runs (which ran back to \
         back), with its interval by bootstrap over the rounds.\n\n\
         | link | server | client | without plugins | with plugins | ratio of medians | 95 % interval | paired ratio | 95 % interval |\n\
         |---|---|---|---|---|---|---|---|---|\n"
    );
    let figures = |m: &ModeFigures| match m.quartiles() {
        Some((median, q1, q3)) => {
            let failed = if m.failed > 0 {
                format!(", {} failed", m.failed)
            } else {
                String::new()
            };
            format!("{median:.0} ({q1:.0}–{q3:.0}){failed}")
        }
        None => format!("no run completed ({} failed)", m.failed),
    };
    let percent = |r: Option<f64>| r.map_or("—".to_string(), |r| format!("{:.1} %", r * 100.0));
    let interval = |i: Option<(f64, f64)>| {
        i.map_or("—".to_string(), |(lo, hi)| {
            format!("{:.1}–{:.1} %", lo * 100.0, hi * 100.0)
        })
    };
    for c in cells {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            c.link.name(),
            c.server,
            c.client,
            figures(&c.without),
            figures(&c.with),
            percent(c.ratio()),
            interval(c.ratio_interval()),
            percent(c.paired_ratio()),
            interval(c.paired_interval()),
        ));
    }
    let against_goal = |intervals: Vec<(f64, f64)>, by: &str| {
        if intervals.is_empty() {
            return String::new();
        }
        let below = intervals
            .iter()
            .filter(|(_, hi)| *hi < GOODPUT_GOAL)
            .count();
        let above = intervals
            .iter()
            .filter(|(lo, _)| *lo >= GOODPUT_GOAL)
            .count();
        format!(
            "\nAgainst the {:.0} % goal, by {by}: {above} of {} cells have their whole \
             interval at or above it, {below} below it, {} hold it within their interval.\n",
            GOODPUT_GOAL * 100.0,
            intervals.len(),
            intervals.len() - above - below
        )
    };
    out.push_str(&against_goal(
        cells.iter().filter_map(PerfCell::ratio_interval).collect(),
        "the ratio of medians",
    ));
    out.push_str(&against_goal(
        cells.iter().filter_map(PerfCell::paired_interval).collect(),
        "the paired ratio",
    ));
    out.push_str(&cpu_table(cells));
    out.push_str(&link_table(cells));
    out
}

/// Each side's CPU time per run and mode, as medians over the runs, and
/// what the plugins added; empty when no endpoint reported it. Goodput on
/// a 2-core machine also moves with how the endpoints and the emulator
/// share the cores; the CPU a transfer took is the plugins' cost itself.
fn cpu_table(cells: &[PerfCell]) -> String {
    let rows = in_both_modes(cells, ModeFigures::cpu_medians);
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\nCPU time of each endpoint process per run, ms, median without plugins / with, \
         what the plugins added, and the time the side spent inside its plugins' calls in \
         a run with them (ms, and its share of that run's CPU time; medians over the runs). \
         The time inside the calls is measured around each call, so it does not move with \
         the runs' spread as the CPU time does.\n\n\
         | link | server | client | server CPU | added | in plugin calls | client CPU | added \
         | in plugin calls |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    let in_calls = |side: Option<(f64, f64)>| match side {
        Some((ms, share)) => format!("{ms:.1} ({:.1} %)", share * 100.0),
        None => "—".to_string(),
    };
    let added = |without: f64, with: f64| {
        if without > 0.0 {
            format!("{:+.1} %", (with / without - 1.0) * 100.0)
        } else {
            "—".to_string()
        }
    };
    for (c, without, with) in rows {
        let calls = c.with.plugin_medians();
        out.push_str(&format!(
            "| {} | {} | {} | {:.0} / {:.0} | {} | {} | {:.0} / {:.0} | {} | {} |\n",
            c.link.name(),
            c.server,
            c.client,
            without.0,
            with.0,
            added(without.0, with.0),
            in_calls(calls.map(|[server, _]| server)),
            without.1,
            with.1,
            added(without.1, with.1),
            in_calls(calls.map(|[_, client]| client)),
        ));
    }
    out
}

/// The emulated link's facts per cell and mode, as medians over the runs
/// (see [`LinkFacts`]); empty when no cell ran through the emulator.
fn link_table(cells: &[PerfCell]) -> String {
    let rows = in_both_modes(cells, ModeFigures::link_medians);
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\nWhat the emulated link saw, medians over the runs of each mode (without plugins / \
         with): the datagrams the client sent, which in a download are almost all \
         acknowledgements; the datagrams the link dropped; and when it dropped the first, \
         over the runs that had a drop (how many had none, in brackets).\n\n\
         | server | client | client datagrams | drops | first drop, ms |\n\
         |---|---|---|---|---|\n",
    );
    let first = |(_, _, first, none): (f64, f64, Option<f64>, usize)| {
        let at = first.map_or("—".to_string(), |ms| format!("{ms:.0}"));
        if none > 0 {
            format!("{at} ({none} none)")
        } else {
            at
        }
    };
    for (c, without, with) in rows {
        out.push_str(&format!(
            "| {} | {} | {:.0} / {:.0} | {:.0} / {:.0} | {} / {} |\n",
            c.server,
            c.client,
            without.0,
            with.0,
            without.1,
            with.1,
            first(without),
            first(with)
        ));
    }
    out
}

/// Goodput with plugins that `make perf` aims at, as a share of goodput
/// without.
pub const GOODPUT_GOAL: f64 = 0.97;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_between_ranks() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&v, 0.5), Some(2.5));
        assert_eq!(quantile(&v, 0.25), Some(1.75));
        assert_eq!(quantile(&v, 0.0), Some(1.0));
        assert_eq!(quantile(&v, 1.0), Some(4.0));
        assert_eq!(quantile(&[7.0], 0.5), Some(7.0));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn the_ratio_compares_medians_of_successful_runs() {
        let cell = PerfCell {
            server: "a".into(),
            client: "b".into(),
            link: PerfLink::Loopback,
            size: 1000,
            without: ModeFigures {
                runs_mbps: vec![100.0, 300.0, 200.0],
                link: Vec::new(),
                cpu: Vec::new(),
                failed: 0,
            },
            with: ModeFigures {
                runs_mbps: vec![190.0, 180.0],
                link: Vec::new(),
                cpu: Vec::new(),
                failed: 1,
            },
            // The round whose run with plugins failed has no ratio.
            round_ratios: vec![190.0 / 100.0, 180.0 / 200.0],
        };
        assert_eq!(cell.ratio(), Some(185.0 / 200.0));
        let paired = cell.paired_ratio().expect("paired ratio");
        assert!((paired - 1.4).abs() < 1e-9, "{paired}");
        let table = markdown(&[cell], 3, &default_plugins());
        assert!(
            table.contains(
                "| loopback | a | b | 200 (150–250) | 185 (182–188), 1 failed | 92.5 % | "
            ),
            "{table}"
        );
        assert!(table.contains(" | 140.0 % | 90.0–190.0 % |\n"), "{table}");
    }

    /// Runs of (server, client) CPU time, ms, with the time inside plugin
    /// calls of the same runs (none given: 0).
    fn cpu(runs: &[(f64, f64)], in_plugins: &[(f64, f64)]) -> Vec<RunCpu> {
        runs.iter()
            .enumerate()
            .map(|(i, &(server_ms, client_ms))| {
                let (server_in, client_in) = in_plugins.get(i).copied().unwrap_or_default();
                RunCpu {
                    server_ms,
                    client_ms,
                    server_in_plugins_ms: server_in,
                    client_in_plugins_ms: client_in,
                }
            })
            .collect()
    }

    /// A cell whose runs of round `i` are `without[i]` and `with[i]`.
    fn cell(without: Vec<f64>, with: Vec<f64>) -> PerfCell {
        let round_ratios = with.iter().zip(&without).map(|(w, wo)| w / wo).collect();
        PerfCell {
            server: "a".into(),
            client: "b".into(),
            link: PerfLink::Loopback,
            size: 1000,
            without: ModeFigures {
                runs_mbps: without,
                link: Vec::new(),
                cpu: Vec::new(),
                failed: 0,
            },
            with: ModeFigures {
                runs_mbps: with,
                link: Vec::new(),
                cpu: Vec::new(),
                failed: 0,
            },
            round_ratios,
        }
    }

    #[test]
    fn the_table_names_the_plugins_measured() {
        let one = cell(vec![100.0], vec![90.0]);
        let table = markdown(std::slice::from_ref(&one), 1, &["ack-logger".to_string()]);
        assert!(
            table.contains("plugins: ack-logger on both sides"),
            "{table}"
        );
        let table = markdown(std::slice::from_ref(&one), 1, &default_plugins());
        assert!(
            table.contains("plugins: probe, bdp, dummy, ack-logger on both sides"),
            "{table}"
        );
        let table = markdown(&[one], 1, &[]);
        assert!(
            table.contains("plugins: none in either mode (an A/A run"),
            "{table}"
        );
    }

    #[test]
    fn the_table_gives_each_links_transfer_size() {
        let loopback = cell(vec![100.0], vec![90.0]);
        let mut gigabit = loopback.clone();
        gigabit.link = PerfLink::Gigabit;
        gigabit.size = 500;
        let table = markdown(
            &[loopback.clone(), loopback, gigabit],
            1,
            &default_plugins(),
        );
        assert!(
            table.starts_with(
                "Bulk download of 1000 bytes over loopback, 500 bytes over 1gbit, 1 runs"
            ),
            "{table}"
        );
        // Each run of a loopback cell lasts long enough to be mostly steady
        // state; the emulated link is slower and takes the smaller default.
        assert!(PerfLink::Loopback.default_size() > PerfLink::Gigabit.default_size());
    }

    #[test]
    fn the_interval_holds_the_ratio_and_widens_with_the_spread() {
        let tight = cell(
            vec![1000.0, 1001.0, 999.0, 1000.5, 999.5, 1000.0],
            vec![900.0, 901.0, 899.0, 900.5, 899.5, 900.0],
        );
        let (lo, hi) = tight.ratio_interval().expect("interval");
        assert!(lo <= 0.9 && 0.9 <= hi, "{lo}..{hi}");
        assert!(
            hi - lo < 0.01,
            "runs that agree give a narrow interval: {lo}..{hi}"
        );

        let spread = cell(
            vec![600.0, 1400.0, 800.0, 1200.0, 1000.0, 700.0],
            vec![540.0, 1260.0, 720.0, 1080.0, 900.0, 630.0],
        );
        let (lo, hi) = spread.ratio_interval().expect("interval");
        let ratio = spread.ratio().expect("ratio");
        assert!(lo <= ratio && ratio <= hi, "{lo}..{ratio}..{hi}");
        assert!(
            hi - lo > 0.3,
            "runs that spread give a wide interval: {lo}..{hi}"
        );
        // The same runs give the same interval (the table is reproducible).
        assert_eq!(spread.ratio_interval(), Some((lo, hi)));
    }

    #[test]
    fn the_table_counts_cells_against_the_goal_by_their_interval() {
        let met = cell(vec![100.0; 5], vec![99.0; 5]);
        let missed = cell(vec![100.0; 5], vec![80.0; 5]);
        let open = cell(
            vec![90.0, 110.0, 100.0, 95.0, 105.0],
            vec![85.0, 110.0, 97.0, 92.0, 103.0],
        );
        let table = markdown(&[met, missed, open], 5, &default_plugins());
        assert!(table.contains("| 99.0 % | 99.0–99.0 % |"), "{table}");
        for by in ["the ratio of medians", "the paired ratio"] {
            assert!(
                table.contains(&format!("Against the 97 % goal, by {by}: 1 of 3 cells have their whole interval at or above it, 1 below it, 1 hold it within their interval.")),
                "{table}"
            );
        }
        assert_eq!(cell(vec![], vec![1.0]).ratio_interval(), None);
        assert_eq!(cell(vec![], vec![1.0]).paired_interval(), None);
    }

    #[test]
    fn pairing_the_runs_of_a_round_cancels_a_drift_between_rounds() {
        // The machine is fast in some rounds and slow in others; the plugins
        // cost 10 % in every round.
        let without = vec![600.0, 1400.0, 800.0, 1200.0, 1000.0, 700.0];
        let with: Vec<f64> = without.iter().map(|g| g * 0.9).collect();
        let drifting = cell(without, with);
        let (lo, hi) = drifting.ratio_interval().expect("interval");
        assert!(hi - lo > 0.3, "{lo}..{hi}");
        let paired = drifting.paired_ratio().expect("paired ratio");
        assert!((paired - 0.9).abs() < 1e-9, "{paired}");
        let (lo, hi) = drifting.paired_interval().expect("interval");
        assert!(
            (lo - 0.9).abs() < 1e-9 && (hi - 0.9).abs() < 1e-9,
            "{lo}..{hi}"
        );
    }

    fn datagram(direction: Direction, sent_ms: u64, dropped: bool) -> DatagramRecord {
        let sent = Duration::from_millis(sent_ms);
        DatagramRecord {
            direction,
            size: 1200,
            short_header: true,
            sent,
            fate: if dropped {
                Fate::Dropped(crate::link::DropReason::QueueFull)
            } else {
                Fate::Delivered {
                    departs: sent,
                    arrives: sent + Duration::from_millis(1),
                }
            },
        }
    }

    #[test]
    fn link_facts_count_the_clients_datagrams_and_the_first_drop() {
        use Direction::{ClientToServer as C2s, ServerToClient as S2c};
        let trace = [
            datagram(C2s, 1, false),
            datagram(S2c, 2, false),
            datagram(S2c, 9, true),
            datagram(C2s, 10, false),
            datagram(S2c, 4, true),
            datagram(S2c, 12, false),
        ];
        assert_eq!(
            LinkFacts::of(&trace),
            LinkFacts {
                client_datagrams: 2,
                dropped: 2,
                first_drop_ms: Some(4.0),
            }
        );
        let clean = LinkFacts::of(&trace[..2]);
        assert_eq!((clean.dropped, clean.first_drop_ms), (0, None));
    }

    #[test]
    fn the_link_table_gives_medians_per_mode_and_counts_runs_without_a_drop() {
        let facts = |client_datagrams, dropped, first_drop_ms| LinkFacts {
            client_datagrams,
            dropped,
            first_drop_ms,
        };
        let mut emulated = cell(vec![500.0, 600.0, 400.0], vec![300.0, 350.0, 320.0]);
        emulated.link = PerfLink::Gigabit;
        emulated.without.link = vec![
            facts(1500, 100, Some(50.0)),
            facts(3000, 140, Some(150.0)),
            facts(8000, 300, Some(250.0)),
        ];
        emulated.with.link = vec![
            facts(15000, 0, None),
            facts(17000, 200, Some(900.0)),
            facts(20000, 30, Some(700.0)),
        ];
        let table = markdown(&[emulated], 3, &default_plugins());
        assert!(
            table.contains("| a | b | 3000 / 17000 | 140 / 30 | 150 / 800 (1 none) |"),
            "{table}"
        );
        // Loopback cells have no link facts and no such table.
        assert!(!table.contains("CPU time of each endpoint"), "{table}");
        let table = markdown(&[cell(vec![1.0], vec![1.0])], 1, &default_plugins());
        assert!(!table.contains("What the emulated link saw"), "{table}");
    }

    #[test]
    fn the_cpu_table_gives_each_sides_medians_and_what_plugins_added() {
        let mut measured = cell(vec![500.0; 3], vec![450.0; 3]);
        measured.without.cpu = cpu(&[(400.0, 300.0), (500.0, 200.0), (450.0, 250.0)], &[]);
        measured.with.cpu = cpu(&[(495.0, 240.0), (600.0, 260.0), (440.0, 270.0)], &[]);
        let table = markdown(&[measured], 3, &default_plugins());
        assert!(
            table.contains(
                "| loopback | a | b | 450 / 495 | +10.0 % | — | 250 / 260 | +4.0 % | — |"
            ),
            "{table}"
        );
    }

    /// The time inside plugin calls is a median over the runs with plugins,
    /// and so is its share of each run's own CPU time (not the ratio of the
    /// two medians).
    #[test]
    fn the_cpu_table_gives_the_time_inside_plugin_calls_and_its_share() {
        let mut measured = cell(vec![500.0; 3], vec![450.0; 3]);
        measured.without.cpu = cpu(&[(400.0, 300.0), (500.0, 200.0), (450.0, 250.0)], &[]);
        // Shares 4.8 %, 1 %, 2 % of the server's CPU (the median time, 8 ms,
        // is 1.6 % of the median CPU time); 2.5 %, 1 %, 1 % of the client's.
        measured.with.cpu = cpu(
            &[(500.0, 240.0), (600.0, 260.0), (400.0, 270.0)],
            &[(24.0, 6.0), (6.0, 2.6), (8.0, 2.7)],
        );
        let table = markdown(&[measured], 3, &default_plugins());
        assert!(
            table.contains(
                "| loopback | a | b | 450 / 500 | +11.1 % | 8.0 (2.0 %) | 250 / 260 | +4.0 % \
                 | 2.7 (1.0 %) |"
            ),
            "{table}"
        );
    }

    #[test]
    fn no_completed_run_gives_no_ratio() {
        let cell = PerfCell {
            server: "a".into(),
            client: "b".into(),
            link: PerfLink::Gigabit,
            size: 1000,
            without: ModeFigures::default(),
            with: ModeFigures {
                runs_mbps: vec![1.0],
                link: Vec::new(),
                cpu: Vec::new(),
                failed: 0,
            },
            round_ratios: Vec::new(),
        };
        assert_eq!(cell.ratio(), None);
        assert_eq!(cell.paired_ratio(), None);
    }
}
