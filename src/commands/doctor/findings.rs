//! What `netaware doctor` concludes, pure: each check one finding (ok,
//! warn or fail) with what it saw and, when it is not ok, the fix. The
//! cluster's checks read what the collector answers; the node's read what
//! the node lets a process do. Nothing here opens a socket.

use serde::Serialize;

use netaware_core::transport::Transport;

use netaware_proto::v1 as pb;

use crate::json::{NodeJson, PairJson, ZonesJson};

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// As it should be.
    Ok,
    /// Worth fixing; placement works.
    Warn,
    /// Placement is blocked, or runs blind to the network.
    Fail,
}

impl Status {
    /// The word printed for people.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        }
    }
}

/// What is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    /// Agents have said hello to the collector.
    Agents,
    /// Every node has a zone.
    ZoneLabels,
    /// Every agent reports.
    StaleNodes,
    /// Probes get through between nodes.
    ProbesGetThrough,
    /// No transport is filtered between nodes (a fallback measures where
    /// one is).
    FilteredProbes,
    /// This node lets the agent open an ICMP echo socket.
    EchoSocket,
    /// Every agent runs the collector's version.
    AgentVersions,
    /// The agents' clocks agree with the collector's.
    ClockSkew,
    /// An extender follows the collector's scores.
    ExtenderFollows,
}

impl Check {
    /// The check's name, as printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Check::Agents => "agents",
            Check::ZoneLabels => "zone labels",
            Check::StaleNodes => "stale nodes",
            Check::ProbesGetThrough => "probes get through",
            Check::FilteredProbes => "filtered probes",
            Check::EchoSocket => "echo socket",
            Check::AgentVersions => "agent versions",
            Check::ClockSkew => "clock skew",
            Check::ExtenderFollows => "extender follows",
        }
    }
}

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// What was checked.
    pub check: Check,
    /// How it came out.
    pub status: Status,
    /// What was seen.
    pub detail: String,
    /// What to do, when it is not ok.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Finding {
    fn ok(check: Check, detail: String) -> Self {
        Self {
            check,
            status: Status::Ok,
            detail,
            fix: None,
        }
    }

    fn not_ok(check: Check, status: Status, detail: String, fix: &str) -> Self {
        Self {
            check,
            status,
            detail,
            fix: Some(fix.to_owned()),
        }
    }
}

/// At most this many names in one finding's detail.
const NAMED: usize = 5;

fn some_names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.collect();
    let mut text = names
        .iter()
        .take(NAMED)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > NAMED {
        text.push_str(&format!(" and {} more", names.len() - NAMED));
    }
    text
}

/// The cluster's checks, from the collector's nodes, pairs and zone
/// summary.
pub fn cluster(nodes: &[NodeJson], pairs: &[PairJson], zones: &ZonesJson) -> Vec<Finding> {
    let mut findings = Vec::new();
    if nodes.is_empty() {
        findings.push(Finding::not_ok(
            Check::Agents,
            Status::Fail,
            "no node has said hello to the collector".into(),
            "check that the agent DaemonSet runs (kubectl -n netaware get ds,pods) and that its pods reach the collector's port 7470",
        ));
        return findings;
    }
    findings.push(Finding::ok(
        Check::Agents,
        format!("{} nodes known", nodes.len()),
    ));

    let unzoned: Vec<&str> = nodes
        .iter()
        .filter(|n| n.zone.is_empty())
        .map(|n| n.name.as_str())
        .collect();
    findings.push(if unzoned.is_empty() {
        Finding::ok(Check::ZoneLabels, format!("every node in one of {} zones", zones.zones.len()))
    } else {
        Finding::not_ok(
            Check::ZoneLabels,
            Status::Warn,
            format!(
                "{} nodes without a zone: {}",
                unzoned.len(),
                some_names(unzoned.iter().copied())
            ),
            "label them topology.kubernetes.io/zone (the agent reads it through the downward API), or set the agent's --zone",
        )
    });

    let stale: Vec<&str> = nodes
        .iter()
        .filter(|n| n.stale)
        .map(|n| n.name.as_str())
        .collect();
    findings.push(if stale.is_empty() {
        Finding::ok(Check::StaleNodes, "every node reports".into())
    } else {
        Finding::not_ok(
            Check::StaleNodes,
            Status::Warn,
            format!("{} of {} nodes stale: {}", stale.len(), nodes.len(), some_names(stale.iter().copied())),
            "their agents are down or cannot reach the collector: kubectl -n netaware logs on those nodes' agent pods",
        )
    });

    let unmeasured: Vec<&str> = zones
        .zones
        .iter()
        .filter(|z| z.cannot_measure)
        .map(|z| z.name.as_str())
        .collect();
    const OPEN_PROBES: &str = "allow one of ICMP echo (type 8 and 0), UDP to the agents' port 7472 or TCP to their port 7471 between the nodes, in the host firewall and the cloud security group; docs/troubleshooting.md";
    findings.push(if zones.cannot_measure {
        Finding::not_ok(
            Check::ProbesGetThrough,
            Status::Fail,
            format!(
                "{} of {} nodes reach none of their peers: netaware cannot measure, and the extender answers neutrally",
                zones.unreached_nodes,
                nodes.len()
            ),
            OPEN_PROBES,
        )
    } else if !unmeasured.is_empty() {
        Finding::not_ok(
            Check::ProbesGetThrough,
            Status::Fail,
            format!(
                "netaware cannot measure inside {}: most of their nodes reach none of their zone-mates",
                some_names(unmeasured.iter().copied())
            ),
            OPEN_PROBES,
        )
    } else if zones.unreached_nodes > 0 {
        Finding::not_ok(
            Check::ProbesGetThrough,
            Status::Warn,
            format!("{} nodes reach none of their peers", zones.unreached_nodes),
            "a node fault (NIC, cable, port) or a firewall on those hosts alone: netaware matrix shows which pairs",
        )
    } else {
        Finding::ok(Check::ProbesGetThrough, "every node reaches its peers".into())
    });
    findings.push(filtered_probes(pairs));
    findings
}

