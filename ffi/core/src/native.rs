//! The native C API (`xpushmem_*`, extensions `xpushmemx_*`), mirroring NVSHMEM's host API.
//!
//! Calls whose standard signature is `void` return an error code here (0 = success); calls that return a value
//! keep that signature (with a documented fallback value on error) and have an `_ex` variant that returns an
//! error code and passes the value through its first argument. The message of the last failure on the calling
//! thread is `xpushmem_last_error()`.

use crate::error::{self, code, value, write_out, Failure};
use crate::imp;
use crate::state;
use level_zero_sys as ze;
use std::ffi::{c_char, c_int, c_uint, c_void};
use xpushmem_rt::transport::ze::ExternalHandles;
use xpushmem_rt::{BootstrapSpec, InitAttr, ThreadLevel, UniqueId};

/// Major version of the xpushmem C API.
pub const XPUSHMEM_MAJOR_VERSION: c_int = 0;
/// Minor version of the xpushmem C API.
pub const XPUSHMEM_MINOR_VERSION: c_int = 1;
/// Patch version of the xpushmem C API.
pub const XPUSHMEM_PATCH_VERSION: c_int = 0;
/// Major version of the OpenSHMEM specification the semantics follow.
pub const XPUSHMEM_SPEC_MAJOR_VERSION: c_int = 1;
/// Minor version of the OpenSHMEM specification the semantics follow.
pub const XPUSHMEM_SPEC_MINOR_VERSION: c_int = 6;
/// Room needed by `xpushmem_info_get_name` (bytes, NUL included).
pub const XPUSHMEM_MAX_NAME_LEN: usize = 256;

/// Thread level: one thread.
pub const XPUSHMEM_THREAD_SINGLE: c_int = 0;
/// Thread level: several threads, only the main one calls xpushmem.
pub const XPUSHMEM_THREAD_FUNNELED: c_int = 1;
/// Thread level: several threads call xpushmem, one at a time.
pub const XPUSHMEM_THREAD_SERIALIZED: c_int = 2;
/// Thread level: any thread calls xpushmem at any time.
pub const XPUSHMEM_THREAD_MULTIPLE: c_int = 3;

/// Comparison: equal.
pub const XPUSHMEM_CMP_EQ: c_int = 0;
/// Comparison: not equal.
pub const XPUSHMEM_CMP_NE: c_int = 1;
/// Comparison: greater than.
pub const XPUSHMEM_CMP_GT: c_int = 2;
/// Comparison: greater than or equal.
pub const XPUSHMEM_CMP_GE: c_int = 3;
/// Comparison: less than.
pub const XPUSHMEM_CMP_LT: c_int = 4;
/// Comparison: less than or equal.
pub const XPUSHMEM_CMP_LE: c_int = 5;

/// Signal operation: store the value.
pub const XPUSHMEM_SIGNAL_SET: c_int = 0;
/// Signal operation: add the value atomically.
pub const XPUSHMEM_SIGNAL_ADD: c_int = 1;

/// Size of `xpushmemx_uniqueid_t` in bytes.
pub const XPUSHMEMX_UNIQUEID_BYTES: usize = 128;
/// `xpushmemx_init_attr` flag: bootstrap with the unique ID in the attributes.
pub const XPUSHMEMX_INIT_WITH_UNIQUEID: c_uint = 1;
/// Version of `xpushmemx_init_attr_t` set by `xpushmemx_set_attr_uniqueid_args`: the fields up to `uid`.
pub const XPUSHMEMX_INIT_ATTR_VERSION: c_int = 1;
/// Version of `xpushmemx_init_attr_t` set by `xpushmemx_set_attr_ze_handles`: version 1 plus the Level Zero
/// handles `ze_driver`, `ze_device`, `ze_context` (read only at this version, so a version-1 caller's smaller
/// struct is never read past `uid`).
pub const XPUSHMEMX_INIT_ATTR_VERSION_ZE_HANDLES: c_int = 2;

const _: () = assert!(XPUSHMEMX_UNIQUEID_BYTES == xpushmem_rt::UNIQUE_ID_BYTES);

/// The unique ID of a job (NVSHMEM's `nvshmemx_uniqueid_t`): made by `xpushmemx_get_uniqueid` on one process,
/// passed to every PE by any means, and given to `xpushmemx_init_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(non_camel_case_types)]
pub struct xpushmemx_uniqueid_t {
    /// Opaque bytes.
    pub internal: [c_char; XPUSHMEMX_UNIQUEID_BYTES],
}

/// Start-up attributes of `xpushmemx_init_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(non_camel_case_types)]
pub struct xpushmemx_init_attr_t {
    /// `XPUSHMEMX_INIT_ATTR_VERSION`.
    pub version: c_int,
    /// This PE's number in the job (with `XPUSHMEMX_INIT_WITH_UNIQUEID`).
    pub rank: c_int,
    /// Number of PEs in the job (with `XPUSHMEMX_INIT_WITH_UNIQUEID`).
    pub nranks: c_int,
    /// Requested thread level (`XPUSHMEM_THREAD_*`).
    pub thread_level: c_int,
    /// The job's unique ID (with `XPUSHMEMX_INIT_WITH_UNIQUEID`).
    pub uid: xpushmemx_uniqueid_t,
    /// Version 2 (`XPUSHMEMX_INIT_ATTR_VERSION_ZE_HANDLES`): a framework's `ze_driver_handle_t` to adopt.
    pub ze_driver: *mut c_void,
    /// Version 2: a `ze_device_handle_t` of `ze_driver` to adopt.
    pub ze_device: *mut c_void,
    /// Version 2: a `ze_context_handle_t` created on `ze_driver` to adopt.
    pub ze_context: *mut c_void,
}

