//! Bad input and faults are typed errors with clear messages, never an abort, a panic or a hang: invalid PEs,
//! addresses outside the heap, ranges past its end, mismatched collective allocations, an exhausted heap (still
//! usable after), wait timeouts, a peer that dies in a barrier, a failing PE taking the job down, bad config.

use std::time::Duration;
use xpushmem::{Cmp, Error};
use xpushmem_tests::{assert_success, is_pe_of, pe_test, run_pe, spawn_pes_with, test_name};

pe_test!(
    invalid_pe_is_an_error_naming_the_pe_and_the_range,
    shm [1, 4],
    |sh| {
        let n = sh.n_pes();
        let x = sh.calloc::<u64>(4)?;
        for bad in [n, usize::MAX, n + 1000] {
            let e = sh.put(x, &[1], bad).unwrap_err();
            assert!(matches!(e, Error::InvalidPe { .. }), "{e}");
            let shown = if bad == usize::MAX {
                "-1".to_string()
            } else {
                bad.to_string()
            };
            assert_eq!(
                e.to_string(),
                format!("invalid PE {shown}: must be in [0, {n}) (put)")
            );
            let bad_pe = |r: &Error| matches!(r, Error::InvalidPe { pe, n_pes, .. } if *pe == bad as i64 && *n_pes == n);
            let e = sh.g(x.at(0)?, bad).unwrap_err();
            assert!(bad_pe(&e), "g: {e}");
            let e = sh.atomic_fetch_add(x.at(0)?, 1, bad).unwrap_err();
            assert!(bad_pe(&e), "atomic_fetch_add: {e}");
            let e = sh
                .put_signal(x, &[1], x.at(3)?, 1, xpushmem::SignalOp::Set, bad)
                .unwrap_err();
            assert!(bad_pe(&e), "put_signal: {e}");
            let e = sh.ptr(x, bad).unwrap_err();
            assert!(bad_pe(&e), "ptr: {e}");
        }
        sh.barrier_all()?;
        sh.free(x)
    }
);

pe_test!(
    addresses_outside_the_heap_and_ranges_past_its_end,
    shm [1, 2],
    |sh| {
        let local = [0u64; 4];
        let addr = local.as_ptr() as usize;
        let e = sh.sym_slice_from_addr::<u64>(addr, 4).unwrap_err();
        assert!(matches!(e, Error::NotSymmetric { .. }), "{e}");
        let base = sh.heap_base() as usize;
        assert!(
            e.to_string()
                .contains(&format!("address {addr:#x} is not symmetric")),
            "{e}"
        );
        assert!(
            e.to_string()
                .contains(&format!("[{base:#x}, {:#x})", base + sh.heap_size())),
            "{e}"
        );
        // Starts inside, runs past the end.
        let near_end = base + sh.heap_size() - 64;
        let e = sh.sym_slice_from_addr::<u64>(near_end, 100).unwrap_err();
        assert!(matches!(e, Error::OutOfBounds { .. }), "{e}");
        assert!(
            e.to_string()
                .contains(&format!("runs past the limit {}", sh.heap_size())),
            "{e}"
        );
        // In range is fine; misaligned is an error.
        assert!(sh.sym_slice_from_addr::<u64>(near_end, 8).is_ok());
        assert!(matches!(
            sh.sym_slice_from_addr::<u64>(near_end + 1, 1),
            Err(Error::InvalidArgument { name: "addr", .. })
        ));
        // A put longer than its destination object.
        let x = sh.malloc::<u32>(8)?;
        let e = sh.put(x, &[0u32; 9], sh.my_pe()).unwrap_err();
        assert!(
            e.to_string()
                .contains("element count [0, 0+9) runs past the limit 8"),
            "{e}"
        );
        let mut big = [0u32; 9];
        assert!(matches!(
            sh.get(&mut big, x, sh.my_pe()),
            Err(Error::OutOfBounds {
                what: "element count",
                len: 9,
                limit: 8,
                ..
            })
        ));
        sh.barrier_all()?;
        sh.free(x)
    }
);

