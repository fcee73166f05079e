//! `tile_reduce` and `multi_root_tile_reduce`: sum of a (possibly strided) 2-D tile over the group, delivered to
//! one root per tile.
//!
//! Host path: agree (barrier + argument verdict), then each root pulls the tile from every rank in group-rank
//! order, accumulates in `f32` (float16 and bfloat16 are widened exactly) and stores into its `out_tile` with
//! round-to-nearest-even; then the exit barrier (so no rank changes its input tile while a root still reads it).
//! NVSHMEM's kernel needs NVLS multicast (H100-class NVLink switches); this one needs nothing.

use crate::group::Group;
use crate::io;
use crate::plan::{self, root_slots};
use crate::tensor::TensorView;
use xpushmem::{Error, Result, Shmem};

pub(crate) fn check_op(op: &str, reduce_op: &str) -> Result<()> {
    if reduce_op != "sum" {
        return Err(Error::InvalidArgument {
            name: "reduce_op",
            value: reduce_op.to_string(),
            reason: format!("{op}: only sum is supported for now"),
        });
    }
    Ok(())
}

pub(crate) fn check_2d(op: &str, name: &'static str, v: &TensorView) -> Result<()> {
    if v.dim() != 2 {
        return Err(Error::InvalidArgument {
            name,
            value: v.describe(),
            reason: format!("{op}: Only 2D tensors are supported"),
        });
    }
    if !v.dtype().is_reducible() {
        return Err(Error::InvalidArgument {
            name,
            value: v.describe(),
            reason: format!("{op}: dtype must be float32, float16 or bfloat16"),
        });
    }
    Ok(())
}

/// Sum `tile` over all ranks of the group (each rank's copy of the same view) into `out` on this PE.
fn reduce_into(sh: &Shmem, group: &Group, tile: &TensorView, out: &TensorView) -> Result<()> {
    let dt = tile.dtype();
    let esz = dt.size();
    let mut acc = vec![0f32; tile.numel()];
    for r in 0..group.size() {
        let bytes = io::read_view(sh, tile, group.global(r)?)?;
        for (a, b) in acc.iter_mut().zip(bytes.chunks_exact(esz)) {
            *a += dt.load_f32(b);
        }
    }
    let mut bytes = vec![0u8; out.nbytes()];
    for (a, b) in acc.iter().zip(bytes.chunks_exact_mut(esz)) {
        out.dtype().store_f32(*a, b);
    }
    io::write_view(sh, out, &bytes, sh.my_pe())
}

/// `tile_reduce`'s argument checks (both paths): the root as a group rank.
pub(crate) fn tile_reduce_root(
    in_tile: &TensorView,
    out_tile: &TensorView,
    root: i64,
    w: usize,
    reduce_op: &str,
) -> Result<usize> {
    const OP: &str = "tile_reduce";
    check_op(OP, reduce_op)?;
    check_2d(OP, "in_tile", in_tile)?;
    check_2d(OP, "out_tile", out_tile)?;
    if in_tile.dtype() != out_tile.dtype()
        || in_tile.shape() != out_tile.shape()
        || in_tile.strides() != out_tile.strides()
    {
        return Err(Error::InvalidArgument {
            name: "out_tile",
            value: out_tile.describe(),
            reason: format!(
                "{OP}: in_tile and out_tile must have the same dtype, sizes and strides (in_tile: {})",
                in_tile.describe()
            ),
        });
    }
    if root < 0 || root as u64 >= w as u64 {
        return Err(Error::InvalidPe {
            pe: root,
            n_pes: w,
            context: format!("{OP}: root must be smaller than group size"),
        });
    }
    Ok(root as usize)
}

