//! libfabric's C API as xpushmem uses it, generated at build time by bindgen from the system's headers
//! (Debian's `libfabric-dev`), as `xfi_*` functions: a C shim giving a linkable symbol to each of libfabric's
//! static-inline calls (`fi_write`, `fi_atomic`, `fi_cq_read`, ... are inline wrappers over per-object ops tables)
//! and forwarding the exported ones (`xfi_getinfo`, ...) to libfabric loaded at run time by [`load`]. Nothing
//! links against libfabric: a process that never uses the fabric never loads it or its provider libraries (one of
//! which, libpsm2, installs signal handlers that turn `abort()` into `exit(1)` when it is loaded).
//!
//! Without the headers the crate is empty ([`AVAILABLE`] is `false`) and dependents build without a fabric
//! transport; they learn it at build time from the `links` metadata `DEP_FABRIC_AVAILABLE` (`1` or `0`).
//! No logic lives here.

/// Whether this build found libfabric (the bindings below exist).
pub const AVAILABLE: bool = cfg!(fabric_sys_available);

#[cfg(fabric_sys_available)]
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

#[cfg(fabric_sys_available)]
pub use generated::*;

/// Loads libfabric (`dlopen("libfabric.so.1")`) once per process; every `xfi_` call but `xfi_header_version`
/// and `xfi_strerror` needs it to have succeeded. Signal handlers that provider libraries install while they
/// are loaded are put back as they were. The error says why it could not be loaded.
#[cfg(fabric_sys_available)]
pub fn load() -> Result<(), String> {
    // SAFETY: xfi_load takes no arguments, is thread-safe (a mutex in the shim) and returns null or a pointer
    // to a NUL-terminated message in a static buffer that is written once, before the first failing return.
    let e = unsafe { xfi_load() };
    if e.is_null() {
        Ok(())
    } else {
        // SAFETY: see above.
        Err(unsafe { std::ffi::CStr::from_ptr(e) }
            .to_string_lossy()
            .into_owned())
    }
}

/// `FI_VERSION(major, minor)` (a macro in the headers).
pub const fn fi_version_of(major: u32, minor: u32) -> u32 {
    (major << 16) | minor
}

#[cfg(all(test, fabric_sys_available))]
mod tests {
    use super::*;

    #[test]
    fn headers_and_library_agree_and_getinfo_lists_a_provider() {
        load().expect("libfabric loads");
        // SAFETY: libfabric is loaded; plain calls without arguments or with owned, valid pointers; every
        // returned list is freed.
        unsafe {
            let hv = xfi_header_version();
            assert_eq!(hv >> 16, 1, "libfabric 1.x headers");
            assert!(xfi_version() >= hv, "library older than its headers");
            let hints = xfi_allocinfo();
            assert!(!hints.is_null());
            (*(*hints).ep_attr).type_ = FI_EP_RDM;
            (*hints).caps = FI_RMA as u64;
            let mut info = std::ptr::null_mut();
            let r = xfi_getinfo(hv, std::ptr::null(), std::ptr::null(), 0, hints, &mut info);
            xfi_freeinfo(hints);
            assert_eq!(r, 0, "fi_getinfo");
            assert!(!info.is_null());
            let name = std::ffi::CStr::from_ptr((*(*info).fabric_attr).prov_name);
            assert!(!name.to_bytes().is_empty());
            xfi_freeinfo(info);
        }
    }
}
