//! The suite's error type: runtime errors, failed data validation, bad command lines, I/O.

use std::fmt;

/// Everything that can stop a benchmark run.
#[derive(Debug)]
pub enum PerfError {
    /// The xpushmem runtime reported an error.
    Shmem(xpushmem::Error),
    /// A benchmark found wrong data (the payload, a counter, a returned value): the run is invalid.
    Validation {
        /// The benchmark.
        bench: String,
        /// Message size in bytes.
        size: usize,
        /// What was wrong.
        detail: String,
    },
    /// A bad command line or option value.
    Usage(String),
    /// Reading or writing a file.
    Io {
        /// The file.
        path: String,
        /// The error.
        err: std::io::Error,
    },
    /// A malformed results file.
    Parse(String),
}

impl fmt::Display for PerfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PerfError::Shmem(e) => write!(f, "xpushmem: {e}"),
            PerfError::Validation {
                bench,
                size,
                detail,
            } => write!(f, "VALIDATION FAILED in {bench} at {size} bytes: {detail}"),
            PerfError::Usage(m) => write!(f, "{m}"),
            PerfError::Io { path, err } => write!(f, "{path}: {err}"),
            PerfError::Parse(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for PerfError {}

impl From<xpushmem::Error> for PerfError {
    fn from(e: xpushmem::Error) -> Self {
        PerfError::Shmem(e)
    }
}

impl PerfError {
    /// An I/O error on `path`.
    pub fn io(path: impl AsRef<std::path::Path>, err: std::io::Error) -> Self {
        PerfError::Io {
            path: path.as_ref().display().to_string(),
            err,
        }
    }
}

/// Result of the suite's functions.
pub type Result<T> = std::result::Result<T, PerfError>;
