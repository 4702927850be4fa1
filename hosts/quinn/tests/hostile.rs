//! Issue 19 finding 1: a frame registration whose `frame-wire-len`
//! disagrees with what `write-frame` writes (CQ-ROUTINE-12, CQ-ROUTINE-13)
//! never aborts a host. quinn-proto aborted in `poll_transmit` (a GSO
//! segment sized by a first datagram that the lying extension left too small
//! for another packet); quiche and s2n-quic are checked with the same plugin.
//! The lying plugin is on one side, the peer has no plugins; every lie, both
//! roles, and the download is byte-exact.

mod common;

use corequic_endpoint::testing::{Side, run, sibling_binary};

const QUINN: &str = env!("CARGO_BIN_EXE_quinn-endpoint");
/// The liar's plugin-control: which lie (see plugins/testing/liar).
const LIES: [(&str, &str); 5] = [
    ("0:0x4c0001:1", "frame-wire-len larger than the room"),
    ("0:0x4c0001:2", "a short write"),
    ("0:0x4c0001:3", "frame-wire-len 0"),
    ("0:0x4c0001:4", "a write past the buffer"),
    (
        "0:0x4c0001:5",
        "another frame (CONNECTION_CLOSE) than its own",
    ),
];

fn liar(binary: &str, control: &str) -> Side {
    Side::new(binary)
        .plugins([common::plugin_path("test-liar").display().to_string()])
        .flags(&["--control", control])
}

/// Every host with the liar, in both roles, against a quinn peer without
/// plugins (quinn against itself covers quinn in both roles).
#[test]
fn lying_frame_lengths_never_abort_a_host_and_the_download_completes() {
    for host in ["quinn-endpoint", "quiche-endpoint", "s2n-endpoint"] {
        let binary = sibling_binary(QUINN, host);
        for (control, lie) in LIES {
            for liar_is_client in [true, false] {
                let plain = Side::new(QUINN);
                let (client, server) = match liar_is_client {
                    true => (liar(&binary, control), plain),
                    false => (plain, liar(&binary, control)),
                };
                let r = run(&client, &server, "hostile", 300_000);
                let role = if liar_is_client { "client" } else { "server" };
                eprintln!("{host} as {role} with {lie}");
                r.assert_download(300_000);
            }
        }
    }
}

/// Issue 19 finding 3 (CQ-LIMIT-8, CQ-LIMIT-9): when a defining plugin of
/// the quinn server faults mid-transfer, every client host sees the
/// plugin-failure close (not its idle timeout), and the server reports the
/// close as its own (it said "closed by peer" before).
#[test]
fn a_quinn_servers_plugin_failure_close_reaches_every_client_and_is_reported_as_local() {
    for client in ["quinn-endpoint", "quiche-endpoint", "s2n-endpoint"] {
        let server = Side::new(QUINN)
            .plugins([common::plugin_path("test-hostile").display().to_string()])
            // Arm a trap in its DEFINE should-send-frame 30 ms in.
            .flags(&["--control", "30:0x480007"]);
        let r = run(
            &Side::new(&sibling_binary(QUINN, client)),
            &server,
            "hostile",
            5_000_000,
        );
        r.assert_closed_by_plugin_failure(client);
        let close = r.server["close"].as_str().unwrap_or_default();
        assert!(
            close.starts_with("local application close 0x43510001: plugin hostile trapped"),
            "{client}: the server's own close: {close}"
        );
    }
}

/// Issue 19 findings 2 and 5 (CQ-LIMIT-11, CQ-API-8): a plugin that asks
/// for 70 transport parameters of 1,024 bytes, and for ids the stack sends
/// itself, on every host in both roles: the process does not abort (quinn
/// and s2n-quic aborted in rustls), the handshake completes with the
/// parameters that fit, and the download is byte-exact.
#[test]
fn oversized_and_stack_owned_transport_parameters_never_fail_the_handshake() {
    for host in ["quinn-endpoint", "quiche-endpoint", "s2n-endpoint"] {
        let binary = sibling_binary(QUINN, host);
        for flood_is_client in [true, false] {
            let flood = Side::new(&binary)
                .plugins([common::plugin_path("test-tp-flood").display().to_string()]);
            let plain = Side::new(QUINN);
            let (client, server) = match flood_is_client {
                true => (flood, plain),
                false => (plain, flood),
            };
            let r = run(&client, &server, "hostile", 300_000);
            r.assert_download(300_000);
            let side = if flood_is_client {
                &r.client
            } else {
                &r.server
            };
            let refused = corequic_endpoint::testing::Run::logs(side, "tp-flood", "register");
            assert_eq!(refused.len(), 2, "{host}: {side}");
            assert!(
                refused
                    .iter()
                    .all(|l| l["fields"][1][1] == "invalid-argument"),
                "{host}: {refused:?}"
            );
        }
    }
}
