//! Checks every field that arrives from an agent before anything changes.
//!
//! Pure: turns wire messages into checked core types or a [`Invalid`] that
//! the session answers with INVALID_ARGUMENT. A window is checked whole
//! before any of it is applied, so a refused window leaves the matrix as it
//! was.

use std::collections::HashSet;
use std::net::IpAddr;

use netaware_core::matrix::{OneWayWindow, PairWindow, Throughput};
use netaware_core::network::Network;
use netaware_core::registry::Registry;
use netaware_core::{NodeInfo, NodeKind, UnixMillis};
use netaware_proto::convert;
use netaware_proto::v1::{Hello, NodeStats, ThroughputResult, Window};

/// Longest node, zone or region name (a DNS name).
pub const MAX_NAME_LEN: usize = 253;
/// Most addresses in one hello.
pub const MAX_ADDRESSES: usize = 16;
/// Most named networks in one hello (eight rails of each family, with
/// room for a storage and a frontend network).
pub const MAX_NETWORKS: usize = 18;
/// Most peers in one window.
pub const MAX_PEERS_PER_WINDOW: usize = 10_000;
/// Most interfaces in one node stats sample.
pub const MAX_NICS: usize = 1_024;
/// How far in the future a window may end (clock skew allowance).
pub const MAX_CLOCK_SKEW_MS: u64 = 5_000;
/// Longest window the collector accepts.
pub const MAX_WINDOW_MS: u64 = 600_000;
/// Shortest window the collector accepts.
pub const MIN_WINDOW_MS: u64 = 100;
/// Most throughput results in one window.
pub const MAX_RESULTS_PER_WINDOW: usize = 64;
/// Highest goodput believed: 10 Tbit/s.
#[doc(inline)]
pub use netaware_core::matrix::MAX_GOODPUT_BPS;
/// Longest error text of a failed test.
pub const MAX_ERROR_LEN: usize = 1_024;

/// Why a message was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

fn invalid<T>(message: impl Into<String>) -> Result<T, Invalid> {
    Err(Invalid(message.into()))
}

/// A checked name: not empty, not too long, printable without spaces.
pub fn check_name(what: &str, name: &str, allow_empty: bool) -> Result<(), Invalid> {
    if name.is_empty() && !allow_empty {
        return invalid(format!("{what} is empty"));
    }
    if name.len() > MAX_NAME_LEN {
        return invalid(format!("{what} is longer than {MAX_NAME_LEN} bytes"));
    }
    if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return invalid(format!(
            "{what} {name:?} contains whitespace or control characters"
        ));
    }
    Ok(())
}

/// Longest agent version a hello may carry.
pub const MAX_VERSION_LEN: usize = 64;

/// A hello, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedHello {
    /// The node it names, at its primary address.
    pub info: NodeInfo,
    /// Its window length.
    pub window_ms: u64,
    /// Its address on every network but the primary: its other family's
    /// (a dual-stack node), then each named network it is on.
    pub other_networks: Vec<(Network, IpAddr)>,
}

/// A hello, checked: the node it names, its window length, and the
/// networks it is on.
pub fn hello(hello: &Hello) -> Result<CheckedHello, Invalid> {
    check_name("node", &hello.node, false)?;
    check_name("zone", &hello.zone, false)?;
    check_name("region", &hello.region, true)?;
    if hello.addresses.is_empty() || hello.addresses.len() > MAX_ADDRESSES {
        return invalid(format!("a hello needs 1 to {MAX_ADDRESSES} addresses"));
    }
    for address in &hello.addresses {
        if address.parse::<IpAddr>().is_err() {
            return invalid(format!("address {address:?} is not an IP address"));
        }
    }
    let version = &hello.agent_version;
    if version.len() > MAX_VERSION_LEN || version.chars().any(char::is_control) {
        return invalid(format!(
            "agent_version must be at most {MAX_VERSION_LEN} bytes without control characters"
        ));
    }
    let window_ms = u64::from(hello.window_ms);
    if !(MIN_WINDOW_MS..=MAX_WINDOW_MS).contains(&window_ms) {
        return invalid(format!(
            "window_ms {window_ms} is outside {MIN_WINDOW_MS}..={MAX_WINDOW_MS}"
        ));
    }
    if hello.probe_interval_ms == 0 || u64::from(hello.probe_interval_ms) > window_ms {
        return invalid("probe_interval_ms must be above 0 and at most window_ms");
    }
    let info = NodeInfo {
        name: hello.node.clone(),
        address: hello.addresses[0].clone(),
        zone: hello.zone.clone(),
        region: hello.region.clone(),
        kind: NodeKind::Agent,
    };
    Ok(CheckedHello {
        info,
        window_ms,
        other_networks: other_networks(hello)?,
    })
}

