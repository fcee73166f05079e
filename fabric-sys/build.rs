//! Finds libfabric's headers; when present, compiles the C shim and generates the bindings with bindgen. When
//! absent (or `FABRIC_SYS_DISABLE=1`), the crate builds empty and says so to its dependents through the `links`
//! metadata (`DEP_FABRIC_AVAILABLE`), so a machine without libfabric still builds everything else.
use std::path::PathBuf;

fn include_dirs() -> Option<Vec<PathBuf>> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("FABRIC_SYS_INCLUDE")
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    // pkg-config's answer when it has one, else the system default.
    if let Ok(lib) = pkg_config::Config::new()
        .cargo_metadata(false)
        .env_metadata(false)
        .probe("libfabric")
    {
        dirs.extend(lib.include_paths);
    }
    dirs.push(PathBuf::from("/usr/include"));
    dirs.push(PathBuf::from("/usr/local/include"));
    let found = dirs.iter().any(|d| d.join("rdma/fabric.h").is_file());
    found.then_some(dirs)
}

fn main() {
    println!("cargo::rerun-if-env-changed=FABRIC_SYS_DISABLE");
    println!("cargo::rerun-if-env-changed=FABRIC_SYS_INCLUDE");
    println!("cargo::rerun-if-changed=csrc/shim.h");
    println!("cargo::rerun-if-changed=csrc/shim.c");
    println!("cargo::rustc-check-cfg=cfg(fabric_sys_available)");
    let disabled = std::env::var("FABRIC_SYS_DISABLE").is_ok_and(|v| v == "1");
    let dirs = match include_dirs() {
        Some(d) if !disabled => d,
        _ => {
            println!(
                "cargo::warning=libfabric headers (rdma/fabric.h) not found or FABRIC_SYS_DISABLE=1: \
                 building without the fabric transport (install libfabric-dev)"
            );
            println!("cargo::metadata=available=0");
            return;
        }
    };
    let mut cc = cc::Build::new();
    cc.file("csrc/shim.c").warnings(true);
    for d in &dirs {
        cc.include(d);
    }
    cc.compile("xpushmem_fabric_shim");
    // libfabric itself is loaded at run time (xfi_load: dlopen), so nothing links against it; dlopen is in libc
    // since glibc 2.34, libdl for older ones.
    println!("cargo::rustc-link-lib=dl");

    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let bindings = bindgen::Builder::default()
        .header("csrc/shim.h")
        .clang_args(dirs.iter().map(|d| format!("-I{}", d.display())))
        .allowlist_function("xfi_.*")
        .allowlist_type("fi_.*|fid_.*")
        .allowlist_var("FI_.*")
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .generate()
        .expect("bindgen on libfabric's headers");
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("write bindings.rs");
    println!("cargo::rustc-cfg=fabric_sys_available");
    println!("cargo::metadata=available=1");
}
