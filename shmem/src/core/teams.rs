//! The team table as data: the teams of one runtime ([`Teams`], a field of [`Shmem`](super::Shmem)), each team's
//! members, slot and per-PE state ([`TeamInner`], [`TeamState`]), the slot pool of the split teams and the word
//! layout of a slot ([`layout`]). The protocols that run on this data (the agreement, exchanges, barriers, team
//! creation) live in `team/` above the engine; this file names nothing above `core`.

use super::groups::Groups;
use super::Shmem;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

pub(crate) const SLOT_BYTES: usize = layout::SLOT_WORDS * 8;
pub(crate) const WORLD_SLOT: usize = 0;
pub(crate) const SHARED_SLOT: usize = 1;
/// Slots outside the pool (the predefined teams').
pub(crate) const PREDEFINED: usize = 2;
/// Where the predefined teams' slots start in the runtime's own region.
pub(crate) const SYS_SLOTS: usize = 4096;
const _: () = assert!(SYS_SLOTS + PREDEFINED * SLOT_BYTES <= super::SYS_BYTES);
// The predefined slots start on a pair of cache lines (the pool's allocation is aligned to one).
const _: () = assert!(SYS_SLOTS % 128 == 0);

/// The words of the teams made by their members only (`team/members.rs`) in every PE's system region, after the
/// predefined teams' slots: this PE's record of the creation round it is in, then one mailbox word per PE (how
/// many round signals that PE has sent this one, ever). Byte offsets.
pub(crate) mod members_area {
    use super::{PREDEFINED, SLOT_BYTES, SYS_SLOTS};
    /// The record: [`RECORD_WORDS`] words.
    pub const RECORD: usize = SYS_SLOTS + PREDEFINED * SLOT_BYTES;
    /// Words of the record: the digest of the call (identity, tag, member list), a proposal, a verdict.
    pub const RECORD_WORDS: usize = 4;
    /// Mailbox word of PE `p`: `MAILBOX + 8 * p`.
    pub const MAILBOX: usize = RECORD + 8 * RECORD_WORDS;
    /// How many PEs have a mailbox word: the largest job in which teams can be made by their members only.
    pub const MAILBOX_PES: usize = (crate::core::SYS_BYTES - MAILBOX) / 8;
    const _: () = assert!(MAILBOX_PES >= 1024);
}

