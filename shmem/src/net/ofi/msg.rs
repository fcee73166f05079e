//! Two-sided messages: the receive buffers every PE keeps posted ([`Inbox`]), the staging protocol of device
//! heaps the provider cannot register ([`Msg`], [`StagedHeap`]), each message authenticated by its receiver's
//! [`Token`].
use super::*;
use crate::hal::ze::ZeRuntime;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A PE's message token: 128 random bits made by the PE at set-up (the transport's `random_words`) and published
/// only in the bootstrap's allgather. Every message to a PE carries that PE's token; one that does not is dropped
/// unread.
pub(crate) type Token = [u64; 2];

/// The region of `regions` that key `key` names, when `[off, off + len)` (a message's data) and the 8-byte word at
/// `sig` (its signal, aligned) lie inside it; otherwise why not.
pub(super) fn host_target(
    regions: &[HostRegion],
    key: u64,
    off: usize,
    len: usize,
    sig: usize,
) -> std::result::Result<HostRegion, String> {
    let r = *regions
        .iter()
        .find(|r| r.key == key)
        .ok_or_else(|| format!("key {key:#x} names no host region"))?;
    if off.checked_add(len).is_none_or(|e| e > r.len) {
        return Err(format!(
            "data [{off}, {off} + {len}) outside the region of {} bytes",
            r.len
        ));
    }
    if sig.checked_add(8).is_none_or(|e| e > r.len) || (r.base + sig) % 8 != 0 {
        return Err(format!(
            "signal word at {sig} outside the region of {} bytes or unaligned",
            r.len
        ));
    }
    Ok(r)
}

/// Whether two tokens are equal, in time independent of where they differ.
pub(crate) fn token_eq(a: &Token, b: &Token) -> bool {
    let d = std::hint::black_box((a[0] ^ b[0]) | (a[1] ^ b[1]));
    d == 0
}

/// Told writes: the data of a put-with-signal too large for one message ([`Ep::told_copied`]) goes as writes
/// whose remote completion data (the sender's PE number above [`TELL_BITS`] bits, the number it gave the put below
/// them) tells the target of their landing, and its signal as a [`MSG_PUT_SIGNAL`] message right behind them that
/// names that number and how many writes it waits for. The provider reports a write at the target once its data
/// is in place, but need not order that report with the message, so the target applies a signal only once every
/// write it names has landed: a write that lands first is kept in `landed`, a signal that arrives first waits in
/// `waiting`. A write that never lands (it failed) holds back its own signal only, which its sender then never
/// sees answered (its wait ends with the time limit).
#[derive(Default)]
pub(super) struct Told {
    /// The number of this PE's last told put-with-signal (as the sender).
    last: u64,
    /// The writes posted for it so far.
    pub(super) posted: u64,
    /// Writes landed whose signal has not arrived: (sender, number, writes).
    landed: Vec<(usize, u64, u64)>,
    /// Signals that arrived before their writes landed.
    waiting: Vec<Waiting>,
}

/// A signal of a put-with-signal that waits for its told writes ([`Told`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Waiting {
    /// Its sender, the number it gave the put, and the writes not yet landed.
    pub(super) from: usize,
    pub(super) tell: u64,
    pub(super) left: u64,
    /// The signal word's address, its operation and operand.
    pub(super) word: usize,
    pub(super) op: AmoOp,
    pub(super) operand: u64,
    /// The operation's id and reply slot at its sender (the reply's header).
    pub(super) id: u64,
    pub(super) reply_op: u64,
}

impl Told {
    /// A number for the next told put-with-signal of this PE (never 0: a signal naming 0 waits for no write).
    pub(super) fn next(&mut self) -> u64 {
        self.last = (self.last + 1) & ((1 << TELL_BITS) - 1);
        if self.last == 0 {
            self.last = 1;
        }
        self.last
    }

    /// A write of put `tell` from `from` landed: the signal it completes, if that one arrived and waits for no
    /// other write.
    pub(super) fn landed(&mut self, from: usize, tell: u64) -> Option<Waiting> {
        if let Some(i) = self
            .waiting
            .iter()
            .position(|w| w.from == from && w.tell == tell)
        {
            self.waiting[i].left -= 1;
            return (self.waiting[i].left == 0).then(|| self.waiting.swap_remove(i));
        }
        match self
            .landed
            .iter_mut()
            .find(|(f, t, _)| *f == from && *t == tell)
        {
            Some(l) => l.2 += 1,
            None => self.landed.push((from, tell, 1)),
        }
        None
    }

    /// Signal `w` arrived, naming `w.left` writes: whether it may be applied now (they all landed); if not, it
    /// waits for the rest ([`Told::landed`] lets it go).
    pub(super) fn ready(&mut self, mut w: Waiting) -> bool {
        if w.left == 0 {
            return true;
        }
        if let Some(i) = self
            .landed
            .iter()
            .position(|&(f, t, _)| f == w.from && t == w.tell)
        {
            let (_, _, n) = self.landed.swap_remove(i);
            w.left = w.left.saturating_sub(n);
            if w.left == 0 {
                return true;
            }
        }
        self.waiting.push(w);
        false
    }
}

/// A message header: `[kind, from, id, off, len, operand, cond, op, token, token]`. Requests name the target heap
/// range (an atomic's `len` is its code, [`amo_code`]) and, in `op`, where the reply's bytes go in the
/// the error text). `tok` is the receiver's [`Token`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Msg {
    pub(crate) kind: u64,
    pub(crate) from: u64,
    pub(crate) id: u64,
    pub(crate) off: u64,
    pub(crate) len: u64,
    pub(crate) operand: u64,
    pub(crate) cond: u64,
    pub(crate) op: u64,
    pub(crate) tok: Token,
}

