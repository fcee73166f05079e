//! The routing of an expert-parallel dispatch, as pure functions (no I/O): what one rank sends where, from its
//! `topk_idx`, and the receive-side consequences of every rank's counts (overflow verdict, slot offsets).
//!
//! Vocabulary: `W` ranks, `E` experts numbered globally, `L = E / W` experts per rank (rank `r` holds experts
//! `r*L .. (r+1)*L`). A *slot* is one token on one destination rank (a token is sent once per destination rank
//! however many of its experts live there); a *pair* is one (token, expert) entry of `topk_idx`.

use xpushmem::{Error, Result};

/// The memory layout of a dispatch's output (upstream's `Routing.layout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One output row per received token (slot), in (source rank, source token) order; `out_topk_weights` and
    /// `out_topk_idx` are `[rows, K]` with local expert ids (`-1` and weight 0 where the expert is elsewhere).
    Flat,
    /// One output row per received (token, local expert) pair, grouped by local expert (each expert's rows
    /// contiguous, in (source rank, source token) order); `out_topk_weights` is `[rows]` (the pair's weight).
    ExpertMajor,
}

impl Layout {
    /// Parse upstream's layout names `"flat"` and `"expert_major"`.
    pub fn parse(s: &str) -> Result<Layout> {
        match s {
            "flat" => Ok(Layout::Flat),
            "expert_major" => Ok(Layout::ExpertMajor),
            _ => Err(Error::InvalidArgument {
                name: "layout",
                value: format!("{s:?}"),
                reason: "must be one of \"flat\", \"expert_major\"".into(),
            }),
        }
    }

    /// Upstream's name of the layout.
    pub fn name(self) -> &'static str {
        match self {
            Layout::Flat => "flat",
            Layout::ExpertMajor => "expert_major",
        }
    }

    /// The C ABI's code (0 flat, 1 expert_major).
    pub fn from_code(v: i32) -> Result<Layout> {
        match v {
            0 => Ok(Layout::Flat),
            1 => Ok(Layout::ExpertMajor),
            _ => Err(Error::InvalidArgument {
                name: "layout",
                value: v.to_string(),
                reason: "must be 0 (flat) or 1 (expert_major)".into(),
            }),
        }
    }
}

/// What one rank sends, planned from its `topk_idx`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SendPlan {
    /// The tokens for each destination rank, back to back, each list in token order: rank `d`'s are
    /// `tokens[starts[d]..starts[d + 1]]`.
    pub tokens: Vec<u32>,
    /// `W + 1` list boundaries into `tokens`.
    pub starts: Vec<usize>,
    /// Pairs for each destination rank (`W`).
    pub pairs: Vec<u64>,
    /// Pairs for each (destination rank, its local expert): `W * L`, index `d * L + e`.
    pub expert_pairs: Vec<u64>,
}

impl SendPlan {
    /// The tokens sent to rank `d`.
    pub fn to(&self, d: usize) -> &[u32] {
        &self.tokens[self.starts[d]..self.starts[d + 1]]
    }

    /// Slots sent to rank `d`.
    pub fn slots(&self, d: usize) -> usize {
        self.starts[d + 1] - self.starts[d]
    }
}

/// Plan one rank's sends from `topk_idx` (`n * k` entries, row-major `[n, k]`): checks every entry (`-1` or a
/// global expert id below `num_experts`) and returns the per-destination token lists and pair counts.
pub fn plan_send(
    op: &str,
    topk_idx: &[i64],
    n: usize,
    k: usize,
    num_experts: usize,
    w: usize,
) -> Result<SendPlan> {
    if Some(topk_idx.len()) != n.checked_mul(k) {
        return Err(Error::InvalidArgument {
            name: "topk_idx",
            value: format!("{} entries", topk_idx.len()),
            reason: format!("{op}: must hold [{n}, {k}] entries"),
        });
    }
    let l = num_experts / w;
    let mut lists: Vec<Vec<u32>> = vec![Vec::new(); w];
    let mut pairs = vec![0u64; w];
    let mut expert_pairs = vec![0u64; w * l];
    let mut seen = vec![usize::MAX; w];
    for t in 0..n {
        for j in 0..k {
            let e = topk_idx[t * k + j];
            if e == -1 {
                continue;
            }
            if e < 0 || e as u64 >= num_experts as u64 {
                return Err(bad_expert(op, e, t, j, num_experts));
            }
            let e = e as usize;
            let d = e / l;
            pairs[d] += 1;
            expert_pairs[d * l + e % l] += 1;
            if seen[d] != t {
                seen[d] = t;
                lists[d].push(t as u32);
            }
        }
    }
    let mut starts = Vec::with_capacity(w + 1);
    let mut tokens = Vec::new();
    starts.push(0);
    for list in lists {
        tokens.extend_from_slice(&list);
        starts.push(tokens.len());
    }
    Ok(SendPlan {
        tokens,
        starts,
        pairs,
        expert_pairs,
    })
}

