//! The PyTorch op family of `xpushmem-ops` (`all_to_all_vdev`, `_2d`): throughput versus size.
//!
//! The ops crate has not landed yet; this list fills in as it does.

use crate::bench::Bench;

/// The op benchmarks available in this build.
pub fn benches() -> Vec<Bench> {
    Vec::new()
}
