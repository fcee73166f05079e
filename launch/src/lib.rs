//! Launch a job of N PEs on this machine: the engine of `xpushmem-run` and of the test harness.
//!
//! The launcher serves the uid rendezvous itself, starts N processes with `XPUSHMEM_BOOTSTRAP_UID`,
//! `XPUSHMEM_BOOTSTRAP_RANK` and `XPUSHMEM_BOOTSTRAP_NRANKS` set, prefixes every line they print with their PE
//! number, and watches them: when one fails, the others are terminated (SIGTERM, then SIGKILL after a grace
//! period); when the time limit passes, all are.
//!
//! **Which PE failed.** The launcher waits on every PE's pidfd (woken the moment one exits, not by polling in
//! order) and reads a report pipe the PEs write to: `global_exit` names its PE and status there before the process
//! exits, and a PE that meets a lost peer names that peer before it can fail because of it. The job's status is
//! the root cause's: the `global_exit` status, else the first failure not caused by the loss of another PE. While
//! every failure is such a loss and the lost PE still runs (it left the job, say its init failed, and is printing
//! why), the job waits for it up to [`LOST_GRACE`] before stopping, so that its own message and status are kept.
//!
//! **No orphans.** All PEs form one process group from the moment they start; the launcher signals the whole
//! group when the job ends, and, with [`Job::stop_on_signals`], when it receives SIGINT, SIGTERM, SIGHUP or another
//! of the signals listed below (before or after the PEs' init). With [`Job::pe_exec`] (as `xpushmem-run` does)
//! each PE asks for the parent-death signal before its program starts, so that even a SIGKILL of the launcher ends
//! it; otherwise the runtime asks for it in init (when `XPUSHMEM_LAUNCHER_PID` names its parent), and a PE whose
//! launcher is gone fails its init at once instead of retrying a dead rendezvous.
//!
//! **The whole job ends with the launcher** ([`Job::contain`], set by `xpushmem-run`). What a PE starts (a helper
//! in the background, a daemon that called `setsid`) is part of the job: it must neither hold the launcher past its
//! time limit (by keeping the output pipes open) nor outlive it. Three pieces:
//! - the launcher is a *child subreaper* (`PR_SET_CHILD_SUBREAPER`): an orphan of the job is re-parented to it, not
//!   to init, even after `setsid`, so every process of the job stays below it. Once every PE has ended (success,
//!   failure, time limit or signal) it kills the job's process group and every remaining descendant, reaps them,
//!   and then gives the output pumps a bounded grace ([`PUMP_GRACE`]): a pipe held by a process beyond its reach
//!   cannot hold it either.
//! - a *watchdog* for a launcher that dies without cleaning up (SIGKILL, a crash): the launcher re-executes itself
//!   ([`Job::pe_exec`] with [`WATCHDOG_FLAG`]) as a small process outside the job's group, holding the read end of
//!   a pipe whose write end only the launcher holds. The launcher writes the job's process group and, as it sees
//!   them (every wake-up, at most every [`TRACK_EVERY`]), the processes of the job that left the group; at a clean
//!   end it writes `E`. On end-of-file without `E` the watchdog kills the group and every recorded process still
//!   alive (same start time) with their descendants. The watchdog ignores the terminal's and the usual terminating
//!   signals, so that a Ctrl-C reaching the whole foreground group leaves it in place.
//! - the launcher catches SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGALRM
//!   ([`Job::stop_on_signals`]) and stops the job on them (the first three are forwarded to the PEs, the others as
//!   SIGTERM).
//!
//! A cgroup per job (`cgroup.kill`) would also catch a process that left the group less than [`TRACK_EVERY`]
//! before a SIGKILL of the launcher; it needs root and a writable cgroup v2 hierarchy, which launchers usually
//! lack, so it is not used: the subreaper and the watchdog need no privilege. What still escapes: a process that
//! left the job's process group and the launcher was killed with SIGKILL before the next tracking scan; a process
//! of another uid (a setuid program) the launcher may not signal; a process handed the pipe by other means
//! (it only loses its reader).

