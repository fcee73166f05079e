//! One collective in progress on one team ([`Ctx`]), the identity every collective call carries ([`CallId`] and
//! its argument words), the agreement step every collective starts with ([`Ctx::agree`]) and the team barriers.
//!
//! ## The agreement
//! Every collective call (barriers and syncs, allocation and free, team creation and destruction, every data
//! collective) starts with one agreement over its team: each PE writes its call's identity words (call kind,
//! algorithm, element type, arguments, whether its own arguments were valid, the team's sequence number) into its
//! own slot, then runs a dissemination all-reduce over `ceil(log2 n)` rounds. In round `k` each member puts its
//! running verdict — "some PE rejected its arguments" (OR) and the lowest and highest digest of the identities (min,
//! max) — into the slot of the member `2^k` ahead and raises that round's flag to the sequence number, then waits
//! for its own flag and folds in what it got. OR, min and max are idempotent, which makes the dissemination pattern
//! an exact all-reduce, and it is at the same time the barrier the collective needs: no extra round trip.
//!
//! When every digest is equal and nobody rejected its arguments the call goes on. Otherwise every member knows it
//! (the verdict is the same everywhere), reads every member's identity words (the slow path only) and fails with the
//! same [`Error::Mismatch`], naming the first member whose call differs from member 0's and both calls — so a
//! barrier that meets an allocation, or a reduction that meets a barrier, fails on both sides, the team's counters
//! stay consistent and the runtime stays usable.
//!
//! Identity words are double-buffered by sequence parity: to overwrite a buffer a PE must finish the agreement in
//! between, which needs every member to have entered it, so every reader is done with the old contents.
//!
//! A member in an exchange ([`Ctx::exchange`]) or a gathering exchange ([`Ctx::gather`], the eager collectives'
//! `ceil(log2 n)` rounds) that finds another member running the call as a different one of the three, or a member
//! in an agreement that finds another in either exchange, learns of the mismatch without hearing from every
//! member (each member's published identity says which of the three it runs). Before it fails it waits until
//! every member has published its identity for this call (the failure path only): so no member leaves a failed
//! call while another is still in the previous one (reading messages in the buffers the leaver's next call
//! writes), and every member judges the same words.

use crate::core::teams::{layout, TeamInner};
use crate::core::{LocalWord, Shmem};
use crate::error::{Error, Result};
use crate::transport::{AmoOp, Window};
use std::sync::MutexGuard;

pub use crate::algo::BarrierAlgo;

mod bruck;
mod gather;

/// Words of a call's identity compared across PEs: `[call, algorithm, type, args...]`.
pub(crate) const COMMON: usize = 8;
/// Per-PE words published alongside (not compared).
pub(crate) const INFO: usize = 7;
const STATUS: usize = COMMON + INFO;
const SEQ: usize = STATUS + 1;
const _: () = assert!(SEQ < layout::CHECK_WORDS);

/// First info word of the identity of a call that runs as an exchange ([`Ctx::exchange`]) rather than as an
/// agreement: a member waiting in one for a member in the other learns that it will never send.
const EXCHANGE_MARK: u64 = 0x4758_4843_5845_4d58;

/// How a member runs its call at a sequence number: the first info word of its published identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    /// An agreement ([`Ctx::agree`]), whose messages go to the agreement's slots.
    Agreement,
    /// An exchange ([`Ctx::exchange`]): one message to every member.
    Exchange,
    /// An exchange in rounds, gathering ([`Ctx::gather`]) or Bruck's ([`Ctx::bruck`]): one message per round.
    Gather,
}

