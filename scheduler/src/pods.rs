//! The pod watch: a kube-rs watcher of the pods bound to nodes, folded into
//! [`Placements`]. It restarts by itself after errors (kube-runtime's
//! default backoff), and a restart resyncs the whole table.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::RwLock;
use tokio_util::sync::CancellationToken;

use crate::placements::{Placements, PodFacts};

/// The facts of a pod that placements need.
pub fn facts(pod: &Pod) -> Option<PodFacts> {
    let meta = &pod.metadata;
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    Some(PodFacts {
        uid: meta.uid.clone()?,
        namespace: meta.namespace.clone().unwrap_or_else(|| "default".into()),
        labels: meta.labels.clone().unwrap_or_default(),
        node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
        finished: matches!(phase, Some("Succeeded" | "Failed")),
    })
}

/// Follows every pod bound to a node until `shutdown`.
pub async fn follow(
    client: kube::Client,
    placements: Arc<RwLock<Placements>>,
    shutdown: CancellationToken,
) {
    let pods: Api<Pod> = Api::all(client);
    let config = watcher::Config::default().fields("spec.nodeName!=");
    let mut events = std::pin::pin!(watcher::watcher(pods, config).default_backoff());
    loop {
        let event = tokio::select! {
            () = shutdown.cancelled() => return,
            event = events.next() => event,
        };
        let event = match event {
            None => return,
            Some(Ok(event)) => event,
            Some(Err(err)) => {
                tracing::warn!(%err, "pod watch error; retrying");
                continue;
            }
        };
        let mut table = placements.write().await;
        match event {
            Event::Init => table.begin_resync(),
            Event::InitApply(pod) => {
                if let Some(facts) = facts(&pod) {
                    table.resync_apply(&facts);
                }
            }
            Event::InitDone => {
                table.end_resync();
                tracing::info!(pods = table.len(), "pod watch in sync");
            }
            Event::Apply(pod) => {
                if let Some(facts) = facts(&pod) {
                    table.apply(&facts);
                }
            }
            Event::Delete(pod) => {
                if let Some(uid) = pod.metadata.uid.as_deref() {
                    table.delete(uid);
                }
            }
        }
    }
}
