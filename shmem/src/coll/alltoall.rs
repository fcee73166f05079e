//! All-to-all exchange: block `j` of every member's `src` goes to member `j`, where it lands in block `i` (the
//! sender's number) of `dest`. `alltoalls` does the same with strided elements.

use super::{
    mul, need_blocks, overlap, small_buf, type_code, AlltoallAlgo, CallId, Ctx, Fit, COMMON, INFO,
    SMALL_ELEMS,
};
use crate::core::Shmem;
use crate::error::{Error, Result};
use crate::team::{layout, Team};
use crate::types::{SymSlice, Symmetric};

/// The algorithm for a team of `n` (`fit`: the eager forms a block fits).
fn resolve(
    a: AlltoallAlgo,
    cfg: &crate::config::Config,
    n: usize,
    fit: Fit,
) -> Result<AlltoallAlgo> {
    use AlltoallAlgo::{Auto, Eager, EagerRounds};
    Ok(match a.with_cfg(cfg)? {
        Auto if fit.auto_rounds => EagerRounds,
        EagerRounds if fit.rounds => EagerRounds,
        Auto | Eager | EagerRounds if fit.eager => Eager,
        Auto | Eager | EagerRounds if n > 16 => AlltoallAlgo::Pairwise,
        Auto | Eager | EagerRounds => AlltoallAlgo::Direct,
        x => x,
    })
}

/// Elements spanned by `count` elements `stride` apart (`count` = the team's blocks of `nelems`); an overflow
/// names the stride argument `name` with its value.
fn span(count: usize, stride: usize, name: &'static str, nelems: usize) -> Result<usize> {
    if count == 0 {
        return Ok(0);
    }
    (count - 1)
        .checked_mul(stride)
        .and_then(|x| x.checked_add(1))
        .ok_or_else(|| {
            Error::invalid(
                name,
                stride,
                format!("{count} elements (nelems = {nelems} per PE) every {stride} span more than the address space"),
            )
        })
}

/// This PE's `buf.len()` elements of `from`, `stride` apart.
fn gather<T: Symmetric>(sh: &Shmem, buf: &mut [T], from: SymSlice<T>, stride: usize) -> Result<()> {
    if stride == 1 {
        sh.get(buf, from, sh.my_pe())
    } else {
        let n = buf.len();
        sh.iget(buf, from, 1, stride, n, sh.my_pe())
    }
}

/// `buf` into `to` on `pe`, `stride` elements apart: the inverse of [`gather`].
fn scatter<T: Symmetric>(
    sh: &Shmem,
    to: SymSlice<T>,
    buf: &[T],
    stride: usize,
    pe: usize,
) -> Result<()> {
    if stride == 1 {
        sh.put(to, buf, pe)
    } else {
        sh.iput(to, buf, stride, 1, buf.len(), pe)
    }
}

impl Shmem {
    /// Member `i` sends `src[j * nelems .. (j + 1) * nelems]` to member `j`, which stores it at
    /// `dest[i * nelems ..]` (OpenSHMEM `alltoall`). Both hold `n_pes * nelems` elements. Collective.
    pub fn alltoall<T: Symmetric>(
        &self,
        team: &Team,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        nelems: usize,
    ) -> Result<()> {
        self.alltoalls_impl(
            team,
            dest,
            src,
            1,
            1,
            nelems,
            AlltoallAlgo::Auto,
            CallId::Alltoall,
        )
    }

    /// [`Shmem::alltoall`] of bytes (OpenSHMEM `alltoallmem`).
    pub fn alltoallmem(
        &self,
        team: &Team,
        dest: SymSlice<u8>,
        src: SymSlice<u8>,
        nbytes: usize,
    ) -> Result<()> {
        self.alltoall(team, dest, src, nbytes)
    }