impl Protocol {
    /// The protocol of a call whose first info word is `w`.
    fn of(w: u64) -> Protocol {
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
fn identity_poll_due(polls: u32) -> bool {
    polls % 64 == 0 && (polls.is_power_of_two() || polls % 1024 == 0)
}

/// Status word values.
const STATUS_OK: u64 = 1;
const STATUS_BAD: u64 = 2;

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
    const ALL: [CallId; 24] = [
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

/// A short name (element type, operator) as one identity word: its first 8 bytes, little-endian.
pub(crate) fn name_word(name: &str) -> u64 {
    let mut b = [0u8; 8];
    let n = name.len().min(8);
    b[..n].copy_from_slice(&name.as_bytes()[..n]);
    u64::from_le_bytes(b)
}

/// The name in an identity word made by [`name_word`] (`?` for none).
fn word_name(w: u64) -> String {
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
pub(crate) fn type_code<T: crate::types::Symmetric>() -> u64 {
    name_word(T::NAME)
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

/// Fan-in of the trees inside each node of the hierarchical agreement (a leader hears from up to this many
/// members of its node, each from as many below it).
const HIER_FANIN: usize = 8;
const _: () = assert!(HIER_FANIN + 2 < layout::AGREE_ROUNDS);

/// Two agreement messages combined: failed (OR), lowest and highest digest.
fn fold3(a: [u64; 3], b: [u64; 3]) -> [u64; 3] {
    [a[0] | b[0], a[1].min(b[1]), a[2].max(b[2])]
}

/// An agreement message's three words as bytes.
fn words_bytes(v: &[u64; 3]) -> [u8; 24] {
    let mut b = [0u8; 24];
    for (c, x) in b.chunks_exact_mut(8).zip(v) {
        c.copy_from_slice(&x.to_le_bytes());
    }
    b
}

/// Words of one member's message region in one buffer of the exchange area, for a team of `n` (0 when a region
/// would not hold the header and one payload word).
pub(crate) fn exchange_region_words(n: usize) -> usize {
    let w = layout::EXCH_PARITY_WORDS / n.max(1);
    if w > layout::EXCH_HEADER {
        w
    } else {
        0
    }
}

/// Where a team's slot lives: in the runtime's own region (the predefined teams) or in the user heap (the pool of
/// split teams).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Space {
    /// Byte offset in every PE's system region.
    Sys(usize),
    /// Byte offset in every PE's symmetric heap.
    Heap(usize),
}

/// One collective in progress on one team: the team is locked, its slot located.
pub(crate) struct Ctx<'a> {
    pub(crate) sh: &'a Shmem,
    team: &'a TeamInner,
    space: Space,
    st: MutexGuard<'a, super::TeamState>,
    pub(crate) op: &'static str,
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(
        sh: &'a Shmem,
        team: &'a TeamInner,
        space: Space,
        st: MutexGuard<'a, super::TeamState>,
        op: &'static str,
    ) -> Ctx<'a> {
        Ctx {
            sh,
            team,
            space,
            st,
            op,
        }
    }

    /// Team size.
    pub(crate) fn n(&self) -> usize {
        self.team.members.len()
    }

    /// This PE's team index.
    pub(crate) fn idx(&self) -> usize {
        self.team.idx
    }

    /// The team's message buffers for an eager collective, empty (their allocations kept from earlier calls);
    /// [`Ctx::give_messages`] returns them.
    pub(crate) fn take_messages(&mut self) -> (crate::team::Messages, crate::team::Messages) {
        let (mut send, mut recv) = (
            std::mem::take(&mut self.st.send),
            std::mem::take(&mut self.st.recv),
        );
        send.clear();
        recv.clear();
        (send, recv)
    }

    /// Keep `send` and `recv` for the team's next eager collective.
    pub(crate) fn give_messages(
        &mut self,
        send: crate::team::Messages,
        recv: crate::team::Messages,
    ) {
        self.st.send = send;
        self.st.recv = recv;
    }

    /// Global PE of member `i`.
    pub(crate) fn pe(&self, i: usize) -> usize {
        self.team.members.pe(i)
    }

    /// The team's node layout (`groups.rs`).
    pub(crate) fn groups(&self) -> std::sync::Arc<crate::team::Groups> {
        self.team.groups(self.sh)
    }

    /// Count one run of a node-aware algorithm (`NodeAwareStats`).
    pub(crate) fn count_node_aware(
        &self,
        what: fn(&crate::team::NodeAwareCounters) -> &std::sync::atomic::AtomicU64,
    ) {
        crate::team::NodeAwareCounters::bump(what(&self.sh.teams().node_aware));
    }

    fn word(&self, w: usize) -> usize {
        match self.space {
            Space::Sys(b) | Space::Heap(b) => b + 8 * w,
        }
    }

    /// The window onto member `i`'s slot.
    fn win(&self, i: usize) -> Result<&'a dyn Window> {
        let pe = self.pe(i);
        Ok(match self.space {
            Space::Sys(_) => self.sh.sys_of(pe, self.op)?,
            Space::Heap(_) => self.sh.map_of(pe, self.op)?,
        })
    }

    /// The window onto this PE's own slot.
    fn local_win(&self) -> &'a dyn Window {
        match self.space {
            Space::Sys(_) => self.sh.sys_local(),
            Space::Heap(_) => self.sh.local_map(),
        }
    }

