//! The device proxy's ring (`transport/proxy.rs`) as the host sees it: a [`ProxyRing`] header and [`CAPACITY`]
//! [`ProxyRequest`] entries in host memory that kernels also write ([`HostAlloc`]), read and written through
//! atomics and volatile copies only here.

use super::ze::HostAlloc;
use crate::abi::{ProxyRequest, ProxyRing, XPUSHMEM_PROXY_DONE, XPUSHMEM_PROXY_ENTRIES_OFFSET};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

/// Entries of the ring.
pub(crate) const CAPACITY: usize = 256;

/// The ring's words as atomics.
pub(crate) struct Ring<'a> {
    /// The header's words.
    pub(crate) hdr: &'a ProxyRingAtomics,
    entries: *const ProxyRequest,
}

/// [`ProxyRing`] seen through atomics (the same layout: checked below).
#[repr(C)]
pub(crate) struct ProxyRingAtomics {
    pub(crate) head: AtomicU64,
    pub(crate) tail: AtomicU64,
    pub(crate) completed: AtomicU64,
    pub(crate) capacity: AtomicU64,
    pub(crate) error: AtomicU32,
    pub(crate) error_pe: AtomicI32,
}

const _: () = assert!(
    std::mem::offset_of!(ProxyRingAtomics, completed) == std::mem::offset_of!(ProxyRing, completed)
        && std::mem::offset_of!(ProxyRingAtomics, error_pe)
            == std::mem::offset_of!(ProxyRing, error_pe)
        && std::mem::size_of::<ProxyRingAtomics>() <= std::mem::size_of::<ProxyRing>()
);

impl Ring<'_> {
    pub(crate) fn of(a: &HostAlloc) -> Ring<'_> {
        assert!(
            a.len()
                >= XPUSHMEM_PROXY_ENTRIES_OFFSET as usize
                    + CAPACITY * std::mem::size_of::<ProxyRequest>()
        );
        // SAFETY: the allocation is at least the header plus CAPACITY entries, page-aligned (so aligned for the
        // atomics), zeroed at allocation and alive as long as the borrow; every word shared with kernels is
        // accessed atomically.
        unsafe {
            Ring {
                hdr: &*(a.ptr() as *const ProxyRingAtomics),
                entries: a.ptr().add(XPUSHMEM_PROXY_ENTRIES_OFFSET as usize) as *const ProxyRequest,
            }
        }
    }

    /// Entry `t`'s `seq` word.
    fn seq(&self, t: u64) -> &AtomicU64 {
        // SAFETY: the index is below CAPACITY; `seq` is the entry's first, 8-aligned word, which kernels and this
        // thread access only atomically.
        unsafe { &*(self.entries.add((t as usize) & (CAPACITY - 1)) as *const AtomicU64) }
    }

    /// Entry `t`'s request once it is published (`seq == t + 1`), copied out.
    pub(crate) fn take(&self, t: u64) -> Option<ProxyRequest> {
        if self.seq(t).load(Ordering::Acquire) != t + 1 {
            return None;
        }
        // SAFETY: the index is below CAPACITY; the producer filled the entry before its release store of `seq`
        // (acquired above) and does not touch it again until `tail` passes it.
        Some(unsafe { std::ptr::read_volatile(self.entries.add((t as usize) & (CAPACITY - 1))) })
    }

    /// Answer the atomic of entry `t`: its previous value in `src`, then `seq` marked done.
    pub(crate) fn answer(&self, t: u64, old: u64) {
        let e = self.entries.wrapping_add((t as usize) & (CAPACITY - 1));
        // SAFETY: entry t is taken and not yet acknowledged: only this thread writes it until `seq` says done;
        // `src` is an 8-aligned word of the entry, read by the kernel after its acquire load of `seq`.
        unsafe { std::ptr::write_volatile(std::ptr::addr_of!((*e).src).cast_mut(), old) };
        self.seq(t)
            .store((t + 1) | XPUSHMEM_PROXY_DONE, Ordering::Release);
    }

    /// Whether the kernel has acknowledged the answer of entry `t` (stored 0 in `seq`).
    pub(crate) fn acknowledged(&self, t: u64) -> bool {
        self.seq(t).load(Ordering::Acquire) == 0
    }
}
