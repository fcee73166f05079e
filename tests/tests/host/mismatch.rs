//! Mismatched collectives fail everywhere (issue 14, item 1): when PEs are in different collective calls — a
//! barrier meets an allocation, a reduction or a broadcast meets a barrier — every PE gets the same
//! `Error::Mismatch` naming both calls, the runtime stays usable (a correct collective right after works and its
//! result is checked), and finalize succeeds on every PE (the harness finalizes each PE and requires exit 0).

use xpushmem::{Error, Shmem};
use xpushmem_tests::pe_test;
use xpushmem_tests::{assert_success, is_pe_of, run_pe, spawn_pes_with, test_name};

/// A short wait limit: the old behaviour (one side left waiting) must fail the test quickly, not hang it.
const ENV: &[(&str, &str)] = &[("XPUSHMEM_TIMEOUT_MS", "20000")];

/// Test `case` of `module`: `n` PEs run `body` with [`ENV`] and `extra` in their environment.
fn run_with(
    module: &str,
    case: &str,
    n: usize,
    body: fn(&Shmem) -> xpushmem::Result<()>,
    extra: &[(&str, &str)],
) {
    let name = test_name(module, case);
    if is_pe_of(&name) {
        run_pe(body);
    }
    let mut env = ENV.to_vec();
    env.extend_from_slice(extra);
    let out = spawn_pes_with(&name, n, &env);
    assert_success(&name, n, &out);
}

/// The mismatch every PE must see: PE `pe` (the first that differs from PE 0) passed `theirs`, PE 0 `ours`.
fn expect_mismatch(
    sh: &Shmem,
    r: xpushmem::Result<()>,
    my_call: &str,
    pe_want: usize,
    theirs_want: &dyn Fn(&str) -> bool,
    ours_want: &dyn Fn(&str) -> bool,
) {
    let me = sh.my_pe();
    match r {
        Err(Error::Mismatch {
            call,
            pe,
            theirs,
            reference_pe,
            ours,
        }) => {
            assert_eq!(call, my_call, "PE {me}");
            assert_eq!(pe, pe_want, "PE {me}: {theirs} / {ours}");
            assert_eq!(reference_pe, 0, "PE {me}: {call} {pe} {theirs} / {ours}");
            assert!(theirs_want(&theirs), "PE {me}: theirs = {theirs}");
            assert!(ours_want(&ours), "PE {me}: ours = {ours}");
        }
        r => panic!("PE {me}: expected a mismatch, got {r:?}"),
    }
}

/// The outcome of `call` when the last PE passed an invalid argument: its own error there; elsewhere a mismatch
/// naming it, against this PE's own call (a member that rejected its arguments is judged against each member's).
fn expect_rejected_by_last(sh: &Shmem, r: xpushmem::Result<()>, my_call: &str) {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    if me == n - 1 {
        assert!(
            matches!(
                r,
                Err(Error::InvalidArgument { .. }) | Err(Error::OutOfBounds { .. })
            ),
            "PE {me}: {r:?}"
        );
        return;
    }
    match r {
        Err(Error::Mismatch {
            call,
            pe,
            theirs,
            reference_pe,
            ..
        }) => {
            assert_eq!((call, pe, reference_pe), (my_call, n - 1, me), "PE {me}");
            assert!(theirs.contains("invalid arguments"), "PE {me}: {theirs}");
        }
        r => panic!("PE {me}: expected a mismatch, got {r:?}"),
    }
}

/// After a mismatch: a correct allocation, a put to the right neighbour and a barrier work, with checked data.
fn still_usable(sh: &Shmem) -> xpushmem::Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let x = sh.calloc::<u64>(4)?;
    sh.put(x, &[me as u64 + 100; 4], (me + 1) % n)?;
    sh.barrier_all()?;
    let mut got = [0u64; 4];
    sh.get(&mut got, x, me)?;
    assert_eq!(got, [((me + n - 1) % n) as u64 + 100; 4], "PE {me}");
    sh.free(x)
}

