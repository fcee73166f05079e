//! PEs launched by Open MPI's `mpirun` over two network namespaces joined by a veth pair, as over two hosts
//! (feature `mpi`: the MPI bootstrap). `mpirun` runs in the first namespace; a hostfile names the namespaces as
//! hosts (2 slots each), and Open MPI starts its daemon (orted) on each "host" through a launch agent
//! (`plm_rsh_agent`) that does `ip netns exec HOST unshare --uts sh -c 'hostname HOST && COMMAND'` where ssh
//! would log in. Open MPI's own traffic (oob, and its tcp btl between the namespaces) is confined to the veth
//! subnet. Nothing tells the PEs which node they are on: PEs of one namespace share memory and the others are
//! reached through the fabric (libfabric `tcp` over the veth).
//!
//! - `mpirun_mixed_3pe`/`_4pe`: routes, RMA, atomics, put_signal, barriers, team collectives on the world and a
//!   split, the MoE ops `all_to_all_vdev`, `_2d` and `_2d_offset` (the body of `fabric.rs`).
//! - `mpirun_peer_death_4pe`: a PE of the second namespace is killed while the others wait in a barrier: the job
//!   ends (survivors see `PeerLost`, or mpirun stops them first) well within the wait limit, and no process is
//!   left in either namespace.
//! - `mpirun_examples_4pe`: the examples (device_token_ring with device heaps on ze-emu; built with `--features mpi`: `cargo build -p xpushmem-examples
//!   --features mpi`, as `scripts/test.sh` does), each PE seeing its namespace's PEs as its node.
//!
//! Needs root (namespaces), `ip` and `mpirun`; skips with a message without them or without the fabric transport.

use crate::fabric_common::netns::{cannot_run, example, example_env, Netns, EXAMPLES, SUBNET};
use crate::fabric_common::{node_of, run_if_launched_pe};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use xpushmem_tests::{is_pe_of, run_pe, CASE_VAR};

/// The launch agent: Open MPI calls it as `AGENT [OPTIONS] HOST COMMAND...` (as it would call ssh), and it runs the
/// command in namespace HOST with a host name of its own (a UTS namespace): Open MPI names its shared-memory
/// segments and session directories after the host name, and two "hosts" with one name collide in `/dev/shm` and
/// `/tmp` (its vader btl crashed so). Each host also gets its own session directory. `@DIR@`: the cluster's
/// directory.
const AGENT: &str = r#"#!/bin/sh
while [ "${1#-}" != "$1" ]; do shift; done
host=$1
shift
mkdir -p "@DIR@/$host"
OMPI_MCA_orte_tmpdir_base="@DIR@/$host" exec ip netns exec "$host" unshare --uts /bin/sh -c "hostname $host && $*"
"#;

/// The namespaces, the hostfile and the agent of one mpirun job; all removed on drop.
struct Cluster {
    ns: Netns,
    dir: PathBuf,
}

