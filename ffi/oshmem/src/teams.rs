//! Team handles (`shmem_team_t`) and the team calls, over the team table of `xpushmem-ffi-core` (shared with the
//! native API): a `shmem_team_t` is the native id plus one as a pointer, so `SHMEM_TEAM_WORLD` = 1,
//! `SHMEM_TEAM_SHARED` = 2 and `SHMEM_TEAM_INVALID` = NULL.

use crate::{shmem_ctx_t, shmem_team_t, status};
use std::collections::HashMap;
use std::ffi::{c_int, c_long};
use std::sync::Mutex;
use xpushmem_ffi_core::error::Failure;
use xpushmem_ffi_core::error::{value, void};
use xpushmem_ffi_core::rt::Error;
use xpushmem_ffi_core::teams::{self as core, xpushmem_team_config_t, Api};
use xpushmem_ffi_core::{imp, state};

const O: Api = Api::Oshmem;

/// Handle of `SHMEM_TEAM_WORLD`.
pub const WORLD: usize = 1;

static CTX_TEAM: Mutex<Option<HashMap<usize, usize>>> = Mutex::new(None);

/// `shmem_team_config_t` (the same layout as the native `xpushmem_team_config_t`).
#[allow(non_camel_case_types)]
pub type shmem_team_config_t = xpushmem_team_config_t;

/// The native team id of a handle (NULL, `SHMEM_TEAM_INVALID`, is -1).
pub fn id(h: shmem_team_t) -> i64 {
    (h as usize).checked_sub(1).map_or(-1, |x| x as i64)
}

/// The handle of a native team id (-1 is NULL).
fn handle(id: i32) -> shmem_team_t {
    (id as isize + 1) as usize as shmem_team_t
}

/// Status of the calls whose failures the specification defines (invalid handles, teams or contexts that cannot
/// be created): 0, or -1 with the error recorded; never aborts, whatever the error mode.
pub fn spec_status(call: &str, f: impl FnOnce() -> Result<(), Failure>) -> c_int {
    match xpushmem_ffi_core::error::run_status(call, f) {
        Ok(()) => 0,
        Err(_) => -1,
    }
}

/// The error for `SHMEM_TEAM_INVALID` passed as `arg`.
pub fn invalid_team(arg: &'static str, call: &str) -> Failure {
    Error::invalid(
        arg,
        "SHMEM_TEAM_INVALID",
        format!("{call}: the team handle is invalid"),
    )
    .into()
}

/// Drop the context-to-team map (at finalize; the team table is dropped by the core's finalize).
pub fn forget_all() {
    *CTX_TEAM.lock().unwrap_or_else(|p| p.into_inner()) = None;
}

/// Create a context on `team`.
///
/// # Safety
/// `ctx` is NULL or writable.
pub unsafe fn create_ctx(
    call: &str,
    team_h: shmem_team_t,
    options: c_long,
    ctx: *mut shmem_ctx_t,
) -> c_int {
    spec_status(call, || {
        if ctx.is_null() {
            return Err(Error::invalid(
                "ctx",
                "NULL",
                format!("{call}: must point to a shmem_ctx_t"),
            )
            .into());
        }
        // SAFETY: non-NULL (checked), writable by the caller's contract: SHMEM_CTX_INVALID until created.
        unsafe { ctx.write(std::ptr::null_mut()) };
        if team_h.is_null() {
            return Err(invalid_team("team", call));
        }
        if !(0..=7).contains(&options) {
            return Err(Error::invalid("options", options, format!("{call}: must be a combination of SHMEM_CTX_PRIVATE, SHMEM_CTX_SERIALIZED, SHMEM_CTX_NOSTORE")).into());
        }
        state::with(|sh| Ok(core::team(sh, id(team_h), O, call).map(|_| ())?))?;
        // SHMEM_CTX_PRIVATE (1 in shmem.h): only this thread may use or destroy the context.
        let h = imp::ctx_create(id(team_h), options & 1 != 0)?;
        CTX_TEAM
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert_with(HashMap::new)
            .insert(h, team_h as usize);
        // SAFETY: non-NULL (checked), writable by the caller's contract.
        unsafe { ctx.write(h as shmem_ctx_t) };
        Ok(())
    })
}

