//! Two threads of one PE launch the same kernel at the same time, through every public launch path, and every
//! launch runs with its own thread's arguments.
//!
//! Level Zero keeps a kernel's arguments in the kernel object and captures them when a launch is appended, so
//! setting them and appending must happen under one lock for a kernel shared between threads (the runtime's one
//! launch path, `ZeRuntime::append_kernel`). Without it a thread's launch can run with the other thread's
//! arguments: its data lands in the other thread's buffers and its signal is added to the other thread's word.
//! The reference each thread checks against is its own count of launches and its own source data.

use std::path::PathBuf;
use xpushmem::device::queue::QueueArg;
use xpushmem::{KernelArg, Result, Shmem, SymSlice};
use xpushmem_ops::{DType, DeviceOps, TensorView};

/// Launches per thread and path.
const ROUNDS: u64 = 150;
/// Words each launch copies.
const N: usize = 256;

/// The test kernels of shmem/device-lib, built to SPIR-V once per PE process.
fn test_kernels() -> Vec<u8> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = std::env::temp_dir().join(format!(
        "xpushmem-concurrent-kernels-{}",
        std::process::id()
    ));
    let st = std::process::Command::new("bash")
        .arg(root.join("shmem/device-lib/build.sh"))
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run shmem/device-lib/build.sh");
    assert!(st.success(), "building the test kernels failed");
    let spv = std::fs::read(out.join("test_kernels.spv")).expect("test_kernels.spv");
    let _ = std::fs::remove_dir_all(&out);
    spv
}

/// How a thread launches `put_signal` (dst[i] = src[i] * 2, then sig += 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    /// `Device::launch`: synchronous, on the runtime's list.
    Launch,
    /// `Device::launch_async`, then waiting for the event.
    LaunchAsync,
    /// `Device::enqueue` on the thread's own queue, then `submit_and_wait`.
    Enqueue,
}

/// One thread's buffers: its source (its own pattern), its destination and its signal word.
struct Lane {
    src: SymSlice<u32>,
    dst: SymSlice<u32>,
    sig: SymSlice<u64>,
    pattern: Vec<u32>,
}

fn lane(sh: &Shmem, t: u32) -> Result<Lane> {
    let me = sh.my_pe();
    let pattern: Vec<u32> = (0..N as u32)
        .map(|i| (t + 1) * 0x0100_0000 + i * 7 + 1)
        .collect();
    let src = sh.malloc::<u32>(N)?;
    let dst = sh.calloc::<u32>(N)?;
    let sig = sh.calloc::<u64>(1)?;
    sh.put(src, &pattern, me)?;
    Ok(Lane {
        src,
        dst,
        sig,
        pattern,
    })
}

/// `rounds` launches of `kernel` on `lane` through `path`; after each, this thread's signal counts exactly its
/// own launches, and at the end its destination holds its own source doubled.
fn run_lane(
    sh: &Shmem,
    kernel: &xpushmem::device::Kernel,
    lane: &Lane,
    path: Path,
) -> std::result::Result<(), String> {
    let me = sh.my_pe();
    let dev = sh.device().expect("a device heap");
    let e = |e: xpushmem::Error| format!("{path:?}: {e}");
    let args = [
        KernelArg::sym(lane.dst, me),
        KernelArg::sym(lane.src, me),
        KernelArg::U64(N as u64),
        KernelArg::sym(lane.sig, me),
        KernelArg::U64(1),
    ];
    let queue = dev.create_queue(true).map_err(e)?;
    for round in 1..=ROUNDS {
        match path {
            Path::Launch => {
                // SAFETY: put_signal writes N words of this thread's dst and its signal word, reads N words of
                // its src.
                unsafe { dev.launch(kernel, &args, [1, 1, 1], [32, 1, 1]) }.map_err(e)?
            }
            Path::LaunchAsync => {
                // SAFETY: as above; the buffers outlive the event, which is waited for here.
                let ev =
                    unsafe { dev.launch_async(kernel, &args, [1, 1, 1], [32, 1, 1]) }.map_err(e)?;
                ev.wait().map_err(e)?;
            }
            Path::Enqueue => {
                let qargs: Vec<QueueArg<'_>> = args.iter().map(|&a| QueueArg::Kernel(a)).collect();
                // SAFETY: as above; the queue is waited for before the buffers could go.
                unsafe { dev.enqueue(queue.list(), kernel, &qargs, [1, 1, 1], [32, 1, 1]) }
                    .map_err(e)?;
                dev.submit_and_wait(&queue).map_err(e)?;
            }
        }
        let got = sh.g(lane.sig.at(0).map_err(e)?, me).map_err(e)?;
        if got != round {
            return Err(format!(
                "{path:?}: after {round} launches of this thread its signal is {got} (a launch ran with the other \
                 thread's arguments)"
            ));
        }
    }
    let mut dst = vec![0u32; N];
    sh.get(&mut dst, lane.dst, me).map_err(e)?;
    let want: Vec<u32> = lane.pattern.iter().map(|x| x.wrapping_mul(2)).collect();
    if dst != want {
        return Err(format!(
            "{path:?}: the destination does not hold this thread's source doubled"
        ));
    }
    Ok(())
}

