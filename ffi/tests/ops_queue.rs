//! The ops' `_on_queue` C entry points on ze-emu device heaps at 2 and 3 PEs: a C program (ffi/tests/c/
//! ops_on_queue.c) enqueues ops on its own Level Zero immediate command list, waits once, checks the results, and
//! checks that a negative split on one PE fails every PE's `xpushmem_ops_queue_wait` with the host path's error
//! and that the next op works.

mod support;

use support::*;

fn ops_on_queue(n: usize) {
    built_lib("libxpushmem.so");
    let prog = build_once(
        "ops_queue",
        "ops_on_queue",
        ffi_dir().join("tests/c/ops_on_queue.c"),
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
        .collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let o = run_job(&prog, n, &[], &env, 240);
    assert_success(&o, &format!("ops_on_queue at {n} PEs"));
    for pe in 0..n {
        assert!(
            o.output_of(pe)
                .contains(&format!("ops_on_queue OK on PE {pe} of {n}")),
            "PE {pe}:\n{}",
            all_output(&o)
        );
    }
}

#[test]
fn ops_on_queue_from_c_2pe() {
    ops_on_queue(2);
}

#[test]
fn ops_on_queue_from_c_3pe() {
    ops_on_queue(3);
}
