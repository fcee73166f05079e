//! Team handles (`shmem_team_t`) and the team calls. `SHMEM_TEAM_WORLD` and `SHMEM_TEAM_SHARED` are the handles 1
//! and 2; split teams get registered handles; `SHMEM_TEAM_INVALID` is NULL.

use crate::{shmem_ctx_t, shmem_team_t, status};
use std::collections::HashMap;
use std::ffi::{c_int, c_long};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use xpushmem_ffi_core::error::{value, void};
use xpushmem_ffi_core::rt::{Error, Shmem, Team, TeamConfig};
use xpushmem_ffi_core::{imp, state};

/// Handle of `SHMEM_TEAM_WORLD`.
pub const WORLD: usize = 1;
/// Handle of `SHMEM_TEAM_SHARED`.
pub const SHARED: usize = 2;

static TEAMS: Mutex<Option<HashMap<usize, Team>>> = Mutex::new(None);
static CTX_TEAM: Mutex<Option<HashMap<usize, usize>>> = Mutex::new(None);
static NEXT: AtomicUsize = AtomicUsize::new(0x1000);

/// `shmem_team_config_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(non_camel_case_types)]
pub struct shmem_team_config_t {
    /// Expected number of contexts on the team.
    pub num_contexts: c_int,
}

/// `config_mask` bit: `num_contexts` is set.
pub const SHMEM_TEAM_NUM_CONTEXTS: c_long = 1;

