//! The fault localisation benchmark: a fabric of zones and racks, the
//! agents' bounded peer sets (`netaware_core::peers::choose`), probe noise
//! and loss drawn probe by probe, faults planted at random, and the
//! collector's own code (`netaware_core::faults`, the measured blocks of
//! `netaware_core::blocks`, the tracker's hysteresis) naming them look by
//! look; beside two simpler methods on the same links.
//!
//! The fabric: zones 1 to 3 ms apart, racks inside each zone (0.02 ms RTT
//! under one switch, 0.08 ms across the zone's spine), hosts adding 5 to
//! 20 us each, and each probe's RTT the path plus exponential jitter
//! (8 us mean). An agent sends one probe a second to each peer and reports
//! 10 s windows; the collector keeps the last six. Background loss is
//! 0.05% of probes everywhere.
//!
//! Throughput tests run inside zones (by label) at the collector's
//! rationing: each node takes part in one test every
//! `slot / budget` seconds on average (200 s at the default budget of
//! 0.02), drawn at random rather than in the planner's order, from an hour
//! before the faults start. A single flow reads 94 Gbit/s under a rack
//! switch and 90 Gbit/s across the spine, within 3%; one test in twenty
//! shares its link with other traffic and reads 40% to 90% of that.
//!
//! Planted in each run, at random places: bad NICs (loss on every link of
//! a node), a bad rack uplink (loss on every link leaving a rack), a bad
//! zone link, bad single paths, one slow NIC (delay on every link of a
//! node), one node whose zone label is wrong (it sits in another zone), a
//! NIC that carries a share of its rate (negotiated at a lower speed: 25%,
//! 50% or 70% left) and a rack uplink that carries a share of its tests'
//! (50% or 70%). Loss sizes are drawn from 1%, 2%, 5% and 10%; delays from
//! 0.2, 0.5 and 1 ms. Planted loss does not slow the throughput tests
//! here. The faults start after six clean windows; the methods look every
//! [`BenchSpec::look_every`] windows, as the collector does every
//! `--topology-interval`.
//!
//! What the product could not know is never given to it: the blocks are
//! clustered from measured medians (every pair of a zone, as the rotation
//! of peer sets measures them over its steps), the labels are the
//! labels, and the links are only those the peer sets probe.

use std::collections::{BTreeSet, HashMap};

use netaware_core::blocks::{BlockConfig, Distances, cluster, cut_height};
use netaware_core::faults::tracker::{Fault, FaultTracker, TrackerConfig};
use netaware_core::faults::{
    FaultConfig, FaultInput, FaultKind, FaultLink, FaultMetric, FaultNode, LinkGoodput, localise,
};
use netaware_core::network::Network;
use netaware_core::peers::{self, PeerBound};
use rand::Rng;
use rand::seq::SliceRandom;

/// RTT under one top-of-rack switch (ms).
pub const RACK_RTT_MS: f64 = 0.02;
/// RTT across a zone's spine (ms).
pub const SPINE_RTT_MS: f64 = 0.08;
/// Mean of one probe's jitter (ms).
pub const JITTER_MEAN_MS: f64 = 0.008;
/// Probes per window (one a second, 10 s windows).
pub const PROBES_PER_WINDOW: u64 = 10;
/// Windows the collector keeps.
pub const WINDOWS_KEPT: usize = 6;
/// Seconds per window.
pub const WINDOW_S: u64 = 10;
/// Share of probes lost anywhere.
pub const BACKGROUND_LOSS: f64 = 0.0005;
/// Loss sizes planted.
pub const LOSS_SIZES: [f64; 4] = [0.01, 0.02, 0.05, 0.1];
/// Delays planted (ms).
pub const DELAY_SIZES: [f64; 3] = [0.2, 0.5, 1.0];
/// Shares of its rate a slow NIC carries.
pub const NIC_GOODPUT_SHARES: [f64; 3] = [0.25, 0.5, 0.7];
/// Shares of their rate a slow rack uplink leaves its tests.
pub const UPLINK_GOODPUT_SHARES: [f64; 2] = [0.5, 0.7];
/// One flow's goodput under a rack switch (bit/s).
pub const RACK_GOODPUT_BPS: f64 = 94e9;
/// One flow's goodput across a zone's spine (bit/s).
pub const SPINE_GOODPUT_BPS: f64 = 90e9;
/// One flow's goodput between zones (bit/s): only a mislabelled node's
/// tests cross zones.
pub const ZONE_GOODPUT_BPS: f64 = 60e9;
/// Spread of a clean test around its path's goodput (uniform, either way).
pub const TEST_NOISE: f64 = 0.03;
/// Share of tests that share their link with other traffic.
pub const BUSY_TESTS: f64 = 0.05;
/// The collector's test slot at its defaults (0.5 s warm-up, 2 s measured,
/// 1.5 s margin), seconds.
pub const TEST_SLOT_S: f64 = 4.0;
/// How long before the faults start the tests begin (s): the collector
/// keeps a goodput for an hour.
pub const TESTS_BEFORE_S: u64 = 3_600;

