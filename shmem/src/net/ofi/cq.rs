//! Completions: reading the completion queue and its errors, and the end of each operation (its parts, the
//! signal that follows a put's data, its result or error).
use super::*;

impl Ep {
    /// Read completions until the queue is empty (or 64 entries), finishing their operations.
    ///
    /// Inlined into the waits (a quiet of small puts polls a few times per put), with the rest out of line: the
    /// poll that finds only injected puts in flight costs the counter's read and a few instructions.
    #[inline]
    pub(crate) fn poll(&mut self) -> Result<()> {
        if !self.answers.is_empty() {
            self.answer();
        }
        if self.inject_only() {
            // Only injected puts in flight: every counted part with a context has been read from the queue, so
            // the counter's completions say how many injected puts are done, and reading them drives the
            // provider's progress. Every read of the counter, of its failures or of the queue is a progress call
            // (a system call on a software provider), so each poll makes one, as raw libfabric's wait does: the
            // counter, but the queue (received messages) every [`INJECT_QUEUE_EVERY`]th poll (and at the first
            // poll of every wait, [`Ep::poll_first`]) and the counter's failures every [`INJECT_QUEUE_EVERY`]th
            // poll half a period later.
            self.inj.polls = self.inj.polls.wrapping_add(1);
            let phase = self.inj.polls % INJECT_QUEUE_EVERY;
            if phase == 0 {
                return self.poll_queue();
            }
            if phase == INJECT_QUEUE_EVERY / 2 {
                self.inject_failures();
                return Ok(());
            }
            let done = self.cntr_done();
            self.settle(done, self.inj.failed_read);
            return Ok(());
        }
        self.poll_all()
    }

    /// Only injected puts in flight ([`Ep::poll`]'s one-progress-call polls).
    #[inline]
    fn inject_only(&self) -> bool {
        self.inj.settled < self.inj.issued && self.ops.is_empty() && self.closed.is_none()
    }

    /// The first poll of a wait, from which [`Ep::poll`]'s polls count again. With only injected puts in flight
    /// it reads the completion queue alone (received messages: every wait serves its peers at least once, however
    /// soon it ends), one progress call: it follows the posts at once, while their replies are still on their way
    /// (a loopback round trip takes some 3 us), so the counter is read from the next poll on. Otherwise it is
    /// [`Ep::poll`] in full. (Reading the counter, its failures and the queue here, three progress calls, cost
    /// the quiet of an 8-byte put two system calls more than raw libfabric's and about 0.3 us.)
    pub(crate) fn poll_first(&mut self) -> Result<()> {
        self.inj.polls = 0;
        if self.inject_only() {
            return self.poll_queue();
        }
        self.poll_all()
    }

    /// [`Ep::poll`] in full: the write counter and its failures, then the completion queue.
    #[inline(never)]
    fn poll_all(&mut self) -> Result<()> {
        if self.closed.is_some() {
            // The completion queue may still hold entries of abandoned operations: never read it again.
            return Err(self.closed_err());
        }
        // The write counter first, then the completion queue ([`Injects`]).
        let counted = (self.inj.settled < self.inj.issued).then(|| {
            let failed = self.cntr_failed();
            (self.cntr_done(), failed)
        });
        let r = self.poll_queue();
        if let Some((done, failed)) = counted {
            self.settle(done, failed);
        }
        r
    }

    /// The completion queue: read it, and under a stream of messages (a device heap's staging traffic, or an
    /// outsider's flood) keep draining while messages keep arriving, every buffer reposted before the next read
    /// ([`RXM_MSG_RX_SIZE`]; bounded rounds: the caller's own completion is read on the way).
    #[inline(never)]
    fn poll_queue(&mut self) -> Result<()> {
        if self.closed.is_some() {
            // The completion queue may still hold entries of abandoned operations: never read it again.
            return Err(self.closed_err());
        }
        let mut r = self.poll_cq();
        let mut rounds = 0;
        while self.serve() > 0 && rounds < 64 && r.is_ok() {
            r = self.poll_cq();
            rounds += 1;
        }
        r
    }

    /// The write counter's failures alone (a poll of [`Ep::poll`] while only injected puts are in flight),
    /// accounted with the counter's completions as last read (a lower bound: nothing else completes a counted
    /// part meanwhile).
    #[cold]
    #[inline(never)]
    fn inject_failures(&mut self) {
        let failed = self.cntr_failed();
        self.settle(self.inj.done_read, failed);
    }

    /// The write counter's completions.
    fn cntr_done(&mut self) -> u64 {
        let cntr = self.cntr;
        // SAFETY: the counter is open (injected puts are issued only with one) and bound to the open endpoint.
        self.inj.done_read = self.stall.call(|| unsafe { fi::xfi_cntr_read(cntr) });
        self.inj.done_read
    }

