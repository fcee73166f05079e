//! The device library (shmem/device-lib) in kernels of several processes on ze-emu (real loader, validation
//! layer on): OpenCL C kernels (device_kernels/device_lib.cl) linked with the committed bitcode
//! `libxpushmem_device-<version>.bc` (llvm-link, then llvm-spirv), modules initialised with
//! `Device::init_module`, every result checked against a host-side reference.

use crate::device_checks::{
    check_half_rounding, check_team_collectives, check_team_every_form, reductions, short_words,
    Launch, SUB_GROUPS, WORK_GROUP,
};
use std::path::{Path, PathBuf};
use xpushmem::{Device, Error, KernelArg, Shmem};
use xpushmem_tests::device_build::{self, compile_cl, root, run_tool};

const SPV_VAR: &str = "XPUSHMEM_TEST_DEVICE_LIB_SPV";
/// Kernels of every family but the reductions.
const K: &str = "device_lib.cl";
/// The reduction kernel.
const R: &str = "device_reduce.cl";

/// Compile the test kernels of `source` (in device_kernels/) and link them with the committed device-library
/// bitcode into `dir/linked.spv`.
fn build_linked(dir: &Path, source: &str) -> PathBuf {
    let src = root().join("tests/tests/device_kernels").join(source);
    device_build::link_with_library(&src, dir, "linked.spv")
}

/// Run `body` on `n` device-heap PEs; the parent builds the linked module once and passes its path.
fn device_lib_test(
    func: &str,
    n: usize,
    source: &str,
    extra: &[(&str, &str)],
    body: fn(&Shmem, &Lib) -> xpushmem::Result<()>,
) {
    let name = xpushmem_tests::test_name(module_path!(), func);
    if xpushmem_tests::is_pe_of(&name) {
        let spv =
            std::fs::read(std::env::var(SPV_VAR).expect("module path")).expect("linked module");
        xpushmem_tests::run_pe(|sh| {
            let dev = sh.device().expect("a device heap");
            let module = dev.load_module(&spv)?;
            dev.init_module(&module)?;
            body(sh, &Lib { dev, module })
        });
    }
    let dir = std::env::temp_dir().join(format!("xpushmem-devlib-{}-{func}", std::process::id()));
    // "spirv:NAME": the kernels of NAME linked on the SPIR-V path (spirv-link.sh) instead of the bitcode path.
    let spv = match source.strip_prefix("spirv:") {
        Some(name) => spirv_linked(&dir, &format!("tests/tests/device_kernels/{name}"))
            .unwrap_or_else(|e| panic!("spirv-link.sh failed: {e}")),
        None => build_linked(&dir, source),
    };
    let mut vars = vec![(SPV_VAR, spv.display().to_string())];
    vars.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
    run_linked(&name, n, &dir, &vars);
}

/// Run `name`'s `n` device-heap PEs with the device environment and `vars` (the linked modules' paths among
/// them), remove `dir` (where the modules were linked), and assert that every PE succeeded.
fn run_linked(name: &str, n: usize, dir: &Path, vars: &[(&str, String)]) {
    let mut env = xpushmem_tests::device_env();
    env.extend(vars.iter().map(|(k, v)| (k.to_string(), v.clone())));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let out = xpushmem_tests::spawn_pes_with(name, n, &env);
    let _ = std::fs::remove_dir_all(dir);
    xpushmem_tests::assert_success(name, n, &out);
}

/// The linked, initialised module of a PE.
struct Lib<'a> {
    dev: Device<'a>,
    module: xpushmem::device::Module,
}

impl Launch for Lib<'_> {
    fn run(&self, name: &str, args: &[KernelArg], groups: u32, size: u32) -> xpushmem::Result<()> {
        let k = self.dev.kernel(&self.module, name)?;
        // SAFETY: the test kernels touch only the heap buffers passed as arguments (within their extents), the
        // peers' copies of those buffers through the device library, and the library's scratch; work-groups
        // that wait on each other are launched as one group.
        unsafe { self.dev.launch(&k, args, [groups, 1, 1], [size, 1, 1]) }
    }
}

fn sym<T: xpushmem::Symmetric>(s: xpushmem::SymSlice<T>, pe: usize) -> KernelArg {
    KernelArg::sym(s, pe)
}

// ---- queries and the ring of putmem_signal ------------------------------------------------------------------

fn queries_and_ring(sh: &Shmem, lib: &Lib) -> xpushmem::Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let out = sh.calloc::<i64>(4 + n)?;
    let probe = sh.calloc::<i64>(1)?;
    lib.run("k_queries", &[sym(out, me), sym(probe, me)], 1, 1)?;
    let mut got = vec![0i64; 4 + n];
    sh.get(&mut got, out, me)?;
    assert_eq!(got[0], me as i64, "xpushmem_my_pe");
    assert_eq!(got[1], n as i64, "xpushmem_n_pes");
    for pe in 0..n {
        // The host's view of the same mapping (shmem_ptr on a device heap: the device address of PE pe's copy).
        let want = sh.ptr(probe, pe)?.expect("node peers are mapped") as i64;
        assert_eq!(got[2 + pe], want, "xpushmem_ptr(probe, {pe})");
    }
    assert_eq!(got[2 + n], me as i64, "team_my_pe(world)");
    assert_eq!(got[3 + n], n as i64, "team_n_pes(world)");

    // Ring: 3 rounds (SET, ADD, ADD) of 1 KiB + 3 bytes from every PE to its right neighbour.
    const N: usize = 1027;
    let dst = sh.calloc::<u8>(N)?;
    let src = sh.calloc::<u8>(N)?;
    let outb = sh.calloc::<u8>(N)?;
    let sig = sh.calloc::<u64>(1)?;
    let status = sh.calloc::<i32>(2)?;
    let left = (me + n - 1) % n;
    let mut expect = 0u64;
    for (round, (op, value)) in [(0i32, 5u64), (1, 7), (1, 11)].into_iter().enumerate() {
        let data: Vec<u8> = xpushmem_tests::ref_vec(me, N, round as u64);
        sh.put(src, &data, me)?;
        expect = if op == 0 { value } else { expect + value };
        sh.barrier_all()?; // every PE's previous round is read before anyone overwrites dst
        let args = [
            sym(dst, me),
            sym(src, me),
            KernelArg::U64(N as u64),
            sym(sig, me),
            KernelArg::U64(value),
            KernelArg::U32(op as u32),
            KernelArg::U64(expect),
            sym(outb, me),
            sym(status, me),
        ];
        lib.run("k_ring", &args, 1, 64)?;
        let mut st = [0i32; 2];
        sh.get(&mut st, status, me)?;
        assert_eq!(
            st,
            [0, 1],
            "round {round}: put status and signal value {expect}"
        );
        let mut got = vec![0u8; N];
        sh.get(&mut got, outb, me)?;
        assert_eq!(
            got,
            xpushmem_tests::ref_vec::<u8>(left, N, round as u64),
            "round {round}: data from PE {left}"
        );
        assert_eq!(
            sh.signal_fetch(sig.at(0)?)?,
            expect,
            "round {round}: signal word"
        );
    }
    sh.barrier_all()?;
    Ok(())
}

#[test]
fn putmem_signal_ring_2pe() {
    device_lib_test("putmem_signal_ring_2pe", 2, K, &[], queries_and_ring);
}

#[test]
fn putmem_signal_ring_3pe() {
    device_lib_test("putmem_signal_ring_3pe", 3, K, &[], queries_and_ring);
}

#[test]
fn putmem_signal_ring_4pe() {
    device_lib_test("putmem_signal_ring_4pe", 4, K, &[], queries_and_ring);
}

// ---- atomics ------------------------------------------------------------------------------------------------

