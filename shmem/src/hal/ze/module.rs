//! Modules and kernels: building SPIR-V (the build log in the error), kernels by name, module globals and a
//! module's device-library state.

use super::{check, context, ZeRuntime};
use crate::abi::{self, DeviceState};
use crate::error::{Error, Result};
use level_zero_sys as ze;
use std::ffi::{c_void, CString};

impl ZeRuntime {
    /// The device address and size of a module's global variable `name`, or `None` when the module has none.
    ///
    /// # Safety
    /// `module` must be a live module of this runtime's context.
    pub unsafe fn global_pointer(
        &self,
        module: ze::ze_module_handle_t,
        name: &str,
    ) -> Result<Option<(*mut u8, usize)>> {
        let cname = CString::new(name)
            .map_err(|_| Error::invalid("global name", name, "must not contain NUL"))?;
        let (mut size, mut ptr) = (0usize, std::ptr::null_mut::<c_void>());
        // SAFETY: the module handle comes from this runtime (or the caller's contract); name is NUL-terminated;
        // out-pointers are valid.
        let r = unsafe {
            (self.api.zeModuleGetGlobalPointer)(module, cname.as_ptr(), &mut size, &mut ptr)
        };
        match r {
            ze::ZE_RESULT_SUCCESS if !ptr.is_null() => Ok(Some((ptr.cast(), size))),
            ze::ZE_RESULT_SUCCESS | ze::ZE_RESULT_ERROR_INVALID_GLOBAL_NAME => Ok(None),
            result => Err(Error::Ze {
                call: format!("zeModuleGetGlobalPointer({name:?})"),
                result,
                detail: String::new(),
            }),
        }
    }

    /// Build a module from SPIR-V; the build log is part of the error.
    pub fn build_module(&self, spirv: &[u8], what: &str) -> Result<ze::ze_module_handle_t> {
        let desc = ze::ze_module_desc_t {
            format: ze::ZE_MODULE_FORMAT_IL_SPIRV,
            inputSize: spirv.len(),
            pInputModule: spirv.as_ptr(),
            ..Default::default()
        };
        let mut module = ze::ze_module_handle_t::null();
        let mut log = ze::ze_module_build_log_handle_t::null();
        // SAFETY: desc points at `spirv`, alive for the call; out-pointers are valid.
        let r = unsafe {
            (self.api.zeModuleCreate)(self.context, self.device, &desc, &mut module, &mut log)
        };
        let text = if log.is_null() {
            String::new()
        } else {
            let mut n = 0usize;
            // SAFETY: size query on a live build log.
            let _ =
                unsafe { (self.api.zeModuleBuildLogGetString)(log, &mut n, std::ptr::null_mut()) };
            let mut buf = vec![0u8; n.max(1)];
            // SAFETY: buf has n bytes.
            let _ = unsafe {
                (self.api.zeModuleBuildLogGetString)(log, &mut n, buf.as_mut_ptr().cast())
            };
            // SAFETY: the log is ours and no longer used.
            let _ = unsafe { (self.api.zeModuleBuildLogDestroy)(log) };
            String::from_utf8_lossy(&buf)
                .trim_end_matches('\0')
                .trim()
                .to_string()
        };
        r.ok().map_err(|result| Error::Ze {
            call: "zeModuleCreate".into(),
            result,
            detail: format!(" (building {what}); build log: {text}"),
        })?;
        self.modules
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(module);
        Ok(module)
    }

    /// A kernel of a module by name.
    ///
    /// # Safety
    /// `module` must be a live module of this runtime's context (from [`ZeRuntime::build_module`] or the
    /// caller's own `zeModuleCreate` in this context).
    pub unsafe fn kernel(
        &self,
        module: ze::ze_module_handle_t,
        name: &str,
    ) -> Result<ze::ze_kernel_handle_t> {
        let cname = CString::new(name)
            .map_err(|_| Error::invalid("kernel name", name, "must not contain NUL"))?;
        let desc = ze::ze_kernel_desc_t {
            pKernelName: cname.as_ptr(),
            ..Default::default()
        };
        let mut k = ze::ze_kernel_handle_t::null();
        // SAFETY: module is live; desc points at cname, alive for the call.
        check("zeKernelCreate", unsafe {
            (self.api.zeKernelCreate)(module, &desc, &mut k)
        })
        .map_err(|e| context(e, format_args!("kernel {name:?}")))?;
        self.kernels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(k);
        Ok(k)
    }
}

/// A module this runtime built ([`ZeRuntime::load`]). Modules are destroyed only when their runtime drops, so the
/// handle is live for as long as the runtime is (a handle is used only with the runtime that built it).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ZeModule(ze::ze_module_handle_t);

/// A kernel this runtime created from a [`ZeModule`] ([`ZeRuntime::kernel_of`]); live as long as the runtime.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ZeKernel(ze::ze_kernel_handle_t);

impl ZeKernel {
    /// The raw handle.
    pub(crate) fn raw(self) -> ze::ze_kernel_handle_t {
        self.0
    }
}

