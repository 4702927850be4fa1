//! The test cases: which plugins and controls each side gets, on which
//! link, and the evidence a cell must show to pass.

use crate::execute::{EndpointStats, RunOutcome, RunSpec, SideSpec};
use crate::link::{DatagramRecord, Direction, Fate, LinkParams};
use std::time::Duration;

/// Every test case, in matrix order (ENDPOINT.md).
pub use corequic_contract::MATRIX_TESTS as TESTS;

/// The test cases of the paper matrix.
pub use corequic_contract::PAPER_TESTS;

/// Shortest inter-departure pause counted as a padding halt, ms.
pub const HALT_MS_MIN: f64 = 2.0;
/// Longest: the plugin halts for at most 10 ms (plus scheduling slack).
pub const HALT_MS_MAX: f64 = 11.0;

/// The largest UDP payload the emulated path carries: QUIC's minimum, so
/// every stack's "MTU-sized" is the same 1200 bytes.
pub const PATH_DATAGRAM_SIZE: usize = 1200;

/// plugin-control id of padding's on/off switch.
pub const PADDING_TOGGLE: u64 = 0x80001;
/// plugin-control id of bdp's "remembered window".
pub const BDP_WINDOW: u64 = 0x80000;
/// plugin-control id of probe's "send a probe".
pub const PROBE_SEND: u64 = 1;
/// plugin-control id of probe's "last latency".
pub const PROBE_LATENCY: u64 = 2;
/// plugin-control id that arms a trap in the hostile plugin's next
/// should-send-frame (a DEFINE routine).
pub const HOSTILE_ARM_TRAP_IN_DEFINE: u64 = 0x48_0007;
/// The application error code of a failed protocol-defining plugin.
pub const PLUGIN_FAILURE_CODE: u64 = 0x4351_0001;

/// How big and how long: the three matrices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Matrix {
    /// Small files and a short RTT, run by `make test`.
    Reduced,
    /// `make interop`.
    Default,
    /// The paper's scenarios (`make paper`).
    Paper,
}

impl Matrix {
    /// Parse `reduced`, `default` or `paper`.
    pub fn parse(name: &str) -> Option<Matrix> {
        match name {
            "reduced" => Some(Matrix::Reduced),
            "default" => Some(Matrix::Default),
            "paper" => Some(Matrix::Paper),
            _ => None,
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Matrix::Reduced => "reduced",
            Matrix::Default => "default",
            Matrix::Paper => "paper",
        }
    }

    /// The test cases it runs.
    pub fn tests(self) -> &'static [&'static str] {
        match self {
            Matrix::Paper => PAPER_TESTS,
            _ => TESTS,
        }
    }
}

fn link(rtt_ms: u64, mbps: u64, queue_bytes: u64) -> LinkParams {
    LinkParams {
        one_way_delay: Duration::from_millis(rtt_ms / 2),
        rate_bits_per_second: Some(mbps * 1_000_000),
        queue_bytes,
        loss: 0.0,
        max_datagram_size: PATH_DATAGRAM_SIZE,
        seed: 1,
        ecn_mark: None,
    }
}

/// The bandwidth-delay product of a link, bytes.
pub fn bdp_bytes(link: &LinkParams) -> u64 {
    let rate = link.rate_bits_per_second.unwrap_or(0) as f64 / 8.0;
    (rate * link.rtt().as_secs_f64()) as u64
}

fn run(label: &str, link: &LinkParams, size: u64, server: SideSpec, client: SideSpec) -> RunSpec {
    // Generous: slow plugins (padding halts every datagram) and debug builds.
    let expected = link.rtt().as_secs_f64() * 20.0
        + size as f64 * 8.0 / link.rate_bits_per_second.unwrap_or(u64::MAX) as f64 * 4.0;
    RunSpec {
        label: label.into(),
        link: link.clone(),
        file_size: size,
        server,
        client,
        timeout_seconds: 30 + expected.ceil() as u64,
        measurement: false,
        direct: false,
    }
}

/// The links, sizes and repetitions of a matrix, which its cases' runs use.
pub struct Plan {
    /// The matrix.
    pub matrix: Matrix,
    /// The link of most cases.
    pub short: LinkParams,
    /// The link of the BDP case (a long RTT).
    pub long: LinkParams,
    /// The file size of most cases.
    pub size: u64,
    /// Repetitions of a measured run.
    pub reps: u32,
}

impl Plan {
    /// The plan of `matrix`.
    pub fn of(matrix: Matrix) -> Plan {
        let (short, long, size, reps) = match matrix {
            Matrix::Reduced => (link(10, 20, 64_000), link(100, 20, 250_000), 200_000, 1),
            Matrix::Default => (link(20, 20, 100_000), link(200, 20, 500_000), 1_000_000, 1),
            Matrix::Paper => (link(40, 50, 250_000), link(500, 50, 3_125_000), 500_000, 30),
        };
        Plan {
            matrix,
            short,
            long,
            size,
            reps,
        }
    }
}

/// A test case of the matrix: the runs a cell needs and the evidence they
/// must show. Every name of `corequic_contract::MATRIX_TESTS` has one, in
/// [`CASES`].
pub trait Case: Sync {
    /// Its name (ENDPOINT.md).
    fn name(&self) -> &'static str;

