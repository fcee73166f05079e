//! [`FabricWindow`]: a window onto one region (runtime words or user heap) of a PE the fabric reaches, on the
//! engine of `net/ofi`.

use super::{lock, Fabric};
use crate::error::{Error, Result};
use crate::net::ofi::{Ep, Region, Signal, SIGNAL_DIRECT_MIN, ZERO_COPY_MIN};
use crate::transport::{check_access, AmoOp, Domain, Ticket, Transport, Window};
use std::sync::{Arc, MutexGuard, RwLock};

/// The registered regions of one PE's window, as `(window offset, region)` in order of offset, none overlapping:
/// the runtime words (one region), the user heap (its first chunk, then one region per chunk it grew by, each
/// registered by its owner and its key published at the growing allocation's agreement; a device heap's scratch
/// tail, at the end of its reserve; team-space chunks, published to a team's members only). Offsets between
/// regions are unreachable. A staged region (a device heap served through messages) is addressed by window
/// offsets: its operations carry the offset in the window, which the owner checks against what it serves.
pub(crate) type Chunks = Arc<RwLock<Vec<(usize, Region)>>>;

/// Chunks of one region.
pub(crate) fn chunks(r: Region) -> Chunks {
    Arc::new(RwLock::new(vec![(0, r)]))
}

/// A user heap's chunks as its owner published them at set-up: its first region and, for a device heap, the
/// scratch tail `(offset, region)` at the end of its reserve (length 0: none).
pub(crate) fn heap_chunks(heap: Region, tail: (usize, Region)) -> Result<Chunks> {
    let c = chunks(heap);
    if tail.1.len > 0 {
        FabricWindow::add_chunk(&c, tail.0, tail.1)?;
    }
    Ok(c)
}

/// A window onto one region (runtime words or user heap) of a PE reached through the fabric.
#[derive(Debug)]
pub(crate) struct FabricWindow {
    pub(crate) t: Arc<Fabric>,
    pub(crate) pe: usize,
    pub(crate) chunks: Chunks,
    /// The region is host memory of its PE (runtime words, a host heap): a put-with-signal may reach it as one
    /// message.
    pub(crate) host: bool,
}

/// Where the chunks `c` end: the window's length.
fn chunks_end(c: &[(usize, Region)]) -> usize {
    c.last().map_or(0, |&(s, r)| s + r.len as usize)
}

/// The chunk of `c` holding `[off, off + len)` and the offset inside it; `None` when the range crosses from one
/// chunk into the next or lies before the first.
fn chunk_at(c: &[(usize, Region)], off: usize, len: usize) -> Option<(Region, usize)> {
    let i = c.partition_point(|&(s, _)| s <= off).checked_sub(1)?;
    let (s, r) = c[i];
    (off - s + len <= r.len as usize).then_some((r, off - s))
}

impl FabricWindow {
    fn check(&self, what: &str, off: usize, len: usize, align: usize) -> Result<()> {
        check_access("fabric", what, off, len, align, self.len())
    }

    /// The first region (all of a window that never grows; a staged device heap is one).
    fn first(&self) -> Region {
        self.chunks.read().unwrap_or_else(|p| p.into_inner())[0].1
    }

    /// The region holding `[off, off + len)` and the offset inside it; `None` when the range crosses from one
    /// chunk into the next (the caller checked it lies in the window).
    fn at(&self, off: usize, len: usize) -> Option<(Region, usize)> {
        let c = self.chunks.read().unwrap_or_else(|p| p.into_inner());
        chunk_at(&c, off, len)
    }

    /// [`FabricWindow::check`] and [`FabricWindow::at`] with one look at the chunks (a small put's path).
    fn checked_at(&self, what: &str, off: usize, len: usize) -> Result<Option<(Region, usize)>> {
        let c = self.chunks.read().unwrap_or_else(|p| p.into_inner());
        check_access("fabric", what, off, len, 1, chunks_end(&c))?;
        Ok(chunk_at(&c, off, len))
    }

