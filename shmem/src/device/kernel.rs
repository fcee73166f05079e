//! The device facade's modules, kernels and launches: the methods of [`Device`] that build modules, fill a
//! module's device-library state, launch kernels and write this PE's device team table. Each forwards to the
//! Level Zero layer (`hal/ze`) after validating its arguments; the launches are `unsafe fn`s whose contract (the
//! kernel is arbitrary device code) the caller takes on.

use super::{waiting_kernels, Device, DeviceEvent, Kernel, KernelArg, Module};
use crate::abi::{self, DeviceState, DeviceTeam};
use crate::error::{Error, Result};
use crate::hal::ze::StateLookup;

impl<'a> Device<'a> {
    /// Build a module from SPIR-V (the build log is part of the error). A module linked with the device library
    /// must be initialised with [`Device::init_module`] before its kernels call it; errors its device calls
    /// record (a call before initialisation included) are reported by the launch that ran them.
    pub fn load_module(&self, spirv: &[u8]) -> Result<Module> {
        let handle = self.rt.load(spirv, "user module")?;
        let state = match self.rt.state_of(handle)? {
            StateLookup::Found(s) => Some(s),
            StateLookup::Missing | StateLookup::Size(_) => None,
        };
        Ok(Module {
            handle,
            waiting: waiting_kernels(spirv),
            state,
        })
    }

    /// A kernel of `module` by name.
    pub fn kernel(&self, module: &Module, name: &str) -> Result<Kernel> {
        Ok(Kernel {
            handle: self.rt.kernel_of(module.handle, name)?,
            name: name.to_string(),
            state: module.state,
            waits: module.waiting.contains(name),
        })
    }

    /// How many work-groups of `kernel` can be resident on the device at once
    /// (`zeKernelSuggestMaxCooperativeGroupCount`): the most a launch of a kernel that waits may use.
    pub fn max_resident_groups(&self, kernel: &Kernel) -> Result<u32> {
        self.rt.max_groups(kernel.handle)
    }

    /// [`Device::max_resident_groups`] for a kernel created by the caller (C: `xpushmemx_ze_check_cooperative`).
    ///
    /// # Safety
    /// `kernel` must be a live `ze_kernel_handle_t` of this device's context.
    pub unsafe fn max_resident_groups_raw(&self, kernel: *mut std::ffi::c_void) -> Result<u32> {
        // SAFETY: the caller's contract.
        unsafe { self.rt.max_groups_raw(kernel) }
    }

    /// For a kernel that waits (NVSHMEM's rule: its work-groups may wait on each other, so all must be resident):
    /// an error naming `groups` when the launch has more work-groups than can be resident.
    fn check_resident(&self, kernel: &Kernel, groups: [u32; 3]) -> Result<bool> {
        if !kernel.waits {
            return Ok(false);
        }
        let total = groups.iter().map(|&g| u64::from(g)).product::<u64>();
        let max = self.max_resident_groups(kernel)?;
        if total > u64::from(max) {
            return Err(Error::invalid(
                "groups",
                format!("{groups:?} ({total} work-groups)"),
                format!(
                    "kernel {} calls device waits or barriers, so all its work-groups must be resident at once; \
                     this device holds at most {max} (zeKernelSuggestMaxCooperativeGroupCount): use fewer, larger \
                     work-groups",
                    kernel.name
                ),
            ));
        }
        Ok(true)
    }

    /// Fill the device-library state of `module` (NVSHMEM's `nvshmemx_cumodule_init`): this PE, the PE count,
    /// every PE's heap base, the teams and the wait bound. An error if the module was not linked with the device
    /// library (it has no `xpushmem_device_state` global) or with a library of another ABI.
    pub fn init_module(&self, module: &Module) -> Result<()> {
        let found = self.rt.state_of(module.handle)?;
        self.write_state(found).map(drop)
    }

    /// [`Device::init_module`] for a module created by the caller (C: `xpushmemx_ze_module_init`); returns the
    /// state's device address.
    ///
    /// # Safety
    /// `module` must be a live module of this device's context, and no kernel of it may be running.
    pub unsafe fn init_raw_module(&self, module: *mut std::ffi::c_void) -> Result<*mut u8> {
        // SAFETY: the caller's contract.
        let found = unsafe { self.rt.state_global_raw(module)? };
        self.write_state(found)
    }

