//! Same-node transport over memfd-backed heaps mapped into every PE of the node.
//!
//! Life of a heap: [`Arena::create`] makes a sparse memfd of the heap size (pages are allocated on first touch, so
//! a 1 GiB heap costs nothing until used); [`exchange_fds`] hands every PE of the node every peer's fd over an
//! authenticated abstract Unix socket (no file in `/dev/shm` or anywhere else; see [`crate::sys::fdx`]);
//! [`Mapping::map`] maps each with `MAP_SHARED`. The memory itself (the memfd, the mappings, their bounded
//! accessors) is the platform layer's [`crate::sys::memfd`]; this file makes it a [`super::Window`].

use super::AmoOp;
use crate::error::{Error, Result};
pub use crate::sys::fdx::{exchange_fds, FdListener};
pub use crate::sys::memfd::{Arena, HostMem};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// A peer's (or this PE's) heap or runtime words as a [`super::Window`]: a shared mapping of its memfd.
#[derive(Debug)]
pub struct Mapping(HostMem, Option<Growth>);

/// What a growable heap mapping needs to grow: the memfd it maps, from which byte, and whether this PE owns it
/// (then growing the mapping grows the file first).
#[derive(Debug)]
struct Growth {
    arena: Arena,
    offset: usize,
    own: bool,
}

impl Mapping {
    /// Map `len` bytes of the arena from byte `offset` (a multiple of the page size), shared and read-write.
    pub fn map(arena: &Arena, offset: usize, len: usize) -> Result<Mapping> {
        Mapping::map_with(arena, offset, len, None)
    }

    /// [`Mapping::map`] whose copies of at least `nt_copy_from` bytes use non-temporal stores.
    pub fn map_with(
        arena: &Arena,
        offset: usize,
        len: usize,
        nt_copy_from: Option<usize>,
    ) -> Result<Mapping> {
        HostMem::map(arena, offset, len, nt_copy_from).map(|m| Mapping(m, None))
    }

    /// A heap mapping that grows: `reserve` bytes of address space over the arena from byte `offset`, the first
    /// `len` accessible now, plus the window range `tail` (the data segment), aligned for allocations of up to
    /// `align_len` bytes; `own`: this PE's own heap.
    #[allow(clippy::too_many_arguments)]
    pub fn map_growable(
        arena: &Arena,
        offset: usize,
        len: usize,
        reserve: usize,
        tail: Option<(usize, usize)>,
        align_len: usize,
        own: bool,
        nt_copy_from: Option<usize>,
    ) -> Result<Mapping> {
        let m = HostMem::map_reserved(arena, offset, len, reserve, tail, align_len, nt_copy_from)?;
        let g = Growth {
            arena: arena.try_clone()?,
            offset,
            own,
        };
        Ok(Mapping(m, Some(g)))
    }

    /// Copy `src` into the mapping at `off`.
    #[inline]
    pub fn write(&self, off: usize, src: &[u8]) -> Result<()> {
        self.0.write(off, src)
    }

    /// Copy from the mapping at `off` into `dst`.
    #[inline]
    pub fn read(&self, off: usize, dst: &mut [u8]) -> Result<()> {
        self.0.read(off, dst)
    }

    /// The 32-bit atomic word at `off` (4-byte aligned).
    pub fn atomic32(&self, off: usize) -> Result<&AtomicU32> {
        self.0.atomic32(off)
    }

