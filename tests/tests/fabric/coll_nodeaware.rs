//! Node-aware (hierarchical) collectives on jobs that mix same-node and remote peers: barriers and syncs,
//! broadcast from every root, sum/max reductions (integers, and floats in the documented order), fcollect, on the
//! world, on a split team and on a reversed team, each checked against a reference the test computes on its own;
//! plus the proof that the hierarchical path ran (`Shmem::node_aware_stats`, `Shmem::team_barrier_algorithm`,
//! `Shmem::team_node_groups` against the test's own grouping), mismatch detection across the hierarchy (a sync
//! meeting a barrier, an eager exchange meeting a barrier) and a PE killed inside a hierarchical barrier.
//!
//! - `loopback_*`: PEs on one host split into nodes with `XPUSHMEM_NODE_ID` (same node: shm; other node: the
//!   fabric over loopback); `forced_fabric_4pe` puts every peer on the fabric (no groups: flat algorithms).
//! - `netns_*`: PEs in two network namespaces (as two hosts) started with the unique-ID bootstrap.
//!
//! Skipped (with a message) without the fabric transport; the namespace tests also without root or `ip`.

use crate::fabric_common::fabric_available;
use crate::fabric_common::netns::{cannot_run, run_uid_job, uid_init, Netns};
use xpushmem::coll::ReduceOp;
use xpushmem::{
    BarrierAlgo, BroadcastAlgo, CollectAlgo, Error, ReduceAlgo, Result, Shmem, SymSlice, Team,
};
use xpushmem_tests::{assert_success, is_pe_of, ref_vec, reference, spawn_pes_with, test_name};

/// Elements of the large (not eager) cases: more than a message of the exchange holds at these team sizes.
const LARGE: usize = 3000;

/// The test's own grouping of a team's members (global PEs in team order) by node: groups in the order of their
/// first member, members in team order, as team ranks.
fn expected_groups(members: &[usize], node: &dyn Fn(usize) -> usize) -> Vec<Vec<usize>> {
    let mut keys: Vec<usize> = Vec::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (rank, &pe) in members.iter().enumerate() {
        let k = node(pe);
        match keys.iter().position(|&x| x == k) {
            Some(g) => groups[g].push(rank),
            None => {
                keys.push(k);
                groups.push(vec![rank]);
            }
        }
    }
    groups
}

/// Symmetric buffers of the checks (allocation is collective over the world).
struct Bufs {
    src: SymSlice<u64>,
    dst: SymSlice<u64>,
    ints: SymSlice<i64>,
    out: SymSlice<i64>,
    floats: SymSlice<f64>,
    fout: SymSlice<f64>,
    slot: SymSlice<u64>,
}

impl Bufs {
    fn new(sh: &Shmem) -> Result<Bufs> {
        let n = sh.n_pes();
        Ok(Bufs {
            src: sh.calloc::<u64>(n * LARGE)?,
            dst: sh.calloc::<u64>(n * LARGE)?,
            ints: sh.calloc::<i64>(LARGE)?,
            out: sh.calloc::<i64>(LARGE)?,
            floats: sh.calloc::<f64>(LARGE)?,
            fout: sh.calloc::<f64>(LARGE)?,
            slot: sh.calloc::<u64>(1)?,
        })
    }
}

