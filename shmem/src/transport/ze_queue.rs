//! Level Zero transport leaf, queue half: work enqueued on a command list the caller owns (a framework's stream)
//! without waiting for it, host-visible memory the device writes results into, and the op kernels of
//! `xpushmem-ops` (`ops/device/`), embedded here because launching them is only sound for kernels this library
//! ships. Every `unsafe` block of the queue path lives in this file; `device/queue.rs` is the documented API.

use crate::device::{Device, Kernel, KernelArg, Module};
use crate::error::{Error, Result};
use crate::hal::ze::{immediate_list, LaunchOn, ZeRuntime};
use level_zero_sys as ze;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

/// The op kernels of `xpushmem-ops` (`ops/device/xpushmem_ops.cl`, linked with the device library), prebuilt to
/// SPIR-V by `ops/device/build.sh`.
pub const OPS_KERNELS_SPIRV: &[u8] =
    include_bytes!("../../../ops/device/prebuilt/xpushmem_ops.spv");

fn check(call: &'static str, r: ze::ze_result_t) -> Result<()> {
    r.ok().map_err(|result| Error::Ze {
        call: call.into(),
        result,
        detail: String::new(),
    })
}

/// A Level Zero command list to enqueue on: an immediate list (work starts as it is appended) or a regular one
/// (the owner closes and executes it). Borrowed: the owner keeps it alive and destroys it.
#[derive(Debug, Clone, Copy)]
pub struct CommandList {
    raw: ze::ze_command_list_handle_t,
}

impl CommandList {
    /// Wrap a caller's command list.
    ///
    /// # Safety
    /// `handle` must be a live command list of the runtime's context and device (`xpushmemx_ze_get_handles`), on
    /// a compute engine, and stay alive while work appended through this value may still run.
    pub unsafe fn from_raw(handle: *mut c_void) -> CommandList {
        CommandList {
            raw: ze::ze_command_list_handle_t(handle),
        }
    }

    /// The raw handle.
    pub fn as_raw(&self) -> *mut c_void {
        self.raw.0
    }
}

// SAFETY: a command list handle is an opaque identifier; Level Zero allows appending from any thread (the caller
// serialises appends to one list, as for any list).
unsafe impl Send for CommandList {}
// SAFETY: as above.
unsafe impl Sync for CommandList {}

/// Host memory the device can read and write (`zeMemAllocHost`), zeroed at allocation: op arguments (group PE
/// lists, run lists) and status records.
#[derive(Debug)]
pub struct HostBuf {
    rt: Arc<ZeRuntime>,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the allocation is plain memory owned by this value; access goes through volatile reads and writes.
unsafe impl Send for HostBuf {}
// SAFETY: as above.
unsafe impl Sync for HostBuf {}

impl HostBuf {
    pub(crate) fn new(rt: &Arc<ZeRuntime>, len: usize) -> Result<HostBuf> {
        let len = len.max(8);
        let desc = ze::ze_host_mem_alloc_desc_t::default();
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid context, descriptor and out-pointer.
        check("zeMemAllocHost", unsafe {
            (rt.api().zeMemAllocHost)(rt.handles().context(), &desc, len, 64, &mut p)
        })?;
        // SAFETY: p is a fresh allocation of len bytes.
        unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0, len) };
        Ok(HostBuf {
            rt: rt.clone(),
            ptr: p.cast(),
            len,
        })
    }

    /// Device (and host) address of byte `off`.
    pub fn addr(&self, off: usize) -> u64 {
        self.ptr as u64 + off.min(self.len) as u64
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty (never: at least 8 bytes).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Write `data` at byte `off`.
    pub fn write(&self, off: usize, data: &[u8]) -> Result<()> {
        if off > self.len || data.len() > self.len - off {
            return Err(Error::invalid(
                "off",
                off,
                format!(
                    "{} bytes do not fit a {}-byte host buffer",
                    data.len(),
                    self.len
                ),
            ));
        }
        for (i, &b) in data.iter().enumerate() {
            // SAFETY: off + i < len (checked above); volatile because the device may read concurrently.
            unsafe { std::ptr::write_volatile(self.ptr.add(off + i), b) };
        }
        Ok(())
    }

    /// The `u64` at word `i` (volatile: the device may be writing it).
    pub fn word(&self, i: usize) -> Result<u64> {
        if (i + 1) * 8 > self.len {
            return Err(Error::invalid("word", i, "past the host buffer"));
        }
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        // SAFETY: the word lies inside the allocation (checked), which is 64-byte aligned.
        Ok(unsafe { std::ptr::read_volatile(self.ptr.cast::<u64>().add(i)) })
    }
}

