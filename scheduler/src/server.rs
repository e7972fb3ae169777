//! The HTTP shell: kube-scheduler's filter and prioritize verbs, answered
//! from the score cache with the pure `netaware_core::extender`.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;

use tokio::sync::{Mutex, RwLock};

use crate::bind::RecentPods;
use crate::cache::ScoreCache;
use crate::events::{self, EventRecorder, PodRef};
use crate::job::job_of;
use crate::metrics::{Metrics, OutcomeLabels, ReasonLabels, VerbLabels};
use crate::networks::{NETWORK_LABEL, NetworkCaches, NetworkChoice};
use crate::placements::Placements;
use crate::wire::{
    ExtenderArgs, ExtenderBindingArgs, ExtenderBindingResult, ExtenderFilterResult, NodeListOut,
    host_priorities_json, object_labels, object_name, object_namespace,
};
use netaware_core::extender::{Decision, JobContext, Neutral, decide};
use netaware_core::labels::place_from_labels;

/// Largest request body the extender reads (a 5,000-node NodeList is about
/// 30 MB of JSON in full; node names are far less).
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

/// What the handlers share.
pub struct Extender {
    /// The scores of each network followed, and the settings they are
    /// placed by.
    pub networks: NetworkCaches,
    /// Where each job's workers run.
    pub placements: Arc<RwLock<Placements>>,
    /// The API server, for the bind verb; `None` when there is none.
    pub kube: Option<kube::Client>,
    /// The jobs of pods seen in filter and prioritize calls, for bind.
    pub recent: Mutex<RecentPods>,
    /// What it has done, for /metrics.
    pub metrics: Metrics,
    /// Events on the pods it decides for; `None` without an API server.
    pub events: Option<EventRecorder>,
}

impl std::fmt::Debug for Extender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extender")
            .field("networks", &self.networks)
            .field("kube", &self.kube.is_some())
            .finish_non_exhaustive()
    }
}

/// How a call ended, when its HTTP status does not say (a bind that
/// failed is still a 200 with the reason in `Error`).
#[derive(Debug, Clone, Copy)]
struct Outcome(&'static str);

/// Runs a handler, then counts it and its latency.
async fn measured(
    extender: &Extender,
    verb: &'static str,
    handler: impl Future<Output = Response>,
) -> Response {
    let started = std::time::Instant::now();
    let response = handler.await;
    let outcome = response.extensions().get::<Outcome>().map_or_else(
        || {
            if response.status().is_success() {
                "ok"
            } else {
                "bad_request"
            }
        },
        |o| o.0,
    );
    extender
        .metrics
        .requests
        .get_or_create(&OutcomeLabels { verb, outcome })
        .inc();
    extender
        .metrics
        .duration
        .get_or_create(&VerbLabels { verb })
        .observe(started.elapsed().as_secs_f64());
    response
}

impl Extender {
    /// An extender with these parts and nothing remembered yet.
    pub fn new(
        cache: ScoreCache,
        placements: Arc<RwLock<Placements>>,
        kube: Option<kube::Client>,
    ) -> Self {
        Self {
            networks: NetworkCaches::single(cache),
            placements,
            events: kube.clone().map(|client| {
                // The pod's name (its hostname), as Events' reportingInstance.
                let instance =
                    std::env::var("HOSTNAME").unwrap_or_else(|_| "netaware-scheduler".into());
                EventRecorder::new(client, instance)
            }),
            kube,
            recent: Mutex::new(RecentPods::default()),
            metrics: Metrics::new(),
        }
    }
}

impl Extender {
    /// The same extender, following `networks` (the default network's
    /// cache in place of the one it was made with).
    pub fn with_networks(self, networks: NetworkCaches) -> Self {
        Self { networks, ..self }
    }
}

/// The extender's routes: POST /filter, POST /prioritize, POST /bind,
/// GET /metrics, GET /healthz.
pub fn router(extender: Arc<Extender>) -> Router {
    Router::new()
        .route(
            "/filter",
            post(|State(e): State<Arc<Extender>>, body: Bytes| async move {
                measured(&e, "filter", filter(&e, body)).await
            }),
        )
        .route(
            "/prioritize",
            post(|State(e): State<Arc<Extender>>, body: Bytes| async move {
                measured(&e, "prioritize", prioritize(&e, body)).await
            }),
        )
        .route(
            "/bind",
            post(|State(e): State<Arc<Extender>>, body: Bytes| async move {
                measured(&e, "bind", bind(&e, body)).await
            }),
        )
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(Arc::clone(&extender))
        .merge(observability_router(extender))
}

/// GET /metrics and GET /healthz alone: what `--metrics-listen` serves, so
/// that Prometheus can scrape the extender without reaching its verbs.
pub fn observability_router(extender: Arc<Extender>) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(|State(e): State<Arc<Extender>>| async move {
                (
                    [(CONTENT_TYPE, netaware_runtime::PROMETHEUS_CONTENT_TYPE)],
                    netaware_runtime::prometheus_text(&e.metrics.encode()),
                )
            }),
        )
        .route("/healthz", get(|| async { "ok\n" }))
        .with_state(extender)
}

