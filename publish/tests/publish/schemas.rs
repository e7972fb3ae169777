//! Every object netaware renders, checked against its kind's CRD schema
//! (tests/publish/crds/, written from the upstream CRDs) the way an API server
//! with strict field validation would: unknown fields rejected, types,
//! patterns, enums and bounds held, and the CEL rules that concern what
//! netaware writes checked by hand. Nodes' labels are checked against
//! Kubernetes' label syntax.

use std::collections::BTreeSet;

use netaware_core::measured_topology::{
    Block, BlockNode, LinkCost, MeasuredTopology, NetworkCosts, ZoneBlocks,
};
use netaware_publish::objects::{BAD_UPLINK_LABEL, BLOCK_LABEL, DEGRADED_LABEL, Kind};
use netaware_publish::{Format, KueueVersion, Object, RenderOptions, render};
use proptest::prelude::*;
use serde_json::{Value, json};

/// The CRD file of a kind.
fn crd(kind: Kind) -> &'static str {
    match kind {
        Kind::KueueTopology(_) => include_str!("crds/kueue-topology.yaml"),
        Kind::HyperNode => include_str!("crds/volcano-hypernode.yaml"),
        Kind::NetworkTopology => include_str!("crds/diktyo-networktopology.yaml"),
        Kind::Node => unreachable!("Nodes are built in"),
    }
}

/// The schema of `api_version` in the CRD, made strict: every object
/// with properties takes no others.
fn schema(kind: Kind, api_version: &str) -> Value {
    let crd: Value = serde_yaml::from_str(crd(kind)).expect("a CRD fixture");
    let (group, version) = api_version.split_once('/').expect("group/version");
    assert_eq!(crd["spec"]["group"], group);
    let mut schema = crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == version)
        .unwrap_or_else(|| panic!("{api_version} is not in the CRD"))["schema"]["openAPIV3Schema"]
        .clone();
    strict(&mut schema);
    schema
}

fn strict(schema: &mut Value) {
    if let Some(object) = schema.as_object_mut() {
        if object.contains_key("properties") && !object.contains_key("additionalProperties") {
            object.insert("additionalProperties".into(), Value::Bool(false));
        }
        for value in object.values_mut() {
            strict(value);
        }
    } else if let Some(array) = schema.as_array_mut() {
        array.iter_mut().for_each(strict);
    }
}

/// Why `object` would be refused, or `None`.
fn refusal(object: &Object) -> Option<String> {
    let body = &object.body;
    if object.kind == Kind::Node {
        return node_refusal(body);
    }
    let schema = schema(object.kind, body["apiVersion"].as_str()?);
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    let errors: Vec<String> = validator
        .iter_errors(body)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    if !errors.is_empty() {
        return Some(errors.join("; "));
    }
    if !is_dns_subdomain(body["metadata"]["name"].as_str()?) {
        return Some("metadata.name is not a DNS subdomain".into());
    }
    match object.kind {
        Kind::KueueTopology(_) => kueue_rules(body),
        Kind::HyperNode => volcano_rules(body),
        _ => None,
    }
}

fn kueue_rules(body: &Value) -> Option<String> {
    let levels: Vec<&str> = body["spec"]["levels"]
        .as_array()?
        .iter()
        .filter_map(|l| l["nodeLabel"].as_str())
        .collect();
    let unique: BTreeSet<&&str> = levels.iter().collect();
    if unique.len() != levels.len() {
        return Some("levels must be unique".into());
    }
    let hostname = levels.iter().position(|l| *l == "kubernetes.io/hostname");
    if hostname.is_some_and(|i| i + 1 != levels.len()) {
        return Some("kubernetes.io/hostname only at the lowest level".into());
    }
    None
}

fn volcano_rules(body: &Value) -> Option<String> {
    for member in body["spec"]["members"].as_array()? {
        let selector = &member["selector"];
        let kinds = ["exactMatch", "regexMatch", "labelMatch"]
            .iter()
            .filter(|k| selector.get(**k).is_some())
            .count();
        if kinds != 1 {
            return Some(format!("a member selector with {kinds} kinds of match"));
        }
    }
    None
}

fn is_label_value(value: &str) -> bool {
    value.len() <= 63
        && (value.is_empty()
            || (value.starts_with(|c: char| c.is_ascii_alphanumeric())
                && value.ends_with(|c: char| c.is_ascii_alphanumeric())
                && value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))))
}

fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|part| {
            !part.is_empty()
                && part.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                && part.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        })
}