impl Drop for HostBuf {
    fn drop(&mut self) {
        // SAFETY: ours; users of the queue path keep the buffer alive until the work using it has finished (or
        // leak it when that cannot be known).
        unsafe {
            let _ = (self.rt.api().zeMemFree)(self.rt.handles().context(), self.ptr.cast());
        }
    }
}

/// How [`Queue::submit`] waits: given a completion probe, wait until it says done.
pub(crate) type WaitFn<'w> = dyn Fn(&dyn Fn() -> Result<bool>) -> Result<()> + 'w;

/// An in-order queue the runtime owns: an asynchronous immediate command list on the compute engine, or a
/// regular list with its command queue (work runs at [`Queue::submit`]).
#[derive(Debug)]
pub struct Queue {
    rt: Arc<ZeRuntime>,
    list: ze::ze_command_list_handle_t,
    queue: Option<ze::ze_command_queue_handle_t>,
    pool: ze::ze_event_pool_handle_t,
    event: ze::ze_event_handle_t,
    lock: Mutex<()>,
}

// SAFETY: handles are opaque identifiers; appends and submits are serialised by `lock`.
unsafe impl Send for Queue {}
// SAFETY: as above.
unsafe impl Sync for Queue {}

impl Queue {
    pub(crate) fn new(rt: &Arc<ZeRuntime>, immediate: bool) -> Result<Queue> {
        let api = rt.api();
        let h = rt.handles();
        let ordinal = rt.compute_ordinal();
        let mut list = ze::ze_command_list_handle_t::null();
        let mut queue = None;
        if immediate {
            list = immediate_list(
                api,
                h.context(),
                h.device(),
                ordinal,
                ze::ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS,
            )?;
        } else {
            let qdesc = ze::ze_command_queue_desc_t {
                ordinal,
                index: 0,
                mode: ze::ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS,
                ..Default::default()
            };
            let mut q = ze::ze_command_queue_handle_t::null();
            // SAFETY: valid handles, descriptor and out-pointer.
            check("zeCommandQueueCreate", unsafe {
                (api.zeCommandQueueCreate)(h.context(), h.device(), &qdesc, &mut q)
            })?;
            queue = Some(q);
            let ldesc = ze::ze_command_list_desc_t {
                commandQueueGroupOrdinal: ordinal,
                ..Default::default()
            };
            // SAFETY: valid handles, descriptor and out-pointer.
            let r = check("zeCommandListCreate", unsafe {
                (api.zeCommandListCreate)(h.context(), h.device(), &ldesc, &mut list)
            });
            if let Err(e) = r {
                // SAFETY: created above, unused.
                unsafe { (api.zeCommandQueueDestroy)(q) };
                return Err(e);
            }
        }
        let mut q = Queue {
            rt: rt.clone(),
            list,
            queue,
            pool: ze::ze_event_pool_handle_t::null(),
            event: ze::ze_event_handle_t::null(),
            lock: Mutex::new(()),
        };
        let pool_desc = ze::ze_event_pool_desc_t {
            flags: ze::ZE_EVENT_POOL_FLAG_HOST_VISIBLE,
            count: 1,
            ..Default::default()
        };
        let mut dev = h.device();
        // SAFETY: valid context, descriptor, one device handle and out-pointer.
        check("zeEventPoolCreate", unsafe {
            (api.zeEventPoolCreate)(h.context(), &pool_desc, 1, &mut dev, &mut q.pool)
        })?;
        let ev_desc = ze::ze_event_desc_t {
            index: 0,
            signal: ze::ZE_EVENT_SCOPE_FLAG_HOST,
            wait: ze::ZE_EVENT_SCOPE_FLAG_HOST,
            ..Default::default()
        };
        // SAFETY: live pool, descriptor and out-pointer.
        check("zeEventCreate", unsafe {
            (api.zeEventCreate)(q.pool, &ev_desc, &mut q.event)
        })?;
        Ok(q)
    }

