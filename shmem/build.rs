//! Builds the fabric transport when `fabric-sys` found libfabric (its `links` metadata `DEP_FABRIC_AVAILABLE`), and
//! the PMIx bootstrap when `pmix-sys` found PMIx (`DEP_PMIX_AVAILABLE`).
fn main() {
    println!("cargo::rustc-check-cfg=cfg(xpushmem_fabric)");
    println!("cargo::rustc-check-cfg=cfg(xpushmem_pmix)");
    println!("cargo::rerun-if-env-changed=DEP_FABRIC_AVAILABLE");
    println!("cargo::rerun-if-env-changed=DEP_PMIX_AVAILABLE");
    if std::env::var("DEP_PMIX_AVAILABLE").is_ok_and(|v| v == "1") {
        println!("cargo::rustc-cfg=xpushmem_pmix");
    }
    if std::env::var("DEP_FABRIC_AVAILABLE").is_ok_and(|v| v == "1") {
        println!("cargo::rustc-cfg=xpushmem_fabric");
    }
}
