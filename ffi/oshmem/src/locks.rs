//! Distributed locks (`shmem_set_lock`, `shmem_test_lock`, `shmem_clear_lock`): the symmetric `long` lock word
//! on PE 0 holds 0 when free and `1 + holder` when taken; acquisition is a compare-and-swap, retried with the
//! runtime's one wait back-off ([`Shmem::wait_for_within`]: spin, yield, sleep; the lost-peer check) under its
//! `XPUSHMEM_TIMEOUT_MS`.

use std::ffi::{c_int, c_long};
use xpushmem_ffi_core::error::{value, void};
use xpushmem_ffi_core::imp::{self, Amo};
use xpushmem_ffi_core::rt::{Error, Shmem, SymRef};
use xpushmem_ffi_core::state;

/// The PE whose word is the lock.
const HOME: usize = 0;

/// The lock word and this PE's tag in it.
fn word(sh: &Shmem, call: &str, lock: *mut c_long) -> Result<(SymRef<c_long>, c_long), Error> {
    // Named `dest` in errors, as every atomic's word is.
    let r = imp::sym_ref(sh, lock.cast_const(), call, "dest")?;
    Ok((r, sh.my_pe() as c_long + 1))
}

/// One attempt to take the lock: whether this PE got it.
fn try_take(sh: &Shmem, call: &str, lock: *mut c_long) -> Result<bool, Error> {
    let (r, tag) = word(sh, call, lock)?;
    let old = sh.atomic_compare_swap(r, 0, tag, HOME)?;
    if old == tag {
        return Err(Error::InvalidArgument {
            name: "lock",
            value: format!("{lock:p}"),
            reason: format!(
                "{call}: this PE already holds the lock (OpenSHMEM locks are not recursive)"
            ),
        });
    }
    Ok(old == 0)
}

/// Acquire the lock, waiting as long as needed (up to `XPUSHMEM_TIMEOUT_MS`; a lost PE ends the wait with
/// `PeerLost`).
///
/// # Safety
/// `lock` is a symmetric address (checked).
#[no_mangle]
pub unsafe extern "C" fn pshmem_set_lock(lock: *mut c_long) {
    let call = "shmem_set_lock";
    void(call, || {
        state::with(|sh| {
            let holder = || {
                word(sh, call, lock)
                    .and_then(|(r, _)| sh.atomic_fetch(r, HOME))
                    .map_or_else(|_| "?".into(), |v| (v - 1).to_string())
            };
            Ok(sh.wait_for_within(
                call,
                sh.config().timeout,
                &|| format!("lock at {lock:p} is held by PE {}", holder()),
                || try_take(sh, call, lock),
            )?)
        })
    })
}

/// Try to acquire the lock once: 0 when acquired, 1 when another PE holds it (1 on error).
///
/// # Safety
/// `lock` is a symmetric address (checked).
#[no_mangle]
pub unsafe extern "C" fn pshmem_test_lock(lock: *mut c_long) -> c_int {
    let call = "shmem_test_lock";
    value(call, 1, || {
        state::with(|sh| Ok(if try_take(sh, call, lock)? { 0 } else { 1 }))
    })
}

/// Release the lock (completing this PE's outstanding operations first).
///
/// # Safety
/// `lock` is a symmetric address (checked).
#[no_mangle]
pub unsafe extern "C" fn pshmem_clear_lock(lock: *mut c_long) {
    let call = "shmem_clear_lock";
    void(call, || {
        let me = state::with(|sh| {
            sh.quiet()?;
            Ok(sh.my_pe())
        })?;
        let tag = me as c_long + 1;
        let old = imp::amo(
            call,
            lock.cast_const(),
            Amo::CompareSwap {
                cond: tag,
                value: 0,
            },
            0,
        )?;
        if old != tag {
            return Err(Error::InvalidArgument {
                name: "lock",
                value: format!("{lock:p}"),
                reason: format!("{call}: this PE does not hold the lock (holder tag {old})"),
            }
            .into());
        }
        Ok(())
    })
}