/// A request, decoded and checked.
struct Request {
    args: ExtenderArgs,
    /// The candidates' names, in the order given (taken out of `args`).
    candidates: Vec<String>,
}

fn bad_request(message: String) -> Response {
    let body = ExtenderFilterResult {
        error: message,
        ..ExtenderFilterResult::default()
    };
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

/// The request in `body`, or why it is not one.
fn parse(body: &[u8]) -> Result<Request, String> {
    let mut args: ExtenderArgs =
        serde_json::from_slice(body).map_err(|err| format!("malformed ExtenderArgs: {err}"))?;
    if args.pod.as_ref().is_none_or(Value::is_null) {
        return Err("ExtenderArgs has no Pod".into());
    }
    let candidates: Vec<String> = match (args.node_names.as_mut(), &args.nodes) {
        // Taken, not copied: the answer only needs to know names came.
        (Some(names), _) => std::mem::take(names),
        (None, Some(list)) => list
            .items
            .iter()
            .map(|node| object_name(node).map(str::to_owned))
            .collect::<Option<_>>()
            .ok_or("a node in Nodes has no metadata.name")?,
        (None, None) => Vec::new(),
    };
    Ok(Request { args, candidates })
}

/// The decision on `request`, with its Events and neutral answers
/// counted: one piece of code for both verbs.
async fn judge<'r>(extender: &Extender, request: &'r Request) -> Decision<'r> {
    let args = &request.args;
    let Some(pod) = args.pod.as_ref() else {
        return decide(None, None, &request.candidates);
    };
    let labels = object_labels(pod);
    let job = match job_of(object_namespace(pod), &labels) {
        Some((key, size)) => {
            if let Some(uid) = pod
                .get("metadata")
                .and_then(|m| m.get("uid"))
                .and_then(Value::as_str)
            {
                extender.recent.lock().await.remember(uid, key.clone());
            }
            let placed = extender.placements.read().await.placed(&key);
            // Without a size label the job is at least as large as what runs.
            Some(JobContext {
                size: size.unwrap_or(placed.len() + 1),
                placed,
            })
        }
        None => None,
    };
    let (mut placer, unserved) = match extender.networks.for_labels(&labels) {
        NetworkChoice::Followed(cache) => (cache.fresh(), None),
        NetworkChoice::WorstOf(caches) => (extender.networks.worst_of(&caches), None),
        NetworkChoice::NotFollowed(network) => (
            None,
            Some(format!(
                "network {network} (label {NETWORK_LABEL}) is not followed by this extender (--network {network})"
            )),
        ),
        NetworkChoice::Invalid(why) => (None, Some(format!("label {NETWORK_LABEL}: {why}"))),
    };
    // Full node objects carry kube's own view of zones: it wins.
    if let (Some(list), Some(scores)) = (&args.nodes, &placer) {
        let places: HashMap<&str, (String, String)> = list
            .items
            .iter()
            .filter_map(|node| {
                let place = place_from_labels(&object_labels(node))?;
                Some((object_name(node)?, (place.zone, place.region)))
            })
            .collect();
        if !places.is_empty() {
            placer = Some(Arc::new(
                scores.with_places(|name| places.get(name).cloned()),
            ));
        }
    }
    let decision = decide(placer.as_deref(), job.as_ref(), &request.candidates);
    if let (Some(recorder), Some(job), Some(pod)) = (&extender.events, &job, pod_ref(pod)) {
        match (&decision.explanation, decision.neutral) {
            (Some(explanation), _) => {
                let note = events::note(job.size, job.placed.len(), explanation, &decision.failed);
                recorder.record(pod, note);
            }
            // A job's pods are told why nothing was weighed, so that a
            // filtered network, or one the extender does not follow, does
            // not pass unseen.
            (None, Some(neutral @ Neutral::CannotMeasure)) => {
                recorder.record(pod, format!("placed without netaware: {neutral}"));
            }
            (None, Some(Neutral::NoScores)) if unserved.is_some() => {
                let why = unserved.as_deref().unwrap_or_default();
                recorder.record(pod, format!("placed without netaware: {why}"));
            }
            (None, _) => {}
        }
    }
    if let Some(neutral) = decision.neutral {
        match neutral {
            Neutral::NoScores | Neutral::CannotMeasure => {
                tracing::warn!(reason = %neutral, unserved = unserved.as_deref().unwrap_or(""), "answering neutrally");
            }
            Neutral::NoJob => {}
        }
        let reason = neutral.as_str();
        extender
            .metrics
            .neutral
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }
    decision
}