    /// `[off, off + len)` cut at the chunks' boundaries, as (window offset, length) pieces; an error when part of
    /// it lies in no chunk (a heap's unreached part: ungrown, or a team range this PE is not a member of).
    fn pieces(&self, off: usize, len: usize) -> Result<Vec<(usize, usize)>> {
        let c = self.chunks.read().unwrap_or_else(|p| p.into_inner());
        let end = off + len;
        let v: Vec<(usize, usize)> = c
            .iter()
            .map(|&(s, r)| (s.max(off), (s + r.len as usize).min(end)))
            .filter(|&(a, b)| a < b)
            .map(|(a, b)| (a, b - a))
            .collect();
        if v.iter().map(|&(_, l)| l).sum::<usize>() != len {
            let have: Vec<String> = c
                .iter()
                .map(|&(s, r)| format!("[{s}, {})", s + r.len as usize))
                .collect();
            return Err(Error::Transport {
                transport: "fabric",
                message: format!(
                    "an access of {len} bytes at {off} of PE {}'s heap reaches past what this PE may reach of it \
                     ({}): part of it is not mapped on that PE, or not published to this PE",
                    self.pe,
                    have.join(", ")
                ),
            });
        }
        Ok(v)
    }

    /// The region of an atomic's word (never across chunks: chunks are page multiples, words aligned); an error
    /// when the word lies in no chunk this PE reaches.
    fn word(&self, off: usize, width: usize) -> Result<(Region, usize)> {
        self.at(off, width).ok_or_else(|| Error::Transport {
            transport: "fabric",
            message: format!(
                "atomic word at {off} of PE {} lies in no heap chunk this PE reaches (not mapped there, or \
                 not published to this PE)",
                self.pe
            ),
        })
    }

    /// A heap chunk PE `pe` registered when its heap grew (or a team range): make `[off, off + region.len)`
    /// reachable. It may not overlap a chunk known already.
    pub(crate) fn add_chunk(chunks: &Chunks, off: usize, region: Region) -> Result<()> {
        let mut c = chunks.write().unwrap_or_else(|p| p.into_inner());
        let end = off.saturating_add(region.len as usize);
        let i = c.partition_point(|&(s, _)| s < off);
        let after_prev = i == 0 || {
            let (s, r) = c[i - 1];
            s + r.len as usize <= off
        };
        let before_next = c.get(i).is_none_or(|&(s, _)| end <= s);
        // The same chunk again (a team-space chunk published to this PE by another team it shares with the
        // owner): kept.
        if c.get(i).is_some_and(|&(s, r)| s == off && r == region) {
            return Ok(());
        }
        if !after_prev || !before_next {
            return Err(Error::Transport {
                transport: "fabric",
                message: format!(
                    "a heap chunk of {} bytes at {off} overlaps a chunk registered before",
                    region.len
                ),
            });
        }
        c.insert(i, (off, region));
        Ok(())
    }

    /// Forget the chunk at `off` (a freed team-scoped allocation's; never the first region): operations there
    /// are refused again.
    pub(crate) fn remove_chunk(chunks: &Chunks, off: usize) {
        let mut c = chunks.write().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = c.iter().skip(1).position(|&(s, _)| s == off) {
            c.remove(i + 1);
        }
    }

    /// A put of `src` at `off` (checked against the window by the caller), copied (so `src` may be reused on
    /// return) or injected: the body of [`Window::put_nbi_in`], and of [`Window::write_in`] below the zero-copy
    /// size.
    fn put_copied(&self, d: Domain, off: usize, src: &[u8]) -> Result<Option<Ticket>> {
        self.put_copied_at(d, off, src, || self.at(off, src.len()))
    }

    /// [`FabricWindow::put_copied`] with the region holding the destination from `at` (read only for a put of
    /// some bytes).
    #[inline]
    fn put_copied_at(
        &self,
        d: Domain,
        off: usize,
        src: &[u8],
        at: impl FnOnce() -> Option<(Region, usize)>,
    ) -> Result<Option<Ticket>> {
        if src.is_empty() {
            return Ok(None);
        }
        let Some((region, roff)) = at() else {
            // Across heap chunks: a put per chunk, complete on return.
            for (o, l) in self.pieces(off, src.len())? {
                if let Some(t) = self.put_copied(d, o, &src[o - off..][..l])? {
                    self.t.complete(t)?;
                }
            }
            return Ok(None);
        };
        let mut ep = lock(&self.t.ep);
        if region.staged {
            return ep
                .stage_put(self.pe, d, region, off, src, None)
                .map(|id| Some(Ticket(id)));
        }
        ep.put(self.pe, d, region, roff, src, None)
            .map(|id| Some(Ticket(id)))
    }

    /// How a blocking put of `len` bytes at `addr` goes without a copy, if it can ([`Ep::direct`]; never to a
    /// staged region).
    fn direct(&self, ep: &Ep, addr: usize, len: usize) -> Option<bool> {
        if self.first().staged {
            return None;
        }
        ep.direct(addr, len)
    }

