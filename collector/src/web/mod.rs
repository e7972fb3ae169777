//! The live web view, served on the collector's HTTP port (with its TLS):
//! the zones and their health, a node-by-node heat map per zone, block and
//! network (RTT, loss, goodput, quality; hover for a pair's figures and
//! age; estimated pairs marked), the worst pairs, the faults and degraded
//! nodes, the measured blocks, and where a job of K workers would go and
//! why. Read-only: every route is a GET.
//!
//! The page is three static files built into the binary (no npm, no
//! build step: plain HTML, CSS and JavaScript, no library); it reads the
//! JSON API under `/api/v1/`, whose answers are the documents the CLI
//! prints with `-o json` (`netaware_views::json`), made by the same gRPC
//! service code (`ScoresService`) from the same shared snapshot. The heat
//! map's cells come coloured from `netaware_views::heatmap`, the code
//! that draws `netaware matrix --format svg`, so the page paints, it
//! does not judge.

pub mod view;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderName, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use netaware_core::network::Network;
use netaware_core::pair_rtt::RttLookup;
use netaware_proto::convert;
use netaware_proto::v1 as pb;
use netaware_proto::v1::scores_server::Scores;
use netaware_views::explain::ExplainJson;
use netaware_views::heatmap::{CellBasis, HeatMap, Metric};
use netaware_views::json::{
    FaultsJson, MatrixJson, PairJson, PairRttJson, TopologyJson, ZonesJson,
};
use serde::{Deserialize, Serialize};
use tonic::Request;

use crate::scores::{ScoresService, placer_of};

/// The most placed workers a job form may name.
pub const MAX_PLACED: usize = 1_000;

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const ERRORS_JS: &str = include_str!("assets/errors.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// The web view's routes: the page under `/ui/`, its API under
/// `/api/v1/`; `/` leads to the page.
pub fn router(scores: ScoresService) -> Router {
    Router::new()
        .route("/", get(|| async { Redirect::to("/ui/") }))
        .route("/ui", get(|| async { Redirect::to("/ui/") }))
        .route(
            "/ui/",
            get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }),
        )
        .route(
            "/ui/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }),
        )
        .route(
            "/ui/errors.js",
            get(|| async { asset("text/javascript; charset=utf-8", ERRORS_JS) }),
        )
        .route(
            "/ui/app.css",
            get(|| async { asset("text/css; charset=utf-8", APP_CSS) }),
        )
        .route("/api/v1/networks", get(networks))
        .route("/api/v1/zones", get(zones))
        .route("/api/v1/topology", get(topology))
        .route("/api/v1/faults", get(faults))
        .route("/api/v1/worst", get(worst))
        .route("/api/v1/heatmap", get(heatmap))
        .route("/api/v1/pair", get(pair))
        .route("/api/v1/explain", get(explain))
        .with_state(scores)
}

/// A file of the page. Its scripts are its own files, never inline, so
/// that the policy can forbid every other script.
fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (CONTENT_TYPE, content_type),
            (CACHE_CONTROL, "no-cache"),
            (
                HeaderName::from_static("content-security-policy"),
                "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
            ),
            (HeaderName::from_static("x-content-type-options"), "nosniff"),
        ],
        body,
    )
        .into_response()
}

/// An API error: the status a gRPC answer's code maps to, and its message
/// as `{"error": ...}`.
#[derive(Debug)]
pub struct ApiError(tonic::Status);