pe_test!(
    mismatched_collective_malloc_fails_on_every_pe,
    shm [2, 4],
    |sh| {
        let me = sh.my_pe();
        let e = sh.malloc::<u64>(1 + (me == 1) as usize).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Mismatch {
                    pe: 1,
                    reference_pe: 0,
                    ..
                }
            ),
            "PE {me}: {e}"
        );
        assert_eq!(
            e.to_string(),
            "collective mismatch in malloc: PE 1 passed malloc(2 elements of 8 bytes, align 1), \
         but PE 0 passed malloc(1 elements of 8 bytes, align 1)"
        );
        // The heap is unchanged and still usable.
        let ok = sh.malloc::<u64>(4)?;
        sh.put(ok, &[me as u64; 4], me)?;
        // A mismatched free is caught too.
        let other = sh.malloc::<u64>(4)?;
        let e = sh.free(if me == 0 { ok } else { other }).unwrap_err();
        assert!(matches!(e, Error::Mismatch { call: "free", .. }), "{e}");
        sh.free(other)?;
        sh.free(ok)
    }
);

pe_test!(
    heap_exhaustion_is_an_error_and_the_heap_stays_usable,
    env [&[("XPUSHMEM_SYMMETRIC_SIZE", "16M"), ("XPUSHMEM_SYMMETRIC_MAX", "64M")]],
    shm [1, 2, 4],
    |sh| {
        // The heap starts at its first chunk and grows, chunk by chunk, up to its maximum.
        assert_eq!(sh.heap_size(), 16 << 20);
        let size = sh.heap_max();
        assert_eq!(size, 64 << 20);
        let small = sh.malloc::<u8>(1)?;
        let e = sh.malloc::<u8>(size - 32).unwrap_err();
        assert!(matches!(e, Error::HeapExhausted { .. }), "{e}");
        let msg = e.to_string();
        assert!(
            msg.starts_with(&format!(
                "symmetric heap exhausted: malloc of {} bytes",
                size - 32
            )),
            "{msg}"
        );
        assert!(
            msg.contains(&format!("heap limit {size} bytes (XPUSHMEM_SYMMETRIC_MAX)")),
            "{msg}"
        );
        // More than the heap at all is an argument error.
        assert!(matches!(
            sh.malloc::<u64>(size).unwrap_err(),
            Error::InvalidArgument { .. }
        ));
        // Fill the heap with 64 KiB blocks until it is full, then free one and allocate again.
        let mut blocks = Vec::new();
        let err = loop {
            match sh.malloc::<u8>(64 << 10) {
                Ok(b) => blocks.push(b),
                Err(e) => break e,
            }
        };
        assert!(matches!(err, Error::HeapExhausted { .. }), "{err}");
        assert!(blocks.len() >= size / (64 << 10) - 2);
        assert_eq!(sh.heap_size(), size, "grown to the maximum");
        sh.free(small)?;
        let last = blocks.pop().expect("at least one block");
        sh.free(last)?;
        let again = sh.malloc::<u8>(64 << 10)?;
        sh.put(again, &[7u8; 64 << 10], (sh.my_pe() + 1) % sh.n_pes())?;
        sh.barrier_all()?;
        for b in blocks.into_iter().rev() {
            sh.free(b)?;
        }
        sh.free(again)
    }
);

#[test]
fn heap_exhaustion_under_a_small_configured_heap_2pe() {
    let name = test_name(
        module_path!(),
        "heap_exhaustion_under_a_small_configured_heap_2pe",
    );
    if is_pe_of(&name) {
        run_pe(|sh| {
            assert_eq!(sh.heap_size(), 1 << 20);
            let e = sh.malloc::<u8>(2 << 20).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
            let b = sh.malloc::<u8>(512 << 10)?;
            let e = sh.malloc::<u8>(600 << 10).unwrap_err();
            assert!(matches!(e, Error::HeapExhausted { .. }), "{e}");
            assert!(
                e.to_string()
                    .contains("524288 in use, largest free block 524288"),
                "{e}"
            );
            let c = sh.malloc::<u8>(512 << 10)?;
            sh.free(c)?;
            sh.free(b)
        });
    }
    let out = spawn_pes_with(
        &name,
        2,
        &[
            ("XPUSHMEM_SYMMETRIC_SIZE", "1M"),
            ("XPUSHMEM_SYMMETRIC_MAX", "1M"),
        ],
    );
    assert_success(&name, 2, &out);
}