impl Msg {
    pub(crate) fn words(&self) -> [u64; HDR_WORDS] {
        [
            self.kind,
            self.from,
            self.id,
            self.off,
            self.len,
            self.operand,
            self.cond,
            self.op,
            self.tok[0],
            self.tok[1],
        ]
    }
    pub(crate) fn of(w: &[u64]) -> Msg {
        Msg {
            kind: w[0],
            from: w[1],
            id: w[2],
            off: w[3],
            len: w[4],
            operand: w[5],
            cond: w[6],
            op: w[7],
            tok: [w[8], w[9]],
        }
    }
}

/// Wire code of an atomic (width in the high half): the device's own codes ([`crate::abi::AmoCode`]); [`amo_of`]
/// decodes it (and the host proxy's requests).
pub(super) fn amo_code(op: AmoOp, width: usize) -> (u64, u64) {
    let (c, cond) = op.code();
    (c as u64 | (width as u64) << 32, cond)
}

pub(crate) fn amo_of(code: u64, cond: u64) -> Option<(AmoOp, usize)> {
    use crate::abi::AmoCode as C;
    let width = (code >> 32) as usize;
    let op = match (code & 0xffff_ffff) as u32 {
        x if x == C::Fetch as u32 => AmoOp::Fetch,
        x if x == C::Set as u32 => AmoOp::Set,
        x if x == C::Swap as u32 => AmoOp::Swap,
        x if x == C::CompareSwap as u32 => AmoOp::CompareSwap { cond },
        x if x == C::FetchAdd as u32 => AmoOp::FetchAdd,
        x if x == C::FetchAnd as u32 => AmoOp::FetchAnd,
        x if x == C::FetchOr as u32 => AmoOp::FetchOr,
        x if x == C::FetchXor as u32 => AmoOp::FetchXor,
        _ => return None,
    };
    (width == 4 || width == 8).then_some((op, width))
}
/// A device heap the provider cannot register (no `FI_HMEM`), served through the staging path: peers send their
/// operations on it as messages into this PE's receive buffers ([`Inbox`]); this PE's progress thread applies them
/// through this (the transport's Level Zero copies and atomic kernel on the device's service lane), and replies.
/// Each method checks its range against the heap (the errors name the staged access).
pub(crate) trait StagedHeap: Send {
    /// Write `src` at `off`.
    fn write(&self, off: usize, src: &[u8]) -> Result<()>;
    /// Read `len` bytes at `off` into `out` (resized to `len`).
    fn read(&self, off: usize, len: usize, out: &mut Vec<u8>) -> Result<()>;
    /// Apply atomic `op` of `width` bytes at `off`; the word's previous value.
    fn amo(&self, off: usize, width: usize, op: AmoOp, operand: u64) -> Result<u64>;
}

/// The receive buffers every PE keeps posted ([`RECVS`] untagged ones, then as many tagged ones, each a header and
/// a chunk), reposted as their messages are handled: what the provider buffers for this PE is bounded by them (an
/// outsider's flood is read into them and dropped, instead of piling up in the provider's queue of unexpected
/// messages; see [`RXM_MSG_RX_SIZE`]).
pub(super) struct Inbox {
    pub(crate) bufs: Vec<Vec<u64>>,
    /// Their contexts, in one allocation that never moves (libfabric holds their addresses): a completion's
    /// context is one of them exactly when it lies inside ([`Inbox::owns`]).
    pub(crate) ctxs: Box<[Ctx]>,
    /// Their registrations (with `FI_MR_LOCAL`).
    pub(crate) mrs: Vec<LocalMr>,
    /// Received messages not yet handled: (buffer, bytes).
    pub(crate) arrived: std::collections::VecDeque<(usize, usize)>,
    /// Peers' told writes landed, not yet handled: their remote completion data ([`Told`]).
    pub(crate) landed: std::collections::VecDeque<u64>,
    pub(crate) serving: bool,
    /// This PE's token ([`Token`]): a message without it is dropped.
    pub(crate) token: Token,
    /// Messages dropped (bad token, length, sender or kind; truncated) since set-up, and at the last warning.
    pub(crate) dropped: u64,
    pub(crate) warned: u64,
    /// When the last warning about dropped messages was logged (at most one a second).
    pub(crate) warned_at: Option<Instant>,
}

impl Inbox {
    /// The receive buffers of the PE whose token is `token` ([`RECVS`] of each kind), not yet posted.
    pub(super) fn new(token: Token) -> Inbox {
        Inbox {
            bufs: (0..2 * RECVS)
                .map(|_| vec![0u64; HDR_WORDS + STAGE_CHUNK / 8])
                .collect(),
            ctxs: (0..2 * RECVS)
                .map(|i| Ctx {
                    raw: fi::fi_context2::default(),
                    id: RECV_BIT | i as u64,
                    slab: NO_SLAB,
                    counted: false,
                    index: NO_CTX,
                })
                .collect(),
            mrs: Vec::new(),
            arrived: std::collections::VecDeque::new(),
            landed: std::collections::VecDeque::new(),
            serving: false,
            token,
            dropped: 0,
            warned: 0,
            warned_at: None,
        }
    }

    /// Whether `p` is the context of one of these receives.
    pub(super) fn owns(&self, p: *const Ctx) -> bool {
        let base = self.ctxs.as_ptr() as usize;
        let off = (p as usize).wrapping_sub(base);
        off < self.ctxs.len() * std::mem::size_of::<Ctx>() && off % std::mem::size_of::<Ctx>() == 0
    }

    /// Count a dropped message; a warning with the count at most once a second.
    pub(super) fn drop_msg(&mut self, me: usize, why: std::fmt::Arguments<'_>) {
        self.dropped += 1;
        if self
            .warned_at
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
        {
            tracing::warn!(
                pe = me,
                "fabric: dropped {} message(s) not from this job ({} since set-up; last: {why})",
                self.dropped - self.warned,
                self.dropped
            );
            self.warned = self.dropped;
            self.warned_at = Some(Instant::now());
        }
    }
}

