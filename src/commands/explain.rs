//! `netaware explain`: the decision the extender would make now for a job,
//! and why, for people (or `--json`): where the next worker would go, the
//! zone and why, every candidate with its score and the term that holds it
//! back most against the best of its zone, and the nodes that may not take
//! a worker with their reasons.
//!
//! A job is given by its size and placed workers (`--size`, `--peer`), or
//! by name (`--job [NAMESPACE/]NAME`): then its pods are read from the
//! Kubernetes API, by the same job labels the extender knows, and its
//! placed workers are the nodes its running pods are bound to.

use k8s_openapi::api::core::v1::Pod;
use netaware_scheduler::job::{GROUP_SIZE_LABEL, JOB_LABELS};

use super::{PlacedByArg, Target};
use crate::output::OutputArgs;
use crate::render::{figure, keep, neutral_line, table, text};
use netaware_core::network::Network;
use netaware_scheduler::networks::NETWORK_LABEL;
pub use netaware_views::explain::{ExplainJson, ExplainedJson, Term, WeakestJson};

/// The flags of `explain`.
#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    #[command(flatten)]
    target: Target,
    #[command(flatten)]
    output: OutputArgs,
    /// Without it: the network its pods' `netaware.io/network` label names
    /// (with `--job`), else the primary.
    #[command(flatten)]
    network: PlacedByArg,
    /// The job by name, `[NAMESPACE/]NAME`: its size and placed workers
    /// (and its network) read from the Kubernetes API (its pods, by their
    /// job labels).
    #[arg(long, conflicts_with_all = ["size", "peers"])]
    job: Option<String>,
    /// Workers in the job.
    #[arg(long, required_unless_present = "job")]
    size: Option<usize>,
    /// A node where a worker already runs (repeat for more).
    #[arg(long = "peer")]
    peers: Vec<String>,
}

/// Explains what the extender would decide for the job now: the
/// collector's Rank runs the extender's decision code on its snapshot, by
/// the settings the extender places by.
pub async fn run(args: ExplainArgs) -> anyhow::Result<()> {
    let (size, placed, labelled) = match &args.job {
        Some(job) => {
            let client = kube::Client::try_default().await.map_err(|err| {
                anyhow::anyhow!("--job reads the job's pods from the Kubernetes API: {err}")
            })?;
            let pods = job_pods(client, job).await?;
            let (size, placed) = job_from_pods(&pods);
            (size, placed, network_of_pods(&pods)?)
        }
        None => (args.size.unwrap_or(1), args.peers.clone(), None),
    };
    anyhow::ensure!(size >= 1, "--size must be at least 1");
    let networks = args
        .network
        .networks
        .map(|list| list.0)
        .or(labelled)
        .unwrap_or_else(|| vec![Network::primary()]);
    let ranking = args
        .target
        .connect()
        .await?
        .rank_by(&networks, size, &placed)
        .await?;
    let answer = ExplainJson::new(size, placed, &networks, &ranking);
    args.output.print(&answer, |wide| render(&answer, wide))
}

/// The explanation as text for people: the job, the zone and the next
/// worker's node, then every candidate with its score, the extender's
/// priority and what holds it back (`wide`: whether it passes the
/// extender's filter too).
pub fn render(explain: &ExplainJson, wide: bool) -> String {
    let placed = if explain.placed.is_empty() {
        String::new()
    } else {
        format!(" ({})", explain.placed.join(", "))
    };
    let mut out = format!(
        "job of {} workers, {} placed{placed}, by network {}
",
        explain.size,
        explain.placed.len(),
        explain.network
    );
    out.push_str(&neutral_line(explain.neutral.as_deref()));
    out.push_str(&match &explain.zone {
        Some(zone) => format!("zone {zone}: {}\n", explain.zone_reason),
        None => format!("no zone: {}\n", explain.zone_reason),
    });
    out.push_str(&format!(
        "next worker: {}\n\n",
        explain
            .next
            .as_deref()
            .unwrap_or("nowhere (no node may take it)")
    ));
    let columns = keep(
        wide,
        &[
            (text("NODE"), false),
            (text("ZONE"), false),
            (figure("SCORE"), false),
            (figure("EXTENDER"), false),
            (text("FILTER"), true),
            (text("WHY"), false),
        ],
    );
    let rows = explain.nodes.iter().map(|explained| {
        let node = &explained.node;
        let score = if node.feasible {
            format!("{:.3}", node.score)
        } else {
            "-".to_owned()
        };
        let filter = if node.passes_filter {
            "passes"
        } else {
            "fails"
        };
        keep(
            wide,
            &[
                (node.name.clone(), false),
                (node.zone.clone(), false),
                (score, false),
                (node.extender_score.to_string(), false),
                (filter.to_owned(), true),
                (explained.why.clone(), false),
            ],
        )
    });
    out.push_str(&table(&columns, rows));
    out
}

