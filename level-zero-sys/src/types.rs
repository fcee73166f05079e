//! Level Zero core types (API 1.4, values and layouts from `ze_api.h` of the 1.8.12 loader).
//!
//! Naming follows the C API so code reads like the specification: handles are opaque pointer newtypes,
//! enumerations are `#[repr(transparent)]` `u32` newtypes with the C constant names as module constants,
//! flag sets are `u32` aliases with one constant per bit.

use std::ffi::{c_char, c_void};
use std::fmt;

/// `ZE_MAKE_VERSION(major, minor)`.
pub const fn ze_make_version(major: u32, minor: u32) -> u32 {
    (major << 16) | (minor & 0xffff)
}
/// Major part of a `ZE_MAKE_VERSION` value.
pub const fn ze_major_version(v: u32) -> u32 {
    v >> 16
}
/// Minor part of a `ZE_MAKE_VERSION` value.
pub const fn ze_minor_version(v: u32) -> u32 {
    v & 0xffff
}

/// `ze_bool_t`: 0 is false, anything else true.
pub type ze_bool_t = u8;

macro_rules! ze_handles {
    ($( $(#[$m:meta])* $name:ident ),* $(,)?) => {$(
        $(#[$m])*
        #[repr(transparent)]
        #[derive(Clone, Copy, PartialEq, Eq, Hash)]
        pub struct $name(pub *mut c_void);
        impl $name {
            /// The null handle.
            pub const fn null() -> Self {
                Self(std::ptr::null_mut())
            }
            /// Whether this is the null handle.
            pub fn is_null(self) -> bool {
                self.0.is_null()
            }
            /// The raw pointer value.
            pub fn as_ptr(self) -> *mut c_void {
                self.0
            }
        }
        impl Default for $name {
            fn default() -> Self {
                Self::null()
            }
        }
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({:p})"), self.0)
            }
        }
        // SAFETY: a Level Zero handle is an opaque identifier; the API is specified thread-safe for
        // handles (the specification's threading rules apply to the calls, not to moving the value).
        unsafe impl Send for $name {}
        // SAFETY: as above; sharing the identifier between threads does not access anything.
        unsafe impl Sync for $name {}
    )*};
}

ze_handles! {
    /// Handle of a driver instance.
    ze_driver_handle_t,
    /// Handle of a driver's device object.
    ze_device_handle_t,
    /// Handle of a driver's context object.
    ze_context_handle_t,
    /// Handle of a driver's command queue object.
    ze_command_queue_handle_t,
    /// Handle of a device's command list object.
    ze_command_list_handle_t,
    /// Handle of a device's fence object.
    ze_fence_handle_t,
    /// Handle of a device's event pool object.
    ze_event_pool_handle_t,
    /// Handle of a device's event object.
    ze_event_handle_t,
    /// Handle of a device's image object.
    ze_image_handle_t,
    /// Handle of a device's module object.
    ze_module_handle_t,
    /// Handle of a module's build log object.
    ze_module_build_log_handle_t,
    /// Handle of a module's kernel object.
    ze_kernel_handle_t,
    /// Handle of a device's sampler object.
    ze_sampler_handle_t,
    /// Handle of a physical memory object.
    ze_physical_mem_handle_t,
    /// Handle of a fabric vertex object (experimental).
    ze_fabric_vertex_handle_t,
    /// Handle of a fabric edge object (experimental).
    ze_fabric_edge_handle_t,
}

macro_rules! ze_enum {
    ($(#[$m:meta])* $name:ident { $( $(#[$cm:meta])* $c:ident = $v:expr ),* $(,)? }) => {
        $(#[$m])*
        #[repr(transparent)]
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name(pub u32);
        $(
            $(#[$cm])*
            #[doc = concat!("`", stringify!($c), "`")]
            pub const $c: $name = $name($v);
        )*
        impl $name {
            /// The C name of this value, if it is a known one.
            pub fn name(self) -> Option<&'static str> {
                $( if self == $c { return Some(stringify!($c)); } )*
                None
            }
        }
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, concat!(stringify!($name), "({:#x})"), self.0),
                }
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, "{:#x}", self.0),
                }
            }
        }
    };
}

