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
//! | barrier / sync | dissemination for n <= 32, else tree |
//! | broadcast | linear for n <= 2; pipelined for bytes >= 256 KiB; linear for n <= 4; else binomial |
//! | fcollect / collect | ring for n > 8 and bytes >= 64 KiB (fcollect), else direct |
//! | alltoall(s) | pairwise for n > 16, else direct |
//! | reduce | linear for n <= 2 or (bytes <= 4 KiB and n <= 4); recursive doubling below 256 KiB; else ring |
//! | reduce_scatter | linear |
//! | inscan / exscan | linear for n <= 16, else chain |
//!
//! The same rule runs on every PE with the same inputs, so every PE picks the same algorithm.
//!
//! ## How a collective runs
//! 1. Each PE validates its own arguments, then (with `XPUSHMEM_CHECK_SYMMETRY=1`, the default) publishes them in
//!    the team's scratch; a barrier over the team follows (it also guarantees that every PE has finished the
//!    previous collective on the team, so destinations are free and rounds never mix); each PE then reads every
//!    member's arguments. A bad argument on any PE, or different arguments on different PEs, is an error on every
//!    PE, with the same verdict.
//!    With `XPUSHMEM_CHECK_SYMMETRY=0` the exchange is skipped (except where the call needs the other PEs'
//!    sizes, as `collect` does): a bad argument is then an error on the PE that passed it only, and the others
//!    run into their timeout.
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
use crate::runtime::Shmem;
use crate::team::{layout, TeamInner, TeamState};
use crate::transport::AmoOp;
use crate::types::{SymSlice, Symmetric};
use std::ops::Range;
use std::str::FromStr;
use std::sync::MutexGuard;

pub use reduce::{BitwiseReducible, ReduceOp, Reducible};

/// Largest bounce buffer used to move data between two symmetric buffers (bytes).
const COPY_CHUNK_BYTES: usize = 1 << 20;
/// Default pipeline chunk of the pipelined broadcast (bytes); `XPUSHMEM_COLL_CHUNK_SIZE` overrides.
pub const DEFAULT_CHUNK_BYTES: usize = 64 << 10;

