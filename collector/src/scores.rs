//! The Scores service: matrix, zones, rank and the watch stream, answered
//! from the collector's shared snapshot ([`crate::snapshots`]).

use std::sync::Arc;
use std::time::Duration;

use netaware_core::extender::rank_answer;
use netaware_core::network::Network;
use netaware_core::pair_rtt::RttLookup;
use netaware_core::placement::{JobRequest, Placer};
use netaware_core::worst_of::worst_of_placers;
use netaware_proto::v1 as pb;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use crate::ResponseStream;
use crate::ingest::Ingest;
use crate::metrics::{WatchRefusal, WorkMetrics};
use crate::snapshots::{Snapshot, Snapshots};
use crate::tasks::topology::SharedTopology;
use crate::validate::{MAX_NAME_LEN, check_name};
use crate::watchers::{TooManyWatchers, Watchers, Watching};
use netaware_proto::convert;
use netaware_proto::follow::{self, MatrixFilter};
use prost::Message;

/// Largest job a rank request may ask for.
pub const MAX_JOB_SIZE: u32 = 100_000;
/// Most names in a rank request's placed or candidate lists.
pub const MAX_RANK_NAMES: usize = 100_000;
/// Shortest time between two matrix updates on a watch stream.
pub const MIN_WATCH_INTERVAL: Duration = Duration::from_millis(100);
/// Default time between two matrix updates on a watch stream.
pub const DEFAULT_WATCH_INTERVAL: Duration = Duration::from_secs(1);
/// A watch stream gets an update at least this often (an empty delta when
/// nothing changed), so that a follower knows the collector is there and
/// staleness moves on.
pub const WATCH_REFRESH: Duration = Duration::from_secs(5);
/// How long a watch stream's page may wait for its client while the
/// stream still holds the matrix version it is cut from; past it the
/// version is let go, and the update goes on from the latest one when the
/// client reads again.
pub const WATCH_GRACE: Duration = Duration::from_secs(1);

/// The Scores service and what it reads.
#[derive(Debug, Clone)]
pub struct ScoresService {
    /// The state's version, for snapshots as fresh as it.
    pub ingest: Arc<Ingest>,
    /// The shared snapshot.
    pub snapshots: Arc<Snapshots>,
    /// The measured topology of the last round.
    pub topology: Arc<SharedTopology>,
    /// Counters of the collector's work.
    pub work: Arc<WorkMetrics>,
    /// Rounds in a row that must show a node elsewhere before it moves
    /// (`--block-confirmations`), said with the topology.
    pub confirmations: u32,
    /// The watch streams open, for the matrix's `followers`.
    pub watchers: Arc<Watchers>,
    /// Longest an update waits for its stream to take it.
    pub send_deadline: Duration,
    /// Permits to build a watch stream's updates: a bounded number at once.
    pub builds: Arc<tokio::sync::Semaphore>,
    /// Watch streams end at shutdown.
    pub shutdown: CancellationToken,
}

impl ScoresService {
    /// The snapshot a reader answers from: the latest, or one as fresh as
    /// the state.
    pub(crate) async fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshots.for_reader(&self.ingest, &self.work).await
    }

    /// The snapshot placement and estimates answer from (Rank, Estimate,
    /// the web view's heat map and pairs): one warm for placement where it
    /// can be ([`crate::snapshots::Snapshots::for_placement`]).
    pub(crate) async fn placement_snapshot(&self) -> Arc<Snapshot> {
        self.snapshots.for_placement(&self.ingest, &self.work).await
    }

    /// Sends `pages`, cut from `snapshot` one at a time as the stream takes
    /// them, and returns the snapshot whose update went out whole; `None`
    /// when the stream ended or was cut off.
    ///
    /// A page that waits longer than [`WATCH_GRACE`] lets go of the
    /// snapshot while it waits on, so that a client that reads slowly (or
    /// not at all) pins no matrix version; once there is room, the update
    /// goes on from the latest snapshot: the same update when the version
    /// is the same, else a full state of the latest (a follower starts
    /// over at a first page of a newer version). A page that waits longer
    /// than the send deadline cuts the stream off.
    async fn send_pages(
        &self,
        tx: &mpsc::Sender<Result<pb::MatrixUpdate, Status>>,
        mut snapshot: Arc<Snapshot>,
        mut pages: follow::Pages,
        (network, form): (&Network, follow::PairForm),
        peer: &str,
    ) -> Option<Arc<Snapshot>> {
        loop {
            let permit = match tokio::time::timeout(WATCH_GRACE, tx.reserve()).await {
                Ok(permit) => permit.ok()?,
                Err(_) => {
                    let version = snapshot.version;
                    drop(snapshot);
                    let rest = self.send_deadline.saturating_sub(WATCH_GRACE);
                    let Ok(permit) = tokio::time::timeout(rest, tx.reserve()).await else {
                        self.work.watch_refused(WatchRefusal::Stalled);
                        tracing::warn!(
                            %peer,
                            deadline_s = self.send_deadline.as_secs_f64(),
                            "watch stream cut off: the client took no update within the deadline"
                        );
                        return None;
                    };
                    let permit = permit.ok()?;
                    snapshot = self.snapshot().await;
                    if snapshot.version != version {
                        pages = follow::full_state(
                            snapshot.versioned_of(network)?,
                            follow::WATCH_PAGE_BYTES,
                            form,
                        );
                    }
                    permit
                }
            };
            let Some(update) = snapshot
                .versioned_of(network)
                .and_then(|matrix| pages.next(matrix))
            else {
                return Some(snapshot);
            };
            self.work
                .watch_sent_bytes
                .inc_by(update.encoded_len() as u64);
            permit.send(Ok(update));
        }
    }
}

