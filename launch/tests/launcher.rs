//! `xpushmem-run` itself: the status and message of a failed job name the PE that failed first and why
//! (`global_exit`, a signal), and stopping the launcher (SIGINT, SIGTERM, SIGHUP, Ctrl-C to its group) before or
//! after the PEs' init leaves no PE behind; a PE whose launcher died fails its init at once.
//!
//! Each test re-executes this test binary as the PEs (`XPUSHMEM_LAUNCHER_TEST_ROLE` names what a PE does) under the
//! real `xpushmem-run`, and looks for leftovers by a tag in the PEs' environment.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ROLE: &str = "XPUSHMEM_LAUNCHER_TEST_ROLE";
const TAG: &str = "XPUSHMEM_LAUNCHER_TEST_TAG";

/// In a PE: do what the role says and exit. In the test process: nothing.
fn pe_role() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let fail = |e: xpushmem::Error| -> ! {
        eprintln!("error: {e}");
        std::process::exit(1)
    };
    match role.as_str() {
        "sleep_before_init" => {
            println!("started");
            std::thread::sleep(Duration::from_secs(600));
            std::process::exit(0)
        }
        // PE 0's init fails after it joined the job (its heap's reservation does not fit the address-space
        // limit it sets), and it takes its time to say so: PE 1 loses it at once.
        "slow_failed_init" | "hung_failed_init"
            if std::env::var("XPUSHMEM_BOOTSTRAP_RANK").as_deref() == Ok("0") =>
        {
            use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
            let hard = getrlimit(Resource::As).maximum;
            let limit = hard.map_or(8 << 30, |h| h.min(8 << 30));
            let lim = Rlimit {
                current: Some(limit),
                maximum: hard,
            };
            setrlimit(Resource::As, lim).expect("setrlimit(RLIMIT_AS)");
            let e = xpushmem::init().map(drop).unwrap_err();
            // Slow: half a second, within the launcher's grace; hung: never (the launcher stops it).
            let pause = if role == "slow_failed_init" {
                500
            } else {
                600_000
            };
            std::thread::sleep(Duration::from_millis(pause));
            eprintln!("init failed slowly: {e}");
            std::process::exit(3)
        }
        "late_init" => {
            println!("started");
            std::thread::sleep(Duration::from_secs(2));
            match xpushmem::init() {
                Ok(_) => std::process::exit(0),
                Err(e) => {
                    eprintln!("init failed: {e}");
                    std::process::exit(3)
                }
            }
        }
        _ => {}
    }
    let sh = xpushmem::init().unwrap_or_else(|e| fail(e));
    let (me, n) = (sh.my_pe(), sh.n_pes());
    sh.barrier_all().unwrap_or_else(|e| fail(e));
    match role.as_str() {
        "global_exit" if me == 1 => xpushmem::launcher::global_exit(5),
        "kill_last" if me == n - 1 => {
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::KILL,
            );
        }
        "ready_after_init" => {
            println!("ready");
            std::thread::sleep(Duration::from_secs(600));
        }
        _ => {}
    }
    // The others wait for the PE that left: the runtime reports it lost, and the program fails.
    sh.barrier_all().unwrap_or_else(|e| fail(e));
    std::process::exit(0)
}

/// A tag unique to one launch of one test.
fn tag(test: &str) -> String {
    format!(
        "{test}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    )
}

/// `xpushmem-run -n N` of this test binary running `test` in role `role`, output piped.
fn launcher(test: &str, n: usize, role: &str, tag: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_xpushmem-run"));
    c.args(["-n", &n.to_string(), "--timeout", "120"])
        .arg(std::env::current_exe().expect("test binary"))
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(TAG, tag)
        .env("XPUSHMEM_TIMEOUT_MS", "120000")
        .env("XPUSHMEM_SYMMETRIC_SIZE", "16M")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Live processes carrying `tag` in their environment (zombies have none).
fn processes_tagged(tag: &str) -> Vec<u32> {
    let needle = format!("{TAG}={tag}");
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
                .unwrap_or(false)
        })
        .collect()
}

/// Whether `pid` is a launcher's watchdog (`xpushmem-run --xpushmem-watchdog`).
fn is_watchdog(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
        c.split(|b| *b == 0)
            .any(|a| a == xpushmem_launch::WATCHDOG_FLAG.as_bytes())
    })
}

