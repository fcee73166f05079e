//! Allocations, allocation queries, frees and their error returns, through the real loader.

#![allow(clippy::macro_metavars_in_unsafe)] // the ze! macro passes (deliberately invalid) arguments to FFI calls

mod common;
use common::*;
use std::ffi::c_void;
use std::ptr::null_mut;

emu_test!(alloc_kinds_and_properties, |env| {
    let d = env.dev();
    let dd = ze_device_mem_alloc_desc_t::default();
    let hd = ze_host_mem_alloc_desc_t::default();
    let (mut pd, mut ph, mut ps): (*mut c_void, *mut c_void, *mut c_void) =
        (null_mut(), null_mut(), null_mut());
    ze_ok!(env, zeMemAllocDevice(env.ctx, &dd, 10_000, 0, d, &mut pd));
    ze_ok!(env, zeMemAllocHost(env.ctx, &hd, 5000, 64, &mut ph));
    ze_ok!(
        env,
        zeMemAllocShared(env.ctx, &dd, &hd, 3000, 4096, d, &mut ps)
    );
    for (p, kind, has_dev) in [
        (pd, ZE_MEMORY_TYPE_DEVICE, true),
        (ph, ZE_MEMORY_TYPE_HOST, false),
        (ps, ZE_MEMORY_TYPE_SHARED, true),
    ] {
        // Memory is host accessible (memfd mapping), zero-initialised.
        // SAFETY: p is a live allocation of at least 3000 bytes.
        unsafe {
            assert_eq!(*(p as *const u8).add(2999), 0);
            *(p as *mut u8).add(2999) = 7;
        }
        let mut props = ze_memory_allocation_properties_t::default();
        let mut dev = ze_device_handle_t::null();
        // An interior pointer resolves to the same allocation.
        // SAFETY: inside the allocation.
        let inner = unsafe { (p as *mut u8).add(100) } as *const c_void;
        ze_ok!(
            env,
            zeMemGetAllocProperties(env.ctx, inner, &mut props, &mut dev)
        );
        assert_eq!(props.type_, kind);
        assert_ne!(props.id, 0);
        assert_eq!(props.pageSize, 4096);
        assert_eq!(dev == d, has_dev);
        assert_eq!(dev.is_null(), !has_dev);
        let (mut base, mut size) = (null_mut(), 0usize);
        ze_ok!(
            env,
            zeMemGetAddressRange(env.ctx, inner, &mut base, &mut size)
        );
        assert_eq!(base, p);
        assert!(size == 10_000 || size == 5000 || size == 3000);
    }
    assert_eq!(ps as usize % 4096, 0);
    // An unknown pointer is ZE_MEMORY_TYPE_UNKNOWN, not an error.
    let local = 5u64;
    let mut props = ze_memory_allocation_properties_t::default();
    ze_ok!(
        env,
        zeMemGetAllocProperties(
            env.ctx,
            &local as *const u64 as *const c_void,
            &mut props,
            null_mut()
        )
    );
    assert_eq!(props.type_, ZE_MEMORY_TYPE_UNKNOWN);
    let (mut base, mut size) = (null_mut(), 0usize);
    assert_eq!(
        ze!(
            env,
            zeMemGetAddressRange(
                env.ctx,
                &local as *const u64 as *const c_void,
                &mut base,
                &mut size
            )
        ),
        ZE_RESULT_ERROR_INVALID_ARGUMENT
    );
    for p in [pd, ph, ps] {
        ze_ok!(env, zeMemFree(env.ctx, p));
    }
    // After free, the pointer is unknown again and a second free fails.
    ze_ok!(
        env,
        zeMemGetAllocProperties(env.ctx, pd, &mut props, null_mut())
    );
    assert_eq!(props.type_, ZE_MEMORY_TYPE_UNKNOWN);
    assert_eq!(
        ze!(env, zeMemFree(env.ctx, pd)),
        ZE_RESULT_ERROR_INVALID_ARGUMENT
    );
});

