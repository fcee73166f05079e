//! Device heaps ([`DeviceWindow`]): this PE's own and its node peers', each a range of device address space
//! reserved once (`zeVirtualMemReserve`) for the most the heap may grow to, into which physical memory is mapped in
//! chunks as the heap grows (`zePhysicalMemCreate`, `zeVirtualMemMap`), so that the heap stays contiguous at one
//! base however often it grows, and kernels keep addressing a PE's heap as its base plus an offset.
//!
//! Layout of every reserve (the same on every PE, the device's page size `zeVirtualMemQueryPageSize` apart):
//! `[0, len)` the heap, mapped in chunks up to `len` rounded up to a page; with a team space,
//! `[team_off, team_off + max)` the team-scoped allocations (`team_off`: the heap's most rounded up to a page, then
//! to a power of two), mapped one chunk per allocation ([`DeviceWindow::map_team`]); `[tail_off, tail_off + tail)`
//! the device library's scratch tail (`abi::ScratchLayout`), mapped at set-up, where `tail_off` is the end of the
//! team space (else of the heap's most) rounded up to a page: the tail never moves when the heap grows.
//!
//! Sharing: this PE's physical memory is created exportable (`ze_external_memory_export_desc_t`, dma-buf) and
//! exported per chunk as a file descriptor (`zeMemGetAllocProperties` on an address it is mapped at, with
//! `ze_external_memory_export_fd_t`); a peer imports each chunk (`zePhysicalMemCreate` with
//! `ze_external_memory_import_fd_t`) and maps it at the same offset of its own reserve for that peer.

use super::{check, context, ZeRuntime};
use crate::error::{check_access, Error, Result};
use crate::sys::memfd::HostMem;
use crate::types::AmoOp;
use level_zero_sys as ze;
use rustix::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The handle types device heap chunks are shared as.
const SHARE_AS: ze::ze_external_memory_type_flags_t = ze::ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF;

impl ZeRuntime {
    /// The device's page size for virtual memory of `size` bytes (`zeVirtualMemQueryPageSize`): what reserves,
    /// chunks and their offsets are multiples of.
    pub fn vm_page_size(&self, size: usize) -> Result<usize> {
        let mut page = 0usize;
        // SAFETY: live context and device; page is a valid out-pointer.
        check("zeVirtualMemQueryPageSize", unsafe {
            (self.api.zeVirtualMemQueryPageSize)(self.context, self.device, size.max(1), &mut page)
        })?;
        if !page.is_power_of_two() {
            return Err(Error::Device(format!(
                "zeVirtualMemQueryPageSize reported {page}, not a power of two"
            )));
        }
        Ok(page)
    }

    /// Reserve device address space for a heap that may grow to `max` bytes, with `tail` bytes of scratch after
    /// the reserve (`tail_off`: `max` rounded up to a page), and map its first `first` bytes and its tail: this
    /// PE's own heap, whose chunks are created exportable. The window covers the first `first` bytes; the tail is
    /// reached only through [`DeviceWindow::zero_tail`], [`DeviceWindow::write_tail`] and by kernels.
    /// With `team`, a team space of `max` bytes lies between the heap's reserve and the tail
    /// ([`DeviceWindow::team_offset`]).
    pub fn reserve_heap(
        self: &Arc<Self>,
        first: usize,
        max: usize,
        tail: usize,
        team: bool,
    ) -> Result<DeviceWindow> {
        let w = self.reserve(max.max(first), tail, true, team)?;
        if tail > 0 {
            w.map_chunk(w.tail_off, w.round(tail)?, None)?;
        }
        w.grow_to(first, None).map_err(|e| {
            context(
                e,
                format_args!("a {first}-byte symmetric heap; lower XPUSHMEM_SYMMETRIC_SIZE?"),
            )
        })?;
        Ok(self.register(w))
    }

