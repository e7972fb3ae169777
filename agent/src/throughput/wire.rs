//! The bytes a throughput test exchanges besides its bulk data, pure.
//!
//! Each stream opens with a 32-byte header from the client: magic `NAT1`,
//! the 16-byte token, the stream's index and the number of streams, the
//! warm-up and the measured part in ms. The server answers one status byte;
//! on refusal it closes. After the measured part, the server sends the
//! result on stream 0: bytes counted and the measured time in microseconds.

use std::time::Duration;

/// Magic and version at the start of every header.
pub const MAGIC: [u8; 4] = *b"NAT1";
/// Header length.
pub const HEADER_LEN: usize = 32;
/// Result length.
pub const RESULT_LEN: usize = 16;
/// Longest warm-up plus measured part a header may ask for.
pub const MAX_TEST: Duration = Duration::from_secs(60);

/// A token: 16 random bytes.
pub type Token = [u8; 16];

/// What opens a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The collector's token for this test.
    pub token: Token,
    /// This stream's index, from 0.
    pub stream: u8,
    /// Streams in the test.
    pub streams: u8,
    /// Warm-up left out of the result.
    pub omit: Duration,
    /// Measured part.
    pub duration: Duration,
}

/// The server's answer to a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Accepted: send.
    Accepted,
    /// Not a header of this protocol.
    Malformed,
    /// No such token.
    UnknownToken,
    /// The token's time has not come or has passed.
    Expired,
    /// The token (or this stream of it) was used already.
    Replayed,
    /// The token was issued for another client.
    WrongPeer,
}

impl Status {
    /// The byte on the wire.
    pub fn to_byte(self) -> u8 {
        match self {
            Status::Accepted => 0,
            Status::Malformed => 1,
            Status::UnknownToken => 2,
            Status::Expired => 3,
            Status::Replayed => 4,
            Status::WrongPeer => 5,
        }
    }

    /// The status a byte stands for.
    pub fn from_byte(byte: u8) -> Option<Self> {
        Some(match byte {
            0 => Status::Accepted,
            1 => Status::Malformed,
            2 => Status::UnknownToken,
            3 => Status::Expired,
            4 => Status::Replayed,
            5 => Status::WrongPeer,
            _ => return None,
        })
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Status::Accepted => "accepted",
            Status::Malformed => "malformed header",
            Status::UnknownToken => "unknown token",
            Status::Expired => "token not valid at this time",
            Status::Replayed => "token already used",
            Status::WrongPeer => "token issued for another client",
        })
    }
}

impl Header {
    /// The header's bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut bytes = [0; HEADER_LEN];
        bytes[..4].copy_from_slice(&MAGIC);
        bytes[4..20].copy_from_slice(&self.token);
        bytes[20] = self.stream;
        bytes[21] = self.streams;
        bytes[24..28].copy_from_slice(&millis(self.omit).to_be_bytes());
        bytes[28..32].copy_from_slice(&millis(self.duration).to_be_bytes());
        bytes
    }

    /// Reads a header; `None` when the bytes are not a sound one.
    pub fn decode(bytes: &[u8; HEADER_LEN]) -> Option<Self> {
        if bytes[..4] != MAGIC || bytes[22..24] != [0, 0] {
            return None;
        }
        let ms = |at: usize| {
            let raw: [u8; 4] = bytes[at..at + 4].try_into().expect("4 bytes");
            Duration::from_millis(u32::from_be_bytes(raw).into())
        };
        let header = Header {
            token: bytes[4..20].try_into().expect("16 bytes"),
            stream: bytes[20],
            streams: bytes[21],
            omit: ms(24),
            duration: ms(28),
        };
        let sound = header.streams >= 1
            && header.streams <= super::MAX_STREAMS
            && header.stream < header.streams
            && !header.duration.is_zero()
            && header.omit + header.duration <= MAX_TEST;
        sound.then_some(header)
    }
}

/// The server's count at the end of a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    /// Bytes received in the measured part, over all streams.
    pub bytes: u64,
    /// Length of the measured part.
    pub measured: Duration,
}

impl Counted {
    /// The result's bytes.
    pub fn encode(&self) -> [u8; RESULT_LEN] {
        let mut bytes = [0; RESULT_LEN];
        bytes[..8].copy_from_slice(&self.bytes.to_be_bytes());
        let micros = u64::try_from(self.measured.as_micros()).unwrap_or(u64::MAX);
        bytes[8..].copy_from_slice(&micros.to_be_bytes());
        bytes
    }

    /// Reads a result.
    pub fn decode(bytes: &[u8; RESULT_LEN]) -> Self {
        let word = |at: usize| u64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        Counted {
            bytes: word(0),
            measured: Duration::from_micros(word(8)),
        }
    }

    /// Goodput in bit/s; 0 for an empty measured part.
    pub fn goodput_bps(&self) -> f64 {
        let seconds = self.measured.as_secs_f64();
        if seconds > 0.0 {
            self.bytes as f64 * 8.0 / seconds
        } else {
            0.0
        }
    }
}

fn millis(duration: Duration) -> u32 {
    u32::try_from(duration.as_millis()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn header_round_trips_and_refuses_nonsense() {
        let header = Header {
            token: [7; 16],
            stream: 1,
            streams: 2,
            omit: Duration::from_millis(500),
            duration: Duration::from_secs(2),
        };
        assert_eq!(Header::decode(&header.encode()), Some(header));
        let mut bad = header.encode();
        bad[0] = b'X';
        assert_eq!(Header::decode(&bad), None);
        let stream_past_count = Header {
            stream: 2,
            ..header
        };
        assert_eq!(Header::decode(&stream_past_count.encode()), None);
        let too_long = Header {
            duration: Duration::from_secs(61),
            ..header
        };
        assert_eq!(Header::decode(&too_long.encode()), None);
        for byte in 0..=255u8 {
            if let Some(status) = Status::from_byte(byte) {
                assert_eq!(status.to_byte(), byte);
            }
        }
    }

    #[test]
    fn goodput_from_the_count() {
        let counted = Counted {
            bytes: 125_000_000,
            measured: Duration::from_secs(2),
        };
        assert_eq!(Counted::decode(&counted.encode()), counted);
        assert_eq!(counted.goodput_bps(), 500e6);
        assert_eq!(
            Counted {
                bytes: 10,
                measured: Duration::ZERO
            }
            .goodput_bps(),
            0.0
        );
    }

    proptest! {
        /// Any 32 bytes decode to a sound header or to nothing, never a panic.
        #[test]
        fn any_bytes_decode_safely(bytes in proptest::array::uniform32(any::<u8>())) {
            if let Some(header) = Header::decode(&bytes) {
                prop_assert!(header.stream < header.streams);
                prop_assert_eq!(Header::decode(&header.encode()), Some(header));
            }
        }
    }
}
