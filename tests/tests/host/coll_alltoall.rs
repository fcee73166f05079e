//! alltoall and alltoalls (strided) over every team shape and algorithm, sizes 0, 1, odd and 1 MiB in total,
//! against every member's reference blocks; errors on every PE.

use crate::coll_common::{destroy, shapes, Shape};
use xpushmem::{AlltoallAlgo, Error, Result, Shmem};
use xpushmem_tests::pe_test;
use xpushmem_tests::{ref_vec, FromRef};

fn algos() -> impl Iterator<Item = AlltoallAlgo> {
    std::iter::once(AlltoallAlgo::Auto).chain(AlltoallAlgo::ALL.iter().copied())
}

/// Run alltoalls with strides (dst, sst) — (1, 1) is plain alltoall — and check every received element and that
/// the gaps between strided elements are untouched.
fn run<T: FromRef>(
    sh: &Shmem,
    shapes: &[Shape],
    sizes: &[usize],
    strides: &[(usize, usize)],
    which: impl Fn(usize) -> bool,
    salt: u64,
) -> Result<()> {
    let n = sh.n_pes();
    let me = sh.my_pe();
    let maxs = strides.iter().map(|&(d, s)| d.max(s)).max().unwrap_or(1);
    let max = n * sizes.iter().max().copied().unwrap_or(0) * maxs + 1;
    let (src, dst) = (sh.malloc::<T>(max)?, sh.malloc::<T>(max)?);
    for (k, s) in shapes.iter().enumerate() {
        let Some(t) = &s.team else { continue };
        if !which(k) {
            continue;
        }
        let members = s.members();
        let (tn, ti) = (t.n_pes(), t.my_pe());
        for algo in algos() {
            for &len in sizes {
                for &(dst_s, src_s) in strides {
                    let tag = salt ^ (len as u64) << 8 ^ (dst_s * 16 + src_s) as u64;
                    sh.put(src, &ref_vec::<T>(me, max, tag), me)?;
                    let background: Vec<T> = ref_vec(me, max, !tag);
                    sh.put(dst, &background, me)?;
                    if (dst_s, src_s) == (1, 1) {
                        sh.alltoall_with(t, dst, src, len, algo)?;
                    } else {
                        sh.alltoalls_with(t, dst, src, dst_s, src_s, len, algo)?;
                    }
                    let mut got = vec![T::default(); max];
                    sh.get(&mut got, dst, me)?;
                    let mut want = background.clone();
                    for (i, &p) in members.iter().enumerate() {
                        let theirs = ref_vec::<T>(p, max, tag);
                        for e in 0..len {
                            want[(i * len + e) * dst_s] = theirs[(ti * len + e) * src_s];
                        }
                    }
                    assert!(
                        got == want,
                        "{} {} {algo} len {len} strides ({dst_s}, {src_s}) of {tn}",
                        s.name,
                        T::NAME
                    );
                }
            }
        }
    }
    sh.barrier_all()?;
    sh.free(dst)?;
    sh.free(src)
}

pe_test!(
    alltoall_conformance,
    env [crate::coll_common::ENV],
    shm [1, 2, 3, 4, 8],
    fabp [2, 3, 4],
    |sh| {
    let shapes = shapes(sh)?;
    let strides = [(1, 1), (2, 1), (1, 3), (3, 2)];
    run::<i32>(sh, &shapes, &[0, 1, 7, 101], &strides, |_| true, 1)?;
    run::<f64>(sh, &shapes, &[0, 1, 5], &[(1, 1), (2, 3)], |_| true, 2)?;
    run::<u8>(sh, &shapes, &[3], &[(1, 1), (2, 2)], |k| k == 0, 3)?;
    run::<i64>(sh, &shapes, &[3], &[(1, 1)], |k| k == 0, 4)?;
    run::<f32>(sh, &shapes, &[3], &[(1, 1)], |k| k == 0, 5)?;
    // 1 MiB of sources in total per member on the world.
    let n = sh.n_pes();
    run::<u8>(sh, &shapes, &[(1 << 20) / n], &[(1, 1)], |k| k == 0, 6)?;
    destroy(sh, shapes)
});

