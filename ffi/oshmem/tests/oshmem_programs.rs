//! The OpenSHMEM layer: `shmem.h` declares exactly what `libxpushmem_oshmem` exports; classic OpenSHMEM programs
//! written against plain `shmem.h` build with the pkg-config line of an installed tree (`ffi/install.sh`) and
//! pass at 2 and 4 PEs under the launcher.

#[path = "../../tests/cdecl/mod.rs"]
mod cdecl;
#[path = "../../tests/support/mod.rs"]
mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use support::*;

#[test]
fn oshmem_header_declares_exactly_the_exported_functions() {
    let header = cdecl::oshmem_header();
    let declared: BTreeSet<String> = cdecl::declared_functions(&header)
        .into_iter()
        .filter(|n| n.starts_with("shmem_"))
        .collect();
    let exported: BTreeSet<String> = support::exported_functions(&support::built_lib("libxpushmem_oshmem.so"))
        .into_iter()
        .filter(|n| n.starts_with("shmem_"))
        .collect();
    let missing: Vec<_> = exported.difference(&declared).collect();
    let extra: Vec<_> = declared.difference(&exported).collect();
    assert!(missing.is_empty(), "exported but not declared in shmem.h: {missing:?}");
    assert!(extra.is_empty(), "declared in shmem.h but not exported: {extra:?}");
}
