//! Device heaps (ze-emu) over the fabric transport (libfabric `tcp` on loopback, every other PE forced onto it with
//! `XPUSHMEM_TRANSPORT=fabric`): host-initiated RMA, atomics and put-with-signal on peers' device heaps (tcp has no
//! `FI_HMEM`, so they take the staging path: messages into registered host buffers, applied by the target's Level
//! Zero copy), and kernels' puts, put-with-signal, quiet, `p`, gets and atomics to those peers through the host
//! proxy ring.
//! At 2 PEs the heap starts at 1 MiB and grows past it at an allocation (the growing heap over the fabric: each
//! new chunk described to the peers at the allocation's agreement): host puts and gets, and a module's kernels
//! (initialised before the growth) put-with-signal and get through the proxy, into the grown part; before the
//! growth a kernel's put past the mapped part is refused.
//! Every result is checked against a reference each PE computes on its own. A proxy that never answers ends the
//! kernel's call in its `Timeout`, a dead peer in `PeerLost`; a job mixing mapped and fabric peers runs both paths.
//! Jobs of two simulated nodes ("2+2" and "3+1") run the one-node suite's team kernels and checks
//! (`device/device_checks.rs`) on teams spanning the nodes: every barrier form, the collectives and all reductions
//! in the work-group and sub-group forms, 16-bit atomics, typed `g`; and a barrier whose proxied member died.
//!
//! Skipped (with a message) when the build has no fabric transport.

use crate::device_checks::{
    check_half_rounding, check_team_collectives, check_team_every_form, check_team_sync,
    reductions, short_words, Launch, ITEM, SUB_GROUPS, WORK_GROUP,
};
use std::path::PathBuf;
use xpushmem::{Cmp, Error, KernelArg, Shmem, SignalOp};
use xpushmem_tests::device_build::{self, root};
use xpushmem_tests::{assert_success, is_pe_of, ref_vec, run_pe, spawn_pes_with, test_name};

const SPV_VAR: &str = "XPUSHMEM_TEST_FABRIC_DEVICE_SPV";
/// The node id of every PE, one character each (a mixed job without `XPUSHMEM_TRANSPORT=fabric`).
const NODES_VAR: &str = "XPUSHMEM_TEST_FABRIC_DEVICE_NODES";

/// Run `body` on `n` device-heap PEs that reach each other only through the fabric (the parent builds the kernels
/// linked with the committed device library once).
fn fabric_device_test(
    func: &str,
    n: usize,
    extra: &[(&str, &str)],
    body: fn(&Shmem) -> xpushmem::Result<()>,
) {
    fabric_device_test_with(func, n, extra, &[], body)
}

/// The variable with the path of the linked module of `source` (a file of device_kernels/ other than
/// fabric_device.cl).
fn module_var(source: &str) -> String {
    format!(
        "{SPV_VAR}_{}",
        source.trim_end_matches(".cl").to_uppercase()
    )
}

/// [`fabric_device_test`], also linking the kernels of `sources` (files of device_kernels/, each its own module:
/// [`linked`] loads them in a PE).
fn fabric_device_test_with(
    func: &str,
    n: usize,
    extra: &[(&str, &str)],
    sources: &[&str],
    body: fn(&Shmem) -> xpushmem::Result<()>,
) {
    let name = test_name(module_path!(), func);
    if is_pe_of(&name) {
        if let Ok(nodes) = std::env::var(NODES_VAR) {
            // A mixed job: PEs with the same node id share memory (the device maps them), the others use the
            // fabric. Set before init, in this single-threaded PE process.
            let rank = xpushmem_tests::launcher_rank();
            let node = nodes.chars().nth(rank).expect("a node per PE").to_string();
            std::env::set_var("XPUSHMEM_NODE_ID", node);
        }
        run_pe(body);
    }
    if !fabric_available() {
        eprintln!(
            "skipped: this build has no fabric transport (libfabric headers missing at build time)"
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("xpushmem-fabdev-{}-{func}", std::process::id()));
    let src = root().join("tests/tests/device_kernels/fabric_device.cl");
    let spv: PathBuf = device_build::link_with_library(&src, &dir, "fabric_device.spv");
    let mut env = xpushmem_tests::device_env();
    for source in sources {
        let src = root().join("tests/tests/device_kernels").join(source);
        let out = device_build::link_with_library(&src, &dir, &source.replace(".cl", ".spv"));
        env.push((module_var(source), out.display().to_string()));
    }
    if !extra.iter().any(|(k, _)| *k == NODES_VAR) {
        env.push(("XPUSHMEM_TRANSPORT".into(), "fabric".into()));
    }
    env.push((SPV_VAR.into(), spv.display().to_string()));
    env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let out = spawn_pes_with(&name, n, &env);
    let _ = std::fs::remove_dir_all(&dir);
    assert_success(&name, n, &out);
}

/// Whether this build has the fabric transport.
fn fabric_available() -> bool {
    matches!(xpushmem::transport::fabric_providers(), Ok(Some(_)))
}

fn check(what: &str, ok: bool) -> xpushmem::Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::State(format!("check failed: {what}")))
    }
}

