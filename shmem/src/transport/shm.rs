//! Same-node transport over memfd-backed heaps mapped into every PE of the node.
//!
//! Life of a heap: [`Arena::create`] makes a sparse memfd of the heap size (pages are allocated on first touch, so
//! a 1 GiB heap costs nothing until used); [`exchange_fds`] hands every PE of the node every peer's fd over an
//! abstract Unix socket (no file in `/dev/shm` or anywhere else); [`Mapping::map`] maps each with `MAP_SHARED`.
//! Dropping a mapping unmaps it; when the last process unmaps a heap the kernel frees it, whatever way the job ends.

use super::AmoOp;
use crate::error::{Error, Result};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::mm::{MapFlags, ProtFlags};
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketAddrUnix, SocketType,
};
use std::io::IoSlice;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn os(call: &'static str, e: rustix::io::Errno) -> Error {
    Error::os(call, std::io::Error::from(e))
}

/// One PE's heap memory: a memfd of the heap size.
#[derive(Debug)]
pub struct Arena {
    fd: OwnedFd,
    size: usize,
}

impl Arena {
    /// Create a sparse memfd of `size` bytes.
    pub fn create(size: usize) -> Result<Arena> {
        let fd = rustix::fs::memfd_create(
            "xpushmem-heap",
            rustix::fs::MemfdFlags::CLOEXEC | rustix::fs::MemfdFlags::ALLOW_SEALING,
        )
        .map_err(|e| os("memfd_create", e))?;
        rustix::fs::ftruncate(&fd, size as u64).map_err(|e| os("ftruncate(memfd)", e))?;
        // Growing or shrinking a mapped heap would fault peers; seal the size.
        let _ = rustix::fs::fcntl_add_seals(
            &fd,
            rustix::fs::SealFlags::GROW | rustix::fs::SealFlags::SHRINK,
        );
        Ok(Arena { fd, size })
    }

    /// Adopt a heap fd received from a peer.
    pub fn from_fd(fd: OwnedFd) -> Result<Arena> {
        let st = rustix::fs::fstat(&fd).map_err(|e| os("fstat(peer heap)", e))?;
        Ok(Arena {
            fd,
            size: st.st_size as usize,
        })
    }

    /// Size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The memfd.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A shared, read-write mapping of an [`Arena`].
#[derive(Debug)]
pub struct Mapping {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; concurrent access is governed by the SHMEM memory model (atomics for
// synchronisation, puts/gets as byte copies), and the pointer stays valid until Drop unmaps it.
unsafe impl Send for Mapping {}
// SAFETY: as above; no interior state besides the immutable (base, len) pair.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Map `len` bytes of the arena from byte `offset` (a multiple of the page size), shared and read-write.
    pub fn map(arena: &Arena, offset: usize, len: usize) -> Result<Mapping> {
        if offset % 4096 != 0 || offset.checked_add(len).is_none_or(|e| e > arena.size) || len == 0
        {
            return Err(Error::Transport {
                transport: "shm",
                message: format!("mapping [{offset}, +{len}) of a {}-byte heap", arena.size),
            });
        }
        // SAFETY: a fresh mapping chosen by the kernel (null hint) aliases no Rust object; the fd is a memfd whose
        // size is sealed and covers [offset, offset + len) (checked), so every byte of the mapping is backed.
        let base = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED | MapFlags::NORESERVE,
                arena.fd(),
                offset as u64,
            )
        }
        .map_err(|e| os("mmap(heap)", e))?;
        Ok(Mapping {
            base: base.cast(),
            len,
        })
    }

