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
        let start = Instant::now();
        let mut tries = 0u32;
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
            let (pe, what) = {
                let o = self.op(id);
                (o.pe, o.what)
            };
            self.check_time(start, "waiting for a bounce buffer", pe)?;
            tries = tries.wrapping_add(1);
            if tries % 256 == 0 {
                self.alive(what)?;
            }
            if tries > 64 {
                std::thread::yield_now();
            }
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
