//! Work enqueued on a command list without the host waiting: the NVSHMEM model of ops as kernels on the current
//! stream. A framework's stream maps to a Level Zero command list (an immediate list, or a regular one its owner
//! executes); [`CommandList::from_raw`] wraps one (C: the `xpushmem_ops_*_on_queue` entry points), and
//! [`Device::create_queue`] makes one the runtime owns (tests, Rust programs without a framework).
//!
//! * [`Device::enqueue`] appends a user kernel (after a barrier, so work on the list stays in order);
//! * [`Device::enqueue_op`] appends one of `xpushmem-ops`' kernels ([`OpKernel`], module [`Device::ops_module`]),
//!   which report their outcome in a status record in a [`HostBuf`] (host memory the device writes);
//! * [`Device::submit_and_wait`] runs a runtime-owned queue and waits for it, with the runtime's timeout.
//!
//! The `unsafe` Level Zero calls behind this live in the transport leaf `transport/ze_queue.rs`.

pub use crate::transport::ze_queue::{
    CommandList, DeviceRange, HostBuf, OpKernel, OpsModule, Queue, QueueArg, OPS_KERNELS_SPIRV,
};

use crate::device::Device;
use crate::error::Result;

impl Device<'_> {
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
                Err(crate::error::Error::Timeout { .. }) if left > 0 => continue,
                r => return r,
            }
        }
    }
}
