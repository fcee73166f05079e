//! The fabric suites: libfabric tcp on loopback, device heaps over the fabric, node-aware collectives over simulated
//! nodes, network namespaces and the fabric's security (mpirun across namespaces is in the `mpi` binary).
//!
//! One module per suite; a multi-PE test's PEs re-run this binary with the test's full name (`module::case`).

mod coll_nodeaware;
#[path = "../device/device_checks.rs"]
mod device_checks;
mod fabric;
mod fabric_common;
mod fabric_device;
mod fabric_device_ops;
mod fabric_ep;
mod fabric_netns;
mod security_fabric;