use rustix::process::Signal;
use std::io::{BufRead, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xpushmem::launcher::{self, Server, PID_VAR, REPORT_VAR};
use xpushmem::{Error, Result};

/// What to run.
#[derive(Debug, Clone)]
pub struct Job {
    /// Number of PEs.
    pub n_pes: usize,
    /// Program to run.
    pub program: std::path::PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment for every PE.
    pub env: Vec<(String, String)>,
    /// Kill everything after this long.
    pub timeout: Option<Duration>,
    /// Prefix each output line with `[pe N] ` (off: pass output through unchanged).
    pub prefix_output: bool,
    /// Capture output instead of printing it (returned in the [`Outcome`]).
    pub capture: bool,
    /// Catch SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGALRM while the job runs and stop every PE
    /// on them (the signal is then in [`Outcome::stopped_by`]); for a launcher process such as `xpushmem-run`, not
    /// for a library caller.
    pub stop_on_signals: bool,
    /// Stop every PE as soon as one fails (the default); off, the job runs until every PE has ended or the time
    /// limit passes (for tests that watch how the other PEs meet a failure).
    pub stop_on_failure: bool,
    /// Start each PE through this program as `PE_EXEC PE_EXEC_FLAG PROGRAM ARGS...` (`xpushmem-run` passes itself):
    /// it ties itself to the launcher with the parent-death signal and then becomes the PE's program
    /// ([`exec_pe`]), so that no PE outlives the launcher even before its init.
    pub pe_exec: Option<std::path::PathBuf>,
    /// End every process the job started with it (see the module doc): the launcher becomes a child subreaper,
    /// kills and reaps whatever the PEs left once they have ended, and, with [`Job::pe_exec`], starts the watchdog
    /// (`PE_EXEC WATCHDOG_FLAG`) that kills the job when the launcher dies. For a launcher process such as
    /// `xpushmem-run`, not for a library caller: every child of the process that the job's end finds is killed.
    pub contain: bool,
}

/// The first argument that makes `xpushmem-run` act as the start of one PE (see [`Job::pe_exec`]).
pub const PE_EXEC_FLAG: &str = "--xpushmem-pe-exec";

/// The first argument that makes `xpushmem-run` act as the watchdog of a contained job ([`Job::contain`],
/// [`watchdog`]).
pub const WATCHDOG_FLAG: &str = "--xpushmem-watchdog";

/// How long the output pumps may still read once every PE has ended (and, with [`Job::contain`], everything the
/// job left was killed): after it they take what the pipes hold and stop.
pub const PUMP_GRACE: Duration = Duration::from_secs(1);

/// How often a contained job's launcher looks for processes that left the job's process group, to tell the
/// watchdog (it walks only the job's process tree).
pub const TRACK_EVERY: Duration = Duration::from_millis(200);

/// The most PEs one machine can run and what bounds it: the smaller of the kernel's `pid_max` and this user's
/// `RLIMIT_NPROC` (each PE is one process at least).
pub fn max_pes() -> (usize, &'static str) {
    let pid_max = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .unwrap_or(1 << 22);
    let nproc = rustix::process::getrlimit(rustix::process::Resource::Nproc)
        .current
        .and_then(|n| usize::try_from(n).ok());
    match nproc {
        Some(n) if n < pid_max => (n, "RLIMIT_NPROC"),
        _ => (pid_max, "kernel.pid_max"),
    }
}

/// How one PE ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeExit {
    /// Exited with this code.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
    /// Killed by the launcher (another PE failed, the time limit passed, or the launcher was told to stop).
    Killed,
}

/// Why the PE that failed first failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// It called `global_exit` with this status.
    GlobalExit(i32),
    /// It exited with this non-zero code.
    Code(i32),
    /// A signal the launcher did not send killed it.
    Signal(i32),
    /// It exited with status 0 without finalizing and other PEs failed waiting for it.
    LeftEarly,
    /// Other PEs failed because they lost it (it left the job), and it had not ended [`LOST_GRACE`] later, when the
    /// launcher stopped it.
    Lost,
}

/// How a job ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Per PE.
    pub exits: Vec<PeExit>,
    /// The PE that failed first (the root cause) and how it ended, if any.
    pub first_failure: Option<(usize, PeExit)>,
    /// Why that PE failed.
    pub cause: Option<Cause>,
    /// PEs that reported the loss of another PE: `(reporter, lost)`, in report order.
    pub lost_reports: Vec<(usize, usize)>,
    /// Whether the time limit ended the job.
    pub timed_out: bool,
    /// The signal that told the launcher to stop the job ([`Job::stop_on_signals`]).
    pub stopped_by: Option<i32>,
    /// Wall time.
    pub elapsed: Duration,
    /// Captured output lines `(pe, is_stderr, line)`, when `capture` was set.
    pub output: Vec<(usize, bool, String)>,
}

/// A signal's name (`SIGKILL`) or its number.
pub fn signal_name(sig: i32) -> String {
    signal_hook::low_level::signal_name(sig).map_or_else(|| format!("signal {sig}"), String::from)
}

impl Outcome {
    /// Exit status for the launcher: 0; the root cause's status (its `global_exit` status, its code, 128+signal
    /// for a signal, 1 for a PE that left the job and was stopped, [`Cause::Lost`]); 124 on timeout; 128+signal
    /// when a signal stopped the launcher.
    pub fn exit_code(&self) -> i32 {
        if let Some(s) = self.stopped_by {
            return 128 + s;
        }
        if self.timed_out {
            return 124;
        }
        match (&self.cause, &self.first_failure) {
            (Some(Cause::GlobalExit(s)), _) => *s,
            (Some(Cause::Lost), _) => 1,
            (_, None) => 0,
            (_, Some((_, PeExit::Code(0)))) => 1,
            (_, Some((_, PeExit::Code(c)))) => *c,
            (_, Some((_, PeExit::Signal(s)))) => 128 + s,
            (_, Some((_, PeExit::Killed))) => 137,
        }
    }

    /// Whether the job succeeded (exit status 0).
    pub fn success(&self) -> bool {
        self.exit_code() == 0
    }

    /// One line saying which PE failed first and why, or `None` when the job succeeded.
    pub fn describe(&self) -> Option<String> {
        if let Some(s) = self.stopped_by {
            return Some(format!("{} received; every PE was stopped", signal_name(s)));
        }
        if self.timed_out {
            return Some("the time limit was reached; every PE was stopped".into());
        }
        let (pe, _) = self.first_failure.as_ref()?;
        let why = match self.cause.as_ref()? {
            Cause::GlobalExit(s) => format!("it called global_exit({s})"),
            Cause::Code(c) => format!("it exited with code {c}"),
            Cause::Signal(s) => format!("it was killed by {} ({s})", signal_name(*s)),
            Cause::LeftEarly => "it exited with code 0 without finalizing".into(),
            Cause::Lost => format!(
                "it left the job and had not ended {} s later, when it was stopped",
                LOST_GRACE.as_secs()
            ),
        };
        let witnesses: Vec<String> = self
            .lost_reports
            .iter()
            .filter(|(_, lost)| lost == pe)
            .map(|(r, _)| r.to_string())
            .collect();
        let seen = if witnesses.is_empty() {
            String::new()
        } else {
            format!("; PEs {} reported it lost", witnesses.join(", "))
        };
        Some(format!("PE {pe} failed first: {why}{seen}"))
    }

