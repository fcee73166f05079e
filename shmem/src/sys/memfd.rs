//! Heap memory: a sealed memfd per PE ([`Arena`]) and shared mappings of it ([`HostMem`]), whose accessors check
//! every range before they touch memory. Dropping a mapping unmaps it; when the last process unmaps a heap the
//! kernel frees it, whatever way the job ends.

use super::copy::copy_bytes;
use crate::error::{check_access, Error, Result};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64};

fn os(call: &'static str, e: rustix::io::Errno) -> Error {
    Error::os(call, std::io::Error::from(e))
}

/// The seals every heap memfd carries: its size never changes while peers map it.
const SIZE_SEALS: rustix::fs::SealFlags =
    rustix::fs::SealFlags::GROW.union(rustix::fs::SealFlags::SHRINK);

/// One PE's heap memory: a memfd of the heap size.
#[derive(Debug)]
pub struct Arena {
    fd: OwnedFd,
    size: usize,
}

impl Arena {
    /// Create a sparse memfd of `size` bytes.
    pub fn create(size: usize) -> Result<Arena> {
        let fd = rustix::fs::memfd_create(
            "xpushmem-heap",
            rustix::fs::MemfdFlags::CLOEXEC | rustix::fs::MemfdFlags::ALLOW_SEALING,
        )
        .map_err(|e| os("memfd_create", e))?;
        rustix::fs::ftruncate(&fd, size as u64).map_err(|e| os("ftruncate(memfd)", e))?;
        // Growing or shrinking a mapped heap would fault peers; seal the size (peers check the seals).
        rustix::fs::fcntl_add_seals(&fd, SIZE_SEALS).map_err(|e| os("fcntl(F_ADD_SEALS)", e))?;
        Ok(Arena { fd, size })
    }

    /// Adopt a heap fd received from a peer: a memfd whose size is sealed (so a mapping of it can never lose its
    /// backing and fault), or an error.
    pub fn from_fd(fd: OwnedFd) -> Result<Arena> {
        let seals =
            rustix::fs::fcntl_get_seals(&fd).map_err(|e| os("fcntl(F_GET_SEALS, peer heap)", e))?;
        if !seals.contains(SIZE_SEALS) {
            return Err(Error::Transport {
                transport: "shm",
                message: format!(
                    "a peer's heap descriptor is not sealed against shrinking and growing (seals {seals:?})"
                ),
            });
        }
        let st = rustix::fs::fstat(&fd).map_err(|e| os("fstat(peer heap)", e))?;
        Ok(Arena {
            fd,
            size: st.st_size as usize,
        })
    }

    /// Adopt the heap fd PE `pe` sent, which must be sealed; errors name the PE.
    pub(crate) fn from_peer(fd: OwnedFd, pe: usize) -> Result<Arena> {
        Arena::from_fd(fd).map_err(|e| match e {
            Error::Transport { transport, message } => Error::Transport {
                transport,
                message: format!("PE {pe}: {message}"),
            },
            e => e,
        })
    }

