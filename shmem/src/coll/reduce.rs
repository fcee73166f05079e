//! Reductions over teams: `reduce` (all-reduce: every member gets the result), the typed `and/or/xor/min/max/
//! sum/prod_reduce` forms, and `reduce_scatter`.
//!
//! Integer sums and products wrap; float results are the same on every member (each combination is computed in
//! one canonical order), though the order — and so the rounding — depends on the algorithm (the hierarchical one:
//! each node's members in team order, then the nodes' partials in node order; see its function). Integer results
//! are the same whatever the algorithm (every operator is associative and commutative on integers).

use super::{
    block, need_len, overlap, small_buf, type_code, BarrierAlgo, CallId, Ctx, Fit, ReduceAlgo,
    ReduceScatterAlgo, COMMON, INFO, SMALL_ELEMS, TINY_ELEMS,
};
use crate::core::Shmem;
use crate::error::{Error, Result};
use crate::team::{layout, Team};
use crate::types::{SymSlice, Symmetric};

/// Reduction operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Bitwise and (integers only).
    And,
    /// Bitwise or (integers only).
    Or,
    /// Bitwise exclusive or (integers only).
    Xor,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
    /// Sum (wrapping for integers).
    Sum,
    /// Product (wrapping for integers).
    Prod,
}

impl ReduceOp {
    /// Every operator.
    pub const ALL: [ReduceOp; 7] = [
        ReduceOp::And,
        ReduceOp::Or,
        ReduceOp::Xor,
        ReduceOp::Min,
        ReduceOp::Max,
        ReduceOp::Sum,
        ReduceOp::Prod,
    ];

    /// The operator's OpenSHMEM name (`and`, `or`, `xor`, `min`, `max`, `sum`, `prod`).
    pub const fn name(self) -> &'static str {
        match self {
            ReduceOp::And => "and",
            ReduceOp::Or => "or",
            ReduceOp::Xor => "xor",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
        }
    }

    /// Whether the operator is bitwise (and so defined for integers only).
    pub fn is_bitwise(self) -> bool {
        matches!(self, ReduceOp::And | ReduceOp::Or | ReduceOp::Xor)
    }

    /// The operator's identity word in collective argument checks (its name; see `team::name_word`).
    pub(crate) const fn code(self) -> u64 {
        // One word per operator, by declaration order (that of `ALL`), computed at compile time: a call's identity
        // words are built on every call.
        const CODES: [u64; ReduceOp::ALL.len()] = {
            let mut c = [0; ReduceOp::ALL.len()];
            let mut i = 0;
            while i < c.len() {
                c[i] = crate::team::name_word(ReduceOp::ALL[i].name());
                i += 1;
            }
            c
        };
        CODES[self as usize]
    }
}

mod sealed {
    pub trait Sealed {}
}

/// Element types the reductions work on: every [`Symmetric`] type. Sealed.
pub trait Reducible: Symmetric + sealed::Sealed {
    /// Whether the type is an integer (the bitwise operators apply).
    const INTEGER: bool;
    /// The identity element of `op` (what an exclusive scan gives member 0). Bitwise operators on floats give 0.
    fn identity(op: ReduceOp) -> Self;
    /// `a op b`. Bitwise operators on floats return `a` (they are rejected before any data moves).
    fn combine(op: ReduceOp, a: Self, b: Self) -> Self;
}

/// Integer types: the bitwise reductions (`and`, `or`, `xor`) apply.
pub trait BitwiseReducible: Reducible {}

macro_rules! int_reducible {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Reducible for $t {
            const INTEGER: bool = true;
            fn identity(op: ReduceOp) -> Self {
                match op {
                    ReduceOp::And => !0,
                    ReduceOp::Or | ReduceOp::Xor | ReduceOp::Sum => 0,
                    ReduceOp::Prod => 1,
                    ReduceOp::Min => <$t>::MAX,
                    ReduceOp::Max => <$t>::MIN,
                }
            }
            #[inline]
            fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::And => a & b,
                    ReduceOp::Or => a | b,
                    ReduceOp::Xor => a ^ b,
                    ReduceOp::Min => a.min(b),
                    ReduceOp::Max => a.max(b),
                    ReduceOp::Sum => a.wrapping_add(b),
                    ReduceOp::Prod => a.wrapping_mul(b),
                }
            }
        }
        impl BitwiseReducible for $t {}
    )*};
}
int_reducible!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);

