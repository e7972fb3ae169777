//! `netaware throughput serve|run`: one throughput test by hand, like
//! `iperf3 -s` and `iperf3 -c`, with the agents' own server and client. The
//! token that the collector would issue is given on both sides instead.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use netaware_agent::throughput::client::{self, Plan};
use netaware_agent::throughput::server::{ServerHandle, bind};
use netaware_agent::throughput::tokens::Expected;
use netaware_agent::throughput::wire::Token;
use netaware_runtime::clock::now_ms;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

/// The two halves of a hand-run test.
#[derive(Debug, clap::Subcommand)]
pub enum ThroughputCommand {
    /// Accept one test that presents TOKEN, then keep listening until the
    /// token expires or Ctrl-C.
    Serve {
        /// Address and port to listen on.
        #[arg(long, default_value = "0.0.0.0:7471")]
        listen: SocketAddr,
        /// 32 hex digits that the client must present.
        #[arg(long)]
        token: String,
        /// Accept the token only from this client address.
        #[arg(long)]
        from: Option<IpAddr>,
        /// How long the token stays valid.
        #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
        valid: Duration,
        /// SO_RCVBUF in bytes (default: kernel tuning).
        #[arg(long)]
        buffer: Option<u32>,
    },
    /// Send to a server for a warm-up and a measured part; print the
    /// receiver's goodput.
    Run {
        /// The server's address and port.
        #[arg(long)]
        server: SocketAddr,
        /// 32 hex digits, as given to the server.
        #[arg(long)]
        token: String,
        /// Measured part.
        #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
        duration: Duration,
        /// Warm-up, left out of the result.
        #[arg(long, default_value = "500ms", value_parser = humantime::parse_duration)]
        omit: Duration,
        /// Parallel TCP streams.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=16))]
        streams: u8,
        /// SO_SNDBUF in bytes (default: kernel tuning).
        #[arg(long)]
        buffer: Option<u32>,
        /// Local address to send from.
        #[arg(long)]
        source: Option<IpAddr>,
        /// How to print the result: a line for people, or JSON or YAML.
        #[command(flatten)]
        output: crate::output::OutputArgs,
    },
}

/// Runs the subcommand.
pub async fn run(command: ThroughputCommand, shutdown: CancellationToken) -> anyhow::Result<()> {
    match command {
        ThroughputCommand::Serve {
            listen,
            token,
            from,
            valid,
            buffer,
        } => {
            let token = parse_token(&token)?;
            let listener = bind(listen, buffer.map(|b| b as usize))
                .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
            let server = ServerHandle::new();
            let now = now_ms();
            let valid_ms = u64::try_from(valid.as_millis()).unwrap_or(u64::MAX);
            server.expect(Expected {
                token,
                client: from,
                not_before: now,
                expires: now.saturating_add(valid_ms),
            })?;
            server.serve(listener, shutdown.clone());
            eprintln!(
                "listening on {listen} for {}",
                humantime::format_duration(valid)
            );
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = tokio::time::sleep(valid) => {}
            }
            shutdown.cancel();
            Ok(())
        }
        ThroughputCommand::Run {
            server,
            token,
            duration,
            omit,
            streams,
            buffer,
            source,
            output,
        } => {
            let plan = Plan {
                server,
                source,
                token: parse_token(&token)?,
                streams,
                omit,
                duration,
                send_buffer: buffer,
            };
            let started = Instant::now();
            let outcome = client::run(&plan)
                .await
                .map_err(|e| anyhow::anyhow!("throughput test to {server} failed: {e}"))?;
            let report = ThroughputJson::new(server, &outcome, started.elapsed());
            output.print(&report, |_| format!("{report}\n"))
        }
    }
}

fn parse_token(hex: &str) -> anyhow::Result<Token> {
    let bad = || anyhow::anyhow!("the token must be 32 hex digits");
    if hex.len() != 32 || !hex.is_ascii() {
        return Err(bad());
    }
    let mut token = [0u8; 16];
    for (i, byte) in token.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_32_hex_digits() {
        let token = parse_token("00112233445566778899aabbccddeeff").unwrap();
        assert_eq!(token[0], 0x00);
        assert_eq!(token[15], 0xff);
        assert!(parse_token("0011").is_err());
        assert!(parse_token("zz112233445566778899aabbccddeeff").is_err());
        assert!(parse_token("é0112233445566778899aabbccddeef").is_err());
    }
}

/// `throughput run --json`: one hand-run throughput test.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThroughputJson {
    /// The server's address and port.
    pub server: String,
    /// Receiver goodput over the measured part, bit/s.
    pub goodput_bps: f64,
    /// Bytes the receiver counted in the measured part.
    pub bytes: u64,
    /// Length of the measured part (s), as the receiver timed it.
    pub measured_s: f64,
    /// Wall time of the whole test (s): connecting, warm-up, measured part
    /// and result.
    pub elapsed_s: f64,
    /// Retransmitted segments over the sender's streams, null when the
    /// kernel does not say.
    pub retransmits: Option<u32>,
    /// Smoothed TCP RTT (ms), mean over the sender's streams.
    pub tcp_rtt_ms: Option<f64>,
    /// Parallel streams.
    pub streams: u8,
}

impl ThroughputJson {
    /// The report of a finished test.
    pub fn new(
        server: std::net::SocketAddr,
        outcome: &netaware_agent::throughput::Outcome,
        elapsed: std::time::Duration,
    ) -> Self {
        Self {
            server: server.to_string(),
            goodput_bps: outcome.goodput_bps,
            bytes: outcome.bytes,
            measured_s: outcome.measured.as_secs_f64(),
            elapsed_s: elapsed.as_secs_f64(),
            retransmits: outcome.retransmits,
            tcp_rtt_ms: outcome.tcp_rtt_ms,
            streams: outcome.streams,
        }
    }
}

impl std::fmt::Display for ThroughputJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {:.1} Mbit/s over {:.2} s ({} streams, {} bytes",
            self.server,
            self.goodput_bps / 1e6,
            self.measured_s,
            self.streams,
            self.bytes
        )?;
        if let (Some(retransmits), Some(rtt)) = (self.retransmits, self.tcp_rtt_ms) {
            write!(f, ", {retransmits} retransmits, TCP RTT {rtt:.2} ms")?;
        }
        write!(f, "; test took {:.2} s)", self.elapsed_s)
    }
}
