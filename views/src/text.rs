//! Short phrases for people, said the same way by every front end: the
//! CLI's tables, the heat map's tooltips and the web view.

use netaware_core::fault_kind::FaultMetric;

/// What a fault of `metric` at `value` does, for people ("loses 8.00%");
/// a metric this build does not know is said as it came.
pub fn fault_effect(metric: &str, value: f64) -> String {
    match FaultMetric::from_name(metric) {
        Some(metric) => metric.effect(value),
        None => format!("{metric} {value}"),
    }
}

/// A fault's figure in its unit: a loss in percent, a delay or RTT in ms,
/// a goodput in Mbit/s or Gbit/s (a metric this build does not know is
/// said as it came).
pub fn fault_figure(metric: &str, value: f64) -> String {
    match FaultMetric::from_name(metric) {
        Some(metric) => metric.figure(value),
        None => format!("{value} ({metric})"),
    }
}

/// A fault's effect beside what is usual: "loses 8.00% (usual 0.05%)".
pub fn fault_judged(metric: &str, value: f64, baseline: f64) -> String {
    match FaultMetric::from_name(metric) {
        Some(metric) => metric.judged(value, baseline),
        None => format!("{metric} {value} (usual {baseline})"),
    }
}

/// What a fault is about, in a few words: the node, the block, the zones,
/// the pair, or the node and the zone it measures like.
pub fn fault_subject(
    kind: &str,
    nodes: &[String],
    zones: &[String],
    block: Option<u32>,
    measures_like: Option<&str>,
) -> String {
    match kind {
        "block_uplink" => format!(
            "{} block {} ({} nodes)",
            zones.join(" "),
            block.unwrap_or(0),
            nodes.len()
        ),
        "zone_link" => zones.join(" <-> "),
        "pair" => nodes.join(" <-> "),
        "zone_label" => format!(
            "{} labelled {}, measures like {}",
            nodes.join(" "),
            zones.join(" "),
            measures_like.unwrap_or("-")
        ),
        _ => nodes.join(" "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_are_said_in_their_units() {
        assert_eq!(fault_effect("loss", 0.08), "loses 8.00%");
        assert_eq!(fault_figure("delay", 0.25), "0.250 ms");
        assert_eq!(fault_figure("jitter", 2.0), "2 (jitter)");
        assert_eq!(
            fault_judged("loss", 0.08, 0.0005),
            "loses 8.00% (usual 0.05%)"
        );
        let nodes = ["a4".to_owned(), "a5".to_owned()];
        let zones = ["zone-a".to_owned()];
        assert_eq!(
            fault_subject("block_uplink", &nodes, &zones, Some(2), None),
            "zone-a block 2 (2 nodes)"
        );
        assert_eq!(
            fault_subject("pair", &nodes, &zones, None, None),
            "a4 <-> a5"
        );
        assert_eq!(
            fault_subject("zone_label", &nodes[..1], &zones, None, Some("zone-b")),
            "a4 labelled zone-a, measures like zone-b"
        );
    }
}
