//! The PE's side of `xpushmem-run` (the supervisor is `crate::launch`): what the launcher tells a PE through its
//! environment, the report pipe on which a PE names its `global_exit` status and the first peer it lost, and the
//! tie that makes a PE die with its launcher. Bootstrap layer: imports only leaves (`config`, `error`).

use crate::error::{Error, Result};
use rustix::process::Signal;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Environment variable through which the launcher tells a PE where to report `global_exit` and lost peers.
pub const REPORT_VAR: &str = "XPUSHMEM_LAUNCHER_REPORT";
/// Environment variable naming the launcher's pid.
pub const PID_VAR: &str = "XPUSHMEM_LAUNCHER_PID";

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

/// Called by the runtime at start-up: when launched by `xpushmem-run`, die with it; when that launcher is already
/// gone, fail at once (its rendezvous is gone with it).
pub fn tie_to_launcher() -> Result<()> {
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
