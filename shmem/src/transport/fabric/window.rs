//! [`FabricWindow`]: a window onto one region (runtime words or user heap) of a PE the fabric reaches, on the
//! engine of `net/ofi`.

use super::{lock, Fabric};
use crate::error::{Error, Result};
use crate::net::ofi::{Ep, Region, Signal, SIGNAL_DIRECT_MIN, ZERO_COPY_MIN};
use crate::transport::{check_access, AmoOp, Ticket, Transport, Window};
use std::sync::Arc;

/// A window onto one region (runtime words or user heap) of a PE reached through the fabric.
#[derive(Debug)]
pub(crate) struct FabricWindow {
    pub(crate) t: Arc<Fabric>,
    pub(crate) pe: usize,
    pub(crate) region: Region,
}

impl FabricWindow {
    fn check(&self, what: &str, off: usize, len: usize, align: usize) -> Result<()> {
        check_access("fabric", what, off, len, align, self.region.len as usize)
    }

    /// How a blocking put of `len` bytes at `addr` goes without a copy, if it can ([`Ep::direct`]; never to a
    /// staged region).
    fn direct(&self, ep: &Ep, addr: usize, len: usize) -> Option<bool> {
        if self.region.staged {
            return None;
        }
        ep.direct(addr, len)
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
    /// transport fails naming why. A write the provider completed with an error needs none of that.
    fn write_direct(&self, off: usize, addr: usize, len: usize) -> Result<bool> {
        let mut ep = lock(&self.t.ep);
        let Some(private) = self.direct(&ep, addr, len) else {
            return Ok(false);
        };
        let what = if private {
            "put (zero-copy from private memory)"
        } else {
            "put (zero-copy from the heap)"
        };
        let (id, posted) = ep.put_direct(self.pe, self.region, off, addr, len);
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
        self.check("put", off, src.len(), 1)?;
        // A large source is written in place (and waited for) rather than copied, from this PE's heap or, when
        // the provider reads unregistered memory, from private memory. (A smaller one does not take the lock twice.)
        if src.len() >= ZERO_COPY_MIN && self.write_direct(off, src.as_ptr() as usize, src.len())? {
            return Ok(());
        }
        self.put_nbi(off, src).map(|_| ())
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
        if src.host_accessible() && !base.is_null() {
            let addr = base as usize + src_off;
            let mut ep = lock(&self.t.ep);
            if let Some(false) = self.direct(&ep, addr, len) {
                let (id, posted) = ep.put_direct(self.pe, self.region, off, addr, len);
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
    fn put_nbi(&self, off: usize, src: &[u8]) -> Result<Option<Ticket>> {
        self.check("put", off, src.len(), 1)?;
        if src.is_empty() {
            return Ok(None);
        }
        let mut ep = lock(&self.t.ep);
        if self.region.staged {
            return ep
                .stage_put(self.pe, self.region, off, src, None)
                .map(|id| Some(Ticket(id)));
        }
        ep.put(self.pe, self.region, off, src, None)
            .map(|id| Some(Ticket(id)))
    }
    fn get_nbi(&self, off: usize, dst: &mut [u8]) -> Result<Option<Ticket>> {
        self.check("get", off, dst.len(), 1)?;
        if dst.is_empty() {
            return Ok(None);
        }
        self.t.flush_pe(self.pe)?;
        let mut ep = lock(&self.t.ep);
        if self.region.staged {
            return ep
                .stage_get(self.pe, off, dst.len())
                .map(|id| Some(Ticket(id)));
        }
        ep.get(self.pe, self.region, off, dst.len())
            .map(|id| Some(Ticket(id)))
    }
    fn put_signal_nbi(
        &self,
        off: usize,
        src: &[u8],
        sig: usize,
        op: AmoOp,
        value: u64,
    ) -> Result<Option<Ticket>> {
        self.check("put_signal data", off, src.len(), 1)?;
        self.check("put_signal signal", sig, 8, 8)?;
        let s = Signal { sig, op, value };
        // A large source goes without a copy: the data is delivered (and waited for) first, so the signal needs
        // no ordering with it (FI_DELIVERY_COMPLETE: the data is visible at the target when the write completes).
        if src.len() >= SIGNAL_DIRECT_MIN
            && lock(&self.t.ep).offers(8, op, false)
            && self.write_direct(off, src.as_ptr() as usize, src.len())?
        {
            return self.amo_post(sig, 8, op, value).map(|()| None);
        }
        let mut ep = lock(&self.t.ep);
        if self.region.staged {
            return ep
                .stage_put(self.pe, self.region, off, src, Some(s))
                .map(|id| Some(Ticket(id)));
        }
        if !ep.offers(8, op, false) {
            drop(ep);
            // The provider lacks the signal's atomic: deliver the data, then emulate.
            if let Some(t) = self.put_nbi(off, src)? {
                self.t.complete(t)?;
            }
            self.amo(sig, 8, op, value)?;
            return Ok(None);
        }
        ep.put(self.pe, self.region, off, src, Some(s))
            .map(|id| Some(Ticket(id)))
    }
    fn amo_post(&self, off: usize, width: usize, op: AmoOp, operand: u64) -> Result<()> {
        self.check("atomic", off, width, width)?;
        if op == AmoOp::Fetch {
            return Ok(());
        }
        let mut ep = lock(&self.t.ep);
        if self.region.staged {
            return ep.stage_amo(self.pe, off, width, op, operand).map(|_| ());
        }
        if matches!(op, AmoOp::CompareSwap { .. }) || !ep.offers(width, op, false) {
            drop(ep);
            return self.amo(off, width, op, operand).map(|_| ());
        }
        ep.amo_start(self.pe, self.region, off, width, op, operand, false)
            .map(|_| ())
    }
    fn len(&self) -> usize {
        self.region.len as usize
    }
    fn fill(&self, off: usize, len: usize, byte: u8) -> Result<()> {
        self.write(off, &vec![byte; len])
    }
    fn amo(&self, off: usize, width: usize, op: AmoOp, operand: u64) -> Result<u64> {
        self.check("atomic", off, width, width)?;
        let old = if self.region.staged {
            self.t.flush_pe(self.pe)?;
            let t = lock(&self.t.ep).stage_amo(self.pe, off, width, op, operand)?;
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
                .fetch_amo(self.pe, self.region, off, width, op, operand)?
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
