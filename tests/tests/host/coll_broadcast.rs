//! Broadcast over every team shape, every algorithm, every root kind and sizes 0, 1, odd and 1 MiB, against the
//! root's reference data; in place; errors. Per shape, the algorithm x size x root loop is a covering set of its
//! pairs (`xpushmem_tests::cover`; the whole product at `XPUSHMEM_TEST_DEPTH=full`).

use crate::coll_common::{destroy, shapes, Shape};
use xpushmem::{BroadcastAlgo, Error, Result, Shmem};
use xpushmem_tests::{cover, pe_test};
use xpushmem_tests::{ref_vec, FromRef};

const SENTINEL_SALT: u64 = 0xdead;

fn algos() -> impl Iterator<Item = BroadcastAlgo> {
    std::iter::once(BroadcastAlgo::Auto).chain(BroadcastAlgo::ALL.iter().copied())
}

/// Broadcast `T` over the shapes at `sizes` (elements); every member checks it got the root's data and that the
/// element after the broadcast is untouched.
fn run<T: FromRef>(
    sh: &Shmem,
    shapes: &[Shape],
    sizes: &[usize],
    which: impl Fn(usize) -> bool,
    salt: u64,
) -> Result<()> {
    let max = sizes.iter().max().copied().unwrap_or(0) + 1;
    let (src, dst) = (sh.malloc::<T>(max)?, sh.malloc::<T>(max)?);
    for (k, s) in shapes.iter().enumerate() {
        let Some(t) = &s.team else { continue };
        if !which(k) {
            continue;
        }
        let n = t.n_pes();
        let members = s.members();
        let mut roots = vec![0, n - 1, n / 2];
        roots.dedup();
        let algos: Vec<BroadcastAlgo> = algos().collect();
        // Every (algorithm, size), (algorithm, root) and (size, root) pair at least once (the full product at
        // XPUSHMEM_TEST_DEPTH=full); every member of the shape computes the same rows.
        let rows = cover::rows(
            &[algos.len(), sizes.len(), roots.len()],
            &[(0, 1), (0, 2), (1, 2)],
            |_| true,
        );
        for (a, &algo) in algos.iter().enumerate() {
            for row in rows.iter().filter(|r| r[0] == a) {
                let (len, root) = (sizes[row[1]], roots[row[2]]);
                let tag = salt ^ (len as u64) << 8 ^ root as u64;
                sh.put(src, &ref_vec::<T>(sh.my_pe(), max, tag), sh.my_pe())?;
                let sentinel: Vec<T> = ref_vec(sh.my_pe(), max, SENTINEL_SALT);
                sh.put(dst, &sentinel, sh.my_pe())?;
                sh.broadcast_with(t, dst, src, len, root, algo)?;
                let mut got = vec![T::default(); len + 1];
                sh.get(&mut got, dst.slice(..len + 1)?, sh.my_pe())?;
                let want = ref_vec::<T>(members[root], len, tag);
                assert!(
                    got[..len] == want[..],
                    "{} {}: {algo} len {len} root {root}: wrong data",
                    s.name,
                    T::NAME
                );
                assert_eq!(
                    got[len],
                    sentinel[len],
                    "{} {}: {algo} len {len}: wrote past nelems",
                    s.name,
                    T::NAME
                );
            }
            // In place: dest == source on every member.
            let len = sizes[sizes.len().min(3) - 1];
            sh.put(src, &ref_vec::<T>(sh.my_pe(), len, salt + 1), sh.my_pe())?;
            sh.broadcast_with(t, src, src, len, n - 1, algo)?;
            let mut got = vec![T::default(); len];
            sh.get(&mut got, src.slice(..len)?, sh.my_pe())?;
            assert!(
                got == ref_vec::<T>(members[n - 1], len, salt + 1),
                "{} in place {algo}",
                s.name
            );
        }
    }
    sh.barrier_all()?;
    sh.free(dst)?;
    sh.free(src)
}

pe_test!(
    broadcast_conformance,
    env [crate::coll_common::ENV],
    shm [1, 2, 3, 4, 8],
    fabp [2, 3, 4],
    |sh| {
    let shapes = shapes(sh)?;
    let small = [0usize, 1, 7, 1001];
    run::<u8>(sh, &shapes, &small, |_| true, 1)?;
    run::<i32>(sh, &shapes, &small, |_| true, 2)?;
    run::<f64>(sh, &shapes, &small, |_| true, 3)?;
    for (i, ty) in [
        (4u64, "i8"),
        (5, "i16"),
        (6, "i64"),
        (7, "isize"),
        (8, "u16"),
        (9, "u32"),
        (10, "u64"),
        (11, "usize"),
        (12, "f32"),
    ] {
        let world_only = |k: usize| k == 0;
        match ty {
            "i8" => run::<i8>(sh, &shapes, &[3], world_only, i)?,
            "i16" => run::<i16>(sh, &shapes, &[3], world_only, i)?,
            "i64" => run::<i64>(sh, &shapes, &[3], world_only, i)?,
            "isize" => run::<isize>(sh, &shapes, &[3], world_only, i)?,
            "u16" => run::<u16>(sh, &shapes, &[3], world_only, i)?,
            "u32" => run::<u32>(sh, &shapes, &[3], world_only, i)?,
            "u64" => run::<u64>(sh, &shapes, &[3], world_only, i)?,
            "usize" => run::<usize>(sh, &shapes, &[3], world_only, i)?,
            _ => run::<f32>(sh, &shapes, &[3], world_only, i)?,
        }
    }
    // 1 MiB on the world and on the odd-sized rows.
    let big = |k: usize| k == 0 || shapes[k].name == "rows of 3";
    run::<u8>(sh, &shapes, &[1 << 20], big, 20)?;
    run::<f64>(sh, &shapes, &[(1 << 20) / 8 + 3], big, 21)?;
    destroy(sh, shapes)
});

