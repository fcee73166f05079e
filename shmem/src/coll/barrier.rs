//! Barriers over teams: `team_sync` (synchronisation only) and `team_barrier` (completes outstanding puts first),
//! with the linear, dissemination and tree algorithms.

use super::{resolve_barrier, BarrierAlgo, Ctx};
use crate::error::Result;
use crate::runtime::Shmem;
use crate::team::{layout, Team};

impl Ctx<'_> {
    /// A barrier over the team with algorithm `algo` (`Auto` resolved here).
    pub(crate) fn barrier(&mut self, algo: BarrierAlgo) -> Result<()> {
        let n = self.n();
        if n == 1 {
            return Ok(());
        }
        match resolve_barrier(algo, n)? {
            BarrierAlgo::Linear => self.barrier_linear(),
            BarrierAlgo::Tree => self.barrier_tree(),
            _ => self.barrier_dissemination(),
        }
    }

    /// Round k: signal the member 2^k ahead, wait for the one 2^k behind. One counter per round, one sender per
    /// counter, so the epoch (barriers so far) is exactly what each counter must reach.
    fn barrier_dissemination(&mut self) -> Result<()> {
        let (n, me) = (self.n(), self.idx());
        let mut dist = 1usize;
        let mut round = 0usize;
        while dist < n {
            self.signal(layout::DISS + round, (me + dist) % n)?;
            let from = self.pe((me + n - dist) % n);
            self.wait(layout::DISS + round, 1, &|| {
                format!("dissemination round {round}: waiting for PE {from}")
            })?;
            dist <<= 1;
            round += 1;
        }
        Ok(())
    }

    fn barrier_linear(&mut self) -> Result<()> {
        let n = self.n();
        if self.idx() == 0 {
            self.wait(layout::ARRIVE, n as u64 - 1, &|| {
                format!("linear barrier: member 0 waiting for {} arrivals", n - 1)
            })?;
            for i in 1..n {
                self.signal(layout::RELEASE, i)?;
            }
        } else {
            self.signal(layout::ARRIVE, 0)?;
            let root = self.pe(0);
            self.wait(layout::RELEASE, 1, &|| {
                format!("linear barrier: waiting for the release from PE {root}")
            })?;
        }
        Ok(())
    }

    fn barrier_tree(&mut self) -> Result<()> {
        let (n, me) = (self.n(), self.idx());
        let children: Vec<usize> = [2 * me + 1, 2 * me + 2]
            .into_iter()
            .filter(|&c| c < n)
            .collect();
        let k = children.len() as u64;
        if k > 0 {
            self.wait(layout::ARRIVE, k, &|| {
                format!("tree barrier: waiting for {k} children")
            })?;
        }
        if me > 0 {
            let parent = (me - 1) / 2;
            self.signal(layout::ARRIVE, parent)?;
            let p = self.pe(parent);
            self.wait(layout::RELEASE, 1, &|| {
                format!("tree barrier: waiting for the release from PE {p}")
            })?;
        }
        for c in children {
            self.signal(layout::RELEASE, c)?;
        }
        Ok(())
    }
}

impl Shmem {
    /// Wait until every member of `team` has called `team_sync` (OpenSHMEM `team_sync`). Does not complete
    /// outstanding puts (use [`Shmem::team_barrier`] for that).
    pub fn team_sync(&self, team: &Team) -> Result<()> {
        self.team_sync_with(team, BarrierAlgo::Auto)
    }

    /// [`Shmem::team_sync`] with a chosen algorithm.
    pub fn team_sync_with(&self, team: &Team, algo: BarrierAlgo) -> Result<()> {
        let mut ctx = team.ctx(self, "team_sync")?;
        ctx.barrier(algo)
    }

    /// Complete every outstanding put, AMO and signal of this PE, then synchronise `team`: after it, every
    /// member's earlier puts are visible to every member.
    pub fn team_barrier(&self, team: &Team) -> Result<()> {
        self.team_barrier_with(team, BarrierAlgo::Auto)
    }

    /// [`Shmem::team_barrier`] with a chosen algorithm.
    pub fn team_barrier_with(&self, team: &Team, algo: BarrierAlgo) -> Result<()> {
        let mut ctx = team.ctx(self, "team_barrier")?;
        self.quiet()?;
        ctx.barrier(algo)
    }
}
