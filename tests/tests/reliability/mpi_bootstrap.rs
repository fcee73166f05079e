//! The MPI bootstrap under a real `mpirun -n 2` and `-n 4` (feature `mpi`): node layout, RMA, atomics and barriers
//! must work exactly as under the uid bootstrap.
#![cfg(feature = "mpi")]

use std::process::Command;
use std::time::{Duration, Instant};
use xpushmem::Cmp;
use xpushmem_tests::{is_pe_of, reference, run_pe, CASE_VAR};

fn body(sh: &xpushmem::Shmem) -> xpushmem::Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    assert_eq!(sh.bootstrap_name(), "mpi");
    assert_eq!(sh.node_pes(), (0..n).collect::<Vec<_>>());
    let buf = sh.calloc::<u64>(n)?;
    let counter = sh.calloc::<u64>(1)?.at(0)?;
    for pe in 0..n {
        sh.p(buf.at(me)?, reference(me, pe, 3), pe)?;
        sh.atomic_add(counter, me as u64 + 1, pe)?;
    }
    sh.barrier_all()?;
    for src in 0..n {
        assert_eq!(sh.g(buf.at(src)?, me)?, reference(src, me, 3));
    }
    sh.wait_until(counter, Cmp::Eq, (n * (n + 1) / 2) as u64)?;
    sh.barrier_all()?;
    Ok(())
}

fn mpirun(name: &str, n: usize) {
    let exe = std::env::current_exe().expect("test binary");
    let start = Instant::now();
    let mut child = Command::new("mpirun")
        .args([
            "--oversubscribe",
            "--allow-run-as-root",
            "-n",
            &n.to_string(),
        ])
        .args([
            "-x",
            &format!("{CASE_VAR}={name}"),
            "-x",
            "XPUSHMEM_BOOTSTRAP=mpi",
            "-x",
            "XPUSHMEM_TIMEOUT_MS=60000",
        ])
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
            assert!(st.success(), "mpirun -n {n} failed: {st}");
            return;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("mpirun -n {n} timed out");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn mpi_bootstrap_2pe() {
    let name = xpushmem_tests::test_name(module_path!(), "mpi_bootstrap_2pe");
    if is_pe_of(&name) {
        run_pe(body);
    }
    mpirun(&name, 2);
}

#[test]
fn mpi_bootstrap_4pe() {
    let name = xpushmem_tests::test_name(module_path!(), "mpi_bootstrap_4pe");
    if is_pe_of(&name) {
        run_pe(body);
    }
    mpirun(&name, 4);
}
