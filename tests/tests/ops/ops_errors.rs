//! Every precondition of the ops is a typed error with a clear message, the same verdict on every rank (a rank
//! with bad arguments gets its own error, the others an error naming it), and the group stays usable after it:
//! shapes, dtypes, contiguity, negative splits, splits overflowing the input or the output, aliasing,
//! non-symmetric arguments, roots out of range or repeated, bad groups, peers, signal pads, wait timeouts and
//! lost peers.

use crate::ops_common::*;
use std::time::Duration;
use xpushmem::{Error, Result, Shmem, SymSlice};
use xpushmem_ops::{
    all_to_all_vdev, all_to_all_vdev_2d, all_to_all_vdev_2d_offset, multi_root_tile_reduce,
    nvshmem_all_to_all, nvshmem_broadcast, nvshmem_get, nvshmem_put, nvshmem_put_with_signal,
    nvshmem_wait_for_signal, tile_reduce, DType, Group, TensorView,
};
use xpushmem_tests::{assert_success, is_pe_of, pe_test, run_pe, spawn_pes_with, test_name};

#[track_caller]
fn expect(r: Result<()>, kind: &str, text: &str, what: &str) {
    match r {
        Ok(()) => panic!("{what}: expected a {kind} error containing {text:?}, got Ok"),
        Err(e) => {
            assert_eq!(e.kind(), kind, "{what}: {e}");
            assert!(e.to_string().contains(text), "{what}: {text:?} not in {e}");
        }
    }
}

/// One rank (`bad`) passed bad arguments: it gets `kind`/`text`, every other rank an error naming it.
#[track_caller]
fn expect_one(r: Result<()>, is_bad: bool, kind: &str, text: &str, what: &str) {
    if is_bad {
        expect(r, kind, text, what);
    } else {
        expect(r, "InvalidArgument", "rejected its arguments", what);
    }
}

const ROWS: usize = 64;
const NE: usize = 4;

struct Fx {
    input: SymSlice<u8>,
    out: SymSlice<u8>,
    splits: SymSlice<u8>,
    oso: SymSlice<u8>,
    tiles: SymSlice<u8>,
    tout: SymSlice<u8>,
}

impl Fx {
    fn new(sh: &Shmem) -> Result<Fx> {
        let w = sh.n_pes();
        Ok(Fx {
            input: sh.malloc::<u8>(ROWS * 8 * 2)?,
            out: sh.malloc::<u8>((w * ROWS + 64) * 8 * 3)?,
            splits: sh.malloc::<u8>(3 * (w * NE + 1) * 8 + 64)?,
            oso: sh.malloc::<u8>(2 * (w * NE + 1) * 8 + 64)?,
            tiles: sh.malloc::<u8>(16 * 16 * 4)?,
            tout: sh.malloc::<u8>(16 * 16 * 4)?,
        })
    }
    fn input(&self) -> TensorView {
        view(self.input, DType::F32, &[ROWS, 2])
    }
    fn out(&self, rows: usize) -> TensorView {
        view(self.out, DType::F32, &[rows, 2])
    }
    fn set_splits(&self, sh: &Shmem, v: &[i64]) -> Result<TensorView> {
        write(sh, self.splits, 0, &i64_bytes(v))?;
        Ok(view(self.splits, DType::I64, &[v.len()]))
    }
    fn oso(&self, n: usize) -> TensorView {
        view(self.oso, DType::I64, &[2, n])
    }
    fn tile(&self, buf: SymSlice<u8>, dt: DType) -> TensorView {
        TensorView::new(buf, dt, &[4, 4], &[16, 1], 17).unwrap()
    }
}

/// A valid `all_to_all_vdev` and `all_to_all_vdev_2d` after each error: the group is still in step.
fn healthy(sh: &Shmem, g: &Group, fx: &Fx) -> Result<()> {
    let w = g.size();
    let s = fx.set_splits(sh, &vec![1; w])?;
    all_to_all_vdev(sh, g, &fx.input(), &fx.out(w * ROWS), &s, &fx.oso(w))?;
    let got = bytes_i64(&read(sh, fx.oso, 0, 16 * w)?);
    assert_eq!(
        got,
        [vec![1; w], (0..w as i64).collect()].concat(),
        "healthy after an error"
    );
    let s = fx.set_splits(sh, &vec![2; w * NE])?;
    all_to_all_vdev_2d(
        sh,
        g,
        &fx.input(),
        &fx.out(w * ROWS),
        &s,
        &fx.oso(w * NE),
        Some(4),
    )
}

