//! Collective memory management: `malloc`, `calloc`, `align`, `free`.
//!
//! Each call is collective over all PEs: a call on `TEAM_WORLD` that starts with the team's agreement (its
//! identity and arguments travel inside the synchronisation, no extra round trip) and, for allocations, ends with a
//! barrier. A PE that passes different arguments (with `XPUSHMEM_CHECK_SYMMETRY=1`, the default), or that is in
//! another collective altogether, makes the call fail on every PE with the same error, naming the PE, what it
//! passed and what PE 0 passed; the heap is then unchanged.
//!
//! The heap grows at the agreement. Every PE runs the same allocator over the same reserved offset space
//! (`[0, heap_max)`), so every PE finds the same offset and, when the allocation ends past the mapped part, the
//! same new size (the end rounded up to a multiple of the first chunk, `XPUSHMEM_SYMMETRIC_SIZE`). Each PE grows
//! its own heap (and registers the new chunk with the fabric, where one is in use), then a second agreement of the
//! call publishes every PE's outcome and chunk keys, after which each PE reaches the peers' new parts: no PE touches a
//! peer's new chunk before it exists, and a PE that cannot grow fails the call on every PE. Growth is eager at
//! the agreement rather than lazy on first touch: every access checks its range against the window's length
//! anyway, and a fault handler (lazy mapping) would put a signal handler into every process that links the
//! library. Device heaps take the same path (`transport/ze.rs`, `Growth`): each PE maps a new chunk of device
//! memory into its reserve, and after the second agreement the node's PEs pass the chunks' descriptors and map
//! their peers'; when that agreement fails, each PE unmaps its new chunk again (`Peers::grow_abort`), so every
//! PE's heap keeps the same chunks.
//!
//! Team-scoped allocations ([`Shmem::team_malloc`] and its siblings) are collective over one team: its members
//! call, the other PEs need not. They keep symmetric offsets without touching the world's allocator, which must
//! stay the same on every PE: they live in a second reserve after the world's, `[T, T + heap_max)` (`T`: `heap_max` rounded up to a power of two) of the
//! symmetric space, with an allocator of their own on every PE (the team space). Members of different teams have
//! different histories there, so a team allocation's offset is agreed among the members: each proposes the first
//! fit at or after a hint (0 at first) in its own team space, the team's agreement (which also carries the call's
//! identity, so a mismatch fails it on every member) gathers the proposals, and when they differ every member
//! retries from the largest; when they agree, the range is free on every member and each takes it. Members whose
//! team-space history is the same (the usual case: one group allocating in turn) agree at once. Each member then
//! grows its own heap file to cover the range and, after the closing agreement (which fails the call on every
//! member when one could not grow), makes the other members' ranges reachable. A range is symmetric only among the
//! team's members; other PEs never see it. Over the fabric, each member registers its team space as it grows over
//! it (one chunk per growth, a fresh random key each) and the closing agreement carries, one per round, the
//! records of its chunks that the range overlaps; the members adopt them, and no other PE learns those keys.
//! Team-scoped allocations need a team space: host heaps (not with a symmetric data segment over the fabric, whose
//! heap does not grow) and device heaps, on one node or over the fabric.
//!
//! On device heaps the team space lies in every device reserve after the world's (`hal/ze/ipc.rs`), and each
//! team-scoped allocation is whole device pages with a chunk of physical memory of its own on each member
//! (`transport/ze.rs`, `Growth::team_grow_own`): each member maps its chunk, the team's agreement publishes whether
//! every member could (else each unmaps its own, and the call fails on every member), the members pass their
//! chunks' descriptors among themselves only and map each other's, and one more agreement says whether every
//! member could (else each unmaps them all). A free unmaps the chunks on every member (a later allocation of other
//! members at that offset maps fresh ones), so a kernel must not touch a freed team allocation: the device
//! library's check accepts the team space up to the end of the chunks mapped, holes of freed ones included.
//! Over the fabric only the members the device maps pass descriptors; each member registers its chunk with the
//! fabric (a staged heap describes it) once the chunks are mapped, the last agreement carries the records to the
//! members, who adopt them, and the staging path and the host proxy serve the chunk from then on; a free stops
//! serving it and closes its registration before the chunk is unmapped (`Peers::team_device_release`).

