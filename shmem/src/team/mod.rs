//! Teams: subsets of PEs with their own numbering and their own synchronisation space.
//!
//! Two teams exist from the start: [`Shmem::team_world`] (every PE) and [`Shmem::team_shared`] (the PEs of this
//! node). New teams come from [`Shmem::team_split_strided`] and [`Shmem::team_split_2d`], both collective over
//! the parent team; a PE that is not part of a new team gets `None` (OpenSHMEM's `SHMEM_TEAM_INVALID`).
//! [`Shmem::team_of_members`] makes a team among its members only (the other PEs never call; `members.rs`).
//!
//! Every collective call on a team starts with the team's agreement (`Ctx::enter`, in `ctx/agree.rs`): the call's
//! identity travels inside the synchronisation, so members in different collectives fail together with a
//! mismatch naming both calls. `barrier_all`, `sync_all` and the collective allocations are calls on
//! `TEAM_WORLD`; the collectives of `coll` run on top of this module.
//!
//! This file holds the [`Team`] handle and the team API of [`Shmem`]; `split.rs` team creation and destruction;
//! `members.rs` the teams made by their members only;
//! `ctx/` the protocols (identity, agreement, exchanges, barriers). The team table they run on (members, slots,
//! the pool, each team's state) is core data, in `core/teams.rs`.
//!
//! ## Scratch space
//! Each team owns one *slot*: counters for barriers and for the signals of the collectives, the agreement's rounds
//! and identity words (no user pSync arrays). The slots of `TEAM_WORLD` and `TEAM_SHARED` live in the runtime's own
//! region of every PE (they exist from start-up); split teams take slots of a pool in the symmetric heap, allocated
//! collectively by the first team creation (the pool and the two predefined slots make `XPUSHMEM_TEAMS_MAX`).
//! A team made by its members only has its slot in the team space of its members (as a team-scoped allocation,
//! `memory.rs`), agreed among them. Creating a split team picks a slot that is free on every PE of the parent (the
//! parent exchanges its free-slot masks), so teams with disjoint PEs may share a slot index. Counters only grow
//! and every PE remembers how many increments it has been promised on each, so back-to-back collectives never
//! mix rounds and no slot ever needs resetting while in use; a slot is zeroed when a new team takes it.
//!
//! ## Errors
//! Team creation checks its arguments on every PE and exchanges them over the parent: bad values on any PE, or
//! different values on different PEs, make the call fail on every PE with the same verdict. Running out of slots
//! is an error naming `XPUSHMEM_TEAMS_MAX`.

mod ctx;
mod members;
pub mod memory;
mod split;

pub(crate) use crate::core::groups::Groups;
pub(crate) use crate::core::teams::{
    device_entry, layout, lock, Kind, Members, NodeAwareCounters, Pool, TeamInner, TeamState,
    Teams, PREDEFINED, SHARED_SLOT, SLOT_BYTES, SYS_SLOTS, WORLD_SLOT,
};
pub use crate::core::teams::{Messages, NodeAwareStats, TeamConfig};
#[cfg(test)]
pub(crate) use ctx::describe;
pub use ctx::{digest, BarrierAlgo};
pub(crate) use ctx::{
    eager_capacity, name_word, type_code, CallId, Carry, Ctx, Space, COMMON, INFO,
};

use crate::core::Shmem;
use crate::error::{Error, Result};
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub use crate::config::{TEAMS_MAX_DEFAULT, TEAMS_MAX_LIMIT};

// The table's protocols (`split.rs` adds the pool's collective allocation).
impl Teams {
    /// Write the predefined teams into the device library's team table of this PE (device heaps; at start-up).
    pub(crate) fn publish_predefined(&self, sh: &Shmem) -> Result<()> {
        if let Some(dev) = sh.device() {
            for t in [&self.world, &self.shared] {
                dev.set_team_entry(t.slot, device_entry(&t.members, t.idx), false)?;
            }
        }
        Ok(())
    }

