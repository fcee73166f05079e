//! Opening the endpoint (the provider chosen by [`super::info`]), registering memory for peers, their addresses;
//! the receive buffers and the atomics the provider offers, once the transport registered its regions.

use super::info::getinfo;
use super::*;

/// What opening an endpoint needs: the transport's settings, without the transport.
pub(crate) struct Open {
    /// This PE and the number of PEs.
    pub me: usize,
    pub n: usize,
    /// `XPUSHMEM_FABRIC_PROVIDER` (non-empty), else none: libfabric's own choice.
    pub requested: Option<String>,
    /// What the endpoint needs, in order of preference (the first provider offering one is taken).
    pub wants: Vec<Want>,
    /// Where the endpoint listens.
    pub bind: Bind,
    /// Whether `bind` is the user's setting (`XPUSHMEM_FABRIC_ADDR`) rather than the bootstrap's address.
    pub bind_set: bool,
    pub timeout: Option<Duration>,
    pub liveness: Liveness,
    /// This PE's token ([`Token`]): a message to this PE without it is dropped.
    pub token: Token,
}

/// The first entry of an fi_getinfo `list` this PE may use, duplicated (null if none). A provider that only
/// reaches its own host ([`SAME_HOST_ONLY`]) is taken only when the user named it (`requested`); with `bind` an
/// interface, only an entry of that domain.
///
/// # Safety
/// `list` is null or a valid fi_info list (entries linked by `next`, as fi_getinfo or fi_dupinfo make them).
unsafe fn pick(list: *mut fi::fi_info, requested: bool, bind: &Bind) -> *mut fi::fi_info {
    // SAFETY: the caller's promise: null or valid entries linked by `next`.
    unsafe {
        let mut p = list;
        while !p.is_null() {
            let name = CStr::from_ptr((*(*p).fabric_attr).prov_name).to_string_lossy();
            let same_host = SAME_HOST_ONLY
                .iter()
                .any(|s| name.split(';').next() == Some(*s));
            let domain = (*(*p).domain_attr).name;
            let iface_ok = match bind {
                Bind::Iface(want) => {
                    !domain.is_null() && CStr::from_ptr(domain).to_bytes() == want.as_bytes()
                }
                _ => true,
            };
            if (requested || !same_host) && iface_ok {
                return fi::xfi_dupinfo(p);
            }
            p = (*p).next;
        }
        std::ptr::null_mut()
    }
}

/// Asks `getinfo` each of `queries` in order and returns the first query whose list holds an entry [`pick`]
/// takes, with that entry (duplicated); every list is freed. A list of only same-host providers (or none on the
/// bound interface) is passed over like an empty one, so that the next query is still asked: libfabric's shm
/// offering `FI_HMEM` must not hide tcp without it.
///
/// # Safety
/// `getinfo` returns null or a valid fi_info list that it gives up (this function frees it).
unsafe fn first_usable<Q: Copy>(
    queries: &[Q],
    mut getinfo: impl FnMut(Q) -> Result<*mut fi::fi_info>,
    requested: bool,
    bind: &Bind,
) -> Result<Option<(Q, *mut fi::fi_info)>> {
    for &q in queries {
        let list = getinfo(q)?;
        // SAFETY: `list` is null or a valid list (the caller's promise), freed once, here; `chosen` is a copy.
        let chosen = unsafe { pick(list, requested, bind) };
        if !list.is_null() {
            // SAFETY: as above.
            unsafe { fi::xfi_freeinfo(list) };
        }
        if !chosen.is_null() {
            return Ok(Some((q, chosen)));
        }
    }
    Ok(None)
}

