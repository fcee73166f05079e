//! Bootstraps: how PEs find each other and exchange the few bytes needed to set up transports.
//!
//! One trait, [`Bootstrap`], three methods:
//! - [`uid`]: NVSHMEM unique-ID style. One process creates a [`UniqueId`] (a TCP rendezvous it serves); every PE
//!   connects with its rank and the job size. `xpushmem-run` serves the rendezvous itself and passes the ID in
//!   `XPUSHMEM_BOOTSTRAP_UID`; frameworks (PyTorch) broadcast it through their own store.
//! - `mpi` (cargo feature `mpi`): the job's MPI communicator, for `mpirun`/`srun` launches.
//! - `pmix` (built when PMIx's headers were found): the job's PMIx namespace, for launches by a PMIx server
//!   (`srun --mpi=pmix`, `mpirun`) without MPI.
//! - [`single`]: a job of one PE, no communication.
//!
//! [`launcher`] is the PE's side of `xpushmem-run` (its environment, report pipe and death tie).

use crate::error::Result;

pub mod launcher;
#[cfg(feature = "mpi")]
pub mod mpi;
#[cfg(xpushmem_pmix)]
pub mod pmix;
pub mod single;
pub mod uid;

pub use uid::UniqueId;

/// The rendezvous a runtime is built on. Every method except [`Bootstrap::check_alive`] is collective.
pub trait Bootstrap: Send + Sync + std::fmt::Debug {
    /// Short name (`uid`, `mpi`, `single`) for logs and errors.
    fn name(&self) -> &'static str;
    /// This PE's number.
    fn rank(&self) -> usize;
    /// Number of PEs.
    fn size(&self) -> usize;
    /// Every PE contributes `mine`; every PE receives all contributions, indexed by rank.
    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>>;
    /// Wait until every PE has arrived.
    fn barrier(&self) -> Result<()> {
        self.allgather(&[]).map(|_| ())
    }
    /// Non-blocking: an error when the bootstrap knows that a PE was lost.
    fn check_alive(&self) -> Result<()> {
        Ok(())
    }
    /// The local IP address this PE's bootstrap traffic uses, where it has one (the unique-ID rendezvous: its
    /// connection's local address), so transports can listen on the same network; `None`: no such address (MPI,
    /// a single PE).
    #[cfg_attr(not(xpushmem_fabric), allow(dead_code))]
    fn local_addr(&self) -> Option<std::net::IpAddr> {
        None
    }
    /// The ranks on this PE's node (itself included, ascending), where the launcher says (PMIx's local peers);
    /// `None`: this bootstrap does not know, and the runtime's own node detection decides.
    fn local_ranks(&self) -> Option<Vec<usize>> {
        None
    }
    /// Leave the job (after the runtime's final barrier). Called once.
    fn finalize(&self) -> Result<()> {
        Ok(())
    }
}

/// Little-endian encoder for the small records PEs exchange during setup.
#[derive(Debug, Default)]
pub(crate) struct Enc(pub Vec<u8>);

impl Enc {
    pub fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn bytes(self, b: &[u8]) -> Self {
        let mut s = self.u64(b.len() as u64);
        s.0.extend_from_slice(b);
        s
    }
}

/// Decoder matching [`Enc`]; returns `None` on truncated input.
#[derive(Debug)]
pub(crate) struct Dec<'a>(pub &'a [u8]);

impl<'a> Dec<'a> {
    pub fn u64(&mut self) -> Option<u64> {
        let (h, t) = self.0.split_at_checked(8)?;
        self.0 = t;
        Some(u64::from_le_bytes(h.try_into().ok()?))
    }
    pub fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.u64()?).ok()?;
        let (h, t) = self.0.split_at_checked(n)?;
        self.0 = t;
        Some(h)
    }
}