/// The loss above which a link is lossy for the simpler methods: the
/// placement's default loss threshold.
pub const LOSSY_LINK: f64 = 0.02;

/// The shape of one run.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct BenchSpec {
    /// Zones.
    pub zones: usize,
    /// Nodes in each zone.
    pub nodes_per_zone: usize,
    /// Nodes under one rack switch.
    pub nodes_per_rack: usize,
    /// Most peers an agent probes.
    pub max_peers: usize,
    /// Bad NICs planted.
    pub bad_nics: usize,
    /// Bad single paths planted.
    pub bad_paths: usize,
    /// Windows the faults last before the final look.
    pub windows_after: usize,
    /// Windows between two looks: the collector looks every
    /// `--topology-interval` (30 s by default: three 10 s windows).
    pub look_every: usize,
    /// Share of each node's time in throughput tests (the collector's
    /// `--throughput-budget`).
    pub throughput_budget: f64,
}

impl Default for BenchSpec {
    fn default() -> Self {
        Self {
            zones: 8,
            nodes_per_zone: 250,
            nodes_per_rack: 25,
            max_peers: 64,
            bad_nics: 3,
            bad_paths: 2,
            windows_after: 90,
            look_every: 3,
            throughput_budget: 0.02,
        }
    }
}

/// What a planted fault is, as the product would name it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Expected {
    /// Its kind.
    pub kind: &'static str,
    /// Its metric.
    pub metric: &'static str,
    /// The names it is about (a rack by its nodes, a zone link by its
    /// zones, a label by the node and the zone it sits in).
    pub subject: Vec<String>,
}

/// One planted fault.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Planted {
    /// What the product should name.
    pub expected: Expected,
    /// Its size: a loss ratio, a delay (ms) or the share of goodput left;
    /// 0 for a label.
    pub size: f64,
}

#[derive(Debug, Clone, Copy)]
enum Truth {
    NodeLoss(usize, f64),
    RackLoss(usize, f64),
    ZoneLinkLoss(usize, usize, f64),
    PathLoss(usize, usize, f64),
    NodeDelay(usize, f64),
    NodeGoodput(usize, f64),
    RackGoodput(usize, f64),
}

struct World {
    spec: BenchSpec,
    names: Vec<String>,
    zone_names: Vec<String>,
    /// Where each node sits: (zone, rack).
    place: Vec<(usize, usize)>,
    /// Each node's zone label.
    label: Vec<usize>,
    host_ms: Vec<f64>,
    zone_rtt: Vec<Vec<f64>>,
    faults: Vec<Truth>,
    planted: Vec<Planted>,
}

