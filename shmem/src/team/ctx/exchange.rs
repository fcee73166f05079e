//! The exchange ([`Ctx::exchange`]): every member sends one message to every other, with the call's identity in
//! each message's header, in the team slot's exchange area; the entries of the exchanges and of the gathering
//! exchange (`gather.rs`).

use super::*;

/// Words of one member's message region in one buffer of the exchange area, for a team of `n`: whole cache lines
/// where a line fits (the area starts on one), and 0 when a region would not hold the header and one payload word.
pub(crate) fn exchange_region_words(n: usize) -> usize {
    Sizes::lookup(n).region
}

/// Payload bytes one member's message region holds in a team of `n` (0 when the team has too many members for the
/// exchange area).
pub(crate) fn exchange_capacity(n: usize) -> usize {
    Sizes::lookup(n).capacity
}

/// Payload bytes by which the one-round forms of a team of `n` size their messages ([`layout::EAGER_PARITY_WORDS`];
/// 0 when that share would not hold the header and one payload word).
pub(crate) fn eager_capacity(n: usize) -> usize {
    Sizes::lookup(n).eager
}

/// The exchange's sizes for a team of `n` ([`exchange_region_words`], [`exchange_capacity`], [`eager_capacity`]),
/// computed at compile time for the teams of up to [`SIZED_TEAMS`] members: every exchange reads them several
/// times, and each computation divides by the team size.
#[derive(Clone, Copy)]
struct Sizes {
    region: usize,
    capacity: usize,
    eager: usize,
}

impl Sizes {
    /// The sizes for a team of `n`: from [`SIZES`], computed for a larger team.
    fn lookup(n: usize) -> Sizes {
        SIZES.get(n).copied().unwrap_or_else(|| Sizes::of(n))
    }

    const fn of(n: usize) -> Sizes {
        let n = if n == 0 { 1 } else { n };
        let w = layout::EXCH_PARITY_WORDS / n;
        let region = if w >= 8 {
            w & !7
        } else if w > layout::EXCH_HEADER {
            w
        } else {
            0
        };
        let eager = layout::EAGER_PARITY_WORDS / n;
        let eager = if eager < region { eager } else { region };
        Sizes {
            region,
            capacity: region.saturating_sub(layout::EXCH_HEADER) * 8,
            eager: eager.saturating_sub(layout::EXCH_HEADER) * 8,
        }
    }
}

/// The largest team whose sizes [`SIZES`] holds.
const SIZED_TEAMS: usize = 128;

const SIZES: [Sizes; SIZED_TEAMS + 1] = {
    let mut t = [Sizes {
        region: 0,
        capacity: 0,
        eager: 0,
    }; SIZED_TEAMS + 1];
    let mut n = 0;
    while n < t.len() {
        t[n] = Sizes::of(n);
        n += 1;
    }
    t
};

/// Cache lines of a message loaded with its flag while waiting for it ([`Ctx::message_lines`]).
pub(super) const TOUCH_LINES: usize = 2;
/// Payload bytes of a message built on the stack (a longer one is built in the team's buffer).
const SMALL_PAYLOAD: usize = 120;
/// Payload bytes read with a received message's header word (the rest, if any, in a second read): 32 bytes in
/// all, a copy without a call (`sys::copy`).
const HEAD_PAYLOAD: usize = 24;
/// The bits of a one-round message's header word that hold the digest (its top 48 bits; below them the payload
/// length and the verdict, `len << 1 | failed`, [`layout::EXCH_PAYLOAD`]).
const DIGEST_BITS: u64 = !0xffff;

/// The 48 bits of the argument digest `dig` that a one-round message carries: its top bits once mixed ([`digest`]),
/// so that digests differing in their low bits alone (a layer above may pass small numbers) still differ.
fn digest_tag(dig: u64) -> u64 {
    digest(&[dig]) & DIGEST_BITS
}

/// A one-round message's header word: the digest's tag ([`digest_tag`]), the payload length `len` (below 2^15: it
/// fits the exchange area) and the sender's verdict.
fn header_word(tag: u64, len: usize, failed: bool) -> u64 {
    tag | ((len as u64) << 1) | u64::from(failed)
}

/// A header word's fields ([`header_word`]): the digest's tag, the payload length, the verdict.
fn header_fields(hw: u64) -> (u64, usize, bool) {
    (
        hw & DIGEST_BITS,
        ((hw & !DIGEST_BITS) >> 1) as usize,
        hw & 1 != 0,
    )
}
/// Members awaited later whose flags are loaded with the awaited one's (teams of up to `AHEAD + 2`: every one).
const AHEAD: usize = 15;