impl Ep {
    /// Choose a provider and open fabric, domain, completion queue, address vector and endpoint; the endpoint,
    /// what it offers ([`Want`]) and its name (the address peers insert, [`Ep::insert_addr`]).
    pub(crate) fn open(o: Open) -> Result<(Ep, Want, Vec<u8>)> {
        let Open {
            me,
            n,
            requested,
            wants,
            mut bind,
            bind_set,
            timeout,
            liveness,
            token,
        } = o;
        let mut delivery = true;
        let mut want = wants[0];
        let mut chosen = std::ptr::null_mut();
        loop {
            let source = match &bind {
                Bind::Addr(ip) => Some(*ip),
                _ => None,
            };
            let queries: Vec<(Want, bool)> = wants
                .iter()
                .flat_map(|&w| [(w, true), (w, false)])
                .collect();
            // SAFETY: `getinfo` returns null or the list fi_getinfo made, which first_usable frees.
            let found = unsafe {
                first_usable(
                    &queries,
                    |(w, d)| getinfo(requested.as_deref(), d, w, source),
                    requested.is_some(),
                    &bind,
                )
            }?;
            if let Some(((w, d), info)) = found {
                (want, delivery, chosen) = (w, d, info);
            }
            // The bootstrap's address is only a default: a provider that does not address its endpoints by IP
            // (cxi, efa, psm3...) listens where it does.
            if chosen.is_null() && !bind_set && source.is_some() {
                tracing::info!(
                    pe = me,
                    "fabric: no provider listens on the bootstrap's address {bind:?}; the provider's own choice \
                     (XPUSHMEM_FABRIC_ADDR selects one)"
                );
                bind = Bind::Any;
                continue;
            }
            break;
        }
        if chosen.is_null() && wants == [Want::Hmem] {
            return Err(Error::Transport {
                transport: "fabric",
                message: format!(
                    "XPUSHMEM_FABRIC_DEVICE_HEAP=register, but no libfabric provider {}offers FI_HMEM (registration \
                     of Level Zero memory) with RMA and atomics; use auto or stage",
                    requested.as_deref().map_or(String::new(), |p| format!("named {p} "))
                ),
            });
        }
        if chosen.is_null() {
            let at = match (&bind, bind_set) {
                (Bind::Any, _) => String::new(),
                (Bind::Addr(ip), true) => format!(" on XPUSHMEM_FABRIC_ADDR={ip}"),
                (Bind::Addr(ip), false) => {
                    format!(
                        " on {ip} (the bootstrap's address; XPUSHMEM_FABRIC_ADDR selects another)"
                    )
                }
                (Bind::Iface(i), _) => format!(" on interface XPUSHMEM_FABRIC_ADDR={i}"),
            };
            return Err(Error::Transport {
                transport: "fabric",
                message: format!(
                    "no libfabric provider {}offers reliable datagrams with RMA, atomics and messages{at} (see \
                     fi_info; XPUSHMEM_FABRIC_PROVIDER or FI_PROVIDER selects one)",
                    requested.as_deref().map_or(String::new(), |p| format!("named {p} "))
                ),
            });
        }
        // SAFETY: `chosen` is a valid fi_info (a copy first_usable made); its provider's name is a NUL-terminated
        // string libfabric set.
        let prov = unsafe { CStr::from_ptr((*(*chosen).fabric_attr).prov_name) }
            .to_string_lossy()
            .into_owned();
        let mut ep = Ep {
            prov: prov.clone(),
            info: chosen,
            fabric: std::ptr::null_mut(),
            domain: std::ptr::null_mut(),
            cq: std::ptr::null_mut(),
            av: std::ptr::null_mut(),
            ep: std::ptr::null_mut(),
            own: Vec::new(),
            team: Vec::new(),
            addrs: vec![ADDR_NOTAVAIL; n],
            me,
            ops: slab::Ops::default(),
            ctxs: slab::Ctxs::default(),
            cntr: std::ptr::null_mut(),
            inject_max: 0,
            inj: Injects {
                last_pe: vec![0; n],
                ..Default::default()
            },
            waw_max: 0,
            per_pe: vec![0; n],
            per_domain: PerDomain::default(),
            error_domains: IdMap::default(),
            results: IdMap::default(),
            errors: IdMap::default(),
            delivery_complete: delivery,
            mr_local: false,
            closed: None,
            abandoned: Vec::new(),
            mr_endpoint: false,
            max_msg: 1 << 30,
            atomics: HashSet::new(),
            timeout,
            lost: false,
            liveness,
            stage: None,
            cq_entries: vec![fi::fi_cq_data_entry::default(); CQ_BATCH],
            inbox: Inbox::new(token),
            foreign_contexts: 0,
            stall: stall::Stall::start(me, &prov, timeout),
            tokens: Vec::new(),
            slabs: Slabs::default(),
            heap: Vec::new(),
            host_regions: Vec::new(),
            am_signal_max: 0,
            tell: false,
            told: Told::default(),
            answers: Vec::new(),
            user: Vec::new(),
            user_next: 0,
            stats: Default::default(),
        };
        // SAFETY: `chosen` is a valid fi_info owned by `ep` (freed in its Drop); each object is opened into `ep`'s
        // fields, so Drop closes whatever was opened if a later step fails.
        unsafe {
            let info = &*chosen;
            let mr_mode = (*info.domain_attr).mr_mode as u32;
            ep.mr_local = mr_mode & fi::FI_MR_LOCAL != 0;
            ep.mr_endpoint = mr_mode & fi::FI_MR_ENDPOINT != 0;
            ep.max_msg = (*info.ep_attr).max_msg_size.clamp(4096, 1 << 30);
            ok(
                &prov,
                "fi_fabric",
                fi::xfi_fabric(info.fabric_attr, &mut ep.fabric, std::ptr::null_mut()) as i64,
            )?;
            ok(
                &prov,
                "fi_domain",
                fi::xfi_domain(ep.fabric, chosen, &mut ep.domain, std::ptr::null_mut()) as i64,
            )?;
            let mut cq_attr = fi::fi_cq_attr {
                format: fi::FI_CQ_FORMAT_DATA,
                wait_obj: fi::FI_WAIT_NONE,
                ..Default::default()
            };
            ok(
                &prov,
                "fi_cq_open",
                fi::xfi_cq_open(ep.domain, &mut cq_attr, &mut ep.cq, std::ptr::null_mut()) as i64,
            )?;
            let mut av_attr = fi::fi_av_attr {
                type_: fi::FI_AV_TABLE,
                count: n,
                ..Default::default()
            };
            ok(
                &prov,
                "fi_av_open",
                fi::xfi_av_open(ep.domain, &mut av_attr, &mut ep.av, std::ptr::null_mut()) as i64,
            )?;
            // Every operation with a context asks for its completion entry (`FI_COMPLETION`: in the default
            // flags of the calls without flags, and in the flags of the `*msg` calls), so that the transmit side
            // of the completion queue can be selective and injected puts have none ([`Injects`]).
            (*info.tx_attr).op_flags |= fi::FI_COMPLETION as u64;
            ok(
                &prov,
                "fi_endpoint",
                fi::xfi_endpoint(ep.domain, chosen, &mut ep.ep, std::ptr::null_mut()) as i64,
            )?;
            let selective = fi::xfi_ep_bind(
                ep.ep,
                &mut (*ep.cq).fid,
                fi::FI_TRANSMIT as u64 | fi::FI_SELECTIVE_COMPLETION,
            ) == 0;
            let bind = if selective {
                fi::FI_RECV
            } else {
                fi::FI_TRANSMIT | fi::FI_RECV
            };
            ok(
                &prov,
                "fi_ep_bind(cq)",
                fi::xfi_ep_bind(ep.ep, &mut (*ep.cq).fid, bind as u64) as i64,
            )?;
            // The write counter of injected puts; without it (or without a selective completion queue, where an
            // injected put would leave an entry without a context), every put has a context.
            if selective && (*info.tx_attr).inject_size > 0 {
                let mut cattr = fi::fi_cntr_attr {
                    events: fi::FI_CNTR_EVENTS_COMP,
                    wait_obj: fi::FI_WAIT_NONE,
                    ..Default::default()
                };
                let mut c = std::ptr::null_mut();
                if fi::xfi_cntr_open(ep.domain, &mut cattr, &mut c, std::ptr::null_mut()) == 0 {
                    ep.cntr = c;
                    if fi::xfi_ep_bind(ep.ep, &mut (*c).fid, fi::FI_WRITE as u64) == 0 {
                        ep.inject_max = (*info.tx_attr).inject_size;
                    }
                }
            }
            // FI_ORDER_WAW: RMA and atomic writes are processed in order, data placed in order up to
            // max_order_waw_size.
            if (*info.tx_attr).msg_order & fi::FI_ORDER_WAW as u64 != 0 {
                ep.waw_max = (*info.ep_attr).max_order_waw_size;
            }
            // With manual progress a target applies RMA in its own polls, as it serves messages: a
            // put-with-signal whose signal would wait a round trip for its data goes as one message instead.
            if (*info.domain_attr).data_progress == fi::FI_PROGRESS_MANUAL {
                ep.am_signal_max = AM_SIGNAL_MAX;
                // Larger ones: writes that tell the target of their landing (remote completion data), the signal
                // as a message behind them.
                ep.tell = (*info.domain_attr).cq_data_size >= 8;
            }
            tracing::debug!(
                pe = me,
                provider = %prov,
                selective,
                inject_max = ep.inject_max,
                waw_max = ep.waw_max,
                am_signal_max = ep.am_signal_max,
                told_writes = ep.tell,
                msg_order = format_args!("{:#x}", (*info.tx_attr).msg_order),
                "fabric: injected puts up to inject_max bytes; signals right after data up to waw_max bytes, else as \
                 messages (with the data up to am_signal_max bytes, else behind told writes)"
            );
            ok(
                &prov,
                "fi_ep_bind(av)",
                fi::xfi_ep_bind(ep.ep, &mut (*ep.av).fid, 0) as i64,
            )?;
            ok(&prov, "fi_enable", fi::xfi_enable(ep.ep) as i64)?;
            let mut name = vec![0u8; 256];
            let mut len = name.len();
            ok(
                &prov,
                "fi_getname",
                fi::xfi_getname(&mut (*ep.ep).fid, name.as_mut_ptr().cast(), &mut len) as i64,
            )?;
            name.truncate(len);
            Ok((ep, want, name))
        }
    }

