//! Teams: subsets of PEs with their own numbering and their own synchronisation space.
//!
//! Two teams exist from the start: [`Shmem::team_world`] (every PE) and [`Shmem::team_shared`] (the PEs of this
//! node). New teams come from [`Shmem::team_split_strided`] and [`Shmem::team_split_2d`], both collective over
//! the parent team; a PE that is not part of a new team gets `None` (OpenSHMEM's `SHMEM_TEAM_INVALID`).
//!
//! Every collective call on a team starts with the team's agreement ([`Ctx::enter`], in `ctx.rs`): the call's
//! identity travels inside the synchronisation, so members in different collectives fail together with a
//! mismatch naming both calls. `barrier_all`, `sync_all` and the collective allocations are calls on
//! `TEAM_WORLD`; the collectives of `coll` run on top of this module.
//!
//! ## Scratch space
//! Each team owns one *slot*: counters for barriers and for the signals of the collectives, the agreement's rounds
//! and identity words (no user pSync arrays). The slots of `TEAM_WORLD` and `TEAM_SHARED` live in the runtime's own
//! region of every PE (they exist from start-up); split teams take slots of a pool in the symmetric heap, allocated
//! collectively by the first team creation (the pool and the two predefined slots make `XPUSHMEM_TEAMS_MAX`).
//! Creating a team picks a slot that is free on every PE of the parent (the
//! parent exchanges its free-slot masks), so teams with disjoint PEs may share a slot index. Counters only grow
//! and every PE remembers how many increments it has been promised on each, so back-to-back collectives never
//! mix rounds and no slot ever needs resetting while in use; a slot is zeroed when a new team takes it.
//!
//! ## Errors
//! Team creation checks its arguments on every PE and exchanges them over the parent: bad values on any PE, or
//! different values on different PEs, make the call fail on every PE with the same verdict. Running out of slots
//! is an error naming `XPUSHMEM_TEAMS_MAX`.

mod ctx;

pub(crate) use crate::core::groups::Groups;
pub(crate) use crate::core::teams::{
    device_entry, layout, lock, Kind, Members, NodeAwareCounters, Pool, TeamInner, TeamState,
    Teams, PREDEFINED, SHARED_SLOT, SLOT_BYTES, SYS_SLOTS, WORLD_SLOT,
};
pub use crate::core::teams::{Messages, NodeAwareStats, TeamConfig};
#[cfg(test)]
pub(crate) use ctx::describe;
pub use ctx::{digest, BarrierAlgo};
pub(crate) use ctx::{name_word, type_code, CallId, Ctx, Space, COMMON, INFO};