impl World {
    fn draw(spec: BenchSpec, rng: &mut impl Rng) -> Self {
        let n = spec.zones * spec.nodes_per_zone;
        let racks_per_zone = spec.nodes_per_zone.div_ceil(spec.nodes_per_rack);
        let place: Vec<(usize, usize)> = (0..n)
            .map(|i| {
                let zone = i / spec.nodes_per_zone;
                (
                    zone,
                    zone * racks_per_zone + (i % spec.nodes_per_zone) / spec.nodes_per_rack,
                )
            })
            .collect();
        let names = (0..n)
            .map(|i| {
                format!(
                    "z{}-r{:02}-n{:03}",
                    place[i].0,
                    place[i].1 % racks_per_zone,
                    i % spec.nodes_per_zone
                )
            })
            .collect();
        // Each zone pair's RTT, drawn once for both directions.
        let mut drawn: Vec<f64> = (0..spec.zones * spec.zones)
            .map(|_| rng.random_range(1.0..3.0))
            .collect();
        for a in 0..spec.zones {
            for b in 0..a {
                drawn[a * spec.zones + b] = drawn[b * spec.zones + a];
            }
        }
        let zone_rtt: Vec<Vec<f64>> = drawn.chunks(spec.zones).map(<[f64]>::to_vec).collect();
        let mut world = Self {
            spec,
            names,
            zone_names: (0..spec.zones).map(|z| format!("zone-{z}")).collect(),
            label: place.iter().map(|p| p.0).collect(),
            place,
            host_ms: (0..n).map(|_| rng.random_range(0.005..0.020)).collect(),
            zone_rtt,
            faults: Vec::new(),
            planted: Vec::new(),
        };
        world.plant(rng);
        world
    }

    fn rack_nodes(&self, rack: usize) -> Vec<String> {
        (0..self.names.len())
            .filter(|&i| self.place[i].1 == rack)
            .map(|i| self.names[i].clone())
            .collect()
    }

    fn plant(&mut self, rng: &mut impl Rng) {
        let n = self.names.len();
        let mut nodes: Vec<usize> = (0..n).collect();
        nodes.shuffle(rng);
        let mut next = nodes.into_iter();
        let loss = |rng: &mut dyn rand::RngCore| LOSS_SIZES[rng.random_range(0..LOSS_SIZES.len())];
        let expected = |kind: &'static str, metric: &'static str, subject: Vec<String>| Expected {
            kind,
            metric,
            subject,
        };
        for _ in 0..self.spec.bad_nics {
            let node = next.next().expect("enough nodes");
            let size = loss(rng);
            self.faults.push(Truth::NodeLoss(node, size));
            self.planted.push(Planted {
                expected: expected("node", "loss", vec![self.names[node].clone()]),
                size,
            });
        }
        let racks = self.place.iter().map(|p| p.1).max().unwrap_or(0) + 1;
        let rack = rng.random_range(0..racks);
        let size = loss(rng);
        self.faults.push(Truth::RackLoss(rack, size));
        self.planted.push(Planted {
            expected: expected("block_uplink", "loss", self.rack_nodes(rack)),
            size,
        });
        let a = rng.random_range(0..self.spec.zones);
        let b = (a + rng.random_range(1..self.spec.zones)) % self.spec.zones;
        let size = loss(rng);
        self.faults.push(Truth::ZoneLinkLoss(a, b, size));
        let mut zones = vec![self.zone_names[a].clone(), self.zone_names[b].clone()];
        zones.sort();
        self.planted.push(Planted {
            expected: expected("zone_link", "loss", zones),
            size,
        });
        // Paths are chosen among the probed ones when the peer sets are
        // known (see `run`); here their ends.
        for _ in 0..self.spec.bad_paths {
            let node = next.next().expect("enough nodes");
            self.faults.push(Truth::PathLoss(node, usize::MAX, 0.1));
        }
        let node = next.next().expect("enough nodes");
        let size = DELAY_SIZES[rng.random_range(0..DELAY_SIZES.len())];
        self.faults.push(Truth::NodeDelay(node, size));
        self.planted.push(Planted {
            expected: expected("node", "delay", vec![self.names[node].clone()]),
            size,
        });
        let node = next.next().expect("enough nodes");
        let share = NIC_GOODPUT_SHARES[rng.random_range(0..NIC_GOODPUT_SHARES.len())];
        self.faults.push(Truth::NodeGoodput(node, share));
        self.planted.push(Planted {
            expected: expected("node", "goodput", vec![self.names[node].clone()]),
            size: share,
        });
        let slow_rack = (rack + rng.random_range(1..racks)) % racks;
        let share = UPLINK_GOODPUT_SHARES[rng.random_range(0..UPLINK_GOODPUT_SHARES.len())];
        self.faults.push(Truth::RackGoodput(slow_rack, share));
        self.planted.push(Planted {
            expected: expected("block_uplink", "goodput", self.rack_nodes(slow_rack)),
            size: share,
        });
        // The mislabelled node sits in another zone's rack.
        let node = next.next().expect("enough nodes");
        let label = self.place[node].0;
        let zone = (label + rng.random_range(1..self.spec.zones)) % self.spec.zones;
        let racks_per_zone = self.spec.nodes_per_zone.div_ceil(self.spec.nodes_per_rack);
        self.place[node] = (zone, zone * racks_per_zone);
        self.planted.push(Planted {
            expected: expected(
                "zone_label",
                "rtt",
                vec![self.names[node].clone(), self.zone_names[zone].clone()],
            ),
            size: 0.0,
        });
    }