    /// The provider's memory-region mode (`FI_MR_*` bits).
    fn mr_mode(&self) -> u32 {
        // SAFETY: `info` is the fi_info this endpoint was opened with, owned by it until Drop.
        unsafe { (*(*self.info).domain_attr).mr_mode as u32 }
    }

    /// Whether the provider chooses the keys (`FI_MR_PROV_KEY`): [`Ep::register`]'s key is then not used.
    pub(crate) fn provider_keys(&self) -> bool {
        let m = self.mr_mode();
        m & fi::FI_MR_PROV_KEY != 0 || m == fi::FI_MR_BASIC
    }

    /// The size of the provider's keys in bytes (its `mr_key_size`, at most 8).
    pub(crate) fn key_bytes(&self) -> usize {
        // SAFETY: as in `mr_mode`.
        unsafe { (*(*self.info).domain_attr).mr_key_size.min(8) }
    }

    /// The provider's name.
    pub(crate) fn provider(&self) -> &str {
        &self.prov
    }

    /// Register the `len` bytes at `base` for peers' RMA and atomics with `key` (the provider's own key with
    /// [`Ep::provider_keys`]): host memory, or with `device`, Level Zero memory of that device (`FI_HMEM_ZE`).
    /// `heap`: the user heap (host memory then serves as the source of zero-copy puts). Returns the key and the
    /// address peers name the region by. The memory must stay mapped as long as this endpoint is open (the
    /// runtime's words and heap outlive the transport: it is dropped with `Peers`, before the arena).
    pub(crate) fn register(
        &mut self,
        base: *mut u8,
        len: usize,
        key: u64,
        heap: bool,
        device: Option<i32>,
    ) -> Result<(u64, u64)> {
        let prov = self.prov.clone();
        let mr_mode = self.mr_mode();
        let virt = mr_mode & fi::FI_MR_VIRT_ADDR != 0 || mr_mode == fi::FI_MR_BASIC;
        let prov_key = self.provider_keys();
        let mut mr = std::ptr::null_mut();
        let access = (fi::FI_REMOTE_READ | fi::FI_REMOTE_WRITE | fi::FI_READ | fi::FI_WRITE) as u64;
        // SAFETY: the domain is open; the region is this PE's own mapping of its memfd (or its device heap),
        // alive as long as this endpoint (the caller's promise); `mr` is opened into `own` (closed in Drop).
        let k = unsafe {
            let r = if let Some(ze) = device {
                let iov = fi::iovec {
                    iov_base: base.cast(),
                    iov_len: len,
                };
                let mut attr = fi::fi_mr_attr {
                    mr_iov: &iov,
                    iov_count: 1,
                    access,
                    requested_key: key,
                    iface: fi::FI_HMEM_ZE,
                    ..Default::default()
                };
                attr.device.ze = ze;
                fi::xfi_mr_regattr(self.domain, &attr, 0, &mut mr)
            } else {
                fi::xfi_mr_reg(
                    self.domain,
                    base.cast(),
                    len,
                    access,
                    0,
                    key,
                    0,
                    &mut mr,
                    std::ptr::null_mut(),
                )
            };
            ok(
                &prov,
                if device.is_some() {
                    "fi_mr_regattr (device heap, FI_HMEM_ZE)"
                } else {
                    "fi_mr_reg (symmetric heap)"
                },
                r as i64,
            )?;
            self.own.push(mr);
            if self.mr_endpoint {
                ok(
                    &prov,
                    "fi_mr_bind",
                    fi::xfi_mr_bind(mr, &mut (*self.ep).fid, 0) as i64,
                )?;
                ok(&prov, "fi_mr_enable", fi::xfi_mr_enable(mr) as i64)?;
            }
            let k = if prov_key { fi::xfi_mr_key(mr) } else { key };
            if device.is_none() {
                self.host_regions.push(HostRegion {
                    key: k,
                    base: base as usize,
                    len,
                });
            }
            if heap && device.is_none() {
                self.heap.push(LocalHeap {
                    base: base as usize,
                    len,
                    desc: if self.mr_local {
                        fi::xfi_mr_desc(mr)
                    } else {
                        std::ptr::null_mut()
                    },
                });
            }
            k
        };
        Ok((k, if virt { base as u64 } else { 0 }))
    }

