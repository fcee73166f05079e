//! The emulated driver's objects: the driver, its devices, contexts and the allocations a context owns, the
//! physical memory objects and a context's virtual memory, with the registries that turn handles back into
//! objects. The API entry points live in [`crate::driver`], [`crate::memory`], [`crate::vmem`], [`crate::module`]
//! and [`crate::exec`], all above this file.

use crate::registry::Registry;
use crate::util::ZeResult;
use level_zero_sys::*;
use once_cell::sync::{Lazy, OnceCell};
use rustix::fd::OwnedFd;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

/// Environment variable giving the number of emulated devices (default 1).
pub const DEVICES_ENV: &str = "XPUSHMEM_EMU_DEVICES";
/// Environment variable giving the peer-to-peer topology the devices report (default: every pair has access with
/// atomics): a comma-separated list of `MODE` (every pair of distinct devices) or `A-B:MODE` (devices `A` and `B`,
/// both directions), later items overriding earlier ones, where `MODE` is `full` (access with atomics), `access`
/// (access without atomics) or `none` (no access). `zeDeviceCanAccessPeer` and `zeDeviceGetP2PProperties` report
/// it; memory is reachable whatever they say (the emulator does not fault), so a runtime that trusted a store to
/// a peer it was told it cannot reach would go unnoticed without checks of its own. Read once per process.
pub const P2P_ENV: &str = "XPUSHMEM_EMU_P2P";
/// Environment variable capping the bytes of physical memory (`zePhysicalMemCreate`, imports not counted) a
/// process may hold at once on a device: past it, creation fails with `ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY`, as a
/// full device would. A decimal byte count for every device, or a comma-separated list of them by device index
/// (devices past its end have no cap); unset: no cap. Read once per process.
pub const MEMORY_ENV: &str = "XPUSHMEM_EMU_MEMORY";
/// Upper bound on emulated devices.
pub const MAX_DEVICES: usize = 64;
/// Largest single allocation reported (without the relaxed-limits extension).
pub const MAX_ALLOC: u64 = 4 << 30;
/// Device memory size reported.
pub const MEMORY_SIZE: u64 = 16 << 30;
/// Group limits reported and enforced.
pub const MAX_GROUP_SIZE: u32 = 1024;
/// Command queue groups: (flags, max fill pattern size, number of queues).
pub const QUEUE_GROUPS: [(u32, usize, u32); 2] = [
    (
        ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE | ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY,
        128,
        4,
    ),
    (ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY, 4, 1),
];

/// The driver singleton (its address is the driver handle).
pub struct Driver {
    /// Devices, created by `zeInit`.
    pub devices: OnceCell<Vec<Arc<Device>>>,
}

/// One emulated device.
pub struct Device {
    /// Index (0-based).
    pub index: u32,
}

/// A context: owns the allocations made through it.
pub struct Context {
    /// Allocations (and IPC mappings) by base address.
    pub allocs: Mutex<BTreeMap<usize, Allocation>>,
    /// Virtual memory reservations and the physical memory mapped into them.
    pub vm: Mutex<Vm>,
}

/// The driver.
pub static DRIVER: Driver = Driver {
    devices: OnceCell::new(),
};
/// Live devices.
pub static DEVICES: Lazy<Registry<Device>> = Lazy::new(Registry::default);
/// Live contexts.
pub static CONTEXTS: Lazy<Registry<Context>> = Lazy::new(Registry::default);

pub(crate) fn driver_handle() -> ze_driver_handle_t {
    ze_driver_handle_t(&DRIVER as *const Driver as *mut c_void)
}

/// Checks a driver handle.
pub fn check_driver(h: ze_driver_handle_t) -> ZeResult<&'static [Arc<Device>]> {
    if h.is_null() {
        return Err(ZE_RESULT_ERROR_INVALID_NULL_HANDLE);
    }
    if h != driver_handle() {
        return Err(ZE_RESULT_ERROR_INVALID_ARGUMENT);
    }
    DRIVER
        .devices
        .get()
        .map(|v| v.as_slice())
        .ok_or(ZE_RESULT_ERROR_UNINITIALIZED)
}

