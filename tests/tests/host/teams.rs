//! Teams: the predefined teams, strided and 2-D splits (membership, numbering, translation), nested splits,
//! destruction and slot reuse, and errors on bad or inconsistent arguments — on every PE.

use xpushmem::{Error, Shmem, Team, TeamConfig};
use xpushmem_tests::pe_test;

/// Independent model of a strided split over a parent given as global PEs.
fn strided(parent: &[usize], start: usize, stride: usize, size: usize) -> Vec<usize> {
    (0..size).map(|k| parent[start + k * stride]).collect()
}

fn members(t: &Team) -> Vec<usize> {
    (0..t.n_pes()).map(|i| t.global_pe(i).unwrap()).collect()
}

/// Check `t` (or its absence) against the model `expect` (global PEs), with translations to and from the world.
fn check_team(sh: &Shmem, t: Option<&Team>, expect: &[usize], what: &str) -> xpushmem::Result<()> {
    let me = sh.my_pe();
    let world = sh.team_world();
    match (t, expect.iter().position(|&p| p == me)) {
        (None, None) => {}
        (Some(t), Some(idx)) => {
            assert_eq!(members(t), expect, "{what}: members");
            assert_eq!(t.my_pe(), idx, "{what}: my_pe");
            assert_eq!(sh.team_my_pe(t), idx);
            assert_eq!(sh.team_n_pes(t), expect.len());
            for (i, &g) in expect.iter().enumerate() {
                assert_eq!(
                    sh.team_translate_pe(t, i, &world)?,
                    Some(g),
                    "{what}: member {i} to world"
                );
                assert_eq!(
                    sh.team_translate_pe(&world, g, t)?,
                    Some(i),
                    "{what}: world {g} to team"
                );
            }
            for g in (0..sh.n_pes()).filter(|g| !expect.contains(g)) {
                assert_eq!(
                    sh.team_translate_pe(&world, g, t)?,
                    None,
                    "{what}: world {g} is not a member"
                );
            }
            assert!(
                matches!(
                    sh.team_translate_pe(t, expect.len(), &world),
                    Err(Error::InvalidPe { pe, .. }) if pe == expect.len() as i64
                ),
                "{what}: out-of-range PE"
            );
            sh.team_sync(t)?;
        }
        (t, pos) => panic!(
            "{what}: PE {me} membership: handle {} but model says {:?}",
            t.is_some(),
            pos
        ),
    }
    Ok(())
}

pe_test!(
    predefined_teams,
    env [crate::coll_common::ENV],
    shm [1, 2, 3, 4, 8],
    fabp [2, 3, 4],
    |sh| {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let world = sh.team_world();
    let shared = sh.team_shared();
    assert!(world.is_world() && shared.is_shared());
    assert_eq!((world.my_pe(), world.n_pes()), (me, n));
    // One node: TEAM_SHARED is everyone.
    assert_eq!(members(&shared), (0..n).collect::<Vec<_>>());
    assert_eq!(sh.team_translate_pe(&shared, me, &world)?, Some(me));
    assert_eq!(sh.team_get_config(&world), TeamConfig::default());
    // Handles name the same team: syncs through either clone interleave correctly.
    let w2 = sh.team_world();
    for _ in 0..5 {
        sh.team_sync(&world)?;
        sh.team_sync(&w2)?;
        sh.team_sync(&shared)?;
    }
    assert!(
        matches!(
            sh.team_destroy(world),
            Err(Error::InvalidArgument { name: "team", .. })
        ),
        "TEAM_WORLD cannot be destroyed"
    );
    sh.barrier_all()
});