    /// The true RTT (ms) between two nodes, slow NICs included when
    /// `faulty`.
    fn rtt_ms(&self, a: usize, b: usize, faulty: bool) -> f64 {
        let ((za, ra), (zb, rb)) = (self.place[a], self.place[b]);
        let path = if za != zb {
            self.zone_rtt[za][zb] + SPINE_RTT_MS
        } else if ra == rb {
            RACK_RTT_MS
        } else {
            SPINE_RTT_MS
        };
        let mut rtt = path + self.host_ms[a] + self.host_ms[b];
        if faulty {
            for fault in &self.faults {
                if let Truth::NodeDelay(x, d) = *fault
                    && (a == x || b == x)
                {
                    rtt += d;
                }
            }
        }
        rtt
    }

    /// A probe's loss (both ways) between two nodes.
    fn loss(&self, a: usize, b: usize, faulty: bool) -> f64 {
        let mut kept = 1.0 - BACKGROUND_LOSS;
        if !faulty {
            return 1.0 - kept;
        }
        let ((za, ra), (zb, rb)) = (self.place[a], self.place[b]);
        for fault in &self.faults {
            let hit = match *fault {
                Truth::NodeLoss(x, l) => (a == x || b == x).then_some(l),
                Truth::RackLoss(r, l) => ((ra == r) != (rb == r)).then_some(l),
                Truth::ZoneLinkLoss(x, y, l) => {
                    ((za, zb) == (x, y) || (za, zb) == (y, x)).then_some(l)
                }
                Truth::PathLoss(x, y, l) => ((a, b) == (x, y) || (a, b) == (y, x)).then_some(l),
                Truth::NodeDelay(..) | Truth::NodeGoodput(..) | Truth::RackGoodput(..) => None,
            };
            if let Some(l) = hit {
                kept *= 1.0 - l;
            }
        }
        1.0 - kept
    }
}

impl World {
    /// One throughput test's goodput (bit/s) from `a` to `b`, slow NICs
    /// and uplinks included when `faulty`.
    fn test_goodput(&self, a: usize, b: usize, faulty: bool, rng: &mut impl Rng) -> f64 {
        let ((za, ra), (zb, rb)) = (self.place[a], self.place[b]);
        let mut bps = if za != zb {
            ZONE_GOODPUT_BPS
        } else if ra == rb {
            RACK_GOODPUT_BPS
        } else {
            SPINE_GOODPUT_BPS
        };
        bps *= 1.0 + rng.random_range(-TEST_NOISE..TEST_NOISE);
        if rng.random::<f64>() < BUSY_TESTS {
            bps *= rng.random_range(0.4..0.9);
        }
        if faulty {
            for fault in &self.faults {
                match *fault {
                    Truth::NodeGoodput(x, share) if a == x || b == x => bps *= share,
                    Truth::RackGoodput(r, share) if (ra == r) != (rb == r) => bps *= share,
                    _ => {}
                }
            }
        }
        bps
    }
}

/// The throughput tests of a run: who tested whom last, when (s) and at
/// what goodput.
struct Tests {
    /// Tests started in the whole fabric per second.
    per_s: f64,
    /// Each zone's nodes, by label.
    zones: Vec<Vec<usize>>,
    /// (client, server) -> (when it ended, s, goodput bit/s).
    last: HashMap<(usize, usize), (i64, f64)>,
    /// Tests owed from earlier steps (a fraction).
    owed: f64,
}

