//! Posting operations: puts (copied, or in place from the registered heap), gets, atomics, each as parts with
//! contexts libfabric holds until their completion; the retry while the provider's queue is full; the
//! endpoint's shutdown.
use super::*;

impl Ep {
    /// A new operation on `pe` in domain `d` with `words` words of buffer, tracked from now on with one guard part
    /// (dropped by [`Ep::release`] once every part is posted): completions read while it is being posted find it.
    pub(super) fn start(
        &mut self,
        pe: usize,
        d: Domain,
        what: &'static str,
        words: usize,
    ) -> Result<u64> {
        let (id, op) = self.ops.alloc()?;
        // The slot's previous buffer is reused (zeroed: a get's or an atomic's unused bytes read as zero).
        op.buf.clear();
        op.buf.resize(words.max(1), 0);
        op.parts_left = 1;
        op.pe = pe;
        op.domain = d;
        op.what = what;
        op.get_len = None;
        op.result_at = None;
        op.amo_at = 0;
        op.staged = false;
        op.mr = None;
        op.then = None;
        op.tell = 0;
        self.per_pe[pe] += 1;
        *self.per_domain.at(d) += 1;
        Ok(id)
    }

    pub(super) fn op(&mut self, id: u64) -> &mut Op {
        match self.ops.get_mut(id) {
            Some(o) => o,
            None => unreachable!("an operation being posted holds a guard part"),
        }
    }

    /// Register operation `id`'s buffer when the provider needs local registration; its descriptor.
    pub(super) fn local_desc(&mut self, id: u64) -> Result<*mut c_void> {
        if !self.mr_local {
            return Ok(std::ptr::null_mut());
        }
        if let Some(m) = &self.op(id).mr {
            return Ok(m.desc);
        }
        let (ptr, len) = {
            let b = &self.op(id).buf;
            (b.as_ptr(), b.len() * 8)
        };
        let mut mr = std::ptr::null_mut();
        // SAFETY: the domain is open; the buffer is the operation's Vec, whose heap block stays put (the Vec is
        // never resized after posting starts) until `finish` closes this registration.
        let r = unsafe {
            fi::xfi_mr_reg(
                self.domain,
                ptr.cast(),
                len,
                (fi::FI_READ | fi::FI_WRITE) as u64,
                0,
                0,
                0,
                &mut mr,
                std::ptr::null_mut(),
            )
        };
        ok(&self.prov, "fi_mr_reg (operation buffer)", r as i64)?;
        // SAFETY: `mr` was just opened.
        let desc = unsafe { fi::xfi_mr_desc(mr) };
        self.op(id).mr = Some(LocalMr { mr, desc });
        Ok(desc)
    }

    /// Post one part of operation `id` with `post` (given its context), retrying while the provider's queue is
    /// full. The part holds bounce buffer `slab` ([`NO_SLAB`]: none) until it completes; a part that cannot be
    /// posted frees it at once.
    pub(super) fn post(
        &mut self,
        id: u64,
        call: &str,
        slab: u32,
        post: impl FnMut(*mut c_void) -> isize,
    ) -> Result<()> {
        let r = self.post_ctx(id, call, slab, post);
        if r.is_err() {
            self.free_slab(slab);
        }
        r
    }

    pub(super) fn post_ctx(
        &mut self,
        id: u64,
        call: &str,
        slab: u32,
        mut post: impl FnMut(*mut c_void) -> isize,
    ) -> Result<()> {
        if self.closed.is_some() {
            return Err(self.closed_err());
        }
        let counted = call == "fi_writemsg" || call == "fi_atomicmsg";
        let cp = self.ctxs.take(id, slab, counted);
        // SAFETY: `cp` points into a boxed context of the pool, alive as long as the endpoint.
        let index = unsafe { (*cp).index };
        // The back-off (and the clock) only once the provider pushes back (most posts go at once).
        let mut backoff: Option<Backoff> = None;
        loop {
            let r = post(cp.cast());
            if r == -(fi::FI_EAGAIN as isize) {
                // The transmit queue is full (or the connection is being made): completions free it.
                let waited = self.poll().and_then(|()| {
                    let limit = self.timeout;
                    let b = backoff.get_or_insert_with(|| polling_backoff(0, limit));
                    self.pause_for(b, id, call)
                });
                if let Err(e) = waited {
                    self.ctxs.give(index);
                    return Err(e);
                }
                continue;
            }
            if r < 0 {
                self.ctxs.give(index);
                let o = self.op(id);
                let (pe, what) = (o.pe, o.what);
                return Err(Error::Transport {
                    transport: "fabric",
                    message: format!(
                        "{call} ({what}) to PE {pe} failed on provider {}: {} ({r})",
                        self.prov,
                        strerror(r as i64)
                    ),
                });
            }
            self.op(id).parts_left += 1;
            if !self.answers.is_empty() {
                // Behind this PE's own operation: the answers of signals it applied meanwhile.
                self.answer();
            }
            return Ok(());
        }
    }

