//! The all-to-all family: `all_to_all_vdev` (1-D), `all_to_all_vdev_2d` (MoE dispatch),
//! `all_to_all_vdev_2d_offset` (MoE combine) and the equal-split `nvshmem_all_to_all`.
//!
//! Host path of the v-ops, for a group of `W` ranks (all steps on every rank):
//! 1. validate locally (shapes, dtypes, contiguity, splits non-negative and within the input, no aliasing);
//! 2. `Group::agree`: barrier + all-reduce of "anyone failed?" and of the digest of the symmetric arguments
//!    (input and `out_splits_offsets` must be the same views on every rank): every rank fails or none does;
//! 3. push: write each receiver's entries of `out_splits_offsets` (row 0 = count, row 1 = the chunk's row in
//!    the sender's input), at the indices [`Exchange`] gives;
//! 4. barrier;
//! 5. receive: read row 0 and row 1, compute the layout ([`recv_layout`]; `major_align` for dispatch), check
//!    that every chunk fits in `out`, pull every chunk from its sender's input, then overwrite row 1 with the
//!    output offsets. Row 1 is read completely before it is overwritten, so there is no race on it;
//! 6. `Group::agree` again: the exit barrier (peers' inputs are no longer read once it returns) and the
//!    verdict on the receive checks.

use crate::dtype::DType;
use crate::group::Group;
use crate::io::{self, check_contiguous, check_disjoint, check_i64};
use crate::plan::{self, recv_layout, Exchange};
use crate::tensor::TensorView;
use xpushmem::{Error, Result, Shmem};

/// Op codes mixed into the argument digest, so that ranks calling different ops are told apart.
#[derive(Clone, Copy)]
enum Op {
    Vdev = 1,
    Vdev2d = 2,
    Vdev2dOffset = 3,
    AllToAll = 4,
}

/// What the local validation of a v-op produced.
struct Prepared {
    ex: Exchange,
    /// Sender split vector (counts) and the source row of each entry.
    counts: Vec<i64>,
    src_rows: Vec<i64>,
    align: i64,
    row_bytes: usize,
}

fn row_elems(v: &TensorView) -> usize {
    v.shape().iter().skip(1).product()
}

/// Shared checks of `input` and `out`: at least 1-D, contiguous, same dtype, same row size, disjoint.
fn check_data(op: &str, input: &TensorView, out: &TensorView) -> Result<usize> {
    for (name, v) in [("input", input), ("out", out)] {
        if v.dim() == 0 {
            return Err(Error::InvalidArgument {
                name,
                value: v.describe(),
                reason: format!("{op}: must have at least one dimension (rows are dim 0)"),
            });
        }
        check_contiguous(op, name, v)?;
    }
    if input.dtype() != out.dtype() {
        return Err(Error::InvalidArgument {
            name: "out",
            value: out.describe(),
            reason: format!(
                "{op}: input and out must have the same dtype (input is {})",
                input.dtype()
            ),
        });
    }
    if row_elems(input) != row_elems(out) {
        return Err(Error::InvalidArgument {
            name: "out",
            value: out.describe(),
            reason: format!(
                "{op}: input and out must have the same row size (stride(0)): {} vs {} elements",
                row_elems(input),
                row_elems(out)
            ),
        });
    }
    check_disjoint(op, "out", out, "input", input)?;
    Ok(row_elems(input) * input.dtype().size())
}

/// Check `out_splits_offsets`: int64 `[2, n]`, contiguous, disjoint from the data and from the input splits.
fn check_oso(op: &str, oso: &TensorView, n: usize, others: &[(&str, &TensorView)]) -> Result<()> {
    check_i64(op, "out_splits_offsets", oso, 2)?;
    check_contiguous(op, "out_splits_offsets", oso)?;
    if oso.size(0) != 2 || oso.size(1) != n {
        return Err(Error::InvalidArgument {
            name: "out_splits_offsets",
            value: oso.describe(),
            reason: format!("{op}: must have shape [2, {n}] (row 0: splits, row 1: offsets)"),
        });
    }
    for (name, v) in others {
        check_disjoint(op, "out_splits_offsets", oso, name, v)?;
    }
    Ok(())
}