/// The hello's networks past the primary, each named once.
fn other_networks(hello: &Hello) -> Result<Vec<(Network, IpAddr)>, Invalid> {
    if hello.networks.len() > MAX_NETWORKS {
        return invalid(format!("more than {MAX_NETWORKS} networks in one hello"));
    }
    let addresses: Vec<IpAddr> = hello
        .addresses
        .iter()
        .filter_map(|a| a.parse().ok())
        .collect();
    let mut networks: Vec<(Network, IpAddr)> = netaware_core::network::networks_of(&addresses)
        .into_iter()
        .filter(|(network, _)| !network.is_primary())
        .collect();
    for named in &hello.networks {
        let network =
            convert::network_from_wire(&named.network).map_err(|err| Invalid(err.to_string()))?;
        if !network.is_named() {
            return invalid(format!(
                "network {network} is netaware's own: a hello names only networks an operator named"
            ));
        }
        if networks.iter().any(|(n, _)| *n == network) {
            return invalid(format!("network {network} named twice"));
        }
        let address: IpAddr = named.address.parse().map_err(|_| {
            Invalid(format!(
                "address {:?} on network {network} is not an IP address",
                named.address
            ))
        })?;
        networks.push((network, address));
    }
    Ok(networks)
}

/// One peer window, checked: the peer, the probes towards it, and the
/// one-way counts of its requests towards the reporting node (if any).
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedPeerWindow {
    /// The peer.
    pub peer: String,
    /// The network it was probed over.
    pub network: Network,
    /// The probes from the reporting node towards it.
    pub pair: PairWindow,
    /// Its echo requests that the reporting node saw arrive.
    pub one_way: Option<OneWayWindow>,
}

/// A window's peers, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedWindow {
    /// The figures towards each peer the collector knows.
    pub pairs: Vec<CheckedPeerWindow>,
    /// Peers it does not know (forgotten, or not restored after a
    /// restart), left out: the rest of the window is still good.
    pub unknown_peers: u64,
}

/// A window from `node`, checked against the registry and the clock.
pub fn window(
    node: &str,
    window: &Window,
    registry: &Registry,
    now: UnixMillis,
) -> Result<CheckedWindow, Invalid> {
    if window.seq == 0 {
        return invalid("seq must start at 1");
    }
    if window.start_unix_ms >= window.end_unix_ms {
        return invalid("the window ends before it starts");
    }
    if window.end_unix_ms - window.start_unix_ms > MAX_WINDOW_MS {
        return invalid(format!("the window is longer than {MAX_WINDOW_MS} ms"));
    }
    if window.end_unix_ms > now + MAX_CLOCK_SKEW_MS {
        return invalid(format!(
            "the window ends {} ms in the future (clock skew allowed: {MAX_CLOCK_SKEW_MS} ms)",
            window.end_unix_ms - now
        ));
    }
    if window.peers.len() > MAX_PEERS_PER_WINDOW {
        return invalid(format!(
            "more than {MAX_PEERS_PER_WINDOW} peers in one window"
        ));
    }
    if let Some(stats) = &window.stats {
        node_stats(stats)?;
    }
    let mut seen = HashSet::new();
    let mut pairs = Vec::with_capacity(window.peers.len());
    let mut unknown_peers = 0;
    for peer in &window.peers {
        if peer.peer == node {
            return invalid(format!("{node} reports a window towards itself"));
        }
        let refused = |err: &dyn std::fmt::Display| Invalid(format!("peer {:?}: {err}", peer.peer));
        let read = convert::peer_window_from_wire(peer).map_err(|err| refused(&err))?;
        if !seen.insert((peer.peer.as_str(), read.network.clone())) {
            return invalid(format!(
                "peer {:?} appears twice on network {} in one window",
                peer.peer, read.network
            ));
        }
        if !read.network.is_primary() && (read.inbound_expected > 0 || read.inbound_received > 0) {
            return invalid(format!(
                "peer {:?}: one-way counts on network {}, which only the primary network has",
                peer.peer, read.network
            ));
        }
        let (pair, one_way) = read
            .checked(window.end_unix_ms)
            .map_err(|err| refused(&err))?;
        // Every figure is checked, a known peer's or not: a window with a
        // bad one is refused whole all the same.
        if registry.get(&peer.peer).is_none() {
            unknown_peers += 1;
            continue;
        }
        pairs.push(CheckedPeerWindow {
            peer: peer.peer.clone(),
            network: read.network,
            pair,
            one_way,
        });
    }
    Ok(CheckedWindow {
        pairs,
        unknown_peers,
    })
}

