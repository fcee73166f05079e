//! The device path of the expert-parallel ops on ze-emu, for the tests: every operand in the (device) symmetric heap
//! ([`Bufs`]), routing, dispatch and combine run on a queue and checked against the reference of `ops_ep_ref.rs`
//! ([`Dev`]), and the body of the case whose PEs sit on two nodes ([`two_nodes`]). Shared by `ops_ep.rs` (nodes
//! simulated on loopback) and `fabric_netns.rs` (two network namespaces), as `ops_ep_ref.rs` is.

use super::ops_ep_ref::*;
use xpushmem::device::queue::Queue;
use xpushmem::{Result, Shmem, SymSlice};
use xpushmem_ops::ep::{DeviceRouting, Layout, TokenSwitch};
use xpushmem_ops::{DType, DeviceOps, Group, OpHandle, Operand, TensorView};

/// Every operand of the device ops, in the (device) symmetric heap, at the switch's maxima.
pub struct Bufs {
    pub idx: SymSlice<u8>,
    pub wts: SymSlice<u8>,
    pub tokens: SymSlice<u8>,
    pub out: SymSlice<u8>,
    pub ow: SymSlice<u8>,
    pub oi: SymSlice<u8>,
    pub y: SymSlice<u8>,
    pub back: SymSlice<u8>,
    pub state: SymSlice<u8>,
}

impl Bufs {
    pub fn new(sh: &Shmem, ts: &TokenSwitch) -> Result<Bufs> {
        let cap = ts.config().max_recv_tokens;
        Ok(Bufs {
            idx: sh.malloc(MAX_N * MAX_K * 8)?,
            wts: sh.malloc(MAX_N * MAX_K * 4)?,
            tokens: sh.malloc(MAX_N * MAX_HIDDEN * 4)?,
            out: sh.malloc(cap * MAX_HIDDEN * 4)?,
            ow: sh.malloc(cap * MAX_K * 4)?,
            oi: sh.malloc(cap * MAX_K * 8)?,
            y: sh.malloc(cap * MAX_HIDDEN * 4)?,
            back: sh.malloc(MAX_N * MAX_HIDDEN * 4)?,
            state: sh.malloc(ts.device_state_bytes())?,
        })
    }

    pub fn free(self, sh: &Shmem) -> Result<()> {
        for b in [
            self.state,
            self.back,
            self.y,
            self.oi,
            self.ow,
            self.out,
            self.tokens,
            self.wts,
            self.idx,
        ] {
            sh.free(b)?;
        }
        Ok(())
    }
}

/// `buf`'s first bytes as a contiguous tensor of `dt` and `shape`.
pub fn t(buf: SymSlice<u8>, dt: DType, shape: &[usize]) -> Result<Operand> {
    let bytes = shape.iter().product::<usize>() * dt.size();
    Ok(Operand::Heap(TensorView::contiguous(
        buf.slice(..bytes)?,
        dt,
        shape,
    )?))
}

/// Write `data` at the start of `buf` (this PE's copy).
pub fn put(sh: &Shmem, buf: SymSlice<u8>, data: &[u8]) -> Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    sh.put(buf.slice(..data.len())?, data, sh.my_pe())
}

/// Read `len` bytes from the start of `buf` (this PE's copy).
pub fn get(sh: &Shmem, buf: SymSlice<u8>, len: usize) -> Result<Vec<u8>> {
    let mut v = vec![0u8; len];
    if len > 0 {
        sh.get(&mut v, buf.slice(..len)?, sh.my_pe())?;
    }
    Ok(v)
}

/// The bytes of `v`, element by element through `f`.
pub fn bytes_of<T: Copy>(v: &[T], f: impl Fn(T) -> Vec<u8>) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

/// Run the list, then report the op's outcome.
pub fn run(sh: &Shmem, q: &Queue, h: Result<OpHandle>) -> Result<()> {
    let h = h?;
    sh.device().expect("a device heap").submit_and_wait(q)?;
    h.wait(sh)
}

/// The device ops of one switch (`ts`) on one queue (`q`), over the operands `b`.
#[derive(Clone, Copy)]
pub struct Dev<'a> {
    pub sh: &'a Shmem,
    pub ops: &'a DeviceOps,
    pub q: &'a Queue,
    pub g: &'a Group,
    pub ts: &'a TokenSwitch,
    pub b: &'a Bufs,
}

