//! Finds PMIx's headers (pkg-config `pmix`, Debian's `libpmix-dev`); when present, compiles the C shim and
//! generates its bindings with bindgen. When absent (or `PMIX_SYS_DISABLE=1`), the crate builds empty and says so to
//! its dependents through the `links` metadata (`DEP_PMIX_AVAILABLE`), so a machine without PMIx builds everything
//! else.
use std::path::PathBuf;

fn include_dirs() -> Option<Vec<PathBuf>> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PMIX_SYS_INCLUDE")
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    // pkg-config's answer when it has one, else the system default.
    if let Ok(lib) = pkg_config::Config::new()
        .cargo_metadata(false)
        .env_metadata(false)
        .probe("pmix")
    {
        dirs.extend(lib.include_paths);
    }
    dirs.push(PathBuf::from("/usr/include"));
    dirs.push(PathBuf::from("/usr/local/include"));
    let found = dirs.iter().any(|d| d.join("pmix.h").is_file());
    found.then_some(dirs)
}

fn main() {
    println!("cargo::rerun-if-env-changed=PMIX_SYS_DISABLE");
    println!("cargo::rerun-if-env-changed=PMIX_SYS_INCLUDE");
    println!("cargo::rerun-if-changed=csrc/shim.h");
    println!("cargo::rerun-if-changed=csrc/shim.c");
    println!("cargo::rustc-check-cfg=cfg(pmix_sys_available)");
    let disabled = std::env::var("PMIX_SYS_DISABLE").is_ok_and(|v| v == "1");
    let dirs = match include_dirs() {
        Some(d) if !disabled => d,
        _ => {
            println!(
                "cargo::warning=PMIx headers (pmix.h) not found or PMIX_SYS_DISABLE=1: \
                 building without the PMIx bootstrap (install libpmix-dev)"
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
    cc.compile("xpushmem_pmix_shim");
    // libpmix is loaded at run time (xpmix_load: dlopen).
    println!("cargo::rustc-link-lib=dl");

    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    // The shim's header uses only C types: no PMIx header is needed to read it.
    let bindings = bindgen::Builder::default()
        .header("csrc/shim.h")
        .allowlist_function("xpmix_.*")
        .allowlist_var("XPMIX_.*")
        .layout_tests(false)
        .generate_comments(false)
        .generate()
        .expect("bindgen on the PMIx shim's header");
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("write bindings.rs");
    println!("cargo::rustc-cfg=pmix_sys_available");
    println!("cargo::metadata=available=1");
}
