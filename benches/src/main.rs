//! `xpushmem-perf`: the xpushmem performance suite.
//!
//! - `xpushmem-run -n N xpushmem-perf [run] [BENCH|GROUP ...] [options]`: run benchmarks as PEs; PE 0 prints.
//! - `xpushmem-perf list`: the benchmarks.
//! - `xpushmem-perf report --results DIR --md FILE --png-dir DIR [--analysis FILE]`: the performance page.
//! - `xpushmem-perf scale-report --results DIR --md FILE [--png-dir DIR]`: the page's scaling section.
//! - `xpushmem-perf plot --bench NAME [--npes N] [--metric lat|bw] --out FILE.png CSV...`: one chart.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use xpushmem_perf::plot::{Chart, Series};
use xpushmem_perf::{bench, csv, opts, report, suites, PerfError};

const HELP: &str = "\
xpushmem-perf: the xpushmem performance suite
  xpushmem-run -n N xpushmem-perf [run] [BENCH|GROUP ...] [options]   run benchmarks (PE 0 prints; run --help)
  xpushmem-perf list                                                  list the benchmarks
  xpushmem-perf report --results DIR --md FILE --png-dir DIR [--analysis FILE]
                                                                      write the performance page and its charts
  xpushmem-perf plot --bench NAME [--npes N] [--metric lat|bw] --out FILE.png CSV...
                                                                      chart one benchmark of every impl in the CSVs
  xpushmem-perf fabric-report --results DIR --md FILE                 put the fabric section into the page
  xpushmem-perf scale-report --results DIR --md FILE [--png-dir DIR]  put the scaling section (2-16 PEs) into the page";

fn run(args: &[String]) -> Result<(), PerfError> {
    let o = opts::Opts::parse(args)?;
    let benches = suites::select(&o.select)?;
    let sh = xpushmem::init()?;
    xpushmem_perf::bind(o.bind, sh.my_pe(), sh.n_pes());
    if let Err(e) = bench::run(&sh, &o, &benches) {
        // Leave at once, without finalizing: peers blocked in a collective learn of the loss (or the launcher
        // stops them) instead of matching this PE's finalize barrier against their next barrier.
        eprintln!("xpushmem-perf: PE {}: {e}", sh.my_pe());
        std::process::exit(1);
    }
    sh.finalize()?;
    Ok(())
}

fn list() {
    for b in suites::registry() {
        println!("{:<20} {:<5} {}", b.name, b.group, b.about);
    }
}

/// `--key value` pairs.
type Flags = Vec<(String, String)>;

/// `--key value` pairs and positional arguments.
fn kv(args: &[String]) -> Result<(Flags, Vec<String>), PerfError> {
    let mut flags = Vec::new();
    let mut pos = Vec::new();
    let mut i = 0;
    while i < args.len() {
        if let Some(k) = args[i].strip_prefix("--") {
            let v = args
                .get(i + 1)
                .ok_or_else(|| PerfError::Usage(format!("--{k} needs a value\n{HELP}")))?;
            flags.push((k.to_string(), v.clone()));
            i += 2;
        } else {
            pos.push(args[i].clone());
            i += 1;
        }
    }
    Ok((flags, pos))
}

fn flag(flags: &[(String, String)], k: &str) -> Option<String> {
    flags
        .iter()
        .rev()
        .find(|(x, _)| x == k)
        .map(|(_, v)| v.clone())
}

fn need(flags: &[(String, String)], k: &str) -> Result<String, PerfError> {
    flag(flags, k).ok_or_else(|| PerfError::Usage(format!("missing --{k}\n{HELP}")))
}

fn do_report(args: &[String]) -> Result<(), PerfError> {
    let (f, _) = kv(args)?;
    report::write(&report::ReportArgs {
        results: need(&f, "results")?.into(),
        md: need(&f, "md")?.into(),
        png_dir: need(&f, "png-dir")?.into(),
        analysis: flag(&f, "analysis").map(PathBuf::from),
    })
}

fn do_scale_report(args: &[String]) -> Result<(), PerfError> {
    let (f, _) = kv(args)?;
    let png = flag(&f, "png-dir").map(PathBuf::from);
    let results = PathBuf::from(need(&f, "results")?);
    let md = PathBuf::from(need(&f, "md")?);
    xpushmem_perf::scale::report(&results, &md, png.as_deref())
}

fn do_plot(args: &[String]) -> Result<(), PerfError> {
    let (f, files) = kv(args)?;
    let name = need(&f, "bench")?;
    let out = need(&f, "out")?;
    let npes: usize = flag(&f, "npes")
        .unwrap_or_else(|| "2".into())
        .parse()
        .map_err(|_| PerfError::Usage("--npes: expected an integer".into()))?;
    let bw = match flag(&f, "metric").as_deref() {
        None | Some("lat") => false,
        Some("bw") => true,
        Some(m) => return Err(PerfError::Usage(format!("--metric {m}: lat or bw"))),
    };
    let mut recs = Vec::new();
    for p in &files {
        recs.extend(csv::read_file(std::path::Path::new(p))?);
    }
    let mut imps: Vec<String> = recs
        .iter()
        .filter(|r| r.bench == name && r.npes == npes)
        .map(|r| r.imp.clone())
        .collect();
    imps.dedup();
    imps.sort_by_key(|i| (i != "xpushmem", i.clone()));
    imps.dedup();
    let series = imps
        .iter()
        .map(|imp| Series {
            label: imp.clone(),
            points: recs
                .iter()
                .filter(|r| &r.imp == imp && r.bench == name && r.npes == npes)
                .map(|r| (r.size, if bw { r.median_gbps } else { r.median_us }))
                .collect(),
            reference: imp == "memcpy" || imp == "shm-raw",
        })
        .collect();
    let chart = Chart {
        title: format!("{name} - {npes} PEs"),
        y_label: if bw {
            "GB/s (higher is better)".into()
        } else {
            "us per operation (lower is better)".into()
        },
        series,
    };
    chart.write_png(std::path::Path::new(&out))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let r = match args.first().map(String::as_str) {
        Some("list") => {
            list();
            Ok(())
        }
        Some("help") | Some("-h") | Some("--help") => {
            println!("{HELP}");
            Ok(())
        }
        Some("report") => do_report(&args[1..]),
        Some("plot") => do_plot(&args[1..]),
        Some("fabric-report") => xpushmem_perf::fabric::report(&args[1..]),
        Some("scale-report") => do_scale_report(&args[1..]),
        Some("run") => run(&args[1..]),
        _ => run(&args),
    };
    if let Err(e) = r {
        eprintln!("xpushmem-perf: {e}");
        std::process::exit(match e {
            PerfError::Usage(_) => 2,
            _ => 1,
        });
    }
}
