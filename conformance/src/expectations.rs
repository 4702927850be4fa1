//! Per-host expectation files (`expectations/<host>.toml`): the cases a host
//! is known to fail, each with the requirement it breaks and why. A listed
//! case that passes is a stale expectation and fails the run, as in test262
//! and wasi-testsuite.

use serde::Deserialize;
use std::path::Path;

/// One known deviation.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Deviation {
    /// The case name.
    pub case: String,
    /// `client` or `server`; absent means every role.
    #[serde(default)]
    pub role: Option<String>,
    /// The requirement the host breaks.
    pub requirement: String,
    /// Why.
    pub reason: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    deviation: Vec<Deviation>,
}

/// A host's expectations.
#[derive(Debug, Clone, Default)]
pub struct Expectations {
    /// Its known deviations.
    pub deviations: Vec<Deviation>,
}

impl Expectations {
    /// Parse an expectation file's text.
    pub fn parse(text: &str) -> Result<Expectations, String> {
        let file: File = toml::from_str(text).map_err(|e| e.to_string())?;
        Ok(Expectations {
            deviations: file.deviation,
        })
    }

    /// Read an expectation file; a missing file means no deviations.
    pub fn read(path: &Path) -> Result<Expectations, String> {
        match std::fs::read_to_string(path) {
            Ok(text) => Expectations::parse(&text).map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Expectations::default()),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    /// The deviation that covers `case` in `role` (`""` for load-only).
    pub fn find(&self, case: &str, role: &str) -> Option<&Deviation> {
        self.deviations
            .iter()
            .find(|d| d.case == case && d.role.as_deref().is_none_or(|r| r == role))
    }
}

/// The coverage file (`coverage.toml`): requirements that cannot be tested
/// through an endpoint (with the reason and the test that covers them
/// instead), and the required ones still waiting for a case. `pending` may
/// only shrink: a pending requirement that a case cites fails the gate, so
/// coverage never drops and the list is kept honest.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoverageFile {
    /// Requirements checked elsewhere.
    #[serde(default, rename = "not-testable")]
    pub not_testable: Vec<NotTestable>,
    /// Required-level requirements without a case yet.
    #[serde(default)]
    pub pending: Vec<String>,
}

/// A requirement that cannot be checked through an endpoint.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NotTestable {
    /// Its ID.
    pub id: String,
    /// Why an endpoint cannot show it.
    pub reason: String,
    /// The test or check that covers it instead.
    pub covered_by: String,
}

impl CoverageFile {
    /// Read the coverage file.
    pub fn read(path: &Path) -> Result<CoverageFile, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deviation_without_a_role_covers_every_role() {
        let e = Expectations::parse(
            "[[deviation]]\ncase = \"fields.x\"\nrequirement = \"CQ-FIELD-9\"\nreason = \"r\"\n\
             [[deviation]]\ncase = \"send.y\"\nrole = \"server\"\nrequirement = \"CQ-SEND-8\"\nreason = \"r\"\n",
        )
        .expect("parses");
        assert!(e.find("fields.x", "client").is_some());
        assert!(e.find("fields.x", "server").is_some());
        assert!(e.find("send.y", "server").is_some());
        assert!(e.find("send.y", "client").is_none());
        assert!(e.find("other", "client").is_none());
    }

    #[test]
    fn unknown_keys_are_refused() {
        assert!(Expectations::parse("[[deviation]]\ncase = \"a\"\nwhy = \"b\"\n").is_err());
    }
}
