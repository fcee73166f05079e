//! The stall watchdog: a progress call into the provider that never returns ends the PE instead of holding its
//! peers forever.
//!
//! Every wait of this transport has a time limit, but a wait can only check it between calls into libfabric. A call
//! that never returns is out of its reach: `ofi_rxm` (every release up to libfabric 2.6) loops forever inside
//! `fi_cq_read` when it closes a connection whose segmented message one of this PE's receives was taking in, which an
//! outsider who reaches the port brings about at will (SECURITY.md, "What is not protected"). The PE's thread then
//! spins there holding the endpoint's lock, and its peers wait for it until their own limits, each naming a
//! different operation. The watchdog, a thread of its own that takes no lock, sees the same call still in progress
//! after the PE's time limit (at least [`MIN_LIMIT`]), says what happened, and aborts the process: its peers then
//! see it lost at once.
//!
//! The watchdog's thread keeps a file-descriptor table of its own ([`own_files`]): a thread that shares its
//! process's table makes every system call on a descriptor dearer for all of them (see there).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The shortest time a progress call may take before the watchdog ends the PE, whatever the wait limit: a call
/// returns in microseconds, but a thread on a loaded machine can be off its core for a while inside one, and a
/// wait limit of a few hundred milliseconds (tests of timeouts) must not turn that into an abort.
pub(crate) const MIN_LIMIT: Duration = Duration::from_secs(10);

/// The watchdog thread's name (what `ps -L` and `/proc/PID/task/*/comm` show).
const THREAD_NAME: &str = "xpushmem-stall";

/// How long a PE starting its watchdog waits at most for the thread to have a descriptor table of its own
/// ([`own_files`]: a thread start and a directory listing, well under a millisecond on an idle machine).
const TABLE_WAIT: Duration = Duration::from_secs(5);

/// Progress calls begun and ended (the number of the last of each), shared with the watchdog.
#[derive(Default)]
struct Calls {
    begun: AtomicU64,
    ended: AtomicU64,
    /// The endpoint is gone: the watchdog ends.
    closed: AtomicBool,
}

/// The endpoint's side of the watchdog: it numbers its progress calls ([`Stall::call`]).
pub(crate) struct Stall {
    calls: Arc<Calls>,
    n: u64,
}

impl Stall {
    /// The watchdog of PE `me`'s endpoint on provider `prov`, which aborts the process when one progress call
    /// lasts longer than `limit` (at least [`MIN_LIMIT`]); without a limit (the user turned time limits off) no
    /// thread watches.
    pub(crate) fn start(me: usize, prov: &str, limit: Option<Duration>) -> Stall {
        let calls = Arc::new(Calls::default());
        if let Some(limit) = limit.map(|l| l.max(MIN_LIMIT)) {
            let watched = Arc::clone(&calls);
            let prov = prov.to_string();
            let (settled, table) = std::sync::mpsc::channel();
            let spawned = std::thread::Builder::new()
                .name(THREAD_NAME.into())
                .spawn(move || {
                    let own = own_files();
                    // The PE may go on (the receiver is gone when its wait below ended first).
                    let _ = settled.send(());
                    match own {
                        Ok(()) => {}
                        Err(NotOwn::Shared) => tracing::debug!(
                            pe = me,
                            "fabric: the stall watchdog shares the PE's descriptor table (/proc/thread-self/fd \
                             cannot be read, or unshare refused)"
                        ),
                        Err(NotOwn::Unlisted) => tracing::warn!(
                            pe = me,
                            "fabric: the stall watchdog could not list all of its copies of the PE's descriptors: \
                             a file the PE closes may stay open until its endpoint closes"
                        ),
                    }
                    watch(&watched, me, &prov, limit)
                });
            match spawned {
                // Until the thread has closed its copies of the PE's descriptors, a file the PE closes stays open
                // through the copy (a socket would not end, one in an epoll set would still be reported there):
                // the PE goes on once they are closed, or after TABLE_WAIT at most.
                Ok(_) => {
                    let _ = table.recv_timeout(TABLE_WAIT);
                }
                Err(e) => tracing::warn!(
                    pe = me,
                    "fabric: no stall watchdog (cannot start its thread: {e})"
                ),
            }
        }
        Stall { calls, n: 0 }
    }

