//! `corequic inspect`, `check` and `embed-manifest` on the reference
//! plugins that `make plugins` builds (build/plugins).

use corequic_runtime::FieldSet;
use corequic_runtime::abi::{ABI_VERSION, FieldId, Routine};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The Rust and C reference plugins, by file name and manifest name.
const REFERENCE: [(&str, &str); 6] = [
    ("padding", "padding"),
    ("probe", "probe"),
    ("bdp", "bdp"),
    ("dummy", "dummy"),
    ("ack-logger", "ack-logger"),
    ("ack-logger-c", "ack-logger-c"),
];

fn plugin(name: &str) -> PathBuf {
    let dir = std::env::var_os("COREQUIC_PLUGIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../build/plugins"));
    let path = dir.join(format!("{name}.wasm"));
    assert!(path.exists(), "{}: run `make plugins`", path.display());
    path
}

/// A scratch directory for this test binary.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("corequic-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch");
    dir
}

/// Exit status, stdout, stderr.
fn corequic(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_corequic"))
        .args(args)
        .output()
        .expect("run corequic");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn inspect_json(path: &Path) -> serde_json::Value {
    let (code, out, err) = corequic(&["inspect", path.to_str().expect("path"), "--json"]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).expect("json")
}

/// Capabilities in the form `ENDPOINT --capabilities` prints, with every
/// routine and readable field, and `writable`.
fn capabilities_file(dir: &Path, name: &str, writable: FieldSet) -> PathBuf {
    let names = |set: FieldSet| -> Vec<&str> {
        FieldId::ALL
            .iter()
            .filter(|f| set.contains(**f))
            .map(|f| f.name())
            .collect()
    };
    let json = serde_json::json!({
        "abi_version": ABI_VERSION,
        "readable": names(FieldSet::all()),
        "writable": names(writable),
        "routines": Routine::ALL.iter().map(|r| r.name()).collect::<Vec<_>>(),
        "stack_transport_parameters": [0xff04_de1b_u64],
    });
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, json.to_string()).expect("write");
    path
}

#[test]
fn inspect_reads_every_reference_plugin_without_running_it() {
    for (file, name) in REFERENCE {
        let path = plugin(file);
        let json = inspect_json(&path);
        assert_eq!(
            json["abi_versions"],
            serde_json::json!([ABI_VERSION]),
            "{file}"
        );
        assert_eq!(json["manifest"]["name"], name, "{file}: {json}");
        assert_eq!(json["manifest"]["abi_version"], ABI_VERSION, "{file}");
        assert_eq!(
            json["size"],
            std::fs::metadata(&path).expect("size").len(),
            "{file}"
        );
        assert!(
            json["exports"]
                .as_array()
                .expect("exports")
                .iter()
                .any(|e| e == &format!("core-quic:plugin/routines@{ABI_VERSION}")),
            "{file}: {json}"
        );
    }
    // The text form names the bindings, fields and permissions.
    let (code, out, _) = corequic(&["inspect", plugin("bdp").to_str().expect("path")]);
    assert_eq!(code, 0);
    for line in [
        "name         bdp",
        "writes       congestion-window, ssthresh",
        "permissions  registration, logging",
        "binding      plugin-control define 0x",
    ] {
        assert!(out.contains(line), "{line:?} in\n{out}");
    }
}

