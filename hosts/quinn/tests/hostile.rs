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
const LIES: [(&str, &str); 4] = [
    ("0:0x4c0001:1", "frame-wire-len larger than the room"),
    ("0:0x4c0001:2", "a short write"),
    ("0:0x4c0001:3", "frame-wire-len 0"),
    ("0:0x4c0001:4", "a write past the buffer"),
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
