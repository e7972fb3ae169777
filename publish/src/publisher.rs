//! Applies the measured topology's objects to the API server with
//! server-side apply (field manager [`FIELD_MANAGER`]), writing only what
//! changed since it last wrote it, and at most one write per
//! [`PublisherOptions::min_write_gap`].
//!
//! What netaware wrote before it started is learnt from the API server
//! (Nodes carrying [`BLOCK_LABEL`], HyperNodes carrying netaware's source
//! label), so that after a restart it still takes its labels off a node
//! that left the topology and deletes the HyperNode of a block that is no
//! more. Taking labels off is an apply of the Node with none: server-side
//! apply then removes the fields this manager owned, and only those.
//!
//! A write that fails is logged and tried again at the next round; one
//! object's failure does not hold up the others.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, SystemTime};

use kube::Api;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use netaware_core::faults::tracker::Fault;
use netaware_core::measured_topology::MeasuredTopology;
use tokio::time::Instant;

use crate::faults::{self, FaultActions, FaultReport, TaintChange};
use crate::objects::{
    self, BLOCK_LABEL, Format, Kind, Object, RenderOptions, VOLCANO_SOURCE, VOLCANO_SOURCE_LABEL,
};

/// The field manager of every write.
pub const FIELD_MANAGER: &str = "netaware";

/// What to publish, and how fast.
#[derive(Debug, Clone, PartialEq)]
pub struct PublisherOptions {
    /// The formats to write.
    pub formats: BTreeSet<Format>,
    /// Names and places of the single objects.
    pub render: RenderOptions,
    /// Least time between two writes: a first round over 5,000 nodes
    /// at the default 50 ms takes about four minutes, and never more
    /// than 20 writes a second reach the API server.
    pub min_write_gap: Duration,
    /// Put the NoSchedule taint [`faults::TAINT_KEY`] on nodes with a node
    /// fault (and take it off when it clears). Without it the publisher
    /// leaves taints alone (`kubectl taint nodes --all
    /// netaware.io/network-fault-` takes off what an earlier run left).
    pub taint_faults: bool,
    /// Who posts the Events (the pod's name).
    pub instance: String,
}

/// What one round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PublishReport {
    /// Objects written because they changed.
    pub applied: usize,
    /// Objects left alone because they had not.
    pub unchanged: usize,
    /// Nodes whose labels were taken off and HyperNodes deleted.
    pub removed: usize,
    /// Writes that failed (tried again next round).
    pub failed: usize,
}

/// Why the publisher could not start.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// Listing what netaware wrote before failed.
    #[error("listing the {what} netaware wrote before: {source}")]
    List {
        /// Nodes or HyperNodes.
        what: &'static str,
        /// The API server's answer.
        source: kube::Error,
    },
}

type Key = (Kind, Option<String>, String);

/// Nodes per page when the publisher reads whole Nodes.
const NODES_PER_PAGE: u32 = 500;

