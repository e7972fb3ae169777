//! From the collector's wire matrix back to the core's scored matrix, so
//! that the extender runs the very placement code the collector runs.

use netaware_core::matrix::{PairSummary, Throughput};
use netaware_core::score::{Source, Terms};
use netaware_core::snapshot::{NodeView, ScoredMatrix, ScoredPair};
use netaware_core::{NodeInfo, NodeKind};
use netaware_proto::v1 as pb;

fn source(value: i32) -> Source {
    match pb::Source::try_from(value) {
        Ok(pb::Source::Measured) => Source::Measured,
        Ok(pb::Source::ZoneAverage) => Source::ZoneAverage,
        _ => Source::Unknown,
    }
}

fn seconds_to_ms(seconds: f64) -> Option<u64> {
    (seconds.is_finite() && seconds >= 0.0).then_some((seconds * 1e3) as u64)
}

/// The scored matrix a wire matrix describes. Pairs naming unknown nodes
/// are left out; figures out of range are clamped, never trusted blindly.
pub fn scored_matrix(matrix: &pb::Matrix) -> ScoredMatrix {
    let nodes: Vec<NodeView> = matrix
        .nodes
        .iter()
        .map(|n| NodeView {
            info: NodeInfo {
                name: n.name.clone(),
                address: n.address.clone(),
                zone: n.zone.clone(),
                region: n.region.clone(),
                kind: if n.kind == "inventory" {
                    NodeKind::Inventory
                } else {
                    NodeKind::Agent
                },
            },
            stale: n.stale,
            last_report_age_ms: n.last_report_age_s.and_then(seconds_to_ms),
        })
        .collect();
    let index: std::collections::HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.info.name.as_str(), i))
        .collect();
    let unit = |v: f64| {
        if v.is_finite() {
            v.clamp(0.0, 1.0)
        } else {
            0.0
        }
    };
    let pairs = matrix
        .pairs
        .iter()
        .filter_map(|p| {
            let (src, dst) = (*index.get(p.src.as_str())?, *index.get(p.dst.as_str())?);
            let terms = p.terms.unwrap_or_default();
            Some(ScoredPair {
                src,
                dst,
                summary: PairSummary {
                    rtt_median_ms: p.rtt_median_ms,
                    rtt_p99_ms: p.rtt_p99_ms,
                    jitter_ms: p.jitter_ms,
                    loss_ratio: p.loss_ratio.map(unit),
                    samples: p.samples,
                    last_end: None,
                    throughput: p.throughput_bps.map(|bps| Throughput {
                        bps,
                        at: 0,
                        retransmits: p.throughput_retransmits,
                        tcp_rtt_ms: p.throughput_tcp_rtt_ms,
                    }),
                    one_way_loss_ratio: p.one_way_loss_ratio.map(unit),
                },
                age_ms: seconds_to_ms(p.age_s),
                stale: p.stale,
                terms: Terms {
                    delay: unit(terms.delay),
                    loss: unit(terms.loss),
                    throughput: unit(terms.throughput),
                    delay_source: source(terms.delay_source),
                    loss_source: source(terms.loss_source),
                    throughput_source: source(terms.throughput_source),
                    dead: p.loss_ratio == Some(1.0) && !p.stale,
                },
                quality: unit(p.quality),
            })
        })
        .collect();
    ScoredMatrix::from_parts(nodes, pairs)
}