#[tonic::async_trait]
impl pb::scores_server::Scores for ScoresService {
    type WatchMatrixStream = ResponseStream<pb::MatrixUpdate>;

    async fn get_matrix(
        &self,
        request: Request<pb::MatrixRequest>,
    ) -> Result<Response<pb::Matrix>, Status> {
        let request = request.into_inner();
        for name in [&request.zone, &request.node] {
            if !name.is_empty() {
                check_name("zone or node", name, false)
                    .map_err(|e| Status::invalid_argument(e.0))?;
            }
        }
        let (snapshot, offset) = match PageToken::parse(&request.page_token)? {
            None => (self.snapshot().await, 0),
            Some(token) => {
                let snapshot = self.snapshots.by_version(token.version).ok_or_else(|| {
                    Status::aborted("the matrix changed since the first page: start again")
                })?;
                (snapshot, token.offset)
            }
        };
        let network = network_of(&request.network)?;
        let page_size = usize::try_from(request.page_size).unwrap_or(usize::MAX);
        let version = snapshot.version;
        let kept = Arc::clone(&snapshot);
        // A page of a large matrix takes milliseconds to cut: off the
        // threads that serve sessions.
        let cut = tokio::task::spawn_blocking(move || {
            let versioned = snapshot
                .versioned_of(&network)
                .ok_or_else(|| unmeasured(&snapshot, &network))?;
            Ok::<_, Status>(follow::page(
                versioned,
                MatrixFilter::of(&request),
                offset,
                page_size,
            ))
        });
        let (mut page, next) = cut
            .await
            .map_err(|err| Status::internal(err.to_string()))??;
        if offset == 0 {
            page.collector_version = env!("CARGO_PKG_VERSION").to_owned();
            let now = netaware_runtime::clock::now_ms();
            page.followers = self
                .watchers
                .list()
                .into_iter()
                .map(|w| pb::Follower {
                    peer: w.peer,
                    version: w.version,
                    last_update_age_s: now.saturating_sub(w.last_update) as f64 / 1e3,
                })
                .collect();
        }
        if let Some(offset) = next {
            self.snapshots.keep_for_paging(&kept);
            page.next_page_token = PageToken { version, offset }.to_string();
        }
        Ok(Response::new(page))
    }

    async fn estimate(
        &self,
        request: Request<pb::EstimateRequest>,
    ) -> Result<Response<pb::EstimateResponse>, Status> {
        let request = request.into_inner();
        check_name("src", &request.src, false).map_err(|e| Status::invalid_argument(e.0))?;
        if !request.dst.is_empty() {
            check_name("dst", &request.dst, false).map_err(|e| Status::invalid_argument(e.0))?;
        }
        let network = network_of(&request.network)?;
        let snapshot = self.placement_snapshot().await;
        let scored = placer_of(&snapshot, &network)?.matrix();
        let known = |name: &str| {
            scored
                .index_of(name)
                .ok_or_else(|| Status::not_found(format!("no node {name}")))
        };
        let src = known(&request.src)?;
        let lookup = RttLookup::new(scored);
        let pairs = if request.dst.is_empty() {
            (0..scored.nodes().len())
                .filter(|&dst| dst != src)
                .map(|dst| convert::pair_rtt_to_wire(scored, &lookup.pair(src, dst)))
                .collect()
        } else {
            let dst = known(&request.dst)?;
            vec![convert::pair_rtt_to_wire(scored, &lookup.pair(src, dst))]
        };
        Ok(Response::new(pb::EstimateResponse { pairs }))
    }