    /// A synchronisation context on `TEAM_WORLD` for `op` (the runtime's own collectives).
    pub(crate) fn world_ctx<'a>(&'a self, sh: &'a Shmem, op: &'static str) -> Ctx<'a> {
        let w = &self.world;
        Ctx::new(sh, w, Space::Sys(SYS_SLOTS), lock(&w.state), op)
    }
}

/// A team handle: a set of PEs with their own numbering `0..n_pes()` and their own synchronisation space.
///
/// Handles are cheap to clone; every clone names the same team. A handle only exists on the team's members.
/// Collectives over a team must be called by all its members in the same order, and one team must not be used by
/// two threads of a PE at the same time (different teams may).
#[derive(Clone)]
pub struct Team {
    /// The runtime the team belongs to ([`Teams::id`]).
    runtime: u64,
    pub(crate) inner: Arc<TeamInner>,
}

impl fmt::Debug for Team {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.describe())
    }
}

impl Team {
    /// The team's number in device code (`int team` of the device library's `xpushmem_team_*` calls and
    /// work-group collectives; NVSHMEM passes its `nvshmem_team_t` the same way): the team's slot, the same on
    /// every member. `TEAM_WORLD` is 0 and `TEAM_SHARED` 1. Valid in kernels of a device heap while the team lives.
    /// -1 for a team made by its members only ([`Shmem::team_of_members`]), which device heaps cannot have.
    pub fn device_id(&self) -> i32 {
        match self.inner.kind {
            Kind::Members { .. } => -1,
            _ => self.inner.slot as i32,
        }
    }

    /// This PE's number in the team.
    pub fn my_pe(&self) -> usize {
        self.inner.idx
    }

    /// Number of PEs in the team.
    pub fn n_pes(&self) -> usize {
        self.inner.members.len()
    }

    /// The global PE number of team member `pe`; an error when `pe >= n_pes()`.
    pub fn global_pe(&self, pe: usize) -> Result<usize> {
        if pe >= self.n_pes() {
            return Err(Error::InvalidPe {
                pe: pe as i64,
                n_pes: self.n_pes(),
                context: format!("member of {}", self.describe()),
            });
        }
        Ok(self.inner.members.pe(pe))
    }

    /// The team's configuration.
    pub fn config(&self) -> TeamConfig {
        self.inner.config
    }

    /// Whether this is `TEAM_WORLD`.
    pub fn is_world(&self) -> bool {
        self.inner.kind == Kind::World
    }

    /// Whether this is `TEAM_SHARED`.
    pub fn is_shared(&self) -> bool {
        self.inner.kind == Kind::Shared
    }

    /// A short description (kind, size, members).
    pub fn describe(&self) -> String {
        let m = &self.inner.members;
        let who = match m {
            Members::Strided {
                start,
                stride,
                size,
            } => format!("PEs {start}+{stride}*[0,{size})"),
            Members::List(l) => format!("PEs {l:?}"),
        };
        let kind = match self.inner.kind {
            Kind::World => "TEAM_WORLD".to_string(),
            Kind::Shared => "TEAM_SHARED".to_string(),
            Kind::Split => format!("team (slot {})", self.inner.slot),
            Kind::Members { off } => {
                format!("team of its members (scratch at heap offset {off:#x})")
            }
        };
        format!("{kind} of {} ({who})", m.len())
    }

    /// Check the handle is usable with `sh` and lock the team for one collective.
    pub(crate) fn ctx<'a>(&'a self, sh: &'a Shmem, op: &'static str) -> Result<Ctx<'a>> {
        let teams = sh.teams();
        if self.runtime != teams.id {
            return Err(Error::State(format!(
                "{op}: {} belongs to an earlier, finalized runtime instance",
                self.describe()
            )));
        }
        if self.inner.destroyed.load(Ordering::SeqCst) {
            return Err(Error::State(format!(
                "{op}: {} was destroyed",
                self.describe()
            )));
        }
        let space = match self.inner.kind {
            Kind::World | Kind::Shared => Space::Sys(SYS_SLOTS + self.inner.slot * SLOT_BYTES),
            Kind::Split => {
                let pool = teams
                    .pool()
                    .ok_or_else(|| Error::State(format!("{op}: team scratch pool missing")))?;
                Space::Heap(pool.off + (self.inner.slot - PREDEFINED) * SLOT_BYTES)
            }
            Kind::Members { off } => Space::Heap(off),
        };
        Ok(Ctx::new(
            sh,
            &self.inner,
            space,
            lock(&self.inner.state),
            op,
        ))
    }
}

