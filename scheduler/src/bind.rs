//! The bind verb: kube-scheduler hands the binding of a pod to the
//! extender, which creates it through the API server and records the place
//! at once, so that the next worker of the same job, scheduled right after,
//! already sees this one (the pod watch would report it a moment later).

use std::collections::{HashMap, VecDeque};

use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

use crate::job::JobKey;

/// Most pods whose job the extender remembers between filter and bind.
pub const REMEMBERED_PODS: usize = 10_000;

/// The jobs of pods seen recently in filter and prioritize calls, by UID;
/// the oldest are forgotten first.
#[derive(Debug, Default)]
pub struct RecentPods {
    jobs: HashMap<String, JobKey>,
    order: VecDeque<String>,
}

impl RecentPods {
    /// Remembers the job of a pod.
    pub fn remember(&mut self, uid: &str, job: JobKey) {
        if self.jobs.insert(uid.to_owned(), job).is_none() {
            self.order.push_back(uid.to_owned());
            while self.order.len() > REMEMBERED_PODS {
                if let Some(old) = self.order.pop_front() {
                    self.jobs.remove(&old);
                }
            }
        }
    }

    /// The job of a pod, if seen.
    pub fn job(&self, uid: &str) -> Option<&JobKey> {
        self.jobs.get(uid)
    }
}

/// Creates the binding of `pod` in `namespace` to `node`.
pub async fn bind(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
    node: &str,
) -> Result<(), kube::Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(pod.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.to_owned()),
            ..ObjectReference::default()
        },
    };
    let _: serde_json::Value = pods
        .create_subresource("binding", pod, &PostParams::default(), &binding)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_a_bounded_number_of_pods() {
        let mut recent = RecentPods::default();
        let job = JobKey {
            namespace: "ml".into(),
            kind: "netaware",
            name: "j".into(),
        };
        for i in 0..REMEMBERED_PODS + 5 {
            recent.remember(&i.to_string(), job.clone());
        }
        assert!(recent.job("0").is_none());
        assert!(recent.job(&(REMEMBERED_PODS + 4).to_string()).is_some());
        assert_eq!(recent.jobs.len(), REMEMBERED_PODS);
    }
}