pe_test!(
    broadcast_pipelined_small_chunks,
    env [crate::coll_common::ENV, &[("XPUSHMEM_COLL_CHUNK_SIZE", "64")]],
    shm [3, 4],
    fabp [3, 4],
    |sh| {
        let shapes = shapes(sh)?;
        run::<u32>(sh, &shapes, &[0, 1, 15, 16, 17, 333], |_| true, 30)?;
        destroy(sh, shapes)
    }
);

pe_test!(
    broadcast_bytes_and_env_algorithm,
    env [crate::coll_common::ENV, &[("XPUSHMEM_BROADCAST_ALGORITHM", "binomial")]],
    shm [2, 3],
    fabp [2, 3],
    |sh| {
        let w = sh.team_world();
        let (src, dst) = (sh.malloc::<u8>(100)?, sh.calloc::<u8>(100)?);
        sh.put(src, &ref_vec::<u8>(sh.my_pe(), 100, 5), sh.my_pe())?;
        sh.broadcastmem(&w, dst, src, 99, 1)?;
        let mut got = vec![0u8; 100];
        sh.get(&mut got, dst, sh.my_pe())?;
        assert_eq!(&got[..99], &ref_vec::<u8>(1, 99, 5)[..]);
        assert_eq!(got[99], 0);
        sh.barrier_all()?;
        sh.free(dst)?;
        sh.free(src)
    }
);

pe_test!(
    broadcast_errors_on_every_pe,
    env [crate::coll_common::ENV],
    shm [1, 2, 3, 4],
    fabp [2, 3, 4],
    |sh| {
        let (me, n) = (sh.my_pe(), sh.n_pes());
        let w = sh.team_world();
        let (src, dst) = (sh.malloc::<i64>(10)?, sh.malloc::<i64>(10)?);
        let fail = |r: Result<()>, what: &str| match r {
            Err(e) => eprintln!("PE {me}: {what}: {e}"),
            Ok(()) => panic!("{what}: succeeded on PE {me}"),
        };
        fail(sh.broadcast(&w, dst, src, 4, n), "root out of range");
        fail(sh.broadcast(&w, dst, src, 11, 0), "nelems beyond dest");
        fail(
            sh.broadcast(&w, dst.slice(1..)?, dst, 5, 0),
            "overlapping dest and source",
        );
        if n > 1 {
            // One PE's dest too small: every PE fails.
            let d = if me == n - 1 { dst.slice(..2)? } else { dst };
            fail(sh.broadcast(&w, d, src, 4, 0), "dest too small on one PE");
            // Different nelems: a mismatch on every PE.
            let r = sh.broadcast(&w, dst, src, if me == 0 { 3 } else { 4 }, 0);
            assert!(
                matches!(r, Err(Error::Mismatch { .. })),
                "nelems mismatch: {r:?}"
            );
            let r = sh.broadcast(&w, dst, src, 4, if me == 0 { 1 } else { 0 });
            assert!(
                matches!(r, Err(Error::Mismatch { .. })),
                "root mismatch: {r:?}"
            );
            let algo = if me == 0 {
                BroadcastAlgo::Linear
            } else {
                BroadcastAlgo::Binomial
            };
            let r = sh.broadcast_with(&w, dst, src, 4, 0, algo);
            assert!(
                matches!(r, Err(Error::Mismatch { .. })),
                "algorithm mismatch: {r:?}"
            );
            // Up to 88 bytes (two cache lines a message) `Agreement` rides in the agreement's messages where the
            // agreement is the dissemination or all-pairs (`Shmem::team_barrier_algorithm`), and `Auto` takes it
            // there; above, or over another pattern, both are `Auto` without it. So PE 0's `Agreement` meets the
            // others' `Auto` in one call at every size: in the first line, filling both, and one element more.
            let carries = matches!(
                sh.team_barrier_algorithm(&w)?,
                xpushmem::BarrierAlgo::Dissemination | xpushmem::BarrierAlgo::AllPairs
            );
            let (a, b) = (sh.malloc::<i64>(12)?, sh.calloc::<i64>(13)?);
            sh.put(a, &ref_vec::<i64>(me, 12, 0), me)?;
            for nelems in [3, 11, 12] {
                sh.put(b, &[0i64; 13], me)?;
                let algo = if me == 0 {
                    BroadcastAlgo::Agreement
                } else {
                    BroadcastAlgo::Auto
                };
                sh.broadcast_with(&w, b, a, nelems, n - 1, algo)?;
                let mut got = vec![0i64; nelems + 1];
                sh.get(&mut got, b.slice(..nelems + 1)?, me)?;
                let want = ref_vec::<i64>(n - 1, nelems, 0);
                assert_eq!(got[..nelems], want[..], "PE {me}: {nelems} elements");
                assert_eq!(got[nelems], 0, "PE {me}: {nelems} elements: wrote past nelems");
            }
            // Where the data rides, an explicit other algorithm is another choice: a mismatch.
            if carries {
                let algo = if me == 0 {
                    BroadcastAlgo::Agreement
                } else {
                    BroadcastAlgo::Eager
                };
                let r = sh.broadcast_with(&w, b, a, 11, 0, algo);
                assert!(
                    matches!(&r, Err(Error::Mismatch { .. })),
                    "agreement vs eager, 11 elements: {r:?}"
                );
            }
            sh.free(b)?;
            sh.free(a)?;
        }
        // The team still works.
        sh.broadcast(&w, dst, src, 10, 0)?;
        sh.barrier_all()?;
        sh.free(dst)?;
        sh.free(src)
    }
);
