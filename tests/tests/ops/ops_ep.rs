//! Expert-parallel dispatch and combine (`xpushmem_ops::ep::TokenSwitch`, host path) against an independent
//! reference: every PE replays every PE's inputs from the seed and computes what each rank must receive by the
//! definition (sources in rank order, tokens in order; expert-major: experts in order, then sources, tokens and
//! top-k columns), and what combine must return (the sum of the expert outputs of a token's experts). A covering
//! set of (layout, top-k, dtype, routing skew, experts per rank, hidden) rows; then the errors: an expert id out
//! of range, a receive overflow (the same error on every rank), ranks disagreeing (`Mismatch`, also ranks that
//! call different ops right after a routing), and a lost peer.

use crate::ops_ep_ref::*;
use std::time::Duration;
use xpushmem::{Error, Result, Shmem};
use xpushmem_ops::ep::{EpConfig, Layout, Routing, TokenSwitch};
use xpushmem_ops::{DType, Group};
use xpushmem_tests::cover::{depth, pairwise, product, Depth};
use xpushmem_tests::{assert_success, is_pe_of, pe_test, run_pe, spawn_pes_with, test_name};

#[track_caller]
fn expect<T>(r: Result<T>, kind: &str, text: &str, what: &str) {
    match r {
        Ok(_) => panic!("{what}: expected a {kind} error containing {text:?}, got Ok"),
        Err(e) => {
            assert_eq!(e.kind(), kind, "{what}: {e}");
            assert!(e.to_string().contains(text), "{what}: {text:?} not in {e}");
        }
    }
}

/// The case of a covering row (layout, top-k, dtype, skew, experts-per-rank index, hidden index).
fn case_of(row: &[usize], ks: &[usize], l: usize, hiddens: &[usize]) -> Case {
    Case {
        layout: [Layout::Flat, Layout::ExpertMajor][row[0]],
        k: ks[row[1]],
        dtype: [DType::F32, DType::BF16, DType::F16][row[2]],
        skew: row[3],
        l,
        hidden: hiddens[row[5]],
    }
}

/// A switch like `ts` that receives at most W rows per rank (the overflow cases).
fn small_switch(sh: &Shmem, g: &Group, ts: &TokenSwitch) -> Result<TokenSwitch> {
    TokenSwitch::new(
        sh,
        g,
        EpConfig {
            max_recv_tokens: g.size(),
            ..ts.config()
        },
    )
}

fn healthy(sh: &Shmem, g: &Group, ts: &TokenSwitch, l: usize) -> Result<()> {
    let c = Case {
        layout: Layout::ExpertMajor,
        k: 2,
        dtype: DType::F32,
        skew: 0,
        l,
        hidden: 3,
    };
    run_case(sh, g, ts, &c, 999)
}

/// A flat dispatch whose last rank passes no out_topk_idx: it names the argument, the others name that rank.
fn missing_out_topk_idx(
    sh: &Shmem,
    g: &Group,
    ts: &TokenSwitch,
    r: &Routing,
    w: usize,
    last: bool,
) {
    let mut oi = vec![0i64; w];
    let r2 = ts.dispatch(
        sh,
        g,
        r,
        &[0u8; 16],
        DType::F32,
        4,
        &[1.0],
        &mut vec![0u8; 16 * w],
        &mut vec![0f32; w],
        if last { None } else { Some(&mut oi) },
    );
    if last {
        expect(
            r2,
            "InvalidArgument",
            "out_topk_idx",
            "missing out_topk_idx",
        );
    } else {
        expect(
            r2,
            "InvalidArgument",
            "rejected its arguments",
            "missing out_topk_idx elsewhere",
        );
    }
}

