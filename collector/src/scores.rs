//! The Scores service: matrix, zones, rank and the watch stream, answered
//! from the collector's shared snapshot ([`crate::snapshots`]).

use std::sync::Arc;
use std::time::Duration;

use netaware_core::placement::{self, JobRequest};
use netaware_proto::v1 as pb;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::shared::{ResponseStream, Shared};
use crate::validate::{MAX_NAME_LEN, check_name};
use netaware_proto::convert;

/// Largest job a rank request may ask for.
pub const MAX_JOB_SIZE: u32 = 100_000;
/// Most names in a rank request's placed or candidate lists.
pub const MAX_RANK_NAMES: usize = 100_000;
/// Shortest time between two matrix updates on a watch stream.
pub const MIN_WATCH_INTERVAL: Duration = Duration::from_millis(100);
/// Default time between two matrix updates on a watch stream.
pub const DEFAULT_WATCH_INTERVAL: Duration = Duration::from_secs(1);
/// A watch stream gets a matrix at least this often, so that ages and
/// staleness move on even when nothing new arrives.
pub const WATCH_REFRESH: Duration = Duration::from_secs(5);

/// The Scores service.
pub struct ScoresService(pub Arc<Shared>);

#[tonic::async_trait]
impl pb::scores_server::Scores for ScoresService {
    type WatchMatrixStream = ResponseStream<pb::Matrix>;

    async fn get_matrix(
        &self,
        _: Request<pb::MatrixRequest>,
    ) -> Result<Response<pb::Matrix>, Status> {
        Ok(Response::new(self.0.matrix().await))
    }

    async fn get_zones(
        &self,
        _: Request<pb::ZonesRequest>,
    ) -> Result<Response<pb::ZoneSummary>, Status> {
        let snapshot = self.0.snapshot().await;
        Ok(Response::new(convert::zones_to_wire(
            &snapshot.scored.zones(),
        )))
    }

    async fn rank(
        &self,
        request: Request<pb::RankRequest>,
    ) -> Result<Response<pb::RankResponse>, Status> {
        let request = request.into_inner();
        let job = job_request(&request)?;
        let snapshot = self.0.snapshot().await;
        let ranking = placement::rank(&snapshot.scored, &job, &snapshot.config.placement);
        Ok(Response::new(convert::ranking_to_wire(&ranking)))
    }

    async fn watch_matrix(
        &self,
        request: Request<pb::WatchRequest>,
    ) -> Result<Response<ResponseStream<pb::Matrix>>, Status> {
        let interval = match request.into_inner().min_interval_ms {
            0 => DEFAULT_WATCH_INTERVAL,
            ms => Duration::from_millis(u64::from(ms)).max(MIN_WATCH_INTERVAL),
        };
        let shared = Arc::clone(&self.0);
        let (tx, rx) = mpsc::channel(4);
        tokio::spawn(async move {
            let mut changes = shared.changes.subscribe();
            loop {
                if tx.send(Ok(shared.matrix().await)).await.is_err() {
                    return;
                }
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
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
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