/// A throughput result, checked: the test, its server, and the goodput or
/// why the test failed.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedResult {
    /// The test's number, as the collector issued it.
    pub test_id: u64,
    /// The server node.
    pub peer: String,
    /// The goodput, or the client's reason for failing.
    pub outcome: Result<Throughput, String>,
}

/// The throughput results of a window from `node`, checked.
pub fn throughput_results(
    node: &str,
    window: &Window,
    registry: &Registry,
    now: UnixMillis,
) -> Result<Vec<CheckedResult>, Invalid> {
    if window.throughput.len() > MAX_RESULTS_PER_WINDOW {
        return invalid(format!(
            "more than {MAX_RESULTS_PER_WINDOW} throughput results in one window"
        ));
    }
    window
        .throughput
        .iter()
        .map(|result| throughput_result(node, result, registry, now))
        .collect()
}

fn throughput_result(
    node: &str,
    result: &ThroughputResult,
    registry: &Registry,
    now: UnixMillis,
) -> Result<CheckedResult, Invalid> {
    let refuse = |why: String| invalid(format!("throughput result {}: {why}", result.test_id));
    if result.peer == node || registry.get(&result.peer).is_none() {
        return refuse(format!("unknown or own peer {:?}", result.peer));
    }
    if result.end_unix_ms > now + MAX_CLOCK_SKEW_MS {
        return refuse("ends in the future".into());
    }
    if result.error.len() > MAX_ERROR_LEN {
        return refuse(format!("error text longer than {MAX_ERROR_LEN} bytes"));
    }
    let outcome = if result.error.is_empty() {
        let goodput = result.goodput_bps;
        if result.measured_ms == 0 {
            return refuse("measured for 0 ms".into());
        }
        // The goodput must be what the bytes and the time say (the time is
        // rounded to a millisecond on the wire).
        let implied = result.bytes as f64 * 8.0 / (f64::from(result.measured_ms) / 1e3);
        let slack = implied / f64::from(result.measured_ms) + 1.0;
        if (implied - goodput).abs() > slack + implied * 1e-3 {
            return refuse(format!(
                "goodput {goodput} disagrees with {} bytes in {} ms",
                result.bytes, result.measured_ms
            ));
        }
        match Throughput::new(
            goodput,
            result.end_unix_ms,
            result.retransmits,
            result.tcp_rtt_ms,
        ) {
            Ok(throughput) => Ok(throughput),
            Err(err) => return refuse(err.to_string()),
        }
    } else {
        Err(result.error.clone())
    };
    Ok(CheckedResult {
        test_id: result.test_id,
        peer: result.peer.clone(),
        outcome,
    })
}

