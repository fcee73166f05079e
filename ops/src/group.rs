//! [`Group`]: an ordered set of PEs an op runs on (PyTorch's process group / NVSHMEM team), a thin layer over an
//! xpushmem [`Team`]: the team gives the synchronisation space (disjoint groups run ops concurrently without
//! interfering) and the agreement; the group adds its rank order (group rank `i` is `pes()[i]`, in any order).
//!
//! ## Synchronisation
//! Every collective op synchronises its group with [`Shmem::team_agree`]: a barrier over the team that carries the
//! op's name, whether this rank rejected its arguments, and a digest of its symmetric arguments, all-reduced in
//! `ceil(log2 W)` rounds. Every rank ends with the same verdict, so an op either proceeds on every rank or fails
//! on every rank, and no rank is left waiting for a peer that gave up; a rank in another op fails with a mismatch
//! naming both. Waits time out (`XPUSHMEM_TIMEOUT_MS`) and notice lost peers.

use xpushmem::{Agreement, Error, Messages, Result, Shmem, Team};

/// An ordered list of global PEs: group rank `i` is PE `pes()[i]`. Collective ops take group-relative ranks
/// (roots, split indices) and map them through this list.
///
/// A group is created collectively by **every PE of the world** (like `nvshmem_team_split_strided` over
/// `NVSHMEM_TEAM_WORLD`), each PE passing the group it belongs to; disjoint groups can be created in the same
/// call. Ops on one group must be issued in the same order by all its members, and not concurrently from two
/// threads of one PE.
#[derive(Debug)]
pub struct Group {
    pes: Vec<usize>,
    my_rank: Option<usize>,
    /// The team of the members (`None` on a PE that is not one).
    team: Option<Team>,
    /// Whether the team was made for the group (and is destroyed with it).
    owned: bool,
    id: u64,
    /// Team rank of each group rank (team ranks count the members in PE order).
    team_rank: Vec<usize>,
    /// Group rank of each team rank (the inverse of `team_rank`).
    by_team: Vec<usize>,
    /// Message buffers of the exchanges, kept between ops (no allocation per call once grown).
    scratch: std::sync::Mutex<Scratch>,
}

/// The message buffers of [`Group::exchange`]'s callers.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    /// What this rank sends.
    pub send: Messages,
    /// What it received.
    pub recv: Messages,
    /// The all-to-alls' argument digest words (reused from call to call).
    pub words: Vec<u64>,
    /// The sender's split vector and source rows of the all-to-alls.
    pub split_counts: Vec<i64>,
    pub split_rows: Vec<i64>,
    /// What the last call of each all-to-all-v (by op code) checked and agreed, with its receive state, for the
    /// next call of the op with the same arguments (MoE layers alternate dispatch and combine).
    pub cache: [ArgCache; 4],
}

/// What the last call of one all-to-all-v on a group checked, so that a call with the same arguments skips the
/// checks whose inputs did not change (the same verdict, computed once). Every call still runs the exchange, which carries
/// every rank's verdict and argument digest, and every rank compares every received split message with the
/// last call's, so a call that changed anything on any rank takes the full checks on every rank.
#[derive(Debug, Default)]
pub(crate) struct ArgCache {
    /// The op code and `major_align` of the views below.
    pub op: u64,
    pub align: i64,
    /// The views (input, out, splits, `out_splits_offsets`) of the last call whose shape checks passed; empty:
    /// none.
    pub views: Vec<crate::tensor::TensorView>,
    /// What those checks gave: (number of splits, row bytes).
    pub shapes: (usize, usize),
    /// The views' memory, resolved once by those checks: the bytes of input and out (contiguous), and the
    /// int64 elements of the splits and `out_splits_offsets` when they are contiguous and 8-byte aligned (`None`:
    /// read and written run by run).
    pub slices: Option<ViewSlices>,
    /// Whether this call's views are the cached ones (set by the shape check of each call).
    pub hit: bool,
    /// The argument digest of the cached views (`None`: not computed yet).
    pub dig: Option<u64>,
    /// The last split vector whose source rows were computed and checked, and those rows.
    pub counts: Vec<i64>,
    pub rows: Vec<i64>,
    /// The heads (flags, entries, receive arguments and split vectors) of every split message the last
    /// completed call received, back to back in team rank order, and where those messages ended in the receive
    /// buffer (`Messages::ends`: the eager chunks' positions below are positions in it); and whether that call
    /// completed (its receive state below is then intact).
    pub heads: Vec<u8>,
    pub recv_ends: Vec<usize>,
    pub received: bool,
    /// The receive state: received counts and source rows, eager chunk positions, receive layout, pull list and
    /// `out_splits_offsets` rows (their allocations reused from call to call).
    pub recv_counts: Vec<i64>,
    pub recv_rows: Vec<i64>,
    pub inline: Vec<Option<usize>>,
    pub layout: crate::plan::RecvLayout,
    pub transfers: Vec<crate::plan::Transfer>,
    pub both: Vec<i64>,
    /// That call's protocol flags: every chunk went eagerly, every message carried the receive arguments.
    pub all_eager: bool,
    pub all_matrix: bool,
    /// The eager chunks of that call's messages in the order of their destination in `out`: (destination byte,
    /// sender group rank, byte in the receive buffer's data, bytes); and their runs, contiguous in `out` and each
    /// made of small chunks, which move with one put through `stage` (as long as the longest run): (the run's
    /// bytes of `out`, end in `eager_chunks`). The pull list above holds only the chunks that did not come
    /// eagerly.
    pub eager_chunks: Vec<(usize, usize, usize, usize)>,
    pub eager_runs: Vec<(xpushmem::SymSlice<u8>, usize)>,
    pub stage: Vec<u8>,
    /// Whether this call's split vector is the one whose source rows were cached (set by each call's check).
    pub rows_hit: bool,
    /// The split messages this rank built for that split vector, one per team rank (their heads are a function
    /// of the views, the split vector and the configuration: kept while those hold, and sent again with only
    /// their eager chunks read anew), and where those chunks come from: (input byte, those input bytes, byte in
    /// `sent.data`). Empty (no `ends`) when they must be built again. `pack_span`: the input bytes those chunks
    /// lie in (first byte, those bytes) when reading them with one get into `pack_stage` costs less than a get
    /// each.
    pub sent: Messages,
    pub packs: Vec<(usize, xpushmem::SymSlice<u8>, usize)>,
    pub pack_span: Option<(usize, xpushmem::SymSlice<u8>)>,
    pub pack_stage: Vec<u8>,
}

