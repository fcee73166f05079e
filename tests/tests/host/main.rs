//! The host suites: RMA, atomics, signals, sync, memory, errors, mismatched collectives, teams and the collectives,
//! on every transport (shared memory, the deferred test transport, the fabric on loopback, device heaps).
//!
//! One module per suite; a multi-PE test's PEs re-run this binary with the test's full name (`module::case`).

mod amo;
mod coll_alltoall;
mod coll_barrier;
mod coll_broadcast;
mod coll_collect;
mod coll_common;
mod coll_reduce;
mod coll_scan;
mod errors;
mod memory;
mod mismatch;
mod regbuf;
mod rma;
mod signal;
mod sync;
mod teams;