/// Every PE's kernel does 100 x 100 fetch_adds of 1 on PE 0's word.
fn fetch_add_total(sh: &Shmem, lib: &Lib) -> xpushmem::Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    const ITEMS: usize = 100;
    const PER_ITEM: u32 = 100;
    let word = sh.calloc::<u64>(1)?;
    let maxold = sh.calloc::<u64>(ITEMS)?;
    sh.barrier_all()?;
    lib.run(
        "k_fetch_add",
        &[
            sym(word, me),
            KernelArg::U32(0),
            KernelArg::U32(PER_ITEM),
            sym(maxold, me),
        ],
        1,
        ITEMS as u32,
    )?;
    sh.barrier_all()?;
    let total = (ITEMS as u64) * u64::from(PER_ITEM) * n as u64;
    let mut got = [0u64; 1];
    sh.get(&mut got, word, 0)?;
    assert_eq!(
        got[0], total,
        "PE 0's word after {n} x 10 000 device fetch_adds"
    );
    let mut olds = vec![0u64; ITEMS];
    sh.get(&mut olds, maxold, me)?;
    assert!(
        olds.iter().all(|&o| o < total),
        "fetch_add returned an old value >= the total: {olds:?}"
    );
    sh.barrier_all()?;
    Ok(())
}

#[test]
fn fetch_add_total_2pe() {
    device_lib_test("fetch_add_total_2pe", 2, K, &[], fetch_add_total);
}

#[test]
fn fetch_add_total_4pe() {
    device_lib_test("fetch_add_total_4pe", 4, K, &[], fetch_add_total);
}

/// compare_swap(0 -> me+1) on PE 0's word: exactly one PE sees 0, and everyone then reads the winner.
fn compare_swap_election(sh: &Shmem, lib: &Lib) -> xpushmem::Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let word = sh.calloc::<i32>(1)?;
    let out = sh.calloc::<i32>(2)?;
    sh.barrier_all()?;
    lib.run("k_elect", &[sym(word, me), sym(out, me)], 1, 1)?;
    sh.barrier_all()?;
    let mut all = vec![[0i32; 2]; n];
    for (pe, o) in all.iter_mut().enumerate() {
        sh.get(o, out, pe)?;
    }
    let winners: Vec<usize> = (0..n).filter(|&pe| all[pe][0] == 0).collect();
    assert_eq!(winners.len(), 1, "exactly one PE wins: {all:?}");
    let w = winners[0] as i32 + 1;
    for (pe, o) in all.iter().enumerate() {
        assert_eq!(o[1], w, "PE {pe} reads the winner");
        if pe != winners[0] {
            assert_eq!(o[0], w, "PE {pe}'s compare_swap saw the winner's value");
        }
    }
    sh.barrier_all()?;
    Ok(())
}

#[test]
fn compare_swap_election_3pe() {
    device_lib_test(
        "compare_swap_election_3pe",
        3,
        K,
        &[],
        compare_swap_election,
    );
}

#[test]
fn compare_swap_election_4pe() {
    device_lib_test(
        "compare_swap_election_4pe",
        4,
        K,
        &[],
        compare_swap_election,
    );
}

// ---- barriers and ordering ----------------------------------------------------------------------------------

/// 200 rounds of device barrier_all (one work-item), then 50 of the work-group form: data written before each
/// barrier is read after it.
fn barrier_rounds(sh: &Shmem, lib: &Lib) -> xpushmem::Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let slot = sh.calloc::<i64>(1)?;
    let bad = sh.calloc::<i64>(2)?;
    let left = ((me + n - 1) % n) as i64;
    for (iters, wg, size) in [(200u32, 0u32, 1u32), (50, 1, 16)] {
        sh.barrier_all()?;
        lib.run(
            "k_barrier",
            &[
                sym(slot, me),
                KernelArg::U32(iters),
                KernelArg::U32(wg),
                sym(bad, me),
            ],
            1,
            size,
        )?;
        let mut got = [0i64; 2];
        sh.get(&mut got, bad, me)?;
        assert_eq!(
            got[0], 0,
            "stale reads after {iters} device barriers (work-group form: {wg})"
        );
        assert_eq!(
            got[1],
            (iters as i64 - 1) * n as i64 + left,
            "last value from PE {left}"
        );
    }
    sh.barrier_all()?;
    Ok(())
}

#[test]
fn device_barrier_rounds_2pe() {
    device_lib_test("device_barrier_rounds_2pe", 2, K, &[], barrier_rounds);
}

#[test]
fn device_barrier_rounds_4pe() {
    device_lib_test("device_barrier_rounds_4pe", 4, K, &[], barrier_rounds);
}

// ---- a device heap that grows -------------------------------------------------------------------------------

/// Issue #30 item 4 on device heaps: with a 1 MiB first chunk and a 16 MiB maximum, buffers allocated past the
/// first chunk grow every PE's heap (each PE maps its node peer's new chunk at the allocation's agreement). The
/// module, initialised before the growth, puts into the right neighbour's grown part through the device library
/// (bases table, symmetric-address check) and signals it; a host put into the neighbour's grown part lands there;
/// the device barrier (peers' scratch tails, after the reserve) still works. An allocation past the maximum is
/// `HeapExhausted` naming its size, on every PE, and the heap stays usable.
fn grown_heap(sh: &Shmem, lib: &Lib) -> xpushmem::Result<()> {
    const FIRST: usize = 1 << 20;
    assert_eq!(sh.heap_size(), FIRST, "the first chunk");
    assert_eq!(sh.heap_max(), 16 << 20, "XPUSHMEM_SYMMETRIC_MAX");
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);
    // Before the growth, a device put whose range ends past the part mapped so far (inside the reserve) is
    // refused as not symmetric, by a module initialised before any growth: not a fault on unmapped pages. (After
    // the growth, the same module's k_ring below puts past the first chunk: the check follows the heap.)
    let small = sh.calloc::<u8>(64)?;
    let st0 = sh.calloc::<i32>(1)?;
    let past = [
        sym(small, me),
        sym(small, me),
        KernelArg::U64((FIRST + 4096) as u64),
        KernelArg::U32(right as u32),
        KernelArg::U32(0),
        sym(st0, me),
    ];
    let r = lib.run("k_wg_copy", &past, 1, 64);
    assert!(
        matches!(&r, Err(Error::Device(m)) if m.contains("NotSymmetric")),
        "a put past the mapped part: {r:?}"
    );
    sh.barrier_all()?;
    const N: usize = FIRST + 12345;
    let dst = sh.calloc::<u8>(N)?;
    let src = sh.malloc::<u8>(N)?;
    let outb = sh.calloc::<u8>(N)?;
    let sig = sh.calloc::<u64>(1)?;
    let status = sh.calloc::<i32>(2)?;
    assert!(
        sh.heap_size() > FIRST && sh.heap_size() % FIRST == 0,
        "grown by whole chunks: {}",
        sh.heap_size()
    );
    assert!(
        dst.heap_offset() + N > FIRST && outb.heap_offset() + N <= sh.heap_size(),
        "{dst:?} {outb:?} in a heap of {}",
        sh.heap_size()
    );
    let data: Vec<u8> = xpushmem_tests::ref_vec(me, N, 9);
    sh.put(src, &data, me)?;
    sh.barrier_all()?;
    let args = [
        sym(dst, me),
        sym(src, me),
        KernelArg::U64(N as u64),
        sym(sig, me),
        KernelArg::U64(5),
        KernelArg::U32(0),
        KernelArg::U64(5),
        sym(outb, me),
        sym(status, me),
    ];
    lib.run("k_ring", &args, 1, 64)?;
    let mut st = [0i32; 2];
    sh.get(&mut st, status, me)?;
    assert_eq!(st, [0, 1], "put status and signal value");
    let mut got = vec![0u8; N];
    sh.get(&mut got, outb, me)?;
    assert!(
        got == xpushmem_tests::ref_vec::<u8>(left, N, 9),
        "kernel-put data from PE {left}"
    );
    // A host put into the neighbour's grown part (through this PE's mapping of its new chunk).
    sh.barrier_all()?;
    let end = dst.slice(N - 4096..N)?;
    sh.put(end, &xpushmem_tests::ref_vec::<u8>(me, 4096, 10), right)?;
    sh.barrier_all()?;
    let mut got = vec![0u8; 4096];
    sh.get(&mut got, end, me)?;
    assert_eq!(
        got,
        xpushmem_tests::ref_vec::<u8>(left, 4096, 10),
        "host put from PE {left}"
    );
    barrier_rounds(sh, lib)?;
    // Past the maximum: the typed error naming the size, on every PE; the heap stays usable.
    let big = 15 << 20;
    let e = sh.malloc::<u8>(big).unwrap_err();
    assert!(
        matches!(e, Error::HeapExhausted { requested, .. } if requested == big)
            && e.to_string().contains("XPUSHMEM_SYMMETRIC_MAX"),
        "{e}"
    );
    let again = sh.malloc::<u8>(FIRST)?;
    sh.barrier_all()?;
    for s in [again, dst, src, outb, small] {
        sh.free(s)?;
    }
    sh.free(sig)?;
    sh.free(st0)?;
    sh.free(status)
}

