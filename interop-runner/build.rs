//! Generates the Rust types of `proto/results.proto` with the pure-Rust
//! protobuf parser (no `protoc` needed).

fn main() {
    protobuf_codegen::Codegen::new()
        .pure()
        .includes(["proto"])
        .input("proto/results.proto")
        .cargo_out_dir("proto")
        .run_from_script();
}
