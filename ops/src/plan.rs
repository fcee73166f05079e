//! Pure planning: who sends what where. No I/O, no runtime: every function maps split counts, offsets and view
//! layouts to numbers, so the host path here and the device kernels (a later issue) share one definition of the
//! semantics, unit-tested on its own.
//!
//! Terms, for a group of `W` ranks and `ne` experts per rank:
//! * **send side**: a rank's `in_splits` (counts of dim-0 rows) and the source row of each chunk in its input;
//! * **exchange**: entry `t` of a sender's split vector lands at index `dst` of the receiving rank's
//!   `out_splits_offsets` rows ([`Exchange`]);
//! * **receive side**: the receiver's row 0 (counts), laid out `major × minor`, and the output row of each chunk
//!   ([`RecvLayout`]), with PyTorch's `major_align` rule;
//! * **pull list**: the receiver's copies `(peer, src_row, dst_row, rows)` ([`Transfer`]).

use xpushmem::{Error, Result};

/// The exclusive prefix sum of non-negative counts whose total must not exceed `limit` rows.
///
/// Errors: a negative entry (`name[i] = v`), an overflowing sum, or a total above `limit` (the splits overflow
/// the tensor they index).
pub fn split_offsets(
    op: &str,
    name: &'static str,
    splits: &[i64],
    limit: usize,
) -> Result<Vec<i64>> {
    let mut offs = Vec::with_capacity(splits.len());
    split_offsets_into(op, name, splits, limit, &mut offs)?;
    Ok(offs)
}

/// [`split_offsets`] into `offs` (cleared first; its allocation is reused).
pub fn split_offsets_into(
    op: &str,
    name: &'static str,
    splits: &[i64],
    limit: usize,
    offs: &mut Vec<i64>,
) -> Result<()> {
    offs.clear();
    let mut acc: i64 = 0;
    for (i, &s) in splits.iter().enumerate() {
        if s < 0 {
            return Err(Error::invalid(
                name,
                format!("{s} at index {i}"),
                format!("{op}: splits must be non-negative"),
            ));
        }
        offs.push(acc);
        acc = acc.checked_add(s).ok_or_else(|| {
            Error::invalid(
                name,
                format!("{splits:?}"),
                format!("{op}: the sum of the splits overflows int64"),
            )
        })?;
    }
    if acc as u128 > limit as u128 {
        return Err(Error::OutOfBounds {
            what: "rows of the splits",
            start: 0,
            len: acc as usize,
            limit,
            context: format!(
                "{op}: the sum of {name} ({acc}) exceeds the {limit} rows of the input"
            ),
        });
    }
    Ok(())
}

/// The exclusive prefix sum of `xs` (no checks; saturating).
pub fn exclusive_cumsum(xs: &[i64]) -> Vec<i64> {
    let mut acc = 0i64;
    xs.iter()
        .map(|&x| {
            let o = acc;
            acc = acc.saturating_add(x);
            o
        })
        .collect()
}

/// Rows reserved for a major block (expert) that receives `total` rows: with `align == 0` exactly `total`;
/// otherwise `total` rounded up to a multiple of `align`, and at least `align` (PyTorch's rule: an empty expert
/// still reserves `align` rows, even for `align == 1`, because grouped GEMMs cannot take empty groups).
pub fn aligned_len(total: i64, align: i64) -> Option<i64> {
    if align == 0 {
        return Some(total);
    }
    let up = total.checked_add(align - 1)? / align * align;
    Some(up.max(align))
}

/// Where each received chunk goes in the output, for row 0 laid out as `major` blocks of `minor` counts
/// (`counts[i * minor + j]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecvLayout {
    /// Output row of each chunk: within a block, the exclusive prefix over the block's counts, plus the block's
    /// start. Written back as row 1 of `out_splits_offsets`.
    pub offsets: Vec<i64>,
    /// First output row of each major block (aligned blocks start at multiples of `align`).
    pub block_starts: Vec<i64>,
    /// Rows reserved by all blocks, padding included (`Σ aligned_len(block total)`).
    pub reserved: i64,
    /// One past the last row any chunk writes (`max(offset + count)`; 0 when nothing is written). Padding rows
    /// are never written, so this is what the output must hold.
    pub written_end: i64,
}

