//! PMIx bootstrap: PEs are the processes of the PMIx namespace this process was started in, for launches by a
//! PMIx server (`srun --mpi=pmix` under Slurm, Open MPI's `mpirun`, PRRTE's `prterun`), without MPI.
//!
//! Rank and size are the process's PMIx rank and the job's `PMIX_JOB_SIZE`; the node's ranks are
//! `PMIX_LOCAL_PEERS`. An allgather publishes this PE's contribution under a key of its own (`xpushmem.ag.<n>`,
//! `PMIx_Put` + `PMIx_Commit`), meets the others in a collecting `PMIx_Fence` and reads theirs (`PMIx_Get`); a
//! barrier is the same fence with an empty contribution. Not a fence without data collection: under Slurm
//! (`srun --mpi=pmix`, Slurm 22.05's `mpi/pmix_v4`, which takes its tree collective for such a fence) that fence
//! released the processes of one node once they had arrived, before those of the other node had (two nodes in
//! network namespaces: a process of the first node finished finalize and left while one of the second was still in
//! finalize's last synchronisation, whose reads of it then failed). Every get carries `XPUSHMEM_TIMEOUT_MS` (rounded
//! up to whole seconds) as `PMIX_TIMEOUT`; every fence ends at that limit on the PE's side (`sys/pmix.rs`: a server
//! need not honour `PMIX_TIMEOUT`, and Slurm's does not), so a process that never arrives ends in an error, and a
//! server that dies ends the client's calls with PMIx's lost-connection error: an error on every PE, not a hang.

use super::Bootstrap;
use crate::error::{Error, Result};
use crate::sys::pmix::{seconds, Pmix};
use std::sync::Mutex;
use std::time::Duration;

/// The processes of this PMIx namespace.
#[derive(Debug)]
pub struct PmixBootstrap {
    client: Pmix,
    size: usize,
    local: Vec<usize>,
    timeout_s: std::ffi::c_int,
    /// Allgathers so far (each uses fresh keys); PMIx calls are serialised.
    seq: Mutex<u64>,
}

/// Parse `PMIX_LOCAL_PEERS` ("0,1,3"): the ranks on this node, each below `size`.
fn local_peers(text: &str, size: usize) -> Result<Vec<usize>> {
    let mut v = text
        .split(',')
        .map(|r| {
            r.trim()
                .parse::<usize>()
                .ok()
                .filter(|&r| r < size)
                .ok_or_else(|| Error::Bootstrap {
                    method: "pmix",
                    message: format!(
                        "PMIX_LOCAL_PEERS is {text:?}: {r:?} is not a rank of this job of {size}"
                    ),
                })
        })
        .collect::<Result<Vec<_>>>()?;
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

impl PmixBootstrap {
    /// Connect to the PMIx server this process was started under; `timeout` bounds the connection and every
    /// collective call.
    pub fn new(timeout: Option<Duration>) -> Result<PmixBootstrap> {
        let client = Pmix::init(timeout)?;
        let timeout_s = seconds(timeout);
        let size = client.get_uint(pmix_sys::RANK_WILDCARD, "pmix.job.size", timeout_s)?;
        let size = usize::try_from(size)
            .ok()
            .filter(|&s| s > 0 && (client.rank() as usize) < s)
            .ok_or_else(|| Error::Bootstrap {
                method: "pmix",
                message: format!(
                    "PMIX_JOB_SIZE is {size} and this process's rank {}: not a job this PE belongs to",
                    client.rank()
                ),
            })?;
        let local = local_peers(
            &client.get_string(pmix_sys::RANK_WILDCARD, "pmix.lpeers", timeout_s)?,
            size,
        )?;
        Ok(PmixBootstrap {
            client,
            size,
            local,
            timeout_s,
            seq: Mutex::new(0),
        })
    }

    /// Publish `mine` under a fresh key (`PMIx_Put` + `PMIx_Commit`) and meet every process of the namespace in a
    /// fence that collects the published data. Returns the key.
    fn publish_and_fence(&self, mine: &[u8]) -> Result<String> {
        let mut seq = self.seq.lock().unwrap_or_else(|p| p.into_inner());
        let key = format!("xpushmem.ag.{}", *seq);
        *seq += 1;
        self.client.put(&key, mine)?;
        self.client.commit()?;
        self.client.fence()?;
        Ok(key)
    }
}

impl Bootstrap for PmixBootstrap {
    fn name(&self) -> &'static str {
        "pmix"
    }
    fn rank(&self) -> usize {
        self.client.rank() as usize
    }
    fn size(&self) -> usize {
        self.size
    }
    fn local_ranks(&self) -> Option<Vec<usize>> {
        Some(self.local.clone())
    }
    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        let key = self.publish_and_fence(mine)?;
        (0..self.size)
            .map(|r| {
                if r == self.rank() {
                    Ok(mine.to_vec())
                } else {
                    self.client.get_bytes(r as u32, &key, self.timeout_s)
                }
            })
            .collect()
    }
    fn barrier(&self) -> Result<()> {
        // A collecting fence over a key of its own (empty): Slurm's fence without data collection (its tree
        // collective, `mpi/pmix_v4` of Slurm 22.05 with libpmix 4.2) was seen to release a node's processes once
        // they alone had arrived, before the other node's (see the module's text).
        self.publish_and_fence(&[]).map(|_| ())
    }
    fn finalize(&self) -> Result<()> {
        let _g = self.seq.lock().unwrap_or_else(|p| p.into_inner());
        self.client.finalize()
    }
}

#[cfg(test)]
mod tests {
    use super::local_peers;

    #[test]
    fn local_peers_are_parsed_sorted_and_checked() {
        assert_eq!(local_peers("3,0, 1", 4).unwrap(), vec![0, 1, 3]);
        assert_eq!(local_peers("2", 3).unwrap(), vec![2]);
        let e = local_peers("0,4", 4).unwrap_err().to_string();
        assert!(e.contains("PMIX_LOCAL_PEERS") && e.contains("\"4\""), "{e}");
        assert!(local_peers("0,x", 4).is_err());
    }
}
