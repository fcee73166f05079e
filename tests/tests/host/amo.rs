//! Atomics on 32- and 64-bit integers (and the extended fetch/set/swap/compare_swap on floats), contended by every
//! PE at once; results are checked against sums, sets and counts computed independently.

use std::collections::BTreeSet;
use xpushmem::{AtomicInt, Result, Shmem};
use xpushmem_tests::pe_test;

/// Ints that can hold the test's small counts.
trait Small: AtomicInt + TryFrom<u64> + Into<i128> {
    fn of(v: u64) -> Self {
        Self::try_from(v).ok().expect("small value")
    }
}
impl Small for i32 {}
impl Small for u32 {}
impl Small for i64 {}
impl Small for u64 {}

const ROUNDS: u64 = 50;

fn contended<T: Small>(sh: &Shmem) -> Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let words = sh.calloc::<T>(6)?;
    let [cnt, add, bits, cas, swp, xr] = [0, 1, 2, 3, 4, 5].map(|i| words.at(i).expect("in range"));
    let target = n - 1; // everyone hammers the last PE
    let mut tickets = Vec::new();
    for _ in 0..ROUNDS {
        tickets.push(sh.atomic_fetch_inc(cnt, target)?);
        sh.atomic_add(add, T::of(me as u64 + 1), target)?;
        let _ = sh.atomic_fetch_add(add, T::of(1), target)?;
        sh.atomic_inc(cnt, target)?;
    }
    // or: each PE sets its own bit (at most 31 PEs fit in the low bits of every type).
    let old = sh.atomic_fetch_or(bits, T::of(1 << me), target)?;
    let _ = old;
    // compare_swap: only one PE wins the race from 0.
    let won = sh.atomic_compare_swap(cas, T::of(0), T::of(me as u64 + 1), target)? == T::of(0);
    // swap: every PE swaps its id in; the set of returned values plus the final value is {0} ∪ ids.
    let prev = sh.atomic_swap(swp, T::of(me as u64 + 1), target)?;
    // xor twice cancels.
    sh.atomic_xor(xr, T::of(0x5a5a), target)?;
    let _ = sh.atomic_fetch_xor(xr, T::of(0x5a5a), target)?;
    sh.barrier_all()?;

    // Collect per-PE results on every PE through a symmetric array (one slot per PE per quantity).
    let wins = sh.calloc::<u64>(n)?;
    let prevs = sh.calloc::<u64>(n)?;
    let tix = sh.calloc::<u64>(n * ROUNDS as usize)?;
    let to_u64 = |v: T| -> u64 { u64::try_from(v.into()).expect("non-negative") };
    for pe in 0..n {
        sh.p(wins.at(me)?, won as u64, pe)?;
        sh.p(prevs.at(me)?, to_u64(prev), pe)?;
        let mine: Vec<u64> = tickets.iter().map(|&t| to_u64(t)).collect();
        sh.put(
            tix.slice(me * ROUNDS as usize..(me + 1) * ROUNDS as usize)?,
            &mine,
            pe,
        )?;
    }
    sh.barrier_all()?;
    let n64 = n as u64;
    assert_eq!(
        to_u64(sh.atomic_fetch(cnt, target)?),
        2 * ROUNDS * n64,
        "{} counter",
        std::any::type_name::<T>()
    );
    assert_eq!(
        to_u64(sh.atomic_fetch(add, target)?),
        ROUNDS * (n64 * (n64 + 1) / 2 + n64),
        "sum of adds"
    );
    assert_eq!(
        to_u64(sh.atomic_fetch(bits, target)?),
        (1u64 << n) - 1,
        "or of bits"
    );
    assert_eq!(to_u64(sh.atomic_fetch(xr, target)?), 0, "xor twice");
    let mut w = vec![0u64; n];
    sh.get(&mut w, wins, me)?;
    assert_eq!(w.iter().sum::<u64>(), 1, "exactly one compare_swap winner");
    let winner = w.iter().position(|&x| x == 1).expect("a winner");
    assert_eq!(to_u64(sh.atomic_fetch(cas, target)?), winner as u64 + 1);
    let mut p = vec![0u64; n];
    sh.get(&mut p, prevs, me)?;
    let mut seen: BTreeSet<u64> = p.iter().copied().collect();
    seen.insert(to_u64(sh.atomic_fetch(swp, target)?));
    assert_eq!(seen, (0..=n64).collect::<BTreeSet<u64>>(), "swap chain");
    // fetch_inc tickets were interleaved with inc: all distinct, all < 2*ROUNDS*n.
    let mut t = vec![0u64; n * ROUNDS as usize];
    sh.get(&mut t, tix, me)?;
    let distinct: BTreeSet<u64> = t.iter().copied().collect();
    assert_eq!(distinct.len(), t.len(), "fetch_inc tickets are unique");
    assert!(t.iter().all(|&x| x < 2 * ROUNDS * n64));
    // and: clear every bit but the lowest, from each PE in turn.
    sh.barrier_all()?;
    if me == 0 {
        sh.atomic_and(bits, T::of(1), target)?;
        assert_eq!(to_u64(sh.atomic_fetch_and(bits, T::of(0), target)?), 1);
        sh.atomic_set(bits, T::of(77), target)?;
        assert_eq!(to_u64(sh.atomic_fetch(bits, target)?), 77);
    }
    sh.barrier_all()?;
    sh.free(tix)?;
    sh.free(prevs)?;
    sh.free(wins)?;
    sh.free(words)
}

pe_test!(
    contended_atomics_every_int_type,
    shm [1, 2, 4, 8],
    def [1, 2, 4, 8],
    fab [2, 4],
    cas [2, 4],
    dev [2, 4],
    |sh| {
    contended::<i32>(sh)?;
    contended::<u32>(sh)?;
    contended::<i64>(sh)?;
    contended::<u64>(sh)
});

pe_test!(
    signed_wraparound_and_float_extended_atomics,
    shm [1, 2, 4],
    def [1, 2, 4],
    fab [2, 4],
    cas [2, 4],
    dev [2, 4],
    |sh| {
        let (me, n) = (sh.my_pe(), sh.n_pes());
        let i = sh.calloc::<i32>(1)?.at(0)?;
        let f = sh.calloc::<f64>(1)?.at(0)?;
        let g = sh.calloc::<f32>(1)?.at(0)?;
        if me == 0 {
            sh.atomic_set(i, i32::MAX, n - 1)?;
            assert_eq!(sh.atomic_fetch_add(i, 1, n - 1)?, i32::MAX);
            assert_eq!(sh.atomic_fetch(i, n - 1)?, i32::MIN, "wrapping add");
            sh.atomic_set(f, -2.5, n - 1)?;
            assert_eq!(sh.atomic_swap(f, 7.25, n - 1)?, -2.5);
            assert_eq!(sh.atomic_compare_swap(f, 7.25, 1e300, n - 1)?, 7.25);
            assert_eq!(
                sh.atomic_compare_swap(f, 7.25, 0.0, n - 1)?,
                1e300,
                "no swap when cond differs"
            );
            sh.atomic_set(g, 0.5f32, n - 1)?;
            assert_eq!(sh.atomic_fetch(g, n - 1)?, 0.5f32);
        }
        sh.barrier_all()?;
        assert_eq!(sh.atomic_fetch(f, n - 1)?, 1e300);
        Ok(())
    }
);
