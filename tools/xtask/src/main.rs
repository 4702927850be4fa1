//! Build helpers for corequic.
//!
//! * `componentize <core.wasm> <out.wasm>` turns a plugin's core module (built
//!   for `wasm32-unknown-unknown`, with the component type section that
//!   `wit-bindgen` embeds) into a component. This is what
//!   `wasm-tools component new` does, without installing that CLI, then
//!   drops its custom sections, lays it out with two core instances instead
//!   of three ([`relayout`]) and shortens the names it uses only for its own
//!   wiring ([`minify`]); the component's type stays the same.
//! * `wit-doc <wit-dir> <out.md>` renders the markdown reference of the WIT
//!   package; `wit-doc --check <wit-dir> <out.md>` fails when `out.md` is stale.
//! * `registry --check <registry.toml>` fails when the codepoint registry and
//!   the repository disagree (`corequic_registry::Registry::check`).
//! * `releases --check <wit-dir> <releases-dir>` is the semver gate
//!   ([`releases`]): the WIT package equals the frozen copy of the version it
//!   declares, or it declares a new version and changes the newest release
//!   as that version allows, with `@since` on every new item.
//! * `c-bindings <wit-dir> <out-dir>` writes wit-bindgen's C bindings of the
//!   `plugin` world (`plugin.h`, `plugin.c` and `plugin_component_type.o`)
//!   for plugins written in C, and `plugin_abi_version.h`, which defines
//!   `COREQUIC_ABI_VERSION` as the package's version for their manifests.
//! * `patch edit <host>`, `patch save <host>` and `patch check`: the hosts'
//!   patch workflow ([`patch`]).

mod minify;
mod patch;
mod relayout;
mod releases;
mod witdoc;

use anyhow::{Context, Result, bail};
use std::path::Path;

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["componentize", input, output] => componentize(Path::new(input), Path::new(output)),
        ["wit-doc", wit, out] => {
            let text = witdoc::render(Path::new(wit))?;
            std::fs::write(out, text).with_context(|| format!("writing {out}"))
        }
        ["wit-doc", "--check", wit, out] => {
            let text = witdoc::render(Path::new(wit))?;
            let current = std::fs::read_to_string(out).unwrap_or_default();
            if current != text {
                bail!("{out} is stale: run `make wit-doc` and commit the result");
            }
            Ok(())
        }
        ["registry", "--check", path] => {
            let registry =
                corequic_registry::Registry::load(Path::new(path)).map_err(anyhow::Error::msg)?;
            let problems = registry.check(Path::new("."));
            if !problems.is_empty() {
                bail!(
                    "{path} and the repository disagree:\n  {}",
                    problems.join("\n  ")
                );
            }
            println!(
                "{path}: {} codepoints agree with the repository",
                registry.codepoints.len()
            );
            Ok(())
        }
        ["releases", "--check", wit, releases] => {
            println!("{}", releases::check(Path::new(wit), Path::new(releases))?);
            Ok(())
        }
        ["c-bindings", wit, out] => c_bindings(Path::new(wit), Path::new(out)),
        ["patch", "edit", host] => patch::edit(Path::new("."), host),
        ["patch", "save", host] => patch::save(Path::new("."), host),
        ["patch", "check"] => {
            let problems = patch::check(Path::new("."))?;
            if !problems.is_empty() {
                bail!(
                    "the patched crates are not pin + series:\n  {}",
                    problems.join("\n  ")
                );
            }
            println!("build/patched is pin + series for every patched crate");
            Ok(())
        }
        _ => bail!(
            "usage: xtask componentize <core.wasm> <out.wasm>\n       xtask c-bindings <wit-dir> <out-dir>\n       xtask wit-doc [--check] <wit-dir> <out.md>\n       xtask registry --check <registry.toml>\n       xtask releases --check <wit-dir> <releases-dir>\n       xtask patch edit|save <host>\n       xtask patch check"
        ),
    }
}

fn componentize(input: &Path, output: &Path) -> Result<()> {
    let module = std::fs::read(input).with_context(|| format!("reading {}", input.display()))?;
    let component = wit_component::ComponentEncoder::default()
        .module(&module)
        .with_context(|| format!("{} has no usable component type section", input.display()))?
        .validate(true)
        .encode()
        .with_context(|| format!("encoding {} as a component", input.display()))?;
    let component = strip_custom_sections(&component)?;
    let component = relayout::relayout(&component)?.unwrap_or(component);
    let component = minify::minify(&component)?;
    std::fs::write(output, component).with_context(|| format!("writing {}", output.display()))
}