/// The device address of a module's device-library state (its global [`abi::XPUSHMEM_DEVICE_STATE_SYMBOL`]),
/// made only from a global of exactly [`DeviceState`]'s size ([`ZeRuntime::state_of`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct StateGlobal(usize);

/// What a module holds under the device-library state's name.
#[derive(Debug, Clone, Copy)]
pub(crate) enum StateLookup {
    /// The state, of the runtime's [`DeviceState`] size.
    Found(StateGlobal),
    /// No such global: the module was not linked with the device library.
    Missing,
    /// A global of this many bytes: a device library of another version.
    Size(usize),
}

/// The bytes of a device state, as the device reads them.
fn state_bytes(st: &DeviceState) -> &[u8] {
    // SAFETY: DeviceState is repr(C) plain data of integers with no padding (every field is naturally aligned
    // and the C layout test checks the offsets), so all its bytes are initialised.
    unsafe {
        std::slice::from_raw_parts(
            (st as *const DeviceState).cast::<u8>(),
            std::mem::size_of::<DeviceState>(),
        )
    }
}

impl ZeRuntime {
    /// Build a module from SPIR-V ([`ZeRuntime::build_module`]).
    pub(crate) fn load(&self, spirv: &[u8], what: &str) -> Result<ZeModule> {
        self.build_module(spirv, what).map(ZeModule)
    }

    /// A kernel of a module this runtime built, by name.
    pub(crate) fn kernel_of(&self, module: ZeModule, name: &str) -> Result<ZeKernel> {
        // SAFETY: a ZeModule is a live module of this runtime (its type's invariant).
        unsafe { self.kernel(module.0, name) }.map(ZeKernel)
    }

    /// How many work-groups of `kernel` can be resident at once.
    pub(crate) fn max_groups(&self, kernel: ZeKernel) -> Result<u32> {
        // SAFETY: a ZeKernel is a live kernel of this runtime (its type's invariant).
        unsafe { self.max_cooperative_groups(kernel.0) }
    }

    /// How many work-groups of a caller's kernel (a raw `ze_kernel_handle_t`) can be resident at once.
    ///
    /// # Safety
    /// `kernel` must be a live kernel of this runtime's context.
    pub(crate) unsafe fn max_groups_raw(&self, kernel: *mut c_void) -> Result<u32> {
        // SAFETY: the caller's contract.
        unsafe { self.max_cooperative_groups(ze::ze_kernel_handle_t(kernel)) }
    }

    /// The device-library state of a module this runtime built.
    pub(crate) fn state_of(&self, module: ZeModule) -> Result<StateLookup> {
        // SAFETY: a ZeModule is a live module of this runtime (its type's invariant).
        unsafe { self.state_global(module.0) }
    }

    /// The device-library state of a caller's module (a raw `ze_module_handle_t`).
    ///
    /// # Safety
    /// `module` must be a live module of this runtime's context.
    pub(crate) unsafe fn state_global_raw(&self, module: *mut c_void) -> Result<StateLookup> {
        // SAFETY: the caller's contract.
        unsafe { self.state_global(ze::ze_module_handle_t(module)) }
    }

    /// The device-library state of `module`.
    ///
    /// # Safety
    /// `module` must be a live module of this runtime's context.
    unsafe fn state_global(&self, module: ze::ze_module_handle_t) -> Result<StateLookup> {
        // SAFETY: the caller's contract.
        let found = unsafe { self.global_pointer(module, abi::XPUSHMEM_DEVICE_STATE_SYMBOL)? };
        Ok(match found {
            None => StateLookup::Missing,
            Some((addr, size)) if size == std::mem::size_of::<DeviceState>() => {
                StateLookup::Found(StateGlobal(addr as usize))
            }
            Some((_, size)) => StateLookup::Size(size),
        })
    }

    /// Write `st` as a module's device-library state; the state's device address.
    pub(crate) fn write_state(&self, state: StateGlobal, st: &DeviceState) -> Result<*mut u8> {
        let addr = state.0 as *mut u8;
        // SAFETY: a StateGlobal is a module global of DeviceState's size (checked when it was made); modules live
        // as long as the runtime.
        unsafe { self.write_raw(addr, state_bytes(st))? };
        Ok(addr)
    }

    /// The error words (`error`, `error_call`, `error_arg`) of a module's device state when a device call recorded
    /// an error, cleared as they are read (re-arming the module); `None` when no error is recorded.
    pub(crate) fn take_state_error(&self, state: StateGlobal) -> Result<Option<[u8; 16]>> {
        let off = std::mem::offset_of!(DeviceState, error);
        let addr = state.0 + off;
        let mut words = [0u8; 16];
        // SAFETY: a StateGlobal is a module global of DeviceState's size, live as long as the runtime;
        // [off, off+16) holds error, error_call and error_arg.
        unsafe { self.read_raw(&mut words, addr as *const u8)? };
        if words[0..4] == [0; 4] {
            return Ok(None);
        }
        // SAFETY: as above.
        unsafe { self.write_raw(addr as *mut u8, &[0u8; 16])? };
        Ok(Some(words))
    }
}
