//! Compiles the netaware.v1 protos with protox (pure Rust, so no system
//! protoc is needed) and generates tonic clients and servers from them.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "proto/netaware/v1/session.proto",
        "proto/netaware/v1/scores.proto",
    ];
    for file in files {
        println!("cargo:rerun-if-changed={file}");
    }
    let descriptors = protox::compile(files, ["proto"])?;
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    // Kept for gRPC server reflection; compile_fds does not write it itself.
    std::fs::write(
        out_dir.join("netaware_descriptor.bin"),
        prost::Message::encode_to_vec(&descriptors),
    )?;
    // Buffers that start small (see `codec.rs`): a collector holds a stream
    // per node.
    tonic_prost_build::configure()
        .codec_path("crate::codec::SmallBuffers")
        .compile_fds(descriptors)?;
    Ok(())
}
