//! Broadcast: the root's `nelems` elements of `src` land in `dest` on every member (the root included).

use super::{need_len, overlap, BroadcastAlgo, CallId, Ctx, Fit, COMMON, INFO};
use crate::core::Shmem;
use crate::error::{Error, Result};
use crate::team::{layout, Carry, Team};
use crate::types::{SymSlice, Symmetric};

/// The algorithm for a team of `n` and `bytes` of data (`fit`: the eager forms they fit; `carries`: whether the
/// team's agreement can carry data, asked only for data it has room for; `hier`: the team's node layout pays for
/// the node-aware algorithm).
fn resolve(
    a: BroadcastAlgo,
    cfg: &crate::config::Config,
    n: usize,
    bytes: usize,
    (fit, carries): (Fit, &dyn Fn() -> bool),
    hier: bool,
) -> Result<BroadcastAlgo> {
    use BroadcastAlgo::{Agreement, Auto, Eager, EagerRounds};
    Ok(match a.with_cfg(cfg)? {
        Auto | Agreement if bytes <= Carry::BYTES && carries() => Agreement,
        Auto | Agreement if fit.auto_rounds => EagerRounds,
        EagerRounds if fit.rounds => EagerRounds,
        Auto | Eager | EagerRounds | Agreement if fit.eager => Eager,
        Auto | Eager | EagerRounds | Agreement if n <= 2 => BroadcastAlgo::Linear,
        Auto | Eager | EagerRounds | Agreement if bytes >= 256 << 10 => BroadcastAlgo::Pipelined,
        Auto | Eager | EagerRounds | Agreement if hier => BroadcastAlgo::Hierarchical,
        Auto | Eager | EagerRounds | Agreement if n <= 4 => BroadcastAlgo::Linear,
        Auto | Eager | EagerRounds | Agreement => BroadcastAlgo::Binomial,
        x => x,
    })
}

impl Shmem {
    /// Copy `nelems` elements of `src` on member `root` of `team` into `dest` on every member, the root included
    /// (OpenSHMEM `broadcast`). Collective over `team`; `src` matters on the root only; `dest` may equal `src`.
    ///
    /// ```
    /// # let sh = xpushmem::init_single().unwrap();
    /// let world = sh.team_world();
    /// let (src, dst) = (sh.malloc::<i32>(3).unwrap(), sh.calloc::<i32>(3).unwrap());
    /// sh.put(src, &[1, 2, 3], sh.my_pe()).unwrap();
    /// sh.broadcast(&world, dst, src, 3, 0).unwrap();
    /// let mut got = [0; 3];
    /// sh.get(&mut got, dst, sh.my_pe()).unwrap();
    /// assert_eq!(got, [1, 2, 3]);
    /// ```
    pub fn broadcast<T: Symmetric>(
        &self,
        team: &Team,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        nelems: usize,
        root: usize,
    ) -> Result<()> {
        self.broadcast_with(team, dest, src, nelems, root, BroadcastAlgo::Auto)
    }

    /// Broadcast of bytes (OpenSHMEM `broadcastmem`).
    pub fn broadcastmem(
        &self,
        team: &Team,
        dest: SymSlice<u8>,
        src: SymSlice<u8>,
        nbytes: usize,
        root: usize,
    ) -> Result<()> {
        self.broadcast_with(team, dest, src, nbytes, root, BroadcastAlgo::Auto)
    }

