//! The codec every generated client and server of `netaware.v1` uses:
//! protobuf as tonic's own, with buffers that start small.
//!
//! tonic starts each stream's encode and decode buffers at 8 KiB. A
//! collector holds one agent session stream per node, whose messages are
//! acks, peer sets and windows of a few kilobytes; at 20,000 nodes the two
//! default buffers alone are over 300 MB. Buffers that start at
//! [`INITIAL_BUFFER_BYTES`] grow to the largest message a stream carries
//! (a matrix page of a few MiB grows its own) and cost no more than that.

use std::marker::PhantomData;

use tonic::codec::{BufferSettings, Codec};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

/// Where each stream's encode and decode buffers start.
pub const INITIAL_BUFFER_BYTES: usize = 1024;

/// How much an encoder gathers before it hands a stream's bytes on
/// (tonic's own default).
const YIELD_THRESHOLD_BYTES: usize = 32 * 1024;

/// Protobuf with buffers that start at [`INITIAL_BUFFER_BYTES`]; named in
/// `build.rs` as the generated code's codec.
#[derive(Debug, Clone)]
pub struct SmallBuffers<T, U> {
    types: PhantomData<(T, U)>,
}

impl<T, U> Default for SmallBuffers<T, U> {
    fn default() -> Self {
        Self { types: PhantomData }
    }
}

fn settings() -> BufferSettings {
    BufferSettings::new(INITIAL_BUFFER_BYTES, YIELD_THRESHOLD_BYTES)
}

impl<T, U> Codec for SmallBuffers<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(settings())
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstCodec::<T, U>::raw_decoder(settings())
    }
}
