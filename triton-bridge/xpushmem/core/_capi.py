"""The C API of ``libxpushmem.so`` through ctypes: the library, the calls ``xpushmem.core`` makes, and the
translation of their error codes into the exception classes of :mod:`xpushmem.core` (one per ``ErrorCode``, with
the library's message)."""

from __future__ import annotations

import ctypes
from ctypes import POINTER, c_char, c_int, c_int32, c_long, c_size_t, c_uint, c_uint64, c_void_p
from functools import lru_cache

from .._lib import lib_path

#: ``XPUSHMEMX_UNIQUEID_BYTES``.
UNIQUEID_BYTES = 128
#: ``XPUSHMEMX_INIT_WITH_UNIQUEID``.
INIT_WITH_UNIQUEID = 1
#: ``XPUSHMEMX_ERROR_MODE_RETURN``.
ERROR_MODE_RETURN = 0


class UniqueId(ctypes.Structure):
    """``xpushmemx_uniqueid_t``."""

    _fields_ = [("internal", c_char * UNIQUEID_BYTES)]


class InitAttr(ctypes.Structure):
    """``xpushmemx_init_attr_t`` (version 2 layout; version 1 reads the first five fields)."""

    _fields_ = [
        ("version", c_int),
        ("rank", c_int),
        ("nranks", c_int),
        ("thread_level", c_int),
        ("uid", UniqueId),
        ("ze_driver", c_void_p),
        ("ze_device", c_void_p),
        ("ze_context", c_void_p),
    ]


