//! Collectives over teams: barrier/sync, broadcast, fcollect, collect, alltoall(s), reductions, reduce-scatter
//! and scans, each with several algorithms.
//!
//! ## Choosing an algorithm
//! Every collective has an `_with` form taking its algorithm enum ([`BarrierAlgo`], [`BroadcastAlgo`],
//! [`CollectAlgo`], [`AlltoallAlgo`], [`ReduceAlgo`], [`ReduceScatterAlgo`], [`ScanAlgo`]). `Auto` (what the plain
//! forms use) takes the algorithm named by the environment variable `XPUSHMEM_<COLL>_ALGORITHM` when set, and
//! otherwise picks by message size and team size. An unknown name is an error naming the variable and the
//! accepted names. Every PE of a team must end up with the same algorithm (the argument check catches
//! disagreement).
//!
//! What `Auto` picks when no variable is set (`n` = team size, `bytes` = message size):
//!
//! | collective | rule |
//! |---|---|
//! | barrier / sync | the team's agreement (an all-reduce that carries the call's identity): hierarchical on a team that spans nodes with a node holding 2+ of its members, else all-pairs (one round) for 3-4 members and dissemination otherwise |
//! | broadcast | eager-rounds from `XPUSHMEM_EAGER_ROUNDS_FROM` members (see below) when its rounds' messages fit; eager when the data fits in a message; linear for n <= 2; pipelined for bytes >= 256 KiB; hierarchical on a team that spans nodes with a node holding 2+ of its members; linear for n <= 4; else binomial |
//! | fcollect / collect | eager-rounds as for broadcast (fcollect); eager when a block fits in a message (fcollect); hierarchical on a team that spans nodes with a node holding 2+ of its members; ring for n > 8 and bytes >= 64 KiB (fcollect), else direct |
//! | alltoall(s) | eager-rounds as for broadcast (Bruck's alltoall); eager when a block fits in a message; pairwise for n > 16, else direct |
//! | reduce | eager-rounds as for broadcast; eager when the source fits in a message; on a team that spans nodes with a node holding 2+ of its members hierarchical below the ring cutover (`XPUSHMEM_REDUCE_RING_SIZE`, default 256 KiB up to 4 PEs, 64 KiB above), ring above; else linear for n <= 2 below the cutover (default 256 KiB) and ring above it, linear for bytes <= 4 KiB and n <= 4, else rs-ag (the one-step reduce-scatter + allgather; the ring from `XPUSHMEM_REDUCE_RING_SIZE` when it is set) |
//! | reduce_scatter | linear |
//! | inscan / exscan | linear for n <= 16, else chain |
//!
//! ## Node-aware algorithms
//! A team's members are grouped by the node they share memory on (`Shmem::team_node_groups`; with
//! `XPUSHMEM_TRANSPORT=fabric` every member is a group of its own), each group led by its first member. When the
//! team has several groups and one holds two members or more, `Auto` takes the hierarchical agreement (every
//! barrier, sync and collective's first step), broadcast and reduction: an intra-node phase over shared memory to
//! the leader, an inter-node phase among the leaders only, an intra-node release (fcollect and collect too). The
//! eager (exchange) paths stay
//! flat: their whole cost is one message latency, which a second hop would not beat.
//!
//! A one-round message of the team's exchange holds 8 KiB divided by the team size (`Shmem::team_eager_capacity`;
//! the rounds' messages, up to twice that, `Shmem::team_exchange_capacity`):
//! the eager algorithms are the small-message path, whose whole cost is one signalled message per pair of members
//! (the agreement and the data in the same latency, no exit synchronisation: messages are double-buffered).
//! Their `eager-rounds` form moves the same data, verdicts and digests in `ceil(log2 n)` rounds of one message
//! sent and one read per member (Bruck's allgather for broadcast, fcollect and reductions, Bruck's alltoall for
//! alltoall(s); `team/ctx/gather.rs`, `team/ctx/bruck.rs`), instead of `n - 1` messages sent and read by every
//! member: `Auto` takes it from `XPUSHMEM_EAGER_ROUNDS_FROM` members on (auto: 8, and never while the machine runs
//! more PEs than CPUs, where each round waits for its sender to be scheduled and the single round wins).
//! The same rule runs on every PE with the same inputs, so every PE picks the same algorithm.
//!
//! ## How a collective runs
//! 1. Each PE validates its own arguments, then runs the team's agreement (`team/ctx.rs`): its call's identity
//!    (kind, algorithm, type, arguments, its own verdict) travels inside the synchronisation, which is also the
//!    barrier that guarantees every PE has finished the previous collective on the team (destinations are free,
//!    rounds never mix). A bad argument on any PE, different arguments on different PEs (compared with
//!    `XPUSHMEM_CHECK_SYMMETRY=1`, the default; with `0` only the kind of call is), or a PE in another collective
//!    is an error on every PE, with the same verdict.
//! 2. Data moves with puts into the destinations (which are symmetric) followed by signals, or with gets from
//!    peers' symmetric buffers followed by acknowledgements, never through a fixed-size staging area: no limit on
//!    team or message size comes from the scratch. Counters only grow; each PE tracks how many increments it has
//!    been promised on each, and every wait goes through the runtime's wait (timeout, lost-peer detection,
//!    back-off).
//! 3. When a collective returns, this PE's destination holds the result and its source may be reused.

