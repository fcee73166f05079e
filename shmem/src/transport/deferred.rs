//! The deferred test transport (`XPUSHMEM_TRANSPORT=deferred`): it wraps the windows another transport built and
//! completes late, as a network does, so that code which forgets a `quiet`, a `fence` or a wait fails in the test
//! suites instead of passing by luck of synchronous memory.
//!
//! Writes, non-fetching atomics, put-with-signal and non-blocking gets are queued, in issue order, each with its
//! completion domain (an OpenSHMEM context), and delivered when the PE completes them (`quiet` of their domain,
//! `quiet_all`, a handle's wait), when it waits ([`Transport::progress`], the default domain's only: another
//! domain's operations wait for their own quiet), or when a later `read`/fetching atomic touches the same bytes of
//! the same window (a PE reads its own writes, whatever the domain). Between two fences of a domain its delivery
//! runs in *reverse* issue order, with a pause after the first delivery of a batch: a flag written after its data
//! without a fence lands first and stays alone long enough for a peer to see the stale data. A put-with-signal is
//! one queued operation (its data always precedes its signal). Reads and atomics that return a value run at once,
//! so nothing here can deadlock a correct program.
//!
//! No queued operation refers to caller memory: a put's source is copied when it is queued, a get's bytes are kept
//! here until its handle collects them.

use super::{check_access, AmoOp, Domain, Ticket, Transport, Window};
use crate::error::Result;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// How long the first operation of a reversed batch stays alone before the rest follow (a deliberate delay that
/// waits for nothing, so not a `crate::wait::Backoff`).
const REORDER_PAUSE: Duration = Duration::from_millis(10);

#[derive(Debug)]
enum Kind {
    Write(Vec<u8>),
    Read(usize),
    Amo {
        width: usize,
        op: AmoOp,
        operand: u64,
    },
    PutSignal {
        data: Vec<u8>,
        sig: usize,
        op: AmoOp,
        value: u64,
    },
}

#[derive(Debug)]
struct Op {
    seq: u64,
    domain: Domain,
    /// The domain's fence epoch at issue.
    epoch: u64,
    win: Arc<dyn Window>,
    off: usize,
    kind: Kind,
}

impl Op {
    /// Whether this operation writes bytes of `win` in `[off, off + len)`.
    fn touches(&self, win: &Arc<dyn Window>, off: usize, len: usize) -> bool {
        if !Arc::ptr_eq(&self.win, win) {
            return false;
        }
        let hit = |a: usize, l: usize| a < off + len.max(1) && off < a + l.max(1);
        match &self.kind {
            Kind::Write(d) => hit(self.off, d.len()),
            Kind::Read(_) => false,
            Kind::Amo { width, .. } => hit(self.off, *width),
            Kind::PutSignal { data, sig, .. } => hit(self.off, data.len()) || hit(*sig, 8),
        }
    }

    /// Deliver to the wrapped window; a read's bytes.
    fn run(&self) -> Result<Option<Vec<u8>>> {
        match &self.kind {
            Kind::Write(d) => self.win.write(self.off, d).map(|()| None),
            Kind::Read(len) => {
                let mut b = vec![0u8; *len];
                self.win.read(self.off, &mut b)?;
                Ok(Some(b))
            }
            Kind::Amo { width, op, operand } => self
                .win
                .amo_post(self.off, *width, *op, *operand)
                .map(|()| None),
            Kind::PutSignal {
                data,
                sig,
                op,
                value,
            } => self
                .win
                .put_signal_nbi(self.off, data, *sig, *op, *value)
                .map(|_| None),
        }
    }
}

/// Which queued operations a delivery takes.
#[derive(Debug, Clone, Copy)]
enum Pick {
    /// Every one.
    All,
    /// Those issued up to sequence number `.0` (any domain).
    UpTo(u64),
    /// Those of one domain.
    Domain(Domain),
    /// Those of one domain issued up to a sequence number.
    DomainUpTo(Domain, u64),
}

impl Pick {
    fn takes(self, o: &Op) -> bool {
        match self {
            Pick::All => true,
            Pick::UpTo(s) => o.seq <= s,
            Pick::Domain(d) => o.domain == d,
            Pick::DomainUpTo(d, s) => o.domain == d && o.seq <= s,
        }
    }
}

