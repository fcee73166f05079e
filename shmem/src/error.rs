//! The one error type of the runtime.
//!
//! Every fallible call returns [`Result<T>`]. Messages name the argument, its value and the limit it broke, so
//! the text can be shown to a user unchanged (the C ABI and the Python package pass it through verbatim).

use std::time::Duration;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in xpushmem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A PE number outside `0..n_pes` (or outside a team).
    #[error("invalid PE {pe}: must be in [0, {n_pes}) ({context})")]
    InvalidPe {
        /// The PE that was passed (as given, so negative values survive the C ABI).
        pe: i64,
        /// Number of PEs in the world or team.
        n_pes: usize,
        /// The call or team the PE was given to.
        context: String,
    },
    /// An address that does not lie inside the symmetric heap.
    #[error("address {addr:#x} is not symmetric: the symmetric heap of this PE spans [{base:#x}, {end:#x}) ({context})")]
    NotSymmetric {
        /// The offending address.
        addr: usize,
        /// Start of the local symmetric heap.
        base: usize,
        /// One past the end of the local symmetric heap.
        end: usize,
        /// The call that received the address.
        context: String,
    },
    /// A range that starts inside an object or heap but runs past its end.
    #[error(
        "out of bounds: {what} [{start}, {start}+{len}) runs past the limit {limit} ({context})"
    )]
    OutOfBounds {
        /// What the range indexes ("heap offset", "element", ...).
        what: &'static str,
        /// Start of the range.
        start: usize,
        /// Length of the range.
        len: usize,
        /// The bound it must stay within.
        limit: usize,
        /// The call that received the range.
        context: String,
    },
    /// An argument with a value the call cannot accept (sizes, alignments, strides, names).
    #[error("invalid argument {name} = {value}: {reason}")]
    InvalidArgument {
        /// Name of the argument.
        name: &'static str,
        /// Its value, rendered.
        value: String,
        /// What the value must satisfy.
        reason: String,
    },
    /// The symmetric heap cannot satisfy an allocation.
    #[error("symmetric heap exhausted: {call} of {requested} bytes (align {align}) does not fit; heap limit {heap_size} bytes ({limit}), {in_use} in use, largest free block {largest_free}")]
    HeapExhausted {
        /// The allocating call.
        call: &'static str,
        /// Bytes requested.
        requested: usize,
        /// Alignment requested.
        align: usize,
        /// The most the heap may hold (its maximum, or its fixed size).
        heap_size: usize,
        /// Where that limit comes from (the variable to raise).
        limit: &'static str,
        /// Bytes currently allocated.
        in_use: usize,
        /// Largest contiguous free block.
        largest_free: usize,
    },
    /// PEs disagree on the arguments of a collective call.
    #[error("collective mismatch in {call}: PE {pe} passed {theirs}, but PE {reference_pe} passed {ours}")]
    Mismatch {
        /// The collective call.
        call: &'static str,
        /// The first PE whose arguments differ from the reference PE's.
        pe: usize,
        /// What that PE passed.
        theirs: String,
        /// The reference PE (the lowest-numbered participant).
        reference_pe: usize,
        /// What the reference PE passed.
        ours: String,
    },
    /// A blocking call waited longer than its limit.
    #[error("timeout: {op} waited {waited:?} (limit {limit:?}, XPUSHMEM_TIMEOUT_MS){detail}")]
    Timeout {
        /// The waiting call.
        op: String,
        /// How long it waited.
        waited: Duration,
        /// The limit in force.
        limit: Duration,
        /// Extra context (what was awaited), starting with "; " when present.
        detail: String,
    },
    /// A peer PE left the job without finalize (it exited or was killed, or its init failed after it joined) while
    /// this PE depended on it.
    #[error("PE {pe} was lost (it left the job without finalize: it ended, or its init failed) while PE {me} was in {op}")]
    PeerLost {
        /// The lost PE.
        pe: usize,
        /// This PE.
        me: usize,
        /// The call that noticed.
        op: String,
    },
    /// The bootstrap (rendezvous between PEs) failed.
    #[error("bootstrap ({method}): {message}")]
    Bootstrap {
        /// Which bootstrap was in use.
        method: &'static str,
        /// What went wrong.
        message: String,
    },
    /// A transport (shared memory, fabric, copy engine) failed.
    #[error("transport {transport}: {message}")]
    Transport {
        /// Which transport.
        transport: &'static str,
        /// What went wrong.
        message: String,
    },
    /// The Level Zero device layer failed.
    #[error("device: {0}")]
    Device(String),
    /// A Level Zero call failed: which call, the `ze_result_t` it returned (rendered by name) and what it was
    /// doing. Its C error code is [`ErrorCode::Device`].
    #[error("device: {call} failed: {result}{detail}")]
    Ze {
        /// The Level Zero call (`zeMemAllocDevice`, ...), with its subject when it has one.
        call: String,
        /// What the call returned.
        result: level_zero_sys::ze_result_t,
        /// Context after the result: empty, or starting with a separator (` (kernel "k")`).
        detail: String,
    },
    /// The runtime is not initialised, or was already initialised / finalised.
    #[error("state: {0}")]
    State(String),
    /// A configuration variable has a value that cannot be used.
    #[error("configuration: {var}={value}: {reason}")]
    Config {
        /// The environment variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// Why it was rejected.
        reason: String,
    },
    /// An operating-system call failed.
    #[error("{call}: {message}")]
    Os {
        /// The system call or library function.
        call: &'static str,
        /// The OS error text.
        message: String,
    },
}

