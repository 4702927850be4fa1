//! The self-contained static HTML report: the matrix per test case and
//! inline SVG plots reproducing the paper's figures 3-6. No scripts, no
//! external assets.

use crate::cases::{inter_departure_ms, one_rtt, transfer_ms};
use crate::link::{Direction, DropReason, Fate};
use crate::results::{CellResult, HostSummary, Outcome};
use std::fmt::Write;

/// Colours of the plot series, in order.
const PALETTE: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// Escape text for HTML.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// One named series of points.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Points (x, y).
    pub points: Vec<(f64, f64)>,
}

/// How a plot draws its series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Step lines (CDFs).
    Steps,
    /// Dots (a scatter over time).
    Dots,
}

const WIDTH: f64 = 460.0;
const HEIGHT: f64 = 260.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 130.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 40.0;

/// A "nice" tick step for a range.
fn tick_step(range: f64) -> f64 {
    if range <= 0.0 || !range.is_finite() {
        return 1.0;
    }
    let raw = range / 5.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let norm = raw / magnitude;
    let nice = if norm < 1.5 {
        1.0
    } else if norm < 3.5 {
        2.0
    } else if norm < 7.5 {
        5.0
    } else {
        10.0
    };
    nice * magnitude
}

fn axes(svg: &mut String, title: &str, x_label: &str, y_label: &str, x_max: f64, y_max: f64) {
    let (w, h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let _ = write!(
        svg,
        r#"<text x="{}" y="16" class="title">{}</text><rect x="{LEFT}" y="{TOP}" width="{w}" height="{h}" class="frame"/>"#,
        LEFT,
        escape(title)
    );
    for (max, horizontal) in [(x_max, true), (y_max, false)] {
        let step = tick_step(max);
        let mut v = 0.0;
        while v <= max * 1.0001 {
            if horizontal {
                let x = LEFT + v / max * w;
                let _ = write!(
                    svg,
                    r#"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{}" class="tick"/><text x="{x:.1}" y="{}" class="xt">{}</text>"#,
                    TOP + h,
                    TOP + h + 4.0,
                    TOP + h + 16.0,
                    fmt_tick(v)
                );
            } else {
                let y = TOP + h - v / max * h;
                let _ = write!(
                    svg,
                    r#"<line x1="{}" y1="{y:.1}" x2="{LEFT}" y2="{y:.1}" class="tick"/><text x="{}" y="{:.1}" class="yt">{}</text>"#,
                    LEFT - 4.0,
                    LEFT - 6.0,
                    y + 4.0,
                    fmt_tick(v)
                );
            }
            v += step;
        }
    }
    let _ = write!(
        svg,
        r#"<text x="{:.1}" y="{}" class="xl">{}</text><text x="14" y="{:.1}" class="yl" transform="rotate(-90 14 {:.1})">{}</text>"#,
        LEFT + w / 2.0,
        HEIGHT - 6.0,
        escape(x_label),
        TOP + h / 2.0,
        TOP + h / 2.0,
        escape(y_label)
    );
}

fn fmt_tick(v: f64) -> String {
    if v == v.round() {
        format!("{v:.0}")
    } else {
        format!("{v:.2}").trim_end_matches('0').to_string()
    }
}

fn legend(svg: &mut String, names: &[String]) {
    for (i, name) in names.iter().enumerate() {
        let y = TOP + 10.0 + i as f64 * 16.0;
        let x = WIDTH - RIGHT + 8.0;
        let _ = write!(
            svg,
            r#"<rect x="{x}" y="{:.1}" width="10" height="10" fill="{}"/><text x="{}" y="{:.1}" class="lg">{}</text>"#,
            y - 9.0,
            PALETTE[i % PALETTE.len()],
            x + 14.0,
            y,
            escape(name)
        );
    }
}

/// An SVG line or scatter plot.
pub fn plot(
    figure: &str,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    style: Style,
) -> String {
    let max = |f: fn(&(f64, f64)) -> f64| {
        series
            .iter()
            .flat_map(|s| s.points.iter().map(f))
            .fold(0.0f64, f64::max)
    };
    let x_max = max(|p| p.0).max(1e-9) * 1.02;
    let y_max = max(|p| p.1).max(1e-9) * 1.05;
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="plot" data-figure="{figure}" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img"><title>{}</title>"#,
        escape(title)
    );
    axes(&mut svg, title, x_label, y_label, x_max, y_max);
    let (w, h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let sx = |x: f64| LEFT + x / x_max * w;
    let sy = |y: f64| TOP + h - y / y_max * h;
    for (i, s) in series.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        match style {
            Style::Steps => {
                let mut d = String::new();
                let mut last_y = 0.0;
                for (j, (x, y)) in s.points.iter().enumerate() {
                    if j == 0 {
                        let _ = write!(d, "M{:.1} {:.1}", sx(*x), sy(0.0));
                    } else {
                        let _ = write!(d, " H{:.1}", sx(*x));
                    }
                    let _ = write!(d, " V{:.1}", sy(*y));
                    last_y = *y;
                }
                let _ = last_y;
                let _ = write!(
                    svg,
                    r#"<path class="series" d="{d}" fill="none" stroke="{colour}" stroke-width="1.8"/>"#
                );
            }
            Style::Dots => {
                let _ = write!(svg, r#"<g class="series" fill="{colour}">"#);
                let stride = (s.points.len() / 3000).max(1);
                for (x, y) in s.points.iter().step_by(stride) {
                    let _ = write!(
                        svg,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="1.6"/>"#,
                        sx(*x),
                        sy(*y)
                    );
                }
                svg.push_str("</g>");
            }
        }
    }
    legend(
        &mut svg,
        &series.iter().map(|s| s.name.clone()).collect::<Vec<_>>(),
    );
    svg.push_str("</svg>");
    svg
}

/// Bars of one group: (series name, the values of its runs).
pub type BarGroup = (String, Vec<(String, Vec<f64>)>);

/// A grouped bar chart: per group, one bar per series name, with min/max
/// whiskers.
pub fn bars(figure: &str, title: &str, y_label: &str, groups: &[BarGroup]) -> String {
    let y_max = groups
        .iter()
        .flat_map(|(_, bars)| bars.iter().flat_map(|(_, v)| v.iter().copied()))
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.1;
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="plot" data-figure="{figure}" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img"><title>{}</title>"#,
        escape(title)
    );
    let (w, h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    axes(&mut svg, title, "", y_label, 1.0, y_max);
    // The x ticks of `axes` are meaningless here: cover them.
    let _ = write!(
        svg,
        r#"<rect x="{}" y="{}" width="{}" height="{}" fill="white"/>"#,
        LEFT - 10.0,
        TOP + h + 1.0,
        w + 20.0,
        BOTTOM - 14.0
    );
    let sy = |y: f64| TOP + h - y / y_max * h;
    let group_w = w / groups.len().max(1) as f64;
    let mut names: Vec<String> = Vec::new();
    for (g, (group, group_bars)) in groups.iter().enumerate() {
        let bar_w = group_w * 0.8 / group_bars.len().max(1) as f64;
        for (b, (name, values)) in group_bars.iter().enumerate() {
            if !names.contains(name) {
                names.push(name.clone());
            }
            let colour = PALETTE[names.iter().position(|n| n == name).unwrap_or(0) % PALETTE.len()];
            if values.is_empty() {
                continue;
            }
            let mean = values.iter().sum::<f64>() / values.len() as f64;
            let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = values.iter().copied().fold(0.0f64, f64::max);
            let x = LEFT + g as f64 * group_w + group_w * 0.1 + b as f64 * bar_w;
            let _ = write!(
                svg,
                r#"<rect class="bar" x="{x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{colour}"><title>{}: {} mean {mean:.0} ms (n={})</title></rect>"#,
                sy(mean),
                bar_w * 0.9,
                TOP + h - sy(mean),
                escape(group),
                escape(name),
                values.len()
            );
            let cx = x + bar_w * 0.45;
            let _ = write!(
                svg,
                r#"<line x1="{cx:.1}" y1="{:.1}" x2="{cx:.1}" y2="{:.1}" stroke="black"/>"#,
                sy(lo),
                sy(hi)
            );
        }
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{}" class="xt">{}</text>"#,
            LEFT + (g as f64 + 0.5) * group_w,
            TOP + h + 16.0,
            escape(group)
        );
    }
    legend(&mut svg, &names);
    svg.push_str("</svg>");
    svg
}

