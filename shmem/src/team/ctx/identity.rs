//! The identity every collective call carries: the compared and per-PE words of a call ([`CallId`], its
//! argument words, [`describe`], [`digest`]), how a member tells which protocol a peer runs ([`Protocol`]), and
//! the context's reads of the members' published identities (the slow path of a mismatch, its verdict).

use super::*;

/// Words of a call's identity compared across PEs: `[call, algorithm, type, args...]`.
pub(crate) const COMMON: usize = 8;
/// Per-PE words published alongside (not compared).
pub(crate) const INFO: usize = 7;
pub(super) const STATUS: usize = COMMON + INFO;
pub(super) const SEQ: usize = STATUS + 1;
const _: () = assert!(SEQ < layout::CHECK_WORDS);

/// The first word of this PE's identity buffer for sequence number `seq` (its parity's).
pub(super) fn identity_base(seq: u64) -> usize {
    layout::CHECK + (seq % 2) as usize * layout::CHECK_WORDS
}

/// First info word of the identity of a call that runs as an exchange ([`Ctx::exchange`]) rather than as an
/// agreement: a member waiting in one for a member in the other learns that it will never send.
pub(super) const EXCHANGE_MARK: u64 = 0x4758_4843_5845_4d58;

/// How a member runs its call at a sequence number: the first info word of its published identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Protocol {
    /// An agreement ([`Ctx::agree`]), whose messages go to the agreement's slots.
    Agreement,
    /// An exchange ([`Ctx::exchange`]): one message to every member.
    Exchange,
    /// An exchange in rounds, gathering ([`Ctx::gather`]) or Bruck's ([`Ctx::bruck`]): one message per round.
    Gather,
}

impl Protocol {
    /// The protocol of a call whose first info word is `w`.
    pub(super) fn of(w: u64) -> Protocol {
        match w {
            EXCHANGE_MARK => Protocol::Exchange,
            gather::GATHER_MARK => Protocol::Gather,
            _ => Protocol::Agreement,
        }
    }
}

/// Whether a waiting member reads its awaited peer's published identity at poll number `polls` (to learn that the
/// peer runs the call as another protocol and will never send): at polls 64, 128, 256, ..., 1024, then every
/// 1024. Over the fabric the read is a round trip the peer answers in its own polls, which slows what the peer
/// does meanwhile (a put loop to this PE: one read every 64 polls cost it 1-2 us per put).
pub(super) fn identity_poll_due(polls: u32) -> bool {
    polls % 64 == 0 && (polls.is_power_of_two() || polls % 1024 == 0)
}

/// Status word values.
pub(super) const STATUS_OK: u64 = 1;
pub(super) const STATUS_BAD: u64 = 2;

/// Identifiers of collective calls in identity words and error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallId {
    Broadcast = 1,
    Fcollect = 2,
    Collect = 3,
    Alltoall = 4,
    Alltoalls = 5,
    Reduce = 6,
    ReduceScatter = 7,
    Inscan = 8,
    Exscan = 9,
    SplitStrided = 10,
    Split2d = 11,
    Malloc = 12,
    Calloc = 13,
    Align = 14,
    Free = 15,
    BarrierAll = 16,
    SyncAll = 17,
    TeamSync = 18,
    TeamBarrier = 19,
    TeamDestroy = 20,
    /// A synchronisation inside a collective (argument: the collective's code).
    Step = 21,
    Finalize = 22,
    /// A collective of a layer above (words: its arguments' digest, then its name).
    External = 23,
    /// Team creation from explicit PE lists.
    TeamFromPes = 24,
}

impl CallId {
    pub(super) const ALL: [CallId; 24] = [
        CallId::Broadcast,
        CallId::Fcollect,
        CallId::Collect,
        CallId::Alltoall,
        CallId::Alltoalls,
        CallId::Reduce,
        CallId::ReduceScatter,
        CallId::Inscan,
        CallId::Exscan,
        CallId::SplitStrided,
        CallId::Split2d,
        CallId::Malloc,
        CallId::Calloc,
        CallId::Align,
        CallId::Free,
        CallId::BarrierAll,
        CallId::SyncAll,
        CallId::TeamSync,
        CallId::TeamBarrier,
        CallId::TeamDestroy,
        CallId::Step,
        CallId::Finalize,
        CallId::External,
        CallId::TeamFromPes,
    ];

