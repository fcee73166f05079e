//! The bounce buffers of large puts ([`Slabs`]): taken, registered, reused and freed.
use super::*;

/// The bounce buffers of large puts: power-of-two sizes from [`SLAB_MIN`] to [`SLAB_MAX`], allocated on first
/// use and registered once each when the provider needs local registration, kept for reuse (most recently freed
/// first: warm in the cache) up to [`SLAB_CAP`] bytes in all. Reusing them spares every large put the page faults
/// and zeroing of fresh memory, which cost the sender more than the copy itself.
#[derive(Default)]
pub(super) struct Slabs {
    /// By id (a [`Ctx::slab`]); `None`: an id free for reuse.
    pub(crate) bufs: Vec<Option<Slab>>,
    /// Free buffers by size class.
    pub(crate) free: Vec<Vec<u32>>,
    /// Ids whose buffer was released.
    pub(crate) holes: Vec<u32>,
    /// Bytes of every buffer (in flight or free).
    pub(crate) bytes: usize,
}

pub(super) struct Slab {
    pub(crate) buf: Box<[u64]>,
    pub(crate) class: usize,
    /// Its registration (with `FI_MR_LOCAL`).
    pub(crate) mr: Option<LocalMr>,
}

impl Ep {
    /// Copy `src` into bounce buffers and post each as a part of operation `id` (to `off` of `region`): one part
    /// up to [`SLAB_MAX`] bytes.
    pub(super) fn slab_parts(
        &mut self,
        id: u64,
        region: Region,
        off: usize,
        src: &[u8],
    ) -> Result<()> {
        let part = SLAB_MAX.min(self.max_msg);
        for (k, chunk) in src.chunks(part).enumerate() {
            let s = self.take_slab(id, chunk.len())?;
            let (base, desc) = {
                let Some(slab) = self.slabs.bufs.get_mut(s as usize).and_then(|b| b.as_mut())
                else {
                    return Err(Error::State(format!(
                        "fabric: bounce buffer {s} taken for a put to PE {} is not allocated",
                        self.op(id).pe
                    )));
                };
                bytes_of_mut(&mut slab.buf)[..chunk.len()].copy_from_slice(chunk);
                let desc = slab.mr.as_ref().map_or(std::ptr::null_mut(), |m| m.desc);
                (slab.buf.as_ptr() as usize, desc)
            };
            self.write_parts(id, region, off + k * part, base, chunk.len(), desc, s)?;
        }
        Ok(())
    }

    /// A free bounce buffer of at least `len` bytes (at most [`SLAB_MAX`]) for operation `id`: a cached one of
    /// its size, else a new one while [`SLAB_CAP`] allows (dropping cached buffers of other sizes to make room),
    /// else the first one a completion frees, driving progress meanwhile.
    pub(super) fn take_slab(&mut self, id: u64, len: usize) -> Result<u32> {
        let log = len.max(1).next_power_of_two().trailing_zeros();
        let class = log.saturating_sub(SLAB_MIN_LOG) as usize;
        let size = 1usize << (class as u32 + SLAB_MIN_LOG);
        if self.slabs.free.len() <= class {
            self.slabs.free.resize_with(class + 1, Vec::new);
        }
        // Polls spin 64 times, then yield (never sleep: this PE's polls free the buffers).
        let mut backoff = polling_backoff(64, self.timeout);
        loop {
            if let Some(s) = self.slabs.free[class].pop() {
                return Ok(s);
            }
            // Room for a new buffer: drop cached buffers of other sizes while the cap is in the way.
            while self.slabs.bytes + size > SLAB_CAP {
                let Some(s) = self.slabs.free.iter_mut().find_map(|f| f.pop()) else {
                    break;
                };
                self.drop_slab(s);
            }
            if self.slabs.bytes + size <= SLAB_CAP {
                return self.new_slab(class, size);
            }
            // Every byte of the cap is in flight: completions free buffers.
            self.poll()?;
            self.pause_for(&mut backoff, id, "waiting for a bounce buffer")?;
        }
    }

