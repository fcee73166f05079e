//! Device team barriers, collectives and reductions checked against host references: shared by the one-node
//! device suite (`device_lib.rs`) and the device-across-nodes suite (`fabric/fabric_device.rs`, which includes this
//! file), so that a team spanning nodes runs the same kernels (`device_kernels/device_teams.cl`,
//! `device_reduce.cl`, `device_rma.cl`'s `k_short`) with the same checks as a team on one node.

use xpushmem::{KernelArg, Shmem};

/// Launches a kernel of a linked, initialised module by name.
pub(crate) trait Launch {
    /// Launch `name` with `groups` work-groups of `size` items.
    fn run(&self, name: &str, args: &[KernelArg], groups: u32, size: u32) -> xpushmem::Result<()>;
}

/// How the kernels call a team barrier or collective: a kernel-name suffix, the `mode` argument of `k_team_sync`
/// (0 one work-item, 1 work-group, 2 sub-group), the work-group size, a name for messages.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Form {
    /// Appended to `k_team_sync` / `k_team_coll`.
    pub suffix: &'static str,
    /// `k_team_sync`'s mode.
    pub mode: u32,
    /// Work-items of the one work-group launched.
    pub size: u32,
    /// For messages.
    pub name: &'static str,
}

/// One work-item per PE (barriers only).
pub(crate) const ITEM: Form = Form {
    suffix: "",
    mode: 0,
    size: 16,
    name: "work-item",
};
/// The `_work_group` forms, a work-group of 32.
pub(crate) const WORK_GROUP: Form = Form {
    suffix: "",
    mode: 1,
    size: 32,
    name: "work-group",
};
/// The `_sub_group` forms in kernels built for sub-groups of 8, 16 and 32 (`intel_reqd_sub_group_size`), each
/// launched as one work-group of one sub-group.
pub(crate) const SUB_GROUPS: [Form; 3] = [
    Form {
        suffix: "_sg8",
        mode: 2,
        size: 8,
        name: "sub-group of 8",
    },
    Form {
        suffix: "_sg16",
        mode: 2,
        size: 16,
        name: "sub-group of 16",
    },
    Form {
        suffix: "_sg32",
        mode: 2,
        size: 32,
        name: "sub-group of 32",
    },
];

/// Every form: one work-item, work-group, sub-groups of 8, 16 and 32.
pub(crate) const ALL_FORMS: [Form; 5] = [
    ITEM,
    WORK_GROUP,
    SUB_GROUPS[0],
    SUB_GROUPS[1],
    SUB_GROUPS[2],
];

/// `rounds` of `team_sync` in every form, then the collectives in every group form (all but the one-work-item
/// form), on `team`.
pub(crate) fn check_team_every_form(
    sh: &Shmem,
    lib: &dyn Launch,
    team: &xpushmem::Team,
    rounds: u32,
) -> xpushmem::Result<()> {
    check_team_sync(sh, lib, team, &ALL_FORMS, rounds)?;
    for form in &ALL_FORMS[1..] {
        check_team_collectives(sh, lib, team, form)?;
    }
    Ok(())
}

fn sym<T: xpushmem::Symmetric>(s: xpushmem::SymSlice<T>, pe: usize) -> KernelArg {
    KernelArg::sym(s, pe)
}

// ---- reductions (device_reduce.cl: every type and operation, work-group form) -------------------------------

/// (name, bytes, signed, float) in the order of the header's XPUSHMEM_REDUCE_INT_TYPES then _FLOAT_TYPES.
const RED_TYPES: [(&str, usize, bool, bool); 12] = [
    ("int8", 1, true, false),
    ("int16", 2, true, false),
    ("int32", 4, true, false),
    ("int64", 8, true, false),
    ("uint8", 1, false, false),
    ("uint16", 2, false, false),
    ("uint32", 4, false, false),
    ("uint64", 8, false, false),
    ("half", 2, false, true),
    ("bfloat16", 2, false, true),
    ("float", 4, false, true),
    ("double", 8, false, true),
];
const INT_OPS: [&str; 7] = ["sum", "prod", "min", "max", "and", "or", "xor"];
const FLOAT_OPS: [&str; 4] = ["sum", "prod", "min", "max"];

