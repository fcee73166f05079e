//! Entry points: the nullable function pointer types used by the DDI tables (`ze_pfn*_t`) and [`ZeApi`], the
//! table of loader entry points resolved at run time with `libloading`.

use crate::types::*;
use std::ffi::{c_char, c_void};
use std::path::{Path, PathBuf};

/// An untyped DDI slot: the table position of an entry point these bindings do not type (its real signature
/// is in `ze_ddi.h`). Only ever stored or compared with `None`; never call through it.
pub type ze_pfn_untyped_t = Option<unsafe extern "C" fn()>;

/// Why [`ZeApi::load`] failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// No candidate library could be opened.
    #[error("Level Zero loader not found; tried: {}", .tried.iter().map(|(p, e)| format!("{p} ({e})")).collect::<Vec<_>>().join("; "))]
    NotFound {
        /// Every path tried, with the `dlopen` error it gave.
        tried: Vec<(String, String)>,
    },
    /// The library opened but lacks an entry point of API 1.4.
    #[error("{library} lacks the Level Zero 1.4 entry point {symbol}: {source}")]
    MissingSymbol {
        /// Library path.
        library: String,
        /// Missing symbol.
        symbol: &'static str,
        /// `dlsym` error.
        source: libloading::Error,
    },
}

macro_rules! entry_points {
    (
        required { $( $(#[$m:meta])* fn $sym:ident / $pfn:ident ( $($a:ident : $t:ty),* $(,)? ); )* }
        optional { $( $(#[$om:meta])* fn $osym:ident / $opfn:ident ( $($oa:ident : $ot:ty),* $(,)? ); )* }
    ) => {
        $(
            #[doc = concat!("Nullable pointer to `", stringify!($sym), "` (DDI table entry).")]
            pub type $pfn = Option<unsafe extern "C" fn($($a: $t),*) -> ze_result_t>;
        )*
        $(
            #[doc = concat!("Nullable pointer to `", stringify!($osym), "` (newer than API 1.4).")]
            pub type $opfn = Option<unsafe extern "C" fn($($oa: $ot),*) -> ze_result_t>;
        )*

        /// The Level Zero loader's entry points, resolved from a `dlopen`ed `libze_loader`.
        ///
        /// Calls of API 1.0–1.4 are plain function pointers (the load fails if one is missing); newer calls are
        /// `Option`s, `None` with an older loader. The pointers stay valid as long as this value lives: do not
        /// copy them out of it into something that outlives it.
        pub struct ZeApi {
            path: PathBuf,
            _lib: libloading::Library,
            $( $(#[$m])* #[doc = concat!("`", stringify!($sym), "`")] pub $sym: unsafe extern "C" fn($($a: $t),*) -> ze_result_t, )*
            $( $(#[$om])* #[doc = concat!("`", stringify!($osym), "` (optional)")] pub $osym: Option<unsafe extern "C" fn($($oa: $ot),*) -> ze_result_t>, )*
        }

        impl ZeApi {
            fn resolve(lib: libloading::Library, path: PathBuf) -> Result<Self, LoadError> {
                $(
                    // SAFETY: the symbol is a function of the Level Zero C API with exactly this signature
                    // (ze_api.h of API 1.4); the pointer is kept next to the library that owns it.
                    let $sym = unsafe {
                        *lib.get::<unsafe extern "C" fn($($t),*) -> ze_result_t>(concat!(stringify!($sym), "\0").as_bytes())
                            .map_err(|source| LoadError::MissingSymbol {
                                library: path.display().to_string(),
                                symbol: stringify!($sym),
                                source,
                            })?
                    };
                )*
                $(
                    // SAFETY: as above; a missing newer entry point is not an error.
                    let $osym = unsafe {
                        lib.get::<unsafe extern "C" fn($($ot),*) -> ze_result_t>(concat!(stringify!($osym), "\0").as_bytes())
                            .ok()
                            .map(|s| *s)
                    };
                )*
                Ok(Self { path, _lib: lib, $($sym,)* $($osym,)* })
            }
        }
    };
}

entry_points! {
    required {
        fn zeInit / ze_pfnInit_t(flags: ze_init_flags_t);
        fn zeDriverGet / ze_pfnDriverGet_t(pCount: *mut u32, phDrivers: *mut ze_driver_handle_t);
        fn zeDriverGetApiVersion / ze_pfnDriverGetApiVersion_t(hDriver: ze_driver_handle_t, version: *mut ze_api_version_t);
        fn zeDriverGetProperties / ze_pfnDriverGetProperties_t(hDriver: ze_driver_handle_t, pDriverProperties: *mut ze_driver_properties_t);
        fn zeDriverGetIpcProperties / ze_pfnDriverGetIpcProperties_t(hDriver: ze_driver_handle_t, pIpcProperties: *mut ze_driver_ipc_properties_t);
        fn zeDriverGetExtensionFunctionAddress / ze_pfnDriverGetExtensionFunctionAddress_t(hDriver: ze_driver_handle_t, name: *const c_char, ppFunctionAddress: *mut *mut c_void);

        fn zeDeviceGet / ze_pfnDeviceGet_t(hDriver: ze_driver_handle_t, pCount: *mut u32, phDevices: *mut ze_device_handle_t);
        fn zeDeviceGetSubDevices / ze_pfnDeviceGetSubDevices_t(hDevice: ze_device_handle_t, pCount: *mut u32, phSubdevices: *mut ze_device_handle_t);
        fn zeDeviceGetProperties / ze_pfnDeviceGetProperties_t(hDevice: ze_device_handle_t, pDeviceProperties: *mut ze_device_properties_t);
        fn zeDeviceGetComputeProperties / ze_pfnDeviceGetComputeProperties_t(hDevice: ze_device_handle_t, pComputeProperties: *mut ze_device_compute_properties_t);
        fn zeDeviceGetModuleProperties / ze_pfnDeviceGetModuleProperties_t(hDevice: ze_device_handle_t, pModuleProperties: *mut ze_device_module_properties_t);
        fn zeDeviceGetCommandQueueGroupProperties / ze_pfnDeviceGetCommandQueueGroupProperties_t(hDevice: ze_device_handle_t, pCount: *mut u32, pCommandQueueGroupProperties: *mut ze_command_queue_group_properties_t);
        fn zeDeviceGetMemoryProperties / ze_pfnDeviceGetMemoryProperties_t(hDevice: ze_device_handle_t, pCount: *mut u32, pMemProperties: *mut ze_device_memory_properties_t);
        fn zeDeviceGetP2PProperties / ze_pfnDeviceGetP2PProperties_t(hDevice: ze_device_handle_t, hPeerDevice: ze_device_handle_t, pP2PProperties: *mut ze_device_p2p_properties_t);
        fn zeDeviceCanAccessPeer / ze_pfnDeviceCanAccessPeer_t(hDevice: ze_device_handle_t, hPeerDevice: ze_device_handle_t, value: *mut ze_bool_t);
        fn zeDeviceGetStatus / ze_pfnDeviceGetStatus_t(hDevice: ze_device_handle_t);

        fn zeContextCreate / ze_pfnContextCreate_t(hDriver: ze_driver_handle_t, desc: *const ze_context_desc_t, phContext: *mut ze_context_handle_t);
        fn zeContextDestroy / ze_pfnContextDestroy_t(hContext: ze_context_handle_t);
        fn zeContextGetStatus / ze_pfnContextGetStatus_t(hContext: ze_context_handle_t);

        fn zeCommandQueueCreate / ze_pfnCommandQueueCreate_t(hContext: ze_context_handle_t, hDevice: ze_device_handle_t, desc: *const ze_command_queue_desc_t, phCommandQueue: *mut ze_command_queue_handle_t);
        fn zeCommandQueueDestroy / ze_pfnCommandQueueDestroy_t(hCommandQueue: ze_command_queue_handle_t);
        fn zeCommandQueueExecuteCommandLists / ze_pfnCommandQueueExecuteCommandLists_t(hCommandQueue: ze_command_queue_handle_t, numCommandLists: u32, phCommandLists: *mut ze_command_list_handle_t, hFence: ze_fence_handle_t);
        fn zeCommandQueueSynchronize / ze_pfnCommandQueueSynchronize_t(hCommandQueue: ze_command_queue_handle_t, timeout: u64);

        fn zeCommandListCreate / ze_pfnCommandListCreate_t(hContext: ze_context_handle_t, hDevice: ze_device_handle_t, desc: *const ze_command_list_desc_t, phCommandList: *mut ze_command_list_handle_t);
        fn zeCommandListCreateImmediate / ze_pfnCommandListCreateImmediate_t(hContext: ze_context_handle_t, hDevice: ze_device_handle_t, altdesc: *const ze_command_queue_desc_t, phCommandList: *mut ze_command_list_handle_t);
        fn zeCommandListDestroy / ze_pfnCommandListDestroy_t(hCommandList: ze_command_list_handle_t);
        fn zeCommandListClose / ze_pfnCommandListClose_t(hCommandList: ze_command_list_handle_t);
        fn zeCommandListReset / ze_pfnCommandListReset_t(hCommandList: ze_command_list_handle_t);
        fn zeCommandListAppendBarrier / ze_pfnCommandListAppendBarrier_t(hCommandList: ze_command_list_handle_t, hSignalEvent: ze_event_handle_t, numWaitEvents: u32, phWaitEvents: *mut ze_event_handle_t);
        fn zeCommandListAppendMemoryCopy / ze_pfnCommandListAppendMemoryCopy_t(hCommandList: ze_command_list_handle_t, dstptr: *mut c_void, srcptr: *const c_void, size: usize, hSignalEvent: ze_event_handle_t, numWaitEvents: u32, phWaitEvents: *mut ze_event_handle_t);
        fn zeCommandListAppendMemoryFill / ze_pfnCommandListAppendMemoryFill_t(hCommandList: ze_command_list_handle_t, ptr: *mut c_void, pattern: *const c_void, pattern_size: usize, size: usize, hSignalEvent: ze_event_handle_t, numWaitEvents: u32, phWaitEvents: *mut ze_event_handle_t);
        fn zeCommandListAppendSignalEvent / ze_pfnCommandListAppendSignalEvent_t(hCommandList: ze_command_list_handle_t, hEvent: ze_event_handle_t);
        fn zeCommandListAppendWaitOnEvents / ze_pfnCommandListAppendWaitOnEvents_t(hCommandList: ze_command_list_handle_t, numEvents: u32, phEvents: *mut ze_event_handle_t);
        fn zeCommandListAppendEventReset / ze_pfnCommandListAppendEventReset_t(hCommandList: ze_command_list_handle_t, hEvent: ze_event_handle_t);
        fn zeCommandListAppendLaunchKernel / ze_pfnCommandListAppendLaunchKernel_t(hCommandList: ze_command_list_handle_t, hKernel: ze_kernel_handle_t, pLaunchFuncArgs: *const ze_group_count_t, hSignalEvent: ze_event_handle_t, numWaitEvents: u32, phWaitEvents: *mut ze_event_handle_t);
        fn zeCommandListAppendLaunchCooperativeKernel / ze_pfnCommandListAppendLaunchCooperativeKernel_t(hCommandList: ze_command_list_handle_t, hKernel: ze_kernel_handle_t, pLaunchFuncArgs: *const ze_group_count_t, hSignalEvent: ze_event_handle_t, numWaitEvents: u32, phWaitEvents: *mut ze_event_handle_t);

        fn zeFenceCreate / ze_pfnFenceCreate_t(hCommandQueue: ze_command_queue_handle_t, desc: *const ze_fence_desc_t, phFence: *mut ze_fence_handle_t);
        fn zeFenceDestroy / ze_pfnFenceDestroy_t(hFence: ze_fence_handle_t);
        fn zeFenceHostSynchronize / ze_pfnFenceHostSynchronize_t(hFence: ze_fence_handle_t, timeout: u64);
        fn zeFenceQueryStatus / ze_pfnFenceQueryStatus_t(hFence: ze_fence_handle_t);
        fn zeFenceReset / ze_pfnFenceReset_t(hFence: ze_fence_handle_t);

        fn zeEventPoolCreate / ze_pfnEventPoolCreate_t(hContext: ze_context_handle_t, desc: *const ze_event_pool_desc_t, numDevices: u32, phDevices: *mut ze_device_handle_t, phEventPool: *mut ze_event_pool_handle_t);
        fn zeEventPoolDestroy / ze_pfnEventPoolDestroy_t(hEventPool: ze_event_pool_handle_t);
        fn zeEventPoolGetIpcHandle / ze_pfnEventPoolGetIpcHandle_t(hEventPool: ze_event_pool_handle_t, phIpc: *mut ze_ipc_event_pool_handle_t);
        fn zeEventPoolOpenIpcHandle / ze_pfnEventPoolOpenIpcHandle_t(hContext: ze_context_handle_t, hIpc: ze_ipc_event_pool_handle_t, phEventPool: *mut ze_event_pool_handle_t);
        fn zeEventPoolCloseIpcHandle / ze_pfnEventPoolCloseIpcHandle_t(hEventPool: ze_event_pool_handle_t);
        fn zeEventCreate / ze_pfnEventCreate_t(hEventPool: ze_event_pool_handle_t, desc: *const ze_event_desc_t, phEvent: *mut ze_event_handle_t);
        fn zeEventDestroy / ze_pfnEventDestroy_t(hEvent: ze_event_handle_t);
        fn zeEventHostSignal / ze_pfnEventHostSignal_t(hEvent: ze_event_handle_t);
        fn zeEventHostSynchronize / ze_pfnEventHostSynchronize_t(hEvent: ze_event_handle_t, timeout: u64);
        fn zeEventQueryStatus / ze_pfnEventQueryStatus_t(hEvent: ze_event_handle_t);
        fn zeEventHostReset / ze_pfnEventHostReset_t(hEvent: ze_event_handle_t);

        fn zeModuleCreate / ze_pfnModuleCreate_t(hContext: ze_context_handle_t, hDevice: ze_device_handle_t, desc: *const ze_module_desc_t, phModule: *mut ze_module_handle_t, phBuildLog: *mut ze_module_build_log_handle_t);
        fn zeModuleDestroy / ze_pfnModuleDestroy_t(hModule: ze_module_handle_t);
        fn zeModuleGetGlobalPointer / ze_pfnModuleGetGlobalPointer_t(hModule: ze_module_handle_t, pGlobalName: *const c_char, pSize: *mut usize, pptr: *mut *mut c_void);
        fn zeModuleGetKernelNames / ze_pfnModuleGetKernelNames_t(hModule: ze_module_handle_t, pCount: *mut u32, pNames: *mut *const c_char);
        fn zeModuleBuildLogDestroy / ze_pfnModuleBuildLogDestroy_t(hModuleBuildLog: ze_module_build_log_handle_t);
        fn zeModuleBuildLogGetString / ze_pfnModuleBuildLogGetString_t(hModuleBuildLog: ze_module_build_log_handle_t, pSize: *mut usize, pBuildLog: *mut c_char);

        fn zeKernelCreate / ze_pfnKernelCreate_t(hModule: ze_module_handle_t, desc: *const ze_kernel_desc_t, phKernel: *mut ze_kernel_handle_t);
        fn zeKernelDestroy / ze_pfnKernelDestroy_t(hKernel: ze_kernel_handle_t);
        fn zeKernelSetGroupSize / ze_pfnKernelSetGroupSize_t(hKernel: ze_kernel_handle_t, groupSizeX: u32, groupSizeY: u32, groupSizeZ: u32);
        fn zeKernelSuggestGroupSize / ze_pfnKernelSuggestGroupSize_t(hKernel: ze_kernel_handle_t, globalSizeX: u32, globalSizeY: u32, globalSizeZ: u32, groupSizeX: *mut u32, groupSizeY: *mut u32, groupSizeZ: *mut u32);
        fn zeKernelSuggestMaxCooperativeGroupCount / ze_pfnKernelSuggestMaxCooperativeGroupCount_t(hKernel: ze_kernel_handle_t, totalGroupCount: *mut u32);
        fn zeKernelSetArgumentValue / ze_pfnKernelSetArgumentValue_t(hKernel: ze_kernel_handle_t, argIndex: u32, argSize: usize, pArgValue: *const c_void);
        fn zeKernelGetName / ze_pfnKernelGetName_t(hKernel: ze_kernel_handle_t, pSize: *mut usize, pName: *mut c_char);

        fn zeMemAllocShared / ze_pfnMemAllocShared_t(hContext: ze_context_handle_t, device_desc: *const ze_device_mem_alloc_desc_t, host_desc: *const ze_host_mem_alloc_desc_t, size: usize, alignment: usize, hDevice: ze_device_handle_t, pptr: *mut *mut c_void);
        fn zeMemAllocDevice / ze_pfnMemAllocDevice_t(hContext: ze_context_handle_t, device_desc: *const ze_device_mem_alloc_desc_t, size: usize, alignment: usize, hDevice: ze_device_handle_t, pptr: *mut *mut c_void);
        fn zeMemAllocHost / ze_pfnMemAllocHost_t(hContext: ze_context_handle_t, host_desc: *const ze_host_mem_alloc_desc_t, size: usize, alignment: usize, pptr: *mut *mut c_void);
        fn zeMemFree / ze_pfnMemFree_t(hContext: ze_context_handle_t, ptr: *mut c_void);
        fn zeMemGetAllocProperties / ze_pfnMemGetAllocProperties_t(hContext: ze_context_handle_t, ptr: *const c_void, pMemAllocProperties: *mut ze_memory_allocation_properties_t, phDevice: *mut ze_device_handle_t);
        fn zeMemGetAddressRange / ze_pfnMemGetAddressRange_t(hContext: ze_context_handle_t, ptr: *const c_void, pBase: *mut *mut c_void, pSize: *mut usize);
        fn zeMemGetIpcHandle / ze_pfnMemGetIpcHandle_t(hContext: ze_context_handle_t, ptr: *const c_void, pIpcHandle: *mut ze_ipc_mem_handle_t);
        fn zeMemOpenIpcHandle / ze_pfnMemOpenIpcHandle_t(hContext: ze_context_handle_t, hDevice: ze_device_handle_t, handle: ze_ipc_mem_handle_t, flags: ze_ipc_memory_flags_t, pptr: *mut *mut c_void);
        fn zeMemCloseIpcHandle / ze_pfnMemCloseIpcHandle_t(hContext: ze_context_handle_t, ptr: *const c_void);

        fn zePhysicalMemCreate / ze_pfnPhysicalMemCreate_t(hContext: ze_context_handle_t, hDevice: ze_device_handle_t, desc: *mut ze_physical_mem_desc_t, phPhysicalMemory: *mut ze_physical_mem_handle_t);
        fn zePhysicalMemDestroy / ze_pfnPhysicalMemDestroy_t(hContext: ze_context_handle_t, hPhysicalMemory: ze_physical_mem_handle_t);
        fn zeVirtualMemReserve / ze_pfnVirtualMemReserve_t(hContext: ze_context_handle_t, pStart: *const c_void, size: usize, pptr: *mut *mut c_void);
        fn zeVirtualMemFree / ze_pfnVirtualMemFree_t(hContext: ze_context_handle_t, ptr: *const c_void, size: usize);
        fn zeVirtualMemQueryPageSize / ze_pfnVirtualMemQueryPageSize_t(hContext: ze_context_handle_t, hDevice: ze_device_handle_t, size: usize, pagesize: *mut usize);
        fn zeVirtualMemMap / ze_pfnVirtualMemMap_t(hContext: ze_context_handle_t, ptr: *const c_void, size: usize, hPhysicalMemory: ze_physical_mem_handle_t, offset: usize, access: ze_memory_access_attribute_t);
        fn zeVirtualMemUnmap / ze_pfnVirtualMemUnmap_t(hContext: ze_context_handle_t, ptr: *const c_void, size: usize);
        fn zeVirtualMemSetAccessAttribute / ze_pfnVirtualMemSetAccessAttribute_t(hContext: ze_context_handle_t, ptr: *const c_void, size: usize, access: ze_memory_access_attribute_t);
    }
    optional {
        /// API 1.6: release an IPC handle early (otherwise released by `zeMemFree`).
        fn zeMemPutIpcHandle / ze_pfnMemPutIpcHandle_t(hContext: ze_context_handle_t, handle: ze_ipc_mem_handle_t);
        /// API 1.6: wait for an immediate command list.
        fn zeCommandListHostSynchronize / ze_pfnCommandListHostSynchronize_t(hCommandList: ze_command_list_handle_t, timeout: u64);
    }
}

impl ZeApi {
    /// Library names tried by [`ZeApi::load`], in order.
    pub const LIBRARY_NAMES: [&'static str; 2] = ["libze_loader.so.1", "libze_loader.so"];

    /// Opens the Level Zero loader (`libze_loader.so.1`, then `libze_loader.so`, through the dynamic linker's
    /// search path) and resolves every entry point.
    ///
    /// # Errors
    /// [`LoadError::NotFound`] lists every name tried with its `dlopen` error; [`LoadError::MissingSymbol`] if
    /// the library is older than API 1.4.
    pub fn load() -> Result<Self, LoadError> {
        let mut tried = Vec::new();
        for name in Self::LIBRARY_NAMES {
            match Self::open(Path::new(name)) {
                Ok(lib) => return Self::resolve(lib, PathBuf::from(name)),
                Err(e) => tried.push((name.to_string(), e.to_string())),
            }
        }
        Err(LoadError::NotFound { tried })
    }

    /// Opens the loader at an explicit path (a bare name goes through the dynamic linker's search path).
    ///
    /// # Errors
    /// As [`ZeApi::load`], with only this path in the `NotFound` list.
    pub fn load_from(path: impl AsRef<Path>) -> Result<Self, LoadError> {
        let path = path.as_ref();
        match Self::open(path) {
            Ok(lib) => Self::resolve(lib, path.to_path_buf()),
            Err(e) => Err(LoadError::NotFound {
                tried: vec![(path.display().to_string(), e.to_string())],
            }),
        }
    }

    /// The path or name the loader was opened from.
    pub fn library_path(&self) -> &Path {
        &self.path
    }

    fn open(path: &Path) -> Result<libloading::Library, libloading::Error> {
        // SAFETY: opening the Level Zero loader runs its ELF constructors, which only set up the loader's own
        // state; it is a well-known system library meant to be dlopen'ed.
        unsafe { libloading::Library::new(path) }
    }
}

impl std::fmt::Debug for ZeApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZeApi")
            .field("path", &self.path)
            .field("zeMemPutIpcHandle", &self.zeMemPutIpcHandle.is_some())
            .field(
                "zeCommandListHostSynchronize",
                &self.zeCommandListHostSynchronize.is_some(),
            )
            .finish_non_exhaustive()
    }
}
