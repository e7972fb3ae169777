//! One scored snapshot, shared by every reader: GetMatrix, GetZones, Rank,
//! the watch streams and /metrics all read the same [`Snapshot`] instead of
//! each scoring the whole matrix again.
//!
//! A snapshot is built when a reader finds the published one behind the
//! state's version or older than [`MAX_AGE`] (ages and staleness move on
//! with the clock), one build at a time, the readers that wait sharing it.
//! It is copied out of the state under the lock and scored after the lock
//! is released, so that ingest does not wait for the scoring. Builds are
//! spaced by half the time the last one took (at most [`MAX_GAP`]), so
//! that they take at most two thirds of a core, and run at a lower
//! priority (`netaware_runtime::background`); a
//! reader waits out at most [`MAX_WAIT`] of that gap. Once builds take
//! longer than [`MAX_WAIT`], readers do not wait for them at all: they get
//! the published snapshot. The collector's builder
//! (`crate::tasks::snapshots`) builds whenever the state changed,
//! at most every [`BUILDER_MIN_GAP`], so that a change is published within
//! a second whether anyone reads or not. So a small cluster's readers see
//! every change at once, and a large one's answer at once from scores
//! about two builds old. A snapshot is warmed for placement (each node's
//! health and estimates) after it is published; until it is warm, a large
//! cluster's placement reads the one before it, which is.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, LazyLock, PoisonError};
use std::time::{Duration, Instant};

use netaware_core::UnixMillis;
use netaware_core::coordinates::Coordinates;
use netaware_core::fault_marks::FaultMarks;
use netaware_core::network::Network;
use netaware_core::placement::Placer;
use netaware_core::scored::ScoredMatrix;
use netaware_proto::follow::Versioned;
use netaware_runtime::latest::Latest;
use tokio::sync::Mutex;

use crate::config::ModelConfig;
use crate::ingest::Ingest;
use crate::metrics::{LIVE_SNAPSHOTS, WorkMetrics};
use crate::state::{CollectorState, SnapshotInputs};

/// The primary network, which every snapshot's placer is of.
static PRIMARY: LazyLock<Network> = LazyLock::new(Network::primary);

/// A published snapshot older than this is rebuilt for the next reader.
pub const MAX_AGE: Duration = Duration::from_secs(1);
/// The longest wait between two builds, however long a build takes.
pub const MAX_GAP: Duration = Duration::from_secs(1);
/// A reader waits for the gap to pass only this long; past it, it gets
/// the published snapshot.
pub const MAX_WAIT: Duration = Duration::from_millis(50);
/// Placement reads a warm snapshot in place of the published one only
/// while the warm one is younger than this: past it (a warm that never
/// ended), the published one, cold.
pub const WARM_KEPT_AT_MOST: Duration = Duration::from_secs(5);
/// The builder's shortest gap: on a small cluster builds take
/// milliseconds, and four a second publish every change soon enough.
pub const BUILDER_MIN_GAP: Duration = Duration::from_millis(250);

/// How long a caller of [`Snapshots::current`] waits for the gap between
/// two builds to pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Patience {
    /// A reader: at most [`MAX_WAIT`]; past it, the published snapshot.
    Reader,
    /// The collector's builder (`crate::tasks::snapshots`): the whole
    /// gap.
    Builder,
}

impl Patience {
    fn longest_wait(self) -> Duration {
        match self {
            Patience::Reader => MAX_WAIT,
            Patience::Builder => MAX_GAP,
        }
    }

    /// The gap after a build that took `took`: half of it, so that builds
    /// take at most two thirds of a core, and for the builder at least
    /// [`BUILDER_MIN_GAP`]; never more than [`MAX_GAP`].
    fn gap(self, took: Duration) -> Duration {
        let half = took / 2;
        match self {
            Patience::Reader => half.min(MAX_GAP),
            Patience::Builder => half.clamp(BUILDER_MIN_GAP, MAX_GAP),
        }
    }
}

/// The scored matrix at one state version and instant, with the settings
/// it is placed by.
#[derive(Debug)]
pub struct Snapshot {
    /// The state's version it was copied at.
    pub version: u64,
    /// When it was scored (Unix ms).
    pub at: UnixMillis,
    /// The matrix (node health worked out) and the collector's placement
    /// settings: what Rank places with, and what followers receive.
    pub placer: Placer,
    /// How it was scored.
    pub config: ModelConfig,
    /// Every network but the primary (a dual-stack cluster's other
    /// family, the rails), scored at the same instant from its measured
    /// pairs, each placed by the same settings.
    pub other_networks: BTreeMap<Network, Placer>,
    built: Instant,
    _counted: Counted,
}

