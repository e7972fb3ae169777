//! A planted fault of each kind is named as what it is and nothing else is;
//! noise alone names nothing; the tracker's hysteresis.

use proptest::prelude::*;

use super::tracker::{Change, Fault, FaultTracker, TrackerConfig};
use super::*;
use crate::network::Network;

/// splitmix64: the tests' own deterministic randomness.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// What is planted.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Plant {
    Nothing,
    NodeLoss(usize, f64),
    UplinkLoss(usize, f64),
    ZoneLinkLoss(usize, usize, f64),
    PairLoss(usize, usize, f64),
    NodeDelay(usize, f64),
    /// The node's NIC carries this share of its class's goodput.
    NodeGoodput(usize, f64),
    /// The block's uplink carries this share of its class's goodput.
    UplinkGoodput(usize, f64),
    /// The node sits in this zone, labelled as its own.
    Mislabelled(usize, usize),
}

/// Zones of `blocks` blocks of `per_block` nodes; every node probes every
/// zone-mate and `cross` nodes of each other zone, 60 probes each, with
/// 0.05% background loss and RTT noise; a third of the directed pairs
/// inside a zone hold a throughput test (10 Gbit/s in a block, 8 across
/// blocks, 5% noise).
struct Fabric {
    zones: usize,
    blocks: usize,
    per_block: usize,
    cross: usize,
}

const FABRIC: Fabric = Fabric {
    zones: 3,
    blocks: 3,
    per_block: 6,
    cross: 4,
};

impl Fabric {
    fn per_zone(&self) -> usize {
        self.blocks * self.per_block
    }

    fn zone_of(&self, node: usize) -> usize {
        node / self.per_zone()
    }

    fn block_of(&self, node: usize) -> usize {
        node / self.per_block
    }

    fn input(&self, plant: Plant, seed: u64) -> FaultInput {
        let mut draw = Draw(seed);
        let n = self.zones * self.per_zone();
        let nodes: Vec<FaultNode> = (0..n)
            .map(|i| FaultNode {
                name: format!("n{i:03}"),
                zone: self.zone_of(i),
                block: Some(self.block_of(i)),
            })
            .collect();
        let blocks = (0..self.zones * self.blocks)
            .map(|b| (b / self.blocks, (b % self.blocks) as u32 + 1))
            .collect();
        // Where a node really sits.
        let place = |node: usize| match plant {
            Plant::Mislabelled(m, zone) if m == node => (zone, usize::MAX),
            _ => (self.zone_of(node), self.block_of(node)),
        };
        let host_ms: Vec<f64> = (0..n).map(|_| 0.005 + 0.01 * draw.next()).collect();
        // Tests draw from their own sequence, so that planting a goodput
        // fault leaves every probe as it was.
        let mut tests = Draw(seed ^ 0x5EED_600D);
        let mut links = Vec::new();
        for src in 0..n {
            for dst in 0..n {
                if src == dst {
                    continue;
                }
                let (sz, dz) = (self.zone_of(src), self.zone_of(dst));
                let probes = sz == dz || (dst % self.per_zone()) < self.cross;
                if !probes {
                    continue;
                }
                let ((pz, pb), (qz, qb)) = (place(src), place(dst));
                let mut rtt = if pz != qz {
                    1.0 + 0.5 * (pz + qz) as f64
                } else if pb == qb {
                    0.02
                } else {
                    0.06
                };
                rtt += host_ms[src] + host_ms[dst] + 0.004 * draw.next();
                let mut loss: f64 = 0.0005;
                let mut add = |l: f64| loss = 1.0 - (1.0 - loss) * (1.0 - l);
                match plant {
                    Plant::NodeLoss(x, l) if src == x || dst == x => add(l),
                    Plant::UplinkLoss(b, l)
                        if (self.block_of(src) == b) != (self.block_of(dst) == b) =>
                    {
                        add(l)
                    }
                    Plant::ZoneLinkLoss(a, b, l) if (sz, dz) == (a, b) || (sz, dz) == (b, a) => {
                        add(l)
                    }
                    Plant::PairLoss(a, b, l) if (src, dst) == (a, b) || (src, dst) == (b, a) => {
                        add(l)
                    }
                    Plant::NodeDelay(x, d) if src == x || dst == x => rtt += d,
                    _ => {}
                }
                let sent = 60;
                let lost = (0..sent).filter(|_| draw.next() < loss).count() as u64;
                let tested = sz == dz && tests.next() < 1.0 / 3.0;
                let goodput = tested.then(|| {
                    let same_block = self.block_of(src) == self.block_of(dst);
                    let mut bps = if same_block { 10e9 } else { 8e9 };
                    bps *= 1.0 + 0.1 * (tests.next() - 0.5);
                    match plant {
                        Plant::NodeGoodput(x, share) if src == x || dst == x => bps *= share,
                        Plant::UplinkGoodput(b, share)
                            if (self.block_of(src) == b) != (self.block_of(dst) == b) =>
                        {
                            bps *= share
                        }
                        _ => {}
                    }
                    LinkGoodput {
                        bps,
                        age_ms: 60_000,
                    }
                });
                links.push(FaultLink {
                    src,
                    dst,
                    sent,
                    lost,
                    rtt_ms: (lost < sent).then_some(rtt),
                    goodput,
                });
            }
        }
        FaultInput {
            zones: (0..self.zones).map(|z| format!("zone-{z}")).collect(),
            blocks,
            nodes,
            links,
        }
    }
}

