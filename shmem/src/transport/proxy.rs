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
//! Sources and destinations on this PE must lie in the part of its symmetric heap that every PE has mapped (it grows
//! at allocations' agreements, [`crate::transport::fabric::Fabric::expose`]) or the device library's scratch tail
//! at the end of its reserve, never in the unmapped reserve between them (NVSHMEM asks the same of the local
//! buffers of remote operations: symmetric or registered); the targets of requests may lie in the peers' scratch
//! tails too (device barriers add to the members' arrival counters there), and are checked by the fabric windows
//! against the chunks each peer published.

use super::fabric::{amo_of, Fabric};
use super::ze::{HostAlloc, ZeRuntime};
use super::{AmoOp, Transport, Window};
use crate::abi::{
    DeviceError, DeviceSignalOp, ProxyOp, ProxyRequest, XPUSHMEM_PROXY_ENTRIES_OFFSET,
};
use crate::error::{Error, Result};
use crate::hal::ring::{Ring, CAPACITY};
use crate::net::ofi::DeviceSpan;
use crate::wait::Backoff;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The idle server's back-off ([`Backoff`]): 64 polls spinning, then yielding up to the 1024th, then sleeping up to
/// 20 us at a time; no time limit (the thread serves until the proxy stops).
fn idle_backoff() -> Backoff {
    Backoff::new(64, 960, Duration::from_micros(20), None)
}

/// Requests issued before the proxy completes them even if more are published.
const BATCH: usize = 64;

/// This PE's device heap as the proxy reads and writes it.
#[derive(Debug, Clone)]
pub(crate) struct OwnHeap {
    /// Device address of the heap's first byte.
    pub base: usize,
    /// What of the heap is served: its bytes mapped on every PE and its agreed team chunks (shared with the
    /// fabric, which raises it as the heap grows and edits its team chunks).
    pub served: Arc<crate::net::ofi::Served>,
    /// The device library's scratch tail (the reduction scratch area, barrier counters): offset from the base,
    /// bytes.
    pub tail: (usize, usize),
}

/// The ring and the thread that drains it.
#[derive(Debug)]
pub(crate) struct DeviceProxy {
    ring: Arc<HostAlloc>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    failure: Arc<Mutex<Option<Error>>>,
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
                            heap: DeviceSpan::new(rt2, own.base, own.served, own.tail),
                            base: own.base,
                            fabric,
                            windows,
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
    /// This PE's heap, copied to and from on the device's service lane.
    heap: DeviceSpan,
    /// Its device address.
    base: usize,
    fabric: Arc<Fabric>,
    windows: Vec<Option<Box<dyn Window>>>,
    failure: Arc<Mutex<Option<Error>>>,
}

impl Server {
    fn run(&self, ring: &Ring<'_>, stop: &AtomicBool) {
        let mut next = ring.hdr.tail.load(Ordering::Acquire);
        // Answered atomics not yet acknowledged: their entries (and every later one) stay taken.
        let mut unacked = std::collections::VecDeque::new();
        let mut issued = 0usize;
        let mut idle = idle_backoff();
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
                        if ProxyOp::answered(req.op) {
                            ring.answer(t, 0);
                            unacked.push_back(t);
                        }
                    }
                }
                issued += 1;
                idle = idle_backoff();
                if issued < BATCH {
                    continue;
                }
            }
            if issued > 0 {
                if let Err(e) = self.fabric.quiet_all() {
                    self.fail(ring, -1, e);
                }
                ring.hdr.completed.store(next, Ordering::Release);
                issued = 0;
                continue;
            }
            // Nothing published: spin, yield, then sleep (nothing here drives the fabric's progress, which its
            // progress thread does; a kernel's request waits at most one sleep).
            idle.pause(|| false);
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

    /// The offset of `[addr, addr + len)` (a device address) in this PE's heap, or an error naming it: the range
    /// must lie in the mapped heap or its scratch tail ([`DeviceSpan::holds`]).
    fn own_range(&self, what: &str, addr: u64, len: u64) -> Result<usize> {
        let off = addr.checked_sub(self.base as u64);
        match off.and_then(|o| usize::try_from(o).ok()) {
            Some(o) if usize::try_from(len).is_ok_and(|l| self.heap.holds(o, l)) => Ok(o),
            _ => Err(Error::Device(format!(
                "a kernel's {what} through the host proxy names {addr:#x}+{len}, outside this PE's symmetric heap \
                 (the local buffer of a remote operation must be symmetric, in the heap's mapped part)"
            ))),
        }
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
            self.heap.read(src, &mut buf)?;
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
            x if x == ProxyOp::GetValue as u32 => {
                let n = r.len as usize;
                if ![1, 2, 4, 8].contains(&n) {
                    return Err(Error::Device(format!(
                        "a proxy value read of {n} bytes (1, 2, 4 or 8)"
                    )));
                }
                let mut bytes = [0u8; 8];
                w.read(r.src as usize, &mut bytes[..n])?;
                Ok(Some(u64::from_le_bytes(bytes)))
            }
            x if x == ProxyOp::Get as u32 => {
                let dst = self.own_range("destination", r.dst, r.len)?;
                let mut buf = vec![0u8; r.len as usize];
                w.read(r.src as usize, &mut buf)?;
                done(self.heap.write(dst, &buf))
            }
            op => Err(Error::Device(format!(
                "a proxy request with unknown op code {op}"
            ))),
        }
    }
}
