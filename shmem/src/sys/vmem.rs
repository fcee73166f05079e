//! Placing a shared mapping at an address aligned to its size, so that an allocation aligned *within* the heap
//! (the same offset on every PE) is aligned in every PE's address space too: `shmem_align(a, n)` returns an
//! address that is a multiple of any power of two `a` up to the heap size, whatever ASLR chose.

use crate::error::{Error, Result};
use rustix::fd::BorrowedFd;
use rustix::mm::{MapFlags, ProtFlags};

const AT_PAGESZ: u64 = 6;

/// The call an [`Error::Os`] names when [`map_shared_aligned`] cannot reserve its address space (callers tell that
/// failure from the others by it).
pub const RESERVE_CALL: &str = "mmap(reserve)";

/// The `(key, value)` pairs of this process's auxiliary vector.
pub(crate) fn auxv() -> Result<Vec<(u64, usize)>> {
    let raw = std::fs::read("/proc/self/auxv").map_err(|e| Error::os("read /proc/self/auxv", e))?;
    Ok(raw
        .chunks_exact(16)
        .map(|p| {
            let key = u64::from_ne_bytes(p[..8].try_into().unwrap_or_default());
            (
                key,
                u64::from_ne_bytes(p[8..].try_into().unwrap_or_default()) as usize,
            )
        })
        .collect())
}

/// The system page size (`AT_PAGESZ`; 4096 if the auxiliary vector cannot be read).
pub fn page_size() -> usize {
    auxv()
        .ok()
        .and_then(|a| a.into_iter().find(|&(k, _)| k == AT_PAGESZ))
        .map_or(4096, |(_, v)| v)
}

fn os(call: &'static str, e: rustix::io::Errno) -> Error {
    Error::os(call, std::io::Error::from(e))
}

/// The alignment given to a mapping of `len` bytes: the next power of two (at least a page).
pub fn alignment_for(len: usize, page: usize) -> usize {
    len.checked_next_power_of_two()
        .unwrap_or(1 << (usize::BITS - 1))
        .max(page)
}

/// Map `len` bytes of `fd` from `offset`, shared and read-write, at an address that is a multiple of
/// [`alignment_for`]`(align_len)` (`align_len`: the largest object the mapping must align, at most `len`): reserve
/// `len + align` bytes of address space (inaccessible, nothing committed), map the file over the aligned part,
/// release the rest.
pub fn map_shared_aligned(
    fd: BorrowedFd<'_>,
    offset: usize,
    len: usize,
    align_len: usize,
) -> Result<*mut u8> {
    let page = page_size();
    let align = alignment_for(align_len.min(len), page);
    let span = len.checked_add(align).ok_or_else(|| Error::Transport {
        transport: "shm",
        message: format!(
            "a {len}-byte mapping aligned to {align} bytes overflows the address space"
        ),
    })?;
    // SAFETY: a fresh inaccessible reservation chosen by the kernel (null hint) aliases no Rust object.
    let res = unsafe {
        rustix::mm::mmap_anonymous(
            std::ptr::null_mut(),
            span,
            ProtFlags::empty(),
            MapFlags::PRIVATE | MapFlags::NORESERVE,
        )
    }
    .map_err(|e| {
        Error::os(
            RESERVE_CALL,
            format!("{span} bytes: {}", std::io::Error::from(e)),
        )
    })?
    .cast::<u8>();
    let start = res as usize;
    let aligned = start.next_multiple_of(align);
    // SAFETY: [aligned, aligned + len) lies inside our own reservation [start, start + span) (aligned - start < align),
    // which nothing else refers to, so MAP_FIXED replaces only memory this function owns; the caller guarantees that
    // the fd covers [offset, offset + len).
    let mapped = unsafe {
        rustix::mm::mmap(
            aligned as *mut std::ffi::c_void,
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED | MapFlags::NORESERVE | MapFlags::FIXED,
            fd,
            offset as u64,
        )
    };
    let tail = aligned + len.next_multiple_of(page);
    // SAFETY: the head [start, aligned) and the tail [tail, start + span) are the unused, page-aligned parts of our
    // own reservation (or, when the file mapping failed, the whole reservation is released below).
    unsafe {
        if let Err(e) = mapped {
            let _ = rustix::mm::munmap(res.cast(), span);
            return Err(os("mmap(heap)", e));
        }
        if aligned > start {
            let _ = rustix::mm::munmap(start as *mut std::ffi::c_void, aligned - start);
        }
        if start + span > tail {
            let _ = rustix::mm::munmap(tail as *mut std::ffi::c_void, start + span - tail);
        }
    }
    Ok(aligned as *mut u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_is_the_next_power_of_two_of_at_least_a_page() {
        assert_eq!(alignment_for(1, 4096), 4096);
        assert_eq!(alignment_for(64 << 20, 4096), 64 << 20);
        assert_eq!(alignment_for((64 << 20) + 4096, 4096), 128 << 20);
    }

    #[test]
    fn a_mapping_lands_aligned_and_is_usable() {
        let a = crate::sys::memfd::Arena::create(3 << 20).unwrap();
        let p = map_shared_aligned(a.fd(), 0, 3 << 20, 3 << 20).unwrap();
        assert_eq!(p as usize % (4 << 20), 0, "{p:p}");
        // SAFETY: the mapping is 3 MiB, read-write, and owned by this test.
        unsafe {
            p.add((3 << 20) - 1).write(7);
            assert_eq!(p.add((3 << 20) - 1).read(), 7);
            rustix::mm::munmap(p.cast(), 3 << 20).unwrap();
        }
    }
}
