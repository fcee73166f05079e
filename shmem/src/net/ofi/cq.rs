//! Completions: reading the completion queue and its errors, and the end of each operation (its parts, the
//! signal that follows a put's data, its result or error).
use super::*;

impl Ep {
    /// Read completions until the queue is empty (or 64 entries), finishing their operations.
    pub(crate) fn poll(&mut self) -> Result<()> {
        if self.closed.is_some() {
            // The completion queue may still hold entries of abandoned operations: never read it again.
            return Err(self.closed_err());
        }
        let mut r = self.poll_cq();
        // Under a stream of messages (a device heap's staging traffic, or an outsider's flood) keep draining while
        // messages keep arriving, every buffer reposted before the next read ([`RXM_MSG_RX_SIZE`]; bounded rounds:
        // the caller's own completion is read on the way).
        let mut rounds = 0;
        while self.serve() > 0 && rounds < 64 && r.is_ok() {
            r = self.poll_cq();
            rounds += 1;
        }
        r
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
    pub(super) fn poll_cq_into(&mut self, entries: &mut [fi::fi_cq_msg_entry]) -> Result<()> {
        for _ in 0..4 {
            // SAFETY: `cq` is open; `entries` holds `entries.len()` FI_CQ_FORMAT_MSG entries.
            let r = unsafe { fi::xfi_cq_read(self.cq, entries.as_mut_ptr().cast(), entries.len()) };
            if r == -(fi::FI_EAGAIN as isize) {
                return Ok(());
            }
            if r == -(fi::FI_EAVAIL as isize) {
                self.read_error()?;
                continue;
            }
            ok(&self.prov, "fi_cq_read", r as i64)?;
            for e in &entries[..r as usize] {
                // SAFETY: every operation's context is a live Box<Ctx> held by its `Op` (or, for a receive, by
                // the `Stage`) until its completion.
                let (id, slab) = unsafe {
                    let c = &*(e.op_context as *const Ctx);
                    (c.id, c.slab)
                };
                self.free_slab(slab);
                if id & RECV_BIT != 0 {
                    self.inbox
                        .arrived
                        .push_back(((id & !RECV_BIT) as usize, e.len));
                } else {
                    self.part_done(id, None);
                }
            }
            if (r as usize) < entries.len() || !self.inbox.arrived.is_empty() {
                return Ok(());
            }
        }
        Ok(())
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
        // SAFETY: as in `poll`, the context is a live Box<Ctx>.
        let (id, slab) = unsafe {
            let c = &*(e.op_context as *const Ctx);
            (c.id, c.slab)
        };
        self.free_slab(slab);
        if id & RECV_BIT != 0 {
            // A receive failed: canceled at close (nothing to do), or a message longer than a buffer (no message
            // of the job is: dropped, and the buffer posted again).
            if e.err.unsigned_abs() != fi::FI_ECANCELED {
                self.inbox.drop_msg(
                    self.me,
                    format_args!("{} ({prov_text})", strerror(e.err as i64)),
                );
                let _ = self.post_recv((id & !RECV_BIT) as usize);
            }
            return Ok(());
        }
        let (pe, what) = self
            .ops
            .get(&id)
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
        let Some(op) = self.ops.get_mut(&id) else {
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
        if let Some(op) = self.ops.get_mut(&id) {
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
        let Some(mut op) = self.ops.remove(&id) else {
            return;
        };
        self.per_pe[op.pe] = self.per_pe[op.pe].saturating_sub(1);
        self.domain_done(op.domain);
        if self.errors.contains_key(&id) {
            self.error_domains.insert(id, op.domain);
        }
        if let Some(m) = op.mr.take() {
            // SAFETY: the registration was made for this operation, which has completed.
            unsafe { fi::xfi_close(&mut (*m.mr).fid) };
        }
        if !self.errors.contains_key(&id) {
            let bytes = bytes_of(&op.buf);
            if let Some(n) = op.get_len {
                self.results.insert(id, bytes[..n].to_vec());
            } else if let Some(at) = op.result_at {
                self.results.insert(id, bytes[at..at + 8].to_vec());
            }
        }
    }
}
