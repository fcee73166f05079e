//! Size sweeps, iteration plans and order statistics, shared by every benchmark (and mirrored exactly by the C
//! peers in `benches/peers/common.h`, so that every implementation runs the same number of operations).

/// Bytes a window of non-blocking operations may span at most (the local buffer of the `get_bw` window).
pub const WINDOW_CAP_BYTES: usize = 64 << 20;

/// Parse a byte count with an optional `K`, `M`, `G` suffix (powers of 1024), e.g. `8`, `64K`, `64M`.
pub fn parse_size(text: &str) -> Option<usize> {
    let t = text.trim();
    let (num, mult) = match t.chars().last()? {
        'k' | 'K' => (&t[..t.len() - 1], 1usize << 10),
        'm' | 'M' => (&t[..t.len() - 1], 1 << 20),
        'g' | 'G' => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.trim().parse::<usize>().ok()?.checked_mul(mult)
}

/// A byte count for humans: `8 B`, `64 KiB`, `1 MiB`, or the exact number when not a whole unit.
pub fn human_size(n: usize) -> String {
    if n >= 1 << 30 && n % (1 << 30) == 0 {
        format!("{} GiB", n >> 30)
    } else if n >= 1 << 20 && n % (1 << 20) == 0 {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n % (1 << 10) == 0 {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} B")
    }
}

/// The sizes `begin, begin*factor, ...` up to and including `end` (OSU's `-b/-e/-f`). `factor` below 2 is
/// treated as 2; `begin` 0 as 1.
pub fn sweep(begin: usize, end: usize, factor: usize) -> Vec<usize> {
    let f = factor.max(2);
    let mut s = begin.max(1);
    let mut v = Vec::new();
    while s <= end {
        v.push(s);
        match s.checked_mul(f) {
            Some(n) => s = n,
            None => break,
        }
    }
    v
}

/// How many operations one measurement runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Timed operations per repeat.
    pub iters: usize,
    /// Untimed warm-up operations before the first repeat.
    pub warmup: usize,
    /// Operations per window (bandwidth benchmarks; 1 for the others).
    pub window: usize,
}

/// The iteration plan of one size: `iters = clamp(budget / bytes_per_op, 2, max_iters)`,
/// `warmup = min(max_warmup, iters)`, `window = clamp(WINDOW_CAP_BYTES / size, 1, max_window)`; bandwidth
/// benchmarks round `iters` up to whole windows.
pub fn plan(
    bytes_per_op: usize,
    size: usize,
    max_iters: usize,
    max_warmup: usize,
    budget: usize,
    max_window: usize,
    windowed: bool,
) -> Plan {
    let by_budget = budget / bytes_per_op.max(1);
    let iters = by_budget.min(max_iters).max(2);
    let window = if windowed {
        (WINDOW_CAP_BYTES / size.max(1)).clamp(1, max_window.max(1))
    } else {
        1
    };
    let iters = iters.div_ceil(window) * window;
    Plan {
        iters,
        warmup: max_warmup.min(iters),
        window,
    }
}

/// The median (the mean of the two middle values for an even count); `NaN` for no values.
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

/// The smallest value; `NaN` for no values.
pub fn min(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NAN, f64::min)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_sweep() {
        assert_eq!(parse_size("8"), Some(8));
        assert_eq!(parse_size("64K"), Some(65536));
        assert_eq!(parse_size("64M"), Some(64 << 20));
        assert_eq!(parse_size("x"), None);
        assert_eq!(sweep(8, 64, 2), vec![8, 16, 32, 64]);
        assert_eq!(sweep(8, 100, 4), vec![8, 32]);
        assert_eq!(sweep(8, 64 << 20, 2).len(), 24);
        assert_eq!(human_size(65536), "64 KiB");
        assert_eq!(human_size(24), "24 B");
    }

    #[test]
    fn plans() {
        let p = plan(8, 8, 10000, 100, 256 << 20, 64, false);
        assert_eq!((p.iters, p.warmup, p.window), (10000, 100, 1));
        let p = plan(64 << 20, 64 << 20, 10000, 100, 256 << 20, 64, true);
        assert_eq!((p.iters, p.warmup, p.window), (4, 4, 1));
        let p = plan(1 << 20, 1 << 20, 10000, 100, 256 << 20, 64, true);
        assert_eq!((p.iters, p.window), (256, 64));
        let p = plan(8, 8, 100, 10, 256 << 20, 64, true);
        assert_eq!((p.iters, p.window), (128, 64));
    }

    #[test]
    fn order_statistics() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(min(&[4.0, 1.0, 2.0]), 1.0);
        assert!(median(&[]).is_nan());
    }
}
