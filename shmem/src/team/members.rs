//! Teams made by their members only ([`Shmem::team_of_members`]): a set of PEs forms a team among themselves,
//! the other PEs never call (a process group of PyTorch, which only its ranks see, becomes a team this way).
//!
//! There is no team to synchronise on yet, so the creation runs on words of its own in every PE's system region
//! (`core::teams::members_area`): a record (what this PE proposes in the round it is in) and one mailbox word per
//! PE, which counts the round signals that PE has ever sent this one. A round: each member writes its record,
//! adds 1 to its mailbox word on every other member and waits until each member's word on itself has grown by 1
//! (the counts are per pair of PEs, so creations of other sets of PEs, which share no pair with this one or come
//! before or after it in both PEs' order, do not mix with it); it reads every member's record, then signals and
//! waits once more, after which every member has read every record and the records may be rewritten. Members see
//! the same records, so they reach the same verdict in the same round: the call fails on every member, or on
//! none.
//!
//! The first rounds check the call and place the team's slot: each record carries the digest of the member list
//! (in team order) and of the caller's tag, and the first fit of a slot at or after a hint in this PE's team space
//! (the space of the team-scoped allocations, `memory.rs`). A digest that differs from the first member's fails
//! the call with a mismatch naming that member; proposals that differ make every member retry from the largest,
//! as a team-scoped allocation does; equal proposals are free on every member and each takes the range. Each
//! member then grows its heap over the range and zeroes its slot, and a last round publishes whether it could:
//! nobody signals into a slot before its owner zeroed it, and a member that could not fails the call on every
//! member. The team lives in the team space, so it needs a team space: host heaps (on one node, or over the
//! fabric without a symmetric data segment) or device heaps (on one node or over the fabric); elsewhere the call
//! fails at once, on every member, without waiting for anyone. Over the fabric (host heaps), more rounds carry
//! each member's registered team-space chunks that the slot overlaps (`Peers::team_grow_own`: how many, then one a
//! round), which the members adopt. On device heaps the slot is whole device pages with a chunk of its own on
//! each member, as a team-scoped allocation's (`memory.rs`): each member maps its chunk before the last round,
//! then the members pass the chunks among themselves, and one more round says whether every member mapped the
//! others' (else each unmaps them all). Over the fabric each member also registers its chunk before that round
//! (`Peers::team_device_register`) and serves it after it, and a last round carries each member's record, which
//! the members adopt.
//!
//! A member list that names a PE which never calls (or calls with a list that leaves this PE out) cannot be told
//! from a slow PE: the call ends with the runtime's timeout, naming the members that did not arrive.

use super::*;
use crate::core::teams::members_area::{MAILBOX, MAILBOX_PES, RECORD, RECORD_WORDS};
use crate::core::LocalWord;
use crate::transport::AmoOp;

const OP: &str = "team_of_members";

/// First word of the digest of a creation (tells it from other uses of a digest).
const SALT: u64 = 0x7465_616d_6f66_6d65;

/// A record: the call's digest, the caller's tag, the number of members, then a proposal or a verdict.
type Record = [u64; RECORD_WORDS];

/// Word of a record that carries the round's proposal or verdict.
const VALUE: usize = 3;

