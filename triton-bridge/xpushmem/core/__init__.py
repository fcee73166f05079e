"""xpushmem's host API for Python, without PyTorch (the counterpart of NVIDIA's ``nvshmem.core``).

Start, from whichever the program already has::

    import xpushmem.core as xc
    xc.init()                                   # under xpushmem-run (or a job of one)
    xc.init(process_group=dist.group.WORLD)     # a torch process group: rank 0's unique ID through it
    xc.init(mpi_comm=MPI.COMM_WORLD)            # mpi4py: rank 0's unique ID through the communicator
    xc.init(uid=uid, rank=r, nranks=n)          # a unique ID from get_unique_id(), passed around by any means

then allocate symmetric arrays (NumPy arrays over the symmetric heap, or torch tensors sharing them) and move data
between PEs::

    a = xc.array(1024, np.float32)              # collective: every PE, same order and sizes
    sig = xc.array(1, np.uint64)
    xc.put_signal(a, np.ones(1024, np.float32), sig, 1, xc.SIGNAL_SET, pe=(xc.my_pe() + 1) % xc.n_pes())
    xc.signal_wait_until(sig, xc.CMP_EQ, 1)
    xc.reduce(out, a, "sum")                    # team collectives: broadcast, fcollect, alltoall, reduce
    xc.free(a); xc.finalize()

Destinations of puts, sources of gets, signals and both sides of collectives must be symmetric (from
:func:`array`, or views into one); the local side of a put or get may be any C-contiguous array. Sizes are those of
the local array (``src.nbytes`` for a put, ``dest.nbytes`` for a get); a symmetric side smaller than that is an
error. Every failure raises a subclass of :class:`XpushmemError` (one per error code, e.g. :class:`InvalidPeError`,
:class:`TimeoutError`, :class:`PeerLostError`) with the library's message, which names the wrong argument and its
value; nothing aborts the process and every wait is bounded by ``XPUSHMEM_TIMEOUT_MS``.
"""

from __future__ import annotations

import ctypes
from ctypes import byref, c_int, c_int32, c_uint64
from typing import Any

import numpy as np

from . import _capi
from ._capi import (  # noqa: F401  (every error class is part of the API)
    ERRORS,
    BootstrapError,
    ConfigError,
    DeviceError,
    HeapExhaustedError,
    InternalError,
    InvalidArgumentError,
    InvalidPeError,
    MismatchError,
    NotSymmetricError,
    OsError,
    OutOfBoundsError,
    PeerLostError,
    StateError,
    TimeoutError,
    TransportError,
    UniqueId,
    UnsupportedError,
    XpushmemError,
)

__all__ = [
    "CMP_EQ", "CMP_GE", "CMP_GT", "CMP_LE", "CMP_LT", "CMP_NE", "SIGNAL_ADD", "SIGNAL_SET", "TEAM_SHARED",
    "TEAM_WORLD", "Team", "XpushmemError", "alltoall", "array", "barrier_all", "broadcast", "fcollect", "fence",
    "finalize", "free", "get", "get_nbi", "get_unique_id", "init", "initialized", "my_pe", "n_pes", "put",
    "put_nbi", "put_signal", "quiet", "reduce", "signal_fetch", "signal_wait_until", "sync_all", "tensor",
]

CMP_EQ, CMP_NE, CMP_GT, CMP_GE, CMP_LT, CMP_LE = range(6)
SIGNAL_SET, SIGNAL_ADD = 0, 1

# One exception class per error code (InvalidPeError, TimeoutError, PeerLostError, ...).
__all__ += sorted(c.__name__ for c in ERRORS.values())

_CTYPES = {
    np.dtype(np.int8): "int8", np.dtype(np.int16): "int16", np.dtype(np.int32): "int32",
    np.dtype(np.int64): "int64", np.dtype(np.uint8): "uint8", np.dtype(np.uint16): "uint16",
    np.dtype(np.uint32): "uint32", np.dtype(np.uint64): "uint64", np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
}
_OPS = ("sum", "prod", "min", "max", "and", "or", "xor")
# Symmetric allocations of this process: address -> (bytes, the ctypes buffer the arrays view).
_allocs: dict[int, tuple[int, Any]] = {}


