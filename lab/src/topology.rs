//! What a lab looks like: zones of hosts, the link profile between every
//! two hosts, and the faults switched on at run time.
//!
//! A topology is read from a small YAML file (see `lab/topologies/`). Link
//! profiles are per direction and combine: the zone-pair profile, then the
//! overrides of the source host and of the destination host, then any
//! directed pair override. Delays and jitters add, loss ratios compound,
//! rates take the minimum.

use std::collections::{BTreeMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::Deserialize;

/// Name of the host that every lab adds for the collector.
pub const CONTROL_HOST: &str = "control";
/// Zone of the control host.
pub const CONTROL_ZONE: &str = "lab-control";
/// Most hosts a lab may have (addresses are 198.18.Z.H with H below 250).
pub const MAX_HOSTS_PER_ZONE: usize = 200;
/// Most zones a lab may have.
pub const MAX_ZONES: usize = 200;

/// One direction of a link.
#[derive(Debug, Clone, Copy, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkProfile {
    /// One-way delay, ms.
    #[serde(default)]
    pub delay_ms: f64,
    /// Uniform jitter around the delay, plus or minus, ms.
    #[serde(default)]
    pub jitter_ms: f64,
    /// Share of packets dropped, 0 to 1.
    #[serde(default)]
    pub loss: f64,
    /// Rate limit in Mbit/s; none means unlimited.
    #[serde(default)]
    pub rate_mbit: Option<f64>,
}

impl LinkProfile {
    /// This profile followed by `other` on the same path.
    pub fn then(&self, other: &LinkProfile) -> LinkProfile {
        LinkProfile {
            delay_ms: self.delay_ms + other.delay_ms,
            jitter_ms: self.jitter_ms + other.jitter_ms,
            loss: 1.0 - (1.0 - self.loss) * (1.0 - other.loss),
            rate_mbit: match (self.rate_mbit, other.rate_mbit) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
        }
    }

    fn check(&self, what: &str) -> Result<(), TopologyError> {
        let bad = |reason: &str| Err(TopologyError::Invalid(format!("{what}: {reason}")));
        if !(self.delay_ms.is_finite() && (0.0..=10_000.0).contains(&self.delay_ms)) {
            return bad("delay_ms must be between 0 and 10000");
        }
        if !(self.jitter_ms.is_finite()
            && (0.0..=self.delay_ms.max(0.0) + 1e-9).contains(&self.jitter_ms))
        {
            return bad("jitter_ms must be between 0 and delay_ms");
        }
        if !(self.loss.is_finite() && (0.0..=1.0).contains(&self.loss)) {
            return bad("loss must be between 0 and 1");
        }
        if self
            .rate_mbit
            .is_some_and(|rate| !(rate.is_finite() && rate > 0.0))
        {
            return bad("rate_mbit must be above 0");
        }
        Ok(())
    }
}

/// A zone and its hosts.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZoneSpec {
    /// Zone name.
    pub name: String,
    /// Region name.
    #[serde(default)]
    pub region: String,
    /// Host names.
    pub hosts: Vec<String>,
}

/// The link profile between two zones, the same both ways.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ZonePairSpec {
    /// The two zones.
    pub zones: [String; 2],
    /// The profile of each direction.
    #[serde(flatten)]
    pub profile: LinkProfile,
}

/// A directed override between two hosts.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PairSpec {
    /// Sending host.
    pub from: String,
    /// Receiving host.
    pub to: String,
    /// Added to the path from `from` to `to`.
    #[serde(flatten)]
    pub profile: LinkProfile,
}