    /// The captured output of one PE, both streams, in arrival order.
    pub fn output_of(&self, pe: usize) -> String {
        self.output
            .iter()
            .filter(|(p, _, _)| *p == pe)
            .map(|(_, _, l)| format!("{l}\n"))
            .collect()
    }
}

fn exit_of(st: ExitStatus) -> PeExit {
    use std::os::unix::process::ExitStatusExt;
    match (st.code(), st.signal()) {
        (Some(c), _) => PeExit::Code(c),
        (None, Some(s)) => PeExit::Signal(s),
        _ => PeExit::Killed,
    }
}

/// Signal the PEs' process group (ignoring a group that is already gone).
fn signal_group(pgid: Option<rustix::process::Pid>, sig: Signal) {
    if let Some(g) = pgid {
        let _ = rustix::process::kill_process_group(g, sig);
    }
}

type Lines = std::sync::Arc<std::sync::Mutex<Vec<(usize, bool, String)>>>;

/// Copy one PE stream line by line (prefixed, or into `capture`) until end-of-file, or, once `stop` is set, until
/// the pipe holds nothing more (at most a few MiB more): a process that keeps the pipe open cannot hold it.
fn pump(
    pe: usize,
    is_err: bool,
    src: OwnedFd,
    prefix: bool,
    capture: Option<Lines>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let emit = |line: &[u8]| {
            let text = String::from_utf8_lossy(line).to_string();
            if let Some(c) = &capture {
                c.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((pe, is_err, text));
                return;
            }
            let out = if prefix {
                format!("[pe {pe}] {text}\n")
            } else {
                format!("{text}\n")
            };
            if is_err {
                let _ = std::io::stderr().lock().write_all(out.as_bytes());
            } else {
                let _ = std::io::stdout().lock().write_all(out.as_bytes());
            }
        };
        let mut buf = Vec::new();
        let mut chunk = [0u8; 8192];
        let mut after_stop = 0;
        loop {
            let stopping = stop.load(Ordering::SeqCst);
            if stopping {
                after_stop += 1;
                if after_stop > 512 {
                    break;
                }
            }
            let wait = rustix::time::Timespec {
                tv_sec: 0,
                tv_nsec: if stopping { 0 } else { 100_000_000 },
            };
            let mut fds = [rustix::event::PollFd::new(
                &src,
                rustix::event::PollFlags::IN,
            )];
            match rustix::event::poll(&mut fds, Some(&wait)) {
                Ok(0) if stopping => break,
                Ok(0) | Err(rustix::io::Errno::INTR) => continue,
                Ok(_) => {}
                Err(_) => break,
            }
            match rustix::io::read(&src, &mut chunk) {
                Ok(0) => break,
                Ok(k) => buf.extend_from_slice(&chunk[..k]),
                Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => continue,
                Err(_) => break,
            }
            while let Some(end) = buf.iter().position(|&b| b == b'\n') {
                emit(&buf[..end]);
                buf.drain(..=end);
            }
        }
        if !buf.is_empty() {
            emit(&buf);
        }
    })
}

/// One process as `/proc/PID/stat` shows it.
#[derive(Debug, Clone, Copy)]
struct Proc {
    pid: i32,
    ppid: i32,
    pgid: i32,
    /// Start time in clock ticks since boot (with the pid, it names a process: pids are reused).
    start: u64,
    zombie: bool,
}

fn proc_stat(pid: i32) -> Option<Proc> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields 3.. follow the last ')'.
    let f: Vec<&str> = s.get(s.rfind(')')? + 1..)?.split_whitespace().collect();
    Some(Proc {
        pid,
        zombie: *f.first()? == "Z",
        ppid: f.get(1)?.parse().ok()?,
        pgid: f.get(2)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
    })
}

/// Every process of the system now.
fn processes() -> Vec<Proc> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(proc_stat)
        .collect()
}

/// Every process below `roots` (not the roots themselves) in `table`.
fn descendants(roots: &[i32], table: &[Proc]) -> Vec<Proc> {
    let mut out: Vec<Proc> = Vec::new();
    let mut frontier = roots.to_vec();
    while let Some(parent) = frontier.pop() {
        for c in table.iter().filter(|c| c.ppid == parent) {
            if !out.iter().any(|o| o.pid == c.pid) && !roots.contains(&c.pid) {
                out.push(*c);
                frontier.push(c.pid);
            }
        }
    }
    out
}

/// The processes below `root`, found through `/proc/PID/task/TID/children` (the cost is the size of the tree, not
/// of the machine's process table); through the whole table's parent links where the kernel lacks those files.
fn tree_below(root: i32) -> Vec<Proc> {
    if std::fs::metadata(format!("/proc/{root}/task/{root}/children")).is_err() {
        return descendants(&[root], &processes());
    }
    let mut out: Vec<Proc> = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        let kids: Vec<i32> = std::fs::read_dir(format!("/proc/{p}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
            .flat_map(|s| {
                s.split_whitespace()
                    .filter_map(|k| k.parse::<i32>().ok())
                    .collect::<Vec<_>>()
            })
            .collect();
        for k in kids {
            if k != root && !out.iter().any(|o| o.pid == k) {
                if let Some(st) = proc_stat(k) {
                    out.push(st);
                    frontier.push(k);
                }
            }
        }
    }
    out
}

fn kill_pid(pid: i32, sig: Signal) {
    if let Some(p) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(p, sig);
    }
}

/// The launcher's side of [`Job::contain`]: the subreaper and the watchdog's pipe.
struct Containment {
    me: i32,
    watchdog: Option<(Child, std::fs::File)>,
    /// Processes already named to the watchdog.
    told: Vec<(i32, u64)>,
    last_scan: Option<Instant>,
}