pub mod alltoall;
pub mod barrier;
pub mod broadcast;
pub mod collect;
pub mod reduce;
pub mod scan;

use crate::error::{Error, Result};
pub(crate) use crate::team::{type_code, CallId, Ctx, COMMON, INFO};
use crate::types::{SymSlice, Symmetric};
use std::ops::Range;

pub use crate::algo::{
    AlltoallAlgo, BarrierAlgo, BroadcastAlgo, CollectAlgo, ReduceAlgo, ReduceScatterAlgo, ScanAlgo,
};

pub use reduce::{BitwiseReducible, ReduceOp, Reducible};

/// Largest bounce buffer used to move data between two symmetric buffers (bytes).
const COPY_CHUNK_BYTES: usize = 1 << 20;
/// Default pipeline chunk of the pipelined broadcast (bytes); `XPUSHMEM_COLL_CHUNK_SIZE` overrides.
pub const DEFAULT_CHUNK_BYTES: usize = 64 << 10;

impl Ctx<'_> {
    /// Copy `src` on member `si` into `dst` on member `di`: directly when one side is this PE and both heaps are
    /// mapped here, else through a bounded bounce buffer.
    pub(crate) fn copy<T: Symmetric>(
        &self,
        dst: SymSlice<T>,
        di: usize,
        src: SymSlice<T>,
        si: usize,
    ) -> Result<()> {
        let len = dst.len().min(src.len());
        if len == 0 || (di == si && dst.off == src.off) {
            return Ok(());
        }
        let (dpe, spe) = (self.pe(di), self.pe(si));
        // One side is this PE and both heaps are mapped here: one direct copy, no bounce buffer.
        if self.sh.is_mapped(dpe) && self.sh.is_mapped(spe) {
            let me = self.sh.my_pe();
            if spe == me {
                return self.sh.put_sym(dst.slice(..len)?, src.slice(..len)?, dpe);
            }
            if dpe == me {
                return self.sh.get_sym(dst.slice(..len)?, src.slice(..len)?, spe);
            }
        }
        let chunk = (COPY_CHUNK_BYTES / std::mem::size_of::<T>().max(1)).max(1);
        let mut buf = vec![T::default(); chunk.min(len)];
        let mut at = 0;
        while at < len {
            let k = chunk.min(len - at);
            let b = &mut buf[..k];
            self.sh.get(b, src.slice(at..at + k)?, spe)?;
            self.sh.put(dst.slice(at..at + k)?, b, dpe)?;
            at += k;
        }
        Ok(())
    }

    /// Read `src` of member `i` into a new vector.
    pub(crate) fn fetch<T: Symmetric>(&self, src: SymSlice<T>, i: usize) -> Result<Vec<T>> {
        let mut v = vec![T::default(); src.len()];
        self.sh.get(&mut v, src, self.pe(i))?;
        Ok(v)
    }
}

/// Elements of the small collectives' working buffers that live on the stack ([`small_buf`]).
pub(crate) const SMALL_ELEMS: usize = 32;
/// Elements of the smaller stack buffers, for the calls on the fewest elements (a reduction of one element zeroes
/// two buffers of this many, not of [`SMALL_ELEMS`]).
pub(crate) const TINY_ELEMS: usize = 8;

/// A working buffer of `len` elements: the first `len` of `stack` when they fit (no allocation per call on the
/// small-message paths), else `heap` resized to `len`.
pub(crate) fn small_buf<'a, T: Symmetric>(
    stack: &'a mut [T; SMALL_ELEMS],
    heap: &'a mut Vec<T>,
    len: usize,
) -> &'a mut [T] {
    if len <= SMALL_ELEMS {
        &mut stack[..len]
    } else {
        heap.resize(len, T::default());
        heap
    }
}

/// Block `b` of `n` near-equal blocks of `len` elements.
pub(crate) fn block(len: usize, n: usize, b: usize) -> Range<usize> {
    let (q, r) = (len / n, len % n);
    let start = b * q + b.min(r);
    start..start + q + usize::from(b < r)
}

