//! Collective memory management: `malloc`, `calloc`, `align`, `free`.
//!
//! Each call is collective over all PEs: a call on `TEAM_WORLD` that starts with the team's agreement (its
//! identity and arguments travel inside the synchronisation, no extra round trip) and, for allocations, ends with a
//! barrier. A PE that passes different arguments (with `XPUSHMEM_CHECK_SYMMETRY=1`, the default), or that is in
//! another collective altogether, makes the call fail on every PE with the same error, naming the PE, what it
//! passed and what PE 0 passed; the heap is then unchanged.
//!
//! The heap grows at the agreement. Every PE runs the same allocator over the same reserved offset space
//! (`[0, heap_max)`), so every PE finds the same offset and, when the allocation ends past the mapped part, the
//! same new size (the end rounded up to a multiple of the first chunk, `XPUSHMEM_SYMMETRIC_SIZE`). Each PE grows
//! its own heap (and registers the new chunk with the fabric, where one is in use), then one bootstrap exchange
//! publishes every PE's outcome and chunk keys, after which each PE reaches the peers' new parts: no PE touches a
//! peer's new chunk before it exists, and a PE that cannot grow fails the call on every PE. Growth is eager at
//! the agreement rather than lazy on first touch: every access checks its range against the window's length
//! anyway, and a fault handler (lazy mapping) would put a signal handler into every process that links the
//! library.

use crate::bootstrap::{Dec, Enc};
use crate::core::Shmem;
use crate::error::{Error, Result};
use crate::team::{BarrierAlgo, CallId, COMMON, INFO};
use crate::types::{SymSlice, Symmetric};
use std::sync::atomic::Ordering;

/// Identity words of an allocation call (see `team::describe`).
fn alloc_words(call: CallId, len: usize, align: usize, off: usize, elem: usize) -> [u64; COMMON] {
    let mut w = call.words();
    w[3] = len as u64;
    w[4] = align as u64;
    w[5] = off as u64;
    w[6] = elem as u64;
    w
}

impl Shmem {
    /// A collective allocation over all PEs. `ident`: the identity words the agreement carries (the allocation's
    /// own, or those of the call that needs the allocation); `op`: the call named in errors.
    pub(crate) fn alloc_collective<T: Symmetric>(
        &self,
        ident: [u64; COMMON],
        len: usize,
        align: usize,
        zero: bool,
        op: &'static str,
    ) -> Result<SymSlice<T>> {
        let elem = std::mem::size_of::<T>();
        let max = self.heap_max();
        let local = len
            .checked_mul(elem)
            .filter(|&b| b <= max)
            .ok_or_else(|| {
                Error::invalid(
                    "len",
                    len,
                    format!(
                        "{len} elements of {elem} bytes exceed the heap's limit {max} bytes ({})",
                        self.heap_limit()
                    ),
                )
            })
            .and_then(|b| {
                if align.is_power_of_two() {
                    Ok(b)
                } else {
                    Err(Error::invalid("align", align, "must be a power of two"))
                }
            });
        let mut ctx = self.teams().world_ctx(self, op);
        // A bad size on one PE is reported as a mismatch on the others.
        ctx.enter(
            ident,
            [0; INFO],
            local.as_ref().map(|_| ()).map_err(Clone::clone),
            false,
        )?;
        let bytes = local?;
        let align = align.max(std::mem::align_of::<T>());
        let off = if bytes == 0 {
            0
        } else {
            let mut heap = self.heap.lock().unwrap_or_else(|p| p.into_inner());
            let off = heap
                .alloc(bytes, align)
                .ok_or_else(|| Error::HeapExhausted {
                    call: op,
                    requested: bytes,
                    align,
                    heap_size: max,
                    limit: self.heap_limit(),
                    in_use: heap.in_use(),
                    largest_free: heap.largest_free(),
                })?;
            drop(heap);
            if let Err(e) = self.grow(off + bytes, op) {
                self.heap
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .free(off);
                return Err(e);
            }
            off
        };
        if zero && bytes > 0 {
            self.local_map().fill(off, bytes, 0)?;
        }
        tracing::trace!(pe = self.me, call = op, bytes, off, "symmetric allocation");
        ctx.barrier(BarrierAlgo::Dissemination)?;
        Ok(SymSlice::new(off, len))
    }

