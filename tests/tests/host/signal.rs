//! put_signal (SET and ADD, blocking and nbi), signal_fetch, signal_wait_until with every comparator, and the
//! wait_until/test family with its _all/_any/_some and vector forms.

use xpushmem::{Cmp, Error, SignalOp};
use xpushmem_tests::{pe_test, ref_vec};

pe_test!(
    put_signal_pipeline_data_before_signal,
    shm [1, 2, 4, 8],
    def [1, 2, 4, 8],
    fab [2, 4],
    cas [2, 4],
    dev [2, 4],
    |sh| {
    // Each PE streams ITER chunks to its right neighbour; the receiver waits on the signal (SET to the
    // iteration number) and must see the whole chunk of that iteration. A chunk is written only after the
    // receiver acknowledges the previous one.
    const ITER: u64 = 200;
    const LEN: usize = 1024;
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    let buf = sh.malloc::<u64>(LEN)?;
    let sig = sh.calloc::<u64>(1)?.at(0)?;
    let ack = sh.calloc::<u64>(1)?.at(0)?;
    for it in 1..=ITER {
        let data: Vec<u64> = ref_vec(me, LEN, it);
        if it > 1 {
            sh.signal_wait_until(ack, Cmp::Ge, it - 1)?;
        }
        if it % 2 == 0 {
            sh.put_signal(buf, &data, sig, it, SignalOp::Set, right)?;
        } else {
            sh.put_signal_nbi(buf, &data, sig, it, SignalOp::Set, right)?
                .wait()?;
        }
        let seen = sh.signal_wait_until(sig, Cmp::Ge, it)?;
        assert_eq!(seen, it);
        let mut got = vec![0u64; LEN];
        sh.get(&mut got, buf, me)?;
        assert_eq!(
            got,
            ref_vec::<u64>(left, LEN, it),
            "iteration {it}: data visible with the signal"
        );
        sh.atomic_set(ack, it, left)?;
    }
    sh.barrier_all()?;
    Ok(())
});

pe_test!(
    put_signal_add_counts_every_sender,
    shm [1, 2, 4, 8],
    def [1, 2, 4, 8],
    fab [2, 4],
    cas [2, 4],
    dev [2, 4],
    |sh| {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let slots = sh.calloc::<u32>(n * 8)?;
    let sig = sh.calloc::<u64>(1)?.at(0)?;
    for pe in 0..n {
        let data: Vec<u32> = ref_vec(me, 8, pe as u64);
        sh.put_signal(
            slots.slice(me * 8..me * 8 + 8)?,
            &data,
            sig,
            10 + me as u64,
            SignalOp::Add,
            pe,
        )?;
    }
    let total: u64 = (0..n as u64).map(|p| 10 + p).sum();
    assert_eq!(sh.signal_wait_until(sig, Cmp::Eq, total)?, total);
    assert_eq!(sh.signal_fetch(sig)?, total);
    let mut got = vec![0u32; n * 8];
    sh.get(&mut got, slots, me)?;
    for pe in 0..n {
        assert_eq!(
            &got[pe * 8..pe * 8 + 8],
            &ref_vec::<u32>(pe, 8, me as u64)[..]
        );
    }
    sh.barrier_all()?;
    Ok(())
});

pe_test!(
    signal_wait_until_every_comparator,
    shm [1, 2, 4],
    def [1, 2, 4],
    fab [2, 4],
    cas [2, 4],
    dev [2, 4],
    |sh| {
        let (me, n) = (sh.my_pe(), sh.n_pes());
        let sig = sh.calloc::<u64>(1)?.at(0)?;
        let empty = sh.malloc::<u8>(0)?;
        // PE left sets my signal to 50; each comparator's expected truth is computed with plain Rust ops.
        sh.put_signal(empty, &[], sig, 50, SignalOp::Set, (me + 1) % n)?;
        for (cmp, v) in [
            (Cmp::Eq, 50),
            (Cmp::Ne, 49),
            (Cmp::Gt, 49),
            (Cmp::Ge, 50),
            (Cmp::Lt, 51),
            (Cmp::Le, 50),
        ] {
            assert_eq!(sh.signal_wait_until(sig, cmp, v)?, 50, "{cmp:?} {v}");
        }
        for cmp in Cmp::ALL {
            for v in [49u64, 50, 51] {
                let expect = match cmp {
                    Cmp::Eq => 50 == v,
                    Cmp::Ne => 50 != v,
                    Cmp::Gt => 50 > v,
                    Cmp::Ge => 50 >= v,
                    Cmp::Lt => 50 < v,
                    Cmp::Le => 50 <= v,
                };
                let r = sh.signal_fetch(sig)?;
                assert_eq!(cmp.holds(r, v), expect, "{cmp:?} {v}");
            }
        }
        sh.barrier_all()?;
        Ok(())
    }
);

