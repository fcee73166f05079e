//! C ABI of expert-parallel dispatch and combine (`xpushmem_ops::ep::TokenSwitch`, host path): a switch and its
//! routings are integer handles (never pointers: a stale or wrong handle is an error, not undefined behaviour);
//! tensors are plain host arrays (row-major, contiguous), not symmetric memory: the switch's own symmetric buffers
//! carry the tokens. Declared in `include/xpushmem_ops.h` with the op family; same error boundary
//! (`xpushmem_last_error()`).

use crate::ops::{array, entry, group, operand, run_on_device, with_rt, XpushmemOpsTensor};
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Once};
use xpushmem_ffi_core::rt::{Error, Result};
use xpushmem_ffi_core::state;
use xpushmem_ops::ep::{DeviceRouting, EpConfig, Layout, Routing, TokenSwitch};
use xpushmem_ops::{ep_path, Operand, OpsPath};
use xpushmem_ops::{DType, Group};

/// A switch and the group it runs on.
struct Switch {
    group: Arc<Group>,
    ts: TokenSwitch,
}

/// The live switches and routings by handle (a routing remembers its switch's handle).
#[derive(Default)]
struct Handles {
    switches: HashMap<i64, Arc<Switch>>,
    routings: HashMap<i64, (i64, Arc<Routing>)>,
    /// Routings made on the device path (`_on_queue`), with their switch's handle.
    dev_routings: HashMap<i64, (i64, Arc<DeviceRouting>)>,
}

static HANDLES: Mutex<Option<Handles>> = Mutex::new(None);
static NEXT: AtomicI64 = AtomicI64::new(1);
static FORGET_AT_FINALIZE: Once = Once::new();

fn handles<R>(f: impl FnOnce(&mut Handles) -> R) -> R {
    FORGET_AT_FINALIZE.call_once(|| state::on_finalize(|| *lock() = None));
    f(lock().get_or_insert_with(Handles::default))
}

/// A new handle, entered into the tables by `enter`.
fn register<R>(enter: impl FnOnce(&mut Handles, i64) -> R) -> i64 {
    let h = NEXT.fetch_add(1, Ordering::Relaxed);
    handles(|m| enter(m, h));
    h
}

fn lock() -> std::sync::MutexGuard<'static, Option<Handles>> {
    HANDLES.lock().unwrap_or_else(|p| p.into_inner())
}

fn unknown(name: &'static str, h: i64, call: &str) -> Error {
    Error::InvalidArgument {
        name,
        value: h.to_string(),
        reason: format!("{call}: not a live handle (freed, or from a finalized runtime)"),
    }
}

fn switch_of(h: i64, call: &str) -> Result<Arc<Switch>> {
    handles(|m| m.switches.get(&h).cloned()).ok_or_else(|| unknown("switch", h, call))
}

fn routing_of(sw: i64, h: i64, call: &str) -> Result<Arc<Routing>> {
    of_switch(handles(|m| m.routings.get(&h).cloned()), sw, h, call)
}

/// The routing `h` found in a table (with its switch's handle), when it belongs to switch `sw`.
fn of_switch<T>(found: Option<(i64, Arc<T>)>, sw: i64, h: i64, call: &str) -> Result<Arc<T>> {
    match found {
        Some((s, r)) if s == sw => Ok(r),
        Some((s, _)) => Err(Error::InvalidArgument {
            name: "routing",
            value: h.to_string(),
            reason: format!("{call}: made by switch {s}, not {sw}"),
        }),
        None => Err(unknown("routing", h, call)),
    }
}

fn non_negative(name: &'static str, v: i64, call: &str) -> Result<usize> {
    usize::try_from(v).map_err(|_| Error::InvalidArgument {
        name,
        value: v.to_string(),
        reason: format!("{call}: must be non-negative"),
    })
}

fn too_large(name: &'static str, v: impl ToString, call: &str) -> Error {
    Error::InvalidArgument {
        name,
        value: v.to_string(),
        reason: format!("{call}: the array's size overflows"),
    }
}

/// `a * b` elements of the array `name`, or an error when the product overflows.
fn count(a: i64, b: i64, name: &'static str, call: &str) -> Result<i64> {
    a.checked_mul(b)
        .ok_or_else(|| too_large(name, format!("{a} x {b}"), call))
}

