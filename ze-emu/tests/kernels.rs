//! SPIR-V modules and kernels: the test kernels of shmem/device-lib are built with its build.sh (clang-14 |
//! llvm-spirv-14 | spirv-val) and run by Intel's OpenCL CPU runtime behind ze-emu. Skipped, with the reason
//! printed, only when the toolchain or the runtime is not installed (scripts/setup-device.sh installs both).

#![allow(clippy::macro_metavars_in_unsafe)] // the ze! macro passes (deliberately invalid) arguments to FFI calls

mod common;
use common::*;
use std::ffi::{c_void, CStr};
use std::path::PathBuf;
use std::process::Command;
use std::ptr::null_mut;

const SPV_ENV: &str = "ZE_EMU_TEST_SPV";

/// Prints why a kernel test is skipped; with `XPUSHMEM_REQUIRE_OPENCL=1` (CI) a skip is a failure.
fn skip(reason: &str) {
    if std::env::var("XPUSHMEM_REQUIRE_OPENCL").is_ok_and(|v| v == "1") {
        panic!("XPUSHMEM_REQUIRE_OPENCL=1 but {reason}");
    }
    println!("SKIPPED: {reason}");
}

/// Builds the kernels once per test process (tests run on parallel threads: one build, the others wait for it);
/// None (with the reason printed) if tools are missing.
fn built_spv() -> Option<PathBuf> {
    static BUILT: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    BUILT.get_or_init(build_spv).clone()
}

