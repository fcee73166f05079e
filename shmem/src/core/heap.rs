//! The deterministic symmetric-heap allocator.
//!
//! Every PE runs the same allocator over the same offset space and sees the same sequence of collective calls, so
//! every PE computes the same offset: `remote = base[pe] + offset`. First fit over an ordered free list, with
//! coalescing on free. No memory is touched here: the allocator deals in offsets only.

use std::collections::BTreeMap;

/// Smallest alignment and size granule of every allocation (a cache line).
pub const MIN_ALIGN: usize = 64;

/// Offsets allocator over `[0, size)`.
#[derive(Debug, Clone)]
pub struct Allocator {
    /// offset -> length of each free block; blocks never touch (they are coalesced).
    free: BTreeMap<usize, usize>,
    /// offset -> length of each allocated block.
    used: BTreeMap<usize, usize>,
    in_use: usize,
}

impl Allocator {
    /// An allocator over `size` bytes (rounded down to the granule).
    pub fn new(size: usize) -> Allocator {
        let size = size / MIN_ALIGN * MIN_ALIGN;
        let mut free = BTreeMap::new();
        if size > 0 {
            free.insert(0, size);
        }
        Allocator {
            free,
            used: BTreeMap::new(),
            in_use: 0,
        }
    }

    /// Bytes allocated (rounded to the granule).
    pub fn in_use(&self) -> usize {
        self.in_use
    }

    /// The largest free block.
    pub fn largest_free(&self) -> usize {
        self.free.values().copied().max().unwrap_or(0)
    }

    /// Allocate `bytes` (> 0) at a multiple of `align` (a power of two). `None` when nothing fits.
    pub fn alloc(&mut self, bytes: usize, align: usize) -> Option<usize> {
        let off = self.fit_from(0, bytes, align)?;
        self.alloc_at(off, bytes)
    }

    /// Where [`Allocator::alloc`] would place `bytes` (> 0) aligned to `align` (a power of two) at or after
    /// offset `hint` (first fit), without allocating. `None` when nothing fits there.
    pub fn fit_from(&self, hint: usize, bytes: usize, align: usize) -> Option<usize> {
        debug_assert!(bytes > 0 && align.is_power_of_two());
        let align = align.max(MIN_ALIGN);
        let len = bytes.checked_next_multiple_of(MIN_ALIGN)?;
        self.free.iter().find_map(|(&start, &block)| {
            let off = start.max(hint).checked_next_multiple_of(align)?;
            (off.checked_add(len)? <= start + block).then_some(off)
        })
    }

    /// Allocate `bytes` (> 0) at exactly `off` (a multiple of the granule): `Some(off)`, or `None` when that range
    /// is not free.
    pub fn alloc_at(&mut self, off: usize, bytes: usize) -> Option<usize> {
        let len = bytes.checked_next_multiple_of(MIN_ALIGN)?;
        if off % MIN_ALIGN != 0 {
            return None;
        }
        let (&start, &block) = self.free.range(..=off).next_back()?;
        if off.checked_add(len)? > start + block {
            return None;
        }
        self.free.remove(&start);
        if off > start {
            self.free.insert(start, off - start);
        }
        let tail = start + block - (off + len);
        if tail > 0 {
            self.free.insert(off + len, tail);
        }
        self.used.insert(off, len);
        self.in_use += len;
        Some(off)
    }

    /// Free the allocation starting at `off`; its length, or `None` when `off` starts no allocation.
    pub fn free(&mut self, off: usize) -> Option<usize> {
        let len = self.used.remove(&off)?;
        self.in_use -= len;
        let mut start = off;
        let mut end = off + len;
        if let Some((&ps, &pl)) = self.free.range(..off).next_back() {
            if ps + pl == off {
                self.free.remove(&ps);
                start = ps;
            }
        }
        if let Some(&nl) = self.free.get(&end) {
            self.free.remove(&end);
            end += nl;
        }
        self.free.insert(start, end - start);
        Some(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn first_fit_and_coalescing() {
        let mut a = Allocator::new(1024);
        let x = a.alloc(100, 1).unwrap();
        let y = a.alloc(64, 1).unwrap();
        assert_eq!((x, y), (0, 128));
        assert_eq!(a.alloc(4096, 1), None);
        assert_eq!(a.free(x), Some(128));
        assert_eq!(a.free(x), None);
        assert_eq!(a.alloc(64, 1), Some(0));
        assert_eq!(a.alloc(256, 256), Some(256));
        assert_eq!(a.in_use(), 64 + 64 + 256);
        // Placing at or after a hint (the hole at 64 ends before a granule past 100 fits), and at an exact offset.
        assert_eq!(a.fit_from(100, 64, 1), Some(192));
        assert_eq!(a.alloc_at(192, 64), Some(192));
        assert_eq!(a.alloc_at(192, 64), None, "taken");
        assert_eq!(a.alloc_at(512, 1024), None, "past the end");
        assert_eq!(a.fit_from(900, 200, 1), None);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Alloc(usize, u32),
        Free(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (1usize..5000, 0u32..12).prop_map(|(n, a)| Op::Alloc(n, a)),
            (0usize..64).prop_map(Op::Free),
        ]
    }

    proptest! {
        /// Allocations never overlap, stay in bounds and aligned; freeing everything restores one free block;
        /// two allocators fed the same calls agree (determinism).
        #[test]
        fn allocations_are_disjoint_aligned_and_deterministic(ops in prop::collection::vec(op(), 1..200)) {
            let mut a = Allocator::new(1 << 16);
            let mut b = Allocator::new(1 << 16);
            let mut live: Vec<(usize, usize)> = Vec::new();
            for o in ops {
                match o {
                    Op::Alloc(n, al) => {
                        let align = 1usize << al;
                        let r = a.alloc(n, align);
                        prop_assert_eq!(r, b.alloc(n, align));
                        if let Some(off) = r {
                            prop_assert_eq!(off % align.max(MIN_ALIGN), 0);
                            prop_assert!(off + n <= 1 << 16);
                            for &(s, l) in &live {
                                prop_assert!(off + n <= s || s + l <= off, "overlap");
                            }
                            live.push((off, n));
                        }
                    }
                    Op::Free(i) if !live.is_empty() => {
                        let (off, _) = live.remove(i % live.len());
                        prop_assert!(a.free(off).is_some());
                        prop_assert!(b.free(off).is_some());
                    }
                    Op::Free(_) => {}
                }
                let total: usize = live.iter().map(|&(_, n)| n.next_multiple_of(MIN_ALIGN)).sum();
                prop_assert_eq!(a.in_use(), total);
            }
            for (off, _) in live {
                a.free(off);
            }
            prop_assert_eq!(a.largest_free(), 1 << 16);
        }
    }
}