// ---------------------------------------------------------------------------------------------------------------
// Setup, query, errors

/// Start xpushmem with the bootstrap named by the environment (set by `xpushmem-run`, or a one-PE job).
/// Collective. A second call while running does nothing. Returns an error code.
#[no_mangle]
pub extern "C" fn xpushmem_init() -> c_int {
    code("xpushmem_init", || state::init(InitAttr::default(), false))
}

/// Start xpushmem at thread level `requested` (`XPUSHMEM_THREAD_*`); the level provided (every level is) goes to
/// `*provided` (may be NULL). Returns an error code.
///
/// # Safety
/// `provided` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn xpushmem_init_thread(requested: c_int, provided: *mut c_int) -> c_int {
    code("xpushmem_init_thread", || {
        let level = imp::thread_level_arg(requested, "xpushmem_init_thread")?;
        state::init(
            InitAttr {
                thread_level: level,
                ..InitAttr::default()
            },
            false,
        )?;
        let got = state::with(|sh| Ok(imp::thread_level_int(sh.query_thread())))?;
        // SAFETY: the caller's contract on `provided`.
        unsafe { write_out(provided, got) };
        Ok(())
    })
}

/// The thread level in force into `*provided`. Returns an error code.
///
/// # Safety
/// `provided` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn xpushmem_query_thread(provided: *mut c_int) -> c_int {
    code("xpushmem_query_thread", || {
        let got = state::with(|sh| Ok(imp::thread_level_int(sh.query_thread())))?;
        // SAFETY: the caller's contract on `provided`.
        unsafe { write_out(provided, got) };
        Ok(())
    })
}

/// Create the unique ID of a new job into `*uid` and serve its rendezvous from this process (NVSHMEM's
/// `nvshmemx_get_uniqueid`). Call on one process, give the ID to every PE (this one included), then each calls
/// `xpushmemx_init_attr(XPUSHMEMX_INIT_WITH_UNIQUEID, &attr)`. Returns an error code.
///
/// # Safety
/// `uid` is writable.
#[no_mangle]
pub unsafe extern "C" fn xpushmemx_get_uniqueid(uid: *mut xpushmemx_uniqueid_t) -> c_int {
    code("xpushmemx_get_uniqueid", || {
        if uid.is_null() {
            return Err(invalid(
                "uid",
                "NULL",
                "must point to an xpushmemx_uniqueid_t",
            ));
        }
        let id = xpushmem_rt::get_unique_id()?;
        let mut out = xpushmemx_uniqueid_t {
            internal: [0; XPUSHMEMX_UNIQUEID_BYTES],
        };
        for (o, b) in out.internal.iter_mut().zip(id.to_bytes()) {
            *o = b as c_char;
        }
        // SAFETY: non-NULL (checked) and writable by the caller's contract.
        unsafe { uid.write(out) };
        Ok(())
    })
}

/// Fill `*attr` for a unique-ID start: this PE is `rank` of `nranks`, the job is `*uid`; the thread level is set
/// to `XPUSHMEM_THREAD_MULTIPLE` and the version to `XPUSHMEMX_INIT_ATTR_VERSION` (1). Only the version-1 fields
/// are written, so `xpushmemx_set_attr_ze_handles` comes after this call. Returns an error code.
///
/// # Safety
/// `uid` is readable, `attr` writable (as far as `uid`).
#[no_mangle]
pub unsafe extern "C" fn xpushmemx_set_attr_uniqueid_args(
    rank: c_int,
    nranks: c_int,
    uid: *const xpushmemx_uniqueid_t,
    attr: *mut xpushmemx_init_attr_t,
) -> c_int {
    code("xpushmemx_set_attr_uniqueid_args", || {
        if uid.is_null() {
            return Err(invalid(
                "uid",
                "NULL",
                "must point to the job's xpushmemx_uniqueid_t",
            ));
        }
        if attr.is_null() {
            return Err(invalid(
                "attr",
                "NULL",
                "must point to an xpushmemx_init_attr_t",
            ));
        }
        if nranks < 1 {
            return Err(invalid("nranks", nranks, "must be at least 1"));
        }
        if rank < 0 || rank >= nranks {
            return Err(invalid(
                "rank",
                rank,
                format!("must be in [0, nranks = {nranks})"),
            ));
        }
        // SAFETY: non-NULL (checked), readable by the caller's contract.
        let id = unsafe { uid.read() };
        // SAFETY: non-NULL (checked); the version-1 fields are writable by the caller's contract (a caller built
        // against version 1 has no room for the handles, so they are not touched).
        unsafe {
            std::ptr::addr_of_mut!((*attr).version).write(XPUSHMEMX_INIT_ATTR_VERSION);
            std::ptr::addr_of_mut!((*attr).rank).write(rank);
            std::ptr::addr_of_mut!((*attr).nranks).write(nranks);
            std::ptr::addr_of_mut!((*attr).thread_level).write(XPUSHMEM_THREAD_MULTIPLE);
            std::ptr::addr_of_mut!((*attr).uid).write(id);
        }
        Ok(())
    })
}