    /// Reserve device address space for a node peer's heap that may grow to `max` bytes with a `tail`-byte
    /// scratch tail: nothing is mapped yet ([`DeviceWindow::map_tail`], [`DeviceWindow::grow_to`] with the peer's
    /// chunks), with a team space as [`ZeRuntime::reserve_heap`]'s when `team`.
    pub fn reserve_peer_heap(
        self: &Arc<Self>,
        max: usize,
        tail: usize,
        team: bool,
    ) -> Result<DeviceWindow> {
        let w = self.reserve(max, tail, false, team)?;
        Ok(self.register(w))
    }

    fn reserve(
        self: &Arc<Self>,
        max: usize,
        tail: usize,
        own: bool,
        team: bool,
    ) -> Result<DeviceWindow> {
        let page = self.vm_page_size(max)?;
        let up = |v: usize| {
            v.checked_next_multiple_of(page)
                .ok_or_else(|| Error::invalid("heap size", v, "too large"))
        };
        let heap_end = up(max)?;
        let team_off = if team {
            heap_end
                .checked_next_power_of_two()
                .ok_or_else(|| Error::invalid("heap size", max, "too large for a team space"))?
        } else {
            0
        };
        let tail_off = if team {
            up(team_off
                .checked_add(max)
                .ok_or_else(|| Error::invalid("heap size", max, "too large for a team space"))?)?
        } else {
            heap_end
        };
        let span = tail_off
            .checked_add(up(tail)?)
            .ok_or_else(|| Error::invalid("heap size", max, "too large"))?;
        let mut p: *mut c_void = std::ptr::null_mut();
        // The start is only a hint (the driver picks another address where it is taken); it must not be null,
        // which the loader's validation layer refuses (`nullptr == pStart`), so the hint is the first page.
        let hint = page as *const c_void;
        // SAFETY: live context; the hint is never dereferenced; p is a valid out-pointer.
        check("zeVirtualMemReserve", unsafe {
            (self.api.zeVirtualMemReserve)(self.context, hint, span.max(page), &mut p)
        })
        .map_err(|e| {
            context(
                e,
                format_args!("{span} bytes of device address space for a heap of up to {max} bytes; set XPUSHMEM_SYMMETRIC_MAX lower"),
            )
        })?;
        Ok(DeviceWindow {
            rt: self.clone(),
            base: p.cast(),
            len: AtomicUsize::new(0),
            tail: if own { tail } else { 0 },
            tail_off,
            heap_end,
            team_off,
            span: span.max(page),
            page,
            own,
            chunks: Mutex::new(Vec::new()),
        })
    }
}

/// A device heap: this PE's own (with the device library's scratch tail) or a node peer's, each a reserve of device
/// address space into which its chunks are mapped (see the module docs). Every access goes through its bounded
/// methods; the transport layer (`transport/ze.rs`) makes it a `Window`.
#[derive(Debug)]
pub struct DeviceWindow {
    pub(crate) rt: Arc<ZeRuntime>,
    pub(crate) base: *mut u8,
    /// Bytes of the heap mapped and reachable (grows, never shrinks).
    len: AtomicUsize,
    /// Bytes of our own scratch tail at `tail_off` (0 for a peer's heap, whose tail only kernels reach).
    pub(crate) tail: usize,
    /// Where the scratch tail starts: the end of the team space (else the most the heap may grow to), rounded up
    /// to a page.
    pub(crate) tail_off: usize,
    /// The end of the heap's reserve: the most it may grow to, rounded up to a page.
    heap_end: usize,
    /// Where the team space starts (0: none).
    team_off: usize,
    /// Bytes reserved.
    span: usize,
    /// The device's page size for this reserve.
    page: usize,
    /// This PE's own heap (its chunks are created exportable), not a peer's.
    own: bool,
    /// The physical memory mapped, with its offset and length.
    chunks: Mutex<Vec<(ze::ze_physical_mem_handle_t, usize, usize)>>,
}

// SAFETY: the window is an address range plus a reference to a thread-safe runtime; all device work goes through
// the runtime's locked command lists, and its own mutable state is an atomic and a mutex.
unsafe impl Send for DeviceWindow {}
// SAFETY: as above.
unsafe impl Sync for DeviceWindow {}