use super::ctx::Ctx;
use crate::core::Shmem;
use crate::error::{Error, Result};
use crate::team::{BarrierAlgo, CallId, Team, COMMON, INFO};
use crate::types::{SymSlice, Symmetric};
use std::sync::atomic::Ordering;

/// Identity words of an allocation call (see `team::describe`).
/// The bytes of `len` elements of `T`, or the argument error: more than `max` bytes (the limit that `limit`
/// names), or an alignment that is not a power of two.
fn alloc_bytes<T: Symmetric>(len: usize, align: usize, max: usize, limit: &str) -> Result<usize> {
    let elem = std::mem::size_of::<T>();
    let bytes = len.checked_mul(elem).filter(|&b| b <= max).ok_or_else(|| {
        Error::invalid(
            "len",
            len,
            format!("{len} elements of {elem} bytes exceed the heap's limit {max} bytes ({limit})"),
        )
    })?;
    if !align.is_power_of_two() {
        return Err(Error::invalid("align", align, "must be a power of two"));
    }
    Ok(bytes)
}

/// Whether an allocation call zeroes its memory.
fn zero_call(call: CallId) -> bool {
    call == CallId::Calloc
}

fn alloc_words(call: CallId, len: usize, align: usize, off: usize, elem: usize) -> [u64; COMMON] {
    let mut w = call.words();
    w[3] = len as u64;
    w[4] = align as u64;
    w[5] = off as u64;
    w[6] = elem as u64;
    w
}

impl Shmem {
    /// A collective allocation over all PEs. `ident`: the identity words the agreement carries (the allocation's
    /// own, or those of the call that needs the allocation); `op`: the call named in errors.
    pub(crate) fn alloc_collective<T: Symmetric>(
        &self,
        ident: [u64; COMMON],
        len: usize,
        align: usize,
        zero: bool,
        op: &'static str,
    ) -> Result<SymSlice<T>> {
        let max = self.heap_max();
        let local = alloc_bytes::<T>(len, align, max, self.heap_limit());
        let mut ctx = self.teams().world_ctx(self, op);
        // A bad size on one PE is reported as a mismatch on the others.
        ctx.enter(
            ident,
            [0; INFO],
            local.as_ref().map(|_| ()).map_err(Clone::clone),
            false,
        )?;
        let bytes = local?;
        let align = align.max(std::mem::align_of::<T>());
        let off = if bytes == 0 {
            0
        } else {
            let mut heap = self.heap.lock().unwrap_or_else(|p| p.into_inner());
            let off = heap
                .alloc(bytes, align)
                .ok_or_else(|| Error::HeapExhausted {
                    call: op,
                    requested: bytes,
                    align,
                    heap_size: max,
                    limit: self.heap_limit(),
                    in_use: heap.in_use(),
                    largest_free: heap.largest_free(),
                })?;
            drop(heap);
            if let Err(e) = self.grow(&mut ctx, ident, off + bytes) {
                self.heap
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .free(off);
                return Err(e);
            }
            off
        };
        if zero && bytes > 0 {
            self.local_map().fill(off, bytes, 0)?;
        }
        tracing::trace!(pe = self.me, call = op, bytes, off, "symmetric allocation");
        ctx.barrier(BarrierAlgo::Dissemination)?;
        Ok(SymSlice::new(off, len))
    }