    /// The runs of one cell.
    fn plan(&self, p: &Plan) -> Vec<RunSpec>;

    /// Its own evidence over the runs (with [`judge`]'s common checks).
    fn checks(&self, runs: &[RunOutcome], checks: &mut Vec<Check>);

    /// Whether every run must complete its download (false for a case in
    /// which a plugin is meant to end the connection).
    fn requires_completion(&self) -> bool {
        true
    }
}

/// Every case, in matrix order.
pub static CASES: &[&dyn Case] = &[
    &Transfer,
    &Padding,
    &PaddingOneSided,
    &Probe,
    &Bdp,
    &Dummy {
        test: "dummy",
        client: "dummy",
    },
    &Dummy {
        test: "dummy-0.2.0",
        client: "abi-0.2.0-dummy",
    },
    &Dummy {
        test: "dummy-0.1.0",
        client: "abi-0.1.0-dummy",
    },
    &DummyPadding,
    &AckLogger("ack-logger"),
    &AckLogger("ack-logger-c"),
    &Hostile,
];

/// The case named `test`.
pub fn case(test: &str) -> Option<&'static dyn Case> {
    CASES.iter().copied().find(|c| c.name() == test)
}

fn none() -> SideSpec {
    SideSpec::default()
}

fn padded() -> SideSpec {
    SideSpec::with(&["padding"])
}

/// `n` runs made by `make`, labelled `label` (one) or `label-1`… (several).
fn repeated(label: &str, n: u32, make: &dyn Fn(&str) -> RunSpec) -> Vec<RunSpec> {
    if n == 1 {
        vec![make(label)]
    } else {
        (1..=n).map(|i| make(&format!("{label}-{i}"))).collect()
    }
}

/// The runs of one cell (none for an unknown test).
pub fn plan(test: &str, matrix: Matrix) -> Vec<RunSpec> {
    case(test).map_or_else(Vec::new, |c| c.plan(&Plan::of(matrix)))
}

/// One piece of evidence.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// What was checked.
    pub name: String,
    /// Whether it held.
    pub passed: bool,
    /// The numbers behind it.
    pub detail: String,
}

fn check(name: impl Into<String>, passed: bool, detail: impl Into<String>) -> Check {
    Check {
        name: name.into(),
        passed,
        detail: detail.into(),
    }
}

/// Short-header (1-RTT) datagrams of one direction, in send order.
pub fn one_rtt(trace: &[DatagramRecord], direction: Direction) -> Vec<&DatagramRecord> {
    trace
        .iter()
        .filter(|r| r.direction == direction && r.short_header)
        .collect()
}

/// Gaps between consecutive sends of one direction's 1-RTT datagrams, ms.
pub fn inter_departure_ms(trace: &[DatagramRecord], direction: Direction) -> Vec<f64> {
    one_rtt(trace, direction)
        .windows(2)
        .map(|w| (w[1].sent - w[0].sent).as_secs_f64() * 1e3)
        .collect()
}

fn side_name(direction: Direction) -> &'static str {
    match direction {
        Direction::ClientToServer => "client",
        Direction::ServerToClient => "server",
    }
}

/// When the transfer ended: the client received the last full-size
/// server datagram. After that the stacks close the connection, and their
/// CONNECTION_CLOSE packets (sent outside the frame scheduler, so no
/// plugin pads them) are not part of the padding evidence.
pub fn transfer_end(trace: &[DatagramRecord]) -> Option<Duration> {
    trace
        .iter()
        .filter(|r| {
            r.direction == Direction::ServerToClient
                && r.short_header
                && r.size == PATH_DATAGRAM_SIZE
        })
        .filter_map(|r| match r.fate {
            Fate::Delivered { arrives, .. } => Some(arrives),
            Fate::Dropped(_) => None,
        })
        .max()
}

/// The 1-RTT datagrams of one direction that the path carried (the
/// stack's MTU probes above the path size are dropped by the link and never
/// reach the peer), sent before [`transfer_end`].
pub fn carried_before_close(
    trace: &[DatagramRecord],
    direction: Direction,
) -> Vec<&DatagramRecord> {
    let end = transfer_end(trace).unwrap_or(Duration::MAX);
    one_rtt(trace, direction)
        .into_iter()
        .filter(|r| r.fate != Fate::Dropped(crate::link::DropReason::TooLarge) && r.sent < end)
        .collect()
}

/// `datagrams` (one side's, in sending order) without the run of smaller
/// ones after the last full-size one: a padded side's CONNECTION_CLOSE (and
/// its repeats) ends its sequence, and the stacks build it outside the frame
/// scheduler, so no plugin pads it. The transfer's end cannot tell it apart
/// when the peer sends one more full-size datagram after the close was
/// sent (seen at 40 ms RTT: a quinn server's close answer, an s2n-quic
/// client's close, each before the server's last full-size datagram
/// arrived).
fn without_closing_tail<'a>(datagrams: &[&'a DatagramRecord]) -> Vec<&'a DatagramRecord> {
    let keep = datagrams
        .iter()
        .rposition(|r| r.size == PATH_DATAGRAM_SIZE)
        .map_or(0, |last_full| last_full + 1);
    datagrams[..keep].to_vec()
}