/// Word offsets (in 8-byte words) inside one team slot.
pub(crate) mod layout {
    /// Rounds of the agreement: enough for 2^32 PEs.
    pub const AGREE_ROUNDS: usize = 32;
    /// Words per agreement round (two cache lines): flag (raised to the sequence number), failed (OR), lowest
    /// digest, highest digest, then a broadcast's data when it travels with the agreement (whether the sender
    /// holds it, and up to [`CARRY_WORDS`] words of it). A barrier's message stays in the first line; a carried
    /// broadcast's reaches into the second only above 24 bytes.
    pub const AGREE_ROUND_WORDS: usize = 16;
    /// Data words one agreement message carries (`BroadcastAlgo::Agreement`).
    pub const CARRY_WORDS: usize = AGREE_ROUND_WORDS - 5;
    /// The agreement's rounds, two parities of [`AGREE_ROUNDS`] rounds.
    pub const AGREE: usize = 0;
    /// Arrival counter of the linear barrier (its release and the tree's messages use agreement slots).
    pub const ARRIVE: usize = AGREE + 2 * AGREE_ROUNDS * AGREE_ROUND_WORDS;
    // ARRIVE + 1 is unused (the old release counter).
    /// Data-ready signals of the data collectives.
    pub const SIG_DATA: usize = ARRIVE + 2;
    /// Pre-step signal of the recursive-doubling reduction (folding the extra PEs in).
    pub const SIG_PRE: usize = ARRIVE + 3;
    /// Final-result signal of the recursive-doubling reduction (to the folded PEs).
    pub const SIG_FIN: usize = ARRIVE + 4;
    /// Step counter of ring algorithms (from the left neighbour).
    pub const SIG_RING: usize = ARRIVE + 5;
    /// Done / acknowledgement counter of ring and chain algorithms (from the right neighbour).
    pub const SIG_DONE: usize = ARRIVE + 6;
    /// Per-round "partial ready" counters of the recursive-doubling reduction.
    pub const RD_READY: usize = ARRIVE + 8;
    /// Per-round "partial read" acknowledgements of the recursive-doubling reduction.
    pub const RD_ACK: usize = RD_READY + 64;
    /// Identity words of the collectives: two buffers of [`CHECK_WORDS`] (by sequence parity).
    pub const CHECK: usize = RD_ACK + 64;
    /// Words in one identity buffer: `team::COMMON` compared words, `team::INFO` per-PE words, the PE's own
    /// verdict on its arguments, the sequence number.
    pub const CHECK_WORDS: usize = 18;
    /// Free-slot mask of team creation (up to 64 words: 4096 slots).
    pub const SPLIT_MASK: usize = CHECK + 2 * CHECK_WORDS;
    /// The exchange area (`team::Ctx::exchange`): two buffers of [`EXCH_PARITY_WORDS`] (by sequence parity),
    /// each split evenly into one message region per member. It starts on a pair of cache lines (as do the slot
    /// and the agreement's round slots), and a region holds whole lines where it can (`exchange_region_words`):
    /// a small message then crosses cores in as few lines as its bytes need.
    pub const EXCH: usize = (SPLIT_MASK + 64).next_multiple_of(16);
    /// Words of one buffer of the exchange area.
    pub const EXCH_PARITY_WORDS: usize = 2048;
    /// Words of a buffer by which the one-round forms size their messages (the eager collectives, the op
    /// family's split messages: `Shmem::team_eager_capacity`); the rounds' messages (about `n / 2` blocks
    /// each) may use the whole buffer. A one-round message goes to every member, so it pays for its size `n - 1`
    /// times: above this share the signalled forms are faster (with a core per PE: 512 B at 16 PEs, 4 KiB at
    /// 2 PEs; docs/PERFORMANCE.md, round thirteen).
    pub const EAGER_PARITY_WORDS: usize = 1024;
    const _: () = assert!(EAGER_PARITY_WORDS <= EXCH_PARITY_WORDS);
    /// Header words of an exchange message region, as its capacity counts them: the flag (raised to the sequence
    /// number) and two words. The exchanges in rounds (`gather.rs`, `bruck.rs`) use both words (the sender's
    /// argument digest, its verdict and payload length, `len << 1 | failed`); the one-round exchange packs them
    /// into one ([`EXCH_PAYLOAD`]).
    pub const EXCH_HEADER: usize = 3;
    /// Where a one-round exchange message's payload starts in its region: after the flag and one header word
    /// holding the digest's top 48 bits, the payload length (below 2^15 bytes) and the verdict
    /// (`team::ctx::exchange`): a message of up to 48 payload bytes fits the flag's cache line.
    pub const EXCH_PAYLOAD: usize = 2;
    const _: () = assert!(EXCH_PAYLOAD < EXCH_HEADER && 8 * EXCH_PARITY_WORDS < 1 << 15);
    /// Words in one slot (whole pairs of cache lines, so that every slot of a pool starts on one).
    pub const SLOT_WORDS: usize = (EXCH + 2 * EXCH_PARITY_WORDS).next_multiple_of(16);
    // The agreement's round slots and the exchange area start on a pair of lines, given a slot that does.
    const _: () = assert!(AGREE_ROUND_WORDS % 16 == 0 && EXCH % 16 == 0 && SLOT_WORDS % 16 == 0);
}

/// Options of a new team (OpenSHMEM's `shmem_team_config_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TeamConfig {
    /// Number of communication contexts the team is expected to use (recorded and reported by
    /// [`Shmem::team_get_config`]; this runtime has no per-team context limit).
    pub num_contexts: usize,
}

