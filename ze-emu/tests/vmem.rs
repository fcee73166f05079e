//! Virtual memory through the real loader: a reservation, exportable physical memory mapped into it and filled by
//! a copy-engine fill, the chunk exported as an fd (`zeMemGetAllocProperties` with
//! `ze_external_memory_export_fd_t`), imported into a second reservation (`ze_external_memory_import_fd_t`) where
//! the same bytes show; the page size is enforced and misuse is an error, not a crash.

#![allow(clippy::macro_metavars_in_unsafe)] // the ze! macro passes (deliberately invalid) arguments to FFI calls

mod common;
use common::*;
use rustix::fd::{FromRawFd, OwnedFd};
use std::ffi::c_void;
use std::ptr::null_mut;

/// Create physical memory of `size` bytes, chained with `next` (an export or import descriptor, or null).
fn physical(env: &Env, size: usize, next: *const c_void) -> ze_physical_mem_handle_t {
    let mut desc = ze_physical_mem_desc_t {
        pNext: next,
        size,
        ..Default::default()
    };
    let mut h = ze_physical_mem_handle_t::null();
    ze_ok!(
        env,
        zePhysicalMemCreate(env.ctx, env.dev(), &mut desc, &mut h)
    );
    h
}

emu_test!(reserve_map_export_import, |env| {
    let mut page = 0usize;
    ze_ok!(
        env,
        zeVirtualMemQueryPageSize(env.ctx, env.dev(), 1 << 20, &mut page)
    );
    assert_eq!(page, 64 << 10, "ze-emu's page");
    let span = 8 * page;
    let hint = page as *const c_void;
    let (mut a, mut b): (*mut c_void, *mut c_void) = (null_mut(), null_mut());
    ze_ok!(env, zeVirtualMemReserve(env.ctx, hint, span, &mut a));
    ze_ok!(env, zeVirtualMemReserve(env.ctx, hint, span, &mut b));
    assert!(a as usize % page == 0 && b as usize % page == 0 && a != b);
    // Exportable memory, mapped at the reservation's second page, filled through a command list.
    let export = ze_external_memory_export_desc_t {
        flags: ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF,
        ..Default::default()
    };
    let len = 2 * page;
    let h = physical(
        &env,
        len,
        (&export as *const ze_external_memory_export_desc_t).cast(),
    );
    let at = (a as usize + page) as *mut c_void;
    ze_ok!(
        env,
        zeVirtualMemMap(env.ctx, at, len, h, 0, ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE)
    );
    let list = env.immediate(0, ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS);
    let pattern = 0x5Au8;
    ze_ok!(
        env,
        zeCommandListAppendMemoryFill(
            list,
            at,
            (&pattern as *const u8).cast(),
            1,
            len,
            ze_event_handle_t::null(),
            0,
            null_mut()
        )
    );
    // Its properties: device memory of the ze-emu page size; exported as an fd the caller owns.
    let mut fd = ze_external_memory_export_fd_t {
        flags: ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF,
        fd: -1,
        ..Default::default()
    };
    let mut props = ze_memory_allocation_properties_t {
        pNext: (&mut fd as *mut ze_external_memory_export_fd_t).cast(),
        ..Default::default()
    };
    ze_ok!(
        env,
        zeMemGetAllocProperties(env.ctx, at, &mut props, null_mut())
    );
    assert_eq!(props.type_, ZE_MEMORY_TYPE_DEVICE);
    assert_eq!(props.pageSize, page as u64);
    assert!(fd.fd >= 0, "an exported fd");
    // SAFETY: the driver handed over a fresh descriptor.
    let owned = unsafe { OwnedFd::from_raw_fd(fd.fd) };
    // Imported into the second reservation, at another offset: the same bytes, and writes are shared.
    let import = ze_external_memory_import_fd_t {
        flags: ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF,
        fd: fd.fd,
        ..Default::default()
    };
    let hi = physical(
        &env,
        len,
        (&import as *const ze_external_memory_import_fd_t).cast(),
    );
    drop(owned); // the driver keeps its own reference
    let bt = (b as usize + 3 * page) as *mut c_void;
    ze_ok!(
        env,
        zeVirtualMemMap(
            env.ctx,
            bt,
            len,
            hi,
            0,
            ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE
        )
    );
    // SAFETY: both ranges are mapped, readable and writable, len bytes each.
    unsafe {
        let (x, y) = (at as *mut u8, bt as *mut u8);
        assert!(
            (0..len).all(|i| *y.add(i) == pattern),
            "the imported chunk shows the fill"
        );
        *y.add(len - 1) = 0x11;
        assert_eq!(
            *x.add(len - 1),
            0x11,
            "a write through the import shows in the original"
        );
    }
    // Misuse: an unaligned address, a size off the page, an overlapping mapping, destroying mapped memory.
    let odd = (a as usize + 4096) as *const c_void;
    let r = ze!(
        env,
        zeVirtualMemMap(
            env.ctx,
            odd,
            page,
            h,
            0,
            ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE
        )
    );
    assert_ne!(r, ZE_RESULT_SUCCESS, "unaligned address");
    let mut desc = ze_physical_mem_desc_t {
        size: 4096,
        ..Default::default()
    };
    let mut h2 = ze_physical_mem_handle_t::null();
    assert_eq!(
        ze!(
            env,
            zePhysicalMemCreate(env.ctx, env.dev(), &mut desc, &mut h2)
        ),
        ZE_RESULT_ERROR_UNSUPPORTED_SIZE,
        "a size that is not a page multiple"
    );
    let r = ze!(
        env,
        zeVirtualMemMap(
            env.ctx,
            a,
            2 * page,
            h,
            0,
            ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE
        )
    );
    assert_ne!(
        r, ZE_RESULT_SUCCESS,
        "overlaps the mapping at the second page"
    );
    assert_eq!(
        ze!(env, zePhysicalMemDestroy(env.ctx, h)),
        ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE
    );
    // Memory not created exportable is not exported.
    let plain = physical(&env, page, std::ptr::null());
    let pt = (a as usize + 5 * page) as *mut c_void;
    ze_ok!(
        env,
        zeVirtualMemMap(
            env.ctx,
            pt,
            page,
            plain,
            0,
            ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE
        )
    );
    let mut fd2 = ze_external_memory_export_fd_t {
        flags: ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF,
        fd: -1,
        ..Default::default()
    };
    let mut props = ze_memory_allocation_properties_t {
        pNext: (&mut fd2 as *mut ze_external_memory_export_fd_t).cast(),
        ..Default::default()
    };
    assert_ne!(
        ze!(
            env,
            zeMemGetAllocProperties(env.ctx, pt, &mut props, null_mut())
        ),
        ZE_RESULT_SUCCESS
    );
    // Unmap, destroy, free.
    for (p, l, m) in [(at, len, h), (bt, len, hi), (pt, page, plain)] {
        ze_ok!(env, zeVirtualMemUnmap(env.ctx, p, l));
        ze_ok!(env, zePhysicalMemDestroy(env.ctx, m));
    }
    ze_ok!(env, zeVirtualMemFree(env.ctx, a, span));
    ze_ok!(env, zeVirtualMemFree(env.ctx, b, span));
});
