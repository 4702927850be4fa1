//! Checking the rendered book: every relative link reaches a file, every
//! fragment an `id` in its page; the front and status pages render.

use anyhow::{Result, bail};
use regex::Regex;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What [`links`] checked.
#[derive(Debug)]
pub struct LinkReport {
    /// HTML pages read.
    pub pages: usize,
    /// Links and anchors checked.
    pub links: usize,
}

/// The pages whose links are checked: the book's own, not mdBook's
/// `print.html` (every chapter again, with rewritten links) or `404.html`
/// (served from the site root), and not the copied example report.
fn checked(rel: &Path) -> bool {
    let name = rel.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name != "print.html" && name != "404.html" && !rel.starts_with("docs/interop-example")
}

/// Check every `href` and `src` of every page of `html`.
pub fn links(html: &Path) -> Result<LinkReport> {
    let href = Regex::new(r#"(?:href|src)="([^"]*)""#).expect("regex");
    let id = Regex::new(r#"\bid="([^"]*)""#).expect("regex");
    // Each page read once, its ids kept under its canonical path, which is
    // how a link's target is looked up.
    let mut pages = Vec::new();
    let mut ids: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    for page in html_pages(html)? {
        let text = std::fs::read_to_string(&page)?;
        ids.insert(
            page.canonicalize()?,
            id.captures_iter(&text).map(|c| c[1].to_string()).collect(),
        );
        pages.push((page, text));
    }
    let mut broken = Vec::new();
    let mut count = 0;
    for (page, text) in &pages {
        let rel = page.strip_prefix(html).unwrap_or(page);
        if !checked(rel) {
            continue;
        }
        for c in href.captures_iter(text) {
            let target = c[1].replace("&amp;", "&");
            if target.is_empty()
                || target.contains("://")
                || target.starts_with("mailto:")
                || target.starts_with("javascript:")
                || target.starts_with("data:")
            {
                continue;
            }
            count += 1;
            let (path, fragment) = match target.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (target.as_str(), None),
            };
            let path = path.split('?').next().unwrap_or("");
            let file = if path.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap_or(html).join(path)
            };
            let file = if file.is_dir() {
                file.join("index.html")
            } else {
                file
            };
            if !file.is_file() {
                broken.push(format!("{}: {target}: no such file", rel.display()));
                continue;
            }
            if let Some(fragment) = fragment.filter(|f| !f.is_empty()) {
                let known = file
                    .canonicalize()
                    .ok()
                    .and_then(|canonical| ids.get(&canonical))
                    .map(|set| set.contains(fragment));
                if known == Some(false) {
                    broken.push(format!("{}: {target}: no id `{fragment}`", rel.display()));
                }
            }
        }
    }
    if !broken.is_empty() {
        bail!(
            "{} broken link(s):\n  {}",
            broken.len(),
            broken.join("\n  ")
        );
    }
    Ok(LinkReport {
        pages: pages.len(),
        links: count,
    })
}

fn html_pages(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = crate::assemble::files_under(dir)?
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "html"))
        .collect();
    out.sort();
    Ok(out)
}

/// Render the front page and the status page in headless chromium: each
/// must show its text once scripts ran; a screenshot of each goes to
/// `book/shots/`.
pub fn render(chromium: &str, book: &Path) -> Result<Vec<PathBuf>> {
    let shots = book.join("shots");
    std::fs::create_dir_all(&shots)?;
    let mut out = Vec::new();
    for (page, must_show) in [
        ("index.html", ["corequic", "Specification"]),
        ("status.html", ["Conformance claims", "Required 100 %"]),
    ] {
        let shot = shots.join(page.replace(".html", ".png"));
        let dom = corequic_interop::browser::render_with_chromium(
            chromium,
            &book.join("html").join(page),
            &shot,
        )
        .map_err(anyhow::Error::msg)?;
        for text in must_show {
            if !dom.contains(text) {
                bail!("{page} rendered without `{text}`");
            }
        }
        if !std::fs::metadata(&shot).is_ok_and(|m| m.len() > 10_000) {
            bail!("{page}: no screenshot at {}", shot.display());
        }
        out.push(shot);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_files_and_anchors_are_reported() {
        let dir = std::env::temp_dir().join(format!("corequic-book-check-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("spec")).expect("dir");
        std::fs::write(
            dir.join("spec/a.html"),
            r#"<p id="CQ-X-1"><a href="b.html#CQ-X-1">ok</a> <a href="../index.html">ok</a></p>"#,
        )
        .expect("page");
        std::fs::write(dir.join("spec/b.html"), r#"<p id="CQ-X-1"></p>"#).expect("page");
        std::fs::write(
            dir.join("index.html"),
            r#"<a href="spec/a.html#CQ-X-1">ok</a>"#,
        )
        .expect("page");
        let report = links(&dir).expect("every link resolves");
        assert_eq!(report.links, 3);

        std::fs::write(
            dir.join("index.html"),
            r#"<a href="spec/a.html#CQ-X-2">no id</a> <a href="spec/c.html">no file</a>"#,
        )
        .expect("page");
        let error = links(&dir).expect_err("two broken links").to_string();
        assert!(error.contains("no id `CQ-X-2`"), "{error}");
        assert!(error.contains("spec/c.html: no such file"), "{error}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