impl Containment {
    fn start(job: &Job) -> Result<Option<Containment>> {
        if !job.contain {
            return Ok(None);
        }
        let me = rustix::process::getpid();
        rustix::process::set_child_subreaper(Some(me))
            .map_err(|e| Error::os("prctl(PR_SET_CHILD_SUBREAPER)", e))?;
        let watchdog = match &job.pe_exec {
            Some(exe) => {
                // The write end stays in this process only (close-on-exec); the watchdog reads the other end.
                let (rd, wr) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
                    .map_err(|e| Error::os("pipe", e))?;
                let child = Command::new(exe)
                    .arg(WATCHDOG_FLAG)
                    .stdin(Stdio::from(rd))
                    .stdout(Stdio::null())
                    .spawn()
                    .map_err(|e| {
                        Error::os(
                            "spawn",
                            format!("the job's watchdog {}: {e}", exe.display()),
                        )
                    })?;
                Some((child, std::fs::File::from(wr)))
            }
            None => None,
        };
        Ok(Some(Containment {
            me: me.as_raw_nonzero().get(),
            watchdog,
            told: Vec::new(),
            last_scan: None,
        }))
    }

    fn tell(&mut self, line: &str) {
        if let Some((_, f)) = &mut self.watchdog {
            let _ = f.write_all(line.as_bytes());
        }
    }

    fn watchdog_pid(&self) -> Option<i32> {
        self.watchdog.as_ref().map(|(c, _)| c.id() as i32)
    }

    /// Name to the watchdog the job's processes that left its process group (at most every [`TRACK_EVERY`]).
    fn track(&mut self, pgid: Option<rustix::process::Pid>) {
        if self.watchdog.is_none() || self.last_scan.is_some_and(|t| t.elapsed() < TRACK_EVERY) {
            return;
        }
        self.last_scan = Some(Instant::now());
        let group = pgid.map(|g| g.as_raw_nonzero().get());
        let wd = self.watchdog_pid();
        for p in tree_below(self.me) {
            if Some(p.pgid) != group
                && Some(p.pid) != wd
                && !p.zombie
                && !self.told.contains(&(p.pid, p.start))
            {
                self.told.push((p.pid, p.start));
                self.tell(&format!("P {} {}\n", p.pid, p.start));
            }
        }
    }

