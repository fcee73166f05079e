//! The results format shared by `xpushmem-perf` and the C peers: one CSV row per (implementation, benchmark,
//! PE count, size).
//!
//! ```text
//! impl,bench,npes,size,iters,reps,median_us,min_us,median_gbps,best_gbps
//! xpushmem,put_bw,2,65536,4096,5,1.93,1.90,33.9,34.4
//! ```
//! `median_us`/`min_us` are the median and the minimum over the repeats of the time of one operation (for
//! ping-pongs: one way, i.e. half a round trip); `median_gbps`/`best_gbps` are the bytes of one operation divided by
//! those times (GB = 1e9 bytes). Lines starting with `#` are comments.

use crate::error::{PerfError, Result};
use std::io::Write;

/// The header line.
pub const HEADER: &str = "impl,bench,npes,size,iters,reps,median_us,min_us,median_gbps,best_gbps";

/// One measured cell.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Implementation: `xpushmem`, `oshmem`, `mpi`, `mpi-shared`, `mpi-alloc`, `shm-raw`, `memcpy`.
    pub imp: String,
    /// Benchmark name (the same name for the same operation in every implementation).
    pub bench: String,
    /// Number of PEs / ranks / processes.
    pub npes: usize,
    /// Message size in bytes (for collectives: bytes per PE, or per destination for all-to-all).
    pub size: usize,
    /// Timed operations per repeat.
    pub iters: usize,
    /// Repeats.
    pub reps: usize,
    /// Median time of one operation, µs.
    pub median_us: f64,
    /// Smallest time of one operation, µs.
    pub min_us: f64,
    /// Bandwidth at the median time, GB/s.
    pub median_gbps: f64,
    /// Bandwidth at the smallest time, GB/s.
    pub best_gbps: f64,
}

impl Record {
    /// The CSV line (no newline).
    pub fn line(&self) -> String {
        format!(
            "{},{},{},{},{},{},{:.4},{:.4},{:.4},{:.4}",
            self.imp,
            self.bench,
            self.npes,
            self.size,
            self.iters,
            self.reps,
            self.median_us,
            self.min_us,
            self.median_gbps,
            self.best_gbps
        )
    }

    /// Parse one CSV line; `None` for the header, comments and blank lines.
    pub fn parse(line: &str) -> Result<Option<Record>> {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with("impl,") {
            return Ok(None);
        }
        let f: Vec<&str> = l.split(',').map(str::trim).collect();
        if f.len() != 10 {
            return Err(PerfError::Parse(format!(
                "expected 10 fields, got {}: {l}",
                f.len()
            )));
        }
        let u = |i: usize| {
            f[i].parse::<usize>()
                .map_err(|_| PerfError::Parse(format!("field {} is not an integer: {l}", i + 1)))
        };
        let x = |i: usize| {
            f[i].parse::<f64>()
                .map_err(|_| PerfError::Parse(format!("field {} is not a number: {l}", i + 1)))
        };
        Ok(Some(Record {
            imp: f[0].to_string(),
            bench: f[1].to_string(),
            npes: u(2)?,
            size: u(3)?,
            iters: u(4)?,
            reps: u(5)?,
            median_us: x(6)?,
            min_us: x(7)?,
            median_gbps: x(8)?,
            best_gbps: x(9)?,
        }))
    }
}

/// The `*.csv` files directly in `dir`, in name order.
pub fn csv_files(dir: &std::path::Path) -> Result<Vec<std::path::PathBuf>> {
    let rd = std::fs::read_dir(dir).map_err(|e| PerfError::io(dir, e))?;
    let mut files: Vec<std::path::PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "csv"))
        .collect();
    files.sort();
    Ok(files)
}

/// Read every record of every `*.csv` file directly in `dir`, the files in name order.
pub fn read_dir(dir: &std::path::Path) -> Result<Vec<Record>> {
    let mut recs = Vec::new();
    for f in csv_files(dir)? {
        recs.extend(read_file(&f)?);
    }
    Ok(recs)
}

/// Read every record of a CSV file.
pub fn read_file(path: &std::path::Path) -> Result<Vec<Record>> {
    let text = std::fs::read_to_string(path).map_err(|e| PerfError::io(path, e))?;
    let mut v = Vec::new();
    for (i, l) in text.lines().enumerate() {
        match Record::parse(l) {
            Ok(Some(r)) => v.push(r),
            Ok(None) => {}
            Err(e) => {
                return Err(PerfError::Parse(format!(
                    "{}:{}: {e}",
                    path.display(),
                    i + 1
                )))
            }
        }
    }
    Ok(v)
}

/// A CSV file written row by row (flushed after each, so an interrupted run keeps what it measured).
#[derive(Debug)]
pub struct Writer {
    path: std::path::PathBuf,
    file: std::fs::File,
}

impl Writer {
    /// Create (truncate) `path` and write the header.
    pub fn create(path: &std::path::Path) -> Result<Writer> {
        let mut file = std::fs::File::create(path).map_err(|e| PerfError::io(path, e))?;
        writeln!(file, "{HEADER}").map_err(|e| PerfError::io(path, e))?;
        Ok(Writer {
            path: path.to_path_buf(),
            file,
        })
    }

    /// Append one record.
    pub fn write(&mut self, r: &Record) -> Result<()> {
        writeln!(self.file, "{}", r.line())
            .and_then(|_| self.file.flush())
            .map_err(|e| PerfError::io(&self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let r = Record {
            imp: "xpushmem".into(),
            bench: "put_bw".into(),
            npes: 2,
            size: 65536,
            iters: 4096,
            reps: 5,
            median_us: 1.9375,
            min_us: 1.5,
            median_gbps: 33.8,
            best_gbps: 43.7,
        };
        assert_eq!(Record::parse(&r.line()).unwrap(), Some(r));
        assert_eq!(Record::parse(HEADER).unwrap(), None);
        assert_eq!(Record::parse("# note").unwrap(), None);
        assert!(Record::parse("a,b").is_err());
    }
}
