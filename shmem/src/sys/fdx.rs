//! The node's fd exchange: how the PEs of one node hand each other their heaps' file descriptors (SCM_RIGHTS over
//! an abstract Unix socket named by the job and the node leader).
//!
//! Abstract socket names are visible to every user (`/proc/net/unix`) and carry no permissions, so every end is
//! authenticated by the kernel's record of who connected (`SO_PEERCRED`): the leader accepts only processes of
//! this uid whose pid the bootstrap reported for a PE of this node (each once), and a PE sends its heap only to a
//! socket owned by the leader's pid under this uid. A connection that fails the check is logged (at most a line a
//! second, with the count of the others) and dropped, and the exchange goes on; a socket squatted by another
//! process is an error naming that process, with nothing sent to it. The name is a keyed hash of the job's cookie
//! (a secret of the bootstrap), so seeing one exchange's name tells nothing of the cookie or of the name of
//! another exchange of the job ([`exchange_cookie`]): an outsider cannot bind a name before the job does. PEs in
//! another pid namespace (pid 0 in `SO_PEERCRED`) cannot join: run a job's PEs in one.

use crate::error::{Error, Result, Throttle};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketAddrUnix, SocketType,
};
use std::io::IoSlice;
use std::mem::MaybeUninit;
use std::time::{Duration, Instant};

fn os(call: &'static str, e: rustix::io::Errno) -> Error {
    Error::os(call, std::io::Error::from(e))
}

/// HMAC-SHA256 under the job's cookie of a domain label and a number.
fn keyed(cookie: u64, label: &[u8], n: u64) -> [u8; 32] {
    use hmac::Mac;
    let mut m = <hmac::Hmac<sha2::Sha256> as Mac>::new_from_slice(&cookie.to_le_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    m.update(label);
    m.update(&n.to_le_bytes());
    m.finalize().into_bytes().into()
}

/// The cookie of another exchange of the same job, e.g. the device heaps' (`domain` `"device"`): a keyed hash of
/// the job's cookie with the domain's label, so the names of two exchanges cannot be told from one another.
pub fn exchange_cookie(cookie: u64, domain: &str) -> u64 {
    let h = keyed(
        cookie,
        format!("xpushmem-fdx-domain:{domain}").as_bytes(),
        0,
    );
    u64::from_le_bytes(h[..8].try_into().unwrap_or_default())
}

/// Abstract-namespace socket name of a node's fd exchange: unique per job (cookie) and node (leader rank), a keyed
/// hash that does not show the cookie.
fn socket_name(cookie: u64, leader: usize) -> Vec<u8> {
    let h = keyed(cookie, b"xpushmem-fdx-name", leader as u64);
    let hex: String = h[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("xpushmem.{hex}").into_bytes()
}

/// Who holds the abstract Unix socket `name`, as far as this process can see: the socket's inode from
/// `/proc/net/unix`, then every process with `socket:[inode]` among its `/proc/PID/fd`, with its uid and command.
/// Processes of other users are visible only to root; otherwise the text says it could not identify them.
pub(crate) fn holder_of(name: &[u8]) -> String {
    let shown = format!("@{}", String::from_utf8_lossy(name));
    let Ok(table) = std::fs::read_to_string("/proc/net/unix") else {
        return "a process that could not be identified (/proc/net/unix is not readable)".into();
    };
    // Columns: Num RefCount Protocol Flags Type St Inode Path.
    let inodes: Vec<String> = table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 8 && f[7] == shown).then(|| f[6].to_string())
        })
        .collect();
    if inodes.is_empty() {
        return format!(
            "a process that could not be identified ({shown} is not in this network namespace's /proc/net/unix)"
        );
    }
    let links: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    let mut holders = Vec::new();
    for p in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|f| {
            std::fs::read_link(f.path())
                .is_ok_and(|l| links.iter().any(|k| l.as_os_str() == k.as_str()))
        });
        if holds {
            let status = std::fs::read_to_string(p.path().join("status")).unwrap_or_default();
            let field = |k: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(k))
                    .and_then(|v| v.split_whitespace().next())
                    .unwrap_or("?")
                    .to_string()
            };
            holders.push(format!(
                "pid {pid} (uid {}, {})",
                field("Uid:"),
                field("Name:")
            ));
        }
    }
    if holders.is_empty() {
        format!(
            "a process that could not be identified (socket inode {}: no process this user can inspect holds it; \
             another uid?)",
            inodes.join(", ")
        )
    } else {
        holders.join(", ")
    }
}

