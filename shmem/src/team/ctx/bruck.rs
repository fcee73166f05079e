//! The personalised exchange in rounds ([`Ctx::bruck`]): every member has one block for every member (an
//! `alltoall`'s), and every member receives the block every member has for it, in `ceil(log2 n)` rounds instead
//! of the one all-to-all round of [`Ctx::exchange`] (`n - 1` messages sent and read by every member). It is
//! Bruck's alltoall on the dissemination pattern of the gathering exchange ([`Ctx::gather`]): a member holds `n`
//! blocks, position `j` first holding its block for the member `j` before it; in round `k` it sends every block
//! whose position has bit `k` set to the member `2^k` before it, and puts what the member `2^k` after it sends in
//! the same positions. A block so moves `j` members back in all: after the last round position `j` holds the
//! block the member `j` after this one has for it.
//!
//! Every block carries its *original sender's* argument digest and verdict, which travel with it: after the
//! rounds a member holds one block from every member, with that member's header, so every member learns every
//! verdict and digest, as in the exchange: every member fails or none does.
//!
//! The rounds send and receive as the gathering exchange's do (the message of member `s` in region `s` of the
//! receiver, in the exchange's layout, one message per round to the member `2^k` before), and a member running
//! one publishes the gathering exchange's protocol mark: a gather and a Bruck exchange that meet at one call each
//! receive one message per round, which the other rejects (its count word carries [`BRUCK_TAG`], which no gather,
//! exchange or poisoned message has), and every member finishes its rounds and fails. A member that cannot go on
//! (a message too large for its region, a round sender found in an agreement or an exchange, a message it cannot
//! parse) sends *poisoned* messages for the rounds it has left; then every member judges the published
//! identities, like the exchange's failure path.

use super::gather::{block, rounds, BLOCK_HEADER, GATHER_MARK, MSG_HEADER};
use super::{layout, Ctx, COMMON};
use crate::error::{Error, Result};
use crate::team::{Agreement, Messages};

/// Marks the count word of a Bruck round message: a gathering exchange's count is at most the team size, an
/// exchange's second word a message length (`len << 1 | failed`, below the exchange area's size).
const BRUCK_TAG: u64 = 0x4252_5543_4b00_0000;
const _: () = assert!(BRUCK_TAG & 0xff_ffff == 0);

/// Blocks sent in round `k` over `n` members: the positions `0..n` with bit `k` set.
fn round_blocks(n: usize, k: usize) -> usize {
    let b = 1usize << k;
    ((n >> (k + 1)) << k) + (n % (2 * b)).saturating_sub(b)
}

/// Write a block header (`dig`, `len`, `failed`) at the start of `slot`.
fn set_header(slot: &mut [u8], dig: u64, len: usize, failed: bool) {
    slot[..8].copy_from_slice(&dig.to_le_bytes());
    slot[8..BLOCK_HEADER].copy_from_slice(&(((len as u64) << 1) | u64::from(failed)).to_le_bytes());
}

