//! The Level Zero device suites on ze-emu: device heaps, the device library in kernels, symmetric kernels, concurrent
//! launches.
//!
//! One module per suite; a multi-PE test's PEs re-run this binary with the test's full name (`module::case`).

mod device;
mod device_checks;
mod device_concurrent;
mod device_lib;
mod on_queue;
mod symm_kernels;