#[test]
fn inspect_refuses_what_is_not_a_plugin_component() {
    let (code, _, err) = corequic(&["inspect", plugin("cq-core-module").to_str().expect("path")]);
    assert_eq!(code, 2);
    assert!(
        err.contains("a core WebAssembly module, not a component"),
        "{err}"
    );
    let dir = scratch("garbage");
    let garbage = dir.join("garbage.wasm");
    std::fs::write(&garbage, b"not wasm at all").expect("write");
    let (code, _, err) = corequic(&["inspect", garbage.to_str().expect("path")]);
    assert_eq!(code, 2);
    assert!(err.contains("not a WebAssembly binary"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn check_says_which_host_would_load_a_plugin_and_what_is_missing() {
    let dir = scratch("check");
    let full = capabilities_file(&dir, "full", FieldSet::all_writable());
    for (file, name) in REFERENCE {
        let path = plugin(file);
        let (code, out, err) = corequic(&[
            "check",
            path.to_str().expect("path"),
            "--capabilities",
            full.to_str().expect("path"),
        ]);
        assert_eq!(code, 0, "{file}: {out}{err}");
        assert!(
            out.contains(&format!("would load {name} (")) && out.ends_with("yes\n"),
            "{out}"
        );
    }
    // A host that cannot write the congestion window cannot run BDP.
    let mut writable = FieldSet::all_writable();
    writable.remove(FieldId::CongestionWindow);
    let narrow = capabilities_file(&dir, "narrow", writable);
    let bdp = plugin("bdp");
    let (code, out, _) = corequic(&[
        "check",
        bdp.to_str().expect("path"),
        "--capabilities",
        narrow.to_str().expect("path"),
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("no: ") && out.contains("field congestion-window (write)"),
        "{out}"
    );
    // Nor does a grant of nothing let it in; the error names what is missing.
    let (code, out, _) = corequic(&[
        "check",
        bdp.to_str().expect("path"),
        "--capabilities",
        full.to_str().expect("path"),
        "--grants",
        "none",
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("permission registration"), "{out}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_embedded_manifest_that_lies_is_shown_and_refused_and_can_be_rewritten() {
    let dir = scratch("embed");
    let liar = dir.join("liar.wasm");
    let probe = plugin("cq-api-probe");
    let padding = plugin("padding");
    let full = capabilities_file(&dir, "full", FieldSet::all_writable());
    let (code, _, err) = corequic(&[
        "embed-manifest",
        "--section-of",
        padding.to_str().expect("path"),
        probe.to_str().expect("path"),
        liar.to_str().expect("path"),
    ]);
    assert_eq!(code, 0, "{err}");
    // inspect shows what the section says (it runs nothing) ...
    assert_eq!(inspect_json(&liar)["manifest"]["name"], "padding");
    // ... and a host refuses it for the lie.
    let check = |path: &Path| {
        corequic(&[
            "check",
            path.to_str().expect("path"),
            "--capabilities",
            full.to_str().expect("path"),
        ])
    };
    let (code, out, _) = check(&liar);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("core-quic:manifest section differs"), "{out}");
    // Embedding again asks the plugin itself and replaces the section.
    let honest = dir.join("honest.wasm");
    let (code, _, err) = corequic(&[
        "embed-manifest",
        liar.to_str().expect("path"),
        honest.to_str().expect("path"),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(inspect_json(&honest)["manifest"]["name"], "api-probe");
    let (code, out, _) = check(&honest);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        std::fs::metadata(&honest).expect("honest").len(),
        std::fs::metadata(&probe).expect("probe").len(),
        "one section, of the same manifest as the original"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_wrong_command_line_is_a_usage_error() {
    let (code, _, err) = corequic(&["inspect"]);
    assert_eq!(code, 2);
    assert!(err.contains("expected one plugin file"), "{err}");
    let (code, _, err) = corequic(&["check", "x.wasm", "--frobnicate"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown option --frobnicate"), "{err}");
    let (code, _, err) = corequic(&["launch"]);
    assert_eq!(code, 2);
    assert!(err.contains("usage: corequic inspect"), "{err}");
}

/// The reference plugins as built against earlier releases
/// (`plugins/prebuilt/`, copied by `make plugins` as `abi-<v>-<name>`):
/// inspect shows their version and how this release runs them, and a host
/// of this release would load them (CQ-VER-6, CQ-VER-10).
#[test]
fn plugins_of_earlier_releases_are_inspected_and_loaded() {
    let dir = scratch("earlier");
    let full = capabilities_file(&dir, "full", FieldSet::all_writable());
    for (version, how) in [
        (
            "0.2.0",
            format!("compatible with this tool's {ABI_VERSION}"),
        ),
        (
            "0.1.0",
            format!("runs on this tool's {ABI_VERSION} through the compatibility layer"),
        ),
    ] {
        for (file, name) in REFERENCE {
            let path = plugin(&format!("abi-{version}-{file}"));
            let (code, out, err) = corequic(&["inspect", path.to_str().expect("path")]);
            assert_eq!(code, 0, "{file}: {err}");
            let abi = format!("ABI          core-quic:plugin@{version} ({how})");
            assert!(out.contains(&abi), "{abi:?} in\n{out}");
            assert!(out.contains(&format!("abi-version  {version}")), "{out}");
            let (code, out, err) = corequic(&[
                "check",
                path.to_str().expect("path"),
                "--capabilities",
                full.to_str().expect("path"),
            ]);
            assert_eq!(code, 0, "{file} {version}: {out}{err}");
            assert!(out.contains(&format!("would load {name} (")), "{out}");
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
