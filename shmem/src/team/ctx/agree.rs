//! The agreement every collective starts with ([`Ctx::enter`], [`Ctx::agree`]): the dissemination all-reduce of
//! "failed" and the lowest and highest digest, with its all-pairs (one round), linear, tree and hierarchical
//! (node-aware) variants, and the judgement of its outcome.

use super::*;

/// Fan-in of the trees inside each node of the hierarchical agreement (a leader hears from up to this many
/// members of its node, each from as many below it).
pub(super) const HIER_FANIN: usize = 8;
const _: () = assert!(HIER_FANIN + 2 < layout::AGREE_ROUNDS);

/// The first word of the agreement's slots for sequence number `seq` (its parity's [`layout::AGREE_ROUNDS`] slots).
fn agree_base(seq: u64) -> usize {
    layout::AGREE + (seq % 2) as usize * layout::AGREE_ROUNDS * layout::AGREE_ROUND_WORDS
}

/// What a member that never sends (it runs the call as an exchange) counts as in the agreement's fold: failed, so
/// the agreement fails everywhere.
const ABSENT: [u64; 3] = [1, 0, u64::MAX];

/// Two agreement messages combined: failed (OR), lowest and highest digest.
pub(super) fn fold3(a: [u64; 3], b: [u64; 3]) -> [u64; 3] {
    [a[0] | b[0], a[1].min(b[1]), a[2].max(b[2])]
}

/// An agreement message's three words as bytes.
fn words_bytes(v: &[u64; 3]) -> [u8; 24] {
    let mut b = [0u8; 24];
    le_words(&mut b, v);
    b
}

/// `v` as little-endian bytes at the start of `b`.
fn le_words(b: &mut [u8], v: &[u64]) {
    for (c, x) in b.chunks_exact_mut(8).zip(v) {
        c.copy_from_slice(&x.to_le_bytes());
    }
}

/// A broadcast's data travelling with the dissemination or all-pairs agreement ([`Ctx::enter_carrying`]): whether
/// this PE holds it yet, its length and its bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Carry {
    /// This PE holds the data (the root from the start, the others once a message brought it).
    pub have: bool,
    /// Bytes of data (at most [`Carry::BYTES`]): a message carries only these.
    pub len: usize,
    /// The data (its first `len` bytes; the rest unused).
    pub bytes: [u8; Carry::BYTES],
}

impl Carry {
    /// Bytes of data one agreement message carries ([`layout::CARRY_WORDS`] words).
    pub const BYTES: usize = 8 * layout::CARRY_WORDS;

    /// `len` bytes of data (at most [`Carry::BYTES`]), held from the start where `have` (the root).
    pub fn new(have: bool, len: usize) -> Carry {
        Carry {
            have,
            len: len.min(Carry::BYTES),
            bytes: [0; Carry::BYTES],
        }
    }
}

/// Bytes of a carrying agreement message after its flag: the three agreement words, `have`, the data.
const CARRY_HEAD: usize = 8 * 4;

/// Messages whose lines after the flag's an all-pairs agreement's poll loads with the flags, when they carry a
/// broadcast ([`Ctx::all_pairs`]): all of them in the teams `Auto` runs it on.
const ALL_PAIRS_LINES: usize = crate::algo::ALL_PAIRS_UP_TO - 1;

impl<'a> Ctx<'a> {
    /// The agreement (see the module docs): publish this call's identity, all-reduce the verdict over the team
    /// (which is also a barrier), and on disagreement fail with the same [`Error::Mismatch`] on every member.
    /// `local` is this PE's verdict on its own arguments: its error is returned first. With `need_info`, returns
    /// every member's info words. Completes this PE's outstanding puts first.
    pub(crate) fn enter(
        &mut self,
        common: [u64; COMMON],
        info: [u64; INFO],
        local: Result<()>,
        need_info: bool,
    ) -> Result<Vec<[u64; INFO]>> {
        let pattern = self.pattern(BarrierAlgo::Auto, false)?;
        self.enter_as(common, info, local, need_info, pattern, None)
    }

    /// Whether the agreement runs as the dissemination or all-pairs on this team, the patterns that can carry a
    /// broadcast's data ([`Ctx::enter_carrying`]).
    pub(crate) fn agreement_carries(&self) -> bool {
        self.pattern(BarrierAlgo::Auto, false)
            .is_ok_and(|p| matches!(p, BarrierAlgo::Dissemination | BarrierAlgo::AllPairs))
    }

