//! Judging what an endpoint showed against a case's expectation. Every check
//! yields one line of evidence that says what was checked and what was seen.

use crate::proto::{
    ControlCheck, DatagramCheck, Direction, Expectation, FieldMatch, LogCheck, Outcome, PluginCheck,
};
use corequic_interop::link::{self, DatagramRecord};
use serde_json::Value;

/// One checked statement.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// Whether it held.
    pub ok: bool,
    /// What was checked and what was seen.
    pub text: String,
}

impl Check {
    fn new(ok: bool, text: String) -> Check {
        Check { ok, text }
    }
}

/// What one endpoint process showed.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// `client`, `server`, or `subject` for a load-only run.
    pub role: String,
    /// Its exit code (`None`: killed or never run).
    pub exit_code: Option<i32>,
    /// Its stats JSON, if it wrote one.
    pub stats: Option<Value>,
    /// Its stdout and stderr.
    pub output: String,
}

impl Observed {
    fn stat(&self, key: &str) -> &Value {
        self.stats.as_ref().map_or(&Value::Null, |s| &s[key])
    }

    fn logs(&self) -> Vec<&Value> {
        self.stat("logs")
            .as_array()
            .map(|a| a.iter().collect())
            .unwrap_or_default()
    }
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

/// Whether `haystack` contains `needle`, ignoring case; `needle` may list
/// alternatives separated by `|` (for example a close code in hex or
/// decimal).
fn contains_ci(haystack: &str, needle: &str) -> bool {
    let haystack = haystack.to_lowercase();
    needle
        .split('|')
        .any(|alternative| haystack.contains(&alternative.to_lowercase()))
}

/// The subject's peak RSS may exceed the peer's by at most `max_mib` MiB.
pub fn check_rss_above_peer(max_mib: u64, subject: &Observed, peer: &Observed) -> Check {
    let peak = |o: &Observed| o.stat("peak_rss_kib").as_u64();
    match (peak(subject), peak(peer)) {
        (Some(s), Some(p)) => {
            let above = s.saturating_sub(p);
            Check::new(
                above <= max_mib * 1024,
                format!(
                    "subject peak RSS {s} KiB is at most {max_mib} MiB above the peer's {p} KiB: {above} KiB above"
                ),
            )
        }
        (s, p) => Check::new(
            false,
            format!("both sides report peak_rss_kib: subject {s:?}, peer {p:?}"),
        ),
    }
}

/// Check one endpoint against an expectation; `size` is the case's
/// download size (a client's success means exactly that many bytes).
pub fn check_endpoint(who: &str, e: &Expectation, seen: &Observed, size: u64) -> Vec<Check> {
    let mut out = Vec::new();
    match e.outcome.enum_value_or_default() {
        Outcome::OUTCOME_ANY => {}
        Outcome::OUTCOME_SUCCESS => {
            let mut ok = seen.exit_code == Some(0);
            let mut detail = format!("exit {:?}", seen.exit_code);
            if seen.role == "client" {
                let bytes = seen.stat("bytes").as_u64();
                ok &= seen.stat("ok") == &Value::Bool(true) && bytes == Some(size);
                detail.push_str(&format!(
                    ", {bytes:?} of {size} bytes, ok {}",
                    seen.stat("ok")
                ));
            }
            out.push(Check::new(ok, format!("{who} succeeds: {detail}")));
        }
        Outcome::OUTCOME_FAILURE => out.push(Check::new(
            seen.exit_code == Some(1),
            format!("{who} exits 1: exit {:?}", seen.exit_code),
        )),
    }
    for needle in &e.stderr_contains {
        let found = contains_ci(&seen.output, needle);
        let excerpt: String = seen
            .output
            .lines()
            .last()
            .unwrap_or_default()
            .chars()
            .take(200)
            .collect();
        out.push(Check::new(
            found,
            format!(
                "{who} says `{needle}`: {}",
                if found {
                    "yes".into()
                } else {
                    format!("no (last line: {excerpt})")
                }
            ),
        ));
    }
    for needle in &e.stderr_excludes {
        out.push(Check::new(
            !contains_ci(&seen.output, needle),
            format!("{who} does not say `{needle}`"),
        ));
    }
    let close = seen.stat("close");
    if e.close_none {
        out.push(Check::new(
            close.is_null(),
            format!("{who} closes without an error: close {}", text_of(close)),
        ));
    }
    for needle in &e.close_contains {
        let text = text_of(close);
        out.push(Check::new(
            contains_ci(&text, needle),
            format!("{who} closes with `{needle}`: close {text}"),
        ));
    }
    if e.no_plugins {
        let plugins = seen.stat("plugins");
        out.push(Check::new(
            plugins.as_array().is_some_and(Vec::is_empty),
            format!("{who} attaches no plugin: {}", text_of(plugins)),
        ));
    }
    for p in &e.plugins {
        out.extend(check_plugin(who, p, seen));
    }
    for l in &e.logs {
        out.push(check_logs(who, l, seen));
    }
    for c in &e.controls {
        out.push(check_control(who, c, seen));
    }
    for order in &e.log_order {
        let logs = seen.logs();
        let positions: Vec<Option<usize>> = order
            .messages
            .iter()
            .map(|m| {
                let (plugin, message) = match order.plugin.as_str() {
                    "" => m.split_once(": ").unwrap_or(("", m.as_str())),
                    plugin => (plugin, m.as_str()),
                };
                logs.iter()
                    .position(|l| l["plugin"] == plugin && l["message"] == message)
            })
            .collect();
        let ok = positions.iter().all(Option::is_some) && positions.windows(2).all(|w| w[0] < w[1]);
        out.push(Check::new(
            ok,
            format!(
                "{who}: {} logs first {} in this order: positions {positions:?}",
                order.plugin,
                order.messages.join(" < ")
            ),
        ));
    }
    out
}

fn check_plugin(who: &str, p: &PluginCheck, seen: &Observed) -> Vec<Check> {
    let plugins = seen.stat("plugins");
    let entry = plugins
        .as_array()
        .and_then(|a| a.iter().find(|x| x["name"] == p.name.as_str()));
    let Some(entry) = entry else {
        return vec![Check::new(
            false,
            format!(
                "{who} reports plugin {}: absent from {}",
                p.name,
                text_of(plugins)
            ),
        )];
    };
    let mut out = Vec::new();
    let name = &p.name;
    if !p.enabled.is_empty() {
        let want = p.enabled == "yes";
        out.push(Check::new(
            entry["enabled"] == Value::Bool(want),
            format!("{who}: {name} enabled is {want}: {}", entry["enabled"]),
        ));
    }
    if p.not_removed {
        out.push(Check::new(
            entry["removed"].is_null(),
            format!(
                "{who}: {name} stays attached: removed {}",
                text_of(&entry["removed"])
            ),
        ));
    }
    for needle in &p.removed {
        let reason = text_of(&entry["removed"]);
        out.push(Check::new(
            !entry["removed"].is_null() && contains_ci(&reason, needle),
            format!("{who}: {name} removed, naming `{needle}`: {reason}"),
        ));
    }
    let counter = |key: &str| entry[key].as_u64().unwrap_or(0);
    for (key, min) in [
        ("calls", p.min_calls),
        ("errors", p.min_errors),
        ("denied", p.min_denied),
        ("logs_dropped", p.min_logs_dropped),
    ] {
        if min > 0 {
            out.push(Check::new(
                counter(key) >= min,
                format!("{who}: {name} {key} ≥ {min}: {}", counter(key)),
            ));
        }
    }
    if p.check_denied {
        out.push(Check::new(
            counter("denied") == p.denied,
            format!("{who}: {name} denied = {}: {}", p.denied, counter("denied")),
        ));
    }
    out
}

fn field_matches(m: &FieldMatch, value: &str) -> bool {
    if !m.one_of.is_empty() && !m.one_of.iter().any(|v| v == value) {
        return false;
    }
    if !m.prefix.is_empty() && !value.starts_with(&m.prefix) {
        return false;
    }
    if m.numeric {
        let digits = value.trim_end_matches("ns");
        match digits.parse::<u64>() {
            Ok(n) => n >= m.min && (m.max == 0 || n <= m.max),
            Err(_) => false,
        }
    } else {
        true
    }
}

fn record_field<'a>(record: &'a Value, name: &str) -> Option<&'a str> {
    record["fields"]
        .as_array()?
        .iter()
        .find(|kv| kv[0] == name)
        .and_then(|kv| kv[1].as_str())
}