pe_test!(
    alltoall_errors_on_every_pe,
    env [crate::coll_common::ENV],
    shm [1, 2, 3],
    fabp [2, 3],
    |sh| {
        let (me, n) = (sh.my_pe(), sh.n_pes());
        let w = sh.team_world();
        let (src, dst) = (sh.malloc::<u64>(4 * n)?, sh.malloc::<u64>(4 * n)?);
        let fail = |r: Result<()>, what: &str| match r {
            Err(e) => eprintln!("PE {me}: {what}: {e}"),
            Ok(()) => panic!("{what}: succeeded on PE {me}"),
        };
        fail(sh.alltoall(&w, dst, src, 5), "blocks beyond the buffers");
        fail(sh.alltoall(&w, src, src, 1), "dest overlaps source");
        fail(sh.alltoalls(&w, dst, src, 0, 1, 1), "zero stride");
        fail(
            sh.alltoalls(&w, dst, src, 2, 1, 4),
            "strided span beyond dest",
        );
        if n > 1 {
            let r = sh.alltoall(&w, dst, src, if me == 0 { 1 } else { 2 });
            assert!(
                matches!(r, Err(Error::Mismatch { .. })),
                "size mismatch: {r:?}"
            );
            let r = sh.alltoalls(&w, dst, src, if me == 0 { 1 } else { 2 }, 1, 1);
            assert!(
                matches!(r, Err(Error::Mismatch { .. })),
                "stride mismatch: {r:?}"
            );
        }
        sh.alltoall(&w, dst, src, 4)?;
        sh.barrier_all()?;
        sh.free(dst)?;
        sh.free(src)
    }
);

/// Value `k` of what PE `from` contributes (to PE `to`) in the eager-boundary test.
fn val(from: usize, to: usize, k: usize) -> i64 {
    ((from as i64) << 40) ^ ((to as i64) << 20) ^ (k as i64 * 7 + 1)
}

// The eager algorithms (the data inside the agreement's exchange) at their size boundary: one element below,
// at and above what a message holds (`team_eager_capacity`), with `Auto` and with `Eager` requested (which
// falls back above), for broadcast, alltoall, fcollect and a sum reduction, against references every PE computes.
pe_test!(
    eager_collectives_at_the_boundary,
    env [crate::coll_common::ENV],
    shm [1, 2, 3, 4],
    fabp [2, 3, 4],
    |sh| {
        use xpushmem::{BroadcastAlgo, CollectAlgo, ReduceAlgo, ReduceOp};
        let (n, me) = (sh.n_pes(), sh.my_pe());
        let w = sh.team_world();
        let edge = sh.team_eager_capacity(&w).min(4096) / 8;
        let max = n * (edge + 1);
        let (src, dst) = (sh.malloc::<i64>(max)?, sh.malloc::<i64>(max)?);
        for len in [edge - 1, edge, edge + 1] {
            for eager in [false, true] {
                let ctx = format!("len {len} (edge {edge}), Eager requested {eager}, PE {me}");
                // broadcast from the last PE
                let root = n - 1;
                let data: Vec<i64> = (0..len).map(|k| val(root, 0, k)).collect();
                sh.put(src.slice(..len)?, &data, me)?;
                let algo = if eager {
                    BroadcastAlgo::Eager
                } else {
                    BroadcastAlgo::Auto
                };
                sh.broadcast_with(&w, dst, src, len, root, algo)?;
                let mut got = vec![0i64; len];
                sh.get(&mut got, dst.slice(..len)?, me)?;
                assert_eq!(got, data, "broadcast: {ctx}");
                // alltoall
                let data: Vec<i64> = (0..n * len).map(|i| val(me, i / len, i % len)).collect();
                sh.put(src.slice(..n * len)?, &data, me)?;
                let algo = if eager {
                    AlltoallAlgo::Eager
                } else {
                    AlltoallAlgo::Auto
                };
                sh.alltoall_with(&w, dst, src, len, algo)?;
                let mut got = vec![0i64; n * len];
                sh.get(&mut got, dst.slice(..n * len)?, me)?;
                let want: Vec<i64> = (0..n * len).map(|i| val(i / len, me, i % len)).collect();
                assert_eq!(got, want, "alltoall: {ctx}");
                // fcollect
                let data: Vec<i64> = (0..len).map(|k| val(me, 0, k)).collect();
                sh.put(src.slice(..len)?, &data, me)?;
                let algo = if eager {
                    CollectAlgo::Eager
                } else {
                    CollectAlgo::Auto
                };
                sh.fcollect_with(&w, dst, src, len, algo)?;
                let mut got = vec![0i64; n * len];
                sh.get(&mut got, dst.slice(..n * len)?, me)?;
                let want: Vec<i64> = (0..n * len).map(|i| val(i / len, 0, i % len)).collect();
                assert_eq!(got, want, "fcollect: {ctx}");
                // sum reduction, out of place and in place
                let algo = if eager {
                    ReduceAlgo::Eager
                } else {
                    ReduceAlgo::Auto
                };
                let want: Vec<i64> = (0..len)
                    .map(|k| (0..n).map(|p| val(p, 1, k)).fold(0i64, i64::wrapping_add))
                    .collect();
                for in_place in [false, true] {
                    let data: Vec<i64> = (0..len).map(|k| val(me, 1, k)).collect();
                    sh.put(src.slice(..len)?, &data, me)?;
                    let d = if in_place { src } else { dst };
                    sh.reduce_with(&w, ReduceOp::Sum, d, src, len, algo)?;
                    let mut got = vec![0i64; len];
                    sh.get(&mut got, d.slice(..len)?, me)?;
                    assert_eq!(got, want, "reduce (in place {in_place}): {ctx}");
                }
            }
        }
        sh.barrier_all()?;
        sh.free(dst)?;
        sh.free(src)
    }
);