/// Every check on team `t`, whose members are the global PEs `members` in team order; `node` is the test's own
/// view of which PEs share memory.
fn check_team(
    sh: &Shmem,
    t: &Team,
    members: &[usize],
    node: &dyn Fn(usize) -> usize,
    salt: u64,
    b: &Bufs,
) -> Result<()> {
    let (r, m, me) = (t.my_pe(), t.n_pes(), sh.my_pe());
    assert_eq!(members.len(), m, "team size");
    assert_eq!(members[r], me, "this PE's rank in the team");
    let groups = expected_groups(members, node);
    assert_eq!(sh.team_node_groups(t), groups, "node groups of {t:?}");
    let pays = groups.len() > 1 && groups.iter().any(|g| g.len() > 1);
    // An explicit choice of the flat agreement is honoured on any team.
    let flat_env = std::env::var("XPUSHMEM_BARRIER_ALGORITHM").is_ok_and(|v| v == "dissemination");
    let hier_agreement = pays && !flat_env;
    let auto = sh.team_barrier_algorithm(t)?;
    let want_auto = if hier_agreement {
        BarrierAlgo::Hierarchical
    } else if !flat_env && (3..=xpushmem::algo::ALL_PAIRS_UP_TO).contains(&m) {
        BarrierAlgo::AllPairs
    } else {
        BarrierAlgo::Dissemination
    };
    assert_eq!(auto, want_auto, "Auto barrier of {t:?} (groups {groups:?})");
    let cap = sh.team_eager_capacity(t);
    let before = sh.node_aware_stats();
    // Lower bound of the agreements that take the Auto pattern, and the explicitly hierarchical ones.
    let (mut auto_agreements, mut explicit_hier) = (0u64, 0u64);
    let (mut hier_bcasts, mut hier_reduces, mut hier_collects) = (0u64, 0u64, 0u64);

    // Barriers: a put to the right neighbour is visible after the barrier, round after round.
    let right = members[(r + 1) % m];
    let slot = b.slot.at(0)?;
    for (k, algo) in [
        BarrierAlgo::Auto,
        BarrierAlgo::Hierarchical,
        BarrierAlgo::Dissemination,
    ]
    .into_iter()
    .enumerate()
    {
        for round in 0..3u64 {
            let tag = salt << 40 | (k as u64 * 10 + round) << 20;
            sh.p(slot, tag | ((r + 1) % m) as u64, right)?;
            sh.team_barrier_with(t, algo)?;
            assert_eq!(
                sh.g(slot, me)?,
                tag | r as u64,
                "{algo} barrier round {round}"
            );
            sh.team_sync_with(t, algo)?;
            match algo {
                BarrierAlgo::Auto => auto_agreements += 2,
                BarrierAlgo::Hierarchical => explicit_hier += 2,
                _ => {}
            }
        }
    }

    // Broadcast from every root, eager-sized and large, Auto and explicitly hierarchical.
    for (root, &root_pe) in members.iter().enumerate() {
        for len in [3usize, LARGE] {
            for algo in [BroadcastAlgo::Auto, BroadcastAlgo::Hierarchical] {
                let s = salt ^ (len as u64) << 8 ^ (root as u64) << 16;
                sh.put(b.dst.slice(..len)?, &vec![u64::MAX; len], me)?;
                sh.put(b.src.slice(..len)?, &ref_vec::<u64>(me, len, s), me)?;
                sh.team_barrier(t)?;
                sh.broadcast_with(t, b.dst, b.src, len, root, algo)?;
                let mut got = vec![0u64; len];
                sh.get(&mut got, b.dst.slice(..len)?, me)?;
                assert!(
                    got == ref_vec::<u64>(root_pe, len, s),
                    "{algo} broadcast of {len} from team rank {root} on {t:?}"
                );
                let eager = len * 8 <= cap;
                auto_agreements += 1 + u64::from(!eager);
                let hier = algo == BroadcastAlgo::Hierarchical || (pays && !eager && m > 2);
                hier_bcasts += u64::from(hier);
            }
        }
    }

    // Reductions: integer sum (wrapping) and max, and a float sum checked bit for bit against the documented
    // order of the algorithm that ran; out of place and in place.
    for len in [4usize, LARGE] {
        for algo in [
            ReduceAlgo::Auto,
            ReduceAlgo::Hierarchical,
            ReduceAlgo::Linear,
        ] {
            let eager = len * 8 <= cap;
            let hier =
                algo == ReduceAlgo::Hierarchical || (algo == ReduceAlgo::Auto && pays && !eager);
            for op in [ReduceOp::Sum, ReduceOp::Max] {
                let s = salt ^ 77 ^ (len as u64) << 8;
                let val = |pe: usize, i: usize| reference(pe, i, s) as i64;
                let mine: Vec<i64> = (0..len).map(|i| val(me, i)).collect();
                let in_place = op == ReduceOp::Max;
                sh.put(b.ints.slice(..len)?, &mine, me)?;
                sh.team_barrier(t)?;
                let dest = if in_place { b.ints } else { b.out };
                sh.reduce_with(t, op, dest, b.ints, len, algo)?;
                let mut got = vec![0i64; len];
                sh.get(&mut got, dest.slice(..len)?, me)?;
                let want: Vec<i64> = (0..len)
                    .map(|i| {
                        let v = members.iter().map(|&pe| val(pe, i));
                        match op {
                            ReduceOp::Sum => v.fold(0i64, i64::wrapping_add),
                            _ => v.max().unwrap_or(i64::MIN),
                        }
                    })
                    .collect();
                assert!(got == want, "{algo} {op:?} of {len} int64 on {t:?}");
                auto_agreements += 1 + u64::from(!eager);
                hier_reduces += u64::from(hier);
            }
            // Floats with fractions: the result depends on the order; every member must get the documented one.
            let s = salt ^ 99 ^ (len as u64) << 8;
            let val =
                |pe: usize, i: usize| (reference(pe, i, s) % 1_000_003) as f64 / 7.0 - 70_000.0;
            let mine: Vec<f64> = (0..len).map(|i| val(me, i)).collect();
            sh.put(b.floats.slice(..len)?, &mine, me)?;
            sh.team_barrier(t)?;
            sh.reduce_with(t, ReduceOp::Sum, b.fout, b.floats, len, algo)?;
            let mut got = vec![0f64; len];
            sh.get(&mut got, b.fout.slice(..len)?, me)?;
            let resolved_eager = !hier && algo == ReduceAlgo::Auto && eager;
            if hier {
                // Each node's members in team order, then the nodes' partials in node order.
                let want: Vec<f64> = (0..len)
                    .map(|i| {
                        let part = |g: &Vec<usize>| {
                            g[1..]
                                .iter()
                                .fold(val(members[g[0]], i), |a, &q| a + val(members[q], i))
                        };
                        groups[1..]
                            .iter()
                            .fold(part(&groups[0]), |a, g| a + part(g))
                    })
                    .collect();
                let same = got
                    .iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(
                    same,
                    "hierarchical float sum of {len} on {t:?}: not the documented order"
                );
            } else if algo == ReduceAlgo::Linear || resolved_eager {
                // Member order.
                let want: Vec<f64> = (0..len)
                    .map(|i| {
                        members[1..]
                            .iter()
                            .fold(val(members[0], i), |a, &q| a + val(q, i))
                    })
                    .collect();
                let same = got
                    .iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{algo} float sum of {len} on {t:?}: not member order");
            }
            auto_agreements += 1 + u64::from(!eager);
            hier_reduces += u64::from(hier);
        }
    }

    // fcollect, eager-sized and not, Auto and explicitly hierarchical; collect with a different count per member.
    for (nel, algo) in [
        (5usize, CollectAlgo::Auto),
        (600, CollectAlgo::Auto),
        (5, CollectAlgo::Hierarchical),
        (600, CollectAlgo::Hierarchical),
    ] {
        let s = salt ^ 55 ^ (nel as u64) << 8;
        sh.put(b.src.slice(..nel)?, &ref_vec::<u64>(me, nel, s), me)?;
        sh.team_barrier(t)?;
        sh.fcollect_with(t, b.dst, b.src.slice(..nel)?, nel, algo)?;
        let mut all = vec![0u64; m * nel];
        sh.get(&mut all, b.dst.slice(..m * nel)?, me)?;
        for (q, &pe) in members.iter().enumerate() {
            assert!(
                all[q * nel..(q + 1) * nel] == ref_vec::<u64>(pe, nel, s)[..],
                "{algo} fcollect block {q} of {nel} on {t:?}"
            );
        }
        let eager = nel * 8 <= cap;
        auto_agreements += 1 + u64::from(!eager);
        hier_collects += u64::from(algo == CollectAlgo::Hierarchical || (pays && !eager));
    }
    let count = |q: usize| 1 + (q * 37) % 500;
    let total: usize = (0..m).map(count).sum();
    let s = salt ^ 66;
    sh.put(
        b.src.slice(..count(r))?,
        &ref_vec::<u64>(me, count(r), s),
        me,
    )?;
    sh.team_barrier(t)?;
    sh.collect(t, b.dst, b.src.slice(..count(r))?, count(r))?;
    let mut all = vec![0u64; total];
    sh.get(&mut all, b.dst.slice(..total)?, me)?;
    let want: Vec<u64> = members
        .iter()
        .enumerate()
        .flat_map(|(q, &pe)| ref_vec::<u64>(pe, count(q), s))
        .collect();
    assert!(all == want, "collect of {total} on {t:?}");
    auto_agreements += 2;
    hier_collects += u64::from(pays);
    sh.team_barrier(t)?;
    auto_agreements += 1;

    // Which paths ran (counted on this PE).
    let after = sh.node_aware_stats();
    assert_eq!(
        after.broadcasts - before.broadcasts,
        hier_bcasts,
        "hierarchical broadcasts on {t:?}"
    );
    assert_eq!(
        after.reductions - before.reductions,
        hier_reduces,
        "hierarchical reductions on {t:?}"
    );
    assert_eq!(
        after.collects - before.collects,
        hier_collects,
        "hierarchical collects on {t:?}"
    );
    let agreements = after.agreements - before.agreements;
    if hier_agreement {
        assert!(
            agreements >= auto_agreements + explicit_hier,
            "hierarchical agreements on {t:?}: {agreements}, expected at least {}",
            auto_agreements + explicit_hier
        );
    } else {
        assert_eq!(
            agreements, explicit_hier,
            "hierarchical agreements on the flat {t:?}"
        );
    }
    println!(
        "PE {me}: {t:?} groups {groups:?}: {agreements} hierarchical agreements, {hier_bcasts} broadcasts, \
         {hier_reduces} reductions"
    );
    Ok(())
}

