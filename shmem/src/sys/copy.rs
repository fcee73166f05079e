//! Byte copies between mappings: small copies without a call, large ones with non-temporal stores from a size each
//! mapping carries (the configuration's `XPUSHMEM_NT_COPY_SIZE`, handed down at init). The only raw-pointer copies of the runtime's host memory; [`super::memfd::HostMem`]
//! bounds-checks every use.

/// Copies up to this many bytes are done without a call ([`copy_small`]).
const SMALL: usize = 32;

/// Copy `len` bytes from `src` to `dst` (ranges may overlap): non-temporal stores when the copy is at least
/// `nt_from` bytes (the mapping's setting, from `XPUSHMEM_NT_COPY_SIZE`; `usize::MAX`: never) and the ranges are disjoint (they bypass the caches: no read for ownership of the destination,
/// which a memory-bound copy would otherwise pay, and the caches keep what they held), else `memmove`.
///
/// # Safety
/// `src..src+len` must be readable and `dst..dst+len` writable for the duration of the call.
#[inline]
pub(super) unsafe fn copy_bytes(src: *const u8, dst: *mut u8, len: usize, nt_from: usize) {
    if len <= SMALL {
        // SAFETY: the caller's contract.
        unsafe { copy_small(src, dst, len) };
    } else {
        // SAFETY: the caller's contract.
        unsafe { copy_large(src, dst, len, nt_from) };
    }
}

/// [`copy_bytes`] above [`SMALL`] bytes (out of line: the small path stays small enough to inline into its callers).
///
/// # Safety
/// As [`copy_bytes`].
#[inline(never)]
unsafe fn copy_large(src: *const u8, dst: *mut u8, len: usize, nt_from: usize) {
    if len >= nt_from {
        let (s, d) = (src as usize, dst as usize);
        if s + len <= d || d + len <= s {
            // SAFETY: the caller's contract, and the ranges are disjoint (checked).
            unsafe { copy_nt(src, dst, len) };
            return;
        }
    }
    // SAFETY: the caller's contract; `copy` tolerates overlap.
    unsafe { std::ptr::copy(src, dst, len) };
}

/// A copy of at most [`SMALL`] bytes without a call into `memmove` (whose call and dispatch cost more than the copy
/// itself; small puts, gets and signals' payloads, and the collectives' small messages with their 16-byte headers,
/// are on the latency path): the first and the last bytes as two
/// possibly overlapping words of the largest width that fits, both loaded before either is stored, so the ranges
/// may overlap. Unaligned accesses.
///
/// # Safety
/// As [`copy_bytes`], with `len <= SMALL`.
#[inline(always)]
unsafe fn copy_small(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY: (every arm) the caller's contract, and each width `w` satisfies `w <= len <= 2 * w`.
    unsafe {
        match len {
            17..=32 => two_words::<u128>(src, dst, len),
            8..=16 => two_words::<u64>(src, dst, len),
            4..=7 => two_words::<u32>(src, dst, len),
            2..=3 => two_words::<u16>(src, dst, len),
            1 => dst.write(src.read()),
            _ => {}
        }
    }
}

/// Copy `len` bytes as two possibly overlapping words of type `W`, the first at 0 and the second ending at `len`,
/// both loaded before either is stored (so the ranges may overlap). Unaligned accesses.
///
/// # Safety
/// As [`copy_bytes`], with `size_of::<W>() <= len <= 2 * size_of::<W>()`.
#[inline(always)]
unsafe fn two_words<W: Copy>(src: *const u8, dst: *mut u8, len: usize) {
    let w = std::mem::size_of::<W>();
    // SAFETY: both loads lie inside `src..src+len` and both stores inside `dst..dst+len` (`w <= len`).
    unsafe {
        let (a, b) = (
            src.cast::<W>().read_unaligned(),
            src.add(len - w).cast::<W>().read_unaligned(),
        );
        dst.cast::<W>().write_unaligned(a);
        dst.add(len - w).cast::<W>().write_unaligned(b);
    }
}