    /// [`Shmem::alltoall`] with a chosen algorithm.
    pub fn alltoall_with<T: Symmetric>(
        &self,
        team: &Team,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        nelems: usize,
        algo: AlltoallAlgo,
    ) -> Result<()> {
        self.alltoalls_impl(team, dest, src, 1, 1, nelems, algo, CallId::Alltoall)
    }

    /// Strided all-to-all (OpenSHMEM `alltoalls`): element `k` of the block member `i` sends to member `j` is
    /// `src[(j * nelems + k) * sst]` on `i` and lands in `dest[(i * nelems + k) * dst]` on `j`. Strides are in
    /// elements, at least 1. Collective.
    pub fn alltoalls<T: Symmetric>(
        &self,
        team: &Team,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        dst: usize,
        sst: usize,
        nelems: usize,
    ) -> Result<()> {
        self.alltoalls_impl(
            team,
            dest,
            src,
            dst,
            sst,
            nelems,
            AlltoallAlgo::Auto,
            CallId::Alltoalls,
        )
    }

    /// [`Shmem::alltoalls`] of bytes (OpenSHMEM `alltoallsmem`).
    pub fn alltoallsmem(
        &self,
        team: &Team,
        dest: SymSlice<u8>,
        src: SymSlice<u8>,
        dst: usize,
        sst: usize,
        nbytes: usize,
    ) -> Result<()> {
        self.alltoalls(team, dest, src, dst, sst, nbytes)
    }

    /// [`Shmem::alltoalls`] with a chosen algorithm.
    #[allow(clippy::too_many_arguments)]
    pub fn alltoalls_with<T: Symmetric>(
        &self,
        team: &Team,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        dst: usize,
        sst: usize,
        nelems: usize,
        algo: AlltoallAlgo,
    ) -> Result<()> {
        self.alltoalls_impl(team, dest, src, dst, sst, nelems, algo, CallId::Alltoalls)
    }

