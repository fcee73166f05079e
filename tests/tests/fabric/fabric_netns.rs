//! PEs in two network namespaces joined by a veth pair, as on two hosts: PEs of one namespace share memory (shm),
//! PEs of the other are reached through the fabric transport (libfabric `tcp` over the veth). The job is started
//! with the unique-ID bootstrap the way a framework does it: PE 0 creates the ID (its rendezvous listens on its
//! namespace's address) and hands it to the others through a file; each PE names its node after its namespace
//! (`XPUSHMEM_NODE_ID`: the namespaces share the host name).
//!
//! - `netns_mixed_*`: routes, RMA, atomics, put_signal, barriers, team collectives on the world and a split, the
//!   MoE `all_to_all_vdev` (the body of `fabric.rs`).
//! - `netns_ep_4pe`: expert-parallel dispatch and combine on the host path against the reference (the cases of
//!   `fabric_ep.rs`).
//! - `netns_peer_death_3pe`: the PE alone in the second namespace is killed; the two others fail with `PeerLost`
//!   naming it, well within the wait limit; no process is left in either namespace.
//! - `netns_device_spanning_4pe`: device heaps (ze-emu), 2 PEs per namespace: kernels run barriers in every form,
//!   the collectives and all reductions in the work-group and sub-group forms, 16-bit atomics and typed `g` on
//!   teams spanning the namespaces (members of the other one reached through the host proxy), each against a host
//!   reference (`fabric_device::spanning_body`); then, in the same job, expert-parallel dispatch and combine as
//!   device kernels against the reference (`ops_ep_dev::two_nodes`: the covering set of round trips, an expert id
//!   out of range). `netns_device_spanning_3plus1_4pe`: the spanning checks with 3 PEs in the first namespace and
//!   1 in the second.
//!
//! The test creates and removes the namespaces; it needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and `ip`, and skips
//! with a message without them or without the fabric transport.

use crate::fabric_common::netns::{
    cannot_run, example, example_env, publish_id, wait_all, Netns, EXAMPLES,
};
use crate::fabric_common::ops_ep_ref::ep_round_trips;
use crate::fabric_common::{mixed_body, node_of, run_if_launched_pe};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use xpushmem::{BootstrapSpec, Error, InitAttr, UniqueId};
use xpushmem_tests::mpirun::{
    assert_missing_pe_timeouts, missing_pe, read_when_written, report_dir, SlurmCluster,
};
use xpushmem_tests::CASE_VAR;

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is set for the PEs"))
}