impl<'a> Ctx<'a> {
    /// Payload bytes one member may send each other member in one [`Ctx::exchange`] (0 when the team has too
    /// many members for the exchange area).
    pub(crate) fn exchange_capacity(&self) -> usize {
        exchange_capacity(self.n())
    }

    /// One signalled all-to-all exchange that is at the same time the agreement of a collective of a layer above
    /// named `op` (see [`Shmem::team_exchange`]): every member puts its argument digest, its verdict on its own
    /// arguments and its message for that member (`send`'s entry) into that member's region of the exchange area
    /// and raises the region's flag to the sequence number, then waits for every member's flag. Every member so
    /// learns every verdict and digest: the outcome ([`crate::team::Agreement`]) is the same everywhere, after one
    /// message latency and without a dissemination. `recv` gets every member's message (this PE's own included;
    /// empty ones from a member that failed). A member found in another collective of the team at this sequence
    /// number makes the call fail with [`Error::Mismatch`].
    pub(crate) fn exchange(
        &mut self,
        common: [u64; COMMON],
        ok: bool,
        dig: u64,
        send: &crate::team::Messages,
        recv: &mut crate::team::Messages,
    ) -> Result<crate::team::Agreement> {
        use layout::*;
        let op = self.op;
        let (n, me) = (self.n(), self.idx());
        let cap = self.exchange_capacity();
        // A bad message list is this PE's error, reported after the exchange (so that nobody waits for it). A PE
        // that failed already sends empty messages.
        let local = if !ok {
            Ok(())
        } else if send.ends.len() != n
            || send.ends.windows(2).any(|e| e[0] > e[1])
            || send.ends.last().is_some_and(|&e| e > send.data.len())
        {
            Err(Error::invalid(
                "send",
                format!("{} message ends", send.ends.len()),
                format!("{op}: one message per team member ({n}), ends ascending within the data"),
            ))
        } else if let Some(i) = (0..n).find(|&i| n > 1 && send.get(i).len() > cap) {
            Err(Error::invalid(
                "send",
                format!("{} bytes for team rank {i}", send.get(i).len()),
                format!(
                    "{op}: a message of a team of {n} holds at most {cap} bytes (team_exchange_capacity)"
                ),
            ))
        } else {
            Ok(())
        };
        let ok = ok && local.is_ok();
        self.sh.quiet()?;
        self.st.seq += 1;
        let seq = self.st.seq;
        // The longest message expected (an upper bound, from this call's and the last call's payloads): how many
        // of its lines the wait loads with its flag ([`Ctx::message_lines`]).
        let expect = 8 * EXCH_PAYLOAD + send.longest().max(recv.longest()).min(cap);
        recv.clear();
        let mut out = crate::team::Agreement {
            failed: None,
            differs: None,
        };
        if n == 1 {
            if ok {
                recv.push(send.get(0));
            } else {
                recv.push(&[]);
                out.failed = Some(0);
            }
            local?;
            return Ok(out);
        }
        // This PE's identity is published once its messages are on their way (a member reads it only while it
        // waits for this PE's message, to learn that this PE is in another collective, and on the failure path,
        // which waits for it): the messages leave sooner.
        let at = self.defer_exchange_identity(common, EXCHANGE_MARK, ok, seq)?;
        let region = exchange_region_words(n);
        let base = EXCH + (seq % 2) as usize * EXCH_PARITY_WORDS;
        let mine = base + me * region;
        let mut buf = std::mem::take(&mut self.st.xbuf);
        // A small message (header and payload) is built on the stack, a longer one in the team's buffer behind
        // the same header.
        let mut small = [0u8; 8 + SMALL_PAYLOAD];
        let tag = digest_tag(dig);
        for k in 1..n {
            let p = (me + k) % n;
            let m = if ok { send.get(p) } else { &[] };
            small[..8].copy_from_slice(&header_word(tag, m.len(), !ok).to_le_bytes());
            let msg: &[u8] = if m.len() <= SMALL_PAYLOAD {
                small[8..8 + m.len()].copy_from_slice(m);
                &small[..8 + m.len()]
            } else {
                buf.clear();
                buf.extend_from_slice(&small[..8]);
                buf.extend_from_slice(m);
                &buf
            };
            // Header and payload, then the flag, in one ordered operation.
            let _issued = self.win(p)?.put_signal_nbi(
                self.word(mine + 1),
                msg,
                self.word(mine),
                AmoOp::Set,
                seq,
            )?;
        }
        self.st.xbuf = buf;
        self.publish_deferred()?;
        // Wait for every member's message, in the order they were sent to this PE's neighbours.
        let next = std::cell::Cell::new(1usize);
        let mut other = None;
        let mut polls = 0u32;
        // The flag polled now, resolved once per member (not once per poll).
        let mut flag = self.local_word(base + ((me + 1) % n) * region);
        let mut touch = self.message_lines(base + ((me + 1) % n) * region, expect);
        // The flags of the members awaited after that one (`ahead[j - 2]`: member `me + j`), loaded in every poll
        // too: messages that arrived meanwhile are then read without one cross-core transfer after the other.
        let mut ahead = [None; AHEAD];
        for (j, a) in (2..n).zip(ahead.iter_mut()) {
            *a = self
                .local_win()
                .atomic64(self.word(base + ((me + j) % n) * region));
        }
        // Only the entries members fill are loaded (none at 2 PEs).
        let ahead = &ahead[..n.saturating_sub(2).min(AHEAD)];
        self.sh.wait_for(
            self.op,
            &|| {
                let q = (me + next.get()) % n;
                format!("exchange: waiting for PE {}'s message", self.pe(q))
            },
            || {
                while next.get() < n {
                    let q = (me + next.get()) % n;
                    let f = flag.load()?;
                    // The message's next lines are loaded with its flag, so that they travel in parallel with
                    // the flag's line instead of after it (module docs of `message_lines`).
                    let later = ahead.get(next.get().saturating_sub(1)..).unwrap_or_default();
                    touch.iter().chain(later).flatten().for_each(|a| {
                        a.load(std::sync::atomic::Ordering::Relaxed);
                    });
                    if f >= seq {
                        next.set(next.get() + 1);
                        if next.get() < n {
                            let r = base + ((me + next.get()) % n) * region;
                            flag = self.local_word(r);
                            touch = self.message_lines(r, expect);
                        }
                        continue;
                    }
                    polls = polls.wrapping_add(1);
                    if identity_poll_due(polls)
                        && matches!(self.member_protocol(q, seq)?, Some(p) if p != Protocol::Exchange)
                    {
                        other = Some(q);
                        return Ok(true);
                    }
                    return Ok(false);
                }
                Ok(true)
            },
        )?;
        if other.is_some() {
            // A member in another collective: the agreement's verdict (every member's words compared with member
            // 0's), the same as the members on the other side reach, once every member is in this call (it may
            // still be reading the previous call's messages, in the buffers the next call writes).
            let all = self.mismatch_identities(at, seq)?;
            return Err(self.verdict(&all, true));
        }
        let win = self.local_win();
        // The header and the start of the payload in one read (a small message: all of it).
        let mut h = [0u8; 8 + HEAD_PAYLOAD];
        let head = 8 + HEAD_PAYLOAD.min(cap);
        for i in 0..n {
            if i == me {
                recv.push(if ok { send.get(me) } else { &[] });
                out.note(me, !ok, false);
                continue;
            }
            let r = base + i * region;
            win.read(self.word(r + 1), &mut h[..head])?;
            let (their_tag, len, failed) = header_fields(le_word(&h, 0));
            let len = len.min(cap);
            let first = len.min(head - 8);
            recv.data.extend_from_slice(&h[8..8 + first]);
            if len > first {
                let start = recv.data.len();
                recv.data.resize(start + len - first, 0);
                win.read(self.word(r + EXCH_PAYLOAD) + first, &mut recv.data[start..])?;
            }
            recv.ends.push(recv.data.len());
            out.note(i, failed, their_tag != tag);
        }
        local?;
        Ok(out)
    }

