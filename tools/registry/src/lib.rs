//! The codepoint registry of `core-quic:plugin`: `spec/registry.toml`, its
//! model, and [`Registry::check`], which holds the repository to it.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The registry file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registry {
    /// The ranges codepoints are allocated from, with their policies.
    #[serde(rename = "range")]
    pub ranges: Vec<Range>,
    /// The allocated codepoints.
    #[serde(rename = "codepoint")]
    pub codepoints: Vec<Codepoint>,
}

/// A range of one kind of codepoint and its allocation policy.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Range {
    /// `frame-type`, `transport-parameter`, `plugin-control`, `close-code`
    /// or `log-message`.
    pub kind: String,
    /// First value (absent for log messages).
    pub first: Option<u64>,
    /// Last value, inclusive.
    pub last: Option<u64>,
    /// Who may allocate from it, and how.
    pub policy: String,
}

/// One allocated codepoint.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Codepoint {
    /// Its kind, as in [`Range::kind`].
    pub kind: String,
    /// Its value (absent for log messages).
    pub value: Option<u64>,
    /// What it is (for a log message, the message).
    pub name: String,
    /// A log message's field keys.
    #[serde(default)]
    pub fields: Vec<String>,
    /// The plugin or part of the repository that owns it.
    pub owner: String,
    /// Where it is specified.
    pub reference: String,
    /// `file:CONSTANT` (or `file:Enum::Variant`) that must define it with
    /// this value; for a log message, files that must log it.
    #[serde(default)]
    pub symbols: Vec<String>,
    /// For the ABI's identifiers (fields, routines, permissions, error
    /// kinds): the ABI version that introduced it.
    pub since: Option<String>,
}

/// The kinds of codepoint, in the order the registry presents them.
pub const KINDS: [&str; 9] = [
    "frame-type",
    "transport-parameter",
    "plugin-control",
    "close-code",
    "log-message",
    "field",
    "routine",
    "permission",
    "error-kind",
];

/// The kinds that are identifiers of the ABI itself: each codepoint says
/// since which ABI version it exists.
pub const ABI_KINDS: [&str; 4] = ["field", "routine", "permission", "error-kind"];

impl Registry {
    /// Parse the registry at `path`.
    pub fn load(path: &Path) -> Result<Registry, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Every way the registry and the repository at `root` disagree.
    pub fn check(&self, root: &Path) -> Vec<String> {
        let mut problems = Vec::new();
        for r in &self.ranges {
            if !KINDS.contains(&r.kind.as_str()) {
                problems.push(format!("range of unknown kind `{}`", r.kind));
            }
        }
        let numeric = |r: &Range| r.first.zip(r.last);
        let mut by_kind: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
        for r in &self.ranges {
            if let Some((first, last)) = numeric(r) {
                if first > last {
                    problems.push(format!("{} range {first:#x}-{last:#x} is empty", r.kind));
                }
                by_kind.entry(&r.kind).or_default().push((first, last));
            }
        }
        for (kind, ranges) in &mut by_kind {
            ranges.sort();
            for pair in ranges.windows(2) {
                if pair[1].0 <= pair[0].1 {
                    problems.push(format!(
                        "{kind} ranges {:#x}-{:#x} and {:#x}-{:#x} overlap",
                        pair[0].0, pair[0].1, pair[1].0, pair[1].1
                    ));
                }
            }
        }
        let mut seen: BTreeMap<(String, String), &str> = BTreeMap::new();
        for c in &self.codepoints {
            let what = format!("{} `{}`", c.kind, c.name);
            if !KINDS.contains(&c.kind.as_str()) {
                problems.push(format!("{what}: unknown kind"));
                continue;
            }
            let key = match c.value {
                Some(v) => format!("{v:#x}"),
                None => c.name.clone(),
            };
            match (ABI_KINDS.contains(&c.kind.as_str()), &c.since) {
                (true, None) => problems.push(format!("{what}: no `since` version")),
                (false, Some(_)) => {
                    problems.push(format!("{what}: only the ABI's identifiers have `since`"))
                }
                _ => {}
            }
            if let Some(other) = seen.insert((c.kind.clone(), key.clone()), &c.name) {
                problems.push(format!("{what}: {key} is already allocated to `{other}`"));
            }
            match (c.kind.as_str(), c.value) {
                ("log-message", Some(_)) => {
                    problems.push(format!("{what}: a log message has no value"))
                }
                ("log-message", None) => {
                    for file in &c.symbols {
                        problems.extend(check_log(root, file, c));
                    }
                }
                (_, None) => problems.push(format!("{what}: no value")),
                (kind, Some(v)) => {
                    let in_range = by_kind
                        .get(kind)
                        .is_some_and(|rs| rs.iter().any(|(f, l)| (*f..=*l).contains(&v)));
                    if !in_range {
                        problems.push(format!("{what}: {v:#x} is in no {kind} range"));
                    }
                    for symbol in &c.symbols {
                        problems.extend(check_constant(root, symbol, v, &what));
                    }
                }
            }
        }
        problems
    }
}

