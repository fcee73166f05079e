//! The one configuration table: every `XPUSHMEM_*` environment variable, its default and its meaning.
//!
//! [`VARS`] is the source of truth; [`Config::from_env`] parses it once per [`crate::init`], and `xpushmem-info`
//! prints it. A variable with a value that cannot be parsed is an error naming the variable, never a silent default.

use crate::error::{Error, Result};
use std::time::Duration;

/// One documented environment variable.
#[derive(Debug, Clone, Copy)]
pub struct VarSpec {
    /// Full name, `XPUSHMEM_...`.
    pub name: &'static str,
    /// Default value, as text.
    pub default: &'static str,
    /// One-line description.
    pub doc: &'static str,
}

/// Every environment variable the library reads.
pub const VARS: &[VarSpec] = &[
    VarSpec {
        name: "XPUSHMEM_SYMMETRIC_SIZE",
        default: "1G",
        doc: "size of each PE's symmetric heap; bytes or with a K/M/G/T suffix (powers of 1024); reserved lazily",
    },
    VarSpec {
        name: "XPUSHMEM_TIMEOUT_MS",
        default: "300000",
        doc: "limit for every blocking wait (barriers, wait_until, signal waits, bootstrap) in ms; 0 = wait forever",
    },
    VarSpec {
        name: "XPUSHMEM_CHECK_SYMMETRY",
        default: "1",
        doc: "cross-check the arguments of collective malloc/calloc/align/free on every PE (0 = off)",
    },
    VarSpec {
        name: "XPUSHMEM_LOG",
        default: "warn",
        doc: "log level on stderr: off, error, warn, info, debug, trace",
    },
    VarSpec {
        name: "XPUSHMEM_BOOTSTRAP",
        default: "auto",
        doc: "how PEs find each other: auto, uid, mpi, single (auto: uid if XPUSHMEM_BOOTSTRAP_UID is set, else mpi under mpirun when built with it, else single)",
    },
    VarSpec {
        name: "XPUSHMEM_BOOTSTRAP_UID",
        default: "",
        doc: "unique ID of the rendezvous (set by xpushmem-run, or by the program from get_unique_id)",
    },
    VarSpec {
        name: "XPUSHMEM_BOOTSTRAP_RANK",
        default: "",
        doc: "this PE's number for the uid bootstrap",
    },
    VarSpec {
        name: "XPUSHMEM_BOOTSTRAP_NRANKS",
        default: "",
        doc: "number of PEs for the uid bootstrap",
    },
    VarSpec {
        name: "XPUSHMEM_BOOTSTRAP_ADDR",
        default: "127.0.0.1",
        doc: "IP address the uid rendezvous listens on (use a routable address for multi-node jobs)",
    },
    VarSpec {
        name: "XPUSHMEM_SPIN_COUNT",
        default: "auto",
        doc: "busy-poll iterations of a wait before it starts yielding; auto: 4000 when every PE of the node has a CPU of its own, 0 when the node is oversubscribed (a spinning PE would hold the CPU its partner needs)",
    },
    VarSpec {
        name: "XPUSHMEM_YIELD_COUNT",
        default: "200",
        doc: "sched_yield iterations of a wait before it starts sleeping",
    },
    VarSpec {
        name: "XPUSHMEM_SLEEP_MAX_US",
        default: "200",
        doc: "longest sleep between polls of a wait, in microseconds (sleeps grow from 1 us to this)",
    },
    VarSpec {
        name: "XPUSHMEM_HEAP",
        default: "host",
        doc: "where the symmetric heap lives: host (memfd, CPU PEs) or device (Level Zero device memory, one device per PE)",
    },
    VarSpec {
        name: "XPUSHMEM_TRANSPORT",
        default: "auto",
        doc: "auto (each peer through the transport that reaches it) or deferred (test only: writes to other PEs wait in a queue until quiet, fence or completion, and land in reverse order between fences)",
    },
    VarSpec {
        name: "XPUSHMEM_DEVICE",
        default: "auto",
        doc: "Level Zero device of this PE for a device heap: auto (local rank modulo the device count) or a device number",
    },
    VarSpec {
        name: "XPUSHMEM_IPC",
        default: "auto",
        doc: "how device-heap descriptors reach node peers: auto or socket (SCM_RIGHTS over the authenticated node socket), pidfd (pidfd_getfd; ptrace permission granted only while descriptors are taken)",
    },
    VarSpec {
        name: "XPUSHMEM_ERROR_MODE",
        default: "return",
        doc: "C ABI only: return (error codes + xpushmem_last_error) or abort (print and abort, classic SHMEM); the native xpushmem_* API defaults to return, the OpenSHMEM shmem_* layer to abort unless this is set",
    },
    VarSpec {
        name: "XPUSHMEM_TEAMS_MAX",
        default: "64",
        doc: "team slots in the symmetric heap (2..4096; TEAM_WORLD and TEAM_SHARED take two); more live teams is an error",
    },
    VarSpec {
        name: "XPUSHMEM_BARRIER_ALGORITHM",
        default: "auto",
        doc: "team barrier/sync algorithm: auto, linear, dissemination, tree",
    },
    VarSpec {
        name: "XPUSHMEM_BROADCAST_ALGORITHM",
        default: "auto",
        doc: "broadcast algorithm: auto, linear, binomial, pipelined",
    },
    VarSpec {
        name: "XPUSHMEM_COLLECT_ALGORITHM",
        default: "auto",
        doc: "fcollect/collect algorithm: auto, direct, ring",
    },
    VarSpec {
        name: "XPUSHMEM_ALLTOALL_ALGORITHM",
        default: "auto",
        doc: "alltoall/alltoalls algorithm: auto, pairwise, direct",
    },
    VarSpec {
        name: "XPUSHMEM_REDUCE_ALGORITHM",
        default: "auto",
        doc: "reduction algorithm: auto, linear, recursive-doubling, ring",
    },
    VarSpec {
        name: "XPUSHMEM_REDUCE_SCATTER_ALGORITHM",
        default: "auto",
        doc: "reduce_scatter algorithm: auto, linear",
    },
    VarSpec {
        name: "XPUSHMEM_SCAN_ALGORITHM",
        default: "auto",
        doc: "inscan/exscan algorithm: auto, linear, chain",
    },
    VarSpec {
        name: "XPUSHMEM_COLL_CHUNK_SIZE",
        default: "64K",
        doc: "chunk of the pipelined broadcast; bytes or with a K/M/G suffix (at least 64)",
    },
];

