//! The Level Zero hardware layer: the only code of the runtime that calls `level_zero_sys`.
//!
//! [`ZeRuntime`] (this file) owns (or adopts) a driver, device and context. By role:
//! - [`list`]: its two synchronous immediate command lists (one on a copy engine when the device has one, one on
//!   a compute engine), the asynchronous compute list, the service lane, raw copies, and the one launch path
//!   [`ZeRuntime::append_kernel`], under the kernel's argument lock;
//! - [`queue`]: command lists a caller owns ([`CommandList`]) and queues the runtime owns ([`Queue`]), for work
//!   enqueued without waiting;
//! - [`module`]: modules, kernels, module globals and the device-library state of a module ([`StateGlobal`]);
//! - [`amo`]: the runtime's own atomic kernels;
//! - [`event`]: [`ZeEvent`], a launch in flight;
//! - [`ipc`]: device heap allocations ([`DeviceWindow`]: our own, or a peer's opened through IPC), whose bounded
//!   copies and fills the transport layer makes a `Window`;
//! - [`hostmem`]: host memory kernels can use ([`HostAlloc`], [`HostBuf`]).

mod amo;
mod event;
mod hostmem;
mod ipc;
mod list;
mod module;
mod queue;

use amo::AmoKernels;
pub use amo::RUNTIME_KERNELS_SPIRV;
pub use event::ZeEvent;
#[cfg_attr(not(xpushmem_fabric), allow(unused_imports))] // used by the fabric transport
pub(crate) use hostmem::HostAlloc;
pub use hostmem::HostBuf;
pub use ipc::DeviceWindow;
pub(crate) use list::{immediate_list, LaunchOn, Lists};
pub(crate) use module::{StateGlobal, StateLookup, ZeKernel, ZeModule};
pub use queue::{CommandList, Queue, QueueEvents};