fn describe_match(m: &FieldMatch) -> String {
    let mut parts = Vec::new();
    if !m.one_of.is_empty() {
        parts.push(m.one_of.join("|"));
    }
    if !m.prefix.is_empty() {
        parts.push(format!("{}…", m.prefix));
    }
    if m.numeric {
        parts.push(if m.max == 0 {
            format!("≥ {}", m.min)
        } else {
            format!("{}..={}", m.min, m.max)
        });
    }
    format!("{}={}", m.name, parts.join(","))
}

fn check_logs(who: &str, l: &LogCheck, seen: &Observed) -> Check {
    let logs = seen.logs();
    let message_matches = |r: &Value| match l.message_contains.is_empty() {
        true => r["message"] == l.message.as_str(),
        false => {
            let text = r["message"].as_str().unwrap_or_default();
            l.message_contains.iter().all(|n| contains_ci(text, n))
        }
    };
    let of_message: Vec<&Value> = logs
        .iter()
        .copied()
        .filter(|r| (l.plugin.is_empty() || r["plugin"] == l.plugin.as_str()) && message_matches(r))
        .collect();
    let matching = of_message
        .iter()
        .filter(|r| {
            l.fields
                .iter()
                .all(|m| record_field(r, &m.name).is_some_and(|v| field_matches(m, v)))
        })
        .count();
    let wanted = l
        .fields
        .iter()
        .map(describe_match)
        .collect::<Vec<_>>()
        .join(" ");
    let message = match l.message_contains.is_empty() {
        true => format!("`{}`", l.message),
        false => format!("`…{}…`", l.message_contains.join("…")),
    };
    let plugin = if l.plugin.is_empty() {
        "any plugin or the host"
    } else {
        l.plugin.as_str()
    };
    let (ok, rule) = if l.absent {
        (matching == 0, "none".to_string())
    } else if l.exact {
        (matching == l.count as usize, format!("exactly {}", l.count))
    } else {
        let min = l.min_count.max(1) as usize;
        (matching >= min, format!("≥ {min}"))
    };
    let sample = of_message
        .iter()
        .find(|r| {
            !l.fields
                .iter()
                .all(|m| record_field(r, &m.name).is_some_and(|v| field_matches(m, v)))
        })
        .map(|r| format!("; e.g. a non-matching one: {}", r["fields"]))
        .unwrap_or_default();
    Check::new(
        ok,
        format!(
            "{who}: {rule} {message} record(s) of {plugin} {wanted}: {matching} of {}{}",
            of_message.len(),
            if ok { String::new() } else { sample }
        ),
    )
}

