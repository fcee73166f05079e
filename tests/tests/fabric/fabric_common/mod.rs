//! The body shared by the fabric suites (`fabric.rs` on loopback, `fabric_netns.rs` and `fabric_mpirun.rs` across
//! network namespaces).

#[allow(dead_code)]
pub mod netns;
#[path = "../../ops/ops_common/mod.rs"]
mod ops_common;
/// The expert-parallel tests' device harness (`ops_ep.rs`), for the device path across network namespaces.
#[path = "../../ops/ops_ep_dev.rs"]
pub mod ops_ep_dev;
/// The expert-parallel tests' reference (`ops_ep.rs`), for dispatch and combine across nodes.
#[path = "../../ops/ops_ep_ref.rs"]
pub mod ops_ep_ref;

use ops_common::{bytes_i64, data_rows, excl, i64_bytes, read, reference_2d, view, write};
use xpushmem::coll::ReduceOp;
use xpushmem::{Cmp, Result, Shmem, SignalOp};
use xpushmem_ops::{
    all_to_all_vdev, all_to_all_vdev_2d, all_to_all_vdev_2d_offset, DType, Group, TensorView,
};
use xpushmem_tests::{ref_vec, reference};

/// Whether this build has the fabric transport.
pub fn fabric_available() -> bool {
    matches!(xpushmem::transport::fabric_providers(), Ok(Some(_)))
}

/// The checks of a job in which PE `victim` was killed: nobody hung, the victim died of SIGKILL, every survivor
/// exited with 0 after printing its `verdict PE p: PeerLost` line, within 30 s (the survivors' limit).
#[allow(dead_code)] // not every test that includes this module kills a PE
pub fn assert_peer_lost(name: &str, out: &xpushmem_launch::Outcome, victim: usize) {
    use xpushmem_launch::PeExit;
    let all = xpushmem_tests::outputs(out);
    assert!(!out.timed_out, "{name}: the job hung\n{all}");
    assert_eq!(out.exits[victim], PeExit::Signal(9), "{name}\n{all}");
    for pe in (0..out.exits.len()).filter(|&p| p != victim) {
        assert_eq!(
            out.exits[pe],
            PeExit::Code(0),
            "{name}: survivor PE {pe}\n{all}"
        );
        assert!(
            out.output_of(pe)
                .contains(&format!("verdict PE {pe}: PeerLost")),
            "{name}\n{all}"
        );
    }
    assert!(
        out.elapsed < std::time::Duration::from_secs(30),
        "{name}: noticed only after {:?}\n{all}",
        out.elapsed
    );
}

/// The node of PE `pe` when `n` PEs are spread over `nodes` nodes in contiguous blocks.
pub fn node_of(pe: usize, n: usize, nodes: usize) -> usize {
    pe * nodes / n
}

/// Rows PE `src` sends PE `dst` in the all_to_all_vdev case (0..=3, some empty).
fn rows(src: usize, dst: usize) -> usize {
    (reference(src, dst, 77) % 4) as usize
}

/// When this process is a PE of test `name` that a launcher started (mpirun, srun) with `bootstrap`: the body of the
/// mixed cases over two nodes, a verdict line, and the exit.
pub fn run_if_launched_pe(name: &str, bootstrap: &'static str) {
    if xpushmem_tests::is_pe_of(name) {
        xpushmem_tests::run_pe(|sh| {
            assert_eq!(sh.bootstrap_name(), bootstrap);
            mixed_body(sh, 2)?;
            println!("verdict PE {}: OK", sh.my_pe());
            Ok(())
        });
    }
}