/// The outcome of [`Shmem::team_agree`], the same on every member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Agreement {
    /// The lowest team rank that reported a failure, if any.
    pub failed: Option<usize>,
    /// The lowest team rank whose arguments' digest differs from this PE's, if any.
    pub differs: Option<usize>,
}

impl Agreement {
    /// Take in team rank `i`'s outcome (heard in rank order): whether it failed, whether its digest differs.
    pub(crate) fn note(&mut self, i: usize, failed: bool, differs: bool) {
        if failed && self.failed.is_none() {
            self.failed = Some(i);
        }
        if differs && self.differs.is_none() {
            self.differs = Some(i);
        }
    }
}

impl Shmem {
    /// The runtime's team bookkeeping.
    pub(crate) fn teams(&self) -> &Teams {
        &self.teams
    }

    /// The node-aware groups of `team`: its members (team ranks) grouped by the node they share memory on, each
    /// group in team order, led by its first member; groups in the order of their leaders. With
    /// `XPUSHMEM_TRANSPORT=fabric` every member is a group of its own. The hierarchical algorithms run an
    /// intra-group phase over shared memory, an inter-group phase among the leaders, then an intra-group release.
    pub fn team_node_groups(&self, team: &Team) -> Vec<Vec<usize>> {
        team.inner.groups(self).members.clone()
    }

    /// The algorithm `team`'s barriers, syncs and collective agreements take with [`BarrierAlgo::Auto`]:
    /// `XPUSHMEM_BARRIER_ALGORITHM` when set, otherwise [`BarrierAlgo::Hierarchical`] when the team spans more
    /// than one node and a node holds two of its members or more ([`Shmem::team_node_groups`]), else
    /// [`BarrierAlgo::AllPairs`] for teams of 3 up to [`crate::algo::ALL_PAIRS_UP_TO`] members and
    /// [`BarrierAlgo::Dissemination`] otherwise. An error when the variable holds an unknown name.
    pub fn team_barrier_algorithm(&self, team: &Team) -> Result<BarrierAlgo> {
        team.ctx(self, "team_barrier_algorithm")?.auto_pattern()
    }

    /// How many times this PE ran the node-aware algorithms since start-up.
    pub fn node_aware_stats(&self) -> NodeAwareStats {
        let c = &self.teams().node_aware;
        NodeAwareStats {
            agreements: c.agreements.load(Ordering::Relaxed),
            broadcasts: c.broadcasts.load(Ordering::Relaxed),
            reductions: c.reductions.load(Ordering::Relaxed),
            collects: c.collects.load(Ordering::Relaxed),
        }
    }

    /// `TEAM_WORLD`: every PE, numbered as by [`Shmem::my_pe`]. Not collective; the team's scratch is made by its
    /// first collective.
    pub fn team_world(&self) -> Team {
        Team {
            runtime: self.teams().id,
            inner: self.teams().world.clone(),
        }
    }

    /// `TEAM_SHARED`: the PEs of this node (those whose memory this PE can load from and store to), in global order.
    pub fn team_shared(&self) -> Team {
        Team {
            runtime: self.teams().id,
            inner: self.teams().shared.clone(),
        }
    }

    /// This PE's number in `team` (OpenSHMEM `team_my_pe`).
    pub fn team_my_pe(&self, team: &Team) -> usize {
        team.my_pe()
    }

    /// Number of PEs in `team` (OpenSHMEM `team_n_pes`).
    pub fn team_n_pes(&self, team: &Team) -> usize {
        team.n_pes()
    }

    /// The configuration `team` was created with (OpenSHMEM `team_get_config`).
    pub fn team_get_config(&self, team: &Team) -> TeamConfig {
        team.config()
    }