impl Cluster {
    fn new(tag: &str, name: &str) -> Cluster {
        let ns = Netns::create(tag).unwrap_or_else(|e| panic!("setting up namespaces: {e}"));
        let dir = std::env::temp_dir().join(format!(
            "xpushmem-mpirun-{}-{}",
            std::process::id(),
            name.replace("::", "-")
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let hosts: String = ns.names.iter().map(|h| format!("{h} slots=2\n")).collect();
        std::fs::write(dir.join("hostfile"), hosts).expect("hostfile");
        let agent = dir.join("agent.sh");
        let text = AGENT.replace("@DIR@", &dir.to_string_lossy());
        std::fs::write(&agent, text).expect("agent");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        Cluster { ns, dir }
    }

    /// `mpirun -n N PROGRAM ARGS` from the first namespace with `env` for the PEs; its success and output.
    fn mpirun(
        &self,
        n: usize,
        program: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> (bool, String) {
        let log = self.dir.join("mpirun.log");
        let out = std::fs::File::create(&log).expect("log");
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.ns.names[0], "mpirun"])
            .args(["--allow-run-as-root", "-n", &n.to_string(), "--hostfile"])
            .arg(self.dir.join("hostfile"))
            .args(["--mca", "plm_rsh_agent"])
            .arg(self.dir.join("agent.sh"))
            .args(["--mca", "oob_tcp_if_include", SUBNET])
            .args(["--mca", "btl", "self,vader,tcp"])
            .args(["--mca", "btl_tcp_if_include", SUBNET])
            .args(["--mca", "btl_vader_single_copy_mechanism", "none"])
            .args(["--mca", "orte_tmpdir_base"])
            .arg(self.dir.join("mpirun"));
        for (k, v) in env {
            cmd.args(["-x", &format!("{k}={v}")]);
        }
        let mut child = cmd
            .arg(program)
            .args(args)
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .spawn()
            .expect("mpirun must be installed (scripts/setup.sh installs openmpi-bin)");
        let start = Instant::now();
        let ok = loop {
            if let Some(st) = child.try_wait().expect("wait mpirun") {
                break st.success();
            }
            if start.elapsed() > Duration::from_secs(180) {
                let _ = child.kill();
                let _ = child.wait();
                break false;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        (ok, text)
    }

    /// Processes still living in either namespace (killed).
    fn leftovers(&self) -> Vec<String> {
        // orted may take a moment to exit after mpirun returned.
        let start = Instant::now();
        while (0..2).any(|i| !self.ns.pids(i).is_empty())
            && start.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        self.ns.kill_all()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const LIMIT_MS: &str = "60000";

fn mixed(name: &str, n: usize) {
    // The test's full name (module::case), which its PEs are run with.
    let name: &str = &xpushmem_tests::test_name(module_path!(), name);
    run_if_launched_pe(name, "mpi");
    if let Some(why) = cannot_run() {
        eprintln!("skipped {name}: {why}");
        return;
    }
    let c = Cluster::new(&format!("p{n}"), name);
    let exe = std::env::current_exe().expect("test binary");
    let (ok, text) = c.mpirun(
        n,
        &exe,
        &[name, "--exact", "--nocapture", "--test-threads=1"],
        &[
            (CASE_VAR, name),
            ("XPUSHMEM_BOOTSTRAP", "mpi"),
            ("XPUSHMEM_TIMEOUT_MS", LIMIT_MS),
            ("XPUSHMEM_SYMMETRIC_SIZE", "64M"),
            ("RUST_BACKTRACE", "0"),
        ],
    );
    let left = c.leftovers();
    assert!(ok, "{name}: mpirun failed\n{text}");
    for pe in 0..n {
        assert!(
            text.contains(&format!("verdict PE {pe}: OK")),
            "{name}: PE {pe} gave no verdict\n{text}"
        );
    }
    assert!(left.is_empty(), "{name}: processes left: {left:?}\n{text}");
}

#[test]
fn mpirun_mixed_3pe() {
    mixed("mpirun_mixed_3pe", 3);
}

#[test]
fn mpirun_mixed_4pe() {
    mixed("mpirun_mixed_4pe", 4);
}

#[test]
fn mpirun_examples_4pe() {
    let name: &str = &xpushmem_tests::test_name(module_path!(), "mpirun_examples_4pe");
    if let Some(why) = cannot_run() {
        eprintln!("skipped {name}: {why}");
        return;
    }
    let (n, nodes) = (4, 2);
    let c = Cluster::new("x4", name);
    let mut failures = Vec::new();
    for prog in EXAMPLES {
        let extra = example_env(prog);
        let mut env = vec![("XPUSHMEM_TIMEOUT_MS", LIMIT_MS)];
        env.extend(extra.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let (ok, text) = c.mpirun(n, &example(prog), &[], &env);
        let mut good = ok && text.contains(": ok");
        if prog == "device_token_ring" {
            for pe in 0..n {
                let want = if pe == 0 { n } else { pe };
                good &= text.contains(&format!("PE {pe} of {n} got token {want}: ok"));
            }
        }
        if prog == "hello" {
            for pe in 0..n {
                let node: Vec<usize> = (0..n)
                    .filter(|&q| node_of(q, n, nodes) == node_of(pe, n, nodes))
                    .collect();
                let line = format!("hello from PE {pe} of {n} (node PEs {node:?}, bootstrap mpi)");
                if !text.contains(&line) {
                    good = false;
                    failures.push(format!(
                        "missing `{line}` (examples built without --features mpi?)"
                    ));
                }
            }
        }
        if !good {
            failures.push(format!("---- {prog} ----\n{text}"));
        }
    }
    let left = c.leftovers();
    assert!(failures.is_empty(), "{name}:\n{}", failures.join("\n"));
    assert!(left.is_empty(), "{name}: processes left: {left:?}");
}

#[test]
fn mpirun_peer_death_4pe() {
    let name: &str = &xpushmem_tests::test_name(module_path!(), "mpirun_peer_death_4pe");
    let n = 4;
    if is_pe_of(name) {
        run_pe(|sh| {
            let me = sh.my_pe();
            let gone = sh.calloc::<u64>(1)?.at(0)?;
            sh.barrier_all()?;
            // The victim dies once the others are out of the barrier (they may still need its memory till then).
            if me == n - 1 {
                sh.wait_until(gone, xpushmem::Cmp::Ge, (n - 1) as u64)?;
                let _ = rustix::process::kill_process(
                    rustix::process::getpid(),
                    rustix::process::Signal::KILL,
                );
            }
            sh.atomic_add(gone, 1, n - 1)?;
            let start = Instant::now();
            let verdict = sh.barrier_all();
            // A survivor that leaves at once is itself lost to one that has not looked yet: each stays until
            // every survivor has its verdict (a file each in VERDICT_DIR, at most 20 s), so that all of them
            // judge the victim's death alone.
            let dir = std::path::PathBuf::from(std::env::var("VERDICT_DIR").expect("VERDICT_DIR"));
            let _ = std::fs::write(dir.join(format!("pe{me}")), b"");
            let waited = Instant::now();
            while (0..n - 1).any(|pe| !dir.join(format!("pe{pe}")).exists())
                && waited.elapsed() < Duration::from_secs(20)
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            match verdict {
                Err(xpushmem::Error::PeerLost { pe, .. }) if pe == n - 1 => {
                    println!("verdict PE {me}: PeerLost after {:?}", start.elapsed());
                    Ok(())
                }
                r => panic!("PE {me}: expected PE {} lost, got {r:?}", n - 1),
            }
        });
    }
    if let Some(why) = cannot_run() {
        eprintln!("skipped {name}: {why}");
        return;
    }
    let c = Cluster::new("d4", name);
    let exe = std::env::current_exe().expect("test binary");
    let verdicts = std::env::temp_dir().join(format!("xpushmem-verdicts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&verdicts);
    std::fs::create_dir_all(&verdicts).expect("verdict dir");
    let start = Instant::now();
    let (ok, text) = c.mpirun(
        n,
        &exe,
        &[name, "--exact", "--nocapture", "--test-threads=1"],
        &[
            (CASE_VAR, name),
            ("VERDICT_DIR", verdicts.to_str().expect("utf-8 path")),
            ("XPUSHMEM_BOOTSTRAP", "mpi"),
            ("XPUSHMEM_TIMEOUT_MS", LIMIT_MS),
            ("RUST_BACKTRACE", "0"),
        ],
    );
    let took = start.elapsed();
    let _ = std::fs::remove_dir_all(&verdicts);
    let left = c.leftovers();
    assert!(
        !ok,
        "{name}: mpirun succeeded although a PE was killed\n{text}"
    );
    assert!(
        !text.contains("expected PE"),
        "{name}: a survivor saw something else than the loss\n{text}"
    );
    assert!(
        took < Duration::from_millis(LIMIT_MS.parse().expect("limit")),
        "{name}: the job ended only after {took:?}\n{text}"
    );
    assert!(left.is_empty(), "{name}: processes left: {left:?}\n{text}");
}
