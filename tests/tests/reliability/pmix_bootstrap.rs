//! The PMIx bootstrap in the default build (no `mpi` feature) under Open MPI's `mpirun` (a PMIx server): chosen
//! automatically, with the job's layout, RMA, atomics and barriers as under the uid bootstrap; and a job whose
//! server dies ends in an error on every PE, not a hang. Under Slurm (`srun --mpi=pmix` on a two-node cluster in
//! two network namespaces): `fabric_netns::netns_srun_4pe`.
//!
//! Skipped (with a message) when the build has no PMIx bootstrap (PMIx's headers were not found).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use xpushmem_tests::mpirun::{bootstrap_body, mpirun};
use xpushmem_tests::{is_pe_of, run_pe, test_name};

/// Where the server-death case's PEs report how their init ended.
const OUT_VAR: &str = "XPUSHMEM_TEST_PMIX_OUT";

fn built_with_pmix() -> bool {
    if pmix_sys::AVAILABLE {
        return true;
    }
    eprintln!("skipped: this build has no PMIx bootstrap (install libpmix-dev)");
    false
}

#[test]
fn pmix_bootstrap_3pe() {
    let name = test_name(module_path!(), "pmix_bootstrap_3pe");
    if is_pe_of(&name) {
        run_pe(|sh| bootstrap_body(sh, "pmix"));
    }
    if !built_with_pmix() {
        return;
    }
    let vars = [
        ("XPUSHMEM_BOOTSTRAP", "auto"),
        ("XPUSHMEM_TIMEOUT_MS", "60000"),
    ];
    let st = mpirun(&name, 3, &vars, Duration::from_secs(120));
    assert!(st.success(), "mpirun -n 3 failed: {st}");
}

/// A PE of the server-death case: once every PE has started, rank 0 kills the server (mpirun, its parent) before
/// joining; every PE's init must then fail, and each writes its error to `<out>/<rank>`.
fn server_death_pe(out: &Path) -> ! {
    let rank: usize = std::env::var("PMIX_RANK")
        .expect("PMIX_RANK set by the PMIx server")
        .parse()
        .expect("PMIX_RANK is a number");
    // Every PE exists before the server dies (mpirun starts them one after another).
    std::fs::write(out.join(format!("started.{rank}")), "").expect("mark started");
    if rank == 0 {
        let start = Instant::now();
        while (0..3).any(|r| !out.join(format!("started.{r}")).exists()) {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the other PEs never started"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let parent = rustix::process::getppid().expect("a parent (mpirun)");
        rustix::process::kill_process(parent, rustix::process::Signal::KILL).expect("kill mpirun");
    }
    let verdict = match xpushmem::init() {
        Ok(sh) => format!("ok: init succeeded with {} PEs", sh.n_pes()),
        Err(e) => format!("err: {e}"),
    };
    // Whole or not at all: the test polls for the file (one found between its creation and the write read as empty).
    xpushmem_tests::write_whole(&out.join(rank.to_string()), verdict).expect("write the verdict");
    std::process::exit(0)
}

#[test]
fn pmix_server_death_3pe() {
    let name = test_name(module_path!(), "pmix_server_death_3pe");
    if is_pe_of(&name) {
        server_death_pe(Path::new(
            &std::env::var(OUT_VAR).expect("the output folder"),
        ));
    }
    if !built_with_pmix() {
        return;
    }
    let out: PathBuf =
        std::env::temp_dir().join(format!("xpushmem-pmix-death-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).expect("output folder");
    let vars = [
        ("XPUSHMEM_BOOTSTRAP", "pmix"),
        ("XPUSHMEM_TIMEOUT_MS", "20000"),
        (OUT_VAR, out.to_str().expect("a UTF-8 path")),
    ];
    let st = mpirun(&name, 3, &vars, Duration::from_secs(60));
    assert!(!st.success(), "mpirun survived being killed: {st}");
    // The PEs outlive their server: each must report, well within the job limit.
    let start = Instant::now();
    let verdicts = loop {
        let v: Vec<Option<String>> = (0..3)
            .map(|r| std::fs::read_to_string(out.join(r.to_string())).ok())
            .collect();
        if v.iter().all(Option::is_some) {
            break v.into_iter().flatten().collect::<Vec<_>>();
        }
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "PEs still running 90 s after their PMIx server died (a hang): {v:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = std::fs::remove_dir_all(&out);
    for (r, v) in verdicts.iter().enumerate() {
        assert!(
            v.starts_with("err: ") && v.contains("pmix"),
            "PE {r}: the init of a job whose server died must fail naming the PMIx bootstrap, got {v:?}"
        );
    }
}
