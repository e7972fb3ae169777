//! Which transport probes each peer, pure: the one that gets through.
//!
//! In the default mode ([`ProbeMode::Auto`]) an agent probes a peer by the
//! most preferred transport it can use towards it (ICMP, then UDP, then a
//! TCP handshake). When [`GIVE_UP_AFTER`] probes in a row go unanswered,
//! each further probe is joined by a scout on a less preferred transport
//! (in turn); once one is answered, the peer moves to it if the measuring
//! transport's next [`CONFIRM_AFTER`] probes are lost too. While it is on a
//! fallback, every [`SCOUT_EVERY`]th probe is joined by a scout on a more
//! preferred transport, and the first one answered moves it back.
//! Scouts never enter the figures
//! ([`netaware_core::window::Purpose::Scout`]); they are what tells a
//! filtered transport (lost while another is answered) from a peer or a
//! path that is down (everything lost).
//!
//! A peer moves only to a transport that was answered: an outage that
//! takes every transport leaves it where it was, its losses counted in
//! its windows. (Moving on unanswered probes alone would move every peer
//! during a second's outage and back after it, and the collector, which
//! never averages one transport's windows with another's, would start
//! each pair's history again without the outage in it.) A lossy link
//! almost never moves: at 30% loss, the sixteen losses in a row it takes
//! come once in 230 million probes; as an outage ends, its next eight
//! probes must all be lost for a scout that got through to move it (at
//! 19% loss, once in 590,000 outages).

use std::collections::HashMap;

use netaware_core::transport::{Transport, TransportSet};
use netaware_core::window::Purpose;

/// Unanswered probes in a row after which the next transport is tried.
pub const GIVE_UP_AFTER: u32 = 8;
/// Further unanswered probes after a less preferred transport's scout was
/// answered before the peer moves to it.
pub const CONFIRM_AFTER: u32 = 8;
/// Probes on a fallback between two scouts.
pub const SCOUT_EVERY: u64 = 8;

/// How an agent chooses its transports (`--probe`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProbeMode {
    /// The most preferred transport that gets through, per peer.
    #[default]
    Auto,
    /// This transport only, to every peer.
    Only(Transport),
}

impl ProbeMode {
    /// The mode called `name` (`auto`, `icmp`, `udp`, `tcp`).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "auto" => Some(ProbeMode::Auto),
            other => Transport::from_name(other).map(ProbeMode::Only),
        }
    }
}

/// The probes due to a peer now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// The transport whose probe counts.
    pub measure: Transport,
    /// A scout beside it, on a more preferred transport.
    pub scout: Option<Transport>,
}

#[derive(Debug, Clone, Copy)]
struct PeerState {
    current: Transport,
    unanswered: u32,
    probes: u64,
    /// A less preferred transport whose scout was answered while the
    /// current one went unanswered, and the current one's losses in a row
    /// then: the peer moves to it after [`CONFIRM_AFTER`] more. (A scout and
    /// its measuring probe go out together and come back in either order;
    /// once the current one is answered, what went down has come back and
    /// nothing moves.)
    answered_instead: Option<(Transport, u32)>,
}

impl PeerState {
    fn on(current: Transport) -> Self {
        Self {
            current,
            unanswered: 0,
            probes: 0,
            answered_instead: None,
        }
    }

    fn move_to(&mut self, transport: Transport) {
        self.current = transport;
        self.unanswered = 0;
        self.answered_instead = None;
    }
}

/// The transport of every peer, keyed by the address probed (a
/// dual-stack peer's two addresses are two paths, each filtered or not on
/// its own).
#[derive(Debug, Default)]
pub struct TransportChoice {
    mode: ProbeMode,
    peers: HashMap<String, PeerState>,
}

impl TransportChoice {
    /// Choosing in `mode`.
    pub fn new(mode: ProbeMode) -> Self {
        Self {
            mode,
            peers: HashMap::new(),
        }
    }

    /// The probes due to `peer` now, given the transports that can reach it
    /// (`None` when none can).
    pub fn plan(&mut self, peer: &str, usable: TransportSet) -> Option<Plan> {
        if let ProbeMode::Only(transport) = self.mode {
            return usable.contains(transport).then_some(Plan {
                measure: transport,
                scout: None,
            });
        }
        let first = usable.iter().next()?;
        let state = self
            .peers
            .entry(peer.to_owned())
            .or_insert(PeerState::on(first));
        if !usable.contains(state.current) {
            *state = PeerState::on(first);
        }
        state.probes += 1;
        let current = state.current;
        let better = TransportSet::of(usable.iter().filter(|t| *t < current));
        let worse = TransportSet::of(usable.iter().filter(|t| *t > current));
        let scout = if state.probes.is_multiple_of(SCOUT_EVERY) && !better.is_empty() {
            in_turn(better, state.probes / SCOUT_EVERY)
        } else if state.unanswered >= GIVE_UP_AFTER {
            in_turn(worse, u64::from(state.unanswered - GIVE_UP_AFTER))
        } else {
            None
        };
        Some(Plan {
            measure: state.current,
            scout,
        })
    }

