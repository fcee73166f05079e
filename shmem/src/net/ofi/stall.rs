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

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The shortest time a progress call may take before the watchdog ends the PE, whatever the wait limit: a call
/// returns in microseconds, but a thread on a loaded machine can be off its core for a while inside one, and a
/// wait limit of a few hundred milliseconds (tests of timeouts) must not turn that into an abort.
pub(crate) const MIN_LIMIT: Duration = Duration::from_secs(10);

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
            let spawned = std::thread::Builder::new()
                .name("xpushmem-stall".into())
                .spawn(move || watch(&watched, me, &prov, limit));
            if let Err(e) = spawned {
                tracing::warn!(
                    pe = me,
                    "fabric: no stall watchdog (cannot start its thread: {e})"
                );
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
