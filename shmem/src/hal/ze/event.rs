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

// SAFETY: the handles are opaque identifiers usable from any thread; the runtime they belong to is thread-safe.
unsafe impl Send for ZeEvent {}
// SAFETY: as above; `is_complete` only queries.
unsafe impl Sync for ZeEvent {}