fn invalid(name: &'static str, value: impl std::fmt::Display, reason: impl Into<String>) -> Error {
    Error::InvalidArgument {
        name,
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// The team behind a handle.
pub fn team(sh: &Shmem, h: shmem_team_t, call: &str) -> Result<Team, Error> {
    match h as usize {
        WORLD => Ok(sh.team_world()),
        SHARED => Ok(sh.team_shared()),
        x => TEAMS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .and_then(|m| m.get(&x).cloned())
            .ok_or_else(|| {
                invalid(
                    "team",
                    format!("{h:p}"),
                    format!("{call}: not a live team (SHMEM_TEAM_WORLD, SHMEM_TEAM_SHARED or one from a split; SHMEM_TEAM_INVALID is NULL)"),
                )
            }),
    }
}

fn register(t: Team) -> shmem_team_t {
    let h = NEXT.fetch_add(8, Ordering::Relaxed);
    TEAMS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(h, t);
    h as shmem_team_t
}

/// Drop every team handle (at finalize).
pub fn forget_all() {
    *TEAMS.lock().unwrap_or_else(|p| p.into_inner()) = None;
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
    status(call, || {
        if ctx.is_null() {
            return Err(invalid(
                "ctx",
                "NULL",
                format!("{call}: must point to a shmem_ctx_t"),
            )
            .into());
        }
        if !(0..=7).contains(&options) {
            return Err(invalid("options", options, format!("{call}: must be a combination of SHMEM_CTX_PRIVATE, SHMEM_CTX_SERIALIZED, SHMEM_CTX_NOSTORE")).into());
        }
        state::with(|sh| Ok(team(sh, team_h, call).map(|_| ())?))?;
        let h = imp::ctx_create();
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

fn config_of(
    config: *const shmem_team_config_t,
    mask: c_long,
    call: &str,
) -> Result<Option<TeamConfig>, Error> {
    if mask == 0 || config.is_null() {
        return Ok(None);
    }
    if mask & !SHMEM_TEAM_NUM_CONTEXTS != 0 {
        return Err(invalid(
            "config_mask",
            mask,
            format!("{call}: only SHMEM_TEAM_NUM_CONTEXTS is defined"),
        ));
    }
    // SAFETY: non-NULL; the caller passes a readable shmem_team_config_t when the mask is set.
    let c = unsafe { config.read() };
    let n = usize::try_from(c.num_contexts).map_err(|_| {
        invalid(
            "config->num_contexts",
            c.num_contexts,
            format!("{call}: must be >= 0"),
        )
    })?;
    Ok(Some(TeamConfig { num_contexts: n }))
}

/// This PE's number in `team` (-1 for an invalid team).
#[no_mangle]
pub extern "C" fn shmem_team_my_pe(team_h: shmem_team_t) -> c_int {
    if team_h.is_null() {
        return -1;
    }
    value("shmem_team_my_pe", -1, || {
        state::with(|sh| Ok(team(sh, team_h, "shmem_team_my_pe")?.my_pe() as c_int))
    })
}

/// The number of PEs in `team` (-1 for an invalid team).
#[no_mangle]
pub extern "C" fn shmem_team_n_pes(team_h: shmem_team_t) -> c_int {
    if team_h.is_null() {
        return -1;
    }
    value("shmem_team_n_pes", -1, || {
        state::with(|sh| Ok(team(sh, team_h, "shmem_team_n_pes")?.n_pes() as c_int))
    })
}

/// The configuration of `team` into `*config` (fields selected by `config_mask`). 0 on success.
///
/// # Safety
/// `config` is writable.
#[no_mangle]
pub unsafe extern "C" fn shmem_team_get_config(
    team_h: shmem_team_t,
    config_mask: c_long,
    config: *mut shmem_team_config_t,
) -> c_int {
    let call = "shmem_team_get_config";
    status(call, || {
        if config.is_null() {
            return Err(invalid(
                "config",
                "NULL",
                format!("{call}: must point to a shmem_team_config_t"),
            )
            .into());
        }
        let c = state::with(|sh| Ok(team(sh, team_h, call)?.config()))?;
        if config_mask & SHMEM_TEAM_NUM_CONTEXTS != 0 {
            // SAFETY: non-NULL (checked), writable by the caller's contract.
            unsafe { (*config).num_contexts = c.num_contexts.min(c_int::MAX as usize) as c_int };
        }
        Ok(())
    })
}

/// The number in `dest_team` of PE `src_pe` of `src_team`, or -1 when it is not a member (or on error).
#[no_mangle]
pub extern "C" fn shmem_team_translate_pe(
    src_team: shmem_team_t,
    src_pe: c_int,
    dest_team: shmem_team_t,
) -> c_int {
    let call = "shmem_team_translate_pe";
    if src_team.is_null() || dest_team.is_null() || src_pe < 0 {
        return -1;
    }
    value(call, -1, || {
        state::with(|sh| {
            let (s, d) = (team(sh, src_team, call)?, team(sh, dest_team, call)?);
            Ok(sh
                .team_translate_pe(&s, src_pe as usize, &d)?
                .map_or(-1, |p| p as c_int))
        })
    })
}

fn nonneg(name: &'static str, v: c_int, call: &str) -> Result<usize, Error> {
    usize::try_from(v).map_err(|_| invalid(name, v, format!("{call}: must be >= 0")))
}

/// Split `parent` into the team of members `start + i * stride` for `i < size` (collective over `parent`).
/// Members get the new team in `*new_team`, the other PEs `SHMEM_TEAM_INVALID`. 0 on success.
///
/// # Safety
/// `config` is NULL or readable; `new_team` is writable.
#[no_mangle]
pub unsafe extern "C" fn shmem_team_split_strided(
    parent: shmem_team_t,
    start: c_int,
    stride: c_int,
    size: c_int,
    config: *const shmem_team_config_t,
    config_mask: c_long,
    new_team: *mut shmem_team_t,
) -> c_int {
    let call = "shmem_team_split_strided";
    status(call, || {
        if new_team.is_null() {
            return Err(invalid(
                "new_team",
                "NULL",
                format!("{call}: must point to a shmem_team_t"),
            )
            .into());
        }
        // SAFETY: non-NULL (checked), writable: start from SHMEM_TEAM_INVALID so a failure leaves it invalid.
        unsafe { new_team.write(std::ptr::null_mut()) };
        let cfg = config_of(config, config_mask, call)?;
        let t = state::with(|sh| {
            let p = team(sh, parent, call)?;
            let (start, size) = (nonneg("start", start, call)?, nonneg("size", size, call)?);
            let stride = nonneg("stride", stride, call)?;
            Ok(sh.team_split_strided(&p, start, stride, size, cfg.as_ref())?)
        })?;
        if let Some(t) = t {
            // SAFETY: as above.
            unsafe { new_team.write(register(t)) };
        }
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
pub unsafe extern "C" fn shmem_team_split_2d(
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
    status(call, || {
        if xaxis_team.is_null() || yaxis_team.is_null() {
            return Err(invalid(
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
        let (xc, yc) = (
            config_of(xaxis_config, xaxis_mask, call)?,
            config_of(yaxis_config, yaxis_mask, call)?,
        );
        let (x, y) = state::with(|sh| {
            let p = team(sh, parent, call)?;
            let xr = nonneg("xrange", xrange, call)?;
            Ok(sh.team_split_2d(&p, xr, xc.as_ref(), yc.as_ref())?)
        })?;
        // SAFETY: as above.
        unsafe {
            xaxis_team.write(register(x));
            yaxis_team.write(register(y));
        }
        Ok(())
    })
}

/// Destroy a split team (collective over its members). The predefined teams cannot be destroyed.
#[no_mangle]
pub extern "C" fn shmem_team_destroy(team_h: shmem_team_t) {
    let call = "shmem_team_destroy";
    void(call, || {
        let h = team_h as usize;
        if h == WORLD || h == SHARED {
            return Err(invalid(
                "team",
                format!("{team_h:p}"),
                format!("{call}: the predefined teams cannot be destroyed"),
            )
            .into());
        }
        let t = state::with(|sh| Ok(team(sh, team_h, call)?))?;
        if let Some(m) = TEAMS.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            m.remove(&h);
        }
        state::with(|sh| Ok(sh.team_destroy(t)?))
    })
}

/// Synchronise the members of `team` (collective). 0 on success.
#[no_mangle]
pub extern "C" fn shmem_team_sync(team_h: shmem_team_t) -> c_int {
    status("shmem_team_sync", || {
        state::with(|sh| Ok(sh.team_sync(&team(sh, team_h, "shmem_team_sync")?)?))
    })
}

/// Synchronise the members of `team` (collective; the 1.5 name of `shmem_team_sync`). 0 on success.
#[no_mangle]
pub extern "C" fn shmem_sync(team_h: shmem_team_t) -> c_int {
    status("shmem_sync", || {
        state::with(|sh| Ok(sh.team_sync(&team(sh, team_h, "shmem_sync")?)?))
    })
}