    /// Start address of the mapping.
    pub fn base(&self) -> *mut u8 {
        self.base
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mapping is empty (never, for a heap).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn check(&self, off: usize, len: usize, align: usize) -> Result<()> {
        super::check_access("shm", "access", off, len, align, self.len)
    }

    /// Copy `src` into the mapping at `off`.
    pub fn write(&self, off: usize, src: &[u8]) -> Result<()> {
        self.check(off, src.len(), 1)?;
        // SAFETY: [off, off+len) lies inside the mapping (checked); `src` is a distinct Rust slice or another
        // part of shared memory, and `copy` tolerates overlap.
        unsafe { std::ptr::copy(src.as_ptr(), self.base.add(off), src.len()) };
        Ok(())
    }

    /// Copy from the mapping at `off` into `dst`.
    pub fn read(&self, off: usize, dst: &mut [u8]) -> Result<()> {
        self.check(off, dst.len(), 1)?;
        // SAFETY: [off, off+len) lies inside the mapping (checked); `dst` is an exclusive Rust slice.
        unsafe { std::ptr::copy(self.base.add(off), dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    /// Fill `len` bytes at `off` with `byte`.
    pub fn fill(&self, off: usize, len: usize, byte: u8) -> Result<()> {
        self.check(off, len, 1)?;
        // SAFETY: [off, off+len) lies inside the mapping (checked).
        unsafe { std::ptr::write_bytes(self.base.add(off), byte, len) };
        Ok(())
    }

    /// The 32-bit atomic word at `off` (4-byte aligned).
    pub fn atomic32(&self, off: usize) -> Result<&AtomicU32> {
        self.check(off, 4, 4)?;
        // SAFETY: in bounds and aligned (checked); the page is shared memory that lives as long as `self`, and
        // every concurrent access to a word used atomically is itself atomic (SHMEM's AMO rules).
        Ok(unsafe { AtomicU32::from_ptr(self.base.add(off).cast()) })
    }

    /// The 64-bit atomic word at `off` (8-byte aligned).
    pub fn atomic64(&self, off: usize) -> Result<&AtomicU64> {
        self.check(off, 8, 8)?;
        // SAFETY: as for `atomic32`, with 8-byte alignment checked.
        Ok(unsafe { AtomicU64::from_ptr(self.base.add(off).cast()) })
    }

    /// Apply an atomic operation to the `width`-byte word at `off`; returns the previous value (zero-extended).
    pub fn amo(&self, off: usize, width: usize, op: AmoOp, operand: u64) -> Result<u64> {
        const O: Ordering = Ordering::SeqCst;
        Ok(match width {
            4 => {
                let a = self.atomic32(off)?;
                let v = operand as u32;
                (match op {
                    AmoOp::Fetch => a.load(O),
                    AmoOp::Set => {
                        a.store(v, O);
                        0
                    }
                    AmoOp::Swap => a.swap(v, O),
                    AmoOp::CompareSwap { cond } => match a.compare_exchange(cond as u32, v, O, O) {
                        Ok(old) | Err(old) => old,
                    },
                    AmoOp::FetchAdd => a.fetch_add(v, O),
                    AmoOp::FetchAnd => a.fetch_and(v, O),
                    AmoOp::FetchOr => a.fetch_or(v, O),
                    AmoOp::FetchXor => a.fetch_xor(v, O),
                }) as u64
            }
            8 => {
                let a = self.atomic64(off)?;
                match op {
                    AmoOp::Fetch => a.load(O),
                    AmoOp::Set => {
                        a.store(operand, O);
                        0
                    }
                    AmoOp::Swap => a.swap(operand, O),
                    AmoOp::CompareSwap { cond } => match a.compare_exchange(cond, operand, O, O) {
                        Ok(old) | Err(old) => old,
                    },
                    AmoOp::FetchAdd => a.fetch_add(operand, O),
                    AmoOp::FetchAnd => a.fetch_and(operand, O),
                    AmoOp::FetchOr => a.fetch_or(operand, O),
                    AmoOp::FetchXor => a.fetch_xor(operand, O),
                }
            }
            w => {
                return Err(Error::Transport {
                    transport: "shm",
                    message: format!("atomic width {w} (must be 4 or 8)"),
                })
            }
        })
    }
}

impl super::Window for Mapping {
    fn write(&self, off: usize, src: &[u8]) -> Result<()> {
        Mapping::write(self, off, src)
    }
    fn read(&self, off: usize, dst: &mut [u8]) -> Result<()> {
        Mapping::read(self, off, dst)
    }
    fn fill(&self, off: usize, len: usize, byte: u8) -> Result<()> {
        Mapping::fill(self, off, len, byte)
    }
    fn len(&self) -> usize {
        self.len
    }
    fn atomic64(&self, off: usize) -> Option<&AtomicU64> {
        Mapping::atomic64(self, off).ok()
    }
    fn copy_from(
        &self,
        off: usize,
        src: &dyn super::Window,
        src_off: usize,
        len: usize,
    ) -> Result<()> {
        if !src.host_accessible() {
            let mut buf = vec![0u8; len];
            src.read(src_off, &mut buf)?;
            return self.write(off, &buf);
        }
        self.check(off, len, 1)?;
        super::check_access("shm", "source range", src_off, len, 1, src.len())?;
        // SAFETY: both ranges lie inside live host mappings of this process (checked against each window's
        // length); `copy` tolerates overlap (a PE copying within its own heap).
        unsafe { std::ptr::copy(src.base().add(src_off), self.base.add(off), len) };
        Ok(())
    }
    fn amo(&self, off: usize, width: usize, op: AmoOp, operand: u64) -> Result<u64> {
        Mapping::amo(self, off, width, op, operand)
    }
    fn base(&self) -> *mut u8 {
        self.base
    }
    fn host_accessible(&self) -> bool {
        true
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: (base, len) is exactly the region mmap returned; no reference into it outlives `self` because
        // every accessor borrows `self`.
        let _ = unsafe { rustix::mm::munmap(self.base.cast(), self.len) };
    }
}

/// Abstract-namespace socket name of a node's fd exchange: unique per job (cookie) and node (leader rank).
fn socket_name(cookie: u64, leader: usize) -> Vec<u8> {
    format!("xpushmem.{cookie:016x}.{leader}").into_bytes()
}

fn set_timeout(fd: BorrowedFd<'_>, timeout: Option<Duration>) -> Result<()> {
    for dir in [
        rustix::net::sockopt::Timeout::Recv,
        rustix::net::sockopt::Timeout::Send,
    ] {
        rustix::net::sockopt::set_socket_timeout(fd, dir, timeout)
            .map_err(|e| os("setsockopt(timeout)", e))?;
    }
    Ok(())
}

/// Listener half of the exchange, bound by the node leader before the others connect.
#[derive(Debug)]
pub struct FdListener {
    sock: OwnedFd,
}

impl FdListener {
    /// Bind the node's exchange socket (leader only). Call before the bootstrap barrier that lets peers connect.
    pub fn bind(cookie: u64, leader: usize) -> Result<FdListener> {
        let sock = rustix::net::socket_with(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            rustix::net::SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|e| os("socket(AF_UNIX)", e))?;
        let addr = SocketAddrUnix::new_abstract_name(&socket_name(cookie, leader))
            .map_err(|e| os("sockaddr_un", e))?;
        rustix::net::bind(&sock, &addr).map_err(|e| os("bind(fd exchange)", e))?;
        rustix::net::listen(&sock, 128).map_err(|e| os("listen(fd exchange)", e))?;
        Ok(FdListener { sock })
    }
}

const MAX_FDS_PER_MSG: usize = 200; // below the kernel's SCM_MAX_FD (253)

fn send_fds(sock: BorrowedFd<'_>, ranks: &[usize], fds: &[BorrowedFd<'_>]) -> Result<()> {
    let header: Vec<u8> = ranks
        .iter()
        .flat_map(|r| (*r as u64).to_le_bytes())
        .collect();
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS_PER_MSG))];
    let mut anc = SendAncillaryBuffer::new(&mut space);
    if !anc.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(Error::Transport {
            transport: "shm",
            message: "too many fds for one message".into(),
        });
    }
    rustix::net::sendmsg(
        sock,
        &[IoSlice::new(&header)],
        &mut anc,
        SendFlags::NOSIGNAL,
    )
    .map_err(|e| os("sendmsg(SCM_RIGHTS)", e))?;
    Ok(())
}

