//! Helpers of the C tests: where cargo put the libraries, compiling C programs with gcc, running them as jobs.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The profile directory cargo built into (`target/debug`), from this test executable's path
/// (`target/debug/deps/NAME-HASH`): works for any `CARGO_TARGET_DIR` and from a fresh clone.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("deps dir");
    let dir = if deps.file_name().is_some_and(|n| n == "deps") {
        deps.parent().expect("profile dir").to_path_buf()
    } else {
        deps.to_path_buf()
    };
    dir
}

/// The repository's `ffi/` directory.
pub fn ffi_dir() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    if here.join("include").exists() && here.join("core").exists() {
        here
    } else {
        here.parent().expect("ffi dir").to_path_buf()
    }
}

/// A built library of the workspace (`libNAME.so` / `.a`), failing with a clear message when missing.
pub fn built_lib(file: &str) -> PathBuf {
    let p = profile_dir().join(file);
    assert!(
        p.exists(),
        "{} was not built (expected at {}); run through cargo test so that cargo builds it",
        file,
        p.display()
    );
    p
}

/// A fresh scratch directory for this test.
pub fn scratch(name: &str) -> PathBuf {
    let d = profile_dir().join("c-tests").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// Compile C sources with gcc -Wall -Wextra -Werror; panics with gcc's output on failure.
pub fn gcc(out: &Path, sources: &[PathBuf], args: &[String]) {
    compile(
        Path::new(&std::env::var("CC").unwrap_or_else(|_| "gcc".into())),
        out,
        sources,
        args,
    )
}

/// Compile and link `sources` to `out` with the C compiler (or compiler wrapper) `cc` and gcc's flags above.
pub fn compile(cc: &Path, out: &Path, sources: &[PathBuf], args: &[String]) {
    let mut cmd = Command::new(cc);
    cmd.args(["-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(out);
    cmd.args(sources).args(args);
    let o = cmd.output().expect("gcc runs");
    assert!(
        o.status.success(),
        "gcc failed ({:?}):\n{}{}",
        cmd,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Compile the C program `src` to `c-tests/<dir>/<name>` with `gcc` and `args()`, once per test process: a second
/// build to the same path while another case runs the first would make that exec fail (ETXTBSY).
pub fn build_once(
    dir: &str,
    name: &str,
    src: PathBuf,
    args: impl FnOnce() -> Vec<String>,
) -> PathBuf {
    build_once_with(None, dir, name, src, args)
}

/// [`build_once`] with the compiler `cc` (a wrapper such as `xpushmem-oshcc`) instead of gcc.
pub fn build_once_with(
    cc: Option<&Path>,
    dir: &str,
    name: &str,
    src: PathBuf,
    args: impl FnOnce() -> Vec<String>,
) -> PathBuf {
    static BUILT: std::sync::OnceLock<std::sync::Mutex<std::collections::HashSet<PathBuf>>> =
        std::sync::OnceLock::new();
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let out_dir = profile_dir().join("c-tests").join(dir);
    let out = out_dir.join(name);
    if built.contains(&out) {
        return out;
    }
    std::fs::create_dir_all(&out_dir).expect("out dir");
    // Other test processes may be running `out` (nextest runs tests in processes of their own, several at once):
    // compile beside it and rename over it, which never writes into a file being executed.
    let tmp = out_dir.join(format!("{name}.{}.tmp", std::process::id()));
    match cc {
        Some(cc) => compile(cc, &tmp, &[src], &args()),
        None => gcc(&tmp, &[src], &args()),
    }
    std::fs::rename(&tmp, &out).expect("rename the program into place");
    built.insert(out.clone());
    out
}

/// A directory made once for all the test processes of a run (nextest runs each test in a process of its own,
/// several at once): `c-tests/<name>-<key>`, where `key` hashes the paths, sizes and modification times of `inputs`
/// (new libraries or headers get a new directory). Under an exclusive lock on `c-tests/<name>.lock` (waited for up
/// to two minutes), `make` fills the directory unless it has its `.done` mark; a process that died half-way left no
/// mark, so the next one starts over.
pub fn shared_dir(name: &str, inputs: &[PathBuf], make: impl FnOnce(&Path)) -> PathBuf {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for p in inputs {
        p.hash(&mut h);
        if let Ok(m) = std::fs::metadata(p) {
            m.len().hash(&mut h);
            m.modified().ok().hash(&mut h);
        }
    }
    let base = profile_dir().join("c-tests");
    std::fs::create_dir_all(&base).expect("c-tests dir");
    let dir = base.join(format!("{name}-{:016x}", h.finish()));
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(base.join(format!("{name}.lock")))
        .expect("lock file");
    let start = std::time::Instant::now();
    while let Err(e) =
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive)
    {
        assert!(
            e == rustix::io::Errno::WOULDBLOCK && start.elapsed() < Duration::from_secs(120),
            "locking {}: {e} after {:?}",
            base.join(format!("{name}.lock")).display(),
            start.elapsed()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    if !dir.join(".done").exists() {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("shared dir");
        make(&dir);
        std::fs::write(dir.join(".done"), b"").expect("done mark");
    }
    // The lock goes with `lock`'s descriptor.
    dir
}

/// Every file directly in `dir` (for [`shared_dir`]'s inputs).
pub fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Run `prog` on `n` PEs with a hard timeout; the outcome with captured output.
pub fn run_job(
    prog: &Path,
    n: usize,
    args: &[&str],
    env: &[(&str, &str)],
    timeout_s: u64,
) -> xpushmem_launch::Outcome {
    let mut job = xpushmem_launch::Job::new(n, prog);
    job.args = args.iter().map(|s| s.to_string()).collect();
    job.env = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    job.env.push(("XPUSHMEM_TIMEOUT_MS".into(), "20000".into()));
    // A fixed 64 MiB heap (first chunk and maximum): the programs check the heap's limits.
    job.env
        .push(("XPUSHMEM_SYMMETRIC_SIZE".into(), "64M".into()));
    job.env
        .push(("XPUSHMEM_SYMMETRIC_MAX".into(), "64M".into()));
    job.timeout = Some(Duration::from_secs(timeout_s));
    job.capture = true;
    job.run().expect("the job starts")
}

/// Every PE's output, prefixed, for failure messages.
pub fn all_output(o: &xpushmem_launch::Outcome) -> String {
    o.output
        .iter()
        .map(|(pe, err, l)| format!("[pe {pe}{}] {l}\n", if *err { " err" } else { "" }))
        .collect()
}

/// Assert that the job succeeded, showing all output otherwise.
pub fn assert_success(o: &xpushmem_launch::Outcome, what: &str) {
    assert!(
        o.success(),
        "{what} failed: exits {:?}, first failure {:?}, timed out {}\n{}",
        o.exits,
        o.first_failure,
        o.timed_out,
        all_output(o)
    );
}

/// Run the test program `prog` (named `name`) on `n` PEs and check that it succeeded and that every PE printed
/// its "`name` OK on PE `pe` of `n`" line.
pub fn run_program_ok(prog: &Path, name: &str, n: usize) {
    run_program_ok_with(prog, name, n, &[]);
}

/// [`run_program_ok`] with `env` set in every PE.
pub fn run_program_ok_with(prog: &Path, name: &str, n: usize, env: &[(&str, &str)]) {
    let o = run_job(prog, n, &[], env, 120);
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

/// Names of the functions a shared library exports (`nm -D --defined-only`, text symbols, strong or weak).
pub fn exported_functions(lib: &Path) -> Vec<String> {
    let o = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(lib)
        .output()
        .expect("nm runs");
    assert!(
        o.status.success(),
        "nm failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (_, kind, name) = (it.next()?, it.next()?, it.next()?);
            matches!(kind, "T" | "W").then(|| name.to_string())
        })
        .collect()
}