fn a2a_errors(sh: &Shmem, g: &Group, fx: &Fx) -> Result<()> {
    let (w, me) = (g.size(), g.my_rank().unwrap());
    let last = me == w - 1;
    let (input, out) = (fx.input(), fx.out(w * ROWS));
    let ok_splits = vec![1i64; w];

    // in_splits must be int64 [W].
    fx.set_splits(sh, &ok_splits)?;
    let s32 = view(fx.splits, DType::I32, &[w]);
    expect(
        all_to_all_vdev(sh, g, &input, &out, &s32, &fx.oso(w)),
        "InvalidArgument",
        "must be int64",
        "int32 splits",
    );
    let s_long = fx.set_splits(sh, &vec![1; w + 1])?;
    expect(
        all_to_all_vdev(sh, g, &input, &out, &s_long, &fx.oso(w)),
        "InvalidArgument",
        "one entry per group rank",
        "W+1 splits",
    );
    healthy(sh, g, fx)?;

    // A negative split on the last rank only.
    let mut neg = ok_splits.clone();
    if last {
        neg[0] = -1;
    }
    let s = fx.set_splits(sh, &neg)?;
    expect_one(
        all_to_all_vdev(sh, g, &input, &out, &s, &fx.oso(w)),
        last,
        "InvalidArgument",
        "splits must be non-negative",
        "negative split",
    );
    healthy(sh, g, fx)?;

    // Splits summing past the input on rank 0.
    let mut past = vec![1i64; w];
    if me == 0 {
        past[0] = ROWS as i64 + 1;
    }
    let s = fx.set_splits(sh, &past)?;
    expect_one(
        all_to_all_vdev(sh, g, &input, &out, &s, &fx.oso(w)),
        me == 0,
        "OutOfBounds",
        &format!("exceeds the {ROWS} rows of the input"),
        "splits past the input",
    );
    healthy(sh, g, fx)?;

    // Received rows overflowing rank 0's output: everyone sends 10 rows to rank 0, out holds 5.
    let mut to0 = vec![0i64; w];
    to0[0] = 10;
    let s = fx.set_splits(sh, &to0)?;
    expect_one(
        all_to_all_vdev(sh, g, &input, &fx.out(5), &s, &fx.oso(w)),
        me == 0,
        "OutOfBounds",
        "rows of out",
        "output overflow (vdev)",
    );
    healthy(sh, g, fx)?;
    let mut to0 = vec![0i64; w * NE];
    to0[NE - 1] = 3; // rank 0, last expert; with align 16 the last expert starts at 48 and ends past 40 rows
    let s = fx.set_splits(sh, &to0)?;
    expect_one(
        all_to_all_vdev_2d(sh, g, &input, &fx.out(40), &s, &fx.oso(w * NE), Some(16)),
        me == 0,
        "OutOfBounds",
        "rows of out",
        "output overflow with alignment (2d)",
    );
    healthy(sh, g, fx)?;
    // The same overflow, judged from receive arguments of both forms in one exchange: rank 0's alignment (2^24)
    // does not fit the flags word of a narrow split message, so its messages carry the wide form; the others'
    // (16) the narrow one. Every rank judges rank 0's receive from rank 0's wide arguments and the entries for
    // rank 0 of every split vector, wide or narrow.
    let align = if me == 0 { 1 << 24 } else { 16 };
    let s = fx.set_splits(sh, &to0)?;
    expect_one(
        all_to_all_vdev_2d(sh, g, &input, &fx.out(40), &s, &fx.oso(w * NE), Some(align)),
        me == 0,
        "OutOfBounds",
        "rows of out",
        "output overflow with a wide alignment (2d)",
    );
    healthy(sh, g, fx)?;

    // Shapes, dtypes, contiguity, aliasing.
    let s = fx.set_splits(sh, &ok_splits)?;
    expect(
        all_to_all_vdev(sh, g, &input, &out, &s, &fx.oso(w + 1)),
        "InvalidArgument",
        &format!("must have shape [2, {w}]"),
        "oso shape",
    );
    let out64 = view(fx.out, DType::F64, &[w * ROWS, 2]);
    expect(
        all_to_all_vdev(sh, g, &input, &out64, &s, &fx.oso(w)),
        "InvalidArgument",
        "same dtype",
        "dtype mismatch",
    );
    let out3 = view(fx.out, DType::F32, &[w * ROWS, 3]);
    expect(
        all_to_all_vdev(sh, g, &input, &out3, &s, &fx.oso(w)),
        "InvalidArgument",
        "same row size",
        "row size mismatch",
    );
    let strided = TensorView::new(fx.input, DType::F32, &[ROWS / 2, 2], &[4, 1], 0)?;
    expect(
        all_to_all_vdev(sh, g, &strided, &out, &s, &fx.oso(w)),
        "InvalidArgument",
        "must be contiguous",
        "non-contiguous input",
    );
    let alias = view(fx.input, DType::F32, &[ROWS, 2]);
    expect(
        all_to_all_vdev(sh, g, &input, &alias, &s, &fx.oso(w)),
        "InvalidArgument",
        "overlaps input",
        "out aliases input",
    );
    let oso_alias = view(fx.splits, DType::I64, &[2, w]);
    expect(
        all_to_all_vdev(sh, g, &input, &out, &s, &oso_alias),
        "InvalidArgument",
        "overlaps",
        "oso aliases in_splits",
    );
    let scalar = TensorView::new(fx.input, DType::F32, &[], &[], 0)?;
    expect(
        all_to_all_vdev(sh, g, &scalar, &out, &s, &fx.oso(w)),
        "InvalidArgument",
        "at least one dimension",
        "0-d input",
    );
    healthy(sh, g, fx)?;

    // Non-symmetric arguments: rank 0's input view starts one row later.
    if w > 1 {
        let shifted = TensorView::new(
            fx.input,
            DType::F32,
            &[ROWS - 1, 2],
            &[2, 1],
            if me == 0 { 2 } else { 0 },
        )?;
        let s = fx.set_splits(sh, &vec![0; w])?;
        expect(
            all_to_all_vdev(sh, g, &shifted, &out, &s, &fx.oso(w)),
            "Mismatch",
            "different symmetric arguments",
            "input differs per rank",
        );
        healthy(sh, g, fx)?;
    }

    // all_to_all_vdev_2d.
    let s = fx.set_splits(sh, &vec![1; w * NE])?;
    for bad in [0, -3] {
        expect(
            all_to_all_vdev_2d(sh, g, &input, &out, &s, &fx.oso(w * NE), Some(bad)),
            "InvalidArgument",
            "major_align must be positive",
            "major_align <= 0",
        );
    }
    if w > 1 {
        let s = fx.set_splits(sh, &vec![1; w * NE + 1])?;
        expect(
            all_to_all_vdev_2d(sh, g, &input, &out, &s, &fx.oso(w * NE + 1), None),
            "InvalidArgument",
            "must be a multiple of the group size",
            "splits not a multiple of W",
        );
    }
    let s = fx.set_splits(sh, &vec![1; w * NE])?;
    expect(
        all_to_all_vdev_2d(sh, g, &input, &out, &s, &fx.oso(w * NE - 1), None),
        "InvalidArgument",
        "must have shape",
        "2d oso shape",
    );
    let mut neg = vec![1i64; w * NE];
    if last {
        neg[w * NE - 1] = -5;
    }
    let s = fx.set_splits(sh, &neg)?;
    expect_one(
        all_to_all_vdev_2d(sh, g, &input, &out, &s, &fx.oso(w * NE), None),
        last,
        "InvalidArgument",
        "non-negative",
        "2d negative split",
    );
    healthy(sh, g, fx)?;

    // all_to_all_vdev_2d_offset.
    let n = w * NE;
    let iso3 = view(fx.splits, DType::I64, &[3, n]);
    expect(
        all_to_all_vdev_2d_offset(sh, g, &input, &out, &iso3, &fx.oso(n)),
        "InvalidArgument",
        "must have shape [2, ne * W]",
        "iso shape",
    );
    let mut iso = vec![1i64; n];
    iso.extend((0..n as i64).map(|i| i * 2));
    if me == 0 {
        iso[n] = ROWS as i64 - 1; // column 0: rows [63, 64) fine; make it 2 rows
        iso[0] = 2;
    }
    write(sh, fx.splits, 0, &i64_bytes(&iso))?;
    let isov = view(fx.splits, DType::I64, &[2, n]);
    expect_one(
        all_to_all_vdev_2d_offset(sh, g, &input, &out, &isov, &fx.oso(n)),
        me == 0,
        "OutOfBounds",
        "runs past the input",
        "chunk past the input",
    );
    if me == 0 {
        iso[0] = 1;
        iso[n] = 0;
    }
    if last {
        iso[n + 1] = -1;
    }
    write(sh, fx.splits, 0, &i64_bytes(&iso))?;
    if n > 1 {
        expect_one(
            all_to_all_vdev_2d_offset(sh, g, &input, &out, &isov, &fx.oso(n)),
            last,
            "InvalidArgument",
            "must be non-negative",
            "negative offset",
        );
    }
    healthy(sh, g, fx)?;

    // nvshmem_all_to_all.
    let a = view(fx.input, DType::F32, &[w * 3]);
    expect(
        nvshmem_all_to_all(sh, g, &a, &view(fx.out, DType::I32, &[w * 3])),
        "InvalidArgument",
        "same dtype",
        "a2a dtype",
    );
    expect(
        nvshmem_all_to_all(sh, g, &a, &view(fx.out, DType::F32, &[w * 3 + 1])),
        "InvalidArgument",
        "same numel",
        "a2a numel",
    );
    if w > 1 {
        let odd = view(fx.input, DType::F32, &[w * 3 + 1]);
        expect(
            nvshmem_all_to_all(sh, g, &odd, &view(fx.out, DType::F32, &[w * 3 + 1])),
            "InvalidArgument",
            "must be divisible",
            "a2a divisibility",
        );
    }
    healthy(sh, g, fx)
}