/// Parsed configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Bytes of symmetric heap per PE.
    pub symmetric_size: usize,
    /// Limit of every blocking wait; `None` = forever.
    pub timeout: Option<Duration>,
    /// Whether collective allocations are cross-checked.
    pub check_symmetry: bool,
    /// Log level name.
    pub log: String,
    /// Bootstrap method name.
    pub bootstrap: String,
    /// Wait back-off: spins before yielding; `None` = auto (decided at init from the node's PE and CPU counts).
    pub spin_count: Option<u32>,
    /// Wait back-off: yields before sleeping.
    pub yield_count: u32,
    /// Wait back-off: longest sleep.
    pub sleep_max: Duration,
    /// C ABI error mode: true = abort on error.
    pub abort_on_error: bool,
}

/// The value of a variable in the environment, or `None` when unset or empty.
pub fn env_value(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn raw(name: &'static str) -> String {
    env_value(name).unwrap_or_else(|| spec(name).default.to_string())
}

fn spec(name: &str) -> &'static VarSpec {
    VARS.iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| unreachable!("config variable {name} missing from VARS"))
}

fn bad(var: &'static str, value: &str, reason: impl Into<String>) -> Error {
    Error::Config {
        var,
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// Parse a size such as `4096`, `512M`, `2G`, `1.5G` (binary units; a trailing `B`/`iB` is accepted).
pub fn parse_size(text: &str) -> Option<usize> {
    let t = text.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix("ib"))
        .or_else(|| t.strip_suffix('B'))
        .or_else(|| t.strip_suffix('b'))
        .unwrap_or(t);
    let (num, mult) = match t.chars().last()? {
        'k' | 'K' => (&t[..t.len() - 1], 1u128 << 10),
        'm' | 'M' => (&t[..t.len() - 1], 1u128 << 20),
        'g' | 'G' => (&t[..t.len() - 1], 1u128 << 30),
        't' | 'T' => (&t[..t.len() - 1], 1u128 << 40),
        _ => (t, 1u128),
    };
    let num = num.trim();
    let bytes = if let Ok(n) = num.parse::<u128>() {
        n.checked_mul(mult)?
    } else {
        let f: f64 = num.parse().ok()?;
        if !(f.is_finite() && f >= 0.0) {
            return None;
        }
        (f * mult as f64) as u128
    };
    usize::try_from(bytes).ok()
}

fn parse_u64(var: &'static str) -> Result<u64> {
    let v = raw(var);
    v.trim()
        .parse::<u64>()
        .map_err(|_| bad(var, &v, "expected a non-negative integer"))
}

fn parse_bool(var: &'static str) -> Result<bool> {
    let v = raw(var);
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(bad(var, &v, "expected 0/1, true/false, yes/no or on/off")),
    }
}