/// The checks of one PE of a mixed job. `nodes`: how PEs are spread (0: every peer forced onto the fabric).
pub fn mixed_body(sh: &Shmem, nodes: usize) -> Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    // Routes: shm within a node, fabric between nodes (everything but this PE when forced).
    for pe in 0..n {
        let same = nodes > 0 && node_of(pe, n, nodes) == node_of(me, n, nodes);
        let want = match () {
            _ if pe == me => "local",
            _ if same => "shm",
            _ => "fabric",
        };
        assert_eq!(sh.transport_name(pe), want, "route of PE {pe} from PE {me}");
        assert_eq!(
            sh.is_mapped(pe),
            want != "fabric",
            "PE {pe} load/store access"
        );
    }
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);

    // RMA: a ring of puts (small, unaligned, and larger than a message chunk of small providers), then gets.
    for (k, len) in [1usize, 13, 4096, 300_000].into_iter().enumerate() {
        let buf = sh.calloc::<u32>(len)?;
        let mine: Vec<u32> = ref_vec(me, len, 10 + k as u64);
        sh.put(buf, &mine, right)?;
        sh.barrier_all()?;
        let mut got = vec![0u32; len];
        sh.get(&mut got, buf, me)?;
        assert_eq!(
            got,
            ref_vec::<u32>(left, len, 10 + k as u64),
            "put of {len} from PE {left}"
        );
        let mut back = vec![0u32; len];
        sh.get(&mut back, buf, right)?;
        assert_eq!(back, mine, "get of {len} from PE {right}");
        sh.barrier_all()?;
        sh.free(buf)?;
    }

    // Atomics: every PE adds to and ors into every PE's words; compare-and-swap elects one winner per word.
    let sum = sh.calloc::<u64>(1)?.at(0)?;
    let bits = sh.calloc::<u32>(1)?.at(0)?;
    let owner = sh.calloc::<u64>(1)?.at(0)?;
    sh.barrier_all()?;
    for pe in 0..n {
        sh.atomic_add(sum, me as u64 + 1, pe)?;
        sh.atomic_fetch_or(bits, 1u32 << (me % 32), pe)?;
        let _ = sh.atomic_compare_swap(owner, 0, me as u64 + 100, pe)?;
    }
    sh.barrier_all()?;
    assert_eq!(
        sh.atomic_fetch(sum, me)?,
        (n * (n + 1) / 2) as u64,
        "fetch-add total"
    );
    let want_bits = (0..n).fold(0u32, |b, p| b | 1 << (p % 32));
    assert_eq!(
        sh.atomic_fetch(bits, right)?,
        want_bits,
        "fetch-or on PE {right}"
    );
    let o = sh.atomic_fetch(owner, left)?;
    assert!(
        (100..100 + n as u64).contains(&o),
        "compare-and-swap winner {o}"
    );
    sh.barrier_all()?;
    let o = sh.atomic_swap(owner, 7, right)?;
    assert!(
        (100..100 + n as u64).contains(&o),
        "swap returned the winner {o}"
    );
    sh.barrier_all()?;
    assert_eq!(sh.atomic_fetch(owner, me)?, 7, "swapped in by PE {left}");

    // put_signal: whoever sees the signal sees the data (from every PE, to every PE).
    let len = 2048;
    let data = sh.calloc::<u64>(n * len)?;
    let sig = sh.calloc::<u64>(1)?.at(0)?;
    sh.barrier_all()?;
    let mine: Vec<u64> = ref_vec(me, len, 40);
    for pe in 0..n {
        sh.put_signal(
            data.slice(me * len..(me + 1) * len)?,
            &mine,
            sig,
            1,
            SignalOp::Add,
            pe,
        )?;
    }
    assert_eq!(sh.signal_wait_until(sig, Cmp::Ge, n as u64)?, n as u64);
    for src in 0..n {
        let mut got = vec![0u64; len];
        sh.get(&mut got, data.slice(src * len..(src + 1) * len)?, me)?;
        assert_eq!(
            got,
            ref_vec::<u64>(src, len, 40),
            "put_signal data from PE {src}"
        );
    }
    sh.barrier_all()?;

    // Team collectives on the world and on a strided split (every other PE).
    let world = sh.team_world();
    let bufs = Bufs::new(sh, n)?;
    collectives(sh, &world, 50, &bufs)?;
    let evens = sh.team_split_strided(&world, 0, 2, n.div_ceil(2), None)?;
    if let Some(t) = &evens {
        collectives(sh, t, 60, &bufs)?;
    }
    if let Some(t) = evens {
        sh.team_destroy(t)?;
    }
    sh.barrier_all()?;

    // The MoE exchange: all_to_all_vdev of int64 rows, splits drawn from the reference.
    let g = Group::world(sh)?;
    let cap = 4 * n;
    let input = sh.calloc::<i64>(cap)?;
    let out = sh.calloc::<i64>(cap)?;
    let splits = sh.calloc::<i64>(n)?;
    let oso = sh.calloc::<i64>(2 * n)?;
    let mut rows_in = Vec::new();
    for dst in 0..n {
        for r in 0..rows(me, dst) {
            rows_in.push((me * 1_000_000 + dst * 1000 + r) as i64);
        }
    }
    rows_in.resize(cap, -1);
    sh.put(input, &rows_in, me)?;
    let sp: Vec<i64> = (0..n).map(|d| rows(me, d) as i64).collect();
    sh.put(splits, &sp, me)?;
    sh.barrier_all()?;
    all_to_all_vdev(
        sh,
        &g,
        &TensorView::of(sh, input, DType::I64, &[cap])?,
        &TensorView::of(sh, out, DType::I64, &[cap])?,
        &TensorView::of(sh, splits, DType::I64, &[n])?,
        &TensorView::of(sh, oso, DType::I64, &[2, n])?,
    )?;
    let mut got_oso = vec![0i64; 2 * n];
    sh.get(&mut got_oso, oso, me)?;
    let mut got = vec![0i64; cap];
    sh.get(&mut got, out, me)?;
    let mut off = 0usize;
    for src in 0..n {
        let k = rows(src, me);
        assert_eq!(got_oso[src], k as i64, "rows from PE {src}");
        assert_eq!(got_oso[n + src], off as i64, "offset of PE {src}'s rows");
        for r in 0..k {
            assert_eq!(
                got[off + r],
                (src * 1_000_000 + me * 1000 + r) as i64,
                "row {r} from PE {src}"
            );
        }
        off += k;
    }
    sh.barrier_all()?;
    moe_2d(sh, &g)?;
    sh.barrier_all()
}

