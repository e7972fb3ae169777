//! `netaware`: the command line of netaware. See docs/cli.md for the JSON
//! contracts of `--json`.

use clap::{Parser, Subcommand};
use netaware::client::ScoresConnection;
use netaware::demo::{self, DemoOptions};
use netaware::{json, render};
use netaware_agent::cli::AgentArgs;
use netaware_collector::cli::CollectorArgs;
use netaware_scheduler::cli::SchedulerArgs;

/// The services' allocator (see the workspace manifest for why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Network-aware placement for distributed training.
#[derive(Debug, Parser)]
#[command(name = "netaware", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a node agent (the same as the netaware-agent binary).
    Agent(AgentArgs),
    /// Run the collector (the same as the netaware-collector binary).
    Collector(CollectorArgs),
    /// Run the kube-scheduler extender (the same as the netaware-scheduler
    /// binary).
    Scheduler(SchedulerArgs),
    /// Run the whole system on this machine: on the lab as root, else on loopback.
    Demo(DemoOptions),
    /// Build a lab (hosts in network namespaces, emulated links) and keep it up.
    Lab {
        /// A shipped topology (default, small, bench) or a YAML file.
        #[arg(long, default_value = "default")]
        topology: String,
        /// Remove the lab after this long; default: at Ctrl-C.
        #[arg(long, value_parser = humantime::parse_duration)]
        duration: Option<std::time::Duration>,
    },
    /// Run one throughput test by hand (server and client, like iperf3).
    #[command(subcommand)]
    Throughput(netaware::throughput_command::ThroughputCommand),
    /// Make a CA and the collector's, extender's and nodes' certificates
    /// for deploy/tls.
    Certs(netaware::certs_command::CertsOptions),
    /// Print the node pair matrix (measured pairs), page by page.
    Matrix {
        #[command(flatten)]
        target: Target,
        /// Only this zone: its nodes and the pairs between them.
        #[arg(long)]
        zone: Option<String>,
        /// Only this node: it, its peers and its pairs both ways.
        #[arg(long)]
        node: Option<String>,
        /// Draw the pairs as a heat map in this format (to --output)
        /// instead of printing them.
        #[arg(long, value_enum, requires = "output")]
        format: Option<netaware::heatmap::ImageFormat>,
        /// What the heat map's cells show.
        #[arg(long, value_enum, default_value = "quality")]
        metric: netaware::heatmap::Metric,
        /// The heat map's file.
        #[arg(short, long, requires = "format")]
        output: Option<std::path::PathBuf>,
    },
    /// Print zones and zone-pair aggregates.
    Zones {
        #[command(flatten)]
        target: Target,
    },
    /// The RTT of a pair, or of a node to every other: measured where an
    /// agent probes it, else estimated (network coordinates, else zone
    /// averages), each with its basis.
    Estimate {
        #[command(flatten)]
        target: Target,
        /// The probing node.
        #[arg(long)]
        src: String,
        /// The probed node; default: every other node.
        #[arg(long)]
        dst: Option<String>,
    },
    /// The measured topology: each zone's blocks of close nodes, the
    /// degraded nodes, the costs between zones and regions; with --format,
    /// the objects that carry it to node labels, Kueue, Volcano or Diktyo,
    /// as YAML.
    Topology {
        #[command(flatten)]
        target: Target,
        /// Print these objects as YAML (for review, or `kubectl apply
        /// --server-side -f -`).
        #[arg(long, value_enum)]
        format: Option<netaware_publish::Format>,
        #[command(flatten)]
        render: netaware::topology_command::RenderArgs,
    },
    /// Keep the measured topology applied to a cluster as node labels,
    /// Kueue, Volcano or Diktyo objects (server-side apply, field manager
    /// netaware), until SIGINT or SIGTERM.
    PublishTopology(netaware::topology_command::PublishArgs),
    /// What the extender would decide now for a job, and why: the zone,
    /// the next worker's node, each candidate's score and what holds it
    /// back, the nodes that may not take a worker.
    Explain {
        #[command(flatten)]
        target: Target,
        /// The job by name, `[NAMESPACE/]NAME`: its size and placed workers
        /// read from the Kubernetes API (its pods, by their job labels).
        #[arg(long, conflicts_with_all = ["size", "peers"])]
        job: Option<String>,
        /// Workers in the job.
        #[arg(long, required_unless_present = "job")]
        size: Option<usize>,
        /// A node where a worker already runs (repeat for more).
        #[arg(long = "peer")]
        peers: Vec<String>,
    },
    /// Rank nodes for a job of K workers.
    Rank {
        #[command(flatten)]
        target: Target,
        /// Workers in the job.
        #[arg(long)]
        size: usize,
        /// A node where a worker already runs (repeat for more).
        #[arg(long = "peer")]
        peers: Vec<String>,
    },
}

#[derive(Debug, clap::Args)]
struct Target {
    /// Collector URL.
    #[arg(
        long,
        env = "NETAWARE_COLLECTOR",
        default_value = "http://127.0.0.1:7470"
    )]
    collector: String,
    /// Print JSON for programs instead of a table.
    #[arg(long)]
    json: bool,
    /// TLS towards the collector.
    #[command(flatten)]
    tls: netaware_runtime::tls::TlsArgs,
}