/// `all_to_all_vdev(input, out, in_splits, out_splits_offsets, group)`: 1-D all-to-all-v of dim-0 rows.
///
/// * `in_splits`: int64 `[W]`; entry `p` = rows sent to group rank `p`, taken back to back from row 0 of
///   `input` in rank order. Read only (left unchanged).
/// * `out_splits_offsets`: int64 `[2, W]`, written: row 0 = rows received from each rank, row 1 = the exclusive
///   prefix sum of row 0. Rows from rank `p` land at `out[row1[p] .. row1[p] + row0[p]]`.
///
/// Checks (beyond PyTorch, which checks only the device): `input`/`out` contiguous with equal dtype and row size,
/// `in_splits` int64 `[W]`, splits non-negative and summing to at most `input.size(0)`, every received chunk
/// inside `out`, `out_splits_offsets` int64 `[2, W]`, no aliasing, the same symmetric views on every rank.
pub fn all_to_all_vdev(
    sh: &Shmem,
    group: &Group,
    input: &TensorView,
    out: &TensorView,
    in_splits: &TensorView,
    out_splits_offsets: &TensorView,
) -> Result<()> {
    const OP: &str = "all_to_all_vdev";
    let me = group.rank_for(sh, OP)?;
    let w = group.size();
    let ex = Exchange {
        world: w,
        ne: 1,
        rank_is_row_in: true,
    };
    let prep = (|| {
        let row_bytes = check_data(OP, input, out)?;
        check_i64(OP, "in_splits", in_splits, 1)?;
        if in_splits.size(0) != w {
            return Err(Error::InvalidArgument {
                name: "in_splits",
                value: in_splits.describe(),
                reason: format!("{OP}: must have one entry per group rank ({w})"),
            });
        }
        check_oso(
            OP,
            out_splits_offsets,
            w,
            &[("input", input), ("out", out), ("in_splits", in_splits)],
        )?;
        let counts = io::read_i64s(sh, in_splits, sh.my_pe())?;
        let src_rows = plan::split_offsets(OP, "in_splits", &counts, input.size(0))?;
        Ok(Prepared {
            ex,
            counts,
            src_rows,
            align: 0,
            row_bytes,
        })
    })();
    run(
        sh,
        group,
        OP,
        Op::Vdev,
        me,
        prep,
        input,
        out,
        out_splits_offsets,
    )
}