impl Ctx<'_> {
    /// Whether a Bruck exchange carries blocks of up to `block` bytes: the largest round's message, the blocks
    /// whose position has that round's bit set (about `n / 2`) with their headers, fits in a region of the
    /// exchange area.
    pub(crate) fn bruck_fits(&self, block: usize) -> bool {
        let n = self.n();
        let cap = self.exchange_capacity();
        (0..rounds(n)).all(|k| {
            BLOCK_HEADER
                .checked_add(block)
                .and_then(|b| b.checked_mul(round_blocks(n, k)))
                .is_some_and(|b| b <= cap)
        })
    }

    /// [`Ctx::enter_exchange`] as a Bruck exchange ([`Ctx::bruck`]): `mine` holds this PE's `n` blocks of
    /// `block` bytes, in team order (block `i` for member `i`); `recv` gets every member's block for this PE, in
    /// team order (this PE's own included).
    pub(crate) fn enter_bruck(
        &mut self,
        common: [u64; COMMON],
        local: Result<()>,
        block: usize,
        mine: &[u8],
        recv: &mut Messages,
    ) -> Result<()> {
        let n = self.n();
        let local = local.and_then(|()| {
            if Some(mine.len()) == n.checked_mul(block) {
                Ok(())
            } else {
                Err(Error::State(format!(
                    "{}: {} bytes of blocks for a team of {n} with blocks of {block} bytes",
                    self.op,
                    mine.len()
                )))
            }
        });
        let dig = self.call_digest(&common);
        let v = self.bruck(common, local.is_ok(), dig, block, mine, recv)?;
        self.judge(local, v)
    }

    /// The Bruck exchange of the collective `common` (module docs): this PE's verdict `ok`, its argument digest
    /// `dig` and its blocks `mine` (`n` of `block` bytes, block `i` for member `i`; ignored when not `ok`); `recv`
    /// gets every member's block for this PE in team order (empty ones from a member that failed). Returns who
    /// failed and whose digest differs, as [`Ctx::exchange`] does, or the verdict of the published identities when
    /// the rounds could not complete.
    pub(crate) fn bruck(
        &mut self,
        common: [u64; COMMON],
        ok: bool,
        dig: u64,
        block: usize,
        mine: &[u8],
        recv: &mut Messages,
    ) -> Result<Agreement> {
        use layout::*;
        let (n, me) = (self.n(), self.idx());
        let cap = self.exchange_capacity();
        let seq = self.begin_rounds(recv)?;
        let mut out = Agreement::default();
        let ok = ok && mine.len() >= n.saturating_mul(block);
        if n == 1 {
            recv.push(if ok { &mine[..block] } else { &[] });
            out.failed = (!ok).then_some(0);
            return Ok(out);
        }
        let at = self.defer_exchange_identity(common, GATHER_MARK, ok, seq)?;
        let region = super::exchange_region_words(n);
        let base = EXCH + (seq % 2) as usize * EXCH_PARITY_WORDS;
        // The round message being sent or read (header, then up to `cap` bytes), then the `n` positions, each
        // a block header and room for `block` bytes.
        let slot = BLOCK_HEADER + block;
        let stage = MSG_HEADER + cap;
        let mut buf = std::mem::take(&mut self.st.xbuf);
        buf.clear();
        buf.resize(stage + n * slot, 0);
        let (msg, have) = buf.split_at_mut(stage);
        for (j, s) in have.chunks_exact_mut(slot).enumerate() {
            // Position j: the block for the member j before this PE.
            if ok {
                let t = (me + n - j) % n;
                set_header(s, dig, block, false);
                s[BLOCK_HEADER..].copy_from_slice(&mine[t * block..(t + 1) * block]);
            } else {
                set_header(s, dig, 0, true);
            }
        }
        let mut poisoned = false;
        let r = self.bruck_rounds(seq, base, region, cap, slot, msg, have, &mut poisoned);
        if let Err(e) = r {
            self.st.xbuf = buf;
            return Err(e);
        }
        if !poisoned {
            // Position j holds the block of the member j after this PE: team order starts at position n - me.
            for i in 0..n {
                let s = &have[((i + n - me) % n) * slot..][..slot];
                let Some((d, failed, r)) = self::block(s, 0) else {
                    poisoned = true;
                    recv.clear();
                    break;
                };
                recv.push(&s[r]);
                out.note(i, failed, d != dig);
            }
        }
        self.st.xbuf = buf;
        if poisoned {
            return self.rounds_failed(at, seq);
        }
        Ok(out)
    }

    /// The rounds of [`Ctx::bruck`] over the positions `have` (`n` slots of `slot` bytes), `msg` the round
    /// message: every position ends with the block of the member that far after this PE, or `poisoned` is set
    /// (and poisoned messages sent for the rounds left).
    #[allow(clippy::too_many_arguments)]
    fn bruck_rounds(
        &mut self,
        seq: u64,
        base: usize,
        region: usize,
        cap: usize,
        slot: usize,
        msg: &mut [u8],
        have: &mut [u8],
        poisoned: &mut bool,
    ) -> Result<()> {
        use layout::*;
        let (n, me) = (self.n(), self.idx());
        let mine = base + me * region;
        for k in 0..rounds(n) {
            let dist = 1usize << k;
            let count = round_blocks(n, k);
            let (to, from) = ((me + n - dist) % n, (me + dist) % n);
            let moving = move |j: &usize| j & dist != 0;
            // Send: the blocks at the positions with bit k set, packed, or a poisoned message.
            let mut end = 0usize;
            if !*poisoned {
                for j in (0..n).filter(moving) {
                    let s = &have[j * slot..][..slot];
                    let b = self::block(s, 0)
                        .map(|(_, _, r)| r.end)
                        .filter(|&b| end + b <= cap);
                    let Some(b) = b else {
                        *poisoned = true;
                        break;
                    };
                    msg[MSG_HEADER + end..][..b].copy_from_slice(&s[..b]);
                    end += b;
                }
            }
            let tag = BRUCK_TAG | count as u64;
            self.round_send(to, mine, seq, msg, (!*poisoned).then_some(end), tag)?;
            // Receive round k from `from`, unless it is in an agreement or an exchange at this call.
            let r = base + from * region;
            let taken = self.round_take(r, from, seq, tag, cap, &|| format!("Bruck round {k}"))?;
            let Some(len) = taken.filter(|_| !*poisoned) else {
                *poisoned = true;
                continue;
            };
            let m = &mut msg[MSG_HEADER..][..len];
            self.local_win().read(self.word(r + EXCH_HEADER), m)?;
            // Exactly `count` whole blocks, each fitting a position, or the message is not one of this call's.
            let mut at = 0usize;
            for j in (0..n).filter(moving) {
                let parsed = self::block(m, at).filter(|(_, _, r)| r.len() <= slot - BLOCK_HEADER);
                let Some((d, failed, r)) = parsed else {
                    *poisoned = true;
                    break;
                };
                let s = &mut have[j * slot..][..slot];
                set_header(s, d, r.len(), failed);
                s[BLOCK_HEADER..][..r.len()].copy_from_slice(&m[r.clone()]);
                at = r.end;
            }
            if at != len {
                *poisoned = true;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_blocks_count_the_positions_with_the_bit_set() {
        for n in 1..70usize {
            for k in 0..rounds(n) {
                let want = (0..n).filter(|j| j & (1 << k) != 0).count();
                assert_eq!(round_blocks(n, k), want, "n {n} k {k}");
            }
            assert!(n == 1 || (1usize << rounds(n)) >= n && (1usize << (rounds(n) - 1)) < n);
        }
    }

    /// The rounds' data movement alone (no transport): every member ends with every member's block for it, its
    /// sender's header alongside.
    #[test]
    fn the_rounds_deliver_every_block_to_its_member() {
        for n in 1..20usize {
            // have[p][j] = (original sender, destination)
            let mut have: Vec<Vec<(usize, usize)>> = (0..n)
                .map(|p| (0..n).map(|j| (p, (p + n - j) % n)).collect())
                .collect();
            for k in 0..rounds(n) {
                let dist = 1 << k;
                let sent: Vec<Vec<(usize, usize)>> = have.clone();
                for (p, h) in have.iter_mut().enumerate() {
                    let from = (p + dist) % n;
                    for (j, b) in h.iter_mut().enumerate() {
                        if j & dist != 0 {
                            *b = sent[from][j];
                        }
                    }
                }
            }
            for (p, h) in have.iter().enumerate() {
                for i in 0..n {
                    assert_eq!(h[(i + n - p) % n], (i, p), "n {n} member {p} from {i}");
                }
            }
        }
    }

    #[test]
    fn blocks_out_of_bounds_do_not_parse() {
        let mut b = vec![0u8; 40];
        set_header(&mut b, 7, 24, true);
        assert_eq!(block(&b, 0), Some((7, true, 16..40)));
        set_header(&mut b, 7, 25, false);
        assert_eq!(block(&b, 0), None);
        assert_eq!(block(&b, usize::MAX - 4), None);
        assert_eq!(block(&b, 30), None);
    }
}
