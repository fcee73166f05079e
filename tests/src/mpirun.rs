//! Jobs under Open MPI's `mpirun` (a PMIx server): the MPI bootstrap's and the PMIx bootstrap's suites start a test
//! case's PEs with it, and share the body that checks a job they started.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};
use xpushmem::Cmp;

/// Check a started job: the bootstrap's name, every PE on one node, RMA and atomics to every PE and barriers, each
/// value against [`crate::reference`].
pub fn bootstrap_body(sh: &xpushmem::Shmem, bootstrap: &str) -> xpushmem::Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    assert_eq!(sh.bootstrap_name(), bootstrap);
    assert_eq!(sh.node_pes(), (0..n).collect::<Vec<_>>());
    let buf = sh.calloc::<u64>(n)?;
    let counter = sh.calloc::<u64>(1)?.at(0)?;
    for pe in 0..n {
        sh.p(buf.at(me)?, crate::reference(me, pe, 3), pe)?;
        sh.atomic_add(counter, me as u64 + 1, pe)?;
    }
    sh.barrier_all()?;
    for src in 0..n {
        assert_eq!(sh.g(buf.at(src)?, me)?, crate::reference(src, me, 3));
    }
    sh.wait_until(counter, Cmp::Eq, (n * (n + 1) / 2) as u64)?;
    sh.barrier_all()?;
    Ok(())
}

