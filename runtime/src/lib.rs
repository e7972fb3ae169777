//! Process plumbing that every netaware binary shares, so that each one
//! logs the same way and stops the same way.
//!
//! - [`init_logging`]: tracing to stderr, filtered by `RUST_LOG`, as text
//!   or JSON ([`LogFormat`]).
//! - [`shutdown_on_signal`]: a [`CancellationToken`] cancelled on SIGINT or
//!   SIGTERM (what Kubernetes sends before it kills a pod), which every
//!   server and task watches to drain and stop.
//! - [`prometheus_text`] and [`PROMETHEUS_CONTENT_TYPE`]: what every
//!   /metrics endpoint answers with.
//! - [`tls`]: the TLS flags and material every gRPC server and client
//!   shares, and the client side; [`tls_server`]: the server side, its
//!   material read again when its files change.
//! - [`http`]: serving /metrics, /healthz and the extender over HTTP or
//!   HTTPS until shutdown.
//! - [`clock`]: the wall clock, read in one place.
//! - [`background`]: heavy work no request waits for, at a lower CPU
//!   priority.
//! - [`node_labels`]: a node's zone and region from its Node's labels.
//! - [`latest`]: the latest value of something many readers share.
//! - [`retry`]: how long to wait before reaching a peer again.
//! - [`events`]: Kubernetes Events as netaware posts them.
//! - [`build_info`]: the version every /metrics endpoint reports.

pub mod background;
pub mod build_info;
pub mod clock;
pub mod events;
pub mod http;
pub mod latest;
pub mod node_labels;
pub mod open_files;
pub mod retry;
pub mod tls;
pub mod tls_server;

use tokio_util::sync::CancellationToken;

/// The content type of the Prometheus text format (0.0.4).
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The Prometheus text format (0.0.4) of the OpenMetrics text that
/// prometheus-client writes: a counter's HELP and TYPE name the `_total`
/// series, as the classic format and `promtool check metrics` expect, and
/// the `# EOF` marker goes. Every /metrics endpoint serves this, so that any
/// Prometheus and promtool read it the same way.
pub fn prometheus_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut text = String::with_capacity(openmetrics.len() + 16 * counters.len());
    for line in openmetrics.lines() {
        if line == "# EOF" {
            continue;
        }
        let header = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|kind| Some((kind, line.strip_prefix(kind)?)));
        match header {
            Some((kind, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                let suffix = if counters.contains(name) {
                    "_total"
                } else {
                    ""
                };
                text.push_str(&format!("{kind}{name}{suffix} {tail}"));
            }
            None => text.push_str(line),
        }
        text.push('\n');
    }
    text
}

/// The `--log-format` flag of every binary.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct LogArgs {
    /// How logs are written to stderr: text (coloured only on a terminal)
    /// or json (one object a line, for log collectors).
    #[arg(
        long,
        global = true,
        value_enum,
        env = "NETAWARE_LOG_FORMAT",
        default_value = "text"
    )]
    pub log_format: LogFormat,
}

/// How the logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Lines for people; coloured only when stderr is a terminal.
    #[default]
    Text,
    /// One JSON object a line (timestamp, level, target, fields), for log
    /// collectors (Loki, Elasticsearch, Cloud Logging).
    Json,
}

/// Logs to stderr at `default_level` unless `RUST_LOG` says otherwise, in
/// `format`. Text is coloured only on a terminal, so that a pod's log
/// (a pipe) holds no escape codes.
pub fn init_logging(default_level: &str, format: LogFormat) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| default_level.into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .init(),
    }
}

/// A token that is cancelled on the first SIGINT or SIGTERM.
pub fn shutdown_on_signal() -> std::io::Result<CancellationToken> {
    let token = CancellationToken::new();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let cancel = token.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        tracing::info!("signal received: shutting down");
        cancel.cancel();
    });
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_named_by_their_total_series_and_eof_goes() {
        let openmetrics = "# HELP x_requests Requests.\n# TYPE x_requests counter\nx_requests_total{verb=\"a\"} 3\n# HELP x_open Open.\n# TYPE x_open gauge\nx_open 2\n# EOF\n";
        assert_eq!(
            prometheus_text(openmetrics),
            "# HELP x_requests_total Requests.\n# TYPE x_requests_total counter\nx_requests_total{verb=\"a\"} 3\n# HELP x_open Open.\n# TYPE x_open gauge\nx_open 2\n"
        );
    }
}
