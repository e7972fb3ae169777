//! The agent's Prometheus metrics on /metrics (with /healthz beside them):
//! its own work, from [`Counters`]. What it measures goes to the collector,
//! which exports the matrix; the agent says only whether it is doing its job.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::http::header::CONTENT_TYPE;
use axum::routing::get;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use netaware_core::transport::Transport;

use crate::counters::Counters;
use crate::replies::Refusal;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TransportLabels {
    transport: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

/// The metrics text for the counters now.
pub fn exposition(counters: &Counters) -> String {
    let get = Counters::get;
    let mut registry = Registry::with_prefix("netaware_agent");
    netaware_runtime::build_info::register_build_info(&mut registry);
    netaware_runtime::http::register_refusals(&mut registry);
    for (name, help, value) in [
        (
            "probe_errors",
            "Probes that could not be sent",
            get(&counters.probe_errors),
        ),
        (
            "receive_errors",
            "Failed reads of ICMP replies or inbound echo requests",
            get(&counters.receive_errors),
        ),
        (
            "windows_sent",
            "Windows sent to the collector (a window too large for one message counts once per part), replays included",
            get(&counters.windows_sent),
        ),
        (
            "windows_acked",
            "Windows the collector accepted",
            get(&counters.windows_acked),
        ),
        (
            "windows_rejected",
            "Windows the collector refused as invalid",
            get(&counters.windows_rejected),
        ),
        (
            "windows_dropped",
            "Windows pushed out of the full buffer before an ack",
            get(&counters.windows_dropped),
        ),
        (
            "reconnects",
            "Sessions with the collector opened after the first",
            get(&counters.reconnects),
        ),
        (
            "throughput_orders_refused",
            "Throughput orders that could not be carried out",
            get(&counters.throughput_orders_refused),
        ),
        (
            "udp_holds_cut",
            "UDP replies whose reflector claimed to hold the probe longer than the prober takes out of the round trip (250 us): a loaded or a lying peer",
            get(&counters.holds_cut),
        ),
        (
            "probe_sends_unstamped",
            "ICMP and UDP probes that the kernel did not stamp as they left, timed from just before the send instead (they then carry the node's scheduling delays)",
            get(&counters.sends_unstamped),
        ),
        (
            "replies_unstamped",
            "ICMP and UDP replies that the kernel did not stamp as they arrived, timed when the agent read them instead",
            get(&counters.replies_unstamped),
        ),
        (
            "reflector_replies",
            "UDP probes of peers that this agent's STAMP reflector answered",
            get(&counters.reflected),
        ),
        (
            "throughput_claims_refused",
            "Throughput tests whose server claimed more bytes than it acknowledged (or whose count the kernel could not check): failed, the claim not taken",
            get(&counters.throughput_claims_refused),
        ),
    ] {
        let counter = Counter::<u64>::default();
        counter.inc_by(value);
        registry.register(name, help, counter);
    }
    let hold_left = Counter::<f64, std::sync::atomic::AtomicU64>::default();
    hold_left.inc_by(get(&counters.hold_left_ns) as f64 / 1e9);
    registry.register(
        "udp_hold_left_seconds",
        "Of the holds UDP reflectors claimed beyond what the prober takes out (udp_holds_cut), the time left in the round trips: a peer whose reflector is woken late, or that lies",
        hold_left,
    );
    let probes = Family::<TransportLabels, Counter>::default();
    for transport in Transport::ALL {
        probes
            .get_or_create(&TransportLabels {
                transport: transport.as_str(),
            })
            .inc_by(counters.sent_by(transport));
    }
    registry.register(
        "probes_sent",
        "Probes sent, by transport (icmp, udp, tcp), scouts included",
        probes,
    );
    let unanswered = Family::<ReasonLabels, Counter>::default();
    for (reason, counter) in [
        ("not_stamp", &counters.reflector_refused),
        ("rate", &counters.reflector_limited),
    ] {
        unanswered
            .get_or_create(&ReasonLabels { reason })
            .inc_by(get(counter));
    }
    registry.register(
        "reflector_unanswered",
        "Packets to the reflector left unanswered, by reason: not a STAMP request, or over its rate",
        unanswered,
    );
    let tests = Family::<OutcomeLabels, Counter>::default();
    let failed = get(&counters.throughput_failures);
    tests
        .get_or_create(&OutcomeLabels { outcome: "ok" })
        .inc_by(get(&counters.throughput_tests).saturating_sub(failed));
    tests
        .get_or_create(&OutcomeLabels { outcome: "failed" })
        .inc_by(failed);
    registry.register(
        "throughput_tests",
        "Throughput tests run as the client, by outcome",
        tests,
    );
    let refused = Family::<ReasonLabels, Counter>::default();
    for reason in Refusal::ALL {
        refused
            .get_or_create(&ReasonLabels {
                reason: reason.as_str(),
            })
            .inc_by(counters.refused(reason));
    }
    registry.register(
        "replies_refused",
        "Replies that answer no probe of this agent, by reason: late or duplicate (a slow or duplicating network), forged (a nonce no probe carried) or early (before its probe was sent)",
        refused,
    );
    let buffered = Gauge::<i64>::default();
    buffered.set(i64::try_from(get(&counters.windows_buffered)).unwrap_or(i64::MAX));
    registry.register(
        "windows_buffered",
        "Windows held until the collector has them safe (acknowledged, and saved where it saves its state)",
        buffered,
    );
    let mut text = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut text, &registry);
    text
}

/// Serves /metrics and /healthz on `listener` until `shutdown`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    counters: Arc<Counters>,
    tls: Option<netaware_runtime::http::HttpsConfig>,
    shutdown: CancellationToken,
) {
    let app = Router::new()
        .route(
            "/metrics",
            get(move || {
                let counters = Arc::clone(&counters);
                async move {
                    (
                        [(CONTENT_TYPE, netaware_runtime::PROMETHEUS_CONTENT_TYPE)],
                        netaware_runtime::prometheus_text(&exposition(&counters)),
                    )
                }
            }),
        )
        .route("/healthz", get(|| async { "ok\n" }));
    if let Err(err) = netaware_runtime::http::serve(listener, app, tls, shutdown).await {
        tracing::error!(%err, "metrics server failed");
    }
}

/// Binds the metrics listener (outside async code: the agent starts
/// synchronously).
pub fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    tokio::net::TcpListener::from_std(listener)
}