impl Shmem {
    /// Make a team of the PEs `pes` (global PE numbers, in team order: `pes[i]` is the team's PE `i`), collective
    /// over those PEs only: every member calls with the same `pes` and the same `tag` (a number that tells this
    /// creation from others of the same PEs, for instance a hash of the group's name); the other PEs never call.
    /// Creations that share members must be made in the same order on those members.
    ///
    /// The team's synchronisation words are placed among the members only, in their team space (as a team-scoped
    /// allocation, see [`Shmem::team_malloc`]), so the team needs a team space: host heaps, on one node or over
    /// the fabric (not with a symmetric data segment over the fabric), or device heaps. Elsewhere, or
    /// with a bad list (empty, a PE out of range or listed twice, this
    /// PE missing), the call fails at once. Members that pass different lists or tags fail with
    /// [`Error::Mismatch`] on every member. Destroy the team with [`Shmem::team_destroy`] (collective over its
    /// members).
    ///
    /// ```
    /// # let sh = xpushmem::init_single().unwrap();
    /// let t = sh.team_of_members(&[0], 7).unwrap();
    /// assert_eq!((t.n_pes(), t.my_pe()), (1, 0));
    /// let buf = sh.team_malloc::<u64>(&t, 4).unwrap();
    /// sh.team_free(&t, buf).unwrap();
    /// sh.team_destroy(t).unwrap();
    /// ```
    pub fn team_of_members(&self, pes: &[usize], tag: u64) -> Result<Team> {
        let me = self.me;
        let base = self.peers.team_base().ok_or_else(|| {
            Error::invalid(
                "pes",
                format!("{pes:?}"),
                format!(
                    "{OP}: a team made by its members only keeps its synchronisation words in the members' team \
                     space, which needs host heaps (and no symmetric data segment over the fabric) or device \
                     heaps; this job's heap is {:?}",
                    self.heap_kind,
                ),
            )
        })?;
        let idx = check_members(pes, me, self.n_pes())?;
        let n = pes.len() as u64;
        let dig = digest(
            &[SALT, tag, n]
                .into_iter()
                .chain(pes.iter().map(|&p| p as u64))
                .collect::<Vec<_>>(),
        );
        let mut counts = lock(&self.teams().members_rounds);
        let device = self.peers.device_growth();
        // On device heaps the slot is whole pages of its own (a chunk per member, see the module docs).
        let page = device.map_or(1, |g| g.page_size());
        let bytes = SLOT_BYTES.next_multiple_of(page);
        let align = page.max(64);
        // Rounds of proposals until every member proposes the same range (see the module docs).
        let mut hint = 0usize;
        let rel = loop {
            let fit = lock(&self.team_heap).fit_from(hint, bytes, align);
            let all = self.members_round(
                pes,
                &mut counts,
                [dig, tag, n, fit.map_or(u64::MAX, |f| f as u64)],
                "placing the team's scratch",
            )?;
            if let Some(i) = all.iter().position(|r| r[0] != all[0][0]) {
                let show = |r: &Record| {
                    format!("tag {:#x} and {} members (digest {:#x})", r[1], r[2], r[0])
                };
                return Err(Error::Mismatch {
                    call: OP,
                    pe: pes[i],
                    theirs: show(&all[i]),
                    reference_pe: pes[0],
                    ours: show(&all[0]),
                });
            }
            if let Some(i) = all.iter().position(|r| r[VALUE] == u64::MAX) {
                let heap = lock(&self.team_heap);
                return Err(Error::HeapExhausted {
                    call: OP,
                    requested: bytes,
                    align,
                    heap_size: self.heap_max(),
                    limit: if i == idx {
                        "the team space of this PE (XPUSHMEM_SYMMETRIC_MAX sets it)"
                    } else {
                        "the team space of another member (XPUSHMEM_SYMMETRIC_MAX sets it)"
                    },
                    in_use: heap.in_use(),
                    largest_free: heap.largest_free(),
                });
            }
            let most = all.iter().map(|r| r[VALUE]).max().unwrap_or(0) as usize;
            if all.iter().all(|r| r[VALUE] as usize == most) {
                break most;
            }
            hint = most;
        };
        // Take the range, grow this PE's heap over it and zero the slot; the last round tells every member whether
        // every member could.
        let end = (base + rel + bytes).next_multiple_of(4096);
        let taken = lock(&self.team_heap).alloc_at(rel, bytes).is_some();
        let mut chunk = None;
        let placed = if taken {
            match device {
                Some(g) => g.team_grow_own(base + rel, bytes, pes).map(|c| {
                    chunk = Some(c);
                    Vec::new()
                }),
                None => self.peers.team_grow_own(base + rel, end),
            }
            .and_then(|recs| self.local_map().fill(base + rel, bytes, 0).map(|()| recs))
        } else {
            Err(Error::State(format!(
                "{OP}: the agreed team-space offset {rel} is taken on this PE"
            )))
        };
        let all = self.members_round(
            pes,
            &mut counts,
            [dig, tag, n, u64::from(placed.is_ok())],
            "zeroing the team's scratch",
        );
        let failed = all
            .as_ref()
            .ok()
            .and_then(|all| all.iter().position(|r| r[VALUE] == 0));
        if placed.is_err() || all.is_err() || failed.is_some() {
            if let (Some(g), Some(c)) = (device, chunk) {
                g.team_abort(c);
            }
            if taken {
                lock(&self.team_heap).free(rel);
            }
            placed?;
            all?;
            let i = failed.unwrap_or_default();
            return Err(Error::State(format!(
                "{OP}: member {i} (PE {}) could not place the team's scratch in its team space",
                pes[i]
            )));
        }
        if let (Some(g), Some(c)) = (device, chunk) {
            // The members pass their chunks among themselves (over the fabric: each registers its own); one more
            // round says whether each mapped the others' (and registered its own).
            // On an error `team_map_peers` leaves nothing mapped; after it, the chunks are released on any error.
            let peers_mapped = g.team_map_peers(c);
            let peers_ok = peers_mapped.is_ok();
            let rec =
                peers_mapped.and_then(|()| self.peers.team_device_register(base + rel, bytes));
            let mapped = rec.as_ref().map(drop).map_err(Clone::clone);
            let all = self.members_round(
                pes,
                &mut counts,
                [dig, tag, n, u64::from(mapped.is_ok())],
                "mapping the team's scratch",
            );
            let failed = all
                .as_ref()
                .ok()
                .and_then(|all| all.iter().position(|r| r[VALUE] == 0));
            if mapped.is_err() || all.is_err() || failed.is_some() {
                if peers_ok {
                    self.peers.team_device_release(base + rel, pes);
                }
                lock(&self.team_heap).free(rel);
                mapped?;
                all?;
                let i = failed.unwrap_or_default();
                return Err(Error::State(format!(
                    "{OP}: member {i} (PE {}) could not map the other members' team scratch",
                    pes[i]
                )));
            }
            // Every member mapped (and registered) its chunk: serve this PE's (staged) before the last round, after
            // which the other members may use it. Over the fabric, that round carries each member's registration
            // record, which the members adopt.
            self.peers.team_device_serve(base + rel, bytes);
            if let Ok(Some(_)) = rec {
                let mine = rec.ok().flatten().unwrap_or_default();
                let published = self
                    .members_round(pes, &mut counts, mine, "publishing the team's chunks")
                    .and_then(|all| {
                        pes.iter()
                            .zip(&all)
                            .filter(|(_, r)| r[3] > 0)
                            .try_for_each(|(&pe, r)| self.peers.team_adopt(pe, *r))
                    });
                if let Err(e) = published {
                    self.peers.team_device_release(base + rel, pes);
                    lock(&self.team_heap).free(rel);
                    return Err(e);
                }
            }
        } else {
            // Over the fabric, more rounds carry each member's team-space chunks that the slot overlaps, which the
            // members adopt: first how many each has, then one per round.
            if self.peers.team_chunks_travel() {
                let recs = placed.unwrap_or_default();
                let published = self
                    .members_round(
                        pes,
                        &mut counts,
                        [recs.len() as u64, 0, 0, 0],
                        "publishing the team's chunks",
                    )
                    .and_then(|all| {
                        let most = all.iter().map(|r| r[0]).max().unwrap_or(0) as usize;
                        for i in 0..most {
                            let rec = recs.get(i).copied().unwrap_or_default();
                            let all = self.members_round(
                                pes,
                                &mut counts,
                                rec,
                                "publishing the team's chunks",
                            )?;
                            pes.iter()
                                .zip(&all)
                                .filter(|(_, r)| r[3] > 0)
                                .try_for_each(|(&pe, r)| self.peers.team_adopt(pe, *r))?;
                        }
                        Ok(())
                    });
                if let Err(e) = published {
                    lock(&self.team_heap).free(rel);
                    return Err(e);
                }
            }
            self.peers.grow_windows(pes, end)?;
        }
        self.team_mapped.fetch_max(end - base, Ordering::AcqRel);
        let off = base + rel;
        tracing::debug!(pe = me, members = ?pes, off, "team of its members made");
        let inner = TeamInner::new(
            Members::from_list(pes.to_vec()),
            idx,
            off,
            Kind::Members { off },
            TeamConfig::default(),
        );
        Ok(Team {
            runtime: self.teams().id,
            inner: Arc::new(inner),
        })
    }

