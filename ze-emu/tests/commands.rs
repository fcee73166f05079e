//! Command queues, command lists (regular and immediate), copies, fills, barriers, events and fences, through
//! the real loader: data correctness, ordering, timeouts and the error returns of out-of-order calls.

#![allow(clippy::macro_metavars_in_unsafe)] // the ze! macro passes (deliberately invalid) arguments to FFI calls

mod common;
use common::*;
use std::ffi::c_void;
use std::ptr::null_mut;
use std::time::{Duration, Instant};

const NOEV: ze_event_handle_t = ze_event_handle_t(std::ptr::null_mut());

fn queue(env: &Env, ordinal: u32, mode: ze_command_queue_mode_t) -> ze_command_queue_handle_t {
    let d = ze_command_queue_desc_t {
        ordinal,
        mode,
        ..Default::default()
    };
    let mut q = ze_command_queue_handle_t::null();
    ze_ok!(env, zeCommandQueueCreate(env.ctx, env.dev(), &d, &mut q));
    q
}

fn regular(env: &Env, ordinal: u32) -> ze_command_list_handle_t {
    let d = ze_command_list_desc_t {
        commandQueueGroupOrdinal: ordinal,
        ..Default::default()
    };
    let mut l = ze_command_list_handle_t::null();
    ze_ok!(env, zeCommandListCreate(env.ctx, env.dev(), &d, &mut l));
    l
}

