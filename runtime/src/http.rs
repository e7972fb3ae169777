//! Serving an HTTP router, over plain HTTP or over HTTPS, until shutdown:
//! the one way every netaware endpoint that is not gRPC (/metrics,
//! /healthz, the scheduler extender's verbs) is served, so that TLS and
//! draining behave the same on all of them.
//!
//! axum's own `serve` speaks plain HTTP only; with TLS each accepted
//! connection goes through a rustls handshake first (bounded in time, so a
//! client that connects and says nothing holds no task for long) and is
//! then served by hyper like axum would.

use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The HTTPS set-up of an HTTP endpoint (see [`crate::tls::HttpTlsArgs`]).
pub type HttpsConfig = Arc<rustls::ServerConfig>;

/// How long a client has to finish the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long open connections get to finish after shutdown starts.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves `app` on `listener` until `shutdown`: over HTTPS with `tls`,
/// else plain HTTP.
pub async fn serve(
    listener: TcpListener,
    app: axum::Router,
    tls: Option<HttpsConfig>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    match tls {
        None => {
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown.cancelled_owned())
                .await
        }
        Some(config) => serve_tls(listener, app, config, shutdown).await,
    }
}

async fn serve_tls(
    listener: TcpListener,
    app: axum::Router,
    config: HttpsConfig,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let graceful = GracefulShutdown::new();
    loop {
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of descriptors and the like: wait rather than spin.
                    tracing::warn!(%err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let acceptor = acceptor.clone();
        let app = app.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let stream =
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                    Ok(Ok(stream)) => stream,
                    Ok(Err(err)) => {
                        tracing::debug!(%peer, %err, "TLS handshake refused");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "TLS handshake timed out");
                        return;
                    }
                };
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HANDSHAKE_TIMEOUT)
                .serve_connection(TokioIo::new(stream), TowerToHyperService::new(app));
            if let Err(err) = watcher.watch(connection).await {
                tracing::debug!(%peer, %err, "HTTPS connection ended with an error");
            }
        });
    }
    // Connections in flight finish their request; idle keep-alive ones
    // close. One that will not is cut off after the drain timeout.
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await;
    Ok(())
}