#[test]
fn device_heap_grows_past_its_first_chunk_2pe() {
    device_lib_test(
        "device_heap_grows_past_its_first_chunk_2pe",
        2,
        K,
        &[
            ("XPUSHMEM_SYMMETRIC_SIZE", "1M"),
            ("XPUSHMEM_SYMMETRIC_MAX", "16M"),
        ],
        grown_heap,
    );
}

/// Out of device memory while growing: ze-emu's `XPUSHMEM_EMU_MEMORY` lets PE 0's device hold 6 MiB of physical
/// memory and PE 1's 16 MiB. An 8 MiB allocation, whose 7 MiB chunk does not fit on PE 0, fails on both PEs: PE 0
/// with the device's out-of-memory error naming the chunk's size, PE 1 (whose chunk was mapped) with the
/// agreement's verdict naming PE 0; the heap stays as it was on both (PE 1 unmaps its chunk again). Then
/// [`grown_heap`] grows both heaps alike within the caps.
fn out_of_device_memory(sh: &Shmem, lib: &Lib) -> xpushmem::Result<()> {
    const FIRST: usize = 1 << 20;
    assert_eq!(sh.heap_size(), FIRST, "the first chunk");
    let e = sh.malloc::<u8>(8 << 20).unwrap_err();
    if sh.my_pe() == 0 {
        assert!(
            e.ze_result().and_then(|r| r.name()) == Some("ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY")
                && e.to_string()
                    .contains(&format!("{} bytes of device memory", 7 << 20)),
            "{e}"
        );
    } else {
        assert!(
            e.to_string().contains("PE 0"),
            "the verdict names PE 0: {e}"
        );
    }
    assert_eq!(sh.heap_size(), FIRST, "the heap stays as it was");
    sh.barrier_all()?;
    grown_heap(sh, lib)
}

#[test]
fn device_heap_out_of_memory_while_growing_2pe() {
    device_lib_test(
        "device_heap_out_of_memory_while_growing_2pe",
        2,
        K,
        &[
            ("XPUSHMEM_SYMMETRIC_SIZE", "1M"),
            ("XPUSHMEM_SYMMETRIC_MAX", "16M"),
            ("XPUSHMEM_EMU_DEVICES", "2"),
            ("XPUSHMEM_EMU_MEMORY", "6291456,16777216"),
        ],
        out_of_device_memory,
    );
}

// ---- team-scoped allocations on device heaps ------------------------------------------------------------------

/// Issue #30 item 6 on device heaps: at 3 PEs, PEs 0 and 1 make a team of their own (`team_of_members`, its slot a
/// chunk of the team space; PE 2 never calls and meets them only at the last world barrier) and allocate in the
/// team space past its first chunk: each allocation is whole device pages (ze-emu's 64 KiB) at the same offset on
/// both members, the data buffers several pages each. A kernel on each member puts the member's reference data
/// into the other's copy and then signals it (an atomic add on its word); each waits for the signal on the host and
/// checks the data against the other's reference. A device put whose range ends past the team space's mapped end
/// is refused (`NotSymmetric`, by a module initialised before any team allocation), and a reduction over the team
/// runs on its slot. After the frees a new allocation gets the first allocation's offset again, with fresh zeroed
/// pages on both members; a team allocation that one member's device cannot hold fails on both and leaves nothing.
fn team_space(sh: &Shmem, lib: &Lib) -> xpushmem::Result<()> {
    const PAGE: usize = 64 << 10;
    const N: usize = 3 * PAGE + 123;
    let me = sh.my_pe();
    if me == 2 {
        return sh.barrier_all();
    }
    let other = 1 - me;
    let t = sh.team_of_members(&[0, 1], 30)?;
    let sig = sh.team_calloc::<u64>(&t, 1)?;
    let dst = sh.team_calloc::<u8>(&t, N)?;
    let src = sh.team_malloc::<u8>(&t, N)?;
    let status = sh.team_calloc::<i32>(&t, 1)?;
    let old = sh.team_calloc::<u64>(&t, 1)?;
    let offs = [
        sig.heap_offset(),
        dst.heap_offset(),
        src.heap_offset(),
        status.heap_offset(),
        old.heap_offset(),
    ];
    assert!(
        offs.windows(2).all(|w| w[0] + PAGE <= w[1])
            && offs.iter().all(|&o| o >= sh.heap_max() && o % PAGE == 0),
        "whole pages of their own, in the team space after the world's reserve {}: {offs:x?}",
        sh.heap_max()
    );
    // The last allocation (`old`, 8 bytes) is the team space's last page: a put that ends past it is refused.
    let past = [
        sym(old, me),
        sym(old, me),
        KernelArg::U64((PAGE + 64) as u64),
        KernelArg::U32(other as u32),
        KernelArg::U32(0),
        sym(status, me),
    ];
    let r = lib.run("k_wg_copy", &past, 1, 64);
    assert!(
        matches!(&r, Err(Error::Device(m)) if m.contains("NotSymmetric")),
        "a put past the team space's mapped end: {r:?}"
    );
    sh.put(src, &xpushmem_tests::ref_vec::<u8>(me, N, 11), me)?;
    sh.team_sync(&t)?;
    let copy = [
        sym(dst, me),
        sym(src, me),
        KernelArg::U64(N as u64),
        KernelArg::U32(other as u32),
        KernelArg::U32(0),
        sym(status, me),
    ];
    lib.run("k_wg_copy", &copy, 1, 64)?;
    let add = [
        sym(sig, me),
        KernelArg::U32(other as u32),
        KernelArg::U32(1),
        sym(old, me),
    ];
    lib.run("k_fetch_add", &add, 1, 1)?;
    let mut st = [7i32];
    sh.get(&mut st, status, me)?;
    assert_eq!(st, [0], "the kernel's put status");
    assert_eq!(sh.signal_wait_until(sig.at(0)?, xpushmem::Cmp::Ge, 1)?, 1);
    let mut got = vec![0u8; N];
    sh.get(&mut got, dst, me)?;
    assert!(
        got == xpushmem_tests::ref_vec::<u8>(other, N, 11),
        "kernel-put data from PE {other}"
    );
    // A reduction over the team (its slot in the team space), into a team allocation.
    sh.put(old, &[me as u64 + 1], me)?;
    sh.team_sync(&t)?;
    sh.sum_reduce(&t, sig, old, 1)?;
    let mut sum = [0u64];
    sh.get(&mut sum, sig, me)?;
    assert_eq!(sum, [3], "1 + 2 over the team");
    for s in [dst, src] {
        sh.team_free(&t, s)?;
    }
    for s in [sig, old] {
        sh.team_free(&t, s)?;
    }
    sh.team_free(&t, status)?;
    // The freed pages went (the other member's data was in `dst`'s); an allocation over them maps fresh ones on
    // both members, which each member's view of the other's follows.
    let again = sh.team_calloc::<u8>(&t, N)?;
    assert_eq!(again.heap_offset(), offs[0], "the first free pages again");
    let mut got = vec![1u8; N];
    sh.get(&mut got, again, other)?;
    assert!(got.iter().all(|&b| b == 0), "zeroed, read from PE {other}");
    sh.team_free(&t, again)?;
    // Out of device memory (ze-emu's XPUSHMEM_EMU_MEMORY: PE 1's device holds 4 MiB): a 6 MiB team allocation fails
    // on both members, PE 1 with the device's error, PE 0 (whose chunk was mapped) with the verdict naming PE 1;
    // PE 0 unmaps its chunk again, so the next allocation maps the same offset afresh on both.
    let e = sh.team_malloc::<u8>(&t, 6 << 20).unwrap_err();
    if me == 1 {
        assert!(
            e.ze_result().and_then(|r| r.name()) == Some("ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY"),
            "{e}"
        );
    } else {
        assert!(
            e.to_string().contains("PE 1"),
            "the verdict names PE 1: {e}"
        );
    }
    let after = sh.team_calloc::<u64>(&t, 1)?;
    assert_eq!(
        after.heap_offset(),
        offs[0],
        "nothing of the failed allocation stays"
    );
    sh.put(after, &[me as u64 + 40], other)?;
    sh.team_sync(&t)?;
    let mut v = [0u64];
    sh.get(&mut v, after, me)?;
    assert_eq!(v, [other as u64 + 40], "put by PE {other}");
    sh.team_free(&t, after)?;
    sh.team_destroy(t)?;
    sh.barrier_all()
}