fn subjects(plant: Plant, seed: u64) -> Vec<(Subject, FaultMetric)> {
    let input = FABRIC.input(plant, seed);
    localise(&input, &FaultConfig::default())
        .into_iter()
        .map(|f| (f.subject, f.metric))
        .collect()
}

fn component(c: Component, metric: FaultMetric) -> Vec<(Subject, FaultMetric)> {
    vec![(Subject::Component(c), metric)]
}

#[test]
fn noise_alone_names_nothing() {
    for seed in 0..20 {
        assert_eq!(subjects(Plant::Nothing, seed), vec![], "seed {seed}");
    }
}

#[test]
fn a_bad_nic_is_its_node() {
    let found = subjects(Plant::NodeLoss(22, 0.03), 1);
    assert_eq!(found, component(Component::Node(22), FaultMetric::Loss));
}

#[test]
fn a_bad_uplink_is_its_block_not_its_nodes() {
    let found = subjects(Plant::UplinkLoss(4, 0.03), 2);
    assert_eq!(
        found,
        component(Component::BlockUplink(4), FaultMetric::Loss)
    );
}

#[test]
fn a_bad_zone_link_is_the_zone_link() {
    let found = subjects(Plant::ZoneLinkLoss(0, 2, 0.03), 3);
    assert_eq!(
        found,
        component(Component::ZoneLink(0, 2), FaultMetric::Loss)
    );
}

#[test]
fn one_bad_path_is_the_pair_not_its_ends() {
    let found = subjects(Plant::PairLoss(3, 9, 0.3), 4);
    assert_eq!(found, component(Component::Pair(3, 9), FaultMetric::Loss));
}

#[test]
fn a_slow_node_is_named_for_delay() {
    let input = FABRIC.input(Plant::NodeDelay(30, 0.3), 5);
    let found = localise(&input, &FaultConfig::default());
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].subject, Subject::Component(Component::Node(30)));
    assert_eq!(found[0].metric, FaultMetric::Delay);
    assert!((found[0].value - 0.3).abs() < 0.05, "{:?}", found[0]);
}

#[test]
fn a_slow_nic_is_named_for_goodput_with_what_it_leaves() {
    let input = FABRIC.input(Plant::NodeGoodput(25, 0.4), 8);
    let found = localise(&input, &FaultConfig::default());
    assert_eq!(found.len(), 1, "{found:?}");
    let fault = &found[0];
    assert_eq!(fault.subject, Subject::Component(Component::Node(25)));
    assert_eq!(fault.metric, FaultMetric::Goodput);
    // Its tests run in and across blocks: what it leaves is 0.4 of a
    // baseline between 8 and 10 Gbit/s.
    assert!((7.5e9..10.5e9).contains(&fault.baseline), "{fault:?}");
    assert!(
        (fault.value / fault.baseline - 0.4).abs() < 0.05,
        "{fault:?}"
    );
    assert!(fault.evidence.iter().all(|e| e.src == 25 || e.dst == 25));
    assert!(fault.evidence.iter().all(|e| e.value < 0.5 * e.baseline));
}

#[test]
fn a_slow_uplink_is_its_block_not_its_nodes() {
    let found = subjects(Plant::UplinkGoodput(5, 0.5), 9);
    assert_eq!(
        found,
        component(Component::BlockUplink(5), FaultMetric::Goodput)
    );
}

