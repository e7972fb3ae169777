//! The load of the agent's node, from sysinfo: CPU, memory and the byte
//! counters of each network interface.

use netaware_proto::v1::{NicCounters, NodeStats};
use sysinfo::{MemoryRefreshKind, Networks, System};

/// Samples node statistics; keeps sysinfo's state between samples so that
/// CPU usage covers the time since the previous sample.
#[derive(Debug)]
pub struct NodeStatsSampler {
    system: System,
    networks: Networks,
}

impl NodeStatsSampler {
    /// A sampler primed for the first interval.
    pub fn new() -> Self {
        let mut system = System::new();
        system.refresh_cpu_usage();
        Self {
            system,
            networks: Networks::new_with_refreshed_list(),
        }
    }

    /// The statistics now.
    pub fn sample(&mut self) -> NodeStats {
        self.system.refresh_cpu_usage();
        self.system
            .refresh_memory_specifics(MemoryRefreshKind::nothing().with_ram());
        self.networks.refresh(true);
        let cpu = f64::from(self.system.global_cpu_usage()) / 100.0;
        let mut nics: Vec<NicCounters> = self
            .networks
            .iter()
            .map(|(name, data)| NicCounters {
                name: name.clone(),
                rx_bytes: data.total_received(),
                tx_bytes: data.total_transmitted(),
            })
            .collect();
        nics.sort_by(|a, b| a.name.cmp(&b.name));
        NodeStats {
            cpu_ratio: if cpu.is_finite() {
                cpu.clamp(0.0, 1.0)
            } else {
                0.0
            },
            memory_used_bytes: self.system.used_memory(),
            memory_total_bytes: self.system.total_memory(),
            nics,
        }
    }
}

impl Default for NodeStatsSampler {
    fn default() -> Self {
        Self::new()
    }
}
