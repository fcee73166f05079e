//! Teams: the handle table shared by both C layers, and the native team calls (`xpushmem_team_*`, mirroring
//! NVSHMEM's host API).
//!
//! A team handle is a small integer id, as in NVSHMEM (`xpushmem_team_t` is `int32_t`): `XPUSHMEM_TEAM_WORLD` = 0,
//! `XPUSHMEM_TEAM_SHARED` = 1, `XPUSHMEM_TEAM_INVALID` = -1, and split teams get ids from 16 up (never reused in a
//! run). The OpenSHMEM layer's `shmem_team_t` is the same id plus one, as a pointer (`SHMEM_TEAM_WORLD` = 1,
//! `SHMEM_TEAM_SHARED` = 2, `SHMEM_TEAM_INVALID` = NULL), so both layers share one table: a team split through
//! one API can be used through the other by converting the handle.
//!
//! Handles are local to a PE (two PEs may hold different ids for the same team). The table is dropped by
//! finalize.

use crate::error::{code, value, write_out, Failure};
use crate::state;
use std::collections::HashMap;
use std::ffi::{c_int, c_long, c_void};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;
use xpushmem_rt::{Error, Shmem, Team, TeamConfig};

/// A team handle (NVSHMEM's `nvshmem_team_t`): an id local to this PE.
#[allow(non_camel_case_types)]
pub type xpushmem_team_t = i32;

/// The handle of no team: what non-members get from a split, and what failed splits leave.
pub const XPUSHMEM_TEAM_INVALID: xpushmem_team_t = -1;
/// Every PE, numbered as by `xpushmem_my_pe()`.
pub const XPUSHMEM_TEAM_WORLD: xpushmem_team_t = 0;
/// The PEs of this node (whose memory this PE can load from and store to), in global order.
pub const XPUSHMEM_TEAM_SHARED: xpushmem_team_t = 1;

/// `config_mask` bit of the team calls: `num_contexts` is set.
pub const XPUSHMEM_TEAM_NUM_CONTEXTS: c_long = 1;

/// The first id given to a split team.
const FIRST_SPLIT: i32 = 16;

/// Configuration of a team (NVSHMEM's `nvshmem_team_config_t`; OpenSHMEM's `shmem_team_config_t`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(non_camel_case_types)]
pub struct xpushmem_team_config_t {
    /// Expected number of contexts on the team (accepted and reported back; contexts hold nothing here).
    pub num_contexts: c_int,
}

static TEAMS: Mutex<Option<HashMap<i32, Team>>> = Mutex::new(None);
static NEXT: AtomicI32 = AtomicI32::new(FIRST_SPLIT);

/// Which C layer a handle came from: decides how the handle and the predefined teams are named in messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `xpushmem_team_t` (int ids).
    Native,
    /// `shmem_team_t` (id + 1 as a pointer).
    Oshmem,
}

impl Api {
    fn show(self, id: i64) -> String {
        match self {
            Api::Native => id.to_string(),
            Api::Oshmem => format!("{:#x}", id.wrapping_add(1)),
        }
    }

    fn names(self) -> &'static str {
        match self {
            Api::Native => "XPUSHMEM_TEAM_WORLD, XPUSHMEM_TEAM_SHARED or a live team from a split (XPUSHMEM_TEAM_INVALID is -1)",
            Api::Oshmem => "SHMEM_TEAM_WORLD, SHMEM_TEAM_SHARED or a live team from a split (SHMEM_TEAM_INVALID is NULL)",
        }
    }
}

fn table() -> std::sync::MutexGuard<'static, Option<HashMap<i32, Team>>> {
    TEAMS.lock().unwrap_or_else(|p| p.into_inner())
}

