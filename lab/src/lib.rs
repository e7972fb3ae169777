//! The lab: test hosts in network namespaces, grouped in zones and regions,
//! joined by a user-space link emulator with exact per-pair delay, jitter,
//! loss and rate.
//!
//! This kernel has no netem qdisc, so the emulator moves the packets itself:
//! every host gets a TUN device, moved into its namespace, and one thread of
//! this process reads each packet from the sender's TUN device, applies the
//! pair's profile ([`link`]) and writes it into the receiver's device when
//! its time comes ([`emulator`]). Anything addressed outside the lab is
//! dropped. Hosts have addresses in 198.18.0.0/15, the range RFC 2544 sets
//! aside for benchmarks, and the root namespace has no route to them.
//!
//! - [`topology`]: the file format, the shipped topologies, the paths.
//! - [`link`]: one direction of a link, pure.
//! - [`tun`], [`netns`]: the kernel plumbing.
//! - [`emulator`]: the forwarding thread, and [`lateness`]: how late it
//!   let each link's packets go; [`fitness`]: when that leaves a reading
//!   fit to judge, and how repeated readings decide.
//! - [`forger`]: a host that answers echo requests ahead of time, and
//!   [`lying_reflector`]: a STAMP reflector that claims false holds, for
//!   the tests of what a lying node can do.
//! - [`wire_ping`]: ping timed on the wire by tcpdump, the reference the
//!   agents' round trips are held to.
//! - [`Lab`]: starts all of it and removes it again on drop; namespaces
//!   left behind by a process that died are removed at the next start.

pub mod emulator;
pub mod fitness;
pub mod forger;
mod lab;
pub mod lateness;
pub mod link;
pub mod lying_reflector;
pub mod netns;
pub mod topology;
pub mod tun;
pub mod wire_ping;

pub use lab::{Lab, LabError, LabHost, is_root, root_or_skip};
pub use topology::{Families, Faults, LinkProfile, Topology};
