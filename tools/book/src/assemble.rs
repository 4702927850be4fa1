//! Assembling the book's sources from the repository, and rendering them.

use crate::pages;
use anyhow::{Context, Result, bail};
use regex::{Captures, Regex};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

/// Directories never searched for pages or listed.
const SKIPPED_DIRS: [&str; 3] = ["target", "build", "node_modules"];

/// The order of the book's parts: pages under these top-level directories,
/// then every other directory's, then the repository listings.
const PARTS: [(&str, &str); 8] = [
    ("spec", "Specification"),
    ("docs", "Guides"),
    ("conformance", "Conformance kit"),
    ("hosts", "Hosts"),
    ("plugins", "Plugins"),
    ("interop-runner", "Interop runner"),
    ("wit", "WIT"),
    ("releases", "Released versions"),
];

/// What the link rewriting found: files to copy, directories to list, and
/// links that point to nothing.
#[derive(Default)]
struct Links {
    assets: BTreeSet<PathBuf>,
    listings: BTreeSet<PathBuf>,
    broken: Vec<String>,
}

/// Build the book of the repository at `root` into `out` (`out/src`,
/// `out/html`); `interop` is the results JSON the status page shows.
pub fn build(root: &Path, out: &Path, interop: &Path) -> Result<()> {
    let src = out.join("src");
    if out.exists() {
        std::fs::remove_dir_all(out).with_context(|| format!("removing {}", out.display()))?;
    }
    std::fs::create_dir_all(&src)?;
    let pages = markdown_files(root)?;
    let page_set: BTreeSet<PathBuf> = pages.iter().cloned().collect();
    let mut links = Links::default();
    let mut titles = BTreeMap::new();
    for page in &pages {
        let text = std::fs::read_to_string(root.join(page))
            .with_context(|| format!("reading {}", page.display()))?;
        titles.insert(page.clone(), title(page, &text));
        let mut text = rewrite_links(root, page, &text, &page_set, &mut links);
        if page.starts_with("spec") {
            text = anchor_requirements(&text);
        }
        write(&src.join(dest(root, page)), &text)?;
    }
    let mut listing_pages = Vec::new();
    for dir in links.listings.clone() {
        let page = dir.join("index.md");
        let text = listing(root, &dir, &page_set, &mut links.assets)?;
        write(&src.join(&page), &text)?;
        listing_pages.push((page, format!("{}/", dir.display())));
    }
    if !links.broken.is_empty() {
        bail!(
            "{} link(s) point to nothing:\n  {}",
            links.broken.len(),
            links.broken.join("\n  ")
        );
    }
    // The registry that the registry page is rendered from.
    links.assets.insert(PathBuf::from("spec/registry.toml"));
    // The example report that the status page links, whole.
    let report_dir = interop.parent().unwrap_or(Path::new("."));
    for file in files_under(report_dir)? {
        if let Ok(rel) = file.strip_prefix(root) {
            links.assets.insert(rel.to_path_buf());
        }
    }
    for asset in &links.assets {
        if asset.extension().is_some_and(|e| e == "md") {
            continue;
        }
        let to = src.join(asset);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::copy(root.join(asset), &to)
            .with_context(|| format!("copying {}", asset.display()))?;
    }
    let report_page = interop
        .strip_prefix(root)
        .ok()
        .and_then(|rel| rel.parent())
        .map(|dir| dir.join("index.html"));
    write(
        &src.join("status.md"),
        &pages::status(root, interop, report_page.as_deref())?,
    )?;
    write(&src.join("requirements.md"), &pages::requirements(root)?)?;
    write(&src.join("registry.md"), &pages::registry(root)?)?;
    write(
        &src.join("SUMMARY.md"),
        &summary(root, &pages, &titles, &listing_pages)?,
    )?;
    write(&out.join("book.toml"), BOOK_TOML)?;
    let book = mdbook_driver::MDBook::load(out).context("loading the book")?;
    book.build().context("rendering the book")?;
    Ok(())
}

