//! The host on-queue forms (`xpushmem::device::onqueue::OnQueue`, C `xpushmemx_*_on_queue`) on ze-emu: every op
//! once, enqueued on a runtime-owned immediate list (and a regular one), each result checked against a host
//! reference computed from the values every PE wrote; the bad-input cases (NULL list, PE, sizes that overflow,
//! short buffers, strides, a bitwise float reduction, overlapping reduction buffers) with the argument each error
//! names; and a device-side wait that gives up, reported by `OnQueue::wait` as the blocking form's `Timeout`.
//! A list or events of another context are covered by the C program `ffi/tests/c/on_queue_pipeline.c`.

use xpushmem::coll::ReduceOp;
use xpushmem::device::onqueue::{Movement, OnList, OnQueue, QueueReduce, RmaKind};
use xpushmem::device::queue::CommandList;
use xpushmem::{Cmp, Device, Error, Shmem, SignalOp, SymSlice, Symmetric};

fn pe_test(func: &str, n: usize, body: fn(&Shmem) -> xpushmem::Result<()>) {
    let name = xpushmem_tests::test_name(module_path!(), func);
    if xpushmem_tests::is_pe_of(&name) {
        xpushmem_tests::run_pe(body);
    }
    let mut env = xpushmem_tests::device_env();
    // Long enough for the ops under load; the one wait that must give up waits this long.
    env.push(("XPUSHMEM_TIMEOUT_MS".into(), "4000".into()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let out = xpushmem_tests::spawn_pes_with(&name, n, &env);
    xpushmem_tests::assert_success(&name, n, &out);
}

/// This PE's copy of `s`.
fn read<T: Symmetric>(sh: &Shmem, s: SymSlice<T>) -> xpushmem::Result<Vec<T>> {
    let mut v = vec![T::default(); s.len()];
    sh.get(&mut v, s, sh.my_pe())?;
    Ok(v)
}

/// Element types of the reference computations.
trait Num: QueueReduce + PartialOrd {
    fn of(v: i64) -> Self;
}
macro_rules! num {
    ($($t:ty),*) => {$( impl Num for $t { fn of(v: i64) -> Self { v as $t } } )*};
}
num!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);

/// Every valid reduction of `T` and both prefix sums over the world, against a host fold of the values each PE
/// wrote (small, so no type overflows).
fn reductions<T: Num>(
    sh: &Shmem,
    dev: &Device<'_>,
    oq: &OnQueue,
    on: OnList<'_>,
) -> xpushmem::Result<()> {
    let (me, n) = (sh.my_pe() as i64, sh.n_pes() as i64);
    const K: usize = 5;
    let val = |pe: i64, k: usize| (pe + k as i64) % 3 + 1;
    let src = sh.calloc::<T>(K)?;
    let ops: Vec<ReduceOp> = ReduceOp::ALL
        .into_iter()
        .filter(|o| !(T::FLOAT && o.is_bitwise()))
        .collect();
    let dests: Vec<SymSlice<T>> = (0..ops.len() + 2)
        .map(|_| sh.calloc::<T>(K))
        .collect::<xpushmem::Result<_>>()?;
    let mine: Vec<T> = (0..K).map(|k| T::of(val(me, k))).collect();
    sh.put(src, &mine, sh.my_pe())?;
    let world = sh.team_world();
    // SAFETY: the list is the runtime's own queue's; the buffers live until `oq.wait` below.
    unsafe {
        oq.barrier_all(dev, on)?;
        for (op, d) in ops.iter().zip(&dests) {
            oq.reduce(dev, on, &world, *op, *d, src, K)?;
        }
        oq.scan(dev, on, &world, false, dests[ops.len()], src, K)?;
        oq.scan(dev, on, &world, true, dests[ops.len() + 1], src, K)?;
        oq.barrier_all(dev, on)?;
    }
    oq.wait(dev)?;
    for (op, d) in ops.iter().zip(&dests) {
        let want: Vec<T> = (0..K)
            .map(|k| {
                let vs = (0..n).map(|p| val(p, k));
                T::of(match op {
                    ReduceOp::And => vs.fold(-1, |a, v| a & v),
                    ReduceOp::Or => vs.fold(0, |a, v| a | v),
                    ReduceOp::Xor => vs.fold(0, |a, v| a ^ v),
                    ReduceOp::Min => vs.min().unwrap_or(0),
                    ReduceOp::Max => vs.max().unwrap_or(0),
                    ReduceOp::Sum => vs.sum(),
                    ReduceOp::Prod => vs.product(),
                })
            })
            .collect();
        assert_eq!(
            read(sh, *d)?,
            want,
            "{} {} reduce on queue",
            T::NAME,
            op.name()
        );
    }
    for (i, upto) in [(ops.len(), me + 1), (ops.len() + 1, me)] {
        let want: Vec<T> = (0..K)
            .map(|k| T::of((0..upto).map(|p| val(p, k)).sum()))
            .collect();
        assert_eq!(
            read(sh, dests[i])?,
            want,
            "{} scan (upto member {upto})",
            T::NAME
        );
    }
    Ok(())
}

fn every_op(sh: &Shmem) -> xpushmem::Result<()> {
    let dev = sh.device().expect("a device heap");
    let oq = OnQueue::new(&dev)?;
    let q = dev.create_queue(true)?;
    let on = OnList::new(q.list());
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
    let world = sh.team_world();
    const L: usize = 37;
    let val = |pe: usize, i: usize| (pe * 1000 + i) as i64;
    let src = sh.calloc::<i64>(L)?;
    sh.put(src, &(0..L).map(|i| val(me, i)).collect::<Vec<_>>(), me)?;
    let (put_d, get_d, nbi_d) = (
        sh.calloc::<i64>(L)?,
        sh.calloc::<i64>(L)?,
        sh.calloc::<i64>(L)?,
    );
    let (get_nbi_d, ps_nbi_d) = (sh.calloc::<i64>(L)?, sh.calloc::<i64>(L)?);
    let sig3 = sh.calloc::<u64>(1)?;
    let bytes_d = sh.calloc::<u8>(13)?;
    let (iput_d, iget_d) = (sh.calloc::<i32>(16)?, sh.calloc::<i32>(16)?);
    let isrc = sh.calloc::<i32>(16)?;
    sh.put(
        isrc,
        &(0..16).map(|i| (me * 100 + i) as i32).collect::<Vec<_>>(),
        me,
    )?;
    let (ps_d, sig, sig2) = (
        sh.calloc::<i64>(L)?,
        sh.calloc::<u64>(1)?,
        sh.calloc::<u64>(1)?,
    );
    let flag = sh.calloc::<i32>(1)?;
    let seven = sh.calloc::<i32>(1)?;
    sh.put(seven, &[7], me)?;
    let (bc_d, fc_d, a2a_src, a2a_d) = (
        sh.calloc::<i64>(L)?,
        sh.calloc::<i64>(L * n)?,
        sh.calloc::<i64>(3 * n)?,
        sh.calloc::<i64>(3 * n)?,
    );
    sh.put(
        a2a_src,
        &(0..3 * n).map(|i| val(me, i)).collect::<Vec<_>>(),
        me,
    )?;
    // collect: member i contributes i + 1 elements.
    let col_d = sh.calloc::<i64>(n * (n + 1) / 2)?;
    let (a2as_src, a2as_d) = (sh.calloc::<i32>(2 * 2 * n)?, sh.calloc::<i32>(3 * 2 * n)?);
    sh.put(
        a2as_src,
        &(0..4 * n)
            .map(|i| (me * 100 + i) as i32)
            .collect::<Vec<_>>(),
        me,
    )?;
    sh.barrier_all()?;
    // SAFETY: the list is the runtime's own immediate queue's; every buffer lives until `oq.wait` below.
    unsafe {
        oq.put(&dev, on, put_d, src, next)?;
        oq.get(&dev, on, get_d, src, next)?;
        oq.rma(&dev, on, RmaKind::PutNbi, nbi_d, src, prev)?;
        oq.rma(
            &dev,
            on,
            RmaKind::Put,
            bytes_d,
            src.as_bytes().slice(3..16)?,
            next,
        )?;
        oq.rma(&dev, on, RmaKind::GetNbi, get_nbi_d, src, prev)?;
        oq.put_signal(
            &dev,
            on,
            ps_nbi_d,
            src,
            sig3.at(0)?,
            5,
            SignalOp::Set,
            prev,
            true,
        )?;
        oq.quiet(&dev, on)?;
        oq.signal_wait_until(&dev, on, sig3.at(0)?, Cmp::Eq, 5)?;
        // Strided: 5 elements, source stride 2, destination stride 3.
        oq.strided(&dev, on, false, iput_d, isrc, 3, 2, 5, next)?;
        oq.strided(&dev, on, true, iget_d, isrc, 3, 2, 5, next)?;
        // Put-with-signal, then this PE waits on its own signal (its previous PE's put) on the list.
        oq.put_signal(
            &dev,
            on,
            ps_d,
            src,
            sig.at(0)?,
            1,
            SignalOp::Add,
            next,
            false,
        )?;
        oq.signal_wait_until(&dev, on, sig.at(0)?, Cmp::Ge, 1)?;
        oq.signal_op(&dev, on, sig2.at(0)?, 42, SignalOp::Set, next)?;
        oq.signal_wait_until(&dev, on, sig2.at(0)?, Cmp::Eq, 42)?;
        oq.put(&dev, on, flag, seven, next)?;
        oq.wait_until(&dev, on, flag.at(0)?, Cmp::Eq, 7)?;
        oq.barrier_all(&dev, on)?;
        oq.movement(
            &dev,
            on,
            Movement::Broadcast { root: 1 },
            &world,
            bc_d,
            src,
            L,
        )?;
        oq.movement(&dev, on, Movement::Fcollect, &world, fc_d, src, L)?;
        oq.movement(&dev, on, Movement::Alltoall, &world, a2a_d, a2a_src, 3)?;
        oq.alltoalls(&dev, on, &world, a2as_d, a2as_src, 3, 2, 2)?;
        oq.collect(&dev, on, &world, col_d, src, me + 1)?;
        oq.sync_all(&dev, on)?;
        oq.team_sync(&dev, on, &sh.team_shared())?;
    }
    oq.wait(&dev)?;
    assert_eq!(oq.outstanding(), 0);
    let want = |pe: usize| (0..L).map(|i| val(pe, i)).collect::<Vec<_>>();
    assert_eq!(read(sh, put_d)?, want(prev), "put");
    assert_eq!(read(sh, get_d)?, want(next), "get");
    assert_eq!(read(sh, nbi_d)?, want(next), "put_nbi + quiet");
    assert_eq!(read(sh, get_nbi_d)?, want(prev), "get_nbi + quiet");
    assert_eq!(read(sh, ps_nbi_d)?, want(next), "put_signal_nbi + quiet");
    assert_eq!(read(sh, sig3)?, vec![5], "put_signal_nbi's SET");
    let prev_bytes: Vec<u8> = want(prev).iter().flat_map(|v| v.to_ne_bytes()).collect();
    assert_eq!(
        read(sh, bytes_d)?,
        prev_bytes[3..16].to_vec(),
        "putmem of 13 odd bytes"
    );
    let strided = |pe: usize| {
        let mut v = vec![0i32; 16];
        for i in 0..5 {
            v[i * 3] = (pe * 100 + i * 2) as i32;
        }
        v
    };
    assert_eq!(read(sh, iput_d)?, strided(prev), "iput");
    assert_eq!(read(sh, iget_d)?, strided(next), "iget");
    assert_eq!(read(sh, ps_d)?, want(prev), "put_signal data");
    assert_eq!(read(sh, sig)?, vec![1], "put_signal's ADD");
    assert_eq!(read(sh, sig2)?, vec![42], "signal_op SET");
    assert_eq!(read(sh, flag)?, vec![7], "wait_until's word");
    assert_eq!(read(sh, bc_d)?, want(1), "broadcast from member 1");
    assert_eq!(
        read(sh, fc_d)?,
        (0..n).flat_map(want).collect::<Vec<_>>(),
        "fcollect"
    );
    let col: Vec<i64> = (0..n)
        .flat_map(|j| (0..=j).map(move |i| val(j, i)))
        .collect();
    assert_eq!(read(sh, col_d)?, col, "collect of 1, 2, 3 elements");
    let a2a: Vec<i64> = (0..n)
        .flat_map(|j| (0..3).map(move |k| val(j, me * 3 + k)))
        .collect();
    assert_eq!(read(sh, a2a_d)?, a2a, "alltoall");
    // alltoalls: dest[(j*2 + k)*3] on me = src[(me*2 + k)*2] of member j.
    let mut a2as = vec![0i32; 3 * 2 * n];
    for j in 0..n {
        for k in 0..2 {
            a2as[(j * 2 + k) * 3] = (j * 100 + (me * 2 + k) * 2) as i32;
        }
    }
    assert_eq!(read(sh, a2as_d)?, a2as, "alltoalls");

    // A regular list: ops run when the runtime executes it.
    let rq = dev.create_queue(false)?;
    let regular_d = sh.calloc::<i64>(L)?;
    // SAFETY: the runtime's own regular queue, executed by submit_and_wait before the buffers are read.
    unsafe {
        oq.put(&dev, OnList::new(rq.list()), regular_d, src, prev)?;
        oq.barrier_all(&dev, OnList::new(rq.list()))?;
    }
    dev.submit_and_wait(&rq)?;
    oq.wait(&dev)?;
    assert_eq!(read(sh, regular_d)?, want(next), "put on a regular list");

    reductions::<i8>(sh, &dev, &oq, on)?;
    reductions::<i16>(sh, &dev, &oq, on)?;
    reductions::<i32>(sh, &dev, &oq, on)?;
    reductions::<i64>(sh, &dev, &oq, on)?;
    reductions::<u8>(sh, &dev, &oq, on)?;
    reductions::<u16>(sh, &dev, &oq, on)?;
    reductions::<u32>(sh, &dev, &oq, on)?;
    reductions::<u64>(sh, &dev, &oq, on)?;
    reductions::<f32>(sh, &dev, &oq, on)?;
    reductions::<f64>(sh, &dev, &oq, on)?;

    bad_input(sh, &dev, &oq, on, src)?;

    // A device wait that gives up (nobody sets the word): the blocking form's Timeout, naming the entry point.
    sh.barrier_all()?;
    let never = sh.calloc::<u64>(1)?;
    // SAFETY: as above.
    unsafe { oq.signal_wait_until(&dev, on, never.at(0)?, Cmp::Eq, 12345)? };
    match oq.wait(&dev) {
        Err(Error::Timeout { op, .. }) => assert!(
            op.contains("signal_wait_until_on_queue") && op.contains("xpushmem_signal_wait_until"),
            "{op}"
        ),
        r => panic!("a wait nobody ends: {r:?}"),
    }
    sh.barrier_all()?;
    Ok(())
}

/// `r` is `InvalidArgument` naming `name`.
fn names<T: std::fmt::Debug>(r: xpushmem::Result<T>, name: &str) {
    match r {
        Err(Error::InvalidArgument { name: n, .. }) if n == name => {}
        r => panic!("expected InvalidArgument naming {name}, got {r:?}"),
    }
}

fn bad_input(
    sh: &Shmem,
    dev: &Device<'_>,
    oq: &OnQueue,
    on: OnList<'_>,
    src: SymSlice<i64>,
) -> xpushmem::Result<()> {
    let n = sh.n_pes();
    let world = sh.team_world();
    let small = sh.calloc::<i64>(4)?;
    let f = sh.calloc::<f32>(8)?;
    // SAFETY: every call below is refused before anything is enqueued.
    unsafe {
        let null = OnList::new(CommandList::from_raw(std::ptr::null_mut()));
        names(oq.put(dev, null, src, src, 0), "ze_command_list");
        match oq.put(dev, on, src, src, n) {
            Err(Error::InvalidPe { pe, .. }) => assert_eq!(pe, n as i64),
            r => panic!("PE {n}: {r:?}"),
        }
        names(oq.put(dev, on, small, src, 0), "dest");
        names(
            oq.strided(dev, on, false, src, src, 1, 1, usize::MAX / 4, 0),
            "nelems",
        );
        names(oq.strided(dev, on, false, src, src, 0, 1, 2, 0), "dst");
        names(
            oq.alltoalls(dev, on, &world, src, src, 1, usize::MAX / 2, 3),
            "nelems",
        );
        names(
            oq.reduce(dev, on, &world, ReduceOp::And, f, f.slice(4..)?, 4),
            "op",
        );
        names(
            oq.reduce(dev, on, &world, ReduceOp::Sum, f, f.slice(2..)?, 4),
            "dest",
        );
        names(oq.scan(dev, on, &world, false, f, f, 4), "dest");
        names(
            oq.movement(
                dev,
                on,
                Movement::Broadcast { root: n },
                &world,
                src,
                src,
                4,
            ),
            "pe_root",
        );
    }
    assert_eq!(oq.outstanding(), 0, "refused ops are not enqueued");
    Ok(())
}

#[test]
fn every_on_queue_op_3pe() {
    pe_test("every_on_queue_op_3pe", 3, every_op);
}
