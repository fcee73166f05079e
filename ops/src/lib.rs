//! PyTorch's NVSHMEM op family over xpushmem (work in progress).
#![warn(missing_docs)]
