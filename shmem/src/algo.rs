//! Every algorithm choice of the collectives, as data: the barrier's (the agreement's pattern) and the data
//! collectives' algorithm enums, and from which team size the eager collectives run in rounds ([`RoundsFrom`]).
//!
//! A leaf: the configuration parses these types (`XPUSHMEM_*_ALGORITHM`), the team and collective layers run them,
//! and neither has to import the other for it. How `Auto` is resolved for each collective is documented in
//! [`crate::coll`]; the configuration resolves `Auto` through its variable (`with_cfg`, in `config.rs`).

use crate::error::{Error, Result};
use std::str::FromStr;

/// An algorithm choice as a number and back: `Auto` is 0, the others their place in `ALL` from 1 (what a call's
/// identity words carry, and what a team keeps of its last choice).
pub(crate) trait Coded: Copy {
    /// The algorithm's number.
    fn code(self) -> u64;
    /// The algorithm of number `c` (`None` for a number no algorithm has).
    fn from_code(c: u64) -> Option<Self>;
}

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

        }

        impl Coded for $name {
            fn code(self) -> u64 {
                $name::code(self)
            }
            fn from_code(c: u64) -> Option<$name> {
                match c {
                    0 => Some($name::Auto),
                    c => $name::ALL.get(c as usize - 1).copied(),
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
    /// Barrier algorithms. Every one is the agreement's pattern: it carries the call's identity (so a barrier that
    /// meets another collective fails on both sides); `Auto` is `Hierarchical` on a team that spans nodes with a
    /// node holding two of its members or more, else `AllPairs` up to [`ALL_PAIRS_UP_TO`] members and
    /// `Dissemination` above. Every member must choose alike.
    BarrierAlgo, "XPUSHMEM_BARRIER_ALGORITHM", {
        /// Everyone signals member 0, which reads every member's identity and releases everyone with the verdict:
        /// 2 steps, O(n) work at member 0.
        Linear = "linear",
        /// ceil(log2 n) rounds; in round k each member signals the one 2^k ahead.
        Dissemination = "dissemination" | "dissem",
        /// Binary tree: arrivals go up with their subtree's verdict, the release comes down with the whole team's
        /// (2 log2 n steps, 2n messages in total).
        Tree = "tree",
        /// Node-aware: the members of each node (`Shmem::team_node_groups`) send their verdict up a tree of
        /// fan-in 8 to the node's leader over shared memory, the leaders run the dissemination among themselves
        /// (ceil(log2 nodes) rounds), and each leader releases its node down the same tree. `Auto` takes it when the
        /// team spans nodes and a node holds two of its members or more.
        Hierarchical = "hierarchical" | "hier" | "node-aware",
        /// One round: each member signals every other one and waits for all of them (n - 1 messages sent and
        /// read by each, one cross-core transfer deep instead of the dissemination's ceil(log2 n)). `Auto` takes
        /// it on one node for teams of 3 up to [`ALL_PAIRS_UP_TO`] members; a team of more than 33 (the
        /// agreement's slots) runs the dissemination instead.
        AllPairs = "all-pairs" | "all_pairs" | "allpairs",
    }
);

/// The largest team whose agreement `BarrierAlgo::Auto` runs as [`BarrierAlgo::AllPairs`] (one node): at 3 and 4
/// members one round of 2 or 3 messages each is shallower than the dissemination's two rounds of one; at 8 and 16
/// the one round was slower (docs/PERFORMANCE.md, round seventeen).
pub const ALL_PAIRS_UP_TO: usize = 4;

algo_enum!(
    /// Broadcast algorithms.
    BroadcastAlgo, "XPUSHMEM_BROADCAST_ALGORITHM", {
        /// The root puts the data into every member's destination.
        Linear = "linear",
        /// Binomial tree: each member forwards to its children from its own destination.
        Binomial = "binomial",
        /// A chain from the root, the data cut in chunks (`XPUSHMEM_COLL_CHUNK_SIZE`) forwarded as they arrive.
        Pipelined = "pipelined" | "pipeline" | "chunked",
        /// The data travels inside the agreement: one signalled message from the root to each member (when it
        /// fits in the team's exchange area; otherwise as `Auto` without it).
        Eager = "eager",
        /// The data travels inside the agreement in `ceil(log2 n)` rounds (the gathering exchange: in round `k`
        /// each member forwards what it holds to the member `2^k` before it), when it fits; otherwise as `Auto`
        /// without it. `Auto` takes it from `XPUSHMEM_EAGER_ROUNDS_FROM` members on.
        EagerRounds = "eager-rounds" | "eager_rounds",
        /// Node-aware: the root puts the data into the leader of every other node of the team (see
        /// `Shmem::team_node_groups`), then the members of its own node; each leader forwards it to the members
        /// of its node over shared memory. One inter-node transfer per other node.
        Hierarchical = "hierarchical" | "hier" | "node-aware",
        /// The data (at most 88 bytes) travels in the agreement's own messages: the dissemination's
        /// `ceil(log2 n)` rounds or the all-pairs' one, one or two cache lines each, about the cost of a barrier.
        /// When the data is larger or the agreement is neither (`XPUSHMEM_BARRIER_ALGORITHM`, a team across nodes),
        /// as `Auto` without it. `Auto` takes it where it can (with a core per PE, 8 B at 16 PEs: 2.6 -> 1.7 µs;
        /// docs/PERFORMANCE.md, round fourteen).
        Agreement = "agreement",
    }
);

algo_enum!(
    /// Algorithms of `fcollect` and `collect`.
    CollectAlgo, "XPUSHMEM_COLLECT_ALGORITHM", {
        /// Every member puts its block into every member's destination.
        Direct = "direct" | "linear",
        /// Blocks travel around a ring, n - 1 steps.
        Ring = "ring",
        /// `fcollect`: the blocks travel inside the agreement, one signalled message per pair of members (when a
        /// block fits in the team's exchange area; otherwise, and for `collect`, as `Auto` without it).
        Eager = "eager",
        /// `fcollect`: the blocks travel inside the agreement in `ceil(log2 n)` rounds (Bruck's allgather: in
        /// round `k` each member forwards the blocks it holds to the member `2^k` before it), when they fit;
        /// otherwise, and for `collect`, as `Auto` without it. `Auto` takes it from `XPUSHMEM_EAGER_ROUNDS_FROM`
        /// members on.
        EagerRounds = "eager-rounds" | "eager_rounds",
        /// Node-aware: each member puts its block into its node's leader over shared memory, the leaders put
        /// their node's blocks into every other leader, and each leader copies the whole result to the members
        /// of its node. Every block crosses between two nodes once per other node, in one transfer per leader.
        Hierarchical = "hierarchical" | "hier" | "node-aware",
    }
);

algo_enum!(
    /// Algorithms of `alltoall` and `alltoalls`.
    AlltoallAlgo, "XPUSHMEM_ALLTOALL_ALGORITHM", {
        /// n - 1 steps; in step s each member sends to the member s ahead and waits for the one s behind.
        Pairwise = "pairwise",
        /// Every member puts all its blocks at once, then waits for all.
        Direct = "direct" | "linear",
        /// The blocks travel inside the agreement, one signalled message per pair of members (when a block fits
        /// in the team's exchange area; otherwise as `Auto` without it).
        Eager = "eager",
        /// The blocks travel inside the agreement in `ceil(log2 n)` rounds (Bruck's alltoall on the gathering
        /// exchange's pattern: in round `k` each member forwards the blocks whose distance to their destination
        /// has bit `k` set to the member `2^k` before it, about `n / 2` blocks per round), when they fit;
        /// otherwise as `Auto` without it. `Auto` takes it from `XPUSHMEM_EAGER_ROUNDS_FROM` members on.
        EagerRounds = "eager-rounds" | "eager_rounds",
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
        /// Every member's source travels inside the agreement to every member (one signalled message per pair),
        /// which folds them in member order (when it fits in the team's exchange area; otherwise as `Auto`
        /// without it).
        Eager = "eager",
        /// Every member's source reaches every member inside the agreement in `ceil(log2 n)` rounds (the
        /// gathering exchange, Bruck's allgather), and each folds them in member order, when they fit; otherwise
        /// as `Auto` without it. `Auto` takes it from `XPUSHMEM_EAGER_ROUNDS_FROM` members on.
        EagerRounds = "eager-rounds" | "eager_rounds",
        /// Node-aware: each node's leader folds its node's sources (over shared memory, in member order), the
        /// leaders exchange these partials and fold them in node order (the order of `Shmem::team_node_groups`),
        /// then each leader hands the result to the members of its node. One inter-node transfer per pair of
        /// leaders.
        Hierarchical = "hierarchical" | "hier" | "node-aware",
        /// Reduce-scatter then allgather, each in one step: member `i` reads block `i` (1/n of the data) of every
        /// member's source directly, folds them in member order into its `dest`, and signals every member; each
        /// then copies every other member's finished block from its `dest`. Two synchronisations whatever the
        /// team size, and per member about twice the data read (the ring's traffic, without its 2 (n - 1)
        /// sequential steps).
        ReduceScatterAllgather = "rs-ag" | "rsag" | "reduce-scatter-allgather",
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

/// From which team size `Auto` runs the eager collectives in rounds (`XPUSHMEM_EAGER_ROUNDS_FROM`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoundsFrom {
    /// From [`RoundsFrom::AUTO_SIZE`] members, unless the machine runs more PEs than CPUs.
    Auto,
    /// From this many members, whatever the load.
    Size(usize),
    /// Never.
    Off,
}

impl RoundsFrom {
    /// The team size from which `Auto` takes the rounds by default.
    pub const AUTO_SIZE: usize = 8;

    /// Whether a team of `n` takes the rounds (`oversubscribed`: more PEs on this machine than CPUs).
    pub fn applies(self, n: usize, oversubscribed: bool) -> bool {
        match self {
            RoundsFrom::Auto => !oversubscribed && n >= Self::AUTO_SIZE,
            RoundsFrom::Size(m) => n >= m,
            RoundsFrom::Off => false,
        }
    }
}
