//! `corequic`: the command-line tool for plugin authors.
//!
//! ```text
//! corequic inspect PLUGIN.wasm [--json]
//! corequic check PLUGIN.wasm (--host NAME [--bin-dir DIR] [--hosts-file F] | --endpoint PATH | --capabilities FILE) [--grants SPEC]
//! corequic embed-manifest IN.wasm OUT.wasm [--section-of OTHER.wasm]
//! ```
//!
//! - `inspect` reads a plugin without compiling or running it: its size,
//!   the ABI version its imports and exports name, and the manifest it
//!   carries in its `core-quic:manifest` section (spec CQ-LOAD-22): name,
//!   version, routines and anchors, fields, permissions.
//! - `check` answers whether a host would load the plugin, and if not, what
//!   is missing: it loads the plugin as the host's runtime would, against
//!   the capabilities the host declares (`ENDPOINT --capabilities`, the
//!   endpoint contract; `--host` finds the binary through the interop
//!   runner's `hosts.toml`), with no network and no connection. Exit status 0
//!   when the host would load it, 1 when not.
//! - `embed-manifest` asks the plugin for its manifest once and writes it
//!   into the plugin's `core-quic:manifest` section (`make plugins` runs it
//!   on every plugin). `--section-of` copies another plugin's section
//!   instead, unchecked: a test fixture for hosts that must refuse a
//!   section that lies (CQ-LOAD-23).

use anyhow::{Context, Result, bail};
use corequic_runtime::abi::{ABI_VERSION, FieldId, PluginManifest, Routine};
use corequic_runtime::{FieldSet, Grants, HostCapabilities, Runtime, RuntimeConfig, embedded};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `println!` that ends the process quietly when the reader of stdout has
/// gone (`corequic inspect p.wasm | head`), as Unix tools do, instead of
/// panicking.
macro_rules! println {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = writeln!(std::io::stdout(), $($arg)*) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                std::process::exit(0);
            }
            eprintln!("corequic: cannot write to stdout: {e}");
            std::process::exit(1);
        }
    }};
}

const USAGE: &str = "usage: corequic inspect PLUGIN.wasm [--json]
       corequic check PLUGIN.wasm (--host NAME [--bin-dir DIR] [--hosts-file F] | --endpoint PATH | --capabilities FILE) [--grants SPEC]
       corequic embed-manifest IN.wasm OUT.wasm [--section-of OTHER.wasm]";

