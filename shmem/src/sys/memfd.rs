//! Heap memory: a sealed memfd per PE ([`Arena`]) and shared mappings of it ([`HostMem`]), whose accessors check
//! every range before they touch memory. Dropping a mapping unmaps it; when the last process unmaps a heap the
//! kernel frees it, whatever way the job ends.

use super::copy::copy_bytes;
use crate::error::{check_access, Error, Result};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

fn os(call: &'static str, e: rustix::io::Errno) -> Error {
    Error::os(call, std::io::Error::from(e))
}

/// The seal every heap memfd carries: it never shrinks while peers map it (it may grow: the heap grows on demand,
/// and a peer reaches the new part only once it has checked the file's size, see [`HostMem::grow`]).
const SIZE_SEALS: rustix::fs::SealFlags = rustix::fs::SealFlags::SHRINK;

/// One PE's heap memory: a memfd of the heap size (the runtime's words, then the heap's mapped part).
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
        // Shrinking a mapped heap would fault peers; seal against it (peers check the seal).
        rustix::fs::fcntl_add_seals(&fd, SIZE_SEALS).map_err(|e| os("fcntl(F_ADD_SEALS)", e))?;
        Ok(Arena { fd, size })
    }

    /// Adopt a heap fd received from a peer: a memfd sealed against shrinking (so a mapping of it can never lose
    /// its backing and fault), or an error.
    pub fn from_fd(fd: OwnedFd) -> Result<Arena> {
        let seals =
            rustix::fs::fcntl_get_seals(&fd).map_err(|e| os("fcntl(F_GET_SEALS, peer heap)", e))?;
        if !seals.contains(SIZE_SEALS) {
            return Err(Error::Transport {
                transport: "shm",
                message: format!(
                    "a peer's heap descriptor is not sealed against shrinking (seals {seals:?})"
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

    /// Size in bytes when it was created or adopted.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Size in bytes now (the owner may have grown it since).
    pub fn current_size(&self) -> Result<usize> {
        let st = rustix::fs::fstat(&self.fd).map_err(|e| os("fstat(heap)", e))?;
        Ok(st.st_size as usize)
    }

    /// Grow the memfd to at least `size` bytes (sparse: no memory until touched); smaller sizes change nothing.
    pub fn grow_to(&self, size: usize) -> Result<()> {
        if self.current_size()? < size {
            rustix::fs::ftruncate(&self.fd, size as u64)
                .map_err(|e| os("ftruncate(grow heap)", e))?;
        }
        Ok(())
    }

    /// Another handle on the same memfd (a `dup` of its descriptor).
    pub fn try_clone(&self) -> Result<Arena> {
        Ok(Arena {
            fd: rustix::io::fcntl_dupfd_cloexec(&self.fd, 0).map_err(|e| os("dup(heap)", e))?,
            size: self.size,
        })
    }

    /// The memfd.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The smallest copy [`HostMem::copy_from_streamed`] makes with non-temporal stores: below it, their head and tail
/// copies and the closing fence cost more than the caches' traffic they save.
pub const STREAMED_FROM: usize = 64 << 10;

/// A shared, read-write mapping of an [`Arena`]'s bytes, aligned to the next power of two of its length (so heap
/// allocations are aligned on every PE). Every accessor checks its range against the accessible part: the first
/// [`HostMem::len`] bytes (which grow, [`HostMem::grow`]), and a fixed tail range (the symmetric data segment,
/// placed beyond the heap's reserved space).
#[derive(Debug)]
pub struct HostMem {
    base: *mut u8,
    /// Bytes of address space mapped (reserved) from `base`.
    mapped: usize,
    /// Bytes from `base` that the file backs and accessors may touch; only grows.
    len: AtomicUsize,
    /// `[start, end)` window offsets also accessible (the file backs them from the start).
    tail: (usize, usize),
    /// Copies of at least this many bytes use non-temporal stores (`usize::MAX`: never).
    nt_from: usize,
}

// SAFETY: the mapping is plain shared memory; concurrent access is governed by the SHMEM memory model (atomics for
// synchronisation, puts/gets as byte copies), and the pointer stays valid until Drop unmaps it.
unsafe impl Send for HostMem {}
// SAFETY: as above; the only interior state is the accessible length, an atomic.
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
        HostMem::map_reserved(arena, offset, len, len, None, len, nt_copy_from)
    }

    /// Map `reserve` bytes of address space over the arena from byte `offset` (a multiple of the page size), of
    /// which the first `len` bytes (and the window range `tail`, if any) are accessible now; the rest lies beyond
    /// the file's end until the owner grows it ([`HostMem::grow`]). Mapping past a file's end is allowed; only
    /// touching it faults, and the accessors never do. The mapping is aligned to the next power of two of
    /// `align_len` (the largest allocation it holds), not of the whole reservation, which would waste address
    /// space.
    pub fn map_reserved(
        arena: &Arena,
        offset: usize,
        len: usize,
        reserve: usize,
        tail: Option<(usize, usize)>,
        align_len: usize,
        nt_copy_from: Option<usize>,
    ) -> Result<HostMem> {
        let tail = tail.unwrap_or((reserve, reserve));
        let backed = |end: usize| offset.checked_add(end).is_some_and(|e| e <= arena.size);
        if offset % 4096 != 0
            || len == 0
            || len > reserve
            || tail.0 < len
            || tail.1 < tail.0
            || tail.1 > reserve
            || !backed(len)
            || (tail.1 > tail.0 && !backed(tail.1))
        {
            return Err(Error::Transport {
                transport: "shm",
                message: format!(
                    "mapping [{offset}, +{len}) of {reserve} reserved bytes (tail {tail:?}) of a {}-byte heap",
                    arena.size
                ),
            });
        }
        // The arena covers [offset, offset + len) and the tail (checked above) and never shrinks (sealed in
        // `create`, checked in `from_fd`); the rest of the reservation is never touched before `grow` checks it.
        let base = super::vmem::map_shared_aligned(arena.fd(), offset, reserve, align_len)?;
        Ok(HostMem {
            base,
            mapped: reserve,
            len: AtomicUsize::new(len),
            tail,
            nt_from: nt_copy_from.unwrap_or(usize::MAX),
        })
    }

    /// Make the first `len` bytes accessible, the mapping being of `arena` from byte `offset`: an error unless the
    /// file backs them (its owner grew it first) and they lie inside the reservation before the tail. Never
    /// shrinks.
    pub fn grow(&self, arena: &Arena, offset: usize, len: usize) -> Result<()> {
        let have = arena.current_size()?;
        if len > self.tail.0 || offset.checked_add(len).is_none_or(|e| e > have) {
            return Err(Error::Transport {
                transport: "shm",
                message: format!(
                    "growing a heap mapping to {len} bytes: its file holds {} bytes from offset {offset}, the \
                     reservation {} bytes",
                    have.saturating_sub(offset),
                    self.tail.0
                ),
            });
        }
        self.len.fetch_max(len, Ordering::AcqRel);
        Ok(())
    }

    /// Accessible length in bytes (from the start; the tail, if any, lies beyond it).
    #[inline]
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Where the accessible range holding offset `off` ends: the tail's end for an offset in the tail, else
    /// [`HostMem::len`].
    #[inline]
    pub fn limit_at(&self, off: usize) -> usize {
        if off >= self.tail.0 && self.tail.1 > self.tail.0 {
            self.tail.1
        } else {
            self.len()
        }
    }

    /// The accessible bytes from the start without a gap: [`HostMem::len`], extended through the tail when the tail
    /// starts where the accessible part ends.
    pub fn contiguous_len(&self) -> usize {
        let len = self.len();
        if self.tail.1 > self.tail.0 && self.tail.0 == len {
            self.tail.1
        } else {
            len
        }
    }

    /// The first byte's address (for address arithmetic and for handing to a device; never dereferenced by callers).
    #[inline]
    pub fn as_ptr(&self) -> *mut u8 {
        self.base
    }

    #[inline]
    fn check(&self, off: usize, len: usize, align: usize) -> Result<()> {
        let limit = self.limit_at(off);
        check_access("shm", "access", off, len, align, limit)
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
        self.copy_with(off, src, src_off, len, self.nt_from)
    }

    /// [`HostMem::copy_from`] for a copy of a call whose data leaves this PE's share of the node's caches (the caller
    /// decides; `Shmem::get_sym_streamed`): non-temporal stores from [`STREAMED_FROM`] bytes (or this mapping's own
    /// threshold, if lower), unless this mapping never uses them (`XPUSHMEM_NT_COPY_SIZE=off`).
    pub fn copy_from_streamed(
        &self,
        off: usize,
        src: &HostMem,
        src_off: usize,
        len: usize,
    ) -> Result<()> {
        let nt_from = if self.nt_from == usize::MAX {
            usize::MAX
        } else {
            self.nt_from.min(STREAMED_FROM)
        };
        self.copy_with(off, src, src_off, len, nt_from)
    }

    /// [`HostMem::copy_from`] with non-temporal stores from `nt_from` bytes.
    fn copy_with(
        &self,
        off: usize,
        src: &HostMem,
        src_off: usize,
        len: usize,
        nt_from: usize,
    ) -> Result<()> {
        self.check(off, len, 1)?;
        src.check(src_off, len, 1)?;
        // SAFETY: both ranges lie inside live mappings of this process (checked against each one's length);
        // `copy_bytes` tolerates overlap (a PE copying within its own heap).
        unsafe { copy_bytes(src.base.add(src_off), self.base.add(off), len, nt_from) };
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
        // SAFETY: (base, mapped) is exactly the region mmap returned; no reference into it outlives `self` because
        // every accessor borrows `self`.
        let _ = unsafe { rustix::mm::munmap(self.base.cast(), self.mapped) };
    }
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
    fn a_reserved_mapping_grows_only_as_far_as_its_file() {
        let own = Arena::create(4096).expect("memfd");
        let peer = Arena::from_peer(rustix::io::dup(own.fd()).expect("dup"), 1).expect("sealed");
        let reserve = 1 << 30;
        let mine = HostMem::map_reserved(&own, 0, 4096, reserve, None, reserve, None).expect("map");
        let theirs =
            HostMem::map_reserved(&peer, 0, 4096, reserve, None, reserve, None).expect("map");
        assert_eq!((mine.len(), theirs.len()), (4096, 4096));
        // Beyond the accessible part: an error, never a fault.
        assert!(mine.write(4096, &[1]).is_err());
        // A peer cannot grow its view past the owner's file.
        assert!(theirs.grow(&peer, 0, 1 << 20).is_err());
        own.grow_to(1 << 20).expect("ftruncate");
        mine.grow(&own, 0, 1 << 20).expect("grow");
        theirs.grow(&peer, 0, 1 << 20).expect("grow");
        mine.write((1 << 20) - 3, &[7, 8, 9]).expect("write");
        let mut back = [0u8; 3];
        theirs.read((1 << 20) - 3, &mut back).expect("read");
        assert_eq!(back, [7, 8, 9]);
        // Not past the reservation, and the file never shrinks (sealed).
        assert!(mine.grow(&own, 0, reserve + 4096).is_err());
        assert!(rustix::fs::ftruncate(own.fd(), 4096).is_err());
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
