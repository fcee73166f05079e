//! [`Group`]: an ordered set of PEs an op runs on (PyTorch's process group / NVSHMEM team), with its own
//! symmetric synchronisation space, so that disjoint groups run ops concurrently without interfering.
//!
//! ## Synchronisation
//! Every collective op synchronises its group with `Group::sync`: a dissemination exchange over
//! `ceil(log2 W)` rounds that is at the same time a barrier and an all-reduce of a small *verdict*: whether any
//! rank rejected its arguments (and the lowest such rank), and the minimum and maximum digest of the symmetric
//! arguments (so every rank learns whether all ranks passed the same buffers and layouts). All reductions are
//! idempotent (OR, min, max), which is what makes the dissemination pattern an exact all-reduce. Every rank ends
//! with the same verdict, so an op either proceeds on every rank or fails on every rank, and no rank is left
//! waiting for a peer that gave up.
//!
//! The space is `2 × 64 × 8` words: two parities (consecutive syncs alternate, so a fast rank's next sync never
//! overwrites a slot a slow rank has not read yet: to reuse a parity a rank must complete the sync in between,
//! which needs every rank to have entered it) × up to 64 rounds × one slot (a flag word, written last with the
//! sync's epoch by `put_signal`, and the verdict words). Its size does not depend on `W`, so groups of
//! different sizes can be created in the same collective call.
//!
//! Waits go through the runtime's `signal_wait_until`, so they time out (`XPUSHMEM_TIMEOUT_MS`) and notice
//! lost peers.

use crate::plan::digest;
use std::sync::atomic::{AtomicU64, Ordering};
use xpushmem::{Cmp, Error, Result, Shmem, SignalOp, SymSlice, Team};

const ROUNDS: usize = 64;
const SLOT: usize = 8;
const PARITY: usize = ROUNDS * SLOT;
/// Words of a group's synchronisation space: the sync slots plus two words for creation checks.
const SCRATCH_WORDS: usize = 2 * PARITY + 2;
const CHECK_HASH: usize = 2 * PARITY;
const CHECK_VERDICT: usize = 2 * PARITY + 1;
const NONE: u64 = u64::MAX;

/// An ordered list of global PEs: group rank `i` is PE `pes()[i]`. Collective ops take group-relative ranks
/// (roots, split indices) and map them through this list.
///
/// A group is created collectively by **every PE of the world** (it allocates its synchronisation space with
/// the world-collective `malloc`, like `nvshmem_team_split_strided` over `NVSHMEM_TEAM_WORLD`), each PE
/// passing the group it belongs to; disjoint groups created in the same call share nothing but the allocation
/// offset. Ops on one group must be issued in the same order by all its members, and not concurrently from two
/// threads of one PE.
#[derive(Debug)]
pub struct Group {
    pes: Vec<usize>,
    my_rank: Option<usize>,
    scratch: SymSlice<u64>,
    seq: AtomicU64,
    id: u64,
}

/// The all-reduced outcome of a `Group::sync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// Lowest group rank that reported a failure, if any.
    pub failed: Option<usize>,
    /// Lowest digest and the lowest rank that passed it.
    pub min: (u64, usize),
    /// Highest digest and the lowest rank that passed it.
    pub max: (u64, usize),
}

impl Group {
    /// The group of all PEs, in PE order. Collective over the world.
    pub fn world(sh: &Shmem) -> Result<Group> {
        let pes: Vec<usize> = (0..sh.n_pes()).collect();
        Group::new(sh, &pes)
    }

    /// A group of the global PEs `pes` (group rank `i` = `pes[i]`). Collective over the world: every PE calls it
    /// at the same point, each passing the list of the group it wants (members of one group must pass the same
    /// list; a PE may pass a group it is not a member of and gets a handle on which ops fail). The verdict is the
    /// same on every PE: a bad list anywhere (empty, a PE out of range or listed twice, members disagreeing)
    /// fails the call everywhere.
    pub fn new(sh: &Shmem, pes: &[usize]) -> Result<Group> {
        let err = check_pes(pes, sh.n_pes());
        Group::create(sh, pes, err)
    }

