//! Concatenation: `fcollect` (every member contributes the same number of elements) and `collect` (each its own).

use super::{
    mul, need_blocks, need_len, overlap, type_code, CallId, CollectAlgo, Ctx, Fit, COMMON, INFO,
};
use crate::core::Shmem;
use crate::error::{Error, Result};
use crate::team::{layout, Team};
use crate::types::{SymSlice, Symmetric};

/// The algorithm for a team of `n` gathering `bytes` in all (`fit`: the eager forms a block fits; none for
/// `collect`; `hier`: the team's node layout pays for the node-aware algorithm).
fn resolve(
    a: CollectAlgo,
    cfg: &crate::config::Config,
    n: usize,
    bytes: usize,
    fit: Fit,
    hier: bool,
) -> Result<CollectAlgo> {
    use CollectAlgo::{Auto, Eager, EagerRounds};
    Ok(match a.with_cfg(cfg)? {
        Auto if fit.auto_rounds => EagerRounds,
        EagerRounds if fit.rounds => EagerRounds,
        Auto | Eager | EagerRounds if fit.eager => Eager,
        Auto | Eager | EagerRounds if hier => CollectAlgo::Hierarchical,
        Auto | Eager | EagerRounds if n > 8 && bytes >= 64 << 10 => CollectAlgo::Ring,
        Auto | Eager | EagerRounds => CollectAlgo::Direct,
        x => x,
    })
}

fn disjoint<T: Symmetric>(dest: SymSlice<T>, src: SymSlice<T>) -> Result<()> {
    if overlap(dest, src) {
        return Err(Error::invalid(
            "dest",
            format!("{dest:?}"),
            format!("overlaps the source {src:?}; they must be disjoint"),
        ));
    }
    Ok(())
}

impl Shmem {
    /// Concatenate `nelems` elements of `src` from every member, in member order, into `dest` on every member
    /// (OpenSHMEM `fcollect`; `dest` holds `n_pes * nelems` elements). Collective.
    pub fn fcollect<T: Symmetric>(
        &self,
        team: &Team,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        nelems: usize,
    ) -> Result<()> {
        self.fcollect_with(team, dest, src, nelems, CollectAlgo::Auto)
    }

    /// [`Shmem::fcollect`] of bytes (OpenSHMEM `fcollectmem`).
    pub fn fcollectmem(
        &self,
        team: &Team,
        dest: SymSlice<u8>,
        src: SymSlice<u8>,
        nbytes: usize,
    ) -> Result<()> {
        self.fcollect_with(team, dest, src, nbytes, CollectAlgo::Auto)
    }

    /// [`Shmem::fcollect`] with a chosen algorithm.
    pub fn fcollect_with<T: Symmetric>(
        &self,
        team: &Team,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        nelems: usize,
        algo: CollectAlgo,
    ) -> Result<()> {
        const OP: &str = "fcollect";
        let mut ctx = team.ctx(self, OP)?;
        let n = ctx.n();
        let total = mul(n, nelems, "nelems");
        let bytes = nelems.saturating_mul(std::mem::size_of::<T>());
        let all = total
            .clone()
            .unwrap_or(usize::MAX)
            .saturating_mul(std::mem::size_of::<T>());
        let algo = ctx.choose(CallId::Fcollect, algo, bytes, |ctx| {
            resolve(
                algo,
                &self.cfg,
                n,
                all,
                ctx.fit(bytes, n),
                ctx.layout_pays(),
            )
        });
        let local = (|| {
            let total = total.clone()?;
            need_blocks(dest, total, nelems, "dest", OP)?;
            need_blocks(src, nelems, nelems, "source", OP)?;
            disjoint(dest.slice(..total)?, src.slice(..nelems)?)?;
            algo.clone().map(|_| ())
        })();
        let code = algo.as_ref().map_or(0, |a| a.code());
        let common: [u64; COMMON] = [
            CallId::Fcollect as u64,
            code,
            type_code::<T>(),
            nelems as u64,
            0,
            0,
            0,
            0,
        ];
        if let Ok(a @ (CollectAlgo::Eager | CollectAlgo::EagerRounds)) = algo {
            // This PE's block travels to every member inside the agreement.
            let me = ctx.idx();
            let (mut send, mut recv) = ctx.take_messages();
            let rounds = a == CollectAlgo::EagerRounds;
            ctx.eager_exchange(
                rounds,
                common,
                local,
                Some(src),
                nelems,
                &mut send,
                &mut recv,
            )?;
            if nelems > 0 {
                for i in 0..n {
                    let to = dest.slice(i * nelems..(i + 1) * nelems)?;
                    if i == me {
                        ctx.write_own(rounds, &send, to, src.slice(..nelems)?)?;
                    } else {
                        ctx.write_local(to, recv.get(i))?;
                    }
                }
            }
            ctx.give_messages(send, recv);
            return Ok(());
        }
        ctx.enter(common, [0; INFO], local, false)?;
        let algo = algo?;
        if nelems == 0 {
            return Ok(());
        }
        let offs: Vec<usize> = (0..=n).map(|i| i * nelems).collect();
        gather(&mut ctx, dest, src.slice(..nelems)?, &offs, algo)
    }