use crate::core::Shmem;
use crate::error::{Error, Result};
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub use crate::config::{TEAMS_MAX_DEFAULT, TEAMS_MAX_LIMIT};
impl Teams {
    /// The pool, allocating it (collectively over all PEs, as part of the team creation `call`) on first use.
    /// `parent` is the team the creation runs over: it must span every PE.
    fn ensure_pool(
        &self,
        sh: &Shmem,
        parent: &TeamInner,
        call: [u64; COMMON],
        op: &'static str,
    ) -> Result<Pool> {
        let mut g = lock(&self.pool);
        if let Some(p) = *g {
            return Ok(p);
        }
        if parent.members.len() != sh.n_pes() {
            return Err(Error::State(format!(
                "{op}: the split teams' scratch pool is created by the first team creation over a team of every \
                 PE; split TEAM_WORLD first"
            )));
        }
        let slots = sh.config().teams_max.clone()?;
        let words = (slots - PREDEFINED) * SLOT_BYTES / 8;
        let s = sh.alloc_collective::<u64>(call, words, 64, true, op)?;
        let mut used = vec![0u64; slots.div_ceil(64)];
        used[0] |= (1 << WORLD_SLOT) | (1 << SHARED_SLOT);
        *lock(&self.used) = used;
        let p = Pool { off: s.off, slots };
        *g = Some(p);
        tracing::debug!(
            pe = sh.my_pe(),
            slots,
            off = s.off,
            "team scratch pool allocated"
        );
        Ok(p)
    }

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
    pub fn device_id(&self) -> i32 {
        self.inner.slot as i32
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

/// What a team creation asks for, per PE.
#[derive(Debug, Clone, Copy)]
enum Split {
    Strided {
        start: usize,
        stride: isize,
        size: usize,
    },
    TwoD {
        xrange: usize,
    },
}

impl Split {
    fn call(&self) -> CallId {
        match self {
            Split::Strided { .. } => CallId::SplitStrided,
            Split::TwoD { .. } => CallId::Split2d,
        }
    }

    /// The call's identity words.
    fn words(&self) -> [u64; COMMON] {
        let mut w = self.call().words();
        match *self {
            Split::Strided {
                start,
                stride,
                size,
            } => {
                w[3] = start as u64;
                w[4] = stride as i64 as u64;
                w[5] = size as u64;
            }
            Split::TwoD { xrange } => w[3] = xrange as u64,
        }
        w
    }

    /// Validate against a parent of `pn` PEs.
    fn validate(&self, pn: usize) -> Result<()> {
        match *self {
            Split::Strided {
                start,
                stride,
                size,
            } => {
                if size == 0 {
                    return Err(Error::invalid("size", 0, "a team has at least one PE"));
                }
                if start >= pn {
                    return Err(Error::InvalidPe {
                        pe: start as i64,
                        n_pes: pn,
                        context: "team_split_strided: start must be a PE of the parent team".into(),
                    });
                }
                if stride == 0 && size > 1 {
                    return Err(Error::invalid(
                        "stride",
                        0,
                        format!("must not be 0 for a team of {size} PEs"),
                    ));
                }
                // i128: no product of a usize and an isize overflows it.
                let last = start as i128 + (size as i128 - 1) * stride as i128;
                if last < 0 || last >= pn as i128 {
                    let (side, end) = if last < 0 {
                        ("below", "first PE 0".to_string())
                    } else {
                        ("past", format!("last PE {}", pn - 1))
                    };
                    return Err(Error::invalid(
                        "size",
                        size,
                        format!(
                            "start {start} + (size {size} - 1) * stride {stride} runs {side} the parent team's {end}"
                        ),
                    ));
                }
                Ok(())
            }
            Split::TwoD { xrange } => {
                if xrange == 0 {
                    return Err(Error::invalid("xrange", 0, "must be at least 1"));
                }
                Ok(())
            }
        }
    }

    /// New teams made by this call: (slot rank among the call's slots, members over parent indices, my index).
    fn teams_of(&self, pn: usize, pidx: usize) -> Vec<Option<(usize, isize, usize)>> {
        match *self {
            Split::Strided {
                start,
                stride,
                size,
            } => {
                let mine = if stride == 0 {
                    (pidx == start).then_some(0)
                } else {
                    let d = pidx as isize - start as isize;
                    let k = d / stride;
                    (d % stride == 0 && k >= 0 && (k as usize) < size).then_some(k)
                };
                vec![mine.map(|_| (start, stride, size))]
            }
            Split::TwoD { xrange } => {
                let xr = xrange.min(pn);
                let y = pidx / xr;
                let x = pidx % xr;
                let row_start = y * xr;
                let row_len = xr.min(pn - row_start);
                let col_len = (pn - x).div_ceil(xr);
                vec![
                    Some((row_start, 1, row_len)),
                    Some((x, xr as isize, col_len)),
                ]
            }
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
    /// [`BarrierAlgo::Dissemination`]. An error when the variable holds an unknown name.
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

    /// Make a team of the parent's PEs `start, start + stride, ...` (`size` of them), numbered in that order.
    /// Collective over `parent`; every parent PE must pass the same arguments. Members get `Some(team)`, the other
    /// parent PEs `None`. Bad or inconsistent arguments are an error on every PE.
    ///
    /// ```
    /// # let sh = xpushmem::init_single().unwrap();
    /// let world = sh.team_world();
    /// let evens = sh.team_split_strided(&world, 0, 2, 1, None).unwrap().expect("PE 0 is even");
    /// assert_eq!(evens.n_pes(), 1);
    /// sh.team_destroy(evens).unwrap();
    /// ```
    pub fn team_split_strided(
        &self,
        parent: &Team,
        start: usize,
        stride: usize,
        size: usize,
        config: Option<&TeamConfig>,
    ) -> Result<Option<Team>> {
        // A stride beyond isize::MAX cannot stay inside any parent: the same error as any stride that runs past.
        let stride = isize::try_from(stride).unwrap_or(isize::MAX);
        self.team_split_strided_signed(parent, start, stride, size, config)
    }

    /// [`Shmem::team_split_strided`] with a signed stride (OpenSHMEM 1.6): a negative stride makes the team of
    /// the parent's PEs `start, start - |stride|, ...`, numbered in that (descending) order.
    ///
    /// ```
    /// # let sh = xpushmem::init_single().unwrap();
    /// let world = sh.team_world();
    /// let t = sh.team_split_strided_signed(&world, 0, -1, 1, None).unwrap().expect("PE 0 is the start");
    /// assert_eq!(t.global_pe(0).unwrap(), 0);
    /// sh.team_destroy(t).unwrap();
    /// ```
    pub fn team_split_strided_signed(
        &self,
        parent: &Team,
        start: usize,
        stride: isize,
        size: usize,
        config: Option<&TeamConfig>,
    ) -> Result<Option<Team>> {
        let cfg = config.copied().unwrap_or_default();
        let mut t = self.split(
            parent,
            Split::Strided {
                start,
                stride,
                size,
            },
            [cfg, cfg],
            "team_split_strided",
        )?;
        Ok(t.pop().flatten())
    }

    /// Arrange the parent's PEs in a grid of rows of `xrange` PEs (the last row may be short) and make a team of
    /// each row (the x-axis team: numbered by column) and of each column (the y-axis team: numbered by row).
    /// Collective over `parent`; returns this PE's (row team, column team). An `xrange` larger than the parent
    /// gives one row of every PE and single-PE columns.
    pub fn team_split_2d(
        &self,
        parent: &Team,
        xrange: usize,
        xaxis_config: Option<&TeamConfig>,
        yaxis_config: Option<&TeamConfig>,
    ) -> Result<(Team, Team)> {
        let cfgs = [
            xaxis_config.copied().unwrap_or_default(),
            yaxis_config.copied().unwrap_or_default(),
        ];
        let mut t = self
            .split(parent, Split::TwoD { xrange }, cfgs, "team_split_2d")?
            .into_iter();
        match (t.next().flatten(), t.next().flatten()) {
            (Some(x), Some(y)) => Ok((x, y)),
            _ => Err(Error::State(
                "team_split_2d: internal error, PE missing from its row or column".into(),
            )),
        }
    }

    fn split(
        &self,
        parent: &Team,
        how: Split,
        cfgs: [TeamConfig; 2],
        op: &'static str,
    ) -> Result<Vec<Option<Team>>> {
        use layout::*;
        drop(parent.ctx(self, op)?);
        let pn = parent.n_pes();
        let local = how.validate(pn);
        // The pool's allocation carries the call's kind; its arguments are compared by the agreement below.
        let pool = self
            .teams()
            .ensure_pool(self, &parent.inner, how.call().words(), op)?;
        let mut ctx = parent.ctx(self, op)?;
        let pidx = ctx.idx();
        let mask_words = pool.slots.div_ceil(64);
        let need = match how {
            Split::Strided { .. } => 1,
            Split::TwoD { .. } => 2,
        };
        // Publish the free-slot mask, then agree on the call (a barrier); then read every member's mask.
        let free: Vec<u64> = {
            let used = lock(&self.teams().used);
            (0..mask_words)
                .map(|i| !used.get(i).copied().unwrap_or(u64::MAX))
                .collect()
        };
        ctx.write_words(SPLIT_MASK, &free)?;
        ctx.enter(how.words(), [0; INFO], local, false)?;
        let mut all_free = free.clone();
        for i in 0..pn {
            let m = ctx.read_words(i, SPLIT_MASK, mask_words)?;
            for (a, b) in all_free.iter_mut().zip(&m) {
                *a &= *b;
            }
        }
        // Pick the lowest slots free on every parent PE (the same on every PE).
        let mut slots = Vec::with_capacity(need);
        for s in 0..pool.slots {
            if slots.len() == need {
                break;
            }
            if all_free[s / 64] >> (s % 64) & 1 == 1 {
                slots.push(s);
            }
        }
        let result = if slots.len() < need {
            Err(Error::Config {
                var: "XPUSHMEM_TEAMS_MAX",
                value: pool.slots.to_string(),
                reason: format!(
                    "{op}: no free team slot on every PE of the parent team ({} slots, 2 taken by TEAM_WORLD and \
                     TEAM_SHARED); destroy unused teams or raise the limit",
                    pool.slots
                ),
            })
        } else {
            Ok(())
        };
        // Take the slots (a local failure here is reported after the closing barrier, never instead of it).
        let made = result.and_then(|()| {
            let mut out = Vec::new();
            for (k, t) in how.teams_of(pn, pidx).into_iter().enumerate() {
                let Some((s, st, sz)) = t else {
                    out.push(None);
                    continue;
                };
                out.push(Some(self.take_slot(
                    parent,
                    &pool,
                    slots[k],
                    parent.inner.members.sub(s, st, sz),
                    cfgs[k.min(1)],
                    op,
                )?));
            }
            Ok(out)
        });
        // Nobody signals into a new slot before its owner zeroed it; nobody rewrites the free-slot mask before
        // everyone has read it.
        ctx.barrier(BarrierAlgo::Auto)?;
        made
    }

    /// Mark `slot` used on this PE, zero it, and make this PE's handle of the new team.
    fn take_slot(
        &self,
        parent: &Team,
        pool: &Pool,
        slot: usize,
        members: Members,
        cfg: TeamConfig,
        op: &str,
    ) -> Result<Team> {
        let me = self.my_pe();
        let idx = members.index_of(me).ok_or_else(|| {
            Error::State(format!("{op}: internal error, PE {me} not in its team"))
        })?;
        {
            let mut used = lock(&self.teams().used);
            let w = used
                .get_mut(slot / 64)
                .ok_or_else(|| Error::State(format!("{op}: slot {slot} out of range")))?;
            if *w >> (slot % 64) & 1 == 1 {
                return Err(Error::State(format!(
                    "{op}: team slot {slot} was taken concurrently by another thread of this PE; create teams from \
                     one thread at a time"
                )));
            }
            *w |= 1 << (slot % 64);
        }
        let off = pool.off + (slot - PREDEFINED) * SLOT_BYTES;
        self.local_map().fill(off, SLOT_BYTES, 0)?;
        if let Some(dev) = self.device() {
            // Kernels see the team from now on; its device barrier counters restart (before the closing barrier).
            dev.set_team_entry(slot, device_entry(&members, idx), true)?;
        }
        let inner = TeamInner::new(members, idx, slot, Kind::Split, cfg);
        Ok(Team {
            runtime: parent.runtime,
            inner: Arc::new(inner),
        })
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

    /// Payload bytes one member may send each other member in one [`Shmem::team_exchange`] on `team` (a few KiB
    /// divided by the team size; 0 when the team is too large for the exchange).
    pub fn team_exchange_capacity(&self, team: &Team) -> usize {
        let n = team.inner.members.len();
        if n == 1 {
            return usize::MAX;
        }
        ctx::exchange_region_words(n).saturating_sub(layout::EXCH_HEADER) * 8
    }

    /// The team's agreement folded into one signalled all-to-all exchange, for a collective of a layer above named
    /// `op` (the op family's all-to-alls): every member sends every other member its verdict on its own arguments
    /// (`failed`), the digest of the arguments that must be equal everywhere (`digest`) and a message (`send`,
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

    /// Make teams from explicit lists of global PEs, collectively over `parent`: every parent PE passes the
    /// ascending or permuted list of the team it joins (`Some`), or `None` to join none. The members of one team
    /// must pass the same list, teams must be disjoint; a PE may pass a list it is not in (it gets `None`). The new
    /// team numbers its members in ascending PE order. A bad list on any PE (empty, a PE out of range, not in the
    /// parent or listed twice), or members that disagree, fails the call on every PE.
    pub fn team_from_pes(&self, parent: &Team, pes: Option<&[usize]>) -> Result<Option<Team>> {
        use layout::*;
        const OP: &str = "team_from_pes";
        drop(parent.ctx(self, OP)?);
        let me = self.my_pe();
        let local = pes.map_or(Ok(()), |l| check_list(l, parent));
        let dig = pes.map_or(0, |l| {
            digest(&l.iter().map(|&p| p as u64).collect::<Vec<_>>()) | 1
        });
        let pool =
            self.teams()
                .ensure_pool(self, &parent.inner, CallId::TeamFromPes.words(), OP)?;
        let mut ctx = parent.ctx(self, OP)?;
        let pn = ctx.n();
        let mask_words = pool.slots.div_ceil(64);
        let free: Vec<u64> = {
            let used = lock(&self.teams().used);
            (0..mask_words)
                .map(|i| !used.get(i).copied().unwrap_or(u64::MAX))
                .collect()
        };
        ctx.write_words(SPLIT_MASK, &free)?;
        // Round 1: every PE's list digest; round 2: every PE's verdict on its own team's consistency.
        let mut info = [0u64; INFO];
        info[0] = dig;
        let infos = ctx.enter(CallId::TeamFromPes.words(), info, local, true)?;
        let joined = pes.filter(|l| l.contains(&me));
        let consistent = match joined {
            None => Ok(()),
            Some(l) => match l.iter().find_map(|&p| {
                let i = parent.inner.members.index_of(p)?;
                (infos[i][0] != dig).then_some((p, infos[i][0]))
            }) {
                None => Ok(()),
                Some((p, theirs)) => Err(Error::Mismatch {
                    call: OP,
                    pe: p,
                    theirs: if theirs == 0 {
                        "no list".into()
                    } else {
                        format!("a different list (digest {theirs:#x})")
                    },
                    reference_pe: me,
                    ours: format!("{l:?}"),
                }),
            },
        };
        ctx.enter(CallId::TeamFromPes.words(), [0; INFO], consistent, false)?;
        let mut all_free = free;
        for i in 0..pn {
            let m = ctx.read_words(i, SPLIT_MASK, mask_words)?;
            for (a, b) in all_free.iter_mut().zip(&m) {
                *a &= *b;
            }
        }
        let slot = (0..pool.slots).find(|&s| all_free[s / 64] >> (s % 64) & 1 == 1);
        let made = match (slot, joined) {
            (None, _) => Err(Error::Config {
                var: "XPUSHMEM_TEAMS_MAX",
                value: pool.slots.to_string(),
                reason: format!(
                    "{OP}: no free team slot on every PE of the parent team ({} slots, 2 taken by TEAM_WORLD and \
                     TEAM_SHARED); destroy unused teams or raise the limit",
                    pool.slots
                ),
            }),
            (Some(_), None) => Ok(None),
            (Some(s), Some(l)) => {
                let mut sorted = l.to_vec();
                sorted.sort_unstable();
                self.take_slot(parent, &pool, s, Members::from_list(sorted), TeamConfig::default(), OP)
                    .map(Some)
            }
        };
        // Nobody signals into a new slot before its owner zeroed it, nor rewrites its mask before all read it.
        ctx.barrier(BarrierAlgo::Auto)?;
        made
    }

    /// Destroy a team made by a split (collective over the team: it ends with a barrier over the team, after which
    /// the team's slot may be reused). `TEAM_WORLD` and `TEAM_SHARED` cannot be destroyed.
    pub fn team_destroy(&self, team: Team) -> Result<()> {
        if team.inner.kind != Kind::Split {
            return Err(Error::invalid(
                "team",
                team.describe(),
                "the predefined teams cannot be destroyed",
            ));
        }
        {
            let mut ctx = team.ctx(self, "team_destroy")?;
            ctx.sync_as(CallId::TeamDestroy.words(), BarrierAlgo::Auto)?;
        }
        if team.inner.destroyed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let slot = team.inner.slot;
        if let Some(dev) = self.device() {
            // Kernels calling the team from now on record BadTeam.
            dev.set_team_entry(slot, crate::abi::DeviceTeam::default(), false)?;
        }
        if let Some(w) = lock(&self.teams().used).get_mut(slot / 64) {
            *w &= !(1 << (slot % 64));
        }
        Ok(())
    }
}

/// An error unless `l` is a non-empty list of distinct PEs of `parent`.
fn check_list(l: &[usize], parent: &Team) -> Result<()> {
    if l.is_empty() {
        return Err(Error::invalid("pes", "[]", "a team needs at least one PE"));
    }
    let mut seen = std::collections::HashSet::new();
    for (i, &p) in l.iter().enumerate() {
        if parent.inner.members.index_of(p).is_none() {
            return Err(Error::InvalidPe {
                pe: p as i64,
                n_pes: parent.n_pes(),
                context: format!(
                    "team_from_pes: pes[{i}] is not a PE of {}",
                    parent.describe()
                ),
            });
        }
        if !seen.insert(p) {
            return Err(Error::invalid(
                "pes",
                format!("{l:?}"),
                format!("PE {p} is listed twice"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A strided split of a strided (or listed) team names the same PEs as picking from the explicit list, and
        /// `index_of` inverts `pe`.
        #[test]
        fn strided_of_strided_matches_the_list(start in 0usize..50, stride in -6isize..7, size in 1usize..40,
                                               s in 0usize..40, st in -4isize..5, sz in 1usize..20) {
            // Negative strides (OpenSHMEM 1.6) list the PEs in descending order, at both levels.
            let stride = if stride == 0 { 1 } else { stride };
            let start = if stride < 0 { start + (size - 1) * stride.unsigned_abs() } else { start };
            let parent = Members::Strided { start, stride, size };
            let list: Vec<usize> = (0..size).map(|i| parent.pe(i)).collect();
            let listed = Members::List(list.clone().into());
            let s = s % size;
            let room = if st >= 0 { size - 1 - s } else { s };
            let sz = room.checked_div(st.unsigned_abs()).map_or(1, |q| 1 + sz % (q + 1));
            let a = parent.sub(s, st, sz);
            let b = listed.sub(s, st, sz);
            let want: Vec<usize> =
                (0..sz).map(|k| list[(s as isize + k as isize * st) as usize]).collect();
            for (k, &g) in want.iter().enumerate() {
                prop_assert_eq!(a.pe(k), g);
                prop_assert_eq!(b.pe(k), g);
                prop_assert_eq!(a.index_of(g), Some(k));
                prop_assert_eq!(b.index_of(g), Some(k));
            }
            prop_assert_eq!(a.len(), sz);
            let top = list.iter().max().copied().unwrap_or(0);
            for g in 0..top + 3 {
                if !want.contains(&g) {
                    prop_assert_eq!(a.index_of(g), None);
                    prop_assert_eq!(b.index_of(g), None);
                }
            }
        }

        /// A strided split names exactly the PEs start + k * stride, k < size, and numbers them by k, for either
        /// sign of the stride.
        #[test]
        fn split_strided_members(pn in 1usize..40, start in 0usize..40, stride in -5isize..6, size in 1usize..12) {
            let how = Split::Strided { start, stride, size };
            let want: Vec<i64> = (0..size as i64).map(|k| start as i64 + k * stride as i64).collect();
            let valid = start < pn && (stride != 0 || size == 1)
                && want.iter().all(|&p| p >= 0 && p < pn as i64);
            prop_assert_eq!(how.validate(pn).is_ok(), valid);
            if valid {
                let members = Members::Strided { start, stride, size };
                for p in 0..pn {
                    let t = how.teams_of(pn, p)[0];
                    let expect = want.iter().position(|&q| q == p as i64);
                    prop_assert_eq!(t.is_some(), expect.is_some(), "PE {}", p);
                    if let Some(t) = t {
                        prop_assert_eq!(t, (start, stride, size));
                    }
                    prop_assert_eq!(members.index_of(p), expect);
                }
            }
        }

        /// 2-D splits put every parent PE in exactly one row and one column, numbered consistently.
        #[test]
        fn split_2d_partitions(pn in 1usize..40, xrange in 1usize..50) {
            let how = Split::TwoD { xrange };
            let mut rows = std::collections::BTreeMap::new();
            for p in 0..pn {
                let t = how.teams_of(pn, p);
                let (Some(r), Some(c)) = (t[0], t[1]) else { panic!("PE {p} without a team") };
                rows.entry(r).or_insert_with(Vec::new).push(p);
                let rm: Vec<usize> = (0..r.2).map(|k| (r.0 as isize + k as isize * r.1) as usize).collect();
                let cm: Vec<usize> = (0..c.2).map(|k| (c.0 as isize + k as isize * c.1) as usize).collect();
                prop_assert!(rm.contains(&p) && cm.contains(&p));
                prop_assert!(rm.iter().chain(&cm).all(|&q| q < pn));
            }
            let covered: usize = rows.values().map(Vec::len).sum();
            prop_assert_eq!(covered, pn);
        }
    }

    #[test]
    fn split_validation_names_the_argument() {
        let e = Split::Strided {
            start: 0,
            stride: 0,
            size: 2,
        }
        .validate(4)
        .unwrap_err();
        assert!(e.to_string().contains("stride"), "{e}");
        let e = Split::Strided {
            start: 1,
            stride: 2,
            size: 3,
        }
        .validate(4)
        .unwrap_err();
        assert!(e.to_string().contains("runs past"), "{e}");
        assert!(Split::Strided {
            start: 3,
            stride: 0,
            size: 1
        }
        .validate(4)
        .is_ok());
        assert!(Split::Strided {
            start: 4,
            stride: 1,
            size: 1
        }
        .validate(4)
        .is_err());
        assert!(Split::Strided {
            start: 0,
            stride: isize::MAX,
            size: 3
        }
        .validate(4)
        .is_err());
        assert!(Split::Strided {
            start: 3,
            stride: -1,
            size: 4
        }
        .validate(4)
        .is_ok());
        let e = Split::Strided {
            start: 2,
            stride: -1,
            size: 4,
        }
        .validate(4)
        .unwrap_err();
        assert!(e.to_string().contains("runs below"), "{e}");
        assert!(Split::TwoD { xrange: 0 }.validate(4).is_err());
    }
}