    fn from_code(c: u64) -> Option<CallId> {
        CallId::ALL.into_iter().find(|x| *x as u64 == c)
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            CallId::Broadcast => "broadcast",
            CallId::Fcollect => "fcollect",
            CallId::Collect => "collect",
            CallId::Alltoall => "alltoall",
            CallId::Alltoalls => "alltoalls",
            CallId::Reduce => "reduce",
            CallId::ReduceScatter => "reduce_scatter",
            CallId::Inscan => "inscan",
            CallId::Exscan => "exscan",
            CallId::SplitStrided => "team_split_strided",
            CallId::Split2d => "team_split_2d",
            CallId::Malloc => "malloc",
            CallId::Calloc => "calloc",
            CallId::Align => "align",
            CallId::Free => "free",
            CallId::BarrierAll => "barrier_all",
            CallId::SyncAll => "sync_all",
            CallId::TeamSync => "team_sync",
            CallId::TeamBarrier => "team_barrier",
            CallId::TeamDestroy => "team_destroy",
            CallId::Step => "a step",
            CallId::Finalize => "finalize",
            CallId::External => "an external collective",
            CallId::TeamFromPes => "team_from_pes",
        }
    }

    /// Names of the argument words 3.. of the call (data collectives and team creation).
    fn fields(self) -> &'static [&'static str] {
        match self {
            CallId::Broadcast => &["nelems", "root", "chunk bytes"],
            CallId::Fcollect | CallId::Collect | CallId::Alltoall => &["nelems"],
            CallId::Alltoalls => &["nelems", "dst stride", "src stride"],
            CallId::Reduce | CallId::ReduceScatter | CallId::Inscan | CallId::Exscan => {
                &["nelems", "op"]
            }
            CallId::SplitStrided => &["start", "stride", "size"],
            CallId::Split2d => &["xrange"],
            _ => &[],
        }
    }

    /// Identity words of a call without arguments.
    pub(crate) fn words(self) -> [u64; COMMON] {
        let mut w = [0; COMMON];
        w[0] = self as u64;
        w
    }
}

/// Identity words of a collective of a layer above ([`CallId::External`]) named `op` (its first 40 bytes,
/// little-endian, from word 3), whose arguments digest to `dig`.
pub(super) fn external_words(op: &str, dig: u64) -> [u64; COMMON] {
    let mut common = CallId::External.words();
    common[1] = dig;
    for (k, c) in op.as_bytes().chunks(8).take(COMMON - 3).enumerate() {
        common[3 + k] = bytes_word(c);
    }
    common
}

/// Up to the first 8 bytes of `b` as one little-endian word (zero-padded), in two loads at most. Not a copy into a
/// buffer: a copy of a length known only at run time is a call into `memcpy`, and every collective builds identity
/// words from names (folded at compile time where the name is a constant).
const fn bytes_word(b: &[u8]) -> u64 {
    let n = b.len();
    if n >= 8 {
        return u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
    }
    // Fewer: the first and the last bytes as two words of the largest width that fits, overlapping (the bytes
    // both hold are the same bytes at the same places).
    if n >= 4 {
        let lo = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64;
        let hi = u32::from_le_bytes([b[n - 4], b[n - 3], b[n - 2], b[n - 1]]) as u64;
        return lo | hi << (8 * (n - 4));
    }
    if n >= 2 {
        let lo = u16::from_le_bytes([b[0], b[1]]) as u64;
        let hi = u16::from_le_bytes([b[n - 2], b[n - 1]]) as u64;
        return lo | hi << (8 * (n - 2));
    }
    if n == 1 {
        b[0] as u64
    } else {
        0
    }
}

/// A short name (element type, operator) as one identity word: its first 8 bytes, little-endian.
pub(crate) const fn name_word(name: &str) -> u64 {
    bytes_word(name.as_bytes())
}

/// The name in an identity word made by [`name_word`] (`?` for none).
pub(super) fn word_name(w: u64) -> String {
    let b: Vec<u8> = w
        .to_le_bytes()
        .into_iter()
        .take_while(|&c| c != 0)
        .collect();
    if b.is_empty() {
        "?".into()
    } else {
        String::from_utf8_lossy(&b).into_owned()
    }
}