fn tile_errors(sh: &Shmem, g: &Group, fx: &Fx) -> Result<()> {
    let (w, me) = (g.size(), g.my_rank().unwrap());
    let (t, o) = (fx.tile(fx.tiles, DType::F32), fx.tile(fx.tout, DType::F32));
    expect(
        tile_reduce(sh, g, &t, &o, 0, "max"),
        "InvalidArgument",
        "only sum is supported",
        "reduce_op",
    );
    let t3 = TensorView::new(fx.tiles, DType::F32, &[2, 2, 2], &[4, 2, 1], 0)?;
    expect(
        tile_reduce(sh, g, &t3, &t3, 0, "sum"),
        "InvalidArgument",
        "Only 2D tensors",
        "3-D tile",
    );
    let ti = fx.tile(fx.tiles, DType::I32);
    expect(
        tile_reduce(sh, g, &ti, &fx.tile(fx.tout, DType::I32), 0, "sum"),
        "InvalidArgument",
        "float32, float16 or bfloat16",
        "int tile",
    );
    let tt = TensorView::new(fx.tout, DType::F32, &[4, 4], &[1, 16], 0)?;
    expect(
        tile_reduce(sh, g, &t, &tt, 0, "sum"),
        "InvalidArgument",
        "same dtype, sizes and strides",
        "strides differ",
    );
    let th = fx.tile(fx.tout, DType::F16);
    expect(
        tile_reduce(sh, g, &t, &th, 0, "sum"),
        "InvalidArgument",
        "same dtype, sizes and strides",
        "dtype differs",
    );
    for root in [w as i64, -1] {
        expect(
            tile_reduce(sh, g, &t, &o, root, "sum"),
            "InvalidPe",
            "root must be smaller than group size",
            "tile root",
        );
    }
    if w > 1 {
        expect(
            tile_reduce(sh, g, &t, &o, (me % 2) as i64, "sum"),
            "Mismatch",
            "different symmetric arguments",
            "root differs",
        );
    }
    tile_reduce(sh, g, &t, &o, 0, "sum")?;

    // multi_root_tile_reduce.
    let tiles = vec![t.clone(); w.min(2)];
    expect(
        multi_root_tile_reduce(sh, g, &tiles, &o, &[0, 0, 0], "sum"),
        "InvalidArgument",
        "one root per tile",
        "roots len",
    );
    expect(
        multi_root_tile_reduce(sh, g, &tiles[..1], &o, &[w as i64], "sum"),
        "InvalidPe",
        "Invalid root",
        "root = W",
    );
    expect(
        multi_root_tile_reduce(sh, g, &tiles[..1], &o, &[-2], "sum"),
        "InvalidPe",
        "Invalid root",
        "root < 0",
    );
    expect(
        multi_root_tile_reduce(sh, g, &[t.clone(), t.clone()], &o, &[0, 0], "sum"),
        "InvalidArgument",
        "Each rank can only be a root once",
        "duplicate root",
    );
    let small = TensorView::new(fx.tiles, DType::F32, &[2, 4], &[16, 1], 0)?;
    expect(
        multi_root_tile_reduce(sh, g, &[small], &o, &[0], "sum"),
        "InvalidArgument",
        "out_tile's dtype and sizes",
        "tile shape",
    );
    expect(
        multi_root_tile_reduce(sh, g, &tiles[..1], &o, &[0], "prod"),
        "InvalidArgument",
        "only sum",
        "multi reduce_op",
    );
    multi_root_tile_reduce(sh, g, &tiles[..1], &o, &[0], "sum")?;

    // broadcast
    for root in [w as i64, -1] {
        expect(
            nvshmem_broadcast(sh, g, &t, root),
            "InvalidPe",
            "root must be smaller than group size",
            "broadcast root",
        );
    }
    nvshmem_broadcast(sh, g, &t, 0)?;
    healthy(sh, g, fx)
}

