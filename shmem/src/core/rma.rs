//! Remote memory access: `put`, `get`, `p`, `g`, their non-blocking and strided forms, `fence` and `quiet`.
//!
//! Every operation goes through the target PE's `crate::transport::Window`. A put returns when its source may be
//! reused; it is delivered (visible to the target) by [`Shmem::quiet`] (or a barrier, which quiets first). The
//! non-blocking forms return a [`Pending`] handle that borrows the local buffer until the operation completes;
//! same-node mappings complete at once, a transport that completes later (a network, the deferred test window)
//! completes on `quiet`, on the handle's `wait`, or when the handle is dropped.

pub use crate::core::reg::Registered;
use crate::core::Shmem;
use crate::error::{Error, Result};
use crate::sys::bytes::{bytes_of, bytes_of_mut};
pub use crate::transport::Pending;
use crate::types::{Domain, SymRef, SymSlice, Symmetric};

impl Shmem {
    /// Validate a transfer of `count` elements at `s` (whose length must cover them) on `pe`; the byte offset.
    #[inline]
    pub(crate) fn rma_target<T: Symmetric>(
        &self,
        s: SymSlice<T>,
        count: usize,
        pe: usize,
        call: &str,
    ) -> Result<usize> {
        self.check_pe(pe, call)?;
        if count > s.len {
            return Err(count_error(s, count, call));
        }
        self.check_range(s.off, count * std::mem::size_of::<T>(), call)?;
        Ok(s.off)
    }

    /// Copy `src` to `dst` on `pe` (`src.len()` elements from the start of `dst`). Returns when `src` may be reused.
    ///
    /// ```
    /// # let sh = xpushmem::init_single().unwrap();
    /// let buf = sh.calloc::<i32>(4).unwrap();
    /// sh.put(buf.slice(1..3).unwrap(), &[7, 8], 0).unwrap();
    /// let mut back = [0; 4];
    /// sh.get(&mut back, buf, 0).unwrap();
    /// assert_eq!(back, [0, 7, 8, 0]);
    /// # sh.free(buf).unwrap();
    /// ```
    pub fn put<T: Symmetric>(&self, dst: SymSlice<T>, src: &[T], pe: usize) -> Result<()> {
        self.put_in(Domain::DEFAULT, dst, src, pe)
    }

    /// [`Shmem::put`] in domain `d`.
    #[inline]
    pub(crate) fn put_in<T: Symmetric>(
        &self,
        d: Domain,
        dst: SymSlice<T>,
        src: &[T],
        pe: usize,
    ) -> Result<()> {
        let off = self.rma_target(dst, src.len(), pe, "put")?;
        self.map_of(pe, "put")?.write_in(d, off, bytes_of(src))
    }

    /// Copy `dst.len()` elements from `src` on `pe` into `dst`.
    pub fn get<T: Symmetric>(&self, dst: &mut [T], src: SymSlice<T>, pe: usize) -> Result<()> {
        let off = self.rma_target(src, dst.len(), pe, "get")?;
        self.map_of(pe, "get")?.read(off, bytes_of_mut(dst))
    }

    /// Copy this PE's symmetric `src` into `dst` on `pe` (`src.len()` elements), without staging through a
    /// private buffer: one `memcpy` between mapped heaps, or one copy-engine transfer on device heaps.
    pub fn put_sym<T: Symmetric>(
        &self,
        dst: SymSlice<T>,
        src: SymSlice<T>,
        pe: usize,
    ) -> Result<()> {
        let off = self.rma_target(dst, src.len, pe, "put_sym")?;
        self.check_range(src.off, src.size_bytes(), "put_sym (source)")?;
        self.map_of(pe, "put_sym")?
            .copy_from(off, self.local_map(), src.off, src.size_bytes())
    }