/// What [`op_args`] returns.
type OpArgs = (Arc<Switch>, Arc<Routing>, DType, usize, i64);

/// The arguments every op takes: the switch, its routing, the dtype, `hidden` and the row size in bytes.
fn op_args(sw: i64, routing: i64, dtype: i32, hidden: i64, call: &str) -> Result<OpArgs> {
    let it = switch_of(sw, call)?;
    let r = routing_of(sw, routing, call)?;
    let dt = DType::from_code(dtype)?;
    let h = non_negative("hidden", hidden, call)?;
    let rb = h
        .checked_mul(dt.size())
        .and_then(|b| i64::try_from(b).ok())
        .ok_or_else(|| too_large("hidden", hidden, call))?;
    Ok((it, r, dt, h, rb))
}

/// A C array as a mutable slice; NULL is allowed only for `n == 0`.
///
/// # Safety
/// `p` must be NULL or point to `n` writable `T`s, not aliased elsewhere, valid for `'a`.
unsafe fn array_mut<'a, T>(
    p: *mut T,
    n: i64,
    name: &'static str,
    call: &str,
) -> Result<&'a mut [T]> {
    let n = non_negative(name, n, call)?;
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(Error::InvalidArgument {
            name,
            value: "NULL".into(),
            reason: format!("{call}: must not be NULL"),
        });
    }
    // SAFETY: p is non-null and, by this function's contract, points to n writable, unaliased elements valid
    // for 'a.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
}

/// Build a token switch on the group `group_pes[0..group_size]` (NULL = the world) for `num_experts` experts
/// (a multiple of the group size), at most `max_dispatch_tokens` tokens dispatched and `max_recv_tokens` rows
/// received per rank and step, rows of at most `max_token_bytes` bytes and `max_topk` experts per token; its
/// handle in `*out_switch`. Collective over the world (every PE calls it at the same point with the same maxima).
///
/// # Safety
/// `group_pes` NULL or `group_size` readable `int32_t`s; `out_switch` a writable `int64_t`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn xpushmem_ops_ep_create(
    group_pes: *const i32,
    group_size: i32,
    num_experts: i64,
    max_dispatch_tokens: i64,
    max_recv_tokens: i64,
    max_token_bytes: i64,
    max_topk: i64,
    out_switch: *mut i64,
) -> c_int {
    const CALL: &str = "xpushmem_ops_ep_create";
    entry(CALL, || {
        with_rt(|sh| {
            // SAFETY: forwarded caller contract.
            let out = unsafe { array_mut(out_switch, 1, "out_switch", CALL)? };
            // SAFETY: forwarded caller contract on group_pes.
            let g = unsafe { group(sh, group_pes, group_size, CALL)? };
            let cfg = EpConfig {
                num_experts: non_negative("num_experts", num_experts, CALL)?,
                max_dispatch_tokens: non_negative(
                    "max_dispatch_tokens",
                    max_dispatch_tokens,
                    CALL,
                )?,
                max_recv_tokens: non_negative("max_recv_tokens", max_recv_tokens, CALL)?,
                max_token_bytes: non_negative("max_token_bytes", max_token_bytes, CALL)?,
                max_topk: non_negative("max_topk", max_topk, CALL)?,
            };
            let ts = TokenSwitch::new(sh, &g, cfg)?;
            out[0] = register(|m, h| m.switches.insert(h, Arc::new(Switch { group: g, ts })));
            Ok(())
        })
    })
}

/// Free a switch's buffers and forget it and its routings. Collective over the world, like its creation.
#[no_mangle]
pub extern "C" fn xpushmem_ops_ep_destroy(sw: i64) -> c_int {
    const CALL: &str = "xpushmem_ops_ep_destroy";
    entry(CALL, || {
        with_rt(|sh| {
            let gone = handles(|m| {
                m.routings.retain(|_, (s, _)| *s != sw);
                m.dev_routings.retain(|_, (s, _)| *s != sw);
                m.switches.remove(&sw)
            })
            .ok_or_else(|| unknown("switch", sw, CALL))?;
            match Arc::try_unwrap(gone) {
                Ok(it) => it.ts.free(sh),
                Err(_) => Err(Error::State(format!(
                    "{CALL}: switch {sw} is in use by another thread"
                ))),
            }
        })
    })
}

