//! The semver gate of the WIT package (`xtask releases --check`).
//!
//! `releases/<version>/wit` is the frozen copy of every released version.
//! The package in `wit/` must either
//!
//! - declare a released version and be identical to its frozen copy, or
//! - declare a version that is not released yet, newer than every release.
//!   Then, against the newest release before it:
//!   - a *compatible* version (same major, and the same minor while the major
//!     is 0: `0.2.0` → `0.2.1`, `1.2.0` → `1.3.0`) must be a compatible
//!     change of the `plugin` world: a plugin built against the release must
//!     be a valid plugin of the new version. This is `wit-component`'s
//!     semver check: the new world may import more (new host calls) and
//!     types may not change shape; a new export (a routine every plugin
//!     would have to provide), a new enum case or record field fails it;
//!   - any version: every item carries `@since` (CQ-VER-2); an item that the
//!     release does not have carries `@since(version = <new version>)`; an
//!     item that it has keeps the `@since` it had, or, in a breaking version,
//!     may take the new version when it changed.
//!
//! Items are interfaces, worlds and what they contain: functions (resource
//! methods included), types (`use` included) and a world's imports and
//! exports.

use anyhow::{Context, Result, bail};
use semver::Version;
use std::collections::BTreeMap;
use std::path::Path;
use wit_parser::{PackageId, Resolve, Stability, WorldItem};

/// The world every plugin targets.
const WORLD: &str = "plugin";

/// Check `wit` against the releases frozen in `releases`; returns what it
/// found, for the log.
pub fn check(wit: &Path, releases: &Path) -> Result<String> {
    let (current, version) = super::wit_files(wit)?;
    let version = parse_version(&version, wit)?;
    let mut released = BTreeMap::new();
    for entry in
        std::fs::read_dir(releases).with_context(|| format!("reading {}", releases.display()))?
    {
        let dir = entry?.path();
        if !dir.is_dir() {
            continue;
        }
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (_, frozen_version) = super::wit_files(&dir.join("wit"))?;
        if frozen_version != name {
            bail!(
                "{}: the frozen WIT declares {frozen_version}",
                dir.display()
            );
        }
        released.insert(parse_version(&name, &dir)?, dir.join("wit"));
    }
    // The frozen releases themselves: each one a valid successor of the
    // one before it, so that a release frozen by hand cannot slip past the
    // gate once `wit/` has moved on.
    let chain: Vec<(&Version, &std::path::PathBuf)> = released.iter().collect();
    for pair in chain.windows(2) {
        let [(older, older_wit), (newer, newer_wit)] = pair else {
            continue;
        };
        evolution(older_wit, newer_wit)
            .with_context(|| format!("the released {newer} as a successor of {older}"))?;
    }
    let chain_note = match chain.as_slice() {
        [] | [_] => String::new(),
        all => format!(
            " (releases {} each follow from the one before)",
            all.iter()
                .map(|(v, _)| v.to_string())
                .collect::<Vec<_>>()
                .join(" → ")
        ),
    };
    if let Some(frozen) = released.get(&version) {
        let (frozen_files, _) = super::wit_files(frozen)?;
        if frozen_files != current {
            bail!(
                "{} differs from the released {version} ({}): a change to the WIT needs a new version (CQ-VER-3)",
                wit.display(),
                frozen.display()
            );
        }
        return Ok(format!(
            "{}: identical to the released {version}{chain_note}",
            wit.display()
        ));
    }
    if let Some((newest, _)) = released.last_key_value()
        && *newest > version
    {
        bail!(
            "{} declares {version}, older than the released {newest}: versions only grow",
            wit.display()
        );
    }
    let Some((previous, frozen)) = released.last_key_value() else {
        return Ok(format!("{}: {version}, no release yet", wit.display()));
    };
    evolution(frozen, wit)?;
    Ok(format!(
        "{}: {version} (not released yet) is a {} change from the released {previous}, and its new items carry @since({version}){chain_note}",
        wit.display(),
        if compatible(previous, &version) {
            "compatible"
        } else {
            "breaking"
        }
    ))
}

/// Whether a plugin built against `previous` must run on a host of `next`
/// (CQ-VER-3): the same major, and the same minor while the major is 0.
pub fn compatible(previous: &Version, next: &Version) -> bool {
    previous.major == next.major && (previous.major > 0 || previous.minor == next.minor)
}

