//! The netaware testbed: what proves the product and is not shipped with
//! it. Its binary, `netaware-testbed`, is built beside `netaware` but is not
//! in the production image, so that the plotting, the simulator and the
//! load generator add nothing to what runs on a cluster.
//!
//! - [`evaluate`]: does netaware's placement make training faster? Real
//!   training traffic on the lab, and a cluster simulator (EVALUATION.md).
//! - [`workload`]: one worker of a data-parallel training job's traffic,
//!   over real TCP (what `evaluate lab` runs in each host).
//! - [`loadgen`]: many simulated agents over real gRPC against one
//!   collector, reporting its throughput, ack latency and memory
//!   (BENCHMARKS.md).

pub mod evaluate;
pub mod loadgen;
pub mod workload;