/// Start the runtime on a host framework's Level Zero handles (SYCL, PyTorch XPU: `driver` a
/// `ze_driver_handle_t`, `device` a `ze_device_handle_t` of it, `context` a `ze_context_handle_t` created on it)
/// instead of opening its own driver, device and context: the symmetric heap, the runtime's lists and every
/// kernel (the ops' included) live in `context`, so command lists the framework creates in that context can take
/// the `xpushmem_ops_*_on_queue` ops. Writes the three handles and sets `attr->version` to
/// `XPUSHMEMX_INIT_ATTR_VERSION_ZE_HANDLES`; the other fields keep their values (call it after
/// `xpushmemx_set_attr_uniqueid_args`, or fill them yourself for `flags` = 0). Needs a device heap
/// (`XPUSHMEM_HEAP=device`): `xpushmemx_init_attr` fails with a host heap. Errors: a NULL `attr` or handle.
///
/// # Safety
/// `attr` is writable (a version-2 `xpushmemx_init_attr_t`). The handles are live handles of one Level Zero
/// driver, loaded through this process's Level Zero loader, and stay valid until `xpushmem_finalize`; they are
/// not destroyed by xpushmem.
#[no_mangle]
pub unsafe extern "C" fn xpushmemx_set_attr_ze_handles(
    attr: *mut xpushmemx_init_attr_t,
    driver: *mut c_void,
    device: *mut c_void,
    context: *mut c_void,
) -> c_int {
    code("xpushmemx_set_attr_ze_handles", || {
        if attr.is_null() {
            return Err(invalid(
                "attr",
                "NULL",
                "must point to an xpushmemx_init_attr_t",
            ));
        }
        check_ze_handles(["driver", "device", "context"], [driver, device, context])?;
        // SAFETY: non-NULL (checked), a version-2 struct writable by the caller's contract.
        unsafe {
            std::ptr::addr_of_mut!((*attr).ze_driver).write(driver);
            std::ptr::addr_of_mut!((*attr).ze_device).write(device);
            std::ptr::addr_of_mut!((*attr).ze_context).write(context);
            std::ptr::addr_of_mut!((*attr).version).write(XPUSHMEMX_INIT_ATTR_VERSION_ZE_HANDLES);
        }
        Ok(())
    })
}