    /// Concatenate `nelems` elements of `src` from every member — `nelems` may differ between members — in member
    /// order into `dest` on every member (OpenSHMEM `collect`; `dest` must hold the total on every member).
    /// Collective.
    pub fn collect<T: Symmetric>(
        &self,
        team: &Team,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        nelems: usize,
    ) -> Result<()> {
        self.collect_with(team, dest, src, nelems, CollectAlgo::Auto)
    }

    /// [`Shmem::collect`] of bytes (OpenSHMEM `collectmem`).
    pub fn collectmem(
        &self,
        team: &Team,
        dest: SymSlice<u8>,
        src: SymSlice<u8>,
        nbytes: usize,
    ) -> Result<()> {
        self.collect_with(team, dest, src, nbytes, CollectAlgo::Auto)
    }

    /// [`Shmem::collect`] with a chosen algorithm (`Auto` decides from the team size only, since the total is not
    /// known before the exchange).
    pub fn collect_with<T: Symmetric>(
        &self,
        team: &Team,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        nelems: usize,
        algo: CollectAlgo,
    ) -> Result<()> {
        const OP: &str = "collect";
        let mut ctx = team.ctx(self, OP)?;
        let n = ctx.n();
        let algo = resolve(algo, &self.cfg, n, 0, Fit::default(), ctx.layout_pays());
        let local = (|| {
            // Whether dest and source overlap depends on the total, known after the exchange: checked below.
            need_len(src, nelems, "source", OP)?;
            algo.clone().map(|_| ())
        })();
        let code = algo.as_ref().map_or(0, |a| a.code());
        let common: [u64; COMMON] = [
            CallId::Collect as u64,
            code,
            type_code::<T>(),
            0,
            0,
            0,
            0,
            0,
        ];
        let mut info = [0u64; INFO];
        info[0] = nelems as u64;
        info[1] = dest.len() as u64;
        info[2] = dest.off as u64;
        info[3] = src.off as u64;
        let infos = ctx.enter(common, info, local, true)?;
        let algo = algo?;
        let mut offs = Vec::with_capacity(n + 1);
        let mut total: usize = 0;
        offs.push(0);
        for inf in &infos {
            total = usize::try_from(inf[0])
                .ok()
                .and_then(|c| total.checked_add(c))
                .ok_or_else(|| {
                    Error::invalid(
                        "nelems",
                        inf[0],
                        format!("{OP}: the total element count overflows"),
                    )
                })?;
            offs.push(total);
        }
        if let Some((i, inf)) = infos
            .iter()
            .enumerate()
            .find(|(_, inf)| (inf[1] as usize) < total)
        {
            return Err(Error::OutOfBounds {
                what: "dest",
                start: 0,
                len: total,
                limit: inf[1] as usize,
                context: format!(
                    "{OP}: the members contribute {total} elements but PE {}'s dest holds {}",
                    ctx.pe(i),
                    inf[1]
                ),
            });
        }
        // Every member checks every member's dest (the total) against its source: the same answer everywhere.
        let elem = std::mem::size_of::<T>() as u64;
        for (i, inf) in infos.iter().enumerate() {
            let (d0, s0) = (inf[2], inf[3]);
            let (d1, s1) = (
                d0.saturating_add((total as u64).saturating_mul(elem)),
                s0.saturating_add(inf[0].saturating_mul(elem)),
            );
            if total > 0 && inf[0] > 0 && d0 < s1 && s0 < d1 {
                return Err(Error::invalid(
                    "dest",
                    format!("{dest:?}"),
                    format!(
                        "{OP}: on PE {}, the {total} collected elements at heap offset {d0} overlap the source \
                         of {} elements at offset {s0}; they must be disjoint (dest must hold the concatenation \
                         of every member's source, {total} elements: is it allocated that large?)",
                        ctx.pe(i),
                        inf[0]
                    ),
                ));
            }
        }
        if total == 0 {
            return Ok(());
        }
        gather(&mut ctx, dest, src.slice(..nelems)?, &offs, algo)
    }
}