macro_rules! float_reducible {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Reducible for $t {
            const INTEGER: bool = false;
            fn identity(op: ReduceOp) -> Self {
                match op {
                    ReduceOp::Prod => 1.0,
                    ReduceOp::Min => <$t>::INFINITY,
                    ReduceOp::Max => <$t>::NEG_INFINITY,
                    _ => 0.0,
                }
            }
            #[inline]
            fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::Min => a.min(b),
                    ReduceOp::Max => a.max(b),
                    ReduceOp::Sum => a + b,
                    ReduceOp::Prod => a * b,
                    _ => a,
                }
            }
        }
    )*};
}
float_reducible!(f32, f64);

/// `acc[i] = other[i] op acc[i]` when `other_first`, else `acc[i] op other[i]`.
///
/// One loop per operator: with the operator fixed, each is a plain element-wise loop that the compiler vectorizes
/// (dispatched per element, the loop of a 32 KiB int64 sum took about 8 instructions an element).
pub(crate) fn combine_into<T: Reducible>(
    op: ReduceOp,
    acc: &mut [T],
    other: &[T],
    other_first: bool,
) {
    macro_rules! per_op {
        ($($o:ident),*) => {
            match op {
                $(ReduceOp::$o => {
                    if other_first {
                        for (a, b) in acc.iter_mut().zip(other) {
                            *a = T::combine(ReduceOp::$o, *b, *a);
                        }
                    } else {
                        for (a, b) in acc.iter_mut().zip(other) {
                            *a = T::combine(ReduceOp::$o, *a, *b);
                        }
                    }
                })*
            }
        };
    }
    per_op!(And, Or, Xor, Min, Max, Sum, Prod);
}

pub(crate) fn check_op<T: Reducible>(op: ReduceOp) -> Result<()> {
    if op.is_bitwise() && !T::INTEGER {
        return Err(Error::invalid(
            "op",
            op.name(),
            format!(
                "bitwise reductions apply to integer types only, not {}",
                T::NAME
            ),
        ));
    }
    Ok(())
}

/// `dest` and `src` must be equal or disjoint.
pub(crate) fn same_or_disjoint<T: Symmetric>(dest: SymSlice<T>, src: SymSlice<T>) -> Result<()> {
    if overlap(dest, src) && dest != src {
        return Err(Error::invalid(
            "dest",
            format!("{dest:?}"),
            format!("overlaps the source {src:?} without being equal to it (in place means dest == source)"),
        ));
    }
    Ok(())
}

/// The most data `Auto`'s eager reductions read from the other members, (n - 1) x bytes: above it the linear
/// algorithm (one read of each member's source by every member, no copy through the exchange) was faster with a
/// core per PE (docs/PERFORMANCE.md, round seven: 512 B at 4 PEs 2.5 -> 2.0 µs, at 8 PEs 4.4 -> 3.5, at 16 PEs
/// 8.8 -> 5.4; 64 B at 16 PEs, 960 bytes read, stays eager: 4.0 against 5.1).
const EAGER_REDUCE_READ: usize = 1024;

/// The linear algorithm's range on teams of more than 4 PEs, n x bytes: above it the one-step reduce-scatter +
/// allgather (512 B at 8 PEs: linear 3.5 µs, rs-ag 4.6; 4 KiB at 8 PEs: linear 8.5, rs-ag 5.6).
const LINEAR_REDUCE_TEAM_BYTES: usize = 8 << 10;