#[test]
fn tests_older_than_the_window_or_too_few_name_nothing() {
    let mut input = FABRIC.input(Plant::NodeGoodput(25, 0.3), 8);
    let config = FaultConfig::default();
    for link in &mut input.links {
        if let Some(goodput) = &mut link.goodput {
            goodput.age_ms = config.goodput_window_ms + 1;
        }
    }
    assert_eq!(localise(&input, &config), vec![]);
    // Two slow tests of the node, every other test of it gone.
    let mut input = FABRIC.input(Plant::NodeGoodput(25, 0.3), 8);
    let mut kept = 0;
    for link in &mut input.links {
        if link.src == 25 || link.dst == 25 {
            if link.goodput.is_some() && kept < 2 {
                kept += 1;
            } else {
                link.goodput = None;
            }
        }
    }
    assert_eq!(kept, 2);
    assert_eq!(localise(&input, &config), vec![]);
}

#[test]
fn goodput_a_little_low_is_not_a_fault() {
    // 10% below the class: under the least drop named.
    assert_eq!(subjects(Plant::NodeGoodput(12, 0.9), 10), vec![]);
}

#[test]
fn a_node_that_sits_in_another_zone_is_its_label_and_nothing_else() {
    let found = subjects(Plant::Mislabelled(7, 2), 6);
    assert_eq!(
        found,
        vec![(
            Subject::ZoneLabel {
                node: 7,
                measures_like: 2
            },
            FaultMetric::Rtt
        )]
    );
}