/// Calls that disagree across the hierarchy fail on every member with a mismatch, and the team stays usable.
fn mismatches(sh: &Shmem, b: &Bufs) -> Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let w = sh.team_world();
    // The last PE (on the last node) syncs while the others barrier.
    let r = if me == n - 1 {
        sh.team_sync(&w)
    } else {
        sh.team_barrier(&w)
    };
    assert!(
        matches!(r, Err(Error::Mismatch { .. })),
        "sync against barrier: {r:?}"
    );
    sh.team_barrier(&w)?;
    // PE 0 runs an eager broadcast (an exchange) while the others barrier.
    let r = if me == 0 {
        sh.broadcast(&w, b.dst, b.src, 1, 0)
    } else {
        sh.team_barrier(&w)
    };
    assert!(
        matches!(r, Err(Error::Mismatch { .. })),
        "exchange against barrier: {r:?}"
    );
    sh.team_barrier(&w)?;
    // PE 1 (not a leader in the contiguous layouts) runs an eager reduction while the others barrier.
    let r = if me == 1 {
        sh.sum_reduce(&w, b.out, b.ints, 1)
    } else {
        sh.team_barrier(&w)
    };
    assert!(
        matches!(r, Err(Error::Mismatch { .. })),
        "exchange of PE 1 against barrier: {r:?}"
    );
    sh.team_barrier(&w)?;
    // A reduction with another count on the last PE.
    let k = if me == n - 1 { 3 } else { 4 };
    let r = sh.reduce_with(
        &w,
        ReduceOp::Sum,
        b.out,
        b.ints,
        k,
        ReduceAlgo::Hierarchical,
    );
    assert!(
        matches!(r, Err(Error::Mismatch { .. })),
        "reductions of different counts: {r:?}"
    );
    sh.barrier_all()
}

