//! Same-node transport over memfd-backed heaps mapped into every PE of the node.
//!
//! Life of a heap: [`Arena::create`] makes a sparse memfd of the heap size (pages are allocated on first touch, so
//! a 1 GiB heap costs nothing until used); [`exchange_fds`] hands every PE of the node every peer's fd over an
//! authenticated abstract Unix socket (no file in `/dev/shm` or anywhere else; see [`super::fdx`]);
//! [`Mapping::map`] maps each with `MAP_SHARED`.
//! Dropping a mapping unmaps it; when the last process unmaps a heap the kernel frees it, whatever way the job ends.

pub use super::fdx::{exchange_fds, FdListener};
use super::AmoOp;
use crate::error::{Error, Result};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

fn os(call: &'static str, e: rustix::io::Errno) -> Error {
    Error::os(call, std::io::Error::from(e))
}

/// Copies of at least this many bytes between mappings use non-temporal stores (`usize::MAX`: never); set at
/// init from `XPUSHMEM_NT_COPY_SIZE`.
static NT_COPY_FROM: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(usize::MAX);

/// Set the size from which copies use non-temporal stores (`None`: never).
pub(crate) fn set_nt_copy_size(from: Option<usize>) {
    NT_COPY_FROM.store(from.unwrap_or(usize::MAX), Ordering::Relaxed);
}

/// Copy `len` bytes from `src` to `dst` (ranges may overlap): non-temporal stores when the copy is at least the
/// configured size and the ranges are disjoint (they bypass the caches: no read for ownership of the destination,
/// which a memory-bound copy would otherwise pay, and the caches keep what they held), else `memmove`.
///
/// # Safety
/// `src..src+len` must be readable and `dst..dst+len` writable for the duration of the call.
#[inline]
unsafe fn copy_bytes(src: *const u8, dst: *mut u8, len: usize) {
    if len <= 16 {
        // SAFETY: the caller's contract.
        unsafe { copy_small(src, dst, len) };
    } else {
        // SAFETY: the caller's contract.
        unsafe { copy_large(src, dst, len) };
    }
}

/// [`copy_bytes`] above 16 bytes (out of line: the small path stays small enough to inline into its callers).
///
/// # Safety
/// As [`copy_bytes`].
#[inline(never)]
unsafe fn copy_large(src: *const u8, dst: *mut u8, len: usize) {
    if len >= NT_COPY_FROM.load(Ordering::Relaxed) {
        let (s, d) = (src as usize, dst as usize);
        if s + len <= d || d + len <= s {
            // SAFETY: the caller's contract, and the ranges are disjoint (checked).
            unsafe { copy_nt(src, dst, len) };
            return;
        }
    }
    // SAFETY: the caller's contract; `copy` tolerates overlap.
    unsafe { std::ptr::copy(src, dst, len) };
}

/// A copy of at most 16 bytes without a call into `memmove` (whose call and dispatch cost more than the copy
/// itself; small puts, gets and signals' payloads are on the latency path): the first and the last bytes as two
/// possibly overlapping words of the largest width that fits, both loaded before either is stored, so the ranges
/// may overlap. Unaligned accesses.
///
/// # Safety
/// As [`copy_bytes`], with `len <= 16`.
#[inline(always)]
unsafe fn copy_small(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY: (every arm) the caller's contract, and each width `w` satisfies `w <= len <= 2 * w`.
    unsafe {
        match len {
            8..=16 => two_words::<u64>(src, dst, len),
            4..=7 => two_words::<u32>(src, dst, len),
            2..=3 => two_words::<u16>(src, dst, len),
            1 => dst.write(src.read()),
            _ => {}
        }
    }
}

/// Copy `len` bytes as two possibly overlapping words of type `W`, the first at 0 and the second ending at `len`,
/// both loaded before either is stored (so the ranges may overlap). Unaligned accesses.
///
/// # Safety
/// As [`copy_bytes`], with `size_of::<W>() <= len <= 2 * size_of::<W>()`.
#[inline(always)]
unsafe fn two_words<W: Copy>(src: *const u8, dst: *mut u8, len: usize) {
    let w = std::mem::size_of::<W>();
    // SAFETY: both loads lie inside `src..src+len` and both stores inside `dst..dst+len` (`w <= len`).
    unsafe {
        let (a, b) = (
            src.cast::<W>().read_unaligned(),
            src.add(len - w).cast::<W>().read_unaligned(),
        );
        dst.cast::<W>().write_unaligned(a);
        dst.add(len - w).cast::<W>().write_unaligned(b);
    }
}

