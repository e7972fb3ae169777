//! The extender's own metrics, in the Prometheus text format on /metrics:
//! requests by verb and outcome, their latency, and the neutral answers it
//! gave (and why), so that a dashboard shows when it stops having an
//! opinion.

use netaware_core::extender::Neutral;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Which call.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerbLabels {
    /// filter, prioritize or bind.
    pub verb: &'static str,
}

/// Which call, and how it ended.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// filter, prioritize or bind.
    pub verb: &'static str,
    /// ok, bad_request or error.
    pub outcome: &'static str,
}

/// Why an answer was neutral.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    /// [`Neutral::as_str`]: no_scores, no_job or cannot_measure.
    pub reason: &'static str,
}

/// The extender's verbs.
pub const VERBS: [&str; 3] = ["filter", "prioritize", "bind"];
/// How a call can end.
pub const OUTCOMES: [&str; 3] = ["ok", "bad_request", "error"];

/// The extender's metrics and their registry.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Requests by verb and outcome.
    pub requests: Family<OutcomeLabels, Counter>,
    /// Request latency by verb.
    pub duration: Family<VerbLabels, Histogram>,
    /// Neutral answers by reason.
    pub neutral: Family<ReasonLabels, Counter>,
}

impl Metrics {
    /// Fresh metrics, registered under `netaware_scheduler_`.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("netaware_scheduler");
        netaware_runtime::build_info::register_build_info(&mut registry);
        netaware_runtime::http::register_refusals(&mut registry);
        let requests = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "requests",
            "Extender calls by verb and outcome",
            requests.clone(),
        );
        let duration = Family::<VerbLabels, Histogram>::new_with_constructor(|| {
            // 50 us to about 3 s.
            Histogram::new(exponential_buckets(0.000_05, 3.0, 11))
        });
        registry.register(
            "request_duration_seconds",
            "Time to answer an extender call",
            duration.clone(),
        );
        let neutral = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "neutral_answers",
            "Answers without an opinion (all nodes pass, equal scores), by reason",
            neutral.clone(),
        );
        // Every series exists from the start, at 0, so that a rate over it
        // reads 0 rather than nothing.
        for verb in VERBS {
            drop(duration.get_or_create(&VerbLabels { verb }));
            for outcome in OUTCOMES {
                drop(requests.get_or_create(&OutcomeLabels { verb, outcome }));
            }
        }
        for reason in Neutral::ALL {
            drop(neutral.get_or_create(&ReasonLabels {
                reason: reason.as_str(),
            }));
        }
        Self {
            registry,
            requests,
            duration,
            neutral,
        }
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
