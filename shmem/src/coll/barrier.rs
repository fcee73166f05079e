//! Barriers over teams: `team_sync` and `team_barrier` (both complete outstanding puts first: they run the team's
//! agreement, whose identity words must be visible before the synchronisation), with the dissemination, all-pairs,
//! linear, tree and hierarchical patterns of the agreement (`team/ctx/agree.rs`).

use super::BarrierAlgo;
use crate::core::Shmem;
use crate::error::Result;
use crate::team::{CallId, Team};

impl Shmem {
    /// Wait until every member of `team` has called `team_sync` (OpenSHMEM `team_sync`). Does not complete
    /// outstanding puts (use [`Shmem::team_barrier`] for that).
    pub fn team_sync(&self, team: &Team) -> Result<()> {
        self.team_sync_with(team, BarrierAlgo::Auto)
    }

    /// [`Shmem::team_sync`] with a chosen algorithm.
    pub fn team_sync_with(&self, team: &Team, algo: BarrierAlgo) -> Result<()> {
        let mut ctx = team.ctx(self, "team_sync")?;
        ctx.sync_as(with_algo(CallId::TeamSync, algo), algo)
    }

    /// Complete every outstanding put, AMO and signal of this PE, then synchronise `team`: after it, every
    /// member's earlier puts are visible to every member.
    pub fn team_barrier(&self, team: &Team) -> Result<()> {
        self.team_barrier_with(team, BarrierAlgo::Auto)
    }

    /// [`Shmem::team_barrier`] with a chosen algorithm.
    pub fn team_barrier_with(&self, team: &Team, algo: BarrierAlgo) -> Result<()> {
        let mut ctx = team.ctx(self, "team_barrier")?;
        ctx.sync_as(with_algo(CallId::TeamBarrier, algo), algo)
    }
}

/// Identity words of a barrier call with an explicitly chosen algorithm.
fn with_algo(call: CallId, algo: BarrierAlgo) -> [u64; crate::team::COMMON] {
    let mut w = call.words();
    w[1] = algo.code();
    w
}