/// The package every plugin's imports and exports belong to.
const PACKAGE: &str = "core-quic:plugin";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("inspect") => inspect(&args[1..]).map(|()| true),
        Some("check") => check(&args[1..]),
        Some("embed-manifest") => embed_manifest(&args[1..]).map(|()| true),
        Some("-h" | "--help") => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("corequic: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Positional arguments and `--flag value` options, every flag known.
struct Args {
    positional: Vec<String>,
    options: Vec<(String, Option<String>)>,
}

impl Args {
    /// `valued` flags take a value; `switches` do not.
    fn parse(args: &[String], valued: &[&str], switches: &[&str]) -> Result<Args> {
        let mut out = Args {
            positional: Vec::new(),
            options: Vec::new(),
        };
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            if valued.contains(&arg.as_str()) {
                let value = it.next().with_context(|| format!("{arg} needs a value"))?;
                out.options.push((arg.clone(), Some(value.clone())));
            } else if switches.contains(&arg.as_str()) {
                out.options.push((arg.clone(), None));
            } else if arg.starts_with("--") {
                bail!("unknown option {arg}\n{USAGE}");
            } else {
                out.positional.push(arg.clone());
            }
        }
        Ok(out)
    }

    fn value(&self, flag: &str) -> Option<&str> {
        self.options
            .iter()
            .rev()
            .find(|(f, _)| f == flag)
            .and_then(|(_, v)| v.as_deref())
    }

    fn has(&self, flag: &str) -> bool {
        self.options.iter().any(|(f, _)| f == flag)
    }

    fn one_file(&self) -> Result<&Path> {
        match self.positional.as_slice() {
            [file] => Ok(Path::new(file)),
            _ => bail!("expected one plugin file\n{USAGE}"),
        }
    }
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

/// What a plugin says about itself without running.
struct Inspection {
    size: usize,
    imports: Vec<String>,
    exports: Vec<String>,
    /// The ABI versions its `core-quic:plugin` imports and exports name.
    abi_versions: Vec<String>,
    manifest: Result<Option<PluginManifest>, String>,
}

fn inspection(bytes: &[u8]) -> Result<Inspection> {
    let mut imports = Vec::new();
    let mut exports = Vec::new();
    let mut depth = 0usize;
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        match payload.context("not a WebAssembly binary")? {
            wasmparser::Payload::Version { encoding, .. } => {
                if depth == 0 && encoding != wasmparser::Encoding::Component {
                    bail!(
                        "a core WebAssembly module, not a component: plugins are components of the world {PACKAGE}/plugin"
                    );
                }
                depth += 1;
            }
            wasmparser::Payload::End(_) => depth = depth.saturating_sub(1),
            wasmparser::Payload::ComponentImportSection(reader) if depth == 1 => {
                for import in reader {
                    imports.push(import?.name.full_name().into_owned());
                }
            }
            wasmparser::Payload::ComponentExportSection(reader) if depth == 1 => {
                for export in reader {
                    exports.push(export?.name.full_name().into_owned());
                }
            }
            _ => {}
        }
    }
    let mut abi_versions: Vec<String> = imports
        .iter()
        .chain(&exports)
        .filter_map(|name| {
            let rest = name.strip_prefix(PACKAGE)?.strip_prefix('/')?;
            Some(rest.split_once('@')?.1.to_string())
        })
        .collect();
    abi_versions.sort();
    abi_versions.dedup();
    let manifest = embedded::find(bytes).and_then(|s| s.map(embedded::decode).transpose());
    Ok(Inspection {
        size: bytes.len(),
        imports,
        exports,
        abi_versions,
        manifest,
    })
}

fn inspect(args: &[String]) -> Result<()> {
    let args = Args::parse(args, &[], &["--json"])?;
    let path = args.one_file()?;
    let found = inspection(&read(path)?).with_context(|| format!("{}", path.display()))?;
    if args.has("--json") {
        println!("{}", inspection_json(path, &found));
        return Ok(());
    }
    println!("plugin       {}", path.display());
    println!("size         {} bytes", found.size);
    match found.abi_versions.as_slice() {
        [] => println!("ABI          none: it imports and exports nothing of {PACKAGE}"),
        [v] => println!(
            "ABI          {PACKAGE}@{v} ({})",
            if corequic_runtime::abi::abi_compatible(v, ABI_VERSION) {
                format!("compatible with this tool's {ABI_VERSION}")
            } else if corequic_runtime::abi::abi_supported(v) {
                format!("runs on this tool's {ABI_VERSION} through the compatibility layer")
            } else {
                format!("not compatible with this tool's {ABI_VERSION}")
            }
        ),
        many => println!("ABI          several versions: {}", many.join(", ")),
    }
    println!("imports      {}", found.imports.join(", "));
    println!("exports      {}", found.exports.join(", "));
    match &found.manifest {
        Ok(Some(m)) => {
            println!("manifest     embedded ({} section)", embedded::SECTION);
            println!("  name         {}", m.name);
            println!("  version      {}", m.version);
            println!("  abi-version  {}", m.abi_version);
            for b in &m.bindings {
                println!(
                    "  binding      {} {} {:#x}",
                    b.routine.name(),
                    b.anchor.name(),
                    b.param
                );
            }
            let list = |items: Vec<&str>| {
                if items.is_empty() {
                    "(none)".to_string()
                } else {
                    items.join(", ")
                }
            };
            println!(
                "  reads        {}",
                list(m.reads.iter().map(|f| f.name()).collect())
            );
            println!(
                "  writes       {}",
                list(m.writes.iter().map(|f| f.name()).collect())
            );
            println!(
                "  permissions  {}",
                list(m.permissions.iter().map(|p| p.name()).collect())
            );
        }
        Ok(None) => println!(
            "manifest     not embedded (no {} section; `corequic embed-manifest` writes one)",
            embedded::SECTION
        ),
        Err(e) => println!(
            "manifest     the {} section is invalid: {e}",
            embedded::SECTION
        ),
    }
    Ok(())
}