/// Host-initiated operations on the neighbours' device heaps: puts of 13 bytes and of 150 KiB (three staging
/// chunks) read back with gets, atomics on PE 0's words from every PE, put-with-signal around the ring.
fn host_ops(sh: &Shmem) -> xpushmem::Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    if std::env::var(NODES_VAR).is_err() {
        for pe in (0..n).filter(|&p| p != me) {
            check(
                &format!("PE {pe} through the fabric"),
                sh.transport_name(pe) == "fabric",
            )?;
        }
    }
    for (salt, len) in [(1u64, 13usize), (2, 150 * 1024)] {
        let buf = sh.calloc::<u8>(len)?;
        sh.put(buf, &ref_vec::<u8>(me, len, salt), right)?;
        sh.barrier_all()?;
        let mut got = vec![0u8; len];
        sh.get(&mut got, buf, me)?;
        check(
            &format!("{len} bytes put by PE {left} into my device heap"),
            got == ref_vec::<u8>(left, len, salt),
        )?;
        let mut back = vec![0u8; len];
        sh.get(&mut back, buf, right)?;
        check(
            &format!("{len} bytes read back from PE {right}"),
            back == ref_vec::<u8>(me, len, salt),
        )?;
        sh.barrier_all()?;
        sh.free(buf)?;
    }
    // Atomics on PE 0's words: 20 fetch_adds of me+1 from every PE, an election by compare_swap, swaps.
    let w = sh.calloc::<u64>(2)?;
    let w32 = sh.calloc::<u32>(1)?;
    let mut seen = Vec::new();
    for _ in 0..20 {
        seen.push(sh.atomic_fetch_add(w.at(0)?, me as u64 + 1, 0)?);
        sh.atomic_fetch_add(w32.at(0)?, 1u32, 0)?;
    }
    let won = sh.atomic_compare_swap(w.at(1)?, 0u64, me as u64 + 100, 0)? == 0;
    sh.barrier_all()?;
    let total: u64 = (0..n as u64).map(|p| 20 * (p + 1)).sum();
    check(
        "fetch_add total on PE 0",
        sh.atomic_fetch(w.at(0)?, 0)? == total,
    )?;
    check(
        "32-bit fetch_add total on PE 0",
        sh.atomic_fetch(w32.at(0)?, 0)? == 20 * n as u32,
    )?;
    check(
        "fetch_add results increase",
        seen.windows(2).all(|p| p[0] < p[1]),
    )?;
    let winner = sh.atomic_fetch(w.at(1)?, 0)?;
    check(
        "one compare_swap winner",
        (100..100 + n as u64).contains(&winner),
    )?;
    check(
        "this PE's election result",
        won == (winner == me as u64 + 100),
    )?;
    sh.barrier_all()?;
    if me == 1 {
        let old = sh.atomic_swap(w.at(1)?, 7u64, 0)?;
        check("swap returns the winner", old == winner)?;
        check("swap wrote", sh.atomic_fetch(w.at(1)?, 0)? == 7)?;
    }
    // put_signal around the ring, 3 rounds, ADD.
    let data = sh.calloc::<u64>(1000)?;
    let sig = sh.calloc::<u64>(1)?;
    for round in 1..=3u64 {
        sh.barrier_all()?;
        sh.put_signal(
            data,
            &ref_vec::<u64>(me, 1000, 10 + round),
            sig.at(0)?,
            1,
            SignalOp::Add,
            right,
        )?;
        sh.signal_wait_until(sig.at(0)?, Cmp::Ge, round)?;
        let mut got = vec![0u64; 1000];
        sh.get(&mut got, data, me)?;
        check(
            &format!("put_signal round {round} data"),
            got == ref_vec::<u64>(left, 1000, 10 + round),
        )?;
    }
    sh.barrier_all()?;
    // Device heaps the fabric reaches grow too (the first chunk is XPUSHMEM_SYMMETRIC_SIZE, not a limit).
    check(
        &format!(
            "a growable heap: {} of up to {}",
            sh.heap_size(),
            sh.heap_max()
        ),
        sh.heap_max() > sh.heap_size(),
    )?;
    Ok(())
}

/// The first chunk and the most the heap may grow to in the growth cases ([`GROWN_ENV`]).
const FIRST: usize = 1 << 20;
/// A 1 MiB first chunk of a heap that may grow to 16 MiB.
const GROWN_ENV: &[(&str, &str)] = &[
    ("XPUSHMEM_SYMMETRIC_SIZE", "1M"),
    ("XPUSHMEM_SYMMETRIC_MAX", "16M"),
];

/// [`host_ops`], then the heap grows past its first chunk at an allocation: host puts (staged) into the right
/// neighbour's grown part, read back by the owner; an allocation past the maximum is `HeapExhausted` naming it.
fn host_ops_grown(sh: &Shmem) -> xpushmem::Result<()> {
    check("the first chunk", sh.heap_size() == FIRST)?;
    host_ops(sh)?;
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    const N: usize = FIRST + 12345;
    let big = sh.calloc::<u8>(N)?;
    check(
        &format!("grown by whole chunks: {}", sh.heap_size()),
        sh.heap_size() > FIRST && sh.heap_size() % FIRST == 0,
    )?;
    check(
        &format!("{big:?} ends past the first chunk"),
        big.heap_offset() + N > FIRST,
    )?;
    // Across the boundary of the first chunk and into the new one, and its last bytes.
    let across = big.slice(N - FIRST / 2 - 4096..N)?;
    sh.put(across, &ref_vec::<u8>(me, across.len(), 21), right)?;
    sh.barrier_all()?;
    let mut got = vec![0u8; across.len()];
    sh.get(&mut got, across, me)?;
    check(
        &format!("host put into this PE's grown part from PE {left}"),
        got == ref_vec::<u8>(left, across.len(), 21),
    )?;
    // A get of the neighbour's grown part through the fabric.
    sh.get(&mut got, across, right)?;
    check(
        "host get of the right neighbour's grown part",
        got == ref_vec::<u8>(me, across.len(), 21),
    )?;
    sh.barrier_all()?;
    let e = sh.malloc::<u8>(15 << 20).expect_err("past the maximum");
    check(
        &format!("past the maximum: {e}"),
        matches!(e, Error::HeapExhausted { requested, .. } if requested == 15 << 20)
            && e.to_string().contains("XPUSHMEM_SYMMETRIC_MAX"),
    )?;
    sh.free(big)
}