/// The algorithm for a team of `n` reducing `bytes` (`fits`: they fit in a message of the exchange).
///
/// * Small data: the eager forms (the data rides in the exchange that carries the call's agreement) while every
///   member reads at most [`EAGER_REDUCE_READ`] from the others; the rounds from `XPUSHMEM_EAGER_ROUNDS_FROM`.
/// * Two PEs: linear below the ring cutover (`XPUSHMEM_REDUCE_RING_SIZE`, auto 256 KiB), the ring above (the
///   linear algorithm reads both inputs whole on both PEs, twice the ring's reads).
/// * Three PEs or more: linear up to 4 KiB on up to 4 PEs and while n x bytes is at most
///   [`LINEAR_REDUCE_TEAM_BYTES`], else the one-step reduce-scatter + allgather
///   ([`ReduceAlgo::ReduceScatterAllgather`]): two synchronisations whatever the team size, against recursive
///   doubling's log2(n) rounds of the whole data (each a signal and an acknowledgement) and the ring's 2 (n - 1)
///   steps; measured with a core per PE at 4-16 PEs (docs/PERFORMANCE.md, round six). With
///   `XPUSHMEM_REDUCE_RING_SIZE` set, the ring from that size, as before.
///
/// On a team whose node layout pays for it (`hier`): the node-aware algorithm, whose inter-node traffic is one
/// partial per pair of node leaders, below the ring cutover (auto: 256 KiB up to 4 PEs, 64 KiB above), the ring
/// above.
fn resolve(
    a: ReduceAlgo,
    cfg: &crate::config::Config,
    n: usize,
    bytes: usize,
    fit: Fit,
    hier: bool,
) -> Result<ReduceAlgo> {
    use ReduceAlgo::{Auto, Eager, EagerRounds};
    let ring_from = cfg
        .reduce_ring_size
        .unwrap_or(if n <= 2 { 256 << 10 } else { usize::MAX });
    // The node-aware algorithm's range: the ring above (its traffic per PE does not grow with the team).
    let hier_until = cfg
        .reduce_ring_size
        .unwrap_or(if n <= 4 { 256 << 10 } else { 64 << 10 });
    // Auto's eager forms: every member reads every other member's whole data, (n - 1) x bytes.
    let small = n.saturating_sub(1).saturating_mul(bytes) <= EAGER_REDUCE_READ;
    Ok(match a.with_cfg(cfg)? {
        Auto if fit.auto_rounds && small => EagerRounds,
        EagerRounds if fit.rounds => EagerRounds,
        Eager | EagerRounds if fit.eager => Eager,
        Auto if fit.eager && small => Eager,
        Auto | Eager | EagerRounds if hier && bytes < hier_until => ReduceAlgo::Hierarchical,
        Auto | Eager | EagerRounds if hier => ReduceAlgo::Ring,
        Auto | Eager | EagerRounds
            if (n <= 2 && bytes < ring_from)
                || bytes <= 4096 && n <= 4
                || n.saturating_mul(bytes) <= LINEAR_REDUCE_TEAM_BYTES =>
        {
            ReduceAlgo::Linear
        }
        Auto | Eager | EagerRounds if n > 2 && bytes < ring_from => {
            ReduceAlgo::ReduceScatterAllgather
        }
        Auto | Eager | EagerRounds => ReduceAlgo::Ring,
        x => x,
    })
}

macro_rules! typed_reduce {
    ($($f:ident, $op:ident, $bound:ident, $doc:literal;)*) => {$(
        #[doc = $doc]
        pub fn $f<T: $bound>(&self, team: &Team, dest: SymSlice<T>, src: SymSlice<T>, nreduce: usize) -> Result<()> {
            self.reduce(team, ReduceOp::$op, dest, src, nreduce)
        }
    )*};
}

impl Shmem {
    /// Reduce element-wise over every member of `team`: `dest[i] = src_0[i] op src_1[i] op ...` on every member,
    /// for `i < nreduce` (OpenSHMEM `<op>_reduce`). Collective; `dest` may equal `src` (in place).
    ///
    /// ```
    /// # let sh = xpushmem::init_single().unwrap();
    /// use xpushmem::coll::ReduceOp;
    /// let world = sh.team_world();
    /// let x = sh.malloc::<i64>(2).unwrap();
    /// sh.put(x, &[3, -4], sh.my_pe()).unwrap();
    /// sh.reduce(&world, ReduceOp::Sum, x, x, 2).unwrap();
    /// assert_eq!(sh.g(x.at(1).unwrap(), sh.my_pe()).unwrap(), -4 * sh.n_pes() as i64);
    /// ```
    pub fn reduce<T: Reducible>(
        &self,
        team: &Team,
        op: ReduceOp,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        nreduce: usize,
    ) -> Result<()> {
        self.reduce_with(team, op, dest, src, nreduce, ReduceAlgo::Auto)
    }

