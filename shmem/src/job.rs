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
    /// The CPUs it may run on ([`cpu_record`]: a bitmap, bit `i % 8` of byte `i / 8` for CPU `i`; empty: unknown).
    pub cpus: Vec<u8>,
    /// Its CPU quota where that is below its CPU set ([`cpu_record`]; `u64::MAX`: none).
    pub cpu_limit: u64,
}

/// This process's CPUs for its [`PeRecord`]: its affinity as a bitmap (empty when it cannot be read), and
/// `available_parallelism` where that is smaller than the set (a cgroup quota; `u64::MAX` otherwise). A PE that a
/// launcher binds to one core (`mpirun --bind-to core`, `srun --cpu-bind=cores`) sees one CPU; the machine's PEs
/// together see the union ([`JobLayout::machine_cpus`]).
pub(crate) fn cpu_record() -> (Vec<u8>, u64) {
    let set = rustix::thread::sched_getaffinity(None).ok();
    let mut bits = vec![0u8; rustix::thread::CpuSet::MAX_CPU.div_ceil(8)];
    let mut count = 0u64;
    if let Some(set) = &set {
        for cpu in (0..rustix::thread::CpuSet::MAX_CPU).filter(|&c| set.is_set(c)) {
            bits[cpu / 8] |= 1 << (cpu % 8);
            count += 1;
        }
    }
    while bits.last() == Some(&0) {
        bits.pop();
    }
    let par = std::thread::available_parallelism().map_or(1, |c| c.get() as u64);
    let limit = if count == 0 || par < count {
        par
    } else {
        u64::MAX
    };
    (bits, limit)
}

/// The CPUs the PEs of `records` may run on together: the union of their CPU sets, within the smallest quota any
/// of them reports (at least 1).
fn cpus_of<'a>(records: impl Iterator<Item = &'a PeRecord>) -> usize {
    let (mut union, mut limit) = (Vec::<u8>::new(), u64::MAX);
    for r in records {
        if union.len() < r.cpus.len() {
            union.resize(r.cpus.len(), 0);
        }
        for (u, b) in union.iter_mut().zip(&r.cpus) {
            *u |= b;
        }
        limit = limit.min(r.cpu_limit);
    }
    let set = union.iter().map(|b| b.count_ones() as u64).sum::<u64>();
    let cpus = if set == 0 { limit } else { set.min(limit) };
    usize::try_from(cpus).unwrap_or(usize::MAX).max(1)
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
    /// CPUs those PEs may run on together (the union of their CPU sets, within their quotas).
    pub machine_cpus: usize,
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
    let machine_cpus = cpus_of(records.iter().filter(|r| r.machine == mine.machine));
    Ok(JobLayout {
        nodes: Nodes { node_of, hosts },
        pids,
        cookie: records.first().map_or(0, |r| r.cookie),
        machine_pes,
        machine_cpus,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(machine: &str, cpus: &[usize], cpu_limit: u64) -> PeRecord {
        let mut bits = Vec::new();
        for &c in cpus {
            if bits.len() <= c / 8 {
                bits.resize(c / 8 + 1, 0);
            }
            bits[c / 8] |= 1u8 << (c % 8);
        }
        PeRecord {
            host: machine.into(),
            machine: machine.as_bytes().to_vec(),
            pid: 1,
            heap_bytes: 1 << 20,
            heap_max: 0,
            as_limit: u64::MAX,
            cookie: 7,
            cpus: bits,
            cpu_limit,
        }
    }

    fn cpus(records: &[PeRecord], me: usize) -> (usize, usize) {
        let l = job_layout(records, me, (1 << 20, 0)).unwrap();
        (l.machine_pes, l.machine_cpus)
    }

    #[test]
    fn the_machine_cpus_are_the_union_of_its_pes_sets() {
        let m = u64::MAX;
        // Four PEs bound one per core (as mpirun --bind-to core does): 4 CPUs, not 1.
        let bound: Vec<_> = (0..4).map(|c| rec("a", &[c], m)).collect();
        assert_eq!(cpus(&bound, 2), (4, 4));
        // Two PEs bound to the same core: 1 CPU for 2 PEs.
        assert_eq!(cpus(&[rec("a", &[3], m), rec("a", &[3], m)], 0), (2, 1));
        // Unbound PEs share one set; CPUs past the first byte and sets of different lengths count.
        let wide: Vec<usize> = (0..20).collect();
        assert_eq!(
            cpus(&[rec("a", &wide, m), rec("a", &[0, 9], m)], 1),
            (2, 20)
        );
        assert_eq!(cpus(&[rec("a", &[1], m), rec("a", &[17], m)], 1), (2, 2));
        // Another machine's PEs and CPUs do not count.
        assert_eq!(
            cpus(
                &[rec("a", &[0], m), rec("b", &[1], m), rec("a", &[2], m)],
                0
            ),
            (2, 2)
        );
        // A quota below the set bounds it; an unknown set falls back to the quota.
        assert_eq!(cpus(&[rec("a", &wide, 3), rec("a", &wide, m)], 0), (2, 3));
        assert_eq!(cpus(&[rec("a", &[], 6), rec("a", &[], 5)], 0), (2, 5));
    }

    #[test]
    fn this_process_has_a_cpu_record() {
        let (bits, limit) = cpu_record();
        let set: u64 = bits.iter().map(|b| b.count_ones() as u64).sum();
        let par = std::thread::available_parallelism().unwrap().get() as u64;
        // The set is this process's affinity; the quota shows only where it is below the set.
        let aff = rustix::thread::sched_getaffinity(None).unwrap().count() as u64;
        assert_eq!(set, aff);
        assert_eq!(limit, if par < aff { par } else { u64::MAX });
    }
}
