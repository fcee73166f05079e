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
//! the root cause's: the `global_exit` status, else the first failure not caused by the loss of another PE.
//!
//! **No orphans.** All PEs form one process group from the moment they start; the launcher signals the whole
//! group when the job ends, and, with [`Job::stop_on_signals`], when it receives SIGINT, SIGTERM or SIGHUP (before
//! or after the PEs' init). With [`Job::pe_exec`] (as `xpushmem-run` does) each PE asks for the parent-death signal
//! before its program starts, so that even a SIGKILL of the launcher ends it; otherwise the runtime asks for it in
//! init (when `XPUSHMEM_LAUNCHER_PID` names its parent), and a PE whose launcher is gone fails its init at once
//! instead of retrying a dead rendezvous.

use crate::bootstrap::uid::Server;
use crate::error::{Error, Result};
use rustix::process::Signal;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Environment variable through which the launcher tells a PE where to report `global_exit` and lost peers.
const REPORT_VAR: &str = "XPUSHMEM_LAUNCHER_REPORT";
/// Environment variable naming the launcher's pid.
const PID_VAR: &str = "XPUSHMEM_LAUNCHER_PID";

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
    /// Catch SIGINT, SIGTERM and SIGHUP while the job runs and stop every PE on them (the signal is then in
    /// [`Outcome::stopped_by`]); for a launcher process such as `xpushmem-run`, not for a library caller.
    pub stop_on_signals: bool,
    /// Stop every PE as soon as one fails (the default); off, the job runs until every PE has ended or the time
    /// limit passes (for tests that watch how the other PEs meet a failure).
    pub stop_on_failure: bool,
    /// Start each PE through this program as `PE_EXEC PE_EXEC_FLAG PROGRAM ARGS...` (`xpushmem-run` passes itself):
    /// it ties itself to the launcher with the parent-death signal and then becomes the PE's program
    /// ([`exec_pe`]), so that no PE outlives the launcher even before its init.
    pub pe_exec: Option<std::path::PathBuf>,
}