/// Element i of PE pe's source for a type: reference bits for integers; 1, 2 or 3 for floats (so that every
/// result over 4 PEs is exact in half and bfloat16).
fn red_input(pe: usize, i: usize) -> f64 {
    (xpushmem_tests::reference(pe, i, 20) % 3 + 1) as f64
}

fn float_bits(name: &str, v: f64) -> u64 {
    match name {
        "double" => v.to_bits(),
        "float" => u64::from((v as f32).to_bits()),
        "bfloat16" => {
            let b = (v as f32).to_bits();
            assert_eq!(b & 0xffff, 0, "{v} is exact in bfloat16");
            u64::from(b >> 16)
        }
        _ => {
            // half: v is a positive integer below 2048, exact.
            let x = v as u64;
            assert!((1..2048).contains(&x) && x as f64 == v);
            let e = 63 - x.leading_zeros() as u64;
            ((e + 15) << 10) | ((x << (10 - e)) & 0x3ff)
        }
    }
}

fn int_op(op: &str, a: i128, b: i128, signed: bool, bits: u32) -> i128 {
    let mask = if bits == 64 {
        u64::MAX as i128
    } else {
        (1i128 << bits) - 1
    };
    let norm = |v: i128| -> i128 {
        let u = v & mask;
        if signed && u >> (bits - 1) == 1 {
            u - (1i128 << bits)
        } else {
            u
        }
    };
    norm(match op {
        "sum" => a.wrapping_add(b),
        "prod" => (a & mask).wrapping_mul(b & mask),
        "min" => a.min(b),
        "max" => a.max(b),
        "and" => a & b,
        "or" => a | b,
        _ => a ^ b,
    })
}

pub(crate) fn reductions(sh: &Shmem, lib: &dyn Launch) -> xpushmem::Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    const NR: usize = 257;
    let src = sh.calloc::<u8>(NR * 8)?;
    let dst = sh.calloc::<u8>(NR * 8)?;
    let status = sh.calloc::<i32>(1)?;
    let mut which = 0u32;
    for ty in RED_TYPES {
        let (name, size, signed, float) = ty;
        let bits = 8 * size as u32;
        let ops: &[&str] = if float { &FLOAT_OPS } else { &INT_OPS };
        // Element bits of PE pe's source.
        let elem = |pe: usize, i: usize| -> u64 {
            if float {
                float_bits(name, red_input(pe, i))
            } else {
                xpushmem_tests::reference(pe, i, 21) & (u64::MAX >> (64 - bits))
            }
        };
        let mut bytes = Vec::with_capacity(NR * size);
        for i in 0..NR {
            bytes.extend_from_slice(&elem(me, i).to_le_bytes()[..size]);
        }
        sh.put(src.slice(0..NR * size)?, &bytes, me)?;
        for op in ops {
            sh.barrier_all()?;
            lib.run(
                "k_reduce",
                &[
                    sym(dst, me),
                    sym(src, me),
                    KernelArg::U64(NR as u64),
                    KernelArg::U32(which),
                    sym(status, me),
                ],
                1,
                32,
            )?;
            which += 1;
            let mut st = [0i32];
            sh.get(&mut st, status, me)?;
            assert_eq!(st[0], 0, "{name} {op} status");
            let mut got = vec![0u8; NR * size];
            sh.get(&mut got, dst.slice(0..NR * size)?, me)?;
            for i in 0..NR {
                let mut b8 = [0u8; 8];
                b8[..size].copy_from_slice(&got[i * size..(i + 1) * size]);
                let have = u64::from_le_bytes(b8);
                let want = if float {
                    let mut acc = red_input(0, i);
                    for pe in 1..n {
                        let v = red_input(pe, i);
                        acc = match *op {
                            "sum" => acc + v,
                            "prod" => acc * v,
                            "min" => acc.min(v),
                            _ => acc.max(v),
                        };
                    }
                    float_bits(name, acc)
                } else {
                    let as_i = |u: u64| -> i128 {
                        if signed && bits < 128 && (u >> (bits - 1)) & 1 == 1 {
                            u as i128 - (1i128 << bits)
                        } else {
                            u as i128
                        }
                    };
                    let mut acc = as_i(elem(0, i));
                    for pe in 1..n {
                        acc = int_op(op, acc, as_i(elem(pe, i)), signed, bits);
                    }
                    (acc as u64) & (u64::MAX >> (64 - bits))
                };
                assert_eq!(have, want, "{name} {op} element {i} over {n} PEs");
            }
        }
    }
    assert_eq!(which, 72, "every reduction was run");
    sh.barrier_all()?;
    Ok(())
}

