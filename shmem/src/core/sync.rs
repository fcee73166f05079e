//! Signals and point-to-point synchronisation: `put_signal`, `signal_fetch`, `signal_wait_until`, `wait_until`,
//! `test` and their `_all`/`_any`/`_some` and vector forms.
//!
//! A put-with-signal writes the data, then (release) updates the signal word: whoever sees the signal sees the data.
//! Waits read the local word atomically (acquire), with the runtime's back-off, timeout and lost-peer detection.

use crate::core::rma::Pending;
use crate::core::Shmem;
use crate::error::{Error, Result};
use crate::sys::bytes::bytes_of;
use crate::transport::AmoOp;
use crate::types::{AtomicWord, Cmp, Domain, SignalOp, SymRef, SymSlice, Symmetric};

/// Integer types that point-to-point synchronisation works on (`wait_until`, `test` and their set and vector
/// forms): the [`AtomicInt`](crate::AtomicInt)s and the 16-bit integers (OpenSHMEM's `short` and `unsigned short`
/// waits). A 16-bit variable is read through an atomic load of the aligned 4-byte word that holds it, so every
/// transport's 4- and 8-byte atomics serve (there are no 16-bit AMOs). Implemented for the standard types only.
pub trait SyncInt: Symmetric + Ord {
    /// Width in bytes (2, 4 or 8).
    const WIDTH: usize;
    /// The value from its bits (the low `WIDTH` bytes).
    fn from_bits(bits: u64) -> Self;
}

impl SyncInt for i16 {
    const WIDTH: usize = 2;
    fn from_bits(bits: u64) -> Self {
        bits as u16 as i16
    }
}

impl SyncInt for u16 {
    const WIDTH: usize = 2;
    fn from_bits(bits: u64) -> Self {
        bits as u16
    }
}

macro_rules! sync_int_atomic {
    ($($t:ty),*) => {$(
        impl SyncInt for $t {
            const WIDTH: usize = <$t as AtomicWord>::WIDTH;
            fn from_bits(bits: u64) -> Self {
                <$t as AtomicWord>::from_bits(bits)
            }
        }
    )*};
}
sync_int_atomic!(i32, u32, i64, u64, isize, usize);

/// What each element of a wait set is compared with.
#[derive(Debug, Clone, Copy)]
enum Against<'a, T> {
    One(T),
    Each(&'a [T]),
}

impl Shmem {
    /// Put `src` into `dst` on `pe`, then update the signal word `sig` on `pe` with `value` (SET or ADD). The
    /// data is visible on `pe` before the signal is.
    ///
    /// ```
    /// use xpushmem::{Cmp, SignalOp};
    /// # let sh = xpushmem::init_single().unwrap();
    /// let data = sh.malloc::<f32>(256).unwrap();
    /// let sig = sh.calloc::<u64>(1).unwrap().at(0).unwrap();
    /// sh.put_signal(data, &[1.5; 256], sig, 1, SignalOp::Add, 0).unwrap();
    /// assert_eq!(sh.signal_wait_until(sig, Cmp::Ge, 1).unwrap(), 1);
    /// ```
    pub fn put_signal<T: Symmetric>(
        &self,
        dst: SymSlice<T>,
        src: &[T],
        sig: SymRef<u64>,
        value: u64,
        op: SignalOp,
        pe: usize,
    ) -> Result<()> {
        self.put_signal_in(Domain::DEFAULT, dst, src, sig, value, op, pe)
    }

