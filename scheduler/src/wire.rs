//! The kube-scheduler extender protocol (k8s.io/kube-scheduler/extender/v1).
//!
//! Those Go types carry no JSON tags, so kube-scheduler writes the Go field
//! names ("Pod", "NodeNames", "FailedNodes", "Host", "Score"), and Go's
//! decoder matches keys without regard to case. These types write the Go
//! names and accept the lower-case spellings too. Pods and nodes stay raw
//! JSON: the extender reads the few fields it needs (name, namespace,
//! labels) and hands full node objects back untouched, as kube-scheduler
//! sent them.

use std::collections::BTreeMap;
use std::io::Write;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use netaware_core::extender::MAX_EXTENDER_PRIORITY;

/// What kube-scheduler sends to /filter and /prioritize.
#[derive(Debug, Clone, Deserialize)]
pub struct ExtenderArgs {
    /// The pod being scheduled (a full v1.Pod).
    #[serde(rename = "Pod", alias = "pod")]
    pub pod: Option<Value>,
    /// Candidate nodes as full v1.NodeList, when nodeCacheCapable is false.
    #[serde(rename = "Nodes", alias = "nodes", default)]
    pub nodes: Option<NodeList>,
    /// Candidate node names, when nodeCacheCapable is true.
    #[serde(
        rename = "NodeNames",
        alias = "nodenames",
        alias = "nodeNames",
        default
    )]
    pub node_names: Option<Vec<String>>,
}

/// A v1.NodeList, its items kept as they came.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct NodeList {
    /// The nodes.
    #[serde(default)]
    pub items: Vec<Value>,
    /// Everything else of the list (apiVersion, kind, metadata).
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// The answer to /filter.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ExtenderFilterResult {
    /// Nodes that pass, as full objects (when the request carried them).
    #[serde(rename = "Nodes", skip_serializing_if = "Option::is_none", default)]
    pub nodes: Option<NodeListOut>,
    /// Names of the nodes that pass (when the request carried names).
    #[serde(rename = "NodeNames", skip_serializing_if = "Option::is_none", default)]
    pub node_names: Option<Vec<String>>,
    /// Nodes that fail, with the reason; kube-scheduler may retry them.
    #[serde(rename = "FailedNodes", default)]
    pub failed_nodes: BTreeMap<String, String>,
    /// Nodes that fail in a way preemption cannot fix.
    #[serde(rename = "FailedAndUnresolvableNodes", default)]
    pub failed_and_unresolvable_nodes: BTreeMap<String, String>,
    /// An error that fails the whole call; empty when none.
    #[serde(rename = "Error", default)]
    pub error: String,
}

/// A node list in an answer.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeListOut {
    /// The passing nodes, as received.
    pub items: Vec<Value>,
}

/// One entry of the answer to /prioritize, borrowing its node's name.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct HostPriority<'a> {
    /// Node name.
    #[serde(rename = "Host")]
    pub host: &'a str,
    /// 0 to [`MAX_EXTENDER_PRIORITY`].
    #[serde(rename = "Score")]
    pub score: i64,
}

/// The answer to /prioritize (a HostPriorityList) for `scores`, as JSON,
/// the same as serde_json writes for a list of [`HostPriority`].
///
/// Written by hand into one buffer sized for it: through serde this was
/// 540 instructions a candidate, a third of what the decision costs, at
/// 5,000 candidates. A node's name is a DNS subdomain (lower-case letters,
/// digits, '-' and '.'), which JSON takes as it is; any other name is
/// escaped by serde_json.
pub fn host_priorities_json(scores: &[(&str, i64)]) -> Vec<u8> {
    // A name and its score take some 30 bytes besides the name.
    let size = scores
        .iter()
        .map(|(host, _)| host.len() + 30)
        .sum::<usize>()
        + 2;
    let mut json = Vec::with_capacity(size);
    json.push(b'[');
    for (i, &(host, score)) in scores.iter().enumerate() {
        if i > 0 {
            json.push(b',');
        }
        json.extend_from_slice(br#"{"Host":"#);
        write_name(&mut json, host);
        json.extend_from_slice(br#","Score":"#);
        // Writing to a Vec cannot fail.
        let _ = write!(json, "{score}");
        json.push(b'}');
    }
    json.push(b']');
    json
}

/// `name` as a JSON string.
fn write_name(json: &mut Vec<u8>, name: &str) {
    let plain = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'.';
    if name.bytes().all(plain) {
        json.push(b'"');
        json.extend_from_slice(name.as_bytes());
        json.push(b'"');
    } else {
        // Writing a string to a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *json, name);
    }
}

/// What kube-scheduler sends to /bind.
#[derive(Debug, Clone, Deserialize)]
pub struct ExtenderBindingArgs {
    /// The pod's name.
    #[serde(rename = "PodName", alias = "podName", alias = "podname")]
    pub pod_name: String,
    /// The pod's namespace.
    #[serde(
        rename = "PodNamespace",
        alias = "podNamespace",
        alias = "podnamespace"
    )]
    pub pod_namespace: String,
    /// The pod's UID.
    #[serde(rename = "PodUID", alias = "podUID", alias = "poduid")]
    pub pod_uid: String,
    /// The node chosen.
    #[serde(rename = "Node", alias = "node")]
    pub node: String,
}

/// The answer to /bind: an empty error means bound.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ExtenderBindingResult {
    /// Why binding failed; empty when it did not.
    #[serde(rename = "Error", default)]
    pub error: String,
}

/// The name of a v1.Node or v1.Pod object, if it has one.
pub fn object_name(object: &Value) -> Option<&str> {
    object.get("metadata")?.get("name")?.as_str()
}

/// The namespace of an object ("default" when not set).
pub fn object_namespace(object: &Value) -> &str {
    object
        .get("metadata")
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
        .unwrap_or("default")
}

/// The labels of an object.
pub fn object_labels(object: &Value) -> BTreeMap<String, String> {
    object
        .get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_priorities_written_by_hand_are_what_serde_writes(
            scores in proptest::collection::vec((".{0,12}", any::<i64>()), 0..8),
        ) {
            let borrowed: Vec<(&str, i64)> =
                scores.iter().map(|(host, score)| (host.as_str(), *score)).collect();
            let list: Vec<HostPriority<'_>> = borrowed
                .iter()
                .map(|&(host, score)| HostPriority { host, score })
                .collect();
            let by_hand = host_priorities_json(&borrowed);
            prop_assert_eq!(
                String::from_utf8(by_hand).unwrap(),
                serde_json::to_string(&list).unwrap()
            );
        }
    }

    #[test]
    fn node_names_are_written_plain_and_others_escaped() {
        let json = host_priorities_json(&[("node-1.zone-a", 10), ("a\"b\n", -1)]);
        assert_eq!(
            String::from_utf8(json).unwrap(),
            r#"[{"Host":"node-1.zone-a","Score":10},{"Host":"a\"b\n","Score":-1}]"#
        );
        assert_eq!(host_priorities_json(&[]), b"[]");
    }
}
