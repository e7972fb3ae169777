//! One look of the measured topology (`netaware_core::measured_topology::
//! observe`, what the collector's topology round does per network) on a
//! cluster of `zones` x `nodes_per_zone` nodes, each probing 64 peers, its
//! pairs scored from their truth: for counting its instructions under
//! callgrind, which gives the same count on a busy machine.
//!
//! `valgrind --tool=callgrind --callgrind-out-file=/dev/null --toggle-collect='*observe*' \
//!   target/release/examples/observe_cost [zones] [nodes_per_zone]`

use netaware_core::blocks::BlockConfig;
use netaware_core::measured_topology::observe;
use netaware_core::placement::PlacementConfig;
use netaware_eval::cluster::{Cluster, ClusterSpec, score_config};
use rand::SeedableRng;
use rand::rngs::StdRng;

fn main() {
    let mut args = std::env::args().skip(1);
    let mut number = |default: usize| {
        args.next()
            .map_or(Ok(default), |a| a.parse::<usize>())
            .unwrap_or_else(|err| {
                eprintln!("usage: observe_cost [zones] [nodes_per_zone]: {err}");
                std::process::exit(2)
            })
    };
    let (zones, nodes_per_zone) = (number(10), number(500));
    let spec = ClusterSpec {
        zones,
        nodes_per_zone,
        ..ClusterSpec::default()
    };
    let mut rng = StdRng::seed_from_u64(1);
    let cluster = Cluster::generate(&spec, &mut rng);
    let matrix = netaware_eval::perfect::matrix(&cluster, &score_config(), 64, &mut rng);
    let started = std::time::Instant::now();
    let observation = observe(
        &matrix,
        &BlockConfig::default(),
        &PlacementConfig::default(),
    );
    let blocks: usize = observation.zones.iter().map(|z| z.groups.len()).sum();
    println!(
        "{} nodes, {} pairs: {} zones, {blocks} blocks, one look {:.0} ms",
        cluster.names.len(),
        matrix.pairs().len(),
        observation.zones.len(),
        started.elapsed().as_secs_f64() * 1000.0
    );
}