    /// [`Ctx::enter`] with a broadcast's data on board (`BroadcastAlgo::Agreement`): the agreement's messages (the
    /// dissemination's or the all-pairs') also carry `carry` (set on the root), so that when the agreement is clean
    /// every member holds the root's data, for the cost of a barrier. Only where [`Ctx::agreement_carries`].
    pub(crate) fn enter_carrying(
        &mut self,
        common: [u64; COMMON],
        local: Result<()>,
        carry: &mut Carry,
    ) -> Result<()> {
        let pattern = match self.pattern(BarrierAlgo::Auto, false)? {
            BarrierAlgo::AllPairs => BarrierAlgo::AllPairs,
            _ => BarrierAlgo::Dissemination,
        };
        self.enter_as(common, [0; INFO], local, false, pattern, Some(carry))?;
        if !carry.have {
            return Err(Error::State(format!(
                "{}: the agreement ended clean without the root's data",
                self.op
            )));
        }
        Ok(())
    }

    fn enter_as(
        &mut self,
        common: [u64; COMMON],
        info: [u64; INFO],
        local: Result<()>,
        need_info: bool,
        pattern: BarrierAlgo,
        carry: Option<&mut Carry>,
    ) -> Result<Vec<[u64; INFO]>> {
        let checking = self.sh.cfg.check_symmetry;
        let (clean, all) = self.agree(
            common,
            info,
            local.is_ok(),
            checking,
            need_info,
            pattern,
            carry,
        )?;
        local?;
        if !clean {
            return Err(self.verdict(&all, checking));
        }
        if all.is_empty() {
            return Ok(Vec::new());
        }
        Ok(all
            .iter()
            .map(|w| {
                let mut inf = [0u64; INFO];
                inf.copy_from_slice(&w[COMMON..STATUS]);
                inf
            })
            .collect())
    }

    /// The agreement of a collective of a layer above, named `op` (at most 40 bytes are kept), whose arguments
    /// digest to `dig`; see [`Shmem::team_agree`].
    pub(crate) fn agree_external(
        &mut self,
        op: &str,
        ok: bool,
        dig: u64,
    ) -> Result<crate::team::Agreement> {
        let common = external_words(op, dig);
        let (clean, all) = self.agree(
            common,
            [0; INFO],
            ok,
            true,
            false,
            self.pattern(BarrierAlgo::Auto, false)?,
            None,
        )?;
        let mut out = crate::team::Agreement {
            failed: None,
            differs: None,
        };
        if clean {
            return Ok(out);
        }
        let seq = all[self.idx()][SEQ];
        // Another call altogether (another kind, or another operation of the layer above): a mismatch.
        let same_call =
            |w: &[u64]| w[0] == common[0] && w[3..COMMON] == common[3..] && w[SEQ] == seq;
        if !all.iter().all(|w| same_call(w)) {
            // The members in this call count as agreeing on its arguments and verdict (this PE's words among
            // them: it published `common`), so that the verdict names the other call.
            let mut all = all;
            for w in all.iter_mut() {
                if same_call(w) {
                    w[1] = common[1];
                    w[STATUS] = STATUS_OK;
                }
            }
            return Err(self.verdict(&all, true));
        }
        out.failed = all.iter().position(|w| w[STATUS] != STATUS_OK);
        out.differs = all.iter().position(|w| w[1] != dig);
        Ok(out)
    }

    /// This PE's error first, then the shared verdict of an exchange whose outcome is `v`.
    pub(super) fn judge(&mut self, local: Result<()>, v: crate::team::Agreement) -> Result<()> {
        local?;
        if v.failed.is_none() && v.differs.is_none() {
            return Ok(());
        }
        let seq = self.st.seq;
        let all = self.identities(identity_base(seq), seq)?;
        Err(self.verdict(&all, self.sh.cfg.check_symmetry))
    }

