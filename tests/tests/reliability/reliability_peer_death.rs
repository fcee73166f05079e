//! The peer-death matrix: a PE (PE 0 or PE n-1) is killed (SIGKILL) or frozen (SIGSTOP) while the others are
//! inside a barrier, a signal wait, an int wait, a broadcast, an alltoall or a reduction, at 2 and 4 PEs.
//!
//! Every survivor must get an error, never a hang or a silent success: `PeerLost` naming the victim for SIGKILL,
//! well within the wait limit; `Timeout` at the limit for SIGSTOP (a frozen PE is alive, so it must never be
//! reported lost; a survivor may instead see another survivor leave after its own timeout). Afterwards no process
//! of the job is left and nothing new is in `/dev/shm`; the launcher names the victim as the PE that failed.
//!
//! Each case has two victims, the first and the last PE. By default a case runs one of them, chosen so that every
//! op, signal, PE count and transport meets both victims across the matrix (a covering set over the victim: see
//! [`victims`]); `XPUSHMEM_TEST_DEPTH=full` runs both in every case.
//!
//! The job runs with `stop_on_failure` off, so that the launcher lets the survivors finish their checks. The
//! victim publishes its pid in the symmetric heap; for SIGSTOP the lowest surviving PE (the reaper) freezes it
//! right after the last common barrier, and kills it once every survivor has checked its error.

use std::time::{Duration, Instant};
use xpushmem::{Cmp, Error, Shmem};
use xpushmem_launch::PeExit;
use xpushmem_tests::{is_pe_of, test_name, Transport};

/// Wait limit of the SIGSTOP cases (the survivors must time out at it).
const STOP_LIMIT_MS: u64 = 1000;
/// Wait limit of the SIGKILL cases (the survivors must see the loss well within it).
const KILL_LIMIT_MS: u64 = 30000;

#[derive(Clone, Copy, Debug)]
enum Op {
    Barrier,
    SignalWait,
    IntWait,
    Broadcast,
    Alltoall,
    Reduce,
}

fn op_of(s: &str) -> Op {
    match s {
        "barrier" => Op::Barrier,
        "signal_wait" => Op::SignalWait,
        "int_wait" => Op::IntWait,
        "broadcast" => Op::Broadcast,
        "alltoall" => Op::Alltoall,
        "reduce" => Op::Reduce,
        other => panic!("unknown op {other}"),
    }
}

/// The victims a case runs: both ends at `XPUSHMEM_TEST_DEPTH=full`; otherwise one, PE 0 or PE n-1 by the parity
/// of the case's coordinates (op, signal, PE count, transport), so that flipping any one coordinate flips the victim:
/// every value of every coordinate meets both victims somewhere in the matrix.
fn victims(op: &str, n: usize, signal: &str, transport: Transport) -> Vec<usize> {
    if xpushmem_tests::cover::depth() == xpushmem_tests::cover::Depth::Full {
        return vec![0, n - 1];
    }
    let parity = op_of(op) as usize
        + usize::from(signal == "STOP")
        + n.trailing_zeros() as usize
        + usize::from(!matches!(transport, Transport::Shm));
    vec![if parity % 2 == 0 { 0 } else { n - 1 }]
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is set for the PEs"))
}

/// Wait until `*r >= v`, through up to 20 wait limits (the short SIGSTOP limit is for the survivors' checks,
/// not for this bookkeeping).
fn wait_patiently(sh: &Shmem, r: xpushmem::SymRef<u64>, v: u64) -> xpushmem::Result<()> {
    let mut tries = 0;
    while let Err(e) = sh.wait_until(r, Cmp::Ge, v) {
        tries += 1;
        if tries > 20 || !matches!(e, Error::Timeout { .. }) {
            return Err(e);
        }
    }
    Ok(())
}

