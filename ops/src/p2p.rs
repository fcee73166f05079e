//! One-sided ops on global PEs (`nvshmem_put`, `nvshmem_get`, `nvshmem_put_with_signal`,
//! `nvshmem_wait_for_signal`) and the group broadcast (`nvshmem_broadcast`).

use crate::group::Group;
use crate::io::{self, check_contiguous};
use crate::plan;
use crate::tensor::TensorView;
use xpushmem::{Cmp, Error, Result, Shmem, SignalOp, SymRef};

pub(crate) fn check_peer(sh: &Shmem, op: &str, peer: i64) -> Result<usize> {
    if peer < 0 || peer as u64 >= sh.n_pes() as u64 {
        return Err(Error::InvalidPe {
            pe: peer,
            n_pes: sh.n_pes(),
            context: format!("{op}: peer must be smaller than world size (peers are global PEs)"),
        });
    }
    Ok(peer as usize)
}

/// `nvshmem_put(tensor, peer)`: copy this PE's `tensor` into the same symmetric tensor on global PE `peer`.
/// Complete (visible on `peer`) when it returns on the host path; callers still synchronise (barrier or
/// signal) before the peer reads. Unlike PyTorch's kernel, the remote address is the tensor's own (not the
/// allocation base), so views at a non-zero offset work.
pub fn nvshmem_put(sh: &Shmem, tensor: &TensorView, peer: i64) -> Result<()> {
    const OP: &str = "nvshmem_put";
    check_contiguous(OP, "tensor", tensor).map_err(|_| contiguous_only(OP, tensor))?;
    let peer = check_peer(sh, OP, peer)?;
    let bytes = tensor.contiguous_bytes(OP, "tensor")?;
    let mut staging = Vec::new();
    io::copy(sh, bytes, sh.my_pe(), bytes, peer, &mut staging)
}

/// `nvshmem_get(tensor, peer)`: overwrite this PE's `tensor` with global PE `peer`'s copy. Complete when it
/// returns.
pub fn nvshmem_get(sh: &Shmem, tensor: &TensorView, peer: i64) -> Result<()> {
    const OP: &str = "nvshmem_get";
    check_contiguous(OP, "tensor", tensor).map_err(|_| contiguous_only(OP, tensor))?;
    let peer = check_peer(sh, OP, peer)?;
    let bytes = tensor.contiguous_bytes(OP, "tensor")?;
    let mut staging = Vec::new();
    io::copy(sh, bytes, peer, bytes, sh.my_pe(), &mut staging)
}

pub(crate) fn contiguous_only(op: &str, t: &TensorView) -> Error {
    Error::InvalidArgument {
        name: "tensor",
        value: t.describe(),
        reason: format!(
            "{op}: {} op currently supports contiguous tensors only",
            &op[8..]
        ),
    }
}

/// The 64-bit signal word at the start of `sigpad` (which must hold at least 8 bytes, 8-byte aligned).
pub(crate) fn signal_word(sh: &Shmem, op: &str, sigpad: &TensorView) -> Result<SymRef<u64>> {
    let off = sigpad.heap_offset();
    if sigpad.nbytes() < 8 || !sigpad.is_contiguous() {
        return Err(Error::InvalidArgument {
            name: "sigpad",
            value: sigpad.describe(),
            reason: format!(
                "{op}: the signal pad must be contiguous and hold at least one 64-bit word"
            ),
        });
    }
    if off % 8 != 0 {
        return Err(Error::InvalidArgument {
            name: "sigpad",
            value: sigpad.describe(),
            reason: format!("{op}: the signal word must be 8-byte aligned"),
        });
    }
    sh.sym_slice_from_addr::<u64>(sh.sym_addr(off), 1)?.at(0)
}

/// `nvshmem_put_with_signal(tensor, sigpad, signal, peer)`: copy `tensor` into the same symmetric tensor on
/// global PE `peer`, then atomically SET the peer's 64-bit word at the start of `sigpad` to `signal`; whoever
/// sees the signal sees the data.
///
/// PyTorch checks nothing here; this checks `tensor` contiguous, `peer` in range and the signal word (8 bytes,
/// aligned, inside the symmetric heap).
pub fn nvshmem_put_with_signal(
    sh: &Shmem,
    tensor: &TensorView,
    sigpad: &TensorView,
    signal: i64,
    peer: i64,
) -> Result<()> {
    const OP: &str = "nvshmem_put_with_signal";
    check_contiguous(OP, "tensor", tensor)?;
    let peer = check_peer(sh, OP, peer)?;
    let sig = signal_word(sh, OP, sigpad)?;
    let bytes = tensor.contiguous_bytes(OP, "tensor")?;
    let mut data = vec![0u8; bytes.len()];
    sh.get(&mut data, bytes, sh.my_pe())?;
    sh.put_signal(bytes, &data, sig, signal as u64, SignalOp::Set, peer)
}

/// `nvshmem_wait_for_signal(sigpad, signal, peer)`: wait until this PE's 64-bit word at the start of `sigpad`
/// equals `signal`. `peer` is reserved and ignored, as in PyTorch; the word is not reset. The wait times out
/// (`XPUSHMEM_TIMEOUT_MS`) and notices lost peers.
pub fn nvshmem_wait_for_signal(
    sh: &Shmem,
    sigpad: &TensorView,
    signal: i64,
    peer: i64,
) -> Result<()> {
    const OP: &str = "nvshmem_wait_for_signal";
    let _ = peer;
    let sig = signal_word(sh, OP, sigpad)?;
    sh.signal_wait_until(sig, Cmp::Eq, signal as u64)
        .map(|_| ())
}

/// `nvshmem_broadcast(tensor, root, group)`: in place; every rank's `tensor` ends with group rank `root`'s
/// bytes (the root's is unchanged). Synchronised on entry (so a recycled buffer cannot be overwritten while a
/// rank still uses it, the rocSHMEM fix) and on exit (the root may reuse its tensor when the call returns).
///
/// Checks: `0 <= root < W` ("root must be smaller than group size"), the same view on every rank. Strided views
/// are copied element-exactly (PyTorch copies `numel * element_size` raw bytes from the data pointer).
pub fn nvshmem_broadcast(sh: &Shmem, group: &Group, tensor: &TensorView, root: i64) -> Result<()> {
    const OP: &str = "nvshmem_broadcast";
    let me = group.rank_for(sh, OP)?;
    let w = group.size();
    let prep = if root < 0 || root as u64 >= w as u64 {
        Err(Error::InvalidPe {
            pe: root,
            n_pes: w,
            context: format!("{OP}: root must be smaller than group size"),
        })
    } else {
        Ok(root as usize)
    };
    let mut words = vec![7, w as u64, group.id(), root as u64];
    tensor.digest_words(&mut words);
    let ours = || format!("root {root}, tensor {}", tensor.describe());
    group.agree(
        sh,
        OP,
        prep.as_ref().err().cloned(),
        plan::digest(&words),
        &ours,
    )?;
    let root = prep?;
    let r = if me != root {
        group.global(root).and_then(|pe| {
            let data = io::read_view(sh, tensor, pe)?;
            io::write_view(sh, tensor, &data, sh.my_pe())
        })
    } else {
        Ok(())
    };
    group.agree(sh, OP, r.err(), 0, &|| String::new())
}