/// PE 1 allocates while every other PE is in `barrier_all`.
fn barrier_meets_malloc_body(sh: &Shmem) -> xpushmem::Result<()> {
    let me = sh.my_pe();
    let malloc_desc = "malloc(4096 elements of 1 bytes, align 1)";
    // PE 1 allocates while everyone else is in a barrier.
    let r = if me == 1 {
        sh.malloc::<u8>(4096).map(|_| ())
    } else {
        sh.barrier_all()
    };
    expect_mismatch(
        sh,
        r,
        if me == 1 { "malloc" } else { "barrier_all" },
        1,
        &|t| t == malloc_desc,
        &|o| o == "barrier_all()",
    );
    // Nothing was allocated: the same allocation made by everyone now lands at the same offset.
    let a = sh.malloc::<u8>(4096)?;
    sh.free(a)?;
    still_usable(sh)
}

pe_test!(
    barrier_meets_malloc,
    env [ENV],
    shm [2, 4],
    dev [2],
    |sh| { barrier_meets_malloc_body(sh) }
);

/// PE 0's call two calls back (the same parity, whose identity buffer it reuses) was `sync_all`, whose identity
/// differs from `barrier_all`'s in the call word alone. When PE 1 allocates instead, every PE must still judge PE 0
/// by its `barrier_all`: the identity is written again whenever any word differs (`Ctx::publish`), not taken for
/// the one its buffer holds. Fails if the comparison skips a word.
fn stale_identity_body(sh: &Shmem) -> xpushmem::Result<()> {
    sh.sync_all()?;
    sh.barrier_all()?;
    barrier_meets_malloc_body(sh)
}

pe_test!(
    a_call_differing_in_its_call_word_alone_is_published_again,
    env [ENV],
    shm [2, 3],
    |sh| { stale_identity_body(sh) }
);

/// The same with every agreement over the linear and the tree barrier: their messages carry the identity too.
mod barrier_meets_malloc_over_linear_and_tree {
    use super::*;

    fn run(case: &str, n: usize, algo: &str) {
        let env = [("XPUSHMEM_BARRIER_ALGORITHM", algo)];
        run_with(module_path!(), case, n, barrier_meets_malloc_body, &env);
    }

    #[test]
    fn linear_3pe() {
        run("linear_3pe", 3, "linear");
    }

    #[test]
    fn tree_4pe() {
        run("tree_4pe", 4, "tree");
    }
}

pe_test!(
    sum_reduce_meets_barrier,
    env [ENV],
    shm [2, 3],
    |sh| {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let w = sh.team_world();
    let src = sh.calloc::<i64>(8)?;
    let dst = sh.calloc::<i64>(8)?;
    sh.put(src, &[me as i64 + 1; 8], me)?;
    // PE 0 reduces while the others are in a barrier.
    let r = if me == 0 {
        sh.sum_reduce(&w, dst, src, 8)
    } else {
        sh.barrier_all()
    };
    expect_mismatch(
        sh,
        r,
        if me == 0 { "reduce" } else { "barrier_all" },
        1,
        &|t| t == "barrier_all()",
        &|o| o.starts_with("reduce(type int64, nelems 8, op sum"),
    );
    // The same reduction by everyone works: 1 + 2 + ... + n.
    sh.sum_reduce(&w, dst, src, 8)?;
    let mut got = [0i64; 8];
    sh.get(&mut got, dst, me)?;
    let want = (n * (n + 1) / 2) as i64;
    assert_eq!(got, [want; 8], "PE {me}");
    sh.free(dst)?;
    sh.free(src)?;
    still_usable(sh)
});

