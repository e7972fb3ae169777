//! Which distributed training job a pod belongs to, from the labels that
//! job controllers already put on their pods.

use std::collections::BTreeMap;

/// Our own label: pods with the same value form one job.
pub const GROUP_LABEL: &str = "netaware.io/group";
/// Our own label: the number of workers in the group.
pub const GROUP_SIZE_LABEL: &str = "netaware.io/group-size";

/// Labels that name a job, in the order they are looked at, with the kind
/// of controller that sets each.
pub const JOB_LABELS: [(&str, &str); 5] = [
    (GROUP_LABEL, "netaware"),
    ("training.kubeflow.org/job-name", "kubeflow"),
    ("volcano.sh/job-name", "volcano"),
    ("jobset.sigs.k8s.io/jobset-name", "jobset"),
    ("batch.kubernetes.io/job-name", "job"),
];

/// A job, unique within the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobKey {
    /// The pod's namespace.
    pub namespace: String,
    /// Which label named it.
    pub kind: &'static str,
    /// The job's name.
    pub name: String,
}

/// The job of a pod with these labels, and its size when a label says it.
pub fn job_of(
    namespace: &str,
    labels: &BTreeMap<String, String>,
) -> Option<(JobKey, Option<usize>)> {
    let (label, kind) = JOB_LABELS
        .iter()
        .find(|(label, _)| labels.contains_key(*label))?;
    let key = JobKey {
        namespace: namespace.to_owned(),
        kind,
        name: labels[*label].clone(),
    };
    let size = labels
        .get(GROUP_SIZE_LABEL)
        .and_then(|s| s.parse().ok())
        .filter(|&n: &usize| n > 0);
    Some((key, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn recognises_each_controller() {
        for (label, kind) in JOB_LABELS {
            let (key, _) = job_of("ml", &labels(&[(label, "resnet")])).unwrap();
            assert_eq!(
                (key.kind, key.name.as_str(), key.namespace.as_str()),
                (kind, "resnet", "ml")
            );
        }
        assert_eq!(job_of("ml", &labels(&[("app", "web")])), None);
    }

    #[test]
    fn our_label_wins_and_carries_the_size() {
        let both = labels(&[
            ("batch.kubernetes.io/job-name", "j"),
            (GROUP_LABEL, "g"),
            (GROUP_SIZE_LABEL, "8"),
        ]);
        let (key, size) = job_of("ml", &both).unwrap();
        assert_eq!(
            (key.kind, key.name.as_str(), size),
            ("netaware", "g", Some(8))
        );
        let bad_size = labels(&[(GROUP_LABEL, "g"), (GROUP_SIZE_LABEL, "-1")]);
        assert_eq!(job_of("ml", &bad_size).unwrap().1, None);
    }
}