/// Run test case `name` (this test binary) as `n` processes of `mpirun`, with `vars` exported to them, and return
/// mpirun's exit status; killed and a panic after `limit`.
pub fn mpirun(name: &str, n: usize, vars: &[(&str, &str)], limit: Duration) -> ExitStatus {
    let exe = std::env::current_exe().expect("test binary");
    let start = Instant::now();
    let mut cmd = Command::new("mpirun");
    cmd.args([
        "--oversubscribe",
        "--allow-run-as-root",
        "-n",
        &n.to_string(),
    ])
    .args(["-x", &format!("{}={name}", crate::CASE_VAR)]);
    for (k, v) in vars {
        cmd.args(["-x", &format!("{k}={v}")]);
    }
    let mut child = cmd
        .arg(&exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_btl", "self,vader")
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .spawn()
        .expect("mpirun must be installed (scripts/setup.sh installs openmpi-bin)");
    loop {
        if let Some(st) = child.try_wait().expect("wait mpirun") {
            return st;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("mpirun -n {n} ({name}) did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A Slurm cluster of this test run (`scripts/slurm-cluster.sh`: munged, slurmctld and slurmd in a folder of their
/// own), stopped and removed on drop.
#[derive(Debug)]
pub struct SlurmCluster {
    dir: std::path::PathBuf,
    /// The network namespace the clients run in (two-node clusters).
    netns: Option<String>,
}

fn cluster_script(args: &[&str]) -> Result<(), String> {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/slurm-cluster.sh");
    let out = Command::new("bash")
        .arg(&script)
        .args(args)
        .output()
        .map_err(|e| format!("running {}: {e}", script.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "slurm-cluster.sh {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

impl SlurmCluster {
    /// Start a cluster named after `tag`: one node (`localhost`), or with `nodes` = `[(namespace, address); 2]`
    /// two nodes `n1`, `n2`, one in each network namespace (the clients then run in the first).
    pub fn start(tag: &str, nodes: Option<[(&str, &str); 2]>) -> Result<SlurmCluster, String> {
        let dir = std::env::temp_dir().join(format!("xpushmem-slurm-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let d = dir.to_str().ok_or("a temporary folder with a UTF-8 path")?;
        let mut args = vec!["start", d];
        if let Some([(na, aa), (nb, ab)]) = nodes {
            args.extend([na, aa, nb, ab]);
        }
        let cluster = SlurmCluster {
            dir: dir.clone(),
            netns: nodes.map(|n| n[0].0.to_string()),
        };
        cluster_script(&args).map(|()| cluster)
    }

    /// The daemons' logs (for a failure's message).
    pub fn logs(&self) -> String {
        let mut names: Vec<_> = std::fs::read_dir(&self.dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        names.retain(|p| p.extension().is_some_and(|x| x == "log"));
        names.sort();
        names
            .iter()
            .map(|p| {
                let text = std::fs::read_to_string(p).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(15).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                format!("---- {} ----\n{}\n", p.display(), tail.join("\n"))
            })
            .collect()
    }

    /// `srun --mpi=pmix SRUN_ARGS` of test case `name` (this test binary), with `vars` exported to the tasks; its
    /// exit status, or `None` when it did not end within `limit` (it is then killed).
    pub fn srun(
        &self,
        name: &str,
        srun_args: &[&str],
        vars: &[(&str, &str)],
        limit: Duration,
    ) -> Option<ExitStatus> {
        let exe = std::env::current_exe().expect("test binary");
        let mut export = format!("--export=ALL,{}={name}", crate::CASE_VAR);
        for (k, v) in vars {
            export.push_str(&format!(",{k}={v}"));
        }
        let mut cmd = match &self.netns {
            Some(ns) => {
                let mut c = Command::new("nsenter");
                c.arg(format!("--net=/run/netns/{ns}")).arg("srun");
                c
            }
            None => Command::new("srun"),
        };
        let mut child = cmd
            .arg("--mpi=pmix")
            .args(srun_args)
            .arg(export)
            .arg(&exe)
            .args([name, "--exact", "--nocapture", "--test-threads=1"])
            .env("SLURM_CONF", self.dir.join("slurm.conf"))
            .spawn()
            .expect("srun (scripts/setup.sh installs slurm-client)");
        let start = Instant::now();
        loop {
            if let Some(st) = child.try_wait().expect("wait srun") {
                return Some(st);
            }
            if start.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for SlurmCluster {
    fn drop(&mut self) {
        if let Some(d) = self.dir.to_str() {
            let _ = cluster_script(&["stop", d]);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The contents of every file of `files` once all exist (each written whole, [`crate::write_whole`]), or what was
/// there at `limit`.
pub fn read_when_written(
    files: &[PathBuf],
    limit: Duration,
) -> Result<Vec<String>, Vec<Option<String>>> {
    let start = Instant::now();
    loop {
        let v: Vec<Option<String>> = files
            .iter()
            .map(|f| std::fs::read_to_string(f).ok())
            .collect();
        if v.iter().all(Option::is_some) {
            return Ok(v.into_iter().flatten().collect());
        }
        if start.elapsed() >= limit {
            return Err(v);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How this PE's init ended: `ok: ...` or `err: <the error>`.
pub fn init_verdict() -> String {
    match xpushmem::init() {
        Ok(sh) => format!("ok: init succeeded with {} PEs", sh.n_pes()),
        Err(e) => format!("err: {e}"),
    }
}

/// An empty folder for the reports of a job of this test process (`<temp>/xpushmem-<tag>-<pid>`), emptied first.
pub fn report_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xpushmem-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("output folder");
    dir
}

/// This process's rank in its PMIx job (`PMIX_RANK`, set by the PMIx server).
pub fn pmix_rank() -> usize {
    std::env::var("PMIX_RANK")
        .expect("PMIX_RANK set by the PMIx server")
        .parse()
        .expect("PMIX_RANK is a number")
}

/// Write how this PE's init ended ([`init_verdict`]) to `<out>/<rank>` and exit. Whole or not at all
/// ([`crate::write_whole`]): the test polls for the file, and one found between its creation and the write would
/// read as empty.
pub fn report_init(out: &Path, rank: usize) -> ! {
    crate::write_whole(&out.join(rank.to_string()), init_verdict()).expect("write the verdict");
    std::process::exit(0)
}

/// A process of a PMIx job of `n` whose rank `absent` never starts its runtime: that rank waits (at most 60 s) for
/// the others' verdicts and leaves; every other rank writes how its init ended to `<out>/<rank>`.
pub fn missing_pe(out: &Path, absent: usize, n: usize) -> ! {
    let rank = pmix_rank();
    if rank == absent {
        let _ = read_when_written(&verdict_files(out, absent, n), Duration::from_secs(60));
        std::process::exit(0);
    }
    report_init(out, rank)
}

fn verdict_files(out: &Path, absent: usize, n: usize) -> Vec<PathBuf> {
    (0..n)
        .filter(|&r| r != absent)
        .map(|r| out.join(r.to_string()))
        .collect()
}

/// The verdicts of [`missing_pe`]'s job (every rank but `absent`), waited for 30 s; a panic naming those missing.
pub fn missing_pe_verdicts(out: &Path, absent: usize, n: usize) -> Vec<String> {
    read_when_written(&verdict_files(out, absent, n), Duration::from_secs(30)).unwrap_or_else(|v| {
        panic!("the PEs' init did not end at their limit 30 s later (a hang): {v:?}")
    })
}

/// Every verdict of a job with a missing PE is the timeout of the bootstrap's fence (the PEs' init ended at their
/// own limit, whatever limit the PMIx server keeps).
pub fn assert_missing_pe_timeouts(verdicts: &[String]) {
    for (i, v) in verdicts.iter().enumerate() {
        assert!(
            v.starts_with("err: timeout: PMIx_Fence") && v.contains("did not arrive"),
            "verdict {i}: the init of a job with a missing PE must end at its limit in the fence, got {v:?}"
        );
    }
}
