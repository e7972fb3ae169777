//! The measuring loop: probes every peer once per interval, spread over the
//! interval, and closes a window of figures every window length.
//!
//! A probe belongs to the window in which it was sent. A window is closed
//! once its last probe can no longer be answered (its end plus the probe
//! timeout), so no outcome is lost or counted twice at a boundary.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use netaware_core::network::Network;
use netaware_core::transport::Transport;
use netaware_core::window::{OpenWindow, Probe, Purpose};
use netaware_proto::convert::peer_window_to_wire;
use netaware_proto::v1::{Peer, PeerWindow, Window};
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, Sleep, sleep_until};
use tokio_util::sync::CancellationToken;

use crate::counters::Counters;
use crate::inbound::{InboundTracker, Request};
use crate::node_stats::NodeStatsSampler;
use crate::pending::ProbeError;
use crate::probers::Probers;
use crate::quiet::QuietPeers;
use crate::schedule::{PROBE_BATCH, probe_offsets};
use crate::transport_choice::{ProbeMode, TransportChoice};

/// Extra time past the probe timeout before a window is closed.
const CLOSE_GRACE: Duration = Duration::from_millis(50);

/// How long past the earliest deadline the sweep of unanswered probes
/// waits, to time out the probes due soon after it on the same wake-up.
/// Well inside [`CLOSE_GRACE`], so that a timed-out probe still counts in
/// its window.
const SWEEP_SLACK: Duration = Duration::from_millis(10);

/// Timing of the measurements.
#[derive(Debug, Clone, Copy)]
pub struct MeasureTiming {
    /// Time between two probes to the same peer.
    pub interval: Duration,
    /// Length of one window.
    pub window: Duration,
    /// How long a probe waits for its reply.
    pub probe_timeout: Duration,
}

struct ProbeResult {
    window: u64,
    peer: String,
    network: Network,
    /// The address probed: what the transport choice is kept by.
    address: String,
    probe: Probe,
}

/// Probes the peers from `peers` until `shutdown`, sending one [`Window`]
/// per window length to `windows`. Peers that `quiet` pauses are skipped.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    probers: Arc<Probers>,
    mode: ProbeMode,
    timing: MeasureTiming,
    mut peers: watch::Receiver<Vec<Peer>>,
    mut inbound: mpsc::Receiver<Request>,
    windows: mpsc::Sender<Window>,
    quiet: Arc<QuietPeers>,
    counters: Arc<Counters>,
    shutdown: CancellationToken,
) {
    let started = Instant::now();
    let started_unix = netaware_runtime::clock::now_ms();
    let window_ms = timing.window.as_millis().max(1) as u64;
    let (results_tx, mut results) = mpsc::channel::<ProbeResult>(4096);
    let mut open: BTreeMap<u64, OpenWindow> = BTreeMap::new();
    let mut next_to_close = 0u64;
    let mut plan = CyclePlan::new(&peers.borrow_and_update(), started, timing.interval);
    // By the address probed, as the transport choice is.
    let mut sequences: BTreeMap<String, u16> = BTreeMap::new();
    let mut order = 0u64;
    let mut stats = NodeStatsSampler::new();
    let mut tracker = InboundTracker::default();
    let mut peer_names = names_by_address(&peers.borrow());
    let mut choice = TransportChoice::new(mode);

    // Armed again only when their instants move, not on every turn of
    // the loop: a timer armed anew wakes the runtime's driver, a system
    // call each time, and every probe's result turns the loop.
    let close_at = |next_to_close: u64| {
        started
            + Duration::from_millis((next_to_close + 1) * window_ms)
            + timing.probe_timeout
            + CLOSE_GRACE
    };
    let probe_timer = sleep_until(plan.next_at());
    let close_timer = sleep_until(close_at(next_to_close));
    // The probes' timeouts: one sweep when the earliest unanswered one is
    // due, not a timer per probe (see `crate::pending`).
    let mut sweep_at: Option<Instant> = None;
    // The deadline of the last probe sent: a probe registers its wait
    // when its task first runs, which may be after a sweep on the same
    // turn of the runtime.
    let mut last_deadline: Option<Instant> = None;
    let sweep_timer = sleep_until(started);
    tokio::pin!(probe_timer, close_timer, sweep_timer);

    loop {
        rearm(probe_timer.as_mut(), plan.next_at());
        rearm(close_timer.as_mut(), close_at(next_to_close));
        if let Some(at) = sweep_at {
            rearm(sweep_timer.as_mut(), at + SWEEP_SLACK);
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = &mut sweep_timer, if sweep_at.is_some() => {
                let now = Instant::now();
                let waiting = probers.expire_due(now.into_std()).map(Instant::from_std);
                sweep_at = next_sweep(waiting, last_deadline, now);
            }
            () = &mut probe_timer => {
                // Every probe due within the batch goes now, on this one
                // wake-up.
                let Some(due) = plan.take_due(Instant::now() + PROBE_BATCH) else {
                    plan = CyclePlan::new(&peers.borrow_and_update(), plan.end, timing.interval);
                    continue;
                };
                for peer in due {
                    if quiet.is_quiet(&peer.name, netaware_runtime::clock::now_ms()) {
                        continue;
                    }
                    let now = Instant::now();
                    let window = (now - started).as_millis() as u64 / window_ms;
                    let deadline = now + timing.probe_timeout;
                    sweep_at = Some(sweep_at.map_or(deadline, |at| at.min(deadline)));
                    last_deadline = Some(deadline);
                    let usable = probers.usable(&peer);
                    let Some(plan) = choice.plan(&peer.address, usable) else {
                        counters.probe_error();
                        continue;
                    };
                    let seq = sequences.entry(peer.address.clone()).or_default();
                    *seq = seq.wrapping_add(1);
                    let mut probe = |transport, purpose, seq| {
                        order += 1;
                        counters.probe_sent(transport);
                        let due = Due { peer: peer.clone(), transport, purpose, seq, window, order, deadline };
                        spawn_probe(&probers, due, &results_tx, &counters);
                    };
                    probe(plan.measure, Purpose::Measure, *seq);
                    if let Some(scout) = plan.scout {
                        *seq = seq.wrapping_add(1);
                        probe(scout, Purpose::Scout, *seq);
                    }
                }
            }
            Some(result) = results.recv() => {
                let answered = result.probe.rtt_ms.is_some();
                let probe = result.probe;
                choice.observe(&result.address, probe.transport, probe.purpose, answered);
                if result.window >= next_to_close {
                    open.entry(result.window).or_default().record(&result.peer, &result.network, result.probe);
                }
            }
            () = &mut close_timer => {
                let figures = open.remove(&next_to_close).unwrap_or_default();
                let start = started_unix + next_to_close * window_ms;
                let window = Window {
                    seq: 0, // numbered by the session, which owns the sequence
                    start_unix_ms: start,
                    end_unix_ms: start + window_ms,
                    peers: to_proto(figures),
                    stats: Some(stats.sample()),
                    // Added by the session as it numbers the window.
                    throughput: Vec::new(),
                };
                next_to_close += 1;
                if windows.send(window).await.is_err() {
                    return;
                }
            }
            Some(request) = inbound.recv() => {
                let Some(peer) = peer_names.get(&request.source) else { continue };
                let counted = tracker.observe(request);
                let window = started.elapsed().as_millis() as u64 / window_ms;
                if window >= next_to_close {
                    open.entry(window).or_default().record_inbound(peer, counted.expected, counted.received);
                }
            }
            Ok(()) = peers.changed() => {
                peer_names = names_by_address(&peers.borrow());
                choice.retain(|address| peers.borrow().iter().any(|p| p.address == address));
                sequences.retain(|address, _| peers.borrow().iter().any(|p| &p.address == address));
                // A new peer set starts with the next cycle, so that no peer
                // is probed twice within one interval.
                let end = plan.end;
                plan = CyclePlan::new(&[], end, timing.interval);
            }
        }
    }
}