impl Tests {
    fn new(world: &World) -> Self {
        let n = world.names.len();
        let spacing_s = TEST_SLOT_S / world.spec.throughput_budget.clamp(1e-6, 1.0);
        let mut zones = vec![Vec::new(); world.spec.zones];
        for (i, &zone) in world.label.iter().enumerate() {
            zones[zone].push(i);
        }
        Self {
            // Each node is in one test every `spacing_s`, as either end.
            per_s: n as f64 / spacing_s / 2.0,
            zones,
            last: HashMap::new(),
            owed: 0.0,
        }
    }

    /// Runs the tests of `seconds` ending at `now` (s).
    fn run(&mut self, world: &World, now: i64, seconds: u64, faulty: bool, rng: &mut impl Rng) {
        self.owed += self.per_s * seconds as f64;
        let n = world.names.len();
        while self.owed >= 1.0 {
            self.owed -= 1.0;
            let client = rng.random_range(0..n);
            let mates = &self.zones[world.label[client]];
            if mates.len() < 2 {
                continue;
            }
            let server = loop {
                let s = mates[rng.random_range(0..mates.len())];
                if s != client {
                    break s;
                }
            };
            let at = now - rng.random_range(0..seconds.max(1)) as i64;
            let bps = world.test_goodput(client, server, faulty, rng);
            self.last.insert((client, server), (at, bps));
        }
    }

    /// The fresh test of `(client, server)` as a link sees it at `now`.
    fn goodput(&self, client: usize, server: usize, now: i64) -> Option<LinkGoodput> {
        self.last
            .get(&(client, server))
            .map(|&(at, bps)| (now - at, bps))
            .filter(|&(age, _)| age <= TESTS_BEFORE_S as i64)
            .map(|(age, bps)| LinkGoodput {
                bps,
                age_ms: age.max(0) as u64 * 1_000,
            })
    }
}

fn exponential(mean: f64, rng: &mut impl Rng) -> f64 {
    let u: f64 = rng.random_range(f64::EPSILON..1.0);
    -mean * u.ln()
}

/// One window of one link: probes lost, and the median of the replies.
fn window(
    world: &World,
    a: usize,
    b: usize,
    faulty: bool,
    rng: &mut impl Rng,
) -> (u64, Option<f64>) {
    let loss = world.loss(a, b, faulty);
    let truth = world.rtt_ms(a, b, faulty);
    let mut replies: Vec<f64> = Vec::with_capacity(PROBES_PER_WINDOW as usize);
    for _ in 0..PROBES_PER_WINDOW {
        if rng.random::<f64>() >= loss {
            replies.push(truth + exponential(JITTER_MEAN_MS, rng));
        }
    }
    let lost = PROBES_PER_WINDOW - replies.len() as u64;
    replies.sort_by(f64::total_cmp);
    (lost, replies.get(replies.len() / 2).copied())
}

/// The measured blocks of each zone (by label): the product's clustering
/// over a measured median of every pair of the zone.
fn measured_blocks(world: &World, rng: &mut impl Rng) -> (Vec<(usize, u32)>, Vec<Option<usize>>) {
    let mut blocks = Vec::new();
    let mut block_of = vec![None; world.names.len()];
    let config = BlockConfig::default();
    for zone in 0..world.spec.zones {
        let members: Vec<usize> = (0..world.names.len())
            .filter(|&i| world.label[i] == zone)
            .collect();
        let distances = Distances::new(members.len(), |i, j| {
            window(world, members[i], members[j], false, rng)
                .1
                .unwrap_or(0.0)
        });
        let cut = cut_height(&distances, &config);
        for (number, group) in cluster(&distances, cut).into_iter().enumerate() {
            blocks.push((zone, number as u32 + 1));
            for i in group {
                block_of[members[i]] = Some(blocks.len() - 1);
            }
        }
    }
    (blocks, block_of)
}

/// What one method named at the final look, and when the product first
/// named each planted fault.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RunOutcome {
    /// The faults planted.
    pub planted: Vec<Planted>,
    /// What netaware named (open faults at the final look).
    pub named: Vec<Expected>,
    /// Seconds from the faults' start to the look that first reported each
    /// planted fault, `None` if never.
    pub named_after_s: Vec<Option<u64>>,
    /// Every node on a lossy link (the voting method).
    pub voting: Vec<Expected>,
    /// Nodes whose median link is lossy (the per-node threshold).
    pub per_node: Vec<Expected>,
    /// Seconds the product's localisation took per look, the largest.
    pub slowest_look_s: f64,
}