/// `n * nelems` (a team of `n` PEs, `nelems` per PE as passed) or an error naming `what` with the value passed.
pub(crate) fn mul(n: usize, nelems: usize, what: &'static str) -> Result<usize> {
    n.checked_mul(nelems).ok_or_else(|| {
        Error::invalid(
            what,
            nelems,
            format!("{n} blocks of {what} elements (one per PE of the team) overflow"),
        )
    })
}

/// Check that `s` holds the `need` elements a call with `nelems` elements per PE (as passed) takes.
pub(crate) fn need_blocks<T: Symmetric>(
    s: SymSlice<T>,
    need: usize,
    nelems: usize,
    what: &'static str,
    call: &str,
) -> Result<()> {
    if s.len() < need {
        return Err(Error::OutOfBounds {
            what,
            start: 0,
            len: need,
            limit: s.len(),
            context: format!("{call} with nelems = {nelems}: {what} {s:?} is too small"),
        });
    }
    Ok(())
}

/// Check that `s` holds at least `need` elements.
pub(crate) fn need_len<T: Symmetric>(
    s: SymSlice<T>,
    need: usize,
    what: &'static str,
    call: &str,
) -> Result<()> {
    if s.len() < need {
        return Err(Error::OutOfBounds {
            what,
            start: 0,
            len: need,
            limit: s.len(),
            context: format!("{call}: {what} {s:?} is too small"),
        });
    }
    Ok(())
}

/// Whether two byte ranges of the heap overlap.
pub(crate) fn overlap<T: Symmetric>(a: SymSlice<T>, b: SymSlice<T>) -> bool {
    let (a0, a1) = (a.off, a.off + a.size_bytes());
    let (b0, b1) = (b.off, b.off + b.size_bytes());
    a0 < b1 && b0 < a1 && a1 > a0 && b1 > b0
}

/// Messages of the eager algorithms: the team's exchange.
pub(crate) use crate::team::Messages;

/// Which eager forms a collective's data fits ([`Ctx::fit`]; none by default).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Fit {
    /// One all-to-all round (the exchange): a member's data fits in one message.
    pub eager: bool,
    /// The gathering exchange's rounds: the largest round's message fits.
    pub rounds: bool,
    /// `Auto` takes the rounds: they fit and the team is large enough (`XPUSHMEM_EAGER_ROUNDS_FROM`).
    pub auto_rounds: bool,
}