/// The receive layout of PyTorch's `allToAllV_2d` / `writeOutputOffsets_2d` (and of the 1-D op with
/// `major = 1, align = 0`): block `i` starts at the sum of the aligned lengths of blocks `< i`; chunk `j` of a
/// block starts at the block start plus the counts of chunks `< j`. Only block starts are aligned.
///
/// `align` must be `>= 0` (0 = no alignment and no minimum); counts must be non-negative.
pub fn recv_layout(counts: &[i64], major: usize, minor: usize, align: i64) -> Result<RecvLayout> {
    let mut l = RecvLayout::default();
    recv_layout_into(counts, major, minor, align, &mut l)?;
    Ok(l)
}

/// [`recv_layout`] into `l` (its vectors' allocations are reused).
pub fn recv_layout_into(
    counts: &[i64],
    major: usize,
    minor: usize,
    align: i64,
    l: &mut RecvLayout,
) -> Result<()> {
    l.offsets.clear();
    l.block_starts.clear();
    let (offsets, block_starts) = (&mut l.offsets, &mut l.block_starts);
    let (reserved, written_end) = walk_layout(
        counts,
        major,
        minor,
        align,
        |o| offsets.push(o),
        |b| block_starts.push(b),
    )?;
    l.reserved = reserved;
    l.written_end = written_end;
    Ok(())
}

/// [`RecvLayout::written_end`] of [`recv_layout`] alone (the same checks and errors), without building the
/// layout: what judging another rank's receive needs.
pub fn recv_written_end(counts: &[i64], major: usize, minor: usize, align: i64) -> Result<i64> {
    walk_layout(counts, major, minor, align, |_| {}, |_| {}).map(|(_, end)| end)
}

/// The layout computation of [`recv_layout`]: calls `offset` with each chunk's output row and `block` with each
/// block's first row, in order; returns (rows reserved, one past the last row written).
fn walk_layout(
    counts: &[i64],
    major: usize,
    minor: usize,
    align: i64,
    mut offset: impl FnMut(i64),
    mut block: impl FnMut(i64),
) -> Result<(i64, i64)> {
    if counts.len() != major * minor {
        return Err(Error::invalid(
            "counts",
            counts.len(),
            format!("must hold major * minor = {major} * {minor} entries"),
        ));
    }
    if align < 0 {
        return Err(Error::invalid("major_align", align, "must be non-negative"));
    }
    let overflow = || {
        Error::invalid(
            "out_splits_offsets",
            format!("{counts:?}"),
            "received row counts overflow int64",
        )
    };
    let mut start = 0i64;
    let mut written_end = 0i64;
    for b in 0..major {
        block(start);
        let mut acc = start;
        for &c in &counts[b * minor..(b + 1) * minor] {
            if c < 0 {
                return Err(Error::invalid(
                    "out_splits_offsets",
                    c,
                    "a received count is negative",
                ));
            }
            offset(acc);
            let end = acc.checked_add(c).ok_or_else(overflow)?;
            if c > 0 {
                written_end = written_end.max(end);
            }
            acc = end;
        }
        let total = acc - start;
        start = start
            .checked_add(aligned_len(total, align).ok_or_else(overflow)?)
            .ok_or_else(overflow)?;
    }
    Ok((start, written_end))
}

/// How a sender's split entries map onto receivers' `out_splits_offsets` indices: PyTorch's
/// `exchangeSplitAndOffset_2d`.
///
/// * dispatch (`all_to_all_vdev_2d`, `rank_is_row_in = true`): sender entry `t = p * ne + e` goes to rank
///   `p`, index `e * W + me` (the receiver's rows are expert-major);
/// * combine (`all_to_all_vdev_2d_offset`, `rank_is_row_in = false`): entry `t = e * W + p` goes to rank `p`,
///   index `me * ne + e` (the receiver's rows are rank-major);
/// * the 1-D op is dispatch with `ne = 1`: entry `p` goes to rank `p`, index `me`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exchange {
    /// Group size `W`.
    pub world: usize,
    /// Experts per rank `ne`.
    pub ne: usize,
    /// Whether the sender's entries are rank-major (`t = p * ne + e`).
    pub rank_is_row_in: bool,
}