#[test]
fn device_team_space_3pe() {
    device_lib_test(
        "device_team_space_3pe",
        3,
        K,
        &[
            ("XPUSHMEM_SYMMETRIC_SIZE", "1M"),
            ("XPUSHMEM_SYMMETRIC_MAX", "16M"),
            ("XPUSHMEM_EMU_DEVICES", "3"),
            ("XPUSHMEM_EMU_MEMORY", "16777216,4194304,16777216"),
        ],
        team_space,
    );
}

/// Even PEs write a = i; fence; b = i into the next PE; the reader never sees b ahead of a.
fn fence_ordering(sh: &Shmem, lib: &Lib) -> xpushmem::Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    const N: i64 = 20_000;
    let a = sh.calloc::<i64>(1)?;
    let b = sh.calloc::<i64>(1)?;
    let out = sh.calloc::<i64>(2)?;
    sh.barrier_all()?;
    if me % 2 == 0 && me + 1 < n {
        lib.run(
            "k_fence_writer",
            &[
                sym(a, me),
                sym(b, me),
                KernelArg::U64(N as u64),
                KernelArg::U32(me as u32 + 1),
            ],
            1,
            1,
        )?;
    } else if me % 2 == 1 {
        lib.run(
            "k_fence_reader",
            &[
                sym(a, me),
                sym(b, me),
                KernelArg::U64(N as u64),
                sym(out, me),
            ],
            1,
            1,
        )?;
        let mut got = [0i64; 2];
        sh.get(&mut got, out, me)?;
        assert_eq!(
            got[0], 0,
            "the reader saw the second put before the first ({} observations)",
            got[1]
        );
        assert!(got[1] >= 1);
        let mut ab = [0i64; 1];
        sh.get(&mut ab, a, me)?;
        assert_eq!(ab[0], N, "the last a");
    }
    sh.barrier_all()?;
    Ok(())
}

#[test]
fn fence_ordering_2pe() {
    device_lib_test("fence_ordering_2pe", 2, K, &[], fence_ordering);
}

#[test]
fn fence_ordering_4pe() {
    device_lib_test("fence_ordering_4pe", 4, K, &[], fence_ordering);
}

// ---- work-group copies --------------------------------------------------------------------------------------

/// putmem/getmem_work_group of 1 B .. 4 MiB and odd sizes (odd ones misaligned by a byte) at group sizes 1, 16,
/// 64 and 256.
fn work_group_copies(sh: &Shmem, lib: &Lib) -> xpushmem::Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    const MAX: usize = 4 << 20;
    let src = sh.malloc::<u8>(MAX + 1)?;
    let dst = sh.malloc::<u8>(MAX + 1)?;
    let status = sh.calloc::<i32>(1)?;
    let data: Vec<u8> = xpushmem_tests::ref_vec(me, MAX + 1, 3);
    let left_data: Vec<u8> = xpushmem_tests::ref_vec(left, MAX + 1, 3);
    sh.put(src, &data, me)?;
    let mut got = vec![0u8; MAX];
    for group in [1u32, 16, 64, 256] {
        for size in [1usize, 7, 64, 1000, 4093, 65539, 1 << 20, MAX] {
            let skew = size % 2; // odd sizes start one byte in: the byte path
            let s = src.slice(skew..skew + size)?;
            let d = dst.slice(skew..skew + size)?;
            for mode in [0u32, 1] {
                sh.barrier_all()?;
                // mode 0: put my src into the right neighbour's dst; mode 1: get the left neighbour's src into mine.
                let pe = if mode == 0 { right } else { left };
                lib.run(
                    "k_wg_copy",
                    &[
                        sym(d, me),
                        sym(s, me),
                        KernelArg::U64(size as u64),
                        KernelArg::U32(pe as u32),
                        KernelArg::U32(mode),
                        sym(status, me),
                    ],
                    1,
                    group,
                )?;
                let mut st = [0i32];
                sh.get(&mut st, status, me)?;
                assert_eq!(st[0], 0, "status of mode {mode}, {size} B, group {group}");
                sh.barrier_all()?;
                sh.get(&mut got[..size], d, me)?;
                assert!(
                    got[..size] == left_data[skew..skew + size],
                    "{} of {size} B at group size {group}: data from PE {left}",
                    if mode == 0 {
                        "putmem_work_group"
                    } else {
                        "getmem_work_group"
                    }
                );
                sh.put(d, &vec![0u8; size], me)?;
            }
        }
    }
    sh.barrier_all()?;
    Ok(())
}

#[test]
fn work_group_copies_2pe() {
    device_lib_test("work_group_copies_2pe", 2, K, &[], work_group_copies);
}

#[test]
fn work_group_copies_3pe() {
    device_lib_test("work_group_copies_3pe", 3, K, &[], work_group_copies);
}

// ---- work-group collectives ---------------------------------------------------------------------------------

