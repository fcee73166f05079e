//! C programs against `libxpushmem` (compiled with gcc -Wall -Wextra -Werror against the generated header and the
//! library cargo built for this test), run as jobs of 2 and 4 PEs (and 3 for teams and collectives) with a hard timeout.

mod support;

use std::path::PathBuf;
use support::*;

/// Compile `ffi/tests/c/NAME.c` against the shared library (once per test binary and program).
fn program(name: &str) -> PathBuf {
    let src = ffi_dir().join("tests/c").join(format!("{name}.c"));
    build_once("native", name, src, || {
        let lib_dir = profile_dir();
        built_lib("libxpushmem.so");
        vec![
            format!("-I{}", ffi_dir().join("include").display()),
            format!("-I{}", ffi_dir().join("tests/c").display()),
            format!("-L{}", lib_dir.display()),
            format!("-Wl,-rpath,{}", lib_dir.display()),
            "-lxpushmem".into(),
            "-pthread".into(),
        ]
    })
}

fn run_ok(name: &str, n: usize) {
    support::run_program_ok(&program(name), name, n);
}

#[test]
fn rma_2pe() {
    run_ok("native_rma", 2);
}

#[test]
fn rma_4pe() {
    run_ok("native_rma", 4);
}

#[test]
fn amo_2pe() {
    run_ok("native_amo", 2);
}

#[test]
fn amo_4pe() {
    run_ok("native_amo", 4);
}

#[test]
fn sync_2pe() {
    run_ok("native_sync", 2);
}

#[test]
fn sync_4pe() {
    run_ok("native_sync", 4);
}

#[test]
fn errors_2pe() {
    run_ok("native_errors", 2);
}

#[test]
fn errors_4pe() {
    run_ok("native_errors", 4);
}

/// Registered user buffers (`xpushmemx_buffer_register`) on shared memory and over the fabric (tcp on loopback):
/// non-blocking puts from them and gets into them, checked on the target, and the bad inputs.
#[test]
fn regbuf_2pe() {
    run_ok("native_regbuf", 2);
    if matches!(xpushmem::transport::fabric_providers(), Ok(Some(_))) {
        run_program_ok_with(
            &program("native_regbuf"),
            "native_regbuf",
            2,
            &[("XPUSHMEM_TRANSPORT", "fabric")],
        );
    }
}

/// Mismatched collectives (a barrier meets an allocation, a reduction or a broadcast meets a barrier) fail on every
/// PE with a mismatch naming both calls; the runtime stays usable and finalize succeeds (issue 14, item 1).
#[test]
fn mismatch_2pe() {
    run_ok("native_mismatch", 2);
}

#[test]
fn mismatch_3pe() {
    run_ok("native_mismatch", 3);
}

/// Messages name the wrong argument with the value passed: strides of iput, nelems of alltoall and fcollect,
/// overlapping extents of broadcast and alltoall (issue 14, item 5).
#[test]
fn messages_2pe() {
    run_ok("native_messages", 2);
}

#[test]
fn messages_3pe() {
    run_ok("native_messages", 3);
}

/// Team-scoped allocations (issue #30, item 6): xpushmem_team_malloc/calloc/free on a team PE 0 is not in (PE 0
/// does not call) and on a split team of every PE.
#[test]
fn team_alloc_2pe() {
    run_ok("native_team_alloc", 2);
}

#[test]
fn team_alloc_4pe() {
    run_ok("native_team_alloc", 4);
}

/// Teams made by their members only (issue #30, item 6): xpushmem_team_of_members among PEs 1..n-1 (PE 0 does not
/// call), listed in descending order, with xpushmem_team_align on it; mismatched tags and a bad list fail.
#[test]
fn team_members_3pe() {
    run_ok("native_team_members", 3);
}

#[test]
fn teams_collectives_2pe() {
    run_ok("teams_collectives", 2);
}

#[test]
fn teams_collectives_3pe() {
    run_ok("teams_collectives", 3);
}

#[test]
fn teams_collectives_4pe() {
    run_ok("teams_collectives", 4);
}

/// `XPUSHMEM_ERROR_MODE=abort`: the first bad call prints its message and aborts (classic SHMEM behaviour).
#[test]
fn abort_mode_2pe() {
    abort_mode(&[("XPUSHMEM_ERROR_MODE", "abort")]);
}

/// The same over the fabric transport: loading libfabric (and the provider libraries it pulls in, libpsm2's
/// constructor among them) must not replace the process's signal handlers, or `abort()` becomes `exit(1)`.
#[test]
fn abort_mode_over_the_fabric_2pe() {
    if !matches!(xpushmem::transport::fabric_providers(), Ok(Some(_))) {
        eprintln!("skipped: this build has no fabric transport");
        return;
    }
    abort_mode(&[
        ("XPUSHMEM_ERROR_MODE", "abort"),
        ("XPUSHMEM_TRANSPORT", "fabric"),
    ]);
}

fn abort_mode(env: &[(&str, &str)]) {
    let prog = program("native_errors");
    let o = run_job(&prog, 2, &["abort"], env, 60);
    assert!(
        !o.success(),
        "the job should have failed:\n{}",
        all_output(&o)
    );
    let text = all_output(&o);
    assert!(
        matches!(
            o.first_failure,
            Some((_, xpushmem_launch::PeExit::Signal(6)))
        ),
        "expected SIGABRT, got {:?}\n{text}",
        o.first_failure
    );
    assert!(
        text.contains("invalid PE -1"),
        "the abort message names the PE:\n{text}"
    );
    assert!(
        text.contains("XPUSHMEM_ERROR_MODE=abort"),
        "the abort message names the mode:\n{text}"
    );
    assert!(
        !text.contains("still alive"),
        "a bad call returned in abort mode:\n{text}"
    );
}

/// Unique-ID start-up: the program starts its own PEs and bootstraps them with `xpushmemx_init_attr`.
#[test]
fn uid_init_2_and_4_ranks() {
    let prog = program("native_uid");
    for n in [2, 4] {
        let arg = n.to_string();
        let o = run_job(&prog, 1, &[arg.as_str()], &[], 120);
        assert_success(&o, &format!("native_uid with {n} ranks"));
        let text = o.output_of(0);
        assert!(
            text.contains(&format!("native_uid OK: {n} ranks")),
            "{}",
            all_output(&o)
        );
        for r in 0..n {
            assert!(
                text.contains(&format!("native_uid OK on rank {r} of {n}")),
                "{}",
                all_output(&o)
            );
        }
    }
}

/// The static library: `native_rma.c` linked against `libxpushmem.a` and the system libraries Rust needs.
#[test]
fn static_library_2pe() {
    let lib = built_lib("libxpushmem.a");
    let out_dir = profile_dir().join("c-tests").join("native");
    std::fs::create_dir_all(&out_dir).expect("out dir");
    let out = out_dir.join("native_rma_static");
    let mut args = vec![
        format!("-I{}", ffi_dir().join("include").display()),
        format!("-I{}", ffi_dir().join("tests/c").display()),
        lib.display().to_string(),
    ];
    args.extend(["-lgcc_s", "-lutil", "-lrt", "-lpthread", "-lm", "-ldl"].map(String::from));
    gcc(&out, &[ffi_dir().join("tests/c/native_rma.c")], &args);
    let o = run_job(&out, 2, &[], &[], 120);
    assert_success(&o, "native_rma (static) at 2 PEs");
    assert!(
        o.output_of(1).contains("native_rma OK on PE 1 of 2"),
        "{}",
        all_output(&o)
    );
}
