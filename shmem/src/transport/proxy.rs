//! The host proxy of device-initiated operations on PEs that the device does not map (PEs reached through the
//! fabric): kernels fill a ring in host memory ([`crate::abi::ProxyRing`], the layout generated into the device
//! library's header), and a thread of this PE drains it in ticket order and issues the operations through the
//! fabric windows, as NVSHMEM's proxy channel and Intel SHMEM's reverse offload do.
//!
//! The ring: producers (work-items) take a ticket from `head`, wait until the entry is free (`tail`), fill it and
//! publish it with `seq = ticket + 1`. The thread copies each published entry out, frees it (`tail`), and issues
//! it: a put reads its source from this PE's device heap into host memory (the Level Zero copy on the device's
//! service lane) and puts that through the fabric window (which stages it again, or writes registered memory);
//! a get reads from the peer and copies into this PE's heap. When no further entry is published it completes
//! everything issued (the fabric's `quiet`) and advances `completed`, which the kernels' `quiet` and blocking
//! calls wait for (with the device library's timeout). A failed request sets the ring's `error` (`Remote`, with
//! its PE) and keeps the host error for [`DeviceProxy::take_failure`]; `completed` still advances, so no kernel
//! waits for it.
//!
//! Sources and destinations on this PE must lie in its symmetric heap (NVSHMEM asks the same of the local
//! buffers of remote operations: symmetric or registered).

use super::fabric::{amo_of, Fabric};
use super::ze::{HostAlloc, ZeRuntime};
use super::{AmoOp, Transport, Window};
use crate::abi::{
    DeviceError, DeviceSignalOp, ProxyOp, ProxyRequest, ProxyRing, XPUSHMEM_PROXY_DONE,
    XPUSHMEM_PROXY_ENTRIES_OFFSET,
};
use crate::error::{Error, Result};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Entries of the ring.
const CAPACITY: usize = 256;
/// Requests issued before the proxy completes them even if more are published.
const BATCH: usize = 64;

/// This PE's device heap as the proxy reads and writes it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OwnHeap {
    /// Device address of the heap's first byte.
    pub base: usize,
    /// Bytes of the user heap.
    pub len: usize,
}

/// The ring and the thread that drains it.
#[derive(Debug)]
pub(crate) struct DeviceProxy {
    ring: Arc<HostAlloc>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    failure: Arc<Mutex<Option<Error>>>,
}

/// The ring's words as atomics.
struct Ring<'a> {
    hdr: &'a ProxyRingAtomics,
    entries: *const ProxyRequest,
}

/// [`ProxyRing`] seen through atomics (the same layout: checked below).
#[repr(C)]
struct ProxyRingAtomics {
    head: AtomicU64,
    tail: AtomicU64,
    completed: AtomicU64,
    capacity: AtomicU64,
    error: AtomicU32,
    error_pe: AtomicI32,
}

const _: () = assert!(
    std::mem::offset_of!(ProxyRingAtomics, completed) == std::mem::offset_of!(ProxyRing, completed)
        && std::mem::offset_of!(ProxyRingAtomics, error_pe)
            == std::mem::offset_of!(ProxyRing, error_pe)
        && std::mem::size_of::<ProxyRingAtomics>() <= std::mem::size_of::<ProxyRing>()
);

impl Ring<'_> {
    fn of(a: &HostAlloc) -> Ring<'_> {
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
    fn take(&self, t: u64) -> Option<ProxyRequest> {
        if self.seq(t).load(Ordering::Acquire) != t + 1 {
            return None;
        }
        // SAFETY: the index is below CAPACITY; the producer filled the entry before its release store of `seq`
        // (acquired above) and does not touch it again until `tail` passes it.
        Some(unsafe { std::ptr::read_volatile(self.entries.add((t as usize) & (CAPACITY - 1))) })
    }

    /// Answer the atomic of entry `t`: its previous value in `src`, then `seq` marked done.
    fn answer(&self, t: u64, old: u64) {
        let e = self.entries.wrapping_add((t as usize) & (CAPACITY - 1));
        // SAFETY: entry t is taken and not yet acknowledged: only this thread writes it until `seq` says done;
        // `src` is an 8-aligned word of the entry, read by the kernel after its acquire load of `seq`.
        unsafe { std::ptr::write_volatile(std::ptr::addr_of!((*e).src).cast_mut(), old) };
        self.seq(t)
            .store((t + 1) | XPUSHMEM_PROXY_DONE, Ordering::Release);
    }

    /// Whether the kernel has acknowledged the answer of entry `t` (stored 0 in `seq`).
    fn acknowledged(&self, t: u64) -> bool {
        self.seq(t).load(Ordering::Acquire) == 0
    }
}