    /// The words that start the cache lines after the first of a message of `bytes` (its header included) at word
    /// `r` of this PE's slot, up to [`TOUCH_LINES`] of them (`None` where the slot has no atomic word).
    ///
    /// A member waiting for a message polls its flag; the flag becomes visible only after the message's other
    /// bytes (they are written before it), but those bytes sit in lines the reader then misses after the flag's:
    /// a second cross-core transfer, one after the other, for any message of more than one line. Loading the
    /// message's other lines in every poll, together with the flag, brings them over in parallel with the flag's
    /// line (2 PEs, 16-64 B fcollect: 0.45 -> 0.37 us, the 8 B figure). `bytes` is an upper bound (from the
    /// payloads of this call and the last); the loads of lines the message does not reach read this PE's own
    /// cached lines.
    pub(super) fn message_lines(
        &self,
        r: usize,
        bytes: usize,
    ) -> [Option<&'a std::sync::atomic::AtomicU64>; TOUCH_LINES] {
        let win = self.local_win();
        let start = self.word(r);
        let end = start + bytes;
        let mut at = (start / 64 + 1) * 64;
        let mut out = [None; TOUCH_LINES];
        if end > at + 64 * TOUCH_LINES {
            // A longer message: its lines are left to the copy that reads it (loading a few of them did not
            // help at 256-512 bytes, and the loads may take lines from the writer while it writes them).
            return out;
        }
        for o in out.iter_mut() {
            if at >= end {
                break;
            }
            *o = win.atomic64(at);
            at += 64;
        }
        out
    }