    /// Put `src` at `off` and wait until it is delivered (what a signal posted after it may then count on).
    fn put_delivered(&self, d: Domain, off: usize, src: &[u8]) -> Result<()> {
        if let Some(t) = self.put_nbi_in(d, off, src)? {
            self.t.complete(t)?;
        }
        Ok(())
    }

    /// The put-with-signal of both forms: a source of at least `direct_from` bytes goes without a copy when it
    /// can (`write_direct`: the data delivered and waited for first, so the signal needs no ordering with it,
    /// `FI_DELIVERY_COMPLETE` making the data visible at the target when the write completes), any other is
    /// copied and its signal posted behind it or once it is delivered ([`Ep::put`]). Into a peer's host memory,
    /// where the signal could not follow its data over a provider with manual progress, it goes as one message
    /// ([`Ep::am_signal`]) or as told writes and a signal message behind them ([`Ep::tells`]) instead.
    #[allow(clippy::too_many_arguments)]
    fn put_signal_from(
        &self,
        d: Domain,
        off: usize,
        src: &[u8],
        sig: usize,
        op: AmoOp,
        value: u64,
        direct_from: usize,
    ) -> Result<Option<Ticket>> {
        self.check("put_signal data", off, src.len(), 1)?;
        self.check("put_signal signal", sig, 8, 8)?;
        let s = Signal { sig, op, value };
        // The data's region, and the signal's offset when its word lies in the same one (one look-up each): the
        // write (or the message) carries the signal as an offset in the data's region.
        let at = self.at(off, src.len()).filter(|_| !src.is_empty());
        let same = at.and_then(|(region, _)| {
            self.at(sig, 8)
                .filter(|(r, _)| r.key == region.key)
                .map(|(_, soff)| soff)
        });
        if let (true, Some((region, roff)), Some(soff)) = (self.host, at, same) {
            let mut ep = lock(&self.t.ep);
            if !region.staged && ep.am_signal(src.len(), op) {
                // The signal would wait a round trip for the data's delivery: one message the target applies in
                // order (data, then signal) instead.
                return ep
                    .am_put_signal(self.pe, d, region, roff, src, soff, op, value)
                    .map(|id| Some(Ticket(id)));
            }
            if !region.staged && ep.tells(src.len(), op) {
                // Too large for one message: told writes, the signal as a message behind them.
                return self.told(
                    ep,
                    d,
                    off,
                    (region, roff),
                    src,
                    Signal { sig: soff, ..s },
                    direct_from,
                );
            }
        }
        if src.len() >= direct_from
            && lock(&self.t.ep).offers(8, op, false)
            && self.write_direct(d, off, src.as_ptr() as usize, src.len(), None)?
        {
            return self.amo_post_in(d, sig, 8, op, value).map(|()| None);
        }
        let Some((region, roff)) = at else {
            // Across heap chunks (or no data): the data delivered first, then the signal.
            self.put_delivered(d, off, src)?;
            return self.amo_post_in(d, sig, 8, op, value).map(|()| None);
        };
        let mut ep = lock(&self.t.ep);
        if region.staged {
            return ep
                .stage_put(self.pe, d, region, off, src, Some(s))
                .map(|id| Some(Ticket(id)));
        }
        if !ep.offers(8, op, false) {
            drop(ep);
            // The provider lacks the signal's atomic: deliver the data, then emulate.
            self.put_delivered(d, off, src)?;
            self.amo(sig, 8, op, value)?;
            return Ok(None);
        }
        // When the signal word lies in another chunk, the data is delivered first, then the signal.
        let Some(soff) = same else {
            drop(ep);
            self.put_delivered(d, off, src)?;
            return self.amo_post_in(d, sig, 8, op, value).map(|()| None);
        };
        let s = Signal { sig: soff, ..s };
        ep.put(self.pe, d, region, roff, src, Some(s))
            .map(|id| Some(Ticket(id)))
    }

