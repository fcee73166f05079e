//! Virtual memory: reservations of address space (`zeVirtualMemReserve`), physical memory objects
//! (`zePhysicalMemCreate`, each its own memfd) and mappings of the one into the other (`zeVirtualMemMap`, a
//! `MAP_FIXED | MAP_SHARED` mapping of the memfd over the reservation's inaccessible pages).
//!
//! Sharing: physical memory created with `ze_external_memory_export_desc_t` (`DMA_BUF` or `OPAQUE_FD`) is exported
//! by `zeMemGetAllocProperties` on an address it is mapped at, with `ze_external_memory_export_fd_t` chained: the
//! fd returned is a fresh duplicate of the memfd that the caller owns. Another process imports it with
//! `zePhysicalMemCreate` and `ze_external_memory_import_fd_t` chained (the driver takes its own duplicate; the
//! caller keeps its fd) and maps it where it likes.
//!
//! Granularity: [`VM_PAGE`] (64 KiB, like a GPU's large pages) for reservations, physical sizes, mapping
//! addresses, sizes and offsets, so that a caller aligning to the 4 KiB host page only is caught.

use crate::objects::{context, device, Device, Physical, VMap, MAX_DEVICES, MEMORY_ENV, PHYSICAL};
use crate::util::*;
use level_zero_sys::*;
use once_cell::sync::Lazy;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::mm::{MapFlags, ProtFlags};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// The page size `zeVirtualMemQueryPageSize` reports and every virtual memory call enforces.
pub const VM_PAGE: usize = 64 << 10;

static NEXT_ID: AtomicU64 = AtomicU64::new(1 << 40);

/// Bytes of physical memory this process created and holds on each device (imports not counted).
static HELD: [AtomicUsize; MAX_DEVICES] = [const { AtomicUsize::new(0) }; MAX_DEVICES];

/// The caps of [`MEMORY_ENV`] by device (read once): one value for every device, or a comma-separated list by
/// device index (devices past its end: no cap); an unparsable value is no cap, reported once.
static CAPS: Lazy<Vec<usize>> = Lazy::new(|| {
    let Ok(v) = std::env::var(MEMORY_ENV) else {
        return Vec::new();
    };
    let caps: Option<Vec<usize>> = v.split(',').map(|c| c.trim().parse().ok()).collect();
    caps.unwrap_or_else(|| {
        let _ = fail(
            ZE_RESULT_ERROR_INVALID_ARGUMENT,
            format_args!("{MEMORY_ENV}={v:?} is not a byte count or a list of them; no cap"),
        );
        Vec::new()
    })
});

/// Take `size` bytes of device `dev`'s physical memory for this process, or fail as a full device.
fn take(dev: u32, size: usize) -> ZeResult {
    let caps = &*CAPS;
    let cap = match caps.len() {
        1 => caps[0],
        _ => caps.get(dev as usize).copied().unwrap_or(usize::MAX),
    };
    HELD[dev as usize]
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| {
            h.checked_add(size).filter(|&t| t <= cap)
        })
        .map(drop)
        .map_err(|h| {
            fail(
                ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY,
                format_args!(
                    "zePhysicalMemCreate of {size} bytes on device {dev}: {h} of {cap} held ({MEMORY_ENV})"
                ),
            )
        })
}

fn aligned(v: usize) -> bool {
    v % VM_PAGE == 0
}

fn check_aligned(what: &str, v: usize) -> ZeResult {
    if aligned(v) {
        Ok(())
    } else {
        Err(fail(
            ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT,
            format_args!("{what} {v:#x} is not a multiple of the page size {VM_PAGE:#x} (zeVirtualMemQueryPageSize)"),
        ))
    }
}

fn check_size(what: &str, size: usize) -> ZeResult {
    if size == 0 {
        return Err(ZE_RESULT_ERROR_UNSUPPORTED_SIZE);
    }
    if !aligned(size) {
        return Err(fail(
            ZE_RESULT_ERROR_UNSUPPORTED_SIZE,
            format_args!("{what} {size} is not a multiple of the page size {VM_PAGE} (zeVirtualMemQueryPageSize)"),
        ));
    }
    Ok(())
}

/// Make `[p, p + len)` inaccessible address space again (a fresh anonymous `PROT_NONE` mapping over it).
///
/// # Safety
/// The range must lie in a reservation of the caller's context.
unsafe fn unback(p: usize, len: usize) -> ZeResult {
    // SAFETY: the caller's range is ours (a reservation); MAP_FIXED replaces what was mapped there.
    unsafe {
        rustix::mm::mmap_anonymous(
            p as *mut c_void,
            len,
            ProtFlags::empty(),
            MapFlags::PRIVATE | MapFlags::NORESERVE | MapFlags::FIXED,
        )
    }
    .map(drop)
    .map_err(|e| {
        fail(
            ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY,
            format_args!("mmap {len} bytes: {e}"),
        )
    })
}