use crate::error::{Error, Result};
use level_zero_sys as ze;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

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
    /// A host-signalled event of the runtime's context (pool, event; created on first use): the probe that tells a
    /// caller's list of another context from a bad event when an append to it fails (`queue.rs`).
    probe: Mutex<Option<(ze::ze_event_pool_handle_t, ze::ze_event_handle_t)>>,
    /// The live device heap allocations (this PE's heap, peers' heaps opened through IPC, and each team-scoped
    /// allocation's chunk mapped in either): raw copies between windows and writes into the heap's tail are checked
    /// against them, under this lock.
    allocs: Mutex<Vec<ipc::Alloc>>,
    /// Index of the device among the loader's devices (0 for adopted handles).
    #[cfg_attr(not(xpushmem_fabric), allow(dead_code))] // used by the fabric transport
    index: usize,
    /// The device's UUID (`ze_device_properties_t::uuid`): how node peers name it ([`ZeRuntime::peer_access`]).
    uuid: [u8; 16],
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
    /// The loaded Level Zero function table.
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
        let mut uuid = [0u8; 16];
        for (d, s) in uuid.iter_mut().zip(props.uuid.id.iter()) {
            *d = *s;
        }
        let (lists, copy_engine) = Lists::open(&api, context, device, list::Engine::First)?;
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
            probe: Mutex::new(None),
            allocs: Mutex::new(Vec::new()),
            index,
            uuid,
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
    fn queue_groups(api: &ze::ZeApi, device: ze::ze_device_handle_t) -> Result<QueueGroups> {
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
        Ok(QueueGroups {
            copy: copy.map(|c| c as u32),
            compute: compute as u32,
            compute_engines: v[compute].numQueues.max(1),
        })
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

    /// Index of the device among the loader's devices (what `FI_HMEM_ZE` registrations name; 0 for adopted
    /// handles).
    #[cfg_attr(not(xpushmem_fabric), allow(dead_code))] // used by the fabric transport
    pub(crate) fn device_index(&self) -> usize {
        self.index
    }

    /// Whether `[addr, addr + len)` touches device memory of this runtime's context (`zeMemGetAllocProperties`
    /// of its first and last byte: `ZE_MEMORY_TYPE_DEVICE`); host, shared and unknown memory are not.
    pub(crate) fn is_device_memory(&self, addr: usize, len: usize) -> bool {
        [addr, addr.saturating_add(len.max(1) - 1)]
            .iter()
            .any(|&a| {
                let mut props = ze::ze_memory_allocation_properties_t::default();
                // SAFETY: the context is live; the pointer is only looked up by the driver, never dereferenced; props
                // is a properties struct with the right stype, and a null device out-pointer is allowed.
                let r = unsafe {
                    (self.api.zeMemGetAllocProperties)(
                        self.context,
                        a as *const std::ffi::c_void,
                        &mut props,
                        std::ptr::null_mut(),
                    )
                };
                check("zeMemGetAllocProperties", r).is_ok()
                    && props.type_ == ze::ZE_MEMORY_TYPE_DEVICE
            })
    }

    /// The device's UUID, which names it to node peers.
    pub(crate) fn uuid(&self) -> [u8; 16] {
        self.uuid
    }

    /// What this device may do on the memory of the device whose UUID is `uuid` (a node peer's), as Level Zero
    /// reports it: `zeDeviceCanAccessPeer` and `zeDeviceGetP2PProperties` (`ZE_DEVICE_P2P_PROPERTY_FLAG_ACCESS`,
    /// `_ATOMICS`); the device itself: everything. An error when no device of this driver has that UUID.
    pub(crate) fn peer_access(&self, uuid: &[u8; 16]) -> Result<PeerAccess> {
        if *uuid == self.uuid {
            return Ok(PeerAccess {
                access: true,
                atomics: true,
            });
        }
        let mut peer = None;
        for d in Self::devices(&self.api, self.driver)? {
            let mut props = ze::ze_device_properties_t::default();
            // SAFETY: `d` is a device of this runtime's driver; props is a properties struct with the right stype.
            check("zeDeviceGetProperties", unsafe {
                (self.api.zeDeviceGetProperties)(d, &mut props)
            })?;
            if props.uuid.id.iter().zip(uuid).all(|(a, b)| *a == *b) {
                peer = Some(d);
                break;
            }
        }
        let peer = peer.ok_or_else(|| {
            Error::Device(format!(
                "a node peer's device (UUID {}) is not a device of this PE's Level Zero driver",
                uuid_text(uuid)
            ))
        })?;
        let mut can: ze::ze_bool_t = 0;
        // SAFETY: both handles are devices of this driver; `can` is a valid out-pointer.
        check("zeDeviceCanAccessPeer", unsafe {
            (self.api.zeDeviceCanAccessPeer)(self.device, peer, &mut can)
        })?;
        let mut p2p = ze::ze_device_p2p_properties_t::default();
        // SAFETY: as above; p2p is a properties struct with the right stype.
        check("zeDeviceGetP2PProperties", unsafe {
            (self.api.zeDeviceGetP2PProperties)(self.device, peer, &mut p2p)
        })?;
        let access = can != 0 && p2p.flags & ze::ZE_DEVICE_P2P_PROPERTY_FLAG_ACCESS != 0;
        Ok(PeerAccess {
            access,
            atomics: access && p2p.flags & ze::ZE_DEVICE_P2P_PROPERTY_FLAG_ATOMICS != 0,
        })
    }
}

/// What a device may do on a peer device's memory ([`ZeRuntime::peer_access`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAccess {
    /// Loads and stores (`zeDeviceCanAccessPeer` and `ZE_DEVICE_P2P_PROPERTY_FLAG_ACCESS`).
    pub access: bool,
    /// Atomics (`ZE_DEVICE_P2P_PROPERTY_FLAG_ATOMICS`).
    pub atomics: bool,
}

/// A UUID as hex.
pub(crate) fn uuid_text(u: &[u8; 16]) -> String {
    u.iter().map(|b| format!("{b:02x}")).collect()
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
            if let Some((pool, event)) = self.probe.get_mut().ok().and_then(|p| p.take()) {
                let _ = (self.api.zeEventDestroy)(event);
                let _ = (self.api.zeEventPoolDestroy)(pool);
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

/// The device's command queue groups, as [`ZeRuntime::queue_groups`] finds them.
#[derive(Debug, Clone, Copy)]
pub(super) struct QueueGroups {
    /// A copy-only group's ordinal (a copy engine), if the device has one.
    pub(super) copy: Option<u32>,
    /// The compute group's ordinal.
    pub(super) compute: u32,
    /// How many engines (queue indices) the compute group has.
    pub(super) compute_engines: u32,
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
