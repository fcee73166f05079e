//! inscan and exscan over every team shape, algorithm and operator, sizes 0, 1, odd and 1 MiB, in place too,
//! against a left fold of the members' reference inputs (same order, so float results are bit-exact).

use crate::coll_common::{destroy, fold, shapes, Shape};
use xpushmem::{Error, ReduceOp, Reducible, Result, ScanAlgo, Shmem};
use xpushmem_tests::pe_test;
use xpushmem_tests::{ref_vec, FromRef};

fn algos() -> impl Iterator<Item = ScanAlgo> {
    std::iter::once(ScanAlgo::Auto).chain(ScanAlgo::ALL.iter().copied())
}

fn run<T: Reducible + FromRef>(
    sh: &Shmem,
    shapes: &[Shape],
    ops: &[ReduceOp],
    sizes: &[usize],
    which: impl Fn(usize) -> bool,
    salt: u64,
) -> Result<()> {
    let me = sh.my_pe();
    let max = sizes.iter().max().copied().unwrap_or(0) + 1;
    let (src, dst) = (sh.malloc::<T>(max)?, sh.malloc::<T>(max)?);
    for (k, s) in shapes.iter().enumerate() {
        let Some(t) = &s.team else { continue };
        if !which(k) {
            continue;
        }
        let members = s.members();
        let ti = t.my_pe();
        for algo in algos() {
            for &len in sizes {
                for &op in ops {
                    for inclusive in [true, false] {
                        let tag = salt ^ (len as u64) << 8 ^ op as u64;
                        let mine = ref_vec::<T>(me, len, tag);
                        let upto = if inclusive { ti + 1 } else { ti };
                        let want = if upto == 0 {
                            vec![T::identity(op); len]
                        } else {
                            fold(
                                op,
                                &members[..upto]
                                    .iter()
                                    .map(|&p| ref_vec::<T>(p, len, tag))
                                    .collect::<Vec<_>>(),
                            )
                        };
                        for in_place in [false, true] {
                            sh.put(src.slice(..len)?, &mine, me)?;
                            let d = if in_place { src } else { dst };
                            sh.scan_with(t, op, d, src, len, algo, inclusive)?;
                            let mut got = vec![T::default(); len];
                            sh.get(&mut got, d.slice(..len)?, me)?;
                            let what = if inclusive { "inscan" } else { "exscan" };
                            assert!(
                                got == want,
                                "{} {} {what} {op:?} {algo} len {len} in place {in_place}",
                                s.name,
                                T::NAME
                            );
                        }
                    }
                }
            }
        }
    }
    sh.barrier_all()?;
    sh.free(dst)?;
    sh.free(src)
}

pe_test!(
    scan_conformance,
    env [crate::coll_common::ENV],
    shm [1, 2, 3, 4, 8],
    fabp [2, 3, 4],
    |sh| {
    let shapes = shapes(sh)?;
    let all_int = [
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Min,
        ReduceOp::Max,
        ReduceOp::And,
        ReduceOp::Or,
        ReduceOp::Xor,
    ];
    run::<i32>(sh, &shapes, &all_int, &[0, 1, 9], |k| k == 0, 1)?;
    run::<f64>(
        sh,
        &shapes,
        &[ReduceOp::Sum, ReduceOp::Max],
        &[0, 1, 9, 501],
        |_| true,
        2,
    )?;
    run::<u64>(
        sh,
        &shapes,
        &[ReduceOp::Sum, ReduceOp::Xor],
        &[7, 501],
        |_| true,
        3,
    )?;
    run::<f32>(sh, &shapes, &[ReduceOp::Sum], &[3], |k| k == 0, 4)?;
    run::<u8>(sh, &shapes, &[ReduceOp::Sum], &[1 << 20], |k| k == 0, 5)?;
    destroy(sh, shapes)
});

pe_test!(
    sum_scan_forms_and_errors,
    env [crate::coll_common::ENV],
    shm [1, 3],
    fabp [3],
    |sh| {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let w = sh.team_world();
    let (x, y) = (sh.malloc::<i64>(2)?, sh.malloc::<i64>(2)?);
    sh.put(x, &[me as i64 + 1, 10], me)?;
    sh.sum_inscan(&w, y, x, 2)?;
    let mut g = [0i64; 2];
    sh.get(&mut g, y, me)?;
    assert_eq!(g, [((me + 1) * (me + 2) / 2) as i64, 10 * (me as i64 + 1)]);
    sh.sum_exscan(&w, y, x, 2)?;
    sh.get(&mut g, y, me)?;
    assert_eq!(g, [(me * (me + 1) / 2) as i64, 10 * me as i64]);
    let e = sh.inscan(&w, ReduceOp::Sum, y, x, 3).unwrap_err();
    assert!(
        matches!(
            e,
            Error::OutOfBounds {
                what: "dest",
                len: 3,
                limit: 2,
                ..
            }
        ),
        "{e}"
    );
    let z = sh.malloc::<i64>(4)?;
    assert!(
        matches!(
            sh.inscan(&w, ReduceOp::Sum, z.slice(1..)?, z, 2),
            Err(Error::InvalidArgument { name: "dest", .. })
        ),
        "partial overlap"
    );
    let f = sh.malloc::<f32>(1)?;
    assert!(
        matches!(
            sh.exscan(&w, ReduceOp::And, f, f, 1),
            Err(Error::InvalidArgument { name: "op", ref value, .. }) if value == "and"
        ),
        "bitwise scan on floats"
    );
    if n > 1 {
        assert!(
            matches!(
                sh.inscan(&w, ReduceOp::Sum, y, x, if me == 0 { 1 } else { 2 }),
                Err(Error::Mismatch { call: "inscan", .. })
            ),
            "size mismatch"
        );
    }
    sh.barrier_all()?;
    sh.free(f)?;
    sh.free(z)?;
    sh.free(y)?;
    sh.free(x)
});