impl Dev<'_> {
    pub fn route(&self, idx: &[i64], n: usize, k: usize, layout: Layout) -> Result<DeviceRouting> {
        put(
            self.sh,
            self.b.idx,
            &bytes_of(idx, |x| x.to_le_bytes().to_vec()),
        )?;
        let st = self.ts.device_state_bytes();
        let (r, h) = self.ts.create_routing_on(
            self.sh,
            self.ops,
            self.q.list(),
            self.g,
            &t(self.b.idx, DType::I64, &[n, k])?,
            layout,
            &t(self.b.state, DType::U8, &[st])?,
        )?;
        run(self.sh, self.q, Ok(h))?;
        Ok(r)
    }

    /// Dispatch `x` (`[n, h]` of `dt`, as f32 values); returns the output rows (f32), weights and ids.
    #[allow(clippy::too_many_arguments)]
    pub fn dispatch(
        &self,
        r: &DeviceRouting,
        x: &[f32],
        wts: &[f32],
        dt: DType,
        h: usize,
        flat_idx: bool,
    ) -> Result<(Vec<f32>, Vec<f32>, Vec<i64>)> {
        let (n, k) = (r.num_tokens(), r.top_k());
        let cap = self.ts.config().max_recv_tokens;
        put(self.sh, self.b.tokens, &to_bytes(x, dt))?;
        put(
            self.sh,
            self.b.wts,
            &bytes_of(wts, |x| x.to_le_bytes().to_vec()),
        )?;
        let flat = r.layout() == Layout::Flat;
        let wshape = if flat { vec![cap, k] } else { vec![cap] };
        let oi = t(self.b.oi, DType::I64, &[cap, k])?;
        run(
            self.sh,
            self.q,
            self.ts.dispatch_on(
                self.sh,
                self.ops,
                self.q.list(),
                self.g,
                r,
                &t(self.b.tokens, dt, &[n, h])?,
                &t(self.b.wts, DType::F32, &[n, k])?,
                &t(self.b.out, dt, &[cap, h])?,
                &t(self.b.ow, DType::F32, &wshape)?,
                flat_idx.then_some(&oi),
            ),
        )?;
        let out = from_bytes(&get(self.sh, self.b.out, cap * h * dt.size())?, dt);
        let ow = from_bytes(
            &get(self.sh, self.b.ow, wshape.iter().product::<usize>() * 4)?,
            DType::F32,
        );
        let oi = get(self.sh, self.b.oi, cap * k * 8)?
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
            .collect();
        Ok((out, ow, oi))
    }

    pub fn combine(&self, r: &DeviceRouting, y: &[f32], dt: DType, h: usize) -> Result<Vec<f32>> {
        let cap = self.ts.config().max_recv_tokens;
        let n = r.num_tokens();
        let mut yb = to_bytes(y, dt);
        yb.resize(cap * h * dt.size(), 0);
        put(self.sh, self.b.y, &yb)?;
        put(self.sh, self.b.back, &vec![0xAA; n * h * dt.size()])?;
        run(
            self.sh,
            self.q,
            self.ts.combine_on(
                self.sh,
                self.ops,
                self.q.list(),
                self.g,
                r,
                &t(self.b.y, dt, &[cap, h])?,
                &t(self.b.back, dt, &[n, h])?,
            ),
        )?;
        Ok(from_bytes(
            &get(self.sh, self.b.back, n * h * dt.size())?,
            dt,
        ))
    }

    /// One case on the device against the reference (the same checks as the host path's).
    pub fn case(&self, c: &Case, case: u64) -> Result<()> {
        let me = self.g.my_rank().unwrap();
        let x = expect_of(self.g, c, case);
        let mine = &x.all[me];
        let r = self.route(&mine.idx, mine.n, c.k, c.layout)?;
        let st = get(self.sh, self.b.state, self.ts.device_state_bytes())?;
        let (off, len) = r.info_range(self.ts);
        let info: Vec<u64> = st[off..off + len]
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(info[0] as usize, x.rows.len(), "{}: receive rows", x.what);
        assert_eq!(&info[2..], &x.counts[..], "{}: expert counts", x.what);
        for round in 0..2 {
            let flat = c.layout == Layout::Flat;
            let (out, ow, oi) =
                self.dispatch(&r, &mine.x, &mine.weights, c.dtype, c.hidden, flat)?;
            let y = check_dispatch(c, &x, me, round, &out, &ow, flat.then_some(&oi[..]));
            let back = self.combine(&r, &y, c.dtype, c.hidden)?;
            check_combine(c, &x, me, round, &back);
        }
        Ok(())
    }

    /// The host path's error for the same call, as text (the device must give the same).
    pub fn same<T, U>(&self, dev: Result<T>, host: Result<U>, what: &str) {
        match (dev, host) {
            (Err(d), Err(h)) => {
                assert_eq!(d.kind(), h.kind(), "{what}: device {d} / host {h}");
                if d.kind() != "Mismatch" {
                    assert_eq!(d.to_string(), h.to_string(), "{what}");
                }
            }
            (d, h) => panic!(
                "{what}: device {:?}, host {:?}",
                d.err().map(|e| e.to_string()),
                h.err().map(|e| e.to_string())
            ),
        }
    }
}