    /// The collective creation: `local_err` is this PE's verdict on its own arguments; an empty `pes` without
    /// error takes part without joining a group.
    fn create(sh: &Shmem, pes: &[usize], local_err: Option<Error>) -> Result<Group> {
        let n = sh.n_pes();
        let me = sh.my_pe();
        let scratch = sh.calloc::<u64>(SCRATCH_WORDS)?;
        let id = digest(&pes.iter().map(|&p| p as u64).collect::<Vec<_>>()) ^ pes.len() as u64;
        // Phase 1: publish the list's digest; members compare theirs with every other member's.
        let check = scratch.at(CHECK_HASH)?;
        let verdict_word = scratch.at(CHECK_VERDICT)?;
        sh.p(check, if local_err.is_some() { NONE } else { id }, me)?;
        sh.barrier_all()?;
        let mut err = local_err;
        if err.is_none() && pes.contains(&me) {
            for &p in pes {
                let theirs = sh.g(check, p)?;
                if theirs != id {
                    err = Some(Error::Mismatch {
                        call: "Group::new",
                        pe: p,
                        theirs: if theirs == NONE {
                            "an invalid PE list".into()
                        } else {
                            format!("a different PE list (digest {theirs:#x})")
                        },
                        reference_pe: me,
                        ours: format!("{pes:?}"),
                    });
                    break;
                }
            }
        }
        // Phase 2: publish the verdict; everyone reads everyone's, so the outcome is the same on every PE.
        sh.p(verdict_word, err.is_some() as u64, me)?;
        sh.barrier_all()?;
        let mut failed = None;
        for p in 0..n {
            if sh.g(verdict_word, p)? != 0 {
                failed = Some(p);
                break;
            }
        }
        if let Some(p) = failed {
            sh.free(scratch)?;
            return Err(err.unwrap_or_else(|| Error::InvalidArgument {
                name: "pes",
                value: format!("PE {p}"),
                reason: format!(
                    "group creation is collective over the world and PE {p} passed an invalid or inconsistent PE list (see its error)"
                ),
            }));
        }
        Ok(Group {
            my_rank: pes.iter().position(|&p| p == me),
            pes: pes.to_vec(),
            scratch,
            seq: AtomicU64::new(0),
            id,
        })
    }

    /// Groups of `size` consecutive PEs (`[0, size)`, `[size, 2 size)`, ...): each PE gets the one it belongs
    /// to (the `"ep"` dimension of a `(W / size, size)` device mesh). Collective over the world; `size` must
    /// divide the number of PEs.
    pub fn split_contiguous(sh: &Shmem, size: usize) -> Result<Group> {
        let n = sh.n_pes();
        if size == 0 || n % size != 0 {
            // Take part in the collective creation anyway, so that every PE fails with the same verdict.
            let err = Error::InvalidArgument {
                name: "size",
                value: size.to_string(),
                reason: format!("must be positive and divide the number of PEs ({n})"),
            };
            return Group::create(sh, &[], Some(err));
        }
        let start = sh.my_pe() / size * size;
        let pes: Vec<usize> = (start..start + size).collect();
        Group::new(sh, &pes)
    }

    /// The group of a team: its PEs in team rank order, so group ranks are team ranks. Collective over the
    /// world like [`Group::new`]: every PE calls it, passing `None` when it is not a member of the team it
    /// creates a group for (what `team_split_strided` returned), and gets a handle it cannot run ops on.
    pub fn from_team(sh: &Shmem, team: Option<&Team>) -> Result<Group> {
        match team {
            Some(t) => {
                let pes: Result<Vec<usize>> = (0..t.n_pes()).map(|i| t.global_pe(i)).collect();
                match pes {
                    Ok(pes) => Group::new(sh, &pes),
                    Err(e) => Group::create(sh, &[], Some(e)),
                }
            }
            None => Group::create(sh, &[], None),
        }
    }

    /// Release the group's synchronisation space. Collective over the world (every PE frees the groups it
    /// created, in the same order).
    pub fn free(self, sh: &Shmem) -> Result<()> {
        sh.free(self.scratch)
    }