impl Ctx<'_> {
    /// Whether `bytes` of data per message fit the one-round exchange (the eager algorithms; the rounds' fits
    /// are their own, on the whole exchange area).
    pub(crate) fn eager_fits(&self, bytes: usize) -> bool {
        bytes <= crate::team::eager_capacity(self.n())
    }

    /// Which eager forms fit `bytes` of data from each of `holders` members (the others send nothing).
    pub(crate) fn fit(&self, bytes: usize, holders: usize) -> Fit {
        self.fit_rounds(bytes, self.gather_fits(bytes, holders))
    }

    /// Which eager forms fit `bytes` of data per member, `rounds` telling whether the rounds' messages do.
    pub(crate) fn fit_rounds(&self, bytes: usize, rounds: bool) -> Fit {
        let sh = self.sh;
        Fit {
            eager: self.eager_fits(bytes),
            rounds,
            auto_rounds: rounds
                && sh
                    .cfg
                    .eager_rounds_from
                    .applies(self.n(), sh.oversubscribed()),
        }
    }

    /// One message per member with the bytes of this PE's `src` for every member but this PE (whose message is
    /// empty): `src` is read once, then copied within the buffer.
    pub(crate) fn push_to_others<T: Symmetric>(
        &self,
        m: &mut Messages,
        src: SymSlice<T>,
    ) -> Result<()> {
        let (n, me) = (self.n(), self.idx());
        let mut first: Option<std::ops::Range<usize>> = None;
        for i in 0..n {
            if i != me && !src.is_empty() {
                match &first {
                    Some(r) => m.data.extend_from_within(r.clone()),
                    None => {
                        let at = m.data.len();
                        self.push_local(m, src)?;
                        first = Some(at..m.data.len());
                    }
                }
            }
            m.close();
        }
        Ok(())
    }

    /// The exchange of an eager collective `common`: the first `nelems` elements of this PE's `src` (`None`: an
    /// empty message, a broadcast's non-root) reach every member, over one all-to-all round or (`rounds`) the
    /// gathering exchange's `ceil(log2 n)` rounds; `recv` gets every member's message. A source too short or a
    /// failed read is this PE's error, reported after the exchange (so that nobody waits for it).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn eager_exchange<T: Symmetric>(
        &mut self,
        rounds: bool,
        common: [u64; COMMON],
        local: Result<()>,
        src: Option<SymSlice<T>>,
        nelems: usize,
        send: &mut Messages,
        recv: &mut Messages,
    ) -> Result<()> {
        let src = src.map(|s| s.slice(..nelems)).transpose();
        let local = local.and_then(|()| match (src?, rounds) {
            (Some(s), true) => self.push_local(send, s),
            (Some(s), false) => self.push_to_others(send, s),
            (None, false) => {
                (0..self.n()).for_each(|_| send.close());
                Ok(())
            }
            (None, true) => Ok(()),
        });
        if local.is_err() {
            send.clear();
        }
        if rounds {
            self.enter_gather(common, local, &send.data, recv)
        } else {
            self.enter_exchange(common, local, send, recv)
        }
    }

    /// Write this PE's own block into its `dest` after an eager exchange: from the bytes of its `src` already
    /// read into the messages it sent (`rounds`: its one message; one round: its message to any other member),
    /// else (a team of one) by a copy from `src`. Saves the second read and the heap-to-heap copy's checks.
    pub(crate) fn write_own<T: Symmetric>(
        &self,
        rounds: bool,
        send: &Messages,
        dest: SymSlice<T>,
        src: SymSlice<T>,
    ) -> Result<()> {
        let sent = self.own_sent(rounds, send);
        if !dest.is_empty() && sent.len() == dest.size_bytes() {
            self.write_local(dest, sent)
        } else {
            self.copy(dest, self.idx(), src, self.idx())
        }
    }

    /// The bytes of this PE's source in the messages it sent in an eager exchange ([`Ctx::eager_exchange`]):
    /// with `rounds` its one message, in one round its message to any other member (empty in a team of one).
    pub(crate) fn own_sent<'m>(&self, rounds: bool, send: &'m Messages) -> &'m [u8] {
        let (n, me) = (self.n(), self.idx());
        if rounds {
            &send.data[..]
        } else if n > 1 {
            send.get((me + 1) % n)
        } else {
            &[]
        }
    }

    /// Append the bytes of this PE's `src` to the message being built.
    pub(crate) fn push_local<T: Symmetric>(
        &self,
        m: &mut Messages,
        src: SymSlice<T>,
    ) -> Result<()> {
        let at = m.data.len();
        m.data.resize(at + src.size_bytes(), 0);
        self.sh.local_map().read(src.off, &mut m.data[at..])
    }

    /// Write received bytes into this PE's `dest`.
    pub(crate) fn write_local<T: Symmetric>(&self, dest: SymSlice<T>, bytes: &[u8]) -> Result<()> {
        if bytes.len() != dest.size_bytes() {
            return Err(Error::State(format!(
                "{}: a message holds {} bytes, expected {}",
                self.op,
                bytes.len(),
                dest.size_bytes()
            )));
        }
        self.sh.local_map().write(dest.off, bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The blocks of a partition are contiguous, cover `0..len` in order and differ in size by at most one.
        #[test]
        fn blocks_partition(len in 0usize..10_000, n in 1usize..70) {
            let mut at = 0;
            let (mut lo, mut hi) = (usize::MAX, 0);
            for b in 0..n {
                let r = block(len, n, b);
                prop_assert_eq!(r.start, at);
                at = r.end;
                lo = lo.min(r.len());
                hi = hi.max(r.len());
            }
            prop_assert_eq!(at, len);
            prop_assert!(hi - lo <= 1);
        }
    }

    #[test]
    fn algorithm_names_round_trip_and_unknown_names_fail() {
        for a in ReduceAlgo::ALL {
            assert_eq!(a.name().parse::<ReduceAlgo>().ok(), Some(*a));
        }
        for a in BroadcastAlgo::ALL {
            assert_eq!(a.name().parse::<BroadcastAlgo>().ok(), Some(*a));
        }
        assert_eq!(
            "RD".parse::<ReduceAlgo>().ok(),
            Some(ReduceAlgo::RecursiveDoubling)
        );
        let e = "fastest".parse::<AlltoallAlgo>().unwrap_err();
        assert!(e.to_string().contains("pairwise"), "{e}");
        assert_eq!(
            crate::team::describe(&[
                CallId::Reduce as u64,
                2,
                type_code::<i32>(),
                10,
                ReduceOp::Sum.code(),
                0,
                0,
                0
            ]),
            "reduce(type int32, nelems 10, op sum, algorithm code 2)"
        );
    }
}