    /// [`Shmem::team_destroy`] of a team made by [`Shmem::team_of_members`] whose slot is at heap offset `off`:
    /// a sync over the team, then each member frees the slot's range in its team space.
    pub(super) fn destroy_members_team(&self, team: Team, off: usize) -> Result<()> {
        {
            let mut ctx = team.ctx(self, "team_destroy")?;
            ctx.sync_as(CallId::TeamDestroy.words(), BarrierAlgo::Auto)?;
        }
        if team.inner.destroyed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        if let Some(rel) = self.peers.team_base().and_then(|b| off.checked_sub(b)) {
            lock(&self.team_heap).free(rel);
            if self.peers.device_growth().is_some() {
                let members: Vec<usize> = (0..team.n_pes())
                    .map(|i| team.global_pe(i))
                    .collect::<Result<_>>()?;
                self.peers.team_device_release(off, &members);
            }
        }
        Ok(())
    }

    /// One round of a creation among `pes` (see the module docs): publish `mine`, then every member's record in
    /// member order. `counts`: the round signals taken from each PE's mailbox word so far; `what` names the step in
    /// a timeout's message.
    fn members_round(
        &self,
        pes: &[usize],
        counts: &mut [u64],
        mine: Record,
        what: &str,
    ) -> Result<Vec<Record>> {
        let bytes: Vec<u8> = mine.iter().flat_map(|w| w.to_le_bytes()).collect();
        self.sys_local().write(RECORD, &bytes)?;
        self.members_step(pes, counts, what)?;
        let mut all = Vec::with_capacity(pes.len());
        for &p in pes {
            if p == self.me {
                all.push(mine);
                continue;
            }
            let mut b = [0u8; 8 * RECORD_WORDS];
            self.sys_of(p, OP)?.read(RECORD, &mut b)?;
            let mut r = [0u64; RECORD_WORDS];
            for (w, c) in r.iter_mut().zip(b.chunks_exact(8)) {
                *w = u64::from_le_bytes(c.try_into().unwrap_or_default());
            }
            all.push(r);
        }
        // Every member has read every record before any member rewrites its own.
        self.members_step(pes, counts, what)?;
        Ok(all)
    }

