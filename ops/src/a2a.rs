//! The all-to-all family: `all_to_all_vdev` (1-D), `all_to_all_vdev_2d` (MoE dispatch),
//! `all_to_all_vdev_2d_offset` (MoE combine) and the equal-split `nvshmem_all_to_all`.
//!
//! Host path of the v-ops, for a group of `W` ranks (all steps on every rank):
//! 1. validate locally (shapes, dtypes, contiguity, splits non-negative and within the input, no aliasing);
//! 2. **split exchange** ([`Shmem::team_exchange`], one signalled message to every rank, no dissemination): the
//!    message to rank `p` carries this rank's verdict on its own arguments, the digest of the symmetric arguments
//!    (input and `out_splits_offsets` must be the same views on every rank), `p`'s entries of the split vector
//!    (counts unless the message carries the whole split vector as in step 4, at the indices [`Exchange`] gives)
//!    and, when the chunks for `p` are small (`XPUSHMEM_OPS_EAGER_SIZE`), the rows themselves (*eager*; this
//!    rank's message to itself too, which never leaves the PE), else the chunks' source rows in the input. Every
//!    rank sees every verdict and digest, so every rank fails or none does, after one message latency;
//! 3. receive: compute the layout ([`recv_layout`]; `major_align` for dispatch), check that every chunk fits in
//!    `out`, copy eager chunks out of the messages (small chunks that follow each other in `out` gathered into
//!    one put) and pull the others from their senders' inputs, write `out_splits_offsets` (row 0 = counts, row 1
//!    = output offsets);
//! 4. **completion exchange** (empty messages): the verdict on the receive checks, and the point after which no
//!    peer reads this rank's input. Skipped when every chunk of every rank went eagerly (nobody reads a peer's
//!    input then) and either the checks are on and every split message also carried its sender's receive
//!    arguments (rows of `out`, alignment) and whole split vector (when they fit: every rank then judges every
//!    rank's receive in step 3, the same way, so every rank fails or none does after the split exchange alone),
//!    or `XPUSHMEM_CHECK_SYMMETRY=0` (a receive error is then reported by the receiving rank only). Small
//!    all-to-alls thus cost one exchange.
//!
//! Messages are double-buffered by the team's sequence number, so no exit barrier protects them. When the split
//! entries do not fit in a message (very large `W * ne`), the ops fall back to the agreement protocol: agreement,
//! push of the entries into the receivers' `out_splits_offsets`, barrier, receive and pull, exit agreement.

use crate::dtype::DType;
use crate::group::{ArgCache, Group, Scratch, ViewSlices};
use crate::io::{self, check_contiguous, check_disjoint, check_i64};
use crate::plan::{self, recv_layout, Exchange};
use crate::tensor::TensorView;
use xpushmem::{Error, Messages, Result, Shmem};

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

/// `all_to_all_vdev`'s argument shapes (both paths): the row size in bytes. `contiguous_splits`: the device
/// path also needs `in_splits` contiguous (checked after its length, as before).
pub(crate) fn vdev_shapes(
    input: &TensorView,
    out: &TensorView,
    in_splits: &TensorView,
    out_splits_offsets: &TensorView,
    w: usize,
    contiguous_splits: bool,
) -> Result<usize> {
    const OP: &str = "all_to_all_vdev";
    let row_bytes = check_data(OP, input, out)?;
    check_i64(OP, "in_splits", in_splits, 1)?;
    if in_splits.size(0) != w {
        return Err(Error::InvalidArgument {
            name: "in_splits",
            value: in_splits.describe(),
            reason: format!("{OP}: must have one entry per group rank ({w})"),
        });
    }
    if contiguous_splits {
        check_contiguous(OP, "in_splits", in_splits)?;
    }
    check_oso(
        OP,
        out_splits_offsets,
        w,
        &[("input", input), ("out", out), ("in_splits", in_splits)],
    )?;
    Ok(row_bytes)
}

/// `all_to_all_vdev_2d`'s argument shapes (both paths): (number of splits, row size in bytes).
pub(crate) fn vdev_2d_shapes(
    input: &TensorView,
    out: &TensorView,
    in_splits: &TensorView,
    out_splits_offsets: &TensorView,
    align: i64,
    w: usize,
) -> Result<(usize, usize)> {
    const OP: &str = "all_to_all_vdev_2d";
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
    Ok((n, row_bytes))
}