pe_test!(
    broadcast_meets_barrier,
    env [ENV],
    shm [2, 3],
    |sh| {
    let me = sh.my_pe();
    let w = sh.team_world();
    let src = sh.calloc::<u32>(16)?;
    let dst = sh.calloc::<u32>(16)?;
    sh.put(src, &[7 + me as u32; 16], me)?;
    // PE 0 is in a barrier while the others broadcast.
    let r = if me == 0 {
        sh.barrier_all()
    } else {
        sh.broadcast(&w, dst, src, 16, 0)
    };
    expect_mismatch(
        sh,
        r,
        if me == 0 { "barrier_all" } else { "broadcast" },
        1,
        &|t| t.starts_with("broadcast(type uint32, nelems 16, root 0"),
        &|o| o == "barrier_all()",
    );
    sh.broadcast(&w, dst, src, 16, 0)?;
    let mut got = [0u32; 16];
    sh.get(&mut got, dst, me)?;
    assert_eq!(got, [7; 16], "PE {me}");
    sh.free(dst)?;
    sh.free(src)?;
    still_usable(sh)
});

pe_test!(
    team_sync_meets_free_then_split,
    env[ENV],
    shm[2],
    dev[2],
    |sh| {
        let me = sh.my_pe();
        let w = sh.team_world();
        let x = sh.malloc::<u64>(2)?;
        let r = if me == 0 {
            sh.team_sync(&w)
        } else {
            sh.free(x)
        };
        expect_mismatch(
            sh,
            r,
            if me == 0 { "team_sync" } else { "free" },
            1,
            &|t| t.starts_with("free(heap offset"),
            &|o| o == "team_sync()",
        );
        // A team creation that meets a barrier fails on both sides too.
        let r = if me == 0 {
            sh.team_split_strided(&w, 0, 1, 2, None).map(|_| ())
        } else {
            sh.barrier_all()
        };
        expect_mismatch(
            sh,
            r,
            if me == 0 {
                "team_split_strided"
            } else {
                "barrier_all"
            },
            1,
            &|t| t == "barrier_all()",
            &|o| o.starts_with("team_split_strided"),
        );
        let t = sh.team_split_strided(&w, 0, 1, 2, None)?.expect("member");
        sh.team_sync(&t)?;
        sh.team_destroy(t)?;
        sh.free(x)?;
        still_usable(sh)
    }
);

pe_test!(
    op_group_barrier_meets_barrier_all,
    env [ENV],
    shm [2, 3],
    |sh| {
        let me = sh.my_pe();
        // The op family's world group is TEAM_WORLD: its agreement meets the runtime's own barrier.
        let g = xpushmem_ops::Group::world(sh)?;
        let r = if me == 0 {
            g.barrier(sh)
        } else {
            sh.barrier_all()
        };
        expect_mismatch(
            sh,
            r,
            if me == 0 {
                "Group::barrier"
            } else {
                "barrier_all"
            },
            1,
            &|t| t == "barrier_all()",
            &|o| o.starts_with("Group::barrier(arguments digest"),
        );
        // A group of explicit PEs (its own team) works afterwards, and so does the world group.
        let pes: Vec<usize> = (0..sh.n_pes()).rev().collect();
        let rev = xpushmem_ops::Group::new(sh, &pes)?;
        rev.barrier(sh)?;
        g.barrier(sh)?;
        rev.free(sh)?;
        g.free(sh)?;
        still_usable(sh)
    }
);

/// The gathering exchange (the eager collectives' `ceil(log2 n)` rounds, which `Auto` takes from
/// `XPUSHMEM_EAGER_ROUNDS_FROM` members on, here 2) meeting an agreement, an exchange and different arguments:
/// every PE fails with the same mismatch, no PE waits for a round message that never comes, and the team's next
/// collectives work (their results checked). Run by `rounds_meet_other_calls`.
mod gather_rounds_meet_other_calls {
    use super::*;
    use xpushmem::{BroadcastAlgo, CollectAlgo, ReduceAlgo};