fn collectives(sh: &Shmem, lib: &Lib) -> xpushmem::Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    const B: usize = 1003;
    let src = sh.calloc::<u8>(B * n)?;
    let dst = sh.calloc::<u8>(B * n)?;
    let status = sh.calloc::<i32>(1)?;
    let mut got = vec![0u8; B * n];
    let check_status = |what: &str| -> xpushmem::Result<()> {
        let mut st = [0i32];
        sh.get(&mut st, status, me)?;
        assert_eq!(st[0], 0, "{what} status");
        Ok(())
    };
    // alltoall: block j of my src goes to PE j's block me.
    let data: Vec<u8> = xpushmem_tests::ref_vec(me, B * n, 10);
    sh.put(src, &data, me)?;
    sh.barrier_all()?;
    lib.run(
        "k_alltoall",
        &[
            sym(dst, me),
            sym(src, me),
            KernelArg::U64(B as u64),
            sym(status, me),
        ],
        1,
        32,
    )?;
    check_status("alltoallmem")?;
    sh.get(&mut got, dst, me)?;
    for j in 0..n {
        let theirs: Vec<u8> = xpushmem_tests::ref_vec(j, B * n, 10);
        assert_eq!(
            &got[B * j..B * (j + 1)],
            &theirs[B * me..B * (me + 1)],
            "alltoall block from PE {j}"
        );
    }
    // broadcast from the last PE: everyone (the root included) gets the root's B bytes.
    let root = n - 1;
    sh.barrier_all()?;
    lib.run(
        "k_broadcast",
        &[
            sym(dst, me),
            sym(src, me),
            KernelArg::U64(B as u64),
            KernelArg::U32(root as u32),
            sym(status, me),
        ],
        1,
        16,
    )?;
    check_status("broadcastmem")?;
    sh.get(&mut got[..B], dst, me)?;
    assert_eq!(
        &got[..B],
        &xpushmem_tests::ref_vec::<u8>(root, B * n, 10)[..B],
        "broadcast from PE {root}"
    );
    // fcollect: block j of dst is PE j's first B bytes.
    sh.barrier_all()?;
    lib.run(
        "k_fcollect",
        &[
            sym(dst, me),
            sym(src, me),
            KernelArg::U64(B as u64),
            sym(status, me),
        ],
        1,
        64,
    )?;
    check_status("fcollectmem")?;
    sh.get(&mut got, dst, me)?;
    for j in 0..n {
        assert_eq!(
            &got[B * j..B * (j + 1)],
            &xpushmem_tests::ref_vec::<u8>(j, B * n, 10)[..B],
            "fcollect block {j}"
        );
    }
    sh.barrier_all()?;
    Ok(())
}

#[test]
fn work_group_collectives_2pe() {
    device_lib_test("work_group_collectives_2pe", 2, K, &[], collectives);
}

#[test]
fn work_group_collectives_3pe() {
    device_lib_test("work_group_collectives_3pe", 3, K, &[], collectives);
}

#[test]
fn work_group_collectives_4pe() {
    device_lib_test("work_group_collectives_4pe", 4, K, &[], collectives);
}

// ---- reductions ---------------------------------------------------------------------------------------------

#[test]
fn work_group_reductions_2pe() {
    device_lib_test("work_group_reductions_2pe", 2, R, &[], |sh, lib| {
        reductions(sh, lib)
    });
}

#[test]
fn work_group_reductions_4pe() {
    device_lib_test("work_group_reductions_4pe", 4, R, &[], |sh, lib| {
        reductions(sh, lib)
    });
}

// ---- errors -------------------------------------------------------------------------------------------------

/// A wait nobody satisfies ends in the host's Timeout naming the call; the module then runs its next kernel.
fn wait_timeout(sh: &Shmem, lib: &Lib) -> xpushmem::Result<()> {
    let me = sh.my_pe();
    let sig = sh.calloc::<u64>(1)?;
    let out = sh.calloc::<u64>(1)?;
    match lib.run("k_wait_forever", &[sym(sig, me), sym(out, me)], 1, 1) {
        Err(Error::Timeout { op, .. }) => {
            assert!(
                op.contains("xpushmem_signal_wait_until") && op.contains("k_wait_forever"),
                "{op}"
            )
        }
        other => panic!("expected a Timeout, got {other:?}"),
    }
    let q = sh.calloc::<i64>(8)?;
    let probe = sh.calloc::<i64>(1)?;
    lib.run("k_queries", &[sym(q, me), sym(probe, me)], 1, 1)?;
    let mut got = [0i64; 2];
    sh.get(&mut got, q.slice(0..2)?, me)?;
    assert_eq!(
        got,
        [me as i64, sh.n_pes() as i64],
        "the next kernel runs normally"
    );
    // A module whose state was never set: its calls record NotInitialized, which the launch reports.
    let spv = std::fs::read(std::env::var(SPV_VAR).expect("module path")).expect("linked module");
    let raw = lib.dev.load_module(&spv)?;
    let k = lib.dev.kernel(&raw, "k_queries")?;
    // SAFETY: as in Lib::run.
    let r = unsafe {
        lib.dev
            .launch(&k, &[sym(q, me), sym(probe, me)], [1, 1, 1], [1, 1, 1])
    };
    assert!(
        matches!(&r, Err(Error::State(m)) if m.contains("before the module's device state was set")),
        "{r:?}"
    );
    Ok(())
}

#[test]
fn kernel_wait_timeout_is_a_host_timeout_1pe() {
    device_lib_test(
        "kernel_wait_timeout_is_a_host_timeout_1pe",
        1,
        K,
        &[("XPUSHMEM_TIMEOUT_MS", "1000")],
        wait_timeout,
    );
}

/// PE 1 dies (exits without finalize); PE 0's kernel then waits for a word nobody writes: the device wait gives up
/// at its bound (it cannot see a mapped peer die), and the launch reports the dead peer, not the timeout.
fn wait_for_a_dead_peer(sh: &Shmem, lib: &Lib) -> xpushmem::Result<()> {
    let me = sh.my_pe();
    let sig = sh.calloc::<u64>(1)?;
    let out = sh.calloc::<u64>(1)?;
    sh.barrier_all()?;
    if me == 1 {
        std::process::exit(0);
    }
    let name = xpushmem_tests::test_name(
        module_path!(),
        "kernel_wait_for_a_dead_peer_is_peer_lost_2pe",
    );
    xpushmem_tests::wait_alone(&name).map_err(Error::State)?;
    match lib.run("k_wait_forever", &[sym(sig, me), sym(out, me)], 1, 1) {
        Err(Error::PeerLost { pe: 1, op, .. }) => {
            assert!(op.contains("k_wait_forever"), "{op}")
        }
        other => panic!("expected PeerLost naming PE 1, got {other:?}"),
    }
    // Without finalize: its barrier would wait for the dead PE.
    std::process::exit(0);
}

#[test]
fn kernel_wait_for_a_dead_peer_is_peer_lost_2pe() {
    device_lib_test(
        "kernel_wait_for_a_dead_peer_is_peer_lost_2pe",
        2,
        K,
        &[("XPUSHMEM_TIMEOUT_MS", "1000")],
        wait_for_a_dead_peer,
    );
}

