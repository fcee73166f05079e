//! The PyTorch op family of `xpushmem-ops`: `all_to_all_vdev` and `all_to_all_vdev_2d` throughput versus size,
//! on the group of all PEs with uniform splits (`size` bytes to every destination), timed like the collectives
//! (each call alone, `barrier_all` between calls, slowest PE) and compared with `MPI_Alltoallv` with the same
//! counts.

use crate::bench::{bytes_size_times_n, Bench, RunFn, Sizes, Step, Timing};
use crate::coll::{osu_timed, pair_salt};
use crate::ctx::{fill, Ctx};
use crate::error::Result;
use xpushmem_ops::{DType, Group, TensorView};

/// Experts per rank of the `all_to_all_vdev_2d` benchmark.
pub const EXPERTS: usize = 4;

/// The op benchmarks.
pub fn benches() -> Vec<Bench> {
    vec![
        op(
            "all_to_all_vdev",
            "xpushmem-ops all_to_all_vdev on all PEs, uniform splits of size bytes (uint8 rows) per destination",
            a2a_vdev,
        ),
        op(
            "all_to_all_vdev_2d",
            "xpushmem-ops all_to_all_vdev_2d on all PEs, 4 experts per PE, size bytes per destination (size/4 per expert)",
            a2a_vdev_2d,
        ),
    ]
}

fn op(name: &'static str, about: &'static str, run: RunFn) -> Bench {
    Bench {
        name,
        group: "ops",
        about,
        sizes: Sizes::Sweep,
        windowed: false,
        timing: Timing::MaxOverPes,
        min_pes: 1,
        bytes: bytes_size_times_n,
        run,
    }
}

/// The group of all PEs, created (collectively) on first use.
pub fn group<'c>(c: &'c mut Ctx<'_>) -> Result<&'c Group> {
    if c.group.is_none() {
        c.group = Some(Group::world(c.sh)?);
    }
    c.group
        .as_ref()
        .ok_or_else(|| crate::PerfError::Usage("the ops group was not created".into()))
}

/// Run one all-to-all-v: `ne` experts per rank, `per` bytes per (destination, expert).
fn a2a_common(c: &mut Ctx<'_>, s: &Step, ne: usize) -> Result<f64> {
    let (sh, n, me) = (c.sh, c.n, c.me);
    let per = (s.size / ne).max(1);
    let blk = per * ne;
    let salt = c.next_salt();
    let input = TensorView::contiguous(c.b.slice(..n * blk)?, DType::U8, &[n * blk])?;
    let out = TensorView::contiguous(c.a.slice(..n * blk)?, DType::U8, &[n * blk])?;
    let splits = c.splits(n * ne)?;
    let in_splits = TensorView::of(sh, splits.0, DType::I64, &[n * ne])?;
    let oso = TensorView::of(sh, splits.1, DType::I64, &[2, n * ne])?;
    sh.put(splits.0, &vec![per as i64; n * ne], me)?;
    // input: rank-major, chunk (p, e) for expert e of rank p
    for p in 0..n {
        for e in 0..ne {
            let k = (p * ne + e) * per;
            fill(&mut c.src[k..k + per], pair_salt(salt, me, p * 16 + e));
        }
    }
    sh.put(c.b.slice(..n * blk)?, &c.src[..n * blk], me)?;
    sh.barrier_all()?;
    let g = group(c)?;
    let t = if ne == 1 {
        osu_timed(sh, s.iters, || {
            xpushmem_ops::all_to_all_vdev(sh, g, &input, &out, &in_splits, &oso)
        })?
    } else {
        osu_timed(sh, s.iters, || {
            xpushmem_ops::all_to_all_vdev_2d(sh, g, &input, &out, &in_splits, &oso, None)
        })?
    };
    // out: 1-D: by source rank; 2-D: expert-major, then source rank
    let chk = c.checker();
    let mut got = vec![0i64; 2 * n * ne];
    sh.get(&mut got, splits.1, me)?;
    for src in 0..n {
        for e in 0..ne {
            let idx = if ne == 1 { src } else { e * n + src };
            chk.value("received split count", got[idx] as u64, per as u64)?;
            chk.value(
                "output offset",
                got[n * ne + idx] as u64,
                (idx * per) as u64,
            )?;
            let block = c.a.slice(idx * per..(idx + 1) * per)?;
            c.check_own(
                "chunk received from a PE",
                block,
                pair_salt(salt, src, me * 16 + e),
                None,
            )?;
        }
    }
    Ok(t)
}

fn a2a_vdev(c: &mut Ctx<'_>, s: &Step) -> Result<f64> {
    a2a_common(c, s, 1)
}

fn a2a_vdev_2d(c: &mut Ctx<'_>, s: &Step) -> Result<f64> {
    a2a_common(c, s, EXPERTS)
}
