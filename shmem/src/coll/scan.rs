//! Scans (prefix reductions): `inscan` gives member `i` the reduction of the sources of members `0..=i`,
//! `exscan` of members `0..i` (member 0 gets the operator's identity: 0 for sum, 1 for prod, the type's maximum
//! for min, ...). The fold runs in member order, so float results match a sequential left fold.

use super::reduce::{check_op, combine_into, same_or_disjoint, ReduceOp, Reducible};
use super::{need_len, type_code, BarrierAlgo, CallId, Ctx, ScanAlgo, COMMON, INFO};
use crate::core::Shmem;
use crate::error::Result;
use crate::team::{layout, Team};
use crate::types::SymSlice;

fn resolve(a: ScanAlgo, cfg: &crate::config::Config, n: usize) -> Result<ScanAlgo> {
    Ok(match a.with_cfg(cfg)? {
        ScanAlgo::Auto if n <= 16 => ScanAlgo::Linear,
        ScanAlgo::Auto => ScanAlgo::Chain,
        x => x,
    })
}

impl Shmem {
    /// Inclusive scan: `dest[k] = src_0[k] op ... op src_i[k]` on member `i`, for `k < nelems`. Collective;
    /// `dest` may equal `src`.
    pub fn inscan<T: Reducible>(
        &self,
        team: &Team,
        op: ReduceOp,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        nelems: usize,
    ) -> Result<()> {
        self.scan_with(team, op, dest, src, nelems, ScanAlgo::Auto, true)
    }

    /// Exclusive scan: `dest[k] = src_0[k] op ... op src_{i-1}[k]` on member `i > 0`; the identity of `op` on
    /// member 0. Collective; `dest` may equal `src`.
    pub fn exscan<T: Reducible>(
        &self,
        team: &Team,
        op: ReduceOp,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        nelems: usize,
    ) -> Result<()> {
        self.scan_with(team, op, dest, src, nelems, ScanAlgo::Auto, false)
    }

    /// Inclusive sum scan (OpenSHMEM `sum_inscan`).
    pub fn sum_inscan<T: Reducible>(
        &self,
        team: &Team,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        nelems: usize,
    ) -> Result<()> {
        self.inscan(team, ReduceOp::Sum, dest, src, nelems)
    }

    /// Exclusive sum scan (OpenSHMEM `sum_exscan`).
    pub fn sum_exscan<T: Reducible>(
        &self,
        team: &Team,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        nelems: usize,
    ) -> Result<()> {
        self.exscan(team, ReduceOp::Sum, dest, src, nelems)
    }

    /// [`Shmem::inscan`] (`inclusive`) or [`Shmem::exscan`] with a chosen algorithm.
    #[allow(clippy::too_many_arguments)]
    pub fn scan_with<T: Reducible>(
        &self,
        team: &Team,
        op: ReduceOp,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        nelems: usize,
        algo: ScanAlgo,
        inclusive: bool,
    ) -> Result<()> {
        let (call, name) = if inclusive {
            (CallId::Inscan, "inscan")
        } else {
            (CallId::Exscan, "exscan")
        };
        let mut ctx = team.ctx(self, name)?;
        let n = ctx.n();
        let algo = resolve(algo, &self.cfg, n);
        let local = (|| {
            check_op::<T>(op)?;
            need_len(dest, nelems, "dest", name)?;
            need_len(src, nelems, "source", name)?;
            same_or_disjoint(dest.slice(..nelems)?, src.slice(..nelems)?)?;
            algo.clone().map(|_| ())
        })();
        let code = algo.as_ref().map_or(0, |a| a.code());
        let common: [u64; COMMON] = [
            call as u64,
            code,
            type_code::<T>(),
            nelems as u64,
            op.code(),
            0,
            0,
            0,
        ];
        ctx.enter(common, [0; INFO], local, false)?;
        let algo = algo?;
        if nelems == 0 {
            return Ok(());
        }
        let (dest, src) = (dest.slice(..nelems)?, src.slice(..nelems)?);
        match algo {
            ScanAlgo::Chain if n > 1 => chain(&mut ctx, op, dest, src, inclusive),
            _ => linear(&mut ctx, op, dest, src, inclusive),
        }
    }
}

fn linear<T: Reducible>(
    ctx: &mut Ctx<'_>,
    op: ReduceOp,
    dest: SymSlice<T>,
    src: SymSlice<T>,
    inclusive: bool,
) -> Result<()> {
    let me = ctx.idx();
    let upto = if inclusive { me + 1 } else { me };
    let mut acc = if upto == 0 {
        vec![T::identity(op); src.len()]
    } else {
        ctx.fetch(src, 0)?
    };
    for i in 1..upto {
        combine_into(op, &mut acc, &ctx.fetch(src, i)?, false);
    }
    ctx.barrier(BarrierAlgo::Auto)?;
    ctx.sh.put(dest, &acc, ctx.sh.my_pe())
}

/// Each member reads its own source, tells its left neighbour it may write its `dest`, waits for the prefix
/// from the left (pushed into `dest`), and pushes its own inclusive prefix into the right neighbour's `dest`.
fn chain<T: Reducible>(
    ctx: &mut Ctx<'_>,
    op: ReduceOp,
    dest: SymSlice<T>,
    src: SymSlice<T>,
    inclusive: bool,
) -> Result<()> {
    let (n, me) = (ctx.n(), ctx.idx());
    let my_pe = ctx.sh.my_pe();
    let mine = ctx.fetch(src, me)?;
    if me > 0 {
        ctx.signal(layout::SIG_DONE, me - 1)?;
    }
    let incl = if me == 0 {
        if !inclusive {
            ctx.sh
                .put(dest, &vec![T::identity(op); mine.len()], my_pe)?;
        } else {
            ctx.sh.put(dest, &mine, my_pe)?;
        }
        mine
    } else {
        let lpe = ctx.pe(me - 1);
        ctx.wait(layout::SIG_RING, 1, &|| {
            format!("scan (chain): waiting for the prefix from PE {lpe}")
        })?;
        let mut acc = ctx.fetch(dest, me)?;
        combine_into(op, &mut acc, &mine, false);
        if inclusive {
            ctx.sh.put(dest, &acc, my_pe)?;
        }
        acc
    };
    if me + 1 < n {
        let rpe = ctx.pe(me + 1);
        ctx.wait(layout::SIG_DONE, 1, &|| {
            format!("scan (chain): waiting for PE {rpe} to be ready")
        })?;
        ctx.sh.put(dest, &incl, rpe)?;
        ctx.signal(layout::SIG_RING, me + 1)?;
    }
    Ok(())
}