    /// Allocate (and register, with `FI_MR_LOCAL`) a bounce buffer of `size` bytes, size class `class`.
    pub(super) fn new_slab(&mut self, class: usize, size: usize) -> Result<u32> {
        let buf = vec![0u64; size / 8].into_boxed_slice();
        let mut mr = None;
        if self.mr_local {
            let mut m = std::ptr::null_mut();
            // SAFETY: the domain is open; the buffer's heap block stays in place (a boxed slice, never resized)
            // until `drop_slab` or `Drop for Ep` (after the endpoint) closes this registration and frees it.
            let r = unsafe {
                fi::xfi_mr_reg(
                    self.domain,
                    buf.as_ptr().cast(),
                    size,
                    (fi::FI_READ | fi::FI_WRITE) as u64,
                    0,
                    0,
                    0,
                    &mut m,
                    std::ptr::null_mut(),
                )
            };
            ok(&self.prov, "fi_mr_reg (bounce buffer)", r as i64)?;
            // SAFETY: `m` was just opened.
            let desc = unsafe { fi::xfi_mr_desc(m) };
            mr = Some(LocalMr { mr: m, desc });
        }
        let slab = Slab { buf, class, mr };
        self.slabs.bytes += size;
        if let Some(s) = self.slabs.holes.pop() {
            self.slabs.bufs[s as usize] = Some(slab);
            return Ok(s);
        }
        self.slabs.bufs.push(Some(slab));
        Ok((self.slabs.bufs.len() - 1) as u32)
    }

    /// Release free bounce buffer `s` (its registration, then its memory).
    pub(super) fn drop_slab(&mut self, s: u32) {
        if let Some(slab) = self.slabs.bufs[s as usize].take() {
            if let Some(m) = slab.mr {
                // SAFETY: the buffer is free (no part in flight reads it); its registration is closed once.
                unsafe { fi::xfi_close(&mut (*m.mr).fid) };
            }
            self.slabs.bytes -= slab.buf.len() * 8;
            self.slabs.holes.push(s);
        }
    }

    /// Give bounce buffer `s` back for reuse (a no-op for [`NO_SLAB`]).
    pub(super) fn free_slab(&mut self, s: u32) {
        if let Some(Some(slab)) = self.slabs.bufs.get(s as usize) {
            let c = slab.class;
            self.slabs.free[c].push(s);
        }
    }
}

/// Bits of an operation id that name its slot in [`Ops`]; the bits above count operations (a sequence number, so
/// that ids order operations by issue; it wraps after 2^38 operations, and an id names its operation only while
/// that operation is in flight or its result or error waits for its ticket).
pub(super) const SLOT_BITS: u32 = 24;
/// The sequence numbers of operation ids (below [`INJECT_BIT`] and [`RECV_BIT`]).
const SEQ_MASK: u64 = (1 << (62 - SLOT_BITS)) - 1;

/// Bytes of operation buffers the free slots of [`Ops`] keep for reuse at most (a burst of operations in flight
/// leaves as many slots; their buffers beyond this are freed).
const OPS_KEEP: usize = 1 << 20;

/// The operations in flight, in a slab: a slot per operation, reused once it finishes (with its buffer's
/// allocation, up to [`OPS_KEEP`] bytes over all free slots), found from its id without hashing. Ids are
/// `sequence << SLOT_BITS | slot`, never 0.
#[derive(Default)]
pub(super) struct Ops {
    slots: Vec<(u64, Op)>,
    free: Vec<u32>,
    live: usize,
    seq: u64,
    /// Bytes of the buffers the free slots keep.
    kept: usize,
}

