//! The windows an agent still answers for: numbered as they close, kept
//! until the collector says they are safe, sent again after a reconnect.
//!
//! "Safe" depends on the collector. One that keeps nothing on disk sends
//! acks without `saved_through`: an acknowledged window is as safe as it
//! will ever be and is forgotten. One with a state directory acknowledges
//! what it received and says, in every ack, up to which sequence number
//! its last save reaches: a window is forgotten only once a save holds
//! it, so that a collector killed between two saves (and restarted from
//! the older one) gets the windows it lost from the agents that still
//! hold them. The collector takes each sequence number once, so sending a
//! window again is harmless.
//!
//! The outbox is bounded: when it is full, the oldest window is pushed out
//! and returned, so that the caller counts and logs it.

use std::collections::VecDeque;

use netaware_proto::v1::{Ack, Window};

/// Whether an ack's `code` refuses its window for now only: the collector
/// cannot take it at the moment (UNAVAILABLE, RESOURCE_EXHAUSTED), and the
/// agent sends it again after a reconnect. Any other refusal is for good
/// (INVALID_ARGUMENT: sending it again would be refused again).
pub fn refused_for_now(code: i32) -> bool {
    code == tonic::Code::Unavailable as i32 || code == tonic::Code::ResourceExhausted as i32
}

/// One window held, and whether the collector has acknowledged it.
#[derive(Debug)]
struct Held {
    window: Window,
    acked: bool,
}

/// Windows not yet safe at the collector, oldest first.
#[derive(Debug)]
pub struct Outbox {
    windows: VecDeque<Held>,
    capacity: usize,
    next_seq: u64,
}

impl Outbox {
    /// An outbox that holds at most `capacity` windows (at least one).
    pub fn new(capacity: usize) -> Self {
        Self {
            windows: VecDeque::new(),
            capacity: capacity.max(1),
            next_seq: 1,
        }
    }

    /// Numbers a new window and keeps it; returns the numbered window and
    /// the one pushed out, if the outbox was full.
    pub fn push(&mut self, mut window: Window) -> (Window, Option<Window>) {
        window.seq = self.next_seq;
        self.next_seq += 1;
        let evicted = if self.windows.len() == self.capacity {
            self.windows.pop_front().map(|held| held.window)
        } else {
            None
        };
        self.windows.push_back(Held {
            window: window.clone(),
            acked: false,
        });
        (window, evicted)
    }

    /// Applies an ack: a window refused for good, or any window taken by a
    /// collector that saves nothing, is forgotten; one refused for now
    /// ([`refused_for_now`]) is kept to be sent again after a reconnect;
    /// otherwise the window is marked received. Every window up to
    /// `saved_through` is forgotten. Whether the acknowledged window was
    /// held.
    pub fn ack(&mut self, ack: &Ack) -> bool {
        let Some(at) = self.windows.iter().position(|h| h.window.seq == ack.seq) else {
            self.saved_through(ack.saved_through);
            return false;
        };
        match ack.saved_through {
            _ if refused_for_now(ack.code) => {}
            Some(_) if ack.code == 0 => self.windows[at].acked = true,
            _ => drop(self.windows.remove(at)),
        }
        self.saved_through(ack.saved_through);
        true
    }

    fn saved_through(&mut self, saved: Option<u64>) {
        if let Some(saved) = saved {
            self.windows.retain(|h| h.window.seq > saved);
        }
    }

    /// Every window held, oldest first: what a new session sends first.
    pub fn pending(&self) -> impl Iterator<Item = &Window> {
        self.windows.iter().map(|h| &h.window)
    }

    /// Number of windows held.
    pub fn len(&self) -> usize {
        self.windows.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }

    /// Windows held that the collector has acknowledged but not yet saved.
    pub fn awaiting_save(&self) -> usize {
        self.windows.iter().filter(|h| h.acked).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ack(seq: u64, saved_through: Option<u64>) -> Ack {
        Ack {
            seq,
            saved_through,
            ..Ack::default()
        }
    }

    #[test]
    fn numbers_keeps_order_and_evicts_the_oldest() {
        let mut outbox = Outbox::new(2);
        let (first, none) = outbox.push(Window::default());
        assert_eq!((first.seq, none), (1, None));
        outbox.push(Window::default());
        let (third, evicted) = outbox.push(Window::default());
        assert_eq!(third.seq, 3);
        assert_eq!(evicted.map(|w| w.seq), Some(1));
        assert_eq!(outbox.pending().map(|w| w.seq).collect::<Vec<_>>(), [2, 3]);
        assert!(outbox.ack(&ack(3, None)));
        assert!(!outbox.ack(&ack(3, None)));
        assert_eq!(outbox.len(), 1);
    }

    #[test]
    fn a_window_is_kept_until_a_save_holds_it() {
        let mut outbox = Outbox::new(10);
        for _ in 0..3 {
            outbox.push(Window::default());
        }
        assert!(outbox.ack(&ack(1, Some(0))));
        assert!(outbox.ack(&ack(2, Some(0))));
        assert_eq!((outbox.len(), outbox.awaiting_save()), (3, 2));
        assert!(outbox.ack(&ack(3, Some(2))));
        assert_eq!(outbox.pending().map(|w| w.seq).collect::<Vec<_>>(), [3]);
        // A refused window is never taken: forgotten at once.
        outbox.push(Window::default());
        let refused = Ack {
            code: 3,
            ..ack(4, Some(2))
        };
        assert!(outbox.ack(&refused));
        assert_eq!(outbox.pending().map(|w| w.seq).collect::<Vec<_>>(), [3]);
        // One refused for now is kept, with or without a saving collector.
        for saved_through in [Some(2), None] {
            outbox.push(Window::default());
            let seq = outbox.pending().last().unwrap().seq;
            let busy = Ack {
                code: tonic::Code::Unavailable as i32,
                ..ack(seq, saved_through)
            };
            assert!(outbox.ack(&busy));
            assert!(outbox.pending().any(|w| w.seq == seq), "kept to send again");
        }
        assert_eq!(
            outbox.pending().map(|w| w.seq).collect::<Vec<_>>(),
            [3, 5, 6]
        );
    }

    /// What the agent and a collector with a state directory can do, in
    /// any order.
    #[derive(Debug, Clone)]
    enum Event {
        /// A window closes.
        Close,
        /// The collector takes the oldest window in flight and acks it.
        Deliver,
        /// The collector saves its state.
        Save,
        /// The collector is killed: what it took since its last save and
        /// what was in flight are gone; the agent reconnects and sends
        /// everything it holds again.
        Kill,
        /// The connection breaks (the collector keeps its memory); the
        /// agent reconnects and sends everything it holds again.
        Reconnect,
    }

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            3 => Just(Event::Close),
            4 => Just(Event::Deliver),
            1 => Just(Event::Save),
            1 => Just(Event::Kill),
            1 => Just(Event::Reconnect),
        ]
    }

    /// The collector's side, as `netaware_collector` keeps it: the last
    /// sequence number taken (a later one only), and what its last save
    /// holds.
    #[derive(Default, Clone)]
    struct Collector {
        last_seq: u64,
        taken: Vec<u64>,
        saved_last_seq: u64,
        saved_taken: Vec<u64>,
    }

    proptest! {
        /// Whatever the order of windows, acks, saves, kills and
        /// reconnects, once the agent has sent what it holds and the
        /// collector has saved, every window was taken exactly once and
        /// the outbox is empty, as long as it never overflowed.
        #[test]
        fn every_window_is_taken_once_whatever_the_order(events in proptest::collection::vec(event(), 0..200)) {
            let mut outbox = Outbox::new(1_000);
            let mut collector = Collector::default();
            let mut in_flight: VecDeque<Window> = VecDeque::new();
            let resend = |outbox: &Outbox, in_flight: &mut VecDeque<Window>| {
                in_flight.clear();
                in_flight.extend(outbox.pending().cloned());
            };
            let deliver = |collector: &mut Collector, outbox: &mut Outbox, window: Window| {
                if window.seq > collector.last_seq {
                    collector.last_seq = window.seq;
                    collector.taken.push(window.seq);
                }
                outbox.ack(&ack(window.seq, Some(collector.saved_last_seq)));
            };
            let mut closed = 0;
            for event in events {
                match event {
                    Event::Close => {
                        let (window, evicted) = outbox.push(Window::default());
                        prop_assert!(evicted.is_none());
                        in_flight.push_back(window);
                        closed += 1;
                    }
                    Event::Deliver => {
                        if let Some(window) = in_flight.pop_front() {
                            deliver(&mut collector, &mut outbox, window);
                        }
                    }
                    Event::Save => {
                        collector.saved_last_seq = collector.last_seq;
                        collector.saved_taken = collector.taken.clone();
                    }
                    Event::Kill => {
                        collector.last_seq = collector.saved_last_seq;
                        collector.taken = collector.saved_taken.clone();
                        resend(&outbox, &mut in_flight);
                    }
                    Event::Reconnect => resend(&outbox, &mut in_flight),
                }
            }
            // Calm: everything held is sent and taken, the collector saves,
            // and one more window's ack carries the news.
            resend(&outbox, &mut in_flight);
            while let Some(window) = in_flight.pop_front() {
                deliver(&mut collector, &mut outbox, window);
            }
            collector.saved_last_seq = collector.last_seq;
            let (last, _) = outbox.push(Window::default());
            deliver(&mut collector, &mut outbox, last);
            closed += 1;
            prop_assert_eq!(&collector.taken, &(1..=closed).collect::<Vec<u64>>());
            prop_assert_eq!(outbox.pending().map(|w| w.seq).collect::<Vec<_>>(), vec![closed]);
            prop_assert_eq!(outbox.awaiting_save(), 1);
        }
    }
}