/// Applies the topology's objects round after round.
pub struct Publisher {
    client: kube::Client,
    options: PublisherOptions,
    /// What each object was last written as.
    applied: HashMap<Key, serde_json::Value>,
    /// Nodes that may carry netaware's labels.
    labelled: BTreeSet<String>,
    /// HyperNodes netaware wrote.
    hypernodes: BTreeSet<String>,
    /// What the fault actions keep between rounds.
    fault_actions: FaultActions,
    last_write: Option<Instant>,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Publisher {
    /// A publisher that first learns which Nodes and HyperNodes netaware
    /// wrote before (for the formats it publishes).
    pub async fn start(
        client: kube::Client,
        options: PublisherOptions,
    ) -> Result<Self, PublishError> {
        let mut publisher = Self {
            client,
            options,
            applied: HashMap::new(),
            labelled: BTreeSet::new(),
            hypernodes: BTreeSet::new(),
            fault_actions: FaultActions::default(),
            last_write: None,
        };
        publisher.fault_actions.taint = publisher.options.taint_faults;
        if publisher.options.taint_faults {
            // A taint left by an earlier run comes off once its fault is
            // gone.
            publisher.fault_actions.tainted =
                publisher
                    .nodes_tainted()
                    .await
                    .map_err(|source| PublishError::List {
                        what: "tainted Nodes",
                        source,
                    })?;
        }
        if publisher.options.formats.contains(&Format::Labels) {
            publisher.labelled = publisher
                .names_labelled(Kind::Node, BLOCK_LABEL)
                .await
                .map_err(|source| PublishError::List {
                    what: "Nodes",
                    source,
                })?;
        }
        if publisher.options.formats.contains(&Format::Volcano) {
            let selector = format!("{VOLCANO_SOURCE_LABEL}={VOLCANO_SOURCE}");
            publisher.hypernodes = publisher
                .names_labelled(Kind::HyperNode, &selector)
                .await
                .map_err(|source| PublishError::List {
                    what: "HyperNodes",
                    source,
                })?;
        }
        Ok(publisher)
    }

    fn api(&self, kind: Kind, namespace: Option<&str>) -> Api<DynamicObject> {
        let resource = kind.api_resource();
        match namespace {
            Some(namespace) => Api::namespaced_with(self.client.clone(), namespace, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        }
    }

    async fn names_labelled(&self, kind: Kind, selector: &str) -> kube::Result<BTreeSet<String>> {
        let list = self
            .api(kind, None)
            .list_metadata(&ListParams::default().labels(selector))
            .await?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|item| item.metadata.name)
            .collect())
    }