/// `all_to_all_vdev_2d_offset`'s argument shapes (both paths): (number of columns, row size in bytes).
pub(crate) fn vdev_2d_offset_shapes(
    input: &TensorView,
    out: &TensorView,
    in_splits_offsets: &TensorView,
    out_splits_offsets: &TensorView,
    w: usize,
) -> Result<(usize, usize)> {
    const OP: &str = "all_to_all_vdev_2d_offset";
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
    Ok((n, row_bytes))
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
    let mut scratch = group.scratch();
    let s = &mut *scratch;
    let prep = (|| {
        let views = [input, out, in_splits, out_splits_offsets];
        let (_, row_bytes) =
            cached_shapes(&mut s.cache[Op::Vdev as usize], Op::Vdev, 0, views, || {
                let rb = vdev_shapes(input, out, in_splits, out_splits_offsets, w, false)?;
                Ok((w, rb))
            })?;
        let (counts, src_rows) = prefix_rows(sh, s, Op::Vdev, OP, in_splits, input)?;
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
        s,
        OP,
        Op::Vdev,
        me,
        1,
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
    let align = major_align.unwrap_or(1);
    let mut scratch = group.scratch();
    let s = &mut *scratch;
    let prep = (|| {
        let views = [input, out, in_splits, out_splits_offsets];
        let (n, row_bytes) = cached_shapes(
            &mut s.cache[Op::Vdev2d as usize],
            Op::Vdev2d,
            align,
            views,
            || vdev_2d_shapes(input, out, in_splits, out_splits_offsets, align, w),
        )?;
        let (counts, src_rows) = prefix_rows(sh, s, Op::Vdev2d, OP, in_splits, input)?;
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
    let ne_hint = in_splits.shape().first().map_or(1, |&n| n / w.max(1));
    run(
        sh,
        group,
        s,
        OP,
        Op::Vdev2d,
        me,
        ne_hint,
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
    let mut scratch = group.scratch();
    let s = &mut *scratch;
    let prep = (|| {
        let views = [input, out, in_splits_offsets, out_splits_offsets];
        let (n, row_bytes) = cached_shapes(
            &mut s.cache[Op::Vdev2dOffset as usize],
            Op::Vdev2dOffset,
            0,
            views,
            || vdev_2d_offset_shapes(input, out, in_splits_offsets, out_splits_offsets, w),
        )?;
        let (mut counts, mut src_rows) = split_vectors(s);
        read_split_vector(
            sh,
            &s.cache[Op::Vdev2dOffset as usize],
            in_splits_offsets,
            &mut counts,
        )?;
        cached_rows(
            &mut s.cache[Op::Vdev2dOffset as usize],
            &counts,
            &mut src_rows,
            |rows| {
                rows.extend_from_slice(&counts[n..]);
                let limit = input.size(0) as u128;
                for i in 0..n {
                    let (c, o) = (counts[i], rows[i]);
                    if c < 0 || o < 0 {
                        return Err(Error::InvalidArgument {
                            name: "in_splits_offsets",
                            value: format!("split {c}, offset {o} at column {i}"),
                            reason: format!("{OP}: splits and offsets must be non-negative"),
                        });
                    }
                    if c > 0 && o as u128 + c as u128 > limit {
                        return Err(Error::OutOfBounds {
                            what: "input rows of a chunk",
                            start: o as usize,
                            len: c as usize,
                            limit: limit as usize,
                            context: format!(
                                "{OP}: in_splits_offsets column {i} runs past the input"
                            ),
                        });
                    }
                }
                Ok(())
            },
        )?;
        counts.truncate(n);
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
    let ne_hint = in_splits_offsets
        .shape()
        .get(1)
        .map_or(1, |&n| n / w.max(1));
    run(
        sh,
        group,
        s,
        OP,
        Op::Vdev2dOffset,
        me,
        ne_hint,
        prep,
        input,
        out,
        out_splits_offsets,
    )
}

/// Flags word of a split message: the chunks of this message follow the entries.
const EAGER: u64 = 1;
/// Flags word of a split message: every message of its sender to another rank carries its chunks.
const ALL_EAGER: u64 = 2;
/// Flags word of a split message: after the source rows come the sender's receive arguments (rows of its `out`,
/// its alignment) and its whole split vector, so that every rank can judge every rank's receive; the counts for
/// the receiver are not sent apart (they are entries of that vector).
const MATRIX: u64 = 4;
/// Flags word of a split message with [`MATRIX`]: the receive arguments ride in the flags word itself (the
/// alignment in bits 8-31, the rows of `out` in bits 32-63) and the split vector's entries are 4 bytes each, when
/// they all fit ([`narrow_args`]). The 2-D op's message at 2 PEs with 4 experts and 64 data bytes shrinks from 176
/// to 128 bytes, three cache lines to two.
const NARROW: u64 = 8;
/// Where a [`NARROW`] flags word holds the alignment (bits `ALIGN_AT..ROWS_AT`) and the rows of `out` (bits
/// `ROWS_AT..64`).
const ALIGN_AT: u32 = 8;
const ROWS_AT: u32 = 32;
/// Flags word of a split message: the head is padded with zeros up to where the eager chunks start on a cache line
/// of the exchange's region ([`Shmem::TEAM_EXCHANGE_PAYLOAD_OFFSET`]); set when they are [`PAD_FROM`] bytes or
/// more, or fewer when the padding adds no line to the message ([`pad_flag`]). At 2 PEs and 512 bytes the ops took
/// 5-8% less time with their chunks line-aligned (2-core machine, 40 rounds).
const PAD: u64 = 16;
/// Eager chunk bytes (for one receiver) from which a split message's head is padded ([`PAD`]) even when that adds
/// a line: up to 56 bytes of padding are then at most a fifth more bytes.
const PAD_FROM: usize = 256;
/// Bytes of a cache line of the exchange's region: what [`PAD`] aligns the chunks to, and the unit a message's
/// length is counted in ([`pad_flag`]).
const LINE: usize = 64;

/// [`PAD`] or 0: whether the head of an eager message with flags `flags` (of a call with `ne` entries per rank
/// pair and `n` in all) and `b` chunk bytes is padded. From [`PAD_FROM`] bytes always; from 64 (a line's worth),
/// when the padded message ends in the same cache line of the exchange's region as the unpadded one
/// (`all_to_all_vdev` at 2 PEs with 64-byte chunks: 80 bytes of payload unpadded, 112 padded, two lines either way,
/// and padded the chunk fills the second) and still fits a message of `cap` bytes (the padding must not make the
/// chunks travel by pull). 2-core machine, 2 PEs, 60 rounds: both ops 5-6% faster at 128 bytes, as fast at 64; the
/// 2-D op's 16- and 32-byte chunks (within a line either way) 4% slower padded, so they are not.
fn pad_flag(ne: usize, n: usize, flags: u64, b: usize, cap: usize) -> u64 {
    let bytes = |f: u64| Head::of(ne, n, f).bytes + b;
    let lines = |f: u64| (Shmem::TEAM_EXCHANGE_PAYLOAD_OFFSET + bytes(f)).div_ceil(LINE);
    if b >= PAD_FROM
        || (b >= LINE && lines(flags | PAD) == lines(flags) && bytes(flags | PAD) <= cap)
    {
        PAD
    } else {
        0
    }
}

/// Where the parts of a split message's head start (word indices) and its length in bytes, from its flags word:
/// the flags, then the `ne` counts (without [`MATRIX`]), then the source rows of the entries for the receiver
/// (without [`EAGER`]: a receiver takes eager chunks from the message, not from the sender's input), then (with
/// [`MATRIX`]) the receive arguments and the split vector of `n` entries, 8 bytes each, or with [`NARROW`] the
/// split vector alone, 4 bytes an entry (the arguments are in the flags word). A shorter head keeps a small message
/// in fewer cache lines (each one a cross-core transfer).
#[derive(Clone, Copy)]
struct Head {
    /// The counts for the receiver (without [`MATRIX`]).
    counts: usize,
    /// The source rows for the receiver (without [`EAGER`]).
    rows: usize,
    /// The receive arguments, then the split vector (with [`MATRIX`]; with [`NARROW`], the split vector).
    args: usize,
    /// The head's length in bytes.
    bytes: usize,
    /// [`MATRIX`] with [`NARROW`]: 4-byte entries, the receive arguments in the flags word.
    narrow: bool,
    /// The flags word.
    flags: u64,
}

impl Head {
    fn of(ne: usize, n: usize, flags: u64) -> Head {
        let (matrix, eager) = (flags & MATRIX != 0, flags & EAGER != 0);
        let narrow = matrix && flags & NARROW != 0;
        let counts = 1;
        let rows = counts + if matrix { 0 } else { ne };
        let args = rows + if eager { 0 } else { ne };
        let end = args
            + match (matrix, narrow) {
                (false, _) => 0,
                (true, false) => 2 + n,
                (true, true) => n.div_ceil(2),
            };
        let bytes = if flags & PAD != 0 {
            let off = Shmem::TEAM_EXCHANGE_PAYLOAD_OFFSET;
            (8 * end + off).next_multiple_of(LINE) - off
        } else {
            8 * end
        };
        Head {
            counts,
            rows,
            args,
            bytes,
            narrow,
            flags,
        }
    }

    /// Entry `t` of the sender's split vector in its message `m` (with [`MATRIX`]; 0 past the message's end).
    fn split_entry(&self, m: &[u8], t: usize) -> i64 {
        if self.narrow {
            let at = 8 * self.args + 4 * t;
            m.get(at..at + 4).map_or(0, |b| {
                u32::from_le_bytes(b.try_into().unwrap_or_default()) as i64
            })
        } else {
            word_at(m, self.args + 2 + t)
        }
    }

    /// The sender's receive arguments in its message `m`: the rows of its `out` and its alignment (with
    /// [`MATRIX`]).
    fn recv_args(&self, m: &[u8]) -> (usize, i64) {
        if self.narrow {
            (
                (self.flags >> ROWS_AT) as usize,
                ((self.flags >> ALIGN_AT) & ((1 << (ROWS_AT - ALIGN_AT)) - 1)) as i64,
            )
        } else {
            (word_at(m, self.args) as usize, word_at(m, self.args + 1))
        }
    }
}

/// Word `k` of a split message (0 past its end).
fn word_at(m: &[u8], k: usize) -> i64 {
    m.get(8 * k..8 * k + 8)
        .map_or(0, |b| i64::from_le_bytes(b.try_into().unwrap_or_default()))
}

/// The flags word's [`NARROW`] bits for receive arguments `rows` (of `out`) and `align` and split vector `counts`,
/// when every one fits its narrow field (the alignment 24 bits, the rows 32, each entry 32), else `None`.
fn narrow_args(rows: usize, align: i64, counts: &[i64]) -> Option<u64> {
    let fits = |v: i64, bits: u32| (0..1i64 << bits).contains(&v);
    let rows = rows as u64;
    (fits(align, ROWS_AT - ALIGN_AT)
        && rows < 1 << (64 - ROWS_AT)
        && counts.iter().all(|&c| fits(c, 32)))
    .then_some(NARROW | (align as u64) << ALIGN_AT | rows << ROWS_AT)
}

/// Append the receive arguments (`rows` of `out`, `align`) and the split vector `counts` of a [`MATRIX`] message
/// after its flags word: with `narrow` ([`narrow_args`] gave the flags word's bits, which hold the arguments) the
/// entries alone, 4 bytes each, an odd count padded to a whole word; else the arguments and the entries, 8 bytes
/// each.
fn push_matrix(data: &mut Vec<u8>, rows: usize, align: i64, counts: &[i64], narrow: bool) {
    let at = data.len();
    if narrow {
        for c in counts {
            data.extend_from_slice(&(*c as u32).to_le_bytes());
        }
        data.resize(at + 8 * counts.len().div_ceil(2), 0);
    } else {
        data.extend_from_slice(&(rows as u64).to_le_bytes());
        data.extend_from_slice(&align.to_le_bytes());
        for c in counts {
            data.extend_from_slice(&c.to_le_bytes());
        }
    }
}

/// The most chunk bytes for one destination that travel eagerly by default (`XPUSHMEM_OPS_EAGER_SIZE=auto`), below
/// the message's capacity. An eager byte is copied up to six times on its way (into a stage, into the message,
/// into the exchange's send buffer, into the exchange area, out of it, into `out`), a pulled one once, so past a
/// few hundred bytes the pull, whose cost hardly grows with the size, wins: at 2 PEs on the 2-core machine
/// `all_to_all_vdev` takes 0.78 / 1.24 µs with 1 / 2 KiB chunks eager, 0.71 pulled (the 2-D op 0.82 / 1.28 against
/// 0.87 / 0.93); on the lent machine (model 207) a pulled 4 KiB took as long as an eager 512 B at 2 and 4 PEs (0.79
/// / 0.81 and 1.40 / 1.41 µs).
const EAGER_AUTO_MAX: usize = 1024;

/// The largest eager chunk (bytes per destination) for messages of `cap` bytes.
fn eager_limit(sh: &Shmem, cap: usize) -> usize {
    sh.config()
        .ops_eager_size
        .map_or(cap.min(EAGER_AUTO_MAX), |l| l.min(cap))
}

/// The op's shape checks (`check`: (number of splits, row bytes)), or their result for the views and alignment
/// of the last call on the group that passed them (the checks are a function of these alone). Marks the cache
/// as this call's ([`ArgCache::hit`]) on success.
fn cached_shapes(
    c: &mut ArgCache,
    op: Op,
    align: i64,
    views: [&TensorView; 4],
    check: impl FnOnce() -> Result<(usize, usize)>,
) -> Result<(usize, usize)> {
    if c.op == op as u64
        && c.align == align
        && c.views.len() == views.len()
        && c.views.iter().zip(views).all(|(a, b)| a == b)
    {
        c.hit = true;
        return Ok(c.shapes);
    }
    // Another call: nothing cached applies to it until its checks pass.
    c.hit = false;
    c.views.clear();
    c.dig = None;
    c.counts.clear();
    c.sent.clear();
    c.received = false;
    c.slices = None;
    let shapes = check()?;
    let [input, out, splits, oso] = views;
    c.slices = Some(ViewSlices {
        input: input.contiguous_bytes("all-to-all", "input")?,
        out: out.contiguous_bytes("all-to-all", "out")?,
        splits: i64_slice(splits),
        oso: i64_slice(oso),
    });
    c.op = op as u64;
    c.align = align;
    c.views.extend(views.iter().map(|&v| v.clone()));
    c.shapes = shapes;
    c.hit = true;
    Ok(shapes)
}

/// A view's int64 elements when it is contiguous and 8-byte aligned in the heap (one get or put moves it).
fn i64_slice(v: &TensorView) -> Option<xpushmem::SymSlice<i64>> {
    if v.dtype() != DType::I64 || !v.is_contiguous() {
        return None;
    }
    v.contiguous_bytes("", "view").ok()?.cast::<i64>().ok()
}

/// Read the int64 elements of `v` into `into` (which gets their number): one get from the cached slice when
/// the cache holds this call's views (into the vector as it is when it already has that length: no zeroing
/// first), else [`io::read_i64s_into`].
fn read_split_vector(sh: &Shmem, c: &ArgCache, v: &TensorView, into: &mut Vec<i64>) -> Result<()> {
    match c.slices.and_then(|s| s.splits).filter(|_| c.hit) {
        Some(s) => {
            if into.len() != s.len() {
                into.clear();
                into.resize(s.len(), 0);
            }
            sh.get(into, s, sh.my_pe())
        }
        None => io::read_i64s_into(sh, v, sh.my_pe(), into),
    }
}

/// The sender's source rows: `check` computes and checks them from the split vector `counts` (into the cleared
/// `rows`), unless the views are the cache's and `counts` is the last split vector checked with them, whose rows
/// are copied instead.
fn cached_rows(
    c: &mut ArgCache,
    counts: &[i64],
    rows: &mut Vec<i64>,
    check: impl FnOnce(&mut Vec<i64>) -> Result<()>,
) -> Result<()> {
    rows.clear();
    c.rows_hit = c.hit && !c.counts.is_empty() && c.counts == counts;
    if c.rows_hit {
        rows.extend_from_slice(&c.rows);
        return Ok(());
    }
    c.counts.clear();
    c.sent.clear();
    check(rows)?;
    if c.hit {
        c.counts.extend_from_slice(counts);
        c.rows.clone_from(rows);
    }
    Ok(())
}

/// The sender's split vector, read from `in_splits`, and the source row of each entry: the exclusive prefix sum,
/// checked against the rows of `input` ([`cached_rows`]).
fn prefix_rows(
    sh: &Shmem,
    s: &mut Scratch,
    code: Op,
    op: &str,
    in_splits: &TensorView,
    input: &TensorView,
) -> Result<(Vec<i64>, Vec<i64>)> {
    let (mut counts, mut src_rows) = split_vectors(s);
    read_split_vector(sh, &s.cache[code as usize], in_splits, &mut counts)?;
    cached_rows(
        &mut s.cache[code as usize],
        &counts,
        &mut src_rows,
        |rows| plan::split_offsets_into(op, "in_splits", &counts, input.size(0), rows),
    )?;
    Ok((counts, src_rows))
}

/// The vectors for an all-to-all's split vector (as the last call left it: [`read_split_vector`] overwrites it)
/// and source rows (empty), with the allocations of an earlier call (the all-to-all puts them back into the
/// scratch when it is done with them).
fn split_vectors(s: &mut Scratch) -> (Vec<i64>, Vec<i64>) {
    let (a, mut b) = (
        std::mem::take(&mut s.split_counts),
        std::mem::take(&mut s.split_rows),
    );
    b.clear();
    (a, b)
}

/// Whether every split message in `recv` starts with the head the same rank sent in the last completed call
/// (`cached`: those heads back to back, in team rank order) and the messages lie where they lay then (`ends`).
fn same_heads(
    recv: &Messages,
    ranks: usize,
    ne: usize,
    n: usize,
    cached: &[u8],
    ends: &[usize],
) -> bool {
    if recv.ends != ends {
        return false;
    }
    let mut at = 0;
    for t in 0..ranks {
        let m = recv.get(t);
        let head = Head::of(ne, n, flags_of(m)).bytes;
        match (m.get(..head), cached.get(at..at + head)) {
            (Some(a), Some(b)) if a == b => at += head,
            _ => return false,
        }
    }
    at == cached.len()
}

/// The flags word of a split message (0 when it is too short to hold one).
fn flags_of(m: &[u8]) -> u64 {
    m.get(..8)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
}

/// The shared engine of the three v-ops (module docs). `ne_hint` is the number of experts the arguments imply
/// when they are not valid (it picks the same protocol as the other ranks as long as the shapes are right).
///
/// A call whose local arguments are those of the last completed call on the group (`scratch.cache`) reuses its
/// argument digest, and with the same split vector the split messages it built (only their eager chunks are read
/// again); when, besides, every rank's split message starts with the head it sent then (same split entries,
/// receive arguments and split vectors, compared byte for byte on every rank) and the messages lie where they lay
/// then in the receive buffer, the receive layout, its checks (this rank's and, with [`MATRIX`], every rank's), the
/// eager chunks' places and the pull list are that call's, kept in the scratch, and are not computed again. Every
/// call still runs the exchange, with every rank's verdict and digest.
#[allow(clippy::too_many_arguments)]
fn run(
    sh: &Shmem,
    group: &Group,
    scratch: &mut Scratch,
    op: &'static str,
    code: Op,
    me: usize,
    ne_hint: usize,
    prep: Result<Prepared>,
    input: &TensorView,
    out: &TensorView,
    oso: &TensorView,
) -> Result<()> {
    let w = group.size();
    let Scratch {
        send,
        recv,
        words,
        split_counts,
        split_rows,
        cache,
    } = scratch;
    let ArgCache {
        hit: cache_hit,
        dig: cache_dig,
        heads,
        recv_ends,
        received: cached_received,
        all_eager: cached_all_eager,
        all_matrix: cached_all_matrix,
        recv_counts: counts,
        recv_rows: src_rows,
        inline,
        layout,
        transfers,
        both,
        slices,
        eager_chunks,
        eager_runs,
        stage,
        rows_hit,
        sent,
        packs,
        pack_span,
        pack_stage,
        ..
    } = &mut cache[code as usize];
    // The receive state is the cache's only once this call completes.
    let received_before = std::mem::replace(cached_received, false);
    let hit = *cache_hit && prep.is_ok();
    // The views' memory: resolved by the shape checks of this call or of the last one with these views.
    let mem = slices.filter(|_| hit);
    let input_bytes = || match mem {
        Some(m) => Ok(m.input),
        None => input.contiguous_bytes(op, "input"),
    };
    let dig = match cache_dig.filter(|_| hit) {
        Some(d) => d,
        None => {
            words.clear();
            words.extend_from_slice(&[code as u64, w as u64, group.id()]);
            if let Ok(p) = &prep {
                words.push(p.ex.ne as u64);
            }
            input.digest_words(words);
            oso.digest_words(words);
            let d = plan::digest(words);
            if hit {
                *cache_dig = Some(d);
            }
            d
        }
    };
    let ne = prep.as_ref().map_or(ne_hint.max(1), |p| p.ex.ne);
    let cap = group.exchange_capacity(sh);
    // The split entries fit in a message, or the agreement protocol moves them. `ne` enters the digest, so ranks
    // whose arguments agree choose alike.
    if (ne.saturating_mul(16)).saturating_add(8) > cap {
        return run_agreed(sh, group, op, me, dig, prep, input, out, oso);
    }
    let ours = || {
        format!(
            "input {}; out_splits_offsets {}",
            input.describe(),
            oso.describe()
        )
    };
    let eager = eager_limit(sh, cap);
    // With the checks on, every message carries its sender's receive arguments and split vector when they fit:
    // every rank then judges every rank's receive from the split exchange alone, and when every chunk travels
    // eagerly no completion exchange is needed (module docs, step 4).
    let matrix = sh.config().check_symmetry && Head::of(ne, w * ne, MATRIX).bytes <= cap;
    let tr = group.team_ranks();
    let built = match &prep {
        Ok(p) => input_bytes().and_then(|src| {
            let reuse = hit && *rows_hit;
            let kept = Kept {
                packs,
                span: pack_span,
                stage: pack_stage,
            };
            build_split_messages(
                sh, group, me, p, src, out, cap, eager, matrix, kept, reuse, sent,
            )
        }),
        Err(_) => Ok(()),
    };
    let local = prep.as_ref().err().cloned().or(built.err());
    // A rank that rejected its arguments sends no message (and one whose messages are half built keeps none).
    let msgs: &Messages = match local {
        Some(_) => {
            sent.clear();
            send.clear();
            send
        }
        None => sent,
    };
    group.exchange(sh, op, local, dig, msgs, recv, &ours)?;
    let p = prep?;

    let n = p.ex.nsplits();
    let ne = p.ex.ne;
    // Every rank sent the heads it sent in the last completed call, whose arguments were this call's, and the
    // messages lie where they lay then: the receive state in the scratch (counts, source rows, eager chunk
    // positions, layout, pull list, row 1) is right.
    let same = hit && received_before && same_heads(recv, w, ne, n, heads, recv_ends);
    let (mut all_eager, mut all_matrix) = (*cached_all_eager, *cached_all_matrix);
    let received = if same {
        Ok(())
    } else {
        // Receive: the entries of every sender, at the receiver indices the exchange gives.
        counts.clear();
        counts.resize(n, 0);
        src_rows.clear();
        src_rows.resize(n, 0);
        inline.clear();
        inline.resize(w, None);
        all_eager = true;
        all_matrix = true;
        (|| {
            for s in 0..w {
                let m = recv.get(tr[s]);
                let flags = flags_of(m);
                let h = Head::of(ne, n, flags);
                let head = h.bytes;
                if m.len() < head {
                    return Err(Error::State(format!(
                        "{op}: the split message of group rank {s} holds {} bytes, expected at least {head}",
                        m.len(),
                    )));
                }
                // Every rank's own flags count too: the decision to skip the completion must be the same
                // everywhere.
                all_eager &= flags & ALL_EAGER != 0;
                all_matrix &= flags & MATRIX != 0;
                let eager = flags & EAGER != 0;
                if eager {
                    inline[s] = Some(head);
                }
                let matrix = flags & MATRIX != 0;
                for k in 0..ne {
                    let (t, i) = p.ex.entry(s, me, k);
                    counts[i] = if matrix {
                        h.split_entry(m, t)
                    } else {
                        word_at(m, h.counts + k)
                    };
                    // An eager sender's chunks are read from its message (its source rows are not sent).
                    if !eager {
                        src_rows[i] = word_at(m, h.rows + k);
                    }
                }
            }
            let (major, minor, _) = p.ex.recv_shape();
            // This rank's own receive first (its error wins), then, when the messages carry everyone's receive
            // arguments, every other rank's, the same way on every rank.
            plan::recv_layout_into(counts, major, minor, p.align, layout)?;
            check_fits(op, layout, out.size(0), counts)?;
            if all_matrix && all_eager {
                if let Some(r) = first_bad_receive(group, &p.ex, me, recv, both) {
                    return Err(group.rejected(op, r)?);
                }
            }
            plan::pull_list_into(&p.ex, me, counts, src_rows, layout, transfers)?;
            transfers.retain(|t| inline[t.peer].is_none());
            let dst = match mem {
                Some(m) => m.out,
                None => out.contiguous_bytes(op, "out")?,
            };
            let longest = eager_plan(
                op,
                &p,
                me,
                counts,
                layout,
                inline,
                recv,
                tr,
                dst,
                eager_chunks,
                eager_runs,
            )?;
            stage.resize(longest, 0);
            both.clear();
            both.extend_from_slice(counts);
            both.extend_from_slice(&layout.offsets);
            // Kept for the next call with these arguments (valid once this one completes).
            if hit {
                heads.clear();
                for t in 0..w {
                    let m = recv.get(t);
                    let head = Head::of(ne, n, flags_of(m)).bytes;
                    heads.extend_from_slice(m.get(..head).unwrap_or_default());
                }
                recv_ends.clone_from(&recv.ends);
            }
            Ok(())
        })()
    };
    let outcome = received.and_then(|()| {
        let dst = match mem {
            Some(m) => m.out,
            None => out.contiguous_bytes(op, "out")?,
        };
        let rb = p.row_bytes;
        let data = &recv.data[..];
        let bytes_at = |at: usize, len: usize| {
            data.get(at..at + len).ok_or_else(|| {
                Error::State(format!(
                    "{op}: an eager chunk lies outside the received messages"
                ))
            })
        };
        // Eager chunks, by runs contiguous in `out` ([`eager_plan`]).
        let mut k = 0;
        for &(d, end) in eager_runs.iter() {
            if let [(_, _, from, bytes)] = eager_chunks[k..end] {
                sh.put(d, bytes_at(from, bytes)?, sh.my_pe())?;
            } else {
                let st = stage.get_mut(..d.len()).ok_or_else(|| {
                    Error::State(format!("{op}: an eager run is longer than its stage"))
                })?;
                let mut at = 0;
                for &(_, _, from, bytes) in &eager_chunks[k..end] {
                    copy_bytes(&mut st[at..at + bytes], bytes_at(from, bytes)?);
                    at += bytes;
                }
                sh.put(d, st, sh.my_pe())?;
            }
            k = end;
        }
        // The others (the pull list holds only those of senders that did not ship them, this rank's own too when
        // they did not fit).
        let streamed = io::streamed(sh, transfers.iter().map(|t| t.rows * rb).sum());
        for t in transfers.iter() {
            let src = input_bytes()?;
            let bytes = t.rows * rb;
            let s = src.slice(t.src_row * rb..t.src_row * rb + bytes)?;
            let d = dst.slice(t.dst_row * rb..t.dst_row * rb + bytes)?;
            io::pull(sh, s, group.global(t.peer)?, d, streamed)?;
        }
        match mem.and_then(|m| m.oso).filter(|s| s.len() == both.len()) {
            Some(s) => sh.put(s, both, sh.my_pe()),
            None => io::write_i64s(sh, oso, both, sh.my_pe()),
        }
    });
    // The split vectors' allocations serve the next call.
    (*split_counts, *split_rows) = (p.counts, p.src_rows);
    let done = if all_matrix && all_eager {
        // Every rank judged every receive above; nobody reads a peer's input: no completion exchange.
        outcome
    } else {
        complete(sh, group, op, all_eager, outcome, out, send, recv)
    };
    if done.is_ok() && hit {
        if !same {
            (*cached_all_eager, *cached_all_matrix) = (all_eager, all_matrix);
        }
        *cached_received = true;
    }
    done
}

/// Copy `s` into `d` (the same length): chunks of at most 16 bytes with two overlapping fixed-size moves
/// ([`copy_small`]) instead of a call to `memcpy` (the small all-to-alls gather many chunks of a few bytes).
#[inline]
fn copy_bytes(d: &mut [u8], s: &[u8]) {
    if s.len() <= 16 {
        copy_small(d, s);
    } else {
        d.copy_from_slice(s);
    }
}

/// [`copy_bytes`] of at most 16 bytes.
fn copy_small(d: &mut [u8], s: &[u8]) {
    let n = s.len();
    if d.len() != n {
        return d.copy_from_slice(s);
    }
    fn two<const K: usize>(d: &mut [u8], s: &[u8], n: usize) {
        d[..K].copy_from_slice(&s[..K]);
        d[n - K..].copy_from_slice(&s[n - K..]);
    }
    match n {
        0 => {}
        1 => d[0] = s[0],
        2..=3 => two::<2>(d, s, n),
        4..=7 => two::<4>(d, s, n),
        8..=16 => two::<8>(d, s, n),
        _ => d.copy_from_slice(s),
    }
}

/// Input bytes read with one get instead of one get per chunk, per get saved ([`build_split_messages`]).
const SPAN_PER_GET: usize = 512;

/// Largest eager chunk (bytes) that is gathered with its neighbours in `out` into one put: a put costs more
/// than a copy of this many bytes, not so a larger one.
const GATHER_CHUNK: usize = 256;

/// The eager chunks (`inline`: where each sender's chunks start in its message) by destination in `out`, and
/// their runs: chunks that follow each other in `out` and are each at most [`GATHER_CHUNK`] bytes form one run
/// (one put of their bytes gathered), any other chunk a run of its own. Chunks of one sender that follow each
/// other both in its message and in `out` are one chunk. A chunk's position is its byte in `recv.data` (an
/// error when it runs past its sender's message); a run's, its bytes of `dst` (`out`). Returns the length of the
/// longest run of several chunks (the stage they are gathered in).
#[allow(clippy::too_many_arguments)]
fn eager_plan(
    op: &str,
    p: &Prepared,
    me: usize,
    counts: &[i64],
    layout: &plan::RecvLayout,
    inline: &[Option<usize>],
    recv: &Messages,
    tr: &[usize],
    dst: xpushmem::SymSlice<u8>,
    chunks: &mut Vec<(usize, usize, usize, usize)>,
    runs: &mut Vec<(xpushmem::SymSlice<u8>, usize)>,
) -> Result<usize> {
    let rb = p.row_bytes;
    chunks.clear();
    runs.clear();
    for (s, at) in inline.iter().enumerate() {
        let Some(at) = *at else { continue };
        // The sender's message in `recv.data`.
        let t = tr[s];
        let start = t
            .checked_sub(1)
            .map_or(0, |u| recv.ends.get(u).copied().unwrap_or(0));
        let end = recv.ends.get(t).copied().unwrap_or(start);
        let mut from = start + at;
        for k in 0..p.ex.ne {
            let (_, i) = p.ex.entry(s, me, k);
            let (to, bytes) = (layout.offsets[i] as usize * rb, counts[i] as usize * rb);
            if bytes == 0 {
                continue;
            }
            if from + bytes > end {
                return Err(Error::State(format!(
                    "{op}: the eager chunks of group rank {s} are shorter than its counts"
                )));
            }
            match chunks.last_mut() {
                Some((t, s0, f, l)) if *s0 == s && *f + *l == from && *t + *l == to => *l += bytes,
                _ => chunks.push((to, s, from, bytes)),
            }
            from += bytes;
        }
    }
    chunks.sort_unstable_by_key(|c| c.0);
    let mut longest = 0;
    // The open run: (first byte in `out`, bytes).
    let mut open: Option<(usize, usize)> = None;
    for (k, &(to, _, _, bytes)) in chunks.iter().enumerate() {
        match &mut open {
            Some((t, l))
                if *t + *l == to && bytes <= GATHER_CHUNK && chunks[k - 1].3 <= GATHER_CHUNK =>
            {
                *l += bytes;
                longest = longest.max(*l);
            }
            o => {
                if let Some((t, l)) = o.replace((to, bytes)) {
                    runs.push((dst.slice(t..t + l)?, k));
                }
            }
        }
    }
    if let Some((t, l)) = open {
        runs.push((dst.slice(t..t + l)?, chunks.len()));
    }
    Ok(longest)
}

/// The first rank other than `me` (in team rank order) whose receive fails, judged from the receive arguments and
/// split vectors every split message carries ([`MATRIX`]): the same verdict on every rank whose own receive passed
/// (the caller judges its own first, with its own arguments).
fn first_bad_receive(
    group: &Group,
    ex: &Exchange,
    me: usize,
    recv: &Messages,
    counts: &mut Vec<i64>,
) -> Option<usize> {
    let (w, ne, n) = (group.size(), ex.ne, ex.nsplits());
    let tr = group.team_ranks();
    let (major, minor, _) = ex.recv_shape();
    // Rank `s`'s message and its head (every one carries the receive arguments and the split vector, where its
    // flags say).
    let msg = |s: usize| {
        let m = recv.get(tr[s]);
        (m, Head::of(ne, n, flags_of(m)))
    };
    counts.clear();
    counts.resize(n, 0);
    for &r in group.group_ranks().iter().filter(|&&r| r != me) {
        for s in 0..w {
            let (m, h) = msg(s);
            for k in 0..ne {
                let (t, i) = ex.entry(s, r, k);
                counts[i] = h.split_entry(m, t);
            }
        }
        let (m, h) = msg(r);
        let (rows, a) = h.recv_args(m);
        // The same verdict as `recv_layout` + `check_fits` on that rank: a bad count or too few rows.
        if !plan::recv_written_end(counts, major, minor, a).is_ok_and(|end| fits(end, rows)) {
            return Some(r);
        }
    }
    None
}

/// The completion exchange of an all-to-all (module docs, step 4): the verdict on every rank's receive, and the
/// point after which no peer reads this rank's input. Skipped when checks are off and nobody reads a peer.
#[allow(clippy::too_many_arguments)]
fn complete(
    sh: &Shmem,
    group: &Group,
    op: &'static str,
    all_eager: bool,
    outcome: Result<()>,
    out: &TensorView,
    send: &mut Messages,
    recv: &mut Messages,
) -> Result<()> {
    if all_eager && !sh.config().check_symmetry {
        return outcome;
    }
    let ours = || format!("out {}", out.describe());
    send.clear();
    for _ in 0..group.size() {
        send.close();
    }
    group.exchange(sh, op, outcome.err(), 0, send, recv, &ours)
}

/// Whether a receive whose last written row ends at `written_end` fits an `out` of `rows` rows.
fn fits(written_end: i64, rows: usize) -> bool {
    written_end as u128 <= rows as u128
}

/// Check that every received chunk lies inside an `out` of `rows` rows.
fn check_fits(op: &str, layout: &plan::RecvLayout, rows: usize, counts: &[i64]) -> Result<()> {
    if !fits(layout.written_end, rows) {
        return Err(Error::OutOfBounds {
            what: "output rows",
            start: 0,
            len: layout.written_end as usize,
            limit: rows,
            context: format!(
                "{op}: the received splits need {} rows of out, which has {rows} (row 0 of out_splits_offsets: {counts:?})",
                layout.written_end,
            ),
        });
    }
    Ok(())
}

/// The split message of every rank (indexed by team rank): flags, counts (without `matrix`), source rows, with
/// `matrix` this rank's receive arguments (rows of `out`, alignment) and whole split vector (which holds the
/// counts), and the chunks when they fit in `eager` bytes (and the message in `cap`). This rank's own message
/// carries its own chunks the same way (it never leaves this PE: one read of the input and a put per run on the
/// receive side cost less than a heap-to-heap copy per chunk). `send` holds the messages built for this split
/// vector by an earlier call when `reuse` (the views and the split vector are that call's): only their chunks
/// are read again from the input, at the places `kept` lists; otherwise both are built anew.
#[allow(clippy::too_many_arguments)]
fn build_split_messages(
    sh: &Shmem,
    group: &Group,
    me: usize,
    p: &Prepared,
    src: xpushmem::SymSlice<u8>,
    out: &TensorView,
    cap: usize,
    eager: usize,
    matrix: bool,
    kept: Kept<'_>,
    reuse: bool,
    send: &mut Messages,
) -> Result<()> {
    let w = group.size();
    let Kept { packs, span, stage } = kept;
    if reuse && send.ends.len() == w {
        let short =
            || Error::State("all-to-all: a kept split message is shorter than its chunks".into());
        if let Some((start, s)) = *span {
            // One get of the input bytes the chunks lie in, then a copy each.
            if stage.len() != s.len() {
                stage.resize(s.len(), 0);
            }
            sh.get(stage, s, sh.my_pe())?;
            for &(from, s, at) in packs.iter() {
                let d = send.data.get_mut(at..at + s.len()).ok_or_else(short)?;
                let from = from - start;
                copy_bytes(d, stage.get(from..from + s.len()).ok_or_else(short)?);
            }
        } else {
            for &(_, s, at) in packs.iter() {
                let d = send.data.get_mut(at..at + s.len()).ok_or_else(short)?;
                sh.get(d, s, sh.my_pe())?;
            }
        }
        return Ok(());
    }
    send.clear();
    packs.clear();
    let ne = p.ex.ne;
    let rb = p.row_bytes;
    let src_of = |peer: usize| (0..ne).map(move |k| p.ex.entry(me, peer, k).0);
    // With the whole split vector: the receive arguments in the flags word and 4-byte entries when they fit.
    let narrow = if matrix {
        narrow_args(out.size(0), p.align, &p.counts)
    } else {
        None
    };
    let matrix_flag = (u64::from(matrix) * MATRIX) | narrow.unwrap_or(0);
    // The flags of an eager message of `b` chunk bytes beyond the others' (it has no source rows; [`PAD`]).
    let eager_flags = |b: usize| EAGER | pad_flag(ne, p.ex.nsplits(), matrix_flag | EAGER, b, cap);
    let bytes_to = |peer: usize| -> usize { src_of(peer).map(|t| p.counts[t] as usize * rb).sum() };
    let is_eager = |peer: usize| {
        let b = bytes_to(peer);
        b <= eager && Head::of(ne, p.ex.nsplits(), matrix_flag | eager_flags(b)).bytes + b <= cap
    };
    let all = (0..w).all(|peer| peer == me || is_eager(peer));
    // The receive arguments and split vector (with `matrix`): the same bytes in every message, written into the
    // first one (where they lie in `send.data`), then copied.
    let mut common: Option<(usize, usize)> = None;
    // Chunks that follow each other in the input are one copy into the message.
    let pack = |from: usize, len: usize, send: &mut Messages, packs: &mut Vec<_>| -> Result<()> {
        let at = send.data.len();
        send.data.resize(at + len, 0);
        let s = src.slice(from..from + len)?;
        sh.get(&mut send.data[at..], s, sh.my_pe())?;
        packs.push((from, s, at));
        Ok(())
    };
    for &peer in group.group_ranks() {
        let eager_peer = is_eager(peer);
        let kind = if eager_peer {
            eager_flags(bytes_to(peer))
        } else {
            0
        };
        let flags = kind | (u64::from(all) * ALL_EAGER) | matrix_flag;
        let msg_at = send.data.len();
        send.data.extend_from_slice(&flags.to_le_bytes());
        if !matrix {
            for t in src_of(peer) {
                send.data.extend_from_slice(&p.counts[t].to_le_bytes());
            }
        }
        if !eager_peer {
            for t in src_of(peer) {
                send.data.extend_from_slice(&p.src_rows[t].to_le_bytes());
            }
        }
        if matrix {
            match common {
                Some(r) => send.data.extend_from_within(r.0..r.1),
                None => {
                    let at = send.data.len();
                    push_matrix(
                        &mut send.data,
                        out.size(0),
                        p.align,
                        &p.counts,
                        narrow.is_some(),
                    );
                    common = Some((at, send.data.len()));
                }
            }
        }
        if flags & PAD != 0 {
            send.data
                .resize(msg_at + Head::of(ne, p.ex.nsplits(), flags).bytes, 0);
        }
        if eager_peer {
            let mut open: Option<(usize, usize)> = None;
            for t in src_of(peer) {
                let (start, bytes) = (p.src_rows[t] as usize * rb, p.counts[t] as usize * rb);
                if bytes == 0 {
                    continue;
                }
                match &mut open {
                    Some((s0, l)) if *s0 + *l == start => *l += bytes,
                    o => {
                        if let Some((s0, l)) = o.replace((start, bytes)) {
                            pack(s0, l, send, packs)?;
                        }
                    }
                }
            }
            if let Some((s0, l)) = open {
                pack(s0, l, send, packs)?;
            }
        }
        send.close();
    }
    // Several small chunks close together in the input: the next call with this split vector reads them with one
    // get (a get costs about as much as a copy of [`SPAN_PER_GET`] bytes, and these bytes are copied twice).
    let start = packs.iter().map(|p| p.0).min().unwrap_or(0);
    let end = packs.iter().map(|p| p.0 + p.1.len()).max().unwrap_or(0);
    let sum: usize = packs.iter().map(|p| p.1.len()).sum();
    *span = None;
    if packs.len() > 1
        && end - start <= sum + GATHER_CHUNK
        && end - start <= SPAN_PER_GET * (packs.len() - 1)
    {
        *span = Some((start, src.slice(start..end)?));
    }
    Ok(())
}

/// Where the chunks of the split messages kept in the cache come from ([`ArgCache::packs`], `pack_span`,
/// `pack_stage`).
struct Kept<'a> {
    packs: &'a mut Vec<(usize, xpushmem::SymSlice<u8>, usize)>,
    span: &'a mut Option<(usize, xpushmem::SymSlice<u8>)>,
    stage: &'a mut Vec<u8>,
}

/// The agreement protocol of the v-ops, for split vectors too large for a message (module docs).
#[allow(clippy::too_many_arguments)]
fn run_agreed(
    sh: &Shmem,
    group: &Group,
    op: &'static str,
    me: usize,
    dig: u64,
    prep: Result<Prepared>,
    input: &TensorView,
    out: &TensorView,
    oso: &TensorView,
) -> Result<()> {
    let w = group.size();
    let ours = || {
        format!(
            "input {}; out_splits_offsets {}",
            input.describe(),
            oso.describe()
        )
    };
    group.agree(sh, op, prep.as_ref().err().cloned(), dig, &ours)?;
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
        check_fits(op, &layout, out.size(0), counts)?;
        let transfers = plan::pull_list(&p.ex, me, counts, src_rows, &layout)?;
        Ok((layout, transfers))
    })();
    let outcome = received.and_then(|(layout, transfers)| {
        let src = input.contiguous_bytes(op, "input")?;
        let dst = out.contiguous_bytes(op, "out")?;
        let rb = p.row_bytes;
        let streamed = io::streamed(sh, transfers.iter().map(|t| t.rows * rb).sum());
        for t in transfers {
            let bytes = t.rows * rb;
            let s = src.slice(t.src_row * rb..t.src_row * rb + bytes)?;
            let d = dst.slice(t.dst_row * rb..t.dst_row * rb + bytes)?;
            io::pull(sh, s, group.global(t.peer)?, d, streamed)?;
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

/// `nvshmem_all_to_all`'s argument checks (both paths): the bytes each rank sends to each other.
pub(crate) fn all_to_all_chunk(input: &TensorView, out: &TensorView, w: usize) -> Result<usize> {
    const OP: &str = "nvshmem_all_to_all";
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
    let prep = all_to_all_chunk(input, out, w);
    let mut words = vec![Op::AllToAll as u64, w as u64, group.id()];
    input.digest_words(&mut words);
    let dig = plan::digest(&words);
    let ours = || format!("input {}", input.describe());
    let cap = group.exchange_capacity(sh);
    if cap == 0 {
        // Too many ranks for the exchange area: the agreement, then every rank pulls its chunks.
        group.agree(sh, OP, prep.as_ref().err().cloned(), dig, &ours)?;
        let chunk = prep?;
        let r = pull_equal(sh, group, me, chunk, input, out, &|_| true);
        return group.agree(sh, OP, r.err(), 0, &|| String::new());
    }
    // The chunks travel inside the exchange when small (the chunk size enters the digest through the input).
    let eager = |chunk: usize| chunk <= eager_limit(sh, cap) && chunk <= cap;
    let mut scratch = group.scratch();
    let crate::group::Scratch { send, recv, .. } = &mut *scratch;
    send.clear();
    let tr = group.team_ranks();
    let built = prep.as_ref().map_err(Clone::clone).and_then(|&chunk| {
        if !eager(chunk) {
            for _ in 0..w {
                send.close();
            }
            return Ok(());
        }
        let src = input.contiguous_bytes(OP, "input")?;
        let mut by_team = vec![0usize; w];
        for (g, &t) in tr.iter().enumerate() {
            by_team[t] = g;
        }
        for &peer in &by_team {
            if peer != me {
                let at = send.data.len();
                send.data.resize(at + chunk, 0);
                let s = src.slice(peer * chunk..(peer + 1) * chunk)?;
                sh.get(&mut send.data[at..], s, sh.my_pe())?;
            }
            send.close();
        }
        Ok(())
    });
    let local = prep.as_ref().err().cloned().or(built.err());
    if local.is_some() {
        send.clear();
    }
    group.exchange(sh, OP, local, dig, send, recv, &ours)?;
    let chunk = prep?;
    let inline = eager(chunk);
    let r = (|| {
        if inline {
            let dst = out.contiguous_bytes(OP, "out")?;
            for peer in (0..w).filter(|&p| p != me) {
                let m = recv.get(tr[peer]);
                if m.len() != chunk {
                    return Err(Error::State(format!(
                        "{OP}: the message of group rank {peer} holds {} bytes, expected {chunk}",
                        m.len()
                    )));
                }
                sh.put(dst.slice(peer * chunk..(peer + 1) * chunk)?, m, sh.my_pe())?;
            }
        }
        pull_equal(sh, group, me, chunk, input, out, &|peer| {
            !inline || peer == me
        })
    })();
    complete(sh, group, OP, inline, r, out, send, recv)
}

/// The chunks of an equal-split all-to-all that `pull` selects (by source group rank), read from their senders.
fn pull_equal(
    sh: &Shmem,
    group: &Group,
    me: usize,
    chunk: usize,
    input: &TensorView,
    out: &TensorView,
    pull: &dyn Fn(usize) -> bool,
) -> Result<()> {
    let w = group.size();
    let src = input.contiguous_bytes("nvshmem_all_to_all", "input")?;
    let dst = out.contiguous_bytes("nvshmem_all_to_all", "out")?;
    let mut staging = Vec::new();
    for k in 0..w {
        let peer = (me + k) % w;
        if !pull(peer) {
            continue;
        }
        let s = src.slice(me * chunk..(me + 1) * chunk)?;
        let d = dst.slice(peer * chunk..(peer + 1) * chunk)?;
        io::copy(sh, s, group.global(peer)?, d, sh.my_pe(), &mut staging)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The small-chunk copy moves exactly the bytes `copy_from_slice` moves, at every length it handles and
    /// past them, and leaves the bytes around the destination alone.
    #[test]
    fn copy_bytes_matches_copy_from_slice() {
        let src: Vec<u8> = (0..40u8)
            .map(|i| i.wrapping_mul(37).wrapping_add(11))
            .collect();
        for n in 0..=33 {
            for at in [0, 3] {
                let mut got = vec![0xEEu8; 40];
                let mut want = got.clone();
                copy_bytes(&mut got[at..at + n], &src[1..1 + n]);
                want[at..at + n].copy_from_slice(&src[1..1 + n]);
                assert_eq!(got, want, "{n} bytes at {at}");
            }
        }
    }

    /// A head laid out as `build_split_messages` lays out an eager message's (flags word, receive arguments,
    /// split vector), read back through `Head`.
    fn matrix_head(rows: usize, align: i64, counts: &[i64]) -> (Vec<u8>, Head) {
        let narrow = narrow_args(rows, align, counts);
        let flags = MATRIX | EAGER | narrow.unwrap_or(0);
        let mut m = flags.to_le_bytes().to_vec();
        push_matrix(&mut m, rows, align, counts, narrow.is_some());
        let h = Head::of(1, counts.len(), flags_of(&m));
        (m, h)
    }

    /// A padded head ends where its message's payload reaches a cache line of the exchange's region, within 64
    /// bytes of the unpadded head's end, in every form.
    #[test]
    fn padded_heads_end_on_a_line() {
        let off = Shmem::TEAM_EXCHANGE_PAYLOAD_OFFSET;
        for n in 1..40 {
            for ne in [1, 4] {
                for f in [EAGER | MATRIX, EAGER | MATRIX | NARROW, EAGER, 0] {
                    let plain = Head::of(ne, n, f).bytes;
                    let padded = Head::of(ne, n, f | PAD).bytes;
                    assert_eq!((off + padded) % 64, 0, "n {n}, ne {ne}, flags {f}");
                    assert!(
                        padded >= plain && padded < plain + 64,
                        "n {n}, ne {ne}, flags {f}"
                    );
                }
            }
        }
    }

    /// Below [`PAD_FROM`] bytes a head is padded only for a line's worth of chunks or more and where that adds no
    /// cache line, and then its chunks start on a line; from it, always. The cases of `all_to_all_vdev` at 2 PEs
    /// (two 4-byte entries after the flags word, payload from byte 16 of the flag's line), worked out by hand: 8 and
    /// 32 bytes fit the flag's line unpadded (40 / 64 bytes with flag and header), padded they would not; 64 and 128
    /// bytes take 2 and 3 lines either way; 200 bytes take 4 lines unpadded, 5 padded.
    #[test]
    fn short_chunks_are_padded_where_no_line_is_added() {
        let vdev = EAGER | MATRIX | NARROW;
        for (b, pad) in [(8, 0), (32, 0), (64, PAD), (128, PAD), (200, 0), (256, PAD)] {
            assert_eq!(pad_flag(1, 2, vdev, b, usize::MAX), pad, "{b} bytes");
        }
        // 64 bytes padded need a message of 112 bytes.
        assert_eq!(pad_flag(1, 2, vdev, 64, 112), PAD);
        assert_eq!(pad_flag(1, 2, vdev, 64, 111), 0);
        let off = Shmem::TEAM_EXCHANGE_PAYLOAD_OFFSET;
        for n in 1..24 {
            for ne in [1, 4] {
                for f in [EAGER | MATRIX, vdev, EAGER] {
                    for b in 1..2 * PAD_FROM {
                        let end = |f: u64| off + Head::of(ne, n, f).bytes + b;
                        let got = pad_flag(ne, n, f, b, usize::MAX);
                        if got == PAD {
                            assert_eq!((off + Head::of(ne, n, f | PAD).bytes) % 64, 0);
                        }
                        if b < PAD_FROM {
                            assert_eq!(
                                got == PAD,
                                b >= 64 && end(f | PAD).div_ceil(64) == end(f).div_ceil(64),
                                "n {n}, ne {ne}, flags {f}, {b} bytes"
                            );
                        } else {
                            assert_eq!(got, PAD);
                        }
                    }
                }
            }
        }
    }

    /// The narrow form holds exactly the values that fit its fields (alignment below 2^24, rows and entries below
    /// 2^32), and both forms give back the receive arguments and every entry they were built from; the head's
    /// length is the bytes `push_matrix` wrote (an odd count padded to a whole word).
    #[test]
    fn split_heads_round_trip_in_both_forms() {
        let big = 1i64 << 32;
        let cases: [(usize, i64, Vec<i64>, bool); 6] = [
            (40, 16, vec![0, 3, 7], true),
            (usize::MAX >> 32, (1 << 24) - 1, vec![big - 1, 0], true),
            (40, 1 << 24, vec![1, 2], false),
            (1 << 32, 1, vec![1, 2], false),
            (40, 1, vec![1, big, 2], false),
            (40, 2, vec![], true),
        ];
        for (rows, align, counts, narrow) in cases {
            let what = format!("rows {rows}, align {align}, counts {counts:?}");
            assert_eq!(
                narrow_args(rows, align, &counts).is_some(),
                narrow,
                "{what}"
            );
            let (m, h) = matrix_head(rows, align, &counts);
            assert_eq!(h.narrow, narrow, "{what}");
            assert_eq!(h.recv_args(&m), (rows, align), "{what}");
            let got: Vec<i64> = (0..counts.len()).map(|t| h.split_entry(&m, t)).collect();
            assert_eq!(got, counts, "{what}");
            // Narrow: 4 bytes an entry, an odd count padded to a whole word; wide: the two arguments, then 8
            // bytes an entry. The head's length is the message's.
            let entries = if narrow {
                8 * counts.len().div_ceil(2)
            } else {
                16 + 8 * counts.len()
            };
            assert_eq!(m.len(), 8 + entries, "{what}");
            assert_eq!(h.bytes, m.len(), "{what}");
        }
    }
}