fn build_spv() -> Option<PathBuf> {
    if let Ok(p) = std::env::var(SPV_ENV) {
        return Some(PathBuf::from(p));
    }
    if opencl_env().is_none() {
        skip("Intel OpenCL CPU runtime not installed (run scripts/setup-device.sh)");
        return None;
    }
    let out = std::env::temp_dir().join(format!("ze-emu-kernels-{}", std::process::id()));
    let script = repo_root().join("shmem/device-lib/build.sh");
    match Command::new("bash").arg(&script).arg(&out).output() {
        Ok(o) if o.status.success() => Some(out.join("test_kernels.spv")),
        Ok(o) if o.status.code() == Some(127) => {
            skip(String::from_utf8_lossy(&o.stderr).trim());
            None
        }
        Ok(o) => panic!(
            "{} failed: {}{}",
            script.display(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!("cannot run {}: {e}", script.display()),
    }
}

fn opts_with_spv() -> Option<Opts> {
    let spv = built_spv()?;
    Some(Opts {
        env: vec![(SPV_ENV.into(), spv.display().to_string())],
        ..Default::default()
    })
}

fn build_module(env: &Env, il: &[u8], flags: &CStr) -> (ze_result_t, ze_module_handle_t, String) {
    let desc = ze_module_desc_t {
        format: ZE_MODULE_FORMAT_IL_SPIRV,
        inputSize: il.len(),
        pInputModule: il.as_ptr(),
        pBuildFlags: flags.as_ptr(),
        ..Default::default()
    };
    let mut m = ze_module_handle_t::null();
    let mut log = ze_module_build_log_handle_t::null();
    let r = ze!(
        env,
        zeModuleCreate(env.ctx, env.dev(), &desc, &mut m, &mut log)
    );
    let mut text = String::new();
    if !log.is_null() {
        let mut n = 0usize;
        ze_ok!(env, zeModuleBuildLogGetString(log, &mut n, null_mut()));
        let mut buf = vec![0 as std::ffi::c_char; n];
        ze_ok!(
            env,
            zeModuleBuildLogGetString(log, &mut n, buf.as_mut_ptr())
        );
        // SAFETY: NUL-terminated by the driver.
        text = unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        ze_ok!(env, zeModuleBuildLogDestroy(log));
    }
    (r, m, text)
}

fn load_module(env: &Env) -> ze_module_handle_t {
    let il = std::fs::read(std::env::var(SPV_ENV).unwrap()).unwrap();
    let (r, m, log) = build_module(env, &il, c"-ze-opt-level=2");
    assert_eq!(r, ZE_RESULT_SUCCESS, "zeModuleCreate: {log}");
    m
}

fn kernel(env: &Env, m: ze_module_handle_t, name: &CStr) -> ze_kernel_handle_t {
    let kd = ze_kernel_desc_t {
        pKernelName: name.as_ptr(),
        ..Default::default()
    };
    let mut k = ze_kernel_handle_t::null();
    ze_ok!(env, zeKernelCreate(m, &kd, &mut k));
    k
}

fn arg<T>(env: &Env, k: ze_kernel_handle_t, i: u32, v: &T) {
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

fn kernel_case(name: &str, body: fn(&Env)) {
    let opts = if common::is_child(name) {
        Opts::default()
    } else {
        match opts_with_spv() {
            Some(o) => o,
            None => return,
        }
    };
    run(name, opts, || body(&Env::new()));
}

#[test]
fn module_names_and_put_signal() {
    kernel_case("module_names_and_put_signal", |env| {
        let m = load_module(env);
        let mut n = 0u32;
        ze_ok!(env, zeModuleGetKernelNames(m, &mut n, null_mut()));
        let mut names = vec![std::ptr::null(); n as usize];
        ze_ok!(env, zeModuleGetKernelNames(m, &mut n, names.as_mut_ptr()));
        // SAFETY: names live as long as the module.
        let mut names: Vec<String> = names
            .iter()
            .map(|p| unsafe { CStr::from_ptr(*p) }.to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["count_ids", "put_signal", "read_global", "wait_word"]
        );

        let k = kernel(env, m, c"put_signal");
        let mut sz = 0usize;
        ze_ok!(env, zeKernelGetName(k, &mut sz, null_mut()));
        assert_eq!(sz, "put_signal".len() + 1);
        const N: usize = 10_000;
        let dst = env.alloc_device(N * 4) as *mut u32;
        let sig = env.alloc_device(64) as *mut u64;
        let src: Vec<u32> = (0..N as u32).collect();
        arg(env, k, 0, &dst);
        arg(env, k, 1, &src.as_ptr());
        arg(env, k, 2, &(N as u64));
        arg(env, k, 3, &sig);
        arg(env, k, 4, &5u64);
        let (mut gx, mut gy, mut gz) = (0, 0, 0);
        ze_ok!(
            env,
            zeKernelSuggestGroupSize(k, 1024, 1, 1, &mut gx, &mut gy, &mut gz)
        );
        assert_eq!((gx, gy, gz), (256, 1, 1));
        ze_ok!(env, zeKernelSetGroupSize(k, gx, gy, gz));
        let imm = env.immediate(0, ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS);
        let gc = ze_group_count_t {
            groupCountX: 4,
            groupCountY: 1,
            groupCountZ: 1,
        };
        ze_ok!(
            env,
            zeCommandListAppendLaunchKernel(imm, k, &gc, ze_event_handle_t::null(), 0, null_mut())
        );
        // SAFETY: allocations of N u32 and one u64.
        unsafe {
            assert!((0..N).all(|i| *dst.add(i) == 2 * i as u32), "put data");
            assert_eq!(*sig, 5, "signal added once");
        }
        // Arguments are captured at append time: a regular list launched twice adds twice.
        let (pool, ev) = env.events(1);
        let mut list = ze_command_list_handle_t::null();
        ze_ok!(
            env,
            zeCommandListCreate(
                env.ctx,
                env.dev(),
                &ze_command_list_desc_t::default(),
                &mut list
            )
        );
        ze_ok!(
            env,
            zeCommandListAppendLaunchKernel(list, k, &gc, ev[0], 0, null_mut())
        );
        arg(env, k, 4, &100u64); // does not affect the recorded launch
        ze_ok!(env, zeCommandListClose(list));
        let mut q = ze_command_queue_handle_t::null();
        ze_ok!(
            env,
            zeCommandQueueCreate(
                env.ctx,
                env.dev(),
                &ze_command_queue_desc_t::default(),
                &mut q
            )
        );
        let mut fence = ze_fence_handle_t::null();
        ze_ok!(
            env,
            zeFenceCreate(q, &ze_fence_desc_t::default(), &mut fence)
        );
        ze_ok!(
            env,
            zeCommandQueueExecuteCommandLists(q, 1, &mut list, fence)
        );
        ze_ok!(env, zeFenceHostSynchronize(fence, u64::MAX));
        ze_ok!(env, zeEventHostSynchronize(ev[0], u64::MAX));
        // SAFETY: as above.
        assert_eq!(unsafe { *sig }, 10);
        ze_ok!(env, zeFenceDestroy(fence));
        ze_ok!(env, zeCommandQueueDestroy(q));
        ze_ok!(env, zeCommandListDestroy(list));
        ze_ok!(env, zeEventDestroy(ev[0]));
        ze_ok!(env, zeEventPoolDestroy(pool));
        // A module with live kernels cannot be destroyed.
        assert_eq!(
            ze!(env, zeModuleDestroy(m)),
            ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE
        );
        ze_ok!(env, zeKernelDestroy(k));
        ze_ok!(env, zeCommandListDestroy(imm));
        ze_ok!(env, zeModuleDestroy(m));
    });
}

#[test]
fn multi_dimensional_launch_with_local_memory() {
    kernel_case("multi_dimensional_launch_with_local_memory", |env| {
        let m = load_module(env);
        let k = kernel(env, m, c"count_ids");
        let counter = env.alloc_device(8) as *mut u64;
        let ids = env.alloc_device(48 * 4) as *mut u32;
        arg(env, k, 0, &counter);
        arg(env, k, 1, &ids);
        // Local memory: size only, null value; a value is rejected.
        let one = 1u32;
        assert_eq!(
            ze!(
                env,
                zeKernelSetArgumentValue(k, 2, 32, &one as *const u32 as *const c_void)
            ),
            ZE_RESULT_ERROR_INVALID_ARGUMENT
        );
        ze_ok!(env, zeKernelSetArgumentValue(k, 2, 8 * 4, std::ptr::null()));
        ze_ok!(env, zeKernelSetGroupSize(k, 4, 2, 1));
        let imm = env.immediate(0, ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS);
        let (pool, ev) = env.events(1);
        let gc = ze_group_count_t {
            groupCountX: 2,
            groupCountY: 3,
            groupCountZ: 1,
        };
        ze_ok!(
            env,
            zeCommandListAppendLaunchKernel(imm, k, &gc, ev[0], 0, null_mut())
        );
        ze_ok!(env, zeEventHostSynchronize(ev[0], 60_000_000_000));
        // SAFETY: allocations of the sizes above.
        unsafe {
            assert_eq!(*counter, 48);
            assert!((0..48).all(|i| *ids.add(i) == i as u32));
        }
        ze_ok!(env, zeEventDestroy(ev[0]));
        ze_ok!(env, zeEventPoolDestroy(pool));
        ze_ok!(env, zeCommandListDestroy(imm));
        ze_ok!(env, zeKernelDestroy(k));
        ze_ok!(env, zeModuleDestroy(m));
    });
}

#[test]
fn kernel_errors() {
    kernel_case("kernel_errors", |env| {
        let m = load_module(env);
        let kd = ze_kernel_desc_t {
            pKernelName: c"no_such_kernel".as_ptr(),
            ..Default::default()
        };
        let mut k = ze_kernel_handle_t::null();
        assert_eq!(
            ze!(env, zeKernelCreate(m, &kd, &mut k)),
            ZE_RESULT_ERROR_INVALID_KERNEL_NAME
        );
        let bad = ze_kernel_desc_t {
            stype: ZE_STRUCTURE_TYPE_MODULE_DESC,
            pKernelName: c"put_signal".as_ptr(),
            ..Default::default()
        };
        assert_eq!(
            ze!(env, zeKernelCreate(m, &bad, &mut k)),
            ZE_RESULT_ERROR_INVALID_ARGUMENT
        );
        let k = kernel(env, m, c"put_signal");
        let v = 0u64;
        let pv = &v as *const u64 as *const c_void;
        assert_eq!(
            ze!(env, zeKernelSetArgumentValue(k, 5, 8, pv)),
            ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX
        );
        assert_eq!(
            ze!(env, zeKernelSetArgumentValue(k, 2, 4, pv)),
            ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE
        );
        assert_eq!(
            ze!(env, zeKernelSetArgumentValue(k, 0, 4, pv)),
            ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE
        );
        assert_eq!(
            ze!(env, zeKernelSetGroupSize(k, 0, 1, 1)),
            ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION
        );
        assert_eq!(
            ze!(env, zeKernelSetGroupSize(k, 2048, 1, 1)),
            ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION
        );
        let (mut a, mut b, mut c) = (0, 0, 0);
        assert_eq!(
            ze!(
                env,
                zeKernelSuggestGroupSize(k, 0, 1, 1, &mut a, &mut b, &mut c)
            ),
            ZE_RESULT_ERROR_INVALID_GLOBAL_WIDTH_DIMENSION
        );
        // Launch with unset arguments.
        let imm = env.immediate(0, ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS);
        let gc = ze_group_count_t {
            groupCountX: 1,
            groupCountY: 1,
            groupCountZ: 1,
        };
        assert_eq!(
            ze!(
                env,
                zeCommandListAppendLaunchKernel(
                    imm,
                    k,
                    &gc,
                    ze_event_handle_t::null(),
                    0,
                    null_mut()
                )
            ),
            ZE_RESULT_ERROR_INVALID_ARGUMENT
        );
        // Kernel launches need a compute group.
        let copy = env.immediate(1, ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS);
        for i in 0..5 {
            ze_ok!(env, zeKernelSetArgumentValue(k, i, 8, pv));
        }
        assert_eq!(
            ze!(
                env,
                zeCommandListAppendLaunchKernel(
                    copy,
                    k,
                    &gc,
                    ze_event_handle_t::null(),
                    0,
                    null_mut()
                )
            ),
            ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE
        );
        // Invalid SPIR-V: build failure with a log; native binaries are not accepted.
        let (r, _, log) = build_module(env, &[0u8; 64], c"");
        assert_eq!(r, ZE_RESULT_ERROR_MODULE_BUILD_FAILURE);
        assert!(!log.is_empty(), "build log explains the failure");
        let il = std::fs::read(std::env::var(SPV_ENV).unwrap()).unwrap();
        let (r, _, log) = build_module(env, &il, c"-ze-no-such-option");
        assert_eq!(r, ZE_RESULT_ERROR_MODULE_BUILD_FAILURE);
        assert!(log.contains("-ze-no-such-option"), "{log}");
        let desc = ze_module_desc_t {
            format: ZE_MODULE_FORMAT_NATIVE,
            inputSize: il.len(),
            pInputModule: il.as_ptr(),
            ..Default::default()
        };
        let mut m2 = ze_module_handle_t::null();
        assert_eq!(
            ze!(
                env,
                zeModuleCreate(env.ctx, env.dev(), &desc, &mut m2, null_mut())
            ),
            ZE_RESULT_ERROR_INVALID_NATIVE_BINARY
        );
        // Global pointer: supported by runtimes with clGetDeviceGlobalVariablePointerINTEL.
        let (mut size, mut ptr) = (0usize, null_mut());
        match ze!(
            env,
            zeModuleGetGlobalPointer(m, c"xpushmem_test_counter".as_ptr(), &mut size, &mut ptr)
        ) {
            ZE_RESULT_SUCCESS => {
                assert_eq!(size, 8);
                // SAFETY: the runtime's pointer to the 8-byte global.
                assert_eq!(unsafe { *(ptr as *const u64) }, 42);
                assert_eq!(
                    ze!(
                        env,
                        zeModuleGetGlobalPointer(m, c"nope".as_ptr(), &mut size, &mut ptr)
                    ),
                    ZE_RESULT_ERROR_INVALID_GLOBAL_NAME
                );
            }
            ZE_RESULT_ERROR_UNSUPPORTED_FEATURE => {
                println!("zeModuleGetGlobalPointer unsupported by this OpenCL runtime")
            }
            r => panic!("zeModuleGetGlobalPointer: {r}"),
        }
        ze_ok!(env, zeCommandListDestroy(copy));
        ze_ok!(env, zeCommandListDestroy(imm));
        ze_ok!(env, zeKernelDestroy(k));
        ze_ok!(env, zeModuleDestroy(m));
    });
}

#[test]
fn no_opencl_means_dependency_unavailable() {
    let name = "no_opencl_means_dependency_unavailable";
    let opts = if common::is_child(name) {
        Opts::default()
    } else {
        let Some(mut o) = opts_with_spv() else { return };
        o.env.push((
            "OCL_ICD_FILENAMES".into(),
            "/nonexistent/libOpenCL-driver.so".into(),
        ));
        o
    };
    run(name, opts, || {
        let env = Env::new();
        let il = std::fs::read(std::env::var(SPV_ENV).unwrap()).unwrap();
        let (r, _, log) = build_module(&env, &il, c"");
        assert_eq!(r, ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE, "{log}");
        assert!(log.contains("OpenCL"), "{log}");
        // Everything else still works.
        let p = env.alloc_device(4096);
        ze_ok!(env, zeMemFree(env.ctx, p as *mut c_void));
    });
}

#[test]
fn cooperative_launch_is_bounded_by_the_resident_group_count() {
    kernel_case(
        "cooperative_launch_is_bounded_by_the_resident_group_count",
        |env| {
            let m = load_module(env);
            let k = kernel(env, m, c"put_signal");
            let mut max = 0u32;
            ze_ok!(env, zeKernelSuggestMaxCooperativeGroupCount(k, &mut max));
            assert!(max >= 1, "resident groups {max}");
            const N: usize = 1000;
            let dst = env.alloc_device(N * 4) as *mut u32;
            let sig = env.alloc_device(64) as *mut u64;
            let src: Vec<u32> = (0..N as u32).collect();
            arg(env, k, 0, &dst);
            arg(env, k, 1, &src.as_ptr());
            arg(env, k, 2, &(N as u64));
            arg(env, k, 3, &sig);
            arg(env, k, 4, &1u64);
            ze_ok!(env, zeKernelSetGroupSize(k, 4, 1, 1));
            let imm = env.immediate(0, ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS);
            let fits = ze_group_count_t {
                groupCountX: max,
                groupCountY: 1,
                groupCountZ: 1,
            };
            ze_ok!(
                env,
                zeCommandListAppendLaunchCooperativeKernel(
                    imm,
                    k,
                    &fits,
                    ze_event_handle_t::null(),
                    0,
                    null_mut()
                )
            );
            // SAFETY: allocations of N u32 and one u64.
            unsafe {
                assert!((0..N).all(|i| *dst.add(i) == 2 * i as u32), "put data");
                assert_eq!(*sig, 1, "one cooperative launch ran");
            }
            // One group more than can be resident, in any dimension: refused, nothing runs.
            for too_many in [
                ze_group_count_t {
                    groupCountX: max + 1,
                    groupCountY: 1,
                    groupCountZ: 1,
                },
                ze_group_count_t {
                    groupCountX: max,
                    groupCountY: 1,
                    groupCountZ: 2,
                },
            ] {
                assert_eq!(
                    ze!(
                        env,
                        zeCommandListAppendLaunchCooperativeKernel(
                            imm,
                            k,
                            &too_many,
                            ze_event_handle_t::null(),
                            0,
                            null_mut()
                        )
                    ),
                    ZE_RESULT_ERROR_INVALID_ARGUMENT
                );
            }
            // SAFETY: as above.
            assert_eq!(unsafe { *sig }, 1, "the refused launches did not run");
            ze_ok!(env, zeKernelDestroy(k));
            ze_ok!(env, zeCommandListDestroy(imm));
            ze_ok!(env, zeModuleDestroy(m));
        },
    );
}

/// A module built from the same SPIR-V in a later process comes from the compiled-program cache
/// (`ZE_EMU_PROGRAM_CACHE`) and runs right; a corrupt entry is compiled again and replaced.
#[test]
fn compiled_programs_come_from_the_cache() {
    const NAME: &str = "compiled_programs_come_from_the_cache";
    if common::is_child(NAME) {
        run(NAME, Opts::default(), || {
            let env = Env::new();
            let m = load_module(&env);
            let k = kernel(&env, m, c"put_signal");
            const N: usize = 1000;
            let dst = env.alloc_device(N * 4) as *mut u32;
            let sig = env.alloc_device(64) as *mut u64;
            let src: Vec<u32> = (0..N as u32).collect();
            arg(&env, k, 0, &dst);
            arg(&env, k, 1, &src.as_ptr());
            arg(&env, k, 2, &(N as u64));
            arg(&env, k, 3, &sig);
            arg(&env, k, 4, &3u64);
            ze_ok!(env, zeKernelSetGroupSize(k, 64, 1, 1));
            let imm = env.immediate(0, ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS);
            let gc = ze_group_count_t {
                groupCountX: 4,
                groupCountY: 1,
                groupCountZ: 1,
            };
            ze_ok!(
                env,
                zeCommandListAppendLaunchKernel(
                    imm,
                    k,
                    &gc,
                    ze_event_handle_t::null(),
                    0,
                    null_mut()
                )
            );
            // SAFETY: allocations of N u32 and one u64.
            unsafe {
                assert!((0..N).all(|i| *dst.add(i) == 2 * i as u32), "put data");
                assert_eq!(*sig, 3, "signal added once");
            }
            ze_ok!(env, zeKernelDestroy(k));
            ze_ok!(env, zeCommandListDestroy(imm));
            ze_ok!(env, zeModuleDestroy(m));
        });
        return;
    }
    let Some(mut opts) = opts_with_spv() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("ze-emu-program-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    opts.env
        .push(("ZE_EMU_PROGRAM_CACHE".into(), dir.display().to_string()));
    let entries = || -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "bin"))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    // First process: compiled, and stored (the module's one program).
    run(NAME, opts.clone(), || {});
    let first = entries();
    assert_eq!(first.len(), 1, "one entry after the first build: {first:?}");
    let stored = std::fs::read(&first[0]).expect("entry");
    let modified = std::fs::metadata(&first[0]).and_then(|m| m.modified()).ok();
    // Second process: from the cache (the entry is not written again) and right.
    run(NAME, opts.clone(), || {});
    assert_eq!(entries(), first, "still one entry");
    assert_eq!(std::fs::read(&first[0]).expect("entry"), stored);
    assert_eq!(
        std::fs::metadata(&first[0]).and_then(|m| m.modified()).ok(),
        modified,
        "a hit does not rewrite the entry"
    );
    // A corrupt entry: compiled again, right, and replaced by a whole one.
    let mut bad = stored.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    std::fs::write(&first[0], &bad).expect("corrupt the entry");
    run(NAME, opts, || {});
    assert_eq!(std::fs::read(&first[0]).expect("entry"), stored, "replaced");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A compute group's second engine (queue index 1) runs while kernels on the first occupy every worker: as many
/// work-groups as can be resident wait, on engine 0, for a word that only a kernel launched on engine 1 once they
/// have all started sets. Each group records how long it waited, or that it gave up after `LIMIT` reads (seconds of spinning); with
/// both engines on one arena of workers, the second launch cannot start until the first gives up, and the groups
/// report that. (The runtime's service lane relies on this: a peer's atomic on this PE's heap must not wait for the
/// PE's own spinning kernel.)
#[test]
fn second_engine_runs_beside_a_kernel_that_fills_the_first() {
    kernel_case(
        "second_engine_runs_beside_a_kernel_that_fills_the_first",
        |env| {
            let m = load_module(env);
            let wait = kernel(env, m, c"wait_word");
            let set = kernel(env, m, c"put_signal");
            let mut groups = 0u32;
            ze_ok!(
                env,
                zeKernelSuggestMaxCooperativeGroupCount(wait, &mut groups)
            );
            const LIMIT: u64 = 1_000_000_000;
            let word = env.alloc_device(64) as *mut u64;
            let started = env.alloc_device(64) as *mut u64;
            let seen = env.alloc_device(8 * groups as usize) as *mut u64;
            // SAFETY: allocations of one, one and `groups` u64.
            unsafe {
                *word = 0;
                *started = 0;
                (0..groups as usize).for_each(|g| *seen.add(g) = 7);
            }
            arg(env, wait, 0, &word);
            arg(env, wait, 1, &LIMIT);
            arg(env, wait, 2, &seen);
            arg(env, wait, 3, &started);
            ze_ok!(env, zeKernelSetGroupSize(wait, 1, 1, 1));
            let first = env.immediate_on(0, 0, ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS);
            let (pool, ev) = env.events(1);
            let count = ze_group_count_t {
                groupCountX: groups,
                groupCountY: 1,
                groupCountZ: 1,
            };
            ze_ok!(
                env,
                zeCommandListAppendLaunchKernel(first, wait, &count, ev[0], 0, null_mut())
            );
            // Every group is running (holding a worker) before the second engine's launch.
            let t0 = std::time::Instant::now();
            // SAFETY: `started` is a live u64 the kernel updates atomically; read as an atomic.
            let running = || unsafe {
                (*(started as *const std::sync::atomic::AtomicU64))
                    .load(std::sync::atomic::Ordering::SeqCst)
            };
            while running() < groups as u64 {
                assert!(
                    t0.elapsed() < std::time::Duration::from_secs(60),
                    "{} of {groups} waiting groups started within 60 s",
                    running()
                );
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            // put_signal with no data: its work-item 0 adds 1 to the word.
            let none: *const u32 = std::ptr::null();
            arg(env, set, 0, &std::ptr::null_mut::<u32>());
            arg(env, set, 1, &none);
            arg(env, set, 2, &0u64);
            arg(env, set, 3, &word);
            arg(env, set, 4, &1u64);
            ze_ok!(env, zeKernelSetGroupSize(set, 1, 1, 1));
            let second = env.immediate_on(0, 1, ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS);
            let one = ze_group_count_t {
                groupCountX: 1,
                groupCountY: 1,
                groupCountZ: 1,
            };
            ze_ok!(
                env,
                zeCommandListAppendLaunchKernel(
                    second,
                    set,
                    &one,
                    ze_event_handle_t::null(),
                    0,
                    null_mut()
                )
            );
            ze_ok!(env, zeEventHostSynchronize(ev[0], u64::MAX));
            // SAFETY: as above; both kernels have finished.
            let got: Vec<u64> = (0..groups as usize)
                .map(|g| unsafe { *seen.add(g) })
                .collect();
            assert!(
                got.iter().all(|&n| n != u64::MAX && n != 7),
                "every waiting group saw the word set by the second engine's kernel (reads per group, \
                 {} = gave up): {got:?}",
                u64::MAX
            );
            ze_ok!(env, zeCommandListDestroy(second));
            ze_ok!(env, zeCommandListDestroy(first));
            ze_ok!(env, zeEventDestroy(ev[0]));
            ze_ok!(env, zeEventPoolDestroy(pool));
            ze_ok!(env, zeKernelDestroy(set));
            ze_ok!(env, zeKernelDestroy(wait));
            ze_ok!(env, zeMemFree(env.ctx, seen as *mut c_void));
            ze_ok!(env, zeMemFree(env.ctx, started as *mut c_void));
            ze_ok!(env, zeMemFree(env.ctx, word as *mut c_void));
            ze_ok!(env, zeModuleDestroy(m));
        },
    );
}