    /// Publish, all-reduce, and on the slow path (or `need_info`) read every member's identity words. Returns
    /// (every member agreed, every member's words when read: always when they did not agree, this PE's own as
    /// published among them, which the verdicts take as this PE's). With `carry`, the dissemination or the all-pairs
    /// pattern carries a broadcast's data ([`Ctx::enter_carrying`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn agree(
        &mut self,
        common: [u64; COMMON],
        info: [u64; INFO],
        ok: bool,
        compare_all: bool,
        need_info: bool,
        pattern: BarrierAlgo,
        carry: Option<&mut Carry>,
    ) -> Result<(bool, Vec<Vec<u64>>)> {
        self.sh.quiet()?;
        let n = self.n();
        self.st.seq += 1;
        let seq = self.st.seq;
        // In the team state: a barrier allocates nothing (the allocator was a third of its instructions).
        let at = self.identity_words(common, info, ok, seq);
        if n == 1 {
            return Ok((ok, vec![self.st.pending.to_vec()]));
        }
        // The patterns whose messages leave before they read any identity publish this PE's once their first
        // message is on its way (the messages leave sooner); the others read the members' identities.
        if matches!(pattern, BarrierAlgo::Dissemination | BarrierAlgo::AllPairs) {
            self.deferred = Some(at);
        } else {
            self.publish(at)?;
        }
        // What is compared: the whole call, or (argument checks off) the call kind alone.
        let compared = if compare_all { COMMON } else { 1 };
        let mut d = [0u64; 2 + COMMON];
        d[0] = self.team.slot as u64;
        d[1] = seq;
        d[2..2 + compared].copy_from_slice(&common[..compared]);
        let d = &d[..2 + compared];
        // A pattern that fails leaves the deferred store to the context's drop.
        let (failed, lo, hi) = match pattern {
            BarrierAlgo::Linear => self.reduce_linear(seq, at, !ok, compare_all)?,
            BarrierAlgo::Tree => self.reduce_tree(seq, !ok, digest(d))?,
            BarrierAlgo::Hierarchical => self.reduce_hier(seq, !ok, digest(d))?,
            BarrierAlgo::AllPairs => {
                let v = [!ok as u64, digest(d), digest(d)];
                let v = self.all_pairs(seq, v, carry)?;
                (v[0] != 0, v[1], v[2])
            }
            _ => {
                let (n, me) = (self.n(), self.idx());
                let v = [!ok as u64, digest(d), digest(d)];
                let v = self.disseminate(seq, v, n, me, &|k| k, 0, "agreement", carry)?;
                (v[0] != 0, v[1], v[2])
            }
        };
        self.publish_deferred()?;
        let clean = !failed && lo == hi;
        if clean && !need_info {
            return Ok((true, Vec::new()));
        }
        // Slow path (or a call that needs the others' words): read every member's identity, once published (a
        // member that found another in an exchange did not hear from every member).
        let all = self.identities(at, seq)?;
        Ok((clean, all))
    }

    /// The dissemination all-reduce of `v` over `count` members, `member(k)` the team rank of the k-th and this PE
    /// the `mine`-th, in the agreement slots from `first` on (one per round). With `carry`, every message also
    /// carries the broadcast data its sender holds, and a member without it takes it from the first message that
    /// brings it: after the last round every member has heard, directly or not, from every other, the root too.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn disseminate(
        &mut self,
        seq: u64,
        mut v: [u64; 3],
        count: usize,
        mine: usize,
        member: &dyn Fn(usize) -> usize,
        first: usize,
        what: &str,
        mut carry: Option<&mut Carry>,
    ) -> Result<[u64; 3]> {
        use layout::*;
        let base = agree_base(seq);
        let mut dist = 1usize;
        let mut round = 0usize;
        while dist < count {
            if first + round >= AGREE_ROUNDS {
                return Err(Error::State(format!(
                    "{}: {count} members need more than {} agreement rounds",
                    self.op,
                    AGREE_ROUNDS - first
                )));
            }
            let flag = base + (first + round) * AGREE_ROUND_WORDS;
            let to = member((mine + dist) % count);
            match carry.as_deref() {
                Some(c) => self.send_carry(to, flag, &v, c, true, seq)?,
                None => self.send3(to, flag, &v, seq)?,
            }
            self.publish_deferred()?;
            let from_idx = member((mine + count - dist) % count);
            let from = self.pe(from_idx);
            // A carried message longer than the flag's line: its second line is polled with the flag.
            let lines = carry
                .as_deref()
                .map(|c| self.message_lines(flag, 8 + CARRY_HEAD + c.len))
                .unwrap_or_default();
            let got = if self.wait_from_with(
                flag,
                seq,
                from_idx,
                &|| format!("{what} round {round}: waiting for PE {from}"),
                &lines,
            )? {
                match carry.as_deref_mut() {
                    Some(c) => self.read_carry(flag + 1, c, false)?,
                    None => self.read3(flag + 1)?,
                }
            } else {
                // That member is in an exchange: it never sends this round; the agreement fails everywhere.
                ABSENT
            };
            v = fold3(v, got);
            dist <<= 1;
            round += 1;
        }
        Ok(v)
    }

    /// The all-pairs all-reduce of `v` over the team ([`BarrierAlgo::AllPairs`]): this member's message to every
    /// other one (the one `d` members ahead lands in its agreement slot `d - 1`), then one wait for all of theirs:
    /// every poll loads each flag still awaited (and, for a carried message longer than its first line, the lines
    /// after it), so messages that arrive together cross cores together. With `carry`, only the root's messages
    /// hold the data (nobody forwards it): the others' stay in the flag's line.
    fn all_pairs(
        &mut self,
        seq: u64,
        v: [u64; 3],
        mut carry: Option<&mut Carry>,
    ) -> Result<[u64; 3]> {
        use layout::*;
        use std::cell::Cell;
        let (n, me) = (self.n(), self.idx());
        if n - 1 > AGREE_ROUNDS {
            return Err(Error::State(format!(
                "{}: the all-pairs agreement of {n} members needs more than {AGREE_ROUNDS} slots",
                self.op
            )));
        }
        let base = agree_base(seq);
        let slot = |d: usize| base + (d - 1) * AGREE_ROUND_WORDS;
        for d in 1..n {
            let to = (me + d) % n;
            match carry.as_deref() {
                Some(c) => self.send_carry(to, slot(d), &v, c, c.have, seq)?,
                None => self.send3(to, slot(d), &v, seq)?,
            }
        }
        self.publish_deferred()?;
        // The flags as atomic words (`None`: a window without them, loaded through it).
        let mut flags = [None; AGREE_ROUNDS];
        for (f, d) in flags.iter_mut().zip(1..n) {
            *f = self.local_win().atomic64(self.word(slot(d)));
        }
        let mut lines = [None; ALL_PAIRS_LINES * super::exchange::TOUCH_LINES];
        let mut touched = 0;
        if let Some(c) = carry.as_deref() {
            for d in 1..n.min(ALL_PAIRS_LINES + 1) {
                for l in self
                    .message_lines(slot(d), 8 + CARRY_HEAD + c.len)
                    .into_iter()
                    .flatten()
                {
                    lines[touched] = Some(l);
                    touched += 1;
                }
            }
        }
        // Only the lines a carried message reaches (none for a barrier's messages).
        let lines = &lines[..touched];
        // Bit `d - 1`: the message of the member `d` behind is awaited (`pending`), or never comes because that
        // member runs the call as an exchange (`other`).
        let pending = Cell::new(u64::MAX >> (64 - (n - 1)));
        let mut other = 0u64;
        let mut polls = 0u32;
        let first = |rest: u64| (me + n - 1 - rest.trailing_zeros() as usize) % n;
        self.sh.wait_for(
            self.op,
            &|| {
                let rest = pending.get();
                format!(
                    "agreement (all pairs): waiting for {} members, PE {} first",
                    rest.count_ones(),
                    self.pe(first(rest))
                )
            },
            || {
                for l in lines.iter().flatten() {
                    l.load(std::sync::atomic::Ordering::Relaxed);
                }
                let mut rest = pending.get();
                let mut bits = rest;
                while bits != 0 {
                    let i = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let seen = match flags[i] {
                        Some(f) => f.load(std::sync::atomic::Ordering::Acquire),
                        None => self.local_word(slot(i + 1)).load()?,
                    };
                    if seen >= seq {
                        rest &= !(1 << i);
                    }
                }
                if rest != 0 {
                    polls = polls.wrapping_add(1);
                    if identity_poll_due(polls) {
                        let q = first(rest);
                        if matches!(self.member_protocol(q, seq)?, Some(p) if p != Protocol::Agreement) {
                            // That member is in an exchange: it never sends; the agreement fails everywhere.
                            let bit = rest & rest.wrapping_neg();
                            other |= bit;
                            rest &= !bit;
                        }
                    }
                }
                pending.set(rest);
                Ok(rest == 0)
            },
        )?;
        let mut acc = v;
        for d in 1..n {
            let got = if other & (1 << (d - 1)) != 0 {
                ABSENT
            } else {
                match carry.as_deref_mut() {
                    Some(c) => self.read_carry(slot(d) + 1, c, true)?,
                    None => self.read3(slot(d) + 1)?,
                }
            };
            acc = fold3(acc, got);
        }
        Ok(acc)
    }

    /// [`Ctx::send3`] with whether this member holds the broadcast data `c` and, with `data`, the data after the
    /// agreement words: only its `len` bytes (up to 24 of them stay in the flag's cache line, more reach into the
    /// slot's second line).
    fn send_carry(
        &self,
        to: usize,
        flag: usize,
        v: &[u64; 3],
        c: &Carry,
        data: bool,
        seq: u64,
    ) -> Result<()> {
        let mut bytes = [0u8; CARRY_HEAD + Carry::BYTES];
        le_words(&mut bytes, &[v[0], v[1], v[2], c.have as u64]);
        let len = if data { c.len } else { 0 };
        let end = CARRY_HEAD + len;
        bytes[CARRY_HEAD..end].copy_from_slice(&c.bytes[..len]);
        self.send_msg(to, flag, &bytes[..end], seq)
    }

    /// A carrying message's agreement words, and its data into `c` when `c` lacks it and the sender held it (a
    /// sender of another length is in another call: the agreement fails, whatever the bytes). `held_only`: only a
    /// sender that held the data sent it (all-pairs), read after the words when it is taken; otherwise every
    /// message holds `c.len` bytes of it (the dissemination forwards it), read with the words.
    fn read_carry(&self, w: usize, c: &mut Carry, held_only: bool) -> Result<[u64; 3]> {
        let mut b = [0u8; CARRY_HEAD + Carry::BYTES];
        let end = CARRY_HEAD + if held_only { 0 } else { c.len };
        let win = self.local_win();
        win.read(self.word(w), &mut b[..end])?;
        if !c.have && le_word(&b, 3) == 1 {
            c.have = true;
            if held_only {
                win.read(self.word(w) + CARRY_HEAD, &mut c.bytes[..c.len])?;
            } else {
                c.bytes[..c.len].copy_from_slice(&b[CARRY_HEAD..end]);
            }
        }
        Ok([le_word(&b, 0), le_word(&b, 1), le_word(&b, 2)])
    }

    /// Put an agreement message `v` into the slot whose flag is word `flag` of member `to`, and raise the flag to
    /// `seq`: the words then the flag in one ordered operation (a transport that completes later never shows the
    /// flag first).
    pub(super) fn send3(&self, to: usize, flag: usize, v: &[u64; 3], seq: u64) -> Result<()> {
        self.send_msg(to, flag, &words_bytes(v), seq)
    }

    /// [`Ctx::send3`] of any message: `bytes` after the flag word `flag` of member `to`, then the flag raised to
    /// `seq`, in one ordered operation.
    fn send_msg(&self, to: usize, flag: usize, bytes: &[u8], seq: u64) -> Result<()> {
        let _issued = self.win(to)?.put_signal_nbi(
            self.word(flag + 1),
            bytes,
            self.word(flag),
            AmoOp::Set,
            seq,
        )?;
        Ok(())
    }

    /// The agreement's reduction over the team's node layout (the hierarchical barrier, see `groups.rs`). Inside
    /// each group the members form a tree of fan-in [`HIER_FANIN`] rooted at the leader (group rank r's parent is
    /// (r - 1) / fan-in): children write into slots 0..fan-in of their parent's agreement area, the leader combines
    /// its group's verdict, the leaders run the dissemination among themselves in the slots from fan-in + 1 on,
    /// and the verdict of the whole team comes back down each group's tree in slot fan-in. A member found in an
    /// exchange counts as a failure (as in the other patterns).
    pub(super) fn reduce_hier(
        &mut self,
        seq: u64,
        failed: bool,
        dig: u64,
    ) -> Result<(bool, u64, u64)> {
        use layout::*;
        const F: usize = HIER_FANIN;
        let me = self.idx();
        let groups = self.groups();
        let g = groups.group_of[me];
        let mem = &groups.members[g];
        let r = groups.rank_in[me];
        let base = agree_base(seq);
        let slot = |k: usize| base + k * AGREE_ROUND_WORDS;
        let mut v = [failed as u64, dig, dig];
        let children = (F * r + 1..(F * r + F + 1).min(mem.len())).map(|c| mem[c]);
        for (k, c) in children.clone().enumerate() {
            let child = self.pe(c);
            let got = if self.wait_from(slot(k), seq, c, &|| {
                format!("hierarchical barrier: waiting for PE {child} of this node")
            })? {
                self.read3(slot(k) + 1)?
            } else {
                ABSENT
            };
            v = fold3(v, got);
        }
        if r > 0 {
            let parent = mem[(r - 1) / F];
            self.send3(parent, slot((r - 1) % F), &v, seq)?;
            let p = self.pe(parent);
            v = if self.wait_from(slot(F), seq, parent, &|| {
                format!("hierarchical barrier: waiting for the release from PE {p} of this node")
            })? {
                self.read3(slot(F) + 1)?
            } else {
                ABSENT
            };
        } else {
            let leaders = groups.count();
            v = self.disseminate(
                seq,
                v,
                leaders,
                g,
                &|k| groups.leader(k),
                F + 1,
                "hierarchical barrier (node leaders)",
                None,
            )?;
        }
        for c in children {
            self.send3(c, slot(F), &v, seq)?;
        }
        self.count_node_aware(|c| &c.agreements);
        Ok((v[0] != 0, v[1], v[2]))
    }

    /// The agreement's verdict gathered at member 0 and sent back to each (the linear barrier): every member
    /// counts its arrival at member 0, which reads each member's published identity words, computes (failed, lowest
    /// and highest digest) and writes it, then the release flag, into each member's slot.
    pub(super) fn reduce_linear(
        &mut self,
        seq: u64,
        at: usize,
        failed: bool,
        compare_all: bool,
    ) -> Result<(bool, u64, u64)> {
        use layout::*;
        let n = self.n();
        let release = agree_base(seq) + 2 * layout::AGREE_ROUND_WORDS;
        if self.idx() == 0 {
            self.wait(ARRIVE, n as u64 - 1, &|| {
                format!("linear barrier: member 0 waiting for {} arrivals", n - 1)
            })?;
            let cmp = if compare_all { COMMON } else { 1 };
            let mut v = [0u64; 3];
            for i in 0..n {
                let w = self.read_words(i, at, CHECK_WORDS)?;
                let mut d = vec![self.team.slot as u64, w[SEQ]];
                d.extend_from_slice(&w[..cmp]);
                let dig = digest(&d);
                let bad = w[STATUS] != STATUS_OK || (i == 0 && failed);
                v = if i == 0 {
                    [bad as u64, dig, dig]
                } else {
                    [v[0] | bad as u64, v[1].min(dig), v[2].max(dig)]
                };
            }
            for i in 1..n {
                self.send3(i, release, &v, seq)?;
            }
            Ok((v[0] != 0, v[1], v[2]))
        } else {
            self.signal(ARRIVE, 0)?;
            let root = self.pe(0);
            if !self.wait_from(release, seq, 0, &|| {
                format!("linear barrier: waiting for the release from PE {root}")
            })? {
                return Ok((true, 0, u64::MAX));
            }
            let got = self.read3(release + 1)?;
            Ok((got[0] != 0, got[1], got[2]))
        }
    }

    /// The agreement's reduction over a binary tree (the tree barrier): each member combines its children's
    /// (failed, lowest and highest digest) with its own and sends it to its parent; member 0's result comes back
    /// down the tree. Children write into slots 0 and 1 of the parent's agreement area, the parent into slot 2.
    pub(super) fn reduce_tree(
        &mut self,
        seq: u64,
        failed: bool,
        dig: u64,
    ) -> Result<(bool, u64, u64)> {
        use layout::*;
        let (n, me) = (self.n(), self.idx());
        let base = agree_base(seq);
        let slot = |k: usize| base + k * AGREE_ROUND_WORDS;
        let mut v = [failed as u64, dig, dig];
        let children: Vec<usize> = [2 * me + 1, 2 * me + 2]
            .into_iter()
            .filter(|&c| c < n)
            .collect();
        for (k, &c) in children.iter().enumerate() {
            let child = self.pe(c);
            let got = if self.wait_from(slot(k), seq, c, &|| {
                format!("tree barrier: waiting for child PE {child}")
            })? {
                self.read3(slot(k) + 1)?
            } else {
                ABSENT
            };
            v = fold3(v, got);
        }
        let send = |ctx: &Self, to: usize, k: usize, v: &[u64; 3]| -> Result<()> {
            ctx.send3(to, slot(k), v, seq)
        };
        if me > 0 {
            let parent = (me - 1) / 2;
            send(self, parent, (me - 1) % 2, &v)?;
            let p = self.pe(parent);
            v = if self.wait_from(slot(2), seq, parent, &|| {
                format!("tree barrier: waiting for the release from PE {p}")
            })? {
                self.read3(slot(2) + 1)?
            } else {
                ABSENT
            };
        }
        for &c in &children {
            send(self, c, 2, &v)?;
        }
        Ok((v[0] != 0, v[1], v[2]))
    }
}