/// The stable number of each kind of error: the C ABI's `XPUSHMEM_ERROR_*` codes (checked against this enum by
/// `ffi/core`'s tests), the device library's error word, and the Python exception classes are all this one list.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// No error.
    Success = 0,
    /// [`Error::InvalidPe`].
    InvalidPe = 1,
    /// [`Error::NotSymmetric`].
    NotSymmetric = 2,
    /// [`Error::OutOfBounds`].
    OutOfBounds = 3,
    /// [`Error::InvalidArgument`].
    InvalidArgument = 4,
    /// [`Error::HeapExhausted`].
    HeapExhausted = 5,
    /// [`Error::Mismatch`].
    Mismatch = 6,
    /// [`Error::Timeout`].
    Timeout = 7,
    /// [`Error::PeerLost`].
    PeerLost = 8,
    /// [`Error::Bootstrap`].
    Bootstrap = 9,
    /// [`Error::Transport`].
    Transport = 10,
    /// [`Error::Device`].
    Device = 11,
    /// [`Error::State`].
    State = 12,
    /// [`Error::Config`].
    Config = 13,
    /// [`Error::Os`].
    Os = 14,
    /// A panic caught at a language boundary (a bug: please report it).
    Internal = 15,
    /// The call is not supported by this build or platform.
    Unsupported = 16,
}

impl ErrorCode {
    /// Every code, in numeric order.
    pub const ALL: [ErrorCode; 17] = [
        ErrorCode::Success,
        ErrorCode::InvalidPe,
        ErrorCode::NotSymmetric,
        ErrorCode::OutOfBounds,
        ErrorCode::InvalidArgument,
        ErrorCode::HeapExhausted,
        ErrorCode::Mismatch,
        ErrorCode::Timeout,
        ErrorCode::PeerLost,
        ErrorCode::Bootstrap,
        ErrorCode::Transport,
        ErrorCode::Device,
        ErrorCode::State,
        ErrorCode::Config,
        ErrorCode::Os,
        ErrorCode::Internal,
        ErrorCode::Unsupported,
    ];

    /// The code with this number, if any.
    pub fn from_i32(n: i32) -> Option<ErrorCode> {
        usize::try_from(n)
            .ok()
            .and_then(|i| Self::ALL.get(i).copied())
    }

    /// Its short stable name (`"InvalidPe"`, ...): the error kind in the C ABI and in Python.
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::Success => "Success",
            ErrorCode::InvalidPe => "InvalidPe",
            ErrorCode::NotSymmetric => "NotSymmetric",
            ErrorCode::OutOfBounds => "OutOfBounds",
            ErrorCode::InvalidArgument => "InvalidArgument",
            ErrorCode::HeapExhausted => "HeapExhausted",
            ErrorCode::Mismatch => "Mismatch",
            ErrorCode::Timeout => "Timeout",
            ErrorCode::PeerLost => "PeerLost",
            ErrorCode::Bootstrap => "Bootstrap",
            ErrorCode::Transport => "Transport",
            ErrorCode::Device => "Device",
            ErrorCode::State => "State",
            ErrorCode::Config => "Config",
            ErrorCode::Os => "Os",
            ErrorCode::Internal => "Internal",
            ErrorCode::Unsupported => "Unsupported",
        }
    }
}