pe_test!(
    split_strided_negative_strides,
    env [crate::coll_common::ENV],
    shm [1, 2, 3, 4, 8],
    fabp [2, 3, 4],
    |sh| {
    // OpenSHMEM 1.6: start, start + stride, ... with stride < 0, numbered in that (descending) order.
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let world = sh.team_world();
    let model = |start: usize, stride: isize, size: usize| -> Vec<usize> {
        (0..size as isize)
            .map(|k| (start as isize + k * stride) as usize)
            .collect()
    };
    let src = sh.malloc::<u64>(1)?;
    let dst = sh.malloc::<u64>(n)?;
    sh.put(src, &[me as u64], me)?;
    let mut cases = vec![(n - 1, -1, n), (n - 1, -2, n.div_ceil(2)), (0, -3, 1)];
    if n >= 3 {
        cases.push((n - 2, -1, n - 1));
    }
    for (start, stride, size) in cases {
        let t = sh.team_split_strided_signed(&world, start, stride, size, None)?;
        let expect = model(start, stride, size);
        check_team(
            sh,
            t.as_ref(),
            &expect,
            &format!("split({start}, {stride}, {size})"),
        )?;
        if let Some(t) = t {
            // fcollect puts member k's block at k: the members' world numbers in team order.
            sh.fcollect(&t, dst, src, 1)?;
            let mut got = vec![0u64; size];
            sh.get(&mut got, dst, me)?;
            assert_eq!(got, expect.iter().map(|&p| p as u64).collect::<Vec<_>>());
            // A split of the reversed team counted down again gives the parent's order back.
            let back = sh.team_split_strided_signed(&t, size - 1, -1, size, None)?;
            let back_expect: Vec<usize> = expect.iter().rev().copied().collect();
            check_team(sh, back.as_ref(), &back_expect, "reversed twice")?;
            sh.team_destroy(back.expect("every member of the parent is a member"))?;
            sh.team_destroy(t)?;
        }
        sh.barrier_all()?;
    }
    sh.free(dst)?;
    sh.free(src)?;
    // Running below PE 0 is an error on every PE, naming the size.
    assert!(matches!(
        sh.team_split_strided_signed(&world, n - 1, -1, n + 1, None),
        Err(Error::InvalidArgument { name: "size", .. })
    ));
    sh.barrier_all()
});

pe_test!(
    split_strided_membership_numbering_translation,
    env [crate::coll_common::ENV],
    shm [1, 2, 3, 4, 8],
    fabp [2, 3, 4],
    |sh| {
    let n = sh.n_pes();
    let world = sh.team_world();
    let all: Vec<usize> = (0..n).collect();
    let mut cases = vec![(0, 1, n), (0, 2, n.div_ceil(2)), (n - 1, 1, 1), (0, 0, 1)];
    if n >= 2 {
        cases.push((1, 2, n / 2));
        cases.push((1, 1, n - 1));
    }
    if n >= 4 {
        cases.push((1, 3, (n - 1).div_ceil(3)));
        cases.push((n - 1, 5, 1));
    }
    let cfg = TeamConfig { num_contexts: 3 };
    for (start, stride, size) in cases {
        let t = sh.team_split_strided(&world, start, stride, size, Some(&cfg))?;
        let expect = strided(&all, start, stride, size);
        check_team(
            sh,
            t.as_ref(),
            &expect,
            &format!("split({start}, {stride}, {size})"),
        )?;
        if let Some(t) = &t {
            assert_eq!(sh.team_get_config(t), cfg);
            // Nested: every other member of the new team, from its member 1 (when it has one).
            if t.n_pes() >= 2 {
                let sub = sh.team_split_strided(t, 1, 2, t.n_pes() / 2, None)?;
                let e2 = strided(&expect, 1, 2, t.n_pes() / 2);
                check_team(sh, sub.as_ref(), &e2, "nested split")?;
                if let Some(s) = sub {
                    sh.team_destroy(s)?;
                }
            }
            sh.team_destroy(t.clone())?;
            assert!(
                matches!(sh.team_sync(t), Err(Error::State(ref m)) if m.contains("was destroyed")),
                "a destroyed team is unusable"
            );
        }
        sh.barrier_all()?;
    }
    Ok(())
});