fn check_control(who: &str, c: &ControlCheck, seen: &Observed) -> Check {
    let controls = seen.stat("controls");
    let call = controls.as_array().and_then(|a| {
        a.iter()
            .filter(|x| x["id"].as_u64() == Some(c.id))
            .nth(c.nth as usize)
    });
    let what = format!("{who}: control {:#x} (call {})", c.id, c.nth);
    let Some(call) = call else {
        return Check::new(
            false,
            format!("{what} was made: not in {}", text_of(controls)),
        );
    };
    let error = &call["error"];
    let results: Vec<String> = call["result"]
        .as_array()
        .map(|a| a.iter().map(text_of).collect())
        .unwrap_or_default();
    if !c.error_contains.is_empty() {
        let text = text_of(error);
        let ok = !error.is_null() && c.error_contains.iter().all(|n| contains_ci(&text, n));
        return Check::new(
            ok,
            format!(
                "{what} fails with `{}`: error {text}",
                c.error_contains.join("`, `")
            ),
        );
    }
    let mut ok = error.is_null() || !c.ok;
    let mut detail = format!("error {}, result {results:?}", text_of(error));
    if !c.result.is_empty() {
        ok &= results == c.result;
        detail.push_str(&format!(", wanted {:?}", c.result));
    }
    if c.duration {
        let ns = results
            .first()
            .and_then(|r| r.strip_suffix("ns"))
            .and_then(|n| n.parse::<u64>().ok());
        ok &= ns.is_some_and(|n| n >= c.min_ns && (c.max_ns == 0 || n <= c.max_ns));
        detail.push_str(&format!(", a duration in [{}, {}] ns", c.min_ns, c.max_ns));
    }
    Check::new(ok, format!("{what} succeeds: {detail}"))
}