/// The team behind handle `id` (an `InvalidArgument` error naming `call` for anything but a live team).
pub fn team(sh: &Shmem, id: i64, api: Api, call: &str) -> Result<Team, Error> {
    match id {
        0 => Ok(sh.team_world()),
        1 => Ok(sh.team_shared()),
        x => i32::try_from(x)
            .ok()
            .and_then(|x| table().as_ref().and_then(|m| m.get(&x).cloned()))
            .ok_or_else(|| {
                let what = if x == -1 {
                    "the invalid team"
                } else {
                    "not a live team"
                };
                Error::invalid(
                    "team",
                    api.show(id),
                    format!("{call}: {what}; expected {}", api.names()),
                )
            }),
    }
}

/// Register a split team; its id.
pub fn register(t: Team) -> i32 {
    static FORGET_AT_FINALIZE: std::sync::Once = std::sync::Once::new();
    FORGET_AT_FINALIZE.call_once(|| state::on_finalize(forget_all));
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    table().get_or_insert_with(HashMap::new).insert(id, t);
    id
}

/// Drop every split team handle (at finalize: [`register`] hooks it into `state::finalize`).
pub fn forget_all() {
    *table() = None;
}

/// The runtime configuration from a C one (`None` when `mask` is 0 or `config` NULL).
///
/// # Safety
/// `config` is NULL or readable when `mask` is non-zero.
pub unsafe fn config_of(
    config: *const xpushmem_team_config_t,
    mask: c_long,
    call: &str,
) -> Result<Option<TeamConfig>, Error> {
    if mask == 0 || config.is_null() {
        return Ok(None);
    }
    if mask & !XPUSHMEM_TEAM_NUM_CONTEXTS != 0 {
        return Err(Error::invalid(
            "config_mask",
            mask,
            format!("{call}: only the NUM_CONTEXTS bit (1) is defined"),
        ));
    }
    // SAFETY: non-NULL; the caller passes a readable config when the mask is set.
    let c = unsafe { config.read() };
    let n = usize::try_from(c.num_contexts).map_err(|_| {
        Error::invalid(
            "config->num_contexts",
            c.num_contexts,
            format!("{call}: must be >= 0"),
        )
    })?;
    Ok(Some(TeamConfig { num_contexts: n }))
}

fn nonneg(name: &'static str, v: c_int, call: &str) -> Result<usize, Error> {
    usize::try_from(v).map_err(|_| Error::invalid(name, v, format!("{call}: must be >= 0")))
}

/// This PE's number in team `id`; -1 for the invalid team (not an error).
pub fn my_pe(id: i64, api: Api, call: &str) -> Result<c_int, Failure> {
    if id == -1 {
        return Ok(-1);
    }
    state::with(|sh| Ok(team(sh, id, api, call)?.my_pe() as c_int))
}

/// The number of PEs of team `id`; -1 for the invalid team (not an error).
pub fn n_pes(id: i64, api: Api, call: &str) -> Result<c_int, Failure> {
    if id == -1 {
        return Ok(-1);
    }
    state::with(|sh| Ok(team(sh, id, api, call)?.n_pes() as c_int))
}

/// The number in `dest` of member `pe` of `src`: -1 when it is not a member of `dest`, or when either team is
/// the invalid one or `pe` is not a member of `src` (not errors, as in OpenSHMEM). Other bad handles are errors.
pub fn translate(src: i64, pe: c_int, dest: i64, api: Api, call: &str) -> Result<c_int, Failure> {
    if src == -1 || dest == -1 || pe < 0 {
        return Ok(-1);
    }
    state::with(|sh| {
        let (s, d) = (team(sh, src, api, call)?, team(sh, dest, api, call)?);
        if pe as usize >= s.n_pes() {
            return Ok(-1);
        }
        Ok(sh
            .team_translate_pe(&s, pe as usize, &d)?
            .map_or(-1, |p| p as c_int))
    })
}