fn node_stats(stats: &NodeStats) -> Result<(), Invalid> {
    if !(stats.cpu_ratio.is_finite() && (0.0..=1.0).contains(&stats.cpu_ratio)) {
        return invalid(format!(
            "cpu_ratio {} is not between 0 and 1",
            stats.cpu_ratio
        ));
    }
    if stats.memory_used_bytes > stats.memory_total_bytes {
        return invalid("memory_used_bytes exceeds memory_total_bytes");
    }
    if stats.nics.len() > MAX_NICS {
        return invalid(format!("more than {MAX_NICS} interfaces"));
    }
    for nic in &stats.nics {
        check_name("interface", &nic.name, false)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use netaware_proto::v1::{NetworkAddress, PeerWindow};

    fn hello_msg() -> Hello {
        Hello {
            node: "n1".into(),
            addresses: vec!["127.0.0.2".into()],
            zone: "a".into(),
            region: String::new(),
            agent_version: "test".into(),
            window_ms: 1_000,
            probe_interval_ms: 100,
            instance: 1,
            throughput_port: 0,
            stamp_port: 0,
            sent_unix_ms: 0,
            networks: Vec::new(),
        }
    }

    fn on(network: &str, address: &str) -> NetworkAddress {
        NetworkAddress {
            network: network.into(),
            address: address.into(),
        }
    }

    #[test]
    fn a_hellos_networks_are_its_other_family_then_the_named_ones() {
        let checked = hello(&Hello {
            addresses: vec!["10.0.0.1".into(), "fd00::1".into()],
            networks: vec![on("rail-0", "172.16.0.1"), on("rail-1", "172.16.1.1")],
            ..hello_msg()
        })
        .unwrap();
        let named: Vec<(String, String)> = checked
            .other_networks
            .iter()
            .map(|(n, a)| (n.to_string(), a.to_string()))
            .collect();
        assert_eq!(
            named,
            [
                ("primary-ipv6".to_owned(), "fd00::1".to_owned()),
                ("rail-0".to_owned(), "172.16.0.1".to_owned()),
                ("rail-1".to_owned(), "172.16.1.1".to_owned()),
            ]
        );
        assert_eq!(checked.info.address, "10.0.0.1");
    }

    #[test]
    fn hellos_are_checked() {
        assert!(hello(&hello_msg()).is_ok());
        for broken in [
            Hello {
                agent_version: "v".repeat(MAX_VERSION_LEN + 1),
                ..hello_msg()
            },
            Hello {
                agent_version: "1.0\n".into(),
                ..hello_msg()
            },
            Hello {
                node: String::new(),
                ..hello_msg()
            },
            Hello {
                zone: "a b".into(),
                ..hello_msg()
            },
            Hello {
                addresses: vec!["not-an-ip".into()],
                ..hello_msg()
            },
            Hello {
                addresses: vec![],
                ..hello_msg()
            },
            Hello {
                window_ms: 10,
                ..hello_msg()
            },
            Hello {
                probe_interval_ms: 5_000,
                ..hello_msg()
            },
            Hello {
                node: "x".repeat(300),
                ..hello_msg()
            },
            Hello {
                networks: vec![on("Rail", "172.16.0.1")],
                ..hello_msg()
            },
            Hello {
                networks: vec![on("primary", "172.16.0.1")],
                ..hello_msg()
            },
            Hello {
                networks: vec![on("primary-ipv6", "fd00::1")],
                ..hello_msg()
            },
            Hello {
                networks: vec![on("rail-0", "172.16.0.1"), on("rail-0", "172.16.0.2")],
                ..hello_msg()
            },
            Hello {
                networks: vec![on("rail-0", "rail-0.example")],
                ..hello_msg()
            },
            Hello {
                networks: (0..=MAX_NETWORKS)
                    .map(|i| on(&format!("rail-{i}"), "172.16.0.1"))
                    .collect(),
                ..hello_msg()
            },
        ] {
            assert!(hello(&broken).is_err(), "{broken:?}");
        }
    }

    #[test]
    fn windows_are_checked_whole() {
        let mut registry = Registry::new();
        let checked = hello(&hello_msg()).unwrap();
        let window_ms = checked.window_ms;
        registry.agent_hello(checked.info, window_ms, 0).unwrap();
        let other = hello(&Hello {
            node: "n2".into(),
            ..hello_msg()
        })
        .unwrap();
        registry.agent_hello(other.info, window_ms, 0).unwrap();
        let good = PeerWindow {
            peer: "n2".into(),
            sent: 10,
            received: 9,
            rtt_min_ms: 0.1,
            rtt_median_ms: 0.2,
            rtt_p90_ms: 0.3,
            rtt_p99_ms: 0.4,
            rtt_max_ms: 0.5,
            jitter_ms: 0.05,
            ..PeerWindow::default()
        };
        let w = |peers: Vec<PeerWindow>| Window {
            seq: 1,
            start_unix_ms: 9_000,
            end_unix_ms: 10_000,
            peers,
            stats: None,
            throughput: Vec::new(),
        };
        assert_eq!(
            window("n1", &w(vec![good.clone()]), &registry, 10_000)
                .unwrap()
                .pairs
                .len(),
            1
        );
        // A peer the collector does not know is left out, and counted.
        let ghost = PeerWindow {
            peer: "ghost".into(),
            ..good.clone()
        };
        let checked = window("n1", &w(vec![ghost, good.clone()]), &registry, 10_000).unwrap();
        assert_eq!((checked.pairs.len(), checked.unknown_peers), (1, 1));
        let cases = [
            w(vec![PeerWindow {
                peer: "ghost".into(),
                rtt_min_ms: -1.0,
                ..good.clone()
            }]),
            w(vec![PeerWindow {
                peer: "n1".into(),
                ..good.clone()
            }]),
            w(vec![good.clone(), good.clone()]),
            w(vec![PeerWindow {
                rtt_median_ms: f64::NAN,
                ..good.clone()
            }]),
            w(vec![PeerWindow {
                rtt_min_ms: -1.0,
                ..good.clone()
            }]),
            w(vec![PeerWindow {
                received: 11,
                ..good.clone()
            }]),
            // A transport this collector does not know: its figures must
            // not be taken for another's.
            w(vec![PeerWindow {
                probe: 7,
                ..good.clone()
            }]),
            Window {
                end_unix_ms: 20_000,
                ..w(vec![good.clone()])
            },
            Window {
                seq: 0,
                ..w(vec![good.clone()])
            },
            Window {
                start_unix_ms: 10_000,
                ..w(vec![good.clone()])
            },
            Window {
                stats: Some(NodeStats {
                    cpu_ratio: 2.0,
                    ..NodeStats::default()
                }),
                ..w(vec![])
            },
        ];
        for case in cases {
            assert!(window("n1", &case, &registry, 10_000).is_err(), "{case:?}");
        }
    }
}