impl Ep {
    /// Post receive buffer `i` of the [`Inbox`] (tagged from [`RECVS`] on).
    pub(super) fn post_recv(&mut self, i: usize) -> Result<()> {
        let ep = self.ep;
        let prov = self.prov.clone();
        if self.closed.is_some() {
            return Err(self.closed_err());
        }
        let ib = &mut self.inbox;
        let (ptr, len) = (ib.bufs[i].as_mut_ptr(), ib.bufs[i].len() * 8);
        let desc = ib.mrs.get(i).map_or(std::ptr::null_mut(), |m| m.desc);
        let ctx: *mut Ctx = &mut ib.ctxs[i];
        let mut backoff = polling_backoff(0, self.timeout);
        loop {
            // SAFETY: the endpoint is open; the buffer and its context are owned by the Inbox, which lives (in
            // place: boxed contexts, Vec storage never resized) until the endpoint is closed.
            let r = unsafe {
                if i < RECVS {
                    fi::xfi_recv(ep, ptr.cast(), len, desc, ADDR_NOTAVAIL, ctx.cast())
                } else {
                    // Any tag (every bit ignored): what the job never sends is taken in and dropped.
                    fi::xfi_trecv(
                        ep,
                        ptr.cast(),
                        len,
                        desc,
                        ADDR_NOTAVAIL,
                        0,
                        u64::MAX,
                        ctx.cast(),
                    )
                }
            };
            if r == -(fi::FI_EAGAIN as isize) {
                // Completions free the queue; read them without serving (serving may post again).
                self.poll_cq()?;
                if backoff.pause(|| true) {
                    if let Some(waited) = backoff.expired() {
                        return Err(self.timeout_error("fi_recv", usize::MAX, waited));
                    }
                }
                continue;
            }
            return ok(&prov, "fi_recv (receive buffer)", r as i64);
        }
    }

    /// Handle the messages received so far and post their buffers again (never re-entered: replies it posts
    /// may poll); how many.
    pub(super) fn serve(&mut self) -> usize {
        if self.inbox.serving || (self.inbox.arrived.is_empty() && self.inbox.landed.is_empty()) {
            return 0;
        }
        self.inbox.serving = true;
        let mut handled = 0;
        while let Some(data) = self.inbox.landed.pop_front() {
            handled += 1;
            let (from, tell) = (
                usize::try_from(data >> TELL_BITS).unwrap_or(usize::MAX),
                data & ((1 << TELL_BITS) - 1),
            );
            // Only a holder of one of this PE's keys writes here, and every one is a PE of the job; the number is
            // checked all the same before it indexes anything.
            if from >= self.addrs.len() || self.addrs[from] == ADDR_NOTAVAIL || tell == 0 {
                self.inbox.drop_msg(
                    self.me,
                    format_args!("a write telling of sender {from}, number {tell}"),
                );
                continue;
            }
            if let Some(w) = self.told.landed(from, tell) {
                self.signal_here(w);
            }
        }
        while let Some((i, len)) = self.inbox.arrived.pop_front() {
            handled += 1;
            if i >= RECVS {
                self.inbox
                    .drop_msg(self.me, format_args!("a tagged message of {len} bytes"));
            } else {
                let buf = std::mem::take(&mut self.inbox.bufs[i]);
                self.handle(&buf, len);
                self.inbox.bufs[i] = buf;
            }
            if let Err(e) = self.post_recv(i) {
                tracing::error!(pe = self.me, "re-posting a receive buffer failed: {e}");
            }
        }
        self.inbox.serving = false;
        handled
    }

