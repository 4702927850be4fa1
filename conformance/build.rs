//! Generates the Rust types of `proto/conformance.proto` with the pure-Rust
//! protobuf parser (no `protoc` needed).

fn main() {
    protobuf_codegen::Codegen::new()
        .pure()
        .includes(["proto"])
        .input("proto/conformance.proto")
        .cargo_out_dir("proto")
        .run_from_script();
}
