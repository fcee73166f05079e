//! The team barriers and syncs ([`Ctx::barrier`], [`Ctx::sync_as`]): the choice of pattern and the linear
//! arrivals.

use super::*;

impl<'a> Ctx<'a> {
    /// An exchange (one round or in rounds) that met agreements over the linear barrier keeps member 0's arrival
    /// count exact: member 0 counts every arrival, so an exchange-side member arrives too when member 0 is in the
    /// agreement (it waits for `n - 1` arrivals), and member 0 on the exchange side expects the agreement side's
    /// arrivals (they signal it whatever it does). Otherwise a later linear barrier would find arrivals that belong
    /// to this call.
    pub(super) fn linear_arrivals(&mut self, all: &[Vec<u64>]) -> Result<()> {
        let in_exchange = |w: &Vec<u64>| Protocol::of(w[COMMON]) != Protocol::Agreement;
        if self.idx() != 0 {
            if !in_exchange(&all[0]) {
                self.signal(layout::ARRIVE, 0)?;
            }
        } else {
            let agreeing = all[1..].iter().filter(|w| !in_exchange(w)).count() as u64;
            self.st.expected[layout::ARRIVE] += agreeing;
        }
        Ok(())
    }

    /// A synchronisation of the team as call `call` (its identity words) over `algo`'s pattern ([`Ctx::pattern`];
    /// every pattern is the agreement). Completes this PE's outstanding puts first.
    pub(crate) fn sync_as(&mut self, call: [u64; COMMON], algo: BarrierAlgo) -> Result<()> {
        let pattern = self.pattern(algo, true)?;
        self.sync_pattern(call, pattern)
    }

    /// The agreement's communication pattern: `algo`, or for `Auto` the configured barrier algorithm
    /// (`XPUSHMEM_BARRIER_ALGORITHM`; by default hierarchical on a team whose node layout pays for it, see
    /// `groups.rs`, else all-pairs from 3 up to [`crate::algo::ALL_PAIRS_UP_TO`] members and dissemination
    /// otherwise). Every agreement of a team takes the same pattern (the layout is the same
    /// on every member), so calls that meet always compare their identities. `strict`: an unusable configured
    /// value is this call's error (the team barriers); otherwise (allocations, collectives, `barrier_all`,
    /// finalize) the default.
    #[inline]
    pub(super) fn pattern(&self, algo: BarrierAlgo, strict: bool) -> Result<BarrierAlgo> {
        // The configuration parsed at init (a field read, not the global configuration's lock and clone).
        let configured = match algo {
            BarrierAlgo::Auto => match &self.sh.cfg.barrier_algorithm {
                Ok(a) => *a,
                Err(e) if strict => return Err(e.clone()),
                Err(_) => BarrierAlgo::Auto,
            },
            a => a,
        };
        Ok(match configured {
            BarrierAlgo::Linear if self.n() > 1 => BarrierAlgo::Linear,
            BarrierAlgo::Tree if self.n() > 1 => BarrierAlgo::Tree,
            BarrierAlgo::Hierarchical if self.n() > 1 => BarrierAlgo::Hierarchical,
            BarrierAlgo::Auto if self.n() > 1 && self.layout_pays() => BarrierAlgo::Hierarchical,
            BarrierAlgo::AllPairs if self.n() > 1 && self.n() - 1 <= layout::AGREE_ROUNDS => {
                BarrierAlgo::AllPairs
            }
            BarrierAlgo::Auto if self.n() > 2 && self.n() <= crate::algo::ALL_PAIRS_UP_TO => {
                BarrierAlgo::AllPairs
            }
            _ => BarrierAlgo::Dissemination,
        })
    }

    /// The pattern `Auto` takes on this team (`Shmem::team_barrier_algorithm`); an error for an unusable
    /// `XPUSHMEM_BARRIER_ALGORITHM`.
    pub(crate) fn auto_pattern(&self) -> Result<BarrierAlgo> {
        self.pattern(BarrierAlgo::Auto, true)
    }

    /// A synchronisation as call `call` over `pattern` (every algorithm carries the call's identity).
    pub(super) fn sync_pattern(&mut self, call: [u64; COMMON], pattern: BarrierAlgo) -> Result<()> {
        let checking = self.sh.cfg.check_symmetry;
        let (clean, all) = self.agree(call, [0; INFO], true, checking, false, pattern, None)?;
        if !clean {
            return Err(self.verdict(&all, checking));
        }
        Ok(())
    }

    /// A synchronisation of `TEAM_WORLD` that is the whole call `call` (`barrier_all`, `sync_all`, finalize), over
    /// the job's agreement pattern.
    pub(crate) fn sync_world(mut self, call: CallId) -> Result<()> {
        let pattern = self.pattern(BarrierAlgo::Auto, false)?;
        self.sync_pattern(call.words(), pattern)
    }

    /// A synchronisation inside the collective in progress (every member is in it already).
    pub(crate) fn barrier(&mut self, algo: BarrierAlgo) -> Result<()> {
        let mut w = CallId::Step.words();
        w[3] = CallId::ALL
            .iter()
            .find(|c| c.name() == self.op)
            .map_or(0, |c| *c as u64);
        self.sync_as(w, algo)
    }
}