/// Under an address-space limit (`RLIMIT_AS`, as `ulimit -v` or valgrind impose one; set by the PE before init): a
/// given `XPUSHMEM_SYMMETRIC_MAX` whose reserve does not fit fails init with a configuration error naming the
/// variable and its value; unset, the reserve shrinks to fit (at most an eighth of the limit; here no more than the
/// 512 MiB first chunk, so the heap's maximum is its first chunk), the heap works, and an allocation beyond its
/// maximum names the reserved address space, not a heap that cannot grow (which it said before).
#[test]
fn heap_reserve_under_an_address_space_limit_1pe() {
    const LIMIT: u64 = 8 << 30;
    const MAX: usize = 4 << 30;
    let name = test_name(
        module_path!(),
        "heap_reserve_under_an_address_space_limit_1pe",
    );
    if is_pe_of(&name) {
        use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
        let hard = getrlimit(Resource::As).maximum;
        let limit = hard.map_or(LIMIT, |h| h.min(LIMIT));
        setrlimit(
            Resource::As,
            Rlimit {
                current: Some(limit),
                maximum: hard,
            },
        )
        .expect("setrlimit(RLIMIT_AS)");
        if std::env::var_os("XPUSHMEM_SYMMETRIC_MAX").is_some() {
            let e = xpushmem::init().map(drop).unwrap_err();
            let ok = matches!(&e, Error::Config { var: "XPUSHMEM_SYMMETRIC_MAX", value, reason }
                if *value == MAX.to_string() && reason.contains("reserving a heap's address space failed"));
            std::process::exit(if ok {
                0
            } else {
                eprintln!("unexpected: {e:?}");
                1
            });
        }
        run_pe(|sh| {
            let max = sh.heap_max();
            assert_eq!(max, 512 << 20, "the first chunk, the reserve being smaller");
            let half = sh.malloc::<u8>(max / 2)?;
            sh.put(half, &[7u8; 4096], 0)?;
            let e = sh.malloc::<u8>(max + 4096).unwrap_err();
            let msg = e.to_string();
            assert!(matches!(e, Error::InvalidArgument { .. }), "{msg}");
            assert!(
                msg.contains(&format!("exceed the heap's limit {max} bytes"))
                    && msg.contains("the address space reserved for the heap")
                    && !msg.contains("does not grow"),
                "{msg}"
            );
            sh.free(half)
        });
    }
    let max = MAX.to_string();
    for env in [
        &[("XPUSHMEM_SYMMETRIC_SIZE", "512M")][..],
        &[
            ("XPUSHMEM_SYMMETRIC_SIZE", "16M"),
            ("XPUSHMEM_SYMMETRIC_MAX", max.as_str()),
        ],
    ] {
        let out = spawn_pes_with(&name, 1, env);
        assert_success(&name, 1, &out);
    }
}

#[test]
fn wait_until_times_out_with_a_clear_error_2pe() {
    let name = test_name(
        module_path!(),
        "wait_until_times_out_with_a_clear_error_2pe",
    );
    if is_pe_of(&name) {
        run_pe(|sh| {
            let flag = sh.calloc::<u64>(1)?.at(0)?;
            let start = std::time::Instant::now();
            let e = sh.wait_until(flag, Cmp::Eq, 1).unwrap_err();
            assert!(matches!(e, Error::Timeout { .. }), "{e}");
            assert!(start.elapsed() >= Duration::from_millis(300));
            let msg = e.to_string();
            assert!(msg.starts_with("timeout: wait_until waited"), "{msg}");
            assert!(msg.contains("(limit 300ms, XPUSHMEM_TIMEOUT_MS)"), "{msg}");
            let e = sh.signal_wait_until(flag, Cmp::Gt, 5).unwrap_err();
            assert!(e.to_string().contains("signal at heap+"), "{e}");
            Ok(())
        });
    }
    let out = spawn_pes_with(&name, 2, &[("XPUSHMEM_TIMEOUT_MS", "300")]);
    assert_success(&name, 2, &out);
}