#[test]
fn prebuilt_device_library_matches_its_source() {
    // The committed library (bitcode, SPIR-V) and runtime kernels must be what build.sh makes of the sources.
    let root = root();
    let out = std::env::temp_dir().join(format!("xpushmem-devlib-check-{}", std::process::id()));
    run_tool(
        std::process::Command::new("bash")
            .arg(root.join("shmem/device-lib/build.sh"))
            .arg(&out),
    );
    let v = xpushmem::VERSION;
    for f in [
        format!("libxpushmem_device-{v}.bc"),
        format!("libxpushmem_device-{v}.spv"),
        "xpushmem_runtime.spv".to_string(),
        "xpushmem_queue.spv".to_string(),
    ] {
        let fresh = std::fs::read(out.join(&f)).expect("fresh build");
        let committed =
            std::fs::read(root.join("shmem/device-lib/prebuilt").join(&f)).expect("prebuilt");
        assert!(
            fresh == committed,
            "shmem/device-lib/prebuilt/{f} is stale: run shmem/device-lib/build.sh OUTDIR and copy it to prebuilt/"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}

// ---- point-to-point synchronisation, the remaining atomics, p/g ---------------------------------------------

fn p2p_families(sh: &Shmem, lib: &Lib) -> xpushmem::Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let (src_pe, dst_pe) = (0usize, n - 1);
    let ivars = sh.calloc::<i32>(4)?;
    let words = sh.calloc::<u64>(7)?;
    let out = sh.calloc::<i64>(6)?;
    let indices = sh.calloc::<u64>(4)?;
    sh.put(words, &[10, 20, 0xff, 0xf0, 0x0f, 5, 0], me)?;
    sh.barrier_all()?;
    let args = [
        sym(ivars, me),
        sym(words, me),
        sym(out, me),
        sym(indices, me),
        KernelArg::U32(src_pe as u32),
        KernelArg::U32(dst_pe as u32),
    ];
    lib.run("k_p2p", &args, 1, 1)?;
    sh.barrier_all()?;
    let mut got = [0i64; 6];
    sh.get(&mut got, out, me)?;
    if me == src_pe {
        assert_eq!(
            got,
            [10, 20, 0xff, 0xf0, 0x0f, 0x1234],
            "old values of fetch_inc/swap/fetch_and/or/xor and g"
        );
    }
    if me == dst_pe {
        let mut iv = [0i32; 4];
        sh.get(&mut iv, ivars, me)?;
        assert_eq!(iv, [3, 2, 4, 1], "the source's sets");
        assert!(
            got[0] < 4 && got[1] >= 1,
            "wait_until_any returned {} with value {}",
            got[0],
            got[1]
        );
        let some = got[2] as usize;
        assert!((1..=4).contains(&some), "wait_until_some count {some}");
        let mut idx = [0u64; 4];
        sh.get(&mut idx, indices, me)?;
        assert!(
            idx[..some].windows(2).all(|w| w[0] < w[1]) && idx[..some].iter().all(|&i| i < 4),
            "{idx:?}"
        );
        assert_eq!(
            &got[3..6],
            &[0, 1, 0],
            "wait_until_all status, test(EQ 4), test(LT 4)"
        );
        let mut w = [0u64; 7];
        sh.get(&mut w, words, me)?;
        assert_eq!(
            w,
            [11, 77, 0xf0, 0xff, 0xf0, 10, 0x1234],
            "words after the source's atomics and p"
        );
    }
    sh.barrier_all()?;
    Ok(())
}

#[test]
fn p2p_sync_and_atomics_2pe() {
    device_lib_test("p2p_sync_and_atomics_2pe", 2, K, &[], p2p_families);
}

// ---- SPIR-V linking -----------------------------------------------------------------------------------------

/// The SPIR-V way: the kernel alone to SPIR-V 1.0 (its library calls stay imports), `spirv-link` with the committed
/// `libxpushmem_device-<version>.spv` (which fails on any unresolved import), then `spirv-opt
/// --eliminate-dead-functions` to keep only what the kernel uses. `source` is relative to the repository (or
/// absolute). Note: spirv-link drops the linkage of the state global, so such a module cannot be initialised yet.
fn spirv_linked(dir: &Path, source: &str) -> Result<PathBuf, String> {
    let root = root();
    let lib = device_build::library("spv");
    std::fs::create_dir_all(dir).expect("scratch dir");
    let (bc, k, spv) = (dir.join("k.bc"), dir.join("k.spv"), dir.join("linked.spv"));
    compile_cl(&root.join(source), &bc);
    run_tool(
        std::process::Command::new("llvm-spirv-14")
            .arg("--spirv-max-version=1.0")
            .arg(&bc)
            .arg("-o")
            .arg(&k),
    );
    // spirv-link.sh: spirv-link as a library (keeping the state global's export), every other export dropped,
    // dead functions eliminated, spirv-val.
    let o = std::process::Command::new("bash")
        .arg(root.join("shmem/device-lib/spirv-link.sh"))
        .arg(&k)
        .arg(&lib)
        .arg(&spv)
        .output()
        .expect("spirv-link.sh runs (spirv-tools)");
    if !o.status.success() {
        return Err(String::from_utf8_lossy(&o.stderr).into_owned());
    }
    Ok(spv)
}

#[test]
fn a_missing_device_symbol_fails_at_link_time() {
    let dir = std::env::temp_dir().join(format!("xpushmem-devlib-missing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let src = dir.join("missing.cl");
    std::fs::write(
        &src,
        "#include \"xpushmem_device.h\"\nint xpushmem_no_such_call(long);\n\
         __kernel void k(__global long *p) { p[0] = xpushmem_no_such_call((long)p); }\n",
    )
    .expect("write kernel");
    let r = spirv_linked(&dir.join("out"), src.to_str().expect("utf-8 path"));
    // The bitcode path: shmem/device-lib/link.sh refuses the module, naming the symbol.
    let root = root();
    let bc = dir.join("missing.bc");
    compile_cl(&src, &bc);
    let lib = root.join(format!(
        "shmem/device-lib/prebuilt/libxpushmem_device-{}.bc",
        xpushmem::VERSION
    ));
    let o = std::process::Command::new("bash")
        .arg(root.join("shmem/device-lib/link.sh"))
        .arg(&bc)
        .arg(&lib)
        .arg(dir.join("missing.spv"))
        .output()
        .expect("link.sh runs");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        !o.status.success(),
        "link.sh accepted a kernel calling a symbol the library lacks"
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("does not define: xpushmem_no_such_call"),
        "link.sh names the symbol: {err}"
    );
    match r {
        Err(e) => assert!(
            e.contains("xpushmem_no_such_call"),
            "spirv-link's error names the symbol: {e}"
        ),
        Ok(p) => panic!(
            "a kernel calling a symbol the library lacks linked: {}",
            p.display()
        ),
    }
}

/// The SPIR-V path: the same kernels as the ring test, linked with the library's SPIR-V by spirv-link.sh; the
/// module's state global is found (init_module), the kernels run at 2 PEs, and which kernels wait is still known.
fn spirv_path(sh: &Shmem, lib: &Lib) -> xpushmem::Result<()> {
    assert!(
        lib.dev.kernel(&lib.module, "k_ring")?.waits(),
        "k_ring waits"
    );
    assert!(
        !lib.dev.kernel(&lib.module, "k_wg_copy")?.waits(),
        "k_wg_copy does not wait"
    );
    queries_and_ring(sh, lib)
}

#[test]
fn spirv_linked_module_runs_2pe() {
    device_lib_test(
        "spirv_linked_module_runs_2pe",
        2,
        "spirv:device_lib.cl",
        &[],
        spirv_path,
    );
}

// ---- split teams in kernels ---------------------------------------------------------------------------------

/// Teams' kernels (device_teams.cl).
const T: &str = "device_teams.cl";

/// `k_team_queries` on `team` against the host's answers (my_pe, n_pes, translate_pe both ways).
fn check_team_queries(sh: &Shmem, lib: &Lib, team: &xpushmem::Team) -> xpushmem::Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let world = sh.team_world();
    let out = sh.calloc::<i32>(2 + 2 * n)?;
    lib.run(
        "k_team_queries",
        &[KernelArg::U32(team.device_id() as u32), sym(out, me)],
        1,
        1,
    )?;
    let mut got = vec![0i32; 2 + 2 * n];
    sh.get(&mut got, out, me)?;
    let what = team.describe();
    assert_eq!(got[0], sh.team_my_pe(team) as i32, "team_my_pe of {what}");
    assert_eq!(got[1], sh.team_n_pes(team) as i32, "team_n_pes of {what}");
    for w in 0..n {
        let want = sh
            .team_translate_pe(&world, w, team)?
            .map_or(-1, |p| p as i32);
        assert_eq!(got[2 + w], want, "translate_pe(WORLD, {w}, {what})");
    }
    for i in 0..team.n_pes() {
        let want = sh
            .team_translate_pe(team, i, &world)?
            .map_or(-1, |p| p as i32);
        assert_eq!(got[2 + n + i], want, "translate_pe({what}, {i}, WORLD)");
    }
    sh.free(out)
}

fn split_teams(sh: &Shmem, lib: &Lib) -> xpushmem::Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let world = sh.team_world();
    // The predefined teams have fixed device numbers.
    assert_eq!(world.device_id(), 0);
    assert_eq!(sh.team_shared().device_id(), 1);
    check_team_queries(sh, lib, &world)?;
    check_team_queries(sh, lib, &sh.team_shared())?;
    // Even and odd PEs: two strided splits of the world, every PE in one of them.
    let evens = sh.team_split_strided(&world, 0, 2, n.div_ceil(2), None)?;
    let odds = sh.team_split_strided(&world, 1, 2, n / 2, None)?;
    let mine = match (evens, odds) {
        (Some(t), None) if me % 2 == 0 => t,
        (None, Some(t)) if me % 2 == 1 => t,
        other => panic!("PE {me}: unexpected split result {other:?}"),
    };
    check_team_queries(sh, lib, &mine)?;
    // Every barrier form; the collectives in the work-group form and the sub-group form at sizes 8, 16 and 32.
    check_team_every_form(sh, lib, &mine, 30)?;
    if n == 4 {
        // A 2x2 grid: rows (stride 1) and columns (stride 2).
        let (row, col) = sh.team_split_2d(&world, 2, None, None)?;
        for t in [&row, &col] {
            check_team_queries(sh, lib, t)?;
            check_team_collectives(sh, lib, t, &WORK_GROUP)?;
        }
        sh.team_destroy(col)?;
        sh.team_destroy(row)?;
    }
    check_half_rounding(sh, lib, &WORK_GROUP)?;
    check_half_rounding(sh, lib, &SUB_GROUPS[0])?;
    check_half_rounding(sh, lib, &SUB_GROUPS[2])?;
    // A destroyed team: the kernel's first team call records BadTeam, reported naming the call and the team.
    let id = mine.device_id();
    sh.team_destroy(mine)?;
    let out = sh.calloc::<i32>(2 + 2 * n)?;
    let r = lib.run(
        "k_team_queries",
        &[KernelArg::U32(id as u32), sym(out, me)],
        1,
        1,
    );
    assert!(
        matches!(&r, Err(Error::Device(m)) if m.contains("a team query") && m.contains(&format!("team {id} "))),
        "{r:?}"
    );
    // A team number beyond the table.
    let r = lib.run(
        "k_team_queries",
        &[KernelArg::U32(1 << 20), sym(out, me)],
        1,
        1,
    );
    assert!(
        matches!(&r, Err(Error::Device(m)) if m.contains("team 1048576 ")),
        "{r:?}"
    );
    sh.barrier_all()?;
    Ok(())
}

