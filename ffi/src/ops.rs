//! The xpushmem-ops C ABI (`xpushmem_ops_*`: PyTorch's NVSHMEM op family) inside `libxpushmem`, working on
//! `libxpushmem`'s own runtime (the one `xpushmem_init` / `xpushmemx_init_attr` start), so that a C++ torch
//! kernel can call the ops on the tensors it allocated with `xpushmem_malloc`.
//!
//! The functions are defined (`#[no_mangle]`) in `xpushmem_ops::capi`; linking that crate exports them. At load
//! time, a constructor points the ops at this library's runtime instead of their own.

pub use xpushmem_ops;

use xpushmem_ffi_core::rt::Shmem;

/// Run `f` on the running runtime; false when xpushmem is not initialised.
fn with_runtime(f: &mut dyn FnMut(&Shmem)) -> bool {
    xpushmem_ffi_core::state::with(|sh| {
        f(sh);
        Ok(())
    })
    .is_ok()
}

extern "C" fn use_library_runtime() {
    xpushmem_ops::capi::set_runtime_access(Some(with_runtime));
    // Groups are registered on a runtime; a finalize (and a later re-init) must not reuse them.
    xpushmem_ffi_core::state::on_finalize(xpushmem_ops::capi::reset_groups);
}

// Runs when the library is loaded, before any xpushmem_ops_* call can be made.
#[used]
#[link_section = ".init_array"]
static USE_LIBRARY_RUNTIME: extern "C" fn() = use_library_runtime;
