//! The `netaware` command line, what an operator runs: one file per
//! command in [`commands`], from the services (`agent`, `collector`,
//! `scheduler`) to the questions asked of a running collector (`matrix`,
//! `zones`, `estimate`, `rank`, `explain`, `topology`) and the tools
//! (`publish-topology`, `certs`, `throughput`).
//!
//! With the `lab` feature (on by default, off in the image that clusters
//! run), `demo` runs the whole system on this machine and `lab` keeps a
//! lab up ([`lab_system`] starts the system on a lab, for the demo and the
//! lab tests). The evaluation, the load generator and the training
//! workload are not here: they live in the `netaware-testbed` crate.
//!
//! [`client`] talks to the collector, [`output`] holds the output flags
//! and [`render`] the tables for people. The `-o json` contracts
//! ([`json`]) and the heat map ([`heatmap`]) live in `netaware-views`,
//! which the collector's web view shares: a figure looks the same on the
//! command line and in a browser.

pub mod client;
pub mod commands;
pub use netaware_views::{heatmap, json};
#[cfg(feature = "lab")]
pub mod lab_system;
pub mod output;
pub mod render;

/// The name kubectl runs a plugin by: installed (or linked) as
/// `kubectl-netaware` on the PATH, this binary is `kubectl netaware`.
pub const KUBECTL_PLUGIN: &str = "kubectl-netaware";

/// Network-aware placement for distributed training.
#[derive(Debug, clap::Parser)]
#[command(name = "netaware", version)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: commands::Command,
    /// How logs are written.
    #[command(flatten)]
    pub logs: netaware_runtime::LogArgs,
}

impl Cli {
    /// The command line this process was started with; run as the kubectl
    /// plugin, its help and errors name it `kubectl netaware`.
    pub fn from_invocation() -> Self {
        use clap::{CommandFactory, FromArgMatches};
        let invoked = std::env::args_os().next().unwrap_or_default();
        let as_plugin = std::path::Path::new(&invoked)
            .file_name()
            .is_some_and(|name| name == KUBECTL_PLUGIN);
        let mut command = Self::command();
        if as_plugin {
            command = command.bin_name("kubectl netaware");
        }
        let matches = command.get_matches();
        Self::from_arg_matches(&matches).unwrap_or_else(|err| err.exit())
    }
}
