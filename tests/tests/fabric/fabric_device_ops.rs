//! The fabric suites' common body (`fabric_common::mixed_body`: routes, RMA, atomics, put-with-signal, barriers,
//! team collectives, a strided split, the MoE all-to-alls) on device heaps (ze-emu) whose peers are reached through
//! the fabric (staged: libfabric `tcp` has no `FI_HMEM`), every other PE forced onto it. `XPUSHMEM_OPS_PATH=auto`
//! resolves to the host path there (the op kernels reach mapped peers only). Jobs mixing mapped and fabric
//! device-heap peers are in `fabric_device.rs` (the common body expects shm routes between node peers).
//!
//! Skipped (with a message) when the build has no fabric transport.

use crate::fabric_common::{fabric_available, mixed_body, node_of};
use xpushmem_tests::{assert_success, is_pe_of, run_pe, spawn_pes_with, test_name};

/// Run the common body at `n` device-heap PEs on `nodes` nodes (`0`: every peer forced onto the fabric).
fn device_mixed(func: &str, n: usize, nodes: usize) {
    let name = test_name(module_path!(), func);
    if is_pe_of(&name) {
        if nodes > 0 {
            let rank = xpushmem_tests::launcher_rank();
            // Before init, in this single-threaded PE process: its node.
            std::env::set_var(
                "XPUSHMEM_NODE_ID",
                format!("node{}", node_of(rank, n, nodes)),
            );
        }
        run_pe(|sh| {
            if sh.heap_kind() != xpushmem::HeapKind::Device {
                return Err(xpushmem::Error::State("expected a device heap".into()));
            }
            // The op kernels reach mapped peers only: `auto` takes the host path (what the C ABI and the torch
            // shim switch on).
            if xpushmem_ops::ops_path(sh)? != xpushmem_ops::OpsPath::Host {
                return Err(xpushmem::Error::State(
                    "XPUSHMEM_OPS_PATH=auto chose the device path with fabric peers".into(),
                ));
            }
            mixed_body(sh, nodes)
        });
    }
    if !fabric_available() {
        eprintln!(
            "skipped: this build has no fabric transport (libfabric headers missing at build time)"
        );
        return;
    }
    let mut env = xpushmem_tests::device_env();
    if nodes == 0 {
        env.push(("XPUSHMEM_TRANSPORT".into(), "fabric".into()));
    }
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let out = spawn_pes_with(&name, n, &env);
    assert_success(&name, n, &out);
}

#[test]
fn device_heaps_forced_fabric_2pe() {
    device_mixed("device_heaps_forced_fabric_2pe", 2, 0);
}

#[test]
fn device_heaps_forced_fabric_3pe() {
    device_mixed("device_heaps_forced_fabric_3pe", 3, 0);
}
