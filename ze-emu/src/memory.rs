//! Memory: every allocation (device, host or shared) is its own memfd mapped `MAP_SHARED`, so it can be exported
//! as a real file descriptor. IPC handles carry that fd like Intel's driver does (first 4 bytes), plus sizes.

use crate::objects::{context, device, Allocation, Device, MAX_ALLOC};
use crate::util::*;
use level_zero_sys::*;
use rustix::fd::{AsFd, AsRawFd, BorrowedFd};
use rustix::mm::{MapFlags, ProtFlags};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Byte offsets inside the 64-byte IPC handle.
pub mod ipc_layout {
    /// `i32` file descriptor (process-local; the importer patches in its own copy).
    pub const FD: usize = 0;
    /// `u64` length of the mapping (page multiple).
    pub const MAP_LEN: usize = 8;
    /// 8-byte magic.
    pub const MAGIC: usize = 16;
    /// `u64` size the allocation was requested with.
    pub const SIZE: usize = 24;
    /// `u32` exporter pid.
    pub const PID: usize = 32;
    /// `u32` memory type of the exported allocation.
    pub const TYPE: usize = 36;
    /// The magic value.
    pub const MAGIC_VALUE: &[u8; 8] = b"ZEEMUIPC";
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn page_size() -> usize {
    rustix::param::page_size()
}

fn round_up(v: usize, to: usize) -> Option<usize> {
    v.checked_add(to - 1).map(|x| x / to * to)
}

/// Maps `len` bytes of `fd` shared at an address aligned to `align` (a power of two).
fn map_aligned(fd: BorrowedFd<'_>, len: usize, align: usize) -> ZeResult<usize> {
    let page = page_size();
    let prot = ProtFlags::READ | ProtFlags::WRITE;
    if align <= page {
        // SAFETY: a fresh shared mapping at a kernel-chosen address; it aliases nothing of ours.
        let p =
            unsafe { rustix::mm::mmap(std::ptr::null_mut(), len, prot, MapFlags::SHARED, fd, 0) }
                .map_err(|e| {
                fail(
                    ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY,
                    format_args!("mmap {len} bytes: {e}"),
                )
            })?;
        return Ok(p as usize);
    }
    let aligned = reserve_aligned(len, align, ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)?;
    // SAFETY: [aligned, aligned+len) is our own reservation, which MAP_FIXED replaces.
    let r = unsafe {
        rustix::mm::mmap(
            aligned as *mut c_void,
            len,
            prot,
            MapFlags::SHARED | MapFlags::FIXED,
            fd,
            0,
        )
    };
    match r {
        Ok(_) => Ok(aligned),
        Err(e) => {
            // SAFETY: the window is still our reservation.
            let _ = unsafe { rustix::mm::munmap(aligned as *mut c_void, len) };
            Err(fail(
                ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY,
                format_args!("mmap {len} bytes: {e}"),
            ))
        }
    }
}

fn allocate(
    size: usize,
    alignment: usize,
    kind: ze_memory_type_t,
    dev: Option<Arc<Device>>,
) -> ZeResult<Allocation> {
    if size == 0 {
        return Err(ZE_RESULT_ERROR_UNSUPPORTED_SIZE);
    }
    if alignment != 0 && (!alignment.is_power_of_two() || alignment > (1 << 30)) {
        return Err(ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT);
    }
    let map_len = round_up(size, page_size()).ok_or(ZE_RESULT_ERROR_UNSUPPORTED_SIZE)?;
    let name = match &dev {
        Some(d) => format!("ze-emu:{kind}:dev{}", d.index),
        None => format!("ze-emu:{kind}"),
    };
    let fd =
        rustix::fs::memfd_create(name.as_str(), rustix::fs::MemfdFlags::CLOEXEC).map_err(|e| {
            fail(
                ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY,
                format_args!("memfd_create: {e}"),
            )
        })?;
    rustix::fs::ftruncate(&fd, map_len as u64).map_err(|e| {
        fail(
            ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY,
            format_args!("ftruncate {map_len}: {e}"),
        )
    })?;
    let base = map_aligned(fd.as_fd(), map_len, alignment.max(1))?;
    Ok(Allocation {
        base,
        size,
        map_len,
        kind,
        device: dev,
        memfd: Some(fd),
        export_fd: None,
        imported: false,
        id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
    })
}

/// Reads a device allocation descriptor; returns whether relaxed allocation limits were requested.
///
/// # Safety
/// `desc` must be null or point to a readable descriptor with a valid chain.
unsafe fn device_desc(desc: *const ze_device_mem_alloc_desc_t) -> ZeResult<bool> {
    // SAFETY: caller guarantee.
    let d = unsafe {
        read_desc(
            desc,
            &[ZE_STRUCTURE_TYPE_RELAXED_ALLOCATION_LIMITS_EXP_DESC],
        )?
    };
    check_flags(d.flags, 0x7, "ze_device_mem_alloc_desc_t.flags")?;
    if d.ordinal != 0 {
        return Err(fail(
            ZE_RESULT_ERROR_INVALID_ARGUMENT,
            format_args!("memory ordinal {} (only 0 exists)", d.ordinal),
        ));
    }
    let mut relaxed = false;
    let mut next = d.pNext;
    while !next.is_null() {
        // SAFETY: chain elements were type-checked by read_desc; this one is the relaxed-limits descriptor.
        let r = unsafe {
            std::ptr::read_unaligned(next as *const ze_relaxed_allocation_limits_exp_desc_t)
        };
        check_flags(
            r.flags,
            ZE_RELAXED_ALLOCATION_LIMITS_EXP_FLAG_MAX_SIZE,
            "relaxed allocation limits flags",
        )?;
        relaxed |= r.flags & ZE_RELAXED_ALLOCATION_LIMITS_EXP_FLAG_MAX_SIZE != 0;
        next = r.pNext;
    }
    Ok(relaxed)
}

/// # Safety
/// `desc` must be null or point to a readable descriptor.
unsafe fn host_desc(desc: *const ze_host_mem_alloc_desc_t) -> ZeResult {
    // SAFETY: caller guarantee.
    let d = unsafe { read_desc(desc, &[])? };
    check_flags(d.flags, 0xf, "ze_host_mem_alloc_desc_t.flags")
}

fn check_size(size: usize, relaxed: bool) -> ZeResult {
    if size as u64 > MAX_ALLOC && !relaxed {
        return Err(fail(
            ZE_RESULT_ERROR_UNSUPPORTED_SIZE,
            format_args!("size {size} exceeds maxMemAllocSize {MAX_ALLOC} (chain ze_relaxed_allocation_limits_exp_desc_t)"),
        ));
    }
    Ok(())
}

fn register(ctx: &crate::objects::Context, a: Allocation, pptr: *mut *mut c_void) -> ZeResult {
    let base = a.base;
    lock(&ctx.allocs).insert(base, a);
    // SAFETY: pptr was null-checked by the caller of register.
    unsafe { *pptr = base as *mut c_void };
    Ok(())
}

pub(crate) unsafe extern "C" fn mem_alloc_device(
    hctx: ze_context_handle_t,
    desc: *const ze_device_mem_alloc_desc_t,
    size: usize,
    alignment: usize,
    hdev: ze_device_handle_t,
    pptr: *mut *mut c_void,
) -> ze_result_t {
    entry(|| {
        let ctx = context(hctx)?;
        let dev = device(hdev)?;
        // SAFETY: caller's descriptor.
        let relaxed = unsafe { device_desc(desc)? };
        nn_mut(pptr)?;
        check_size(size, relaxed)?;
        let a = allocate(size, alignment, ZE_MEMORY_TYPE_DEVICE, Some(dev))?;
        register(&ctx, a, pptr)
    })
}

pub(crate) unsafe extern "C" fn mem_alloc_host(
    hctx: ze_context_handle_t,
    desc: *const ze_host_mem_alloc_desc_t,
    size: usize,
    alignment: usize,
    pptr: *mut *mut c_void,
) -> ze_result_t {
    entry(|| {
        let ctx = context(hctx)?;
        // SAFETY: caller's descriptor.
        unsafe { host_desc(desc)? };
        nn_mut(pptr)?;
        let a = allocate(size, alignment, ZE_MEMORY_TYPE_HOST, None)?;
        register(&ctx, a, pptr)
    })
}

pub(crate) unsafe extern "C" fn mem_alloc_shared(
    hctx: ze_context_handle_t,
    ddesc: *const ze_device_mem_alloc_desc_t,
    hdesc: *const ze_host_mem_alloc_desc_t,
    size: usize,
    alignment: usize,
    hdev: ze_device_handle_t,
    pptr: *mut *mut c_void,
) -> ze_result_t {
    entry(|| {
        let ctx = context(hctx)?;
        let dev = if hdev.is_null() {
            None
        } else {
            Some(device(hdev)?)
        };
        // SAFETY: caller's descriptors.
        let relaxed = unsafe { device_desc(ddesc)? };
        // SAFETY: as above.
        unsafe { host_desc(hdesc)? };
        nn_mut(pptr)?;
        check_size(size, relaxed)?;
        let a = allocate(size, alignment, ZE_MEMORY_TYPE_SHARED, dev)?;
        register(&ctx, a, pptr)
    })
}

pub(crate) unsafe extern "C" fn mem_free(
    hctx: ze_context_handle_t,
    ptr: *mut c_void,
) -> ze_result_t {
    entry(|| {
        let ctx = context(hctx)?;
        nn(ptr)?;
        let mut allocs = lock(&ctx.allocs);
        match allocs.get(&(ptr as usize)) {
            Some(a) if !a.imported => {
                allocs.remove(&(ptr as usize));
                Ok(())
            }
            Some(_) => Err(fail(
                ZE_RESULT_ERROR_INVALID_ARGUMENT,
                format_args!("zeMemFree({ptr:p}): an IPC mapping; use zeMemCloseIpcHandle"),
            )),
            None => Err(fail(
                ZE_RESULT_ERROR_INVALID_ARGUMENT,
                format_args!("zeMemFree({ptr:p}): not an allocation base of this context"),
            )),
        }
    })
}

/// What a pointer lookup returns: (base, size, kind, device, id).
type Found = (usize, usize, ze_memory_type_t, Option<Arc<Device>>, u64);

/// Finds the allocation containing `p`.
fn lookup(ctx: &crate::objects::Context, p: usize) -> Option<Found> {
    let allocs = lock(&ctx.allocs);
    let (_, a) = allocs.range(..=p).next_back()?;
    (p < a.base + a.size).then(|| (a.base, a.size, a.kind, a.device.clone(), a.id))
}

pub(crate) unsafe extern "C" fn mem_get_alloc_properties(
    hctx: ze_context_handle_t,
    ptr: *const c_void,
    props: *mut ze_memory_allocation_properties_t,
    phdev: *mut ze_device_handle_t,
) -> ze_result_t {
    entry(|| {
        let ctx = context(hctx)?;
        nn(ptr)?;
        // SAFETY: caller's output structure, checked inside; the only extension is the export-fd request.
        let props = unsafe { check_props(props, &[ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_FD])? };
        // SAFETY: checked non-null / stype.
        let export = unsafe { (*props).pNext } as *mut ze_external_memory_export_fd_t;
        if !export.is_null() {
            // SAFETY: the chain was type-checked: its one element is the export-fd structure.
            let flags = unsafe { (*export).flags };
            check_flags(
                flags,
                ZE_EXTERNAL_MEMORY_TYPE_FLAG_OPAQUE_FD | ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF,
                "ze_external_memory_export_fd_t.flags",
            )?;
        }
        let found = lookup(&ctx, ptr as usize);
        let mapped = match found {
            Some(_) if !export.is_null() => {
                return Err(fail(
                    ZE_RESULT_ERROR_UNSUPPORTED_FEATURE,
                    "zeMemGetAllocProperties: ze-emu exports physical memory only (use zeMemGetIpcHandle)",
                ))
            }
            Some(_) => None,
            None => crate::vmem::mapped_properties(&ctx, ptr as usize, !export.is_null())?,
        };
        // SAFETY: checked non-null / stype.
        let p = unsafe { &mut *props };
        let dev = match (found, mapped) {
            (Some((_, _, kind, dev, id)), _) => {
                p.type_ = kind;
                p.id = id;
                p.pageSize = page_size() as u64;
                dev
            }
            (None, Some((id, dev, fd))) => {
                p.type_ = ZE_MEMORY_TYPE_DEVICE;
                p.id = id;
                p.pageSize = crate::vmem::VM_PAGE as u64;
                if let Some(fd) = fd {
                    use rustix::fd::IntoRawFd;
                    // SAFETY: `export` is the caller's export-fd structure (checked); the fd is now theirs.
                    unsafe { (*export).fd = fd.into_raw_fd() };
                }
                Some(dev)
            }
            (None, None) => {
                if !export.is_null() {
                    return Err(fail(
                        ZE_RESULT_ERROR_INVALID_ARGUMENT,
                        format_args!("zeMemGetAllocProperties({ptr:p}): nothing to export there"),
                    ));
                }
                p.type_ = ZE_MEMORY_TYPE_UNKNOWN;
                p.id = 0;
                p.pageSize = 0;
                None
            }
        };
        if !phdev.is_null() {
            let h = dev
                .as_ref()
                .map(crate::objects::device_handle)
                .unwrap_or_default();
            // SAFETY: caller's optional output pointer, non-null.
            unsafe { *phdev = h };
        }
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn mem_get_address_range(
    hctx: ze_context_handle_t,
    ptr: *const c_void,
    pbase: *mut *mut c_void,
    psize: *mut usize,
) -> ze_result_t {
    entry(|| {
        let ctx = context(hctx)?;
        nn(ptr)?;
        let (base, size, ..) = lookup(&ctx, ptr as usize).ok_or_else(|| {
            fail(
                ZE_RESULT_ERROR_INVALID_ARGUMENT,
                format_args!("zeMemGetAddressRange({ptr:p}): unknown pointer"),
            )
        })?;
        if !pbase.is_null() {
            // SAFETY: caller's optional output pointer, non-null.
            unsafe { *pbase = base as *mut c_void };
        }
        if !psize.is_null() {
            // SAFETY: as above.
            unsafe { *psize = size };
        }
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn mem_get_ipc_handle(
    hctx: ze_context_handle_t,
    ptr: *const c_void,
    ph: *mut ze_ipc_mem_handle_t,
) -> ze_result_t {
    entry(|| {
        let ctx = context(hctx)?;
        nn(ptr)?;
        nn_mut(ph)?;
        let mut allocs = lock(&ctx.allocs);
        let p = ptr as usize;
        let a = allocs
            .range_mut(..=p)
            .next_back()
            .map(|(_, a)| a)
            .filter(|a| p < a.base + a.size)
            .ok_or_else(|| {
                fail(
                    ZE_RESULT_ERROR_INVALID_ARGUMENT,
                    format_args!("zeMemGetIpcHandle({ptr:p}): not an allocation of this context"),
                )
            })?;
        let memfd = a.memfd.as_ref().ok_or_else(|| {
            fail(
                ZE_RESULT_ERROR_INVALID_ARGUMENT,
                format_args!(
                    "zeMemGetIpcHandle({ptr:p}): an imported IPC mapping cannot be re-exported"
                ),
            )
        })?;
        if a.export_fd.is_none() {
            let dup = rustix::io::fcntl_dupfd_cloexec(memfd, 0)
                .map_err(|e| fail(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY, format_args!("dup: {e}")))?;
            a.export_fd = Some(dup);
        }
        let fd = a.export_fd.as_ref().map(|f| f.as_raw_fd()).unwrap_or(-1);
        let mut bytes = [0u8; ZE_MAX_IPC_HANDLE_SIZE];
        bytes[ipc_layout::FD..ipc_layout::FD + 4].copy_from_slice(&fd.to_le_bytes());
        bytes[ipc_layout::MAP_LEN..ipc_layout::MAP_LEN + 8]
            .copy_from_slice(&(a.map_len as u64).to_le_bytes());
        bytes[ipc_layout::MAGIC..ipc_layout::MAGIC + 8].copy_from_slice(ipc_layout::MAGIC_VALUE);
        bytes[ipc_layout::SIZE..ipc_layout::SIZE + 8]
            .copy_from_slice(&(a.size as u64).to_le_bytes());
        bytes[ipc_layout::PID..ipc_layout::PID + 4]
            .copy_from_slice(&std::process::id().to_le_bytes());
        bytes[ipc_layout::TYPE..ipc_layout::TYPE + 4].copy_from_slice(&a.kind.0.to_le_bytes());
        let mut h = ze_ipc_mem_handle_t::default();
        for (d, s) in h.data.iter_mut().zip(bytes) {
            *d = s as std::ffi::c_char;
        }
        // SAFETY: checked non-null.
        unsafe { *ph = h };
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn mem_open_ipc_handle(
    hctx: ze_context_handle_t,
    hdev: ze_device_handle_t,
    handle: ze_ipc_mem_handle_t,
    flags: ze_ipc_memory_flags_t,
    pptr: *mut *mut c_void,
) -> ze_result_t {
    entry(|| {
        let ctx = context(hctx)?;
        let dev = device(hdev)?;
        check_flags(
            flags,
            ZE_IPC_MEMORY_FLAG_BIAS_CACHED | ZE_IPC_MEMORY_FLAG_BIAS_UNCACHED,
            "zeMemOpenIpcHandle flags",
        )?;
        nn_mut(pptr)?;
        let b: Vec<u8> = handle.data.iter().map(|c| *c as u8).collect();
        if &b[ipc_layout::MAGIC..ipc_layout::MAGIC + 8] != ipc_layout::MAGIC_VALUE {
            return Err(fail(
                ZE_RESULT_ERROR_INVALID_ARGUMENT,
                "zeMemOpenIpcHandle: not a ze-emu IPC handle",
            ));
        }
        let fd = i32::from_le_bytes(b[0..4].try_into().expect("4 bytes"));
        let map_len = u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")) as usize;
        let size = u64::from_le_bytes(b[24..32].try_into().expect("8 bytes")) as usize;
        if fd < 0 || map_len == 0 || size > map_len {
            return Err(fail(
                ZE_RESULT_ERROR_INVALID_ARGUMENT,
                format_args!("zeMemOpenIpcHandle: corrupt handle (fd {fd}, size {size})"),
            ));
        }
        // SAFETY: the fd number comes from the caller's handle; it is only used for fstat/mmap during this call,
        // and a closed number makes those calls fail with EBADF.
        let bfd = unsafe { BorrowedFd::borrow_raw(fd) };
        let st = rustix::fs::fstat(bfd).map_err(|e| {
            fail(ZE_RESULT_ERROR_INVALID_ARGUMENT, format_args!("zeMemOpenIpcHandle: fd {fd} in the handle is not open in this process ({e}); pass it with SCM_RIGHTS or pidfd_getfd and patch it in"))
        })?;
        if (st.st_size as u64) < map_len as u64 {
            return Err(fail(
                ZE_RESULT_ERROR_INVALID_ARGUMENT,
                format_args!(
                    "zeMemOpenIpcHandle: fd {fd} has {} bytes, handle says {map_len}",
                    st.st_size
                ),
            ));
        }
        let base = map_aligned(bfd, map_len, 1)?;
        let a = Allocation {
            base,
            size,
            map_len,
            kind: ZE_MEMORY_TYPE_DEVICE,
            device: Some(dev),
            memfd: None,
            export_fd: None,
            imported: true,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        };
        register(&ctx, a, pptr)
    })
}

pub(crate) unsafe extern "C" fn mem_close_ipc_handle(
    hctx: ze_context_handle_t,
    ptr: *const c_void,
) -> ze_result_t {
    entry(|| {
        let ctx = context(hctx)?;
        nn(ptr)?;
        let mut allocs = lock(&ctx.allocs);
        match allocs.get(&(ptr as usize)) {
            Some(a) if a.imported => {
                allocs.remove(&(ptr as usize));
                Ok(())
            }
            _ => Err(fail(
                ZE_RESULT_ERROR_INVALID_ARGUMENT,
                format_args!(
                    "zeMemCloseIpcHandle({ptr:p}): not a pointer returned by zeMemOpenIpcHandle"
                ),
            )),
        }
    })
}