/// Both threads run `paths.0` and `paths.1` on the same kernel object at the same time.
fn concurrent(sh: &Shmem, kernel: &xpushmem::device::Kernel, paths: (Path, Path)) -> Result<()> {
    let lanes = [lane(sh, 0)?, lane(sh, 1)?];
    let barrier = std::sync::Barrier::new(2);
    let outcome: Vec<std::result::Result<(), String>> = std::thread::scope(|s| {
        let handles: Vec<_> = [paths.0, paths.1]
            .into_iter()
            .zip(&lanes)
            .map(|(path, lane)| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    run_lane(sh, kernel, lane, path)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("lane thread"))
            .collect()
    });
    for o in outcome {
        assert!(o.is_ok(), "{paths:?}: {}", o.unwrap_err());
    }
    Ok(())
}

/// The ops path: two threads enqueue `nvshmem_put_with_signal` (the op kernels' module, one kernel object for
/// both) to this PE on their own queues; each thread's signal word ends at each round's value.
fn concurrent_ops(sh: &Shmem) -> Result<()> {
    let ops = DeviceOps::new(sh)?;
    let me = sh.my_pe();
    let mut lanes = Vec::new();
    for t in 0..2u64 {
        let data = sh.calloc::<u8>(64)?;
        let sig = sh.calloc::<i64>(1)?;
        lanes.push((t, data, sig));
    }
    let barrier = std::sync::Barrier::new(2);
    let outcome: Vec<std::result::Result<(), String>> = std::thread::scope(|s| {
        let handles: Vec<_> = lanes
            .iter()
            .map(|&(t, data, sig)| {
                let (barrier, ops) = (&barrier, &ops);
                s.spawn(move || -> std::result::Result<(), String> {
                    let e = |e: xpushmem::Error| format!("ops lane {t}: {e}");
                    let dev = sh.device().expect("a device heap");
                    let q = dev.create_queue(true).map_err(e)?;
                    let tv = TensorView::of(sh, data, DType::U8, &[64]).map_err(e)?;
                    let sv = TensorView::of(sh, sig, DType::I64, &[1]).map_err(e)?;
                    barrier.wait();
                    for round in 1..=ROUNDS as i64 {
                        let value = (t as i64 + 1) * 1_000_000 + round;
                        let h = ops
                            .nvshmem_put_with_signal(sh, q.list(), &tv, &sv, value, me as i64)
                            .map_err(e)?;
                        dev.submit_and_wait(&q).map_err(e)?;
                        h.wait(sh).map_err(e)?;
                        let got = sh.g(sig.at(0).map_err(e)?, me).map_err(e)?;
                        if got != value {
                            return Err(format!(
                                "ops lane {t}: round {round} set its signal to {value}, it reads {got} (an op \
                                 kernel ran with the other thread's arguments)"
                            ));
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("ops lane thread"))
            .collect()
    });
    for o in outcome {
        assert!(o.is_ok(), "{}", o.unwrap_err());
    }
    Ok(())
}

fn same_kernel_from_two_threads(sh: &Shmem) -> Result<()> {
    let dev = sh.device().expect("a device heap");
    let module = dev.load_module(&test_kernels())?;
    let kernel = dev.kernel(&module, "put_signal")?;
    for paths in [
        (Path::Enqueue, Path::Enqueue),
        (Path::Launch, Path::Enqueue),
        (Path::LaunchAsync, Path::Enqueue),
        (Path::Launch, Path::LaunchAsync),
        (Path::Launch, Path::Launch),
    ] {
        concurrent(sh, &kernel, paths)?;
    }
    concurrent_ops(sh)
}

/// One PE on a ze-emu device heap. Waits are bounded by 10 s, so a launch that ran with the other thread's
/// arguments (an op whose status record is never written) fails well inside the job's limit.
#[test]
fn same_kernel_from_two_threads_dev_1pe() {
    let name = xpushmem_tests::test_name(module_path!(), "same_kernel_from_two_threads_dev_1pe");
    if xpushmem_tests::is_pe_of(&name) {
        xpushmem_tests::run_pe(same_kernel_from_two_threads);
    }
    let mut env = xpushmem_tests::device_env();
    env.push(("XPUSHMEM_TIMEOUT_MS".into(), "10000".into()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let out = xpushmem_tests::spawn_pes_with(&name, 1, &env);
    xpushmem_tests::assert_success(&name, 1, &out);
}
