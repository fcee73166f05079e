//! Builds the fabric transport when `fabric-sys` found libfabric (its `links` metadata `DEP_FABRIC_AVAILABLE`).
fn main() {
    println!("cargo::rustc-check-cfg=cfg(xpushmem_fabric)");
    println!("cargo::rerun-if-env-changed=DEP_FABRIC_AVAILABLE");
    if std::env::var("DEP_FABRIC_AVAILABLE").is_ok_and(|v| v == "1") {
        println!("cargo::rustc-cfg=xpushmem_fabric");
    }
}