/// Generate the C bindings of the `plugin` world into `out`. Files are only
/// rewritten when their content changes, so `make` does not rebuild C
/// plugins for nothing.
fn c_bindings(wit: &Path, out: &Path) -> Result<()> {
    let mut resolve = wit_parser::Resolve::default();
    let (package, _) = resolve
        .push_path(wit)
        .with_context(|| format!("parsing {}", wit.display()))?;
    let world = resolve.select_world(&[package], Some("plugin"))?;
    let version = resolve.packages[package]
        .name
        .version
        .as_ref()
        .with_context(|| format!("{} declares no package version", wit.display()))?
        .to_string();
    let mut files = wit_bindgen_core::Files::default();
    wit_bindgen_c::Opts::default()
        .build()
        .generate(&mut resolve, world, &mut files)?;
    files.push("corequic_ids.h", ids_header()?.as_bytes());
    files.push(
        "plugin_abi_version.h",
        format!(
            "// Generated by `xtask c-bindings` from the WIT package. DO NOT EDIT!\n\
             #ifndef COREQUIC_ABI_VERSION\n\
             #define COREQUIC_ABI_VERSION \"{version}\"\n\
             #endif\n"
        )
        .as_bytes(),
    );
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    for (name, contents) in files.iter() {
        let path = out.join(name);
        if std::fs::read(&path).is_ok_and(|old| old == contents) {
            continue;
        }
        std::fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// `corequic_ids.h`: the ABI's identifiers (fields, routines, permissions,
/// error kinds) from the codepoint registry, as C constants such as
/// `COREQUIC_FIELD_MAX_TX_DATA`, so that C plugins name them as Rust
/// plugins do (`field::MAX_TX_DATA`).
fn ids_header() -> Result<String> {
    let registry = corequic_registry::Registry::load(Path::new("spec/registry.toml"))
        .map_err(anyhow::Error::msg)?;
    let mut text = String::from(
        "// Generated by `xtask c-bindings` from spec/registry.toml. DO NOT EDIT!\n\
         #ifndef COREQUIC_IDS_H\n#define COREQUIC_IDS_H\n",
    );
    for kind in corequic_registry::ABI_KINDS {
        let prefix = match kind {
            "error-kind" => "ERROR".to_string(),
            k => k.to_uppercase(),
        };
        for c in registry.codepoints.iter().filter(|c| c.kind == kind) {
            let Some(value) = c.value else { continue };
            let name = c.name.to_uppercase().replace('-', "_");
            text.push_str(&format!("#define COREQUIC_{prefix}_{name} {value}u\n"));
        }
    }
    text.push_str("#endif\n");
    Ok(text)
}

/// Drop the top-level custom sections (`component-name`, `producers`): they
/// only serve debugging and are a tenth of a small plugin. The core module's
/// own names are already stripped by the `plugin` profile.
fn strip_custom_sections(component: &[u8]) -> Result<Vec<u8>> {
    const PREAMBLE: usize = 8;
    if component.len() < PREAMBLE {
        bail!("not a component");
    }
    let mut out = component[..PREAMBLE].to_vec();
    let mut pos = PREAMBLE;
    while pos < component.len() {
        let id = component[pos];
        let (size, header) = read_leb_u32(&component[pos + 1..])?;
        let end = pos + 1 + header + size as usize;
        if end > component.len() {
            bail!("truncated section at byte {pos}");
        }
        if id != 0 {
            out.extend_from_slice(&component[pos..end]);
        }
        pos = end;
    }
    Ok(out)
}

fn read_leb_u32(bytes: &[u8]) -> Result<(u32, usize)> {
    let mut value: u32 = 0;
    for (i, byte) in bytes.iter().take(5).enumerate() {
        value |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok((value, i + 1));
        }
    }
    bail!("bad section size")
}

/// The `.wit` files of `dir` by name, and the package version they declare.
fn wit_files(dir: &Path) -> Result<(std::collections::BTreeMap<String, String>, String)> {
    let mut files = std::collections::BTreeMap::new();
    let mut version = None;
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "wit") {
            let text = std::fs::read_to_string(&path)?;
            if let Some(v) = text.lines().find_map(|l| {
                l.trim()
                    .strip_prefix("package core-quic:plugin@")?
                    .strip_suffix(';')
                    .map(str::to_string)
            }) {
                version = Some(v);
            }
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            files.insert(name.unwrap_or_default(), text);
        }
    }
    let version =
        version.with_context(|| format!("{}: no `package core-quic:plugin@…;`", dir.display()))?;
    Ok((files, version))
}