/// The body of every job: `layout[pe]` is PE pe's node (`forced`: every peer on the fabric).
fn body(sh: &Shmem, layout: &[usize], forced: bool) -> Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    assert_eq!(layout.len(), n, "layout of the job");
    for pe in (0..n).filter(|&p| p != me) {
        // Same node: shared memory (`shm`, or Level Zero IPC `ze` for device heaps); else the fabric.
        let same = !forced && layout[pe] == layout[me];
        let route = sh.transport_name(pe);
        assert_eq!(
            route == "fabric",
            !same,
            "route {route} of PE {pe} from PE {me}"
        );
    }
    if std::env::var("XPUSHMEM_HEAP").is_ok_and(|v| v == "device") {
        assert_eq!(
            sh.heap_kind(),
            xpushmem::HeapKind::Device,
            "the heap of PE {me}"
        );
    }
    let node = |pe: usize| if forced { 1000 + pe } else { layout[pe] };
    let b = Bufs::new(sh)?;
    let world = sh.team_world();
    let all: Vec<usize> = (0..n).collect();
    check_team(sh, &world, &all, &node, 10, &b)?;
    // PEs 1.. (a split that leaves PE 0 out), and every PE in reverse order (the groups follow team order).
    let tail = sh.team_split_strided(&world, 1, 1, n - 1, None)?;
    if let Some(t) = &tail {
        check_team(sh, t, &all[1..], &node, 20, &b)?;
    }
    let rev = sh
        .team_split_strided_signed(&world, n - 1, -1, n, None)?
        .expect("every PE is in the reversed team");
    let back: Vec<usize> = (0..n).rev().collect();
    check_team(sh, &rev, &back, &node, 30, &b)?;
    mismatches(sh, &b)?;
    if let Some(t) = tail {
        sh.team_destroy(t)?;
    }
    sh.team_destroy(rev)?;
    sh.barrier_all()?;
    println!("verdict PE {me}: OK");
    Ok(())
}

