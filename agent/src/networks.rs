//! The node's addresses on the named networks it is told of (`--network
//! NAME=CIDR`, `--network NAME=iface:IFNAME`), found among its interfaces
//! as sysinfo lists them. The rule itself is pure
//! (`netaware_core::network_address`); this reads the interfaces.

use std::net::IpAddr;

use netaware_core::network::Network;
use netaware_core::network_address::{InterfaceAddress, NetworkRule, find_addresses};

/// Every address of every interface of this host.
pub fn interface_addresses() -> Vec<InterfaceAddress> {
    let networks = sysinfo::Networks::new_with_refreshed_list();
    let mut addresses: Vec<InterfaceAddress> = networks
        .iter()
        .flat_map(|(interface, data)| {
            data.ip_networks().iter().map(|ip| InterfaceAddress {
                interface: interface.clone(),
                address: ip.addr,
            })
        })
        .collect();
    addresses.sort_by(|a, b| (&a.interface, a.address).cmp(&(&b.interface, b.address)));
    addresses
}

/// This node's address on each of `rules`' networks; a network it has no
/// address on is said once, here, and left out: the node takes no part in
/// it.
pub fn find(rules: &[NetworkRule]) -> Vec<(Network, IpAddr)> {
    let interfaces = interface_addresses();
    find_addresses(rules, &interfaces)
        .into_iter()
        .zip(rules)
        .filter_map(|((network, address), rule)| match address {
            Some(address) => {
                tracing::info!(%network, %address, "on network");
                Some((network, address))
            }
            None => {
                tracing::warn!(
                    %network,
                    rule = %rule.rule,
                    interfaces = interfaces.len(),
                    "no address of this node matches: it takes no part in this network"
                );
                None
            }
        })
        .collect()
}