    /// Kill the job's group and every process still below the launcher (the PEs' orphans are re-parented here),
    /// and reap them; gives up after a few seconds (a process of another uid may not be signalled).
    fn sweep(&mut self, pgid: Option<rustix::process::Pid>) {
        signal_group(pgid, Signal::KILL);
        let deadline = Instant::now() + Duration::from_secs(2);
        let wd = self.watchdog_pid();
        loop {
            let left: Vec<Proc> = tree_below(self.me)
                .into_iter()
                .filter(|p| Some(p.pid) != wd)
                .collect();
            if left.is_empty() {
                return;
            }
            for p in &left {
                if !p.zombie {
                    kill_pid(p.pid, Signal::KILL);
                }
                if p.ppid == self.me {
                    let _ = rustix::process::waitpid(
                        rustix::process::Pid::from_raw(p.pid),
                        rustix::process::WaitOptions::NOHANG,
                    );
                }
            }
            if Instant::now() >= deadline {
                let pids: Vec<i32> = left.iter().map(|p| p.pid).collect();
                tracing::warn!(?pids, "processes the job started could not be ended");
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A clean end: tell the watchdog, which exits, and reap it.
    fn finish(mut self) {
        self.tell("E\n");
        if let Some((mut child, f)) = self.watchdog.take() {
            drop(f);
            let until = Instant::now() + Duration::from_secs(1);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(2));
            }
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// The watchdog of a contained job (`xpushmem-run --xpushmem-watchdog`, started by the launcher with the read end
/// of its pipe as stdin; see the module doc). Returns the exit status: 0 after the launcher's clean end, 1 when it
/// ended the job itself.
pub fn watchdog() -> i32 {
    // Signals meant for the launcher's terminal group must not end the watchdog: only the pipe does.
    let caught = Arc::new(AtomicBool::new(false));
    for sig in [
        Signal::INT,
        Signal::QUIT,
        Signal::HUP,
        Signal::TERM,
        Signal::USR1,
        Signal::USR2,
        Signal::ALARM,
        Signal::PIPE,
    ] {
        let _ = signal_hook::flag::register(sig.as_raw(), caught.clone());
    }
    let mut group = None;
    let mut named: Vec<(i32, u64)> = Vec::new();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["E"] => return 0,
            ["G", g] => {
                group = g
                    .parse::<i32>()
                    .ok()
                    .and_then(rustix::process::Pid::from_raw)
            }
            ["P", pid, start] => {
                if let (Ok(p), Ok(s)) = (pid.parse(), start.parse()) {
                    named.push((p, s));
                }
            }
            _ => {}
        }
    }
    // The launcher is gone without ending its job.
    signal_group(group, Signal::KILL);
    let table = processes();
    let alive: Vec<i32> = named
        .iter()
        .filter(|(pid, start)| table.iter().any(|p| p.pid == *pid && p.start == *start))
        .map(|(pid, _)| *pid)
        .collect();
    let below = descendants(&alive, &table);
    for pid in alive.iter().copied().chain(below.iter().map(|p| p.pid)) {
        kill_pid(pid, Signal::KILL);
    }
    eprintln!(
        "xpushmem-run: the launcher ended before its job; the watchdog killed the job's process group and {} \
         processes that had left it",
        alive.len() + below.len()
    );
    1
}

/// The launcher's end of the signals it stops on: which one came last, and a pipe that wakes its poll.
struct StopSignals {
    which: Arc<AtomicUsize>,
    wake: Option<OwnedFd>,
    ids: Vec<signal_hook::SigId>,
}

impl StopSignals {
    fn install(on: bool) -> Result<StopSignals> {
        let mut s = StopSignals {
            which: Arc::new(AtomicUsize::new(0)),
            wake: None,
            ids: Vec::new(),
        };
        if !on {
            return Ok(s);
        }
        let (rd, wr) = rustix::pipe::pipe_with(
            rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK,
        )
        .map_err(|e| Error::os("pipe", e))?;
        for sig in [
            Signal::INT,
            Signal::TERM,
            Signal::HUP,
            Signal::QUIT,
            Signal::USR1,
            Signal::USR2,
            Signal::ALARM,
        ] {
            let n = sig.as_raw();
            let w = wr.try_clone().map_err(|e| Error::os("dup", e))?;
            let id = signal_hook::flag::register_usize(n, s.which.clone(), n as usize)
                .map_err(|e| Error::os("sigaction", e))?;
            s.ids.push(id);
            let id = signal_hook::low_level::pipe::register(n, w)
                .map_err(|e| Error::os("sigaction", e))?;
            s.ids.push(id);
        }
        s.wake = Some(rd);
        Ok(s)
    }

    /// The signal received, if any.
    fn received(&self) -> Option<i32> {
        match self.which.load(Ordering::SeqCst) {
            0 => None,
            n => Some(n as i32),
        }
    }
}

impl Drop for StopSignals {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// What the PEs reported on the launcher's pipe.
#[derive(Default)]
struct Reports {
    /// Partial line.
    buf: Vec<u8>,
    /// `(pe, status)` of `global_exit` calls, in arrival order.
    global: Vec<(usize, i32)>,
    /// `(reporter, lost)`.
    lost: Vec<(usize, usize)>,
}

impl Reports {
    /// Whether PE `pe` reported the loss of another (which then explains its failure).
    fn explains(&self, pe: usize) -> bool {
        self.lost.iter().any(|(r, _)| *r == pe)
    }

    /// Read everything the pipe holds now (it is non-blocking) and parse complete lines.
    fn drain(&mut self, fd: &OwnedFd, n: usize) {
        let mut chunk = [0u8; 4096];
        while let Ok(k) = rustix::io::read(fd, &mut chunk) {
            if k == 0 {
                break;
            }
            self.buf.extend_from_slice(&chunk[..k]);
        }
        while let Some(end) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=end).collect();
            let text = String::from_utf8_lossy(&line);
            let mut w = text.split_whitespace();
            let (Some(kind), Some(pe), Some(v)) = (w.next(), w.next(), w.next()) else {
                continue;
            };
            let (Ok(pe), Ok(v)) = (pe.parse::<usize>(), v.parse::<i64>()) else {
                continue;
            };
            if pe >= n {
                continue;
            }
            match kind {
                "G" => self.global.push((pe, v as i32)),
                "L" if (0..n as i64).contains(&v) => self.lost.push((pe, v as usize)),
                _ => {}
            }
        }
    }
}

/// One PE's end as the launcher saw it: how, and in which wake-up of the launcher (ties broken by signal first).
#[derive(Clone)]
struct Seen {
    exit: PeExit,
    batch: usize,
}

/// How long failures that report the loss of a PE still running wait for it before the job is stopped ([`Job::run`]).
pub const LOST_GRACE: Duration = Duration::from_secs(2);

/// Whether the job's failures so far are all explained as the loss of a PE that is still running (`running`), and
/// so wait for that PE's own end: no `global_exit`, every failed PE reported a lost peer, and a PE so reported runs.
fn awaits_lost(seen: &[Option<Seen>], reports: &Reports, running: impl Fn(usize) -> bool) -> bool {
    reports.global.is_empty()
        && seen.iter().enumerate().all(|(pe, s)| match s {
            Some(Seen {
                exit: PeExit::Code(0) | PeExit::Killed,
                ..
            })
            | None => true,
            Some(_) => reports.explains(pe),
        })
        && reports.lost.iter().any(|&(_, lost)| running(lost))
}

/// The root cause among the PEs' ends: the first `global_exit`, else the earliest failure that no report
/// explains as the loss of another PE, else the PE the first report says was lost.
fn root_cause(
    seen: &[Option<Seen>],
    reports: &Reports,
    stop_batch: Option<usize>,
) -> Option<(usize, PeExit, Cause)> {
    if let Some(&(pe, status)) = reports.global.first() {
        let exit = seen[pe]
            .as_ref()
            .map_or(PeExit::Code(status), |s| s.exit.clone());
        return Some((pe, exit, Cause::GlobalExit(status)));
    }
    let cause_of = |e: &PeExit| match e {
        PeExit::Code(c) => Cause::Code(*c),
        PeExit::Signal(s) => Cause::Signal(*s),
        PeExit::Killed => Cause::Signal(Signal::KILL.as_raw()),
    };
    let mut failures: Vec<(usize, usize, usize)> = seen
        .iter()
        .enumerate()
        .filter_map(|(pe, s)| {
            let s = s.as_ref()?;
            let rank = match s.exit {
                PeExit::Code(0) | PeExit::Killed => return None,
                PeExit::Signal(_) => 0,
                PeExit::Code(_) => 1,
            };
            Some((s.batch, rank, pe))
        })
        .filter(|(b, _, _)| stop_batch.is_none_or(|sb| *b <= sb))
        .collect();
    failures.sort();
    if failures.is_empty() {
        // Every PE exited with 0: a PE that others reported lost left early, but the job did not fail.
        return None;
    }
    if let Some(&(_, _, pe)) = failures.iter().find(|(_, _, pe)| !reports.explains(*pe)) {
        let e = seen[pe].as_ref()?.exit.clone();
        let c = cause_of(&e);
        return Some((pe, e, c));
    }
    if let Some(&(_, lost)) = reports.lost.first() {
        match seen[lost].as_ref().map(|s| s.exit.clone()) {
            Some(PeExit::Code(0)) => return Some((lost, PeExit::Code(0), Cause::LeftEarly)),
            Some(PeExit::Killed) => return Some((lost, PeExit::Killed, Cause::Lost)),
            Some(e @ (PeExit::Code(_) | PeExit::Signal(_))) => {
                let c = cause_of(&e);
                return Some((lost, e, c));
            }
            _ => {}
        }
    }
    let &(_, _, pe) = failures.first()?;
    let e = seen[pe].as_ref()?.exit.clone();
    let c = cause_of(&e);
    Some((pe, e, c))
}

impl Job {
    /// A job of `n_pes` copies of `program`.
    pub fn new(n_pes: usize, program: impl Into<std::path::PathBuf>) -> Job {
        Job {
            n_pes,
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            timeout: None,
            prefix_output: true,
            capture: false,
            stop_on_signals: false,
            stop_on_failure: true,
            pe_exec: None,
            contain: false,
        }
    }

