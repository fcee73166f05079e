//! Teams: subsets of PEs with their own numbering and their own synchronisation space.
//!
//! Two teams exist from the start: [`Shmem::team_world`] (every PE) and [`Shmem::team_shared`] (the PEs of this
//! node). New teams come from [`Shmem::team_split_strided`] and [`Shmem::team_split_2d`], both collective over
//! the parent team; a PE that is not part of a new team gets `None` (OpenSHMEM's `SHMEM_TEAM_INVALID`).
//!
//! ## Scratch space
//! Each team owns one *slot* of a pool in the symmetric heap: counters for barriers and for the signals of the
//! collectives, and argument-exchange words (no user pSync arrays). The pool holds `XPUSHMEM_TEAMS_MAX` slots and
//! is allocated collectively over all PEs by the first collective call on `TEAM_WORLD` or `TEAM_SHARED` (every
//! team descends from one of them). Creating a team picks a slot that is free on every PE of the parent (the
//! parent exchanges its free-slot masks), so teams with disjoint PEs may share a slot index. Counters only grow
//! and every PE remembers how many increments it has been promised on each, so back-to-back collectives never
//! mix rounds and no slot ever needs resetting while in use; a slot is zeroed when a new team takes it.
//!
//! ## Errors
//! Team creation checks its arguments on every PE and exchanges them over the parent: bad values on any PE, or
//! different values on different PEs, make the call fail on every PE with the same verdict. Running out of slots
//! is an error naming `XPUSHMEM_TEAMS_MAX`.

use crate::coll::{BarrierAlgo, CallId, Ctx};
use crate::error::{Error, Result};
use crate::memory::Call;
use crate::runtime::Shmem;
use crate::transport::AmoOp;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Word offsets (in 8-byte words) inside one team slot.
pub(crate) mod layout {
    /// Dissemination barrier counters, one per round (64 rounds cover any team).
    pub const DISS: usize = 0;
    /// Arrival counter of the linear and tree barriers.
    pub const ARRIVE: usize = 64;
    /// Release counter of the linear and tree barriers.
    pub const RELEASE: usize = 65;
    /// Data-ready signals of the data collectives.
    pub const SIG_DATA: usize = 66;
    /// Pre-step signal of the recursive-doubling reduction (folding the extra PEs in).
    pub const SIG_PRE: usize = 67;
    /// Final-result signal of the recursive-doubling reduction (to the folded PEs).
    pub const SIG_FIN: usize = 68;
    /// Step counter of ring algorithms (from the left neighbour).
    pub const SIG_RING: usize = 69;
    /// Done / acknowledgement counter of ring and chain algorithms (from the right neighbour).
    pub const SIG_DONE: usize = 70;
    /// Per-round "partial ready" counters of the recursive-doubling reduction.
    pub const RD_READY: usize = 80;
    /// Per-round "partial read" acknowledgements of the recursive-doubling reduction.
    pub const RD_ACK: usize = 144;
    /// Argument-check words of the collectives: two buffers of [`CHECK_WORDS`] (alternating by call).
    pub const CHECK: usize = 208;
    /// Words in one argument-check buffer.
    pub const CHECK_WORDS: usize = 16;
    /// Argument words of team creation (over the parent).
    pub const SPLIT: usize = 240;
    /// Words of team-creation arguments.
    pub const SPLIT_WORDS: usize = 16;
    /// Free-slot mask of team creation (up to 64 words: 4096 slots).
    pub const SPLIT_MASK: usize = 256;
    /// Words in one slot.
    pub const SLOT_WORDS: usize = 320;
}

/// Largest accepted `XPUSHMEM_TEAMS_MAX` (the free-slot mask must fit its exchange words).
pub const TEAMS_MAX_LIMIT: usize = 64 * 64;
/// Default number of team slots.
pub const TEAMS_MAX_DEFAULT: usize = 64;
/// Bytes at the start of the pool before slot 0 (instance token).
const POOL_HEADER: usize = 64;
const SLOT_BYTES: usize = layout::SLOT_WORDS * 8;
const WORLD_SLOT: usize = 0;
const SHARED_SLOT: usize = 1;

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
    /// `start + i * stride` for `i < size`.
    Strided {
        start: usize,
        stride: usize,
        size: usize,
    },
    /// An explicit ascending list.
    List(Arc<[usize]>),
}

