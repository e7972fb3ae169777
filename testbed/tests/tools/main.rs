//! The testbed's tools, short versions of what the benchmarks and the
//! evaluation run in full: the evaluation on the lab and in the simulator,
//! the load generator against a real collector, and a scale test of the
//! collector and the extender together.

mod evaluation;
mod load;
mod scale;