/// Right after a routing neither dispatch nor combine has an entry (their op, verdict and digest travel in a
/// header with their signals). Every rank sends its one token to expert 0 (rank 0: it receives W flat rows, source
/// s's in row s). A combine right after the routing returns row s to source s; then rank 0 dispatches where the
/// others combine, then (right after another routing) routes where the others dispatch: `Mismatch` on every rank,
/// naming the other op (before, both sides waited for a message the other never sent and gave up with
/// `Timeout`).
fn cross_op_after_routing(sh: &Shmem, g: &Group, ts: &TokenSwitch) -> Result<()> {
    let (w, me) = (g.size(), g.my_rank().unwrap());
    let f32_bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let r = ts.create_routing(sh, g, &[0], 1, 1, Layout::Flat)?;
    let rows = r.recv_rows();
    assert_eq!(rows, if me == 0 { w } else { 0 });
    let expert_rows: Vec<f32> = (0..rows).flat_map(|s| [s as f32 + 0.5; 4]).collect();
    let mut out = [0u8; 16];
    ts.combine(sh, g, &r, &f32_bytes(&expert_rows), DType::F32, 4, &mut out)?;
    assert_eq!(
        out.to_vec(),
        f32_bytes(&[me as f32 + 0.5; 4]),
        "combine right after its routing"
    );
    let r = ts.create_routing(sh, g, &[0], 1, 1, Layout::Flat)?;
    let n = rows.max(1);
    let got = if me == 0 {
        ts.dispatch(
            sh,
            g,
            &r,
            &[0u8; 16],
            DType::F32,
            4,
            &[1.0],
            &mut vec![0u8; 16 * n],
            &mut vec![0f32; n],
            Some(&mut vec![0i64; n]),
        )
    } else {
        ts.combine(sh, g, &r, &vec![0u8; 16 * n], DType::F32, 4, &mut out)
    };
    let other = if me == 0 { "ep_combine" } else { "ep_dispatch" };
    expect(got, "Mismatch", other, "dispatch where the others combine");
    // A routing where the others dispatch, right after a routing: the routing meets them first.
    let r = ts.create_routing(sh, g, &[0], 1, 1, Layout::Flat)?;
    let got = if me == 0 {
        ts.create_routing(sh, g, &[0], 1, 1, Layout::Flat)
            .map(|_| ())
    } else {
        ts.dispatch(
            sh,
            g,
            &r,
            &[0u8; 16],
            DType::F32,
            4,
            &[1.0],
            &mut [0u8; 16],
            &mut [0f32; 1],
            Some(&mut [0i64; 1]),
        )
    };
    let other = if me == 0 {
        "ep_dispatch"
    } else {
        "ep_create_routing"
    };
    expect(got, "Mismatch", other, "routing where the others dispatch");
    Ok(())
}

