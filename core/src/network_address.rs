//! How an agent finds its own address on a named network (a rail, a
//! storage network) from the rule it is given, `NAME=CIDR` or
//! `NAME=iface:IFNAME`. A DaemonSet gives every node the same arguments,
//! so the rule names the network, never the node's address: each agent
//! finds its own among its interfaces.
//!
//! Pure: the interfaces are read by the agent and passed in.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use crate::network::{InvalidNetwork, Network};

/// Longest interface name Linux allows (IFNAMSIZ less the NUL).
pub const MAX_INTERFACE_LEN: usize = 15;

/// An address block: the addresses whose first `prefix` bits are
/// `base`'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    base: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Whether `address` is inside the block (never across families).
    pub fn contains(&self, address: IpAddr) -> bool {
        match (self.base, address) {
            (IpAddr::V4(base), IpAddr::V4(address)) => same_prefix(
                u32::from(base).into(),
                u32::from(address).into(),
                32,
                self.prefix,
            ),
            (IpAddr::V6(base), IpAddr::V6(address)) => {
                same_prefix(base.into(), address.into(), 128, self.prefix)
            }
            _ => false,
        }
    }
}

/// Whether the first `prefix` of `width` bits of `a` and `b` agree.
fn same_prefix(a: u128, b: u128, width: u8, prefix: u8) -> bool {
    let shift = u32::from(width - prefix);
    prefix == 0 || (a >> shift) == (b >> shift)
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.base, self.prefix)
    }
}

/// How a network's address is found among a node's interfaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddressRule {
    /// The node's address inside this block.
    Cidr(Cidr),
    /// The first address of the interface of this name (IPv4 before IPv6).
    Interface(String),
}

impl fmt::Display for AddressRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cidr(cidr) => cidr.fmt(f),
            Self::Interface(name) => write!(f, "iface:{name}"),
        }
    }
}

/// A named network and how an agent finds its address on it: the value
/// of one `--network NAME=CIDR` or `--network NAME=iface:IFNAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkRule {
    /// The network's name.
    pub network: Network,
    /// How the agent's address on it is found.
    pub rule: AddressRule,
}

/// A `--network` value that cannot be a network rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidNetworkRule {
    /// No `=` between the name and the rule.
    #[error("{0:?}: expected NAME=CIDR or NAME=iface:IFNAME")]
    Shape(String),
    /// A bad name.
    #[error(transparent)]
    Name(#[from] InvalidNetwork),
    /// A name that netaware gives itself.
    #[error(
        "network {0:?} is the node's own address (or its other family's): name the network otherwise"
    )]
    Reserved(String),
    /// A block that does not parse.
    #[error("{0:?} is not an address block (ADDRESS/PREFIX, e.g. 10.1.0.0/16 or fd00:1::/64)")]
    Cidr(String),
    /// An interface name Linux would not take.
    #[error(
        "{0:?} is not an interface name (1 to {MAX_INTERFACE_LEN} characters, no '/' or space)"
    )]
    Interface(String),
}

impl FromStr for NetworkRule {
    type Err = InvalidNetworkRule;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let (name, rule) = value
            .split_once('=')
            .ok_or_else(|| InvalidNetworkRule::Shape(value.to_owned()))?;
        let network = Network::parse(name)?;
        if !network.is_named() {
            return Err(InvalidNetworkRule::Reserved(name.to_owned()));
        }
        let rule = match rule.strip_prefix("iface:") {
            Some(interface) => AddressRule::Interface(parse_interface(interface)?),
            None => AddressRule::Cidr(parse_cidr(rule)?),
        };
        Ok(Self { network, rule })
    }
}

fn parse_interface(name: &str) -> Result<String, InvalidNetworkRule> {
    let valid = (1..=MAX_INTERFACE_LEN).contains(&name.len())
        && !name.contains(|c: char| c == '/' || c.is_whitespace() || c.is_control());
    if valid {
        Ok(name.to_owned())
    } else {
        Err(InvalidNetworkRule::Interface(name.to_owned()))
    }
}

fn parse_cidr(text: &str) -> Result<Cidr, InvalidNetworkRule> {
    let bad = || InvalidNetworkRule::Cidr(text.to_owned());
    let (base, prefix) = text.split_once('/').ok_or_else(bad)?;
    let base: IpAddr = base.parse().map_err(|_| bad())?;
    let prefix: u8 = prefix.parse().map_err(|_| bad())?;
    let width = if base.is_ipv4() { 32 } else { 128 };
    if prefix > width {
        return Err(bad());
    }
    Ok(Cidr { base, prefix })
}

