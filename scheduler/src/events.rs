//! Events on the pods the extender places, so that `kubectl describe pod`
//! answers "why here" and "why not there": one `events.k8s.io/v1` Event per
//! decision (reason [`REASON`]), aggregated (the chosen zone and why, the
//! best candidates with their terms, the nodes that failed with their
//! reasons: one Event, not one per node), at most one per pod per
//! [`MIN_GAP`] (kube-scheduler asks filter and prioritize for every
//! attempt, and retries a pod that does not fit).
//!
//! Only pods of a job the extender recognises, and only when it had
//! scores to decide with, or could not trust them (netaware cannot
//! measure: the pod is told that placement failed open). Recording
//! never holds up an answer to kube-scheduler: the Event is posted on a
//! task of its own, and a refusal is logged.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use netaware_core::extender::Explanation;
use netaware_core::verdict::Failure;
use netaware_runtime::events::{EventFacts, EventType, truncate};
use serde_json::{Value, json};

/// The Event's reason.
pub const REASON: &str = "NetawarePlacement";
/// The Events' reporting controller.
pub const CONTROLLER: &str = "netaware.io/scheduler-extender";
/// Least time between two Events on one pod.
pub const MIN_GAP: Duration = Duration::from_secs(60);
pub use netaware_runtime::events::MAX_NOTE_BYTES;
/// Pods remembered for the rate limit before the old ones are forgotten.
const REMEMBERED_PODS: usize = 10_000;

/// The pod an Event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its UID.
    pub uid: String,
}

/// What a decision says, for people, in at most [`MAX_NOTE_BYTES`].
pub fn note(
    job_size: usize,
    placed: usize,
    explanation: &Explanation,
    failed: &BTreeMap<&str, Failure>,
) -> String {
    let plural = if job_size == 1 { "" } else { "s" };
    let mut text = format!("job of {job_size} worker{plural}, {placed} placed: ");
    match &explanation.zone {
        Some(zone) => {
            let _ = write!(text, "zone {zone} ({})", explanation.zone_reason);
        }
        None => text.push_str("no zone: no candidate may take a worker"),
    }
    if !explanation.best.is_empty() {
        text.push_str("; best: ");
        let best: Vec<String> = explanation
            .best
            .iter()
            .map(|(name, score, terms)| {
                format!(
                    "{name} {score:.2} (delay {:.2}, loss {:.2}, throughput {:.2}; {} pairs, {} estimated)",
                    terms.delay, terms.loss, terms.throughput, terms.pairs, terms.fallback_pairs
                )
            })
            .collect();
        text.push_str(&best.join(", "));
    }
    if !failed.is_empty() {
        text.push_str("; not there: ");
        let failures: Vec<String> = failed
            .iter()
            .map(|(name, failure)| format!("{name}: {failure}"))
            .collect();
        text.push_str(&failures.join("; "));
    }
    truncate(&text, MAX_NOTE_BYTES)
}

/// The Event object, as posted.
pub fn event(pod: &PodRef, note: &str, instance: &str, at: SystemTime) -> Value {
    let regarding = json!({"apiVersion": "v1", "kind": "Pod", "namespace": pod.namespace,
                           "name": pod.name, "uid": pod.uid});
    let facts = EventFacts {
        namespace: &pod.namespace,
        object_name: &pod.name,
        regarding: &regarding,
        controller: CONTROLLER,
        instance,
        action: "Scheduling",
        reason: REASON,
        kind: EventType::Normal,
    };
    netaware_runtime::events::event(&facts, note, at)
}

/// Posts Events, at most one per pod per [`MIN_GAP`].
pub struct EventRecorder {
    client: kube::Client,
    instance: String,
    last: Mutex<HashMap<String, Instant>>,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder")
            .field("instance", &self.instance)
            .finish_non_exhaustive()
    }
}

impl EventRecorder {
    /// A recorder posting with `client` as `instance` (the pod's name).
    pub fn new(client: kube::Client, instance: String) -> Self {
        Self {
            client,
            instance,
            last: Mutex::new(HashMap::new()),
        }
    }

    /// Whether an Event on `uid` may go out at `now`; if so, it counts as
    /// gone.
    fn admit(&self, uid: &str, now: Instant) -> bool {
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if last
            .get(uid)
            .is_some_and(|&then| now.duration_since(then) < MIN_GAP)
        {
            return false;
        }
        if last.len() >= REMEMBERED_PODS {
            last.retain(|_, &mut then| now.duration_since(then) < MIN_GAP);
        }
        last.insert(uid.to_owned(), now);
        true
    }

    /// Posts `note` on `pod` in the background, unless an Event went on
    /// it less than [`MIN_GAP`] ago.
    pub fn record(&self, pod: PodRef, note: String) {
        if !self.admit(&pod.uid, Instant::now()) {
            return;
        }
        let body = event(&pod, &note, &self.instance, SystemTime::now());
        let client = self.client.clone();
        tokio::spawn(async move {
            if let Err(err) = netaware_runtime::events::post(client, body).await {
                tracing::warn!(pod = %pod.name, namespace = %pod.namespace, %err, "could not record the placement Event");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netaware_core::placement::{Basis, NodeTerms, ZoneReason};

    fn terms() -> NodeTerms {
        NodeTerms {
            quality: 0.7,
            delay: 0.97,
            loss: 1.0,
            throughput: 0.0,
            pairs: 6,
            fallback_pairs: 1,
            basis: Basis::Placed,
            in_chosen_zone: true,
        }
    }

    #[test]
    fn a_note_says_the_zone_the_best_and_the_failed_within_a_kilobyte() {
        let explanation = Explanation {
            zone: Some("zone-a".into()),
            zone_reason: ZoneReason::HoldsPlaced {
                count: 1,
                placed: 1,
            },
            best: vec![("a1".into(), 0.7, terms())],
        };
        let failed: BTreeMap<&str, Failure> = BTreeMap::new();
        let text = note(4, 1, &explanation, &failed);
        assert!(
            text.starts_with("job of 4 workers, 1 placed: zone zone-a ("),
            "{text}"
        );
        assert!(
            text.contains(
                "best: a1 0.70 (delay 0.97, loss 1.00, throughput 0.00; 6 pairs, 1 estimated)"
            ),
            "{text}"
        );
    }

    #[tokio::test]
    async fn one_event_per_pod_per_gap() {
        let (service, _api) = tower_test::mock::pair::<
            http::Request<kube::client::Body>,
            http::Response<kube::client::Body>,
        >();
        let recorder = EventRecorder::new(kube::Client::new(service, "default"), "x".into());
        let now = Instant::now();
        assert!(recorder.admit("u1", now));
        assert!(!recorder.admit("u1", now + MIN_GAP / 2));
        assert!(recorder.admit("u2", now + MIN_GAP / 2));
        assert!(recorder.admit("u1", now + MIN_GAP));
    }
}