fn errors(sh: &Shmem, g: &Group, ts: &TokenSwitch, l: usize) -> Result<()> {
    let (w, me) = (g.size(), g.my_rank().unwrap());
    let last = me == w - 1;
    let e = (l * w) as i64;
    // An expert id out of range on the last rank: it names the value and position; the others name the rank.
    let idx = if last { vec![0, e] } else { vec![0, 1] };
    let r = ts.create_routing(sh, g, &idx, 1, 2, Layout::Flat);
    if last {
        expect(
            r,
            "InvalidArgument",
            &format!("{e} at [0, 1]"),
            "bad expert id",
        );
    } else {
        expect(
            r,
            "InvalidArgument",
            "rejected its arguments",
            "bad expert id elsewhere",
        );
    }
    healthy(sh, g, ts, l)?;
    // A switch receiving at most W rows; every rank sends rank 0 two tokens (on two of its experts, when it has
    // two): rank 0 would receive 2W slots (flat) or 2W or 4W pairs (expert-major). Every rank reports the same
    // overflow, naming rank 0, the count and the excess; a routing that fits still works.
    let small = small_switch(sh, g, ts)?;
    let k = l.min(2);
    let idx: Vec<i64> = (0..2).flat_map(|_| 0..k as i64).collect();
    for layout in [Layout::Flat, Layout::ExpertMajor] {
        let rows = if layout == Layout::Flat {
            2 * w
        } else {
            2 * k * w
        };
        expect(
            small.create_routing(sh, g, &idx, 2, k, layout),
            "OutOfBounds",
            &format!(
                "rank 0 would receive {rows} {} rows ({} did not fit in max_recv_tokens_per_rank = {w})",
                layout.name(),
                rows - w
            ),
            "overflow",
        );
    }
    let r = small.create_routing(sh, g, &[0], 1, 1, Layout::Flat)?;
    assert_eq!(r.recv_rows(), if me == 0 { w } else { 0 });
    small.free(sh)?;
    healthy(sh, g, ts, l)?;
    // Ranks disagreeing on top-k, then on the dtype of a dispatch: Mismatch on every rank.
    let k = if last { 2 } else { 1 };
    expect(
        ts.create_routing(sh, g, &vec![0; k], 1, k, Layout::Flat),
        "Mismatch",
        "",
        "top-k differs",
    );
    // Right after its routing (the dispatch's verdicts travel with its signals), then after a failed op (the
    // dispatch's own entry): the dtype differs, then a bad local argument (the flat layout needs out_topk_idx).
    let r = ts.create_routing(sh, g, &[0], 1, 1, Layout::Flat)?;
    let dt = if last { DType::F16 } else { DType::F32 };
    let dtype_differs = |r: &Routing, what: &str| {
        let rows = r.recv_rows();
        expect(
            ts.dispatch(
                sh,
                g,
                r,
                &vec![0u8; 4 * dt.size()],
                dt,
                4,
                &[1.0],
                &mut vec![0u8; rows.max(1) * 4 * dt.size()],
                &mut vec![0f32; rows.max(1)],
                Some(&mut vec![0i64; rows.max(1)]),
            ),
            "Mismatch",
            "",
            what,
        )
    };
    dtype_differs(&r, "dtype differs, after the routing");
    dtype_differs(&r, "dtype differs, at the entry");
    let fresh = ts.create_routing(sh, g, &[0], 1, 1, Layout::Flat)?;
    missing_out_topk_idx(sh, g, ts, &fresh, w, last);
    missing_out_topk_idx(sh, g, ts, &r, w, last);
    healthy(sh, g, ts, l)?;
    cross_op_after_routing(sh, g, ts)?;
    healthy(sh, g, ts, l)?;
    // The rows stay in the receive area in the flat layout only: an expert-major routing is refused by
    // dispatch_in_place and combine_in_place (on every rank, naming the layout).
    let r = ts.create_routing(sh, g, &[0, 1], 1, 2, Layout::ExpertMajor)?;
    expect(
        ts.dispatch_in_place(
            sh,
            g,
            &r,
            &[0u8; 4],
            DType::F32,
            1,
            &[1.0, 1.0],
            &mut [0f32; 8],
            None,
        ),
        "InvalidArgument",
        "layout",
        "dispatch_in_place of expert_major",
    );
    expect(
        ts.combine_in_place(sh, g, &r, DType::F32, 1, &mut [0u8; 4]),
        "InvalidArgument",
        "combine_in_place is for the flat layout",
        "combine_in_place of expert_major",
    );
    healthy(sh, g, ts, l)
}

pe_test!(ep_dispatch_combine_against_reference, shm[2, 3, 4], |sh| {
    let g = Group::world(sh)?;
    let w = g.size();
    let ks = [1, 2, 3, 8];
    let ls = [1, 3];
    let hiddens = [1, 8, MAX_HIDDEN];
    let dims = [2, ks.len(), 3, 3, ls.len(), hiddens.len()];
    let rows = match depth() {
        Depth::Full => product(&dims, |_| true),
        Depth::Cover => pairwise(
            &dims,
            &[(0, 1), (0, 2), (0, 3), (0, 4), (1, 3), (1, 4), (2, 5)],
            |_| true,
        ),
    };
    for l in ls {
        let ts = switch(sh, &g, l)?;
        for (i, row) in rows.iter().enumerate().filter(|(_, r)| ls[r[4]] == l) {
            let c = case_of(row, &ks, l, &hiddens);
            run_case(sh, &g, &ts, &c, i as u64 * 31 + w as u64)?;
        }
        if w == 3 || l == 1 {
            errors(sh, &g, &ts, l)?;
        }
        ts.free(sh)?;
    }
    g.free(sh)
});

