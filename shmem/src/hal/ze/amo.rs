//! The runtime's own kernels: one-work-item atomics on a word of device memory (host-initiated AMOs on device
//! heaps), on the PE's synchronous compute list or on the service lane.

use super::{check, LaunchOn, ZeRuntime};
use crate::error::{Error, Result};
use crate::types::AmoOp;
use level_zero_sys as ze;
use std::ffi::c_void;

/// The runtime's own kernels (see `shmem/device-lib/runtime_kernels.cl`), prebuilt to SPIR-V.
pub const RUNTIME_KERNELS_SPIRV: &[u8] =
    include_bytes!("../../../device-lib/prebuilt/xpushmem_runtime.spv");

#[derive(Debug)]
pub(super) struct AmoKernels {
    pub(super) module: ze::ze_module_handle_t,
    k32: ze::ze_kernel_handle_t,
    k64: ze::ze_kernel_handle_t,
    /// Host allocation (8 bytes) receiving the previous value.
    pub(super) result: *mut u64,
}

impl ZeRuntime {
    fn amo_kernels(&self) -> Result<std::sync::MutexGuard<'_, Option<AmoKernels>>> {
        let mut g = self.amo.lock().unwrap_or_else(|p| p.into_inner());
        if g.is_none() {
            let module = self.build_module(RUNTIME_KERNELS_SPIRV, "xpushmem runtime kernels")?;
            // SAFETY: the module was just built by this runtime.
            let k64 = unsafe { self.kernel(module, "xpushmem_amo64")? };
            // SAFETY: as above.
            let k32 = unsafe { self.kernel(module, "xpushmem_amo32")? };
            let desc = ze::ze_host_mem_alloc_desc_t::default();
            let mut p: *mut c_void = std::ptr::null_mut();
            // SAFETY: valid context, descriptor and out-pointer.
            check("zeMemAllocHost", unsafe {
                (self.api.zeMemAllocHost)(self.context, &desc, 8, 8, &mut p)
            })?;
            *g = Some(AmoKernels {
                module,
                k32,
                k64,
                result: p.cast(),
            });
        }
        Ok(g)
    }

    /// An atomic on the word at `target` (device memory of this context, in bounds and aligned: checked by the
    /// caller) run on the service lane; the previous value.
    #[cfg_attr(not(xpushmem_fabric), allow(dead_code))] // used by the fabric transport
    pub(crate) fn service_amo(
        &self,
        target: *mut u8,
        width: usize,
        op: AmoOp,
        operand: u64,
    ) -> Result<u64> {
        self.amo_on(target, width, op, operand, true)
    }

    pub(crate) fn amo(
        &self,
        target: *mut u8,
        width: usize,
        op: AmoOp,
        operand: u64,
    ) -> Result<u64> {
        self.amo_on(target, width, op, operand, false)
    }

    fn amo_on(
        &self,
        target: *mut u8,
        width: usize,
        op: AmoOp,
        operand: u64,
        service: bool,
    ) -> Result<u64> {
        let (code, cond) = op.code();
        let code = code as u32;
        let g = self.amo_kernels()?;
        let k = g
            .as_ref()
            .ok_or_else(|| Error::Device("device atomics unavailable".into()))?;
        let kernel = if width == 4 { k.k32 } else { k.k64 };
        let args = vec![
            (target as u64).to_ne_bytes().to_vec(),
            code.to_ne_bytes().to_vec(),
            operand.to_ne_bytes().to_vec(),
            cond.to_ne_bytes().to_vec(),
            (k.result as u64).to_ne_bytes().to_vec(),
        ];
        let on = if service {
            LaunchOn::Service
        } else {
            LaunchOn::Sync
        };
        // SAFETY: the runtime's own atomic kernel: it touches only `target` (one aligned word inside a window,
        // checked by the caller) and the 8-byte result allocation.
        unsafe { self.append_kernel(on, kernel, &args, [1, 1, 1], [1, 1, 1], false)? };
        // SAFETY: result is our 8-byte host allocation; the kernel has finished (synchronous list) and we hold
        // the lock that serialises every use of it.
        Ok(unsafe { std::ptr::read_volatile(k.result) })
    }
}