/// The node of each PE from `NA_LAYOUT` (comma-separated), set by the launcher.
fn layout_from_env() -> Vec<usize> {
    std::env::var("NA_LAYOUT")
        .expect("NA_LAYOUT set by the launcher")
        .split(',')
        .map(|s| s.parse().expect("a node number"))
        .collect()
}

/// Run `name` on one host with PE pe on node `layout[pe]` (`XPUSHMEM_NODE_ID`), or with every peer forced onto the
/// fabric.
fn loopback(name: &str, layout: &[usize], forced: bool, extra: &[(&str, &str)]) {
    if is_pe_of(name) {
        let layout = layout_from_env();
        let rank = xpushmem_tests::launcher_rank();
        if !forced {
            // Before init, in this single-threaded PE process: its node.
            std::env::set_var("XPUSHMEM_NODE_ID", format!("node{}", layout[rank]));
        }
        xpushmem_tests::run_pe(|sh| body(sh, &layout, forced));
    }
    if !fabric_available() {
        eprintln!("skipped {name}: this build has no fabric transport");
        return;
    }
    let spec: Vec<String> = layout.iter().map(|x| x.to_string()).collect();
    let spec = spec.join(",");
    let mut env = vec![("NA_LAYOUT", spec.as_str())];
    if forced {
        env.push(("XPUSHMEM_TRANSPORT", "fabric"));
    }
    env.extend_from_slice(extra);
    let out = spawn_pes_with(name, layout.len(), &env);
    assert_success(name, layout.len(), &out);
}

macro_rules! loopback_test {
    ($name:ident, $layout:expr, $forced:expr) => {
        loopback_test!($name, $layout, $forced, &[]);
    };
    ($name:ident, $layout:expr, $forced:expr, $env:expr) => {
        #[test]
        fn $name() {
            loopback(
                &test_name(module_path!(), stringify!($name)),
                &$layout,
                $forced,
                $env,
            );
        }
    };
}

loopback_test!(loopback_2plus2_4pe, [0, 0, 1, 1], false);
loopback_test!(loopback_2plus1_3pe, [0, 0, 1], false);
loopback_test!(loopback_interleaved_4pe, [0, 1, 0, 1], false);
loopback_test!(loopback_3plus2_5pe, [0, 0, 0, 1, 1], false);
loopback_test!(loopback_three_nodes_5pe, [0, 0, 1, 2, 2], false);
loopback_test!(forced_fabric_4pe, [0, 0, 1, 1], true);
// The flat agreement chosen through the environment stays flat on a team that spans nodes.
loopback_test!(
    explicit_dissemination_2plus2_4pe,
    [0, 0, 1, 1],
    false,
    &[("XPUSHMEM_BARRIER_ALGORITHM", "dissemination")]
);

