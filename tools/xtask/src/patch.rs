//! The patch workflow of the hosts (`hosts/README.md`): every upstream crate
//! we change has a series `hosts/<host>/patches/<crate>/NNNN-<name>.patch`,
//! applied in name order to the pristine crate of its pin by
//! `tools/patch-crate.sh` (`make patches`, before any cargo command).
//!
//! * `patch edit <host>`: a git checkout of each of the host's pinned
//!   crates in `build/patch-edit/<crate>`, one commit for the pristine
//!   source (tag `pristine`) and one per patch, its message the patch's
//!   header. Edit, commit (or amend, or rebase), then
//! * `patch save <host>`: regenerate each series from its checkout, one
//!   patch per commit, named after the commit's subject, with the commit
//!   message as its header.
//! * `patch check`: every series has an exact pin in the workspace's
//!   `[workspace.dependencies]` (the one place pins are written) and points
//!   the workspace at `build/patched/<crate>` (a `[patch.crates-io]` entry
//!   or, for a stack that is not on crates.io, the pin's own `path`); the
//!   interop runner's `hosts.toml` names the pinned versions; and
//!   `build/patched/<crate>` is exactly pin + series (a hand edit there, or
//!   a stale copy, fails).
//!
//! A host whose crates are not on crates.io (neqo) has a file
//! `hosts/<host>/patches/source` naming the folder, relative to the
//! repository, that holds its pristine crates; `make patches` prepares it
//! first.

use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where `make patches` puts the patched crates.
const PATCHED: &str = "build/patched";
/// Where `patch edit` makes its checkouts.
const EDIT: &str = "build/patch-edit";

/// One upstream crate's patch series.
struct Series {
    host: String,
    krate: String,
    dir: PathBuf,
    /// Where the pristine crate is when it is not on crates.io.
    source: Option<PathBuf>,
}

impl Series {
    fn patches(&self) -> Result<Vec<PathBuf>> {
        let mut patches: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .with_context(|| format!("reading {}", self.dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "patch"))
            .collect();
        patches.sort();
        Ok(patches)
    }
}

/// Every series under `hosts/*/patches/*/`, by host then crate.
fn all_series(root: &Path) -> Result<Vec<Series>> {
    let mut series = Vec::new();
    for host in read_dirs(&root.join("hosts"))? {
        let patches = host.join("patches");
        if !patches.is_dir() {
            continue;
        }
        let source = match std::fs::read_to_string(patches.join("source")) {
            Ok(text) => Some(root.join(text.trim())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).context(format!("reading {}", patches.display())),
        };
        for dir in read_dirs(&patches)? {
            series.push(Series {
                host: file_name(&host),
                krate: file_name(&dir),
                dir,
                source: source.clone(),
            });
        }
    }
    Ok(series)
}

fn read_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    Ok(dirs)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn read_toml(path: &Path) -> Result<toml::Table> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.parse()
        .with_context(|| format!("parsing {}", path.display()))
}

/// The exact pins of `[workspace.dependencies]`: crate → version.
fn pins(manifest: &toml::Table) -> BTreeMap<String, String> {
    let deps = manifest
        .get("workspace")
        .and_then(|w| w.get("dependencies"))
        .and_then(|d| d.as_table());
    deps.into_iter()
        .flatten()
        .filter_map(|(name, dep)| {
            let version = match dep {
                toml::Value::String(v) => v.as_str(),
                other => other.get("version")?.as_str()?,
            };
            Some((name.clone(), version.strip_prefix('=')?.to_string()))
        })
        .collect()
}

/// The `path` of a crate's entry in `[workspace.dependencies]`.
fn path_of<'a>(manifest: &'a toml::Table, krate: &str) -> Option<&'a str> {
    manifest
        .get("workspace")?
        .get("dependencies")?
        .get(krate)?
        .get("path")?
        .as_str()
}

fn pin_of<'a>(pins: &'a BTreeMap<String, String>, krate: &str) -> Result<&'a str> {
    pins.get(krate).map(String::as_str).with_context(|| {
        format!("{krate} has a patch series but no exact pin (`=x.y.z`) in Cargo.toml's [workspace.dependencies]")
    })
}

