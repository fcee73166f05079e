//! The executable's writable data segment (`.data` and `.bss`, static variables of functions included) as symmetric
//! memory, as OpenSHMEM requires of global and static variables.
//!
//! [`DataSegment::discover`] finds the segment from the program headers the kernel handed the process
//! (`AT_PHDR` in `/proc/self/auxv`): every writable `PT_LOAD` of the main executable, minus its `PT_GNU_RELRO`
//! part (made read-only after relocation), rounded to pages, and checks the result against `/proc/self/maps`.
//! [`DataSegment::adopt`] moves it onto a shared memfd at the *same virtual address*: map the arena's pages
//! somewhere, copy the segment into them, then `mremap` them over the segment in one step. The program keeps using
//! its globals at their usual addresses, and every PE of the node maps the same pages through the heap exchange,
//! so a put to a global is a `memcpy` into a peer's page and an atomic a CPU atomic on it.
//!
//! Not symmetric: globals of shared libraries (each library has its own segment, loaded at a different place in
//! each process), thread-locals (one copy per thread), and memory from the C `malloc` or the stack.
//!
//! Caveats (documented in `docs/OPENSHMEM.md`): a write made by another thread to a global between the copy and the
//! `mremap` (a few microseconds at init) is lost, so start threads that write globals after init; after a
//! `fork`, parent and child share the segment (`MAP_SHARED`).

use super::memfd::Arena;
use super::vmem::{auxv, page_size};
use crate::error::{Error, Result};
use rustix::mm::{MapFlags, MremapFlags, ProtFlags};

const AT_PHDR: u64 = 3;
const AT_PHENT: u64 = 4;
const AT_PHNUM: u64 = 5;
const PT_LOAD: u32 = 1;
const PT_PHDR: u32 = 6;
const PT_GNU_RELRO: u32 = 0x6474_e552;
const PF_W: u32 = 2;
const PHDR_SIZE: usize = 56;

fn err(message: String) -> Error {
    Error::Transport {
        transport: "data segment",
        message,
    }
}

/// The page-aligned writable data segment `[start, start + len)` of the main executable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataSegment {
    start: usize,
    len: usize,
}

/// One program header (the fields used here).
#[derive(Debug, Clone, Copy)]
struct Phdr {
    kind: u32,
    flags: u32,
    vaddr: usize,
    memsz: usize,
}

impl DataSegment {
    /// First byte.
    pub fn start(&self) -> usize {
        self.start
    }

    /// Length in bytes (a multiple of the page size).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the segment is empty (never: discovery returns `None` then).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `addr` lies in the segment.
    pub fn contains(&self, addr: usize) -> bool {
        addr >= self.start && addr - self.start < self.len
    }