/// Upstream's `create_routing`: `topk_idx` is int64 `[n, k]` (row-major, `-1` = no expert), `layout` 0 flat or
/// 1 expert_major. Writes the routing's handle to `*out_routing`, this rank's dispatch output rows to
/// `*out_recv_rows`, and (when not NULL) the pairs each local expert receives to `expert_counts[0..num_experts /
/// W]`. Collective over the switch's group.
///
/// # Safety
/// `topk_idx` `n * k` readable `int64_t`s; `expert_counts` NULL or `num_experts / W` writable `int64_t`s;
/// `out_recv_rows` and `out_routing` writable `int64_t`s.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn xpushmem_ops_ep_create_routing(
    sw: i64,
    topk_idx: *const i64,
    n: i64,
    k: i64,
    layout: i32,
    expert_counts: *mut i64,
    out_recv_rows: *mut i64,
    out_routing: *mut i64,
) -> c_int {
    const CALL: &str = "xpushmem_ops_ep_create_routing";
    entry(CALL, || {
        with_rt(|sh| {
            let it = switch_of(sw, CALL)?;
            let (n, k) = (non_negative("n", n, CALL)?, non_negative("k", k, CALL)?);
            let layout = Layout::from_code(layout)?;
            // SAFETY: forwarded caller contract on every pointer.
            let (idx, rows, out) = unsafe {
                (
                    array(
                        topk_idx,
                        count(n as i64, k as i64, "topk_idx", CALL)?,
                        "topk_idx",
                        CALL,
                    )?,
                    array_mut(out_recv_rows, 1, "out_recv_rows", CALL)?,
                    array_mut(out_routing, 1, "out_routing", CALL)?,
                )
            };
            let r = it.ts.create_routing(sh, &it.group, idx, n, k, layout)?;
            if !expert_counts.is_null() {
                let l = r.expert_counts().len();
                // SAFETY: forwarded caller contract (num_experts / W entries).
                let ec = unsafe { array_mut(expert_counts, l as i64, "expert_counts", CALL)? };
                for (o, &c) in ec.iter_mut().zip(r.expert_counts()) {
                    *o = c as i64;
                }
            }
            rows[0] = r.recv_rows() as i64;
            out[0] = register(|m, h| m.routings.insert(h, (sw, Arc::new(r))));
            Ok(())
        })
    })
}

/// Forget a routing (local).
#[no_mangle]
pub extern "C" fn xpushmem_ops_ep_routing_destroy(routing: i64) -> c_int {
    const CALL: &str = "xpushmem_ops_ep_routing_destroy";
    entry(CALL, || {
        handles(|m| {
            let host = m.routings.remove(&routing).is_some();
            host || m.dev_routings.remove(&routing).is_some()
        })
        .then_some(())
        .ok_or_else(|| unknown("routing", routing, CALL).into())
    })
}

/// Upstream's `_dispatch` on the host path: `tokens` `[n, hidden]` of `dtype` (an `XPUSHMEM_OPS_DTYPE_*` code),
/// `topk_weights` float `[n, k]`; writes the first `recv_rows` rows of `out_tokens` (`out_rows` rows of `hidden`),
/// of `out_topk_weights` (`out_weights_len` floats: `[rows, k]` flat, `[rows]` expert_major) and, flat only, of
/// `out_topk_idx` (`out_idx_len` int64s; must be NULL for expert_major). Collective over the switch's group.
///
/// # Safety
/// Every array NULL only when its count is 0, else that many readable (inputs) or writable (outputs) elements
/// (`tokens`/`out_tokens` in bytes: rows x hidden x the dtype's size).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn xpushmem_ops_ep_dispatch(
    sw: i64,
    routing: i64,
    tokens: *const c_void,
    dtype: i32,
    hidden: i64,
    topk_weights: *const f32,
    out_tokens: *mut c_void,
    out_rows: i64,
    out_topk_weights: *mut f32,
    out_weights_len: i64,
    out_topk_idx: *mut i64,
    out_idx_len: i64,
) -> c_int {
    const CALL: &str = "xpushmem_ops_ep_dispatch";
    entry(CALL, || {
        with_rt(|sh| {
            let (it, r, dt, h, rb) = op_args(sw, routing, dtype, hidden, CALL)?;
            let (n, k) = (r.num_tokens() as i64, r.top_k() as i64);
            // SAFETY: forwarded caller contract on every pointer.
            let (x, w, out, ow) = unsafe {
                (
                    array(
                        tokens.cast::<u8>(),
                        count(n, rb, "tokens", CALL)?,
                        "tokens",
                        CALL,
                    )?,
                    array(
                        topk_weights,
                        count(n, k, "topk_weights", CALL)?,
                        "topk_weights",
                        CALL,
                    )?,
                    array_mut(
                        out_tokens.cast::<u8>(),
                        count(out_rows.max(0), rb, "out_tokens", CALL)?,
                        "out_tokens",
                        CALL,
                    )?,
                    array_mut(out_topk_weights, out_weights_len, "out_topk_weights", CALL)?,
                )
            };
            let oi = if out_topk_idx.is_null() {
                None
            } else {
                // SAFETY: forwarded caller contract.
                Some(unsafe { array_mut(out_topk_idx, out_idx_len, "out_topk_idx", CALL)? })
            };
            it.ts.dispatch(sh, &it.group, &r, x, dt, h, w, out, ow, oi)
        })
    })
}