/// The entries one sender sends to one receiver: sender indices `src[k]` land at receiver index
/// `dst_start + k * dst_step`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerEntries {
    /// Receiving group rank.
    pub peer: usize,
    /// Indices into the sender's split vector, in the order they are written.
    pub src: Vec<usize>,
    /// Receiver index of the first entry.
    pub dst_start: usize,
    /// Distance between consecutive receiver indices.
    pub dst_step: usize,
}

impl Exchange {
    /// Number of entries in a split vector (`W * ne`).
    pub fn nsplits(&self) -> usize {
        self.world * self.ne
    }

    /// `(receiver, receiver index)` of sender `me`'s entry `t`.
    pub fn dest(&self, me: usize, t: usize) -> (usize, usize) {
        let (w, ne) = (self.world, self.ne);
        if self.rank_is_row_in {
            let (p, e) = (t / ne, t % ne);
            (p, e * w + me)
        } else {
            let (e, p) = (t / w, t % w);
            (p, me * ne + e)
        }
    }

    /// Entry `k` (`k < ne`) of what sender `me` sends `peer`: (index in the sender's split vector, index at the
    /// receiver). The same as `to_peer(me, peer)`'s `src[k]` and `dst_start + k * dst_step`, without allocating.
    pub fn entry(&self, me: usize, peer: usize, k: usize) -> (usize, usize) {
        let (w, ne) = (self.world, self.ne);
        if self.rank_is_row_in {
            (peer * ne + k, k * w + me)
        } else {
            (k * w + peer, me * ne + k)
        }
    }

    /// What sender `me` writes to `peer`, as one strided run.
    pub fn to_peer(&self, me: usize, peer: usize) -> PeerEntries {
        let (w, ne) = (self.world, self.ne);
        if self.rank_is_row_in {
            PeerEntries {
                peer,
                src: (0..ne).map(|e| peer * ne + e).collect(),
                dst_start: me,
                dst_step: w,
            }
        } else {
            PeerEntries {
                peer,
                src: (0..ne).map(|e| e * w + peer).collect(),
                dst_start: me * ne,
                dst_step: 1,
            }
        }
    }

    /// The receiver's layout of row 0: `(major, minor, peer_is_major)`. Dispatch: `ne` expert blocks of `W`
    /// source ranks; combine: `W` rank blocks of `ne` experts.
    pub fn recv_shape(&self) -> (usize, usize, bool) {
        if self.rank_is_row_in {
            (self.ne, self.world, false)
        } else {
            (self.world, self.ne, true)
        }
    }

    /// The group rank that sent receiver index `i`.
    pub fn source_of(&self, i: usize) -> usize {
        let (_, minor, peer_is_major) = self.recv_shape();
        if peer_is_major {
            i / minor
        } else {
            i % minor
        }
    }
}

/// One copy of the receive side: `rows` rows from `peer`'s input at `src_row` to this rank's output at
/// `dst_row`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transfer {
    /// Group rank to read from.
    pub peer: usize,
    /// First row in the peer's input.
    pub src_row: usize,
    /// First row in this rank's output.
    pub dst_row: usize,
    /// Number of rows.
    pub rows: usize,
}

/// The pull list of a receiver: one [`Transfer`] per non-empty chunk, from the received counts and source
/// offsets (both indexed like row 0) and the receive layout. Ordered starting with peer `me + 1` so that the
/// ranks do not all read the same peer at once.
pub fn pull_list(
    ex: &Exchange,
    me: usize,
    counts: &[i64],
    src_offsets: &[i64],
    layout: &RecvLayout,
) -> Result<Vec<Transfer>> {
    let mut out = Vec::new();
    pull_list_into(ex, me, counts, src_offsets, layout, &mut out)?;
    Ok(out)
}

