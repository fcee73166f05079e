//! `ze-emu`: a Level Zero driver for tests without an Intel GPU, loaded by the real Level Zero loader with
//! `ZE_ENABLE_ALT_DRIVERS=/abs/path/libze_emu.so`.
//!
//! * Devices: `XPUSHMEM_EMU_DEVICES` (default 1, at most 64) GPU-type devices, every pair peer-accessible with
//!   atomics unless `XPUSHMEM_EMU_P2P` says otherwise (`none`, `access` without atomics, or per pair `0-2:none`;
//!   reported by `zeDeviceCanAccessPeer` and `zeDeviceGetP2PProperties` only: memory stays reachable); one memory ordinal; queue group 0 = compute + copy (4 queues, fill patterns up to 128 bytes),
//!   group 1 = copy only (1 queue, fill patterns up to 4 bytes).
//! * Memory: every allocation is its own memfd mapped `MAP_SHARED`. `zeMemGetIpcHandle` puts a driver-owned
//!   duplicate of that fd into bytes 0..4 of the handle (like Intel's driver); bytes 8..16 hold the mapping
//!   length, 16..24 the magic `ZEEMUIPC`, 24..32 the allocation size. The importer must bring the fd into its own
//!   process (SCM_RIGHTS or `pidfd_getfd`), patch its number into bytes 0..4 and call `zeMemOpenIpcHandle`, which
//!   maps it; the importer keeps ownership of its fd (it may close it once opened).
//! * Virtual memory (`vmem`): reservations, physical memory (a memfd each) mapped into them at a 64 KiB page
//!   size; physical memory created exportable is exported by `zeMemGetAllocProperties` on a mapped address with
//!   `ze_external_memory_export_fd_t` (a duplicate fd the caller owns) and imported by `zePhysicalMemCreate` with
//!   `ze_external_memory_import_fd_t`. `XPUSHMEM_EMU_MEMORY` caps the physical memory a process may create on a device
//!   (one value, or a list by device index; past it: `ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY`, as a full device).
//! * Execution: each command queue and immediate command list has a worker thread running work in order;
//!   events, fences and waits block the queue, not the caller (except synchronous mode).
//! * Modules: SPIR-V only, built by an OpenCL runtime with SPIR-V IL support (Intel's CPU runtime, selected with
//!   `OCL_ICD_FILENAMES`) loaded from `libOpenCL.so.1`. Without it `zeModuleCreate` fails with
//!   `ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE`; everything else works. Kernel pointer arguments are passed with
//!   `clSetKernelArgMemPointerINTEL` (shared system USM: any host address works, including IPC mappings).
//!
//! Strictness: `stype` of every descriptor/properties structure is checked (`ZE_RESULT_ERROR_INVALID_ARGUMENT`),
//! unknown flag bits are `ZE_RESULT_ERROR_INVALID_ENUMERATION`, extension structures other than
//! `ze_relaxed_allocation_limits_exp_desc_t` are `ZE_RESULT_ERROR_UNSUPPORTED_FEATURE`, stale or foreign handles
//! are `ZE_RESULT_ERROR_INVALID_ARGUMENT`, appending to a closed list / executing an open one /
//! closing an immediate list is `ZE_RESULT_ERROR_INVALID_ARGUMENT`, destroying busy objects is
//! `ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE`. Errors a caller could not otherwise understand are also printed to
//! stderr with the prefix `ze-emu:` (silence with `ZE_EMU_QUIET=1`).
#![warn(missing_docs)]

mod driver;
mod exec;
mod memory;
mod module;
mod objects;
mod ocl;
mod progcache;
mod registry;
mod spirv;
pub mod testing;
mod util;
mod vmem;

pub use memory::ipc_layout;
pub use objects::{DEVICES_ENV, MAX_DEVICES, MEMORY_ENV, P2P_ENV};

use level_zero_sys::*;
use std::ffi::c_void;

