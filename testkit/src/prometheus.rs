//! A real Prometheus for the tests: whether one is installed, and its
//! HTTP API.

use std::net::SocketAddr;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Whether the `prometheus` binary is here (see
/// [`have_tool`](crate::require::have_tool)).
pub fn available() -> bool {
    crate::require::have_tool("prometheus")
}

/// Runs `promtool check metrics` (Prometheus's own linter) on a /metrics
/// text and panics with its complaints. Without promtool it skips, unless
/// NETAWARE_REQUIRE_ROOT=1 (CI, where scripts/test installs it).
pub fn check_with_promtool(what: &str, text: &str) {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(err) => {
            assert!(
                std::env::var("NETAWARE_REQUIRE_ROOT").as_deref() != Ok("1"),
                "promtool is needed in CI: {err}"
            );
            eprintln!("skipping promtool check of {what}: {err}");
            return;
        }
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "promtool check metrics on {what}:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// GETs `path_and_query` from Prometheus and returns the JSON `data`
/// (HTTP/1.0, so that the answer is not chunked).
pub async fn prometheus_get(prometheus: SocketAddr, path_and_query: &str) -> Result<Value, String> {
    let mut stream = tokio::net::TcpStream::connect(prometheus)
        .await
        .map_err(|e| e.to_string())?;
    let head = format!("GET {path_and_query} HTTP/1.0\r\nHost: prometheus\r\n\r\n");
    stream
        .write_all(head.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .await
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&response);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let answer: Value = serde_json::from_str(body).map_err(|e| format!("{e}: {text}"))?;
    if answer["status"] != "success" {
        return Err(answer["error"].to_string());
    }
    Ok(answer["data"].clone())
}

/// Percent-encodes a query parameter.
pub fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The series an instant query returns.
pub async fn query(prometheus: SocketAddr, expr: &str) -> Result<Vec<Value>, String> {
    let data = prometheus_get(prometheus, &format!("/api/v1/query?query={}", encode(expr))).await?;
    Ok(data["result"].as_array().cloned().unwrap_or_default())
}