/// [`pull_list`] into `out` (cleared first; its allocation is reused).
pub fn pull_list_into(
    ex: &Exchange,
    me: usize,
    counts: &[i64],
    src_offsets: &[i64],
    layout: &RecvLayout,
    out: &mut Vec<Transfer>,
) -> Result<()> {
    out.clear();
    for (i, (&rows, &src)) in counts.iter().zip(src_offsets).enumerate() {
        if rows != 0 && (rows < 0 || src < 0) {
            return Err(Error::invalid(
                "out_splits_offsets",
                format!("count {rows}, source row {src} at index {i}"),
                "received a negative count or offset",
            ));
        }
    }
    let transfer = |i: usize| Transfer {
        peer: ex.source_of(i),
        src_row: src_offsets[i] as usize,
        dst_row: layout.offsets[i] as usize,
        rows: counts[i] as usize,
    };
    let w = ex.world.max(1);
    if counts.len() == w * ex.ne && src_offsets.len() == counts.len() {
        // Already in order: peers from `me + 1` on, and within a peer its chunks by entry, whose output rows
        // ascend (expert blocks in order for dispatch, experts within the rank's block for combine).
        for d in 1..=w {
            let s = (me + d) % w;
            for k in 0..ex.ne {
                let (_, i) = ex.entry(s, me, k);
                if counts[i] != 0 {
                    out.push(transfer(i));
                }
            }
        }
        debug_assert!(out.windows(2).all(|p| {
            let key = |t: &Transfer| ((t.peer + w - me % w - 1) % w, t.dst_row);
            key(&p[0]) < key(&p[1])
        }));
        return Ok(());
    }
    out.extend(
        (0..counts.len().min(src_offsets.len()))
            .filter(|&i| counts[i] != 0)
            .map(transfer),
    );
    out.sort_unstable_by_key(|t| ((t.peer + w - me % w - 1) % w, t.dst_row));
    Ok(())
}

/// A contiguous byte run of a strided view: `len` bytes at byte offset `start` (relative to the view's buffer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// Byte offset of the run.
    pub start: usize,
    /// Length in bytes.
    pub len: usize,
}

/// The contiguous runs of a strided view in row-major element order, coalescing inner dimensions that are
/// contiguous (a contiguous view is one run; a 2-D tile of a larger matrix is one run per row). Dimensions of
/// size 1 are ignored; an empty view has no runs.
pub fn strided_runs(shape: &[usize], strides: &[usize], offset: usize, esz: usize) -> Vec<Run> {
    if shape.contains(&0) {
        return Vec::new();
    }
    // Drop size-1 dimensions, then find the innermost block that is contiguous.
    let dims: Vec<(usize, usize)> = shape
        .iter()
        .zip(strides)
        .filter(|(&n, _)| n != 1)
        .map(|(&n, &s)| (n, s))
        .collect();
    let mut block = 1usize;
    let mut k = dims.len();
    while k > 0 && dims[k - 1].1 == block {
        block *= dims[k - 1].0;
        k -= 1;
    }
    let outer = &dims[..k];
    let count: usize = outer.iter().map(|d| d.0).product();
    let mut runs = Vec::with_capacity(count);
    let mut idx = vec![0usize; outer.len()];
    for _ in 0..count {
        let elem = offset + idx.iter().zip(outer).map(|(&i, d)| i * d.1).sum::<usize>();
        runs.push(Run {
            start: elem * esz,
            len: block * esz,
        });
        for d in (0..outer.len()).rev() {
            idx[d] += 1;
            if idx[d] < outer[d].0 {
                break;
            }
            idx[d] = 0;
        }
    }
    runs
}

/// Byte chunks `[start, start+len)` covering `total` bytes with at most `max` bytes each (`max >= 1`).
pub fn chunks(total: usize, max: usize) -> impl Iterator<Item = (usize, usize)> {
    let max = max.max(1);
    (0..total.div_ceil(max)).map(move |i| (i * max, max.min(total - i * max)))
}

/// For `multi_root_tile_reduce`: check the roots (each in `[0, W)`, no rank twice) and return, for each group
/// rank, the index of the tile it is root of (`None` for non-roots).
pub fn root_slots(op: &str, roots: &[i64], world: usize) -> Result<Vec<Option<usize>>> {
    let mut slot = vec![None; world];
    for (i, &r) in roots.iter().enumerate() {
        if r < 0 || r as u64 >= world as u64 {
            return Err(Error::InvalidPe {
                pe: r,
                n_pes: world,
                context: format!("{op}: Invalid root roots[{i}] (group-relative)"),
            });
        }
        let r = r as usize;
        if let Some(j) = slot[r] {
            return Err(Error::invalid(
                "roots",
                format!("{roots:?}"),
                format!("{op}: Each rank can only be a root once (rank {r} is roots[{j}] and roots[{i}])"),
            ));
        }
        slot[r] = Some(i);
    }
    Ok(slot)
}

