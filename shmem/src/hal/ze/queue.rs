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
        let pool_desc = ze::ze_event_pool_desc_t {
            flags: ze::ZE_EVENT_POOL_FLAG_HOST_VISIBLE,
            count: 1,
            ..Default::default()
        };
        let mut dev = h.device();
        // SAFETY: valid context, descriptor, one device handle and out-pointer.
        check("zeEventPoolCreate", unsafe {
            (api.zeEventPoolCreate)(h.context(), &pool_desc, 1, &mut dev, &mut q.pool)
        })?;
        let ev_desc = ze::ze_event_desc_t {
            index: 0,
            signal: ze::ZE_EVENT_SCOPE_FLAG_HOST,
            wait: ze::ZE_EVENT_SCOPE_FLAG_HOST,
            ..Default::default()
        };
        // SAFETY: live pool, descriptor and out-pointer.
        check("zeEventCreate", unsafe {
            (api.zeEventCreate)(q.pool, &ev_desc, &mut q.event)
        })?;
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

impl ZeRuntime {
    /// Append `kernel` to the caller's `list` with `groups` work-groups of `group_size` work-items, after a
    /// barrier on everything appended before it, through the one launch path; returns at once.
    ///
    /// # Safety
    /// As for [`ZeRuntime::launch`], for as long as the kernel may run; the caller serialises appends to `list`.
    pub(crate) unsafe fn enqueue(
        &self,
        list: CommandList,
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
        // SAFETY: the caller's contract; the caller's list is live (CommandList's contract).
        unsafe {
            self.append_kernel(
                LaunchOn::Caller(list.raw),
                kernel,
                args,
                groups,
                group_size,
                false,
            )
        }
    }
}