fn run(cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn git(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .args([
            "-c",
            "user.name=corequic",
            "-c",
            "user.email=corequic@localhost",
        ])
        .args(["-c", "core.autocrlf=false", "-c", "commit.gpgsign=false"]);
    cmd
}

/// Apply pin + series into `out/<crate>` the way the build does.
fn apply(root: &Path, series: &Series, version: &str, out: &Path) -> Result<PathBuf> {
    run(Command::new(root.join("tools/patch-crate.sh"))
        .current_dir(root)
        .args([&series.krate, version])
        .arg(&series.dir)
        .arg(out)
        .args(&series.source))?;
    Ok(out.join(&series.krate))
}

/// The patch's header: the text before its first diff (a commit message),
/// or the file's name when it has none.
fn header(patch: &Path) -> Result<String> {
    let text =
        std::fs::read_to_string(patch).with_context(|| format!("reading {}", patch.display()))?;
    let head = text.split("\ndiff --git ").next().unwrap_or_default();
    let head = if text.starts_with("diff --git ") {
        ""
    } else {
        head.trim()
    };
    Ok(if head.is_empty() {
        let name = file_name(patch);
        let name = name.trim_end_matches(".patch");
        name.trim_start_matches(|c: char| c.is_ascii_digit())
            .trim_start_matches('-')
            .to_string()
    } else {
        head.to_string()
    })
}

/// `patch edit <host>`.
pub fn edit(root: &Path, host: &str) -> Result<()> {
    // git runs in the checkouts: every path it is given is absolute.
    let root = &root.canonicalize()?;
    let manifest = read_toml(&root.join("Cargo.toml"))?;
    let pins = pins(&manifest);
    let series: Vec<Series> = all_series(root)?
        .into_iter()
        .filter(|s| s.host == host)
        .collect();
    if series.is_empty() {
        bail!("hosts/{host}/patches/ has no patch series");
    }
    for s in &series {
        let version = pin_of(&pins, &s.krate)?;
        let dest = root.join(EDIT).join(&s.krate);
        if dest.exists() {
            bail!(
                "{} exists: `xtask patch save {host}` or remove it first",
                dest.display()
            );
        }
        // The pristine source: pin + an empty series.
        let scratch = root.join(EDIT).join(format!(".{}-pristine", s.krate));
        let _ = std::fs::remove_dir_all(&scratch);
        let empty = scratch.join("empty-series");
        std::fs::create_dir_all(&empty)?;
        let pristine = apply(
            root,
            &Series {
                host: s.host.clone(),
                krate: s.krate.clone(),
                dir: empty,
                source: s.source.clone(),
            },
            version,
            &scratch,
        )?;
        std::fs::rename(&pristine, &dest)?;
        std::fs::remove_dir_all(&scratch)?;
        let _ = std::fs::remove_file(dest.join(".corequic-patched"));
        run(git(&dest).args(["init", "-q"]))?;
        run(git(&dest).args(["add", "-A"]))?;
        run(git(&dest)
            .args(["commit", "-q", "-m"])
            .arg(format!("pristine {} {version}", s.krate)))?;
        run(git(&dest).args(["tag", "pristine"]))?;
        let patches = s.patches()?;
        for patch in &patches {
            run(git(&dest).args(["apply", "--whitespace=nowarn"]).arg(patch))
                .with_context(|| format!("{} does not apply", patch.display()))?;
            run(git(&dest).args(["add", "-A"]))?;
            run(git(&dest).args(["commit", "-q", "-m"]).arg(header(patch)?))?;
        }
        println!(
            "{}: {} {version} + {} patch(es), one commit each",
            dest.display(),
            s.krate,
            patches.len()
        );
    }
    println!("edit and commit there, then `xtask patch save {host}`");
    Ok(())
}

/// A file name for a patch from its commit subject: the subject without a
/// leading `<crate>: `, lower-case words joined by dashes.
fn slug(subject: &str) -> String {
    let subject = subject.split_once(": ").map_or(subject, |(_, s)| s);
    let words: Vec<String> = subject
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    let mut slug = String::new();
    for w in words {
        if !slug.is_empty() && slug.len() + 1 + w.len() > 48 {
            break;
        }
        if !slug.is_empty() {
            slug.push('-');
        }
        slug.push_str(&w);
    }
    slug
}

/// `patch save <host>`.
pub fn save(root: &Path, host: &str) -> Result<()> {
    let series: Vec<Series> = all_series(root)?
        .into_iter()
        .filter(|s| s.host == host)
        .collect();
    let mut saved = 0;
    for s in &series {
        let src = root.join(EDIT).join(&s.krate);
        if !src.exists() {
            continue;
        }
        if !run(git(&src).args(["status", "--porcelain"]))?
            .trim()
            .is_empty()
        {
            bail!(
                "{} has uncommitted changes: commit them first",
                src.display()
            );
        }
        let commits = run(git(&src).args(["rev-list", "--reverse", "pristine..HEAD"]))?;
        for old in s.patches()? {
            std::fs::remove_file(&old)?;
        }
        for (i, commit) in commits.split_whitespace().enumerate() {
            let message = run(git(&src).args(["log", "-1", "--format=%B", commit]))?;
            let message = message.trim();
            let subject = message.lines().next().unwrap_or_default();
            let diff = run(git(&src)
                .args(["diff", "--no-color", "--no-ext-diff"])
                .args(["--src-prefix=a/", "--dst-prefix=b/"])
                .arg(format!("{commit}^"))
                .arg(commit))?;
            let name = format!("{:04}-{}.patch", i + 1, slug(subject));
            let (added, removed) = diff.lines().fold((0, 0), |(a, r), l| {
                match (
                    l.starts_with('+') && !l.starts_with("+++"),
                    l.starts_with('-') && !l.starts_with("---"),
                ) {
                    (true, _) => (a + 1, r),
                    (_, true) => (a, r + 1),
                    _ => (a, r),
                }
            });
            std::fs::write(s.dir.join(&name), format!("{message}\n\n{diff}"))?;
            println!("{}/{name}: +{added} -{removed}", s.dir.display());
        }
        saved += 1;
    }
    if saved == 0 {
        bail!(
            "no checkout of hosts/{host}'s crates in {EDIT}: run `xtask patch edit {host}` first"
        );
    }
    println!("run `make patches` to rebuild {PATCHED}");
    Ok(())
}

/// Files under `dir`, relative, with their contents; the stamp, build
/// output and lock files that cargo writes there are not the crate's.
fn tree(dir: &Path) -> Result<BTreeMap<PathBuf, Vec<u8>>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) -> Result<()> {
        for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
            let path = entry?.path();
            let rel = path.strip_prefix(base)?.to_path_buf();
            let name = file_name(&path);
            if rel.components().count() == 1
                && matches!(name.as_str(), ".corequic-patched" | "target" | "Cargo.lock")
            {
                continue;
            }
            if path.is_dir() {
                walk(base, &path, out)?;
            } else {
                out.insert(rel, std::fs::read(&path)?);
            }
        }
        Ok(())
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out)?;
    Ok(out)
}

