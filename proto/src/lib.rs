//! The netaware.v1 wire protocol: the agent session stream and the Scores
//! service, generated from `proto/netaware/v1/*.proto` at build time
//! ([`v1`]), the one mapping between those types and the core's
//! ([`convert`]), the codec of every client and server ([`codec`]), the
//! pages and deltas that carry a matrix of any size ([`follow`]), a watch's
//! pairs in their compact form ([`compact`]), and agent messages of a
//! bounded size ([`parts`]).
//!
//! The generated code and its mapping live together so that every crate
//! speaks the same types, the .proto files stay the single source of truth,
//! and no two crates map the same message in two ways.

pub mod codec;
pub mod compact;
pub mod convert;
pub mod follow;
pub mod parts;

/// Generated messages, clients and servers of the `netaware.v1` package.
pub mod v1 {
    #![allow(missing_docs, clippy::all, clippy::pedantic)]
    tonic::include_proto!("netaware.v1");
}

/// The encoded file descriptor set, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("netaware_descriptor");
