//! The job's layout (a leaf: imports only `error`): which node and machine every PE runs on, its process id, the
//! job's cookie, and the keys that say which PEs share a node or a machine. The records come from one bootstrap
//! allgather made by the facade (`init.rs`); this module only builds and checks the layout from them.

use crate::error::{Error, Result};

/// This PE's node: `XPUSHMEM_NODE_ID` when set, else the host name, boot id and network namespace (the shm
/// transport meets its node peers on abstract Unix sockets, which a network namespace does not share: PEs of one
/// host in different namespaces, e.g. containers, reach each other through the fabric).
pub(crate) fn host_key(node_id: Option<&str>) -> String {
    if let Some(id) = node_id.filter(|s| !s.is_empty()) {
        return format!("{id}/node-id");
    }
    let host = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    let net = std::fs::read_link("/proc/self/ns/net")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{host}/{}/{net}", machine_key())
}

/// The machine this process runs on: the kernel's boot id (shared by the network namespaces of one host and by
/// PEs that `XPUSHMEM_NODE_ID` places on different nodes), else the host name.
pub(crate) fn machine_key() -> String {
    match std::fs::read_to_string("/proc/sys/kernel/random/boot_id") {
        Ok(id) if !id.trim().is_empty() => id.trim().to_string(),
        _ => rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned(),
    }
}

/// What one PE tells the others at start-up (exchanged in one allgather by `init.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PeRecord {
    /// Its node ([`host_key`]).
    pub host: String,
    /// Its machine ([`machine_key`]).
    pub machine: Vec<u8>,
    /// Its process id.
    pub pid: u32,
    /// Its symmetric heap size (`XPUSHMEM_SYMMETRIC_SIZE`), which every PE must share.
    pub heap_bytes: usize,
    /// Its heap's maximum (`XPUSHMEM_SYMMETRIC_MAX`; 0 when unset: the default, the same on every PE).
    pub heap_max: usize,
    /// Its address-space limit (`RLIMIT_AS`; `u64::MAX`: none), which bounds the default heap reserve.
    pub as_limit: u64,
    /// Its random cookie (PE 0's becomes the job's).
    pub cookie: u64,
}

/// Who is where: every PE's node and process id, the job's cookie (PE 0's), and how many PEs share this PE's
/// machine (they share its CPUs even when they are on different nodes of the job).
#[derive(Debug, Clone)]
pub(crate) struct JobLayout {
    /// PEs over nodes.
    pub nodes: Nodes,
    /// Every PE's process id.
    pub pids: Vec<u32>,
    /// The job's cookie (PE 0's).
    pub cookie: u64,
    /// PEs on this PE's machine, this one included.
    pub machine_pes: usize,
    /// The smallest address-space limit of the job's PEs (bytes; `usize::MAX`: none).
    pub as_limit: usize,
}

/// The layout from every PE's record (indexed by PE); an error when the PEs disagree on the heap size.
pub(crate) fn job_layout(
    records: &[PeRecord],
    me: usize,
    (heap_bytes, heap_max): (usize, usize),
) -> Result<JobLayout> {
    let mut hosts: Vec<String> = Vec::new();
    let mut node_of = Vec::with_capacity(records.len());
    let mut pids = Vec::with_capacity(records.len());
    for (pe, rec) in records.iter().enumerate() {
        for (call, theirs, ours) in [
            ("init (XPUSHMEM_SYMMETRIC_SIZE)", rec.heap_bytes, heap_bytes),
            ("init (XPUSHMEM_SYMMETRIC_MAX)", rec.heap_max, heap_max),
        ] {
            if theirs != ours {
                return Err(Error::Mismatch {
                    call,
                    pe,
                    theirs: format!("{theirs} bytes"),
                    reference_pe: me,
                    ours: format!("{ours} bytes"),
                });
            }
        }
        let node = hosts
            .iter()
            .position(|h| *h == rec.host)
            .unwrap_or_else(|| {
                hosts.push(rec.host.clone());
                hosts.len() - 1
            });
        node_of.push(node);
        pids.push(rec.pid);
    }
    let mine = records.get(me).ok_or_else(|| {
        Error::invalid(
            "me",
            me,
            format!("not a PE of this job of {} PEs", records.len()),
        )
    })?;
    let machine_pes = records.iter().filter(|r| r.machine == mine.machine).count();
    Ok(JobLayout {
        nodes: Nodes { node_of, hosts },
        pids,
        cookie: records.first().map_or(0, |r| r.cookie),
        machine_pes,
        as_limit: records
            .iter()
            .map(|r| usize::try_from(r.as_limit).unwrap_or(usize::MAX))
            .min()
            .unwrap_or(usize::MAX),
    })
}

/// The layout of PEs over nodes.
#[derive(Debug, Clone)]
pub struct Nodes {
    node_of: Vec<usize>,
    hosts: Vec<String>,
}

impl Nodes {
    /// Node index of each PE.
    pub fn node_of(&self, pe: usize) -> usize {
        self.node_of[pe]
    }
    /// Number of nodes.
    pub fn count(&self) -> usize {
        self.hosts.len()
    }
    /// PEs on node `node`, ascending.
    pub fn pes_on(&self, node: usize) -> Vec<usize> {
        (0..self.node_of.len())
            .filter(|&p| self.node_of[p] == node)
            .collect()
    }
    /// How many PEs node `node` holds ([`Nodes::pes_on`]'s length, without building the list).
    pub fn pe_count(&self, node: usize) -> usize {
        self.node_of.iter().filter(|&&n| n == node).count()
    }
    /// Host name of node `node`.
    pub fn host(&self, node: usize) -> &str {
        self.hosts[node].split('/').next().unwrap_or("")
    }
}