/// Every handle named in `names` is non-NULL.
fn check_ze_handles(names: [&'static str; 3], handles: [*mut c_void; 3]) -> Result<(), Failure> {
    const WHAT: [&str; 3] = [
        "ze_driver_handle_t",
        "ze_device_handle_t",
        "ze_context_handle_t",
    ];
    for ((name, h), what) in names.into_iter().zip(handles).zip(WHAT) {
        if h.is_null() {
            return Err(invalid(
                name,
                "NULL",
                format!("must be the framework's {what} to adopt"),
            ));
        }
    }
    Ok(())
}

/// Start xpushmem with attributes (NVSHMEM's `nvshmemx_init_attr`): `flags` = `XPUSHMEMX_INIT_WITH_UNIQUEID`
/// (bootstrap from `attr->uid`, `attr->rank`, `attr->nranks`) or 0 (from the environment, thread level from
/// `attr` if given). At `attr->version` = `XPUSHMEMX_INIT_ATTR_VERSION_ZE_HANDLES` the runtime adopts the Level
/// Zero handles in `attr` (see `xpushmemx_set_attr_ze_handles`; a host heap is then an error). Collective.
/// Returns an error code.
///
/// # Safety
/// `attr` is NULL (flags 0 only) or readable as its version says; version-2 handles as
/// `xpushmemx_set_attr_ze_handles` requires.
#[no_mangle]
pub unsafe extern "C" fn xpushmemx_init_attr(
    flags: c_uint,
    attr: *const xpushmemx_init_attr_t,
) -> c_int {
    let call = "xpushmemx_init_attr";
    code(call, || {
        let a = if attr.is_null() {
            None
        } else {
            // SAFETY: non-NULL, readable by the caller's contract as far as `uid` (version 1).
            let version = unsafe { std::ptr::addr_of!((*attr).version).read() };
            if version != XPUSHMEMX_INIT_ATTR_VERSION
                && version != XPUSHMEMX_INIT_ATTR_VERSION_ZE_HANDLES
            {
                return Err(invalid(
                    "attr->version",
                    version,
                    "must be XPUSHMEMX_INIT_ATTR_VERSION or XPUSHMEMX_INIT_ATTR_VERSION_ZE_HANDLES (fill attr with \
                     xpushmemx_set_attr_uniqueid_args, then optionally xpushmemx_set_attr_ze_handles)",
                ));
            }
            // SAFETY: as above; the handles are read only from a version-2 struct, which has them.
            Some(unsafe { read_attr(attr, version) })
        };
        let device_handles = match &a {
            Some(a) if a.version == XPUSHMEMX_INIT_ATTR_VERSION_ZE_HANDLES => {
                check_ze_handles(
                    ["attr->ze_driver", "attr->ze_device", "attr->ze_context"],
                    [a.ze_driver, a.ze_device, a.ze_context],
                )?;
                // SAFETY: xpushmemx_init_attr's contract (that of xpushmemx_set_attr_ze_handles): live handles of
                // one driver, loaded through this process's loader, valid until finalize.
                Some(unsafe {
                    ExternalHandles::new(
                        ze::ze_driver_handle_t(a.ze_driver),
                        ze::ze_device_handle_t(a.ze_device),
                        ze::ze_context_handle_t(a.ze_context),
                    )
                })
            }
            _ => None,
        };
        let thread_level = match &a {
            Some(a) => imp::thread_level_arg(a.thread_level, call)?,
            None => ThreadLevel::Multiple,
        };
        let bootstrap = match flags {
            0 => BootstrapSpec::Env,
            XPUSHMEMX_INIT_WITH_UNIQUEID => {
                let a = a.ok_or_else(|| {
                    invalid(
                        "attr",
                        "NULL",
                        "XPUSHMEMX_INIT_WITH_UNIQUEID needs the attributes",
                    )
                })?;
                if a.nranks < 1 || a.rank < 0 || a.rank >= a.nranks {
                    return Err(invalid(
                        "attr->rank",
                        a.rank,
                        format!(
                            "must be in [0, attr->nranks = {}) with nranks >= 1",
                            a.nranks
                        ),
                    ));
                }
                let bytes: Vec<u8> = a.uid.internal.iter().map(|&c| c as u8).collect();
                BootstrapSpec::Uid {
                    uid: UniqueId::from_bytes(&bytes)?,
                    rank: a.rank as usize,
                    size: a.nranks as usize,
                }
            }
            f => {
                return Err(invalid(
                    "flags",
                    f,
                    "must be 0 or XPUSHMEMX_INIT_WITH_UNIQUEID",
                ))
            }
        };
        state::init(
            InitAttr {
                bootstrap,
                thread_level,
                device_handles,
                ..InitAttr::default()
            },
            false,
        )
    })
}

/// The fields of `*attr` its `version` has (the handles NULL at version 1).
///
/// # Safety
/// `attr` is readable as far as `uid`, and to its end when `version` is `XPUSHMEMX_INIT_ATTR_VERSION_ZE_HANDLES`.
unsafe fn read_attr(attr: *const xpushmemx_init_attr_t, version: c_int) -> xpushmemx_init_attr_t {
    let null = std::ptr::null_mut();
    // SAFETY: the version-1 fields are readable by the contract.
    let mut a = unsafe {
        xpushmemx_init_attr_t {
            version,
            rank: std::ptr::addr_of!((*attr).rank).read(),
            nranks: std::ptr::addr_of!((*attr).nranks).read(),
            thread_level: std::ptr::addr_of!((*attr).thread_level).read(),
            uid: std::ptr::addr_of!((*attr).uid).read(),
            ze_driver: null,
            ze_device: null,
            ze_context: null,
        }
    };
    if version == XPUSHMEMX_INIT_ATTR_VERSION_ZE_HANDLES {
        // SAFETY: a version-2 struct is readable to its end by the contract.
        unsafe {
            a.ze_driver = std::ptr::addr_of!((*attr).ze_driver).read();
            a.ze_device = std::ptr::addr_of!((*attr).ze_device).read();
            a.ze_context = std::ptr::addr_of!((*attr).ze_context).read();
        }
    }
    a
}

/// Finalize (collective): a last barrier, then every resource is released. A no-op when not running. Returns
/// an error code.
#[no_mangle]
pub extern "C" fn xpushmem_finalize() -> c_int {
    code("xpushmem_finalize", state::finalize)
}

/// Whether xpushmem is running (1) or not (0).
#[no_mangle]
pub extern "C" fn xpushmemx_initialized() -> c_int {
    c_int::from(state::is_initialised())
}

/// This PE's number, or -1 when not initialised.
#[no_mangle]
pub extern "C" fn xpushmem_my_pe() -> c_int {
    value("xpushmem_my_pe", -1, || {
        state::with(|sh| Ok(sh.my_pe() as c_int))
    })
}

/// The number of PEs, or -1 when not initialised.
#[no_mangle]
pub extern "C" fn xpushmem_n_pes() -> c_int {
    value("xpushmem_n_pes", -1, || {
        state::with(|sh| Ok(sh.n_pes() as c_int))
    })
}

/// Leave the job now with `status` without finalizing. Peers waiting on this PE see it as lost (an error, not a
/// hang); under `xpushmem-run` the whole job ends with `status` and the launcher names this PE as its cause.
#[no_mangle]
pub extern "C" fn xpushmem_global_exit(status: c_int) {
    let _ = std::io::Write::flush(&mut std::io::stdout());
    xpushmem_rt::launcher::global_exit(status)
}

/// The version of the xpushmem C API into `*major`, `*minor`.
///
/// # Safety
/// `major`, `minor` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn xpushmem_info_get_version(major: *mut c_int, minor: *mut c_int) {
    // SAFETY: the caller's contract.
    unsafe {
        write_out(major, XPUSHMEM_MAJOR_VERSION);
        write_out(minor, XPUSHMEM_MINOR_VERSION);
    }
}

/// The library's name and version, NUL-terminated, into `name` (room for `XPUSHMEM_MAX_NAME_LEN` bytes).
///
/// # Safety
/// `name` is NULL or writable for `XPUSHMEM_MAX_NAME_LEN` bytes.
#[no_mangle]
pub unsafe extern "C" fn xpushmem_info_get_name(name: *mut c_char) {
    // SAFETY: the caller's contract.
    unsafe { copy_name(name, &format!("xpushmem {}", xpushmem_rt::VERSION)) }
}

/// Copy `s` as a NUL-terminated string of at most `XPUSHMEM_MAX_NAME_LEN` bytes.
///
/// # Safety
/// `dst` is NULL or writable for `XPUSHMEM_MAX_NAME_LEN` bytes.
pub unsafe fn copy_name(dst: *mut c_char, s: &str) {
    if dst.is_null() {
        return;
    }
    let b = s.as_bytes();
    let n = b.len().min(XPUSHMEM_MAX_NAME_LEN - 1);
    // SAFETY: `dst` has room for XPUSHMEM_MAX_NAME_LEN bytes (caller); n + 1 <= that.
    unsafe {
        std::ptr::copy_nonoverlapping(b.as_ptr().cast::<c_char>(), dst, n);
        dst.add(n).write(0);
    }
}

/// The message of the calling thread's last failed call (`""` if none): names the call, the argument, its value
/// and the allowed range. Valid until the thread's next failing call.
#[no_mangle]
pub extern "C" fn xpushmem_last_error() -> *const c_char {
    error::last_message_ptr()
}

