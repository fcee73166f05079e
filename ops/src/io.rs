//! Data movement helpers over the runtime's put/get: gather and scatter of strided views, staged copies between
//! symmetric regions, and int64 vectors.

use crate::dtype::DType;
use crate::tensor::TensorView;
use xpushmem::{Error, Result, Shmem, SymSlice};

/// Largest staged copy (bytes) moved per get/put pair.
pub(crate) const STAGE: usize = 1 << 20;

/// The view's elements on `pe`, gathered in row-major order.
pub(crate) fn read_view(sh: &Shmem, v: &TensorView, pe: usize) -> Result<Vec<u8>> {
    let mut out = vec![0u8; v.nbytes()];
    let mut at = 0;
    for r in v.runs() {
        sh.get(
            &mut out[at..at + r.len],
            v.buf().slice(r.start..r.start + r.len)?,
            pe,
        )?;
        at += r.len;
    }
    Ok(out)
}

/// Scatter `data` (row-major, `nbytes()` long) into the view on `pe`.
pub(crate) fn write_view(sh: &Shmem, v: &TensorView, data: &[u8], pe: usize) -> Result<()> {
    debug_assert_eq!(data.len(), v.nbytes());
    let mut at = 0;
    for r in v.runs() {
        sh.put(
            v.buf().slice(r.start..r.start + r.len)?,
            &data[at..at + r.len],
            pe,
        )?;
        at += r.len;
    }
    Ok(())
}

/// Read `src` on `src_pe` into this PE's `dst` (the same length), directly between the heaps. `streamed`: the copy
/// is one of a call whose copies into this PE together leave its share of the node's caches ([`streamed`]), made
/// with [`Shmem::get_sym_streamed`].
pub(crate) fn pull(
    sh: &Shmem,
    src: SymSlice<u8>,
    src_pe: usize,
    dst: SymSlice<u8>,
    streamed: bool,
) -> Result<()> {
    if streamed {
        sh.get_sym_streamed(dst, src, src_pe)
    } else {
        sh.get_sym(dst, src, src_pe)
    }
}

/// Whether a call whose copies bring `bytes` into this PE should make them with [`Shmem::get_sym_streamed`]: at
/// least [`Shmem::streamed_call_from`] (the 2-D all-to-all's per-expert chunks stay below the per-copy threshold
/// while the whole call leaves the caches).
pub(crate) fn streamed(sh: &Shmem, bytes: usize) -> bool {
    bytes > 0 && sh.streamed_call_from().is_some_and(|from| bytes >= from)
}

/// Copy `src` on `src_pe` to `dst` on `dst_pe` (same length): directly between the heaps when one side is this
/// PE (one copy, no staging), else through a bounded staging buffer.
pub(crate) fn copy(
    sh: &Shmem,
    src: SymSlice<u8>,
    src_pe: usize,
    dst: SymSlice<u8>,
    dst_pe: usize,
    staging: &mut Vec<u8>,
) -> Result<()> {
    debug_assert_eq!(src.len(), dst.len());
    if dst_pe == sh.my_pe() {
        return sh.get_sym(dst, src, src_pe);
    }
    if src_pe == sh.my_pe() {
        return sh.put_sym(dst, src, dst_pe);
    }
    let n = src.len().min(STAGE);
    if staging.len() < n {
        staging.resize(n, 0);
    }
    for (start, len) in crate::plan::chunks(src.len(), STAGE) {
        let buf = &mut staging[..len];
        sh.get(buf, src.slice(start..start + len)?, src_pe)?;
        sh.put(dst.slice(start..start + len)?, buf, dst_pe)?;
    }
    Ok(())
}

/// The view's bytes as int64 elements when it is contiguous and 8-byte aligned in the heap (the usual splits
/// tensor): one get or put moves it, without gathering runs through byte buffers.
fn i64_slice(v: &TensorView) -> Option<SymSlice<i64>> {
    if v.dtype().size() != 8 || !v.is_contiguous() {
        return None;
    }
    v.contiguous_bytes("", "view").ok()?.cast::<i64>().ok()
}

/// The int64 elements of a view on `pe`.
pub(crate) fn read_i64s(sh: &Shmem, v: &TensorView, pe: usize) -> Result<Vec<i64>> {
    let mut out = Vec::new();
    read_i64s_into(sh, v, pe, &mut out)?;
    Ok(out)
}