/// `file:CONSTANT` must define `const CONSTANT: <integer type> = value;`;
/// `file:Enum::Variant` must give the variant the explicit discriminant
/// `Variant = value,` inside `enum Enum`.
fn check_constant(root: &Path, symbol: &str, value: u64, what: &str) -> Option<String> {
    let Some((file, name)) = symbol.split_once(':') else {
        return Some(format!("{what}: symbol `{symbol}` is not file:CONSTANT"));
    };
    let text = match std::fs::read_to_string(root.join(file)) {
        Ok(t) => t,
        Err(e) => return Some(format!("{what}: {file}: {e}")),
    };
    let literal = match name.split_once("::") {
        Some((ty, variant)) => enum_discriminant(&text, ty, variant),
        None => constant(&text, name),
    };
    let Some(literal) = literal else {
        return Some(format!(
            "{what}: {file} does not define `{name}` as a literal"
        ));
    };
    match parse_literal(literal) {
        Some(v) if v == value => None,
        Some(v) => Some(format!(
            "{what}: {file}:{name} is {v:#x}, the registry says {value:#x}"
        )),
        None => Some(format!(
            "{what}: {file}:{name} = {literal} is not a literal"
        )),
    }
}

/// The literal of `const NAME: <type> = literal;` in `text`.
fn constant<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let prefix = format!("const {name}: ");
    text.lines().find_map(|l| {
        let l = l
            .trim_start()
            .trim_start_matches("pub ")
            .trim_start_matches("pub(crate) ");
        let (_, literal) = l.strip_prefix(&prefix)?.split_once(" = ")?;
        literal.strip_suffix(';')
    })
}

/// The literal of `Variant = literal,` in the body of `enum Enum` in `text`.
fn enum_discriminant<'a>(text: &'a str, ty: &str, variant: &str) -> Option<&'a str> {
    let header = format!("enum {ty} {{");
    let body = text.split_once(&header)?.1.split_once("\n}")?.0;
    let prefix = format!("{variant} = ");
    body.lines()
        .find_map(|l| l.trim().strip_prefix(&prefix)?.strip_suffix(','))
}

/// A log message and its field keys must appear, quoted, in `file`.
fn check_log(root: &Path, file: &str, c: &Codepoint) -> Vec<String> {
    let text = match std::fs::read_to_string(root.join(file)) {
        Ok(t) => t,
        Err(e) => return vec![format!("log message `{}`: {file}: {e}", c.name)],
    };
    std::iter::once(&c.name)
        .chain(&c.fields)
        .filter(|s| !text.contains(&format!("\"{s}\"")))
        .map(|s| format!("log message `{}`: {file} never writes \"{s}\"", c.name))
        .collect()
}