/// Non-temporal copy of disjoint ranges: plain copies for the head (up to 64-byte alignment of `dst`) and the
/// tail, 64-byte blocks of streaming stores in between, then a store fence (streaming stores are weakly ordered:
/// the fence makes them visible before anything this PE stores afterwards, a signal for instance).
///
/// # Safety
/// As [`copy_bytes`], with disjoint ranges.
#[cfg(target_arch = "x86_64")]
unsafe fn copy_nt(src: *const u8, dst: *mut u8, len: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
    let head = (64 - (dst as usize) % 64) % 64;
    let head = head.min(len);
    // SAFETY: the first `head` bytes of both ranges (inside them, disjoint).
    unsafe { std::ptr::copy_nonoverlapping(src, dst, head) };
    let mut at = head;
    while at + 64 <= len {
        // SAFETY: 64 bytes at `at` lie inside both ranges; `dst + at` is 64-byte aligned (16 suffices for the
        // streaming stores), the loads are unaligned ones. SSE2 is part of x86_64.
        unsafe {
            let s = src.add(at).cast::<__m128i>();
            let d = dst.add(at).cast::<__m128i>();
            let (a, b) = (_mm_loadu_si128(s), _mm_loadu_si128(s.add(1)));
            let (c, e) = (_mm_loadu_si128(s.add(2)), _mm_loadu_si128(s.add(3)));
            _mm_stream_si128(d, a);
            _mm_stream_si128(d.add(1), b);
            _mm_stream_si128(d.add(2), c);
            _mm_stream_si128(d.add(3), e);
        }
        at += 64;
    }
    // SAFETY: the remaining bytes of both ranges; then the fence (no memory access).
    unsafe {
        std::ptr::copy_nonoverlapping(src.add(at), dst.add(at), len - at);
        _mm_sfence();
    }
}

/// Non-temporal copy elsewhere: a plain copy.
///
/// # Safety
/// As [`copy_bytes`].
#[cfg(not(target_arch = "x86_64"))]
unsafe fn copy_nt(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY: the caller's contract.
    unsafe { std::ptr::copy(src, dst, len) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_temporal_copies_match_memmove_at_every_alignment() {
        let src: Vec<u8> = (0..1200u32).map(|i| (i * 7 + i / 251) as u8).collect();
        for len in (0..300).chain([511, 512, 513, 1000]) {
            for so in 0..9 {
                for dof in 0..70 {
                    let mut dst = vec![0xEEu8; 1200 + 64];
                    // SAFETY: both ranges lie inside their vectors (len + offsets < their lengths) and are disjoint.
                    unsafe { copy_nt(src.as_ptr().add(so), dst.as_mut_ptr().add(dof), len) };
                    assert_eq!(
                        &dst[dof..dof + len],
                        &src[so..so + len],
                        "len {len}, src +{so}, dst +{dof}"
                    );
                    assert!(
                        dst[..dof].iter().all(|&b| b == 0xEE),
                        "before: len {len} +{dof}"
                    );
                    assert!(
                        dst[dof + len..].iter().all(|&b| b == 0xEE),
                        "after: len {len} +{dof}"
                    );
                }
            }
        }
    }

    #[test]
    fn small_copies_match_memmove_at_every_length_and_overlap() {
        let pattern: Vec<u8> = (0..64u32).map(|i| (i * 37 + 11) as u8).collect();
        for len in 0..=SMALL {
            // Disjoint, then every overlap of source and destination within one buffer (both directions).
            for (s, d) in (0..=20usize).flat_map(|s| (0..=20usize).map(move |d| (s, d))) {
                let (mut ours, mut want) = (pattern.clone(), pattern.clone());
                // SAFETY: both ranges lie inside the 64-byte buffers (s, d <= 20, len <= 32).
                unsafe {
                    copy_small(ours.as_ptr().add(s), ours.as_mut_ptr().add(d), len);
                    std::ptr::copy(want.as_ptr().add(s), want.as_mut_ptr().add(d), len);
                }
                assert_eq!(ours, want, "len {len}, from {s} to {d}");
            }
            let src = &pattern[3..3 + len];
            let mut dst = vec![0xEEu8; 40];
            // SAFETY: distinct buffers, in bounds.
            unsafe { copy_bytes(src.as_ptr(), dst.as_mut_ptr().add(5), len, usize::MAX) };
            assert_eq!(&dst[5..5 + len], src, "len {len}");
            assert!(
                dst[..5].iter().chain(&dst[5 + len..]).all(|&b| b == 0xEE),
                "len {len}: outside the range"
            );
        }
    }
}