    /// Pause a wait of operation `id` that drives this endpoint's progress (`b`: a [`polling_backoff`], asked
    /// to keep polling) and, when checks are due, fail with the lost peer, then with the timeout of `call`.
    pub(super) fn pause_for(&mut self, b: &mut Backoff, id: u64, call: &str) -> Result<()> {
        if b.pause(|| true) {
            let (pe, what) = self.pe_what(id);
            self.alive(what)?;
            if let Some(waited) = b.expired() {
                return Err(self.timeout_error(call, pe, waited));
            }
        }
        Ok(())
    }

    /// The PE and the name of operation `id`.
    pub(super) fn pe_what(&mut self, id: u64) -> (usize, &'static str) {
        let o = self.op(id);
        (o.pe, o.what)
    }

    /// The PE to name when the connection to `pe` broke: the one the bootstrap reports lost when it knows of one.
    /// A PE that died makes the survivors leave, and a slower survivor's connection to one that has already left
    /// breaks too; the job lost the dead PE, not the one that finalized. The bootstrap's news may trail the broken
    /// connection by a moment, so it is asked twice.
    pub(super) fn lost_first(&self, pe: usize) -> usize {
        for attempt in 0..2 {
            if attempt > 0 {
                // A grace pause before asking again, not a wait for a condition (so no `Backoff`).
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            if let Err(Error::PeerLost { pe: first, .. }) = (self.liveness)() {
                return first;
            }
        }
        pe
    }

    /// An error when the bootstrap knows of a lost peer: a peer that died may never answer (a provider need not
    /// report operations queued for a connection it cannot make).
    pub(crate) fn alive(&mut self, what: &str) -> Result<()> {
        match (self.liveness)() {
            Ok(()) => Ok(()),
            Err(Error::PeerLost { pe, me, op }) => {
                self.lost = true;
                Err(Error::PeerLost {
                    pe,
                    me,
                    op: format!("{what} over fabric provider {} ({op})", self.prov),
                })
            }
            Err(e) => {
                self.lost = true;
                Err(e)
            }
        }
    }

    /// The error of a wait (or retry) that took longer than the limit.
    pub(crate) fn check_time(&self, start: Instant, what: &str, pe: usize) -> Result<()> {
        if let Some(limit) = self.timeout {
            let waited = start.elapsed();
            if waited > limit {
                return Err(self.timeout_error(what, pe, waited));
            }
        }
        Ok(())
    }

    /// The timeout of `what` to PE `pe` (`usize::MAX`: none) after `waited`.
    pub(crate) fn timeout_error(&self, what: &str, pe: usize, waited: Duration) -> Error {
        let whom = if pe == usize::MAX {
            String::new()
        } else {
            format!(" to PE {pe}")
        };
        Error::Timeout {
            op: format!("{what}{whom} over fabric provider {}", self.prov),
            waited,
            limit: self.timeout.unwrap_or_default(),
            detail: String::new(),
        }
    }

    /// End the posting of operation `id`: on error its posted parts still complete, but nothing follows them.
    pub(super) fn posted(&mut self, id: u64, r: Result<()>) -> Result<u64> {
        if r.is_err() {
            self.op(id).then = None;
        }
        self.release(id);
        r.map(|()| id)
    }

    /// Put `src` into `region` at `off` of PE `pe`, then (once delivered) `signal`. A large source is copied into
    /// bounce buffers (one part up to [`SLAB_MAX`]); a smaller one into the operation's own buffer. (A source in
    /// the registered heap goes through [`Ep::put_direct`] instead when the caller waits for it: blocking puts.)
    pub(crate) fn put(
        &mut self,
        pe: usize,
        d: Domain,
        region: Region,
        off: usize,
        src: &[u8],
        signal: Option<Signal>,
    ) -> Result<u64> {
        self.put_told(pe, d, region, off, src, signal, 0)
    }

    /// [`Ep::put`], its writes told to the target as put `tell`'s ([`Told`]; 0: not told, a told put never
    /// injected).
    #[allow(clippy::too_many_arguments)]
    fn put_told(
        &mut self,
        pe: usize,
        d: Domain,
        region: Region,
        off: usize,
        src: &[u8],
        signal: Option<Signal>,
        tell: u64,
    ) -> Result<u64> {
        let what = if signal.is_some() || tell != 0 {
            "put_signal"
        } else {
            "put"
        };
        self.stats.puts_copied += 1;
        self.stats.put_bytes_copied += src.len() as u64;
        if signal.is_none() && tell == 0 && !src.is_empty() && src.len() <= self.inject_max {
            return self.inject(pe, d, region, off, src);
        }
        // The signal right after the data when the provider keeps them in order, else once the data is delivered.
        let (then, now) = match signal {
            Some(s) if src.len() <= self.waw_max => (None, Some(s)),
            s => (s.map(|s| (region, s)), None),
        };
        let id;
        let mut r;
        if src.len() >= SLAB_MIN {
            id = self.start(pe, d, what, 3)?;
            self.op(id).then = then;
            self.op(id).tell = tell;
            r = self.slab_parts(id, region, off, src);
        } else {
            let data_words = src.len().div_ceil(8);
            id = self.start(pe, d, what, data_words + 3)?;
            {
                let o = self.op(id);
                bytes_of_mut(&mut o.buf)[..src.len()].copy_from_slice(src);
                o.amo_at = data_words;
                o.then = then;
                o.tell = tell;
            }
            r = self.local_desc(id).and_then(|desc| {
                let base = self.op(id).buf.as_ptr() as usize;
                self.write_parts(id, region, off, base, src.len(), desc, NO_SLAB)
            });
        }
        if let (Ok(()), Some(s)) = (&r, now) {
            r = self.post_amo(id, region, s.sig, 8, s.op, s.value, false);
        }
        self.posted(id, r)
    }

    /// The flags of writes and non-fetching atomics: `FI_DELIVERY_COMPLETE` when the provider offers it (their
    /// completion then means the target applied them).
    pub(super) fn write_flags(&self) -> u64 {
        if self.delivery_complete {
            fi::FI_DELIVERY_COMPLETE as u64
        } else {
            0
        }
    }

    /// Put `src` (at most [`Ep::inject_max`] bytes) to `off` of `region` of PE `pe` with `FI_INJECT`: no context,
    /// no completion entry, counted by the write counter ([`Injects`]). Its ticket is [`INJECT_BIT`] and its
    /// sequence number.
    fn inject(
        &mut self,
        pe: usize,
        d: Domain,
        region: Region,
        off: usize,
        src: &[u8],
    ) -> Result<u64> {
        if self.closed.is_some() {
            return Err(self.closed_err());
        }
        let flags = self.write_flags() | fi::FI_INJECT as u64;
        let iov = fi::iovec {
            iov_base: src.as_ptr() as *mut c_void,
            iov_len: src.len(),
        };
        let rma = fi::fi_rma_iov {
            addr: region.addr + off as u64,
            len: src.len(),
            key: region.key,
        };
        let mut desc: *mut c_void = std::ptr::null_mut();
        let msg = fi::fi_msg_rma {
            msg_iov: &iov,
            desc: &mut desc,
            iov_count: 1,
            addr: self.addrs[pe],
            rma_iov: &rma,
            rma_iov_count: 1,
            context: std::ptr::null_mut(),
            data: 0,
        };
        let mut backoff: Option<Backoff> = None;
        loop {
            // SAFETY: the endpoint is open; with FI_INJECT the provider copies the source before it returns, and
            // `msg` and what it points to live across the call.
            let r = unsafe { fi::xfi_writemsg(self.ep, &msg, flags) };
            if r == -(fi::FI_EAGAIN as isize) {
                // The same retry as a part's ([`Ep::post_ctx`]).
                self.poll()?;
                let limit = self.timeout;
                let b = backoff.get_or_insert_with(|| polling_backoff(0, limit));
                if b.pause(|| true) {
                    self.alive("put")?;
                    if let Some(waited) = b.expired() {
                        return Err(self.timeout_error("fi_writemsg (put, injected)", pe, waited));
                    }
                }
                continue;
            }
            if r < 0 {
                return Err(Error::Transport {
                    transport: "fabric",
                    message: format!(
                        "fi_writemsg (put, injected) to PE {pe} failed on provider {}: {} ({r})",
                        self.prov,
                        strerror(r as i64)
                    ),
                });
            }
            let inj = &mut self.inj;
            inj.issued += 1;
            inj.last_pe[pe] = inj.issued;
            *inj.last_domain.at(d) = inj.issued;
            return Ok(INJECT_BIT | inj.issued);
        }
    }

    /// The local descriptor of `[addr, addr + len)` when it lies in this PE's registered host heap.
    pub(super) fn heap_desc(&self, addr: usize, len: usize) -> Option<*mut c_void> {
        let end = addr.checked_add(len)?;
        self.heap
            .iter()
            .find(|h| addr >= h.base && end <= h.base + h.len)
            .map(|h| h.desc)
    }

    /// Put the `len` bytes at `addr` (where [`Ep::direct`] allowed it: this PE's registered heap, or private memory
    /// when the provider reads unregistered memory) into `region` at `off` of PE `pe` without copying them. The
    /// provider reads the source until the operation completes, so the caller waits for it before the source may
    /// change, and shuts the endpoint down ([`Ep::shutdown`]) when that wait ends with the write outstanding and
    /// the source is the caller's (a window's non-blocking puts promise to copy: their callers, collectives among
    /// them, may reuse the source at once).
    pub(crate) fn put_direct(
        &mut self,
        pe: usize,
        d: Domain,
        region: Region,
        off: usize,
        addr: usize,
        len: usize,
    ) -> (u64, Result<()>) {
        self.put_direct_told(pe, d, region, off, addr, len, 0)
    }

    /// [`Ep::put_direct`], its writes told to the target as put `tell`'s ([`Told`]; 0: not told).
    #[allow(clippy::too_many_arguments)]
    fn put_direct_told(
        &mut self,
        pe: usize,
        d: Domain,
        region: Region,
        off: usize,
        addr: usize,
        len: usize,
        tell: u64,
    ) -> (u64, Result<()>) {
        let desc = self
            .heap_desc(addr, len)
            .or_else(|| self.user_desc(addr, len))
            .unwrap_or(std::ptr::null_mut());
        self.stats.puts_in_place += 1;
        let id = match self.start(pe, d, "put", 1) {
            Ok(id) => id,
            Err(e) => return (0, Err(e)),
        };
        self.op(id).tell = tell;
        let r = self.write_parts(id, region, off, addr, len, desc, NO_SLAB);
        (id, self.posted(id, r).map(|_| ()))
    }

    /// Whether a put-with-signal of `len` bytes and signal operation `op` to a peer's host memory goes as told
    /// writes and a signal message ([`Ep::told_copied`], [`Ep::told_direct`]): too large for one message ([`Ep::am_signal`]), over a
    /// provider that reports a write's remote completion data to its target, and `op` is a signal's.
    pub(crate) fn tells(&self, len: usize, op: AmoOp) -> bool {
        self.tell && len > self.am_signal_max && self.signal_by_message(len, op)
    }

    /// A put-with-signal to PE `pe`'s host memory as told writes ([`Told`]) of `src`, copied, to `off` of
    /// `region`, then signal `s` (its offset in `region`) as a message right behind them, which the target applies
    /// once they landed. The signal's operation (the writes' complete on their own, by a quiet).
    pub(crate) fn told_copied(
        &mut self,
        pe: usize,
        d: Domain,
        region: Region,
        off: usize,
        src: &[u8],
        s: Signal,
    ) -> Result<u64> {
        self.told_put(pe, d, region, off, s, |ep, tell| {
            ep.put_told(pe, d, region, off, src, None, tell).map(|_| ())
        })
    }

    /// [`Ep::told_copied`] from the `len` bytes at `addr` without a copy (where [`Ep::direct`] allowed it, as
    /// [`Ep::put_direct`]): the writes' operation, which the caller waits for before the source may change, and
    /// whether the writes and the signal were posted.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn told_direct(
        &mut self,
        pe: usize,
        d: Domain,
        region: Region,
        off: usize,
        addr: usize,
        len: usize,
        s: Signal,
    ) -> (u64, Result<()>) {
        let mut id = 0;
        let r = self.told_put(pe, d, region, off, s, |ep, tell| {
            let (w, r) = ep.put_direct_told(pe, d, region, off, addr, len, tell);
            id = w;
            r
        });
        (id, r.map(|_| ()))
    }