/// Upstream's `_combine` on the host path: `expert_tokens` `[expert_rows, hidden]` of `dtype` (float32, float16
/// or bfloat16) in the routing's layout; `out` `[n, hidden]` (the routing's tokens) is overwritten with each
/// token's sum. Collective over the switch's group.
///
/// # Safety
/// `expert_tokens` `expert_rows x hidden` readable elements, `out` `n x hidden` writable ones (NULL only when
/// empty).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn xpushmem_ops_ep_combine(
    sw: i64,
    routing: i64,
    expert_tokens: *const c_void,
    expert_rows: i64,
    dtype: i32,
    hidden: i64,
    out: *mut c_void,
) -> c_int {
    const CALL: &str = "xpushmem_ops_ep_combine";
    entry(CALL, || {
        with_rt(|sh| {
            let (it, r, dt, h, rb) = op_args(sw, routing, dtype, hidden, CALL)?;
            // SAFETY: forwarded caller contract on every pointer.
            let (y, o) = unsafe {
                (
                    array(
                        expert_tokens.cast::<u8>(),
                        count(expert_rows.max(0), rb, "expert_tokens", CALL)?,
                        "expert_tokens",
                        CALL,
                    )?,
                    array_mut(
                        out.cast::<u8>(),
                        count(r.num_tokens() as i64, rb, "out", CALL)?,
                        "out",
                        CALL,
                    )?,
                )
            };
            it.ts.combine(sh, &it.group, &r, y, dt, h, o)
        })
    })
}

// ---- the device path: XPU tensors on the caller's Level Zero list ------------------------------------------

fn dev_routing_of(sw: i64, h: i64, call: &str) -> Result<Arc<DeviceRouting>> {
    of_switch(handles(|m| m.dev_routings.get(&h).cloned()), sw, h, call)
}

/// The device entry points need the EP ops' device path (`xpushmem_ops_ep_path`; the host path's entry points take
/// host arrays).
fn device_only(sh: &xpushmem_ffi_core::rt::Shmem, call: &str) -> Result<()> {
    if ep_path(sh)? == OpsPath::Host {
        return Err(Error::InvalidArgument {
            name: "XPUSHMEM_OPS_PATH",
            value: "host".into(),
            reason: format!(
                "{call}: the device path (device heaps, XPUSHMEM_OPS_PATH auto or device) runs on a queue; on the host path call the entry point without _on_queue (host arrays)"
            ),
        });
    }
    Ok(())
}

/// A tensor argument of the device entry points (NULL for an optional one).
///
/// # Safety
/// As for the op family's tensors: `t` NULL or a valid descriptor of device memory of the runtime's context
/// that stays allocated until the op has run.
unsafe fn opt_operand(
    sh: &xpushmem_ffi_core::rt::Shmem,
    t: *const XpushmemOpsTensor,
    name: &'static str,
    call: &str,
) -> Result<Option<Operand>> {
    if t.is_null() {
        return Ok(None);
    }
    // SAFETY: forwarded caller contract.
    unsafe { operand(sh, t, name, call) }.map(Some)
}