/// The MoE dispatch and combine: `all_to_all_vdev_2d` (2 experts per PE, each expert's block aligned to 2 rows),
/// then `all_to_all_vdev_2d_offset` back, checked against the ops suites' reference.
fn moe_2d(sh: &Shmem, g: &Group) -> Result<()> {
    let (me, w) = (sh.my_pe(), sh.n_pes());
    let (ne, align, rb, salt) = (2usize, 2usize, 16usize, 93u64);
    let n = ne * w;
    let splits_of =
        |s: usize| -> Vec<i64> { (0..n).map(|t| (reference(s, t, salt) % 3) as i64).collect() };
    let rows = 2 * n; // every split is at most 2 rows
    let out_rows = w * rows + ne * align;
    let (fill, cfill) = (0xA5u8, 0x5Au8);
    let input = sh.calloc::<u8>(rows * rb)?;
    let out = sh.calloc::<u8>(out_rows * rb)?;
    let cout = sh.calloc::<u8>(rows * rb)?;
    let splits = sh.calloc::<u8>(8 * n)?;
    let oso = sh.calloc::<u8>(16 * n)?;
    let coso = sh.calloc::<u8>(16 * n)?;
    let mine = splits_of(me);
    write(sh, input, 0, &data_rows(salt, me, rows, rb))?;
    write(sh, splits, 0, &i64_bytes(&mine))?;
    write(sh, out, 0, &vec![fill; out_rows * rb])?;
    write(sh, cout, 0, &vec![cfill; rows * rb])?;
    sh.barrier_all()?;
    let out_view = view(out, DType::I64, &[out_rows, 2]);
    let oso_view = view(oso, DType::I64, &[2, n]);
    all_to_all_vdev_2d(
        sh,
        g,
        &view(input, DType::I64, &[rows, 2]),
        &out_view,
        &view(splits, DType::I64, &[n]),
        &oso_view,
        Some(align as i64),
    )?;
    let all: Vec<Vec<i64>> = (0..w).map(splits_of).collect();
    let (row0, row1, want) = reference_2d(&all, me, ne, align, salt, rows, rb, out_rows, fill);
    assert_eq!(
        bytes_i64(&read(sh, oso, 0, 16 * n)?),
        [row0, row1].concat(),
        "all_to_all_vdev_2d splits and offsets on PE {me}"
    );
    assert!(
        read(sh, out, 0, out_rows * rb)? == want,
        "all_to_all_vdev_2d data on PE {me}"
    );
    all_to_all_vdev_2d_offset(
        sh,
        g,
        &out_view,
        &view(cout, DType::I64, &[rows, 2]),
        &oso_view,
        &view(coso, DType::I64, &[2, n]),
    )?;
    let sent = mine.iter().sum::<i64>() as usize;
    let mut back = data_rows(salt, me, rows, rb);
    back[sent * rb..].fill(cfill);
    assert!(
        read(sh, cout, 0, rows * rb)? == back,
        "all_to_all_vdev_2d_offset (combine) data on PE {me}"
    );
    assert_eq!(
        bytes_i64(&read(sh, coso, 0, 16 * n)?),
        [mine.clone(), excl(&mine)].concat(),
        "all_to_all_vdev_2d_offset splits and offsets on PE {me}"
    );
    sh.barrier_all()?;
    for b in [input, out, cout, splits, oso, coso] {
        sh.free(b)?;
    }
    Ok(())
}

