//! Barriers, fence and quiet: no PE leaves barrier k before every PE entered it; ordering holds.

use xpushmem::Cmp;
use xpushmem_tests::{
    assert_success, is_pe_of, launcher_rank, pe_test, run_pe, spawn_pes_with, test_name,
};

pe_test!(
    barrier_all_separates_rounds,
    shm [1, 2, 4, 8],
    def [1, 2, 4, 8],
    fab [2, 4],
    dev [2, 4],
    |sh| {
    // Round k: every PE adds 1 to a counter on every PE, then barriers; after the barrier each counter must be
    // exactly n * k (nobody is a round ahead, nobody behind).
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let counter = sh.calloc::<u64>(1)?.at(0)?;
    for k in 1..=100u64 {
        for pe in 0..n {
            sh.atomic_add(counter, 1, (me + pe) % n)?;
        }
        if k % 2 == 0 {
            sh.barrier_all()?;
        } else {
            sh.quiet()?;
            sh.sync_all()?;
        }
        assert_eq!(sh.atomic_fetch(counter, me)?, n as u64 * k, "round {k}");
        sh.sync_all()?;
    }
    Ok(())
});

pe_test!(
    fence_orders_puts_to_one_pe,
    shm [2, 4],
    def [2, 4],
    fab [2, 4],
    dev [2, 4],
    |sh| {
    // Writer puts data then (fence) a flag; the reader that sees the flag must see the data.
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let data = sh.calloc::<u64>(512)?;
    let flag = sh.calloc::<u64>(1)?.at(0)?;
    let right = (me + 1) % n;
    for round in 1..=50u64 {
        sh.put(data, &vec![round * 1000 + me as u64; 512], right)?;
        sh.fence()?;
        sh.p(flag, round, right)?;
        sh.wait_until(flag, Cmp::Eq, round)?;
        let mut got = vec![0u64; 512];
        sh.get(&mut got, data, me)?;
        let left = ((me + n - 1) % n) as u64;
        assert!(
            got.iter().all(|&v| v == round * 1000 + left),
            "round {round}"
        );
        sh.barrier_all()?;
    }
    Ok(())
});

pe_test!(
    thread_levels_and_multithreaded_rma,
    shm[2],
    def[2],
    fab[2],
    |sh| {
        // The harness initialises at MULTIPLE; four threads put disjoint blocks concurrently.
        assert_eq!(sh.query_thread(), xpushmem::ThreadLevel::Multiple);
        let (me, n) = (sh.my_pe(), sh.n_pes());
        let buf = sh.calloc::<u32>(4 * 1000)?;
        std::thread::scope(|s| {
            for t in 0..4usize {
                s.spawn(move || {
                    let v: Vec<u32> = (0..1000).map(|i| (t * 1000 + i + me) as u32).collect();
                    sh.put(
                        buf.slice(t * 1000..(t + 1) * 1000).expect("in range"),
                        &v,
                        (me + 1) % n,
                    )
                    .expect("put");
                });
            }
        });
        sh.barrier_all()?;
        let mut got = vec![0u32; 4000];
        sh.get(&mut got, buf, me)?;
        let left = (me + n - 1) % n;
        assert!(got.iter().enumerate().all(|(i, &v)| v == (i + left) as u32));
        sh.free(buf)
    }
);

/// PEs that their launcher binds one per core (`mpirun --bind-to core`, `srun --cpu-bind=cores`) each see one CPU;
/// the machine still has a core per PE, so their waits keep spinning (`machine_cpus`: the union of the PEs' CPU
/// sets). Two PEs bound to the same CPU are oversubscribed. The PEs bind themselves before init, as a launcher
/// would, to the first CPUs of the set the test runs on.
#[test]
fn pes_bound_one_per_core_count_every_pe_s_core_2pe() {
    let name = test_name(
        module_path!(),
        "pes_bound_one_per_core_count_every_pe_s_core_2pe",
    );
    let set = rustix::thread::sched_getaffinity(None).expect("sched_getaffinity");
    let cpus: Vec<usize> = (0..rustix::thread::CpuSet::MAX_CPU)
        .filter(|&c| set.is_set(c))
        .collect();
    if is_pe_of(&name) {
        let same = std::env::var("XPUSHMEM_TEST_BIND").is_ok_and(|v| v == "same");
        let cpu = if same { cpus[0] } else { cpus[launcher_rank()] };
        let mut one = rustix::thread::CpuSet::new();
        one.set(cpu);
        rustix::thread::sched_setaffinity(None, &one).expect("sched_setaffinity");
        run_pe(|sh| {
            assert_eq!(rustix::thread::sched_getaffinity(None).unwrap().count(), 1);
            assert_eq!(sh.machine_cpus(), if same { 1 } else { 2 }, "cpu {cpu}");
            Ok(())
        });
    }
    if cpus.len() < 2 {
        eprintln!("{name}: needs 2 CPUs, this process has {cpus:?}: not run");
        return;
    }
    for bind in ["spread", "same"] {
        let out = spawn_pes_with(&name, 2, &[("XPUSHMEM_TEST_BIND", bind)]);
        assert_success(&name, 2, &out);
    }
}