#[test]
fn host_ops_on_device_heaps_2pe() {
    fabric_device_test("host_ops_on_device_heaps_2pe", 2, GROWN_ENV, host_ops_grown);
}

#[test]
fn host_ops_on_device_heaps_3pe() {
    fabric_device_test("host_ops_on_device_heaps_3pe", 3, &[], host_ops);
}

fn sym<T: xpushmem::Symmetric>(s: xpushmem::SymSlice<T>, pe: usize) -> KernelArg {
    KernelArg::sym(s, pe)
}

/// Kernels reaching the neighbours through the proxy: put_signal (plain and work-group), put_nbi + p + quiet +
/// signal_op, get, atomics on PE 0; at 3 PEs (every PE on the fabric, or PEs 0 and 1 mapped by the device in the
/// mixed job), then a team of two members only ([`team_space`]).
fn kernel_ops(sh: &Shmem) -> xpushmem::Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    // fabric_device.cl's kernels, one work-group each.
    let fab = linked(sh, None)?;
    let run = |name: &str, args: &[KernelArg], size: u32| fab.run(name, args, 1, size);
    const N: usize = 70_000; // more than one staging chunk
    let dst = sh.calloc::<u8>(N)?;
    let src = sh.calloc::<u8>(N)?;
    let sig = sh.calloc::<u64>(1)?;
    let status = sh.calloc::<i64>(5)?;
    for (round, wg) in [(1u64, 0i32), (2, 1)] {
        sh.put(src, &ref_vec::<u8>(me, N, round), me)?;
        sh.barrier_all()?;
        let args = [
            sym(dst, me),
            sym(src, me),
            KernelArg::U64(N as u64),
            sym(sig, me),
            KernelArg::U64(round),
            KernelArg::U32(wg as u32),
            sym(status, me),
        ];
        run("k_px_put_signal", &args, 16)?;
        let mut st = [0i64; 2];
        sh.get(&mut st, status.slice(0..2)?, me)?;
        // Round 2 adds 2 to round 1's 1.
        let want = if round == 1 { 1 } else { 3 };
        check(
            &format!("put_signal round {round}: status {st:?}"),
            st[0] == 0 && st[1] as u64 >= round,
        )?;
        check("signal word", sh.signal_fetch(sig.at(0)?)? == want)?;
        let mut got = vec![0u8; N];
        sh.get(&mut got, dst, me)?;
        check(
            &format!("put_signal round {round} (wg {wg}) data from PE {left}"),
            got == ref_vec::<u8>(left, N, round),
        )?;
        sh.barrier_all()?;
    }
    // put_nbi + p + quiet + signal_op.
    let val = sh.calloc::<i64>(1)?;
    let sig2 = sh.calloc::<u64>(1)?;
    sh.put(src, &ref_vec::<u8>(me, N, 5), me)?;
    sh.barrier_all()?;
    run(
        "k_px_put_quiet",
        &[
            sym(dst, me),
            sym(src, me),
            KernelArg::U64(N as u64),
            sym(val, me),
            sym(sig2, me),
            sym(status, me),
        ],
        1,
    )?;
    let mut st = [0i64; 5];
    sh.get(&mut st, status, me)?;
    check(
        &format!("put_nbi/p/quiet/signal_op status {st:?}"),
        st[..4] == [0; 4] && st[4] == 1,
    )?;
    let mut got = vec![0u8; N];
    sh.get(&mut got, dst, me)?;
    check(
        "put_nbi data (delivered before the signal by quiet)",
        got == ref_vec::<u8>(left, N, 5),
    )?;
    let mut v = [0i64];
    sh.get(&mut v, val, me)?;
    check("long_p value", v[0] == 1000 + left as i64)?;
    sh.barrier_all()?;
    // get from the right neighbour.
    sh.put(src, &ref_vec::<u8>(me, N, 6), me)?;
    sh.put(dst, &vec![0u8; N], me)?;
    sh.barrier_all()?;
    run(
        "k_px_get",
        &[
            sym(dst, me),
            sym(src, me),
            KernelArg::U64(N as u64),
            sym(status, me),
        ],
        1,
    )?;
    sh.get(&mut st[..1], status.slice(0..1)?, me)?;
    sh.get(&mut got, dst, me)?;
    check(&format!("getmem status {}", st[0]), st[0] == 0)?;
    check(
        &format!("getmem data of PE {right}"),
        got == ref_vec::<u8>(right, N, 6),
    )?;
    sh.barrier_all()?;
    // Atomics on PE 0's words from every PE's kernel (PE 0 directly, the others through the proxy).
    const ITERS: i32 = 25;
    let word = sh.calloc::<u64>(1)?;
    let w32 = sh.calloc::<u32>(1)?;
    let elect = sh.calloc::<u64>(1)?;
    let spare = sh.calloc::<u64>(1)?;
    sh.barrier_all()?;
    run(
        "k_px_atomics",
        &[
            sym(word, me),
            sym(w32, me),
            sym(elect, me),
            sym(spare, me),
            KernelArg::U32(ITERS as u32),
            sym(status, me),
        ],
        1,
    )?;
    sh.get(&mut st, status, me)?;
    sh.barrier_all()?;
    let total: u64 = (0..n as u64).map(|p| ITERS as u64 * (p + 1)).sum();
    check("kernel fetch_add results increase", st[0] == 1)?;
    check(
        &format!("kernel fetch after own adds ({})", st[2]),
        st[2] as u64 >= ITERS as u64 * (me as u64 + 1),
    )?;
    check(
        &format!("kernel 32-bit fetch_xor after own incs ({})", st[3]),
        st[3] as u64 >= ITERS as u64,
    )?;
    check(&format!("kernel atomic_set status {}", st[4]), st[4] == 0)?;
    check(
        "kernel fetch_add total on PE 0",
        sh.atomic_fetch(word.at(0)?, 0)? == total,
    )?;
    check(
        "kernel 32-bit inc total on PE 0",
        sh.atomic_fetch(w32.at(0)?, 0)? == ITERS as u32 * n as u32,
    )?;
    check("kernel set on PE 0", sh.atomic_fetch(spare.at(0)?, 0)? == 7)?;
    if n == 3 {
        team_space(sh, &run, status)?;
    }
    let winner = sh.atomic_fetch(elect.at(0)?, 0)?;
    check(
        &format!("one kernel compare_swap winner ({winner})"),
        (100..100 + n as u64).contains(&winner),
    )?;
    check(
        &format!("this PE's compare_swap result {}", st[1]),
        (st[1] == 0) == (winner == me as u64 + 100) && (st[1] == 0 || st[1] as u64 == winner),
    )?;
    sh.barrier_all()?;
    Ok(())
}