fn expected_of(fault: &Fault) -> Expected {
    let kind = fault.kind.as_str();
    let subject = match fault.kind {
        FaultKind::ZoneLink => {
            let mut zones = fault.zones.clone();
            zones.sort();
            zones
        }
        FaultKind::ZoneLabel => {
            let mut subject = fault.nodes.clone();
            subject.extend(fault.measures_like.clone());
            subject
        }
        FaultKind::Pair | FaultKind::BlockUplink | FaultKind::Node => {
            let mut nodes = fault.nodes.clone();
            nodes.sort();
            nodes
        }
    };
    Expected {
        kind,
        metric: fault.metric.as_str(),
        subject,
    }
}

/// One run: a drawn fabric with faults, looked at window by window.
pub fn run(spec: BenchSpec, rng: &mut impl Rng) -> RunOutcome {
    let mut world = World::draw(spec, rng);
    let n = world.names.len();
    let labels: Vec<String> = world
        .label
        .iter()
        .map(|&z| world.zone_names[z].clone())
        .collect();
    let candidates: Vec<peers::Candidate<'_>> = (0..n)
        .map(|i| (world.names[i].as_str(), labels[i].as_str()))
        .collect();
    let bound = PeerBound {
        max: spec.max_peers,
        epoch: 0,
    };
    let mut links: Vec<(usize, usize)> = Vec::new();
    for (i, &(name, zone)) in candidates.iter().enumerate() {
        for peer in peers::choose(name, zone, &candidates, bound) {
            links.push((i, peer));
        }
    }
    drop(candidates);
    // The bad paths: a probed link of each chosen node, inside its zone.
    let mut paths = Vec::new();
    for fault in world.faults.iter_mut() {
        if let Truth::PathLoss(a, b, l) = fault {
            let own: Vec<usize> = links
                .iter()
                .filter(|&&(s, d)| s == *a && labels[d] == labels[s])
                .map(|&(_, d)| d)
                .collect();
            *b = own[rng.random_range(0..own.len())];
            let mut subject = vec![world.names[*a].clone(), world.names[*b].clone()];
            subject.sort();
            paths.push(Planted {
                expected: Expected {
                    kind: "pair",
                    metric: "loss",
                    subject,
                },
                size: *l,
            });
        }
    }
    world.planted.extend(paths);
    let (blocks, block_of) = measured_blocks(&world, rng);
    let nodes: Vec<FaultNode> = (0..n)
        .map(|i| FaultNode {
            name: world.names[i].clone(),
            zone: world.label[i],
            block: block_of[i],
        })
        .collect();
    // Each link's last windows: (lost, median), newest last.
    let mut history: Vec<Vec<(u64, Option<f64>)>> = vec![Vec::new(); links.len()];
    let mut tracker = FaultTracker::new(TrackerConfig::default());
    let network = Network::primary();
    let config = FaultConfig::default();
    let mut named_after_s = vec![None; world.planted.len()];
    let mut named = Vec::new();
    let mut slowest_look_s: f64 = 0.0;
    let mut last_input = FaultInput::default();
    // An hour of tests before the probes' first window.
    let mut tests = Tests::new(&world);
    let window_s = WINDOW_S as i64;
    let mut t = (WINDOWS_KEPT as u64 * WINDOW_S) as i64 - TESTS_BEFORE_S as i64;
    while t < 0 {
        t += window_s;
        tests.run(&world, t, WINDOW_S, false, rng);
    }
    let probed: HashMap<(usize, usize), usize> = links
        .iter()
        .enumerate()
        .map(|(k, &pair)| (pair, k))
        .collect();
    for step in 0..WINDOWS_KEPT + spec.windows_after {
        let faulty = step >= WINDOWS_KEPT;
        let now = (step as i64 + 1) * window_s;
        for (k, &(a, b)) in links.iter().enumerate() {
            history[k].push(window(&world, a, b, faulty, rng));
            if history[k].len() > WINDOWS_KEPT {
                history[k].remove(0);
            }
        }
        tests.run(&world, now, WINDOW_S, faulty, rng);
        if (step + 1) % spec.look_every.max(1) != 0 {
            continue;
        }
        let mut fault_links: Vec<FaultLink> = links
            .iter()
            .zip(&history)
            .map(|(&(src, dst), windows)| {
                let lost = windows.iter().map(|w| w.0).sum();
                let mut medians: Vec<f64> = windows.iter().filter_map(|w| w.1).collect();
                FaultLink {
                    src,
                    dst,
                    sent: PROBES_PER_WINDOW * windows.len() as u64,
                    lost,
                    rtt_ms: netaware_core::stats::lower_median(&mut medians),
                    goodput: tests.goodput(src, dst, now),
                }
            })
            .collect();
        // Tested pairs that do not probe each other, in a stable order.
        let mut tested_only: Vec<(usize, usize)> = tests
            .last
            .keys()
            .filter(|pair| !probed.contains_key(pair))
            .copied()
            .collect();
        tested_only.sort_unstable();
        fault_links.extend(tested_only.into_iter().filter_map(|(src, dst)| {
            Some(FaultLink {
                src,
                dst,
                sent: 0,
                lost: 0,
                rtt_ms: None,
                goodput: Some(tests.goodput(src, dst, now)?),
            })
        }));
        let input = FaultInput {
            zones: world.zone_names.clone(),
            blocks: blocks.clone(),
            nodes: nodes.clone(),
            links: fault_links,
        };
        let started = std::time::Instant::now();
        let findings = localise(&input, &config);
        slowest_look_s = slowest_look_s.max(started.elapsed().as_secs_f64());
        let faults = findings
            .iter()
            .map(|f| Fault::named(&input, &network, f, step as u64 * WINDOW_S * 1_000))
            .collect();
        tracker.update(&network, faults);
        named = tracker.open().iter().map(expected_of).collect();
        if faulty {
            let after = (step + 1 - WINDOWS_KEPT) as u64 * WINDOW_S;
            for (p, planted) in world.planted.iter().enumerate() {
                if named_after_s[p].is_none() && named.contains(&planted.expected) {
                    named_after_s[p] = Some(after);
                }
            }
        }
        last_input = input;
    }
    let (voting, per_node) = simpler_methods(&last_input);
    RunOutcome {
        planted: world.planted,
        named,
        named_after_s,
        voting,
        per_node,
        slowest_look_s,
    }
}