def _lib() -> ctypes.CDLL:
    return _capi.lib()


# ----------------------------------------------------------------------------------------------------------------
# Start-up


def get_unique_id() -> bytes:
    """A new job's unique ID (on one process; pass it to every PE's :func:`init`)."""
    uid = UniqueId()
    _capi.check(_lib().xpushmemx_get_uniqueid(byref(uid)))
    return bytes(uid)  # all of it: the field itself would stop at the first zero byte


def _init_uid(uid: bytes, rank: int, nranks: int) -> None:
    if not isinstance(uid, (bytes, bytearray)) or len(uid) != _capi.UNIQUEID_BYTES:
        raise InvalidArgumentError(
            f"init: uid must be the {_capi.UNIQUEID_BYTES} bytes of get_unique_id(), got {type(uid).__name__} "
            f"of length {len(uid) if hasattr(uid, '__len__') else '?'}", 4)
    u = UniqueId.from_buffer_copy(bytes(uid))
    attr = _capi.InitAttr()
    _capi.check(_lib().xpushmemx_set_attr_uniqueid_args(int(rank), int(nranks), byref(u), byref(attr)))
    _capi.check(_lib().xpushmemx_init_attr(_capi.INIT_WITH_UNIQUEID, byref(attr)))


def init(*, uid: bytes | None = None, rank: int | None = None, nranks: int | None = None,
         process_group: Any = None, mpi_comm: Any = None) -> None:
    """Start xpushmem (collective). With no argument: from the environment (``xpushmem-run``, or a job of one).
    ``process_group``: a ``torch.distributed`` group (its rank 0 makes the unique ID and broadcasts it through the
    group). ``mpi_comm``: an mpi4py communicator (likewise). ``uid`` with ``rank`` and ``nranks``: a unique ID from
    :func:`get_unique_id`. A second call while running does nothing."""
    given = [n for n, v in (("uid", uid), ("process_group", process_group), ("mpi_comm", mpi_comm)) if v is not None]
    if len(given) > 1:
        raise InvalidArgumentError(f"init: give one of uid, process_group, mpi_comm, not {given}", 4)
    if process_group is not None:
        import torch.distributed as dist

        rank, nranks = dist.get_rank(process_group), dist.get_world_size(process_group)
        box = [get_unique_id() if rank == 0 else None]
        dist.broadcast_object_list(box, src=dist.get_global_rank(process_group, 0), group=process_group)
        _init_uid(box[0], rank, nranks)
    elif mpi_comm is not None:
        rank, nranks = mpi_comm.Get_rank(), mpi_comm.Get_size()
        _init_uid(mpi_comm.bcast(get_unique_id() if rank == 0 else None, root=0), rank, nranks)
    elif uid is not None:
        if rank is None or nranks is None:
            raise InvalidArgumentError(
                f"init: uid needs rank and nranks (got rank={rank}, nranks={nranks})", 4)
        _init_uid(uid, rank, nranks)
    else:
        if rank is not None or nranks is not None:
            raise InvalidArgumentError(
                f"init: rank={rank} and nranks={nranks} need a uid", 4)
        _capi.check(_lib().xpushmem_init())


def finalize() -> None:
    """Stop xpushmem (collective: a last barrier). Arrays from :func:`array` must not be used afterwards."""
    _capi.check(_lib().xpushmem_finalize())
    _allocs.clear()


def initialized() -> bool:
    """Whether xpushmem is running in this process."""
    return bool(_lib().xpushmemx_initialized())


def my_pe() -> int:
    """This PE's number in the job."""
    return _lib().xpushmem_my_pe()


def n_pes() -> int:
    """The number of PEs in the job."""
    return _lib().xpushmem_n_pes()


# ----------------------------------------------------------------------------------------------------------------
# Symmetric memory


