//! Which throughput tests run when: the collector's test planner, pure and
//! deterministic (time passed in, no randomness, ties broken by name).
//!
//! A test fills the link it measures, so tests are rationed:
//!
//! - a node takes part in at most one test at a time, as client or server;
//! - a node spends at most [`PlanConfig::budget`] of its time in tests: a
//!   test occupies at most one slot, and a node's tests start at least
//!   `slot / budget` apart, so no stretch of time of that length holds more
//!   than one slot of testing;
//! - directed pairs never tried come first (so a node that joins is tested
//!   soon), then the pairs whose last try is oldest;
//! - a pair that must wait for its nodes reserves them: a pair behind it in
//!   that order may not take them if that would delay it, so no pair starves;
//!   where the tests at once are limited, it reserves a slot the same way.
//!
//! The planner only says who tests whom when; the collector's shell adds
//! the tokens and sends the orders.

use std::collections::BTreeMap;

use crate::UnixMillis;

/// How tests are rationed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanConfig {
    /// Share of its time a node may spend in tests, in (0, 1].
    pub budget: f64,
    /// Longest time a test may occupy its two nodes: warm-up, measured
    /// part and a margin for connecting and reporting.
    pub slot_ms: u64,
    /// How long before its start a test is ordered, so that the server
    /// holds the token before the client connects.
    pub lead_ms: u64,
    /// Only pairs of nodes in the same zone (large clusters: placement
    /// needs the links inside a zone most).
    pub same_zone_only: bool,
    /// Most tests running at once in the whole cluster (they may share a
    /// spine, or in the lab an emulator); `None` for no limit.
    pub max_concurrent: Option<usize>,
}

/// Why a plan configuration is unusable.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    /// The budget is not in (0, 1].
    #[error("the throughput budget must be above 0 and at most 1, not {0}")]
    Budget(f64),
    /// The slot is empty.
    #[error("a test slot must be longer than 0 ms")]
    Slot,
}

/// Time a test slot allows beyond warm-up and measured part: connecting,
/// the client's tail, the result.
pub const SLOT_MARGIN_MS: u64 = 1_500;
/// How long before a test's start its orders go out.
pub const ORDER_LEAD_MS: u64 = 1_000;
/// Time between two of the collector's calls to [`Planner::plan`].
pub const PLAN_EVERY_MS: u64 = 250;

impl PlanConfig {
    /// The rationing of tests of `omit_ms` warm-up and `duration_ms`
    /// measured, each in a slot with [`SLOT_MARGIN_MS`] to spare, ordered
    /// [`ORDER_LEAD_MS`] ahead: the collector's, and the simulator's.
    pub fn for_tests(
        budget: f64,
        omit_ms: u32,
        duration_ms: u32,
        same_zone_only: bool,
        max_concurrent: Option<usize>,
    ) -> Result<Self, PlanError> {
        Self {
            budget,
            slot_ms: u64::from(omit_ms) + u64::from(duration_ms) + SLOT_MARGIN_MS,
            lead_ms: ORDER_LEAD_MS,
            same_zone_only,
            max_concurrent,
        }
        .validated()
    }

    /// The configuration, if it is usable.
    pub fn validated(self) -> Result<Self, PlanError> {
        if !(self.budget > 0.0 && self.budget <= 1.0) {
            return Err(PlanError::Budget(self.budget));
        }
        if self.slot_ms == 0 {
            return Err(PlanError::Slot);
        }
        Ok(self)
    }

    /// Least time between the starts of two tests of one node.
    pub fn spacing_ms(&self) -> u64 {
        (self.slot_ms as f64 / self.budget).ceil() as u64
    }
}

/// One test to run: `client` sends to `server` from `start` to at most
/// `end`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedTest {
    /// Unique per planner, increasing.
    pub id: u64,
    /// The sending node.
    pub client: String,
    /// The receiving node.
    pub server: String,
    /// When the client starts.
    pub start: UnixMillis,
    /// When the slot ends: the server refuses the test after this.
    pub end: UnixMillis,
}

