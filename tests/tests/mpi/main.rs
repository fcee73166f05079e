//! The suites that run under Open MPI's `mpirun` with the MPI bootstrap (feature `mpi`): the bootstrap itself at 2
//! and 4 PEs, and mpirun across two network namespaces (routes, peer death, the examples). A binary of their own,
//! built only with the feature (`required-features`), so that the suite's MPI phase compiles these and not the
//! whole reliability and fabric suites a second time.
//!
//! One module per suite; a multi-PE test's PEs re-run this binary with the test's full name (`module::case`).

// The fabric suites' shared helpers (network namespaces, the node layout); these suites use a part of them.
#[allow(dead_code)]
#[path = "../fabric/fabric_common/mod.rs"]
mod fabric_common;
mod fabric_mpirun;
mod mpi_bootstrap;