    typed_reduce!(
        and_reduce, And, BitwiseReducible, "Bitwise-and reduction (OpenSHMEM `and_reduce`); see [`Shmem::reduce`].";
        or_reduce, Or, BitwiseReducible, "Bitwise-or reduction (OpenSHMEM `or_reduce`); see [`Shmem::reduce`].";
        xor_reduce, Xor, BitwiseReducible, "Bitwise-xor reduction (OpenSHMEM `xor_reduce`); see [`Shmem::reduce`].";
        min_reduce, Min, Reducible, "Minimum reduction (OpenSHMEM `min_reduce`); see [`Shmem::reduce`].";
        max_reduce, Max, Reducible, "Maximum reduction (OpenSHMEM `max_reduce`); see [`Shmem::reduce`].";
        sum_reduce, Sum, Reducible, "Sum reduction (OpenSHMEM `sum_reduce`); see [`Shmem::reduce`].";
        prod_reduce, Prod, Reducible, "Product reduction (OpenSHMEM `prod_reduce`); see [`Shmem::reduce`].";
    );

    /// [`Shmem::reduce`] with a chosen algorithm.
    pub fn reduce_with<T: Reducible>(
        &self,
        team: &Team,
        op: ReduceOp,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        nreduce: usize,
        algo: ReduceAlgo,
    ) -> Result<()> {
        const OP: &str = "reduce";
        let mut ctx = team.ctx(self, OP)?;
        let n = ctx.n();
        let bytes = nreduce.saturating_mul(std::mem::size_of::<T>());
        let algo = ctx.choose(CallId::Reduce, algo, bytes, |ctx| {
            resolve(
                algo,
                &self.cfg,
                n,
                bytes,
                ctx.fit(bytes, n),
                ctx.layout_pays(),
            )
        });
        let local = (|| {
            check_op::<T>(op)?;
            need_len(dest, nreduce, "dest", OP)?;
            need_len(src, nreduce, "source", OP)?;
            same_or_disjoint(dest.slice(..nreduce)?, src.slice(..nreduce)?)?;
            algo.clone().map(|_| ())
        })();
        let code = algo.as_ref().map_or(0, |a| a.code());
        let common: [u64; COMMON] = [
            CallId::Reduce as u64,
            code,
            type_code::<T>(),
            nreduce as u64,
            op.code(),
            0,
            0,
            0,
        ];
        if let Ok(a @ (ReduceAlgo::Eager | ReduceAlgo::EagerRounds)) = algo {
            // Every source travels to every member inside the agreement; each folds them in member order (the
            // same order everywhere, so floating-point results agree across members).
            let me = ctx.idx();
            let (mut send, mut recv) = ctx.take_messages();
            let rounds = a == ReduceAlgo::EagerRounds;
            ctx.eager_exchange(
                rounds,
                common,
                local,
                Some(src),
                nreduce,
                &mut send,
                &mut recv,
            )?;
            if nreduce == 0 {
                ctx.give_messages(send, recv);
                return Ok(());
            }
            let (dest, src) = (dest.slice(..nreduce)?, src.slice(..nreduce)?);
            // Member i's part into `into` (one buffer reused for every member); this PE's own from the bytes it
            // sent (read once), or its source in a team of one.
            let own = ctx.own_sent(rounds, &send);
            let part = |i: usize, into: &mut [T]| -> Result<()> {
                if i == me && own.len() != src.size_bytes() {
                    return self.get(into, src, self.my_pe());
                }
                let b = if i == me { own } else { recv.get(i) };
                if b.len() != src.size_bytes() {
                    return Err(Error::State(format!(
                        "{OP}: the message of member {i} holds {} bytes, expected {}",
                        b.len(),
                        src.size_bytes()
                    )));
                }
                crate::sys::bytes::bytes_of_mut(into).copy_from_slice(b);
                Ok(())
            };
            let fold = |acc: &mut [T], other: &mut [T]| -> Result<()> {
                part(0, acc)?;
                for i in 1..n {
                    part(i, other)?;
                    combine_into(op, acc, other, false);
                }
                ctx.write_local(dest, crate::sys::bytes::bytes_of(acc))
            };
            // The working buffers on the stack, the smaller pair for the fewest elements (zeroing two buffers of
            // SMALL_ELEMS was 2% of an 8-B reduction's instructions).
            let r = if nreduce <= TINY_ELEMS {
                let (mut s0, mut s1) = ([T::default(); TINY_ELEMS], [T::default(); TINY_ELEMS]);
                fold(&mut s0[..nreduce], &mut s1[..nreduce])
            } else {
                let (mut s0, mut s1) = ([T::default(); SMALL_ELEMS], [T::default(); SMALL_ELEMS]);
                let (mut h0, mut h1) = (Vec::new(), Vec::new());
                fold(
                    small_buf(&mut s0, &mut h0, nreduce),
                    small_buf(&mut s1, &mut h1, nreduce),
                )
            };
            ctx.give_messages(send, recv);
            return r;
        }
        ctx.enter(common, [0; INFO], local, false)?;
        let algo = algo?;
        if nreduce == 0 {
            return Ok(());
        }
        let (dest, src) = (dest.slice(..nreduce)?, src.slice(..nreduce)?);
        if n == 1 {
            return ctx.copy(dest, 0, src, 0);
        }
        match algo {
            ReduceAlgo::RecursiveDoubling => recursive_doubling(&mut ctx, op, dest, src),
            ReduceAlgo::Ring => ring(&mut ctx, op, dest, src),
            ReduceAlgo::Hierarchical => hierarchical(&mut ctx, op, dest, src),
            ReduceAlgo::ReduceScatterAllgather => rs_ag(&mut ctx, op, dest, src),
            _ => linear(&mut ctx, op, dest, src),
        }
    }