fn node_refusal(body: &Value) -> Option<String> {
    let expected: BTreeSet<&str> = ["apiVersion", "kind", "metadata"].into();
    let keys: BTreeSet<&str> = body.as_object()?.keys().map(String::as_str).collect();
    if keys != expected || body["apiVersion"] != "v1" || body["kind"] != "Node" {
        return Some(format!("a Node apply configuration with {keys:?}"));
    }
    let labels = body["metadata"]["labels"].as_object()?;
    let keys: BTreeSet<&str> = labels.keys().map(String::as_str).collect();
    if keys != BTreeSet::from([BLOCK_LABEL, DEGRADED_LABEL, BAD_UPLINK_LABEL]) {
        return Some(format!("labels {keys:?}"));
    }
    let bad: Vec<&Value> = labels
        .values()
        .filter(|v| !v.as_str().is_some_and(is_label_value))
        .collect();
    if !bad.is_empty() {
        return Some(format!("label values {bad:?}"));
    }
    for label in [DEGRADED_LABEL, BAD_UPLINK_LABEL] {
        if !["true", "false"].contains(&labels[label].as_str()?) {
            return Some(format!("{label} is not true or false"));
        }
    }
    None
}

fn node(name: &str, degraded: bool) -> BlockNode {
    BlockNode {
        name: name.into(),
        degraded,
        bad_uplink: false,
    }
}

fn cost(origin: &str, destination: &str, rtt: f64, goodput: Option<f64>) -> LinkCost {
    LinkCost {
        origin: origin.into(),
        destination: destination.into(),
        rtt_p90_ms: rtt,
        goodput_bps: goodput,
        pairs: 9,
    }
}

/// Two zones in two regions, one with two blocks and a degraded node.
fn lab_like() -> MeasuredTopology {
    MeasuredTopology {
        zones: vec![
            ZoneBlocks {
                zone: "zone-a".into(),
                region: "region-1".into(),
                blocks: vec![
                    Block {
                        number: 1,
                        nodes: vec![node("a1", false), node("a2", false)],
                    },
                    Block {
                        number: 2,
                        nodes: vec![node("a3", true), node("a4", false)],
                    },
                ],
            },
            ZoneBlocks {
                zone: "zone-c".into(),
                region: "region-2".into(),
                blocks: vec![Block {
                    number: 1,
                    nodes: vec![node("c1", false)],
                }],
            },
        ],
        costs: NetworkCosts {
            zones: vec![
                cost("zone-a", "zone-c", 30.4, Some(94e6)),
                cost("zone-c", "zone-a", 30.6, None),
            ],
            regions: vec![cost("region-1", "region-2", 30.5, Some(94e6))],
        },
    }
}

fn all_formats(options: &RenderOptions, topology: &MeasuredTopology) -> Vec<Object> {
    [
        Format::Labels,
        Format::Kueue,
        Format::Volcano,
        Format::Diktyo,
    ]
    .into_iter()
    .flat_map(|format| render(topology, format, options))
    .collect()
}

#[test]
fn every_object_of_every_format_is_valid() {
    for version in [KueueVersion::V1beta2, KueueVersion::V1beta1] {
        let options = RenderOptions {
            kueue_version: version,
            ..RenderOptions::default()
        };
        let objects = all_formats(&options, &lab_like());
        // 5 nodes, a Topology, 3 + 2 HyperNodes, a NetworkTopology.
        assert_eq!(objects.len(), 12);
        for object in &objects {
            assert_eq!(refusal(object), None, "{}", object.body);
        }
    }
}

#[test]
fn the_yaml_printed_is_the_objects_applied() {
    let objects = all_formats(&RenderOptions::default(), &lab_like());
    let text = netaware_publish::objects::to_yaml(&objects).unwrap();
    let printed: Vec<Value> = text
        .split("---\n")
        .filter(|doc| !doc.trim().is_empty())
        .map(|doc| serde_yaml::from_str(doc).unwrap())
        .collect();
    let bodies: Vec<&Value> = objects.iter().map(|o| &o.body).collect();
    assert_eq!(printed.iter().collect::<Vec<_>>(), bodies);
}