// Rows of 256 KiB: the host combine brings the returned rows in blocks of at most 1 MiB (or of one token), so a
// block holds 1-4 tokens here and a combine runs over several blocks (the covering set above fits in one).
pe_test!(ep_combine_in_blocks, shm[2, 3], |sh| {
    let g = Group::world(sh)?;
    let hidden = 64 << 10;
    let ts = TokenSwitch::new(
        sh,
        &g,
        EpConfig {
            num_experts: 2 * g.size(),
            max_dispatch_tokens: MAX_N,
            max_recv_tokens: MAX_N * 3 * g.size(),
            max_token_bytes: hidden * 4,
            max_topk: MAX_K,
        },
    )?;
    for (i, (layout, k, dtype)) in [
        (Layout::Flat, 3, DType::F32),
        (Layout::ExpertMajor, 2, DType::BF16),
    ]
    .into_iter()
    .enumerate()
    {
        let c = Case {
            layout,
            k,
            dtype,
            skew: 0,
            l: 2,
            hidden,
        };
        run_case(sh, &g, &ts, &c, 900 + i as u64)?;
    }
    ts.free(sh)?;
    g.free(sh)
});

/// A rank that died during a dispatch is reported as `PeerLost` on the others, quickly (no hang).
#[test]
fn ep_peer_lost_in_dispatch_3pe() {
    let name = test_name(module_path!(), "ep_peer_lost_in_dispatch_3pe");
    if is_pe_of(&name) {
        run_pe(|sh| {
            let (me, n) = (sh.my_pe(), sh.n_pes());
            let g = Group::world(sh)?;
            let ts = switch(sh, &g, 2)?;
            let out = sh.calloc::<u64>(1)?.at(0)?;
            healthy(sh, &g, &ts, 2)?;
            let r = ts.create_routing(sh, &g, &[0, 5], 1, 2, Layout::Flat)?;
            xpushmem_tests::victim_leaves_last(sh, out, n - 1)?;
            let start = std::time::Instant::now();
            let rows = r.recv_rows().max(1);
            let e = ts
                .dispatch(
                    sh,
                    &g,
                    &r,
                    &[0u8; 8],
                    DType::F32,
                    2,
                    &[1.0, 1.0],
                    &mut vec![0u8; rows * 8],
                    &mut vec![0f32; rows * 2],
                    Some(&mut vec![0i64; rows * 2]),
                )
                .unwrap_err();
            assert!(matches!(e, Error::PeerLost { .. }), "PE {me}: {e}");
            assert!(start.elapsed() < Duration::from_secs(10));
            Ok(())
        });
    }
    let out = spawn_pes_with(&name, 3, &[]);
    assert_success(&name, 3, &out);
}

// ---- the device path (kernels on a command list, ze-emu) ---------------------------------------------------

mod device {
    use super::*;
    use crate::ops_ep_dev::{self, t, Bufs, Dev};
    use xpushmem_ops::DeviceOps;

