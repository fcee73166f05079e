//! Transports move bytes between PEs. Each is a leaf: the only place (with `device/` and the FFI) where raw memory
//! is touched, each `unsafe` block justified in place.
//!
//! - [`shm`]: same node, CPU memory. Every PE's heap is a memfd; the fds travel over a Unix socket (SCM_RIGHTS) and
//!   every PE maps every node peer's heap, so a put is a `memcpy` and an atomic is a CPU atomic on the peer's page.

pub mod shm;

/// Operations of the atomic memory interface, applied by a transport to one 4- or 8-byte word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmoOp {
    /// Read the word.
    Fetch,
    /// Write the operand.
    Set,
    /// Write the operand, return the old value.
    Swap,
    /// Write the operand if the word equals `cond`; return the old value.
    CompareSwap {
        /// Expected value.
        cond: u64,
    },
    /// Wrapping add.
    FetchAdd,
    /// Bitwise and.
    FetchAnd,
    /// Bitwise or.
    FetchOr,
    /// Bitwise xor.
    FetchXor,
}