    /// The write counter's failures (kept: a later poll may account with them without reading them again).
    fn cntr_failed(&mut self) -> u64 {
        let cntr = self.cntr;
        // SAFETY: as in `cntr_done`.
        self.inj.failed_read = self.stall.call(|| unsafe { fi::xfi_cntr_readerr(cntr) });
        self.inj.failed_read
    }

    /// Account the write counter read before the last completion-queue read ([`Injects`]; `failed` may be an
    /// earlier reading: the count of injected puts done stays a lower bound): failures of injected puts become
    /// errors, and once every injected put issued is done they are settled.
    #[inline]
    fn settle(&mut self, done: u64, failed: u64) {
        let inj_failed = failed.saturating_sub(self.inj.ctx_failed);
        if inj_failed > self.inj.failed_seen {
            self.counted_failures(inj_failed);
        }
        let inj_done = (done + failed).saturating_sub(self.inj.ctx_done);
        if inj_done >= self.inj.issued {
            self.inj.settled = self.inj.issued;
        }
    }

    /// The write counter counts `inj_failed` failed injected puts, more than reported so far: the injected puts
    /// outstanding end with an error.
    #[cold]
    #[inline(never)]
    fn counted_failures(&mut self, inj_failed: u64) {
        let n = inj_failed - self.inj.failed_seen;
        self.inj.failed_seen = inj_failed;
        let err = self.inject_error(
            format!(
                "the write counter counted {n} failed injected put{}",
                if n == 1 { "" } else { "s" }
            ),
            None,
        );
        self.injects_failed(err);
    }

    /// The PEs with injected puts in flight.
    fn inject_pes(&self) -> Vec<usize> {
        let settled = self.inj.settled;
        (0..self.inj.last_pe.len())
            .filter(|&p| self.inj.last_pe[p] > settled)
            .collect()
    }

