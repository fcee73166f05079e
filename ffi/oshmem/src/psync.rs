//! The `pSync` barrier of the deprecated active sets (OpenSHMEM 1.4): `pSync[0]` counts arrivals at the first
//! member, `pSync[1]` is each member's release flag; both are back to `SHMEM_SYNC_VALUE` (0) on return. Used by the
//! active-set collectives ([`crate::activeset`]) and by the reductions' fold over an active set ([`crate::fold`]).

use std::ffi::{c_int, c_long};
use xpushmem_ffi_core::error::Failure;
use xpushmem_ffi_core::imp::{self, Amo, AmoInt};
use xpushmem_ffi_core::state;

const CMP_EQ: c_int = 0;

/// Barrier over `pes` with `psync[0..2]`: quiet, then [`sync`].
pub(crate) fn barrier(
    call: &str,
    pes: &[c_int],
    idx: usize,
    psync: *mut c_long,
) -> Result<(), Failure> {
    state::with(|sh| Ok(sh.quiet()?))?;
    sync(call, pes, idx, psync)
}

/// Synchronisation over `pes` with `psync[0..2]`: everyone counts in at the first member, which releases them all.
pub(crate) fn sync(
    call: &str,
    pes: &[c_int],
    idx: usize,
    psync: *mut c_long,
) -> Result<(), Failure> {
    let (count, flag) = (psync, psync.wrapping_add(1));
    let root = pes[0];
    if idx == 0 {
        if pes.len() > 1 {
            imp::wait_one::<i64>(call, count.cast(), CMP_EQ, pes.len() as i64 - 1, false)?;
            imp::amo::<i64>(call, count.cast_const().cast(), Amo::Set(0), root)?;
            for &pe in &pes[1..] {
                imp::amo::<i64>(call, flag.cast_const().cast(), Amo::Set(1), pe)?;
            }
        }
    } else {
        imp::amo_int::<i64>(call, count.cast_const().cast(), AmoInt::Inc, root)?;
        imp::wait_one::<i64>(call, flag.cast(), CMP_EQ, 1, false)?;
        imp::amo::<i64>(call, flag.cast_const().cast(), Amo::Set(0), pes[idx])?;
    }
    Ok(())
}
