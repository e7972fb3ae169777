//! The collector's open faults, acted on in the cluster: an
//! `events.k8s.io/v1` Event on each Node a fault is about when it opens
//! (type Warning, reason [`OPENED`]) and when it clears (Normal,
//! [`CLEARED`]), so that `kubectl describe node` and every event
//! exporter show it; and, opt-in (`--taint-faults`), the NoSchedule taint
//! [`TAINT_KEY`] on a node with a node fault, taken off when it clears, so
//! that Kueue's node replacement and every scheduler react.
//!
//! The taint is the one field of a Node's spec that several controllers
//! write (the node lifecycle controller, kubelet, operators), and the list
//! is replaced whole by any write: so the publisher reads the Node, adds
//! or removes its own taint alone and writes the list back under the
//! Node's `resourceVersion` (a merge patch that the API server refuses
//! with 409 if the Node changed meanwhile: tried again next round). It
//! never touches a taint of another key.
//!
//! Which nodes carry the taint is learnt from the API server at start, so
//! that a publisher restarted after a fault cleared still takes it off.
//! What was announced is not: after a restart the faults still open are
//! announced again (an Event too many, never one too few).
//!
//! [`changes`], [`event`] and [`with_taint`] are pure; [`FaultActions`]
//! holds what a round needs from the last.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use netaware_core::fault_kind::FaultKind;
use netaware_core::faults::tracker::{Fault, FaultKey};
use netaware_runtime::events::{EventFacts, EventType};
use serde_json::{Value, json};

/// The taint on a node with a node fault.
pub const TAINT_KEY: &str = "netaware.io/network-fault";
/// The Event's reason when a fault opens.
pub const OPENED: &str = "NetworkFault";
/// The Event's reason when it clears.
pub const CLEARED: &str = "NetworkFaultCleared";
/// The Events' reporting controller.
pub const CONTROLLER: &str = "netaware.io/publish-topology";
/// Where Events on Nodes (which have no namespace) go, as kubelet's do.
pub const EVENT_NAMESPACE: &str = "default";

/// What changed between two rounds of open faults.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FaultChanges {
    /// Faults open now that were not.
    pub opened: Vec<Fault>,
    /// Faults that were open and are no more.
    pub cleared: Vec<Fault>,
}

/// What turns the faults `before` into `now`.
pub fn changes(before: &BTreeMap<FaultKey, Fault>, now: &[Fault]) -> FaultChanges {
    let now_keys: BTreeSet<FaultKey> = now.iter().map(Fault::key).collect();
    FaultChanges {
        opened: now
            .iter()
            .filter(|fault| !before.contains_key(&fault.key()))
            .cloned()
            .collect(),
        cleared: before
            .iter()
            .filter(|(key, _)| !now_keys.contains(key))
            .map(|(_, fault)| fault.clone())
            .collect(),
    }
}

/// What a fault says, for the Event's note and the taint's value.
pub fn describe(fault: &Fault) -> String {
    let what = match fault.kind {
        FaultKind::Node => format!("node {}", fault.nodes.join(", ")),
        FaultKind::BlockUplink => format!(
            "uplink of block {} of {} ({})",
            fault.block.unwrap_or(0),
            fault.zones.join(", "),
            fault.nodes.join(", ")
        ),
        FaultKind::ZoneLink => format!("link between {}", fault.zones.join(" and ")),
        FaultKind::Pair => format!("path {}", fault.nodes.join(" <-> ")),
        FaultKind::ZoneLabel => format!(
            "zone label of {}: it measures like {}",
            fault.nodes.join(", "),
            fault.measures_like.as_deref().unwrap_or("another zone")
        ),
    };
    let level = fault.metric.judged(fault.value, fault.baseline);
    format!(
        "{} fault on network {}: {what} {level}, confidence {:.2}",
        fault.kind, fault.network, fault.confidence
    )
}