    /// Register the `len` bytes of host memory at `base` (a user buffer) for local access, as the source of puts
    /// and the destination of gets in place, with `key` (unused with [`Ep::provider_keys`]; no peer addresses the
    /// region, but keys of one domain must differ); the handle that unregisters it ([`Ep::unregister_user`]). The
    /// caller keeps the memory mapped until then.
    ///
    /// A provider that does not ask for local registrations (no `FI_MR_LOCAL`) gets none: the buffer is only
    /// recorded. Registering it anyway is of no use to such a provider, and libfabric 2.x's `ofi_rxm` refuses a
    /// second registration without remote access (each gets the key `FI_KEY_NOTAVAIL`, which rxm files in its
    /// atomics' key map: `FI_ENOKEY`).
    pub(crate) fn register_user(&mut self, base: usize, len: usize, key: u64) -> Result<u64> {
        if self.closed.is_some() {
            return Err(self.closed_err());
        }
        if !self.mr_local {
            return Ok(self.add_user(base, len, std::ptr::null_mut(), std::ptr::null_mut()));
        }
        let prov = self.prov.clone();
        let mut mr = std::ptr::null_mut();
        // SAFETY: the domain is open; the caller keeps [base, base + len) mapped until `unregister_user` (or Drop)
        // closes the registration; `mr` is a valid out-pointer.
        let r = unsafe {
            fi::xfi_mr_reg(
                self.domain,
                base as *const c_void,
                len,
                (fi::FI_READ | fi::FI_WRITE) as u64,
                0,
                key,
                0,
                &mut mr,
                std::ptr::null_mut(),
            )
        };
        ok(&prov, "fi_mr_reg (registered user buffer)", r as i64)?;
        if self.mr_endpoint {
            // SAFETY: `mr` was just opened, the endpoint is open.
            let bound = unsafe {
                ok(
                    &prov,
                    "fi_mr_bind",
                    fi::xfi_mr_bind(mr, &mut (*self.ep).fid, 0) as i64,
                )
                .and_then(|()| ok(&prov, "fi_mr_enable", fi::xfi_mr_enable(mr) as i64))
            };
            if let Err(e) = bound {
                // SAFETY: `mr` was opened above and is closed once, here.
                unsafe { fi::xfi_close(&mut (*mr).fid) };
                return Err(e);
            }
        }
        // SAFETY: `mr` was just opened.
        let desc = unsafe { fi::xfi_mr_desc(mr) };
        Ok(self.add_user(base, len, mr, desc))
    }

