//! shell
pub use xpushmem_ffi_core;