fn recv_fds(sock: BorrowedFd<'_>, out: &mut Vec<(usize, OwnedFd)>) -> Result<usize> {
    let mut header = vec![0u8; 8 * MAX_FDS_PER_MSG];
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS_PER_MSG))];
    let mut anc = RecvAncillaryBuffer::new(&mut space);
    let msg = rustix::net::recvmsg(
        sock,
        &mut [std::io::IoSliceMut::new(&mut header)],
        &mut anc,
        RecvFlags::CMSG_CLOEXEC,
    )
    .map_err(|e| match e {
        rustix::io::Errno::AGAIN => Error::Transport {
            transport: "shm",
            message: "timed out waiting for a node peer's heap fd (XPUSHMEM_TIMEOUT_MS)".into(),
        },
        e => os("recvmsg(SCM_RIGHTS)", e),
    })?;
    if msg.bytes == 0 {
        return Err(Error::Transport {
            transport: "shm",
            message: "node peer closed the fd exchange before sending its heap".into(),
        });
    }
    let ranks: Vec<usize> = header[..msg.bytes]
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()) as usize)
        .collect();
    let mut fds = Vec::new();
    for m in anc.drain() {
        if let RecvAncillaryMessage::ScmRights(it) = m {
            fds.extend(it);
        }
    }
    if fds.len() != ranks.len() {
        return Err(Error::Transport {
            transport: "shm",
            message: format!(
                "fd exchange message names {} PEs but carries {} fds",
                ranks.len(),
                fds.len()
            ),
        });
    }
    let n = fds.len();
    out.extend(ranks.into_iter().zip(fds));
    Ok(n)
}

