//! Host memory of the runtime's context that kernels can read and write (`zeMemAllocHost`).

use super::{check, ZeRuntime};
use crate::error::{Error, Result};
use level_zero_sys as ze;
use std::ffi::c_void;
use std::sync::Arc;

impl ZeRuntime {
    /// Allocate `len` bytes of host memory that kernels of this context can read and write (`zeMemAllocHost`).
    #[cfg_attr(not(xpushmem_fabric), allow(dead_code))] // used by the fabric transport
    pub(crate) fn alloc_host(self: &Arc<Self>, len: usize) -> Result<HostAlloc> {
        let desc = ze::ze_host_mem_alloc_desc_t::default();
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid context, descriptor and out-pointer.
        check("zeMemAllocHost", unsafe {
            (self.api.zeMemAllocHost)(self.context, &desc, len, 4096, &mut p)
        })?;
        // SAFETY: a fresh allocation of `len` bytes; zeroed before anyone else sees it.
        unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0, len) };
        Ok(HostAlloc {
            rt: self.clone(),
            ptr: p.cast(),
            len,
        })
    }
}

/// Host memory of a Level Zero context that kernels can access (`zeMemAllocHost`), freed on drop.
#[derive(Debug)]
#[cfg_attr(not(xpushmem_fabric), allow(dead_code))] // used by the fabric transport
pub(crate) struct HostAlloc {
    rt: Arc<ZeRuntime>,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: an address range owned by this value plus a thread-safe runtime; users access it with atomics.
unsafe impl Send for HostAlloc {}
// SAFETY: as above.
unsafe impl Sync for HostAlloc {}

#[cfg_attr(not(xpushmem_fabric), allow(dead_code))] // used by the fabric transport
impl HostAlloc {
    /// The first byte (a host address, also valid in kernels of the context).
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr
    }
    /// Bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for HostAlloc {
    fn drop(&mut self) {
        // SAFETY: our allocation, freed once.
        unsafe {
            let _ = (self.rt.api.zeMemFree)(self.rt.context, self.ptr.cast());
        }
    }
}

/// Host memory the device can read and write (`zeMemAllocHost`), zeroed at allocation: op arguments (group PE
/// lists, run lists) and status records.
#[derive(Debug)]
pub struct HostBuf {
    rt: Arc<ZeRuntime>,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the allocation is plain memory owned by this value; access goes through volatile reads and writes.
unsafe impl Send for HostBuf {}
// SAFETY: as above.
unsafe impl Sync for HostBuf {}

impl HostBuf {
    pub(crate) fn new(rt: &Arc<ZeRuntime>, len: usize) -> Result<HostBuf> {
        let len = len.max(8);
        let desc = ze::ze_host_mem_alloc_desc_t::default();
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid context, descriptor and out-pointer.
        check("zeMemAllocHost", unsafe {
            (rt.api().zeMemAllocHost)(rt.handles().context(), &desc, len, 64, &mut p)
        })?;
        // SAFETY: p is a fresh allocation of len bytes.
        unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0, len) };
        Ok(HostBuf {
            rt: rt.clone(),
            ptr: p.cast(),
            len,
        })
    }

    /// Device (and host) address of byte `off`.
    pub fn addr(&self, off: usize) -> u64 {
        self.ptr as u64 + off.min(self.len) as u64
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty (never: at least 8 bytes).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Write `data` at byte `off`.
    pub fn write(&self, off: usize, data: &[u8]) -> Result<()> {
        if off > self.len || data.len() > self.len - off {
            return Err(Error::invalid(
                "off",
                off,
                format!(
                    "{} bytes do not fit a {}-byte host buffer",
                    data.len(),
                    self.len
                ),
            ));
        }
        for (i, &b) in data.iter().enumerate() {
            // SAFETY: off + i < len (checked above); volatile because the device may read concurrently.
            unsafe { std::ptr::write_volatile(self.ptr.add(off + i), b) };
        }
        Ok(())
    }

    /// The `u64` at word `i` (volatile: the device may be writing it).
    pub fn word(&self, i: usize) -> Result<u64> {
        if (i + 1) * 8 > self.len {
            return Err(Error::invalid("word", i, "past the host buffer"));
        }
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        // SAFETY: the word lies inside the allocation (checked), which is 64-byte aligned.
        Ok(unsafe { std::ptr::read_volatile(self.ptr.cast::<u64>().add(i)) })
    }
}

impl Drop for HostBuf {
    fn drop(&mut self) {
        // SAFETY: ours; users of the queue path keep the buffer alive until the work using it has finished (or
        // leak it when that cannot be known).
        unsafe {
            let _ = (self.rt.api().zeMemFree)(self.rt.handles().context(), self.ptr.cast());
        }
    }
}