    /// Run the job to its end.
    pub fn run(&self) -> Result<Outcome> {
        if self.n_pes == 0 {
            return Err(Error::invalid("n_pes", 0, "a job needs at least one PE"));
        }
        let (most, bound) = max_pes();
        if self.n_pes > most {
            return Err(Error::invalid(
                "n_pes",
                self.n_pes,
                format!("more PEs than this machine can run (at most {most}: {bound})"),
            ));
        }
        let start = Instant::now();
        // Before any PE exists, so that a stop request during start-up is not lost.
        let stop = StopSignals::install(self.stop_on_signals)?;
        let server = Server::start(
            "127.0.0.1"
                .parse()
                .map_err(|_| Error::State("bad loopback".into()))?,
            self.timeout,
        )?;
        let uid = server.id().to_string();
        // The report pipe: PEs open it through /proc (no descriptor is inherited); the launcher keeps the write
        // end so that the read end never reports a hang-up.
        let (report_rd, _report_wr) = rustix::pipe::pipe_with(
            rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK,
        )
        .map_err(|e| Error::os("pipe", e))?;
        let report_path = {
            use std::os::fd::AsRawFd;
            format!("/proc/{}/fd/{}", std::process::id(), report_rd.as_raw_fd())
        };
        let captured: Lines = Default::default();
        let mut contain = Containment::start(self)?;
        let mut children: Vec<Option<(Child, Option<OwnedFd>)>> = Vec::with_capacity(self.n_pes);
        let mut pgid: Option<rustix::process::Pid> = None;
        let mut pumps = Vec::new();
        let stop_pumps = Arc::new(AtomicBool::new(false));
        for pe in 0..self.n_pes {
            let mut cmd = match &self.pe_exec {
                Some(t) => {
                    let mut c = Command::new(t);
                    c.arg(PE_EXEC_FLAG).arg(&self.program);
                    c
                }
                None => Command::new(&self.program),
            };
            cmd.args(&self.args)
                .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .env("XPUSHMEM_BOOTSTRAP", "uid")
                .env("XPUSHMEM_BOOTSTRAP_UID", &uid)
                .env("XPUSHMEM_BOOTSTRAP_RANK", pe.to_string())
                .env("XPUSHMEM_BOOTSTRAP_NRANKS", self.n_pes.to_string())
                .env(PID_VAR, std::process::id().to_string())
                .env(REPORT_VAR, &report_path)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            // One group for the whole job, made at fork (before the program runs): PE 0 leads it.
            std::os::unix::process::CommandExt::process_group(
                &mut cmd,
                pgid.map_or(0, |g| g.as_raw_nonzero().get()),
            );
            let mut child = match cmd.spawn() {
                Ok(c) => c,
                Err(e) => {
                    signal_group(pgid, Signal::KILL);
                    for (c, _) in children.iter_mut().flatten() {
                        let _ = c.wait();
                    }
                    if let Some(mut c) = contain.take() {
                        c.sweep(pgid);
                        c.finish();
                    }
                    return Err(Error::os(
                        "spawn",
                        format!("{}: {e}", self.program.display()),
                    ));
                }
            };
            let pid = rustix::process::Pid::from_raw(child.id() as i32);
            if pgid.is_none() {
                pgid = pid;
                if let (Some(c), Some(g)) = (contain.as_mut(), pid) {
                    c.tell(&format!("G {}\n", g.as_raw_nonzero().get()));
                }
            }
            let pidfd = pid.and_then(|p| {
                rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok()
            });
            let cap = self.capture.then(|| captured.clone());
            if let Some(o) = child.stdout.take() {
                let s = stop_pumps.clone();
                pumps.push(pump(
                    pe,
                    false,
                    o.into(),
                    self.prefix_output,
                    cap.clone(),
                    s,
                ));
            }
            if let Some(e) = child.stderr.take() {
                let s = stop_pumps.clone();
                pumps.push(pump(pe, true, e.into(), self.prefix_output, cap, s));
            }
            children.push(Some((child, pidfd)));
        }
        let mut seen: Vec<Option<Seen>> = vec![None; self.n_pes];
        let mut reports = Reports::default();
        let mut sent: Vec<i32> = Vec::new();
        let mut timed_out = false;
        let mut stopped_by = None;
        let mut stop_batch = None;
        let mut kill_at: Option<Instant> = None;
        let mut lost_until: Option<Instant> = None;
        let grace = Duration::from_secs(2);
        let mut batch = 0usize;
        loop {
            // Reap whoever ended, then read the reports: a PE writes its report before it exits, so every report
            // of a PE reaped here is in the pipe already.
            batch += 1;
            for pe in 0..self.n_pes {
                let Some((c, _)) = children[pe].as_mut() else {
                    continue;
                };
                if let Ok(Some(st)) = c.try_wait() {
                    let exit = match exit_of(st) {
                        PeExit::Signal(s) if sent.contains(&s) => PeExit::Killed,
                        other => other,
                    };
                    seen[pe] = Some(Seen { exit, batch });
                    children[pe] = None;
                }
            }
            reports.drain(&report_rd, self.n_pes);
            let mut failed = self.stop_on_failure
                && (!reports.global.is_empty()
                    || seen
                        .iter()
                        .flatten()
                        .any(|s| !matches!(s.exit, PeExit::Code(0) | PeExit::Killed)));
            // Failures that only report the loss of a PE still running wait for that PE, up to LOST_GRACE: it left
            // the job on its way out (its init failed, say), and its own message and status are the root cause; a
            // stop now would kill it in the middle of saying why.
            if failed
                && kill_at.is_none()
                && awaits_lost(&seen, &reports, |pe| children[pe].is_some())
            {
                let until = *lost_until.get_or_insert_with(|| Instant::now() + LOST_GRACE);
                if Instant::now() < until {
                    failed = false;
                }
            }
            let limit_hit = self.timeout.is_some_and(|t| start.elapsed() > t);
            let signal = stop.received();
            if kill_at.is_none() && (failed || limit_hit || signal.is_some()) {
                let sig = if let Some(s) = signal {
                    stopped_by = Some(s);
                    eprintln!(
                        "xpushmem-run: {} received; stopping {} PEs",
                        signal_name(s),
                        children.iter().flatten().count()
                    );
                    // INT, TERM and HUP are forwarded; the others (which a PE may use for itself) end it with TERM.
                    match Signal::from_named_raw(s) {
                        Some(f @ (Signal::INT | Signal::HUP)) => f,
                        _ => Signal::TERM,
                    }
                } else {
                    timed_out = limit_hit && !failed;
                    if timed_out {
                        eprintln!(
                            "xpushmem-run: time limit of {:?} reached; terminating {} PEs",
                            self.timeout.unwrap_or_default(),
                            children.iter().flatten().count()
                        );
                    }
                    Signal::TERM
                };
                stop_batch = Some(batch);
                sent.push(sig.as_raw());
                if children.iter().any(Option::is_some) {
                    signal_group(pgid, sig);
                }
                kill_at = Some(Instant::now() + grace);
            } else if stopped_by.is_none() && signal.is_some() {
                // A signal while the job is already stopping: no more grace.
                stopped_by = signal;
                kill_at = Some(Instant::now());
            }
            if kill_at.is_some_and(|k| Instant::now() >= k)
                && !sent.contains(&Signal::KILL.as_raw())
            {
                sent.push(Signal::KILL.as_raw());
                if children.iter().any(Option::is_some) {
                    signal_group(pgid, Signal::KILL);
                }
            }
            if children.iter().all(Option::is_none) {
                break;
            }
            if let Some(c) = contain.as_mut() {
                c.track(pgid);
            }
            // Sleep until a PE ends, a report or a signal arrives, or the next deadline.
            let mut wait = Duration::from_millis(500);
            if let Some(t) = self.timeout {
                wait = wait.min(t.saturating_sub(start.elapsed()) + Duration::from_millis(1));
            }
            for k in kill_at.iter().chain(lost_until.iter()) {
                wait = wait
                    .min(k.saturating_duration_since(Instant::now()) + Duration::from_millis(1));
            }
            if children.iter().flatten().any(|(_, fd)| fd.is_none()) {
                wait = wait.min(Duration::from_millis(5));
            }
            if contain.as_ref().is_some_and(|c| c.watchdog.is_some()) {
                wait = wait.min(TRACK_EVERY);
            }
            let mut fds: Vec<rustix::event::PollFd<'_>> = children
                .iter()
                .flatten()
                .filter_map(|(_, fd)| fd.as_ref())
                .map(|fd| rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN))
                .collect();
            fds.push(rustix::event::PollFd::new(
                &report_rd,
                rustix::event::PollFlags::IN,
            ));
            if let Some(w) = &stop.wake {
                fds.push(rustix::event::PollFd::new(w, rustix::event::PollFlags::IN));
            }
            let ts = rustix::time::Timespec {
                tv_sec: wait.as_secs() as i64,
                tv_nsec: wait.subsec_nanos() as i64,
            };
            let _ = rustix::event::poll(&mut fds, Some(&ts));
            drop(fds);
            if let Some(w) = &stop.wake {
                let mut b = [0u8; 64];
                while matches!(rustix::io::read(w.as_fd(), &mut b), Ok(k) if k > 0) {}
            }
        }
        // Nothing of the job survives it: with `contain`, whatever the PEs started (in the group or not); without,
        // a process a PE started in the job's group goes when the job failed.
        if let Some(c) = contain.as_mut() {
            c.sweep(pgid);
        } else if stop_batch.is_some() {
            signal_group(pgid, Signal::KILL);
        }
        // The pumps end at end-of-file; a pipe that something beyond the launcher's reach holds open gets
        // PUMP_GRACE, then the pumps take what it holds and stop.
        let until = Instant::now() + PUMP_GRACE;
        while pumps.iter().any(|p| !p.is_finished()) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
        }
        stop_pumps.store(true, Ordering::SeqCst);
        for p in pumps {
            let _ = p.join();
        }
        if let Some(c) = contain {
            c.finish();
        }
        drop(server);
        reports.drain(&report_rd, self.n_pes);
        let root = if timed_out || stopped_by.is_some() {
            None
        } else {
            root_cause(&seen, &reports, stop_batch)
        };
        let output = std::mem::take(&mut *captured.lock().unwrap_or_else(|p| p.into_inner()));
        Ok(Outcome {
            exits: seen
                .into_iter()
                .map(|e| e.map_or(PeExit::Killed, |s| s.exit))
                .collect(),
            first_failure: root.as_ref().map(|(pe, e, _)| (*pe, e.clone())),
            cause: root.map(|(_, _, c)| c),
            lost_reports: reports.lost,
            timed_out,
            stopped_by,
            elapsed: start.elapsed(),
            output,
        })
    }
}

