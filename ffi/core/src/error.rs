//! Error codes, the per-thread last error, the error mode, and the panic firewall every exported function goes
//! through.
//!
//! Every exported function runs its body inside [`code`], [`value`] or [`void`]: the body returns a
//! [`xpushmem::Result`]; a Rust panic is caught (`catch_unwind`) and turned into [`XPUSHMEM_ERROR_INTERNAL`]; an
//! error is recorded for the calling thread (code + message, read back with `xpushmem_last_error()`), and in abort
//! mode printed and followed by `abort()`.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use xpushmem_rt::{Error, ErrorCode};

/// Success.
pub const XPUSHMEM_SUCCESS: c_int = 0;
/// A PE number outside `[0, n_pes)` (negative PEs included).
pub const XPUSHMEM_ERROR_INVALID_PE: c_int = 1;
/// An address outside the symmetric heap where a symmetric address is required.
pub const XPUSHMEM_ERROR_NOT_SYMMETRIC: c_int = 2;
/// A range that runs past the end of the heap or of an object.
pub const XPUSHMEM_ERROR_OUT_OF_BOUNDS: c_int = 3;
/// An argument with a value the call cannot accept (NULL pointer, bad comparison operator, stride, ...).
pub const XPUSHMEM_ERROR_INVALID_ARGUMENT: c_int = 4;
/// The symmetric heap cannot satisfy an allocation (`XPUSHMEM_SYMMETRIC_SIZE`).
pub const XPUSHMEM_ERROR_HEAP_EXHAUSTED: c_int = 5;
/// PEs passed different arguments to a collective call.
pub const XPUSHMEM_ERROR_MISMATCH: c_int = 6;
/// A blocking call waited longer than `XPUSHMEM_TIMEOUT_MS`.
pub const XPUSHMEM_ERROR_TIMEOUT: c_int = 7;
/// A peer PE exited without finalizing while this PE depended on it.
pub const XPUSHMEM_ERROR_PEER_LOST: c_int = 8;
/// The bootstrap (rendezvous of the PEs) failed.
pub const XPUSHMEM_ERROR_BOOTSTRAP: c_int = 9;
/// A transport (shared memory, fabric) failed, or a PE cannot be reached.
pub const XPUSHMEM_ERROR_TRANSPORT: c_int = 10;
/// The device (Level Zero) layer failed.
pub const XPUSHMEM_ERROR_DEVICE: c_int = 11;
/// The library is in the wrong state for the call (not initialised, already finalized, ...).
pub const XPUSHMEM_ERROR_STATE: c_int = 12;
/// A configuration variable (`XPUSHMEM_*`) has an unusable value.
pub const XPUSHMEM_ERROR_CONFIG: c_int = 13;
/// An operating-system call failed.
pub const XPUSHMEM_ERROR_OS: c_int = 14;
/// An internal error: a Rust panic was caught at the C boundary (please report it).
pub const XPUSHMEM_ERROR_INTERNAL: c_int = 15;
/// The call is not supported by this build or platform.
pub const XPUSHMEM_ERROR_UNSUPPORTED: c_int = 16;

/// Error mode: failing calls return an error code (the default of the native API).
pub const XPUSHMEMX_ERROR_MODE_RETURN: c_int = 0;
/// Error mode: a failing call prints its message to stderr and aborts the process (classic SHMEM).
pub const XPUSHMEMX_ERROR_MODE_ABORT: c_int = 1;

/// 0 = not decided yet (read `XPUSHMEM_ERROR_MODE` on first use), 1 = return, 2 = abort.
static MODE: AtomicU8 = AtomicU8::new(0);

/// This process's PE number while the runtime runs (set by `state::init`, cleared at finalize), for abort
/// messages; `u64::MAX` when there is none.
static PE: AtomicU64 = AtomicU64::new(u64::MAX);

/// Set (or clear) the PE number that abort messages print.
pub fn set_pe(pe: Option<usize>) {
    PE.store(pe.map_or(u64::MAX, |p| p as u64), Ordering::Relaxed);
}

thread_local! {
    static LAST: RefCell<(c_int, CString)> = RefCell::new((XPUSHMEM_SUCCESS, CString::default()));
}

/// The C error code of a runtime error ([`Error::code`]: one numbering for Rust, C, the device and Python).
pub fn code_of(e: &Error) -> c_int {
    e.code() as c_int
}

/// The short name of an error code (`"InvalidPe"`, ...), `"Success"` for 0, `"Unknown"` otherwise.
pub fn code_name(code: c_int) -> &'static str {
    ErrorCode::from_i32(code).map_or("Unknown", ErrorCode::name)
}

/// The error mode before init when `XPUSHMEM_ERROR_MODE` is unset: abort in the OpenSHMEM library (set by its
/// load-time constructor), return in the native one.
static LAYER_ABORT: AtomicBool = AtomicBool::new(false);

/// Set the error mode in force before init when `XPUSHMEM_ERROR_MODE` is unset (the library's default).
pub fn set_layer_default(abort: bool) {
    LAYER_ABORT.store(abort, Ordering::Relaxed);
}

