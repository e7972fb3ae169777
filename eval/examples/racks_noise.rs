//! How often measurement noise alone sends a scheduler fed netaware's
//! topology onto the lab's lossy rack (`netaware-testbed evaluate racks`):
//! the same two zones of two racks of three hosts, every path out of rack
//! a4-a6 losing 5% each way, read as the lab's agents read it (each pair's
//! loss a binomial draw over its probes, RTTs with a loaded machine's
//! spread); then the topology published from that matrix, and Volcano
//! (hard mode) and Kueue TAS placing four workers from it with the lab's
//! seed.
//!
//! `cargo run --release -p netaware-eval --example racks_noise -- [draws] [spread_ms] [seed] [rounds]`
//!
//! The lab's own runs (`evaluate racks`) take minutes each and see one
//! draw of the noise; this sees thousands, on the product's own topology
//! code, so that a placement that holds only when the noise is kind shows.
//!
//! With `rounds` above 1 each draw is that many rounds of the collector's
//! topology (`netaware_core::faults::round`, the code its task runs), each
//! reading a matrix of fresh noise, and the schedulers read what the last
//! round publishes: blocks and degraded marks confirmed over rounds, and
//! the nodes behind an uplink whose fault is open marked to keep off. The
//! collector's consecutive rounds share most of their windows, so its
//! noise is less independent from round to round than here: a false
//! finding may persist there more often than it does here.

use netaware_core::blocks::BlockConfig;
use netaware_core::faults::FaultConfig;
use netaware_core::faults::round::{self, RoundConfig};
use netaware_core::faults::tracker::{FaultTracker, TrackerConfig, placement_marks};
use netaware_core::matrix::{PairSummary, Throughput};
use netaware_core::measured_topology::BlockTracker;
use netaware_core::network::Network;
use netaware_core::placement::PlacementConfig;
use netaware_core::score::ScoreConfig;
use netaware_core::scored::ScoredMatrix;
use netaware_core::transport::{Transport, TransportSet};
use netaware_eval::information::View;
use netaware_eval::labels::{KeepOff, LabelSource, NodePlaces};
use netaware_eval::perfect::{agent_node, fresh_pair};
use netaware_eval::schedulers::{Labelled, Scheduler};
use netaware_eval::sim::Places;
use netaware_eval::volcano::Mode;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const HOSTS: [&str; 12] = [
    "a1", "a2", "a3", "a4", "a5", "a6", "b1", "b2", "b3", "b4", "b5", "b6",
];

fn zone(i: usize) -> usize {
    i / 6
}
fn rack(i: usize) -> usize {
    i / 3
}

/// A pair's reading: its probes lost out of `sent`, its RTT with spread.
fn reading(src: usize, dst: usize, spread_ms: f64, rng: &mut StdRng) -> PairSummary {
    let base_rtt = if zone(src) != zone(dst) {
        5.2
    } else if rack(src) != rack(dst) {
        1.2
    } else {
        0.2
    };
    let crosses_bad_uplink = (rack(src) == 1) != (rack(dst) == 1);
    let loss = if crosses_bad_uplink {
        1.0 - 0.95 * 0.95
    } else {
        0.0
    };
    // Most pairs hold six windows of 10 probes; some fewer (a pair whose
    // agent started late or whose windows were dropped).
    let sent: u64 = if rng.random_bool(0.8) {
        60
    } else {
        rng.random_range(20..60)
    };
    let lost = (0..sent).filter(|_| rng.random_bool(loss)).count() as u64;
    let rtt = base_rtt + rng.random_range(0.0..spread_ms);
    PairSummary {
        rtt_median_ms: Some(rtt),
        rtt_p99_ms: Some(rtt * 3.0),
        jitter_ms: Some(rng.random_range(0.0..spread_ms / 2.0)),
        loss_ratio: Some(lost as f64 / sent as f64),
        samples: sent,
        last_end: Some(0),
        throughput: Some(Throughput {
            bps: rng.random_range(0.6e9..2.4e9),
            at: 0,
            retransmits: None,
            tcp_rtt_ms: None,
        }),
        one_way_loss_ratio: None,
        probe: Some(Transport::Icmp),
        filtered: TransportSet::EMPTY,
    }
}

fn matrix(spread_ms: f64, rng: &mut StdRng) -> ScoredMatrix {
    let config = ScoreConfig::default();
    let mut pairs = Vec::new();
    for src in 0..HOSTS.len() {
        for dst in (0..HOSTS.len()).filter(|&d| d != src) {
            let summary = reading(src, dst, spread_ms, rng);
            pairs.push(fresh_pair(&config, src, dst, summary, 0));
        }
    }
    let nodes = HOSTS
        .iter()
        .enumerate()
        .map(|(i, name)| agent_node(name, ["zone-a", "zone-b"][zone(i)]))
        .collect();
    ScoredMatrix::from_parts(nodes, pairs, config.fallback())
}

/// What the schedulers read after `rounds` rounds of the collector's
/// topology, each over a matrix of fresh noise: the last matrix with the
/// topology the last round publishes, as a job that selects
/// `netaware.io/degraded=false` reads it; and the same topology as a job
/// that also selects `netaware.io/bad-uplink=false` reads it.
fn view_after(rounds: usize, spread_ms: f64, rng: &mut StdRng) -> (View, NodePlaces) {
    let (block_config, placement, fault_config) = (
        BlockConfig::default(),
        PlacementConfig::default(),
        FaultConfig::default(),
    );
    let config = RoundConfig {
        blocks: &block_config,
        placement: &placement,
        faults: &fault_config,
    };
    let network = Network::primary();
    let mut blocks = BlockTracker::new(&block_config);
    let mut faults = FaultTracker::new(TrackerConfig::default());
    let mut last = None;
    for round in 0..rounds {
        let matrix = matrix(spread_ms, rng);
        // A round every 30 s, as `--topology-interval` has it.
        let now = round as u64 * 30_000;
        let (topology, _) = round::look(&matrix, &network, &mut blocks, &mut faults, config, now);
        last = Some((matrix, topology));
    }
    let Some((matrix, mut topology)) = last else {
        usage("rounds must be above 0")
    };
    topology.mark_bad_uplinks(&placement_marks(&faults.open()));
    let view = View::with_defaults(matrix);
    (
        View {
            published: NodePlaces::published(&topology, KeepOff::Degraded),
            ..view
        },
        NodePlaces::published(&topology, KeepOff::DegradedAndBadUplink),
    )
}