ze_enum! {
    /// Result of every Level Zero call. `Display` prints the C name (`ZE_RESULT_ERROR_...`).
    ze_result_t {
        ZE_RESULT_SUCCESS = 0,
        ZE_RESULT_NOT_READY = 1,
        ZE_RESULT_ERROR_DEVICE_LOST = 0x7000_0001,
        ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY = 0x7000_0002,
        ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY = 0x7000_0003,
        ZE_RESULT_ERROR_MODULE_BUILD_FAILURE = 0x7000_0004,
        ZE_RESULT_ERROR_MODULE_LINK_FAILURE = 0x7000_0005,
        ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET = 0x7000_0006,
        ZE_RESULT_ERROR_DEVICE_IN_LOW_POWER_STATE = 0x7000_0007,
        ZE_RESULT_EXP_ERROR_DEVICE_IS_NOT_VERTEX = 0x7ff0_0001,
        ZE_RESULT_EXP_ERROR_VERTEX_IS_NOT_DEVICE = 0x7ff0_0002,
        ZE_RESULT_EXP_ERROR_REMOTE_DEVICE = 0x7ff0_0003,
        ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS = 0x7001_0000,
        ZE_RESULT_ERROR_NOT_AVAILABLE = 0x7001_0001,
        ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE = 0x7002_0000,
        ZE_RESULT_WARNING_DROPPED_DATA = 0x7002_0001,
        ZE_RESULT_ERROR_UNINITIALIZED = 0x7800_0001,
        ZE_RESULT_ERROR_UNSUPPORTED_VERSION = 0x7800_0002,
        ZE_RESULT_ERROR_UNSUPPORTED_FEATURE = 0x7800_0003,
        ZE_RESULT_ERROR_INVALID_ARGUMENT = 0x7800_0004,
        ZE_RESULT_ERROR_INVALID_NULL_HANDLE = 0x7800_0005,
        ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE = 0x7800_0006,
        ZE_RESULT_ERROR_INVALID_NULL_POINTER = 0x7800_0007,
        ZE_RESULT_ERROR_INVALID_SIZE = 0x7800_0008,
        ZE_RESULT_ERROR_UNSUPPORTED_SIZE = 0x7800_0009,
        ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT = 0x7800_000a,
        ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT = 0x7800_000b,
        ZE_RESULT_ERROR_INVALID_ENUMERATION = 0x7800_000c,
        ZE_RESULT_ERROR_UNSUPPORTED_ENUMERATION = 0x7800_000d,
        ZE_RESULT_ERROR_UNSUPPORTED_IMAGE_FORMAT = 0x7800_000e,
        ZE_RESULT_ERROR_INVALID_NATIVE_BINARY = 0x7800_000f,
        ZE_RESULT_ERROR_INVALID_GLOBAL_NAME = 0x7800_0010,
        ZE_RESULT_ERROR_INVALID_KERNEL_NAME = 0x7800_0011,
        ZE_RESULT_ERROR_INVALID_FUNCTION_NAME = 0x7800_0012,
        ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION = 0x7800_0013,
        ZE_RESULT_ERROR_INVALID_GLOBAL_WIDTH_DIMENSION = 0x7800_0014,
        ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX = 0x7800_0015,
        ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE = 0x7800_0016,
        ZE_RESULT_ERROR_INVALID_KERNEL_ATTRIBUTE_VALUE = 0x7800_0017,
        ZE_RESULT_ERROR_INVALID_MODULE_UNLINKED = 0x7800_0018,
        ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE = 0x7800_0019,
        ZE_RESULT_ERROR_OVERLAPPING_REGIONS = 0x7800_001a,
        ZE_RESULT_WARNING_ACTION_REQUIRED = 0x7800_001b,
        ZE_RESULT_ERROR_UNKNOWN = 0x7fff_fffe,
    }
}

impl ze_result_t {
    /// `true` for `ZE_RESULT_SUCCESS`.
    pub fn is_success(self) -> bool {
        self == ZE_RESULT_SUCCESS
    }
    /// `Ok(())` for success, `Err(self)` otherwise.
    pub fn ok(self) -> Result<(), ze_result_t> {
        if self.is_success() {
            Ok(())
        } else {
            Err(self)
        }
    }
}
impl std::error::Error for ze_result_t {}