/// Check the package in `next` as the successor of the one in `previous`.
pub fn evolution(previous: &Path, next: &Path) -> Result<()> {
    let mut resolve = Resolve::default();
    let (prev_pkg, _) = resolve
        .push_dir(previous)
        .with_context(|| format!("parsing {}", previous.display()))?;
    let (next_pkg, _) = resolve
        .push_dir(next)
        .with_context(|| format!("parsing {}", next.display()))?;
    let version = |pkg: PackageId| {
        resolve.packages[pkg]
            .name
            .version
            .clone()
            .context("the package has no version")
    };
    let (prev_version, next_version) = (version(prev_pkg)?, version(next_pkg)?);
    let breaking = !compatible(&prev_version, &next_version);

    let before = items(&resolve, prev_pkg);
    let mut problems = Vec::new();
    for (item, stability) in items(&resolve, next_pkg) {
        let Stability::Stable { since, .. } = &stability else {
            problems.push(format!("{item} has no @since (CQ-VER-2)"));
            continue;
        };
        match before.get(&item) {
            None if *since != next_version => problems.push(format!(
                "{item} is new in {next_version} but says @since(version = {since})"
            )),
            Some(Stability::Stable { since: was, .. })
                if since != was && !(breaking && *since == next_version) =>
            {
                problems.push(format!(
                    "{item} was @since(version = {was}) in {prev_version} and now says {since}"
                ))
            }
            _ => {}
        }
    }
    if !problems.is_empty() {
        bail!(
            "{}: @since does not match the releases:\n  {}",
            next.display(),
            problems.join("\n  ")
        );
    }
    if !breaking {
        let prev_world = resolve.select_world(&[prev_pkg], Some(WORLD))?;
        let next_world = resolve.select_world(&[next_pkg], Some(WORLD))?;
        wit_component::semver_check(resolve, prev_world, next_world).map_err(|e| {
            anyhow::anyhow!(
                "{} is not a compatible change from the released {prev_version}, which {next_version} must be (CQ-VER-3): {e:#}. \
                 A plugin built against {prev_version} would not load; a breaking change needs {}",
                next.display(),
                next_breaking(&prev_version)
            )
        })?;
    }
    Ok(())
}

/// The version a breaking change after `v` takes.
fn next_breaking(v: &Version) -> Version {
    if v.major == 0 {
        Version::new(0, v.minor + 1, 0)
    } else {
        Version::new(v.major + 1, 0, 0)
    }
}

fn parse_version(text: &str, origin: &Path) -> Result<Version> {
    let v = Version::parse(text)
        .with_context(|| format!("{}: {text:?} is not a version", origin.display()))?;
    if !v.pre.is_empty() || !v.build.is_empty() {
        bail!(
            "{}: {text}: releases have no pre-release or build suffix",
            origin.display()
        );
    }
    Ok(v)
}

/// Every versioned item of `pkg`, by a path that names it across versions.
fn items(resolve: &Resolve, pkg: PackageId) -> BTreeMap<String, Stability> {
    let mut out = BTreeMap::new();
    let package = &resolve.packages[pkg];
    for (name, &id) in &package.interfaces {
        let iface = &resolve.interfaces[id];
        out.insert(format!("interface {name}"), iface.stability.clone());
        for (f, func) in &iface.functions {
            out.insert(format!("function {name}.{f}"), func.stability.clone());
        }
        for (t, &ty) in &iface.types {
            out.insert(
                format!("type {name}.{t}"),
                resolve.types[ty].stability.clone(),
            );
        }
    }
    for (name, &id) in &package.worlds {
        let world = &resolve.worlds[id];
        out.insert(format!("world {name}"), world.stability.clone());
        let entries = world
            .imports
            .iter()
            .map(|e| ("import", e))
            .chain(world.exports.iter().map(|e| ("export", e)));
        for (direction, (key, item)) in entries {
            let stability = match item {
                WorldItem::Interface { stability, .. } => stability.clone(),
                WorldItem::Function(f) => f.stability.clone(),
                WorldItem::Type { id, .. } => resolve.types[*id].stability.clone(),
            };
            // Interfaces by their name in this package, not by their id.
            let key = match (key, item) {
                (wit_parser::WorldKey::Interface(_), WorldItem::Interface { id, .. }) => {
                    resolve.interfaces[*id].name.clone().unwrap_or_default()
                }
                _ => resolve.name_world_key(key),
            };
            out.insert(format!("world {name} {direction} {key}"), stability);
        }
    }
    out
}