impl Error {
    /// The stable code of this error's kind.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::InvalidPe { .. } => ErrorCode::InvalidPe,
            Error::NotSymmetric { .. } => ErrorCode::NotSymmetric,
            Error::OutOfBounds { .. } => ErrorCode::OutOfBounds,
            Error::InvalidArgument { .. } => ErrorCode::InvalidArgument,
            Error::HeapExhausted { .. } => ErrorCode::HeapExhausted,
            Error::Mismatch { .. } => ErrorCode::Mismatch,
            Error::Timeout { .. } => ErrorCode::Timeout,
            Error::PeerLost { .. } => ErrorCode::PeerLost,
            Error::Bootstrap { .. } => ErrorCode::Bootstrap,
            Error::Transport { .. } => ErrorCode::Transport,
            Error::Device(_) | Error::Ze { .. } => ErrorCode::Device,
            Error::State(_) => ErrorCode::State,
            Error::Config { .. } => ErrorCode::Config,
            Error::Os { .. } => ErrorCode::Os,
        }
    }

    /// A short stable name of the variant, used as the error kind in the C ABI and in Python.
    pub fn kind(&self) -> &'static str {
        self.code().name()
    }

    /// The `ze_result_t` of a failed Level Zero call ([`Error::Ze`]), `None` for any other error.
    pub fn ze_result(&self) -> Option<level_zero_sys::ze_result_t> {
        match self {
            Error::Ze { result, .. } => Some(*result),
            _ => None,
        }
    }

    /// The error of a failed operating-system call `call`, with the system's message.
    pub fn os(call: &'static str, err: impl std::fmt::Display) -> Error {
        Error::Os {
            call,
            message: err.to_string(),
        }
    }

    /// An [`Error::InvalidArgument`] naming the argument `name`, its `value` and what it must satisfy: the one
    /// constructor every layer (runtime, ops, C ABI) uses.
    pub fn invalid(
        name: &'static str,
        value: impl std::fmt::Display,
        reason: impl Into<String>,
    ) -> Error {
        Error::InvalidArgument {
            name,
            value: value.to_string(),
            reason: reason.into(),
        }
    }
}

/// A warning that an outsider can make repeat (a refused connection): logged at most once per [`Throttle::EVERY`],
/// each line saying how many occurrences were not logged since the previous one, so a flood of connections writes
/// a few lines instead of one per connection.
#[derive(Debug)]
pub(crate) struct Throttle {
    /// When the last line was logged (`None`: never), and the occurrences since then that were not.
    state: std::sync::Mutex<(Option<std::time::Instant>, u64)>,
}

impl Throttle {
    /// The least time between two lines of one throttled warning.
    pub(crate) const EVERY: Duration = Duration::from_secs(1);

    /// A throttle that has logged nothing yet (usable as a `static`).
    pub(crate) const fn new() -> Throttle {
        Throttle {
            state: std::sync::Mutex::new((None, 0)),
        }
    }

    /// One occurrence now: `Some(n)` when it is to be logged, `n` being how many occurrences since the last logged
    /// one were not; `None` when it is to be counted only.
    pub(crate) fn note(&self) -> Option<u64> {
        self.note_at(std::time::Instant::now())
    }

    fn note_at(&self, now: std::time::Instant) -> Option<u64> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match s.0 {
            Some(last) if now.saturating_duration_since(last) < Self::EVERY => {
                s.1 += 1;
                None
            }
            _ => {
                let skipped = s.1;
                *s = (Some(now), 0);
                Some(skipped)
            }
        }
    }
}

/// An error unless `[off, off + len)` lies inside a window of `size` bytes and `off` is a multiple of `align`.
#[inline]
pub(crate) fn check_access(
    transport: &'static str,
    what: &str,
    off: usize,
    len: usize,
    align: usize,
    size: usize,
) -> Result<()> {
    if off.checked_add(len).is_none_or(|e| e > size) || off % align != 0 {
        return Err(access_error(transport, what, off, len, align, size));
    }
    Ok(())
}

/// The error of a failed [`check_access`] (out of line: the check is on every operation's path, its error is not).
#[cold]
#[inline(never)]
fn access_error(
    transport: &'static str,
    what: &str,
    off: usize,
    len: usize,
    align: usize,
    size: usize,
) -> Error {
    Error::Transport {
        transport,
        message: format!(
            "{what} [{off}, +{len}) with alignment {align} outside a {size}-byte window"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_flood_of_occurrences_logs_one_line_per_second_with_the_count() {
        let t = Throttle::new();
        let start = Instant::now();
        // 100 000 occurrences spread evenly over 2.5 s: lines at 0 s, 1 s and 2 s only.
        let n = 100_000u64;
        let mut lines = Vec::new();
        for i in 0..n {
            let at = start + Duration::from_micros(i * 25);
            if let Some(skipped) = t.note_at(at) {
                lines.push(skipped);
            }
        }
        assert_eq!(lines.len(), 3, "{lines:?}");
        // Every occurrence is either logged or counted in a later line (the ones after the last line are pending).
        let pending = t.state.lock().unwrap().1;
        assert_eq!(lines.len() as u64 + lines.iter().sum::<u64>() + pending, n);
        assert_eq!(lines[0], 0);
        assert_eq!(lines[1], 40_000 - 1);
    }
}
