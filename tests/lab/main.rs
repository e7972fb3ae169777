//! The system on the lab: hosts in network namespaces joined by emulated
//! links, every test alone (`netaware_testkit::one_lab_at_a_time`), since
//! they measure timing on two shared cores. Needs root: without it every
//! test skips, and under `NETAWARE_REQUIRE_ROOT=1` (CI) fails instead.

mod demo;
mod dual_stack;
mod faults;
mod filtered;
mod full_disk;
mod lying_node;
mod measurement;
mod observability;
mod one_placement;
mod overhead;
mod per_network;
mod rails;
mod recovery;
mod throughput_lab;
mod web_view;
