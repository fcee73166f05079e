//! The OpenSHMEM layer: `shmem.h` declares exactly what `libxpushmem_oshmem` exports; classic OpenSHMEM programs
//! written against plain `shmem.h` build with the pkg-config line of an installed tree (`ffi/install.sh`) and
//! pass at 2 and 4 PEs under the launcher.

#[path = "../../tests/cdecl/mod.rs"]
mod cdecl;
#[path = "../../tests/support/mod.rs"]
mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use support::*;

#[test]
fn oshmem_header_declares_exactly_the_exported_functions() {
    let header = cdecl::oshmem_header();
    let declared: BTreeSet<String> = cdecl::declared_functions(&header)
        .into_iter()
        .filter(|n| !n.starts_with("xpushmem"))
        .collect();
    let exported: BTreeSet<String> =
        support::exported_functions(&support::built_lib("libxpushmem_oshmem.so"))
            .into_iter()
            .filter(|n| !n.starts_with("xpushmem"))
            .collect();
    let missing: Vec<_> = exported.difference(&declared).collect();
    let extra: Vec<_> = declared.difference(&exported).collect();
    assert!(
        missing.is_empty(),
        "exported but not declared in shmem.h: {missing:?}"
    );
    assert!(
        extra.is_empty(),
        "declared in shmem.h but not exported: {extra:?}"
    );
}

/// Install the libraries cargo built for this test into a scratch prefix with `ffi/install.sh` (once).
fn prefix() -> PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        built_lib("libxpushmem_oshmem.so");
        let p = scratch("oshmem-prefix");
        let o = Command::new("sh")
            .arg(ffi_dir().join("install.sh"))
            .env("PREFIX", &p)
            .env("BUILD_DIR", profile_dir())
            .env("XPUSHMEM_INSTALL_BINS", "if-present")
            .output()
            .expect("install.sh runs");
        if !o.status.success() {
            // libxpushmem.so is built by the xpushmem-ffi package; build it when this package is tested alone.
            let b = Command::new(env!("CARGO"))
                .args(["build", "-p", "xpushmem-ffi"])
                .env(
                    "CARGO_TARGET_DIR",
                    profile_dir().parent().expect("target dir"),
                )
                .status()
                .expect("cargo runs");
            assert!(b.success(), "building xpushmem-ffi failed");
            let o = Command::new("sh")
                .arg(ffi_dir().join("install.sh"))
                .env("PREFIX", &p)
                .env("BUILD_DIR", profile_dir())
                .env("XPUSHMEM_INSTALL_BINS", "if-present")
                .output()
                .expect("install.sh runs");
            assert!(
                o.status.success(),
                "install.sh failed:\n{}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        p
    })
    .clone()
}

fn pkg_config(prefix: &Path, args: &[&str]) -> Vec<String> {
    let o = Command::new("pkg-config")
        .args(args)
        .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
        .output()
        .expect("pkg-config runs");
    assert!(
        o.status.success(),
        "pkg-config {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// Compile `tests/c/NAME.c` with `cc prog.c $(pkg-config --cflags --libs xpushmem-oshmem)`.
fn program(name: &str) -> PathBuf {
    let src = ffi_dir().join("oshmem/tests/c").join(format!("{name}.c"));
    build_once("oshmem", name, src, || {
        let mut args = pkg_config(&prefix(), &["--cflags", "--libs", "xpushmem-oshmem"]);
        args.push("-lm".into());
        args
    })
}

fn run_ok(name: &str, n: usize) {
    let prog = program(name);
    let o = run_job(&prog, n, &[], &[], 120);
    assert_success(&o, &format!("{name} at {n} PEs"));
    for pe in 0..n {
        assert!(
            o.output_of(pe)
                .contains(&format!("{name} OK on PE {pe} of {n}")),
            "PE {pe} of {name} did not report OK:\n{}",
            all_output(&o)
        );
    }
}

macro_rules! classic {
    ($($name:ident),*) => { $(
        mod $name {
            #[test]
            fn at_2pe() {
                super::run_ok(stringify!($name), 2);
            }
            #[test]
            fn at_4pe() {
                super::run_ok(stringify!($name), 4);
            }
        }
    )* };
}

classic!(hello, ring, counter, barrier, pipeline, broadcast, reduction, alltoall, stencil, api);

#[test]
fn pkg_config_files_describe_the_install() {
    let p = prefix();
    let cflags = pkg_config(&p, &["--cflags", "xpushmem-oshmem"]).join(" ");
    assert!(cflags.contains("include/xpushmem"), "{cflags}");
    let libs = pkg_config(&p, &["--libs", "xpushmem"]).join(" ");
    assert!(libs.contains("-lxpushmem"), "{libs}");
    assert!(p.join("include/xpushmem/shmem.h").exists() && p.join("include/xpushmem.h").exists());
    assert!(p.join("lib/libxpushmem.a").exists() && p.join("lib/libxpushmem_oshmem.a").exists());
}

// ---------------------------------------------------------------------------------------------------------------
// The conformance programs of `ffi/tests/oshmem/` (written from the OpenSHMEM specification, most of them on
// global and static variables), each at 1, 2, 4 and 8 PEs.

/// Compile `ffi/tests/oshmem/NAME.c` like a user would.
fn conformance_program(name: &str) -> PathBuf {
    let src = ffi_dir().join("tests/oshmem").join(format!("{name}.c"));
    build_once("oshmem-conformance", name, src, || {
        let mut args = vec!["-std=c11".to_string()];
        args.extend(pkg_config(
            &prefix(),
            &["--cflags", "--libs", "xpushmem-oshmem"],
        ));
        args.push("-lm".into());
        args.push("-lpthread".into());
        args
    })
}

fn conformance_ok(name: &str, n: usize) {
    support::run_program_ok(&conformance_program(name), name, n);
}

macro_rules! conformance {
    ($($name:ident),*) => { $(
        mod $name {
            #[test]
            fn at_1pe() {
                super::conformance_ok(stringify!($name), 1);
            }
            #[test]
            fn at_2pe() {
                super::conformance_ok(stringify!($name), 2);
            }
            #[test]
            fn at_4pe() {
                super::conformance_ok(stringify!($name), 4);
            }
            #[test]
            fn at_8pe() {
                super::conformance_ok(stringify!($name), 8);
            }
        }
    )* };
}

conformance!(
    globals, align, teams_ctx, classic, threads, activeset, waits16, deprecated, ldcomplex,
    generics, negstride
);

#[test]
fn a_call_before_init_aborts_by_default_1pe() {
    let prog = conformance_program("preinit");
    let o = run_job(&prog, 1, &[], &[], 60);
    assert!(
        !o.success(),
        "a call before shmem_init did not abort:\n{}",
        all_output(&o)
    );
    let out = all_output(&o);
    assert!(
        out.contains("shmem_long_p")
            && out.contains("not initialised")
            && !out.contains("preinit OK"),
        "{out}"
    );
}

#[test]
fn a_call_before_init_returns_in_return_mode_1pe() {
    let prog = conformance_program("preinit");
    let o = run_job(&prog, 1, &[], &[("XPUSHMEM_ERROR_MODE", "return")], 60);
    assert_success(&o, "preinit in return mode");
    assert!(
        o.output_of(0).contains("preinit OK on PE 0 of 1"),
        "{}",
        all_output(&o)
    );
}