    /// The errors of the host path's `errors`, on the device, each compared with the host path's text and
    /// followed by a healthy case.
    fn device_errors(dev: &Dev<'_>, l: usize) -> Result<()> {
        let (sh, g, ts) = (dev.sh, dev.g, dev.ts);
        let (w, me) = (g.size(), g.my_rank().unwrap());
        let last = me == w - 1;
        let healthy = Case {
            layout: Layout::ExpertMajor,
            k: 2,
            dtype: DType::F32,
            skew: 0,
            l,
            hidden: 3,
        };
        let e = (l * w) as i64;
        let idx = if last { vec![0, e] } else { vec![0, 1] };
        let d = dev.route(&idx, 1, 2, Layout::Flat);
        let h = ts.create_routing(sh, g, &idx, 1, 2, Layout::Flat);
        dev.same(d, h, "bad expert id");
        dev.case(&healthy, 999)?;
        // A receive overflow on a switch receiving at most W rows (every rank sends rank 0 two tokens): the
        // same error on every rank; a routing that fits still works.
        let small = small_switch(sh, g, ts)?;
        let sb = Bufs::new(sh, &small)?;
        let sd = Dev {
            ts: &small,
            b: &sb,
            ..*dev
        };
        let k = l.min(2);
        let idx: Vec<i64> = (0..2).flat_map(|_| 0..k as i64).collect();
        for layout in [Layout::Flat, Layout::ExpertMajor] {
            let d = sd.route(&idx, 2, k, layout);
            let h = small.create_routing(sh, g, &idx, 2, k, layout);
            assert_eq!(d.as_ref().err().map(|e| e.kind()), Some("OutOfBounds"));
            dev.same(d, h, "overflow");
        }
        let r = sd.route(&[0], 1, 1, Layout::Flat)?;
        let (out, _, oi) = sd.dispatch(&r, &[5.0], &[1.0], DType::F32, 1, true)?;
        if me == 0 {
            assert_eq!(&out[..w], &vec![5.0; w][..], "the routing that fits");
            assert_eq!(&oi[..w], &vec![0; w][..]);
        }
        sb.free(sh)?;
        small.free(sh)?;
        dev.case(&healthy, 998)?;
        // Ranks disagreeing on top-k: Mismatch everywhere.
        let k = if last { 2 } else { 1 };
        let d = dev.route(&vec![0; k], 1, k, Layout::Flat);
        let h = ts.create_routing(sh, g, &vec![0; k], 1, k, Layout::Flat);
        dev.same(d, h, "top-k differs");
        // Ranks disagreeing on the dtype of a dispatch, then a rank without out_topk_idx.
        let r = dev.route(&[0], 1, 1, Layout::Flat)?;
        let dt = if last { DType::F16 } else { DType::F32 };
        let d = dev.dispatch(&r, &[1.0; 4], &[1.0], dt, 4, true);
        assert_eq!(d.err().map(|e| e.kind()), Some("Mismatch"), "dtype differs");
        let d = dev.dispatch(&r, &[1.0; 4], &[1.0], DType::F32, 4, !last);
        let want = if last {
            "out_topk_idx"
        } else {
            "rejected its arguments"
        };
        match d {
            Err(e) => assert!(e.to_string().contains(want), "{want} not in {e}"),
            Ok(_) => panic!("a missing out_topk_idx: expected an error"),
        }
        dev.case(&healthy, 997)
    }

    // The device kernels against the reference (the host path's checks), a covering set of layout x top-k x
    // dtype x skew x experts per rank x hidden, then the errors (each with the host path's text).
    pe_test!(ep_device_against_reference, dev[2, 3], |sh| {
        let ops = DeviceOps::new(sh)?;
        let q = sh.device().expect("a device heap").create_queue(true)?;
        let g = Group::world(sh)?;
        let ks = [1, 3, 8];
        let ls = [1, 3];
        let hiddens = [1, 8, MAX_HIDDEN];
        let dims = [2, ks.len(), 3, 3, ls.len(), hiddens.len()];
        let rows = pairwise(&dims, &[(0, 1), (0, 2), (0, 4), (2, 5)], |_| true);
        for l in ls {
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
            for (i, row) in rows.iter().enumerate().filter(|(_, r)| ls[r[4]] == l) {
                let c = case_of(row, &ks, l, &hiddens);
                d.case(&c, i as u64 * 37 + g.size() as u64)?;
            }
            if l == 3 {
                device_errors(&d, l)?;
            }
            b.free(sh)?;
            ts.free(sh)?;
        }
        g.free(sh)
    });

