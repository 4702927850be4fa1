//! The kit proves it can fail: each category's cases are run against the
//! quinn endpoint with one test-only fault switch (`--inject-fault`, see
//! `corequic_runtime::InjectedFault`), and the case that checks the broken
//! requirement must fail, while the same case passes without the switch.
//! Needs the plugins (`make plugins`) and the endpoint binaries, which
//! `make test` builds before it runs this.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

fn kit() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_conformance"))
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn endpoint() -> PathBuf {
    let path = kit().with_file_name(format!("quinn-endpoint{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is missing: build it first (`make test` does)",
        path.display()
    );
    path
}

/// Run the kit on `case` with `fault` injected into the subject; the
/// verdicts of its runs (role, verdict).
fn verdicts(case: &str, fault: Option<&str>) -> Vec<(String, String)> {
    // Tests run in parallel, and two of them may run the same case without
    // a fault (each checks it passes first): each run has its own directory.
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let out = std::env::temp_dir().join(format!(
        "corequic-kit-{}-{}-{}-{}",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed),
        case,
        fault.unwrap_or("none")
    ));
    let mut cmd = Command::new(kit());
    cmd.arg("run")
        .arg("--endpoint")
        .arg(endpoint())
        .args(["--host", "quinn", "--only", case, "--root"])
        .arg(root())
        .arg("--plugin-dir")
        .arg(root().join("build/plugins"))
        .arg("--out")
        .arg(&out);
    if let Some(f) = fault {
        cmd.args(["--subject-arg", "--inject-fault", "--subject-arg", f]);
    }
    let status = cmd.status().expect("the kit runs");
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("report.json")).expect("report.json"),
    )
    .expect("report JSON");
    let _ = std::fs::remove_dir_all(&out);
    let results: Vec<(String, String)> = report["hosts"][0]["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            (
                r["role"].as_str().unwrap_or_default().to_string(),
                r["verdict"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert!(!results.is_empty(), "{case}: no run");
    let failed = results.iter().any(|(_, v)| v != "VERDICT_PASS");
    assert_eq!(
        status.success(),
        !failed,
        "{case}: the exit status follows the verdicts"
    );
    results
}

/// `case` passes on the host as it is and fails with `fault`.
fn catches(case: &str, fault: &str) {
    let clean = verdicts(case, None);
    assert!(
        clean.iter().all(|(_, v)| v == "VERDICT_PASS"),
        "{case} passes on the unmodified host: {clean:?}"
    );
    let broken = verdicts(case, Some(fault));
    assert!(
        broken.iter().any(|(_, v)| v == "VERDICT_FAIL"),
        "{case} fails on a host with {fault}: {broken:?}"
    );
}

#[test]
fn loading_a_host_that_accepts_a_foreign_abi_fails() {
    catches(
        "loading.foreign-abi-version-is-refused",
        "accept-foreign-abi",
    );
}

#[test]
fn loading_a_host_without_the_compatibility_layer_fails() {
    catches(
        "loading.a-0.1.0-plugin-receives-frames-through-the-compatibility-layer",
        "no-compatibility-layer",
    );
    catches(
        "loading.a-0.1.0-plugin-observes-acks-and-gets-host-errors-in-its-own-form",
        "no-compatibility-layer",
    );
}

#[test]
fn loading_a_host_that_refuses_earlier_releases_of_its_line_fails() {
    catches(
        "loading.a-0.2.0-plugin-sends-frames-unchanged-on-a-0.2.1-host",
        "exact-abi-version-only",
    );
    catches(
        "loading.a-0.2.0-plugin-observes-acks-and-gets-host-errors-unchanged-on-a-0.2.1-host",
        "exact-abi-version-only",
    );
}

#[test]
fn fields_a_host_that_reads_no_ecn_marks_but_counts_fails() {
    catches(
        "fields.ecn-counts-count-the-marked-packets-received",
        "ecn-marks-not-read",
    );
}

#[test]
fn routines_a_host_that_loses_unknown_error_kinds_fails() {
    catches(
        "routines.an-error-of-an-unknown-kind-reaches-the-caller-as-it-is",
        "unknown-error-kinds-as-failed",
    );
}

#[test]
fn host_calls_a_host_that_takes_frames_of_any_layout_fails() {
    catches(
        "host-calls.in-a-define-send-routine",
        "unchecked-frame-layouts",
    );
}

#[test]
fn permissions_a_host_that_does_not_count_denials_fails() {
    catches(
        "permissions.undeclared-reads-and-writes-are-denied-and-counted",
        "uncounted-denials",
    );
}

#[test]
fn send_a_host_that_stays_halted_after_removal_fails() {
    catches(
        "send.a-removed-plugin-releases-sending-halted",
        "keep-halt-after-removal",
    );
}

#[test]
fn limits_a_host_that_does_not_close_after_a_define_fault_fails() {
    catches(
        "limits.a-trap-in-a-define-routine-closes-the-connection",
        "no-plugin-failure-close",
    );
}

#[test]
fn limits_a_host_that_counts_only_log_text_fails() {
    catches("limits.empty-log-records-spend-the-budget", "log-text-only");
    catches(
        "limits.frames-in-log-records-spend-the-budget",
        "log-text-only",
    );
}

#[test]
fn fields_a_host_that_reads_none_as_zero_fails() {
    catches(
        "fields.largest-received-is-none-before-any-packet",
        "none-reads-as-zero",
    );
}

#[test]
fn receive_a_host_that_does_not_process_plugin_frames_fails() {
    catches("receive.dummy-frames-flow-both-ways", "skip-process-frame");
}

#[test]
fn routines_a_host_that_skips_after_observers_fails() {
    catches(
        "routines.after-process-frame-observes-every-ack",
        "skip-after-observers",
    );
    // A 0.1.0 observer gets frame-wire-len and write-frame only at AFTER.
    catches(
        "routines.a-0.1.0-observer-of-the-send-routines-is-called-where-write-frame-observers-are",
        "skip-after-observers",
    );
}

#[test]
fn routines_a_host_that_skips_before_observers_of_standard_frames_fails() {
    catches(
        "routines.observers-see-what-the-define-sees",
        "skip-before-observers-of-standard-frames",
    );
}

#[test]
fn host_calls_a_host_that_refuses_ping_fails() {
    catches("host-calls.in-plugin-control", "refuse-ping");
}

#[test]
fn routines_a_host_that_accepts_observe_frames_at_any_anchor_fails() {
    catches(
        "routines.observe-frames-at-another-anchor-is-refused",
        "observe-frames-at-any-anchor",
    );
}

#[test]
fn routines_a_host_that_ignores_send_frame_fails() {
    catches(
        "routines.send-frame-replaces-the-separate-send-routines",
        "separate-send-routines",
    );
}

#[test]
fn routines_a_host_that_ignores_receive_frame_fails() {
    catches(
        "routines.receive-frame-replaces-parse-and-process",
        "separate-receive-routines",
    );
}

#[test]
fn host_calls_a_host_that_keeps_offering_a_one_in_flight_registration_fails() {
    catches(
        "host-calls.one-in-flight-registration-is-held-until-the-frame-is-acked-or-lost",
        "one-in-flight-not-held",
    );
}

#[test]
fn host_calls_a_host_that_never_offers_a_held_registration_again_fails() {
    catches(
        "host-calls.one-in-flight-registration-is-held-until-the-frame-is-acked-or-lost",
        "one-in-flight-never-offered-again",
    );
}

#[test]
fn routines_a_host_that_accepts_fused_frame_routines_at_any_anchor_fails() {
    catches(
        "routines.fused-frame-routines-at-another-anchor-are-refused",
        "fused-frame-routines-at-any-anchor",
    );
}

#[test]
fn routines_a_host_that_calls_a_plugin_with_records_still_queued_fails() {
    catches(
        "routines.observe-frames-delivers-every-frame-in-order",
        "observed-frames-out-of-order",
    );
}

#[test]
fn host_calls_a_host_that_logs_shaped_values_without_their_kinds_fails() {
    catches("host-calls.shaped-log-records", "shaped-log-kinds-ignored");
}

#[test]
fn host_calls_a_host_that_makes_only_the_first_of_several_shaped_records_fails() {
    catches(
        "host-calls.shaped-log-records-in-one-call",
        "shaped-records-only-first",
    );
}

#[test]
fn host_calls_a_host_that_makes_the_whole_records_of_a_ragged_list_fails() {
    catches(
        "host-calls.shaped-log-records-in-one-call",
        "shaped-records-ragged-accepted",
    );
}

#[test]
fn rfc9000_a_host_that_sends_no_path_challenge_fails() {
    catches(
        "rfc9000.path-challenge-datagrams-are-padded",
        "path-challenge-as-ping",
    );
}

#[test]
fn fields_a_host_that_ignores_flow_limit_writes_fails() {
    catches(
        "fields.a-raised-max-rx-data-is-advertised",
        "ignore-flow-limit-writes",
    );
    catches(
        "fields.a-lowered-max-tx-data-holds-the-sender",
        "ignore-flow-limit-writes",
    );
}

#[test]
fn loading_a_host_that_trusts_a_lying_embedded_manifest_fails() {
    catches(
        "loading.an-embedded-manifest-that-lies-is-refused",
        "trust-lying-embedded-manifest",
    );
}