emu_test!(regular_list_lifecycle, |env| {
    let n = 1 << 16;
    let a = env.alloc_device(n);
    let b = env.alloc_device(n);
    let src: Vec<u8> = (0..n).map(|i| (i * 7) as u8).collect();
    let q = queue(&env, 0, ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS);
    let mut l = regular(&env, 0);
    ze_ok!(
        env,
        zeCommandListAppendMemoryCopy(
            l,
            a as *mut c_void,
            src.as_ptr() as *const c_void,
            n,
            NOEV,
            0,
            null_mut()
        )
    );
    ze_ok!(env, zeCommandListAppendBarrier(l, NOEV, 0, null_mut()));
    ze_ok!(
        env,
        zeCommandListAppendMemoryCopy(
            l,
            b as *mut c_void,
            a as *const c_void,
            n,
            NOEV,
            0,
            null_mut()
        )
    );
    let pat = [1u8, 2, 3, 4, 5, 6, 7, 8];
    // SAFETY: inside b.
    let tail = unsafe { b.add(n - 100) } as *mut c_void;
    ze_ok!(
        env,
        zeCommandListAppendMemoryFill(
            l,
            tail,
            pat.as_ptr() as *const c_void,
            8,
            100,
            NOEV,
            0,
            null_mut()
        )
    );
    // Executing an open list is an error; so is a second close and an append after close.
    assert_eq!(
        ze!(
            env,
            zeCommandQueueExecuteCommandLists(q, 1, &mut l, ze_fence_handle_t::null())
        ),
        ZE_RESULT_ERROR_INVALID_ARGUMENT
    );
    ze_ok!(env, zeCommandListClose(l));
    assert_eq!(
        ze!(env, zeCommandListClose(l)),
        ZE_RESULT_ERROR_INVALID_ARGUMENT
    );
    assert_eq!(
        ze!(env, zeCommandListAppendBarrier(l, NOEV, 0, null_mut())),
        ZE_RESULT_ERROR_INVALID_ARGUMENT
    );
    // Nothing ran before execution.
    // SAFETY: live allocations of n bytes.
    unsafe { assert!(std::slice::from_raw_parts(b, n).iter().all(|x| *x == 0)) };
    let mut f = ze_fence_handle_t::null();
    ze_ok!(env, zeFenceCreate(q, &ze_fence_desc_t::default(), &mut f));
    assert_eq!(ze!(env, zeFenceQueryStatus(f)), ZE_RESULT_NOT_READY);
    ze_ok!(env, zeCommandQueueExecuteCommandLists(q, 1, &mut l, f));
    ze_ok!(env, zeFenceHostSynchronize(f, u64::MAX));
    ze_ok!(env, zeFenceQueryStatus(f));
    // SAFETY: as above.
    unsafe {
        let bv = std::slice::from_raw_parts(b, n);
        assert_eq!(&bv[..n - 100], &src[..n - 100]);
        assert!(bv[n - 100..]
            .iter()
            .enumerate()
            .all(|(i, x)| *x == pat[i % 8]));
    }
    // Re-executing a closed list runs it again; reset empties it.
    // SAFETY: as above.
    unsafe { std::ptr::write_bytes(b, 0, n) };
    ze_ok!(env, zeFenceReset(f));
    ze_ok!(env, zeCommandQueueExecuteCommandLists(q, 1, &mut l, f));
    ze_ok!(env, zeFenceHostSynchronize(f, u64::MAX));
    // SAFETY: as above.
    unsafe { assert_eq!(*b.add(5), src[5]) };
    ze_ok!(env, zeCommandListReset(l));
    ze_ok!(env, zeCommandListAppendBarrier(l, NOEV, 0, null_mut()));
    ze_ok!(env, zeCommandListClose(l));
    ze_ok!(
        env,
        zeCommandQueueExecuteCommandLists(q, 1, &mut l, ze_fence_handle_t::null())
    );
    ze_ok!(env, zeCommandQueueSynchronize(q, u64::MAX));
    // A copy-group list cannot run on a compute queue; immediate lists cannot be executed or closed.
    let mut lc = regular(&env, 1);
    ze_ok!(env, zeCommandListClose(lc));
    assert_eq!(
        ze!(
            env,
            zeCommandQueueExecuteCommandLists(q, 1, &mut lc, ze_fence_handle_t::null())
        ),
        ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE
    );
    let mut imm = env.immediate(0, ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS);
    assert_eq!(
        ze!(
            env,
            zeCommandQueueExecuteCommandLists(q, 1, &mut imm, ze_fence_handle_t::null())
        ),
        ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE
    );
    assert_eq!(
        ze!(env, zeCommandListClose(imm)),
        ZE_RESULT_ERROR_INVALID_ARGUMENT
    );
    // A fence of another queue is rejected.
    let q2 = queue(&env, 0, ZE_COMMAND_QUEUE_MODE_DEFAULT);
    assert_eq!(
        ze!(env, zeCommandQueueExecuteCommandLists(q2, 1, &mut l, f)),
        ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT
    );
    // Descriptor checks.
    let bad = ze_command_queue_desc_t {
        ordinal: 2,
        ..Default::default()
    };
    let mut qq = ze_command_queue_handle_t::null();
    assert_eq!(
        ze!(env, zeCommandQueueCreate(env.ctx, env.dev(), &bad, &mut qq)),
        ZE_RESULT_ERROR_INVALID_ARGUMENT
    );
    let bad = ze_command_queue_desc_t {
        ordinal: 1,
        index: 1,
        ..Default::default()
    };
    assert_eq!(
        ze!(env, zeCommandQueueCreate(env.ctx, env.dev(), &bad, &mut qq)),
        ZE_RESULT_ERROR_INVALID_ARGUMENT
    );
    let bad = ze_command_list_desc_t {
        stype: ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC,
        ..Default::default()
    };
    let mut ll = ze_command_list_handle_t::null();
    assert_eq!(
        ze!(env, zeCommandListCreate(env.ctx, env.dev(), &bad, &mut ll)),
        ZE_RESULT_ERROR_INVALID_ARGUMENT
    );
    let bad = ze_command_list_desc_t {
        flags: 0x100,
        ..Default::default()
    };
    assert_ne!(
        ze!(env, zeCommandListCreate(env.ctx, env.dev(), &bad, &mut ll)),
        ZE_RESULT_SUCCESS
    );
    for h in [l, lc, imm] {
        ze_ok!(env, zeCommandListDestroy(h));
    }
    assert_eq!(
        ze!(env, zeCommandListClose(l)),
        ZE_RESULT_ERROR_INVALID_ARGUMENT,
        "stale handle"
    );
    ze_ok!(env, zeFenceDestroy(f));
    ze_ok!(env, zeCommandQueueDestroy(q));
    ze_ok!(env, zeCommandQueueDestroy(q2));
});

