//! The device path over ze-emu through the real Level Zero loader (validation layer on): device heaps mapped
//! between processes through IPC descriptors, a SPIR-V kernel that writes into a peer's heap and signals it,
//! and copy-engine puts with signals.

use std::path::PathBuf;
use xpushmem::{Cmp, HeapKind, KernelArg, SignalOp};
use xpushmem_tests::{pe_test, ref_vec};

/// The test kernels of shmem/device-lib, built to SPIR-V once per PE process.
fn test_kernels() -> Vec<u8> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = std::env::temp_dir().join(format!("xpushmem-test-kernels-{}", std::process::id()));
    let st = std::process::Command::new("bash")
        .arg(root.join("shmem/device-lib/build.sh"))
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run shmem/device-lib/build.sh");
    assert!(
        st.success(),
        "building the test kernels failed (scripts/setup-device.sh installs clang-14)"
    );
    let spv = std::fs::read(out.join("test_kernels.spv")).expect("test_kernels.spv");
    let _ = std::fs::remove_dir_all(&out);
    spv
}

pe_test!(
    device_heap_kernel_puts_into_peer_and_signals,
    dev [2, 4],
    |sh| {
    assert_eq!(sh.heap_kind(), HeapKind::Device);
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let dev = sh.device().expect("a device heap has a device");
    assert!(!dev.name().is_empty());
    const N: usize = 4096;
    let src = sh.malloc::<u32>(N)?;
    let dst = sh.calloc::<u32>(N)?;
    let sig = sh.calloc::<u64>(1)?.at(0)?;
    let mine: Vec<u32> = ref_vec(me, N, 1);
    sh.put(src, &mine, me)?; // host -> own device heap (copy engine)
    sh.barrier_all()?;
    let module = dev.load_module(&test_kernels())?;
    let kernel = dev.kernel(&module, "put_signal")?;
    let right = (me + 1) % n;
    // dst[i] = src[i] * 2 into the right neighbour's heap, then add 1 to its signal (CrossDevice scope). One
    // work-group: the kernel's signal follows a work-group barrier, which orders only its own group's writes (with
    // more groups the neighbour could see the signal before another group's data).
    let args = [
        KernelArg::sym(dst, right),
        KernelArg::sym(src, me),
        KernelArg::U64(N as u64),
        KernelArg::sym_ref(sig, right),
        KernelArg::U64(1),
    ];
    // SAFETY: put_signal writes n words of dst (the right neighbour's copy, n = its extent) and one signal word.
    unsafe { dev.launch(&kernel, &args, [1, 1, 1], [64, 1, 1])? };
    assert_eq!(sh.signal_wait_until(sig, Cmp::Eq, 1)?, 1);
    let mut got = vec![0u32; N];
    sh.get(&mut got, dst, me)?;
    let left: Vec<u32> = ref_vec((me + n - 1) % n, N, 1);
    assert!(got.iter().zip(&left).all(|(g, l)| *g == l.wrapping_mul(2)), "kernel-written data from the left PE");
    // The same kernel started asynchronously into this PE's own heap: the event completes, then the data is there.
    let mine2: Vec<u32> = ref_vec(me, N, 2);
    sh.put(src, &mine2, me)?;
    let own_sig = sh.calloc::<u64>(1)?.at(0)?;
    let args = [
        KernelArg::sym(dst, me),
        KernelArg::sym(src, me),
        KernelArg::U64(N as u64),
        KernelArg::sym_ref(own_sig, me),
        KernelArg::U64(7),
    ];
    // SAFETY: as above, on this PE's own buffers, which outlive the event.
    let ev = unsafe { dev.launch_async(&kernel, &args, [2, 1, 1], [32, 1, 1])? };
    ev.wait()?;
    assert_eq!(sh.signal_fetch(own_sig)?, 7);
    sh.get(&mut got, dst, me)?;
    assert!(got.iter().zip(&mine2).all(|(g, l)| *g == l.wrapping_mul(2)), "async kernel's data");
    // Bad kernel arguments are errors, not crashes.
    // SAFETY: the arguments are rejected before anything runs.
    let r = unsafe { dev.launch(&kernel, &[KernelArg::sym(dst, n)], [1, 1, 1], [1, 1, 1]) };
    assert!(matches!(r, Err(xpushmem::Error::InvalidPe { .. })), "PE out of range: {r:?}");
    // Level Zero failures keep the call's ze_result_t (the spec's codes for these two cases).
    let e = dev.kernel(&module, "no_such_kernel").expect_err("no such kernel");
    assert_eq!(e.ze_result().and_then(|r| r.name()), Some("ZE_RESULT_ERROR_INVALID_KERNEL_NAME"), "{e}");
    assert_eq!(e.code(), xpushmem::ErrorCode::Device);
    let e = dev.load_module(b"not spir-v").expect_err("not SPIR-V");
    assert_eq!(e.ze_result().and_then(|r| r.name()), Some("ZE_RESULT_ERROR_MODULE_BUILD_FAILURE"), "{e}");
    sh.barrier_all()?;
    Ok(())
});

