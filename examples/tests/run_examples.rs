//! Every example runs under the launcher at 2 and 4 PEs (and 3 where it divides) and must report success.

use std::time::Duration;
use xpushmem_launch::Job;

fn run(bin: &str, n: usize) {
    let mut job = Job::new(n, bin);
    job.timeout = Some(Duration::from_secs(120));
    job.capture = true;
    job.env = vec![("XPUSHMEM_TIMEOUT_MS".into(), "60000".into())];
    let out = job.run().expect("launch");
    let text: String = (0..n).map(|pe| out.output_of(pe)).collect();
    assert!(
        out.success(),
        "{bin} at {n} PEs failed ({:?}):\n{text}",
        out.first_failure
    );
    assert!(
        text.contains(": ok"),
        "{bin} at {n} PEs printed no success line:\n{text}"
    );
}

#[test]
fn hello_2_3_4pe() {
    for n in [2, 3, 4] {
        run(env!("CARGO_BIN_EXE_hello"), n);
    }
}

#[test]
fn ring_put_2_3_4pe() {
    for n in [2, 3, 4] {
        run(env!("CARGO_BIN_EXE_ring_put"), n);
    }
}

#[test]
fn put_signal_pipeline_2_3_4pe() {
    for n in [2, 3, 4] {
        run(env!("CARGO_BIN_EXE_put_signal_pipeline"), n);
    }
}

#[test]
fn jacobi_2_3_4pe() {
    for n in [2, 3, 4] {
        run(env!("CARGO_BIN_EXE_jacobi"), n);
    }
}

#[test]
fn device_token_ring_2_3_4pe() {
    // Kernels on ze-emu devices (the loader's validation layer on), one per PE.
    let lib = ze_emu::testing::loader_env();
    for n in [2, 3, 4] {
        let mut job = Job::new(n, env!("CARGO_BIN_EXE_device_token_ring"));
        job.timeout = Some(Duration::from_secs(300));
        job.capture = true;
        job.env = vec![
            ("XPUSHMEM_TIMEOUT_MS".into(), "60000".into()),
            ("XPUSHMEM_HEAP".into(), "device".into()),
        ];
        job.env.extend(lib.iter().cloned());
        let out = job.run().expect("launch");
        let text: String = (0..n).map(|pe| out.output_of(pe)).collect();
        assert!(
            out.success(),
            "device_token_ring at {n} PEs failed ({:?}):\n{text}",
            out.first_failure
        );
        for pe in 0..n {
            let want = if pe == 0 { n } else { pe };
            assert!(
                text.contains(&format!("PE {pe} of {n} got token {want}: ok")),
                "PE {pe} at {n} PEs:\n{text}"
            );
        }
    }
}
