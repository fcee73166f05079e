//! libfabric's C API as xpushmem uses it, generated at build time by bindgen from the system's headers
//! (Debian's `libfabric-dev`), plus `xfi_*` functions: a C shim giving a linkable symbol to each of libfabric's
//! static-inline calls (`fi_write`, `fi_atomic`, `fi_cq_read`, ... are inline wrappers over per-object ops tables).
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

/// `FI_VERSION(major, minor)` (a macro in the headers).
pub const fn fi_version_of(major: u32, minor: u32) -> u32 {
    (major << 16) | minor
}

#[cfg(all(test, fabric_sys_available))]
mod tests {
    use super::*;

    #[test]
    fn headers_and_library_agree_and_getinfo_lists_a_provider() {
        // SAFETY: plain calls without arguments or with owned, valid pointers; every returned list is freed.
        unsafe {
            let hv = xfi_header_version();
            assert_eq!(hv >> 16, 1, "libfabric 1.x headers");
            assert!(fi_version() >= hv, "library older than its headers");
            let hints = xfi_allocinfo();
            assert!(!hints.is_null());
            (*(*hints).ep_attr).type_ = FI_EP_RDM;
            (*hints).caps = FI_RMA as u64;
            let mut info = std::ptr::null_mut();
            let r = fi_getinfo(hv, std::ptr::null(), std::ptr::null(), 0, hints, &mut info);
            fi_freeinfo(hints);
            assert_eq!(r, 0, "fi_getinfo");
            assert!(!info.is_null());
            let name = std::ffi::CStr::from_ptr((*(*info).fabric_attr).prov_name);
            assert!(!name.to_bytes().is_empty());
            fi_freeinfo(info);
        }
    }
}