/// Forget a destroyed context.
pub fn forget_ctx(ctx: shmem_ctx_t) {
    if let Some(m) = CTX_TEAM.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
        m.remove(&(ctx as usize));
    }
}

/// The team a context was made on (the world for the default context).
pub fn team_of_ctx(ctx: shmem_ctx_t) -> shmem_team_t {
    CTX_TEAM
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .and_then(|m| m.get(&(ctx as usize)).copied())
        .unwrap_or(WORLD) as shmem_team_t
}

/// The local address of PE `pe`'s (a member number of `team`) copy of the symmetric `dest`, or NULL when that PE
/// cannot be reached with loads and stores, or `team` is `SHMEM_TEAM_INVALID` or `pe` is not a member (1.5).
#[no_mangle]
pub extern "C" fn pshmem_team_ptr(
    team_h: shmem_team_t,
    dest: *const std::ffi::c_void,
    pe: c_int,
) -> *mut std::ffi::c_void {
    let call = "shmem_team_ptr";
    value(call, std::ptr::null_mut(), || {
        let world = core::translate(id(team_h), pe, 0, O, call)?;
        if world < 0 {
            return Ok(std::ptr::null_mut());
        }
        imp::ptr(call, dest, world)
    })
}

/// This PE's number in `team` (-1 for an invalid team).
#[no_mangle]
pub extern "C" fn pshmem_team_my_pe(team_h: shmem_team_t) -> c_int {
    let call = "shmem_team_my_pe";
    value(call, -1, || core::my_pe(id(team_h), O, call))
}

/// The number of PEs in `team` (-1 for an invalid team).
#[no_mangle]
pub extern "C" fn pshmem_team_n_pes(team_h: shmem_team_t) -> c_int {
    let call = "shmem_team_n_pes";
    value(call, -1, || core::n_pes(id(team_h), O, call))
}

/// The configuration of `team` into `*config` (fields selected by `config_mask`). 0 on success.
///
/// # Safety
/// `config` is writable.
#[no_mangle]
pub unsafe extern "C" fn pshmem_team_get_config(
    team_h: shmem_team_t,
    config_mask: c_long,
    config: *mut shmem_team_config_t,
) -> c_int {
    let call = "shmem_team_get_config";
    if team_h.is_null() {
        // The specification: nonzero for SHMEM_TEAM_INVALID.
        return spec_status(call, || Err(invalid_team("team", call)));
    }
    if config_mask == 0 {
        // 1.6: with a mask of 0 the call performs no action (config may be NULL); the team is still checked.
        return status(call, || {
            state::with(|sh| Ok(core::team(sh, id(team_h), O, call).map(|_| ())?))
        });
    }
    // SAFETY: the caller's contract on `config`.
    status(call, || unsafe {
        core::get_config(id(team_h), config_mask, config, O, call)
    })
}

/// The number in `dest_team` of PE `src_pe` of `src_team`, or -1 when it is not a member (or on error).
#[no_mangle]
pub extern "C" fn pshmem_team_translate_pe(
    src_team: shmem_team_t,
    src_pe: c_int,
    dest_team: shmem_team_t,
) -> c_int {
    let call = "shmem_team_translate_pe";
    value(call, -1, || {
        core::translate(id(src_team), src_pe, id(dest_team), O, call)
    })
}