    /// The writable data segment of the main executable; `None` when it has none.
    pub fn discover() -> Result<Option<DataSegment>> {
        if cfg!(not(target_pointer_width = "64")) {
            return Err(err("only 64-bit ELF executables are supported".into()));
        }
        let (mut phdr, mut phent, mut phnum) = (0usize, 0usize, 0usize);
        for (key, val) in auxv()? {
            match key {
                AT_PHDR => phdr = val,
                AT_PHENT => phent = val,
                AT_PHNUM => phnum = val,
                _ => {}
            }
        }
        if phdr == 0 || phnum == 0 || phent != PHDR_SIZE {
            return Err(err(format!(
                "no usable program headers in the auxiliary vector (AT_PHDR {phdr:#x}, AT_PHENT {phent}, AT_PHNUM {phnum})"
            )));
        }
        let headers: Vec<Phdr> = (0..phnum)
            .map(|i| {
                let mut raw = [0u8; PHDR_SIZE];
                // SAFETY: the kernel maps the executable's program header table (AT_PHDR, AT_PHNUM entries of
                // AT_PHENT bytes, checked to be 56, the Elf64_Phdr size) readable for the life of the process; the
                // copy reads exactly entry `i` into a local array and makes no reference into it.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        (phdr + i * PHDR_SIZE) as *const u8,
                        raw.as_mut_ptr(),
                        PHDR_SIZE,
                    )
                };
                let u32_at =
                    |o: usize| u32::from_ne_bytes(raw[o..o + 4].try_into().unwrap_or_default());
                let u64_at =
                    |o: usize| u64::from_ne_bytes(raw[o..o + 8].try_into().unwrap_or_default());
                Phdr {
                    kind: u32_at(0),
                    flags: u32_at(4),
                    vaddr: u64_at(16) as usize,
                    memsz: u64_at(40) as usize,
                }
            })
            .collect();
        let page = page_size();
        let found = writable_range(&headers, phdr, page)?;
        let Some((start, end)) = found else {
            return Ok(None);
        };
        let maps = std::fs::read_to_string("/proc/self/maps")
            .map_err(|e| Error::os("read /proc/self/maps", e))?;
        check_mapped_rw(&maps, start, end)?;
        Ok(Some(DataSegment {
            start,
            len: end - start,
        }))
    }

    /// Move the segment onto `arena`'s bytes `[offset, offset + len)` (page-aligned) at the same address: the
    /// current contents are copied first, then the arena's pages replace the segment's in one `mremap`.
    pub fn adopt(&self, arena: &Arena, offset: usize) -> Result<()> {
        let page = page_size();
        if offset % page != 0
            || offset
                .checked_add(self.len)
                .is_none_or(|e| e > arena.size())
        {
            return Err(err(format!(
                "data segment of {} bytes at arena offset {offset} does not fit a {}-byte arena page-aligned",
                self.len,
                arena.size()
            )));
        }
        // SAFETY: a fresh mapping chosen by the kernel (null hint) aliases no Rust object; the memfd covers
        // [offset, offset + len) (checked above against its sealed size).
        let tmp = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                self.len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                arena.fd(),
                offset as u64,
            )
        }
        .map_err(|e| Error::os("mmap(data segment)", std::io::Error::from(e)))?;
        // SAFETY: the segment [start, start + len) is mapped readable and writable (checked against
        // /proc/self/maps at discovery) and `tmp` is a distinct fresh mapping of the same length; a plain byte copy
        // makes no Rust reference to either.
        unsafe {
            std::ptr::copy_nonoverlapping(self.start as *const u8, tmp.cast::<u8>(), self.len)
        };
        // SAFETY: both ranges are page-aligned mappings of `len` bytes; MREMAP_FIXED atomically replaces the
        // segment's pages with the arena's, which hold the same bytes, so every pointer into the segment (Rust
        // statics of this process included) stays valid and sees the same values. `tmp` is consumed by the move.
        let moved = unsafe {
            rustix::mm::mremap_fixed(
                tmp,
                self.len,
                self.len,
                MremapFlags::MAYMOVE,
                self.start as *mut std::ffi::c_void,
            )
        };
        match moved {
            Ok(_) => Ok(()),
            Err(e) => {
                // SAFETY: `tmp` is still our own mapping of `len` bytes when the move failed.
                let _ = unsafe { rustix::mm::munmap(tmp, self.len) };
                Err(Error::os("mremap(data segment)", std::io::Error::from(e)))
            }
        }
    }
}

/// Where the data segment sits in a PE's symmetric window: after the heap (rounded up to a page), so one mapping
/// of `[heap | data segment]` per peer reaches both, and the arena holds the pages that back the segment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SymData {
    seg: Option<DataSegment>,
    off: usize,
}

impl SymData {
    /// The layout for a heap of `heap` bytes: the executable's data segment when `enabled` (and it has one).
    pub fn plan(enabled: bool, heap: usize) -> Result<SymData> {
        if !enabled {
            return Ok(SymData::default());
        }
        let page = page_size();
        Ok(SymData {
            seg: DataSegment::discover()?,
            off: heap.div_ceil(page) * page,
        })
    }

    /// The segment, when symmetric.
    pub fn segment(&self) -> Option<DataSegment> {
        self.seg
    }

    /// Window offset of the segment's first byte.
    pub fn offset(&self) -> usize {
        self.off
    }

    /// Bytes of the symmetric window: the heap of `heap` bytes, then the segment if any.
    pub fn window_len(&self, heap: usize) -> usize {
        self.seg.map_or(heap, |s| self.off + s.len())
    }

    /// Move the segment onto the arena, whose window starts at byte `window_start`.
    pub fn adopt(&self, arena: &Arena, window_start: usize) -> Result<()> {
        match self.seg {
            Some(s) => s.adopt(arena, window_start + self.off),
            None => Ok(()),
        }
    }

    /// A Mismatch unless PE `pe`'s arena (`theirs` bytes) has the size of ours: every PE must run an executable
    /// with a data segment of the same size.
    pub fn check_peer(&self, me: usize, pe: usize, theirs: usize, ours: usize) -> Result<()> {
        if theirs == ours {
            return Ok(());
        }
        Err(Error::Mismatch {
            call: "init (symmetric heap plus the executable's data segment: every PE must run the same executable)",
            pe,
            theirs: format!("{theirs} bytes"),
            reference_pe: me,
            ours: format!("{ours} bytes"),
        })
    }
}