fn p2p_errors(sh: &Shmem, fx: &Fx) -> Result<()> {
    let n = sh.n_pes();
    let t = view(fx.input, DType::F32, &[8]);
    for peer in [n as i64, -1] {
        expect(
            nvshmem_put(sh, &t, peer),
            "InvalidPe",
            "peer must be smaller than world size",
            "put peer",
        );
        expect(
            nvshmem_get(sh, &t, peer),
            "InvalidPe",
            "peer must be smaller than world size",
            "get peer",
        );
    }
    let strided = TensorView::new(fx.input, DType::F32, &[4], &[2], 0)?;
    expect(
        nvshmem_put(sh, &strided, 0),
        "InvalidArgument",
        "put op currently supports contiguous tensors only",
        "put strided",
    );
    expect(
        nvshmem_get(sh, &strided, 0),
        "InvalidArgument",
        "get op currently supports contiguous tensors only",
        "get strided",
    );
    let pad4 = view(fx.splits, DType::I32, &[1]);
    expect(
        nvshmem_put_with_signal(sh, &t, &pad4, 1, 0),
        "InvalidArgument",
        "at least one 64-bit word",
        "small pad",
    );
    let misaligned = TensorView::new(fx.splits, DType::I32, &[4], &[1], 1)?;
    expect(
        nvshmem_wait_for_signal(sh, &misaligned, 1, 0),
        "InvalidArgument",
        "8-byte aligned",
        "misaligned pad",
    );
    // Views must lie in their buffer.
    expect(
        TensorView::new(fx.tiles, DType::F32, &[16, 17], &[16, 1], 0).map(|_| ()),
        "OutOfBounds",
        "runs past",
        "view past its buffer",
    );
    expect(
        TensorView::new(fx.tiles, DType::F32, &[4, 4], &[4], 0).map(|_| ()),
        "InvalidArgument",
        "one stride per dimension",
        "strides",
    );
    Ok(())
}