    /// Reduce-scatter: member `i` of `team` gets `dest[k] = src_0[i * nelems + k] op src_1[i * nelems + k] op ...`
    /// for `k < nelems` (NVSHMEM `reducescatter`). `src` holds `n_pes * nelems` elements on every member.
    pub fn reduce_scatter<T: Reducible>(
        &self,
        team: &Team,
        op: ReduceOp,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        nelems: usize,
    ) -> Result<()> {
        self.reduce_scatter_with(team, op, dest, src, nelems, ReduceScatterAlgo::Auto)
    }

    /// [`Shmem::reduce_scatter`] with a chosen algorithm.
    pub fn reduce_scatter_with<T: Reducible>(
        &self,
        team: &Team,
        op: ReduceOp,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        nelems: usize,
        algo: ReduceScatterAlgo,
    ) -> Result<()> {
        const OP: &str = "reduce_scatter";
        let mut ctx = team.ctx(self, OP)?;
        let (n, me) = (ctx.n(), ctx.idx());
        let algo = algo.with_cfg(&self.cfg).map(|a| match a {
            ReduceScatterAlgo::Auto => ReduceScatterAlgo::Linear,
            x => x,
        });
        let total = super::mul(n, nelems, "nelems");
        let local = (|| {
            check_op::<T>(op)?;
            need_len(dest, nelems, "dest", OP)?;
            need_len(src, total.clone()?, "source", OP)?;
            algo.clone().map(|_| ())
        })();
        let code = algo.as_ref().map_or(0, |a| a.code());
        let common: [u64; COMMON] = [
            CallId::ReduceScatter as u64,
            code,
            type_code::<T>(),
            nelems as u64,
            op.code(),
            0,
            0,
            0,
        ];
        ctx.enter(common, [0; INFO], local, false)?;
        if nelems == 0 {
            return Ok(());
        }
        let mine = src.slice(me * nelems..(me + 1) * nelems)?;
        let mut acc = ctx.fetch(mine, 0)?;
        for i in 1..n {
            combine_into(op, &mut acc, &ctx.fetch(mine, i)?, false);
        }
        // Nobody may overwrite a source (dest may overlap it) before everyone has read it.
        ctx.barrier(BarrierAlgo::Auto)?;
        self.put(dest.slice(..nelems)?, &acc, self.my_pe())
    }
}

/// Every member reads every source and folds in member order; a barrier before writing keeps in-place safe.
fn linear<T: Reducible>(
    ctx: &mut Ctx<'_>,
    op: ReduceOp,
    dest: SymSlice<T>,
    src: SymSlice<T>,
) -> Result<()> {
    let n = ctx.n();
    let mut acc = ctx.fetch(src, 0)?;
    for i in 1..n {
        combine_into(op, &mut acc, &ctx.fetch(src, i)?, false);
    }
    ctx.barrier(BarrierAlgo::Auto)?;
    ctx.sh.put(dest, &acc, ctx.sh.my_pe())
}