#[derive(Debug, Default)]
struct Queue {
    ops: Vec<Op>,
    next: u64,
    /// The last epoch number handed out; `epochs`: each domain's current one (0 until its first fence).
    epoch: u64,
    epochs: HashMap<Domain, u64>,
    /// Bytes of delivered gets, until their handles collect them.
    reads: HashMap<u64, Vec<u8>>,
}

/// The deferred transport: one queue for every window it wraps.
#[derive(Debug, Default)]
pub(crate) struct Deferred {
    queue: Mutex<Queue>,
    /// Held while a batch is delivered, so a completion never sees an operation that left the queue but has not
    /// landed yet.
    delivering: Mutex<()>,
    /// The PEs whose windows it wraps.
    reach: Vec<bool>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Deferred {
    /// A transport with an empty queue, to wrap the windows of the PEs marked in `reach`.
    pub(crate) fn new(reach: Vec<bool>) -> Arc<Deferred> {
        Arc::new(Deferred {
            reach,
            ..Deferred::default()
        })
    }

    /// Wrap `inner` (a window of another transport) so that its writes go through this queue.
    pub(crate) fn wrap(self: &Arc<Self>, inner: Box<dyn Window>) -> Box<dyn Window> {
        Box::new(DeferredWindow {
            inner: Arc::from(inner),
            t: Arc::clone(self),
        })
    }

    fn push(&self, d: Domain, win: &Arc<dyn Window>, off: usize, kind: Kind) -> Ticket {
        let mut q = lock(&self.queue);
        let seq = q.next;
        q.next += 1;
        let epoch = q.epochs.get(&d).copied().unwrap_or(0);
        q.ops.push(Op {
            seq,
            domain: d,
            epoch,
            win: Arc::clone(win),
            off,
            kind,
        });
        Ticket(seq)
    }

    /// Deliver the queued operations `pick` selects (it sees the queue), in issue order but for the reversal of
    /// each run of one domain's epoch.
    fn flush(&self, pick: impl FnOnce(&[Op]) -> Option<Pick>) -> Result<()> {
        let _d = lock(&self.delivering);
        let batch: Vec<Op> = {
            let mut q = lock(&self.queue);
            let Some(p) = pick(&q.ops) else {
                return Ok(());
            };
            let (take, keep) = std::mem::take(&mut q.ops)
                .into_iter()
                .partition(|o| p.takes(o));
            q.ops = keep;
            take
        };
        let mut first_err = None;
        let mut reads = Vec::new();
        let mut i = 0;
        while i < batch.len() {
            let j = batch[i..]
                .iter()
                .position(|o| (o.domain, o.epoch) != (batch[i].domain, batch[i].epoch))
                .map_or(batch.len(), |p| i + p);
            for (k, op) in batch[i..j].iter().rev().enumerate() {
                match op.run() {
                    Ok(Some(b)) => reads.push((op.seq, b)),
                    Ok(None) => {}
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                }
                if k == 0 && j - i > 1 {
                    std::thread::sleep(REORDER_PAUSE);
                }
            }
            i = j;
        }
        lock(&self.queue).reads.extend(reads);
        first_err.map_or(Ok(()), Err)
    }

    /// Deliver every queued operation up to the last one that writes `[off, off + len)` of `win`.
    fn flush_touching(&self, win: &Arc<dyn Window>, off: usize, len: usize) -> Result<()> {
        self.flush(|ops| {
            ops.iter()
                .rfind(|o| o.touches(win, off, len))
                .map(|o| Pick::UpTo(o.seq))
        })
    }
}

impl Transport for Deferred {
    fn name(&self) -> &'static str {
        "deferred"
    }
    fn can_reach(&self, pe: usize) -> bool {
        self.reach.get(pe).is_some_and(|r| *r)
    }
    fn fence(&self, d: Domain) -> Result<()> {
        let mut q = lock(&self.queue);
        q.epoch += 1;
        let e = q.epoch;
        q.epochs.insert(d, e);
        Ok(())
    }
    fn quiet(&self, d: Domain) -> Result<()> {
        self.flush(|_| Some(Pick::Domain(d)))?;
        self.fence(d)
    }
    fn quiet_all(&self) -> Result<()> {
        self.flush(|_| Some(Pick::All))
    }
    fn progress(&self) -> Result<()> {
        let d = Domain::DEFAULT;
        if !lock(&self.queue).ops.iter().any(|o| o.domain == d) {
            return Ok(());
        }
        self.flush(|_| Some(Pick::Domain(d)))
    }
    fn complete(&self, t: Ticket) -> Result<Option<Vec<u8>>> {
        // The operation and its domain's earlier ones (another domain's stay queued).
        self.flush(|ops| {
            ops.iter()
                .find(|o| o.seq == t.0)
                .map(|o| Pick::DomainUpTo(o.domain, t.0))
        })?;
        Ok(lock(&self.queue).reads.remove(&t.0))
    }
    fn progress_for(&self, t: Ticket) -> Result<()> {
        // The default domain's, and the handle's own operation with its domain's earlier ones (a handle of
        // another domain polled with `test` would otherwise never complete).
        self.progress()?;
        self.flush(|ops| {
            ops.iter()
                .find(|o| o.seq == t.0)
                .map(|o| Pick::DomainUpTo(o.domain, t.0))
        })
    }
    fn is_complete(&self, t: Ticket) -> bool {
        !lock(&self.queue).ops.iter().any(|o| o.seq == t.0)
    }
}

