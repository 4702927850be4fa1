//! The `conformance` command line: `help` and an unknown command.

use std::process::Command;

const KIT: &str = env!("CARGO_BIN_EXE_conformance");

#[test]
fn help_prints_the_usage_on_stdout_and_exits_0() {
    let out = Command::new(KIT).arg("--help").output().expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout.starts_with("usage:"), "{stdout}");
    assert!(stdout.contains("conformance run --endpoint"), "{stdout}");
    #[cfg(target_os = "linux")]
    {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let out = Command::new(KIT)
            .arg("--help")
            .stdout(full)
            .output()
            .expect("run");
        // The kit's error exit, with a message; a panic would be 101.
        assert_eq!(out.status.code(), Some(2), "stdout on /dev/full");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("writing the usage"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn an_unknown_command_is_named_and_exits_2() {
    let out = Command::new(KIT).arg("sideways").output().expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("unknown command sideways"), "{stderr}");
}