/// A live device heap allocation of a runtime (its [`DeviceWindow`]): what raw copies between allocations and
/// writes into the heap's tail are checked against.
#[derive(Debug, Clone, Copy)]
pub(super) struct Alloc {
    base: usize,
    len: usize,
    tail_off: usize,
    tail: usize,
}

impl ZeRuntime {
    /// Record a new window's allocation (removed when the window drops, its length updated as it grows).
    fn register(&self, w: DeviceWindow) -> DeviceWindow {
        self.allocs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Alloc {
                base: w.base as usize,
                len: w.len(),
                tail_off: w.tail_off,
                tail: w.tail,
            });
        w
    }

    /// Write `src` at byte `off` of the tail of this runtime's own heap allocation (the device library's scratch:
    /// team table, barrier counters); an error when no such allocation is live or the range leaves its tail.
    pub(crate) fn write_heap_tail(&self, off: usize, src: &[u8]) -> Result<()> {
        let allocs = self.allocs.lock().unwrap_or_else(|p| p.into_inner());
        let a = allocs.iter().find(|a| a.tail > 0).ok_or_else(|| {
            Error::State("no device heap with a scratch tail is allocated".into())
        })?;
        check_access("ze", "heap tail", off, src.len(), 1, a.tail)?;
        // SAFETY: [base + tail_off + off, + src.len()) lies in the live allocation's tail (checked; the allocation
        // cannot be freed while `allocs` is locked); src is a live host slice.
        unsafe { self.write_raw((a.base + a.tail_off + off) as *mut u8, src) }
    }
}

impl DeviceWindow {
    /// Length in bytes (what is mapped of the heap; it grows).
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Whether the window is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The address of byte 0 in this process's device context.
    pub(crate) fn base(&self) -> *mut u8 {
        self.base
    }

    /// Where the scratch tail starts, in bytes from the base: the same for every PE's heap (the reserve's size).
    pub fn tail_offset(&self) -> usize {
        self.tail_off
    }

    /// The device page size the reserve is mapped in.
    pub fn page_size(&self) -> usize {
        self.page
    }

    /// `v` rounded up to a page.
    fn round(&self, v: usize) -> Result<usize> {
        v.checked_next_multiple_of(self.page)
            .ok_or_else(|| Error::invalid("heap size", v, "too large"))
    }

    /// Where the chunk that makes a heap of `len` bytes reachable starts (`len` rounded up to a page): the offset
    /// the next chunk is mapped at.
    pub fn mapped_end(&self) -> Result<usize> {
        self.round(self.len())
    }

    /// Create physical memory of `len` bytes (fresh and exportable for our own heap, else imported from `fd`, a
    /// peer's chunk) and map it at byte `off` of the reserve, readable and writable.
    fn map_chunk(&self, off: usize, len: usize, fd: Option<BorrowedFd<'_>>) -> Result<()> {
        if off.checked_add(len).is_none_or(|e| e > self.span) {
            return Err(Error::invalid(
                "heap size",
                off.saturating_add(len),
                format!("beyond the {}-byte device reserve", self.span),
            ));
        }
        let export = ze::ze_external_memory_export_desc_t {
            flags: SHARE_AS,
            ..Default::default()
        };
        let import = ze::ze_external_memory_import_fd_t {
            flags: SHARE_AS,
            fd: fd.map_or(-1, |f| f.as_raw_fd()),
            ..Default::default()
        };
        let next: *const c_void = match (fd, self.own) {
            (Some(_), _) => (&import as *const ze::ze_external_memory_import_fd_t).cast(),
            (None, true) => (&export as *const ze::ze_external_memory_export_desc_t).cast(),
            (None, false) => std::ptr::null(),
        };
        let mut desc = ze::ze_physical_mem_desc_t {
            pNext: next,
            size: len,
            ..Default::default()
        };
        let mut h = ze::ze_physical_mem_handle_t::null();
        // SAFETY: live context and device; desc and its one-element chain live through the call; h is a valid
        // out-pointer.
        check("zePhysicalMemCreate", unsafe {
            (self.rt.api.zePhysicalMemCreate)(self.rt.context, self.rt.device, &mut desc, &mut h)
        })
        .map_err(|e| context(e, format_args!("{len} bytes of device memory")))?;
        // SAFETY: [base + off, + len) lies in our reserve (checked above) and is not mapped (chunks are mapped
        // once, at increasing offsets, and the tail past the heap's reserve); h is the physical memory just made.
        let mapped = check("zeVirtualMemMap", unsafe {
            (self.rt.api.zeVirtualMemMap)(
                self.rt.context,
                self.base.wrapping_add(off).cast(),
                len,
                h,
                0,
                ze::ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE,
            )
        });
        if let Err(e) = mapped {
            // SAFETY: h was created above and is mapped nowhere.
            let _ = unsafe { (self.rt.api.zePhysicalMemDestroy)(self.rt.context, h) };
            return Err(e);
        }
        self.chunks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((h, off, len));
        Ok(())
    }