/// The device kernels with the PEs on two nodes (`node_of(pe)`: a PE's node; the PEs of the other node must be
/// the fabric's): half of every exchange and sync step goes through the host proxy. The 6-row covering set of
/// `ops_ep_ref::ep_round_trips` (both layouts, top-k 1 to 8, the three float dtypes, the three skews, 1 and 3
/// experts per rank) against the reference; then an expert id out of range (the verdict crosses the nodes too) and a
/// healthy case. `XPUSHMEM_OPS_PATH=auto` resolves to the device path for the EP ops ([`xpushmem_ops::ep_path`])
/// and to the host path for the rest of the op family.
pub fn two_nodes(sh: &Shmem, node_of: &dyn Fn(usize) -> usize) -> Result<()> {
    let me = sh.my_pe();
    let fabric: Vec<usize> = (0..sh.n_pes())
        .filter(|&pe| sh.transport_name(pe) == "fabric")
        .collect();
    let other: Vec<usize> = (0..sh.n_pes())
        .filter(|&pe| node_of(pe) != node_of(me))
        .collect();
    assert_eq!(fabric, other, "PE {me}: the PEs on the fabric");
    // XPUSHMEM_OPS_PATH=auto: the EP ops take the device path here, the rest of the op family the host's.
    assert_eq!(xpushmem_ops::ep_path(sh)?, xpushmem_ops::OpsPath::Device);
    assert_eq!(xpushmem_ops::ops_path(sh)?, xpushmem_ops::OpsPath::Host);
    let ops = DeviceOps::new(sh)?;
    let q = sh.device().expect("a device heap").create_queue(true)?;
    let g = Group::world(sh)?;
    for l in [1, 3] {
        let ts = switch(sh, &g, l)?;
        let b = Bufs::new(sh, &ts)?;
        let d = Dev {
            sh,
            ops: &ops,
            q: &q,
            g: &g,
            ts: &ts,
            b: &b,
        };
        for (case, c) in round_trip_cases(l) {
            d.case(&c, case)?;
        }
        if l == 3 {
            // An expert id out of range on the last rank (on another node than rank 0): the host path's text on
            // every rank.
            let e = (l * g.size()) as i64;
            let idx = if me == sh.n_pes() - 1 {
                vec![0, e]
            } else {
                vec![0, 1]
            };
            let dv = d.route(&idx, 1, 2, Layout::Flat);
            let h = ts.create_routing(sh, &g, &idx, 1, 2, Layout::Flat);
            d.same(dv, h, "bad expert id");
            d.case(&rows_case(l), 998)?;
        }
        b.free(sh)?;
        ts.free(sh)?;
    }
    g.free(sh)
}

/// A healthy case with `l` experts per rank.
pub fn rows_case(l: usize) -> Case {
    Case {
        layout: Layout::ExpertMajor,
        k: 2,
        dtype: DType::F32,
        skew: 0,
        l,
        hidden: 3,
    }
}