/// Read the launcher's stdout until `count` lines contain `word`.
fn wait_for_lines(child: &mut Child, word: &str, count: usize) {
    let out = child.stdout.take().expect("piped stdout");
    let mut r = BufReader::new(out);
    let mut seen = 0;
    let mut line = String::new();
    while seen < count {
        line.clear();
        let k = r.read_line(&mut line).expect("read launcher output");
        assert!(
            k > 0,
            "the launcher's output ended after {seen} of {count} `{word}` lines"
        );
        if line.contains(word) {
            seen += 1;
        }
    }
    // Keep draining so that PEs never block on a full pipe.
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut r, &mut sink);
    });
}

/// Wait for the launcher to end (bounded); its exit code and stderr.
fn finish(mut child: Child) -> (Option<i32>, String) {
    let mut err = child.stderr.take().expect("piped stderr");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the launcher did not end within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status.code(), reader.join().unwrap_or_default())
}

fn assert_no_orphans(tag: &str) {
    let left = processes_tagged(tag);
    assert!(left.is_empty(), "PE processes outlived the job: {left:?}");
}

#[test]
fn global_exit_names_the_pe_and_its_status_4pe() {
    pe_role();
    for _ in 0..3 {
        let t = tag("global_exit");
        let child = launcher(
            "global_exit_names_the_pe_and_its_status_4pe",
            4,
            "global_exit",
            &t,
        )
        .spawn()
        .expect("xpushmem-run");
        let (code, err) = finish(child);
        assert_eq!(
            code,
            Some(5),
            "the job's status is the global_exit status:\n{err}"
        );
        assert!(
            err.contains("xpushmem-run: PE 1 failed first: it called global_exit(5)"),
            "{err}"
        );
        assert_no_orphans(&t);
    }
}

#[test]
fn a_killed_pe_is_named_with_its_signal_4pe() {
    pe_role();
    for _ in 0..3 {
        let t = tag("kill_last");
        let child = launcher(
            "a_killed_pe_is_named_with_its_signal_4pe",
            4,
            "kill_last",
            &t,
        )
        .spawn()
        .expect("xpushmem-run");
        let (code, err) = finish(child);
        assert_eq!(code, Some(137), "128 + SIGKILL:\n{err}");
        assert!(
            err.contains("xpushmem-run: PE 3 failed first: it was killed by SIGKILL (9)"),
            "{err}"
        );
        assert_no_orphans(&t);
    }
}

/// A PE whose init fails after it joined is lost to the others at once; they fail for it, but the launcher waits
/// for the PE itself (within `LOST_GRACE`): its message is printed and it is named with its own status.
#[test]
fn a_pe_that_fails_its_init_slowly_is_named_with_its_message_2pe() {
    pe_role();
    let t = tag("slow_failed_init");
    let child = launcher(
        "a_pe_that_fails_its_init_slowly_is_named_with_its_message_2pe",
        2,
        "slow_failed_init",
        &t,
    )
    .env("XPUSHMEM_SYMMETRIC_MAX", "4G")
    .spawn()
    .expect("xpushmem-run");
    let (code, err) = finish(child);
    assert_eq!(code, Some(3), "PE 0's own status:\n{err}");
    assert!(
        err.contains(
            "xpushmem-run: PE 0 failed first: it exited with code 3; PEs 1 reported it lost"
        ),
        "{err}"
    );
    assert!(
        err.contains("init failed slowly: configuration: XPUSHMEM_SYMMETRIC_MAX=4294967296"),
        "PE 0's message:\n{err}"
    );
    // PE 1's start-up failed with the loss, and its runtime went without a finalize (no second error).
    assert!(
        err.contains("[pe 1] error: PE 0 was lost") && !err.contains("finalize on drop failed"),
        "PE 1's one error:\n{err}"
    );
    assert_no_orphans(&t);
}

/// The same PE hung after its failed init: the launcher stops it once `LOST_GRACE` has passed, not later, and
/// still names it.
#[test]
fn a_pe_that_hangs_after_leaving_is_stopped_after_the_grace_and_named_2pe() {
    pe_role();
    let t = tag("hung_failed_init");
    let start = Instant::now();
    let child = launcher(
        "a_pe_that_hangs_after_leaving_is_stopped_after_the_grace_and_named_2pe",
        2,
        "hung_failed_init",
        &t,
    )
    .env("XPUSHMEM_SYMMETRIC_MAX", "4G")
    .spawn()
    .expect("xpushmem-run");
    let (code, err) = finish(child);
    let took = start.elapsed();
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(
            "xpushmem-run: PE 0 failed first: it left the job and had not ended 2 s later, when it was stopped; \
             PEs 1 reported it lost"
        ),
        "{err}"
    );
    assert!(
        took >= xpushmem_launch::LOST_GRACE && took < Duration::from_secs(20),
        "stopped after the grace, not at once nor at the time limit: {took:?}"
    );
    assert_no_orphans(&t);
}

