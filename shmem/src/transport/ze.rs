//! Level Zero transport leaf: [`DeviceWindow`], a [`Window`] onto one PE's device heap (our own allocation, or a
//! peer's opened through IPC). Every access is bounds-checked here, then issued as a copy, a fill or a
//! one-work-item atomic kernel of the Level Zero runtime (`hal/ze`), which this module re-exports at its old paths.

use super::{AmoOp, Window};
use crate::error::{Error, Result};
use crate::hal::ze::check;
#[cfg_attr(not(xpushmem_fabric), allow(unused_imports))] // used by the fabric transport
pub(crate) use crate::hal::ze::HostAlloc;
pub use crate::hal::ze::{
    DeviceSelect, DeviceWindow, ExternalHandles, ZeEvent, ZeRuntime, RUNTIME_KERNELS_SPIRV,
};
use level_zero_sys as ze;

impl DeviceWindow {
    fn check(&self, off: usize, len: usize, align: usize) -> Result<()> {
        super::check_access("ze", "access", off, len, align, self.len)
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the window is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
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
        super::check_access("ze", "heap tail", off, src.len(), 1, self.tail)?;
        // SAFETY: [len + off, len + off + src.len()) lies in the allocation's tail (checked); src is a live slice.
        unsafe {
            self.rt
                .write_raw(self.base.wrapping_add(self.len + off), src)
        }
    }
}

impl Window for DeviceWindow {
    fn write(&self, off: usize, src: &[u8]) -> Result<()> {
        self.check(off, src.len(), 1)?;
        // SAFETY: [off, off+len) lies in the device allocation (checked); src is a live host slice.
        unsafe { self.rt.copy(self.base.add(off), src.as_ptr(), src.len()) }
    }
    fn read(&self, off: usize, dst: &mut [u8]) -> Result<()> {
        self.check(off, dst.len(), 1)?;
        // SAFETY: [off, off+len) lies in the device allocation (checked); dst is a live, exclusive host slice.
        unsafe {
            self.rt
                .copy(dst.as_mut_ptr(), self.base.add(off), dst.len())
        }
    }
    fn fill(&self, off: usize, len: usize, byte: u8) -> Result<()> {
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
    fn len(&self) -> usize {
        self.len
    }
    fn copy_from(&self, off: usize, src: &dyn Window, src_off: usize, len: usize) -> Result<()> {
        self.check(off, len, 1)?;
        super::check_access("ze", "source range", src_off, len, 1, src.len())?;
        if src.base().is_null() {
            // A window with no address in this process (a peer reached through the fabric): through host memory.
            let mut buf = vec![0u8; len];
            src.read(src_off, &mut buf)?;
            return self.write(off, &buf);
        }
        // SAFETY: both ranges lie inside live allocations usable by this process's device (ours, a peer's heap
        // opened through IPC in our context, or host memory), checked against each window's length.
        unsafe {
            self.rt
                .copy(self.base.add(off), src.base().add(src_off), len)
        }
    }
    fn amo(&self, off: usize, width: usize, op: AmoOp, operand: u64) -> Result<u64> {
        if width != 4 && width != 8 {
            return Err(Error::Transport {
                transport: "ze",
                message: format!("atomic width {width} (must be 4 or 8)"),
            });
        }
        self.check(off, width, width)?;
        // The address is in bounds and aligned (checked); the kernel touches only that word.
        self.rt.amo(self.base.wrapping_add(off), width, op, operand)
    }
    fn base(&self) -> *mut u8 {
        self.base
    }
    fn host_accessible(&self) -> bool {
        false
    }
}