    /// What limits the heap, for errors: the variable to raise.
    fn heap_limit(&self) -> &'static str {
        let max = self.heap_max();
        if self.cfg.symmetric_max == Some(max) {
            "XPUSHMEM_SYMMETRIC_MAX"
        } else if max == self.cfg.symmetric_size {
            "XPUSHMEM_SYMMETRIC_SIZE: device heaps and heaps reached through the fabric do not grow"
        } else {
            "the address space reserved for the heap; XPUSHMEM_SYMMETRIC_MAX sets it"
        }
    }

    /// Grow the heap on every PE so that its first `end` bytes are mapped (nothing when they are): to `end`
    /// rounded up to a multiple of the first chunk, at most the maximum (the same on every PE, which all run this
    /// with the same `end`). Each PE grows its own heap (and registers the new chunk with the fabric), then one
    /// exchange publishes every PE's outcome and chunk: a PE that could not grow fails the call on every PE,
    /// naming it; else each PE adopts the others' chunks and reaches their new parts.
    fn grow(&self, end: usize, op: &'static str) -> Result<()> {
        let from = self.heap_size();
        if end <= from {
            return Ok(());
        }
        let chunk = self.cfg.symmetric_size.max(1);
        let new = end
            .checked_next_multiple_of(chunk)
            .unwrap_or(usize::MAX)
            .min(self.heap_max());
        let mine = self.peers.grow_own(from, new);
        let rec = match &mine {
            Ok(r) => Enc::default().u64(1).bytes(r).0,
            Err(e) => Enc::default().u64(0).bytes(e.to_string().as_bytes()).0,
        };
        let all = self.boot.allgather(&rec)?;
        mine?;
        let mut chunks = Vec::with_capacity(all.len());
        for (pe, r) in all.iter().enumerate() {
            let mut d = Dec(r);
            let bad = || Error::Transport {
                transport: "heap",
                message: format!("{op}: a malformed growth record from PE {pe}"),
            };
            let ok = d.u64().ok_or_else(bad)?;
            let body = d.bytes().ok_or_else(bad)?;
            if ok != 1 {
                return Err(Error::Transport {
                    transport: "heap",
                    message: format!(
                        "{op}: PE {pe} could not grow its symmetric heap from {from} to {new} bytes: {}",
                        String::from_utf8_lossy(body)
                    ),
                });
            }
            chunks.push(body.to_vec());
        }
        self.peers.grow_peers(new, &chunks)?;
        self.heap_size.fetch_max(new, Ordering::AcqRel);
        tracing::debug!(pe = self.me, heap_bytes = new, "symmetric heap grown");
        Ok(())
    }

    fn alloc_call<T: Symmetric>(
        &self,
        call: CallId,
        len: usize,
        align: usize,
    ) -> Result<SymSlice<T>> {
        let words = alloc_words(call, len, align, 0, std::mem::size_of::<T>());
        self.alloc_collective(words, len, align, call == CallId::Calloc, call.name())
    }

    /// Allocate `len` elements of `T` on every PE (collective; same `len` everywhere). Contents are unspecified.
    /// A zero-length request returns an empty slice and allocates nothing.
    ///
    /// ```
    /// # let sh = xpushmem::init_single().unwrap();
    /// let buf = sh.malloc::<f64>(1024).unwrap();
    /// sh.put(buf, &[1.0; 1024], sh.my_pe()).unwrap();
    /// sh.free(buf).unwrap();
    /// ```
    pub fn malloc<T: Symmetric>(&self, len: usize) -> Result<SymSlice<T>> {
        self.alloc_call(CallId::Malloc, len, 1)
    }

    /// Allocate `len` zeroed elements of `T` on every PE (collective).
    pub fn calloc<T: Symmetric>(&self, len: usize) -> Result<SymSlice<T>> {
        self.alloc_call(CallId::Calloc, len, 1)
    }

    /// Allocate `len` elements of `T` aligned to `align` bytes (a power of two) on every PE (collective).
    pub fn align<T: Symmetric>(&self, align: usize, len: usize) -> Result<SymSlice<T>> {
        self.alloc_call(CallId::Align, len, align)
    }

    /// Free an allocation (collective; starts with a barrier so no PE still accesses it).
    pub fn free<T: Symmetric>(&self, s: SymSlice<T>) -> Result<()> {
        let words = alloc_words(CallId::Free, s.len, 0, s.off, std::mem::size_of::<T>());
        self.teams()
            .world_ctx(self, "free")
            .enter(words, [0; INFO], Ok(()), false)?;
        if s.len == 0 {
            return Ok(());
        }
        let mut heap = self.heap.lock().unwrap_or_else(|p| p.into_inner());
        heap.free(s.off).map(|_| ()).ok_or_else(|| {
            Error::invalid(
                "s",
                format!("{s:?}"),
                "does not start a live symmetric allocation (freed twice, or a sub-slice?)",
            )
        })
    }

    /// Bytes of the heap currently allocated (the runtime's own words included).
    pub fn heap_in_use(&self) -> usize {
        self.heap.lock().unwrap_or_else(|p| p.into_inner()).in_use()
    }
}
