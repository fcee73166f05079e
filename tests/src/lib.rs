//! The multi-PE test harness.
//!
//! A multi-PE test is an ordinary `#[test]` that re-executes its own test binary as N PEs through the launcher
//! ([`xpushmem_launch::Job`]), each child running only that test (`--exact`), with a hard time limit. In the child
//! the same test function sees `XPUSHMEM_TEST_CASE` naming it, initialises the runtime and runs the body; the
//! parent asserts that every PE exited with 0 and shows each PE's output otherwise. The transport is part of a
//! case's name (`ring::fab_3pe`): [`pe_test!`] sets its environment in the PEs ([`Transport`]).
//!
//! ```no_run
//! xpushmem_tests::pe_test!(ring, shm [1, 2, 4], fab [2, 3], |sh| {
//!     let x = sh.calloc::<u64>(1)?.at(0)?;
//!     sh.p(x, 7, (sh.my_pe() + 1) % sh.n_pes())?;
//!     sh.barrier_all()?;
//!     assert_eq!(sh.g(x, sh.my_pe())?, 7);
//!     Ok(())
//! });
//! ```

use std::time::Duration;
pub use xpushmem;

pub mod cover;
pub mod mpirun;
use xpushmem_launch::{Job, Outcome};

/// Environment variable naming the test a PE process must run.
pub const CASE_VAR: &str = "XPUSHMEM_TEST_CASE";