pub use xpushmem::launcher::global_exit;

/// Become one PE's `program` (in the process the launcher forked for it): first ask for SIGKILL when the launcher
/// dies (`PR_SET_PDEATHSIG`, which survives the exec), so that the PE is tied to the launcher from its first
/// instruction on; a launcher already gone ends this PE here. Returns only on failure, with the error.
pub fn exec_pe(program: &std::ffi::OsStr, args: &[std::ffi::OsString]) -> Error {
    if let Err(e) = launcher::tie_to_launcher() {
        return e;
    }
    let e = std::os::unix::process::CommandExt::exec(Command::new(program).args(args));
    Error::os("exec", format!("{}: {e}", program.to_string_lossy()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(v: &[(PeExit, usize)]) -> Vec<Option<Seen>> {
        v.iter()
            .map(|(exit, batch)| {
                Some(Seen {
                    exit: exit.clone(),
                    batch: *batch,
                })
            })
            .collect()
    }

    fn reports(global: &[(usize, i32)], lost: &[(usize, usize)]) -> Reports {
        Reports {
            buf: Vec::new(),
            global: global.to_vec(),
            lost: lost.to_vec(),
        }
    }

    #[test]
    fn global_exit_is_the_root_cause_whoever_was_reaped_first() {
        let s = seen(&[
            (PeExit::Code(1), 1),
            (PeExit::Code(5), 2),
            (PeExit::Killed, 3),
        ]);
        let r = root_cause(&s, &reports(&[(1, 5)], &[(0, 1)]), Some(1));
        assert_eq!(r, Some((1, PeExit::Code(5), Cause::GlobalExit(5))));
    }

    #[test]
    fn a_failure_explained_by_a_lost_peer_is_not_the_root_cause() {
        // PE 0 failed because it lost PE 2, and was reaped in the same wake-up as PE 2's death.
        let s = seen(&[
            (PeExit::Code(1), 1),
            (PeExit::Killed, 2),
            (PeExit::Signal(9), 1),
        ]);
        let r = root_cause(&s, &reports(&[], &[(0, 2)]), Some(1));
        assert_eq!(r, Some((2, PeExit::Signal(9), Cause::Signal(9))));
        // Without reports, a signal death in the same wake-up still comes before an exit code.
        let r = root_cause(&s, &reports(&[], &[]), Some(1));
        assert_eq!(r, Some((2, PeExit::Signal(9), Cause::Signal(9))));
    }

    #[test]
    fn failures_after_the_stop_do_not_count_and_success_is_none() {
        let s = seen(&[(PeExit::Code(3), 1), (PeExit::Code(1), 2)]);
        assert_eq!(
            root_cause(&s, &reports(&[], &[]), Some(1)),
            Some((0, PeExit::Code(3), Cause::Code(3)))
        );
        let ok = seen(&[(PeExit::Code(0), 1), (PeExit::Code(0), 1)]);
        assert_eq!(root_cause(&ok, &reports(&[], &[(0, 1)]), None), None);
    }

    #[test]
    fn a_pe_that_left_early_is_named_when_the_others_failed_for_it() {
        let s = seen(&[(PeExit::Code(1), 2), (PeExit::Code(0), 1)]);
        let r = root_cause(&s, &reports(&[], &[(0, 1)]), Some(2));
        assert_eq!(r, Some((1, PeExit::Code(0), Cause::LeftEarly)));
    }

    #[test]
    fn a_lost_pe_still_running_is_awaited_and_named_when_stopped() {
        let failed = |code| {
            Some(Seen {
                exit: PeExit::Code(code),
                batch: 1,
            })
        };
        // PE 1 failed for the loss of PE 0, which still runs: awaited.
        let lost = reports(&[], &[(1, 0)]);
        let s = vec![None, failed(1)];
        assert!(awaits_lost(&s, &lost, |pe| pe == 0));
        // Not once PE 0 has ended, nor beside a failure no loss explains, nor after a global_exit.
        assert!(!awaits_lost(&s, &lost, |_| false));
        assert!(!awaits_lost(&[None, failed(1), failed(2)], &lost, |pe| pe == 0));
        assert!(!awaits_lost(&s, &reports(&[(1, 5)], &[(1, 0)]), |pe| pe == 0));
        // Stopped after the grace, PE 0 is still the root cause.
        let s = seen(&[(PeExit::Killed, 2), (PeExit::Code(1), 1)]);
        assert_eq!(
            root_cause(&s, &lost, Some(2)),
            Some((0, PeExit::Killed, Cause::Lost))
        );
    }

    #[test]
    fn reports_are_parsed_by_line_and_checked() {
        let (rd, wr) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::NONBLOCK).unwrap();
        let mut r = Reports::default();
        rustix::io::write(&wr, b"G 1 5\nL 0 1\nL 9 1\nX 0 0\nL 2 ").unwrap();
        r.drain(&rd, 4);
        assert_eq!(
            (r.global.clone(), r.lost.clone()),
            (vec![(1, 5)], vec![(0, 1)])
        );
        rustix::io::write(&wr, b"3\n").unwrap();
        r.drain(&rd, 4);
        assert_eq!(r.lost, vec![(0, 1), (2, 3)]);
    }
}
