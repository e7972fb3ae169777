//! `netaware doctor`: the checks an operator runs after installing, each
//! one line with the fix ([`findings`], pure). Against the collector it
//! checks what the cluster shows (agents known, zone labels, stale nodes,
//! whether probes get through, which transports are filtered, agents'
//! versions and clocks against the collector's, whether an extender
//! follows); with
//! `--local`, run on a node, what the node lets the agent do (an ICMP echo
//! socket). Exits non-zero when
//! something blocks placement or leaves it blind.

pub mod findings;

use netaware_agent::icmp::{EchoAccess, echo_access};
use netaware_agent::icmp_packet::Family;
use serde::Serialize;

use super::Target;
use crate::json;
use crate::output::OutputArgs;
use findings::{EchoSocketSeen, Finding};

/// The flags of `doctor`.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    target: Target,
    #[command(flatten)]
    output: OutputArgs,
    /// Check this node (run it where the agent runs, with its privileges)
    /// instead of asking the collector.
    #[arg(long)]
    local: bool,
}

/// `doctor -o json`.
#[derive(Debug, Serialize)]
struct DoctorJson {
    /// Whether anything blocks placement or leaves it blind.
    failed: bool,
    findings: Vec<Finding>,
}

/// Runs the checks and prints them; an error when one fails.
pub async fn run(args: DoctorArgs) -> anyhow::Result<()> {
    let findings = if args.local {
        findings::node(&echo_socket_seen())
    } else {
        let mut collector = args.target.connect().await?;
        let wire = collector.matrix().await?;
        let matrix = json::MatrixJson::from(&wire);
        let zones = json::ZonesJson::from(&collector.zones().await?);
        let mut findings = findings::cluster(&matrix.nodes, &matrix.pairs, &zones);
        if !matrix.nodes.is_empty() {
            findings.extend(findings::agents(&matrix.nodes, &wire.collector_version));
        }
        findings.push(findings::followers(&wire.followers));
        findings
    };
    let failed = findings::any_failed(&findings);
    let report = DoctorJson { failed, findings };
    args.output.print(&report, |_| render(&report.findings))?;
    if failed {
        anyhow::bail!("a check failed: placement is blocked or blind to the network");
    }
    Ok(())
}

/// One line per finding, the fix after it.
fn render(findings: &[Finding]) -> String {
    findings
        .iter()
        .map(|f| {
            let fix = f
                .fix
                .as_deref()
                .map(|fix| format!(" -- fix: {fix}"))
                .unwrap_or_default();
            format!(
                "{:<4}  {}: {}{fix}\n",
                f.status.as_str(),
                f.check.as_str(),
                f.detail
            )
        })
        .collect()
}

fn echo_socket_seen() -> EchoSocketSeen {
    match echo_access(Family::V4) {
        EchoAccess::Raw => EchoSocketSeen::Raw,
        EchoAccess::Datagram { .. } => EchoSocketSeen::Datagram,
        EchoAccess::Neither {
            raw_refused,
            datagram_refused,
        } => EchoSocketSeen::Neither {
            raw: raw_refused.to_string(),
            datagram: datagram_refused.to_string(),
            ping_group_range: std::fs::read_to_string("/proc/sys/net/ipv4/ping_group_range")
                .ok()
                .map(|range| range.split_whitespace().collect::<Vec<_>>().join(" ")),
        },
    }
}