/// Non-temporal copy of disjoint ranges: plain copies for the head (up to 64-byte alignment of `dst`) and the
/// tail, 64-byte blocks of streaming stores in between, then a store fence (streaming stores are weakly ordered:
/// the fence makes them visible before anything this PE stores afterwards, a signal for instance).
///
/// # Safety
/// As [`copy_bytes`], with disjoint ranges.
#[cfg(target_arch = "x86_64")]
unsafe fn copy_nt(src: *const u8, dst: *mut u8, len: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
    let head = (64 - (dst as usize) % 64) % 64;
    let head = head.min(len);
    // SAFETY: the first `head` bytes of both ranges (inside them, disjoint).
    unsafe { std::ptr::copy_nonoverlapping(src, dst, head) };
    let mut at = head;
    while at + 64 <= len {
        // SAFETY: 64 bytes at `at` lie inside both ranges; `dst + at` is 64-byte aligned (16 suffices for the
        // streaming stores), the loads are unaligned ones. SSE2 is part of x86_64.
        unsafe {
            let s = src.add(at).cast::<__m128i>();
            let d = dst.add(at).cast::<__m128i>();
            let (a, b) = (_mm_loadu_si128(s), _mm_loadu_si128(s.add(1)));
            let (c, e) = (_mm_loadu_si128(s.add(2)), _mm_loadu_si128(s.add(3)));
            _mm_stream_si128(d, a);
            _mm_stream_si128(d.add(1), b);
            _mm_stream_si128(d.add(2), c);
            _mm_stream_si128(d.add(3), e);
        }
        at += 64;
    }
    // SAFETY: the remaining bytes of both ranges; then the fence (no memory access).
    unsafe {
        std::ptr::copy_nonoverlapping(src.add(at), dst.add(at), len - at);
        _mm_sfence();
    }
}