/// The two simpler methods on the same links: every node on a lossy link
/// is suspect (voting, as 007's per-flow votes without its path
/// inference); a node whose lower-median link is lossy (per-node
/// thresholds, as the degraded mark does inside a zone).
fn simpler_methods(input: &FaultInput) -> (Vec<Expected>, Vec<Expected>) {
    let mut on_lossy = BTreeSet::new();
    let mut per_node: Vec<Vec<f64>> = vec![Vec::new(); input.nodes.len()];
    // Pairs only throughput-tested carry no probes: not links to them.
    for link in input.links.iter().filter(|l| l.sent > 0) {
        let loss = link.lost as f64 / link.sent as f64;
        if loss > LOSSY_LINK {
            on_lossy.insert(link.src);
            on_lossy.insert(link.dst);
        }
        per_node[link.src].push(loss);
        per_node[link.dst].push(loss);
    }
    let node = |i: usize| Expected {
        kind: FaultKind::Node.as_str(),
        metric: FaultMetric::Loss.as_str(),
        subject: vec![input.nodes[i].name.clone()],
    };
    let voting = on_lossy.into_iter().map(node).collect();
    let per_node = per_node
        .iter_mut()
        .enumerate()
        .filter_map(|(i, losses)| {
            netaware_core::stats::lower_median(losses)
                .is_some_and(|m| m > LOSSY_LINK)
                .then(|| node(i))
        })
        .collect();
    (voting, per_node)
}

