//! Registered user buffers (NVSHMEM's `nvshmemx_buffer_register`): ranges of this PE's own host memory that
//! non-blocking puts read, and (over the fabric) non-blocking gets write, in place, without the copy a private
//! buffer gets.
//!
//! A non-blocking put from a private buffer is copied before it returns (over the fabric: into a bounce buffer,
//! `net/ofi/slab.rs`, or the operation's own buffer), because safe code may forget its [`crate::Pending`] and free
//! the buffer while the network still reads it. A registered range is different: the runtime knows it, records
//! every operation in flight from (or into) it, and completes those operations before the range may change hands:
//!
//! - [`Registered`] (Rust) owns its buffer. Reading it ([`Registered::as_slice`]) first completes the gets in
//!   flight into it; writing it ([`Registered::as_mut_slice`]), unregistering it and dropping it first complete
//!   every operation in flight from or into it. So a forgotten handle can delay, never break, memory safety.
//! - [`Shmem::register_raw`] (C's `xpushmemx_buffer_register`) takes the caller's promise instead (an `unsafe fn`):
//!   the memory stays valid until unregistered, and unchanged while a put from it is in flight.
//!
//! Unregistering a range with operations in flight completes them first (a quiet of those operations only) and
//! then unregisters, rather than refusing: whether an operation is still in flight depends on the network's
//! progress, so a refusal would make the same program fail or not from run to run, and the guard's drop (which
//! cannot fail) must complete them anyway. Refused, each with an error naming the argument and its value: a null
//! address, a range of 0 bytes or one that wraps the address space, a range that overlaps a registered one or the
//! symmetric heap (registered already), unregistering an address where no range starts, and unregistering a
//! [`Registered`]'s range through the raw call, and (device heaps) a range of Level Zero device memory: not yet
//! supported (over the fabric it needs `FI_HMEM_ZE` registration or staging through the copy engine; on one node
//! the copy engine already reads a device source in place).

use crate::core::Shmem;
use crate::error::{Error, Result};
use crate::transport::{Ticket, Transport};
use crate::types::{CopyStats, Symmetric};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// One registered range.
#[derive(Debug)]
struct Entry {
    addr: usize,
    len: usize,
    /// Registered by a [`Registered`] (unregistered only by it).
    owned: bool,
    /// Each transport's registration handle.
    handles: Vec<Option<u64>>,
    /// Operations in flight from or into the range: (PE, ticket, whether a get writes the range).
    inflight: Vec<(usize, Ticket, bool)>,
}

/// This PE's registered ranges.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    entries: Mutex<Vec<Entry>>,
    /// How many entries (so that the transfers of a PE that registers nothing never take the lock).
    count: AtomicUsize,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A buffer of this PE's host memory registered as the source of non-blocking puts and, over the fabric, the
/// destination of non-blocking gets, moved in place (no copy); see the module's documentation. Made by
/// [`Shmem::register`]; dropping it completes the operations in flight from or into it, unregisters it and frees
/// the buffer ([`Registered::unregister`] hands the buffer back and reports errors).
///
/// ```
/// # let sh = xpushmem::init_single().unwrap();
/// let dst = sh.calloc::<u64>(4).unwrap();
/// let mut reg = sh.register(vec![1u64, 2, 3, 4]).unwrap();
/// sh.put_nbi(dst, reg.as_slice().unwrap(), 0).unwrap().wait().unwrap();
/// sh.quiet().unwrap();
/// reg.as_mut_slice().unwrap()[0] = 9; // after the put completed
/// assert_eq!(reg.unregister().unwrap(), vec![9, 2, 3, 4]);
/// # sh.free(dst).unwrap();
/// ```
#[derive(Debug)]
pub struct Registered<'a, T: Symmetric> {
    sh: &'a Shmem,
    buf: Vec<T>,
    addr: usize,
}

impl<'a, T: Symmetric> Registered<'a, T> {
    /// Elements in the buffer.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether the buffer has no element (never: a registration has at least one byte).
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The buffer, to read or to pass as the source of puts, once the gets in flight into it completed.
    pub fn as_slice(&self) -> Result<&[T]> {
        self.sh.complete_registered(self.addr, true)?;
        Ok(&self.buf)
    }

    /// The buffer, to change or to pass as the destination of gets, once every operation in flight from or into
    /// it completed.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.sh.complete_registered(self.addr, false)?;
        Ok(&mut self.buf)
    }

    /// Complete the operations in flight from or into the buffer, unregister it and hand it back.
    pub fn unregister(mut self) -> Result<Vec<T>> {
        let r = self.sh.unregister_at(self.addr, true);
        let buf = std::mem::take(&mut self.buf);
        self.addr = 0;
        r.map(|()| buf)
    }
}

impl<T: Symmetric> Drop for Registered<'_, T> {
    fn drop(&mut self) {
        if self.addr == 0 {
            return;
        }
        if let Err(e) = self.sh.unregister_at(self.addr, true) {
            tracing::error!("unregistering a registered buffer on drop failed: {e}");
        }
    }
}

