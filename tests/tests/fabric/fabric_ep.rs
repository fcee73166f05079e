//! Expert-parallel dispatch and combine (`xpushmem_ops::ep::TokenSwitch`, host path) with PEs on two nodes: PEs 0
//! and 1 on one node (shared memory), 2 and 3 on the other (`XPUSHMEM_NODE_ID`), so half of every exchange crosses
//! the fabric (libfabric `tcp` over loopback). The covering set of `ops_ep_ref::ep_round_trips` (both layouts,
//! top-k 1 to 8, the three float dtypes, skewed and masked routings, 1 and 3 experts per rank) against the
//! reference every PE computes from every PE's inputs. The same body runs across network namespaces in
//! `fabric_netns.rs` (`netns_ep_4pe`).
//!
//! Skipped (with a message) when the build has no fabric transport.

use crate::fabric_common::ops_ep_ref::ep_round_trips;
use crate::fabric_common::{fabric_available, node_of};
use xpushmem_tests::{assert_success, is_pe_of, run_pe, spawn_pes_with, test_name};

#[test]
fn ep_two_nodes_4pe() {
    let name = test_name(module_path!(), "ep_two_nodes_4pe");
    if is_pe_of(&name) {
        let rank = xpushmem_tests::launcher_rank();
        // Before init, in this single-threaded PE process: its node.
        std::env::set_var("XPUSHMEM_NODE_ID", format!("node{}", node_of(rank, 4, 2)));
        run_pe(|sh| {
            // Half of every exchange crosses the fabric: the two PEs of the other node.
            let fabric = (0..sh.n_pes())
                .filter(|&pe| sh.transport_name(pe) == "fabric")
                .count();
            assert_eq!(fabric, 2, "PE {}: peers on the fabric", sh.my_pe());
            ep_round_trips(sh)
        });
    }
    if !fabric_available() {
        eprintln!(
            "skipped: this build has no fabric transport (libfabric headers missing at build time)"
        );
        return;
    }
    let out = spawn_pes_with(&name, 4, &[]);
    assert_success(&name, 4, &out);
}
