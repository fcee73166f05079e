//! The suite registry: every benchmark of the groups (`rma`, `sync`, `coll`, `ops`, `ep`) in run order, and the
//! selection by name or group (`all` leaves out `ep`, issue 29's MoE steps, which run by name or group). It sits above the suites, which use only the types of [`crate::bench`], so the
//! registry and the suites no longer import each other.

use crate::bench::Bench;
use crate::error::{PerfError, Result};

/// The groups (a group may be empty in a build where its API has not landed yet).
pub const GROUPS: &[&str] = &["rma", "sync", "coll", "ops", "ep"];

/// Every benchmark, in run order.
pub fn registry() -> Vec<Bench> {
    let mut v = Vec::new();
    v.extend_from_slice(crate::rma::BENCHES);
    v.extend_from_slice(crate::sync::BENCHES);
    v.extend(crate::coll::benches());
    v.extend(crate::ops::benches());
    v.extend(crate::ep::benches());
    v
}

/// The benchmarks named by `select` (names or groups; empty or `all` = every one but the `ep` group's, whose
/// 4096-token steps would dominate a sweep), in registry order.
pub fn select(select: &[String]) -> Result<Vec<Bench>> {
    let all = registry();
    let every = select.is_empty() || select.iter().any(|s| s == "all");
    if every && select.iter().all(|s| s == "all") {
        return Ok(all.into_iter().filter(|b| b.group != "ep").collect());
    }
    for s in select {
        let group = GROUPS.contains(&s.as_str());
        if !group && !all.iter().any(|b| b.name == s) {
            let names: Vec<&str> = all.iter().map(|b| b.name).collect();
            return Err(PerfError::Usage(format!(
                "unknown benchmark or group `{s}`; groups: all rma sync coll ops ep; benchmarks: {}",
                names.join(" ")
            )));
        }
    }
    Ok(all
        .into_iter()
        .filter(|b| {
            (every && b.group != "ep") || select.iter().any(|s| s == b.name || s == b.group)
        })
        .collect())
}
