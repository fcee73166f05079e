//! Atomic memory operations on 4- and 8-byte words of any PE's heap.
//!
//! `fetch`, `set`, `swap` and `compare_swap` take any [`AtomicWord`] (integers and floats); the arithmetic and
//! bitwise operations take [`AtomicInt`]s. All are atomic with respect to every other atomic on the same word from
//! any PE (same-node words are CPU atomics on the shared page). The forms that return nothing (`atomic_set`,
//! `atomic_add`, ...) are delivered like puts: visible to others after [`Shmem::quiet`] (or a barrier); the
//! fetching forms return the value.

use crate::core::Shmem;
use crate::error::Result;
use crate::transport::AmoOp;
use crate::types::{AtomicInt, AtomicWord, Domain, SymRef};

impl Shmem {
    fn amo<T: AtomicWord>(
        &self,
        r: SymRef<T>,
        pe: usize,
        op: AmoOp,
        operand: u64,
        call: &str,
    ) -> Result<T> {
        self.check_range(r.off, T::WIDTH, call)?;
        let old = self.map_of(pe, call)?.amo(r.off, T::WIDTH, op, operand)?;
        Ok(T::from_bits(old))
    }

    /// A non-fetching atomic in domain `d`: delivered like a put (by `d`'s quiet), no value returned.
    #[inline]
    pub(crate) fn amo_post<T: AtomicWord>(
        &self,
        d: Domain,
        r: SymRef<T>,
        pe: usize,
        op: AmoOp,
        operand: u64,
        call: &str,
    ) -> Result<()> {
        self.check_range(r.off, T::WIDTH, call)?;
        self.map_of(pe, call)?
            .amo_post_in(d, r.off, T::WIDTH, op, operand)
    }

    /// Atomically read `r` on `pe`.
    pub fn atomic_fetch<T: AtomicWord>(&self, r: SymRef<T>, pe: usize) -> Result<T> {
        self.amo(r, pe, AmoOp::Fetch, 0, "atomic_fetch")
    }

    /// Atomically write `value` to `r` on `pe`.
    pub fn atomic_set<T: AtomicWord>(&self, r: SymRef<T>, value: T, pe: usize) -> Result<()> {
        self.amo_post(
            Domain::DEFAULT,
            r,
            pe,
            AmoOp::Set,
            value.to_bits(),
            "atomic_set",
        )
    }

    /// Atomically write `value` to `r` on `pe`; the previous value.
    pub fn atomic_swap<T: AtomicWord>(&self, r: SymRef<T>, value: T, pe: usize) -> Result<T> {
        self.amo(r, pe, AmoOp::Swap, value.to_bits(), "atomic_swap")
    }

    /// Atomically write `value` to `r` on `pe` if it holds `cond` (bitwise comparison); the previous value.
    pub fn atomic_compare_swap<T: AtomicWord>(
        &self,
        r: SymRef<T>,
        cond: T,
        value: T,
        pe: usize,
    ) -> Result<T> {
        let op = AmoOp::CompareSwap {
            cond: cond.to_bits(),
        };
        self.amo(r, pe, op, value.to_bits(), "atomic_compare_swap")
    }

    /// Atomically add 1 to `r` on `pe`; the previous value.
    pub fn atomic_fetch_inc<T: AtomicInt>(&self, r: SymRef<T>, pe: usize) -> Result<T> {
        self.amo(r, pe, AmoOp::FetchAdd, T::ONE.to_bits(), "atomic_fetch_inc")
    }

    /// Atomically add 1 to `r` on `pe`.
    pub fn atomic_inc<T: AtomicInt>(&self, r: SymRef<T>, pe: usize) -> Result<()> {
        self.amo_post(
            Domain::DEFAULT,
            r,
            pe,
            AmoOp::FetchAdd,
            T::ONE.to_bits(),
            "atomic_inc",
        )
    }

    /// Atomically add `value` (wrapping) to `r` on `pe`; the previous value.
    ///
    /// ```
    /// # let sh = xpushmem::init_single().unwrap();
    /// let counter = sh.calloc::<u64>(1).unwrap().at(0).unwrap();
    /// assert_eq!(sh.atomic_fetch_add(counter, 5, 0).unwrap(), 0);
    /// assert_eq!(sh.atomic_compare_swap(counter, 5, 9, 0).unwrap(), 5);
    /// assert_eq!(sh.atomic_fetch(counter, 0).unwrap(), 9);
    /// ```
    pub fn atomic_fetch_add<T: AtomicInt>(&self, r: SymRef<T>, value: T, pe: usize) -> Result<T> {
        self.amo(r, pe, AmoOp::FetchAdd, value.to_bits(), "atomic_fetch_add")
    }

    /// Atomically add `value` (wrapping) to `r` on `pe`.
    pub fn atomic_add<T: AtomicInt>(&self, r: SymRef<T>, value: T, pe: usize) -> Result<()> {
        self.amo_post(
            Domain::DEFAULT,
            r,
            pe,
            AmoOp::FetchAdd,
            value.to_bits(),
            "atomic_add",
        )
    }

    /// Atomically `r &= value` on `pe`; the previous value.
    pub fn atomic_fetch_and<T: AtomicInt>(&self, r: SymRef<T>, value: T, pe: usize) -> Result<T> {
        self.amo(r, pe, AmoOp::FetchAnd, value.to_bits(), "atomic_fetch_and")
    }

    /// Atomically `r &= value` on `pe`.
    pub fn atomic_and<T: AtomicInt>(&self, r: SymRef<T>, value: T, pe: usize) -> Result<()> {
        self.amo_post(
            Domain::DEFAULT,
            r,
            pe,
            AmoOp::FetchAnd,
            value.to_bits(),
            "atomic_and",
        )
    }

    /// Atomically `r |= value` on `pe`; the previous value.
    pub fn atomic_fetch_or<T: AtomicInt>(&self, r: SymRef<T>, value: T, pe: usize) -> Result<T> {
        self.amo(r, pe, AmoOp::FetchOr, value.to_bits(), "atomic_fetch_or")
    }

    /// Atomically `r |= value` on `pe`.
    pub fn atomic_or<T: AtomicInt>(&self, r: SymRef<T>, value: T, pe: usize) -> Result<()> {
        self.amo_post(
            Domain::DEFAULT,
            r,
            pe,
            AmoOp::FetchOr,
            value.to_bits(),
            "atomic_or",
        )
    }

    /// Atomically `r ^= value` on `pe`; the previous value.
    pub fn atomic_fetch_xor<T: AtomicInt>(&self, r: SymRef<T>, value: T, pe: usize) -> Result<T> {
        self.amo(r, pe, AmoOp::FetchXor, value.to_bits(), "atomic_fetch_xor")
    }

    /// Atomically `r ^= value` on `pe`.
    pub fn atomic_xor<T: AtomicInt>(&self, r: SymRef<T>, value: T, pe: usize) -> Result<()> {
        self.amo_post(
            Domain::DEFAULT,
            r,
            pe,
            AmoOp::FetchXor,
            value.to_bits(),
            "atomic_xor",
        )
    }
}