    /// The 64-bit atomic word at `off` (8-byte aligned).
    #[inline]
    pub fn atomic64(&self, off: usize) -> Result<&AtomicU64> {
        self.0.atomic64(off)
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
        self.0.fill(off, len, byte)
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn contiguous_len(&self) -> usize {
        self.0.contiguous_len()
    }
    fn limit_at(&self, off: usize) -> usize {
        self.0.limit_at(off)
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
        match src.host_mem() {
            Some(h) => self.0.copy_from(off, h, src_off, len),
            None => {
                let mut buf = vec![0u8; len];
                src.read(src_off, &mut buf)?;
                self.write(off, &buf)
            }
        }
    }
    fn copy_from_streamed(
        &self,
        off: usize,
        src: &dyn super::Window,
        src_off: usize,
        len: usize,
    ) -> Result<()> {
        match src.host_mem() {
            Some(h) => self.0.copy_from_streamed(off, h, src_off, len),
            None => self.copy_from(off, src, src_off, len),
        }
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
        self.0.as_ptr()
    }
    fn host_mem(&self) -> Option<&HostMem> {
        Some(&self.0)
    }
    fn host_accessible(&self) -> bool {
        true
    }
    fn grow(&self, len: usize) -> Result<()> {
        match &self.1 {
            Some(g) => {
                if g.own {
                    g.arena.grow_to(g.offset + len)?;
                }
                self.0.grow(&g.arena, g.offset, len)
            }
            None if len <= self.0.len() => Ok(()),
            None => Err(Error::Transport {
                transport: "shm",
                message: format!(
                    "a fixed mapping of {} bytes cannot grow to {len}",
                    self.0.len()
                ),
            }),
        }
    }
}

/// One window per PE (`None` for PEs this transport does not reach).
pub(crate) type Windows = Vec<Option<Box<dyn super::Window>>>;

/// A heap window's address space that could not be reserved, as the setting that sizes it: each PE reserves
/// about four times `XPUSHMEM_SYMMETRIC_MAX` (`heap_max`; `set`: given, not the default) for its own heap and
/// for every node peer's (the world's reserve, the team space after it, the alignment slack), which an
/// address-space limit (`ulimit -v`, or a tool such as valgrind) may not leave room for. Other errors pass.
fn reserve_error(e: Error, heap_max: usize, set: bool) -> Error {
    match e {
        Error::Os {
            call: crate::sys::vmem::RESERVE_CALL,
            message,
        } => Error::Config {
            var: "XPUSHMEM_SYMMETRIC_MAX",
            value: if set {
                heap_max.to_string()
            } else {
                format!("{heap_max} (unset: the default)")
            },
            reason: format!(
                "reserving a heap's address space failed (mmap: {message}): each PE reserves about four times \
                 this for its heap and for each node peer's; under an address-space limit (ulimit -v, valgrind) \
                 set a smaller maximum"
            ),
        },
        e => e,
    }
}

/// The shm transport's part of [`super::connect`]: create this PE's memfd (`sys_bytes` of runtime words, then
/// `host_user` bytes of user heap, the first chunk of `host_reserve`; the data segment, when symmetric, after the
/// reserve), exchange fds with the node's PEs and map each. Returns the arena and, per PE of the node, the window
/// onto its runtime words and (when `host_user > 0`) onto its user heap, which grows up to `host_reserve` bytes
/// ([`super::Window::grow`]). Collective.
pub(crate) fn connect(
    a: &super::ConnectArgs<'_>,
    local: &[usize],
    host_user: usize,
    host_reserve: usize,
    data: &super::dataseg::SymData,
) -> Result<(Arena, Windows, Windows)> {
    let (me, n) = (a.me, a.pids.len());
    // Sparse: the data segment's pages beyond the heap's reserve cost nothing but their own.
    let file = match data.segment() {
        Some(_) => data.window_len(host_reserve),
        None => host_user,
    };
    let arena = Arena::create(a.sys_bytes + file)?;
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
            let tail = data
                .segment()
                .map(|s| (data.offset(), data.offset() + s.len()));
            let window = Mapping::map_growable(
                ar,
                a.sys_bytes,
                host_user,
                data.window_len(host_reserve),
                tail,
                // Twice the maximum: an alignment of up to twice the heap holds at offset 0 (OpenSHMEM's
                // shmem_align of more than the heap, ffi/tests/oshmem/align.c).
                a.heap_max.max(host_user).saturating_mul(2),
                pe == me,
                a.cfg.nt_copy_size.threshold(local.len()),
            )
            .map_err(|e| reserve_error(e, a.heap_max, a.cfg.symmetric_max.is_some()))?;
            heap[pe] = Some(Box::new(window));
        }
    }
    Ok((arena, sys, heap))
}
