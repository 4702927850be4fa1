//! Loading and validating the case files (`cases/*.txtpb`, protobuf text
//! format of `CaseFile`).

use crate::proto::{Case, CaseFile, Level, Role};
use crate::spec::Requirement;
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// A case and the category of its file.
#[derive(Debug, Clone)]
pub struct LoadedCase {
    /// The case.
    pub case: Case,
    /// Its file's category.
    pub category: String,
}

impl LoadedCase {
    /// The roles the subject takes, in run order.
    pub fn roles(&self) -> Vec<Role> {
        if self.case.load_only {
            return vec![Role::ROLE_UNSPECIFIED];
        }
        let roles: Vec<Role> = self
            .case
            .roles
            .iter()
            .filter_map(|r| r.enum_value().ok())
            .collect();
        if roles.is_empty() {
            vec![Role::ROLE_CLIENT, Role::ROLE_SERVER]
        } else {
            roles
        }
    }

    /// The case's level.
    pub fn level(&self) -> Level {
        self.case.level.enum_value_or_default()
    }
}

/// The categories a case file may have (conformance/README.md).
pub const CATEGORIES: [&str; 9] = [
    "loading",
    "routines",
    "fields",
    "host-calls",
    "permissions",
    "limits",
    "send",
    "receive",
    "rfc9000",
];

/// Parse one case file's text.
pub fn parse(name: &str, text: &str) -> Result<CaseFile, String> {
    protobuf::text_format::parse_from_str::<CaseFile>(text).map_err(|e| format!("{name}: {e}"))
}

/// Every case of `dir`, in file and then case order.
pub fn load_dir(dir: &Path) -> Result<Vec<LoadedCase>, String> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txtpb"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for path in files {
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let file = parse(&path.display().to_string(), &text)?;
        for case in file.case {
            cases.push(LoadedCase {
                case,
                category: file.category.clone(),
            });
        }
    }
    Ok(cases)
}

/// The strongest level among some requirements.
pub fn strongest(levels: impl IntoIterator<Item = Level>) -> Level {
    let rank = |l: Level| match l {
        Level::LEVEL_REQUIRED => 3,
        Level::LEVEL_RECOMMENDED => 2,
        Level::LEVEL_OPTIONAL => 1,
        Level::LEVEL_UNSPECIFIED => 0,
    };
    levels
        .into_iter()
        .max_by_key(|l| rank(*l))
        .unwrap_or(Level::LEVEL_UNSPECIFIED)
}

/// Check the cases against each other and the spec: unique names prefixed
/// by their category, known categories, cited requirements that exist, and
/// a level equal to the strongest level of the cited requirements.
pub fn validate(cases: &[LoadedCase], spec: &[Requirement]) -> Result<(), Vec<String>> {
    let levels: HashMap<&str, Level> = spec.iter().map(|r| (r.id.as_str(), r.level)).collect();
    let mut problems = Vec::new();
    let mut names = HashSet::new();
    for c in cases {
        let name = &c.case.name;
        if !CATEGORIES.contains(&c.category.as_str()) {
            problems.push(format!("{name}: unknown category `{}`", c.category));
        }
        if !name.starts_with(&format!("{}.", c.category)) {
            problems.push(format!(
                "{name}: the name must start with `{}.`",
                c.category
            ));
        }
        if !names.insert(name.clone()) {
            problems.push(format!("{name}: defined twice"));
        }
        if c.case.requirements.is_empty() {
            problems.push(format!("{name}: cites no requirement"));
        }
        let mut cited = Vec::new();
        for id in &c.case.requirements {
            match levels.get(id.as_str()) {
                Some(level) => cited.push(*level),
                None => problems.push(format!("{name}: cites {id}, which the spec lacks")),
            }
        }
        let expected = strongest(cited);
        if c.level() != expected {
            problems.push(format!(
                "{name}: level {:?}, but its strongest requirement is {:?}",
                c.level(),
                expected
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}