    /// Whether a received message is one of this job's: it carries this PE's token, a whole header, a sender
    /// that is a PE this transport reaches, a known kind, and (a put) as many payload bytes as it announces (a
    /// reply) names one of this PE's staged operations on that sender. Checked before any other field is used.
    pub(super) fn authentic(&self, m: &Msg, len: usize) -> std::result::Result<(), String> {
        if !token_eq(&m.tok, &self.inbox.token) {
            return Err(format!("wrong token, {len} bytes"));
        }
        let from = usize::try_from(m.from).unwrap_or(usize::MAX);
        if from >= self.addrs.len() || self.addrs[from] == ADDR_NOTAVAIL {
            return Err(format!(
                "sender {} is not a PE this transport reaches",
                m.from
            ));
        }
        let payload = len - HDR_WORDS * 8;
        let ok = match m.kind {
            MSG_PUT => m.len == payload as u64,
            MSG_PUT_SIGNAL => m.len + 8 * PUT_SIGNAL_WORDS as u64 == payload as u64,
            MSG_GET | MSG_AMO => payload == 0,
            MSG_REPLY => self
                .ops
                .get(m.id)
                .is_some_and(|o| o.staged && o.pe == from && payload as u64 == m.len),
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "kind {} of {len} bytes from PE {from} does not match its header",
                m.kind
            ))
        }
    }

    /// One received message: a request on this PE's device heap (applied, then answered) or a reply to one of
    /// this PE's operations; anything else is dropped ([`Ep::authentic`]).
    pub(super) fn handle(&mut self, buf: &[u64], len: usize) {
        if len < HDR_WORDS * 8 || len > buf.len() * 8 {
            self.inbox
                .drop_msg(self.me, format_args!("a message of {len} bytes"));
            return;
        }
        let m = Msg::of(&buf[..HDR_WORDS]);
        if let Err(why) = self.authentic(&m, len) {
            self.inbox.drop_msg(self.me, format_args!("{why}"));
            return;
        }
        let payload = &bytes_of(&buf[HDR_WORDS..])[..(len - HDR_WORDS * 8).min(STAGE_CHUNK)];
        if m.kind == MSG_REPLY {
            let Some(op) = self.ops.get_mut(m.id) else {
                return;
            };
            if m.operand != 0 {
                let pe = op.pe;
                let what = op.what;
                let e = Error::Transport {
                    transport: "fabric",
                    message: format!(
                        "{what} on PE {pe} (through messages, provider {}): {}",
                        self.prov,
                        String::from_utf8_lossy(payload)
                    ),
                };
                self.part_done(m.id, Some(e));
                return;
            }
            if m.op != NO_RESULT {
                let b = bytes_of_mut(&mut op.buf);
                let at = m.op as usize;
                let n = (m.len as usize).min(payload.len());
                if at.checked_add(n).is_some_and(|e| e <= b.len()) {
                    b[at..at + n].copy_from_slice(&payload[..n]);
                }
            }
            self.part_done(m.id, None);
            return;
        }
        let from = m.from as usize;
        let mut result = Vec::new();
        let r = match m.kind {
            MSG_PUT_SIGNAL => {
                // The payload's first words, after the header's (its length was checked: `authentic`).
                let words = &buf[HDR_WORDS..HDR_WORDS + PUT_SIGNAL_WORDS];
                match self.host_write(&m, words, payload) {
                    Ok((word, op)) => {
                        let w = Waiting {
                            from,
                            tell: words[2],
                            left: words[3],
                            word,
                            op,
                            operand: m.operand,
                            id: m.id,
                            reply_op: m.op,
                        };
                        if self.told.ready(w) {
                            self.signal_here(w);
                        }
                        return;
                    }
                    Err(e) => Err(e),
                }
            }
            _ => self.apply(&m, payload, &mut result),
        };
        let r = r.map(|()| result).map_err(|e| e.to_string());
        self.reply(from, m.id, m.op, r);
    }

    /// Answer operation `id` of PE `from` (`op`: where its reply's bytes go) with `r`: its bytes, or why it
    /// failed.
    fn reply(&mut self, from: usize, id: u64, op: u64, r: std::result::Result<Vec<u8>, String>) {
        let (status, data) = match r {
            Ok(data) => (0, data),
            Err(e) => (1, e.into_bytes()),
        };
        let reply = Msg {
            kind: MSG_REPLY,
            from: self.me as u64,
            id,
            off: 0,
            len: data.len() as u64,
            operand: status,
            cond: 0,
            op,
            tok: self.tokens[from],
        };
        let id = match self.start(
            from,
            Domain::DEFAULT,
            "staged reply",
            HDR_WORDS + data.len().div_ceil(8),
        ) {
            Ok(id) => id,
            Err(e) => {
                tracing::error!(pe = self.me, peer = from, "a staging reply failed: {e}");
                return;
            }
        };
        {
            let o = self.op(id);
            o.buf[..HDR_WORDS].copy_from_slice(&reply.words());
            bytes_of_mut(&mut o.buf[HDR_WORDS..])[..data.len()].copy_from_slice(&data);
        }
        let r = self.send_part(id, 0, HDR_WORDS * 8 + data.len(), false);
        if let Err(e) = self.posted(id, r) {
            tracing::error!(pe = self.me, peer = from, "a staging reply failed: {e}");
        }
    }

    /// Apply a staging request to this PE's device heap (through the device's service lane); a get's bytes or an
    /// atomic's previous value go to `out`.
    pub(super) fn apply(&mut self, m: &Msg, payload: &[u8], out: &mut Vec<u8>) -> Result<()> {
        let st = self.stage.as_ref().ok_or_else(|| Error::Transport {
            transport: "fabric",
            message: "a staging request reached a PE without a staged device heap".into(),
        })?;
        let (off, len) = (m.off as usize, m.len as usize);
        match m.kind {
            MSG_PUT => {
                if len != payload.len() {
                    return Err(Error::Transport {
                        transport: "fabric",
                        message: format!("a staged put of {len} bytes carried {}", payload.len()),
                    });
                }
                st.write(off, payload)
            }
            MSG_GET => st.read(off, len, out),
            MSG_AMO => {
                // An atomic's `len` word is its code (width in the high half).
                let (op, width) = amo_of(m.len, m.cond).ok_or_else(|| Error::Transport {
                    transport: "fabric",
                    message: format!("a staged atomic with code {:#x}", m.len),
                })?;
                let old = st.amo(off, width, op, m.operand)?;
                out.extend_from_slice(&old.to_le_bytes());
                Ok(())
            }
            k => Err(Error::Transport {
                transport: "fabric",
                message: format!("a staging message of unknown kind {k}"),
            }),
        }
    }

    /// Write the data of a [`MSG_PUT_SIGNAL`] message (none when it follows told writes) into this PE's host memory: at `off` of
    /// the region its key names; the address of its signal word and the signal's operation. Both ranges must lie
    /// inside that registered region (a message is otherwise refused, as the provider refuses an RMA access
    /// outside a registration). `words`: the payload's first [`PUT_SIGNAL_WORDS`] words (the region's key, the
    /// signal's offset, then the told writes it follows), in the sender's order as the header's are.
    fn host_write(&self, m: &Msg, words: &[u64], payload: &[u8]) -> Result<(usize, AmoOp)> {
        let bad = |why: String| Error::Transport {
            transport: "fabric",
            message: format!(
                "a put_signal message from PE {} to PE {}: {why}",
                m.from, self.me
            ),
        };
        let (off, len) = (m.off as usize, m.len as usize);
        let head = 8 * PUT_SIGNAL_WORDS;
        if payload.len() != head + len {
            return Err(bad(format!("{} bytes for {len} of data", payload.len())));
        }
        let (key, sig) = (words[0], words[1] as usize);
        let op = match amo_of(m.cond, 0) {
            Some((op @ (AmoOp::Set | AmoOp::FetchAdd), 8)) => op,
            _ => return Err(bad(format!("signal operation {:#x}", m.cond))),
        };
        let region = host_target(&self.host_regions, key, off, len, sig).map_err(bad)?;
        // SAFETY: `[base + off, base + off + len)` lies inside a region of this PE's host memory registered for
        // peers' writes (checked above), mapped as long as this endpoint is open; peers' RMA writes reach the same
        // bytes through the provider, as this copy does.
        unsafe {
            std::ptr::copy_nonoverlapping(
                payload[head..].as_ptr(),
                (region.base + off) as *mut u8,
                len,
            );
        }
        Ok((region.base + sig, op))
    }

    /// Apply the signal of a put-with-signal sent as a message once its data is in place (a release store or
    /// add, so that a PE that sees the signal sees the data), then answer it.
    pub(super) fn signal_here(&mut self, w: Waiting) {
        // SAFETY: an aligned 8-byte word inside a registered region of this PE's host memory (`host_write`
        // checked it), accessed atomically by every party (local atomics, the provider's atomics).
        let word = unsafe { std::sync::atomic::AtomicU64::from_ptr(w.word as *mut u64) };
        match w.op {
            AmoOp::Set => word.store(w.operand, Ordering::Release),
            _ => {
                word.fetch_add(w.operand, Ordering::Release);
            }
        }
        // Answered at this PE's next call into the endpoint ([`Ep::answer`]).
        self.answers.push((w.from, w.id, w.reply_op));
    }

    /// Answer the signals applied since the last answers: at the start of the next poll, or right after this PE
    /// posted an operation of its own. A PE waiting for a signal (a ping-pong's) then sends its own put before
    /// the answer, which its sender needs only for a later quiet; and every wait polls, so none is held longer
    /// than until this PE calls in again (the progress thread, where it runs, polls on its own).
    pub(super) fn answer(&mut self) {
        for (from, id, op) in std::mem::take(&mut self.answers) {
            self.reply(from, id, op, Ok(Vec::new()));
        }
    }

    /// Whether a put-with-signal of `len` bytes and signal operation `op` goes as one message
    /// ([`Ep::am_put_signal`]): the provider has manual progress, its signal could not follow its data, it fits a
    /// message, and `op` is a signal's (set or add, what [`Ep::signal_here`] applies).
    pub(crate) fn am_signal(&self, len: usize, op: AmoOp) -> bool {
        len > 0 && len <= self.am_signal_max && self.signal_by_message(len, op)
    }

    /// What both message forms of a put-with-signal ask ([`Ep::am_signal`], [`Ep::tells`]): its signal could not
    /// follow its data, `op` is a signal's (set or add, what [`Ep::signal_here`] applies), the endpoint is open.
    pub(super) fn signal_by_message(&self, len: usize, op: AmoOp) -> bool {
        matches!(op, AmoOp::Set | AmoOp::FetchAdd)
            && !self.signal_follows_data(len)
            && self.closed.is_none()
    }

    /// A put of `src` at `off` of `region` of PE `pe` with signal `op value` at `sig` of the same region, as one
    /// [`MSG_PUT_SIGNAL`] message: PE `pe` applies the data, then the signal, then replies, and the operation
    /// completes with the reply. (The RMA form waits a round trip for the data's delivery before it posts the
    /// signal, where the provider does not order them.)
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn am_put_signal(
        &mut self,
        pe: usize,
        d: Domain,
        region: Region,
        off: usize,
        src: &[u8],
        sig: usize,
        op: AmoOp,
        value: u64,
    ) -> Result<u64> {
        self.stats.puts_copied += 1;
        self.stats.put_bytes_copied += src.len() as u64;
        self.stats.put_signals_as_messages += 1;
        let s = Signal { sig, op, value };
        self.signal_message(pe, d, region, off, src, s, (0, 0))
    }

    /// A [`MSG_PUT_SIGNAL`] message to PE `pe`: the data `src` for `off` of `region`, signal `s` at an offset of the
    /// same region, and the told writes it follows (their number and count, [`Told`]; `(0, 0)`: none).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn signal_message(
        &mut self,
        pe: usize,
        d: Domain,
        region: Region,
        off: usize,
        src: &[u8],
        s: Signal,
        (tell, writes): (u64, u64),
    ) -> Result<u64> {
        let (code, _) = amo_code(s.op, 8);
        let id = self.start(
            pe,
            d,
            "put_signal",
            HDR_WORDS + PUT_SIGNAL_WORDS + src.len().div_ceil(8),
        )?;
        let m = Msg {
            kind: MSG_PUT_SIGNAL,
            from: self.me as u64,
            id,
            off: off as u64,
            len: src.len() as u64,
            operand: s.value,
            cond: code,
            op: NO_RESULT,
            tok: self.tokens[pe],
        };
        {
            let o = self.op(id);
            o.staged = true;
            o.buf[..HDR_WORDS].copy_from_slice(&m.words());
            o.buf[HDR_WORDS..HDR_WORDS + PUT_SIGNAL_WORDS].copy_from_slice(&[
                region.key,
                s.sig as u64,
                tell,
                writes,
            ]);
            bytes_of_mut(&mut o.buf[HDR_WORDS + PUT_SIGNAL_WORDS..])[..src.len()]
                .copy_from_slice(src);
        }
        let r = self.send_part(id, 0, (HDR_WORDS + PUT_SIGNAL_WORDS) * 8 + src.len(), true);
        self.posted(id, r)
    }

    /// Send `bytes` bytes of operation `id`'s buffer from word `at` as one message to its PE; with `reply`, the
    /// operation also waits for the target's answer.
    pub(super) fn send_part(
        &mut self,
        id: u64,
        at: usize,
        bytes: usize,
        reply: bool,
    ) -> Result<()> {
        let desc = self.local_desc(id)?;
        let (ptr, pe) = {
            let o = self.op(id);
            // SAFETY: `at` words lie inside the buffer (the callers lay messages out inside it).
            (unsafe { o.buf.as_ptr().add(at) }, o.pe)
        };
        let dest = self.addrs[pe];
        let ep = self.ep;
        self.post(id, "fi_send", NO_SLAB, |ctx| {
            // SAFETY: the endpoint is open; the message lies in the operation's buffer, alive and in place until
            // its completion.
            unsafe { fi::xfi_send(ep, ptr.cast(), bytes, desc, dest, ctx) }
        })?;
        if reply {
            self.op(id).parts_left += 1;
        }
        Ok(())
    }

    /// A put (then, once delivered, `signal`) to PE `pe`'s staged device heap: one message per chunk, each
    /// answered once the target has copied it into the heap.
    pub(crate) fn stage_put(
        &mut self,
        pe: usize,
        d: Domain,
        region: Region,
        off: usize,
        src: &[u8],
        signal: Option<Signal>,
    ) -> Result<u64> {
        let what = if signal.is_some() {
            "put_signal"
        } else {
            "put"
        };
        let chunks = src.len().div_ceil(STAGE_CHUNK).max(1);
        let words = chunks * HDR_WORDS + src.len().div_ceil(8) + chunks + HDR_WORDS;
        let id = self.start(pe, d, what, words)?;
        let me = self.me as u64;
        let tok = self.tokens[pe];
        let mut at = 0;
        let mut layout = Vec::with_capacity(chunks);
        {
            let o = self.op(id);
            o.staged = true;
            o.then = signal.map(|s| (region, s));
            for (c, part) in src.chunks(STAGE_CHUNK).enumerate() {
                let m = Msg {
                    kind: MSG_PUT,
                    from: me,
                    id,
                    off: (off + c * STAGE_CHUNK) as u64,
                    len: part.len() as u64,
                    operand: 0,
                    cond: 0,
                    op: NO_RESULT,
                    tok,
                };
                o.buf[at..at + HDR_WORDS].copy_from_slice(&m.words());
                bytes_of_mut(&mut o.buf[at + HDR_WORDS..])[..part.len()].copy_from_slice(part);
                layout.push((at, HDR_WORDS * 8 + part.len()));
                at += HDR_WORDS + part.len().div_ceil(8);
            }
            o.amo_at = at;
        }
        let mut r = Ok(());
        for (w, bytes) in layout {
            r = self.send_part(id, w, bytes, true);
            if r.is_err() {
                break;
            }
        }
        self.posted(id, r)
    }

    /// A get of `len` bytes at `off` of PE `pe`'s staged device heap: the replies carry the bytes.
    pub(crate) fn stage_get(
        &mut self,
        pe: usize,
        d: Domain,
        off: usize,
        len: usize,
    ) -> Result<u64> {
        let chunks = len.div_ceil(STAGE_CHUNK);
        let data_words = len.div_ceil(8);
        let id = self.start(pe, d, "get", data_words + chunks * HDR_WORDS)?;
        let me = self.me as u64;
        let tok = self.tokens[pe];
        {
            let o = self.op(id);
            o.staged = true;
            o.get_len = Some(len);
            for c in 0..chunks {
                let n = (len - c * STAGE_CHUNK).min(STAGE_CHUNK);
                let m = Msg {
                    kind: MSG_GET,
                    from: me,
                    id,
                    off: (off + c * STAGE_CHUNK) as u64,
                    len: n as u64,
                    operand: 0,
                    cond: 0,
                    op: (c * STAGE_CHUNK) as u64,
                    tok,
                };
                let at = data_words + c * HDR_WORDS;
                o.buf[at..at + HDR_WORDS].copy_from_slice(&m.words());
            }
        }
        let mut r = Ok(());
        for c in 0..chunks {
            r = self.send_part(id, data_words + c * HDR_WORDS, HDR_WORDS * 8, true);
            if r.is_err() {
                break;
            }
        }
        self.posted(id, r)
    }

    /// An atomic on PE `pe`'s staged device heap; the reply carries the previous value.
    pub(crate) fn stage_amo(
        &mut self,
        pe: usize,
        d: Domain,
        off: usize,
        width: usize,
        op: AmoOp,
        operand: u64,
    ) -> Result<u64> {
        let id = self.start(pe, d, "atomic", HDR_WORDS + 1)?;
        self.op(id).staged = true;
        self.op(id).result_at = Some(HDR_WORDS * 8);
        let r = self.stage_amo_msg(id, 0, off, width, op, operand, (HDR_WORDS * 8) as u64);
        self.posted(id, r)
    }

    /// Lay out (at word `at` of operation `id`'s buffer) and send an atomic message; the reply's value goes to
    /// byte `result` of the buffer ([`NO_RESULT`]: nowhere).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn stage_amo_msg(
        &mut self,
        id: u64,
        at: usize,
        off: usize,
        width: usize,
        op: AmoOp,
        operand: u64,
        result: u64,
    ) -> Result<()> {
        let (code, cond) = amo_code(op, width);
        let pe = self.op(id).pe;
        let m = Msg {
            kind: MSG_AMO,
            from: self.me as u64,
            id,
            off: off as u64,
            len: code,
            operand,
            cond,
            op: result,
            tok: self.tokens[pe],
        };
        self.op(id).buf[at..at + HDR_WORDS].copy_from_slice(&m.words());
        self.send_part(id, at, HDR_WORDS * 8, true)
    }
}