    /// The list to enqueue on.
    pub fn list(&self) -> CommandList {
        CommandList { raw: self.list }
    }

    /// Whether the list is immediate.
    pub fn is_immediate(&self) -> bool {
        self.queue.is_none()
    }

    /// Run what was enqueued (a regular list: close, execute, reset after) and wait until it has finished, with
    /// the runtime's timeout and back-off (`wait` polls a completion flag).
    pub(crate) fn submit(&self, wait: &WaitFn<'_>) -> Result<()> {
        let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let api = self.rt.api();
        // SAFETY: the event is ours and not in use (submits are serialised).
        check("zeEventHostReset", unsafe {
            (api.zeEventHostReset)(self.event)
        })?;
        // SAFETY: live list and event; a barrier signalling the event after everything before it.
        check("zeCommandListAppendBarrier", unsafe {
            (api.zeCommandListAppendBarrier)(self.list, self.event, 0, std::ptr::null_mut())
        })?;
        if let Some(q) = self.queue {
            // SAFETY: live list, owned by this queue.
            check("zeCommandListClose", unsafe {
                (api.zeCommandListClose)(self.list)
            })?;
            let mut l = self.list;
            // SAFETY: live queue and one closed list of the same context.
            check("zeCommandQueueExecuteCommandLists", unsafe {
                (api.zeCommandQueueExecuteCommandLists)(q, 1, &mut l, ze::ze_fence_handle_t::null())
            })?;
        }
        let event = self.event;
        let r = wait(&|| {
            // SAFETY: the event is live (owned by self).
            match unsafe { (api.zeEventQueryStatus)(event) } {
                ze::ZE_RESULT_SUCCESS => Ok(true),
                ze::ZE_RESULT_NOT_READY => Ok(false),
                r => check("zeEventQueryStatus", r).map(|()| false),
            }
        });
        if r.is_ok() && self.queue.is_some() {
            // SAFETY: the list has finished executing (its last command signalled the event).
            check("zeCommandListReset", unsafe {
                (api.zeCommandListReset)(self.list)
            })?;
        }
        r
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        let api = self.rt.api();
        // SAFETY: every handle is ours and destroyed once; work still running is waited for (bounded) first.
        unsafe {
            if let Some(q) = self.queue {
                let _ = (api.zeCommandQueueSynchronize)(q, 60_000_000_000);
            } else if !self.event.is_null() {
                let _ = (api.zeEventHostReset)(self.event);
                let _ = (api.zeCommandListAppendBarrier)(
                    self.list,
                    self.event,
                    0,
                    std::ptr::null_mut(),
                );
                let _ = (api.zeEventHostSynchronize)(self.event, 60_000_000_000);
            }
            if !self.event.is_null() {
                let _ = (api.zeEventDestroy)(self.event);
            }
            if !self.pool.is_null() {
                let _ = (api.zeEventPoolDestroy)(self.pool);
            }
            let _ = (api.zeCommandListDestroy)(self.list);
            if let Some(q) = self.queue {
                let _ = (api.zeCommandQueueDestroy)(q);
            }
        }
    }
}

/// One argument of a kernel enqueued on a list: a heap range or scalar ([`KernelArg`]), or an address inside a
/// [`HostBuf`].
#[derive(Debug, Clone, Copy)]
pub enum QueueArg<'b> {
    /// A heap range or a scalar, validated as for [`Device::launch`].
    Kernel(KernelArg),
    /// Byte `off` of a host buffer.
    Host(&'b HostBuf, usize),
    /// Device memory outside the symmetric heap (a framework's tensor).
    Device(DeviceRange),
}

/// Device memory outside the symmetric heap that an op kernel may read and write: an op's local input or output
/// (a framework's tensor, e.g. from torch's caching allocator).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceRange {
    addr: u64,
    bytes: usize,
}

impl DeviceRange {
    /// `bytes` bytes at device address `addr`.
    ///
    /// # Safety
    /// The range must be memory of the runtime's Level Zero context that this PE's device can read and write
    /// (device or shared USM, or host USM), and it must stay allocated, and not be used by anything else that
    /// the op would race with, until every op given this range has finished.
    pub unsafe fn new(addr: u64, bytes: usize) -> DeviceRange {
        DeviceRange { addr, bytes }
    }

