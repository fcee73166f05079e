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

/// The functions `header` declares, the native `xpushmem*` ones aside.
fn standard_functions(header: &str) -> BTreeSet<String> {
    cdecl::declared_functions(header)
        .into_iter()
        .filter(|n| !n.starts_with("xpushmem"))
        .collect()
}

/// The `static inline` routines `header` defines.
fn inline_functions(header: &str) -> BTreeSet<String> {
    header
        .lines()
        .filter_map(|l| l.strip_prefix("static inline "))
        .filter_map(|l| {
            let head = &l[..l.find('(')?];
            Some(head.rsplit([' ', '*']).next()?.to_string())
        })
        .collect()
}

/// `nm` of a library: (symbol kind letter, name) of every defined function symbol outside the native API
/// (`-D` for a shared library, every archive member for a static one).
fn defined_functions(lib: &Path) -> Vec<(char, String)> {
    let mut cmd = Command::new("nm");
    if lib.extension().is_some_and(|e| e == "so") {
        cmd.arg("-D");
    }
    let o = cmd
        .arg("--defined-only")
        .arg(lib)
        .output()
        .expect("nm runs");
    assert!(
        o.status.success(),
        "nm {}: {}",
        lib.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (_, kind, name) = (it.next()?, it.next()?, it.next()?);
            let kind = kind.chars().next()?;
            (matches!(kind, 'T' | 'W') && !name.starts_with("xpushmem"))
                .then(|| (kind, name.to_string()))
        })
        .collect()
}

#[test]
fn oshmem_header_declares_exactly_the_exported_functions() {
    let declared = standard_functions(&cdecl::oshmem_header());
    let exported: BTreeSet<String> =
        support::exported_functions(&fresh_lib("libxpushmem_oshmem.so"))
            .into_iter()
            .filter(|n| !n.starts_with("xpushmem"))
            // the profiling interface's twins (checked below)
            .filter(|n| !(n.starts_with('p') && declared.contains(&n[1..])))
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

/// The profiling interface: every routine of `shmem.h` has its `pshmem_` twin in `pshmem.h` (the inline ones
/// too), and in the shared and the static library the standard name is a weak symbol and the name-shifted one a
/// strong one, so a tool's own definition of the standard name wins and the library never clashes with it.
#[test]
fn every_routine_has_its_pshmem_twin_in_the_libraries_and_pshmem_h() {
    let shmem_h = cdecl::oshmem_header();
    let pshmem_h =
        std::fs::read_to_string(ffi_dir().join("oshmem/include/pshmem.h")).expect("pshmem.h");
    let standard = standard_functions(&shmem_h);
    assert!(
        standard.len() > 1000
            && standard.contains("shmem_pcontrol")
            && standard.contains("start_pes")
    );
    let shifted: BTreeSet<String> = standard.iter().map(|n| cdecl::pshmem_name(n)).collect();
    assert_eq!(
        standard_functions(&pshmem_h),
        shifted,
        "pshmem.h does not declare exactly the pshmem_ twins of shmem.h's routines"
    );
    let inline = inline_functions(&shmem_h);
    assert!(inline.contains("shmem_longdouble_p"), "{inline:?}");
    let inline_shifted: BTreeSet<String> = inline.iter().map(|n| cdecl::pshmem_name(n)).collect();
    assert_eq!(
        inline_functions(&pshmem_h),
        inline_shifted,
        "pshmem.h's inline routines"
    );

    for lib in ["libxpushmem_oshmem.so", "libxpushmem_oshmem.a"] {
        let syms = defined_functions(&fresh_lib(lib));
        let kinds = |name: &str| -> BTreeSet<char> {
            syms.iter()
                .filter(|(_, n)| n == name)
                .map(|(k, _)| *k)
                .collect()
        };
        let mut problems = Vec::new();
        for n in &standard {
            let p = cdecl::pshmem_name(n);
            if kinds(n) != BTreeSet::from(['W']) {
                problems.push(format!("{n}: {:?} (want weak only)", kinds(n)));
            }
            if kinds(&p) != BTreeSet::from(['T']) {
                problems.push(format!("{p}: {:?} (want strong only)", kinds(&p)));
            }
        }
        let known: BTreeSet<&String> = standard.iter().chain(&shifted).collect();
        if lib.ends_with(".so") {
            // The shared library's exports outside the native API are exactly the two headers' routines.
            let exported: BTreeSet<&String> = syms.iter().map(|(_, n)| n).collect();
            for n in exported.symmetric_difference(&known) {
                problems.push(format!(
                    "{n}: exported but in neither header, or declared but not exported"
                ));
            }
        } else {
            // The archive also holds Rust's and the C runtime's symbols: every OpenSHMEM-looking one is known.
            for (_, n) in &syms {
                if (n.starts_with("shmem_") || n.starts_with("pshmem_")) && !known.contains(n) {
                    problems.push(format!("{n}: in the archive but in neither header"));
                }
            }
        }
        assert!(
            problems.is_empty(),
            "{lib}: {} problems, first: {:?}",
            problems.len(),
            &problems[..problems.len().min(20)]
        );
    }
}

/// `PATH` of a library of this test's profile, built up to date first (once per test process): `cargo test`
/// builds no `cdylib`/`staticlib` for an integration test, so without this a test run after a change to the library
/// would check the previous build (or none).
fn fresh_lib(file: &str) -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let mut cmd = Command::new(env!("CARGO"));
        // The whole workspace, as scripts/test.sh builds it: the same feature resolution, so a no-op there
        // (a subset of the packages would resolve other features and rebuild the libraries).
        cmd.args(["build", "--workspace"]);
        if profile_dir().file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let b = cmd
            .env(
                "CARGO_TARGET_DIR",
                profile_dir().parent().expect("target dir"),
            )
            .status()
            .expect("cargo runs");
        assert!(b.success(), "building the libraries failed");
    });
    built_lib(file)
}

