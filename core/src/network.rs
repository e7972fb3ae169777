//! Networks: the sets of addresses, one per node, that a pair is measured
//! over. Every node is on the `primary` network (its first address); a
//! dual-stack node's first address of its other family puts it on that
//! family's network as well (`primary-ipv6`, or `primary-ipv4` where the
//! primary address is IPv6), so that the two families are measured and
//! kept apart: a pair's figures over IPv4 are never averaged with its
//! figures over IPv6.
//!
//! Operators name further networks (rails, a storage network: see
//! [`crate::network_address`]); each node says its address on each.
//!
//! A probe and its window name their network; the collector keeps one
//! pair matrix per network.

use std::fmt;
use std::net::IpAddr;

/// The name of the network of every node's first address.
pub const PRIMARY: &str = "primary";

/// Longest network name.
pub const MAX_NAME_LEN: usize = 32;

/// A network's name: 1 to [`MAX_NAME_LEN`] lowercase letters, digits and
/// '-', starting with a letter.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Network(String);

/// A name that cannot be a network's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "network name {0:?} must be 1 to {MAX_NAME_LEN} lowercase letters, digits or '-', starting with a letter"
)]
pub struct InvalidNetwork(pub String);

/// The most networks one list may name (a job over every rail of an
/// eight-rail node).
pub const MAX_LISTED: usize = 8;

/// A list of networks that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidNetworkList {
    /// One of the names.
    #[error(transparent)]
    Name(#[from] InvalidNetwork),
    /// Too many names.
    #[error("{0} networks listed, at most {MAX_LISTED}")]
    TooMany(usize),
}

impl Network {
    /// The networks of a comma list (`rail-0,rail-1`; blanks around each
    /// name ignored, a repeat counted once), in order: what a job that
    /// uses several networks at once is placed by, the worst of them pair
    /// by pair ([`crate::worst_of`]).
    pub fn parse_list(list: &str) -> Result<Vec<Self>, InvalidNetworkList> {
        let mut networks: Vec<Self> = Vec::new();
        for name in list.split(',') {
            let network = Self::parse(name.trim())?;
            if !networks.contains(&network) {
                networks.push(network);
            }
        }
        if networks.len() > MAX_LISTED {
            return Err(InvalidNetworkList::TooMany(networks.len()));
        }
        Ok(networks)
    }

    /// The primary network.
    pub fn primary() -> Self {
        Self(PRIMARY.to_owned())
    }

    /// The network a dual-stack node's other family is measured on, for a
    /// node whose primary address is `primary`.
    pub fn other_family(primary: IpAddr) -> Self {
        match primary {
            IpAddr::V4(_) => Self("primary-ipv6".to_owned()),
            IpAddr::V6(_) => Self("primary-ipv4".to_owned()),
        }
    }

    /// A network by name.
    pub fn parse(name: &str) -> Result<Self, InvalidNetwork> {
        let valid = (1..=MAX_NAME_LEN).contains(&name.len())
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if valid {
            Ok(Self(name.to_owned()))
        } else {
            Err(InvalidNetwork(name.to_owned()))
        }
    }

    /// Whether this is the primary network.
    pub fn is_primary(&self) -> bool {
        self.0 == PRIMARY
    }

