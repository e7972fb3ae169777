//! Which reply answers which probe, pure: every probe carries a random
//! nonce that its reply must carry back, so that a reply is taken only for
//! the probe it answers and no node can answer ahead of the probes.
//!
//! A reply is a probe's when it comes back on the probe's key (its peer
//! and sequence number) with the probe's nonce, stamped no earlier than the
//! probe left. Anything else is refused, with the reason, and counted: a
//! late reply (its probe had timed out) or a second one are what a slow or
//! duplicating network does; a nonce no outstanding or recent probe
//! carried, a recent probe's nonce replayed on another key, or a reply
//! before its request, is what a forger does
//! (`netaware_agent_replies_refused_total{reason}`).

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::time::{Instant, SystemTime};

/// How many answered or timed-out probes are remembered, to tell a late
/// or repeated reply from a forged one: at 64 peers a second, four
/// minutes of probes.
pub const REMEMBERED: usize = 16_384;

/// Why a reply was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// Its probe had timed out.
    Late,
    /// Its probe was answered already.
    Duplicate,
    /// It carries a nonce no probe of this agent carried lately, one that
    /// a recent probe on another key carried (a replay), or none.
    Forged,
    /// It came back stamped before its probe was sent.
    Early,
}

impl Refusal {
    /// Every reason, in the order metrics list them.
    pub const ALL: [Refusal; 4] = [
        Refusal::Late,
        Refusal::Duplicate,
        Refusal::Forged,
        Refusal::Early,
    ];

    /// The reason's label.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Late => "late",
            Refusal::Duplicate => "duplicate",
            Refusal::Forged => "forged",
            Refusal::Early => "early",
        }
    }
}

/// What became of a reply.
#[derive(Debug, PartialEq)]
pub enum Verdict<W> {
    /// It answers the probe that waited with `W`.
    Answered(W),
    /// It answers nothing.
    Refused(Refusal),
}

#[derive(Debug)]
struct Waiting<W> {
    nonce: u64,
    sent_at: SystemTime,
    /// When it stops waiting.
    deadline: Instant,
    waiter: W,
}

/// What became of a probe that no longer waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Answered,
    Expired,
}

/// The probes waiting for replies, by key, and the recent ones that no
/// longer wait.
#[derive(Debug)]
pub struct Outstanding<K, W> {
    waiting: HashMap<K, Waiting<W>>,
    recent: HashMap<u64, (K, Fate)>,
    order: VecDeque<u64>,
}

impl<K, W> Default for Outstanding<K, W> {
    fn default() -> Self {
        Self {
            waiting: HashMap::new(),
            recent: HashMap::new(),
            order: VecDeque::new(),
        }
    }
}

impl<K: Hash + Eq + Clone, W> Outstanding<K, W> {
    /// A probe sent (or about to be) at `sent_at` on `key`, carrying
    /// `nonce`, whose answer goes to `waiter` if it comes before
    /// `deadline`. A probe still waiting on the same key is replaced.
    pub fn insert(
        &mut self,
        key: K,
        nonce: u64,
        sent_at: SystemTime,
        deadline: Instant,
        waiter: W,
    ) {
        self.waiting.insert(
            key,
            Waiting {
                nonce,
                sent_at,
                deadline,
                waiter,
            },
        );
    }

    /// The probe on `key` never left: forgotten.
    pub fn forget(&mut self, key: &K) {
        self.waiting.remove(key);
    }

    /// Every probe whose deadline is `now` or earlier times out: their
    /// waiters, and the earliest deadline of those that still wait.
    pub fn expire_due(&mut self, now: Instant) -> (Vec<W>, Option<Instant>) {
        let expired: Vec<(K, Waiting<W>)> = self
            .waiting
            .extract_if(|_, waiting| waiting.deadline <= now)
            .collect();
        let waiters = expired
            .into_iter()
            .map(|(key, waiting)| {
                self.remember(waiting.nonce, key, Fate::Expired);
                waiting.waiter
            })
            .collect();
        let next = self.waiting.values().map(|w| w.deadline).min();
        (waiters, next)
    }

    /// A reply on `key` carrying `nonce`, stamped `received_at`.
    pub fn answer(&mut self, key: &K, nonce: Option<u64>, received_at: SystemTime) -> Verdict<W> {
        let Some(nonce) = nonce else {
            return Verdict::Refused(Refusal::Forged);
        };
        if let Some(waiting) = self.waiting.get(key)
            && waiting.nonce == nonce
        {
            if received_at < waiting.sent_at {
                return Verdict::Refused(Refusal::Early);
            }
            let waiting = self.waiting.remove(key).expect("just found");
            self.remember(nonce, key.clone(), Fate::Answered);
            return Verdict::Answered(waiting.waiter);
        }
        Verdict::Refused(match self.recent.get(&nonce) {
            Some((its_key, Fate::Answered)) if its_key == key => Refusal::Duplicate,
            Some((its_key, Fate::Expired)) if its_key == key => Refusal::Late,
            _ => Refusal::Forged,
        })
    }

