//! The MPI bootstrap under a real `mpirun -n 2` and `-n 4` (feature `mpi`): node layout, RMA, atomics and barriers
//! must work exactly as under the uid bootstrap.

use std::time::Duration;
use xpushmem_tests::mpirun::{bootstrap_body, mpirun as launch};
use xpushmem_tests::{is_pe_of, run_pe};

fn body(sh: &xpushmem::Shmem) -> xpushmem::Result<()> {
    bootstrap_body(sh, "mpi")
}

fn mpirun(name: &str, n: usize) {
    let vars = [
        ("XPUSHMEM_BOOTSTRAP", "mpi"),
        ("XPUSHMEM_TIMEOUT_MS", "60000"),
    ];
    let st = launch(name, n, &vars, Duration::from_secs(120));
    assert!(st.success(), "mpirun -n {n} failed: {st}");
}

#[test]
fn mpi_bootstrap_2pe() {
    let name = xpushmem_tests::test_name(module_path!(), "mpi_bootstrap_2pe");
    if is_pe_of(&name) {
        run_pe(body);
    }
    mpirun(&name, 2);
}

#[test]
fn mpi_bootstrap_4pe() {
    let name = xpushmem_tests::test_name(module_path!(), "mpi_bootstrap_4pe");
    if is_pe_of(&name) {
        run_pe(body);
    }
    mpirun(&name, 4);
}