/// A job's size and placed workers from its pods: the size its
/// `netaware.io/group-size` label says, else the number of its pods; the
/// placed workers, the nodes its pods that have not finished are bound to.
pub fn job_from_pods(pods: &[Pod]) -> (usize, Vec<String>) {
    let size = pods
        .iter()
        .filter_map(|p| {
            p.metadata
                .labels
                .as_ref()?
                .get(GROUP_SIZE_LABEL)?
                .parse()
                .ok()
        })
        .find(|&n: &usize| n > 0)
        .unwrap_or(pods.len());
    let mut placed: Vec<String> = pods
        .iter()
        .filter(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded" | "Failed"))
        })
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    placed.sort();
    (size.max(1), placed)
}

/// The networks a job's pods are placed by, as their
/// `netaware.io/network` label names them (the first pod that has it);
/// `None` when none has it.
pub fn network_of_pods(pods: &[Pod]) -> anyhow::Result<Option<Vec<Network>>> {
    let label = pods
        .iter()
        .find_map(|p| p.metadata.labels.as_ref()?.get(NETWORK_LABEL));
    label
        .map(|list| {
            Network::parse_list(list)
                .map_err(|err| anyhow::anyhow!("the job's label {NETWORK_LABEL}: {err}"))
        })
        .transpose()
}