    /// [`Shmem::broadcast`] with a chosen algorithm.
    pub fn broadcast_with<T: Symmetric>(
        &self,
        team: &Team,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        nelems: usize,
        root: usize,
        algo: BroadcastAlgo,
    ) -> Result<()> {
        const OP: &str = "broadcast";
        let mut ctx = team.ctx(self, OP)?;
        let (n, me) = (ctx.n(), ctx.idx());
        let bytes = nelems.saturating_mul(std::mem::size_of::<T>());
        let chunk = self.cfg.coll_chunk_bytes.clone();
        let algo = ctx.choose(CallId::Broadcast, algo, bytes, |ctx| {
            resolve(
                algo,
                &self.cfg,
                n,
                bytes,
                (ctx.fit(bytes, 1), &|| ctx.agreement_carries()),
                ctx.layout_pays(),
            )
        });
        let local = (|| {
            if root >= n {
                return Err(Error::InvalidPe {
                    pe: root as i64,
                    n_pes: n,
                    context: format!("{OP}: root must be a member of {}", team.describe()),
                });
            }
            need_len(dest, nelems, "dest", OP)?;
            if me == root {
                need_len(src, nelems, "source", OP)?;
                let (d, s) = (dest.slice(..nelems)?, src.slice(..nelems)?);
                if overlap(d, s) && d != s {
                    return Err(Error::invalid(
                        "dest",
                        format!("{d:?}"),
                        format!(
                            "overlaps the source {s:?} (nelems = {nelems}) without being equal to it"
                        ),
                    ));
                }
            }
            chunk.clone()?;
            algo.clone().map(|_| ())
        })();
        let code = algo.as_ref().map_or(0, |a| a.code());
        let chunk = chunk.unwrap_or(super::DEFAULT_CHUNK_BYTES);
        let common: [u64; COMMON] = [
            CallId::Broadcast as u64,
            code,
            super::type_code::<T>(),
            nelems as u64,
            root as u64,
            chunk as u64,
            0,
            0,
        ];
        if let Ok(BroadcastAlgo::Agreement) = algo {
            // The root's data rides in the agreement's messages (one or two cache lines each).
            let mut carry = Carry::new(me == root, bytes);
            let local = local.and_then(|()| {
                if me != root || nelems == 0 {
                    return Ok(());
                }
                self.local_map().read(src.off, &mut carry.bytes[..bytes])
            });
            ctx.enter_carrying(common, local, &mut carry)?;
            if nelems == 0 {
                return Ok(());
            }
            return ctx.write_local(dest.slice(..nelems)?, &carry.bytes[..bytes]);
        }
        if let Ok(a @ (BroadcastAlgo::Eager | BroadcastAlgo::EagerRounds)) = algo {
            // The root's data travels to every member inside the agreement (read once, then copied within the
            // message buffer for every other member when it goes in one round).
            let (mut send, mut recv) = ctx.take_messages();
            let (rounds, mine) = (a == BroadcastAlgo::EagerRounds, (me == root).then_some(src));
            ctx.eager_exchange(rounds, common, local, mine, nelems, &mut send, &mut recv)?;
            let r = if nelems == 0 {
                Ok(())
            } else {
                let (dest, src) = (dest.slice(..nelems)?, src.slice(..nelems)?);
                if me == root {
                    ctx.write_own(rounds, &send, dest, src)
                } else {
                    ctx.write_local(dest, recv.get(root))
                }
            };
            ctx.give_messages(send, recv);
            return r;
        }
        ctx.enter(common, [0; INFO], local, false)?;
        let algo = algo?;
        if nelems == 0 {
            return Ok(());
        }
        let (dest, src) = (dest.slice(..nelems)?, src.slice(..nelems)?);
        match algo {
            BroadcastAlgo::Pipelined => pipelined(&mut ctx, dest, src, root, chunk),
            BroadcastAlgo::Binomial => binomial(&mut ctx, dest, src, root),
            BroadcastAlgo::Hierarchical => hierarchical(&mut ctx, dest, src, root),
            _ => linear(&mut ctx, dest, src, root),
        }
    }
}

/// Every member reads the root's source itself, all at once (the agreement that opened the call is a barrier: the
/// source is ready and every `dest` free), and tells the root it is done; the root copies its own block meanwhile
/// and returns once nobody reads its source any more. At 2 PEs the two copies overlap instead of following each
/// other (16 MiB: 3.0 -> 1.7 ms with a core per PE, docs/PERFORMANCE.md, round thirteen).
fn linear<T: Symmetric>(
    ctx: &mut Ctx<'_>,
    dest: SymSlice<T>,
    src: SymSlice<T>,
    root: usize,
) -> Result<()> {
    let (n, me) = (ctx.n(), ctx.idx());
    if me == root {
        ctx.copy(dest, me, src, me)?;
        ctx.wait(layout::SIG_DATA, n as u64 - 1, &|| {
            format!(
                "broadcast (linear): waiting for {} members to read the data",
                n - 1
            )
        })
    } else {
        ctx.copy(dest, me, src, root)?;
        ctx.signal(layout::SIG_DATA, root)
    }
}

