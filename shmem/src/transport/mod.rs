//! Transports move bytes between PEs. Each is a leaf: the only place (with `device/` and the FFI) where raw memory
//! is touched, each `unsafe` block justified in place.
//!
//! - [`shm`]: same node, CPU memory. Every PE's heap is a memfd; the fds travel over a Unix socket (SCM_RIGHTS) and
//!   every PE maps every node peer's heap, so a put is a `memcpy` and an atomic is a CPU atomic on the peer's page.
//! - [`dataseg`]: the executable's global and static variables moved onto the heap's memfd (OpenSHMEM's symmetric
//!   data objects), reached through the same mappings.

pub mod dataseg;
pub mod fdx;
pub mod shm;
pub mod vmem;
pub mod ze;

use crate::error::Result;

/// A window onto one PE's symmetric heap, as seen from this process: the operations every transport provides.
/// Offsets are bytes from the start of the heap; every method checks its range against the window.
pub trait Window: Send + Sync + std::fmt::Debug {
    /// Copy `src` to `off`. Complete (visible to the owner) on return.
    fn write(&self, off: usize, src: &[u8]) -> Result<()>;
    /// Copy from `off` into `dst`.
    fn read(&self, off: usize, dst: &mut [u8]) -> Result<()>;
    /// Strided write of `count` elements of `elem` bytes: element `i` goes from `src[i * src_stride]` to
    /// `off + i * dst_stride` (strides in elements).
    fn write_strided(
        &self,
        off: usize,
        dst_stride: usize,
        src: &[u8],
        src_stride: usize,
        elem: usize,
        count: usize,
    ) -> Result<()> {
        check_local_span(src.len(), count, src_stride, elem)?;
        for i in 0..count {
            self.write(
                off + i * dst_stride * elem,
                &src[i * src_stride * elem..][..elem],
            )?;
        }
        Ok(())
    }
    /// Strided read of `count` elements of `elem` bytes: element `i` goes from `off + i * src_stride` to
    /// `dst[i * dst_stride]` (strides in elements).
    fn read_strided(
        &self,
        off: usize,
        src_stride: usize,
        dst: &mut [u8],
        dst_stride: usize,
        elem: usize,
        count: usize,
    ) -> Result<()> {
        check_local_span(dst.len(), count, dst_stride, elem)?;
        for i in 0..count {
            self.read(
                off + i * src_stride * elem,
                &mut dst[i * dst_stride * elem..][..elem],
            )?;
        }
        Ok(())
    }
    /// Copy `len` bytes from `src_off` of another window of this process into `off` of this one. The default
    /// stages through host memory; transports override it with a direct copy where both sides allow one.
    fn copy_from(&self, off: usize, src: &dyn Window, src_off: usize, len: usize) -> Result<()> {
        let mut buf = vec![0u8; len];
        src.read(src_off, &mut buf)?;
        self.write(off, &buf)
    }
    /// The 8-byte word at `off` as a CPU atomic, when this process can address it directly (host heaps), for
    /// polling without a call per load.
    fn atomic64(&self, off: usize) -> Option<&std::sync::atomic::AtomicU64> {
        let _ = off;
        None
    }
    /// Size of the window in bytes.
    fn len(&self) -> usize;
    /// Whether the window has no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Set `len` bytes at `off` to `byte`.
    fn fill(&self, off: usize, len: usize, byte: u8) -> Result<()>;
    /// Atomic operation on the `width`-byte (4 or 8) word at `off`; the previous value.
    fn amo(&self, off: usize, width: usize, op: AmoOp, operand: u64) -> Result<u64>;
    /// Address of the window's first byte in this process (a CPU address for host heaps, a device address for
    /// device heaps).
    fn base(&self) -> *mut u8;
    /// Whether the CPU of this process may load and store through [`Window::base`].
    fn host_accessible(&self) -> bool;
}

/// Operations of the atomic memory interface, applied by a transport to one 4- or 8-byte word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmoOp {
    /// Read the word.
    Fetch,
    /// Write the operand.
    Set,
    /// Write the operand, return the old value.
    Swap,
    /// Write the operand if the word equals `cond`; return the old value.
    CompareSwap {
        /// Expected value.
        cond: u64,
    },
    /// Wrapping add.
    FetchAdd,
    /// Bitwise and.
    FetchAnd,
    /// Bitwise or.
    FetchOr,
    /// Bitwise xor.
    FetchXor,
}

/// An error unless a local buffer of `have` bytes holds `count` elements of `elem` bytes every `stride` elements.
fn check_local_span(have: usize, count: usize, stride: usize, elem: usize) -> Result<()> {
    let need = match count {
        0 => 0,
        c => (c - 1)
            .saturating_mul(stride)
            .saturating_mul(elem)
            .saturating_add(elem),
    };
    if need > have {
        return Err(crate::error::Error::Transport {
            transport: "strided",
            message: format!(
                "{count} elements every {stride} need {need} bytes of a {have}-byte local buffer"
            ),
        });
    }
    Ok(())
}

/// An error unless `[off, off + len)` lies inside a window of `size` bytes and `off` is a multiple of `align`.
pub(crate) fn check_access(
    transport: &'static str,
    what: &str,
    off: usize,
    len: usize,
    align: usize,
    size: usize,
) -> Result<()> {
    if off.checked_add(len).is_none_or(|e| e > size) || off % align != 0 {
        return Err(crate::error::Error::Transport {
            transport,
            message: format!(
                "{what} [{off}, +{len}) with alignment {align} outside a {size}-byte window"
            ),
        });
    }
    Ok(())
}