/// Precision and recall of one method over runs.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Scores {
    /// Named faults that are planted ones, over all named, per run.
    pub precision: Vec<f64>,
    /// Planted faults named, per kind (`node/loss`, ...), per run: (named,
    /// planted).
    pub recall: Vec<(String, usize, usize)>,
    /// Planted faults of 2% loss or more named, over those planted, per run.
    pub recall_2pct: Vec<f64>,
    /// Planted faults whose nodes some named fault touches, and of those
    /// the ones named as exactly what they are (localisation accuracy).
    pub touched: usize,
    /// See `touched`.
    pub localised: usize,
}

fn planted_nodes(p: &Planted) -> Vec<String> {
    match p.expected.kind {
        "zone_link" => Vec::new(),
        "zone_label" => p.expected.subject[..1].to_vec(),
        _ => p.expected.subject.clone(),
    }
}

/// Scores `named` against the runs' planted faults (`pick` chooses what a
/// run named by the method).
pub fn score(outcomes: &[RunOutcome], pick: impl Fn(&RunOutcome) -> &[Expected]) -> Scores {
    let mut scores = Scores {
        precision: Vec::new(),
        recall: Vec::new(),
        recall_2pct: Vec::new(),
        touched: 0,
        localised: 0,
    };
    for outcome in outcomes {
        let named = pick(outcome);
        let planted: Vec<&Expected> = outcome.planted.iter().map(|p| &p.expected).collect();
        let correct = named.iter().filter(|e| planted.contains(e)).count();
        scores.precision.push(if named.is_empty() {
            1.0
        } else {
            correct as f64 / named.len() as f64
        });
        let big: Vec<&Planted> = outcome
            .planted
            .iter()
            .filter(|p| p.expected.metric != "loss" || p.size >= 0.02)
            .collect();
        let big_named = big.iter().filter(|p| named.contains(&p.expected)).count();
        scores
            .recall_2pct
            .push(big_named as f64 / big.len().max(1) as f64);
        for p in &outcome.planted {
            let key = format!("{}/{}", p.expected.kind, p.expected.metric);
            let hit = named.contains(&p.expected);
            match scores.recall.iter_mut().find(|(k, _, _)| *k == key) {
                Some(entry) => {
                    entry.1 += usize::from(hit);
                    entry.2 += 1;
                }
                None => scores.recall.push((key, usize::from(hit), 1)),
            }
            let nodes = planted_nodes(p);
            let touched = hit
                || named.iter().any(|e| {
                    e.subject.iter().any(|s| nodes.contains(s))
                        || (p.expected.kind == "zone_link" && e.subject == p.expected.subject)
                });
            scores.touched += usize::from(touched);
            scores.localised += usize::from(hit);
        }
    }
    scores.recall.sort();
    scores
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// A small fabric: 4 zones of 60 nodes in racks of 12.
    fn small() -> BenchSpec {
        BenchSpec {
            zones: 4,
            nodes_per_zone: 60,
            nodes_per_rack: 12,
            max_peers: 32,
            bad_nics: 2,
            bad_paths: 1,
            windows_after: 60,
            look_every: 3,
            throughput_budget: 0.1,
        }
    }

    #[test]
    fn the_planted_faults_are_named_better_than_by_the_simpler_methods() {
        let outcomes: Vec<RunOutcome> = (1..=3)
            .map(|seed| run(small(), &mut rand::rngs::StdRng::seed_from_u64(seed)))
            .collect();
        let ours = score(&outcomes, |o| &o.named);
        let voting = score(&outcomes, |o| &o.voting);
        let per_node = score(&outcomes, |o| &o.per_node);
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        assert!(mean(&ours.precision) >= 0.9, "{ours:?}\n{outcomes:#?}");
        assert!(mean(&ours.recall_2pct) >= 0.8, "{ours:?}\n{outcomes:#?}");
        assert!(
            mean(&ours.precision) > mean(&voting.precision),
            "{voting:?}"
        );
        assert!(
            mean(&ours.recall_2pct) > mean(&per_node.recall_2pct),
            "{per_node:?}"
        );
        for key in ["node/goodput", "block_uplink/goodput"] {
            let (_, named, planted) = ours
                .recall
                .iter()
                .find(|(k, _, _)| k == key)
                .expect("a goodput fault of each kind planted");
            assert!(*named + 1 >= *planted && *planted == 3, "{key}: {ours:?}");
        }
    }
}
