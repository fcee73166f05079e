//! xpushmem-perf: the performance suite of xpushmem.
