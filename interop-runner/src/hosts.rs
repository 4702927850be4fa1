//! Host discovery by configuration: `hosts.toml` names each host and its
//! endpoint binary; the runner uses the hosts whose binary exists.

use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One `[[host]]` entry of `hosts.toml`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct HostEntry {
    /// The host's name in the matrix (`quinn`, `s2n-quic`, `quiche`).
    pub name: String,
    /// The endpoint binary's file name.
    pub binary: String,
    /// The cargo package that builds it.
    pub package: String,
    /// The upstream stack and its pinned version, e.g. `quinn-proto 0.11.19`
    /// (named in the host's conformance claim).
    #[serde(default)]
    pub stack: String,
}

#[derive(Debug, Deserialize)]
struct HostsFile {
    host: Vec<HostEntry>,
}

/// Parse the text of a hosts file.
pub fn parse_hosts(text: &str) -> Result<Vec<HostEntry>, String> {
    let file: HostsFile = toml::from_str(text).map_err(|e| e.to_string())?;
    let mut seen = std::collections::HashSet::new();
    for h in &file.host {
        if !seen.insert(h.name.clone()) {
            return Err(format!("host `{}` is listed twice", h.name));
        }
    }
    Ok(file.host)
}

/// A host that takes part in a run.
#[derive(Debug, Clone)]
pub struct Host {
    /// Its name.
    pub name: String,
    /// The endpoint binary.
    pub binary: PathBuf,
}

/// The hosts to run: those named in `wanted` (all must exist), or else every
/// configured host whose binary is in `bin_dir`.
pub fn select_hosts(
    entries: &[HostEntry],
    bin_dir: &Path,
    wanted: Option<&[String]>,
) -> Result<Vec<Host>, String> {
    let host = |e: &HostEntry| Host {
        name: e.name.clone(),
        binary: bin_dir.join(&e.binary),
    };
    match wanted {
        Some(names) => names
            .iter()
            .map(|n| {
                let e = entries
                    .iter()
                    .find(|e| &e.name == n)
                    .ok_or_else(|| format!("host `{n}` is not in the hosts file"))?;
                let h = host(e);
                if h.binary.is_file() {
                    Ok(h)
                } else {
                    Err(format!(
                        "host `{n}`: no endpoint binary at {}",
                        h.binary.display()
                    ))
                }
            })
            .collect(),
        None => Ok(entries
            .iter()
            .map(host)
            .filter(|h| h.binary.is_file())
            .collect()),
    }
}

/// The test name used to check that an endpoint reports unknown tests.
pub const UNKNOWN_TEST: &str = "corequic-interop-no-such-test";

/// Whether the endpoint exits with 127 for an unknown test (ENDPOINT.md).
pub fn answers_unsupported(host: &Host) -> Result<bool, String> {
    let status = Command::new(&host.binary)
        .args(["--role", "server", "--addr", "127.0.0.1:9", "--test"])
        .arg(UNKNOWN_TEST)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("{}: {e}", host.binary.display()))?;
    Ok(status.code() == Some(corequic_contract::EXIT_UNSUPPORTED))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checked_in_hosts_file_parses() {
        let text = include_str!("../hosts.toml");
        let hosts = parse_hosts(text).expect("valid hosts.toml");
        let names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
        assert!(names.contains(&"quinn"), "{names:?}");
        assert!(hosts.iter().any(|h| h.binary == "quinn-endpoint"));
    }

    #[test]
    fn hosts_are_picked_by_the_binaries_that_exist() {
        let dir = std::env::temp_dir().join(format!("interop-hosts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("a-endpoint"), b"").expect("file");
        let entries = parse_hosts(
            "[[host]]\nname = \"a\"\nbinary = \"a-endpoint\"\npackage = \"pa\"\n\
             [[host]]\nname = \"b\"\nbinary = \"b-endpoint\"\npackage = \"pb\"\n",
        )
        .expect("valid");
        let found = select_hosts(&entries, &dir, None).expect("select");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].name, "a");
        let err = select_hosts(&entries, &dir, Some(&["b".to_string()])).unwrap_err();
        assert!(err.contains("no endpoint binary"), "{err}");
        let err = select_hosts(&entries, &dir, Some(&["c".to_string()])).unwrap_err();
        assert!(err.contains("not in the hosts file"), "{err}");
        assert!(parse_hosts("[[host]]\nname = \"a\"\nbinary = \"x\"\npackage = \"p\"\n[[host]]\nname = \"a\"\nbinary = \"y\"\npackage = \"p\"\n").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
