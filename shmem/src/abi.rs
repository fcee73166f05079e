//! Layouts and codes shared between Rust and C (the device library, kernels): the one source of truth.
//!
//! This module has no dependencies on the rest of the crate. The C header the device library includes,
//! `shmem/device-lib/include/xpushmem_device_abi.h`, is generated from this file with cbindgen (test
//! `ffi/tests/device_abi.rs`, which also compiles `_Static_assert(offsetof(...))` checks with clang-14 for the
//! spir64 target against the offsets Rust computes), so a drift between the two languages fails a test.
//!
//! The per-module device state ([`DeviceState`]) is a program-scope global of the device library named
//! [`XPUSHMEM_DEVICE_STATE_SYMBOL`]; the host fills it after the module is created (`Device::init_module`,
//! `xpushmemx_ze_module_init`) and reads its error words after each launch. What changes after that (the team
//! table, barrier counters, heap bases) lives in the scratch tail of every PE's heap ([`ScratchLayout`]), which the
//! state points at, so a team created after a module was initialised is visible to it.

/// Version of this ABI; the host refuses a module whose library was built against another one.
pub const XPUSHMEM_DEVICE_ABI_VERSION: u32 = 6;

/// `DeviceState::magic` of an initialised state ("XPUS").
pub const XPUSHMEM_DEVICE_STATE_MAGIC: u32 = 0x5355_5058;

/// Name of the device library's state global (for `zeModuleGetGlobalPointer`).
pub const XPUSHMEM_DEVICE_STATE_SYMBOL: &str = "xpushmem_device_state";

/// Where the device library's words lie in the scratch tail that follows every PE's heap reserve (the most the heap
/// may grow to, rounded up to a device page) and, where there is one, its team space, in the same device address
/// range (the same on every PE: it depends
/// only on the PE count and the team-slot count).
///
/// A team's device number is its slot (`0` world, `1` shared, then the split teams' slots, fewer than
/// `XPUSHMEM_TEAMS_MAX`); every per-team array below has one entry per slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScratchLayout {
    /// `u64 arrive[n_teams]`: arrivals at this PE's device barrier of each team (every member adds 1 per barrier).
    pub arrive: usize,
    /// `u64 epoch[n_teams]`: device barriers this PE has completed on each team.
    pub epoch: usize,
    /// `DeviceTeam teams[n_teams]`: this PE's teams, written by the host when a team is created or destroyed.
    pub teams: usize,
    /// `u64 bases[n_pes]`: every PE's heap base as this device sees it (0: not reachable).
    pub bases: usize,
    /// `u64 mapped`: bytes of the heap mapped so far (the same on every PE), written by the host at set-up and after
    /// each growth: what a device call may address, within the reserve ([`DeviceState::heap_size`]).
    pub mapped: usize,
    /// `u64 team[2]`: where the team space (team-scoped allocations) starts and where its mapped chunks end, in
    /// bytes from the heap's base (both 0: no team space), written by the host at set-up and whenever a team
    /// chunk of this PE is mapped or unmapped: what a device call may address in the team space.
    pub team: usize,
    /// [`XPUSHMEM_DEVICE_REDUCE_SCRATCH_BYTES`] bytes (page-aligned) into which a device reduction pulls the chunks
    /// of members it reaches through the host proxy (the proxy's local buffers must lie in this PE's heap
    /// allocation); one collective per PE at a time uses it.
    pub reduce: usize,
    /// Bytes of the tail (a page multiple).
    pub bytes: usize,
}

impl ScratchLayout {
    /// The layout for `n_pes` PEs and `n_teams` team slots.
    pub const fn new(n_pes: usize, n_teams: usize) -> ScratchLayout {
        let arrive = 0;
        let epoch = arrive + 8 * n_teams;
        let teams = epoch + 8 * n_teams;
        let bases = teams + std::mem::size_of::<DeviceTeam>() * n_teams;
        let mapped = bases + 8 * n_pes;
        let team = mapped + 8;
        let reduce = (team + 16).div_ceil(4096) * 4096;
        let bytes = reduce + XPUSHMEM_DEVICE_REDUCE_SCRATCH_BYTES as usize;
        ScratchLayout {
            arrive,
            epoch,
            teams,
            bases,
            mapped,
            team,
            reduce,
            bytes,
        }
    }
}

/// Bytes of the reduction scratch area ([`ScratchLayout::reduce`]): a reduction over members on other nodes pulls
/// at most this many bytes of one member's source per round trip.
pub const XPUSHMEM_DEVICE_REDUCE_SCRATCH_BYTES: u64 = 64 * 1024;