// ---- team barriers and collectives (device_teams.cl) -------------------------------------------------------

/// `rounds` rounds of device team barriers in each of `forms` with data written before and read after each.
pub(crate) fn check_team_sync(
    sh: &Shmem,
    lib: &dyn Launch,
    team: &xpushmem::Team,
    forms: &[Form],
    rounds: u32,
) -> xpushmem::Result<()> {
    let me = sh.my_pe();
    let slot = sh.calloc::<i64>(1)?;
    let bad = sh.calloc::<i64>(3)?;
    let tn = team.n_pes() as i64;
    let left = ((team.my_pe() + team.n_pes() - 1) % team.n_pes()) as i64;
    for form in forms {
        sh.barrier_all()?;
        let args = [
            KernelArg::U32(team.device_id() as u32),
            KernelArg::U32(rounds),
            KernelArg::U32(form.mode),
            sym(slot, me),
            sym(bad, me),
        ];
        lib.run(&format!("k_team_sync{}", form.suffix), &args, 1, form.size)?;
        let mut b = [0i64; 3];
        sh.get(&mut b, bad, me)?;
        assert_eq!(
            b,
            [0, (rounds as i64 - 1) * tn + left, 0],
            "team_sync ({}) on {}: mismatches, last value, errors",
            form.name,
            team.describe()
        );
    }
    sh.barrier_all()?;
    sh.free(bad)?;
    sh.free(slot)
}

/// Runs collective `which` of `k_team_coll` (in `form`) on `team`.
#[allow(clippy::too_many_arguments)]
fn team_coll(
    sh: &Shmem,
    lib: &dyn Launch,
    form: &Form,
    team: &xpushmem::Team,
    which: u32,
    dst: xpushmem::SymSlice<u8>,
    src: xpushmem::SymSlice<u8>,
    n: usize,
    root: usize,
) -> xpushmem::Result<()> {
    let me = sh.my_pe();
    let status = sh.calloc::<i32>(1)?;
    lib.run(
        &format!("k_team_coll{}", form.suffix),
        &[
            KernelArg::U32(team.device_id() as u32),
            KernelArg::U32(which),
            sym(dst, me),
            sym(src, me),
            KernelArg::U64(n as u64),
            KernelArg::U32(root as u32),
            sym(status, me),
        ],
        1,
        form.size,
    )?;
    let mut st = [0i32];
    sh.get(&mut st, status, me)?;
    assert_eq!(
        st[0],
        0,
        "collective {which} ({}) on {}: status",
        form.name,
        team.describe()
    );
    sh.free(status)
}