/// The configuration of team `id` into `*config` (fields selected by `mask`).
///
/// # Safety
/// `config` is NULL (an error) or writable.
pub unsafe fn get_config(
    id: i64,
    mask: c_long,
    config: *mut xpushmem_team_config_t,
    api: Api,
    call: &str,
) -> Result<(), Failure> {
    if config.is_null() {
        return Err(Error::invalid(
            "config",
            "NULL",
            format!("{call}: must point to a team config"),
        )
        .into());
    }
    let c = state::with(|sh| Ok(team(sh, id, api, call)?.config()))?;
    if mask & XPUSHMEM_TEAM_NUM_CONTEXTS != 0 {
        // SAFETY: non-NULL (checked), writable by the caller's contract.
        unsafe { (*config).num_contexts = c.num_contexts.min(c_int::MAX as usize) as c_int };
    }
    Ok(())
}

/// Split `parent` into the team of members `start + i * stride`, `i < size` (collective over `parent`; the stride
/// may be negative, OpenSHMEM 1.6): the new team's id on members, `XPUSHMEM_TEAM_INVALID` on the other PEs.
///
/// # Safety
/// `config` is NULL or readable when `mask` is non-zero.
#[allow(clippy::too_many_arguments)]
pub unsafe fn split_strided(
    parent: i64,
    start: c_int,
    stride: c_int,
    size: c_int,
    config: *const xpushmem_team_config_t,
    mask: c_long,
    api: Api,
    call: &str,
) -> Result<i32, Failure> {
    // SAFETY: the caller's contract on `config`.
    let cfg = unsafe { config_of(config, mask, call) }?;
    let t = state::with(|sh| {
        let p = team(sh, parent, api, call)?;
        let (start, size) = (nonneg("start", start, call)?, nonneg("size", size, call)?);
        // A negative stride takes the PEs in descending order (OpenSHMEM 1.6).
        Ok(sh.team_split_strided_signed(&p, start, stride as isize, size, cfg.as_ref())?)
    })?;
    Ok(t.map_or(XPUSHMEM_TEAM_INVALID, register))
}

/// Split `parent` into a 2-D grid of rows of `xrange` PEs (collective over `parent`): the ids of this PE's row
/// (x-axis) and column (y-axis) teams.
///
/// # Safety
/// The configs are NULL or readable when their masks are non-zero.
#[allow(clippy::too_many_arguments)]
pub unsafe fn split_2d(
    parent: i64,
    xrange: c_int,
    xconfig: *const xpushmem_team_config_t,
    xmask: c_long,
    yconfig: *const xpushmem_team_config_t,
    ymask: c_long,
    api: Api,
    call: &str,
) -> Result<(i32, i32), Failure> {
    // SAFETY: the caller's contract on the configs.
    let (xc, yc) = unsafe {
        (
            config_of(xconfig, xmask, call)?,
            config_of(yconfig, ymask, call)?,
        )
    };
    let (x, y) = state::with(|sh| {
        let p = team(sh, parent, api, call)?;
        let xr = nonneg("xrange", xrange, call)?;
        Ok(sh.team_split_2d(&p, xr, xc.as_ref(), yc.as_ref())?)
    })?;
    Ok((register(x), register(y)))
}

/// Destroy split team `id` (collective over its members). The invalid team: nothing happens. The predefined
/// teams cannot be destroyed (an error).
pub fn destroy(id: i64, api: Api, call: &str) -> Result<(), Failure> {
    if id == -1 {
        return Ok(());
    }
    if id == 0 || id == 1 {
        return Err(Error::invalid(
            "team",
            api.show(id),
            format!("{call}: the predefined teams (world, shared) cannot be destroyed"),
        )
        .into());
    }
    let t = state::with(|sh| Ok(team(sh, id, api, call)?))?;
    if let (Some(m), Ok(k)) = (table().as_mut(), i32::try_from(id)) {
        m.remove(&k);
    }
    state::with(|sh| Ok(sh.team_destroy(t)?))
}

/// Synchronise the members of team `id` (collective; no completion of outstanding operations).
pub fn sync(id: i64, api: Api, call: &str) -> Result<(), Failure> {
    state::with(|sh| {
        let t = team(sh, id, api, call)?;
        Ok(sh.team_sync_with(&t, state::barrier_algo())?)
    })
}