/// The PEs of a team, in team order, as global PE numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Members {
    /// `start + i * stride` for `i < size`; a negative stride lists the PEs in descending order (OpenSHMEM 1.6).
    Strided {
        start: usize,
        stride: isize,
        size: usize,
    },
    /// An explicit list, in team order (ascending, except for sub-teams taken with a negative stride).
    List(Arc<[usize]>),
}

impl Members {
    /// The members `pes`, in team order (distinct PEs).
    pub(crate) fn from_list(pes: Vec<usize>) -> Members {
        let size = pes.len();
        if size == 1 {
            return Members::Strided {
                start: pes[0],
                stride: 1,
                size,
            };
        }
        if size >= 2 {
            let stride = pes[1] as isize - pes[0] as isize;
            if stride != 0
                && pes
                    .windows(2)
                    .all(|w| w[1] as isize - w[0] as isize == stride)
            {
                return Members::Strided {
                    start: pes[0],
                    stride,
                    size,
                };
            }
        }
        Members::List(pes.into())
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Members::Strided { size, .. } => *size,
            Members::List(l) => l.len(),
        }
    }

    /// Global PE of team member `i` (`i < len`).
    pub(crate) fn pe(&self, i: usize) -> usize {
        match self {
            Members::Strided { start, stride, .. } => {
                (*start as isize + i as isize * stride) as usize
            }
            Members::List(l) => l[i],
        }
    }

    /// Team index of global PE `pe`, if it is a member.
    pub(crate) fn index_of(&self, pe: usize) -> Option<usize> {
        match self {
            Members::Strided {
                start,
                stride,
                size,
            } => {
                let d = pe as isize - *start as isize;
                if *stride == 0 {
                    return (d == 0 && *size > 0).then_some(0);
                }
                let k = d / stride;
                (d % stride == 0 && k >= 0 && (k as usize) < *size).then_some(k as usize)
            }
            Members::List(l) => l.iter().position(|&p| p == pe),
        }
    }

    /// The members at team indices `start + k * stride`, `k < size` (already validated).
    pub(crate) fn sub(&self, start: usize, stride: isize, size: usize) -> Members {
        let stride = if size == 1 { 1 } else { stride };
        match self {
            Members::Strided {
                start: s0,
                stride: st0,
                ..
            } => Members::Strided {
                start: (*s0 as isize + start as isize * st0) as usize,
                stride: stride * st0,
                size,
            },
            Members::List(l) => Members::from_list(
                (0..size)
                    .map(|k| l[(start as isize + k as isize * stride) as usize])
                    .collect(),
            ),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    World,
    Shared,
    Split,
    /// Made by its members only (`team/members.rs`): its slot is a range of the team space, at this byte offset of
    /// the symmetric heap (the same on every member).
    Members {
        off: usize,
    },
}

/// Mutable per-team state of this PE: what every counter of the slot is expected to have reached.
#[derive(Debug)]
pub(crate) struct TeamState {
    /// Increments promised so far on each slot word.
    pub expected: Vec<u64>,
    /// Collective calls run so far on the team (the sequence number of the agreement).
    pub seq: u64,
    /// Scratch of the exchange's messages (kept between calls).
    pub xbuf: Vec<u8>,
    /// The messages an eager collective sends and receives (kept between calls: a small collective allocates
    /// nothing for them).
    pub send: Messages,
    pub recv: Messages,
    /// The identity words (all but the sequence number) this PE last published in each parity buffer of the
    /// slot's identity area (`None` until it published there): a call whose words are the same rewrites only
    /// its sequence number (`team::Ctx::publish`). Every write to this PE's identity area goes through it.
    pub published: [Option<[u64; layout::CHECK_WORDS]>; 2],
    /// The identity words of the call being published (built here, so that a publication the agreement defers
    /// copies nothing).
    pub pending: [u64; layout::CHECK_WORDS],
    /// The last algorithm choice a collective made on the team (`team::Ctx::choose`).
    pub choice: Option<Choice>,
}

/// A collective's algorithm choice on a team: for call `call` (its identity code), the algorithm requested
/// (`requested`, `Auto` or one named) and the data size `bytes`, the algorithm that runs (`chosen`); algorithms by
/// their codes. On one team the choice is a function of these three alone (the team's size and layout and the
/// configuration do not change), so a call that repeats them takes it instead of choosing again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Choice {
    pub call: u64,
    pub requested: u64,
    pub bytes: usize,
    pub chosen: u64,
}