/// A copy of a directory's `.wit` files in a fresh temporary directory
/// (for tests).
#[cfg(test)]
fn scratch(name: &str, files: &[(&str, String)]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("xtask-releases-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    for (file, text) in files {
        std::fs::write(dir.join(file), text).expect("write");
    }
    dir
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small package of the ABI's shape, at `version`, with extra
    /// `host` and `routines` functions and extra `types` text.
    fn package(
        version: &str,
        host: &str,
        routines: &str,
        types: &str,
    ) -> Vec<(&'static str, String)> {
        vec![(
            "plugin.wit",
            format!(
                "package core-quic:plugin@{version};\n\
                 @since(version = 0.2.0)\n\
                 interface types {{\n\
                     @since(version = 0.2.0)\n\
                     type field-id = u32;\n\
                     @since(version = 0.2.0)\n\
                     enum anchor {{ define, before, after }}\n\
                     {types}\n\
                 }}\n\
                 @since(version = 0.2.0)\n\
                 interface host {{\n\
                     @since(version = 0.2.0)\n\
                     use types.{{field-id, anchor}};\n\
                     @since(version = 0.2.0)\n\
                     get-field: func(field: field-id, at: anchor) -> u64;\n\
                     {host}\n\
                 }}\n\
                 @since(version = 0.2.0)\n\
                 interface routines {{\n\
                     @since(version = 0.2.0)\n\
                     init: func();\n\
                     {routines}\n\
                 }}\n\
                 @since(version = 0.2.0)\n\
                 world plugin {{\n\
                     @since(version = 0.2.0)\n\
                     import host;\n\
                     @since(version = 0.2.0)\n\
                     export routines;\n\
                 }}\n"
            ),
        )]
    }

    fn check_pair(name: &str, next: Vec<(&'static str, String)>) -> Result<()> {
        let prev = scratch(&format!("{name}-prev"), &package("0.2.0", "", "", ""));
        let next = scratch(&format!("{name}-next"), &next);
        let result = evolution(&prev, &next);
        let _ = std::fs::remove_dir_all(prev);
        let _ = std::fs::remove_dir_all(next);
        result
    }

    #[test]
    fn an_additive_patch_release_passes() {
        let host = "@since(version = 0.2.1)\nhas-field: func(field: field-id) -> bool;";
        let types = "@since(version = 0.2.1)\ntype error-code = u32;";
        check_pair("additive", package("0.2.1", host, "", types)).expect("compatible");
    }

    #[test]
    fn a_new_routine_every_plugin_would_have_to_export_fails_a_patch_release() {
        let routines = "@since(version = 0.2.1)\non-new-thing: func();";
        let e = check_pair("new-export", package("0.2.1", "", routines, "")).expect_err("breaking");
        let text = format!("{e:#}");
        assert!(
            text.contains("not a compatible change") && text.contains("0.3.0"),
            "{text}"
        );
        // The same change is fine as a breaking release.
        let routines = "@since(version = 0.3.0)\non-new-thing: func();";
        check_pair("new-export-minor", package("0.3.0", "", routines, ""))
            .expect("breaking release");
    }

    #[test]
    fn a_new_enum_case_fails_a_patch_release() {
        let changed = package("0.2.1", "", "", "").into_iter().map(|(f, t)| {
            (
                f,
                t.replace(
                    "enum anchor { define, before, after }",
                    "enum anchor { define, before, after, around }",
                ),
            )
        });
        let e = check_pair("enum-case", changed.collect()).expect_err("breaking");
        assert!(
            format!("{e:#}").contains("not a compatible change"),
            "{e:#}"
        );
    }

    #[test]
    fn new_items_need_since_of_the_new_version() {
        let without = "has-field: func(field: field-id) -> bool;";
        let e = check_pair("no-since", package("0.2.1", without, "", "")).expect_err("no @since");
        assert!(
            format!("{e:#}").contains("function host.has-field has no @since"),
            "{e:#}"
        );
        let old = "@since(version = 0.2.0)\nhas-field: func(field: field-id) -> bool;";
        let e = check_pair("old-since", package("0.2.1", old, "", "")).expect_err("wrong @since");
        assert!(
            format!("{e:#}").contains(
                "function host.has-field is new in 0.2.1 but says @since(version = 0.2.0)"
            ),
            "{e:#}"
        );
    }

    #[test]
    fn existing_items_keep_their_since() {
        let moved = package("0.2.1", "", "", "").into_iter().map(|(f, t)| {
            (
                f,
                t.replacen(
                    "@since(version = 0.2.0)\ninit",
                    "@since(version = 0.2.1)\ninit",
                    1,
                ),
            )
        });
        let e = check_pair("moved-since", moved.collect()).expect_err("history rewritten");
        assert!(
            format!("{e:#}").contains("function routines.init was @since(version = 0.2.0)"),
            "{e:#}"
        );
    }

    #[test]
    fn versions_are_compatible_within_a_minor_while_major_is_zero() {
        let v = |s: &str| Version::parse(s).expect("version");
        assert!(compatible(&v("0.2.0"), &v("0.2.1")));
        assert!(!compatible(&v("0.2.1"), &v("0.3.0")));
        assert!(compatible(&v("1.2.0"), &v("1.3.0")));
        assert!(!compatible(&v("1.9.0"), &v("2.0.0")));
        assert_eq!(next_breaking(&v("0.2.1")), v("0.3.0"));
        assert_eq!(next_breaking(&v("1.2.1")), v("2.0.0"));
    }

    /// A frozen release that is not a valid successor of the one before it
    /// fails the gate, even when `wit/` is identical to it.
    #[test]
    fn a_frozen_release_that_breaks_its_predecessor_fails_the_gate() {
        let root =
            std::env::temp_dir().join(format!("xtask-releases-chain-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let bad_routine = "@since(version = 0.2.1)\nshutdown: func();";
        for (version, routines) in [("0.2.0", ""), ("0.2.1", bad_routine)] {
            let dir = root.join("releases").join(version).join("wit");
            std::fs::create_dir_all(&dir).expect("dir");
            for (file, text) in package(version, "", routines, "") {
                std::fs::write(dir.join(file), text).expect("write");
            }
        }
        let wit = root.join("releases/0.2.1/wit");
        let e = check(&wit, &root.join("releases")).expect_err("a breaking frozen patch release");
        let _ = std::fs::remove_dir_all(&root);
        let text = format!("{e:#}");
        assert!(
            text.contains("the released 0.2.1 as a successor of 0.2.0")
                && text.contains("not a compatible change"),
            "{text}"
        );
    }

    /// The real ABI: a deliberately incompatible edit of `wit/` (a new
    /// `anchor` case, which every plugin would have to handle) released as a
    /// patch of the last release fails the gate, and the unchanged package
    /// passes.
    #[test]
    fn the_gate_fails_an_incompatible_edit_of_the_abi() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let releases = root.join("releases");
        let (files, version) = super::super::wit_files(&root.join("wit")).expect("wit");
        let released = releases.join(&version).join("wit");
        assert!(released.exists(), "the current ABI {version} is released");
        let current = Version::parse(&version).expect("version");
        let patch = Version::new(current.major, current.minor, current.patch + 1);
        let bump = |text: &String| {
            text.replace(
                &format!("package core-quic:plugin@{version};"),
                &format!("package core-quic:plugin@{patch};"),
            )
        };
        let unchanged: Vec<(&str, String)> =
            files.iter().map(|(f, t)| (f.as_str(), bump(t))).collect();
        let dir = scratch("abi-unchanged", &unchanged);
        evolution(&released, &dir).expect("the unchanged ABI is compatible with itself");
        let _ = std::fs::remove_dir_all(&dir);

        let edited: Vec<(&str, String)> = files
            .iter()
            .map(|(f, t)| {
                let t = bump(t);
                let t = t.replacen("enum anchor {", "enum anchor {\n        around,", 1);
                (f.as_str(), t)
            })
            .collect();
        assert!(
            edited.iter().any(|(_, t)| t.contains("around,")),
            "the edit applied"
        );
        let dir = scratch("abi-edited", &edited);
        let e = evolution(&released, &dir).expect_err("an incompatible edit");
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            format!("{e:#}").contains("not a compatible change"),
            "{e:#}"
        );
    }
}
