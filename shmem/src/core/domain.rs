//! Completion domains (OpenSHMEM contexts): [`Shmem::domain_open`], [`Shmem::domain_close`], and the view
//! [`OnDomain`] that issues puts, non-fetching atomics and signals in one domain and completes (`quiet`) or orders
//! (`fence`) that domain's operations only. The calls of [`Shmem`] itself are the default domain's
//! ([`Domain::DEFAULT`]); fetching operations (gets, fetching atomics) complete at once, whatever their domain,
//! after any earlier operation of this PE on the same bytes. The domain is passed explicitly down to the
//! transports (`Window::write_in`, `Transport::quiet`), never through thread-local state.

use crate::core::rma::Pending;
use crate::core::Shmem;
use crate::error::{Error, Result};
use crate::transport::AmoOp;
use crate::types::{AtomicInt, AtomicWord, Domain, SignalOp, SymRef, SymSlice, Symmetric};
use std::collections::BTreeSet;
use std::sync::Mutex;

/// The open domains of one PE (the default one is always open and not listed).
#[derive(Debug, Default)]
pub(crate) struct Domains {
    open: Mutex<BTreeSet<u32>>,
}

impl Domains {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<u32>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The error for a domain that is not open.
#[cold]
#[inline(never)]
fn closed(d: Domain, call: &str) -> Error {
    Error::invalid(
        "domain",
        d.0,
        format!("{call}: not an open domain (closed already, or never opened by domain_open)"),
    )
}

impl Shmem {
    /// Open a completion domain: operations issued in it ([`Shmem::on`]) are completed by its own quiet, and by
    /// [`Shmem::quiet_all`] (finalize), not by the default domain's [`Shmem::quiet`] or a barrier.
    ///
    /// ```
    /// # let sh = xpushmem::init_single().unwrap();
    /// let x = sh.calloc::<u64>(1).unwrap();
    /// let d = sh.domain_open().unwrap();
    /// sh.on(d).unwrap().put(x, &[7], 0).unwrap();
    /// sh.on(d).unwrap().quiet().unwrap();
    /// assert_eq!(sh.g(x.at(0).unwrap(), 0).unwrap(), 7);
    /// sh.domain_close(d).unwrap();
    /// assert!(sh.on(d).is_err());
    /// # sh.free(x).unwrap();
    /// ```
    pub fn domain_open(&self) -> Result<Domain> {
        let mut open = self.domains.lock();
        // The lowest free number from 1 (numbers are reused once closed).
        let n = (1..=u32::MAX)
            .zip(open.iter().copied().chain(std::iter::once(0)))
            .find(|&(want, have)| want != have)
            .map_or(open.len() as u32 + 1, |(want, _)| want);
        if n == u32::MAX {
            return Err(Error::invalid("domain", n, "every domain number is in use"));
        }
        open.insert(n);
        Ok(Domain(n))
    }

    /// Complete every operation of domain `d`, then close it (its number may be handed out again). The default
    /// domain cannot be closed.
    pub fn domain_close(&self, d: Domain) -> Result<()> {
        if d == Domain::DEFAULT || !self.domains.lock().contains(&d.0) {
            return Err(closed(d, "domain_close"));
        }
        let r = self.quiet_in(d);
        self.domains.lock().remove(&d.0);
        r
    }

    /// The calls that issue in domain `d`, or an error when it is not open.
    #[inline]
    pub fn on(&self, d: Domain) -> Result<OnDomain<'_>> {
        if d != Domain::DEFAULT && !self.domains.lock().contains(&d.0) {
            return Err(closed(d, "on"));
        }
        Ok(OnDomain { sh: self, d })
    }
}

/// A PE's calls in one completion domain ([`Shmem::on`]): as [`Shmem`]'s calls of the same names, with delivery
/// completed by this domain's [`OnDomain::quiet`] and ordered by its [`OnDomain::fence`].
#[derive(Debug, Clone, Copy)]
pub struct OnDomain<'a> {
    sh: &'a Shmem,
    d: Domain,
}

