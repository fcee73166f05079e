//! Handle registry: every object handed out as a handle lives in an `Arc` owned by a registry; a handle is the
//! address of the object. Resolving a handle is a map lookup, never a dereference of the caller's pointer, so a
//! stale or foreign handle is an error instead of undefined behaviour.

use level_zero_sys::*;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

/// Objects of one kind, keyed by handle value.
pub struct Registry<T> {
    map: Mutex<HashMap<usize, Arc<T>>>,
}

impl<T> Default for Registry<T> {
    fn default() -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
        }
    }
}

impl<T> Registry<T> {
    /// Registers `obj`; returns its handle value.
    pub fn insert(&self, obj: Arc<T>) -> *mut c_void {
        let p = Arc::as_ptr(&obj) as *mut c_void;
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(p as usize, obj);
        p
    }

    /// Resolves a handle: null gives `ZE_RESULT_ERROR_INVALID_NULL_HANDLE`, an unknown value
    /// `ZE_RESULT_ERROR_INVALID_ARGUMENT`.
    pub fn get(&self, h: *mut c_void) -> Result<Arc<T>, ze_result_t> {
        if h.is_null() {
            return Err(ZE_RESULT_ERROR_INVALID_NULL_HANDLE);
        }
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(h as usize))
            .cloned()
            .ok_or(ZE_RESULT_ERROR_INVALID_ARGUMENT)
    }

    /// Like [`Registry::get`] but a null handle gives `Ok(None)`.
    pub fn get_opt(&self, h: *mut c_void) -> Result<Option<Arc<T>>, ze_result_t> {
        if h.is_null() {
            Ok(None)
        } else {
            self.get(h).map(Some)
        }
    }

    /// Unregisters a handle after `check` accepted the object.
    pub fn remove_if(
        &self,
        h: *mut c_void,
        check: impl FnOnce(&Arc<T>) -> Result<(), ze_result_t>,
    ) -> Result<Arc<T>, ze_result_t> {
        if h.is_null() {
            return Err(ZE_RESULT_ERROR_INVALID_NULL_HANDLE);
        }
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let obj = map
            .get(&(h as usize))
            .ok_or(ZE_RESULT_ERROR_INVALID_ARGUMENT)?;
        check(obj)?;
        Ok(map.remove(&(h as usize)).expect("present"))
    }

    /// Whether any registered object satisfies `f`.
    pub fn any(&self, f: impl Fn(&T) -> bool) -> bool {
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .any(|o| f(o))
    }
}