/// `tile_reduce(in_tile, out_tile, root, group, reduce_op="sum")`: the root's `out_tile` becomes the sum over
/// group ranks of their `in_tile`; other ranks' `out_tile` is untouched. `root` is group-relative.
///
/// Checks (PyTorch's): `reduce_op == "sum"`; both 2-D; same dtype, sizes and strides; dtype float32, float16 or
/// bfloat16; `0 <= root < W`. Tiles may be strided views (e.g. `full[s:2s, s:2s]`). `in_tile` must be the same
/// view on every rank (the root reads it on every rank); `out_tile` is only written locally and may lie anywhere.
pub fn tile_reduce(
    sh: &Shmem,
    group: &Group,
    in_tile: &TensorView,
    out_tile: &TensorView,
    root: i64,
    reduce_op: &str,
) -> Result<()> {
    const OP: &str = "tile_reduce";
    let me = group.rank_for(sh, OP)?;
    let w = group.size();
    let prep = tile_reduce_root(in_tile, out_tile, root, w, reduce_op);
    let mut words = vec![5, w as u64, group.id(), root as u64];
    in_tile.digest_words(&mut words);
    let ours = || {
        format!(
            "root {root}, in_tile {}, out_tile {}",
            in_tile.describe(),
            out_tile.describe()
        )
    };
    group.agree(
        sh,
        OP,
        prep.as_ref().err().cloned(),
        plan::digest(&words),
        &ours,
    )?;
    let root = prep?;
    let r = if me == root {
        reduce_into(sh, group, in_tile, out_tile)
    } else {
        Ok(())
    };
    group.agree(sh, OP, r.err(), 0, &|| String::new())
}

/// `multi_root_tile_reduce(in_tiles, out_tile, roots, group, reduce_op="sum")`: for every `i`, group rank
/// `roots[i]` receives in its `out_tile` the sum over ranks of `in_tiles[i]`. Ranks that are no root take part
/// (their tiles are read) and leave `out_tile` untouched.
///
/// Checks (PyTorch's): sum only; `out_tile` and every `in_tiles[i]` 2-D; `roots.len() == in_tiles.len()`;
/// each root in `[0, W)` ("Invalid root"); a rank at most once ("Each rank can only be a root once"). Beyond
/// PyTorch: each `in_tiles[i]` must have `out_tile`'s dtype and shape (PyTorch silently reads it with
/// `out_tile`'s layout). The `in_tiles` must be the same views on every rank; `out_tile` is written locally only
/// and may differ per rank (PyTorch's test passes each rank its own quadrant).
pub fn multi_root_tile_reduce(
    sh: &Shmem,
    group: &Group,
    in_tiles: &[TensorView],
    out_tile: &TensorView,
    roots: &[i64],
    reduce_op: &str,
) -> Result<()> {
    const OP: &str = "multi_root_tile_reduce";
    let me = group.rank_for(sh, OP)?;
    let w = group.size();
    let prep = (|| {
        check_op(OP, reduce_op)?;
        check_2d(OP, "out_tile", out_tile)?;
        if roots.len() != in_tiles.len() {
            return Err(Error::InvalidArgument {
                name: "roots",
                value: format!("{roots:?}"),
                reason: format!(
                    "{OP}: must have one root per tile ({} in_tiles, {} roots)",
                    in_tiles.len(),
                    roots.len()
                ),
            });
        }
        for t in in_tiles {
            check_2d(OP, "in_tiles", t)?;
            if t.dtype() != out_tile.dtype() || t.shape() != out_tile.shape() {
                return Err(Error::InvalidArgument {
                    name: "in_tiles",
                    value: t.describe(),
                    reason: format!(
                        "{OP}: every in_tile must have out_tile's dtype and sizes (out_tile: {})",
                        out_tile.describe()
                    ),
                });
            }
        }
        root_slots(OP, roots, w)
    })();
    let mut words = vec![6, w as u64, group.id(), roots.len() as u64];
    words.extend(roots.iter().map(|&r| r as u64));
    for t in in_tiles {
        t.digest_words(&mut words);
    }
    let ours = || format!("roots {roots:?}, out_tile {}", out_tile.describe());
    group.agree(
        sh,
        OP,
        prep.as_ref().err().cloned(),
        plan::digest(&words),
        &ours,
    )?;
    let slots = prep?;
    let r = match slots[me] {
        Some(i) => reduce_into(sh, group, &in_tiles[i], out_tile),
        None => Ok(()),
    };
    group.agree(sh, OP, r.err(), 0, &|| String::new())
}
