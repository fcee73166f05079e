//! Signals, atomics and barriers: the `put_signal` ping-pong, `fetch_add` / `compare_swap` latency,
//! `barrier_all` and `sync_all` latency.

use crate::bench::{bytes_size, Bench, Sizes, Step, Timing};
use crate::ctx::{fill, secs_per, stamp, Ctx, W_BARRIER, W_CSWAP, W_FADD, W_SIGNAL};
use crate::error::Result;
use std::time::Instant;
use xpushmem::{Cmp, SignalOp};

/// The synchronisation benchmarks.
pub const BENCHES: &[Bench] = &[
    Bench {
        name: "put_signal_pp",
        group: "sync",
        about: "put_signal ping-pong PE 0 <-> PE 1 (payload, then signal SET; peer waits with signal_wait_until, checks, answers); one-way time",
        sizes: Sizes::Sweep,
        windowed: false,
        timing: Timing::Pe0,
        min_pes: 2,
        bytes: bytes_size,
        run: put_signal_pp,
    },
    Bench {
        name: "fetch_add_lat",
        group: "sync",
        about: "atomic_fetch_add of a u64 on PE 1, from PE 0",
        sizes: Sizes::Fixed(8),
        windowed: false,
        timing: Timing::Pe0,
        min_pes: 2,
        bytes: bytes_size,
        run: fetch_add_lat,
    },
    Bench {
        name: "cswap_lat",
        group: "sync",
        about: "atomic_compare_swap of a u64 on PE 1 (always succeeds), from PE 0",
        sizes: Sizes::Fixed(8),
        windowed: false,
        timing: Timing::Pe0,
        min_pes: 2,
        bytes: bytes_size,
        run: cswap_lat,
    },
    Bench {
        name: "barrier_all",
        group: "sync",
        about: "barrier_all, back to back, slowest PE",
        sizes: Sizes::Fixed(0),
        windowed: false,
        timing: Timing::MaxOverPes,
        min_pes: 1,
        bytes: bytes_size,
        run: barrier_all,
    },
    Bench {
        name: "sync_all",
        group: "sync",
        about: "sync_all (barrier without quiet), back to back, slowest PE",
        sizes: Sizes::Fixed(0),
        windowed: false,
        timing: Timing::MaxOverPes,
        min_pes: 1,
        bytes: bytes_size,
        run: sync_all,
    },
];

fn put_signal_pp(c: &mut Ctx<'_>, s: &Step) -> Result<f64> {
    let salt = c.next_salt();
    let base = c.seq;
    c.seq += s.iters as u64;
    let sh = c.sh;
    let dst = c.a.slice(..s.size)?;
    let head = c.a.slice(..s.size.min(8))?;
    let tail = c.a.slice(s.size.saturating_sub(8)..s.size)?;
    let sig = c.word(W_SIGNAL)?;
    let mut t = 0.0;
    if c.me < 2 {
        let (me, peer) = (c.me, 1 - c.me);
        fill(&mut c.src[..s.size], salt);
        let chk = c.checker();
        // The receiver checks the first and last 8 bytes of every message (both carry the sequence number).
        let mut probe = [0u8; 16];
        let mut check = |seq: u64| -> Result<()> {
            let k = s.size.min(8);
            sh.get(&mut probe[..k], head, me)?;
            if s.size >= 16 {
                sh.get(&mut probe[8..16], tail, me)?;
                return chk.stamp("received message", &mut probe, seq);
            }
            chk.stamp("received message", &mut probe[..k], seq)
        };
        let t0 = Instant::now();
        for i in 1..=s.iters as u64 {
            let seq = base + i;
            if me == 1 {
                sh.signal_wait_until(sig, Cmp::Ge, seq)?;
                check(seq)?;
            }
            stamp(&mut c.src[..s.size], seq);
            sh.put_signal(dst, &c.src[..s.size], sig, seq, SignalOp::Set, peer)?;
            if me == 0 {
                sh.signal_wait_until(sig, Cmp::Ge, seq)?;
                check(seq)?;
            }
        }
        t = secs_per(t0, s.iters) / 2.0;
    }
    sh.barrier_all()?;
    if c.me < 2 {
        c.check_own(
            "last message, whole payload",
            dst,
            salt,
            Some(base + s.iters as u64),
        )?;
    }
    Ok(t)
}

fn fetch_add_lat(c: &mut Ctx<'_>, s: &Step) -> Result<f64> {
    let w = c.word(W_FADD)?;
    let base = c.fadd;
    c.fadd += s.iters as u64;
    let sh = c.sh;
    let chk = c.checker();
    let mut t = 0.0;
    if c.me == 0 {
        let mut bad = None;
        let t0 = Instant::now();
        for i in 0..s.iters as u64 {
            let old = sh.atomic_fetch_add(w, 1u64, 1)?;
            if old != base + i && bad.is_none() {
                bad = Some((old, base + i));
            }
        }
        t = secs_per(t0, s.iters);
        let (got, want) = bad.unwrap_or((base, base));
        chk.value("value returned by fetch_add", got, want)?;
    }
    sh.barrier_all()?;
    if c.me == 1 {
        chk.value("counter after the fetch_adds", sh.g(w, 1)?, c.fadd)?;
    }
    Ok(t)
}

fn cswap_lat(c: &mut Ctx<'_>, s: &Step) -> Result<f64> {
    let w = c.word(W_CSWAP)?;
    let base = c.cswap;
    c.cswap += s.iters as u64;
    let sh = c.sh;
    let chk = c.checker();
    let mut t = 0.0;
    if c.me == 0 {
        let mut bad = None;
        let t0 = Instant::now();
        for i in 0..s.iters as u64 {
            let old = sh.atomic_compare_swap(w, base + i, base + i + 1, 1)?;
            if old != base + i && bad.is_none() {
                bad = Some((old, base + i));
            }
        }
        t = secs_per(t0, s.iters);
        let (got, want) = bad.unwrap_or((base, base));
        chk.value("value returned by compare_swap", got, want)?;
    }
    sh.barrier_all()?;
    if c.me == 1 {
        chk.value("word after the compare_swaps", sh.g(w, 1)?, c.cswap)?;
    }
    Ok(t)
}

/// Time `iters` calls of `barrier`, then prove it synchronises: in each of 3 rounds every PE stores a fresh value
/// into its slot on every PE, quiets, calls `barrier`, and must then see every PE's value in its own slots.
pub fn timed_barrier(
    c: &mut Ctx<'_>,
    s: &Step,
    barrier: &dyn Fn(&xpushmem::Shmem) -> xpushmem::Result<()>,
) -> Result<f64> {
    let sh = c.sh;
    let t0 = Instant::now();
    for _ in 0..s.iters {
        barrier(sh)?;
    }
    let t = secs_per(t0, s.iters);
    let chk = c.checker();
    for _ in 0..3 {
        let v = c.next_salt();
        for pe in 0..c.n {
            sh.p(c.word(W_BARRIER + c.me)?, v, pe)?;
        }
        sh.quiet()?;
        barrier(sh)?;
        for pe in 0..c.n {
            let got = sh.g(c.word(W_BARRIER + pe)?, c.me)?;
            chk.value(&format!("PE {pe}'s value after the barrier"), got, v)?;
        }
        barrier(sh)?;
    }
    Ok(t)
}

fn barrier_all(c: &mut Ctx<'_>, s: &Step) -> Result<f64> {
    timed_barrier(c, s, &|sh| sh.barrier_all())
}

fn sync_all(c: &mut Ctx<'_>, s: &Step) -> Result<f64> {
    timed_barrier(c, s, &|sh| sh.sync_all())
}