/// Whether `[off, off + len)` lies in a device heap's first `heap` bytes or in its tail `(offset, length)`: never
/// across the two, nor in the unmapped reserve between them.
pub(crate) fn span_holds(heap: usize, tail: (usize, usize), off: usize, len: usize) -> bool {
    let (t0, tl) = tail;
    off.checked_add(len)
        .is_some_and(|e| e <= heap || (off >= t0 && e <= t0 + tl))
}

/// What of this PE's device heap the staging path and the host proxy serve: its first `heap` bytes (a count that
/// only grows: the chunks the heap's allocations' agreements made known to every PE) and its team-scoped
/// allocations' chunks whose members agreed on them (added once agreed, removed when freed, before their memory
/// is unmapped). Shared by the fabric transport (which raises and edits it) and the spans that serve the heap.
#[derive(Debug, Default)]
pub(crate) struct Served {
    heap: AtomicUsize,
    /// Agreed team chunks `(offset, length)`, ascending, never overlapping.
    team: std::sync::RwLock<Vec<(usize, usize)>>,
}

impl Served {
    /// The first `heap` bytes served, no team chunk.
    pub(crate) fn new(heap: usize) -> Served {
        Served {
            heap: AtomicUsize::new(heap),
            team: Default::default(),
        }
    }