/// The node-aware reduction. Each node's leader reads its node's sources over shared memory and folds them in
/// member order into its `dest` (the node's partial), then signals every other leader; each leader reads every
/// other leader's partial and folds the partials in node order (the order of `Shmem::team_node_groups`: the same
/// on every leader, so floating-point results agree), acknowledges the reads, and once its own partial was read
/// by every other leader writes the result into its `dest` and its node's members' `dest`, signalling each.
///
/// Float results: `(((s_a0 op s_a1) op ...) op ((s_b0 op s_b1) op ...)) op ...` for nodes a, b, ... in node
/// order and members in team order: deterministic, though not the flat algorithms' order.
fn hierarchical<T: Reducible>(
    ctx: &mut Ctx<'_>,
    op: ReduceOp,
    dest: SymSlice<T>,
    src: SymSlice<T>,
) -> Result<()> {
    let me = ctx.idx();
    let my_pe = ctx.sh.my_pe();
    let groups = ctx.groups();
    let g = groups.group_of[me];
    let leader = groups.leader(g);
    ctx.count_node_aware(|c| &c.reductions);
    if leader != me {
        let l = ctx.pe(leader);
        return ctx.wait(layout::SIG_DATA, 1, &|| {
            format!("reduce (hierarchical): waiting for the result from PE {l}, this node's leader")
        });
    }
    // The node's partial (every source read before any `dest` of the node is written: dest may be the source).
    let mine = &groups.members[g];
    let mut acc = ctx.fetch(src, mine[0])?;
    for &m in &mine[1..] {
        combine_into(op, &mut acc, &ctx.fetch(src, m)?, false);
    }
    let count = groups.count();
    let others = || (1..count).map(|k| groups.leader((g + k) % count));
    if count > 1 {
        ctx.sh.put(dest, &acc, my_pe)?;
        for o in others() {
            ctx.signal(layout::SIG_DATA, o)?;
        }
        ctx.wait(layout::SIG_DATA, count as u64 - 1, &|| {
            "reduce (hierarchical): waiting for the other nodes' partials".to_string()
        })?;
        let mut total: Option<Vec<T>> = None;
        for k in 0..count {
            let part = if k == g {
                std::mem::take(&mut acc)
            } else {
                ctx.fetch(dest, groups.leader(k))?
            };
            match &mut total {
                None => total = Some(part),
                Some(t) => combine_into(op, t, &part, false),
            }
        }
        acc = total.unwrap_or_default();
        for o in others() {
            ctx.signal(layout::SIG_DONE, o)?;
        }
        // Nobody reads this leader's partial any more once every other leader acknowledged.
        ctx.wait(layout::SIG_DONE, count as u64 - 1, &|| {
            "reduce (hierarchical): waiting for the other leaders to read this node's partial"
                .to_string()
        })?;
    }
    ctx.sh.put(dest, &acc, my_pe)?;
    for &m in &mine[1..] {
        ctx.copy(dest, m, dest, me)?;
        ctx.signal(layout::SIG_DATA, m)?;
    }
    Ok(())
}

