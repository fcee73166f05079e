//! Command lists and the one launch path: the runtime's synchronous copy and compute lists, its asynchronous
//! compute list, the service lane, and [`ZeRuntime::append_kernel`], through which every kernel launch goes.

use super::{check, context, ZeEvent, ZeRuntime};
use crate::error::Result;
use level_zero_sys as ze;
use std::sync::Arc;

/// Which engine of the compute group a set of [`Lists`] uses.
#[derive(Debug, Clone, Copy)]
pub(super) enum Engine {
    /// Queue index 0: the PE's own lists.
    First,
    /// The group's last queue index: the service lane.
    Last,
}

#[derive(Debug)]
pub(crate) struct Lists {
    pub(crate) copy: ze::ze_command_list_handle_t,
    pub(super) compute: ze::ze_command_list_handle_t,
    /// Asynchronous compute list for launches that return an event (created on first use).
    pub(super) compute_async: Option<ze::ze_command_list_handle_t>,
    pub(super) compute_ordinal: u32,
}

/// An immediate command list on engine `index` of queue group `ordinal` of `device`, in `context`, in `mode`.
pub(crate) fn immediate_list(
    api: &ze::ZeApi,
    context: ze::ze_context_handle_t,
    device: ze::ze_device_handle_t,
    ordinal: u32,
    index: u32,
    mode: ze::ze_command_queue_mode_t,
) -> Result<ze::ze_command_list_handle_t> {
    let desc = ze::ze_command_queue_desc_t {
        ordinal,
        index,
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
    /// compute list; whether the copy list is on a copy engine. `engine`: which of the compute group's engines
    /// (queue indices) the compute list uses: [`Engine::First`] for the PE's own lists, [`Engine::Last`] for the
    /// service lane, so that its kernels (host-initiated atomics a peer asked for) start while a kernel of this PE
    /// occupies the first engine (on a device with one compute engine, both are index 0).
    pub(super) fn open(
        api: &ze::ZeApi,
        context: ze::ze_context_handle_t,
        device: ze::ze_device_handle_t,
        engine: Engine,
    ) -> Result<(Lists, bool)> {
        let groups = ZeRuntime::queue_groups(api, device)?;
        let (copy_ordinal, compute_ordinal) = (groups.copy, groups.compute);
        let index = match engine {
            Engine::First => 0,
            Engine::Last => groups.compute_engines.saturating_sub(1),
        };
        let sync = ze::ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS;
        let copy = immediate_list(
            api,
            context,
            device,
            copy_ordinal.unwrap_or(compute_ordinal),
            0,
            sync,
        )?;
        let compute = match immediate_list(api, context, device, compute_ordinal, index, sync) {
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

/// Where [`ZeRuntime::append_kernel`] appends a kernel launch.
#[derive(Debug, Clone, Copy)]
pub(crate) enum LaunchOn<'e> {
    /// The runtime's synchronous compute list: the kernel has finished on return.
    Sync,
    /// The runtime's asynchronous compute list; the event is signalled when the kernel has finished.
    Async(ze::ze_event_handle_t),
    /// The service lane's synchronous compute list (see `ZeRuntime::service`).
    Service,
    /// A caller's list (a framework's stream), after a barrier on everything appended to it before; the launch
    /// waits for the events of `waits` and signals `signal` (null: none) when the kernel has finished.
    Caller {
        /// The caller's list.
        list: ze::ze_command_list_handle_t,
        /// Events the launch waits for.
        waits: &'e [ze::ze_event_handle_t],
        /// Event the launch signals (null: none).
        signal: ze::ze_event_handle_t,
    },
}

/// Whether a copy of `len` bytes from `src` to `dst` changes nothing: it is empty, or a range copied onto itself
/// (a PE putting its own buffer to itself, a 1-PE broadcast's root). Level Zero refuses the latter as overlapping
/// regions (`ZE_RESULT_ERROR_OVERLAPPING_REGIONS`), so it never reaches the driver.
fn is_noop_copy(dst: *mut u8, src: *const u8, len: usize) -> bool {
    len == 0 || std::ptr::eq(dst.cast_const(), src)
}

impl ZeRuntime {
    /// Copy `len` bytes; both ranges were validated by the caller against live allocations or Rust slices.
    ///
    /// # Safety
    /// `dst` and `src` must each be valid for `len` bytes (device memory of this context, or host memory).
    pub(crate) unsafe fn copy(&self, dst: *mut u8, src: *const u8, len: usize) -> Result<()> {
        if is_noop_copy(dst, src, len) {
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
        let (pool, event) = self.host_event()?;
        let ev = ZeEvent {
            rt: self.clone(),
            pool,
            event,
        };
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
    /// through (`Device::launch`, `launch_async`, `enqueue` and the op kernels' `OpsModule::enqueue` over it, the
    /// runtime's atomics). Lock order: the kernel's, then the lists'.
    ///
    /// # Safety
    /// As for [`ZeRuntime::launch`]; an event of `on` is a live event of this context, and a caller's list is a
    /// live command list of this context whose appends the caller serialises.
    pub(crate) unsafe fn append_kernel(
        &self,
        on: LaunchOn<'_>,
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
        let (signal, barrier, waits): (_, _, &[ze::ze_event_handle_t]) = match on {
            LaunchOn::Async(e) => (Some(e), false, &[]),
            LaunchOn::Caller { waits, signal, .. } => {
                (Some(signal).filter(|e| !e.is_null()), true, waits)
            }
            LaunchOn::Sync | LaunchOn::Service => (None, false, &[]),
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
                    (signal, waits),
                    cooperative,
                    barrier,
                )
            }
        };
        match on {
            LaunchOn::Caller { list, .. } => append(list),
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
                            0,
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
    /// appended before it when `barrier` (regular lists do not order kernels by themselves); the launch signals
    /// `events.0` and waits for `events.1`. Called only by
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
        events: (Option<ze::ze_event_handle_t>, &[ze::ze_event_handle_t]),
        cooperative: bool,
        barrier: bool,
    ) -> Result<()> {
        let (signal, waits) = events;
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
        let mut waits = waits.to_vec();
        let wait_ptr = if waits.is_empty() {
            std::ptr::null_mut()
        } else {
            waits.as_mut_ptr()
        };
        // SAFETY: live list and kernel; the events are live or reported by the driver (a caller's events: the
        // caller's contract); the wait list is a live vector of `waits.len()` handles; a synchronous list has
        // finished the kernel on return.
        check(name, unsafe {
            append(
                list,
                kernel,
                &count,
                signal.unwrap_or(ze::ze_event_handle_t::null()),
                waits.len() as u32,
                wait_ptr,
            )
        })
    }

    /// The service lane's lists (created on first use); see `ZeRuntime::service`.
    fn service_lists(&self) -> Result<std::sync::MutexGuard<'_, Option<Lists>>> {
        let mut g = self.service.lock().unwrap_or_else(|p| p.into_inner());
        if g.is_none() {
            *g = Some(Lists::open(&self.api, self.context, self.device, Engine::Last)?.0);
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
        if is_noop_copy(dst, src, len) {
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
}
