//! The extender's local copy of the scores, fed by the collector's watch
//! stream, so that each kube-scheduler call is answered from memory in
//! microseconds and never waits on the network.
//!
//! The copy counts as fresh for [`ScoreCache::max_age`]; after that (the
//! collector is gone, or its stream stalled) the extender answers neutrally
//! until the stream is back. The feeding task reconnects by itself, with a
//! capped backoff.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use netaware_core::network::Network;
use netaware_core::placement::{PlacementConfig, PlacementOverrides, Placer};
use netaware_core::scored::ScoredMatrix;
use netaware_proto::v1 as pb;
use netaware_proto::v1::scores_client::ScoresClient;
use netaware_runtime::latest::Latest;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use netaware_proto::convert::{fault_marks_from_wire, matrix_from_wire, placement_from_wire};
use netaware_proto::follow::Follower;

/// The least time from one rebuild of the scored copy to the next: ten
/// times what the last one took (a 5,000-node matrix takes a few hundred
/// milliseconds), at least a second, and at most a quarter of `max_age`,
/// so that a large cluster's updates cost the extender a tenth of a core
/// at most and its copy is never old enough to go stale.
pub fn rebuild_gap(last_rebuild: Duration, max_age: Duration) -> Duration {
    (last_rebuild * 10)
        .max(Duration::from_secs(1))
        .min(max_age / 4)
}

/// Most pages of one update the extender collects before applying it
/// (pages of at most 256 KiB: 1 GiB): a full state is some 115 bytes a
/// measured pair on the wire, about 140 pages for 5,000 nodes probing 64
/// peers each and 570 for 20,000.
pub const MAX_PAGES_PER_UPDATE: usize = 4_096;

/// Largest message the extender accepts from the collector: the watch
/// stream's pages stay under 4 MiB (`netaware_proto::follow`).
pub const MAX_UPDATE_BYTES: usize = 4 * 1024 * 1024;

/// What the cache holds: a placer, once the first matrix came.
type Held = Option<Arc<Placer>>;

/// The latest scores and when they came.
#[derive(Debug, Clone)]
pub struct ScoreCache {
    /// The placer calls read (the matrix and the settings it is placed
    /// by), swapped without a lock: a call never waits for the feed, which
    /// runs at a lower priority and, holding a lock, could be kept off the
    /// CPU for tens of milliseconds.
    latest: Arc<Latest<Held>>,
    /// When the stream last confirmed the matrix, in milliseconds since
    /// `epoch` (an atomic for the same reason).
    confirmed_ms: Arc<AtomicU64>,
    epoch: Instant,
    /// The placer the latest replaced, kept until the next update: a call
    /// that took it just before the swap has long finished by then, so no
    /// call ever frees a matrix (milliseconds at 5,000 nodes). Only the
    /// feed touches it.
    replaced: Arc<Mutex<Option<Arc<Held>>>>,
    max_age: Duration,
    /// The extender's own placement flags, each overriding the
    /// collector's setting of the same name.
    overrides: PlacementOverrides,
    /// The network whose matrix it follows.
    network: Network,
    /// Matrices received since start.
    pub updates: Arc<AtomicU64>,
}