/// Team number of the world team.
pub const XPUSHMEM_TEAM_WORLD: i32 = 0;

/// Team number of the shared (node) team.
pub const XPUSHMEM_TEAM_SHARED: i32 = 1;

/// Comparison operators of waits and tests (the same values as the host C API's `XPUSHMEM_CMP_*`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceCmp {
    /// Equal.
    Eq = 0,
    /// Not equal.
    Ne = 1,
    /// Greater than.
    Gt = 2,
    /// Greater than or equal.
    Ge = 3,
    /// Less than.
    Lt = 4,
    /// Less than or equal.
    Le = 5,
}

/// Signal operations (the same values as the host C API's `XPUSHMEM_SIGNAL_*`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceSignalOp {
    /// Store the value.
    Set = 0,
    /// Add the value atomically.
    Add = 1,
}

/// Operation codes of the runtime's one-work-item atomic kernels (`xpushmem_amo32/64`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmoCode {
    /// Read the word.
    Fetch = 0,
    /// Write the operand.
    Set = 1,
    /// Exchange.
    Swap = 2,
    /// Exchange if equal to the condition.
    CompareSwap = 3,
    /// Wrapping add.
    FetchAdd = 4,
    /// Bitwise and.
    FetchAnd = 5,
    /// Bitwise or.
    FetchOr = 6,
    /// Bitwise xor.
    FetchXor = 7,
}

/// What went wrong in a device call (`DeviceState::error`); the first error of a module wins.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceError {
    /// No error.
    None = 0,
    /// A call ran before the host initialised the module's state (or with another ABI version).
    NotInitialized = 1,
    /// A wait gave up after the bound from `XPUSHMEM_TIMEOUT_MS`.
    Timeout = 2,
    /// A PE number out of range or a PE this device cannot reach.
    BadPe = 3,
    /// An address outside this PE's symmetric heap.
    NotSymmetric = 4,
    /// A team number that names no team of this PE on the device: out of range, never created, destroyed, not
    /// a member, or a team made from an explicit PE list (the device table holds strided teams only).
    BadTeam = 5,
    /// Another invalid argument (comparison or signal operator).
    BadArgument = 6,
    /// The host proxy failed a request to a PE reached through the fabric (the host error says why: a lost peer,
    /// a provider error); the argument is the PE.
    Remote = 7,
}

impl DeviceError {
    /// The code for a raw value (unknown values map to `BadArgument`).
    pub fn from_raw(v: u32) -> DeviceError {
        match v {
            0 => DeviceError::None,
            1 => DeviceError::NotInitialized,
            2 => DeviceError::Timeout,
            3 => DeviceError::BadPe,
            4 => DeviceError::NotSymmetric,
            5 => DeviceError::BadTeam,
            7 => DeviceError::Remote,
            _ => DeviceError::BadArgument,
        }
    }
}

/// Which device call recorded an error (`DeviceState::error_call`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceCall {
    /// Unknown.
    Unknown = 0,
    /// `xpushmem_ptr`.
    Ptr = 1,
    /// `xpushmem_putmem` and the typed puts.
    Put = 2,
    /// `xpushmem_getmem` and the typed gets.
    Get = 3,
    /// `xpushmem_putmem_signal`.
    PutSignal = 4,
    /// `xpushmemx_signal_op`.
    SignalOp = 5,
    /// `xpushmem_signal_wait_until`.
    SignalWaitUntil = 6,
    /// `xpushmem_TYPE_wait_until` (and `_all/_any/_some`).
    WaitUntil = 7,
    /// `xpushmem_TYPE_test`.
    Test = 8,
    /// Atomics.
    Atomic = 9,
    /// `xpushmem_barrier_all`, `xpushmem_sync_all`, `xpushmem_team_sync`.
    Barrier = 10,
    /// Work-group and sub-group collectives.
    Collective = 11,
    /// Team queries.
    Team = 12,
    /// `xpushmem_my_pe`, `xpushmem_n_pes`.
    Query = 13,
    /// `xpushmem_fence`, `xpushmem_quiet`.
    Order = 14,
    /// `xpushmem_team_sync` and `xpushmemx_team_sync_work_group`.
    TeamSync = 15,
    /// Waiting for the host proxy (a full ring, a request's completion).
    Proxy = 16,
}