#[test]
fn the_objects_say_what_was_measured() {
    let options = RenderOptions::default();
    let topology = lab_like();
    let labels = render(&topology, Format::Labels, &options);
    let a3 = labels.iter().find(|o| o.name == "a3").unwrap();
    assert_eq!(
        a3.body["metadata"]["labels"],
        json!({BLOCK_LABEL: "zone-a-2", DEGRADED_LABEL: "true", BAD_UPLINK_LABEL: "false"})
    );
    let hypernodes = render(&topology, Format::Volcano, &options);
    let zone_a = hypernodes.iter().find(|o| o.name == "zone-zone-a").unwrap();
    assert_eq!(zone_a.body["spec"]["tier"], 2);
    assert_eq!(
        zone_a.body["spec"]["members"],
        json!([
            {"type": "HyperNode", "selector": {"exactMatch": {"name": "block-zone-a-1"}}},
            {"type": "HyperNode", "selector": {"exactMatch": {"name": "block-zone-a-2"}}},
        ])
    );
    let diktyo = &render(&topology, Format::Diktyo, &options)[0];
    let zones = &diktyo.body["spec"]["weights"][0]["topologyList"][1];
    assert_eq!(zones["topologyKey"], "topology.kubernetes.io/zone");
    assert_eq!(
        zones["originList"][0],
        json!({"origin": "zone-a", "costList": [
            {"destination": "zone-c", "networkCost": 30000, "bandwidthCapacity": "94M"}
        ]})
    );
    assert_eq!(diktyo.namespace.as_deref(), Some("default"));
}

#[test]
fn the_checks_refuse_what_an_api_server_would() {
    let objects = all_formats(&RenderOptions::default(), &lab_like());
    let find = |kind: fn(&Kind) -> bool| objects.iter().find(|o| kind(&o.kind)).unwrap().clone();
    let mut stale_name = find(|k| *k == Kind::NetworkTopology);
    let spec = stale_name.body["spec"].as_object_mut().unwrap();
    let configmap = spec.remove("configmapName").unwrap();
    spec.insert("configMapName".into(), configmap);
    assert!(refusal(&stale_name).is_some());

    let mut negative = find(|k| *k == Kind::NetworkTopology);
    negative.body["spec"]["weights"][0]["topologyList"][1]["originList"][0]["costList"][0]["networkCost"] =
        json!(-1);
    assert!(refusal(&negative).is_some());

    let mut two_selectors = find(|k| *k == Kind::HyperNode);
    two_selectors.body["spec"]["members"][0]["selector"]["regexMatch"] = json!({"pattern": "a.*"});
    assert!(refusal(&two_selectors).is_some());

    let mut host_first = find(|k| matches!(k, Kind::KueueTopology(_)));
    host_first.body["spec"]["levels"]
        .as_array_mut()
        .unwrap()
        .reverse();
    assert!(refusal(&host_first).is_some());

    let mut unknown = find(|k| matches!(k, Kind::KueueTopology(_)));
    unknown.body["spec"]["levels"][0]["label"] = json!("x");
    assert!(refusal(&unknown).is_some());

    let mut bad_label = find(|k| *k == Kind::Node);
    bad_label.body["metadata"]["labels"][BLOCK_LABEL] = json!("zone a/1");
    assert!(refusal(&bad_label).is_some());
}

fn any_name() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z][a-z0-9-]{0,20}[a-z0-9]", "[A-Za-z0-9 _./:-]{1,90}",]
}

proptest! {
    /// Whatever the zones, regions and nodes are called (node names are
    /// always valid: Kubernetes named them) and whatever was measured,
    /// every object is valid.
    #[test]
    fn objects_are_valid_for_any_topology(
        zones in prop::collection::btree_map(any_name(), (any_name(), 1u32..4, 1usize..4), 1..4),
        rtts in prop::collection::vec((0.0f64..500.0, prop::option::of(1.0f64..1e12)), 1..6),
    ) {
        let mut serial = 0;
        let topology = MeasuredTopology {
            zones: zones
                .iter()
                .map(|(zone, (region, blocks, size))| ZoneBlocks {
                    zone: zone.clone(),
                    region: region.clone(),
                    blocks: (1..=*blocks)
                        .map(|number| Block {
                            number,
                            nodes: (0..*size)
                                .map(|_| {
                                    serial += 1;
                                    node(&format!("node-{serial}"), serial % 3 == 0)
                                })
                                .collect(),
                        })
                        .collect(),
                })
                .collect(),
            costs: NetworkCosts {
                zones: zones
                    .keys()
                    .zip(zones.keys().skip(1))
                    .zip(&rtts)
                    .map(|((a, b), (rtt, goodput))| cost(a, b, *rtt, *goodput))
                    .collect(),
                regions: rtts
                    .iter()
                    .map(|(rtt, goodput)| cost("r1", "r2", *rtt, *goodput))
                    .collect(),
            },
        };
        for object in all_formats(&RenderOptions::default(), &topology) {
            prop_assert_eq!(refusal(&object), None, "{}", object.body);
        }
    }
}