/// A kernel launcher: the kernel's name, its arguments, the work-group size.
type Run<'a> = dyn Fn(&str, &[KernelArg], u32) -> xpushmem::Result<()> + 'a;

/// Issue #30 item 6 on device heaps reached over the fabric: PEs 0 and 1 (PE 2 never calls) make a team of their
/// members only, run a team collective on it and allocate on it (a chunk of each member's team space, described
/// to the other member only): a host put into the other member's copy and a get of it, and a kernel's put
/// (through the proxy, from this PE's own team allocation) into the other member's copy, each checked by the
/// owner against what the writer computed. PE 2 (no member) is refused both members' copies while they are live
/// (at the offset of its own allocation on a team of itself); after the frees, so is the other member.
fn team_space(sh: &Shmem, run: &Run<'_>, status: xpushmem::SymSlice<i64>) -> xpushmem::Result<()> {
    let me = sh.my_pe();
    // PE 2 makes a team of itself only and allocates the same way, so that its allocation lies at the offset of
    // the members' (checked below through a world allocation).
    let list: &[usize] = if me < 2 { &[0, 1] } else { &[2] };
    let t = sh.team_of_members(list, 7)?;
    let buf = sh.team_calloc::<u64>(&t, 64)?;
    let mine: Vec<u64> = (0..8).map(|i| 100 * (me as u64 + 1) + i).collect();
    if me < 2 {
        let other = 1 - me;
        check("in the team space", buf.heap_offset() >= sh.heap_max())?;
        sh.put(buf.slice(0..1)?, &[me as u64 + 1], me)?;
        sh.sum_reduce(&t, buf.slice(1..2)?, buf.slice(0..1)?, 1)?;
        let mut sum = [0u64];
        sh.get(&mut sum, buf.slice(1..2)?, me)?;
        check(&format!("team sum_reduce {}", sum[0]), sum[0] == 1 + 2)?;
        sh.put(buf.slice(8..16)?, &mine, other)?;
        sh.team_barrier(&t)?;
        let mut got = [0u64; 8];
        sh.get(&mut got, buf.slice(8..16)?, other)?;
        check(
            "host get of my put in the other member's copy",
            got[..] == mine[..],
        )?;
        sh.get(&mut got, buf.slice(8..16)?, me)?;
        let theirs: Vec<u64> = (0..8).map(|i| 100 * (other as u64 + 1) + i).collect();
        check("the other member's host put", got[..] == theirs[..])?;
        const N: usize = 5000;
        let src = sh.team_malloc::<u8>(&t, N)?;
        let dst = sh.team_calloc::<u8>(&t, N)?;
        sh.put(src, &ref_vec::<u8>(me, N, 9), me)?;
        sh.team_barrier(&t)?;
        let args = [
            sym(dst, me),
            sym(src, me),
            KernelArg::U64(N as u64),
            KernelArg::U32(other as u32),
            sym(status, me),
        ];
        run("k_px_put_to", &args, 1)?;
        let mut st = [0i64];
        sh.get(&mut st, status.slice(0..1)?, me)?;
        check(
            &format!("kernel put to the team's other member: {}", st[0]),
            st[0] == 0,
        )?;
        sh.team_barrier(&t)?;
        let mut bytes = vec![0u8; N];
        sh.get(&mut bytes, dst, me)?;
        check(
            "the other member's kernel put (through the proxy)",
            bytes == ref_vec::<u8>(other, N, 9),
        )?;
        sh.team_barrier(&t)?;
        sh.team_free(&t, dst)?;
        sh.team_free(&t, src)?;
    }
    // The members' allocations are live: PE 2, no member, reaches neither member's copy at that offset.
    let offs = sh.calloc::<u64>(3)?;
    sh.put(offs.slice(me..me + 1)?, &[buf.heap_offset() as u64], 2)?;
    sh.barrier_all()?;
    if me == 2 {
        let mut o = [0u64; 3];
        sh.get(&mut o, offs, me)?;
        check(
            &format!("team-space offsets {o:?}"),
            o[0] == o[1] && o[1] == o[2],
        )?;
        let mut got = [0u64; 8];
        check(
            "a non-member's put into PE 0's team allocation is refused",
            sh.put(buf.slice(8..16)?, &mine, 0).is_err(),
        )?;
        check(
            "a non-member's get of PE 1's team allocation is refused",
            sh.get(&mut got, buf.slice(8..16)?, 1).is_err(),
        )?;
    }
    sh.barrier_all()?;
    sh.free(offs)?;
    sh.team_free(&t, buf)?;
    if me < 2 {
        check(
            "a put into the other member's freed team allocation is refused",
            sh.put(buf.slice(8..16)?, &mine, 1 - me).is_err(),
        )?;
    }
    sh.team_destroy(t)?;
    sh.barrier_all()
}