impl Shmem {
    /// Register `buf` (this PE's host memory) as the source of non-blocking puts and, over the fabric, the
    /// destination of non-blocking gets, moved in place instead of copied ([`Registered`]). Errors: an empty
    /// buffer; a range that overlaps a registered one; a transport's registration failing.
    pub fn register<T: Symmetric>(&self, buf: Vec<T>) -> Result<Registered<'_, T>> {
        let bytes = std::mem::size_of_val(buf.as_slice());
        let addr = buf.as_ptr() as usize;
        if bytes == 0 {
            return Err(Error::invalid(
                "buf",
                format!("a buffer of {} elements (0 bytes)", buf.len()),
                "a registered buffer must have at least one byte",
            ));
        }
        self.register_at(addr, bytes, true)?;
        Ok(Registered {
            sh: self,
            buf,
            addr,
        })
    }

    /// Register the `len` bytes of this PE's host memory at `addr` (C's `xpushmemx_buffer_register`), as
    /// [`Shmem::register`] does a buffer it owns. Errors: a null `addr`, `len` 0 or wrapping the address space, a
    /// range that overlaps a registered one or the symmetric heap.
    ///
    /// # Safety
    /// `[addr, addr + len)` must stay valid (mapped, readable and writable) until [`Shmem::unregister_raw`], and
    /// must not change while a non-blocking put from it is in flight (until `quiet`, or the completion of the
    /// operation's handle), nor be accessed while a non-blocking get into it is.
    pub unsafe fn register_raw(&self, addr: *mut u8, len: usize) -> Result<()> {
        self.register_at(addr as usize, len, false)
    }

    /// Unregister the range registered at `addr` by [`Shmem::register_raw`], after completing the operations in
    /// flight from or into it. Errors: no range registered at `addr`, or one a [`Registered`] owns.
    pub fn unregister_raw(&self, addr: *mut u8) -> Result<()> {
        self.unregister_at(addr as usize, false)
    }

    /// Whether the `len` bytes at `addr` lie in one registered range.
    pub fn is_registered(&self, addr: *const u8, len: usize) -> bool {
        if self.registry.count.load(Ordering::Acquire) == 0 {
            return false;
        }
        let (a, end) = (addr as usize, (addr as usize).saturating_add(len));
        self.registry
            .lock()
            .iter()
            .any(|e| a >= e.addr && end <= e.addr + e.len)
    }

    /// The copies the transports made for this PE's transfers so far, and the transfers made in place (a test
    /// and tuning hook: a put from a registered buffer over the fabric is counted in place).
    pub fn copy_stats(&self) -> CopyStats {
        self.peers
            .transports()
            .fold(CopyStats::default(), |a, t| a + t.copy_stats())
    }

    fn register_at(&self, addr: usize, len: usize, owned: bool) -> Result<()> {
        if addr == 0 {
            return Err(Error::invalid(
                "addr",
                "NULL",
                "a registered range needs a valid address",
            ));
        }
        if len == 0 {
            return Err(Error::invalid(
                "len",
                0,
                format!("the range at {addr:#x} must have at least one byte"),
            ));
        }
        let end = addr.checked_add(len).ok_or_else(|| {
            Error::invalid(
                "len",
                len,
                format!("the range at {addr:#x} wraps the address space"),
            )
        })?;
        let heap = self.local_map();
        if heap.host_accessible() && !heap.base().is_null() {
            let (hb, he) = (heap.base() as usize, heap.base() as usize + heap.len());
            if addr < he && hb < end {
                return Err(Error::invalid(
                    "addr",
                    format!("{addr:#x}"),
                    format!(
                        "[{addr:#x}, {end:#x}) overlaps the symmetric heap [{hb:#x}, {he:#x}), which is registered \
                         already"
                    ),
                ));
            }
        }
        if self
            .peers
            .device
            .as_ref()
            .is_some_and(|rt| rt.is_device_memory(addr, len))
        {
            return Err(Error::invalid(
                "addr",
                format!("{addr:#x}"),
                format!(
                    "[{addr:#x}, {end:#x}) is Level Zero device memory, which cannot be registered yet (only host \
                     memory: over the fabric a device range needs FI_HMEM_ZE registration or staging through the \
                     copy engine; on this node the copy engine already reads a device source in place)"
                ),
            ));
        }
        let mut entries = self.registry.lock();
        if let Some(o) = entries
            .iter()
            .find(|e| addr < e.addr + e.len && e.addr < end)
        {
            return Err(Error::invalid(
                "addr",
                format!("{addr:#x}"),
                format!(
                    "[{addr:#x}, {end:#x}) overlaps the registered range [{:#x}, {:#x})",
                    o.addr,
                    o.addr + o.len
                ),
            ));
        }
        let handles = self.peers.register_local(addr, len)?;
        entries.push(Entry {
            addr,
            len,
            owned,
            handles,
            inflight: Vec::new(),
        });
        self.registry.count.store(entries.len(), Ordering::Release);
        Ok(())
    }

    fn unregister_at(&self, addr: usize, owned: bool) -> Result<()> {
        let e = {
            let mut entries = self.registry.lock();
            let Some(i) = entries.iter().position(|e| e.addr == addr) else {
                let known: Vec<String> = entries
                    .iter()
                    .map(|e| format!("[{:#x}, {:#x})", e.addr, e.addr + e.len))
                    .collect();
                return Err(Error::invalid(
                    "addr",
                    format!("{addr:#x}"),
                    format!(
                        "no registered range starts there (registered: {})",
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        }
                    ),
                ));
            };
            if entries[i].owned && !owned {
                return Err(Error::invalid(
                    "addr",
                    format!("{addr:#x}"),
                    "the range is a Registered buffer's: it is unregistered when that is dropped or unregistered",
                ));
            }
            let e = entries.swap_remove(i);
            self.registry.count.store(entries.len(), Ordering::Release);
            e
        };
        // Not registered any more (new transfers from the range copy); the ones in flight complete before the
        // transports drop their registrations.
        let r = self.complete_tickets(&e.inflight);
        self.peers.unregister_local(&e.handles);
        r
    }

    /// Complete the operations in flight from or into the range registered at `addr` (only the gets into it
    /// when `gets_only`).
    fn complete_registered(&self, addr: usize, gets_only: bool) -> Result<()> {
        let done: Vec<(usize, Ticket, bool)> = {
            let mut entries = self.registry.lock();
            let Some(e) = entries.iter_mut().find(|e| e.addr == addr) else {
                return Ok(());
            };
            let (take, keep) = e
                .inflight
                .drain(..)
                .partition(|&(_, _, get)| get || !gets_only);
            e.inflight = keep;
            take
        };
        self.complete_tickets(&done)
    }

    /// Complete `ops` (each on its PE's transport); the first error.
    fn complete_tickets(&self, ops: &[(usize, Ticket, bool)]) -> Result<()> {
        let mut first = Ok(());
        for &(pe, t, _) in ops {
            let r = self
                .transport_of(pe, "completing a registered buffer's operation")
                .and_then(|tr| tr.complete(t).map(|_| ()));
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    /// Run `post` with whether `[addr, addr + len)` lies in one registered range; when it does and `post` returns a
    /// ticket, record it as in flight on that range (a get when `get`). The registry stays locked meanwhile, so
    /// the range cannot be unregistered between the check and the record.
    pub(crate) fn with_registered(
        &self,
        addr: usize,
        len: usize,
        pe: usize,
        get: bool,
        post: impl FnOnce(bool) -> Result<Option<Ticket>>,
    ) -> Result<Option<Ticket>> {
        if len == 0 || self.registry.count.load(Ordering::Acquire) == 0 {
            return post(false);
        }
        let mut entries = self.registry.lock();
        let end = addr.saturating_add(len);
        let Some(e) = entries
            .iter_mut()
            .find(|e| addr >= e.addr && end <= e.addr + e.len)
        else {
            drop(entries);
            return post(false);
        };
        let t = post(true)?;
        if let Some(t) = t {
            // Drop what completed already, so the list stays as long as what is in flight.
            if let Some(tr) = self.peers.transport(pe) {
                let tr: &dyn Transport = tr;
                e.inflight
                    .retain(|&(p, t, _)| p != pe || !tr.is_complete(t));
            }
            e.inflight.push((pe, t, get));
        }
        Ok(t)
    }

    /// Start a put of `src` to byte `off` of `pe`'s heap: in place from a registered range, else as the window's
    /// `put_nbi` (copied where the transport must).
    pub(crate) fn put_nbi_bytes(
        &self,
        d: crate::types::Domain,
        off: usize,
        src: &[u8],
        pe: usize,
        call: &str,
    ) -> Result<Option<Ticket>> {
        let w = self.map_of(pe, call)?;
        self.with_registered(src.as_ptr() as usize, src.len(), pe, false, |reg| {
            if reg {
                w.put_nbi_registered_in(d, off, src)
            } else {
                w.put_nbi_in(d, off, src)
            }
        })
    }

    /// Start a get from byte `off` of `pe`'s heap into `dst`: in place into a registered range (the ticket then
    /// returns no bytes), else as the window's `get_nbi`. Whether it went in place.
    pub(crate) fn get_nbi_bytes(
        &self,
        d: crate::types::Domain,
        off: usize,
        dst: &mut [u8],
        pe: usize,
        call: &str,
    ) -> Result<(Option<Ticket>, bool)> {
        let w = self.map_of(pe, call)?;
        let mut in_place = false;
        let (addr, len) = (dst.as_mut_ptr() as usize, dst.len());
        let t = self.with_registered(addr, len, pe, true, |reg| {
            in_place = reg;
            if reg {
                w.get_nbi_registered_in(d, off, dst)
            } else {
                w.get_nbi_in(d, off, dst)
            }
        })?;
        Ok((t, in_place))
    }
}