    pub fn body(sh: &Shmem) -> xpushmem::Result<()> {
        let (me, n) = (sh.my_pe(), sh.n_pes());
        let w = sh.team_world();
        let src = sh.calloc::<i64>(12)?;
        let dst = sh.calloc::<i64>(12.max(8 * n))?;
        sh.put(src, &[me as i64 + 1; 12], me)?;
        let any = |_: &str| true;
        // A reduction in rounds on PE 0 meets a barrier on the others.
        let r = if me == 0 {
            sh.sum_reduce(&w, dst, src, 8)
        } else {
            sh.barrier_all()
        };
        expect_mismatch(
            sh,
            r,
            if me == 0 { "reduce" } else { "barrier_all" },
            1,
            &|t| t == "barrier_all()",
            &|o| o.starts_with("reduce(type int64, nelems 8, op sum"),
        );
        // fcollect in rounds on PE 0 meets fcollect in one all-to-all round (the exchange) on the others.
        let algo = if me == 0 {
            CollectAlgo::EagerRounds
        } else {
            CollectAlgo::Eager
        };
        let r = sh.fcollect_with(&w, dst, src, 4, algo);
        expect_mismatch(sh, r, "fcollect", 1, &any, &any);
        // A broadcast on every PE but the last meets an alltoall (an exchange) there: in rounds, and with 16 bytes
        // in the agreement's own messages (where it is the dissemination; else in rounds).
        for (nelems, algo) in [
            (8, BroadcastAlgo::EagerRounds),
            (2, BroadcastAlgo::Agreement),
        ] {
            let r = if me == n - 1 {
                sh.alltoall(&w, dst, src, 1)
            } else {
                sh.broadcast_with(&w, dst, src, nelems, 0, algo)
            };
            let other = format!("broadcast(type int64, nelems {nelems}, root 0");
            expect_mismatch(
                sh,
                r,
                if me == n - 1 { "alltoall" } else { "broadcast" },
                n - 1,
                &|t| t.starts_with("alltoall("),
                &|o| o.starts_with(&other),
            );
        }
        // PE 1 reduces 4 elements, the others 8: all in rounds, the digests differ.
        let r = sh.reduce_with(
            &w,
            xpushmem::ReduceOp::Sum,
            dst,
            src,
            if me == 1 { 4 } else { 8 },
            ReduceAlgo::EagerRounds,
        );
        expect_mismatch(sh, r, "reduce", 1, &|t| t.contains("nelems 4"), &|o| {
            o.contains("nelems 8")
        });
        // The last PE's destination is too small for its fcollect: its own error, a mismatch elsewhere.
        let short = sh.calloc::<i64>(1)?;
        let d = if me == n - 1 { short } else { dst };
        let r = sh.fcollect(&w, d, src, 4);
        expect_rejected_by_last(sh, r, "fcollect");
        // Everyone agrees again: a reduction, an fcollect and a broadcast in rounds, results checked.
        sh.sum_reduce(&w, dst, src, 8)?;
        let mut got = vec![0i64; 8 * n];
        sh.get(&mut got[..8], dst.slice(..8)?, me)?;
        assert_eq!(got[..8], [(n * (n + 1) / 2) as i64; 8], "PE {me}");
        sh.fcollect_with(&w, dst, src, 8, CollectAlgo::EagerRounds)?;
        sh.get(&mut got, dst, me)?;
        let want: Vec<i64> = (0..n).flat_map(|p| [p as i64 + 1; 8]).collect();
        assert_eq!(got, want, "PE {me}");
        sh.broadcast_with(&w, dst, src, 8, n - 1, BroadcastAlgo::EagerRounds)?;
        sh.get(&mut got[..8], dst.slice(..8)?, me)?;
        assert_eq!(got[..8], [n as i64; 8], "PE {me}");
        // `Auto` takes the rounds here (XPUSHMEM_EAGER_ROUNDS_FROM=2): PE 0's automatic choice meets the others'
        // explicit one without a mismatch (the algorithm is part of the compared identity).
        let auto = me == 0;
        let c = if auto {
            CollectAlgo::Auto
        } else {
            CollectAlgo::EagerRounds
        };
        sh.fcollect_with(&w, dst, src, 2, c)?;
        let r = if auto {
            ReduceAlgo::Auto
        } else {
            ReduceAlgo::EagerRounds
        };
        sh.reduce_with(&w, xpushmem::ReduceOp::Sum, dst, src, 2, r)?;
        // (96 bytes: more than the agreement's messages carry, which `Auto` takes up to 88.)
        let b = if auto {
            BroadcastAlgo::Auto
        } else {
            BroadcastAlgo::EagerRounds
        };
        sh.broadcast_with(&w, dst, src, 12, 0, b)?;
        let mut got12 = [0i64; 12];
        sh.get(&mut got12, dst.slice(..12)?, me)?;
        assert_eq!(got12, [1; 12], "PE {me}");
        // 24 bytes in the agreement's own messages (where it is the dissemination; else in rounds), after the
        // mismatches above.
        sh.broadcast_with(&w, dst, src, 3, n - 1, BroadcastAlgo::Agreement)?;
        sh.get(&mut got[..3], dst.slice(..3)?, me)?;
        assert_eq!(got[..3], [n as i64; 3], "PE {me}");
        sh.free(short)?;
        sh.free(dst)?;
        sh.free(src)?;
        still_usable(sh)
    }
}