/// The heap grows past its first chunk after a module was initialised; its kernels reach the grown part of the
/// neighbours' heaps through the proxy. Before the growth, a kernel's put past the mapped part is refused (the
/// device library's check of the mapped length, which the host raises after the growth), not sent.
fn kernel_ops_grown(sh: &Shmem) -> xpushmem::Result<()> {
    check("the first chunk", sh.heap_size() == FIRST)?;
    kernel_ops(sh)?;
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    // fabric_device.cl's kernels, one work-group each.
    let fab = linked(sh, None)?;
    let run = |name: &str, args: &[KernelArg], size: u32| fab.run(name, args, 1, size);
    let small = sh.calloc::<u8>(64)?;
    let status = sh.calloc::<i64>(2)?;
    sh.barrier_all()?;
    let past = [
        sym(small, me),
        sym(small, me),
        KernelArg::U64(sh.heap_size() as u64),
        sym(status, me),
    ];
    let r = run("k_px_put", &past, 1);
    let mut st = [0i64; 2];
    sh.get(&mut st[..1], status.slice(0..1)?, me)?;
    check(
        &format!(
            "a kernel's put past the mapped part is refused: {r:?}, status {}",
            st[0]
        ),
        matches!(&r, Err(Error::Device(m)) if m.contains("NotSymmetric"))
            || (r.is_ok() && st[0] != 0),
    )?;
    sh.barrier_all()?;
    const N: usize = FIRST + 12345;
    let dst = sh.calloc::<u8>(N)?;
    let src = sh.malloc::<u8>(N)?;
    let sig = sh.calloc::<u64>(1)?;
    check(
        &format!(
            "{dst:?} and {src:?} end past the first chunk, heap {}",
            sh.heap_size()
        ),
        src.heap_offset() + N > FIRST && sh.heap_size() > FIRST,
    )?;
    sh.put(src, &ref_vec::<u8>(me, N, 31), me)?;
    sh.barrier_all()?;
    let args = [
        sym(dst, me),
        sym(src, me),
        KernelArg::U64(N as u64),
        sym(sig, me),
        KernelArg::U64(1),
        KernelArg::U32(0),
        sym(status, me),
    ];
    run("k_px_put_signal", &args, 16)?;
    sh.get(&mut st, status, me)?;
    check(
        &format!("grown put_signal status {st:?}"),
        st[0] == 0 && st[1] >= 1,
    )?;
    let mut got = vec![0u8; N];
    sh.get(&mut got, dst, me)?;
    check(
        &format!("a kernel's put_signal into the grown part from PE {left}"),
        got == ref_vec::<u8>(left, N, 31),
    )?;
    sh.barrier_all()?;
    sh.put(dst, &vec![0u8; N], me)?;
    sh.barrier_all()?;
    run(
        "k_px_get",
        &[
            sym(dst, me),
            sym(src, me),
            KernelArg::U64(N as u64),
            sym(status, me),
        ],
        1,
    )?;
    sh.get(&mut st[..1], status.slice(0..1)?, me)?;
    sh.get(&mut got, dst, me)?;
    check(&format!("grown getmem status {}", st[0]), st[0] == 0)?;
    check(
        &format!("a kernel's get of PE {right}'s grown part"),
        got == ref_vec::<u8>(right, N, 31),
    )?;
    sh.barrier_all()?;
    Ok(())
}

#[test]
fn kernels_through_the_proxy_2pe() {
    fabric_device_test(
        "kernels_through_the_proxy_2pe",
        2,
        GROWN_ENV,
        kernel_ops_grown,
    );
}

#[test]
fn kernels_through_the_proxy_3pe() {
    fabric_device_test("kernels_through_the_proxy_3pe", 3, &[], kernel_ops);
}

/// The proxy never drains the ring: a kernel's blocking put to a fabric peer gives up with `Timeout` naming the
/// proxy wait; the host-initiated path still works.
fn stalled_proxy(sh: &Shmem) -> xpushmem::Result<()> {
    let me = sh.my_pe();
    let dev = sh.device().expect("a device heap");
    let spv = std::fs::read(std::env::var(SPV_VAR).expect("module path")).expect("linked module");
    let module = dev.load_module(&spv)?;
    dev.init_module(&module)?;
    let dst = sh.calloc::<u8>(64)?;
    let src = sh.calloc::<u8>(64)?;
    let status = sh.calloc::<i64>(1)?;
    let k = dev.kernel(&module, "k_px_put")?;
    // SAFETY: as in kernel_ops.
    let r = unsafe {
        dev.launch(
            &k,
            &[
                sym(dst, me),
                sym(src, me),
                KernelArg::U64(64),
                sym(status, me),
            ],
            [1, 1, 1],
            [1, 1, 1],
        )
    };
    match r {
        Err(Error::Timeout { op, .. }) => check(
            &format!("timeout names the proxy: {op}"),
            op.contains("host proxy"),
        )?,
        other => {
            return Err(Error::State(format!(
                "expected a Timeout from the stalled proxy, got {other:?}"
            )))
        }
    }
    let mut st = [0i64];
    sh.get(&mut st, status, me)?;
    check(
        &format!("the put returned an error code ({})", st[0]),
        st[0] != 0,
    )?;
    sh.barrier_all()?;
    Ok(())
}

#[test]
fn stalled_proxy_times_out_2pe() {
    fabric_device_test(
        "stalled_proxy_times_out_2pe",
        2,
        &[
            ("XPUSHMEM_DEVICE_PROXY", "stalled"),
            ("XPUSHMEM_TIMEOUT_MS", "20000"),
        ],
        stalled_proxy,
    );
}