/// Refused connections: a flood of them logs a line a second.
static REFUSED: Throttle = Throttle::new();

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
        let name = socket_name(cookie, leader);
        let addr = SocketAddrUnix::new_abstract_name(&name).map_err(|e| os("sockaddr_un", e))?;
        rustix::net::bind(&sock, &addr).map_err(|e| match e {
            rustix::io::Errno::ADDRINUSE => Error::os(
                "bind(fd exchange)",
                format!(
                    "{}: the node's exchange socket @{} is held by {}, not by this job",
                    std::io::Error::from(e),
                    String::from_utf8_lossy(&name),
                    holder_of(&name)
                ),
            ),
            e => os("bind(fd exchange)", e),
        })?;
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
    loop {
        match rustix::net::sendmsg(
            sock,
            &[IoSlice::new(&header)],
            &mut anc,
            SendFlags::NOSIGNAL,
        ) {
            Err(rustix::io::Errno::INTR) => continue,
            r => break r,
        }
    }
    .map_err(|e| os("sendmsg(SCM_RIGHTS)", e))?;
    Ok(())
}

fn recv_fds(sock: BorrowedFd<'_>, out: &mut Vec<(usize, OwnedFd)>) -> Result<usize> {
    let mut header = vec![0u8; 8 * MAX_FDS_PER_MSG];
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS_PER_MSG))];
    let mut anc = RecvAncillaryBuffer::new(&mut space);
    // A socket with a receive timeout answers EINTR after a stop and continue (SIGSTOP, a debugger): wait again.
    let msg = loop {
        match rustix::net::recvmsg(
            sock,
            &mut [std::io::IoSliceMut::new(&mut header)],
            &mut anc,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Err(rustix::io::Errno::INTR) => continue,
            r => break r,
        }
    }
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

/// The pid and uid the kernel recorded for the other end of a connected Unix socket (`SO_PEERCRED`); pid 0 when
/// the peer is in a pid namespace this process cannot see.
fn peer_cred(sock: BorrowedFd<'_>) -> Result<(i32, u32)> {
    let c = rustix::net::sockopt::socket_peercred(sock)
        .map_err(|e| os("getsockopt(SO_PEERCRED)", e))?;
    Ok((rustix::process::Pid::as_raw(Some(c.pid)), c.uid.as_raw()))
}

fn exchange_error(message: String) -> Error {
    Error::Transport {
        transport: "shm",
        message,
    }
}