/// The empirical CDF of values, as step points (value, fraction ≤ value).
pub fn cdf(mut values: Vec<f64>) -> Vec<(f64, f64)> {
    values.sort_by(|a, b| a.total_cmp(b));
    let n = values.len() as f64;
    values
        .iter()
        .enumerate()
        .map(|(i, v)| (*v, (i + 1) as f64 / n))
        .collect()
}

fn pair_name(c: &CellResult) -> String {
    format!("{}→{}", c.server, c.client)
}

fn runs_of<'a>(
    cell: &'a CellResult,
    prefix: &'a str,
) -> impl Iterator<Item = &'a crate::execute::RunOutcome> + 'a {
    cell.runs
        .iter()
        .filter(move |r| r.spec.label.starts_with(prefix))
}

fn padding_figures(cells: &[CellResult]) -> String {
    let mut html = String::new();
    for c in cells
        .iter()
        .filter(|c| c.test == "padding" && c.outcome != Outcome::Unsupported)
    {
        let sizes = |prefix: &str, dir: Direction| -> Vec<f64> {
            runs_of(c, prefix)
                .flat_map(|r| {
                    one_rtt(&r.trace, dir)
                        .into_iter()
                        .map(|d| d.size as f64)
                        .collect::<Vec<_>>()
                })
                .collect()
        };
        let gaps = |prefix: &str| -> Vec<f64> {
            runs_of(c, prefix)
                .flat_map(|r| inter_departure_ms(&r.trace, Direction::ServerToClient))
                .collect()
        };
        let size_series = vec![
            Series {
                name: "server, no padding".into(),
                points: cdf(sizes("baseline", Direction::ServerToClient)),
            },
            Series {
                name: "server, padding".into(),
                points: cdf(sizes("padded", Direction::ServerToClient)),
            },
            Series {
                name: "client, no padding".into(),
                points: cdf(sizes("baseline", Direction::ClientToServer)),
            },
            Series {
                name: "client, padding".into(),
                points: cdf(sizes("padded", Direction::ClientToServer)),
            },
        ];
        let gap_series = vec![
            Series {
                name: "no padding".into(),
                points: cdf(gaps("baseline")),
            },
            Series {
                name: "padding".into(),
                points: cdf(gaps("padded")),
            },
        ];
        let _ = write!(
            html,
            "<div class=\"fig\">{}{}</div>",
            plot(
                "fig3",
                &format!("Fig. 3 — 1-RTT datagram sizes, {}", pair_name(c)),
                "datagram size (bytes)",
                "CDF",
                &size_series,
                Style::Steps
            ),
            plot(
                "fig4",
                &format!("Fig. 4 — server inter-departure times, {}", pair_name(c)),
                "inter-departure time (ms)",
                "CDF",
                &gap_series,
                Style::Steps
            )
        );
    }
    html
}

