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

/// The int64 elements of a view on `pe`.
pub(crate) fn read_i64s(sh: &Shmem, v: &TensorView, pe: usize) -> Result<Vec<i64>> {
    Ok(read_view(sh, v, pe)?
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect())
}

/// Write int64 values into a view on `pe`.
pub(crate) fn write_i64s(sh: &Shmem, v: &TensorView, vals: &[i64], pe: usize) -> Result<()> {
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
