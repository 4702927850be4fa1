//! The quiche host's endpoint: [`driver`] runs a quiche connection over a
//! UDP socket with the hq-interop application of the endpoint contract
//! (`interop-runner/ENDPOINT.md`), for the `quiche-endpoint` binary and the
//! host's tests.

#![warn(missing_docs)]

pub mod driver;
