//! The platform layer's device side: the hardware abstraction for Level Zero ([`ze`]). Only this layer (with
//! `sys/` and, in phase 2, `net/`) holds `unsafe` code; what sits above validates and calls it.

#[cfg(xpushmem_fabric)]
pub(crate) mod ring;
pub(crate) mod ze;