/// When to sweep next, after a sweep at `now`: the earliest deadline of
/// the probes still waiting, or the last probe's sent, if it is yet to
/// come (its probe, and the others of its batch, may not have begun to
/// wait when the sweep looked); `None` when nothing can be waiting.
fn next_sweep(
    waiting: Option<Instant>,
    last_deadline: Option<Instant>,
    now: Instant,
) -> Option<Instant> {
    let unregistered = last_deadline.filter(|&at| at > now);
    waiting.into_iter().chain(unregistered).min()
}

/// Sets `timer` to `at` unless it is set to it already.
fn rearm(timer: std::pin::Pin<&mut Sleep>, at: Instant) {
    if timer.deadline() != at {
        timer.reset(at);
    }
}

/// A probe due now, and where its outcome goes.
struct Due {
    peer: Peer,
    transport: Transport,
    purpose: Purpose,
    seq: u16,
    window: u64,
    order: u64,
    /// When it stops waiting for its reply.
    deadline: Instant,
}

fn spawn_probe(
    probers: &Arc<Probers>,
    due: Due,
    results: &mpsc::Sender<ProbeResult>,
    counters: &Arc<Counters>,
) {
    let probers = Arc::clone(probers);
    let results = results.clone();
    let counters = Arc::clone(counters);
    tokio::spawn(async move {
        let Due {
            peer,
            transport,
            purpose,
            seq,
            window,
            order,
            deadline,
        } = due;
        let rtt_ms = match peer.address.parse::<IpAddr>() {
            Ok(host) => match probers
                .probe(transport, host, &peer, seq, deadline.into_std())
                .await
            {
                Ok(rtt) => Some(rtt.as_secs_f64() * 1e3),
                Err(ProbeError::Timeout) => None,
                Err(ProbeError::Failed(err)) => {
                    counters.probe_error();
                    tracing::debug!(peer = %peer.name, %transport, %err, "probe failed");
                    None
                }
            },
            Err(_) => {
                counters.probe_error();
                None
            }
        };
        let probe = Probe {
            order,
            rtt_ms,
            transport,
            purpose,
        };
        // The loop only stops at shutdown, when the outcome no longer matters.
        // A peer entry naming a network that no network can be: its probe
        // counts as an error, never as the primary network's.
        let Ok(network) = netaware_proto::convert::network_from_wire(&peer.network) else {
            counters.probe_error();
            return;
        };
        let _ = results
            .send(ProbeResult {
                window,
                peer: peer.name,
                network,
                address: peer.address,
                probe,
            })
            .await;
    });
}