    /// Global PEs by group rank.
    pub fn pes(&self) -> &[usize] {
        &self.pes
    }

    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.pes.len()
    }

    /// This PE's group rank, `None` when it is not a member.
    pub fn my_rank(&self) -> Option<usize> {
        self.my_rank
    }

    /// Global PE of group rank `rank`.
    pub fn global(&self, rank: usize) -> Result<usize> {
        self.pes.get(rank).copied().ok_or_else(|| Error::InvalidPe {
            pe: rank as i64,
            n_pes: self.pes.len(),
            context: "group rank".into(),
        })
    }

    /// A digest of the member list (equal on every member).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// This PE's rank, or an error naming `op` when it is not a member.
    pub(crate) fn rank_for(&self, sh: &Shmem, op: &str) -> Result<usize> {
        self.my_rank.ok_or_else(|| Error::InvalidArgument {
            name: "group",
            value: format!("{:?}", self.pes),
            reason: format!("{op}: PE {} is not a member of the group", sh.my_pe()),
        })
    }

    /// Barrier + all-reduce of the verdict (see the module docs). `failed`: this rank rejects its arguments;
    /// `digest`: the digest of its symmetric arguments. Completes this PE's outstanding puts first.
    pub(crate) fn sync(&self, sh: &Shmem, op: &str, failed: bool, dig: u64) -> Result<Verdict> {
        let me = self.rank_for(sh, op)?;
        sh.quiet()?;
        let epoch = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        let parity = (epoch % 2) as usize * PARITY;
        let mut v = [
            failed as u64,
            if failed { me as u64 } else { NONE },
            dig,
            me as u64,
            dig,
            me as u64,
        ];
        let n = self.pes.len();
        let mut dist = 1usize;
        let mut round = 0usize;
        while dist < n {
            let slot = parity + round * SLOT;
            let partner = self.pes[(me + dist) % n];
            let flag = self.scratch.at(slot)?;
            let data = self.scratch.slice(slot + 1..slot + 1 + v.len())?;
            sh.put_signal(data, &v, flag, epoch, SignalOp::Set, partner)?;
            sh.signal_wait_until(flag, Cmp::Ge, epoch)?;
            let mut got = [0u64; 6];
            sh.get(&mut got, data, sh.my_pe())?;
            combine(&mut v, &got);
            dist <<= 1;
            round += 1;
        }
        Ok(Verdict {
            failed: (v[0] != 0).then_some(v[1] as usize),
            min: (v[2], v[3] as usize),
            max: (v[4], v[5] as usize),
        })
    }

    /// `Group::sync`, then turn the verdict into this rank's result: its own error if it had one; an error
    /// naming the first failed rank if another rank failed; a mismatch if the ranks' argument digests differ.
    /// `ours` describes this rank's symmetric arguments for the mismatch message.
    pub(crate) fn agree(
        &self,
        sh: &Shmem,
        op: &'static str,
        local: Option<Error>,
        dig: u64,
        ours: &dyn Fn() -> String,
    ) -> Result<()> {
        let v = self.sync(sh, op, local.is_some(), dig)?;
        if let Some(e) = local {
            return Err(e);
        }
        if let Some(r) = v.failed {
            return Err(Error::InvalidArgument {
                name: "group",
                value: format!("rank {r} (PE {})", self.pes[r]),
                reason: format!(
                    "{op}: group rank {r} (PE {}) rejected its arguments (see its error); nothing was written",
                    self.pes[r]
                ),
            });
        }
        if v.min.0 != v.max.0 {
            let other = if dig == v.min.0 { v.max.1 } else { v.min.1 };
            return Err(Error::Mismatch {
                call: op,
                pe: self.pes[other],
                theirs: "different symmetric arguments (buffers, shapes, dtypes or op parameters must be the same on every rank)".into(),
                reference_pe: sh.my_pe(),
                ours: ours(),
            });
        }
        Ok(())
    }

    /// A plain barrier over the group (completes this PE's outstanding puts first).
    pub fn barrier(&self, sh: &Shmem) -> Result<()> {
        self.sync(sh, "Group::barrier", false, 0).map(|_| ())
    }
}

fn combine(v: &mut [u64; 6], o: &[u64; 6]) {
    v[0] |= o[0];
    v[1] = v[1].min(o[1]);
    if (o[2], o[3]) < (v[2], v[3]) {
        v[2] = o[2];
        v[3] = o[3];
    }
    if o[4] > v[4] || (o[4] == v[4] && o[5] < v[5]) {
        v[4] = o[4];
        v[5] = o[5];
    }
}

fn check_pes(pes: &[usize], n: usize) -> Option<Error> {
    if pes.is_empty() {
        return Some(Error::InvalidArgument {
            name: "pes",
            value: "[]".into(),
            reason: "a group needs at least one PE".into(),
        });
    }
    let mut seen = vec![false; n];
    for (i, &p) in pes.iter().enumerate() {
        if p >= n {
            return Some(Error::InvalidPe {
                pe: p as i64,
                n_pes: n,
                context: format!("Group::new: pes[{i}]"),
            });
        }
        if seen[p] {
            return Some(Error::InvalidArgument {
                name: "pes",
                value: format!("{pes:?}"),
                reason: format!("PE {p} is listed twice"),
            });
        }
        seen[p] = true;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_combination_is_idempotent_and_commutative() {
        let a = [0, NONE, 5, 2, 5, 2];
        let b = [1, 1, 3, 1, 9, 1];
        let mut x = a;
        combine(&mut x, &b);
        let mut y = b;
        combine(&mut y, &a);
        assert_eq!(x, y);
        let mut z = x;
        combine(&mut z, &x);
        assert_eq!(z, x);
        assert_eq!(x, [1, 1, 3, 1, 9, 1]);
    }

    #[test]
    fn pe_lists() {
        assert!(check_pes(&[], 4).is_some());
        assert!(check_pes(&[0, 4], 4).is_some());
        assert!(check_pes(&[1, 1], 4).is_some());
        assert!(check_pes(&[3, 0, 2], 4).is_none());
    }
}