/// Member `i`'s block goes to `dest[offs[i]..offs[i + 1]]` of every member.
fn gather<T: Symmetric>(
    ctx: &mut Ctx<'_>,
    dest: SymSlice<T>,
    src: SymSlice<T>,
    offs: &[usize],
    algo: CollectAlgo,
) -> Result<()> {
    let (n, me) = (ctx.n(), ctx.idx());
    let blk = |i: usize| dest.slice(offs[i]..offs[i + 1]);
    let mine = blk(me)?;
    if algo == CollectAlgo::Hierarchical {
        return hierarchical(ctx, dest, src, offs);
    }
    if algo == CollectAlgo::Ring && n > 2 {
        let right = (me + 1) % n;
        let lpe = ctx.pe((me + n - 1) % n);
        for s in 0..n - 1 {
            let b = (me + n - s) % n;
            if s > 0 {
                ctx.wait(layout::SIG_DATA, 1, &|| {
                    format!("collect (ring) step {s}: waiting for PE {lpe}")
                })?;
            }
            if s == 0 {
                ctx.copy(blk(b)?, right, src, me)?;
            } else {
                ctx.copy(blk(b)?, right, blk(b)?, me)?;
            }
            ctx.signal(layout::SIG_DATA, right)?;
        }
        ctx.wait(layout::SIG_DATA, 1, &|| {
            format!("collect (ring): waiting for the last block from PE {lpe}")
        })?;
    } else {
        for k in 1..n {
            let i = (me + k) % n;
            ctx.copy(mine, i, src, me)?;
            ctx.signal(layout::SIG_DATA, i)?;
        }
        ctx.wait(layout::SIG_DATA, n as u64 - 1, &|| {
            format!(
                "collect (direct): waiting for the blocks of {} members",
                n - 1
            )
        })?;
    }
    ctx.copy(mine, me, src, me)
}

/// The node-aware gather (member `i`'s block goes to `dest[offs[i]..offs[i + 1]]` of every member). Each member
/// puts its block into its leader's `dest` over shared memory and signals it (`SIG_PRE`); a leader, once its node's
/// blocks are in, puts them into every other leader's `dest` (consecutive members' blocks in one transfer) and
/// signals it (`SIG_DATA`); once every other leader's blocks are in, it copies the whole result into the `dest` of
/// each member of its node and signals it (`SIG_DATA`). Every writer writes blocks no other writes.
fn hierarchical<T: Symmetric>(
    ctx: &mut Ctx<'_>,
    dest: SymSlice<T>,
    src: SymSlice<T>,
    offs: &[usize],
) -> Result<()> {
    let me = ctx.idx();
    let groups = ctx.groups();
    let g = groups.group_of[me];
    let leader = groups.leader(g);
    let blk = |i: usize| dest.slice(offs[i]..offs[i + 1]);
    ctx.count_node_aware(|c| &c.collects);
    if leader != me {
        ctx.copy(blk(me)?, leader, src, me)?;
        ctx.signal(layout::SIG_PRE, leader)?;
        let l = ctx.pe(leader);
        return ctx.wait(layout::SIG_DATA, 1, &|| {
            format!(
                "collect (hierarchical): waiting for the result from PE {l}, this node's leader"
            )
        });
    }
    let mine = &groups.members[g];
    ctx.copy(blk(me)?, me, src, me)?;
    ctx.wait(layout::SIG_PRE, mine.len() as u64 - 1, &|| {
        format!(
            "collect (hierarchical): waiting for the blocks of {} members of this node",
            mine.len() - 1
        )
    })?;
    // This node's blocks as runs of consecutive team ranks (one transfer each).
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &m in mine.iter() {
        match runs.last_mut() {
            Some((_, end)) if *end == m => *end = m + 1,
            _ => runs.push((m, m + 1)),
        }
    }
    let count = groups.count();
    for k in 1..count {
        let o = groups.leader((g + k) % count);
        for &(a, b) in &runs {
            let run = dest.slice(offs[a]..offs[b])?;
            ctx.copy(run, o, run, me)?;
        }
        ctx.signal(layout::SIG_DATA, o)?;
    }
    ctx.wait(layout::SIG_DATA, count as u64 - 1, &|| {
        "collect (hierarchical): waiting for the other nodes' blocks".to_string()
    })?;
    let all = dest.slice(offs[0]..offs[offs.len() - 1])?;
    for &m in &mine[1..] {
        ctx.copy(all, m, all, me)?;
        ctx.signal(layout::SIG_DATA, m)?;
    }
    Ok(())
}