/// The digest of a call's symmetric arguments that the group compares: the runtime's ([`xpushmem::team::digest`],
/// one definition for both layers).
pub fn digest(words: &[u64]) -> u64 {
    xpushmem::team::digest(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_matches_to_peer() {
        for (world, ne, rank_is_row_in) in
            [(1, 1, true), (3, 4, true), (4, 3, false), (5, 1, false)]
        {
            let ex = Exchange {
                world,
                ne,
                rank_is_row_in,
            };
            for me in 0..world {
                for peer in 0..world {
                    let e = ex.to_peer(me, peer);
                    for k in 0..ne {
                        assert_eq!(
                            ex.entry(me, peer, k),
                            (e.src[k], e.dst_start + k * e.dst_step)
                        );
                    }
                }
            }
        }
    }
    use proptest::prelude::*;

    #[test]
    fn docs_worked_example() {
        // Two experts, one source: c0 = 5 rows, d0 = 7 rows; align 16 -> the second expert starts at 16.
        let l = recv_layout(&[5, 7], 2, 1, 16).unwrap();
        assert_eq!(l.offsets, vec![0, 16]);
        assert_eq!(l.reserved, 32);
        assert_eq!(l.written_end, 23);
    }

    #[test]
    fn empty_expert_reserves_align_rows_even_for_align_1() {
        let l = recv_layout(&[0, 0, 3, 1], 2, 2, 1).unwrap();
        assert_eq!(l.offsets, vec![0, 0, 1, 4]);
        assert_eq!(l.block_starts, vec![0, 1]);
        assert_eq!(l.reserved, 5);
        let l = recv_layout(&[0, 0, 3, 1], 2, 2, 0).unwrap();
        assert_eq!(l.offsets, vec![0, 0, 0, 3]);
        assert_eq!(l.reserved, 4);
    }

    #[test]
    fn split_offsets_checks() {
        assert_eq!(
            split_offsets("op", "s", &[2, 0, 3], 5).unwrap(),
            vec![0, 2, 2]
        );
        assert!(matches!(
            split_offsets("op", "s", &[2, -1], 5),
            Err(Error::InvalidArgument { .. })
        ));
        assert!(matches!(
            split_offsets("op", "s", &[2, 4], 5),
            Err(Error::OutOfBounds { .. })
        ));
        assert!(split_offsets("op", "s", &[i64::MAX, 1], usize::MAX).is_err());
    }

    #[test]
    fn roots() {
        assert_eq!(
            root_slots("op", &[2, 0], 3).unwrap(),
            vec![Some(1), None, Some(0)]
        );
        assert!(matches!(
            root_slots("op", &[3], 3),
            Err(Error::InvalidPe { .. })
        ));
        assert!(matches!(
            root_slots("op", &[-1], 3),
            Err(Error::InvalidPe { .. })
        ));
        assert!(matches!(
            root_slots("op", &[1, 1], 3),
            Err(Error::InvalidArgument { .. })
        ));
    }

    #[test]
    fn runs_of_tiles() {
        // A 2x3 tile of an 8-wide f32 matrix starting at (1, 2).
        let r = strided_runs(&[2, 3], &[8, 1], 10, 4);
        assert_eq!(
            r,
            vec![Run { start: 40, len: 12 }, Run { start: 72, len: 12 }]
        );
        // Contiguous: one run. Size-1 dims ignored.
        assert_eq!(
            strided_runs(&[2, 1, 3], &[3, 99, 1], 0, 2),
            vec![Run { start: 0, len: 12 }]
        );
        // Column view: one element per run.
        assert_eq!(strided_runs(&[3], &[5], 1, 1).len(), 3);
        assert!(strided_runs(&[0, 3], &[3, 1], 0, 4).is_empty());
        // Scalar.
        assert_eq!(
            strided_runs(&[], &[], 3, 8),
            vec![Run { start: 24, len: 8 }]
        );
    }

    #[test]
    fn chunking() {
        assert_eq!(
            chunks(10, 4).collect::<Vec<_>>(),
            vec![(0, 4), (4, 4), (8, 2)]
        );
        assert_eq!(chunks(0, 4).count(), 0);
    }

    /// No cap on W or ne (NVSHMEM: W <= 32 / 16, ne <= 16 / 32): the schedule and layout are exact far past them.
    #[test]
    fn no_caps_on_world_or_experts() {
        for (w, ne, row_in) in [(257usize, 65usize, true), (129, 33, false)] {
            let ex = Exchange {
                world: w,
                ne,
                rank_is_row_in: row_in,
            };
            let mut hits = vec![0u32; w * ex.nsplits()];
            for me in 0..w {
                for t in 0..ex.nsplits() {
                    let (p, i) = ex.dest(me, t);
                    hits[p * ex.nsplits() + i] += 1;
                }
            }
            assert!(hits.iter().all(|&h| h == 1));
            let (major, minor, _) = ex.recv_shape();
            let counts: Vec<i64> = (0..ex.nsplits() as i64).map(|i| i % 3).collect();
            let l = recv_layout(&counts, major, minor, 16).unwrap();
            assert_eq!(l.block_starts.len(), major);
            assert!(l.block_starts.iter().all(|s| s % 16 == 0));
        }
    }

    proptest! {
        /// The runs of a strided view cover exactly its elements, in row-major order.
        #[test]
        fn runs_cover_the_elements(
            shape in proptest::collection::vec(0usize..5, 0..4),
            strides in proptest::collection::vec(0usize..30, 4),
            offset in 0usize..10, esz in prop_oneof![Just(1usize), Just(2), Just(4), Just(8)],
        ) {
            let strides = &strides[..shape.len()];
            let mut want = Vec::new();
            let n: usize = shape.iter().product();
            let mut idx = vec![0usize; shape.len()];
            for _ in 0..n {
                let e = offset + idx.iter().zip(strides).map(|(i, s)| i * s).sum::<usize>();
                want.extend(e * esz..(e + 1) * esz);
                for d in (0..shape.len()).rev() {
                    idx[d] += 1;
                    if idx[d] < shape[d] { break; }
                    idx[d] = 0;
                }
            }
            let got: Vec<usize> = strided_runs(&shape, strides, offset, esz)
                .iter()
                .flat_map(|r| r.start..r.start + r.len)
                .collect();
            prop_assert_eq!(got, want);
        }

        /// Every receiver index is written by exactly one (sender, entry), for both directions.
        #[test]
        fn exchange_is_a_bijection(w in 1usize..12, ne in 1usize..20, row_in in any::<bool>()) {
            let ex = Exchange { world: w, ne, rank_is_row_in: row_in };
            let mut seen = vec![vec![None; ex.nsplits()]; w];
            for me in 0..w {
                for t in 0..ex.nsplits() {
                    let (p, i) = ex.dest(me, t);
                    prop_assert!(p < w && i < ex.nsplits());
                    prop_assert!(seen[p][i].is_none());
                    seen[p][i] = Some((me, t));
                    prop_assert_eq!(ex.source_of(i), me);
                }
                for p in 0..w {
                    let pe = ex.to_peer(me, p);
                    for (k, &t) in pe.src.iter().enumerate() {
                        prop_assert_eq!(ex.dest(me, t), (p, pe.dst_start + k * pe.dst_step));
                    }
                }
            }
            prop_assert!(seen.iter().flatten().all(|x| x.is_some()));
        }

        /// The receive layout: chunks are disjoint and in order, blocks start aligned, empty blocks reserve
        /// `align` rows, reserved covers everything written.
        #[test]
        fn recv_layout_invariants(
            major in 1usize..10, minor in 1usize..10, align in prop_oneof![Just(0i64), 1i64..20],
            seed in any::<u64>(),
        ) {
            let mut s = seed;
            let counts: Vec<i64> = (0..major * minor).map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let v = (s >> 33) % 9;
                if v < 3 { 0 } else { v as i64 }
            }).collect();
            let l = recv_layout(&counts, major, minor, align).unwrap();
            let mut prev_end = 0;
            for b in 0..major {
                let start = l.block_starts[b];
                prop_assert!(start >= prev_end);
                if align > 0 { prop_assert_eq!(start % align, 0); }
                let blk = &counts[b * minor..(b + 1) * minor];
                let total: i64 = blk.iter().sum();
                let mut acc = start;
                for (j, &c) in blk.iter().enumerate() {
                    prop_assert_eq!(l.offsets[b * minor + j], acc);
                    acc += c;
                }
                let next = if b + 1 < major { l.block_starts[b + 1] } else { l.reserved };
                let len = next - start;
                prop_assert!(len >= total);
                if align > 0 {
                    prop_assert!(len >= align);
                    prop_assert_eq!(len % align, 0);
                    prop_assert!(len < total.max(1) + align);
                } else {
                    prop_assert_eq!(len, total);
                }
                prev_end = start + total;
            }
            prop_assert!(l.written_end <= l.reserved);
        }

        /// Dispatch then combine, planned over W in-memory ranks, returns every input row to where it came from.
        #[test]
        fn dispatch_combine_round_trip(w in 1usize..6, ne in 1usize..6, align in 1i64..9, seed in any::<u64>()) {
            let mut s = seed;
            let mut rnd = |m: u64| { s = s.wrapping_mul(6364136223846793005).wrapping_add(1); (s >> 33) % m };
            let splits: Vec<Vec<i64>> = (0..w).map(|_| (0..w * ne).map(|_| rnd(5) as i64).collect()).collect();
            // Rows are tagged (rank, row).
            let inputs: Vec<Vec<(usize, usize)>> = (0..w).map(|r| {
                let n: i64 = splits[r].iter().sum();
                (0..n as usize).map(|i| (r, i)).collect()
            }).collect();
            let fwd = Exchange { world: w, ne, rank_is_row_in: true };
            let (outs, osos) = simulate(&fwd, &splits, &splits.iter().map(|s| exclusive_cumsum(s)).collect::<Vec<_>>(), &inputs, align);
            let back = Exchange { world: w, ne, rank_is_row_in: false };
            let counts: Vec<Vec<i64>> = osos.iter().map(|o| o.0.clone()).collect();
            let offs: Vec<Vec<i64>> = osos.iter().map(|o| o.1.clone()).collect();
            let (outs2, osos2) = simulate(&back, &counts, &offs, &outs, 0);
            for r in 0..w {
                prop_assert_eq!(&outs2[r][..inputs[r].len()], &inputs[r][..]);
                prop_assert_eq!(&osos2[r].0, &splits[r]);
                prop_assert_eq!(&osos2[r].1, &exclusive_cumsum(&splits[r]));
            }
        }
    }

    /// Run the planned exchange over in-memory ranks: returns each rank's output rows and (row0, row1).
    #[allow(clippy::type_complexity)]
    fn simulate(
        ex: &Exchange,
        counts: &[Vec<i64>],
        src_offs: &[Vec<i64>],
        inputs: &[Vec<(usize, usize)>],
        align: i64,
    ) -> (Vec<Vec<(usize, usize)>>, Vec<(Vec<i64>, Vec<i64>)>) {
        let w = ex.world;
        let mut row0 = vec![vec![0i64; ex.nsplits()]; w];
        let mut row1 = vec![vec![0i64; ex.nsplits()]; w];
        for me in 0..w {
            for t in 0..ex.nsplits() {
                let (p, i) = ex.dest(me, t);
                row0[p][i] = counts[me][t];
                row1[p][i] = src_offs[me][t];
            }
        }
        let (major, minor, _) = ex.recv_shape();
        let mut outs = Vec::new();
        let mut osos = Vec::new();
        for me in 0..w {
            let l = recv_layout(&row0[me], major, minor, align).unwrap();
            let mut out = vec![(usize::MAX, 0); l.reserved as usize];
            for t in pull_list(ex, me, &row0[me], &row1[me], &l).unwrap() {
                out[t.dst_row..t.dst_row + t.rows]
                    .copy_from_slice(&inputs[t.peer][t.src_row..t.src_row + t.rows]);
            }
            outs.push(out);
            osos.push((row0[me].clone(), l.offsets.clone()));
        }
        (outs, osos)
    }
}