/// A mixed job at 3 PEs: PEs 0 and 1 share a node (the device maps each other's heaps: the direct path), PE 2 is on
/// another (fabric, staging and proxy). The ring crosses both kinds of link in host and kernel operations.
fn mixed(sh: &Shmem) -> xpushmem::Result<()> {
    let me = sh.my_pe();
    let want = |pe: usize| if (me < 2) == (pe < 2) { "ze" } else { "fabric" };
    for pe in (0..sh.n_pes()).filter(|&p| p != me) {
        check(
            &format!(
                "PE {pe} through {} (is {})",
                want(pe),
                sh.transport_name(pe)
            ),
            sh.transport_name(pe) == want(pe),
        )?;
    }
    host_ops(sh)?;
    kernel_ops(sh)
}

#[test]
fn mixed_mapped_and_fabric_peers_3pe() {
    fabric_device_test(
        "mixed_mapped_and_fabric_peers_3pe",
        3,
        &[(NODES_VAR, "aab")],
        mixed,
    );
}

/// `XPUSHMEM_FABRIC_DEVICE_HEAP=register` on a provider without `FI_HMEM` (tcp): init refuses, naming FI_HMEM, so
/// the default (auto) can only have taken the staging path in the tests above.
#[test]
fn register_without_fi_hmem_is_refused_2pe() {
    let name = test_name(module_path!(), "register_without_fi_hmem_is_refused_2pe");
    if is_pe_of(&name) {
        match xpushmem::init() {
            Err(e) if e.to_string().contains("FI_HMEM") => std::process::exit(0),
            Err(e) => {
                eprintln!("init failed, but not naming FI_HMEM: {e}");
                std::process::exit(1)
            }
            Ok(_) => {
                eprintln!("init succeeded with XPUSHMEM_FABRIC_DEVICE_HEAP=register on a provider without FI_HMEM");
                std::process::exit(1)
            }
        }
    }
    if !fabric_available() {
        eprintln!(
            "skipped: this build has no fabric transport (libfabric headers missing at build time)"
        );
        return;
    }
    let mut env = xpushmem_tests::device_env();
    env.push(("XPUSHMEM_TRANSPORT".into(), "fabric".into()));
    env.push(("XPUSHMEM_FABRIC_DEVICE_HEAP".into(), "register".into()));
    env.push(("XPUSHMEM_FABRIC_PROVIDER".into(), "tcp".into()));
    env.push(("XPUSHMEM_TIMEOUT_MS".into(), "10000".into()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let out = spawn_pes_with(&name, 2, &env);
    assert_success(&name, 2, &out);
}

/// PE 1 dies after the set-up; PE 0's kernel then puts to it through the proxy: the launch ends in an error (the
/// proxy's `PeerLost`, or a `Timeout` if the provider never reports the loss), not a hang.
fn lost_peer(sh: &Shmem) -> xpushmem::Result<()> {
    lost_peer_in(
        sh,
        "lost_peer_through_the_proxy_is_an_error_2pe",
        "k_px_put",
        true,
    )
}

/// PE 1 dies after the set-up; PE 0's kernel then runs `barrier_all`, whose member PE 1 is reached through the
/// proxy: the arrival add to it fails and the barrier's wait ends in `PeerLost` (not in a `Timeout`: the wait
/// checks the proxy's failures).
fn lost_barrier_member(sh: &Shmem) -> xpushmem::Result<()> {
    lost_peer_in(
        sh,
        "lost_barrier_member_is_peer_lost_2pe",
        "k_px_barrier",
        false,
    )
}

/// PE 1 dies after the set-up; PE 0's kernel then puts to it with a signal, without waiting for the put, and waits
/// for its own signal word, which only PE 1 would raise: the wait ends in `PeerLost` once the proxy's put has failed
/// (every device wait checks the proxy's failures), not in a `Timeout` (the wait's bound is 30 s here).
fn lost_signaller(sh: &Shmem) -> xpushmem::Result<()> {
    lost_peer_in(
        sh,
        "lost_signaller_ends_the_signal_wait_2pe",
        "k_px_put_signal_nbi_wait",
        false,
    )
}

/// PE 1 dies; PE 0 then launches `kernel` (`k_px_put`, `k_px_barrier` or `k_px_put_signal_nbi_wait`), which must
/// end in `PeerLost` naming PE 1 (or, when `timeout_ok`, a `Timeout`).
fn lost_peer_in(sh: &Shmem, case: &str, kernel: &str, timeout_ok: bool) -> xpushmem::Result<()> {
    let me = sh.my_pe();
    let dev = sh.device().expect("a device heap");
    let spv = std::fs::read(std::env::var(SPV_VAR).expect("module path")).expect("linked module");
    let module = dev.load_module(&spv)?;
    dev.init_module(&module)?;
    let dst = sh.calloc::<u8>(64)?;
    let src = sh.calloc::<u8>(64)?;
    let status = sh.calloc::<i64>(2)?;
    let flag = sh.calloc::<u64>(1)?;
    let sig = sh.calloc::<u64>(1)?;
    sh.barrier_all()?;
    // Handshake: PE 1 leaves only once PE 0 is out of the barrier (over the fabric a survivor still finishing a
    // barrier the victim has left would see the loss there), and PE 0 launches only once PE 1 is gone.
    if me == 1 {
        sh.signal_wait_until(flag.at(0)?, Cmp::Ge, 1)?;
        // Let the reply to PE 0's atomic leave, then go without finalize.
        std::thread::sleep(std::time::Duration::from_millis(300));
        std::process::exit(0);
    }
    sh.atomic_fetch_add(flag.at(0)?, 1u64, 1)?;
    xpushmem_tests::wait_alone(&test_name(module_path!(), case)).map_err(Error::State)?;
    let k = dev.kernel(&module, kernel)?;
    let args = if kernel == "k_px_barrier" {
        vec![sym(status, me)]
    } else if kernel == "k_px_put_signal_nbi_wait" {
        vec![
            sym(dst, me),
            sym(src, me),
            KernelArg::U64(64),
            sym(sig, me),
            sym(status, me),
        ]
    } else {
        vec![
            sym(dst, me),
            sym(src, me),
            KernelArg::U64(64),
            sym(status, me),
        ]
    };
    // SAFETY: as in kernel_ops.
    let r = unsafe { dev.launch(&k, &args, [1, 1, 1], [1, 1, 1]) };
    match r {
        Err(e @ Error::PeerLost { pe: 1, .. }) => {
            eprintln!("{kernel} with a dead PE ended in: {e}")
        }
        Err(e @ Error::Timeout { .. }) if timeout_ok => {
            eprintln!("{kernel} with a dead PE ended in: {e}")
        }
        other => {
            return Err(Error::State(format!(
                "expected PeerLost (PE 1){} from {kernel} with a dead PE through the proxy, got {other:?}",
                if timeout_ok { " or Timeout" } else { "" }
            )))
        }
    }
    // Without finalize: its barrier would wait for the dead PE (and report it lost).
    std::process::exit(0);
}

#[test]
fn lost_peer_through_the_proxy_is_an_error_2pe() {
    fabric_device_test(
        "lost_peer_through_the_proxy_is_an_error_2pe",
        2,
        &[("XPUSHMEM_TIMEOUT_MS", "30000")],
        lost_peer,
    );
}

#[test]
fn lost_signaller_ends_the_signal_wait_2pe() {
    fabric_device_test(
        "lost_signaller_ends_the_signal_wait_2pe",
        2,
        &[("XPUSHMEM_TIMEOUT_MS", "30000")],
        lost_signaller,
    );
}

/// A linked module of one of the one-node suites' kernel files, loaded and initialised in this PE.
struct Linked<'a> {
    dev: xpushmem::Device<'a>,
    module: xpushmem::device::Module,
}

impl Launch for Linked<'_> {
    fn run(&self, name: &str, args: &[KernelArg], groups: u32, size: u32) -> xpushmem::Result<()> {
        let k = self.dev.kernel(&self.module, name)?;
        // SAFETY: the test kernels touch only the heap buffers passed (within their extents, or refused by the
        // device library's range check), the peers' copies of them through the device library (mapped, or through
        // its proxy) and the library's scratch.
        unsafe { self.dev.launch(&k, args, [groups, 1, 1], [size, 1, 1]) }
    }
}