impl From<tonic::Status> for ApiError {
    fn from(status: tonic::Status) -> Self {
        Self(status)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match self.0.code() {
            tonic::Code::InvalidArgument | tonic::Code::OutOfRange => StatusCode::BAD_REQUEST,
            tonic::Code::NotFound => StatusCode::NOT_FOUND,
            tonic::Code::Unavailable | tonic::Code::ResourceExhausted => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let body = serde_json::json!({ "error": self.0.message() });
        (status, axum::Json(body)).into_response()
    }
}

type ApiResult<T> = Result<axum::Json<T>, ApiError>;

fn bad_request(message: impl Into<String>) -> ApiError {
    ApiError(tonic::Status::invalid_argument(message.into()))
}

/// Which network a call asks about (empty: the primary).
#[derive(Debug, Default, Deserialize)]
pub struct NetworkQuery {
    /// The network's name.
    #[serde(default)]
    pub network: String,
}

impl NetworkQuery {
    fn parsed(&self) -> Result<Network, ApiError> {
        convert::network_from_wire(&self.network).map_err(|err| bad_request(err.to_string()))
    }
}

/// `/api/v1/networks`: the networks measured, and the collector's size.
#[derive(Debug, Serialize)]
pub struct NetworksJson {
    /// Every network with a matrix, the primary first.
    pub networks: Vec<String>,
    /// Nodes known.
    pub nodes: usize,
    /// The collector's version.
    pub collector_version: String,
    /// When the snapshot read was scored (ms since the Unix epoch).
    pub generated_unix_ms: u64,
}

async fn networks(State(scores): State<ScoresService>) -> ApiResult<NetworksJson> {
    let snapshot = scores.snapshot().await;
    Ok(axum::Json(NetworksJson {
        networks: snapshot.networks().map(|n| n.as_str().to_owned()).collect(),
        nodes: snapshot.scored().nodes().len(),
        collector_version: env!("CARGO_PKG_VERSION").to_owned(),
        generated_unix_ms: snapshot.at,
    }))
}

async fn zones(
    State(scores): State<ScoresService>,
    Query(query): Query<NetworkQuery>,
) -> ApiResult<ZonesJson> {
    let request = pb::ZonesRequest {
        network: query.network,
    };
    let answer = scores.get_zones(Request::new(request)).await?.into_inner();
    Ok(axum::Json(ZonesJson::from(&answer)))
}

async fn topology(
    State(scores): State<ScoresService>,
    Query(query): Query<NetworkQuery>,
) -> ApiResult<TopologyJson> {
    let request = pb::TopologyRequest {
        network: query.network,
    };
    let answer = scores
        .get_topology(Request::new(request))
        .await?
        .into_inner();
    let observed = answer.observed_unix_ms;
    Ok(axum::Json(TopologyJson::new(
        &convert::topology_from_wire(answer),
        observed,
    )))
}

async fn faults(
    State(scores): State<ScoresService>,
    Query(query): Query<NetworkQuery>,
) -> ApiResult<FaultsJson> {
    let request = pb::FaultsRequest {
        network: query.network,
    };
    let answer = scores.get_faults(Request::new(request)).await?.into_inner();
    Ok(axum::Json(FaultsJson::from(&answer)))
}

/// `/api/v1/worst?network=&limit=`.
#[derive(Debug, Deserialize)]
pub struct WorstQuery {
    /// The network's name.
    #[serde(default)]
    pub network: String,
    /// How many pairs (at most [`view::MAX_WORST_PAIRS`]).
    #[serde(default = "default_worst")]
    pub limit: usize,
}

fn default_worst() -> usize {
    20
}

async fn worst(
    State(scores): State<ScoresService>,
    Query(query): Query<WorstQuery>,
) -> ApiResult<MatrixJson> {
    let network = NetworkQuery {
        network: query.network,
    }
    .parsed()?;
    let snapshot = scores.snapshot().await;
    let placer = placer_of(&snapshot, &network)?;
    let pairs = view::worst_pairs(placer.matrix(), &network, snapshot.at, query.limit);
    Ok(axum::Json(MatrixJson {
        nodes: Vec::new(),
        pairs: pairs.iter().map(PairJson::from).collect(),
    }))
}

/// `/api/v1/heatmap?network=&zone=&block=&metric=&offset=&limit=`.
#[derive(Debug, Deserialize)]
pub struct HeatMapQuery {
    /// The network's name.
    #[serde(default)]
    pub network: String,
    /// The zone shown; every zone when empty or absent.
    #[serde(default)]
    pub zone: String,
    /// Only this measured block of it.
    pub block: Option<u32>,
    /// What the cells show (`quality`, `rtt`, `loss`, `goodput`).
    #[serde(default)]
    pub metric: Option<String>,
    /// The first node shown among the zone's.
    #[serde(default)]
    pub offset: usize,
    /// How many nodes (at most [`view::MAX_MAP_NODES`]).
    #[serde(default = "default_map_nodes")]
    pub limit: usize,
}

fn default_map_nodes() -> usize {
    view::MAX_MAP_NODES
}

/// `/api/v1/heatmap`: one page of a zone's (or block's, or every
/// node's) heat map.
#[derive(Debug, Serialize)]
pub struct HeatMapJson {
    /// The network it is a map of.
    pub network: String,
    /// The zone; null for every zone.
    pub zone: Option<String>,
    /// The block, when only one is shown.
    pub block: Option<u32>,
    /// Which of the zone's nodes are shown, and their blocks.
    #[serde(flatten)]
    pub shown: view::MapNodes,
    /// How many cells rest on a measurement, an estimate, or nothing.
    pub cells_by_basis: Vec<(CellBasis, usize)>,
    /// The cells.
    pub map: HeatMap,
}

async fn heatmap(
    State(scores): State<ScoresService>,
    Query(query): Query<HeatMapQuery>,
) -> ApiResult<HeatMapJson> {
    let network = NetworkQuery {
        network: query.network,
    }
    .parsed()?;
    let metric = match query.metric.as_deref() {
        None | Some("") => Metric::Quality,
        Some(name) => Metric::from_name(name).ok_or_else(|| {
            bad_request(format!("no metric {name}: quality, rtt, loss or goodput"))
        })?,
    };
    let snapshot = scores.placement_snapshot().await;
    placer_of(&snapshot, &network)?;
    let topology = scores.topology.get().of(&network).unwrap_or_default();
    let HeatMapQuery {
        zone,
        block,
        offset,
        limit,
        ..
    } = query;
    // Thousands of cells and estimates: off the threads that serve sessions.
    let built = tokio::task::spawn_blocking(move || {
        let placer = snapshot.placer_of(&network).expect("checked above");
        let scored = placer.matrix();
        let zone = (!zone.is_empty()).then_some(zone);
        let shown = view::map_nodes(scored, &topology, zone.as_deref(), block, offset, limit);
        let map = view::heat_map(
            scored,
            &network,
            placer.faults(),
            snapshot.at,
            &shown,
            metric,
        );
        HeatMapJson {
            network: network.as_str().to_owned(),
            zone,
            block,
            cells_by_basis: view::cells_by_basis(&map).to_vec(),
            shown,
            map,
        }
    });
    built
        .await
        .map(axum::Json)
        .map_err(|err| ApiError(tonic::Status::internal(err.to_string())))
}

/// `/api/v1/pair?network=&src=&dst=`.
#[derive(Debug, Deserialize)]
pub struct PairQuery {
    /// The network's name.
    #[serde(default)]
    pub network: String,
    /// The probing node.
    pub src: String,
    /// The probed node.
    pub dst: String,
}

/// One pair: its figures where an agent probes it, and its RTT as
/// `estimate` gives it (measured, or estimated and on what basis).
#[derive(Debug, Serialize)]
pub struct PairAnswerJson {
    /// The pair's figures; null when nobody probes it.
    pub pair: Option<PairJson>,
    /// Its RTT and what it rests on.
    pub rtt: PairRttJson,
}

async fn pair(
    State(scores): State<ScoresService>,
    Query(query): Query<PairQuery>,
) -> ApiResult<PairAnswerJson> {
    let network = NetworkQuery {
        network: query.network,
    }
    .parsed()?;
    let snapshot = scores.placement_snapshot().await;
    let scored = placer_of(&snapshot, &network)?.matrix();
    let known = |name: &str| {
        scored
            .index_of(name)
            .ok_or_else(|| ApiError(tonic::Status::not_found(format!("no node {name}"))))
    };
    let (src, dst) = (known(&query.src)?, known(&query.dst)?);
    if src == dst {
        return Err(bad_request("a pair has two nodes"));
    }
    let name = |i: usize| scored.nodes()[i].info.name.as_str();
    let measured = scored
        .pair(src, dst)
        .map(|p| PairJson::from(&convert::pair_to_wire(p, &network, name, snapshot.at)));
    let rtt = convert::pair_rtt_to_wire(scored, &RttLookup::new(scored).pair(src, dst));
    let estimate =
        netaware_views::json::EstimateJson::from(&pb::EstimateResponse { pairs: vec![rtt] });
    Ok(axum::Json(PairAnswerJson {
        pair: measured,
        rtt: estimate.pairs.into_iter().next().expect("one pair"),
    }))
}

/// `/api/v1/explain?size=&network=&placed=a,b`: as `netaware explain
/// --size K --peer a --peer b --network N -o json`.
#[derive(Debug, Deserialize)]
pub struct ExplainQuery {
    /// Workers in the job.
    pub size: u32,
    /// The network, or a comma list (each pair its worst network's).
    #[serde(default)]
    pub network: String,
    /// Nodes where workers run, a comma list.
    #[serde(default)]
    pub placed: String,
}

async fn explain(
    State(scores): State<ScoresService>,
    Query(query): Query<ExplainQuery>,
) -> ApiResult<ExplainJson> {
    if query.size == 0 {
        return Err(bad_request("a job has at least one worker"));
    }
    let placed: Vec<String> = query
        .placed
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect();
    if placed.len() > MAX_PLACED {
        return Err(bad_request(format!("at most {MAX_PLACED} placed workers")));
    }
    let networks =
        convert::networks_from_wire(&query.network).map_err(|err| bad_request(err.to_string()))?;
    let request = pb::RankRequest {
        size: query.size,
        placed: placed.clone(),
        network: query.network,
        ..pb::RankRequest::default()
    };
    let ranking = scores.rank(Request::new(request)).await?.into_inner();
    Ok(axum::Json(ExplainJson::new(
        query.size as usize,
        placed,
        &networks,
        &ranking,
    )))
}