/// The Event on `node` saying that `fault` opened (or cleared).
pub fn event(node: &str, fault: &Fault, opened: bool, instance: &str, at: SystemTime) -> Value {
    let (reason, kind, note) = if opened {
        (OPENED, EventType::Warning, describe(fault))
    } else {
        (
            CLEARED,
            EventType::Normal,
            format!("cleared: {}", describe(fault)),
        )
    };
    // Kubelet names a Node by its name as its UID in Events, and
    // `kubectl describe node` finds them either way.
    let regarding = json!({"apiVersion": "v1", "kind": "Node", "name": node, "uid": node});
    let facts = EventFacts {
        namespace: EVENT_NAMESPACE,
        object_name: node,
        regarding: &regarding,
        controller: CONTROLLER,
        instance,
        action: "Localise",
        reason,
        kind,
    };
    netaware_runtime::events::event(&facts, &note, at)
}

/// The nodes that should carry [`TAINT_KEY`]: those with a node fault that
/// fails its node in placement ([`Fault::fails_its_node`]).
pub fn tainted_nodes(faults: &[Fault]) -> BTreeSet<String> {
    faults
        .iter()
        .filter(|fault| fault.fails_its_node())
        .flat_map(|fault| fault.nodes.iter().cloned())
        .collect()
}

/// A Node's taints with netaware's on (or off), `None` when they already
/// are: every other taint is kept as it is, in its place.
pub fn with_taint(taints: &[Value], on: bool) -> Option<Vec<Value>> {
    let ours = |taint: &Value| taint.get("key").and_then(Value::as_str) == Some(TAINT_KEY);
    let has = taints.iter().any(ours);
    match (has, on) {
        (true, true) | (false, false) => None,
        (false, true) => {
            let mut taints = taints.to_vec();
            taints.push(json!({"key": TAINT_KEY, "value": "node", "effect": "NoSchedule"}));
            Some(taints)
        }
        (true, false) => Some(taints.iter().filter(|t| !ours(t)).cloned().collect()),
    }
}

/// What one round of fault actions did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultReport {
    /// Events posted.
    pub events: usize,
    /// Nodes the taint was put on.
    pub tainted: usize,
    /// Nodes it was taken off.
    pub untainted: usize,
    /// Writes that failed (an Event is not tried again; a taint is, next
    /// round).
    pub failed: usize,
}

/// What the fault actions keep from one round to the next.
#[derive(Debug, Clone, Default)]
pub struct FaultActions {
    /// Whether node faults taint their node.
    pub taint: bool,
    /// The faults announced as open.
    pub announced: BTreeMap<FaultKey, Fault>,
    /// The nodes that carry the taint.
    pub tainted: BTreeSet<String>,
}

/// A node's taint to put on or take off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaintChange {
    /// The node.
    pub node: String,
    /// On (true) or off.
    pub on: bool,
}

impl FaultActions {
    /// The Events a round with `open` faults posts, as (node, fault,
    /// opened), and the taints it changes: the publisher writes them and
    /// then calls [`FaultActions::announced`].
    pub fn plan(&self, open: &[Fault]) -> (Vec<(String, Fault, bool)>, Vec<TaintChange>) {
        let FaultChanges { opened, cleared } = changes(&self.announced, open);
        let events = opened
            .into_iter()
            .map(|fault| (fault, true))
            .chain(cleared.into_iter().map(|fault| (fault, false)))
            .flat_map(|(fault, opened)| {
                fault
                    .nodes
                    .clone()
                    .into_iter()
                    .map(move |node| (node, fault.clone(), opened))
            })
            .collect();
        let wanted = if self.taint {
            tainted_nodes(open)
        } else {
            BTreeSet::new()
        };
        let taints = wanted
            .difference(&self.tainted)
            .map(|node| TaintChange {
                node: node.clone(),
                on: true,
            })
            .chain(self.tainted.difference(&wanted).map(|node| TaintChange {
                node: node.clone(),
                on: false,
            }))
            .collect();
        (events, taints)
    }

