//! Helpers for test harnesses that run code over ze-emu (this crate's own tests and the runtime's device
//! suites): build/locate the driver cdylib, find Intel's OpenCL CPU runtime, and the loader environment.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Repository root (the tests are built from the same checkout).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
        .to_path_buf()
}

/// Environment variable through which parent test processes hand the built driver's path to children.
pub const LIB_ENV: &str = "ZE_EMU_TEST_LIB";

/// Path of the ze-emu cdylib, freshly built.
///
/// `cargo test` builds only the rlib of ze-emu for its tests, so the first call in a test process runs
/// `cargo build -p ze-emu` into `<target>/ze-emu-cdylib` (its own target dir: the outer cargo holds the lock
/// on `<target>`); a no-op when up to date. Children get the path through the environment, which a caller that
/// built the driver already sets too (scripts/test.sh: the workspace's `<target>/debug/libze_emu.so`).
pub fn emu_lib() -> PathBuf {
    static LIB: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    LIB.get_or_init(|| {
        if let Some(p) = std::env::var_os(LIB_ENV) {
            return PathBuf::from(p);
        }
        let exe = std::env::current_exe().expect("current_exe");
        // <target>/<profile>/deps/<test>
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("profile dir")
            .to_path_buf();
        let release = profile_dir.file_name().is_some_and(|n| n == "release");
        let target_dir = profile_dir
            .parent()
            .expect("target dir")
            .join("ze-emu-cdylib");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args([
            "build",
            "--quiet",
            "-p",
            "ze-emu",
            "--lib",
            "--manifest-path",
        ])
        .arg(repo_root().join("ze-emu/Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET_DIR");
        if release {
            cmd.arg("--release");
        }
        let st = cmd.status().expect("run cargo build -p ze-emu");
        assert!(st.success(), "cargo build -p ze-emu failed");
        let lib = target_dir
            .join(if release { "release" } else { "debug" })
            .join("libze_emu.so");
        assert!(lib.exists(), "{} missing after cargo build", lib.display());
        lib
    })
    .clone()
}

/// Intel OpenCL CPU runtime environment (from scripts/setup-device.sh's cache), if installed.
pub fn opencl_env() -> Option<(PathBuf, String)> {
    let cache = std::env::var_os("XPUSHMEM_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".cache"));
    let root = cache.join("oneapi-cpu");
    let find = |name: &str| -> Option<PathBuf> { find_file(&root, name, 8) };
    let ocl = find("libintelocl.so")?;
    let mut dirs = vec![ocl.parent()?.to_path_buf()];
    for l in ["libsvml.so", "libtbb.so.12"] {
        if let Some(p) = find(l) {
            dirs.push(p.parent()?.to_path_buf());
        }
    }
    let mut ld: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    if let Ok(old) = std::env::var("LD_LIBRARY_PATH") {
        ld.push(old);
    }
    Some((ocl, ld.join(":")))
}

fn find_file(dir: &Path, name: &str, depth: u32) -> Option<PathBuf> {
    let rd = std::fs::read_dir(dir).ok()?;
    let mut subdirs = Vec::new();
    for e in rd.flatten() {
        let p = e.path();
        if p.file_name().is_some_and(|n| n == name) {
            return Some(p);
        }
        if depth > 0 && e.file_type().is_ok_and(|t| t.is_dir()) {
            subdirs.push(p);
        }
    }
    subdirs.sort();
    subdirs
        .into_iter()
        .find_map(|d| find_file(&d, name, depth - 1))
}

/// The environment a process needs to run Level Zero over ze-emu through the real loader, with the validation
/// layer on: `ZE_ENABLE_ALT_DRIVERS`, the validation variables, (when installed) the OpenCL CPU runtime, and the
/// compiled-program cache ([`program_cache_dir`]).
pub fn loader_env() -> Vec<(String, String)> {
    let lib = emu_lib().display().to_string();
    let mut env = vec![
        ("ZE_ENABLE_ALT_DRIVERS".to_string(), lib.clone()),
        (LIB_ENV.to_string(), lib),
        ("ZE_ENABLE_VALIDATION_LAYER".to_string(), "1".to_string()),
        (
            "ZE_ENABLE_PARAMETER_VALIDATION".to_string(),
            "1".to_string(),
        ),
    ];
    if let Some((ocl, ld)) = opencl_env() {
        env.push(("OCL_ICD_FILENAMES".to_string(), ocl.display().to_string()));
        env.push(("LD_LIBRARY_PATH".to_string(), ld));
    }
    env.push((
        crate::progcache::CACHE_ENV.to_string(),
        program_cache_dir().display().to_string(),
    ));
    env
}

/// The compiled-program cache of the tests: `$ZE_EMU_PROGRAM_CACHE` when set (empty: none), else
/// `<target>/ze-emu-cache` in the target dir the driver was built in.
pub fn program_cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(crate::progcache::CACHE_ENV) {
        return PathBuf::from(dir);
    }
    let lib = emu_lib();
    // <target>/ze-emu-cdylib/<profile>/libze_emu.so (built here), or <target>/<profile>/libze_emu.so (the
    // workspace's build, handed over in LIB_ENV by scripts/test.sh)
    let above_profile = lib.parent().and_then(Path::parent);
    let target = match above_profile {
        Some(d) if d.file_name().is_some_and(|n| n == "ze-emu-cdylib") => d.parent(),
        d => d,
    };
    target
        .map(|target| target.join("ze-emu-cache"))
        .unwrap_or_else(|| repo_root().join("target/ze-emu-cache"))
}

/// Level Zero handles created the way a host framework (SYCL, PyTorch XPU) would: the first driver, its first
/// device and a new context, through the loader of this process. For tests of handle adoption. The context is
/// deliberately never destroyed (the framework owns it; the test process ends).
pub fn framework_handles() -> Result<
    (
        level_zero_sys::ze_driver_handle_t,
        level_zero_sys::ze_device_handle_t,
        level_zero_sys::ze_context_handle_t,
    ),
    String,
> {
    use level_zero_sys as ze;
    let api = ze::ZeApi::load().map_err(|e| e.to_string())?;
    let call = |what: &str, r: ze::ze_result_t| r.ok().map_err(|r| format!("{what}: {r}"));
    // SAFETY: flags only.
    call("zeInit", unsafe { (api.zeInit)(0) })?;
    let mut n = 1u32;
    let mut driver = ze::ze_driver_handle_t::null();
    // SAFETY: room for one handle.
    call("zeDriverGet", unsafe {
        (api.zeDriverGet)(&mut n, &mut driver)
    })?;
    let mut device = ze::ze_device_handle_t::null();
    let mut nd = 1u32;
    // SAFETY: room for one handle.
    call("zeDeviceGet", unsafe {
        (api.zeDeviceGet)(driver, &mut nd, &mut device)
    })?;
    let desc = ze::ze_context_desc_t::default();
    let mut context = ze::ze_context_handle_t::null();
    // SAFETY: valid driver, descriptor and out-pointer.
    call("zeContextCreate", unsafe {
        (api.zeContextCreate)(driver, &desc, &mut context)
    })?;
    // Keep the loader loaded for the life of the process: the handles belong to it.
    std::mem::forget(api);
    Ok((driver, device, context))
}