    /// Start a copy of this PE's symmetric `src` into `dst` on `pe` (`src.len()` elements): the non-blocking
    /// [`Shmem::put_sym`]. The transport may read `src` in place until the handle (or `quiet`) completes, so it
    /// must not change before: over the fabric a large source is posted from the registered heap without a copy,
    /// like a raw libfabric write from registered memory (a private source's non-blocking put is copied, since
    /// safe code may forget its handle and free the buffer).
    pub fn put_sym_nbi<T: Symmetric>(
        &self,
        dst: SymSlice<T>,
        src: SymSlice<T>,
        pe: usize,
    ) -> Result<Pending<'_>> {
        let off = self.rma_target(dst, src.len, pe, "put_sym_nbi")?;
        self.check_range(src.off, src.size_bytes(), "put_sym_nbi (source)")?;
        let t = self.map_of(pe, "put_sym_nbi")?.copy_from_nbi(
            off,
            self.local_map(),
            src.off,
            src.size_bytes(),
        )?;
        self.pending_put(t, pe, "put_sym_nbi")
    }

    /// Copy `src` on `pe` into this PE's symmetric `dst` (`dst.len()` elements), without staging.
    pub fn get_sym<T: Symmetric>(
        &self,
        dst: SymSlice<T>,
        src: SymSlice<T>,
        pe: usize,
    ) -> Result<()> {
        self.get_sym_as(dst, src, pe, false)
    }

    /// [`Shmem::get_sym`] for one copy of a call whose copies into this PE together leave its share of the node's
    /// caches ([`Shmem::streamed_call_from`]; the op family's large all-to-alls): between mapped heaps it is made
    /// with non-temporal stores from 64 KiB, which skip reading the destination's lines before overwriting them
    /// and leave the caches to data that is read again; elsewhere it is [`Shmem::get_sym`].
    pub fn get_sym_streamed<T: Symmetric>(
        &self,
        dst: SymSlice<T>,
        src: SymSlice<T>,
        pe: usize,
    ) -> Result<()> {
        self.get_sym_as(dst, src, pe, true)
    }

    /// [`Shmem::get_sym`] (`streamed`: [`Shmem::get_sym_streamed`]).
    fn get_sym_as<T: Symmetric>(
        &self,
        dst: SymSlice<T>,
        src: SymSlice<T>,
        pe: usize,
        streamed: bool,
    ) -> Result<()> {
        let (op, what) = if streamed {
            ("get_sym_streamed", "get_sym_streamed (destination)")
        } else {
            ("get_sym", "get_sym (destination)")
        };
        let off = self.rma_target(src, dst.len, pe, op)?;
        self.check_range(dst.off, dst.size_bytes(), what)?;
        let (to, from) = (self.local_map(), self.map_of(pe, op)?);
        if streamed {
            to.copy_from_streamed(dst.off, from, off, dst.size_bytes())
        } else {
            to.copy_from(dst.off, from, off, dst.size_bytes())
        }
    }

    /// The bytes a call's copies into this PE must reach together for [`Shmem::get_sym_streamed`] to pay:
    /// `XPUSHMEM_NT_COPY_SIZE=auto`'s [`crate::config::NtCopyFrom::call_threshold`] for the PEs on this node;
    /// `None` (never) with an explicit size or `off`.
    pub fn streamed_call_from(&self) -> Option<usize> {
        let local = self.nodes().pe_count(self.nodes().node_of(self.my_pe()));
        self.config().nt_copy_size.call_threshold(local)
    }

    /// Store one element on `pe`.
    pub fn p<T: Symmetric>(&self, dst: SymRef<T>, value: T, pe: usize) -> Result<()> {
        self.put(dst.as_slice(), &[value], pe)
    }

    /// Load one element from `pe`.
    pub fn g<T: Symmetric>(&self, src: SymRef<T>, pe: usize) -> Result<T> {
        let mut v = [T::default()];
        self.get(&mut v, src.as_slice(), pe)?;
        Ok(v[0])
    }

    /// Start a put; `src` stays borrowed until the returned handle completes. A private `src` is copied where the
    /// transport completes later (over the fabric); one in a registered buffer ([`Shmem::register`]) is read in
    /// place, so it must not change until the handle or [`Shmem::quiet`] completes (a [`crate::rma::Registered`]
    /// sees to that).
    pub fn put_nbi<'a, T: Symmetric>(
        &'a self,
        dst: SymSlice<T>,
        src: &'a [T],
        pe: usize,
    ) -> Result<Pending<'a>> {
        self.put_nbi_in(Domain::DEFAULT, dst, src, pe)
    }

    /// [`Shmem::put_nbi`] in domain `d`.
    pub(crate) fn put_nbi_in<'a, T: Symmetric>(
        &'a self,
        d: Domain,
        dst: SymSlice<T>,
        src: &'a [T],
        pe: usize,
    ) -> Result<Pending<'a>> {
        let off = self.rma_target(dst, src.len(), pe, "put_nbi")?;
        let t = self.put_nbi_bytes(d, off, bytes_of(src), pe, "put_nbi")?;
        self.pending_put(t, pe, "put_nbi")
    }

    /// The handle of a put started on `pe` whose ticket is `t` (`None`: completed at issue, a mapped peer,
    /// nothing for a transport to complete).
    fn pending_put(
        &self,
        t: Option<crate::transport::Ticket>,
        pe: usize,
        call: &str,
    ) -> Result<Pending<'_>> {
        match t {
            None => Ok(Pending::done()),
            Some(t) => Ok(Pending::new(self.transport_of(pe, call)?, Some(t), None)),
        }
    }

    /// Start a get; `dst` stays borrowed until the returned handle completes. Over the fabric the bytes arrive in
    /// a buffer of the runtime and are copied into `dst` on completion, or, into a registered buffer, in place.
    pub fn get_nbi<'a, T: Symmetric>(
        &'a self,
        dst: &'a mut [T],
        src: SymSlice<T>,
        pe: usize,
    ) -> Result<Pending<'a>> {
        self.get_nbi_in(Domain::DEFAULT, dst, src, pe)
    }

    /// [`Shmem::get_nbi`] in domain `d`.
    pub(crate) fn get_nbi_in<'a, T: Symmetric>(
        &'a self,
        d: Domain,
        dst: &'a mut [T],
        src: SymSlice<T>,
        pe: usize,
    ) -> Result<Pending<'a>> {
        let off = self.rma_target(src, dst.len(), pe, "get_nbi")?;
        let dst = bytes_of_mut(dst);
        let (Some(t), in_place) = self.get_nbi_bytes(d, off, dst, pe, "get_nbi")? else {
            // Completed at issue: `dst` holds the bytes already.
            return Ok(Pending::done());
        };
        let tr = self.transport_of(pe, "get_nbi")?;
        // In place (a registered buffer): the transport writes `dst` itself.
        Ok(Pending::new(tr, Some(t), (!in_place).then_some(dst)))
    }

    /// Strided put: element `i` of the transfer goes from `src[i * src_stride]` to `dst[i * dst_stride]` on `pe`,
    /// for `i < nelems`. Strides are in elements and at least 1.
    pub fn iput<T: Symmetric>(
        &self,
        dst: SymSlice<T>,
        src: &[T],
        dst_stride: usize,
        src_stride: usize,
        nelems: usize,
        pe: usize,
    ) -> Result<()> {
        self.iput_in(
            Domain::DEFAULT,
            dst,
            src,
            dst_stride,
            src_stride,
            nelems,
            pe,
        )
    }

    /// [`Shmem::iput`] in domain `d`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn iput_in<T: Symmetric>(
        &self,
        d: Domain,
        dst: SymSlice<T>,
        src: &[T],
        dst_stride: usize,
        src_stride: usize,
        nelems: usize,
        pe: usize,
    ) -> Result<()> {
        let (dspan, sspan) = strided_spans(dst_stride, src_stride, nelems)?;
        check_local_span(sspan, src.len(), "iput source")?;
        let off = self.rma_target(dst, dspan, pe, "iput")?;
        let e = std::mem::size_of::<T>();
        self.map_of(pe, "iput")?.write_strided_in(
            d,
            off,
            dst_stride,
            bytes_of(src),
            src_stride,
            e,
            nelems,
        )
    }

    /// Strided get: element `i` of the transfer goes from `src[i * src_stride]` on `pe` to
    /// `dst[i * dst_stride]`, for `i < nelems`.
    pub fn iget<T: Symmetric>(
        &self,
        dst: &mut [T],
        src: SymSlice<T>,
        dst_stride: usize,
        src_stride: usize,
        nelems: usize,
        pe: usize,
    ) -> Result<()> {
        let (dspan, sspan) = strided_spans(dst_stride, src_stride, nelems)?;
        check_local_span(dspan, dst.len(), "iget destination")?;
        let off = self.rma_target(src, sspan, pe, "iget")?;
        let e = std::mem::size_of::<T>();
        self.map_of(pe, "iget")?.read_strided(
            off,
            src_stride,
            bytes_of_mut(dst),
            dst_stride,
            e,
            nelems,
        )
    }

    /// Order: puts, AMOs and signals issued before the fence to any one PE are delivered before those issued after
    /// it to that PE, in the default domain (another domain's: [`crate::domain::OnDomain::fence`]).
    pub fn fence(&self) -> Result<()> {
        self.fence_in(Domain::DEFAULT)
    }

    /// Complete every put, AMO and signal this PE has issued in the default domain (and every non-blocking
    /// operation of it); [`Shmem::quiet_all`] completes every domain's.
    pub fn quiet(&self) -> Result<()> {
        self.quiet_in(Domain::DEFAULT)
    }

    /// [`Shmem::fence`] in domain `d` (not checked to be open).
    pub(crate) fn fence_in(&self, d: Domain) -> Result<()> {
        self.peers.transports().try_for_each(|t| t.fence(d))
    }

    /// [`Shmem::quiet`] in domain `d` (not checked to be open).
    pub(crate) fn quiet_in(&self, d: Domain) -> Result<()> {
        self.peers.transports().try_for_each(|t| t.quiet(d))
    }

    /// Complete every put, AMO and signal this PE has issued, in every domain: what finalize and the heap-wide
    /// operations need.
    pub fn quiet_all(&self) -> Result<()> {
        self.peers.transports().try_for_each(|t| t.quiet_all())
    }
}

