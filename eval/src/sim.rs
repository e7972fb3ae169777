//! Jobs arriving over time on a [`Cluster`], competing for its nodes,
//! placed by one policy from what it knows at that moment (a
//! [`Timeline`] of views); each runs its iterations at the pace the
//! alpha-beta model gives on the links it got, with the links it shares
//! with other jobs divided max-min fairly ([`crate::contention`]). First
//! come, first served: a job that does not fit waits, and the jobs behind
//! it wait too (as a gang scheduler without backfill does).
//!
//! A job's iteration is its slowest worker's compute (each worker's varies
//! from iteration to iteration) plus its all-reduce. Each node runs at most
//! one worker (whole-node training pods), so jobs share links only between
//! zones and, on a cluster with racks, between racks (each rack's uplink);
//! under one rack switch (or inside a zone without racks) the fabric is
//! taken as non-blocking. When a grey failure starts or clears
//! ([`crate::grey`]), every running job's links are the truth of that
//! moment again, and their shares of the links are worked out anew.
//!
//! Who places the jobs is anything that [`Places`]: the policies of
//! [`crate::policies`], or the label-driven schedulers of
//! [`crate::schedulers`].

use std::collections::{BTreeSet, VecDeque};

use rand::Rng;

use crate::cluster::Cluster;
use crate::contention::{Flow, max_min_fair};
use crate::information::{Timeline, View};
use crate::model::{Link, ring_allreduce_s};
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
    /// Mean compute per iteration and worker, seconds.
    pub compute_s: f64,
    /// How much a worker's compute varies between iterations: the standard
    /// deviation of its logarithm.
    pub compute_spread: f64,
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
            compute_spread: 0.1,
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
    /// Its slowest worker's compute per iteration, on average (s): what
    /// the all-reduce waits for before it starts.
    pub compute_s: f64,
}

/// Draws of an iteration used to work out a job's mean slowest compute.
const COMPUTE_DRAWS: usize = 200;

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
        let size = size.min(nodes).max(1);
        let iterations =
            rng.random_range(spec.iterations.0..=spec.iterations.1.max(spec.iterations.0));
        let slowest: Vec<f64> = (0..COMPUTE_DRAWS)
            .map(|_| {
                (0..size)
                    .map(|_| spec.compute_s * (spec.compute_spread * normal(rng)).exp())
                    .fold(0.0, f64::max)
            })
            .collect();
        jobs.push(Job {
            id,
            arrival_s: 0.0,
            size,
            iterations,
            compute_s: stats::mean(&slowest),
        });
    }
    // The best pace: every link at a healthy NIC's rate inside a zone.
    let best = |job: &Job| {
        let comm = ring_allreduce_s(job.size, spec.gradient_bytes, |_, _| Link {
            rtt_ms: 0.1,
            loss: 0.0,
            rate_bps: 100e9,
        });
        f64::from(job.iterations) * (job.compute_s + comm) * job.size as f64
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

/// A standard normal draw (Box-Muller).
fn normal(rng: &mut impl Rng) -> f64 {
    let u: f64 = rng.random_range(f64::EPSILON..1.0);
    let v: f64 = rng.random();
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
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
    /// Racks its workers span (zones, on a cluster without racks).
    pub racks: usize,
    /// Whether its traffic crossed, at some moment, a faulty component: a
    /// worker's degraded NIC, or a grey failure of a worker's NIC or of a
    /// rack uplink it crossed.
    pub on_fault: bool,
    /// Seconds per iteration, on average over its run.
    pub iteration_s: f64,
    /// Where its workers ran, in rank order.
    pub nodes: Vec<String>,
}

/// The figures of one run, of the policy (or scheduler) `P` placed it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Summary<P> {
    /// Who placed the jobs.
    pub policy: P,
    /// Mean job completion time (s).
    pub mean_jct_s: f64,
    /// Median job completion time (s).
    pub p50_jct_s: f64,
    /// 90th percentile of job completion time (s).
    pub p90_jct_s: f64,
    /// Mean wait from arrival to start (s).
    pub mean_wait_s: f64,
    /// Mean time per iteration (s).
    pub mean_iteration_s: f64,
    /// Share of jobs whose workers span more than one zone.
    pub multi_zone: f64,
    /// Share of jobs whose workers span more than one rack.
    pub multi_rack: f64,
    /// Share of jobs whose traffic crossed a faulty component (a degraded
    /// NIC, a grey failure) at some moment.
    pub on_fault: f64,
}