/// More members on a node than a leader hears from directly (fan-in 8): the intra-node tree has two levels.
/// Barriers and small and large reductions only (11 PEs share the machine's cores).
#[test]
fn loopback_10plus2_barrier_and_reduce_12pe() {
    let name = test_name(module_path!(), "loopback_10plus2_barrier_and_reduce_12pe");
    let layout = [0usize, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1];
    if is_pe_of(&name) {
        let rank = xpushmem_tests::launcher_rank();
        std::env::set_var("XPUSHMEM_NODE_ID", format!("node{}", layout[rank]));
        xpushmem_tests::run_pe(|sh| {
            let (me, n) = (sh.my_pe(), sh.n_pes());
            let w = sh.team_world();
            assert_eq!(sh.team_barrier_algorithm(&w)?, BarrierAlgo::Hierarchical);
            let slot = sh.calloc::<u64>(1)?.at(0)?;
            let x = sh.calloc::<i64>(LARGE)?;
            let before = sh.node_aware_stats();
            for round in 0..20u64 {
                sh.p(slot, round << 8 | ((me + 1) % n) as u64, (me + 1) % n)?;
                sh.team_barrier(&w)?;
                assert_eq!(sh.g(slot, me)?, round << 8 | me as u64, "round {round}");
                sh.team_sync(&w)?;
            }
            for len in [2usize, LARGE] {
                let mine: Vec<i64> = (0..len).map(|i| reference(me, i, 5) as i64).collect();
                sh.put(x.slice(..len)?, &mine, me)?;
                sh.team_barrier(&w)?;
                sh.sum_reduce(&w, x, x, len)?;
                let mut got = vec![0i64; len];
                sh.get(&mut got, x.slice(..len)?, me)?;
                let want: Vec<i64> = (0..len)
                    .map(|i| (0..n).fold(0i64, |a, q| a.wrapping_add(reference(q, i, 5) as i64)))
                    .collect();
                assert!(got == want, "sum of {len}");
            }
            let after = sh.node_aware_stats();
            assert!(
                after.agreements - before.agreements >= 40,
                "{before:?} {after:?}"
            );
            assert_eq!(
                after.reductions - before.reductions,
                1,
                "the large reduction"
            );
            println!("verdict PE {me}: OK");
            sh.barrier_all()
        });
    }
    if !fabric_available() {
        eprintln!("skipped {name}: this build has no fabric transport");
        return;
    }
    let out = spawn_pes_with(&name, layout.len(), &[]);
    assert_success(&name, layout.len(), &out);
}

/// PE `victim` of a 2+2 job is killed while the others are in hierarchical collectives: every survivor fails
/// with `PeerLost` naming it, well within the wait limit, and no process is left.
fn peer_death(name: &str, victim: usize) {
    use std::time::Duration;
    let layout = [0usize, 0, 1, 1];
    let n = layout.len();
    if is_pe_of(name) {
        let rank = xpushmem_tests::launcher_rank();
        std::env::set_var("XPUSHMEM_NODE_ID", format!("node{}", layout[rank]));
        xpushmem_tests::run_pe(|sh| {
            let me = sh.my_pe();
            assert_eq!(
                sh.team_barrier_algorithm(&sh.team_world())?,
                BarrierAlgo::Hierarchical
            );
            let v = sh.calloc::<i64>(LARGE)?;
            let gone = sh.calloc::<u64>(1)?.at(0)?;
            sh.barrier_all()?;
            // The victim dies only once the others are out of the barrier: each tells it so.
            if me == victim {
                sh.wait_until(gone, xpushmem::Cmp::Ge, (n - 1) as u64)?;
                let _ = rustix::process::kill_process(
                    rustix::process::getpid(),
                    rustix::process::Signal::KILL,
                );
            }
            sh.atomic_add(gone, 1, victim)?;
            let start = std::time::Instant::now();
            let w = sh.team_world();
            let r = match me % 3 {
                0 => sh.barrier_all(),
                1 => sh.sum_reduce(&w, v, v, LARGE),
                _ => sh.team_sync(&w),
            };
            match r {
                Err(Error::PeerLost { pe, .. }) if pe == victim => {
                    println!("verdict PE {me}: PeerLost after {:?} OK", start.elapsed());
                    Ok(())
                }
                r => panic!("expected PE {victim} lost, got {r:?}"),
            }
        });
    }
    if !fabric_available() {
        eprintln!("skipped {name}: this build has no fabric transport");
        return;
    }
    let mut job = xpushmem_tests::pe_job(name, n, &[("XPUSHMEM_TIMEOUT_MS", "30000")]);
    job.timeout = Some(Duration::from_secs(90));
    job.stop_on_failure = false;
    let out = job.run().expect("launch");
    crate::fabric_common::assert_peer_lost(name, &out, victim);
    let left = xpushmem_tests::processes_of(name);
    assert!(left.is_empty(), "processes of the job left: {left:?}");
}

