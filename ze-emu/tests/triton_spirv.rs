//! A SPIR-V module as Intel's Triton (`triton-xpu` 3.3.0b1) emits it for an XPU target loads and runs on ze-emu:
//! the module declares `KernelAttributesINTEL` (`MaxWorkgroupSizeINTEL`), which the OpenCL CPU runtime rejects, and
//! ze-emu removes exactly that before building. The bytes are the compiler's, unmodified:
//! `tests/data/triton_add_one.spv` is `y[i] = x[i] + 1` (`*i32, *i32, i32`, BLOCK 64, num_warps 2,
//! threads_per_warp 16), made by `triton-bridge/tests/triton/make_ze_emu_fixture.py`.

#![allow(clippy::macro_metavars_in_unsafe)] // the ze! macro passes arguments to FFI calls

mod common;
use common::*;
use std::ffi::c_void;
use std::ptr::null_mut;

const TRITON_ADD_ONE: &[u8] = include_bytes!("data/triton_add_one.spv");

/// Prints why the test is skipped; with `XPUSHMEM_REQUIRE_OPENCL=1` (CI) a skip is a failure.
fn runtime_missing() -> bool {
    if opencl_env().is_some() {
        return false;
    }
    let reason = "Intel OpenCL CPU runtime not installed (run scripts/setup-device.sh)";
    if std::env::var("XPUSHMEM_REQUIRE_OPENCL").is_ok_and(|v| v == "1") {
        panic!("XPUSHMEM_REQUIRE_OPENCL=1 but {reason}");
    }
    println!("SKIPPED: {reason}");
    true
}

fn set_arg<T>(env: &Env, k: ze_kernel_handle_t, i: u32, v: &T) {
    ze_ok!(
        env,
        zeKernelSetArgumentValue(
            k,
            i,
            std::mem::size_of::<T>(),
            v as *const T as *const c_void
        )
    );
}

#[test]
fn triton_module_builds_and_runs() {
    const NAME: &str = "triton_module_builds_and_runs";
    if !common::is_child(NAME) && runtime_missing() {
        return;
    }
    run(NAME, Opts::default(), || {
        let env = Env::new();
        let desc = ze_module_desc_t {
            format: ZE_MODULE_FORMAT_IL_SPIRV,
            inputSize: TRITON_ADD_ONE.len(),
            pInputModule: TRITON_ADD_ONE.as_ptr(),
            pBuildFlags: c"".as_ptr(),
            ..Default::default()
        };
        let mut m = ze_module_handle_t::null();
        ze_ok!(
            env,
            zeModuleCreate(env.ctx, env.dev(), &desc, &mut m, null_mut())
        );
        let kd = ze_kernel_desc_t {
            pKernelName: c"add_one".as_ptr(),
            ..Default::default()
        };
        let mut k = ze_kernel_handle_t::null();
        ze_ok!(env, zeKernelCreate(m, &kd, &mut k));
        // As Intel's SYCL launcher does: local size num_warps * threads_per_warp, one group per program.
        let n: i32 = 100;
        let (block, local) = (64u32, 2 * 16u32);
        let x = env.alloc_device(n as usize * 4) as *mut i32;
        let y = env.alloc_device(n as usize * 4) as *mut i32;
        // SAFETY: device allocations of n i32 each, host-accessible on ze-emu.
        unsafe {
            for i in 0..n as usize {
                *x.add(i) = 7 * i as i32 - 50;
                *y.add(i) = -1;
            }
        }
        set_arg(&env, k, 0, &x);
        set_arg(&env, k, 1, &y);
        set_arg(&env, k, 2, &n);
        ze_ok!(env, zeKernelSetGroupSize(k, local, 1, 1));
        let imm = env.immediate(0, ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS);
        let (pool, ev) = env.events(1);
        let gc = ze_group_count_t {
            groupCountX: (n as u32).div_ceil(block),
            groupCountY: 1,
            groupCountZ: 1,
        };
        ze_ok!(
            env,
            zeCommandListAppendLaunchKernel(imm, k, &gc, ev[0], 0, null_mut())
        );
        ze_ok!(env, zeEventHostSynchronize(ev[0], 60_000_000_000));
        // SAFETY: as above.
        unsafe {
            for i in 0..n as usize {
                assert_eq!(*y.add(i), *x.add(i) + 1, "y[{i}]");
            }
        }
        ze_ok!(env, zeEventDestroy(ev[0]));
        ze_ok!(env, zeEventPoolDestroy(pool));
        ze_ok!(env, zeCommandListDestroy(imm));
        ze_ok!(env, zeKernelDestroy(k));
        ze_ok!(env, zeModuleDestroy(m));
    });
}
