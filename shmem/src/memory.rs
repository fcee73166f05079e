//! Collective memory management: `malloc`, `calloc`, `align`, `free`.
//!
//! Each call is collective over all PEs and ends with a barrier. With `XPUSHMEM_CHECK_SYMMETRY=1` (the default)
//! every PE publishes its arguments in its own heap, and after a barrier compares them with PE 0's: a disagreement
//! is an error on every PE, naming the PE, what it passed and what PE 0 passed. The check costs one extra barrier.

use crate::error::{Error, Result};
use crate::runtime::{Shmem, CHECK_WORDS, SYNC};
use crate::types::{SymSlice, Symmetric};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Call {
    Malloc = 1,
    Calloc = 2,
    Align = 3,
    Free = 4,
}

impl Call {
    fn name(self) -> &'static str {
        match self {
            Call::Malloc => "malloc",
            Call::Calloc => "calloc",
            Call::Align => "align",
            Call::Free => "free",
        }
    }
}

fn describe(w: &[u64; CHECK_WORDS]) -> String {
    let call = [Call::Malloc, Call::Calloc, Call::Align, Call::Free]
        .into_iter()
        .find(|c| *c as u64 == w[0])
        .map_or("?", Call::name);
    if w[0] == Call::Free as u64 {
        format!(
            "free(heap offset {:#x}, {} elements of {} bytes)",
            w[3], w[1], w[4]
        )
    } else {
        format!(
            "{call}({} elements of {} bytes, align {})",
            w[1], w[4], w[2]
        )
    }
}

impl Shmem {
    /// Compare this PE's call arguments with every PE's; the same verdict is reached on every PE.
    fn check_collective(&self, words: [u64; CHECK_WORDS], call: Call) -> Result<()> {
        if !self.cfg.check_symmetry || self.n == 1 {
            return Ok(());
        }
        let check = SYNC.check;
        let mut bytes = [0u8; 8 * CHECK_WORDS];
        for (c, w) in bytes.chunks_exact_mut(8).zip(words) {
            c.copy_from_slice(&w.to_le_bytes());
        }
        self.sys_local().write(check, &bytes)?;
        self.sync_all()?;
        let mut all = Vec::with_capacity(self.n);
        for pe in 0..self.n {
            let mut b = [0u8; 8 * CHECK_WORDS];
            self.sys_of(pe, call.name())?.read(check, &mut b)?;
            let mut w = [0u64; CHECK_WORDS];
            for (x, c) in w.iter_mut().zip(b.chunks_exact(8)) {
                *x = u64::from_le_bytes(c.try_into().unwrap_or_default());
            }
            all.push(w);
        }
        // Nobody may overwrite its slot before everyone has read it.
        self.sync_all()?;
        if let Some(pe) = (1..self.n).find(|&pe| all[pe] != all[0]) {
            return Err(Error::Mismatch {
                call: call.name(),
                pe,
                theirs: describe(&all[pe]),
                reference_pe: 0,
                ours: describe(&all[0]),
            });
        }
        Ok(())
    }

    pub(crate) fn alloc_collective<T: Symmetric>(
        &self,
        call: Call,
        len: usize,
        align: usize,
    ) -> Result<SymSlice<T>> {
        let elem = std::mem::size_of::<T>();
        let bytes = len.checked_mul(elem).filter(|&b| b <= self.heap_size).ok_or_else(|| {
            Error::invalid(
                "len",
                len,
                format!("{len} elements of {elem} bytes exceed the heap size {} (XPUSHMEM_SYMMETRIC_SIZE)", self.heap_size),
            )
        });
        // Check arguments first, so that a bad size on one PE is reported as a mismatch on all PEs.
        let words = [call as u64, len as u64, align as u64, 0, elem as u64, 0];
        self.check_collective(words, call)?;
        let bytes = bytes?;
        if !align.is_power_of_two() {
            return Err(Error::invalid("align", align, "must be a power of two"));
        }
        let align = align.max(std::mem::align_of::<T>());
        let off = if bytes == 0 {
            0
        } else {
            let mut heap = self.heap.lock().unwrap_or_else(|p| p.into_inner());
            heap.alloc(bytes, align)
                .ok_or_else(|| Error::HeapExhausted {
                    call: call.name(),
                    requested: bytes,
                    align,
                    heap_size: self.heap_size,
                    in_use: heap.in_use(),
                    largest_free: heap.largest_free(),
                })?
        };
        if call == Call::Calloc && bytes > 0 {
            self.local_map().fill(off, bytes, 0)?;
        }
        tracing::trace!(
            pe = self.me,
            call = call.name(),
            bytes,
            off,
            "symmetric allocation"
        );
        self.barrier_all()?;
        Ok(SymSlice::new(off, len))
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
        self.alloc_collective(Call::Malloc, len, 1)
    }

    /// Allocate `len` zeroed elements of `T` on every PE (collective).
    pub fn calloc<T: Symmetric>(&self, len: usize) -> Result<SymSlice<T>> {
        self.alloc_collective(Call::Calloc, len, 1)
    }

    /// Allocate `len` elements of `T` aligned to `align` bytes (a power of two) on every PE (collective).
    pub fn align<T: Symmetric>(&self, align: usize, len: usize) -> Result<SymSlice<T>> {
        self.alloc_collective(Call::Align, len, align)
    }

    /// Free an allocation (collective; starts with a barrier so no PE still accesses it).
    pub fn free<T: Symmetric>(&self, s: SymSlice<T>) -> Result<()> {
        self.barrier_all()?;
        let words = [
            Call::Free as u64,
            s.len as u64,
            0,
            s.off as u64,
            std::mem::size_of::<T>() as u64,
            0,
        ];
        self.check_collective(words, Call::Free)?;
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
