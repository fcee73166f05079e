//! C ABI of the ops, for a C++ torch kernel (`TORCH_LIBRARY_IMPL(symm_mem, XPU, m)` shim): tensors are passed
//! as [`XpushmemOpsTensor`] (data pointer, dtype, sizes, strides), groups as arrays of global PEs in group-rank
//! order. Every function returns `0` or one of `libxpushmem`'s `XPUSHMEM_ERROR_*` codes and goes through the same
//! C boundary as the rest of the library (`xpushmem_ffi_core::error`): one last error per thread
//! (`xpushmem_last_error()`, also readable as [`xpushmem_ops_last_error`]), one error mode, one panic firewall
//! (a panic becomes `XPUSHMEM_ERROR_INTERNAL`).
//!
//! ```c
//! typedef struct {
//!     void *data;              /* address of element [0,...,0]; inside the symmetric heap */
//!     int32_t dtype;           /* XPUSHMEM_OPS_DTYPE_*: 0 f32, 1 f16, 2 bf16, 3 f64, 4 i8, 5 u8, 6 i16, 7 i32, 8 i64 */
//!     int32_t ndim;
//!     const int64_t *sizes;    /* ndim entries */
//!     const int64_t *strides;  /* ndim entries, in elements; NULL = contiguous */
//! } xpushmem_ops_tensor;
//! ```
//!
//! ## Runtime
//! The functions run on the library's runtime, the one `xpushmem_init` starts; [`xpushmem_ops_init`] and
//! [`xpushmem_ops_finalize`] are the same calls under the ops' names. The registered groups are forgotten at
//! finalize.
//!
//! ## Groups
//! A group's synchronisation space is allocated collectively by every PE of the world, like NVSHMEM's
//! `nvshmem_team_split_strided` over the world team. [`xpushmem_ops_group_register`] does that explicitly (every
//! PE calls it at the same point, each with the group it belongs to); an op given a group that is not yet
//! registered registers it on the spot, which is only safe when every PE of the world calls an op (on its own
//! group) at that point, as PyTorch's sub-group dispatch/combine does. `group_pes == NULL` means the world.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::{Arc, Mutex, Once};
use xpushmem_ffi_core::error::{self as boundary, Failure};
use xpushmem_ffi_core::rt::device::queue::{CommandList, DeviceRange, Queue};
use xpushmem_ffi_core::rt::{Error, InitAttr, Result, Shmem};
use xpushmem_ffi_core::state;
use xpushmem_ops::{
    ep_path, ops_path, DType, DeviceOps, Group, LocalTensor, OpHandle, Operand, OpsPath, TensorView,
};

/// A tensor as the C ABI passes it (`xpushmem_ops_tensor`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct XpushmemOpsTensor {
    /// Address of element `[0, ..., 0]`, inside the symmetric heap (may be NULL for an empty tensor).
    pub data: *mut c_void,
    /// Element type: an [`DType`] discriminant.
    pub dtype: i32,
    /// Number of dimensions.
    pub ndim: i32,
    /// `ndim` sizes.
    pub sizes: *const i64,
    /// `ndim` strides in elements, or NULL for contiguous.
    pub strides: *const i64,
}

static GROUPS: Mutex<Option<HashMap<Vec<usize>, Arc<Group>>>> = Mutex::new(None);
static FORGET_GROUPS_AT_FINALIZE: Once = Once::new();

/// Forget every registered group (they belong to the runtime being finalized).
fn reset_groups() {
    *GROUPS.lock().unwrap_or_else(|p| p.into_inner()) = None;
}

/// Run `f` on the library's runtime (a State error when it is not running).
pub(crate) fn with_rt<R>(f: impl FnOnce(&Shmem) -> Result<R>) -> Result<R, Failure> {
    state::with(|sh| f(sh).map_err(Failure::from))
}

/// Run a C entry point's body behind the library's one boundary: its error code (0 on success).
pub(crate) fn entry(call: &str, f: impl FnOnce() -> Result<(), Failure>) -> c_int {
    boundary::code(call, f)
}