/// Clock offsets above this (ms) are worth fixing: ages, staleness and
/// the windows' times are off by that much.
pub const CLOCK_SKEW_WARN_MS: i64 = 1_000;

/// The agents' checks, from what each said in its hello: versions against
/// the collector's `collector_version`, clocks against the collector's.
pub fn agents(nodes: &[NodeJson], collector_version: &str) -> Vec<Finding> {
    let said: Vec<&NodeJson> = nodes
        .iter()
        .filter(|n| !n.agent_version.is_empty())
        .collect();
    let other: Vec<String> = said
        .iter()
        .filter(|n| n.agent_version != collector_version)
        .map(|n| format!("{} ({})", n.name, n.agent_version))
        .collect();
    let versions = if other.is_empty() {
        Finding::ok(
            Check::AgentVersions,
            format!(
                "{} agents run the collector's version {collector_version}",
                said.len()
            ),
        )
    } else {
        Finding::not_ok(
            Check::AgentVersions,
            Status::Warn,
            format!(
                "{} of {} agents run another version than the collector's {collector_version}: {}",
                other.len(),
                said.len(),
                some_names(other.iter().map(String::as_str))
            ),
            "roll the agent DaemonSet and the collector to the same image (kubectl -n netaware rollout status ds/netaware-agent)",
        )
    };
    let offsets_where = |beyond: &dyn Fn(i64) -> bool| -> Vec<String> {
        nodes
            .iter()
            .filter_map(|n| Some((n, n.clock_offset_ms?)))
            .filter(|(_, offset)| beyond(*offset))
            .map(|(n, offset)| format!("{} ({offset:+} ms)", n.name))
            .collect()
    };
    let refused_above =
        i64::try_from(netaware_collector::validate::MAX_CLOCK_SKEW_MS).unwrap_or(i64::MAX);
    let ahead = offsets_where(&|offset| offset > refused_above);
    let off = offsets_where(&|offset| offset.saturating_abs() > CLOCK_SKEW_WARN_MS);
    const SYNC: &str = "keep the nodes' clocks in sync (chrony or systemd-timesyncd against the same NTP servers as the collector's node)";
    let clocks = if !ahead.is_empty() {
        Finding::not_ok(
            Check::ClockSkew,
            Status::Fail,
            format!(
                "{} agents' clocks run more than {refused_above} ms ahead of the collector's, which refuses their windows: {}",
                ahead.len(),
                some_names(ahead.iter().map(String::as_str))
            ),
            SYNC,
        )
    } else if !off.is_empty() {
        Finding::not_ok(
            Check::ClockSkew,
            Status::Warn,
            format!(
                "{} agents' clocks are more than {CLOCK_SKEW_WARN_MS} ms off the collector's: {}",
                off.len(),
                some_names(off.iter().map(String::as_str))
            ),
            SYNC,
        )
    } else {
        Finding::ok(
            Check::ClockSkew,
            format!("every agent's clock within {CLOCK_SKEW_WARN_MS} ms of the collector's"),
        )
    };
    vec![versions, clocks]
}