    /// The device kernels with PEs on two simulated nodes (`XPUSHMEM_NODE_ID` "aabb": PEs 0-1 and 2-3 share a
    /// node each, the other node's PEs are reached through the fabric, libfabric `tcp` on loopback): half of
    /// every exchange and sync step goes through the host proxy. The 6-row covering set of
    /// `ops_ep_ref::ep_round_trips` (both layouts, top-k 1 to 8, the three float dtypes, the three skews, 1 and 3
    /// experts per rank) against the reference, as `ep_device_against_reference`; then an expert id out of range
    /// (the verdict crosses the nodes too) and a healthy case. `XPUSHMEM_OPS_PATH=auto` resolves to the device path
    /// for the EP ops ([`xpushmem_ops::ep_path`]) and to the host path for the rest of the op family.
    #[test]
    fn dev_ep_two_nodes_4pe() {
        let name = xpushmem_tests::test_name(module_path!(), "dev_ep_two_nodes_4pe");
        if xpushmem_tests::is_pe_of(&name) {
            let node = ["a", "a", "b", "b"][xpushmem_tests::launcher_rank()];
            // Before init, in this single-threaded PE process: its node.
            std::env::set_var("XPUSHMEM_NODE_ID", node);
            xpushmem_tests::run_pe(two_nodes);
        }
        if !matches!(xpushmem::transport::fabric_providers(), Ok(Some(_))) {
            eprintln!("skipped: this build has no fabric transport (libfabric headers missing at build time)");
            return;
        }
        let env = xpushmem_tests::device_env();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let out = xpushmem_tests::spawn_pes_with(&name, 4, &env);
        xpushmem_tests::assert_success(&name, 4, &out);
    }

    fn two_nodes(sh: &Shmem) -> Result<()> {
        ops_ep_dev::two_nodes(sh, &|pe| pe / 2)
    }

    // A rank that died before a dispatch (the device path of `ep_peer_lost_in_dispatch_3pe`): the kernel's sync
    // step gives up on it after XPUSHMEM_TIMEOUT_MS (the device cannot see a dead peer), and every survivor's
    // handle reports `PeerLost` naming it, not `Timeout`. The survivors learn that the kernel has finished the way
    // a caller that synchronised its stream does (polling the handle, as `xpushmem_ops_queue_poll`), not through
    // a host wait of the runtime (which would notice the loss itself): the handle's report alone decides.
    #[test]
    fn dev_ep_peer_lost_in_dispatch_3pe() {
        dev_peer_lost("dev_ep_peer_lost_in_dispatch_3pe", None);
    }

    /// `dev_ep_peer_lost_in_dispatch_3pe` with the victim on another node (`XPUSHMEM_NODE_ID` "aab": PEs 0 and 1
    /// share a node, PE 2 is reached through the fabric and, from the kernels, the host proxy).
    #[test]
    fn dev_ep_peer_lost_across_nodes_3pe() {
        dev_peer_lost("dev_ep_peer_lost_across_nodes_3pe", Some("aab"));
    }

