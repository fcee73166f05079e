//! Work enqueued on a command list without the host waiting: the NVSHMEM model of ops as kernels on the current
//! stream. A framework's stream maps to a Level Zero command list (an immediate list, or a regular one its owner
//! executes); [`CommandList::from_raw`] wraps one (C: the `xpushmem_ops_*_on_queue` entry points), and
//! [`Device::create_queue`] makes one the runtime owns (tests, Rust programs without a framework).
//!
//! * [`Device::enqueue`] appends a kernel (after a barrier, so work on the list stays in order); `xpushmem-ops`
//!   enqueues its op kernels this way, which report their outcome in a status record in a [`HostBuf`] (host memory
//!   the device writes);
//! * [`Device::submit_and_wait`] runs a runtime-owned queue and waits for it, with the runtime's timeout.
//!
//! The Level Zero calls behind this (lists, queues, host buffers, the launch) are in `hal/ze`.

pub use crate::hal::ze::{CommandList, HostBuf, Queue, QueueEvents};

use super::{Device, Kernel, KernelArg, Module};
use crate::error::{Error, Result};

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

impl Device<'_> {
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
        // SAFETY: the caller's contract.
        unsafe {
            self.enqueue_with_events(list, QueueEvents::none(), kernel, args, groups, group_size)
        }
    }

    /// [`Device::enqueue`], the launch waiting for `events`' wait events and signalling its signal event when the
    /// kernel has finished. A list or event the driver refuses (another context or device, a destroyed handle) is
    /// an [`Error::InvalidArgument`] naming `ze_command_list`, `wait_events` (with the index) or `signal_event`.
    ///
    /// # Safety
    /// As for [`Device::enqueue`].
    pub unsafe fn enqueue_with_events(
        &self,
        list: CommandList,
        events: QueueEvents<'_>,
        kernel: &Kernel,
        args: &[QueueArg<'_>],
        groups: [u32; 3],
        group_size: [u32; 3],
    ) -> Result<()> {
        let raw = self.raw_queue_args(kernel, args)?;
        // SAFETY: the caller's contract.
        unsafe {
            self.rt
                .enqueue(list, events, kernel.handle.raw(), &raw, groups, group_size)
        }
    }

    /// The first error a device call of `module`'s kernels recorded (a wait that gave up is [`Error::Timeout`]),
    /// cleared as it is read, naming `what` (for a module initialised with [`Device::init_module`]); call it once
    /// the kernels enqueued before have finished.
    pub fn take_module_error(&self, module: &Module, what: &str) -> Result<()> {
        self.take_device_error(module.state, what)
    }

    /// Wait until word `word` of `buf` (written by a kernel) equals `value`, with the runtime's back-off and
    /// lost-peer detection, for up to `rounds` times `XPUSHMEM_TIMEOUT_MS` (a kernel whose own waits are bounded by
    /// the timeout reports them first); `what` names the wait in a timeout error.
    pub fn wait_host_word(
        &self,
        buf: &HostBuf,
        word: usize,
        value: u64,
        rounds: u32,
        what: &str,
    ) -> Result<()> {
        let mut left = rounds.max(1);
        loop {
            let r = self.sh.wait_for(
                what,
                &|| format!("status word {word} is not {value} yet"),
                || Ok(buf.word(word)? == value),
            );
            left -= 1;
            match r {
                Err(Error::Timeout { .. }) if left > 0 => continue,
                r => return r,
            }
        }
    }
}
