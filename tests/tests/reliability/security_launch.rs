//! The launcher's limits hold whatever the PEs leave behind, bad launcher arguments are usage errors, every wait's
//! bound holds whatever the spin count, and `XPUSHMEM_DUMPABLE=0` closes a PE's /proc files to its own uid.
//!
//! The launcher cases run the real `xpushmem-run` (built here with cargo on first use) over `sh -c` PEs that start
//! `sleep` processes in the background (plain, or after `setsid`), and check by pid that those processes are gone.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use xpushmem::Cmp;
use xpushmem_tests::{is_pe_of, pe_job, test_name};

/// The `xpushmem-run` next to this test binary's target directory, built once per test binary.
fn launcher() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("test binary path");
            // target/<profile>/deps/<test> -> target/<profile>/xpushmem-run
            let profile_dir = exe.parent().and_then(Path::parent).expect("target dir");
            let target = profile_dir.parent().expect("target root");
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let mut cmd = Command::new(cargo);
            // The whole workspace's binaries, as scripts/test.sh builds them: the same feature resolution, so a
            // no-op there (`-p xpushmem-launch` alone resolves fewer features of the shared dependencies and
            // rebuilt them in a fresh clone: ~14 s inside the test run).
            cmd.args(["build", "-q", "--workspace", "--bins"])
                .arg("--target-dir")
                .arg(target)
                .current_dir(env!("CARGO_MANIFEST_DIR"));
            if profile_dir.file_name().is_some_and(|n| n == "release") {
                cmd.arg("--release");
            }
            let st = cmd.status().expect("run cargo build");
            assert!(st.success(), "cargo build of xpushmem-run failed");
            profile_dir.join("xpushmem-run")
        })
        .clone()
}

/// A scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "xpushmem-seclaunch-{}-{}",
        std::process::id(),
        name.replace("::", "-")
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// Whether `pid` is a live process (a zombie is dead: it only waits to be reaped by whoever adopted it).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
    })
}