    /// What limits the heap, for errors: the variable to raise.
    fn heap_limit(&self) -> &'static str {
        if !self.peers.heap_grows() {
            "XPUSHMEM_SYMMETRIC_SIZE: this heap does not grow (a host heap with a symmetric data segment over the \
             fabric)"
        } else if self.cfg.symmetric_max == Some(self.heap_max()) {
            "XPUSHMEM_SYMMETRIC_MAX"
        } else {
            "the address space reserved for the heap (unset XPUSHMEM_SYMMETRIC_MAX: 1T, less on a node of many PEs \
             or under an address-space limit); XPUSHMEM_SYMMETRIC_MAX sets it"
        }
    }

    /// Grow the heap on every PE so that its first `end` bytes are mapped (nothing when they are): to `end`
    /// rounded up to a multiple of the first chunk, at most the maximum (the same on every PE, which all run this
    /// with the same `end`). Each PE grows its own heap (and registers the new chunk with the fabric), then one
    /// more agreement of the call (`ctx`, `ident`) publishes every PE's outcome and chunk: a PE that could not
    /// grow fails the call on every PE; else each PE adopts the others' chunks and reaches their new parts.
    fn grow(&self, ctx: &mut Ctx<'_>, ident: [u64; COMMON], end: usize) -> Result<()> {
        let from = self.heap_size();
        if end <= from {
            return Ok(());
        }
        let chunk = self.cfg.symmetric_size.max(1);
        let new = end
            .checked_next_multiple_of(chunk)
            .unwrap_or(usize::MAX)
            .min(self.heap_max());
        let mine = self.peers.grow_own(from, new);
        // The exchange rides on a second agreement of the call (its waits drive the transports' progress, which
        // a peer completing its last operation to this PE may need): every PE's outcome and, with the fabric, its
        // new chunk's key, address, offset and length. A PE that could not grow reports its own error; the
        // others fail with the agreement's verdict naming it.
        let mut info = [0u64; INFO];
        if let Ok(rec) = &mine {
            for (w, b) in info.iter_mut().zip(rec.chunks_exact(8)) {
                *w = u64::from_le_bytes(b.try_into().unwrap_or_default());
            }
            info[INFO - 1] = rec.len() as u64;
        }
        let all = ctx
            .enter(
                ident,
                info,
                mine.as_ref().map(|_| ()).map_err(Clone::clone),
                true,
            )
            .inspect_err(|_| self.peers.grow_abort())?;
        let chunks: Vec<Vec<u8>> = all
            .iter()
            .map(|w| {
                let n = (w[INFO - 1] as usize).min(8 * (INFO - 1));
                w.iter().flat_map(|x| x.to_le_bytes()).take(n).collect()
            })
            .collect();
        self.peers.grow_peers(new, &chunks)?;
        self.heap_size.fetch_max(new, Ordering::AcqRel);
        tracing::debug!(pe = self.me, heap_bytes = new, "symmetric heap grown");
        Ok(())
    }

    fn alloc_call<T: Symmetric>(
        &self,
        call: CallId,
        len: usize,
        align: usize,
    ) -> Result<SymSlice<T>> {
        let words = alloc_words(call, len, align, 0, std::mem::size_of::<T>());
        self.alloc_collective(words, len, align, zero_call(call), call.name())
    }

    /// Allocate `len` elements of `T` on every PE (collective; same `len` everywhere). Contents are unspecified.
    /// A zero-length request returns an empty slice and allocates nothing.
    ///
    /// ```
    /// # let sh = xpushmem::init_single().unwrap();
    /// let buf = sh.malloc::<f64>(1024).unwrap();
    /// sh.put(buf, &[1.0; 1024], sh.my_pe()).unwrap();
    /// sh.free(buf).unwrap();
    /// ```
    pub fn malloc<T: Symmetric>(&self, len: usize) -> Result<SymSlice<T>> {
        self.alloc_call(CallId::Malloc, len, 1)
    }

    /// Allocate `len` zeroed elements of `T` on every PE (collective).
    pub fn calloc<T: Symmetric>(&self, len: usize) -> Result<SymSlice<T>> {
        self.alloc_call(CallId::Calloc, len, 1)
    }

    /// Allocate `len` elements of `T` aligned to `align` bytes (a power of two) on every PE (collective).
    pub fn align<T: Symmetric>(&self, align: usize, len: usize) -> Result<SymSlice<T>> {
        self.alloc_call(CallId::Align, len, align)
    }

    /// Free an allocation (collective; starts with a barrier so no PE still accesses it).
    pub fn free<T: Symmetric>(&self, s: SymSlice<T>) -> Result<()> {
        let words = alloc_words(CallId::Free, s.len, 0, s.off, std::mem::size_of::<T>());
        self.teams()
            .world_ctx(self, "free")
            .enter(words, [0; INFO], Ok(()), false)?;
        if s.len == 0 {
            return Ok(());
        }
        let mut heap = self.heap.lock().unwrap_or_else(|p| p.into_inner());
        heap.free(s.off).map(|_| ()).ok_or_else(|| {
            let why = if self.peers.team_base().is_some_and(|b| s.off >= b) {
                "is a team-scoped allocation: free it with team_free on its team"
            } else {
                "does not start a live symmetric allocation (freed twice, or a sub-slice?)"
            };
            Error::invalid("s", format!("{s:?}"), why)
        })
    }

    /// Allocate `len` elements of `T` on every member of `team`, collective over the team only (the other PEs do
    /// not take part); the same `len` on every member. The offset is symmetric among the members (see the module
    /// docs); on `TEAM_WORLD` this is [`Shmem::malloc`].
    pub fn team_malloc<T: Symmetric>(&self, team: &Team, len: usize) -> Result<SymSlice<T>> {
        self.team_alloc(team, CallId::Malloc, len, 1)
    }

    /// [`Shmem::team_malloc`], zeroed.
    pub fn team_calloc<T: Symmetric>(&self, team: &Team, len: usize) -> Result<SymSlice<T>> {
        self.team_alloc(team, CallId::Calloc, len, 1)
    }

    /// [`Shmem::team_malloc`] aligned to `align` bytes (a power of two).
    pub fn team_align<T: Symmetric>(
        &self,
        team: &Team,
        align: usize,
        len: usize,
    ) -> Result<SymSlice<T>> {
        self.team_alloc(team, CallId::Align, len, align)
    }

    /// Free an allocation of [`Shmem::team_malloc`] (collective over `team`, which must be the team that
    /// allocated it; starts with the team's agreement so no member still accesses it).
    pub fn team_free<T: Symmetric>(&self, team: &Team, s: SymSlice<T>) -> Result<()> {
        if team.is_world() {
            return self.free(s);
        }
        let words = alloc_words(CallId::Free, s.len, 0, s.off, std::mem::size_of::<T>());
        team.ctx(self, "free")?
            .enter(words, [0; INFO], Ok(()), false)?;
        if s.len == 0 {
            return Ok(());
        }
        let mut heap = self.team_heap.lock().unwrap_or_else(|p| p.into_inner());
        let freed = self
            .peers
            .team_base()
            .and_then(|b| s.off.checked_sub(b))
            .and_then(|off| heap.free(off));
        if let (Some(_), Some(_)) = (freed, self.peers.device_growth()) {
            // Device heaps: the allocation's chunks go (see the module docs), over the fabric their registrations
            // first.
            let members: Vec<usize> = (0..team.n_pes())
                .map(|i| team.global_pe(i))
                .collect::<Result<_>>()?;
            self.peers.team_device_release(s.off, &members);
        }
        freed
            .map(|_| ())
            .ok_or_else(|| {
                Error::invalid(
                    "s",
                    format!("{s:?}"),
                    "does not start a live team-scoped allocation (freed twice, a sub-slice, or a world allocation?)",
                )
            })
    }

    fn team_alloc<T: Symmetric>(
        &self,
        team: &Team,
        call: CallId,
        len: usize,
        align: usize,
    ) -> Result<SymSlice<T>> {
        if team.is_world() {
            return self.alloc_call(call, len, align);
        }
        let op = call.name();
        let elem = std::mem::size_of::<T>();
        let max = self.heap_max();
        let base = self.peers.team_base();
        let limit = "the team space, as large as the heap's maximum";
        let local = match base {
            None => Err(Error::invalid(
                "team",
                team.describe(),
                format!(
                    "{op}: team-scoped allocations need a team space: host heaps (on one node or over the \
                     fabric, without a symmetric data segment over the fabric) or device heaps; this job's heap \
                     is {:?}",
                    self.heap_kind
                ),
            )),
            Some(_) => alloc_bytes::<T>(len, align, max, limit),
        };
        let device = self.peers.device_growth();
        // On device heaps each allocation is whole pages of its own (a chunk per member, see the module docs).
        let page = device.map_or(1, |g| g.page_size());
        let local = local.map(|b| b.next_multiple_of(page));
        let align = align.max(std::mem::align_of::<T>()).max(page);
        let words = alloc_words(call, len, align, 0, elem);
        let mut ctx = team.ctx(self, op)?;
        // Rounds of proposals until every member proposes the same offset (see the module docs).
        let mut hint = 0usize;
        let off = loop {
            let fit = match &local {
                Ok(b) if *b > 0 => self
                    .team_heap
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .fit_from(hint, *b, align),
                _ => Some(0),
            };
            let mut info = [0u64; INFO];
            info[0] = fit.map_or(u64::MAX, |f| f as u64);
            let all = ctx.enter(
                words,
                info,
                local.as_ref().map(|_| ()).map_err(Clone::clone),
                true,
            )?;
            let bytes = *local.as_ref().map_err(Clone::clone)?;
            if bytes == 0 {
                break None;
            }
            if let Some(i) = all.iter().position(|w| w[0] == u64::MAX) {
                let heap = self.team_heap.lock().unwrap_or_else(|p| p.into_inner());
                return Err(Error::HeapExhausted {
                    call: op,
                    requested: bytes,
                    align,
                    heap_size: max,
                    limit: if i == team.my_pe() {
                        "the team space of this PE (XPUSHMEM_SYMMETRIC_MAX sets it)"
                    } else {
                        "the team space of another member (XPUSHMEM_SYMMETRIC_MAX sets it)"
                    },
                    in_use: heap.in_use(),
                    largest_free: heap.largest_free(),
                });
            }
            let most = all.iter().map(|w| w[0]).max().unwrap_or(0) as usize;
            if all.iter().all(|w| w[0] as usize == most) {
                let mut heap = self.team_heap.lock().unwrap_or_else(|p| p.into_inner());
                heap.alloc_at(most, bytes).ok_or_else(|| Error::Transport {
                    transport: "heap",
                    message: format!(
                        "{op}: the agreed team-space offset {most} is taken on this PE"
                    ),
                })?;
                break Some((most, bytes));
            }
            hint = most;
        };
        let Some((rel, bytes)) = off else {
            return Ok(SymSlice::new(0, 0));
        };
        let base = base.unwrap_or_default();
        let members: Vec<usize> = (0..team.n_pes())
            .map(|i| team.global_pe(i))
            .collect::<Result<_>>()?;
        // Device heaps: each member maps its chunk and the others' (agreed among them, see the module docs). Host
        // heaps: each member grows its own heap to cover the range (over the fabric: registers it), then a closing
        // agreement publishes every member's outcome (and, over the fabric, its chunks of the range), after which
        // each reaches the others' ranges.
        let end = (base + rel + bytes).next_multiple_of(4096);
        let placed = match device {
            Some(g) => self.team_map_device(g, &mut ctx, words, &members, base + rel, bytes),
            None => {
                let grown = self.peers.team_grow_own(base + rel, end).and_then(|recs| {
                    if zero_call(call) {
                        self.local_map().fill(base + rel, bytes, 0)?;
                    }
                    Ok(recs)
                });
                self.publish_team_chunks(&mut ctx, words, &members, grown)
            }
        };
        if let Err(e) = placed {
            self.team_heap
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .free(rel);
            return Err(e);
        }
        if device.is_some() {
            // The device chunks are mapped on every member: each zeroes its own, then the barrier lets the members
            // use each other's.
            if zero_call(call) {
                self.local_map().fill(base + rel, bytes, 0)?;
            }
            ctx.barrier(BarrierAlgo::Dissemination)?;
        } else {
            self.peers.grow_windows(&members, end)?;
        }
        self.team_mapped.fetch_max(end - base, Ordering::AcqRel);
        tracing::trace!(
            pe = self.me,
            call = op,
            bytes,
            off = base + rel,
            "team-scoped allocation"
        );
        Ok(SymSlice::new(base + rel, len))
    }

    /// Map a team-scoped allocation `[off, off + bytes)` on device heaps (see the module docs): this PE's chunk, an
    /// agreement of the call (`ctx`, `ident`) on whether every member could, the exchange of the chunks among the
    /// members this device maps and, over the fabric, the registration of this PE's chunk, then an agreement that
    /// says whether every member could and carries the registrations' records, which the members adopt. On an
    /// error nothing of it stays mapped (or registered) here, and every member fails.
    fn team_map_device(
        &self,
        g: &crate::transport::ze::Growth,
        ctx: &mut Ctx<'_>,
        ident: [u64; COMMON],
        members: &[usize],
        off: usize,
        bytes: usize,
    ) -> Result<()> {
        let chunk = g.team_grow_own(off, bytes, members);
        let verdict = chunk.as_ref().map(|_| ()).map_err(Clone::clone);
        let agreed = ctx.enter(ident, [0; INFO], verdict, false);
        // The agreement fails on every member when any member's chunk failed (this PE's own error first).
        let c = match (chunk, agreed) {
            (Ok(c), Ok(_)) => c,
            (Ok(c), Err(e)) => {
                g.team_abort(c);
                return Err(e);
            }
            (Err(e), _) => return Err(e),
        };
        // On an error `team_map_peers` leaves nothing mapped; after it, the chunks are released on any error.
        let peers_mapped = g.team_map_peers(c);
        let ok = peers_mapped.is_ok();
        let mapped = peers_mapped.and_then(|()| self.peers.team_device_register(off, bytes));
        let info = record_info(mapped.as_ref().ok().copied().flatten());
        let all = ctx
            .enter(ident, info, mapped.map(drop), true)
            .and_then(|all| self.adopt_records(members, &all));
        match all {
            Ok(()) => {
                self.peers.team_device_serve(off, bytes);
                Ok(())
            }
            Err(e) => {
                if ok {
                    self.peers.team_device_release(off, members);
                }
                Err(e)
            }
        }
    }

    /// A team-scoped allocation's closing agreement among `members` (the team of `ctx`): every member's outcome
    /// `grown` and, over the fabric, its team-space chunks of the range ([`crate::transport::Peers::team_grow_own`]),
    /// one record per round (the rounds go on while any member has more), adopted by every member. Fails on every
    /// member when one could not grow.
    fn publish_team_chunks(
        &self,
        ctx: &mut Ctx<'_>,
        words: [u64; COMMON],
        members: &[usize],
        grown: Result<Vec<[u64; 4]>>,
    ) -> Result<()> {
        let (mut recs, local) = match grown {
            Ok(r) => (r, Ok(())),
            Err(e) => (Vec::new(), Err(e)),
        };
        let mut local = Some(local);
        loop {
            let mut info = record_info((!recs.is_empty()).then(|| recs.remove(0)));
            info[5] = recs.len() as u64;
            let all = ctx.enter(words, info, local.take().unwrap_or(Ok(())), true)?;
            self.adopt_records(members, &all)?;
            if all.iter().all(|w| w[5] == 0) {
                return Ok(());
            }
        }
    }

    /// Adopt the team-space chunk records that `members` sent in an agreement's words ([`record_info`]'s layout).
    fn adopt_records(&self, members: &[usize], all: &[[u64; INFO]]) -> Result<()> {
        members
            .iter()
            .zip(all)
            .filter(|(_, w)| w[4] == 1)
            .try_for_each(|(&pe, w)| self.peers.team_adopt(pe, [w[0], w[1], w[2], w[3]]))
    }

    /// Bytes of the heap currently allocated (the runtime's own words included).
    pub fn heap_in_use(&self) -> usize {
        self.heap.lock().unwrap_or_else(|p| p.into_inner()).in_use()
    }
}

/// An agreement's words carrying one team-space chunk record, if any (key, address, offset, length in words 0-3,
/// word 4 set to 1), which the members adopt ([`Shmem::adopt_records`]).
fn record_info(rec: Option<[u64; 4]>) -> [u64; INFO] {
    let mut info = [0u64; INFO];
    if let Some(r) = rec {
        info[..4].copy_from_slice(&r);
        info[4] = 1;
    }
    info
}
