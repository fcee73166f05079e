//! The gathering exchange ([`Ctx::gather`]): every member contributes one message, the same for every other
//! member (a block of `fcollect`, a reduction's source, a broadcast root's data), and every member receives all of
//! them, in `ceil(log2 n)` rounds instead of the one all-to-all round of [`Ctx::exchange`] (`n - 1` messages sent
//! and read by every member). It is Bruck's allgather on the dissemination pattern: in round `k` each member sends
//! the first `min(2^k, n - 2^k)` blocks it holds (its own, then those of the members after it) to the member
//! `2^k` before it and appends what the member `2^k` after it sends; after the last round it holds every block.
//!
//! Every block carries its member's argument digest and verdict, so every member learns every verdict and digest,
//! as in the exchange: every member fails or none does. Messages use the exchange area with the exchange's layout
//! (the message of member `s` in region `s` of the receiver, its flag in the region's first word), so a flag word of
//! one protocol is never a payload word of the other, whatever the team's calls alternate between.
//!
//! A member that cannot go on (a message too large for its region, a round sender found in another kind of
//! collective at this sequence number, a message it cannot parse) sends *poisoned* (empty, marked) messages for
//! the rounds it has left, so every member still hears once per round and finishes the rounds; then every
//! member judges the published identities, like the exchange's failure path.

use super::{layout, Ctx, Protocol, COMMON, EXCHANGE_MARK, SEQ, STATUS, STATUS_OK};
use crate::error::{Error, Result};
use crate::team::{Agreement, Messages};
use crate::transport::AmoOp;

/// First info word of the identity of a call that runs as a gathering exchange.
pub(super) const GATHER_MARK: u64 = 0x4758_4843_5254_4147;
const _: () = assert!(GATHER_MARK != EXCHANGE_MARK);

/// Bytes of a block's header inside a round message (of the gathering exchange and of the Bruck exchange): the
/// member's argument digest, then its payload length and verdict (`len << 1 | failed`).
pub(super) const BLOCK_HEADER: usize = 16;

/// Header word of a poisoned round message (its sender could not go on).
pub(super) const POISON: u64 = 1;

/// Bytes of a round message's header (words 1 and 2 of the region, after its flag): the payload length
/// (`len << 1`, or [`POISON`]) and the count word (the number of blocks; the Bruck exchange adds its tag).
pub(super) const MSG_HEADER: usize = 16;
const _: () = assert!(MSG_HEADER == 8 * (layout::EXCH_HEADER - 1));

/// Rounds of an exchange in rounds over `n` members: `ceil(log2 n)`.
pub(super) fn rounds(n: usize) -> usize {
    if n <= 1 {
        0
    } else {
        (usize::BITS - (n - 1).leading_zeros()) as usize
    }
}

/// Blocks sent in round `k` of a gathering exchange over `n` members.
fn round_blocks(n: usize, k: usize) -> usize {
    let dist = 1usize << k;
    dist.min(n - dist)
}

/// Parse the block at `at` of `buf`: (digest, failed, payload range), or `None` when it does not fit.
pub(super) fn block(buf: &[u8], at: usize) -> Option<(u64, bool, std::ops::Range<usize>)> {
    let word = |i: usize| -> Option<u64> {
        buf.get(i..i.checked_add(8)?)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
    };
    let (dig, sl) = (word(at)?, word(at.checked_add(8)?)?);
    let start = at + BLOCK_HEADER;
    let end = start.checked_add(usize::try_from(sl >> 1).ok()?)?;
    (end <= buf.len()).then_some((dig, sl & 1 != 0, start..end))
}

/// Byte end of the first `count` blocks of `buf` (`None` when it holds fewer).
fn blocks_end(buf: &[u8], count: usize) -> Option<usize> {
    (0..count).try_fold(0, |at, _| block(buf, at).map(|(_, _, r)| r.end))
}