fn all_full_size(run: &RunOutcome, direction: Direction) -> Check {
    let datagrams = without_closing_tail(&carried_before_close(&run.trace, direction));
    let short: Vec<usize> = datagrams
        .iter()
        .filter(|r| r.size != PATH_DATAGRAM_SIZE)
        .map(|r| r.size)
        .collect();
    check(
        format!(
            "{}: every {} 1-RTT datagram is {PATH_DATAGRAM_SIZE} bytes",
            run.spec.label,
            side_name(direction)
        ),
        !datagrams.is_empty() && short.is_empty(),
        format!(
            "{} datagrams, {} smaller (e.g. {:?})",
            datagrams.len(),
            short.len(),
            &short[..short.len().min(5)]
        ),
    )
}

fn some_smaller(run: &RunOutcome, direction: Direction) -> Check {
    let datagrams = one_rtt(&run.trace, direction);
    let smaller = datagrams
        .iter()
        .filter(|r| r.size < PATH_DATAGRAM_SIZE)
        .count();
    check(
        format!(
            "{}: the unpadded {} sends smaller 1-RTT datagrams",
            run.spec.label,
            side_name(direction)
        ),
        smaller > 0,
        format!("{smaller} of {} smaller", datagrams.len()),
    )
}

fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

/// The checks every run must pass: both exit 0, the download is byte-exact
/// (the client verifies every byte and reports the count), both stats
/// files are schema 1.
fn completed(run: &RunOutcome) -> Vec<Check> {
    let label = &run.spec.label;
    let mut checks = Vec::new();
    if let Some(e) = &run.runner_error {
        checks.push(check(format!("{label}: runner"), false, e.clone()));
    }
    checks.push(check(
        format!("{label}: both endpoints exit 0"),
        run.client.exit_code == Some(0) && run.server.exit_code == Some(0),
        format!(
            "client {:?}, server {:?}",
            run.client.exit_code, run.server.exit_code
        ),
    ));
    let client = run.client.stats.as_ref();
    checks.push(check(
        format!("{label}: byte-exact download"),
        client.is_some_and(|s| s.schema == 1 && s.ok && s.bytes == run.spec.file_size),
        match client {
            Some(s) => format!("{} of {} bytes, ok={}", s.bytes, run.spec.file_size, s.ok),
            None => "no client stats".into(),
        },
    ));
    checks.push(check(
        format!("{label}: server stats"),
        run.server.stats.as_ref().is_some_and(|s| s.schema == 1),
        if run.server.stats.is_some() {
            "schema 1"
        } else {
            "no server stats"
        },
    ));
    checks
}

fn plugins_enabled(stats: Option<&EndpointStats>, names: &[&str], who: &str, label: &str) -> Check {
    let found: Vec<String> = stats
        .map(|s| {
            s.plugins
                .iter()
                .map(|p| format!("{}(enabled={})", p.name, p.enabled))
                .collect()
        })
        .unwrap_or_default();
    let ok = stats.is_some_and(|s| {
        names.iter().all(|n| {
            s.plugins
                .iter()
                .any(|p| p.name == *n && p.enabled && p.removed.is_none())
        })
    });
    check(
        format!("{label}: {who} plugins {names:?} enabled"),
        ok,
        found.join(", "),
    )
}

/// Client transfer time of a run, ms.
pub fn transfer_ms(run: &RunOutcome) -> Option<f64> {
    run.client.stats.as_ref().map(|s| s.duration_ms)
}

/// The runs labelled `prefix…`.
fn labelled<'a>(runs: &'a [RunOutcome], prefix: &str) -> Vec<&'a RunOutcome> {
    runs.iter()
        .filter(|r| r.spec.label.starts_with(prefix))
        .collect()
}

/// The verdict's evidence for a cell's runs (all must hold to pass).
pub fn judge(test: &str, runs: &[RunOutcome]) -> Vec<Check> {
    let mut checks = Vec::new();
    let Some(case) = case(test) else {
        checks.push(check("known test", false, format!("unknown test `{test}`")));
        return checks;
    };
    if case.requires_completion() {
        for r in runs {
            checks.extend(completed(r));
        }
    }
    case.checks(runs, &mut checks);
    checks
}

/// `transfer`: a download with no plugin on either side.
struct Transfer;

impl Case for Transfer {
    fn name(&self) -> &'static str {
        "transfer"
    }

    fn plan(&self, p: &Plan) -> Vec<RunSpec> {
        vec![run("transfer", &p.short, p.size, none(), none())]
    }

    fn checks(&self, runs: &[RunOutcome], checks: &mut Vec<Check>) {
        for r in runs {
            let delivered_to_client: usize = r
                .trace
                .iter()
                .filter(|d| {
                    d.direction == Direction::ServerToClient
                        && matches!(d.fate, Fate::Delivered { .. })
                })
                .map(|d| d.size)
                .sum();
            checks.push(check(
                "the file crossed the link",
                delivered_to_client as u64 > r.spec.file_size,
                format!("{delivered_to_client} bytes delivered to the client"),
            ));
        }
    }
}

/// `padding`: the padding plugin on both sides pads every datagram to the
/// path size and halts sending at random, against a plugin-free baseline.
struct Padding;