ze_enum! {
    /// Structure type tag stored in `stype` of every descriptor and properties structure.
    ze_structure_type_t {
        ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES = 0x1,
        ZE_STRUCTURE_TYPE_DRIVER_IPC_PROPERTIES = 0x2,
        ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES = 0x3,
        ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES = 0x4,
        ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES = 0x5,
        ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES = 0x6,
        ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES = 0x7,
        ZE_STRUCTURE_TYPE_DEVICE_MEMORY_ACCESS_PROPERTIES = 0x8,
        ZE_STRUCTURE_TYPE_DEVICE_CACHE_PROPERTIES = 0x9,
        ZE_STRUCTURE_TYPE_DEVICE_IMAGE_PROPERTIES = 0xa,
        ZE_STRUCTURE_TYPE_DEVICE_P2P_PROPERTIES = 0xb,
        ZE_STRUCTURE_TYPE_DEVICE_EXTERNAL_MEMORY_PROPERTIES = 0xc,
        ZE_STRUCTURE_TYPE_CONTEXT_DESC = 0xd,
        ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC = 0xe,
        ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC = 0xf,
        ZE_STRUCTURE_TYPE_EVENT_POOL_DESC = 0x10,
        ZE_STRUCTURE_TYPE_EVENT_DESC = 0x11,
        ZE_STRUCTURE_TYPE_FENCE_DESC = 0x12,
        ZE_STRUCTURE_TYPE_IMAGE_DESC = 0x13,
        ZE_STRUCTURE_TYPE_IMAGE_PROPERTIES = 0x14,
        ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC = 0x15,
        ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC = 0x16,
        ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES = 0x17,
        ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_DESC = 0x18,
        ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_IMPORT_FD = 0x19,
        ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_FD = 0x1a,
        ZE_STRUCTURE_TYPE_MODULE_DESC = 0x1b,
        ZE_STRUCTURE_TYPE_MODULE_PROPERTIES = 0x1c,
        ZE_STRUCTURE_TYPE_KERNEL_DESC = 0x1d,
        ZE_STRUCTURE_TYPE_KERNEL_PROPERTIES = 0x1e,
        ZE_STRUCTURE_TYPE_SAMPLER_DESC = 0x1f,
        ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC = 0x20,
        ZE_STRUCTURE_TYPE_KERNEL_PREFERRED_GROUP_SIZE_PROPERTIES = 0x21,
        ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_IMPORT_WIN32 = 0x22,
        ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_WIN32 = 0x23,
        ZE_STRUCTURE_TYPE_DEVICE_RAYTRACING_EXT_PROPERTIES = 0x1_0001,
        ZE_STRUCTURE_TYPE_RAYTRACING_MEM_ALLOC_EXT_DESC = 0x1_0002,
        ZE_STRUCTURE_TYPE_FLOAT_ATOMIC_EXT_PROPERTIES = 0x1_0003,
        ZE_STRUCTURE_TYPE_CACHE_RESERVATION_EXT_DESC = 0x1_0004,
        ZE_STRUCTURE_TYPE_EU_COUNT_EXT = 0x1_0005,
        ZE_STRUCTURE_TYPE_SRGB_EXT_DESC = 0x1_0006,
        ZE_STRUCTURE_TYPE_LINKAGE_INSPECTION_EXT_DESC = 0x1_0007,
        ZE_STRUCTURE_TYPE_PCI_EXT_PROPERTIES = 0x1_0008,
        ZE_STRUCTURE_TYPE_DRIVER_MEMORY_FREE_EXT_PROPERTIES = 0x1_0009,
        ZE_STRUCTURE_TYPE_MEMORY_FREE_EXT_DESC = 0x1_000a,
        ZE_STRUCTURE_TYPE_MEMORY_COMPRESSION_HINTS_EXT_DESC = 0x1_000b,
        ZE_STRUCTURE_TYPE_IMAGE_ALLOCATION_EXT_PROPERTIES = 0x1_000c,
        ZE_STRUCTURE_TYPE_DEVICE_LUID_EXT_PROPERTIES = 0x1_000d,
        ZE_STRUCTURE_TYPE_DEVICE_MEMORY_EXT_PROPERTIES = 0x1_000e,
        ZE_STRUCTURE_TYPE_RELAXED_ALLOCATION_LIMITS_EXP_DESC = 0x2_0001,
        ZE_STRUCTURE_TYPE_MODULE_PROGRAM_EXP_DESC = 0x2_0002,
        ZE_STRUCTURE_TYPE_SCHEDULING_HINT_EXP_PROPERTIES = 0x2_0003,
        ZE_STRUCTURE_TYPE_SCHEDULING_HINT_EXP_DESC = 0x2_0004,
        ZE_STRUCTURE_TYPE_IMAGE_VIEW_PLANAR_EXP_DESC = 0x2_0005,
        ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES_1_2 = 0x2_0006,
        ZE_STRUCTURE_TYPE_IMAGE_MEMORY_EXP_PROPERTIES = 0x2_0007,
        ZE_STRUCTURE_TYPE_POWER_SAVING_HINT_EXP_DESC = 0x2_0008,
        ZE_STRUCTURE_TYPE_COPY_BANDWIDTH_EXP_PROPERTIES = 0x2_0009,
        ZE_STRUCTURE_TYPE_DEVICE_P2P_BANDWIDTH_EXP_PROPERTIES = 0x2_000a,
        ZE_STRUCTURE_TYPE_FABRIC_VERTEX_EXP_PROPERTIES = 0x2_000b,
        ZE_STRUCTURE_TYPE_FABRIC_EDGE_EXP_PROPERTIES = 0x2_000c,
    }
}

/// `ze_api_version_t`: a `ZE_MAKE_VERSION` value.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct ze_api_version_t(pub u32);
/// API version 1.0.
pub const ZE_API_VERSION_1_0: ze_api_version_t = ze_api_version_t(ze_make_version(1, 0));
/// API version 1.1.
pub const ZE_API_VERSION_1_1: ze_api_version_t = ze_api_version_t(ze_make_version(1, 1));
/// API version 1.2.
pub const ZE_API_VERSION_1_2: ze_api_version_t = ze_api_version_t(ze_make_version(1, 2));
/// API version 1.3.
pub const ZE_API_VERSION_1_3: ze_api_version_t = ze_api_version_t(ze_make_version(1, 3));
/// API version 1.4.
pub const ZE_API_VERSION_1_4: ze_api_version_t = ze_api_version_t(ze_make_version(1, 4));
/// The version these definitions describe (1.4).
pub const ZE_API_VERSION_CURRENT: ze_api_version_t = ZE_API_VERSION_1_4;
impl ze_api_version_t {
    /// Major version.
    pub fn major(self) -> u32 {
        ze_major_version(self.0)
    }
    /// Minor version.
    pub fn minor(self) -> u32 {
        ze_minor_version(self.0)
    }
}
impl fmt::Debug for ze_api_version_t {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major(), self.minor())
    }
}
impl fmt::Display for ze_api_version_t {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major(), self.minor())
    }
}

ze_enum! {
    /// Device type.
    ze_device_type_t {
        ZE_DEVICE_TYPE_GPU = 1,
        ZE_DEVICE_TYPE_CPU = 2,
        ZE_DEVICE_TYPE_FPGA = 3,
        ZE_DEVICE_TYPE_MCA = 4,
        ZE_DEVICE_TYPE_VPU = 5,
    }
}
ze_enum! {
    /// Memory allocation type.
    ze_memory_type_t {
        ZE_MEMORY_TYPE_UNKNOWN = 0,
        ZE_MEMORY_TYPE_HOST = 1,
        ZE_MEMORY_TYPE_DEVICE = 2,
        ZE_MEMORY_TYPE_SHARED = 3,
    }
}
ze_enum! {
    /// Command queue mode.
    ze_command_queue_mode_t {
        ZE_COMMAND_QUEUE_MODE_DEFAULT = 0,
        ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS = 1,
        ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS = 2,
    }
}
ze_enum! {
    /// Command queue priority.
    ze_command_queue_priority_t {
        ZE_COMMAND_QUEUE_PRIORITY_NORMAL = 0,
        ZE_COMMAND_QUEUE_PRIORITY_PRIORITY_LOW = 1,
        ZE_COMMAND_QUEUE_PRIORITY_PRIORITY_HIGH = 2,
    }
}
ze_enum! {
    /// Access of a virtual memory range (`zeVirtualMemSetAccessAttribute`).
    ze_memory_access_attribute_t {
        ZE_MEMORY_ACCESS_ATTRIBUTE_NONE = 0,
        ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE = 1,
        ZE_MEMORY_ACCESS_ATTRIBUTE_READONLY = 2,
    }
}
ze_enum! {
    /// Module input format.
    ze_module_format_t {
        ZE_MODULE_FORMAT_IL_SPIRV = 0,
        ZE_MODULE_FORMAT_NATIVE = 1,
    }
}

