//! `xpushmem-perf`: the xpushmem performance suite.
//!
//! - `xpushmem-run -n N xpushmem-perf [run] [BENCH|GROUP ...] [options]`: run benchmarks as PEs; PE 0 prints.
//! - `xpushmem-perf list`: the benchmarks.
#![forbid(unsafe_code)]

use xpushmem_perf::{bench, opts, PerfError};

const HELP: &str = "\
xpushmem-perf: the xpushmem performance suite
  xpushmem-run -n N xpushmem-perf [run] [BENCH|GROUP ...] [options]   run benchmarks (PE 0 prints; run --help)
  xpushmem-perf list                                                  list the benchmarks";

fn run(args: &[String]) -> Result<(), PerfError> {
    let o = opts::Opts::parse(args)?;
    let benches = bench::select(&o.select)?;
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
    for b in bench::registry() {
        println!("{:<16} {:<5} {}", b.name, b.group, b.about);
    }
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
