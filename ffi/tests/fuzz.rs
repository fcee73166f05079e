//! The seeded fuzz of the native C ABI (`ffi/tests/c/fuzz_native.c`), run briefly as a job of 2 PEs and of 4 PEs.
//!
//! The seed is `XPUSHMEM_FUZZ_SEED` when set, else taken from the clock; it is printed, and a failure names it, so
//! that `XPUSHMEM_FUZZ_SEED=N cargo test -p xpushmem-ffi --test fuzz` replays the same calls.
//! `XPUSHMEM_FUZZ_ITERATIONS` sets the calls per PE (default 20000 at 2 PEs, a quarter of it at 4).

mod support;

use support::*;

/// The fuzz program, compiled once per test process (the 2- and 4-PE cases run in parallel threads).
fn fuzz_program() -> std::path::PathBuf {
    let src = ffi_dir().join("tests/c/fuzz_native.c");
    build_once("fuzz", "fuzz_native", src, || {
        let lib_dir = profile_dir();
        built_lib("libxpushmem.so");
        vec![
            format!("-I{}", ffi_dir().join("include").display()),
            format!("-I{}", ffi_dir().join("tests/c").display()),
            format!("-L{}", lib_dir.display()),
            format!("-Wl,-rpath,{}", lib_dir.display()),
            "-lxpushmem".into(),
        ]
    })
}

fn seed() -> u64 {
    std::env::var("XPUSHMEM_FUZZ_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64 % 1_000_000_007)
                .unwrap_or(1)
        })
}

fn iterations(n: usize) -> u64 {
    let base = std::env::var("XPUSHMEM_FUZZ_ITERATIONS")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(20000u64);
    if n > 2 {
        base / 4
    } else {
        base
    }
}

fn fuzz(n: usize) {
    let prog = fuzz_program();
    let (seed, iters) = (seed(), iterations(n));
    println!("fuzz_native at {n} PEs: seed {seed} (XPUSHMEM_FUZZ_SEED={seed} replays it), {iters} calls per PE");
    let (s, i) = (seed.to_string(), iters.to_string());
    let o = run_job(&prog, n, &[s.as_str(), i.as_str()], &[], 300);
    assert_success(&o, &format!("fuzz_native seed {seed} at {n} PEs"));
    let mut total = 0u64;
    for pe in 0..n {
        let text = o.output_of(pe);
        assert!(
            text.contains(&format!("fuzz_native OK on PE {pe} of {n}")),
            "seed {seed}: PE {pe} did not finish:\n{}",
            all_output(&o)
        );
        let calls: u64 = text
            .lines()
            .find_map(|l| {
                l.split_once(" calls checked")?
                    .0
                    .rsplit(' ')
                    .next()?
                    .parse()
                    .ok()
            })
            .unwrap_or_else(|| {
                panic!("seed {seed}: PE {pe} printed no count:\n{}", all_output(&o))
            });
        assert!(
            calls >= iters,
            "seed {seed}: PE {pe} checked only {calls} calls"
        );
        total += calls;
    }
    println!(
        "fuzz_native at {n} PEs, seed {seed}: {total} calls checked\n{}",
        all_output(&o)
    );
}

#[test]
fn fuzz_native_2pe() {
    fuzz(2);
}

#[test]
fn fuzz_native_4pe() {
    fuzz(4);
}
