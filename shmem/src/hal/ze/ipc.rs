//! Device heap allocations ([`DeviceWindow`]): our own heap (with the device library's scratch tail) and peers'
//! heaps opened through Level Zero IPC.

use super::{check, context, ZeRuntime};
use crate::error::{check_access, Error, Result};
use crate::sys::memfd::HostMem;
use crate::types::AmoOp;
use level_zero_sys as ze;
use std::ffi::c_void;
use std::sync::Arc;

impl ZeRuntime {
    /// Allocate `size` bytes of device memory as a window of this process.
    pub fn alloc_heap(self: &Arc<Self>, size: usize) -> Result<DeviceWindow> {
        self.alloc_heap_with_tail(size, 0)
    }

    /// Allocate `size + tail` bytes of device memory; the window covers the first `size` bytes, and the `tail`
    /// bytes after them (the device library's scratch) are reached only through [`DeviceWindow::zero_tail`],
    /// [`DeviceWindow::write_tail`] and by kernels. The tail travels with the allocation's IPC handle.
    pub fn alloc_heap_with_tail(
        self: &Arc<Self>,
        size: usize,
        tail: usize,
    ) -> Result<DeviceWindow> {
        let desc = ze::ze_device_mem_alloc_desc_t::default();
        let mut p: *mut c_void = std::ptr::null_mut();
        let total = size
            .checked_add(tail)
            .ok_or_else(|| Error::invalid("heap size", size, "too large"))?;
        // SAFETY: valid handles, descriptor and out-pointer.
        check("zeMemAllocDevice", unsafe {
            (self.api.zeMemAllocDevice)(self.context, &desc, total, 64, self.device, &mut p)
        })
        .map_err(|e| {
            context(
                e,
                format_args!("a {size}-byte symmetric heap; lower XPUSHMEM_SYMMETRIC_SIZE?"),
            )
        })?;
        Ok(self.register(DeviceWindow {
            rt: self.clone(),
            base: p.cast(),
            len: size,
            tail,
            imported: false,
        }))
    }

    /// The IPC handle of a window we allocated, and the fd it carries (Intel's drivers put a dma-buf fd in the
    /// first bytes).
    pub fn ipc_handle(&self, w: &DeviceWindow) -> Result<([u8; ze::ZE_MAX_IPC_HANDLE_SIZE], i32)> {
        let mut h = ze::ze_ipc_mem_handle_t::default();
        // SAFETY: w.base is a live device allocation of this context; h is a valid out-pointer.
        check("zeMemGetIpcHandle", unsafe {
            (self.api.zeMemGetIpcHandle)(self.context, w.base.cast(), &mut h)
        })?;
        let bytes = h.data.map(|c| c as u8);
        let fd = i32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        Ok((bytes, fd))
    }

    /// Open a peer's heap from its IPC handle bytes, with `fd` (a descriptor valid in this process) patched in.
    pub fn open_ipc(
        self: &Arc<Self>,
        handle: &[u8; ze::ZE_MAX_IPC_HANDLE_SIZE],
        fd: i32,
        len: usize,
    ) -> Result<DeviceWindow> {
        let mut h = ze::ze_ipc_mem_handle_t::default();
        for (d, s) in h.data.iter_mut().zip(handle) {
            *d = *s as _;
        }
        for (d, s) in h.data.iter_mut().zip(fd.to_ne_bytes()) {
            *d = s as _;
        }
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid context/device; h is passed by value; p is a valid out-pointer.
        check("zeMemOpenIpcHandle", unsafe {
            (self.api.zeMemOpenIpcHandle)(self.context, self.device, h, 0, &mut p)
        })?;
        Ok(self.register(DeviceWindow {
            rt: self.clone(),
            base: p.cast(),
            len,
            tail: 0,
            imported: true,
        }))
    }
}

/// A device heap allocation: our own (with the device library's scratch tail past `len`) or a peer's, opened
/// through IPC. Every access goes through its bounded methods; the transport layer (`transport/ze.rs`) makes it a
/// `Window`.
#[derive(Debug)]
pub struct DeviceWindow {
    pub(crate) rt: Arc<ZeRuntime>,
    pub(crate) base: *mut u8,
    pub(crate) len: usize,
    /// Bytes of our own allocation past `len` (0 for a peer's heap opened through IPC).
    pub(crate) tail: usize,
    pub(crate) imported: bool,
}