/// Non-temporal copy elsewhere: a plain copy.
///
/// # Safety
/// As [`copy_bytes`].
#[cfg(not(target_arch = "x86_64"))]
unsafe fn copy_nt(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY: the caller's contract.
    unsafe { std::ptr::copy(src, dst, len) };
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
    fn from_peer(fd: OwnedFd, pe: usize) -> Result<Arena> {
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

/// A shared, read-write mapping of an [`Arena`].
#[derive(Debug)]
pub struct Mapping {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; concurrent access is governed by the SHMEM memory model (atomics for
// synchronisation, puts/gets as byte copies), and the pointer stays valid until Drop unmaps it.
unsafe impl Send for Mapping {}
// SAFETY: as above; no interior state besides the immutable (base, len) pair.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Map `len` bytes of the arena from byte `offset` (a multiple of the page size), shared and read-write.
    pub fn map(arena: &Arena, offset: usize, len: usize) -> Result<Mapping> {
        if offset % 4096 != 0 || offset.checked_add(len).is_none_or(|e| e > arena.size) || len == 0
        {
            return Err(Error::Transport {
                transport: "shm",
                message: format!("mapping [{offset}, +{len}) of a {}-byte heap", arena.size),
            });
        }
        // The arena covers [offset, offset + len) (checked above) and its size is sealed (set in `create`, checked
        // in `from_fd`). The mapping is aligned to the next power of two of its length, so heap allocations are
        // aligned on every PE.
        let base = super::vmem::map_shared_aligned(arena.fd(), offset, len)?;
        Ok(Mapping { base, len })
    }

    #[inline]
    fn check(&self, off: usize, len: usize, align: usize) -> Result<()> {
        super::check_access("shm", "access", off, len, align, self.len)
    }

    /// Copy `src` into the mapping at `off`.
    #[inline]
    pub fn write(&self, off: usize, src: &[u8]) -> Result<()> {
        self.check(off, src.len(), 1)?;
        // SAFETY: [off, off+len) lies inside the mapping (checked); `src` is a distinct Rust slice or another
        // part of shared memory, and `copy_bytes` tolerates overlap.
        unsafe { copy_bytes(src.as_ptr(), self.base.add(off), src.len()) };
        Ok(())
    }

    /// Copy from the mapping at `off` into `dst`.
    #[inline]
    pub fn read(&self, off: usize, dst: &mut [u8]) -> Result<()> {
        self.check(off, dst.len(), 1)?;
        // SAFETY: [off, off+len) lies inside the mapping (checked); `dst` is an exclusive Rust slice.
        unsafe { copy_bytes(self.base.add(off), dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    /// Fill `len` bytes at `off` with `byte`.
    pub fn fill(&self, off: usize, len: usize, byte: u8) -> Result<()> {
        self.check(off, len, 1)?;
        // SAFETY: [off, off+len) lies inside the mapping (checked).
        unsafe { std::ptr::write_bytes(self.base.add(off), byte, len) };
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

    /// Apply an atomic operation to the `width`-byte word at `off`; returns the previous value (zero-extended).
    pub fn amo(&self, off: usize, width: usize, op: AmoOp, operand: u64) -> Result<u64> {
        const O: Ordering = Ordering::SeqCst;
        Ok(match width {
            4 => {
                let a = self.atomic32(off)?;
                let v = operand as u32;
                (match op {
                    AmoOp::Fetch => a.load(O),
                    AmoOp::Set => {
                        a.store(v, O);
                        0
                    }
                    AmoOp::Swap => a.swap(v, O),
                    AmoOp::CompareSwap { cond } => match a.compare_exchange(cond as u32, v, O, O) {
                        Ok(old) | Err(old) => old,
                    },
                    AmoOp::FetchAdd => a.fetch_add(v, O),
                    AmoOp::FetchAnd => a.fetch_and(v, O),
                    AmoOp::FetchOr => a.fetch_or(v, O),
                    AmoOp::FetchXor => a.fetch_xor(v, O),
                }) as u64
            }
            8 => {
                let a = self.atomic64(off)?;
                match op {
                    AmoOp::Fetch => a.load(O),
                    AmoOp::Set => {
                        a.store(operand, O);
                        0
                    }
                    AmoOp::Swap => a.swap(operand, O),
                    AmoOp::CompareSwap { cond } => match a.compare_exchange(cond, operand, O, O) {
                        Ok(old) | Err(old) => old,
                    },
                    AmoOp::FetchAdd => a.fetch_add(operand, O),
                    AmoOp::FetchAnd => a.fetch_and(operand, O),
                    AmoOp::FetchOr => a.fetch_or(operand, O),
                    AmoOp::FetchXor => a.fetch_xor(operand, O),
                }
            }
            w => {
                return Err(Error::Transport {
                    transport: "shm",
                    message: format!("atomic width {w} (must be 4 or 8)"),
                })
            }
        })
    }
}

impl super::Window for Mapping {
    fn write(&self, off: usize, src: &[u8]) -> Result<()> {
        Mapping::write(self, off, src)
    }
    fn read(&self, off: usize, dst: &mut [u8]) -> Result<()> {
        Mapping::read(self, off, dst)
    }
    fn fill(&self, off: usize, len: usize, byte: u8) -> Result<()> {
        Mapping::fill(self, off, len, byte)
    }
    fn len(&self) -> usize {
        self.len
    }
    fn atomic64(&self, off: usize) -> Option<&AtomicU64> {
        Mapping::atomic64(self, off).ok()
    }
    fn copy_from(
        &self,
        off: usize,
        src: &dyn super::Window,
        src_off: usize,
        len: usize,
    ) -> Result<()> {
        if !src.host_accessible() {
            let mut buf = vec![0u8; len];
            src.read(src_off, &mut buf)?;
            return self.write(off, &buf);
        }
        self.check(off, len, 1)?;
        super::check_access("shm", "source range", src_off, len, 1, src.len())?;
        // SAFETY: both ranges lie inside live host mappings of this process (checked against each window's
        // length); `copy_bytes` tolerates overlap (a PE copying within its own heap).
        unsafe { copy_bytes(src.base().add(src_off), self.base.add(off), len) };
        Ok(())
    }
    fn put_signal_nbi(
        &self,
        off: usize,
        src: &[u8],
        sig: usize,
        op: AmoOp,
        value: u64,
    ) -> Result<Option<super::Ticket>> {
        let word = self.atomic64(sig)?;
        self.write(off, src)?;
        match op {
            // A release store: whoever sees the signal sees the payload, which is what put-with-signal promises.
            // (A sequentially consistent store is an `xchg` on x86, which stalls the sender until every line of
            // the payload is owned; the release store is a plain `mov` that retires behind them.)
            AmoOp::Set => word.store(value, Ordering::Release),
            AmoOp::FetchAdd => {
                word.fetch_add(value, Ordering::Release);
            }
            other => {
                self.amo(sig, 8, other, value)?;
            }
        }
        Ok(None)
    }
    fn amo(&self, off: usize, width: usize, op: AmoOp, operand: u64) -> Result<u64> {
        Mapping::amo(self, off, width, op, operand)
    }
    fn base(&self) -> *mut u8 {
        self.base
    }
    fn host_accessible(&self) -> bool {
        true
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: (base, len) is exactly the region mmap returned; no reference into it outlives `self` because
        // every accessor borrows `self`.
        let _ = unsafe { rustix::mm::munmap(self.base.cast(), self.len) };
    }
}

/// One window per PE (`None` for PEs this transport does not reach).
pub(crate) type Windows = Vec<Option<Box<dyn super::Window>>>;

/// The shm transport's part of [`super::connect`]: create this PE's memfd (`sys_bytes` of runtime words, then
/// `host_user` bytes of user heap), exchange fds with the node's PEs and map each. Returns the arena and, per PE of
/// the node, the window onto its runtime words and (when `host_user > 0`) onto its user heap. Collective.
pub(crate) fn connect(
    a: &super::ConnectArgs<'_>,
    local: &[usize],
    host_user: usize,
    data: &super::dataseg::SymData,
) -> Result<(Arena, Windows, Windows)> {
    let (me, n) = (a.me, a.pids.len());
    let arena = Arena::create(a.sys_bytes + data.window_len(host_user))?;
    data.adopt(&arena, a.sys_bytes)?;
    let listener = if local[0] == me && local.len() > 1 {
        Some(FdListener::bind(a.cookie, me)?)
    } else {
        None
    };
    a.boot.barrier()?;
    let fds = if local.len() > 1 {
        exchange_fds(a.cookie, local, a.pids, me, arena.fd(), listener, a.timeout)?
    } else {
        Vec::new()
    };
    let peer_arenas: Vec<Arena> = fds
        .into_iter()
        .zip(local)
        .map(|(fd, &pe)| Arena::from_peer(fd, pe))
        .collect::<Result<_>>()?;
    let mut sys: Windows = (0..n).map(|_| None).collect();
    let mut heap: Windows = (0..n).map(|_| None).collect();
    for (i, &pe) in local.iter().enumerate() {
        let ar = if pe == me || peer_arenas.is_empty() {
            &arena
        } else {
            &peer_arenas[i]
        };
        data.check_peer(me, pe, ar.size(), arena.size())?;
        sys[pe] = Some(Box::new(Mapping::map(ar, 0, a.sys_bytes)?));
        if host_user > 0 {
            let len = data.window_len(host_user);
            heap[pe] = Some(Box::new(Mapping::map(ar, a.sys_bytes, len)?));
        }
    }
    Ok((arena, sys, heap))
}

/// Watches node peers' processes through pidfds: a peer that exits is seen at once, zombie or reaped.
#[derive(Debug, Default)]
pub struct PeerWatch {
    peers: Vec<(usize, OwnedFd)>,
}

impl PeerWatch {
    /// Watch the given (PE, pid) pairs. PEs whose pidfd cannot be opened (already gone) are reported by `check`.
    pub fn new(peers: &[(usize, u32)]) -> (PeerWatch, Vec<usize>) {
        let mut gone = Vec::new();
        let mut w = PeerWatch::default();
        for &(pe, pid) in peers {
            match rustix::process::Pid::from_raw(pid as i32)
                .map(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()))
            {
                Some(Ok(fd)) => w.peers.push((pe, fd)),
                _ => gone.push(pe),
            }
        }
        (w, gone)
    }

    /// The watched PEs whose processes have exited, ascending. Never blocks.
    pub fn exited(&self) -> Vec<usize> {
        if self.peers.is_empty() {
            return Vec::new();
        }
        let mut fds: Vec<rustix::event::PollFd<'_>> = self
            .peers
            .iter()
            .map(|(_, fd)| rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN))
            .collect();
        let zero = rustix::time::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        match rustix::event::poll(&mut fds, Some(&zero)) {
            Ok(0) | Err(_) => Vec::new(),
            Ok(_) => fds
                .iter()
                .zip(&self.peers)
                .filter(|(p, _)| !p.revents().is_empty())
                .map(|(_, (pe, _))| *pe)
                .collect(),
        }
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
    fn non_temporal_copies_match_memmove_at_every_alignment() {
        let src: Vec<u8> = (0..1200u32).map(|i| (i * 7 + i / 251) as u8).collect();
        for len in (0..300).chain([511, 512, 513, 1000]) {
            for so in 0..9 {
                for dof in 0..70 {
                    let mut dst = vec![0xEEu8; 1200 + 64];
                    // SAFETY: both ranges lie inside their vectors (len + offsets < their lengths) and are disjoint.
                    unsafe { copy_nt(src.as_ptr().add(so), dst.as_mut_ptr().add(dof), len) };
                    assert_eq!(
                        &dst[dof..dof + len],
                        &src[so..so + len],
                        "len {len}, src +{so}, dst +{dof}"
                    );
                    assert!(
                        dst[..dof].iter().all(|&b| b == 0xEE),
                        "before: len {len} +{dof}"
                    );
                    assert!(
                        dst[dof + len..].iter().all(|&b| b == 0xEE),
                        "after: len {len} +{dof}"
                    );
                }
            }
        }
    }

    #[test]
    fn small_copies_match_memmove_at_every_length_and_overlap() {
        let pattern: Vec<u8> = (0..64u32).map(|i| (i * 37 + 11) as u8).collect();
        for len in 0..=16usize {
            // Disjoint, then every overlap of source and destination within one buffer (both directions).
            for (s, d) in (0..=20usize).flat_map(|s| (0..=20usize).map(move |d| (s, d))) {
                let (mut ours, mut want) = (pattern.clone(), pattern.clone());
                // SAFETY: both ranges lie inside the 64-byte buffers (s, d <= 20, len <= 16).
                unsafe {
                    copy_small(ours.as_ptr().add(s), ours.as_mut_ptr().add(d), len);
                    std::ptr::copy(want.as_ptr().add(s), want.as_mut_ptr().add(d), len);
                }
                assert_eq!(ours, want, "len {len}, from {s} to {d}");
            }
            let src = &pattern[3..3 + len];
            let mut dst = vec![0xEEu8; 40];
            // SAFETY: distinct buffers, in bounds.
            unsafe { copy_bytes(src.as_ptr(), dst.as_mut_ptr().add(5), len) };
            assert_eq!(&dst[5..5 + len], src, "len {len}");
            assert!(
                dst[..5].iter().chain(&dst[5 + len..]).all(|&b| b == 0xEE),
                "len {len}: outside the range"
            );
        }
    }

    #[test]
    fn mapped_copies_above_the_cutover_are_exact() {
        let a = Arena::create(1 << 16).expect("memfd");
        let m = Mapping::map(&a, 0, 1 << 16).expect("map");
        set_nt_copy_size(Some(64));
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 253) as u8).collect();
        m.write(3, &data).expect("write");
        let mut back = vec![0u8; 4999];
        m.read(4, &mut back).expect("read");
        assert_eq!(back, data[1..]);
        // Overlapping copy within the mapping: falls back to memmove.
        super::super::Window::copy_from(&m, 10, &m, 3, 4000).expect("copy");
        let mut c = vec![0u8; 4000];
        m.read(10, &mut c).expect("read");
        assert_eq!(c, data[..4000]);
        set_nt_copy_size(None);
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
