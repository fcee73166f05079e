//! Collectives over teams (team barrier, broadcast, all-to-all, fcollect, reduce): latency and bandwidth versus
//! size, timed OSU-style (each call timed alone, a barrier between calls, slowest PE).
//!
//! The runtime's collectives have not landed yet; this list fills in as they do.

use crate::bench::Bench;

/// The collective benchmarks available in this build.
pub fn benches() -> Vec<Bench> {
    Vec::new()
}
