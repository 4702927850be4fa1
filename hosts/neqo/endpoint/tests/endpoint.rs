//! The `neqo-endpoint` binary: the endpoint contract of
//! `interop-runner/ENDPOINT.md` that needs no peer (flags, exit codes, the
//! stats of a server that timed out). Transfers with and without plugins
//! are certified by the conformance kit (`conformance/`), across hosts by
//! the interop runner.

use corequic_endpoint::testing::{
    assert_endpoint_contract, assert_failed_plugin_load_exits_1, plugin_path,
};

const NEQO: &str = env!("CARGO_BIN_EXE_neqo-endpoint");

#[test]
fn the_endpoint_contract_holds() {
    assert_endpoint_contract(NEQO);
}

#[test]
fn a_plugin_that_fails_to_load_exits_1() {
    let plugin = plugin_path("test-abi-mismatch").display().to_string();
    assert_failed_plugin_load_exits_1(NEQO, "server", &plugin);
}