fn group_errors(sh: &Shmem, fx: &Fx) -> Result<()> {
    let (n, me) = (sh.n_pes(), sh.my_pe());
    expect(
        Group::new(sh, &[0, 0]).map(|_| ()),
        "InvalidArgument",
        "listed twice",
        "duplicate PE",
    );
    expect(
        Group::new(sh, &[n]).map(|_| ()),
        "InvalidPe",
        "Group::new",
        "PE out of range",
    );
    expect(
        Group::new(sh, &[]).map(|_| ()),
        "InvalidArgument",
        "at least one PE",
        "empty group",
    );
    // One PE passes a bad list: every PE fails.
    let r = Group::new(sh, if me == n - 1 { &[0, 0][..] } else { &[0][..] }).map(|_| ());
    if me == n - 1 {
        expect(r, "InvalidArgument", "listed twice", "bad list on one PE");
    } else {
        expect(
            r,
            "InvalidArgument",
            "inconsistent PE list",
            "bad list elsewhere",
        );
    }
    if n > 1 {
        // Members disagree on the order.
        let r = Group::new(sh, if me == 0 { &[0, 1][..] } else { &[1, 0][..] }).map(|_| ());
        assert!(
            matches!(
                r,
                Err(Error::InvalidArgument { name: "pes", .. }) | Err(Error::Mismatch { .. })
            ),
            "members passing different lists: {r:?}"
        );
        expect(
            Group::split_contiguous(sh, n + 1).map(|_| ()),
            "InvalidArgument",
            "must be positive and divide",
            "split size",
        );
    }
    // A PE that is not a member.
    let solo = Group::new(sh, &[0])?;
    if me == 0 {
        let s = fx.set_splits(sh, &[0])?;
        all_to_all_vdev(sh, &solo, &fx.input(), &fx.out(ROWS), &s, &fx.oso(1))?;
    } else {
        let s = fx.set_splits(sh, &[0])?;
        expect(
            all_to_all_vdev(sh, &solo, &fx.input(), &fx.out(ROWS), &s, &fx.oso(1)),
            "InvalidArgument",
            "is not a member of the group",
            "non-member",
        );
    }
    solo.free(sh)
}

pe_test!(
    ops_errors_are_typed_and_collective,
    shm [1, 2, 3, 4],
    |sh| {
        let fx = Fx::new(sh)?;
        let g = Group::world(sh)?;
        healthy(sh, &g, &fx)?;
        a2a_errors(sh, &g, &fx)?;
        tile_errors(sh, &g, &fx)?;
        p2p_errors(sh, &fx)?;
        group_errors(sh, &fx)?;
        // Subgroups: the same errors on two halves at once.
        if sh.n_pes() % 2 == 0 {
            let half = Group::split_contiguous(sh, sh.n_pes() / 2)?;
            a2a_errors(sh, &half, &fx)?;
            tile_errors(sh, &half, &fx)?;
        }
        g.free(sh)
    }
);