/// Every rank's counts, as every rank sees them after the count exchange: `slots[s * W + d]` and
/// `pairs[s * W + d]` are what rank `s` sends rank `d`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Number of ranks.
    pub w: usize,
    /// Slots (tokens) from `s` to `d`.
    pub slots: Vec<u64>,
    /// Pairs from `s` to `d`.
    pub pairs: Vec<u64>,
}

impl Counts {
    /// Slots rank `d` receives from every rank.
    pub fn recv_slots(&self, d: usize) -> u64 {
        (0..self.w).map(|s| self.slots[s * self.w + d]).sum()
    }

    /// Pairs rank `d` receives from every rank.
    pub fn recv_pairs(&self, d: usize) -> u64 {
        (0..self.w).map(|s| self.pairs[s * self.w + d]).sum()
    }

    /// Output rows of rank `d` in `layout`.
    pub fn recv_rows(&self, d: usize, layout: Layout) -> u64 {
        match layout {
            Layout::Flat => self.recv_slots(d),
            Layout::ExpertMajor => self.recv_pairs(d),
        }
    }

    /// The first slot of rank `s`'s tokens in rank `d`'s receive buffer (sources in rank order).
    pub fn dispatch_base(&self, s: usize, d: usize) -> usize {
        (0..s).map(|s2| self.slots[s2 * self.w + d] as usize).sum()
    }

    /// The first row of rank `d`'s returns in rank `s`'s combine buffer (destinations in rank order, each
    /// returning one row per slot `s` sent it).
    pub fn combine_base(&self, s: usize, d: usize) -> usize {
        (0..d).map(|d2| self.slots[s * self.w + d2] as usize).sum()
    }

    /// The receive-overflow verdict, the same on every rank (it reads only the shared counts): the first rank
    /// whose output rows in `layout` exceed `max_recv`, as an error naming it, the count and how many did not fit.
    pub fn overflow(&self, op: &str, layout: Layout, max_recv: usize) -> Option<Error> {
        (0..self.w).find_map(|d| {
            let rows = self.recv_rows(d, layout);
            (rows > max_recv as u64).then(|| overflow(op, layout, d, rows, max_recv))
        })
    }
}

/// The error of an expert id `e` out of range at `topk_idx[t, j]` (both paths).
pub fn bad_expert(op: &str, e: i64, t: usize, j: usize, num_experts: usize) -> Error {
    Error::InvalidArgument {
        name: "topk_idx",
        value: format!("{e} at [{t}, {j}]"),
        reason: format!("{op}: expert ids must be -1 (no expert) or in [0, {num_experts})"),
    }
}

/// The receive-overflow error: rank `d` would receive `rows` rows in `layout`, past `max_recv` (both paths).
pub fn overflow(op: &str, layout: Layout, d: usize, rows: u64, max_recv: usize) -> Error {
    Error::OutOfBounds {
        what: "receive rows",
        start: 0,
        len: rows as usize,
        limit: max_recv,
        context: format!(
            "{op}: rank {d} would receive {rows} {} rows ({} did not fit in max_recv_tokens_per_rank = {max_recv})",
            layout.name(),
            rows.saturating_sub(max_recv as u64)
        ),
    }
}