macro_rules! algo_enum {
    ($(#[$m:meta])* $name:ident, $env:literal, { $($(#[$vm:meta])* $v:ident = $s:literal $(| $alias:literal)*),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub enum $name {
            /// The environment variable's choice, else chosen by message and team size.
            #[default]
            Auto,
            $($(#[$vm])* $v,)+
        }

        impl $name {
            /// The environment variable that overrides `Auto`.
            pub const ENV: &'static str = $env;
            /// Every concrete algorithm (without `Auto`).
            pub const ALL: &'static [$name] = &[$($name::$v),+];

            /// The algorithm's name (as accepted by the environment variable).
            pub fn name(self) -> &'static str {
                match self {
                    $name::Auto => "auto",
                    $($name::$v => $s,)+
                }
            }

            #[allow(dead_code)]
            pub(crate) fn code(self) -> u64 {
                $name::ALL.iter().position(|a| *a == self).map_or(0, |p| p as u64 + 1)
            }

            fn names() -> String {
                let mut v = vec!["auto"];
                v.extend($name::ALL.iter().map(|a| a.name()));
                v.join(", ")
            }

            /// `Auto` resolved through the environment variable (still `Auto` when unset).
            fn with_env(self) -> Result<$name> {
                if self != $name::Auto {
                    return Ok(self);
                }
                match crate::config::env_value($env) {
                    None => Ok($name::Auto),
                    Some(v) => v.parse().map_err(|_| Error::Config {
                        var: $env,
                        value: v.clone(),
                        reason: format!("unknown algorithm; expected one of {}", $name::names()),
                    }),
                }
            }
        }

        impl FromStr for $name {
            type Err = Error;
            fn from_str(s: &str) -> Result<$name> {
                match s.trim().to_ascii_lowercase().as_str() {
                    "auto" => Ok($name::Auto),
                    $($s $(| $alias)* => Ok($name::$v),)+
                    other => Err(Error::invalid(
                        "algorithm",
                        other,
                        format!("unknown {} algorithm; expected one of {}", stringify!($name), $name::names()),
                    )),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

algo_enum!(
    /// Barrier algorithms.
    BarrierAlgo, "XPUSHMEM_BARRIER_ALGORITHM", {
        /// Everyone signals member 0, which then releases everyone: 2 steps, O(n) work at member 0.
        Linear = "linear",
        /// ceil(log2 n) rounds; in round k each member signals the one 2^k ahead.
        Dissemination = "dissemination" | "dissem",
        /// Binary tree: arrivals go up, the release comes down (2 log2 n steps, n signals in total).
        Tree = "tree",
    }
);

algo_enum!(
    /// Broadcast algorithms.
    BroadcastAlgo, "XPUSHMEM_BROADCAST_ALGORITHM", {
        /// The root puts the data into every member's destination.
        Linear = "linear",
        /// Binomial tree: each member forwards to its children from its own destination.
        Binomial = "binomial",
        /// A chain from the root, the data cut in chunks (`XPUSHMEM_COLL_CHUNK_SIZE`) forwarded as they arrive.
        Pipelined = "pipelined" | "pipeline" | "chunked",
    }
);

algo_enum!(
    /// Algorithms of `fcollect` and `collect`.
    CollectAlgo, "XPUSHMEM_COLLECT_ALGORITHM", {
        /// Every member puts its block into every member's destination.
        Direct = "direct" | "linear",
        /// Blocks travel around a ring, n - 1 steps.
        Ring = "ring",
    }
);

algo_enum!(
    /// Algorithms of `alltoall` and `alltoalls`.
    AlltoallAlgo, "XPUSHMEM_ALLTOALL_ALGORITHM", {
        /// n - 1 steps; in step s each member sends to the member s ahead and waits for the one s behind.
        Pairwise = "pairwise",
        /// Every member puts all its blocks at once, then waits for all.
        Direct = "direct" | "linear",
    }
);

algo_enum!(
    /// Reduction (all-reduce) algorithms.
    ReduceAlgo, "XPUSHMEM_REDUCE_ALGORITHM", {
        /// Every member reads every member's source and reduces locally in member order.
        Linear = "linear",
        /// log2 n rounds of pairwise exchange (the PEs beyond a power of two folded in first and out last).
        RecursiveDoubling = "recursive-doubling" | "recursive_doubling" | "rd",
        /// Reduce-scatter then allgather around a ring: 2 (n - 1) steps of 1/n of the data.
        Ring = "ring",
    }
);

algo_enum!(
    /// Reduce-scatter algorithms.
    ReduceScatterAlgo, "XPUSHMEM_REDUCE_SCATTER_ALGORITHM", {
        /// Every member reads its block from every member's source and reduces it locally.
        Linear = "linear" | "direct",
    }
);

algo_enum!(
    /// Scan (prefix reduction) algorithms.
    ScanAlgo, "XPUSHMEM_SCAN_ALGORITHM", {
        /// Every member reads the sources of the members before it and reduces locally.
        Linear = "linear",
        /// Each member waits for its left neighbour's prefix, adds its own and hands it on: n - 1 steps.
        Chain = "chain",
    }
);

/// Identifiers of collective calls in argument checks and error messages.
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
}

impl CallId {
    fn from_code(c: u64) -> Option<CallId> {
        use CallId::*;
        [
            Broadcast,
            Fcollect,
            Collect,
            Alltoall,
            Alltoalls,
            Reduce,
            ReduceScatter,
            Inscan,
            Exscan,
            SplitStrided,
            Split2d,
        ]
        .into_iter()
        .find(|x| *x as u64 == c)
    }

    fn name(self) -> &'static str {
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
        }
    }

    /// Names of the argument words 3.. of the call.
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
        }
    }
}

const TYPE_NAMES: [&str; 12] = [
    "int8", "int16", "int32", "int64", "ptrdiff", "uint8", "uint16", "uint32", "uint64", "size",
    "float", "double",
];

pub(crate) fn type_code<T: Symmetric>() -> u64 {
    TYPE_NAMES
        .iter()
        .position(|n| *n == T::NAME)
        .map_or(99, |p| p as u64 + 1)
}

/// Human-readable form of the common argument words of a collective.
fn describe(w: &[u64]) -> String {
    let Some(call) = w.first().and_then(|&c| CallId::from_code(c)) else {
        return format!("unknown call {w:?}");
    };
    let ty = w
        .get(2)
        .and_then(|&t| (t as usize).checked_sub(1))
        .and_then(|i| TYPE_NAMES.get(i))
        .copied()
        .unwrap_or("?");
    let mut parts = vec![format!("type {ty}")];
    for (k, f) in call.fields().iter().enumerate() {
        let v = w.get(3 + k).copied().unwrap_or(0);
        if *f == "op" {
            parts.push(format!(
                "op {}",
                ReduceOp::from_code(v).map_or("?", |o| o.name())
            ));
        } else {
            parts.push(format!("{f} {v}"));
        }
    }
    parts.push(format!("algorithm code {}", w.get(1).copied().unwrap_or(0)));
    format!("{}({})", call.name(), parts.join(", "))
}

/// Words of one argument check: `[call, algorithm, type, args...]`, compared across PEs.
pub(crate) const COMMON: usize = 8;
/// Per-PE words published alongside (not compared).
pub(crate) const INFO: usize = layout::CHECK_WORDS - COMMON - 1;

/// One collective in progress on one team: the team is locked, its scratch slot located.
pub(crate) struct Ctx<'a> {
    pub(crate) sh: &'a Shmem,
    team: &'a TeamInner,
    base: usize,
    st: MutexGuard<'a, TeamState>,
    pub(crate) op: &'static str,
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(
        sh: &'a Shmem,
        team: &'a TeamInner,
        base: usize,
        st: MutexGuard<'a, TeamState>,
        op: &'static str,
    ) -> Ctx<'a> {
        Ctx {
            sh,
            team,
            base,
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

    /// Global PE of member `i`.
    pub(crate) fn pe(&self, i: usize) -> usize {
        self.team.members.pe(i)
    }

    fn word(&self, w: usize) -> usize {
        self.base + 8 * w
    }

    /// Add 1 to word `w` of member `i`.
    pub(crate) fn signal(&self, w: usize, i: usize) -> Result<()> {
        self.sh
            .map_of(self.pe(i), self.op)?
            .amo(self.word(w), 8, AmoOp::FetchAdd, 1)?;
        Ok(())
    }

    /// Expect `k` more increments on word `w` and wait until all have arrived.
    pub(crate) fn wait(&mut self, w: usize, k: u64, what: &dyn Fn() -> String) -> Result<()> {
        self.st.expected[w] += k;
        let target = self.st.expected[w];
        let word = self.sh.local_word(self.word(w), self.op)?;
        let load = || word.load();
        let op = self.op;
        self.sh.wait_for(
            op,
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

    /// Write words into this PE's slot.
    pub(crate) fn write_words(&self, w: usize, words: &[u64]) -> Result<()> {
        let bytes: Vec<u8> = words.iter().flat_map(|x| x.to_le_bytes()).collect();
        self.sh.local_map().write(self.word(w), &bytes)
    }

    /// Read `count` words of member `i`'s slot.
    pub(crate) fn read_words(&self, i: usize, w: usize, count: usize) -> Result<Vec<u64>> {
        let mut b = vec![0u8; 8 * count];
        self.sh
            .map_of(self.pe(i), self.op)?
            .read(self.word(w), &mut b)?;
        Ok(b.chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect())
    }

    /// Start a data collective: validate (the local verdict), exchange and compare the arguments, and barrier.
    /// Returns every member's info words when they were exchanged (always with `need_info`).
    pub(crate) fn enter(
        &mut self,
        common: [u64; COMMON],
        info: [u64; INFO],
        local: Result<()>,
        need_info: bool,
        barrier: BarrierAlgo,
    ) -> Result<Vec<[u64; INFO]>> {
        let n = self.n();
        let checking = self.sh.cfg.check_symmetry && n > 1;
        self.sh.quiet()?;
        if !checking && !need_info {
            local?;
            self.barrier(barrier)?;
            return Ok(Vec::new());
        }
        let at = layout::CHECK + (self.st.exchanges % 2) as usize * layout::CHECK_WORDS;
        self.st.exchanges += 1;
        let mut words = [0u64; layout::CHECK_WORDS];
        words[..COMMON].copy_from_slice(&common);
        words[COMMON..COMMON + INFO].copy_from_slice(&info);
        words[layout::CHECK_WORDS - 1] = if local.is_ok() { 1 } else { 2 };
        self.write_words(at, &words)?;
        self.barrier(barrier)?;
        let mut infos = Vec::with_capacity(n);
        let mut verdict = Ok(());
        let mut reference = [0u64; COMMON];
        for i in 0..n {
            let w = self.read_words(i, at, layout::CHECK_WORDS)?;
            if i == 0 {
                reference.copy_from_slice(&w[..COMMON]);
            }
            let mut inf = [0u64; INFO];
            inf.copy_from_slice(&w[COMMON..COMMON + INFO]);
            infos.push(inf);
            if verdict.is_err() {
                continue;
            }
            if w[layout::CHECK_WORDS - 1] != 1 {
                verdict = Err(Error::Mismatch {
                    call: self.op,
                    pe: self.pe(i),
                    theirs: "invalid arguments (its own error names them)".into(),
                    reference_pe: self.sh.my_pe(),
                    ours: describe(&common),
                });
            } else if checking && w[..COMMON] != reference {
                verdict = Err(Error::Mismatch {
                    call: self.op,
                    pe: self.pe(i),
                    theirs: describe(&w[..COMMON]),
                    reference_pe: self.pe(0),
                    ours: describe(&reference),
                });
            }
        }
        local?;
        verdict?;
        Ok(infos)
    }

    /// Copy `src` on member `si` into `dst` on member `di` through a bounded bounce buffer.
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
        let chunk = (COPY_CHUNK_BYTES / std::mem::size_of::<T>().max(1)).max(1);
        let mut buf = vec![T::default(); chunk.min(len)];
        let (dpe, spe) = (self.pe(di), self.pe(si));
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

/// Resolve the barrier algorithm for a team of `n` PEs.
pub(crate) fn resolve_barrier(a: BarrierAlgo, n: usize) -> Result<BarrierAlgo> {
    Ok(match a.with_env()? {
        BarrierAlgo::Auto if n <= 32 => BarrierAlgo::Dissemination,
        BarrierAlgo::Auto => BarrierAlgo::Tree,
        x => x,
    })
}

/// Block `b` of `n` near-equal blocks of `len` elements.
pub(crate) fn block(len: usize, n: usize, b: usize) -> Range<usize> {
    let (q, r) = (len / n, len % n);
    let start = b * q + b.min(r);
    start..start + q + usize::from(b < r)
}

/// `a * b` or an error naming `what`.
pub(crate) fn mul(a: usize, b: usize, what: &'static str) -> Result<usize> {
    a.checked_mul(b)
        .ok_or_else(|| Error::invalid(what, format!("{a} * {b}"), "overflows"))
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

/// The pipeline chunk of `XPUSHMEM_COLL_CHUNK_SIZE` in bytes.
pub(crate) fn chunk_bytes() -> Result<usize> {
    const VAR: &str = "XPUSHMEM_COLL_CHUNK_SIZE";
    match crate::config::env_value(VAR) {
        None => Ok(DEFAULT_CHUNK_BYTES),
        Some(v) => crate::config::parse_size(&v)
            .filter(|&b| b >= 64)
            .ok_or_else(|| Error::Config {
                var: VAR,
                value: v.clone(),
                reason: "expected a size of at least 64 bytes (e.g. 64K)".into(),
            }),
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
            describe(&[
                CallId::Reduce as u64,
                2,
                3,
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
