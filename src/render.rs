//! Human-readable tables of the matrix, the zones, pair RTTs and a ranking.

use std::fmt::Write;

use netaware_core::pair_rtt::RttBasis;
use netaware_core::placement::Basis;
use netaware_proto::convert::{basis_from_wire, node_kind_from_wire};
use netaware_proto::v1 as pb;

use crate::json::TopologyJson;

fn ms(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.3}"))
}

fn percent(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{:.1}%", v * 100.0))
}

fn rate(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{:.0} Mbit/s", v / 1e6))
}

/// Pair RTTs as a table, with what each rests on.
pub fn estimate(response: &pb::EstimateResponse) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<24} {:<24} {:>10} {:>10}  BASIS",
        "SRC", "DST", "RTT_MS", "+-MS"
    );
    for pair in &response.pairs {
        let basis = match netaware_proto::convert::rtt_basis_from_wire(pair.basis) {
            RttBasis::Measured => "measured",
            RttBasis::Estimated => "estimated (coordinates)",
            RttBasis::ZoneAverage => "zone average",
            RttBasis::Unknown => "unknown",
        };
        let _ = writeln!(
            out,
            "{:<24} {:<24} {:>10} {:>10}  {basis}",
            pair.src,
            pair.dst,
            ms(pair.rtt_ms),
            ms(pair.error_ms)
        );
    }
    out
}

/// The zone summary as a table.
pub fn zones(summary: &pb::ZoneSummary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<12} {:<10} {:>5} {:>5}",
        "ZONE", "REGION", "NODES", "FRESH"
    );
    for z in &summary.zones {
        let region = if z.region.is_empty() { "-" } else { &z.region };
        let _ = writeln!(
            out,
            "{:<12} {:<10} {:>5} {:>5}",
            z.name, region, z.nodes, z.fresh_nodes
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<12} {:<12} {:>10} {:>7} {:>14} {:>7} {:>9}",
        "FROM", "TO", "RTT_MS", "LOSS", "THROUGHPUT", "QUALITY", "MEASURED"
    );
    for z in &summary.zone_pairs {
        let _ = writeln!(
            out,
            "{:<12} {:<12} {:>10} {:>7} {:>14} {:>7.3} {:>9}",
            z.src_zone,
            z.dst_zone,
            ms(z.rtt_median_ms),
            percent(z.loss_ratio),
            rate(z.throughput_bps),
            z.quality,
            format!("{}/{}", z.measured_pairs, z.pairs)
        );
    }
    out
}

/// The matrix: nodes, then every pair.
pub fn matrix(matrix: &pb::Matrix) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<14} {:<10} {:<16} {:<9} STATE",
        "NODE", "ZONE", "ADDRESS", "KIND"
    );
    for n in &matrix.nodes {
        let state = if n.stale { "STALE" } else { "fresh" };
        let _ = writeln!(
            out,
            "{:<14} {:<10} {:<16} {:<9} {}",
            n.name,
            n.zone,
            n.address,
            node_kind_from_wire(n.kind).as_str(),
            state
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<14} {:<14} {:>9} {:>9} {:>8} {:>7} {:>13} {:>7} {:>6} {:>7}",
        "SRC",
        "DST",
        "MEDIAN_MS",
        "P99_MS",
        "JITTER",
        "LOSS",
        "GOODPUT",
        "SAMPLES",
        "AGE_S",
        "QUALITY"
    );
    for p in &matrix.pairs {
        let age = if p.age_s < 0.0 {
            "-".to_owned()
        } else {
            format!("{:.0}", p.age_s)
        };
        let flag = if p.stale { " (stale)" } else { "" };
        let _ = writeln!(
            out,
            "{:<14} {:<14} {:>9} {:>9} {:>8} {:>7} {:>13} {:>7} {:>6} {:>7.3}{flag}",
            p.src,
            p.dst,
            ms(p.rtt_median_ms),
            ms(p.rtt_p99_ms),
            ms(p.jitter_ms),
            percent(p.loss_ratio),
            rate(p.throughput_bps),
            p.samples,
            age,
            p.quality
        );
    }
    out
}

/// A ranking: the zone and why, then the nodes best first.
pub fn rank(rank: &pb::RankResponse, size: usize) -> String {
    let mut out = String::new();
    let zone = if rank.zone.is_empty() {
        "(none)"
    } else {
        &rank.zone
    };
    let _ = writeln!(out, "zone {zone}: {}", rank.zone_reason);
    let _ = writeln!(
        out,
        "{:<4} {:<14} {:<10} {:>6} {:>7} {:>6} {:>6} {:>6} {:>9}  NOTE",
        "#", "NODE", "ZONE", "SCORE", "QUALITY", "DELAY", "LOSS", "TPUT", "PAIRS"
    );
    for (i, n) in rank.nodes.iter().enumerate() {
        let t = n.terms.unwrap_or_default();
        let pick = if n.feasible && i < size { "*" } else { " " };
        let note = if n.feasible {
            format!(
                "vs {}{}",
                basis_from_wire(t.basis).map_or("?", Basis::as_str),
                if t.in_chosen_zone { "" } else { ", other zone" }
            )
        } else {
            format!("FAILS: {}", n.reason)
        };
        let _ = writeln!(
            out,
            "{pick}{:<3} {:<14} {:<10} {:>6.3} {:>7.3} {:>6.3} {:>6.3} {:>6.3} {:>9}  {note}",
            i + 1,
            n.name,
            n.zone,
            n.score,
            t.quality,
            t.delay,
            t.loss,
            t.throughput,
            format!("{}/{}", t.pairs - t.fallback_pairs, t.pairs)
        );
    }
    let _ = writeln!(
        out,
        "(* = the {size} workers' places; PAIRS = measured/averaged)"
    );
    out
}

/// The measured topology: each zone's blocks with their size and degraded
/// nodes, then the costs between zones and regions.
pub fn topology(topology: &TopologyJson) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<12} {:<10} {:<16} {:>5}  DEGRADED",
        "ZONE", "REGION", "BLOCK", "NODES"
    );
    for zone in &topology.zones {
        let region = if zone.region.is_empty() {
            "-"
        } else {
            &zone.region
        };
        for block in &zone.blocks {
            let degraded = if block.degraded.is_empty() {
                "-".to_owned()
            } else {
                block.degraded.join(" ")
            };
            let _ = writeln!(
                out,
                "{:<12} {:<10} {:<16} {:>5}  {}",
                zone.name,
                region,
                block.label,
                block.nodes.len(),
                degraded
            );
        }
    }
    for (title, costs) in [
        ("ZONES", &topology.zone_costs),
        ("REGIONS", &topology.region_costs),
    ] {
        if costs.is_empty() {
            continue;
        }
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{:<12} {:<12} {:>11} {:>14} {:>6}",
            format!("{title} FROM"),
            "TO",
            "RTT_P90_MS",
            "GOODPUT",
            "PAIRS"
        );
        for cost in costs {
            let _ = writeln!(
                out,
                "{:<12} {:<12} {:>11} {:>14} {:>6}",
                cost.origin,
                cost.destination,
                ms(Some(cost.rtt_p90_ms)),
                rate(cost.goodput_bps),
                cost.pairs
            );
        }
    }
    out
}
