//! The `s2n-endpoint` binary over real UDP on loopback, through a recording
//! relay: the endpoint contract (`interop-runner/ENDPOINT.md`), and a
//! plugin-free transfer for s2n↔s2n and s2n against quinn and quiche in both
//! directions. Behaviour with plugins is certified by the conformance kit
//! (`conformance/`).
//!
//! The other hosts' endpoints are found next to `s2n-endpoint` in the target
//! folder (`make test` builds every host).

use corequic_endpoint::testing::{
    Side, assert_endpoint_contract, assert_failed_plugin_load_exits_1, run, sibling_binary,
};

const S2N: &str = env!("CARGO_BIN_EXE_s2n-endpoint");

/// Every (client, server, label) pair with s2n on at least one side:
/// s2n↔s2n, then s2n against each other host in both directions.
fn pairs() -> Vec<(String, String, String)> {
    let mut pairs = vec![(S2N.to_string(), S2N.to_string(), "s2n→s2n".to_string())];
    for (peer, name) in [("quinn-endpoint", "quinn"), ("quiche-endpoint", "quiche")] {
        let peer = sibling_binary(S2N, peer);
        pairs.push((
            S2N.to_string(),
            peer.clone(),
            format!("s2n client, {name} server"),
        ));
        pairs.push((peer, S2N.to_string(), format!("{name} client, s2n server")));
    }
    pairs
}

#[test]
fn the_endpoint_contract_holds() {
    assert_endpoint_contract(S2N);
}

#[test]
fn a_plugin_that_fails_to_load_exits_1() {
    assert_failed_plugin_load_exits_1(S2N, "server", "/nonexistent/plugin.wasm");
}

#[test]
fn transfer_without_plugins_is_plain_s2n() {
    for (client, server, pair) in pairs() {
        let run = run(
            &Side::new(&client),
            &Side::new(&server),
            "transfer",
            500_000,
        );
        run.assert_download(500_000);
        assert!(
            run.client["plugins"].as_array().is_some_and(Vec::is_empty),
            "{pair}"
        );
    }
}