/// The two C entry points of one op, written once: `fn NAME(args);` (the host path, or the device path on the
/// runtime's own queue, waiting) and `fn NAME_on_queue(.., ze_command_list);` (the same arguments and the caller's
/// Level Zero command list, appended to without waiting), each with its doc comment (the second's is the standard
/// one of the macro's first rule when it has none), then the op's body
/// `|sh, CALL, list| { ... }`: it runs behind the library's boundary ([`entry`]) on the runtime `sh`, with `CALL`
/// the entry point's name and `list` the caller's list (`None` for `NAME`), and returns the runtime's `Result`.
/// Both entry points call one `NAME_impl` holding the body.
///
/// cbindgen does not expand macros: `ffi/tests/headers.rs` expands the invocations the same way (the two
/// declarations with their doc comments, in place; the standard doc comment read from the `#[doc = ...]` lines of
/// the first rule) before it generates `include/xpushmem_ops.h`.
macro_rules! ops_fn {
    // An `_on_queue` entry point without a doc comment of its own gets this one.
    (
        $(#[doc = $doc:expr])*
        fn $name:ident($($arg:ident: $ty:ty),* $(,)?);
        fn $queue:ident(.., ze_command_list);
        |$sh:ident, $call:ident, $list:ident| $body:block
    ) => {
        ops_fn! {
            $(#[doc = $doc])*
            fn $name($($arg: $ty),*);
            #[doc = concat!(" [`", stringify!($name), "`] on the device path: the op's kernel is appended to the Level Zero command list `ze_command_list`")]
            #[doc = " (a `ze_command_list_handle_t` of the runtime's context, immediate or regular) and the call returns without"]
            #[doc = " waiting. The op's outcome is reported by [`xpushmem_ops_queue_wait`] once the list has run. Needs the"]
            #[doc = " device path (device heaps, `XPUSHMEM_OPS_PATH` not `host`)."]
            #[doc = ""]
            #[doc = " # Safety"]
            #[doc = concat!(" As for [`", stringify!($name), "`]; `ze_command_list` must be a live command list of the runtime's context and device")]
            #[doc = " (`xpushmemx_ze_get_handles`) that stays alive until the op has run."]
            fn $queue(.., ze_command_list);
            |$sh, $call, $list| $body
        }
    };
    (
        $(#[doc = $doc:expr])*
        fn $name:ident($($arg:ident: $ty:ty),* $(,)?);
        $(#[doc = $qdoc:expr])*
        fn $queue:ident(.., ze_command_list);
        |$sh:ident, $call:ident, $list:ident| $body:block
    ) => {
        xpushmem_ffi_core::paste::paste! {
            /// The body of
            #[doc = concat!("[`", stringify!($name), "`]")]
            /// and its `_on_queue` form.
            ///
            /// # Safety
            /// The entry points' contract.
            #[allow(non_snake_case, clippy::too_many_arguments)]
            unsafe fn [<$name _impl>](
                $call: &'static str,
                $list: Option<*mut c_void>,
                $($arg: $ty),*
            ) -> c_int {
                entry($call, || with_rt(|$sh| $body))
            }

            $(#[doc = $doc])*
            #[no_mangle]
            #[allow(clippy::too_many_arguments)]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
                // SAFETY: forwarded caller contract.
                unsafe { [<$name _impl>](stringify!($name), None, $($arg),*) }
            }

            $(#[doc = $qdoc])*
            #[no_mangle]
            #[allow(clippy::too_many_arguments)]
            pub unsafe extern "C" fn $queue($($arg: $ty,)* ze_command_list: *mut c_void) -> c_int {
                // SAFETY: forwarded caller contract.
                unsafe { [<$name _impl>](stringify!($queue), Some(ze_command_list), $($arg),*) }
            }
        }
    };
}

/// The device path's state on this PE: the op kernels, the runtime's own queue for the synchronous entry points,
/// and the ops enqueued on callers' lists whose outcome [`xpushmem_ops_queue_wait`] has not reported yet.
struct DevPath {
    ops: DeviceOps,
    queue: Queue,
    pending: Vec<OpHandle>,
    /// Ops whose (host-side) rejection was returned by their entry point already: kept until they have run (their
    /// peers wait for their verdict), their outcome not reported again.
    reported: Vec<OpHandle>,
    /// The first error of an op that finished before `xpushmem_ops_queue_wait` was called.
    deferred: Option<Error>,
}

static DEV: Mutex<Option<DevPath>> = Mutex::new(None);
static FORGET_DEV_AT_FINALIZE: Once = Once::new();

/// Set up the device path when `XPUSHMEM_OPS_PATH` selects it (for the op family, or for the EP ops alone: with
/// `auto` and PEs on other nodes) and it is not set up yet. Collective over the world (it allocates the ops' sync
/// region and builds their kernels): called from `xpushmem_ops_init` and when a group is registered, both
/// collective.
fn ensure_device_path(sh: &Shmem) -> Result<()> {
    // `ep_path` is the device's wherever `ops_path` is.
    if ep_path(sh)? != OpsPath::Device {
        return Ok(());
    }
    let mut d = DEV.lock().unwrap_or_else(|p| p.into_inner());
    if d.is_none() {
        FORGET_DEV_AT_FINALIZE.call_once(|| {
            state::on_finalize(|| *DEV.lock().unwrap_or_else(|p| p.into_inner()) = None)
        });
        let ops = DeviceOps::new(sh)?;
        let queue = sh
            .device()
            .ok_or_else(|| Error::State("device path without a device".into()))?
            .create_queue(true)?;
        *d = Some(DevPath {
            ops,
            queue,
            pending: Vec::new(),
            reported: Vec::new(),
            deferred: None,
        });
    }
    Ok(())
}

/// Move finished ops out of the pending list, keeping the first error.
fn reap(sh: &Shmem, st: &mut DevPath) {
    st.reported.retain(|h| !h.is_complete().unwrap_or(false));
    let mut still = Vec::new();
    for h in std::mem::take(&mut st.pending) {
        if h.is_complete().unwrap_or(false) {
            if let Err(e) = h.wait(sh) {
                st.deferred.get_or_insert(e);
            }
        } else {
            still.push(h);
        }
    }
    st.pending = still;
}

/// Run one op on the path `XPUSHMEM_OPS_PATH` selects: `list` = `Some` (an `_on_queue` entry point) enqueues the
/// device kernel on the caller's list and returns; `None` runs the host path, or the device kernel on the
/// runtime's own queue and waits for it.
fn dispatch(
    sh: &Shmem,
    call: &str,
    list: Option<*mut c_void>,
    host: impl FnOnce() -> Result<()>,
    dev: impl FnOnce(&DeviceOps, CommandList) -> Result<OpHandle>,
) -> Result<()> {
    let path = ops_path(sh)?;
    if list.is_none() && path == OpsPath::Host {
        return host();
    }
    if path == OpsPath::Host {
        return Err(Error::InvalidArgument {
            name: "XPUSHMEM_OPS_PATH",
            value: "host".into(),
            reason: format!(
                "{call}: the host path cannot run on a queue; synchronise the queue and call the entry point without _on_queue"
            ),
        });
    }
    let mut d = DEV.lock().unwrap_or_else(|p| p.into_inner());
    let st = d.as_mut().ok_or_else(|| {
        Error::State(format!(
            "{call}: the ops' device path is not set up on this PE; it is set up collectively by xpushmem_ops_init or the first group registration"
        ))
    })?;
    match list {
        Some(l) => {
            if l.is_null() {
                return Err(null_arg("ze_command_list", call));
            }
            reap(sh, st);
            // SAFETY: the `_on_queue` entry points' contract: a live list of the runtime's context and device
            // that outlives the op.
            let list = unsafe { CommandList::from_raw(l) };
            let h = dev(&st.ops, list)?;
            st.pending.push(h);
            Ok(())
        }
        None => {
            let h = dev(&st.ops, st.queue.list())?;
            sh.device()
                .ok_or_else(|| Error::State("device path without a device".into()))?
                .submit_and_wait(&st.queue)?;
            h.wait(sh)
        }
    }
}

/// Report the outcome of every op enqueued with an `_on_queue` entry point since the last call: waits (bounded by
/// `XPUSHMEM_TIMEOUT_MS`) until each has run, so the caller must have let its lists run (immediate lists run by
/// themselves; regular ones the caller executes) — typically after synchronising its stream. Returns 0 or the
/// first failed op's error (its message in `xpushmem_last_error()`), the host path's error for the same inputs.
#[no_mangle]
pub extern "C" fn xpushmem_ops_queue_wait() -> c_int {
    entry("xpushmem_ops_queue_wait", || {
        with_rt(|sh| {
            let mut d = DEV.lock().unwrap_or_else(|p| p.into_inner());
            let Some(st) = d.as_mut() else {
                return Ok(());
            };
            let mut first = st.deferred.take();
            for h in std::mem::take(&mut st.pending) {
                if let Err(e) = h.wait(sh) {
                    first.get_or_insert(e);
                }
            }
            for h in std::mem::take(&mut st.reported) {
                // Already reported by its entry point.
                let _ = h.wait(sh);
            }
            first.map_or(Ok(()), Err)
        })
    })
}

/// Without waiting: the first error of an op enqueued with an `_on_queue` entry point that has finished since
/// the last report (0 when none has failed, or none has finished yet). For frameworks that surface asynchronous
/// errors at the next call, as CUDA does.
#[no_mangle]
pub extern "C" fn xpushmem_ops_queue_poll() -> c_int {
    entry("xpushmem_ops_queue_poll", || {
        with_rt(|sh| {
            let mut d = DEV.lock().unwrap_or_else(|p| p.into_inner());
            let Some(st) = d.as_mut() else {
                return Ok(());
            };
            reap(sh, st);
            st.deferred.take().map_or(Ok(()), Err)
        })
    })
}

/// The path the ops take on this PE (`XPUSHMEM_OPS_PATH` resolved against the heap): 0 host, 1 device, or -1
/// with the error (e.g. `device` on a host heap, or no runtime).
#[no_mangle]
pub extern "C" fn xpushmem_ops_path() -> c_int {
    path_code("xpushmem_ops_path", ops_path)
}

/// The path the expert-parallel ops (`xpushmem_ops_ep_*`) take on this PE: as `xpushmem_ops_path`, except that
/// `auto` is the device path on device heaps also when PEs are on other nodes (the EP kernels reach them through
/// the host proxy; the rest of the op family takes the host path there). 0 host, 1 device, or -1 with the error.
#[no_mangle]
pub extern "C" fn xpushmem_ops_ep_path() -> c_int {
    path_code("xpushmem_ops_ep_path", ep_path)
}

fn path_code(call: &str, of: fn(&Shmem) -> Result<OpsPath>) -> c_int {
    let mut path = -1;
    let rc = entry(call, || {
        with_rt(|sh| {
            path = match of(sh)? {
                OpsPath::Host => 0,
                OpsPath::Device => 1,
            };
            Ok(())
        })
    });
    if rc == 0 {
        path
    } else {
        -1
    }
}

fn null_arg(name: &'static str, call: &str) -> Error {
    Error::InvalidArgument {
        name,
        value: "NULL".into(),
        reason: format!("{call}: must not be NULL"),
    }
}

/// A C array as a slice; NULL is allowed only for `n == 0`.
///
/// # Safety
/// `p` must be NULL or point to `n` readable, initialised `T`s that stay valid and unmodified for `'a`.
pub(crate) unsafe fn array<'a, T>(
    p: *const T,
    n: i64,
    name: &'static str,
    call: &str,
) -> Result<&'a [T]> {
    if n < 0 {
        return Err(Error::InvalidArgument {
            name,
            value: n.to_string(),
            reason: format!("{call}: a count must be non-negative"),
        });
    }
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(null_arg(name, call));
    }
    // SAFETY: p is non-null and, by this function's contract, points to n valid, initialised elements that
    // outlive 'a.
    Ok(unsafe { std::slice::from_raw_parts(p, n as usize) })
}

/// Convert a C tensor descriptor into a view of the symmetric heap.
///
/// # Safety
/// `t` must be NULL or point to a valid `XpushmemOpsTensor` whose `sizes` (and non-NULL `strides`) arrays hold
/// `ndim` elements.
unsafe fn view(
    sh: &Shmem,
    t: *const XpushmemOpsTensor,
    name: &'static str,
    call: &str,
) -> Result<TensorView> {
    if t.is_null() {
        return Err(null_arg(name, call));
    }
    // SAFETY: t is non-null and points to a valid descriptor (contract above); it is Copy.
    let t = unsafe { *t };
    let dtype = DType::from_code(t.dtype)?;
    // SAFETY: sizes holds ndim elements (contract above).
    let sizes = unsafe { array(t.sizes, t.ndim as i64, name, call)? };
    let bad = |what: &str, v: &[i64]| Error::InvalidArgument {
        name,
        value: format!("{v:?}"),
        reason: format!("{call}: {what} must be non-negative"),
    };
    if sizes.iter().any(|&s| s < 0) {
        return Err(bad("sizes", sizes));
    }
    let shape: Vec<usize> = sizes.iter().map(|&s| s as usize).collect();
    let strides: Vec<usize> = if t.strides.is_null() {
        xpushmem_ops::tensor::contiguous_strides(&shape)
    } else {
        // SAFETY: strides is non-null and holds ndim elements (contract above).
        let s = unsafe { array(t.strides, t.ndim as i64, name, call)? };
        if s.iter().any(|&x| x < 0) {
            return Err(bad("strides", s));
        }
        s.iter().map(|&x| x as usize).collect()
    };
    let numel: usize = shape.iter().product();
    let extent = if numel == 0 {
        0
    } else {
        shape
            .iter()
            .zip(&strides)
            .try_fold(0usize, |acc, (&n, &s)| {
                (n - 1).checked_mul(s).and_then(|x| x.checked_add(acc))
            })
            .and_then(|last| last.checked_add(1))
            .and_then(|e| e.checked_mul(dtype.size()))
            .ok_or_else(|| Error::InvalidArgument {
                name,
                value: format!("sizes {shape:?} strides {strides:?}"),
                reason: format!("{call}: the tensor's extent overflows"),
            })?
    };
    let addr = if t.data.is_null() && numel == 0 {
        sh.heap_base() as usize
    } else {
        t.data as usize
    };
    let buf = sh
        .sym_slice_from_addr::<u8>(addr, extent)
        .map_err(|e| match e {
            Error::NotSymmetric {
                addr, base, end, ..
            } => Error::NotSymmetric {
                addr,
                base,
                end,
                context: format!("{call}: {name} is not in symmetric memory"),
            },
            e => e,
        })?;
    TensorView::new(buf, dtype, &shape, &strides, 0)
}

/// Look up (or register, collectively) the group of `pes` (NULL = the world).
///
/// # Safety
/// `pes` must be NULL or point to `n` readable `i32`s.
pub(crate) unsafe fn group(sh: &Shmem, pes: *const i32, n: i32, call: &str) -> Result<Arc<Group>> {
    let list: Vec<usize> = if pes.is_null() {
        if n != 0 {
            return Err(null_arg("group_pes", call));
        }
        (0..sh.n_pes()).collect()
    } else {
        // SAFETY: pes is non-null and holds n elements (contract above).
        let raw = unsafe { array(pes, n as i64, "group_pes", call)? };
        let mut v = Vec::with_capacity(raw.len());
        for (i, &p) in raw.iter().enumerate() {
            if p < 0 || p as usize >= sh.n_pes() {
                return Err(Error::InvalidPe {
                    pe: p as i64,
                    n_pes: sh.n_pes(),
                    context: format!("{call}: group_pes[{i}]"),
                });
            }
            v.push(p as usize);
        }
        v
    };
    FORGET_GROUPS_AT_FINALIZE.call_once(|| state::on_finalize(reset_groups));
    let mut g = GROUPS.lock().unwrap_or_else(|p| p.into_inner());
    let map = g.get_or_insert_with(HashMap::new);
    if let Some(grp) = map.get(&list) {
        return Ok(grp.clone());
    }
    let grp = Arc::new(Group::new(sh, &list)?);
    map.insert(list, grp.clone());
    drop(g);
    // Still at the collective point of the group's creation.
    ensure_device_path(sh)?;
    Ok(grp)
}

/// The message of the calling thread's last failed call (the same as `xpushmem_last_error()`). Valid until the
/// thread's next failing call.
#[no_mangle]
pub extern "C" fn xpushmem_ops_last_error() -> *const c_char {
    boundary::last_message_ptr()
}

/// The error code of the calling thread's last failed call (the same as `xpushmem_last_error_code()`).
#[no_mangle]
pub extern "C" fn xpushmem_ops_last_error_code() -> c_int {
    boundary::last_code()
}

/// Start the library's runtime from the environment (collective; the same as `xpushmem_init`); a no-op when it
/// is running.
#[no_mangle]
pub extern "C" fn xpushmem_ops_init() -> c_int {
    entry("xpushmem_ops_init", || {
        state::init(InitAttr::default(), false)?;
        with_rt(ensure_device_path)
    })
}

/// Finalize the library's runtime (collective; the same as `xpushmem_finalize`) and forget the registered
/// groups; a no-op when none is running.
#[no_mangle]
pub extern "C" fn xpushmem_ops_finalize() -> c_int {
    entry("xpushmem_ops_finalize", state::finalize)
}

/// Register the group `pes[0..npes]` (global PEs in group-rank order; NULL = the world). Collective over the
/// world: every PE calls it at the same point, each with the group it belongs to. Registering a group twice is a
/// no-op on that PE (so all PEs must agree on whether it is new).
///
/// # Safety
/// `pes` must be NULL or point to `npes` readable `int32_t`s.
#[no_mangle]
pub unsafe extern "C" fn xpushmem_ops_group_register(pes: *const i32, npes: i32) -> c_int {
    const CALL: &str = "xpushmem_ops_group_register";
    entry(CALL, || {
        with_rt(|sh| {
            // SAFETY: forwarded caller contract on pes.
            let g = unsafe { group(sh, pes, npes, CALL) };
            g.map(|_| ())
        })
    })
}

ops_fn! {
    /// `symm_mem::all_to_all_vdev`.
    ///
    /// # Safety
    /// Tensor pointers must point to valid descriptors; `group_pes` NULL or `group_size` readable `int32_t`s.
    fn xpushmem_ops_all_to_all_vdev(
        input: *const XpushmemOpsTensor,
        out: *const XpushmemOpsTensor,
        in_splits: *const XpushmemOpsTensor,
        out_splits_offsets: *const XpushmemOpsTensor,
        group_pes: *const i32,
        group_size: i32,
    );
    fn xpushmem_ops_all_to_all_vdev_on_queue(.., ze_command_list);
    |sh, CALL, list| {
        // SAFETY: forwarded caller contract on every pointer.
        let (i, o, s, oso, g) = unsafe {
            (
                view(sh, input, "input", CALL)?,
                view(sh, out, "out", CALL)?,
                view(sh, in_splits, "in_splits", CALL)?,
                view(sh, out_splits_offsets, "out_splits_offsets", CALL)?,
                group(sh, group_pes, group_size, CALL)?,
            )
        };
        dispatch(
            sh,
            CALL,
            list,
            || xpushmem_ops::all_to_all_vdev(sh, &g, &i, &o, &s, &oso),
            |ops, l| ops.all_to_all_vdev(sh, l, &g, &i, &o, &s, &oso),
        )
    }
}

ops_fn! {
    /// `symm_mem::all_to_all_vdev_2d`; `major_align` NULL = PyTorch's default (1).
    ///
    /// # Safety
    /// Tensor pointers must point to valid descriptors; `major_align` NULL or readable; `group_pes` NULL or
    /// `group_size` readable `int32_t`s.
    fn xpushmem_ops_all_to_all_vdev_2d(
        input: *const XpushmemOpsTensor,
        out: *const XpushmemOpsTensor,
        in_splits: *const XpushmemOpsTensor,
        out_splits_offsets: *const XpushmemOpsTensor,
        group_pes: *const i32,
        group_size: i32,
        major_align: *const i64,
    );
    fn xpushmem_ops_all_to_all_vdev_2d_on_queue(.., ze_command_list);
    |sh, CALL, list| {
        // SAFETY: forwarded caller contract on every pointer; major_align is read only when non-null.
        let (i, o, s, oso, g, a) = unsafe {
            (
                view(sh, input, "input", CALL)?,
                view(sh, out, "out", CALL)?,
                view(sh, in_splits, "in_splits", CALL)?,
                view(sh, out_splits_offsets, "out_splits_offsets", CALL)?,
                group(sh, group_pes, group_size, CALL)?,
                (!major_align.is_null()).then(|| *major_align),
            )
        };
        dispatch(
            sh,
            CALL,
            list,
            || xpushmem_ops::all_to_all_vdev_2d(sh, &g, &i, &o, &s, &oso, a),
            |ops, l| ops.all_to_all_vdev_2d(sh, l, &g, &i, &o, &s, &oso, a),
        )
    }
}

ops_fn! {
    /// `symm_mem::all_to_all_vdev_2d_offset`.
    ///
    /// # Safety
    /// Tensor pointers must point to valid descriptors; `group_pes` NULL or `group_size` readable `int32_t`s.
    fn xpushmem_ops_all_to_all_vdev_2d_offset(
        input: *const XpushmemOpsTensor,
        out: *const XpushmemOpsTensor,
        in_splits_offsets: *const XpushmemOpsTensor,
        out_splits_offsets: *const XpushmemOpsTensor,
        group_pes: *const i32,
        group_size: i32,
    );
    fn xpushmem_ops_all_to_all_vdev_2d_offset_on_queue(.., ze_command_list);
    |sh, CALL, list| {
        // SAFETY: forwarded caller contract on every pointer.
        let (i, o, s, oso, g) = unsafe {
            (
                view(sh, input, "input", CALL)?,
                view(sh, out, "out", CALL)?,
                view(sh, in_splits_offsets, "in_splits_offsets", CALL)?,
                view(sh, out_splits_offsets, "out_splits_offsets", CALL)?,
                group(sh, group_pes, group_size, CALL)?,
            )
        };
        dispatch(
            sh,
            CALL,
            list,
            || xpushmem_ops::all_to_all_vdev_2d_offset(sh, &g, &i, &o, &s, &oso),
            |ops, l| ops.all_to_all_vdev_2d_offset(sh, l, &g, &i, &o, &s, &oso),
        )
    }
}

ops_fn! {
    /// `symm_mem::nvshmem_all_to_all` (equal split).
    ///
    /// # Safety
    /// Tensor pointers must point to valid descriptors; `group_pes` NULL or `group_size` readable `int32_t`s.
    fn xpushmem_ops_nvshmem_all_to_all(
        input: *const XpushmemOpsTensor,
        out: *const XpushmemOpsTensor,
        group_pes: *const i32,
        group_size: i32,
    );
    fn xpushmem_ops_nvshmem_all_to_all_on_queue(.., ze_command_list);
    |sh, CALL, list| {
        // SAFETY: forwarded caller contract on every pointer.
        let (i, o, g) = unsafe {
            (
                view(sh, input, "input", CALL)?,
                view(sh, out, "out", CALL)?,
                group(sh, group_pes, group_size, CALL)?,
            )
        };
        dispatch(
            sh,
            CALL,
            list,
            || xpushmem_ops::nvshmem_all_to_all(sh, &g, &i, &o),
            |ops, l| ops.nvshmem_all_to_all(sh, l, &g, &i, &o),
        )
    }
}

/// Read an optional reduce-op name (NULL = "sum").
///
/// # Safety
/// `p` must be NULL or a NUL-terminated string.
unsafe fn reduce_op_arg(p: *const c_char, call: &str) -> Result<String> {
    if p.is_null() {
        return Ok("sum".into());
    }
    // SAFETY: p is non-null and NUL-terminated (contract above).
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str()
        .map(str::to_string)
        .map_err(|_| Error::InvalidArgument {
            name: "reduce_op",
            value: format!("{s:?}"),
            reason: format!("{call}: must be UTF-8"),
        })
}

ops_fn! {
    /// `symm_mem::tile_reduce`; `reduce_op` NULL = "sum". `root` is group-relative.
    ///
    /// # Safety
    /// Tensor pointers must point to valid descriptors; `reduce_op` NULL or NUL-terminated; `group_pes` NULL or
    /// `group_size` readable `int32_t`s.
    fn xpushmem_ops_tile_reduce(
        in_tile: *const XpushmemOpsTensor,
        out_tile: *const XpushmemOpsTensor,
        root: i64,
        group_pes: *const i32,
        group_size: i32,
        reduce_op: *const c_char,
    );
    fn xpushmem_ops_tile_reduce_on_queue(.., ze_command_list);
    |sh, CALL, list| {
        // SAFETY: forwarded caller contract on every pointer.
        let (i, o, g, op) = unsafe {
            (
                view(sh, in_tile, "in_tile", CALL)?,
                view(sh, out_tile, "out_tile", CALL)?,
                group(sh, group_pes, group_size, CALL)?,
                reduce_op_arg(reduce_op, CALL)?,
            )
        };
        dispatch(
            sh,
            CALL,
            list,
            || xpushmem_ops::tile_reduce(sh, &g, &i, &o, root, &op),
            |ops, l| ops.tile_reduce(sh, l, &g, &i, &o, root, &op),
        )
    }
}

ops_fn! {
    /// `symm_mem::multi_root_tile_reduce`: `in_tiles[0..n_tiles]`, `roots[0..n_roots]` (group-relative);
    /// `reduce_op` NULL = "sum".
    ///
    /// # Safety
    /// `in_tiles` must be NULL or point to `n_tiles` valid descriptors, `roots` NULL or `n_roots` readable
    /// `int64_t`s; the other pointers as in [`xpushmem_ops_tile_reduce`].
    fn xpushmem_ops_multi_root_tile_reduce(
        in_tiles: *const XpushmemOpsTensor,
        n_tiles: i32,
        out_tile: *const XpushmemOpsTensor,
        roots: *const i64,
        n_roots: i32,
        group_pes: *const i32,
        group_size: i32,
        reduce_op: *const c_char,
    );
    fn xpushmem_ops_multi_root_tile_reduce_on_queue(.., ze_command_list);
    |sh, CALL, list| {
        // SAFETY: forwarded caller contract on every pointer and count.
        let (tiles, o, r, g, op) = unsafe {
            let descs = array(in_tiles, n_tiles as i64, "in_tiles", CALL)?;
            let mut tiles = Vec::with_capacity(descs.len());
            for d in descs {
                tiles.push(view(sh, d, "in_tiles", CALL)?);
            }
            (
                tiles,
                view(sh, out_tile, "out_tile", CALL)?,
                array(roots, n_roots as i64, "roots", CALL)?,
                group(sh, group_pes, group_size, CALL)?,
                reduce_op_arg(reduce_op, CALL)?,
            )
        };
        dispatch(
            sh,
            CALL,
            list,
            || xpushmem_ops::multi_root_tile_reduce(sh, &g, &tiles, &o, r, &op),
            |ops, l| ops.multi_root_tile_reduce(sh, l, &g, &tiles, &o, r, &op),
        )
    }
}

ops_fn! {
    /// `symm_mem::nvshmem_broadcast` (in place; `root` group-relative).
    ///
    /// # Safety
    /// `tensor` must point to a valid descriptor; `group_pes` NULL or `group_size` readable `int32_t`s.
    fn xpushmem_ops_nvshmem_broadcast(
        tensor: *const XpushmemOpsTensor,
        root: i64,
        group_pes: *const i32,
        group_size: i32,
    );
    fn xpushmem_ops_nvshmem_broadcast_on_queue(.., ze_command_list);
    |sh, CALL, list| {
        // SAFETY: forwarded caller contract on every pointer.
        let (t, g) = unsafe {
            (
                view(sh, tensor, "tensor", CALL)?,
                group(sh, group_pes, group_size, CALL)?,
            )
        };
        dispatch(
            sh,
            CALL,
            list,
            || xpushmem_ops::nvshmem_broadcast(sh, &g, &t, root),
            |ops, l| ops.nvshmem_broadcast(sh, l, &g, &t, root),
        )
    }
}

ops_fn! {
    /// `symm_mem::nvshmem_put` (`peer` is a global PE).
    ///
    /// # Safety
    /// `tensor` must point to a valid descriptor.
    fn xpushmem_ops_nvshmem_put(tensor: *const XpushmemOpsTensor, peer: i64);
    fn xpushmem_ops_nvshmem_put_on_queue(.., ze_command_list);
    |sh, CALL, list| {
        // SAFETY: forwarded caller contract on tensor.
        let t = unsafe { view(sh, tensor, "tensor", CALL) }?;
        dispatch(
            sh,
            CALL,
            list,
            || xpushmem_ops::nvshmem_put(sh, &t, peer),
            |ops, l| ops.nvshmem_put(sh, l, &t, peer),
        )
    }
}

ops_fn! {
    /// `symm_mem::nvshmem_get` (`peer` is a global PE).
    ///
    /// # Safety
    /// `tensor` must point to a valid descriptor.
    fn xpushmem_ops_nvshmem_get(tensor: *const XpushmemOpsTensor, peer: i64);
    fn xpushmem_ops_nvshmem_get_on_queue(.., ze_command_list);
    |sh, CALL, list| {
        // SAFETY: forwarded caller contract on tensor.
        let t = unsafe { view(sh, tensor, "tensor", CALL) }?;
        dispatch(
            sh,
            CALL,
            list,
            || xpushmem_ops::nvshmem_get(sh, &t, peer),
            |ops, l| ops.nvshmem_get(sh, l, &t, peer),
        )
    }
}

ops_fn! {
    /// `symm_mem::nvshmem_put_with_signal`: data, then a 64-bit SET of the peer's first `sigpad` word to `signal`.
    ///
    /// # Safety
    /// `tensor` and `sigpad` must point to valid descriptors.
    fn xpushmem_ops_nvshmem_put_with_signal(
        tensor: *const XpushmemOpsTensor,
        sigpad: *const XpushmemOpsTensor,
        signal: i64,
        peer: i64,
    );
    fn xpushmem_ops_nvshmem_put_with_signal_on_queue(.., ze_command_list);
    |sh, CALL, list| {
        // SAFETY: forwarded caller contract on both pointers.
        let (t, s) = unsafe {
            (
                view(sh, tensor, "tensor", CALL)?,
                view(sh, sigpad, "sigpad", CALL)?,
            )
        };
        dispatch(
            sh,
            CALL,
            list,
            || xpushmem_ops::nvshmem_put_with_signal(sh, &t, &s, signal, peer),
            |ops, l| ops.nvshmem_put_with_signal(sh, l, &t, &s, signal, peer),
        )
    }
}

ops_fn! {
    /// `symm_mem::nvshmem_wait_for_signal`: wait until this PE's first `sigpad` word equals `signal` (`peer`
    /// ignored; times out after `XPUSHMEM_TIMEOUT_MS`).
    ///
    /// # Safety
    /// `sigpad` must point to a valid descriptor.
    fn xpushmem_ops_nvshmem_wait_for_signal(sigpad: *const XpushmemOpsTensor, signal: i64, peer: i64);
    fn xpushmem_ops_nvshmem_wait_for_signal_on_queue(.., ze_command_list);
    |sh, CALL, list| {
        // SAFETY: forwarded caller contract on sigpad.
        let s = unsafe { view(sh, sigpad, "sigpad", CALL)? };
        dispatch(
            sh,
            CALL,
            list,
            || xpushmem_ops::nvshmem_wait_for_signal(sh, &s, signal, peer),
            |ops, l| ops.nvshmem_wait_for_signal(sh, l, &s, signal, peer),
        )
    }
}

// ---- symm_mem's collectives (device path only) ------------------------------------------------------------------

/// Run a symm op on the device path: `list` = `Some` enqueues on the caller's list, `None` on the runtime's own
/// queue and waits. A rank whose arguments are rejected on the host gets its error from the entry point at once
/// (upstream raises it at the call), while its kernel still joins the group's verdict so that its peers fail
/// ("rejected its arguments") instead of waiting. The host path has no symm kernels (the CPU registration runs
/// them in Python): `XPUSHMEM_OPS_PATH=host` and host heaps are an error.
pub(crate) fn dispatch_symm(
    sh: &Shmem,
    call: &str,
    list: Option<*mut c_void>,
    dev: impl FnOnce(&DeviceOps, CommandList) -> Result<OpHandle>,
) -> Result<()> {
    if ops_path(sh)? == OpsPath::Host {
        return Err(Error::InvalidArgument {
            name: "XPUSHMEM_OPS_PATH",
            value: "host".into(),
            reason: format!(
                "{call}: symm_mem's collectives run on the device path only (device heaps, XPUSHMEM_OPS_PATH auto or device); on CPU tensors the torch package runs them in Python"
            ),
        });
    }
    run_on_device(sh, call, list, dev)
}

/// Run an op whose path is the device's (checked by the caller): `list` = `Some` enqueues on the caller's list,
/// `None` on the runtime's own queue and waits; a rank rejected on the host gets its error at once (as
/// [`dispatch_symm`]).
pub(crate) fn run_on_device(
    sh: &Shmem,
    call: &str,
    list: Option<*mut c_void>,
    dev: impl FnOnce(&DeviceOps, CommandList) -> Result<OpHandle>,
) -> Result<()> {
    let mut d = DEV.lock().unwrap_or_else(|p| p.into_inner());
    let st = d.as_mut().ok_or_else(|| {
        Error::State(format!(
            "{call}: the ops' device path is not set up on this PE; it is set up collectively by xpushmem_ops_init or the first group registration"
        ))
    })?;
    match list {
        Some(l) => {
            if l.is_null() {
                return Err(null_arg("ze_command_list", call));
            }
            reap(sh, st);
            // SAFETY: the `_on_queue` entry points' contract: a live list of the runtime's context and device
            // that outlives the op.
            let list = unsafe { CommandList::from_raw(l) };
            let h = dev(&st.ops, list)?;
            if let Some(e) = h.rejected().cloned() {
                st.reported.push(h);
                return Err(e);
            }
            st.pending.push(h);
            Ok(())
        }
        None => {
            let h = dev(&st.ops, st.queue.list())?;
            sh.device()
                .ok_or_else(|| Error::State("device path without a device".into()))?
                .submit_and_wait(&st.queue)?;
            h.wait(sh)
        }
    }
}

/// A symm op's tensor argument: a view of the symmetric heap when `data` lies in it, otherwise device memory
/// outside it (an op's local input or output).
///
/// # Safety
/// As for [`view`]; a tensor outside the heap must be device-accessible memory of the runtime's context that
/// stays allocated until the op has run.
pub(crate) unsafe fn operand(
    sh: &Shmem,
    t: *const XpushmemOpsTensor,
    name: &'static str,
    call: &str,
) -> Result<Operand> {
    // SAFETY: forwarded caller contract.
    match unsafe { view(sh, t, name, call) } {
        Ok(v) => Ok(Operand::Heap(v)),
        Err(Error::NotSymmetric { .. }) => {
            // SAFETY: t is non-null (view checked it) and valid (contract).
            let c = unsafe { *t };
            let dtype = DType::from_code(c.dtype)?;
            // SAFETY: sizes (and non-null strides) hold ndim elements (contract).
            let sizes = unsafe { array(c.sizes, c.ndim as i64, name, call)? };
            let shape: Vec<usize> = sizes.iter().map(|&x| x.max(0) as usize).collect();
            let strides: Option<Vec<usize>> = if c.strides.is_null() {
                None
            } else {
                // SAFETY: as above.
                let s = unsafe { array(c.strides, c.ndim as i64, name, call)? };
                Some(s.iter().map(|&x| x.max(0) as usize).collect())
            };
            let numel: usize = shape.iter().product();
            let extent = if numel == 0 {
                0
            } else {
                let st = strides
                    .clone()
                    .unwrap_or_else(|| xpushmem_ops::tensor::contiguous_strides(&shape));
                shape
                    .iter()
                    .zip(&st)
                    .map(|(&n, &s)| (n - 1).saturating_mul(s))
                    .fold(0usize, usize::saturating_add)
                    .saturating_add(1)
                    .saturating_mul(dtype.size())
            };
            // SAFETY: the caller's contract: device memory of the runtime's context, alive until the op has run.
            let range = unsafe { DeviceRange::new(c.data as u64, extent) };
            Ok(Operand::Local(LocalTensor::new(
                range,
                dtype,
                &shape,
                strides.as_deref(),
            )?))
        }
        Err(e) => Err(e),
    }
}

ops_fn! {
    /// `symm_mem::one_shot_all_reduce_out` (`local_input` NULL) and `one_shot_all_reduce_copy_out`: `out` becomes the
    /// sum over the group of the ranks' `input` (symmetric), added in group-rank order in the element type (float32 or
    /// bfloat16); with `local_input`, it is first copied into this rank's `input`. `reduce_op` NULL = "sum". `out`
    /// and `local_input` may lie outside the symmetric heap (device memory of the runtime's context). Device path
    /// only: on the runtime's own queue, waiting. Errors carry upstream's messages.
    ///
    /// # Safety
    /// Tensor pointers must point to valid descriptors (`local_input` may be NULL); `reduce_op` NULL or
    /// NUL-terminated; `group_pes` NULL or `group_size` readable `int32_t`s; tensors outside the heap must be live
    /// device memory of the runtime's context.
    fn xpushmem_ops_one_shot_all_reduce(
        input: *const XpushmemOpsTensor,
        local_input: *const XpushmemOpsTensor,
        reduce_op: *const c_char,
        out: *const XpushmemOpsTensor,
        group_pes: *const i32,
        group_size: i32,
    );
    /// [`xpushmem_ops_one_shot_all_reduce`] appended to the Level Zero command list `ze_command_list` without waiting;
    /// the outcome is reported by [`xpushmem_ops_queue_wait`] (a rejected argument is returned at once).
    ///
    /// # Safety
    /// As for [`xpushmem_ops_one_shot_all_reduce`]; `ze_command_list` must be a live command list of the runtime's
    /// context and device that stays alive (and the tensors allocated) until the op has run.
    fn xpushmem_ops_one_shot_all_reduce_on_queue(.., ze_command_list);
    |sh, CALL, list| {
        // SAFETY: forwarded caller contract on every pointer.
        let (i, l, op, o, g) = unsafe {
            (
                operand(sh, input, "input", CALL)?,
                if local_input.is_null() {
                    None
                } else {
                    Some(operand(sh, local_input, "local_input", CALL)?)
                },
                reduce_op_arg(reduce_op, CALL)?,
                operand(sh, out, "out", CALL)?,
                group(sh, group_pes, group_size, CALL)?,
            )
        };
        dispatch_symm(sh, CALL, list, |ops, lst| {
            ops.one_shot_all_reduce(sh, lst, &g, &i, l.as_ref(), &op, &o)
        })
    }
}

ops_fn! {
    /// `symm_mem::two_shot_all_reduce_` (`output` NULL: in place in every rank's `input`) and
    /// `two_shot_all_reduce_out`. Device path only (waits); errors carry upstream's messages.
    ///
    /// # Safety
    /// As for [`xpushmem_ops_one_shot_all_reduce`] (`output` may be NULL).
    fn xpushmem_ops_two_shot_all_reduce(
        input: *const XpushmemOpsTensor,
        output: *const XpushmemOpsTensor,
        reduce_op: *const c_char,
        group_pes: *const i32,
        group_size: i32,
    );
    /// [`xpushmem_ops_two_shot_all_reduce`] appended to `ze_command_list` without waiting (see
    /// [`xpushmem_ops_one_shot_all_reduce_on_queue`]).
    ///
    /// # Safety
    /// As for [`xpushmem_ops_one_shot_all_reduce_on_queue`].
    fn xpushmem_ops_two_shot_all_reduce_on_queue(.., ze_command_list);
    |sh, CALL, list| {
        // SAFETY: forwarded caller contract on every pointer.
        let (i, o, op, g) = unsafe {
            (
                operand(sh, input, "input", CALL)?,
                if output.is_null() {
                    None
                } else {
                    Some(operand(sh, output, "output", CALL)?)
                },
                reduce_op_arg(reduce_op, CALL)?,
                group(sh, group_pes, group_size, CALL)?,
            )
        };
        dispatch_symm(sh, CALL, list, |ops, lst| {
            ops.two_shot_all_reduce(sh, lst, &g, &i, o.as_ref(), &op)
        })
    }
}

ops_fn! {
    /// `symm_mem::reduce_scatter_out`: this rank's `output` becomes the sum over the group of its slice of the ranks'
    /// `input` (of the flat tensor, or with `split_last_dim` != 0 of the last dimension). Device path only (waits);
    /// errors carry upstream's messages.
    ///
    /// # Safety
    /// As for [`xpushmem_ops_one_shot_all_reduce`].
    fn xpushmem_ops_reduce_scatter_out(
        input: *const XpushmemOpsTensor,
        split_last_dim: i32,
        output: *const XpushmemOpsTensor,
        group_pes: *const i32,
        group_size: i32,
    );
    /// [`xpushmem_ops_reduce_scatter_out`] appended to `ze_command_list` without waiting (see
    /// [`xpushmem_ops_one_shot_all_reduce_on_queue`]).
    ///
    /// # Safety
    /// As for [`xpushmem_ops_one_shot_all_reduce_on_queue`].
    fn xpushmem_ops_reduce_scatter_out_on_queue(.., ze_command_list);
    |sh, CALL, list| {
        // SAFETY: forwarded caller contract on every pointer.
        let (i, o, g) = unsafe {
            (
                operand(sh, input, "input", CALL)?,
                operand(sh, output, "output", CALL)?,
                group(sh, group_pes, group_size, CALL)?,
            )
        };
        dispatch_symm(sh, CALL, list, |ops, lst| {
            ops.reduce_scatter_out(sh, lst, &g, &i, split_last_dim != 0, &o)
        })
    }
}

ops_fn! {
    /// `symm_mem::memset32_`: words `[offset, offset + count)` of a flat, contiguous 32-bit tensor (dtype 7; a torch
    /// caller checks `uint32` itself) set to `val` (a uint32). Device path only (waits); errors carry upstream's
    /// messages and are returned before anything is enqueued.
    ///
    /// # Safety
    /// `input` must point to a valid descriptor; outside the heap, of live device memory of the runtime's context.
    fn xpushmem_ops_memset32(input: *const XpushmemOpsTensor, offset: i64, val: i64, count: i64);
    /// [`xpushmem_ops_memset32`] appended to `ze_command_list` without waiting.
    ///
    /// # Safety
    /// As for [`xpushmem_ops_memset32`]; `ze_command_list` must be a live command list of the runtime's context and
    /// device that stays alive (and the tensor allocated) until the op has run.
    fn xpushmem_ops_memset32_on_queue(.., ze_command_list);
    |sh, CALL, list| {
        // SAFETY: forwarded caller contract.
        let i = unsafe { operand(sh, input, "input", CALL)? };
        dispatch_symm(sh, CALL, list, |ops, lst| {
            ops.memset32(sh, lst, &i, offset, val, count)
        })
    }
}

ops_fn! {
    /// `symm_mem::stream_write_value32_`: one 32-bit release store of `val` at word `offset` of a flat, contiguous
    /// 32-bit tensor, after everything before it on the queue. Device path only (waits); errors carry upstream's
    /// messages and are returned before anything is enqueued.
    ///
    /// # Safety
    /// As for [`xpushmem_ops_memset32`].
    fn xpushmem_ops_stream_write_value32(input: *const XpushmemOpsTensor, offset: i64, val: i64);
    /// [`xpushmem_ops_stream_write_value32`] appended to `ze_command_list` without waiting.
    ///
    /// # Safety
    /// As for [`xpushmem_ops_memset32_on_queue`].
    fn xpushmem_ops_stream_write_value32_on_queue(.., ze_command_list);
    |sh, CALL, list| {
        // SAFETY: forwarded caller contract.
        let i = unsafe { operand(sh, input, "input", CALL)? };
        dispatch_symm(sh, CALL, list, |ops, lst| {
            ops.stream_write_value32(sh, lst, &i, offset, val)
        })
    }
}

// ---- the symm_mem handle's signal pad (device path only) ---------------------------------------------------------

ops_fn! {
    /// The symm_mem handle's signal-pad operations as one device kernel: `mode` 1 = `barrier(channel)` (every rank of
    /// the handle), 2 = `put_signal(rank, channel)`, 3 = `wait_signal(rank, channel)` (`rank` is ignored by the
    /// barrier). `pad` is this PE's address of the handle's signal pad (`pad_bytes` bytes of symmetric memory, 32-bit
    /// words, zeroed at allocation), `group_pes[0..group_size]` the handle's rank -> global PE table (this PE among
    /// them). The protocol is the host version's: a signal moves the peer's word `[channel * W + my rank]` from 0 to 1
    /// (after every earlier write of this PE: release), a wait moves my word `[channel * W + rank]` from 1 to 0
    /// (acquire), each retried with back-off until `XPUSHMEM_TIMEOUT_MS`, then a Timeout naming the op, rank, peer rank
    /// and channel. Bad channel or rank: the host version's message, nothing enqueued. Device path only (waits).
    ///
    /// # Safety
    /// `group_pes` must point to `group_size` readable `int32_t`s; `pad` must be symmetric memory of the runtime.
    fn xpushmem_ops_signal_pad(
        mode: i32,
        pad: *mut c_void,
        pad_bytes: i64,
        channel: i32,
        rank: i32,
        group_pes: *const i32,
        group_size: i32,
    );
    /// [`xpushmem_ops_signal_pad`] appended to `ze_command_list` without waiting (the outcome comes from
    /// [`xpushmem_ops_queue_wait`]).
    ///
    /// # Safety
    /// As for [`xpushmem_ops_signal_pad`]; `ze_command_list` must be a live command list of the runtime's context and
    /// device that stays alive until the op has run.
    fn xpushmem_ops_signal_pad_on_queue(.., ze_command_list);
    |sh, CALL, list| {
        if pad.is_null() {
            return Err(null_arg("pad", CALL));
        }
        if pad_bytes < 0 {
            return Err(Error::invalid(
                "pad_bytes",
                pad_bytes,
                format!("{CALL}: must be non-negative"),
            ));
        }
        let slice = sh.sym_slice_in::<u8>(pad as usize, pad_bytes as usize, 4, &|| {
            format!("{CALL}: pad")
        })?;
        // SAFETY: group_pes holds group_size elements (the caller's contract).
        let raw = unsafe { array(group_pes, group_size as i64, "group_pes", CALL)? };
        if raw.is_empty() {
            return Err(null_arg("group_pes", CALL));
        }
        let mut pes = Vec::with_capacity(raw.len());
        for (i, &p) in raw.iter().enumerate() {
            if p < 0 || p as usize >= sh.n_pes() {
                return Err(Error::InvalidPe {
                    pe: p as i64,
                    n_pes: sh.n_pes(),
                    context: format!("{CALL}: group_pes[{i}]"),
                });
            }
            pes.push(p as usize);
        }
        dispatch_symm(sh, CALL, list, |ops, lst| {
            ops.signal_pad(
                sh,
                lst,
                mode as u64,
                slice,
                &pes,
                channel as i64,
                rank as i64,
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn msg() -> String {
        // SAFETY: xpushmem_ops_last_error returns a valid NUL-terminated string owned by this thread.
        unsafe { CStr::from_ptr(xpushmem_ops_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    struct T {
        sizes: Vec<i64>,
        strides: Option<Vec<i64>>,
        data: usize,
        dtype: i32,
    }

    impl T {
        fn c(&self) -> XpushmemOpsTensor {
            XpushmemOpsTensor {
                data: self.data as *mut c_void,
                dtype: self.dtype,
                ndim: self.sizes.len() as i32,
                sizes: self.sizes.as_ptr(),
                strides: self
                    .strides
                    .as_ref()
                    .map_or(std::ptr::null(), |s| s.as_ptr()),
            }
        }
    }

    /// Allocate `bytes` of symmetric memory filled with `fill`; its local address.
    fn alloc(bytes: usize, fill: &[u8]) -> usize {
        with_rt(|sh| {
            let s = sh.malloc::<u8>(bytes)?;
            let mut v = fill.to_vec();
            v.resize(bytes, 0);
            sh.put(s, &v, sh.my_pe())?;
            Ok(sh.heap_base() as usize + s.heap_offset())
        })
        .unwrap()
    }

    fn read(addr: usize, bytes: usize) -> Vec<u8> {
        with_rt(|sh| {
            let s = sh.sym_slice_from_addr::<u8>(addr, bytes)?;
            let mut v = vec![0u8; bytes];
            sh.get(&mut v, s, sh.my_pe())?;
            Ok(v)
        })
        .unwrap()
    }

    fn i64s(v: &[i64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn c_abi_on_one_pe() {
        assert_eq!(xpushmem_ops_init(), 0, "{}", msg());
        assert_eq!(xpushmem_ops_init(), 0, "a second init is a no-op");
        let f32s: Vec<u8> = (0..16).flat_map(|i| (i as f32).to_le_bytes()).collect();
        let input = T {
            sizes: vec![8, 2],
            strides: None,
            data: alloc(64, &f32s),
            dtype: 0,
        };
        let out = T {
            sizes: vec![8, 2],
            strides: None,
            data: alloc(64, &[]),
            dtype: 0,
        };
        let splits = T {
            sizes: vec![1],
            strides: None,
            data: alloc(8, &i64s(&[5])),
            dtype: 8,
        };
        let oso = T {
            sizes: vec![2, 1],
            strides: None,
            data: alloc(16, &i64s(&[-1, -1])),
            dtype: 8,
        };
        let world = [0i32];
        let (i, o, s, so) = (input.c(), out.c(), splits.c(), oso.c());

        // all_to_all_vdev on the world (NULL group) and on an explicit group.
        // SAFETY: every descriptor points to live vectors and symmetric memory; NULL group with size 0.
        let rc = unsafe { xpushmem_ops_all_to_all_vdev(&i, &o, &s, &so, std::ptr::null(), 0) };
        assert_eq!(rc, 0, "{}", msg());
        assert_eq!(xpushmem_ops_last_error_code(), 0);
        assert_eq!(read(out.data, 40), f32s[..40]);
        assert_eq!(read(oso.data, 16), i64s(&[5, 0]));
        // SAFETY: as above, group_pes points to one int32.
        let rc = unsafe { xpushmem_ops_group_register(world.as_ptr(), 1) };
        assert_eq!(rc, 0, "{}", msg());

        // 2d: NULL major_align is PyTorch's default; 0 is rejected with PyTorch's message.
        let align = 0i64;
        // SAFETY: as above; major_align points to a live i64.
        let rc =
            unsafe { xpushmem_ops_all_to_all_vdev_2d(&i, &o, &s, &so, world.as_ptr(), 1, &align) };
        assert_eq!(rc, boundary::XPUSHMEM_ERROR_INVALID_ARGUMENT);
        assert!(msg().contains("major_align must be positive"), "{}", msg());
        assert_eq!(
            xpushmem_ops_last_error_code(),
            boundary::XPUSHMEM_ERROR_INVALID_ARGUMENT
        );
        // SAFETY: as above, NULL major_align.
        let rc = unsafe {
            xpushmem_ops_all_to_all_vdev_2d(&i, &o, &s, &so, world.as_ptr(), 1, std::ptr::null())
        };
        assert_eq!(rc, 0, "{}", msg());
        // Combine back with the dispatch's splits/offsets.
        let cout = T {
            sizes: vec![8, 2],
            strides: None,
            data: alloc(64, &[]),
            dtype: 0,
        };
        let coso = T {
            sizes: vec![2, 1],
            strides: None,
            data: alloc(16, &[]),
            dtype: 8,
        };
        // SAFETY: as above.
        let rc = unsafe {
            xpushmem_ops_all_to_all_vdev_2d_offset(&o, &cout.c(), &so, &coso.c(), world.as_ptr(), 1)
        };
        assert_eq!(rc, 0, "{}", msg());
        assert_eq!(read(cout.data, 40), f32s[..40]);

        // Errors: NULL tensor, a pointer outside the heap, a bad dtype, bad groups.
        // SAFETY: NULL input is checked; the rest as above.
        let rc = unsafe {
            xpushmem_ops_all_to_all_vdev(std::ptr::null(), &o, &s, &so, std::ptr::null(), 0)
        };
        assert_eq!(rc, boundary::XPUSHMEM_ERROR_INVALID_ARGUMENT);
        assert!(msg().contains("input = NULL"), "{}", msg());
        let local = [0f32; 16];
        let stack = T {
            sizes: vec![8, 2],
            strides: None,
            data: local.as_ptr() as usize,
            dtype: 0,
        };
        // SAFETY: the descriptor is valid; its data pointer is outside the heap, which is checked.
        let rc =
            unsafe { xpushmem_ops_all_to_all_vdev(&stack.c(), &o, &s, &so, std::ptr::null(), 0) };
        assert_eq!(rc, boundary::XPUSHMEM_ERROR_NOT_SYMMETRIC);
        assert!(
            msg().contains("input is not in symmetric memory"),
            "{}",
            msg()
        );
        let bad = T {
            sizes: vec![8, 2],
            strides: None,
            data: input.data,
            dtype: 42,
        };
        // SAFETY: as above.
        let rc =
            unsafe { xpushmem_ops_all_to_all_vdev(&bad.c(), &o, &s, &so, std::ptr::null(), 0) };
        assert_eq!(rc, boundary::XPUSHMEM_ERROR_INVALID_ARGUMENT);
        assert!(msg().contains("dtype"), "{}", msg());
        let neg = T {
            sizes: vec![-1, 2],
            strides: None,
            data: input.data,
            dtype: 0,
        };
        // SAFETY: as above.
        let rc =
            unsafe { xpushmem_ops_all_to_all_vdev(&neg.c(), &o, &s, &so, std::ptr::null(), 0) };
        assert_eq!(rc, boundary::XPUSHMEM_ERROR_INVALID_ARGUMENT);
        // SAFETY: NULL group with a non-zero size is checked.
        let rc = unsafe { xpushmem_ops_all_to_all_vdev(&i, &o, &s, &so, std::ptr::null(), 3) };
        assert_eq!(rc, boundary::XPUSHMEM_ERROR_INVALID_ARGUMENT);
        let far = [5i32];
        // SAFETY: group_pes points to one int32.
        let rc = unsafe { xpushmem_ops_all_to_all_vdev(&i, &o, &s, &so, far.as_ptr(), 1) };
        assert_eq!(rc, boundary::XPUSHMEM_ERROR_INVALID_PE);
        assert!(msg().contains("group_pes[0]"), "{}", msg());

        // tile_reduce over strided 2x2 tiles of 4x4 bf16 matrices; NULL reduce_op = "sum".
        let bf: Vec<u8> = (0..16u16)
            .flat_map(|i| xpushmem_ops::dtype::f32_to_bf16(i as f32).to_le_bytes())
            .collect();
        let tin = T {
            sizes: vec![2, 2],
            strides: Some(vec![4, 1]),
            data: alloc(32, &bf) + 2 * 5,
            dtype: 2,
        };
        let tout = T {
            sizes: vec![2, 2],
            strides: Some(vec![4, 1]),
            data: alloc(32, &[]) + 2 * 5,
            dtype: 2,
        };
        // SAFETY: valid descriptors with strides arrays of ndim entries; NULL reduce_op.
        let rc = unsafe {
            xpushmem_ops_tile_reduce(
                &tin.c(),
                &tout.c(),
                0,
                std::ptr::null(),
                0,
                std::ptr::null(),
            )
        };
        assert_eq!(rc, 0, "{}", msg());
        assert_eq!(read(tout.data, 4), bf[10..14]);
        assert_eq!(read(tout.data + 8, 4), bf[18..22]);
        let max = c"max";
        // SAFETY: as above; reduce_op is a NUL-terminated literal.
        let rc = unsafe {
            xpushmem_ops_tile_reduce(&tin.c(), &tout.c(), 0, std::ptr::null(), 0, max.as_ptr())
        };
        assert_eq!(rc, boundary::XPUSHMEM_ERROR_INVALID_ARGUMENT);
        assert!(msg().contains("only sum is supported"), "{}", msg());
        // SAFETY: as above.
        let rc = unsafe {
            xpushmem_ops_tile_reduce(
                &tin.c(),
                &tout.c(),
                1,
                std::ptr::null(),
                0,
                std::ptr::null(),
            )
        };
        assert_eq!(rc, boundary::XPUSHMEM_ERROR_INVALID_PE);

        // multi_root_tile_reduce: two tiles, one root each would need two ranks; a duplicate root is an error.
        let tiles = [tin.c(), tin.c()];
        let roots = [0i64, 0];
        // SAFETY: tiles and roots hold 2 entries each.
        let rc = unsafe {
            xpushmem_ops_multi_root_tile_reduce(
                tiles.as_ptr(),
                2,
                &tout.c(),
                roots.as_ptr(),
                2,
                std::ptr::null(),
                0,
                std::ptr::null(),
            )
        };
        assert_eq!(rc, boundary::XPUSHMEM_ERROR_INVALID_ARGUMENT);
        assert!(
            msg().contains("Each rank can only be a root once"),
            "{}",
            msg()
        );
        // SAFETY: one tile, one root.
        let rc = unsafe {
            xpushmem_ops_multi_root_tile_reduce(
                tiles.as_ptr(),
                1,
                &tout.c(),
                roots.as_ptr(),
                1,
                std::ptr::null(),
                0,
                std::ptr::null(),
            )
        };
        assert_eq!(rc, 0, "{}", msg());

        // broadcast, all_to_all, put/get, signals.
        // SAFETY: valid descriptors, NULL group.
        unsafe {
            assert_eq!(
                xpushmem_ops_nvshmem_broadcast(&i, 0, std::ptr::null(), 0),
                0,
                "{}",
                msg()
            );
            assert_eq!(
                xpushmem_ops_nvshmem_broadcast(&i, 1, std::ptr::null(), 0),
                boundary::XPUSHMEM_ERROR_INVALID_PE
            );
            assert_eq!(
                xpushmem_ops_nvshmem_all_to_all(&i, &cout.c(), std::ptr::null(), 0),
                0,
                "{}",
                msg()
            );
            assert_eq!(xpushmem_ops_nvshmem_put(&i, 0), 0, "{}", msg());
            assert_eq!(xpushmem_ops_nvshmem_get(&i, 0), 0, "{}", msg());
            assert_eq!(
                xpushmem_ops_nvshmem_put(&i, -1),
                boundary::XPUSHMEM_ERROR_INVALID_PE
            );
            assert!(msg().contains("invalid PE -1"), "{}", msg());
            assert_eq!(
                xpushmem_ops_nvshmem_get(&i, 1),
                boundary::XPUSHMEM_ERROR_INVALID_PE
            );
        }
        assert_eq!(read(cout.data, 64), f32s);
        let pad = T {
            sizes: vec![4],
            strides: None,
            data: alloc(16, &[]),
            dtype: 7,
        };
        // SAFETY: valid descriptors.
        unsafe {
            assert_eq!(
                xpushmem_ops_nvshmem_put_with_signal(&i, &pad.c(), 42, 0),
                0,
                "{}",
                msg()
            );
            assert_eq!(
                xpushmem_ops_nvshmem_wait_for_signal(&pad.c(), 42, 0),
                0,
                "{}",
                msg()
            );
        }
        assert_eq!(read(pad.data, 8), 42u64.to_le_bytes());
        // Empty tensors may have a NULL data pointer.
        let empty = T {
            sizes: vec![0],
            strides: None,
            data: 0,
            dtype: 0,
        };
        // SAFETY: valid descriptor (NULL data with zero elements).
        let rc = unsafe { xpushmem_ops_nvshmem_put(&empty.c(), 0) };
        assert_eq!(rc, 0, "{}", msg());
    }
}