fn dev_shm() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/dev/shm")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn peer_lost_case(n: usize, func: &str) {
    let name = test_name(module_path!(), func);
    if is_pe_of(&name) {
        run_pe(|sh| {
            let (me, n) = (sh.my_pe(), sh.n_pes());
            let x = sh.calloc::<u64>(1)?;
            let out = sh.calloc::<u64>(1)?.at(0)?;
            sh.barrier_all()?;
            // The victim dies without finalize (exit status 0, so the launcher does not stop the job for us) once
            // the others have left the first barrier (the wait's lost-peer check covers every PE, not only the one
            // it waits for).
            xpushmem_tests::victim_leaves_last(sh, out, n - 1)?;
            let start = std::time::Instant::now();
            let e = sh.barrier_all().unwrap_err();
            assert!(matches!(e, Error::PeerLost { .. }), "PE {me}: {e}");
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "detected within the timeout"
            );
            let msg = e.to_string();
            assert!(msg.contains("left the job without finalize"), "{msg}");
            assert!(
                msg.contains(&format!("while PE {me} was in barrier_all")),
                "{msg}"
            );
            // Later calls that need the dead PE fail fast too; local ones still work.
            sh.put(x, &[1], me)?;
            Ok(())
        });
    }
    let shm_before = dev_shm();
    let out = spawn_pes_with(&name, n, &[]);
    assert_success(&name, n, &out);
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        xpushmem_tests::processes_of(&name).is_empty(),
        "orphan PE processes: {:?}",
        xpushmem_tests::processes_of(&name)
    );
    assert_eq!(dev_shm(), shm_before, "nothing left in /dev/shm");
}

#[test]
fn peer_lost_in_barrier_is_reported_2pe() {
    peer_lost_case(2, "peer_lost_in_barrier_is_reported_2pe");
}

#[test]
fn peer_lost_in_barrier_is_reported_4pe() {
    peer_lost_case(4, "peer_lost_in_barrier_is_reported_4pe");
}

#[test]
fn a_failing_pe_stops_the_job_with_its_status_4pe() {
    let name = test_name(
        module_path!(),
        "a_failing_pe_stops_the_job_with_its_status_4pe",
    );
    if is_pe_of(&name) {
        run_pe(|sh| {
            if sh.my_pe() == 2 {
                std::process::exit(3);
            }
            // The others would wait for PE 2 in vain; the launcher must end them.
            std::thread::sleep(Duration::from_secs(600));
            Ok(())
        });
    }
    let out = spawn_pes_with(&name, 4, &[]);
    assert_eq!(
        out.first_failure,
        Some((2, xpushmem_launch::PeExit::Code(3))),
        "{out:?}"
    );
    assert_eq!(out.exit_code(), 3);
    assert!(
        out.elapsed < Duration::from_secs(30),
        "the group was killed promptly: {:?}",
        out.elapsed
    );
    assert!(xpushmem_tests::processes_of(&name).is_empty(), "no orphans");
}

#[test]
fn the_launcher_time_limit_ends_a_hung_job_2pe() {
    let name = test_name(
        module_path!(),
        "the_launcher_time_limit_ends_a_hung_job_2pe",
    );
    if is_pe_of(&name) {
        std::thread::sleep(Duration::from_secs(600));
        return;
    }
    let exe = std::env::current_exe().expect("test binary");
    let mut job = xpushmem_launch::Job::new(2, exe);
    job.args = vec![name.clone(), "--exact".into(), "--nocapture".into()];
    job.env = vec![(xpushmem_tests::CASE_VAR.into(), name.clone())];
    job.timeout = Some(Duration::from_secs(1));
    job.capture = true;
    let out = job.run().expect("launch");
    assert!(out.timed_out);
    assert_eq!(out.exit_code(), 124);
    assert!(out.elapsed < Duration::from_secs(10));
    assert!(xpushmem_tests::processes_of(&name).is_empty(), "no orphans");
}

#[test]
fn bad_configuration_is_an_error_naming_the_variable_1pe() {
    let name = test_name(
        module_path!(),
        "bad_configuration_is_an_error_naming_the_variable_1pe",
    );
    if is_pe_of(&name) {
        let e = xpushmem::init().unwrap_err();
        assert_eq!(
            e.to_string(),
            "configuration: XPUSHMEM_SYMMETRIC_SIZE=lots: expected bytes or a number with K/M/G/T suffix, e.g. 512M or 2G"
        );
        std::process::exit(0);
    }
    let out = spawn_pes_with(&name, 1, &[("XPUSHMEM_SYMMETRIC_SIZE", "lots")]);
    assert_success(&name, 1, &out);
}

