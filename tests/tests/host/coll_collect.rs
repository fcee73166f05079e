//! fcollect and collect (variable sizes) over every team shape and algorithm, sizes 0, 1, odd and 1 MiB, against
//! the concatenation of every member's reference block; errors on every PE.

use crate::coll_common::{destroy, shapes, Shape};
use xpushmem::{CollectAlgo, Error, Result, Shmem};
use xpushmem_tests::pe_test;
use xpushmem_tests::{ref_vec, FromRef};

fn algos() -> impl Iterator<Item = CollectAlgo> {
    std::iter::once(CollectAlgo::Auto).chain(CollectAlgo::ALL.iter().copied())
}

/// fcollect of `len` elements per member, and collect where member `i` gives `len + i % 3` (some give 0 when
/// `len` is 0).
fn run<T: FromRef>(
    sh: &Shmem,
    shapes: &[Shape],
    sizes: &[usize],
    which: impl Fn(usize) -> bool,
    salt: u64,
) -> Result<()> {
    let n = sh.n_pes();
    let max = sizes.iter().max().copied().unwrap_or(0) + 2;
    let (src, dst) = (sh.malloc::<T>(max)?, sh.malloc::<T>(n * max + 1)?);
    let me = sh.my_pe();
    for (k, s) in shapes.iter().enumerate() {
        let Some(t) = &s.team else { continue };
        if !which(k) {
            continue;
        }
        let members = s.members();
        for algo in algos() {
            for &len in sizes {
                for variable in [false, true] {
                    let count = |i: usize| if variable { len + i % 3 } else { len };
                    let tag = salt ^ (len as u64) << 4 ^ variable as u64;
                    let mine = count(t.my_pe());
                    sh.put(src.slice(..mine)?, &ref_vec::<T>(me, mine, tag), me)?;
                    let total: usize = (0..t.n_pes()).map(count).sum();
                    let marker = T::from_ref(99);
                    sh.p(dst.at(total)?, marker, me)?;
                    if variable {
                        sh.collect_with(t, dst, src, mine, algo)?;
                    } else {
                        sh.fcollect_with(t, dst, src, len, algo)?;
                    }
                    let mut got = vec![T::default(); total + 1];
                    sh.get(&mut got, dst.slice(..total + 1)?, me)?;
                    // Block by block (a `flat_map` collect grows the vector element by element).
                    let mut want: Vec<T> = Vec::with_capacity(total);
                    for (i, &p) in members.iter().enumerate() {
                        want.extend_from_slice(&ref_vec::<T>(p, count(i), tag));
                    }
                    let what = if variable { "collect" } else { "fcollect" };
                    assert!(
                        got[..total] == want[..],
                        "{} {} {what} {algo} len {len}",
                        s.name,
                        T::NAME
                    );
                    assert_eq!(
                        got[total], marker,
                        "{} {what}: wrote past the total",
                        s.name
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
    collect_conformance,
    env [crate::coll_common::ENV],
    shm [1, 2, 3, 4, 8],
    fabp [2, 3, 4],
    |sh| {
    let shapes = shapes(sh)?;
    run::<u8>(sh, &shapes, &[0, 1, 7, 1001], |_| true, 1)?;
    run::<f64>(sh, &shapes, &[0, 1, 7, 1001], |_| true, 2)?;
    run::<i16>(sh, &shapes, &[3], |k| k == 0, 3)?;
    run::<u32>(sh, &shapes, &[3], |k| k == 0, 4)?;
    run::<i64>(sh, &shapes, &[3], |k| k == 0, 5)?;
    run::<f32>(sh, &shapes, &[3], |k| k == 0, 6)?;
    let big = |k: usize| k == 0 || shapes[k].name == "rows of 3";
    run::<u8>(sh, &shapes, &[1 << 20], big, 7)?;
    destroy(sh, shapes)
});

pe_test!(
    collect_errors_on_every_pe,
    env [crate::coll_common::ENV],
    shm [1, 2, 3, 4],
    fabp [2, 3, 4],
    |sh| {
        let (me, n) = (sh.my_pe(), sh.n_pes());
        let w = sh.team_world();
        let (src, dst) = (sh.malloc::<u16>(8)?, sh.malloc::<u16>(8 * n)?);
        let fail = |r: Result<()>, what: &str| match r {
            Err(e) => eprintln!("PE {me}: {what}: {e}"),
            Ok(()) => panic!("{what}: succeeded on PE {me}"),
        };
        fail(sh.fcollect(&w, dst, src, 9), "nelems beyond the source");
        fail(sh.fcollect(&w, dst.slice(1..)?, src, 8), "dest too small");
        fail(sh.fcollect(&w, dst, dst, 1), "dest overlaps source");
        // collect: the total (8 per PE + 1 on the last) exceeds every dest.
        fail(
            sh.collect(&w, dst, src, if me == n - 1 { 9 } else { 8 }),
            "collect source too small on one PE",
        );
        fail(
            sh.collect(&w, dst.slice(..8 * n - 1)?, src, 8),
            "collect dest too small",
        );
        if n > 1 {
            let r = sh.fcollect(&w, dst, src, if me == 0 { 2 } else { 3 });
            assert!(
                matches!(r, Err(Error::Mismatch { .. })),
                "fcollect size mismatch: {r:?}"
            );
            // One PE's dest too small for what the others send.
            let d = if me == 1 { dst.slice(..3)? } else { dst };
            let r = sh.collect(&w, d, src, 2);
            assert!(
                matches!(r, Err(Error::OutOfBounds { .. })),
                "collect small dest on one PE: {r:?}"
            );
        }
        sh.fcollect(&w, dst, src, 8)?;
        sh.collect(&w, dst, src, 8)?;
        sh.barrier_all()?;
        sh.free(dst)?;
        sh.free(src)
    }
);

pe_test!(
    collect_without_argument_checks,
    env [crate::coll_common::ENV, &[("XPUSHMEM_CHECK_SYMMETRY", "0")]],
    shm [3, 4],
    fabp [3, 4],
    |sh| {
        let shapes = shapes(sh)?;
        run::<i32>(sh, &shapes, &[0, 1, 7], |_| true, 50)?;
        destroy(sh, shapes)
    }
);
