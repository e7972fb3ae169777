//! What the simulator's unit tests share: a small cluster, the timeline
//! of its perfect matrix, and label sets of racks given by size.

use rand::rngs::StdRng;

use crate::cluster::{Cluster, ClusterSpec, score_config};
use crate::information::{Timeline, View};
use crate::labels::NodePlaces;
use crate::perfect;

/// A cluster of `zones` zones of `nodes_per_zone` nodes, racks of
/// `nodes_per_rack` (0: none), with no degraded node or link.
pub(crate) fn clean_cluster(
    zones: usize,
    nodes_per_zone: usize,
    nodes_per_rack: usize,
    rng: &mut StdRng,
) -> Cluster {
    let spec = ClusterSpec {
        zones,
        nodes_per_zone,
        degraded_nodes: 0.0,
        degraded_links: 0.0,
        nodes_per_rack,
        ..ClusterSpec::default()
    };
    Cluster::generate(&spec, rng)
}

/// The view of `cluster`'s perfect matrix.
pub(crate) fn perfect_view(cluster: &Cluster, rng: &mut StdRng) -> View {
    View::with_defaults(perfect::matrix(cluster, &score_config(), 0, rng))
}

/// One view for all time: `cluster`'s perfect matrix.
pub(crate) fn perfect_timeline(cluster: &Cluster, rng: &mut StdRng) -> Timeline {
    Timeline::fixed(perfect_view(cluster, rng))
}

/// Labels of racks given as (zone, rack, nodes): nodes named
/// `{rack}-n{i:02}`, every one free.
pub(crate) fn racks(layout: &[(&str, &str, usize)]) -> (NodePlaces, Vec<String>) {
    let mut entries = Vec::new();
    for &(zone, rack, count) in layout {
        for i in 0..count {
            entries.push((zone, rack, format!("{rack}-n{i:02}")));
        }
    }
    let free = entries.iter().map(|(_, _, n)| n.clone()).collect();
    let places = NodePlaces::from_entries(
        entries
            .iter()
            .map(|(zone, rack, name)| (name.as_str(), *zone, Some(*rack), false)),
    );
    (places, free)
}