/// `README.md` becomes `index.md`, the page a directory opens with, unless
/// the directory holds an `index.html` of its own (an example report).
fn dest(root: &Path, page: &Path) -> PathBuf {
    let dir = page.parent().unwrap_or(Path::new(""));
    if page.file_name().is_some_and(|n| n == "README.md")
        && !root.join(dir).join("index.html").exists()
    {
        dir.join("index.md")
    } else {
        page.to_path_buf()
    }
}

const BOOK_TOML: &str = r#"[book]
title = "corequic: a plugin ABI for QUIC"
language = "en"
src = "src"

[build]
build-dir = "html"
# README.md pages are renamed here, not by mdBook's index preprocessor.
use-default-preprocessors = false
create-missing = false

[output.html]
no-section-label = true

[output.html.search]
enable = true
"#;

fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn skipped(name: &str) -> bool {
    name.starts_with('.') || SKIPPED_DIRS.contains(&name)
}

/// Every `.md` file under `root`, relative, sorted.
fn markdown_files(root: &Path) -> Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = files_under(root)?
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .filter_map(|p| p.strip_prefix(root).ok().map(Path::to_path_buf))
        .collect();
    out.sort();
    Ok(out)
}

/// Every file under `dir`, skipping hidden and build directories.
pub(crate) fn files_under(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if skipped(&name) {
                continue;
            }
            let path = entry.path();
            if entry.file_type()?.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    Ok(out)
}