/// The pods of the job `[namespace/]name`, by the first job label that
/// names any.
pub async fn job_pods(client: kube::Client, job: &str) -> anyhow::Result<Vec<Pod>> {
    let (namespace, name) = job.split_once('/').unwrap_or(("default", job));
    let pods: kube::Api<Pod> = kube::Api::namespaced(client, namespace);
    for (label, _) in JOB_LABELS {
        let selector = format!("{label}={name}");
        let list = pods
            .list(&kube::api::ListParams::default().labels(&selector))
            .await?;
        if !list.items.is_empty() {
            return Ok(list.items);
        }
    }
    anyhow::bail!("no pods of a job {name} in namespace {namespace} (by any of the job labels)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_says_what_holds_each_candidate_back() {
        let terms = |delay: f64| netaware_proto::v1::NodeTerms {
            delay,
            loss: 1.0,
            throughput: 0.5,
            pairs: 4,
            ..Default::default()
        };
        let ranking = netaware_proto::v1::RankResponse {
            zone: "zone-b".into(),
            zone_reason: "the best zone".into(),
            nodes: vec![
                netaware_proto::v1::RankedNode {
                    name: "b1".into(),
                    zone: "zone-b".into(),
                    feasible: true,
                    terms: Some(terms(0.97)),
                    ..Default::default()
                },
                netaware_proto::v1::RankedNode {
                    name: "b2".into(),
                    zone: "zone-b".into(),
                    feasible: true,
                    terms: Some(terms(0.40)),
                    ..Default::default()
                },
                netaware_proto::v1::RankedNode {
                    name: "a3".into(),
                    zone: "zone-a".into(),
                    reason: "degraded: loss 20.0%".into(),
                    terms: Some(terms(0.9)),
                    ..Default::default()
                },
            ],
            next: "b1".into(),
            ..Default::default()
        };
        let rails = Network::parse_list("rail-0,rail-1").unwrap();
        let text = render(&ExplainJson::new(3, vec![], &rails, &ranking), false);
        assert!(text.contains("by network rail-0,rail-1"), "{text}");
        assert!(
            text.contains("held back by delay 0.40 (its zone's best 0.97)"),
            "{text}"
        );
        assert!(
            text.contains("a3") && text.contains("not there: degraded: loss 20.0%"),
            "{text}"
        );
    }

    #[test]
    fn a_job_from_its_pods() {
        let pod = |node: Option<&str>, phase: &str, size: Option<&str>| {
            let mut pod: Pod = serde_json::from_value(serde_json::json!({
                "metadata": {"name": "w", "labels": {}},
                "spec": {"containers": []},
                "status": {"phase": phase}
            }))
            .unwrap();
            pod.spec.as_mut().unwrap().node_name = node.map(str::to_owned);
            if let Some(size) = size {
                pod.metadata
                    .labels
                    .as_mut()
                    .unwrap()
                    .insert(GROUP_SIZE_LABEL.into(), size.into());
            }
            pod
        };
        let pods = [
            pod(Some("a2"), "Running", None),
            pod(Some("a1"), "Running", None),
            pod(Some("c9"), "Succeeded", None),
            pod(None, "Pending", None),
        ];
        assert_eq!(job_from_pods(&pods), (4, vec!["a1".into(), "a2".into()]));
        let sized = [pod(Some("a1"), "Running", Some("8"))];
        assert_eq!(job_from_pods(&sized), (8, vec!["a1".into()]));
        // The network its pods' label names, else none.
        assert_eq!(network_of_pods(&pods).unwrap(), None);
        let mut on_rails = pod(Some("a1"), "Running", None);
        on_rails
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(NETWORK_LABEL.into(), "rail-1, rail-0".into());
        let networks = network_of_pods(&[pods[0].clone(), on_rails.clone()]).unwrap();
        assert_eq!(
            networks,
            Some(Network::parse_list("rail-1,rail-0").unwrap())
        );
        on_rails
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(NETWORK_LABEL.into(), "Rail 0".into());
        assert!(network_of_pods(&[on_rails]).is_err());
    }

    #[tokio::test]
    async fn a_job_by_name_is_read_label_by_label_from_the_api() {
        use http::{Request, Response};
        let (service, mut api) =
            tower_test::mock::pair::<Request<kube::client::Body>, Response<kube::client::Body>>();
        let client = kube::Client::new(service, "default");
        let reading = tokio::spawn(job_pods(client, "ml/resnet"));
        let list = |items: serde_json::Value| {
            serde_json::json!({"apiVersion": "v1", "kind": "PodList",
                               "metadata": {"resourceVersion": "5"}, "items": items})
        };
        // No pod carries netaware's own group label; Kubeflow's names it.
        let mut asked = Vec::new();
        for answer in [
            list(serde_json::json!([])),
            list(serde_json::json!([{
                "metadata": {"name": "resnet-worker-0", "namespace": "ml",
                             "labels": {"training.kubeflow.org/job-name": "resnet"}},
                "spec": {"nodeName": "a1", "containers": []},
                "status": {"phase": "Running"}
            }])),
        ] {
            let (request, respond) = api.next_request().await.expect("a list");
            asked.push(request.uri().to_string());
            respond.send_response(
                Response::builder()
                    .body(kube::client::Body::from(
                        serde_json::to_vec(&answer).unwrap(),
                    ))
                    .unwrap(),
            );
        }
        let pods = reading.await.unwrap().unwrap();
        assert_eq!(
            asked,
            [
                "/api/v1/namespaces/ml/pods?&labelSelector=netaware.io%2Fgroup%3Dresnet",
                "/api/v1/namespaces/ml/pods?&labelSelector=training.kubeflow.org%2Fjob-name%3Dresnet",
            ]
        );
        assert_eq!(job_from_pods(&pods), (1, vec!["a1".to_owned()]));
    }
}