    async fn get_topology(
        &self,
        request: Request<pb::TopologyRequest>,
    ) -> Result<Response<pb::Topology>, Status> {
        let network = network_of(&request.into_inner().network)?;
        let published = self.topology.get();
        let Some(topology) = published.of(&network) else {
            return Err(unmeasured(&*self.snapshot().await, &network));
        };
        Ok(Response::new(convert::topology_to_wire(
            &topology,
            published.observed_unix_ms,
            self.confirmations,
        )))
    }

    async fn get_faults(
        &self,
        request: Request<pb::FaultsRequest>,
    ) -> Result<Response<pb::FaultsResponse>, Status> {
        let request = request.into_inner();
        let only = if request.network.is_empty() {
            None
        } else {
            Some(network_of(&request.network)?)
        };
        let published = self.topology.get();
        if let Some(network) = &only
            && published.of(network).is_none()
        {
            return Err(unmeasured(&*self.snapshot().await, network));
        }
        let faults = published
            .faults
            .iter()
            .filter(|fault| only.as_ref().is_none_or(|n| &fault.network == n))
            .map(convert::fault_to_wire)
            .collect();
        Ok(Response::new(pb::FaultsResponse {
            faults,
            observed_unix_ms: published.observed_unix_ms,
        }))
    }

    async fn get_zones(
        &self,
        request: Request<pb::ZonesRequest>,
    ) -> Result<Response<pb::ZoneSummary>, Status> {
        let network = network_of(&request.into_inner().network)?;
        let snapshot = self.snapshot().await;
        Ok(Response::new(convert::zones_to_wire(
            &placer_of(&snapshot, &network)?.matrix().zones(),
        )))
    }

    async fn rank(
        &self,
        request: Request<pb::RankRequest>,
    ) -> Result<Response<pb::RankResponse>, Status> {
        let request = request.into_inner();
        let job = job_request(&request)?;
        let networks = convert::networks_from_wire(&request.network)
            .map_err(|err| Status::invalid_argument(err.to_string()))?;
        let snapshot = self.placement_snapshot().await;
        let placers = networks
            .iter()
            .map(|network| placer_of(&snapshot, network))
            .collect::<Result<Vec<&Placer>, Status>>()?;
        // A job over several networks is placed by the worst of them, pair
        // by pair, as the extender places a pod that lists them: built
        // here for this one answer (the extender keeps its own).
        let combined;
        let placer = match placers.as_slice() {
            [placer] => *placer,
            several => {
                combined = worst_of_placers(several).expect("several networks");
                &combined
            }
        };
        // What the extender decides on these candidates, by the same
        // settings it receives with the matrix.
        let answer = rank_answer(placer, &job);
        Ok(Response::new(convert::rank_answer_to_wire(
            &answer,
            placer.config(),
        )))
    }

    async fn watch_matrix(
        &self,
        request: Request<pb::WatchRequest>,
    ) -> Result<Response<ResponseStream<pb::MatrixUpdate>>, Status> {
        let remote = request.remote_addr();
        let peer = remote.map_or_else(|| "unknown".to_owned(), |addr| addr.to_string());
        let request = request.into_inner();
        let interval = match request.min_interval_ms {
            0 => DEFAULT_WATCH_INTERVAL,
            ms => Duration::from_millis(u64::from(ms)).max(MIN_WATCH_INTERVAL),
        };
        let network = network_of(&request.network)?;
        let form = follow::PairForm::of(&request);
        placer_of(&*self.snapshot().await, &network)?;
        let watching = self
            .watchers
            .open(
                peer.clone(),
                remote.map(|addr| addr.ip()),
                netaware_runtime::clock::now_ms(),
            )
            .map_err(|refused| {
                self.work.watch_refused(match refused {
                    TooManyWatchers::InAll(_) => WatchRefusal::TooMany,
                    TooManyWatchers::FromClient(..) => WatchRefusal::TooManyFromClient,
                });
                tracing::warn!(%peer, %refused, "watch stream refused");
                Status::resource_exhausted(refused.to_string())
            })?;
        // The stream's slot is held as long as its HTTP/2 stream is open,
        // which a client that stopped reading decides, not the collector.
        let watching = Arc::new(watching);
        let shared = self.clone();
        // One page waiting at most: with the page being sent, all that a
        // slow client holds.
        let (tx, rx) = mpsc::channel(1);
        let sender = Arc::clone(&watching);
        tokio::spawn(async move {
            let watching = sender;
            let mut changes = shared.ingest.subscribe();
            // The full state first, then what changed since what was sent.
            let mut sent: Option<Arc<Snapshot>> = None;
            loop {
                let snapshot = shared.snapshot().await;
                let Ok(build_permit) = shared.builds.acquire().await else {
                    return;
                };
                // A delta compares every pair: hundreds of milliseconds for
                // a large cluster, off the threads that serve sessions,
                // behind them, a few at once.
                let before = sent.take();
                let now = Arc::clone(&snapshot);
                let followed = network.clone();
                let pages = netaware_runtime::background::run(move || {
                    // A network that is no longer measured ends the stream
                    // (the follower asks again, and hears NOT_FOUND).
                    let now = now.versioned_of(&followed)?;
                    Some(match &before {
                        None => follow::full_state(now, follow::WATCH_PAGE_BYTES, form),
                        Some(before) => follow::delta(
                            before.versioned_of(&followed)?,
                            now,
                            follow::WATCH_PAGE_BYTES,
                            form,
                        ),
                    })
                });
                let Some(Some(pages)) = pages.await else {
                    return;
                };
                drop(build_permit);
                let Some(snapshot) = shared
                    .send_pages(&tx, snapshot, pages, (&network, form), &peer)
                    .await
                else {
                    return;
                };
                watching.updated(snapshot.version, netaware_runtime::clock::now_ms());
                sent = Some(snapshot);
                tokio::select! {
                    () = shared.shutdown.cancelled() => return,
                    () = tx.closed() => return,
                    _ = tokio::time::sleep(WATCH_REFRESH) => {}
                    changed = changes.changed() => if changed.is_err() { return },
                }
                tokio::select! {
                    () = shared.shutdown.cancelled() => return,
                    () = tokio::time::sleep(interval) => {}
                }
            }
        });
        Ok(Response::new(Box::pin(HeldWhileOpen {
            updates: ReceiverStream::new(rx),
            _slot: watching,
        })))
    }
}