    /// The device address.
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// The size in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The `len` bytes at byte `off` of this range (an error when they do not lie inside it).
    pub fn sub(&self, off: usize, len: usize) -> Result<DeviceRange> {
        if off > self.bytes || len > self.bytes - off {
            return Err(Error::invalid(
                "off",
                off,
                format!("{len} bytes do not fit a {}-byte device range", self.bytes),
            ));
        }
        Ok(DeviceRange {
            addr: self.addr + off as u64,
            bytes: len,
        })
    }
}

/// The op kernels of `xpushmem-ops`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKernel {
    /// `xpo_a2av`: all_to_all_vdev, _2d, _2d_offset.
    AllToAllV,
    /// `xpo_a2a`: nvshmem_all_to_all.
    AllToAll,
    /// `xpo_bcast`: nvshmem_broadcast.
    Broadcast,
    /// `xpo_tile`: tile_reduce, multi_root_tile_reduce.
    TileReduce,
    /// `xpo_rma`: nvshmem_put, _get, _put_with_signal, _wait_for_signal.
    Rma,
    /// `xpo_symm_reduce`: symm_mem's one_shot_all_reduce, two_shot_all_reduce, reduce_scatter_out.
    SymmReduce,
    /// `xpo_symm_write32`: symm_mem's memset32_, stream_write_value32_.
    SymmWrite32,
    /// `xpo_pad`: the symm_mem handle's barrier, put_signal, wait_signal on its signal pad.
    SignalPad,
}

impl OpKernel {
    const ALL: [OpKernel; 8] = [
        OpKernel::AllToAllV,
        OpKernel::AllToAll,
        OpKernel::Broadcast,
        OpKernel::TileReduce,
        OpKernel::Rma,
        OpKernel::SymmReduce,
        OpKernel::SymmWrite32,
        OpKernel::SignalPad,
    ];

    /// The kernel's name in the module.
    pub fn name(self) -> &'static str {
        match self {
            OpKernel::AllToAllV => "xpo_a2av",
            OpKernel::AllToAll => "xpo_a2a",
            OpKernel::Broadcast => "xpo_bcast",
            OpKernel::TileReduce => "xpo_tile",
            OpKernel::Rma => "xpo_rma",
            OpKernel::SymmReduce => "xpo_symm_reduce",
            OpKernel::SymmWrite32 => "xpo_symm_write32",
            OpKernel::SignalPad => "xpo_pad",
        }
    }
}

/// The op kernels' module, loaded and initialised on this PE's device.
#[derive(Debug)]
pub struct OpsModule {
    module: Module,
    kernels: Vec<Kernel>,
}

// SAFETY: the module and kernel handles are opaque identifiers Level Zero allows on any thread; the one piece of
// mutable state, the kernels' arguments, is set and captured under the kernel's argument lock of the one launch
// path (`ZeRuntime::append_kernel`).
unsafe impl Send for OpsModule {}
// SAFETY: as above.
unsafe impl Sync for OpsModule {}

impl<'a> Device<'a> {
    /// Load the op kernels' module (built once per call: keep the result) and initialise its device state.
    pub fn ops_module(&self) -> Result<OpsModule> {
        let module = self.load_module(OPS_KERNELS_SPIRV)?;
        self.init_module(&module)?;
        let kernels = OpKernel::ALL
            .iter()
            .map(|k| self.kernel(&module, k.name()))
            .collect::<Result<Vec<_>>>()?;
        Ok(OpsModule { module, kernels })
    }

    /// Host memory of `len` bytes (zeroed) that kernels can use.
    pub fn host_buf(&self, len: usize) -> Result<HostBuf> {
        HostBuf::new(self.rt, len)
    }

    /// A queue of the runtime's own (immediate, or regular with its command queue).
    pub fn create_queue(&self, immediate: bool) -> Result<Queue> {
        Queue::new(self.rt, immediate)
    }

    /// Run what was enqueued on `queue` and wait for it, with lost-peer detection, for up to 4 times
    /// `XPUSHMEM_TIMEOUT_MS` (the op kernels' own waits, each bounded by the timeout, report first).
    pub fn submit_and_wait(&self, queue: &Queue) -> Result<()> {
        queue.submit(&|done| {
            let mut left = 4;
            loop {
                left -= 1;
                match self
                    .sh
                    .wait_for("queue synchronize", &|| "work still running".into(), done)
                {
                    Err(Error::Timeout { .. }) if left > 0 => continue,
                    r => return r,
                }
            }
        })
    }