#[derive(Debug, Clone)]
struct NodeState {
    zone: String,
    present: bool,
    /// When the node may start its next test: the end of its budget
    /// spacing (kept while the node is away, so leaving and coming back
    /// does not reset its budget).
    available_at: UnixMillis,
    /// Whether the node has been in any test: the pairs of a node with no
    /// goodput at all go first.
    tested: bool,
}

#[derive(Debug, Clone, Copy)]
struct PairState {
    first_seen: UnixMillis,
    last_try: Option<UnixMillis>,
}

/// The planner's memory: nodes, pairs and when each was last tried.
#[derive(Debug, Clone)]
pub struct Planner {
    config: PlanConfig,
    nodes: BTreeMap<String, NodeState>,
    pairs: BTreeMap<(String, String), PairState>,
    /// Ends of the slots of the tests ordered so far that may still run.
    running: Vec<UnixMillis>,
    next_id: u64,
}

impl Planner {
    /// A planner with no nodes.
    pub fn new(config: PlanConfig) -> Result<Self, PlanError> {
        Ok(Self {
            config: config.validated()?,
            nodes: BTreeMap::new(),
            pairs: BTreeMap::new(),
            running: Vec::new(),
            next_id: 1,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &PlanConfig {
        &self.config
    }

    /// Sets the nodes that can be tested now (name, zone): fresh agents
    /// with a throughput server. Nodes not listed are left out of plans
    /// until they are listed again.
    pub fn set_nodes<'a>(
        &mut self,
        nodes: impl IntoIterator<Item = (&'a str, &'a str)>,
        now: UnixMillis,
    ) {
        for node in self.nodes.values_mut() {
            node.present = false;
        }
        for (name, zone) in nodes {
            let node = self
                .nodes
                .entry(name.to_owned())
                .or_insert_with(|| NodeState {
                    zone: String::new(),
                    present: true,
                    available_at: now,
                    tested: false,
                });
            node.present = true;
            zone.clone_into(&mut node.zone);
        }
        let present: Vec<&String> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.present)
            .map(|(name, _)| name)
            .collect();
        for &client in &present {
            for &server in &present {
                if client != server {
                    self.pairs
                        .entry((client.clone(), server.clone()))
                        .or_insert(PairState {
                            first_seen: now,
                            last_try: None,
                        });
                }
            }
        }
    }

    /// The tests to order now. Each starts `lead_ms` from now.
    pub fn plan(&mut self, now: UnixMillis) -> Vec<PlannedTest> {
        let spacing = self.config.spacing_ms();
        let start = now + self.config.lead_ms;
        // When each present node can start its next test, counting the
        // tests chosen in this pass.
        let mut free_at: BTreeMap<&str, UnixMillis> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.present)
            .map(|(name, n)| (name.as_str(), n.available_at))
            .collect();
        // When a pair ahead in the queue, still waiting, needs the node: a
        // pair behind it may take the node only if it is free again by then.
        let mut held_for: BTreeMap<&str, UnixMillis> = BTreeMap::new();
        let mut queue: Vec<(&(String, String), PairState)> = self
            .pairs
            .iter()
            .filter(|((c, s), _)| self.eligible(c, s))
            .map(|(pair, state)| (pair, *state))
            .collect();
        let both_tested = |(c, s): &(String, String)| self.nodes[c].tested && self.nodes[s].tested;
        // Among untried pairs, those whose nodes have the most untried
        // pairs left go first: nodes left without an untried partner would
        // otherwise retest pairs while others wait.
        let mut untried: BTreeMap<&str, usize> = BTreeMap::new();
        for ((c, s), state) in &queue {
            if state.last_try.is_none() {
                *untried.entry(c).or_default() += 1;
                *untried.entry(s).or_default() += 1;
            }
        }
        let left = |(c, s): &(String, String)| {
            untried.get(c.as_str()).copied().unwrap_or(0)
                + untried.get(s.as_str()).copied().unwrap_or(0)
        };
        queue.sort_by_cached_key(|(pair, state)| {
            (
                state.last_try.is_some(),
                both_tested(pair),
                state.last_try,
                std::cmp::Reverse(left(pair)),
                state.first_seen,
                *pair,
            )
        });
        // Tests ordered now start at `start`: those over by then leave room.
        self.running.retain(|&end| end > start);
        let room = self
            .config
            .max_concurrent
            .map_or(usize::MAX, |most| most.saturating_sub(self.running.len()));
        let mut chosen = Vec::new();
        // Nodes free now, kept as tests are chosen: counting them for every
        // pair in the queue made a plan over 2,000 nodes take seconds.
        let mut free_now = free_at.values().filter(|&&t| t <= now).count();
        // Slots kept for waiting pairs ahead that will be ready before a
        // test ordered now would end: a pair behind may not take them, as
        // it may not take their nodes.
        let mut slots_held = 0;
        for ((client, server), _) in queue {
            let ends = [client.as_str(), server.as_str()];
            if chosen.len() + slots_held >= room || free_now < 2 {
                break;
            }
            let held = |node: &str| held_for.get(node).copied().unwrap_or(UnixMillis::MAX);
            let ready = free_at[ends[0]].max(free_at[ends[1]]);
            let blocked_until = ends
                .iter()
                .filter(|node| start + spacing > held(node))
                .map(|node| held(node) + spacing)
                .max();
            match blocked_until {
                None if ready <= now => {
                    for node in ends {
                        // Both were free now (`ready <= now`); no longer.
                        free_at.insert(node, start + spacing);
                        free_now -= 1;
                    }
                    chosen.push((client.clone(), server.clone()));
                }
                _ => {
                    let ready = ready.max(blocked_until.unwrap_or(0));
                    if ready < now + self.config.slot_ms {
                        slots_held += 1;
                    }
                    for node in ends {
                        let hold = held_for.entry(node).or_insert(ready);
                        *hold = (*hold).min(ready);
                    }
                }
            }
        }
        let mut tests = Vec::with_capacity(chosen.len());
        for (client, server) in chosen {
            for node in [&client, &server] {
                let node = self.nodes.get_mut(node).expect("present node");
                node.available_at = start + spacing;
                node.tested = true;
            }
            self.pairs
                .get_mut(&(client.clone(), server.clone()))
                .expect("queued pair")
                .last_try = Some(start);
            self.running.push(start + self.config.slot_ms);
            tests.push(PlannedTest {
                id: self.next_id,
                client,
                server,
                start,
                end: start + self.config.slot_ms,
            });
            self.next_id += 1;
        }
        tests
    }