    /// A told put-with-signal: `writes` posts its writes under a fresh number (counted in `told.posted`), then
    /// the signal message naming them goes right behind them; the signal's operation. Answers due meanwhile wait
    /// until both are posted (they would go between the writes and the signal).
    #[allow(clippy::too_many_arguments)]
    fn told_put(
        &mut self,
        pe: usize,
        d: Domain,
        region: Region,
        off: usize,
        s: Signal,
        writes: impl FnOnce(&mut Ep, u64) -> Result<()>,
    ) -> Result<u64> {
        let tell = self.told.next();
        self.told.posted = 0;
        let held = std::mem::take(&mut self.answers);
        let r = writes(self, tell).and_then(|()| {
            self.stats.put_signals_after_writes += 1;
            let n = self.told.posted;
            self.signal_message(pe, d, region, off, &[], s, (tell, n))
        });
        self.answers.extend(held);
        self.answer();
        r
    }

    /// The error of every operation once the endpoint was shut down.
    pub(crate) fn closed_err(&self) -> Error {
        Error::Transport {
            transport: "fabric",
            message: format!(
                "the endpoint of PE {} on provider {} was closed after {}; no operation over the fabric is \
                 possible any more",
                self.me,
                self.prov,
                self.closed.as_deref().unwrap_or("an earlier failure")
            ),
        }
    }

