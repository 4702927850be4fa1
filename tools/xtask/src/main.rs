//! Build helpers for corequic.
//!
//! * `componentize <core.wasm> <out.wasm>` turns a plugin's core module (built
//!   for `wasm32-unknown-unknown`, with the component type section that
//!   `wit-bindgen` embeds) into a component. This is what
//!   `wasm-tools component new` does, without installing that CLI.
//! * `wit-doc <wit-dir> <out.md>` renders the markdown reference of the WIT
//!   package; `wit-doc --check <wit-dir> <out.md>` fails when `out.md` is stale.

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
        _ => bail!(
            "usage: xtask componentize <core.wasm> <out.wasm>\n       xtask wit-doc [--check] <wit-dir> <out.md>"
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
    std::fs::write(output, component).with_context(|| format!("writing {}", output.display()))
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
