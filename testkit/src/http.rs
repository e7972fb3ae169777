//! Plain HTTP/1.1 requests on fresh connections, and the extender served
//! on loopback.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// POSTs `body` over a fresh HTTP/1.1 connection; returns (status, body),
/// status 0 when nothing answered.
pub async fn post(addr: std::net::SocketAddr, path: &str, body: &[u8]) -> (u16, String) {
    request(addr, "POST", path, body).await
}

/// GETs `path` over a fresh HTTP/1.1 connection; returns (status, body),
/// status 0 when nothing answered.
pub async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    request(addr, "GET", path, b"").await
}

async fn request(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    body: &[u8],
) -> (u16, String) {
    // Nobody listening (a server starting or gone): no status.
    let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else {
        return (0, String::new());
    };
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: extender\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // A server may refuse a large body before reading all of it.
    let _ = stream.write_all(body).await;
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response).await;
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// Serves the extender's routes on an ephemeral loopback port until
/// `shutdown`; returns the address.
pub async fn serve_extender(
    extender: std::sync::Arc<netaware_scheduler::server::Extender>,
    shutdown: &CancellationToken,
) -> std::net::SocketAddr {
    serve_extender_on("127.0.0.1:0".parse().unwrap(), extender, shutdown).await
}

/// Serves the extender's routes on `addr` until `shutdown`; returns the
/// address bound.
pub async fn serve_extender_on(
    addr: std::net::SocketAddr,
    extender: std::sync::Arc<netaware_scheduler::server::Extender>,
    shutdown: &CancellationToken,
) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = netaware_scheduler::server::router(extender);
    tokio::spawn(
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.clone().cancelled_owned())
            .into_future(),
    );
    addr
}