    /// Make progress call `f` (a call into the provider), watched.
    pub(crate) fn call<T>(&mut self, f: impl FnOnce() -> T) -> T {
        self.n += 1;
        self.calls.begun.store(self.n, Ordering::Relaxed);
        let r = f();
        self.calls.ended.store(self.n, Ordering::Relaxed);
        r
    }
}

impl Drop for Stall {
    fn drop(&mut self) {
        self.calls.closed.store(true, Ordering::Relaxed);
    }
}

/// How often the watchdog looks: an eighth of the limit, between 10 ms and 1 s.
fn period(limit: Duration) -> Duration {
    (limit / 8).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

/// Whether call `begun` (in progress unless `ended` equals it) has now been seen in progress at `needed` looks in a
/// row (`seen`: the call, and at how many looks so far). Looks, not the clock: a process stopped (SIGSTOP, a
/// debugger) and continued past the limit was not stalled, and its call returns as soon as it runs again.
fn stalled(begun: u64, ended: u64, seen: &mut (u64, u32), needed: u32) -> bool {
    if begun == ended || begun != seen.0 {
        *seen = (begun, 0);
        return false;
    }
    seen.1 += 1;
    seen.1 >= needed
}

/// Give the calling thread (the watchdog's) a descriptor table of its own that holds standard error alone, the one
/// descriptor it uses, or why it does not ([`NotOwn`]).
///
/// Linux takes its fast path for a system call on a descriptor (`fdget` without counting a reference to the file)
/// only while the table has a single user. With the watchdog's thread sharing it, each `sendmsg`, `recvfrom` and
/// `poll` of the PE's progress took 50-70 ns more on the 2-core machine, 2-3% of a fabric put's latency
/// (docs/PERFORMANCE.md, round thirty). `unshare(CLONE_FILES)` gives the thread a copy of the table as it is at
/// that moment, and the thread closes every descriptor of the copy but standard error at once: a socket the PE
/// closes later must not stay open in the copy (its peer would not see the connection end). What to close is read
/// from `/proc/thread-self/fd`, opened before the table is unshared (its listing shows the thread's table when it
/// is read); where it cannot be opened the thread keeps sharing the table.
fn own_files() -> Result<(), NotOwn> {
    use rustix::fs::{Dir, Mode, OFlags};
    use std::os::fd::AsRawFd;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let fd = rustix::fs::open("/proc/thread-self/fd", flags, Mode::empty())
        .map_err(|_| NotOwn::Shared)?;
    let own = fd.as_raw_fd();
    let listing = Dir::new(fd).map_err(|_| NotOwn::Shared)?;
    // SAFETY: from here on this thread uses no descriptor but standard error and the listing's (the watchdog's
    // loop sleeps, reads atomics and writes to standard error), so no descriptor it observes refers to another
    // thread's table.
    unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::FILES) }
        .map_err(|_| NotOwn::Shared)?;
    let mut listed = true;
    let mut copies = Vec::new();
    for entry in listing {
        match entry {
            Ok(e) => copies.extend(
                e.file_name()
                    .to_str()
                    .ok()
                    .and_then(|n| n.parse::<i32>().ok())
                    .filter(|&fd| fd != 2 && fd != own),
            ),
            Err(_) => listed = false,
        }
    }
    for fd in copies {
        // SAFETY: `fd` is open in this thread's own table (listed, and nothing here closed it since): a copy of
        // one of the process's descriptors, which nothing in this thread uses.
        unsafe { rustix::io::close(fd) };
    }
    if listed {
        Ok(())
    } else {
        Err(NotOwn::Unlisted)
    }
}

/// Why the watchdog's thread has no table of its own holding standard error alone ([`own_files`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NotOwn {
    /// It still shares the process's table (`/proc/thread-self/fd` cannot be read, or `unshare` was refused): the
    /// PE is only slower.
    Shared,
    /// It has a table of its own but could not list all of it: copies it did not close keep their files open until
    /// the thread ends (with the endpoint).
    Unlisted,
}