impl DeviceCall {
    /// The call's name in error messages.
    pub fn from_raw(v: u32) -> &'static str {
        match v {
            1 => "xpushmem_ptr",
            2 => "xpushmem_putmem",
            3 => "xpushmem_getmem",
            4 => "xpushmem_putmem_signal",
            5 => "xpushmemx_signal_op",
            6 => "xpushmem_signal_wait_until",
            7 => "xpushmem_wait_until",
            8 => "xpushmem_test",
            9 => "a device atomic",
            10 => "xpushmem_barrier_all/sync_all",
            11 => "a work-group or sub-group collective",
            12 => "a team query",
            13 => "xpushmem_my_pe/n_pes",
            14 => "xpushmem_fence/quiet",
            15 => "xpushmem_team_sync",
            16 => "a host proxy request",
            _ => "an unknown device call",
        }
    }
}

/// One team as the device sees it: PEs `start + i * stride` for `i < size`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceTeam {
    /// First world PE.
    pub start: i32,
    /// Distance between members (0 with `size > 0`: a team of an explicit PE list, not usable on the device).
    pub stride: i32,
    /// Number of members (0: no team in this slot).
    pub size: i32,
    /// This PE's number in the team.
    pub my_pe: i32,
}

/// The per-module device state (the library's global [`XPUSHMEM_DEVICE_STATE_SYMBOL`]).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DeviceState {
    /// [`XPUSHMEM_DEVICE_STATE_MAGIC`] once the host has initialised the state.
    pub magic: u32,
    /// [`XPUSHMEM_DEVICE_ABI_VERSION`] of the host that wrote it.
    pub abi_version: u32,
    /// This PE.
    pub my_pe: i32,
    /// Number of PEs.
    pub n_pes: i32,
    /// Bytes of every PE's heap reserve (the most it may grow to, `Shmem::heap_max`), fixed at init; the team space
    /// ([`DeviceState::team_range`]) and the scratch tail follow it. Device calls address the part mapped so far ([`DeviceState::heap_mapped`]), within it.
    pub heap_size: u64,
    /// Device address of `u64 bases[n_pes]` ([`ScratchLayout::bases`] of this PE's tail).
    pub bases: u64,
    /// Device address of this PE's heap base.
    pub my_base: u64,
    /// Offset of the `arrive` counters ([`ScratchLayout::arrive`]) from every PE's heap base.
    pub scratch_offset: u64,
    /// Polls (with back-off) before a wait gives up, from `XPUSHMEM_TIMEOUT_MS`.
    pub timeout_polls: u64,
    /// Team slots (`XPUSHMEM_TEAMS_MAX`): valid team numbers are `0..n_teams`.
    pub n_teams: i32,
    /// Padding.
    pub reserved: i32,
    /// Device address of this PE's `DeviceTeam teams[n_teams]` ([`ScratchLayout::teams`]), kept by the host.
    pub teams: u64,
    /// Device address of this PE's `u64 epoch[n_teams]` ([`ScratchLayout::epoch`]).
    pub epoch: u64,
    /// First error a device call recorded ([`DeviceError`]); 0 = none.
    pub error: u32,
    /// The call that recorded it ([`DeviceCall`]).
    pub error_call: u32,
    /// Detail (a PE, a team, an address, a value) of the error.
    pub error_arg: i64,
    /// Host address (visible to kernels) of this PE's host proxy ring ([`ProxyRing`]), 0 when every PE is
    /// mapped: a PE whose base is 0 is then reached through the ring, else it is `BadPe`.
    pub proxy: u64,
    /// Device address of this PE's `mapped` word ([`ScratchLayout::mapped`]): the bytes of every PE's heap mapped
    /// so far, which device calls check addresses against; it changes as the heap grows, while a module keeps the
    /// state of its initialisation.
    pub heap_mapped: u64,
    /// Device address of this PE's team-space words ([`ScratchLayout::team`]): the team space's start and the end
    /// of this PE's mapped team chunks (bytes from the heap's base), which device calls check team-space addresses
    /// against.
    pub team_range: u64,
    /// Device address of this PE's reduction scratch area ([`ScratchLayout::reduce`],
    /// [`XPUSHMEM_DEVICE_REDUCE_SCRATCH_BYTES`] bytes).
    pub reduce_scratch: u64,
}