/// A window whose writes wait in a [`Deferred`] queue.
#[derive(Debug)]
struct DeferredWindow {
    inner: Arc<dyn Window>,
    t: Arc<Deferred>,
}

impl DeferredWindow {
    fn check(&self, off: usize, len: usize, align: usize) -> Result<()> {
        // Against the wrapped window's range at `off` (its length, or the data segment's tail beyond it).
        check_access(
            "deferred",
            "access",
            off,
            len,
            align,
            self.inner.limit_at(off),
        )
    }
}

impl Window for DeferredWindow {
    fn write(&self, off: usize, src: &[u8]) -> Result<()> {
        self.write_in(Domain::DEFAULT, off, src)
    }
    fn read(&self, off: usize, dst: &mut [u8]) -> Result<()> {
        self.check(off, dst.len(), 1)?;
        self.t.flush_touching(&self.inner, off, dst.len())?;
        self.inner.read(off, dst)
    }
    fn put_nbi(&self, off: usize, src: &[u8]) -> Result<Option<Ticket>> {
        self.put_nbi_in(Domain::DEFAULT, off, src)
    }
    fn get_nbi(&self, off: usize, dst: &mut [u8]) -> Result<Option<Ticket>> {
        self.get_nbi_in(Domain::DEFAULT, off, dst)
    }
    fn put_signal_nbi(
        &self,
        off: usize,
        src: &[u8],
        sig: usize,
        op: AmoOp,
        value: u64,
    ) -> Result<Option<Ticket>> {
        self.put_signal_nbi_in(Domain::DEFAULT, off, src, sig, op, value)
    }
    fn amo_post(&self, off: usize, width: usize, op: AmoOp, operand: u64) -> Result<()> {
        self.amo_post_in(Domain::DEFAULT, off, width, op, operand)
    }
    fn write_in(&self, d: Domain, off: usize, src: &[u8]) -> Result<()> {
        self.check(off, src.len(), 1)?;
        self.t.push(d, &self.inner, off, Kind::Write(src.to_vec()));
        Ok(())
    }
    fn put_nbi_in(&self, d: Domain, off: usize, src: &[u8]) -> Result<Option<Ticket>> {
        self.check(off, src.len(), 1)?;
        Ok(Some(self.t.push(
            d,
            &self.inner,
            off,
            Kind::Write(src.to_vec()),
        )))
    }
    fn put_nbi_registered_in(&self, d: Domain, off: usize, src: &[u8]) -> Result<Option<Ticket>> {
        self.put_nbi_in(d, off, src)
    }
    fn get_nbi_in(&self, d: Domain, off: usize, dst: &mut [u8]) -> Result<Option<Ticket>> {
        self.check(off, dst.len(), 1)?;
        Ok(Some(self.t.push(
            d,
            &self.inner,
            off,
            Kind::Read(dst.len()),
        )))
    }
    fn get_nbi_registered_in(
        &self,
        d: Domain,
        off: usize,
        dst: &mut [u8],
    ) -> Result<Option<Ticket>> {
        // Read at once into the registered buffer (the default's behaviour): the caller's memory is never kept.
        let _ = d;
        self.read(off, dst).map(|()| None)
    }
    fn put_signal_nbi_in(
        &self,
        d: Domain,
        off: usize,
        src: &[u8],
        sig: usize,
        op: AmoOp,
        value: u64,
    ) -> Result<Option<Ticket>> {
        self.check(off, src.len(), 1)?;
        self.check(sig, 8, 8)?;
        let kind = Kind::PutSignal {
            data: src.to_vec(),
            sig,
            op,
            value,
        };
        Ok(Some(self.t.push(d, &self.inner, off, kind)))
    }
    fn amo_post_in(
        &self,
        d: Domain,
        off: usize,
        width: usize,
        op: AmoOp,
        operand: u64,
    ) -> Result<()> {
        self.check(off, width, width)?;
        let kind = Kind::Amo { width, op, operand };
        self.t.push(d, &self.inner, off, kind);
        Ok(())
    }
    fn copy_from(&self, off: usize, src: &dyn Window, src_off: usize, len: usize) -> Result<()> {
        self.t.quiet_all()?;
        self.inner.copy_from(off, src, src_off, len)
    }
    fn copy_from_streamed(
        &self,
        off: usize,
        src: &dyn Window,
        src_off: usize,
        len: usize,
    ) -> Result<()> {
        self.t.quiet_all()?;
        self.inner.copy_from_streamed(off, src, src_off, len)
    }
    fn atomic64(&self, off: usize) -> Option<&std::sync::atomic::AtomicU64> {
        self.inner.atomic64(off)
    }
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn limit_at(&self, off: usize) -> usize {
        self.inner.limit_at(off)
    }
    fn fill(&self, off: usize, len: usize, byte: u8) -> Result<()> {
        self.t.quiet_all()?;
        self.inner.fill(off, len, byte)
    }
    fn amo(&self, off: usize, width: usize, op: AmoOp, operand: u64) -> Result<u64> {
        self.t.flush_touching(&self.inner, off, width)?;
        self.inner.amo(off, width, op, operand)
    }
    fn base(&self) -> *mut u8 {
        self.inner.base()
    }
    fn grow(&self, len: usize) -> Result<()> {
        self.inner.grow(len)
    }
    fn host_accessible(&self) -> bool {
        self.inner.host_accessible()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::shm::{Arena, Mapping};
    use crate::transport::Pending;

    fn window() -> (Arena, Arc<Deferred>, Box<dyn Window>) {
        let arena = Arena::create(4096).expect("memfd");
        let d = Deferred::new(vec![true]);
        let w = d.wrap(Box::new(Mapping::map(&arena, 0, 4096).expect("map")));
        (arena, d, w)
    }

    fn direct(arena: &Arena, off: usize) -> u8 {
        let m = Mapping::map(arena, 0, 4096).expect("map");
        let mut b = [0u8];
        m.read(off, &mut b).expect("read");
        b[0]
    }

    #[test]
    fn writes_land_on_quiet_and_a_dropped_handle_completes() {
        let (arena, d, w) = window();
        w.write(8, &[7]).expect("write");
        assert_eq!(direct(&arena, 8), 0, "a put is not delivered before quiet");
        d.quiet(Domain::DEFAULT).expect("quiet");
        assert_eq!(direct(&arena, 8), 7);

        let src = [9u8; 4];
        let t = w.put_nbi(16, &src).expect("put_nbi");
        assert!(t.is_some() && !d.is_complete(t.expect("ticket")));
        drop(Pending::new(d.as_ref(), t, None));
        assert_eq!(
            direct(&arena, 19),
            9,
            "dropping the handle completed the put"
        );

        let mut got = [0u8; 4];
        {
            let t = w.get_nbi(16, &mut got).expect("get_nbi");
            let _p = Pending::new(d.as_ref(), t, Some(&mut got[..]));
        }
        assert_eq!(got, [9; 4], "dropping the handle filled the buffer");
    }

    #[test]
    fn between_fences_later_writes_land_first() {
        let (arena, d, w) = window();
        w.write(0, &[1]).expect("data");
        w.amo_post(8, 8, AmoOp::Set, 1).expect("flag");
        // Overwrites of one byte without a fence: the earlier one lands last.
        w.write(32, &[1]).expect("first");
        w.write(32, &[2]).expect("second");
        d.quiet(Domain::DEFAULT).expect("quiet");
        assert_eq!(direct(&arena, 32), 1, "reverse order within a fence epoch");
        w.write(40, &[1]).expect("first");
        d.fence(Domain::DEFAULT).expect("fence");
        w.write(40, &[2]).expect("second");
        d.quiet(Domain::DEFAULT).expect("quiet");
        assert_eq!(direct(&arena, 40), 2, "a fence keeps issue order");
        assert_eq!(w.amo(8, 8, AmoOp::Fetch, 0).expect("fetch"), 1);
        // A read sees this PE's own earlier writes to the same bytes.
        w.write(48, &[5]).expect("write");
        let mut b = [0u8];
        w.read(48, &mut b).expect("read");
        assert_eq!(b, [5]);
    }

    #[test]
    fn a_domain_quiet_completes_its_own_operations_only() {
        let (arena, d, w) = window();
        let (a, b) = (Domain(1), Domain(2));
        w.write_in(a, 0, &[1]).expect("a");
        w.write_in(b, 8, &[2]).expect("b");
        w.amo_post_in(b, 16, 8, AmoOp::Set, 3).expect("b amo");
        w.write(24, &[4]).expect("default");
        d.quiet(a).expect("quiet a");
        assert_eq!(direct(&arena, 0), 1, "A's put landed on A's quiet");
        assert_eq!(direct(&arena, 8), 0, "B's put waits for B's quiet");
        assert_eq!(direct(&arena, 16), 0, "B's atomic waits for B's quiet");
        assert_eq!(direct(&arena, 24), 0, "the default domain's put waits too");
        d.progress().expect("progress");
        assert_eq!(
            direct(&arena, 24),
            4,
            "a wait's progress moves the default domain"
        );
        assert_eq!(direct(&arena, 8), 0, "and not B's");
        // A handle completes its own domain's operations, not another's.
        let t = w.put_nbi_in(a, 32, &[5]).expect("a nbi");
        drop(crate::transport::Pending::new(d.as_ref(), t, None));
        assert_eq!(direct(&arena, 32), 5);
        assert_eq!(
            direct(&arena, 8),
            0,
            "B's put still queued after A's handle"
        );
        d.quiet(b).expect("quiet b");
        assert_eq!((direct(&arena, 8), direct(&arena, 16)), (2, 3));
        // A handle of B polled with `test` completes (its own domain moves, not only the default one).
        let t = w.put_nbi_in(b, 64, &[6]).expect("b nbi");
        let p = crate::transport::Pending::new(d.as_ref(), t, None);
        assert!(p.test(), "a polled handle of domain B completes");
        drop(p);
        assert_eq!(direct(&arena, 64), 6);

        // A fence in A does not split B's batch: B's two writes of one byte still land in reverse order.
        w.write_in(b, 40, &[1]).expect("first");
        d.fence(a).expect("fence a");
        w.write_in(b, 40, &[2]).expect("second");
        d.quiet(b).expect("quiet b");
        assert_eq!(direct(&arena, 40), 1, "B's batch was reversed");
        w.write_in(b, 48, &[1]).expect("first");
        d.fence(b).expect("fence b");
        w.write_in(b, 48, &[2]).expect("second");
        d.quiet_all().expect("quiet all");
        assert_eq!(direct(&arena, 48), 2, "B's own fence keeps issue order");
        // A read of this PE's own write sees it, whatever its domain.
        w.write_in(b, 56, &[9]).expect("write");
        let mut got = [0u8];
        w.read(56, &mut got).expect("read");
        assert_eq!(got, [9]);
    }
}