impl ScoreCache {
    /// An empty cache whose content stays fresh for `max_age`.
    pub fn new(max_age: Duration) -> Self {
        Self {
            latest: Arc::new(Latest::new(None)),
            confirmed_ms: Arc::new(AtomicU64::new(0)),
            epoch: Instant::now(),
            replaced: Arc::new(Mutex::new(None)),
            max_age,
            overrides: PlacementOverrides::default(),
            network: Network::primary(),
            updates: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The same cache, following `network`'s matrix (the primary's unless
    /// said).
    pub fn on_network(self, network: Network) -> Self {
        Self { network, ..self }
    }

    /// The network it follows.
    pub fn network(&self) -> &Network {
        &self.network
    }

    /// The same cache, placing by `overrides` where they are set and by
    /// the collector's settings elsewhere.
    pub fn overriding(self, overrides: PlacementOverrides) -> Self {
        Self { overrides, ..self }
    }

    /// The settings the extender places by when the collector sends
    /// `collector`.
    pub fn placement(&self, collector: PlacementConfig) -> PlacementConfig {
        self.overrides.apply(collector)
    }

    /// How long a matrix stays fresh.
    pub fn max_age(&self) -> Duration {
        self.max_age
    }

    /// The latest placer, if fresh.
    pub fn fresh(&self) -> Option<Arc<Placer>> {
        let confirmed = self.epoch + Duration::from_millis(self.confirmed_ms.load(Relaxed));
        if confirmed.elapsed() > self.max_age {
            return None;
        }
        self.latest.get().as_ref().clone()
    }

    /// Stores a matrix received now, placed by the settings and faults it
    /// carries (with the extender's overrides).
    pub fn store(&self, matrix: &pb::Matrix) {
        let collector = placement_from_wire(matrix.placement);
        let faults = fault_marks_from_wire(&matrix.placement_faults);
        self.store_warmed(
            Placer::new(matrix_from_wire(matrix), self.placement(collector)).with_faults(faults),
        );
    }

    /// Stores a scored matrix received now, with the collector's placement
    /// settings (the extender's overrides applied here).
    pub fn store_scored(&self, scored: ScoredMatrix, collector: PlacementConfig) {
        self.store_warmed(Placer::new(scored, self.placement(collector)));
    }

    /// Stores `placer`, worked out here, once per matrix, rather than in
    /// the first kube-scheduler call that needs it.
    fn store_warmed(&self, placer: Placer) {
        placer.warm();
        self.store_placer(placer);
    }

    fn store_placer(&self, placer: Placer) {
        let previous = self.latest.replace(Arc::new(Some(Arc::new(placer))));
        self.touch();
        let older = self
            .replaced
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(previous);
        // Freed here, by the feed: calls wait neither for a lock nor for
        // the freeing.
        drop(older);
        self.updates.fetch_add(1, Relaxed);
    }

    /// Marks the matrix held as current without replacing it: the stream
    /// is alive and its update is applied, but rebuilding waits its turn
    /// ([`rebuild_gap`]).
    fn touch(&self) {
        let since_epoch = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.confirmed_ms.store(since_epoch, Relaxed);
    }

    /// Follows the collector at `url` (plain text) until `shutdown`.
    pub async fn follow(self, url: String, shutdown: CancellationToken) {
        match netaware_runtime::tls::endpoint(&url, None) {
            Ok(collector) => self.follow_endpoint(collector, shutdown).await,
            Err(err) => tracing::error!(%err, "cannot follow the collector"),
        }
    }

    /// Follows the collector's watch stream until `shutdown`, reconnecting
    /// after every fault.
    pub async fn follow_endpoint(
        self,
        collector: tonic::transport::Endpoint,
        shutdown: CancellationToken,
    ) {
        // With its jitter, a wait lasts 200 to 400 ms at first, 10 to 20 s
        // at most.
        let new_backoff = || {
            netaware_runtime::retry::backoff(Duration::from_millis(200), Duration::from_secs(10))
        };
        let mut backoff = new_backoff();
        loop {
            let followed = tokio::select! {
                () = shutdown.cancelled() => return,
                result = self.follow_once(&collector) => result,
            };
            match followed {
                Ok(()) => backoff = new_backoff(),
                Err(err) => {
                    tracing::warn!(collector = %collector.uri(), %err, "score stream lost; answering neutrally until it is back")
                }
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(backoff.next().unwrap_or(Duration::from_secs(10))) => {}
            }
        }
    }

    async fn follow_once(
        &self,
        collector: &tonic::transport::Endpoint,
    ) -> Result<(), tonic::Status> {
        let channel = collector
            .connect()
            .await
            .map_err(|err| tonic::Status::unavailable(format!("{err:?}")))?;
        let mut client = ScoresClient::new(channel).max_decoding_message_size(MAX_UPDATE_BYTES);
        let mut stream = client
            .watch_matrix(pb::WatchRequest {
                min_interval_ms: 1_000,
                // The same figures in a third of the bytes: the extender
                // holds the node list that compact pairs number their ends by.
                compact: true,
                network: netaware_proto::convert::network_to_wire(&self.network),
            })
            .await?
            .into_inner();
        tracing::info!(collector = %collector.uri(), network = %self.network, "following the collector's scores");
        // A new watch starts with the full state: a new follower.
        let mut follower = Follower::new();
        let mut pages = Vec::new();
        let mut next_rebuild = Instant::now();
        while let Some(update) = stream.message().await? {
            let last = update.last_page;
            pages.push(update);
            if pages.len() > MAX_PAGES_PER_UPDATE {
                return Err(tonic::Status::data_loss(format!(
                    "an update of more than {MAX_PAGES_PER_UPDATE} pages"
                )));
            }
            if !last {
                continue;
            }
            let rebuild = Instant::now() >= next_rebuild;
            let started = Instant::now();
            let overrides = self.overrides;
            let update = std::mem::take(&mut pages);
            // Applying a delta of 100,000 pairs and scoring 300,000 take a
            // while: off the runtime's threads and behind them, so that
            // kube-scheduler's calls are not held up.
            let work = netaware_runtime::background::run(move || {
                let applied = update
                    .into_iter()
                    .try_for_each(|page| follower.apply(page).map(drop));
                let scored = (applied.is_ok() && rebuild).then(|| {
                    let placer = follower.placer(&overrides);
                    placer.warm();
                    placer
                });
                (follower, applied, scored)
            });
            let (back, applied, scored) = work
                .await
                .ok_or_else(|| tonic::Status::internal("applying an update failed"))?;
            follower = back;
            applied.map_err(|err| tonic::Status::data_loss(err.to_string()))?;
            match scored {
                Some(placer) => {
                    self.store_placer(placer);
                    next_rebuild = Instant::now() + rebuild_gap(started.elapsed(), self.max_age);
                }
                None => self.touch(),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_replaced_matrix_is_freed_by_the_next_update_not_by_a_call() {
        let cache = ScoreCache::new(Duration::from_secs(60));
        let store = || cache.store_scored(ScoredMatrix::default(), PlacementConfig::default());
        store();
        let first = Arc::downgrade(&cache.fresh().expect("stored"));
        store();
        assert!(
            first.upgrade().is_some(),
            "a call holding the first matrix would not free it"
        );
        store();
        assert!(first.upgrade().is_none(), "freed by the update after");
    }

    #[test]
    fn rebuilds_are_spaced_by_their_cost_within_bounds() {
        let max_age = Duration::from_secs(30);
        let gap = |ms| rebuild_gap(Duration::from_millis(ms), max_age);
        assert_eq!(gap(5), Duration::from_secs(1));
        assert_eq!(gap(350), Duration::from_millis(3_500));
        assert_eq!(
            gap(5_000),
            Duration::from_millis(7_500),
            "a quarter of max_age"
        );
        assert_eq!(
            rebuild_gap(Duration::from_millis(5), Duration::from_secs(2)),
            Duration::from_millis(500)
        );
    }
}