pe_test!(
    init_twice_is_a_state_error,
    shm [1, 2],
    |sh| {
    let e = xpushmem::init().unwrap_err();
    assert!(matches!(e, Error::State(_)), "{e}");
    assert!(e.to_string().contains("already initialised"));
    Ok(())
});

/// Messages name the argument that is wrong, with the value passed (issue 14, item 5): a strided put whose stride
/// makes the span overflow names the stride (not a computed element count); alltoall and fcollect with a huge
/// nelems name nelems as passed; overlap errors of broadcast and alltoall show the `nelems` elements involved.
pub mod messages_name_the_value_passed {
    use super::*;

    fn body(sh: &xpushmem::Shmem) -> xpushmem::Result<()> {
        let (me, n) = (sh.my_pe(), sh.n_pes());
        let w = sh.team_world();
        let a = sh.calloc::<i64>(64)?;
        let stride = usize::MAX / 2 + 1;
        match sh.iput(a, &[1, 2, 3], stride, 1, 3, (me + 1) % n) {
            Err(Error::InvalidArgument { name, value, .. }) => {
                assert_eq!((name, value), ("dst_stride", stride.to_string()))
            }
            r => panic!("iput with dst_stride {stride}: {r:?}"),
        }
        match sh.iput(a, &[1, 2, 3], 1, stride, 3, (me + 1) % n) {
            Err(Error::InvalidArgument { name, value, .. }) => {
                assert_eq!((name, value), ("src_stride", stride.to_string()))
            }
            r => panic!("iput with src_stride {stride}: {r:?}"),
        }
        // alltoall / fcollect with a huge nelems: the error names nelems with the value passed (whether the
        // team's total overflows or only runs past the buffer).
        for huge in [usize::MAX / 3, usize::MAX / 2 + 1] {
            let (d, s) = (a.slice(..32)?, a.slice(32..)?);
            for (what, r) in [
                ("alltoall", sh.alltoall(&w, d, s, huge)),
                ("fcollect", sh.fcollect(&w, d, s, huge)),
            ] {
                let overflows = n.checked_mul(huge).is_none();
                match r {
                    Err(Error::InvalidArgument { name, value, .. }) if overflows => {
                        assert_eq!((name, value), ("nelems", huge.to_string()), "{what}")
                    }
                    Err(Error::OutOfBounds {
                        what: w, context, ..
                    }) if !overflows => {
                        assert_eq!(w, "dest", "{what}");
                        assert!(
                            context.contains(&format!("with nelems = {huge}:")),
                            "{what}: {context}"
                        );
                    }
                    r => panic!("{what} with nelems {huge} at {n} PEs: {r:?}"),
                }
            }
        }
        // Overlap errors show the nelems elements involved, not the rest of the buffer.
        match sh.broadcast(&w, a.slice(1..)?, a, 4, 0) {
            Err(Error::InvalidArgument {
                name,
                value,
                reason,
            }) if me == 0 => {
                assert_eq!(name, "dest");
                assert_eq!(value, format!("{:?}", a.slice(1..5)?));
                assert!(reason.contains("(nelems = 4)"), "{reason}");
            }
            Err(Error::Mismatch { .. }) if me != 0 => {}
            r => panic!("PE {me}: broadcast with overlapping dest: {r:?}"),
        }
        match sh.alltoall(&w, a.slice(1..)?, a, 2) {
            Err(Error::InvalidArgument {
                name,
                value,
                reason,
            }) => {
                assert_eq!(name, "dest");
                assert_eq!(value, format!("{:?}", a.slice(1..1 + 2 * n)?));
                assert!(reason.contains("(nelems = 2)"), "{reason}");
            }
            r => panic!("alltoall with overlapping dest: {r:?}"),
        }
        sh.free(a)
    }

    #[test]
    fn _2pe() {
        let name = test_name(module_path!(), "_2pe");
        if is_pe_of(&name) {
            run_pe(body);
        }
        let out = spawn_pes_with(&name, 2, &[]);
        assert_success(&name, 2, &out);
    }

    #[test]
    fn _3pe() {
        let name = test_name(module_path!(), "_3pe");
        if is_pe_of(&name) {
            run_pe(body);
        }
        let out = spawn_pes_with(&name, 3, &[]);
        assert_success(&name, 3, &out);
    }
}
