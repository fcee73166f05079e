//! The reduction engine of the OpenSHMEM layer, for what the runtime's reductions do not cover: the deprecated
//! active-set `shmem_TYPE_OP_to_all` (every type), and the element types the runtime has no arithmetic for —
//! `long double` (x86-64: the x87 80-bit format in 16 bytes) and the complex types — over teams too
//! (`shmem_longdouble_{min,max,sum,prod}_reduce`, `shmem_complex{f,d}_{sum,prod}_reduce`).
//!
//! One algorithm: the members synchronise, every member gets every member's source (one-sided gets of the
//! symmetric array) and folds them **in member order**, `((s_0 op s_1) op s_2) ...`, synchronises again (the
//! destination may be the source), and writes its own destination. Every member computes the same value, in an
//! order a C program can reproduce exactly. The 1.6 prefix sums of these types (`shmem_longdouble_sum_inscan`,
//! `shmem_complex{f,d}_sum_exscan`, ...) are the same fold stopped at the member itself ([`scan`]).

use std::ffi::{c_int, c_long};
use xpushmem_ffi_core::error::Failure;
use xpushmem_ffi_core::imp;
use xpushmem_ffi_core::rt::Error;
use xpushmem_ffi_core::state;
use xpushmem_ffi_core::teams::{self as core, Api};
use xpushmem_ffi_core::types::LongDouble;

/// The PEs a fold runs over, and how they synchronise.
pub enum Group {
    /// A deprecated active set: its barrier over `pSync`.
    Active {
        /// The members (global PEs), in set order.
        pes: Vec<c_int>,
        /// This PE's index among them.
        idx: usize,
        /// The symmetric work array.
        psync: *mut c_long,
    },
    /// A team (by native id): the team's sync.
    Team {
        /// The native team id.
        id: i64,
        /// The members (global PEs), in team order.
        pes: Vec<c_int>,
    },
}

impl Group {
    /// The group of team `id` (an error for an invalid team).
    pub fn team(id: i64, call: &str) -> Result<Group, Failure> {
        let pes = state::with(|sh| {
            let t = core::team(sh, id, Api::Oshmem, call)?;
            (0..t.n_pes())
                .map(|i| Ok(t.global_pe(i)? as c_int))
                .collect::<Result<Vec<_>, Error>>()
                .map_err(Failure::from)
        })?;
        Ok(Group::Team { id, pes })
    }

    /// This PE's index among the members (an error naming `call` when it is not one).
    fn my_index(&self, call: &str, me: c_int) -> Result<usize, Failure> {
        match self {
            Group::Active { idx, .. } => Ok(*idx),
            Group::Team { pes, .. } => pes.iter().position(|&p| p == me).ok_or_else(|| {
                Error::invalid(
                    "team",
                    me,
                    format!("{call}: this PE is not a member of the team"),
                )
                .into()
            }),
        }
    }

    fn pes(&self) -> &[c_int] {
        match self {
            Group::Active { pes, .. } | Group::Team { pes, .. } => pes,
        }
    }

    /// Synchronise the members (the active set's barrier over `pSync`, or the team's sync).
    pub fn sync(&self, call: &str) -> Result<(), Failure> {
        match self {
            Group::Active { pes, idx, psync } => crate::psync::barrier(call, pes, *idx, *psync),
            Group::Team { id, .. } => core::sync(*id, Api::Oshmem, call),
        }
    }
}

/// Reduce `n` elements of `T` over `group` with `op`, folding the members' sources in member order.
pub fn fold<T: Copy + Default>(
    call: &str,
    group: &Group,
    op: fn(T, T) -> T,
    dest: *mut T,
    src: *const T,
    n: usize,
) -> Result<(), Failure> {
    let elem = std::mem::size_of::<T>();
    let me = state::with(|sh| Ok(sh.my_pe()))? as c_int;
    group.sync(call)?;
    let mut acc = vec![T::default(); n];
    let mut tmp = vec![T::default(); n];
    for (k, &pe) in group.pes().iter().enumerate() {
        // SAFETY: `tmp` has room for `n` elements; `src` is symmetric (checked by the call).
        unsafe { imp::get(call, tmp.as_mut_ptr().cast(), src.cast(), n, elem, 1, pe) }?;
        for i in 0..n {
            acc[i] = if k == 0 { tmp[i] } else { op(acc[i], tmp[i]) };
        }
    }
    group.sync(call)?;
    // SAFETY: `dest` is this PE's symmetric array of `n` elements (the caller's contract); `acc` holds `n`.
    unsafe { imp::put(call, dest.cast(), acc.as_ptr().cast(), n, elem, 1, me) }?;
    Ok(())
}

