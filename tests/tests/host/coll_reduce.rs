//! Reductions (and/or/xor/min/max/sum/prod) for every type they apply to, every algorithm, every team shape and
//! sizes 0, 1, odd and 1 MiB, in place too, and reduce_scatter — against a left fold of every member's
//! reference input computed locally. Inputs are chosen so that every order of evaluation gives the same bits
//! (float sums of half-integers, float products of ±2^k), so results are compared exactly.

use crate::coll_common::{destroy, fold, shapes, Shape};
use xpushmem::{Error, ReduceAlgo, ReduceOp, ReduceScatterAlgo, Reducible, Result, Shmem};
use xpushmem_tests::pe_test;
use xpushmem_tests::{cover, reference, FromRef};

/// Element `i` of member `pe`'s input for `op`.
fn input<T: Reducible + FromRef>(op: ReduceOp, pe: usize, len: usize, salt: u64) -> Vec<T> {
    (0..len)
        .map(|i| {
            let r = reference(pe, i, salt);
            if op == ReduceOp::Prod && !T::INTEGER {
                // ±1, ±2, ±0.5 through FromRef's affine maps.
                let k = (r % 6) as usize;
                let bits: [u64; 6] = if T::NAME == "float" {
                    [2002, 1998, 2004, 1996, 2001, 1999]
                } else {
                    [32, 24, 36, 20, 30, 26]
                };
                T::from_ref(bits[k])
            } else {
                T::from_ref(r)
            }
        })
        .collect()
}

fn ops<T: Reducible>() -> Vec<ReduceOp> {
    ReduceOp::ALL
        .iter()
        .copied()
        .filter(|o| T::INTEGER || !o.is_bitwise())
        .collect()
}

fn algos() -> impl Iterator<Item = ReduceAlgo> {
    std::iter::once(ReduceAlgo::Auto).chain(ReduceAlgo::ALL.iter().copied())
}

/// Index of `op` in `ReduceOp::ALL` (a dimension of the covering sets).
fn op_index(op: ReduceOp) -> usize {
    ReduceOp::ALL.iter().position(|&o| o == op).expect("in ALL")
}