/// The watchdog's loop (see the module).
fn watch(calls: &Calls, me: usize, prov: &str, limit: Duration) {
    let every = period(limit);
    let needed = u32::try_from(limit.as_nanos() / every.as_nanos())
        .unwrap_or(u32::MAX)
        .saturating_add(1);
    let mut seen = (0, 0);
    loop {
        std::thread::sleep(every);
        if calls.closed.load(Ordering::Relaxed) {
            return;
        }
        let ended = calls.ended.load(Ordering::Relaxed);
        let begun = calls.begun.load(Ordering::Relaxed);
        if stalled(begun, ended, &mut seen, needed) {
            let msg = format!(
                "fabric: PE {me}: a progress call into provider {prov} has not returned for {limit:?} (the time \
                 limit, XPUSHMEM_TIMEOUT_MS); a known cause is libfabric's ofi_rxm looping forever as it closes a \
                 connection an outsider cut mid-message (SECURITY.md, \"What is not protected\"). Aborting this PE \
                 so that its peers see it lost instead of waiting for it"
            );
            tracing::error!(pe = me, "{msg}");
            eprintln!("error: {msg}");
            // Not `exit`: libfabric's own clean-up at exit would wait for the lock the stuck call holds.
            std::process::abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// The descriptors in the tables of this process's watchdog threads (one list per thread).
    fn watchdog_tables() -> Vec<Vec<String>> {
        let mut tables = Vec::new();
        for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
            let task = task.expect("task entry").path();
            let comm = std::fs::read_to_string(task.join("comm")).unwrap_or_default();
            if comm.trim() != THREAD_NAME {
                continue;
            }
            if let Ok(fds) = std::fs::read_dir(task.join("fd")) {
                let mut fds: Vec<String> = fds
                    .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
                    .collect();
                fds.sort();
                tables.push(fds);
            }
        }
        tables
    }

    #[test]
    fn the_watchdog_holds_standard_error_alone_and_keeps_no_connection_open() {
        use rustix::net::{AddressFamily, SocketFlags, SocketType};
        // A connection open before the watchdog starts: its copy in the watchdog's table must not keep it open.
        let (ours, theirs) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::STREAM,
            SocketFlags::CLOEXEC,
            None,
        )
        .expect("socketpair");
        let stall = Stall::start(0, "test", Some(Duration::from_secs(3600)));
        let start = Instant::now();
        let mut tables = watchdog_tables();
        while tables.is_empty() || tables.iter().any(|t| t != &["2"]) {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the watchdog threads' descriptor tables are {tables:?}, expected standard error alone"
            );
            std::thread::sleep(Duration::from_millis(5));
            tables = watchdog_tables();
        }
        // Closing our end ends the connection for the other end at once: it reads the end (0 bytes), not a wait.
        drop(ours);
        rustix::io::ioctl_fionbio(&theirs, true).expect("non-blocking");
        let mut byte = [0u8; 1];
        assert_eq!(rustix::io::read(&theirs, &mut byte), Ok(0));
        drop(stall);
    }

    /// Whether any of `n` looks at call `begun` (`ended` the last returned) finds a stall, needing 5 in a row.
    fn any_stall(n: u32, begun: u64, ended: u64, seen: &mut (u64, u32)) -> bool {
        (0..n).any(|_| stalled(begun, ended, seen, 5))
    }

    #[test]
    fn only_one_call_in_progress_at_enough_looks_in_a_row_is_a_stall() {
        let mut seen = (0, 0);
        // Nothing in progress, however often looked at.
        assert!(!any_stall(100, 3, 3, &mut seen));
        // Call 4 in progress: not a stall at the first four looks after it was first seen, a stall at the fifth.
        assert!(!any_stall(5, 4, 3, &mut seen));
        assert!(stalled(4, 3, &mut seen, 5));
        // Calls that keep returning are never a stall, even when one is in progress at every look.
        let mut seen = (0, 0);
        assert!(!(0..100).any(|n| stalled(10 + n, 9 + n, &mut seen, 5)));
        // A call that returned and the next one in progress start the count again.
        let mut seen = (0, 0);
        assert!(!any_stall(4, 7, 6, &mut seen));
        assert!(!stalled(7, 7, &mut seen, 5));
        assert!(!any_stall(4, 8, 7, &mut seen));
    }
}
