//! PMIx client calls as xpushmem's PMIx bootstrap makes them (`shmem/src/bootstrap/pmix.rs`), generated at build
//! time by bindgen from a C shim (`csrc/shim.{h,c}`) compiled against the system's PMIx headers (Debian's
//! `libpmix-dev`). The shim hides PMIx's value and info structures behind functions over plain C types and opens
//! libpmix with `dlopen` on first use ([`load`]), so nothing links against it and a program that never runs under a
//! PMIx server never loads it.
//!
//! Without the headers the crate is empty ([`AVAILABLE`] is `false`) and dependents build without the PMIx
//! bootstrap; they learn it at build time from the `links` metadata `DEP_PMIX_AVAILABLE` (`1` or `0`).
//! No logic lives here.

/// Whether this build found PMIx's headers (the bindings below exist).
pub const AVAILABLE: bool = cfg!(pmix_sys_available);

#[cfg(pmix_sys_available)]
#[allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    dead_code,
    missing_docs,
    unsafe_op_in_unsafe_fn,
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    clippy::pedantic
)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
}

#[cfg(pmix_sys_available)]
pub use generated::*;

/// PMIx's `PMIX_RANK_WILDCARD` (the rank of a job's own attributes).
pub const RANK_WILDCARD: u32 = u32::MAX - 1;

/// Loads libpmix (`dlopen("libpmix.so.2")`) once per process; every `xpmix_` call but `xpmix_error_string` needs it
/// to have succeeded. The error says why it could not be loaded.
#[cfg(pmix_sys_available)]
pub fn load() -> Result<(), String> {
    // SAFETY: xpmix_load takes no arguments, is thread-safe (a mutex in the shim) and returns null or a pointer to
    // a NUL-terminated message in a static buffer that is written once, before the first failing return.
    let e = unsafe { xpmix_load() };
    if e.is_null() {
        Ok(())
    } else {
        // SAFETY: see above.
        Err(unsafe { std::ffi::CStr::from_ptr(e) }
            .to_string_lossy()
            .into_owned())
    }
}