/// The error code of the calling thread's last failed call (0 if none).
#[no_mangle]
pub extern "C" fn xpushmem_last_error_code() -> c_int {
    error::last_code()
}

/// Forget the calling thread's last error.
#[no_mangle]
pub extern "C" fn xpushmemx_clear_error() {
    error::clear()
}

/// The short name of an error code (`"InvalidPe"`, ...; a static string).
#[no_mangle]
pub extern "C" fn xpushmemx_error_name(code: c_int) -> *const c_char {
    let s: &'static [u8] = match error::code_name(code) {
        "Success" => b"Success\0",
        "InvalidPe" => b"InvalidPe\0",
        "NotSymmetric" => b"NotSymmetric\0",
        "OutOfBounds" => b"OutOfBounds\0",
        "InvalidArgument" => b"InvalidArgument\0",
        "HeapExhausted" => b"HeapExhausted\0",
        "Mismatch" => b"Mismatch\0",
        "Timeout" => b"Timeout\0",
        "PeerLost" => b"PeerLost\0",
        "Bootstrap" => b"Bootstrap\0",
        "Transport" => b"Transport\0",
        "Device" => b"Device\0",
        "State" => b"State\0",
        "Config" => b"Config\0",
        "Os" => b"Os\0",
        "Internal" => b"Internal\0",
        "Unsupported" => b"Unsupported\0",
        _ => b"Unknown\0",
    };
    s.as_ptr().cast()
}

/// Set the error mode of the process: `XPUSHMEMX_ERROR_MODE_RETURN` or `XPUSHMEMX_ERROR_MODE_ABORT`. Returns an
/// error code.
#[no_mangle]
pub extern "C" fn xpushmemx_set_error_mode(mode: c_int) -> c_int {
    code("xpushmemx_set_error_mode", || match mode {
        error::XPUSHMEMX_ERROR_MODE_RETURN => {
            error::set_mode(false);
            Ok(())
        }
        error::XPUSHMEMX_ERROR_MODE_ABORT => {
            error::set_mode(true);
            Ok(())
        }
        m => Err(invalid(
            "mode",
            m,
            "must be XPUSHMEMX_ERROR_MODE_RETURN (0) or XPUSHMEMX_ERROR_MODE_ABORT (1)",
        )),
    })
}

/// The error mode in force (`XPUSHMEMX_ERROR_MODE_*`).
#[no_mangle]
pub extern "C" fn xpushmemx_get_error_mode() -> c_int {
    if error::abort_mode() {
        error::XPUSHMEMX_ERROR_MODE_ABORT
    } else {
        error::XPUSHMEMX_ERROR_MODE_RETURN
    }
}

/// Self-test of the panic firewall: panics inside the library; the panic is caught at the boundary and this
/// returns `XPUSHMEM_ERROR_INTERNAL` (the message is in `xpushmem_last_error()`). Never crashes the process
/// (except in abort mode, which aborts as for any error).
#[no_mangle]
pub extern "C" fn xpushmemx_selftest_panic() -> c_int {
    code("xpushmemx_selftest_panic", || {
        if std::hint::black_box(true) {
            panic!("deliberate panic of xpushmemx_selftest_panic");
        }
        Ok(())
    })
}

/// Whether PE `pe` can be reached by the data transfer routines (1) or not (0, for a PE outside `[0, n_pes)`):
/// every PE of the job, whether its heap is mapped here (same node) or reached over the network. `xpushmem_ptr`
/// says whether loads and stores reach it.
#[no_mangle]
pub extern "C" fn xpushmem_pe_accessible(pe: c_int) -> c_int {
    value("xpushmem_pe_accessible", 0, || {
        state::with(|sh| Ok(c_int::from(pe_in_job(sh, pe))))
    })
}

/// Whether `addr` is a symmetric address (the heap, or the executable's globals where they are symmetric) that the
/// data transfer routines reach on PE `pe` (1) or not (0), as [`xpushmem_pe_accessible`] for the PE.
#[no_mangle]
pub extern "C" fn xpushmem_addr_accessible(addr: *const c_void, pe: c_int) -> c_int {
    value("xpushmem_addr_accessible", 0, || {
        state::with(|sh| {
            let inside = sh.sym_slice_from_addr::<u8>(addr as usize, 1).is_ok();
            Ok(c_int::from(inside && pe_in_job(sh, pe)))
        })
    })
}

/// `pe` is a PE of the job: `0 <= pe < n_pes`.
fn pe_in_job(sh: &xpushmem_rt::Shmem, pe: c_int) -> bool {
    usize::try_from(pe).is_ok_and(|p| p < sh.n_pes())
}

/// Base address of this PE's symmetric heap (NULL when not initialised).
#[no_mangle]
pub extern "C" fn xpushmemx_heap_base() -> *mut c_void {
    value("xpushmemx_heap_base", std::ptr::null_mut(), || {
        state::with(|sh| Ok(sh.heap_base().cast()))
    })
}

/// Size of every PE's symmetric heap in bytes (0 when not initialised).
#[no_mangle]
pub extern "C" fn xpushmemx_heap_size() -> usize {
    value("xpushmemx_heap_size", 0, || {
        state::with(|sh| Ok(sh.heap_size()))
    })
}

