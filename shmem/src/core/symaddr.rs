//! The one translation between local addresses and symmetric offsets.
//!
//! A PE's symmetric space is its heap, offsets `[0, heap_size)`, and, when the executable's data segment is
//! symmetric (the OpenSHMEM layer, `InitAttr::symmetric_data`), the data segment at offsets
//! `[data_offset, data_offset + data_len)` (see `transport::dataseg`). Every window maps both, so an offset names
//! the same object on every PE whatever the local addresses (ASLR, PIE) are. A range never straddles the two.

use crate::core::Shmem;
use crate::error::{Error, Result};
use crate::types::{SymSlice, Symmetric};

impl Shmem {
    /// The heap, then the data segment if symmetric, then the mapped part of the team-scoped allocations' space:
    /// `(local start, window offset, length)` of each.
    fn regions(&self) -> [Option<(usize, usize, usize)>; 3] {
        let base = self.heap_base() as usize;
        [
            Some((base, 0, self.heap_size())),
            self.data
                .segment()
                .map(|d| (d.start(), self.data.offset(), d.len())),
            self.team_region().map(|(o, len)| (base + o, o, len)),
        ]
    }

    /// The team-scoped allocations' space as this PE has mapped it: `(window offset, length)`.
    fn team_region(&self) -> Option<(usize, usize)> {
        let o = self.peers.team_base()?;
        Some((
            o,
            self.team_mapped.load(std::sync::atomic::Ordering::Acquire),
        ))
    }

    /// The local bounds `[start, end)` of the executable's data segment when it is symmetric.
    pub fn data_segment(&self) -> Option<(usize, usize)> {
        self.data
            .segment()
            .map(|d| (d.start(), d.start() + d.len()))
    }

    /// Validate that `[off, off + bytes)` lies in one symmetric region (the heap or the data segment).
    #[inline]
    pub(crate) fn check_range(&self, off: usize, bytes: usize, call: &str) -> Result<()> {
        // The heap comes first: a range that ends inside it needs no look at the data segment.
        if off
            .checked_add(bytes)
            .is_some_and(|e| e <= self.heap_size())
        {
            return Ok(());
        }
        self.check_range_slow(off, bytes, call)
    }

    /// [`Shmem::check_range`] beyond the heap's end: inside the data segment, or the error.
    #[cold]
    #[inline(never)]
    fn check_range_slow(&self, off: usize, bytes: usize, call: &str) -> Result<()> {
        let (start, limit, what) = match (self.regions()[1], self.team_region()) {
            (Some((_, o, len)), _) if off >= o => (o, o + len, "data segment range"),
            (_, Some((o, len))) if off >= o => (o, o + len, "team allocation range"),
            _ => (0, self.heap_size(), "heap range"),
        };
        if off.checked_add(bytes).is_none_or(|e| e > limit) {
            return Err(Error::OutOfBounds {
                what,
                start: off - start,
                len: bytes,
                limit: limit - start,
                context: call.to_string(),
            });
        }
        Ok(())
    }

    /// Bytes from symmetric offset `off` to the end of its region (0 outside every region).
    pub fn sym_room(&self, off: usize) -> usize {
        self.regions()
            .into_iter()
            .flatten()
            .find(|&(_, o, len)| off >= o && off - o < len)
            .map_or(0, |(_, o, len)| o + len - off)
    }

    /// The local address of symmetric offset `off` (in this PE's heap or data segment).
    pub fn sym_addr(&self, off: usize) -> usize {
        match self.regions()[1] {
            Some((start, o, _)) if off >= o => start + (off - o),
            _ => self.heap_base() as usize + off,
        }
    }

    /// The local address of the first element of `s` on this PE.
    pub fn local_ptr<T: Symmetric>(&self, s: SymSlice<T>) -> *mut T {
        self.sym_addr(s.off) as *mut T
    }

    /// A typed symmetric slice from a local address inside the heap (what `malloc` returned, or a pointer into it)
    /// or, when symmetric, the executable's data segment (a global or static variable): an error when the address
    /// is in neither, misaligned for `T`, or the range runs past the end of its region.
    pub fn sym_slice_from_addr<T: Symmetric>(
        &self,
        addr: usize,
        len: usize,
    ) -> Result<SymSlice<T>> {
        self.sym_slice_in(addr, len, 1, &|| {
            format!("sym_slice_from_addr::<{}>", T::NAME)
        })
    }

    /// [`Shmem::sym_slice_from_addr`] with an extra alignment and the caller's description for errors.
    pub fn sym_slice_in<T: Symmetric>(
        &self,
        addr: usize,
        len: usize,
        align: usize,
        context: &dyn Fn() -> String,
    ) -> Result<SymSlice<T>> {
        let Some((start, off, rlen)) = self
            .regions()
            .into_iter()
            .flatten()
            .find(|&(s, _, l)| addr >= s && addr - s < l)
        else {
            let base = self.heap_base() as usize;
            let hint = match self.data_segment() {
                Some((s, e)) => format!(
                    "; the executable's global and static variables [{s:#x}, {e:#x}) are symmetric too, but not \
                     those of shared libraries, thread-locals, the stack or C malloc memory"
                ),
                None => "; global and static variables are symmetric only when the OpenSHMEM layer (shmem_init) \
                          started the runtime on a host heap"
                    .into(),
            };
            return Err(Error::NotSymmetric {
                addr,
                base,
                end: base + self.heap_size(),
                context: format!("{}{hint}", context()),
            });
        };
        let align = align.max(std::mem::align_of::<T>());
        if addr % align != 0 {
            return Err(Error::invalid(
                "addr",
                format!("{addr:#x}"),
                format!(
                    "{}: must be aligned to {align} bytes for {}",
                    context(),
                    T::NAME
                ),
            ));
        }
        let bytes = len.saturating_mul(std::mem::size_of::<T>());
        if bytes > rlen - (addr - start) {
            return Err(Error::OutOfBounds {
                what: if off == 0 {
                    "heap range"
                } else {
                    "data segment range"
                },
                start: addr - start,
                len: bytes,
                limit: rlen,
                context: context(),
            });
        }
        Ok(SymSlice::new(off + (addr - start), len))
    }

    /// The address at which `pe`'s copy of `s` can be loaded from and stored to directly by this process
    /// (OpenSHMEM's `shmem_ptr`); `None` when `pe` is not on this node. For this PE, the object's own address.
    ///
    /// With a device heap (`XPUSHMEM_HEAP=device`) the address is a Level Zero device address (this PE's own
    /// allocation, or a peer's opened through IPC): kernels on this PE's device and copy commands may use it, but
    /// on a GPU the CPU must not dereference it (ze-emu's device memory happens to be host memory; Intel's driver's
    /// is not). Use [`Shmem::put`]/[`Shmem::get`] from the host.
    pub fn ptr<T: Symmetric>(&self, s: SymSlice<T>, pe: usize) -> Result<Option<*mut T>> {
        self.check_pe(pe, "ptr")?;
        self.check_range(s.off, s.size_bytes(), "ptr")?;
        if pe == self.my_pe() {
            return Ok(Some(self.local_ptr(s)));
        }
        Ok(self
            .peers
            .heap(pe)
            .filter(|m| !m.base().is_null())
            .map(|m| m.base().wrapping_add(s.off).cast()))
    }
}
