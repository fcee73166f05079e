//! Work enqueued without the host waiting: command lists a caller owns ([`CommandList`], a framework's stream)
//! and in-order queues the runtime owns ([`Queue`]); a kernel goes onto either through the one launch path
//! ([`ZeRuntime::append_kernel`], [`ZeRuntime::enqueue`]).

use super::{check, immediate_list, LaunchOn, ZeRuntime};
use crate::error::{Error, Result};
use level_zero_sys as ze;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

/// A Level Zero command list to enqueue on: an immediate list (work starts as it is appended) or a regular one
/// (the owner closes and executes it). Borrowed: the owner keeps it alive and destroys it.
#[derive(Debug, Clone, Copy)]
pub struct CommandList {
    raw: ze::ze_command_list_handle_t,
}

impl CommandList {
    /// Wrap a caller's command list.
    ///
    /// # Safety
    /// `handle` must be a live command list of the runtime's context and device (`xpushmemx_ze_get_handles`), on
    /// a compute engine, and stay alive while work appended through this value may still run.
    pub unsafe fn from_raw(handle: *mut c_void) -> CommandList {
        CommandList {
            raw: ze::ze_command_list_handle_t(handle),
        }
    }

    /// The raw handle.
    pub fn as_raw(&self) -> *mut c_void {
        self.raw.0
    }
}

// SAFETY: a command list handle is an opaque identifier; Level Zero allows appending from any thread (the caller
// serialises appends to one list, as for any list).
unsafe impl Send for CommandList {}
// SAFETY: as above.
unsafe impl Sync for CommandList {}

/// How [`Queue::submit`] waits: given a completion probe, wait until it says done.
pub(crate) type WaitFn<'w> = dyn Fn(&dyn Fn() -> Result<bool>) -> Result<()> + 'w;

/// An in-order queue the runtime owns: an asynchronous immediate command list on the compute engine, or a
/// regular list with its command queue (work runs at `Queue::submit`).
#[derive(Debug)]
pub struct Queue {
    rt: Arc<ZeRuntime>,
    list: ze::ze_command_list_handle_t,
    queue: Option<ze::ze_command_queue_handle_t>,
    pool: ze::ze_event_pool_handle_t,
    event: ze::ze_event_handle_t,
    lock: Mutex<()>,
}

// SAFETY: handles are opaque identifiers; appends and submits are serialised by `lock`.
unsafe impl Send for Queue {}
// SAFETY: as above.
unsafe impl Sync for Queue {}

impl Queue {
    pub(crate) fn new(rt: &Arc<ZeRuntime>, immediate: bool) -> Result<Queue> {
        let api = rt.api();
        let h = rt.handles();
        let ordinal = rt.compute_ordinal();
        let mut list = ze::ze_command_list_handle_t::null();
        let mut queue = None;
        if immediate {
            list = immediate_list(
                api,
                h.context(),
                h.device(),
                ordinal,
                0,
                ze::ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS,
            )?;
        } else {
            let qdesc = ze::ze_command_queue_desc_t {
                ordinal,
                index: 0,
                mode: ze::ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS,
                ..Default::default()
            };
            let mut q = ze::ze_command_queue_handle_t::null();
            // SAFETY: valid handles, descriptor and out-pointer.
            check("zeCommandQueueCreate", unsafe {
                (api.zeCommandQueueCreate)(h.context(), h.device(), &qdesc, &mut q)
            })?;
            queue = Some(q);
            let ldesc = ze::ze_command_list_desc_t {
                commandQueueGroupOrdinal: ordinal,
                ..Default::default()
            };
            // SAFETY: valid handles, descriptor and out-pointer.
            let r = check("zeCommandListCreate", unsafe {
                (api.zeCommandListCreate)(h.context(), h.device(), &ldesc, &mut list)
            });
            if let Err(e) = r {
                // SAFETY: created above, unused.
                unsafe { (api.zeCommandQueueDestroy)(q) };
                return Err(e);
            }
        }
        let mut q = Queue {
            rt: rt.clone(),
            list,
            queue,
            pool: ze::ze_event_pool_handle_t::null(),
            event: ze::ze_event_handle_t::null(),
            lock: Mutex::new(()),
        };
        (q.pool, q.event) = rt.host_event()?;
        Ok(q)
    }

    /// The list to enqueue on.
    pub fn list(&self) -> CommandList {
        CommandList { raw: self.list }
    }

    /// Whether the list is immediate.
    pub fn is_immediate(&self) -> bool {
        self.queue.is_none()
    }

