//! The op kernels: `ops/device/xpushmem_ops.cl` (linked with the device library), prebuilt to SPIR-V by
//! `ops/device/build.sh` and embedded here, their module on this PE's device ([`OpsModule`]), and the one place
//! they are enqueued ([`OpsModule::enqueue`]).
//!
//! This is the crate's only `unsafe` code (the crate denies it everywhere else): an op kernel is enqueued through
//! the runtime's [`Device::enqueue`], whose contract (the kernel touches only memory valid while it runs) these
//! kernels meet by construction, for any argument values.

use xpushmem::device::queue::{CommandList, QueueArg};
use xpushmem::device::{Kernel, Module};
use xpushmem::{Device, Result};

/// The op kernels of `xpushmem-ops` (`ops/device/xpushmem_ops.cl`, linked with the device library), prebuilt to
/// SPIR-V by `ops/device/build.sh`.
pub const OPS_KERNELS_SPIRV: &[u8] = include_bytes!("../../device/prebuilt/xpushmem_ops.spv");

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
    /// `xpo_ep_route`: the token switch's create_routing.
    EpRoute,
    /// `xpo_ep_dispatch`: the token switch's dispatch.
    EpDispatch,
    /// `xpo_ep_combine`: the token switch's combine.
    EpCombine,
}

impl OpKernel {
    const ALL: [OpKernel; 11] = [
        OpKernel::AllToAllV,
        OpKernel::AllToAll,
        OpKernel::Broadcast,
        OpKernel::TileReduce,
        OpKernel::Rma,
        OpKernel::SymmReduce,
        OpKernel::SymmWrite32,
        OpKernel::SignalPad,
        OpKernel::EpRoute,
        OpKernel::EpDispatch,
        OpKernel::EpCombine,
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
            OpKernel::EpRoute => "xpo_ep_route",
            OpKernel::EpDispatch => "xpo_ep_dispatch",
            OpKernel::EpCombine => "xpo_ep_combine",
        }
    }
}

/// The op kernels' module, loaded and initialised on this PE's device. Shared between threads: the runtime's one
/// launch path sets and captures a kernel's arguments under that kernel's lock.
#[derive(Debug)]
pub struct OpsModule {
    module: Module,
    kernels: Vec<Kernel>,
}

impl OpsModule {
    /// Load the op kernels' module on `dev` (built once per call: keep the result) and initialise its device
    /// state.
    pub fn load(dev: &Device<'_>) -> Result<OpsModule> {
        let module = dev.load_module(OPS_KERNELS_SPIRV)?;
        dev.init_module(&module)?;
        let kernels = OpKernel::ALL
            .iter()
            .map(|k| dev.kernel(&module, k.name()))
            .collect::<Result<Vec<_>>>()?;
        Ok(OpsModule { module, kernels })
    }

    /// Append op kernel `op` (one work-group of `group_size` work-items) on `list`, after a barrier, and return
    /// at once.
    ///
    /// Sound for any argument values: heap arguments are validated ranges of the symmetric heap (which stays
    /// mapped while the runtime lives, even when freed), host arguments are live host buffers the caller keeps
    /// until the op's status record says it has finished, device arguments are device ranges (whose unsafe
    /// constructor carries the same promise), and the op kernels bound every access by the sizes they are given,
    /// checking split values on the device before using them.
    pub fn enqueue(
        &self,
        dev: &Device<'_>,
        list: CommandList,
        op: OpKernel,
        args: &[QueueArg<'_>],
        group_size: u32,
    ) -> Result<()> {
        let i = OpKernel::ALL.iter().position(|&k| k == op).unwrap_or(0);
        // SAFETY: see the doc comment: the op kernels stay inside the ranges and host buffers they are given.
        unsafe { dev.enqueue(list, &self.kernels[i], args, [1, 1, 1], [group_size, 1, 1]) }
    }

    /// The first error a device call of the op kernels recorded (a wait that gave up is a timeout), cleared as it
    /// is read; call it once the op kernels enqueued before have finished.
    pub fn take_error(&self, dev: &Device<'_>, what: &str) -> Result<()> {
        dev.take_module_error(&self.module, what)
    }
}