/// Install the libraries cargo built for this test into a prefix with `ffi/install.sh`: once for every test
/// process of the run ([`support::shared_dir`]), again when the libraries, headers or script changed.
fn prefix() -> PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        fresh_lib("libxpushmem_oshmem.so");
        let ffi = ffi_dir();
        let mut inputs = vec![ffi.join("install.sh")];
        // The built libraries and launcher (not cargo's lock or dep-info files, which change on every build).
        inputs.extend(support::files_in(&profile_dir()).into_iter().filter(|f| {
            f.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                (n.starts_with("libxpushmem") && !n.ends_with(".d")) || n == "xpushmem-run"
            })
        }));
        inputs.extend(support::files_in(&ffi.join("include")));
        inputs.extend(support::files_in(&ffi.join("oshmem/include")));
        inputs.extend(support::files_in(&ffi.join("cmake")));
        support::shared_dir("oshmem-prefix", &inputs, |p| install(p, &[]))
    })
    .clone()
}

/// Install what cargo built for this test into `prefix` with `ffi/install.sh`, `env` added.
fn install(prefix: &Path, env: &[(&str, &str)]) {
    let o = Command::new("sh")
        .arg(ffi_dir().join("install.sh"))
        .env("PREFIX", prefix)
        .env("BUILD_DIR", profile_dir())
        .env("XPUSHMEM_INSTALL_BINS", "if-present")
        .envs(env.iter().copied())
        .output()
        .expect("install.sh runs");
    assert!(
        o.status.success(),
        "install.sh failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
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

/// The installed compiler wrapper `xpushmem-oshcc`.
fn oshcc() -> PathBuf {
    prefix().join("bin/xpushmem-oshcc")
}

/// Compile `tests/c/NAME.c` as a user would: `xpushmem-oshcc prog.c -o prog -lm`.
fn program(name: &str) -> PathBuf {
    let src = ffi_dir().join("oshmem/tests/c").join(format!("{name}.c"));
    build_once_with(Some(&oshcc()), "oshmem", name, src, || vec!["-lm".into()])
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

/// README's first C program, as its text says: `xpushmem-oshcc prog.c -o prog && xpushmem-oshrun -np 2 ./prog`; each
/// PE prints its left neighbour's number.
#[test]
fn readme_first_c_program_2pe() {
    let readme = std::fs::read_to_string(ffi_dir().parent().expect("repo").join("README.md"))
        .expect("README.md");
    let section = &readme[readme
        .find("## A first program")
        .expect("README's first-program section")..];
    let block = &section[section.find("```c\n").expect("a C block") + 5..];
    let dir = scratch("readme-c");
    std::fs::write(
        dir.join("prog.c"),
        &block[..block.find("```").expect("the block's end")],
    )
    .expect("prog.c");
    let bin = prefix().join("bin");
    let o = Command::new(bin.join("xpushmem-oshcc"))
        .args(["prog.c", "-o", "prog"])
        .current_dir(&dir)
        .output()
        .expect("xpushmem-oshcc runs");
    assert!(
        o.status.success(),
        "xpushmem-oshcc prog.c:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = Command::new(bin.join("xpushmem-oshrun"))
        .args(["-np", "2", "./prog"])
        .current_dir(&dir)
        .output()
        .expect("xpushmem-oshrun runs");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "xpushmem-oshrun -np 2 ./prog:\n{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for pe in 0..2 {
        let line = format!("PE {pe} of 2 got {} from its left neighbour", (pe + 1) % 2);
        assert!(out.contains(&line), "no \"{line}\" in:\n{out}");
    }
}

/// The toolchain names a new user types, from the installed tree: `xpushmem-oshcc prog.c -o prog` and
/// `xpushmem-oshrun -np 2 ./prog` (also `xpushmem-oshc++`, `-n`, `-x VAR=VALUE`, Open MPI's options that mean nothing
/// on one machine, `--showme`, a compile-only `-c`), an unknown option refused with its name, and the plain names
/// `oshcc`/`oshrun` installed only when asked for.
#[test]
fn osh_wrappers_build_and_run_2pe() {
    let p = prefix();
    let bin = p.join("bin");
    let dir = scratch("osh-wrappers");
    let hello = ffi_dir().join("oshmem/tests/c/hello.c");
    let run = |cmd: &mut Command| {
        let o = cmd.current_dir(&dir).output().expect("runs");
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let ok = |what: &str, r: &(Option<i32>, String, String)| {
        assert_eq!(r.0, Some(0), "{what}:\n{}{}", r.1, r.2);
    };
    let r = run(Command::new(bin.join("xpushmem-oshcc"))
        .arg(&hello)
        .args(["-o", "hello"]));
    ok("xpushmem-oshcc hello.c -o hello", &r);
    let r = run(Command::new(bin.join("xpushmem-oshc++"))
        .args(["-x", "c++"])
        .arg(&hello)
        .args(["-o", "hello_cxx"]));
    ok("xpushmem-oshc++ -x c++ hello.c -o hello_cxx", &r);
    // C++ programs see the complex reductions too (g++ accepts C's _Complex), as the public suite's C++ tests use them.
    std::fs::write(
        dir.join("complex.cpp"),
        "#include <shmem.h>\nint f(shmem_team_t t, double _Complex *d, const double _Complex *s) {\n    \
         return shmem_complexd_sum_reduce(t, d, s, 1) + shmem_complexf_prod_reduce(t, 0, 0, 0);\n}\n",
    )
    .expect("complex.cpp");
    let r = run(Command::new(bin.join("xpushmem-oshc++")).args([
        "-c",
        "complex.cpp",
        "-o",
        "complex.o",
    ]));
    ok("xpushmem-oshc++ -c complex.cpp", &r);
    for (prog, np_flag) in [("./hello", "-np"), ("./hello_cxx", "-n")] {
        let r = run(Command::new(bin.join("xpushmem-oshrun")).args([
            np_flag,
            "2",
            "--oversubscribe",
            "--bind-to",
            "none",
            prog,
        ]));
        ok(&format!("xpushmem-oshrun {np_flag} 2 {prog}"), &r);
        for pe in 0..2 {
            assert!(
                r.1.contains(&format!("[pe {pe}] hello OK on PE {pe} of 2")),
                "{prog}: PE {pe} did not report:\n{}{}",
                r.1,
                r.2
            );
        }
    }
    let r = run(Command::new(bin.join("xpushmem-oshrun")).args([
        "-np",
        "2",
        "-x",
        "OSH_WRAPPER_MARK=seen",
        "sh",
        "-c",
        "echo mark=$OSH_WRAPPER_MARK",
    ]));
    ok("xpushmem-oshrun -x", &r);
    assert_eq!(r.1.matches("mark=seen").count(), 2, "{}{}", r.1, r.2);
    let r = run(Command::new(bin.join("xpushmem-oshrun")).args([
        "--frobnicate",
        "-np",
        "2",
        "./hello",
    ]));
    assert!(
        r.0 == Some(2) && r.2.contains("unknown option --frobnicate"),
        "{r:?}"
    );
    let r = run(Command::new(bin.join("xpushmem-oshrun")).arg("./hello"));
    assert!(r.0 == Some(2) && r.2.contains("-np N"), "{r:?}");
    let r = run(Command::new(bin.join("xpushmem-oshcc")).arg("--showme:compile"));
    assert!(
        r.1.contains(&format!("-I{}/include/xpushmem", p.display())),
        "{r:?}"
    );
    let r = run(Command::new(bin.join("xpushmem-oshcc")).arg("--showme:link"));
    assert!(
        r.1.contains("-lxpushmem_oshmem") && r.1.contains("-Wl,-rpath,"),
        "{r:?}"
    );
    let r = run(Command::new(bin.join("xpushmem-oshcc"))
        .arg("-c")
        .arg(&hello)
        .args(["-o", "hello.o"]));
    ok("xpushmem-oshcc -c", &r);
    assert!(dir.join("hello.o").exists());
    // The plain names: not by default (prefix() installs without them), as links when asked for.
    assert!(!bin.join("oshcc").exists() && !bin.join("oshrun").exists());
    let plain = scratch("osh-plain-prefix");
    install(&plain, &[("XPUSHMEM_OSH_PLAIN_NAMES", "1")]);
    for (name, target) in [
        ("oshcc", "xpushmem-oshcc"),
        ("oshc++", "xpushmem-oshc++"),
        ("oshCC", "xpushmem-oshc++"),
        ("oshrun", "xpushmem-oshrun"),
    ] {
        let link = std::fs::read_link(plain.join("bin").join(name)).expect(name);
        assert_eq!(link, Path::new(target), "{name}");
    }
    let r = run(Command::new(plain.join("bin/oshcc"))
        .arg(&hello)
        .args(["-o", "hello_plain"]));
    ok("oshcc", &r);
    let r = run(Command::new(plain.join("bin/oshrun")).args(["-np", "2", "./hello_plain"]));
    ok("oshrun -np 2", &r);
    assert_eq!(r.1.matches("hello OK on PE").count(), 2, "{}{}", r.1, r.2);
}

/// A user's CMake project (`ffi/tests/cmake/`) against the installed tree: `find_package(xpushmem 0.1)` gives
/// `xpushmem::oshmem` (an OpenSHMEM program), `xpushmem::ops` (the native API and the op family's header), the device
/// library's variables and `xpushmem_add_device_kernel` (an OpenCL C kernel linked with the device library into
/// SPIR-V); both programs run at 2 PEs. cmake comes from `scripts/setup.sh`.
#[test]
fn cmake_project_against_the_installed_tree_2pe() {
    let p = prefix();
    let build = scratch("cmake-user");
    let cmake = |args: &[&std::ffi::OsStr]| {
        let o = Command::new("cmake")
            .args(args)
            .output()
            .expect("cmake runs (scripts/setup.sh installs it)");
        assert!(
            o.status.success(),
            "cmake {args:?}:\n{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    };
    let prefix_arg = format!("-DCMAKE_PREFIX_PATH={}", p.display());
    cmake(&[
        "-S".as_ref(),
        ffi_dir().join("tests/cmake").as_os_str(),
        "-B".as_ref(),
        build.as_os_str(),
        prefix_arg.as_ref(),
    ]);
    cmake(&["--build".as_ref(), build.as_os_str()]);
    let found = std::fs::read_to_string(build.join("found.txt")).expect("found.txt");
    let version = env!("CARGO_PKG_VERSION");
    let devlib = p.join(format!("lib/xpushmem/libxpushmem_device-{version}.bc"));
    assert!(found.contains(&format!("version={version}\n")), "{found}");
    assert!(
        found.contains(&format!("device_library={}\n", devlib.display())) && devlib.exists(),
        "{found}"
    );
    assert!(
        found.contains(&format!(
            "device_include_dir={}/include/xpushmem\n",
            p.display()
        )),
        "{found}"
    );
    let spv = std::fs::read(build.join("token_ring_kernel.spv")).expect("the kernel's SPIR-V");
    assert_eq!(
        spv.get(..4),
        Some(&0x0723_0203u32.to_le_bytes()[..]),
        "not SPIR-V"
    );
    support::run_program_ok(&build.join("osh_hello"), "hello", 2);
    support::run_program_ok(&build.join("native_ring"), "native_ring", 2);
    // The version file: 0.1 (this minor version of 0.x) is compatible, 0.2 and 1.0 are not.
    for (want, compatible) in [("0.1", "TRUE"), ("0.2", "FALSE"), ("1.0", "FALSE")] {
        let script = build.join(format!("version-{want}.cmake"));
        let (major, minor) = want.split_once('.').expect("MAJOR.MINOR");
        std::fs::write(
            &script,
            format!(
                "set(PACKAGE_FIND_VERSION {want})\nset(PACKAGE_FIND_VERSION_MAJOR {major})\n\
                 set(PACKAGE_FIND_VERSION_MINOR {minor})\nset(CMAKE_SIZEOF_VOID_P 8)\n\
                 include({}/lib/cmake/xpushmem/xpushmemConfigVersion.cmake)\n\
                 message(\"compatible=${{PACKAGE_VERSION_COMPATIBLE}}\")\n",
                p.display()
            ),
        )
        .expect("script");
        let o = Command::new("cmake")
            .arg("-P")
            .arg(&script)
            .output()
            .expect("cmake runs");
        let text = String::from_utf8_lossy(&o.stderr);
        assert!(
            text.contains(&format!("compatible={compatible}")),
            "find_package(xpushmem {want}): {text}"
        );
    }
}

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

/// Compile `ffi/tests/oshmem/NAME.c` like a user would, with `xpushmem-oshcc`.
fn conformance_program(name: &str) -> PathBuf {
    let src = ffi_dir().join("tests/oshmem").join(format!("{name}.c"));
    build_once_with(Some(&oshcc()), "oshmem-conformance", name, src, || {
        vec!["-lm".into(), "-lpthread".into()]
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
    generics, negstride, v16
);

/// OpenSHMEM 1.6's initialisation after the last finalize (`reinit.c`: three rounds of init, communication,
/// finalize, each checked) under `xpushmem-run`, whose rendezvous serves the job once: the bootstrap is kept
/// across the finalize.
mod reinit {
    #[test]
    fn at_2pe() {
        super::conformance_ok("reinit", 2);
    }
    #[test]
    fn at_3pe() {
        super::conformance_ok("reinit", 3);
    }

    /// The same under Open MPI's `mpirun` (a PMIx server) with the PMIx bootstrap, which cannot be initialised
    /// twice either. Skipped without `mpirun` or in a build without the PMIx bootstrap.
    #[test]
    fn under_pmix_3pe() {
        if std::process::Command::new("mpirun")
            .arg("--version")
            .output()
            .is_err()
        {
            eprintln!("skipped: no mpirun");
            return;
        }
        let prog = super::conformance_program("reinit");
        let o = std::process::Command::new("timeout")
            .args([
                "-k",
                "5",
                "120",
                "mpirun",
                "--oversubscribe",
                "--allow-run-as-root",
                "-n",
                "3",
            ])
            .args([
                "-x",
                "XPUSHMEM_BOOTSTRAP=pmix",
                "-x",
                "XPUSHMEM_TIMEOUT_MS=20000",
            ])
            .args([
                "-x",
                "XPUSHMEM_SYMMETRIC_SIZE=64M",
                "-x",
                "XPUSHMEM_SYMMETRIC_MAX=64M",
            ])
            .arg(&prog)
            .output()
            .expect("timeout and mpirun run");
        let out = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        if out.contains("this build has no PMIx bootstrap") {
            eprintln!("skipped: this build has no PMIx bootstrap (install libpmix-dev)");
            return;
        }
        assert!(
            o.status.success(),
            "mpirun -n 3 reinit: {}\n{out}",
            o.status
        );
        for pe in 0..3 {
            assert!(
                out.contains(&format!("reinit OK on PE {pe} of 3")),
                "PE {pe} did not report OK:\n{out}"
            );
        }
    }
}

/// `teams_ctx` with every other PE reached through the fabric (libfabric tcp on loopback): `shmem_ptr` is NULL for
/// them, yet each is accessible via the data transfer routines (`shmem_pe_accessible`, `shmem_addr_accessible`).
#[test]
fn teams_ctx_over_the_fabric_2pe() {
    if !matches!(xpushmem::transport::fabric_providers(), Ok(Some(_))) {
        eprintln!("skipped: this build has no fabric transport");
        return;
    }
    support::run_program_ok_with(
        &conformance_program("teams_ctx"),
        "teams_ctx",
        2,
        &[("XPUSHMEM_TRANSPORT", "fabric")],
    );
}

/// Contexts as completion domains (`ctx_domains.c`): each context's quiet completes its own puts, its fence orders
/// them, destroying it completes them. With the deferred transport (puts queued until completed) a put of one
/// context is checked to be still missing at its target after another context's quiet and the default context's;
/// the completion checks also over the fabric and on shared memory.
mod ctx_domains {
    #[test]
    fn deferred_2pe() {
        support::run_program_ok_with(
            &super::conformance_program("ctx_domains"),
            "ctx_domains",
            2,
            &[("XPUSHMEM_TRANSPORT", "deferred")],
        );
    }
    #[test]
    fn shm_2pe() {
        super::conformance_ok("ctx_domains", 2);
    }
    #[test]
    fn fab_2pe() {
        if !matches!(xpushmem::transport::fabric_providers(), Ok(Some(_))) {
            eprintln!("skipped: this build has no fabric transport");
            return;
        }
        support::run_program_ok_with(
            &super::conformance_program("ctx_domains"),
            "ctx_domains",
            2,
            &[("XPUSHMEM_TRANSPORT", "fabric")],
        );
    }
    use super::support;
}

// ---------------------------------------------------------------------------------------------------------------
// The profiling interface: `ffi/tests/oshmem/profiling.c` with the tool of `profiling_tool.c` defining standard
// routines and forwarding to `pshmem_*`, the tool linked three ways.

/// How the tool is linked.
#[derive(Clone, Copy, Debug)]
enum ToolLink {
    /// Compiled into the program, shared `libxpushmem_oshmem.so`.
    Program,
    /// A shared library of its own, linked before `libxpushmem_oshmem.so` (`cc ... -lprof -lxpushmem_oshmem`).
    SharedLibrary,
    /// Compiled into the program, static `libxpushmem_oshmem.a`.
    Static,
}

fn profiling_program(link: ToolLink) -> PathBuf {
    let dir = ffi_dir().join("tests/oshmem");
    let tool = dir.join("profiling_tool.c").display().to_string();
    let name = format!("profiling-{link:?}").to_lowercase();
    build_once("oshmem-profiling", &name, dir.join("profiling.c"), || {
        let p = prefix();
        let cflags = pkg_config(&p, &["--cflags", "xpushmem-oshmem"]);
        let libs = pkg_config(&p, &["--libs", "xpushmem-oshmem"]);
        let mut args = cflags.clone();
        match link {
            ToolLink::Program => {
                args.push(tool);
                args.extend(libs);
            }
            ToolLink::SharedLibrary => {
                let lib_dir = profile_dir().join("c-tests/oshmem-profiling");
                std::fs::create_dir_all(&lib_dir).expect("lib dir");
                let mut so_args = vec!["-shared".to_string(), "-fPIC".to_string()];
                so_args.extend(cflags);
                so_args.extend(libs.clone());
                gcc(
                    &lib_dir.join("libprofiling_tool.so"),
                    &[tool.into()],
                    &so_args,
                );
                args.push(format!("-L{}", lib_dir.display()));
                args.push(format!("-Wl,-rpath,{}", lib_dir.display()));
                args.push("-lprofiling_tool".into());
                args.extend(libs);
            }
            ToolLink::Static => {
                args.push(tool);
                args.push(p.join("lib/libxpushmem_oshmem.a").display().to_string());
                // The system libraries of Libs.private (the archive itself is named above).
                args.extend(
                    pkg_config(&p, &["--static", "--libs-only-l", "xpushmem-oshmem"])
                        .into_iter()
                        .filter(|a| a != "-lxpushmem_oshmem"),
                );
            }
        }
        args
    })
}

fn profiling_ok(link: ToolLink, n: usize) {
    let prog = profiling_program(link);
    if matches!(link, ToolLink::Static) {
        // The program really is static in the library: no libxpushmem_oshmem.so among its dependencies.
        let o = Command::new("ldd").arg(&prog).output().expect("ldd runs");
        let deps = String::from_utf8_lossy(&o.stdout);
        assert!(!deps.contains("libxpushmem_oshmem"), "{deps}");
    }
    support::run_program_ok(&prog, "profiling", n);
}

#[test]
fn a_profiling_tool_in_the_program_intercepts_and_forwards_2pe_4pe() {
    for n in [2, 4] {
        profiling_ok(ToolLink::Program, n);
    }
}

#[test]
fn a_profiling_tool_in_a_shared_library_intercepts_and_forwards_2pe_4pe() {
    for n in [2, 4] {
        profiling_ok(ToolLink::SharedLibrary, n);
    }
}

#[test]
fn a_profiling_tool_with_the_static_library_intercepts_and_forwards_2pe_4pe() {
    for n in [2, 4] {
        profiling_ok(ToolLink::Static, n);
    }
}

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

// ---------------------------------------------------------------------------------------------------------------
// The specification's environment variables (`SHMEM_SYMMETRIC_SIZE`, `SHMEM_VERSION`, `SHMEM_INFO`,
// `SHMEM_DEBUG`), through `ffi/tests/oshmem/envvars.c`.

/// Run `envvars CHECK` on `n` PEs in return mode with `env` on top; `XPUSHMEM_SYMMETRIC_SIZE` is unset (empty)
/// unless `env` sets it (later entries win), so `SHMEM_SYMMETRIC_SIZE` decides.
fn envvars(n: usize, check: &str, env: &[(&str, &str)]) -> xpushmem_launch::Outcome {
    let mut job = xpushmem_launch::Job::new(n, conformance_program("envvars"));
    job.args = vec![check.to_string()];
    job.env = [
        ("XPUSHMEM_TIMEOUT_MS", "20000"),
        ("XPUSHMEM_ERROR_MODE", "return"),
        ("XPUSHMEM_SYMMETRIC_SIZE", ""),
    ]
    .iter()
    .chain(env)
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    job.timeout = Some(std::time::Duration::from_secs(120));
    job.capture = true;
    job.run().expect("the job starts")
}

/// `envvars` succeeded and every PE reported OK.
fn envvars_ok(o: &xpushmem_launch::Outcome, n: usize, what: &str) {
    assert_success(o, what);
    for pe in 0..n {
        assert!(
            o.output_of(pe)
                .contains(&format!("envvars OK on PE {pe} of {n}")),
            "{what}: PE {pe} did not report OK:\n{}",
            all_output(o)
        );
    }
}

#[test]
fn shmem_symmetric_size_sizes_the_heap_1pe_2pe_4pe() {
    for n in [1, 2, 4] {
        let o = envvars(n, "heap-3m", &[("SHMEM_SYMMETRIC_SIZE", "3M")]);
        envvars_ok(&o, n, &format!("SHMEM_SYMMETRIC_SIZE=3M at {n} PEs"));
    }
    // The specification's floating-point and scientific forms (3.1e6 bytes: 2 MiB fits, 4 MiB does not).
    for size in ["3.1e6", "0.003G"] {
        let o = envvars(2, "heap-3m", &[("SHMEM_SYMMETRIC_SIZE", size)]);
        envvars_ok(&o, 2, &format!("SHMEM_SYMMETRIC_SIZE={size}"));
    }
}

/// The specification defines `shmem_malloc`'s null return for space that cannot be allocated: in the default
/// abort mode too, an exhausted heap returns NULL instead of aborting.
#[test]
fn an_exhausted_heap_returns_null_in_abort_mode_2pe() {
    let env = [
        ("SHMEM_SYMMETRIC_SIZE", "3M"),
        ("XPUSHMEM_ERROR_MODE", "abort"),
    ];
    envvars_ok(
        &envvars(2, "heap-3m", &env),
        2,
        "abort mode, 4 MiB in 3 MiB",
    );
}

#[test]
fn xpushmem_symmetric_size_wins_over_shmem_symmetric_size_2pe() {
    let env = [
        ("SHMEM_SYMMETRIC_SIZE", "3M"),
        ("XPUSHMEM_SYMMETRIC_SIZE", "64M"),
    ];
    envvars_ok(&envvars(2, "heap-4m-fits", &env), 2, "both sizes set");
    // Without the alias, the same check in a 3 MiB heap fails: the test can tell the two apart.
    let o = envvars(2, "heap-4m-fits", &[("SHMEM_SYMMETRIC_SIZE", "3M")]);
    assert!(
        !o.success(),
        "a 4 MiB allocation succeeded in a 3 MiB heap:\n{}",
        all_output(&o)
    );
}

#[test]
fn a_bad_shmem_symmetric_size_fails_init_naming_it_2pe() {
    // Default (abort) mode: the job fails with the variable and its value in the message.
    let mut job = xpushmem_launch::Job::new(2, conformance_program("envvars"));
    job.args = vec!["plain".into()];
    job.env = vec![
        ("XPUSHMEM_TIMEOUT_MS".into(), "20000".into()),
        ("SHMEM_SYMMETRIC_SIZE".into(), "lots".into()),
    ];
    job.timeout = Some(std::time::Duration::from_secs(120));
    job.capture = true;
    let o = job.run().expect("the job starts");
    let out = all_output(&o);
    assert!(
        !o.success(),
        "init accepted SHMEM_SYMMETRIC_SIZE=lots:\n{out}"
    );
    assert!(
        out.contains("SHMEM_SYMMETRIC_SIZE=lots") && !out.contains("envvars OK"),
        "{out}"
    );
    // Return mode: shmem_init_thread returns non-zero and the last error names it (checked by the program).
    for size in ["lots", "-1", "12Q"] {
        let o = envvars(2, "bad-size", &[("SHMEM_SYMMETRIC_SIZE", size)]);
        assert_success(&o, &format!("SHMEM_SYMMETRIC_SIZE={size} in return mode"));
        for pe in 0..2 {
            assert!(
                o.output_of(pe).contains("envvars OK (init refused"),
                "{}",
                all_output(&o)
            );
        }
    }
}

/// The lines of `pe`'s output that announce the version.
fn version_lines(o: &xpushmem_launch::Outcome, pe: usize) -> usize {
    let want = format!("xpushmem {} (OpenSHMEM 1.", xpushmem::VERSION);
    o.output_of(pe)
        .lines()
        .filter(|l| l.contains(&want))
        .count()
}

#[test]
fn shmem_version_prints_the_version_once_per_pe_1pe_4pe() {
    for n in [1, 4] {
        let o = envvars(n, "plain", &[("SHMEM_VERSION", "1")]);
        envvars_ok(&o, n, "SHMEM_VERSION=1");
        for pe in 0..n {
            assert_eq!(version_lines(&o, pe), 1, "PE {pe}:\n{}", all_output(&o));
            assert!(
                o.output_of(pe).contains(&format!("PE {pe} of {n}")),
                "{}",
                all_output(&o)
            );
        }
    }
    for off in [None, Some("0")] {
        let env: Vec<_> = off.map(|v| ("SHMEM_VERSION", v)).into_iter().collect();
        let o = envvars(2, "plain", &env);
        envvars_ok(&o, 2, "SHMEM_VERSION unset or 0");
        assert_eq!(
            version_lines(&o, 0) + version_lines(&o, 1),
            0,
            "{}",
            all_output(&o)
        );
    }
}

#[test]
fn shmem_info_prints_every_variable_of_the_table_2pe() {
    let o = envvars(2, "plain", &[("SHMEM_INFO", "yes")]);
    envvars_ok(&o, 2, "SHMEM_INFO=yes");
    let (pe0, pe1) = (o.output_of(0), o.output_of(1));
    for v in xpushmem::config::VARS {
        assert!(
            pe0.contains(v.name),
            "SHMEM_INFO did not list {}:\n{pe0}",
            v.name
        );
        assert!(!pe1.contains(v.name), "PE 1 printed the table too:\n{pe1}");
    }
    for name in [
        "SHMEM_SYMMETRIC_SIZE",
        "SHMEM_VERSION",
        "SHMEM_INFO",
        "SHMEM_DEBUG",
    ] {
        assert!(pe0.contains(name), "{name} missing:\n{pe0}");
    }
}

#[test]
fn shmem_debug_enables_debug_messages_unless_xpushmem_log_is_set_2pe() {
    // The runtime's start-up debug message ("bootstrap up"), on each PE's stderr.
    let debug_lines = |o: &xpushmem_launch::Outcome, pe: usize| {
        o.output
            .iter()
            .filter(|(p, err, l)| *p == pe && *err && l.contains("bootstrap up"))
            .count()
    };
    let o = envvars(2, "plain", &[("SHMEM_DEBUG", "1")]);
    envvars_ok(&o, 2, "SHMEM_DEBUG=1");
    for pe in 0..2 {
        assert!(
            debug_lines(&o, pe) >= 1,
            "PE {pe}: no debug message:\n{}",
            all_output(&o)
        );
    }
    for env in [vec![], vec![("SHMEM_DEBUG", "1"), ("XPUSHMEM_LOG", "warn")]] {
        let o = envvars(2, "plain", &env);
        envvars_ok(&o, 2, &format!("{env:?}"));
        assert_eq!(
            debug_lines(&o, 0) + debug_lines(&o, 1),
            0,
            "{env:?}:\n{}",
            all_output(&o)
        );
    }
}