#[test]
fn split_teams_in_kernels_3pe() {
    device_lib_test("split_teams_in_kernels_3pe", 3, T, &[], split_teams);
}

#[test]
fn split_teams_in_kernels_4pe() {
    device_lib_test("split_teams_in_kernels_4pe", 4, T, &[], split_teams);
}

// ---- per-work-item RMA, nbi + quiet, signal_fetch, multi-work-group launches, sub-groups, 16-bit words --------

/// RMA kernels (device_rma.cl).
const RMA: &str = "device_rma.cl";

/// Every per-work-item RMA form (blocking and `_nbi` + quiet, untyped and typed, put and get, put-signal), in a
/// launch of one work-group per PE where group g works with PE g; then the signal seen from a kernel.
fn rma_groups(sh: &Shmem, lib: &Lib) -> xpushmem::Result<()> {
    const MAX: usize = 1000;
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let src = sh.calloc::<u8>(MAX)?;
    let dst = sh.calloc::<u8>(n * MAX)?;
    let sig = sh.calloc::<u64>(1)?;
    let status = sh.calloc::<i32>(n)?;
    let out = sh.calloc::<u64>(2)?;
    let mut signals = 0u64;
    // (mode, bytes): typed modes move whole elements; the untyped ones also run at an odd size.
    let runs = [
        (0u32, 1000usize),
        (0, 13),
        (1, 1000),
        (2, 1000),
        (2, 13),
        (3, 1000),
        (4, 1000),
        (4, 13),
        (5, 1000),
        (6, 1000),
        (6, 13),
        (7, 1000),
        (8, 1000),
        (8, 13),
        (9, 1000),
        (9, 13),
    ];
    for (mode, bytes) in runs {
        let salt = 60 + u64::from(mode) + bytes as u64;
        sh.put(dst, &vec![0u8; n * MAX], me)?;
        sh.put(
            src.slice(0..bytes)?,
            &xpushmem_tests::ref_vec::<u8>(me, bytes, salt),
            me,
        )?;
        sh.barrier_all()?;
        let args = [
            KernelArg::U32(mode),
            sym(dst, me),
            sym(src, me),
            KernelArg::U64(bytes as u64),
            sym(sig, me),
            sym(status, me),
        ];
        lib.run("k_rma_groups", &args, n as u32, 16)?;
        let mut st = vec![0i32; n];
        sh.get(&mut st, status, me)?;
        assert_eq!(st, vec![0; n], "mode {mode} ({bytes} B): status per group");
        if mode == 8 {
            // Every PE added 1 to this PE's signal after its data: wait for all of them in a kernel, no host
            // barrier, then the data must be there.
            signals += n as u64;
            lib.run(
                "k_signal_check",
                &[sym(sig, me), KernelArg::U64(signals), sym(out, me)],
                1,
                1,
            )?;
            let mut o = [0u64; 2];
            sh.get(&mut o, out, me)?;
            assert_eq!(o, [signals, signals], "signal_wait_until and signal_fetch");
        } else {
            sh.barrier_all()?;
        }
        let mut got = vec![0u8; n * MAX];
        sh.get(&mut got, dst, me)?;
        for p in 0..n {
            assert_eq!(
                got[p * bytes..(p + 1) * bytes],
                xpushmem_tests::ref_vec::<u8>(p, bytes, salt),
                "mode {mode} ({bytes} B): block of PE {p}"
            );
        }
        assert!(
            got[n * bytes..].iter().all(|&b| b == 0),
            "mode {mode}: nothing written past the blocks"
        );
        sh.barrier_all()?;
    }
    sh.barrier_all()?;
    Ok(())
}

