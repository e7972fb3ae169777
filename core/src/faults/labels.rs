//! Zone labels against measurement: a node whose RTTs to its labelled zone
//! are those between zones, and whose RTTs to another zone are that zone's
//! own, sits in that other zone, whatever its label says (a node cabled
//! elsewhere, a label copied from a template).
//!
//! A node is judged by the lower median RTT of its links (both directions)
//! to each zone, with at least [`MIN_LINKS`] links to both zones compared.
//! It measures like zone B rather than its label A when its RTT to B is
//! B's own inside RTT (within [`INSIDE_FACTOR`] of it, plus
//! [`INSIDE_SLACK_MS`]) while its RTT to A is at least [`OUTSIDE_FACTOR`]
//! times A's own inside RTT, plus the slack. A slow NIC raises a node's
//! RTT to every zone and so never reads as a zone label; a zone of one
//! node cannot be judged (it has no inside RTT).

use std::collections::HashMap;

use super::input::FaultInput;
use super::{Evidence, FaultMetric, Finding, MAX_EVIDENCE, Subject};
use crate::stats::lower_median;

/// Least links to a zone for its RTT to count.
pub const MIN_LINKS: usize = 2;
/// How far above a zone's inside RTT a node inside it may be.
pub const INSIDE_FACTOR: f64 = 1.5;
/// How far above its labelled zone's inside RTT a mislabelled node is, at
/// least.
pub const OUTSIDE_FACTOR: f64 = 3.0;
/// Added to both bounds (ms): below it RTTs differ by hosts, not places.
pub const INSIDE_SLACK_MS: f64 = 0.1;

/// A node's links to one zone: (RTT, src, dst).
type LinksToZone = Vec<(f64, usize, usize)>;

/// Every node whose zone label its links contradict.
pub fn check(input: &FaultInput) -> Vec<Finding> {
    let zone_count = input.zones.len();
    // Each zone's inside RTT: the lower median over links inside it.
    let mut inside: Vec<Vec<f64>> = vec![Vec::new(); zone_count];
    // Each node's RTTs to each zone.
    let mut to_zone: HashMap<(usize, usize), LinksToZone> = HashMap::new();
    for link in &input.links {
        let Some(rtt) = link.rtt_ms else { continue };
        let (a, b) = (input.nodes[link.src].zone, input.nodes[link.dst].zone);
        if a == b {
            inside[a].push(rtt);
        }
        to_zone
            .entry((link.src, b))
            .or_default()
            .push((rtt, link.src, link.dst));
        to_zone
            .entry((link.dst, a))
            .or_default()
            .push((rtt, link.src, link.dst));
    }
    let inside: Vec<Option<f64>> = inside.iter_mut().map(|r| lower_median(r)).collect();
    let median_to = |node: usize, zone: usize| -> Option<f64> {
        let links = to_zone.get(&(node, zone))?;
        if links.len() < MIN_LINKS {
            return None;
        }
        let mut rtts: Vec<f64> = links.iter().map(|l| l.0).collect();
        lower_median(&mut rtts)
    };
    let mut findings = Vec::new();
    for (node, site) in input.nodes.iter().enumerate() {
        let label = site.zone;
        let (Some(to_label), Some(label_inside)) = (median_to(node, label), inside[label]) else {
            continue;
        };
        if to_label < OUTSIDE_FACTOR * label_inside + INSIDE_SLACK_MS {
            continue;
        }
        let like = (0..zone_count)
            .filter(|&zone| zone != label)
            .filter_map(|zone| {
                let to = median_to(node, zone)?;
                let own = inside[zone]?;
                (to <= INSIDE_FACTOR * own + INSIDE_SLACK_MS && to < to_label).then_some((to, zone))
            })
            .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let Some((_, zone)) = like else { continue };
        let links = &to_zone[&(node, label)];
        let agreeing = links
            .iter()
            .filter(|l| l.0 >= OUTSIDE_FACTOR * label_inside + INSIDE_SLACK_MS)
            .count();
        let mut evidence: Vec<Evidence> = links
            .iter()
            .map(|&(rtt, src, dst)| Evidence {
                src,
                dst,
                value: rtt,
                baseline: label_inside,
            })
            .collect();
        evidence.sort_by(|a, b| {
            b.value
                .total_cmp(&a.value)
                .then((a.src, a.dst).cmp(&(b.src, b.dst)))
        });
        evidence.truncate(MAX_EVIDENCE);
        findings.push(Finding {
            subject: Subject::ZoneLabel {
                node,
                measures_like: zone,
            },
            metric: FaultMetric::Rtt,
            value: to_label,
            baseline: label_inside,
            confidence: agreeing as f64 / links.len() as f64,
            evidence,
        });
    }
    findings
}