    /// Signal every other member of `pes` once and wait for one signal from each.
    fn members_step(&self, pes: &[usize], counts: &mut [u64], what: &str) -> Result<()> {
        let me = self.me;
        for &p in pes.iter().filter(|&&p| p != me) {
            self.sys_of(p, OP)?
                .amo(MAILBOX + 8 * me, 8, AmoOp::FetchAdd, 1)?;
            counts[p] += 1;
        }
        let local = self.sys_local();
        let words: Vec<(usize, u64, LocalWord<'_>)> = pes
            .iter()
            .filter(|&&p| p != me)
            .map(|&p| {
                let off = MAILBOX + 8 * p;
                let w = match local.atomic64(off) {
                    Some(a) => LocalWord::Atomic(a),
                    None => LocalWord::Window(local, off),
                };
                (p, counts[p], w)
            })
            .collect();
        let missing = || -> Vec<usize> {
            words
                .iter()
                .filter(|(_, target, w)| w.load().map_or(true, |v| v < *target))
                .map(|&(p, _, _)| p)
                .collect()
        };
        self.wait_for(
            OP,
            &|| {
                format!(
                    "{what} of the team of PEs {pes:?}: PEs {:?} have not arrived (a member that never calls \
                     {OP}, or calls it with another list)",
                    missing()
                )
            },
            || {
                for (_, target, w) in &words {
                    if w.load()? < *target {
                        return Ok(false);
                    }
                }
                Ok(true)
            },
        )
    }
}

/// This PE's index in `pes`, or the argument error: an empty list, a PE out of `0..n` or past the mailboxes, a
/// PE listed twice, or this PE (`me`) missing.
fn check_members(pes: &[usize], me: usize, n: usize) -> Result<usize> {
    super::split::check_distinct(pes, &format!("{OP}: "), |i, p| {
        if p >= n {
            return Err(Error::InvalidPe {
                pe: p as i64,
                n_pes: n,
                context: format!("{OP}: pes[{i}]"),
            });
        }
        if p >= MAILBOX_PES {
            return Err(Error::invalid(
                "pes",
                format!("{pes:?}"),
                format!("{OP}: PE {p} is past the {MAILBOX_PES} PEs that can make teams among themselves"),
            ));
        }
        Ok(())
    })?;
    pes.iter().position(|&p| p == me).ok_or_else(|| {
        Error::invalid(
            "pes",
            format!("{pes:?}"),
            format!("{OP}: this PE ({me}) is not in the list; only the members call"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::check_members;

    #[test]
    fn member_lists_are_checked() {
        assert_eq!(check_members(&[3, 1, 2], 1, 4).unwrap(), 1);
        let e = check_members(&[], 0, 4).unwrap_err().to_string();
        assert!(e.contains("pes"), "{e}");
        let e = check_members(&[0, 4], 0, 4).unwrap_err().to_string();
        assert!(e.contains("pes[1]") && e.contains('4'), "{e}");
        let e = check_members(&[0, 2, 0], 0, 4).unwrap_err().to_string();
        assert!(e.contains("listed twice"), "{e}");
        let e = check_members(&[1, 2], 0, 4).unwrap_err().to_string();
        assert!(e.contains("not in the list"), "{e}");
    }
}
