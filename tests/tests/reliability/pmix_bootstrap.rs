//! The PMIx bootstrap in the default build (no `mpi` feature) under Open MPI's `mpirun` (a PMIx server): chosen
//! automatically, with the job's layout, RMA, atomics and barriers as under the uid bootstrap; a job whose server
//! dies, whose server never answers, or one of whose PEs never joins ends in an error on every PE, not a hang.
//! Under Slurm (`srun --mpi=pmix` on a two-node cluster in two network namespaces): `fabric_netns::netns_srun_4pe`.
//!
//! Skipped (with a message) when the build has no PMIx bootstrap (PMIx's headers were not found).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use xpushmem_tests::mpirun::{
    assert_missing_pe_timeouts, bootstrap_body, init_verdict, missing_pe, missing_pe_verdicts,
    mpirun, pmix_rank, read_when_written, report_dir, report_init,
};
use xpushmem_tests::{is_pe_of, run_pe, test_name};

/// Where the server-death case's PEs report how their init ended.
const OUT_VAR: &str = "XPUSHMEM_TEST_PMIX_OUT";
/// The role of a process of the deaf-server case: `pe`, or `middle` (starts the PE, then ends).
const ROLE_VAR: &str = "XPUSHMEM_TEST_PMIX_ROLE";

/// A PE's output folder, which its test passed in [`OUT_VAR`].
fn out_dir() -> PathBuf {
    PathBuf::from(std::env::var(OUT_VAR).expect("the output folder"))
}

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
    let rank = pmix_rank();
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
    report_init(out, rank)
}

#[test]
fn pmix_server_death_3pe() {
    let name = test_name(module_path!(), "pmix_server_death_3pe");
    if is_pe_of(&name) {
        server_death_pe(&out_dir());
    }
    if !built_with_pmix() {
        return;
    }
    let out = report_dir("pmix-death");
    let vars = [
        ("XPUSHMEM_BOOTSTRAP", "pmix"),
        ("XPUSHMEM_TIMEOUT_MS", "20000"),
        (OUT_VAR, out.to_str().expect("a UTF-8 path")),
    ];
    let st = mpirun(&name, 3, &vars, Duration::from_secs(60));
    assert!(!st.success(), "mpirun survived being killed: {st}");
    // The PEs outlive their server: each must report, well within the job limit.
    let files: Vec<PathBuf> = (0..3).map(|r| out.join(r.to_string())).collect();
    let verdicts = read_when_written(&files, Duration::from_secs(90)).unwrap_or_else(|v| {
        panic!("PEs still running 90 s after their PMIx server died (a hang): {v:?}")
    });
    let _ = std::fs::remove_dir_all(&out);
    for (r, v) in verdicts.iter().enumerate() {
        assert!(
            v.starts_with("err: ") && v.contains("pmix"),
            "PE {r}: the init of a job whose server died must fail naming the PMIx bootstrap, got {v:?}"
        );
    }
}

/// A process of the deaf-server case: `middle` starts the PE (this binary again, role `pe`) and ends 300 ms later;
/// `pe` writes its PID to `<out>/pid`, then how its init ended to `<out>/verdict`.
fn deaf_server_process(out: &Path) -> ! {
    if std::env::var(ROLE_VAR).as_deref() == Ok("middle") {
        let exe = std::env::current_exe().expect("test binary");
        std::process::Command::new(exe)
            .args(std::env::args().skip(1))
            .env(ROLE_VAR, "pe")
            .spawn()
            .expect("start the PE");
        std::thread::sleep(Duration::from_millis(300));
        std::process::exit(0);
    }
    xpushmem_tests::write_whole(&out.join("pid"), std::process::id().to_string()).expect("pid");
    let verdict = init_verdict();
    xpushmem_tests::write_whole(&out.join("verdict"), verdict).expect("write the verdict");
    std::process::exit(0)
}