// SAFETY: the window is an address range plus a reference to a thread-safe runtime; all device work goes through
// the runtime's locked command lists.
unsafe impl Send for DeviceWindow {}
// SAFETY: as above.
unsafe impl Sync for DeviceWindow {}

/// A live device heap allocation of a runtime (its [`DeviceWindow`]): what raw copies between allocations and
/// writes into the heap's tail are checked against.
#[derive(Debug, Clone, Copy)]
pub(super) struct Alloc {
    base: usize,
    len: usize,
    tail: usize,
}

impl ZeRuntime {
    /// Record a new window's allocation (removed when the window drops).
    fn register(&self, w: DeviceWindow) -> DeviceWindow {
        self.allocs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Alloc {
                base: w.base as usize,
                len: w.len,
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
        // SAFETY: [base + len + off, + src.len()) lies in the live allocation's tail (checked; the allocation
        // cannot be freed while `allocs` is locked); src is a live host slice.
        unsafe { self.write_raw((a.base + a.len + off) as *mut u8, src) }
    }
}

impl DeviceWindow {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the window is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address of byte 0 in this process's device context.
    pub(crate) fn base(&self) -> *mut u8 {
        self.base
    }

    /// Zero the tail of our own allocation (see [`ZeRuntime::alloc_heap_with_tail`]).
    pub fn zero_tail(&self) -> Result<()> {
        // SAFETY: [len, len + tail) is the tail of this live allocation (tail is 0 for an imported window).
        unsafe {
            self.rt
                .zero_raw(self.base.wrapping_add(self.len), self.tail)
        }
    }

    /// Write `src` at byte `off` of the tail of our own allocation; the range is checked against the tail.
    pub fn write_tail(&self, off: usize, src: &[u8]) -> Result<()> {
        check_access("ze", "heap tail", off, src.len(), 1, self.tail)?;
        // SAFETY: [len + off, len + off + src.len()) lies in the allocation's tail (checked); src is a live slice.
        unsafe {
            self.rt
                .write_raw(self.base.wrapping_add(self.len + off), src)
        }
    }

    /// Copy `src` to byte `off`.
    pub(crate) fn write_at(&self, off: usize, src: &[u8]) -> Result<()> {
        check_access("ze", "access", off, src.len(), 1, self.len)?;
        // SAFETY: [off, off+len) lies in the device allocation (checked); src is a live host slice.
        unsafe { self.rt.copy(self.base.add(off), src.as_ptr(), src.len()) }
    }

    /// Copy from byte `off` into `dst`.
    pub(crate) fn read_at(&self, off: usize, dst: &mut [u8]) -> Result<()> {
        check_access("ze", "access", off, dst.len(), 1, self.len)?;
        // SAFETY: [off, off+len) lies in the device allocation (checked); dst is a live, exclusive host slice.
        unsafe {
            self.rt
                .copy(dst.as_mut_ptr(), self.base.add(off), dst.len())
        }
    }

    /// Set `len` bytes at `off` to `byte`.
    pub(crate) fn fill_at(&self, off: usize, len: usize, byte: u8) -> Result<()> {
        check_access("ze", "access", off, len, 1, self.len)?;
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
        check_access("ze", "access", off, len, 1, self.len)?;
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
        check_access("ze", "access", off, len, 1, self.len)?;
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
        check_access("ze", "access", off, width, width, self.len)?;
        self.rt.amo(self.base.wrapping_add(off), width, op, operand)
    }
}

impl Drop for DeviceWindow {
    fn drop(&mut self) {
        let mut allocs = self.rt.allocs.lock().unwrap_or_else(|p| p.into_inner());
        allocs.retain(|a| a.base != self.base as usize);
        // SAFETY: base is our allocation (or our opening of a peer's) and is released once, here, under `allocs`'
        // lock, after its record is removed (nothing copies from or into it after that).
        unsafe {
            if self.imported {
                let _ = (self.rt.api.zeMemCloseIpcHandle)(self.rt.context, self.base.cast());
            } else {
                let _ = (self.rt.api.zeMemFree)(self.rt.context, self.base.cast());
            }
        }
    }
}
