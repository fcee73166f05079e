//! Jobs under Open MPI's `mpirun` (a PMIx server): the MPI bootstrap's and the PMIx bootstrap's suites start a test
//! case's PEs with it, and share the body that checks a job they started.

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