fn to_proto(window: OpenWindow) -> Vec<PeerWindow> {
    window.finish().iter().map(peer_window_to_wire).collect()
}

/// Peer names by their primary network's address, to name the sources of
/// inbound requests (which count towards the primary network's one-way
/// loss only).
fn names_by_address(peers: &[Peer]) -> std::collections::HashMap<IpAddr, String> {
    peers
        .iter()
        .filter(|p| p.network.is_empty() || p.network == netaware_core::network::PRIMARY)
        .filter_map(|p| Some((p.address.parse().ok()?, p.name.clone())))
        .collect()
}

/// The probes of one interval: which peer is due when.
struct CyclePlan {
    due: std::vec::IntoIter<(Instant, Peer)>,
    next: Option<(Instant, Peer)>,
    end: Instant,
}

impl CyclePlan {
    fn new(peers: &[Peer], start: Instant, interval: Duration) -> Self {
        let offsets = probe_offsets(peers.len(), interval, rand::random::<f64>);
        let due = offsets
            .into_iter()
            .zip(peers.iter().cloned())
            .map(|(offset, peer)| (start + offset, peer))
            .collect();
        Self::of(due, start + interval)
    }

    /// The cycle that probes each peer at its instant and ends at `end`.
    fn of(mut due: Vec<(Instant, Peer)>, end: Instant) -> Self {
        due.sort_by_key(|(at, _)| *at);
        let mut due = due.into_iter();
        let next = due.next();
        Self { due, next, end }
    }

    /// When the next probe is due, or the end of the cycle.
    fn next_at(&self) -> Instant {
        self.next.as_ref().map_or(self.end, |(at, _)| *at)
    }

    /// The peer due next and every other due by `until`, in order; `None`
    /// once the cycle is over.
    fn take_due(&mut self, until: Instant) -> Option<Vec<Peer>> {
        let (_, first) = self.next.take()?;
        let mut due = vec![first];
        self.next = self.due.next();
        while let Some((at, peer)) = self.next.take() {
            if at > until {
                self.next = Some((at, peer));
                break;
            }
            due.push(peer);
            self.next = self.due.next();
        }
        Some(due)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(name: &str) -> Peer {
        Peer {
            name: name.into(),
            ..Peer::default()
        }
    }

    fn names(due: Option<Vec<Peer>>) -> Option<Vec<String>> {
        due.map(|peers| peers.into_iter().map(|p| p.name).collect())
    }

    #[test]
    fn a_sweep_keeps_the_deadline_of_a_probe_yet_to_wait() {
        let start = Instant::now();
        let ms = |n| start + Duration::from_millis(n);
        // A probe sent just before the sweep, its task not yet run: the
        // sockets know of nothing waiting, but its deadline stands.
        assert_eq!(next_sweep(None, Some(ms(1_000)), ms(5)), Some(ms(1_000)));
        // The earlier of that and what still waits.
        assert_eq!(
            next_sweep(Some(ms(900)), Some(ms(1_000)), ms(5)),
            Some(ms(900))
        );
        // Past the last probe's deadline, only what waits counts.
        assert_eq!(next_sweep(None, Some(ms(1_000)), ms(1_010)), None);
        assert_eq!(
            next_sweep(Some(ms(1_500)), Some(ms(1_000)), ms(1_010)),
            Some(ms(1_500))
        );
    }

    #[test]
    fn a_wake_up_takes_every_probe_due_within_the_batch() {
        let start = Instant::now();
        let ms = |n| start + Duration::from_millis(n);
        let due = [(30, "c"), (10, "a"), (12, "b"), (40, "d")];
        let mut plan = CyclePlan::of(
            due.iter().map(|&(at, name)| (ms(at), peer(name))).collect(),
            ms(1_000),
        );
        assert_eq!(plan.next_at(), ms(10));
        // Woken at a's instant: a, and b two milliseconds after it.
        assert_eq!(
            names(plan.take_due(ms(20))),
            Some(vec!["a".into(), "b".into()])
        );
        assert_eq!(plan.next_at(), ms(30));
        // Woken late: the next peer goes even past the batch.
        assert_eq!(names(plan.take_due(ms(29))), Some(vec!["c".into()]));
        assert_eq!(names(plan.take_due(ms(100))), Some(vec!["d".into()]));
        // Then the cycle's end, and it is over.
        assert_eq!(plan.next_at(), ms(1_000));
        assert_eq!(names(plan.take_due(ms(2_000))), None);
    }
}