/// Complete this PE's outstanding operations, then synchronise the members of team `id` (collective).
pub fn barrier(id: i64, api: Api, call: &str) -> Result<(), Failure> {
    state::with(|sh| {
        let t = team(sh, id, api, call)?;
        Ok(sh.team_barrier_with(&t, state::barrier_algo())?)
    })
}

// ---------------------------------------------------------------------------------------------------------------
// The native calls

const N: Api = Api::Native;

/// This PE's number in `team`; -1 for `XPUSHMEM_TEAM_INVALID` and on error (another bad handle records an
/// error).
#[no_mangle]
pub extern "C" fn xpushmem_team_my_pe(team: xpushmem_team_t) -> c_int {
    let call = "xpushmem_team_my_pe";
    value(call, -1, || my_pe(team.into(), N, call))
}

/// `xpushmem_team_my_pe` with the number in `*pe`. Returns an error code (`XPUSHMEM_TEAM_INVALID` is an error
/// here).
///
/// # Safety
/// `pe` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn xpushmem_team_my_pe_ex(pe: *mut c_int, team: xpushmem_team_t) -> c_int {
    let call = "xpushmem_team_my_pe_ex";
    code(call, || {
        let v = state::with(|sh| Ok(self::team(sh, team.into(), N, call)?.my_pe() as c_int))?;
        // SAFETY: the caller's contract on `pe`.
        unsafe { write_out(pe, v) };
        Ok(())
    })
}

/// The number of PEs in `team`; -1 for `XPUSHMEM_TEAM_INVALID` and on error.
#[no_mangle]
pub extern "C" fn xpushmem_team_n_pes(team: xpushmem_team_t) -> c_int {
    let call = "xpushmem_team_n_pes";
    value(call, -1, || n_pes(team.into(), N, call))
}

/// `xpushmem_team_n_pes` with the number in `*n`. Returns an error code (`XPUSHMEM_TEAM_INVALID` is an error
/// here).
///
/// # Safety
/// `n` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn xpushmem_team_n_pes_ex(n: *mut c_int, team: xpushmem_team_t) -> c_int {
    let call = "xpushmem_team_n_pes_ex";
    code(call, || {
        let v = state::with(|sh| Ok(self::team(sh, team.into(), N, call)?.n_pes() as c_int))?;
        // SAFETY: the caller's contract on `n`.
        unsafe { write_out(n, v) };
        Ok(())
    })
}

/// The configuration of `team` into `*config` (fields selected by `config_mask`: `XPUSHMEM_TEAM_NUM_CONTEXTS`).
/// Returns an error code.
///
/// # Safety
/// `config` is writable.
#[no_mangle]
pub unsafe extern "C" fn xpushmem_team_get_config(
    team: xpushmem_team_t,
    config_mask: c_long,
    config: *mut xpushmem_team_config_t,
) -> c_int {
    let call = "xpushmem_team_get_config";
    // SAFETY: the caller's contract on `config`.
    code(call, || unsafe {
        get_config(team.into(), config_mask, config, N, call)
    })
}

/// The number in `dest_team` of member `src_pe` of `src_team`; -1 when that PE is not in `dest_team`, when
/// `src_pe` is not a member of `src_team`, for `XPUSHMEM_TEAM_INVALID`, and on error.
#[no_mangle]
pub extern "C" fn xpushmem_team_translate_pe(
    src_team: xpushmem_team_t,
    src_pe: c_int,
    dest_team: xpushmem_team_t,
) -> c_int {
    let call = "xpushmem_team_translate_pe";
    value(call, -1, || {
        translate(src_team.into(), src_pe, dest_team.into(), N, call)
    })
}

