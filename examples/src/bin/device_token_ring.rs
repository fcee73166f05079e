//! Device-initiated communication: kernels of every PE pass a token round the ring with the device library's
//! `putmem_signal` (examples/device/token_ring.cl, linked with `libxpushmem_device-<version>.bc`). PE k must
//! receive k, and PE 0 gets n back.
//!
//! Needs a device heap and the kernel toolchain (clang-14, llvm-link-14, llvm-spirv-14; scripts/setup-device.sh):
//! `source scripts/device-env.sh && ze_emu_env && XPUSHMEM_HEAP=device xpushmem-run -n 4 target/release/device_token_ring`

use std::path::{Path, PathBuf};
use std::process::Command;
use xpushmem::{Error, KernelArg};

/// Compile the kernel and link it with the committed device library; the SPIR-V module's bytes.
fn build_module(dir: &Path) -> xpushmem::Result<Vec<u8>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let lib = root.join(format!(
        "shmem/device-lib/prebuilt/libxpushmem_device-{}.bc",
        xpushmem::VERSION
    ));
    let (bc, linked, spv) = (dir.join("k.bc"), dir.join("linked.bc"), dir.join("k.spv"));
    let steps: [(&str, Vec<std::ffi::OsString>); 3] = [
        (
            "clang-14",
            vec![
                "-cc1".into(),
                "-triple".into(),
                "spir64-unknown-unknown".into(),
                "-cl-std=CL2.0".into(),
                "-finclude-default-header".into(),
                "-O2".into(),
                "-emit-llvm-bc".into(),
                "-I".into(),
                root.join("shmem/device-lib/include").into(),
                "-x".into(),
                "cl".into(),
                root.join("examples/device/token_ring.cl").into(),
                "-o".into(),
                bc.clone().into(),
            ],
        ),
        (
            "llvm-link-14",
            vec![
                "--only-needed".into(),
                bc.into(),
                lib.into(),
                "-o".into(),
                linked.clone().into(),
            ],
        ),
        (
            "llvm-spirv-14",
            vec![linked.into(), "-o".into(), spv.clone().into()],
        ),
    ];
    for (tool, args) in steps {
        let st = Command::new(tool).args(&args).status().map_err(|e| {
            Error::Device(format!(
                "{tool} not runnable ({e}); run scripts/setup-device.sh"
            ))
        })?;
        if !st.success() {
            return Err(Error::Device(format!("{tool} failed ({st})")));
        }
    }
    std::fs::read(&spv).map_err(|e| Error::Device(format!("reading {}: {e}", spv.display())))
}

fn main() -> xpushmem::Result<()> {
    let sh = xpushmem::init()?;
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let dev = sh.device().ok_or_else(|| {
        Error::State("device_token_ring needs a device heap: XPUSHMEM_HEAP=device".into())
    })?;
    let dir = std::env::temp_dir().join(format!("xpushmem-token-ring-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| Error::Device(format!("{}: {e}", dir.display())))?;
    let spirv = build_module(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    let module = dev.load_module(&spirv?)?;
    dev.init_module(&module)?;
    let kernel = dev.kernel(&module, "token_ring")?;
    let token = sh.calloc::<i64>(1)?;
    let sig = sh.calloc::<u64>(1)?;
    let out = sh.calloc::<i64>(3)?;
    sh.barrier_all()?;
    let args = [
        KernelArg::sym(token, me),
        KernelArg::sym(sig, me),
        KernelArg::sym(out, me),
    ];
    // SAFETY: token_ring touches its three buffers (within their extents) and, through the device library, the
    // right neighbour's token and signal words; one work-item per PE.
    unsafe { dev.launch(&kernel, &args, [1, 1, 1], [1, 1, 1])? };
    let mut got = [0i64; 3];
    sh.get(&mut got, out, me)?;
    let want = if me == 0 { n as i64 } else { me as i64 };
    sh.barrier_all()?;
    if got[0] != want || got[2] != 0 {
        eprintln!(
            "device_token_ring: PE {me} got token {} (status {}), expected {want}",
            got[0], got[2]
        );
        std::process::exit(1);
    }
    println!("device_token_ring: PE {me} of {n} got token {}: ok", got[0]);
    sh.finalize()
}
