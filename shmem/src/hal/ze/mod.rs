//! The Level Zero hardware layer: the only code of the runtime that calls `level_zero_sys` (with the transport
//! leaves phase 2 folds in: `transport/ze.rs`'s window copies, `ze_kernel.rs`, `ze_queue.rs`).
//!
//! [`ZeRuntime`] owns (or adopts) a driver, device and context, two synchronous immediate command lists (one on a
//! copy engine when the device has one, one on a compute engine) and, lazily, the runtime's own device-library
//! module. Every kernel launch goes through [`ZeRuntime::append_kernel`], the one launch path, under the kernel's
//! argument lock. [`DeviceWindow`] is one PE's device heap allocation (our own, or a peer's opened through IPC);
//! the transport layer makes it a `Window`.

use crate::error::{Error, Result};
use crate::types::AmoOp;
use level_zero_sys as ze;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::{Arc, Mutex};

/// The runtime's own kernels (see `shmem/device-lib/runtime_kernels.cl`), prebuilt to SPIR-V.
pub const RUNTIME_KERNELS_SPIRV: &[u8] =
    include_bytes!("../../../device-lib/prebuilt/xpushmem_runtime.spv");

pub(crate) fn check(call: &'static str, r: ze::ze_result_t) -> Result<()> {
    r.ok().map_err(|result| Error::Ze {
        call: call.into(),
        result,
        detail: String::new(),
    })
}

/// Add ` (what)` to a failed call's error, keeping its result code.
fn context(e: Error, what: impl std::fmt::Display) -> Error {
    match e {
        Error::Ze {
            call,
            result,
            detail,
        } => Error::Ze {
            call,
            result,
            detail: format!("{detail} ({what})"),
        },
        e => e,
    }
}

/// Handles a host framework (SYCL, PyTorch XPU) already owns and lends to xpushmem; they are not destroyed here.
/// Made only by [`ExternalHandles::new`] (whose contract the runtime relies on) or by the runtime itself.
#[derive(Debug, Clone, Copy)]
pub struct ExternalHandles {
    driver: ze::ze_driver_handle_t,
    device: ze::ze_device_handle_t,
    pub(crate) context: ze::ze_context_handle_t,
}

impl ExternalHandles {
    /// Lend a framework's Level Zero handles to the runtime.
    ///
    /// # Safety
    /// The three handles must be live handles of one Level Zero driver (the device of that driver, the context
    /// created on it), loaded through the same Level Zero loader as this process's, and stay valid until the
    /// runtime that adopts them is finalized: the runtime allocates, maps and launches in them.
    pub unsafe fn new(
        driver: ze::ze_driver_handle_t,
        device: ze::ze_device_handle_t,
        context: ze::ze_context_handle_t,
    ) -> ExternalHandles {
        ExternalHandles {
            driver,
            device,
            context,
        }
    }

    /// `ze_driver_handle_t`.
    pub fn driver(&self) -> ze::ze_driver_handle_t {
        self.driver
    }

    /// `ze_device_handle_t`.
    pub fn device(&self) -> ze::ze_device_handle_t {
        self.device
    }

    /// `ze_context_handle_t`.
    pub fn context(&self) -> ze::ze_context_handle_t {
        self.context
    }
}

/// Which device a PE uses.
#[derive(Debug, Clone, Copy)]
pub enum DeviceSelect {
    /// Device number `n` of the first driver that has devices.
    Index(usize),
    /// Adopt handles from a host framework.
    External(ExternalHandles),
}

#[derive(Debug)]
pub(crate) struct Lists {
    pub(crate) copy: ze::ze_command_list_handle_t,
    compute: ze::ze_command_list_handle_t,
    /// Asynchronous compute list for launches that return an event (created on first use).
    compute_async: Option<ze::ze_command_list_handle_t>,
    compute_ordinal: u32,
}

/// An immediate command list on queue group `ordinal` of `device`, in `context`, in `mode`.
pub(crate) fn immediate_list(
    api: &ze::ZeApi,
    context: ze::ze_context_handle_t,
    device: ze::ze_device_handle_t,
    ordinal: u32,
    mode: ze::ze_command_queue_mode_t,
) -> Result<ze::ze_command_list_handle_t> {
    let desc = ze::ze_command_queue_desc_t {
        ordinal,
        index: 0,
        mode,
        ..Default::default()
    };
    let mut list = ze::ze_command_list_handle_t::null();
    // SAFETY: the caller's context and device handles are live; the descriptor and out-pointer are valid.
    check("zeCommandListCreateImmediate", unsafe {
        (api.zeCommandListCreateImmediate)(context, device, &desc, &mut list)
    })?;
    Ok(list)
}

