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

/// One entry of the answer to /prioritize.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct HostPriority {
    /// Node name.
    #[serde(rename = "Host")]
    pub host: String,
    /// 0 to [`MAX_EXTENDER_PRIORITY`].
    #[serde(rename = "Score")]
    pub score: i64,
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