/// Counts its snapshot in [`LIVE_SNAPSHOTS`] from when it is built until
/// it is dropped.
#[derive(Debug)]
struct Counted;

impl Counted {
    fn new() -> Self {
        LIVE_SNAPSHOTS.inc();
        Self
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        LIVE_SNAPSHOTS.dec();
    }
}

impl Snapshot {
    /// The scored matrix.
    pub fn scored(&self) -> &ScoredMatrix {
        self.placer.matrix()
    }

    /// What pages and watch updates are cut from.
    pub fn versioned(&self) -> Versioned<'_> {
        Versioned {
            scored: self.placer.matrix(),
            placement: self.placer.config(),
            faults: self.placer.faults(),
            network: &PRIMARY,
            version: self.version,
            at: self.at,
        }
    }

    /// What pages of `network`'s matrix are cut from; `None` when nothing
    /// was measured on it.
    pub fn versioned_of<'s>(&'s self, network: &'s Network) -> Option<Versioned<'s>> {
        if network.is_primary() {
            return Some(self.versioned());
        }
        let placer = self.other_networks.get(network)?;
        Some(Versioned {
            scored: placer.matrix(),
            faults: placer.faults(),
            network,
            ..self.versioned()
        })
    }

    /// What places a job on `network`; `None` when nothing was measured
    /// on it.
    pub fn placer_of(&self, network: &Network) -> Option<&Placer> {
        if network.is_primary() {
            Some(&self.placer)
        } else {
            self.other_networks.get(network)
        }
    }

    /// Every network with a matrix, the primary first.
    pub fn networks(&self) -> impl Iterator<Item = &Network> {
        std::iter::once(&*PRIMARY).chain(self.other_networks.keys())
    }
}

/// Snapshots kept after they are replaced for readers paging through
/// them: a page token names its snapshot's version. A snapshot is kept
/// only once a reader was given a token for it, and only while pages of
/// it are asked for (within [`PAGE_IDLE`] of the last), at most this many
/// at once: each snapshot of 5,000 nodes holds about 170 MB, and keeping
/// the last few published whether anyone paged them or not held half a
/// gigabyte there.
pub const KEPT_FOR_PAGING: usize = 3;

/// A snapshot kept for paging is let go this long after its last page
/// was asked for (its reader then starts again).
pub const PAGE_IDLE: Duration = Duration::from_secs(10);

/// A snapshot kept for a reader paging through it.
#[derive(Debug)]
struct Paged {
    snapshot: Arc<Snapshot>,
    last_page: Instant,
}

/// The latest snapshot and what spaces the builds.
#[derive(Debug)]
pub struct Snapshots {
    latest: Latest<Snapshot>,
    /// How long the last build took, in microseconds, readable without
    /// waiting for a build under way.
    last_took_us: AtomicU64,
    /// Snapshots readers are paging through, oldest first.
    paged: std::sync::Mutex<VecDeque<Paged>>,
    /// The newest snapshot whose placer is warm: what placement reads
    /// while the published one is still being warmed
    /// ([`Snapshots::for_placement`]).
    warm: Arc<std::sync::Mutex<Arc<Snapshot>>>,
    /// Held while building: one build at a time.
    building: Mutex<BuildTiming>,
    /// The network coordinates of the last pass
    /// (`crate::tasks::coordinates`): each build gives them to the
    /// snapshot's nodes.
    pub coordinates: Latest<Coordinates>,
    /// The open faults of the last topology round that placement acts
    /// on, by network (`crate::tasks::topology`): each build gives them to
    /// the snapshot's placers.
    pub faults: Latest<FaultsByNetwork>,
}

/// The faults placement acts on, by network.
pub type FaultsByNetwork = BTreeMap<Network, FaultMarks>;

#[derive(Debug, Clone, Copy)]
struct BuildTiming {
    /// When the last build ended.
    ended: Option<Instant>,
    /// How long it took.
    took: Duration,
}