#[test]
fn wait_for_signal_times_out_1pe() {
    let name = test_name(module_path!(), "wait_for_signal_times_out_1pe");
    if is_pe_of(&name) {
        run_pe(|sh| {
            let pad = sh.calloc::<u64>(1)?;
            let v = TensorView::of(sh, pad, DType::I64, &[1])?;
            let start = std::time::Instant::now();
            let e = nvshmem_wait_for_signal(sh, &v, 7, 0).unwrap_err();
            assert!(matches!(e, Error::Timeout { .. }), "{e}");
            assert!(start.elapsed() >= Duration::from_millis(300));
            assert!(e.to_string().contains("waiting for Eq 7"), "{e}");
            Ok(())
        });
    }
    let out = spawn_pes_with(&name, 1, &[("XPUSHMEM_TIMEOUT_MS", "300")]);
    assert_success(&name, 1, &out);
}

/// A rank that dies before an op: the others report it instead of waiting forever.
fn peer_lost(n: usize, func: &str) {
    let name = test_name(module_path!(), func);
    if is_pe_of(&name) {
        run_pe(|sh| {
            let (me, n) = (sh.my_pe(), sh.n_pes());
            let fx = Fx::new(sh)?;
            let g = Group::world(sh)?;
            let out = sh.calloc::<u64>(1)?.at(0)?;
            healthy(sh, &g, &fx)?;
            // The victim leaves once every other rank is out of the healthy op.
            xpushmem_tests::victim_leaves_last(sh, out, n - 1)?;
            let start = std::time::Instant::now();
            let s = fx.set_splits(sh, &vec![1; n * NE])?;
            let e = all_to_all_vdev_2d(
                sh,
                &g,
                &fx.input(),
                &fx.out(n * ROWS),
                &s,
                &fx.oso(n * NE),
                None,
            )
            .unwrap_err();
            assert!(matches!(e, Error::PeerLost { .. }), "PE {me}: {e}");
            assert!(start.elapsed() < Duration::from_secs(10));
            Ok(())
        });
    }
    let out = spawn_pes_with(&name, n, &[]);
    assert_success(&name, n, &out);
}

#[test]
fn peer_lost_during_dispatch_is_reported_3pe() {
    peer_lost(3, "peer_lost_during_dispatch_is_reported_3pe");
}

/// Failures injected on one rank under the split-exchange protocol, with the argument checks on or off and the
/// eager path on or off (`XPUSHMEM_OPS_EAGER_SIZE`): a bad argument on one rank fails every rank (its verdict
/// travels in the split exchange); an output overflow on the receiving rank fails every rank unless checks are
/// off and every chunk went eagerly (then no completion exchange runs and only the receiver knows); nobody hangs
/// and the group stays usable.
fn injected_failures(sh: &Shmem) -> Result<()> {
    let fx = Fx::new(sh)?;
    let g = Group::world(sh)?;
    let (w, me) = (g.size(), g.my_rank().unwrap());
    let last = me == w - 1;
    healthy(sh, &g, &fx)?;
    let checks = sh.config().check_symmetry;
    let eager = sh.config().ops_eager_size != Some(0);
    for round in 0..3 {
        // Every rank sends 10 rows (80 bytes) to rank 0, whose out holds 5.
        let mut to0 = vec![0i64; w];
        to0[0] = 10;
        let s = fx.set_splits(sh, &to0)?;
        let r = all_to_all_vdev(sh, &g, &fx.input(), &fx.out(5), &s, &fx.oso(w));
        if me == 0 {
            expect(r, "OutOfBounds", "rows of out", "overflow on rank 0");
        } else if !checks && eager {
            assert!(
                r.is_ok(),
                "round {round}: checks off, eager: only the receiver fails: {r:?}"
            );
        } else {
            expect(
                r,
                "InvalidArgument",
                "rejected its arguments",
                "overflow seen by the others",
            );
        }
        healthy(sh, &g, &fx)?;
        // A negative split on the last rank: every rank fails whatever the settings.
        let mut neg = vec![1i64; w];
        if last {
            neg[(round + 1) % w] = -1;
        }
        let s = fx.set_splits(sh, &neg)?;
        expect_one(
            all_to_all_vdev(sh, &g, &fx.input(), &fx.out(w * ROWS), &s, &fx.oso(w)),
            last,
            "InvalidArgument",
            "splits must be non-negative",
            "negative split",
        );
        // A bad 2-D shape on rank 0 only (its split count is not a multiple of W).
        let n = if me == 0 && w > 1 { w * NE + 1 } else { w * NE };
        let s = fx.set_splits(sh, &vec![1; n])?;
        let r = all_to_all_vdev_2d(sh, &g, &fx.input(), &fx.out(w * ROWS), &s, &fx.oso(n), None);
        if w > 1 {
            expect_one(
                r,
                me == 0,
                "InvalidArgument",
                "multiple of the group size",
                "2d shape",
            );
        } else {
            r?;
        }
        healthy(sh, &g, &fx)?;
    }
    g.free(sh)
}