    /// Record user buffer `[base, base + len)` with its registration `mr` and descriptor `desc` (both null when
    /// the provider needs none); its handle.
    fn add_user(&mut self, base: usize, len: usize, mr: *mut fi::fid_mr, desc: *mut c_void) -> u64 {
        self.user_next += 1;
        let handle = self.user_next;
        self.user.push(UserMr {
            handle,
            base,
            len,
            mr,
            desc,
        });
        handle
    }

    /// Close the last registration [`Ep::register`] made: a device heap chunk whose growth was undone before any
    /// peer learnt its key (no operation uses it).
    pub(crate) fn unregister_last(&mut self) {
        if let Some(mr) = self.own.pop() {
            // SAFETY: the registration was opened by `register` and is closed once, here (popped off `own`, which
            // Drop closes); no peer has its key, so no operation uses it.
            unsafe { fi::xfi_close(&mut (*mr).fid) };
        }
    }

    /// Register a team-scoped chunk of this PE's device heap, the `len` bytes at `base` (window offset `off`) of
    /// Level Zero device `ze`, as [`Ep::register`] does, kept apart so that [`Ep::unregister_team`] closes it when
    /// the allocation is freed. Returns the key and the address peers name it by.
    pub(crate) fn register_team(
        &mut self,
        base: *mut u8,
        off: usize,
        len: usize,
        key: u64,
        ze: i32,
    ) -> Result<(u64, u64)> {
        let r = self.register(base, len, key, false, Some(ze))?;
        if let Some(mr) = self.own.pop() {
            self.team.push((off, mr));
        }
        Ok(r)
    }