/// Broadcast, int64 sum reduction, fcollect and alltoall on `team` in `form` (collective over every world PE: the
/// allocations are; members of other teams run the same collectives on theirs), each against a host reference.
pub(crate) fn check_team_collectives(
    sh: &Shmem,
    lib: &dyn Launch,
    team: &xpushmem::Team,
    form: &Form,
) -> xpushmem::Result<()> {
    const N: usize = 40; // bytes per block (5 int64)
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let world = sh.team_world();
    let (tn, tme) = (team.n_pes(), team.my_pe());
    let member = |i: usize| sh.team_translate_pe(team, i, &world).unwrap().unwrap();
    let what = format!("{} ({})", team.describe(), form.name);
    let src = sh.calloc::<u8>(n * N)?;
    let dst = sh.calloc::<u8>(n * N)?;
    let block = |pe: usize, salt: u64| xpushmem_tests::ref_vec::<u8>(pe, n * N, salt);
    let read = |len: usize| -> xpushmem::Result<Vec<u8>> {
        let mut v = vec![0u8; len];
        sh.get(&mut v, dst.slice(0..len)?, me)?;
        Ok(v)
    };
    // broadcast from the last member
    let root = tn - 1;
    sh.put(src, &block(me, 31), me)?;
    sh.barrier_all()?;
    team_coll(sh, lib, form, team, 0, dst, src, N, root)?;
    assert_eq!(
        read(N)?,
        block(member(root), 31)[..N],
        "broadcast on {what}"
    );
    // int64 sum
    sh.barrier_all()?;
    team_coll(sh, lib, form, team, 1, dst, src, N / 8, 0)?;
    let want: Vec<u8> = (0..N / 8)
        .flat_map(|i| {
            (0..tn)
                .map(|m| {
                    let b = block(member(m), 31);
                    i64::from_le_bytes(b[8 * i..8 * i + 8].try_into().unwrap())
                })
                .fold(0i64, i64::wrapping_add)
                .to_le_bytes()
        })
        .collect();
    assert_eq!(read(N)?, want, "int64 sum reduction on {what}");
    // fcollect
    sh.barrier_all()?;
    team_coll(sh, lib, form, team, 2, dst, src, N, 0)?;
    let want: Vec<u8> = (0..tn)
        .flat_map(|m| block(member(m), 31)[..N].to_vec())
        .collect();
    assert_eq!(read(tn * N)?, want, "fcollect on {what}");
    // alltoall: block j of member m's source goes to block m of member j
    sh.barrier_all()?;
    team_coll(sh, lib, form, team, 3, dst, src, N, 0)?;
    let want: Vec<u8> = (0..tn)
        .flat_map(|m| block(member(m), 31)[tme * N..(tme + 1) * N].to_vec())
        .collect();
    assert_eq!(read(tn * N)?, want, "alltoall on {what}");
    sh.barrier_all()?;
    sh.free(dst)?;
    sh.free(src)
}

/// Rounds `x` (exact in f64) to the nearest value of a binary format with `mant` fraction bits and exponents
/// `min_exp..=max_exp` (ties to even; beyond the largest finite value: infinity), by scaling in f64.
fn round_to_format(x: f64, mant: i32, min_exp: i32, max_exp: i32) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let e = (((x.to_bits() >> 52) & 0x7ff) as i32 - 1023).max(min_exp);
    let quantum = 2f64.powi(e - mant);
    let r = (x / quantum).round_ties_even() * quantum;
    if r.abs() >= 2f64.powi(max_exp + 1) {
        f64::INFINITY.copysign(x)
    } else {
        r
    }
}

/// Value of half bits (positive, finite).
fn half_value(b: u16) -> f64 {
    let (e, m) = (i32::from(b >> 10 & 0x1f), f64::from(b & 0x3ff));
    if e == 0 {
        m * 2f64.powi(-24)
    } else {
        (1.0 + m / 1024.0) * 2f64.powi(e - 15)
    }
}

