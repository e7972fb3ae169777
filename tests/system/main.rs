//! The system on this machine without a lab: real collectors, agents,
//! extenders and CLIs over real gRPC and HTTP on loopback, the manifests
//! against the Kubernetes schemas, and the property tests over untrusted
//! input. One test binary, one module per concern; tests that need root
//! (raw ICMP on loopback) skip without it, and fail instead under
//! `NETAWARE_REQUIRE_ROOT=1`, as in CI.

mod agent_tokens;
mod bad_input;
mod cli;
mod connections;
mod end_to_end;
mod extender;
mod manifests;
mod node_places;
mod operations;
mod outage;
mod robustness;
mod state;
mod tls;
mod transports;
mod two_agents;
mod watch;
mod web;