    /// Run what was enqueued (a regular list: close, execute, reset after) and wait until it has finished, with
    /// the runtime's timeout and back-off (`wait` polls a completion flag).
    pub(crate) fn submit(&self, wait: &WaitFn<'_>) -> Result<()> {
        let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let api = self.rt.api();
        // SAFETY: the event is ours and not in use (submits are serialised).
        check("zeEventHostReset", unsafe {
            (api.zeEventHostReset)(self.event)
        })?;
        // SAFETY: live list and event; a barrier signalling the event after everything before it.
        check("zeCommandListAppendBarrier", unsafe {
            (api.zeCommandListAppendBarrier)(self.list, self.event, 0, std::ptr::null_mut())
        })?;
        if let Some(q) = self.queue {
            // SAFETY: live list, owned by this queue.
            check("zeCommandListClose", unsafe {
                (api.zeCommandListClose)(self.list)
            })?;
            let mut l = self.list;
            // SAFETY: live queue and one closed list of the same context.
            check("zeCommandQueueExecuteCommandLists", unsafe {
                (api.zeCommandQueueExecuteCommandLists)(q, 1, &mut l, ze::ze_fence_handle_t::null())
            })?;
        }
        let event = self.event;
        let r = wait(&|| {
            // SAFETY: the event is live (owned by self).
            match unsafe { (api.zeEventQueryStatus)(event) } {
                ze::ZE_RESULT_SUCCESS => Ok(true),
                ze::ZE_RESULT_NOT_READY => Ok(false),
                r => check("zeEventQueryStatus", r).map(|()| false),
            }
        });
        if r.is_ok() && self.queue.is_some() {
            // SAFETY: the list has finished executing (its last command signalled the event).
            check("zeCommandListReset", unsafe {
                (api.zeCommandListReset)(self.list)
            })?;
        }
        r
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        let api = self.rt.api();
        // SAFETY: every handle is ours and destroyed once; work still running is waited for (bounded) first.
        unsafe {
            if let Some(q) = self.queue {
                let _ = (api.zeCommandQueueSynchronize)(q, 60_000_000_000);
            } else if !self.event.is_null() {
                let _ = (api.zeEventHostReset)(self.event);
                let _ = (api.zeCommandListAppendBarrier)(
                    self.list,
                    self.event,
                    0,
                    std::ptr::null_mut(),
                );
                let _ = (api.zeEventHostSynchronize)(self.event, 60_000_000_000);
            }
            if !self.event.is_null() {
                let _ = (api.zeEventDestroy)(self.event);
            }
            if !self.pool.is_null() {
                let _ = (api.zeEventPoolDestroy)(self.pool);
            }
            let _ = (api.zeCommandListDestroy)(self.list);
            if let Some(q) = self.queue {
                let _ = (api.zeCommandQueueDestroy)(q);
            }
        }
    }
}

/// The Level Zero events an op enqueued on a caller's list waits for before it starts and signals when it has
/// finished (Level Zero's own `phWaitEvents`/`hSignalEvent` of the launch). Borrowed: the caller owns the events.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueEvents<'e> {
    waits: &'e [ze::ze_event_handle_t],
    signal: ze::ze_event_handle_t,
}

impl<'e> QueueEvents<'e> {
    /// No events: the op is ordered by the list alone.
    pub fn none() -> QueueEvents<'static> {
        QueueEvents::default()
    }

    /// Wait for every event of `waits` (raw `ze_event_handle_t`s), signal `signal` (null: none).
    ///
    /// # Safety
    /// Each handle must be null or a live event (of any pool; one of another context is reported as an error by
    /// the driver, not undefined), and stay alive until the op has run.
    pub unsafe fn from_raw(waits: &'e [*mut c_void], signal: *mut c_void) -> QueueEvents<'e> {
        const _: () = assert!(
            std::mem::size_of::<ze::ze_event_handle_t>() == std::mem::size_of::<*mut c_void>()
        );
        QueueEvents {
            // SAFETY: `ze_event_handle_t` is a `#[repr(transparent)]` wrapper of `*mut c_void` (same size, checked
            // above), so the slice's elements have the same layout.
            waits: unsafe {
                std::slice::from_raw_parts(
                    waits.as_ptr().cast::<ze::ze_event_handle_t>(),
                    waits.len(),
                )
            },
            signal: ze::ze_event_handle_t(signal),
        }
    }

    /// The number of wait events.
    pub fn wait_count(&self) -> usize {
        self.waits.len()
    }

    /// Whether a signal event is set.
    pub fn has_signal(&self) -> bool {
        !self.signal.is_null()
    }
}

