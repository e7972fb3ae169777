//! The lab's web view on this machine's loopback: the collector serves it
//! inside the lab's control host, which a browser on this machine cannot
//! reach by name; the demo opens a direct link to that host and forwards
//! a loopback port to the collector's HTTP port, so that the demo prints
//! one address that works in both modes.

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// Forwards every connection to `listener` to `to` until `shutdown`.
pub async fn forward(listener: TcpListener, to: SocketAddr, shutdown: CancellationToken) {
    loop {
        let (mut client, _) = tokio::select! {
            () = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    tracing::warn!(%err, "web view forwarder: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let Ok(mut collector) = TcpStream::connect(to).await else {
                return;
            };
            tokio::select! {
                () = shutdown.cancelled() => {}
                _ = tokio::io::copy_bidirectional(&mut client, &mut collector) => {}
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn bytes_go_both_ways() {
        let server = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let to = server.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut stream, _) = server.accept().await.unwrap();
            let mut asked = [0u8; 4];
            stream.read_exact(&mut asked).await.unwrap();
            stream
                .write_all(&asked.map(|b| b.to_ascii_uppercase()))
                .await
                .unwrap();
        });
        let front = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = front.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        tokio::spawn(forward(front, to, shutdown.clone()));
        let mut client = TcpStream::connect(at).await.unwrap();
        client.write_all(b"ping").await.unwrap();
        let mut answer = [0u8; 4];
        client.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"PING");
        shutdown.cancel();
    }
}
