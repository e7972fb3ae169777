//! The distribution of the pairs' median RTTs between each two zones, as
//! a Prometheus histogram: `netaware_zone_pair_rtt_median_seconds{network,
//! src_zone, dst_zone}`.
//!
//! The zone-pair gauges give a mean (`netaware_zone_pair_rtt_seconds`),
//! which hides what matters when a zone pair is not one thing: two racks
//! behind a slow uplink make a zone's pairs bimodal, and a mean of both
//! modes describes neither. A histogram keeps the shape, and unlike a
//! quantile it adds up across zone pairs and over time
//! (`histogram_quantile(0.99, sum by (le) (rate(..._bucket[10m])))`).
//! Every topology round observes each fresh measured pair's median once,
//! so the counts grow with the pairs and the rounds, and the series stay
//! zones x zones x networks x buckets whatever the cluster's size.

use std::collections::HashMap;

use netaware_core::network::Network;
use netaware_core::scored::ScoredMatrix;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

/// The histogram's labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ZonePairRttLabels {
    /// The network the pairs were measured over.
    pub network: String,
    /// Zone of the probing nodes.
    pub src_zone: String,
    /// Zone of the probed nodes.
    pub dst_zone: String,
}

/// The histograms, by network and zone pair.
pub type ZonePairRtts = Family<ZonePairRttLabels, Histogram>;

/// Buckets from 50 us (a rack) to about 100 ms (a continent), doubling.
pub fn buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.0, 12))
}

/// The fresh measured pairs' median RTTs (s) of `scored`, by (src zone,
/// dst zone); pairs without a median or a zone are left out.
pub fn medians_by_zone_pair(scored: &ScoredMatrix) -> HashMap<(&str, &str), Vec<f64>> {
    let nodes = scored.nodes();
    let mut by_pair: HashMap<(&str, &str), Vec<f64>> = HashMap::new();
    for pair in scored.pairs().iter().filter(|p| !p.stale) {
        let Some(rtt) = pair
            .summary
            .rtt_median_ms
            .filter(|r| r.is_finite() && *r >= 0.0)
        else {
            continue;
        };
        let (src, dst) = (&nodes[pair.src].info.zone, &nodes[pair.dst].info.zone);
        if src.is_empty() || dst.is_empty() {
            continue;
        }
        by_pair
            .entry((src.as_str(), dst.as_str()))
            .or_default()
            .push(rtt / 1_000.0);
    }
    by_pair
}

/// Observes every fresh pair of `scored`, measured over `network`.
pub fn observe(histograms: &ZonePairRtts, network: &Network, scored: &ScoredMatrix) {
    for ((src, dst), rtts) in medians_by_zone_pair(scored) {
        let histogram = histograms.get_or_create(&ZonePairRttLabels {
            network: network.as_str().to_owned(),
            src_zone: src.to_owned(),
            dst_zone: dst.to_owned(),
        });
        for rtt in rtts {
            histogram.observe(rtt);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{peer, scored_after};
    use netaware_core::rings::is_kept_as;

    #[test]
    fn a_bimodal_zone_pair_keeps_both_modes() {
        // Inside zone a: one pair at 0.08 ms, one at 3 ms (across a slow
        // uplink); a -> b at 5 ms.
        let nodes = [("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b")];
        let peers = vec![
            peer("a2", 0.08, 10, 10),
            peer("a3", 3.0, 10, 10),
            peer("b1", 5.0, 10, 10),
        ];
        let scored = scored_after(&nodes, "a1", peers);
        let by_pair = medians_by_zone_pair(&scored);
        let mut inside = by_pair[&("a", "a")].clone();
        inside.sort_by(f64::total_cmp);
        // Within the precision the matrix keeps figures at.
        let kept_as = |kept: &[f64], recorded: &[f64]| {
            kept.len() == recorded.len()
                && kept.iter().zip(recorded).all(|(k, r)| is_kept_as(*k, *r))
        };
        assert!(kept_as(&inside, &[0.000_08, 0.003]), "{inside:?}");
        assert!(kept_as(&by_pair[&("a", "b")], &[0.005]));

        let histograms = ZonePairRtts::new_with_constructor(buckets);
        observe(&histograms, &Network::primary(), &scored);
        let mut text = String::new();
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register("zone_pair_rtt_median_seconds", "test", histograms);
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        // Both modes stay apart: one pair under 0.1 ms, none from there
        // to 1.6 ms, the other by 3.2 ms.
        let bucket = |le: &str| {
            text.lines()
                .find(|l| {
                    l.contains("src_zone=\"a\",dst_zone=\"a\"")
                        && l.contains(&format!("le=\"{le}\""))
                })
                .and_then(|l| l.rsplit(' ').next())
                .map(str::to_owned)
                .unwrap_or_else(|| panic!("no bucket {le} in:\n{text}"))
        };
        assert_eq!(bucket("0.0001"), "1");
        assert_eq!(bucket("0.0016"), "1");
        assert_eq!(bucket("0.0032"), "2");
    }
}