class XpushmemError(RuntimeError):
    """An xpushmem call failed; ``code`` is its ``XPUSHMEM_ERROR_*`` code, ``name`` the code's name, and the message
    the library's (it names the call, the argument that is wrong and its value)."""

    code = -1

    def __init__(self, message: str, code: int | None = None, name: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.name = name or type(self).__name__


def _error_class(name: str, code: int, doc: str) -> type[XpushmemError]:
    return type(name, (XpushmemError,), {"code": code, "__doc__": doc})


InvalidPeError = _error_class("InvalidPeError", 1, "A PE number outside the job or team.")
NotSymmetricError = _error_class("NotSymmetricError", 2, "An address outside the symmetric heap where one is required.")
OutOfBoundsError = _error_class("OutOfBoundsError", 3, "A range past the end of its allocation.")
InvalidArgumentError = _error_class("InvalidArgumentError", 4, "An argument out of its allowed range.")
HeapExhaustedError = _error_class("HeapExhaustedError", 5, "The symmetric heap has no room for the allocation.")
MismatchError = _error_class("MismatchError", 6, "PEs disagree on a collective call's arguments.")
TimeoutError = _error_class("TimeoutError", 7, "A wait passed its time limit (XPUSHMEM_TIMEOUT_MS).")  # noqa: A001
PeerLostError = _error_class("PeerLostError", 8, "A PE of the job is gone.")
BootstrapError = _error_class("BootstrapError", 9, "The start-up exchange failed.")
TransportError = _error_class("TransportError", 10, "A transport (shared memory, fabric) failed.")
DeviceError = _error_class("DeviceError", 11, "The Level Zero device failed.")
StateError = _error_class("StateError", 12, "The call is not valid in the runtime's state (not initialized, ...).")
ConfigError = _error_class("ConfigError", 13, "A configuration variable has a bad value.")
OsError = _error_class("OsError", 14, "An operating-system call failed.")
InternalError = _error_class("InternalError", 15, "A defect of xpushmem.")
UnsupportedError = _error_class("UnsupportedError", 16, "The operation is not supported here.")

#: The exception class of each ``XPUSHMEM_ERROR_*`` code (the library's ``ErrorCode`` enumeration).
ERRORS: dict[int, type[XpushmemError]] = {
    c.code: c
    for c in (
        InvalidPeError, NotSymmetricError, OutOfBoundsError, InvalidArgumentError, HeapExhaustedError,
        MismatchError, TimeoutError, PeerLostError, BootstrapError, TransportError, DeviceError, StateError,
        ConfigError, OsError, InternalError, UnsupportedError,
    )
}


@lru_cache(maxsize=None)
def lib() -> ctypes.CDLL:
    """``libxpushmem.so`` (loaded once, globally: the torch shim and Triton kernels share its runtime), with the
    argument and result types of the calls used here; the error mode set to return codes (never abort)."""
    so = ctypes.CDLL(str(lib_path()), mode=ctypes.RTLD_GLOBAL)
    sig = {
        "xpushmem_last_error": ([], ctypes.c_char_p),
        "xpushmem_last_error_code": ([], c_int),
        "xpushmemx_error_name": ([c_int], ctypes.c_char_p),
        "xpushmemx_set_error_mode": ([c_int], c_int),
        "xpushmem_init": ([], c_int),
        "xpushmemx_get_uniqueid": ([POINTER(UniqueId)], c_int),
        "xpushmemx_set_attr_uniqueid_args": ([c_int, c_int, POINTER(UniqueId), POINTER(InitAttr)], c_int),
        "xpushmemx_init_attr": ([c_uint, POINTER(InitAttr)], c_int),
        "xpushmem_finalize": ([], c_int),
        "xpushmemx_initialized": ([], c_int),
        "xpushmem_my_pe": ([], c_int),
        "xpushmem_n_pes": ([], c_int),
        "xpushmem_calloc": ([c_size_t, c_size_t], c_void_p),
        "xpushmem_free": ([c_void_p], c_int),
        "xpushmem_ptr": ([c_void_p, c_int], c_void_p),
        "xpushmem_putmem": ([c_void_p, c_void_p, c_size_t, c_int], c_int),
        "xpushmem_getmem": ([c_void_p, c_void_p, c_size_t, c_int], c_int),
        "xpushmem_putmem_nbi": ([c_void_p, c_void_p, c_size_t, c_int], c_int),
        "xpushmem_getmem_nbi": ([c_void_p, c_void_p, c_size_t, c_int], c_int),
        "xpushmem_putmem_signal": ([c_void_p, c_void_p, c_size_t, c_void_p, c_uint64, c_int, c_int], c_int),
        "xpushmem_putmem_signal_nbi": ([c_void_p, c_void_p, c_size_t, c_void_p, c_uint64, c_int, c_int], c_int),
        "xpushmem_signal_fetch_ex": ([POINTER(c_uint64), c_void_p], c_int),
        "xpushmem_signal_wait_until_ex": ([POINTER(c_uint64), c_void_p, c_int, c_uint64], c_int),
        "xpushmem_quiet": ([], c_int),
        "xpushmem_fence": ([], c_int),
        "xpushmem_barrier_all": ([], c_int),
        "xpushmem_sync_all": ([], c_int),
        "xpushmem_team_my_pe_ex": ([POINTER(c_int), c_int32], c_int),
        "xpushmem_team_n_pes_ex": ([POINTER(c_int), c_int32], c_int),
        "xpushmem_team_translate_pe_ex": ([POINTER(c_int), c_int32, c_int, c_int32], c_int),
        "xpushmem_team_split_strided": ([c_int32, c_int, c_int, c_int, c_void_p, c_long, POINTER(c_int32)], c_int),
        "xpushmem_team_of_members": ([POINTER(c_int), c_int, c_uint64, POINTER(c_int32)], c_int),
        "xpushmem_team_destroy": ([c_int32], c_int),
        "xpushmem_team_sync": ([c_int32], c_int),
        "xpushmem_barrier": ([c_int32], c_int),
        "xpushmem_broadcastmem": ([c_int32, c_void_p, c_void_p, c_size_t, c_int], c_int),
        "xpushmem_fcollectmem": ([c_int32, c_void_p, c_void_p, c_size_t], c_int),
        "xpushmem_alltoallmem": ([c_int32, c_void_p, c_void_p, c_size_t], c_int),
    }
    for name, (args, res) in sig.items():
        f = getattr(so, name)
        f.argtypes, f.restype = args, res
    check(so.xpushmemx_set_error_mode(ERROR_MODE_RETURN), so)
    return so


def reduce_fn(ctype: str, op: str):
    """``xpushmem_<ctype>_<op>_reduce(team, dest, source, nreduce)``, or ``None`` when the library has none."""
    f = getattr(lib(), f"xpushmem_{ctype}_{op}_reduce", None)
    if f is not None:
        f.argtypes, f.restype = [c_int32, c_void_p, c_void_p, c_size_t], c_int
    return f


def error(code: int, so: ctypes.CDLL | None = None) -> XpushmemError:
    """The exception of a failed call that returned `code`, with the calling thread's last error message."""
    so = so or lib()
    message = (so.xpushmem_last_error() or b"").decode(errors="replace")
    raw = so.xpushmemx_error_name(code)
    name = raw.decode() if raw else f"error {code}"
    cls = ERRORS.get(code, XpushmemError)
    return cls(message or f"{name} (code {code})", code, name)


def check(code: int, so: ctypes.CDLL | None = None) -> None:
    """Raise the exception of `code` unless it is ``XPUSHMEM_SUCCESS``."""
    if code != 0:
        raise error(code, so)


def check_ptr(ptr: int | None, what: str) -> int:
    """`ptr`, or the exception of the last error when the call returned NULL."""
    if not ptr:
        so = lib()
        code = so.xpushmem_last_error_code()
        if code == 0:
            raise XpushmemError(f"{what} returned NULL without an error")
        raise error(code, so)
    return ptr