    /// Close the endpoint for good (`fi_close`), so that the provider drops every reference to the buffers of
    /// the operations still outstanding (a zero-copy put's source is the caller's memory, which the caller may
    /// free once the put returned, even with an error). `why` is named by every later error ([`Ep::closed_err`]);
    /// the outstanding operations fail with it, and their contexts and buffers are kept until `Drop for Ep`. A
    /// provider that refuses to close the endpoint would go on reading freed memory: the process aborts instead.
    pub(crate) fn shutdown(&mut self, why: String) {
        if self.ep.is_null() || self.closed.is_some() {
            return;
        }
        tracing::error!(pe = self.me, "closing the fabric endpoint: {why}");
        // SAFETY: the endpoint is open (non-null, closed only here or in `Drop`, after which it is null); the
        // objects bound to it (completion queue, address vector, registrations) outlive it.
        let r = unsafe { fi::xfi_close(&mut (*self.ep).fid) };
        if r != 0 {
            eprintln!(
                "xpushmem: PE {}: fi_close of the endpoint failed on provider {} ({}) after {why}: the provider may \
                 still read a buffer its caller is about to free; aborting",
                self.me,
                self.prov,
                strerror(r as i64)
            );
            std::process::abort();
        }
        self.ep = std::ptr::null_mut();
        self.closed = Some(why);
        self.lost = true;
        let err = self.closed_err();
        self.injects_failed(err.clone());
        self.inj.settled = self.inj.issued;
        for id in self.ops.ids() {
            if let Some(op) = self.ops.take(id) {
                self.per_pe[op.pe] = self.per_pe[op.pe].saturating_sub(1);
                self.domain_done(op.domain);
                self.error_domains.insert(id, op.domain);
                self.errors.entry(id).or_insert_with(|| err.clone());
                self.abandoned.push(op);
            }
        }
    }

