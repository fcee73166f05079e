//! [`TensorView`]: a typed, strided view of a symmetric allocation, the Rust counterpart of a `torch.Tensor` whose
//! storage lives in the symmetric heap.

use crate::dtype::DType;
use crate::plan;
use xpushmem::{Error, Result, Shmem, SymSlice, Symmetric};

/// A view of a symmetric allocation as a tensor: element type, shape, strides (in elements) and element offset,
/// like a `torch.Tensor` over a symmetric storage. The same view names the same bytes on every PE.
///
/// Construction checks that every element of the view lies inside `buf`.
#[derive(Debug, Clone)]
pub struct TensorView {
    buf: SymSlice<u8>,
    dtype: DType,
    shape: Vec<usize>,
    strides: Vec<usize>,
    offset: usize,
    /// [`TensorView::byte_extent`] and [`TensorView::is_contiguous`], computed once when the view is made (the
    /// ops check them several times per call).
    extent: (usize, usize),
    contiguous: bool,
}

/// Two views are equal when every field is (the derived comparison's meaning). Written out: the all-to-alls
/// compare four views per call with the last call's, and the derived form called `memcmp` for each shape and
/// stride list (a few elements) and compared the fields derived from the others; the scalar fields go first,
/// where views usually differ.
impl PartialEq for TensorView {
    #[inline]
    fn eq(&self, o: &TensorView) -> bool {
        fn same(a: &[usize], b: &[usize]) -> bool {
            match (a, b) {
                ([x], [y]) => x == y,
                ([x0, x1], [y0, y1]) => x0 == y0 && x1 == y1,
                _ => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y),
            }
        }
        // `extent` and `contiguous` are functions of the fields compared.
        self.buf == o.buf
            && self.offset == o.offset
            && self.dtype == o.dtype
            && same(&self.shape, &o.shape)
            && same(&self.strides, &o.strides)
    }
}

impl Eq for TensorView {}

/// The bytes of a typed symmetric slice as a `SymSlice<u8>` (same heap offset, `len * size_of::<T>()` bytes).
pub fn sym_bytes<T: Symmetric>(sh: &Shmem, s: SymSlice<T>) -> Result<SymSlice<u8>> {
    sh.sym_slice_from_addr::<u8>(sh.sym_addr(s.heap_offset()), s.size_bytes())
}

/// Contiguous (row-major) strides of `shape`, in elements.
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![0; shape.len()];
    let mut acc = 1usize;
    for d in (0..shape.len()).rev() {
        strides[d] = acc;
        acc = acc.saturating_mul(shape[d].max(1));
    }
    strides
}

impl TensorView {
    /// A view with explicit strides (in elements) and element offset into `buf`.
    pub fn new(
        buf: SymSlice<u8>,
        dtype: DType,
        shape: &[usize],
        strides: &[usize],
        offset: usize,
    ) -> Result<TensorView> {
        if shape.len() != strides.len() {
            return Err(Error::InvalidArgument {
                name: "strides",
                value: format!("{strides:?}"),
                reason: format!(
                    "must have one stride per dimension of shape {shape:?} ({} dimensions)",
                    shape.len()
                ),
            });
        }
        let mut v = TensorView {
            buf,
            dtype,
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            offset,
            extent: (0, 0),
            contiguous: false,
        };
        v.cache()?;
        let (_, end) = v.extent;
        if end > buf.len() {
            return Err(Error::OutOfBounds {
                what: "tensor view bytes",
                start: offset.saturating_mul(dtype.size()),
                len: end.saturating_sub(offset.saturating_mul(dtype.size())),
                limit: buf.len(),
                context: format!(
                    "TensorView {dtype} shape {shape:?} strides {strides:?} offset {offset} over {buf:?}"
                ),
            });
        }
        Ok(v)
    }

    /// A contiguous view of `shape` starting at the first byte of `buf`.
    pub fn contiguous(buf: SymSlice<u8>, dtype: DType, shape: &[usize]) -> Result<TensorView> {
        TensorView::new(buf, dtype, shape, &contiguous_strides(shape), 0)
    }

    /// A contiguous view of a typed symmetric slice; `dtype` must have the size of `T`.
    pub fn of<T: Symmetric>(
        sh: &Shmem,
        s: SymSlice<T>,
        dtype: DType,
        shape: &[usize],
    ) -> Result<TensorView> {
        if dtype.size() != std::mem::size_of::<T>() {
            return Err(Error::InvalidArgument {
                name: "dtype",
                value: dtype.to_string(),
                reason: format!(
                    "element size {} differs from the slice's element type {} ({} bytes)",
                    dtype.size(),
                    T::NAME,
                    std::mem::size_of::<T>()
                ),
            });
        }
        TensorView::contiguous(sym_bytes(sh, s)?, dtype, shape)
    }

    /// Compute the cached extent and contiguity from the shape, strides and offset.
    fn cache(&mut self) -> Result<()> {
        self.extent = self.byte_extent_checked()?;
        self.contiguous = self.contiguous_from_strides();
        Ok(())
    }

    /// `[first byte, one past the last byte)` of the elements, relative to the start of `buf`; `(o, o)` when empty.
    fn byte_extent_checked(&self) -> Result<(usize, usize)> {
        let esz = self.dtype.size();
        let overflow = || Error::InvalidArgument {
            name: "shape",
            value: format!("{:?} strides {:?}", self.shape, self.strides),
            reason: "the view's extent overflows the address space".into(),
        };
        let start = self.offset.checked_mul(esz).ok_or_else(overflow)?;
        if self.numel() == 0 {
            return Ok((start, start));
        }
        let mut last = self.offset;
        for (&n, &s) in self.shape.iter().zip(&self.strides) {
            last = (n - 1)
                .checked_mul(s)
                .and_then(|x| x.checked_add(last))
                .ok_or_else(overflow)?;
        }
        let end = last
            .checked_add(1)
            .and_then(|x| x.checked_mul(esz))
            .ok_or_else(overflow)?;
        Ok((start, end))
    }

