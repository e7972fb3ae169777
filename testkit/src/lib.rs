//! What netaware's tests share, so that each fixture is written once: one
//! hello and one window ([`fixtures`]), a collector and an agent started
//! on loopback ([`collector`], [`agent`]), a hand-driven agent session
//! ([`session`]), polling ([`wait`]), HTTP requests and the extender served
//! on loopback ([`http`]), a mock Kubernetes API server ([`kube_api`]), the extender following a collector as in its
//! pod ([`extender`]), a real Prometheus ([`prometheus`]), one sample
//! read out of a service's /metrics ([`metrics`]), a real headless
//! browser ([`browser`]), and the
//! checks that a test may use root or a tool, which CI
//! (`NETAWARE_REQUIRE_ROOT=1`) turns from a skip into a failure
//! ([`require`]), with the lock that keeps labs one at a time.
//!
//! Never shipped: only tests depend on it.

pub mod agent;
pub mod browser;
pub mod collector;
pub mod extender;
pub mod fixtures;
pub mod http;
pub mod kube_api;
pub mod metrics;
pub mod prometheus;
pub mod require;
pub mod session;
pub mod wait;

pub use netaware_runtime::clock::now_ms;

pub use agent::{AGENT_METRICS_PORT, start_agent, start_agent_with};
pub use collector::{collector_config, start_collector, start_collector_on, start_collector_with};
pub use fixtures::{good_peer, hello, hello_message, window};
pub use http::{get, post, serve_extender, serve_extender_on};
pub use kube_api::mock_api;
pub use prometheus::check_with_promtool;
pub use require::{have_root, have_tool, one_lab_at_a_time, run_apart_from_labs};
pub use session::Session;
pub use wait::{wait_for, wait_for_matrix};