impl Snapshots {
    /// The first snapshot, of `state` as it starts.
    pub fn new(state: &CollectorState, now: UnixMillis) -> Self {
        let started = Instant::now();
        let snapshot = snapshot_of(
            state.snapshot_inputs(),
            &Coordinates::default(),
            &FaultsByNetwork::new(),
            now,
        );
        let snapshot = Arc::new(snapshot);
        Self {
            last_took_us: AtomicU64::new(micros(started.elapsed())),
            paged: std::sync::Mutex::new(VecDeque::new()),
            warm: Arc::new(std::sync::Mutex::new(Arc::clone(&snapshot))),
            latest: Latest::from_arc(Arc::clone(&snapshot)),
            building: Mutex::new(BuildTiming {
                ended: Some(Instant::now()),
                took: started.elapsed(),
            }),
            coordinates: Latest::default(),
            faults: Latest::default(),
        }
    }

    /// The published snapshot, whatever its age.
    pub fn published(&self) -> Arc<Snapshot> {
        self.latest.get()
    }

    /// The snapshot a reader gets: as fresh as [`Snapshots::current`]
    /// gives for the state `ingest` is at; when builds are slow (a large
    /// cluster), the published one at once, which the builder keeps
    /// current.
    pub async fn for_reader(&self, ingest: &Ingest, work: &WorkMetrics) -> Arc<Snapshot> {
        if self.builds_are_slow() {
            return self.published();
        }
        let version = ingest.version();
        self.current(
            ingest,
            version,
            netaware_runtime::clock::now_ms,
            work,
            Patience::Reader,
        )
        .await
    }

    /// The snapshot placement reads (Rank, estimates): as
    /// [`Snapshots::for_reader`], but on a large cluster, while the
    /// published snapshot is still being warmed for placement (at 5,000
    /// nodes a cold rank works out every node's health and estimates, a
    /// few hundred milliseconds), the one before it, which is warm; never
    /// one older than [`WARM_KEPT_AT_MOST`].
    pub async fn for_placement(&self, ingest: &Ingest, work: &WorkMetrics) -> Arc<Snapshot> {
        if !self.builds_are_slow() {
            return self.for_reader(ingest, work).await;
        }
        let warm = Arc::clone(&self.warm.lock().unwrap_or_else(PoisonError::into_inner));
        warm_or_published(self.published(), warm)
    }

    /// Whether builds take longer than a reader should wait
    /// ([`MAX_WAIT`]): a large cluster's readers then get the published
    /// snapshot at once, and the builder keeps it current.
    pub fn builds_are_slow(&self) -> bool {
        self.last_took_us.load(Relaxed) > micros(MAX_WAIT)
    }

    /// Whether `snapshot` is at `version` or newer and young.
    pub fn is_fresh(snapshot: &Snapshot, version: u64) -> bool {
        snapshot.version >= version && snapshot.built.elapsed() < MAX_AGE
    }

