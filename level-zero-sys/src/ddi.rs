//! Driver-DDI (device driver interface) tables of API 1.4, as filled by a driver's `zeGet*ProcAddrTable`
//! exports and read by the loader. Layouts follow `ze_ddi.h` of the 1.8.12 loader: slot order matters, slot
//! types do not for the ABI; entries these bindings do not type are [`ze_pfn_untyped_t`] placeholders.
//!
//! Every table is `#[repr(C)]` and `Default` (all entries `None`): a driver fills what it implements, and the
//! loader answers calls through a `None` slot with `ZE_RESULT_ERROR_UNSUPPORTED_FEATURE`.

use crate::api::*;
use crate::types::*;

macro_rules! dditable {
    ($(#[$m:meta])* $name:ident { $( $f:ident : $t:ty ),* $(,)? }) => {
        $(#[$m])*
        #[repr(C)]
        #[derive(Clone, Copy, Default, Debug)]
        pub struct $name {
            $( #[doc = concat!("`", stringify!($f), "`")] pub $f: $t, )*
        }
    };
}

dditable! { /// `ze_global_dditable_t`.
ze_global_dditable_t { pfnInit: ze_pfnInit_t } }
dditable! { /// `ze_driver_dditable_t`.
ze_driver_dditable_t {
    pfnGet: ze_pfnDriverGet_t,
    pfnGetApiVersion: ze_pfnDriverGetApiVersion_t,
    pfnGetProperties: ze_pfnDriverGetProperties_t,
    pfnGetIpcProperties: ze_pfnDriverGetIpcProperties_t,
    pfnGetExtensionProperties: ze_pfn_untyped_t,
    pfnGetExtensionFunctionAddress: ze_pfnDriverGetExtensionFunctionAddress_t,
} }
dditable! { /// `ze_device_dditable_t`.
ze_device_dditable_t {
    pfnGet: ze_pfnDeviceGet_t,
    pfnGetSubDevices: ze_pfnDeviceGetSubDevices_t,
    pfnGetProperties: ze_pfnDeviceGetProperties_t,
    pfnGetComputeProperties: ze_pfnDeviceGetComputeProperties_t,
    pfnGetModuleProperties: ze_pfnDeviceGetModuleProperties_t,
    pfnGetCommandQueueGroupProperties: ze_pfnDeviceGetCommandQueueGroupProperties_t,
    pfnGetMemoryProperties: ze_pfnDeviceGetMemoryProperties_t,
    pfnGetMemoryAccessProperties: ze_pfn_untyped_t,
    pfnGetCacheProperties: ze_pfn_untyped_t,
    pfnGetImageProperties: ze_pfn_untyped_t,
    pfnGetExternalMemoryProperties: ze_pfn_untyped_t,
    pfnGetP2PProperties: ze_pfnDeviceGetP2PProperties_t,
    pfnCanAccessPeer: ze_pfnDeviceCanAccessPeer_t,
    pfnGetStatus: ze_pfnDeviceGetStatus_t,
    pfnGetGlobalTimestamps: ze_pfn_untyped_t,
    pfnReserveCacheExt: ze_pfn_untyped_t,
    pfnSetCacheAdviceExt: ze_pfn_untyped_t,
    pfnPciGetPropertiesExt: ze_pfn_untyped_t,
} }
dditable! { /// `ze_device_exp_dditable_t`.
ze_device_exp_dditable_t { pfnGetFabricVertexExp: ze_pfn_untyped_t } }
dditable! { /// `ze_context_dditable_t`.
ze_context_dditable_t {
    pfnCreate: ze_pfnContextCreate_t,
    pfnDestroy: ze_pfnContextDestroy_t,
    pfnGetStatus: ze_pfnContextGetStatus_t,
    pfnSystemBarrier: ze_pfn_untyped_t,
    pfnMakeMemoryResident: ze_pfn_untyped_t,
    pfnEvictMemory: ze_pfn_untyped_t,
    pfnMakeImageResident: ze_pfn_untyped_t,
    pfnEvictImage: ze_pfn_untyped_t,
    pfnCreateEx: ze_pfn_untyped_t,
} }
dditable! { /// `ze_command_queue_dditable_t`.
ze_command_queue_dditable_t {
    pfnCreate: ze_pfnCommandQueueCreate_t,
    pfnDestroy: ze_pfnCommandQueueDestroy_t,
    pfnExecuteCommandLists: ze_pfnCommandQueueExecuteCommandLists_t,
    pfnSynchronize: ze_pfnCommandQueueSynchronize_t,
} }
dditable! { /// `ze_command_list_dditable_t`.
ze_command_list_dditable_t {
    pfnCreate: ze_pfnCommandListCreate_t,
    pfnCreateImmediate: ze_pfnCommandListCreateImmediate_t,
    pfnDestroy: ze_pfnCommandListDestroy_t,
    pfnClose: ze_pfnCommandListClose_t,
    pfnReset: ze_pfnCommandListReset_t,
    pfnAppendWriteGlobalTimestamp: ze_pfn_untyped_t,
    pfnAppendBarrier: ze_pfnCommandListAppendBarrier_t,
    pfnAppendMemoryRangesBarrier: ze_pfn_untyped_t,
    pfnAppendMemoryCopy: ze_pfnCommandListAppendMemoryCopy_t,
    pfnAppendMemoryFill: ze_pfnCommandListAppendMemoryFill_t,
    pfnAppendMemoryCopyRegion: ze_pfn_untyped_t,
    pfnAppendMemoryCopyFromContext: ze_pfn_untyped_t,
    pfnAppendImageCopy: ze_pfn_untyped_t,
    pfnAppendImageCopyRegion: ze_pfn_untyped_t,
    pfnAppendImageCopyToMemory: ze_pfn_untyped_t,
    pfnAppendImageCopyFromMemory: ze_pfn_untyped_t,
    pfnAppendMemoryPrefetch: ze_pfn_untyped_t,
    pfnAppendMemAdvise: ze_pfn_untyped_t,
    pfnAppendSignalEvent: ze_pfnCommandListAppendSignalEvent_t,
    pfnAppendWaitOnEvents: ze_pfnCommandListAppendWaitOnEvents_t,
    pfnAppendEventReset: ze_pfnCommandListAppendEventReset_t,
    pfnAppendQueryKernelTimestamps: ze_pfn_untyped_t,
    pfnAppendLaunchKernel: ze_pfnCommandListAppendLaunchKernel_t,
    pfnAppendLaunchCooperativeKernel: ze_pfnCommandListAppendLaunchCooperativeKernel_t,
    pfnAppendLaunchKernelIndirect: ze_pfn_untyped_t,
    pfnAppendLaunchMultipleKernelsIndirect: ze_pfn_untyped_t,
    pfnAppendImageCopyToMemoryExt: ze_pfn_untyped_t,
    pfnAppendImageCopyFromMemoryExt: ze_pfn_untyped_t,
} }
dditable! { /// `ze_image_dditable_t`.
ze_image_dditable_t {
    pfnGetProperties: ze_pfn_untyped_t,
    pfnCreate: ze_pfn_untyped_t,
    pfnDestroy: ze_pfn_untyped_t,
    pfnGetAllocPropertiesExt: ze_pfn_untyped_t,
} }
dditable! { /// `ze_image_exp_dditable_t`.
ze_image_exp_dditable_t { pfnGetMemoryPropertiesExp: ze_pfn_untyped_t, pfnViewCreateExp: ze_pfn_untyped_t } }
dditable! { /// `ze_fence_dditable_t`.
ze_fence_dditable_t {
    pfnCreate: ze_pfnFenceCreate_t,
    pfnDestroy: ze_pfnFenceDestroy_t,
    pfnHostSynchronize: ze_pfnFenceHostSynchronize_t,
    pfnQueryStatus: ze_pfnFenceQueryStatus_t,
    pfnReset: ze_pfnFenceReset_t,
} }
dditable! { /// `ze_event_pool_dditable_t`.
ze_event_pool_dditable_t {
    pfnCreate: ze_pfnEventPoolCreate_t,
    pfnDestroy: ze_pfnEventPoolDestroy_t,
    pfnGetIpcHandle: ze_pfnEventPoolGetIpcHandle_t,
    pfnOpenIpcHandle: ze_pfnEventPoolOpenIpcHandle_t,
    pfnCloseIpcHandle: ze_pfnEventPoolCloseIpcHandle_t,
} }
dditable! { /// `ze_event_dditable_t`.
ze_event_dditable_t {
    pfnCreate: ze_pfnEventCreate_t,
    pfnDestroy: ze_pfnEventDestroy_t,
    pfnHostSignal: ze_pfnEventHostSignal_t,
    pfnHostSynchronize: ze_pfnEventHostSynchronize_t,
    pfnQueryStatus: ze_pfnEventQueryStatus_t,
    pfnHostReset: ze_pfnEventHostReset_t,
    pfnQueryKernelTimestamp: ze_pfn_untyped_t,
} }
dditable! { /// `ze_event_exp_dditable_t`.
ze_event_exp_dditable_t { pfnQueryTimestampsExp: ze_pfn_untyped_t } }
dditable! { /// `ze_module_dditable_t`.
ze_module_dditable_t {
    pfnCreate: ze_pfnModuleCreate_t,
    pfnDestroy: ze_pfnModuleDestroy_t,
    pfnDynamicLink: ze_pfn_untyped_t,
    pfnGetNativeBinary: ze_pfn_untyped_t,
    pfnGetGlobalPointer: ze_pfnModuleGetGlobalPointer_t,
    pfnGetKernelNames: ze_pfnModuleGetKernelNames_t,
    pfnGetProperties: ze_pfn_untyped_t,
    pfnGetFunctionPointer: ze_pfn_untyped_t,
    pfnInspectLinkageExt: ze_pfn_untyped_t,
} }
dditable! { /// `ze_module_build_log_dditable_t`.
ze_module_build_log_dditable_t {
    pfnDestroy: ze_pfnModuleBuildLogDestroy_t,
    pfnGetString: ze_pfnModuleBuildLogGetString_t,
} }
dditable! { /// `ze_kernel_dditable_t`.
ze_kernel_dditable_t {
    pfnCreate: ze_pfnKernelCreate_t,
    pfnDestroy: ze_pfnKernelDestroy_t,
    pfnSetCacheConfig: ze_pfn_untyped_t,
    pfnSetGroupSize: ze_pfnKernelSetGroupSize_t,
    pfnSuggestGroupSize: ze_pfnKernelSuggestGroupSize_t,
    pfnSuggestMaxCooperativeGroupCount: ze_pfnKernelSuggestMaxCooperativeGroupCount_t,
    pfnSetArgumentValue: ze_pfnKernelSetArgumentValue_t,
    pfnSetIndirectAccess: ze_pfn_untyped_t,
    pfnGetIndirectAccess: ze_pfn_untyped_t,
    pfnGetSourceAttributes: ze_pfn_untyped_t,
    pfnGetProperties: ze_pfn_untyped_t,
    pfnGetName: ze_pfnKernelGetName_t,
} }
dditable! { /// `ze_kernel_exp_dditable_t`.
ze_kernel_exp_dditable_t { pfnSetGlobalOffsetExp: ze_pfn_untyped_t, pfnSchedulingHintExp: ze_pfn_untyped_t } }
dditable! { /// `ze_sampler_dditable_t`.
ze_sampler_dditable_t { pfnCreate: ze_pfn_untyped_t, pfnDestroy: ze_pfn_untyped_t } }
dditable! { /// `ze_physical_mem_dditable_t`.
ze_physical_mem_dditable_t { pfnCreate: ze_pfnPhysicalMemCreate_t, pfnDestroy: ze_pfnPhysicalMemDestroy_t } }
dditable! { /// `ze_mem_dditable_t`.
ze_mem_dditable_t {
    pfnAllocShared: ze_pfnMemAllocShared_t,
    pfnAllocDevice: ze_pfnMemAllocDevice_t,
    pfnAllocHost: ze_pfnMemAllocHost_t,
    pfnFree: ze_pfnMemFree_t,
    pfnGetAllocProperties: ze_pfnMemGetAllocProperties_t,
    pfnGetAddressRange: ze_pfnMemGetAddressRange_t,
    pfnGetIpcHandle: ze_pfnMemGetIpcHandle_t,
    pfnOpenIpcHandle: ze_pfnMemOpenIpcHandle_t,
    pfnCloseIpcHandle: ze_pfnMemCloseIpcHandle_t,
    pfnFreeExt: ze_pfn_untyped_t,
} }
dditable! { /// `ze_virtual_mem_dditable_t`.
ze_virtual_mem_dditable_t {
    pfnReserve: ze_pfnVirtualMemReserve_t,
    pfnFree: ze_pfnVirtualMemFree_t,
    pfnQueryPageSize: ze_pfnVirtualMemQueryPageSize_t,
    pfnMap: ze_pfnVirtualMemMap_t,
    pfnUnmap: ze_pfnVirtualMemUnmap_t,
    pfnSetAccessAttribute: ze_pfnVirtualMemSetAccessAttribute_t,
    pfnGetAccessAttribute: ze_pfn_untyped_t,
} }
dditable! { /// `ze_fabric_vertex_exp_dditable_t`.
ze_fabric_vertex_exp_dditable_t {
    pfnGetExp: ze_pfn_untyped_t,
    pfnGetSubVerticesExp: ze_pfn_untyped_t,
    pfnGetPropertiesExp: ze_pfn_untyped_t,
    pfnGetDeviceExp: ze_pfn_untyped_t,
} }
dditable! { /// `ze_fabric_edge_exp_dditable_t`.
ze_fabric_edge_exp_dditable_t {
    pfnGetExp: ze_pfn_untyped_t,
    pfnGetVerticesExp: ze_pfn_untyped_t,
    pfnGetPropertiesExp: ze_pfn_untyped_t,
} }

/// Signature of a driver's `zeGet<Table>ProcAddrTable` export for table `T`.
pub type ze_pfnGetProcAddrTable_t<T> =
    Option<unsafe extern "C" fn(version: ze_api_version_t, pDdiTable: *mut T) -> ze_result_t>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    #[test]
    fn slot_counts_match_ze_ddi_h() {
        let p = size_of::<usize>();
        assert_eq!(size_of::<ze_driver_dditable_t>(), 6 * p);
        assert_eq!(size_of::<ze_device_dditable_t>(), 18 * p);
        assert_eq!(size_of::<ze_context_dditable_t>(), 9 * p);
        assert_eq!(size_of::<ze_command_list_dditable_t>(), 28 * p);
        assert_eq!(size_of::<ze_event_dditable_t>(), 7 * p);
        assert_eq!(size_of::<ze_module_dditable_t>(), 9 * p);
        assert_eq!(size_of::<ze_kernel_dditable_t>(), 12 * p);
        assert_eq!(size_of::<ze_mem_dditable_t>(), 10 * p);
        assert_eq!(size_of::<ze_virtual_mem_dditable_t>(), 7 * p);
    }
}