/// The figures of one policy's run.
pub type PolicySummary = Summary<Policy>;

impl<P> Summary<P> {
    /// Sums up `results`, placed by `policy`.
    pub fn of(policy: P, results: &[JobResult]) -> Self {
        let jct: Vec<f64> = results.iter().map(|r| r.jct_s).collect();
        let wait: Vec<f64> = results.iter().map(|r| r.wait_s).collect();
        let iteration: Vec<f64> = results.iter().map(|r| r.iteration_s).collect();
        let multi = results.iter().filter(|r| r.zones > 1).count();
        let share = |count: usize| count as f64 / results.len().max(1) as f64;
        Self {
            policy,
            mean_jct_s: stats::mean(&jct),
            p50_jct_s: stats::median(&jct),
            p90_jct_s: stats::quantile(&jct, 0.9),
            mean_wait_s: stats::mean(&wait),
            mean_iteration_s: stats::mean(&iteration),
            multi_zone: share(multi),
            multi_rack: share(results.iter().filter(|r| r.racks > 1).count()),
            on_fault: share(results.iter().filter(|r| r.on_fault).count()),
        }
    }
}

/// One hop of a running job's ring.
#[derive(Debug, Clone)]
struct Hop {
    /// Its ends (sender, receiver).
    ends: (usize, usize),
    link: Link,
    /// The shared links it crosses (racks' and zones').
    resources: Vec<usize>,
    /// What it carries now (bit/s).
    rate_bps: f64,
}

impl Hop {
    fn new(cluster: &Cluster, a: usize, b: usize, t_s: f64) -> Self {
        let link = cluster.link_at(a, b, t_s);
        Self {
            ends: (a, b),
            link,
            resources: cluster.path_resources(a, b),
            rate_bps: link.goodput_bps(),
        }
    }
}

/// A job while it runs.
#[derive(Debug)]
struct Running {
    result: usize,
    start_s: f64,
    nodes: Vec<usize>,
    hops: Vec<Hop>,
    compute_s: f64,
    iterations_left: f64,
    iteration_s: f64,
}

impl Running {
    fn iteration_s(&self, gradient_bytes: f64) -> f64 {
        let k = self.nodes.len();
        if k < 2 {
            return self.compute_s;
        }
        let chunk_bits = gradient_bytes * 8.0 / k as f64;
        let step = self
            .hops
            .iter()
            .map(|hop| hop.link.rtt_ms / 2e3 + chunk_bits / hop.rate_bps.max(1.0))
            .fold(0.0, f64::max);
        self.compute_s + 2.0 * (k - 1) as f64 * step
    }

    fn end_s(&self, now: f64) -> f64 {
        now + self.iterations_left * self.iteration_s
    }

    /// Whether any of its hops crosses a faulty component at `t_s`: a
    /// degraded NIC at either end, or a grey failure on its path.
    fn on_fault(&self, cluster: &Cluster, t_s: f64) -> bool {
        self.hops.iter().any(|hop| {
            let (a, b) = hop.ends;
            cluster.degraded(a)
                || cluster.degraded(b)
                || cluster.faults_on_path(a, b, t_s).next().is_some()
        })
    }
}