fn usage(why: &str) -> ! {
    eprintln!("{why}\nusage: racks_noise [draws] [spread_ms] [seed] [rounds]");
    std::process::exit(2)
}

/// A positional argument, `default` when absent.
fn arg<T: std::str::FromStr>(given: Option<String>, name: &str, default: T) -> T {
    match given {
        None => default,
        Some(text) => text
            .parse()
            .unwrap_or_else(|_| usage(&format!("{name}: not a number: {text:?}"))),
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let draws: usize = arg(args.next(), "draws", 1000);
    let spread_ms: f64 = arg(args.next(), "spread_ms", 4.0);
    let seed: u64 = arg(args.next(), "seed", 1);
    let rounds: usize = arg(args.next(), "rounds", 1);
    if !(spread_ms.is_finite() && spread_ms > 0.0) || draws == 0 || rounds == 0 {
        usage("draws and rounds must be above 0 and spread_ms a number above 0");
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let free: Vec<String> = HOSTS.iter().map(|h| (*h).to_owned()).collect();
    let (none, none2) = (Default::default(), Default::default());
    let volcano = Scheduler::Volcano {
        source: LabelSource::Netaware,
        mode: Mode::Hard,
    };
    let tas = Scheduler::KueueTas {
        source: LabelSource::Netaware,
        balanced: false,
    };
    // Each scheduler, and the labels its jobs select false.
    let rows = [
        (Scheduler::Netaware, KeepOff::Degraded),
        (volcano, KeepOff::Degraded),
        (tas, KeepOff::Degraded),
        (volcano, KeepOff::DegradedAndBadUplink),
        (tas, KeepOff::DegradedAndBadUplink),
    ];
    // Per row: placed on the lossy rack, and waiting (no room it accepts).
    let mut on_bad_rack = [0usize; 5];
    let mut waits = [0usize; 5];
    let mut bad_rack_kept_out = [0usize; 2];
    let mut others_kept_out = [0usize; 2];
    let mut block_across = 0usize;
    for _ in 0..draws {
        let (mut view, with_uplinks) = view_after(rounds, spread_ms, &mut rng);
        for (k, published) in [&view.published, &with_uplinks].into_iter().enumerate() {
            let kept_out = |hosts: &[&str]| {
                hosts
                    .iter()
                    .filter(|h| published.get(h).is_some_and(|p| p.excluded))
                    .count()
            };
            bad_rack_kept_out[k] += kept_out(&HOSTS[3..6]);
            others_kept_out[k] += kept_out(&HOSTS[..3]) + kept_out(&HOSTS[6..]);
        }
        // The block of a node the schedulers may use.
        let block_of = |h: &str| {
            view.published
                .get(h)
                .filter(|p| !p.excluded)
                .and_then(|p| p.rack.clone())
        };
        let across = ["a1", "a2", "a3"].iter().any(|good| {
            ["a4", "a5", "a6"]
                .iter()
                .any(|bad| block_of(good).is_some() && block_of(good) == block_of(bad))
        });
        if across {
            block_across += 1;
        }
        let by_degraded = view.published.clone();
        for (k, (scheduler, keep_off)) in rows.into_iter().enumerate() {
            view.published = match keep_off {
                KeepOff::Degraded => by_degraded.clone(),
                KeepOff::DegradedAndBadUplink => with_uplinks.clone(),
            };
            let labelled = Labelled {
                scheduler,
                correct: &none,
                stale: &none2,
            };
            let mut seeded = StdRng::seed_from_u64(1);
            match labelled.place(&view, &free, 4, &mut seeded) {
                None => waits[k] += 1,
                Some(placed) if placed.iter().any(|h| HOSTS[3..6].contains(&h.as_str())) => {
                    on_bad_rack[k] += 1;
                }
                Some(_) => {}
            }
        }
    }
    let share = |count: usize, of: usize| 100.0 * count as f64 / of as f64;
    println!(
        "{draws} draws (seed {seed}), RTT spread {spread_ms} ms, {rounds} round(s) each: usable nodes across the lossy uplink in one block {:.1}%",
        share(block_across, draws)
    );
    for (k, selects) in ["degraded=false", "degraded=false, bad-uplink=false"]
        .iter()
        .enumerate()
    {
        println!(
            "  selecting {selects}: a4-a6 kept out {:.1}% of the time, the other nine {:.1}%",
            share(bad_rack_kept_out[k], 3 * draws),
            share(others_kept_out[k], 9 * draws)
        );
    }
    for (k, (scheduler, keep_off)) in rows.iter().enumerate() {
        let selects = match keep_off {
            KeepOff::Degraded => "",
            KeepOff::DegradedAndBadUplink => ", bad-uplink too",
        };
        println!(
            "{:50} on the lossy rack {:5.1}%, waits {:5.1}% of draws",
            format!("{}{selects}", scheduler.name()),
            share(on_bad_rack[k], draws),
            share(waits[k], draws)
        );
    }
}