/// The memory of an all-to-all-v's views ([`ArgCache::slices`]), a function of the views alone.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ViewSlices {
    pub input: xpushmem::SymSlice<u8>,
    pub out: xpushmem::SymSlice<u8>,
    pub splits: Option<xpushmem::SymSlice<i64>>,
    pub oso: Option<xpushmem::SymSlice<i64>>,
}

fn list_id(pes: &[usize]) -> u64 {
    crate::plan::digest(&pes.iter().map(|&p| p as u64).collect::<Vec<_>>()) ^ pes.len() as u64
}

impl Group {
    /// The group of all PEs, in PE order: `TEAM_WORLD` itself (collective over the world, which it does not
    /// synchronise).
    pub fn world(sh: &Shmem) -> Result<Group> {
        let pes: Vec<usize> = (0..sh.n_pes()).collect();
        Ok(Group {
            my_rank: Some(sh.my_pe()),
            id: list_id(&pes),
            team_rank: pes.clone(),
            by_team: pes.clone(),
            scratch: Default::default(),
            pes,
            team: Some(sh.team_world()),
            owned: false,
        })
    }

    /// A group of the global PEs `pes` (group rank `i` = `pes[i]`). Collective over the world: every PE calls it
    /// at the same point, each passing the list of the group it wants (members of one group must pass the same
    /// list; a PE may pass a group it is not a member of and gets a handle on which ops fail). The verdict is the
    /// same on every PE: a bad list anywhere (empty, a PE out of range or listed twice, members disagreeing)
    /// fails the call everywhere.
    pub fn new(sh: &Shmem, pes: &[usize]) -> Result<Group> {
        let err = check_pes(pes, sh.n_pes());
        Group::create(sh, Some(pes), err)
    }