/// Whether failing calls abort. Decided by [`set_mode`] (at init, from `XPUSHMEM_ERROR_MODE`) or, before that,
/// by the environment, else by the library's default ([`set_layer_default`]).
pub fn abort_mode() -> bool {
    match MODE.load(Ordering::Relaxed) {
        1 => false,
        2 => true,
        _ => {
            let Some(v) = xpushmem_rt::config::env_value("XPUSHMEM_ERROR_MODE") else {
                return LAYER_ABORT.load(Ordering::Relaxed);
            };
            let abort = v.trim().eq_ignore_ascii_case("abort");
            // Only a cache: a later set_mode wins.
            let _ = MODE.compare_exchange(
                0,
                if abort { 2 } else { 1 },
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            abort
        }
    }
}

/// Set the error mode (abort or return) for the whole process.
pub fn set_mode(abort: bool) {
    MODE.store(if abort { 2 } else { 1 }, Ordering::Relaxed);
}

/// The code of the calling thread's last failed call (0 if none failed yet or after [`clear`]).
pub fn last_code() -> c_int {
    LAST.with(|l| l.borrow().0)
}

/// A pointer to the calling thread's last error message (`""` if none). Valid until the thread's next failing
/// call or [`clear`].
pub fn last_message_ptr() -> *const c_char {
    LAST.with(|l| l.borrow().1.as_ptr())
}

/// Forget the calling thread's last error.
pub fn clear() {
    LAST.with(|l| *l.borrow_mut() = (XPUSHMEM_SUCCESS, CString::default()));
}

/// A failure of an exported call: a runtime error, or a caught panic.
#[derive(Debug)]
pub enum Failure {
    /// An error returned by the runtime or by argument validation.
    Error(Error),
    /// A Rust panic caught at the boundary, with its message.
    Panic(String),
    /// The call is not supported; the text says why.
    Unsupported(String),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::Error(e)
    }
}

/// Record a failure of `call` for this thread (and abort in abort mode); its error code.
pub fn fail(call: &str, f: Failure) -> c_int {
    let (code, text) = describe(call, &f);
    if abort_mode() {
        abort_with(code, &text);
    }
    remember(code, &text)
}

/// Record a failure of `call` for this thread and return its code, *without* aborting whatever the mode: for the
/// cases where the OpenSHMEM specification defines a status return (an invalid team handle given to a split,
/// a context that cannot be created, ...).
pub fn record(call: &str, f: Failure) -> c_int {
    let (code, text) = describe(call, &f);
    remember(code, &text)
}

fn describe(call: &str, f: &Failure) -> (c_int, String) {
    match f {
        Failure::Error(e) => (code_of(e), format!("{call}: {e}")),
        Failure::Panic(m) => (
            XPUSHMEM_ERROR_INTERNAL,
            format!("{call}: internal error (a Rust panic was caught at the C boundary): {m}"),
        ),
        Failure::Unsupported(m) => (
            XPUSHMEM_ERROR_UNSUPPORTED,
            format!("{call}: not supported: {m}"),
        ),
    }
}

/// [`run`] for the calls whose failures the OpenSHMEM specification defines as a status return: a failure is
/// recorded ([`record`]) but never aborts.
pub fn run_status<R>(call: &str, f: impl FnOnce() -> Result<R, Failure>) -> Result<R, c_int> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) => Err(record(call, e)),
        Err(p) => Err(fail(call, Failure::Panic(panic_text(p)))),
    }
}

fn remember(code: c_int, text: &str) -> c_int {
    let c = CString::new(text.replace('\0', " ")).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = (code, c));
    code
}

fn abort_with(code: c_int, text: &str) -> ! {
    let pe = match PE.load(Ordering::Relaxed) {
        u64::MAX => "?".to_string(),
        p => p.to_string(),
    };
    eprintln!(
        "xpushmem: PE {pe}: fatal error ({}): {text}",
        code_name(code)
    );
    eprintln!("xpushmem: aborting (XPUSHMEM_ERROR_MODE=abort)");
    std::process::abort();
}

fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".to_string()
    }
}

/// Run `f` behind the panic firewall; `Err` carries a recorded failure's code.
pub fn run<R>(call: &str, f: impl FnOnce() -> Result<R, Failure>) -> Result<R, c_int> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) => Err(fail(call, e)),
        Err(p) => Err(fail(call, Failure::Panic(panic_text(p)))),
    }
}

/// For calls that return an error code: 0 on success, the code otherwise.
pub fn code(call: &str, f: impl FnOnce() -> Result<(), Failure>) -> c_int {
    match run(call, f) {
        Ok(()) => XPUSHMEM_SUCCESS,
        Err(c) => c,
    }
}

/// For calls that return a value: the value, or `fallback` on failure (the failure is recorded).
pub fn value<R>(call: &str, fallback: R, f: impl FnOnce() -> Result<R, Failure>) -> R {
    run(call, f).unwrap_or(fallback)
}

/// For calls with no result (the OpenSHMEM `void` signatures): the failure is recorded (or aborts).
pub fn void(call: &str, f: impl FnOnce() -> Result<(), Failure>) {
    let _ = run(call, f);
}

/// Write `v` through an out-pointer if it is not NULL.
///
/// # Safety
/// `out` is NULL or valid for a write of `T`.
pub unsafe fn write_out<T>(out: *mut T, v: T) {
    if !out.is_null() {
        // SAFETY: the caller guarantees `out` is NULL (excluded above) or valid for writes of T.
        unsafe { out.write(v) };
    }
}