/// `all_to_all_vdev_2d(input, out, in_splits, out_splits_offsets, group, major_align)`: MoE token dispatch,
/// rank-major in, expert-major out.
///
/// * `in_splits`: int64 `[W * ne]`; entry `p * ne + e` = rows for expert `e` of rank `p`, packed back to back
///   from row 0 of `input`. Unchanged.
/// * `out_splits_offsets`: int64 `[2, W * ne]`, written: `row0[e * W + s]` = rows this rank's expert `e`
///   receives from rank `s`; `row1` = their output rows: expert `e` starts at the sum over earlier experts of
///   `max(roundup(total, major_align), major_align)` (so an expert receiving nothing still reserves
///   `major_align` rows, even when it is 1), and within an expert sources follow each other unpadded. Padding
///   rows of `out` are not written.
/// * `major_align`: `None` = 1; must be positive.
///
/// No cap on `W` or on `ne` (NVSHMEM's kernel: `W <= 32`, `ne <= 16`).
#[allow(clippy::too_many_arguments)]
pub fn all_to_all_vdev_2d(
    sh: &Shmem,
    group: &Group,
    input: &TensorView,
    out: &TensorView,
    in_splits: &TensorView,
    out_splits_offsets: &TensorView,
    major_align: Option<i64>,
) -> Result<()> {
    const OP: &str = "all_to_all_vdev_2d";
    let me = group.rank_for(sh, OP)?;
    let w = group.size();
    let prep = (|| {
        let align = major_align.unwrap_or(1);
        if align <= 0 {
            return Err(Error::InvalidArgument {
                name: "major_align",
                value: align.to_string(),
                reason: format!("{OP}: major_align must be positive"),
            });
        }
        let row_bytes = check_data(OP, input, out)?;
        check_i64(OP, "in_splits", in_splits, 1)?;
        check_contiguous(OP, "in_splits", in_splits)?;
        let n = in_splits.size(0);
        if n % w != 0 {
            return Err(Error::InvalidArgument {
                name: "in_splits",
                value: in_splits.describe(),
                reason: format!(
                    "{OP}: the number of splits ({n}) must be a multiple of the group size ({w})"
                ),
            });
        }
        check_oso(
            OP,
            out_splits_offsets,
            n,
            &[("input", input), ("out", out), ("in_splits", in_splits)],
        )?;
        let counts = io::read_i64s(sh, in_splits, sh.my_pe())?;
        let src_rows = plan::split_offsets(OP, "in_splits", &counts, input.size(0))?;
        Ok(Prepared {
            ex: Exchange {
                world: w,
                ne: n / w,
                rank_is_row_in: true,
            },
            counts,
            src_rows,
            align,
            row_bytes,
        })
    })();
    run(
        sh,
        group,
        OP,
        Op::Vdev2d,
        me,
        prep,
        input,
        out,
        out_splits_offsets,
    )
}

/// `all_to_all_vdev_2d_offset(input, out, in_splits_offsets, out_splits_offsets, group)`: MoE combine,
/// expert-major in (with explicit source offsets), rank-major out.
///
/// * `in_splits_offsets`: int64 `[2, ne * W]`; `[0][e * W + p]` = rows local expert `e` returns to rank `p`,
///   `[1][e * W + p]` = their first row in `input` (any order, gaps allowed and not transferred). Unchanged.
/// * `out_splits_offsets`: int64 `[2, W * ne]`, written: `row0[s * ne + e]` = rows received from rank `s`'s
///   expert `e`; `row1` = the plain exclusive prefix sum of row 0 (no alignment). The output is dense, ordered by
///   (source rank, expert).
///
/// Checks beyond PyTorch: every chunk `[offset, offset + count)` inside `input`, non-negative counts and
/// offsets, the shape of `out_splits_offsets`. No cap on `W` or `ne` (NVSHMEM: `W <= 16`, `ne <= 32`).
pub fn all_to_all_vdev_2d_offset(
    sh: &Shmem,
    group: &Group,
    input: &TensorView,
    out: &TensorView,
    in_splits_offsets: &TensorView,
    out_splits_offsets: &TensorView,
) -> Result<()> {
    const OP: &str = "all_to_all_vdev_2d_offset";
    let me = group.rank_for(sh, OP)?;
    let w = group.size();
    let prep = (|| {
        let row_bytes = check_data(OP, input, out)?;
        check_i64(OP, "in_splits_offsets", in_splits_offsets, 2)?;
        check_contiguous(OP, "in_splits_offsets", in_splits_offsets)?;
        let n = in_splits_offsets.size(1);
        if in_splits_offsets.size(0) != 2 || n % w != 0 {
            return Err(Error::InvalidArgument {
                name: "in_splits_offsets",
                value: in_splits_offsets.describe(),
                reason: format!(
                    "{OP}: must have shape [2, ne * W] with W = {w} (row 0: splits, row 1: offsets)"
                ),
            });
        }
        check_oso(
            OP,
            out_splits_offsets,
            n,
            &[
                ("input", input),
                ("out", out),
                ("in_splits_offsets", in_splits_offsets),
            ],
        )?;
        let all = io::read_i64s(sh, in_splits_offsets, sh.my_pe())?;
        let (counts, src_rows) = (all[..n].to_vec(), all[n..].to_vec());
        let rows = input.size(0) as u128;
        for i in 0..n {
            let (c, o) = (counts[i], src_rows[i]);
            if c < 0 || o < 0 {
                return Err(Error::InvalidArgument {
                    name: "in_splits_offsets",
                    value: format!("split {c}, offset {o} at column {i}"),
                    reason: format!("{OP}: splits and offsets must be non-negative"),
                });
            }
            if c > 0 && o as u128 + c as u128 > rows {
                return Err(Error::OutOfBounds {
                    what: "input rows of a chunk",
                    start: o as usize,
                    len: c as usize,
                    limit: rows as usize,
                    context: format!("{OP}: in_splits_offsets column {i} runs past the input"),
                });
            }
        }
        Ok(Prepared {
            ex: Exchange {
                world: w,
                ne: n / w,
                rank_is_row_in: false,
            },
            counts,
            src_rows,
            align: 0,
            row_bytes,
        })
    })();
    run(
        sh,
        group,
        OP,
        Op::Vdev2dOffset,
        me,
        prep,
        input,
        out,
        out_splits_offsets,
    )
}