    /// Make the heap's first `new` bytes reachable: map one chunk covering `[mapped_end, new rounded up to a
    /// page)` (fresh memory on our own heap; on a peer's, the peer's chunk for that range, imported from `fd`).
    /// Nothing to map when `new` is within the pages mapped already. Whether a chunk was mapped.
    pub fn grow_to(&self, new: usize, fd: Option<BorrowedFd<'_>>) -> Result<bool> {
        let len = self.len();
        if new <= len {
            return Ok(false);
        }
        if new > self.heap_end {
            return Err(Error::invalid(
                "heap size",
                new,
                format!("beyond the device reserve of {} bytes", self.heap_end),
            ));
        }
        let (from, to) = (self.round(len)?, self.round(new)?);
        let mapped = to > from;
        if mapped {
            if !self.own && fd.is_none() {
                return Err(Error::State(format!(
                    "a peer's heap grows to {new} bytes with no descriptor for its chunk at {from}"
                )));
            }
            self.map_chunk(from, to - from, fd)?;
        }
        self.len.store(new, Ordering::Release);
        let base = self.base as usize;
        if let Some(a) = self
            .rt
            .allocs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter_mut()
            .find(|a| a.base == base)
        {
            a.len = new;
        }
        Ok(mapped)
    }

    /// Undo growth of our own heap back to `len` bytes: unmap and release the chunks mapped past it (no peer has
    /// imported them: see `transport::ze::Growth::abort`).
    pub fn shrink_to(&self, len: usize) {
        let Ok(keep) = self.round(len) else {
            return;
        };
        if len >= self.len() {
            return;
        }
        self.len.store(len, Ordering::Release);
        let base = self.base as usize;
        let mut allocs = self.rt.allocs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(a) = allocs.iter_mut().find(|a| a.base == base) {
            a.len = len;
        }
        let mut chunks = self.chunks.lock().unwrap_or_else(|p| p.into_inner());
        let (gone, kept): (Vec<_>, Vec<_>) = chunks
            .drain(..)
            .partition(|&(_, off, _)| off >= keep && off < self.heap_end);
        *chunks = kept;
        // SAFETY: each chunk lies past the heap's new length (nothing reaches it: the length was lowered first,
        // and copies check against `allocs`, whose lock is held), and it left the list above.
        unsafe { self.release(gone) };
    }

    /// Unmap each chunk (`(physical memory, offset, bytes)`) from the reserve and destroy its physical memory.
    ///
    /// # Safety
    /// The chunks are ours, out of `chunks` (each is released once), and nothing reaches them any more.
    unsafe fn release(&self, gone: Vec<(ze::ze_physical_mem_handle_t, usize, usize)>) {
        for (h, off, len) in gone {
            // SAFETY: the caller's contract: our mapping of our physical memory, released once, unused.
            unsafe {
                let _ = (self.rt.api.zeVirtualMemUnmap)(
                    self.rt.context,
                    self.base.wrapping_add(off).cast(),
                    len,
                );
                let _ = (self.rt.api.zePhysicalMemDestroy)(self.rt.context, h);
            }
        }
    }

