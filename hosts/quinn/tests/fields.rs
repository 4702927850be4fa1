//! CQ-FIELD-1, CQ-FIELD-12: `largest-received` of the application-data
//! space, read when the peer's transport parameters arrive (before any 1-RTT
//! packet can have been received), is `none`, or `not-found` on a host whose
//! connection does not exist yet; never a number (quinn and quiche said 0).
//! Every host against itself.

mod common;

use corequic_endpoint::testing::{Run, Side, run, sibling_binary};

const QUINN: &str = env!("CARGO_BIN_EXE_quinn-endpoint");

#[test]
fn largest_received_is_none_before_any_packet_on_every_host() {
    for host in ["quinn-endpoint", "quiche-endpoint", "s2n-endpoint"] {
        let side = || {
            Side::new(&sibling_binary(QUINN, host)).plugins([common::plugin_path(
                "test-field-probe",
            )
            .display()
            .to_string()])
        };
        let r = run(&side(), &side(), "transfer", 10_000);
        r.assert_download(10_000);
        for (role, stats) in [("client", &r.client), ("server", &r.server)] {
            let logs = Run::logs(stats, "field-probe", "largest-received");
            assert_eq!(logs.len(), 1, "{host} {role}: {stats}");
            let value = &logs[0]["fields"][0][1];
            assert!(
                value == "none" || value == "not-found",
                "{host} {role}: largest-received {value}"
            );
        }
    }
}