/// Hard limit of one multi-PE test (override with `XPUSHMEM_TEST_TIMEOUT` seconds).
pub fn job_timeout() -> Duration {
    let s = std::env::var("XPUSHMEM_TEST_TIMEOUT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(120);
    Duration::from_secs(s)
}

/// Limit of every wait inside a test PE: well below the job limit, so a hang shows as the runtime's own error.
pub const PE_WAIT_TIMEOUT_MS: &str = "60000";

/// The name libtest knows a test by, from its `module_path!()` and function name.
pub fn test_name(module_path: &str, func: &str) -> String {
    let path = module_path
        .split_once("::")
        .map(|(_, rest)| rest)
        .unwrap_or("");
    if path.is_empty() {
        func.to_string()
    } else {
        format!("{path}::{func}")
    }
}

/// Whether this process is a PE of the test `name`.
pub fn is_pe_of(name: &str) -> bool {
    std::env::var(CASE_VAR).is_ok_and(|v| v == name)
}

/// This PE's rank as its launcher set it (`XPUSHMEM_BOOTSTRAP_RANK`), before init: for PE processes that choose
/// their node or their environment by rank. Panics (the PE fails its test) outside a launched PE.
pub fn launcher_rank() -> usize {
    std::env::var("XPUSHMEM_BOOTSTRAP_RANK")
        .expect("XPUSHMEM_BOOTSTRAP_RANK set by the launcher")
        .parse()
        .expect("XPUSHMEM_BOOTSTRAP_RANK is a number")
}

/// The job of `n` PEs of test `name` (this test binary, `--exact name`, output captured), with the wait limit of
/// the PEs' tests and the job's hard timeout; `env` adds variables or replaces these defaults.
pub fn pe_job(name: &str, n: usize, env: &[(&str, &str)]) -> Job {
    let exe = std::env::current_exe().expect("test binary path");
    let mut job = Job::new(n, exe);
    job.args = vec![
        name.into(),
        "--exact".into(),
        "--nocapture".into(),
        "--test-threads=1".into(),
    ];
    job.env = vec![
        (CASE_VAR.into(), name.into()),
        ("XPUSHMEM_TIMEOUT_MS".into(), PE_WAIT_TIMEOUT_MS.into()),
        ("RUST_BACKTRACE".into(), "0".into()),
    ];
    // The depth of the product loops (cover::DEPTH_VAR) is the parent's: every PE runs the same rows.
    if let Ok(depth) = std::env::var(cover::DEPTH_VAR) {
        job.env.push((cover::DEPTH_VAR.into(), depth));
    }
    for (k, v) in env {
        match job.env.iter_mut().find(|(key, _)| key == k) {
            Some(e) => e.1 = v.to_string(),
            None => job.env.push((k.to_string(), v.to_string())),
        }
    }
    job.timeout = Some(job_timeout());
    job.capture = true;
    job
}

/// Launch `n` PEs of test `name` (this test binary, `--exact name`) with extra environment; the outcome.
pub fn spawn_pes_with(name: &str, n: usize, env: &[(&str, &str)]) -> Outcome {
    pe_job(name, n, env).run().expect("launch PEs")
}

/// Every PE's exit and output, one block per PE (for a failing assertion's message).
pub fn outputs(out: &Outcome) -> String {
    (0..out.exits.len())
        .map(|pe| {
            format!(
                "---- PE {pe} ({:?}) ----\n{}",
                out.exits[pe],
                out.output_of(pe)
            )
        })
        .collect()
}

/// Launch `n` PEs of test `name` and panic (with every PE's output) unless all exit with 0.
pub fn spawn_pes(name: &str, n: usize) {
    let out = spawn_pes_with(name, n, &[]);
    assert_success(name, n, &out);
}

/// Panic with every PE's output unless the job succeeded.
pub fn assert_success(name: &str, n: usize, out: &Outcome) {
    if !out.success() {
        panic!(
            "{name} at {n} PEs failed: first failure {:?}, timed out: {}, after {:?}\n{}",
            out.first_failure,
            out.timed_out,
            out.elapsed,
            outputs(out)
        );
    }
}

/// Body of a PE: initialise, run, finalize; exits the process (0 on success, 1 with the error on stderr).
pub fn run_pe(body: impl FnOnce(&xpushmem::Shmem) -> xpushmem::Result<()>) -> ! {
    let sh = match xpushmem::init() {
        Ok(sh) => sh,
        Err(e) => {
            eprintln!("init failed: {e}");
            std::process::exit(1);
        }
    };
    let r = body(&sh).and_then(|()| sh.finalize());
    match r {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}

/// A PE-loss test's victim `victim` leaves (exit status 0, without finalize) only once every other PE has
/// called this too: each of them counts out on the victim's `out` (zero on entry, symmetric). A PE still finishing
/// the collective before this call would otherwise see the loss there instead of in the call under test. Returns
/// on every PE but the victim.
pub fn victim_leaves_last(
    sh: &xpushmem::Shmem,
    out: xpushmem::SymRef<u64>,
    victim: usize,
) -> xpushmem::Result<()> {
    if sh.my_pe() != victim {
        return sh.atomic_add(out, 1, victim);
    }
    sh.wait_until(out, xpushmem::Cmp::Eq, (sh.n_pes() - 1) as u64)?;
    std::process::exit(0)
}

/// The environment of a PE whose symmetric heap lives on a (ze-emu) Level Zero device: the loader's variables
/// with the validation layer on, ze-emu's driver path (built on first use), and `XPUSHMEM_HEAP=device`.
/// With `XPUSHMEM_HARDWARE=1` (the bring-up script on an Intel GPU machine) ze-emu is left out and the real driver
/// is used.
pub fn device_env() -> Vec<(String, String)> {
    let hardware = std::env::var("XPUSHMEM_HARDWARE").is_ok_and(|v| v == "1");
    let mut env = if hardware {
        Vec::new()
    } else {
        ze_emu::testing::loader_env()
    };
    env.push(("XPUSHMEM_HEAP".into(), "device".into()));
    env
}

/// The transport a multi-PE test case runs on, set in its PEs' environment; the prefix of the case's name
/// (`shm_2pe`, `def_4pe`, `fab_3pe`, `fabp_3pe`, `cas_2pe`, `dev_2pe`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// One node, host heaps: shared memory (the default; no variable set).
    Shm,
    /// The deferred test transport: writes land late and out of order until quiet/fence
    /// (`XPUSHMEM_TRANSPORT=deferred`).
    Deferred,
    /// libfabric tcp on loopback, progress made only by the calls that wait (`XPUSHMEM_TRANSPORT=fabric`).
    Fabric,
    /// The fabric with the progress thread too (`XPUSHMEM_PROGRESS_THREAD=1`): for collectives, where a PE may
    /// wait outside xpushmem while its peers need it.
    FabricProgress,
    /// The fabric with the compare-and-swap emulation of the atomics a provider lacks
    /// (`XPUSHMEM_FABRIC_ATOMICS=cas`).
    FabricCas,
    /// The symmetric heap on a (ze-emu) Level Zero device ([`device_env`]).
    Device,
}

impl Transport {
    /// The prefix of the test cases on this transport.
    pub fn prefix(self) -> &'static str {
        match self {
            Transport::Shm => "shm",
            Transport::Deferred => "def",
            Transport::Fabric => "fab",
            Transport::FabricProgress => "fabp",
            Transport::FabricCas => "cas",
            Transport::Device => "dev",
        }
    }

    /// The environment that selects this transport in a PE.
    pub fn env(self) -> Vec<(String, String)> {
        let pairs: &[(&str, &str)] = match self {
            Transport::Shm => &[],
            Transport::Deferred => &[("XPUSHMEM_TRANSPORT", "deferred")],
            Transport::Fabric => &[("XPUSHMEM_TRANSPORT", "fabric")],
            Transport::FabricProgress => &[
                ("XPUSHMEM_TRANSPORT", "fabric"),
                ("XPUSHMEM_PROGRESS_THREAD", "1"),
            ],
            Transport::FabricCas => &[
                ("XPUSHMEM_TRANSPORT", "fabric"),
                ("XPUSHMEM_FABRIC_ATOMICS", "cas"),
            ],
            Transport::Device => return device_env(),
        };
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }
}