impl<'a> OnDomain<'a> {
    /// The domain.
    pub fn domain(&self) -> Domain {
        self.d
    }

    /// [`Shmem::put`] in this domain.
    #[inline]
    pub fn put<T: Symmetric>(&self, dst: SymSlice<T>, src: &[T], pe: usize) -> Result<()> {
        self.sh.put_in(self.d, dst, src, pe)
    }

    /// [`Shmem::p`] in this domain.
    pub fn p<T: Symmetric>(&self, dst: SymRef<T>, value: T, pe: usize) -> Result<()> {
        self.put(dst.as_slice(), &[value], pe)
    }

    /// [`Shmem::get`] (complete on return, whatever the domain).
    pub fn get<T: Symmetric>(&self, dst: &mut [T], src: SymSlice<T>, pe: usize) -> Result<()> {
        self.sh.get(dst, src, pe)
    }

    /// [`Shmem::put_nbi`] in this domain.
    pub fn put_nbi<T: Symmetric>(
        &self,
        dst: SymSlice<T>,
        src: &'a [T],
        pe: usize,
    ) -> Result<Pending<'a>> {
        self.sh.put_nbi_in(self.d, dst, src, pe)
    }

    /// [`Shmem::get_nbi`] in this domain.
    pub fn get_nbi<T: Symmetric>(
        &self,
        dst: &'a mut [T],
        src: SymSlice<T>,
        pe: usize,
    ) -> Result<Pending<'a>> {
        self.sh.get_nbi_in(self.d, dst, src, pe)
    }

    /// [`Shmem::iput`] in this domain.
    pub fn iput<T: Symmetric>(
        &self,
        dst: SymSlice<T>,
        src: &[T],
        dst_stride: usize,
        src_stride: usize,
        nelems: usize,
        pe: usize,
    ) -> Result<()> {
        self.sh
            .iput_in(self.d, dst, src, dst_stride, src_stride, nelems, pe)
    }

    /// [`Shmem::put_signal`] in this domain.
    pub fn put_signal<T: Symmetric>(
        &self,
        dst: SymSlice<T>,
        src: &[T],
        sig: SymRef<u64>,
        value: u64,
        op: SignalOp,
        pe: usize,
    ) -> Result<()> {
        self.sh.put_signal_in(self.d, dst, src, sig, value, op, pe)
    }

    /// [`Shmem::put_signal_nbi`] in this domain.
    pub fn put_signal_nbi<T: Symmetric>(
        &self,
        dst: SymSlice<T>,
        src: &'a [T],
        sig: SymRef<u64>,
        value: u64,
        op: SignalOp,
        pe: usize,
    ) -> Result<Pending<'a>> {
        self.sh
            .put_signal_nbi_in(self.d, dst, src, sig, value, op, pe)
    }

    /// [`Shmem::atomic_set`] in this domain.
    pub fn atomic_set<T: AtomicWord>(&self, r: SymRef<T>, value: T, pe: usize) -> Result<()> {
        self.sh
            .amo_post(self.d, r, pe, AmoOp::Set, value.to_bits(), "atomic_set")
    }

    /// [`Shmem::atomic_add`] in this domain.
    pub fn atomic_add<T: AtomicInt>(&self, r: SymRef<T>, value: T, pe: usize) -> Result<()> {
        self.sh.amo_post(
            self.d,
            r,
            pe,
            AmoOp::FetchAdd,
            value.to_bits(),
            "atomic_add",
        )
    }

    /// Order this domain's puts, AMOs and signals to each PE: those before the fence are delivered first.
    pub fn fence(&self) -> Result<()> {
        self.sh.fence_in(self.d)
    }

    /// Complete every put, AMO and signal this PE issued in this domain.
    pub fn quiet(&self) -> Result<()> {
        self.sh.quiet_in(self.d)
    }
}