fn bdp_figure(cells: &[CellResult]) -> String {
    let groups: Vec<BarGroup> = cells
        .iter()
        .filter(|c| c.test == "bdp" && c.outcome != Outcome::Unsupported)
        .map(|c| {
            let times = |p: &str| runs_of(c, p).filter_map(transfer_ms).collect::<Vec<f64>>();
            (
                pair_name(c),
                vec![
                    ("without plugin".to_string(), times("baseline")),
                    ("with bdp".to_string(), times("plugin")),
                ],
            )
        })
        .collect();
    if groups.is_empty() {
        return String::new();
    }
    let rtt = cells
        .iter()
        .find(|c| c.test == "bdp")
        .and_then(|c| c.runs.first())
        .map(|r| r.spec.link.rtt().as_millis())
        .unwrap_or(0);
    format!(
        "<div class=\"fig\">{}</div>",
        bars(
            "fig5",
            &format!("Fig. 5 — BDP transfer time per pair at {rtt} ms RTT"),
            "transfer time (ms)",
            &groups
        )
    )
}

fn dummy_figure(cells: &[CellResult]) -> String {
    let mut html = String::new();
    for c in cells
        .iter()
        .filter(|c| c.test == "dummy+padding" && c.outcome != Outcome::Unsupported)
    {
        let series: Vec<Series> = c
            .runs
            .iter()
            .take(1)
            .map(|r| {
                let carried: Vec<_> = r
                    .trace
                    .iter()
                    .filter(|d| {
                        d.direction == Direction::ClientToServer
                            && d.fate != Fate::Dropped(DropReason::TooLarge)
                    })
                    .collect();
                let start = carried.first().map(|d| d.sent).unwrap_or_default();
                Series {
                    name: "client datagrams".into(),
                    points: carried
                        .iter()
                        .map(|d| ((d.sent - start).as_secs_f64() * 1e3, d.size as f64))
                        .collect(),
                }
            })
            .collect();
        let _ = write!(
            html,
            "<div class=\"fig\">{}</div>",
            plot(
                "fig6",
                &format!(
                    "Fig. 6 — DUMMY + padding: client datagram sizes, {}",
                    pair_name(c)
                ),
                "time since the first datagram (ms)",
                "datagram size (bytes)",
                &series,
                Style::Dots
            )
        );
    }
    html
}

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em;color:#222}\
table.matrix{border-collapse:collapse;margin:.4em 0 1.2em}\
table.matrix th,table.matrix td{border:1px solid #999;padding:.3em .7em;text-align:center}\
td.pass{background:#c8f0c8}td.fail{background:#f6c0c0}td.unsupported{background:#e4e4e4}\
td a{color:inherit}.fig{display:inline-block;margin:.3em}\
svg .frame{fill:none;stroke:#444}svg .tick{stroke:#444}\
svg text{font-size:10px;font-family:sans-serif}svg .title{font-size:12px;font-weight:bold}\
svg .xt,svg .xl{text-anchor:middle}svg .yt{text-anchor:end}svg .yl{text-anchor:middle}\
.tests{display:flex;flex-wrap:wrap;gap:2em}";

/// The whole report.
pub fn render(
    matrix: &str,
    started: &str,
    hosts: &[HostSummary],
    tests: &[&str],
    cells: &[CellResult],
) -> String {
    let mut html = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>corequic interop matrix ({})</title><style>{STYLE}</style></head><body>\
         <h1>corequic interop matrix</h1><p>Matrix <b>{}</b>, started {}. Hosts: {}. Rows: server; columns: client. \
         Each cell links to its folder (logs, qlogs, stats JSON, link trace, checks). Results: <a href=\"results.json\">results.json</a>, <a href=\"results.pb\">results.pb</a>.</p>",
        escape(matrix),
        escape(matrix),
        escape(started),
        hosts
            .iter()
            .map(|h| escape(&h.name))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let totals = [Outcome::Pass, Outcome::Fail, Outcome::Unsupported]
        .map(|o| (o, cells.iter().filter(|c| c.outcome == o).count()));
    let _ = write!(
        html,
        "<p id=\"totals\">{}</p><h2>Matrix</h2><div class=\"tests\">",
        totals
            .iter()
            .map(|(o, n)| format!("{n} {}", o.label()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for test in tests {
        let _ = write!(
            html,
            "<div><h3>{}</h3><table class=\"matrix\" id=\"matrix-{}\"><tr><th>server \\ client</th>",
            escape(test),
            escape(&test.replace('+', "-"))
        );
        for client in hosts {
            let _ = write!(html, "<th>{}</th>", escape(&client.name));
        }
        html.push_str("</tr>");
        for server in hosts {
            let _ = write!(html, "<tr><th>{}</th>", escape(&server.name));
            for client in hosts {
                match cells
                    .iter()
                    .find(|c| c.test == *test && c.server == server.name && c.client == client.name)
                {
                    Some(c) => {
                        let detail: Vec<String> = c
                            .checks
                            .iter()
                            .map(|k| {
                                format!(
                                    "{} {}: {}",
                                    if k.passed { "✓" } else { "✗" },
                                    k.name,
                                    k.detail
                                )
                            })
                            .collect();
                        let _ = write!(
                            html,
                            "<td class=\"{}\" title=\"{}\"><a href=\"{}/\">{}</a></td>",
                            c.outcome.label(),
                            escape(&detail.join("\n")),
                            escape(&c.folder),
                            c.outcome.label()
                        );
                    }
                    None => html.push_str("<td>—</td>"),
                }
            }
            html.push_str("</tr>");
        }
        html.push_str("</table></div>");
    }
    html.push_str("</div><h2>Figures</h2>");
    let figures = [
        padding_figures(cells),
        bdp_figure(cells),
        dummy_figure(cells),
    ]
    .concat();
    if figures.is_empty() {
        html.push_str("<p>No plots: the padding, bdp and dummy+padding cells did not run.</p>");
    }
    html.push_str(&figures);
    html.push_str("<h2>Evidence</h2>");
    for c in cells {
        let _ = write!(
            html,
            "<details><summary>{} — {}</summary><ul>",
            escape(&c.key()),
            c.outcome.label()
        );
        for k in &c.checks {
            let _ = write!(
                html,
                "<li>{} {} — {}</li>",
                if k.passed { "✓" } else { "✗" },
                escape(&k.name),
                escape(&k.detail)
            );
        }
        html.push_str("</ul></details>");
    }
    html.push_str("</body></html>\n");
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdfs_and_ticks() {
        assert_eq!(
            cdf(vec![3.0, 1.0, 2.0, 2.0]),
            vec![(1.0, 0.25), (2.0, 0.5), (2.0, 0.75), (3.0, 1.0)]
        );
        assert_eq!(tick_step(1200.0), 200.0);
        assert_eq!(tick_step(1.0), 0.2);
    }

    #[test]
    fn a_plot_draws_one_path_per_series_and_escapes_titles() {
        let series = vec![
            Series {
                name: "a<b".into(),
                points: vec![(1.0, 0.5), (2.0, 1.0)],
            },
            Series {
                name: "c".into(),
                points: vec![(1.5, 1.0)],
            },
        ];
        let svg = plot("fig3", "x & y", "x", "y", &series, Style::Steps);
        assert_eq!(svg.matches("<path class=\"series\"").count(), 2);
        assert!(svg.contains("x &amp; y") && svg.contains("a&lt;b"));
        let svg = bars(
            "fig5",
            "t",
            "ms",
            &[("p".into(), vec![("with".into(), vec![1.0, 3.0])])],
        );
        assert_eq!(svg.matches("class=\"bar\"").count(), 1);
    }
}
