//! How a pair was probed: the [`Transport`] its figures came by, and the
//! [`TransportSet`] of transports that were tried towards the peer and got
//! no reply while another did (a filter on the way, not a lossy link).
//!
//! The figures of one transport are never averaged with another's: ICMP
//! is answered by the peer's kernel, UDP by its agent, so the two differ
//! by the agent's own delay even on the same path. The matrix keeps the
//! windows of one transport per pair and starts again when it changes.

/// A way of probing a peer, in the order an agent prefers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Transport {
    /// ICMP echo, answered by the peer's kernel.
    #[default]
    Icmp,
    /// UDP echo in the STAMP format (RFC 8762), answered by the peer's
    /// agent (or any STAMP reflector), which takes its own delay out.
    Udp,
    /// A TCP handshake to the peer's throughput port (SYN to SYN-ACK), where
    /// nothing else gets through.
    Tcp,
}

impl Transport {
    /// Every transport, most preferred first.
    pub const ALL: [Transport; 3] = [Transport::Icmp, Transport::Udp, Transport::Tcp];

    /// The name used in JSON, metrics and flags.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Icmp => "icmp",
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
        }
    }

    /// The transport called `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of transports, as small as a byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TransportSet(u8);

impl TransportSet {
    /// No transport.
    pub const EMPTY: TransportSet = TransportSet(0);

    /// The set holding `transports`.
    pub fn of(transports: impl IntoIterator<Item = Transport>) -> Self {
        let mut set = Self::EMPTY;
        for transport in transports {
            set.insert(transport);
        }
        set
    }

    /// Adds `transport`.
    pub fn insert(&mut self, transport: Transport) {
        self.0 |= transport.bit();
    }

    /// Whether `transport` is in the set.
    pub fn contains(self, transport: Transport) -> bool {
        self.0 & transport.bit() != 0
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The transports in the set, most preferred first.
    pub fn iter(self) -> impl Iterator<Item = Transport> {
        Transport::ALL
            .into_iter()
            .filter(move |t| self.contains(*t))
    }

    /// The names of the transports in the set, most preferred first.
    pub fn names(self) -> Vec<&'static str> {
        self.iter().map(Transport::as_str).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_sets_hold_what_was_put_in() {
        for transport in Transport::ALL {
            assert_eq!(Transport::from_name(transport.as_str()), Some(transport));
        }
        assert_eq!(Transport::from_name("sctp"), None);
        let set = TransportSet::of([Transport::Tcp, Transport::Icmp]);
        assert!(set.contains(Transport::Icmp) && set.contains(Transport::Tcp));
        assert!(!set.contains(Transport::Udp));
        assert_eq!(set.names(), ["icmp", "tcp"]);
        assert!(TransportSet::EMPTY.is_empty() && !set.is_empty());
    }
}