/// Bruck's alltoall inside the agreement (`AlltoallAlgo::EagerRounds`, the gathering exchange's pattern and
/// protocol mark) meeting an agreement, an exchange, a gathering exchange, different arguments and an invalid
/// argument: every PE fails with the same mismatch, no PE waits for a round message that never comes, and the
/// team's next collectives work (their results checked). Run by `rounds_meet_other_calls`.
mod bruck_rounds_meet_other_calls {
    use super::*;
    use xpushmem::{AlltoallAlgo, CollectAlgo};

    /// Element `k` of PE `pe`'s source.
    fn val(pe: usize, k: usize) -> i64 {
        ((pe as i64) << 32) | k as i64
    }

    pub fn body(sh: &Shmem) -> xpushmem::Result<()> {
        let (me, n) = (sh.my_pe(), sh.n_pes());
        let w = sh.team_world();
        let src = sh.calloc::<i64>(4 * n)?;
        let dst = sh.calloc::<i64>(4 * n)?;
        let mine: Vec<i64> = (0..4 * n).map(|k| val(me, k)).collect();
        sh.put(src, &mine, me)?;
        let rounds = AlltoallAlgo::EagerRounds;
        let any = |_: &str| true;
        // An alltoall in rounds on PE 0 meets a barrier on the others.
        let r = if me == 0 {
            sh.alltoall_with(&w, dst, src, 2, rounds)
        } else {
            sh.barrier_all()
        };
        expect_mismatch(
            sh,
            r,
            if me == 0 { "alltoall" } else { "barrier_all" },
            1,
            &|t| t == "barrier_all()",
            &|o| o.starts_with("alltoall(type int64, nelems 2"),
        );
        // A barrier on the last PE meets alltoalls in rounds on the others.
        let r = if me == n - 1 {
            sh.barrier_all()
        } else {
            sh.alltoalls_with(&w, dst, src, 1, 2, 2, rounds)
        };
        expect_mismatch(
            sh,
            r,
            if me == n - 1 {
                "barrier_all"
            } else {
                "alltoalls"
            },
            n - 1,
            &|t| t == "barrier_all()",
            &|o| o.starts_with("alltoalls(type int64, nelems 2, dst stride 1, src stride 2"),
        );
        // The alltoall in rounds on every PE but the last meets the alltoall in one all-to-all round (the
        // exchange) there; then the other way round on PE 0.
        for odd in [n - 1, 0] {
            let algo = if me == odd {
                AlltoallAlgo::Eager
            } else {
                rounds
            };
            let r = sh.alltoall_with(&w, dst, src, 2, algo);
            expect_mismatch(
                sh,
                r,
                "alltoall",
                if odd == 0 { 1 } else { odd },
                &any,
                &any,
            );
        }
        // fcollect in rounds (the gathering exchange, the same pattern) on PE 0 and the last PE meets the alltoall
        // in rounds on the others: each side rejects the other's round messages.
        let gathering = me == 0 || me == n - 1;
        let r = if gathering {
            sh.fcollect_with(&w, dst, src, 2, CollectAlgo::EagerRounds)
        } else {
            sh.alltoall_with(&w, dst, src, 2, rounds)
        };
        expect_mismatch(
            sh,
            r,
            if gathering { "fcollect" } else { "alltoall" },
            1,
            &|t| t.starts_with("alltoall(type int64, nelems 2"),
            &|o| o.starts_with("fcollect(type int64, nelems 2"),
        );
        // PE 1 sends blocks of 1 element, the others of 2: all in rounds, the digests (and sizes) differ.
        let r = sh.alltoall_with(&w, dst, src, if me == 1 { 1 } else { 2 }, rounds);
        expect_mismatch(sh, r, "alltoall", 1, &|t| t.contains("nelems 1"), &|o| {
            o.contains("nelems 2")
        });
        // The last PE's destination is too small for its alltoall: its own error, a mismatch elsewhere.
        let short = sh.calloc::<i64>(1)?;
        let d = if me == n - 1 { short } else { dst };
        let r = sh.alltoall_with(&w, d, src, 2, rounds);
        expect_rejected_by_last(sh, r, "alltoall");
        // Everyone agrees again: alltoall and strided alltoalls in rounds, results checked.
        let mut got = vec![0i64; 4 * n];
        for nelems in [2, 4] {
            sh.put(dst, &vec![-1; 4 * n], me)?;
            sh.alltoall_with(&w, dst, src, nelems, rounds)?;
            sh.get(&mut got, dst, me)?;
            let want: Vec<i64> = (0..n * nelems)
                .map(|k| val(k / nelems, me * nelems + k % nelems))
                .collect();
            assert_eq!(got[..n * nelems], want[..], "PE {me} nelems {nelems}");
        }
        // alltoalls, one element per member: member j's is source element 2 j, landing in destination element
        // 2 i on member j (i the sender); the odd elements stay untouched.
        sh.put(dst, &vec![-1; 4 * n], me)?;
        sh.alltoalls_with(&w, dst, src, 2, 2, 1, rounds)?;
        sh.get(&mut got, dst, me)?;
        for i in 0..n {
            assert_eq!(got[2 * i], val(i, 2 * me), "PE {me} from {i}");
            assert_eq!(got[2 * i + 1], -1, "PE {me}: gap after {i}");
        }
        // `Auto` takes the rounds here: PE 0's automatic choice meets the others' explicit one without a
        // mismatch (the algorithm is part of the compared identity).
        let a = if me == 0 { AlltoallAlgo::Auto } else { rounds };
        sh.alltoall_with(&w, dst, src, 1, a)?;
        sh.get(&mut got[..n], dst.slice(..n)?, me)?;
        let want: Vec<i64> = (0..n).map(|i| val(i, me)).collect();
        assert_eq!(got[..n], want[..], "PE {me} (auto)");
        sh.alltoalls_with(&w, dst, src, 1, 1, 1, a)?;
        sh.free(short)?;
        sh.free(dst)?;
        sh.free(src)?;
        still_usable(sh)
    }
}