#[test]
fn peer_death_of_a_member_is_peer_lost_4pe() {
    peer_death(
        &test_name(module_path!(), "peer_death_of_a_member_is_peer_lost_4pe"),
        3,
    );
}

#[test]
fn peer_death_of_a_leader_is_peer_lost_4pe() {
    peer_death(
        &test_name(module_path!(), "peer_death_of_a_leader_is_peer_lost_4pe"),
        2,
    );
}

/// Run `name` at `n` PEs over two network namespaces (PEs in contiguous blocks), unique-ID start.
fn netns(name: &str, n: usize) {
    // The test's full name (module::case), which its PEs are run with.
    let name: &str = &xpushmem_tests::test_name(module_path!(), name);
    if is_pe_of(name) {
        let r = (|| {
            let sh = uid_init()?;
            let layout: Vec<usize> = (0..n)
                .map(|pe| crate::fabric_common::node_of(pe, n, 2))
                .collect();
            body(&sh, &layout, false)?;
            sh.finalize()
        })();
        match r {
            Ok(()) => std::process::exit(0),
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(1);
            }
        }
    }
    if let Some(why) = cannot_run() {
        eprintln!("skipped {name}: {why}");
        return;
    }
    let ns =
        Netns::create(&format!("n{n}")).unwrap_or_else(|e| panic!("setting up namespaces: {e}"));
    let out = run_uid_job(&ns, name, n, 60_000, &[("XPUSHMEM_SYMMETRIC_SIZE", "64M")]);
    let left: Vec<String> = (0..2).flat_map(|i| ns.pids(i)).collect();
    drop(ns);
    let all: String = out
        .iter()
        .enumerate()
        .map(|(pe, (st, log))| format!("---- PE {pe} ({st:?}) ----\n{log}"))
        .collect();
    for (pe, (st, log)) in out.iter().enumerate() {
        assert!(st.is_some(), "{name}: PE {pe} hung\n{all}");
        assert_eq!(st.and_then(|s| s.code()), Some(0), "{name}: PE {pe}\n{all}");
        assert!(
            log.contains(&format!("verdict PE {pe}: OK")),
            "{name}: PE {pe}\n{all}"
        );
    }
    assert!(
        left.is_empty(),
        "{name}: processes left in the namespaces: {left:?}"
    );
}

#[test]
fn netns_2plus2_4pe() {
    netns("netns_2plus2_4pe", 4);
}

#[test]
fn netns_2plus1_3pe() {
    netns("netns_2plus1_3pe", 3);
}

/// The 2+1 job with symmetric heaps on (ze-emu) Level Zero devices: split teams' scratch lives in the device heap,
/// node peers are reached through Level Zero IPC, the other node through the fabric (staged).
#[test]
fn loopback_device_heaps_2plus1_3pe() {
    let name = test_name(module_path!(), "loopback_device_heaps_2plus1_3pe");
    let env = xpushmem_tests::device_env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    loopback(&name, &[0, 0, 1], false, &env);
}