    /// The heap's bytes served.
    pub(crate) fn heap(&self) -> usize {
        self.heap.load(Ordering::Acquire)
    }

    /// Every PE agreed the heap grew to `len` bytes: serve them.
    pub(crate) fn raise(&self, len: usize) {
        self.heap.fetch_max(len, Ordering::AcqRel);
    }

    /// The members of a team-scoped allocation agreed on its chunk `[off, off + len)` of this PE: serve it.
    pub(crate) fn add_team(&self, off: usize, len: usize) {
        let mut t = self.team.write().unwrap_or_else(|p| p.into_inner());
        if let Err(i) = t.binary_search_by_key(&off, |&(s, _)| s) {
            t.insert(i, (off, len));
        }
    }

    /// The team chunk at `off` is freed: no longer served (before its memory goes).
    pub(crate) fn remove_team(&self, off: usize) {
        let mut t = self.team.write().unwrap_or_else(|p| p.into_inner());
        t.retain(|&(s, _)| s != off);
    }

    /// Whether `[off, off + len)` lies in the heap's served part or its tail `(offset, length)`
    /// ([`span_holds`]), or in one served team chunk.
    pub(crate) fn holds(&self, tail: (usize, usize), off: usize, len: usize) -> bool {
        if span_holds(self.heap(), tail, off, len) {
            return true;
        }
        let Some(end) = off.checked_add(len) else {
            return false;
        };
        let t = self.team.read().unwrap_or_else(|p| p.into_inner());
        t.iter().any(|&(s, l)| off >= s && end <= s + l)
    }
}

