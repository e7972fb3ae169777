//! From the core's types to the wire's: matrix, zones and rankings.

use netaware_core::UnixMillis;
use netaware_core::placement::Ranking;
use netaware_core::score::{ScoreConfig, Source as CoreSource};
use netaware_core::snapshot::{ScoredMatrix, ZoneSummary as CoreZones};
use netaware_proto::v1 as pb;

const MS_PER_S: f64 = 1_000.0;

fn source(source: CoreSource) -> i32 {
    match source {
        CoreSource::Measured => pb::Source::Measured,
        CoreSource::ZoneAverage => pb::Source::ZoneAverage,
        CoreSource::Unknown => pb::Source::Unknown,
    }
    .into()
}

/// The wire form of a scored matrix.
pub fn matrix(
    scored: &ScoredMatrix,
    config: &ScoreConfig,
    version: u64,
    now: UnixMillis,
) -> pb::Matrix {
    let nodes = scored
        .nodes()
        .iter()
        .map(|node| pb::Node {
            name: node.info.name.clone(),
            zone: node.info.zone.clone(),
            region: node.info.region.clone(),
            address: node.info.address.clone(),
            stale: node.stale,
            kind: node.info.kind.as_str().to_owned(),
            last_report_age_s: node.last_report_age_ms.map(|ms| ms as f64 / MS_PER_S),
        })
        .collect();
    let pairs = scored
        .pairs()
        .iter()
        .map(|pair| {
            let s = &pair.summary;
            pb::Pair {
                src: scored.nodes()[pair.src].info.name.clone(),
                dst: scored.nodes()[pair.dst].info.name.clone(),
                rtt_median_ms: s.rtt_median_ms,
                rtt_p99_ms: s.rtt_p99_ms,
                jitter_ms: s.jitter_ms,
                loss_ratio: s.loss_ratio,
                throughput_bps: s.throughput.map(|tp| tp.bps),
                throughput_retransmits: s.throughput.and_then(|tp| tp.retransmits),
                throughput_tcp_rtt_ms: s.throughput.and_then(|tp| tp.tcp_rtt_ms),
                throughput_age_s: s
                    .throughput
                    .map(|tp| now.saturating_sub(tp.at) as f64 / MS_PER_S),
                samples: s.samples,
                age_s: pair.age_ms.map_or(-1.0, |ms| ms as f64 / MS_PER_S),
                quality: pair.quality,
                terms: Some(pb::Terms {
                    delay: pair.terms.delay,
                    loss: pair.terms.loss,
                    throughput: pair.terms.throughput,
                    delay_source: source(pair.terms.delay_source),
                    loss_source: source(pair.terms.loss_source),
                    throughput_source: source(pair.terms.throughput_source),
                }),
                stale: pair.stale,
                one_way_loss_ratio: s.one_way_loss_ratio,
            }
        })
        .collect();
    pb::Matrix {
        version,
        generated_unix_ms: now,
        nodes,
        pairs,
        weights: Some(pb::ScoreWeights {
            delay: config.weights.delay,
            loss: config.weights.loss,
            throughput: config.weights.throughput,
        }),
    }
}

/// The wire form of the zone summary.
pub fn zones(summary: &CoreZones) -> pb::ZoneSummary {
    pb::ZoneSummary {
        zones: summary
            .zones
            .iter()
            .map(|z| pb::Zone {
                name: z.name.clone(),
                region: z.region.clone(),
                nodes: z.nodes,
                fresh_nodes: z.fresh_nodes,
            })
            .collect(),
        zone_pairs: summary
            .zone_pairs
            .iter()
            .map(|z| pb::ZonePair {
                src_zone: z.src_zone.clone(),
                dst_zone: z.dst_zone.clone(),
                rtt_median_ms: z.rtt_median_ms,
                loss_ratio: z.loss_ratio,
                throughput_bps: z.throughput_bps,
                quality: z.quality,
                pairs: z.pairs,
                measured_pairs: z.measured_pairs,
            })
            .collect(),
    }
}

/// The wire form of a ranking.
pub fn ranking(ranking: &Ranking) -> pb::RankResponse {
    pb::RankResponse {
        zone: ranking.zone.clone().unwrap_or_default(),
        zone_reason: ranking.zone_reason.clone(),
        nodes: ranking
            .nodes
            .iter()
            .map(|n| pb::RankedNode {
                name: n.name.to_owned(),
                zone: n.zone.to_owned(),
                score: n.score,
                feasible: n.feasible(),
                reason: n.failure.clone().unwrap_or_default(),
                terms: Some(pb::NodeTerms {
                    quality: n.terms.quality,
                    delay: n.terms.delay,
                    loss: n.terms.loss,
                    throughput: n.terms.throughput,
                    pairs: n.terms.pairs,
                    fallback_pairs: n.terms.fallback_pairs,
                    basis: n.terms.basis.as_str().to_owned(),
                    in_chosen_zone: n.terms.in_chosen_zone,
                }),
            })
            .collect(),
    }
}