impl Lists {
    /// A synchronous copy list (on the copy engine when the device has one, else on compute) and a synchronous
    /// compute list; whether the copy list is on a copy engine.
    fn open(
        api: &ze::ZeApi,
        context: ze::ze_context_handle_t,
        device: ze::ze_device_handle_t,
    ) -> Result<(Lists, bool)> {
        let (copy_ordinal, compute_ordinal) = ZeRuntime::queue_groups(api, device)?;
        let sync = ze::ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS;
        let copy = immediate_list(
            api,
            context,
            device,
            copy_ordinal.unwrap_or(compute_ordinal),
            sync,
        )?;
        let compute = match immediate_list(api, context, device, compute_ordinal, sync) {
            Ok(c) => c,
            Err(e) => {
                // SAFETY: the list was just created and is not used.
                unsafe { (api.zeCommandListDestroy)(copy) };
                return Err(e);
            }
        };
        let lists = Lists {
            copy,
            compute,
            compute_async: None,
            compute_ordinal,
        };
        Ok((lists, copy_ordinal.is_some()))
    }
}

#[derive(Debug)]
struct AmoKernels {
    module: ze::ze_module_handle_t,
    k32: ze::ze_kernel_handle_t,
    k64: ze::ze_kernel_handle_t,
    /// Host allocation (8 bytes) receiving the previous value.
    result: *mut u64,
}

/// Where [`ZeRuntime::append_kernel`] appends a kernel launch.
#[derive(Debug, Clone, Copy)]
pub(crate) enum LaunchOn {
    /// The runtime's synchronous compute list: the kernel has finished on return.
    Sync,
    /// The runtime's asynchronous compute list; the event is signalled when the kernel has finished.
    Async(ze::ze_event_handle_t),
    /// The service lane's synchronous compute list (see `ZeRuntime::service`).
    Service,
    /// A caller's list (a framework's stream), after a barrier on everything appended to it before.
    Caller(ze::ze_command_list_handle_t),
}

/// One PE's Level Zero device and context.
pub struct ZeRuntime {
    pub(crate) api: ze::ZeApi,
    driver: ze::ze_driver_handle_t,
    device: ze::ze_device_handle_t,
    context: ze::ze_context_handle_t,
    owns_context: bool,
    name: String,
    copy_engine: bool,
    pub(crate) lists: Mutex<Lists>,
    amo: Mutex<Option<AmoKernels>>,
    modules: Mutex<Vec<ze::ze_module_handle_t>>,
    /// Kernels created through [`ZeRuntime::kernel`], destroyed before their modules.
    kernels: Mutex<Vec<ze::ze_kernel_handle_t>>,
    /// The argument lock of each kernel launched ([`ZeRuntime::append_kernel`]), by handle: held from the first
    /// argument set until the launch is appended, whichever list it goes to.
    arg_locks: Mutex<HashMap<usize, Arc<Mutex<()>>>>,
    /// The service lane (created on first use): synchronous copy and compute lists of their own, for the threads
    /// that serve peers (fabric staging, the device proxy) while this PE's own thread may be blocked in a kernel
    /// launch holding `lists`.
    service: Mutex<Option<Lists>>,
    /// Index of the device among the loader's devices (0 for adopted handles).
    #[cfg_attr(not(xpushmem_fabric), allow(dead_code))] // used by the fabric transport
    index: usize,
}

// SAFETY: Level Zero handles may be used from any thread; the only state mutated through `&self` (command lists,
// the lazily built kernels, module list) is behind mutexes, and `AmoKernels::result` is touched only under its lock.
unsafe impl Send for ZeRuntime {}
// SAFETY: as above.
unsafe impl Sync for ZeRuntime {}

impl std::fmt::Debug for ZeRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZeRuntime")
            .field("device", &self.name)
            .field("copy_engine", &self.copy_engine)
            .field("library", &self.api.library_path())
            .finish()
    }
}

impl ZeRuntime {
    /// The loaded Level Zero function table (for the queue leaf, `ze_queue.rs`).
    pub(crate) fn api(&self) -> &ze::ZeApi {
        &self.api
    }

    /// The ordinal of the compute engine group (for lists the queue leaf creates).
    pub(crate) fn compute_ordinal(&self) -> u32 {
        self.lists
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .compute_ordinal
    }

