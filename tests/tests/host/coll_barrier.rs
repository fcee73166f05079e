//! Barrier and sync over every team shape with every algorithm: after a barrier, every member sees the value its
//! left neighbour put before it, round after round.

use crate::coll_common::{destroy, shapes};
use xpushmem::{BarrierAlgo, Cmp, Error};
use xpushmem_tests::pe_test;

pe_test!(
    barrier_orders_puts_every_algorithm_every_shape,
    env [crate::coll_common::ENV],
    shm [1, 2, 3, 4, 8],
    fabp [2, 3, 4],
    |sh| {
    let shapes = shapes(sh)?;
    let slots = sh.calloc::<u64>(shapes.len())?;
    for (k, s) in shapes.iter().enumerate() {
        let Some(t) = &s.team else { continue };
        let (me, n) = (t.my_pe(), t.n_pes());
        let right = t.global_pe((me + 1) % n)?;
        let slot = slots.at(k)?;
        let mut round = 0u64;
        for algo in std::iter::once(BarrierAlgo::Auto).chain(BarrierAlgo::ALL.iter().copied()) {
            for _ in 0..4 {
                round += 1;
                let v = round << 32 | ((me + 1) % n) as u64;
                sh.p(slot, v, right)?;
                sh.team_barrier_with(t, algo)?;
                assert_eq!(
                    sh.g(slot, sh.my_pe())?,
                    round << 32 | me as u64,
                    "{}: {algo} round {round}",
                    s.name
                );
                sh.team_sync_with(t, algo)?;
            }
        }
    }
    sh.barrier_all()?;
    sh.free(slots)?;
    destroy(sh, shapes)
});

pe_test!(
    barrier_algorithm_from_env,
    env [crate::coll_common::ENV, &[("XPUSHMEM_BARRIER_ALGORITHM", "tree")]],
    shm [3],
    fabp [3],
    |sh| {
        let w = sh.team_world();
        for _ in 0..20 {
            sh.team_sync(&w)?;
        }
        assert_eq!(
            "dissemination".parse::<BarrierAlgo>()?,
            BarrierAlgo::Dissemination
        );
        assert!(matches!(
            "bogus".parse::<BarrierAlgo>(),
            Err(Error::InvalidArgument { name: "algorithm", ref value, .. }) if value == "bogus"
        ));
        Ok(())
    }
);

pe_test!(
    unknown_barrier_algorithm_is_an_error,
    env [crate::coll_common::ENV, &[("XPUSHMEM_BARRIER_ALGORITHM", "bogus")]],
    shm [2],
    fabp [2],
    |sh| {
        let w = sh.team_world();
        match sh.team_sync(&w) {
            Err(Error::Config { var, value, reason }) => {
                assert_eq!(var, "XPUSHMEM_BARRIER_ALGORITHM");
                assert_eq!(value, "bogus");
                assert!(reason.contains("dissemination"), "{reason}");
            }
            r => panic!("expected a configuration error, got {r:?}"),
        }
        // An explicit algorithm still works.
        sh.team_sync_with(&w, BarrierAlgo::Linear)
    }
);

pe_test!(
    a_missing_member_times_out,
    // The limit also bounds start-up (the bootstrap's allgather), which over the fabric on a loaded machine took
    // more than 500 ms.
    env [crate::coll_common::ENV, &[("XPUSHMEM_TIMEOUT_MS", "1500")]],
    shm [3],
    fabp [3],
    |sh| {
        let w = sh.team_world();
        let out = sh.calloc::<u64>(1)?;
        // The first collective on the world allocates the team pool: everyone takes part.
        sh.team_sync(&w)?;
        if sh.my_pe() == 0 {
            // Never joins the next one; leaves (without finalize) only once the others gave up and counted out on
            // it (their two limits: each wait here is one limit, so it waits again until they are all out).
            for _ in 0..20 {
                match sh.wait_until(out.at(0)?, Cmp::Eq, (sh.n_pes() - 1) as u64) {
                    Err(Error::Timeout { .. }) => continue,
                    r => r?,
                }
                break;
            }
            std::process::exit(0);
        }
        for algo in [BarrierAlgo::Dissemination, BarrierAlgo::Linear] {
            match sh.team_sync_with(&w, algo) {
                Err(Error::Timeout { op, .. }) => assert_eq!(op, "team_sync"),
                r => panic!("expected a timeout, got {r:?}"),
            }
        }
        sh.atomic_add(out.at(0)?, 1, 0)
    }
);

pe_test!(
    a_lost_member_is_reported,
    env[crate::coll_common::ENV],
    shm[3],
    fabp[3],
    |sh| {
        let w = sh.team_world();
        let v = sh.calloc::<u64>(4)?;
        let out = sh.calloc::<u64>(1)?;
        sh.team_sync(&w)?;
        // PE 2 leaves only once the others are out of team_sync: over a network its memory goes with it, and a
        // member still finishing the sync would meet the loss there instead of in the reduction.
        if sh.my_pe() == 2 {
            sh.wait_until(out.at(0)?, Cmp::Eq, 2)?;
            std::process::exit(0);
        }
        sh.atomic_add(out.at(0)?, 1, 2)?;
        match sh.sum_reduce(&w, v, v, 4) {
            Err(Error::PeerLost { pe, .. }) => assert_eq!(pe, 2),
            r => panic!("expected a lost peer, got {r:?}"),
        }
        Ok(())
    }
);