pe_test!(
    split_2d_rows_and_columns,
    env [crate::coll_common::ENV],
    shm [1, 2, 3, 4, 8],
    fabp [2, 3, 4],
    |sh| {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let world = sh.team_world();
    for xrange in [1, 2, 3, n, n + 2] {
        let (x, y) =
            sh.team_split_2d(&world, xrange, Some(&TeamConfig { num_contexts: 1 }), None)?;
        let xr = xrange.min(n);
        let row: Vec<usize> = (0..n).filter(|p| p / xr == me / xr).collect();
        let col: Vec<usize> = (0..n).filter(|p| p % xr == me % xr).collect();
        check_team(sh, Some(&x), &row, &format!("xrange {xrange}: row"))?;
        check_team(sh, Some(&y), &col, &format!("xrange {xrange}: column"))?;
        assert_eq!(sh.team_get_config(&x).num_contexts, 1);
        // 2-D split of a strided team (the evens), then of a row.
        let evens = sh.team_split_strided(&world, 0, 2, n.div_ceil(2), None)?;
        if let Some(e) = &evens {
            let em: Vec<usize> = (0..n).step_by(2).collect();
            let (ex, ey) = sh.team_split_2d(e, 2, None, None)?;
            let ei = e.my_pe();
            let erow: Vec<usize> = (0..em.len())
                .filter(|i| i / 2 == ei / 2)
                .map(|i| em[i])
                .collect();
            let ecol: Vec<usize> = (0..em.len())
                .filter(|i| i % 2 == ei % 2)
                .map(|i| em[i])
                .collect();
            check_team(sh, Some(&ex), &erow, "evens 2d row")?;
            check_team(sh, Some(&ey), &ecol, "evens 2d column")?;
            sh.team_destroy(ex)?;
            sh.team_destroy(ey)?;
            sh.team_destroy(e.clone())?;
        }
        sh.team_destroy(x)?;
        sh.team_destroy(y)?;
        sh.barrier_all()?;
    }
    Ok(())
});

/// A split whose arguments are bad on some or all PEs fails on every PE, and the parent stays usable.
fn expect_all_fail(
    sh: &Shmem,
    r: xpushmem::Result<Option<Team>>,
    what: &str,
) -> xpushmem::Result<()> {
    match r {
        Err(e) => eprintln!("PE {}: {what}: {e}", sh.my_pe()),
        Ok(_) => panic!("{what}: succeeded on PE {}", sh.my_pe()),
    }
    sh.team_sync(&sh.team_world())
}

pe_test!(
    bad_and_mismatched_split_arguments_fail_everywhere,
    env [crate::coll_common::ENV],
    shm [1, 2, 3, 4, 8],
    fabp [2, 3, 4],
    |sh| {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let w = sh.team_world();
    expect_all_fail(
        sh,
        sh.team_split_strided(&w, n, 1, 1, None),
        "start out of range",
    )?;
    expect_all_fail(sh, sh.team_split_strided(&w, 0, 1, 0, None), "size 0")?;
    expect_all_fail(
        sh,
        sh.team_split_strided(&w, 0, 1, n + 1, None),
        "size too large",
    )?;
    expect_all_fail(
        sh,
        sh.team_split_strided(&w, 0, usize::MAX, 2, None),
        "stride overflow",
    )?;
    if n >= 2 {
        expect_all_fail(sh, sh.team_split_strided(&w, 0, 0, 2, None), "stride 0")?;
        // Only the last PE passes a bad start: every PE fails.
        let start = if me == n - 1 { n } else { 0 };
        expect_all_fail(
            sh,
            sh.team_split_strided(&w, start, 1, 1, None),
            "bad start on one PE",
        )?;
        // Valid but different arguments on PE 0.
        let size = if me == 0 { 1 } else { 2 };
        let r = sh.team_split_strided(&w, 0, 1, size, None);
        if let Err(Error::Mismatch { .. }) = &r {
        } else {
            panic!("different sizes: expected a mismatch error, got {r:?}");
        }
        sh.team_sync(&w)?;
        let r = sh.team_split_2d(&w, if me == 0 { 1 } else { 2 }, None, None);
        assert!(
            matches!(r, Err(Error::Mismatch { .. })),
            "2d mismatch: {r:?}"
        );
        let r = sh.team_split_2d(&w, 0, None, None);
        assert!(
            matches!(r, Err(Error::InvalidArgument { name: "xrange", ref value, .. }) if value == "0"),
            "xrange 0"
        );
    }
    // Everything still works afterwards.
    let t = sh.team_split_strided(&w, 0, 1, n, None)?.expect("everyone");
    sh.team_sync(&t)?;
    sh.team_destroy(t)?;
    sh.barrier_all()
});