    #[allow(clippy::too_many_arguments)]
    fn alltoalls_impl<T: Symmetric>(
        &self,
        team: &Team,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        dst: usize,
        sst: usize,
        nelems: usize,
        algo: AlltoallAlgo,
        call: CallId,
    ) -> Result<()> {
        let op = call.name();
        let mut ctx = team.ctx(self, op)?;
        let n = ctx.n();
        let total = mul(n, nelems, "nelems");
        let bytes = nelems.saturating_mul(std::mem::size_of::<T>());
        let algo = ctx.choose(call, algo, bytes, |ctx| {
            resolve(
                algo,
                &self.cfg,
                n,
                ctx.fit_rounds(bytes, ctx.bruck_fits(bytes)),
            )
        });
        let local = (|| {
            if dst == 0 {
                return Err(Error::invalid(
                    "dst",
                    0,
                    "strides are in elements and must be at least 1",
                ));
            }
            if sst == 0 {
                return Err(Error::invalid(
                    "sst",
                    0,
                    "strides are in elements and must be at least 1",
                ));
            }
            let total = total.clone()?;
            let (dspan, sspan) = (
                span(total, dst, "dst", nelems)?,
                span(total, sst, "sst", nelems)?,
            );
            need_blocks(dest, dspan, nelems, "dest", op)?;
            need_blocks(src, sspan, nelems, "source", op)?;
            let (d, s) = (dest.slice(..dspan)?, src.slice(..sspan)?);
            if total > 0 && overlap(d, s) {
                return Err(Error::invalid(
                    "dest",
                    format!("{d:?}"),
                    format!("overlaps the source {s:?} (nelems = {nelems}); they must be disjoint"),
                ));
            }
            algo.clone().map(|_| ())
        })();
        let code = algo.as_ref().map_or(0, |a| a.code());
        let common: [u64; COMMON] = [
            call as u64,
            code,
            type_code::<T>(),
            nelems as u64,
            dst as u64,
            sst as u64,
            0,
            0,
        ];
        let me = ctx.idx();
        if let Ok(a @ (AlltoallAlgo::Eager | AlltoallAlgo::EagerRounds)) = algo {
            // The blocks travel inside the agreement: in one round, block j of the source in member j's message
            // (this PE's own block in its own message, which the exchange hands back as received); in rounds
            // (Bruck's alltoall), every block in team order. Either way the received blocks arrive in team order,
            // back to back: with unit strides the source is read into the messages in one copy and the received
            // bytes written to `dest` in one. A failed read is this PE's error, reported after the exchange (so
            // that nobody waits for it).
            let rounds = a == AlltoallAlgo::EagerRounds;
            let (mut send, mut recv) = ctx.take_messages();
            let local = local.and_then(|()| {
                if sst == 1 {
                    ctx.push_local(&mut send, src.slice(..total.clone()?)?)?;
                    if !rounds {
                        send.ends.extend((1..=n).map(|j| j * bytes));
                    }
                    return Ok(());
                }
                let (mut stack, mut heap) = ([T::default(); SMALL_ELEMS], Vec::new());
                let buf = small_buf(&mut stack, &mut heap, nelems);
                for j in 0..n {
                    gather(self, buf, src.slice(j * nelems * sst..)?, sst)?;
                    send.data
                        .extend_from_slice(crate::sys::bytes::bytes_of(buf));
                    if !rounds {
                        send.close();
                    }
                }
                Ok(())
            });
            if local.is_err() {
                send.clear();
            }
            if rounds {
                ctx.enter_bruck(common, local, bytes, &send.data, &mut recv)?;
            } else {
                ctx.enter_exchange(common, local, &send, &mut recv)?;
            }
            if let Some(i) = (0..n).find(|&i| recv.get(i).len() != bytes) {
                return Err(Error::State(format!(
                    "{op}: the block of member {i} holds {} bytes, expected {bytes}",
                    recv.get(i).len()
                )));
            }
            if dst == 1 {
                ctx.write_local(dest.slice(..total?)?, &recv.data)?;
            } else if nelems > 0 {
                let (mut stack, mut heap) = ([T::default(); SMALL_ELEMS], Vec::new());
                let buf = small_buf(&mut stack, &mut heap, nelems);
                for i in 0..n {
                    crate::sys::bytes::bytes_of_mut(buf).copy_from_slice(recv.get(i));
                    scatter(
                        self,
                        dest.slice(i * nelems * dst..)?,
                        buf,
                        dst,
                        self.my_pe(),
                    )?;
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
        // Unit strides: block j goes straight from this PE's source into member j's `dest` (one copy, no buffer).
        let unit = sst == 1 && dst == 1;
        let mut buf = if unit {
            Vec::new()
        } else {
            vec![T::default(); nelems]
        };
        let mut send = |ctx: &mut Ctx<'_>, j: usize| -> Result<()> {
            if unit {
                let block = |s: SymSlice<T>, i: usize| s.slice(i * nelems..(i + 1) * nelems);
                return ctx.copy(block(dest, me)?, j, block(src, j)?, me);
            }
            gather(ctx.sh, &mut buf, src.slice(j * nelems * sst..)?, sst)?;
            scatter(
                ctx.sh,
                dest.slice(me * nelems * dst..)?,
                &buf,
                dst,
                ctx.pe(j),
            )
        };
        for s in 1..n {
            let j = (me + s) % n;
            send(&mut ctx, j)?;
            ctx.signal(layout::SIG_DATA, j)?;
            if algo == AlltoallAlgo::Pairwise {
                let from = ctx.pe((me + n - s) % n);
                ctx.wait(layout::SIG_DATA, 1, &|| {
                    format!("{op} (pairwise) step {s}: waiting for PE {from}")
                })?;
            }
        }
        send(&mut ctx, me)?;
        if algo != AlltoallAlgo::Pairwise {
            ctx.wait(layout::SIG_DATA, n as u64 - 1, &|| {
                format!("{op} (direct): waiting for the blocks of {} members", n - 1)
            })?;
        }
        Ok(())
    }
}