/// A Rust integer literal: decimal or `0x` hex, with `_` separators.
fn parse_literal(literal: &str) -> Option<u64> {
    let digits: String = literal.chars().filter(|c| *c != '_').collect();
    match digits.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => digits.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_parse_with_separators() {
        assert_eq!(parse_literal("0x8_0001"), Some(0x80001));
        assert_eq!(parse_literal("0xAAAA_AAAA"), Some(0xaaaa_aaaa));
        assert_eq!(parse_literal("42"), Some(42));
        assert_eq!(parse_literal("1 << 40"), None);
    }

    #[test]
    fn identifiers_of_the_abi_are_checked_in_enums_and_typed_constants() {
        let root =
            std::env::temp_dir().join(format!("corequic-registry-ids-{}", std::process::id()));
        std::fs::create_dir_all(&root).expect("dir");
        std::fs::write(
            root.join("model.rs"),
            "pub enum FieldId {\n    IsServer = 1,\n    Version = 3,\n}\n",
        )
        .expect("file");
        std::fs::write(root.join("sdk.rs"), "pub const IS_SERVER: FieldId = 1;\n").expect("file");
        let registry: Registry = toml::from_str(
            r#"
            [[range]]
            kind = "field"
            first = 1
            last = 0x3fff
            policy = "p"
            [[codepoint]]
            kind = "field"
            value = 1
            name = "is-server"
            since = "0.2.0"
            owner = "o"
            reference = "r"
            symbols = ["model.rs:FieldId::IsServer", "sdk.rs:IS_SERVER"]
            [[codepoint]]
            kind = "field"
            value = 2
            name = "version"
            owner = "o"
            reference = "r"
            symbols = ["model.rs:FieldId::Version"]
            "#,
        )
        .expect("registry");
        let problems = registry.check(&root);
        let _ = std::fs::remove_dir_all(&root);
        assert_eq!(
            problems,
            [
                "field `version`: no `since` version",
                "field `version`: model.rs:FieldId::Version is 0x3, the registry says 0x2",
            ],
        );
    }

    #[test]
    fn disagreements_are_reported() {
        let root = std::env::temp_dir().join(format!("corequic-registry-{}", std::process::id()));
        std::fs::create_dir_all(&root).expect("dir");
        std::fs::write(
            root.join("a.rs"),
            "pub const FRAME: u64 = 0x43;\nlog(\"hello\", &[(\"k\", v)]);\n",
        )
        .expect("file");
        let registry: Registry = toml::from_str(
            r#"
            [[range]]
            kind = "frame-type"
            first = 0x40
            last = 0x4f
            policy = "p"
            [[range]]
            kind = "frame-type"
            first = 0x48
            last = 0x50
            policy = "overlaps"
            [[codepoint]]
            kind = "frame-type"
            value = 0x42
            name = "wrong constant"
            owner = "o"
            reference = "r"
            symbols = ["a.rs:FRAME"]
            [[codepoint]]
            kind = "frame-type"
            value = 0x42
            name = "twice"
            owner = "o"
            reference = "r"
            [[codepoint]]
            kind = "frame-type"
            value = 0x99
            name = "outside"
            owner = "o"
            reference = "r"
            [[codepoint]]
            kind = "log-message"
            name = "hello"
            fields = ["k", "missing"]
            owner = "o"
            reference = "r"
            symbols = ["a.rs"]
            "#,
        )
        .expect("registry");
        let problems = registry.check(&root).join("\n");
        assert!(problems.contains("overlap"), "{problems}");
        assert!(
            problems.contains("a.rs:FRAME is 0x43, the registry says 0x42"),
            "{problems}"
        );
        assert!(problems.contains("0x42 is already allocated"), "{problems}");
        assert!(
            problems.contains("0x99 is in no frame-type range"),
            "{problems}"
        );
        assert!(problems.contains("never writes \"missing\""), "{problems}");
        assert!(!problems.contains("never writes \"k\""), "{problems}");
        let _ = std::fs::remove_dir_all(&root);
    }
}