/// Shares the shared links at `t_s` among the hops that cross them, and
/// sets each running job's pace.
fn share_links(running: &mut [Running], cluster: &Cluster, t_s: f64, gradient_bytes: f64) {
    let mut flows = Vec::new();
    let mut owners = Vec::new();
    for (j, job) in running.iter_mut().enumerate() {
        for (h, hop) in job.hops.iter_mut().enumerate() {
            if hop.resources.is_empty() {
                hop.rate_bps = hop.link.goodput_bps();
            } else {
                flows.push(Flow {
                    resources: hop.resources.clone(),
                    cap_bps: hop.link.goodput_bps(),
                });
                owners.push((j, h));
            }
        }
    }
    let capacities = cluster.capacities_at(t_s);
    for ((j, h), rate) in owners.into_iter().zip(max_min_fair(&flows, &capacities)) {
        running[j].hops[h].rate_bps = rate;
    }
    for job in running.iter_mut() {
        job.iteration_s = job.iteration_s(gradient_bytes);
    }
}

/// Where a job's workers go: the policies under comparison.
pub trait Places {
    /// Places `size` workers on `free` nodes, knowing `view`; `None` when
    /// the job does not fit (it waits).
    fn place<R: Rng>(
        &self,
        view: &View,
        free: &[String],
        size: usize,
        rng: &mut R,
    ) -> Option<Vec<String>>;
}

impl Places for Policy {
    fn place<R: Rng>(
        &self,
        view: &View,
        free: &[String],
        size: usize,
        rng: &mut R,
    ) -> Option<Vec<String>> {
        Policy::place(*self, view, free, size, rng)
    }
}

/// What happens next in a run.
#[derive(Debug, Clone, Copy)]
enum Event {
    /// The running job of this index ends.
    End(usize),
    /// The next job of the trace arrives.
    Arrival,
    /// A grey failure starts or clears.
    FaultChange,
}