fn inspection_json(path: &Path, found: &Inspection) -> serde_json::Value {
    let manifest = match &found.manifest {
        Ok(Some(m)) => serde_json::json!({
            "name": m.name,
            "version": m.version,
            "abi_version": m.abi_version,
            "bindings": m.bindings.iter().map(|b| serde_json::json!({
                "routine": b.routine.name(),
                "anchor": b.anchor.name(),
                "param": b.param,
            })).collect::<Vec<_>>(),
            "reads": m.reads.iter().map(|f| f.name()).collect::<Vec<_>>(),
            "writes": m.writes.iter().map(|f| f.name()).collect::<Vec<_>>(),
            "permissions": m.permissions.iter().map(|p| p.name()).collect::<Vec<_>>(),
        }),
        Ok(None) => serde_json::Value::Null,
        Err(e) => serde_json::json!({ "error": e }),
    };
    serde_json::json!({
        "file": path.display().to_string(),
        "size": found.size,
        "abi_versions": found.abi_versions,
        "imports": found.imports,
        "exports": found.exports,
        "manifest": manifest,
    })
}

/// A host's capabilities as `ENDPOINT --capabilities` prints them.
fn capabilities_from_json(text: &str) -> Result<(String, HostCapabilities)> {
    let json: serde_json::Value =
        serde_json::from_str(text).context("the capabilities are not JSON")?;
    let strings = |key: &str| -> Result<Vec<String>> {
        json.get(key)
            .and_then(|v| v.as_array())
            .with_context(|| format!("the capabilities have no list `{key}`"))?
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .with_context(|| format!("`{key}` holds a non-string"))
            })
            .collect()
    };
    let fields = |key: &str| -> Result<FieldSet> {
        strings(key)?
            .iter()
            .map(|n| FieldId::from_name(n).with_context(|| format!("unknown field {n} in `{key}`")))
            .collect()
    };
    let routines = strings("routines")?
        .iter()
        .map(|n| {
            Routine::ALL
                .into_iter()
                .find(|r| r.name() == n)
                .with_context(|| format!("unknown routine {n}"))
        })
        .collect::<Result<Vec<_>>>()?;
    let stack_transport_parameters = match json.get("stack_transport_parameters") {
        None => Vec::new(),
        Some(v) => v
            .as_array()
            .context("`stack_transport_parameters` is not a list")?
            .iter()
            .map(|id| {
                id.as_u64()
                    .context("a transport parameter id is not a number")
            })
            .collect::<Result<_>>()?,
    };
    let abi = json
        .get("abi_version")
        .and_then(|v| v.as_str())
        .context("the capabilities have no `abi_version`")?
        .to_string();
    Ok((
        abi,
        HostCapabilities {
            readable: fields("readable")?,
            writable: fields("writable")?,
            routines,
            stack_transport_parameters,
        },
    ))
}

