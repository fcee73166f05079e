//! A C program that uses only Level Zero and `xpushmem.h` runs device-initiated communication at 2 PEs under
//! `xpushmem-run`: built with the pkg-config line of an installed tree (`ffi/install.sh`), its kernel linked with
//! the installed device library found through `pkg-config --variable=devicelibdir xpushmem`, on ze-emu devices.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use support::*;

fn run(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap_or_else(|e| {
        panic!("{cmd:?} not runnable ({e}); scripts/setup-device.sh installs the tools")
    });
    assert!(
        o.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn pkg_config(prefix: &Path, args: &[&str]) -> String {
    run(Command::new("pkg-config")
        .args(args)
        .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig")))
}

#[test]
fn c_program_with_level_zero_and_the_installed_device_library_2pe() {
    built_lib("libxpushmem.so");
    let dir = scratch("device_token_ring");
    let prefix = dir.join("prefix");
    run(Command::new("sh")
        .arg(ffi_dir().join("install.sh"))
        .env("PREFIX", &prefix)
        .env("BUILD_DIR", profile_dir())
        .env("XPUSHMEM_INSTALL_BINS", "if-present"));
    let devlibdir = PathBuf::from(pkg_config(
        &prefix,
        &["--variable=devicelibdir", "xpushmem"],
    ));
    let version = pkg_config(&prefix, &["--modversion", "xpushmem"]);
    let lib = devlibdir.join(format!("libxpushmem_device-{version}.bc"));
    assert!(
        lib.exists(),
        "the installed device library {} is missing",
        lib.display()
    );
    let include = pkg_config(&prefix, &["--variable=deviceincludedir", "xpushmem"]);

    // The kernel: OpenCL C -> spir64 bitcode, linked with the installed library by its link.sh, -> SPIR-V.
    let (bc, spv) = (dir.join("k.bc"), dir.join("k.spv"));
    run(Command::new("clang-14")
        .args([
            "-cc1",
            "-triple",
            "spir64-unknown-unknown",
            "-cl-std=CL2.0",
            "-finclude-default-header",
        ])
        .args(["-O2", "-emit-llvm-bc", "-x", "cl", "-I", &include])
        .arg(ffi_dir().join("../examples/device/token_ring.cl"))
        .arg("-o")
        .arg(&bc));
    run(Command::new("bash")
        .arg(devlibdir.join("link.sh"))
        .arg(&bc)
        .arg(&lib)
        .arg(&spv));

    // The host program: the pkg-config lines of xpushmem and the Level Zero loader only.
    let flags = pkg_config(&prefix, &["--cflags", "--libs", "xpushmem"]);
    let ze = run(Command::new("pkg-config").args(["--cflags", "--libs", "level-zero"]));
    let prog = dir.join("device_token_ring");
    let mut args: Vec<String> = flags.split_whitespace().map(String::from).collect();
    args.extend(ze.split_whitespace().map(String::from));
    gcc(
        &prog,
        &[ffi_dir().join("tests/c/device_token_ring.c")],
        &args,
    );

    let launcher = profile_dir().join("xpushmem-run");
    assert!(
        launcher.exists(),
        "xpushmem-run was not built (cargo build -p xpushmem -p xpushmem-launch --bins)"
    );
    let mut cmd = Command::new(&launcher);
    cmd.args(["-n", "2", "--timeout", "240"])
        .arg(&prog)
        .arg(&spv);
    cmd.envs(ze_emu::testing::loader_env());
    cmd.env("XPUSHMEM_HEAP", "device")
        .env("XPUSHMEM_TIMEOUT_MS", "60000");
    let out = run(&mut cmd);
    for (pe, token) in [(0, 2), (1, 1)] {
        assert!(
            out.contains(&format!(
                "device_token_ring OK on PE {pe} of 2 (token {token})"
            )),
            "PE {pe}:\n{out}"
        );
    }
}