/// Pairwise exchange in log2 rounds, pulling the partner's partial from its `dest` (which holds it between the
/// "ready" signal and the "read" acknowledgement). Members beyond the largest power of two first hand their data
/// to a neighbour and get the result pushed back at the end.
fn recursive_doubling<T: Reducible>(
    ctx: &mut Ctx<'_>,
    op: ReduceOp,
    dest: SymSlice<T>,
    src: SymSlice<T>,
) -> Result<()> {
    let (n, me) = (ctx.n(), ctx.idx());
    let my_pe = ctx.sh.my_pe();
    let p2 = 1usize << (usize::BITS - 1 - n.leading_zeros());
    let rem = n - p2;
    ctx.copy(dest, me, src, me)?;
    let mut acc = ctx.fetch(src, me)?;
    let nr = if me < 2 * rem {
        if me % 2 == 0 {
            ctx.signal(layout::SIG_PRE, me + 1)?;
            let to = ctx.pe(me + 1);
            return ctx.wait(layout::SIG_FIN, 1, &|| {
                format!("reduce (recursive doubling): waiting for the result from PE {to}")
            });
        }
        let from = ctx.pe(me - 1);
        ctx.wait(layout::SIG_PRE, 1, &|| {
            format!("reduce (recursive doubling): waiting for the data of PE {from}")
        })?;
        combine_into(op, &mut acc, &ctx.fetch(dest, me - 1)?, true);
        ctx.sh.put(dest, &acc, my_pe)?;
        me / 2
    } else {
        me - rem
    };
    let mut r = 0usize;
    while (1usize << r) < p2 {
        let pn = nr ^ (1 << r);
        let partner = if pn < rem { 2 * pn + 1 } else { pn + rem };
        let ppe = ctx.pe(partner);
        ctx.signal(layout::RD_READY + r, partner)?;
        ctx.wait(layout::RD_READY + r, 1, &|| {
            format!("reduce (recursive doubling) round {r}: waiting for PE {ppe}'s partial")
        })?;
        combine_into(op, &mut acc, &ctx.fetch(dest, partner)?, pn < nr);
        ctx.signal(layout::RD_ACK + r, partner)?;
        ctx.wait(layout::RD_ACK + r, 1, &|| {
            format!("reduce (recursive doubling) round {r}: waiting for PE {ppe} to read")
        })?;
        ctx.sh.put(dest, &acc, my_pe)?;
        r += 1;
    }
    if me < 2 * rem {
        ctx.sh.put(dest, &acc, ctx.pe(me - 1))?;
        ctx.signal(layout::SIG_FIN, me - 1)?;
    }
    Ok(())
}

/// Bytes of the pieces [`fold_from`] folds: two buffers of this size stay in the L1/L2 cache between the reads and
/// the write back.
const FOLD_CHUNK_BYTES: usize = 32 << 10;

/// `dst = s0@pe0 op s1@pe1 op ...` on this PE (`sources`: each slice read on its PE, folded in that order), in
/// cache-sized pieces through two reused buffers (`bufs`): no buffer the size of the block (whose fresh pages were
/// faulted in on every step), and the data is still in the cache when it is combined and written back. `dst` may
/// be a source on this PE: each piece is read from every source before it is written.
fn fold_from<T: Reducible>(
    ctx: &Ctx<'_>,
    op: ReduceOp,
    dst: SymSlice<T>,
    sources: &[(SymSlice<T>, usize)],
    bufs: &mut (Vec<T>, Vec<T>),
) -> Result<()> {
    let chunk = (FOLD_CHUNK_BYTES / std::mem::size_of::<T>().max(1)).max(1);
    let len = sources.iter().fold(dst.len(), |l, (s, _)| l.min(s.len()));
    let (acc, other) = bufs;
    acc.resize(chunk.min(len), T::default());
    other.resize(chunk.min(len), T::default());
    let mut at = 0;
    while at < len {
        let k = chunk.min(len - at);
        for (i, &(from, pe)) in sources.iter().enumerate() {
            let into = if i == 0 {
                &mut acc[..k]
            } else {
                &mut other[..k]
            };
            ctx.sh.get(into, from.slice(at..at + k)?, pe)?;
            if i > 0 {
                combine_into(op, &mut acc[..k], &other[..k], false);
            }
        }
        ctx.sh
            .put(dst.slice(at..at + k)?, &acc[..k], ctx.sh.my_pe())?;
        at += k;
    }
    Ok(())
}