/// Register the `len` bytes of this PE's own host memory at `addr` (NVSHMEM's `nvshmemx_buffer_register`): the
/// non-blocking puts from it (`*_put_nbi`, `putmem_nbi`) and, over the fabric, the non-blocking gets into it
/// (`*_get_nbi`, `getmem_nbi`) then move in place, without a copy, and complete at `xpushmem_quiet`; the range must
/// not change while a put from it is in flight, nor be read while a get into it is. A non-blocking transfer from
/// or into memory that is not registered keeps its copy (it completes on return). Errors
/// (`XPUSHMEM_ERROR_INVALID_ARGUMENT`, the last error naming the argument and value): `addr` NULL, `len` 0 or
/// wrapping the address space, a range overlapping a registered one or the symmetric heap.
///
/// # Safety
/// `[addr, addr + len)` must stay valid until [`xpushmemx_buffer_unregister`].
#[no_mangle]
pub unsafe extern "C" fn xpushmemx_buffer_register(addr: *mut c_void, len: usize) -> c_int {
    code("xpushmemx_buffer_register", || {
        state::with(|sh| {
            // SAFETY: the caller's contract.
            unsafe { sh.register_raw(addr.cast(), len)? };
            Ok(())
        })
    })
}

/// Unregister the range registered at `addr` by [`xpushmemx_buffer_register`], after completing the non-blocking
/// transfers in flight from or into it (only those: a quiet of that range). Error: no range registered at `addr`
/// (`XPUSHMEM_ERROR_INVALID_ARGUMENT`, naming the address and the registered ranges).
#[no_mangle]
pub extern "C" fn xpushmemx_buffer_unregister(addr: *mut c_void) -> c_int {
    code("xpushmemx_buffer_unregister", || {
        state::with(|sh| Ok(sh.unregister_raw(addr.cast())?))
    })
}

fn no_device(call: &str) -> Failure {
    Failure::Error(xpushmem_rt::Error::State(format!(
        "{call} needs a device heap (XPUSHMEM_HEAP=device)"
    )))
}

/// The Level Zero handles the runtime uses on this PE (`ze_driver_handle_t`, `ze_device_handle_t`,
/// `ze_context_handle_t`), for programs that create their own modules and command lists (in that context). Any
/// out-pointer may be NULL. Needs a device heap.
///
/// # Safety
/// Each out-pointer is NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn xpushmemx_ze_get_handles(
    driver: *mut *mut c_void,
    device: *mut *mut c_void,
    context: *mut *mut c_void,
) -> c_int {
    let call = "xpushmemx_ze_get_handles";
    code(call, || {
        state::with(|sh| {
            let h = sh.device().ok_or_else(|| no_device(call))?.handles();
            // SAFETY: the caller guarantees each pointer is NULL or writable.
            unsafe {
                write_out(driver, h.driver().0);
                write_out(device, h.device().0);
                write_out(context, h.context().0);
            }
            Ok(())
        })
    })
}

/// Fill the device-library state of a module (a `ze_module_handle_t` created in the runtime's context from SPIR-V
/// linked with `libxpushmem_device`), NVSHMEM's `nvshmemx_cumodule_init`: call it after creating the module and
/// before launching its kernels. Errors: no device heap, a module without the library (no
/// `xpushmem_device_state` global), a library of another ABI.
///
/// # Safety
/// `module` must be a live module of the runtime's Level Zero context with none of its kernels running.
#[no_mangle]
pub unsafe extern "C" fn xpushmemx_ze_module_init(module: *mut c_void) -> c_int {
    let call = "xpushmemx_ze_module_init";
    code(call, || {
        if module.is_null() {
            return Err(xpushmem_rt::Error::InvalidArgument {
                name: "module",
                value: "NULL".into(),
                reason: "must be a ze_module_handle_t".into(),
            }
            .into());
        }
        state::with(|sh| {
            let dev = sh.device().ok_or_else(|| no_device(call))?;
            // SAFETY: the caller's contract.
            unsafe { dev.init_raw_module(module)? };
            Ok(())
        })
    })
}

/// Check a launch of `group_count` work-groups of `kernel` (a `ze_kernel_handle_t` of the runtime's context) whose
/// work-groups call device waits or barriers: all must be resident at once (NVSHMEM's rule for kernels that
/// synchronise), so more than `zeKernelSuggestMaxCooperativeGroupCount` is `XPUSHMEM_ERROR_INVALID_ARGUMENT`
/// naming `group_count`. `*max_groups` (if not NULL) receives that limit. Launch such kernels with
/// `zeCommandListAppendLaunchCooperativeKernel`.
///
/// # Safety
/// `kernel` must be a live kernel of the runtime's Level Zero context; `max_groups` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn xpushmemx_ze_check_cooperative(
    kernel: *mut c_void,
    group_count: u32,
    max_groups: *mut u32,
) -> c_int {
    let call = "xpushmemx_ze_check_cooperative";
    code(call, || {
        if kernel.is_null() {
            return Err(xpushmem_rt::Error::invalid(
                "kernel",
                "NULL",
                "must be a ze_kernel_handle_t",
            )
            .into());
        }
        state::with(|sh| {
            let dev = sh.device().ok_or_else(|| no_device(call))?;
            // SAFETY: the caller's contract.
            let max = unsafe { dev.max_resident_groups_raw(kernel)? };
            // SAFETY: the caller guarantees the pointer is NULL or writable.
            unsafe { write_out(max_groups, max) };
            if group_count == 0 || group_count > max {
                return Err(xpushmem_rt::Error::invalid(
                    "group_count",
                    group_count,
                    format!(
                        "{call}: a kernel whose work-groups wait on each other needs all of them resident; this \
                         device holds 1..={max} (zeKernelSuggestMaxCooperativeGroupCount)"
                    ),
                )
                .into());
            }
            Ok(())
        })
    })
}

