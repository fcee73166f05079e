//! The suite registry: every benchmark of the groups (`rma`, `sync`, `coll`, `ops`) in run order, and the
//! selection by name or group. It sits above the suites, which use only the types of [`crate::bench`], so the
//! registry and the suites no longer import each other.

use crate::bench::Bench;
use crate::error::{PerfError, Result};

/// The groups (a group may be empty in a build where its API has not landed yet).
pub const GROUPS: &[&str] = &["rma", "sync", "coll", "ops"];

/// Every benchmark, in run order.
pub fn registry() -> Vec<Bench> {
    let mut v = Vec::new();
    v.extend_from_slice(crate::rma::BENCHES);
    v.extend_from_slice(crate::sync::BENCHES);
    v.extend(crate::coll::benches());
    v.extend(crate::ops::benches());
    v
}

/// The benchmarks named by `select` (names or groups; empty or `all` = every one), in registry order.
pub fn select(select: &[String]) -> Result<Vec<Bench>> {
    let all = registry();
    if select.is_empty() || select.iter().any(|s| s == "all") {
        return Ok(all);
    }
    for s in select {
        let group = GROUPS.contains(&s.as_str());
        if !group && !all.iter().any(|b| b.name == s) {
            let names: Vec<&str> = all.iter().map(|b| b.name).collect();
            return Err(PerfError::Usage(format!(
                "unknown benchmark or group `{s}`; groups: all rma sync coll ops; benchmarks: {}",
                names.join(" ")
            )));
        }
    }
    Ok(all
        .into_iter()
        .filter(|b| select.iter().any(|s| s == b.name || s == b.group))
        .collect())
}
