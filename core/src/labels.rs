//! Where a node sits, from its Kubernetes Node labels: the well-known
//! topology labels, else their deprecated `failure-domain.beta` forms.
//!
//! The agent reads its own Node's labels at start, and the extender reads
//! the labels of the nodes kube-scheduler sends; both go through
//! [`place_from_labels`], so that they agree on a node's zone.

use std::collections::BTreeMap;

/// The well-known label of a node's zone.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// The well-known label of a node's region.
pub const REGION_LABEL: &str = "topology.kubernetes.io/region";
/// Older clusters' labels, still set by some cloud providers.
const LEGACY_ZONE_LABEL: &str = "failure-domain.beta.kubernetes.io/zone";
const LEGACY_REGION_LABEL: &str = "failure-domain.beta.kubernetes.io/region";

/// A node's zone and region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The zone (never empty).
    pub zone: String,
    /// The region (empty when the node has no region label).
    pub region: String,
}

/// The place that `labels` give a node; `None` when no zone label holds a
/// value.
pub fn place_from_labels(labels: &BTreeMap<String, String>) -> Option<Place> {
    let label = |current: &str, legacy: &str| {
        [current, legacy]
            .into_iter()
            .filter_map(|key| labels.get(key))
            .map(|value| value.trim())
            .find(|value| !value.is_empty())
            .map(str::to_owned)
    };
    Some(Place {
        zone: label(ZONE_LABEL, LEGACY_ZONE_LABEL)?,
        region: label(REGION_LABEL, LEGACY_REGION_LABEL).unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn current_labels_win_and_legacy_ones_fill_in() {
        let place = place_from_labels(&labels(&[
            (ZONE_LABEL, "z1"),
            (LEGACY_ZONE_LABEL, "old"),
            (LEGACY_REGION_LABEL, "r1"),
        ]))
        .unwrap();
        assert_eq!((place.zone.as_str(), place.region.as_str()), ("z1", "r1"));
        let place = place_from_labels(&labels(&[(ZONE_LABEL, " "), (LEGACY_ZONE_LABEL, "z2")]));
        assert_eq!(
            place.unwrap(),
            Place {
                zone: "z2".into(),
                region: String::new()
            }
        );
        assert_eq!(place_from_labels(&labels(&[(REGION_LABEL, "r")])), None);
    }
}