    /// Size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The memfd.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A shared, read-write mapping of an [`Arena`]'s bytes, aligned to the next power of two of its length (so heap
/// allocations are aligned on every PE). Every accessor checks its range against the mapping's length.
#[derive(Debug)]
pub struct HostMem {
    base: *mut u8,
    len: usize,
    /// Copies of at least this many bytes use non-temporal stores (`usize::MAX`: never).
    nt_from: usize,
}

// SAFETY: the mapping is plain shared memory; concurrent access is governed by the SHMEM memory model (atomics for
// synchronisation, puts/gets as byte copies), and the pointer stays valid until Drop unmaps it.
unsafe impl Send for HostMem {}
// SAFETY: as above; no interior state besides the immutable (base, len) pair.
unsafe impl Sync for HostMem {}

impl HostMem {
    /// Map `len` bytes of the arena from byte `offset` (a multiple of the page size), shared and read-write;
    /// copies into and out of it of at least `nt_copy_from` bytes use non-temporal stores (`None`: never).
    pub fn map(
        arena: &Arena,
        offset: usize,
        len: usize,
        nt_copy_from: Option<usize>,
    ) -> Result<HostMem> {
        if offset % 4096 != 0 || offset.checked_add(len).is_none_or(|e| e > arena.size) || len == 0
        {
            return Err(Error::Transport {
                transport: "shm",
                message: format!("mapping [{offset}, +{len}) of a {}-byte heap", arena.size),
            });
        }
        // The arena covers [offset, offset + len) (checked above) and its size is sealed (set in `create`, checked
        // in `from_fd`).
        let base = super::vmem::map_shared_aligned(arena.fd(), offset, len)?;
        Ok(HostMem {
            base,
            len,
            nt_from: nt_copy_from.unwrap_or(usize::MAX),
        })
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// The first byte's address (for address arithmetic and for handing to a device; never dereferenced by callers).
    #[inline]
    pub fn as_ptr(&self) -> *mut u8 {
        self.base
    }

    #[inline]
    fn check(&self, off: usize, len: usize, align: usize) -> Result<()> {
        check_access("shm", "access", off, len, align, self.len)
    }

    /// Copy `src` into the mapping at `off`.
    #[inline]
    pub fn write(&self, off: usize, src: &[u8]) -> Result<()> {
        self.check(off, src.len(), 1)?;
        // SAFETY: [off, off+len) lies inside the mapping (checked); `src` is a distinct Rust slice or another
        // part of shared memory, and `copy_bytes` tolerates overlap.
        unsafe { copy_bytes(src.as_ptr(), self.base.add(off), src.len(), self.nt_from) };
        Ok(())
    }

    /// Copy from the mapping at `off` into `dst`.
    #[inline]
    pub fn read(&self, off: usize, dst: &mut [u8]) -> Result<()> {
        self.check(off, dst.len(), 1)?;
        // SAFETY: [off, off+len) lies inside the mapping (checked); `dst` is an exclusive Rust slice.
        unsafe {
            copy_bytes(
                self.base.add(off),
                dst.as_mut_ptr(),
                dst.len(),
                self.nt_from,
            )
        };
        Ok(())
    }

    /// Fill `len` bytes at `off` with `byte`.
    pub fn fill(&self, off: usize, len: usize, byte: u8) -> Result<()> {
        self.check(off, len, 1)?;
        // SAFETY: [off, off+len) lies inside the mapping (checked).
        unsafe { std::ptr::write_bytes(self.base.add(off), byte, len) };
        Ok(())
    }

    /// Copy `len` bytes from `src` at `src_off` into this mapping at `off` (the two may be the same mapping, and
    /// the ranges may overlap).
    pub fn copy_from(&self, off: usize, src: &HostMem, src_off: usize, len: usize) -> Result<()> {
        self.check(off, len, 1)?;
        check_access("shm", "source range", src_off, len, 1, src.len)?;
        // SAFETY: both ranges lie inside live mappings of this process (checked against each one's length);
        // `copy_bytes` tolerates overlap (a PE copying within its own heap).
        unsafe { copy_bytes(src.base.add(src_off), self.base.add(off), len, self.nt_from) };
        Ok(())
    }

    /// The 32-bit atomic word at `off` (4-byte aligned).
    pub fn atomic32(&self, off: usize) -> Result<&AtomicU32> {
        self.check(off, 4, 4)?;
        // SAFETY: in bounds and aligned (checked); the page is shared memory that lives as long as `self`, and
        // every concurrent access to a word used atomically is itself atomic (SHMEM's AMO rules).
        Ok(unsafe { AtomicU32::from_ptr(self.base.add(off).cast()) })
    }

    /// The 64-bit atomic word at `off` (8-byte aligned).
    #[inline]
    pub fn atomic64(&self, off: usize) -> Result<&AtomicU64> {
        self.check(off, 8, 8)?;
        // SAFETY: as for `atomic32`, with 8-byte alignment checked.
        Ok(unsafe { AtomicU64::from_ptr(self.base.add(off).cast()) })
    }
}

impl Drop for HostMem {
    fn drop(&mut self) {
        // SAFETY: (base, len) is exactly the region mmap returned; no reference into it outlives `self` because
        // every accessor borrows `self`.
        let _ = unsafe { rustix::mm::munmap(self.base.cast(), self.len) };
    }
}

/// Borrow a raw descriptor number that some owner (here: a Level Zero driver's IPC handle) keeps open for the
/// life of the process's heap.
pub fn borrow_raw_fd(fd: i32) -> Result<BorrowedFd<'static>> {
    if fd < 0
        || rustix::io::fcntl_getfd(
            // SAFETY: only used to query flags; an invalid number makes fcntl fail with EBADF, handled below.
            unsafe { BorrowedFd::borrow_raw(fd) },
        )
        .is_err()
    {
        return Err(Error::Transport {
            transport: "shm",
            message: format!("descriptor {fd} from the device driver is not open"),
        });
    }
    // SAFETY: the descriptor is open (checked) and owned by the driver's allocation, which outlives the heap set-up
    // that borrows it.
    Ok(unsafe { BorrowedFd::borrow_raw(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapped_copies_above_the_cutover_are_exact() {
        let a = Arena::create(1 << 16).expect("memfd");
        let m = HostMem::map(&a, 0, 1 << 16, Some(64)).expect("map");
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 253) as u8).collect();
        m.write(3, &data).expect("write");
        let mut back = vec![0u8; 4999];
        m.read(4, &mut back).expect("read");
        assert_eq!(back, data[1..]);
        // Overlapping copy within the mapping: falls back to memmove.
        m.copy_from(10, &m, 3, 4000).expect("copy");
        let mut c = vec![0u8; 4000];
        m.read(10, &mut c).expect("read");
        assert_eq!(c, data[..4000]);
    }

    #[test]
    fn peer_heaps_must_be_sealed() {
        let sealed = Arena::create(8192).expect("memfd");
        let dup = rustix::io::dup(sealed.fd()).expect("dup");
        assert_eq!(Arena::from_peer(dup, 3).expect("sealed").size(), 8192);

        let fd = rustix::fs::memfd_create("unsealed", rustix::fs::MemfdFlags::ALLOW_SEALING)
            .expect("memfd");
        rustix::fs::ftruncate(&fd, 8192).expect("ftruncate");
        let e = Arena::from_peer(fd, 5).expect_err("unsealed");
        assert!(
            matches!(&e, Error::Transport { transport: "shm", message } if message.starts_with("PE 5: ")
                && message.contains("not sealed")),
            "{e}"
        );
    }
}
