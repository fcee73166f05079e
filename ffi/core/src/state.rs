//! The process-wide runtime instance behind the C API, and the sizes of the C allocations.

use crate::error::Failure;
use std::collections::HashMap;
use std::sync::{Mutex, RwLock};
use xpushmem_rt::{Error, InitAttr, Shmem};

static RT: RwLock<Option<Shmem>> = RwLock::new(None);
/// Heap offset -> size in bytes of every live C allocation (for `realloc`).
static SIZES: Mutex<Option<HashMap<usize, usize>>> = Mutex::new(None);

fn not_initialised() -> Error {
    Error::State("xpushmem is not initialised: call xpushmem_init() (or shmem_init()) first".into())
}

/// Run `f` with the running instance; a State error when there is none.
pub fn with<R>(f: impl FnOnce(&Shmem) -> Result<R, Failure>) -> Result<R, Failure> {
    let g = RT.read().unwrap_or_else(|p| p.into_inner());
    match g.as_ref() {
        Some(sh) => f(sh),
        None => Err(not_initialised().into()),
    }
}

/// Whether the runtime is running.
pub fn is_initialised() -> bool {
    RT.read().unwrap_or_else(|p| p.into_inner()).is_some()
}

/// This PE's number, if running (used in abort messages; never blocks behind a writer).
pub fn my_pe_or_none() -> Option<usize> {
    RT.try_read()
        .ok()
        .and_then(|g| g.as_ref().map(|s| s.my_pe()))
}

/// Start the runtime unless it is running (a second init is a no-op). `abort_default`: the error mode when
/// `XPUSHMEM_ERROR_MODE` is not set (false for the native API, true for the OpenSHMEM layer).
pub fn init(attr: InitAttr, abort_default: bool) -> Result<(), Failure> {
    let mut g = RT.write().unwrap_or_else(|p| p.into_inner());
    if g.is_some() {
        return Ok(());
    }
    let explicit = xpushmem_rt::config::env_value("XPUSHMEM_ERROR_MODE").is_some();
    let sh = xpushmem_rt::init_attr(attr)?;
    crate::error::set_mode(if explicit {
        sh.config().abort_on_error
    } else {
        abort_default
    });
    *SIZES.lock().unwrap_or_else(|p| p.into_inner()) = Some(HashMap::new());
    *g = Some(sh);
    Ok(())
}

/// Functions to run at finalize, e.g. to drop caches built on the finalized runtime.
static FINALIZE_HOOKS: Mutex<Vec<fn()>> = Mutex::new(Vec::new());

/// Run `hook` at every finalize (once per registration).
pub fn on_finalize(hook: fn()) {
    FINALIZE_HOOKS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(hook);
}

/// Finalize the running instance (collective). A no-op when none is running.
pub fn finalize() -> Result<(), Failure> {
    crate::teams::forget_all();
    for hook in FINALIZE_HOOKS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
    {
        hook();
    }
    let sh = RT.write().unwrap_or_else(|p| p.into_inner()).take();
    *SIZES.lock().unwrap_or_else(|p| p.into_inner()) = None;
    match sh {
        Some(sh) => Ok(sh.finalize()?),
        None => Ok(()),
    }
}

/// Remember the size of the allocation at heap offset `off`.
pub fn record_size(off: usize, bytes: usize) {
    if let Some(m) = SIZES.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
        m.insert(off, bytes);
    }
}

/// Forget the allocation at `off`; its size if known.
pub fn forget_size(off: usize) -> Option<usize> {
    SIZES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_mut()
        .and_then(|m| m.remove(&off))
}

/// The size of the allocation at `off`, if known.
pub fn size_at(off: usize) -> Option<usize> {
    SIZES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .and_then(|m| m.get(&off).copied())
}