    /// Close the registration of the team-scoped chunk at window offset `off` ([`Ep::register_team`]): its
    /// allocation was freed (its members agreed that none of them accesses it any more) or never agreed on, and
    /// its memory is about to be unmapped. None there: a no-op.
    pub(crate) fn unregister_team(&mut self, off: usize) {
        if let Some(i) = self.team.iter().position(|&(o, _)| o == off) {
            let (_, mr) = self.team.swap_remove(i);
            // SAFETY: the registration was opened by `register_team` and is closed once, here (removed from
            // `team`, which Drop closes); no peer operation uses it any more (the caller's promise).
            unsafe { fi::xfi_close(&mut (*mr).fid) };
        }
    }

    /// Close the registration `handle` of [`Ep::register_user`] (the caller completed every operation that reads
    /// or writes it). An unknown handle is a no-op.
    pub(crate) fn unregister_user(&mut self, handle: u64) {
        if let Some(i) = self.user.iter().position(|u| u.handle == handle) {
            let u = self.user.swap_remove(i);
            if !u.mr.is_null() {
                // SAFETY: the registration was opened by `register_user` and is closed once, here; no operation
                // in flight uses it (the caller's promise).
                unsafe { fi::xfi_close(&mut (*u.mr).fid) };
            }
        }
    }