    /// Write this PE's device state into a module's, found as `found`; its device address.
    fn write_state(&self, found: StateLookup) -> Result<*mut u8> {
        let name = abi::XPUSHMEM_DEVICE_STATE_SYMBOL;
        match found {
            StateLookup::Found(state) => self.rt.write_state(state, &self.device_state()),
            StateLookup::Missing => Err(Error::Device(format!(
                "the module has no global {name:?}: link it with the xpushmem device library \
                 (libxpushmem_device-{}.bc) before initialising it",
                crate::VERSION
            ))),
            StateLookup::Size(size) => Err(Error::Device(format!(
                "the module's {name:?} has {size} bytes, this runtime's DeviceState {} (a device library of \
                 another version, ABI {})",
                std::mem::size_of::<DeviceState>(),
                abi::XPUSHMEM_DEVICE_ABI_VERSION
            ))),
        }
    }

    /// Run `kernel` with `groups` work-groups of `group_size` work-items; returns when it has finished. Heap
    /// arguments are validated (PE, range) and resolved to this device's address of that PE's buffer. For a
    /// module initialised with [`Device::init_module`], an error a device call recorded is returned (a wait that
    /// gave up as [`Error::Timeout`], or as [`Error::PeerLost`] when a PE of the job has died meanwhile) and
    /// cleared.
    ///
    /// A kernel that calls device waits or barriers ([`Kernel::waits`]) is launched cooperatively, and a launch of
    /// it with more work-groups than can be resident ([`Device::max_resident_groups`]) is refused with
    /// `Error::InvalidArgument` naming `groups` (NVSHMEM's rule for kernels that synchronise).
    ///
    /// # Safety
    /// The kernel is arbitrary device code: it must access only memory that is valid while it runs (the heap
    /// ranges passed as [`KernelArg::Heap`], within their extents, and memory it owns), and its parameters must
    /// match `args` in number and size.
    pub unsafe fn launch(
        &self,
        kernel: &Kernel,
        args: &[KernelArg],
        groups: [u32; 3],
        group_size: [u32; 3],
    ) -> Result<()> {
        let raw = self.raw_args(kernel, args, groups, group_size)?;
        if self.check_resident(kernel, groups)? {
            // SAFETY: the caller's contract; the kernel was created by this runtime.
            unsafe {
                self.rt
                    .launch_cooperative(kernel.handle.raw(), &raw, groups, group_size, false)?
            };
        } else {
            // SAFETY: the caller's contract; the kernel was created by this runtime.
            unsafe {
                self.rt
                    .launch(kernel.handle.raw(), &raw, groups, group_size)?
            };
        }
        self.take_device_error(kernel.state, &kernel.name)
    }

    /// Start `kernel` and return at once; the returned event completes when it has finished. Kernels started
    /// this way run in order with each other.
    ///
    /// # Safety
    /// As for [`Device::launch`], for as long as the kernel runs (dropping the event waits for it).
    pub unsafe fn launch_async(
        &self,
        kernel: &Kernel,
        args: &[KernelArg],
        groups: [u32; 3],
        group_size: [u32; 3],
    ) -> Result<DeviceEvent<'a>> {
        let raw = self.raw_args(kernel, args, groups, group_size)?;
        let ev = if self.check_resident(kernel, groups)? {
            // SAFETY: the caller's contract; the kernel was created by this runtime.
            unsafe {
                self.rt
                    .launch_cooperative(kernel.handle.raw(), &raw, groups, group_size, true)?
            }
            .ok_or_else(|| Error::Device("cooperative launch returned no event".into()))?
        } else {
            // SAFETY: the caller's contract; the kernel was created by this runtime.
            unsafe {
                self.rt
                    .launch_async(kernel.handle.raw(), &raw, groups, group_size)?
            }
        };
        Ok(DeviceEvent {
            dev: *self,
            ev,
            state: kernel.state,
            kernel: kernel.name.clone(),
        })
    }
}

impl Device<'_> {
    /// Write this PE's device team table entry of team slot `slot` (what `xpushmem_team_*` calls in kernels see
    /// for team number `slot`); with `reset`, also zero this PE's device barrier counters of the slot (a new team
    /// took it: no member reaches them before the team's creation has ended with a barrier).
    pub(crate) fn set_team_entry(&self, slot: usize, entry: DeviceTeam, reset: bool) -> Result<()> {
        let l = self.scratch_layout();
        let slots = self.sh.config().device_team_slots();
        if slot >= slots {
            return Err(Error::invalid(
                "team slot",
                slot,
                format!("the device team table has {slots} entries (XPUSHMEM_TEAMS_MAX)"),
            ));
        }
        let bytes = [entry.start, entry.stride, entry.size, entry.my_pe]
            .map(i32::to_ne_bytes)
            .concat();
        self.rt
            .write_heap_tail(l.teams + slot * std::mem::size_of::<DeviceTeam>(), &bytes)?;
        if reset {
            for off in [l.arrive, l.epoch] {
                self.rt.write_heap_tail(off + 8 * slot, &[0u8; 8])?;
            }
        }
        Ok(())
    }
}