#[test]
fn evidence_names_the_worst_links_and_the_baseline() {
    let input = FABRIC.input(Plant::NodeLoss(22, 0.05), 7);
    let found = localise(&input, &FaultConfig::default());
    let fault = &found[0];
    assert!(!fault.evidence.is_empty() && fault.evidence.len() <= MAX_EVIDENCE);
    assert!(fault.evidence.iter().all(|e| e.src == 22 || e.dst == 22));
    assert!(fault.baseline < 0.005, "{fault:?}");
    assert!((0.03..0.07).contains(&fault.value), "{fault:?}");
    assert!(fault.confidence > 0.9, "{fault:?}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Any one planted fault of 2% loss or more, anywhere, is named as
    /// what it is, and nothing else is.
    #[test]
    fn any_planted_loss_fault_is_named_alone(
        kind in 0..4usize,
        at in 0..1_000usize,
        loss in 0.02..0.2f64,
        seed in 0..1_000u64,
    ) {
        let n = FABRIC.zones * FABRIC.per_zone();
        let (plant, expected) = match kind {
            0 => (Plant::NodeLoss(at % n, loss), Component::Node(at % n)),
            1 => {
                let b = at % (FABRIC.zones * FABRIC.blocks);
                (Plant::UplinkLoss(b, loss), Component::BlockUplink(b))
            }
            2 => {
                let a = at % FABRIC.zones;
                let b = (a + 1 + at / 7 % (FABRIC.zones - 1)) % FABRIC.zones;
                (Plant::ZoneLinkLoss(a, b, loss), Component::ZoneLink(a.min(b), a.max(b)))
            }
            _ => {
                // A pair inside a zone (both probe each other), lossy
                // enough to show on 120 probes.
                let a = at % n;
                let b = FABRIC.zone_of(a) * FABRIC.per_zone() + (a + 1 + at / 11) % FABRIC.per_zone();
                let b = if b == a { (a / FABRIC.per_zone()) * FABRIC.per_zone() + (a + 1) % FABRIC.per_zone() } else { b };
                (Plant::PairLoss(a, b, loss.max(0.15)), Component::Pair(a.min(b), a.max(b)))
            }
        };
        prop_assert_eq!(subjects(plant, seed), component(expected, FaultMetric::Loss));
    }

    /// Any one NIC (tested 6 times or more) or uplink that leaves 60% of
    /// its goodput or less is named as what it is, and nothing else is.
    #[test]
    fn any_planted_goodput_fault_is_named_alone(
        uplink in any::<bool>(),
        at in 0..1_000usize,
        share in 0.1..0.6f64,
        seed in 0..1_000u64,
    ) {
        let (plant, expected) = if uplink {
            let b = at % (FABRIC.zones * FABRIC.blocks);
            (Plant::UplinkGoodput(b, share), Component::BlockUplink(b))
        } else {
            let node = at % (FABRIC.zones * FABRIC.per_zone());
            // A NIC is tested on a third of its zone's pairs, 11 on
            // average; on 3 or 4 tests a 40% drop is short of the gain
            // (4 tests of 0.5 on the log scale, noise 0.1, add 50), as it
            // should be: so few tests are as likely busy links.
            let plant = Plant::NodeGoodput(node, share);
            let tests = FABRIC
                .input(plant, seed)
                .links
                .iter()
                .filter(|l| l.goodput.is_some() && (l.src == node || l.dst == node))
                .count();
            prop_assume!(tests >= 6, "{} tests", tests);
            (plant, Component::Node(node))
        };
        prop_assert_eq!(subjects(plant, seed), component(expected, FaultMetric::Goodput));
    }
}

fn fault(node: &str, now: u64) -> Fault {
    let input = FaultInput {
        zones: vec!["z".into()],
        blocks: vec![],
        nodes: vec![FaultNode {
            name: node.into(),
            zone: 0,
            block: None,
        }],
        links: vec![],
    };
    let finding = Finding {
        subject: Subject::Component(Component::Node(0)),
        metric: FaultMetric::Loss,
        value: 0.05,
        baseline: 0.0001,
        confidence: 0.99,
        evidence: vec![],
    };
    Fault::named(&input, &Network::primary(), &finding, now)
}

#[test]
fn a_fault_opens_after_two_looks_keeps_its_start_and_clears_after_three_misses() {
    let primary = Network::primary();
    let mut tracker = FaultTracker::new(TrackerConfig::default());
    assert_eq!(tracker.update(&primary, vec![fault("a", 1_000)]), vec![]);
    let opened = tracker.update(&primary, vec![fault("a", 2_000)]);
    assert!(matches!(&opened[..], [Change::Opened(f)] if f.since_unix_ms == 1_000));
    // A look that misses it, then finds it again: still open, same start.
    assert_eq!(tracker.update(&primary, vec![]), vec![]);
    assert_eq!(tracker.update(&primary, vec![fault("a", 4_000)]), vec![]);
    assert_eq!(tracker.open()[0].since_unix_ms, 1_000);
    // Another network's look leaves it alone.
    let rail = Network::parse("rail-0").unwrap();
    for _ in 0..5 {
        assert_eq!(tracker.update(&rail, vec![]), vec![]);
    }
    assert_eq!(tracker.open().len(), 1);
    assert_eq!(tracker.update(&primary, vec![]), vec![]);
    assert_eq!(tracker.update(&primary, vec![]), vec![]);
    let cleared = tracker.update(&primary, vec![]);
    assert!(matches!(&cleared[..], [Change::Cleared(f)] if f.nodes == ["a"]));
    assert!(tracker.open().is_empty());
    // One look alone never opens a fault.
    assert_eq!(tracker.update(&primary, vec![fault("b", 9_000)]), vec![]);
    assert_eq!(tracker.update(&primary, vec![]), vec![]);
    assert_eq!(tracker.update(&primary, vec![fault("b", 11_000)]), vec![]);
    assert!(tracker.open().is_empty());
}

#[test]
fn a_node_named_for_goodput_is_left_to_placement_s_own_terms() {
    use crate::fault_marks::FaultMark;
    let mut slow = fault("a", 1_000);
    slow.metric = FaultMetric::Goodput;
    let lossy = fault("b", 1_000);
    assert!(!slow.fails_its_node() && lossy.fails_its_node());
    let marks = super::tracker::placement_marks([&slow, &lossy]);
    assert!(
        matches!(&marks.marks[..], [FaultMark::Node { node, .. }] if node == "b"),
        "{marks:?}"
    );
}

#[test]
fn a_slow_uplink_over_most_of_its_class_is_still_named() {
    // With three blocks, two thirds of a zone's tests across blocks cross
    // one block's uplink; with this seed more than three quarters do, so
    // the class's best quarter is all over the slow uplink.
    let plant = Plant::UplinkGoodput(7, 0.1);
    let input = FABRIC.input(plant, 703);
    let (mut over, mut clean) = (0, 0);
    for link in input.links.iter().filter(|l| l.goodput.is_some()) {
        let (a, b) = (FABRIC.block_of(link.src), FABRIC.block_of(link.dst));
        if FABRIC.zone_of(link.src) == 2 && a != b {
            if (a == 7) != (b == 7) {
                over += 1;
            } else {
                clean += 1;
            }
        }
    }
    assert!(over > 3 * clean, "over {over}, clean {clean}");
    assert_eq!(
        subjects(plant, 703),
        component(Component::BlockUplink(7), FaultMetric::Goodput)
    );
}