/// Prefix-reduce `n` elements of `T` over `group` with `op`: member `i` gets `((s_0 op s_1) ...) op s_i`
/// (`inclusive`) or the fold of `s_0 .. s_{i-1}` (exclusive; member 0 gets `T::default()`, the zero of the
/// arithmetic types this is used for). Synchronises as [`fold`] does, so `dest` may be `src`.
pub fn scan<T: Copy + Default>(
    call: &str,
    group: &Group,
    op: fn(T, T) -> T,
    inclusive: bool,
    dest: *mut T,
    src: *const T,
    n: usize,
) -> Result<(), Failure> {
    let elem = std::mem::size_of::<T>();
    let me = state::with(|sh| Ok(sh.my_pe()))? as c_int;
    let upto = group.my_index(call, me)? + usize::from(inclusive);
    group.sync(call)?;
    let mut acc = vec![T::default(); n];
    let mut tmp = vec![T::default(); n];
    for (k, &pe) in group.pes()[..upto].iter().enumerate() {
        // SAFETY: `tmp` has room for `n` elements; `src` is symmetric (checked by the call).
        unsafe { imp::get(call, tmp.as_mut_ptr().cast(), src.cast(), n, elem, 1, pe) }?;
        for i in 0..n {
            acc[i] = if k == 0 { tmp[i] } else { op(acc[i], tmp[i]) };
        }
    }
    group.sync(call)?;
    // SAFETY: `dest` is this PE's symmetric array of `n` elements (the caller's contract); `acc` holds `n`.
    unsafe { imp::put(call, dest.cast(), acc.as_ptr().cast(), n, elem, 1, me) }?;
    Ok(())
}

/// A complex number as C lays it out (`float _Complex`, `double _Complex`): real, then imaginary part.
pub type Complex<T> = [T; 2];

/// Complex sum, as C computes it.
pub fn complex_sum<T: Copy + std::ops::Add<Output = T>>(
    a: Complex<T>,
    b: Complex<T>,
) -> Complex<T> {
    [a[0] + b[0], a[1] + b[1]]
}

/// Complex product, as C computes it for finite values: `(ac - bd) + (ad + bc)i`.
pub fn complex_prod<T>(a: Complex<T>, b: Complex<T>) -> Complex<T>
where
    T: Copy + std::ops::Add<Output = T> + std::ops::Sub<Output = T> + std::ops::Mul<Output = T>,
{
    [a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0]]
}

/// `long double` arithmetic on the x87 unit, as C does it on x86-64 (the same instructions, in the default
/// extended precision and rounding).
#[cfg(target_arch = "x86_64")]
pub mod x87 {
    use super::LongDouble;
    use std::arch::asm;

    /// `a + b`.
    pub fn add(a: LongDouble, b: LongDouble) -> LongDouble {
        let mut out = LongDouble::default();
        // SAFETY: loads two 10-byte values from live 16-byte locals, stores 10 bytes into `out`; the x87 stack is
        // left as it was found (two pushes, two pops) and every x87 register is declared clobbered.
        unsafe {
            asm!(
                "fld tbyte ptr [{a}]",
                "fld tbyte ptr [{b}]",
                "faddp st(1), st",
                "fstp tbyte ptr [{o}]",
                a = in(reg) &a, b = in(reg) &b, o = in(reg) &mut out,
                out("st(0)") _, out("st(1)") _, out("st(2)") _, out("st(3)") _,
                out("st(4)") _, out("st(5)") _, out("st(6)") _, out("st(7)") _,
                options(nostack),
            );
        }
        out
    }

    /// `a * b`.
    pub fn mul(a: LongDouble, b: LongDouble) -> LongDouble {
        let mut out = LongDouble::default();
        // SAFETY: as for `add`.
        unsafe {
            asm!(
                "fld tbyte ptr [{a}]",
                "fld tbyte ptr [{b}]",
                "fmulp st(1), st",
                "fstp tbyte ptr [{o}]",
                a = in(reg) &a, b = in(reg) &b, o = in(reg) &mut out,
                out("st(0)") _, out("st(1)") _, out("st(2)") _, out("st(3)") _,
                out("st(4)") _, out("st(5)") _, out("st(6)") _, out("st(7)") _,
                options(nostack),
            );
        }
        out
    }

    /// `a < b` (false when either is a NaN, as in C).
    pub fn lt(a: LongDouble, b: LongDouble) -> bool {
        let r: u8;
        // SAFETY: loads two values from live locals (st0 = b, st1 = a), compares them (`fucomip` pops one), pops
        // the other; the x87 stack is left as found. `seta`: b > a, ordered.
        unsafe {
            asm!(
                "fld tbyte ptr [{a}]",
                "fld tbyte ptr [{b}]",
                "fucomip st, st(1)",
                "fstp st(0)",
                "seta {r}",
                a = in(reg) &a, b = in(reg) &b, r = out(reg_byte) r,
                out("st(0)") _, out("st(1)") _, out("st(2)") _, out("st(3)") _,
                out("st(4)") _, out("st(5)") _, out("st(6)") _, out("st(7)") _,
                options(nostack, readonly),
            );
        }
        r != 0
    }

    /// The smaller of `a` and `b` (`b < a ? b : a`).
    pub fn min(a: LongDouble, b: LongDouble) -> LongDouble {
        if lt(b, a) {
            b
        } else {
            a
        }
    }

    /// The larger of `a` and `b` (`a < b ? b : a`).
    pub fn max(a: LongDouble, b: LongDouble) -> LongDouble {
        if lt(a, b) {
            b
        } else {
            a
        }
    }
}