emu_test!(large_alignment_is_honoured, |env| {
    let dd = ze_device_mem_alloc_desc_t::default();
    for align in [1usize << 16, 1 << 21] {
        let mut p = null_mut();
        ze_ok!(
            env,
            zeMemAllocDevice(env.ctx, &dd, 12345, align, env.dev(), &mut p)
        );
        assert_eq!(p as usize % align, 0, "alignment {align}");
        // SAFETY: within the allocation.
        unsafe { std::ptr::write_bytes(p as *mut u8, 0xab, 12345) };
        ze_ok!(env, zeMemFree(env.ctx, p));
    }
});

emu_test!(allocation_errors, |env| {
    let d = env.dev();
    let dd = ze_device_mem_alloc_desc_t::default();
    let mut p = null_mut();
    assert_eq!(
        ze!(env, zeMemAllocDevice(env.ctx, &dd, 0, 0, d, &mut p)),
        ZE_RESULT_ERROR_UNSUPPORTED_SIZE
    );
    assert_eq!(
        ze!(env, zeMemAllocDevice(env.ctx, &dd, 100, 3, d, &mut p)),
        ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT
    );
    assert_eq!(
        ze!(
            env,
            zeMemAllocDevice(env.ctx, &dd, (4 << 30) + 1, 0, d, &mut p)
        ),
        ZE_RESULT_ERROR_UNSUPPORTED_SIZE
    );
    let bad = ze_device_mem_alloc_desc_t {
        stype: ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC,
        ..Default::default()
    };
    assert_eq!(
        ze!(env, zeMemAllocDevice(env.ctx, &bad, 100, 0, d, &mut p)),
        ZE_RESULT_ERROR_INVALID_ARGUMENT
    );
    let bad_ord = ze_device_mem_alloc_desc_t {
        ordinal: 1,
        ..Default::default()
    };
    assert_eq!(
        ze!(env, zeMemAllocDevice(env.ctx, &bad_ord, 100, 0, d, &mut p)),
        ZE_RESULT_ERROR_INVALID_ARGUMENT
    );
    let bad_flags = ze_device_mem_alloc_desc_t {
        flags: 0x80,
        ..Default::default()
    };
    assert_ne!(
        ze!(
            env,
            zeMemAllocDevice(env.ctx, &bad_flags, 100, 0, d, &mut p)
        ),
        ZE_RESULT_SUCCESS
    );
    assert_eq!(
        ze!(
            env,
            zeMemAllocDevice(ze_context_handle_t::null(), &dd, 100, 0, d, &mut p)
        ),
        ZE_RESULT_ERROR_INVALID_NULL_HANDLE
    );
    assert_eq!(
        ze!(
            env,
            zeMemAllocDevice(env.ctx, &dd, 100, 0, ze_device_handle_t::null(), &mut p)
        ),
        ZE_RESULT_ERROR_INVALID_NULL_HANDLE
    );
    assert_eq!(
        ze!(env, zeMemAllocDevice(env.ctx, &dd, 100, 0, d, null_mut())),
        ZE_RESULT_ERROR_INVALID_NULL_POINTER
    );
    // Relaxed limits allow more than maxMemAllocSize (memfd pages are allocated lazily).
    let relaxed = ze_relaxed_allocation_limits_exp_desc_t {
        flags: ZE_RELAXED_ALLOCATION_LIMITS_EXP_FLAG_MAX_SIZE,
        ..Default::default()
    };
    let big = ze_device_mem_alloc_desc_t {
        pNext: &relaxed as *const _ as *const c_void,
        ..Default::default()
    };
    ze_ok!(
        env,
        zeMemAllocDevice(env.ctx, &big, (4 << 30) + 4096, 0, d, &mut p)
    );
    ze_ok!(env, zeMemFree(env.ctx, p));
    // Freeing an interior pointer or a stranger's pointer fails.
    let q = env.alloc_device(8192);
    // SAFETY: inside the allocation.
    let inner = unsafe { q.add(8) } as *mut c_void;
    assert_eq!(
        ze!(env, zeMemFree(env.ctx, inner)),
        ZE_RESULT_ERROR_INVALID_ARGUMENT
    );
    // Another context does not know the allocation.
    let mut c2 = ze_context_handle_t::null();
    ze_ok!(
        env,
        zeContextCreate(env.driver, &ze_context_desc_t::default(), &mut c2)
    );
    assert_eq!(
        ze!(env, zeMemFree(c2, q as *mut c_void)),
        ZE_RESULT_ERROR_INVALID_ARGUMENT
    );
    ze_ok!(env, zeMemFree(env.ctx, q as *mut c_void));
    ze_ok!(env, zeContextDestroy(c2));
});