    /// What became of a probe to `peer`.
    pub fn observe(&mut self, peer: &str, transport: Transport, purpose: Purpose, answered: bool) {
        if self.mode != ProbeMode::Auto {
            return;
        }
        let Some(state) = self.peers.get_mut(peer) else {
            return;
        };
        let stuck = state.unanswered >= GIVE_UP_AFTER;
        match purpose {
            Purpose::Scout if answered && transport < state.current => state.move_to(transport),
            Purpose::Scout if answered && stuck => {
                // The most preferred one answered, from the first answer on.
                let instead = match state.answered_instead {
                    Some((other, since)) => (other.min(transport), since),
                    None => (transport, state.unanswered),
                };
                state.answered_instead = Some(instead);
            }
            Purpose::Scout => {}
            Purpose::Measure if transport != state.current => {}
            Purpose::Measure if answered => {
                state.unanswered = 0;
                state.answered_instead = None;
            }
            Purpose::Measure => {
                state.unanswered = state.unanswered.saturating_add(1);
                if let Some((instead, since)) = state.answered_instead
                    && state.unanswered >= since.saturating_add(CONFIRM_AFTER)
                {
                    state.move_to(instead);
                }
            }
        }
    }

    /// Forgets the peers no longer probed.
    pub fn retain(&mut self, probed: impl Fn(&str) -> bool) {
        self.peers.retain(|peer, _| probed(peer));
    }
}

/// The `turn`th of `among`, round and round; `None` when it is empty.
fn in_turn(among: TransportSet, turn: u64) -> Option<Transport> {
    let count = among.iter().count() as u64;
    (count > 0).then(|| among.iter().nth((turn % count) as usize))?
}

#[cfg(test)]
mod tests {
    use super::*;
    use Transport::*;
    use proptest::prelude::*;

    fn all() -> TransportSet {
        TransportSet::of(Transport::ALL)
    }

    /// Probes `peer` `n` times, each transport answering as `answers` says
    /// (scouts observed first); returns the transports measured.
    fn run_with(
        choice: &mut TransportChoice,
        n: usize,
        answers: impl Fn(Transport) -> bool,
    ) -> Vec<Transport> {
        (0..n)
            .map(|_| {
                let plan = choice.plan("b", all()).unwrap();
                if let Some(scout) = plan.scout {
                    choice.observe("b", scout, Purpose::Scout, answers(scout));
                }
                choice.observe("b", plan.measure, Purpose::Measure, answers(plan.measure));
                plan.measure
            })
            .collect()
    }

    /// Probes `peer` `n` times, ICMP and UDP answering as `icmp` and `udp`
    /// say and TCP always; returns the transports measured.
    fn run(choice: &mut TransportChoice, n: usize, icmp: bool, udp: bool) -> Vec<Transport> {
        run_with(choice, n, |t| match t {
            Icmp => icmp,
            Udp => udp,
            Tcp => true,
        })
    }

    #[test]
    fn a_filtered_transport_gives_way_and_comes_back_when_it_answers() {
        let mut choice = TransportChoice::new(ProbeMode::Auto);
        assert!(run(&mut choice, 20, true, true).iter().all(|t| *t == Icmp));
        // ICMP filtered: UDP once a scout of it is answered after
        // GIVE_UP_AFTER losses and CONFIRM_AFTER more follow, and it stays.
        let filtered = run(&mut choice, 40, false, true);
        let at = (GIVE_UP_AFTER + CONFIRM_AFTER) as usize;
        assert!(filtered[..at].iter().all(|t| *t == Icmp), "{filtered:?}");
        assert!(filtered[at..].iter().all(|t| *t == Udp), "{filtered:?}");
        // Both filtered: TCP.
        assert_eq!(run(&mut choice, 40, false, false).last(), Some(&Tcp));
        // ICMP open again: the next scout takes it back.
        let open = run(&mut choice, 3 * SCOUT_EVERY as usize, true, false);
        assert_eq!(open.last(), Some(&Icmp));
    }