/// The `_sub_group` copies and put-signals at sub-group sizes 8 and 16 (one work-group of 32 items: 4 or 2
/// sub-groups, sub-group s working with PE (me + s) % n), against a host reference.
fn sub_groups(sh: &Shmem, lib: &Lib) -> xpushmem::Result<()> {
    const B: usize = 100;
    const MAXSG: usize = 4;
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let src = sh.calloc::<u8>(MAXSG * B)?;
    let dst = sh.calloc::<u8>(n * MAXSG * B)?;
    let sig = sh.calloc::<u64>(1)?;
    let status = sh.calloc::<i32>(MAXSG)?;
    let info = sh.calloc::<i32>(2)?;
    let mut signals = 0u64;
    for (kernel, size) in [("k_sg8", 8usize), ("k_sg16", 16)] {
        let nsg = 32 / size;
        for mode in 0u32..6 {
            let salt = 80 + size as u64 + u64::from(mode);
            let block = |pe: usize, s: usize| -> Vec<u8> {
                xpushmem_tests::ref_vec::<u8>(pe, MAXSG * B, salt)[s * B..(s + 1) * B].to_vec()
            };
            sh.put(dst, &vec![0u8; n * MAXSG * B], me)?;
            sh.put(src, &xpushmem_tests::ref_vec::<u8>(me, MAXSG * B, salt), me)?;
            sh.put(status, &[-1i32; MAXSG], me)?;
            sh.barrier_all()?;
            let args = [
                KernelArg::U32(mode),
                sym(dst, me),
                sym(src, me),
                KernelArg::U64(B as u64),
                sym(sig, me),
                sym(status, me),
                sym(info, me),
            ];
            lib.run(kernel, &args, 1, 32)?;
            sh.barrier_all()?;
            let mut inf = [0i32; 2];
            sh.get(&mut inf, info, me)?;
            assert_eq!(
                inf,
                [size as i32, nsg as i32],
                "{kernel}: sub-group size and count"
            );
            let mut st = [0i32; MAXSG];
            sh.get(&mut st, status, me)?;
            assert_eq!(
                st[..nsg],
                vec![0; nsg],
                "{kernel} mode {mode}: status per sub-group"
            );
            let mut got = vec![0u8; n * MAXSG * B];
            sh.get(&mut got, dst, me)?;
            let mut want = vec![0u8; n * MAXSG * B];
            if mode == 2 || mode == 3 {
                for s in 0..nsg {
                    want[s * B..(s + 1) * B].copy_from_slice(&block((me + s) % n, s));
                }
            } else {
                for p in 0..n {
                    for s in (0..nsg).filter(|&s| (p + s) % n == me) {
                        let at = (p * nsg + s) * B;
                        want[at..at + B].copy_from_slice(&block(p, s));
                    }
                }
            }
            assert!(got == want, "{kernel} mode {mode}: data on PE {me}");
            if mode >= 4 {
                signals += (0..n)
                    .flat_map(|p| (0..nsg).map(move |s| (p, s)))
                    .filter(|&(p, s)| (p + s) % n == me)
                    .count() as u64;
            }
            assert_eq!(
                sh.signal_fetch(sig.at(0)?)?,
                signals,
                "{kernel} mode {mode}: signal"
            );
            sh.barrier_all()?;
        }
    }
    Ok(())
}

fn rma_sub_group_and_short(sh: &Shmem, lib: &Lib) -> xpushmem::Result<()> {
    rma_groups(sh, lib)?;
    sub_groups(sh, lib)?;
    short_words(sh, lib, 100)
}

#[test]
fn rma_sub_group_and_16bit_forms_3pe() {
    device_lib_test(
        "rma_sub_group_and_16bit_forms_3pe",
        3,
        RMA,
        &[],
        rma_sub_group_and_short,
    );
}

#[test]
fn rma_sub_group_and_16bit_forms_4pe() {
    device_lib_test(
        "rma_sub_group_and_16bit_forms_4pe",
        4,
        RMA,
        &[],
        rma_sub_group_and_short,
    );
}

// ---- co-residency -------------------------------------------------------------------------------------------

const COOP: &str = "device_coop.cl";

/// A kernel whose work-groups wait for each other: launched with as many groups as the device reports resident
/// (zeKernelSuggestMaxCooperativeGroupCount; on ze-emu the OpenCL CPU runtime's compute units) it completes with
/// every group seeing every other; one more group is refused before launch with an error naming `groups`. Kernels
/// that do not wait are not limited (k_rma_groups in `rma_groups` runs one group per PE).
fn coresidency(sh: &Shmem, lib: &Lib) -> xpushmem::Result<()> {
    let me = sh.my_pe();
    let k = lib.dev.kernel(&lib.module, "k_groups_meet")?;
    assert!(k.waits(), "k_groups_meet reaches the library's back-off");
    let max = lib.dev.max_resident_groups(&k)?;
    assert!(max >= 1, "resident groups {max}");
    let counter = sh.calloc::<u64>(1)?;
    let status = sh.calloc::<i32>(max as usize + 1)?;
    sh.put(status, &vec![-1i32; max as usize + 1], me)?;
    let args = [sym(counter, me), KernelArg::U64(0), sym(status, me)];
    lib.run("k_groups_meet", &args, max, 4)?;
    let mut st = vec![0i32; max as usize + 1];
    sh.get(&mut st, status, me)?;
    let mut want = vec![0i32; max as usize];
    want.push(-1);
    assert_eq!(st, want, "every one of {max} groups saw all arrive");
    assert_eq!(sh.atomic_fetch(counter.at(0)?, me)?, u64::from(max));
    let too_many = [max + 1, 1, 1];
    for r in [
        lib.run("k_groups_meet", &args, max + 1, 4),
        // SAFETY: as in Lib::run.
        unsafe { lib.dev.launch_async(&k, &args, too_many, [4, 1, 1]) }.map(|_| ()),
    ] {
        assert!(
            matches!(&r, Err(Error::InvalidArgument { name: "groups", value, reason })
                if value.contains(&format!("{}", max + 1)) && reason.contains(&format!("at most {max}"))),
            "{r:?}"
        );
    }
    assert_eq!(
        sh.atomic_fetch(counter.at(0)?, me)?,
        u64::from(max),
        "the refused launches did not run"
    );
    Ok(())
}

#[test]
fn coresident_launch_check_1pe() {
    device_lib_test("coresident_launch_check_1pe", 1, COOP, &[], coresidency);
}

// ---- every kernel source, compiled first --------------------------------------------------------------------

/// Paths of the linked modules a `kernel_sources_*` PE loads, one per line.
const SOURCES_VAR: &str = "XPUSHMEM_TEST_KERNEL_SOURCES";

/// Every kernel source of the suites (device_kernels/*.cl) that `pick` selects, linked with the committed device
/// library and loaded by one device-heap PE: each must compile, link and load (a failure names the source). The
/// compiled programs land in ze-emu's program cache, so these run first (.config/nextest.toml): the multi-PE cases
/// that use a source would otherwise compile it in one PE while the others wait, holding two test threads with one
/// core busy (the teams' kernels take 15-20 s on the 2-core machine, the other sources together about as long). Two
/// tests split the sources, one test thread each.
fn kernel_sources(func: &str, pick: fn(&str) -> bool) {
    let name = xpushmem_tests::test_name(module_path!(), func);
    if xpushmem_tests::is_pe_of(&name) {
        let paths = std::env::var(SOURCES_VAR).expect("module paths");
        xpushmem_tests::run_pe(|sh| {
            let dev = sh.device().expect("a device heap");
            for path in paths.lines() {
                let spv = std::fs::read(path).expect("linked module");
                // Loading compiles (zeModuleCreate); ops_user.cl calls no library function, so it has no
                // library state to initialise and the cases that use it do not.
                dev.load_module(&spv).map_err(|e| {
                    Error::Device(format!("{path}: the linked module does not load: {e}"))
                })?;
            }
            Ok(())
        });
    }
    let kernels = root().join("tests/tests/device_kernels");
    let mut sources: Vec<String> = std::fs::read_dir(&kernels)
        .expect("device_kernels/")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|f| f.ends_with(".cl") && pick(f))
        .collect();
    sources.sort();
    assert!(!sources.is_empty(), "{func}: no kernel source selected");
    let dir = std::env::temp_dir().join(format!("xpushmem-sources-{}-{func}", std::process::id()));
    let spvs: Vec<String> = sources
        .iter()
        .map(|s| {
            let out = device_build::link_with_library(
                &kernels.join(s),
                &dir.join(s.trim_end_matches(".cl")),
                "linked.spv",
            );
            out.display().to_string()
        })
        .collect();
    run_linked(&name, 1, &dir, &[(SOURCES_VAR, spvs.join("\n"))]);
}

#[test]
fn kernel_sources_teams_load_1pe() {
    kernel_sources("kernel_sources_teams_load_1pe", |s| s == T);
}

#[test]
fn kernel_sources_others_load_1pe() {
    kernel_sources("kernel_sources_others_load_1pe", |s| s != T);
}
