//! Launch a job of N PEs on this machine: the engine of `xpushmem-run` and of the test harness.
//!
//! The launcher serves the uid rendezvous itself, starts N processes with `XPUSHMEM_BOOTSTRAP_UID`,
//! `XPUSHMEM_BOOTSTRAP_RANK` and `XPUSHMEM_BOOTSTRAP_NRANKS` set, prefixes every line they print with their PE
//! number, and watches them: when one fails, the others are terminated (SIGTERM, then SIGKILL after a grace
//! period); when the time limit passes, all are. Each PE runs in its own process group and is told to die with
//! the launcher (`PR_SET_PDEATHSIG`, set by the runtime when `XPUSHMEM_LAUNCHER_PID` names its parent), so no
//! process outlives the job.

use crate::bootstrap::uid::Server;
use crate::error::{Error, Result};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

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
}

/// How one PE ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeExit {
    /// Exited with this code.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
    /// Killed by the launcher (another PE failed, or the time limit passed).
    Killed,
}

/// How a job ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Per PE.
    pub exits: Vec<PeExit>,
    /// The first PE that failed and how, if any.
    pub first_failure: Option<(usize, PeExit)>,
    /// Whether the time limit ended the job.
    pub timed_out: bool,
    /// Wall time.
    pub elapsed: Duration,
    /// Captured output lines `(pe, is_stderr, line)`, when `capture` was set.
    pub output: Vec<(usize, bool, String)>,
}

impl Outcome {
    /// Exit status for the launcher: 0, the first failure's code (128+signal for signals), or 124 on timeout.
    pub fn exit_code(&self) -> i32 {
        match &self.first_failure {
            _ if self.timed_out => 124,
            None => 0,
            Some((_, PeExit::Code(c))) => *c,
            Some((_, PeExit::Signal(s))) => 128 + s,
            Some((_, PeExit::Killed)) => 137,
        }
    }

    /// Whether every PE exited with 0.
    pub fn success(&self) -> bool {
        self.exit_code() == 0
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

fn signal_group(child: &Child, sig: rustix::process::Signal) {
    if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
        let _ = rustix::process::kill_process_group(pid, sig);
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
        }
    }

    /// Run the job to its end.
    pub fn run(&self) -> Result<Outcome> {
        if self.n_pes == 0 {
            return Err(Error::invalid("n_pes", 0, "a job needs at least one PE"));
        }
        let start = Instant::now();
        let server = Server::start(
            "127.0.0.1"
                .parse()
                .map_err(|_| Error::State("bad loopback".into()))?,
            self.timeout,
        )?;
        let uid = server.id().to_string();
        let captured: Lines = Default::default();
        let mut children: Vec<Option<Child>> = Vec::with_capacity(self.n_pes);
        let mut pumps = Vec::new();
        for pe in 0..self.n_pes {
            let mut cmd = Command::new(&self.program);
            cmd.args(&self.args)
                .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .env("XPUSHMEM_BOOTSTRAP", "uid")
                .env("XPUSHMEM_BOOTSTRAP_UID", &uid)
                .env("XPUSHMEM_BOOTSTRAP_RANK", pe.to_string())
                .env("XPUSHMEM_BOOTSTRAP_NRANKS", self.n_pes.to_string())
                .env("XPUSHMEM_LAUNCHER_PID", std::process::id().to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
            let mut child = match cmd.spawn() {
                Ok(c) => c,
                Err(e) => {
                    for c in children.iter_mut().flatten() {
                        signal_group(c, rustix::process::Signal::KILL);
                        let _ = c.wait();
                    }
                    return Err(Error::os(
                        "spawn",
                        format!("{}: {e}", self.program.display()),
                    ));
                }
            };
            let cap = self.capture.then(|| captured.clone());
            if let Some(o) = child.stdout.take() {
                pumps.push(pump(pe, false, o, self.prefix_output, cap.clone()));
            }
            if let Some(e) = child.stderr.take() {
                pumps.push(pump(pe, true, e, self.prefix_output, cap));
            }
            children.push(Some(child));
        }
        let mut exits: Vec<Option<PeExit>> = vec![None; self.n_pes];
        let mut first_failure = None;
        let mut timed_out = false;
        let mut kill_at: Option<Instant> = None;
        let grace = Duration::from_secs(2);
        while exits.iter().any(|e| e.is_none()) {
            for pe in 0..self.n_pes {
                let Some(c) = children[pe].as_mut() else {
                    continue;
                };
                if let Ok(Some(st)) = c.try_wait() {
                    let ex = if kill_at.is_some()
                        && first_failure.as_ref().is_some_and(|(p, _)| *p != pe)
                    {
                        match exit_of(st) {
                            PeExit::Code(0) => PeExit::Code(0),
                            PeExit::Signal(_) => PeExit::Killed,
                            other => other,
                        }
                    } else {
                        exit_of(st)
                    };
                    if ex != PeExit::Code(0) && first_failure.is_none() && !timed_out {
                        first_failure = Some((pe, ex.clone()));
                    }
                    exits[pe] = Some(ex);
                    children[pe] = None;
                }
            }
            let limit_hit = self.timeout.is_some_and(|t| start.elapsed() > t);
            if (first_failure.is_some() || limit_hit) && kill_at.is_none() {
                timed_out = limit_hit && first_failure.is_none();
                if timed_out {
                    eprintln!(
                        "xpushmem-run: time limit of {:?} reached; terminating {} PEs",
                        self.timeout.unwrap_or_default(),
                        children.iter().flatten().count()
                    );
                }
                for c in children.iter().flatten() {
                    signal_group(c, rustix::process::Signal::TERM);
                }
                kill_at = Some(Instant::now() + grace);
            }
            if kill_at.is_some_and(|k| Instant::now() > k) {
                for c in children.iter().flatten() {
                    signal_group(c, rustix::process::Signal::KILL);
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        for p in pumps {
            let _ = p.join();
        }
        drop(server);
        let output = std::mem::take(&mut *captured.lock().unwrap_or_else(|p| p.into_inner()));
        Ok(Outcome {
            exits: exits
                .into_iter()
                .map(|e| e.unwrap_or(PeExit::Killed))
                .collect(),
            first_failure,
            timed_out,
            elapsed: start.elapsed(),
            output,
        })
    }
}

/// Called by the runtime at start-up: when launched by `xpushmem-run`, die with it.
pub(crate) fn tie_to_launcher() {
    let Some(pid) = crate::config::env_value("XPUSHMEM_LAUNCHER_PID") else {
        return;
    };
    let parent = rustix::process::getppid().map(|p| p.as_raw_nonzero().get().to_string());
    if parent.as_deref() == Some(pid.trim()) {
        let _ =
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    }
}