    /// How many probes wait.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    fn remember(&mut self, nonce: u64, key: K, fate: Fate) {
        if self.recent.insert(nonce, (key, fate)).is_none() {
            self.order.push_back(nonce);
        }
        while self.order.len() > REMEMBERED {
            if let Some(oldest) = self.order.pop_front() {
                self.recent.remove(&oldest);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Duration;

    fn at(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
    }

    /// A deadline `ms` after a fixed instant.
    fn by(ms: u64) -> Instant {
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        *START.get_or_init(Instant::now) + Duration::from_millis(ms)
    }

    #[test]
    fn a_reply_is_taken_only_with_its_probes_nonce_after_the_probe_left() {
        let mut out: Outstanding<u16, &str> = Outstanding::default();
        out.insert(1, 0xaaaa, at(1_000), by(2_000), "probe 1");
        // The right key, the wrong nonce: what a forger would send.
        assert_eq!(
            out.answer(&1, Some(0xbbbb), at(1_001)),
            Verdict::Refused(Refusal::Forged)
        );
        // The right nonce, stamped before the probe left.
        assert_eq!(
            out.answer(&1, Some(0xaaaa), at(999)),
            Verdict::Refused(Refusal::Early)
        );
        // No nonce at all.
        assert_eq!(
            out.answer(&1, None, at(1_002)),
            Verdict::Refused(Refusal::Forged)
        );
        // The probe still waits for its real reply, and takes it once.
        assert_eq!(
            out.answer(&1, Some(0xaaaa), at(1_003)),
            Verdict::Answered("probe 1")
        );
        assert_eq!(
            out.answer(&1, Some(0xaaaa), at(1_004)),
            Verdict::Refused(Refusal::Duplicate)
        );
        // A reply ahead of its probe: nothing waits on that key yet.
        assert_eq!(
            out.answer(&2, Some(0xcccc), at(1_005)),
            Verdict::Refused(Refusal::Forged)
        );
        // A replay: probe 1's nonce, answered already, sent for probe 2.
        out.insert(2, 0xcccc, at(1_006), by(2_006), "probe 2");
        assert_eq!(
            out.answer(&2, Some(0xaaaa), at(1_007)),
            Verdict::Refused(Refusal::Forged)
        );
        // Not yet due: it still waits.
        assert_eq!(out.expire_due(by(2_005)), (vec![], Some(by(2_006))));
        assert_eq!(out.expire_due(by(2_006)), (vec!["probe 2"], None));
        assert_eq!(
            out.answer(&2, Some(0xcccc), at(2_000)),
            Verdict::Refused(Refusal::Late)
        );
        assert_eq!(out.waiting(), 0);
    }

    #[test]
    fn a_sweep_times_out_the_due_probes_and_says_when_the_next_is_due() {
        let mut out: Outstanding<u16, u16> = Outstanding::default();
        for (key, deadline) in [(1, 1_000), (2, 1_010), (3, 1_020), (4, 990)] {
            out.insert(key, u64::from(key), at(0), by(deadline), key);
        }
        assert_eq!(out.expire_due(by(900)), (vec![], Some(by(990))));
        let (mut expired, next) = out.expire_due(by(1_010));
        expired.sort_unstable();
        assert_eq!((expired, next), (vec![1, 2, 4], Some(by(1_020))));
        // A reply to a probe the sweep timed out is late; the one that
        // still waits takes its reply.
        assert_eq!(
            out.answer(&2, Some(2), at(5)),
            Verdict::Refused(Refusal::Late)
        );
        assert_eq!(out.answer(&3, Some(3), at(5)), Verdict::Answered(3));
        assert_eq!(out.expire_due(by(5_000)), (vec![], None));
    }

    #[test]
    fn old_fates_are_forgotten_past_the_bound() {
        let mut out: Outstanding<usize, ()> = Outstanding::default();
        for i in 0..REMEMBERED + 10 {
            out.insert(i, i as u64, at(0), by(0), ());
            out.expire_due(by(0));
        }
        assert_eq!(
            out.answer(&0, Some(0), at(1)),
            Verdict::Refused(Refusal::Forged)
        );
        let last = REMEMBERED + 9;
        assert_eq!(
            out.answer(&last, Some(last as u64), at(1)),
            Verdict::Refused(Refusal::Late)
        );
        assert!(out.recent.len() <= REMEMBERED);
    }

    proptest! {
        /// Whatever a peer sends, only the reply with the probe's nonce
        /// answers it, once, and never one stamped before it left.
        #[test]
        fn nothing_but_the_nonce_answers(
            forged in prop::collection::vec((0u16..4, any::<u64>(), 0u64..2_000), 0..50),
            nonces in prop::collection::vec(any::<u64>(), 4),
        ) {
            let mut out: Outstanding<u16, u16> = Outstanding::default();
            for (key, nonce) in nonces.iter().enumerate() {
                out.insert(key as u16, *nonce, at(1_000), by(2_000), key as u16);
            }
            let mut answered = [false; 4];
            for (key, nonce, ms) in forged {
                let verdict = out.answer(&key, Some(nonce), at(ms));
                let first_real = nonces[usize::from(key)] == nonce && ms >= 1_000 && !answered[usize::from(key)];
                prop_assert_eq!(matches!(verdict, Verdict::Answered(_)), first_real);
                if let Verdict::Answered(waiter) = verdict {
                    prop_assert_eq!(waiter, key);
                    answered[usize::from(key)] = true;
                }
            }
        }
    }
}