    /// Run [`peer_lost`] at 3 PEs on `nodes` (one character per PE; `None`: one node). The victim (the last PE)
    /// kills itself (SIGKILL: a process that exits runs the device runtime's and the fabric's exit handlers while
    /// their threads still run, which may abort it); the launcher must name it, and every survivor exit with 0.
    fn dev_peer_lost(func: &str, nodes: Option<&str>) {
        let name = xpushmem_tests::test_name(module_path!(), func);
        if xpushmem_tests::is_pe_of(&name) {
            if let Some(nodes) = nodes {
                let node = &nodes[xpushmem_tests::launcher_rank()..][..1];
                // Before init, in this single-threaded PE process: its node.
                std::env::set_var("XPUSHMEM_NODE_ID", node);
            }
            xpushmem_tests::run_pe(peer_lost);
        }
        if nodes.is_some() && !matches!(xpushmem::transport::fabric_providers(), Ok(Some(_))) {
            eprintln!("skipped: this build has no fabric transport (libfabric headers missing at build time)");
            return;
        }
        let mut env = xpushmem_tests::device_env();
        env.push(("XPUSHMEM_TIMEOUT_MS".into(), "3000".into()));
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let mut job = xpushmem_tests::pe_job(&name, 3, &env);
        job.stop_on_failure = false;
        let out = job.run().expect("launch");
        let all = xpushmem_tests::outputs(&out);
        assert!(!out.timed_out, "the job hung\n{all}");
        assert_eq!(
            out.first_failure,
            Some((2, xpushmem_launch::PeExit::Signal(9))),
            "the launcher names the victim\n{all}"
        );
        for pe in 0..2 {
            assert_eq!(
                out.exits[pe],
                xpushmem_launch::PeExit::Code(0),
                "survivor PE {pe}\n{all}"
            );
        }
    }

    /// The body of the lost-peer cases: the last PE leaves (SIGKILL) after a healthy round trip and a routing; the
    /// others' dispatch must report `PeerLost` naming it.
    fn peer_lost(sh: &Shmem) -> Result<()> {
        let ops = DeviceOps::new(sh)?;
        let q = sh.device().expect("a device heap").create_queue(true)?;
        let g = Group::world(sh)?;
        let ts = switch(sh, &g, 2)?;
        let b = Bufs::new(sh, &ts)?;
        let d = Dev {
            sh,
            ops: &ops,
            q: &q,
            g: &g,
            ts: &ts,
            b: &b,
        };
        let out = sh.calloc::<u64>(1)?.at(0)?;
        let victim = sh.n_pes() - 1;
        let healthy = Case {
            layout: Layout::Flat,
            k: 2,
            dtype: DType::F32,
            skew: 0,
            l: 2,
            hidden: 2,
        };
        d.case(&healthy, 999)?;
        // Expert 5 lives on the victim (2 experts per rank).
        let r = d.route(&[0, 5], 1, 2, Layout::Flat)?;
        // The victim leaves once every other PE has counted out on it (as `victim_leaves_last`), by SIGKILL.
        if sh.my_pe() == victim {
            sh.wait_until(out, xpushmem::Cmp::Eq, (sh.n_pes() - 1) as u64)?;
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::KILL,
            );
        } else {
            sh.atomic_add(out, 1, victim)?;
        }
        let cap = ts.config().max_recv_tokens;
        let h = ts.dispatch_on(
            sh,
            &ops,
            q.list(),
            &g,
            &r,
            &t(b.tokens, DType::F32, &[1, 2])?,
            &t(b.wts, DType::F32, &[1, 2])?,
            &t(b.out, DType::F32, &[cap, 2])?,
            &t(b.ow, DType::F32, &[cap, 2])?,
            Some(&t(b.oi, DType::I64, &[cap, 2])?),
        )?;
        // The harness's hard limit ends a kernel that never finishes.
        while !h.is_complete()? {
            std::thread::sleep(Duration::from_millis(20));
        }
        match h.wait(sh) {
            Err(Error::PeerLost { pe, .. }) if pe == victim => Ok(()),
            r => panic!(
                "PE {}: expected PeerLost naming PE {victim}, got {:?}",
                sh.my_pe(),
                r.err().map(|e| e.to_string())
            ),
        }
    }
}

// Eight ranks on the host path (8 PEs on the 2-core machine: one launch): the covering set of
// `ops_ep_ref::ep_round_trips` (both layouts, top-k 1 to 8, the three float dtypes, skewed and masked routings, 1
// and 3 experts per rank) against the reference.
pe_test!(ep_round_trips_at_8_ranks, shm[8], |sh| {
    ep_round_trips(sh)
});