emu_test!(copy_and_fill_errors, |env| {
    let a = env.alloc_device(4096);
    let imm = env.immediate(1, ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS);
    // SAFETY: inside a.
    let a8 = unsafe { a.add(8) };
    assert_eq!(
        ze!(
            env,
            zeCommandListAppendMemoryCopy(
                imm,
                a8 as *mut c_void,
                a as *const c_void,
                64,
                NOEV,
                0,
                null_mut()
            )
        ),
        ZE_RESULT_ERROR_OVERLAPPING_REGIONS
    );
    let pat = [0u8; 16];
    // Copy group: fill patterns up to 4 bytes; sizes must be powers of two.
    assert_eq!(
        ze!(
            env,
            zeCommandListAppendMemoryFill(
                imm,
                a as *mut c_void,
                pat.as_ptr() as *const c_void,
                8,
                64,
                NOEV,
                0,
                null_mut()
            )
        ),
        ZE_RESULT_ERROR_INVALID_SIZE
    );
    assert_eq!(
        ze!(
            env,
            zeCommandListAppendMemoryFill(
                imm,
                a as *mut c_void,
                pat.as_ptr() as *const c_void,
                3,
                64,
                NOEV,
                0,
                null_mut()
            )
        ),
        ZE_RESULT_ERROR_INVALID_SIZE
    );
    let v = 0xdead_beefu32;
    ze_ok!(
        env,
        zeCommandListAppendMemoryFill(
            imm,
            a as *mut c_void,
            &v as *const u32 as *const c_void,
            4,
            4096,
            NOEV,
            0,
            null_mut()
        )
    );
    // SAFETY: a holds 1024 u32.
    unsafe { assert!((0..1024).all(|i| *(a as *const u32).add(i) == v)) };
    // Wait list with a null array.
    let b = env.alloc_device(4096);
    assert_ne!(
        ze!(
            env,
            zeCommandListAppendMemoryCopy(
                imm,
                b as *mut c_void,
                a as *const c_void,
                64,
                NOEV,
                2,
                null_mut()
            )
        ),
        ZE_RESULT_SUCCESS
    );
    ze_ok!(env, zeCommandListDestroy(imm));
});