/// `base` joined with `rel`, with `.` and `..` resolved; `None` if it
/// leaves the repository.
fn normalize(base: &Path, rel: &str) -> Option<PathBuf> {
    let mut parts: Vec<String> = Vec::new();
    for c in base.join(rel).components() {
        match c {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(parts.iter().collect())
}

/// The path from directory `from` to `to`, both relative to the book.
fn relative(from: &Path, to: &Path) -> String {
    let from: Vec<_> = from.components().collect();
    let to_parts: Vec<_> = to.components().collect();
    let common = from
        .iter()
        .zip(&to_parts)
        .take_while(|(a, b)| a == b)
        .count();
    let mut out: Vec<String> = vec!["..".into(); from.len() - common];
    out.extend(
        to_parts[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    out.join("/")
}

/// Rewrite the relative links of `page` for the book (see the crate
/// documentation); links in fenced code blocks are left alone.
fn rewrite_links(
    root: &Path,
    page: &Path,
    text: &str,
    pages: &BTreeSet<PathBuf>,
    links: &mut Links,
) -> String {
    let inline = Regex::new(r"\]\(([^()\s]+)\)").expect("regex");
    let reference = Regex::new(r"^(\s*\[[^\]]+\]:\s*)(\S+)").expect("regex");
    let page_dir = page.parent().unwrap_or(Path::new("")).to_path_buf();
    let dest_dir = dest(root, page)
        .parent()
        .unwrap_or(Path::new(""))
        .to_path_buf();
    let mut fenced = false;
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced {
            out.push_str(line);
            continue;
        }
        let mut fix = |target: &str| -> String {
            rewrite_target(root, page, &page_dir, &dest_dir, target, pages, links)
        };
        let line = inline.replace_all(line, |c: &Captures| format!("]({})", fix(&c[1])));
        let line = reference.replace(&line, |c: &Captures| format!("{}{}", &c[1], fix(&c[2])));
        out.push_str(&line);
    }
    out
}

fn rewrite_target(
    root: &Path,
    page: &Path,
    page_dir: &Path,
    dest_dir: &Path,
    target: &str,
    pages: &BTreeSet<PathBuf>,
    links: &mut Links,
) -> String {
    if target.starts_with('#') || target.contains("://") || target.starts_with("mailto:") {
        return target.to_string();
    }
    let (path, fragment) = match target.split_once('#') {
        Some((p, f)) => (p, format!("#{f}")),
        None => (target, String::new()),
    };
    let Some(resolved) = normalize(page_dir, path) else {
        links.broken.push(format!(
            "{}: {target} leaves the repository",
            page.display()
        ));
        return target.to_string();
    };
    let on_disk = root.join(&resolved);
    if on_disk.is_dir() {
        let readme = resolved.join("README.md");
        let index = if pages.contains(&readme) {
            dest(root, &readme)
        } else {
            links.listings.insert(resolved.clone());
            resolved.join("index.md")
        };
        return format!("{}{fragment}", relative(dest_dir, &index));
    }
    if pages.contains(&resolved) {
        return format!("{}{fragment}", relative(dest_dir, &dest(root, &resolved)));
    }
    if on_disk.is_file() {
        links.assets.insert(resolved.clone());
        return format!("{}{fragment}", relative(dest_dir, &resolved));
    }
    links
        .broken
        .push(format!("{}: {target} points to nothing", page.display()));
    target.to_string()
}

/// Each requirement paragraph of the spec gets an anchor named by its ID.
fn anchor_requirements(text: &str) -> String {
    let id = Regex::new(r"(?m)^\*\*(CQ-[A-Z]+-\d+)\*\*").expect("regex");
    id.replace_all(text, r#"<a id="$1"></a>**$1**"#)
        .into_owned()
}

/// A generated page listing the files of a directory that has no README.
fn listing(
    root: &Path,
    dir: &Path,
    pages: &BTreeSet<PathBuf>,
    assets: &mut BTreeSet<PathBuf>,
) -> Result<String> {
    let mut entries: Vec<(String, bool)> = std::fs::read_dir(root.join(dir))?
        .flatten()
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, e.file_type().is_ok_and(|t| t.is_dir()))
        })
        .filter(|(name, _)| !skipped(name))
        .collect();
    entries.sort();
    let mut text = format!(
        "# `{}/`\n\nThe files of this directory of the repository.\n\n",
        dir.display()
    );
    for (name, is_dir) in entries {
        let path = dir.join(&name);
        if is_dir {
            let readme = path.join("README.md");
            if pages.contains(&readme) {
                let link = relative(dir, &dest(root, &readme));
                text.push_str(&format!("- [`{name}/`]({link})\n"));
            } else {
                text.push_str(&format!("- `{name}/`\n"));
            }
        } else if pages.contains(&path) {
            let link = relative(dir, &dest(root, &path));
            text.push_str(&format!("- [`{name}`]({link})\n"));
        } else {
            assets.insert(path);
            text.push_str(&format!("- [`{name}`]({name})\n"));
        }
    }
    Ok(text)
}

/// The title of a page: its first `# ` heading, else its path.
fn title(page: &Path, text: &str) -> String {
    text.lines()
        .find_map(|l| {
            l.strip_prefix("# ")
                .map(|h| h.replace('`', "").trim().to_string())
        })
        .unwrap_or_else(|| page.display().to_string())
}

/// SUMMARY.md: the front page, status and requirements index, then a part
/// per top-level directory (its README first), then the listings.
fn summary(
    root: &Path,
    pages: &[PathBuf],
    titles: &BTreeMap<PathBuf, String>,
    listings: &[(PathBuf, String)],
) -> Result<String> {
    let title = |page: &Path| {
        titles
            .get(page)
            .cloned()
            .unwrap_or_else(|| page.display().to_string())
    };
    let escape = |t: &str| t.replace('[', "\\[").replace(']', "\\]");
    let mut text = String::from("# Summary\n\n");
    let front = PathBuf::from("README.md");
    if pages.contains(&front) {
        text.push_str(&format!("[{}](index.md)\n\n", escape(&title(&front))));
    }
    text.push_str(
        "- [Status](status.md)\n- [Requirements index](requirements.md)\n- [Codepoint registry](registry.md)\n",
    );
    let top = |p: &Path| {
        p.components()
            .next()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
    };
    let mut parts: Vec<(String, String)> = PARTS
        .iter()
        .map(|(d, t)| (d.to_string(), t.to_string()))
        .collect();
    let mut others: BTreeSet<String> = pages
        .iter()
        .filter(|p| p.components().count() > 1)
        .filter_map(|p| top(p))
        .collect();
    for (d, _) in PARTS {
        others.remove(d);
    }
    parts.extend(others.into_iter().map(|d| (d.clone(), d)));
    for (dir, part_title) in parts {
        let mut in_part: Vec<&PathBuf> = pages
            .iter()
            .filter(|p| p.components().count() > 1 && top(p).as_deref() == Some(dir.as_str()))
            .collect();
        if in_part.is_empty() {
            continue;
        }
        // The part's own README first, then by path (a README before its
        // directory's other pages).
        in_part.sort_by_key(|p| {
            let depth = p.components().count();
            let is_readme = p.file_name().is_some_and(|n| n == "README.md");
            (
                !(depth == 2 && is_readme),
                p.parent().map(Path::to_path_buf),
                !is_readme,
                p.to_path_buf(),
            )
        });
        text.push_str(&format!("\n# {part_title}\n\n"));
        for page in in_part {
            let depth = page.components().count();
            let is_readme = page.file_name().is_some_and(|n| n == "README.md");
            let indent = if depth == 2 && is_readme { "" } else { "  " };
            text.push_str(&format!(
                "{indent}- [{}]({})\n",
                escape(&title(page)),
                dest(root, page).display()
            ));
        }
    }
    if !listings.is_empty() {
        text.push_str("\n# Repository files\n\n");
        for (page, name) in listings {
            text.push_str(&format!("- [`{name}`]({})\n", page.display()));
        }
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_climb_to_the_common_directory() {
        assert_eq!(
            relative(Path::new("docs"), Path::new("spec/01.md")),
            "../spec/01.md"
        );
        assert_eq!(
            relative(Path::new(""), Path::new("spec/index.md")),
            "spec/index.md"
        );
        assert_eq!(relative(Path::new("a/b"), Path::new("a/c.md")), "../c.md");
    }

    #[test]
    fn links_may_not_leave_the_repository() {
        assert_eq!(
            normalize(Path::new("docs"), "../spec/x.md"),
            Some(PathBuf::from("spec/x.md"))
        );
        assert_eq!(normalize(Path::new("docs"), "../../x.md"), None);
    }

    #[test]
    fn links_are_mapped_to_pages_assets_and_listings_or_reported() {
        let root = std::env::temp_dir().join(format!("corequic-book-links-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for dir in ["docs", "spec", "wit", "tools"] {
            std::fs::create_dir_all(root.join(dir)).expect("dir");
        }
        std::fs::write(root.join("spec/README.md"), "# Spec\n").expect("page");
        std::fs::write(root.join("wit/host.wit"), "package x;\n").expect("file");
        let pages: BTreeSet<PathBuf> =
            [PathBuf::from("docs/a.md"), PathBuf::from("spec/README.md")].into();
        let mut links = Links::default();
        let text = "[s](../spec/README.md#CQ-A-1) [w](../wit/host.wit) [d](../wit/) \
                    [r](../tools/) [x](missing.md) [u](https://example.org)\n\
                    ```\n[code](nowhere.md)\n```\n";
        let out = rewrite_links(&root, Path::new("docs/a.md"), text, &pages, &mut links);
        assert!(out.contains("[s](../spec/index.md#CQ-A-1)"), "{out}");
        assert!(out.contains("[w](../wit/host.wit)"), "{out}");
        assert!(out.contains("[d](../wit/index.md)"), "{out}");
        assert!(
            out.contains("[code](nowhere.md)"),
            "fenced code is left alone: {out}"
        );
        assert!(links.assets.contains(Path::new("wit/host.wit")));
        assert!(links.listings.contains(Path::new("wit")));
        assert_eq!(links.broken.len(), 1, "{:?}", links.broken);
        assert!(links.broken[0].contains("missing.md points to nothing"));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn requirement_paragraphs_get_anchors() {
        let text = "**CQ-LOAD-7** The host MUST…\n\nSee **CQ-LOAD-7** inline.\n";
        let out = anchor_requirements(text);
        assert!(out.starts_with(r#"<a id="CQ-LOAD-7"></a>**CQ-LOAD-7**"#));
        assert_eq!(out.matches("<a id=").count(), 1);
    }
}