    /// Whether this is a network that an operator named (a rail, a
    /// storage network), not one that netaware gives every node (the
    /// primary and its other family's, `primary-*`).
    pub fn is_named(&self) -> bool {
        !self.is_primary() && !self.0.starts_with("primary-")
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Network {
    fn default() -> Self {
        Self::primary()
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A node's addresses by network, from the addresses it says it has (its
/// primary first): the primary network, and the other family's network
/// when it has an address of the other family.
pub fn networks_of(addresses: &[IpAddr]) -> Vec<(Network, IpAddr)> {
    let Some(&primary) = addresses.first() else {
        return Vec::new();
    };
    let mut networks = vec![(Network::primary(), primary)];
    if let Some(&other) = addresses.iter().find(|a| a.is_ipv4() != primary.is_ipv4()) {
        networks.push((Network::other_family(primary), other));
    }
    networks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_names_each_network_once_in_order() {
        let names = |list: &str| -> Result<Vec<String>, InvalidNetworkList> {
            Ok(Network::parse_list(list)?
                .iter()
                .map(|n| n.as_str().to_owned())
                .collect())
        };
        assert_eq!(names("rail-0").unwrap(), ["rail-0"]);
        assert_eq!(
            names(" rail-1 , rail-0,rail-1").unwrap(),
            ["rail-1", "rail-0"]
        );
        assert!(matches!(names("rail-0,"), Err(InvalidNetworkList::Name(_))));
        assert!(matches!(names(""), Err(InvalidNetworkList::Name(_))));
        let nine = (0..=MAX_LISTED)
            .map(|i| format!("rail-{i}"))
            .collect::<Vec<_>>()
            .join(",");
        assert_eq!(
            names(&nine),
            Err(InvalidNetworkList::TooMany(MAX_LISTED + 1))
        );
    }
    use proptest::prelude::*;

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|a| a.parse().unwrap()).collect()
    }

    #[test]
    fn a_dual_stack_node_is_on_its_other_familys_network_too() {
        let named = |list: &[&str]| -> Vec<(String, String)> {
            networks_of(&ips(list))
                .into_iter()
                .map(|(n, a)| (n.to_string(), a.to_string()))
                .collect()
        };
        assert_eq!(
            named(&["198.18.1.1"]),
            [("primary".into(), "198.18.1.1".into())]
        );
        assert_eq!(
            named(&["198.18.1.1", "198.18.9.9", "2001:2::1", "2001:2::9"]),
            [
                ("primary".into(), "198.18.1.1".into()),
                ("primary-ipv6".into(), "2001:2::1".into())
            ]
        );
        assert_eq!(
            named(&["2001:2::1", "198.18.1.1"]),
            [
                ("primary".into(), "2001:2::1".into()),
                ("primary-ipv4".into(), "198.18.1.1".into())
            ]
        );
        assert!(networks_of(&[]).is_empty());
    }

    #[test]
    fn names_are_checked() {
        assert!(Network::parse("primary").unwrap().is_primary());
        assert!(!Network::parse("rail-0").unwrap().is_primary());
        assert!(Network::parse("rail-0").unwrap().is_named());
        assert!(!Network::parse("primary-ipv6").unwrap().is_named());
        assert!(!Network::primary().is_named());
        for bad in ["", "Primary", "0rail", "rail_0", "rail 0", &"r".repeat(33)] {
            assert!(Network::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(Network::default(), Network::primary());
    }

    proptest! {
        /// Every name the rule takes comes back as it was, and the derived
        /// networks' names are names the rule takes.
        #[test]
        fn parsed_names_round_trip(name in "[a-z][a-z0-9-]{0,31}") {
            let parsed = Network::parse(&name).unwrap();
            prop_assert_eq!(parsed.as_str(), name.as_str());
        }

        #[test]
        fn networks_of_gives_the_primary_first_and_at_most_one_per_family(
            v4 in proptest::collection::vec(any::<u32>(), 0..3),
            v6 in proptest::collection::vec(any::<u128>(), 0..3),
            v6_first in any::<bool>(),
        ) {
            let mut addresses: Vec<IpAddr> = v4.iter().map(|&a| IpAddr::from(std::net::Ipv4Addr::from(a))).collect();
            let six: Vec<IpAddr> = v6.iter().map(|&a| IpAddr::from(std::net::Ipv6Addr::from(a))).collect();
            if v6_first { addresses.splice(0..0, six); } else { addresses.extend(six); }
            let networks = networks_of(&addresses);
            prop_assert_eq!(networks.len(), usize::from(!v4.is_empty()) + usize::from(!v6.is_empty()));
            if let Some((network, address)) = networks.first() {
                prop_assert!(network.is_primary());
                prop_assert_eq!(*address, addresses[0]);
            }
            for (network, _) in &networks {
                prop_assert!(Network::parse(network.as_str()).is_ok());
            }
        }
    }
}