/// The capabilities JSON of `--capabilities FILE`, of `--endpoint PATH`, or
/// of `--host NAME`'s endpoint binary (`ENDPOINT --capabilities`), found in
/// `--bin-dir` or beside this program.
fn host_capabilities(args: &Args) -> Result<(String, String)> {
    if let Some(file) = args.value("--capabilities") {
        let text = std::fs::read_to_string(file).with_context(|| format!("reading {file}"))?;
        return Ok((file.to_string(), text));
    }
    let (host, endpoint) = match (args.value("--endpoint"), args.value("--host")) {
        (Some(path), _) => (path.to_string(), PathBuf::from(path)),
        (None, Some(host)) => {
            let dir = match args.value("--bin-dir") {
                Some(dir) => PathBuf::from(dir),
                None => std::env::current_exe()
                    .ok()
                    .and_then(|exe| exe.parent().map(Path::to_path_buf))
                    .context("cannot tell where this program is; pass --bin-dir")?,
            };
            let hosts_file = Path::new(args.value("--hosts-file").unwrap_or(HOSTS_FILE));
            let binary = endpoint_binary(hosts_file, host)?;
            (host.to_string(), dir.join(binary))
        }
        (None, None) => bail!(
            "name a host (--host), its endpoint (--endpoint) or its capabilities (--capabilities)\n{USAGE}"
        ),
    };
    let output = std::process::Command::new(&endpoint)
        .arg("--capabilities")
        .output()
        .with_context(|| format!("running {} --capabilities", endpoint.display()))?;
    if !output.status.success() {
        bail!(
            "{} --capabilities failed: {}",
            endpoint.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok((host, String::from_utf8_lossy(&output.stdout).into_owned()))
}

/// The interop runner's list of hosts and their endpoint binaries.
const HOSTS_FILE: &str = "interop-runner/hosts.toml";

/// The endpoint binary of `host`: the `binary` of its `[[host]]` entry in
/// `hosts_file` when that file exists, else `HOST-endpoint`.
fn endpoint_binary(hosts_file: &Path, host: &str) -> Result<String> {
    let Ok(text) = std::fs::read_to_string(hosts_file) else {
        return Ok(format!("{host}-endpoint"));
    };
    corequic_interop::hosts::parse_hosts(&text)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("{}", hosts_file.display()))?
        .into_iter()
        .find(|h| h.name == host)
        .map(|h| h.binary)
        .with_context(|| format!("{} lists no host {host}", hosts_file.display()))
}

fn check(args: &[String]) -> Result<bool> {
    let args = Args::parse(
        args,
        &[
            "--host",
            "--bin-dir",
            "--hosts-file",
            "--endpoint",
            "--capabilities",
            "--grants",
        ],
        &[],
    )?;
    let path = args.one_file()?;
    let bytes = read(path)?;
    let (host, json) = host_capabilities(&args)?;
    let (host_abi, capabilities) =
        capabilities_from_json(&json).with_context(|| format!("the capabilities of {host}"))?;
    if host_abi != ABI_VERSION {
        bail!(
            "{host} implements ABI {host_abi}; this corequic checks against {ABI_VERSION}: use the corequic of that host's release"
        );
    }
    let grants = match args.value("--grants") {
        Some(spec) => Grants::parse(spec).map_err(anyhow::Error::msg)?,
        None => Grants::all(),
    };
    // The host's own loading, with its capabilities: compile, link, ask
    // for the manifest, check the embedded one, validate (CQ-LOAD-2..7).
    let runtime = Runtime::new(
        RuntimeConfig {
            pooling: false,
            ..RuntimeConfig::default()
        },
        capabilities,
    )
    .map_err(anyhow::Error::msg)?;
    match runtime.load_bytes(&path.display().to_string(), &bytes, &grants) {
        Ok(plugin) => {
            println!(
                "{host} would load {} ({}): yes",
                plugin.name(),
                path.display()
            );
            Ok(true)
        }
        Err(e) => {
            println!("{host} would load {}: no: {e}", path.display());
            Ok(false)
        }
    }
}

fn embed_manifest(args: &[String]) -> Result<()> {
    let args = Args::parse(args, &["--section-of"], &[])?;
    let [input, output] = args.positional.as_slice() else {
        bail!("expected IN.wasm OUT.wasm\n{USAGE}");
    };
    let bytes = read(Path::new(input))?;
    let manifest = match args.value("--section-of") {
        Some(other) => {
            let other_bytes = read(Path::new(other))?;
            let section = embedded::find(&other_bytes)
                .map_err(anyhow::Error::msg)?
                .with_context(|| format!("{other} has no {} section", embedded::SECTION))?;
            embedded::decode(section).map_err(anyhow::Error::msg)?
        }
        None => {
            let runtime = Runtime::new(
                RuntimeConfig {
                    pooling: false,
                    ..RuntimeConfig::default()
                },
                HostCapabilities::full(),
            )
            .map_err(anyhow::Error::msg)?;
            runtime.read_manifest(input, &bytes)?
        }
    };
    let with = embedded::embed(&bytes, &manifest)
        .map_err(anyhow::Error::msg)
        .with_context(|| input.to_string())?;
    std::fs::write(output, with).with_context(|| format!("writing {output}"))
}