fn prot(access: ze_memory_access_attribute_t) -> ZeResult<ProtFlags> {
    match access {
        ZE_MEMORY_ACCESS_ATTRIBUTE_NONE => Ok(ProtFlags::empty()),
        ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE => Ok(ProtFlags::READ | ProtFlags::WRITE),
        ZE_MEMORY_ACCESS_ATTRIBUTE_READONLY => Ok(ProtFlags::READ),
        a => Err(fail(
            ZE_RESULT_ERROR_INVALID_ENUMERATION,
            format_args!("memory access attribute {a}"),
        )),
    }
}

pub(crate) unsafe extern "C" fn virtual_mem_reserve(
    hctx: ze_context_handle_t,
    _start: *const c_void,
    size: usize,
    pptr: *mut *mut c_void,
) -> ze_result_t {
    entry(|| {
        let ctx = context(hctx)?;
        nn_mut(pptr)?;
        check_size("reservation size", size)?;
        // The start hint is ignored (the specification allows it).
        let base = reserve_aligned(size, VM_PAGE, ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY)?;
        lock(&ctx.vm).reserves.insert(base, size);
        // SAFETY: checked non-null.
        unsafe { out(pptr, base as *mut c_void) }
    })
}

pub(crate) unsafe extern "C" fn virtual_mem_free(
    hctx: ze_context_handle_t,
    ptr: *const c_void,
    size: usize,
) -> ze_result_t {
    entry(|| {
        let ctx = context(hctx)?;
        nn(ptr)?;
        let p = ptr as usize;
        let mut vm = lock(&ctx.vm);
        if vm.reserves.get(&p) != Some(&size) {
            return Err(fail(
                ZE_RESULT_ERROR_INVALID_ARGUMENT,
                format_args!(
                    "zeVirtualMemFree({ptr:p}, {size}): not a reservation of this context"
                ),
            ));
        }
        let inside: Vec<usize> = vm.maps.range(p..p + size).map(|(&a, _)| a).collect();
        for a in inside {
            vm.maps.remove(&a);
        }
        vm.reserves.remove(&p);
        // SAFETY: the whole reservation, ours, and no longer recorded.
        let _ = unsafe { rustix::mm::munmap(p as *mut c_void, size) };
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn virtual_mem_query_page_size(
    hctx: ze_context_handle_t,
    hdev: ze_device_handle_t,
    size: usize,
    pagesize: *mut usize,
) -> ze_result_t {
    entry(|| {
        context(hctx)?;
        device(hdev)?;
        if size == 0 {
            return Err(ZE_RESULT_ERROR_UNSUPPORTED_SIZE);
        }
        // SAFETY: checked inside.
        unsafe { out(pagesize, VM_PAGE) }
    })
}

pub(crate) unsafe extern "C" fn physical_mem_create(
    hctx: ze_context_handle_t,
    hdev: ze_device_handle_t,
    desc: *mut ze_physical_mem_desc_t,
    ph: *mut ze_physical_mem_handle_t,
) -> ze_result_t {
    entry(|| {
        let _ = context(hctx)?;
        let dev = device(hdev)?;
        // SAFETY: caller's descriptor; its chain may hold the export and import-fd descriptors only.
        let d = unsafe {
            read_desc(
                desc as *const ze_physical_mem_desc_t,
                &[
                    ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_DESC,
                    ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_IMPORT_FD,
                ],
            )?
        };
        check_flags(
            d.flags,
            ZE_PHYSICAL_MEM_FLAG_TBD,
            "ze_physical_mem_desc_t.flags",
        )?;
        nn_mut(ph)?;
        check_size("physical memory size", d.size)?;
        let kinds = ZE_EXTERNAL_MEMORY_TYPE_FLAG_OPAQUE_FD | ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF;
        let (mut exportable, mut import) = (false, None);
        let mut next = d.pNext;
        while !next.is_null() {
            // SAFETY: the chain was type-checked by read_desc: each element is one of the two structures.
            let b = unsafe { std::ptr::read_unaligned(next as *const ze_base_desc_t) };
            if b.stype == ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_DESC {
                // SAFETY: as above.
                let e = unsafe {
                    std::ptr::read_unaligned(next as *const ze_external_memory_export_desc_t)
                };
                check_flags(e.flags, kinds, "ze_external_memory_export_desc_t.flags")?;
                exportable = e.flags != 0;
            } else {
                // SAFETY: as above.
                let i = unsafe {
                    std::ptr::read_unaligned(next as *const ze_external_memory_import_fd_t)
                };
                check_flags(i.flags, kinds, "ze_external_memory_import_fd_t.flags")?;
                if i.flags == 0 {
                    return Err(fail(
                        ZE_RESULT_ERROR_INVALID_ENUMERATION,
                        "ze_external_memory_import_fd_t.flags: no handle type",
                    ));
                }
                import = Some(i.fd);
            }
            next = b.pNext;
        }
        let memfd = match import {
            Some(fd) => {
                // SAFETY: the fd number is the caller's; it is only duplicated and inspected during this call (a
                // closed number makes the calls fail with EBADF).
                let bfd = unsafe { BorrowedFd::borrow_raw(fd) };
                let st = rustix::fs::fstat(bfd).map_err(|e| {
                    fail(
                        ZE_RESULT_ERROR_INVALID_ARGUMENT,
                        format_args!("zePhysicalMemCreate: import fd {fd} is not open ({e})"),
                    )
                })?;
                if (st.st_size as u64) < d.size as u64 {
                    return Err(fail(
                        ZE_RESULT_ERROR_INVALID_ARGUMENT,
                        format_args!(
                            "zePhysicalMemCreate: import fd {fd} has {} bytes, {} asked for",
                            st.st_size, d.size
                        ),
                    ));
                }
                rustix::io::fcntl_dupfd_cloexec(bfd, 0).map_err(|e| {
                    fail(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY, format_args!("dup: {e}"))
                })?
            }
            None => {
                let fd = rustix::fs::memfd_create(
                    format!("ze-emu:physical:dev{}", dev.index).as_str(),
                    rustix::fs::MemfdFlags::CLOEXEC,
                )
                .map_err(|e| {
                    fail(
                        ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY,
                        format_args!("memfd_create: {e}"),
                    )
                })?;
                rustix::fs::ftruncate(&fd, d.size as u64).map_err(|e| {
                    fail(
                        ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY,
                        format_args!("ftruncate {}: {e}", d.size),
                    )
                })?;
                take(dev.index, d.size)?;
                fd
            }
        };
        let p = Arc::new(Physical {
            memfd,
            held: if import.is_some() { 0 } else { d.size },
            size: d.size,
            device: dev,
            exportable,
            ctx: hctx.0 as usize,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        });
        let h = PHYSICAL.insert(p);
        // SAFETY: checked non-null.
        unsafe { out(ph, ze_physical_mem_handle_t(h)) }
    })
}

pub(crate) unsafe extern "C" fn physical_mem_destroy(
    hctx: ze_context_handle_t,
    h: ze_physical_mem_handle_t,
) -> ze_result_t {
    entry(|| {
        let ctx = context(hctx)?;
        let vm = lock(&ctx.vm);
        PHYSICAL
            .remove_if(h.0, |p| {
                if p.ctx != hctx.0 as usize {
                    return Err(fail(
                        ZE_RESULT_ERROR_INVALID_ARGUMENT,
                        "zePhysicalMemDestroy: physical memory of another context",
                    ));
                }
                if vm.maps.values().any(|m| Arc::ptr_eq(&m.phys, p)) {
                    return Err(fail(
                        ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE,
                        "zePhysicalMemDestroy: still mapped (zeVirtualMemUnmap first)",
                    ));
                }
                Ok(())
            })
            .map(|p| HELD[p.device.index as usize].fetch_sub(p.held, Ordering::AcqRel))?;
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn virtual_mem_map(
    hctx: ze_context_handle_t,
    ptr: *const c_void,
    size: usize,
    h: ze_physical_mem_handle_t,
    offset: usize,
    access: ze_memory_access_attribute_t,
) -> ze_result_t {
    entry(|| {
        let ctx = context(hctx)?;
        nn(ptr)?;
        let phys = PHYSICAL.get(h.0)?;
        let p = ptr as usize;
        check_aligned("address", p)?;
        check_size("mapping size", size)?;
        check_aligned("offset", offset)?;
        let prot = prot(access)?;
        if phys.ctx != hctx.0 as usize {
            return Err(fail(
                ZE_RESULT_ERROR_INVALID_ARGUMENT,
                "zeVirtualMemMap: physical memory of another context",
            ));
        }
        if offset.checked_add(size).is_none_or(|e| e > phys.size) {
            return Err(fail(
                ZE_RESULT_ERROR_INVALID_ARGUMENT,
                format_args!(
                    "zeVirtualMemMap: offset {offset} + size {size} past the physical memory's {} bytes",
                    phys.size
                ),
            ));
        }
        let mut vm = lock(&ctx.vm);
        if !vm.reserved(p, size) {
            return Err(fail(
                ZE_RESULT_ERROR_INVALID_ARGUMENT,
                format_args!(
                    "zeVirtualMemMap({ptr:p}, {size}): not inside one reservation of this context"
                ),
            ));
        }
        if vm
            .maps
            .range(..p + size)
            .next_back()
            .is_some_and(|(&a, m)| a + m.len > p)
        {
            return Err(fail(
                ZE_RESULT_ERROR_INVALID_ARGUMENT,
                format_args!("zeVirtualMemMap({ptr:p}, {size}): overlaps a mapping (zeVirtualMemUnmap first)"),
            ));
        }
        // SAFETY: [p, p + size) is inaccessible address space of a reservation of ours (checked, and not mapped),
        // which MAP_FIXED replaces with the memfd's pages.
        unsafe {
            rustix::mm::mmap(
                p as *mut c_void,
                size,
                prot,
                MapFlags::SHARED | MapFlags::FIXED,
                phys.memfd.as_fd(),
                offset as u64,
            )
        }
        .map_err(|e| {
            fail(
                ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY,
                format_args!("mmap {size} bytes: {e}"),
            )
        })?;
        vm.maps.insert(p, VMap { len: size, phys });
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn virtual_mem_unmap(
    hctx: ze_context_handle_t,
    ptr: *const c_void,
    size: usize,
) -> ze_result_t {
    entry(|| {
        let ctx = context(hctx)?;
        nn(ptr)?;
        let p = ptr as usize;
        check_aligned("address", p)?;
        check_size("size", size)?;
        let mut vm = lock(&ctx.vm);
        let tiles = vm.tiling(p, size).ok_or_else(|| {
            fail(
                ZE_RESULT_ERROR_INVALID_ARGUMENT,
                format_args!("zeVirtualMemUnmap({ptr:p}, {size}): not a range of whole mappings"),
            )
        })?;
        // SAFETY: the range lies in a reservation of ours (it is mapped, and mappings lie in reservations).
        unsafe { unback(p, size)? };
        for a in tiles {
            vm.maps.remove(&a);
        }
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn virtual_mem_set_access_attribute(
    hctx: ze_context_handle_t,
    ptr: *const c_void,
    size: usize,
    access: ze_memory_access_attribute_t,
) -> ze_result_t {
    entry(|| {
        let ctx = context(hctx)?;
        nn(ptr)?;
        let p = ptr as usize;
        check_aligned("address", p)?;
        check_size("size", size)?;
        let prot = prot(access)?;
        let vm = lock(&ctx.vm);
        vm.tiling(p, size).ok_or_else(|| {
            fail(
                ZE_RESULT_ERROR_INVALID_ARGUMENT,
                format_args!("zeVirtualMemSetAccessAttribute({ptr:p}, {size}): not a range of whole mappings"),
            )
        })?;
        let flags = rustix::mm::MprotectFlags::from_bits_truncate(prot.bits());
        // SAFETY: the range is mapped physical memory of ours (checked under the lock).
        unsafe { rustix::mm::mprotect(p as *mut c_void, size, flags) }.map_err(|e| {
            fail(
                ZE_RESULT_ERROR_INVALID_ARGUMENT,
                format_args!("mprotect: {e}"),
            )
        })
    })
}

/// Physical memory's id and device, and an exported fd.
type Mapped = (u64, Arc<Device>, Option<OwnedFd>);

/// What `zeMemGetAllocProperties` reports for an address of mapped physical memory: (id, device), and, when
/// `export` is asked for, a fresh duplicate of its memfd (owned by the caller).
pub(crate) fn mapped_properties(
    ctx: &crate::objects::Context,
    p: usize,
    export: bool,
) -> ZeResult<Option<Mapped>> {
    let vm = lock(&ctx.vm);
    let Some((_, _, phys)) = vm.mapping_at(p) else {
        return Ok(None);
    };
    let fd = if export {
        if !phys.exportable {
            return Err(fail(
                ZE_RESULT_ERROR_UNSUPPORTED_FEATURE,
                "zeMemGetAllocProperties: ze_external_memory_export_fd_t on physical memory not created with \
                 ze_external_memory_export_desc_t",
            ));
        }
        Some(
            rustix::io::fcntl_dupfd_cloexec(&phys.memfd, 0)
                .map_err(|e| fail(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY, format_args!("dup: {e}")))?,
        )
    } else {
        None
    };
    Ok(Some((phys.id, phys.device.clone(), fd)))
}
