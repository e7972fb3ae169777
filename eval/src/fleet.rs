//! Measured mode: a simulated fleet of netaware agents and its collector,
//! run by the product's own code on probes drawn from a [`Cluster`]'s
//! truth, so that placement sees only what it could have measured.
//!
//! - **Peer sets**: each agent probes the peers `netaware_core::peers::choose`
//!   gives it for the rotation step in which each window ran (the
//!   collector's `--max-peers` and `--peer-rotation`).
//! - **Windows**: one probe a second to each peer, 10 s windows, the last 6
//!   kept (the agent's and collector's defaults). A probe is lost with the
//!   path's loss each way (Bernoulli); a reply's RTT is the pair's truth
//!   plus exponential queueing jitter. The agent's own window code
//!   (`netaware_core::window`) turns the probes into peer windows, checked
//!   into the collector's pair matrix as the collector checks them.
//! - **Goodput**: the collector's test planner at the given budget (default
//!   0.02, inside zones only, as a large cluster runs it) runs from the
//!   fleet's start; a test ends 2.5 s after its start with the path's TCP
//!   goodput within +-10%. What was tested by the moment of a view, and is
//!   still fresh by the score model's rules, is all there is.
//! - **Coordinates**: the collector's own pass
//!   (`netaware_core::coordinate_pass`) every 10 s over the fresh medians
//!   of the matrix last served, as the collector passes over its published
//!   snapshot.
//! - **Scoring**: `ScoredMatrix::score`, as the collector builds snapshots,
//!   staleness included.
//!
//! Left out: pairs probed in rotation steps before the current window's
//! (the collector keeps them, stale, until they fall out), jobs' traffic
//! disturbing probes, and agents failing.

use std::collections::{BTreeSet, HashMap};

use netaware_core::coordinate_pass::{self, PassInput};
use netaware_core::coordinates::Coordinates;
use netaware_core::matrix::{PairMatrix, Throughput};
use netaware_core::peers::{PeerBound, choose};
use netaware_core::placement::{PlacementConfig, Placer};
use netaware_core::registry::Registry;
use netaware_core::score::ScoreConfig;
use netaware_core::scored::ScoredMatrix;
use netaware_core::throughput_plan::{PLAN_EVERY_MS, PlanConfig, PlanError, Planner};
use netaware_core::transport::Transport;
use netaware_core::window::{OpenWindow, Probe};
use netaware_core::{NodeInfo, NodeKind, UnixMillis};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::cluster::Cluster;
use crate::information::View;

/// How the simulated fleet measures: the product's defaults unless said.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct FleetConfig {
    /// Most peers each agent probes (`--max-peers`; 0: all).
    pub max_peers: usize,
    /// Length of a rotation step of the peer sets (`--peer-rotation`).
    pub rotation_ms: u64,
    /// Time between two probes to one peer (the agent's `--interval`).
    pub probe_interval_ms: u64,
    /// Length of a window (the agent's `--window`).
    pub window_ms: u64,
    /// Windows kept per pair (`--windows-kept`).
    pub windows_kept: usize,
    /// Share of each node's time in throughput tests
    /// (`--throughput-budget`).
    pub budget: f64,
    /// Warm-up of each test, left out (`--throughput-omit`).
    pub test_omit_ms: u32,
    /// Measured part of each test (`--throughput-duration`).
    pub test_duration_ms: u32,
    /// Tests only inside zones (`--throughput-same-zone-only`).
    pub same_zone_only: bool,
}

impl FleetConfig {
    /// The product's defaults with `max_peers` and tests inside zones.
    pub fn defaults(max_peers: usize) -> Self {
        Self {
            max_peers,
            rotation_ms: 300_000,
            probe_interval_ms: 1_000,
            window_ms: 10_000,
            windows_kept: 6,
            budget: 0.02,
            test_omit_ms: 500,
            test_duration_ms: 2_000,
            same_zone_only: true,
        }
    }
}

/// Mean of a probe's queueing jitter: a floor plus a share of the RTT.
const JITTER_FLOOR_MS: f64 = 0.008;
const JITTER_SHARE: f64 = 0.02;
/// The collector's coordinates take a pass over the medians this often.
const COORDINATE_PASS_MS: u64 = 10_000;
/// At most this many passes between two views (a view's medians are what
/// the passes read; more passes over the same medians change little).
const MAX_PASSES_PER_VIEW: u64 = 30;