#[test]
fn stop_signals_before_init_leave_no_pe_2pe() {
    pe_role();
    use rustix::process::Signal;
    for sig in [Signal::INT, Signal::TERM, Signal::HUP] {
        let t = tag("before_init");
        let mut child = launcher(
            "stop_signals_before_init_leave_no_pe_2pe",
            2,
            "sleep_before_init",
            &t,
        )
        .spawn()
        .expect("xpushmem-run");
        wait_for_lines(&mut child, "started", 2);
        // The launcher's watchdog (the launcher itself, re-executed) carries the tag too: not a PE.
        let pes: Vec<u32> = processes_tagged(&t)
            .into_iter()
            .filter(|&p| p != child.id() && !is_watchdog(p))
            .collect();
        assert_eq!(pes.len(), 2, "both PEs run: {pes:?}");
        let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("pid");
        rustix::process::kill_process(pid, sig).expect("signal the launcher");
        let (code, err) = finish(child);
        assert_eq!(code, Some(128 + sig.as_raw()), "{sig:?}:\n{err}");
        assert!(err.contains("received; every PE was stopped"), "{err}");
        assert_no_orphans(&t);
    }
}

#[test]
fn ctrl_c_to_the_launchers_group_leaves_no_pe_2pe() {
    pe_role();
    let t = tag("ctrl_c");
    let mut cmd = launcher(
        "ctrl_c_to_the_launchers_group_leaves_no_pe_2pe",
        2,
        "sleep_before_init",
        &t,
    );
    // Its own group, as a shell's foreground job: Ctrl-C signals the whole group.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().expect("xpushmem-run");
    wait_for_lines(&mut child, "started", 2);
    let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("pid");
    rustix::process::kill_process_group(pid, rustix::process::Signal::INT)
        .expect("signal the group");
    let (code, err) = finish(child);
    assert_eq!(code, Some(130), "{err}");
    assert_no_orphans(&t);
}

#[test]
fn a_stop_signal_after_init_leaves_no_pe_4pe() {
    pe_role();
    let t = tag("after_init");
    let mut child = launcher(
        "a_stop_signal_after_init_leaves_no_pe_4pe",
        4,
        "ready_after_init",
        &t,
    )
    .spawn()
    .expect("xpushmem-run");
    wait_for_lines(&mut child, "ready", 4);
    let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("signal the launcher");
    let (code, err) = finish(child);
    assert_eq!(code, Some(143), "{err}");
    assert_no_orphans(&t);
}

#[test]
fn a_sigkill_of_the_launcher_before_init_leaves_no_pe_2pe() {
    pe_role();
    let t = tag("launcher_killed");
    let mut child = launcher(
        "a_sigkill_of_the_launcher_before_init_leaves_no_pe_2pe",
        2,
        "sleep_before_init",
        &t,
    )
    .spawn()
    .expect("xpushmem-run");
    wait_for_lines(&mut child, "started", 2);
    // SIGKILL cannot be caught: the PEs' parent-death signal, asked for before their program started, ends them.
    child.kill().expect("SIGKILL the launcher");
    let _ = child.wait();
    let start = Instant::now();
    while !processes_tagged(&t).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "PEs still alive 20 s after their launcher died: {:?}",
            processes_tagged(&t)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_pe_whose_launcher_is_gone_does_not_start() {
    // A pid that names no living process: a child that has exited and been reaped.
    let mut gone = Command::new("true").spawn().expect("spawn true");
    let pid = gone.id();
    gone.wait().expect("wait");
    let out = Command::new(env!("CARGO_BIN_EXE_xpushmem-run"))
        .args([xpushmem_launch::PE_EXEC_FLAG, "true"])
        .env("XPUSHMEM_LAUNCHER_PID", pid.to_string())
        .output()
        .expect("xpushmem-run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(127), "{err}");
    assert!(
        err.contains(&format!(
            "the launcher that started this PE (XPUSHMEM_LAUNCHER_PID={pid}) is gone"
        )),
        "{err}"
    );
}