/// This PE's device heap as the staging path and the host proxy reach it, at device address `base` of `rt`'s
/// context: what of it is served ([`Served`]: the agreed part of the heap and its agreed team chunks) and the
/// device library's scratch tail, `tail.1` bytes at `tail.0`, copied and updated on the device's service lane.
/// Every access is bounded by one of those ranges; the unmapped space between them (a growable heap's reserve,
/// a team chunk not agreed on yet or freed) is never reached.
pub(crate) struct DeviceSpan {
    rt: Arc<ZeRuntime>,
    base: usize,
    heap: Arc<Served>,
    tail: (usize, usize),
}

impl DeviceSpan {
    /// The heap at device address `base` with its served part `heap` and its tail `(offset, length)` mapped: an
    /// allocation of `rt`'s context that stays allocated as long as this span (the runtime's heap outlives the
    /// transport). `heap` covers only memory that stays mapped while it is served (chunks whose growth every PE
    /// agreed on; team chunks until they are freed, removed from it before they are unmapped).
    pub(crate) fn new(
        rt: Arc<ZeRuntime>,
        base: usize,
        heap: Arc<Served>,
        tail: (usize, usize),
    ) -> DeviceSpan {
        DeviceSpan {
            rt,
            base,
            heap,
            tail,
        }
    }

    /// Where the last reachable byte ends (the tail's end, or the heap's when it has no tail): what an access's
    /// range and alignment are checked against first.
    pub(crate) fn end(&self) -> usize {
        if self.tail.1 > 0 {
            self.tail.0 + self.tail.1
        } else {
            self.heap.heap()
        }
    }

    /// Whether `[off, off + len)` lies in what is served or in the tail ([`Served::holds`]).
    pub(crate) fn holds(&self, off: usize, len: usize) -> bool {
        self.heap.holds(self.tail, off, len)
    }

    /// The device address of `[off, off + len)`, which must lie in what is served or in the tail.
    fn at(&self, off: usize, len: usize) -> Result<usize> {
        if !self.holds(off, len) {
            let (heap, (t0, tl)) = (self.heap.heap(), self.tail);
            return Err(Error::Transport {
                transport: "fabric",
                message: format!(
                    "a staged access of {len} bytes at {off} outside the device heap's {heap} reachable bytes, \
                     its agreed team chunks and its {tl}-byte scratch tail at {t0}"
                ),
            });
        }
        Ok(self.base + off)
    }

    /// Write `src` at `off`.
    pub(crate) fn write(&self, off: usize, src: &[u8]) -> Result<()> {
        let at = self.at(off, src.len())?;
        // SAFETY: [at, at + len) lies in this PE's device heap (checked just above); the source is host memory.
        unsafe { self.rt.service_copy(at as *mut u8, src.as_ptr(), src.len()) }
    }

    /// Read `dst.len()` bytes at `off` into `dst`.
    pub(crate) fn read(&self, off: usize, dst: &mut [u8]) -> Result<()> {
        let at = self.at(off, dst.len())?;
        // SAFETY: as in `write`, in the other direction into `dst` (host memory of its length).
        unsafe {
            self.rt
                .service_copy(dst.as_mut_ptr(), at as *const u8, dst.len())
        }
    }

    /// Atomic `op` of `width` bytes at `off` (aligned: checked by the caller); the previous value.
    pub(crate) fn amo(&self, off: usize, width: usize, op: AmoOp, operand: u64) -> Result<u64> {
        let at = self.at(off, width)?;
        self.rt.service_amo(at as *mut u8, width, op, operand)
    }
}

#[cfg(test)]
mod tests {
    use super::{host_target, span_holds, HostRegion, Told, Waiting};
    use crate::types::AmoOp;
    use proptest::prelude::*;