    /// A snapshot of `state` at `version` (the state's version now) or
    /// newer, and less than [`MAX_AGE`] old, unless the gap between builds
    /// is longer than `patience` waits: then the published one.
    pub async fn current(
        &self,
        ingest: &Ingest,
        version: u64,
        now: impl Fn() -> UnixMillis,
        work: &WorkMetrics,
        patience: Patience,
    ) -> Arc<Snapshot> {
        let fresh = |s: &Snapshot| Self::is_fresh(s, version);
        let latest = self.published();
        if fresh(&latest) {
            return latest;
        }
        // The gap is waited out without holding the build lock, so that a
        // reader is never held up by the builder's longer gap.
        let (mut timing, latest) = loop {
            let timing = self.building.lock().await;
            // Another caller may have built it while this one waited.
            let latest = self.published();
            if fresh(&latest) {
                return latest;
            }
            let gap = patience.gap(timing.took);
            let wait = timing
                .ended
                .map_or(Duration::ZERO, |ended| gap.saturating_sub(ended.elapsed()));
            if wait > patience.longest_wait() {
                return latest;
            }
            if wait.is_zero() {
                break (timing, latest);
            }
            drop(timing);
            tokio::time::sleep(wait).await;
        };
        let started = Instant::now();
        let inputs = {
            let state = ingest.state();
            let locked = Instant::now();
            let inputs = state.snapshot_inputs();
            let since = ingest.take_first_change();
            work.snapshot_lock.observe(locked.elapsed().as_secs_f64());
            (inputs, since)
        };
        let (inputs, since) = inputs;
        let at = now();
        let coordinates = self.coordinates.get();
        let faults = self.faults.get();
        let snapshot = netaware_runtime::background::run(move || {
            snapshot_of(inputs, &coordinates, &faults, at)
        })
        .await
        .map_or(latest, Arc::new);
        *timing = BuildTiming {
            ended: Some(Instant::now()),
            took: started.elapsed(),
        };
        work.snapshot_build.observe(timing.took.as_secs_f64());
        self.last_took_us.store(micros(timing.took), Relaxed);
        // The replaced one is dropped here, by the builder, not by a reader.
        drop(self.latest.replace(Arc::clone(&snapshot)));
        // Warmed for placement after it is published, so that readers get
        // it that much sooner; until then a large cluster's placement reads
        // the one before it ([`Snapshots::for_placement`]), and a small
        // cluster's rank that comes first works it out too.
        let warming = Arc::clone(&snapshot);
        let warm = Arc::clone(&self.warm);
        tokio::spawn(netaware_runtime::background::run(move || {
            warming.placer.warm();
            let mut warm = warm.lock().unwrap_or_else(PoisonError::into_inner);
            // Warms may end out of order: the newest stays.
            if warm.built <= warming.built {
                *warm = warming;
            }
        }));
        if let Some(since) = since {
            work.snapshot_delay.observe(since.elapsed().as_secs_f64());
        }
        self.paged
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|paged| paged.last_page.elapsed() < PAGE_IDLE);
        snapshot
    }

    /// Keeps `snapshot` for a reader that was given a token to its next
    /// page (the oldest kept one goes past [`KEPT_FOR_PAGING`]).
    pub fn keep_for_paging(&self, snapshot: &Arc<Snapshot>) {
        let mut paged = self.paged.lock().unwrap_or_else(PoisonError::into_inner);
        let last_page = Instant::now();
        if let Some(kept) = paged
            .iter_mut()
            .find(|p| p.snapshot.version == snapshot.version)
        {
            kept.last_page = last_page;
            return;
        }
        paged.push_back(Paged {
            snapshot: Arc::clone(snapshot),
            last_page,
        });
        while paged.len() > KEPT_FOR_PAGING {
            paged.pop_front();
        }
    }

    /// A snapshot kept for paging, by its version: its next page asked for.
    pub fn by_version(&self, version: u64) -> Option<Arc<Snapshot>> {
        let mut paged = self.paged.lock().unwrap_or_else(PoisonError::into_inner);
        let kept = paged
            .iter_mut()
            .rev()
            .find(|p| p.snapshot.version == version)?;
        kept.last_page = Instant::now();
        Some(Arc::clone(&kept.snapshot))
    }
}