/// This PE's receive rows of switch `sw` (host heaps): their address in `*out_ptr` and their size in bytes
/// (`max_recv_tokens_per_rank * max_token_bytes`) in `*out_bytes`. A flat dispatch whose `out_tokens` is this
/// address writes no copy (its rows arrive there, back to back), and a flat combine whose `expert_tokens` is this
/// address reads them where they are (the experts computed in place). The contents stay valid until this rank's
/// next dispatch or combine of the switch, and must not be written once this rank has called combine until its
/// next op (the other ranks read them); the memory lives until the switch is destroyed. Device heaps: an error
/// (the device path copies into the caller's tensors).
///
/// # Safety
/// `out_ptr` a writable `void *`, `out_bytes` a writable `int64_t`.
#[no_mangle]
pub unsafe extern "C" fn xpushmem_ops_ep_recv_rows(
    sw: i64,
    out_ptr: *mut *mut c_void,
    out_bytes: *mut i64,
) -> c_int {
    const CALL: &str = "xpushmem_ops_ep_recv_rows";
    entry(CALL, || {
        with_rt(|sh| {
            // SAFETY: forwarded caller contract.
            let (p, b) = unsafe {
                (
                    array_mut(out_ptr, 1, "out_ptr", CALL)?,
                    array_mut(out_bytes, 1, "out_bytes", CALL)?,
                )
            };
            if sh.heap_kind() == xpushmem_ffi_core::rt::HeapKind::Device {
                return Err(Error::InvalidArgument {
                    name: "sw",
                    value: sw.to_string(),
                    reason: format!("{CALL}: the switch is on a device heap (host heaps only)"),
                });
            }
            let rows = switch_of(sw, CALL)?.ts.recv_rows()?;
            p[0] = sh.local_ptr(rows).cast::<c_void>();
            b[0] = rows.len() as i64;
            Ok(())
        })
    })
}

/// Bytes of device memory one routing of switch `sw` keeps its state in (the `state` of
/// [`xpushmem_ops_ep_create_routing_on_queue`]), in `*out_bytes`.
///
/// # Safety
/// `out_bytes` a writable `int64_t`.
#[no_mangle]
pub unsafe extern "C" fn xpushmem_ops_ep_state_bytes(sw: i64, out_bytes: *mut i64) -> c_int {
    const CALL: &str = "xpushmem_ops_ep_state_bytes";
    entry(CALL, || {
        // SAFETY: forwarded caller contract.
        let out = unsafe { array_mut(out_bytes, 1, "out_bytes", CALL)? };
        out[0] = switch_of(sw, CALL)?.ts.device_state_bytes() as i64;
        Ok(())
    })
}

/// Upstream's `create_routing` on the device path: appended to the Level Zero command list `ze_command_list`
/// without waiting. `topk_idx` int64 `[n, k]` and `state` (uint8, at least [`xpushmem_ops_ep_state_bytes`]
/// bytes) are device memory kept unchanged while the routing lives; the routing's handle in `*out_routing`. The
/// state holds, from byte 0, int64 `[2 + num_experts / W]`: this rank's received rows in the layout, its received
/// slots, the pairs each local expert receives. The outcome (an expert id out of range, a receive overflow on every
/// rank, a mismatch) is reported by `xpushmem_ops_queue_wait`; a rank whose arguments the host rejects gets its
/// error here, its kernel still joining the verdict. Collective over the switch's group; needs the device path.
///
/// # Safety
/// `topk_idx`, `state` valid descriptors of device memory of the runtime's context that outlive the op;
/// `out_routing` a writable `int64_t`; `ze_command_list` a live list of the runtime's context and device.
#[no_mangle]
pub unsafe extern "C" fn xpushmem_ops_ep_create_routing_on_queue(
    sw: i64,
    topk_idx: *const XpushmemOpsTensor,
    layout: i32,
    state: *const XpushmemOpsTensor,
    out_routing: *mut i64,
    ze_command_list: *mut c_void,
) -> c_int {
    const CALL: &str = "xpushmem_ops_ep_create_routing_on_queue";
    entry(CALL, || {
        with_rt(|sh| {
            let it = switch_of(sw, CALL)?;
            let layout = Layout::from_code(layout)?;
            // SAFETY: forwarded caller contract on every pointer.
            let (out, idx, st) = unsafe {
                (
                    array_mut(out_routing, 1, "out_routing", CALL)?,
                    operand(sh, topk_idx, "topk_idx", CALL)?,
                    operand(sh, state, "state", CALL)?,
                )
            };
            let mut made = None;
            device_only(sh, CALL)?;
            run_on_device(sh, CALL, Some(ze_command_list), |ops, list| {
                let (r, h) = it
                    .ts
                    .create_routing_on(sh, ops, list, &it.group, &idx, layout, &st)?;
                made = Some(r);
                Ok(h)
            })?;
            let r = made.ok_or_else(|| Error::State(format!("{CALL}: no routing")))?;
            out[0] = register(|m, h| m.dev_routings.insert(h, (sw, Arc::new(r))));
            Ok(())
        })
    })
}

