//! The nodes the collector knows, and whether each is alive.
//!
//! An agent node is alive while its reports keep coming: it goes stale after
//! [`STALE_AFTER_WINDOWS`] of its own windows without one. Inventory nodes
//! run no agent, so their liveness is judged from what agents measure of them
//! (see [`crate::scored`]).

use std::collections::BTreeMap;

use crate::{NodeInfo, NodeKind, UnixMillis};

/// Windows without a report after which an agent node is stale.
pub const STALE_AFTER_WINDOWS: u64 = 3;

/// One node and what the registry tracks about it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeEntry {
    /// Identity and place.
    pub info: NodeInfo,
    /// Length of the agent's windows (0 for inventory nodes).
    pub window_ms: u64,
    /// When the agent last said hello or delivered a window.
    pub last_seen: Option<UnixMillis>,
    /// What the agent said of itself in its last hello (`None` for
    /// inventory nodes, and for agents restored from a save until they say
    /// hello again).
    pub agent: Option<AgentFacts>,
}

/// What an agent says of itself in its hello: its build and its clock.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AgentFacts {
    /// The agent's version.
    pub version: String,
    /// The agent's clock less the collector's when the hello arrived (ms):
    /// positive when the agent's runs ahead. Off by the hello's one-way
    /// delay, milliseconds, far below what matters (seconds).
    pub clock_offset_ms: Option<i64>,
}

impl NodeEntry {
    /// Whether the agent has been silent for too long. Inventory nodes are
    /// never stale here: the snapshot decides for them.
    pub fn agent_stale(&self, now: UnixMillis) -> bool {
        match (self.info.kind, self.last_seen) {
            (NodeKind::Inventory, _) => false,
            (NodeKind::Agent, None) => true,
            (NodeKind::Agent, Some(seen)) => {
                now.saturating_sub(seen) > STALE_AFTER_WINDOWS * self.window_ms
            }
        }
    }
}

/// Why the registry refused a change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RegistryError {
    /// An agent tried to take the name of an inventory node.
    #[error("node {0:?} is an inventory node and cannot run an agent session")]
    InventoryName(String),
}

/// All known nodes by name.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    nodes: BTreeMap<String, NodeEntry>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces an inventory node.
    pub fn add_inventory(&mut self, info: NodeInfo) {
        let info = NodeInfo {
            kind: NodeKind::Inventory,
            ..info
        };
        self.nodes.insert(
            info.name.clone(),
            NodeEntry {
                info,
                window_ms: 0,
                last_seen: None,
                agent: None,
            },
        );
    }

    /// Records an agent's hello. Returns whether the node's identity or place
    /// changed (so that peer sets must be sent again).
    pub fn agent_hello(
        &mut self,
        info: NodeInfo,
        window_ms: u64,
        now: UnixMillis,
    ) -> Result<bool, RegistryError> {
        let info = NodeInfo {
            kind: NodeKind::Agent,
            ..info
        };
        if let Some(existing) = self.nodes.get_mut(&info.name) {
            if existing.info.kind == NodeKind::Inventory {
                return Err(RegistryError::InventoryName(info.name));
            }
            let changed = existing.info != info;
            existing.info = info;
            existing.window_ms = window_ms;
            existing.last_seen = Some(now);
            return Ok(changed);
        }
        self.nodes.insert(
            info.name.clone(),
            NodeEntry {
                info,
                window_ms,
                last_seen: Some(now),
                agent: None,
            },
        );
        Ok(true)
    }

    /// Records what an agent said of itself in its hello.
    pub fn note_agent(&mut self, name: &str, facts: AgentFacts) {
        if let Some(entry) = self.nodes.get_mut(name) {
            entry.agent = Some(facts);
        }
    }

    /// Records that an agent delivered a window.
    pub fn note_report(&mut self, name: &str, now: UnixMillis) {
        if let Some(entry) = self.nodes.get_mut(name) {
            entry.last_seen = Some(entry.last_seen.map_or(now, |seen| seen.max(now)));
        }
    }

    /// The node of that name.
    pub fn get(&self, name: &str) -> Option<&NodeEntry> {
        self.nodes.get(name)
    }

    /// Every node, ordered by name.
    pub fn nodes(&self) -> impl Iterator<Item = &NodeEntry> {
        self.nodes.values()
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether no node is known.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(name: &str) -> NodeInfo {
        NodeInfo {
            name: name.into(),
            address: "127.0.0.2".into(),
            zone: "a".into(),
            region: String::new(),
            kind: NodeKind::Agent,
        }
    }

    #[test]
    fn agent_goes_stale_after_three_silent_windows() {
        let mut registry = Registry::new();
        registry.agent_hello(agent("n1"), 1_000, 10_000).unwrap();
        let entry = registry.get("n1").unwrap();
        assert!(!entry.agent_stale(13_000));
        assert!(entry.agent_stale(13_001));
        registry.note_report("n1", 13_000);
        assert!(!registry.get("n1").unwrap().agent_stale(15_000));
    }

    #[test]
    fn hello_reports_changes_only_when_identity_changes() {
        let mut registry = Registry::new();
        assert!(registry.agent_hello(agent("n1"), 1_000, 0).unwrap());
        assert!(!registry.agent_hello(agent("n1"), 1_000, 5).unwrap());
        let moved = NodeInfo {
            zone: "b".into(),
            ..agent("n1")
        };
        assert!(registry.agent_hello(moved, 1_000, 6).unwrap());
    }

    #[test]
    fn an_agent_cannot_take_an_inventory_name() {
        let mut registry = Registry::new();
        registry.add_inventory(NodeInfo {
            kind: NodeKind::Inventory,
            ..agent("nas")
        });
        assert_eq!(
            registry.agent_hello(agent("nas"), 1_000, 0),
            Err(RegistryError::InventoryName("nas".into()))
        );
    }
}
