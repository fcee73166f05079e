//! Reliability and security of a job: peer death, the bootstrap's and the launcher's security, the PMIx bootstrap
//! under mpirun (the MPI bootstrap's suite is in the `mpi` binary).
//!
//! One module per suite; a multi-PE test's PEs re-run this binary with the test's full name (`module::case`).

mod pmix_bootstrap;
mod reliability_peer_death;
mod security_boot;
mod security_launch;