#[derive(Debug)]
pub(crate) struct TeamInner {
    pub(crate) members: Members,
    pub(crate) idx: usize,
    pub(crate) slot: usize,
    pub(crate) kind: Kind,
    pub(crate) config: TeamConfig,
    pub(crate) state: Mutex<TeamState>,
    pub(crate) destroyed: AtomicBool,
    /// The team's node layout (`groups.rs`), computed on first use.
    pub(crate) groups: OnceLock<Arc<Groups>>,
}

impl TeamInner {
    pub(crate) fn new(
        members: Members,
        idx: usize,
        slot: usize,
        kind: Kind,
        config: TeamConfig,
    ) -> TeamInner {
        TeamInner {
            members,
            idx,
            slot,
            kind,
            config,
            state: Mutex::new(TeamState {
                expected: vec![0; layout::SLOT_WORDS],
                seq: 0,
                xbuf: Vec::new(),
                send: Messages::default(),
                recv: Messages::default(),
                published: [None; 2],
                pending: [0; layout::CHECK_WORDS],
                choice: None,
            }),
            destroyed: AtomicBool::new(false),
            groups: OnceLock::new(),
        }
    }

    /// The team's node layout (see `groups.rs`): computed once from the node table and the transport mode.
    pub(crate) fn groups(&self, sh: &Shmem) -> Arc<Groups> {
        Arc::clone(self.groups_ref(sh))
    }

    /// Whether the team's node layout pays for the node-aware algorithms ([`Groups::pays`]), without a clone of
    /// the layout (every collective's choice of algorithm asks).
    pub(crate) fn layout_pays(&self, sh: &Shmem) -> bool {
        self.groups_ref(sh).pays()
    }

    /// The team's node layout, computed on first use.
    fn groups_ref(&self, sh: &Shmem) -> &Arc<Groups> {
        self.groups.get_or_init(|| {
            // With every peer forced onto the fabric no two PEs share memory: each is a domain of its own (the
            // PE numbers, offset past the node numbers).
            let forced = sh.cfg.transport == crate::config::TransportMode::Fabric;
            let n_pes = sh.n_pes();
            Arc::new(Groups::new(self.members.len(), |i| {
                let pe = self.members.pe(i);
                if forced {
                    n_pes + pe
                } else {
                    sh.nodes().node_of(pe)
                }
            }))
        })
    }
}

/// How many times this PE ran the node-aware (hierarchical) algorithms, since start-up
/// ([`Shmem::node_aware_stats`]): a way to check which path a collective took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeAwareStats {
    /// Hierarchical agreements: barriers and syncs, and the agreement every collective starts with.
    pub agreements: u64,
    /// Hierarchical broadcasts ([`crate::coll::BroadcastAlgo::Hierarchical`]).
    pub broadcasts: u64,
    /// Hierarchical reductions ([`crate::coll::ReduceAlgo::Hierarchical`]).
    pub reductions: u64,
    /// Hierarchical fcollects and collects ([`crate::coll::CollectAlgo::Hierarchical`]).
    pub collects: u64,
}

/// The counters behind [`NodeAwareStats`].
#[derive(Debug, Default)]
pub(crate) struct NodeAwareCounters {
    pub agreements: AtomicU64,
    pub broadcasts: AtomicU64,
    pub reductions: AtomicU64,
    pub collects: AtomicU64,
}

