//! Events: a device operation in flight, signalled when it has completed.

use super::{check, ZeRuntime};
use crate::error::Result;
use level_zero_sys as ze;
use std::sync::Arc;

/// A device operation in flight; signalled when it has completed.
#[derive(Debug)]
pub struct ZeEvent {
    pub(super) rt: Arc<ZeRuntime>,
    pub(super) pool: ze::ze_event_pool_handle_t,
    pub(super) event: ze::ze_event_handle_t,
}

impl ZeEvent {
    /// Whether the operation has completed (never blocks).
    pub fn is_complete(&self) -> Result<bool> {
        // SAFETY: the event is live (owned by self).
        match unsafe { (self.rt.api.zeEventQueryStatus)(self.event) } {
            ze::ZE_RESULT_SUCCESS => Ok(true),
            ze::ZE_RESULT_NOT_READY => Ok(false),
            r => check("zeEventQueryStatus", r).map(|()| false),
        }
    }
}

impl Drop for ZeEvent {
    fn drop(&mut self) {
        // SAFETY: both handles are ours. An event still in flight is waited for (bounded) before it is destroyed,
        // since the device may still signal it.
        unsafe {
            if !self.event.is_null() {
                let _ = (self.rt.api.zeEventHostSynchronize)(self.event, 60_000_000_000);
                let _ = (self.rt.api.zeEventDestroy)(self.event);
            }
            let _ = (self.rt.api.zeEventPoolDestroy)(self.pool);
        }
    }
}

impl ZeRuntime {
    /// A host-visible event pool of one event, and that event (host scope), in the runtime's context; nothing is
    /// left behind on failure. The caller destroys both.
    pub(super) fn host_event(&self) -> Result<(ze::ze_event_pool_handle_t, ze::ze_event_handle_t)> {
        let pool_desc = ze::ze_event_pool_desc_t {
            flags: ze::ZE_EVENT_POOL_FLAG_HOST_VISIBLE,
            count: 1,
            ..Default::default()
        };
        let mut pool = ze::ze_event_pool_handle_t::null();
        let mut dev = self.device;
        // SAFETY: valid context, descriptor, one device handle and out-pointer.
        check("zeEventPoolCreate", unsafe {
            (self.api.zeEventPoolCreate)(self.context, &pool_desc, 1, &mut dev, &mut pool)
        })?;
        let ev_desc = ze::ze_event_desc_t {
            index: 0,
            signal: ze::ZE_EVENT_SCOPE_FLAG_HOST,
            wait: ze::ZE_EVENT_SCOPE_FLAG_HOST,
            ..Default::default()
        };
        let mut event = ze::ze_event_handle_t::null();
        // SAFETY: live pool, descriptor and out-pointer.
        let r = check("zeEventCreate", unsafe {
            (self.api.zeEventCreate)(pool, &ev_desc, &mut event)
        });
        if let Err(e) = r {
            // SAFETY: the pool was just created and holds no event.
            unsafe { (self.api.zeEventPoolDestroy)(pool) };
            return Err(e);
        }
        Ok((pool, event))
    }
}

// SAFETY: the handles are opaque identifiers usable from any thread; the runtime they belong to is thread-safe.
unsafe impl Send for ZeEvent {}
// SAFETY: as above; `is_complete` only queries.
unsafe impl Sync for ZeEvent {}
