//! The demo on the lab: the topology's hosts in network namespaces, the
//! collector in the control host, an agent in every other host, each a real
//! `netaware` process, all talking over the emulated links.

use anyhow::Context;
use netaware_lab::Topology;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{DemoOptions, DemoSystem, Progress, watch_and_report};
use crate::lab_system::{AgentTiming, LabSystem};

/// Runs the demo on the lab until the duration ends or `shutdown`.
pub async fn run(options: DemoOptions, shutdown: CancellationToken) -> anyhow::Result<()> {
    let deadline = options.duration.map(|d| Instant::now() + d);
    let topology = Topology::load(&options.topology)?;
    println!(
        "\n== Topology {:?}\n{}",
        options.topology,
        topology.describe()
    );
    let exe = std::env::current_exe().context("finding the netaware binary")?;
    let timing = AgentTiming {
        interval: options.interval,
        window: options.window,
        probe_timeout: options.interval.min(std::time::Duration::from_secs(1)),
    };
    let largest_zone = topology
        .zones
        .iter()
        .map(|z| z.hosts.len())
        .max()
        .unwrap_or(1);
    let flags = options.collector_flags();
    let system = tokio::task::block_in_place(|| LabSystem::start(topology, &exe, timing, &flags))?;
    let control = system.lab().control().clone();
    println!(
        "collector: {} in host {} (namespace {}); {} agents, probing every {:?}, windows of {:?}",
        system.url(),
        control.spec.name,
        control.namespace,
        system.lab().workers().count(),
        options.interval,
        options.window
    );
    show_web_view(&system, options.metrics_listen, &shutdown).await;
    let hint = format!(
        "sudo ip netns exec {} {} matrix --collector {}",
        control.namespace,
        exe.display(),
        system.url()
    );
    let mut demo = OnLab { system };
    let job_size = options.job_size.unwrap_or(largest_zone);
    let throughput = options.throughput_budget > 0.0;
    watch_and_report(&mut demo, job_size, throughput, deadline, &hint, &shutdown).await?;
    // Dropping the lab stops the processes and removes the namespaces.
    tokio::task::block_in_place(|| drop(demo));
    println!("demo stopped; lab removed");
    Ok(())
}

/// Forwards `listen` on this machine to the collector's HTTP port in the
/// control host, and says where the web view is; a port taken says so and
/// gives the control host's own address instead.
async fn show_web_view(
    system: &LabSystem,
    listen: std::net::SocketAddr,
    shutdown: &CancellationToken,
) {
    let control = system.lab().control().spec.name.clone();
    let inside = match system.lab().open_access(&control) {
        Ok(address) => std::net::SocketAddr::new(address.into(), crate::lab_system::METRICS_PORT),
        Err(err) => {
            println!("no web view from this machine: {err}");
            return;
        }
    };
    match tokio::net::TcpListener::bind(listen).await {
        Ok(listener) => {
            tokio::spawn(super::forward::forward(listener, inside, shutdown.clone()));
            println!("web view: http://{listen}/ui/ (the collector's, forwarded from the lab)");
        }
        Err(err) => println!("web view: http://{inside}/ui/ ({listen} is taken: {err})"),
    }
}

struct OnLab {
    system: LabSystem,
}

impl DemoSystem for OnLab {
    async fn progress(&mut self) -> anyhow::Result<Progress> {
        let agents = self.system.lab().workers().count();
        // The collector may not be listening yet in the first second.
        Ok(match tokio::task::block_in_place(|| self.system.matrix()) {
            Ok(matrix) => Progress::of(&matrix, agents),
            Err(_) => Progress {
                expected: agents * (agents - 1),
                agents,
                ..Progress::default()
            },
        })
    }

    async fn report(&mut self, job_size: usize) -> anyhow::Result<String> {
        let system = &self.system;
        let topology = super::topology_when_ready(|| async {
            tokio::task::block_in_place(|| system.ask(&["topology"]))
        })
        .await;
        // The lab's planted faults (a lossy NIC, a slow link), named.
        let faults = super::answer_when(
            || async { tokio::task::block_in_place(|| system.ask(&["faults"])) },
            |text| !text.starts_with("no faults"),
            super::FAULTS_WAIT,
        )
        .await;
        tokio::task::block_in_place(|| {
            let zones = self.system.ask(&["zones"])?;
            let matrix = self.system.ask(&["matrix"])?;
            let size = job_size.to_string();
            let ranking = self.system.ask(&["rank", "--size", &size])?;
            let mut report = format!(
                "\n== Zones\n{zones}\n== Matrix\n{matrix}\n== Placement of a {job_size}-worker job\n{ranking}"
            );
            // Each further network (a rail) has a matrix and a placement
            // of its own.
            for network in &self.system.lab().topology().networks {
                let name = network.name.as_str();
                let matrix = self.system.ask(&["matrix", "--network", name])?;
                let ranking = self
                    .system
                    .ask(&["rank", "--network", name, "--size", &size])?;
                report.push_str(&format!(
                    "\n== Matrix of network {name}\n{matrix}\n== Placement of a {job_size}-worker job by network {name}\n{ranking}"
                ));
            }
            report.push_str(&format!("\n== Measured topology\n{topology}"));
            report.push_str(&format!("\n== Faults\n{faults}"));
            Ok(report)
        })
    }

    async fn heat_map(&mut self, path: &std::path::Path) -> anyhow::Result<()> {
        let path = path.to_str().context("the heat map's path is not UTF-8")?;
        tokio::task::block_in_place(|| {
            self.system
                .ask(&["matrix", "--format", "svg", "--file", path])
                .map(drop)
        })
    }
}