    /// The local descriptor of `[addr, addr + len)` when it lies in one registered user buffer.
    pub(crate) fn user_desc(&self, addr: usize, len: usize) -> Option<*mut c_void> {
        let end = addr.checked_add(len)?;
        self.user
            .iter()
            .find(|u| addr >= u.base && end <= u.base + u.len)
            .map(|u| u.desc)
    }

    /// The copies and in-place transfers so far.
    pub(crate) fn copy_stats(&self) -> crate::types::CopyStats {
        self.stats
    }

    /// Serve this PE's unregistered device heap through staging messages ([`StagedHeap`]).
    pub(crate) fn set_stage(&mut self, heap: Box<dyn StagedHeap>) {
        self.stage = Some(heap);
    }

    /// Post the receive buffers (registered for local access when the provider needs it) and learn the atomics the
    /// provider offers (only compare-and-swap with `emulate_atomics`); `device_heap` says how a device heap goes,
    /// for the log.
    pub(crate) fn ready(&mut self, emulate_atomics: bool, device_heap: Option<&str>) -> Result<()> {
        let prov = self.prov.clone();
        // SAFETY: the domain is open; each receive buffer is a Vec of the inbox, never resized, alive until Drop
        // (which closes its registration first).
        unsafe {
            // The receive buffers, posted on every PE (local access only: no peer addresses them).
            if self.mr_local {
                for b in &mut self.inbox.bufs {
                    let mut mr = std::ptr::null_mut();
                    let r = fi::xfi_mr_reg(
                        self.domain,
                        b.as_ptr().cast(),
                        b.len() * 8,
                        (fi::FI_RECV | fi::FI_SEND) as u64,
                        0,
                        0,
                        0,
                        &mut mr,
                        std::ptr::null_mut(),
                    );
                    ok(&prov, "fi_mr_reg (receive buffer)", r as i64)?;
                    self.inbox.mrs.push(LocalMr {
                        mr,
                        desc: fi::xfi_mr_desc(mr),
                    });
                }
            }
        }
        for i in 0..2 * RECVS {
            self.post_recv(i)?;
        }
        // The atomics the provider offers, per width, operation and form.
        for width in [4usize, 8] {
            let dt = dtype(width)?;
            for fop in [
                fi::FI_ATOMIC_READ,
                fi::FI_ATOMIC_WRITE,
                fi::FI_CSWAP,
                fi::FI_SUM,
                fi::FI_BAND,
                fi::FI_BOR,
                fi::FI_BXOR,
            ] {
                for (form, flag) in [
                    (Form::Post, 0u64),
                    (Form::Fetch, fi::FI_FETCH_ATOMIC),
                    (Form::Compare, fi::FI_COMPARE_ATOMIC),
                ] {
                    let mut attr = fi::fi_atomic_attr::default();
                    // SAFETY: the domain is open; `attr` is a zeroed attribute the provider fills.
                    let r = unsafe { fi::xfi_query_atomic(self.domain, dt, fop, &mut attr, flag) };
                    if r == 0 && attr.count >= 1 {
                        self.atomics.insert((width, fop, form));
                    }
                }
            }
        }
        if emulate_atomics {
            self.atomics
                .retain(|&(_, op, form)| op == fi::FI_CSWAP && form == Form::Compare);
        }
        // SAFETY: as in `mr_mode`; the domain's name is a NUL-terminated string libfabric set.
        let domain = unsafe { CStr::from_ptr((*(*self.info).domain_attr).name) }
            .to_string_lossy()
            .into_owned();
        tracing::debug!(
            pe = self.me,
            provider = %prov,
            domain = %domain,
            delivery_complete = self.delivery_complete,
            device_heap = ?device_heap,
            mr_mode = self.mr_mode(),
            atomics = self.atomics.len(),
            "fabric endpoint"
        );
        Ok(())
    }

