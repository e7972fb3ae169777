//! The inventory file: nodes that run no agent but that every agent probes
//! (storage nodes, gateways, bare hosts, switches).
//!
//! ```yaml
//! - name: nas-1
//!   address: 10.0.5.20
//!   zone: zone-a
//!   region: eu-1      # optional
//!   stamp_port: 7472  # optional: a STAMP reflector answers UDP probes
//!                     # there (`netaware reflect`, or a switch's, on 862)
//! ```
//!
//! Without a `stamp_port` the agents probe the node by ICMP only.

use std::collections::HashSet;
use std::net::IpAddr;
use std::path::Path;

use netaware_core::{NodeInfo, NodeKind};

use crate::validate::check_name;

/// Most entries an inventory may hold.
pub const MAX_INVENTORY_NODES: usize = 10_000;
/// Largest inventory file read.
pub const MAX_INVENTORY_BYTES: u64 = 16 * 1024 * 1024;

/// Why an inventory could not be used.
#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    /// The file could not be read.
    #[error("cannot read inventory {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is too large.
    #[error("inventory {path} is larger than {MAX_INVENTORY_BYTES} bytes")]
    TooLarge {
        /// The file.
        path: String,
    },
    /// Not YAML of the expected shape.
    #[error("inventory is not a YAML list of {{name, address, zone, region, stamp_port}}: {0}")]
    Parse(String),
    /// An entry that makes no sense.
    #[error("inventory entry {index} ({name:?}): {reason}")]
    Entry {
        /// Position in the list, from 0.
        index: usize,
        /// The entry's name.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    address: String,
    zone: String,
    #[serde(default)]
    region: String,
    #[serde(default)]
    stamp_port: u16,
}

/// A node of the inventory.
#[derive(Debug, Clone, PartialEq)]
pub struct InventoryNode {
    /// Who and where it is.
    pub info: NodeInfo,
    /// Where a STAMP reflector answers UDP probes on it; `None`: nowhere.
    pub stamp_port: Option<u16>,
}

impl From<NodeInfo> for InventoryNode {
    fn from(info: NodeInfo) -> Self {
        Self {
            info,
            stamp_port: None,
        }
    }
}

/// Reads and checks an inventory file.
pub fn load(path: &Path) -> Result<Vec<InventoryNode>, InventoryError> {
    let shown = path.display().to_string();
    let size = std::fs::metadata(path)
        .map_err(|source| InventoryError::Read {
            path: shown.clone(),
            source,
        })?
        .len();
    if size > MAX_INVENTORY_BYTES {
        return Err(InventoryError::TooLarge { path: shown });
    }
    let text = std::fs::read_to_string(path).map_err(|source| InventoryError::Read {
        path: shown,
        source,
    })?;
    parse(&text)
}

/// Parses and checks inventory YAML.
pub fn parse(text: &str) -> Result<Vec<InventoryNode>, InventoryError> {
    let entries: Option<Vec<Entry>> =
        serde_yaml::from_str(text).map_err(|err| InventoryError::Parse(err.to_string()))?;
    let entries = entries.unwrap_or_default();
    if entries.len() > MAX_INVENTORY_NODES {
        return Err(InventoryError::Parse(format!(
            "more than {MAX_INVENTORY_NODES} entries"
        )));
    }
    let mut names = HashSet::new();
    entries
        .into_iter()
        .enumerate()
        .map(|(index, entry)| {
            let fail = |reason: String| InventoryError::Entry {
                index,
                name: entry.name.clone(),
                reason,
            };
            check_name("name", &entry.name, false).map_err(|e| fail(e.0))?;
            check_name("zone", &entry.zone, false).map_err(|e| fail(e.0))?;
            check_name("region", &entry.region, true).map_err(|e| fail(e.0))?;
            if entry.address.parse::<IpAddr>().is_err() {
                return Err(fail(format!(
                    "address {:?} is not an IP address",
                    entry.address
                )));
            }
            if !names.insert(entry.name.clone()) {
                return Err(fail("the name appears twice".into()));
            }
            Ok(InventoryNode {
                info: NodeInfo {
                    name: entry.name,
                    address: entry.address,
                    zone: entry.zone,
                    region: entry.region,
                    kind: NodeKind::Inventory,
                },
                stamp_port: (entry.stamp_port != 0).then_some(entry.stamp_port),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_entries_with_optional_region() {
        let nodes = parse("- {name: nas, address: 10.0.0.5, zone: a}\n- {name: gw, address: '::1', zone: b, region: r}\n").unwrap();
        assert_eq!(nodes.len(), 2);
        assert_eq!(nodes[0].info.region, "");
        assert_eq!(nodes[1].info.region, "r");
        assert_eq!(nodes[1].info.kind, NodeKind::Inventory);
        assert_eq!(nodes[0].stamp_port, None);
        let reflecting =
            parse("- {name: sw, address: 10.0.0.9, zone: a, stamp_port: 862}\n").unwrap();
        assert_eq!(reflecting[0].stamp_port, Some(862));
        assert!(parse("").unwrap().is_empty());
    }

    #[test]
    fn refuses_bad_entries_with_their_position() {
        for (text, needle) in [
            ("- {name: nas, address: nope, zone: a}", "entry 0"),
            (
                "- {name: nas, address: 10.0.0.1, zone: a}\n- {name: nas, address: 10.0.0.2, zone: a}",
                "twice",
            ),
            ("- {name: nas, address: 10.0.0.1}", "zone"),
            (
                "- {name: nas, address: 10.0.0.1, zone: a, colour: red}",
                "colour",
            ),
            ("name: nas", "YAML list"),
            ("- {name: '', address: 10.0.0.1, zone: a}", "empty"),
        ] {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }
}