pe_test!(
    team_slots_run_out_with_a_clear_error_and_are_reused,
    env [crate::coll_common::ENV, &[("XPUSHMEM_TEAMS_MAX", "6")]],
    shm [2, 3],
    fabp [2, 3],
    |sh| {
        let w = sh.team_world();
        let mut live = Vec::new();
        for _ in 0..4 {
            live.push(
                sh.team_split_strided(&w, 0, 1, sh.n_pes(), None)?
                    .expect("member"),
            );
        }
        match sh.team_split_strided(&w, 0, 1, sh.n_pes(), None) {
            Err(Error::Config { var, .. }) => assert_eq!(var, "XPUSHMEM_TEAMS_MAX"),
            r => panic!("expected slot exhaustion, got {r:?}"),
        }
        for t in live.drain(..) {
            sh.team_destroy(t)?;
        }
        for _ in 0..10 {
            let t = sh
                .team_split_strided(&w, 0, 1, sh.n_pes(), None)?
                .expect("member");
            sh.team_sync(&t)?;
            sh.team_destroy(t)?;
        }
        sh.barrier_all()
    }
);

pe_test!(
    disjoint_teams_sync_concurrently,
    env [crate::coll_common::ENV],
    shm [1, 2, 3, 4, 8],
    fabp [2, 3, 4],
    |sh| {
    // Rows of two PEs sync many times, each row at its own pace; columns then sync across rows.
    let world = sh.team_world();
    let (row, col) = sh.team_split_2d(&world, 2, None, None)?;
    for i in 0..50 {
        sh.team_sync(&row)?;
        if i % 10 == 0 {
            sh.team_sync(&col)?;
        }
    }
    sh.team_destroy(row)?;
    sh.team_destroy(col)?;
    sh.barrier_all()
});

pe_test!(
    two_threads_drive_collectives_on_different_teams,
    env [crate::coll_common::ENV],
    shm [2, 4, 8],
    fabp [2, 4],
    |sh| {
        let world = sh.team_world();
        let (row, col) = sh.team_split_2d(&world, 2, None, None)?;
        let n = sh.n_pes();
        let (a, b) = (sh.calloc::<u64>(8)?, sh.calloc::<u64>(8)?);
        let me = sh.my_pe() as u64;
        let work = |t: &Team, buf: xpushmem::SymSlice<u64>| -> xpushmem::Result<()> {
            let members: Vec<u64> = (0..t.n_pes())
                .map(|i| t.global_pe(i).unwrap() as u64)
                .collect();
            for round in 0..30u64 {
                sh.put(buf, &[me + round; 8], sh.my_pe())?;
                sh.sum_reduce(t, buf, buf, 8)?;
                let mut got = [0u64; 8];
                sh.get(&mut got, buf, sh.my_pe())?;
                let want: u64 = members.iter().map(|p| p + round).sum();
                assert_eq!(got, [want; 8], "round {round} on {t:?}");
                sh.team_sync(t)?;
            }
            Ok(())
        };
        std::thread::scope(|s| {
            let h = s.spawn(|| work(&row, a));
            let r2 = work(&col, b);
            h.join().expect("row thread").and(r2)
        })?;
        let _ = n;
        sh.team_destroy(row)?;
        sh.team_destroy(col)?;
        sh.barrier_all()?;
        sh.free(b)?;
        sh.free(a)
    }
);