/// `patch check`: the problems found, one line each (empty: all agree).
pub fn check(root: &Path) -> Result<Vec<String>> {
    let manifest = read_toml(&root.join("Cargo.toml"))?;
    let pins = pins(&manifest);
    let patch_paths = manifest
        .get("patch")
        .and_then(|p| p.get("crates-io"))
        .and_then(|p| p.as_table())
        .cloned()
        .unwrap_or_default();
    let mut problems = Vec::new();
    let series = all_series(root)?;
    let scratch = root.join("build/patch-check");
    let _ = std::fs::remove_dir_all(&scratch);
    for s in &series {
        let Ok(version) = pin_of(&pins, &s.krate) else {
            problems.push(format!(
                "hosts/{}/patches/{krate}: no exact pin of {krate} in Cargo.toml's [workspace.dependencies]",
                s.host,
                krate = s.krate
            ));
            continue;
        };
        let want = format!("{PATCHED}/{}", s.krate);
        // A crates.io crate is patched; one that is not there is a path
        // dependency of its pin.
        let (table, path) = if s.source.is_some() {
            ("[workspace.dependencies]", path_of(&manifest, &s.krate))
        } else {
            (
                "[patch.crates-io]",
                patch_paths
                    .get(&s.krate)
                    .and_then(|p| p.get("path"))
                    .and_then(|p| p.as_str()),
            )
        };
        if path != Some(want.as_str()) {
            problems.push(format!(
                "Cargo.toml {table} {} must have path = \"{want}\"",
                s.krate
            ));
        }
        let fresh = apply(root, s, version, &scratch)?;
        let built = root.join(PATCHED).join(&s.krate);
        let (fresh, built_tree) = (tree(&fresh)?, tree(&built).unwrap_or_default());
        let differing: Vec<String> = fresh
            .keys()
            .chain(built_tree.keys())
            .filter(|f| fresh.get(*f) != built_tree.get(*f))
            .map(|f| f.display().to_string())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        if !differing.is_empty() {
            problems.push(format!(
                "{PATCHED}/{krate} is not {krate} {version} + hosts/{host}/patches/{krate}: {} file(s) differ ({}); \
                 `rm -rf {PATCHED}/{krate} && make patches` restores it, `xtask patch edit {host}` is how to change the series",
                differing.len(),
                differing.iter().take(5).cloned().collect::<Vec<_>>().join(", "),
                krate = s.krate,
                host = s.host,
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    // The interop runner names each host's stack and version.
    let hosts = read_toml(&root.join("interop-runner/hosts.toml"))?;
    for host in hosts
        .get("host")
        .and_then(|h| h.as_array())
        .into_iter()
        .flatten()
    {
        let Some(stack) = host.get("stack").and_then(|s| s.as_str()) else {
            continue;
        };
        if let Some((krate, version)) = stack.split_once(' ')
            && let Some(pin) = pins.get(krate)
            && pin != version
        {
            problems.push(format!(
                "interop-runner/hosts.toml says {stack}, Cargo.toml pins {krate} {pin}"
            ));
        }
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_drop_the_crate_and_stay_short() {
        assert_eq!(
            slug("quiche: closing-state answers"),
            "closing-state-answers"
        );
        assert_eq!(slug("Extension hooks"), "extension-hooks");
        let long =
            slug("quiche: answer the peer's packets in the closing state with the close again");
        assert!(long.len() <= 48, "{long}");
        assert!(long.starts_with("answer-the-peer-s-packets"));
    }

    #[test]
    fn pins_are_the_exact_versions_only() {
        let manifest: toml::Table = r#"
            [workspace.dependencies]
            quiche = { version = "=0.30.0", features = ["qlog"] }
            bytes = "1"
            anyhow = { version = "1" }
            exact = "=2.0.1"
        "#
        .parse()
        .expect("toml");
        let pins = pins(&manifest);
        assert_eq!(pins.get("quiche").map(String::as_str), Some("0.30.0"));
        assert_eq!(pins.get("exact").map(String::as_str), Some("2.0.1"));
        assert!(!pins.contains_key("bytes") && !pins.contains_key("anyhow"));
    }

    #[test]
    fn a_patch_without_a_header_is_named_by_its_file() {
        let dir = std::env::temp_dir().join(format!("xtask-header-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let bare = dir.join("0001-extension-hooks.patch");
        std::fs::write(&bare, "diff --git a/x b/x\n").expect("write");
        let with = dir.join("0002-fix.patch");
        std::fs::write(&with, "quiche: a fix\n\nWhy.\n\ndiff --git a/x b/x\n").expect("write");
        assert_eq!(header(&bare).expect("header"), "extension-hooks");
        assert_eq!(header(&with).expect("header"), "quiche: a fix\n\nWhy.");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