emu_test!(event_host_operations, |env| {
    let (pool, ev) = env.events(2);
    let e = ev[0];
    assert_eq!(ze!(env, zeEventQueryStatus(e)), ZE_RESULT_NOT_READY);
    assert_eq!(ze!(env, zeEventHostSynchronize(e, 0)), ZE_RESULT_NOT_READY);
    let t = Instant::now();
    assert_eq!(
        ze!(env, zeEventHostSynchronize(e, 20_000_000)),
        ZE_RESULT_NOT_READY
    );
    assert!(t.elapsed() >= Duration::from_millis(20), "timeout honoured");
    ze_ok!(env, zeEventHostSignal(e));
    ze_ok!(env, zeEventQueryStatus(e));
    ze_ok!(env, zeEventHostSynchronize(e, 0));
    ze_ok!(env, zeEventHostSynchronize(e, u64::MAX));
    ze_ok!(env, zeEventHostReset(e));
    assert_eq!(ze!(env, zeEventQueryStatus(e)), ZE_RESULT_NOT_READY);
    // Another thread signalling wakes an infinite wait.
    let h = e.0 as usize;
    let signaller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        h
    });
    let hh = signaller.join().unwrap();
    ze_ok!(env, zeEventHostSignal(ze_event_handle_t(hh as *mut c_void)));
    ze_ok!(env, zeEventHostSynchronize(e, u64::MAX));
    // Descriptor errors.
    let mut x = ze_event_handle_t::null();
    let used = ze_event_desc_t {
        index: 0,
        ..Default::default()
    };
    assert_eq!(
        ze!(env, zeEventCreate(pool, &used, &mut x)),
        ZE_RESULT_ERROR_INVALID_ARGUMENT,
        "index in use"
    );
    let oob = ze_event_desc_t {
        index: 2,
        ..Default::default()
    };
    assert_eq!(
        ze!(env, zeEventCreate(pool, &oob, &mut x)),
        ZE_RESULT_ERROR_INVALID_ARGUMENT,
        "index out of range"
    );
    let bad = ze_event_desc_t {
        stype: ZE_STRUCTURE_TYPE_EVENT_POOL_DESC,
        index: 1,
        ..Default::default()
    };
    assert_eq!(
        ze!(env, zeEventCreate(pool, &bad, &mut x)),
        ZE_RESULT_ERROR_INVALID_ARGUMENT
    );
    let zero = ze_event_pool_desc_t {
        count: 0,
        ..Default::default()
    };
    let mut p2 = ze_event_pool_handle_t::null();
    assert_ne!(
        ze!(
            env,
            zeEventPoolCreate(env.ctx, &zero, 0, null_mut(), &mut p2)
        ),
        ZE_RESULT_SUCCESS
    );
    // A pool with live events cannot be destroyed; after destroying them it can, and indexes are reusable.
    assert_eq!(
        ze!(env, zeEventPoolDestroy(pool)),
        ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE
    );
    ze_ok!(env, zeEventDestroy(ev[0]));
    let again = ze_event_desc_t {
        index: 0,
        ..Default::default()
    };
    ze_ok!(env, zeEventCreate(pool, &again, &mut x));
    ze_ok!(env, zeEventDestroy(x));
    ze_ok!(env, zeEventDestroy(ev[1]));
    assert_eq!(
        ze!(env, zeEventQueryStatus(ev[1])),
        ZE_RESULT_ERROR_INVALID_ARGUMENT,
        "stale event"
    );
    ze_ok!(env, zeEventPoolDestroy(pool));
});

emu_test!(waits_block_the_queue_not_the_caller, |env| {
    let (pool, ev) = env.events(4);
    let n = 4096;
    let a = env.alloc_device(n);
    let src = vec![9u8; n];
    // Immediate asynchronous list: the append returns while the list waits for ev0.
    let imm = env.immediate(0, ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS);
    let mut w = [ev[0]];
    ze_ok!(
        env,
        zeCommandListAppendMemoryCopy(
            imm,
            a as *mut c_void,
            src.as_ptr() as *const c_void,
            n,
            ev[1],
            1,
            w.as_mut_ptr()
        )
    );
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(ze!(env, zeEventQueryStatus(ev[1])), ZE_RESULT_NOT_READY);
    // SAFETY: live allocation.
    assert_eq!(unsafe { *a }, 0, "copy must wait for ev0");
    assert_eq!(
        ze!(env, zeCommandListDestroy(imm)),
        ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE,
        "busy list"
    );
    ze_ok!(env, zeEventHostSignal(ev[0]));
    ze_ok!(env, zeEventHostSynchronize(ev[1], 10_000_000_000));
    // SAFETY: as above.
    assert_eq!(unsafe { *a.add(n - 1) }, 9);

    // Queue: a list waiting on ev2 keeps the queue busy until the host signals it.
    let q = queue(&env, 0, ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS);
    let mut l = regular(&env, 0);
    let mut w2 = [ev[2]];
    ze_ok!(env, zeCommandListAppendWaitOnEvents(l, 1, w2.as_mut_ptr()));
    ze_ok!(env, zeCommandListAppendSignalEvent(l, ev[3]));
    ze_ok!(env, zeCommandListAppendEventReset(l, ev[2]));
    ze_ok!(env, zeCommandListClose(l));
    ze_ok!(
        env,
        zeCommandQueueExecuteCommandLists(q, 1, &mut l, ze_fence_handle_t::null())
    );
    assert_eq!(
        ze!(env, zeCommandQueueSynchronize(q, 10_000_000)),
        ZE_RESULT_NOT_READY
    );
    assert_eq!(
        ze!(env, zeCommandQueueDestroy(q)),
        ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE
    );
    assert_eq!(
        ze!(env, zeCommandListReset(l)),
        ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE
    );
    ze_ok!(env, zeEventHostSignal(ev[2]));
    ze_ok!(env, zeCommandQueueSynchronize(q, u64::MAX));
    ze_ok!(env, zeEventQueryStatus(ev[3]));
    assert_eq!(
        ze!(env, zeEventQueryStatus(ev[2])),
        ZE_RESULT_NOT_READY,
        "reset by the list"
    );
    // Barrier with a wait list and a signal event.
    let imm2 = env.immediate(1, ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS);
    ze_ok!(env, zeEventHostReset(ev[0]));
    ze_ok!(env, zeEventHostReset(ev[1]));
    let mut w3 = [ev[0]];
    ze_ok!(
        env,
        zeCommandListAppendBarrier(imm2, ev[1], 1, w3.as_mut_ptr())
    );
    assert_eq!(
        ze!(env, zeEventHostSynchronize(ev[1], 5_000_000)),
        ZE_RESULT_NOT_READY
    );
    ze_ok!(env, zeEventHostSignal(ev[0]));
    ze_ok!(env, zeEventHostSynchronize(ev[1], u64::MAX));
    ze_ok!(env, zeCommandListDestroy(imm2));
    ze_ok!(env, zeCommandListDestroy(imm));
    ze_ok!(env, zeCommandListDestroy(l));
    ze_ok!(env, zeCommandQueueDestroy(q));
    for e in ev {
        ze_ok!(env, zeEventDestroy(e));
    }
    ze_ok!(env, zeEventPoolDestroy(pool));
});