/// A PMIx server that accepts connections and never answers (a listener on loopback; the connections are held
/// open), and a PE pointed at it through the variables a PMIx launcher sets. libpmix's `PMIx_Init` takes no time
/// limit and waits for that answer forever: the PE's init must fail at its own limit (`XPUSHMEM_TIMEOUT_MS`), and
/// at once when the process that started it (where its server lives) ends first.
#[test]
fn pmix_server_that_never_answers_1pe() {
    let name = test_name(module_path!(), "pmix_server_that_never_answers_1pe");
    if is_pe_of(&name) {
        deaf_server_process(&out_dir());
    }
    if !built_with_pmix() {
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen on loopback");
    let port = listener.local_addr().expect("its port").port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in listener.incoming().flatten() {
            held.push(c);
        }
    });
    let uri = format!("4242.0;tcp4://127.0.0.1:{port}");
    let run = |role: &str, limit_ms: &str| -> String {
        let out = report_dir(&format!("pmix-deaf-{role}"));
        let mut cmd = std::process::Command::new(std::env::current_exe().expect("test binary"));
        cmd.args([name.as_str(), "--exact", "--nocapture", "--test-threads=1"])
            .env(xpushmem_tests::CASE_VAR, &name)
            .env(ROLE_VAR, role)
            .env(OUT_VAR, &out)
            .env("XPUSHMEM_BOOTSTRAP", "pmix")
            .env("XPUSHMEM_TIMEOUT_MS", limit_ms)
            .env("PMIX_NAMESPACE", "4243")
            .env("PMIX_RANK", "0")
            .env("PMIX_SECURITY_MODE", "native")
            .env("PMIX_GDS_MODULE", "hash")
            .env("PMIX_BFROP_BUFFER_TYPE", "PMIX_BFROP_BUFFER_NON_DESC")
            .env("PMIX_VERSION", "4.2.2");
        for v in ["41", "4", "3", "21", "2"] {
            cmd.env(format!("PMIX_SERVER_URI{v}"), &uri);
        }
        let mut child = cmd.spawn().expect("start the test binary");
        let verdict = read_when_written(&[out.join("verdict")], Duration::from_secs(30))
            .ok()
            .and_then(|mut v| v.pop());
        if verdict.is_none() {
            // Stuck in PMIx_Init: end it (the child, or the PE the middle process started) before failing.
            let _ = child.kill();
            if let Some(pid) = std::fs::read_to_string(out.join("pid"))
                .ok()
                .and_then(|p| p.trim().parse::<i32>().ok())
                .and_then(rustix::process::Pid::from_raw)
            {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
        let _ = child.wait();
        let _ = std::fs::remove_dir_all(&out);
        verdict.unwrap_or_else(|| {
            panic!("{role}: the PE's init still waited for the PMIx server 30 s later (a hang)")
        })
    };
    let v = run("pe", "1500");
    assert!(
        v.starts_with("err: timeout: PMIx_Init") && v.contains("never answered"),
        "a server that never answers must end the init at its limit, got {v:?}"
    );
    let start = Instant::now();
    let v = run("middle", "60000");
    assert!(
        v.starts_with("err: bootstrap (pmix): PMIx_Init: the process that started this PE")
            && start.elapsed() < Duration::from_secs(20),
        "a PE whose starting process ended must fail at once, not at its 60-s limit; got {v:?} after {:?}",
        start.elapsed()
    );
}

/// A job in which one process never joins: the others' init waits in a `PMIx_Fence` (the bootstrap's first
/// allgather), which must end at their own limit (`XPUSHMEM_TIMEOUT_MS`, 2 s here) with a timeout naming the
/// fence, whatever limit the PMIx server keeps (Slurm's is 300 s and ignores the client's).
#[test]
fn pmix_fence_that_a_pe_never_joins_3pe() {
    let name = test_name(module_path!(), "pmix_fence_that_a_pe_never_joins_3pe");
    if is_pe_of(&name) {
        missing_pe(&out_dir(), 2, 3);
    }
    if !built_with_pmix() {
        return;
    }
    let out = report_dir("pmix-missing");
    let vars = [
        ("XPUSHMEM_BOOTSTRAP", "pmix"),
        ("XPUSHMEM_TIMEOUT_MS", "2000"),
        (OUT_VAR, out.to_str().expect("a UTF-8 path")),
    ];
    let start = Instant::now();
    let _ = mpirun(&name, 3, &vars, Duration::from_secs(90));
    let verdicts = missing_pe_verdicts(&out, 2, 3);
    let _ = std::fs::remove_dir_all(&out);
    assert_missing_pe_timeouts(&verdicts);
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "the job took {:?} (limit 2 s)",
        start.elapsed()
    );
}
