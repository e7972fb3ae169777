//! The Kubernetes objects that carry the measured topology, one format per
//! consumer. Pure: a topology in, objects out. Each object is what
//! server-side apply sends, and what `netaware topology --format` prints
//! for review or GitOps (`kubectl apply --server-side -f`).
//!
//! Field names are those of each kind's CRD schema (tests/ holds the
//! schemas and checks every object against them).

use std::collections::BTreeMap;

use kube::discovery::ApiResource;
use netaware_core::labels::{REGION_LABEL, ZONE_LABEL};
use netaware_core::measured_topology::{LinkCost, MeasuredTopology};
use serde_json::{Value, json};

use crate::names;

/// The label naming a node's block, `<zone>-<number>`.
pub const BLOCK_LABEL: &str = "netaware.io/block";
/// The label saying whether a node's own links say it is degraded.
pub const DEGRADED_LABEL: &str = "netaware.io/degraded";
/// The label saying whether an open fault names the uplink of a node's
/// block (a job spread over it and the rest of its zone crosses a bad
/// link): a job that selects it `false` as well as the degraded one keeps
/// off such a rack.
pub const BAD_UPLINK_LABEL: &str = "netaware.io/bad-uplink";
/// The well-known label of a node's host name: the lowest topology level.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// The label on every HyperNode netaware writes, as Volcano's own
/// discovery sources mark theirs.
pub const VOLCANO_SOURCE_LABEL: &str = "volcano.sh/network-topology-source";
/// Its value.
pub const VOLCANO_SOURCE: &str = "netaware";
/// The name of the weights in the Diktyo NetworkTopology.
pub const DIKTYO_WEIGHTS: &str = "NetperfCosts";

/// Who the objects are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum)]
pub enum Format {
    /// `netaware.io/block`, `netaware.io/degraded` and
    /// `netaware.io/bad-uplink` on each Node.
    Labels,
    /// A Kueue Topology (zone, block, host); needs the labels.
    Kueue,
    /// Volcano HyperNodes: a tier-1 per block, a tier-2 per zone.
    Volcano,
    /// A Diktyo NetworkTopology: costs between zones and regions.
    Diktyo,
}

/// The version of Kueue's API to write the Topology in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, clap::ValueEnum)]
#[clap(rename_all = "lower")]
pub enum KueueVersion {
    /// `kueue.x-k8s.io/v1beta2` (Kueue 0.15 and later).
    #[default]
    V1beta2,
    /// `kueue.x-k8s.io/v1beta1`.
    V1beta1,
}

/// Names and places of the objects that are not one per node or block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderOptions {
    /// The Kueue Topology's name (a ResourceFlavor's `topologyName`).
    pub kueue_name: String,
    /// The version of Kueue's API.
    pub kueue_version: KueueVersion,
    /// The Diktyo NetworkTopology's name and namespace (the
    /// NetworkOverhead plugin's `networkTopologyName` and `namespaces`).
    pub diktyo_name: String,
    /// Its namespace.
    pub diktyo_namespace: String,
    /// Its `spec.configmapName` (required by the CRD; the plugin reads the
    /// costs from `spec.weights`, not from the ConfigMap).
    pub diktyo_configmap: String,
}

impl Default for RenderOptions {
    fn default() -> Self {
        Self {
            kueue_name: "netaware".into(),
            kueue_version: KueueVersion::default(),
            diktyo_name: "netaware".into(),
            diktyo_namespace: "default".into(),
            diktyo_configmap: "netaware".into(),
        }
    }
}

/// The kinds netaware writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A Node (only its labels).
    Node,
    /// A Kueue Topology.
    KueueTopology(KueueVersion),
    /// A Volcano HyperNode.
    HyperNode,
    /// A Diktyo NetworkTopology.
    NetworkTopology,
}

impl Kind {
    /// Group, version, kind and plural, for the API.
    pub fn api_resource(self) -> ApiResource {
        let (group, version, kind, plural) = match self {
            Kind::Node => ("", "v1", "Node", "nodes"),
            Kind::KueueTopology(KueueVersion::V1beta2) => {
                ("kueue.x-k8s.io", "v1beta2", "Topology", "topologies")
            }
            Kind::KueueTopology(KueueVersion::V1beta1) => {
                ("kueue.x-k8s.io", "v1beta1", "Topology", "topologies")
            }
            Kind::HyperNode => ("topology.volcano.sh", "v1alpha1", "HyperNode", "hypernodes"),
            Kind::NetworkTopology => (
                "networktopology.diktyo.x-k8s.io",
                "v1alpha1",
                "NetworkTopology",
                "networktopologies",
            ),
        };
        let gvk = kube::core::GroupVersionKind::gvk(group, version, kind);
        ApiResource::from_gvk_with_plural(&gvk, plural)
    }
}

