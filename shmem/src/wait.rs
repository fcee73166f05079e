//! The one back-off of every wait (a leaf: std only): spin, then yield, then sleep with a doubling pause, with the
//! clock read late and the caller's checks (lost peers, the time limit) due at a bounded interval whatever the
//! spin count.
//!
//! A wait polls its condition, and after each poll that did not succeed calls [`Backoff::pause`]; when that
//! returns `true` the wait checks its peers and then [`Backoff::expired`]. The properties every wait keeps:
//! - the clock is first read at poll [`CLOCK_AT`] (a wait that ends sooner reads no clock), so a timeout reports
//!   the time waited since then;
//! - while spinning, checks are due every [`CHECK_EVERY_SPIN`] polls, however large the spin count: a huge
//!   `XPUSHMEM_SPIN_COUNT` cannot stretch the time limit or hide a lost peer;
//! - while yielding, every [`CHECK_EVERY_YIELD`] polls; while sleeping, after every sleep.
//!
//! Users: `Shmem::wait_for` (every wait of the runtime and, through the C ABI, the torch shim's signal pad), the
//! fabric's waits (`Fabric::wait`, and the `EAGAIN` retries of `net/ofi`, through `ofi::polling_backoff`) and the
//! device proxy's idle loop (`transport/proxy.rs`).

use std::time::{Duration, Instant};

/// The poll at which a wait first reads the clock (when it has a limit).
pub const CLOCK_AT: u64 = 32;
/// While spinning, peers and the limit are checked every this many polls (two syscalls and a clock read: rare
/// enough not to slow a spinning wait).
pub const CHECK_EVERY_SPIN: u64 = 4096;
/// While yielding, peers and the limit are checked every this many polls.
pub const CHECK_EVERY_YIELD: u64 = 32;
/// Once yielding is over, whether this PE must keep polling (instead of sleeping) is asked again every this many
/// polls.
pub const POLLING_EVERY: u64 = 1024;
/// The first sleep; each next one doubles, up to the back-off's `sleep_max`.
pub const FIRST_SLEEP: Duration = Duration::from_micros(1);

/// The state of one wait's back-off (see the module doc).
#[derive(Debug, Clone)]
pub struct Backoff {
    /// Polls that spin.
    spins: u64,
    /// Polls that spin or yield (spins + yields).
    yields: u64,
    sleep: Duration,
    sleep_max: Duration,
    limit: Option<Duration>,
    start: Option<Instant>,
    /// Polls that did not succeed so far.
    polls: u64,
    /// Whether the last look found that this PE must keep polling (never sleep).
    polling: bool,
}

impl Backoff {
    /// A back-off that spins `spins` polls, then yields `yields` polls, then sleeps from [`FIRST_SLEEP`] doubling
    /// up to `sleep_max`; `limit`: the time the wait may take (`None`: no limit).
    pub fn new(spins: u64, yields: u64, sleep_max: Duration, limit: Option<Duration>) -> Backoff {
        Backoff {
            spins,
            yields: spins.saturating_add(yields),
            sleep: FIRST_SLEEP,
            sleep_max,
            limit,
            start: None,
            polls: 0,
            polling: false,
        }
    }

    /// Pause after a poll that did not succeed: spin, yield or sleep. `must_poll` says whether something needs
    /// this thread to keep calling in (then it yields instead of sleeping); it is asked when yielding ends and
    /// every [`POLLING_EVERY`] polls after. Returns whether the caller's checks (peers, then [`Backoff::expired`])
    /// are due now.
    pub fn pause(&mut self, must_poll: impl FnOnce() -> bool) -> bool {
        self.polls += 1;
        let i = self.polls;
        if i < self.spins {
            std::hint::spin_loop();
            if i == CLOCK_AT && self.limit.is_some() {
                self.start.get_or_insert_with(Instant::now);
            }
            return i % CHECK_EVERY_SPIN == 0;
        }
        if i == self.yields || (i > self.yields && i % POLLING_EVERY == 0) {
            self.polling = must_poll();
        }
        if i < self.yields || self.polling {
            // Yielding keeps polling: a transport that moves data only while this PE calls in would otherwise
            // hold its peers' operations for as long as a sleep lasts.
            std::thread::yield_now();
            i % CHECK_EVERY_YIELD == 0
        } else {
            std::thread::sleep(self.sleep);
            self.sleep = (self.sleep * 2).min(self.sleep_max);
            true
        }
    }

