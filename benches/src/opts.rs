//! Command-line options of `xpushmem-perf run` (OSU-style `-b/-e/-f`, `-i`, `-w`, plus repeats and windows).

use crate::error::{PerfError, Result};
use crate::stats::parse_size;

/// How PEs are bound to CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bind {
    /// Like Open MPI's default: one core per PE when there are at least as many allowed CPUs as PEs, else none.
    Auto,
    /// PE `i` on the `i mod ncpus`-th allowed CPU, always.
    Core,
    /// No binding.
    None,
}

/// Options of a benchmark run.
#[derive(Debug, Clone)]
pub struct Opts {
    /// Benchmarks or groups to run (`all`, `rma`, `sync`, `coll`, `ops`, or names); empty means `all`.
    pub select: Vec<String>,
    /// Smallest message size in bytes (`-b`).
    pub begin: usize,
    /// Largest message size in bytes (`-e`).
    pub end: usize,
    /// Size factor between steps (`-f`).
    pub factor: usize,
    /// Timed operations per repeat at small sizes (`-i`); large sizes run fewer (see `budget`).
    pub iters: usize,
    /// Cap of the timed operations per repeat of the collectives and ops (`--coll-iters`, like OSU's 1000).
    pub coll_iters: usize,
    /// Warm-up operations before the repeats (`-w`).
    pub warmup: usize,
    /// Repeats per size (`-r`); the median and minimum over them are reported.
    pub reps: usize,
    /// Operations per window of the bandwidth benchmarks (`-W`).
    pub window: usize,
    /// Bytes one repeat may move at most (`--budget`): `iters = clamp(budget / bytes_per_op, 2, iters)`.
    pub budget: usize,
    /// Write the results to this CSV file (PE 0).
    pub csv: Option<std::path::PathBuf>,
    /// CPU binding.
    pub bind: Bind,
    /// Print nothing but errors (CSV still written).
    pub quiet: bool,
    /// Test hook: corrupt the data each benchmark validates, to prove that validation fails loudly.
    pub inject_fault: bool,
    /// The `impl` column of the CSV (default `xpushmem`; e.g. a label for a run with non-default settings).
    pub label: String,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            select: Vec::new(),
            begin: 8,
            end: 64 << 20,
            factor: 2,
            iters: 10000,
            coll_iters: 1000,
            warmup: 100,
            reps: 5,
            window: 64,
            budget: 128 << 20,
            csv: None,
            bind: Bind::Auto,
            quiet: false,
            inject_fault: false,
            label: "xpushmem".into(),
        }
    }
}

/// Usage text of `run`.
pub const USAGE: &str = "\
usage: xpushmem-run -n N xpushmem-perf [run] [BENCH|GROUP ...] [options]
  BENCH|GROUP   benchmark names (see `xpushmem-perf list`) or groups: all (default; every group but ep), rma, sync, coll, ops, ep
  -b SIZE       smallest message size (default 8; K/M/G suffixes)
  -e SIZE       largest message size (default 64M)
  -f N          size factor (default 2)
  -i N          timed operations per repeat at small sizes (default 10000)
  --coll-iters N  at most this many timed calls per repeat for collectives and ops (default 1000)
  -w N          warm-up operations (default 100)
  -r N          repeats per size; median and min are reported (default 5)
  -W N          window of non-blocking operations in the bandwidth benchmarks (default 64)
  --budget SIZE bytes one repeat moves at most; large sizes run budget/size operations (default 128M, min 2)
  --csv FILE    also write the results as CSV (PE 0)
  --label NAME  the impl column of the CSV (default xpushmem)
  --bind MODE   auto (default: one core per PE if PEs <= CPUs, like Open MPI), core, none
  --quiet       no table output
other commands: xpushmem-perf list | report ... | plot ...   (xpushmem-perf help)";

impl Opts {
    /// Parse the arguments after `run`.
    pub fn parse(args: &[String]) -> Result<Opts> {
        let mut o = Opts::default();
        let mut i = 0;
        let bad =
            |opt: &str, v: &str, why: &str| PerfError::Usage(format!("{opt} {v}: {why}\n{USAGE}"));
        while i < args.len() {
            let a = args[i].as_str();
            let val = |i: usize| -> Result<String> {
                args.get(i + 1)
                    .cloned()
                    .ok_or_else(|| PerfError::Usage(format!("{a} needs a value\n{USAGE}")))
            };
            let size = |i: usize| -> Result<usize> {
                let v = val(i)?;
                parse_size(&v).ok_or_else(|| bad(a, &v, "expected a byte count like 8, 64K, 64M"))
            };
            let count = |i: usize, min: usize| -> Result<usize> {
                let v = val(i)?;
                v.parse::<usize>()
                    .ok()
                    .filter(|&n| n >= min)
                    .ok_or_else(|| bad(a, &v, &format!("expected an integer >= {min}")))
            };
            match a {
                "-b" => o.begin = size(i)?,
                "-e" => o.end = size(i)?,
                "-f" => o.factor = count(i, 2)?,
                "-i" => o.iters = count(i, 1)?,
                "--coll-iters" => o.coll_iters = count(i, 1)?,
                "-w" => o.warmup = count(i, 0)?,
                "-r" => o.reps = count(i, 1)?,
                "-W" => o.window = count(i, 1)?,
                "--budget" => o.budget = size(i)?,
                "--csv" => o.csv = Some(val(i)?.into()),
                "--label" => o.label = val(i)?,
                "--bind" => {
                    let v = val(i)?;
                    o.bind = match v.as_str() {
                        "auto" => Bind::Auto,
                        "core" => Bind::Core,
                        "none" => Bind::None,
                        _ => return Err(bad(a, &v, "expected auto, core or none")),
                    }
                }
                "--quiet" => {
                    o.quiet = true;
                    i += 1;
                    continue;
                }
                "--inject-fault" => {
                    o.inject_fault = true;
                    i += 1;
                    continue;
                }
                "-h" | "--help" => return Err(PerfError::Usage(USAGE.to_string())),
                _ if a.starts_with('-') => {
                    return Err(PerfError::Usage(format!("unknown option {a}\n{USAGE}")))
                }
                _ => {
                    o.select.push(a.to_string());
                    i += 1;
                    continue;
                }
            }
            i += 2;
        }
        if o.begin == 0 || o.begin > o.end {
            return Err(PerfError::Usage(format!(
                "-b {} -e {}: need 0 < begin <= end",
                o.begin, o.end
            )));
        }
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Opts> {
        Opts::parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn parses() {
        let o =
            p("put_bw rma -b 1K -e 1M -f 4 -i 50 -w 5 -r 3 -W 16 --csv x.csv --bind none").unwrap();
        assert_eq!(o.select, vec!["put_bw", "rma"]);
        assert_eq!((o.begin, o.end, o.factor), (1024, 1 << 20, 4));
        assert_eq!((o.iters, o.warmup, o.reps, o.window), (50, 5, 3, 16));
        assert_eq!(o.bind, Bind::None);
        assert!(p("-b 2M -e 1M").is_err());
        assert!(p("-i 0").is_err());
        assert!(p("--what").is_err());
        assert!(p("-e").is_err());
    }
}
