//! The state every benchmark works in: symmetric buffers, local buffers, counters that every PE advances in the
//! same way, data patterns and the validation helpers.

use crate::error::{PerfError, Result};
use crate::opts::Opts;
use crate::stats::WINDOW_CAP_BYTES;
use std::time::Instant;
use xpushmem::{Shmem, SymRef, SymSlice};

/// A zeroed local byte buffer whose usable part starts on a page boundary, like the buffers of the OSU
/// benchmarks (and of the C peers, which use `aligned_alloc(4096, ...)`), so that no implementation is measured
/// with a misaligned source or destination.
#[derive(Debug, Clone)]
pub struct PageBuf {
    v: Vec<u8>,
    off: usize,
    len: usize,
}

impl PageBuf {
    /// `len` zero bytes, page aligned.
    pub fn new(len: usize) -> PageBuf {
        let v = vec![0u8; len + 4096];
        let off = v.as_ptr().align_offset(4096).min(4096);
        PageBuf { v, off, len }
    }
}

impl std::ops::Deref for PageBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.v[self.off..self.off + self.len]
    }
}

impl std::ops::DerefMut for PageBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.v[self.off..self.off + self.len]
    }
}

/// Index in [`Ctx::words`] of the ping-pong signal word.
pub const W_SIGNAL: usize = 0;
/// Index of the fetch-add counter.
pub const W_FADD: usize = 1;
/// Index of the compare-swap word.
pub const W_CSWAP: usize = 2;
/// Index of the `p`/`g` word.
pub const W_PG: usize = 3;
/// Index of the first of `n_pes` barrier-check slots.
pub const W_BARRIER: usize = 8;

/// The running benchmark's shared state.
#[derive(Debug)]
pub struct Ctx<'a> {
    /// The runtime.
    pub sh: &'a Shmem,
    /// The options of the run.
    pub opts: &'a Opts,
    /// This PE.
    pub me: usize,
    /// Number of PEs.
    pub n: usize,
    /// Symmetric buffer A: the target of RMA, the destination of collectives (`end * n_pes` bytes).
    pub a: SymSlice<u8>,
    /// Symmetric buffer B: the source of collectives (`end * n_pes` bytes).
    pub b: SymSlice<u8>,
    /// Symmetric 64-bit words: signals, counters, barrier-check slots (see the `W_*` indices).
    pub words: SymSlice<u64>,
    times: SymSlice<f64>,
    /// Local source buffer (page aligned).
    pub src: PageBuf,
    /// Local destination buffer (page aligned).
    pub dst: PageBuf,
    /// Local buffer for expected contents.
    pub expect: PageBuf,
    /// Salt of the next data pattern (advanced identically on every PE).
    pub salt: u64,
    /// Last signal value used by the ping-pong (advanced identically on every PE).
    pub seq: u64,
    /// Value of the fetch-add counter every PE expects.
    pub fadd: u64,
    /// Value of the compare-swap word every PE expects.
    pub cswap: u64,
    /// The `xpushmem-ops` group of all PEs (created by the first op benchmark).
    pub group: Option<xpushmem_ops::Group>,
    splits: Option<(SymSlice<i64>, SymSlice<i64>)>,
    /// The EP benchmarks' buffers (`ep::EpState`, created by the first EP step; held as `Any` so that this lower
    /// module does not name a suite).
    pub ep: Option<Box<dyn std::any::Any>>,
    /// Name of the running benchmark (for messages).
    pub bench: &'static str,
    /// Message size of the running step (for messages).
    pub size: usize,
}