impl Ops {
    /// A free slot, its id and its operation (the previous occupant's, to be reset by the caller); an error when
    /// 2^[`SLOT_BITS`] operations are in flight.
    pub(super) fn alloc(&mut self) -> Result<(u64, &mut Op)> {
        let slot = match self.free.pop() {
            Some(s) => s as usize,
            None if self.slots.len() < 1 << SLOT_BITS => {
                self.slots.push((0, Op::empty()));
                self.slots.len() - 1
            }
            None => {
                return Err(Error::State(format!(
                    "fabric: {} operations in flight, the most this endpoint tracks",
                    self.slots.len()
                )))
            }
        };
        self.seq = (self.seq + 1) & SEQ_MASK;
        let id = (self.seq.max(1) << SLOT_BITS) | slot as u64;
        self.live += 1;
        let s = &mut self.slots[slot];
        s.0 = id;
        self.kept -= s.1.buf.capacity() * 8;
        Ok((id, &mut s.1))
    }

    fn slot(id: u64) -> usize {
        (id & ((1 << SLOT_BITS) - 1)) as usize
    }

    /// Operation `id` while it is in flight.
    pub(super) fn get(&self, id: u64) -> Option<&Op> {
        match self.slots.get(Self::slot(id)) {
            Some((i, op)) if *i == id && id != 0 => Some(op),
            _ => None,
        }
    }

    /// Operation `id` while it is in flight.
    pub(super) fn get_mut(&mut self, id: u64) -> Option<&mut Op> {
        match self.slots.get_mut(Self::slot(id)) {
            Some((i, op)) if *i == id && id != 0 => Some(op),
            _ => None,
        }
    }

    /// End operation `id`: its slot (and its buffer's allocation) is free for the next one.
    pub(super) fn free(&mut self, id: u64) {
        let slot = Self::slot(id);
        if let Some(s) = self.slots.get_mut(slot).filter(|s| s.0 == id && id != 0) {
            s.0 = 0;
            let bytes = s.1.buf.capacity() * 8;
            if self.kept + bytes > OPS_KEEP {
                s.1.buf = Vec::new();
            } else {
                self.kept += bytes;
            }
            self.live -= 1;
            self.free.push(slot as u32);
        }
    }

    /// Take operation `id` out of the slab for good (its buffer moves with it: an endpoint shut down keeps it).
    pub(super) fn take(&mut self, id: u64) -> Option<Op> {
        let op = std::mem::replace(self.get_mut(id)?, Op::empty());
        self.free(id);
        Some(op)
    }

    /// Whether no operation is in flight.
    pub(super) fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The ids of the operations in flight.
    pub(super) fn ids(&self) -> Vec<u64> {
        self.slots.iter().map(|s| s.0).filter(|&i| i != 0).collect()
    }

    /// The operations in flight.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Op> {
        self.slots.iter_mut().filter(|s| s.0 != 0).map(|s| &mut s.1)
    }
}

/// The contexts of operations' parts ([`Ctx`]), each boxed (libfabric holds its address until the part's
/// completion) and reused: taken when a part is posted, given back when its completion (or error) is read.
#[derive(Default)]
pub(super) struct Ctxs {
    /// Boxed: libfabric holds a context's address until its completion, and the Vec may reallocate.
    #[allow(clippy::vec_box)]
    all: Vec<Box<Ctx>>,
    free: Vec<u32>,
}

impl Ctxs {
    /// A free context for a part of operation `id` holding bounce buffer `slab`, `counted` by the write counter.
    pub(super) fn take(&mut self, id: u64, slab: u32, counted: bool) -> *mut Ctx {
        let i = match self.free.pop() {
            Some(i) => i as usize,
            None => {
                self.all.push(Box::new(Ctx {
                    raw: fi::fi_context2::default(),
                    id: 0,
                    slab: NO_SLAB,
                    counted: false,
                    index: self.all.len() as u32,
                }));
                self.all.len() - 1
            }
        };
        let c = &mut self.all[i];
        c.raw = fi::fi_context2::default();
        c.id = id;
        c.slab = slab;
        c.counted = counted;
        &mut **c
    }

