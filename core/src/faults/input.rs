//! What fault localisation reads: one network's nodes (zone, block) and its
//! measured links, built from a scored matrix and the measured blocks, or
//! directly (the simulator); and the links each component covers.

use std::collections::{BTreeMap, HashMap};

use super::Component;
use crate::UnixMillis;
use crate::measured_topology::MeasuredTopology;
use crate::scored::ScoredMatrix;

/// A node, by where it is.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultNode {
    /// Its name.
    pub name: String,
    /// Its zone (index into [`FaultInput::zones`]).
    pub zone: usize,
    /// Its block (index into [`FaultInput::blocks`]), if it is in one.
    pub block: Option<usize>,
}

/// One measured directed pair.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultLink {
    /// The probing node (index).
    pub src: usize,
    /// The probed node (index).
    pub dst: usize,
    /// Probes sent.
    pub sent: u64,
    /// Probes lost.
    pub lost: u64,
    /// Median RTT (ms), if any reply came.
    pub rtt_ms: Option<f64>,
    /// The last throughput test, if one is fresh.
    pub goodput: Option<LinkGoodput>,
}

/// A link's last throughput test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkGoodput {
    /// Its goodput (bit/s).
    pub bps: f64,
    /// How long ago it ended (ms).
    pub age_ms: u64,
}

/// One network's nodes and links.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FaultInput {
    /// Zone names.
    pub zones: Vec<String>,
    /// Blocks: (zone index, block number in the zone).
    pub blocks: Vec<(usize, u32)>,
    /// Nodes.
    pub nodes: Vec<FaultNode>,
    /// Fresh measured links: probed, throughput-tested or both.
    pub links: Vec<FaultLink>,
}

impl FaultInput {
    /// The fresh measured pairs of `matrix` at `now`, with the blocks of
    /// `topology` (the same network's, if it has any).
    pub fn from_matrix(
        matrix: &ScoredMatrix,
        topology: Option<&MeasuredTopology>,
        now: UnixMillis,
    ) -> Self {
        let mut zone_index: BTreeMap<&str, usize> = BTreeMap::new();
        for node in matrix.nodes() {
            let next = zone_index.len();
            zone_index.entry(node.info.zone.as_str()).or_insert(next);
        }
        let mut zones = vec![String::new(); zone_index.len()];
        for (name, &i) in &zone_index {
            zones[i] = (*name).to_owned();
        }
        let mut blocks = Vec::new();
        let mut block_of: HashMap<&str, usize> = HashMap::new();
        if let Some(topology) = topology {
            for zone in &topology.zones {
                let Some(&z) = zone_index.get(zone.zone.as_str()) else {
                    continue;
                };
                for block in &zone.blocks {
                    blocks.push((z, block.number));
                    for node in &block.nodes {
                        block_of.insert(node.name.as_str(), blocks.len() - 1);
                    }
                }
            }
        }
        let nodes = matrix
            .nodes()
            .iter()
            .map(|node| FaultNode {
                name: node.info.name.clone(),
                zone: zone_index[node.info.zone.as_str()],
                block: block_of.get(node.info.name.as_str()).copied(),
            })
            .collect();
        // A pair counts for its probes while they are fresh, and for its
        // last throughput test while that is fresh (tests also run between
        // nodes that do not probe each other). At most one link a pair, in
        // one allocation: grown by doubling, 320,000 links took 38 MB
        // rather than 23, and a copy of each size on the way.
        let mut links = Vec::with_capacity(matrix.pairs().len());
        links.extend(matrix.pairs().iter().filter_map(|pair| {
            let probed = pair
                .summary
                .loss_ratio
                .filter(|_| !pair.stale && pair.summary.samples > 0);
            let goodput = pair
                .fresh_goodput()
                .filter(|g| g.is_finite() && *g > 0.0)
                .zip(pair.summary.throughput.as_ref())
                .map(|(bps, test)| LinkGoodput {
                    bps,
                    age_ms: now.saturating_sub(test.at),
                });
            if probed.is_none() && goodput.is_none() {
                return None;
            }
            let sent = if probed.is_some() {
                pair.summary.samples
            } else {
                0
            };
            let loss = probed.unwrap_or(0.0);
            Some(FaultLink {
                src: pair.src,
                dst: pair.dst,
                sent,
                lost: (loss.clamp(0.0, 1.0) * sent as f64).round() as u64,
                rtt_ms: probed.and(
                    pair.summary
                        .rtt_median_ms
                        .filter(|r| r.is_finite() && *r >= 0.0),
                ),
                goodput,
            })
        }));
        Self {
            zones,
            blocks,
            nodes,
            links,
        }
    }

    /// The size of each block.
    pub fn block_sizes(&self) -> Vec<usize> {
        let mut sizes = vec![0; self.blocks.len()];
        for block in self.nodes.iter().filter_map(|n| n.block) {
            sizes[block] += 1;
        }
        sizes
    }

    /// The components on `link`: both ends, both ends' block uplinks when
    /// the link leaves a block of two nodes or more, the zone link between
    /// two zones, and the pair.
    pub fn components_on(&self, link: &FaultLink, block_sizes: &[usize]) -> Vec<Component> {
        let (a, b) = (&self.nodes[link.src], &self.nodes[link.dst]);
        let mut on = vec![Component::Node(link.src), Component::Node(link.dst)];
        if a.block != b.block {
            for block in [a.block, b.block].into_iter().flatten() {
                if block_sizes[block] >= 2 {
                    on.push(Component::BlockUplink(block));
                }
            }
        }
        if a.zone != b.zone {
            on.push(Component::ZoneLink(a.zone.min(b.zone), a.zone.max(b.zone)));
        }
        on.push(Component::Pair(
            link.src.min(link.dst),
            link.src.max(link.dst),
        ));
        on
    }

    /// Every component with the links (indices into `links`) it covers,
    /// in a stable order; links for which `keep` is false are left out.
    pub fn covers(&self, keep: impl Fn(&FaultLink) -> bool) -> Vec<(Component, Vec<usize>)> {
        let sizes = self.block_sizes();
        let mut covers: BTreeMap<Component, Vec<usize>> = BTreeMap::new();
        for (i, link) in self.links.iter().enumerate() {
            if !keep(link) {
                continue;
            }
            for component in self.components_on(link, &sizes) {
                covers.entry(component).or_default().push(i);
            }
        }
        covers.into_iter().collect()
    }

    /// The nodes a component is about: a node, a block's nodes, a pair's
    /// two ends; none for a zone link.
    pub fn nodes_of(&self, component: Component) -> Vec<usize> {
        match component {
            Component::Node(node) => vec![node],
            Component::BlockUplink(block) => (0..self.nodes.len())
                .filter(|&n| self.nodes[n].block == Some(block))
                .collect(),
            Component::ZoneLink(..) => Vec::new(),
            Component::Pair(a, b) => vec![a, b],
        }
    }
}