/// Exchange heap fds among the PEs of one node. `local` lists the node's PEs (ascending, `local[0]` is the leader,
/// which must have bound `listener` before the others call this); `pids[pe]` is each PE's process id as the
/// bootstrap reported it. Returns one fd per node PE, in `local` order (this PE's own slot holds a duplicate of
/// `mine`).
///
/// Every end is authenticated with `SO_PEERCRED`: the leader accepts only connections from processes of this
/// uid whose pid is one of the node's PEs (each once), and a PE sends its fd only to a socket whose owner is the
/// leader's pid under this uid. A connection that fails the check is logged and dropped; the exchange goes on.
pub fn exchange_fds(
    cookie: u64,
    local: &[usize],
    pids: &[u32],
    me: usize,
    mine: BorrowedFd<'_>,
    listener: Option<FdListener>,
    timeout: Option<Duration>,
) -> Result<Vec<OwnedFd>> {
    let leader = local[0];
    let pid_of = |pe: usize| pids.get(pe).map_or(-1, |&p| p as i32);
    let my_uid = rustix::process::geteuid().as_raw();
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut got: Vec<(usize, OwnedFd)> = Vec::with_capacity(local.len());
    if me == leader {
        let listener =
            listener.ok_or_else(|| Error::State("node leader has no fd listener".into()))?;
        got.push((me, rustix::io::dup(mine).map_err(|e| os("dup", e))?));
        let mut waiting: Vec<usize> = local.iter().copied().filter(|&p| p != me).collect();
        let mut conns = Vec::new();
        while !waiting.is_empty() {
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let timed_out = || {
                exchange_error(format!(
                    "timed out waiting for node peers to connect for the heap exchange ({} of {} did; missing PEs {waiting:?})",
                    conns.len(),
                    local.len() - 1
                ))
            };
            if left == Some(Duration::ZERO) {
                return Err(timed_out());
            }
            set_timeout(listener.sock.as_fd(), left)?;
            let c =
                match rustix::net::accept_with(&listener.sock, rustix::net::SocketFlags::CLOEXEC) {
                    Ok(c) => c,
                    Err(rustix::io::Errno::AGAIN) => return Err(timed_out()),
                    Err(rustix::io::Errno::INTR | rustix::io::Errno::CONNABORTED) => continue,
                    Err(e) => return Err(os("accept(fd exchange)", e)),
                };
            let (pid, uid) = peer_cred(c.as_fd())?;
            let Some(i) = waiting
                .iter()
                .position(|&p| pid_of(p) == pid)
                .filter(|_| uid == my_uid)
            else {
                if let Some(skipped) = REFUSED.note() {
                    tracing::warn!(
                        pe = me,
                        pid,
                        uid,
                        skipped,
                        "fd exchange: refused a connection from a process that is not a PE of this job on this \
                         node (skipped: refusals not logged since the last line)"
                    );
                }
                continue;
            };
            let pe = waiting.swap_remove(i);
            set_timeout(c.as_fd(), left)?;
            let before = got.len();
            recv_fds(c.as_fd(), &mut got)?;
            let sent: Vec<usize> = got[before..].iter().map(|(r, _)| *r).collect();
            if sent != [pe] {
                return Err(exchange_error(format!(
                    "PE {pe} (pid {pid}) sent heap fds for PEs {sent:?} instead of its own"
                )));
            }
            conns.push(c);
        }
        got.sort_by_key(|(r, _)| *r);
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
        loop {
            match rustix::net::connect(&sock, &addr) {
                Ok(()) => break,
                Err(e)
                    if deadline.is_none_or(|d| Instant::now() < d)
                        && e == rustix::io::Errno::CONNREFUSED =>
                {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(e) => return Err(os("connect(fd exchange)", e)),
            }
        }
        let (pid, uid) = peer_cred(sock.as_fd())?;
        if pid != pid_of(leader) || uid != my_uid {
            return Err(exchange_error(format!(
                "the heap-exchange socket of node leader PE {leader} (pid {}, uid {my_uid}) is held by pid {pid} \
                 uid {uid}: not sending this PE's heap to it",
                pid_of(leader)
            )));
        }
        send_fds(sock.as_fd(), &[me], &[mine])?;
        while got.len() < local.len() {
            recv_fds(sock.as_fd(), &mut got)?;
        }
    }
    let ranks: Vec<usize> = got.iter().map(|(r, _)| *r).collect();
    if ranks != local {
        return Err(exchange_error(format!(
            "fd exchange got PEs {ranks:?}, expected {local:?}"
        )));
    }
    Ok(got.into_iter().map(|(_, f)| f).collect())
}

#[cfg(test)]
mod tests {
    //! The leader runs in the test process; the other ends are this test binary re-executed in a role
    //! (`XPUSHMEM_FDX_ROLE`), so each has a pid of its own as PEs do.
    use super::*;
    use crate::sys::memfd::Arena;
    use std::io::{BufRead, BufReader};
    use std::process::{Child, Command, Stdio};

    const ROLE: &str = "XPUSHMEM_FDX_ROLE";
    const PAGE: usize = 4096;
    const LEADER_BYTES: usize = 2 * PAGE;
    const PEER_BYTES: usize = 3 * PAGE;
    const FAKE_BYTES: usize = 5 * PAGE;
    const TIMEOUT: Duration = Duration::from_secs(20);
    /// Connections the flooder makes.
    const FLOOD: usize = 3000;

    /// A child in a role, with its standard output read line by line.
    struct Kid {
        child: Child,
        lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
    }

    impl Kid {
        /// Wait until the child prints a line ending in `line` (libtest may prefix it).
        fn wait_line(&mut self, line: &str) {
            let mut seen = Vec::new();
            for l in self.lines.by_ref() {
                let l = l.expect("child output");
                if l.trim().ends_with(line) {
                    return;
                }
                seen.push(l);
            }
            panic!("child ended without printing {line:?}: {seen:?}");
        }

        fn succeeded(mut self) -> bool {
            self.lines.by_ref().for_each(drop);
            self.child.wait().is_ok_and(|s| s.success())
        }
    }

    fn spawn(role: &str, cookie: u64, leader_pid: u32, wrapper: &[&str]) -> std::io::Result<Kid> {
        let exe = std::env::current_exe()?;
        let mut cmd = match wrapper.split_first() {
            Some((w, rest)) => {
                let mut c = Command::new(w);
                c.args(rest).arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        let mut child = cmd
            .args([
                "--exact",
                "sys::fdx::tests::role",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ROLE, role)
            .env("FDX_COOKIE", cookie.to_string())
            .env("FDX_LEADER_PID", leader_pid.to_string())
            .stdout(Stdio::piped())
            .spawn()?;
        let out = child.stdout.take().expect("piped stdout");
        Ok(Kid {
            child,
            lines: BufReader::new(out).lines(),
        })
    }

    /// What a child role does (nothing in an ordinary test run).
    #[test]
    fn role() {
        let Ok(role) = std::env::var(ROLE) else {
            return;
        };
        let cookie: u64 = std::env::var("FDX_COOKIE").unwrap().parse().unwrap();
        let leader_pid: u32 = std::env::var("FDX_LEADER_PID").unwrap().parse().unwrap();
        match role.as_str() {
            "peer" => {
                let arena = Arena::create(PEER_BYTES).unwrap();
                let pids = [leader_pid, std::process::id()];
                let fds = exchange_fds(cookie, &[0, 1], &pids, 1, arena.fd(), None, Some(TIMEOUT))
                    .unwrap();
                let sizes: Vec<usize> = fds
                    .into_iter()
                    .map(|f| Arena::from_fd(f).unwrap().size())
                    .collect();
                assert_eq!(sizes, [LEADER_BYTES, PEER_BYTES]);
                println!("PEER_OK");
            }
            "intruder" => {
                // The attack of the reliability campaign: connect as the node's last PE and offer a heap of one's
                // own, hoping to be handed everyone's.
                let fake = Arena::create(FAKE_BYTES).unwrap();
                let sock = rustix::net::socket_with(
                    AddressFamily::UNIX,
                    SocketType::SEQPACKET,
                    rustix::net::SocketFlags::CLOEXEC,
                    None,
                )
                .unwrap();
                let addr = SocketAddrUnix::new_abstract_name(&socket_name(cookie, 0)).unwrap();
                rustix::net::connect(&sock, &addr).unwrap();
                send_fds(sock.as_fd(), &[1], &[fake.fd()]).unwrap();
                println!("CONNECTED");
                set_timeout(sock.as_fd(), Some(TIMEOUT)).unwrap();
                let mut got = Vec::new();
                let _ = recv_fds(sock.as_fd(), &mut got);
                println!("INTRUDER_GOT {}", got.len());
            }
            "flooder" => {
                // Connect and hang up, again and again, as the campaign's flood did.
                let addr = SocketAddrUnix::new_abstract_name(&socket_name(cookie, 0)).unwrap();
                for _ in 0..FLOOD {
                    let sock = rustix::net::socket_with(
                        AddressFamily::UNIX,
                        SocketType::SEQPACKET,
                        rustix::net::SocketFlags::CLOEXEC,
                        None,
                    )
                    .unwrap();
                    rustix::net::connect(&sock, &addr).unwrap();
                }
                println!("FLOODED {FLOOD}");
            }
            "leader" => {
                // The node leader, its warnings on standard output; the test process is the other PE.
                let _ = tracing_subscriber::fmt()
                    .with_max_level(tracing::Level::WARN)
                    .with_writer(std::io::stdout)
                    .with_ansi(false)
                    .try_init();
                let listener = FdListener::bind(cookie, 0).unwrap();
                println!("BOUND");
                let arena = Arena::create(LEADER_BYTES).unwrap();
                let pids = [std::process::id(), leader_pid];
                let fds = exchange_fds(
                    cookie,
                    &[0, 1],
                    &pids,
                    0,
                    arena.fd(),
                    Some(listener),
                    Some(TIMEOUT),
                )
                .unwrap();
                assert_eq!(fds.len(), 2);
                println!("LEADER_OK");
            }
            other => panic!("unknown role {other}"),
        }
    }

    #[test]
    fn processes_outside_the_job_are_refused_and_the_exchange_goes_on() {
        let cookie = crate::bootstrap::uid::random_cookie();
        let me = std::process::id();
        let listener = FdListener::bind(cookie, 0).unwrap();
        let mine = Arena::create(LEADER_BYTES).unwrap();
        // Intruders connect first: one of this uid, and (as root, with setpriv) one of another uid.
        let mut intruders = vec![spawn("intruder", cookie, me, &[]).unwrap()];
        let other_uid = [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ];
        if rustix::process::geteuid().is_root() {
            match spawn("intruder", cookie, me, &other_uid) {
                Ok(c) => intruders.push(c),
                Err(e) => eprintln!("skipping the other-uid intruder: setpriv: {e}"),
            }
        } else {
            eprintln!("skipping the other-uid intruder: needs root to switch uid");
        }
        for c in &mut intruders {
            c.wait_line("CONNECTED");
        }
        let mut peer = spawn("peer", cookie, me, &[]).unwrap();
        let pids = [me, peer.child.id()];
        let fds = exchange_fds(
            cookie,
            &[0, 1],
            &pids,
            0,
            mine.fd(),
            Some(listener),
            Some(TIMEOUT),
        )
        .unwrap();
        let sizes: Vec<usize> = fds
            .into_iter()
            .map(|f| Arena::from_fd(f).unwrap().size())
            .collect();
        assert_eq!(
            sizes,
            [LEADER_BYTES, PEER_BYTES],
            "the peer's heap, not an intruder's"
        );
        peer.wait_line("PEER_OK");
        assert!(peer.succeeded());
        for mut c in intruders {
            c.wait_line("INTRUDER_GOT 0");
            assert!(c.succeeded());
        }
    }

    #[test]
    fn a_squatted_socket_is_handed_nothing() {
        // This process binds the leader's name first; a PE must not send its heap to it.
        let cookie = crate::bootstrap::uid::random_cookie();
        let squat = FdListener::bind(cookie, 0).unwrap();
        let leader_pid = rustix::process::getppid().map_or(1, |p| p.as_raw_nonzero().get() as u32);
        let heap = Arena::create(PAGE).unwrap();
        let pids = [leader_pid, std::process::id()];
        let err =
            exchange_fds(cookie, &[0, 1], &pids, 1, heap.fd(), None, Some(TIMEOUT)).unwrap_err();
        let me = std::process::id();
        assert!(
            matches!(&err, Error::Transport { transport: "shm", message }
                if message.contains(&format!("is held by pid {me}")) && message.contains(&format!("pid {leader_pid}"))),
            "{err}"
        );
        let c = rustix::net::accept_with(&squat.sock, rustix::net::SocketFlags::NONBLOCK).unwrap();
        let mut got = Vec::new();
        let r = recv_fds(c.as_fd(), &mut got);
        assert!(
            got.is_empty()
                && matches!(&r, Err(Error::Transport { message, .. }) if message.contains("closed")),
            "the squatter received {} fds ({r:?})",
            got.len()
        );
    }

    #[test]
    fn a_flood_of_refused_connections_logs_a_few_lines() {
        // The leader is a child (its log is its output); a flooder makes 3000 connections that are not PEs; this
        // process is the other PE and joins after the flood.
        let cookie = crate::bootstrap::uid::random_cookie();
        let me = std::process::id();
        let mut leader = spawn("leader", cookie, me, &[]).unwrap();
        leader.wait_line("BOUND");
        // The leader's output is read as it comes (a full pipe would stop the leader, and the flood with it).
        let Kid { mut child, lines } = leader;
        let log = std::thread::spawn(move || lines.map_while(|l| l.ok()).collect::<Vec<String>>());
        let flood = FLOOD;
        let mut flooder = spawn("flooder", cookie, me, &[]).unwrap();
        let started = Instant::now();
        flooder.wait_line(&format!("FLOODED {flood}"));
        assert!(flooder.succeeded());
        let heap = Arena::create(PEER_BYTES).unwrap();
        let pids = [child.id(), me];
        let fds = exchange_fds(cookie, &[0, 1], &pids, 1, heap.fd(), None, Some(TIMEOUT)).unwrap();
        assert_eq!(fds.len(), 2);
        let log = log.join().unwrap();
        let secs = started.elapsed().as_secs();
        assert!(child.wait().is_ok_and(|s| s.success()), "{log:?}");
        assert!(
            log.iter().any(|l| l.trim().ends_with("LEADER_OK")),
            "{log:?}"
        );
        let refused: Vec<&String> = log
            .iter()
            .filter(|l| l.contains("refused a connection"))
            .collect();
        // One line a second at most (plus the first): not one per connection.
        assert!(
            !refused.is_empty() && refused.len() as u64 <= secs + 2,
            "{} warning lines for {flood} refused connections in about {secs} s: {:?}",
            refused.len(),
            refused.iter().take(5).collect::<Vec<_>>()
        );
    }

    #[test]
    fn names_are_keyed_hashes_of_the_secret_cookie() {
        let c = 0x1234_5678_9abc_def1u64;
        let host = String::from_utf8(socket_name(c, 0)).unwrap();
        let device_cookie = exchange_cookie(c, "device");
        let device = String::from_utf8(socket_name(device_cookie, 0)).unwrap();
        // The visible name does not show the cookie, and the two exchanges' names differ.
        assert!(!host.contains(&format!("{c:016x}")), "{host}");
        assert_ne!(host, device);
        assert_ne!(device_cookie, c);
        // The old derivation (the device cookie was the host cookie xor a constant, readable from the host name)
        // gives neither name.
        let old_device = format!("xpushmem.{:016x}.0", c ^ 0x6465_7669_6365_0000);
        assert_ne!(device, old_device);
        // Each depends on the secret and on the leader; a domain is a domain.
        assert_ne!(socket_name(c ^ 1, 0), socket_name(c, 0));
        assert_ne!(exchange_cookie(c ^ 1, "device"), device_cookie);
        assert_ne!(socket_name(c, 1), socket_name(c, 0));
        assert_ne!(exchange_cookie(c, "host"), device_cookie);
        assert_eq!(exchange_cookie(c, "device"), device_cookie);
    }

    #[test]
    fn a_squatted_name_is_an_error_naming_its_holder() {
        // This process holds the name (the squatter); the leader's bind names it by pid and uid.
        let cookie = crate::bootstrap::uid::random_cookie();
        let _squat = FdListener::bind(cookie, 3).unwrap();
        let err = FdListener::bind(cookie, 3).unwrap_err().to_string();
        let me = std::process::id();
        let uid = rustix::process::getuid().as_raw();
        assert!(
            err.contains("Address already in use")
                && err.contains(&format!("pid {me} (uid {uid},")),
            "{err}"
        );
    }
}