    /// Load the Level Zero loader, initialise it and open (or adopt) a device and a context.
    pub fn open(select: DeviceSelect) -> Result<Arc<ZeRuntime>> {
        let api = ze::ZeApi::load().map_err(|e| {
            Error::Device(format!(
                "Level Zero is not available: {e}; device heaps need the Level Zero loader (Debian: libze1) and a \
                 driver (an Intel GPU driver, or ze-emu through ZE_ENABLE_ALT_DRIVERS); host heaps still work"
            ))
        })?;
        // SAFETY: zeInit takes flags only; calling it more than once is allowed.
        check("zeInit", unsafe { (api.zeInit)(0) })?;
        let index = match select {
            DeviceSelect::Index(i) => i,
            DeviceSelect::External(_) => 0,
        };
        let (driver, device, context, owns_context) = match select {
            DeviceSelect::External(h) => {
                if h.driver.is_null() || h.device.is_null() || h.context.is_null() {
                    return Err(Error::invalid(
                        "external handles",
                        format!("{h:?}"),
                        "driver, device and context must all be set",
                    ));
                }
                (h.driver, h.device, h.context, false)
            }
            DeviceSelect::Index(index) => {
                let drivers = Self::drivers(&api)?;
                let mut found = None;
                let mut total = 0;
                for d in drivers {
                    let devs = Self::devices(&api, d)?;
                    if index < total + devs.len() {
                        found = Some((d, devs[index - total]));
                        break;
                    }
                    total += devs.len();
                }
                let (driver, device) = found.ok_or_else(|| {
                    Error::Device(format!("device {index} requested (XPUSHMEM_DEVICE or local rank), but Level Zero exposes {total} device(s)"))
                })?;
                let desc = ze::ze_context_desc_t::default();
                let mut context = ze::ze_context_handle_t::null();
                // SAFETY: desc is a valid descriptor; context is a valid out-pointer.
                check("zeContextCreate", unsafe {
                    (api.zeContextCreate)(driver, &desc, &mut context)
                })?;
                (driver, device, context, true)
            }
        };
        let mut props = ze::ze_device_properties_t::default();
        // SAFETY: props is a properties struct with the right stype.
        check("zeDeviceGetProperties", unsafe {
            (api.zeDeviceGetProperties)(device, &mut props)
        })?;
        let name = props.name.to_string_lossy();
        let (lists, copy_engine) = Lists::open(&api, context, device)?;
        tracing::debug!(device = %name, copy_engine, "Level Zero device opened");
        Ok(Arc::new(ZeRuntime {
            api,
            driver,
            device,
            context,
            owns_context,
            name,
            copy_engine,
            lists: Mutex::new(lists),
            amo: Mutex::new(None),
            modules: Mutex::new(Vec::new()),
            kernels: Mutex::new(Vec::new()),
            arg_locks: Mutex::new(HashMap::new()),
            service: Mutex::new(None),
            index,
        }))
    }

    fn drivers(api: &ze::ZeApi) -> Result<Vec<ze::ze_driver_handle_t>> {
        let mut n = 0u32;
        // SAFETY: count query with a null array.
        check("zeDriverGet", unsafe {
            (api.zeDriverGet)(&mut n, std::ptr::null_mut())
        })?;
        let mut v = vec![ze::ze_driver_handle_t::null(); n as usize];
        // SAFETY: v has room for n handles.
        check("zeDriverGet", unsafe {
            (api.zeDriverGet)(&mut n, v.as_mut_ptr())
        })?;
        v.truncate(n as usize);
        Ok(v)
    }

    fn devices(api: &ze::ZeApi, d: ze::ze_driver_handle_t) -> Result<Vec<ze::ze_device_handle_t>> {
        let mut n = 0u32;
        // SAFETY: count query with a null array.
        check("zeDeviceGet", unsafe {
            (api.zeDeviceGet)(d, &mut n, std::ptr::null_mut())
        })?;
        let mut v = vec![ze::ze_device_handle_t::null(); n as usize];
        // SAFETY: v has room for n handles.
        check("zeDeviceGet", unsafe {
            (api.zeDeviceGet)(d, &mut n, v.as_mut_ptr())
        })?;
        v.truncate(n as usize);
        Ok(v)
    }

    /// (copy-only group ordinal if any, compute group ordinal).
    fn queue_groups(api: &ze::ZeApi, device: ze::ze_device_handle_t) -> Result<(Option<u32>, u32)> {
        let mut n = 0u32;
        // SAFETY: count query with a null array.
        check("zeDeviceGetCommandQueueGroupProperties", unsafe {
            (api.zeDeviceGetCommandQueueGroupProperties)(device, &mut n, std::ptr::null_mut())
        })?;
        let mut v = vec![ze::ze_command_queue_group_properties_t::default(); n as usize];
        // SAFETY: v holds n properties structs with the right stype.
        check("zeDeviceGetCommandQueueGroupProperties", unsafe {
            (api.zeDeviceGetCommandQueueGroupProperties)(device, &mut n, v.as_mut_ptr())
        })?;
        let compute = v
            .iter()
            .position(|g| g.flags & ze::ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE != 0)
            .ok_or_else(|| Error::Device("the device has no compute engine".into()))?;
        let copy = v.iter().position(|g| {
            g.flags & ze::ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY != 0
                && g.flags & ze::ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE == 0
        });
        Ok((copy.map(|c| c as u32), compute as u32))
    }