    /// The nodes that carry netaware's fault taint, read page by page (a
    /// taint has no selector, and 5,000 whole Nodes are too many for one
    /// answer).
    async fn nodes_tainted(&self) -> kube::Result<BTreeSet<String>> {
        let api = self.api(Kind::Node, None);
        let mut params = ListParams::default().limit(NODES_PER_PAGE);
        let mut tainted = BTreeSet::new();
        loop {
            let page = api.list(&params).await?;
            tainted.extend(
                page.items
                    .into_iter()
                    .filter(|node| faults::with_taint(&taints_of(node), true).is_none())
                    .filter_map(|node| node.metadata.name),
            );
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params = params.continue_token(&token),
                _ => return Ok(tainted),
            }
        }
    }

    /// Announces the faults that opened and cleared since the last round
    /// (an Event on each node they are about) and, as asked, puts the
    /// fault taint on the nodes with a node fault and takes it off the
    /// others ([`faults`]).
    pub async fn act_on_faults(&mut self, open: &[Fault]) -> FaultReport {
        let mut report = FaultReport::default();
        let (events, taints) = self.fault_actions.plan(open);
        for (node, fault, opened) in events {
            self.pace().await;
            let body = faults::event(
                &node,
                &fault,
                opened,
                &self.options.instance,
                SystemTime::now(),
            );
            match netaware_runtime::events::post(self.client.clone(), body).await {
                Ok(()) => report.events += 1,
                Err(err) => {
                    report.failed += 1;
                    tracing::warn!(%node, %err, "could not post the fault Event");
                }
            }
        }
        self.fault_actions.announced(open);
        for TaintChange { node, on } in taints {
            match self.set_taint(&node, on).await {
                Ok(()) => {
                    if on {
                        report.tainted += 1;
                        self.fault_actions.tainted.insert(node);
                    } else {
                        report.untainted += 1;
                        self.fault_actions.tainted.remove(&node);
                    }
                }
                // A node that is gone carries no taint.
                Err(err) if is_not_found(&err) => {
                    self.fault_actions.tainted.remove(&node);
                }
                Err(err) => {
                    report.failed += 1;
                    tracing::warn!(%node, on, %err, "could not change the fault taint; trying again next round");
                }
            }
        }
        report
    }

    /// Puts netaware's fault taint on `node` (or takes it off), leaving
    /// every other taint as it is: a read, then a write of the list under
    /// the read's resourceVersion, which the API server refuses (409) if
    /// the Node changed in between.
    async fn set_taint(&mut self, node: &str, on: bool) -> kube::Result<()> {
        self.pace().await;
        let api = self.api(Kind::Node, None);
        let current = api.get(node).await?;
        let Some(taints) = faults::with_taint(&taints_of(&current), on) else {
            return Ok(());
        };
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": current.metadata.resource_version},
            "spec": {"taints": taints},
        });
        self.pace().await;
        api.patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(drop)
    }

    /// Whether the API server says the object is not there.
    async fn is_gone(&mut self, kind: Kind, name: &str) -> bool {
        self.pace().await;
        matches!(self.api(kind, None).get_metadata(name).await, Err(err) if is_not_found(&err))
    }

    /// The objects of `kind` that netaware wrote and may have to take back.
    fn owned(&mut self, kind: Kind) -> &mut BTreeSet<String> {
        match kind {
            Kind::HyperNode => &mut self.hypernodes,
            _ => &mut self.labelled,
        }
    }

    /// Takes back what netaware wrote of an object no longer published: a
    /// Node's labels (an apply with none), a HyperNode (deleted). Whether
    /// it is done (or the object is gone anyway).
    async fn remove(&mut self, kind: Kind, name: &str) -> bool {
        let result = if kind == Kind::Node {
            self.apply(&objects::unlabelled_node(name)).await
        } else {
            self.pace().await;
            let params = DeleteParams::default();
            self.api(kind, None).delete(name, &params).await.map(drop)
        };
        match result {
            Ok(()) => true,
            Err(err) if is_not_found(&err) => true,
            // A deleted Node cannot be applied to: the API server says 404,
            // or 403 where the publisher may not create Nodes (it may not:
            // an apply to a missing Node would make one).
            Err(err) => {
                let gone = self.is_gone(kind, name).await;
                if !gone {
                    tracing::warn!(?kind, %name, %err, "could not take back; trying again next round");
                }
                gone
            }
        }
    }

    /// Waits until a write is allowed.
    async fn pace(&mut self) {
        if let Some(last) = self.last_write {
            tokio::time::sleep_until(last + self.options.min_write_gap).await;
        }
        self.last_write = Some(Instant::now());
    }

    async fn apply(&mut self, object: &Object) -> kube::Result<()> {
        self.pace().await;
        let params = PatchParams::apply(FIELD_MANAGER).force();
        self.api(object.kind, object.namespace.as_deref())
            .patch(&object.name, &params, &Patch::Apply(&object.body))
            .await
            .map(drop)
    }

    /// Writes what changed of `topology`'s objects, takes netaware's labels
    /// off the nodes that left it and deletes the HyperNodes of blocks that
    /// are no more.
    pub async fn publish(&mut self, topology: &MeasuredTopology) -> PublishReport {
        let mut report = PublishReport::default();
        let desired: Vec<Object> = self
            .options
            .formats
            .iter()
            .flat_map(|&format| objects::render(topology, format, &self.options.render))
            .collect();
        for object in &desired {
            let key: Key = (object.kind, object.namespace.clone(), object.name.clone());
            if self.applied.get(&key) == Some(&object.body) {
                report.unchanged += 1;
                continue;
            }
            match self.apply(object).await {
                Ok(()) => {
                    report.applied += 1;
                    match object.kind {
                        Kind::Node => self.labelled.insert(object.name.clone()),
                        Kind::HyperNode => self.hypernodes.insert(object.name.clone()),
                        _ => false,
                    };
                    self.applied.insert(key, object.body.clone());
                }
                Err(err) => {
                    report.failed += 1;
                    tracing::warn!(kind = ?object.kind, name = %object.name, %err, "could not apply; trying again next round");
                }
            }
        }
        for kind in [Kind::Node, Kind::HyperNode] {
            let wanted: BTreeSet<&str> = desired
                .iter()
                .filter(|o| o.kind == kind)
                .map(|o| o.name.as_str())
                .collect();
            let gone: Vec<String> = self
                .owned(kind)
                .iter()
                .filter(|name| !wanted.contains(name.as_str()))
                .cloned()
                .collect();
            for name in gone {
                if self.remove(kind, &name).await {
                    report.removed += 1;
                    self.owned(kind).remove(&name);
                    self.applied.remove(&(kind, None, name));
                } else {
                    report.failed += 1;
                }
            }
        }
        report
    }
}

/// A Node's taints, as they are.
fn taints_of(node: &DynamicObject) -> Vec<serde_json::Value> {
    node.data["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Whether the API server said the object is not there (a node deleted,
/// a HyperNode someone else removed): nothing left to take off.
fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 404)
}