macro_rules! ze_flags {
    ($(#[$m:meta])* $name:ident { $( $c:ident = $bit:expr ),* $(,)? }) => {
        $(#[$m])*
        pub type $name = u32;
        $(
            #[doc = concat!("`", stringify!($c), "`")]
            pub const $c: $name = 1 << $bit;
        )*
    };
}

ze_flags! { /// `zeInit` flags.
ze_init_flags_t { ZE_INIT_FLAG_GPU_ONLY = 0, ZE_INIT_FLAG_VPU_ONLY = 1 } }
ze_flags! { /// Driver IPC capabilities.
ze_ipc_property_flags_t { ZE_IPC_PROPERTY_FLAG_MEMORY = 0, ZE_IPC_PROPERTY_FLAG_EVENT_POOL = 1 } }
ze_flags! { /// Device property flags.
ze_device_property_flags_t {
    ZE_DEVICE_PROPERTY_FLAG_INTEGRATED = 0, ZE_DEVICE_PROPERTY_FLAG_SUBDEVICE = 1,
    ZE_DEVICE_PROPERTY_FLAG_ECC = 2, ZE_DEVICE_PROPERTY_FLAG_ONDEMANDPAGING = 3 } }
ze_flags! { /// Device memory property flags.
ze_device_memory_property_flags_t { ZE_DEVICE_MEMORY_PROPERTY_FLAG_TBD = 0 } }
ze_flags! { /// Peer-to-peer property flags.
ze_device_p2p_property_flags_t { ZE_DEVICE_P2P_PROPERTY_FLAG_ACCESS = 0, ZE_DEVICE_P2P_PROPERTY_FLAG_ATOMICS = 1 } }
ze_flags! { /// Command queue group capabilities.
ze_command_queue_group_property_flags_t {
    ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE = 0, ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY = 1,
    ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COOPERATIVE_KERNELS = 2, ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_METRICS = 3 } }
ze_flags! { /// Context creation flags.
ze_context_flags_t { ZE_CONTEXT_FLAG_TBD = 0 } }
ze_flags! { /// Device allocation flags.
ze_device_mem_alloc_flags_t {
    ZE_DEVICE_MEM_ALLOC_FLAG_BIAS_CACHED = 0, ZE_DEVICE_MEM_ALLOC_FLAG_BIAS_UNCACHED = 1,
    ZE_DEVICE_MEM_ALLOC_FLAG_BIAS_INITIAL_PLACEMENT = 2 } }
ze_flags! { /// Host allocation flags.
ze_host_mem_alloc_flags_t {
    ZE_HOST_MEM_ALLOC_FLAG_BIAS_CACHED = 0, ZE_HOST_MEM_ALLOC_FLAG_BIAS_UNCACHED = 1,
    ZE_HOST_MEM_ALLOC_FLAG_BIAS_WRITE_COMBINED = 2, ZE_HOST_MEM_ALLOC_FLAG_BIAS_INITIAL_PLACEMENT = 3 } }
ze_flags! { /// IPC memory open flags.
ze_ipc_memory_flags_t { ZE_IPC_MEMORY_FLAG_BIAS_CACHED = 0, ZE_IPC_MEMORY_FLAG_BIAS_UNCACHED = 1 } }
ze_flags! { /// Command queue flags (`IN_ORDER` is API 1.9; drivers of older versions reject it).
ze_command_queue_flags_t { ZE_COMMAND_QUEUE_FLAG_EXPLICIT_ONLY = 0, ZE_COMMAND_QUEUE_FLAG_IN_ORDER = 1 } }
ze_flags! { /// Command list flags (`IN_ORDER` is API 1.9; drivers of older versions reject it).
ze_command_list_flags_t {
    ZE_COMMAND_LIST_FLAG_RELAXED_ORDERING = 0, ZE_COMMAND_LIST_FLAG_MAXIMIZE_THROUGHPUT = 1,
    ZE_COMMAND_LIST_FLAG_EXPLICIT_ONLY = 2, ZE_COMMAND_LIST_FLAG_IN_ORDER = 3 } }
ze_flags! { /// Event pool flags.
ze_event_pool_flags_t {
    ZE_EVENT_POOL_FLAG_HOST_VISIBLE = 0, ZE_EVENT_POOL_FLAG_IPC = 1, ZE_EVENT_POOL_FLAG_KERNEL_TIMESTAMP = 2 } }
ze_flags! { /// Event signal/wait scope flags.
ze_event_scope_flags_t {
    ZE_EVENT_SCOPE_FLAG_SUBDEVICE = 0, ZE_EVENT_SCOPE_FLAG_DEVICE = 1, ZE_EVENT_SCOPE_FLAG_HOST = 2 } }
ze_flags! { /// Fence flags.
ze_fence_flags_t { ZE_FENCE_FLAG_SIGNALED = 0 } }
ze_flags! { /// Kernel creation flags.
ze_kernel_flags_t { ZE_KERNEL_FLAG_FORCE_RESIDENCY = 0, ZE_KERNEL_FLAG_EXPLICIT_RESIDENCY = 1 } }
ze_flags! { /// Device module capabilities.
ze_device_module_flags_t {
    ZE_DEVICE_MODULE_FLAG_FP16 = 0, ZE_DEVICE_MODULE_FLAG_FP64 = 1,
    ZE_DEVICE_MODULE_FLAG_INT64_ATOMICS = 2, ZE_DEVICE_MODULE_FLAG_DP4A = 3 } }
ze_flags! { /// Floating-point capabilities.
ze_device_fp_flags_t {
    ZE_DEVICE_FP_FLAG_DENORM = 0, ZE_DEVICE_FP_FLAG_INF_NAN = 1, ZE_DEVICE_FP_FLAG_ROUND_TO_NEAREST = 2,
    ZE_DEVICE_FP_FLAG_ROUND_TO_ZERO = 3, ZE_DEVICE_FP_FLAG_ROUND_TO_INF = 4, ZE_DEVICE_FP_FLAG_FMA = 5,
    ZE_DEVICE_FP_FLAG_ROUNDED_DIVIDE_SQRT = 6, ZE_DEVICE_FP_FLAG_SOFT_FLOAT = 7 } }
ze_flags! { /// External memory handle types (export and import descriptors).
ze_external_memory_type_flags_t {
    ZE_EXTERNAL_MEMORY_TYPE_FLAG_OPAQUE_FD = 0, ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF = 1 } }
ze_flags! { /// Physical memory creation flags.
ze_physical_mem_flags_t { ZE_PHYSICAL_MEM_FLAG_TBD = 0 } }
ze_flags! { /// Relaxed allocation limits (experimental extension, in the 1.4 headers).
ze_relaxed_allocation_limits_exp_flags_t { ZE_RELAXED_ALLOCATION_LIMITS_EXP_FLAG_MAX_SIZE = 0 } }

/// Size of `ze_ipc_mem_handle_t` / `ze_ipc_event_pool_handle_t`.
pub const ZE_MAX_IPC_HANDLE_SIZE: usize = 64;
/// Size of a driver UUID.
pub const ZE_MAX_DRIVER_UUID_SIZE: usize = 16;
/// Size of a device UUID.
pub const ZE_MAX_DEVICE_UUID_SIZE: usize = 16;
/// Size of a native kernel UUID.
pub const ZE_MAX_NATIVE_KERNEL_UUID_SIZE: usize = 16;
/// Size of the device (and memory) name arrays.
pub const ZE_MAX_DEVICE_NAME: usize = 256;
/// Number of entries in `subGroupSizes`.
pub const ZE_SUBGROUPSIZE_COUNT: usize = 8;

/// Opaque IPC memory handle (64 bytes, passed by value to `zeMemOpenIpcHandle`).
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ze_ipc_mem_handle_t {
    /// Opaque data.
    pub data: [c_char; ZE_MAX_IPC_HANDLE_SIZE],
}
impl Default for ze_ipc_mem_handle_t {
    fn default() -> Self {
        Self {
            data: [0; ZE_MAX_IPC_HANDLE_SIZE],
        }
    }
}
impl fmt::Debug for ze_ipc_mem_handle_t {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ze_ipc_mem_handle_t(")?;
        for b in &self.data[..16] {
            write!(f, "{:02x}", *b as u8)?;
        }
        write!(f, "..)")
    }
}

/// Opaque IPC event pool handle.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ze_ipc_event_pool_handle_t {
    /// Opaque data.
    pub data: [c_char; ZE_MAX_IPC_HANDLE_SIZE],
}

/// Driver UUID.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct ze_driver_uuid_t {
    /// Opaque id.
    pub id: [u8; ZE_MAX_DRIVER_UUID_SIZE],
}
/// Device UUID.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct ze_device_uuid_t {
    /// Opaque id.
    pub id: [u8; ZE_MAX_DEVICE_UUID_SIZE],
}
/// Native kernel UUID.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct ze_native_kernel_uuid_t {
    /// Opaque id.
    pub id: [u8; ZE_MAX_NATIVE_KERNEL_UUID_SIZE],
}

