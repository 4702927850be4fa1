//! The `interop-runner` command line: `--help` and a bad option.

use std::process::Command;

const RUNNER: &str = env!("CARGO_BIN_EXE_interop-runner");

#[test]
fn help_prints_the_usage_on_stdout_and_exits_0() {
    for args in [&["--help"][..], &["perf", "-h"]] {
        let out = Command::new(RUNNER).args(args).output().expect("run");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(stdout.starts_with("usage: interop-runner"), "{stdout}");
        assert!(out.stderr.is_empty(), "{args:?}");
    }
    #[cfg(target_os = "linux")]
    {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let status = Command::new(RUNNER)
            .arg("--help")
            .stdout(full)
            .status()
            .expect("run");
        assert_eq!(status.code(), Some(1), "stdout on /dev/full");
    }
}

#[test]
fn an_unknown_option_is_named_and_exits_1() {
    let out = Command::new(RUNNER)
        .arg("--no-such-option")
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("unknown option `--no-such-option`"),
        "{stderr}"
    );
}
