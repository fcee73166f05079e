//! Driver and device discovery, properties and the strictness of their checks, through the real loader.

#![allow(clippy::macro_metavars_in_unsafe)] // the ze! macro passes (deliberately invalid) arguments to FFI calls

mod common;
use common::*;
use std::ptr::null_mut;

emu_test!(init_and_driver_properties, |env| {
    let mut v = ze_api_version_t::default();
    ze_ok!(env, zeDriverGetApiVersion(env.driver, &mut v));
    assert_eq!(v, ZE_API_VERSION_1_4);
    let mut p = ze_driver_properties_t::default();
    ze_ok!(env, zeDriverGetProperties(env.driver, &mut p));
    assert_eq!(&p.uuid.id, b"ze-emu.xpushmem1");
    let mut ipc = ze_driver_ipc_properties_t::default();
    ze_ok!(env, zeDriverGetIpcProperties(env.driver, &mut ipc));
    assert_eq!(
        ipc.flags & ZE_IPC_PROPERTY_FLAG_MEMORY,
        ZE_IPC_PROPERTY_FLAG_MEMORY
    );
    assert_eq!(env.devices.len(), 1, "default is one device");
    let mut f: *mut std::ffi::c_void = null_mut();
    let name = c"zexMemGetIpcHandles";
    assert_ne!(
        ze!(
            env,
            zeDriverGetExtensionFunctionAddress(env.driver, name.as_ptr(), &mut f)
        ),
        ZE_RESULT_SUCCESS
    );
    ze_ok!(env, zeContextGetStatus(env.ctx));
    ze_ok!(env, zeContextDestroy(env.ctx));
});

emu_test!(device_properties, |env| {
    let d = env.dev();
    let mut p = ze_device_properties_t::default();
    ze_ok!(env, zeDeviceGetProperties(d, &mut p));
    assert_eq!(p.type_, ZE_DEVICE_TYPE_GPU);
    assert_eq!(p.vendorId, 0x8086);
    assert!(
        p.name.to_string_lossy().starts_with("ze-emu device 0"),
        "{:?}",
        p.name
    );
    assert_eq!(p.maxMemAllocSize, 4 << 30);

    let mut c = ze_device_compute_properties_t::default();
    ze_ok!(env, zeDeviceGetComputeProperties(d, &mut c));
    assert_eq!(c.maxTotalGroupSize, 1024);
    assert!(c.numSubGroupSizes >= 1);

    let mut m = ze_device_module_properties_t::default();
    ze_ok!(env, zeDeviceGetModuleProperties(d, &mut m));
    assert_eq!(m.spirvVersionSupported, ze_make_version(1, 4));
    assert_ne!(m.flags & ZE_DEVICE_MODULE_FLAG_INT64_ATOMICS, 0);

    let mut n = 0u32;
    ze_ok!(env, zeDeviceGetMemoryProperties(d, &mut n, null_mut()));
    assert_eq!(n, 1);
    let mut mp = [ze_device_memory_properties_t::default()];
    ze_ok!(env, zeDeviceGetMemoryProperties(d, &mut n, mp.as_mut_ptr()));
    assert_eq!(mp[0].totalSize, 16 << 30);

    let mut n = 0u32;
    ze_ok!(
        env,
        zeDeviceGetCommandQueueGroupProperties(d, &mut n, null_mut())
    );
    assert_eq!(n, 2);
    let mut g = [ze_command_queue_group_properties_t::default(); 2];
    ze_ok!(
        env,
        zeDeviceGetCommandQueueGroupProperties(d, &mut n, g.as_mut_ptr())
    );
    assert_ne!(g[0].flags & ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE, 0);
    assert_eq!(g[1].flags, ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY);
    assert_eq!(g[1].numQueues, 1);
    assert_eq!(g[0].maxMemoryFillPatternSize, 128);
    // Asking for one of two returns one.
    let mut one = 1u32;
    let mut g1 = [ze_command_queue_group_properties_t::default()];
    ze_ok!(
        env,
        zeDeviceGetCommandQueueGroupProperties(d, &mut one, g1.as_mut_ptr())
    );
    assert_eq!(one, 1);

    let mut n = 5u32;
    ze_ok!(env, zeDeviceGetSubDevices(d, &mut n, null_mut()));
    assert_eq!(n, 0);
    ze_ok!(env, zeDeviceGetStatus(d));
});

