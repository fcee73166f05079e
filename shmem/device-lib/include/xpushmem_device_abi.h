/* xpushmem_device_abi.h: layouts and codes shared by the xpushmem runtime (Rust) and its device library.
 *
 * GENERATED from shmem/src/abi.rs by cbindgen (ffi/tests/device_abi.rs; regenerate with ffi/gen-header.sh).
 * Do not edit: a test fails when this file drifts, and another compiles offsetof checks against Rust's layout.
 */
#ifndef XPUSHMEM_DEVICE_ABI_H
#define XPUSHMEM_DEVICE_ABI_H
#ifdef __OPENCL_C_VERSION__
typedef char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long int64_t;
typedef uchar uint8_t;
typedef ushort uint16_t;
typedef uint uint32_t;
typedef ulong uint64_t;
#else
#include <stdint.h>
#endif

// Version of this ABI; the host refuses a module whose library was built against another one.
#define XPUSHMEM_DEVICE_ABI_VERSION 6

// `DeviceState::magic` of an initialised state ("XPUS").
#define XPUSHMEM_DEVICE_STATE_MAGIC 1398100056

// Bytes of the reduction scratch area ([`ScratchLayout::reduce`]): a reduction over members on other nodes pulls
// at most this many bytes of one member's source per round trip.
#define XPUSHMEM_DEVICE_REDUCE_SCRATCH_BYTES (64 * 1024)

// Team number of the world team.
#define XPUSHMEM_TEAM_WORLD 0

// Team number of the shared (node) team.
#define XPUSHMEM_TEAM_SHARED 1

// Bit of [`ProxyRequest::seq`] with which the proxy marks an answered [`ProxyOp::Amo`].
#define XPUSHMEM_PROXY_DONE 9223372036854775808ull

// Byte offset of the first [`ProxyRequest`] from the start of the ring.
#define XPUSHMEM_PROXY_ENTRIES_OFFSET 64

// Polls per millisecond of `XPUSHMEM_TIMEOUT_MS` (each poll after back-off waits ~1 µs of spinning).
#define XPUSHMEM_DEVICE_POLLS_PER_MS 1000

// Iterations of the spin loop that make up one back-off step at its longest.
#define XPUSHMEM_DEVICE_BACKOFF_SPINS 256

// Comparison operators of waits and tests (the same values as the host C API's `XPUSHMEM_CMP_*`).
enum XpushmemDeviceCmp
#if __STDC_VERSION__ >= 202311L
  : uint32_t
#endif // __STDC_VERSION__ >= 202311L
 {
  // Equal.
  XPUSHMEM_DEVICE_CMP_EQ = 0,
  // Not equal.
  XPUSHMEM_DEVICE_CMP_NE = 1,
  // Greater than.
  XPUSHMEM_DEVICE_CMP_GT = 2,
  // Greater than or equal.
  XPUSHMEM_DEVICE_CMP_GE = 3,
  // Less than.
  XPUSHMEM_DEVICE_CMP_LT = 4,
  // Less than or equal.
  XPUSHMEM_DEVICE_CMP_LE = 5,
};
#if __STDC_VERSION__ >= 202311L
typedef enum XpushmemDeviceCmp XpushmemDeviceCmp;
#else
typedef uint32_t XpushmemDeviceCmp;
#endif // __STDC_VERSION__ >= 202311L

// Signal operations (the same values as the host C API's `XPUSHMEM_SIGNAL_*`).
enum XpushmemDeviceSignalOp
#if __STDC_VERSION__ >= 202311L
  : uint32_t
#endif // __STDC_VERSION__ >= 202311L
 {
  // Store the value.
  XPUSHMEM_DEVICE_SIGNAL_OP_SET = 0,
  // Add the value atomically.
  XPUSHMEM_DEVICE_SIGNAL_OP_ADD = 1,
};
#if __STDC_VERSION__ >= 202311L
typedef enum XpushmemDeviceSignalOp XpushmemDeviceSignalOp;
#else
typedef uint32_t XpushmemDeviceSignalOp;
#endif // __STDC_VERSION__ >= 202311L

// Operation codes of the runtime's one-work-item atomic kernels (`xpushmem_amo32/64`).
enum XpushmemAmoCode
#if __STDC_VERSION__ >= 202311L
  : uint32_t