emu_test!(ipc_handle_in_one_process, |env| {
    let p = env.alloc_device(3 * 4096 + 10);
    // SAFETY: inside the allocation.
    unsafe { std::ptr::write_bytes(p, 0x5a, 3 * 4096 + 10) };
    let mut h = ze_ipc_mem_handle_t::default();
    ze_ok!(env, zeMemGetIpcHandle(env.ctx, p as *const c_void, &mut h));
    let bytes: Vec<u8> = h.data.iter().map(|c| *c as u8).collect();
    assert_eq!(&bytes[16..24], b"ZEEMUIPC");
    let fd = i32::from_le_bytes(bytes[0..4].try_into().unwrap());
    assert!(fd > 2, "a real fd in the first 4 bytes: {fd}");
    assert_eq!(
        u64::from_le_bytes(bytes[24..32].try_into().unwrap()),
        3 * 4096 + 10
    );
    // The same process can open it: a second mapping of the same memory.
    let mut q = null_mut();
    ze_ok!(env, zeMemOpenIpcHandle(env.ctx, env.dev(), h, 0, &mut q));
    assert_ne!(q, p as *mut c_void);
    // SAFETY: both map the same memfd.
    unsafe {
        assert_eq!(*(q as *const u8).add(3 * 4096 + 9), 0x5a);
        *(q as *mut u8) = 1;
        assert_eq!(*p, 1);
    }
    let mut props = ze_memory_allocation_properties_t::default();
    ze_ok!(
        env,
        zeMemGetAllocProperties(env.ctx, q, &mut props, null_mut())
    );
    assert_eq!(props.type_, ZE_MEMORY_TYPE_DEVICE);
    // An IPC mapping is closed, not freed; a normal allocation is freed, not closed.
    assert_eq!(
        ze!(env, zeMemFree(env.ctx, q)),
        ZE_RESULT_ERROR_INVALID_ARGUMENT
    );
    assert_eq!(
        ze!(env, zeMemCloseIpcHandle(env.ctx, p as *const c_void)),
        ZE_RESULT_ERROR_INVALID_ARGUMENT
    );
    ze_ok!(env, zeMemCloseIpcHandle(env.ctx, q));
    // Bad flags / foreign bytes.
    assert_ne!(
        ze!(env, zeMemOpenIpcHandle(env.ctx, env.dev(), h, 0x10, &mut q)),
        ZE_RESULT_SUCCESS
    );
    let junk = ze_ipc_mem_handle_t::default();
    assert_eq!(
        ze!(env, zeMemOpenIpcHandle(env.ctx, env.dev(), junk, 0, &mut q)),
        ZE_RESULT_ERROR_INVALID_ARGUMENT
    );
    // A handle whose fd is not open in this process is rejected.
    let mut stale = h;
    stale.data[0..4].copy_from_slice(&(9999i32.to_le_bytes().map(|b| b as std::ffi::c_char)));
    assert_eq!(
        ze!(
            env,
            zeMemOpenIpcHandle(env.ctx, env.dev(), stale, 0, &mut q)
        ),
        ZE_RESULT_ERROR_INVALID_ARGUMENT
    );
    ze_ok!(env, zeMemFree(env.ctx, p as *mut c_void));
});