    /// Where the team space starts, in bytes from the base (`None`: this reserve has none).
    pub fn team_offset(&self) -> Option<usize> {
        (self.team_off > 0).then_some(self.team_off)
    }

    /// Map one team-scoped allocation's chunk of `len` bytes at byte `off` of the team space: fresh memory on our
    /// own heap, the owner's chunk imported from `fd` on a peer's. `off` and `len` are whole pages inside the team
    /// space, where nothing is mapped yet (each allocation has its own pages).
    pub fn map_team(&self, off: usize, len: usize, fd: Option<BorrowedFd<'_>>) -> Result<()> {
        let whole = |v: usize| v % self.page == 0;
        let inside = self.team_off > 0
            && off >= self.team_off
            && len > 0
            && whole(off)
            && whole(len)
            && off.checked_add(len).is_some_and(|e| e <= self.tail_off);
        if !inside {
            return Err(Error::invalid(
                "team allocation",
                format!("{len} bytes at offset {off}"),
                format!(
                    "not whole {}-byte pages inside the team space [{}, {})",
                    self.page, self.team_off, self.tail_off
                ),
            ));
        }
        if !self.own && fd.is_none() {
            return Err(Error::State(format!(
                "a peer's team allocation at {off} is mapped with no descriptor for its chunk"
            )));
        }
        let taken = self
            .chunks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|&(_, o, l)| off < o + l && o < off + len);
        if taken {
            return Err(Error::State(format!(
                "the team space's pages at {off} (+{len} bytes) are mapped already"
            )));
        }
        self.map_chunk(off, len, fd)?;
        // A live allocation of the runtime of its own, so that copies between team allocations go direct.
        self.rt
            .allocs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Alloc {
                base: self.base as usize + off,
                len,
                tail_off: 0,
                tail: 0,
            });
        Ok(())
    }

    /// Unmap the team chunk that starts at byte `off` (its allocation was freed, or its agreement failed) and
    /// release its memory; whether one started there.
    pub fn unmap_team(&self, off: usize) -> bool {
        if self.team_off == 0 || off < self.team_off || off >= self.tail_off {
            return false;
        }
        // Copies check their source against `allocs` and copy under its lock: the chunk leaves it first.
        let mut allocs = self.rt.allocs.lock().unwrap_or_else(|p| p.into_inner());
        let at = self.base as usize + off;
        allocs.retain(|a| a.base != at);
        let gone: Vec<_> = {
            let mut chunks = self.chunks.lock().unwrap_or_else(|p| p.into_inner());
            match chunks.iter().position(|&(_, o, _)| o == off) {
                Some(i) => vec![chunks.swap_remove(i)],
                None => Vec::new(),
            }
        };
        let found = !gone.is_empty();
        // SAFETY: the chunk is ours (mapped by `map_team`), out of the list and out of `allocs` (whose lock is held,
        // so no copy reads it), so accesses checked after this find it gone; its allocation's team agreed to free
        // it (or never published it), so nothing reaches it.
        unsafe { self.release(gone) };
        drop(allocs);
        found
    }

    /// The end of the team space's mapped chunks, in bytes from the base: the team space's start when none is
    /// mapped, 0 without a team space.
    pub fn team_end(&self) -> usize {
        if self.team_off == 0 {
            return 0;
        }
        self.chunks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|&&(_, o, _)| o >= self.team_off && o < self.tail_off)
            .map(|&(_, o, l)| o + l)
            .fold(self.team_off, usize::max)
    }

    /// Check that `[off, off + len)`, aligned to `align`, lies in the heap's mapped part or inside one mapped
    /// chunk of the team space.
    pub(crate) fn check(&self, off: usize, len: usize, align: usize) -> Result<()> {
        let heap = check_access("ze", "access", off, len, align, self.len());
        if heap.is_ok() || self.team_off == 0 || off < self.team_off {
            return heap;
        }
        let chunks = self.chunks.lock().unwrap_or_else(|p| p.into_inner());
        let team = |&&(_, o, l): &&(ze::ze_physical_mem_handle_t, usize, usize)| {
            o >= self.team_off && o < self.tail_off && off >= o && off - o < l
        };
        match chunks.iter().find(team) {
            Some(&(_, o, l)) => check_access("ze", "team allocation", off - o, len, align, l),
            None => check_access(
                "ze",
                "team space (no allocation mapped there)",
                off,
                len,
                align,
                0,
            ),
        }
    }

    /// Map a peer's scratch tail of `len` bytes (a page multiple), imported from `fd`, at [`Self::tail_offset`].
    pub fn map_tail(&self, len: usize, fd: BorrowedFd<'_>) -> Result<()> {
        self.map_chunk(self.tail_off, self.round(len)?, Some(fd))
    }

    /// A descriptor of the physical memory mapped at byte `off` of our own heap's reserve (a chunk, or the tail
    /// at [`Self::tail_offset`]), for node peers to import: `zeMemGetAllocProperties` with
    /// `ze_external_memory_export_fd_t`. The caller owns it.
    pub fn export_fd(&self, off: usize) -> Result<OwnedFd> {
        let covered = self
            .chunks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|&(_, o, l)| off >= o && off < o + l);
        if !self.own || !covered {
            return Err(Error::State(format!(
                "no chunk of this PE's own device heap is mapped at offset {off}"
            )));
        }
        let mut fd = ze::ze_external_memory_export_fd_t {
            flags: SHARE_AS,
            fd: -1,
            ..Default::default()
        };
        let mut props = ze::ze_memory_allocation_properties_t {
            pNext: (&mut fd as *mut ze::ze_external_memory_export_fd_t).cast(),
            ..Default::default()
        };
        // SAFETY: base + off is mapped memory of our context (checked against the chunks); props and its
        // one-element chain live through the call; a null device out-pointer is allowed.
        check("zeMemGetAllocProperties", unsafe {
            (self.rt.api.zeMemGetAllocProperties)(
                self.rt.context,
                self.base.wrapping_add(off).cast(),
                &mut props,
                std::ptr::null_mut(),
            )
        })
        .map_err(|e| context(e, format_args!("exporting the heap chunk at offset {off}")))?;
        if fd.fd < 0 {
            return Err(Error::Device(format!(
                "zeMemGetAllocProperties exported no descriptor for the heap chunk at offset {off}"
            )));
        }
        // SAFETY: the driver returned a new descriptor that the caller of an export owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd.fd) })
    }

    /// Zero the tail of our own heap.
    pub fn zero_tail(&self) -> Result<()> {
        // SAFETY: [tail_off, tail_off + tail) is the mapped tail of this live reserve (tail is 0 for a peer's).
        unsafe {
            self.rt
                .zero_raw(self.base.wrapping_add(self.tail_off), self.tail)
        }
    }

    /// Write `src` at byte `off` of the tail of our own heap; the range is checked against the tail.
    pub fn write_tail(&self, off: usize, src: &[u8]) -> Result<()> {
        check_access("ze", "heap tail", off, src.len(), 1, self.tail)?;
        // SAFETY: [tail_off + off, + src.len()) lies in the mapped tail (checked); src is a live slice.
        unsafe {
            self.rt
                .write_raw(self.base.wrapping_add(self.tail_off + off), src)
        }
    }

    /// Copy `src` to byte `off`.
    pub(crate) fn write_at(&self, off: usize, src: &[u8]) -> Result<()> {
        self.check(off, src.len(), 1)?;
        // SAFETY: [off, off+len) lies in the device allocation (checked); src is a live host slice.
        unsafe { self.rt.copy(self.base.add(off), src.as_ptr(), src.len()) }
    }

    /// Copy from byte `off` into `dst`.
    pub(crate) fn read_at(&self, off: usize, dst: &mut [u8]) -> Result<()> {
        self.check(off, dst.len(), 1)?;
        // SAFETY: [off, off+len) lies in the device allocation (checked); dst is a live, exclusive host slice.
        unsafe {
            self.rt
                .copy(dst.as_mut_ptr(), self.base.add(off), dst.len())
        }
    }

    /// Set `len` bytes at `off` to `byte`.
    pub(crate) fn fill_at(&self, off: usize, len: usize, byte: u8) -> Result<()> {
        self.check(off, len, 1)?;
        if len == 0 {
            return Ok(());
        }
        let lists = self.rt.lists.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: [off, off+len) lies in the allocation (checked); the pattern is one live byte; synchronous list.
        check("zeCommandListAppendMemoryFill", unsafe {
            (self.rt.api.zeCommandListAppendMemoryFill)(
                lists.copy,
                self.base.add(off).cast(),
                (&byte as *const u8).cast(),
                1,
                len,
                ze::ze_event_handle_t::null(),
                0,
                std::ptr::null_mut(),
            )
        })
    }

    /// Copy `len` bytes at address `src` into byte `off`, when `[src, src + len)` lies inside a live device heap
    /// allocation of this window's runtime (ours, or a peer's opened through IPC in our context): `Ok(false)`,
    /// copying nothing, when it does not (the caller stages through host memory instead). `src` is only compared
    /// with the runtime's allocations, never followed otherwise.
    pub(crate) fn copy_in(&self, off: usize, src: *const u8, len: usize) -> Result<bool> {
        self.check(off, len, 1)?;
        let allocs = self.rt.allocs.lock().unwrap_or_else(|p| p.into_inner());
        let s = src as usize;
        let inside = allocs
            .iter()
            .any(|a| s >= a.base && len <= a.len && s - a.base <= a.len - len);
        if !inside {
            return Ok(false);
        }
        // SAFETY: the destination range lies in this allocation (checked); the source range lies inside a live
        // allocation of this runtime's context (checked against `allocs`, which keeps it from being freed until
        // the synchronous copy has returned).
        unsafe { self.rt.copy(self.base.add(off), src, len)? };
        Ok(true)
    }

    /// Copy `len` bytes at byte `src_off` of a host mapping of this process into byte `off`.
    pub(crate) fn copy_in_host(
        &self,
        off: usize,
        src: &HostMem,
        src_off: usize,
        len: usize,
    ) -> Result<()> {
        self.check(off, len, 1)?;
        check_access("ze", "source range", src_off, len, 1, src.len())?;
        // SAFETY: the destination range lies in this allocation, the source range in the live host mapping `src`
        // (both checked); a copy list reads host memory of this process.
        unsafe {
            self.rt
                .copy(self.base.add(off), src.as_ptr().add(src_off), len)
        }
    }

    /// An atomic on the `width`-byte (4 or 8) word at `off` (in bounds and aligned: checked); the previous value.
    pub(crate) fn amo_at(&self, off: usize, width: usize, op: AmoOp, operand: u64) -> Result<u64> {
        if width != 4 && width != 8 {
            return Err(Error::Transport {
                transport: "ze",
                message: format!("atomic width {width} (must be 4 or 8)"),
            });
        }
        self.check(off, width, width)?;
        self.rt.amo(self.base.wrapping_add(off), width, op, operand)
    }
}

impl Drop for DeviceWindow {
    fn drop(&mut self) {
        let mut allocs = self.rt.allocs.lock().unwrap_or_else(|p| p.into_inner());
        // The heap's record and its team allocations' (inside the reserve).
        let (start, end) = (self.base as usize, self.base as usize + self.span);
        allocs.retain(|a| a.base < start || a.base >= end);
        let chunks = std::mem::take(self.chunks.get_mut().unwrap_or_else(|p| p.into_inner()));
        // SAFETY: every chunk is our mapping of physical memory we created, taken out of the list, released here
        // under `allocs`' lock after the record is removed (nothing copies from or into it after that); then the
        // reserve itself is freed.
        unsafe {
            self.release(chunks);
            let _ = (self.rt.api.zeVirtualMemFree)(self.rt.context, self.base.cast(), self.span);
        }
    }
}