pe_test!(
    wait_until_and_test_families,
    shm [2, 4, 8],
    def [2, 4, 8],
    fab [2, 4],
    cas [2, 4],
    dev [2, 4],
    |sh| {
        let (me, n) = (sh.my_pe(), sh.n_pes());
        // Every PE owns n flags; PE p sets flag p of everyone to p + 1 (vector values) after a barrier.
        let flags = sh.calloc::<i64>(n)?;
        assert!(!sh.test_all(flags, None, Cmp::Ne, 0)?, "nothing set yet");
        assert_eq!(sh.test_any(flags, None, Cmp::Ne, 0)?, None);
        assert!(sh.test_some(flags, None, Cmp::Ne, 0)?.is_empty());
        sh.barrier_all()?;
        for pe in 0..n {
            sh.atomic_set(flags.at(me)?, me as i64 + 1, pe)?;
        }
        let values: Vec<i64> = (1..=n as i64).collect();
        // any/some return at least one satisfied index; all waits for everything.
        let any = sh
            .wait_until_any(flags, None, Cmp::Gt, 0)?
            .expect("an index");
        assert!(any < n);
        let some = sh.wait_until_some(flags, None, Cmp::Ge, 1)?;
        assert!(!some.is_empty() && some.iter().all(|&i| i < n));
        sh.wait_until_all_vector(flags, None, Cmp::Eq, &values)?;
        sh.wait_until_all(flags, None, Cmp::Ge, 1)?;
        assert!(sh.test_all_vector(flags, None, Cmp::Eq, &values)?);
        assert_eq!(
            sh.test_some_vector(flags, None, Cmp::Eq, &values)?,
            (0..n).collect::<Vec<_>>()
        );
        assert_eq!(sh.test_any_vector(flags, None, Cmp::Lt, &values)?, None);
        // skip: with every flag but the last skipped, any must answer the last; with all skipped, None.
        let mut skip = vec![true; n];
        skip[n - 1] = false;
        assert_eq!(
            sh.wait_until_any(flags, Some(&skip), Cmp::Eq, n as i64)?,
            Some(n - 1)
        );
        assert_eq!(
            sh.wait_until_any(flags, Some(&vec![true; n]), Cmp::Eq, 0)?,
            None
        );
        assert_eq!(
            sh.wait_until_some_vector(flags, Some(&skip), Cmp::Eq, &values)?,
            vec![n - 1]
        );
        // Every flag matches: any index may be reported (the start rotates for fairness), but it must be one.
        let any = sh
            .wait_until_any_vector(flags, None, Cmp::Eq, &values)?
            .expect("an index");
        let mut got = vec![0i64; n];
        sh.get(&mut got, flags, me)?;
        assert!(any < n && got[any] == values[any], "index {any} of {got:?}");
        // scalar forms
        sh.wait_until(flags.at(0)?, Cmp::Eq, 1)?;
        assert!(sh.test(flags.at(n - 1)?, Cmp::Eq, n as i64)?);
        assert!(!sh.test(flags.at(n - 1)?, Cmp::Lt, n as i64)?);
        // argument checks
        assert!(
            n == 1
                || matches!(
                    sh.test_all(flags, Some(&[false]), Cmp::Eq, 0),
                    Err(Error::InvalidArgument { name: "skip", .. })
                )
        );
        assert!(matches!(
            sh.wait_until_all_vector(flags, None, Cmp::Eq, &values[..n - 1]),
            Err(Error::InvalidArgument { name: "values", .. })
        ));
        sh.barrier_all()?;
        Ok(())
    }
);

pe_test!(
    wait_until_and_test_16bit,
    shm [1, 2, 4],
    def [1, 2, 4],
    fab [2, 4],
    cas [2, 4],
    dev [2],
    |sh| {
        // Two 16-bit variables share each 4-byte word: PE p puts -(p + 1) into slot p of every PE's i16 set and
        // 0x8000 + p into its u16 set; each value is read back through its half of the word.
        let (me, n) = (sh.my_pe(), sh.n_pes());
        let s = sh.calloc::<i16>(n + 1)?;
        let u = sh.calloc::<u16>(n + 1)?;
        assert!(sh.test_all(s.slice(..n)?, None, Cmp::Eq, 0)?);
        assert_eq!(sh.test_any(u.slice(..n)?, None, Cmp::Ge, 0x8000)?, None);
        sh.barrier_all()?;
        for pe in 0..n {
            sh.put(s.slice(me..me + 1)?, &[-(me as i16) - 1], pe)?;
            sh.put(u.slice(me..me + 1)?, &[0x8000 + me as u16], pe)?;
        }
        // Signed: every value is negative (as unsigned they would be large).
        sh.wait_until_all(s.slice(..n)?, None, Cmp::Lt, 0)?;
        let want_s: Vec<i16> = (0..n as i16).map(|p| -p - 1).collect();
        sh.wait_until_all_vector(s.slice(..n)?, None, Cmp::Eq, &want_s)?;
        assert!(sh.test_all_vector(s.slice(..n)?, None, Cmp::Eq, &want_s)?);
        assert!(
            sh.test(s.at(n)?, Cmp::Eq, 0)?,
            "the slot after the set is untouched"
        );
        assert!(!sh.test(s.at(n - 1)?, Cmp::Ge, 0)?);
        sh.wait_until(s.at(0)?, Cmp::Eq, -1)?;
        let want_u: Vec<u16> = (0..n as u16).map(|p| 0x8000 + p).collect();
        sh.wait_until_all(u.slice(..n)?, None, Cmp::Ge, 0x8000)?;
        assert_eq!(
            sh.test_some_vector(u.slice(..n)?, None, Cmp::Eq, &want_u)?,
            (0..n).collect::<Vec<_>>()
        );
        let last = sh.wait_until_any(u.slice(..n)?, None, Cmp::Eq, want_u[n - 1])?;
        assert_eq!(last, Some(n - 1));
        assert_eq!(
            sh.wait_until_some(s.slice(..n)?, None, Cmp::Le, -(n as i16))?,
            vec![n - 1]
        );
        assert!(matches!(
            sh.test_all_vector(u.slice(..n)?, None, Cmp::Eq, &want_u[1..]),
            Err(Error::InvalidArgument { name: "values", .. })
        ));
        sh.barrier_all()?;
        Ok(())
    }
);