/// The pids a PE script wrote to `file`, one per line, once there are `n` of them (waits up to 20 s).
fn pids_in(file: &Path, n: usize) -> Vec<i32> {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let pids: Vec<i32> = std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        if pids.len() >= n || Instant::now() > until {
            return pids;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The launcher's children (its PEs and, before they start, its watchdog).
fn children_of(pid: u32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Kill whatever of `pids` is left (cleanup of a failing case).
fn kill_all(pids: &[i32]) {
    for &p in pids {
        if let Some(p) = rustix::process::Pid::from_raw(p) {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
        }
    }
}

/// Wait up to `limit` for every pid of `pids` to be gone; the ones still alive.
fn wait_gone(pids: &[i32], limit: Duration) -> Vec<i32> {
    let until = Instant::now() + limit;
    loop {
        let left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if left.is_empty() || Instant::now() > until {
            return left;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `xpushmem-run ARGS` with stdout/stderr to files in `dir`.
fn start_launcher(dir: &Path, args: &[&str]) -> Child {
    Command::new(launcher())
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(dir.join("out")).expect("out"))
        .stderr(std::fs::File::create(dir.join("err")).expect("err"))
        .spawn()
        .expect("start xpushmem-run")
}

/// Wait for the launcher up to `limit`; `None` (after killing it) when it is still running then.
fn wait_launcher(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let until = Instant::now() + limit;
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            return Some(st);
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A PE that succeeds at once but leaves `helper` (a shell command run in the background, holding the PE's
/// stdout and stderr) behind, under `--timeout 3`: the launcher returns within the limit plus a grace, with the
/// job's success, and the helper is gone.
fn helper_does_not_outlive_a_successful_job(tag: &str, helper: &str) {
    let dir = scratch(tag);
    let pids = dir.join("pids");
    let script = format!("{helper} & echo $! >> {}; echo started", pids.display());
    let t0 = Instant::now();
    let mut l = start_launcher(&dir, &["-n", "2", "--timeout", "3", "sh", "-c", &script]);
    // Limit 3 s plus a grace of 3 s (the launcher's own grace and this machine's load).
    let st = wait_launcher(&mut l, Duration::from_secs(6));
    let took = t0.elapsed();
    let helpers = pids_in(&pids, 2);
    let left = wait_gone(&helpers, Duration::from_secs(1));
    kill_all(&helpers);
    let err = std::fs::read_to_string(dir.join("err")).unwrap_or_default();
    assert_eq!(
        helpers.len(),
        2,
        "both PEs started their helper; stderr:\n{err}"
    );
    let st = st.unwrap_or_else(|| {
        panic!(
            "xpushmem-run --timeout 3 still ran after {took:?} (a helper holds its output pipes)"
        )
    });
    assert!(st.success(), "the job succeeded: {st:?}; stderr:\n{err}");
    assert!(
        left.is_empty(),
        "helpers {left:?} outlived the job (of {helpers:?})"
    );
    let out = std::fs::read_to_string(dir.join("out")).unwrap_or_default();
    assert!(
        out.contains("[pe 0] started") && out.contains("[pe 1] started"),
        "output: {out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_background_helper_does_not_hold_the_launcher_past_its_timeout() {
    helper_does_not_outlive_a_successful_job("bg", "sleep 1000");
}

#[test]
fn a_helper_that_called_setsid_does_not_outlive_the_job() {
    helper_does_not_outlive_a_successful_job("setsid", "setsid sleep 1000");
}

/// Two PEs that run on (`sleep`) with a background helper each and a `setsid` one each; the launcher gets
/// `signal`: within 2 s every process of the job is gone, the launcher included.
fn the_job_ends_with_its_launcher(tag: &str, signal: rustix::process::Signal) {
    let dir = scratch(tag);
    let pids = dir.join("pids");
    let p = pids.display();
    let script =
        format!("sleep 1000 & echo $! >> {p}; setsid sleep 1000 & echo $! >> {p}; exec sleep 1000");
    let mut l = start_launcher(&dir, &["-n", "2", "--timeout", "60", "sh", "-c", &script]);
    let helpers = pids_in(&pids, 4);
    // The launcher names processes that left the job's process group to its watchdog every 200 ms
    // (launch::TRACK_EVERY): a SIGKILL sooner than that after a `setsid` is the documented gap.
    std::thread::sleep(Duration::from_millis(600));
    let pes: Vec<i32> = children_of(l.id());
    let mut all = helpers.clone();
    all.extend(&pes);
    let launcher = rustix::process::Pid::from_raw(l.id() as i32).expect("pid");
    rustix::process::kill_process(launcher, signal).expect("signal the launcher");
    let st = wait_launcher(&mut l, Duration::from_secs(10));
    let left = wait_gone(&all, Duration::from_secs(2));
    kill_all(&all);
    let err = std::fs::read_to_string(dir.join("err")).unwrap_or_default();
    assert_eq!(
        helpers.len(),
        4,
        "every PE started its helpers; stderr:\n{err}"
    );
    assert!(st.is_some(), "the launcher ended on {signal:?}");
    assert!(
        left.is_empty(),
        "after {signal:?} of the launcher, {left:?} of the job's processes {all:?} (PEs {pes:?}) still run; \
         stderr:\n{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_job_ends_when_the_launcher_is_killed() {
    the_job_ends_with_its_launcher("kill", rustix::process::Signal::KILL);
}

#[test]
fn the_job_ends_when_the_launcher_gets_sigusr1() {
    the_job_ends_with_its_launcher("usr1", rustix::process::Signal::USR1);
}

#[test]
fn absurd_launcher_arguments_are_usage_errors() {
    for (args, value) in [
        (["--timeout", "1e20", "-n", "1"], "1e20"),
        (["--timeout", "inf", "-n", "1"], "inf"),
        (["--timeout", "nan", "-n", "1"], "nan"),
        (
            ["-n", "18446744073709551615", "-t", "5"],
            "18446744073709551615",
        ),
    ] {
        let o = Command::new(launcher())
            .args(args)
            .arg("true")
            .stdin(Stdio::null())
            .output()
            .expect("run xpushmem-run");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(value),
            "{args:?}: the message names {value}: {err}"
        );
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn a_huge_spin_count_does_not_stretch_the_wait_limit() {
    let name = test_name(
        module_path!(),
        "a_huge_spin_count_does_not_stretch_the_wait_limit",
    );
    if is_pe_of(&name) {
        xpushmem_tests::run_pe(|sh| {
            let flag = sh.calloc::<u64>(1)?.at(0)?;
            let t0 = Instant::now();
            let r = sh.wait_until(flag, Cmp::Eq, 1);
            let real = t0.elapsed();
            match r {
                Err(xpushmem::Error::Timeout { waited, limit, .. }) => {
                    assert_eq!(limit, Duration::from_secs(1));
                    let (w, t) = (waited.as_secs_f64(), real.as_secs_f64());
                    assert!(
                        (w - t).abs() <= 0.2 * t,
                        "the error says it waited {waited:?}, it waited {real:?}"
                    );
                    assert!(real < Duration::from_secs(5), "a 1 s limit took {real:?}");
                    println!("timeout after {real:?}, reported {waited:?}");
                    Ok(())
                }
                other => panic!("expected Timeout, got {other:?}"),
            }
        });
    }
    let mut job = pe_job(
        &name,
        1,
        &[
            ("XPUSHMEM_SPIN_COUNT", "4294967295"),
            ("XPUSHMEM_TIMEOUT_MS", "1000"),
        ],
    );
    job.timeout = Some(Duration::from_secs(30));
    let out = job.run().expect("launch");
    xpushmem_tests::assert_success(&name, 1, &out);
}

/// The PE side of the dumpable cases: after init (whose fd exchange the setting must not break: two PEs, each
/// writes into the other's heap), a child process of the same uid tries to open the heap through
/// `/proc/PID/fd/N` and to read `/proc/PID/environ`; prints what it got.
fn proc_reader_pe() -> ! {
    xpushmem_tests::run_pe(|sh| {
        let (me_pe, n) = (sh.my_pe(), sh.n_pes());
        let x = sh.calloc::<u64>(1)?.at(0)?;
        sh.p(x, 100 + me_pe as u64, (me_pe + 1) % n)?;
        sh.barrier_all()?;
        assert_eq!(sh.g(x, me_pe)?, 100 + ((me_pe + n - 1) % n) as u64);
        let me = std::process::id();
        let heap_fd = std::fs::read_dir("/proc/self/fd")
            .expect("own fds")
            .flatten()
            .find(|e| {
                std::fs::read_link(e.path())
                    .is_ok_and(|t| t.to_string_lossy().contains("xpushmem-heap"))
            })
            .map(|e| e.file_name().to_string_lossy().to_string())
            .expect("the heap's memfd is open");
        let try_sh = |cmd: String| {
            Command::new("sh")
                .args(["-c", &cmd])
                .stderr(Stdio::null())
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        let fd = try_sh(format!("exec 3< /proc/{me}/fd/{heap_fd}"));
        let env = try_sh(format!("cat /proc/{me}/environ"));
        let uid = rustix::process::getuid().as_raw();
        println!("READER uid={uid} fd={fd} environ={env}");
        Ok(())
    })
}

/// Run `name` as two PEs through `xpushmem-run` with `env`; as root, the launcher, the PE and the reader all run as
/// uid 65534 (root reads every process's /proc files whatever their dumpable flag). PE 0's `READER` line.
fn reader_line(name: &str, env: &[(&str, &str)]) -> String {
    let exe = std::env::current_exe().expect("test binary");
    let root = rustix::process::geteuid().is_root();
    let mut cmd = if root {
        let mut c = Command::new("setpriv");
        c.args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
            .arg(launcher());
        c
    } else {
        Command::new(launcher())
    };
    cmd.args(["-n", "2", "--timeout", "60"])
        .arg(&exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(xpushmem_tests::CASE_VAR, name)
        .env("XPUSHMEM_SYMMETRIC_SIZE", "16M")
        .current_dir("/")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().expect("run the PE");
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "the PE failed: {:?}\n{out}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    let line = out
        .lines()
        .filter(|l| l.starts_with("[pe 0] "))
        .find_map(|l| l.split_once("READER ").map(|(_, r)| r.to_string()))
        .unwrap_or_else(|| panic!("no READER line in {out}"));
    if root {
        assert!(line.starts_with("uid=65534 "), "{line}");
    }
    line
}

#[test]
fn a_non_dumpable_pe_keeps_its_heap_and_environment_from_its_own_uid() {
    let name = test_name(
        module_path!(),
        "a_non_dumpable_pe_keeps_its_heap_and_environment_from_its_own_uid",
    );
    if is_pe_of(&name) {
        proc_reader_pe();
    }
    // Control: by default a process of the same uid opens the heap and reads the environment.
    let open = reader_line(&name, &[]);
    assert!(open.ends_with("fd=true environ=true"), "default: {open}");
    let closed = reader_line(&name, &[("XPUSHMEM_DUMPABLE", "0")]);
    assert!(
        closed.ends_with("fd=false environ=false"),
        "XPUSHMEM_DUMPABLE=0: {closed}"
    );
}

#[test]
fn non_dumpable_and_pidfd_ipc_is_an_error_naming_both() {
    let name = test_name(
        module_path!(),
        "non_dumpable_and_pidfd_ipc_is_an_error_naming_both",
    );
    if is_pe_of(&name) {
        match xpushmem::init() {
            Err(e) => {
                let m = e.to_string();
                assert!(
                    m.contains("XPUSHMEM_DUMPABLE") && m.contains("XPUSHMEM_IPC=pidfd"),
                    "{m}"
                );
                std::process::exit(0);
            }
            Ok(_) => panic!("init accepted XPUSHMEM_DUMPABLE=0 with XPUSHMEM_IPC=pidfd"),
        }
    }
    let out = pe_job(
        &name,
        1,
        &[("XPUSHMEM_DUMPABLE", "0"), ("XPUSHMEM_IPC", "pidfd")],
    )
    .run()
    .expect("launch");
    xpushmem_tests::assert_success(&name, 1, &out);
}
