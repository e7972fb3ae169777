//! Jobs arriving over time on a [`Cluster`], competing for its nodes,
//! placed by one policy; each runs its iterations at the pace the alpha-beta
//! model gives on the links it got. First come, first served: a job that
//! does not fit waits, and the jobs behind it wait too (as a gang scheduler
//! without backfill does).

use std::cmp::Ordering;
use std::collections::{BTreeSet, BinaryHeap, VecDeque};

use netaware_core::extender::PolicyConfig;
use netaware_core::snapshot::ScoredMatrix;
use rand::Rng;

use crate::cluster::Cluster;
use crate::model::ring_allreduce_s;
use crate::policies::Policy;
use crate::stats;

/// The jobs' mix.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct WorkloadSpec {
    /// Jobs in the trace.
    pub jobs: usize,
    /// Workers per job, with their weights.
    pub sizes: Vec<(usize, f64)>,
    /// Iterations per job: uniform between these.
    pub iterations: (u32, u32),
    /// Gradient per iteration (ResNet-50: about 100 MB).
    pub gradient_bytes: f64,
    /// Compute per iteration, seconds.
    pub compute_s: f64,
    /// Offered load: busy node-seconds asked for over node-seconds there
    /// are, if every job ran at the best pace the cluster allows.
    pub load: f64,
}

impl Default for WorkloadSpec {
    fn default() -> Self {
        Self {
            jobs: 400,
            sizes: vec![(2, 0.3), (4, 0.3), (8, 0.2), (16, 0.15), (32, 0.05)],
            iterations: (500, 5_000),
            gradient_bytes: 100e6,
            compute_s: 0.1,
            load: 0.7,
        }
    }
}

/// A job of the trace.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Job {
    /// Its place in the trace.
    pub id: usize,
    /// When it arrives (s from the start).
    pub arrival_s: f64,
    /// Workers.
    pub size: usize,
    /// Training iterations it runs.
    pub iterations: u32,
}

/// Draws a trace: Poisson arrivals at the rate that gives `spec.load`.
pub fn trace(spec: &WorkloadSpec, nodes: usize, rng: &mut impl Rng) -> Vec<Job> {
    let total_weight: f64 = spec.sizes.iter().map(|(_, w)| w).sum();
    let mut jobs = Vec::with_capacity(spec.jobs);
    for id in 0..spec.jobs {
        let mut pick = rng.random_range(0.0..total_weight.max(f64::MIN_POSITIVE));
        let mut size = spec.sizes.last().map_or(1, |(s, _)| *s);
        for (s, w) in &spec.sizes {
            if pick < *w {
                size = *s;
                break;
            }
            pick -= w;
        }
        let iterations =
            rng.random_range(spec.iterations.0..=spec.iterations.1.max(spec.iterations.0));
        jobs.push(Job {
            id,
            arrival_s: 0.0,
            size: size.min(nodes).max(1),
            iterations,
        });
    }
    // The best pace: every link at a healthy NIC's rate inside a zone.
    let best = |job: &Job| {
        let comm = ring_allreduce_s(job.size, spec.gradient_bytes, |_, _| crate::model::Link {
            rtt_ms: 0.1,
            loss: 0.0,
            rate_bps: 100e9,
        });
        f64::from(job.iterations) * (spec.compute_s + comm) * job.size as f64
    };
    let demand = stats::mean(&jobs.iter().map(best).collect::<Vec<_>>());
    let rate = spec.load * nodes as f64 / demand.max(f64::MIN_POSITIVE);
    let mut now = 0.0;
    for job in &mut jobs {
        now += -(1.0 - rng.random::<f64>()).ln() / rate;
        job.arrival_s = now;
    }
    jobs
}

/// What happened to one job.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct JobResult {
    /// The job's place in the trace.
    pub id: usize,
    /// Workers.
    pub size: usize,
    /// From arrival to start.
    pub wait_s: f64,
    /// From start to end.
    pub run_s: f64,
    /// Job completion time: arrival to end.
    pub jct_s: f64,
    /// Zones its workers span.
    pub zones: usize,
    /// Seconds per iteration.
    pub iteration_s: f64,
    /// Where its workers ran, in rank order.
    pub nodes: Vec<String>,
}

/// The figures of one policy's run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PolicySummary {
    /// The policy.
    pub policy: Policy,
    /// Mean job completion time (s).
    pub mean_jct_s: f64,
    /// 90th percentile of job completion time (s).
    pub p90_jct_s: f64,
    /// Mean wait from arrival to start (s).
    pub mean_wait_s: f64,
    /// Mean time per iteration (s).
    pub mean_iteration_s: f64,
    /// Share of jobs whose workers span more than one zone.
    pub multi_zone: f64,
}