/// The shared exchange / pull engine of the three v-ops (module docs, steps 2-6).
#[allow(clippy::too_many_arguments)]
fn run(
    sh: &Shmem,
    group: &Group,
    op: &'static str,
    code: Op,
    me: usize,
    prep: Result<Prepared>,
    input: &TensorView,
    out: &TensorView,
    oso: &TensorView,
) -> Result<()> {
    let w = group.size();
    let mut words = vec![code as u64, w as u64, group.id()];
    if let Ok(p) = &prep {
        words.push(p.ex.ne as u64);
    }
    input.digest_words(&mut words);
    oso.digest_words(&mut words);
    let ours = || {
        format!(
            "input {}; out_splits_offsets {}",
            input.describe(),
            oso.describe()
        )
    };
    group.agree(
        sh,
        op,
        prep.as_ref().err().cloned(),
        plan::digest(&words),
        &ours,
    )?;
    let p = prep?;

    // Push: each receiver's entries of row 0 (counts) and row 1 (source rows). A failure here (a runtime error)
    // is reported through the barrier that follows, so no rank waits for one that gave up.
    let n = p.ex.nsplits();
    let pushed = (|| {
        for k in 1..=w {
            let peer = (me + k) % w;
            let e = p.ex.to_peer(me, peer);
            if e.src.is_empty() {
                continue;
            }
            let counts: Vec<i64> = e.src.iter().map(|&t| p.counts[t]).collect();
            let rows: Vec<i64> = e.src.iter().map(|&t| p.src_rows[t]).collect();
            let pe = group.global(peer)?;
            for (row, vals) in [(0, &counts), (1, &rows)] {
                let v = entries_view(oso, row, e.dst_start, e.dst_step, vals.len())?;
                io::write_i64s(sh, &v, vals, pe)?;
            }
        }
        Ok(())
    })();
    group.agree(sh, op, pushed.err(), 0, &String::new)?;

    // Receive.
    let mine = sh.my_pe();
    let received = (|| {
        let all = io::read_i64s(sh, oso, mine)?;
        let (counts, src_rows) = (&all[..n], &all[n..]);
        let (major, minor, _) = p.ex.recv_shape();
        let layout = recv_layout(counts, major, minor, p.align)?;
        if layout.written_end as u128 > out.size(0) as u128 {
            return Err(Error::OutOfBounds {
                what: "output rows",
                start: 0,
                len: layout.written_end as usize,
                limit: out.size(0),
                context: format!(
                    "{op}: the received splits need {} rows of out, which has {} (row 0 of out_splits_offsets: {counts:?})",
                    layout.written_end,
                    out.size(0)
                ),
            });
        }
        let transfers = plan::pull_list(&p.ex, me, counts, src_rows, &layout)?;
        Ok((layout, transfers))
    })();
    let outcome = received.and_then(|(layout, transfers)| {
        let src = input.contiguous_bytes(op, "input")?;
        let dst = out.contiguous_bytes(op, "out")?;
        let rb = p.row_bytes;
        let mut staging = Vec::new();
        for t in transfers {
            let bytes = t.rows * rb;
            let s = src.slice(t.src_row * rb..t.src_row * rb + bytes)?;
            let d = dst.slice(t.dst_row * rb..t.dst_row * rb + bytes)?;
            io::copy(sh, s, group.global(t.peer)?, d, mine, &mut staging)?;
        }
        let row1 = oso.narrow(0, 1, 1)?;
        io::write_i64s(sh, &row1, &layout.offsets, mine)
    });
    let ours = || format!("out {}", out.describe());
    group.agree(sh, op, outcome.err(), 0, &ours)
}

