//! Remote memory access: put/get latency (blocking, and non-blocking + quiet), put/get bandwidth (windows of
//! non-blocking operations, then quiet), `p`/`g` latency. PE 0 is the initiator, PE 1 the target; other PEs wait.
//!
//! Like OSU's `osu_oshm_put`/`_get` and `osu_oshm_put_bw`, one target buffer is reused by every operation.

use crate::bench::{bytes_size, Bench, Sizes, Step, Timing};
use crate::ctx::{fill, secs_per, Ctx, W_PG};
use crate::error::Result;
use std::time::Instant;

/// The RMA benchmarks.
pub const BENCHES: &[Bench] = &[
    rma(
        "put_lat",
        "put (blocking) + quiet, PE 0 -> PE 1",
        false,
        put_lat,
    ),
    rma(
        "put_nbi_lat",
        "put_nbi + quiet, PE 0 -> PE 1",
        false,
        put_nbi_lat,
    ),
    rma("get_lat", "get (blocking), PE 0 <- PE 1", false, get_lat),
    rma(
        "get_nbi_lat",
        "get_nbi + quiet, PE 0 <- PE 1",
        false,
        get_nbi_lat,
    ),
    rma(
        "put_bw",
        "window of put_nbi then quiet, one reused target, PE 0 -> PE 1",
        true,
        put_bw,
    ),
    rma(
        "put_reg_bw",
        "window of put_nbi from a registered private buffer (Shmem::register) then quiet, one reused target, PE 0 -> PE 1",
        true,
        put_reg_bw,
    ),
    rma(
        "put_sym_bw",
        "window of put_sym_nbi from PE 0's symmetric heap then quiet, one reused target, PE 0 -> PE 1",
        true,
        put_sym_bw,
    ),
    rma(
        "get_bw",
        "window of get_nbi then quiet, PE 0 <- PE 1",
        true,
        get_bw,
    ),
    Bench {
        sizes: Sizes::Fixed(8),
        ..rma("p_lat", "p of one u64 + quiet, PE 0 -> PE 1", false, p_lat)
    },
    Bench {
        sizes: Sizes::Fixed(8),
        ..rma("g_lat", "g of one u64, PE 0 <- PE 1", false, g_lat)
    },
];

const fn rma(
    name: &'static str,
    about: &'static str,
    windowed: bool,
    run: crate::bench::RunFn,
) -> Bench {
    Bench {
        name,
        group: "rma",
        about,
        sizes: Sizes::Sweep,
        windowed,
        timing: Timing::Pe0,
        min_pes: 2,
        bytes: bytes_size,
        run,
    }
}

fn put_lat(c: &mut Ctx<'_>, s: &Step) -> Result<f64> {
    put_common(c, s, false)
}

fn put_nbi_lat(c: &mut Ctx<'_>, s: &Step) -> Result<f64> {
    put_common(c, s, true)
}

fn put_common(c: &mut Ctx<'_>, s: &Step, nbi: bool) -> Result<f64> {
    let salt = c.next_salt();
    let dst = c.a.slice(..s.size)?;
    let sh = c.sh;
    let mut t = 0.0;
    if c.me == 0 {
        fill(&mut c.src[..s.size], salt);
        let src = &c.src[..s.size];
        let t0 = Instant::now();
        if nbi {
            for _ in 0..s.iters {
                let h = sh.put_nbi(dst, src, 1)?;
                sh.quiet()?;
                drop(h);
            }
        } else {
            for _ in 0..s.iters {
                sh.put(dst, src, 1)?;
                sh.quiet()?;
            }
        }
        t = secs_per(t0, s.iters);
    }
    sh.barrier_all()?;
    if c.me == 1 {
        c.check_own("payload at the target", dst, salt, None)?;
    }
    Ok(t)
}

fn get_lat(c: &mut Ctx<'_>, s: &Step) -> Result<f64> {
    get_common(c, s, false)
}

fn get_nbi_lat(c: &mut Ctx<'_>, s: &Step) -> Result<f64> {
    get_common(c, s, true)
}

/// PE 1 fills its buffer with a fresh pattern; PE 0 reads it.
fn get_source(c: &mut Ctx<'_>, size: usize) -> Result<(xpushmem::SymSlice<u8>, u64)> {
    let salt = c.next_salt();
    let src = c.a.slice(..size)?;
    if c.me == 1 {
        fill(&mut c.src[..size], salt);
        c.sh.put(src, &c.src[..size], 1)?;
    }
    c.sh.barrier_all()?;
    fill(&mut c.expect[..size], salt);
    Ok((src, salt))
}

fn get_common(c: &mut Ctx<'_>, s: &Step, nbi: bool) -> Result<f64> {
    let (src, _) = get_source(c, s.size)?;
    let sh = c.sh;
    let mut t = 0.0;
    if c.me == 0 {
        let dst = &mut c.dst[..s.size];
        dst.fill(0);
        let t0 = Instant::now();
        if nbi {
            for _ in 0..s.iters {
                let h = sh.get_nbi(&mut *dst, src, 1)?;
                sh.quiet()?;
                drop(h);
            }
        } else {
            for _ in 0..s.iters {
                sh.get(&mut *dst, src, 1)?;
            }
        }
        t = secs_per(t0, s.iters);
        let chk = c.checker();
        chk.bytes("fetched payload", &mut c.dst[..s.size], &c.expect[..s.size])?;
    }
    sh.barrier_all()?;
    Ok(t)
}