/// Reduce-scatter around the ring (each member ends with one block complete), then allgather around the ring,
/// pulling from the left neighbour's `dest`.
fn ring<T: Reducible>(
    ctx: &mut Ctx<'_>,
    op: ReduceOp,
    dest: SymSlice<T>,
    src: SymSlice<T>,
) -> Result<()> {
    let (n, me) = (ctx.n(), ctx.idx());
    let my_pe = ctx.sh.my_pe();
    let len = dest.len();
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);
    let lpe = ctx.pe(left);
    let rpe = ctx.pe(right);
    // No copy of `src` into `dest` first: this member's share of every block comes from its `src`, and the left
    // neighbour's first block too (the one it never folds: its `dest` would hold a copy of its `src`). A copy the
    // size of the data, streamed past the caches from the non-temporal threshold, was read back at once (2 PEs,
    // 8 MiB on the 2-core machine: 2.5 ms against MPI's 1.7, docs/PERFORMANCE.md round fifteen).
    ctx.signal(layout::SIG_RING, right)?;
    let mut bufs = (Vec::new(), Vec::new());
    for s in 0..n - 1 {
        ctx.wait(layout::SIG_RING, 1, &|| {
            format!("reduce (ring) step {s}: waiting for PE {lpe}")
        })?;
        let blk = block(len, n, (me + 2 * n - s - 1) % n);
        let (b, mine) = (dest.slice(blk.clone())?, src.slice(blk)?);
        let theirs = if s == 0 { mine } else { b };
        fold_from(ctx, op, b, &[(theirs, lpe), (mine, my_pe)], &mut bufs)?;
        ctx.signal(layout::SIG_RING, right)?;
    }
    // My left neighbour may now overwrite what I read; wait until my right neighbour has read mine.
    ctx.signal(layout::SIG_DONE, left)?;
    ctx.wait(layout::SIG_DONE, 1, &|| {
        format!("reduce (ring): waiting for PE {rpe} to finish its reduce-scatter")
    })?;
    for s in 0..n - 1 {
        ctx.wait(layout::SIG_RING, 1, &|| {
            format!("reduce (ring) allgather step {s}: waiting for PE {lpe}")
        })?;
        let b = dest.slice(block(len, n, (me + n - s) % n))?;
        // The left neighbour's finished block, copied straight from its heap.
        ctx.sh.get_sym(b, b, lpe)?;
        if s + 2 < n {
            ctx.signal(layout::SIG_RING, right)?;
        }
    }
    ctx.signal(layout::SIG_DONE, left)?;
    ctx.wait(layout::SIG_DONE, 1, &|| {
        format!("reduce (ring): waiting for PE {rpe} to finish reading")
    })
}

/// Reduce-scatter then allgather, one step each ([`ReduceAlgo::ReduceScatterAllgather`]). Member `i` folds block
/// `i` of every member's source, read directly in member order (so a float result is the same on every member),
/// into its `dest` in cache-sized pieces, and signals every member; once every member has signalled, it copies
/// each other member's finished block from that member's `dest`, then acknowledges, and returns once every member
/// has read its block.
///
/// In place (`dest == src`) is safe: block `i` of a source is read only by member `i` before it writes its own
/// block `i`, and member `j` overwrites its block `i` only after member `i` signalled that it has read it.
fn rs_ag<T: Reducible>(
    ctx: &mut Ctx<'_>,
    op: ReduceOp,
    dest: SymSlice<T>,
    src: SymSlice<T>,
) -> Result<()> {
    let (n, me, len) = (ctx.n(), ctx.idx(), dest.len());
    let mine = block(len, n, me);
    // Block `mine` of every member's source, in member order.
    let from = src.slice(mine.clone())?;
    let sources: Vec<(SymSlice<T>, usize)> = (0..n).map(|i| (from, ctx.pe(i))).collect();
    fold_from(
        ctx,
        op,
        dest.slice(mine)?,
        &sources,
        &mut (Vec::new(), Vec::new()),
    )?;
    // Every member signals every other one and waits for all of them.
    let all = |ctx: &mut Ctx<'_>, w: usize, what: &str| -> Result<()> {
        for d in 1..n {
            ctx.signal(w, (me + d) % n)?;
        }
        ctx.wait(w, n as u64 - 1, &|| {
            format!("reduce (reduce-scatter + allgather): waiting for {what}")
        })
    };
    all(ctx, layout::SIG_DATA, "the other members' blocks")?;
    for d in 1..n {
        let j = (me + d) % n;
        let b = block(len, n, j);
        if !b.is_empty() {
            let b = dest.slice(b)?;
            ctx.sh.get_sym(b, b, ctx.pe(j))?;
        }
    }
    all(
        ctx,
        layout::SIG_DONE,
        "the other members to read this member's block",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each operator's identity word is its name read as a little-endian word (the compile-time table follows the
    /// declaration order), and no two operators share one.
    #[test]
    fn each_operator_code_is_its_name() {
        let mut seen = Vec::new();
        for op in ReduceOp::ALL {
            let mut b = [0u8; 8];
            b[..op.name().len()].copy_from_slice(op.name().as_bytes());
            assert_eq!(op.code(), u64::from_le_bytes(b), "{op:?}");
            assert!(!seen.contains(&op.code()), "{op:?}");
            seen.push(op.code());
        }
    }
}