/// The page-rounded writable range of the program headers `headers` (read at address `phdr_addr`); an error when
/// the writable parts are not one contiguous range.
fn writable_range(
    headers: &[Phdr],
    phdr_addr: usize,
    page: usize,
) -> Result<Option<(usize, usize)>> {
    // Load bias of a position-independent executable: where PT_PHDR landed minus where it was linked.
    let bias = headers
        .iter()
        .find(|h| h.kind == PT_PHDR)
        .map_or(0, |h| phdr_addr.wrapping_sub(h.vaddr));
    let relro: Vec<(usize, usize)> = headers
        .iter()
        .filter(|h| h.kind == PT_GNU_RELRO)
        .map(|h| {
            let s = bias.wrapping_add(h.vaddr);
            (s / page * page, (s + h.memsz) / page * page)
        })
        .collect();
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for h in headers
        .iter()
        .filter(|h| h.kind == PT_LOAD && h.flags & PF_W != 0)
    {
        let s = bias.wrapping_add(h.vaddr);
        let mut start = s / page * page;
        let end = (s + h.memsz).div_ceil(page) * page;
        for &(rs, re) in &relro {
            if rs <= start && re > start {
                start = re.min(end);
            }
        }
        if start < end {
            ranges.push((start, end));
        }
    }
    ranges.sort_unstable();
    let mut merged: Option<(usize, usize)> = None;
    for (s, e) in ranges {
        merged = match merged {
            None => Some((s, e)),
            Some((ms, me)) if s <= me => Some((ms, me.max(e))),
            Some((ms, me)) => {
                return Err(err(format!(
                    "the executable has writable segments at [{ms:#x}, {me:#x}) and [{s:#x}, {e:#x}) that are not contiguous"
                )))
            }
        };
    }
    Ok(merged)
}

/// An error unless `[start, end)` is covered by contiguous readable and writable mappings in `maps` (the text of
/// `/proc/self/maps`).
fn check_mapped_rw(maps: &str, start: usize, end: usize) -> Result<()> {
    let mut at = start;
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else {
            continue;
        };
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) else {
            continue;
        };
        if a <= at && at < b {
            if !perms.starts_with("rw") {
                break;
            }
            at = b;
            if at >= end {
                return Ok(());
            }
        }
    }
    Err(err(format!(
        "the executable's data segment [{start:#x}, {end:#x}) is not mapped read-write from {at:#x} (/proc/self/maps)"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(vaddr: usize, memsz: usize, w: bool) -> Phdr {
        Phdr {
            kind: PT_LOAD,
            flags: if w { PF_W | 4 } else { 4 | 1 },
            vaddr,
            memsz,
        }
    }

    #[test]
    fn range_subtracts_relro_and_applies_the_bias() {
        let h = [
            Phdr {
                kind: PT_PHDR,
                flags: 4,
                vaddr: 0x40,
                memsz: 0x2d8,
            },
            load(0, 0x1000, false),
            load(0x3db8, 0x270, true),
            Phdr {
                kind: PT_GNU_RELRO,
                flags: 4,
                vaddr: 0x3db8,
                memsz: 0x248,
            },
        ];
        // PT_PHDR linked at 0x40, found at 0x5555_0000_0040: bias 0x5555_0000_0000.
        let r = writable_range(&h, 0x5555_0000_0040, 4096).unwrap();
        assert_eq!(r, Some((0x5555_0000_4000, 0x5555_0000_5000)));
    }

    #[test]
    fn no_writable_segment_is_none_and_gaps_are_errors() {
        assert_eq!(
            writable_range(&[load(0, 0x1000, false)], 0x40, 4096).unwrap(),
            None
        );
        let gap = [load(0x1000, 0x10, true), load(0x8000, 0x10, true)];
        assert!(writable_range(&gap, 0x40, 4096).is_err());
    }

    #[test]
    fn maps_check_needs_contiguous_rw_cover() {
        let maps = "1000-2000 rw-p 0 0 0 x\n2000-3000 rw-p 0 0 0\n3000-4000 r--p 0 0 0\n";
        assert!(check_mapped_rw(maps, 0x1000, 0x3000).is_ok());
        assert!(check_mapped_rw(maps, 0x1000, 0x4000).is_err());
        assert!(check_mapped_rw(maps, 0x800, 0x1000).is_err());
    }

    #[test]
    fn discover_finds_this_test_binary_s_statics() {
        static mut PROBE: [u64; 4] = [1, 2, 3, 4];
        let seg = DataSegment::discover()
            .unwrap()
            .expect("a test binary has a data segment");
        let addr = std::ptr::addr_of!(PROBE) as usize;
        assert!(seg.contains(addr), "{addr:#x} not in {seg:?}");
        assert_eq!(seg.start() % page_size(), 0);
    }
}