/// Upstream's `_dispatch` on the device path, appended to `ze_command_list` without waiting: `tokens` `[n, hidden]`
/// (any dtype), `topk_weights` float32 `[n, k]`; outputs of `max_recv_tokens` rows (at least): `out_tokens`
/// `[rows, hidden]`, `out_topk_weights` float32 `[rows, k]` (flat) or `[rows]` (expert_major), `out_topk_idx`
/// int64 `[rows, k]` (flat; NULL for expert_major). Collective over the switch's group.
///
/// # Safety
/// As for [`xpushmem_ops_ep_create_routing_on_queue`]; `out_topk_idx` may be NULL.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn xpushmem_ops_ep_dispatch_on_queue(
    sw: i64,
    routing: i64,
    tokens: *const XpushmemOpsTensor,
    topk_weights: *const XpushmemOpsTensor,
    out_tokens: *const XpushmemOpsTensor,
    out_topk_weights: *const XpushmemOpsTensor,
    out_topk_idx: *const XpushmemOpsTensor,
    ze_command_list: *mut c_void,
) -> c_int {
    const CALL: &str = "xpushmem_ops_ep_dispatch_on_queue";
    entry(CALL, || {
        with_rt(|sh| {
            let it = switch_of(sw, CALL)?;
            let r = dev_routing_of(sw, routing, CALL)?;
            // SAFETY: forwarded caller contract on every pointer.
            let (x, w, o, ow, oi) = unsafe {
                (
                    operand(sh, tokens, "tokens", CALL)?,
                    operand(sh, topk_weights, "topk_weights", CALL)?,
                    operand(sh, out_tokens, "out_tokens", CALL)?,
                    operand(sh, out_topk_weights, "out_topk_weights", CALL)?,
                    opt_operand(sh, out_topk_idx, "out_topk_idx", CALL)?,
                )
            };
            device_only(sh, CALL)?;
            run_on_device(sh, CALL, Some(ze_command_list), |ops, list| {
                it.ts
                    .dispatch_on(sh, ops, list, &it.group, &r, &x, &w, &o, &ow, oi.as_ref())
            })
        })
    })
}

/// Upstream's `_combine` on the device path, appended to `ze_command_list` without waiting: `expert_tokens`
/// `[rows >= max_recv_tokens, hidden]` (float32, float16 or bfloat16) in the routing's layout; `out` `[n,
/// hidden]` of the same dtype is overwritten with each token's sum. Collective over the switch's group.
///
/// # Safety
/// As for [`xpushmem_ops_ep_create_routing_on_queue`].
#[no_mangle]
pub unsafe extern "C" fn xpushmem_ops_ep_combine_on_queue(
    sw: i64,
    routing: i64,
    expert_tokens: *const XpushmemOpsTensor,
    out: *const XpushmemOpsTensor,
    ze_command_list: *mut c_void,
) -> c_int {
    const CALL: &str = "xpushmem_ops_ep_combine_on_queue";
    entry(CALL, || {
        with_rt(|sh| {
            let it = switch_of(sw, CALL)?;
            let r = dev_routing_of(sw, routing, CALL)?;
            // SAFETY: forwarded caller contract on every pointer.
            let (y, o) = unsafe {
                (
                    operand(sh, expert_tokens, "expert_tokens", CALL)?,
                    operand(sh, out, "out", CALL)?,
                )
            };
            device_only(sh, CALL)?;
            run_on_device(sh, CALL, Some(ze_command_list), |ops, list| {
                it.ts.combine_on(sh, ops, list, &it.group, &r, &y, &o)
            })
        })
    })
}