/// One object to write.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    /// Its kind.
    pub kind: Kind,
    /// Its namespace; `None` for cluster-scoped kinds.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// The whole object, as server-side apply sends it.
    pub body: Value,
}

/// The objects of `format` for `topology`.
pub fn render(topology: &MeasuredTopology, format: Format, options: &RenderOptions) -> Vec<Object> {
    match format {
        Format::Labels => node_labels(topology),
        Format::Kueue => vec![kueue_topology(options)],
        Format::Volcano => hypernodes(topology),
        Format::Diktyo => vec![network_topology(topology, options)],
    }
}

/// A block's label value, `<zone>-<number>`.
pub fn block_label(zone: &str, number: u32) -> String {
    names::label_value(&format!("{zone}-{number}"))
}

/// The labels of a node that is in no block (gone from the topology):
/// none, so that applying it takes netaware's labels off.
pub fn unlabelled_node(name: &str) -> Object {
    Object {
        kind: Kind::Node,
        namespace: None,
        name: name.to_owned(),
        body: json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}),
    }
}

fn node_labels(topology: &MeasuredTopology) -> Vec<Object> {
    topology
        .nodes()
        .map(|(zone, block, node)| {
            let labels: BTreeMap<&str, String> = [
                (BLOCK_LABEL, block_label(&zone.zone, block.number)),
                (DEGRADED_LABEL, node.degraded.to_string()),
                (BAD_UPLINK_LABEL, node.bad_uplink.to_string()),
            ]
            .into();
            Object {
                kind: Kind::Node,
                namespace: None,
                name: node.name.clone(),
                body: json!({
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": node.name, "labels": labels},
                }),
            }
        })
        .collect()
}

fn api_version(kind: Kind) -> String {
    kind.api_resource().api_version
}

fn kueue_topology(options: &RenderOptions) -> Object {
    let kind = Kind::KueueTopology(options.kueue_version);
    let name = names::object_name(&options.kueue_name);
    Object {
        kind,
        namespace: None,
        name: name.clone(),
        body: json!({
            "apiVersion": api_version(kind),
            "kind": "Topology",
            "metadata": {"name": name},
            "spec": {"levels": [
                {"nodeLabel": ZONE_LABEL},
                {"nodeLabel": BLOCK_LABEL},
                {"nodeLabel": HOSTNAME_LABEL},
            ]},
        }),
    }
}

/// A block's HyperNode name, `block-<zone>-<number>`; a zone's,
/// `zone-<zone>`: the prefixes keep the two tiers' names apart.
pub fn block_hypernode(zone: &str, number: u32) -> String {
    names::object_name(&format!("block-{zone}-{number}"))
}

/// A zone's HyperNode name.
pub fn zone_hypernode(zone: &str) -> String {
    names::object_name(&format!("zone-{zone}"))
}

fn hypernode(name: String, tier: u32, tier_name: &str, members: Vec<Value>) -> Object {
    Object {
        kind: Kind::HyperNode,
        namespace: None,
        body: json!({
            "apiVersion": api_version(Kind::HyperNode),
            "kind": "HyperNode",
            "metadata": {"name": name, "labels": {VOLCANO_SOURCE_LABEL: VOLCANO_SOURCE}},
            "spec": {"tier": tier, "tierName": tier_name, "members": members},
        }),
        name,
    }
}

fn hypernodes(topology: &MeasuredTopology) -> Vec<Object> {
    let member =
        |kind: &str, name: &str| json!({"type": kind, "selector": {"exactMatch": {"name": name}}});
    let mut objects = Vec::new();
    for zone in &topology.zones {
        let mut blocks = Vec::new();
        for block in &zone.blocks {
            let name = block_hypernode(&zone.zone, block.number);
            let nodes = block
                .nodes
                .iter()
                .map(|n| member("Node", &n.name))
                .collect();
            blocks.push(member("HyperNode", &name));
            objects.push(hypernode(name, 1, "block", nodes));
        }
        if !blocks.is_empty() {
            objects.push(hypernode(zone_hypernode(&zone.zone), 2, "zone", blocks));
        }
    }
    objects
}

/// A Diktyo network cost: the p90 RTT in microseconds, to two significant
/// figures (so that the object does not change with every round's noise),
/// at least 1 (Diktyo's cost inside a zone).
pub fn network_cost(rtt_p90_ms: f64) -> i64 {
    let micros = (rtt_p90_ms * 1_000.0).max(1.0);
    round_two_figures(micros).clamp(1.0, 1e15) as i64
}