/// One PE of a case: returns the verdict line (or an error to print).
fn pe_case(sh: &Shmem) -> xpushmem::Result<String> {
    let op = op_of(&env("RELIAB_OP"));
    let victim: usize = env("RELIAB_VICTIM").parse().expect("victim");
    let stop = env("RELIAB_SIGNAL") == "STOP";
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let world = sh.team_world();
    let nel = 4;
    let src = sh.calloc::<i64>(n * nel)?;
    let dst = sh.calloc::<i64>(n * nel)?;
    let flag = sh.calloc::<u64>(1)?.at(0)?;
    let victim_pid = sh.calloc::<u64>(1)?.at(0)?;
    let checked = sh.calloc::<u64>(1)?.at(0)?;
    let reaper = if victim == 0 { 1 } else { 0 };
    if me == victim {
        for pe in 0..n {
            sh.p(victim_pid, std::process::id() as u64, pe)?;
        }
    }
    let out_of_barrier = sh.calloc::<u64>(1)?.at(0)?;
    sh.put(src, &vec![me as i64 + 1; n * nel], me)?;
    sh.barrier_all()?;
    // Every PE, the victim included, is out of the barrier before the victim is frozen.
    sh.atomic_add(out_of_barrier, 1, reaper)?;
    if me != victim {
        sh.atomic_add(out_of_barrier, 1, victim)?;
    }
    if me == victim {
        // The victim leaves only once every survivor is out of the barrier: a survivor still finishing it may need
        // the victim's memory, which over a network lives only as long as the victim's process and is served only
        // while it is inside xpushmem (a dead PE's shared-memory mapping outlives it).
        wait_patiently(sh, out_of_barrier, (n - 1) as u64)?;
        if stop {
            // Frozen by the reaper from outside (a process that stops itself may be continued at once by the
            // session's job control); it never takes part again and is killed by the reaper at the end.
            loop {
                std::thread::sleep(Duration::from_secs(600));
            }
        }
        // Let the others enter the operation, then die inside it.
        std::thread::sleep(Duration::from_millis(200));
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
        unreachable!("SIGKILL returned");
    }
    let victim_proc = rustix::process::Pid::from_raw(sh.g(victim_pid, me)? as i32)
        .ok_or_else(|| Error::State("the victim's pid is 0".into()))?;
    let mut _reap = None;
    if stop && me == reaper {
        wait_patiently(sh, out_of_barrier, n as u64)?;
        _reap = Some(KillOnDrop(victim_proc));
        rustix::process::kill_process(victim_proc, rustix::process::Signal::STOP)
            .map_err(|e| Error::State(format!("SIGSTOP of the victim: {e}")))?;
        let frozen = Instant::now();
        while state_of(victim_proc) != Some('T') {
            if frozen.elapsed() > Duration::from_secs(10) {
                return Err(Error::State(format!(
                    "the victim is not stopped: {:?}",
                    state_of(victim_proc)
                )));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let start = Instant::now();
    let r = match op {
        Op::Barrier => sh.barrier_all(),
        Op::SignalWait => sh.signal_wait_until(flag, Cmp::Ge, 1).map(|_| ()),
        Op::IntWait => sh.wait_until(flag, Cmp::Eq, 1),
        Op::Broadcast => sh.broadcast(&world, dst, src, nel, victim),
        Op::Alltoall => sh.alltoall(&world, dst, src, nel),
        Op::Reduce => sh.sum_reduce(&world, dst, src, nel),
    };
    let took = start.elapsed();
    let verdict = match (&r, stop) {
        (Err(Error::PeerLost { pe, .. }), false) if *pe == victim => {
            if took < Duration::from_millis(KILL_LIMIT_MS / 2) {
                Ok("PeerLost")
            } else {
                Err(format!("PeerLost only after {took:?}"))
            }
        }
        (Err(Error::Timeout { waited, limit, .. }), true) => {
            if waited >= limit && took < Duration::from_secs(30) {
                Ok("Timeout")
            } else {
                Err(format!(
                    "Timeout after {waited:?} of {limit:?}, call took {took:?}"
                ))
            }
        }
        // A survivor that timed out and left may be seen lost by a slower survivor; the frozen PE never is.
        (Err(Error::PeerLost { pe, .. }), true) if *pe != victim => Ok("PeerLost (of a survivor)"),
        (other, _) => Err(format!("{other:?}")),
    };
    let line = match verdict {
        Ok(kind) => format!("verdict PE {me}: {kind} after {} ms OK", took.as_millis()),
        Err(e) => format!("verdict PE {me}: BAD {e}"),
    };
    println!("{line}");
    if stop {
        // Every survivor has checked its error: the reaper ends the frozen victim.
        if me == reaper {
            let others = (n - 2) as u64;
            // The others time out at about the same moment; a slow one gets a few more limits.
            wait_patiently(sh, checked, others)?;
        } else {
            sh.atomic_add(checked, 1, reaper)?;
        }
    }
    Ok(line)
}

/// Kills the frozen victim when the reaper is done, whichever way its checks ended.
struct KillOnDrop(rustix::process::Pid);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = rustix::process::kill_process(self.0, rustix::process::Signal::KILL);
    }
}

/// The state letter of a process (`T` when stopped), from `/proc/PID/stat`.
fn state_of(pid: rustix::process::Pid) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.as_raw_nonzero())).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