impl PolicySummary {
    /// Sums up `results`.
    pub fn of(policy: Policy, results: &[JobResult]) -> Self {
        let jct: Vec<f64> = results.iter().map(|r| r.jct_s).collect();
        let wait: Vec<f64> = results.iter().map(|r| r.wait_s).collect();
        let iteration: Vec<f64> = results.iter().map(|r| r.iteration_s).collect();
        let multi = results.iter().filter(|r| r.zones > 1).count();
        Self {
            policy,
            mean_jct_s: stats::mean(&jct),
            p90_jct_s: stats::quantile(&jct, 0.9),
            mean_wait_s: stats::mean(&wait),
            mean_iteration_s: stats::mean(&iteration),
            multi_zone: multi as f64 / results.len().max(1) as f64,
        }
    }
}

#[derive(Debug, PartialEq)]
struct Running {
    end_s: f64,
    nodes: Vec<usize>,
}

impl Eq for Running {}

impl Ord for Running {
    fn cmp(&self, other: &Self) -> Ordering {
        // The earliest end first out of the max-heap.
        other.end_s.total_cmp(&self.end_s)
    }
}

impl PartialOrd for Running {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Runs `jobs` on `cluster`, placed by `policy` from `matrix` (what
/// netaware measured on it), and says what happened to each.
pub fn simulate(
    cluster: &Cluster,
    matrix: &ScoredMatrix,
    jobs: &[Job],
    spec: &WorkloadSpec,
    policy: Policy,
    config: &PolicyConfig,
    rng: &mut impl Rng,
) -> Vec<JobResult> {
    let mut free: BTreeSet<usize> = (0..cluster.names.len()).collect();
    let mut running: BinaryHeap<Running> = BinaryHeap::new();
    let mut queue: VecDeque<&Job> = VecDeque::new();
    let mut results = Vec::with_capacity(jobs.len());
    let mut arrivals = jobs.iter().peekable();
    loop {
        // The next event: an arrival or an end, whichever is first.
        let next_end = running.peek().map(|r| r.end_s);
        let next_arrival = arrivals.peek().map(|j| j.arrival_s);
        let now = match (next_arrival, next_end) {
            (None, None) => break,
            (Some(a), Some(e)) if e <= a => {
                let done = running.pop().expect("peeked");
                free.extend(done.nodes);
                e
            }
            (Some(a), _) => {
                queue.push_back(arrivals.next().expect("peeked"));
                a
            }
            (None, Some(e)) => {
                let done = running.pop().expect("peeked");
                free.extend(done.nodes);
                e
            }
        };
        while let Some(job) = queue.front() {
            if job.size > free.len() {
                break;
            }
            let names: Vec<String> = free.iter().map(|&i| cluster.names[i].clone()).collect();
            let Some(placed) = policy.place(matrix, &names, job.size, config, rng) else {
                break;
            };
            let nodes: Vec<usize> = placed
                .iter()
                .map(|name| cluster.index_of(name).expect("a node of the cluster"))
                .collect();
            for node in &nodes {
                free.remove(node);
            }
            let comm = ring_allreduce_s(nodes.len(), spec.gradient_bytes, |i, j| {
                cluster.link(nodes[i], nodes[j])
            });
            let iteration_s = spec.compute_s + comm;
            let run_s = f64::from(job.iterations) * iteration_s;
            let zones: BTreeSet<String> = nodes.iter().map(|&n| cluster.zone_name(n)).collect();
            results.push(JobResult {
                id: job.id,
                size: job.size,
                wait_s: now - job.arrival_s,
                run_s,
                jct_s: now - job.arrival_s + run_s,
                zones: zones.len(),
                iteration_s,
                nodes: placed,
            });
            running.push(Running {
                end_s: now + run_s,
                nodes,
            });
            queue.pop_front();
        }
    }
    results.sort_by_key(|r| r.id);
    results
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{ClusterSpec, score_config};
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn every_job_runs_once_and_waits_only_for_nodes() {
        let spec = ClusterSpec {
            zones: 2,
            nodes_per_zone: 8,
            degraded_nodes: 0.1,
            degraded_links: 0.0,
            max_peers: 0,
        };
        let mut rng = StdRng::seed_from_u64(3);
        let cluster = Cluster::generate(&spec, &mut rng);
        let matrix = cluster.measured(&score_config(), 0, 0, &mut rng);
        let workload = WorkloadSpec {
            jobs: 40,
            sizes: vec![(2, 1.0), (4, 1.0), (8, 0.5)],
            iterations: (10, 100),
            ..WorkloadSpec::default()
        };
        let jobs = trace(&workload, 16, &mut rng);
        assert!(jobs.windows(2).all(|w| w[0].arrival_s <= w[1].arrival_s));
        for policy in Policy::ALL {
            let results = simulate(
                &cluster,
                &matrix,
                &jobs,
                &workload,
                policy,
                &PolicyConfig::default(),
                &mut rng,
            );
            assert_eq!(results.len(), jobs.len(), "{policy:?}");
            for (result, job) in results.iter().zip(&jobs) {
                assert!(result.wait_s >= 0.0 && result.run_s > 0.0);
                assert!((result.jct_s - result.wait_s - result.run_s).abs() < 1e-6);
                assert!(result.iteration_s >= workload.compute_s);
                assert_eq!(result.size, job.size);
            }
        }
    }
}