#endif // __STDC_VERSION__ >= 202311L
 {
  // Read the word.
  XPUSHMEM_AMO_CODE_FETCH = 0,
  // Write the operand.
  XPUSHMEM_AMO_CODE_SET = 1,
  // Exchange.
  XPUSHMEM_AMO_CODE_SWAP = 2,
  // Exchange if equal to the condition.
  XPUSHMEM_AMO_CODE_COMPARE_SWAP = 3,
  // Wrapping add.
  XPUSHMEM_AMO_CODE_FETCH_ADD = 4,
  // Bitwise and.
  XPUSHMEM_AMO_CODE_FETCH_AND = 5,
  // Bitwise or.
  XPUSHMEM_AMO_CODE_FETCH_OR = 6,
  // Bitwise xor.
  XPUSHMEM_AMO_CODE_FETCH_XOR = 7,
};
#if __STDC_VERSION__ >= 202311L
typedef enum XpushmemAmoCode XpushmemAmoCode;
#else
typedef uint32_t XpushmemAmoCode;
#endif // __STDC_VERSION__ >= 202311L

// What went wrong in a device call (`DeviceState::error`); the first error of a module wins.
enum XpushmemDeviceError
#if __STDC_VERSION__ >= 202311L
  : uint32_t
#endif // __STDC_VERSION__ >= 202311L
 {
  // No error.
  XPUSHMEM_DEVICE_ERROR_NONE = 0,
  // A call ran before the host initialised the module's state (or with another ABI version).
  XPUSHMEM_DEVICE_ERROR_NOT_INITIALIZED = 1,
  // A wait gave up after the bound from `XPUSHMEM_TIMEOUT_MS`.
  XPUSHMEM_DEVICE_ERROR_TIMEOUT = 2,
  // A PE number out of range or a PE this device cannot reach.
  XPUSHMEM_DEVICE_ERROR_BAD_PE = 3,
  // An address outside this PE's symmetric heap.
  XPUSHMEM_DEVICE_ERROR_NOT_SYMMETRIC = 4,
  // A team number that names no team of this PE on the device: out of range, never created, destroyed, not
  // a member, or a team made from an explicit PE list (the device table holds strided teams only).
  XPUSHMEM_DEVICE_ERROR_BAD_TEAM = 5,
  // Another invalid argument (comparison or signal operator).
  XPUSHMEM_DEVICE_ERROR_BAD_ARGUMENT = 6,
  // The host proxy failed a request to a PE reached through the fabric (the host error says why: a lost peer,
  // a provider error); the argument is the PE.
  XPUSHMEM_DEVICE_ERROR_REMOTE = 7,
};
#if __STDC_VERSION__ >= 202311L
typedef enum XpushmemDeviceError XpushmemDeviceError;
#else
typedef uint32_t XpushmemDeviceError;
#endif // __STDC_VERSION__ >= 202311L

// Which device call recorded an error (`DeviceState::error_call`).
enum XpushmemDeviceCall
#if __STDC_VERSION__ >= 202311L
  : uint32_t
#endif // __STDC_VERSION__ >= 202311L
 {
  // Unknown.
  XPUSHMEM_DEVICE_CALL_UNKNOWN = 0,
  // `xpushmem_ptr`.
  XPUSHMEM_DEVICE_CALL_PTR = 1,
  // `xpushmem_putmem` and the typed puts.
  XPUSHMEM_DEVICE_CALL_PUT = 2,
  // `xpushmem_getmem` and the typed gets.
  XPUSHMEM_DEVICE_CALL_GET = 3,
  // `xpushmem_putmem_signal`.
  XPUSHMEM_DEVICE_CALL_PUT_SIGNAL = 4,
  // `xpushmemx_signal_op`.
  XPUSHMEM_DEVICE_CALL_SIGNAL_OP = 5,
  // `xpushmem_signal_wait_until`.
  XPUSHMEM_DEVICE_CALL_SIGNAL_WAIT_UNTIL = 6,
  // `xpushmem_TYPE_wait_until` (and `_all/_any/_some`).
  XPUSHMEM_DEVICE_CALL_WAIT_UNTIL = 7,
  // `xpushmem_TYPE_test`.
  XPUSHMEM_DEVICE_CALL_TEST = 8,
  // Atomics.
  XPUSHMEM_DEVICE_CALL_ATOMIC = 9,
  // `xpushmem_barrier_all`, `xpushmem_sync_all`, `xpushmem_team_sync`.
  XPUSHMEM_DEVICE_CALL_BARRIER = 10,
  // Work-group and sub-group collectives.
  XPUSHMEM_DEVICE_CALL_COLLECTIVE = 11,
  // Team queries.
  XPUSHMEM_DEVICE_CALL_TEAM = 12,
  // `xpushmem_my_pe`, `xpushmem_n_pes`.
  XPUSHMEM_DEVICE_CALL_QUERY = 13,
  // `xpushmem_fence`, `xpushmem_quiet`.
  XPUSHMEM_DEVICE_CALL_ORDER = 14,
  // `xpushmem_team_sync` and `xpushmemx_team_sync_work_group`.
  XPUSHMEM_DEVICE_CALL_TEAM_SYNC = 15,
  // Waiting for the host proxy (a full ring, a request's completion).
  XPUSHMEM_DEVICE_CALL_PROXY = 16,
};
#if __STDC_VERSION__ >= 202311L
typedef enum XpushmemDeviceCall XpushmemDeviceCall;
#else
typedef uint32_t XpushmemDeviceCall;
#endif // __STDC_VERSION__ >= 202311L