/// Launch `n` PEs of test `name` with device heaps and panic (with every PE's output) unless all exit with 0.
pub fn spawn_pes_on_device(name: &str, n: usize) {
    spawn_pes_on(name, n, Transport::Device, &[]);
}

/// Launch `n` PEs of test `name` on `transport` with `extra` environment (which wins over the transport's) and
/// panic (with every PE's output) unless all exit with 0.
pub fn spawn_pes_on(name: &str, n: usize, transport: Transport, extra: &[(&str, &str)]) {
    let env = transport.env();
    let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    env.extend_from_slice(extra);
    let out = spawn_pes_with(name, n, &env);
    assert_success(name, n, &out);
}

/// One case of a [`pe_test!`]: in a PE of it, run `body` and exit; otherwise launch its `n` PEs on `transport` with
/// `extra` environment and check that all succeed.
pub fn pe_case(
    module_path: &str,
    func: &str,
    n: usize,
    transport: Transport,
    extra: &[(&str, &str)],
    body: fn(&xpushmem::Shmem) -> xpushmem::Result<()>,
) {
    let name = test_name(module_path, func);
    if is_pe_of(&name) {
        run_pe(body);
    }
    spawn_pes_on(&name, n, transport, extra);
}

#[doc(hidden)]
pub use paste;

/// Define a multi-PE test: a module `$name` with one `#[test]` per transport and PE count, named
/// `<transport>_<n>pe` (`rma::put_get::fab_3pe`). The body is a closure-like block taking `&Shmem` and returning
/// `xpushmem::Result<()>`; use `assert!` for checks. The lists, each optional but in this order:
/// `env [slices of (&str, &str)]` (added to every case's environment), then the PE counts on `shm` (host heaps,
/// shared memory), `def` (deferred test transport), `fab` (fabric on loopback), `fabp` (fabric with the progress
/// thread), `cas` (fabric with CAS-emulated atomics), `dev` (device heaps on ze-emu); see [`Transport`].
#[macro_export]
macro_rules! pe_test {
    (
        $name:ident,
        $(env [$($env:expr),* $(,)?],)?
        $(shm [$($shm:literal),* $(,)?],)?
        $(def [$($def:literal),* $(,)?],)?
        $(fab [$($fab:literal),* $(,)?],)?
        $(fabp [$($fabp:literal),* $(,)?],)?
        $(cas [$($cas:literal),* $(,)?],)?
        $(dev [$($dev:literal),* $(,)?],)?
        |$sh:ident| $body:block
    ) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[allow(unused_variables, clippy::needless_return)]
            fn body($sh: &$crate::xpushmem::Shmem) -> $crate::xpushmem::Result<()> $body
            #[allow(dead_code)]
            fn extra_env() -> Vec<(&'static str, &'static str)> {
                #[allow(unused_mut)]
                let mut env = Vec::new();
                $($(env.extend_from_slice($env);)*)?
                env
            }
            $crate::paste::paste! {
                $($(
                    #[test]
                    fn [<shm_ $shm pe>]() {
                        $crate::pe_case(module_path!(), stringify!([<shm_ $shm pe>]), $shm,
                            $crate::Transport::Shm, &extra_env(), body);
                    }
                )*)?
                $($(
                    #[test]
                    fn [<def_ $def pe>]() {
                        $crate::pe_case(module_path!(), stringify!([<def_ $def pe>]), $def,
                            $crate::Transport::Deferred, &extra_env(), body);
                    }
                )*)?
                $($(
                    #[test]
                    fn [<fab_ $fab pe>]() {
                        $crate::pe_case(module_path!(), stringify!([<fab_ $fab pe>]), $fab,
                            $crate::Transport::Fabric, &extra_env(), body);
                    }
                )*)?
                $($(
                    #[test]
                    fn [<fabp_ $fabp pe>]() {
                        $crate::pe_case(module_path!(), stringify!([<fabp_ $fabp pe>]), $fabp,
                            $crate::Transport::FabricProgress, &extra_env(), body);
                    }
                )*)?
                $($(
                    #[test]
                    fn [<cas_ $cas pe>]() {
                        $crate::pe_case(module_path!(), stringify!([<cas_ $cas pe>]), $cas,
                            $crate::Transport::FabricCas, &extra_env(), body);
                    }
                )*)?
                $($(
                    #[test]
                    fn [<dev_ $dev pe>]() {
                        $crate::pe_case(module_path!(), stringify!([<dev_ $dev pe>]), $dev,
                            $crate::Transport::Device, &extra_env(), body);
                    }
                )*)?
            }
        }
    };
    ($name:ident, |$sh:ident| $body:block) => {
        $crate::pe_test!($name, shm [1, 2, 4, 8], |$sh| $body);
    };
}