impl NodeAwareCounters {
    /// Count one run.
    pub(crate) fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Pool {
    /// Heap offset of the first pool slot (slot [`PREDEFINED`]).
    pub(crate) off: usize,
    /// Slots in all, the predefined ones included.
    pub(crate) slots: usize,
}

/// Team bookkeeping of one runtime (a field of [`Shmem`]).
#[derive(Debug)]
pub(crate) struct Teams {
    /// Which runtime this is (team handles of an earlier one are refused).
    pub(crate) id: u64,
    /// The split teams' slots, made by the first team creation.
    pub(crate) pool: Mutex<Option<Pool>>,
    /// Slots in use on this PE (bitmap, the predefined slots included).
    pub(crate) used: Mutex<Vec<u64>>,
    pub(crate) world: Arc<TeamInner>,
    pub(crate) shared: Arc<TeamInner>,
    /// Runs of the node-aware algorithms.
    pub(crate) node_aware: NodeAwareCounters,
    /// The members-only team creations (`team/members.rs`): per PE, the round signals this PE has taken from its
    /// mailbox word so far. Held for a whole creation (one at a time per PE).
    pub(crate) members_rounds: Mutex<Vec<u64>>,
}

impl Teams {
    /// The predefined teams of PE `me` of `n`, whose node holds `node_pes`.
    pub(crate) fn new(me: usize, n: usize, node_pes: Vec<usize>) -> Teams {
        static RUNTIMES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let world = TeamInner::new(
            Members::Strided {
                start: 0,
                stride: 1,
                size: n,
            },
            me,
            WORLD_SLOT,
            Kind::World,
            TeamConfig::default(),
        );
        let node = Members::from_list(node_pes);
        let sidx = node.index_of(me).unwrap_or(0);
        let shared = TeamInner::new(node, sidx, SHARED_SLOT, Kind::Shared, TeamConfig::default());
        Teams {
            id: RUNTIMES.fetch_add(1, Ordering::SeqCst),
            pool: Mutex::new(None),
            used: Mutex::new(vec![(1 << WORLD_SLOT) | (1 << SHARED_SLOT)]),
            world: Arc::new(world),
            shared: Arc::new(shared),
            node_aware: NodeAwareCounters::default(),
            members_rounds: Mutex::new(vec![0; n]),
        }
    }

    pub(crate) fn pool(&self) -> Option<Pool> {
        *lock(&self.pool)
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A team's entry in the device library's team table (`stride` 0: an explicit list, refused on the device).
pub(crate) fn device_entry(members: &Members, idx: usize) -> crate::abi::DeviceTeam {
    let (start, stride) = match members {
        Members::Strided { start, stride, .. } => (*start as i32, *stride as i32),
        Members::List(l) => (l.first().map_or(-1, |&p| p as i32), 0),
    };
    crate::abi::DeviceTeam {
        start,
        stride,
        size: members.len() as i32,
        my_pe: idx as i32,
    }
}

/// The messages of one [`Shmem::team_exchange`], one per team member in team rank order, back to back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Messages {
    /// The payloads back to back.
    pub data: Vec<u8>,
    /// End of each member's payload in `data` (member `i`'s runs from `ends[i - 1]`, or 0, to `ends[i]`).
    pub ends: Vec<usize>,
}

impl Messages {
    /// Member `i`'s payload (empty when there is none).
    #[inline]
    pub fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 {
            0
        } else {
            self.ends.get(i - 1).copied().unwrap_or(0)
        };
        let end = self.ends.get(i).copied().unwrap_or(start);
        self.data.get(start..end).unwrap_or_default()
    }

    /// The length of the longest payload (0 when there is none).
    #[inline]
    pub(crate) fn longest(&self) -> usize {
        let mut prev = 0;
        let mut most = 0;
        for &e in &self.ends {
            most = most.max(e.saturating_sub(prev));
            prev = e;
        }
        most
    }

    /// Append the next member's payload.
    #[inline]
    pub fn push(&mut self, payload: &[u8]) {
        self.data.extend_from_slice(payload);
        self.ends.push(self.data.len());
    }

    /// Close the next member's payload, written into `data` by the caller since the previous one.
    #[inline]
    pub fn close(&mut self) {
        self.ends.push(self.data.len());
    }

    /// Remove every payload (keeping the allocations).
    #[inline]
    pub fn clear(&mut self) {
        self.data.clear();
        self.ends.clear();
    }
}
