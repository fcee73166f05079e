//! Plain-data slices seen as bytes: what every layer that moves [`crate::types::Symmetric`] elements through a
//! window (RMA, signals, the collectives' messages) needs, and the one `unsafe` cast it takes.

use crate::types::Symmetric;

/// The bytes of a slice of plain-data elements.
pub fn bytes_of<T: Symmetric>(s: &[T]) -> &[u8] {
    // SAFETY: `Symmetric` is sealed to primitive integer and float types: no padding, no invalid bit patterns,
    // and u8 has alignment 1; the length covers exactly the slice's memory.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), std::mem::size_of_val(s)) }
}

/// The bytes of a mutable slice of plain-data elements (any bytes written are valid elements).
pub fn bytes_of_mut<T: Symmetric>(s: &mut [T]) -> &mut [u8] {
    // SAFETY: as in `bytes_of`; additionally every bit pattern is a valid `T`, so arbitrary writes are sound.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast(), std::mem::size_of_val(s)) }
}