/// Exchange heap fds among the PEs of one node. `local` lists the node's PEs (ascending, `local[0]` is the leader,
/// which must have bound `listener` before the others call this). Returns one fd per node PE, in `local` order
/// (this PE's own slot holds a duplicate of `mine`).
pub fn exchange_fds(
    cookie: u64,
    local: &[usize],
    me: usize,
    mine: BorrowedFd<'_>,
    listener: Option<FdListener>,
    timeout: Option<Duration>,
) -> Result<Vec<OwnedFd>> {
    let leader = local[0];
    let mut got: Vec<(usize, OwnedFd)> = Vec::with_capacity(local.len());
    if me == leader {
        let listener =
            listener.ok_or_else(|| Error::State("node leader has no fd listener".into()))?;
        set_timeout(listener.sock.as_fd(), timeout)?;
        got.push((me, rustix::io::dup(mine).map_err(|e| os("dup", e))?));
        let mut conns = Vec::new();
        for _ in 1..local.len() {
            let c = rustix::net::accept_with(&listener.sock, rustix::net::SocketFlags::CLOEXEC).map_err(|e| {
                if e == rustix::io::Errno::AGAIN {
                    Error::Transport {
                        transport: "shm",
                        message: format!(
                            "timed out waiting for node peers to connect for the heap exchange ({} of {} did)",
                            conns.len(),
                            local.len() - 1
                        ),
                    }
                } else {
                    os("accept(fd exchange)", e)
                }
            })?;
            set_timeout(c.as_fd(), timeout)?;
            recv_fds(c.as_fd(), &mut got)?;
            conns.push(c);
        }
        got.sort_by_key(|(r, _)| *r);
        let ranks: Vec<usize> = got.iter().map(|(r, _)| *r).collect();
        if ranks != local {
            return Err(Error::Transport {
                transport: "shm",
                message: format!("fd exchange got PEs {ranks:?}, expected {local:?}"),
            });
        }
        for c in &conns {
            for chunk in got.chunks(MAX_FDS_PER_MSG) {
                let r: Vec<usize> = chunk.iter().map(|(r, _)| *r).collect();
                let f: Vec<BorrowedFd<'_>> = chunk.iter().map(|(_, f)| f.as_fd()).collect();
                send_fds(c.as_fd(), &r, &f)?;
            }
        }
    } else {
        let sock = rustix::net::socket_with(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            rustix::net::SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|e| os("socket(AF_UNIX)", e))?;
        set_timeout(sock.as_fd(), timeout)?;
        let addr = SocketAddrUnix::new_abstract_name(&socket_name(cookie, leader))
            .map_err(|e| os("sockaddr_un", e))?;
        let start = Instant::now();
        loop {
            match rustix::net::connect(&sock, &addr) {
                Ok(()) => break,
                Err(e)
                    if timeout.is_none_or(|t| start.elapsed() < t)
                        && e == rustix::io::Errno::CONNREFUSED =>
                {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(e) => return Err(os("connect(fd exchange)", e)),
            }
        }
        send_fds(sock.as_fd(), &[me], &[mine])?;
        while got.len() < local.len() {
            recv_fds(sock.as_fd(), &mut got)?;
        }
        let ranks: Vec<usize> = got.iter().map(|(r, _)| *r).collect();
        if ranks != local {
            return Err(Error::Transport {
                transport: "shm",
                message: format!("fd exchange got PEs {ranks:?}, expected {local:?}"),
            });
        }
    }
    Ok(got.into_iter().map(|(_, f)| f).collect())
}

/// Watches node peers' processes through pidfds: a peer that exits is seen at once, zombie or reaped.
#[derive(Debug, Default)]
pub struct PeerWatch {
    peers: Vec<(usize, OwnedFd)>,
}

impl PeerWatch {
    /// Watch the given (PE, pid) pairs. PEs whose pidfd cannot be opened (already gone) are reported by `check`.
    pub fn new(peers: &[(usize, u32)]) -> (PeerWatch, Vec<usize>) {
        let mut gone = Vec::new();
        let mut w = PeerWatch::default();
        for &(pe, pid) in peers {
            match rustix::process::Pid::from_raw(pid as i32)
                .map(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()))
            {
                Some(Ok(fd)) => w.peers.push((pe, fd)),
                _ => gone.push(pe),
            }
        }
        (w, gone)
    }

    /// The watched PEs whose processes have exited, ascending. Never blocks.
    pub fn exited(&self) -> Vec<usize> {
        if self.peers.is_empty() {
            return Vec::new();
        }
        let mut fds: Vec<rustix::event::PollFd<'_>> = self
            .peers
            .iter()
            .map(|(_, fd)| rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN))
            .collect();
        let zero = rustix::time::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        match rustix::event::poll(&mut fds, Some(&zero)) {
            Ok(0) | Err(_) => Vec::new(),
            Ok(_) => fds
                .iter()
                .zip(&self.peers)
                .filter(|(p, _)| !p.revents().is_empty())
                .map(|(_, (pe, _))| *pe)
                .collect(),
        }
    }
}