/// Runs `jobs` on `cluster`, placed by `policy` from what `timeline`
/// shows at each moment, and says what happened to each.
pub fn simulate(
    cluster: &Cluster,
    timeline: &Timeline,
    jobs: &[Job],
    spec: &WorkloadSpec,
    policy: &impl Places,
    rng: &mut impl Rng,
) -> Vec<JobResult> {
    let mut fault_changes = crate::grey::changes(cluster.grey()).into_iter().peekable();
    let mut free: BTreeSet<usize> = (0..cluster.names.len()).collect();
    let mut running: Vec<Running> = Vec::new();
    let mut queue: VecDeque<&Job> = VecDeque::new();
    let mut results: Vec<JobResult> = Vec::with_capacity(jobs.len());
    let mut arrivals = jobs.iter().peekable();
    let mut now = 0.0_f64;
    loop {
        // The next event: an arrival, an end or a grey failure's start or
        // end, whichever is first (ties: ends, then arrivals).
        let next_end = running
            .iter()
            .enumerate()
            .map(|(i, r)| (i, r.end_s(now)))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        let next_arrival = arrivals.peek().map(|j| j.arrival_s);
        let next_fault = fault_changes.peek().copied();
        if next_arrival.is_none() && next_end.is_none() {
            break;
        }
        let (mut at, mut event) = (f64::INFINITY, Event::FaultChange);
        if let Some(t) = next_fault {
            (at, event) = (t, Event::FaultChange);
        }
        if let Some(t) = next_arrival.filter(|&t| t <= at) {
            (at, event) = (t, Event::Arrival);
        }
        if let Some((i, t)) = next_end.filter(|&(_, t)| t <= at) {
            (at, event) = (t, Event::End(i));
        }
        // Every running job progresses at its pace until then.
        for job in &mut running {
            job.iterations_left -= (at - now) / job.iteration_s;
        }
        now = at;
        let mut changed = false;
        match event {
            Event::End(i) => {
                let done = running.swap_remove(i);
                let result = &mut results[done.result];
                result.run_s = now - done.start_s;
                result.jct_s = result.wait_s + result.run_s;
                let iterations = f64::from(jobs[result.id].iterations).max(1.0);
                result.iteration_s = result.run_s / iterations;
                free.extend(done.nodes);
                changed = true;
            }
            Event::Arrival => queue.push_back(arrivals.next().expect("peeked")),
            Event::FaultChange => {
                fault_changes.next();
                for job in &mut running {
                    for hop in &mut job.hops {
                        hop.link = cluster.link_at(hop.ends.0, hop.ends.1, now);
                    }
                    if job.on_fault(cluster, now) {
                        results[job.result].on_fault = true;
                    }
                }
                changed = true;
            }
        }
        while let Some(job) = queue.front() {
            if job.size > free.len() {
                break;
            }
            let names: Vec<String> = free.iter().map(|&i| cluster.names[i].clone()).collect();
            let view = timeline.at(now);
            let Some(placed) = policy.place(view, &names, job.size, rng) else {
                break;
            };
            let nodes: Vec<usize> = placed
                .iter()
                .map(|name| cluster.index_of(name).expect("a node of the cluster"))
                .collect();
            for node in &nodes {
                free.remove(node);
            }
            let hops = (0..nodes.len())
                .map(|i| Hop::new(cluster, nodes[i], nodes[(i + 1) % nodes.len()], now))
                .collect();
            let zones: BTreeSet<usize> = nodes.iter().map(|&n| cluster.zone_of(n)).collect();
            let racks: BTreeSet<usize> = nodes.iter().map(|&n| cluster.rack_of(n)).collect();
            let job_running = Running {
                result: results.len(),
                start_s: now,
                nodes,
                hops,
                compute_s: job.compute_s,
                iterations_left: f64::from(job.iterations),
                iteration_s: 0.0,
            };
            results.push(JobResult {
                id: job.id,
                size: job.size,
                wait_s: now - job.arrival_s,
                run_s: 0.0,
                jct_s: 0.0,
                zones: zones.len(),
                racks: racks.len(),
                on_fault: job_running.on_fault(cluster, now),
                iteration_s: 0.0,
                nodes: placed,
            });
            running.push(job_running);
            queue.pop_front();
            changed = true;
        }
        if changed {
            share_links(&mut running, cluster, now, spec.gradient_bytes);
        }
    }
    results.sort_by_key(|r| r.id);
    results
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterSpec;
    use crate::information::View;
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
            ..ClusterSpec::default()
        };
        let mut rng = StdRng::seed_from_u64(3);
        let cluster = Cluster::generate(&spec, &mut rng);
        let timeline = crate::fixtures::perfect_timeline(&cluster, &mut rng);
        let workload = WorkloadSpec {
            jobs: 40,
            sizes: vec![(2, 1.0), (4, 1.0), (8, 0.5)],
            iterations: (10, 100),
            ..WorkloadSpec::default()
        };
        let jobs = trace(&workload, 16, &mut rng);
        assert!(jobs.windows(2).all(|w| w[0].arrival_s <= w[1].arrival_s));
        // The slowest of more workers waits longer for its compute.
        let mean_compute = |size: usize| {
            stats::mean(
                &jobs
                    .iter()
                    .filter(|j| j.size == size)
                    .map(|j| j.compute_s)
                    .collect::<Vec<_>>(),
            )
        };
        assert!(mean_compute(2) > workload.compute_s && mean_compute(8) > mean_compute(2));
        for policy in Policy::ALL {
            let results = simulate(&cluster, &timeline, &jobs, &workload, &policy, &mut rng);
            assert_eq!(results.len(), jobs.len(), "{policy:?}");
            for (result, job) in results.iter().zip(&jobs) {
                assert!(result.wait_s >= 0.0 && result.run_s > 0.0);
                assert!((result.jct_s - result.wait_s - result.run_s).abs() < 1e-6);
                assert!(
                    result.iteration_s >= job.compute_s * (1.0 - 1e-9),
                    "{result:?}"
                );
                assert_eq!(result.size, job.size);
                // Its traffic crossed a degraded NIC exactly when one of
                // its workers has one.
                let degraded = result
                    .nodes
                    .iter()
                    .any(|n| cluster.degraded(cluster.index_of(n).unwrap()));
                assert_eq!(result.on_fault, degraded && result.size > 1, "{result:?}");
            }
        }
    }

    #[test]
    fn jobs_across_the_same_zones_share_their_uplinks() {
        // Two zones of two nodes: an uplink of 2 x 100 / 8 = 25 Gbit/s,
        // what one flow between zones may carry at most.
        let spec = ClusterSpec {
            zones: 2,
            nodes_per_zone: 2,
            degraded_nodes: 0.0,
            degraded_links: 0.0,
            max_peers: 0,
            ..ClusterSpec::default()
        };
        let cluster = Cluster::generate(&spec, &mut StdRng::seed_from_u64(1));
        let job = |nodes: [usize; 2]| {
            let hops = [(nodes[0], nodes[1]), (nodes[1], nodes[0])]
                .map(|(a, b)| Hop::new(&cluster, a, b, 0.0))
                .to_vec();
            Running {
                result: 0,
                start_s: 0.0,
                nodes: nodes.to_vec(),
                hops,
                compute_s: 0.1,
                iterations_left: 1.0,
                iteration_s: 0.0,
            }
        };
        let mut alone = vec![job([0, 2])];
        share_links(&mut alone, &cluster, 0.0, 100e6);
        let mut both = vec![job([0, 2]), job([1, 3])];
        share_links(&mut both, &cluster, 0.0, 100e6);
        assert_eq!(alone[0].hops[0].rate_bps, 25e9);
        assert_eq!(both[0].hops[0].rate_bps, 12.5e9);
        assert!(both[0].iteration_s > 1.5 * alone[0].iteration_s - 0.1);
    }

    /// Places every job on the given nodes, first come first served.
    struct Fixed(Vec<&'static str>);

    impl Places for Fixed {
        fn place<R: Rng>(
            &self,
            _: &View,
            free: &[String],
            size: usize,
            _: &mut R,
        ) -> Option<Vec<String>> {
            let nodes: Vec<String> = self.0.iter().take(size).map(|n| (*n).to_owned()).collect();
            nodes.iter().all(|n| free.contains(n)).then_some(nodes)
        }
    }

    #[test]
    fn a_grey_failure_slows_the_jobs_over_it_while_it_lasts_and_is_counted() {
        let mut rng = StdRng::seed_from_u64(1);
        let cluster = crate::fixtures::clean_cluster(1, 4, 2, &mut rng);
        let timeline = crate::fixtures::perfect_timeline(&cluster, &mut rng);
        let workload = WorkloadSpec {
            gradient_bytes: 1e9,
            compute_s: 0.01,
            ..WorkloadSpec::default()
        };
        let job = Job {
            id: 0,
            arrival_s: 0.0,
            size: 2,
            iterations: 1_000,
            compute_s: 0.01,
        };
        // Across the two racks: nodes 0 and 2.
        let across = Fixed(vec!["z00-n000", "z00-n002"]);
        let run = |cluster: &Cluster| {
            simulate(
                cluster,
                &timeline,
                std::slice::from_ref(&job),
                &workload,
                &across,
                &mut StdRng::seed_from_u64(2),
            )
            .remove(0)
        };
        let healthy = run(&cluster);
        assert!(!healthy.on_fault);
        assert_eq!(healthy.racks, 2);
        // Rack 0's uplink carries a quarter of its rate from 1 s to 3 s.
        let slowed = cluster.clone().with_grey(vec![crate::grey::GreyFault {
            component: crate::grey::Component::RackUplink(0),
            effect: crate::grey::Effect::Slow(0.25),
            start_s: 1.0,
            end_s: 3.0,
        }]);
        let faulty = run(&slowed);
        assert!(faulty.on_fault);
        assert!(
            faulty.run_s > healthy.run_s + 1.0,
            "{faulty:?} vs {healthy:?}"
        );
        // A failure long over before the job is none of its business.
        let earlier = cluster.with_grey(vec![crate::grey::GreyFault {
            component: crate::grey::Component::RackUplink(0),
            effect: crate::grey::Effect::Slow(0.25),
            start_s: -10.0,
            end_s: -5.0,
        }]);
        let unaffected = run(&earlier);
        assert!(!unaffected.on_fault);
        assert!((unaffected.run_s - healthy.run_s).abs() < 1e-6);
    }
}