    /// Word `w` of this PE's slot, for polling.
    fn local_word(&self, w: usize) -> LocalWord<'a> {
        let (win, off) = (self.local_win(), self.word(w));
        match win.atomic64(off) {
            Some(a) => LocalWord::Atomic(a),
            None => LocalWord::Window(win, off),
        }
    }

    /// Add 1 to word `w` of member `i`.
    pub(crate) fn signal(&self, w: usize, i: usize) -> Result<()> {
        self.win(i)?.amo(self.word(w), 8, AmoOp::FetchAdd, 1)?;
        Ok(())
    }

    /// Wait until word `w` of this PE's slot reaches `target`.
    fn wait_until(&self, w: usize, target: u64, what: &dyn Fn() -> String) -> Result<()> {
        let word = self.local_word(w);
        let load = || word.load();
        self.sh.wait_for(
            self.op,
            &|| {
                format!(
                    "{} (counter {} of {target})",
                    what(),
                    load().unwrap_or_default()
                )
            },
            || Ok(load()? >= target),
        )
    }

    /// How member `i` runs its call of sequence number `seq` (`None` until it has published it).
    fn member_protocol(&self, i: usize, seq: u64) -> Result<Option<Protocol>> {
        let at = layout::CHECK + (seq % 2) as usize * layout::CHECK_WORDS;
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

    /// Wait (in an agreement) until word `w` of this PE's slot reaches `target` (the sequence number), sent by
    /// member `from`. Returns false instead when `from` turns out to run this call as an exchange or a gathering
    /// exchange: it will never send.
    fn wait_from(
        &self,
        w: usize,
        target: u64,
        from: usize,
        what: &dyn Fn() -> String,
    ) -> Result<bool> {
        let word = self.local_word(w);
        let mut other = false;
        let mut polls = 0u32;
        self.sh.wait_for(
            self.op,
            &|| {
                format!(
                    "{} (counter {} of {target})",
                    what(),
                    word.load().unwrap_or_default()
                )
            },
            || {
                if word.load()? >= target {
                    return Ok(true);
                }
                polls = polls.wrapping_add(1);
                if identity_poll_due(polls) {
                    if let Some(p) = self.member_protocol(from, target)? {
                        other = p != Protocol::Agreement;
                    }
                }
                Ok(other)
            },
        )?;
        Ok(!other)
    }

    /// Expect `k` more increments on word `w` and wait until all have arrived.
    pub(crate) fn wait(&mut self, w: usize, k: u64, what: &dyn Fn() -> String) -> Result<()> {
        self.st.expected[w] += k;
        let target = self.st.expected[w];
        self.wait_until(w, target, what)
    }

    /// Write words into this PE's slot.
    pub(crate) fn write_words(&self, w: usize, words: &[u64]) -> Result<()> {
        // Little-endian words are their own byte image: one copy, no conversion.
        #[cfg(target_endian = "little")]
        let bytes = crate::sys::bytes::bytes_of(words);
        #[cfg(not(target_endian = "little"))]
        let le: Vec<u8> = words.iter().flat_map(|x| x.to_le_bytes()).collect();
        #[cfg(not(target_endian = "little"))]
        let bytes = &le[..];
        self.local_win().write(self.word(w), bytes)
    }

    /// Publish this PE's identity words at `at`: every word, then (ordered after them) the sequence number, so
    /// that a member that sees the new sequence number sees the words of that call ([`Ctx::member_protocol`]).
    fn publish(&self, at: usize, words: &[u64]) -> Result<()> {
        self.write_words(at, &words[..SEQ])?;
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        self.write_words(at + SEQ, &words[SEQ..])
    }

    /// Read `count` words of member `i`'s slot.
    pub(crate) fn read_words(&self, i: usize, w: usize, count: usize) -> Result<Vec<u64>> {
        let mut b = vec![0u8; 8 * count];
        self.win(i)?.read(self.word(w), &mut b)?;
        Ok(b.chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect())
    }

    /// Three words of this PE's own slot (an agreement message), without allocating.
    fn read3(&self, w: usize) -> Result<[u64; 3]> {
        let mut b = [0u8; 24];
        self.local_win().read(self.word(w), &mut b)?;
        let word =
            |k: usize| u64::from_le_bytes(b[8 * k..8 * k + 8].try_into().unwrap_or_default());
        Ok([word(0), word(1), word(2)])
    }

    /// Every member's identity words of this PE's call `seq` (published at `at`), waiting until each member has
    /// published them (the failure paths only). A member that leaves a call before every member has entered it
    /// could begin its next call, whose messages and identity use the buffers of the other parity, while a member
    /// still reads those of the previous call: waiting here makes every member leave a failed call only once
    /// every member is in it (as the success path does), and gives every member the same words to judge.
    fn identities(&self, at: usize, seq: u64) -> Result<Vec<Vec<u64>>> {
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
        let checking = self.sh.cfg.check_symmetry;
        let (clean, all, mine) = self.agree(
            common,
            info,
            local.is_ok(),
            checking,
            need_info,
            self.pattern(BarrierAlgo::Auto, false)?,
        )?;
        local?;
        if !clean {
            return Err(self.verdict(&all, &mine, checking));
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
        let mut common = CallId::External.words();
        common[1] = dig;
        for (k, c) in op.as_bytes().chunks(8).take(COMMON - 3).enumerate() {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            common[3 + k] = u64::from_le_bytes(b);
        }
        let (clean, all, mine) = self.agree(
            common,
            [0; INFO],
            ok,
            true,
            false,
            self.pattern(BarrierAlgo::Auto, false)?,
        )?;
        let mut out = crate::team::Agreement {
            failed: None,
            differs: None,
        };
        if clean {
            return Ok(out);
        }
        // Another call altogether (another kind, or another operation of the layer above): a mismatch.
        let same_call =
            |w: &[u64]| w[0] == common[0] && w[3..COMMON] == common[3..] && w[SEQ] == mine[SEQ];
        if !all.iter().all(|w| same_call(w)) {
            let mut all = all;
            for w in all.iter_mut() {
                if same_call(w) {
                    w[1] = common[1];
                    w[STATUS] = STATUS_OK;
                }
            }
            let mut mine = mine;
            mine[STATUS] = STATUS_OK;
            return Err(self.verdict(&all, &mine, true));
        }
        out.failed = all.iter().position(|w| w[STATUS] != STATUS_OK);
        out.differs = all.iter().position(|w| w[1] != dig);
        Ok(out)
    }

    /// Payload bytes one member may send each other member in one [`Ctx::exchange`] (0 when the team has too
    /// many members for the exchange area).
    pub(crate) fn exchange_capacity(&self) -> usize {
        exchange_region_words(self.n()).saturating_sub(layout::EXCH_HEADER) * 8
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
        let (at, words) = self.publish_exchange(common, EXCHANGE_MARK, ok, seq)?;
        let region = exchange_region_words(n);
        let base = EXCH + (seq % 2) as usize * EXCH_PARITY_WORDS;
        let mine = base + me * region;
        let mut buf = std::mem::take(&mut self.st.xbuf);
        for k in 1..n {
            let p = (me + k) % n;
            let m = if ok { send.get(p) } else { &[] };
            buf.clear();
            buf.extend_from_slice(&dig.to_le_bytes());
            buf.extend_from_slice(&(((m.len() as u64) << 1) | u64::from(!ok)).to_le_bytes());
            buf.extend_from_slice(m);
            // Header and payload, then the flag, in one ordered operation.
            let _issued = self.win(p)?.put_signal_nbi(
                self.word(mine + 1),
                &buf,
                self.word(mine),
                AmoOp::Set,
                seq,
            )?;
        }
        self.st.xbuf = buf;
        // Wait for every member's message, in the order they were sent to this PE's neighbours.
        let next = std::cell::Cell::new(1usize);
        let mut other = None;
        let mut polls = 0u32;
        // The flag polled now, resolved once per member (not once per poll).
        let mut flag = self.local_word(base + ((me + 1) % n) * region);
        self.sh.wait_for(
            self.op,
            &|| {
                let q = (me + next.get()) % n;
                format!("exchange: waiting for PE {}'s message", self.pe(q))
            },
            || {
                while next.get() < n {
                    let q = (me + next.get()) % n;
                    if flag.load()? >= seq {
                        next.set(next.get() + 1);
                        flag = self.local_word(base + ((me + next.get()) % n) * region);
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
            return Err(self.verdict(&all, &words, true));
        }
        let win = self.local_win();
        let mut h = [0u8; 16];
        for i in 0..n {
            if i == me {
                recv.push(if ok { send.get(me) } else { &[] });
                out.note(me, !ok, false);
                continue;
            }
            let r = base + i * region;
            win.read(self.word(r + 1), &mut h)?;
            let d = u64::from_le_bytes(h[..8].try_into().unwrap_or_default());
            let sl = u64::from_le_bytes(h[8..].try_into().unwrap_or_default());
            let len = ((sl >> 1) as usize).min(cap);
            let start = recv.data.len();
            recv.data.resize(start + len, 0);
            win.read(self.word(r + EXCH_HEADER), &mut recv.data[start..])?;
            recv.ends.push(recv.data.len());
            out.note(i, sl & 1 != 0, d != dig);
        }
        local?;
        Ok(out)
    }

    /// The start both exchanges share: the exchange area must have a region for every member; this PE's identity
    /// for call `seq` is published, marked with the protocol (`mark`) it runs. Returns where, and the words.
    fn publish_exchange(
        &self,
        common: [u64; COMMON],
        mark: u64,
        ok: bool,
        seq: u64,
    ) -> Result<(usize, [u64; layout::CHECK_WORDS])> {
        use layout::*;
        if self.exchange_capacity() == 0 {
            return Err(Error::State(format!(
                "{}: a team of {} PEs is too large for the exchange area (team_exchange_capacity is 0)",
                self.op,
                self.n()
            )));
        }
        let at = CHECK + (seq % 2) as usize * CHECK_WORDS;
        let mut words = [0u64; CHECK_WORDS];
        words[..COMMON].copy_from_slice(&common);
        words[COMMON] = mark;
        words[STATUS] = if ok { STATUS_OK } else { STATUS_BAD };
        words[SEQ] = seq;
        self.publish(at, &words)?;
        Ok((at, words))
    }

    /// The failure path of an exchange (one round or in rounds) whose members may run the call as different
    /// protocols: every member's identity once published ([`Ctx::identities`]), with the linear barrier's arrival
    /// count kept exact ([`Ctx::linear_arrivals`]).
    fn mismatch_identities(&mut self, at: usize, seq: u64) -> Result<Vec<Vec<u64>>> {
        let all = self.identities(at, seq)?;
        if self.pattern(BarrierAlgo::Auto, false)? == BarrierAlgo::Linear {
            self.linear_arrivals(&all)?;
        }
        Ok(all)
    }

    /// An exchange (one round or in rounds) that met agreements over the linear barrier keeps member 0's arrival
    /// count exact: member 0 counts every arrival, so an exchange-side member arrives too when member 0 is in the
    /// agreement (it waits for `n - 1` arrivals), and member 0 on the exchange side expects the agreement side's
    /// arrivals (they signal it whatever it does). Otherwise a later linear barrier would find arrivals that belong
    /// to this call.
    fn linear_arrivals(&mut self, all: &[Vec<u64>]) -> Result<()> {
        let in_exchange = |w: &Vec<u64>| Protocol::of(w[COMMON]) != Protocol::Agreement;
        if self.idx() != 0 {
            if !in_exchange(&all[0]) {
                self.signal(layout::ARRIVE, 0)?;
            }
        } else {
            let agreeing = all[1..].iter().filter(|w| !in_exchange(w)).count() as u64;
            self.st.expected[layout::ARRIVE] += agreeing;
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

    /// The digest of a call's identity words that the exchanges compare (the call kind alone with the argument
    /// checks off).
    fn call_digest(&self, common: &[u64; COMMON]) -> u64 {
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

    /// This PE's error first, then the shared verdict of an exchange whose outcome is `v`.
    fn judge(&mut self, local: Result<()>, v: crate::team::Agreement) -> Result<()> {
        local?;
        if v.failed.is_none() && v.differs.is_none() {
            return Ok(());
        }
        let seq = self.st.seq;
        let at = layout::CHECK + (seq % 2) as usize * layout::CHECK_WORDS;
        let all = self.identities(at, seq)?;
        let mine = all[self.idx()].clone();
        Err(self.verdict(&all, &mine, self.sh.cfg.check_symmetry))
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
        let mut common = CallId::External.words();
        common[1] = dig;
        for (k, c) in op.as_bytes().chunks(8).take(COMMON - 3).enumerate() {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            common[3 + k] = u64::from_le_bytes(b);
        }
        self.exchange(common, ok, dig, send, recv)
    }

    /// Publish, all-reduce, and on the slow path (or `need_info`) read every member's identity words. Returns
    /// (every member agreed, every member's words when read, this PE's words).
    fn agree(
        &mut self,
        common: [u64; COMMON],
        info: [u64; INFO],
        ok: bool,
        compare_all: bool,
        need_info: bool,
        pattern: BarrierAlgo,
    ) -> Result<(bool, Vec<Vec<u64>>, [u64; layout::CHECK_WORDS])> {
        self.sh.quiet()?;
        let n = self.n();
        self.st.seq += 1;
        let seq = self.st.seq;
        let at = layout::CHECK + (seq % 2) as usize * layout::CHECK_WORDS;
        // On the stack: a barrier allocates nothing (the allocator was a third of its instructions).
        let mut words = [0u64; layout::CHECK_WORDS];
        words[..COMMON].copy_from_slice(&common);
        words[COMMON..STATUS].copy_from_slice(&info);
        words[STATUS] = if ok { STATUS_OK } else { STATUS_BAD };
        words[SEQ] = seq;
        if n == 1 {
            return Ok((ok, vec![words.to_vec()], words));
        }
        self.publish(at, &words)?;
        // What is compared: the whole call, or (argument checks off) the call kind alone.
        let compared = if compare_all { COMMON } else { 1 };
        let mut d = [0u64; 2 + COMMON];
        d[0] = self.team.slot as u64;
        d[1] = seq;
        d[2..2 + compared].copy_from_slice(&common[..compared]);
        let d = &d[..2 + compared];
        let (failed, lo, hi) = match pattern {
            BarrierAlgo::Linear => self.reduce_linear(seq, at, !ok, compare_all)?,
            BarrierAlgo::Tree => self.reduce_tree(seq, !ok, digest(d))?,
            BarrierAlgo::Hierarchical => self.reduce_hier(seq, !ok, digest(d))?,
            _ => self.all_reduce(seq, !ok, digest(d))?,
        };
        let clean = !failed && lo == hi;
        if clean && !need_info {
            return Ok((true, Vec::new(), words));
        }
        // Slow path (or a call that needs the others' words): read every member's identity, once published (a
        // member that found another in an exchange did not hear from every member).
        let all = self.identities(at, seq)?;
        Ok((clean, all, words))
    }

    /// The shared verdict of a failed agreement, from every member's identity words (the same on every member).
    fn verdict(&self, all: &[Vec<u64>], mine: &[u64], checking: bool) -> Error {
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

    /// The dissemination all-reduce of (failed: OR, digest: min and max) over the team; also a barrier.
    fn all_reduce(&mut self, seq: u64, failed: bool, dig: u64) -> Result<(bool, u64, u64)> {
        let (n, me) = (self.n(), self.idx());
        let v = self.disseminate(
            seq,
            [failed as u64, dig, dig],
            n,
            me,
            &|k| k,
            0,
            "agreement",
        )?;
        Ok((v[0] != 0, v[1], v[2]))
    }

    /// The dissemination all-reduce of `v` over `count` members, `member(k)` the team rank of the k-th and this PE
    /// the `mine`-th, in the agreement slots from `first` on (one per round).
    #[allow(clippy::too_many_arguments)]
    fn disseminate(
        &mut self,
        seq: u64,
        mut v: [u64; 3],
        count: usize,
        mine: usize,
        member: &dyn Fn(usize) -> usize,
        first: usize,
        what: &str,
    ) -> Result<[u64; 3]> {
        use layout::*;
        let base = AGREE + (seq % 2) as usize * AGREE_ROUNDS * AGREE_ROUND_WORDS;
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
            self.send3(to, flag, &v, seq)?;
            let from_idx = member((mine + count - dist) % count);
            let from = self.pe(from_idx);
            let got = if self.wait_from(flag, seq, from_idx, &|| {
                format!("{what} round {round}: waiting for PE {from}")
            })? {
                self.read3(flag + 1)?
            } else {
                // That member is in an exchange: it never sends this round; the agreement fails everywhere.
                [1, 0, u64::MAX]
            };
            v = fold3(v, got);
            dist <<= 1;
            round += 1;
        }
        Ok(v)
    }

    /// Put an agreement message `v` into the slot whose flag is word `flag` of member `to`, and raise the flag to
    /// `seq`: the words then the flag in one ordered operation (a transport that completes later never shows the
    /// flag first).
    fn send3(&self, to: usize, flag: usize, v: &[u64; 3], seq: u64) -> Result<()> {
        let bytes = words_bytes(v);
        let _issued = self.win(to)?.put_signal_nbi(
            self.word(flag + 1),
            &bytes,
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
    fn reduce_hier(&mut self, seq: u64, failed: bool, dig: u64) -> Result<(bool, u64, u64)> {
        use layout::*;
        const F: usize = HIER_FANIN;
        let me = self.idx();
        let groups = self.groups();
        let g = groups.group_of[me];
        let mem = &groups.members[g];
        let r = groups.rank_in[me];
        let base = AGREE + (seq % 2) as usize * AGREE_ROUNDS * AGREE_ROUND_WORDS;
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
                [1, 0, u64::MAX]
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
                [1, 0, u64::MAX]
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
            )?;
        }
        for c in children {
            self.send3(c, slot(F), &v, seq)?;
        }
        self.count_node_aware(|c| &c.agreements);
        Ok((v[0] != 0, v[1], v[2]))
    }

    /// A synchronisation of the team as call `call` (its identity words): the agreement with `Auto` or
    /// `Dissemination`, the plain barrier algorithm otherwise. Completes this PE's outstanding puts first.
    pub(crate) fn sync_as(&mut self, call: [u64; COMMON], algo: BarrierAlgo) -> Result<()> {
        let pattern = self.pattern(algo, true)?;
        self.sync_pattern(call, pattern)
    }

    /// The agreement's communication pattern: `algo`, or for `Auto` the configured barrier algorithm
    /// (`XPUSHMEM_BARRIER_ALGORITHM`; by default hierarchical on a team whose node layout pays for it, see
    /// `groups.rs`, else dissemination). Every agreement of a team takes the same pattern (the layout is the same
    /// on every member), so calls that meet always compare their identities. `strict`: an unusable configured
    /// value is this call's error (the team barriers); otherwise (allocations, collectives, `barrier_all`,
    /// finalize) the default.
    fn pattern(&self, algo: BarrierAlgo, strict: bool) -> Result<BarrierAlgo> {
        // The configuration parsed at init (a field read, not the global configuration's lock and clone).
        let configured = match algo {
            BarrierAlgo::Auto => match &self.sh.cfg.barrier_algorithm {
                Ok(a) => *a,
                Err(e) if strict => return Err(e.clone()),
                Err(_) => BarrierAlgo::Auto,
            },
            a => a,
        };
        Ok(match configured {
            BarrierAlgo::Linear if self.n() > 1 => BarrierAlgo::Linear,
            BarrierAlgo::Tree if self.n() > 1 => BarrierAlgo::Tree,
            BarrierAlgo::Hierarchical if self.n() > 1 => BarrierAlgo::Hierarchical,
            BarrierAlgo::Auto if self.n() > 1 && self.groups().pays() => BarrierAlgo::Hierarchical,
            _ => BarrierAlgo::Dissemination,
        })
    }

    /// The pattern `Auto` takes on this team (`Shmem::team_barrier_algorithm`); an error for an unusable
    /// `XPUSHMEM_BARRIER_ALGORITHM`.
    pub(crate) fn auto_pattern(&self) -> Result<BarrierAlgo> {
        self.pattern(BarrierAlgo::Auto, true)
    }

    /// A synchronisation as call `call` over `pattern` (every algorithm carries the call's identity).
    fn sync_pattern(&mut self, call: [u64; COMMON], pattern: BarrierAlgo) -> Result<()> {
        let checking = self.sh.cfg.check_symmetry;
        let (clean, all, mine) = self.agree(call, [0; INFO], true, checking, false, pattern)?;
        if !clean {
            return Err(self.verdict(&all, &mine, checking));
        }
        Ok(())
    }

    /// A synchronisation of `TEAM_WORLD` that is the whole call `call` (`barrier_all`, `sync_all`, finalize), over
    /// the job's agreement pattern.
    pub(crate) fn sync_world(mut self, call: CallId) -> Result<()> {
        let pattern = self.pattern(BarrierAlgo::Auto, false)?;
        self.sync_pattern(call.words(), pattern)
    }

    /// A synchronisation inside the collective in progress (every member is in it already).
    pub(crate) fn barrier(&mut self, algo: BarrierAlgo) -> Result<()> {
        let mut w = CallId::Step.words();
        w[3] = CallId::ALL
            .iter()
            .find(|c| c.name() == self.op)
            .map_or(0, |c| *c as u64);
        self.sync_as(w, algo)
    }

    /// The agreement's verdict gathered at member 0 and sent back to each (the linear barrier): every member
    /// counts its arrival at member 0, which reads each member's published identity words, computes (failed, lowest
    /// and highest digest) and writes it, then the release flag, into each member's slot.
    fn reduce_linear(
        &mut self,
        seq: u64,
        at: usize,
        failed: bool,
        compare_all: bool,
    ) -> Result<(bool, u64, u64)> {
        use layout::*;
        let n = self.n();
        let release =
            AGREE + (seq % 2) as usize * AGREE_ROUNDS * AGREE_ROUND_WORDS + 2 * AGREE_ROUND_WORDS;
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
            let bytes = words_bytes(&v);
            for i in 1..n {
                let _issued = self.win(i)?.put_signal_nbi(
                    self.word(release + 1),
                    &bytes,
                    self.word(release),
                    AmoOp::Set,
                    seq,
                )?;
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
    fn reduce_tree(&mut self, seq: u64, failed: bool, dig: u64) -> Result<(bool, u64, u64)> {
        use layout::*;
        let (n, me) = (self.n(), self.idx());
        let base = AGREE + (seq % 2) as usize * AGREE_ROUNDS * AGREE_ROUND_WORDS;
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
                [1, 0, u64::MAX]
            };
            v = [v[0] | got[0], v[1].min(got[1]), v[2].max(got[2])];
        }
        let send = |ctx: &Self, to: usize, k: usize, v: &[u64; 3]| -> Result<()> {
            let bytes = words_bytes(v);
            let _issued = ctx.win(to)?.put_signal_nbi(
                ctx.word(slot(k) + 1),
                &bytes,
                ctx.word(slot(k)),
                AmoOp::Set,
                seq,
            )?;
            Ok(())
        };
        if me > 0 {
            let parent = (me - 1) / 2;
            send(self, parent, (me - 1) % 2, &v)?;
            let p = self.pe(parent);
            v = if self.wait_from(slot(2), seq, parent, &|| {
                format!("tree barrier: waiting for the release from PE {p}")
            })? {
                let got = self.read3(slot(2) + 1)?;
                [got[0], got[1], got[2]]
            } else {
                [1, 0, u64::MAX]
            };
        }
        for &c in &children {
            send(self, c, 2, &v)?;
        }
        Ok((v[0] != 0, v[1], v[2]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