/// The bytes of a slice of plain-data elements.
pub fn bytes_of<T: crate::types::Symmetric>(s: &[T]) -> &[u8] {
    // SAFETY: `Symmetric` is sealed to primitive integer and float types: no padding, no invalid bit patterns,
    // and u8 has alignment 1; the length covers exactly the slice's memory.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), std::mem::size_of_val(s)) }
}

/// The bytes of a mutable slice of plain-data elements (any bytes written are valid elements).
pub fn bytes_of_mut<T: crate::types::Symmetric>(s: &mut [T]) -> &mut [u8] {
    // SAFETY: as in `bytes_of`; additionally every bit pattern is a valid `T`, so arbitrary writes are sound.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast(), std::mem::size_of_val(s)) }
}

/// Borrow a raw descriptor number that some owner (here: a Level Zero driver's IPC handle) keeps open for the
/// life of the process's heap.
pub fn borrow_raw_fd(fd: i32) -> Result<BorrowedFd<'static>> {
    if fd < 0
        || rustix::io::fcntl_getfd(
            // SAFETY: only used to query flags; an invalid number makes fcntl fail with EBADF, handled below.
            unsafe { BorrowedFd::borrow_raw(fd) },
        )
        .is_err()
    {
        return Err(Error::Transport {
            transport: "shm",
            message: format!("descriptor {fd} from the device driver is not open"),
        });
    }
    // SAFETY: the descriptor is open (checked) and owned by the driver's allocation, which outlives the heap set-up
    // that borrows it.
    Ok(unsafe { BorrowedFd::borrow_raw(fd) })
}