/// [`read_i64s`] into `out` (cleared first; its allocation is reused).
pub(crate) fn read_i64s_into(
    sh: &Shmem,
    v: &TensorView,
    pe: usize,
    out: &mut Vec<i64>,
) -> Result<()> {
    out.clear();
    if let Some(s) = i64_slice(v) {
        out.resize(s.len(), 0);
        return sh.get(out, s, pe);
    }
    out.extend(
        read_view(sh, v, pe)?
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])),
    );
    Ok(())
}

/// Write int64 values into a view on `pe`.
pub(crate) fn write_i64s(sh: &Shmem, v: &TensorView, vals: &[i64], pe: usize) -> Result<()> {
    if let Some(s) = i64_slice(v) {
        if s.len() == vals.len() {
            return sh.put(s, vals, pe);
        }
    }
    let bytes: Vec<u8> = vals.iter().flat_map(|x| x.to_le_bytes()).collect();
    write_view(sh, v, &bytes, pe)
}

/// Check that a splits/offsets tensor is int64 of the given dimensionality.
pub(crate) fn check_i64(op: &str, name: &'static str, v: &TensorView, dim: usize) -> Result<()> {
    if v.dtype() != DType::I64 {
        return Err(Error::InvalidArgument {
            name,
            value: v.describe(),
            reason: format!("{op}: splits and offsets must be int64 (torch.long)"),
        });
    }
    if v.dim() != dim {
        return Err(Error::InvalidArgument {
            name,
            value: v.describe(),
            reason: format!("{op}: must be {dim}-dimensional"),
        });
    }
    Ok(())
}

/// Check that a view is contiguous.
pub(crate) fn check_contiguous(op: &str, name: &'static str, v: &TensorView) -> Result<()> {
    if !v.is_contiguous() {
        return Err(Error::InvalidArgument {
            name,
            value: v.describe(),
            reason: format!("{op}: must be contiguous"),
        });
    }
    Ok(())
}

/// Check that two views do not share bytes.
pub(crate) fn check_disjoint(
    op: &str,
    a_name: &'static str,
    a: &TensorView,
    b_name: &str,
    b: &TensorView,
) -> Result<()> {
    if a.overlaps(b) {
        return Err(Error::InvalidArgument {
            name: a_name,
            value: a.describe(),
            reason: format!("{op}: overlaps {b_name} ({})", b.describe()),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The int64 helpers give the same elements whether the view takes the one-copy path (contiguous) or gathers
    /// runs (strided, or not 8-byte aligned in the heap), against the values written element by element.
    #[test]
    fn i64_views_read_and_write_the_same_elements_on_every_path() -> Result<()> {
        let sh = xpushmem::init_single()?;
        let buf = sh.calloc::<i64>(16)?;
        let vals: Vec<i64> = (0..16).map(|i| 1000 - 37 * i).collect();
        sh.put(buf, &vals, 0)?;
        let bytes = crate::tensor::sym_bytes(&sh, buf)?;
        let dense = TensorView::new(bytes, DType::I64, &[2, 4], &[4, 1], 3)?;
        assert!(i64_slice(&dense).is_some());
        let strided = TensorView::new(bytes, DType::I64, &[2, 3], &[8, 2], 1)?;
        assert!(i64_slice(&strided).is_none());
        let mut out = vec![99i64; 3];
        read_i64s_into(&sh, &dense, 0, &mut out)?;
        assert_eq!(out, vals[3..11]);
        let got = read_i64s(&sh, &strided, 0)?;
        assert_eq!(
            got,
            [vals[1], vals[3], vals[5], vals[9], vals[11], vals[13]]
        );
        // Writes: through each path, then read back element by element.
        write_i64s(&sh, &dense, &[-1, -2, -3, -4, -5, -6, -7, -8], 0)?;
        write_i64s(&sh, &strided, &[11, 12, 13, 14, 15, 16], 0)?;
        let mut all = vec![0i64; 16];
        sh.get(&mut all, buf, 0)?;
        let mut want = vals.clone();
        want[3..11].copy_from_slice(&[-1, -2, -3, -4, -5, -6, -7, -8]);
        for (k, i) in [1, 3, 5, 9, 11, 13].into_iter().enumerate() {
            want[i] = 11 + k as i64;
        }
        assert_eq!(all, want);
        sh.finalize()
    }
}