/// Operation codes of host proxy requests ([`ProxyRequest::op`]).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyOp {
    /// Put `len` bytes from device address `src` to heap offset `dst` of `pe`.
    Put = 1,
    /// Put as [`ProxyOp::Put`], then apply `sig_op` with `value` to the signal at heap offset `sig` of `pe`.
    PutSignal = 2,
    /// Apply `sig_op` with `value` to the 64-bit word at heap offset `sig` of `pe` (signals, non-fetching adds).
    Signal = 3,
    /// Get `len` bytes from heap offset `src` of `pe` to device address `dst`.
    Get = 4,
    /// Put the `len` (1, 2, 4 or 8) low bytes of `value` to heap offset `dst` of `pe` (`xpushmem_TYPE_p`).
    PutValue = 5,
    /// The atomic `sig_op` ([`AmoCode`]) on the `len`-byte (4 or 8) word at heap offset `dst` of `pe`, with
    /// operand `value` and compare value `sig`. The proxy answers in the entry itself: the previous value in `src`,
    /// then `seq = (ticket + 1) | XPUSHMEM_PROXY_DONE`; the kernel acknowledges by storing 0 in `seq`, and until
    /// then the entry (and every later one) stays taken.
    Amo = 6,
    /// Read the `len` (1, 2, 4 or 8) bytes at heap offset `src` of `pe` (`xpushmem_TYPE_g`), answered in the entry
    /// as [`ProxyOp::Amo`] is (the bytes, little-endian, in `src`).
    GetValue = 7,
}

impl ProxyOp {
    /// Whether the proxy answers a request of op code `op` in its entry (the kernel waits for the answer and
    /// acknowledges it).
    pub fn answered(op: u32) -> bool {
        op == ProxyOp::Amo as u32 || op == ProxyOp::GetValue as u32
    }
}

/// Bit of [`ProxyRequest::seq`] with which the proxy marks an answered [`ProxyOp::Amo`].
pub const XPUSHMEM_PROXY_DONE: u64 = 0x8000_0000_0000_0000;

/// One request in the host proxy ring (64 bytes). A producer (a work-item) takes ticket `t` from
/// [`ProxyRing::head`], waits until `t - tail < capacity`, fills entry `t % capacity` and publishes it by storing
/// `t + 1` in `seq` (release). The proxy processes entries in ticket order.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProxyRequest {
    /// `ticket + 1` once the entry is filled (written last).
    pub seq: u64,
    /// [`ProxyOp`].
    pub op: u32,
    /// Target PE.
    pub pe: i32,
    /// Destination: a heap offset on `pe` (puts) or a device address of this PE (gets).
    pub dst: u64,
    /// Source: a device address of this PE (puts) or a heap offset on `pe` (gets).
    pub src: u64,
    /// Bytes.
    pub len: u64,
    /// Heap offset on `pe` of the signal word.
    pub sig: u64,
    /// Signal value, or the value of a `PutValue`.
    pub value: u64,
    /// [`DeviceSignalOp`].
    pub sig_op: u32,
    /// Padding.
    pub reserved: u32,
}

/// Header of the host proxy ring (in host memory kernels can access); `capacity` entries of [`ProxyRequest`]
/// follow it at byte [`XPUSHMEM_PROXY_ENTRIES_OFFSET`].
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProxyRing {
    /// Next ticket (producers add 1 atomically).
    pub head: u64,
    /// Entries the proxy has taken (an entry with ticket `t` may be refilled once `tail > t`).
    pub tail: u64,
    /// Requests complete (delivered at the target, gets' data written): every ticket below this value.
    pub completed: u64,
    /// Entries (a power of two).
    pub capacity: u64,
    /// First failure of a request (a [`DeviceError`], `Remote`), 0 = none; kept until the host reports it.
    pub error: u32,
    /// The PE of that request.
    pub error_pe: i32,
    /// Padding to 64 bytes.
    pub reserved: [u64; 3],
}

/// Byte offset of the first [`ProxyRequest`] from the start of the ring.
pub const XPUSHMEM_PROXY_ENTRIES_OFFSET: u64 = 64;

/// Polls per millisecond of `XPUSHMEM_TIMEOUT_MS` (each poll after back-off waits ~1 µs of spinning).
pub const XPUSHMEM_DEVICE_POLLS_PER_MS: u64 = 1000;

/// Iterations of the spin loop that make up one back-off step at its longest.
pub const XPUSHMEM_DEVICE_BACKOFF_SPINS: u32 = 256;

const _: () = assert!(std::mem::size_of::<ProxyRing>() as u64 == XPUSHMEM_PROXY_ENTRIES_OFFSET);
const _: () = assert!(std::mem::size_of::<ProxyRequest>() == 64);
