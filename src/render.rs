//! Tables for people: the matrix, the zones, pair RTTs, a ranking and the
//! measured topology. Columns are as wide as what they hold (real node
//! names are often 40 characters and more), left-aligned text and
//! right-aligned figures, no borders, as kubectl prints; `wide` adds the
//! columns that `-o wide` asks for.

use comfy_table::{CellAlignment, Table};

use netaware_core::extender::Neutral;
use netaware_core::pair_rtt::RttBasis;
use netaware_core::placement::Basis;
use netaware_proto::convert::{node_kind_from_wire, transport_from_wire};
use netaware_proto::v1 as pb;

use crate::json::{BlockJson, FaultsJson, RankJson, TopologyJson};
use netaware_views::text::fault_figure;

/// A column of a table: its header, and whether it holds figures
/// (right-aligned).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Column {
    header: &'static str,
    figure: bool,
}

pub(crate) const fn text(header: &'static str) -> Column {
    Column {
        header,
        figure: false,
    }
}

pub(crate) const fn figure(header: &'static str) -> Column {
    Column {
        header,
        figure: true,
    }
}

/// A table with these columns and rows, as text ending in a newline.
pub(crate) fn table(columns: &[Column], rows: impl IntoIterator<Item = Vec<String>>) -> String {
    let mut table = Table::new();
    table
        .load_style(comfy_table::presets::NOTHING)
        .set_header(columns.iter().map(|c| c.header).collect::<Vec<_>>());
    for row in rows {
        table.add_row(row);
    }
    let last = columns.len().saturating_sub(1);
    for (i, (column, spec)) in table.column_iter_mut().zip(columns).enumerate() {
        // Three spaces between columns, none before the first.
        column.set_padding((0, if i == last { 0 } else { 3 }));
        if spec.figure {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut out = table.trim_fmt();
    out.push('\n');
    out
}

/// `columns`, with the wide ones (`(column, wide only)`) kept only when
/// `wide`.
pub(crate) fn keep<T: Clone>(wide: bool, cells: &[(T, bool)]) -> Vec<T> {
    cells
        .iter()
        .filter(|(_, wide_only)| wide || !wide_only)
        .map(|(cell, _)| cell.clone())
        .collect()
}

fn ms(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.3}"))
}

fn percent(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{:.1}%", v * 100.0))
}

fn rate(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{:.0} Mbit/s", v / 1e6))
}

fn or_dash(value: &str) -> String {
    if value.is_empty() {
        "-".to_owned()
    } else {
        value.to_owned()
    }
}

/// Pair RTTs as a table, with what each rests on.
pub fn estimate(response: &pb::EstimateResponse, wide: bool) -> String {
    let columns = keep(
        wide,
        &[
            (text("SRC"), false),
            (text("DST"), false),
            (figure("RTT_MS"), false),
            (figure("+-MS"), true),
            (text("BASIS"), false),
        ],
    );
    let rows = response.pairs.iter().map(|pair| {
        let basis = match netaware_proto::convert::rtt_basis_from_wire(pair.basis) {
            RttBasis::Measured => "measured",
            RttBasis::Estimated => "estimated (coordinates)",
            RttBasis::ZoneAverage => "zone average",
            RttBasis::Unknown => "unknown",
        };
        keep(
            wide,
            &[
                (pair.src.clone(), false),
                (pair.dst.clone(), false),
                (ms(pair.rtt_ms), false),
                (ms(pair.error_ms), true),
                (basis.to_owned(), false),
            ],
        )
    });
    table(&columns, rows)
}

/// The zone summary as two tables: the zones, then the zone pairs.
pub fn zones(summary: &pb::ZoneSummary, wide: bool) -> String {
    let zones = table(
        &[
            text("ZONE"),
            text("REGION"),
            figure("NODES"),
            figure("FRESH"),
        ],
        summary.zones.iter().map(|z| {
            vec![
                z.name.clone(),
                or_dash(&z.region),
                z.nodes.to_string(),
                z.fresh_nodes.to_string(),
            ]
        }),
    );
    let columns = keep(
        wide,
        &[
            (text("FROM"), false),
            (text("TO"), false),
            (figure("RTT_MS"), false),
            (figure("LOSS"), false),
            (figure("THROUGHPUT"), false),
            (figure("QUALITY"), false),
            (figure("MEASURED"), true),
        ],
    );
    let pairs = table(
        &columns,
        summary.zone_pairs.iter().map(|z| {
            keep(
                wide,
                &[
                    (z.src_zone.clone(), false),
                    (z.dst_zone.clone(), false),
                    (ms(z.rtt_median_ms), false),
                    (percent(z.loss_ratio), false),
                    (rate(z.throughput_bps), false),
                    (format!("{:.3}", z.quality), false),
                    (format!("{}/{}", z.measured_pairs, z.pairs), true),
                ],
            )
        }),
    );
    format!("{zones}\n{pairs}")
}

/// The matrix: nodes, then every pair.
pub fn matrix(matrix: &pb::Matrix, wide: bool) -> String {
    let node_columns = keep(
        wide,
        &[
            (text("NODE"), false),
            (text("ZONE"), false),
            (text("ADDRESS"), true),
            (text("KIND"), true),
            (text("STATE"), false),
        ],
    );
    let nodes = table(
        &node_columns,
        matrix.nodes.iter().map(|n| {
            keep(
                wide,
                &[
                    (n.name.clone(), false),
                    (n.zone.clone(), false),
                    (n.address.clone(), true),
                    (node_kind_from_wire(n.kind).as_str().to_owned(), true),
                    ((if n.stale { "STALE" } else { "fresh" }).to_owned(), false),
                ],
            )
        }),
    );
    let pair_columns = keep(
        wide,
        &[
            (text("SRC"), false),
            (text("DST"), false),
            (figure("MEDIAN_MS"), false),
            (figure("P99_MS"), true),
            (figure("JITTER"), true),
            (figure("LOSS"), false),
            (figure("ONE_WAY_LOSS"), true),
            (figure("GOODPUT"), false),
            (figure("SAMPLES"), true),
            (text("PROBE"), true),
            (figure("AGE_S"), false),
            (figure("QUALITY"), false),
        ],
    );
    let pairs = table(
        &pair_columns,
        matrix.pairs.iter().map(|p| {
            let age = if p.age_s < 0.0 {
                "-".to_owned()
            } else {
                format!("{:.0}", p.age_s)
            };
            let quality = format!("{:.3}{}", p.quality, if p.stale { " (stale)" } else { "" });
            keep(
                wide,
                &[
                    (p.src.clone(), false),
                    (p.dst.clone(), false),
                    (ms(p.rtt_median_ms), false),
                    (ms(p.rtt_p99_ms), true),
                    (ms(p.jitter_ms), true),
                    (percent(p.loss_ratio), false),
                    (percent(p.one_way_loss_ratio), true),
                    (rate(p.throughput_bps), false),
                    (p.samples.to_string(), true),
                    (probe(p), true),
                    (age, false),
                    (quality, false),
                ],
            )
        }),
    );
    format!("{nodes}\n{pairs}")
}

/// How a pair was probed, and what was found filtered on the way:
/// "udp (icmp filtered)"; "-" before any window.
fn probe(pair: &pb::Pair) -> String {
    let name = |wire: i32| transport_from_wire(wire).map_or("?", |t| t.as_str());
    let Some(probe) = pair.probe else {
        return "-".to_owned();
    };
    let filtered: Vec<&str> = pair.filtered.iter().map(|t| name(*t)).collect();
    if filtered.is_empty() {
        name(probe).to_owned()
    } else {
        format!("{} ({} filtered)", name(probe), filtered.join(", "))
    }
}

/// A line saying why the extender answers neutrally, for `neutral` as the
/// JSON names it; empty when it does not.
pub fn neutral_line(neutral: Option<&str>) -> String {
    neutral
        .and_then(Neutral::from_name)
        .map(|neutral| format!("the extender answers neutrally: {neutral}\n"))
        .unwrap_or_default()
}

/// A ranking: the zone and why, then the nodes best first, with the
/// extender's answer for each; `*` marks the `size` workers' places.
pub fn rank(rank: &RankJson, size: usize, wide: bool) -> String {
    let zone = rank.zone.as_deref().unwrap_or("(none)");
    let mut out = format!("zone {zone}: {}\n", rank.zone_reason);
    out.push_str(&neutral_line(rank.neutral.as_deref()));
    let columns = keep(
        wide,
        &[
            (text("#"), false),
            (text("NODE"), false),
            (text("ZONE"), false),
            (figure("SCORE"), false),
            (figure("EXTENDER"), false),
            (figure("QUALITY"), true),
            (figure("DELAY"), true),
            (figure("LOSS"), true),
            (figure("TPUT"), true),
            (figure("PAIRS"), false),
            (text("NOTE"), false),
        ],
    );
    let rows = rank.nodes.iter().enumerate().map(|(i, n)| {
        let t = &n.terms;
        let pick = if n.feasible && i < size { "*" } else { "" };
        let note = match &n.reason {
            None => format!(
                "vs {}{}",
                t.basis.map_or("?", Basis::as_str),
                if t.in_chosen_zone { "" } else { ", other zone" }
            ),
            Some(reason) if n.passes_filter => format!("last resort: {reason}"),
            Some(reason) => format!("FAILS: {reason}"),
        };
        keep(
            wide,
            &[
                (format!("{pick}{}", i + 1), false),
                (n.name.clone(), false),
                (n.zone.clone(), false),
                (format!("{:.3}", n.score), false),
                (n.extender_score.to_string(), false),
                (format!("{:.3}", t.quality), true),
                (format!("{:.3}", t.delay), true),
                (format!("{:.3}", t.loss), true),
                (format!("{:.3}", t.throughput), true),
                (
                    format!("{}/{}", t.pairs - t.fallback_pairs.min(t.pairs), t.pairs),
                    false,
                ),
                (note, false),
            ],
        )
    });
    out.push_str(&table(&columns, rows));
    out.push_str(&format!(
        "(* = the {size} workers' places; EXTENDER = the extender's priority, 0 to 10; PAIRS = measured/averaged)\n"
    ));
    out
}

/// A block's uplink as an open fault says: "bad" when it names it (all of
/// the block's nodes, or the ones it names), "ok" when not.
fn uplink(block: &BlockJson) -> String {
    match block.behind_bad_uplink.len() {
        0 => "ok".into(),
        n if n == block.nodes.len() => "bad".into(),
        _ => format!("bad: {}", block.behind_bad_uplink.join(" ")),
    }
}

/// The measured topology: each zone's blocks with their size, degraded
/// nodes and whether an open fault names their uplink, then the costs
/// between zones and regions.
pub fn topology(topology: &TopologyJson, wide: bool) -> String {
    let block_columns = keep(
        wide,
        &[
            (text("ZONE"), false),
            (text("REGION"), false),
            (text("BLOCK"), false),
            (figure("NODES"), false),
            (text("DEGRADED"), false),
            (text("UPLINK"), false),
            (text("MEMBERS"), true),
        ],
    );
    let blocks = topology.zones.iter().flat_map(|zone| {
        zone.blocks.iter().map(move |block| {
            keep(
                wide,
                &[
                    (zone.name.clone(), false),
                    (or_dash(&zone.region), false),
                    (block.label.clone(), false),
                    (block.nodes.len().to_string(), false),
                    (or_dash(&block.degraded.join(" ")), false),
                    (uplink(block), false),
                    (block.nodes.join(" "), true),
                ],
            )
        })
    });
    let mut out = table(&block_columns, blocks);
    for (title, costs) in [
        ("ZONES FROM", &topology.zone_costs),
        ("REGIONS FROM", &topology.region_costs),
    ] {
        if costs.is_empty() {
            continue;
        }
        out.push('\n');
        out.push_str(&table(
            &[
                text(title),
                text("TO"),
                figure("RTT_P90_MS"),
                figure("GOODPUT"),
                figure("PAIRS"),
            ],
            costs.iter().map(|cost| {
                vec![
                    cost.origin.clone(),
                    cost.destination.clone(),
                    ms(Some(cost.rtt_p90_ms)),
                    rate(cost.goodput_bps),
                    cost.pairs.to_string(),
                ]
            }),
        ));
    }
    out
}

/// The open faults, one line each; `wide` adds the worst links.
pub fn faults(answer: &FaultsJson, wide: bool) -> String {
    if answer.faults.is_empty() {
        return "no faults found\n".to_owned();
    }
    let now = netaware_runtime::clock::now_ms();
    let columns = keep(
        wide,
        &[
            (text("KIND"), false),
            (text("NETWORK"), false),
            (text("SUBJECT"), false),
            (text("METRIC"), false),
            (figure("VALUE"), false),
            (figure("BASELINE"), false),
            (figure("CONFIDENCE"), false),
            (figure("SINCE"), false),
            (text("WORST LINKS"), true),
        ],
    );
    let rows = answer.faults.iter().map(|fault| {
        let since = now.saturating_sub(fault.since_unix_ms) / 1_000;
        let worst = fault
            .evidence
            .iter()
            .take(3)
            .map(|e| {
                format!(
                    "{}->{} {}",
                    e.src,
                    e.dst,
                    fault_figure(&fault.metric, e.value)
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        keep(
            wide,
            &[
                (fault.kind.clone(), false),
                (fault.network.clone(), false),
                (fault.subject.clone(), false),
                (fault.metric.clone(), false),
                (fault_figure(&fault.metric, fault.value), false),
                (fault_figure(&fault.metric, fault.baseline), false),
                (format!("{:.2}", fault.confidence), false),
                (format!("{since}s"), false),
                (worst, true),
            ],
        )
    });
    table(&columns, rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wide_matrix_says_how_each_pair_was_probed_and_what_was_filtered() {
        let pair = |probe: Option<pb::Transport>, filtered: &[pb::Transport]| pb::Pair {
            probe: probe.map(Into::into),
            filtered: filtered.iter().map(|t| (*t).into()).collect(),
            ..pb::Pair::default()
        };
        assert_eq!(probe(&pair(None, &[])), "-");
        assert_eq!(probe(&pair(Some(pb::Transport::Icmp), &[])), "icmp");
        let by_tcp = pair(
            Some(pb::Transport::Tcp),
            &[pb::Transport::Icmp, pb::Transport::Udp],
        );
        assert_eq!(probe(&by_tcp), "tcp (icmp, udp filtered)");
        let matrix = pb::Matrix {
            pairs: vec![by_tcp],
            ..pb::Matrix::default()
        };
        assert!(super::matrix(&matrix, true).contains("tcp (icmp, udp filtered)"));
        assert!(!super::matrix(&matrix, false).contains("PROBE"));
    }

    #[test]
    fn columns_fit_long_names_and_figures_align_right() {
        let long = "gpu-node-0042.rack-17.zone-a.example-cluster.internal";
        let text = table(
            &[text("NODE"), figure("SCORE")],
            [
                vec![long.to_owned(), "0.5".to_owned()],
                vec!["a".to_owned(), "10.25".to_owned()],
            ],
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        // The name is whole, and the figures end in one column.
        assert!(lines[1].starts_with(long), "{text}");
        assert_eq!(lines[1].len(), lines[2].len(), "{text}");
        assert!(
            lines[2].ends_with("10.25") && lines[1].ends_with("  0.5"),
            "{text}"
        );
        assert!(lines[0].starts_with("NODE "), "{text}");
    }

    #[test]
    fn wide_keeps_its_columns_and_the_default_leaves_them_out() {
        let cells = [("a", false), ("b", true), ("c", false)];
        assert_eq!(keep(false, &cells), ["a", "c"]);
        assert_eq!(keep(true, &cells), ["a", "b", "c"]);
    }
}
