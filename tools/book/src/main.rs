//! The corequic book: the specification, the guides and the READMEs of the
//! repository, a requirements index and a status page, built with mdBook.
//!
//! * `corequic-book build --root DIR --out DIR [--interop FILE]` assembles
//!   the book's sources under `OUT/src` and renders it to `OUT/html`.
//! * `corequic-book check --book DIR [--chromium BIN]` checks every link and
//!   anchor of the rendered pages, and renders the front page and the status
//!   page in headless chromium (screenshots in `OUT/shots`).
//!
//! Every Markdown file of the repository becomes a page at its own path
//! (`README.md` as `index.md`), so the links between them keep working. A
//! link to another file of the repository copies that file into the book; a
//! link to a directory without a README gets a generated listing page. A
//! link that points to nothing fails the build, naming the page.

mod assemble;
mod check;
mod pages;

use anyhow::{Context, Result, bail};
use std::path::PathBuf;

const USAGE: &str = "usage:
  corequic-book build --root DIR --out DIR [--interop RESULTS_JSON]
  corequic-book check --book DIR [--chromium BIN]";

fn main() {
    if let Err(e) = run() {
        eprintln!("corequic-book: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((command, rest)) = args.split_first() else {
        bail!("{USAGE}");
    };
    let mut root = PathBuf::from(".");
    let mut out = PathBuf::from("target/book");
    let mut interop = None;
    let mut chromium = String::from("chromium");
    let mut it = rest.iter();
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .with_context(|| format!("{flag} needs a value\n{USAGE}"))?;
        match flag.as_str() {
            "--root" => root = PathBuf::from(value),
            "--out" | "--book" => out = PathBuf::from(value),
            "--interop" => interop = Some(PathBuf::from(value)),
            "--chromium" => chromium = value.clone(),
            _ => bail!("unknown option {flag}\n{USAGE}"),
        }
    }
    match command.as_str() {
        "build" => {
            let interop = interop.unwrap_or_else(|| root.join("docs/interop-example/results.json"));
            assemble::build(&root, &out, &interop)?;
            println!(
                "book: {} (open it in a browser)",
                out.join("html/index.html").display()
            );
            Ok(())
        }
        "check" => {
            let report = check::links(&out.join("html"))?;
            println!(
                "book: {} pages, {} links and anchors checked",
                report.pages, report.links
            );
            for shot in check::render(&chromium, &out)? {
                println!("book: rendered {}", shot.display());
            }
            Ok(())
        }
        _ => bail!("{USAGE}"),
    }
}
