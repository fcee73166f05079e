//! C programs against `libxpushmem` (compiled with gcc -Wall -Wextra -Werror against the generated header and the
//! library cargo built for this test), run as jobs of 2 and 4 PEs with a hard timeout.

mod support;

use std::path::PathBuf;
use std::sync::OnceLock;
use support::*;

/// Compile `ffi/tests/c/NAME.c` against the shared library (once per test binary and program).
fn program(name: &str) -> PathBuf {
    static LOCK: OnceLock<std::sync::Mutex<()>> = OnceLock::new();
    let _g = LOCK.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    let lib_dir = profile_dir();
    built_lib("libxpushmem.so");
    let out_dir = profile_dir().join("c-tests").join("native");
    std::fs::create_dir_all(&out_dir).expect("out dir");
    let out = out_dir.join(name);
    let src = ffi_dir().join("tests/c").join(format!("{name}.c"));
    gcc(
        &out,
        &[src],
        &[
            format!("-I{}", ffi_dir().join("include").display()),
            format!("-I{}", ffi_dir().join("tests/c").display()),
            format!("-L{}", lib_dir.display()),
            format!("-Wl,-rpath,{}", lib_dir.display()),
            "-lxpushmem".into(),
            "-pthread".into(),
        ],
    );
    out
}

fn run_ok(name: &str, n: usize) {
    let prog = program(name);
    let o = run_job(&prog, n, &[], &[], 120);
    assert_success(&o, &format!("{name} at {n} PEs"));
    for pe in 0..n {
        assert!(
            o.output_of(pe).contains(&format!("{name} OK on PE {pe} of {n}")),
            "PE {pe} of {name} did not report OK:\n{}",
            all_output(&o)
        );
    }
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