pe_test!(
    device_heap_copy_engine_put_signal,
    shm [1],
    dev [2, 4],
    |sh| {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let buf = sh.calloc::<u64>(1024 * n)?;
    let sig = sh.calloc::<u64>(1)?.at(0)?;
    for pe in 0..n {
        let data: Vec<u64> = ref_vec(me, 1024, pe as u64);
        sh.put_signal(buf.slice(1024 * me..1024 * (me + 1))?, &data, sig, 1, SignalOp::Add, pe)?;
    }
    sh.signal_wait_until(sig, Cmp::Eq, n as u64)?;
    let mut got = vec![0u64; 1024 * n];
    sh.get(&mut got, buf, me)?;
    for pe in 0..n {
        assert_eq!(&got[1024 * pe..1024 * (pe + 1)], &ref_vec::<u64>(pe, 1024, me as u64)[..], "block from PE {pe}");
    }
    sh.barrier_all()?;
    Ok(())
});

fn expect_init_error(func: &str, extra: &[(&str, &str)], needle: &str) {
    let name = xpushmem_tests::test_name(module_path!(), func);
    if xpushmem_tests::is_pe_of(&name) {
        match xpushmem::init() {
            Ok(_) => panic!("init succeeded, expected an error containing {needle:?}"),
            Err(e) => {
                assert!(
                    e.to_string().contains(needle),
                    "error {e:?} lacks {needle:?}"
                );
                std::process::exit(0);
            }
        }
    }
    let mut env = xpushmem_tests::device_env();
    env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let out = xpushmem_tests::spawn_pes_with(&name, 2, &env);
    xpushmem_tests::assert_success(&name, 2, &out);
}

#[test]
fn a_device_number_past_the_last_device_is_an_error_2pe() {
    expect_init_error(
        "a_device_number_past_the_last_device_is_an_error_2pe",
        &[("XPUSHMEM_DEVICE", "5")],
        "device 5 requested (XPUSHMEM_DEVICE or local rank), but Level Zero exposes 1 device(s)",
    );
}

#[test]
fn a_missing_level_zero_driver_is_an_error_not_a_crash_2pe() {
    expect_init_error(
        "a_missing_level_zero_driver_is_an_error_not_a_crash_2pe",
        &[("ZE_ENABLE_ALT_DRIVERS", "/nonexistent/libze_nothing.so")],
        "zeInit failed",
    );
}

#[test]
fn pidfd_fd_taking_and_one_device_per_pe_4pe() {
    // Force the pidfd_getfd path (the default is SCM_RIGHTS over the authenticated node socket) and give every PE
    // its own emulated device (local rank modulo 4).
    let name =
        xpushmem_tests::test_name(module_path!(), "pidfd_fd_taking_and_one_device_per_pe_4pe");
    if xpushmem_tests::is_pe_of(&name) {
        xpushmem_tests::run_pe(|sh| {
            assert_eq!(sh.heap_kind(), HeapKind::Device);
            let (me, n) = (sh.my_pe(), sh.n_pes());
            let x = sh.calloc::<u64>(n)?;
            for pe in 0..n {
                sh.atomic_add(x.at(me)?, me as u64 + 1, pe)?;
            }
            sh.barrier_all()?;
            let mut got = vec![0u64; n];
            sh.get(&mut got, x, me)?;
            assert_eq!(got, (1..=n as u64).collect::<Vec<_>>());
            Ok(())
        });
    }
    let mut env = xpushmem_tests::device_env();
    env.push(("XPUSHMEM_IPC".into(), "pidfd".into()));
    env.push(("XPUSHMEM_EMU_DEVICES".into(), "4".into()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let out = xpushmem_tests::spawn_pes_with(&name, 4, &env);
    xpushmem_tests::assert_success(&name, 4, &out);
}

#[test]
fn adopted_framework_handles_back_the_device_heap_2pe() {
    // A host framework (SYCL, PyTorch XPU) opened the driver, device and context; xpushmem adopts them instead of
    // opening its own, and every device operation then runs in the framework's context.
    let name = xpushmem_tests::test_name(
        module_path!(),
        "adopted_framework_handles_back_the_device_heap_2pe",
    );
    if xpushmem_tests::is_pe_of(&name) {
        let (driver, device, context) =
            ze_emu::testing::framework_handles().expect("framework handles");
        let attr = xpushmem::InitAttr {
            heap: Some(HeapKind::Device),
            // SAFETY: ze-emu's framework handles are live handles of its one driver, loaded through this
            // process's loader, and outlive the runtime (the test process keeps them).
            device_handles: Some(unsafe {
                xpushmem::transport::ze::ExternalHandles::new(driver, device, context)
            }),
            ..Default::default()
        };
        let sh = xpushmem::init_attr(attr).expect("init with adopted handles");
        let body = || -> xpushmem::Result<()> {
            let h = sh.device().expect("device").handles();
            assert_eq!(
                h.context(),
                context,
                "the runtime works in the framework's context"
            );
            assert_eq!(h.device(), device);
            let (me, n) = (sh.my_pe(), sh.n_pes());
            let x = sh.calloc::<u64>(64)?;
            sh.put(x, &[me as u64 + 1; 64], (me + 1) % n)?;
            sh.barrier_all()?;
            let mut got = [0u64; 64];
            sh.get(&mut got, x, me)?;
            assert_eq!(got, [((me + n - 1) % n) as u64 + 1; 64]);
            Ok(())
        };
        let r = body().and_then(|()| sh.finalize());
        if let Err(e) = r {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
        std::process::exit(0);
    }
    let env = xpushmem_tests::device_env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let out = xpushmem_tests::spawn_pes_with(&name, 2, &env);
    xpushmem_tests::assert_success(&name, 2, &out);
}
