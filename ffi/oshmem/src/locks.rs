//! Distributed locks (`shmem_set_lock`, `shmem_test_lock`, `shmem_clear_lock`): the symmetric `long` lock word
//! on PE 0 holds 0 when free and `1 + holder` when taken; acquisition is a compare-and-swap, retried with
//! back-off (spin, yield, then sleeps up to 100 us) under the runtime's `XPUSHMEM_TIMEOUT_MS`.

use std::ffi::{c_int, c_long};
use std::time::{Duration, Instant};
use xpushmem_ffi_core::error::{value, void};
use xpushmem_ffi_core::imp::{self, Amo};
use xpushmem_ffi_core::rt::Error;
use xpushmem_ffi_core::state;

fn try_take(call: &str, lock: *mut c_long) -> Result<bool, Error> {
    let me = state::with(|sh| Ok(sh.my_pe())).map_err(unwrap)?;
    let tag = me as c_long + 1;
    let old = imp::amo(
        call,
        lock.cast_const(),
        Amo::CompareSwap {
            cond: 0,
            value: tag,
        },
        0,
    )
    .map_err(unwrap)?;
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

fn unwrap(f: xpushmem_ffi_core::error::Failure) -> Error {
    match f {
        xpushmem_ffi_core::error::Failure::Error(e) => e,
        other => Error::State(format!("{other:?}")),
    }
}

/// Acquire the lock, waiting as long as needed (up to `XPUSHMEM_TIMEOUT_MS`).
///
/// # Safety
/// `lock` is a symmetric address (checked).
#[no_mangle]
pub unsafe extern "C" fn pshmem_set_lock(lock: *mut c_long) {
    let call = "shmem_set_lock";
    void(call, || {
        let limit = state::with(|sh| Ok(sh.config().timeout))?;
        let start = Instant::now();
        let mut i = 0u32;
        let mut sleep = Duration::from_micros(1);
        while !try_take(call, lock)? {
            i += 1;
            if i < 64 {
                std::hint::spin_loop();
            } else if i < 256 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(sleep);
                sleep = (sleep * 2).min(Duration::from_micros(100));
            }
            if let Some(limit) = limit {
                if start.elapsed() > limit {
                    return Err(Error::Timeout {
                        op: call.to_string(),
                        waited: start.elapsed(),
                        limit,
                        detail: format!("; lock at {lock:p} is held by PE {}", holder(lock)),
                    }
                    .into());
                }
            }
        }
        Ok(())
    })
}

fn holder(lock: *mut c_long) -> String {
    imp::amo("shmem_set_lock", lock.cast_const(), Amo::Fetch, 0)
        .map_or_else(|_| "?".into(), |v| (v - 1).to_string())
}

/// Try to acquire the lock once: 0 when acquired, 1 when another PE holds it (1 on error).
///
/// # Safety
/// `lock` is a symmetric address (checked).
#[no_mangle]
pub unsafe extern "C" fn pshmem_test_lock(lock: *mut c_long) -> c_int {
    let call = "shmem_test_lock";
    value(call, 1, || Ok(if try_take(call, lock)? { 0 } else { 1 }))
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