    /// The number in `dest` of PE `pe` of `src` (OpenSHMEM `team_translate_pe`): `None` when that PE is not a
    /// member of `dest`; an error when `pe` is not a PE of `src`.
    pub fn team_translate_pe(&self, src: &Team, pe: usize, dest: &Team) -> Result<Option<usize>> {
        let global = src.global_pe(pe)?;
        Ok(dest.inner.members.index_of(global))
    }

    /// The team's agreement, for a collective of a layer above (the op family's groups): a barrier over `team`
    /// (completing this PE's outstanding puts first) that carries the call's name `op`, whether this PE failed
    /// (`failed`), and a digest of the arguments that must be the same on every member (`digest`). Every member
    /// learns the lowest rank that failed and a rank whose digest differs ([`Agreement`]); a member in another
    /// collective of the team (another `op`, or a team collective) makes the call fail with [`Error::Mismatch`]
    /// on every member. The runtime uses the same step for its own collectives.
    pub fn team_agree(
        &self,
        team: &Team,
        op: &'static str,
        failed: bool,
        digest: u64,
    ) -> Result<Agreement> {
        team.ctx(self, op)?.agree_external(op, !failed, digest)
    }

    /// Payload bytes one member may send each other member in one [`Shmem::team_exchange`] on `team` (16 KiB
    /// divided by the team size, less a header; 0 when the team is too large for the exchange).
    pub fn team_exchange_capacity(&self, team: &Team) -> usize {
        let n = team.inner.members.len();
        if n == 1 {
            return usize::MAX;
        }
        ctx::exchange_capacity(n)
    }

    /// Payload bytes by which one-round exchanges on `team` size their messages: the eager collectives carry data
    /// up to this much per member in one exchange, and the op family's split messages and eager chunks keep to it
    /// (8 KiB divided by the team size, less a header; at most [`Shmem::team_exchange_capacity`]). A one-round
    /// message is written once per member, so above this size the signalled forms win; the rounds' messages
    /// (Bruck's exchanges, about `n / 2` blocks each) may fill the whole exchange.
    pub fn team_eager_capacity(&self, team: &Team) -> usize {
        let n = team.inner.members.len();
        if n == 1 {
            return usize::MAX;
        }
        ctx::eager_capacity(n)
    }

    /// Where a [`Shmem::team_exchange`] payload starts within its cache line, in bytes (its region starts on a
    /// line; the flag and one header word come first). A layer above that sends a long part after a short head can
    /// pad the head so that the part starts on a line: the op family does so for eager chunks of 256 bytes or more.
    pub const TEAM_EXCHANGE_PAYLOAD_OFFSET: usize = 8 * layout::EXCH_PAYLOAD;

    /// The team's agreement folded into one signalled all-to-all exchange, for a collective of a layer above named
    /// `op` (the op family's all-to-alls): every member sends every other member its verdict on its own arguments
    /// (`failed`), the digest of the arguments that must be equal everywhere (`digest`; compared as 48 bits of its mixed
    /// value, so two digests that differ pass as equal with a chance of 2^-48) and a message (`send`,
    /// one payload per team rank, at most [`Shmem::team_exchange_capacity`] bytes each), then waits for the
    /// messages of every member: one message latency, no dissemination rounds. On return `recv` holds every
    /// member's payload (empty from a member that failed) and the [`Agreement`] is the same on every member.
    /// Completes this PE's outstanding puts first. A member in another collective of the team makes the call
    /// fail with [`Error::Mismatch`] on every member, each leaving only once every member has entered the call
    /// (so the members stay in step for the next one). Messages are double-buffered by the team's
    /// sequence number: a member's buffer is not reused before the next collective of the team completed.
    pub fn team_exchange(
        &self,
        team: &Team,
        op: &'static str,
        failed: bool,
        digest: u64,
        send: &Messages,
        recv: &mut Messages,
    ) -> Result<Agreement> {
        team.ctx(self, op)?
            .exchange_external(op, !failed, digest, send, recv)
    }
}