impl fmt::Display for NetworkRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.network, self.rule)
    }
}

/// One address of one of the node's interfaces, as the agent reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceAddress {
    /// The interface's name.
    pub interface: String,
    /// One of its addresses.
    pub address: IpAddr,
}

/// Whether an address can be a probe's source and destination between
/// nodes: not loopback, unspecified, multicast, or IPv6 link-local (which
/// needs a scope that a peer on another node cannot name).
fn reachable_between_nodes(address: IpAddr) -> bool {
    let link_local_v6 = matches!(address, IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80);
    !(address.is_loopback() || address.is_unspecified() || address.is_multicast() || link_local_v6)
}

impl NetworkRule {
    /// The node's address on this network among `interfaces`: the lowest
    /// inside the block, or the interface's lowest IPv4 address (else its
    /// lowest IPv6). Lowest, so that the choice does not hang on the order
    /// the kernel lists them in; `None` when the node has none.
    pub fn find(&self, interfaces: &[InterfaceAddress]) -> Option<IpAddr> {
        let candidates = interfaces
            .iter()
            .filter(|i| reachable_between_nodes(i.address));
        match &self.rule {
            AddressRule::Cidr(cidr) => candidates
                .map(|i| i.address)
                .filter(|&a| cidr.contains(a))
                .min(),
            AddressRule::Interface(name) => candidates
                .filter(|i| &i.interface == name)
                .map(|i| i.address)
                .min_by_key(|a| (a.is_ipv6(), *a)),
        }
    }
}