/// The error of a transfer longer than its symmetric slice (out of line: the check is on every operation's path).
#[cold]
#[inline(never)]
fn count_error<T: Symmetric>(s: SymSlice<T>, count: usize, call: &str) -> Error {
    Error::OutOfBounds {
        what: "element count",
        start: 0,
        len: count,
        limit: s.len,
        context: format!("{call} into {s:?}"),
    }
}

fn strided_spans(dst_stride: usize, src_stride: usize, nelems: usize) -> Result<(usize, usize)> {
    if dst_stride == 0 {
        return Err(Error::invalid(
            "dst_stride",
            0,
            "strides are in elements and must be at least 1",
        ));
    }
    if src_stride == 0 {
        return Err(Error::invalid(
            "src_stride",
            0,
            "strides are in elements and must be at least 1",
        ));
    }
    if nelems == 0 {
        return Ok((0, 0));
    }
    // An overflow names the stride that causes it, with its value (nelems alone never overflows here).
    let span = |stride: usize, name: &'static str| {
        (nelems - 1)
            .checked_mul(stride)
            .and_then(|x| x.checked_add(1))
            .ok_or_else(|| {
                Error::invalid(
                    name,
                    stride,
                    format!("{nelems} elements every {stride} elements span more than the address space"),
                )
            })
    };
    Ok((
        span(dst_stride, "dst_stride")?,
        span(src_stride, "src_stride")?,
    ))
}

fn check_local_span(need: usize, have: usize, what: &str) -> Result<()> {
    if need > have {
        return Err(Error::OutOfBounds {
            what: "element count",
            start: 0,
            len: need,
            limit: have,
            context: what.to_string(),
        });
    }
    Ok(())
}