/// The module the parent linked from `source` (or from fabric_device.cl when `source` is None).
fn linked<'a>(sh: &'a Shmem, source: Option<&str>) -> xpushmem::Result<Linked<'a>> {
    let dev = sh.device().expect("a device heap");
    let var = source.map_or(SPV_VAR.to_string(), module_var);
    let spv = std::fs::read(std::env::var(var).expect("module path")).expect("linked module");
    let module = dev.load_module(&spv)?;
    dev.init_module(&module)?;
    Ok(Linked { dev, module })
}

/// The spanning-team jobs' environment: the node ids.
///
/// A staged operation on a PE (a peer's barrier arrival, an atomic the proxy applies) runs on that PE's device
/// service lane while its kernel spins in a wait. The runtime puts the service lane on the compute group's last
/// engine (`hal/ze/list.rs`, `Engine::Last`), which ze-emu runs on an OpenCL sub-device with its own workers, so it
/// starts while the kernel holds every worker of the first engine (before, these tests stalled in about half of
/// their runs on the loaded 2-core machine: ze-emu's `second_engine_runs_beside_a_kernel_that_fills_the_first`).
fn spanning_env(nodes: &'static str) -> [(&'static str, &'static str); 1] {
    [(NODES_VAR, nodes)]
}

/// Link fabric_device.cl and [`SPANNING_SOURCES`] with the committed device library into `dir`: the variables a
/// PE running [`spanning_body`] needs.
pub(crate) fn link_spanning_modules(dir: &std::path::Path) -> Vec<(String, String)> {
    let kernels = root().join("tests/tests/device_kernels");
    let mut env = vec![(
        SPV_VAR.to_string(),
        device_build::link_with_library(
            &kernels.join("fabric_device.cl"),
            dir,
            "fabric_device.spv",
        )
        .display()
        .to_string(),
    )];
    for source in SPANNING_SOURCES {
        let out = device_build::link_with_library(
            &kernels.join(source),
            dir,
            &source.replace(".cl", ".spv"),
        );
        env.push((module_var(source), out.display().to_string()));
    }
    env
}

/// Barrier rounds per form across nodes (the one-node suite runs 30): each cross-node arrival is a staged atomic
/// on the member's service lane while its kernel waits (see [`spanning_env`]); 5 rounds cover the forms and keep the
/// 4-PE jobs short on 2 cores.
const SPANNING_ROUNDS: u32 = 5;

/// Kernel files the spanning-team jobs link besides fabric_device.cl.
const SPANNING_SOURCES: [&str; 3] = ["device_teams.cl", "device_reduce.cl", "device_rma.cl"];

/// Teams spanning two simulated nodes (`NODES_VAR`): [`kernel_ops`]' point-to-point calls to both neighbours, then
/// the one-node suite's kernels and host references on the world team and on the even/odd strided splits. Barriers in every form (one work-item, work-group, sub-groups of 8, 16
/// and 32), broadcast/int64 sum/fcollect/alltoall in the work-group and every sub-group form, half and bfloat16
/// sum/prod bit for bit against the per-step rounding reference, all 72 reductions, 16-bit atomics on PE 0's words
/// from every PE (the other node's through the proxy), and typed `g` of the right neighbour.
fn spanning(sh: &Shmem) -> xpushmem::Result<()> {
    let nodes: Vec<char> = std::env::var(NODES_VAR)
        .expect("node ids")
        .chars()
        .collect();
    spanning_body(sh, &|pe| nodes[pe] as usize)
}

