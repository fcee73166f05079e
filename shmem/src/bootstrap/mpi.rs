//! MPI bootstrap (cargo feature `mpi`): PEs are the ranks of `MPI_COMM_WORLD`, for `mpirun`/`srun` launches.
//!
//! MPI is initialised here (at thread level MULTIPLE when the library offers it) unless the program already did,
//! and finalised by [`Bootstrap::finalize`] only when it was initialised here. MPI collectives cannot time out:
//! a lost PE under this bootstrap is still detected by the runtime's own waits (pidfds on the node), and
//! the MPI launcher tears the job down.

use super::Bootstrap;
use crate::error::{Error, Result};
use mpi::collective::CommunicatorCollectives;
use mpi::datatype::PartitionMut;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::Count;
use std::sync::Mutex;

/// The world communicator of an MPI job.
pub struct MpiBootstrap {
    rank: usize,
    size: usize,
    /// Present when this bootstrap initialised MPI (and so must finalise it).
    universe: Mutex<Option<mpi::environment::Universe>>,
    /// MPI calls are serialised: the library may provide less than MPI_THREAD_MULTIPLE.
    lock: Mutex<()>,
}

impl std::fmt::Debug for MpiBootstrap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiBootstrap")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish()
    }
}

fn world() -> SimpleCommunicator {
    SimpleCommunicator::world()
}

impl MpiBootstrap {
    /// Join `MPI_COMM_WORLD`, initialising MPI if the program has not.
    pub fn new() -> Result<MpiBootstrap> {
        let universe =
            if mpi::environment::is_initialized() {
                None
            } else {
                let (u, _level) = mpi::initialize_with_threading(mpi::Threading::Multiple)
                    .ok_or_else(|| Error::Bootstrap {
                        method: "mpi",
                        message: "MPI_Init_thread failed".into(),
                    })?;
                Some(u)
            };
        let w = world();
        Ok(MpiBootstrap {
            rank: w.rank() as usize,
            size: w.size() as usize,
            universe: Mutex::new(universe),
            lock: Mutex::new(()),
        })
    }
}

impl Bootstrap for MpiBootstrap {
    fn name(&self) -> &'static str {
        "mpi"
    }
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let w = world();
        let len = Count::try_from(mine.len()).map_err(|_| Error::Bootstrap {
            method: "mpi",
            message: format!(
                "allgather contribution of {} bytes exceeds MPI's count range",
                mine.len()
            ),
        })?;
        let mut counts = vec![0 as Count; self.size];
        w.all_gather_into(&len, &mut counts[..]);
        let displs: Vec<Count> = counts
            .iter()
            .scan(0 as Count, |acc, &c| {
                let d = *acc;
                *acc += c;
                Some(d)
            })
            .collect();
        let total: usize = counts.iter().map(|&c| c as usize).sum();
        let mut buf = vec![0u8; total];
        {
            let mut part = PartitionMut::new(&mut buf[..], &counts[..], &displs[..]);
            w.all_gather_varcount_into(mine, &mut part);
        }
        Ok(counts
            .iter()
            .zip(&displs)
            .map(|(&c, &d)| buf[d as usize..(d + c) as usize].to_vec())
            .collect())
    }
    fn barrier(&self) -> Result<()> {
        let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        world().barrier();
        Ok(())
    }
    fn finalize(&self) -> Result<()> {
        // Dropping the universe calls MPI_Finalize.
        drop(
            self.universe
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take(),
        );
        Ok(())
    }
}
