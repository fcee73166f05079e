//! Collective memory management: `malloc`, `calloc`, `align`, `free`.
//!
//! Each call is collective over all PEs: a call on `TEAM_WORLD` that starts with the team's agreement (its
//! identity and arguments travel inside the synchronisation, no extra round trip) and, for allocations, ends with a
//! barrier. A PE that passes different arguments (with `XPUSHMEM_CHECK_SYMMETRY=1`, the default), or that is in
//! another collective altogether, makes the call fail on every PE with the same error, naming the PE, what it
//! passed and what PE 0 passed; the heap is then unchanged.

use crate::core::Shmem;
use crate::error::{Error, Result};
use crate::team::{BarrierAlgo, CallId, COMMON, INFO};
use crate::types::{SymSlice, Symmetric};

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
        let local = len
            .checked_mul(elem)
            .filter(|&b| b <= self.heap_size)
            .ok_or_else(|| {
                Error::invalid(
                    "len",
                    len,
                    format!(
                        "{len} elements of {elem} bytes exceed the heap size {} (XPUSHMEM_SYMMETRIC_SIZE)",
                        self.heap_size
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
            heap.alloc(bytes, align)
                .ok_or_else(|| Error::HeapExhausted {
                    call: op,
                    requested: bytes,
                    align,
                    heap_size: self.heap_size,
                    in_use: heap.in_use(),
                    largest_free: heap.largest_free(),
                })?
        };
        if zero && bytes > 0 {
            self.local_map().fill(off, bytes, 0)?;
        }
        tracing::trace!(pe = self.me, call = op, bytes, off, "symmetric allocation");
        ctx.barrier(BarrierAlgo::Dissemination)?;
        Ok(SymSlice::new(off, len))
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