impl Members {
    fn from_sorted(pes: Vec<usize>) -> Members {
        let size = pes.len();
        if size == 1 {
            return Members::Strided {
                start: pes[0],
                stride: 1,
                size,
            };
        }
        if size >= 2 {
            let stride = pes[1].wrapping_sub(pes[0]);
            if stride > 0 && pes.windows(2).all(|w| w[1].wrapping_sub(w[0]) == stride) {
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
            Members::Strided { start, stride, .. } => start + i * stride,
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
                let d = pe.checked_sub(*start)?;
                if *stride == 0 {
                    return (d == 0 && *size > 0).then_some(0);
                }
                (d % stride == 0 && d / stride < *size).then_some(d / stride)
            }
            Members::List(l) => l.binary_search(&pe).ok(),
        }
    }

    /// The members at team indices `start + k * stride`, `k < size` (already validated).
    fn sub(&self, start: usize, stride: usize, size: usize) -> Members {
        let stride = if size == 1 { 1 } else { stride };
        match self {
            Members::Strided {
                start: s0,
                stride: st0,
                ..
            } => Members::Strided {
                start: s0 + start * st0,
                stride: stride * st0,
                size,
            },
            Members::List(l) => {
                Members::from_sorted((0..size).map(|k| l[start + k * stride]).collect())
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    World,
    Shared,
    Split,
}

/// Mutable per-team state of this PE: what every counter of the slot is expected to have reached.
#[derive(Debug)]
pub(crate) struct TeamState {
    /// Increments promised so far on each slot word.
    pub expected: Vec<u64>,
    /// Argument exchanges run so far (selects the check buffer).
    pub exchanges: u64,
}

#[derive(Debug)]
pub(crate) struct TeamInner {
    pub(crate) members: Members,
    pub(crate) idx: usize,
    slot: usize,
    kind: Kind,
    config: TeamConfig,
    pub(crate) state: Mutex<TeamState>,
    destroyed: AtomicBool,
}

impl TeamInner {
    fn new(members: Members, idx: usize, slot: usize, kind: Kind, config: TeamConfig) -> TeamInner {
        TeamInner {
            members,
            idx,
            slot,
            kind,
            config,
            state: Mutex::new(TeamState {
                expected: vec![0; layout::SLOT_WORDS],
                exchanges: 0,
            }),
            destroyed: AtomicBool::new(false),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Pool {
    off: usize,
    token: u64,
    slots: usize,
}

/// Team bookkeeping of one runtime instance.
#[derive(Debug)]
struct Instance {
    heap_base: usize,
    me: usize,
    n: usize,
    pool: Mutex<Option<Pool>>,
    /// Slots in use on this PE (bitmap), sized when the pool is made.
    used: Mutex<Vec<u64>>,
    world: Arc<TeamInner>,
    shared: Arc<TeamInner>,
}

impl Instance {
    fn new(sh: &Shmem) -> Instance {
        let (me, n) = (sh.my_pe(), sh.n_pes());
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
        let node = Members::from_sorted(sh.node_pes());
        let sidx = node.index_of(me).unwrap_or(0);
        let shared = TeamInner::new(node, sidx, SHARED_SLOT, Kind::Shared, TeamConfig::default());
        Instance {
            heap_base: sh.heap_base() as usize,
            me,
            n,
            pool: Mutex::new(None),
            used: Mutex::new(Vec::new()),
            world: Arc::new(world),
            shared: Arc::new(shared),
        }
    }

    /// Whether this bookkeeping belongs to the runtime `sh` (and not to an earlier, finalized one).
    fn is_of(&self, sh: &Shmem) -> bool {
        if self.heap_base != sh.heap_base() as usize
            || self.me != sh.my_pe()
            || self.n != sh.n_pes()
        {
            return false;
        }
        match *lock(&self.pool) {
            None => true,
            Some(p) => sh.local_map().amo(p.off, 8, AmoOp::Fetch, 0).ok() == Some(p.token),
        }
    }

    fn pool(&self) -> Option<Pool> {
        *lock(&self.pool)
    }

    /// The pool, allocating it (collectively over all PEs) on first use. `kind` is the team whose collective
    /// triggers the allocation: it must span every PE.
    fn ensure_pool(&self, sh: &Shmem, kind: Kind, op: &str) -> Result<Pool> {
        let mut g = lock(&self.pool);
        if let Some(p) = *g {
            return Ok(p);
        }
        if kind == Kind::Shared && self.shared.members.len() != self.n {
            return Err(Error::State(format!(
                "{op} on TEAM_SHARED: the team scratch pool is created by the first collective on TEAM_WORLD when the \
                 job spans several nodes; make one (e.g. team_sync(TEAM_WORLD)) first"
            )));
        }
        let slots = teams_max()?;
        let words = (POOL_HEADER + slots * SLOT_BYTES) / 8;
        let s = sh.alloc_collective::<u64>(Call::Calloc, words, 64)?;
        let token = {
            use std::hash::BuildHasher;
            std::collections::hash_map::RandomState::new()
                .hash_one((std::time::Instant::now(), s.off))
                | 1
        };
        sh.local_map().amo(s.off, 8, AmoOp::Set, token)?;
        let mut used = vec![0u64; slots.div_ceil(64)];
        used[0] |= (1 << WORLD_SLOT) | (1 << SHARED_SLOT);
        *lock(&self.used) = used;
        let p = Pool {
            off: s.off,
            token,
            slots,
        };
        *g = Some(p);
        tracing::debug!(
            pe = self.me,
            slots,
            off = s.off,
            "team scratch pool allocated"
        );
        Ok(p)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

static REGISTRY: Mutex<Option<Arc<Instance>>> = Mutex::new(None);

fn instance(sh: &Shmem) -> Arc<Instance> {
    let mut g = lock(&REGISTRY);
    if let Some(i) = g.as_ref() {
        if i.is_of(sh) {
            return i.clone();
        }
    }
    let i = Arc::new(Instance::new(sh));
    *g = Some(i.clone());
    i
}

/// `XPUSHMEM_TEAMS_MAX`, validated.
fn teams_max() -> Result<usize> {
    const VAR: &str = "XPUSHMEM_TEAMS_MAX";
    let Some(v) = crate::config::env_value(VAR) else {
        return Ok(TEAMS_MAX_DEFAULT);
    };
    match v.trim().parse::<usize>() {
        Ok(n) if (2..=TEAMS_MAX_LIMIT).contains(&n) => Ok(n),
        _ => Err(Error::Config {
            var: VAR,
            value: v.clone(),
            reason: format!("expected a number of team slots in [2, {TEAMS_MAX_LIMIT}] (TEAM_WORLD and TEAM_SHARED take two)"),
        }),
    }
}

/// A team handle: a set of PEs with their own numbering `0..n_pes()` and their own synchronisation space.
///
/// Handles are cheap to clone; every clone names the same team. A handle only exists on the team's members.
/// Collectives over a team must be called by all its members in the same order, and one team must not be used by
/// two threads of a PE at the same time (different teams may).
#[derive(Clone)]
pub struct Team {
    inst: Arc<Instance>,
    pub(crate) inner: Arc<TeamInner>,
}

impl fmt::Debug for Team {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.describe())
    }
}

impl Team {
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

    /// Check the handle is usable with `sh`, make sure the scratch exists, and lock the team for one collective.
    pub(crate) fn ctx<'a>(&'a self, sh: &'a Shmem, op: &'static str) -> Result<Ctx<'a>> {
        if !self.inst.is_of(sh) {
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
        let pool = match self.inner.kind {
            Kind::Split => self
                .inst
                .pool()
                .ok_or_else(|| Error::State(format!("{op}: team scratch pool missing")))?,
            k => self.inst.ensure_pool(sh, k, op)?,
        };
        let base = pool.off + POOL_HEADER + self.inner.slot * SLOT_BYTES;
        Ok(Ctx::new(sh, &self.inner, base, lock(&self.inner.state), op))
    }
}

/// What a team creation asks for, per PE.
#[derive(Debug, Clone, Copy)]
enum Split {
    Strided {
        start: usize,
        stride: usize,
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

    fn words(&self) -> [u64; 4] {
        match *self {
            Split::Strided {
                start,
                stride,
                size,
            } => [self.call() as u64, start as u64, stride as u64, size as u64],
            Split::TwoD { xrange } => [self.call() as u64, xrange as u64, 0, 0],
        }
    }

    fn describe(w: &[u64]) -> String {
        match w.first().copied() {
            Some(x) if x == CallId::SplitStrided as u64 => {
                format!(
                    "team_split_strided(start {}, stride {}, size {})",
                    w[1], w[2], w[3]
                )
            }
            Some(x) if x == CallId::Split2d as u64 => format!("team_split_2d(xrange {})", w[1]),
            _ => format!("{w:?}"),
        }
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
                        format!("must be at least 1 for a team of {size} PEs"),
                    ));
                }
                let last = (size - 1)
                    .checked_mul(stride)
                    .and_then(|x| x.checked_add(start));
                if last.is_none_or(|l| l >= pn) {
                    return Err(Error::invalid(
                        "size",
                        size,
                        format!(
                            "start {start} + (size {size} - 1) * stride {stride} runs past the parent team's last PE {}",
                            pn - 1
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
    fn teams_of(&self, pn: usize, pidx: usize) -> Vec<Option<(usize, usize, usize)>> {
        match *self {
            Split::Strided {
                start,
                stride,
                size,
            } => {
                let mine = if pidx < start {
                    None
                } else if stride == 0 {
                    (pidx == start).then_some(0)
                } else {
                    let d = pidx - start;
                    (d % stride == 0 && d / stride < size).then_some(d / stride)
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
                vec![Some((row_start, 1, row_len)), Some((x, xr, col_len))]
            }
        }
    }
}

impl Shmem {
    /// `TEAM_WORLD`: every PE, numbered as by [`Shmem::my_pe`]. Not collective; the team's scratch is made by its
    /// first collective.
    pub fn team_world(&self) -> Team {
        let inst = instance(self);
        let inner = inst.world.clone();
        Team { inst, inner }
    }

    /// `TEAM_SHARED`: the PEs of this node (those whose memory this PE can load from and store to), in global order.
    pub fn team_shared(&self) -> Team {
        let inst = instance(self);
        let inner = inst.shared.clone();
        Team { inst, inner }
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
        let mut ctx = parent.ctx(self, op)?;
        let (pn, pidx) = (ctx.n(), ctx.idx());
        let local = how.validate(pn);
        let pool = parent
            .inst
            .pool()
            .ok_or_else(|| Error::State(format!("{op}: team scratch pool missing")))?;
        let mask_words = pool.slots.div_ceil(64);
        let need = match how {
            Split::Strided { .. } => 1,
            Split::TwoD { .. } => 2,
        };
        // Publish: arguments, status, free-slot mask.
        let mut words = [0u64; SPLIT_WORDS];
        words[..4].copy_from_slice(&how.words());
        words[SPLIT_WORDS - 1] = if local.is_ok() { 1 } else { 2 };
        let free: Vec<u64> = {
            let used = lock(&parent.inst.used);
            (0..mask_words)
                .map(|i| !used.get(i).copied().unwrap_or(u64::MAX))
                .collect()
        };
        ctx.write_words(SPLIT, &words)?;
        ctx.write_words(SPLIT_MASK, &free)?;
        ctx.barrier(BarrierAlgo::Auto)?;
        let mut all_free = free.clone();
        let mut verdict: Result<()> = Ok(());
        let mut reference = [0u64; SPLIT_WORDS];
        for i in 0..pn {
            let w = ctx.read_words(i, SPLIT, SPLIT_WORDS)?;
            let m = ctx.read_words(i, SPLIT_MASK, mask_words)?;
            for (a, b) in all_free.iter_mut().zip(&m) {
                *a &= *b;
            }
            if i == 0 {
                reference.copy_from_slice(&w);
            }
            if verdict.is_ok() {
                if w[SPLIT_WORDS - 1] != 1 {
                    verdict = Err(Error::Mismatch {
                        call: op,
                        pe: ctx.pe(i),
                        theirs: "invalid arguments (its own error names them)".into(),
                        reference_pe: self.my_pe(),
                        ours: Split::describe(&words[..4]),
                    });
                } else if w[..SPLIT_WORDS - 1] != reference[..SPLIT_WORDS - 1] {
                    verdict = Err(Error::Mismatch {
                        call: op,
                        pe: ctx.pe(i),
                        theirs: Split::describe(&w[..4]),
                        reference_pe: ctx.pe(0),
                        ours: Split::describe(&reference[..4]),
                    });
                }
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
        let result = match (local, verdict) {
            (Err(e), _) => Err(e),
            (Ok(()), Err(e)) => Err(e),
            (Ok(()), Ok(())) if slots.len() < need => Err(Error::Config {
                var: "XPUSHMEM_TEAMS_MAX",
                value: pool.slots.to_string(),
                reason: format!(
                    "{op}: no free team slot on every PE of the parent team ({} slots, 2 taken by TEAM_WORLD and \
                     TEAM_SHARED); destroy unused teams or raise the limit",
                    pool.slots
                ),
            }),
            (Ok(()), Ok(())) => Ok(()),
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
        // Nobody signals into a new slot before its owner zeroed it; nobody rewrites the exchange words before
        // everyone has read them.
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
            let mut used = lock(&parent.inst.used);
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
        let off = pool.off + POOL_HEADER + slot * SLOT_BYTES;
        self.local_map().fill(off, SLOT_BYTES, 0)?;
        let inner = TeamInner::new(members, idx, slot, Kind::Split, cfg);
        Ok(Team {
            inst: parent.inst.clone(),
            inner: Arc::new(inner),
        })
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
            self.quiet()?;
            ctx.barrier(BarrierAlgo::Auto)?;
        }
        if team.inner.destroyed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let slot = team.inner.slot;
        if let Some(w) = lock(&team.inst.used).get_mut(slot / 64) {
            *w &= !(1 << (slot % 64));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A strided split of a strided (or listed) team names the same PEs as picking from the explicit list, and
        /// `index_of` inverts `pe`.
        #[test]
        fn strided_of_strided_matches_the_list(start in 0usize..50, stride in 1usize..7, size in 1usize..40,
                                               s in 0usize..40, st in 0usize..5, sz in 1usize..20) {
            let parent = Members::Strided { start, stride, size };
            let list: Vec<usize> = (0..size).map(|i| parent.pe(i)).collect();
            let listed = Members::List(list.clone().into());
            let s = s % size;
            let sz = (size - 1 - s).checked_div(st).map_or(1, |q| 1 + sz % (q + 1));
            let a = parent.sub(s, st, sz);
            let b = listed.sub(s, st, sz);
            let want: Vec<usize> = (0..sz).map(|k| list[s + k * st]).collect();
            for (k, &g) in want.iter().enumerate() {
                prop_assert_eq!(a.pe(k), g);
                prop_assert_eq!(b.pe(k), g);
                prop_assert_eq!(a.index_of(g), Some(k));
                prop_assert_eq!(b.index_of(g), Some(k));
            }
            prop_assert_eq!(a.len(), sz);
            for g in 0..(start + stride * size + 3) {
                if !want.contains(&g) {
                    prop_assert_eq!(a.index_of(g), None);
                    prop_assert_eq!(b.index_of(g), None);
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
                let rm: Vec<usize> = (0..r.2).map(|k| r.0 + k * r.1).collect();
                let cm: Vec<usize> = (0..c.2).map(|k| c.0 + k * c.1).collect();
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
            stride: usize::MAX,
            size: 3
        }
        .validate(4)
        .is_err());
        assert!(Split::TwoD { xrange: 0 }.validate(4).is_err());
    }
}
