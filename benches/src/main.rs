//! `xpushmem-perf`: run the benchmarks (under `xpushmem-run -n N`).
fn main() {}