/// Split `parent` into the team of members `start + i * stride` for `i < size` (collective over `parent`; a
/// negative stride, OpenSHMEM 1.6, takes the PEs in descending order).
/// Members get the new team in `*new_team`, the other PEs `SHMEM_TEAM_INVALID`. 0 on success.
///
/// # Safety
/// `config` is NULL or readable; `new_team` is writable.
#[no_mangle]
pub unsafe extern "C" fn pshmem_team_split_strided(
    parent: shmem_team_t,
    start: c_int,
    stride: c_int,
    size: c_int,
    config: *const shmem_team_config_t,
    config_mask: c_long,
    new_team: *mut shmem_team_t,
) -> c_int {
    let call = "shmem_team_split_strided";
    // The specification: a team that cannot be created (invalid parent, invalid triplet) is a nonzero return with
    // SHMEM_TEAM_INVALID, not an error to abort on.
    spec_status(call, || {
        if new_team.is_null() {
            return Err(Error::invalid(
                "new_team",
                "NULL",
                format!("{call}: must point to a shmem_team_t"),
            )
            .into());
        }
        // SAFETY: non-NULL (checked), writable: start from SHMEM_TEAM_INVALID so a failure leaves it invalid.
        unsafe { new_team.write(std::ptr::null_mut()) };
        if parent.is_null() {
            return Err(invalid_team("parent_team", call));
        }
        // SAFETY: the caller's contract on `config`.
        let t = unsafe {
            core::split_strided(
                id(parent),
                start,
                stride,
                size,
                config,
                config_mask,
                O,
                call,
            )
        }?;
        // SAFETY: as above.
        unsafe { new_team.write(handle(t)) };
        Ok(())
    })
}

/// Split `parent` into a 2-D grid with `xrange` columns: this PE's row in `*xaxis_team`, its column in
/// `*yaxis_team` (collective over `parent`). 0 on success.
///
/// # Safety
/// Configs are NULL or readable; the team pointers are writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn pshmem_team_split_2d(
    parent: shmem_team_t,
    xrange: c_int,
    xaxis_config: *const shmem_team_config_t,
    xaxis_mask: c_long,
    xaxis_team: *mut shmem_team_t,
    yaxis_config: *const shmem_team_config_t,
    yaxis_mask: c_long,
    yaxis_team: *mut shmem_team_t,
) -> c_int {
    let call = "shmem_team_split_2d";
    // As for shmem_team_split_strided: a status the specification defines.
    spec_status(call, || {
        if xaxis_team.is_null() || yaxis_team.is_null() {
            return Err(Error::invalid(
                "xaxis_team/yaxis_team",
                "NULL",
                format!("{call}: must point to shmem_team_t"),
            )
            .into());
        }
        // SAFETY: non-NULL (checked) and writable by the caller's contract.
        unsafe {
            xaxis_team.write(std::ptr::null_mut());
            yaxis_team.write(std::ptr::null_mut());
        }
        if parent.is_null() {
            return Err(invalid_team("parent_team", call));
        }
        // SAFETY: the caller's contract on the configs.
        let (x, y) = unsafe {
            core::split_2d(
                id(parent),
                xrange,
                xaxis_config,
                xaxis_mask,
                yaxis_config,
                yaxis_mask,
                O,
                call,
            )
        }?;
        // SAFETY: as above.
        unsafe {
            xaxis_team.write(handle(x));
            yaxis_team.write(handle(y));
        }
        Ok(())
    })
}

/// Destroy a split team (collective over its members). `SHMEM_TEAM_INVALID` does nothing; the predefined teams
/// cannot be destroyed.
#[no_mangle]
pub extern "C" fn pshmem_team_destroy(team_h: shmem_team_t) {
    let call = "shmem_team_destroy";
    void(call, || core::destroy(id(team_h), O, call))
}

/// Synchronise the members of `team` (collective). 0 on success.
#[no_mangle]
pub extern "C" fn pshmem_team_sync(team_h: shmem_team_t) -> c_int {
    let call = "shmem_team_sync";
    status(call, || core::sync(id(team_h), O, call))
}