    /// Post writes of the `len` bytes at local address `base` (described by `desc`) to `off` of `region` as parts
    /// of operation `id`, one per `max_msg` bytes; `slab` is the bounce buffer they read ([`NO_SLAB`]: none; a
    /// bounce buffer's bytes always fit one part).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn write_parts(
        &mut self,
        id: u64,
        region: Region,
        off: usize,
        base: usize,
        len: usize,
        desc: *mut c_void,
        slab: u32,
    ) -> Result<()> {
        let (pe, tell) = {
            let o = self.op(id);
            (o.pe, o.tell)
        };
        // A told write carries this PE's number and the put's as remote completion data ([`Told`]). It completes
        // once sent (its source may be reused): its signal's answer comes only once it landed, so waiting for its
        // own delivery would only make the target acknowledge it too.
        let (flags, data) = if tell == 0 {
            (self.write_flags() | fi::FI_COMPLETION as u64, 0)
        } else {
            (
                (fi::FI_TRANSMIT_COMPLETE | fi::FI_COMPLETION | fi::FI_REMOTE_CQ_DATA) as u64,
                (self.me as u64) << TELL_BITS | tell,
            )
        };
        let dest = self.addrs[pe];
        let ep = self.ep;
        let mut done = 0;
        while done < len {
            let n = (len - done).min(self.max_msg);
            let iov = fi::iovec {
                iov_base: (base + done) as *mut c_void,
                iov_len: n,
            };
            let rma = fi::fi_rma_iov {
                addr: region.addr + (off + done) as u64,
                len: n,
                key: region.key,
            };
            let mut d = desc;
            self.post(id, "fi_writemsg", slab, |ctx| {
                let msg = fi::fi_msg_rma {
                    msg_iov: &iov,
                    desc: &mut d,
                    iov_count: 1,
                    addr: dest,
                    rma_iov: &rma,
                    rma_iov_count: 1,
                    context: ctx,
                    data,
                };
                // SAFETY: the endpoint is open; `iov` points into the operation's buffer, a bounce buffer or this
                // PE's registered heap, each alive (and in place) until the part's completion; `msg` and what it
                // points to live across the call.
                unsafe { fi::xfi_writemsg(ep, &msg, flags) }
            })?;
            if tell != 0 {
                self.told.posted += 1;
            }
            done += n;
        }
        Ok(())
    }

    /// Post an atomic of operation `id` (its buffer holds operand, compare value and result at words `amo_at`,
    /// `+1`, `+2`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn post_amo(
        &mut self,
        id: u64,
        region: Region,
        off: usize,
        width: usize,
        amo: AmoOp,
        operand: u64,
        fetch: bool,
    ) -> Result<()> {
        let dt = dtype(width)?;
        let (fop, form) = fi_op_of(amo, fetch);
        let cond = match amo {
            AmoOp::CompareSwap { cond } => cond,
            _ => 0,
        };
        let (base, dest) = {
            let o = self.op(id);
            let at = o.amo_at;
            // Little-endian: the low `width` bytes of each word are the value of that width.
            o.buf[at] = operand;
            o.buf[at + 1] = cond;
            o.buf[at + 2] = 0;
            o.result_at = (form != Form::Post).then_some((at + 2) * 8);
            // SAFETY: `at + 2` is inside the buffer (every operation allocates three words past its data).
            let base = unsafe { o.buf.as_mut_ptr().add(at) };
            let pe = o.pe;
            (base, self.addrs[pe])
        };
        let desc = self.local_desc(id)?;
        let addr = region.addr + off as u64;
        let key = region.key;
        let ep = self.ep;
        let flags = self.write_flags() | fi::FI_COMPLETION as u64;
        match form {
            Form::Post => {
                let ioc = fi::fi_ioc {
                    addr: base.cast(),
                    count: 1,
                };
                let rioc = fi::fi_rma_ioc {
                    addr,
                    count: 1,
                    key,
                };
                let mut d = desc;
                self.post(id, "fi_atomicmsg", NO_SLAB, |ctx| {
                    let msg = fi::fi_msg_atomic {
                        msg_iov: &ioc,
                        desc: &mut d,
                        iov_count: 1,
                        addr: dest,
                        rma_iov: &rioc,
                        rma_iov_count: 1,
                        datatype: dt,
                        op: fop,
                        context: ctx,
                        data: 0,
                    };
                    // SAFETY: the endpoint is open; the operand lives in the operation's buffer until completion.
                    unsafe { fi::xfi_atomicmsg(ep, &msg, flags) }
                })
            }
            Form::Fetch => self.post(id, "fi_fetch_atomic", NO_SLAB, |ctx| {
                // SAFETY: the endpoint is open; operand and result are words of the operation's buffer, alive
                // until completion.
                unsafe {
                    fi::xfi_fetch_atomic(
                        ep,
                        base.cast(),
                        1,
                        desc,
                        base.add(2).cast(),
                        desc,
                        dest,
                        addr,
                        key,
                        dt,
                        fop,
                        ctx,
                    )
                }
            }),
            Form::Compare => self.post(id, "fi_compare_atomic", NO_SLAB, |ctx| {
                // SAFETY: as for the fetch form; the compare value is the next word.
                unsafe {
                    fi::xfi_compare_atomic(
                        ep,
                        base.cast(),
                        1,
                        desc,
                        base.add(1).cast(),
                        desc,
                        base.add(2).cast(),
                        desc,
                        dest,
                        addr,
                        key,
                        dt,
                        fop,
                        ctx,
                    )
                }
            }),
        }
    }

    /// Start a get of `len` bytes at `off` of `region` of PE `pe`.
    pub(crate) fn get(
        &mut self,
        pe: usize,
        d: Domain,
        region: Region,
        off: usize,
        len: usize,
    ) -> Result<u64> {
        self.stats.gets_copied += 1;
        self.stats.get_bytes_copied += len as u64;
        let id = self.start(pe, d, "get", len.div_ceil(8))?;
        self.op(id).get_len = Some(len);
        let r = self.local_desc(id).and_then(|desc| {
            let base = self.op(id).buf.as_mut_ptr() as usize;
            self.get_parts(id, region, off, base, len, desc)
        });
        self.posted(id, r)
    }

    /// Start a get of `len` bytes at `off` of `region` of PE `pe` straight into the registered user buffer bytes at
    /// `addr` ([`Ep::user_desc`] must cover them: the caller checked): no copy, the operation's completion means
    /// the bytes are there. The caller keeps the buffer registered, and does not touch it, until then.
    pub(crate) fn get_direct(
        &mut self,
        pe: usize,
        d: Domain,
        region: Region,
        off: usize,
        addr: usize,
        len: usize,
    ) -> Result<u64> {
        let Some(desc) = self.user_desc(addr, len) else {
            return Err(Error::State(format!(
                "fabric: a get in place into {len} bytes at {addr:#x}, which no registered user buffer covers"
            )));
        };
        self.stats.gets_in_place += 1;
        let id = self.start(pe, d, "get", 1)?;
        let r = self.get_parts(id, region, off, addr, len, desc);
        self.posted(id, r)
    }

    /// Post reads of `len` bytes at `off` of `region` into local address `base` (described by `desc`) as parts of
    /// operation `id`, one per `max_msg` bytes.
    pub(super) fn get_parts(
        &mut self,
        id: u64,
        region: Region,
        off: usize,
        base: usize,
        len: usize,
        desc: *mut c_void,
    ) -> Result<()> {
        let src = {
            let pe = self.op(id).pe;
            self.addrs[pe]
        };
        let ep = self.ep;
        let mut done = 0;
        while done < len {
            let n = (len - done).min(self.max_msg);
            let addr = region.addr + (off + done) as u64;
            self.post(id, "fi_read", NO_SLAB, |ctx| {
                // SAFETY: the endpoint is open; the destination lies in the operation's buffer (at least `len`
                // bytes) or a registered user buffer, alive and in place until completion.
                unsafe {
                    fi::xfi_read(
                        ep,
                        (base + done) as *mut c_void,
                        n,
                        desc,
                        src,
                        addr,
                        region.key,
                        ctx,
                    )
                }
            })?;
            done += n;
        }
        Ok(())
    }

    /// Start an atomic (the provider's own; the caller checked that it offers it).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn amo_start(
        &mut self,
        pe: usize,
        d: Domain,
        region: Region,
        off: usize,
        width: usize,
        amo: AmoOp,
        operand: u64,
        fetch: bool,
    ) -> Result<u64> {
        let id = self.start(pe, d, "atomic", 3)?;
        let r = self.post_amo(id, region, off, width, amo, operand, fetch);
        self.posted(id, r)
    }

    pub(crate) fn offers(&self, width: usize, amo: AmoOp, fetch: bool) -> bool {
        let (fop, form) = fi_op_of(amo, fetch);
        self.atomics.contains(&(width, fop, form))
    }

    /// Whether a put-with-signal of `len` bytes posts its signal right behind its data (the provider orders them,
    /// [`Ep::put`]); otherwise the signal waits for the data's delivery.
    pub(crate) fn signal_follows_data(&self, len: usize) -> bool {
        len <= self.waw_max
    }
}