/// A watch stream's body, holding its slot among the watchers until the
/// HTTP/2 stream is dropped.
struct HeldWhileOpen {
    updates: ReceiverStream<Result<pb::MatrixUpdate, Status>>,
    _slot: Arc<Watching>,
}

impl tokio_stream::Stream for HeldWhileOpen {
    type Item = Result<pb::MatrixUpdate, Status>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        std::pin::Pin::new(&mut self.updates).poll_next(cx)
    }
}

/// Where the next page of a paged matrix starts: the snapshot's version
/// and the offset in its (filtered) pairs. A client sees it as an opaque
/// string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PageToken {
    version: u64,
    offset: usize,
}

impl PageToken {
    /// `None` for the first page (no token).
    fn parse(token: &str) -> Result<Option<Self>, Status> {
        if token.is_empty() {
            return Ok(None);
        }
        let bad = || Status::invalid_argument("page_token is not one this collector gave");
        let (version, offset) = token.split_once(':').ok_or_else(bad)?;
        Ok(Some(Self {
            version: version.parse().map_err(|_| bad())?,
            offset: offset.parse().map_err(|_| bad())?,
        }))
    }
}

impl std::fmt::Display for PageToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.version, self.offset)
    }
}

/// A rank request, checked.
fn job_request(request: &pb::RankRequest) -> Result<JobRequest<'_>, Status> {
    if request.size == 0 || request.size > MAX_JOB_SIZE {
        return Err(Status::invalid_argument(format!(
            "size must be between 1 and {MAX_JOB_SIZE}"
        )));
    }
    if request.placed.len() > MAX_RANK_NAMES || request.candidates.len() > MAX_RANK_NAMES {
        return Err(Status::invalid_argument(format!(
            "at most {MAX_RANK_NAMES} placed or candidate names"
        )));
    }
    for name in request.placed.iter().chain(&request.candidates) {
        check_name("node", name, false).map_err(|e| {
            Status::invalid_argument(format!("{} (names are at most {MAX_NAME_LEN} bytes)", e.0))
        })?;
    }
    Ok(JobRequest {
        size: request.size as usize,
        placed: &request.placed,
        candidates: (!request.candidates.is_empty()).then_some(&request.candidates[..]),
        strict_zone: request.strict_zone,
    })
}

/// The network a request names (empty: the primary).
fn network_of(name: &str) -> Result<Network, Status> {
    convert::network_from_wire(name).map_err(|err| Status::invalid_argument(err.to_string()))
}

/// What places on `network` in `snapshot`, or NOT_FOUND naming the
/// networks there are.
pub(crate) fn placer_of<'s>(
    snapshot: &'s Snapshot,
    network: &Network,
) -> Result<&'s Placer, Status> {
    snapshot
        .placer_of(network)
        .ok_or_else(|| unmeasured(snapshot, network))
}

/// NOT_FOUND for a network nothing was measured on.
fn unmeasured(snapshot: &Snapshot, network: &Network) -> Status {
    let known: Vec<&str> = snapshot.networks().map(Network::as_str).collect();
    Status::not_found(format!(
        "nothing measured on network {network} (networks: {})",
        known.join(", ")
    ))
}