/// Each rule's address among `interfaces`, in the rules' order: `None`
/// for a network the node has no address on.
pub fn find_addresses(
    rules: &[NetworkRule],
    interfaces: &[InterfaceAddress],
) -> Vec<(Network, Option<IpAddr>)> {
    rules
        .iter()
        .map(|rule| (rule.network.clone(), rule.find(interfaces)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn interfaces(list: &[(&str, &str)]) -> Vec<InterfaceAddress> {
        list.iter()
            .map(|(interface, address)| InterfaceAddress {
                interface: (*interface).to_owned(),
                address: address.parse().unwrap(),
            })
            .collect()
    }

    fn rule(text: &str) -> NetworkRule {
        text.parse().unwrap()
    }

    fn found(text: &str, list: &[(&str, &str)]) -> Option<String> {
        rule(text).find(&interfaces(list)).map(|a| a.to_string())
    }

    const NODE: &[(&str, &str)] = &[
        ("lo", "127.0.0.1"),
        ("eth0", "10.0.3.7"),
        ("eth0", "fe80::1"),
        ("ib1", "fe80::2"),
        ("ib1", "172.16.1.7"),
        ("ib1", "fd00:1::7"),
        ("ib0", "172.16.0.7"),
        ("ib0", "172.16.0.200"),
    ];

    #[test]
    fn a_block_finds_the_nodes_address_inside_it() {
        assert_eq!(
            found("rail-0=172.16.0.0/24", NODE).as_deref(),
            Some("172.16.0.7")
        );
        assert_eq!(
            found("rail-1=172.16.1.0/24", NODE).as_deref(),
            Some("172.16.1.7")
        );
        assert_eq!(
            found("rails=172.16.0.0/16", NODE).as_deref(),
            Some("172.16.0.7")
        );
        assert_eq!(
            found("rail-6=fd00:1::/64", NODE).as_deref(),
            Some("fd00:1::7")
        );
        assert_eq!(found("any=0.0.0.0/0", NODE).as_deref(), Some("10.0.3.7"));
        // Loopback and link-local are never a network's address.
        assert_eq!(found("lo=127.0.0.0/8", NODE), None);
        assert_eq!(found("ll=fe80::/10", NODE), None);
        assert_eq!(found("rail-9=172.16.9.0/24", NODE), None);
        // Never across families.
        assert_eq!(found("mapped=::/0", &[("eth0", "10.0.0.1")]), None);
    }

    #[test]
    fn an_interface_gives_its_lowest_ipv4_address_else_its_ipv6() {
        assert_eq!(
            found("rail-0=iface:ib0", NODE).as_deref(),
            Some("172.16.0.7")
        );
        assert_eq!(
            found("rail-1=iface:ib1", NODE).as_deref(),
            Some("172.16.1.7")
        );
        assert_eq!(
            found("v6=iface:ib1", &[("ib1", "fe80::2"), ("ib1", "fd00:1::7")]).as_deref(),
            Some("fd00:1::7")
        );
        assert_eq!(found("gone=iface:ib7", NODE), None);
        assert_eq!(found("ll=iface:x", &[("x", "fe80::9")]), None);
    }

    #[test]
    fn find_addresses_says_which_networks_the_node_is_not_on() {
        let rules = [rule("rail-0=iface:ib0"), rule("rail-9=172.16.9.0/24")];
        let addresses = find_addresses(&rules, &interfaces(NODE));
        assert_eq!(addresses[0].0.as_str(), "rail-0");
        assert_eq!(addresses[0].1, Some("172.16.0.7".parse().unwrap()));
        assert_eq!(addresses[1], (Network::parse("rail-9").unwrap(), None));
    }

    #[test]
    fn bad_rules_say_what_is_wrong() {
        let error = |text: &str| text.parse::<NetworkRule>().unwrap_err();
        assert!(matches!(error("rail-0"), InvalidNetworkRule::Shape(_)));
        assert!(matches!(
            error("Rail=10.0.0.0/8"),
            InvalidNetworkRule::Name(_)
        ));
        assert!(matches!(
            error("primary=10.0.0.0/8"),
            InvalidNetworkRule::Reserved(_)
        ));
        assert!(matches!(
            error("primary-ipv6=fd00::/8"),
            InvalidNetworkRule::Reserved(_)
        ));
        for cidr in [
            "10.0.0.0",
            "10.0.0.0/33",
            "fd00::/129",
            "10.0.0/8",
            "x/8",
            "10.0.0.0/-1",
        ] {
            assert!(
                matches!(error(&format!("r={cidr}")), InvalidNetworkRule::Cidr(_)),
                "{cidr}"
            );
        }
        for name in ["", "a/b", "a b", "sixteen-letters!"] {
            assert!(
                matches!(
                    error(&format!("r=iface:{name}")),
                    InvalidNetworkRule::Interface(_)
                ),
                "{name:?}"
            );
        }
        assert!(error("r=").to_string().contains("address block"));
    }

    #[test]
    fn rules_print_as_they_are_written() {
        for text in ["rail-0=172.16.0.0/24", "rail-1=iface:ib1", "v6=fd00:1::/64"] {
            assert_eq!(rule(text).to_string(), text);
        }
    }

    proptest! {
        /// A block holds exactly the addresses that share its prefix: the
        /// base itself, and no address whose bit just inside the prefix
        /// differs.
        #[test]
        fn a_block_holds_its_prefix_and_nothing_else(base in any::<u32>(), prefix in 0u8..=32, flip in 0u32..32) {
            let cidr = Cidr { base: IpAddr::from(std::net::Ipv4Addr::from(base)), prefix };
            prop_assert!(cidr.contains(cidr.base));
            let other = IpAddr::from(std::net::Ipv4Addr::from(base ^ (1u32 << flip)));
            // Bit `flip` counts from the right: inside the prefix when it
            // is among the first `prefix` bits from the left.
            prop_assert_eq!(cidr.contains(other), flip < u32::from(32 - prefix));
        }

        /// The address found is always one of the node's, inside the
        /// block, and the same whatever order the interfaces come in.
        #[test]
        fn the_address_found_does_not_hang_on_the_order(
            addresses in proptest::collection::vec(any::<u32>(), 0..8),
            prefix in 0u8..=32,
            base in any::<u32>(),
            seed in any::<u64>(),
        ) {
            let list: Vec<InterfaceAddress> = addresses
                .iter()
                .enumerate()
                .map(|(i, &a)| InterfaceAddress { interface: format!("if{}", i % 3), address: IpAddr::from(std::net::Ipv4Addr::from(a)) })
                .collect();
            let rule = NetworkRule {
                network: Network::parse("rail").unwrap(),
                rule: AddressRule::Cidr(Cidr { base: IpAddr::from(std::net::Ipv4Addr::from(base)), prefix }),
            };
            let mut shuffled = list.clone();
            let len = shuffled.len().max(1);
            shuffled.rotate_left((seed as usize) % len);
            shuffled.reverse();
            let found = rule.find(&list);
            prop_assert_eq!(found, rule.find(&shuffled));
            if let (Some(address), AddressRule::Cidr(cidr)) = (found, &rule.rule) {
                prop_assert!(cidr.contains(address));
                prop_assert!(list.iter().any(|i| i.address == address));
            }
        }
    }
}