// Bruck's alltoall in rounds (`EagerRounds`) at its size boundary: its largest round message carries, with a
// 16-byte header each, the blocks whose position has that round's bit set, and must fit in a message of the
// team's exchange (`team_exchange_capacity`). One element below, at and above the largest block that fits (from
// that rule, computed here), results checked against references. The boundary is seen from outside too: PE 0
// asks for the rounds, the others for one all-to-all round (`Eager`); within the boundary the algorithms differ
// (a mismatch on every PE), above it PE 0's request falls back to the exchange and the call succeeds.
pe_test!(
    eager_rounds_alltoall_at_its_boundary,
    env [crate::coll_common::ENV],
    shm [2, 3, 4, 5],
    fabp [2, 3, 4, 5],
    |sh| {
        let (n, me) = (sh.n_pes(), sh.my_pe());
        let w = sh.team_world();
        let cap = sh.team_exchange_capacity(&w);
        let most = (0..usize::BITS)
            .map(|k| (0..n).filter(|j| (j >> k) & 1 == 1).count())
            .max()
            .unwrap_or(1);
        let edge = (cap / most - 16) / 8;
        let max = n * (edge + 1);
        let (src, dst) = (sh.malloc::<i64>(max)?, sh.malloc::<i64>(max)?);
        for len in [edge - 1, edge, edge + 1] {
            let ctx = format!("len {len} (edge {edge}), PE {me}");
            let data: Vec<i64> = (0..n * len).map(|i| val(me, i / len, i % len)).collect();
            sh.put(src.slice(..n * len)?, &data, me)?;
            let want: Vec<i64> = (0..n * len).map(|i| val(i / len, me, i % len)).collect();
            let mut got = vec![0i64; n * len];
            sh.alltoall_with(&w, dst, src, len, AlltoallAlgo::EagerRounds)?;
            sh.get(&mut got, dst.slice(..n * len)?, me)?;
            assert_eq!(got, want, "rounds: {ctx}");
            let algo = if me == 0 {
                AlltoallAlgo::EagerRounds
            } else {
                AlltoallAlgo::Eager
            };
            sh.put(dst.slice(..n * len)?, &vec![-1; n * len], me)?;
            let r = sh.alltoall_with(&w, dst, src, len, algo);
            if len <= edge {
                assert!(matches!(r, Err(Error::Mismatch { .. })), "{ctx}: {r:?}");
            } else {
                r?;
                sh.get(&mut got, dst.slice(..n * len)?, me)?;
                assert_eq!(got, want, "rounds falling back: {ctx}");
            }
        }
        sh.barrier_all()?;
        sh.free(dst)?;
        sh.free(src)
    }
);