def array(shape: int | tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    """A zeroed NumPy array on the symmetric heap (collective: every PE allocates the same sizes in the same
    order). Free it with :func:`free`."""
    dt = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    count = int(np.prod(shape, dtype=np.int64))
    if count < 0 or any(s < 0 for s in shape):
        raise InvalidArgumentError(f"array: shape {shape} has a negative dimension", 4)
    nbytes = max(count * dt.itemsize, 1)
    ptr = _capi.check_ptr(_lib().xpushmem_calloc(nbytes, 1), f"array({shape}, {dt})")
    buf = (ctypes.c_char * nbytes).from_address(ptr)
    _allocs[ptr] = (nbytes, buf)
    return np.frombuffer(buf, dtype=dt, count=count).reshape(shape)


def tensor(shape: int | tuple[int, ...], dtype: Any = None) -> Any:
    """A zeroed CPU torch tensor on the symmetric heap (it shares the memory of :func:`array`; free it with
    :func:`free`). ``dtype``: a torch dtype with a NumPy equivalent (default ``torch.float32``)."""
    import torch

    dtype = dtype or torch.float32
    np_dtype = torch.empty(0, dtype=dtype).numpy().dtype
    return torch.from_numpy(array(shape, np_dtype))


def _view(x: Any, what: str) -> tuple[int, int, np.dtype]:
    """(address, bytes, dtype) of a C-contiguous NumPy array or CPU torch tensor."""
    if isinstance(x, np.ndarray):
        if not x.flags.c_contiguous:
            raise InvalidArgumentError(f"{what} is not C-contiguous (strides {x.strides})", 4)
        return x.__array_interface__["data"][0], x.nbytes, x.dtype
    if type(x).__module__.startswith("torch"):
        if x.device.type != "cpu" or not x.is_contiguous():
            raise InvalidArgumentError(
                f"{what} must be a contiguous CPU tensor (device {x.device}, contiguous {x.is_contiguous()})", 4)
        return x.data_ptr(), x.numel() * x.element_size(), x.numpy().dtype
    raise InvalidArgumentError(
        f"{what} must be a NumPy array or a torch tensor, got {type(x).__name__}", 4)


def free(x: Any) -> None:
    """Free an array (or tensor) from :func:`array`/:func:`tensor` (collective)."""
    ptr, _, _ = _view(x, "free: the array")
    if ptr not in _allocs:
        raise InvalidArgumentError(
            f"free: the array at {ptr:#x} is not the start of a symmetric allocation of this process", 4)
    _capi.check(_lib().xpushmem_free(ptr))
    del _allocs[ptr]


# ----------------------------------------------------------------------------------------------------------------
# Point to point


def _sized(dest: Any, src: Any, local_is_src: bool, call: str) -> tuple[int, int, int]:
    d, dn, _ = _view(dest, f"{call}: dest")
    s, sn, _ = _view(src, f"{call}: src")
    n = sn if local_is_src else dn
    other = dn if local_is_src else sn
    if other < n:
        side = "dest" if local_is_src else "src"
        raise OutOfBoundsError(f"{call}: {side} holds {other} bytes, fewer than the {n} to move", 3)
    return d, s, n


def put(dest: Any, src: Any, pe: int) -> None:
    """Copy ``src`` (local) into symmetric ``dest`` on ``pe``; returns once ``src`` may be reused."""
    d, s, n = _sized(dest, src, True, "put")
    _capi.check(_lib().xpushmem_putmem(d, s, n, int(pe)))


def put_nbi(dest: Any, src: Any, pe: int) -> None:
    """:func:`put` without waiting: ``src`` may be reused after :func:`quiet`."""
    d, s, n = _sized(dest, src, True, "put_nbi")
    _capi.check(_lib().xpushmem_putmem_nbi(d, s, n, int(pe)))


def get(dest: Any, src: Any, pe: int) -> None:
    """Copy symmetric ``src`` on ``pe`` into ``dest`` (local)."""
    d, s, n = _sized(dest, src, False, "get")
    _capi.check(_lib().xpushmem_getmem(d, s, n, int(pe)))


def get_nbi(dest: Any, src: Any, pe: int) -> None:
    """:func:`get` without waiting: ``dest`` holds the data after :func:`quiet`."""
    d, s, n = _sized(dest, src, False, "get_nbi")
    _capi.check(_lib().xpushmem_getmem_nbi(d, s, n, int(pe)))


def _signal(sig: Any, index: int, call: str) -> int:
    p, n, dt = _view(sig, f"{call}: sig")
    if dt != np.uint64:
        raise InvalidArgumentError(f"{call}: sig must hold uint64, not {dt}", 4)
    if not 0 <= index < n // 8:
        raise OutOfBoundsError(f"{call}: index {index} is outside sig's {n // 8} signals", 3)
    return p + 8 * index


def put_signal(dest: Any, src: Any, sig: Any, signal: int, sig_op: int, pe: int, *, index: int = 0,
               nbi: bool = False) -> None:
    """Put ``src`` into ``dest`` on ``pe``, then update signal ``sig[index]`` there (``SIGNAL_SET`` or
    ``SIGNAL_ADD`` of ``signal``) once the data is in place."""
    call = "put_signal_nbi" if nbi else "put_signal"
    d, s, n = _sized(dest, src, True, call)
    f = _lib().xpushmem_putmem_signal_nbi if nbi else _lib().xpushmem_putmem_signal
    _capi.check(f(d, s, n, _signal(sig, index, call), int(signal), int(sig_op), int(pe)))


def signal_fetch(sig: Any, index: int = 0) -> int:
    """The value of this PE's signal ``sig[index]``."""
    v = c_uint64()
    _capi.check(_lib().xpushmem_signal_fetch_ex(byref(v), _signal(sig, index, "signal_fetch")))
    return v.value


def signal_wait_until(sig: Any, cmp: int, value: int, index: int = 0) -> int:
    """Wait until this PE's signal ``sig[index]`` compares (``CMP_*``) true with ``value``; its value then."""
    v = c_uint64()
    _capi.check(_lib().xpushmem_signal_wait_until_ex(byref(v), _signal(sig, index, "signal_wait_until"),
                                                     int(cmp), int(value)))
    return v.value


def quiet() -> None:
    """Complete every put, get and signal this PE issued."""
    _capi.check(_lib().xpushmem_quiet())


def fence() -> None:
    """Order this PE's puts to each PE: those before arrive before those after."""
    _capi.check(_lib().xpushmem_fence())


def barrier_all() -> None:
    """Complete this PE's operations, then wait for every PE."""
    _capi.check(_lib().xpushmem_barrier_all())


def sync_all() -> None:
    """Wait for every PE (no completion of outstanding operations)."""
    _capi.check(_lib().xpushmem_sync_all())


# ----------------------------------------------------------------------------------------------------------------
# Teams and collectives


class Team:
    """A team of PEs (``xpushmem_team_t``): :data:`TEAM_WORLD`, :data:`TEAM_SHARED`, a split, or a team made by its
    members only (:meth:`Team.of_members`)."""

    def __init__(self, handle: int) -> None:
        self.handle = int(handle)

    def __repr__(self) -> str:
        return f"Team({self.handle})"

    def my_pe(self) -> int:
        """This PE's number in the team."""
        v = c_int()
        _capi.check(_lib().xpushmem_team_my_pe_ex(byref(v), self.handle))
        return v.value

    def n_pes(self) -> int:
        """The team's size."""
        v = c_int()
        _capi.check(_lib().xpushmem_team_n_pes_ex(byref(v), self.handle))
        return v.value

    def translate_pe(self, pe: int, other: Team) -> int:
        """The number in ``other`` of member ``pe`` of this team; -1 when it is not a member of ``other``."""
        v = c_int()
        _capi.check(_lib().xpushmem_team_translate_pe_ex(byref(v), self.handle, int(pe), other.handle))
        return v.value

    def split_strided(self, start: int, stride: int, size: int) -> Team | None:
        """The team of members ``start, start+stride, ...`` (``size`` of them; collective over this team);
        ``None`` on the PEs left out."""
        out = c_int32(-1)
        _capi.check(_lib().xpushmem_team_split_strided(self.handle, int(start), int(stride), int(size), None, 0,
                                                        byref(out)))
        return None if out.value == -1 else Team(out.value)

    @staticmethod
    def of_members(pes: list[int], tag: int = 0) -> Team:
        """The team of the PEs ``pes`` (global numbers, in team order), made by those PEs only: each of them calls
        with the same ``pes`` and ``tag`` (a number that tells this team from others of the same PEs); the other PEs
        never call. Needs host heaps (on one node or over the fabric) or device heaps on one node; different lists or
        tags fail on every member."""
        arr = (c_int * len(pes))(*(int(p) for p in pes))
        out = c_int32(-1)
        _capi.check(_lib().xpushmem_team_of_members(arr, len(pes), c_uint64(int(tag)), byref(out)))
        return Team(out.value)

    def sync(self) -> None:
        """Wait for every member."""
        _capi.check(_lib().xpushmem_team_sync(self.handle))

    def barrier(self) -> None:
        """Complete this PE's operations, then wait for every member."""
        _capi.check(_lib().xpushmem_barrier(self.handle))

    def destroy(self) -> None:
        """Release the team (collective over its members)."""
        _capi.check(_lib().xpushmem_team_destroy(self.handle))


TEAM_WORLD = Team(0)
TEAM_SHARED = Team(1)


def broadcast(dest: Any, src: Any, root: int, team: Team = TEAM_WORLD) -> None:
    """Copy ``src`` of member ``root`` into every member's ``dest`` (``src.nbytes`` bytes; both symmetric)."""
    d, s, n = _sized(dest, src, True, "broadcast")
    _capi.check(_lib().xpushmem_broadcastmem(team.handle, d, s, n, int(root)))


def fcollect(dest: Any, src: Any, team: Team = TEAM_WORLD) -> None:
    """Concatenate every member's ``src`` (the same size everywhere) into every member's ``dest``."""
    s, sn, _ = _view(src, "fcollect: src")
    d, dn, _ = _view(dest, "fcollect: dest")
    need = sn * team.n_pes()
    if dn < need:
        raise OutOfBoundsError(
            f"fcollect: dest holds {dn} bytes, fewer than the {need} of {team.n_pes()} members' src", 3)
    _capi.check(_lib().xpushmem_fcollectmem(team.handle, d, s, sn))


def alltoall(dest: Any, src: Any, team: Team = TEAM_WORLD) -> None:
    """Send block ``j`` of ``src`` (``src.nbytes / team size`` bytes) to member ``j``, which stores it as its block
    of this PE's number in ``dest``."""
    s, sn, _ = _view(src, "alltoall: src")
    d, dn, _ = _view(dest, "alltoall: dest")
    n = team.n_pes()
    if sn % n:
        raise InvalidArgumentError(f"alltoall: src's {sn} bytes do not split into {n} equal blocks", 4)
    if dn < sn:
        raise OutOfBoundsError(f"alltoall: dest holds {dn} bytes, fewer than src's {sn}", 3)
    _capi.check(_lib().xpushmem_alltoallmem(team.handle, d, s, sn // n))


def reduce(dest: Any, src: Any, op: str = "sum", team: Team = TEAM_WORLD) -> None:
    """Element-wise reduction (``sum``, ``prod``, ``min``, ``max``; ``and``, ``or``, ``xor`` for integers) of
    every member's ``src`` into every member's ``dest`` (same dtype and length)."""
    s, sn, st = _view(src, "reduce: src")
    d, dn, dt = _view(dest, "reduce: dest")
    if st != dt:
        raise InvalidArgumentError(f"reduce: dest's dtype {dt} differs from src's {st}", 4)
    if dn < sn:
        raise OutOfBoundsError(f"reduce: dest holds {dn} bytes, fewer than src's {sn}", 3)
    ctype = _CTYPES.get(st)
    f = _capi.reduce_fn(ctype, op) if ctype and op in _OPS else None
    if f is None:
        raise InvalidArgumentError(
            f"reduce: no {op!r} reduction for dtype {st} (ops {', '.join(_OPS)}; dtypes "
            f"{', '.join(str(k) for k in _CTYPES)}; bitwise ops for integers only)", 4)
    _capi.check(f(team.handle, d, s, sn // st.itemsize))
