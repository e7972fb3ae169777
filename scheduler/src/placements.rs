//! Where each job's workers run: pods that carry a job label and are bound
//! to a node. Pure; fed by the pod watch ([`crate::pods`]).
//!
//! A full resync (the watch's initial list, or its restart) builds a new
//! table beside the old one and swaps it in when complete, so that a
//! restart never shows a half-empty picture.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::job::{JobKey, job_of};

/// What the placements need to know of a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFacts {
    /// The pod's UID.
    pub uid: String,
    /// Its namespace.
    pub namespace: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// The node it is bound to, if any.
    pub node: Option<String>,
    /// Whether it has finished (Succeeded or Failed): it holds no place.
    pub finished: bool,
}

/// Pods of jobs, by UID, with their job and node.
#[derive(Debug, Clone, Default)]
pub struct Placements {
    pods: HashMap<String, (JobKey, String)>,
    resync: Option<HashMap<String, (JobKey, String)>>,
}

impl Placements {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    fn entry(pod: &PodFacts) -> Option<(JobKey, String)> {
        let node = pod.node.clone().filter(|_| !pod.finished)?;
        let (job, _) = job_of(&pod.namespace, &pod.labels)?;
        Some((job, node))
    }

    /// A pod was added or changed.
    pub fn apply(&mut self, pod: &PodFacts) {
        match Self::entry(pod) {
            Some(entry) => {
                self.pods.insert(pod.uid.clone(), entry);
            }
            None => {
                self.pods.remove(&pod.uid);
            }
        }
    }

    /// The extender itself bound a pod of `job` to `node`: it holds its
    /// place at once, before the watch reports it.
    pub fn record_binding(&mut self, uid: &str, job: JobKey, node: &str) {
        self.pods.insert(uid.to_owned(), (job, node.to_owned()));
    }

    /// A pod was deleted.
    pub fn delete(&mut self, uid: &str) {
        self.pods.remove(uid);
    }

    /// A full resync starts.
    pub fn begin_resync(&mut self) {
        self.resync = Some(HashMap::new());
    }

    /// A pod of the resync.
    pub fn resync_apply(&mut self, pod: &PodFacts) {
        if let (Some(table), Some(entry)) = (self.resync.as_mut(), Self::entry(pod)) {
            table.insert(pod.uid.clone(), entry);
        }
    }

    /// The resync is complete: its table replaces the old one.
    pub fn end_resync(&mut self) {
        if let Some(table) = self.resync.take() {
            self.pods = table;
        }
    }

    /// The nodes where workers of `job` run, each once, by name.
    pub fn placed(&self, job: &JobKey) -> Vec<String> {
        let nodes: BTreeSet<&str> = self
            .pods
            .values()
            .filter(|(j, _)| j == job)
            .map(|(_, node)| node.as_str())
            .collect();
        nodes.into_iter().map(str::to_owned).collect()
    }

    /// Pods known.
    pub fn len(&self) -> usize {
        self.pods.len()
    }

    /// Whether no pod is known.
    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(uid: &str, job: &str, node: Option<&str>) -> PodFacts {
        PodFacts {
            uid: uid.into(),
            namespace: "ml".into(),
            labels: BTreeMap::from([("volcano.sh/job-name".to_string(), job.to_string())]),
            node: node.map(str::to_owned),
            finished: false,
        }
    }

    fn key(job: &str) -> JobKey {
        job_of(
            "ml",
            &BTreeMap::from([("volcano.sh/job-name".to_string(), job.to_string())]),
        )
        .unwrap()
        .0
    }

    #[test]
    fn bound_running_pods_of_a_job_hold_places() {
        let mut placements = Placements::new();
        placements.apply(&pod("1", "j", Some("a1")));
        placements.apply(&pod("2", "j", Some("a2")));
        placements.apply(&pod("3", "j", None));
        placements.apply(&pod("4", "other", Some("b1")));
        placements.apply(&pod("5", "j", Some("a1")));
        assert_eq!(placements.placed(&key("j")), ["a1", "a2"]);
        placements.apply(&PodFacts {
            finished: true,
            ..pod("2", "j", Some("a2"))
        });
        placements.delete("5");
        assert_eq!(placements.placed(&key("j")), ["a1"]);
        let unlabelled = PodFacts {
            labels: BTreeMap::new(),
            ..pod("6", "j", Some("c1"))
        };
        placements.apply(&unlabelled);
        assert_eq!(placements.len(), 2);
    }

    #[test]
    fn a_binding_holds_a_place_until_the_watch_says_otherwise() {
        let mut placements = Placements::new();
        placements.record_binding("7", key("j"), "a3");
        assert_eq!(placements.placed(&key("j")), ["a3"]);
        placements.apply(&pod("7", "j", Some("a3")));
        assert_eq!(placements.len(), 1);
        placements.delete("7");
        assert!(placements.is_empty());
    }

    #[test]
    fn a_resync_replaces_the_table_when_complete() {
        let mut placements = Placements::new();
        placements.apply(&pod("1", "j", Some("a1")));
        placements.begin_resync();
        placements.resync_apply(&pod("2", "j", Some("a2")));
        assert_eq!(
            placements.placed(&key("j")),
            ["a1"],
            "the old table serves until the resync ends"
        );
        placements.end_resync();
        assert_eq!(placements.placed(&key("j")), ["a2"]);
    }
}