/// The number a kernel passes for `team` to the device library's team calls and work-group collectives
/// (`xpushmem_team_my_pe`, `xpushmem_team_sync`, `xpushmemx_*_work_group` in `xpushmem_device.h`): the same on every
/// member, `XPUSHMEM_TEAM_WORLD` 0, `XPUSHMEM_TEAM_SHARED` 1. -1 on error (a bad handle).
#[no_mangle]
pub extern "C" fn xpushmemx_team_device_id(team: crate::teams::xpushmem_team_t) -> c_int {
    let call = "xpushmemx_team_device_id";
    value(call, -1, || {
        state::with(|sh| {
            Ok(crate::teams::team(sh, team.into(), crate::teams::Api::Native, call)?.device_id())
        })
    })
}

// ---------------------------------------------------------------------------------------------------------------
// Memory management

/// Allocate `size` bytes of symmetric memory on every PE (collective, same `size` everywhere; ends with a
/// barrier). NULL for `size` 0 or on error.
#[no_mangle]
pub extern "C" fn xpushmem_malloc(size: usize) -> *mut c_void {
    value("xpushmem_malloc", std::ptr::null_mut(), || {
        imp::alloc("xpushmem_malloc", size, 1, false)
    })
}

/// Allocate `count * size` zeroed bytes of symmetric memory (collective). NULL for 0 bytes or on error.
#[no_mangle]
pub extern "C" fn xpushmem_calloc(count: usize, size: usize) -> *mut c_void {
    let call = "xpushmem_calloc";
    value(call, std::ptr::null_mut(), || {
        let bytes = count.checked_mul(size).ok_or_else(|| {
            invalid(
                "count",
                count,
                format!("{call}: count * size ({count} * {size}) overflows"),
            )
        })?;
        imp::alloc(call, bytes, 1, true)
    })
}

/// Allocate `size` bytes aligned to `alignment` (a power of two) on every PE (collective). NULL on error.
#[no_mangle]
pub extern "C" fn xpushmem_align(alignment: usize, size: usize) -> *mut c_void {
    value("xpushmem_align", std::ptr::null_mut(), || {
        imp::alloc("xpushmem_align", size, alignment.max(1), false)
    })
}

/// Resize a symmetric allocation (collective): a new block with the old contents (up to the smaller size); the
/// old one is freed. NULL `ptr` allocates. NULL on error (the old block stays valid).
#[no_mangle]
pub extern "C" fn xpushmem_realloc(ptr: *mut c_void, size: usize) -> *mut c_void {
    value("xpushmem_realloc", std::ptr::null_mut(), || {
        imp::realloc("xpushmem_realloc", ptr, size)
    })
}

/// Free a symmetric allocation (collective; starts with a barrier). NULL frees nothing. Returns an error code.
#[no_mangle]
pub extern "C" fn xpushmem_free(ptr: *mut c_void) -> c_int {
    code("xpushmem_free", || imp::free("xpushmem_free", ptr))
}

/// The address at which PE `pe`'s copy of the symmetric `dest` can be loaded from and stored to directly, or
/// NULL when `pe` is not reachable that way (or on error).
#[no_mangle]
pub extern "C" fn xpushmem_ptr(dest: *const c_void, pe: c_int) -> *mut c_void {
    value("xpushmem_ptr", std::ptr::null_mut(), || {
        imp::ptr("xpushmem_ptr", dest, pe)
    })
}

// ---------------------------------------------------------------------------------------------------------------
// Ordering and barriers

/// Order the puts, AMOs and signals issued before it to each PE before those issued after it. Returns an error
/// code.
#[no_mangle]
pub extern "C" fn xpushmem_fence() -> c_int {
    code("xpushmem_fence", || state::with(|sh| Ok(sh.fence()?)))
}

/// Complete every put, AMO and signal this PE has issued. Returns an error code.
#[no_mangle]
pub extern "C" fn xpushmem_quiet() -> c_int {
    code("xpushmem_quiet", || state::with(|sh| Ok(sh.quiet()?)))
}

/// Complete outstanding operations, then synchronise all PEs (collective). Returns an error code.
#[no_mangle]
pub extern "C" fn xpushmem_barrier_all() -> c_int {
    code("xpushmem_barrier_all", || {
        state::with(|sh| Ok(sh.barrier_all()?))
    })
}

/// Synchronise all PEs without completing outstanding operations (collective). Returns an error code.
#[no_mangle]
pub extern "C" fn xpushmem_sync_all() -> c_int {
    code("xpushmem_sync_all", || state::with(|sh| Ok(sh.sync_all()?)))
}

// ---------------------------------------------------------------------------------------------------------------
// Signals

/// Atomically read this PE's signal word `sig_addr` (0 on error).
///
/// # Safety
/// `sig_addr` is a symmetric address (checked).
#[no_mangle]
pub unsafe extern "C" fn xpushmem_signal_fetch(sig_addr: *const u64) -> u64 {
    value("xpushmem_signal_fetch", 0, || {
        imp::signal_fetch("xpushmem_signal_fetch", sig_addr)
    })
}

/// `xpushmem_signal_fetch` with the value in `*value`. Returns an error code.
///
/// # Safety
/// `value` writable (or NULL); `sig_addr` symmetric (checked).
#[no_mangle]
pub unsafe extern "C" fn xpushmem_signal_fetch_ex(value: *mut u64, sig_addr: *const u64) -> c_int {
    code("xpushmem_signal_fetch_ex", || {
        let v = imp::signal_fetch("xpushmem_signal_fetch_ex", sig_addr)?;
        // SAFETY: the caller's contract on `value`.
        unsafe { write_out(value, v) };
        Ok(())
    })
}