/// `xpushmem_team_translate_pe` with the number (or -1 for a non-member) in `*pe`. Returns an error code: bad
/// handles (`XPUSHMEM_TEAM_INVALID` included) and a `src_pe` outside `src_team` are errors here.
///
/// # Safety
/// `pe` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn xpushmem_team_translate_pe_ex(
    pe: *mut c_int,
    src_team: xpushmem_team_t,
    src_pe: c_int,
    dest_team: xpushmem_team_t,
) -> c_int {
    let call = "xpushmem_team_translate_pe_ex";
    code(call, || {
        let v = state::with(|sh| {
            let s = team(sh, src_team.into(), N, call)?;
            let d = team(sh, dest_team.into(), N, call)?;
            if src_pe < 0 || src_pe as usize >= s.n_pes() {
                return Err(Error::InvalidPe {
                    pe: src_pe.into(),
                    n_pes: s.n_pes(),
                    context: format!("{call}: src_pe must be a member of src_team"),
                }
                .into());
            }
            Ok(sh
                .team_translate_pe(&s, src_pe as usize, &d)?
                .map_or(-1, |p| p as c_int))
        })?;
        // SAFETY: the caller's contract on `pe`.
        unsafe { write_out(pe, v) };
        Ok(())
    })
}

/// A call's `new_team` out-pointer, checked (an error naming it when NULL) and set to `XPUSHMEM_TEAM_INVALID`, so
/// that a failure of the call leaves it invalid; the call writes the team over it once made.
///
/// # Safety
/// `new_team` is NULL or writable.
unsafe fn invalid_until_made(new_team: *mut xpushmem_team_t, call: &str) -> Result<(), Failure> {
    if new_team.is_null() {
        return Err(Error::invalid(
            "new_team",
            "NULL",
            format!("{call}: must point to an xpushmem_team_t"),
        )
        .into());
    }
    // SAFETY: non-NULL (checked), writable by the caller's contract.
    unsafe { new_team.write(XPUSHMEM_TEAM_INVALID) };
    Ok(())
}

/// Make the team of `parent_team`'s members `PE_start + i * PE_stride`, `i < PE_size` (collective over the
/// parent; every parent PE passes the same arguments). Members get the new team in `*new_team`, the other PEs
/// `XPUSHMEM_TEAM_INVALID`. Returns an error code (bad or inconsistent arguments fail on every PE).
///
/// # Safety
/// `config` is NULL or readable; `new_team` is writable.
#[no_mangle]
pub unsafe extern "C" fn xpushmem_team_split_strided(
    parent_team: xpushmem_team_t,
    pe_start: c_int,
    pe_stride: c_int,
    pe_size: c_int,
    config: *const xpushmem_team_config_t,
    config_mask: c_long,
    new_team: *mut xpushmem_team_t,
) -> c_int {
    let call = "xpushmem_team_split_strided";
    code(call, || {
        // SAFETY: the caller's contract on `new_team`.
        unsafe { invalid_until_made(new_team, call) }?;
        // SAFETY: the caller's contract on `config`.
        let t = unsafe {
            split_strided(
                parent_team.into(),
                pe_start,
                pe_stride,
                pe_size,
                config,
                config_mask,
                N,
                call,
            )
        }?;
        // SAFETY: non-NULL (checked above), writable by the caller's contract.
        unsafe { new_team.write(t) };
        Ok(())
    })
}

/// Arrange `parent_team`'s members in rows of `xrange` (the last row may be short): this PE's row team (numbered
/// by column) in `*xaxis_team`, its column team (numbered by row) in `*yaxis_team` (collective over the parent).
/// Returns an error code.
///
/// # Safety
/// The configs are NULL or readable; the team pointers are writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn xpushmem_team_split_2d(
    parent_team: xpushmem_team_t,
    xrange: c_int,
    xaxis_config: *const xpushmem_team_config_t,
    xaxis_mask: c_long,
    xaxis_team: *mut xpushmem_team_t,
    yaxis_config: *const xpushmem_team_config_t,
    yaxis_mask: c_long,
    yaxis_team: *mut xpushmem_team_t,
) -> c_int {
    let call = "xpushmem_team_split_2d";
    code(call, || {
        if xaxis_team.is_null() || yaxis_team.is_null() {
            return Err(Error::invalid(
                "xaxis_team/yaxis_team",
                "NULL",
                format!("{call}: must point to xpushmem_team_t"),
            )
            .into());
        }
        // SAFETY: non-NULL (checked), writable by the caller's contract.
        unsafe {
            xaxis_team.write(XPUSHMEM_TEAM_INVALID);
            yaxis_team.write(XPUSHMEM_TEAM_INVALID);
        }
        // SAFETY: the caller's contract on the configs.
        let (x, y) = unsafe {
            split_2d(
                parent_team.into(),
                xrange,
                xaxis_config,
                xaxis_mask,
                yaxis_config,
                yaxis_mask,
                N,
                call,
            )
        }?;
        // SAFETY: as above.
        unsafe {
            xaxis_team.write(x);
            yaxis_team.write(y);
        }
        Ok(())
    })
}

