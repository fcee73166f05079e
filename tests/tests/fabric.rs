//! The fabric transport (libfabric `tcp` over loopback) in jobs that mix it with shared memory: PEs are split into
//! nodes with `XPUSHMEM_NODE_ID` (same node: shm; other node: fabric) or forced onto the fabric
//! (`XPUSHMEM_TRANSPORT=fabric`). One body checks the routes, then RMA, atomics, put-with-signal, barriers, the
//! team collectives, a strided team split and the MoE `all_to_all_vdev`, each against a reference every PE
//! computes on its own. The same body runs across network namespaces in `fabric_netns.rs`.
//!
//! Skipped (with a message) when the build has no fabric transport (libfabric headers missing at build time).

mod fabric_common;

use fabric_common::{fabric_available, mixed_body, node_of};
use xpushmem_tests::{assert_success, is_pe_of, run_pe, spawn_pes_with, test_name};

/// Run `name` at `n` PEs on `nodes` nodes (`0`: every peer forced onto the fabric).
fn mixed(name: &str, n: usize, nodes: usize) {
    if is_pe_of(name) {
        if nodes > 0 {
            let rank: usize = std::env::var("XPUSHMEM_BOOTSTRAP_RANK")
                .expect("rank set by the launcher")
                .parse()
                .expect("rank");
            // Before init, in this single-threaded PE process: its node.
            std::env::set_var(
                "XPUSHMEM_NODE_ID",
                format!("node{}", node_of(rank, n, nodes)),
            );
        }
        run_pe(|sh| mixed_body(sh, nodes));
    }
    if !fabric_available() {
        eprintln!(
            "skipped: this build has no fabric transport (libfabric headers missing at build time)"
        );
        return;
    }
    let env: &[(&str, &str)] = if nodes == 0 {
        &[("XPUSHMEM_TRANSPORT", "fabric")]
    } else {
        &[]
    };
    let out = spawn_pes_with(name, n, env);
    assert_success(name, n, &out);
}

macro_rules! mixed_test {
    ($name:ident, $n:expr, $nodes:expr) => {
        #[test]
        fn $name() {
            mixed(&test_name(module_path!(), stringify!($name)), $n, $nodes);
        }
    };
}

mixed_test!(forced_fabric_2pe, 2, 0);
mixed_test!(forced_fabric_3pe, 3, 0);
mixed_test!(two_nodes_3pe, 3, 2);
mixed_test!(two_nodes_4pe, 4, 2);
mixed_test!(four_nodes_4pe, 4, 4);

/// PE 2 (alone on the second node, reached through the fabric) is killed while the others are in a barrier and a
/// reduction: they must fail with `PeerLost` naming it well within the wait limit, and no process may be left.
#[test]
fn peer_death_across_nodes_is_peer_lost_3pe() {
    use std::time::Duration;
    use xpushmem::Error;
    let name = test_name(module_path!(), "peer_death_across_nodes_is_peer_lost_3pe");
    let (n, nodes) = (3, 2);
    if is_pe_of(&name) {
        let rank: usize = std::env::var("XPUSHMEM_BOOTSTRAP_RANK")
            .expect("rank")
            .parse()
            .expect("rank");
        std::env::set_var(
            "XPUSHMEM_NODE_ID",
            format!("node{}", node_of(rank, n, nodes)),
        );
        run_pe(|sh| {
            assert_eq!(
                sh.transport_name(2),
                if sh.my_pe() == 2 { "local" } else { "fabric" }
            );
            let v = sh.calloc::<i64>(4)?;
            let gone = sh.calloc::<u64>(1)?.at(0)?;
            sh.barrier_all()?;
            // PE 2 dies only once the others are out of the barrier (a dead PE's memory is gone, unlike a
            // mapping's): each tells it so.
            if sh.my_pe() == 2 {
                sh.wait_until(gone, xpushmem::Cmp::Ge, 2)?;
                let _ = rustix::process::kill_process(
                    rustix::process::getpid(),
                    rustix::process::Signal::KILL,
                );
            }
            sh.atomic_add(gone, 1, 2)?;
            let start = std::time::Instant::now();
            let r = if sh.my_pe() == 0 {
                sh.barrier_all()
            } else {
                sh.sum_reduce(&sh.team_world(), v, v, 4)
            };
            match r {
                Err(Error::PeerLost { pe: 2, .. }) => {
                    println!(
                        "verdict PE {}: PeerLost after {:?} OK",
                        sh.my_pe(),
                        start.elapsed()
                    );
                    Ok(())
                }
                r => panic!("expected PE 2 lost, got {r:?}"),
            }
        });
    }
    if !fabric_available() {
        eprintln!(
            "skipped: this build has no fabric transport (libfabric headers missing at build time)"
        );
        return;
    }
    let mut job = xpushmem_tests::pe_job(&name, n, &[("XPUSHMEM_TIMEOUT_MS", "30000")]);
    job.timeout = Some(Duration::from_secs(90));
    job.stop_on_failure = false;
    let out = job.run().expect("launch");
    fabric_common::assert_peer_lost(&name, &out, 2);
    let left = xpushmem_tests::processes_of(&name);
    assert!(left.is_empty(), "processes of the job left: {left:?}");
}