    /// The collective creation over the world: `local_err` is this PE's verdict on its own arguments (it takes
    /// part with an invalid list, so that every PE fails); `None` takes part without joining a group.
    fn create(sh: &Shmem, pes: Option<&[usize]>, local_err: Option<Error>) -> Result<Group> {
        let world = sh.team_world();
        if let Some(e) = local_err {
            let _ = sh.team_from_pes(&world, Some(&[]));
            return Err(e);
        }
        let team = sh.team_from_pes(&world, pes).map_err(|e| match e {
            Error::Mismatch { pe, .. } => Error::InvalidArgument {
                name: "pes",
                value: format!("PE {pe}"),
                reason: format!(
                    "group creation is collective over the world and PE {pe} passed an invalid or inconsistent PE list (see its error)"
                ),
            },
            e => e,
        })?;
        let pes = pes.unwrap_or_default();
        Ok(Group {
            my_rank: pes.iter().position(|&p| p == sh.my_pe()),
            pes: pes.to_vec(),
            team,
            owned: true,
            id: list_id(pes),
            team_rank: team_ranks(pes),
            by_team: inverse(&team_ranks(pes)),
            scratch: Default::default(),
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
            return Group::create(sh, None, Some(err));
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
                    Err(e) => Group::create(sh, None, Some(e)),
                }
            }
            None => Group::create(sh, None, None),
        }
    }

    /// Release the group's team. Collective over the group's members (every PE frees the groups it created, in
    /// the same order).
    pub fn free(self, sh: &Shmem) -> Result<()> {
        match self.team {
            Some(t) if self.owned => sh.team_destroy(t),
            _ => Ok(()),
        }
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

    /// The team's agreement (see the module docs), then turn the verdict into this rank's result: its own error
    /// if it had one; an error naming the first failed rank if another rank failed; a mismatch if the ranks'
    /// argument digests differ. `ours` describes this rank's symmetric arguments for the mismatch message.
    /// Completes this PE's outstanding puts first.
    pub(crate) fn agree(
        &self,
        sh: &Shmem,
        op: &'static str,
        local: Option<Error>,
        dig: u64,
        ours: &dyn Fn() -> String,
    ) -> Result<()> {
        self.rank_for(sh, op)?;
        let team = self
            .team
            .as_ref()
            .ok_or_else(|| Error::State(format!("{op}: group without a team")))?;
        let v = sh.team_agree(team, op, local.is_some(), dig)?;
        self.verdict(sh, op, team, v, local, ours)
    }

    /// Bytes of one message of [`Group::exchange`] as one-round exchanges size them (`Shmem::team_eager_capacity`;
    /// 0 when the group is too large for the exchange).
    pub(crate) fn exchange_capacity(&self, sh: &Shmem) -> usize {
        self.team.as_ref().map_or(0, |t| sh.team_eager_capacity(t))
    }

    /// The team's agreement folded into one signalled exchange ([`Shmem::team_exchange`]): `send` holds one
    /// message per **team** rank (see [`Group::team_rank`]), `recv` gets every team rank's. The verdict becomes
    /// this rank's result like [`Group::agree`]'s. Completes this PE's outstanding puts first.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn exchange(
        &self,
        sh: &Shmem,
        op: &'static str,
        local: Option<Error>,
        dig: u64,
        send: &Messages,
        recv: &mut Messages,
        ours: &dyn Fn() -> String,
    ) -> Result<()> {
        self.rank_for(sh, op)?;
        let team = self
            .team
            .as_ref()
            .ok_or_else(|| Error::State(format!("{op}: group without a team")))?;
        let v = sh.team_exchange(team, op, local.is_some(), dig, send, recv)?;
        self.verdict(sh, op, team, v, local, ours)
    }

    /// The group's message buffers (ops on one group do not run concurrently: never contended).
    pub(crate) fn scratch(&self) -> std::sync::MutexGuard<'_, Scratch> {
        self.scratch.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The team rank of each group rank (the messages of [`Group::exchange`] are indexed by team rank).
    pub(crate) fn team_ranks(&self) -> &[usize] {
        &self.team_rank
    }

    /// The group rank of each team rank (the inverse of [`Group::team_ranks`]).
    pub(crate) fn group_ranks(&self) -> &[usize] {
        &self.by_team
    }

    /// An agreement's verdict as this rank's result: its own error first, then the first failed rank, then a
    /// mismatch of the argument digests.
    fn verdict(
        &self,
        sh: &Shmem,
        op: &'static str,
        team: &Team,
        v: Agreement,
        local: Option<Error>,
        ours: &dyn Fn() -> String,
    ) -> Result<()> {
        if let Some(e) = local {
            return Err(e);
        }
        // Team ranks count the members in PE order; name them by group rank.
        let named = |t: usize| -> Result<(usize, usize)> {
            let pe = team.global_pe(t)?;
            Ok((self.pes.iter().position(|&p| p == pe).unwrap_or(t), pe))
        };
        if let Some(t) = v.failed {
            let (r, _) = named(t)?;
            return Err(self.rejected(op, r)?);
        }
        if let Some(t) = v.differs {
            let (_, pe) = named(t)?;
            return Err(Error::Mismatch {
                call: op,
                pe,
                theirs: "different symmetric arguments (buffers, shapes, dtypes or op parameters must be the same on every rank)".into(),
                reference_pe: sh.my_pe(),
                ours: ours(),
            });
        }
        Ok(())
    }

    /// The error of every other rank when group rank `r` rejected its arguments.
    pub(crate) fn rejected(&self, op: &str, r: usize) -> Result<Error> {
        let pe = self.global(r)?;
        Ok(Error::InvalidArgument {
            name: "group",
            value: format!("rank {r} (PE {pe})"),
            reason: format!(
                "{op}: group rank {r} (PE {pe}) rejected its arguments (see its error); nothing was written"
            ),
        })
    }

    /// A plain barrier over the group (completes this PE's outstanding puts first).
    pub fn barrier(&self, sh: &Shmem) -> Result<()> {
        self.agree(sh, "Group::barrier", None, 0, &String::new)
    }
}

/// The team rank of each entry of a PE list (team ranks count the members in PE order).
fn team_ranks(pes: &[usize]) -> Vec<usize> {
    let mut sorted = pes.to_vec();
    sorted.sort_unstable();
    pes.iter()
        .map(|p| sorted.binary_search(p).unwrap_or(0))
        .collect()
}

/// The inverse of a permutation of `0..len`.
fn inverse(perm: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        if let Some(x) = inv.get_mut(p) {
            *x = i;
        }
    }
    inv
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
    fn pe_lists() {
        assert!(check_pes(&[], 4).is_some());
        assert!(check_pes(&[0, 4], 4).is_some());
        assert!(check_pes(&[1, 1], 4).is_some());
        assert!(check_pes(&[3, 0, 2], 4).is_none());
    }
}