// Operation codes of host proxy requests ([`ProxyRequest::op`]).
enum XpushmemProxyOp
#if __STDC_VERSION__ >= 202311L
  : uint32_t
#endif // __STDC_VERSION__ >= 202311L
 {
  // Put `len` bytes from device address `src` to heap offset `dst` of `pe`.
  XPUSHMEM_PROXY_OP_PUT = 1,
  // Put as [`ProxyOp::Put`], then apply `sig_op` with `value` to the signal at heap offset `sig` of `pe`.
  XPUSHMEM_PROXY_OP_PUT_SIGNAL = 2,
  // Apply `sig_op` with `value` to the 64-bit word at heap offset `sig` of `pe` (signals, non-fetching adds).
  XPUSHMEM_PROXY_OP_SIGNAL = 3,
  // Get `len` bytes from heap offset `src` of `pe` to device address `dst`.
  XPUSHMEM_PROXY_OP_GET = 4,
  // Put the `len` (1, 2, 4 or 8) low bytes of `value` to heap offset `dst` of `pe` (`xpushmem_TYPE_p`).
  XPUSHMEM_PROXY_OP_PUT_VALUE = 5,
  // The atomic `sig_op` ([`AmoCode`]) on the `len`-byte (4 or 8) word at heap offset `dst` of `pe`, with
  // operand `value` and compare value `sig`. The proxy answers in the entry itself: the previous value in `src`,
  // then `seq = (ticket + 1) | XPUSHMEM_PROXY_DONE`; the kernel acknowledges by storing 0 in `seq`, and until
  // then the entry (and every later one) stays taken.
  XPUSHMEM_PROXY_OP_AMO = 6,
  // Read the `len` (1, 2, 4 or 8) bytes at heap offset `src` of `pe` (`xpushmem_TYPE_g`), answered in the entry
  // as [`ProxyOp::Amo`] is (the bytes, little-endian, in `src`).
  XPUSHMEM_PROXY_OP_GET_VALUE = 7,
};
#if __STDC_VERSION__ >= 202311L
typedef enum XpushmemProxyOp XpushmemProxyOp;
#else
typedef uint32_t XpushmemProxyOp;
#endif // __STDC_VERSION__ >= 202311L

// One team as the device sees it: PEs `start + i * stride` for `i < size`.
typedef struct {
  // First world PE.
  int32_t start;
  // Distance between members (0 with `size > 0`: a team of an explicit PE list, not usable on the device).
  int32_t stride;
  // Number of members (0: no team in this slot).
  int32_t size;
  // This PE's number in the team.
  int32_t my_pe;
} XpushmemDeviceTeam;