fn parse_choice(var: &'static str, allowed: &[&str]) -> Result<String> {
    let v = raw(var).trim().to_ascii_lowercase();
    if allowed.contains(&v.as_str()) {
        Ok(v)
    } else {
        Err(bad(
            var,
            &v,
            format!("expected one of {}", allowed.join(", ")),
        ))
    }
}

/// Largest symmetric heap we accept (the mapping of every node peer must fit the address space).
pub const MAX_SYMMETRIC_SIZE: usize = 1 << 44;

impl Config {
    /// Read and validate every variable of [`VARS`].
    pub fn from_env() -> Result<Config> {
        let size_text = raw("XPUSHMEM_SYMMETRIC_SIZE");
        let symmetric_size = parse_size(&size_text).ok_or_else(|| {
            bad(
                "XPUSHMEM_SYMMETRIC_SIZE",
                &size_text,
                "expected bytes or a number with K/M/G/T suffix, e.g. 512M or 2G",
            )
        })?;
        if !(4096..=MAX_SYMMETRIC_SIZE).contains(&symmetric_size) {
            return Err(bad(
                "XPUSHMEM_SYMMETRIC_SIZE",
                &size_text,
                format!("must be in [4096, {MAX_SYMMETRIC_SIZE}] bytes"),
            ));
        }
        let timeout_ms = parse_u64("XPUSHMEM_TIMEOUT_MS")?;
        let sleep_us = parse_u64("XPUSHMEM_SLEEP_MAX_US")?.clamp(1, 1_000_000);
        let to_u32 = |var: &'static str| -> Result<u32> {
            let n = parse_u64(var)?;
            u32::try_from(n).map_err(|_| bad(var, &n.to_string(), "must fit in 32 bits"))
        };
        Ok(Config {
            symmetric_size,
            timeout: (timeout_ms > 0).then(|| Duration::from_millis(timeout_ms)),
            check_symmetry: parse_bool("XPUSHMEM_CHECK_SYMMETRY")?,
            log: parse_choice(
                "XPUSHMEM_LOG",
                &["off", "error", "warn", "info", "debug", "trace"],
            )?,
            bootstrap: parse_choice("XPUSHMEM_BOOTSTRAP", &["auto", "uid", "mpi", "single"])?,
            spin_count: match raw("XPUSHMEM_SPIN_COUNT").trim() {
                "auto" => None,
                _ => Some(to_u32("XPUSHMEM_SPIN_COUNT")?),
            },
            yield_count: to_u32("XPUSHMEM_YIELD_COUNT")?,
            sleep_max: Duration::from_micros(sleep_us),
            abort_on_error: parse_choice("XPUSHMEM_ERROR_MODE", &["return", "abort"])? == "abort",
        })
    }

    /// Rows of (name, current value or empty, default, doc), for `xpushmem-info`.
    pub fn table() -> Vec<(&'static str, Option<String>, &'static str, &'static str)> {
        VARS.iter()
            .map(|v| (v.name, env_value(v.name), v.default, v.doc))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("512M"), Some(512 << 20));
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size("2GiB"), Some(2 << 30));
        assert_eq!(parse_size("64k"), Some(64 << 10));
        assert_eq!(parse_size("1.5G"), Some(3 << 29));
        assert_eq!(parse_size("-1"), None);
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size(""), None);
    }

    #[test]
    fn every_var_has_a_unique_name_and_docs() {
        let mut names: Vec<_> = VARS.iter().map(|v| v.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), VARS.len());
        assert!(VARS
            .iter()
            .all(|v| v.name.starts_with("XPUSHMEM_") && !v.doc.is_empty()));
    }

    #[test]
    fn docs_env_md_lists_every_variable_with_its_default() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/ENV.md"))
            .expect("docs/ENV.md");
        for v in VARS {
            let row = format!("| `{}` | `{}` |", v.name, v.default);
            assert!(
                doc.contains(&row),
                "docs/ENV.md lacks the row for {} (expected to contain {row:?})",
                v.name
            );
        }
    }
}