/// A 1-D int64 view of `len` entries of row `row` of `oso`, starting at column `start`, every `step` columns.
fn entries_view(
    oso: &TensorView,
    row: usize,
    start: usize,
    step: usize,
    len: usize,
) -> Result<TensorView> {
    let off = oso.offset() + row * oso.stride(0) + start * oso.stride(1);
    TensorView::new(oso.buf(), DType::I64, &[len], &[step * oso.stride(1)], off)
}

/// `nvshmem_all_to_all(input, out, group)`: equal-split all-to-all. Chunk `i` of `input` (`numel / W`
/// elements) goes to group rank `i`; the chunk from rank `i` lands at chunk `i` of `out`.
///
/// Checks (PyTorch's): both contiguous, same numel and dtype, numel divisible by `W`; plus no aliasing and the
/// same symmetric input on every rank. Returns when this rank's `out` is complete and its `input` is no longer
/// read by peers.
pub fn nvshmem_all_to_all(
    sh: &Shmem,
    group: &Group,
    input: &TensorView,
    out: &TensorView,
) -> Result<()> {
    const OP: &str = "nvshmem_all_to_all";
    let me = group.rank_for(sh, OP)?;
    let w = group.size();
    let prep = (|| {
        check_contiguous(OP, "input", input)?;
        check_contiguous(OP, "out", out)?;
        if input.dtype() != out.dtype() {
            return Err(Error::InvalidArgument {
                name: "out",
                value: out.describe(),
                reason: format!(
                    "{OP}: input and out must have the same dtype (input is {})",
                    input.dtype()
                ),
            });
        }
        if input.numel() != out.numel() {
            return Err(Error::InvalidArgument {
                name: "out",
                value: out.describe(),
                reason: format!(
                    "{OP}: input and out must have the same numel (input has {})",
                    input.numel()
                ),
            });
        }
        if input.numel() % w != 0 {
            return Err(Error::InvalidArgument {
                name: "input",
                value: input.describe(),
                reason: format!(
                    "{OP}: numel ({}) must be divisible by the group size ({w})",
                    input.numel()
                ),
            });
        }
        check_disjoint(OP, "out", out, "input", input)?;
        Ok(input.nbytes() / w)
    })();
    let mut words = vec![Op::AllToAll as u64, w as u64, group.id()];
    input.digest_words(&mut words);
    let ours = || format!("input {}", input.describe());
    group.agree(
        sh,
        OP,
        prep.as_ref().err().cloned(),
        plan::digest(&words),
        &ours,
    )?;
    let chunk = prep?;
    let src = input.contiguous_bytes(OP, "input")?;
    let dst = out.contiguous_bytes(OP, "out")?;
    let mut staging = Vec::new();
    let r = (|| {
        for k in 0..w {
            let peer = (me + k) % w;
            let s = src.slice(me * chunk..(me + 1) * chunk)?;
            let d = dst.slice(peer * chunk..(peer + 1) * chunk)?;
            io::copy(sh, s, group.global(peer)?, d, sh.my_pe(), &mut staging)?;
        }
        Ok(())
    })();
    group.agree(sh, OP, r.err(), 0, &|| String::new())
}