    /// The error of failed injected puts (`why`; `code`: the error number a completion entry gave), naming the
    /// peers they went to (the counter does not say which failed), [`Error::PeerLost`] when a peer is gone.
    fn inject_error(&mut self, why: String, code: Option<i32>) -> Error {
        let pes = self.inject_pes();
        let first = pes.first().copied().unwrap_or(usize::MAX);
        let to = match pes.len() {
            0 => "a PE".to_string(),
            1 => format!("PE {first}"),
            _ => format!(
                "one of PEs {}",
                pes.iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let lost_code = code.is_some_and(|c| is_lost(c) || c.unsigned_abs() == fi::FI_ECANCELED);
        let lost_boot = matches!((self.liveness)(), Err(Error::PeerLost { .. }));
        if lost_code || lost_boot {
            self.lost = true;
            let cause = self.lost_first(first);
            return Error::PeerLost {
                pe: cause,
                me: self.me,
                op: format!(
                    "put (injected) to {to} over fabric provider {}: {why}",
                    self.prov
                ),
            };
        }
        Error::Transport {
            transport: "fabric",
            message: format!(
                "put (injected) to {to} failed on provider {}: {why}",
                self.prov
            ),
        }
    }

    /// Injected puts outstanding failed with `err`: every one of them ends with it (their tickets, and the quiet of
    /// each domain that has them).
    pub(super) fn injects_failed(&mut self, err: Error) {
        let (lo, hi) = (self.inj.settled + 1, self.inj.issued);
        if lo > hi {
            return;
        }
        for (d, last) in self.inj.last_domain.iter() {
            if last >= lo {
                self.errors
                    .entry(INJECT_BIT | last)
                    .or_insert_with(|| err.clone());
                self.error_domains.insert(INJECT_BIT | last, d);
            }
        }
        if self.inj.failures.len() == INJECT_FAILURES_KEPT {
            self.inj.failures.remove(0);
        }
        self.inj.failures.push((lo, hi, err));
    }

    /// Read completions: until the queue is empty (at most four reads), or after the first read that returned a
    /// received message (its buffer is to be reposted before the next read: [`RXM_MSG_RX_SIZE`]).
    pub(super) fn poll_cq(&mut self) -> Result<()> {
        // Kept between calls (not zeroed for every poll).
        let mut entries = std::mem::take(&mut self.cq_entries);
        let r = self.poll_cq_into(&mut entries);
        self.cq_entries = entries;
        r
    }

    /// [`Ep::poll_cq`] reading into `entries` ([`CQ_BATCH`] of them).
    pub(super) fn poll_cq_into(&mut self, entries: &mut [fi::fi_cq_data_entry]) -> Result<()> {
        for _ in 0..4 {
            let cq = self.cq;
            // A progress call: watched ([`stall`]).
            // SAFETY: `cq` is open; `entries` holds `entries.len()` FI_CQ_FORMAT_DATA entries.
            let r = self.stall.call(|| unsafe {
                fi::xfi_cq_read(cq, entries.as_mut_ptr().cast(), entries.len())
            });
            if r == -(fi::FI_EAGAIN as isize) {
                return Ok(());
            }
            if r == -(fi::FI_EAVAIL as isize) {
                self.read_error()?;
                continue;
            }
            ok(&self.prov, "fi_cq_read", r as i64)?;
            for e in &entries[..r as usize] {
                if e.op_context.is_null() {
                    // A peer's told write landed ([`Told`]): handled with the messages. Nothing else without
                    // an operation of this PE's has an entry (injected puts have none).
                    if e.flags & fi::FI_REMOTE_CQ_DATA as u64 != 0 {
                        self.inbox.landed.push_back(e.data);
                    }
                    continue;
                }
                // SAFETY: a successful completion's context is one this PE posted with a part (a boxed context of
                // the pool, or a receive's), alive as long as the endpoint and not reused until this completion
                // gives it back. (A provider's own pointer comes only in error entries: `read_error` checks.)
                let (id, slab, counted, index) = unsafe {
                    let c = &*(e.op_context as *const Ctx);
                    (c.id, c.slab, c.counted, c.index)
                };
                self.ctxs.give(index);
                self.inj.ctx_done += u64::from(counted);
                self.free_slab(slab);
                if id & RECV_BIT != 0 {
                    self.inbox
                        .arrived
                        .push_back(((id & !RECV_BIT) as usize, e.len));
                } else {
                    self.part_done(id, None);
                }
            }
            if (r as usize) < entries.len()
                || !self.inbox.arrived.is_empty()
                || !self.inbox.landed.is_empty()
            {
                return Ok(());
            }
        }
        Ok(())
    }

    /// The fields of error completion context `p` (id, bounce buffer, counted, place in the pool) when it is one of
    /// this endpoint's: a receive's or one of the pool's. Any other is counted, logged and never read: `ofi_rxm`
    /// reports a rendezvous read it failed to post with its own receive buffer as the context (`rxm_rndv_read` in
    /// `prov/rxm/src/rxm_cq.c`, every release up to libfabric 2.6); the receive it had matched is lost to this PE
    /// then (rxm never completes it).
    fn ctx_fields(&mut self, p: *mut c_void) -> Option<(u64, u32, bool, u32)> {
        let c = p as *const Ctx;
        if !self.inbox.owns(c) && !self.ctxs.owns(c) {
            self.foreign_contexts += 1;
            if !self.foreign_contexts.is_power_of_two() {
                return None;
            }
            tracing::warn!(
                pe = self.me,
                "fabric: provider {} completed an operation that is not this PE's ({} since set-up): ignored",
                self.prov,
                self.foreign_contexts
            );
            return None;
        }
        // SAFETY: `c` is a context of the pool or of the inbox (checked above), alive as long as the endpoint and
        // not reused until this completion gives it back.
        let c = unsafe { &*c };
        Some((c.id, c.slab, c.counted, c.index))
    }

    pub(super) fn read_error(&mut self) -> Result<()> {
        let mut e = fi::fi_cq_err_entry::default();
        // SAFETY: `cq` is open; `e` is a zeroed error entry (err_data_size 0: the provider's own buffer).
        let r = unsafe { fi::xfi_cq_readerr(self.cq, &mut e, 0) };
        if r < 0 {
            return if r == -(fi::FI_EAGAIN as isize) {
                Ok(())
            } else {
                Err(fab_err(&self.prov, "fi_cq_readerr", r as i64))
            };
        }
        let mut text = [0 as std::ffi::c_char; 256];
        // SAFETY: `cq` is open; `e` is the entry just read; `text` is a 256-byte buffer.
        let p = unsafe {
            fi::xfi_cq_strerror(
                self.cq,
                e.prov_errno,
                e.err_data,
                text.as_mut_ptr(),
                text.len(),
            )
        };
        let prov_text = if p.is_null() {
            String::new()
        } else {
            // SAFETY: a NUL-terminated string (in `text` or the provider's static storage).
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        };
        if e.op_context.is_null() && self.inj.settled < self.inj.issued {
            // An injected put failed (it has no context).
            self.inj.failed_seen += 1;
            let err = self.inject_error(
                format!("{} ({prov_text})", strerror(e.err as i64)),
                Some(e.err),
            );
            self.injects_failed(err);
            return Ok(());
        }
        if e.op_context.is_null() {
            return Err(Error::Transport {
                transport: "fabric",
                message: format!(
                    "provider {}: a completion error without an operation: {} ({prov_text})",
                    self.prov,
                    strerror(e.err as i64)
                ),
            });
        }
        let Some((id, slab, counted, index)) = self.ctx_fields(e.op_context) else {
            return Ok(());
        };
        self.ctxs.give(index);
        self.inj.ctx_done += u64::from(counted);
        self.inj.ctx_failed += u64::from(counted);
        self.free_slab(slab);
        if id & RECV_BIT != 0 {
            // A receive failed: its message broke off (its sender left before this PE read it all: the provider
            // cancels the receive, or reports the broken connection), or it was longer than a buffer (no message
            // of the job is). Whatever the reason, the buffer is posted again: one left unposted is one fewer for
            // the job's own messages, and an outsider who connects and leaves mid-message at will took them all,
            // after which this PE never read another message (its peers' replies, their collectives' signals).
            // Once the endpoint is shut down the queue is not read again, and `post_recv` refuses anyway.
            if e.err.unsigned_abs() != fi::FI_ECANCELED {
                self.inbox.drop_msg(
                    self.me,
                    format_args!("{} ({prov_text})", strerror(e.err as i64)),
                );
            }
            if let Err(err) = self.post_recv((id & !RECV_BIT) as usize) {
                if self.closed.is_none() {
                    tracing::error!(pe = self.me, "re-posting a receive buffer failed: {err}");
                }
            }
            return Ok(());
        }
        let (pe, what) = self
            .ops
            .get(id)
            .map_or((usize::MAX, "?"), |o| (o.pe, o.what));
        // Connection-level failures mean the peer is gone; so does the cancellation of an operation: this PE
        // never cancels one, the provider does when the connection it was queued on went away (tcp;ofi_rxm with
        // a connection error, or ENOENT once the peer's endpoint is gone).
        let lost = is_lost(e.err) || e.err.unsigned_abs() == fi::FI_ECANCELED;
        self.lost |= lost;
        let err = if lost {
            let cause = self.lost_first(pe);
            let via = if cause == pe {
                String::new()
            } else {
                format!(", which left after PE {cause} was lost")
            };
            Error::PeerLost {
                pe: cause,
                me: self.me,
                op: format!(
                    "{what} to PE {pe} over fabric provider {}: {} ({prov_text}){via}",
                    self.prov,
                    strerror(e.err as i64)
                ),
            }
        } else {
            Error::Transport {
                transport: "fabric",
                message: format!(
                    "{what} to PE {pe} failed on provider {}: {} ({prov_text})",
                    self.prov,
                    strerror(e.err as i64)
                ),
            }
        };
        self.part_done(id, Some(err));
        Ok(())
    }

    /// One completion of operation `id` (an error, or one of its parts).
    pub(super) fn part_done(&mut self, id: u64, err: Option<Error>) {
        let Some(op) = self.ops.get_mut(id) else {
            return;
        };
        if let Some(e) = err {
            self.errors.entry(id).or_insert(e);
            op.then = None;
        }
        op.parts_left = op.parts_left.saturating_sub(1);
        if op.parts_left > 0 {
            return;
        }
        if let Some((region, s)) = op.then.take() {
            // The data was delivered: now the signal (a guard part keeps the operation open while it is posted).
            op.parts_left = 1;
            let r = if op.staged {
                let at = op.amo_at;
                self.stage_amo_msg(id, at, s.sig, 8, s.op, s.value, NO_RESULT)
            } else {
                self.post_amo(id, region, s.sig, 8, s.op, s.value, false)
            };
            if let Err(e) = r {
                self.errors.entry(id).or_insert(e);
            }
            self.release(id);
            return;
        }
        self.finish(id);
    }

    /// Drop the guard part of operation `id`; finish it when nothing else is in flight.
    pub(super) fn release(&mut self, id: u64) {
        if let Some(op) = self.ops.get_mut(id) {
            op.parts_left = op.parts_left.saturating_sub(1);
            if op.parts_left == 0 && op.then.is_none() {
                self.finish(id);
            } else if op.parts_left == 0 {
                // Data of zero parts (an empty put-with-signal): the signal goes now.
                op.parts_left = 1;
                self.part_done(id, None);
            }
        }
    }

    pub(super) fn finish(&mut self, id: u64) {
        let Some(op) = self.ops.get_mut(id) else {
            return;
        };
        let (pe, domain) = (op.pe, op.domain);
        if let Some(m) = op.mr.take() {
            // SAFETY: the registration was made for this operation, which has completed.
            unsafe { fi::xfi_close(&mut (*m.mr).fid) };
        }
        if self.errors.contains_key(&id) {
            self.error_domains.insert(id, domain);
        } else {
            let bytes = bytes_of(&op.buf);
            if let Some(n) = op.get_len {
                self.results.insert(id, bytes[..n].to_vec());
            } else if let Some(at) = op.result_at {
                self.results.insert(id, bytes[at..at + 8].to_vec());
            }
        }
        self.ops.free(id);
        self.per_pe[pe] = self.per_pe[pe].saturating_sub(1);
        self.domain_done(domain);
    }
}
