//! Collectives over teams: team barrier, broadcast, all-to-all, fcollect and sum reduction on the team of all PEs,
//! latency and bandwidth versus size, timed OSU style (each call timed alone, `barrier_all` between calls,
//! slowest PE) exactly like the C peers (`shmem_broadcast64` & co., `MPI_Bcast` & co.).

use crate::bench::{bytes_size, bytes_size_times_n, Bench, RunFn, Sizes, Step, Timing};
use crate::ctx::{fill, Ctx};
use crate::error::Result;
use crate::sync::timed_barrier;
use std::time::Instant;
use xpushmem::{ReduceOp, Shmem, SymSlice};

/// The collective benchmarks.
pub fn benches() -> Vec<Bench> {
    vec![
        coll(
            "team_barrier",
            "team_barrier on the team of all PEs, back to back, slowest PE",
            Sizes::Fixed(0),
            bytes_size,
            team_barrier,
        ),
        coll(
            "bcast",
            "broadcast from PE 0 on the team of all PEs; each call timed alone, barrier between calls, slowest PE",
            Sizes::Sweep,
            bytes_size,
            bcast,
        ),
        coll(
            "alltoall",
            "alltoall on the team of all PEs, size = bytes per destination; OSU timing, slowest PE",
            Sizes::Sweep,
            bytes_size_times_n,
            alltoall,
        ),
        coll(
            "fcollect",
            "fcollect on the team of all PEs, size = bytes per PE; OSU timing, slowest PE",
            Sizes::Sweep,
            bytes_size_times_n,
            fcollect,
        ),
        coll(
            "reduce_sum",
            "sum reduction of int64 to all PEs of the team, size = bytes per PE; OSU timing, slowest PE",
            Sizes::Sweep,
            bytes_size,
            reduce_sum,
        ),
    ]
}

fn coll(
    name: &'static str,
    about: &'static str,
    sizes: Sizes,
    bytes: fn(usize, usize) -> usize,
    run: RunFn,
) -> Bench {
    Bench {
        name,
        group: "coll",
        about,
        sizes,
        windowed: false,
        timing: Timing::MaxOverPes,
        min_pes: 1,
        bytes,
        run,
    }
}

/// OSU-style timing: each of `iters` calls timed alone, `barrier_all` after each; seconds per call on this PE.
pub fn osu_timed(
    sh: &Shmem,
    iters: usize,
    mut call: impl FnMut() -> xpushmem::Result<()>,
) -> Result<f64> {
    let mut acc = 0.0;
    for _ in 0..iters {
        let t0 = Instant::now();
        call()?;
        acc += t0.elapsed().as_secs_f64();
        sh.barrier_all()?;
    }
    Ok(acc / iters.max(1) as f64)
}

/// The same heap range as `s`, typed as `len` elements of `T`.
pub fn retype<T: xpushmem::Symmetric>(
    sh: &Shmem,
    s: SymSlice<u8>,
    len: usize,
) -> Result<SymSlice<T>> {
    Ok(sh.sym_slice_from_addr::<T>(sh.heap_base() as usize + s.heap_offset(), len)?)
}

/// Salt of block `from` -> `to` of an exchange (distinct for every pair).
pub fn pair_salt(salt: u64, from: usize, to: usize) -> u64 {
    salt.wrapping_add((from as u64) << 20)
        .wrapping_add(to as u64)
}

fn team_barrier(c: &mut Ctx<'_>, s: &Step) -> Result<f64> {
    let team = c.sh.team_world();
    timed_barrier(c, s, &|sh| sh.team_barrier(&team))
}

fn bcast(c: &mut Ctx<'_>, s: &Step) -> Result<f64> {
    let (sh, sz) = (c.sh, s.size);
    let salt = c.next_salt();
    let team = sh.team_world();
    let (dst, src) = (c.a.slice(..sz)?, c.b.slice(..sz)?);
    fill(&mut c.src[..sz], salt);
    sh.put(src, &c.src[..sz], c.me)?;
    sh.barrier_all()?;
    let t = osu_timed(sh, s.iters, || sh.broadcast(&team, dst, src, sz, 0))?;
    c.check_own("broadcast payload", dst, salt, None)?;
    Ok(t)
}

fn alltoall(c: &mut Ctx<'_>, s: &Step) -> Result<f64> {
    let (sh, sz, n, me) = (c.sh, s.size, c.n, c.me);
    let salt = c.next_salt();
    let team = sh.team_world();
    let (dst, src) = (c.a.slice(..n * sz)?, c.b.slice(..n * sz)?);
    for p in 0..n {
        fill(&mut c.src[p * sz..(p + 1) * sz], pair_salt(salt, me, p));
    }
    sh.put(src, &c.src[..n * sz], me)?;
    sh.barrier_all()?;
    let t = osu_timed(sh, s.iters, || sh.alltoall(&team, dst, src, sz))?;
    for p in 0..n {
        let block = c.a.slice(p * sz..(p + 1) * sz)?;
        c.check_own(
            "block received from a PE",
            block,
            pair_salt(salt, p, me),
            None,
        )?;
    }
    Ok(t)
}

fn fcollect(c: &mut Ctx<'_>, s: &Step) -> Result<f64> {
    let (sh, sz, n, me) = (c.sh, s.size, c.n, c.me);
    let salt = c.next_salt();
    let team = sh.team_world();
    let (dst, src) = (c.a.slice(..n * sz)?, c.b.slice(..sz)?);
    fill(&mut c.src[..sz], salt.wrapping_add(me as u64));
    sh.put(src, &c.src[..sz], me)?;
    sh.barrier_all()?;
    let t = osu_timed(sh, s.iters, || sh.fcollect(&team, dst, src, sz))?;
    for p in 0..n {
        let block = c.a.slice(p * sz..(p + 1) * sz)?;
        c.check_own(
            "block collected from a PE",
            block,
            salt.wrapping_add(p as u64),
            None,
        )?;
    }
    Ok(t)
}

fn reduce_sum(c: &mut Ctx<'_>, s: &Step) -> Result<f64> {
    let (sh, n, me) = (c.sh, c.n as u64, c.me);
    let ne = (s.size / 8).max(1);
    let salt = c.next_salt();
    let team = sh.team_world();
    let dst = retype::<i64>(sh, c.a, ne)?;
    let src = retype::<i64>(sh, c.b, ne)?;
    let tri = n * (n + 1) / 2;
    let mut vals = vec![0i64; ne];
    for (j, v) in vals.iter_mut().enumerate() {
        *v = salt.wrapping_add(j as u64).wrapping_mul(me as u64 + 1) as i64;
    }
    sh.put(src, &vals, me)?;
    sh.barrier_all()?;
    let t = osu_timed(sh, s.iters, || {
        sh.reduce(&team, ReduceOp::Sum, dst, src, ne)
    })?;
    sh.get(&mut vals, dst, me)?;
    for (j, (g, e)) in c.dst[..ne * 8]
        .chunks_exact_mut(8)
        .zip(c.expect[..ne * 8].chunks_exact_mut(8))
        .enumerate()
    {
        g.copy_from_slice(&vals[j].to_le_bytes());
        e.copy_from_slice(&salt.wrapping_add(j as u64).wrapping_mul(tri).to_le_bytes());
    }
    let chk = c.checker();
    chk.bytes(
        "reduced int64 elements",
        &mut c.dst[..ne * 8],
        &c.expect[..ne * 8],
    )?;
    Ok(t)
}