    /// `Some(time waited)` once the limit has passed (the clock starts at the first read, see [`CLOCK_AT`]).
    pub fn expired(&mut self) -> Option<Duration> {
        let limit = self.limit?;
        let waited = self.start.get_or_insert_with(Instant::now).elapsed();
        (waited > limit).then_some(waited)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The polls (1-based) at which `pause` says checks are due, over `n` polls.
    fn checks(b: &mut Backoff, n: u64, must_poll: bool) -> Vec<u64> {
        let mut due = Vec::new();
        for _ in 0..n {
            if b.pause(|| must_poll) {
                due.push(b.polls);
            }
        }
        due
    }

    #[test]
    fn a_huge_spin_count_still_checks_every_4096_polls() {
        let mut b = Backoff::new(u64::MAX, 200, Duration::from_micros(200), None);
        assert_eq!(checks(&mut b, 3 * 4096, false), vec![4096, 8192, 12288]);
        // The yield phase's end does not overflow either.
        let b = Backoff::new(u64::MAX, u64::MAX, Duration::from_micros(200), None);
        assert_eq!(b.yields, u64::MAX);
    }

    #[test]
    fn yielding_checks_every_32_polls_and_sleeping_after_every_sleep() {
        let mut b = Backoff::new(0, 64, Duration::from_micros(4), None);
        assert_eq!(checks(&mut b, 63, false), vec![32]);
        // Poll 64 ends the yields: from there on each pause sleeps and checks.
        assert_eq!(checks(&mut b, 3, false), vec![64, 65, 66]);
        // The sleep doubled up to its cap.
        assert_eq!(b.sleep, Duration::from_micros(4));
    }

    #[test]
    fn a_pe_that_must_poll_keeps_yielding() {
        let mut b = Backoff::new(0, 4, Duration::from_secs(3600), None);
        // Never sleeps (its first sleep would not be checked for an hour): yields, checking every 32 polls.
        assert_eq!(checks(&mut b, 100, true), vec![32, 64, 96]);
        assert_eq!(b.sleep, FIRST_SLEEP);
    }

    #[test]
    fn the_clock_starts_at_poll_32_and_only_with_a_limit() {
        let mut b = Backoff::new(
            1000,
            0,
            Duration::from_micros(1),
            Some(Duration::from_secs(60)),
        );
        checks(&mut b, CLOCK_AT - 1, false);
        assert!(b.start.is_none());
        checks(&mut b, 1, false);
        assert!(b.start.is_some());
        assert_eq!(b.expired(), None);
        let mut b = Backoff::new(1000, 0, Duration::from_micros(1), None);
        checks(&mut b, 100, false);
        assert!(b.start.is_none() && b.expired().is_none());
    }

    #[test]
    fn expired_reports_the_time_waited_past_the_limit() {
        let mut b = Backoff::new(
            0,
            0,
            Duration::from_micros(1),
            Some(Duration::from_millis(1)),
        );
        assert!(
            b.pause(|| false),
            "a sleeping wait checks after every sleep"
        );
        // Past the spin phase the clock starts at the first check.
        assert!(b.start.is_none());
        let _ = b.expired();
        assert!(b.start.is_some());
        std::thread::sleep(Duration::from_millis(2));
        let waited = b.expired().expect("the 1 ms limit has passed");
        assert!(waited >= Duration::from_millis(2), "{waited:?}");
    }
}