    fn raw_queue_args(&self, kernel: &Kernel, args: &[QueueArg<'_>]) -> Result<Vec<Vec<u8>>> {
        let plain: Vec<KernelArg> = args
            .iter()
            .map(|a| match *a {
                QueueArg::Kernel(k) => k,
                QueueArg::Host(..) | QueueArg::Device(_) => KernelArg::U64(0),
            })
            .collect();
        let mut raw = self.raw_args(kernel, &plain, [1, 1, 1], [1, 1, 1])?;
        for (r, a) in raw.iter_mut().zip(args) {
            if let QueueArg::Host(b, off) = *a {
                if off > b.len() {
                    return Err(Error::invalid("host buffer offset", off, "past the buffer"));
                }
                *r = b.addr(off).to_ne_bytes().to_vec();
            }
            if let QueueArg::Device(d) = *a {
                *r = d.addr().to_ne_bytes().to_vec();
            }
        }
        Ok(raw)
    }

    /// Append `kernel` to `list` (one work-group of `group_size` items), after a barrier on everything appended
    /// before it, and return at once.
    ///
    /// # Safety
    /// As for [`Device::launch`], for as long as the kernel may run; the host buffers passed must outlive it.
    pub unsafe fn enqueue(
        &self,
        list: CommandList,
        kernel: &Kernel,
        args: &[QueueArg<'_>],
        groups: [u32; 3],
        group_size: [u32; 3],
    ) -> Result<()> {
        let raw = self.raw_queue_args(kernel, args)?;
        // SAFETY: the caller's contract.
        unsafe { self.append_on(list, kernel.handle, &raw, groups, group_size) }
    }

    /// Append one of the op kernels (one work-group of `abi` group size) on `list`, after a barrier, and return at
    /// once.
    ///
    /// Sound for any argument values: heap arguments are validated ranges of the symmetric heap (which stays
    /// mapped while the runtime lives, even when freed), host arguments are live [`HostBuf`]s the caller keeps
    /// until the op's status record says it has finished, device arguments are [`DeviceRange`]s (whose unsafe
    /// constructor carries the same promise), and the op kernels (this library's own) bound every
    /// access by the sizes they are given, checking split values on the device before using them.
    pub fn enqueue_op(
        &self,
        m: &OpsModule,
        list: CommandList,
        op: OpKernel,
        args: &[QueueArg<'_>],
        group_size: u32,
    ) -> Result<()> {
        let i = OpKernel::ALL.iter().position(|&k| k == op).unwrap_or(0);
        let kernel = &m.kernels[i];
        let raw = self.raw_queue_args(kernel, args)?;
        // SAFETY: see the doc comment: the op kernels stay inside the ranges and host buffers they are given.
        unsafe { self.append_on(list, kernel.handle, &raw, [1, 1, 1], [group_size, 1, 1]) }
    }

    /// The first error a device call of `m`'s kernels recorded (a wait that gave up is [`Error::Timeout`]),
    /// cleared as it is read; call it once the op kernels enqueued before have finished.
    pub fn take_ops_error(&self, m: &OpsModule, what: &str) -> Result<()> {
        self.take_device_error(m.module.state, what)
    }

    /// # Safety
    /// As for [`Device::enqueue`].
    unsafe fn append_on(
        &self,
        list: CommandList,
        kernel: ze::ze_kernel_handle_t,
        raw: &[Vec<u8>],
        groups: [u32; 3],
        group_size: [u32; 3],
    ) -> Result<()> {
        if groups.contains(&0) || group_size.contains(&0) {
            return Err(Error::invalid(
                "groups/group_size",
                format!("{groups:?}/{group_size:?}"),
                "every dimension must be at least 1",
            ));
        }
        // SAFETY: the caller's contract; the caller's list is live (CommandList's contract).
        unsafe {
            self.rt.append_kernel(
                LaunchOn::Caller(list.raw),
                kernel,
                raw,
                groups,
                group_size,
                false,
            )
        }
    }
}