/// Check the link trace; `subject_is_server` orients the directions.
pub fn check_datagrams(
    d: &DatagramCheck,
    trace: &[DatagramRecord],
    subject_is_server: bool,
) -> Check {
    let from_server = match d.direction.enum_value_or_default() {
        Direction::DIRECTION_FROM_PEER => !subject_is_server,
        _ => subject_is_server,
    };
    let wanted = if from_server {
        link::Direction::ServerToClient
    } else {
        link::Direction::ClientToServer
    };
    let mut sizes: Vec<usize> = trace
        .iter()
        .filter(|r| r.direction == wanted && (!d.short_header_only || r.short_header))
        .map(|r| r.size)
        .collect();
    for _ in 0..d.skip_last {
        sizes.pop();
    }
    let who = match d.direction.enum_value_or_default() {
        Direction::DIRECTION_FROM_PEER => "peer",
        _ => "subject",
    };
    let kind = if d.short_header_only {
        "1-RTT datagrams"
    } else {
        "datagrams"
    };
    let mut ok = sizes.len() >= d.min_datagrams as usize;
    let mut text = format!(
        "{} {kind} of the {who} (≥ {} wanted)",
        sizes.len(),
        d.min_datagrams
    );
    if d.all_at_least > 0 {
        let smallest = sizes.iter().min().copied();
        ok &= smallest.is_none_or(|s| s >= d.all_at_least as usize);
        text.push_str(&format!(
            ", all ≥ {} B: smallest {smallest:?}",
            d.all_at_least
        ));
    }
    if d.some_at_least > 0 {
        let large = sizes
            .iter()
            .filter(|&&s| s >= d.some_at_least as usize)
            .count();
        ok &= large > 0;
        text.push_str(&format!(", some ≥ {} B: {large}", d.some_at_least));
    }
    if d.some_below > 0 {
        let below = sizes.iter().filter(|&&s| s < d.some_below as usize).count();
        ok &= below > 0;
        text.push_str(&format!(", some < {} B: {below}", d.some_below));
    }
    Check::new(ok, text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn seen(stats: Value) -> Observed {
        Observed {
            role: "client".into(),
            exit_code: Some(0),
            stats: Some(stats),
            output: String::new(),
        }
    }

    #[test]
    fn a_log_check_counts_only_records_whose_fields_match() {
        let s = seen(json!({"logs": [
            {"plugin": "p", "message": "call", "fields": [["phase", "init"], ["result", "ok"]]},
            {"plugin": "p", "message": "call", "fields": [["phase", "init"], ["result", "denied"]]},
        ]}));
        let mut l = LogCheck {
            plugin: "p".into(),
            message: "call".into(),
            ..Default::default()
        };
        l.fields.push(FieldMatch {
            name: "result".into(),
            one_of: vec!["ok".into()],
            ..Default::default()
        });
        l.exact = true;
        l.count = 1;
        assert!(check_logs("s", &l, &s).ok);
        l.count = 2;
        assert!(!check_logs("s", &l, &s).ok);
        l.exact = false;
        l.absent = true;
        assert!(!check_logs("s", &l, &s).ok);
    }

    #[test]
    fn the_rss_check_compares_the_subject_with_the_peer() {
        let subject = seen(json!({"peak_rss_kib": 30 * 1024}));
        let peer = seen(json!({"peak_rss_kib": 14 * 1024}));
        assert!(check_rss_above_peer(16, &subject, &peer).ok);
        assert!(!check_rss_above_peer(15, &subject, &peer).ok);
        // A side without the number fails the check rather than passing it.
        assert!(!check_rss_above_peer(64, &subject, &seen(json!({}))).ok);
    }

    #[test]
    fn a_client_succeeds_only_with_every_byte() {
        let e = Expectation {
            outcome: Outcome::OUTCOME_SUCCESS.into(),
            ..Default::default()
        };
        assert!(check_endpoint("c", &e, &seen(json!({"ok": true, "bytes": 10})), 10)[0].ok);
        assert!(!check_endpoint("c", &e, &seen(json!({"ok": true, "bytes": 9})), 10)[0].ok);
        assert!(!check_endpoint("c", &e, &seen(json!({"ok": false, "bytes": 10})), 10)[0].ok);
    }

    #[test]
    fn a_numeric_match_reads_durations_and_bounds() {
        let m = FieldMatch {
            name: "v".into(),
            numeric: true,
            min: 1,
            max: 10,
            ..Default::default()
        };
        assert!(field_matches(&m, "5ns"));
        assert!(field_matches(&m, "10"));
        assert!(!field_matches(&m, "0"));
        assert!(!field_matches(&m, "none"));
    }
}