impl Case for Padding {
    fn name(&self) -> &'static str {
        "padding"
    }

    fn plan(&self, p: &Plan) -> Vec<RunSpec> {
        let padding_size = match p.matrix {
            Matrix::Reduced => 500_000,
            Matrix::Default => 1_000_000,
            Matrix::Paper => 500_000,
        };
        // The paper's link for the paper; elsewhere a 2 ms RTT, where
        // the baseline's own pauses are shorter than the halts.
        let padding_link = match p.matrix {
            Matrix::Paper => p.short.clone(),
            _ => link(2, 20, 64_000),
        };
        let mut runs = repeated("baseline", p.reps, &|l| {
            run(l, &padding_link, padding_size, none(), none())
        });
        runs.extend(repeated("padded", p.reps, &|l| {
            run(l, &padding_link, padding_size, padded(), padded())
        }));
        runs
    }

    fn checks(&self, runs: &[RunOutcome], checks: &mut Vec<Check>) {
        for r in labelled(runs, "padded") {
            checks.push(all_full_size(r, Direction::ServerToClient));
            checks.push(all_full_size(r, Direction::ClientToServer));
        }
        for r in labelled(runs, "baseline") {
            checks.push(some_smaller(r, Direction::ClientToServer));
        }
        // The random halts (0-10 ms after a padded send) show in the
        // server's inter-departure times as pauses that the baseline on
        // the same link does not have (on a short RTT the baseline's own
        // pauses, waiting for ACKs, stay under a millisecond or two).
        let pauses = |rs: &[&RunOutcome]| -> (usize, usize) {
            rs.iter()
                .map(|r| {
                    let gaps = inter_departure_ms(&r.trace, Direction::ServerToClient);
                    let halts = gaps
                        .iter()
                        .filter(|g| (HALT_MS_MIN..=HALT_MS_MAX).contains(*g))
                        .count();
                    (halts, gaps.len())
                })
                .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
        };
        let (padded_halts, padded_gaps) = pauses(&labelled(runs, "padded"));
        let (base_halts, base_gaps) = pauses(&labelled(runs, "baseline"));
        let rate = |h: usize, n: usize| h as f64 / n.max(1) as f64;
        checks.push(check(
            "server inter-departure times show the random halts",
            padded_halts >= 5 && rate(padded_halts, padded_gaps) >= 1.5 * rate(base_halts, base_gaps),
            format!(
                "pauses of {HALT_MS_MIN}-{HALT_MS_MAX} ms: {padded_halts} of {padded_gaps} gaps padded, \
                 {base_halts} of {base_gaps} baseline"
            ),
        ));
    }
}

/// `padding-one-sided`: padding on the client only, against a plugin-free
/// server.
struct PaddingOneSided;

impl Case for PaddingOneSided {
    fn name(&self) -> &'static str {
        "padding-one-sided"
    }

    fn plan(&self, p: &Plan) -> Vec<RunSpec> {
        vec![run("padded-client", &p.short, p.size / 5, none(), padded())]
    }

    fn checks(&self, runs: &[RunOutcome], checks: &mut Vec<Check>) {
        for r in runs {
            checks.push(all_full_size(r, Direction::ClientToServer));
            checks.push(plugins_enabled(
                r.client.stats.as_ref(),
                &["padding"],
                "client",
                &r.spec.label,
            ));
            checks.push(check(
                "the server runs without plugins",
                r.server
                    .stats
                    .as_ref()
                    .is_some_and(|s| s.plugins.is_empty()),
                "",
            ));
        }
    }
}

/// `probe`: the client's probe plugin measures the path's latency with
/// PATH_CHALLENGE and PATH_RESPONSE when the application asks.
struct Probe;

impl Case for Probe {
    fn name(&self) -> &'static str {
        "probe"
    }

    fn plan(&self, p: &Plan) -> Vec<RunSpec> {
        // The application probes during the download and once more after
        // it: a PATH_RESPONSE is never retransmitted, and a bottleneck
        // queue that overflows during the download may drop it.
        let rtt = p.short.rtt().as_millis();
        let again = 50 + 10 * rtt + 200;
        vec![run(
            "probe",
            &p.short,
            p.size / 5,
            none(),
            SideSpec::with(&["probe"])
                .control(format!("50:{PROBE_SEND}"))
                .control(format!("{again}:{PROBE_SEND}"))
                .control(format!("{}:{PROBE_LATENCY}", again + 10 * rtt + 100)),
        )]
    }

    fn checks(&self, runs: &[RunOutcome], checks: &mut Vec<Check>) {
        for r in runs {
            let rtt = r.spec.link.rtt().as_secs_f64() * 1e3;
            let latency = r
                .client
                .stats
                .as_ref()
                .and_then(|s| s.controls.iter().find(|c| c.id == PROBE_LATENCY))
                .and_then(|c| c.result.as_ref())
                .and_then(|v| v.first())
                .and_then(|v| v.strip_suffix("ns"))
                .and_then(|v| v.parse::<f64>().ok())
                .map(|ns| ns / 1e6);
            checks.push(check(
                "probe latency (plugin-control 2) within bounds of the emulated RTT",
                latency.is_some_and(|l| l >= rtt && l <= rtt * 1.5 + 25.0),
                format!(
                    "latency {latency:?} ms, emulated RTT {rtt} ms, bound [RTT, 1.5 RTT + 25 ms]"
                ),
            ));
        }
    }
}