/// Atomically move the `uint32_t` at `dest` on `pe` from `cond` to `value`, retrying with the runtime's wait
/// back-off until it holds `cond`. Bounded by `timeout_ms` (0: `XPUSHMEM_TIMEOUT_MS`); like every wait it fails
/// with `XPUSHMEM_ERROR_TIMEOUT` when the limit passes and `XPUSHMEM_ERROR_PEER_LOST` when a PE it waits for is lost.
/// Returns an error code.
///
/// # Safety
/// `dest` is a symmetric address (checked).
#[no_mangle]
pub unsafe extern "C" fn xpushmemx_uint32_atomic_compare_swap_until(
    dest: *mut u32,
    cond: u32,
    value: u32,
    pe: c_int,
    timeout_ms: u64,
) -> c_int {
    const CALL: &str = "xpushmemx_uint32_atomic_compare_swap_until";
    code(CALL, || {
        state::with(|sh| {
            let pe = imp::pe_arg(sh, pe, CALL)?;
            let r = imp::sym_ref(sh, dest.cast_const(), CALL, "dest")?;
            let limit = (timeout_ms > 0).then(|| std::time::Duration::from_millis(timeout_ms));
            Ok(sh.atomic_compare_swap_until(r, cond, value, pe, limit)?)
        })
    })
}

/// Wait until this PE's signal word satisfies `*sig_addr <cmp> cmp_value`; the value that satisfied it (0 on
/// error).
///
/// # Safety
/// `sig_addr` is a symmetric address (checked).
#[no_mangle]
pub unsafe extern "C" fn xpushmem_signal_wait_until(
    sig_addr: *mut u64,
    cmp: c_int,
    cmp_value: u64,
) -> u64 {
    value("xpushmem_signal_wait_until", 0, || {
        imp::signal_wait_until("xpushmem_signal_wait_until", sig_addr, cmp, cmp_value)
    })
}

/// `xpushmem_signal_wait_until` with the satisfying value in `*value`. Returns an error code.
///
/// # Safety
/// `value` writable (or NULL); `sig_addr` symmetric (checked).
#[no_mangle]
pub unsafe extern "C" fn xpushmem_signal_wait_until_ex(
    value: *mut u64,
    sig_addr: *mut u64,
    cmp: c_int,
    cmp_value: u64,
) -> c_int {
    code("xpushmem_signal_wait_until_ex", || {
        let v = imp::signal_wait_until("xpushmem_signal_wait_until_ex", sig_addr, cmp, cmp_value)?;
        // SAFETY: the caller's contract on `value`.
        unsafe { write_out(value, v) };
        Ok(())
    })
}

fn invalid(
    name: &'static str,
    value: impl std::fmt::Display,
    reason: impl Into<String>,
) -> Failure {
    xpushmem_rt::Error::invalid(name, value, reason).into()
}

// ---------------------------------------------------------------------------------------------------------------
// Typed and sized families (macro-generated; their C declarations are generated from the same type lists)

crate::for_rma_types!(crate::rma_typed; xpushmem [], c_int, crate::error::code);
crate::for_longdouble!(crate::rma_typed; xpushmem [], c_int, crate::error::code);
crate::for_rma_types!(crate::rma_pg; xpushmem [], c_int, crate::error::code);
crate::for_rma_types!(crate::rma_g_ex; xpushmem);
crate::for_longdouble!(crate::rma_g_ex; xpushmem);
crate::for_sizes!(crate::rma_sized; xpushmem [], c_int, crate::error::code);
crate::rma_mem!(xpushmem [], c_int, crate::error::code);

crate::for_amo_std_types!(crate::amo_ext; xpushmem [], c_int, crate::error::code, _ex, c_int, crate::error::code);
crate::for_amo_float_types!(crate::amo_ext; xpushmem [], c_int, crate::error::code, _ex, c_int, crate::error::code);
crate::for_amo_std_types!(crate::amo_std; xpushmem [], c_int, crate::error::code, _ex, c_int, crate::error::code);
crate::for_amo_bitwise_types!(crate::amo_bitwise; xpushmem [], c_int, crate::error::code, _ex, c_int, crate::error::code, and, And);
crate::for_amo_bitwise_types!(crate::amo_bitwise; xpushmem [], c_int, crate::error::code, _ex, c_int, crate::error::code, or, Or);
crate::for_amo_bitwise_types!(crate::amo_bitwise; xpushmem [], c_int, crate::error::code, _ex, c_int, crate::error::code, xor, Xor);

crate::for_amo_std_types!(crate::sync_typed; xpushmem, c_int, crate::error::code);
crate::for_amo_std_types!(crate::sync_ex; xpushmem);
crate::for_amo_std_types!(crate::sync_ex; @set xpushmem, wait_until_any, Any, false, false, false);
crate::for_amo_std_types!(crate::sync_ex; @set xpushmem, wait_until_any_vector, Any, false, true, false);
crate::for_amo_std_types!(crate::sync_ex; @set xpushmem, wait_until_some, Some, false, false, true);
crate::for_amo_std_types!(crate::sync_ex; @set xpushmem, wait_until_some_vector, Some, false, true, true);
crate::for_amo_std_types!(crate::sync_ex; @set xpushmem, test_all, All, true, false, false);
crate::for_amo_std_types!(crate::sync_ex; @set xpushmem, test_all_vector, All, true, true, false);
crate::for_amo_std_types!(crate::sync_ex; @set xpushmem, test_any, Any, true, false, false);
crate::for_amo_std_types!(crate::sync_ex; @set xpushmem, test_any_vector, Any, true, true, false);
crate::for_amo_std_types!(crate::sync_ex; @set xpushmem, test_some, Some, true, false, true);
crate::for_amo_std_types!(crate::sync_ex; @set xpushmem, test_some_vector, Some, true, true, true);