/// The fleet: what it has measured so far, and the planner's memory.
#[derive(Debug)]
pub struct Fleet<'c> {
    cluster: &'c Cluster,
    config: FleetConfig,
    score: ScoreConfig,
    placement: PlacementConfig,
    planner: Planner,
    /// When the planner runs next (ms from the fleet's start).
    plan_times: BTreeSet<UnixMillis>,
    /// Finished or running tests: (end, client, server, goodput).
    tests: Vec<(UnixMillis, usize, usize, f64)>,
    coordinates: Coordinates,
    coordinates_at: UnixMillis,
    /// Passes made so far (each orders the medians its own way).
    passes: u64,
    /// The fresh medians of the matrix last served: what the collector's
    /// passes read until the next snapshot.
    last_served: Option<PassInput>,
    index: HashMap<String, usize>,
    rng: StdRng,
    /// When the trace of jobs starts (ms from the fleet's start): the
    /// cluster's grey failures are timed from there.
    trace_start_ms: UnixMillis,
}

impl<'c> Fleet<'c> {
    /// A fleet on `cluster` whose agents all start at time 0, its
    /// collector scoring by `score` and placing by `placement`.
    pub fn new(
        cluster: &'c Cluster,
        config: FleetConfig,
        score: ScoreConfig,
        placement: PlacementConfig,
        seed: u64,
    ) -> Result<Self, PlanError> {
        let plan = PlanConfig::for_tests(
            config.budget,
            config.test_omit_ms,
            config.test_duration_ms,
            config.same_zone_only,
            None,
        )?;
        let mut planner = Planner::new(plan)?;
        planner.set_nodes(cluster.candidates(), 0);
        Ok(Self {
            cluster,
            config,
            score,
            placement,
            planner,
            plan_times: BTreeSet::from([0]),
            tests: Vec::new(),
            coordinates: Coordinates::default(),
            coordinates_at: 0,
            passes: 0,
            last_served: None,
            index: cluster
                .names
                .iter()
                .enumerate()
                .map(|(i, name)| (name.clone(), i))
                .collect(),
            rng: StdRng::seed_from_u64(seed),
            trace_start_ms: 0,
        })
    }

    /// The same fleet, its cluster's grey failures timed from
    /// `trace_start_ms` of its own time on (the warm-up before the first
    /// job), so that it measures them when they hold.
    pub fn with_trace_start(mut self, trace_start_ms: UnixMillis) -> Self {
        self.trace_start_ms = trace_start_ms;
        self
    }

    /// A moment of the fleet's time as the cluster's grey failures time
    /// it (s from the trace's start).
    fn cluster_time(&self, at: UnixMillis) -> f64 {
        (at as f64 - self.trace_start_ms as f64) / 1e3
    }

    /// Runs the planner up to `now`. It only matters when a node's budget
    /// frees it, so it runs at those moments (on the collector's 250 ms
    /// tick) rather than at every tick.
    fn plan_until(&mut self, now: UnixMillis) {
        let spacing = self.planner.config().spacing_ms();
        let measured = u64::from(self.config.test_omit_ms + self.config.test_duration_ms);
        while let Some(&at) = self.plan_times.first() {
            if at > now {
                break;
            }
            self.plan_times.pop_first();
            for test in self.planner.plan(at) {
                let (client, server) = (self.index[&test.client], self.index[&test.server]);
                let truth = self
                    .cluster
                    .link_at(client, server, self.cluster_time(test.start))
                    .goodput_bps();
                let bps = truth * self.rng.random_range(0.9..1.1);
                self.tests
                    .push((test.start + measured, client, server, bps));
                let free = test.start + spacing;
                self.plan_times
                    .insert(free.div_ceil(PLAN_EVERY_MS) * PLAN_EVERY_MS);
            }
        }
    }