fn put_bw(c: &mut Ctx<'_>, s: &Step) -> Result<f64> {
    put_bw_from(c, s, false)
}

/// `put_bw` from a registered private buffer: over the fabric the puts read it in place instead of copying it
/// into bounce buffers (registered before the clock starts, unregistered after it stops).
fn put_reg_bw(c: &mut Ctx<'_>, s: &Step) -> Result<f64> {
    put_bw_from(c, s, true)
}

fn put_bw_from(c: &mut Ctx<'_>, s: &Step, registered: bool) -> Result<f64> {
    let salt = c.next_salt();
    let dst = c.a.slice(..s.size)?;
    let sh = c.sh;
    let mut t = 0.0;
    if c.me == 0 {
        fill(&mut c.src[..s.size], salt);
        if registered {
            let reg = sh.register(c.src[..s.size].to_vec())?;
            let src = reg.as_slice()?;
            t = windows(sh, s, || sh.put_nbi(dst, src, 1))?;
            reg.unregister()?;
        } else {
            let src = &c.src[..s.size];
            t = windows(sh, s, || sh.put_nbi(dst, src, 1))?;
        }
    }
    sh.barrier_all()?;
    if c.me == 1 {
        c.check_own("payload at the target", dst, salt, None)?;
    }
    Ok(t)
}

/// Seconds per operation of `s.iters` operations started by `start` in windows of `s.window`, each window
/// completed by `quiet`.
fn windows<'p>(
    sh: &xpushmem::Shmem,
    s: &Step,
    start: impl Fn() -> xpushmem::Result<xpushmem::Pending<'p>>,
) -> Result<f64> {
    let t0 = Instant::now();
    for _ in 0..s.iters / s.window {
        let mut hs = Vec::with_capacity(s.window);
        for _ in 0..s.window {
            hs.push(start()?);
        }
        sh.quiet()?;
        drop(hs);
    }
    Ok(secs_per(t0, s.iters))
}

/// As [`put_bw`], the source in PE 0's symmetric heap (`put_sym_nbi`): registered memory over the fabric, which
/// the transport may read in place, as raw libfabric's writes read their registered buffer.
fn put_sym_bw(c: &mut Ctx<'_>, s: &Step) -> Result<f64> {
    let salt = c.next_salt();
    let (dst, src) = (c.a.slice(..s.size)?, c.b.slice(..s.size)?);
    let sh = c.sh;
    let mut t = 0.0;
    if c.me == 0 {
        fill(&mut c.src[..s.size], salt);
        sh.put(src, &c.src[..s.size], 0)?;
        t = windows(sh, s, || sh.put_sym_nbi(dst, src, 1))?;
    }
    sh.barrier_all()?;
    if c.me == 1 {
        c.check_own("payload at the target", dst, salt, None)?;
    }
    Ok(t)
}

fn get_bw(c: &mut Ctx<'_>, s: &Step) -> Result<f64> {
    let (src, _) = get_source(c, s.size)?;
    let sh = c.sh;
    let mut t = 0.0;
    if c.me == 0 {
        let span = s.size * s.window;
        c.dst[..span].fill(0);
        let t0 = Instant::now();
        for _ in 0..s.iters / s.window {
            let mut hs = Vec::with_capacity(s.window);
            for chunk in c.dst[..span].chunks_mut(s.size) {
                hs.push(sh.get_nbi(chunk, src, 1)?);
            }
            sh.quiet()?;
            drop(hs);
        }
        t = secs_per(t0, s.iters);
        let chk = c.checker();
        for (k, chunk) in c.dst[..span].chunks_mut(s.size).enumerate() {
            chk.bytes(
                &format!("fetched payload {k} of the window"),
                chunk,
                &c.expect[..s.size],
            )?;
        }
    }
    sh.barrier_all()?;
    Ok(t)
}

fn p_lat(c: &mut Ctx<'_>, s: &Step) -> Result<f64> {
    let salt = c.next_salt() << 32;
    let w = c.word(W_PG)?;
    let sh = c.sh;
    let mut t = 0.0;
    if c.me == 0 {
        let t0 = Instant::now();
        for i in 0..s.iters as u64 {
            sh.p(w, salt + i, 1)?;
            sh.quiet()?;
        }
        t = secs_per(t0, s.iters);
    }
    sh.barrier_all()?;
    if c.me == 1 {
        let got = sh.g(w, 1)?;
        c.checker()
            .value("last value stored by p", got, salt + s.iters as u64 - 1)?;
    }
    Ok(t)
}

fn g_lat(c: &mut Ctx<'_>, s: &Step) -> Result<f64> {
    let v = c.next_salt().wrapping_mul(0x1_0000_0001);
    let w = c.word(W_PG)?;
    let sh = c.sh;
    if c.me == 1 {
        sh.p(w, v, 1)?;
    }
    sh.barrier_all()?;
    let mut t = 0.0;
    if c.me == 0 {
        let mut bad = None;
        let t0 = Instant::now();
        for _ in 0..s.iters {
            let got = sh.g(w, 1)?;
            if got != v {
                bad = Some(got);
            }
        }
        t = secs_per(t0, s.iters);
        c.checker()
            .value("value loaded by g", bad.unwrap_or(v), v)?;
    }
    sh.barrier_all()?;
    Ok(t)
}