#[test]
fn injected_failures_under_every_protocol_2pe_3pe() {
    let name = test_name(
        module_path!(),
        "injected_failures_under_every_protocol_2pe_3pe",
    );
    if is_pe_of(&name) {
        run_pe(injected_failures);
    }
    for n in [2, 3] {
        for (eager, checks) in [("auto", "1"), ("0", "1"), ("auto", "0"), ("0", "0")] {
            let out = spawn_pes_with(
                &name,
                n,
                &[
                    ("XPUSHMEM_OPS_EAGER_SIZE", eager),
                    ("XPUSHMEM_CHECK_SYMMETRY", checks),
                    ("XPUSHMEM_TIMEOUT_MS", "20000"),
                ],
            );
            assert_success(&name, n, &out);
        }
    }
}

// An all-to-all (one signalled exchange) that meets an agreement-based call on another rank (a group barrier,
// barrier_all, a tile reduction): every rank fails with a mismatch naming the other call, nobody waits for the
// timeout, and the group is usable afterwards.
pe_test!(
    exchange_meets_agreement,
    shm [2, 3],
    |sh| {
    let fx = Fx::new(sh)?;
    let g = Group::world(sh)?;
    let (w, me) = (g.size(), g.my_rank().unwrap());
    let t = fx.tile(fx.tiles, DType::F32);
    let o = fx.tile(fx.tout, DType::F32);
    for other in 0..3 {
        let s = fx.set_splits(sh, &vec![1; w])?;
        let start = std::time::Instant::now();
        let r = if me == 0 {
            all_to_all_vdev(sh, &g, &fx.input(), &fx.out(w * ROWS), &s, &fx.oso(w))
        } else {
            match other {
                0 => g.barrier(sh),
                1 => sh.barrier_all(),
                _ => tile_reduce(sh, &g, &t, &o, 0, "sum"),
            }
        };
        match r {
            Err(Error::Mismatch { .. }) => {}
            r => panic!("PE {me}, case {other}: expected a mismatch, got {r:?}"),
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "PE {me}: detected late"
        );
        healthy(sh, &g, &fx)?;
    }
    g.free(sh)
});

// The mismatch of an exchange with an agreement leaves every rank in step (the race behind a rare
// `exchange_meets_agreement::_3pe` failure): the exchange side used to leave as soon as it found the first
// rank in the agreement, while a rank it never heard from could still be reading the previous call's messages,
// in the buffers the exchange side's next call writes (that rank then saw another digest and failed alone).
// Every iteration one rank runs an all-to-all while the others run an agreement-based call, and one rank of
// the agreement side that the exchange side does not wait for (two or more ranks after it) is late: it writes
// a marker into every rank's heap, then enters the call. No rank may leave the failed call before the late one
// has entered it (the marker is there when the call returns, whatever the timing); every rank names the same
// PE; then a matched all-to-all and a matched 2-D all-to-all run with checked data.
fn mismatch_in_step(sh: &Shmem) -> Result<()> {
    let fx = Fx::new(sh)?;
    let g = Group::world(sh)?;
    let (w, me) = (g.size(), g.my_rank().unwrap());
    let marker = sh.calloc::<u64>(1)?;
    let t = fx.tile(fx.tiles, DType::F32);
    let o = fx.tile(fx.tout, DType::F32);
    for it in 0..3 * w {
        let ex = it % w;
        let late = (ex + 2 + (it / w) % (w - 2)) % w;
        let s = fx.set_splits(sh, &vec![1; w])?;
        if me == late {
            // Widens the window only: the assertion below does not depend on how long this takes.
            std::thread::sleep(Duration::from_millis(20));
            for pe in 0..w {
                sh.put(marker, &[it as u64 + 1], pe)?;
            }
        }
        let r = if me == ex {
            if it % 2 == 0 {
                all_to_all_vdev(sh, &g, &fx.input(), &fx.out(w * ROWS), &s, &fx.oso(w))
            } else {
                let s = fx.set_splits(sh, &vec![1; w * NE])?;
                all_to_all_vdev_2d(
                    sh,
                    &g,
                    &fx.input(),
                    &fx.out(w * ROWS),
                    &s,
                    &fx.oso(w * NE),
                    None,
                )
            }
        } else {
            match (it / w) % 3 {
                0 => g.barrier(sh),
                1 => sh.barrier_all(),
                _ => tile_reduce(sh, &g, &t, &o, 0, "sum"),
            }
        };
        // The first rank whose call differs from rank 0's: rank 1 when rank 0 runs the exchange.
        let want_pe = if ex == 0 { 1 } else { ex };
        match r {
            Err(Error::Mismatch {
                pe, reference_pe, ..
            }) => {
                assert_eq!((pe, reference_pe), (want_pe, 0), "PE {me}, iteration {it}");
            }
            r => panic!("PE {me}, iteration {it}: expected a mismatch, got {r:?}"),
        }
        let mut got = [0u64];
        sh.get(&mut got, marker, sh.my_pe())?;
        assert_eq!(
            got[0],
            it as u64 + 1,
            "PE {me}, iteration {it}: left the failed call before PE {late} entered it"
        );
        healthy(sh, &g, &fx)?;
        // A barrier after it waits for the late rank too (a linear barrier counting arrivals of the failed call
        // would let the others through early).
        if me == late {
            std::thread::sleep(Duration::from_millis(20));
            for pe in 0..w {
                sh.put(marker, &[1000 + it as u64], pe)?;
            }
        }
        sh.barrier_all()?;
        let mut got = [0u64];
        sh.get(&mut got, marker, sh.my_pe())?;
        assert_eq!(
            got[0],
            1000 + it as u64,
            "PE {me}, iteration {it}: left a barrier before PE {late} entered it"
        );
    }
    sh.free(marker)?;
    g.free(sh)
}