/// The expert-major position of every received pair: slot `i` (in receive order: source rank, then token)
/// owns `pos[starts[i]..starts[i + 1]]` (its output rows) and `col[...]` (their top-k columns); the rows of local
/// expert `e` start at `expert_starts[e]` (`L + 1` boundaries, an exclusive prefix sum: `expert_starts[1..]` is
/// usable as `grouped_mm`'s `offs=`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PairLayout {
    /// Output row of each pair.
    pub pos: Vec<usize>,
    /// The `k` index (column of the slot's `topk_idx` row) of each pair.
    pub col: Vec<usize>,
    /// Slot boundaries into `pos` (`slots + 1`).
    pub starts: Vec<usize>,
    /// Row boundaries of the local experts (`L + 1`).
    pub expert_starts: Vec<usize>,
}

/// Lay the received pairs out expert-major. `idx` holds the global expert ids of the received slots (`[slots,
/// k]`), `first` is this rank's first expert and `l` its number of experts.
pub fn pair_layout(idx: &[i64], k: usize, first: usize, l: usize) -> PairLayout {
    let local = |e: i64| -> Option<usize> {
        (e >= first as i64 && e < (first + l) as i64).then(|| e as usize - first)
    };
    let mut count = vec![0usize; l];
    for &e in idx {
        if let Some(x) = local(e) {
            count[x] += 1;
        }
    }
    let mut expert_starts = Vec::with_capacity(l + 1);
    expert_starts.push(0);
    for c in &count {
        expert_starts.push(expert_starts.last().copied().unwrap_or(0) + c);
    }
    let mut cursor = expert_starts[..l].to_vec();
    let slots = idx.len().checked_div(k).unwrap_or(0);
    let mut out = PairLayout {
        starts: Vec::with_capacity(slots + 1),
        expert_starts,
        ..Default::default()
    };
    out.starts.push(0);
    for i in 0..slots {
        for j in 0..k {
            if let Some(x) = local(idx[i * k + j]) {
                out.pos.push(cursor[x]);
                out.col.push(j);
                cursor[x] += 1;
            }
        }
        out.starts.push(out.pos.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_groups_tokens_once_per_rank() {
        // 4 experts on 2 ranks (2 each); token 0 -> experts 0, 1 (rank 0 twice), token 1 -> 3, -1; token 2 -> -1, -1.
        let p = plan_send("t", &[0, 1, 3, -1, -1, -1], 3, 2, 4, 2).unwrap();
        assert_eq!(p.to(0), &[0]);
        assert_eq!(p.to(1), &[1]);
        assert_eq!(p.pairs, vec![2, 1]);
        assert_eq!(p.expert_pairs, vec![1, 1, 0, 1]);
    }

    #[test]
    fn bad_expert_ids_name_the_position() {
        let e = plan_send("t", &[0, 4], 1, 2, 4, 2).unwrap_err().to_string();
        assert!(e.contains("4 at [0, 1]"), "{e}");
        let e = plan_send("t", &[-2], 1, 1, 4, 2).unwrap_err().to_string();
        assert!(e.contains("-2 at [0, 0]"), "{e}");
    }

    #[test]
    fn overflow_names_the_rank_and_the_excess() {
        let c = Counts {
            w: 2,
            slots: vec![1, 3, 0, 2],
            pairs: vec![1, 6, 0, 2],
        };
        assert!(c.overflow("t", Layout::Flat, 5).is_none());
        let e = c.overflow("t", Layout::ExpertMajor, 5).unwrap().to_string();
        assert!(
            e.contains("rank 1 would receive 8") && e.contains("3 did not fit"),
            "{e}"
        );
        assert_eq!(c.dispatch_base(1, 1), 3);
        assert_eq!(c.combine_base(0, 1), 1);
    }

    #[test]
    fn pairs_are_expert_major() {
        // Rank holding experts 2, 3; slots: [2, 3], [3, 9], [2, -1].
        let p = pair_layout(&[2, 3, 3, 9, 2, -1], 2, 2, 2);
        assert_eq!(p.expert_starts, vec![0, 2, 4]);
        assert_eq!(p.pos, vec![0, 2, 3, 1]);
        assert_eq!(p.col, vec![0, 1, 0, 0]);
        assert_eq!(p.starts, vec![0, 2, 3, 4]);
    }
}
