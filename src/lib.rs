//! The `netaware` command line: `demo` runs the whole system on this
//! machine; `matrix`, `zones` and `rank` ask a running collector;
//! `throughput` runs one test by hand ([`throughput_command`]); `loadgen`
//! drives simulated agents against a collector ([`loadgen`]); `certs`
//! makes the certificates of deploy/tls ([`certs_command`]); `workload`
//! is one worker of a training job's traffic ([`workload`]) and `evaluate`
//! compares placements with it and with a cluster simulator ([`evaluate`]).
//!
//! [`client`] talks to the collector, [`json`] holds the `--json` contracts,
//! [`render`] the tables for people, and [`demo`] the in-process demo.

pub mod certs_command;
pub mod client;
pub mod demo;
pub mod evaluate;
pub mod json;
pub mod lab_command;
pub mod lab_system;
pub mod loadgen;
pub mod render;
pub mod throughput_command;
pub mod workload;