    /// What the collector would serve at `now` (ms from the fleet's
    /// start): its snapshot, scored.
    pub fn view_at(&mut self, now: UnixMillis) -> View {
        self.plan_until(now);
        let cluster = self.cluster;
        let candidates = cluster.candidates();

        let mut registry = Registry::new();
        for (name, zone) in &candidates {
            let info = NodeInfo {
                name: (*name).to_owned(),
                address: String::new(),
                zone: (*zone).to_owned(),
                region: String::new(),
                kind: NodeKind::Agent,
            };
            // Agents say hello and report as they go: all alive.
            let _ = registry.agent_hello(info, self.config.window_ms, now);
        }

        let mut matrix = PairMatrix::new(self.config.windows_kept);
        let probes = (self.config.window_ms / self.config.probe_interval_ms.max(1)).max(1);
        let mut order = 0_u64;
        for back in (0..self.config.windows_kept as u64).rev() {
            let Some(end) = now.checked_sub(back * self.config.window_ms) else {
                continue;
            };
            let Some(start) = end.checked_sub(self.config.window_ms) else {
                continue;
            };
            let bound = PeerBound {
                max: self.config.max_peers,
                epoch: start / self.config.rotation_ms.max(1),
            };
            let at_s = self.cluster_time(start + self.config.window_ms / 2);
            for (src, &(name, zone)) in candidates.iter().enumerate() {
                let mut window = OpenWindow::new();
                for dst in choose(name, zone, &candidates, bound) {
                    let truth = cluster.link_at(src, dst, at_s);
                    let back_link = cluster.link_at(dst, src, at_s);
                    let jitter_mean = JITTER_FLOOR_MS + JITTER_SHARE * truth.rtt_ms;
                    for _ in 0..probes {
                        order += 1;
                        let arrives = !self.rng.random_bool(truth.loss.clamp(0.0, 1.0))
                            && !self.rng.random_bool(back_link.loss.clamp(0.0, 1.0));
                        let rtt_ms =
                            arrives.then(|| truth.rtt_ms + exponential(jitter_mean, &mut self.rng));
                        window.record(
                            candidates[dst].0,
                            &netaware_core::network::Network::primary(),
                            Probe::measured(order, rtt_ms, Transport::Icmp),
                        );
                    }
                }
                for peer_window in window.finish() {
                    // Figures of a sane window always pass the check.
                    if let Ok((pair, _)) = peer_window.checked(end) {
                        matrix.record(name, &peer_window.peer, pair);
                    }
                }
            }
        }
        for &(end, client, server, bps) in &self.tests {
            if end <= now
                && let Ok(throughput) = Throughput::new(bps, end, None, None)
            {
                matrix.record_throughput(
                    &cluster.names[client],
                    &cluster.names[server],
                    throughput,
                );
            }
        }
        // The tests too old to count again can go.
        let max_age = self.score.throughput_max_age_ms;
        self.tests
            .retain(|&(end, ..)| end > now || now - end <= max_age);

        let readings = matrix.readings();
        let score = |coordinates: &Coordinates| {
            ScoredMatrix::score(&registry, &readings, &self.score, coordinates, now)
        };
        // The collector's passes since the last view read the snapshot it
        // published then (before the first view: the first snapshot).
        let read = match self.last_served.take() {
            Some(served) => served,
            None => PassInput::of(&score(&self.coordinates)),
        };
        let passes = now.saturating_sub(self.coordinates_at) / COORDINATE_PASS_MS;
        for _ in 0..passes.clamp(1, MAX_PASSES_PER_VIEW) {
            self.passes += 1;
            coordinate_pass::run(&mut self.coordinates, &read, self.passes);
        }
        self.coordinates_at = now;
        let served = score(&self.coordinates);
        self.last_served = Some(PassInput::of(&served));
        View::new(Placer::new(served, self.placement))
    }
}