/// A goodput as a Kubernetes quantity of bits per second, to two
/// significant figures (`940M`, `10G`).
pub fn bandwidth_quantity(bps: f64) -> String {
    let rounded = round_two_figures(bps.max(1.0));
    for (factor, suffix) in [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")] {
        if rounded >= factor && (rounded / factor).fract() == 0.0 {
            return format!("{}{suffix}", rounded / factor);
        }
        if rounded >= factor {
            // Two figures that are not whole in this unit: the next one down.
            return format!(
                "{}{}",
                (rounded / (factor / 1e3)).round(),
                next_down(suffix)
            );
        }
    }
    format!("{rounded}")
}

fn next_down(suffix: &str) -> &'static str {
    match suffix {
        "T" => "G",
        "G" => "M",
        "M" => "k",
        _ => "",
    }
}

fn round_two_figures(value: f64) -> f64 {
    if !(value.is_finite() && value > 0.0) {
        return 0.0;
    }
    let scale = 10f64.powf(value.log10().floor() - 1.0);
    (value / scale).round() * scale
}

fn network_topology(topology: &MeasuredTopology, options: &RenderOptions) -> Object {
    let origins = |costs: &[LinkCost]| {
        let mut by_origin: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
        for cost in costs {
            let mut entry = json!({
                "destination": cost.destination,
                "networkCost": network_cost(cost.rtt_p90_ms),
            });
            if let Some(bps) = cost.goodput_bps {
                entry["bandwidthCapacity"] = json!(bandwidth_quantity(bps));
            }
            by_origin.entry(&cost.origin).or_default().push(entry);
        }
        by_origin
            .into_iter()
            .map(|(origin, costs)| json!({"origin": origin, "costList": costs}))
            .collect::<Vec<_>>()
    };
    let name = names::object_name(&options.diktyo_name);
    let namespace = names::object_name(&options.diktyo_namespace);
    Object {
        kind: Kind::NetworkTopology,
        namespace: Some(namespace.clone()),
        name: name.clone(),
        body: json!({
            "apiVersion": api_version(Kind::NetworkTopology),
            "kind": "NetworkTopology",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "configmapName": options.diktyo_configmap,
                "weights": [{
                    "name": DIKTYO_WEIGHTS,
                    "topologyList": [
                        {"topologyKey": REGION_LABEL, "originList": origins(&topology.costs.regions)},
                        {"topologyKey": ZONE_LABEL, "originList": origins(&topology.costs.zones)},
                    ],
                }],
            },
        }),
    }
}

/// `objects` as YAML documents, one after another.
pub fn to_yaml(objects: &[Object]) -> Result<String, serde_yaml::Error> {
    let mut text = String::new();
    for object in objects {
        text.push_str("---\n");
        text.push_str(&serde_yaml::to_string(&object.body)?);
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_degraded_and_behind_a_bad_uplink_are_labelled_apart() {
        let topology = MeasuredTopology::one_zone(
            "a",
            &[&[
                ("a1", false, false),
                ("a2", true, false),
                ("a3", false, true),
            ]],
        );
        let labels: Vec<(String, Value, Value)> =
            render(&topology, Format::Labels, &RenderOptions::default())
                .into_iter()
                .map(|object| {
                    let labels = &object.body["metadata"]["labels"];
                    let label = |key: &str| labels[key].clone();
                    (object.name, label(DEGRADED_LABEL), label(BAD_UPLINK_LABEL))
                })
                .collect();
        let expected = [
            ("a1", "false", "false"),
            ("a2", "true", "false"),
            ("a3", "false", "true"),
        ]
        .map(|(name, degraded, uplink)| (name.to_owned(), json!(degraded), json!(uplink)));
        assert_eq!(labels, expected);
    }

    #[test]
    fn costs_keep_two_figures_and_never_fall_below_one() {
        assert_eq!(network_cost(0.2345), 230);
        assert_eq!(network_cost(5.25), 5300);
        assert_eq!(network_cost(0.0), 1);
        assert_eq!(network_cost(f64::NAN), 1);
    }

    #[test]
    fn bandwidths_are_quantities_of_two_figures() {
        assert_eq!(bandwidth_quantity(943_000_000.0), "940M");
        assert_eq!(bandwidth_quantity(10e9), "10G");
        assert_eq!(bandwidth_quantity(2.5e9), "2500M");
        assert_eq!(bandwidth_quantity(50e6), "50M");
        assert_eq!(bandwidth_quantity(120.0), "120");
    }
}