/// A lab topology as written in its file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// The zones.
    pub zones: Vec<ZoneSpec>,
    /// Profile between two hosts of the same zone.
    #[serde(default)]
    pub intra_zone: LinkProfile,
    /// Profiles between zones.
    #[serde(default)]
    pub inter_zone: Vec<ZonePairSpec>,
    /// Profile between zones that `inter_zone` does not name.
    #[serde(default)]
    pub default_inter_zone: LinkProfile,
    /// Profile between any host and the control host.
    #[serde(default)]
    pub control_link: LinkProfile,
    /// Per-host overrides, applied to every path in and out of the host.
    #[serde(default)]
    pub hosts: BTreeMap<String, LinkProfile>,
    /// Directed overrides.
    #[serde(default)]
    pub pairs: Vec<PairSpec>,
    /// The address families every host has.
    #[serde(default)]
    pub families: Families,
    /// Further networks every host is on (rails), each with links of its
    /// own; the control host is on none of them.
    #[serde(default)]
    pub networks: Vec<NetworkSpec>,
    /// Hosts whose agent is told another zone than the one the host sits
    /// in (a node labelled wrong): host name to the zone its label says.
    #[serde(default)]
    pub zone_labels: BTreeMap<String, String>,
}

/// Most further networks a lab may have.
pub const MAX_NETWORKS: usize = 8;

/// A further network every worker host is on, with links of its own (a
/// rail: its own switches, its own faulty NICs). Network k (from 0) gives
/// zone i's host j the address 172.(16+k).i.j/16, on an interface named
/// `net{k+1}` (as Multus names secondary interfaces).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkSpec {
    /// The network's name, as agents are told it (`--network NAME=...`).
    pub name: String,
    /// Profile between two hosts of the same zone.
    #[serde(default)]
    pub intra_zone: LinkProfile,
    /// Profiles between zones.
    #[serde(default)]
    pub inter_zone: Vec<ZonePairSpec>,
    /// Profile between zones that `inter_zone` does not name.
    #[serde(default)]
    pub default_inter_zone: LinkProfile,
    /// Per-host overrides on this network.
    #[serde(default)]
    pub hosts: BTreeMap<String, LinkProfile>,
    /// Directed overrides on this network.
    #[serde(default)]
    pub pairs: Vec<PairSpec>,
}

impl NetworkSpec {
    /// The block of network number `k`'s addresses.
    pub fn block(k: usize) -> String {
        format!("172.{}.0.0/16", 16 + k)
    }

    /// The interface of network number `k` in every host.
    pub fn interface(k: usize) -> String {
        format!("net{}", k + 1)
    }
}

/// Which links a path is looked up in: the primary network's (the
/// topology's own fields) or a further network's.
#[derive(Debug, Clone, Copy)]
struct LinkTable<'t> {
    intra_zone: &'t LinkProfile,
    inter_zone: &'t [ZonePairSpec],
    default_inter_zone: &'t LinkProfile,
    hosts: &'t BTreeMap<String, LinkProfile>,
    pairs: &'t [PairSpec],
}

impl LinkTable<'_> {
    /// The profile between two zones (or within one), before host overrides.
    fn zone_profile(&self, a: &str, b: &str) -> LinkProfile {
        if a == b {
            return *self.intra_zone;
        }
        self.inter_zone
            .iter()
            .find(|p| (p.zones[0] == a && p.zones[1] == b) || (p.zones[1] == a && p.zones[0] == b))
            .map_or(*self.default_inter_zone, |p| p.profile)
    }

    /// Checks every profile and name in the table.
    fn check(
        &self,
        what: &str,
        zones: &HashSet<String>,
        names: &HashSet<String>,
    ) -> Result<(), TopologyError> {
        let invalid = |message: String| Err(TopologyError::Invalid(message));
        self.intra_zone.check(&format!("{what}intra_zone"))?;
        self.default_inter_zone
            .check(&format!("{what}default_inter_zone"))?;
        for pair in self.inter_zone {
            for zone in &pair.zones {
                if !zones.contains(zone) {
                    return invalid(format!("{what}inter_zone names unknown zone {zone:?}"));
                }
            }
            pair.profile
                .check(&format!("{what}inter_zone {:?}", pair.zones))?;
        }
        for (host, profile) in self.hosts {
            if !names.contains(host) {
                return invalid(format!("{what}hosts names unknown host {host:?}"));
            }
            profile.check(&format!("{what}host {host}"))?;
        }
        for pair in self.pairs {
            for host in [&pair.from, &pair.to] {
                if !names.contains(host) {
                    return invalid(format!("{what}pairs names unknown host {host:?}"));
                }
            }
            pair.profile
                .check(&format!("{what}pair {} -> {}", pair.from, pair.to))?;
        }
        Ok(())
    }
}