/// One PE: get the unique ID (PE 0 makes it), join, run the case.
fn pe_main() -> ! {
    let rank: usize = env("NETNS_RANK").parse().expect("rank");
    let size: usize = env("NETNS_SIZE").parse().expect("size");
    let nodes: usize = env("NETNS_NODES").parse().expect("nodes");
    let file = PathBuf::from(env("NETNS_ID_FILE"));
    if env("NETNS_CASE") == "serve" {
        // The rendezvous of the examples' jobs: make the ID, publish it, serve until the test ends this process.
        let id = xpushmem::get_unique_id().expect("a unique ID");
        publish_id(&file, id);
        loop {
            std::thread::sleep(Duration::from_secs(600));
        }
    }
    let r = (|| -> xpushmem::Result<()> {
        let uid = if rank == 0 {
            let id = xpushmem::get_unique_id()?;
            publish_id(&file, id);
            id
        } else {
            read_id(&file)
        };
        let sh = xpushmem::init_attr(InitAttr {
            bootstrap: BootstrapSpec::Uid { uid, rank, size },
            ..InitAttr::default()
        })?;
        if env("NETNS_CASE") == "device" {
            let layout = std::env::var(LAYOUT_VAR).ok();
            let node = |pe| node_in(pe, size, nodes, layout.as_deref());
            crate::fabric_device::spanning_body(&sh, &node)?;
            if layout.as_deref().unwrap_or_default().is_empty() {
                // The expert-parallel kernels across the namespaces, in the same job (2 PEs per namespace).
                crate::fabric_common::ops_ep_dev::two_nodes(&sh, &node)?;
            }
            println!("verdict PE {rank}: OK");
            return sh.finalize();
        }
        if env("NETNS_CASE") == "death" {
            let v = sh.calloc::<i64>(4)?;
            let gone = sh.calloc::<u64>(1)?.at(0)?;
            sh.barrier_all()?;
            // The victim dies only once the others are out of the barrier (a dead PE's memory is gone, unlike
            // a mapping's): each tells it so.
            if rank == size - 1 {
                sh.wait_until(gone, xpushmem::Cmp::Ge, (size - 1) as u64)?;
                let _ = rustix::process::kill_process(
                    rustix::process::getpid(),
                    rustix::process::Signal::KILL,
                );
            }
            sh.atomic_add(gone, 1, size - 1)?;
            let start = Instant::now();
            let r = if rank == 0 {
                sh.barrier_all()
            } else {
                sh.sum_reduce(&sh.team_world(), v, v, 4)
            };
            match r {
                Err(Error::PeerLost { pe, .. }) if pe == size - 1 => {
                    println!("verdict PE {rank}: PeerLost after {:?} OK", start.elapsed());
                }
                r => panic!("expected PE {} lost, got {r:?}", size - 1),
            }
            return sh.finalize();
        }
        if env("NETNS_CASE") == "ep" {
            ep_round_trips(&sh)?;
        } else {
            mixed_body(&sh, nodes)?;
        }
        println!("verdict PE {rank}: OK");
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

fn read_id(file: &Path) -> UniqueId {
    let start = Instant::now();
    loop {
        if let Ok(t) = std::fs::read_to_string(file) {
            return t.trim().parse().expect("a unique ID");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the unique ID was never published"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Run `n` PEs of case `case` over the two namespaces; the exit status and output of each.
/// The PEs' namespaces as node letters, one per PE (`aaab`: PEs 0-2 in the first namespace, PE 3 in the second);
/// unset: [`node_of`]'s even split.
const LAYOUT_VAR: &str = "NETNS_LAYOUT";

/// PE `pe`'s namespace (node) of `nodes`: the letter of `layout` at `pe` (`a` = 0), else the even split.
fn node_in(pe: usize, n: usize, nodes: usize, layout: Option<&str>) -> usize {
    match layout.and_then(|l| l.as_bytes().get(pe)) {
        Some(c) => (c - b'a') as usize,
        None => node_of(pe, n, nodes),
    }
}

fn run(name: &str, case: &str, n: usize, limit_ms: u64) {
    run_in(name, case, n, limit_ms, None)
}

/// [`run`] with the PEs placed in the namespaces by `layout` (see [`LAYOUT_VAR`]).
fn run_in(name: &str, case: &str, n: usize, limit_ms: u64, layout: Option<&str>) {
    // The test's full name (module::case), which its PEs are run with.
    let name: &str = &xpushmem_tests::test_name(module_path!(), name);
    if std::env::var(CASE_VAR).is_ok_and(|v| v == name) {
        pe_main();
    }
    if let Some(why) = cannot_run() {
        eprintln!("skipped {name}: {why}");
        return;
    }
    let tag = match (case, layout) {
        ("death", _) => "d",
        ("ep", _) => "q",
        ("device", None) => "v",
        ("device", Some(_)) => "w",
        _ => "m",
    };
    let ns = Netns::create(&format!("{tag}{n}"))
        .unwrap_or_else(|e| panic!("setting up namespaces: {e}"));
    let dir = std::env::temp_dir().join(format!(
        "xpushmem-netns-{}-{}",
        std::process::id(),
        name.replace("::", "-")
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let exe = std::env::current_exe().expect("test binary");
    let nodes = 2;
    // Device heaps on ze-emu and the kernels, linked once here.
    let extra: Vec<(String, String)> = if case == "device" {
        let mut e = xpushmem_tests::device_env();
        e.extend(crate::fabric_device::link_spanning_modules(&dir));
        e
    } else {
        Vec::new()
    };
    let mut children: Vec<Child> = Vec::new();
    for pe in 0..n {
        let i = node_in(pe, n, nodes, layout);
        let log = std::fs::File::create(dir.join(format!("pe{pe}.log"))).expect("log");
        let child = Command::new("ip")
            .args(["netns", "exec", &ns.names[i]])
            .arg(&exe)
            .args([name, "--exact", "--nocapture", "--test-threads=1"])
            .env(CASE_VAR, name)
            .env("NETNS_RANK", pe.to_string())
            .env("NETNS_SIZE", n.to_string())
            .env("NETNS_NODES", nodes.to_string())
            .env("NETNS_CASE", case)
            .env(LAYOUT_VAR, layout.unwrap_or(""))
            .env("NETNS_ID_FILE", dir.join("unique-id"))
            .env("XPUSHMEM_BOOTSTRAP_ADDR", ns.addrs[i])
            .env("XPUSHMEM_TIMEOUT_MS", limit_ms.to_string())
            .env("XPUSHMEM_SYMMETRIC_SIZE", "64M")
            .env("RUST_BACKTRACE", "0")
            .envs(extra.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("ip netns exec");
        children.push(child);
    }
    // Wait for every PE (at most twice the wait limit), then kill what is left.
    let start = Instant::now();
    let mut status = vec![None; n];
    while status.iter().any(Option::is_none)
        && start.elapsed() < Duration::from_millis(2 * limit_ms + 10_000)
    {
        for (pe, c) in children.iter_mut().enumerate() {
            if status[pe].is_none() {
                status[pe] = c.try_wait().expect("wait");
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let elapsed = start.elapsed();
    for (pe, c) in children.iter_mut().enumerate() {
        if status[pe].is_none() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
    let all: String = (0..n)
        .map(|pe| {
            format!(
                "---- PE {pe} in {} ({:?}) ----\n{}",
                ns.names[node_in(pe, n, nodes, layout)],
                status[pe],
                std::fs::read_to_string(dir.join(format!("pe{pe}.log"))).unwrap_or_default()
            )
        })
        .collect();
    let left: Vec<String> = (0..2).flat_map(|i| ns.pids(i)).collect();
    drop(ns);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        status.iter().all(Option::is_some),
        "{name}: the job hung\n{all}"
    );
    use std::os::unix::process::ExitStatusExt;
    for (pe, st) in status.iter().enumerate() {
        let st = st.expect("ended");
        if case == "death" && pe == n - 1 {
            assert_eq!(st.signal(), Some(9), "{name}: the victim PE {pe}\n{all}");
            continue;
        }
        assert_eq!(st.code(), Some(0), "{name}: PE {pe}\n{all}");
        assert!(
            all.contains(&format!("verdict PE {pe}: ")),
            "{name}: PE {pe} gave no verdict\n{all}"
        );
    }
    if case == "death" {
        assert!(
            elapsed < Duration::from_millis(limit_ms),
            "{name}: the loss was seen only after {elapsed:?}\n{all}"
        );
    }
    assert!(
        left.is_empty(),
        "{name}: processes left in the namespaces: {left:?}"
    );
}

#[test]
fn netns_mixed_3pe() {
    run("netns_mixed_3pe", "mixed", 3, 60_000);
}

#[test]
fn netns_mixed_4pe() {
    run("netns_mixed_4pe", "mixed", 4, 60_000);
}

/// Expert-parallel dispatch and combine (host path) with two PEs in each namespace: the covering set of
/// `ops_ep_ref::ep_round_trips` against the reference.
#[test]
fn netns_ep_4pe() {
    run("netns_ep_4pe", "ep", 4, 60_000);
}

#[test]
fn netns_device_spanning_4pe() {
    run("netns_device_spanning_4pe", "device", 4, 60_000);
}

/// The spanning checks with 3 PEs in the first namespace and 1 in the second.
#[test]
fn netns_device_spanning_3plus1_4pe() {
    run_in(
        "netns_device_spanning_3plus1_4pe",
        "device",
        4,
        60_000,
        Some("aaab"),
    );
}

#[test]
fn netns_peer_death_3pe() {
    run("netns_peer_death_3pe", "death", 3, 30_000);
}

/// The examples across the namespaces, 4 PEs (2 per namespace) with the unique-ID start (device_token_ring with
/// device heaps on ze-emu: its kernels reach the other namespace through the host proxy): a rendezvous process in
/// the first namespace makes the ID; each example's PEs get it, their rank and the job size from the environment
/// (as a framework's launcher would set them). Each PE must succeed, see its namespace's PEs as its node, and
/// print the example's success line.
#[test]
fn netns_examples_4pe() {
    let name: &str = &xpushmem_tests::test_name(module_path!(), "netns_examples_4pe");
    if std::env::var(CASE_VAR).is_ok_and(|v| v == name) {
        pe_main();
    }
    if let Some(why) = cannot_run() {
        eprintln!("skipped {name}: {why}");
        return;
    }
    let (n, nodes, limit_ms) = (4, 2, 60_000u64);
    let ns = Netns::create("e4").unwrap_or_else(|e| panic!("setting up namespaces: {e}"));
    let dir = std::env::temp_dir().join(format!(
        "xpushmem-netns-{}-{}",
        std::process::id(),
        name.replace("::", "-")
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut failures = Vec::new();
    for prog in EXAMPLES {
        let id_file = dir.join(format!("{prog}.id"));
        let mut server = Command::new("ip")
            .args(["netns", "exec", &ns.names[0]])
            .arg(std::env::current_exe().expect("test binary"))
            .args([name, "--exact", "--nocapture", "--test-threads=1"])
            .env(CASE_VAR, name)
            .env("NETNS_RANK", "0")
            .env("NETNS_SIZE", n.to_string())
            .env("NETNS_NODES", nodes.to_string())
            .env("NETNS_CASE", "serve")
            .env("NETNS_ID_FILE", &id_file)
            .env("XPUSHMEM_BOOTSTRAP_ADDR", ns.addrs[0])
            .env("XPUSHMEM_TIMEOUT_MS", limit_ms.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("ip netns exec");
        let uid = read_id(&id_file).to_string();
        let mut children: Vec<Child> = (0..n)
            .map(|pe| {
                let i = node_of(pe, n, nodes);
                let log = std::fs::File::create(dir.join(format!("{prog}{pe}.log"))).expect("log");
                Command::new("ip")
                    .args(["netns", "exec", &ns.names[i]])
                    .arg(example(prog))
                    .env("XPUSHMEM_BOOTSTRAP", "uid")
                    .env("XPUSHMEM_BOOTSTRAP_UID", &uid)
                    .env("XPUSHMEM_BOOTSTRAP_RANK", pe.to_string())
                    .env("XPUSHMEM_BOOTSTRAP_NRANKS", n.to_string())
                    .env("XPUSHMEM_TIMEOUT_MS", limit_ms.to_string())
                    .envs(example_env(prog))
                    .stdin(Stdio::null())
                    .stdout(log.try_clone().expect("log"))
                    .stderr(log)
                    .spawn()
                    .expect("ip netns exec")
            })
            .collect();
        let status = wait_all(&mut children, Duration::from_millis(2 * limit_ms));
        let _ = server.kill();
        let _ = server.wait();
        let all: String = (0..n)
            .map(|pe| {
                format!(
                    "---- {prog} PE {pe} in {} ({:?}) ----\n{}",
                    ns.names[node_of(pe, n, nodes)],
                    status[pe],
                    std::fs::read_to_string(dir.join(format!("{prog}{pe}.log")))
                        .unwrap_or_default()
                )
            })
            .collect();
        let mut ok = status.iter().all(|s| s.is_some_and(|s| s.success())) && all.contains(": ok");
        if prog == "hello" {
            for pe in 0..n {
                let node: Vec<usize> = (0..n)
                    .filter(|&q| node_of(q, n, nodes) == node_of(pe, n, nodes))
                    .collect();
                ok &= all.contains(&format!(
                    "hello from PE {pe} of {n} (node PEs {node:?}, bootstrap uid)"
                ));
            }
        }
        if prog == "device_token_ring" {
            for pe in 0..n {
                let want = if pe == 0 { n } else { pe };
                ok &= all.contains(&format!("PE {pe} of {n} got token {want}: ok"));
            }
        }
        if !ok {
            failures.push(all);
        }
    }
    let left = ns.kill_all();
    drop(ns);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        left.is_empty(),
        "{name}: processes left in the namespaces: {left:?}"
    );
}

/// Where the missing-PE job of `netns_srun_4pe` has its PEs write their verdicts (set only for that job).
const MISSING_VAR: &str = "XPUSHMEM_TEST_MISSING_OUT";

/// Slurm with two nodes, one per namespace (`scripts/slurm-cluster.sh` with namespaces: slurmctld and slurmd `n1` in
/// the first, slurmd `n2` in the second, each in a UTS namespace named after its node), and `srun --mpi=pmix -N 2
/// -n 4`: the PMIx bootstrap (chosen by `auto`) starts the job; the launcher's node of each PE (PMIx's local peers)
/// must be its namespace, and the body of the mixed cases runs (shm within a node, the fabric between them). A
/// second job in the same cluster, of 3 PEs, leaves out PE 2 (alone on the second node): the others' init must end
/// at their own limit (3 s) with the timeout of the bootstrap's fence, although Slurm's PMIx server ignores the limit
/// the client gives it.
#[test]
fn netns_srun_4pe() {
    let name: &str = &xpushmem_tests::test_name(module_path!(), "netns_srun_4pe");
    if xpushmem_tests::is_pe_of(name) {
        if let Ok(out) = std::env::var(MISSING_VAR) {
            missing_pe(Path::new(&out), 2, 3);
        }
    }
    run_if_launched_pe(name, "pmix");
    if let Some(why) = cannot_run() {
        eprintln!("skipped {name}: {why}");
        return;
    }
    if !pmix_sys::AVAILABLE {
        eprintln!("skipped {name}: this build has no PMIx bootstrap (install libpmix-dev)");
        return;
    }
    let ns = Netns::create("s4").unwrap_or_else(|e| panic!("setting up namespaces: {e}"));
    let nodes = [(&*ns.names[0], ns.addrs[0]), (&*ns.names[1], ns.addrs[1])];
    let cluster = SlurmCluster::start("netns", Some(nodes)).unwrap_or_else(|e| panic!("{e}"));
    let vars = [
        ("XPUSHMEM_BOOTSTRAP", "auto"),
        ("XPUSHMEM_TIMEOUT_MS", "60000"),
        ("XPUSHMEM_SYMMETRIC_SIZE", "64M"),
    ];
    let args = ["--overcommit", "-N", "2", "-n", "4", "--distribution=block"];
    let st = cluster.srun(name, &args, &vars, Duration::from_secs(150));
    // The second job, of 3 PEs: PE 2, alone in the second namespace, never starts its runtime; the others' init
    // waits in the bootstrap's fence, which Slurm's server does not end at the client's limit (its own is 300 s).
    // (A PE with a node-mate that does arrive would be timed out by that node's libpmix, which ends the job.)
    let out = report_dir("srun-missing");
    let missing_vars = [
        ("XPUSHMEM_BOOTSTRAP", "pmix"),
        ("XPUSHMEM_TIMEOUT_MS", "3000"),
        (MISSING_VAR, out.to_str().expect("a UTF-8 path")),
    ];
    let start = Instant::now();
    let missing_args = ["--overcommit", "-N", "2", "-n", "3", "--distribution=block"];
    let missing_st = cluster.srun(name, &missing_args, &missing_vars, Duration::from_secs(60));
    let missing_took = start.elapsed();
    let verdicts = read_when_written(&[out.join("0"), out.join("1")], Duration::ZERO);
    let _ = std::fs::remove_dir_all(&out);
    let logs = cluster.logs();
    drop(cluster);
    let left: Vec<String> = (0..2).flat_map(|i| ns.pids(i)).collect();
    drop(ns);
    match st {
        Some(st) => assert!(st.success(), "{name}: srun -N 2 -n 4 failed: {st}\n{logs}"),
        None => panic!("{name}: srun -N 2 -n 4 did not end within 150 s\n{logs}"),
    }
    let verdicts = verdicts.unwrap_or_else(|v| {
        panic!(
            "{name}: a job with a missing PE ended ({missing_st:?} after {missing_took:?}) without every other \
             PE's verdict: {v:?}\n{logs}"
        )
    });
    assert_missing_pe_timeouts(&verdicts);
    assert!(
        missing_took < Duration::from_secs(30),
        "{name}: the job with a missing PE took {missing_took:?} (limit 3 s)"
    );
    assert!(
        left.is_empty(),
        "{name}: processes left in the namespaces: {left:?}"
    );
}