/// The identity word of element type `T`.
pub(crate) const fn type_code<T: crate::types::Symmetric>() -> u64 {
    const { name_word(T::NAME) }
}

/// Human-readable form of a call's identity words.
pub(crate) fn describe(w: &[u64]) -> String {
    let Some(call) = w.first().and_then(|&c| CallId::from_code(c)) else {
        return format!("an unknown call {:?}", &w[..w.len().min(COMMON)]);
    };
    let at = |k: usize| w.get(k).copied().unwrap_or(0);
    match call {
        CallId::Malloc | CallId::Calloc | CallId::Align => {
            return format!(
                "{}({} elements of {} bytes, align {})",
                call.name(),
                at(3),
                at(6),
                at(4)
            )
        }
        CallId::Free => {
            return format!(
                "free(heap offset {:#x}, {} elements of {} bytes)",
                at(5),
                at(3),
                at(6)
            )
        }
        CallId::SplitStrided => {
            return format!(
                "team_split_strided(start {}, stride {}, size {})",
                at(3),
                at(4) as i64,
                at(5)
            )
        }
        CallId::Split2d => return format!("team_split_2d(xrange {})", at(3)),
        CallId::Step => {
            let of = CallId::from_code(at(3)).map_or("?", CallId::name);
            return format!("a synchronisation inside {of}");
        }
        CallId::External => {
            let name: Vec<u8> = (3..COMMON)
                .flat_map(|k| at(k).to_le_bytes())
                .take_while(|&b| b != 0)
                .collect();
            return format!(
                "{}(arguments digest {:#x})",
                String::from_utf8_lossy(&name),
                at(1)
            );
        }
        CallId::BarrierAll
        | CallId::SyncAll
        | CallId::TeamSync
        | CallId::TeamBarrier
        | CallId::TeamDestroy
        | CallId::TeamFromPes
        | CallId::Finalize => {
            let algo = at(1);
            return if algo == 0 {
                format!("{}()", call.name())
            } else {
                format!("{}(algorithm code {algo})", call.name())
            };
        }
        _ => {}
    }
    let mut parts = vec![format!("type {}", word_name(at(2)))];
    for (k, f) in call.fields().iter().enumerate() {
        let v = at(3 + k);
        if *f == "op" {
            parts.push(format!("op {}", word_name(v)));
        } else {
            parts.push(format!("{f} {v}"));
        }
    }
    parts.push(format!("algorithm code {}", at(1)));
    format!("{}({})", call.name(), parts.join(", "))
}

/// A deterministic 64-bit digest of words (the same in every process and every build): how the collectives, and
/// the layers above them (`xpushmem-ops`), compare the arguments of their members' calls.
pub fn digest(words: &[u64]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &w in words {
        h ^= w;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
        h ^= h >> 29;
    }
    h
}

impl<'a> Ctx<'a> {
    /// How member `i` runs its call of sequence number `seq` (`None` until it has published it).
    pub(super) fn member_protocol(&self, i: usize, seq: u64) -> Result<Option<Protocol>> {
        let at = identity_base(seq);
        let mut b = [0u8; 8];
        let win = self.win(i)?;
        win.read(self.word(at + SEQ), &mut b)?;
        if u64::from_le_bytes(b) != seq {
            return Ok(None);
        }
        // The words were written before the sequence number (Ctx::publish).
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        win.read(self.word(at + COMMON), &mut b)?;
        Ok(Some(Protocol::of(u64::from_le_bytes(b))))
    }

    /// This PE's identity words for call `seq` into the team state's `pending` (what [`Ctx::publish`] publishes):
    /// the compared words `common`, the per-PE words `info` (an exchange's: its protocol mark first), the verdict
    /// on its own arguments (`ok`) and the sequence number. Returns where they go ([`identity_base`]).
    #[inline]
    pub(super) fn identity_words(
        &mut self,
        common: [u64; COMMON],
        info: [u64; INFO],
        ok: bool,
        seq: u64,
    ) -> usize {
        let words = &mut self.st.pending;
        *words = [0; layout::CHECK_WORDS];
        words[..COMMON].copy_from_slice(&common);
        words[COMMON..STATUS].copy_from_slice(&info);
        words[STATUS] = if ok { STATUS_OK } else { STATUS_BAD };
        words[SEQ] = seq;
        identity_base(seq)
    }