/// Common header of every extensible structure (`ze_base_properties_t` / `ze_base_desc_t`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ze_base_desc_t {
    /// Structure type.
    pub stype: ze_structure_type_t,
    /// Next structure in the extension chain, or null.
    pub pNext: *const c_void,
}

/// Types with a `stype` header: `Default` gives a zeroed value with the right `stype`.
pub trait ZeStruct {
    /// The `stype` this structure must carry.
    const STYPE: ze_structure_type_t;
}

macro_rules! ze_struct {
    ($(#[$m:meta])* $name:ident = $stype:ident ($pnext:ty) { $( $(#[$fm:meta])* pub $f:ident : $t:ty ),* $(,)? }) => {
        $(#[$m])*
        #[repr(C)]
        #[derive(Clone, Copy)]
        pub struct $name {
            /// Structure type; must be the matching `ZE_STRUCTURE_TYPE_*`.
            pub stype: ze_structure_type_t,
            /// Extension chain; null or a pointer to an extension structure.
            pub pNext: $pnext,
            $( $(#[$fm])* pub $f: $t, )*
        }
        impl ZeStruct for $name {
            const STYPE: ze_structure_type_t = $stype;
        }
        impl Default for $name {
            fn default() -> Self {
                // SAFETY: this is a plain C structure of integers, arrays of integers and raw pointers, for
                // which the all-zero bit pattern is a valid value (null pointers, zero counts).
                let mut v: Self = unsafe { std::mem::zeroed() };
                v.stype = $stype;
                v
            }
        }
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("stype", &self.stype)
                    $( .field(stringify!($f), &self.$f) )*
                    .finish()
            }
        }
    };
}

ze_struct! { /// Driver properties.
    ze_driver_properties_t = ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES (*mut c_void) {
    /// Driver UUID.
    pub uuid: ze_driver_uuid_t,
    /// Driver version.
    pub driverVersion: u32,
} }
ze_struct! { /// Driver IPC properties.
    ze_driver_ipc_properties_t = ZE_STRUCTURE_TYPE_DRIVER_IPC_PROPERTIES (*mut c_void) {
    /// `ZE_IPC_PROPERTY_FLAG_*`.
    pub flags: ze_ipc_property_flags_t,
} }

/// Device name / memory name as bytes (NUL terminated).
#[repr(transparent)]
#[derive(Clone, Copy)]
pub struct ze_name_t(pub [c_char; ZE_MAX_DEVICE_NAME]);
impl ze_name_t {
    /// The name up to the first NUL, lossily decoded.
    pub fn to_string_lossy(&self) -> String {
        let bytes: Vec<u8> = self
            .0
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}
impl fmt::Debug for ze_name_t {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.to_string_lossy())
    }
}

ze_struct! { /// Device properties.
    ze_device_properties_t = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES (*mut c_void) {
    /// Device type.
    pub type_: ze_device_type_t,
    /// PCI vendor id.
    pub vendorId: u32,
    /// PCI device id.
    pub deviceId: u32,
    /// `ZE_DEVICE_PROPERTY_FLAG_*`.
    pub flags: ze_device_property_flags_t,
    /// Sub-device id.
    pub subdeviceId: u32,
    /// Core clock (MHz).
    pub coreClockRate: u32,
    /// Largest single allocation.
    pub maxMemAllocSize: u64,
    /// Logical hardware contexts.
    pub maxHardwareContexts: u32,
    /// Highest command queue priority.
    pub maxCommandQueuePriority: u32,
    /// Threads per EU.
    pub numThreadsPerEU: u32,
    /// EU SIMD width.
    pub physicalEUSimdWidth: u32,
    /// EUs per sub-slice.
    pub numEUsPerSubslice: u32,
    /// Sub-slices per slice.
    pub numSubslicesPerSlice: u32,
    /// Slices.
    pub numSlices: u32,
    /// Timer resolution.
    pub timerResolution: u64,
    /// Valid timestamp bits.
    pub timestampValidBits: u32,
    /// Valid kernel timestamp bits.
    pub kernelTimestampValidBits: u32,
    /// Device UUID.
    pub uuid: ze_device_uuid_t,
    /// Device name.
    pub name: ze_name_t,
} }
ze_struct! { /// Device compute properties.
    ze_device_compute_properties_t = ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES (*mut c_void) {
    /// Max work-items per group.
    pub maxTotalGroupSize: u32,
    /// Max group size in X.
    pub maxGroupSizeX: u32,
    /// Max group size in Y.
    pub maxGroupSizeY: u32,
    /// Max group size in Z.
    pub maxGroupSizeZ: u32,
    /// Max group count in X.
    pub maxGroupCountX: u32,
    /// Max group count in Y.
    pub maxGroupCountY: u32,
    /// Max group count in Z.
    pub maxGroupCountZ: u32,
    /// Shared local memory per group (bytes).
    pub maxSharedLocalMemory: u32,
    /// Valid entries of `subGroupSizes`.
    pub numSubGroupSizes: u32,
    /// Supported sub-group sizes.
    pub subGroupSizes: [u32; ZE_SUBGROUPSIZE_COUNT],
} }
ze_struct! { /// Device module properties.
    ze_device_module_properties_t = ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES (*mut c_void) {
    /// Highest SPIR-V version (`ZE_MAKE_VERSION`).
    pub spirvVersionSupported: u32,
    /// `ZE_DEVICE_MODULE_FLAG_*`.
    pub flags: ze_device_module_flags_t,
    /// Half precision capabilities.
    pub fp16flags: ze_device_fp_flags_t,
    /// Single precision capabilities.
    pub fp32flags: ze_device_fp_flags_t,
    /// Double precision capabilities.
    pub fp64flags: ze_device_fp_flags_t,
    /// Max total kernel argument size.
    pub maxArgumentsSize: u32,
    /// printf buffer size.
    pub printfBufferSize: u32,
    /// Native kernel compatibility UUID.
    pub nativeKernelSupported: ze_native_kernel_uuid_t,
} }
ze_struct! { /// Device memory properties (one per memory ordinal).
    ze_device_memory_properties_t = ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES (*mut c_void) {
    /// `ZE_DEVICE_MEMORY_PROPERTY_FLAG_*`.
    pub flags: ze_device_memory_property_flags_t,
    /// Max clock (MHz).
    pub maxClockRate: u32,
    /// Bus width (bits).
    pub maxBusWidth: u32,
    /// Total size in bytes.
    pub totalSize: u64,
    /// Memory name.
    pub name: ze_name_t,
} }
ze_struct! { /// Peer-to-peer properties between two devices.
    ze_device_p2p_properties_t = ZE_STRUCTURE_TYPE_DEVICE_P2P_PROPERTIES (*mut c_void) {
    /// `ZE_DEVICE_P2P_PROPERTY_FLAG_*`.
    pub flags: ze_device_p2p_property_flags_t,
} }
ze_struct! { /// Command queue group properties (one per ordinal).
    ze_command_queue_group_properties_t = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES (*mut c_void) {
    /// `ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_*`.
    pub flags: ze_command_queue_group_property_flags_t,
    /// Largest fill pattern.
    pub maxMemoryFillPatternSize: usize,
    /// Physical engines in the group.
    pub numQueues: u32,
} }
ze_struct! { /// Context descriptor.
    ze_context_desc_t = ZE_STRUCTURE_TYPE_CONTEXT_DESC (*const c_void) {
    /// `ZE_CONTEXT_FLAG_*`.
    pub flags: ze_context_flags_t,
} }
ze_struct! { /// Device allocation descriptor.
    ze_device_mem_alloc_desc_t = ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC (*const c_void) {
    /// `ZE_DEVICE_MEM_ALLOC_FLAG_*`.
    pub flags: ze_device_mem_alloc_flags_t,
    /// Memory ordinal (index into `zeDeviceGetMemoryProperties`).
    pub ordinal: u32,
} }
ze_struct! { /// Host allocation descriptor.
    ze_host_mem_alloc_desc_t = ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC (*const c_void) {
    /// `ZE_HOST_MEM_ALLOC_FLAG_*`.
    pub flags: ze_host_mem_alloc_flags_t,
} }
ze_struct! { /// Relaxed allocation limits (chained into `ze_device_mem_alloc_desc_t`).
    ze_relaxed_allocation_limits_exp_desc_t = ZE_STRUCTURE_TYPE_RELAXED_ALLOCATION_LIMITS_EXP_DESC (*const c_void) {
    /// `ZE_RELAXED_ALLOCATION_LIMITS_EXP_FLAG_*`.
    pub flags: ze_relaxed_allocation_limits_exp_flags_t,
} }
ze_struct! { /// Physical memory descriptor (`zePhysicalMemCreate`).
    ze_physical_mem_desc_t = ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC (*const c_void) {
    /// `ZE_PHYSICAL_MEM_FLAG_*`.
    pub flags: ze_physical_mem_flags_t,
    /// Bytes (a multiple of `zeVirtualMemQueryPageSize`).
    pub size: usize,
} }
ze_struct! { /// Memory to be exportable as the given handle types (chained into an allocation or physical memory
    /// descriptor).
    ze_external_memory_export_desc_t = ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_DESC (*const c_void) {
    /// `ZE_EXTERNAL_MEMORY_TYPE_FLAG_*`.
    pub flags: ze_external_memory_type_flags_t,
} }
ze_struct! { /// Memory imported from a file descriptor (chained into an allocation or physical memory descriptor).
    ze_external_memory_import_fd_t = ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_IMPORT_FD (*const c_void) {
    /// `ZE_EXTERNAL_MEMORY_TYPE_FLAG_*` of `fd`.
    pub flags: ze_external_memory_type_flags_t,
    /// The descriptor.
    pub fd: i32,
} }
ze_struct! { /// An allocation exported as a file descriptor (chained into `ze_memory_allocation_properties_t`).
    ze_external_memory_export_fd_t = ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_FD (*const c_void) {
    /// `ZE_EXTERNAL_MEMORY_TYPE_FLAG_*` wanted.
    pub flags: ze_external_memory_type_flags_t,
    /// The exported descriptor (out).
    pub fd: i32,
} }
ze_struct! { /// Allocation properties.
    ze_memory_allocation_properties_t = ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES (*mut c_void) {
    /// Allocation type (`ZE_MEMORY_TYPE_UNKNOWN` for pointers the context does not know).
    pub type_: ze_memory_type_t,
    /// Unique id of the allocation.
    pub id: u64,
    /// Page size.
    pub pageSize: u64,
} }
ze_struct! { /// Command queue descriptor (also used by `zeCommandListCreateImmediate`).
    ze_command_queue_desc_t = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC (*const c_void) {
    /// Command queue group ordinal.
    pub ordinal: u32,
    /// Queue index within the group.
    pub index: u32,
    /// `ZE_COMMAND_QUEUE_FLAG_*`.
    pub flags: ze_command_queue_flags_t,
    /// Mode.
    pub mode: ze_command_queue_mode_t,
    /// Priority.
    pub priority: ze_command_queue_priority_t,
} }
ze_struct! { /// Command list descriptor.
    ze_command_list_desc_t = ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC (*const c_void) {
    /// Command queue group ordinal the list will be executed on.
    pub commandQueueGroupOrdinal: u32,
    /// `ZE_COMMAND_LIST_FLAG_*`.
    pub flags: ze_command_list_flags_t,
} }
ze_struct! { /// Event pool descriptor.
    ze_event_pool_desc_t = ZE_STRUCTURE_TYPE_EVENT_POOL_DESC (*const c_void) {
    /// `ZE_EVENT_POOL_FLAG_*`.
    pub flags: ze_event_pool_flags_t,
    /// Number of events (> 0).
    pub count: u32,
} }
ze_struct! { /// Event descriptor.
    ze_event_desc_t = ZE_STRUCTURE_TYPE_EVENT_DESC (*const c_void) {
    /// Index in the pool.
    pub index: u32,
    /// Signal scope.
    pub signal: ze_event_scope_flags_t,
    /// Wait scope.
    pub wait: ze_event_scope_flags_t,
} }
ze_struct! { /// Fence descriptor.
    ze_fence_desc_t = ZE_STRUCTURE_TYPE_FENCE_DESC (*const c_void) {
    /// `ZE_FENCE_FLAG_*`.
    pub flags: ze_fence_flags_t,
} }

/// Specialization constants of a module.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ze_module_constants_t {
    /// Number of constants.
    pub numConstants: u32,
    /// Constant ids.
    pub pConstantIds: *const u32,
    /// Pointers to constant values.
    pub pConstantValues: *mut *const c_void,
}