pe_test!(
    mismatch_leaves_in_step,
    shm [3, 4],
    |sh| {
    mismatch_in_step(sh)
});

/// The same with every agreement over the linear barrier (3 PEs) and the tree (4 PEs): the exchange side keeps the
/// linear barrier's arrival count at member 0 consistent whichever side member 0 is on.
#[test]
fn mismatch_leaves_in_step_over_linear_and_tree() {
    let name = test_name(
        module_path!(),
        "mismatch_leaves_in_step_over_linear_and_tree",
    );
    if is_pe_of(&name) {
        run_pe(mismatch_in_step);
    }
    for (n, algo) in [(3, "linear"), (4, "tree")] {
        let out = spawn_pes_with(
            &name,
            n,
            &[
                ("XPUSHMEM_BARRIER_ALGORITHM", algo),
                ("XPUSHMEM_TIMEOUT_MS", "20000"),
            ],
        );
        assert_success(&name, n, &out);
    }
}

// Small all-to-alls judge every rank's receive from the split exchange alone (checks on, every chunk eager: no
// completion exchange): with two receivers whose `out` is too small, in a group whose rank order is not the
// team's, each of them gets its own overflow error and every other rank the same error naming the failed
// receiver of the lowest team rank; receivers with different `out` sizes that fit are fine; then a matched call
// works, with checked data.
pe_test!(receive_verdict_in_the_split_exchange, shm[4], |sh| {
    let fx = Fx::new(sh)?;
    // Group rank g is PE pes[g]; team ranks follow the PEs.
    let pes = [3usize, 1, 0, 2];
    let g = Group::new(sh, &pes)?;
    let (w, me) = (g.size(), g.my_rank().unwrap());
    let small = [0usize, 2];
    // Matched calls first, twice (the second reuses the first one's checks): the failing call below has the same
    // views on the ranks that fit, and must still be judged in full on every rank.
    for _ in 0..2 {
        let s = fx.set_splits(sh, &vec![1; w])?;
        all_to_all_vdev(sh, &g, &fx.input(), &fx.out(w + me), &s, &fx.oso(w))?;
    }
    let mut splits = vec![1i64; w];
    for &r in &small {
        splits[r] = 10;
    }
    let s = fx.set_splits(sh, &splits)?;
    // The small receivers' out holds 5 rows (they get 40); the others' a size of their own that fits.
    let rows = if small.contains(&me) { 5 } else { 8 + me };
    let r = all_to_all_vdev(sh, &g, &fx.input(), &fx.out(rows), &s, &fx.oso(w));
    if small.contains(&me) {
        expect(
            r,
            "OutOfBounds",
            "rows of out",
            "overflow on a small receiver",
        );
    } else {
        // The failed receiver of the lowest team rank: group rank 2 (PE 0).
        expect(
            r,
            "InvalidArgument",
            "group rank 2 (PE 0) rejected its arguments",
            "overflow seen by the others",
        );
    }
    // Every receiver fits now: the same call with everyone's out large enough works, again and again (the
    // failed call left no receive plan to reuse; out_splits_offsets is reset before each call).
    for _ in 0..3 {
        let s = fx.set_splits(sh, &vec![1; w])?;
        write(sh, fx.oso, 0, &i64_bytes(&vec![-1; 2 * w]))?;
        all_to_all_vdev(sh, &g, &fx.input(), &fx.out(w + me), &s, &fx.oso(w))?;
        let got = bytes_i64(&read(sh, fx.oso, 0, 16 * w)?);
        assert_eq!(got, [vec![1; w], (0..w as i64).collect()].concat());
    }
    g.free(sh)
});