    /// Insert PE `pe`'s endpoint name (as its [`Ep::open`] returned it) into the address vector.
    pub(crate) fn insert_addr(&mut self, pe: usize, name: &[u8]) -> Result<()> {
        let mut addr = ADDR_NOTAVAIL;
        // SAFETY: the AV is open; `name` is the peer's endpoint name as fi_getname gave it.
        let r = unsafe {
            fi::xfi_av_insert(
                self.av,
                name.as_ptr().cast(),
                1,
                &mut addr,
                0,
                std::ptr::null_mut(),
            )
        };
        if r != 1 {
            return Err(Error::Transport {
                transport: "fabric",
                message: format!(
                    "fi_av_insert of PE {pe}'s address failed on provider {}: {}",
                    self.prov,
                    strerror(r as i64)
                ),
            });
        }
        self.addrs[pe] = addr;
        Ok(())
    }

    /// This PE's token (published with its endpoint name).
    pub(crate) fn token(&self) -> Token {
        self.inbox.token
    }

    /// Every PE's token (a message to a PE carries its own).
    pub(crate) fn set_tokens(&mut self, tokens: Vec<Token>) {
        self.tokens = tokens;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    /// A list of fi_info entries naming `provs` in order, made by libfabric (fi_dupinfo copies the names, so
    /// fi_freeinfo frees what libfabric allocated).
    fn list(provs: &[&str]) -> *mut fi::fi_info {
        let mut head: *mut fi::fi_info = std::ptr::null_mut();
        for prov in provs.iter().rev() {
            let name = CString::new(*prov).unwrap();
            // SAFETY: libfabric is loaded; the template's name points into `name` only while fi_dupinfo copies
            // it, and is cleared before the template is freed; the copy owns its strings and heads the list.
            unsafe {
                let t = fi::xfi_allocinfo();
                (*(*t).fabric_attr).prov_name = name.as_ptr().cast_mut();
                let e = fi::xfi_dupinfo(t);
                (*(*t).fabric_attr).prov_name = std::ptr::null_mut();
                fi::xfi_freeinfo(t);
                (*e).next = head;
                head = e;
            }
        }
        head
    }

    const QUERIES: [(Want, bool); 4] = [
        (Want::Hmem, true),
        (Want::Hmem, false),
        (Want::Host, true),
        (Want::Host, false),
    ];

    /// first_usable over [`QUERIES`] answered by `answers` (names of providers): the query taken and its provider.
    fn search(
        answers: impl Fn((Want, bool)) -> Vec<&'static str>,
        requested: bool,
        bind: &Bind,
    ) -> Option<((Want, bool), String)> {
        // SAFETY: every answer is a list `list` made, which first_usable frees; the entry it returns is a copy,
        // read and freed once here.
        unsafe {
            let (q, info) =
                first_usable(&QUERIES, |q| Ok(list(&answers(q))), requested, bind).unwrap()?;
            let name = CStr::from_ptr((*(*info).fabric_attr).prov_name)
                .to_string_lossy()
                .into_owned();
            fi::xfi_freeinfo(info);
            Some((q, name))
        }
    }

    #[test]
    fn a_query_answered_by_same_host_providers_alone_does_not_end_the_search() {
        fi::load().expect("libfabric loads");
        // In order: FI_HMEM with and without delivery-complete, then host memory. Only shm offers FI_HMEM.
        let answers = |q| match q {
            (Want::Hmem, _) => vec!["shm"],
            (Want::Host, true) => vec!["shm", "tcp;ofi_rxm", "udp;ofi_rxd"],
            (Want::Host, false) => vec!["tcp;ofi_rxm"],
        };
        assert_eq!(
            search(answers, false, &Bind::Any),
            Some(((Want::Host, true), "tcp;ofi_rxm".to_string()))
        );
        // Named by the user, shm is taken at the first query.
        assert_eq!(
            search(answers, true, &Bind::Any),
            Some(((Want::Hmem, true), "shm".to_string()))
        );
        // Nothing but same-host providers anywhere: none.
        assert_eq!(search(|_| vec!["shm", "sm2"], false, &Bind::Any), None);
        // A bound interface: an entry of another domain is passed over (these entries name none).
        assert_eq!(search(answers, false, &Bind::Iface("eth9".into())), None);
    }
}