fn dev_shm() -> std::collections::BTreeSet<String> {
    std::fs::read_dir("/dev/shm")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

fn run_case(name: &str, op: &str, n: usize, signal: &str, transport: Transport) {
    let name = name.to_string();
    if is_pe_of(&name) {
        let sh = match xpushmem::init() {
            Ok(sh) => sh,
            Err(e) => {
                eprintln!("init failed: {e}");
                std::process::exit(1);
            }
        };
        let r = pe_case(&sh);
        // Finalize skips its barrier after a failed wait; a finalized PE is not reported lost to the others.
        let _ = sh.finalize();
        match r {
            Ok(line) if !line.contains("BAD") => std::process::exit(0),
            Ok(_) => std::process::exit(1),
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(1);
            }
        }
    }
    let limit = if signal == "STOP" {
        STOP_LIMIT_MS
    } else {
        KILL_LIMIT_MS
    };
    for victim in victims(op, n, signal, transport) {
        let shm_before = dev_shm();
        let (limit_ms, victim_s) = (limit.to_string(), victim.to_string());
        let transport_env = transport.env();
        let mut env: Vec<(&str, &str)> = transport_env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        env.extend_from_slice(&[
            ("XPUSHMEM_TIMEOUT_MS", &limit_ms),
            ("XPUSHMEM_SYMMETRIC_SIZE", "16M"),
            ("RELIAB_OP", op),
            ("RELIAB_VICTIM", &victim_s),
            ("RELIAB_SIGNAL", signal),
        ]);
        let mut job = xpushmem_tests::pe_job(&name, n, &env);
        job.timeout = Some(Duration::from_secs(60));
        job.stop_on_failure = false;
        let out = job.run().expect("launch");
        let all = xpushmem_tests::outputs(&out);
        let case = format!("{op} with PE {victim} of {n} {signal}ped");
        assert!(!out.timed_out, "{case}: the job hung\n{all}");
        assert_eq!(
            out.first_failure,
            Some((victim, PeExit::Signal(9))),
            "{case}: the launcher names the victim\n{all}"
        );
        for pe in (0..n).filter(|&pe| pe != victim) {
            assert_eq!(
                out.exits[pe],
                PeExit::Code(0),
                "{case}: survivor PE {pe}\n{all}"
            );
            let text = out.output_of(pe);
            assert!(
                text.contains(&format!("verdict PE {pe}: ")) && text.contains(" OK"),
                "{case}: survivor PE {pe} did not check its error\n{all}"
            );
        }
        let left = xpushmem_tests::processes_of(&name);
        assert!(
            left.is_empty(),
            "{case}: processes of the job left: {left:?}"
        );
        let new: Vec<String> = dev_shm().difference(&shm_before).cloned().collect();
        assert!(new.is_empty(), "{case}: new in /dev/shm: {new:?}");
    }
}

/// One module per case, one test per PE count and transport: `barrier_killed::shm_2pe` (shared memory) and
/// `barrier_killed::fab_2pe` (every peer over the fabric).
macro_rules! matrix {
    ($($case:ident: $op:literal, $sig:literal, [$($n:literal),+];)*) => {$(
        mod $case {
            use super::*;
            xpushmem_tests::paste::paste! {$(
                #[test]
                fn [<shm_ $n pe>]() {
                    let name = test_name(module_path!(), stringify!([<shm_ $n pe>]));
                    run_case(&name, $op, $n, $sig, Transport::Shm);
                }
                #[test]
                fn [<fab_ $n pe>]() {
                    let name = test_name(module_path!(), stringify!([<fab_ $n pe>]));
                    run_case(&name, $op, $n, $sig, Transport::Fabric);
                }
            )+}
        }
    )*};
}

matrix! {
    barrier_killed: "barrier", "KILL", [2, 4, 8];
    barrier_stopped: "barrier", "STOP", [2, 4];
    signal_wait_killed: "signal_wait", "KILL", [2, 4];
    signal_wait_stopped: "signal_wait", "STOP", [2, 4];
    int_wait_killed: "int_wait", "KILL", [2, 4];
    int_wait_stopped: "int_wait", "STOP", [2, 4];
    broadcast_killed: "broadcast", "KILL", [2, 4];
    broadcast_stopped: "broadcast", "STOP", [2, 4];
    alltoall_killed: "alltoall", "KILL", [2, 4];
    alltoall_stopped: "alltoall", "STOP", [2, 4];
    reduce_killed: "reduce", "KILL", [2, 4];
    reduce_stopped: "reduce", "STOP", [2, 4];
}