/// The first argument that makes `xpushmem-run` act as the start of one PE (see [`Job::pe_exec`]).
pub const PE_EXEC_FLAG: &str = "--xpushmem-pe-exec";

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
    /// for a signal); 124 on timeout; 128+signal when a signal stopped the launcher.
    pub fn exit_code(&self) -> i32 {
        if let Some(s) = self.stopped_by {
            return 128 + s;
        }
        if self.timed_out {
            return 124;
        }
        match (&self.cause, &self.first_failure) {
            (Some(Cause::GlobalExit(s)), _) => *s,
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

fn pump(
    pe: usize,
    is_err: bool,
    src: impl std::io::Read + Send + 'static,
    prefix: bool,
    capture: Option<Lines>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut r = BufReader::new(src);
        let mut line = Vec::new();
        while r
            .read_until(b'\n', &mut line)
            .map(|n| n > 0)
            .unwrap_or(false)
        {
            let text = String::from_utf8_lossy(&line)
                .trim_end_matches('\n')
                .to_string();
            if let Some(c) = &capture {
                c.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((pe, is_err, text));
            } else {
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
            }
            line.clear();
        }
    })
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
        for sig in [Signal::INT, Signal::TERM, Signal::HUP] {
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
    let explained = |pe: usize| reports.lost.iter().any(|(r, _)| *r == pe);
    if let Some(&(_, _, pe)) = failures.iter().find(|(_, _, pe)| !explained(*pe)) {
        let e = seen[pe].as_ref()?.exit.clone();
        let c = cause_of(&e);
        return Some((pe, e, c));
    }
    if let Some(&(_, lost)) = reports.lost.first() {
        match seen[lost].as_ref().map(|s| s.exit.clone()) {
            Some(PeExit::Code(0)) => return Some((lost, PeExit::Code(0), Cause::LeftEarly)),
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
        }
    }

    /// Run the job to its end.
    pub fn run(&self) -> Result<Outcome> {
        if self.n_pes == 0 {
            return Err(Error::invalid("n_pes", 0, "a job needs at least one PE"));
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
        let mut children: Vec<Option<(Child, Option<OwnedFd>)>> = Vec::with_capacity(self.n_pes);
        let mut pgid: Option<rustix::process::Pid> = None;
        let mut pumps = Vec::new();
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
                    return Err(Error::os(
                        "spawn",
                        format!("{}: {e}", self.program.display()),
                    ));
                }
            };
            let pid = rustix::process::Pid::from_raw(child.id() as i32);
            if pgid.is_none() {
                pgid = pid;
            }
            let pidfd = pid.and_then(|p| {
                rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok()
            });
            let cap = self.capture.then(|| captured.clone());
            if let Some(o) = child.stdout.take() {
                pumps.push(pump(pe, false, o, self.prefix_output, cap.clone()));
            }
            if let Some(e) = child.stderr.take() {
                pumps.push(pump(pe, true, e, self.prefix_output, cap));
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
            let failed = self.stop_on_failure
                && (!reports.global.is_empty()
                    || seen
                        .iter()
                        .flatten()
                        .any(|s| !matches!(s.exit, PeExit::Code(0) | PeExit::Killed)));
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
                    Signal::from_named_raw(s).unwrap_or(Signal::TERM)
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
            // Sleep until a PE ends, a report or a signal arrives, or the next deadline.
            let mut wait = Duration::from_millis(500);
            if let Some(t) = self.timeout {
                wait = wait.min(t.saturating_sub(start.elapsed()) + Duration::from_millis(1));
            }
            if let Some(k) = kill_at {
                wait = wait
                    .min(k.saturating_duration_since(Instant::now()) + Duration::from_millis(1));
            }
            if children.iter().flatten().any(|(_, fd)| fd.is_none()) {
                wait = wait.min(Duration::from_millis(5));
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
        // Nothing of a failed job survives it: a process a PE started in the job's group goes too.
        if stop_batch.is_some() {
            signal_group(pgid, Signal::KILL);
        }
        for p in pumps {
            let _ = p.join();
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

/// Write one line to the launcher's report pipe, if this process was started by a launcher (never blocks).
fn report(kind: char, value: i64) {
    let (Some(path), Some(rank)) = (
        crate::config::env_value(REPORT_VAR),
        crate::config::env_value("XPUSHMEM_BOOTSTRAP_RANK"),
    ) else {
        return;
    };
    use std::os::unix::fs::OpenOptionsExt;
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path.trim())
    {
        let _ = f.write_all(format!("{kind} {} {value}\n", rank.trim()).as_bytes());
    }
}

/// Leave the job now with `status`, without finalizing (OpenSHMEM `global_exit`): the launcher, if any, is told
/// first, so that it names this PE and ends the whole job with `status` whichever PE's exit it sees first; peers
/// waiting on this PE see it as lost.
pub fn global_exit(status: i32) -> ! {
    report('G', status as i64);
    std::process::exit(status)
}

/// Tell the launcher (if any) that this PE met the loss of PE `lost` (once per process: the first loss is the one
/// that explains this PE's failure).
pub(crate) fn report_peer_lost(lost: usize) {
    static ONCE: AtomicBool = AtomicBool::new(false);
    if !ONCE.swap(true, Ordering::SeqCst) {
        report('L', lost as i64);
    }
}

/// Become one PE's `program` (in the process the launcher forked for it): first ask for SIGKILL when the launcher
/// dies (`PR_SET_PDEATHSIG`, which survives the exec), so that the PE is tied to the launcher from its first
/// instruction on; a launcher already gone ends this PE here. Returns only on failure, with the error.
pub fn exec_pe(program: &std::ffi::OsStr, args: &[std::ffi::OsString]) -> Error {
    if let Err(e) = tie_to_launcher() {
        return e;
    }
    let e = std::os::unix::process::CommandExt::exec(Command::new(program).args(args));
    Error::os("exec", format!("{}: {e}", program.to_string_lossy()))
}

/// Called by the runtime at start-up: when launched by `xpushmem-run`, die with it; when that launcher is already
/// gone, fail at once (its rendezvous is gone with it).
pub(crate) fn tie_to_launcher() -> Result<()> {
    let Some(pid) = crate::config::env_value(PID_VAR) else {
        return Ok(());
    };
    let launcher = pid
        .trim()
        .parse::<i32>()
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| Error::Config {
            var: PID_VAR,
            value: pid.clone(),
            reason: "expected the launcher's process id".into(),
        })?;
    let parent = || rustix::process::getppid();
    if parent() == Some(launcher) {
        let _ = rustix::process::set_parent_process_death_signal(Some(Signal::KILL));
        // It may have died just before the death signal was armed.
        if parent() == Some(launcher) {
            return Ok(());
        }
    } else if rustix::process::test_kill_process(launcher).is_ok() {
        // Started through a wrapper (a shell, a debugger): the launcher is alive, its group kill reaches us.
        return Ok(());
    }
    Err(Error::Bootstrap {
        method: "uid",
        message: format!(
            "the launcher that started this PE ({PID_VAR}={}) is gone; not joining its job",
            pid.trim()
        ),
    })
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