    /// Number of devices the loaded drivers expose (for picking one per local rank).
    pub fn device_count() -> Result<usize> {
        let api = ze::ZeApi::load()
            .map_err(|e| Error::Device(format!("Level Zero is not available: {e}")))?;
        // SAFETY: flags only.
        check("zeInit", unsafe { (api.zeInit)(0) })?;
        let mut total = 0;
        for d in Self::drivers(&api)? {
            total += Self::devices(&api, d)?.len();
        }
        Ok(total)
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether host-initiated copies use a dedicated copy engine.
    pub fn has_copy_engine(&self) -> bool {
        self.copy_engine
    }

    /// The raw handles (driver, device, context), for frameworks that want to share them.
    pub fn handles(&self) -> ExternalHandles {
        ExternalHandles {
            driver: self.driver,
            device: self.device,
            context: self.context,
        }
    }

    /// Allocate `size` bytes of device memory as a window of this process.
    pub fn alloc_heap(self: &Arc<Self>, size: usize) -> Result<DeviceWindow> {
        self.alloc_heap_with_tail(size, 0)
    }

    /// Allocate `size + tail` bytes of device memory; the window covers the first `size` bytes, and the `tail`
    /// bytes after them (the device library's scratch) are reached only through [`DeviceWindow::zero_tail`],
    /// [`DeviceWindow::write_tail`] and by kernels. The tail travels with the allocation's IPC handle.
    pub fn alloc_heap_with_tail(
        self: &Arc<Self>,
        size: usize,
        tail: usize,
    ) -> Result<DeviceWindow> {
        let desc = ze::ze_device_mem_alloc_desc_t::default();
        let mut p: *mut c_void = std::ptr::null_mut();
        let total = size
            .checked_add(tail)
            .ok_or_else(|| Error::invalid("heap size", size, "too large"))?;
        // SAFETY: valid handles, descriptor and out-pointer.
        check("zeMemAllocDevice", unsafe {
            (self.api.zeMemAllocDevice)(self.context, &desc, total, 64, self.device, &mut p)
        })
        .map_err(|e| {
            context(
                e,
                format_args!("a {size}-byte symmetric heap; lower XPUSHMEM_SYMMETRIC_SIZE?"),
            )
        })?;
        Ok(DeviceWindow {
            rt: self.clone(),
            base: p.cast(),
            len: size,
            tail,
            imported: false,
        })
    }

    /// The IPC handle of a window we allocated, and the fd it carries (Intel's drivers put a dma-buf fd in the
    /// first bytes).
    pub fn ipc_handle(&self, w: &DeviceWindow) -> Result<([u8; ze::ZE_MAX_IPC_HANDLE_SIZE], i32)> {
        let mut h = ze::ze_ipc_mem_handle_t::default();
        // SAFETY: w.base is a live device allocation of this context; h is a valid out-pointer.
        check("zeMemGetIpcHandle", unsafe {
            (self.api.zeMemGetIpcHandle)(self.context, w.base.cast(), &mut h)
        })?;
        let bytes = h.data.map(|c| c as u8);
        let fd = i32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        Ok((bytes, fd))
    }

    /// Open a peer's heap from its IPC handle bytes, with `fd` (a descriptor valid in this process) patched in.
    pub fn open_ipc(
        self: &Arc<Self>,
        handle: &[u8; ze::ZE_MAX_IPC_HANDLE_SIZE],
        fd: i32,
        len: usize,
    ) -> Result<DeviceWindow> {
        let mut h = ze::ze_ipc_mem_handle_t::default();
        for (d, s) in h.data.iter_mut().zip(handle) {
            *d = *s as _;
        }
        for (d, s) in h.data.iter_mut().zip(fd.to_ne_bytes()) {
            *d = s as _;
        }
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid context/device; h is passed by value; p is a valid out-pointer.
        check("zeMemOpenIpcHandle", unsafe {
            (self.api.zeMemOpenIpcHandle)(self.context, self.device, h, 0, &mut p)
        })?;
        Ok(DeviceWindow {
            rt: self.clone(),
            base: p.cast(),
            len,
            tail: 0,
            imported: true,
        })
    }

    /// Copy `len` bytes; both ranges were validated by the caller against live allocations or Rust slices.
    ///
    /// # Safety
    /// `dst` and `src` must each be valid for `len` bytes (device memory of this context, or host memory).
    pub(crate) unsafe fn copy(&self, dst: *mut u8, src: *const u8, len: usize) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let lists = self.lists.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: the caller guarantees both ranges; the list is synchronous, so the copy is complete on return.
        check("zeCommandListAppendMemoryCopy", unsafe {
            (self.api.zeCommandListAppendMemoryCopy)(
                lists.copy,
                dst.cast(),
                src.cast(),
                len,
                ze::ze_event_handle_t::null(),
                0,
                std::ptr::null_mut(),
            )
        })
    }