    /// Whether `p` is one of these contexts (a scan: asked of error completions only, [`Ep::ctx_fields`]).
    pub(super) fn owns(&self, p: *const Ctx) -> bool {
        self.all.iter().any(|c| std::ptr::eq(&**c, p))
    }

    /// Context `index` is free again (its part completed, or was never posted).
    pub(super) fn give(&mut self, index: u32) {
        if (index as usize) < self.all.len() {
            self.free.push(index);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completion_context_is_ours_only_when_it_is_one_of_ours() {
        let mut pool = Ctxs::default();
        let a = pool.take(1, NO_SLAB, false);
        let b = pool.take(2, NO_SLAB, true);
        assert!(pool.owns(a) && pool.owns(b));
        // A context given back stays the pool's (libfabric may still report the part it was posted with).
        pool.give(0);
        assert!(pool.owns(a));
        // What a provider might report instead: its own buffer, or a pointer into one of ours.
        let theirs = Box::new([0u64; 16]);
        assert!(!pool.owns(theirs.as_ptr().cast()));
        assert!(!pool.owns((a as usize + 8) as *const Ctx));
        let receives = msg::Inbox::new([0; 2]);
        for c in receives.ctxs.iter() {
            assert!(receives.owns(c));
            assert!(!pool.owns(c));
        }
        let first = receives.ctxs.as_ptr();
        assert!(!receives.owns((first as usize + 8) as *const Ctx));
        assert!(!receives.owns(first.wrapping_add(receives.ctxs.len())));
        assert!(!receives.owns(first.wrapping_sub(1)));
        assert!(!receives.owns(a) && !receives.owns(theirs.as_ptr().cast()));
    }

    #[test]
    fn op_ids_name_their_slot_only_while_it_is_theirs() {
        let mut ops = Ops::default();
        let a = ops.alloc().unwrap().0;
        let b = ops.alloc().unwrap().0;
        let c = ops.alloc().unwrap().0;
        assert!(
            a != 0 && a < b && b < c,
            "ids order operations by issue: {a} {b} {c}"
        );
        assert_eq!(a & INJECT_BIT, 0);
        assert_eq!(a & RECV_BIT, 0);
        ops.free(b);
        assert!(
            ops.get(b).is_none(),
            "a finished operation's id names nothing"
        );
        let d = ops.alloc().unwrap().0;
        assert_eq!(
            d & ((1 << SLOT_BITS) - 1),
            b & ((1 << SLOT_BITS) - 1),
            "the free slot is reused"
        );
        assert_ne!(d, b, "under a new id");
        assert!(ops.get(b).is_none() && ops.get(d).is_some());
        // An id no slot holds (a forged staging reply's, say) finds nothing.
        assert!(ops.get(u64::MAX >> 2).is_none() && ops.get(0).is_none());
        let mut ids = ops.ids();
        ids.sort_unstable();
        assert_eq!(ids, vec![a, c, d]);
        for id in [a, c, d] {
            ops.free(id);
        }
        assert!(ops.is_empty());
    }

    #[test]
    fn free_slots_keep_a_bounded_amount_of_buffers() {
        let mut ops = Ops::default();
        let words = 64 * 1024; // 512 KiB each
        let ids: Vec<u64> = (0..4)
            .map(|_| {
                let (id, op) = ops.alloc().unwrap();
                op.buf.resize(words, 0);
                id
            })
            .collect();
        for id in ids {
            ops.free(id);
        }
        let kept: usize = ops.slots.iter().map(|s| s.1.buf.capacity() * 8).sum();
        assert!(kept <= OPS_KEEP, "{kept} bytes kept");
        assert_eq!(kept, ops.kept);
        assert!(kept >= words * 8, "some buffer is kept for reuse");
    }
}
