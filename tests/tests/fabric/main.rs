//! The fabric suites: libfabric tcp on loopback, device heaps over the fabric, node-aware collectives over simulated
//! nodes, network namespaces, the fabric's security, and mpirun across namespaces (feature `mpi`).
//!
//! One module per suite; a multi-PE test's PEs re-run this binary with the test's full name (`module::case`).

mod coll_nodeaware;
mod fabric;
mod fabric_common;
mod fabric_device;
mod fabric_device_ops;
mod fabric_ep;
mod fabric_mpirun;
mod fabric_netns;
mod security_fabric;