// The per-module device state (the library's global [`XPUSHMEM_DEVICE_STATE_SYMBOL`]).
typedef struct {
  // [`XPUSHMEM_DEVICE_STATE_MAGIC`] once the host has initialised the state.
  uint32_t magic;
  // [`XPUSHMEM_DEVICE_ABI_VERSION`] of the host that wrote it.
  uint32_t abi_version;
  // This PE.
  int32_t my_pe;
  // Number of PEs.
  int32_t n_pes;
  // Bytes of every PE's heap reserve (the most it may grow to, `Shmem::heap_max`), fixed at init; the team space
  // ([`DeviceState::team_range`]) and the scratch tail follow it. Device calls address the part mapped so far ([`DeviceState::heap_mapped`]), within it.
  uint64_t heap_size;
  // Device address of `u64 bases[n_pes]` ([`ScratchLayout::bases`] of this PE's tail).
  uint64_t bases;
  // Device address of this PE's heap base.
  uint64_t my_base;
  // Offset of the `arrive` counters ([`ScratchLayout::arrive`]) from every PE's heap base.
  uint64_t scratch_offset;
  // Polls (with back-off) before a wait gives up, from `XPUSHMEM_TIMEOUT_MS`.
  uint64_t timeout_polls;
  // Team slots (`XPUSHMEM_TEAMS_MAX`): valid team numbers are `0..n_teams`.
  int32_t n_teams;
  // Padding.
  int32_t reserved;
  // Device address of this PE's `DeviceTeam teams[n_teams]` ([`ScratchLayout::teams`]), kept by the host.
  uint64_t teams;
  // Device address of this PE's `u64 epoch[n_teams]` ([`ScratchLayout::epoch`]).
  uint64_t epoch;
  // First error a device call recorded ([`DeviceError`]); 0 = none.
  uint32_t error;
  // The call that recorded it ([`DeviceCall`]).
  uint32_t error_call;
  // Detail (a PE, a team, an address, a value) of the error.
  int64_t error_arg;
  // Host address (visible to kernels) of this PE's host proxy ring ([`ProxyRing`]), 0 when every PE is
  // mapped: a PE whose base is 0 is then reached through the ring, else it is `BadPe`.
  uint64_t proxy;
  // Device address of this PE's `mapped` word ([`ScratchLayout::mapped`]): the bytes of every PE's heap mapped
  // so far, which device calls check addresses against; it changes as the heap grows, while a module keeps the
  // state of its initialisation.
  uint64_t heap_mapped;
  // Device address of this PE's team-space words ([`ScratchLayout::team`]): the team space's start and the end
  // of this PE's mapped team chunks (bytes from the heap's base), which device calls check team-space addresses
  // against.
  uint64_t team_range;
  // Device address of this PE's reduction scratch area ([`ScratchLayout::reduce`],
  // [`XPUSHMEM_DEVICE_REDUCE_SCRATCH_BYTES`] bytes).
  uint64_t reduce_scratch;
} XpushmemDeviceState;

// One request in the host proxy ring (64 bytes). A producer (a work-item) takes ticket `t` from
// [`ProxyRing::head`], waits until `t - tail < capacity`, fills entry `t % capacity` and publishes it by storing
// `t + 1` in `seq` (release). The proxy processes entries in ticket order.
typedef struct {
  // `ticket + 1` once the entry is filled (written last).
  uint64_t seq;
  // [`ProxyOp`].
  uint32_t op;
  // Target PE.
  int32_t pe;
  // Destination: a heap offset on `pe` (puts) or a device address of this PE (gets).
  uint64_t dst;
  // Source: a device address of this PE (puts) or a heap offset on `pe` (gets).
  uint64_t src;
  // Bytes.
  uint64_t len;
  // Heap offset on `pe` of the signal word.
  uint64_t sig;
  // Signal value, or the value of a `PutValue`.
  uint64_t value;
  // [`DeviceSignalOp`].
  uint32_t sig_op;
  // Padding.
  uint32_t reserved;
} XpushmemProxyRequest;

// Header of the host proxy ring (in host memory kernels can access); `capacity` entries of [`ProxyRequest`]
// follow it at byte [`XPUSHMEM_PROXY_ENTRIES_OFFSET`].
typedef struct {
  // Next ticket (producers add 1 atomically).
  uint64_t head;
  // Entries the proxy has taken (an entry with ticket `t` may be refilled once `tail > t`).
  uint64_t tail;
  // Requests complete (delivered at the target, gets' data written): every ticket below this value.
  uint64_t completed;
  // Entries (a power of two).
  uint64_t capacity;
  // First failure of a request (a [`DeviceError`], `Remote`), 0 = none; kept until the host reports it.
  uint32_t error;
  // The PE of that request.
  int32_t error_pe;
  // Padding to 64 bytes.
  uint64_t reserved[3];
} XpushmemProxyRing;

#endif /* XPUSHMEM_DEVICE_ABI_H */