/// Issue #30 item 6: teams made by their members only. At 3 PEs: PEs 0 and 1 make a team listed as [1, 0] (PE 2
/// never calls), then PEs 1 and 2 make [1, 2]: numbering follows the list, a team-scoped allocation on each is at
/// the same offset on its members (read back through a world allocation) and carries data between them, and a
/// team barrier and a collective run on it. PEs 0 and 2 then disagree on the tag: both fail with a mismatch, then
/// succeed with the same tag. A bad list fails at once on the PE that passes it.
fn members_only(sh: &Shmem) -> xpushmem::Result<()> {
    let me = sh.my_pe();
    let check = |t: &Team, list: &[usize]| {
        assert_eq!(members(t), list, "team of {list:?}: members in list order");
        assert_eq!(t.my_pe(), list.iter().position(|&p| p == me).unwrap());
        assert_eq!(t.device_id(), -1);
    };
    // The team-space offset each PE got (u64::MAX: none), gathered at every PE through a world allocation.
    let offsets = |off: Option<usize>| -> xpushmem::Result<Vec<u64>> {
        let all = sh.calloc::<u64>(sh.n_pes())?;
        for pe in 0..sh.n_pes() {
            sh.put(
                all.slice(me..me + 1)?,
                &[off.map_or(u64::MAX, |o| o as u64)],
                pe,
            )?;
        }
        sh.barrier_all()?;
        let mut got = vec![0u64; sh.n_pes()];
        sh.get(&mut got, all, me)?;
        sh.barrier_all()?;
        sh.free(all)?;
        Ok(got)
    };
    let mut teams = Vec::new();
    let mut off = None;
    for list in [[1usize, 0], [1, 2]] {
        if !list.contains(&me) {
            continue;
        }
        let t = sh.team_of_members(&list, 42)?;
        check(&t, &list);
        let buf = sh.team_calloc::<u64>(&t, 100)?;
        assert!(buf.heap_offset() >= sh.heap_max(), "in the team space");
        // Each member writes its PE into the next member's copy.
        let next = t.global_pe((t.my_pe() + 1) % t.n_pes())?;
        sh.put(buf, &[me as u64 + 10; 100], next)?;
        sh.team_barrier(&t)?;
        let prev = t.global_pe((t.my_pe() + t.n_pes() - 1) % t.n_pes())?;
        let mut got = vec![0u64; 100];
        sh.get(&mut got, buf, me)?;
        assert_eq!(got, vec![prev as u64 + 10; 100], "team of {list:?}");
        sh.put(buf.slice(0..1)?, &[me as u64 + 1], me)?;
        sh.sum_reduce(&t, buf.slice(1..2)?, buf.slice(0..1)?, 1)?;
        let mut sum = [0u64];
        sh.get(&mut sum, buf.slice(1..2)?, me)?;
        assert_eq!(sum[0], list.iter().map(|&p| p as u64 + 1).sum::<u64>());
        if list == [1, 0] {
            off = Some(buf.heap_offset());
        }
        teams.push((t, buf));
    }
    let got = offsets(off)?;
    assert_eq!(
        got[0], got[1],
        "the [1, 0] team's allocation is symmetric among its members"
    );
    assert_eq!(got[2], u64::MAX);
    if me == 0 || me == 2 {
        let e = sh.team_of_members(&[0, 2], me as u64).unwrap_err();
        assert!(matches!(e, Error::Mismatch { pe: 2, .. }), "{e}");
        let t = sh.team_of_members(&[0, 2], 9)?;
        check(&t, &[0, 2]);
        sh.team_barrier(&t)?;
        sh.team_destroy(t)?;
    }
    let e = sh.team_of_members(&[me, me], 1).unwrap_err();
    assert!(e.to_string().contains("listed twice"), "{e}");
    for (t, buf) in teams {
        sh.team_free(&t, buf)?;
        sh.team_destroy(t)?;
    }
    sh.barrier_all()
}

pe_test!(
    teams_of_members_only,
    env[crate::coll_common::ENV],
    shm[3],
    fab[3],
    |sh| { members_only(sh) }
);