/// Both exchanges in rounds in one run of PEs: 3 and 5 PEs (rounds that carry fewer blocks than their
/// distance, positions not half set), 4 (a power of two), over the dissemination, tree and linear barriers (the
/// linear one's member 0 counts arrivals), with `XPUSHMEM_EAGER_ROUNDS_FROM=2`.
mod rounds_meet_other_calls {
    use super::*;

    fn body(sh: &Shmem) -> xpushmem::Result<()> {
        gather_rounds_meet_other_calls::body(sh)?;
        bruck_rounds_meet_other_calls::body(sh)
    }

    fn run(case: &str, n: usize, barrier: &str) {
        let env = [
            ("XPUSHMEM_EAGER_ROUNDS_FROM", "2"),
            ("XPUSHMEM_BARRIER_ALGORITHM", barrier),
        ];
        run_with(module_path!(), case, n, body, &env);
    }

    #[test]
    fn dissemination_3pe() {
        run("dissemination_3pe", 3, "dissemination");
    }

    #[test]
    fn tree_4pe() {
        run("tree_4pe", 4, "tree");
    }

    #[test]
    fn dissemination_4pe() {
        run("dissemination_4pe", 4, "dissemination");
    }

    #[test]
    fn linear_5pe() {
        run("linear_5pe", 5, "linear");
    }
}