fn binomial<T: Symmetric>(
    ctx: &mut Ctx<'_>,
    dest: SymSlice<T>,
    src: SymSlice<T>,
    root: usize,
) -> Result<()> {
    let (n, me) = (ctx.n(), ctx.idx());
    let v = (me + n - root) % n;
    let abs = |w: usize| (w + root) % n;
    // Children of v are v + m for every power of two m below v's lowest set bit (below n's power of two for the root).
    let low = if v == 0 {
        n.next_power_of_two()
    } else {
        1 << v.trailing_zeros()
    };
    let from = if v == 0 {
        src
    } else {
        let parent = ctx.pe(abs(v - low));
        ctx.wait(layout::SIG_DATA, 1, &|| {
            format!("broadcast (binomial): waiting for the data from PE {parent}")
        })?;
        dest
    };
    let mut m = low >> 1;
    while m > 0 {
        if v + m < n {
            let c = abs(v + m);
            ctx.copy(dest, c, from, me)?;
            ctx.signal(layout::SIG_DATA, c)?;
        }
        m >>= 1;
    }
    if v == 0 {
        ctx.copy(dest, me, src, me)?;
    }
    Ok(())
}

fn pipelined<T: Symmetric>(
    ctx: &mut Ctx<'_>,
    dest: SymSlice<T>,
    src: SymSlice<T>,
    root: usize,
    chunk_bytes: usize,
) -> Result<()> {
    let (n, me) = (ctx.n(), ctx.idx());
    let len = dest.len();
    let v = (me + n - root) % n;
    let ce = (chunk_bytes / std::mem::size_of::<T>()).max(1);
    let from = if v == 0 { src } else { dest };
    let next = (v + 1 < n).then(|| (me + 1) % n);
    let prev = ctx.pe((me + n - 1) % n);
    let mut at = 0;
    let mut c = 0usize;
    while at < len {
        let k = ce.min(len - at);
        if v != 0 {
            ctx.wait(layout::SIG_DATA, 1, &|| {
                format!("broadcast (pipelined): waiting for chunk {c} from PE {prev}")
            })?;
        }
        if let Some(nx) = next {
            ctx.copy(dest.slice(at..at + k)?, nx, from.slice(at..at + k)?, me)?;
            ctx.signal(layout::SIG_DATA, nx)?;
        }
        at += k;
        c += 1;
    }
    if v == 0 {
        ctx.copy(dest, me, src, me)?;
    }
    Ok(())
}

/// The node-aware broadcast: the root's node is served by the root itself, every other node by its leader. The
/// root first puts the data into every other node's leader (in node order after its own: the inter-node transfers
/// start first), then into the members of its own node; each leader, once its data arrived, copies it from its
/// own `dest` into its node's members over shared memory.
fn hierarchical<T: Symmetric>(
    ctx: &mut Ctx<'_>,
    dest: SymSlice<T>,
    src: SymSlice<T>,
    root: usize,
) -> Result<()> {
    let me = ctx.idx();
    let groups = ctx.groups();
    let (rg, g) = (groups.group_of[root], groups.group_of[me]);
    let head = |k: usize| {
        if k == rg {
            root
        } else {
            groups.leader(k)
        }
    };
    ctx.count_node_aware(|c| &c.broadcasts);
    if me == root {
        let count = groups.count();
        for k in (1..count).map(|k| (rg + k) % count) {
            let h = head(k);
            ctx.copy(dest, h, src, root)?;
            ctx.signal(layout::SIG_DATA, h)?;
        }
        for &m in groups.members[rg].iter().filter(|&&m| m != root) {
            ctx.copy(dest, m, src, root)?;
            ctx.signal(layout::SIG_DATA, m)?;
        }
        return ctx.copy(dest, me, src, me);
    }
    let h = head(g);
    let from = ctx.pe(if h == me { root } else { h });
    ctx.wait(layout::SIG_DATA, 1, &|| {
        format!("broadcast (hierarchical): waiting for the data from PE {from}")
    })?;
    if h == me {
        for &m in groups.members[g].iter().filter(|&&m| m != me) {
            ctx.copy(dest, m, dest, me)?;
            ctx.signal(layout::SIG_DATA, m)?;
        }
    }
    Ok(())
}