/// What the transport asks of the operations in flight (it never holds them: their contexts and buffers are the
/// provider's until they complete).
impl Ep {
    /// Whether the endpoint was shut down ([`Ep::shutdown`]).
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.is_some()
    }

    /// The PE of operation `id` (`usize::MAX` once it completed).
    pub(crate) fn pe_of(&self, id: u64) -> usize {
        self.ops.get(id).map_or(usize::MAX, |o| o.pe)
    }

    /// The time limit of a wait.
    pub(crate) fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// Whether no operation is in flight.
    pub(crate) fn idle(&self) -> bool {
        self.ops.is_empty() && self.inj.settled == self.inj.issued
    }

    /// Operations in flight in domain `d` (its injected puts count as one).
    pub(crate) fn outstanding_in(&self, d: Domain) -> usize {
        let injected = self.inj.last_domain.get(d) > self.inj.settled;
        self.per_domain.get(d) as usize + usize::from(injected)
    }

    /// One operation of domain `d` left the in-flight table.
    pub(super) fn domain_done(&mut self, d: Domain) {
        let n = self.per_domain.at(d);
        *n = n.saturating_sub(1);
    }

    /// Whether operation `id` is still in flight.
    pub(crate) fn in_flight(&self, id: u64) -> bool {
        if id & INJECT_BIT != 0 {
            return id & !INJECT_BIT > self.inj.settled;
        }
        self.ops.get(id).is_some()
    }

    /// Operations in flight to PE `pe` (its injected puts count as one).
    pub(crate) fn outstanding_to(&self, pe: usize) -> usize {
        self.per_pe[pe] + usize::from(self.inj.last_pe[pe] > self.inj.settled)
    }

    /// Whether a peer was lost (a completion error said so) or the endpoint was shut down.
    pub(crate) fn lost_peer(&self) -> bool {
        self.lost || self.closed.is_some()
    }

    /// The error of completed operation `id`, if it failed (taken).
    pub(crate) fn take_error(&mut self, id: u64) -> Option<Error> {
        if id & INJECT_BIT != 0 {
            // Kept for the domain's quiet as well: the counter does not say which injected put failed.
            let seq = id & !INJECT_BIT;
            return self
                .inj
                .failures
                .iter()
                .find(|(lo, hi, _)| (*lo..=*hi).contains(&seq))
                .map(|(_, _, e)| e.clone());
        }
        self.error_domains.remove(&id);
        self.errors.remove(&id)
    }

    /// The first stored error (by id) of the completed operations of domain `d`, removing them all (errors of
    /// operations whose domain is unknown go to the default domain's).
    pub(crate) fn take_errors_in(&mut self, d: Domain) -> Result<()> {
        if self.errors.is_empty() {
            // Every quiet asks; almost always nothing failed (`error_domains` keeps only ids in `errors`).
            return Ok(());
        }
        let doms = std::mem::take(&mut self.error_domains);
        let r = self.take_errors(|id| doms.get(&id).copied().unwrap_or(Domain::DEFAULT) == d);
        let errors = &self.errors;
        self.error_domains = doms;
        self.error_domains.retain(|id, _| errors.contains_key(id));
        r
    }

    /// The bytes of completed get or fetching atomic `id` (taken).
    pub(crate) fn take_result(&mut self, id: u64) -> Option<Vec<u8>> {
        self.results.remove(&id)
    }

    /// The first stored error (by id) of the operations `pick` selects, removing them all.
    pub(crate) fn take_errors(&mut self, pick: impl Fn(u64) -> bool) -> Result<()> {
        let ids: Vec<u64> = self.errors.keys().copied().filter(|&i| pick(i)).collect();
        let mut first: Option<(u64, Error)> = None;
        for id in ids {
            if let Some(e) = self.errors.remove(&id) {
                if first.as_ref().is_none_or(|(f, _)| id < *f) {
                    first = Some((id, e));
                }
            }
        }
        let errors = &self.errors;
        self.error_domains.retain(|id, _| errors.contains_key(id));
        first.map_or(Ok(()), |(_, e)| Err(e))
    }

    /// How a blocking put of `len` bytes at `addr` to a registered (not staged) region goes without a copy, if it
    /// can: `Some(private)`, whether the source is private memory (not in this PE's registered heap). Only puts of at least [`ZERO_COPY_MIN`] bytes; a private source only when
    /// the provider reads unregistered memory (no `FI_MR_LOCAL`, no `FI_MR_ENDPOINT`: the endpoint can then be
    /// closed on its own, see the window's `write_direct`).
    pub(crate) fn direct(&self, addr: usize, len: usize) -> Option<bool> {
        if len < ZERO_COPY_MIN || self.closed.is_some() {
            return None;
        }
        if self.heap_desc(addr, len).is_some() {
            return Some(false);
        }
        // A registered user buffer is the caller's memory too (private), but registered whatever the provider's
        // mode.
        (self.user_desc(addr, len).is_some() || (!self.mr_local && !self.mr_endpoint))
            .then_some(true)
    }
}
