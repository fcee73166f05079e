//! The ops' `_on_queue` C entry points on ze-emu device heaps at 2 and 3 PEs: a C program (ffi/tests/c/
//! ops_on_queue.c) enqueues ops on its own Level Zero immediate command list, waits once, checks the results, and
//! checks that a negative split on one PE fails every PE's `xpushmem_ops_queue_wait` with the host path's error
//! and that the next op works. And the runtime started on a framework's Level Zero handles (ffi/tests/c/
//! ops_on_framework_handles.c): the program's own driver, device and context given to `xpushmemx_init_attr`, an op
//! on an immediate list the program created in its context. And symm_mem's collectives the same way
//! (ffi/tests/c/symm_on_queue.c) at 2 and 3 PEs.

mod support;

use support::*;

/// Build the C program `name` (ffi/tests/c/NAME.c) against libxpushmem and the Level Zero loader, run it at `n`
/// PEs on ze-emu device heaps, and check that every PE printed "NAME OK on PE p of n".
fn run_c_program(name: &str, n: usize) {
    run_c_program_with(name, n, &[], &[]);
}

/// [`run_c_program`] with program arguments and extra environment.
fn run_c_program_with(name: &str, n: usize, args: &[&str], extra_env: &[(&str, &str)]) {
    built_lib("libxpushmem.so");
    let prog = build_once(
        "ops_queue",
        name,
        ffi_dir().join(format!("tests/c/{name}.c")),
        || {
            let ze = std::process::Command::new("pkg-config")
                .args(["--cflags", "--libs", "level-zero"])
                .output()
                .expect("pkg-config runs");
            let mut a = vec![
                format!("-I{}", ffi_dir().join("include").display()),
                format!("-L{}", profile_dir().display()),
                format!("-Wl,-rpath,{}", profile_dir().display()),
                "-lxpushmem".into(),
            ];
            a.extend(
                String::from_utf8_lossy(&ze.stdout)
                    .split_whitespace()
                    .map(String::from),
            );
            a
        },
    );
    let env: Vec<(String, String)> = ze_emu::testing::loader_env()
        .into_iter()
        .chain([("XPUSHMEM_HEAP".to_string(), "device".to_string())])
        .chain(
            extra_env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string())),
        )
        .collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let o = run_job(&prog, n, args, &env, 240);
    assert_success(&o, &format!("{name} at {n} PEs"));
    for pe in 0..n {
        assert!(
            o.output_of(pe)
                .contains(&format!("{name} OK on PE {pe} of {n}")),
            "PE {pe}:\n{}",
            all_output(&o)
        );
    }
}

fn ops_on_queue(n: usize) {
    run_c_program("ops_on_queue", n);
}

#[test]
fn ops_on_queue_from_c_2pe() {
    ops_on_queue(2);
}

#[test]
fn ops_on_queue_from_c_3pe() {
    ops_on_queue(3);
}

/// symm_mem's collectives through their `_on_queue` entry points (ffi/tests/c/symm_on_queue.c): every op against
/// the program's own sums, local outputs in host USM, upstream's messages for bad arguments.
#[test]
fn symm_ops_on_queue_from_c_2pe() {
    run_c_program("symm_on_queue", 2);
}

#[test]
fn symm_ops_on_queue_from_c_3pe() {
    run_c_program("symm_on_queue", 3);
}

#[test]
fn ops_on_the_list_of_a_framework_context_from_c_2pe() {
    run_c_program("ops_on_framework_handles", 2);
}

/// The symm_mem handle's signal pad through `xpushmem_ops_signal_pad(_on_queue)` (ffi/tests/c/
/// signal_pad_on_queue.c): barrier rounds on two channels checked with data put before them, a put_signal /
/// wait_signal ping-pong, bad channel and rank arguments.
#[test]
fn signal_pad_on_queue_from_c_2pe() {
    run_c_program("signal_pad_on_queue", 2);
}

#[test]
fn signal_pad_on_queue_from_c_3pe() {
    run_c_program("signal_pad_on_queue", 3);
}

/// A wait_signal no one answers ends in the timeout error naming the op, rank, peer rank and channel.
#[test]
fn signal_pad_wait_times_out_2pe() {
    run_c_program_with(
        "signal_pad_on_queue",
        2,
        &["timeout"],
        &[("XPUSHMEM_TIMEOUT_MS", "3000")],
    );
}

/// The host on-queue forms (`xpushmemx_*_on_queue`) from C: a put-signal -> wait -> reduction -> broadcast pipeline
/// on one list and a get on a second list chained by an event, checked against the program's own reference, and
/// the bad arguments (NULL list, a list and events of another Level Zero context, a non-symmetric address, an
/// overflowing count, a bad PE) each refused naming the argument, and a device wait that gives up reported by
/// `xpushmemx_queue_wait` as `XPUSHMEM_ERROR_TIMEOUT` (ffi/tests/c/on_queue_pipeline.c).
#[test]
fn on_queue_pipeline_from_c_2pe() {
    run_c_program_with(
        "on_queue_pipeline",
        2,
        &[],
        &[("XPUSHMEM_TIMEOUT_MS", "8000")],
    );
}

/// Expert-parallel dispatch and combine through their `_on_queue` entry points (ffi/tests/c/ep_on_queue.c): the
/// rows against the host path's routing and the program's own reference, combine's sums, an expert id out of
/// range reported on every PE by `xpushmem_ops_queue_wait`.
#[test]
fn ep_on_queue_from_c_2pe() {
    run_c_program("ep_on_queue", 2);
}

/// The same program with its two PEs on two simulated nodes (`XPUSHMEM_TEST_NODES`, read by the program before
/// init): every peer through the fabric, the EP kernels' puts and sync steps through the host proxy, the device
/// path chosen by `XPUSHMEM_OPS_PATH=auto` (`xpushmem_ops_ep_path`).
#[test]
fn ep_on_queue_from_c_across_nodes_2pe() {
    if !matches!(xpushmem::transport::fabric_providers(), Ok(Some(_))) {
        eprintln!(
            "skipped: this build has no fabric transport (libfabric headers missing at build time)"
        );
        return;
    }
    run_c_program_with("ep_on_queue", 2, &[], &[("XPUSHMEM_TEST_NODES", "ab")]);
}
