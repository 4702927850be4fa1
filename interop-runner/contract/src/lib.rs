//! The endpoint contract ([`ENDPOINT.md`](../../ENDPOINT.md)) as values,
//! for every program on either side of it: the endpoint library every host
//! binary is built on, the interop runner and the conformance kit. A value
//! of the contract is written here once; the programs and the tests take it
//! from here. (Codepoints of the plugins, such as their plugin-control IDs,
//! are the codepoint registry's, `spec/registry.toml`.)

#![no_std]
#![warn(missing_docs)]

use core::net::SocketAddr;

/// Exit code: the test passed.
pub const EXIT_PASS: i32 = 0;
/// Exit code: the test failed.
pub const EXIT_FAIL: i32 = 1;
/// Exit code: this endpoint does not support the test (the runner's
/// "unsupported"; also the answer to a test name it does not know).
pub const EXIT_UNSUPPORTED: i32 = 127;

/// The application protocol: HTTP/0.9 over QUIC, as in the QUIC interop
/// runner.
pub const ALPN: &[u8] = ALPN_NAME.as_bytes();

/// [`ALPN`] as text, for stacks that take protocol names as strings (neqo).
pub const ALPN_NAME: &str = "hq-interop";

/// The test cases of the interop matrix, in matrix order.
pub const MATRIX_TESTS: &[&str] = &[
    "transfer",
    "padding",
    "padding-one-sided",
    "probe",
    "bdp",
    "dummy",
    "dummy-0.2.0",
    "dummy-0.1.0",
    "dummy+padding",
    "ack-logger",
    "ack-logger-c",
    "hostile",
];

/// The test case of the paper matrix (`make paper`).
pub const PAPER_TESTS: &[&str] = &["padding", "bdp", "dummy+padding"];

/// The test name of the conformance kit's runs: a download with the
/// plugins given on the command line, nothing else.
pub const CONFORMANCE_TEST: &str = "conformance";

/// Whether an endpoint must support `test`: a matrix test or the kit's.
pub fn is_test(test: &str) -> bool {
    test == CONFORMANCE_TEST || MATRIX_TESTS.contains(&test)
}

/// The first word of the line a server prints on stdout once it listens,
/// followed by its address: `corequic-listening 127.0.0.1:40313`. The
/// runner starts a server on port 0 and reads its port from this line.
pub const LISTENING: &str = "corequic-listening";

/// The address of a [`LISTENING`] line, if `line` is one.
pub fn parse_listening(line: &str) -> Option<SocketAddr> {
    let (word, addr) = line.trim().split_once(' ')?;
    if word != LISTENING {
        return None;
    }
    addr.parse().ok()
}

/// The environment variable that tells an endpoint where to cache compiled
/// plugins; an endpoint may ignore it.
pub const PLUGIN_CACHE_VAR: &str = "COREQUIC_PLUGIN_CACHE";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_lines_parse_and_others_do_not() {
        let addr = parse_listening("corequic-listening 127.0.0.1:40313\n");
        assert_eq!(addr, "127.0.0.1:40313".parse().ok());
        assert_eq!(
            parse_listening("corequic-listening [::1]:443"),
            "[::1]:443".parse().ok()
        );
        assert_eq!(parse_listening("listening on 127.0.0.1:4433"), None);
        assert_eq!(parse_listening("corequic-listening 127.0.0.1"), None);
        assert_eq!(parse_listening(""), None);
    }

    #[test]
    fn the_kits_test_and_every_matrix_test_are_tests() {
        assert!(is_test(CONFORMANCE_TEST));
        assert!(MATRIX_TESTS.iter().all(|t| is_test(t)));
        assert!(PAPER_TESTS.iter().all(|t| MATRIX_TESTS.contains(t)));
        assert!(!is_test("no-such-test"));
    }
}
