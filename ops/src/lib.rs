//! # xpushmem-ops
//!
//! PyTorch's NVSHMEM op family (`torch.ops.symm_mem.*`) over the xpushmem runtime, with PyTorch's semantics
//! and without NVSHMEM's limits:
//!
//! | op | module |
//! |---|---|
//! | [`all_to_all_vdev`], [`all_to_all_vdev_2d`], [`all_to_all_vdev_2d_offset`], [`nvshmem_all_to_all`] | [`a2a`] |
//! | [`tile_reduce`], [`multi_root_tile_reduce`] | [`tile`] |
//! | [`nvshmem_put`], [`nvshmem_get`], [`nvshmem_put_with_signal`], [`nvshmem_wait_for_signal`], [`nvshmem_broadcast`] | [`p2p`] |
//! | [`ep::TokenSwitch`] (expert-parallel MoE dispatch and combine) | [`ep`] |
//! | `one_shot_all_reduce[_copy][_out]`, `two_shot_all_reduce_[out]`, `reduce_scatter_out`, `memset32_`, `stream_write_value32_` (device path only: [`DeviceOps`]) | [`symm`] |
//!
//! Two paths run them: the host path (the functions above: host-driven put/get, any heap) and the device path
//! ([`DeviceOps`], module [`device`]: one kernel per op, appended to a Level Zero command list without waiting, on
//! device heaps). [`ops_path`] resolves `XPUSHMEM_OPS_PATH` (`host|device|auto`) for callers that switch, as the C
//! ABI does ([`ep_path`] for the EP ops, whose kernels also reach PEs on other nodes).
//!
//! Tensors are [`TensorView`]s (dtype, shape, strides, offset) over symmetric allocations; collective ops run
//! on a [`Group`] (an ordered list of global PEs; group-relative ranks for roots and splits). The pure planning
//! (split offsets, `major_align` layouts, exchange schedules, strided runs) lives in [`plan`], shared with the
//! device kernels. The C ABI is `libxpushmem`'s (`ffi/src/ops.rs`). `docs/OPS.md` documents every op and how it differs from NVSHMEM.
//!
//! ```
//! use xpushmem_ops::{all_to_all_vdev, DType, Group, TensorView};
//! # fn main() -> xpushmem::Result<()> {
//! let sh = xpushmem::init_single()?;
//! let g = Group::world(&sh)?;
//! let input = TensorView::of(&sh, sh.malloc::<f32>(8)?, DType::F32, &[8])?;
//! let out = TensorView::of(&sh, sh.malloc::<f32>(8)?, DType::F32, &[8])?;
//! let splits = sh.malloc::<i64>(1)?;
//! sh.put(splits, &[5], 0)?;
//! let in_splits = TensorView::of(&sh, splits, DType::I64, &[1])?;
//! let oso = TensorView::of(&sh, sh.malloc::<i64>(2)?, DType::I64, &[2, 1])?;
//! all_to_all_vdev(&sh, &g, &input, &out, &in_splits, &oso)?;
//! # Ok(()) }
//! ```
#![warn(missing_docs)]
#![deny(unsafe_code)] // allowed in one module: the op kernels' enqueue (`device/kernels.rs`)

pub mod a2a;
pub mod device;
pub mod device_abi;
pub mod dtype;
pub mod ep;
pub mod group;
mod io;
pub mod p2p;
pub mod plan;
pub mod symm;
pub mod tensor;
pub mod tile;

pub use a2a::{all_to_all_vdev, all_to_all_vdev_2d, all_to_all_vdev_2d_offset, nvshmem_all_to_all};
pub use device::{ep_path, ops_path, DeviceOps, OpHandle, OpsPath};
pub use dtype::DType;
pub use group::Group;
pub use p2p::{
    nvshmem_broadcast, nvshmem_get, nvshmem_put, nvshmem_put_with_signal, nvshmem_wait_for_signal,
};
pub use symm::{LocalTensor, Operand};
pub use tensor::{sym_bytes, TensorView};
pub use tile::{multi_root_tile_reduce, tile_reduce};