    fn eligible(&self, client: &str, server: &str) -> bool {
        match (self.nodes.get(client), self.nodes.get(server)) {
            (Some(c), Some(s)) => {
                c.present && s.present && (!self.config.same_zone_only || c.zone == s.zone)
            }
            _ => false,
        }
    }

    /// Present pairs never tried yet.
    pub fn untried_pairs(&self) -> usize {
        self.pairs
            .iter()
            .filter(|((c, s), state)| self.eligible(c, s) && state.last_try.is_none())
            .count()
    }

    /// How long one round over every pair takes at best, given the budget:
    /// each node takes part in `2 (n - 1)` tests spaced by the budget.
    pub fn cycle_ms(&self) -> u64 {
        let present = self.nodes.values().filter(|n| n.present).count() as u64;
        2 * present.saturating_sub(1) * self.config.spacing_ms()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn config(budget: f64) -> PlanConfig {
        PlanConfig {
            budget,
            slot_ms: 3_000,
            lead_ms: 500,
            same_zone_only: false,
            max_concurrent: None,
        }
    }

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("n{i}")).collect()
    }

    /// Runs the planner with ticks every `tick` ms until `until`, node `i`
    /// joining at `i * join_gap`; returns every test, in order.
    fn simulate(
        planner: &mut Planner,
        nodes: &[String],
        join_gap: u64,
        tick: u64,
        until: UnixMillis,
    ) -> Vec<PlannedTest> {
        let mut all = Vec::new();
        let mut now = 0;
        while now < until {
            let joined = nodes
                .iter()
                .enumerate()
                .filter(|(i, _)| *i as u64 * join_gap <= now);
            planner.set_nodes(joined.map(|(_, n)| (n.as_str(), "z")), now);
            all.extend(planner.plan(now));
            now += tick;
        }
        all
    }

    /// The longest any pair waited between two tries (or from when both
    /// its nodes joined, node `i` at `i * join_gap`, to its first), and how
    /// many pairs were tried.
    fn longest_wait(tests: &[PlannedTest], join_gap: u64) -> (u64, usize) {
        let joined = |node: &str| node[1..].parse::<u64>().unwrap() * join_gap;
        let mut last: HashMap<(&str, &str), UnixMillis> = HashMap::new();
        let mut longest = 0;
        for test in tests {
            let first_seen = joined(&test.client).max(joined(&test.server));
            let before = last
                .insert((&test.client, &test.server), test.start)
                .unwrap_or(first_seen);
            longest = longest.max(test.start - before);
        }
        (longest, last.len())
    }

    #[test]
    fn one_test_at_a_time_keeps_the_slot_for_a_waiting_pair() {
        // Nodes joining 14 s apart, one test at a time, spacing a little
        // over a slot: a pair behind the one whose nodes are resting would
        // take the only slot for 3 s and push it back, again and again,
        // until a pair waited more than a slot per pair.
        let mut planner = Planner::new(PlanConfig {
            max_concurrent: Some(1),
            ..config(0.8783516922325406)
        })
        .unwrap();
        let nodes = names(6);
        let pairs = 30;
        let (spacing, tick, join_gap) = (planner.config().spacing_ms(), 101, 14_322);
        let tests = simulate(&mut planner, &nodes, join_gap, tick, 450_000);
        let (longest, tried) = longest_wait(&tests, join_gap);
        assert_eq!(tried, pairs);
        assert!(
            longest <= pairs as u64 * (spacing + tick + 500),
            "waited {longest} ms"
        );
    }

    #[test]
    fn refuses_unusable_budgets() {
        for budget in [0.0, -0.1, 1.5, f64::NAN] {
            assert!(matches!(
                Planner::new(config(budget)),
                Err(PlanError::Budget(_))
            ));
        }
        let no_slot = PlanConfig {
            slot_ms: 0,
            ..config(0.5)
        };
        assert_eq!(Planner::new(no_slot).unwrap_err(), PlanError::Slot);
        assert!(Planner::new(config(1.0)).is_ok());
    }

    #[test]
    fn new_nodes_go_first_and_disjoint_pairs_run_together() {
        let mut planner = Planner::new(config(1.0)).unwrap();
        let four = names(4);
        planner.set_nodes(four.iter().map(|n| (n.as_str(), "z")), 0);
        let first = planner.plan(0);
        // Four idle nodes: two tests at once, by name.
        assert_eq!(first.len(), 2);
        assert_eq!(
            (first[0].client.as_str(), first[0].server.as_str()),
            ("n0", "n1")
        );
        assert_eq!(
            (first[1].client.as_str(), first[1].server.as_str()),
            ("n2", "n3")
        );
        assert_eq!(first[0].start, 500);
        // A node that joins later is tested at the next free moment,
        // before pairs of the old nodes that were not tried yet.
        let five = names(5);
        planner.set_nodes(five.iter().map(|n| (n.as_str(), "z")), 1_000);
        let spacing = planner.config().spacing_ms();
        let next = planner.plan(500 + spacing);
        assert!(
            next.iter().any(|t| t.client == "n4" || t.server == "n4"),
            "{next:?}"
        );
    }

    #[test]
    fn never_more_tests_at_once_than_allowed() {
        let mut planner = Planner::new(PlanConfig {
            max_concurrent: Some(2),
            ..config(1.0)
        })
        .unwrap();
        let nodes = names(8);
        let tests = simulate(&mut planner, &nodes, 0, 250, 200_000);
        assert!(tests.len() > 50);
        for test in &tests {
            let running = tests
                .iter()
                .filter(|t| t.start <= test.start && test.start < t.end)
                .count();
            assert!(running <= 2, "{running} tests at {}", test.start);
        }
        // Eight free nodes, yet two tests at a time.
        assert_eq!(tests.iter().filter(|t| t.start == 500).count(), 2);
    }

    #[test]
    fn same_zone_only_skips_pairs_across_zones() {
        let mut planner = Planner::new(PlanConfig {
            same_zone_only: true,
            ..config(1.0)
        })
        .unwrap();
        planner.set_nodes([("a1", "a"), ("a2", "a"), ("b1", "b")], 0);
        let tests = planner.plan(0);
        assert_eq!(tests.len(), 1);
        assert_eq!(
            (tests[0].client.as_str(), tests[0].server.as_str()),
            ("a1", "a2")
        );
        assert_eq!(planner.untried_pairs(), 1);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// No node in two tests at once; starts spaced by the budget, so
        /// no stretch of `spacing` ms holds more than `budget` of testing;
        /// every pair tried, and none waits longer than one slot per pair
        /// between two tries. (The planner is work-conserving: while an
        /// untried pair waits for a busy node, free nodes may retest a pair,
        /// so tries are not spread evenly; the bound is what holds.)
        #[test]
        fn rationed_complete_and_fair(
            nodes in 2usize..7,
            budget in 0.05f64..=1.0,
            tick in 100u64..2_000,
            join_gap in 0u64..20_000,
            max_concurrent in proptest::option::of(1usize..4),
        ) {
            let mut planner = Planner::new(PlanConfig { max_concurrent, ..config(budget) }).unwrap();
            let names = names(nodes);
            let spacing = planner.config().spacing_ms();
            let pairs = nodes * (nodes - 1);
            let joined_all = nodes as u64 * join_gap;
            let horizon = joined_all + 3 * pairs as u64 * (spacing + tick + 500);
            let tests = simulate(&mut planner, &names, join_gap, tick, horizon);

            let mut by_node: HashMap<&str, Vec<&PlannedTest>> = HashMap::new();
            for test in &tests {
                prop_assert!(test.end - test.start <= 3_000);
                by_node.entry(&test.client).or_default().push(test);
                by_node.entry(&test.server).or_default().push(test);
            }
            for list in by_node.values() {
                for two in list.windows(2) {
                    prop_assert!(two[1].start >= two[0].end, "overlap {:?}", two);
                    prop_assert!(two[1].start - two[0].start >= spacing);
                }
                // The budget, measured directly: the testing time inside
                // every stretch of `spacing` ms that starts with a test.
                for (i, first) in list.iter().enumerate() {
                    let stretch_end = first.start + spacing;
                    let busy: u64 = list[i..]
                        .iter()
                        .map(|t| t.end.min(stretch_end).saturating_sub(t.start))
                        .sum();
                    prop_assert!(busy as f64 <= budget * spacing as f64 + 1.0);
                }
            }

            // Fair: no pair waits longer than one slot per pair between two
            // tries (or before its first), however the others are served.
            let (longest, tried) = longest_wait(&tests, join_gap);
            prop_assert!(longest <= pairs as u64 * (spacing + tick + 500), "waited {} ms", longest);
            prop_assert_eq!(tried, pairs, "every pair tried");
        }
    }
}