/// A follower whose last update is older than this (s) has stopped taking
/// them: the collector hands every stream one at least every
/// `WATCH_REFRESH` (5 s).
pub fn follower_behind_after_s() -> f64 {
    3.0 * netaware_collector::scores::WATCH_REFRESH.as_secs_f64()
}

/// Whether anything follows the collector's scores (the extenders' watch
/// streams, as the collector lists them), and whether each keeps up.
pub fn followers(followers: &[pb::Follower]) -> Finding {
    if followers.is_empty() {
        return Finding::not_ok(
            Check::ExtenderFollows,
            Status::Warn,
            "no watch stream is open on the collector: no extender follows it, so pods are placed without netaware".into(),
            "check the netaware-scheduler Deployment (kubectl -n netaware get deploy,pods -l app.kubernetes.io/name=netaware-scheduler) and that its --collector reaches this collector; nothing to do if you place only with netaware rank or publish-topology",
        );
    }
    let limit = follower_behind_after_s();
    let behind: Vec<String> = followers
        .iter()
        .filter(|f| f.last_update_age_s > limit)
        .map(|f| format!("{} ({:.0} s)", f.peer, f.last_update_age_s))
        .collect();
    if behind.is_empty() {
        let newest = followers
            .iter()
            .map(|f| f.last_update_age_s)
            .fold(f64::INFINITY, f64::min);
        return Finding::ok(
            Check::ExtenderFollows,
            format!(
                "{} followers, each updated within {limit:.0} s (the latest {newest:.1} s ago)",
                followers.len()
            ),
        );
    }
    Finding::not_ok(
        Check::ExtenderFollows,
        Status::Warn,
        format!(
            "{} of {} followers had no update for over {limit:.0} s: {}",
            behind.len(),
            followers.len(),
            some_names(behind.iter().map(String::as_str))
        ),
        "a follower that does not read its stream (overloaded, or stuck) places on old scores until it answers neutrally: its logs and netaware_scheduler_neutral_answers_total",
    )
}

/// Which transports the pairs were measured by, and which were found
/// filtered: a warning, since a fallback measured those pairs.
fn filtered_probes(pairs: &[PairJson]) -> Finding {
    let count = |has: &dyn Fn(&PairJson, &str) -> bool| -> Vec<(&'static str, usize)> {
        Transport::ALL
            .iter()
            .map(|t| {
                (
                    t.as_str(),
                    pairs.iter().filter(|p| has(p, t.as_str())).count(),
                )
            })
            .filter(|(_, n)| *n > 0)
            .collect()
    };
    let by = count(&|p, t| p.probe.as_deref() == Some(t));
    let by_text = by
        .iter()
        .map(|(t, n)| format!("{n} by {t}"))
        .collect::<Vec<_>>()
        .join(", ");
    let filtered = count(&|p, t| p.filtered.iter().any(|f| f == t));
    if filtered.is_empty() {
        return Finding::ok(
            Check::FilteredProbes,
            format!("no transport filtered; pairs measured {by_text}"),
        );
    }
    let filtered_text = filtered
        .iter()
        .map(|(t, n)| format!("{} on {n} of {} pairs", t.to_uppercase(), pairs.len()))
        .collect::<Vec<_>>()
        .join(", ");
    Finding::not_ok(
        Check::FilteredProbes,
        Status::Warn,
        format!("filtered: {filtered_text}; measured instead {by_text}"),
        "nothing blocks placement; to measure by ICMP (answered by the kernel, without the agent's delay) allow ICMP echo between the nodes; docs/troubleshooting.md",
    )
}

/// What this node lets a process do for probing, as found.
#[derive(Debug, Clone, PartialEq)]
pub enum EchoSocketSeen {
    /// A raw ICMP socket opens.
    Raw,
    /// Only a datagram ICMP socket opens.
    Datagram,
    /// Neither opens; with the two errors and the ping group range.
    Neither {
        /// Why the raw socket was refused.
        raw: String,
        /// Why the datagram socket was refused.
        datagram: String,
        /// `net.ipv4.ping_group_range`, when readable.
        ping_group_range: Option<String>,
    },
}

