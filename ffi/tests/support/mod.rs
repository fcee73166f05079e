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
    let mut cmd = Command::new(std::env::var("CC").unwrap_or_else(|_| "gcc".into()));
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
    gcc(&out, &[src], &args());
    built.insert(out.clone());
    out
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
    let o = run_job(prog, n, &[], &[], 120);
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
