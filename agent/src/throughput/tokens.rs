//! Which test streams the throughput server admits, pure (time passed in).
//!
//! The collector tells the server, with each server order, the token the
//! client will present, the client's address and the time the token is
//! valid. A stream is admitted once per (token, stream index), only from
//! that address and only in that time; the token is kept a minute after it
//! expires so that a late or replayed use is refused as such.

use std::net::IpAddr;

use netaware_core::UnixMillis;

use super::wire::{Header, Status, Token};

/// How long a token is remembered after it expires.
const REMEMBER_MS: u64 = 60_000;
/// Most tokens held at once: a node is in one test at a time, so this only
/// bounds a misbehaving collector.
pub const MAX_TOKENS: usize = 64;

/// A test the server was told to expect.
#[derive(Debug, Clone, PartialEq)]
pub struct Expected {
    /// The token the client will present.
    pub token: Token,
    /// The client's address; `None` accepts any (the one-off CLI test).
    pub client: Option<IpAddr>,
    /// Valid from.
    pub not_before: UnixMillis,
    /// Valid until.
    pub expires: UnixMillis,
}

#[derive(Debug, Clone)]
struct Entry {
    expected: Expected,
    /// Bit i set once stream i was admitted.
    admitted: u32,
    /// Set once stream 0 fixed the number of streams.
    streams: Option<u8>,
}

/// Why the book would not take an expectation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("the throughput server already expects {MAX_TOKENS} tests")]
pub struct BookFull;

/// The tokens the server accepts.
#[derive(Debug, Default)]
pub struct TokenBook {
    entries: Vec<Entry>,
}

impl TokenBook {
    /// An empty book.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a test to expect; forgets tokens long expired first.
    pub fn expect(&mut self, expected: Expected, now: UnixMillis) -> Result<(), BookFull> {
        self.entries
            .retain(|e| e.expected.expires.saturating_add(REMEMBER_MS) > now);
        if self.entries.len() >= MAX_TOKENS {
            return Err(BookFull);
        }
        self.entries.push(Entry {
            expected,
            admitted: 0,
            streams: None,
        });
        Ok(())
    }

    /// Whether the stream this header opens, from `client`, may send now.
    pub fn admit(&mut self, header: &Header, client: IpAddr, now: UnixMillis) -> Status {
        let Some(entry) = self
            .entries
            .iter_mut()
            .find(|e| same_token(&e.expected.token, &header.token))
        else {
            return Status::UnknownToken;
        };
        if entry.expected.client.is_some_and(|c| !same_host(c, client)) {
            return Status::WrongPeer;
        }
        if now < entry.expected.not_before || now > entry.expected.expires {
            return Status::Expired;
        }
        let bit = 1u32 << header.stream;
        let streams_agree = entry.streams.is_none_or(|n| n == header.streams);
        // Streams after the first join a test that stream 0 opened.
        let opened = header.stream == 0 || entry.streams.is_some();
        if entry.admitted & bit != 0 || !streams_agree || !opened {
            return Status::Replayed;
        }
        entry.admitted |= bit;
        entry.streams = Some(header.streams);
        Status::Accepted
    }
}

/// Compares tokens without leaking, by timing, how much of a guess was right.
fn same_token(a: &Token, b: &Token) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// IPv4 clients reach a dual-stack listener as IPv4-mapped IPv6 addresses.
fn same_host(a: IpAddr, b: IpAddr) -> bool {
    a.to_canonical() == b.to_canonical()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn header(token: u8, stream: u8, streams: u8) -> Header {
        Header {
            token: [token; 16],
            stream,
            streams,
            omit: Duration::from_millis(100),
            duration: Duration::from_secs(1),
        }
    }

    fn book() -> TokenBook {
        let mut book = TokenBook::new();
        book.expect(
            Expected {
                token: [1; 16],
                client: Some("10.0.0.1".parse().unwrap()),
                not_before: 1_000,
                expires: 5_000,
            },
            0,
        )
        .unwrap();
        book
    }

    #[test]
    fn admits_each_stream_once_from_the_right_client_in_time() {
        let client: IpAddr = "10.0.0.1".parse().unwrap();
        let mut book = book();
        assert_eq!(
            book.admit(&header(2, 0, 1), client, 2_000),
            Status::UnknownToken
        );
        assert_eq!(
            book.admit(&header(1, 0, 2), "10.0.0.9".parse().unwrap(), 2_000),
            Status::WrongPeer
        );
        assert_eq!(book.admit(&header(1, 0, 2), client, 999), Status::Expired);
        assert_eq!(
            book.admit(&header(1, 1, 2), client, 2_000),
            Status::Replayed
        );
        // A mapped IPv4 address is the same client.
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert_eq!(
            book.admit(&header(1, 0, 2), mapped, 2_000),
            Status::Accepted
        );
        assert_eq!(
            book.admit(&header(1, 0, 2), client, 2_000),
            Status::Replayed
        );
        assert_eq!(
            book.admit(&header(1, 1, 3), client, 2_000),
            Status::Replayed
        );
        assert_eq!(
            book.admit(&header(1, 1, 2), client, 2_000),
            Status::Accepted
        );
        assert_eq!(
            book.admit(&header(1, 1, 2), client, 2_000),
            Status::Replayed
        );
        assert_eq!(book.admit(&header(1, 0, 2), client, 5_001), Status::Expired);
    }

    #[test]
    fn forgets_old_tokens_and_is_bounded() {
        let mut book = book();
        for i in 0..MAX_TOKENS - 1 {
            let expected = Expected {
                token: [i as u8 + 10; 16],
                client: None,
                not_before: 0,
                expires: 10_000,
            };
            book.expect(expected, 0).unwrap();
        }
        let one_more = Expected {
            token: [200; 16],
            client: None,
            not_before: 0,
            expires: 10_000,
        };
        assert_eq!(book.expect(one_more.clone(), 0), Err(BookFull));
        // Once all are long expired, there is room again.
        assert_eq!(book.expect(one_more, 10_000 + REMEMBER_MS), Ok(()));
        let client: IpAddr = "10.0.0.1".parse().unwrap();
        assert_eq!(
            book.admit(&header(1, 0, 1), client, 3_000),
            Status::UnknownToken
        );
    }
}