    /// Publish this PE's identity words (the team state's `pending`) at `at` (the buffer of their sequence number's
    /// parity): every word, then (ordered after them) the sequence number, so that a member that sees the new
    /// sequence number sees the words of that call ([`Ctx::member_protocol`]). When the buffer already holds these
    /// words (this PE's call two calls ago was the same: the team state keeps what each buffer holds), only the
    /// sequence number is written; the words were ordered before that call's sequence number and nothing wrote
    /// them since.
    pub(super) fn publish(&mut self, at: usize) -> Result<()> {
        use std::sync::atomic::Ordering;
        let st = &*self.st;
        let words = &st.pending;
        let seq = words[SEQ];
        let parity = (seq % 2) as usize;
        debug_assert_eq!(at, identity_base(seq));
        // Every word but the sequence number, compared without a call (the words are few and fixed).
        let diff = |a: &[u64], b: &[u64]| a.iter().zip(b).fold(0, |acc, (x, y)| acc | (x ^ y));
        let same = st.published[parity].as_ref().is_some_and(|old| {
            diff(&old[..SEQ], &words[..SEQ]) | diff(&old[SEQ + 1..], &words[SEQ + 1..]) == 0
        });
        if same {
            if let LocalWord::Atomic(a) = self.local_word(at + SEQ) {
                a.store(seq, Ordering::Release);
                return Ok(());
            }
        }
        let words = self.st.pending;
        self.publish_all(at, parity, &words)
    }

    /// The publication deferred, if any. The agreement's dissemination and all-pairs patterns, the exchange and the
    /// exchanges in rounds defer it (their messages leave before they read any identity): a member reads it only
    /// while it waits for this PE's message and on the failure path, so it is published once the first message
    /// (the exchange: every message) is on its way, so that the messages leave sooner; before any identity is read
    /// ([`Ctx::identities`]); and at the latest when the context is dropped (a call that failed before).
    #[inline]
    pub(super) fn publish_deferred(&mut self) -> Result<()> {
        match self.deferred.take() {
            Some(at) => self.publish(at),
            None => Ok(()),
        }
    }

    /// [`Ctx::publish`] of words the buffer does not hold yet (out of line: the repeated call's path stays short).
    #[cold]
    #[inline(never)]
    fn publish_all(
        &mut self,
        at: usize,
        parity: usize,
        words: &[u64; layout::CHECK_WORDS],
    ) -> Result<()> {
        use std::sync::atomic::Ordering;
        // What the buffer holds is unknown until both writes succeed.
        self.st.published[parity] = None;
        self.write_words(at, &words[..SEQ])?;
        std::sync::atomic::fence(Ordering::Release);
        self.write_words(at + SEQ, &words[SEQ..])?;
        self.st.published[parity] = Some(*words);
        Ok(())
    }

    /// Every member's identity words of this PE's call `seq` (published at `at`), waiting until each member has
    /// published them (the failure paths only). A member that leaves a call before every member has entered it
    /// could begin its next call, whose messages and identity use the buffers of the other parity, while a member
    /// still reads those of the previous call: waiting here makes every member leave a failed call only once
    /// every member is in it (as the success path does), and gives every member the same words to judge.
    pub(super) fn identities(&mut self, at: usize, seq: u64) -> Result<Vec<Vec<u64>>> {
        // This PE's own first (the others wait for it too).
        self.publish_deferred()?;
        let mut all = Vec::with_capacity(self.n());
        for i in 0..self.n() {
            let win = self.win(i)?;
            let off = self.word(at + SEQ);
            let pe = self.pe(i);
            self.sh.wait_for(
                self.op,
                &|| {
                    format!(
                        "waiting for PE {pe} to enter collective call number {seq} on this team"
                    )
                },
                || {
                    let mut b = [0u8; 8];
                    win.read(off, &mut b)?;
                    Ok(u64::from_le_bytes(b) >= seq)
                },
            )?;
            // The words were written before the sequence number (Ctx::publish).
            std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
            all.push(self.read_words(i, at, layout::CHECK_WORDS)?);
        }
        Ok(all)
    }