/// Checks the loader's request: a non-null table and an API version 1.x with x >= 4 (the table layout).
fn table_request<T>(version: ze_api_version_t, p: *mut T) -> Result<(), ze_result_t> {
    if p.is_null() {
        return Err(ZE_RESULT_ERROR_INVALID_NULL_POINTER);
    }
    if version.major() != 1 || version.minor() < 4 {
        return Err(ZE_RESULT_ERROR_UNSUPPORTED_VERSION);
    }
    Ok(())
}

macro_rules! export_table {
    ($(#[$m:meta])* $name:ident : $ty:ty = |$t:ident| $fill:block) => {
        $(#[$m])*
        ///
        /// # Safety
        /// Called by the Level Zero loader with a pointer to its table of this type (API >= 1.4 layout).
        #[no_mangle]
        pub unsafe extern "C" fn $name(version: ze_api_version_t, p: *mut $ty) -> ze_result_t {
            if let Err(e) = table_request(version, p) {
                return e;
            }
            #[allow(unused_mut)]
            let mut $t = <$ty>::default();
            $fill
            // SAFETY: the loader passes a writable table with at least the 1.4 layout (checked version).
            unsafe { p.write($t) };
            ZE_RESULT_SUCCESS
        }
    };
}

export_table! { /// Global table.
zeGetGlobalProcAddrTable: ze_global_dditable_t = |t| { t.pfnInit = Some(driver::ze_init); } }
export_table! { /// Driver table.
    zeGetDriverProcAddrTable: ze_driver_dditable_t = |t| {
    t.pfnGet = Some(driver::driver_get);
    t.pfnGetApiVersion = Some(driver::driver_get_api_version);
    t.pfnGetProperties = Some(driver::driver_get_properties);
    t.pfnGetIpcProperties = Some(driver::driver_get_ipc_properties);
    t.pfnGetExtensionFunctionAddress = Some(driver::driver_get_extension_function_address);
} }
export_table! { /// Device table.
    zeGetDeviceProcAddrTable: ze_device_dditable_t = |t| {
    t.pfnGet = Some(driver::device_get);
    t.pfnGetSubDevices = Some(driver::device_get_sub_devices);
    t.pfnGetProperties = Some(driver::device_get_properties);
    t.pfnGetComputeProperties = Some(driver::device_get_compute_properties);
    t.pfnGetModuleProperties = Some(driver::device_get_module_properties);
    t.pfnGetCommandQueueGroupProperties = Some(driver::device_get_command_queue_group_properties);
    t.pfnGetMemoryProperties = Some(driver::device_get_memory_properties);
    t.pfnGetP2PProperties = Some(driver::device_get_p2p_properties);
    t.pfnCanAccessPeer = Some(driver::device_can_access_peer);
    t.pfnGetStatus = Some(driver::device_get_status);
} }
export_table! { /// Context table.
    zeGetContextProcAddrTable: ze_context_dditable_t = |t| {
    t.pfnCreate = Some(driver::context_create);
    t.pfnDestroy = Some(driver::context_destroy);
    t.pfnGetStatus = Some(driver::context_get_status);
} }
export_table! { /// Command queue table.
    zeGetCommandQueueProcAddrTable: ze_command_queue_dditable_t = |t| {
    t.pfnCreate = Some(exec::queue_create);
    t.pfnDestroy = Some(exec::queue_destroy);
    t.pfnExecuteCommandLists = Some(exec::queue_execute);
    t.pfnSynchronize = Some(exec::queue_synchronize);
} }
export_table! { /// Command list table.
    zeGetCommandListProcAddrTable: ze_command_list_dditable_t = |t| {
    t.pfnCreate = Some(exec::list_create);
    t.pfnCreateImmediate = Some(exec::list_create_immediate);
    t.pfnDestroy = Some(exec::list_destroy);
    t.pfnClose = Some(exec::list_close);
    t.pfnReset = Some(exec::list_reset);
    t.pfnAppendBarrier = Some(exec::list_append_barrier);
    t.pfnAppendMemoryCopy = Some(exec::list_append_memory_copy);
    t.pfnAppendMemoryFill = Some(exec::list_append_memory_fill);
    t.pfnAppendSignalEvent = Some(exec::list_append_signal_event);
    t.pfnAppendWaitOnEvents = Some(exec::list_append_wait_on_events);
    t.pfnAppendEventReset = Some(exec::list_append_event_reset);
    t.pfnAppendLaunchKernel = Some(exec::list_append_launch_kernel);
    t.pfnAppendLaunchCooperativeKernel = Some(exec::list_append_launch_cooperative_kernel);
} }
export_table! { /// Fence table.
    zeGetFenceProcAddrTable: ze_fence_dditable_t = |t| {
    t.pfnCreate = Some(exec::fence_create);
    t.pfnDestroy = Some(exec::fence_destroy);
    t.pfnHostSynchronize = Some(exec::fence_host_synchronize);
    t.pfnQueryStatus = Some(exec::fence_query_status);
    t.pfnReset = Some(exec::fence_reset);
} }
export_table! { /// Event pool table.
    zeGetEventPoolProcAddrTable: ze_event_pool_dditable_t = |t| {
    t.pfnCreate = Some(exec::pool_create);
    t.pfnDestroy = Some(exec::pool_destroy);
} }
export_table! { /// Event table.
    zeGetEventProcAddrTable: ze_event_dditable_t = |t| {
    t.pfnCreate = Some(exec::event_create);
    t.pfnDestroy = Some(exec::event_destroy);
    t.pfnHostSignal = Some(exec::event_host_signal);
    t.pfnHostSynchronize = Some(exec::event_host_synchronize);
    t.pfnQueryStatus = Some(exec::event_query_status);
    t.pfnHostReset = Some(exec::event_host_reset);
} }
export_table! { /// Image table (not implemented: all entries null).
zeGetImageProcAddrTable: ze_image_dditable_t = |t| {} }
export_table! { /// Module table.
    zeGetModuleProcAddrTable: ze_module_dditable_t = |t| {
    t.pfnCreate = Some(module::module_create);
    t.pfnDestroy = Some(module::module_destroy);
    t.pfnGetGlobalPointer = Some(module::module_get_global_pointer);
    t.pfnGetKernelNames = Some(module::module_get_kernel_names);
} }
export_table! { /// Module build log table.
    zeGetModuleBuildLogProcAddrTable: ze_module_build_log_dditable_t = |t| {
    t.pfnDestroy = Some(module::build_log_destroy);
    t.pfnGetString = Some(module::build_log_get_string);
} }
export_table! { /// Kernel table.
    zeGetKernelProcAddrTable: ze_kernel_dditable_t = |t| {
    t.pfnCreate = Some(module::kernel_create);
    t.pfnDestroy = Some(module::kernel_destroy);
    t.pfnSetGroupSize = Some(module::kernel_set_group_size);
    t.pfnSuggestGroupSize = Some(module::kernel_suggest_group_size);
    t.pfnSuggestMaxCooperativeGroupCount = Some(module::kernel_suggest_max_cooperative_group_count);
    t.pfnSetArgumentValue = Some(module::kernel_set_argument_value);
    t.pfnGetName = Some(module::kernel_get_name);
} }
export_table! { /// Sampler table (not implemented).
zeGetSamplerProcAddrTable: ze_sampler_dditable_t = |t| {} }
export_table! { /// Physical memory table.
    zeGetPhysicalMemProcAddrTable: ze_physical_mem_dditable_t = |t| {
    t.pfnCreate = Some(vmem::physical_mem_create);
    t.pfnDestroy = Some(vmem::physical_mem_destroy);
} }
export_table! { /// Memory table.
    zeGetMemProcAddrTable: ze_mem_dditable_t = |t| {
    t.pfnAllocShared = Some(memory::mem_alloc_shared);
    t.pfnAllocDevice = Some(memory::mem_alloc_device);
    t.pfnAllocHost = Some(memory::mem_alloc_host);
    t.pfnFree = Some(memory::mem_free);
    t.pfnGetAllocProperties = Some(memory::mem_get_alloc_properties);
    t.pfnGetAddressRange = Some(memory::mem_get_address_range);
    t.pfnGetIpcHandle = Some(memory::mem_get_ipc_handle);
    t.pfnOpenIpcHandle = Some(memory::mem_open_ipc_handle);
    t.pfnCloseIpcHandle = Some(memory::mem_close_ipc_handle);
} }
export_table! { /// Virtual memory table (all but `zeVirtualMemGetAccessAttribute`).
    zeGetVirtualMemProcAddrTable: ze_virtual_mem_dditable_t = |t| {
    t.pfnReserve = Some(vmem::virtual_mem_reserve);
    t.pfnFree = Some(vmem::virtual_mem_free);
    t.pfnQueryPageSize = Some(vmem::virtual_mem_query_page_size);
    t.pfnMap = Some(vmem::virtual_mem_map);
    t.pfnUnmap = Some(vmem::virtual_mem_unmap);
    t.pfnSetAccessAttribute = Some(vmem::virtual_mem_set_access_attribute);
} }

/// Exports table getters the loader requires but ze-emu does not implement: they accept the request and leave
/// the loader's (zero-initialised) table untouched, so every entry stays null and calls through it fail with
/// `ZE_RESULT_ERROR_UNSUPPORTED_FEATURE`. Without the tools (`zet`) and sysman (`zes`) getters the 1.8.12
/// loader's `zeInit` fails.
macro_rules! export_empty_tables {
    ($($name:ident),* $(,)?) => {$(
        #[doc = concat!("`", stringify!($name), "`: not implemented (table left null).")]
        ///
        /// # Safety
        /// Called by the Level Zero loader; `p` is not written.
        #[no_mangle]
        pub unsafe extern "C" fn $name(version: ze_api_version_t, p: *mut c_void) -> ze_result_t {
            match table_request(version, p) {
                Ok(()) => ZE_RESULT_SUCCESS,
                Err(e) => e,
            }
        }
    )*};
}

export_empty_tables! {
    zeGetDeviceExpProcAddrTable, zeGetEventExpProcAddrTable, zeGetImageExpProcAddrTable,
    zeGetKernelExpProcAddrTable, zeGetFabricVertexExpProcAddrTable, zeGetFabricEdgeExpProcAddrTable,
    zeGetCommandListExpProcAddrTable, zeGetMemExpProcAddrTable, zeGetModuleExpProcAddrTable,
    zeGetDriverExpProcAddrTable, zeGetRTASBuilderExpProcAddrTable, zeGetRTASParallelOperationExpProcAddrTable,
    zetGetDeviceProcAddrTable, zetGetContextProcAddrTable, zetGetCommandListProcAddrTable,
    zetGetModuleProcAddrTable, zetGetKernelProcAddrTable, zetGetMetricProcAddrTable,
    zetGetMetricGroupProcAddrTable, zetGetMetricGroupExpProcAddrTable, zetGetMetricQueryPoolProcAddrTable,
    zetGetMetricQueryProcAddrTable, zetGetMetricStreamerProcAddrTable, zetGetTracerExpProcAddrTable,
    zetGetDebugProcAddrTable, zetGetMetricExpProcAddrTable, zetGetDeviceExpProcAddrTable,
    zetGetMetricProgrammableExpProcAddrTable, zetGetMetricTracerExpProcAddrTable,
    zetGetMetricDecoderExpProcAddrTable, zetGetCommandListExpProcAddrTable,
    zesGetDeviceProcAddrTable, zesGetDriverProcAddrTable, zesGetDiagnosticsProcAddrTable,
    zesGetEngineProcAddrTable, zesGetFabricPortProcAddrTable, zesGetFanProcAddrTable,
    zesGetFirmwareProcAddrTable, zesGetFrequencyProcAddrTable, zesGetLedProcAddrTable,
    zesGetMemoryProcAddrTable, zesGetPerformanceFactorProcAddrTable, zesGetPowerProcAddrTable,
    zesGetPsuProcAddrTable, zesGetRasProcAddrTable, zesGetSchedulerProcAddrTable,
    zesGetStandbyProcAddrTable, zesGetTemperatureProcAddrTable, zesGetGlobalProcAddrTable,
    zesGetDeviceExpProcAddrTable, zesGetDriverExpProcAddrTable, zesGetFirmwareExpProcAddrTable,
    zesGetOverclockProcAddrTable, zesGetVFManagementExpProcAddrTable, zesGetRasExpProcAddrTable,
}