    /// A put-with-signal to this peer's host memory as told writes and a signal message behind them
    /// ([`ofi::Ep::told_copied`]; `ep` held, which decided it): its data at `roff` of `region` (`off` in the
    /// window), signal `s` at its offset in that region. From `direct_from` bytes the data goes without a copy
    /// when it can, and the call returns once the writes completed (`None`), as `write_direct`'s; otherwise copied,
    /// with the signal's ticket.
    #[allow(clippy::too_many_arguments)]
    fn told<'a>(
        &'a self,
        mut ep: MutexGuard<'a, Ep>,
        d: Domain,
        off: usize,
        (region, roff): (Region, usize),
        src: &[u8],
        s: Signal,
        direct_from: usize,
    ) -> Result<Option<Ticket>> {
        if src.len() >= direct_from {
            drop(ep);
            if self.write_direct(d, off, src.as_ptr() as usize, src.len(), Some(s))? {
                return Ok(None);
            }
            ep = lock(&self.t.ep);
        }
        ep.told_copied(self.pe, d, region, roff, src, s)
            .map(|id| Some(Ticket(id)))
    }

    /// A blocking put of `len` bytes at `addr` (checked against the window by the caller) without a copy when
    /// [`FabricWindow::direct`] allows one: the provider reads the source in place, and the call returns once
    /// the write completed (delivered, with `FI_DELIVERY_COMPLETE`), when the source may be reused. `Ok(false)`
    /// when the source needs a copy.
    ///
    /// A private source is the caller's memory, which it may free as soon as this returns, error or not. When
    /// the wait ends while the write is still outstanding (the timeout, a lost peer, a failed completion-queue
    /// read), the provider could still read it afterwards, and only closing the endpoint stops that: the
    /// endpoint is shut down ([`Ep::shutdown`]) before the error returns, and every later operation of this
    /// transport fails naming why. A write the provider completed with an error needs none of that. With `told`,
    /// the writes tell the target of their landing and that signal (its offset in the data's region) follows them
    /// as a message ([`ofi::Ep::told_direct`]).
    fn write_direct(
        &self,
        d: Domain,
        off: usize,
        addr: usize,
        len: usize,
        told: Option<Signal>,
    ) -> Result<bool> {
        let Some((region, roff)) = self.at(off, len) else {
            return Ok(false);
        };
        let mut ep = lock(&self.t.ep);
        let Some(private) = self.direct(&ep, addr, len) else {
            return Ok(false);
        };
        let what = if private {
            "put (zero-copy from private memory)"
        } else {
            "put (zero-copy from the heap)"
        };
        let (id, posted) = match told {
            None => ep.put_direct(self.pe, d, region, roff, addr, len),
            Some(s) => ep.told_direct(self.pe, d, region, roff, addr, len, s),
        };
        drop(ep);
        let waited = posted.and_then(|()| self.t.wait(what, self.pe, |ep| !ep.in_flight(id)));
        let mut ep = lock(&self.t.ep);
        match waited {
            // Still outstanding: the provider may read the source after this returns.
            Err(e) if private && ep.in_flight(id) => {
                ep.shutdown(format!(
                    "a zero-copy put of {len} bytes to PE {} failed while the provider still read the caller's \
                     buffer ({e})",
                    self.pe
                ));
                return Err(match e {
                    Error::Timeout {
                        op,
                        waited,
                        limit,
                        detail,
                    } => Error::Timeout {
                        op,
                        waited,
                        limit,
                        detail: format!(
                            "{detail}; the fabric endpoint was closed so that the provider no longer reads the \
                             source, and every later fabric operation of this PE fails"
                        ),
                    },
                    e => e,
                });
            }
            // The heap is the runtime's registered memory, not the caller's: an outstanding write from it
            // completes (or fails) later, as a non-blocking put's would.
            Err(e) if ep.in_flight(id) => return Err(e),
            _ => {}
        }
        if let Some(e) = ep.take_error(id) {
            return Err(e);
        }
        waited.map(|()| true)
    }
}