/// Every PE adds to every PE's words, its own through CPU atomics and the others through the fabric, while the
/// owner may apply the remote ones on another thread (progress thread): no update may be lost, so the provider's
/// atomics must be atomic with respect to the CPU's. Also with every atomic but compare-and-swap emulated.
fn concurrent_atomics(name: &str, n: usize, env: &[(&str, &str)]) {
    const K: u64 = 400;
    if is_pe_of(name) {
        run_pe(|sh| {
            let (me, n) = (sh.my_pe(), sh.n_pes());
            let w64 = sh.calloc::<u64>(1)?.at(0)?;
            let w32 = sh.calloc::<u32>(1)?.at(0)?;
            sh.barrier_all()?;
            let mut seen = 0u32;
            for _ in 0..K {
                for pe in (0..n).map(|k| (me + k) % n) {
                    sh.atomic_add(w64, 1, pe)?;
                    seen = seen.max(sh.atomic_fetch_add(w32, 3u32, pe)?);
                }
            }
            sh.barrier_all()?;
            assert_eq!(
                sh.atomic_fetch(w64, me)?,
                K * n as u64,
                "64-bit adds on PE {me}"
            );
            assert_eq!(
                sh.atomic_fetch(w32, me)?,
                3 * (K * n as u64) as u32,
                "32-bit fetch-adds on PE {me}"
            );
            assert!(
                seen < 3 * (K * n as u64) as u32 && seen % 3 == 0,
                "fetched {seen}"
            );
            sh.barrier_all()
        });
    }
    if !fabric_available() {
        eprintln!(
            "skipped: this build has no fabric transport (libfabric headers missing at build time)"
        );
        return;
    }
    let mut all = vec![("XPUSHMEM_TRANSPORT", "fabric")];
    all.extend_from_slice(env);
    let out = spawn_pes_with(name, n, &all);
    assert_success(name, n, &out);
}

#[test]
fn concurrent_atomics_3pe() {
    let name = test_name(module_path!(), "concurrent_atomics_3pe");
    concurrent_atomics(&name, 3, &[]);
}

#[test]
fn concurrent_atomics_progress_thread_3pe() {
    let name = test_name(module_path!(), "concurrent_atomics_progress_thread_3pe");
    concurrent_atomics(&name, 3, &[("XPUSHMEM_PROGRESS_THREAD", "1")]);
}

#[test]
fn concurrent_atomics_cas_emulation_3pe() {
    let name = test_name(module_path!(), "concurrent_atomics_cas_emulation_3pe");
    concurrent_atomics(
        &name,
        3,
        &[
            ("XPUSHMEM_PROGRESS_THREAD", "1"),
            ("XPUSHMEM_FABRIC_ATOMICS", "cas"),
        ],
    );
}