/// The address families of a lab's hosts. Every family goes through the
/// same emulated links, so a dual-stack pair has one truth for both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Families {
    /// IPv4 only, in 198.18.0.0/15 (RFC 2544's benchmarking range).
    #[default]
    Ipv4,
    /// IPv6 only, in 2001:2::/48 (RFC 5180's benchmarking range).
    Ipv6,
    /// Both: IPv4 first (the primary address), then IPv6.
    Dual,
}

impl Families {
    /// The name a topology file uses.
    pub fn name(self) -> &'static str {
        match self {
            Families::Ipv4 => "ipv4",
            Families::Ipv6 => "ipv6",
            Families::Dual => "dual",
        }
    }

    /// The addresses of the host numbered `(subnet, host)`, the primary
    /// first: 198.18.S.H and 2001:2:0:S::H.
    fn addresses(self, subnet: u8, host: u8) -> Vec<IpAddr> {
        let v4 = IpAddr::V4(Ipv4Addr::new(198, 18, subnet, host));
        let v6 = IpAddr::V6(Ipv6Addr::new(
            0x2001,
            2,
            0,
            u16::from(subnet),
            0,
            0,
            0,
            u16::from(host),
        ));
        match self {
            Families::Ipv4 => vec![v4],
            Families::Ipv6 => vec![v6],
            Families::Dual => vec![v4, v6],
        }
    }
}

/// Why a topology cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TopologyError {
    /// Not YAML of the expected shape.
    #[error("topology is not valid YAML of the expected shape: {0}")]
    Parse(String),
    /// A value out of range or a name that does not fit.
    #[error("invalid topology: {0}")]
    Invalid(String),
    /// No shipped topology has that name.
    #[error("no topology named {0:?} (shipped: {1})")]
    Unknown(String, String),
    /// A topology file that could not be read (the path, the reason).
    #[error("reading {0}: {1}")]
    Read(String, String),
}

/// The topologies that ship with the lab, by name.
pub const SHIPPED: [(&str, &str); 6] = [
    ("default", include_str!("../topologies/default.yaml")),
    ("small", include_str!("../topologies/small.yaml")),
    ("bench", include_str!("../topologies/bench.yaml")),
    ("ipv6", include_str!("../topologies/ipv6.yaml")),
    ("dual", include_str!("../topologies/dual.yaml")),
    ("rails", include_str!("../topologies/rails.yaml")),
];

/// A host of the lab, with its place and address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    /// Host name.
    pub name: String,
    /// Zone name.
    pub zone: String,
    /// Region name.
    pub region: String,
    /// The address peers probe and the collector is reached at: IPv4
    /// unless the lab is IPv6 only.
    pub address: IpAddr,
    /// Every address of the host, `address` first (see [`Families`]).
    pub addresses: Vec<IpAddr>,
    /// Its address on each of the topology's further networks, in their
    /// order (none for the control host).
    pub networks: Vec<IpAddr>,
}

/// Faults switched on while the lab runs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Faults {
    /// Zones cut off from everything outside them (100% loss both ways).
    pub cut_zones: HashSet<String>,
    /// Extra directed profiles, by (from, to) host.
    pub pairs: BTreeMap<(String, String), LinkProfile>,
}