impl ZeRuntime {
    /// Append `kernel` to the caller's `list` with `groups` work-groups of `group_size` work-items, after a
    /// barrier on everything appended before it, through the one launch path, waiting for and signalling
    /// `events`; returns at once. When the driver refuses the append, the error says which argument was wrong
    /// ([`ZeRuntime::diagnose_append`]).
    ///
    /// # Safety
    /// As for [`ZeRuntime::launch`], for as long as the kernel may run; the caller serialises appends to `list`.
    pub(crate) unsafe fn enqueue(
        &self,
        list: CommandList,
        events: QueueEvents<'_>,
        kernel: ze::ze_kernel_handle_t,
        args: &[Vec<u8>],
        groups: [u32; 3],
        group_size: [u32; 3],
    ) -> Result<()> {
        if groups.contains(&0) || group_size.contains(&0) {
            return Err(Error::invalid(
                "groups/group_size",
                format!("{groups:?}/{group_size:?}"),
                "every dimension must be at least 1",
            ));
        }
        if list.raw.is_null() {
            return Err(Error::invalid(
                "ze_command_list",
                "NULL",
                "a Level Zero command list of the runtime's context and device is required",
            ));
        }
        let on = LaunchOn::Caller {
            list: list.raw,
            waits: events.waits,
            signal: events.signal,
        };
        // SAFETY: the caller's contract; the caller's list is live (CommandList's contract).
        let r = unsafe { self.append_kernel(on, kernel, args, groups, group_size, false) };
        r.map_err(|e| match e {
            Error::Ze { .. } => self.diagnose_append(list, events, e),
            e => e,
        })
    }

    /// The runtime's probe event (created on first use, host-signalled once): waiting for it never blocks.
    fn probe_event(&self) -> Result<ze::ze_event_handle_t> {
        let mut g = self.probe.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, e)) = *g {
            return Ok(e);
        }
        let (pool, event) = self.host_event()?;
        // SAFETY: the event was just created.
        let r = check("zeEventHostSignal", unsafe {
            (self.api.zeEventHostSignal)(event)
        });
        if let Err(e) = r {
            // SAFETY: created above, never used by a list.
            unsafe {
                (self.api.zeEventDestroy)(event);
                (self.api.zeEventPoolDestroy)(pool);
            }
            return Err(e);
        }
        *g = Some((pool, event));
        Ok(event)
    }

    /// Append a barrier to `list` that signals `signal` (null: none) after `waits`: the probe of
    /// [`ZeRuntime::diagnose_append`].
    fn probe_barrier(
        &self,
        list: ze::ze_command_list_handle_t,
        signal: ze::ze_event_handle_t,
        waits: &[ze::ze_event_handle_t],
    ) -> Result<()> {
        let mut w = waits.to_vec();
        let p = if w.is_empty() {
            std::ptr::null_mut()
        } else {
            w.as_mut_ptr()
        };
        // SAFETY: the list is the caller's (CommandList's contract) and the events are the caller's
        // (QueueEvents' contract) or the runtime's probe; the driver reports handles of another context.
        check("zeCommandListAppendBarrier", unsafe {
            (self.api.zeCommandListAppendBarrier)(list, signal, w.len() as u32, p)
        })
    }

    /// Which argument made the driver refuse an append to a caller's list (`err`), as an
    /// [`Error::InvalidArgument`] naming it: barriers are appended one argument at a time (the list alone; a wait
    /// for the runtime's own, already signalled probe event, which a list of another context refuses; each wait
    /// event; the signal event). A barrier that is accepted only orders the list (its waits are the op's own),
    /// except that a signal event is probed last, when everything else was accepted.
    fn diagnose_append(&self, list: CommandList, events: QueueEvents<'_>, err: Error) -> Error {
        let l = list.raw;
        let value = format!("{:p}", l.0);
        if let Err(e) = self.probe_barrier(l, ze::ze_event_handle_t::null(), &[]) {
            return Error::invalid(
                "ze_command_list",
                value,
                format!("not a live Level Zero command list: {e}"),
            );
        }
        let probe = self.probe_event();
        if let Ok(p) = probe {
            if let Err(e) = self.probe_barrier(l, ze::ze_event_handle_t::null(), &[p]) {
                return Error::invalid(
                    "ze_command_list",
                    value,
                    format!(
                        "a command list of another Level Zero context than the runtime's (xpushmemx_ze_get_handles): {e}"
                    ),
                );
            }
        }
        for (i, w) in events.waits.iter().enumerate() {
            if let Err(e) = self.probe_barrier(l, ze::ze_event_handle_t::null(), &[*w]) {
                return Error::invalid(
                    "wait_events",
                    format!("[{i}] = {:p}", w.0),
                    format!(
                        "not a live event of the runtime's Level Zero context (an event pool of another context, or a destroyed event): {e}"
                    ),
                );
            }
        }
        if !events.signal.is_null() {
            if let Err(e) = self.probe_barrier(l, events.signal, &[]) {
                return Error::invalid(
                    "signal_event",
                    format!("{:p}", events.signal.0),
                    format!(
                        "not a live event of the runtime's Level Zero context (an event pool of another context, or a destroyed event): {e}"
                    ),
                );
            }
        }
        Error::invalid(
            "ze_command_list",
            value,
            format!(
                "the driver refused the op's kernel on this list ({err}): a list of another device than the runtime's, or of a copy-only engine"
            ),
        )
    }
}
