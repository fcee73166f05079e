//! The ops crate's suites: alltoall, tiles, errors, expert-parallel dispatch/combine (host), and the same ops on device queues (ze-emu).
//!
//! One module per suite; a multi-PE test's PEs re-run this binary with the test's full name (`module::case`).

mod ops_a2a;
mod ops_common;
mod ops_device;
mod ops_ep;
mod ops_ep_dev;
mod ops_ep_ref;
mod ops_errors;
mod ops_tile;