/// A deterministic value for element `i` of a buffer written by PE `pe` in test step `salt`: an independent
/// reference both sides compute (splitmix64 of the triple). Inlined into the suites' loops (`ref_vec`): a call per
/// element across the crate boundary was most of the collective suites' CPU time.
#[inline]
pub fn reference(pe: usize, i: usize, salt: u64) -> u64 {
    let mut z = (pe as u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add((i as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9))
        .wrapping_add(salt.wrapping_mul(0x94D0_49BB_1331_11EB));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Conversion of reference bits into each element type (floats stay finite, so equality is meaningful).
pub trait FromRef: xpushmem::Symmetric {
    /// The element for reference bits `bits`.
    fn from_ref(bits: u64) -> Self;
}

macro_rules! from_ref_int {
    ($($t:ty),*) => {$( impl FromRef for $t { #[inline] fn from_ref(b: u64) -> Self { b as $t } } )*};
}
from_ref_int!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);
impl FromRef for f32 {
    #[inline]
    fn from_ref(b: u64) -> Self {
        (b % 1_000_000) as f32 * 0.5 - 1000.0
    }
}
impl FromRef for f64 {
    #[inline]
    fn from_ref(b: u64) -> Self {
        (b % 1_000_000_000) as f64 * 0.25 - 7.0
    }
}

/// `len` reference elements of PE `pe` for step `salt`.
pub fn ref_vec<T: FromRef>(pe: usize, len: usize, salt: u64) -> Vec<T> {
    (0..len)
        .map(|i| T::from_ref(reference(pe, i, salt)))
        .collect()
}

/// Write `bytes` to `path` whole or not at all: into `<path>.<pid>.part` beside it, then renamed over `path`, so a
/// reader in another process (polling for the file) never sees it half written. The part file is removed on error.
pub fn write_whole(path: &std::path::Path, bytes: impl AsRef<[u8]>) -> std::io::Result<()> {
    let mut part = path.as_os_str().to_owned();
    part.push(format!(".{}.part", std::process::id()));
    let part = std::path::PathBuf::from(part);
    let r = std::fs::write(&part, bytes).and_then(|()| std::fs::rename(&part, path));
    if r.is_err() {
        let _ = std::fs::remove_file(&part);
    }
    r
}

/// Live processes whose environment names the test case `name` (`CASE_VAR`): a job's PEs, and its orphans, which
/// would still carry it. Zombies have no environment and are not counted.
pub fn processes_of(name: &str) -> Vec<u32> {
    let needle = format!("{CASE_VAR}={name}");
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
                .unwrap_or(false)
        })
        .collect()
}

/// Wait (polling every 50 ms, at most 30 s) until no process of the test case `name` but this one is alive: a PE
/// that killed its peer, or let it exit, acts only once the peer is gone. `Err` names the case when one is left.
pub fn wait_alone(name: &str) -> Result<(), String> {
    let mine = std::process::id();
    for _ in 0..600 {
        if processes_of(name).iter().all(|&p| p == mine) {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Err(format!(
        "{name}: another process of the case is still alive after 30 s"
    ))
}

/// Building OpenCL C test kernels against the device library (clang-14, then `shmem/device-lib/link.sh`), for the
/// device suites.
pub mod device_build {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    /// The workspace root.
    pub fn root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    /// Run a build tool; a tool that is missing or fails panics with its error output.
    pub fn run_tool(cmd: &mut Command) {
        let o = cmd.output().unwrap_or_else(|e| {
            panic!("{cmd:?} not runnable ({e}); scripts/setup-device.sh installs it")
        });
        assert!(
            o.status.success(),
            "{cmd:?} failed:\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }

    /// The compiler and its flags (before `-I <the device library's headers> <source> -o <out>`).
    const CLANG: [&str; 10] = [
        "clang-14",
        "-cc1",
        "-triple",
        "spir64-unknown-unknown",
        "-cl-std=CL2.0",
        "-finclude-default-header",
        "-O2",
        "-emit-llvm-bc",
        "-x",
        "cl",
    ];

    /// Compile OpenCL C `source` to spir64 bitcode `out` (clang-14, -O2, the device library's headers on the
    /// include path).
    pub fn compile_cl(source: &Path, out: &Path) {
        run_tool(
            Command::new(CLANG[0])
                .args(&CLANG[1..])
                .arg("-I")
                .arg(root().join("shmem/device-lib/include"))
                .arg(source)
                .arg("-o")
                .arg(out),
        );
    }

    /// The committed device library of this version (`ext`: `bc` or `spv`).
    pub fn library(ext: &str) -> PathBuf {
        let lib = root().join(format!(
            "shmem/device-lib/prebuilt/libxpushmem_device-{}.{ext}",
            xpushmem::VERSION
        ));
        assert!(lib.exists(), "{} is missing", lib.display());
        lib
    }

    /// `source` compiled and linked with the committed device-library bitcode into `dir/spv_name` by link.sh
    /// (llvm-link --only-needed, a check that every xpushmem symbol is defined, llvm-spirv).
    ///
    /// The module is kept in `<target>/<profile>/device-kernels/<key>.spv`, `key` the SHA-256 of every input: the
    /// source, the device library's headers, its bitcode, link.sh and the compiler's flags. The suites link the
    /// same few sources in some fifty test processes (clang at -O2, llvm-link and llvm-spirv each time, about a
    /// minute of CPU in a run); the first builds (the `device_lib::kernel_sources_*` warm-ups), the others copy.
    /// Published by rename: a reader sees a whole module or none.
    pub fn link_with_library(source: &Path, dir: &Path, spv_name: &str) -> PathBuf {
        std::fs::create_dir_all(dir).expect("scratch dir");
        let (k, spv) = (dir.join("k.bc"), dir.join(spv_name));
        let cached = kernel_cache().join(format!("{}.spv", link_key(source)));
        if std::fs::copy(&cached, &spv).is_ok() {
            return spv;
        }
        compile_cl(source, &k);
        run_tool(
            Command::new("bash")
                .arg(root().join("shmem/device-lib/link.sh"))
                .arg(&k)
                .arg(library("bc"))
                .arg(&spv),
        );
        // A cache that cannot be written only costs the next process a build.
        let _ = std::fs::read(&spv).and_then(|m| super::write_whole(&cached, m));
        spv
    }

    /// `<target>/<profile>/device-kernels` (the test binary is `<target>/<profile>/deps/<name>`).
    fn kernel_cache() -> PathBuf {
        let exe = std::env::current_exe().expect("test binary path");
        let profile = exe
            .parent()
            .and_then(Path::parent)
            .expect("<target>/<profile>/deps/");
        let dir = profile.join("device-kernels");
        std::fs::create_dir_all(&dir).expect("device-kernels cache dir");
        dir
    }

    /// SHA-256 (hex) of everything `link_with_library` reads to build `source`.
    fn link_key(source: &Path) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        let mut add = |what: &str, bytes: &[u8]| {
            h.update((what.len() as u64).to_le_bytes());
            h.update(what.as_bytes());
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        let read = |p: &Path| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        add("flags", CLANG.join(" ").as_bytes());
        add("source", &read(source));
        let include = root().join("shmem/device-lib/include");
        let mut headers: Vec<PathBuf> = std::fs::read_dir(&include)
            .expect("the device library's headers")
            .map(|e| e.expect("a header").path())
            .collect();
        headers.sort();
        for header in &headers {
            let name = header.file_name().map(|n| n.to_string_lossy().into_owned());
            add(&name.unwrap_or_default(), &read(header));
        }
        add("library", &read(&library("bc")));
        add("link.sh", &read(&root().join("shmem/device-lib/link.sh")));
        h.finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    }
}
