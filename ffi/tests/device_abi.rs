//! The device library's ABI header is generated from `shmem/src/abi.rs` (cbindgen), and its C layouts match
//! Rust's: a C file of `_Static_assert(offsetof(...) == N)` checks, with N computed by Rust, must compile with
//! clang-14 for the device target (spir64, OpenCL C) and for the host (C11).
//!
//! Regenerate the header with `XPUSHMEM_BLESS=1 cargo test -p xpushmem-ffi --test device_abi` (ffi/gen-header.sh).

mod support;

use std::mem::{offset_of, size_of};
use xpushmem::abi::{DeviceState, DeviceTeam, ProxyRequest, ProxyRing};

const BANNER: &str = concat!(
    "/* xpushmem_device_abi.h: layouts and codes shared by the xpushmem runtime (Rust) and its device library.\n",
    " *\n",
    " * GENERATED from shmem/src/abi.rs by cbindgen (ffi/tests/device_abi.rs; regenerate with ffi/gen-header.sh).\n",
    " * Do not edit: a test fails when this file drifts, and another compiles offsetof checks against Rust's layout.\n",
    " */\n",
    "#ifndef XPUSHMEM_DEVICE_ABI_H\n",
    "#define XPUSHMEM_DEVICE_ABI_H\n",
    "#ifdef __OPENCL_C_VERSION__\n",
    "typedef char int8_t;\n",
    "typedef short int16_t;\n",
    "typedef int int32_t;\n",
    "typedef long int64_t;\n",
    "typedef uchar uint8_t;\n",
    "typedef ushort uint16_t;\n",
    "typedef uint uint32_t;\n",
    "typedef ulong uint64_t;\n",
    "#else\n",
    "#include <stdint.h>\n",
    "#endif"
);

fn header_path() -> std::path::PathBuf {
    support::ffi_dir().join("../shmem/device-lib/include/xpushmem_device_abi.h")
}

fn generate() -> String {
    let src = support::ffi_dir().join("../shmem/src/abi.rs");
    let mut cfg = cbindgen::Config {
        language: cbindgen::Language::C,
        header: Some(BANNER.to_string()),
        trailer: Some("#endif /* XPUSHMEM_DEVICE_ABI_H */".to_string()),
        no_includes: true,
        cpp_compat: false,
        documentation: true,
        documentation_style: cbindgen::DocumentationStyle::C99,
        style: cbindgen::Style::Type,
        ..Default::default()
    };
    let types = [
        "DeviceCmp",
        "DeviceSignalOp",
        "AmoCode",
        "DeviceError",
        "DeviceCall",
        "DeviceTeam",
        "DeviceState",
        "ProxyOp",
        "ProxyRequest",
        "ProxyRing",
    ];
    cfg.export.include = types.iter().map(|t| t.to_string()).collect();
    cfg.export.rename = types
        .iter()
        .map(|t| (t.to_string(), format!("Xpushmem{t}")))
        .collect();
    cfg.enumeration.prefix_with_name = true;
    cfg.enumeration.rename_variants = cbindgen::RenameRule::ScreamingSnakeCase;
    let mut out = Vec::new();
    cbindgen::Builder::new()
        .with_config(cfg)
        .with_src(src)
        .generate()
        .expect("cbindgen generates the device ABI header")
        .write(&mut out);
    String::from_utf8(out).expect("utf-8")
}

#[test]
fn device_abi_header_is_generated() {
    let generated = generate();
    let path = header_path();
    if std::env::var_os("XPUSHMEM_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write header");
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == generated,
        "{} drifted from shmem/src/abi.rs; run ffi/gen-header.sh and commit the result",
        path.display()
    );
}

/// `_Static_assert`s of every field offset and struct size, with the values Rust computes.
fn layout_checks() -> String {
    let mut c = String::from("#include \"xpushmem_device_abi.h\"\n#include <stddef.h>\n");
    let mut check = |ty: &str, field: Option<&str>, v: usize| {
        let expr = match field {
            Some(f) => format!("offsetof({ty}, {f})"),
            None => format!("sizeof({ty})"),
        };
        c.push_str(&format!(
            "_Static_assert({expr} == {v}, \"{ty}.{} drifted from shmem/src/abi.rs\");\n",
            field.unwrap_or("size")
        ));
    };
    macro_rules! fields {
        ($t:ty, $c:literal, $($f:ident),*) => {
            $( check($c, Some(stringify!($f)), offset_of!($t, $f)); )*
            check($c, None, size_of::<$t>());
        };
    }
    fields!(DeviceTeam, "XpushmemDeviceTeam", start, stride, size, my_pe);
    fields!(
        DeviceState,
        "XpushmemDeviceState",
        magic,
        abi_version,
        my_pe,
        n_pes,
        heap_size,
        bases,
        my_base,
        scratch_offset,
        timeout_polls,
        n_teams,
        reserved,
        teams,
        epoch,
        error,
        error_call,
        error_arg,
        proxy
    );
    fields!(
        ProxyRequest,
        "XpushmemProxyRequest",
        seq,
        op,
        pe,
        dst,
        src,
        len,
        sig,
        value,
        sig_op,
        reserved
    );
    fields!(
        ProxyRing,
        "XpushmemProxyRing",
        head,
        tail,
        completed,
        capacity,
        error,
        error_pe,
        reserved
    );
    c
}

#[test]
fn device_abi_layout_matches_rust_in_c() {
    let dir = support::scratch("device_abi_layout");
    let file = dir.join("layout.c");
    std::fs::write(&file, layout_checks()).expect("write layout.c");
    let include = header_path().parent().expect("include dir").to_path_buf();
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang-14".into());
    for (what, args) in [
        (
            "spir64 OpenCL C",
            vec![
                "-cc1",
                "-triple",
                "spir64-unknown-unknown",
                "-cl-std=CL2.0",
                "-finclude-default-header",
                "-fsyntax-only",
                "-x",
                "cl",
            ],
        ),
        ("host C11", vec!["-std=c11", "-fsyntax-only", "-x", "c"]),
    ] {
        let o = std::process::Command::new(&clang)
            .args(&args)
            .arg("-I")
            .arg(&include)
            .arg(&file)
            .output()
            .unwrap_or_else(|e| {
                panic!("{clang} not runnable ({e}); scripts/setup-device.sh installs it")
            });
        assert!(
            o.status.success(),
            "the device ABI layout differs between Rust and C ({what}):\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}