/// Half bits of a positive value exactly representable in half (or infinity).
fn half_bits(v: f64) -> u16 {
    if v.is_infinite() {
        return 0x7c00;
    }
    if v < 2f64.powi(-14) {
        return (v / 2f64.powi(-24)) as u16;
    }
    let e = ((v.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let frac = (v / 2f64.powi(e) - 1.0) * 1024.0;
    assert_eq!(frac.fract(), 0.0, "{v} is exact in half");
    (((e + 15) as u16) << 10) | frac as u16
}

/// Half and bfloat16 sum/prod reductions on the world team against a host fold in member order that computes each
/// step in f32 and rounds it to the type (nearest, ties to even), as docs/DEVICE.md states; inputs with random
/// mantissas so that most steps round.
pub(crate) fn check_half_rounding(
    sh: &Shmem,
    lib: &dyn Launch,
    form: &Form,
) -> xpushmem::Result<()> {
    const NR: usize = 96;
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let world = sh.team_world();
    let src = sh.calloc::<u16>(NR)?;
    let dst = sh.calloc::<u16>(NR)?;
    // Element i of PE pe: 2^k * (1 + m/2^mant) for k in -2..=2, as (bits, value).
    let input = |pe: usize, i: usize, bf: bool| -> (u16, f64) {
        let r = xpushmem_tests::reference(pe, i, 41);
        let k = (r % 5) as i32 - 2;
        if bf {
            let bits = (((127 + k) as u16) << 7) | ((r >> 8) & 0x7f) as u16;
            (bits, f64::from(f32::from_bits(u32::from(bits) << 16)))
        } else {
            let bits = (((15 + k) as u16) << 10) | ((r >> 8) & 0x3ff) as u16;
            (bits, half_value(bits))
        }
    };
    let mut rounded_steps = 0usize;
    for (which, bf, prod) in [
        (4u32, false, false),
        (5, false, true),
        (6, true, false),
        (7, true, true),
    ] {
        let mine: Vec<u16> = (0..NR).map(|i| input(me, i, bf).0).collect();
        sh.put(src, &mine, me)?;
        sh.barrier_all()?;
        team_coll(
            sh,
            lib,
            form,
            &world,
            which,
            dst.as_bytes(),
            src.as_bytes(),
            NR,
            0,
        )?;
        let mut got = vec![0u16; NR];
        sh.get(&mut got, dst, me)?;
        for (i, &have) in got.iter().enumerate() {
            let (mut acc, mut exact) = (input(0, i, bf).1, input(0, i, bf).1);
            for pe in 1..n {
                let v = input(pe, i, bf).1;
                let step = if prod {
                    (acc as f32) * (v as f32)
                } else {
                    (acc as f32) + (v as f32)
                };
                acc = if bf {
                    round_to_format(f64::from(step), 7, -126, 127)
                } else {
                    round_to_format(f64::from(step), 10, -14, 15)
                };
                exact = if prod { exact * v } else { exact + v };
            }
            rounded_steps += usize::from(acc != exact);
            let want = if bf {
                let b = (acc as f32).to_bits();
                assert_eq!(b & 0xffff, 0, "{acc} is exact in bfloat16");
                (b >> 16) as u16
            } else {
                half_bits(acc)
            };
            assert_eq!(
                have,
                want,
                "{} {} ({}) element {i} over {n} PEs",
                if bf { "bfloat16" } else { "half" },
                if prod { "prod" } else { "sum" },
                form.name
            );
        }
    }
    assert!(
        n == 1 || rounded_steps > 0,
        "the inputs must make some results differ from the exact fold"
    );
    sh.barrier_all()?;
    sh.free(dst)?;
    sh.free(src)
}

// ---- 16-bit words (device_rma.cl's k_short) -------------------------------------------------------------------

/// 16-bit atomics (a 32-bit CAS on the containing word) with both halves of a word contended by every PE, a
/// 16-bit compare-swap election while the other half changes, and short/ushort wait_until/test.
pub(crate) fn short_words(sh: &Shmem, lib: &dyn Launch, iters: u32) -> xpushmem::Result<()> {
    const ITEMS: u32 = 16;
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let counts = sh.calloc::<u16>(n.next_multiple_of(2))?;
    let elect = sh.calloc::<i16>(2)?;
    let flags = sh.calloc::<i16>(n.next_multiple_of(2))?;
    let out = sh.calloc::<i64>(8)?;
    let indices = sh.calloc::<u64>(n)?;
    sh.barrier_all()?;
    let args = [
        sym(counts, me),
        sym(elect, me),
        sym(flags, me),
        KernelArg::U32(iters),
        sym(out, me),
        sym(indices, me),
    ];
    lib.run("k_short", &args, 1, ITEMS)?;
    sh.barrier_all()?;
    let mut o = [0i64; 5];
    sh.get(&mut o, out, me)?;
    let left = (me + n - 1) % n;
    let flag = -(left as i64 + 1);
    assert_eq!(
        o[1..],
        [0, 1, 1, flag],
        "wait_until, test EQ, ushort test GT, fetch"
    );
    let mut c = vec![0u16; n];
    sh.get(&mut c, counts.slice(0..n)?, 0)?;
    assert_eq!(
        c,
        vec![(iters * ITEMS) as u16; n],
        "16-bit counters on PE 0"
    );
    let mut e = [0i16; 2];
    sh.get(&mut e, elect, 0)?;
    assert_eq!(
        e[1],
        (ITEMS as usize * n) as i16,
        "adds on the election word's other half"
    );
    assert!((1..=n as i16).contains(&e[0]), "an elected PE: {}", e[0]);
    let won = e[0] == me as i16 + 1;
    assert_eq!(
        o[0],
        if won { 0 } else { i64::from(e[0]) },
        "compare_swap's old value (winner {})",
        e[0] - 1
    );
    sh.barrier_all()?;
    Ok(())
}