impl DeviceProxy {
    /// Allocate the ring and (unless `stalled`, a test mode) start the thread that serves it, issuing requests to
    /// PE `pe` through `windows[pe]` and completing them with `fabric`'s quiet.
    pub(crate) fn start(
        rt: &Arc<ZeRuntime>,
        fabric: Arc<Fabric>,
        windows: Vec<Option<Box<dyn Window>>>,
        own: OwnHeap,
        me: usize,
        stalled: bool,
    ) -> Result<DeviceProxy> {
        let bytes =
            XPUSHMEM_PROXY_ENTRIES_OFFSET as usize + CAPACITY * std::mem::size_of::<ProxyRequest>();
        let ring = Arc::new(rt.alloc_host(bytes)?);
        Ring::of(&ring)
            .hdr
            .capacity
            .store(CAPACITY as u64, Ordering::Release);
        let stop = Arc::new(AtomicBool::new(false));
        let failure = Arc::new(Mutex::new(None));
        let thread = if stalled {
            None
        } else {
            let (ring2, stop2, failure2, rt2) = (
                Arc::clone(&ring),
                Arc::clone(&stop),
                Arc::clone(&failure),
                Arc::clone(rt),
            );
            Some(
                std::thread::Builder::new()
                    .name(format!("xpushmem-proxy-{me}"))
                    .spawn(move || {
                        let p = Server {
                            rt: rt2,
                            fabric,
                            windows,
                            own,
                            failure: failure2,
                        };
                        p.run(&Ring::of(&ring2), &stop2);
                    })
                    .map_err(|e| Error::os("spawning the device proxy thread", e))?,
            )
        };
        Ok(DeviceProxy {
            ring,
            stop,
            thread,
            failure,
        })
    }

    /// The ring's address for the device state (host memory kernels reach).
    pub(crate) fn ring_address(&self) -> u64 {
        self.ring.ptr() as u64
    }

    /// The host error of the first request the proxy failed (clearing the ring's error word, so kernels run
    /// clean again).
    pub(crate) fn take_failure(&self) -> Option<Error> {
        let e = self
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        Ring::of(&self.ring).hdr.error.store(0, Ordering::Release);
        e
    }
}

impl Drop for DeviceProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What the thread works with.
struct Server {
    rt: Arc<ZeRuntime>,
    fabric: Arc<Fabric>,
    windows: Vec<Option<Box<dyn Window>>>,
    own: OwnHeap,
    failure: Arc<Mutex<Option<Error>>>,
}