/// Resolves a device handle.
pub fn device(h: ze_device_handle_t) -> ZeResult<Arc<Device>> {
    DEVICES.get(h.0)
}

/// Resolves a context handle.
pub fn context(h: ze_context_handle_t) -> ZeResult<Arc<Context>> {
    CONTEXTS.get(h.0)
}

/// Handle of a device object.
pub fn device_handle(d: &Arc<Device>) -> ze_device_handle_t {
    ze_device_handle_t(Arc::as_ptr(d) as *mut c_void)
}

/// One mapping known to a context.
pub struct Allocation {
    /// Mapping address.
    pub base: usize,
    /// Requested size.
    pub size: usize,
    /// Mapping length (page multiple).
    pub map_len: usize,
    /// Memory type.
    pub kind: ze_memory_type_t,
    /// Owning device (device / shared allocations and IPC mappings).
    pub device: Option<Arc<Device>>,
    /// The memfd (None for IPC mappings: the importer owns its fd).
    pub memfd: Option<OwnedFd>,
    /// Driver-owned duplicate handed out in IPC handles (created on first `zeMemGetIpcHandle`).
    pub export_fd: Option<OwnedFd>,
    /// Opened with `zeMemOpenIpcHandle` (released with `zeMemCloseIpcHandle`, not `zeMemFree`).
    pub imported: bool,
    /// Unique id.
    pub id: u64,
}

impl Drop for Allocation {
    fn drop(&mut self) {
        // SAFETY: base/map_len describe a mapping this object created and nobody else unmaps.
        let _ = unsafe { rustix::mm::munmap(self.base as *mut c_void, self.map_len) };
    }
}

/// A physical memory object (`zePhysicalMemCreate`, see `vmem`).
pub struct Physical {
    /// Its pages.
    pub memfd: OwnedFd,
    /// Bytes.
    pub size: usize,
    /// Bytes it counts against `XPUSHMEM_EMU_MEMORY` (0 for an import).
    pub held: usize,
    /// The device it was created on.
    pub device: Arc<Device>,
    /// Created exportable (`ze_external_memory_export_desc_t`).
    pub exportable: bool,
    /// The context it was created in (handle value).
    pub ctx: usize,
    /// Unique id.
    pub id: u64,
}

/// Live physical memory objects.
pub static PHYSICAL: Lazy<Registry<Physical>> = Lazy::new(Registry::default);

/// One mapping of physical memory into a reservation.
pub struct VMap {
    /// Bytes mapped.
    pub len: usize,
    /// What is mapped.
    pub phys: Arc<Physical>,
}

/// A context's reservations and mappings.
#[derive(Default)]
pub struct Vm {
    /// Reservations: base → length.
    pub reserves: BTreeMap<usize, usize>,
    /// Mappings: address → mapping.
    pub maps: BTreeMap<usize, VMap>,
}

impl Vm {
    /// The physical memory mapped at `p`, its mapping's address and length.
    pub fn mapping_at(&self, p: usize) -> Option<(usize, usize, &Arc<Physical>)> {
        let (&a, m) = self.maps.range(..=p).next_back()?;
        (p < a + m.len).then_some((a, m.len, &m.phys))
    }

    /// Whether `[p, p + len)` lies in one reservation.
    pub fn reserved(&self, p: usize, len: usize) -> bool {
        self.reserves
            .range(..=p)
            .next_back()
            .is_some_and(|(&b, &l)| p + len <= b + l)
    }

    /// The mappings that exactly tile `[p, p + len)`, or `None` when a part of it is not mapped or a mapping
    /// sticks out of it.
    pub fn tiling(&self, p: usize, len: usize) -> Option<Vec<usize>> {
        let mut at = p;
        let mut v = Vec::new();
        for (&a, m) in self.maps.range(p..p + len) {
            if a != at || a + m.len > p + len {
                return None;
            }
            v.push(a);
            at = a + m.len;
        }
        (at == p + len).then_some(v)
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        for (&b, &l) in &self.reserves {
            // SAFETY: a reservation this context made and nobody else unmaps.
            let _ = unsafe { rustix::mm::munmap(b as *mut c_void, l) };
        }
    }
}