impl Ctx<'_> {
    /// Whether a gathering exchange carries blocks of up to `block` bytes, `holders` of the members having a
    /// non-empty one (every member for `fcollect` and the reductions, the root for a broadcast): the largest
    /// round's message, `min(2^k, n - 2^k)` blocks with their headers, fits in a region of the exchange area.
    pub(crate) fn gather_fits(&self, block: usize, holders: usize) -> bool {
        let n = self.n();
        let cap = self.exchange_capacity();
        (0..rounds(n)).all(|k| {
            let m = round_blocks(n, k);
            m.checked_mul(BLOCK_HEADER)
                .zip(m.min(holders).checked_mul(block))
                .and_then(|(h, d)| h.checked_add(d))
                .is_some_and(|b| b <= cap)
        })
    }

    /// The gathering exchange of the collective `common` (module docs): this PE's verdict `ok`, its argument digest
    /// `dig` and its message `mine`; `recv` gets every member's message in team order (empty ones from a member
    /// that failed). Returns who failed and whose digest differs, as [`Ctx::exchange`] does, or the verdict of the
    /// published identities when the rounds could not complete.
    pub(crate) fn gather(
        &mut self,
        common: [u64; COMMON],
        ok: bool,
        dig: u64,
        mine: &[u8],
        recv: &mut Messages,
    ) -> Result<Agreement> {
        use layout::*;
        let (n, me) = (self.n(), self.idx());
        let cap = self.exchange_capacity();
        let seq = self.begin_rounds(recv)?;
        let mut out = Agreement::default();
        if n == 1 {
            recv.push(if ok { mine } else { &[] });
            out.failed = (!ok).then_some(0);
            return Ok(out);
        }
        let at = self.defer_exchange_identity(common, GATHER_MARK, ok, seq)?;
        let region = super::exchange_region_words(n);
        let base = EXCH + (seq % 2) as usize * EXCH_PARITY_WORDS;
        // The blocks held so far, this PE's first, each with its header, after the 16 bytes where each round's
        // message header is written (a message goes out as one contiguous copy).
        let mut have = std::mem::take(&mut self.st.xbuf);
        have.clear();
        have.resize(MSG_HEADER, 0);
        have.extend_from_slice(&dig.to_le_bytes());
        let own = if ok { mine } else { &[] };
        have.extend_from_slice(&(((own.len() as u64) << 1) | u64::from(!ok)).to_le_bytes());
        have.extend_from_slice(own);
        let mut poisoned = false;
        let r = self.gather_rounds_run(seq, base, region, cap, &mut have, &mut poisoned);
        if let Err(e) = r {
            self.st.xbuf = have;
            return Err(e);
        }
        if !poisoned {
            // Held in the order me, me + 1, ...: team order starts at block n - me.
            let held = &have[MSG_HEADER..];
            let split = blocks_end(held, (n - me) % n);
            match split.filter(|_| blocks_end(held, n) == Some(held.len())) {
                None => poisoned = true,
                Some(split) => {
                    let mut i = 0;
                    for part in [split..held.len(), 0..split] {
                        let mut p = part.start;
                        while p < part.end {
                            let Some((d, failed, r)) = block(held, p) else {
                                break;
                            };
                            recv.push(&held[r.clone()]);
                            out.note(i, failed, d != dig);
                            p = r.end;
                            i += 1;
                        }
                    }
                }
            }
        }
        self.st.xbuf = have;
        if poisoned {
            return self.rounds_failed(at, seq);
        }
        Ok(out)
    }

    /// The rounds of [`Ctx::gather`]: `have` grows to every member's block, or `poisoned` is set (and poisoned
    /// messages sent for the rounds left).
    fn gather_rounds_run(
        &mut self,
        seq: u64,
        base: usize,
        region: usize,
        cap: usize,
        have: &mut Vec<u8>,
        poisoned: &mut bool,
    ) -> Result<()> {
        use layout::*;
        let (n, me) = (self.n(), self.idx());
        let mine = base + me * region;
        for k in 0..rounds(n) {
            let dist = 1usize << k;
            let count = round_blocks(n, k);
            let (to, from) = ((me + n - dist) % n, (me + dist) % n);
            // Send: the first `count` blocks held, or a poisoned message.
            let end = if *poisoned {
                None
            } else {
                blocks_end(&have[MSG_HEADER..], count).filter(|&e| e <= cap)
            };
            *poisoned |= end.is_none();
            self.round_send(to, mine, seq, have, end, count as u64)?;
            let r = base + from * region;
            let taken = self.round_take(r, from, seq, count as u64, cap, &|| {
                format!("gather round {k}")
            })?;
            let Some(len) = taken.filter(|_| !*poisoned) else {
                *poisoned = true;
                continue;
            };
            let start = have.len();
            have.resize(start + len, 0);
            self.local_win()
                .read(self.word(r + EXCH_HEADER), &mut have[start..])?;
            // Exactly `count` whole blocks, or the message is not one of this call's.
            if blocks_end(&have[start..], count) != Some(len) {
                have.truncate(start);
                *poisoned = true;
            }
        }
        Ok(())
    }

    /// The start of an exchange in rounds: this PE's operations complete, the call's sequence number taken, `recv`
    /// emptied.
    pub(super) fn begin_rounds(&mut self, recv: &mut Messages) -> Result<u64> {
        self.sh.quiet()?;
        self.st.seq += 1;
        recv.clear();
        Ok(self.st.seq)
    }

    /// Send a round message to member `to`, into its region `mine` (this PE's) of the exchange area: `buf` holds
    /// the header's room ([`MSG_HEADER`] bytes) then the payload, of which the first `body` bytes go (`None`: a
    /// poisoned message, no payload); `count` is the count word.
    pub(super) fn round_send(
        &mut self,
        to: usize,
        mine: usize,
        seq: u64,
        buf: &mut [u8],
        body: Option<usize>,
        count: u64,
    ) -> Result<()> {
        let hw = body.map_or(POISON, |e| (e as u64) << 1);
        buf[..8].copy_from_slice(&hw.to_le_bytes());
        buf[8..MSG_HEADER].copy_from_slice(&count.to_le_bytes());
        let _issued = self.win(to)?.put_signal_nbi(
            self.word(mine + 1),
            &buf[..MSG_HEADER + body.unwrap_or(0)],
            self.word(mine),
            AmoOp::Set,
            seq,
        )?;
        // The first round's message is on its way: this PE's identity follows ([`Ctx::publish_deferred`]).
        self.publish_deferred()
    }

    /// Wait for the round message whose region (in this PE's exchange area) starts at word `r`, sent by member
    /// `from`: its payload length when it is one of this call's (not poisoned, count word `count`, at most `cap`
    /// bytes), else `None` (also when `from` runs this call as an agreement or an exchange: it will never send).
    /// `what` names the round for a timeout.
    pub(super) fn round_take(
        &self,
        r: usize,
        from: usize,
        seq: u64,
        count: u64,
        cap: usize,
        what: &dyn Fn() -> String,
    ) -> Result<Option<usize>> {
        let flag = self.local_word(r);
        let mut other = false;
        let mut polls = 0u32;
        let pe = self.pe(from);
        self.sh.wait_for(
            self.op,
            &|| format!("{}: waiting for PE {pe}'s message", what()),
            || {
                if flag.load()? >= seq {
                    return Ok(true);
                }
                polls = polls.wrapping_add(1);
                if super::identity_poll_due(polls) {
                    other = matches!(self.member_protocol(from, seq)?, Some(p) if p != Protocol::Gather);
                }
                Ok(other)
            },
        )?;
        if other {
            return Ok(None);
        }
        let mut head = [0u8; MSG_HEADER];
        self.local_win().read(self.word(r + 1), &mut head)?;
        let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or_default());
        let (hw, got) = (word(&head[..8]), word(&head[8..]));
        let len = usize::try_from(hw >> 1).unwrap_or(usize::MAX);
        Ok((hw & POISON == 0 && got == count && len <= cap).then_some(len))
    }

    /// The failure path of an exchange in rounds (gathering or Bruck) that could not complete: every member's
    /// identity once published, then the shared verdict (as the exchange's); when every identity agrees
    /// (argument checks off: members passed different sizes) this PE fails with a state error.
    pub(super) fn rounds_failed(&mut self, at: usize, seq: u64) -> Result<Agreement> {
        let all = self.mismatch_identities(at, seq)?;
        let checking = self.sh.cfg.check_symmetry;
        let cmp = if checking { COMMON } else { 1 };
        let differ = all
            .iter()
            .any(|w| w[STATUS] != STATUS_OK || w[..cmp] != all[0][..cmp] || w[SEQ] != seq);
        if differ {
            return Err(self.verdict(&all, checking));
        }
        Err(Error::State(format!(
            "{}: the exchange in rounds could not complete (a message exceeded its region or did not parse: \
             did the members pass different sizes? argument checks are off)",
            self.op
        )))
    }
}