    /// `[first byte, one past the last byte)` spanned by the elements, relative to the start of `buf`.
    pub fn byte_extent(&self) -> (usize, usize) {
        // Checked at construction.
        self.extent
    }

    /// The symmetric bytes the view lies in.
    pub fn buf(&self) -> SymSlice<u8> {
        self.buf
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Sizes of the dimensions.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Strides of the dimensions, in elements.
    pub fn strides(&self) -> &[usize] {
        &self.strides
    }

    /// Offset of element `[0, ..., 0]` from the start of `buf`, in elements.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Number of dimensions.
    pub fn dim(&self) -> usize {
        self.shape.len()
    }

    /// Size of dimension `d` (0 when `d` is out of range).
    pub fn size(&self, d: usize) -> usize {
        self.shape.get(d).copied().unwrap_or(0)
    }

    /// Stride of dimension `d` in elements (0 when `d` is out of range).
    pub fn stride(&self, d: usize) -> usize {
        self.strides.get(d).copied().unwrap_or(0)
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Bytes of element data (`numel * element size`).
    pub fn nbytes(&self) -> usize {
        self.numel() * self.dtype.size()
    }

    /// Heap offset (same on every PE) of element `[0, ..., 0]`.
    pub fn heap_offset(&self) -> usize {
        self.buf.heap_offset() + self.offset * self.dtype.size()
    }

    /// Whether the view is contiguous in row-major order (PyTorch's `is_contiguous()`: dimensions of size 1 may
    /// have any stride, and an empty view is contiguous).
    pub fn is_contiguous(&self) -> bool {
        self.contiguous
    }

    fn contiguous_from_strides(&self) -> bool {
        if self.numel() == 0 {
            return true;
        }
        let mut expect = 1usize;
        for d in (0..self.dim()).rev() {
            if self.shape[d] != 1 {
                if self.strides[d] != expect {
                    return false;
                }
                expect *= self.shape[d];
            }
        }
        true
    }

    /// The view restricted to `len` indices of dimension `dim` starting at `start` (`torch.narrow`).
    pub fn narrow(&self, dim: usize, start: usize, len: usize) -> Result<TensorView> {
        if dim >= self.dim() {
            return Err(Error::InvalidArgument {
                name: "dim",
                value: dim.to_string(),
                reason: format!("must be below the view's {} dimensions", self.dim()),
            });
        }
        if start.checked_add(len).is_none_or(|e| e > self.shape[dim]) {
            return Err(Error::OutOfBounds {
                what: "narrowed index range",
                start,
                len,
                limit: self.shape[dim],
                context: format!("TensorView::narrow of dimension {dim}"),
            });
        }
        let mut v = self.clone();
        v.shape[dim] = len;
        if len > 0 {
            v.offset += start * self.strides[dim];
        }
        // A sub-range of a checked view: its extent cannot overflow.
        v.cache()?;
        Ok(v)
    }

    /// The contiguous bytes of the data; an error unless the view is contiguous.
    pub fn contiguous_bytes(&self, op: &str, arg: &'static str) -> Result<SymSlice<u8>> {
        if !self.is_contiguous() {
            return Err(Error::InvalidArgument {
                name: arg,
                value: self.describe(),
                reason: format!("{op}: must be contiguous"),
            });
        }
        let s = self.offset * self.dtype.size();
        self.buf.slice(s..s + self.nbytes())
    }

    /// The view's contiguous byte runs, relative to the start of `buf`, in row-major element order.
    pub fn runs(&self) -> Vec<plan::Run> {
        plan::strided_runs(&self.shape, &self.strides, self.offset, self.dtype.size())
    }

    /// Whether the bytes spanned by the two views overlap (in the heap, so on every PE).
    pub fn overlaps(&self, other: &TensorView) -> bool {
        let (a0, a1) = self.byte_extent();
        let (b0, b1) = other.byte_extent();
        let (a0, a1) = (a0 + self.buf.heap_offset(), a1 + self.buf.heap_offset());
        let (b0, b1) = (b0 + other.buf.heap_offset(), b1 + other.buf.heap_offset());
        a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1
    }

    /// Words describing the view (heap offset, dtype, shape, strides) for the collective argument check.
    pub(crate) fn digest_words(&self, out: &mut Vec<u64>) {
        out.push(self.heap_offset() as u64);
        out.push(self.dtype as u64);
        out.push(self.dim() as u64);
        out.extend(self.shape.iter().map(|&x| x as u64));
        out.extend(self.strides.iter().map(|&x| x as u64));
    }

    /// A one-line description for error messages.
    pub fn describe(&self) -> String {
        format!(
            "{} tensor of shape {:?}, strides {:?}, at heap+{:#x}",
            self.dtype,
            self.shape,
            self.strides,
            self.heap_offset()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_of_shapes() {
        assert_eq!(contiguous_strides(&[2, 3, 4]), vec![12, 4, 1]);
        assert_eq!(contiguous_strides(&[]), Vec::<usize>::new());
        assert_eq!(contiguous_strides(&[0, 5]), vec![5, 1]);
    }
}