fn exponential(mean: f64, rng: &mut impl Rng) -> f64 {
    let u: f64 = rng.random_range(f64::EPSILON..1.0);
    -mean * u.ln()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{ClusterSpec, score_config};

    fn cluster() -> Cluster {
        let spec = ClusterSpec {
            zones: 2,
            nodes_per_zone: 6,
            degraded_nodes: 0.3,
            degraded_links: 0.0,
            max_peers: 0,
            ..ClusterSpec::default()
        };
        Cluster::generate(&spec, &mut StdRng::seed_from_u64(5))
    }

    const HOUR_MS: u64 = 3_600_000;

    #[test]
    fn windows_hold_what_the_probes_saw_and_goodput_only_what_was_tested() {
        let cluster = cluster();
        // Seven peers: the zone's five and one node of the other zone each.
        let config = FleetConfig::defaults(7);
        let mut fleet = Fleet::new(
            &cluster,
            config,
            score_config(),
            PlacementConfig::default(),
            1,
        )
        .unwrap();
        let view = fleet.view_at(2 * HOUR_MS);
        let matrix = view.matrix();
        assert_eq!(matrix.nodes().len(), 12);
        assert!(matrix.nodes().iter().all(|n| !n.stale));
        let probed: Vec<_> = matrix
            .pairs()
            .iter()
            .filter(|p| p.summary.samples > 0)
            .collect();
        // Every node probes 7 peers; the other zone's one rotates every 5
        // minutes, so a minute of windows holds one or two of it.
        assert!(
            (12 * 7..=12 * 8).contains(&probed.len()),
            "{}",
            probed.len()
        );
        for pair in &probed {
            assert!(
                pair.summary.samples <= 60 && pair.summary.samples >= 10,
                "{pair:?}"
            );
            let truth = cluster.link(pair.src, pair.dst);
            let rtt = pair.summary.rtt_median_ms.unwrap();
            assert!(
                rtt > truth.rtt_ms && rtt < truth.rtt_ms * 1.2 + 0.05,
                "{rtt} vs {truth:?}"
            );
        }
        // Goodput: inside zones only, and at most an hour old.
        let tested: Vec<_> = matrix
            .pairs()
            .iter()
            .filter(|p| p.summary.throughput.is_some())
            .collect();
        assert!(!tested.is_empty());
        for pair in &tested {
            assert_eq!(cluster.zone_of(pair.src), cluster.zone_of(pair.dst));
            let at = pair.summary.throughput.unwrap().at;
            assert!(2 * HOUR_MS - at <= HOUR_MS, "{pair:?}");
        }
        // A node of 5 zone-mates tests one pair per 200 s: within the last
        // hour every pair of a zone this small was tested.
        assert_eq!(tested.len(), 2 * 6 * 5);

        // A tenth of the budget leaves pairs untested for an hour.
        let thin = FleetConfig {
            budget: 0.002,
            ..config
        };
        let mut fleet = Fleet::new(
            &cluster,
            thin,
            score_config(),
            PlacementConfig::default(),
            1,
        )
        .unwrap();
        let view = fleet.view_at(2 * HOUR_MS);
        let tested_thin = view
            .matrix()
            .pairs()
            .iter()
            .filter(|p| p.summary.throughput.is_some())
            .count();
        assert!(tested_thin < tested.len() / 2, "{tested_thin}");
    }

    #[test]
    fn loss_is_counted_probe_by_probe() {
        let cluster = cluster();
        let mut fleet = Fleet::new(
            &cluster,
            FleetConfig::defaults(0),
            score_config(),
            PlacementConfig::default(),
            2,
        )
        .unwrap();
        let view = fleet.view_at(HOUR_MS);
        let (mut lost, mut sent, mut expected) = (0.0, 0.0, 0.0);
        for pair in view.matrix().pairs() {
            let truth = cluster.link(pair.src, pair.dst);
            let back = cluster.link(pair.dst, pair.src);
            let samples = pair.summary.samples as f64;
            lost += pair.summary.loss_ratio.unwrap() * samples;
            sent += samples;
            expected += (1.0 - (1.0 - truth.loss) * (1.0 - back.loss)) * samples;
            if truth.loss == 0.0 && back.loss == 0.0 {
                assert_eq!(pair.summary.loss_ratio, Some(0.0));
            }
        }
        // Pooled over every pair: within 4 standard deviations.
        let p = expected / sent;
        assert!(p > 0.0, "the cluster has lossy nodes");
        let sd = (p * (1.0 - p) / sent).sqrt();
        assert!(
            ((lost / sent) - p).abs() < 4.0 * sd + 1.0 / sent,
            "{} vs {p}",
            lost / sent
        );
    }
}