    #[test]
    fn an_outage_of_every_transport_moves_no_peer() {
        let mut choice = TransportChoice::new(ProbeMode::Auto);
        run(&mut choice, 20, true, true);
        let down = run_with(&mut choice, 100, |_| false);
        assert!(down.iter().all(|t| *t == Icmp), "{down:?}");
        let back = run(&mut choice, 20, true, true);
        assert!(back.iter().all(|t| *t == Icmp), "{back:?}");
        // A peer on a fallback stays on it through an outage too.
        run(&mut choice, 40, false, true);
        run_with(&mut choice, 100, |_| false);
        assert_eq!(run(&mut choice, 1, false, true), [Udp]);
    }

    #[test]
    fn only_one_transport_when_told_and_none_that_cannot_reach() {
        let mut choice = TransportChoice::new(ProbeMode::Only(Udp));
        let icmp_only = TransportSet::of([Icmp]);
        assert_eq!(choice.plan("b", icmp_only), None);
        assert_eq!(
            choice.plan("b", all()),
            Some(Plan {
                measure: Udp,
                scout: None
            })
        );
        let mut auto = TransportChoice::new(ProbeMode::Auto);
        assert_eq!(auto.plan("b", TransportSet::EMPTY), None);
        assert_eq!(
            auto.plan("b", TransportSet::of([Udp, Tcp]))
                .unwrap()
                .measure,
            Udp
        );
        assert_eq!(ProbeMode::from_name("tcp"), Some(ProbeMode::Only(Tcp)));
        assert_eq!(ProbeMode::from_name("auto"), Some(ProbeMode::Auto));
        assert_eq!(ProbeMode::from_name("sctp"), None);
    }

    proptest! {
        /// Whatever answers, a peer moves back only to the transport of a
        /// scout answered on the probe before, and on only to one whose
        /// scout was answered while the one it leaves lost every probe of
        /// the last GIVE_UP_AFTER + CONFIRM_AFTER.
        #[test]
        fn a_peer_moves_only_to_a_transport_that_answered(
            // Each transport answering at a rate of its own, from always
            // to never, so that some cases move on and back.
            outcomes in (0.0f64..=1.0, 0.0f64..=1.0, 0.0f64..=1.0).prop_flat_map(|(i, u, t)| {
                prop::collection::vec(
                    [prop::bool::weighted(i), prop::bool::weighted(u), prop::bool::weighted(t)],
                    1..400,
                )
            }),
        ) {
            let mut choice = TransportChoice::new(ProbeMode::Auto);
            let mut before: Option<(Transport, Option<(Transport, bool)>)> = None;
            let mut losses_in_a_row = 0u32;
            let mut answered_instead = TransportSet::EMPTY;
            for answers in outcomes {
                let answers = |t: Transport| answers[t as usize];
                let plan = choice.plan("b", all()).unwrap();
                if let Some((measured, scout)) = before
                    && measured != plan.measure
                {
                    if plan.measure < measured {
                        prop_assert_eq!(scout, Some((plan.measure, true)));
                    } else {
                        prop_assert!(answered_instead.contains(plan.measure));
                        prop_assert!(losses_in_a_row >= GIVE_UP_AFTER + CONFIRM_AFTER);
                    }
                    losses_in_a_row = 0;
                    answered_instead = TransportSet::EMPTY;
                }
                let scout = plan.scout.map(|t| (t, answers(t)));
                if let Some((t, answered)) = scout {
                    if answered {
                        answered_instead.insert(t);
                    }
                    choice.observe("b", t, Purpose::Scout, answered);
                }
                let answered = answers(plan.measure);
                if answered {
                    losses_in_a_row = 0;
                    answered_instead = TransportSet::EMPTY;
                } else {
                    losses_in_a_row += 1;
                }
                choice.observe("b", plan.measure, Purpose::Measure, answered);
                before = Some((plan.measure, scout));
            }
        }

        /// A lossy but open link leaves ICMP only after GIVE_UP_AFTER
        /// losses in a row, and is back by the next answered scout.
        #[test]
        fn a_lossy_link_stays_or_returns(losses in prop::collection::vec(any::<bool>(), 1..400)) {
            let mut choice = TransportChoice::new(ProbeMode::Auto);
            let mut in_a_row = 0u32;
            let mut scout_answered = false;
            for lost in losses {
                let plan = choice.plan("b", all()).unwrap();
                prop_assert!(!scout_answered || plan.measure == Icmp);
                if plan.measure == Icmp {
                    in_a_row = if lost { in_a_row + 1 } else { 0 };
                } else {
                    prop_assert!(in_a_row >= GIVE_UP_AFTER);
                }
                scout_answered = false;
                if let Some(scout) = plan.scout {
                    scout_answered = scout == Icmp && !lost;
                    choice.observe("b", scout, Purpose::Scout, !lost);
                }
                choice.observe("b", plan.measure, Purpose::Measure, !lost);
            }
        }
    }
}