/// `bdp`: the client sends the server a bottleneck BDP in a BDP frame, and
/// the server resumes its congestion window from it, against a baseline.
struct Bdp;

impl Case for Bdp {
    fn name(&self) -> &'static str {
        "bdp"
    }

    fn plan(&self, p: &Plan) -> Vec<RunSpec> {
        let (bdp_size, bdp_reps) = match p.matrix {
            Matrix::Reduced => (1_000_000, 1),
            Matrix::Default => (4_000_000, 1),
            Matrix::Paper => (20_000_000, 5),
        };
        let window = bdp_bytes(&p.long);
        let mut runs = repeated("baseline", bdp_reps, &|l| {
            run(l, &p.long, bdp_size, none(), none())
        });
        runs.extend(repeated("plugin", bdp_reps, &|l| {
            run(
                l,
                &p.long,
                bdp_size,
                SideSpec::with(&["bdp"]),
                SideSpec::with(&["bdp"]).control(format!("0:{BDP_WINDOW}:{window}")),
            )
        }));
        runs
    }

    fn checks(&self, runs: &[RunOutcome], checks: &mut Vec<Check>) {
        for r in labelled(runs, "plugin") {
            let window = bdp_bytes(&r.spec.link).to_string();
            let resumed: Vec<String> = r
                .server
                .stats
                .as_ref()
                .map(|s| {
                    s.logs_of("bdp", "congestion window resumed")
                        .filter_map(|l| l.field("window").map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            checks.push(check(
                format!(
                    "{}: the server set its window from frame 0xBD",
                    r.spec.label
                ),
                resumed.contains(&window),
                format!("resumed {resumed:?}, sent {window}"),
            ));
        }
        let times =
            |rs: &[&RunOutcome]| -> Vec<f64> { rs.iter().filter_map(|r| transfer_ms(r)).collect() };
        let (base, plugin) = (
            times(&labelled(runs, "baseline")),
            times(&labelled(runs, "plugin")),
        );
        checks.push(check(
            "the transfer is faster with the plugin",
            !plugin.is_empty() && !base.is_empty() && mean(&plugin) < mean(&base),
            format!(
                "mean {:.0} ms with vs {:.0} ms without ({:.2}x)",
                mean(&plugin),
                mean(&base),
                mean(&base) / mean(&plugin).max(1e-9)
            ),
        ));
    }
}

/// `dummy`: DUMMY frames on both sides, each sent when the previous one is
/// acknowledged. `dummy-0.2.0` and `dummy-0.1.0` run the same with the
/// client's DUMMY as built against an earlier ABI (`plugins/prebuilt/<v>`,
/// which `make plugins` copies as `abi-<v>-dummy`) and the server's against
/// the current one: a 0.2.0 binary runs unchanged on a 0.2.6 host, a 0.1.0
/// binary through the hosts' compatibility layer.
struct Dummy {
    /// The test's name.
    test: &'static str,
    /// The client's plugin file.
    client: &'static str,
}

impl Case for Dummy {
    fn name(&self) -> &'static str {
        self.test
    }

    // A DUMMY frame goes out when the previous one is acknowledged, and
    // a peer with little to acknowledge waits its max_ack_delay (25 ms
    // for quinn) first: at 10 ms RTT a 100 kB download ended after two or
    // three DUMMY frames, fewer than the 4 the check needs. 1 MB keeps the
    // connection up for well over ten such round trips.
    fn plan(&self, p: &Plan) -> Vec<RunSpec> {
        vec![run(
            self.test,
            &p.short,
            p.size.max(1_000_000),
            SideSpec::with(&["dummy"]),
            SideSpec::with(&[self.client]),
        )]
    }

    fn checks(&self, runs: &[RunOutcome], checks: &mut Vec<Check>) {
        for r in runs {
            let rtt = r.spec.link.rtt().as_secs_f64() * 1e3;
            for (who, stats) in [("client", &r.client.stats), ("server", &r.server.stats)] {
                let stats = stats.as_ref();
                // Without padding, every fourth DUMMY received is
                // reported as "padding not available" with its count.
                let received = stats
                    .map(|s| s.logs_of("dummy", "padding not available").count() * 4)
                    .unwrap_or(0);
                let duration = stats.map(|s| s.duration_ms).unwrap_or(0.0);
                checks.push(check(
                    format!("the {who} received DUMMY frames about once per RTT"),
                    received >= 4 && (received as f64) <= duration / rtt * 2.0 + 8.0,
                    format!("≥{received} received over {duration:.0} ms at {rtt} ms RTT"),
                ));
            }
        }
    }
}

/// `dummy+padding`: DUMMY on both sides and padding on the client, which
/// DUMMY switches through plugin-control.
struct DummyPadding;

impl Case for DummyPadding {
    fn name(&self) -> &'static str {
        "dummy+padding"
    }

    fn plan(&self, p: &Plan) -> Vec<RunSpec> {
        let (dp_link, dp_size) = match p.matrix {
            Matrix::Reduced => (p.short.clone(), 1_000_000),
            Matrix::Default => (link(40, 20, 100_000), 1_000_000),
            Matrix::Paper => (link(100, 50, 625_000), 2_000_000),
        };
        vec![run(
            "dummy+padding",
            &dp_link,
            dp_size,
            SideSpec::with(&["dummy"]),
            SideSpec::with(&["padding", "dummy"]),
        )]
    }

    fn checks(&self, runs: &[RunOutcome], checks: &mut Vec<Check>) {
        for r in runs {
            let toggles: Vec<(String, String)> = r
                .client
                .stats
                .as_ref()
                .map(|s| {
                    s.logs_of("dummy", "padding toggled")
                        .map(|l| {
                            (
                                l.field("padding").unwrap_or("?").to_string(),
                                l.field("received").unwrap_or("?").to_string(),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            let expected = [("false", "4"), ("true", "8")];
            checks.push(check(
                "the client's padding toggled off after 4 and on after 8 DUMMY frames",
                toggles.len() >= 2
                    && toggles
                        .iter()
                        .zip(expected)
                        .all(|((p, n), (ep, en))| p == ep && n == en),
                format!("{toggles:?}"),
            ));
            let phases = padding_phases(&carried_before_close(&r.trace, Direction::ClientToServer));
            checks.push(check(
                "the client's datagram sizes show padded, unpadded, padded phases",
                phases.len() >= 3 && phases[0].0 && !phases[1].0 && phases[2].0,
                format!(
                    "phases (padded, datagrams): {:?}",
                    &phases[..phases.len().min(6)]
                ),
            ));
            let server_plain = r
                .server
                .stats
                .as_ref()
                .map(|s| s.logs_of("dummy", "padding not available").count())
                .unwrap_or(0);
            checks.push(check(
                "the server received DUMMY frames too (no padding there)",
                server_plain >= 1,
                format!("{server_plain} 'padding not available' lines"),
            ));
        }
    }
}

/// `ack-logger` and `ack-logger-c`: the ACK logger, built from Rust or from
/// C (plugins/ack-logger-c), on the server, which logs one line per ACK it
/// receives; both builds run the same scenario and are held to the same
/// checks.
struct AckLogger(&'static str);

impl Case for AckLogger {
    fn name(&self) -> &'static str {
        self.0
    }

    fn plan(&self, p: &Plan) -> Vec<RunSpec> {
        let plugin = self.0;
        vec![run(
            plugin,
            &p.short,
            p.size / 5,
            SideSpec::with(&[plugin]),
            none(),
        )]
    }

    fn checks(&self, runs: &[RunOutcome], checks: &mut Vec<Check>) {
        let plugin = self.0;
        for r in runs {
            let logged: Vec<String> = r
                .server
                .stats
                .as_ref()
                .map(|s| {
                    s.logs_of(plugin, "ack processed")
                        .map(|l| l.field("packet-number").unwrap_or("").to_string())
                        .collect()
                })
                .unwrap_or_default();
            let unique: std::collections::HashSet<&String> = logged.iter().collect();
            let client_1rtt = one_rtt(&r.trace, Direction::ClientToServer)
                .iter()
                .filter(|d| matches!(d.fate, Fate::Delivered { .. }))
                .count();
            checks.push(check(
                "one 'ack processed' line per ACK, each from its own packet",
                !logged.is_empty() && unique.len() == logged.len() && logged.len() <= client_1rtt,
                format!(
                    "{} lines, {} distinct packet numbers, {client_1rtt} client 1-RTT datagrams delivered",
                    logged.len(),
                    unique.len()
                ),
            ));
            checks.push(check(
                "most client datagrams carried an ACK the server logged",
                logged.len() * 2 >= client_1rtt,
                format!("{} of {client_1rtt}", logged.len()),
            ));
        }
    }
}

/// `hostile`: a server plugin that traps in a DEFINE routine mid-transfer;
/// the server closes with the plugin-failure code and the client is told.
struct Hostile;

impl Case for Hostile {
    fn name(&self) -> &'static str {
        "hostile"
    }

    fn plan(&self, p: &Plan) -> Vec<RunSpec> {
        vec![run(
            "hostile",
            // A queue the flood cannot fill before the fault, so the
            // server's CONNECTION_CLOSE is not lost at the bottleneck.
            &LinkParams {
                queue_bytes: 8_000_000,
                ..p.short.clone()
            },
            // Far more than the link carries before the loop is triggered.
            50_000_000,
            SideSpec::with(&["test-hostile"])
                .control(format!("200:{HOSTILE_ARM_TRAP_IN_DEFINE:#x}")),
            none(),
        )]
    }

    fn checks(&self, runs: &[RunOutcome], checks: &mut Vec<Check>) {
        for r in runs {
            let server = r.server.stats.as_ref();
            let close = server.and_then(|s| s.close.clone()).unwrap_or_default();
            let armed = server
                .and_then(|s| {
                    s.controls
                        .iter()
                        .find(|c| c.id == HOSTILE_ARM_TRAP_IN_DEFINE)
                })
                .map(|c| (c.result.clone(), c.error.clone()));
            checks.push(check(
                "the trap was armed mid-transfer (plugin-control 0x480007)",
                matches!(&armed, Some((Some(v), None)) if v.is_empty())
                    && r.trace
                        .iter()
                        .filter(|d| d.direction == Direction::ServerToClient)
                        .count()
                        > 20,
                format!("result {armed:?}"),
            ));
            let code = format!("{PLUGIN_FAILURE_CODE}");
            let hex = format!("{PLUGIN_FAILURE_CODE:#x}");
            checks.push(check(
                "the server closes with the plugin-failure code, naming plugin, routine and cause",
                (close.contains(&code) || close.to_lowercase().contains(&hex))
                    && close.contains("hostile")
                    && close.contains("should-send-frame")
                    && close.contains("trap"),
                close.clone(),
            ));
            let removed = server
                .and_then(|s| s.plugins.iter().find(|p| p.name == "hostile"))
                .and_then(|p| p.removed.clone());
            checks.push(check(
                "the faulty plugin is removed and the server process ends normally",
                removed.is_some() && r.server.exit_code == Some(0),
                format!(
                    "exit {:?}, removed {:?}",
                    r.server.exit_code,
                    removed.is_some()
                ),
            ));
            let client = r.client.stats.as_ref();
            // The server's CONNECTION_CLOSE must reach the client
            // (spec CQ-LIMIT-9): a client that only times out was left
            // stranded. Stacks show the code in hex or in decimal.
            let plugin_failure = |close: &str| {
                close.to_lowercase().contains("0x43510001") || close.contains("1129381889")
            };
            checks.push(check(
                "the client is unharmed: it is sent the plugin-failure close, reports it and exits by itself",
                r.client.exit_code == Some(1)
                    && client.is_some_and(|c| {
                        !c.ok
                            && c.bytes < r.spec.file_size
                            && c.close.as_deref().is_some_and(plugin_failure)
                    }),
                format!(
                    "exit {:?}, close {:?}",
                    r.client.exit_code,
                    client.and_then(|c| c.close.clone())
                ),
            ));
        }
    }

    fn requires_completion(&self) -> bool {
        false
    }
}

/// Consecutive runs of one direction's 1-RTT datagrams, as (all padded to
/// the path size, length). A run of padded datagrams ends at the first
/// smaller one; an unpadded phase ends only when at least eight padded
/// datagrams follow in a row (an unpadded side may send full-size data too).
/// The first run counts as padded if its datagrams are full-size.
pub fn padding_phases(datagrams: &[&DatagramRecord]) -> Vec<(bool, usize)> {
    const PADDED_RUN: usize = 8;
    let full: Vec<bool> = datagrams
        .iter()
        .map(|d| d.size == PATH_DATAGRAM_SIZE)
        .collect();
    let mut phases: Vec<(bool, usize)> = Vec::new();
    let mut i = 0;
    while i < full.len() {
        let run_end = full[i..]
            .iter()
            .position(|f| *f != full[i])
            .map_or(full.len(), |n| i + n);
        let len = run_end - i;
        let padded = full[i] && (len >= PADDED_RUN || phases.is_empty());
        match phases.last_mut() {
            Some(last) if last.0 == padded => last.1 += len,
            _ => phases.push((padded, len)),
        }
        i = run_end;
    }
    phases
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_contract_test_has_its_case_in_matrix_order() {
        let names: Vec<&str> = CASES.iter().map(|c| c.name()).collect();
        assert_eq!(names, corequic_contract::MATRIX_TESTS);
        assert!(plan("no-such-test", Matrix::Reduced).is_empty());
        assert!(!judge("no-such-test", &[])[0].passed);
    }

    fn datagram(size: usize) -> DatagramRecord {
        DatagramRecord {
            direction: Direction::ClientToServer,
            size,
            short_header: true,
            sent: Duration::ZERO,
            fate: Fate::Dropped(crate::link::DropReason::Loss),
        }
    }

    fn stats(json: &str) -> (Option<EndpointStats>, String) {
        (serde_json::from_str(json).ok(), json.to_string())
    }

    /// A synthetic run of `test`'s first plan: both exit 0, the client got
    /// `bytes`, the trace has these server and client 1-RTT datagram sizes.
    fn synthetic(
        test: &str,
        bytes: u64,
        server_sizes: &[usize],
        client_sizes: &[usize],
    ) -> RunOutcome {
        let spec = plan(test, Matrix::Reduced).remove(0);
        let mut trace = Vec::new();
        for (i, (dir, size)) in server_sizes
            .iter()
            .map(|s| (Direction::ServerToClient, *s))
            .chain(client_sizes.iter().map(|s| (Direction::ClientToServer, *s)))
            .enumerate()
        {
            let sent = Duration::from_millis(i as u64);
            trace.push(DatagramRecord {
                direction: dir,
                size,
                short_header: true,
                sent,
                fate: Fate::Delivered {
                    departs: sent,
                    arrives: sent + Duration::from_millis(5),
                },
            });
        }
        let endpoint = |json: &str| {
            let (stats, stats_json) = stats(json);
            crate::execute::EndpointOutcome {
                exit_code: Some(0),
                stats,
                stats_json,
                args: Vec::new(),
            }
        };
        RunOutcome {
            server: endpoint(r#"{"schema":1,"ok":true,"bytes":0}"#),
            client: endpoint(&format!(r#"{{"schema":1,"ok":true,"bytes":{bytes}}}"#)),
            trace,
            folder: std::path::PathBuf::new(),
            runner_error: None,
            spec,
        }
    }

    /// The hostile cell's client check: the plugin-failure close, or the
    /// client was stranded.
    fn hostile_client_check(client_close: &str) -> Check {
        let mut run = synthetic("hostile", 1000, &[1200], &[50]);
        let (stats, stats_json) = stats(&format!(
            r#"{{"schema":1,"ok":false,"bytes":1000,"close":"{client_close}"}}"#
        ));
        run.client.exit_code = Some(1);
        run.client.stats = stats;
        run.client.stats_json = stats_json;
        judge("hostile", &[run])
            .into_iter()
            .find(|c| c.name.starts_with("the client is unharmed"))
            .expect("check")
    }

    #[test]
    fn a_hostile_cells_client_must_be_sent_the_plugin_failure_close() {
        assert!(
            hostile_client_check("closed by peer: plugin hostile trapped (code 1129381889)").passed
        );
        assert!(hostile_client_check("peer application close 0x43510001: plugin hostile").passed);
        let stranded = hostile_client_check("timed out");
        assert!(!stranded.passed, "{stranded:?}");
    }

    #[test]
    fn a_short_download_fails_the_cell() {
        let size = plan("transfer", Matrix::Reduced)[0].file_size;
        let full = vec![1200; 200];
        let good = judge("transfer", &[synthetic("transfer", size, &full, &[50])]);
        assert!(good.iter().all(|c| c.passed), "{good:?}");
        let short = judge("transfer", &[synthetic("transfer", size - 1, &full, &[50])]);
        assert!(
            short
                .iter()
                .any(|c| !c.passed && c.name.contains("byte-exact"))
        );
    }

    /// The "every client datagram is full-sized" check of a one-sided
    /// padding run.
    fn client_padding_check(run: RunOutcome) -> Check {
        judge("padding-one-sided", &[run])
            .into_iter()
            .find(|c| c.name.contains("every client"))
            .expect("check")
    }

    #[test]
    fn one_unpadded_datagram_before_the_close_fails_one_sided_padding() {
        let size = plan("padding-one-sided", Matrix::Reduced)[0].file_size;
        let server = vec![1200; 30];
        // The client's datagrams are all sent after the server's here, so
        // only those before the last full-size server datagram arrived count.
        let mut run = synthetic("padding-one-sided", size, &server, &[1200, 40, 1200]);
        for (i, d) in run
            .trace
            .iter_mut()
            .filter(|d| d.direction == Direction::ClientToServer)
            .enumerate()
        {
            d.sent = Duration::from_millis(i as u64);
        }
        let padded = client_padding_check(run.clone());
        assert!(!padded.passed, "{padded:?}");
        run.trace.retain(|d| d.size != 40);
        let padded = client_padding_check(run);
        assert!(padded.passed, "{padded:?}");
    }

    #[test]
    fn a_padded_sides_closing_tail_is_not_padding_evidence() {
        let size = plan("padding-one-sided", Matrix::Reduced)[0].file_size;
        let server = vec![1200; 30];
        // Padded throughout, then the close and a repeat of it, unpadded.
        let run = synthetic(
            "padding-one-sided",
            size,
            &server,
            &[1200, 1200, 1200, 53, 53],
        );
        let padded = client_padding_check(run);
        assert!(padded.passed, "{padded:?}");
        assert!(padded.detail.starts_with("3 datagrams"), "{padded:?}");
        // A side that never sent a full-size datagram has nothing padded.
        let run = synthetic("padding-one-sided", size, &server, &[40, 40]);
        let padded = client_padding_check(run);
        assert!(!padded.passed, "{padded:?}");
    }

    #[test]
    fn phases_follow_the_padding_toggles() {
        let sizes = [
            1200, 1200, 1200, 50, 1200, 60, 60, 1200, 1200, 1200, 1200, 1200, 1200, 1200, 1200,
            1200,
        ];
        let records: Vec<DatagramRecord> = sizes.iter().map(|s| datagram(*s)).collect();
        let refs: Vec<&DatagramRecord> = records.iter().collect();
        assert_eq!(
            padding_phases(&refs),
            vec![(true, 3), (false, 4), (true, 9)]
        );
        let unpadded: Vec<DatagramRecord> = [50, 1200, 60].iter().map(|s| datagram(*s)).collect();
        let refs: Vec<&DatagramRecord> = unpadded.iter().collect();
        assert_eq!(padding_phases(&refs), vec![(false, 3)]);
    }

    #[test]
    fn every_test_has_a_plan_in_every_matrix_and_unknown_ones_none() {
        for m in [Matrix::Reduced, Matrix::Default, Matrix::Paper] {
            for t in m.tests() {
                assert!(!plan(t, m).is_empty(), "{t} in {m:?}");
            }
        }
        assert!(plan("nope", Matrix::Default).is_empty());
        assert_eq!(plan("padding", Matrix::Paper).len(), 60);
    }

    #[test]
    fn the_bdp_window_is_the_links_bandwidth_delay_product() {
        let runs = plan("bdp", Matrix::Paper);
        let plugin = runs
            .iter()
            .find(|r| r.label == "plugin-1")
            .expect("plugin run");
        assert_eq!(bdp_bytes(&plugin.link), 3_125_000);
        assert_eq!(plugin.client.controls, vec!["0:524288:3125000".to_string()]);
    }
}