/// Prints `value` as JSON for programs, or `table` for people.
fn print_answer(
    json: bool,
    value: impl serde::Serialize,
    table: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!("{}", table());
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let command = Cli::parse().command;
    // The services log what they do; the tools only warn.
    netaware_runtime::init_logging(match command {
        Command::Agent(_)
        | Command::Collector(_)
        | Command::Scheduler(_)
        | Command::PublishTopology(_) => "info",
        _ => "warn",
    });
    match command {
        Command::Agent(args) => Ok(netaware_agent::run_until_signal(args.config().await?).await?),
        Command::Collector(args) => {
            Ok(netaware_collector::run_until_signal(args.config().await?).await?)
        }
        Command::Scheduler(args) => {
            Ok(netaware_scheduler::cli::run(args, netaware_runtime::shutdown_on_signal()?).await?)
        }
        Command::Lab { topology, duration } => {
            netaware::lab_command::run(&topology, duration, netaware_runtime::shutdown_on_signal()?)
                .await
        }
        Command::Demo(options) => demo::run(options, netaware_runtime::shutdown_on_signal()?).await,
        Command::Throughput(command) => {
            netaware::throughput_command::run(command, netaware_runtime::shutdown_on_signal()?)
                .await
        }
        Command::Certs(options) => {
            let report = netaware::certs_command::run(&options)?;
            if options.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!(
                    "{}",
                    netaware::certs_command::render(&report, &options.namespace)
                );
            }
            Ok(())
        }
        Command::Matrix {
            target,
            zone,
            node,
            format,
            metric,
            output,
        } => {
            let title = match (&zone, &node) {
                (Some(zone), _) => format!("zone {zone}"),
                (None, Some(node)) => format!("node {node}"),
                (None, None) => "all nodes".to_owned(),
            };
            let request = netaware_proto::v1::MatrixRequest {
                zone: zone.unwrap_or_default(),
                node: node.unwrap_or_default(),
                ..Default::default()
            };
            let mut scores =
                ScoresConnection::connect_with(&target.collector, target.tls.load()?.as_ref())
                    .await?;
            if let (Some(format), Some(output)) = (format, output) {
                let matrix = scores.matrix_of(&request).await?;
                netaware::heatmap::write(&matrix, metric, format, &title, &output)?;
                eprintln!("wrote {}", output.display());
                Ok(())
            } else if target.json {
                // Streamed: printed as the pages come, whatever the size.
                let mut writer =
                    json::MatrixJsonWriter::new(std::io::BufWriter::new(std::io::stdout()));
                scores
                    .matrix_pages(&request, |page| writer.page(&page))
                    .await?;
                Ok(writer.finish()?)
            } else {
                let matrix = scores.matrix_of(&request).await?;
                print!("{}", render::matrix(&matrix));
                Ok(())
            }
        }
        Command::Zones { target } => {
            let zones =
                ScoresConnection::connect_with(&target.collector, target.tls.load()?.as_ref())
                    .await?
                    .zones()
                    .await?;
            print_answer(target.json, json::ZonesJson::from(&zones), || {
                render::zones(&zones)
            })
        }
        Command::Estimate { target, src, dst } => {
            let estimate =
                ScoresConnection::connect_with(&target.collector, target.tls.load()?.as_ref())
                    .await?
                    .estimate(&src, dst.as_deref())
                    .await?;
            print_answer(target.json, json::EstimateJson::from(&estimate), || {
                render::estimate(&estimate)
            })
        }
        Command::Topology {
            target,
            format,
            render: names,
        } => {
            let mut scores =
                ScoresConnection::connect_with(&target.collector, target.tls.load()?.as_ref())
                    .await?;
            let (topology, observed) = netaware::topology_command::fetch(&mut scores).await?;
            if let Some(format) = format {
                let objects = netaware_publish::render(&topology, format, &names.options());
                print!("{}", netaware_publish::objects::to_yaml(&objects)?);
                return Ok(());
            }
            let answer = json::TopologyJson::new(&topology, observed);
            print_answer(target.json, &answer, || render::topology(&answer))
        }
        Command::PublishTopology(args) => {
            netaware::topology_command::publish(args, netaware_runtime::shutdown_on_signal()?).await
        }
        Command::Explain {
            target,
            job,
            size,
            peers,
        } => {
            use netaware::explain_command::{self as explain, ExplainJson};
            let (size, placed) = match job {
                Some(job) => {
                    let client = kube::Client::try_default().await.map_err(|err| {
                        anyhow::anyhow!("--job reads the job's pods from the Kubernetes API: {err}")
                    })?;
                    explain::job_from_pods(&explain::job_pods(client, &job).await?)
                }
                None => (size.unwrap_or(1), peers),
            };
            anyhow::ensure!(size >= 1, "--size must be at least 1");
            let ranking =
                ScoresConnection::connect_with(&target.collector, target.tls.load()?.as_ref())
                    .await?
                    .rank(size, &placed)
                    .await?;
            let answer = ExplainJson::new(size, placed, &ranking);
            print_answer(target.json, &answer, || explain::render(&answer))
        }
        Command::Rank {
            target,
            size,
            peers,
        } => {
            anyhow::ensure!(size >= 1, "--size must be at least 1");
            let ranking =
                ScoresConnection::connect_with(&target.collector, target.tls.load()?.as_ref())
                    .await?
                    .rank(size, &peers)
                    .await?;
            print_answer(target.json, json::RankJson::from(&ranking), || {
                render::rank(&ranking, size)
            })
        }
    }
}
