//! Work at process exit: a function the C library's `exit` runs (`atexit`), for what must outlive a finalize and
//! still be released before the process ends (the bootstrap kept for a later init, `init.rs`).

use crate::error::{Error, Result};
use std::ffi::c_int;

extern "C" {
    fn atexit(f: extern "C" fn()) -> c_int;
}

/// Run `f` when the process exits through `exit` (a return from `main` included; not on `_exit`, a signal or an
/// abort). Registered once per call: register each function once.
pub(crate) fn at_exit(f: extern "C" fn()) -> Result<()> {
    // SAFETY: `atexit` only records the function pointer; `f` is a plain `extern "C" fn()` that lives as long as
    // the program (the library is not unloaded while registered: glibc runs a shared object's handlers at its
    // dlclose).
    let rc = unsafe { atexit(f) };
    if rc == 0 {
        Ok(())
    } else {
        Err(Error::State(format!(
            "atexit refused a handler (returned {rc}): too many registered"
        )))
    }
}