    /// Remembers `open` as announced.
    pub fn announced(&mut self, open: &[Fault]) {
        self.announced = open.iter().map(|f| (f.key(), f.clone())).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netaware_core::fault_kind::FaultMetric;
    use netaware_core::network::Network;

    fn fault(kind: FaultKind, nodes: &[&str]) -> Fault {
        Fault {
            kind,
            network: Network::primary(),
            metric: FaultMetric::Loss,
            nodes: nodes.iter().map(|n| (*n).to_owned()).collect(),
            zones: vec!["zone-a".into()],
            block: (kind == FaultKind::BlockUplink).then_some(2),
            measures_like: None,
            value: 0.05,
            baseline: 0.001,
            confidence: 0.9,
            evidence: Vec::new(),
            since_unix_ms: 1,
        }
    }

    #[test]
    fn a_fault_is_announced_on_each_of_its_nodes_when_it_opens_and_when_it_clears() {
        let nic = fault(FaultKind::Node, &["a1"]);
        let uplink = fault(FaultKind::BlockUplink, &["a4", "a5"]);
        let mut actions = FaultActions {
            taint: true,
            ..FaultActions::default()
        };
        let (events, taints) = actions.plan(&[nic.clone(), uplink.clone()]);
        let said: Vec<(&str, bool)> = events.iter().map(|(n, _, o)| (n.as_str(), *o)).collect();
        assert_eq!(said, [("a1", true), ("a4", true), ("a5", true)]);
        assert_eq!(
            taints,
            [TaintChange {
                node: "a1".into(),
                on: true
            }]
        );
        actions.announced(&[nic.clone(), uplink.clone()]);
        actions.tainted.insert("a1".into());
        // Nothing new: nothing to say or write.
        assert_eq!(actions.plan(&[nic, uplink.clone()]), (vec![], vec![]));
        // The NIC is fixed: a cleared Event on a1, its taint off.
        let (events, taints) = actions.plan(&[uplink]);
        assert_eq!(events.len(), 1);
        assert_eq!((events[0].0.as_str(), events[0].2), ("a1", false));
        assert_eq!(
            taints,
            [TaintChange {
                node: "a1".into(),
                on: false
            }]
        );
    }

    #[test]
    fn without_taints_no_node_is_tainted_and_a_left_over_taint_comes_off() {
        let mut actions = FaultActions::default();
        actions.tainted.insert("b1".into());
        let (_, taints) = actions.plan(&[fault(FaultKind::Node, &["a1"])]);
        assert_eq!(
            taints,
            [TaintChange {
                node: "b1".into(),
                on: false
            }]
        );
    }

    #[test]
    fn only_netawares_taint_is_put_on_or_taken_off() {
        let other = json!({"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"});
        let on = with_taint(std::slice::from_ref(&other), true).unwrap();
        assert_eq!(on.len(), 2);
        assert_eq!(on[0], other);
        assert_eq!(on[1]["key"], TAINT_KEY);
        assert_eq!(on[1]["effect"], "NoSchedule");
        assert_eq!(with_taint(&on, true), None);
        assert_eq!(with_taint(&on, false).unwrap(), vec![other.clone()]);
        assert_eq!(with_taint(&[other], false), None);
    }

    #[test]
    fn an_event_names_the_node_the_fault_and_its_level() {
        let uplink = fault(FaultKind::BlockUplink, &["a4", "a5"]);
        let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        let opened = event("a4", &uplink, true, "pub-1", at);
        assert_eq!(opened["type"], "Warning");
        assert_eq!(opened["reason"], OPENED);
        assert_eq!(opened["regarding"]["kind"], "Node");
        assert_eq!(opened["regarding"]["name"], "a4");
        assert_eq!(opened["metadata"]["namespace"], EVENT_NAMESPACE);
        let note = opened["note"].as_str().unwrap();
        assert_eq!(
            note,
            "block_uplink fault on network primary: uplink of block 2 of zone-a (a4, a5) loses 5.00% (usual 0.10%), confidence 0.90"
        );
        let cleared = event("a4", &uplink, false, "pub-1", at);
        assert_eq!(cleared["type"], "Normal");
        assert_eq!(cleared["reason"], CLEARED);
        assert!(cleared["note"].as_str().unwrap().starts_with("cleared: "));
    }
}
