//! `xpushmem-run -n N [--timeout S] [--no-prefix] PROG [ARGS...]`: run N PEs of PROG on this machine.
//!
//! Exits with 0 when every PE does; otherwise with the status of the PE that failed first (the root cause: its
//! `global_exit` status, its exit code, or 128+signal), and says which PE and why. Exits with 124 when the time
//! limit ends the job, and with 128+signal when SIGINT, SIGTERM or SIGHUP stops it (every PE is stopped first,
//! before or after their init). When one PE fails the others are terminated. Every PE is tied to the launcher
//! from its first instruction (it starts as `xpushmem-run --xpushmem-pe-exec PROG`, asks for the parent-death
//! signal, then execs PROG), so that no PE outlives a launcher killed even with SIGKILL.
//!
//! The whole job ends with the launcher, including every process a PE started, in the background or after
//! `setsid`: the launcher is their child subreaper and kills what is left once the PEs have ended, and a watchdog
//! (`xpushmem-run --xpushmem-watchdog`) ends the job if the launcher itself is killed (see `xpushmem::launch`).
//! SIGQUIT, SIGUSR1, SIGUSR2 and SIGALRM stop the job as SIGINT, SIGTERM and SIGHUP do. Usage errors (a time limit
//! that is not a positive finite number of seconds up to `MAX_TIMEOUT_S`, more PEs than the machine can run)
//! exit with 2.

use std::time::Duration;

/// The longest `--timeout`, in seconds (136 years: far beyond any job, far below where time arithmetic overflows).
const MAX_TIMEOUT_S: f64 = u32::MAX as f64;

const USAGE: &str = "usage: xpushmem-run -n N [--timeout SECONDS] [--no-prefix] PROGRAM [ARGS...]";

fn parse(args: &[String]) -> Result<xpushmem_launch::Job, String> {
    let mut n = None;
    let mut timeout = None;
    let mut prefix = true;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let value = |i: usize| {
            args.get(i + 1)
                .cloned()
                .ok_or_else(|| format!("{a} needs a value\n{USAGE}"))
        };
        match a {
            "-n" | "-np" | "--npes" => {
                let v = value(i)?;
                let (most, bound) = xpushmem_launch::max_pes();
                let k = v
                    .parse::<u128>()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("-n {v}: expected a positive integer"))?;
                n = Some(
                    usize::try_from(k)
                        .ok()
                        .filter(|&k| k <= most)
                        .ok_or_else(|| {
                            format!(
                                "-n {v}: more PEs than this machine can run (at most {most}: {bound})"
                            )
                        })?,
                );
                i += 2;
            }
            "--timeout" | "-t" => {
                let v = value(i)?;
                let s: f64 = v
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s > 0.0 && *s <= MAX_TIMEOUT_S)
                    .ok_or_else(|| {
                        format!("--timeout {v}: expected positive seconds, at most {MAX_TIMEOUT_S}")
                    })?;
                timeout = Some(
                    Duration::try_from_secs_f64(s).map_err(|e| format!("--timeout {v}: {e}"))?,
                );
                i += 2;
            }
            "--no-prefix" => {
                prefix = false;
                i += 1;
            }
            "-h" | "--help" => return Err(USAGE.to_string()),
            _ if a.starts_with('-') => return Err(format!("unknown option {a}\n{USAGE}")),
            _ => break,
        }
    }
    let n = n.ok_or_else(|| format!("missing -n N\n{USAGE}"))?;
    let program = args
        .get(i)
        .ok_or_else(|| format!("missing PROGRAM\n{USAGE}"))?;
    let mut job = xpushmem_launch::Job::new(n, program);
    job.args = args[i + 1..].to_vec();
    job.timeout = timeout;
    job.prefix_output = prefix;
    job.stop_on_signals = true;
    job.pe_exec = std::env::current_exe().ok();
    job.contain = true;
    Ok(job)
}

fn main() {
    // The start of one PE (see `Job::pe_exec`): tie it to this launcher, then become the PE's program.
    let raw: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if raw
        .first()
        .is_some_and(|a| a == xpushmem_launch::WATCHDOG_FLAG)
    {
        std::process::exit(xpushmem_launch::watchdog());
    }
    if raw
        .first()
        .is_some_and(|a| a == xpushmem_launch::PE_EXEC_FLAG)
    {
        let program = raw.get(1).cloned().unwrap_or_default();
        let e = xpushmem_launch::exec_pe(&program, &raw[2.min(raw.len())..]);
        eprintln!("xpushmem-run: cannot start the PE: {e}");
        std::process::exit(127);
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let job = match parse(&args) {
        Ok(j) => j,
        Err(m) => {
            eprintln!("xpushmem-run: {m}");
            std::process::exit(2);
        }
    };
    match job.run() {
        Ok(out) => {
            if let Some(why) = out.describe() {
                eprintln!("xpushmem-run: {why}; exit status {}", out.exit_code());
            }
            std::process::exit(out.exit_code());
        }
        Err(e) => {
            eprintln!("xpushmem-run: {e}");
            std::process::exit(1);
        }
    }
}