impl Server {
    fn run(&self, ring: &Ring<'_>, stop: &AtomicBool) {
        let mut next = ring.hdr.tail.load(Ordering::Acquire);
        // Answered atomics not yet acknowledged: their entries (and every later one) stay taken.
        let mut unacked = std::collections::VecDeque::new();
        let mut issued = 0usize;
        let mut idle = 0u32;
        while !stop.load(Ordering::Acquire) {
            while unacked.front().is_some_and(|&t| ring.acknowledged(t)) {
                unacked.pop_front();
            }
            // Entries copied out (and acknowledged): producers may refill them.
            let free = unacked.front().copied().unwrap_or(next);
            if ring.hdr.tail.load(Ordering::Relaxed) != free {
                ring.hdr.tail.store(free, Ordering::Release);
            }
            if let Some(req) = ring.take(next) {
                let t = next;
                tracing::debug!(ticket = t, op = req.op, pe = req.pe, "device proxy request");
                next += 1;
                match self.issue(&req) {
                    Ok(Some(old)) => {
                        ring.answer(t, old);
                        unacked.push_back(t);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        self.fail(ring, req.pe, e);
                        if req.op == ProxyOp::Amo as u32 {
                            ring.answer(t, 0);
                            unacked.push_back(t);
                        }
                    }
                }
                issued += 1;
                idle = 0;
                if issued < BATCH {
                    continue;
                }
            }
            if issued > 0 {
                if let Err(e) = self.fabric.quiet() {
                    self.fail(ring, -1, e);
                }
                ring.hdr.completed.store(next, Ordering::Release);
                issued = 0;
                continue;
            }
            idle = idle.saturating_add(1);
            if idle < 64 {
                std::hint::spin_loop();
            } else if idle < 1024 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
    }

    fn fail(&self, ring: &Ring<'_>, pe: i32, e: Error) {
        tracing::debug!("device proxy: a request to PE {pe} failed: {e}");
        let mut f = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        if f.is_none() {
            *f = Some(e);
            ring.hdr.error_pe.store(pe, Ordering::Relaxed);
            ring.hdr
                .error
                .store(DeviceError::Remote as u32, Ordering::Release);
        }
    }

    /// The range `[addr, addr + len)` of this PE's heap (a device address), or an error naming it.
    fn own_range(&self, what: &str, addr: u64, len: u64) -> Result<usize> {
        let base = self.own.base as u64;
        let off = addr.wrapping_sub(base);
        if addr < base || off > self.own.len as u64 || len > self.own.len as u64 - off {
            return Err(Error::Device(format!(
                "a kernel's {what} through the host proxy names {addr:#x}+{len}, outside this PE's symmetric heap \
                 (the local buffer of a remote operation must be symmetric)"
            )));
        }
        Ok(addr as usize)
    }

    /// Issue one request; an atomic's previous value.
    fn issue(&self, r: &ProxyRequest) -> Result<Option<u64>> {
        let pe = r.pe;
        let w = usize::try_from(pe)
            .ok()
            .and_then(|p| self.windows.get(p))
            .and_then(|w| w.as_deref())
            .ok_or_else(|| {
                Error::Device(format!(
                    "a proxy request names PE {pe}, which the fabric does not reach"
                ))
            })?;
        let sig_op = |v: u32| {
            if v == DeviceSignalOp::Add as u32 {
                AmoOp::FetchAdd
            } else {
                AmoOp::Set
            }
        };
        let read_src = || -> Result<Vec<u8>> {
            let src = self.own_range("source", r.src, r.len)?;
            let mut buf = vec![0u8; r.len as usize];
            // SAFETY: `src` lies in this PE's device heap (checked), `buf` is a host buffer of the same length.
            unsafe {
                self.rt
                    .service_copy(buf.as_mut_ptr(), src as *const u8, buf.len())?
            };
            Ok(buf)
        };
        let done = |r: Result<()>| r.map(|()| None);
        match r.op {
            x if x == ProxyOp::Amo as u32 => {
                // The staging messages' decoding: the device's code with the width in the high half.
                let (op, width) =
                    amo_of(r.sig_op as u64 | r.len << 32, r.sig).ok_or_else(|| {
                        Error::Device(format!(
                            "a proxy atomic with code {} on {} bytes",
                            r.sig_op, r.len
                        ))
                    })?;
                w.amo(r.dst as usize, width, op, r.value).map(Some)
            }
            x if x == ProxyOp::Put as u32 => {
                let buf = read_src()?;
                done(w.put_nbi(r.dst as usize, &buf).map(|_| ()))
            }
            x if x == ProxyOp::PutSignal as u32 => {
                let buf = read_src()?;
                let s = w.put_signal_nbi(
                    r.dst as usize,
                    &buf,
                    r.sig as usize,
                    sig_op(r.sig_op),
                    r.value,
                );
                done(s.map(|_| ()))
            }
            x if x == ProxyOp::Signal as u32 => {
                done(w.amo_post(r.sig as usize, 8, sig_op(r.sig_op), r.value))
            }
            x if x == ProxyOp::PutValue as u32 => {
                let n = (r.len as usize).min(8);
                done(w.write(r.dst as usize, &r.value.to_le_bytes()[..n]))
            }
            x if x == ProxyOp::Get as u32 => {
                let dst = self.own_range("destination", r.dst, r.len)?;
                let mut buf = vec![0u8; r.len as usize];
                w.read(r.src as usize, &mut buf)?;
                // SAFETY: `dst` lies in this PE's device heap (checked); `buf` holds exactly its length.
                done(unsafe {
                    self.rt
                        .service_copy(dst as *mut u8, buf.as_ptr(), buf.len())
                })
            }
            op => Err(Error::Device(format!(
                "a proxy request with unknown op code {op}"
            ))),
        }
    }
}