    proptest! {
        /// Told puts-with-signal of 1-3 writes from two senders (and signals that follow none), their writes'
        /// landings and their signals handled in any order: each signal is applied once, only after every write
        /// of its own put landed, and a write that never lands holds back its own signal only.
        #[test]
        fn a_signal_is_applied_only_after_its_own_writes_landed(
            ops in proptest::collection::vec((0usize..2, 0u64..4), 1..12),
            keys in proptest::collection::vec(any::<u32>(), 48),
            lost in any::<u16>(),
        ) {
            let (mut tx, mut rx) = (Told::default(), Told::default());
            // Every event: (sender, op, None for a write's landing, Some(writes) for the signal).
            let mut events = Vec::new();
            let mut tells = Vec::new();
            for (id, &(from, writes)) in ops.iter().enumerate() {
                let tell = if writes == 0 { 0 } else { tx.next() };
                tells.push(tell);
                for _ in 0..writes {
                    events.push((from, id, None));
                }
                events.push((from, id, Some(writes)));
            }
            // One write may be lost (it failed at its target): its landing never comes.
            let lost = (lost as usize) % events.len();
            let lost_op = match events[lost] {
                (_, id, None) => Some(id),
                _ => None,
            };
            // An order: each event tagged with a random key, sorted by it.
            let mut order: Vec<_> = events
                .iter()
                .enumerate()
                .filter(|&(i, _)| lost_op.is_none() || i != lost)
                .map(|(i, &e)| (keys[i % keys.len()].wrapping_mul(i as u32 + 1), i, e))
                .collect();
            order.sort();
            let mut landed = vec![0u64; ops.len()];
            let mut applied: Vec<(usize, u64)> = Vec::new();
            for &(_, _, (from, id, sig)) in &order {
                match sig {
                    None => {
                        landed[id] += 1;
                        if let Some(w) = rx.landed(from, tells[id]) {
                            applied.push((w.id as usize, landed[w.id as usize]));
                        }
                    }
                    Some(writes) => {
                        let w = Waiting { from, tell: tells[id], left: writes, word: 0, op: AmoOp::Set, operand: 0, id: id as u64, reply_op: 0 };
                        if rx.ready(w) {
                            applied.push((id, landed[id]));
                        }
                    }
                }
            }
            // Every signal but the lost write's once, each after all its writes landed.
            let mut ids: Vec<_> = applied.iter().map(|a| a.0).collect();
            ids.sort();
            let want: Vec<_> = (0..ops.len()).filter(|&i| Some(i) != lost_op).collect();
            prop_assert_eq!(ids, want);
            for &(id, seen) in &applied {
                prop_assert_eq!(seen, ops[id].1, "op {} signalled after {} of its {} writes", id, seen, ops[id].1);
            }
            prop_assert_eq!(rx.waiting.len(), usize::from(lost_op.is_some()));
        }
    }

    #[test]
    fn a_put_signal_message_reaches_only_inside_the_region_its_key_names() {
        let regions = [
            HostRegion {
                key: 7,
                base: 4096,
                len: 1024,
            },
            HostRegion {
                key: 9,
                base: 65536,
                len: 64,
            },
        ];
        // Inside: data to the last byte, the last aligned word as the signal.
        let r = host_target(&regions, 7, 1000, 24, 1016).expect("inside");
        assert_eq!((r.key, r.base, r.len), (7, 4096, 1024));
        assert!(host_target(&regions, 9, 0, 56, 56).is_ok());
        // Another key, data past the end or wrapping, the signal past the end or unaligned.
        let e = host_target(&regions, 8, 0, 8, 8).unwrap_err();
        assert!(e.contains("key 0x8"), "{e}");
        for (off, len, sig) in [
            (1000, 25, 0),
            (usize::MAX, 2, 0),
            (0, 8, 1020),
            (0, 8, 1017),
        ] {
            let e = host_target(&regions, 7, off, len, sig).unwrap_err();
            assert!(
                e.contains("outside the region of 1024 bytes"),
                "{off} {len} {sig}: {e}"
            );
        }
        // Each key's own bounds: region 9 is 64 bytes.
        assert!(host_target(&regions, 9, 0, 65, 0).is_err());
    }

    #[test]
    fn a_device_heap_is_served_in_its_agreed_chunks_and_tail_only() {
        // A heap of 2 pages agreed on, a reserve up to 16 pages, a tail of 100 bytes at 16 pages.
        let (page, heap, tail) = (4096, 8192, (16 * 4096, 100));
        let holds = |off: usize, len: usize| span_holds(heap, tail, off, len);
        assert!(
            holds(0, heap) && holds(heap - 8, 8) && holds(tail.0, 100) && holds(tail.0 + 92, 8)
        );
        // The unmapped reserve (a chunk mapped but not yet agreed on, or never mapped), across either boundary,
        // past the tail, and a length that wraps: refused.
        for (off, len) in [
            (heap, 1),
            (heap - 8, 16),
            (3 * page, 8),
            (tail.0 - 8, 16),
            (tail.0 + 96, 8),
            (tail.0 + 100, 1),
            (usize::MAX - 3, 8),
        ] {
            assert!(!holds(off, len), "[{off}, +{len}) is served");
        }
        // Raised after an agreement: the new chunk is served.
        assert!(span_holds(4 * page, tail, 3 * page, 8));
    }

    #[test]
    fn a_team_chunk_is_served_only_while_agreed() {
        let (page, tail) = (4096, (16 * 4096, 100));
        let s = super::Served::new(2 * page);
        let team = (8 * page, 2 * page);
        assert!(
            !s.holds(tail, team.0, 8),
            "a team chunk not agreed on is served"
        );
        s.add_team(team.0, team.1);
        assert!(s.holds(tail, team.0, 8) && s.holds(tail, team.0, team.1));
        // Across its end, before its start, from the heap into it: refused.
        for (off, len) in [
            (team.0 + team.1 - 8, 16),
            (team.0 - 8, 16),
            (page, 8 * page),
        ] {
            assert!(!s.holds(tail, off, len), "[{off}, +{len}) is served");
        }
        s.remove_team(team.0);
        assert!(!s.holds(tail, team.0, 8), "a freed team chunk is served");
        assert!(s.holds(tail, 0, 8), "the heap is no longer served");
    }
}