/// All-reduce `T` with `ops` at `sizes` over `shapes`, each combination that `keep(shape index, algorithm index,
/// size index, op)` accepts; out of place and in place.
fn run<T: Reducible + FromRef>(
    sh: &Shmem,
    shapes: &[Shape],
    ops: &[ReduceOp],
    sizes: &[usize],
    keep: impl Fn(usize, usize, usize, ReduceOp) -> bool,
    salt: u64,
) -> Result<()> {
    let max = sizes.iter().max().copied().unwrap_or(0) + 1;
    let (src, dst) = (sh.malloc::<T>(max)?, sh.malloc::<T>(max)?);
    let me = sh.my_pe();
    for (k, s) in shapes.iter().enumerate() {
        let Some(t) = &s.team else { continue };
        let members = s.members();
        for (ai, algo) in algos().enumerate() {
            for (li, &len) in sizes.iter().enumerate() {
                for &op in ops {
                    if !keep(k, ai, li, op) {
                        continue;
                    }
                    let tag = salt ^ (len as u64) << 16 ^ op as u64;
                    let mine = input::<T>(op, me, len, tag);
                    let want = fold(
                        op,
                        &members
                            .iter()
                            .map(|&p| input::<T>(op, p, len, tag))
                            .collect::<Vec<_>>(),
                    );
                    let marker = T::from_ref(77);
                    sh.put(src.slice(..len)?, &mine, me)?;
                    sh.p(dst.at(len)?, marker, me)?;
                    sh.reduce_with(t, op, dst, src, len, algo)?;
                    let mut got = vec![T::default(); len + 1];
                    sh.get(&mut got, dst.slice(..len + 1)?, me)?;
                    if got[..len] != want[..] {
                        let bad = (0..len).find(|&i| got[i] != want[i]).unwrap_or(0);
                        panic!(
                            "{} {} {op:?} {algo} len {len}: element {bad} is {:?}, want {:?}",
                            s.name,
                            T::NAME,
                            got[bad],
                            want[bad]
                        );
                    }
                    assert_eq!(
                        got[len],
                        marker,
                        "{} {} {op:?} {algo} len {len}: wrote past nreduce",
                        s.name,
                        T::NAME
                    );
                    let mut back = vec![T::default(); len];
                    sh.get(&mut back, src.slice(..len)?, me)?;
                    assert!(back == mine, "{} {}: source modified", s.name, T::NAME);
                    // In place.
                    sh.reduce_with(t, op, src, src, len, algo)?;
                    sh.get(&mut back, src.slice(..len)?, me)?;
                    assert!(
                        back == want,
                        "{} {} {op:?} {algo} len {len}: in place",
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

/// Every reducible type, in the order of the type dimension of the covering sets (the first 10 are integers);
/// `$keep(type index)` gives each type's `keep` for `run`.
macro_rules! every_type {
    ($sh:expr, $shapes:expr, $sizes:expr, $keep:expr) => {{
        run::<i8>($sh, $shapes, &ops::<i8>(), $sizes, $keep(0), 1)?;
        run::<i16>($sh, $shapes, &ops::<i16>(), $sizes, $keep(1), 2)?;
        run::<i32>($sh, $shapes, &ops::<i32>(), $sizes, $keep(2), 3)?;
        run::<i64>($sh, $shapes, &ops::<i64>(), $sizes, $keep(3), 4)?;
        run::<isize>($sh, $shapes, &ops::<isize>(), $sizes, $keep(4), 5)?;
        run::<u8>($sh, $shapes, &ops::<u8>(), $sizes, $keep(5), 6)?;
        run::<u16>($sh, $shapes, &ops::<u16>(), $sizes, $keep(6), 7)?;
        run::<u32>($sh, $shapes, &ops::<u32>(), $sizes, $keep(7), 8)?;
        run::<u64>($sh, $shapes, &ops::<u64>(), $sizes, $keep(8), 9)?;
        run::<usize>($sh, $shapes, &ops::<usize>(), $sizes, $keep(9), 10)?;
        run::<f32>($sh, $shapes, &ops::<f32>(), $sizes, $keep(10), 11)?;
        run::<f64>($sh, $shapes, &ops::<f64>(), $sizes, $keep(11), 12)?;
    }};
}
/// How many types `every_type!` runs, and how many of them (the first) are integers.
const TYPES: usize = 12;
const INTEGER_TYPES: usize = 10;

pe_test!(
    reduce_every_type_and_op_on_the_world,
    env [crate::coll_common::ENV],
    shm [1, 2, 3, 4, 8],
    fabp [2, 3, 4],
    |sh| {
    let shapes = shapes(sh)?;
    let sizes = [1usize, 7];
    // type x op x algorithm x size on the world: a covering set of the (type, op) and (algorithm, size) pairs
    // (XPUSHMEM_TEST_DEPTH=full: all of it). Bitwise ops only on integers.
    let rows = cover::rows(
        &[TYPES, ReduceOp::ALL.len(), algos().count(), sizes.len()],
        &[(0, 1), (2, 3)],
        |r| r[0] < INTEGER_TYPES || !ReduceOp::ALL[r[1]].is_bitwise(),
    );
    let keep = |ti: usize| {
        let rows = &rows;
        move |k: usize, ai: usize, li: usize, op: ReduceOp| {
            k == 0 && rows.contains(&vec![ti, op_index(op), ai, li])
        }
    };
    every_type!(sh, &shapes, &sizes, keep);
    destroy(sh, shapes)
});

// A team keeps the algorithm chosen for a reduction for the next call of the same size only (`Ctx::choose`): small
// reductions (carried in the exchange's messages) between large ones (far beyond any message) on one team, each
// result checked against the fold of every member's input. Fails if a kept choice ignores the size.
pe_test!(
    reductions_of_alternating_sizes_each_choose_their_algorithm,
    env [crate::coll_common::ENV],
    shm [2, 3],
    |sh| {
    let (me, n, w) = (sh.my_pe(), sh.n_pes(), sh.team_world());
    let big = 1usize << 18;
    let (src, dst) = (sh.malloc::<i64>(big)?, sh.malloc::<i64>(big)?);
    for (k, len) in [1usize, big, 1, 9, big / 2, 9].into_iter().enumerate() {
        let inputs: Vec<Vec<i64>> = (0..n)
            .map(|p| input::<i64>(ReduceOp::Sum, p, len, k as u64))
            .collect();
        let want = fold(ReduceOp::Sum, &inputs);
        sh.put(src.slice(..len)?, &inputs[me], me)?;
        sh.reduce(&w, ReduceOp::Sum, dst, src, len)?;
        let mut got = vec![0i64; len];
        sh.get(&mut got, dst.slice(..len)?, me)?;
        assert!(got == want, "PE {me}: call {k} of {len} elements");
    }
    sh.barrier_all()?;
    sh.free(dst)?;
    sh.free(src)
});

pe_test!(
    reduce_every_shape_and_size,
    env [crate::coll_common::ENV],
    shm [1, 2, 3, 4, 8],
    fabp [2, 3, 4],
    |sh| {
    let shapes = shapes(sh)?;
    let sizes = [0usize, 1, 9, 1001];
    // shape x algorithm x size x op, per type: a covering set in which every algorithm meets every shape and
    // every size, every shape every size, and every op every size (XPUSHMEM_TEST_DEPTH=full: all of it).
    let int_ops = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Xor];
    let float_ops = [ReduceOp::Sum, ReduceOp::Min, ReduceOp::Prod];
    let keep = |ops: [ReduceOp; 3]| {
        let rows = cover::rows(
            &[shapes.len(), algos().count(), sizes.len(), ops.len()],
            &[(0, 1), (1, 2), (0, 2), (2, 3)],
            |_| true,
        );
        move |k: usize, ai: usize, li: usize, op: ReduceOp| {
            let oi = ops.iter().position(|&o| o == op).expect("one of ops");
            rows.contains(&vec![k, ai, li, oi])
        }
    };
    run::<i32>(sh, &shapes, &int_ops, &sizes, keep(int_ops), 20)?;
    run::<f64>(sh, &shapes, &float_ops, &sizes, keep(float_ops), 21)?;
    // 1 MiB on the world and the rows of 3, every algorithm.
    let big = |k: usize, _: usize, _: usize, _: ReduceOp| k == 0 || shapes[k].name == "rows of 3";
    run::<u8>(sh, &shapes, &[ReduceOp::Sum], &[1 << 20], big, 22)?;
    run::<f32>(sh, &shapes, &[ReduceOp::Sum], &[(1 << 18) + 5], big, 23)?;
    destroy(sh, shapes)
});

pe_test!(
    typed_reduce_forms,
    env [crate::coll_common::ENV],
    shm [1, 3],
    fabp [3],
    |sh| {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let w = sh.team_world();
    let x = sh.malloc::<u32>(2)?;
    let y = sh.malloc::<u32>(2)?;
    let v = [1u32 << me, me as u32 + 10];
    let check = |r: Result<()>, want: [u32; 2]| -> Result<()> {
        r?;
        let mut g = [0u32; 2];
        sh.get(&mut g, y, me)?;
        assert_eq!(g, want);
        Ok(())
    };
    sh.put(x, &v, me)?;
    let all = (1u32 << n) - 1;
    let sum: u32 = (0..n as u32).map(|p| p + 10).sum();
    let prod: u32 = (0..n as u32).map(|p| p + 10).product();
    let xor = (0..n as u32).map(|p| p + 10).fold(0, |a, b| a ^ b);
    check(
        sh.or_reduce(&w, y, x, 2),
        [all, (0..n as u32).map(|p| p + 10).fold(0, |a, b| a | b)],
    )?;
    check(
        sh.and_reduce(&w, y, x, 2),
        [
            if n == 1 { 1 } else { 0 },
            (0..n as u32).map(|p| p + 10).fold(!0, |a, b| a & b),
        ],
    )?;
    check(sh.xor_reduce(&w, y, x, 2), [all, xor])?;
    check(sh.sum_reduce(&w, y, x, 2), [all, sum])?;
    check(sh.prod_reduce(&w, y, x, 2), [1 << (n * (n - 1) / 2), prod])?;
    check(sh.min_reduce(&w, y, x, 2), [1, 10])?;
    check(sh.max_reduce(&w, y, x, 2), [1 << (n - 1), n as u32 + 9])?;
    sh.barrier_all()?;
    sh.free(y)?;
    sh.free(x)
});

pe_test!(
    reduce_scatter_conformance,
    env [crate::coll_common::ENV],
    shm [1, 2, 3, 4, 8],
    fabp [2, 3, 4],
    |sh| {
    let shapes = shapes(sh)?;
    let me = sh.my_pe();
    let n = sh.n_pes();
    let sizes = [0usize, 1, 7, 1000];
    let max = n * 1000 + 1;
    let (src, dst) = (sh.malloc::<i64>(max)?, sh.malloc::<i64>(1001)?);
    for s in &shapes {
        let Some(t) = &s.team else { continue };
        let members = s.members();
        let tn = t.n_pes();
        for algo in
            std::iter::once(ReduceScatterAlgo::Auto).chain(ReduceScatterAlgo::ALL.iter().copied())
        {
            for &len in &sizes {
                for op in [ReduceOp::Sum, ReduceOp::Min, ReduceOp::Or] {
                    let tag = (len as u64) << 8 ^ op as u64;
                    sh.put(
                        src.slice(..tn * len)?,
                        &input::<i64>(op, me, tn * len, tag),
                        me,
                    )?;
                    sh.reduce_scatter_with(t, op, dst, src, len, algo)?;
                    let mut got = vec![0i64; len];
                    sh.get(&mut got, dst.slice(..len)?, me)?;
                    let block = t.my_pe() * len..(t.my_pe() + 1) * len;
                    let want = fold(
                        op,
                        &members
                            .iter()
                            .map(|&p| input::<i64>(op, p, tn * len, tag)[block.clone()].to_vec())
                            .collect::<Vec<_>>(),
                    );
                    assert_eq!(
                        got, want,
                        "{} reduce_scatter {op:?} {algo} len {len}",
                        s.name
                    );
                }
            }
        }
    }
    sh.barrier_all()?;
    sh.free(dst)?;
    sh.free(src)?;
    destroy(sh, shapes)
});

pe_test!(
    reduce_errors_on_every_pe,
    env [crate::coll_common::ENV],
    shm [1, 2, 3, 4],
    fabp [2, 3, 4],
    |sh| {
        let (me, n) = (sh.my_pe(), sh.n_pes());
        let w = sh.team_world();
        let (x, y) = (sh.malloc::<f32>(8)?, sh.malloc::<f32>(8)?);
        let fail = |r: Result<()>, what: &str| match r {
            Err(e) => eprintln!("PE {me}: {what}: {e}"),
            Ok(()) => panic!("{what}: succeeded on PE {me}"),
        };
        fail(
            sh.reduce(&w, ReduceOp::Xor, y, x, 4),
            "bitwise op on floats",
        );
        fail(
            sh.reduce(&w, ReduceOp::Sum, y, x, 9),
            "nreduce beyond the buffers",
        );
        fail(
            sh.reduce(&w, ReduceOp::Sum, x.slice(1..)?, x, 4),
            "partial overlap",
        );
        fail(
            sh.reduce_scatter(&w, ReduceOp::Sum, y, x, 9),
            "reduce_scatter source too small",
        );
        if n > 1 {
            let r = sh.reduce(
                &w,
                if me == 1 {
                    ReduceOp::Max
                } else {
                    ReduceOp::Sum
                },
                y,
                x,
                4,
            );
            assert!(
                matches!(r, Err(Error::Mismatch { .. })),
                "op mismatch: {r:?}"
            );
            let r = sh.reduce(&w, ReduceOp::Sum, y, x, if me == 1 { 3 } else { 4 });
            assert!(
                matches!(r, Err(Error::Mismatch { .. })),
                "size mismatch: {r:?}"
            );
            let r = sh.reduce_with(
                &w,
                ReduceOp::Sum,
                y,
                x,
                4,
                if me == 1 {
                    ReduceAlgo::Ring
                } else {
                    ReduceAlgo::Linear
                },
            );
            assert!(
                matches!(r, Err(Error::Mismatch { .. })),
                "algorithm mismatch: {r:?}"
            );
        }
        sh.sum_reduce(&w, y, x, 8)?;
        sh.barrier_all()?;
        sh.free(y)?;
        sh.free(x)
    }
);

pe_test!(
    reduce_algorithm_from_env,
    env [crate::coll_common::ENV, &[("XPUSHMEM_REDUCE_ALGORITHM", "ring")]],
    shm [3, 4],
    fabp [3, 4],
    |sh| {
        let shapes = shapes(sh)?;
        let world = |k: usize, _: usize, _: usize, _: ReduceOp| k == 0;
        run::<i64>(sh, &shapes, &[ReduceOp::Sum], &[0, 5, 33], world, 40)?;
        destroy(sh, shapes)
    }
);

pe_test!(
    unknown_reduce_algorithm_fails_on_every_pe,
    env [crate::coll_common::ENV, &[("XPUSHMEM_REDUCE_ALGORITHM", "fastest")]],
    shm [2, 3],
    fabp [2, 3],
    |sh| {
        let w = sh.team_world();
        let x = sh.calloc::<u32>(4)?;
        match sh.sum_reduce(&w, x, x, 4) {
            Err(Error::Config { var, .. }) => assert_eq!(var, "XPUSHMEM_REDUCE_ALGORITHM"),
            r => panic!("expected a configuration error, got {r:?}"),
        }
        // An explicit algorithm does not consult the variable.
        sh.reduce_with(&w, ReduceOp::Sum, x, x, 4, ReduceAlgo::RecursiveDoubling)?;
        sh.barrier_all()?;
        sh.free(x)
    }
);

pe_test!(
    reduce_without_argument_checks,
    env [crate::coll_common::ENV, &[("XPUSHMEM_CHECK_SYMMETRY", "0")]],
    shm [3, 4],
    fabp [3, 4],
    |sh| {
        let shapes = shapes(sh)?;
        run::<f64>(
            sh,
            &shapes,
            &[ReduceOp::Sum, ReduceOp::Max],
            &[0, 1, 77],
            |_, _, _, _| true,
            50,
        )?;
        destroy(sh, shapes)
    }
);