/// The pattern word `i` of a buffer filled with `salt`.
#[inline]
pub fn pattern_word(i: usize, salt: u64) -> u64 {
    (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt.rotate_left(29) ^ 0x5A5A_5A5A
}

/// Fill `buf` with the pattern of `salt` (little-endian pattern words; a short tail gets the low bytes).
pub fn fill(buf: &mut [u8], salt: u64) {
    for (i, ch) in buf.chunks_mut(8).enumerate() {
        let w = pattern_word(i, salt).to_le_bytes();
        ch.copy_from_slice(&w[..ch.len()]);
    }
}

/// Write `seq` into the first 8 bytes of `buf` and, when it has 16 or more, into its last 8 bytes (shorter
/// buffers get the low bytes): the cheap per-message check of the ping-pongs.
pub fn stamp(buf: &mut [u8], seq: u64) {
    let b = seq.to_le_bytes();
    let k = buf.len().min(8);
    buf[..k].copy_from_slice(&b[..k]);
    if buf.len() >= 16 {
        let l = buf.len();
        buf[l - 8..].copy_from_slice(&b);
    }
}

/// Whether `buf` carries the stamp of `seq`.
pub fn stamped(buf: &[u8], seq: u64) -> bool {
    let b = seq.to_le_bytes();
    let k = buf.len().min(8);
    buf[..k] == b[..k] && (buf.len() < 16 || buf[buf.len() - 8..] == b)
}

/// Seconds per operation since `t0`.
pub fn secs_per(t0: Instant, ops: usize) -> f64 {
    t0.elapsed().as_secs_f64() / ops.max(1) as f64
}

/// Compares data with what it should be, and reports mismatches as [`PerfError::Validation`]. With the
/// `--inject-fault` test hook it corrupts the data first, so a run proves that its checks bite.
#[derive(Debug, Clone, Copy)]
pub struct Checker {
    bench: &'static str,
    size: usize,
    fault: bool,
}

impl Checker {
    /// The error for `detail`.
    pub fn fail(&self, detail: String) -> PerfError {
        PerfError::Validation {
            bench: self.bench.to_string(),
            size: self.size,
            detail,
        }
    }

    /// `got` must equal `want` byte for byte.
    pub fn bytes(&self, what: &str, got: &mut [u8], want: &[u8]) -> Result<()> {
        if self.fault && !got.is_empty() {
            let m = got.len() / 2;
            got[m] ^= 0x40;
        }
        if got.len() != want.len() {
            return Err(self.fail(format!(
                "{what}: {} bytes, expected {}",
                got.len(),
                want.len()
            )));
        }
        // Compared as slices first (one `memcmp`): a byte loop over a window of 64 MiB runs for tens of
        // milliseconds between timed repetitions, and after such a pause of little memory traffic this VM's copies
        // start slow again (get bandwidth at 1-4 MiB measured 9-11 GB/s against 13-19 for `memcpy_probe`, which
        // checks with `memcmp`).
        if got == want {
            return Ok(());
        }
        if let Some(i) = got.iter().zip(want).position(|(g, w)| g != w) {
            let bad = got.iter().zip(want).filter(|(g, w)| g != w).count();
            return Err(self.fail(format!(
                "{what}: byte {i} is {:#04x}, expected {:#04x} ({bad} of {} bytes wrong)",
                got[i],
                want[i],
                got.len()
            )));
        }
        Ok(())
    }

    /// `got` must equal `want`.
    pub fn value(&self, what: &str, got: u64, want: u64) -> Result<()> {
        let got = if self.fault { got ^ 1 } else { got };
        if got != want {
            return Err(self.fail(format!("{what}: got {got}, expected {want}")));
        }
        Ok(())
    }

    /// `buf` must carry the stamp of `seq`.
    pub fn stamp(&self, what: &str, buf: &mut [u8], seq: u64) -> Result<()> {
        if self.fault {
            buf[0] ^= 0x40;
        }
        if !stamped(buf, seq) {
            let mut first = [0u8; 8];
            let k = buf.len().min(8);
            first[..k].copy_from_slice(&buf[..k]);
            return Err(self.fail(format!(
                "{what}: message {seq} arrived with the signal, but its payload starts with {} (stale or torn data)",
                u64::from_le_bytes(first)
            )));
        }
        Ok(())
    }
}

impl<'a> Ctx<'a> {
    /// Allocate the buffers for a run with `opts` whose sweeps end at `end` bytes (collective).
    pub fn new(sh: &'a Shmem, opts: &'a Opts, end: usize) -> Result<Ctx<'a>> {
        let n = sh.n_pes();
        let me = sh.my_pe();
        let big = end.saturating_mul(n.max(2));
        let a = sh.align::<u8>(4096, big)?;
        let b = sh.align::<u8>(4096, big)?;
        let words = sh.calloc::<u64>(W_BARRIER + n)?;
        let times = sh.calloc::<f64>(n * opts.reps)?;
        let local = big.max(WINDOW_CAP_BYTES.min(end.saturating_mul(opts.window)));
        Ok(Ctx {
            sh,
            opts,
            me,
            n,
            a,
            b,
            words,
            times,
            src: PageBuf::new(local),
            dst: PageBuf::new(local),
            expect: PageBuf::new(local),
            salt: 0x1234,
            seq: 0,
            fadd: 0,
            cswap: 0,
            group: None,
            splits: None,
            ep: None,
            bench: "",
            size: 0,
        })
    }

    /// A fresh pattern salt (the same on every PE, as every PE calls this equally often).
    pub fn next_salt(&mut self) -> u64 {
        self.salt = self.salt.wrapping_add(1);
        self.salt
    }

    /// The checker of the running step.
    pub fn checker(&self) -> Checker {
        Checker {
            bench: self.bench,
            size: self.size,
            fault: self.opts.inject_fault,
        }
    }

    /// Symmetric split tensors for the ops benchmarks: `[len]` input splits and `[2, len]` output splits and
    /// offsets (allocated collectively on first use, grown when a larger one is needed).
    pub fn splits(&mut self, len: usize) -> Result<(SymSlice<i64>, SymSlice<i64>)> {
        if let Some(s) = self.splits.filter(|s| s.0.len() >= len) {
            return Ok((s.0.slice(..len)?, s.1.slice(..2 * len)?));
        }
        let s = (self.sh.calloc::<i64>(len)?, self.sh.calloc::<i64>(2 * len)?);
        self.splits = Some(s);
        Ok(s)
    }

    /// Symmetric word `i`.
    pub fn word(&self, i: usize) -> Result<SymRef<u64>> {
        Ok(self.words.at(i)?)
    }

    /// Check this PE's copy of `s` holds the pattern of `salt`, stamped with `seq` when given.
    pub fn check_own(
        &mut self,
        what: &str,
        s: SymSlice<u8>,
        salt: u64,
        seq: Option<u64>,
    ) -> Result<()> {
        let len = s.len();
        self.sh.get(&mut self.dst[..len], s, self.me)?;
        fill(&mut self.expect[..len], salt);
        if let Some(q) = seq {
            stamp(&mut self.expect[..len], q);
        }
        let chk = self.checker();
        chk.bytes(what, &mut self.dst[..len], &self.expect[..len])
    }

    /// Publish this PE's per-repeat times; on PE 0, the per-repeat times of PE 0 (`max_over_pes` false) or the
    /// maxima over all PEs. Collective.
    pub fn gather(&mut self, mine: &[f64], max_over_pes: bool) -> Result<Vec<f64>> {
        let r = mine.len();
        self.sh
            .put(self.times.slice(self.me * r..(self.me + 1) * r)?, mine, 0)?;
        self.sh.barrier_all()?;
        let mut out = mine.to_vec();
        if self.me == 0 && max_over_pes {
            let mut all = vec![0.0; self.n * r];
            self.sh.get(&mut all, self.times.slice(..self.n * r)?, 0)?;
            for (k, o) in out.iter_mut().enumerate() {
                *o = (0..self.n).map(|pe| all[pe * r + k]).fold(0.0, f64::max);
            }
        }
        self.sh.barrier_all()?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_buffers() {
        let mut b = PageBuf::new(10000);
        assert_eq!(b.len(), 10000);
        assert_eq!(b.as_ptr() as usize % 4096, 0);
        b[9999] = 1;
        assert!(b[..9999].iter().all(|&x| x == 0));
    }

    #[test]
    fn patterns_and_stamps() {
        let mut a = vec![0u8; 37];
        let mut b = vec![0u8; 37];
        fill(&mut a, 7);
        fill(&mut b, 8);
        assert_ne!(a, b);
        stamp(&mut a, 99);
        assert!(stamped(&a, 99));
        assert!(!stamped(&a, 98));
        let mut s = vec![0u8; 3];
        stamp(&mut s, 0x010203);
        assert_eq!(s, [3, 2, 1]);
        assert!(stamped(&s, 0x010203));
    }

    #[test]
    fn checker_reports_and_injects() {
        let c = Checker {
            bench: "t",
            size: 4,
            fault: false,
        };
        let mut g = vec![1, 2, 3, 4];
        assert!(c.bytes("x", &mut g, &[1, 2, 3, 4]).is_ok());
        let e = c.bytes("x", &mut g, &[1, 2, 9, 4]).unwrap_err().to_string();
        assert!(e.contains("byte 2"), "{e}");
        let f = Checker { fault: true, ..c };
        assert!(f.bytes("x", &mut g, &[1, 2, 3, 4]).is_err());
        assert!(f.value("v", 5, 5).is_err());
        assert!(c.value("v", 5, 5).is_ok());
    }
}