    /// The start of the exchanges (this one and those in rounds, `gather.rs` and `bruck.rs`): the exchange area
    /// must have a region for every member; this PE's identity for call `seq`, marked with the protocol (`mark`) it
    /// runs, is published once the first message is on its way ([`Ctx::publish_deferred`]). Returns where (the
    /// failure paths read the words back with the other members').
    pub(super) fn defer_exchange_identity(
        &mut self,
        common: [u64; COMMON],
        mark: u64,
        ok: bool,
        seq: u64,
    ) -> Result<usize> {
        self.exchange_area()?;
        let mut info = [0; INFO];
        info[0] = mark;
        let at = self.identity_words(common, info, ok, seq);
        self.deferred = Some(at);
        Ok(at)
    }

    /// The exchange area must have a region for every member.
    fn exchange_area(&self) -> Result<()> {
        if self.exchange_capacity() == 0 {
            return Err(Error::State(format!(
                "{}: a team of {} PEs is too large for the exchange area (team_exchange_capacity is 0)",
                self.op,
                self.n()
            )));
        }
        Ok(())
    }

    /// [`Ctx::enter`] as one exchange: the agreement of the collective `common` (same comparison and same
    /// verdict as the agreement's) whose messages carry its data (`send`, one per member; `recv` gets every
    /// member's). For small messages: the data moves in the same message latency as the verdict.
    pub(crate) fn enter_exchange(
        &mut self,
        common: [u64; COMMON],
        local: Result<()>,
        send: &crate::team::Messages,
        recv: &mut crate::team::Messages,
    ) -> Result<()> {
        let dig = self.call_digest(&common);
        let v = self.exchange(common, local.is_ok(), dig, send, recv)?;
        self.judge(local, v)
    }

    /// [`Ctx::enter_exchange`] as a gathering exchange ([`Ctx::gather`]): this PE's one message `mine` reaches
    /// every member in `ceil(log2 n)` rounds; `recv` gets every member's.
    pub(crate) fn enter_gather(
        &mut self,
        common: [u64; COMMON],
        local: Result<()>,
        mine: &[u8],
        recv: &mut crate::team::Messages,
    ) -> Result<()> {
        let dig = self.call_digest(&common);
        let v = self.gather(common, local.is_ok(), dig, mine, recv)?;
        self.judge(local, v)
    }

    /// The exchange of a collective of a layer above named `op` whose arguments digest to `dig` (see
    /// [`Shmem::team_exchange`]).
    pub(crate) fn exchange_external(
        &mut self,
        op: &str,
        ok: bool,
        dig: u64,
        send: &crate::team::Messages,
        recv: &mut crate::team::Messages,
    ) -> Result<crate::team::Agreement> {
        let common = external_words(op, dig);
        self.exchange(common, ok, dig, send, recv)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header word gives back the payload length and the verdict it was built from, at every length the
    /// exchange area allows, and the tags of digests that differ in any one bit, or that are small numbers, differ.
    #[test]
    fn header_words_keep_length_verdict_and_digest_apart() {
        let max = 8 * layout::EXCH_PARITY_WORDS;
        for (dig, len, failed) in [
            (0, 0, false),
            (u64::MAX, max, true),
            (0x1234_5678, 17, false),
        ] {
            let tag = digest_tag(dig);
            let hw = header_word(tag, len, failed);
            assert_eq!(((hw & !DIGEST_BITS) >> 1) as usize, len, "{dig:#x}");
            assert_eq!(hw & 1 != 0, failed, "{dig:#x}");
            assert_eq!(hw & DIGEST_BITS, tag, "{dig:#x}");
            assert_eq!(header_fields(hw), (tag, len, failed), "{dig:#x}");
        }
        let mut tags: Vec<u64> = (0..4096).map(digest_tag).collect();
        let base = 0x9e37_79b9_7f4a_7c15u64;
        tags.extend((0..64).map(|b| digest_tag(base ^ (1 << b))));
        tags.push(digest_tag(base));
        let n = tags.len();
        tags.sort_unstable();
        tags.dedup();
        assert_eq!(tags.len(), n, "two digests share a tag");
    }
}