/// Allocate `size` bytes of symmetric memory on every member of `team`, collective over the team only (the other
/// PEs need not call; on `XPUSHMEM_TEAM_WORLD` this is `xpushmem_malloc`). The address is symmetric among the
/// team's members; a member passing another size makes the call fail on every member. Team-scoped allocations
/// need host heaps or device heaps (on one node or over the fabric). NULL for 0 bytes or on error.
#[no_mangle]
pub extern "C" fn xpushmem_team_malloc(team: xpushmem_team_t, size: usize) -> *mut c_void {
    let call = "xpushmem_team_malloc";
    value(call, std::ptr::null_mut(), || {
        let t = state::with(|sh| Ok(self::team(sh, team.into(), N, call)?))?;
        crate::imp::alloc_on(call, Some(&t), size, 1, false)
    })
}

/// `xpushmem_team_malloc` aligned to `alignment` bytes (a power of two). NULL for 0 bytes or on error.
#[no_mangle]
pub extern "C" fn xpushmem_team_align(
    team: xpushmem_team_t,
    alignment: usize,
    size: usize,
) -> *mut c_void {
    let call = "xpushmem_team_align";
    value(call, std::ptr::null_mut(), || {
        let t = state::with(|sh| Ok(self::team(sh, team.into(), N, call)?))?;
        crate::imp::alloc_on(call, Some(&t), size, alignment, false)
    })
}

/// Make a team of the global PEs `pes[0..npes]`, in that order (`pes[i]` is the team's PE `i`), collective over
/// those PEs only: every member calls with the same list and the same `tag` (a number telling this creation from
/// others of the same PEs); the other PEs never call. The team's synchronisation words live among its members
/// (host or device heaps, on one node or over the fabric; elsewhere the call fails at once with
/// the reason). Members passing different lists or tags fail with `XPUSHMEM_ERROR_MISMATCH` on every member. `*new_team` gets the team, or
/// `XPUSHMEM_TEAM_INVALID` on error. Destroy it with `xpushmem_team_destroy`. Returns an error code.
///
/// # Safety
/// `pes` points to `npes` readable ints (NULL only when `npes` is 0); `new_team` is writable.
#[no_mangle]
pub unsafe extern "C" fn xpushmem_team_of_members(
    pes: *const c_int,
    npes: c_int,
    tag: u64,
    new_team: *mut xpushmem_team_t,
) -> c_int {
    let call = "xpushmem_team_of_members";
    code(call, || {
        // SAFETY: the caller's contract on `new_team`.
        unsafe { invalid_until_made(new_team, call) }?;
        let n = nonneg("npes", npes, call)?;
        if pes.is_null() && n > 0 {
            return Err(Error::invalid("pes", "NULL", format!("{call}: {n} PEs to read")).into());
        }
        let list: Vec<usize> = if n == 0 {
            Vec::new()
        } else {
            // SAFETY: the caller's contract: `pes` holds `npes` ints (non-NULL, checked).
            let raw = unsafe { std::slice::from_raw_parts(pes, n) };
            raw.iter()
                .enumerate()
                .map(|(i, &p)| {
                    usize::try_from(p).map_err(|_| {
                        Error::invalid("pes", format!("pes[{i}] = {p}"), "a PE is not negative")
                    })
                })
                .collect::<Result<_, _>>()?
        };
        let t = state::with(|sh| Ok(sh.team_of_members(&list, tag)?))?;
        // SAFETY: non-NULL (checked above), writable by the caller's contract.
        unsafe { new_team.write(register(t)) };
        Ok(())
    })
}

