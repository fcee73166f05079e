//! Team creation and destruction: the splits (strided, 2-D, from a list of PEs), their validation on every
//! PE, the choice of a slot free on every PE of the parent, the pool of the split teams' slots (allocated
//! collectively by the first creation) and `team_destroy`.

use super::*;

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
        let s = sh.alloc_collective::<u64>(call, words, 128, true, op)?;
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

    /// Destroy a team made by a split or by [`Shmem::team_of_members`] (collective over the team: it ends with a
    /// barrier over the team, after which the team's slot may be reused). `TEAM_WORLD` and `TEAM_SHARED` cannot be
    /// destroyed.
    pub fn team_destroy(&self, team: Team) -> Result<()> {
        if let Kind::Members { off } = team.inner.kind {
            return self.destroy_members_team(team, off);
        }
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
    check_distinct(l, "", |i, p| match parent.inner.members.index_of(p) {
        Some(_) => Ok(()),
        None => Err(Error::InvalidPe {
            pe: p as i64,
            n_pes: parent.n_pes(),
            context: format!(
                "team_from_pes: pes[{i}] is not a PE of {}",
                parent.describe()
            ),
        }),
    })
}

/// An error unless `l` is a non-empty list of distinct PEs, each (`l[i]`) accepted by `accept(i, l[i])`, whose
/// error names the entry; `op` starts the message of a PE listed twice ("" for none). A team's explicit member
/// list, checked the same way wherever one is given.
pub(super) fn check_distinct(
    l: &[usize],
    op: &str,
    accept: impl Fn(usize, usize) -> Result<()>,
) -> Result<()> {
    if l.is_empty() {
        return Err(Error::invalid("pes", "[]", "a team needs at least one PE"));
    }
    let mut seen = std::collections::HashSet::new();
    for (i, &p) in l.iter().enumerate() {
        accept(i, p)?;
        if !seen.insert(p) {
            return Err(Error::invalid(
                "pes",
                format!("{l:?}"),
                format!("{op}PE {p} is listed twice"),
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