impl Window for FabricWindow {
    fn write(&self, off: usize, src: &[u8]) -> Result<()> {
        self.write_in(Domain::DEFAULT, off, src)
    }
    fn put_nbi(&self, off: usize, src: &[u8]) -> Result<Option<Ticket>> {
        self.put_nbi_in(Domain::DEFAULT, off, src)
    }
    fn put_nbi_registered(&self, off: usize, src: &[u8]) -> Result<Option<Ticket>> {
        self.put_nbi_registered_in(Domain::DEFAULT, off, src)
    }
    fn get_nbi_registered(&self, off: usize, dst: &mut [u8]) -> Result<Option<Ticket>> {
        self.get_nbi_registered_in(Domain::DEFAULT, off, dst)
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
        if src.len() < ZERO_COPY_MIN {
            // Copied (or injected): the bounds and the region from one look at the chunks.
            let at = self.checked_at("put", off, src.len())?;
            return self.put_copied_at(d, off, src, || at).map(|_| ());
        }
        self.check("put", off, src.len(), 1)?;
        // A large source is written in place (and waited for) rather than copied, from this PE's heap or, when
        // the provider reads unregistered memory, from private memory. (A smaller one does not take the lock twice.)
        if src.len() >= ZERO_COPY_MIN
            && self.write_direct(d, off, src.as_ptr() as usize, src.len(), None)?
        {
            return Ok(());
        }
        self.put_copied(d, off, src).map(|_| ())
    }
    fn copy_from(&self, off: usize, src: &dyn Window, src_off: usize, len: usize) -> Result<()> {
        if let Some(t) = self.copy_from_nbi(off, src, src_off, len)? {
            self.t.complete(t)?;
        }
        Ok(())
    }
    fn copy_from_nbi(
        &self,
        off: usize,
        src: &dyn Window,
        src_off: usize,
        len: usize,
    ) -> Result<Option<Ticket>> {
        self.check("put", off, len, 1)?;
        check_access("fabric", "put (source)", src_off, len, 1, src.len())?;
        // This PE's registered heap as the source (put_sym): posted from it without a copy, and the blocking form
        // waits for the ticket (the heap, unlike a caller's buffer, stays valid whatever happens to a handle).
        let base = src.base();
        if let (true, false, Some((region, roff))) =
            (src.host_accessible(), base.is_null(), self.at(off, len))
        {
            let addr = base as usize + src_off;
            let mut ep = lock(&self.t.ep);
            if let Some(false) = self.direct(&ep, addr, len) {
                let (id, posted) = ep.put_direct(self.pe, Domain::DEFAULT, region, roff, addr, len);
                return posted.map(|()| Some(Ticket(id)));
            }
        }
        let mut buf = vec![0u8; len];
        src.read(src_off, &mut buf)?;
        self.write(off, &buf).map(|()| None)
    }
    fn read(&self, off: usize, dst: &mut [u8]) -> Result<()> {
        if let Some(t) = self.get_nbi(off, dst)? {
            let b = self.t.complete(t)?.unwrap_or_default();
            if b.len() != dst.len() {
                return Err(Error::Transport {
                    transport: "fabric",
                    message: format!(
                        "a get of {} bytes from PE {} completed with {}",
                        dst.len(),
                        self.pe,
                        b.len()
                    ),
                });
            }
            dst.copy_from_slice(&b);
        }
        Ok(())
    }
    fn put_nbi_in(&self, d: Domain, off: usize, src: &[u8]) -> Result<Option<Ticket>> {
        self.check("put", off, src.len(), 1)?;
        self.put_copied(d, off, src)
    }
    fn put_nbi_registered_in(&self, d: Domain, off: usize, src: &[u8]) -> Result<Option<Ticket>> {
        self.check("put", off, src.len(), 1)?;
        if src.is_empty() {
            return Ok(None);
        }
        // From the registered buffer in place, whatever its size: the caller keeps it unchanged until the ticket
        // completes (`core/reg.rs`). Across chunks, to a staged region, or once the endpoint is closed: copied.
        if let Some((region, roff)) = self.at(off, src.len()).filter(|(r, _)| !r.staged) {
            let addr = src.as_ptr() as usize;
            let mut ep = lock(&self.t.ep);
            if !ep.is_closed() && ep.user_desc(addr, src.len()).is_some() {
                let (id, posted) = ep.put_direct(self.pe, d, region, roff, addr, src.len());
                return posted.map(|()| Some(Ticket(id)));
            }
        }
        self.put_nbi_in(d, off, src)
    }
    fn get_nbi_registered_in(
        &self,
        d: Domain,
        off: usize,
        dst: &mut [u8],
    ) -> Result<Option<Ticket>> {
        self.check("get", off, dst.len(), 1)?;
        if dst.is_empty() {
            return Ok(None);
        }
        if let Some((region, roff)) = self.at(off, dst.len()).filter(|(r, _)| !r.staged) {
            let addr = dst.as_mut_ptr() as usize;
            if lock(&self.t.ep).user_desc(addr, dst.len()).is_some() {
                // A PE reads its own earlier writes (as `get_nbi`).
                self.t.flush_pe(self.pe)?;
                let id = lock(&self.t.ep).get_direct(self.pe, d, region, roff, addr, dst.len())?;
                return Ok(Some(Ticket(id)));
            }
        }
        self.read(off, dst).map(|()| None)
    }
    fn get_nbi_in(&self, d: Domain, off: usize, dst: &mut [u8]) -> Result<Option<Ticket>> {
        self.check("get", off, dst.len(), 1)?;
        if dst.is_empty() {
            return Ok(None);
        }
        let Some((region, roff)) = self.at(off, dst.len()) else {
            // Across heap chunks: a get per chunk, complete on return.
            for (o, l) in self.pieces(off, dst.len())? {
                self.read(o, &mut dst[o - off..][..l])?;
            }
            return Ok(None);
        };
        self.t.flush_pe(self.pe)?;
        let mut ep = lock(&self.t.ep);
        if region.staged {
            return ep
                .stage_get(self.pe, d, off, dst.len())
                .map(|id| Some(Ticket(id)));
        }
        ep.get(self.pe, d, region, roff, dst.len())
            .map(|id| Some(Ticket(id)))
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
        self.put_signal_from(d, off, src, sig, op, value, SIGNAL_DIRECT_MIN)
    }
    fn put_signal_in(
        &self,
        d: Domain,
        off: usize,
        src: &[u8],
        sig: usize,
        op: AmoOp,
        value: u64,
    ) -> Result<()> {
        // Blocking: where the signal waits for the data's delivery anyway, a source from ZERO_COPY_MIN goes
        // without a copy, as a blocking put's does (SIGNAL_DIRECT_MIN's docs).
        let direct_from =
            if src.len() >= ZERO_COPY_MIN && !lock(&self.t.ep).signal_follows_data(src.len()) {
                ZERO_COPY_MIN
            } else {
                SIGNAL_DIRECT_MIN
            };
        self.put_signal_from(d, off, src, sig, op, value, direct_from)
            .map(|_| ())
    }
    fn amo_post_in(
        &self,
        d: Domain,
        off: usize,
        width: usize,
        op: AmoOp,
        operand: u64,
    ) -> Result<()> {
        self.check("atomic", off, width, width)?;
        if op == AmoOp::Fetch {
            return Ok(());
        }
        let (region, roff) = self.word(off, width)?;
        let mut ep = lock(&self.t.ep);
        if region.staged {
            return ep
                .stage_amo(self.pe, d, off, width, op, operand)
                .map(|_| ());
        }
        if matches!(op, AmoOp::CompareSwap { .. }) || !ep.offers(width, op, false) {
            drop(ep);
            return self.amo(off, width, op, operand).map(|_| ());
        }
        ep.amo_start(self.pe, d, region, roff, width, op, operand, false)
            .map(|_| ())
    }
    fn len(&self) -> usize {
        chunks_end(&self.chunks.read().unwrap_or_else(|p| p.into_inner()))
    }
    fn grow(&self, len: usize) -> Result<()> {
        // The owner's chunks arrive at the growing allocation's agreement ([`Window::grow`] comes after).
        if len <= self.len() {
            return Ok(());
        }
        Err(Error::Transport {
            transport: "fabric",
            message: format!(
                "PE {}'s heap has {} bytes registered, short of {len}",
                self.pe,
                self.len()
            ),
        })
    }
    fn fill(&self, off: usize, len: usize, byte: u8) -> Result<()> {
        self.write(off, &vec![byte; len])
    }
    fn amo(&self, off: usize, width: usize, op: AmoOp, operand: u64) -> Result<u64> {
        self.check("atomic", off, width, width)?;
        let (region, roff) = self.word(off, width)?;
        let old = if region.staged {
            self.t.flush_pe(self.pe)?;
            let t =
                lock(&self.t.ep).stage_amo(self.pe, Domain::DEFAULT, off, width, op, operand)?;
            let bytes = self.t.complete(Ticket(t))?.unwrap_or_default();
            let mut w = [0u8; 8];
            w[..bytes.len().min(8)].copy_from_slice(&bytes[..bytes.len().min(8)]);
            let v = u64::from_le_bytes(w);
            if width == 4 {
                v & u32::MAX as u64
            } else {
                v
            }
        } else {
            self.t
                .fetch_amo(self.pe, region, roff, width, op, operand)?
        };
        Ok(if op == AmoOp::Set { 0 } else { old })
    }
    fn base(&self) -> *mut u8 {
        std::ptr::null_mut()
    }
    fn host_accessible(&self) -> bool {
        false
    }
}