/// The pod an Event would be about, when its metadata names it whole.
fn pod_ref(pod: &Value) -> Option<PodRef> {
    let meta = pod.get("metadata")?;
    let field = |name: &str| meta.get(name).and_then(Value::as_str).map(str::to_owned);
    Some(PodRef {
        namespace: field("namespace").unwrap_or_else(|| "default".into()),
        name: field("name")?,
        uid: field("uid")?,
    })
}

async fn filter(extender: &Extender, body: Bytes) -> Response {
    let request = match parse(&body) {
        Ok(request) => request,
        Err(why) => return bad_request(why),
    };
    let decision = judge(extender, &request).await;
    let mut result = ExtenderFilterResult {
        failed_nodes: decision
            .failed
            .iter()
            .map(|(name, failure)| ((*name).to_owned(), failure.to_string()))
            .collect(),
        ..ExtenderFilterResult::default()
    };
    match (&request.args.node_names, &request.args.nodes) {
        (Some(_), _) => {
            result.node_names = Some(decision.passing.iter().map(|&n| n.to_owned()).collect());
        }
        (None, Some(list)) => {
            let passing: std::collections::HashSet<&str> =
                decision.passing.iter().copied().collect();
            let items: Vec<Value> = list
                .items
                .iter()
                .filter(|node| object_name(node).is_some_and(|n| passing.contains(n)))
                .cloned()
                .collect();
            result.nodes = Some(NodeListOut { items });
        }
        (None, None) => result.node_names = Some(Vec::new()),
    }
    axum::Json(result).into_response()
}

async fn prioritize(extender: &Extender, body: Bytes) -> Response {
    let request = match parse(&body) {
        Ok(request) => request,
        Err(why) => return bad_request(why),
    };
    let decision = judge(extender, &request).await;
    // Written straight from the decision's borrowed names into one buffer
    // sized for them: at 5,000 candidates, copying each name into an owned
    // answer and serializing through axum's growing buffer cost about as
    // much as the decision itself.
    (
        [(CONTENT_TYPE, "application/json")],
        host_priorities_json(&decision.scores),
    )
        .into_response()
}

async fn bind(extender: &Extender, body: Bytes) -> Response {
    let answer = |status: StatusCode, error: String| {
        let failed = !error.is_empty() && status.is_success();
        let mut response = (status, axum::Json(ExtenderBindingResult { error })).into_response();
        if failed {
            response.extensions_mut().insert(Outcome("error"));
        }
        response
    };
    let args: ExtenderBindingArgs = match serde_json::from_slice(&body) {
        Ok(args) => args,
        Err(err) => {
            return answer(
                StatusCode::BAD_REQUEST,
                format!("malformed ExtenderBindingArgs: {err}"),
            );
        }
    };
    let Some(client) = &extender.kube else {
        return answer(
            StatusCode::OK,
            "this extender has no Kubernetes API access; leave bindVerb out of its configuration"
                .into(),
        );
    };
    if let Err(err) =
        crate::bind::bind(client, &args.pod_namespace, &args.pod_name, &args.node).await
    {
        return answer(
            StatusCode::OK,
            format!(
                "binding {}/{} to {}: {err}",
                args.pod_namespace, args.pod_name, args.node
            ),
        );
    }
    if let Some(job) = extender.recent.lock().await.job(&args.pod_uid).cloned() {
        extender
            .placements
            .write()
            .await
            .record_binding(&args.pod_uid, job, &args.node);
    }
    answer(StatusCode::OK, String::new())
}