    /// Write `src` to device (or host) memory at `dst`.
    ///
    /// # Safety
    /// `dst` must be valid for `src.len()` bytes: memory of this context (a heap's tail, a module global).
    pub(crate) unsafe fn write_raw(&self, dst: *mut u8, src: &[u8]) -> Result<()> {
        // SAFETY: the caller guarantees dst; src is a live host slice.
        unsafe { self.copy(dst, src.as_ptr(), src.len()) }
    }

    /// Read `dst.len()` bytes of device (or host) memory at `src`.
    ///
    /// # Safety
    /// `src` must be valid for `dst.len()` bytes: memory of this context.
    pub(crate) unsafe fn read_raw(&self, dst: &mut [u8], src: *const u8) -> Result<()> {
        // SAFETY: the caller guarantees src; dst is a live, exclusive host slice.
        unsafe { self.copy(dst.as_mut_ptr(), src, dst.len()) }
    }

    /// Fill `len` bytes at `dst` with zeros.
    ///
    /// # Safety
    /// `dst` must be valid for `len` bytes of device memory of this context.
    pub(crate) unsafe fn zero_raw(&self, dst: *mut u8, len: usize) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let lists = self.lists.lock().unwrap_or_else(|p| p.into_inner());
        let byte = 0u8;
        // SAFETY: the caller guarantees the range; the pattern is one live byte; synchronous list.
        check("zeCommandListAppendMemoryFill", unsafe {
            (self.api.zeCommandListAppendMemoryFill)(
                lists.copy,
                dst.cast(),
                (&byte as *const u8).cast(),
                1,
                len,
                ze::ze_event_handle_t::null(),
                0,
                std::ptr::null_mut(),
            )
        })
    }

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

    /// Set the arguments of `kernel` (raw bytes of each value: pointers as 8-byte addresses) and run it with
    /// `groups` work-groups of `group_size` work-items on the compute engine; returns when it has finished.
    ///
    /// # Safety
    /// `kernel` must be a live kernel of this context, and running it with these arguments must be sound: every
    /// address it dereferences must be valid for the accesses it makes while it runs (the device follows any
    /// pointer it is given), and the argument sizes must match its parameters.
    pub unsafe fn launch(
        &self,
        kernel: ze::ze_kernel_handle_t,
        args: &[Vec<u8>],
        groups: [u32; 3],
        group_size: [u32; 3],
    ) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe { self.append_kernel(LaunchOn::Sync, kernel, args, groups, group_size, false) }
    }

    /// [`ZeRuntime::launch`] (`async_event` false) or [`ZeRuntime::launch_async`] (true) with
    /// `zeCommandListAppendLaunchCooperativeKernel`, for kernels whose work-groups wait on each other; the
    /// driver refuses more groups than [`ZeRuntime::max_cooperative_groups`].
    ///
    /// # Safety
    /// As for [`ZeRuntime::launch_async`].
    pub unsafe fn launch_cooperative(
        self: &Arc<Self>,
        kernel: ze::ze_kernel_handle_t,
        args: &[Vec<u8>],
        groups: [u32; 3],
        group_size: [u32; 3],
        async_event: bool,
    ) -> Result<Option<ZeEvent>> {
        if !async_event {
            // SAFETY: the caller's contract.
            unsafe { self.append_kernel(LaunchOn::Sync, kernel, args, groups, group_size, true)? };
            return Ok(None);
        }
        // SAFETY: the caller's contract.
        unsafe { self.launch_async_with(kernel, args, groups, group_size, true) }.map(Some)
    }

    /// How many work-groups of `kernel` can be resident at once (`zeKernelSuggestMaxCooperativeGroupCount`).
    ///
    /// # Safety
    /// `kernel` must be a live kernel of this context.
    pub unsafe fn max_cooperative_groups(&self, kernel: ze::ze_kernel_handle_t) -> Result<u32> {
        let mut n = 0u32;
        // SAFETY: live kernel (the caller's contract) and out-pointer.
        check("zeKernelSuggestMaxCooperativeGroupCount", unsafe {
            (self.api.zeKernelSuggestMaxCooperativeGroupCount)(kernel, &mut n)
        })?;
        Ok(n)
    }

    /// Like [`ZeRuntime::launch`], but returns at once with an event that is signalled when the kernel has
    /// finished (kernels launched this way run in order with each other).
    ///
    /// # Safety
    /// As for [`ZeRuntime::launch`], and every address the kernel uses must stay valid until the event has
    /// completed (dropping the event waits for it).
    pub unsafe fn launch_async(
        self: &Arc<Self>,
        kernel: ze::ze_kernel_handle_t,
        args: &[Vec<u8>],
        groups: [u32; 3],
        group_size: [u32; 3],
    ) -> Result<ZeEvent> {
        // SAFETY: the caller's contract.
        unsafe { self.launch_async_with(kernel, args, groups, group_size, false) }
    }

    /// # Safety
    /// As for [`ZeRuntime::launch_async`].
    unsafe fn launch_async_with(
        self: &Arc<Self>,
        kernel: ze::ze_kernel_handle_t,
        args: &[Vec<u8>],
        groups: [u32; 3],
        group_size: [u32; 3],
        cooperative: bool,
    ) -> Result<ZeEvent> {
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
        let ev = ZeEvent {
            rt: self.clone(),
            pool,
            event,
        };
        r?;
        // SAFETY: the caller's contract; the event is live (owned by `ev`).
        unsafe {
            self.append_kernel(
                LaunchOn::Async(event),
                kernel,
                args,
                groups,
                group_size,
                cooperative,
            )?
        };
        Ok(ev)
    }

    /// The one launch path: set `kernel`'s arguments and group size and append its launch to the list `on` names,
    /// under the kernel's argument lock, then (for the runtime's own lists) the lock of those lists. Level Zero
    /// captures a kernel's arguments when its launch is appended, so a kernel shared between threads (the op
    /// kernels, a C caller's kernel, a [`crate::device::Kernel`] used from two threads) cannot have its arguments
    /// changed between another thread's setting and appending them, whichever entry point each thread came
    /// through (`Device::launch`, `launch_async`, `enqueue`, `enqueue_op`, the runtime's atomics). Lock order:
    /// the kernel's, then the lists'.
    ///
    /// # Safety
    /// As for [`ZeRuntime::launch`]; an event of `on` is a live event of this context, and a caller's list is a
    /// live command list of this context whose appends the caller serialises.
    pub(crate) unsafe fn append_kernel(
        &self,
        on: LaunchOn,
        kernel: ze::ze_kernel_handle_t,
        args: &[Vec<u8>],
        groups: [u32; 3],
        group_size: [u32; 3],
        cooperative: bool,
    ) -> Result<()> {
        let arg_lock = Arc::clone(
            self.arg_locks
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(kernel.0 as usize)
                .or_default(),
        );
        let _args = arg_lock.lock().unwrap_or_else(|p| p.into_inner());
        let (signal, barrier) = match on {
            LaunchOn::Async(e) => (Some(e), false),
            LaunchOn::Caller(_) => (None, true),
            LaunchOn::Sync | LaunchOn::Service => (None, false),
        };
        let append = |list| {
            // SAFETY: the caller's contract; the list is live and used under its lock (or the caller's), held
            // until the launch is appended.
            unsafe {
                self.set_and_append(
                    list,
                    kernel,
                    args,
                    groups,
                    group_size,
                    signal,
                    cooperative,
                    barrier,
                )
            }
        };
        match on {
            LaunchOn::Caller(list) => append(list),
            LaunchOn::Service => {
                let lanes = self.service_lists()?;
                let l = lanes
                    .as_ref()
                    .map(|l| l.compute)
                    .expect("created by service_lists");
                append(l)
            }
            LaunchOn::Sync | LaunchOn::Async(_) => {
                let mut lists = self.lists.lock().unwrap_or_else(|p| p.into_inner());
                let list = match (signal, lists.compute_async) {
                    (None, _) => lists.compute,
                    (Some(_), Some(l)) => l,
                    (Some(_), None) => {
                        let l = immediate_list(
                            &self.api,
                            self.context,
                            self.device,
                            lists.compute_ordinal,
                            ze::ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS,
                        )?;
                        lists.compute_async = Some(l);
                        l
                    }
                };
                append(list)
            }
        }
    }

    /// Set `kernel`'s arguments and group size and append its launch to `list`, after a barrier on everything
    /// appended before it when `barrier` (regular lists do not order kernels by themselves). Called only by
    /// [`ZeRuntime::append_kernel`], which holds the locks.
    ///
    /// # Safety
    /// As for [`ZeRuntime::append_kernel`]; `list` is a live command list of this context.
    #[allow(clippy::too_many_arguments)]
    unsafe fn set_and_append(
        &self,
        list: ze::ze_command_list_handle_t,
        kernel: ze::ze_kernel_handle_t,
        args: &[Vec<u8>],
        groups: [u32; 3],
        group_size: [u32; 3],
        signal: Option<ze::ze_event_handle_t>,
        cooperative: bool,
        barrier: bool,
    ) -> Result<()> {
        for (i, a) in args.iter().enumerate() {
            // SAFETY: the kernel is live; the value bytes are valid for the call.
            check("zeKernelSetArgumentValue", unsafe {
                (self.api.zeKernelSetArgumentValue)(kernel, i as u32, a.len(), a.as_ptr().cast())
            })
            .map_err(|e| context(e, format_args!("argument {i}")))?;
        }
        // SAFETY: the kernel is live.
        check("zeKernelSetGroupSize", unsafe {
            (self.api.zeKernelSetGroupSize)(kernel, group_size[0], group_size[1], group_size[2])
        })?;
        if barrier {
            // SAFETY: the list is live (the caller's contract).
            check("zeCommandListAppendBarrier", unsafe {
                (self.api.zeCommandListAppendBarrier)(
                    list,
                    ze::ze_event_handle_t::null(),
                    0,
                    std::ptr::null_mut(),
                )
            })?;
        }
        let count = ze::ze_group_count_t {
            groupCountX: groups[0],
            groupCountY: groups[1],
            groupCountZ: groups[2],
        };
        let (name, append) = if cooperative {
            (
                "zeCommandListAppendLaunchCooperativeKernel",
                self.api.zeCommandListAppendLaunchCooperativeKernel,
            )
        } else {
            (
                "zeCommandListAppendLaunchKernel",
                self.api.zeCommandListAppendLaunchKernel,
            )
        };
        // SAFETY: live list, kernel and (optional) event; a synchronous list has finished the kernel on return.
        check(name, unsafe {
            append(
                list,
                kernel,
                &count,
                signal.unwrap_or(ze::ze_event_handle_t::null()),
                0,
                std::ptr::null_mut(),
            )
        })
    }

    /// The service lane's lists (created on first use); see `ZeRuntime::service`.
    fn service_lists(&self) -> Result<std::sync::MutexGuard<'_, Option<Lists>>> {
        let mut g = self.service.lock().unwrap_or_else(|p| p.into_inner());
        if g.is_none() {
            *g = Some(Lists::open(&self.api, self.context, self.device)?.0);
        }
        Ok(g)
    }

    /// Copy `len` bytes on the service lane (never waits for a kernel of this PE's own thread to finish).
    ///
    /// # Safety
    /// `dst` and `src` must each be valid for `len` bytes (device memory of this context, or host memory).
    #[cfg_attr(not(xpushmem_fabric), allow(dead_code))] // used by the fabric transport
    pub(crate) unsafe fn service_copy(
        &self,
        dst: *mut u8,
        src: *const u8,
        len: usize,
    ) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let g = self.service_lists()?;
        let l = g
            .as_ref()
            .map(|l| l.copy)
            .expect("created by service_lists");
        // SAFETY: the caller guarantees both ranges; the list is synchronous, so the copy is complete on return.
        check("zeCommandListAppendMemoryCopy", unsafe {
            (self.api.zeCommandListAppendMemoryCopy)(
                l,
                dst.cast(),
                src.cast(),
                len,
                ze::ze_event_handle_t::null(),
                0,
                std::ptr::null_mut(),
            )
        })
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

    /// Allocate `len` bytes of host memory that kernels of this context can read and write (`zeMemAllocHost`).
    #[cfg_attr(not(xpushmem_fabric), allow(dead_code))] // used by the fabric transport
    pub(crate) fn alloc_host(self: &Arc<Self>, len: usize) -> Result<HostAlloc> {
        let desc = ze::ze_host_mem_alloc_desc_t::default();
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid context, descriptor and out-pointer.
        check("zeMemAllocHost", unsafe {
            (self.api.zeMemAllocHost)(self.context, &desc, len, 4096, &mut p)
        })?;
        // SAFETY: a fresh allocation of `len` bytes; zeroed before anyone else sees it.
        unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0, len) };
        Ok(HostAlloc {
            rt: self.clone(),
            ptr: p.cast(),
            len,
        })
    }

    /// Index of the device among the loader's devices (what `FI_HMEM_ZE` registrations name; 0 for adopted
    /// handles).
    #[cfg_attr(not(xpushmem_fabric), allow(dead_code))] // used by the fabric transport
    pub(crate) fn device_index(&self) -> usize {
        self.index
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

impl Drop for ZeRuntime {
    fn drop(&mut self) {
        // SAFETY: every handle below was created by this runtime and is destroyed once; windows hold an Arc, so
        // none is alive any more.
        unsafe {
            if let Some(k) = self.amo.get_mut().ok().and_then(|a| a.take()) {
                let _ = (self.api.zeMemFree)(self.context, k.result.cast());
                let _ = k.module;
            }
            // Every kernel (the runtime's atomics included) before the modules it belongs to.
            for k in self
                .kernels
                .get_mut()
                .map(std::mem::take)
                .unwrap_or_default()
            {
                let _ = (self.api.zeKernelDestroy)(k);
            }
            for m in self
                .modules
                .get_mut()
                .map(std::mem::take)
                .unwrap_or_default()
            {
                let _ = (self.api.zeModuleDestroy)(m);
            }
            if let Some(l) = self.service.get_mut().ok().and_then(|l| l.take()) {
                let _ = (self.api.zeCommandListDestroy)(l.copy);
                let _ = (self.api.zeCommandListDestroy)(l.compute);
            }
            if let Ok(l) = self.lists.get_mut() {
                if let Some(a) = l.compute_async {
                    let _ = (self.api.zeCommandListDestroy)(a);
                }
                let _ = (self.api.zeCommandListDestroy)(l.copy);
                if l.compute != l.copy {
                    let _ = (self.api.zeCommandListDestroy)(l.compute);
                }
            }
            if self.owns_context {
                let _ = (self.api.zeContextDestroy)(self.context);
            }
        }
    }
}

/// A device operation in flight; signalled when it has completed.
#[derive(Debug)]
pub struct ZeEvent {
    rt: Arc<ZeRuntime>,
    pool: ze::ze_event_pool_handle_t,
    event: ze::ze_event_handle_t,
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

/// Host memory of a Level Zero context that kernels can access (`zeMemAllocHost`), freed on drop.
#[derive(Debug)]
#[cfg_attr(not(xpushmem_fabric), allow(dead_code))] // used by the fabric transport
pub(crate) struct HostAlloc {
    rt: Arc<ZeRuntime>,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: an address range owned by this value plus a thread-safe runtime; users access it with atomics.
unsafe impl Send for HostAlloc {}
// SAFETY: as above.
unsafe impl Sync for HostAlloc {}

#[cfg_attr(not(xpushmem_fabric), allow(dead_code))] // used by the fabric transport
impl HostAlloc {
    /// The first byte (a host address, also valid in kernels of the context).
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr
    }
    /// Bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for HostAlloc {
    fn drop(&mut self) {
        // SAFETY: our allocation, freed once.
        unsafe {
            let _ = (self.rt.api.zeMemFree)(self.rt.context, self.ptr.cast());
        }
    }
}

/// A device heap allocation (the `Window` of the transport layer, `transport/ze.rs`) onto a device heap: our own allocation or a peer's, opened through IPC.
#[derive(Debug)]
pub struct DeviceWindow {
    pub(crate) rt: Arc<ZeRuntime>,
    pub(crate) base: *mut u8,
    pub(crate) len: usize,
    /// Bytes of our own allocation past `len` (0 for a peer's heap opened through IPC).
    pub(crate) tail: usize,
    pub(crate) imported: bool,
}

// SAFETY: the window is an address range plus a reference to a thread-safe runtime; all device work goes through
// the runtime's locked command lists.
unsafe impl Send for DeviceWindow {}
// SAFETY: as above.
unsafe impl Sync for DeviceWindow {}

impl Drop for DeviceWindow {
    fn drop(&mut self) {
        // SAFETY: base is our allocation (or our opening of a peer's) and is released once, here.
        unsafe {
            if self.imported {
                let _ = (self.rt.api.zeMemCloseIpcHandle)(self.rt.context, self.base.cast());
            } else {
                let _ = (self.rt.api.zeMemFree)(self.rt.context, self.base.cast());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn failed_call_keeps_its_result() {
        assert!(check("zeInit", ze::ZE_RESULT_SUCCESS).is_ok());
        let e = check("zeKernelCreate", ze::ZE_RESULT_ERROR_INVALID_KERNEL_NAME).unwrap_err();
        let e = context(e, format_args!("kernel {:?}", "k"));
        assert_eq!(e.ze_result(), Some(ze::ZE_RESULT_ERROR_INVALID_KERNEL_NAME));
        assert!(
            matches!(&e, Error::Ze { call, result: ze::ZE_RESULT_ERROR_INVALID_KERNEL_NAME, .. } if call == "zeKernelCreate"),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "device: zeKernelCreate failed: ZE_RESULT_ERROR_INVALID_KERNEL_NAME (kernel \"k\")"
        );
        assert_eq!(e.code(), ErrorCode::Device);
        // A code the bindings do not name is kept and shown in hex.
        let e = check("zeInit", ze::ze_result_t(0x7000_1234)).unwrap_err();
        assert_eq!(e.ze_result(), Some(ze::ze_result_t(0x7000_1234)));
        assert_eq!(e.to_string(), "device: zeInit failed: 0x70001234");
        // Context is added only to Level Zero failures.
        assert_eq!(
            context(Error::State("s".into()), "x"),
            Error::State("s".into())
        );
    }
}
