//! Smoke runs of `xpushmem-perf` at 2 PEs with tiny sizes and few iterations: every benchmark completes and
//! validates its data, and a corrupted payload makes every one of them fail loudly. No timing assertions.
//! The EP steps (group `ep`, not part of `all`) run their smallest case (128 tokens x hidden 1024).

use std::time::Duration;
use xpushmem_launch::{Job, Outcome};
use xpushmem_perf::csv;
use xpushmem_perf::suites::registry;

const PERF: &str = env!("CARGO_BIN_EXE_xpushmem-perf");

fn tiny(extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = [
        "-b", "8", "-e", "4K", "-f", "8", "-i", "20", "-w", "2", "-r", "2", "-W", "4", "--budget",
        "64K",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

/// The EP steps' options: the smallest case only, two steps per repeat.
fn ep_tiny(extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = [
        "-b",
        "256K",
        "-e",
        "256K",
        "-w",
        "1",
        "-r",
        "2",
        "--coll-iters",
        "2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

/// The options a benchmark's smoke run takes.
fn args_for(group: &str, extra: &[&str]) -> Vec<String> {
    if group == "ep" {
        ep_tiny(extra)
    } else {
        tiny(extra)
    }
}

fn launch(n: usize, args: Vec<String>) -> (Outcome, String) {
    let mut job = Job::new(n, PERF);
    job.args = args;
    job.timeout = Some(Duration::from_secs(120));
    job.capture = true;
    job.env = vec![
        ("XPUSHMEM_TIMEOUT_MS".into(), "60000".into()),
        ("XPUSHMEM_SYMMETRIC_SIZE".into(), "64M".into()),
    ];
    let out = job.run().expect("launch xpushmem-perf");
    let text: String = (0..n).map(|pe| out.output_of(pe)).collect();
    (out, text)
}

fn scratch(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("xpushmem-perf-{}-{name}", std::process::id()))
}

/// Run `args` at 2 PEs with `--csv` into the scratch file `file`; it must succeed. The CSV's rows and the
/// PEs' output.
fn run_with_csv(file: &str, mut args: Vec<String>) -> (Vec<csv::Record>, String) {
    let path = scratch(file);
    args.push("--csv".into());
    args.push(path.display().to_string());
    let (out, text) = launch(2, args);
    assert!(
        out.success() && !out.timed_out,
        "xpushmem-perf failed ({:?}):\n{text}",
        out.first_failure
    );
    let rows = csv::read_file(&path).expect("CSV written by PE 0");
    let _ = std::fs::remove_file(&path);
    (rows, text)
}

#[test]
fn every_benchmark_runs_and_validates_2pe() {
    let (rows, text) = run_with_csv("smoke.csv", tiny(&["all"]));
    for b in registry()
        .iter()
        .filter(|b| b.min_pes <= 2 && b.group != "ep")
    {
        let mine: Vec<_> = rows.iter().filter(|r| r.bench == b.name).collect();
        assert!(!mine.is_empty(), "no results for {}:\n{text}", b.name);
        for r in mine {
            assert_eq!((r.imp.as_str(), r.npes, r.reps), ("xpushmem", 2, 2));
            assert!(
                r.median_us.is_finite() && r.median_us >= r.min_us && r.min_us >= 0.0,
                "bad times in {r:?}"
            );
        }
        assert!(text.contains(&format!("# {} (2 PEs)", b.name)), "{text}");
    }
}

#[test]
fn ep_steps_run_and_validate_2pe() {
    let (rows, text) = run_with_csv("ep.csv", ep_tiny(&["ep"]));
    let ep: Vec<&str> = registry()
        .iter()
        .filter(|b| b.group == "ep")
        .map(|b| b.name)
        .collect();
    assert_eq!(ep.len(), 3, "{ep:?}");
    let got: Vec<(&str, usize, usize)> = rows
        .iter()
        .map(|r| (r.bench.as_str(), r.size, r.iters))
        .collect();
    // One row per EP step at the one case within -b..-e (128 x 1024 x 2 bytes), nothing else.
    let want: Vec<(&str, usize, usize)> = ep.iter().map(|&b| (b, 128 * 1024 * 2, 2)).collect();
    assert_eq!(got, want, "{text}");
}

#[test]
fn corrupted_data_fails_every_benchmark_2pe() {
    for b in registry().iter().filter(|b| b.min_pes <= 2) {
        let (out, text) = launch(2, args_for(b.group, &[b.name, "--inject-fault", "--quiet"]));
        assert!(
            !out.success() && !out.timed_out,
            "{} passed with corrupted data:\n{text}",
            b.name
        );
        assert!(
            text.contains("VALIDATION FAILED") && text.contains(b.name),
            "{} failed without naming the validation:\n{text}",
            b.name
        );
    }
}

#[test]
fn list_and_bad_options() {
    let o = std::process::Command::new(PERF)
        .arg("list")
        .output()
        .expect("run list");
    let text = String::from_utf8_lossy(&o.stdout);
    for b in registry() {
        assert!(text.contains(b.name), "{text}");
    }
    let o = std::process::Command::new(PERF)
        .args(["run", "-b", "2M", "-e", "1M"])
        .output()
        .expect("run bad");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("begin <= end"));
}