emu_test!(
    three_devices_are_peers,
    Opts {
        devices: Some("3".into()),
        ..Default::default()
    },
    |env| {
        assert_eq!(env.devices.len(), 3);
        let mut names = Vec::new();
        for &a in &env.devices {
            let mut p = ze_device_properties_t::default();
            ze_ok!(env, zeDeviceGetProperties(a, &mut p));
            names.push(p.name.to_string_lossy());
            for &b in &env.devices {
                let mut ok: ze_bool_t = 0;
                ze_ok!(env, zeDeviceCanAccessPeer(a, b, &mut ok));
                assert_eq!(ok, 1);
                let mut pp = ze_device_p2p_properties_t::default();
                ze_ok!(env, zeDeviceGetP2PProperties(a, b, &mut pp));
                assert_eq!(
                    pp.flags,
                    ZE_DEVICE_P2P_PROPERTY_FLAG_ACCESS | ZE_DEVICE_P2P_PROPERTY_FLAG_ATOMICS
                );
            }
        }
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 3, "distinct device names");
    }
);

#[test]
fn bad_device_count_fails_init() {
    let name = "bad_device_count_fails_init";
    run(
        name,
        Opts {
            devices: Some("0".into()),
            ..Default::default()
        },
        || {
            let ze = ZeApi::load().expect("loader");
            // SAFETY: plain call without pointers.
            let r = unsafe { (ze.zeInit)(ZE_INIT_FLAG_GPU_ONLY) };
            assert_ne!(
                r, ZE_RESULT_SUCCESS,
                "XPUSHMEM_EMU_DEVICES=0 must fail zeInit"
            );
        },
    );
}

emu_test!(wrong_stype_and_null_handles_are_rejected, |env| {
    let d = env.dev();
    let mut p = ze_device_properties_t {
        stype: ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES,
        ..Default::default()
    };
    assert_eq!(
        ze!(env, zeDeviceGetProperties(d, &mut p)),
        ZE_RESULT_ERROR_INVALID_ARGUMENT
    );
    let mut c = ze_device_compute_properties_t {
        stype: ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES,
        ..Default::default()
    };
    assert_eq!(
        ze!(env, zeDeviceGetComputeProperties(d, &mut c)),
        ZE_RESULT_ERROR_INVALID_ARGUMENT
    );
    let mut dp = ze_driver_properties_t {
        stype: ZE_STRUCTURE_TYPE_DRIVER_IPC_PROPERTIES,
        ..Default::default()
    };
    assert_eq!(
        ze!(env, zeDriverGetProperties(env.driver, &mut dp)),
        ZE_RESULT_ERROR_INVALID_ARGUMENT
    );
    let cd = ze_context_desc_t {
        stype: ZE_STRUCTURE_TYPE_FENCE_DESC,
        ..Default::default()
    };
    let mut ctx = ze_context_handle_t::null();
    assert_eq!(
        ze!(env, zeContextCreate(env.driver, &cd, &mut ctx)),
        ZE_RESULT_ERROR_INVALID_ARGUMENT
    );
    // Unknown flag bits.
    let cd = ze_context_desc_t {
        flags: 0x100,
        ..Default::default()
    };
    assert_ne!(
        ze!(env, zeContextCreate(env.driver, &cd, &mut ctx)),
        ZE_RESULT_SUCCESS
    );
    // An extension structure ze-emu does not know.
    let ext = ze_base_desc_t {
        stype: ZE_STRUCTURE_TYPE_PCI_EXT_PROPERTIES,
        pNext: std::ptr::null(),
    };
    let mut p = ze_device_properties_t {
        pNext: &ext as *const _ as *mut _,
        ..Default::default()
    };
    assert_eq!(
        ze!(env, zeDeviceGetProperties(d, &mut p)),
        ZE_RESULT_ERROR_UNSUPPORTED_FEATURE
    );
    // Null handles and pointers.
    let mut p = ze_device_properties_t::default();
    assert_eq!(
        ze!(
            env,
            zeDeviceGetProperties(ze_device_handle_t::null(), &mut p)
        ),
        ZE_RESULT_ERROR_INVALID_NULL_HANDLE
    );
    assert_eq!(
        ze!(env, zeDeviceGetProperties(d, null_mut())),
        ZE_RESULT_ERROR_INVALID_NULL_POINTER
    );
    assert_eq!(
        ze!(env, zeContextDestroy(ze_context_handle_t::null())),
        ZE_RESULT_ERROR_INVALID_NULL_HANDLE
    );
    let mut n = 0u32;
    assert_eq!(
        ze!(env, zeDeviceGet(env.driver, null_mut(), null_mut())),
        ZE_RESULT_ERROR_INVALID_NULL_POINTER
    );
    let _ = &mut n;
    // Destroyed (stale) context.
    let mut c2 = ze_context_handle_t::null();
    ze_ok!(
        env,
        zeContextCreate(env.driver, &ze_context_desc_t::default(), &mut c2)
    );
    ze_ok!(env, zeContextDestroy(c2));
    assert_eq!(
        ze!(env, zeContextGetStatus(c2)),
        ZE_RESULT_ERROR_INVALID_ARGUMENT
    );
});
