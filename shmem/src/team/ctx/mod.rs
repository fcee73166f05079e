//! One collective in progress on one team ([`Ctx`]), the identity every collective call carries ([`CallId`] and
//! its argument words), the agreement step every collective starts with ([`Ctx::agree`]) and the team barriers.
//!
//! The code is cut by role: this file holds the context and its accesses to the team's slot (signals, waits,
//! words); `identity.rs` the call's identity words and their reading; `agree.rs` the agreement; `exchange.rs` the
//! exchange; `barrier.rs` the barriers and syncs; `gather.rs` and `bruck.rs` the gathering exchanges.
//!
//! ## The agreement
//! Every collective call (barriers and syncs, allocation and free, team creation and destruction, every data
//! collective) starts with one agreement over its team: each PE writes its call's identity words (call kind,
//! algorithm, element type, arguments, whether its own arguments were valid, the team's sequence number) into its
//! own slot, then runs a dissemination all-reduce over `ceil(log2 n)` rounds. In round `k` each member puts its
//! running verdict — "some PE rejected its arguments" (OR) and the lowest and highest digest of the identities (min,
//! max) — into the slot of the member `2^k` ahead and raises that round's flag to the sequence number, then waits
//! for its own flag and folds in what it got. OR, min and max are idempotent, which makes the dissemination pattern
//! an exact all-reduce, and it is at the same time the barrier the collective needs: no extra round trip. On a team
//! of 3 or 4 members on one node the same all-reduce runs in one round ([`BarrierAlgo::AllPairs`]): each member
//! puts its own verdict into a slot of every other member, raises those flags, then waits for all of them; one
//! cross-core transfer deep instead of two.
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

mod agree;
pub(crate) use agree::Carry;
mod barrier;
mod bruck;
mod exchange;
mod gather;
mod identity;

pub(crate) use exchange::{eager_capacity, exchange_capacity, exchange_region_words};
use identity::*;

#[cfg(test)]
pub(crate) use identity::describe;
pub use identity::digest;
pub(crate) use identity::{name_word, type_code, CallId, COMMON, INFO};

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
    /// The window onto this PE's own slot, resolved once per call (every poll, publish and read of the call
    /// uses it).
    local: &'a dyn Window,
    /// Where this call's identity words (the team state's `pending`) go, when they are published after the call's
    /// first message is on its way ([`Ctx::publish_deferred`]).
    deferred: Option<usize>,
}

impl Drop for Ctx<'_> {
    /// A call that failed before it published its deferred identity ([`Ctx::publish_deferred`]) does now: members
    /// on the failure path wait for every member's identity.
    fn drop(&mut self) {
        // A failure to publish is the failure path's to report (its wait for this identity times out).
        let _ = self.publish_deferred();
    }
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(
        sh: &'a Shmem,
        team: &'a TeamInner,
        space: Space,
        st: MutexGuard<'a, super::TeamState>,
        op: &'static str,
    ) -> Ctx<'a> {
        let local = match space {
            Space::Sys(_) => sh.sys_local(),
            Space::Heap(_) => sh.local_map(),
        };
        Ctx {
            sh,
            team,
            space,
            st,
            op,
            local,
            deferred: None,
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

    /// The algorithm `resolve` chooses for call `call` asked for `requested` on `bytes` of data, or the one it
    /// chose last time on this team for the same three ([`crate::core::teams::Choice`]: a small call's choice, the
    /// data's fit and the layout, is about 150 instructions of an 8-byte reduction's 2,500). An error is not kept.
    pub(crate) fn choose<A: crate::algo::Coded>(
        &mut self,
        call: CallId,
        requested: A,
        bytes: usize,
        resolve: impl FnOnce(&Self) -> Result<A>,
    ) -> Result<A> {
        let key = (call as u64, requested.code(), bytes);
        if let Some(c) = self.st.choice {
            if (c.call, c.requested, c.bytes) == key {
                if let Some(a) = A::from_code(c.chosen) {
                    return Ok(a);
                }
            }
        }
        let a = resolve(self)?;
        self.st.choice = Some(crate::core::teams::Choice {
            call: key.0,
            requested: key.1,
            bytes,
            chosen: a.code(),
        });
        Ok(a)
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

    /// Whether the team's node layout pays for the node-aware algorithms (`groups.rs`).
    pub(crate) fn layout_pays(&self) -> bool {
        self.team.layout_pays(self.sh)
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
        self.local
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
        self.wait_from_with(w, target, from, what, &[])
    }

    /// [`Ctx::wait_from`] for a message whose bytes reach into the next cache lines: `lines` (their first words,
    /// from [`Ctx::message_lines`]) are loaded in every poll with the flag, so that they cross cores in parallel
    /// with the flag's line rather than after it.
    fn wait_from_with(
        &self,
        w: usize,
        target: u64,
        from: usize,
        what: &dyn Fn() -> String,
        lines: &[Option<&std::sync::atomic::AtomicU64>],
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
                let seen = word.load()?;
                for l in lines.iter().flatten() {
                    l.load(std::sync::atomic::Ordering::Relaxed);
                }
                if seen >= target {
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
        Ok([le_word(&b, 0), le_word(&b, 1), le_word(&b, 2)])
    }
}

/// Little-endian word `k` of the message bytes `b`.
fn le_word(b: &[u8], k: usize) -> u64 {
    u64::from_le_bytes(b[8 * k..8 * k + 8].try_into().unwrap_or_default())
}
