//! How often measurement noise alone sends a scheduler fed netaware's
//! topology onto the lab's lossy rack (`netaware-testbed evaluate racks`):
//! the same two zones of two racks of three hosts, every path out of rack
//! a4-a6 losing 5% each way, read as the lab's agents read it (each pair's
//! loss a binomial draw over its probes, RTTs with a loaded machine's
//! spread); then the topology published from that matrix, and Volcano
//! (hard mode) and Kueue TAS placing four workers from it with the lab's
//! seed.
//!
//! `cargo run --release -p netaware-eval --example racks_noise -- [draws] [spread_ms] [seed]`
//!
//! The lab's own runs (`evaluate racks`) take minutes each and see one
//! draw of the noise; this sees thousands, on the product's own topology
//! code, so that a placement that holds only when the noise is kind shows.

use netaware_core::matrix::{PairSummary, Throughput};
use netaware_core::score::ScoreConfig;
use netaware_core::scored::ScoredMatrix;
use netaware_core::transport::{Transport, TransportSet};
use netaware_eval::information::View;
use netaware_eval::labels::LabelSource;
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

fn usage(why: &str) -> ! {
    eprintln!("{why}\nusage: racks_noise [draws] [spread_ms] [seed]");
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
    if !(spread_ms.is_finite() && spread_ms > 0.0) || draws == 0 {
        usage("draws must be above 0 and spread_ms a number above 0");
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let free: Vec<String> = HOSTS.iter().map(|h| (*h).to_owned()).collect();
    let (none, none2) = (Default::default(), Default::default());
    let schedulers = [
        Scheduler::Netaware,
        Scheduler::Volcano {
            source: LabelSource::Netaware,
            mode: Mode::Hard,
        },
        Scheduler::KueueTas {
            source: LabelSource::Netaware,
            balanced: false,
        },
    ];
    let mut on_bad_rack = [0usize; 3];
    let mut degraded_marks = 0usize;
    let mut block_across = 0usize;
    for _ in 0..draws {
        let view = View::with_defaults(matrix(spread_ms, &mut rng));
        degraded_marks += ["a4", "a5", "a6"]
            .iter()
            .filter(|h| view.published.get(h).is_some_and(|p| p.excluded))
            .count();
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
        for (k, scheduler) in schedulers.into_iter().enumerate() {
            let labelled = Labelled {
                scheduler,
                correct: &none,
                stale: &none2,
            };
            let mut seeded = StdRng::seed_from_u64(1);
            let placed = labelled.place(&view, &free, 4, &mut seeded);
            if placed.is_none_or(|p| p.iter().any(|h| ["a4", "a5", "a6"].contains(&h.as_str()))) {
                on_bad_rack[k] += 1;
            }
        }
    }
    println!(
        "{draws} draws (seed {seed}), RTT spread {spread_ms} ms: usable nodes across the lossy uplink in one block {:.1}%, a4-a6 marked degraded {:.1}% of the time",
        100.0 * block_across as f64 / draws as f64,
        100.0 * degraded_marks as f64 / (3 * draws) as f64
    );
    for (k, scheduler) in schedulers.iter().enumerate() {
        println!(
            "{:40} on the lossy rack (or waits) in {:.1}% of draws",
            scheduler.name(),
            100.0 * on_bad_rack[k] as f64 / draws as f64
        );
    }
}
