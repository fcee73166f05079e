//! The process-wide state behind the C API: the runtime instance, the sizes of the C allocations, the algorithm
//! chosen per collective and the hooks run at finalize. Above `error` only: every other module builds on it.

use crate::error::Failure;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, RwLock};
use xpushmem_rt::{
    AlltoallAlgo, BarrierAlgo, BroadcastAlgo, CollectAlgo, Error, InitAttr, ReduceAlgo,
    ReduceScatterAlgo, ScanAlgo, Shmem,
};

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
    crate::error::set_pe(Some(sh.my_pe()));
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
    for hook in FINALIZE_HOOKS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
    {
        hook();
    }
    let sh = RT.write().unwrap_or_else(|p| p.into_inner()).take();
    crate::error::set_pe(None);
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

// ---------------------------------------------------------------------------------------------------------------
// The algorithm chosen per collective by `xpushmemx_set_algorithm` (read by `coll` and `teams`)

/// The collectives whose algorithm can be chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Coll {
    /// Barriers and syncs.
    Barrier = 0,
    /// Broadcasts.
    Broadcast = 1,
    /// Collects and fcollects.
    Collect = 2,
    /// All-to-all exchanges.
    Alltoall = 3,
    /// Reductions.
    Reduce = 4,
    /// Reduce-scatters.
    ReduceScatter = 5,
    /// Inclusive and exclusive scans.
    Scan = 6,
}

/// Every collective, in the order of [`Coll`]'s values.
pub(crate) const COLLS: [Coll; 7] = [
    Coll::Barrier,
    Coll::Broadcast,
    Coll::Collect,
    Coll::Alltoall,
    Coll::Reduce,
    Coll::ReduceScatter,
    Coll::Scan,
];

/// Per collective: 0 = `Auto` (the environment or the size rule), k = the algorithm `ALL[k - 1]`.
static ALGOS: [AtomicU8; 7] = [
    AtomicU8::new(0),
    AtomicU8::new(0),
    AtomicU8::new(0),
    AtomicU8::new(0),
    AtomicU8::new(0),
    AtomicU8::new(0),
    AtomicU8::new(0),
];

/// Choose algorithm `k` of collective `c` for the process (0 = `Auto`, k = the algorithm `ALL[k - 1]`).
pub(crate) fn choose(c: Coll, k: u8) {
    ALGOS[c as usize].store(k, Ordering::Relaxed);
}

/// The choice of collective `c`: 0 = `Auto`, k = the algorithm `ALL[k - 1]`.
pub(crate) fn choice(c: Coll) -> u8 {
    ALGOS[c as usize].load(Ordering::Relaxed)
}

fn chosen<A: Copy>(c: Coll, all: &[A], auto: A) -> A {
    match ALGOS[c as usize].load(Ordering::Relaxed) {
        0 => auto,
        k => all.get(k as usize - 1).copied().unwrap_or(auto),
    }
}

/// The barrier algorithm in force (`Auto` unless chosen).
pub fn barrier_algo() -> BarrierAlgo {
    chosen(Coll::Barrier, BarrierAlgo::ALL, BarrierAlgo::Auto)
}
/// The broadcast algorithm in force (`Auto` unless chosen).
pub fn broadcast_algo() -> BroadcastAlgo {
    chosen(Coll::Broadcast, BroadcastAlgo::ALL, BroadcastAlgo::Auto)
}
/// The collect algorithm in force (`Auto` unless chosen).
pub fn collect_algo() -> CollectAlgo {
    chosen(Coll::Collect, CollectAlgo::ALL, CollectAlgo::Auto)
}
/// The all-to-all algorithm in force (`Auto` unless chosen).
pub fn alltoall_algo() -> AlltoallAlgo {
    chosen(Coll::Alltoall, AlltoallAlgo::ALL, AlltoallAlgo::Auto)
}
/// The reduction algorithm in force (`Auto` unless chosen).
pub fn reduce_algo() -> ReduceAlgo {
    chosen(Coll::Reduce, ReduceAlgo::ALL, ReduceAlgo::Auto)
}
/// The reduce-scatter algorithm in force (`Auto` unless chosen).
pub fn reduce_scatter_algo() -> ReduceScatterAlgo {
    chosen(
        Coll::ReduceScatter,
        ReduceScatterAlgo::ALL,
        ReduceScatterAlgo::Auto,
    )
}
/// The scan algorithm in force (`Auto` unless chosen).
pub fn scan_algo() -> ScanAlgo {
    chosen(Coll::Scan, ScanAlgo::ALL, ScanAlgo::Auto)
}