    /// The failure path of an exchange (one round or in rounds) whose members may run the call as different
    /// protocols: every member's identity once published ([`Ctx::identities`]), with the linear barrier's arrival
    /// count kept exact ([`Ctx::linear_arrivals`]).
    pub(super) fn mismatch_identities(&mut self, at: usize, seq: u64) -> Result<Vec<Vec<u64>>> {
        let all = self.identities(at, seq)?;
        if self.pattern(BarrierAlgo::Auto, false)? == BarrierAlgo::Linear {
            self.linear_arrivals(&all)?;
        }
        Ok(all)
    }

    /// The digest of a call's identity words that the exchanges compare (the call kind alone with the argument
    /// checks off).
    pub(super) fn call_digest(&self, common: &[u64; COMMON]) -> u64 {
        let compared = if self.sh.cfg.check_symmetry {
            COMMON
        } else {
            1
        };
        let mut d = [0u64; 1 + COMMON];
        d[0] = self.team.slot as u64;
        d[1..1 + compared].copy_from_slice(&common[..compared]);
        digest(&d[..1 + compared])
    }

    /// The shared verdict of a failed agreement, from every member's identity words (the same on every member).
    pub(super) fn verdict(&self, all: &[Vec<u64>], checking: bool) -> Error {
        // This PE's words as published, read back with the others'.
        let mine = &all[self.idx()];
        let seq = mine[SEQ];
        let cmp = if checking { COMMON } else { 1 };
        if let Some(i) = all.iter().position(|w| w[STATUS] != STATUS_OK) {
            return Error::Mismatch {
                call: self.op,
                pe: self.pe(i),
                theirs: "invalid arguments (its own error names them)".into(),
                reference_pe: self.sh.my_pe(),
                ours: describe(&mine[..COMMON]),
            };
        }
        let theirs = |w: &[u64]| {
            if w[SEQ] == seq {
                describe(&w[..COMMON])
            } else {
                format!(
                    "{} as its collective call number {} on this team (this is number {seq})",
                    describe(&w[..COMMON]),
                    w[SEQ]
                )
            }
        };
        let r = &all[0];
        let i = (1..all.len())
            .find(|&i| all[i][..cmp] != r[..cmp] || all[i][SEQ] != r[SEQ])
            .unwrap_or(0);
        Error::Mismatch {
            call: self.op,
            pe: self.pe(i),
            theirs: theirs(&all[i]),
            reference_pe: self.pe(0),
            ours: theirs(r),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The word of up to 8 bytes is the little-endian reading of those bytes padded with zeros (the reference: a
    /// zeroed buffer and `from_le_bytes`), at every length, longer inputs cut at 8; a constant name folds the same.
    #[test]
    fn bytes_word_reads_the_first_eight_bytes_little_endian() {
        let b: Vec<u8> = (1..=12u8).map(|i| i.wrapping_mul(41)).collect();
        for n in 0..=b.len() {
            let mut want = [0u8; 8];
            want[..n.min(8)].copy_from_slice(&b[..n.min(8)]);
            assert_eq!(bytes_word(&b[..n]), u64::from_le_bytes(want), "{n} bytes");
        }
        const SUM: u64 = name_word("sum");
        assert_eq!(SUM, u64::from_le_bytes(*b"sum\0\0\0\0\0"));
        assert_eq!(word_name(name_word("float64")), "float64");
    }

    #[test]
    fn calls_are_described_with_their_arguments() {
        let mut m = CallId::Malloc.words();
        m[3] = 2;
        m[4] = 1;
        m[6] = 8;
        assert_eq!(describe(&m), "malloc(2 elements of 8 bytes, align 1)");
        assert_eq!(describe(&CallId::BarrierAll.words()), "barrier_all()");
        assert_eq!(
            describe(&[
                CallId::Reduce as u64,
                2,
                name_word("int32"),
                10,
                name_word("sum"),
                0,
                0,
                0
            ]),
            "reduce(type int32, nelems 10, op sum, algorithm code 2)"
        );
        for c in CallId::ALL {
            assert_eq!(CallId::from_code(c as u64), Some(c));
        }
    }

    #[test]
    fn digests_differ_by_kind_and_sequence() {
        let a = digest(&[0, 1, CallId::BarrierAll as u64]);
        assert_ne!(a, digest(&[0, 1, CallId::Malloc as u64]));
        assert_ne!(a, digest(&[0, 2, CallId::BarrierAll as u64]));
        assert_eq!(a, digest(&[0, 1, CallId::BarrierAll as u64]));
    }
}