ze_struct! { /// Module descriptor.
    ze_module_desc_t = ZE_STRUCTURE_TYPE_MODULE_DESC (*const c_void) {
    /// Input format.
    pub format: ze_module_format_t,
    /// Input size in bytes.
    pub inputSize: usize,
    /// Input IL or native binary.
    pub pInputModule: *const u8,
    /// Build flags (optional, NUL terminated).
    pub pBuildFlags: *const c_char,
    /// Specialization constants (optional).
    pub pConstants: *const ze_module_constants_t,
} }
ze_struct! { /// Kernel descriptor.
    ze_kernel_desc_t = ZE_STRUCTURE_TYPE_KERNEL_DESC (*const c_void) {
    /// `ZE_KERNEL_FLAG_*`.
    pub flags: ze_kernel_flags_t,
    /// Kernel name (NUL terminated).
    pub pKernelName: *const c_char,
} }

/// Kernel dispatch group count.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ze_group_count_t {
    /// Groups in X.
    pub groupCountX: u32,
    /// Groups in Y.
    pub groupCountY: u32,
    /// Groups in Z.
    pub groupCountZ: u32,
}

/// Copy region (for region copies; not used by the covered calls but part of the DDI signatures).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ze_copy_region_t {
    /// X origin (bytes).
    pub originX: u32,
    /// Y origin (rows).
    pub originY: u32,
    /// Z origin (slices).
    pub originZ: u32,
    /// Width (bytes).
    pub width: u32,
    /// Height (rows).
    pub height: u32,
    /// Depth (slices).
    pub depth: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// The Rust layouts as C static assertions: `(C expression, Rust value)`.
    fn layout_checks() -> Vec<(String, usize)> {
        macro_rules! sizes {
            ($($t:ident),* $(,)?) => { vec![$((format!("sizeof({})", stringify!($t)), size_of::<$t>())),*] };
        }
        macro_rules! offsets {
            ($($t:ident . $f:ident),* $(,)?) => {
                vec![$((format!("offsetof({}, {})", stringify!($t), stringify!($f)), offset_of!($t, $f))),*]
            };
        }
        let mut v = sizes![
            ze_ipc_mem_handle_t,
            ze_device_properties_t,
            ze_device_compute_properties_t,
            ze_device_memory_properties_t,
            ze_command_queue_group_properties_t,
            ze_command_queue_desc_t,
            ze_module_desc_t,
            ze_kernel_desc_t,
            ze_event_desc_t,
            ze_memory_allocation_properties_t,
            ze_device_module_properties_t,
            ze_driver_properties_t,
            ze_event_pool_desc_t,
            ze_command_list_desc_t,
            ze_copy_region_t,
            ze_group_count_t,
            ze_physical_mem_desc_t,
            ze_external_memory_export_desc_t,
            ze_external_memory_import_fd_t,
            ze_external_memory_export_fd_t,
        ];
        v.extend(offsets![
            ze_device_properties_t.uuid,
            ze_device_properties_t.name,
            ze_module_desc_t.pInputModule,
            ze_module_desc_t.pBuildFlags,
            ze_module_desc_t.pConstants,
            ze_kernel_desc_t.pKernelName,
            ze_command_queue_desc_t.ordinal,
            ze_command_queue_desc_t.mode,
            ze_event_desc_t.signal,
            ze_event_desc_t.wait,
            ze_physical_mem_desc_t.size,
            ze_external_memory_import_fd_t.fd,
            ze_external_memory_export_fd_t.fd,
        ]);
        v
    }

    #[test]
    fn layouts_match_c_headers() {
        // The checks are compiled by the C compiler against the Level Zero headers this crate mirrors (Debian's
        // libze-dev, API 1.8.12), so a drift fails here rather than at run time.
        let header = std::path::Path::new("/usr/include/level_zero/ze_api.h");
        if !header.exists() {
            assert!(
                std::env::var("CI").is_err(),
                "{} is missing (scripts/setup-device.sh installs libze-dev)",
                header.display()
            );
            eprintln!("skipping: {} is missing (libze-dev)", header.display());
            return;
        }
        let mut src = String::from("#include <stddef.h>\n#include <level_zero/ze_api.h>\n");
        for (expr, value) in layout_checks() {
            src.push_str(&format!(
                "_Static_assert({expr} == {value}, \"{expr} is {value} in Rust\");\n"
            ));
        }
        let dir = std::env::temp_dir().join(format!("l0-layout-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("layout.c");
        std::fs::write(&file, &src).unwrap();
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let out = std::process::Command::new(&cc)
            .args(["-std=c11", "-fsyntax-only"])
            .arg(&file)
            .output()
            .unwrap_or_else(|e| panic!("running {cc}: {e}"));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            out.status.success(),
            "the Rust layouts differ from the C headers:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn result_display_names() {
        assert_eq!(
            ZE_RESULT_ERROR_UNINITIALIZED.to_string(),
            "ZE_RESULT_ERROR_UNINITIALIZED"
        );
        assert_eq!(ze_result_t(0x1234).to_string(), "0x1234");
        assert_eq!(ZE_API_VERSION_1_4.to_string(), "1.4");
    }
}