impl Topology {
    /// A shipped topology by name.
    pub fn named(name: &str) -> Result<Self, TopologyError> {
        let text = SHIPPED
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, text)| *text)
            .ok_or_else(|| {
                let names: Vec<&str> = SHIPPED.iter().map(|(n, _)| *n).collect();
                TopologyError::Unknown(name.to_owned(), names.join(", "))
            })?;
        Self::parse(text)
    }

    /// A shipped topology by name, or the topology in the file at that
    /// path.
    pub fn load(name_or_path: &str) -> Result<Self, TopologyError> {
        if std::path::Path::new(name_or_path).is_file() {
            let text = std::fs::read_to_string(name_or_path)
                .map_err(|err| TopologyError::Read(name_or_path.to_owned(), err.to_string()))?;
            return Self::parse(&text);
        }
        Self::named(name_or_path)
    }

    /// Parses and checks a topology.
    pub fn parse(text: &str) -> Result<Self, TopologyError> {
        let topology: Topology =
            serde_yaml::from_str(text).map_err(|err| TopologyError::Parse(err.to_string()))?;
        topology.check()?;
        Ok(topology)
    }

    fn check(&self) -> Result<(), TopologyError> {
        let invalid = |message: String| Err(TopologyError::Invalid(message));
        if self.zones.is_empty() || self.zones.len() > MAX_ZONES {
            return invalid(format!("a lab needs 1 to {MAX_ZONES} zones"));
        }
        let mut names = HashSet::from([CONTROL_HOST.to_owned()]);
        let mut zones = HashSet::from([CONTROL_ZONE.to_owned()]);
        for zone in &self.zones {
            if !zones.insert(zone.name.clone()) {
                return invalid(format!("zone {:?} appears twice or is reserved", zone.name));
            }
            if zone.hosts.is_empty() || zone.hosts.len() > MAX_HOSTS_PER_ZONE {
                return invalid(format!(
                    "zone {:?} needs 1 to {MAX_HOSTS_PER_ZONE} hosts",
                    zone.name
                ));
            }
            for host in &zone.hosts {
                let valid = !host.is_empty()
                    && host.len() <= 24
                    && host.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
                if !valid {
                    return invalid(format!(
                        "host name {host:?} must be 1 to 24 letters, digits or '-'"
                    ));
                }
                if !names.insert(host.clone()) {
                    return invalid(format!("host {host:?} appears twice or is reserved"));
                }
            }
        }
        self.control_link.check("control_link")?;
        self.table(None).check("", &zones, &names)?;
        for (host, zone) in &self.zone_labels {
            if !names.contains(host) || host == CONTROL_HOST {
                return invalid(format!(
                    "zone_labels names {host:?}, which is no worker host"
                ));
            }
            if !zones.contains(zone) || zone == CONTROL_ZONE {
                return invalid(format!(
                    "zone_labels gives {host:?} the unknown zone {zone:?}"
                ));
            }
        }
        if self.networks.len() > MAX_NETWORKS {
            return invalid(format!("a lab has at most {MAX_NETWORKS} further networks"));
        }
        let mut networks = HashSet::new();
        for (k, network) in self.networks.iter().enumerate() {
            let valid = (1..=32).contains(&network.name.len())
                && network.name.starts_with(|c: char| c.is_ascii_lowercase())
                && network
                    .name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !network.name.starts_with("primary");
            if !valid {
                return invalid(format!(
                    "network name {:?} must be 1 to 32 lowercase letters, digits or '-', not primary",
                    network.name
                ));
            }
            if !networks.insert(network.name.as_str()) {
                return invalid(format!("network {:?} appears twice", network.name));
            }
            self.table(Some(k))
                .check(&format!("network {}: ", network.name), &zones, &names)?;
        }
        Ok(())
    }

    /// The links of the primary network (`None`) or of further network
    /// number `k`.
    fn table(&self, network: Option<usize>) -> LinkTable<'_> {
        match network.and_then(|k| self.networks.get(k)) {
            None => LinkTable {
                intra_zone: &self.intra_zone,
                inter_zone: &self.inter_zone,
                default_inter_zone: &self.default_inter_zone,
                hosts: &self.hosts,
                pairs: &self.pairs,
            },
            Some(spec) => LinkTable {
                intra_zone: &spec.intra_zone,
                inter_zone: &spec.inter_zone,
                default_inter_zone: &spec.default_inter_zone,
                hosts: &spec.hosts,
                pairs: &spec.pairs,
            },
        }
    }

    /// The number of the further network called `name`.
    pub fn network_number(&self, name: &str) -> Option<usize> {
        self.networks.iter().position(|n| n.name == name)
    }

    /// Every host with its addresses, zone by zone, then the control host.
    /// Zone i (from 1) gets 198.18.i.0/24 and 2001:2:0:i::/64, host j
    /// (from 1) its .j and ::j address; the control host is 198.18.0.2 and
    /// 2001:2::2 (see [`Families`] for which a lab has).
    pub fn hosts(&self) -> Vec<HostSpec> {
        let spec = |name: &str, zone: &str, region: &str, subnet: u8, host: u8| {
            let addresses = self.families.addresses(subnet, host);
            let networks = if name == CONTROL_HOST {
                Vec::new()
            } else {
                (0..self.networks.len())
                    .map(|k| IpAddr::V4(Ipv4Addr::new(172, 16 + k as u8, subnet, host)))
                    .collect()
            };
            HostSpec {
                name: name.to_owned(),
                zone: zone.to_owned(),
                region: region.to_owned(),
                address: addresses[0],
                addresses,
                networks,
            }
        };
        let mut hosts = Vec::new();
        for (z, zone) in self.zones.iter().enumerate() {
            for (h, host) in zone.hosts.iter().enumerate() {
                hosts.push(spec(
                    host,
                    &zone.name,
                    &zone.region,
                    (z + 1) as u8,
                    (h + 1) as u8,
                ));
            }
        }
        hosts.push(spec(CONTROL_HOST, CONTROL_ZONE, "", 0, 2));
        hosts
    }

    /// The zone `host`'s agent is told: its label, which is where it sits
    /// unless `zone_labels` says otherwise.
    pub fn zone_label<'a>(&'a self, host: &'a HostSpec) -> &'a str {
        self.zone_labels
            .get(&host.name)
            .map_or(&host.zone, String::as_str)
    }

    /// The profile of the path from `src` to `dst` (hosts as listed by
    /// [`Topology::hosts`]), with `faults` applied.
    pub fn path(&self, src: &HostSpec, dst: &HostSpec, faults: &Faults) -> LinkProfile {
        self.path_on(None, src, dst, faults)
    }

    /// The same on the primary network (`None`) or on further network
    /// number `k`. Faults switched at run time hold on the primary
    /// network; a cut zone is cut off on every network.
    pub fn path_on(
        &self,
        network: Option<usize>,
        src: &HostSpec,
        dst: &HostSpec,
        faults: &Faults,
    ) -> LinkProfile {
        let table = self.table(network);
        let base = if src.name == CONTROL_HOST || dst.name == CONTROL_HOST {
            self.control_link
        } else {
            table.zone_profile(&src.zone, &dst.zone)
        };
        let none = LinkProfile::default();
        let mut path = base
            .then(table.hosts.get(&src.name).unwrap_or(&none))
            .then(table.hosts.get(&dst.name).unwrap_or(&none));
        for pair in table
            .pairs
            .iter()
            .filter(|p| p.from == src.name && p.to == dst.name)
        {
            path = path.then(&pair.profile);
        }
        if network.is_none()
            && let Some(extra) = faults.pairs.get(&(src.name.clone(), dst.name.clone()))
        {
            path = path.then(extra);
        }
        let cut = |zone: &str| faults.cut_zones.contains(zone);
        if src.zone != dst.zone && (cut(&src.zone) || cut(&dst.zone)) {
            path.loss = 1.0;
        }
        path
    }

    /// The profile between two zones (or within one), before host overrides.
    pub fn zone_profile(&self, a: &str, b: &str) -> LinkProfile {
        self.table(None).zone_profile(a, b)
    }

    /// The topology in words: hosts by zone, then the configured RTT, loss
    /// and rate between every two zones and of every host override.
    pub fn describe(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let hosts = self.hosts();
        for zone in &self.zones {
            let members: Vec<String> = hosts
                .iter()
                .filter(|h| h.zone == zone.name)
                .map(|h| {
                    let addresses: Vec<String> = h
                        .addresses
                        .iter()
                        .chain(&h.networks)
                        .map(ToString::to_string)
                        .collect();
                    format!("{} {}", h.name, addresses.join(" "))
                })
                .collect();
            let region = if zone.region.is_empty() {
                String::new()
            } else {
                format!(" ({})", zone.region)
            };
            let _ = writeln!(out, "{}{region}: {}", zone.name, members.join(", "));
        }
        for (i, a) in self.zones.iter().enumerate() {
            for b in &self.zones[i..] {
                let link = self.zone_profile(&a.name, &b.name);
                let loss = if link.loss > 0.0 {
                    format!(", {:.1}% loss each way", link.loss * 100.0)
                } else {
                    String::new()
                };
                let rate = link
                    .rate_mbit
                    .map_or_else(String::new, |rate| format!(", {rate} Mbit/s"));
                let _ = writeln!(
                    out,
                    "{} <-> {}: RTT {:.1} ms, jitter +-{:.2} ms each way{loss}{rate}",
                    a.name,
                    b.name,
                    2.0 * link.delay_ms,
                    link.jitter_ms
                );
            }
        }
        for (host, profile) in &self.hosts {
            let mut notes = Vec::new();
            if profile.loss > 0.0 {
                notes.push(format!("{:.1}% loss each way", profile.loss * 100.0));
            }
            if let Some(rate) = profile.rate_mbit {
                notes.push(format!("{rate} Mbit/s"));
            }
            if profile.delay_ms > 0.0 {
                notes.push(format!("+{} ms each way", profile.delay_ms));
            }
            let _ = writeln!(out, "{host}: {}", notes.join(", "));
        }
        for (k, network) in self.networks.iter().enumerate() {
            let table = self.table(Some(k));
            let intra = table.zone_profile("", "");
            let overrides: Vec<String> = network
                .hosts
                .iter()
                .map(|(host, p)| {
                    format!(
                        "{host} +{} ms each way, {:.1}% loss",
                        p.delay_ms,
                        p.loss * 100.0
                    )
                })
                .collect();
            let _ = writeln!(
                out,
                "network {} ({} on {}): RTT {:.1} ms inside a zone{}{}",
                network.name,
                NetworkSpec::block(k),
                NetworkSpec::interface(k),
                2.0 * intra.delay_ms,
                if overrides.is_empty() { "" } else { "; " },
                overrides.join("; ")
            );
        }
        out
    }

    /// The round trip a probe from `src` to `dst` makes: the configured
    /// RTT (ms) and the share of probes that come back.
    pub fn round_trip(&self, src: &HostSpec, dst: &HostSpec, faults: &Faults) -> (f64, f64) {
        self.round_trip_on(None, src, dst, faults)
    }

    /// The same on the primary network (`None`) or on further network
    /// number `k`.
    pub fn round_trip_on(
        &self,
        network: Option<usize>,
        src: &HostSpec,
        dst: &HostSpec,
        faults: &Faults,
    ) -> (f64, f64) {
        let there = self.path_on(network, src, dst, faults);
        let back = self.path_on(network, dst, src, faults);
        (
            there.delay_ms + back.delay_ms,
            (1.0 - there.loss) * (1.0 - back.loss),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_topologies_parse() {
        for (name, _) in SHIPPED {
            let topology = Topology::named(name).unwrap();
            assert!(!topology.hosts().is_empty());
        }
        assert!(matches!(
            Topology::named("nope"),
            Err(TopologyError::Unknown(..))
        ));
    }

    #[test]
    fn families_give_each_host_its_addresses_the_primary_first() {
        let host = |topology: &Topology, name: &str| {
            topology
                .hosts()
                .into_iter()
                .find(|h| h.name == name)
                .unwrap()
        };
        let ipv6 = Topology::named("ipv6").unwrap();
        assert_eq!(ipv6.families, Families::Ipv6);
        let b3 = host(&ipv6, "b3");
        assert_eq!(b3.address.to_string(), "2001:2:0:2::3");
        assert_eq!(b3.addresses, vec![b3.address]);
        assert_eq!(host(&ipv6, "control").address.to_string(), "2001:2::2");
        let dual = Topology::named("dual").unwrap();
        let a2 = host(&dual, "a2");
        let addresses: Vec<String> = a2.addresses.iter().map(ToString::to_string).collect();
        assert_eq!(addresses, ["198.18.1.2", "2001:2:0:1::2"]);
        assert_eq!(a2.address, a2.addresses[0]);
        assert_eq!(Topology::named("default").unwrap().families, Families::Ipv4);
        assert!(matches!(
            Topology::parse("families: ipv5\nzones: [{name: z, hosts: [h]}]"),
            Err(TopologyError::Parse(_))
        ));
    }

    #[test]
    fn default_paths_combine_zone_and_host_profiles() {
        let topology = Topology::named("default").unwrap();
        let hosts = topology.hosts();
        let host = |name: &str| hosts.iter().find(|h| h.name == name).unwrap();
        let none = Faults::default();
        assert_eq!(host("a1").address.to_string(), "198.18.1.1");
        assert_eq!(host("c3").address.to_string(), "198.18.3.3");
        assert_eq!(host("control").address.to_string(), "198.18.0.2");
        assert_eq!(topology.path(host("a1"), host("a2"), &none).delay_ms, 0.1);
        assert_eq!(topology.path(host("c1"), host("a2"), &none).delay_ms, 15.0);
        assert!((topology.path(host("a1"), host("a3"), &none).loss - 0.05).abs() < 1e-12);
        assert_eq!(
            topology.path(host("b2"), host("c1"), &none).rate_mbit,
            Some(50.0)
        );
        let (rtt, delivered) = topology.round_trip(host("a1"), host("b1"), &none);
        assert_eq!((rtt, delivered), (5.0, 1.0));
        let (_, delivered) = topology.round_trip(host("a3"), host("a1"), &none);
        assert!((delivered - 0.95 * 0.95).abs() < 1e-12);
    }

    #[test]
    fn faults_cut_zones_and_add_directed_loss() {
        let topology = Topology::named("default").unwrap();
        let hosts = topology.hosts();
        let host = |name: &str| hosts.iter().find(|h| h.name == name).unwrap();
        let mut faults = Faults::default();
        faults.cut_zones.insert("zone-c".into());
        faults.pairs.insert(
            ("a1".into(), "a2".into()),
            LinkProfile {
                loss: 0.3,
                ..LinkProfile::default()
            },
        );
        assert_eq!(topology.path(host("a1"), host("c1"), &faults).loss, 1.0);
        assert_eq!(
            topology.path(host("c1"), host("control"), &faults).loss,
            1.0
        );
        assert_eq!(topology.path(host("c1"), host("c2"), &faults).loss, 0.0);
        assert!((topology.path(host("a1"), host("a2"), &faults).loss - 0.3).abs() < 1e-12);
        assert_eq!(topology.path(host("a2"), host("a1"), &faults).loss, 0.0);
    }

    #[test]
    fn a_further_network_has_its_own_links_and_addresses() {
        let topology = Topology::named("rails").unwrap();
        let hosts = topology.hosts();
        let host = |name: &str| hosts.iter().find(|h| h.name == name).unwrap();
        let none = Faults::default();
        assert_eq!(host("b3").networks, vec![IpAddr::from([172, 16, 2, 3])]);
        assert!(host("control").networks.is_empty());
        let rail = topology.network_number("rail-0");
        assert_eq!(rail, Some(0));
        assert_eq!(topology.network_number("rail-9"), None);
        // a3 is lossy on the primary network only, b1 on rail-0 only.
        assert!((topology.path(host("a3"), host("a1"), &none).loss - 0.1).abs() < 1e-12);
        assert_eq!(
            topology.path_on(rail, host("a3"), host("a1"), &none).loss,
            0.0
        );
        assert_eq!(topology.path(host("b1"), host("b2"), &none).loss, 0.0);
        assert!((topology.path_on(rail, host("b1"), host("b2"), &none).loss - 0.1).abs() < 1e-12);
        // Each network's delays.
        let (rtt, _) = topology.round_trip_on(rail, host("c1"), host("c2"), &none);
        assert!((rtt - 2.1).abs() < 1e-9, "{rtt}");
        let (rtt, _) = topology.round_trip(host("c1"), host("c2"), &none);
        assert!((rtt - 0.2).abs() < 1e-9, "{rtt}");
        // A fault switched at run time holds on the primary network only;
        // a cut zone is cut on every network.
        let mut faults = Faults::default();
        faults.pairs.insert(
            ("a1".into(), "a2".into()),
            LinkProfile {
                loss: 0.3,
                ..LinkProfile::default()
            },
        );
        faults.cut_zones.insert("zone-c".into());
        assert_eq!(
            topology.path_on(rail, host("a1"), host("a2"), &faults).loss,
            0.0
        );
        assert_eq!(
            topology.path_on(rail, host("a1"), host("c1"), &faults).loss,
            1.0
        );
        assert!(
            topology
                .describe()
                .contains("network rail-0 (172.16.0.0/16 on net1)")
        );
    }

    #[test]
    fn bad_topologies_are_refused() {
        for (text, needle) in [
            ("zones: []", "1 to"),
            ("zones: [{name: a, hosts: [x, x]}]", "twice"),
            ("zones: [{name: a, hosts: [control]}]", "reserved"),
            (
                "zones: [{name: a, hosts: [x]}]\nintra_zone: {loss: 2}",
                "loss",
            ),
            (
                "zones: [{name: a, hosts: [x]}]\nintra_zone: {delay_ms: 1, jitter_ms: 2}",
                "jitter",
            ),
            (
                "zones: [{name: a, hosts: [x]}]\nhosts: {y: {loss: 0.1}}",
                "unknown host",
            ),
            ("zones: [{name: a, hosts: ['x y']}]", "letters"),
            ("zones: [{name: a, hosts: [x]}]\ncolour: red", "colour"),
            (
                "zones: [{name: a, hosts: [x]}]\nnetworks: [{name: Rail}]",
                "network name",
            ),
            (
                "zones: [{name: a, hosts: [x]}]\nnetworks: [{name: primary}]",
                "network name",
            ),
            (
                "zones: [{name: a, hosts: [x]}]\nnetworks: [{name: r}, {name: r}]",
                "twice",
            ),
            (
                "zones: [{name: a, hosts: [x]}]\nnetworks: [{name: r, hosts: {y: {loss: 0.1}}}]",
                "network r: hosts names unknown host",
            ),
            (
                "zones: [{name: a, hosts: [x]}]\nnetworks: [{name: r, intra_zone: {loss: 2}}]",
                "network r: intra_zone",
            ),
        ] {
            let err = Topology::parse(text).unwrap_err().to_string();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }
}