emu_test!(fences, |env| {
    let q = queue(&env, 1, ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS);
    let signalled = ze_fence_desc_t {
        flags: ZE_FENCE_FLAG_SIGNALED,
        ..Default::default()
    };
    let mut f = ze_fence_handle_t::null();
    ze_ok!(env, zeFenceCreate(q, &signalled, &mut f));
    ze_ok!(env, zeFenceQueryStatus(f));
    ze_ok!(env, zeFenceHostSynchronize(f, 0));
    ze_ok!(env, zeFenceReset(f));
    assert_eq!(ze!(env, zeFenceQueryStatus(f)), ZE_RESULT_NOT_READY);
    assert_eq!(
        ze!(env, zeFenceHostSynchronize(f, 1_000_000)),
        ZE_RESULT_NOT_READY
    );
    // A synchronous queue has finished when execute returns.
    let mut l = regular(&env, 1);
    ze_ok!(env, zeCommandListClose(l));
    ze_ok!(env, zeCommandQueueExecuteCommandLists(q, 1, &mut l, f));
    ze_ok!(env, zeFenceQueryStatus(f));
    let bad = ze_fence_desc_t {
        flags: 0x2,
        ..Default::default()
    };
    let mut f2 = ze_fence_handle_t::null();
    assert_ne!(ze!(env, zeFenceCreate(q, &bad, &mut f2)), ZE_RESULT_SUCCESS);
    let bad = ze_fence_desc_t {
        stype: ZE_STRUCTURE_TYPE_EVENT_DESC,
        ..Default::default()
    };
    assert_eq!(
        ze!(env, zeFenceCreate(q, &bad, &mut f2)),
        ZE_RESULT_ERROR_INVALID_ARGUMENT
    );
    ze_ok!(env, zeFenceDestroy(f));
    assert_eq!(
        ze!(env, zeFenceQueryStatus(f)),
        ZE_RESULT_ERROR_INVALID_ARGUMENT,
        "stale fence"
    );
    ze_ok!(env, zeCommandListDestroy(l));
    ze_ok!(env, zeCommandQueueDestroy(q));
});