/// [`spanning`]'s checks, PE `pe` on node `node_of(pe)` (also run by `fabric_netns::netns_device_spanning_4pe`
/// across two network namespaces; the modules' paths come from [`link_spanning_modules`]).
pub(crate) fn spanning_body(sh: &Shmem, node_of: &dyn Fn(usize) -> usize) -> xpushmem::Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    for pe in (0..n).filter(|&p| p != me) {
        let want = if node_of(pe) == node_of(me) {
            "ze"
        } else {
            "fabric"
        };
        check(
            &format!("PE {pe} through {want} (is {})", sh.transport_name(pe)),
            sh.transport_name(pe) == want,
        )?;
    }
    // Point-to-point calls first: put_signal, put_nbi + p + quiet + signal_op, get, fetching atomics.
    kernel_ops(sh)?;
    let teams = linked(sh, Some("device_teams.cl"))?;
    let world = sh.team_world();
    check_team_every_form(sh, &teams, &world, SPANNING_ROUNDS)?;
    check_half_rounding(sh, &teams, &WORK_GROUP)?;
    check_half_rounding(sh, &teams, &SUB_GROUPS[1])?;
    // Strided splits: evens {0, 2} and odds {1, 3}, both spanning at 2+2, the odds at 3+1.
    let evens = sh.team_split_strided(&world, 0, 2, n.div_ceil(2), None)?;
    let odds = sh.team_split_strided(&world, 1, 2, n / 2, None)?;
    let mine = evens.or(odds).expect("a split team of this PE");
    check_team_sync(sh, &teams, &mine, &[ITEM, WORK_GROUP], SPANNING_ROUNDS)?;
    check_team_collectives(sh, &teams, &mine, &WORK_GROUP)?;
    check_team_collectives(sh, &teams, &mine, &SUB_GROUPS[1])?;
    sh.team_destroy(mine)?;
    reductions(sh, &linked(sh, Some("device_reduce.cl"))?)?;
    short_words(sh, &linked(sh, Some("device_rma.cl"))?, 1)?;
    // Typed g of the right neighbour's bytes.
    let fab = linked(sh, None)?;
    let right = (me + 1) % n;
    let src = sh.calloc::<u8>(32)?;
    let out = sh.calloc::<i64>(8)?;
    sh.put(src, &ref_vec::<u8>(me, 32, 77), me)?;
    sh.barrier_all()?;
    fab.run("k_px_g", &[sym(src, me), sym(out, me)], 1, 1)?;
    let b = ref_vec::<u8>(right, 32, 77);
    let le = |at: usize, len: usize| -> u64 {
        let mut w = [0u8; 8];
        w[..len].copy_from_slice(&b[at..at + len]);
        u64::from_le_bytes(w)
    };
    let want = [
        i64::from(b[1] as i8),
        i64::from(le(2, 2) as u16 as i16),
        i64::from(le(4, 4) as u32 as i32),
        le(8, 8) as i64,
        i64::from(le(16, 4) as u32 as i32),
        le(24, 8) as i64,
        i64::from(b[3]),
        le(6, 2) as i64,
    ];
    let mut got = [0i64; 8];
    sh.get(&mut got, out, me)?;
    check(
        &format!(
            "typed g of PE {right} ({}): {got:x?}, want {want:x?}",
            sh.transport_name(right)
        ),
        got == want,
    )?;
    sh.barrier_all()?;
    Ok(())
}

#[test]
fn spanning_teams_2plus2_4pe() {
    fabric_device_test_with(
        "spanning_teams_2plus2_4pe",
        4,
        &spanning_env("aabb"),
        &SPANNING_SOURCES,
        spanning,
    );
}

#[test]
fn spanning_teams_3plus1_4pe() {
    fabric_device_test_with(
        "spanning_teams_3plus1_4pe",
        4,
        &spanning_env("aaab"),
        &SPANNING_SOURCES,
        spanning,
    );
}

#[test]
fn lost_barrier_member_is_peer_lost_2pe() {
    fabric_device_test(
        "lost_barrier_member_is_peer_lost_2pe",
        2,
        &[("XPUSHMEM_TIMEOUT_MS", "30000")],
        lost_barrier_member,
    );
}

/// Peer capabilities checked, not assumed: one node of 3 PEs on 3 ze-emu devices whose topology
/// (`XPUSHMEM_EMU_P2P`) gives devices 0 and 2 no peer access and devices 1 and 2 access without atomics. PEs 0 and
/// 1 map each other's heaps (the direct path: `ze`, a device address); PE 2 and the others reach each other through
/// the host (`fabric` routes, no mapping, so the device library's bases table holds 0 and kernels use the proxy
/// ring) in both directions, since either side lacking something is enough. Host and kernel operations around the
/// ring then cross both kinds of link, every result checked against a reference.
fn p2p_limited(sh: &Shmem) -> xpushmem::Result<()> {
    let me = sh.my_pe();
    for pe in (0..sh.n_pes()).filter(|&p| p != me) {
        let direct = me < 2 && pe < 2;
        let want = if direct { "ze" } else { "fabric" };
        check(
            &format!(
                "PE {me} reaches PE {pe} through {want} (is {}, mapped {})",
                sh.transport_name(pe),
                sh.is_mapped(pe)
            ),
            sh.transport_name(pe) == want && sh.is_mapped(pe) == direct,
        )?;
    }
    host_ops(sh)?;
    kernel_ops(sh)
}

#[test]
fn p2p_limited_peers_use_the_proxy_3pe() {
    fabric_device_test(
        "p2p_limited_peers_use_the_proxy_3pe",
        3,
        &[
            (NODES_VAR, "aaa"),
            ("XPUSHMEM_EMU_DEVICES", "3"),
            ("XPUSHMEM_EMU_P2P", "0-2:none,1-2:access"),
        ],
        p2p_limited,
    );
}