const NEL: usize = 5;

/// Buffers of the collectives (allocated by the whole world: allocation is collective over it).
struct Bufs {
    src: xpushmem::SymSlice<u64>,
    dst: xpushmem::SymSlice<u64>,
    x: xpushmem::SymSlice<i64>,
}

impl Bufs {
    fn new(sh: &Shmem, n: usize) -> Result<Bufs> {
        Ok(Bufs {
            src: sh.calloc::<u64>(n * NEL)?,
            dst: sh.calloc::<u64>(n * NEL)?,
            x: sh.calloc::<i64>(NEL)?,
        })
    }
}

/// Broadcast, sum reduction, alltoall and fcollect on `team`, checked against references.
fn collectives(sh: &Shmem, team: &xpushmem::Team, salt: u64, b: &Bufs) -> Result<()> {
    let (r, m) = (team.my_pe(), team.n_pes());
    let nel = NEL;
    let src = b.src.slice(..m * nel)?;
    let dst = b.dst.slice(..m * nel)?;
    let root = m - 1;
    sh.put(src, &ref_vec::<u64>(r, m * nel, salt), sh.my_pe())?;
    sh.team_barrier(team)?;
    sh.broadcast(team, dst, src, nel, root)?;
    let mut got = vec![0u64; nel];
    sh.get(&mut got, dst.slice(..nel)?, sh.my_pe())?;
    if r != root {
        assert_eq!(
            got,
            ref_vec::<u64>(root, m * nel, salt)[..nel],
            "broadcast from team rank {root}"
        );
    }
    let x = b.x;
    let xs: Vec<i64> = (0..nel)
        .map(|i| (reference(r, i, salt) % 1000) as i64)
        .collect();
    sh.put(x, &xs, sh.my_pe())?;
    sh.team_barrier(team)?;
    sh.reduce(team, ReduceOp::Sum, x, x, nel)?;
    let mut red = vec![0i64; nel];
    sh.get(&mut red, x, sh.my_pe())?;
    let want: Vec<i64> = (0..nel)
        .map(|i| (0..m).map(|q| (reference(q, i, salt) % 1000) as i64).sum())
        .collect();
    assert_eq!(red, want, "sum reduction");
    sh.alltoall(team, dst, src, nel)?;
    sh.get(&mut got, dst.slice(..nel)?, sh.my_pe())?;
    assert_eq!(
        got,
        ref_vec::<u64>(0, m * nel, salt)[r * nel..(r + 1) * nel],
        "alltoall block from rank 0"
    );
    sh.fcollect(team, dst, src.slice(..nel)?, nel)?;
    let mut all = vec![0u64; m * nel];
    sh.get(&mut all, dst, sh.my_pe())?;
    for q in 0..m {
        assert_eq!(
            all[q * nel..(q + 1) * nel],
            ref_vec::<u64>(q, m * nel, salt)[..nel],
            "fcollect block {q}"
        );
    }
    sh.team_barrier(team)
}