/// The node's checks.
pub fn node(echo: &EchoSocketSeen) -> Vec<Finding> {
    vec![match echo {
        EchoSocketSeen::Raw => {
            Finding::ok(Check::EchoSocket, "raw ICMP socket (CAP_NET_RAW)".into())
        }
        EchoSocketSeen::Datagram => Finding::ok(
            Check::EchoSocket,
            "datagram ICMP socket (net.ipv4.ping_group_range admits this group)".into(),
        ),
        EchoSocketSeen::Neither {
            raw,
            datagram,
            ping_group_range,
        } => Finding::not_ok(
            Check::EchoSocket,
            Status::Warn,
            format!(
                "no ICMP echo socket: raw: {raw}; datagram: {datagram} (ping_group_range {}); the agent probes by UDP and TCP only, and nodes without an agent go unmeasured",
                ping_group_range.as_deref().unwrap_or("unreadable")
            ),
            "give the agent CAP_NET_RAW (deploy/ does), or widen net.ipv4.ping_group_range to its group",
        ),
    }]
}

/// Whether anything found blocks placement or leaves it blind.
pub fn any_failed(findings: &[Finding]) -> bool {
    findings.iter().any(|f| f.status == Status::Fail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::ZoneJson;

    fn node(name: &str, zone: &str, stale: bool) -> NodeJson {
        NodeJson {
            name: name.into(),
            zone: zone.into(),
            region: String::new(),
            address: "10.0.0.1".into(),
            stale,
            agent_version: "1.0".into(),
            clock_offset_ms: Some(3),
        }
    }

    #[test]
    fn no_follower_or_one_behind_warns() {
        let follower = |peer: &str, age: f64| pb::Follower {
            peer: peer.into(),
            version: 9,
            last_update_age_s: age,
        };
        assert_eq!(followers(&[]).status, Status::Warn);
        let fine = followers(&[follower("10.0.0.7:41000", 0.4)]);
        assert_eq!(fine.status, Status::Ok, "{fine:?}");
        let behind = followers(&[
            follower("10.0.0.7:41000", 0.4),
            follower("10.0.0.8:41000", follower_behind_after_s() + 1.0),
        ]);
        assert_eq!(behind.status, Status::Warn);
        assert!(behind.detail.contains("1 of 2 followers"), "{behind:?}");
        assert!(behind.detail.contains("10.0.0.8:41000"), "{behind:?}");
    }

    #[test]
    fn agents_on_another_version_warn_and_a_clock_far_ahead_fails() {
        let nodes = [node("a1", "a", false), node("b1", "b", false)];
        let fine = agents(&nodes, "1.0");
        assert!(fine.iter().all(|f| f.status == Status::Ok), "{fine:?}");
        let old = [
            NodeJson {
                agent_version: "0.9".into(),
                ..node("a1", "a", false)
            },
            node("b1", "b", false),
            // An inventory node says no version: not counted.
            NodeJson {
                agent_version: String::new(),
                clock_offset_ms: None,
                ..node("switch", "a", false)
            },
        ];
        let found = agents(&old, "1.0");
        assert_eq!(status_of(&found, Check::AgentVersions), Status::Warn);
        let versions = found
            .iter()
            .find(|f| f.check == Check::AgentVersions)
            .unwrap();
        assert!(versions.detail.contains("1 of 2 agents"), "{versions:?}");
        assert!(versions.detail.contains("a1 (0.9)"), "{versions:?}");
        let behind = [NodeJson {
            clock_offset_ms: Some(-2_500),
            ..node("a1", "a", false)
        }];
        let found = agents(&behind, "1.0");
        assert_eq!(status_of(&found, Check::ClockSkew), Status::Warn);
        assert!(!any_failed(&found));
        let ahead = [NodeJson {
            clock_offset_ms: Some(6_000),
            ..node("a1", "a", false)
        }];
        let found = agents(&ahead, "1.0");
        assert_eq!(status_of(&found, Check::ClockSkew), Status::Fail);
        assert!(found.iter().any(|f| f.detail.contains("a1 (+6000 ms)")));
    }

    fn zones(unreached: u32, cannot: bool, zone_cannot: &[&str]) -> ZonesJson {
        ZonesJson {
            zones: ["a", "b"]
                .map(|name| ZoneJson {
                    name: name.into(),
                    region: String::new(),
                    nodes: 3,
                    fresh_nodes: 3,
                    unreached_nodes: 0,
                    cannot_measure: zone_cannot.contains(&name),
                })
                .to_vec(),
            zone_pairs: Vec::new(),
            unreached_nodes: unreached,
            cannot_measure: cannot,
        }
    }

    fn status_of(findings: &[Finding], check: Check) -> Status {
        findings.iter().find(|f| f.check == check).unwrap().status
    }

    #[test]
    fn a_healthy_cluster_is_all_ok() {
        let nodes = [node("a1", "a", false), node("b1", "b", false)];
        let findings = cluster(&nodes, &[], &zones(0, false, &[]));
        assert!(
            findings.iter().all(|f| f.status == Status::Ok),
            "{findings:?}"
        );
        assert!(!any_failed(&findings));
    }

    #[test]
    fn filtered_probes_fail_and_say_what_to_open() {
        let nodes = [node("a1", "a", false), node("b1", "b", false)];
        let everywhere = cluster(&nodes, &[], &zones(2, true, &["a", "b"]));
        assert_eq!(
            status_of(&everywhere, Check::ProbesGetThrough),
            Status::Fail
        );
        assert!(any_failed(&everywhere));
        let probes = everywhere
            .iter()
            .find(|f| f.check == Check::ProbesGetThrough)
            .unwrap();
        assert!(
            probes.fix.as_deref().unwrap().contains("ICMP"),
            "{probes:?}"
        );
        let one_zone = cluster(&nodes, &[], &zones(1, false, &["b"]));
        assert_eq!(status_of(&one_zone, Check::ProbesGetThrough), Status::Fail);
        // One node cut off is a warning: a node fault, placement avoids it.
        let one_node = cluster(&nodes, &[], &zones(1, false, &[]));
        assert_eq!(status_of(&one_node, Check::ProbesGetThrough), Status::Warn);
        assert!(!any_failed(&one_node));
    }

    #[test]
    fn missing_zones_and_stale_nodes_warn_with_names() {
        let nodes: Vec<NodeJson> = (0..8).map(|i| node(&format!("n{i}"), "", i == 0)).collect();
        let findings = cluster(&nodes, &[], &zones(0, false, &[]));
        let labels = findings
            .iter()
            .find(|f| f.check == Check::ZoneLabels)
            .unwrap();
        assert_eq!(labels.status, Status::Warn);
        assert!(
            labels.detail.contains("n0, n1, n2, n3, n4 and 3 more"),
            "{labels:?}"
        );
        assert_eq!(status_of(&findings, Check::StaleNodes), Status::Warn);
    }

    #[test]
    fn no_agents_at_all_fails() {
        let findings = cluster(&[], &[], &zones(0, false, &[]));
        assert_eq!(findings.len(), 1);
        assert!(any_failed(&findings));
    }

    #[test]
    fn a_node_without_an_echo_socket_warns_its_agent_probes_by_udp_and_tcp() {
        let neither = EchoSocketSeen::Neither {
            raw: "Operation not permitted".into(),
            datagram: "Permission denied".into(),
            ping_group_range: Some("1\t0".into()),
        };
        let findings = super::node(&neither);
        assert_eq!(status_of(&findings, Check::EchoSocket), Status::Warn);
        assert!(!any_failed(&findings));
        let datagram = super::node(&EchoSocketSeen::Datagram);
        assert_eq!(status_of(&datagram, Check::EchoSocket), Status::Ok);
    }

    fn pair(probe: &str, filtered: &[&str]) -> PairJson {
        PairJson {
            network: "primary".into(),
            src: "a1".into(),
            dst: "b1".into(),
            rtt_median_ms: Some(1.0),
            rtt_p99_ms: Some(1.0),
            jitter_ms: Some(0.0),
            loss_ratio: Some(0.0),
            one_way_loss_ratio: None,
            throughput_bps: None,
            throughput_retransmits: None,
            throughput_tcp_rtt_ms: None,
            throughput_age_s: None,
            samples: 10,
            age_s: Some(1.0),
            quality: 1.0,
            probe: Some(probe.into()),
            filtered: filtered.iter().map(|f| (*f).to_owned()).collect(),
        }
    }

    #[test]
    fn a_filtered_transport_warns_and_says_what_measured_instead() {
        let nodes = [node("a1", "a", false), node("b1", "b", false)];
        let open = cluster(
            &nodes,
            &[pair("icmp", &[]), pair("icmp", &[])],
            &zones(0, false, &[]),
        );
        assert_eq!(status_of(&open, Check::FilteredProbes), Status::Ok);
        let pairs = [
            pair("udp", &["icmp"]),
            pair("udp", &["icmp"]),
            pair("icmp", &[]),
        ];
        let findings = cluster(&nodes, &pairs, &zones(0, false, &[]));
        let filtered = findings
            .iter()
            .find(|f| f.check == Check::FilteredProbes)
            .unwrap();
        assert_eq!(filtered.status, Status::Warn);
        assert!(!any_failed(&findings));
        assert!(
            filtered.detail.contains("ICMP on 2 of 3 pairs")
                && filtered.detail.contains("1 by icmp, 2 by udp"),
            "{filtered:?}"
        );
    }
}