    /// [`Shmem::put_signal`] in domain `d`.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(crate) fn put_signal_in<T: Symmetric>(
        &self,
        d: Domain,
        dst: SymSlice<T>,
        src: &[T],
        sig: SymRef<u64>,
        value: u64,
        op: SignalOp,
        pe: usize,
    ) -> Result<()> {
        // The source is copied or sent before the call returns; only delivery is left to quiet (no handle: a
        // transport that completes later completes it on quiet, which is all a blocking put promises).
        let (win, off, amo) = self.put_signal_target(dst, src.len(), sig, op, pe)?;
        win.put_signal_in(d, off, bytes_of(src), sig.off, amo, value)
    }

    /// Validate a put-with-signal; the target's window, the data's offset and the signal's operation.
    #[inline]
    fn put_signal_target<T: Symmetric>(
        &self,
        dst: SymSlice<T>,
        count: usize,
        sig: SymRef<u64>,
        op: SignalOp,
        pe: usize,
    ) -> Result<(&dyn crate::transport::Window, usize, AmoOp)> {
        const CALL: &str = "put_signal";
        self.check_range(sig.off, 8, "put_signal (signal)")?;
        let off = self.rma_target(dst, count, pe, CALL)?;
        let amo = match op {
            SignalOp::Set => AmoOp::Set,
            SignalOp::Add => AmoOp::FetchAdd,
        };
        Ok((self.map_of(pe, CALL)?, off, amo))
    }

    /// Non-blocking [`Shmem::put_signal`]: `src` stays borrowed until the handle completes.
    pub fn put_signal_nbi<'a, T: Symmetric>(
        &'a self,
        dst: SymSlice<T>,
        src: &'a [T],
        sig: SymRef<u64>,
        value: u64,
        op: SignalOp,
        pe: usize,
    ) -> Result<Pending<'a>> {
        self.put_signal_nbi_in(Domain::DEFAULT, dst, src, sig, value, op, pe)
    }

    /// [`Shmem::put_signal_nbi`] in domain `d`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn put_signal_nbi_in<'a, T: Symmetric>(
        &'a self,
        d: Domain,
        dst: SymSlice<T>,
        src: &'a [T],
        sig: SymRef<u64>,
        value: u64,
        op: SignalOp,
        pe: usize,
    ) -> Result<Pending<'a>> {
        let (win, off, amo) = self.put_signal_target(dst, src.len(), sig, op, pe)?;
        let t = win.put_signal_nbi_in(d, off, bytes_of(src), sig.off, amo, value)?;
        Ok(Pending::new(self.transport_of(pe, "put_signal")?, t, None))
    }

    /// Atomically read this PE's signal word `sig`.
    pub fn signal_fetch(&self, sig: SymRef<u64>) -> Result<u64> {
        self.check_range(sig.off, 8, "signal_fetch")?;
        self.local_map().amo(sig.off, 8, AmoOp::Fetch, 0)
    }

    /// Wait until this PE's signal word satisfies `sig <cmp> value`; the value that satisfied it.
    pub fn signal_wait_until(&self, sig: SymRef<u64>, cmp: Cmp, value: u64) -> Result<u64> {
        let word = self.local_word(sig.off, "signal_wait_until")?;
        let mut seen = 0;
        self.wait_for(
            "signal_wait_until",
            &|| {
                let now = word.load().unwrap_or_default();
                format!(
                    "signal at heap+{:#x} is {now}, waiting for {cmp:?} {value}",
                    sig.off
                )
            },
            || {
                seen = word.load()?;
                Ok(cmp.holds(seen, value))
            },
        )?;
        Ok(seen)
    }

    fn load_local<T: SyncInt>(&self, r: SymRef<T>) -> Result<T> {
        if T::WIDTH == 2 {
            // The aligned 4-byte word that holds the 16-bit variable, read atomically; then its half.
            let word_off = r.off & !3;
            let word = self.local_map().amo(word_off, 4, AmoOp::Fetch, 0)? as u32;
            let b = word.to_ne_bytes();
            let i = r.off - word_off;
            return Ok(T::from_bits(u16::from_ne_bytes([b[i], b[i + 1]]) as u64));
        }
        self.local_map()
            .amo(r.off, T::WIDTH, AmoOp::Fetch, 0)
            .map(T::from_bits)
    }

    /// Indices of `ivars` (not skipped) that satisfy their comparison now.
    fn satisfied<T: SyncInt>(
        &self,
        ivars: SymSlice<T>,
        skip: Option<&[bool]>,
        cmp: Cmp,
        against: Against<'_, T>,
    ) -> Result<Vec<usize>> {
        let mut hits = Vec::new();
        for (i, r) in ivars.iter().enumerate() {
            if skip.is_some_and(|s| s[i]) {
                continue;
            }
            let v = match against {
                Against::One(v) => v,
                Against::Each(vs) => vs[i],
            };
            if cmp.holds(self.load_local(r)?, v) {
                hits.push(i);
            }
        }
        Ok(hits)
    }

    fn check_set<T: SyncInt>(
        &self,
        ivars: SymSlice<T>,
        skip: Option<&[bool]>,
        against: Against<'_, T>,
        call: &str,
    ) -> Result<usize> {
        self.check_range(ivars.off, ivars.size_bytes(), call)?;
        if ivars.off % T::WIDTH != 0 {
            return Err(Error::invalid(
                "ivars",
                format!("{ivars:?}"),
                "must be aligned to the element size",
            ));
        }
        if let Some(s) = skip {
            if s.len() != ivars.len() {
                return Err(Error::invalid(
                    "skip",
                    s.len(),
                    format!("must have one flag per variable ({})", ivars.len()),
                ));
            }
        }
        if let Against::Each(vs) = against {
            if vs.len() != ivars.len() {
                return Err(Error::invalid(
                    "values",
                    vs.len(),
                    format!("must have one value per variable ({})", ivars.len()),
                ));
            }
        }
        Ok(skip.map_or(ivars.len(), |s| s.iter().filter(|x| !**x).count()))
    }

    fn wait_set<T: SyncInt>(
        &self,
        ivars: SymSlice<T>,
        skip: Option<&[bool]>,
        cmp: Cmp,
        against: Against<'_, T>,
        need: Need,
        call: &'static str,
    ) -> Result<Vec<usize>> {
        let active = self.check_set(ivars, skip, against, call)?;
        let mut hits = Vec::new();
        if active == 0 {
            return Ok(hits);
        }
        self.wait_for(
            call,
            &|| format!("{active} variables at {ivars:?}, condition {cmp:?}"),
            || {
                hits = self.satisfied(ivars, skip, cmp, against)?;
                Ok(match need {
                    Need::All => hits.len() == active,
                    Need::Any => !hits.is_empty(),
                })
            },
        )?;
        Ok(hits)
    }

    /// Wait until this PE's `ivar <cmp> value`.
    ///
    /// ```
    /// use xpushmem::Cmp;
    /// # let sh = xpushmem::init_single().unwrap();
    /// let flag = sh.calloc::<i32>(1).unwrap().at(0).unwrap();
    /// sh.atomic_set(flag, 3, sh.my_pe()).unwrap(); // normally another PE does this
    /// sh.wait_until(flag, Cmp::Ge, 3).unwrap();
    /// assert!(sh.test(flag, Cmp::Eq, 3).unwrap());
    /// ```
    pub fn wait_until<T: SyncInt>(&self, ivar: SymRef<T>, cmp: Cmp, value: T) -> Result<()> {
        self.wait_set(
            ivar.as_slice(),
            None,
            cmp,
            Against::One(value),
            Need::All,
            "wait_until",
        )
        .map(|_| ())
    }

    /// Whether this PE's `ivar <cmp> value` holds now.
    pub fn test<T: SyncInt>(&self, ivar: SymRef<T>, cmp: Cmp, value: T) -> Result<bool> {
        self.test_all(ivar.as_slice(), None, cmp, value)
    }

    /// Wait until every variable of `ivars` not marked in `skip` satisfies `<cmp> value`.
    pub fn wait_until_all<T: SyncInt>(
        &self,
        ivars: SymSlice<T>,
        skip: Option<&[bool]>,
        cmp: Cmp,
        value: T,
    ) -> Result<()> {
        self.wait_set(
            ivars,
            skip,
            cmp,
            Against::One(value),
            Need::All,
            "wait_until_all",
        )
        .map(|_| ())
    }

    /// Wait until some variable not marked in `skip` satisfies `<cmp> value`; its index, or `None` when every
    /// variable is skipped. When several do, successive calls start their search one index further on (see
    /// [`fair_pick`]), so a program that polls until it has seen every index finishes.
    pub fn wait_until_any<T: SyncInt>(
        &self,
        ivars: SymSlice<T>,
        skip: Option<&[bool]>,
        cmp: Cmp,
        value: T,
    ) -> Result<Option<usize>> {
        self.wait_set(
            ivars,
            skip,
            cmp,
            Against::One(value),
            Need::Any,
            "wait_until_any",
        )
        .map(|hits| fair_pick(&hits, ivars.len()))
    }

    /// Wait until at least one variable not marked in `skip` satisfies `<cmp> value`; the indices of all that do.
    pub fn wait_until_some<T: SyncInt>(
        &self,
        ivars: SymSlice<T>,
        skip: Option<&[bool]>,
        cmp: Cmp,
        value: T,
    ) -> Result<Vec<usize>> {
        self.wait_set(
            ivars,
            skip,
            cmp,
            Against::One(value),
            Need::Any,
            "wait_until_some",
        )
    }

    /// [`Shmem::wait_until_all`] with one comparison value per variable.
    pub fn wait_until_all_vector<T: SyncInt>(
        &self,
        ivars: SymSlice<T>,
        skip: Option<&[bool]>,
        cmp: Cmp,
        values: &[T],
    ) -> Result<()> {
        self.wait_set(
            ivars,
            skip,
            cmp,
            Against::Each(values),
            Need::All,
            "wait_until_all_vector",
        )
        .map(|_| ())
    }

    /// [`Shmem::wait_until_any`] with one comparison value per variable.
    pub fn wait_until_any_vector<T: SyncInt>(
        &self,
        ivars: SymSlice<T>,
        skip: Option<&[bool]>,
        cmp: Cmp,
        values: &[T],
    ) -> Result<Option<usize>> {
        self.wait_set(
            ivars,
            skip,
            cmp,
            Against::Each(values),
            Need::Any,
            "wait_until_any_vector",
        )
        .map(|hits| fair_pick(&hits, ivars.len()))
    }

    /// [`Shmem::wait_until_some`] with one comparison value per variable.
    pub fn wait_until_some_vector<T: SyncInt>(
        &self,
        ivars: SymSlice<T>,
        skip: Option<&[bool]>,
        cmp: Cmp,
        values: &[T],
    ) -> Result<Vec<usize>> {
        self.wait_set(
            ivars,
            skip,
            cmp,
            Against::Each(values),
            Need::Any,
            "wait_until_some_vector",
        )
    }

    fn test_set<T: SyncInt>(
        &self,
        ivars: SymSlice<T>,
        skip: Option<&[bool]>,
        cmp: Cmp,
        against: Against<'_, T>,
        call: &str,
    ) -> Result<(usize, Vec<usize>)> {
        let active = self.check_set(ivars, skip, against, call)?;
        // One step of every transport that needs driving (none on shared memory alone), as a wait's poll does: a
        // program that loops on a test (OpenSHMEM's `while (!shmem_test(..))`) over a software fabric provider
        // without the progress thread would otherwise never see a peer's write land.
        self.progress()?;
        Ok((active, self.satisfied(ivars, skip, cmp, against)?))
    }

    /// Whether every variable not marked in `skip` satisfies `<cmp> value` now.
    pub fn test_all<T: SyncInt>(
        &self,
        ivars: SymSlice<T>,
        skip: Option<&[bool]>,
        cmp: Cmp,
        value: T,
    ) -> Result<bool> {
        let (active, hits) = self.test_set(ivars, skip, cmp, Against::One(value), "test_all")?;
        Ok(hits.len() == active)
    }

    /// The index of a variable (not marked in `skip`) satisfying `<cmp> value` now, chosen as by
    /// [`Shmem::wait_until_any`] (rotating start).
    pub fn test_any<T: SyncInt>(
        &self,
        ivars: SymSlice<T>,
        skip: Option<&[bool]>,
        cmp: Cmp,
        value: T,
    ) -> Result<Option<usize>> {
        let (_, hits) = self.test_set(ivars, skip, cmp, Against::One(value), "test_any")?;
        Ok(fair_pick(&hits, ivars.len()))
    }

    /// The indices of the variables (not marked in `skip`) satisfying `<cmp> value` now.
    pub fn test_some<T: SyncInt>(
        &self,
        ivars: SymSlice<T>,
        skip: Option<&[bool]>,
        cmp: Cmp,
        value: T,
    ) -> Result<Vec<usize>> {
        Ok(self
            .test_set(ivars, skip, cmp, Against::One(value), "test_some")?
            .1)
    }

    /// [`Shmem::test_all`] with one comparison value per variable.
    pub fn test_all_vector<T: SyncInt>(
        &self,
        ivars: SymSlice<T>,
        skip: Option<&[bool]>,
        cmp: Cmp,
        values: &[T],
    ) -> Result<bool> {
        let (active, hits) =
            self.test_set(ivars, skip, cmp, Against::Each(values), "test_all_vector")?;
        Ok(hits.len() == active)
    }

    /// [`Shmem::test_any`] with one comparison value per variable.
    pub fn test_any_vector<T: SyncInt>(
        &self,
        ivars: SymSlice<T>,
        skip: Option<&[bool]>,
        cmp: Cmp,
        values: &[T],
    ) -> Result<Option<usize>> {
        let (_, hits) =
            self.test_set(ivars, skip, cmp, Against::Each(values), "test_any_vector")?;
        Ok(fair_pick(&hits, ivars.len()))
    }

    /// [`Shmem::test_some`] with one comparison value per variable.
    pub fn test_some_vector<T: SyncInt>(
        &self,
        ivars: SymSlice<T>,
        skip: Option<&[bool]>,
        cmp: Cmp,
        values: &[T],
    ) -> Result<Vec<usize>> {
        Ok(self
            .test_set(ivars, skip, cmp, Against::Each(values), "test_some_vector")?
            .1)
    }
}

#[derive(Debug, Clone, Copy)]
enum Need {
    All,
    Any,
}

/// Where the next `_any` search starts (a process-wide rotation, advanced by every call that finds something).
static ANY_START: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// One of the ascending indices `hits` (of `len` variables): the first at or after a start index that rotates by
/// one per call, wrapping around. Lowest-first would report the same variable forever while it stays satisfied,
/// starving the others (OpenSHMEM implementations rotate likewise).
pub fn fair_pick(hits: &[usize], len: usize) -> Option<usize> {
    if hits.is_empty() || len == 0 {
        return None;
    }
    let start = ANY_START.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % len;
    Some(
        hits.iter()
            .copied()
            .find(|&i| i >= start)
            .unwrap_or(hits[0]),
    )
}