/// What placement reads of the `published` snapshot and the newest `warm`
/// one: the warm one while it was built before the published (which is
/// then still being warmed) and is younger than [`WARM_KEPT_AT_MOST`].
fn warm_or_published(published: Arc<Snapshot>, warm: Arc<Snapshot>) -> Arc<Snapshot> {
    if warm.built < published.built && warm.built.elapsed() < WARM_KEPT_AT_MOST {
        warm
    } else {
        published
    }
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

fn snapshot_of(
    inputs: SnapshotInputs,
    coordinates: &Coordinates,
    faults: &FaultsByNetwork,
    at: UnixMillis,
) -> Snapshot {
    let scored = inputs.score(coordinates, at);
    // Worked out here, once, not by the first reader that needs it.
    scored.health();
    let placer = |network: &Network, scored: ScoredMatrix| {
        let faults = faults.get(network).cloned().unwrap_or_default();
        Placer::new(scored, inputs.config.placement).with_faults(faults)
    };
    Snapshot {
        version: inputs.version,
        at,
        placer: placer(&PRIMARY, scored),
        config: inputs.config,
        other_networks: inputs
            .score_other_networks(at)
            .into_iter()
            .map(|(network, scored)| {
                let placer = placer(&network, scored);
                (network, placer)
            })
            .collect(),
        built: Instant::now(),
        _counted: Counted::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netaware_proto::v1::Hello;

    /// `node` says hello; the state's version after it.
    fn join(ingest: &Ingest, node: &str) -> u64 {
        let mut state = ingest.state();
        state.hello(&hello(node), 1_000).unwrap();
        ingest.changed(state.version());
        state.version()
    }

    fn hello(node: &str) -> Hello {
        Hello {
            zone: "a".into(),
            ..netaware_testkit::hello(node)
        }
    }

    #[tokio::test]
    async fn a_reader_sees_every_change_and_builds_are_spaced_by_their_cost() {
        let state = Ingest::new(CollectorState::new(ModelConfig::default(), Vec::new()));
        let snapshots = Snapshots::new(&state.state(), 1_000);
        let work = WorkMetrics::default();
        assert_eq!(snapshots.published().scored().nodes().len(), 0);

        let version = join(&state, "n1");
        let seen = snapshots
            .current(&state, version, || 1_000, &work, Patience::Reader)
            .await;
        assert_eq!((seen.version, seen.scored().nodes().len()), (version, 1));
        // Unchanged and young: the same snapshot, not a new build.
        let again = snapshots
            .current(&state, version, || 1_000, &work, Patience::Reader)
            .await;
        assert!(Arc::ptr_eq(&seen, &again));

        // Had the last build taken long, the next one waits: a reader gets
        // the published snapshot, behind the state by at most the gap.
        snapshots.building.lock().await.took = Duration::from_millis(400);
        let version = join(&state, "n2");
        let spaced = snapshots
            .current(&state, version, || 1_000, &work, Patience::Reader)
            .await;
        assert!(Arc::ptr_eq(&seen, &spaced));
        tokio::time::sleep(MAX_GAP).await;
        let later = snapshots
            .current(&state, version, || 2_000, &work, Patience::Reader)
            .await;
        assert_eq!((later.version, later.scored().nodes().len()), (version, 2));
        let mut text = String::new();
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register("build", "", work.snapshot_build.clone());
        registry.register("delay", "", work.snapshot_delay.clone());
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("build_count 2"), "two builds: {text}");
        // Two changes were noted, each copied by one of the two builds,
        // which measured its delay.
        assert!(text.contains("delay_count 2"), "two delays: {text}");
    }

    /// A snapshot of `ingest`'s state at its version, built `age` ago.
    fn built_ago(ingest: &Ingest, age: Duration) -> Snapshot {
        let inputs = ingest.state().snapshot_inputs();
        let mut snapshot = snapshot_of(
            inputs,
            &Coordinates::default(),
            &FaultsByNetwork::new(),
            1_000,
        );
        snapshot.built = Instant::now() - age;
        snapshot
    }

    #[test]
    fn placement_reads_the_warm_snapshot_only_while_the_published_one_is_newer_and_it_is_young() {
        let state = Ingest::new(CollectorState::new(ModelConfig::default(), Vec::new()));
        join(&state, "n1");
        let warm = Arc::new(built_ago(&state, Duration::from_millis(300)));
        join(&state, "n2");
        let published = Arc::new(built_ago(&state, Duration::from_millis(10)));
        let reads = |published: &Arc<Snapshot>, warm: &Arc<Snapshot>, want: &Arc<Snapshot>| {
            Arc::ptr_eq(
                &warm_or_published(Arc::clone(published), Arc::clone(warm)),
                want,
            )
        };
        assert!(reads(&published, &warm, &warm), "still warming");
        assert!(reads(&published, &published, &published), "warm");
        // The same state built again (it aged): the warm one until it is warm.
        let rebuilt = Arc::new(built_ago(&state, Duration::ZERO));
        assert_eq!(rebuilt.version, published.version);
        assert!(
            reads(&rebuilt, &published, &published),
            "same version, still warming"
        );
        // Built before the published, but too long ago: a warm that never
        // ended.
        let stuck = Arc::new(built_ago(
            &state,
            WARM_KEPT_AT_MOST + Duration::from_millis(1),
        ));
        assert!(
            reads(&published, &stuck, &published),
            "a warm that never ended"
        );
    }

    #[tokio::test]
    async fn on_a_large_cluster_placement_reads_the_published_snapshot_once_it_is_warm() {
        let state = Ingest::new(CollectorState::new(ModelConfig::default(), Vec::new()));
        let snapshots = Snapshots::new(&state.state(), 1_000);
        let work = WorkMetrics::default();
        let version = join(&state, "n1");
        let built = snapshots
            .current(&state, version, || 1_000, &work, Patience::Builder)
            .await;
        assert_eq!(built.version, version);
        // As if that build had taken long: a large cluster.
        snapshots
            .last_took_us
            .store(micros(Duration::from_millis(200)), Relaxed);
        // Well within WARM_KEPT_AT_MOST, past which the published one is
        // read warm or not.
        let read = tokio::time::timeout(Duration::from_secs(2), async {
            loop {
                let read = snapshots.for_placement(&state, &work).await;
                if read.version == version {
                    return read;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the published snapshot is warmed");
        assert!(Arc::ptr_eq(&read, &built));
    }

    #[tokio::test]
    async fn the_builder_waits_out_the_gap_where_a_reader_would_not() {
        let state = Ingest::new(CollectorState::new(ModelConfig::default(), Vec::new()));
        let snapshots = Snapshots::new(&state.state(), 1_000);
        let work = WorkMetrics::default();
        assert!(
            !snapshots.builds_are_slow(),
            "an empty state builds at once"
        );
        // As if the last build had just taken 200 ms: a large cluster.
        let took = Duration::from_millis(200);
        *snapshots.building.lock().await = BuildTiming {
            ended: Some(Instant::now()),
            took,
        };
        snapshots.last_took_us.store(micros(took), Relaxed);
        assert!(snapshots.builds_are_slow());
        let version = join(&state, "n1");
        let read = snapshots
            .current(&state, version, || 1_000, &work, Patience::Reader)
            .await;
        assert!(
            !Snapshots::is_fresh(&read, version),
            "a reader does not wait"
        );
        let started = Instant::now();
        let built = snapshots
            .current(&state, version, || 1_000, &work, Patience::Builder)
            .await;
        assert!(Snapshots::is_fresh(&built, version));
        // The gap is half the last build's time, counted from its end.
        assert!(started.elapsed() >= took / 4, "the builder waited");

        // After a fast build a reader builds at once, the builder only
        // after its shortest gap.
        let version = join(&state, "n2");
        let read = snapshots
            .current(&state, version, || 1_000, &work, Patience::Reader)
            .await;
        assert!(Snapshots::is_fresh(&read, version), "a fast build, at once");
        let version = join(&state, "n3");
        let started = Instant::now();
        let built = snapshots
            .current(&state, version, || 1_000, &work, Patience::Builder)
            .await;
        assert!(Snapshots::is_fresh(&built, version));
        assert!(
            started.elapsed() >= BUILDER_MIN_GAP - Duration::from_millis(20),
            "the builder waited {:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn only_snapshots_a_reader_pages_through_are_kept_and_only_a_few() {
        let state = Ingest::new(CollectorState::new(ModelConfig::default(), Vec::new()));
        let snapshots = Snapshots::new(&state.state(), 1_000);
        let work = WorkMetrics::default();
        let mut published = Vec::new();
        for (i, node) in ["n1", "n2", "n3", "n4", "n5"].into_iter().enumerate() {
            let version = join(&state, node);
            tokio::time::sleep(MAX_GAP).await;
            let now = 1_000 * (i as u64 + 2);
            let seen = snapshots
                .current(&state, version, || now, &work, Patience::Reader)
                .await;
            assert_eq!(seen.version, version);
            published.push(seen);
        }
        // Published but never paged: none is kept.
        assert!(
            published
                .iter()
                .all(|s| snapshots.by_version(s.version).is_none())
        );
        // Paged: kept, the newest few of those paged.
        for paged in &published {
            snapshots.keep_for_paging(paged);
        }
        let kept: Vec<bool> = published
            .iter()
            .map(|s| snapshots.by_version(s.version).is_some())
            .collect();
        assert_eq!(kept, [false, false, true, true, true]);
        assert_eq!(KEPT_FOR_PAGING, 3);
        // Pages asked for again keep theirs; idle ones are let go at the
        // next publication.
        let last = &published[4];
        snapshots.paged.lock().unwrap().iter_mut().for_each(|p| {
            if p.snapshot.version != last.version {
                p.last_page -= PAGE_IDLE;
            }
        });
        let version = join(&state, "n6");
        tokio::time::sleep(MAX_GAP).await;
        snapshots
            .current(&state, version, || 9_000, &work, Patience::Reader)
            .await;
        let kept: Vec<bool> = published
            .iter()
            .map(|s| snapshots.by_version(s.version).is_some())
            .collect();
        assert_eq!(kept, [false, false, false, false, true]);
    }
}