/// `xpushmem_team_malloc` of `count * size` zeroed bytes. NULL for 0 bytes or on error.
#[no_mangle]
pub extern "C" fn xpushmem_team_calloc(
    team: xpushmem_team_t,
    count: usize,
    size: usize,
) -> *mut c_void {
    let call = "xpushmem_team_calloc";
    value(call, std::ptr::null_mut(), || {
        let bytes = count.checked_mul(size).ok_or_else(|| {
            Error::invalid(
                "count",
                count,
                format!("{call}: count * size ({count} * {size}) overflows"),
            )
        })?;
        let t = state::with(|sh| Ok(self::team(sh, team.into(), N, call)?))?;
        crate::imp::alloc_on(call, Some(&t), bytes, 1, true)
    })
}

/// Free an allocation of `xpushmem_team_malloc` (collective over `team`, the team that allocated it; NULL frees
/// nothing but is still collective). Returns an error code.
#[no_mangle]
pub extern "C" fn xpushmem_team_free(team: xpushmem_team_t, ptr: *mut c_void) -> c_int {
    let call = "xpushmem_team_free";
    code(call, || {
        let t = state::with(|sh| Ok(self::team(sh, team.into(), N, call)?))?;
        crate::imp::free_on(call, Some(&t), ptr)
    })
}

/// Destroy a team made by a split (collective over its members; ends with a barrier over the team).
/// `XPUSHMEM_TEAM_INVALID` does nothing; the predefined teams cannot be destroyed. Returns an error code.
#[no_mangle]
pub extern "C" fn xpushmem_team_destroy(team: xpushmem_team_t) -> c_int {
    let call = "xpushmem_team_destroy";
    code(call, || destroy(team.into(), N, call))
}

/// Synchronise the members of `team` without completing outstanding operations (collective). Returns an
/// error code.
#[no_mangle]
pub extern "C" fn xpushmem_team_sync(team: xpushmem_team_t) -> c_int {
    let call = "xpushmem_team_sync";
    code(call, || sync(team.into(), N, call))
}

/// `xpushmem_team_sync` (the OpenSHMEM 1.5 name). Returns an error code.
#[no_mangle]
pub extern "C" fn xpushmem_sync(team: xpushmem_team_t) -> c_int {
    let call = "xpushmem_sync";
    code(call, || sync(team.into(), N, call))
}

/// Complete this PE's outstanding puts, AMOs and signals, then synchronise the members of `team` (collective).
/// Returns an error code.
#[no_mangle]
pub extern "C" fn xpushmem_barrier(team: xpushmem_team_t) -> c_int {
    let call = "xpushmem_barrier";
    code(call, || barrier(team.into(), N, call))
}

/// Validate a context handle and turn `pe`, a PE number of the context's team (OpenSHMEM: operations on a context
/// address the PEs of its team), into a PE number of the world.
pub fn ctx_pe(ctx: *mut c_void, pe: c_int, call: &str) -> Result<c_int, Failure> {
    ctx_route(ctx, pe, call).map(|(pe, _)| pe)
}

/// [`ctx_pe`], and the context's completion domain (what its operations are issued in).
pub fn ctx_route(
    ctx: *mut c_void,
    pe: c_int,
    call: &str,
) -> Result<(c_int, crate::imp::Domain), Failure> {
    let (team, dom) = crate::imp::ctx_route(ctx, call)?;
    if team == 0 {
        return Ok((pe, dom));
    }
    state::with(|sh| {
        let t = self::team(sh, team, Api::Oshmem, call)?;
        let n = t.n_pes();
        if pe < 0 || pe as usize >= n {
            return Err(Error::InvalidPe {
                pe: pe as i64,
                n_pes: n,
                context: format!("{call}: a PE of the context's team ({})", t.describe()),
            }
            .into());
        }
        Ok((t.global_pe(pe as usize)? as c_int, dom))
    })
}
