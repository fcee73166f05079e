/* The xpushmem device library: NVSHMEM's device API for kernels on Intel GPUs (OpenCL C, SYCL, Triton).
 *
 * Built by build.sh to libxpushmem_device-<version>.bc (spir64 bitcode, for llvm-link and Triton's extern_libs)
 * and libxpushmem_device-<version>.spv (SPIR-V exporting every function, for spirv-link). Declarations and the
 * conventions are in include/xpushmem_device.h; layouts and codes in include/xpushmem_device_abi.h (generated from
 * shmem/src/abi.rs).
 *
 * Model. Every PE's symmetric heap is mapped into this device's address space (Level Zero IPC within a node), so
 * RMA is loads and stores through the peer's base address, and atomics and signals are SPIR-V atomics at
 * CrossDevice scope. A put is complete for its source when it returns; `fence`/`quiet` are CrossDevice SeqCst
 * fences, which order/complete every earlier store of the work-item. A signal is written with a release atomic
 * after a CrossDevice fence, so it is visible only after its data. Waits load with acquire at CrossDevice scope,
 * back off, and give up after `timeout_polls` polls, recording a Timeout.
 *
 * State. `xpushmem_device_state` (XpushmemDeviceState) is a program-scope global that the host fills after it has
 * created the module; each call checks its magic and records NotInitialized instead of reading garbage.
 * Barriers use per-team counters in every PE's scratch region (right after its user heap): each member adds 1 to
 * every member's `arrive[team]`, then waits until its own count reaches `epoch * size`; counters never reset.
 * PEs this device does not map (other nodes) are reached through the host proxy ring, for every call: the direct
 * and proxied cases differ only in how one member is reached (see "host proxy" below).
 *
 * SPIR-V builtins are called directly (OpenCL-C generic-pointer atomics fail to JIT on Intel's CPU runtime). */
#include "xpushmem_device.h"

#define SCOPE_CROSS_DEVICE 0
#define SCOPE_WORKGROUP 2
#define SCOPE_SUBGROUP 3
#define SEM_ACQUIRE 0x2
#define SEM_RELEASE 0x4
#define SEM_SEQ_CST 0x10
#define SEM_WG_MEMORY 0x100
#define SEM_CROSS_WG_MEMORY 0x200
#define SEM (SEM_SEQ_CST | SEM_CROSS_WG_MEMORY)

#define DECLARE_ATOMICS(T)                                                                                         \
  T __attribute__((overloadable)) __spirv_AtomicLoad(__global T *p, int scope, int sem);                          \
  void __attribute__((overloadable)) __spirv_AtomicStore(__global T *p, int scope, int sem, T v);                 \
  T __attribute__((overloadable)) __spirv_AtomicExchange(__global T *p, int scope, int sem, T v);                 \
  T __attribute__((overloadable))                                                                                  \
      __spirv_AtomicCompareExchange(__global T *p, int scope, int eq, int neq, T v, T cmp);                        \
  T __attribute__((overloadable)) __spirv_AtomicIAdd(__global T *p, int scope, int sem, T v);                     \
  T __attribute__((overloadable)) __spirv_AtomicAnd(__global T *p, int scope, int sem, T v);                      \
  T __attribute__((overloadable)) __spirv_AtomicOr(__global T *p, int scope, int sem, T v);                       \
  T __attribute__((overloadable)) __spirv_AtomicXor(__global T *p, int scope, int sem, T v);
DECLARE_ATOMICS(ulong)
DECLARE_ATOMICS(uint)
void __attribute__((overloadable)) __spirv_MemoryBarrier(int scope, int sem);
void __attribute__((overloadable, convergent)) __spirv_ControlBarrier(int exec, int mem, int sem);
ulong __attribute__((overloadable)) __spirv_BuiltInLocalInvocationId(int dim);
ulong __attribute__((overloadable)) __spirv_BuiltInWorkgroupSize(int dim);
uint __attribute__((overloadable)) __spirv_BuiltInSubgroupLocalInvocationId(void);
uint __attribute__((overloadable)) __spirv_BuiltInSubgroupSize(void);

/* The per-module state (XPUSHMEM_DEVICE_STATE_SYMBOL in shmem/src/abi.rs). */
__global XpushmemDeviceState xpushmem_device_state;
#define ST xpushmem_device_state

/* ---- helpers ------------------------------------------------------------------------------------------------ */

static void fence_all(void) { __spirv_MemoryBarrier(SCOPE_CROSS_DEVICE, SEM); }

static void wg_sync(void) {
  __spirv_ControlBarrier(SCOPE_WORKGROUP, SCOPE_WORKGROUP, SEM_SEQ_CST | SEM_CROSS_WG_MEMORY | SEM_WG_MEMORY);
}

static void sg_sync(void) {
  __spirv_ControlBarrier(SCOPE_SUBGROUP, SCOPE_SUBGROUP, SEM_SEQ_CST | SEM_CROSS_WG_MEMORY | SEM_WG_MEMORY);
}

static ulong wg_id(void) {
  return __spirv_BuiltInLocalInvocationId(0) +
         __spirv_BuiltInWorkgroupSize(0) *
             (__spirv_BuiltInLocalInvocationId(1) + __spirv_BuiltInWorkgroupSize(1) * __spirv_BuiltInLocalInvocationId(2));
}

static ulong wg_size(void) {
  return __spirv_BuiltInWorkgroupSize(0) * __spirv_BuiltInWorkgroupSize(1) * __spirv_BuiltInWorkgroupSize(2);
}

/* A group of work-items that call a group form together: a work-group (GROUP_WORK), a sub-group (GROUP_SUB) or
 * one work-item (GROUP_ITEM); this item's index in it, its size, and how it meets. Every collective and group
 * barrier has one body over a Group. */
#define GROUP_ITEM 0
#define GROUP_SUB 1
#define GROUP_WORK 2
typedef struct {
  ulong id, count;
  int kind;
} Group;

static Group group_of(int kind) {
  Group g;
  g.kind = kind;
  g.id = 0;
  g.count = 1;
  if (kind == GROUP_WORK) {
    g.id = wg_id();
    g.count = wg_size();
  } else if (kind == GROUP_SUB) {
    g.id = __spirv_BuiltInSubgroupLocalInvocationId();
    g.count = __spirv_BuiltInSubgroupSize();
  }
  return g;
}

static void group_sync(Group g) {
  if (g.kind == GROUP_WORK)
    wg_sync();
  else if (g.kind == GROUP_SUB)
    sg_sync();
}

/* Records the module's first error; returns the code. */
static int record(uint code, uint call, long arg) {
  uint prev = __spirv_AtomicCompareExchange((__global uint *)&ST.error, SCOPE_CROSS_DEVICE, SEM, SEM, code, 0u);
  if (prev == 0) {
    ST.error_call = call;
    ST.error_arg = arg;
    fence_all();
  }
  return (int)code;
}

static int ready(uint call) {
  if (ST.magic != XPUSHMEM_DEVICE_STATE_MAGIC || ST.abi_version != XPUSHMEM_DEVICE_ABI_VERSION)
    return record(XPUSHMEM_DEVICE_ERROR_NOT_INITIALIZED, call, 0);
  return 0;
}

static ulong base_of(int pe) { return ((__global const ulong *)ST.bases)[pe]; }

/* Whether [off, off+len) of the heap is mapped: in the part of the heap mapped so far (the host rewrites the word as
 * the heap grows; at most ST.heap_size), or in the team space up to the end of this PE's mapped team chunks (the
 * host rewrites team[1] as team-scoped allocations are mapped and freed; team[0] is 0 without a team space). */
static bool mapped_range(ulong off, ulong len) {
  ulong mapped = *(volatile __global const ulong *)ST.heap_mapped;
  if (off <= mapped && len <= mapped - off) return true;
  __global const volatile ulong *team = (__global const volatile ulong *)ST.team_range;
  ulong start = team[0], end = team[1];
  return start != 0 && off >= start && off <= end && len <= end - off;
}

/* peer_or_proxy's answer for a PE this device does not map while the host runs a proxy (never recorded). */
#define PROXIED (-1)

/* The address of `pe`'s copy of [addr, addr+len) of this PE's heap, in *out; 0 or an error code, or PROXIED when
 * `pe` is not mapped here (another node) and the host proxy reaches it (ST.proxy set). */
static int peer_or_proxy(ulong addr, ulong len, int pe, uint call, ulong *out) {
  int e = ready(call);
  if (e) return e;
  if (pe < 0 || pe >= ST.n_pes) return record(XPUSHMEM_DEVICE_ERROR_BAD_PE, call, pe);
  ulong off = addr - ST.my_base;
  if (addr < ST.my_base || !mapped_range(off, len))
    return record(XPUSHMEM_DEVICE_ERROR_NOT_SYMMETRIC, call, (long)addr);
  ulong b = base_of(pe);
  if (b == 0) return ST.proxy ? PROXIED : record(XPUSHMEM_DEVICE_ERROR_BAD_PE, call, pe);
  *out = b + off;
  return 0;
}


/* One poll of a wait: gives up after the bound, else backs off (a spin that doubles up to a limit). Every spinning
 * wait calls it; it stays a named, non-inlined function (BACKOFF_SYMBOL in shmem/src/device/mod.rs) so that the host
 * can tell from a linked module which kernels wait, and launch them only with resident work-groups. */
static int backoff_step(ulong *polls, uint *spin, uint call, ulong addr) {
  if (++*polls > ST.timeout_polls) return record(XPUSHMEM_DEVICE_ERROR_TIMEOUT, call, (long)addr);
  for (volatile uint i = 0; i < *spin; i++) {
  }
  if (*spin < XPUSHMEM_DEVICE_BACKOFF_SPINS) *spin <<= 1;
  return 0;
}
/* One poll of a wait for other PEs' or work-groups' writes: backoff_step, then a failure the host proxy recorded
 * (proxy_failed, below), so that a wait for a word a proxied peer writes ends in PeerLost when that peer died instead
 * of running to its Timeout. Nonzero (the recorded code) once the wait must give up. */
__attribute__((noinline)) int xpushmem_device_backoff(ulong *polls, uint *spin, uint call, ulong addr);

/* Copies n bytes; work-item `id` of `count` takes its share (8-byte words when both ends are aligned). */
static void copy_share(ulong dst, ulong src, ulong n, ulong id, ulong count) {
  ulong head = 0;
  if (((dst | src) & 7) == 0) {
    ulong words = n >> 3;
    __global ulong *d = (__global ulong *)dst;
    const __global ulong *s = (const __global ulong *)src;
    for (ulong i = id; i < words; i += count) d[i] = s[i];
    head = words << 3;
  }
  __global uchar *d = (__global uchar *)dst;
  const __global uchar *s = (const __global uchar *)src;
  for (ulong i = head + id; i < n; i += count) d[i] = s[i];
}

static int check_cmp(int cmp, uint call) {
  if (cmp < XPUSHMEM_DEVICE_CMP_EQ || cmp > XPUSHMEM_DEVICE_CMP_LE)
    return record(XPUSHMEM_DEVICE_ERROR_BAD_ARGUMENT, call, cmp);
  return 0;
}

#define CMP_FN(NAME, T)                                                                                            \
  static int cmp_##NAME(T a, int cmp, T b) {                                                                       \
    switch (cmp) {                                                                                                 \
    case XPUSHMEM_DEVICE_CMP_EQ: return a == b;                                                                    \
    case XPUSHMEM_DEVICE_CMP_NE: return a != b;                                                                    \
    case XPUSHMEM_DEVICE_CMP_GT: return a > b;                                                                     \
    case XPUSHMEM_DEVICE_CMP_GE: return a >= b;                                                                    \
    case XPUSHMEM_DEVICE_CMP_LT: return a < b;                                                                     \
    default: return a <= b;                                                                                        \
    }                                                                                                              \
  }
CMP_FN(i32, int)
CMP_FN(u32, uint)
CMP_FN(i64, long)
CMP_FN(u64, ulong)

/* ---- queries ------------------------------------------------------------------------------------------------ */

int xpushmem_my_pe(void) { return ready(XPUSHMEM_DEVICE_CALL_QUERY) ? -1 : ST.my_pe; }

int xpushmem_n_pes(void) { return ready(XPUSHMEM_DEVICE_CALL_QUERY) ? -1 : ST.n_pes; }

long xpushmem_ptr(long dest, int pe) {
  ulong p = 0;
  return peer_or_proxy((ulong)dest, 1, pe, XPUSHMEM_DEVICE_CALL_PTR, &p) ? 0 : (long)p;
}

/* This PE's entry of team `team` in the host-kept table (team numbers are the host's team slots). */
static XpushmemDeviceTeam team_at(int team) { return ((__global const XpushmemDeviceTeam *)ST.teams)[team]; }

/* A team number names a live, strided team of this PE, or BadTeam is recorded (a destroyed or never-created team
 * has size 0, an explicit-list team stride 0). */
static int team_ok(int team, uint call) {
  int e = ready(call);
  if (e) return e;
  if (team < 0 || team >= ST.n_teams) return record(XPUSHMEM_DEVICE_ERROR_BAD_TEAM, call, team);
  XpushmemDeviceTeam t = team_at(team);
  if (t.size <= 0 || t.stride <= 0 || t.my_pe < 0 || t.my_pe >= t.size)
    return record(XPUSHMEM_DEVICE_ERROR_BAD_TEAM, call, team);
  return 0;
}

int xpushmem_team_my_pe(int team) {
  return team_ok(team, XPUSHMEM_DEVICE_CALL_TEAM) ? -1 : team_at(team).my_pe;
}

int xpushmem_team_n_pes(int team) {
  return team_ok(team, XPUSHMEM_DEVICE_CALL_TEAM) ? -1 : team_at(team).size;
}

/* -1 when src_pe is not a PE of src_team or that PE is not a member of dest_team (OpenSHMEM's answer). */
int xpushmem_team_translate_pe(int src_team, int src_pe, int dest_team) {
  if (team_ok(src_team, XPUSHMEM_DEVICE_CALL_TEAM) || team_ok(dest_team, XPUSHMEM_DEVICE_CALL_TEAM)) return -1;
  XpushmemDeviceTeam s = team_at(src_team), d = team_at(dest_team);
  if (src_pe < 0 || src_pe >= s.size) return -1;
  int world = s.start + src_pe * s.stride;
  int rel = world - d.start;
  if (rel < 0) return -1;
  int q = rel / d.stride;
  if (q * d.stride != rel || q >= d.size) return -1;
  return q;
}

/* ---- host proxy --------------------------------------------------------------------------------------------- */
/* Requests to PEs this device does not map (other nodes) go into a ring in host memory (XpushmemProxyRing, layout
 * in shmem/src/abi.rs) that a host thread drains, issuing the fabric operations; it advances `completed` past
 * every request it has finished, and records a failure in `error`. Requests are taken in ticket order. */

static __global XpushmemProxyRing *ring(void) { return (__global XpushmemProxyRing *)ST.proxy; }

/* Waits for the host proxy back off like every other wait but do not go through xpushmem_device_backoff: they wait
 * for the host, not for other work-groups, so a kernel that only waits for the proxy needs no co-resident launch. */
/* Waits until the proxy has finished every request below `upto`; Remote if it failed one, Timeout at the bound. */
static int proxy_wait(ulong upto, uint call) {
  __global XpushmemProxyRing *r = ring();
  ulong polls = 0;
  uint spin = 1;
  while (__spirv_AtomicLoad((__global ulong *)&r->completed, SCOPE_CROSS_DEVICE, SEM_ACQUIRE | SEM_CROSS_WG_MEMORY) <
         upto) {
    int e = backoff_step(&polls, &spin, XPUSHMEM_DEVICE_CALL_PROXY, (ulong)&r->completed);
    if (e) return e;
  }
  uint err = __spirv_AtomicLoad((__global uint *)&r->error, SCOPE_CROSS_DEVICE, SEM_ACQUIRE | SEM_CROSS_WG_MEMORY);
  return err ? record(err, call, r->error_pe) : 0;
}

/* Posts one request (waiting while the ring is full), its ticket in *ticket. */
static int proxy_put_entry(uint op, int pe, ulong dst, ulong src, ulong len, ulong sig, ulong value, int sig_op,
                           ulong *ticket) {
  __global XpushmemProxyRing *r = ring();
  fence_all(); /* the source, and everything this work-item wrote before, is visible to the host first */
  ulong t = __spirv_AtomicIAdd((__global ulong *)&r->head, SCOPE_CROSS_DEVICE, SEM, 1ul);
  ulong polls = 0;
  uint spin = 1;
  while (t - __spirv_AtomicLoad((__global ulong *)&r->tail, SCOPE_CROSS_DEVICE, SEM_ACQUIRE | SEM_CROSS_WG_MEMORY) >=
         r->capacity) {
    int e = backoff_step(&polls, &spin, XPUSHMEM_DEVICE_CALL_PROXY, (ulong)&r->tail);
    if (e) return e;
  }
  __global XpushmemProxyRequest *q =
      (__global XpushmemProxyRequest *)(ST.proxy + XPUSHMEM_PROXY_ENTRIES_OFFSET) + (t & (r->capacity - 1));
  q->op = op;
  q->pe = pe;
  q->dst = dst;
  q->src = src;
  q->len = len;
  q->sig = sig;
  q->value = value;
  q->sig_op = (uint)sig_op;
  __spirv_AtomicStore((__global ulong *)&q->seq, SCOPE_CROSS_DEVICE, SEM_RELEASE | SEM_CROSS_WG_MEMORY, t + 1);
  *ticket = t;
  return 0;
}

/* Posts one request; with `wait`, also waits for its completion. Not inlined, as team_barrier (below): item 0
 * alone posts, and a wait loop inlined into that branch is what Intel's OpenCL CPU runtime vectorises slowest. */
static __attribute__((noinline)) int proxy_post(uint op, int pe, ulong dst, ulong src, ulong len, ulong sig, ulong value, int sig_op,
                      int wait, uint call) {
  ulong t = 0;
  int e = proxy_put_entry(op, pe, dst, src, len, sig, value, sig_op, &t);
  if (e) return e;
  return wait ? proxy_wait(t + 1, call) : 0;
}

/* A request the proxy answers in its entry (an atomic, a value read): posts it, waits for the answer (in *answer,
 * 0 on error) and acknowledges it, which frees the entry; 0 or the error code (recorded for `call`). */
static int proxy_ask(uint op, int pe, ulong dst, ulong src, ulong len, ulong sig, ulong value, int sig_op, uint call,
                     ulong *answer) {
  *answer = 0;
  ulong t = 0;
  int e = proxy_put_entry(op, pe, dst, src, len, sig, value, sig_op, &t);
  if (e) return e;
  __global XpushmemProxyRing *r = ring();
  __global XpushmemProxyRequest *q =
      (__global XpushmemProxyRequest *)(ST.proxy + XPUSHMEM_PROXY_ENTRIES_OFFSET) + (t & (r->capacity - 1));
  ulong done = (t + 1) | XPUSHMEM_PROXY_DONE;
  ulong polls = 0;
  uint spin = 1;
  while (__spirv_AtomicLoad((__global ulong *)&q->seq, SCOPE_CROSS_DEVICE, SEM_ACQUIRE | SEM_CROSS_WG_MEMORY) != done) {
    e = backoff_step(&polls, &spin, XPUSHMEM_DEVICE_CALL_PROXY, (ulong)&q->seq);
    if (e) return e;
  }
  *answer = q->src;
  __spirv_AtomicStore((__global ulong *)&q->seq, SCOPE_CROSS_DEVICE, SEM_RELEASE | SEM_CROSS_WG_MEMORY, 0ul);
  uint err = __spirv_AtomicLoad((__global uint *)&r->error, SCOPE_CROSS_DEVICE, SEM_ACQUIRE | SEM_CROSS_WG_MEMORY);
  return err ? record(err, call, r->error_pe) : 0;
}

/* An atomic (AmoCode `code`) on the `width`-byte word at heap address `dest` of `pe` through the proxy; the
 * previous value in *old (0 on error); 0 or the error code (recorded). */
static int proxy_amo(ulong dest, uint width, uint code, ulong operand, ulong cond, int pe, ulong *old) {
  uint call = XPUSHMEM_DEVICE_CALL_ATOMIC;
  *old = 0;
  if (dest & (width - 1)) return record(XPUSHMEM_DEVICE_ERROR_BAD_ARGUMENT, call, (long)dest);
  return proxy_ask(XPUSHMEM_PROXY_OP_AMO, pe, dest - ST.my_base, 0, width, cond, operand, (int)code, call, old);
}

/* A failure the proxy has recorded (a lost peer, a provider error), recorded for `call`; else 0. Waits on words
 * that proxied peers write check it, so a peer that died ends the wait in PeerLost rather than a Timeout. */
static int proxy_failed(uint call) {
  if (!ST.proxy) return 0;
  __global XpushmemProxyRing *r = ring();
  uint err = __spirv_AtomicLoad((__global uint *)&r->error, SCOPE_CROSS_DEVICE, SEM_ACQUIRE | SEM_CROSS_WG_MEMORY);
  return err ? record(err, call, r->error_pe) : 0;
}

int xpushmem_device_backoff(ulong *polls, uint *spin, uint call, ulong addr) {
  int e = backoff_step(polls, spin, call, addr);
  return e ? e : proxy_failed(call);
}

/* The previous value of an atomic through the proxy (0 on error, recorded). */
static ulong proxy_fetch(ulong dest, uint width, uint code, ulong operand, ulong cond, int pe) {
  ulong old = 0;
  (void)proxy_amo(dest, width, code, operand, cond, pe, &old);
  return old;
}

/* Every request posted so far (by any work-item of this PE) has completed. */
static int proxy_quiet(uint call) {
  ulong head = __spirv_AtomicLoad((__global ulong *)&ring()->head, SCOPE_CROSS_DEVICE, SEM_ACQUIRE | SEM_CROSS_WG_MEMORY);
  return proxy_wait(head, call);
}

/* Whether `pe` is reached through the proxy (checked before the work-group forms split the work). */
static int proxied(int pe) { return ST.proxy != 0 && pe >= 0 && pe < ST.n_pes && base_of(pe) == 0; }

/* put-with-signal through the proxy: one request, the signal applied after the data's delivery. */
static int proxy_put_signal(ulong dest, ulong src, ulong n, ulong sig, ulong value, int op, int pe, int nbi) {
  uint call = XPUSHMEM_DEVICE_CALL_PUT_SIGNAL;
  if (op != XPUSHMEM_DEVICE_SIGNAL_OP_SET && op != XPUSHMEM_DEVICE_SIGNAL_OP_ADD)
    return record(XPUSHMEM_DEVICE_ERROR_BAD_ARGUMENT, call, op);
  ulong unused = 0;
  int e = peer_or_proxy(dest, n, pe, call, &unused);
  if (e == PROXIED) e = peer_or_proxy(sig, 8, pe, call, &unused);
  if (e != PROXIED) return e ? e : record(XPUSHMEM_DEVICE_ERROR_BAD_PE, call, pe);
  return proxy_post(XPUSHMEM_PROXY_OP_PUT_SIGNAL, pe, dest - ST.my_base, src, n, sig - ST.my_base, value, op, !nbi,
                    call);
}

/* ---- RMA ---------------------------------------------------------------------------------------------------- */

/* Work-item `id` of `count` copies its share; a PE not mapped here gets one proxy request, from item 0 (waited
 * for unless `nbi`). */
static int put_any(ulong dest, ulong src, ulong n, int pe, ulong id, ulong count, int nbi) {
  ulong d = 0;
  int e = peer_or_proxy(dest, n, pe, XPUSHMEM_DEVICE_CALL_PUT, &d);
  if (e == PROXIED)
    return id == 0 ? proxy_post(XPUSHMEM_PROXY_OP_PUT, pe, dest - ST.my_base, src, n, 0, 0, 0, !nbi,
                                XPUSHMEM_DEVICE_CALL_PUT)
                   : 0;
  if (e) return e;
  copy_share(d, src, n, id, count);
  return 0;
}

static int get_any(ulong dest, ulong src, ulong n, int pe, ulong id, ulong count, int nbi) {
  ulong s = 0;
  int e = peer_or_proxy(src, n, pe, XPUSHMEM_DEVICE_CALL_GET, &s);
  if (e == PROXIED)
    return id == 0 ? proxy_post(XPUSHMEM_PROXY_OP_GET, pe, dest, src - ST.my_base, n, 0, 0, 0, !nbi,
                                XPUSHMEM_DEVICE_CALL_GET)
                   : 0;
  if (e) return e;
  copy_share(dest, s, n, id, count);
  return 0;
}

static int put_share(ulong dest, ulong src, ulong n, int pe, ulong id, ulong count) {
  return put_any(dest, src, n, pe, id, count, 0);
}
static int put_share_nbi(ulong dest, ulong src, ulong n, int pe, ulong id, ulong count) {
  return put_any(dest, src, n, pe, id, count, 1);
}
static int get_share(ulong dest, ulong src, ulong n, int pe, ulong id, ulong count) {
  return get_any(dest, src, n, pe, id, count, 0);
}
static int get_share_nbi(ulong dest, ulong src, ulong n, int pe, ulong id, ulong count) {
  return get_any(dest, src, n, pe, id, count, 1);
}

int xpushmem_putmem(long dest, long src, ulong nbytes, int pe) { return put_share(dest, src, nbytes, pe, 0, 1); }
int xpushmem_getmem(long dest, long src, ulong nbytes, int pe) { return get_share(dest, src, nbytes, pe, 0, 1); }
int xpushmem_putmem_nbi(long dest, long src, ulong nbytes, int pe) { return put_share_nbi(dest, src, nbytes, pe, 0, 1); }
int xpushmem_getmem_nbi(long dest, long src, ulong nbytes, int pe) { return get_share_nbi(dest, src, nbytes, pe, 0, 1); }

/* Work-group forms: every item copies its share, then the group synchronises (the copy is complete for every
 * item's source on return). */
#define WG_COPY(NAME, FN)                                                                                          \
  int NAME(long dest, long src, ulong nbytes, int pe) {                                                            \
    int e = FN(dest, src, nbytes, pe, wg_id(), wg_size());                                                         \
    wg_sync();                                                                                                     \
    return e;                                                                                                      \
  }
WG_COPY(xpushmemx_putmem_work_group, put_share)
WG_COPY(xpushmemx_getmem_work_group, get_share)
WG_COPY(xpushmemx_putmem_nbi_work_group, put_share_nbi)
WG_COPY(xpushmemx_getmem_nbi_work_group, get_share_nbi)

#define SG_COPY(NAME, FN)                                                                                          \
  int NAME(long dest, long src, ulong nbytes, int pe) {                                                            \
    int e = FN(dest, src, nbytes, pe, __spirv_BuiltInSubgroupLocalInvocationId(), __spirv_BuiltInSubgroupSize());  \
    sg_sync();                                                                                                     \
    return e;                                                                                                      \
  }
SG_COPY(xpushmemx_putmem_sub_group, put_share)
SG_COPY(xpushmemx_getmem_sub_group, get_share)
SG_COPY(xpushmemx_putmem_nbi_sub_group, put_share_nbi)
SG_COPY(xpushmemx_getmem_nbi_sub_group, get_share_nbi)

#define DEFINE_RMA(NAME, T)                                                                                        \
  int xpushmem_##NAME##_put(long dest, long src, ulong nelems, int pe) {                                           \
    return put_share(dest, src, nelems * sizeof(T), pe, 0, 1);                                                     \
  }                                                                                                                \
  int xpushmem_##NAME##_get(long dest, long src, ulong nelems, int pe) {                                           \
    return get_share(dest, src, nelems * sizeof(T), pe, 0, 1);                                                     \
  }                                                                                                                \
  int xpushmem_##NAME##_put_nbi(long dest, long src, ulong nelems, int pe) {                                       \
    return put_share_nbi(dest, src, nelems * sizeof(T), pe, 0, 1);                                                     \
  }                                                                                                                \
  int xpushmem_##NAME##_get_nbi(long dest, long src, ulong nelems, int pe) {                                       \
    return get_share_nbi(dest, src, nelems * sizeof(T), pe, 0, 1);                                                     \
  }                                                                                                                \
  int xpushmem_##NAME##_p(long dest, T value, int pe) {                                                            \
    ulong d = 0;                                                                                                   \
    int e = peer_or_proxy(dest, sizeof(T), pe, XPUSHMEM_DEVICE_CALL_PUT, &d);                                      \
    if (e == PROXIED) {                                                                                            \
      union {                                                                                                      \
        T v;                                                                                                       \
        ulong u;                                                                                                   \
      } bits;                                                                                                      \
      bits.u = 0;                                                                                                  \
      bits.v = value;                                                                                              \
      return proxy_post(XPUSHMEM_PROXY_OP_PUT_VALUE, pe, dest - ST.my_base, 0, sizeof(T), 0, bits.u, 0, 1,        \
                        XPUSHMEM_DEVICE_CALL_PUT);                                                                 \
    }                                                                                                              \
    if (!e) *(__global T *)d = value;                                                                              \
    return e;                                                                                                      \
  }                                                                                                                \
  T xpushmem_##NAME##_g(long src, int pe) {                                                                        \
    ulong s = 0;                                                                                                   \
    int e = peer_or_proxy(src, sizeof(T), pe, XPUSHMEM_DEVICE_CALL_GET, &s);                                       \
    if (e == PROXIED) {                                                                                            \
      union {                                                                                                      \
        T v;                                                                                                       \
        ulong u;                                                                                                   \
      } bits;                                                                                                      \
      (void)proxy_ask(XPUSHMEM_PROXY_OP_GET_VALUE, pe, 0, src - ST.my_base, sizeof(T), 0, 0, 0,                  \
                      XPUSHMEM_DEVICE_CALL_GET, &bits.u);                                                          \
      return bits.v;                                                                                               \
    }                                                                                                              \
    if (e) return (T)0;                                                                                            \
    return *(const __global T *)s;                                                                                 \
  }
XPUSHMEM_RMA_TYPES(DEFINE_RMA)

/* ---- signals ------------------------------------------------------------------------------------------------ */

static int signal_at(ulong sig, ulong value, int op, int pe, uint call) {
  if (op != XPUSHMEM_DEVICE_SIGNAL_OP_SET && op != XPUSHMEM_DEVICE_SIGNAL_OP_ADD)
    return record(XPUSHMEM_DEVICE_ERROR_BAD_ARGUMENT, call, op);
  ulong s = 0;
  int e = peer_or_proxy(sig, 8, pe, call, &s);
  if (e == PROXIED) return proxy_post(XPUSHMEM_PROXY_OP_SIGNAL, pe, 0, 0, 0, sig - ST.my_base, value, op, 0, call);
  if (e) return e;
  fence_all(); /* everything this work-item wrote before is visible before the signal */
  if (op == XPUSHMEM_DEVICE_SIGNAL_OP_SET)
    __spirv_AtomicStore((__global ulong *)s, SCOPE_CROSS_DEVICE, SEM_RELEASE | SEM_CROSS_WG_MEMORY, value);
  else
    __spirv_AtomicIAdd((__global ulong *)s, SCOPE_CROSS_DEVICE, SEM_RELEASE | SEM_CROSS_WG_MEMORY, value);
  return 0;
}

int xpushmemx_signal_op(long sig_addr, ulong signal, int sig_op, int pe) {
  return signal_at(sig_addr, signal, sig_op, pe, XPUSHMEM_DEVICE_CALL_SIGNAL_OP);
}

static int put_signal_one(long dest, long src, ulong nbytes, long sig_addr, ulong signal, int sig_op, int pe,
                          int nbi) {
  if (proxied(pe)) return proxy_put_signal(dest, src, nbytes, sig_addr, signal, sig_op, pe, nbi);
  int e = put_share(dest, src, nbytes, pe, 0, 1);
  return e ? e : signal_at(sig_addr, signal, sig_op, pe, XPUSHMEM_DEVICE_CALL_PUT_SIGNAL);
}

int xpushmem_putmem_signal(long dest, long src, ulong nbytes, long sig_addr, ulong signal, int sig_op, int pe) {
  return put_signal_one(dest, src, nbytes, sig_addr, signal, sig_op, pe, 0);
}

int xpushmem_putmem_signal_nbi(long dest, long src, ulong nbytes, long sig_addr, ulong signal, int sig_op, int pe) {
  return put_signal_one(dest, src, nbytes, sig_addr, signal, sig_op, pe, 1);
}

/* Every item copies its share and fences; after the group barrier, item 0 signals. A PE reached through the proxy:
 * item 0 posts one request, the group waits for it at the barrier. */
int xpushmemx_putmem_signal_work_group(long dest, long src, ulong nbytes, long sig_addr, ulong signal, int sig_op,
                                       int pe) {
  ulong id = wg_id();
  if (proxied(pe)) {
    int pe_ = id == 0 ? proxy_put_signal(dest, src, nbytes, sig_addr, signal, sig_op, pe, 0) : 0;
    wg_sync();
    return pe_;
  }
  int e = put_share(dest, src, nbytes, pe, id, wg_size());
  fence_all();
  wg_sync();
  if (!e && id == 0) e = signal_at(sig_addr, signal, sig_op, pe, XPUSHMEM_DEVICE_CALL_PUT_SIGNAL);
  return e;
}

int xpushmemx_putmem_signal_nbi_work_group(long dest, long src, ulong nbytes, long sig_addr, ulong signal,
                                           int sig_op, int pe) {
  return xpushmemx_putmem_signal_work_group(dest, src, nbytes, sig_addr, signal, sig_op, pe);
}

int xpushmemx_putmem_signal_sub_group(long dest, long src, ulong nbytes, long sig_addr, ulong signal, int sig_op,
                                      int pe) {
  uint id = __spirv_BuiltInSubgroupLocalInvocationId();
  if (proxied(pe)) {
    int pe_ = id == 0 ? proxy_put_signal(dest, src, nbytes, sig_addr, signal, sig_op, pe, 0) : 0;
    sg_sync();
    return pe_;
  }
  int e = put_share(dest, src, nbytes, pe, id, __spirv_BuiltInSubgroupSize());
  fence_all();
  sg_sync();
  if (!e && id == 0) e = signal_at(sig_addr, signal, sig_op, pe, XPUSHMEM_DEVICE_CALL_PUT_SIGNAL);
  return e;
}

int xpushmemx_putmem_signal_nbi_sub_group(long dest, long src, ulong nbytes, long sig_addr, ulong signal,
                                          int sig_op, int pe) {
  return xpushmemx_putmem_signal_sub_group(dest, src, nbytes, sig_addr, signal, sig_op, pe);
}

ulong xpushmem_signal_fetch(long sig_addr) {
  return __spirv_AtomicLoad((__global ulong *)sig_addr, SCOPE_CROSS_DEVICE, SEM_ACQUIRE | SEM_CROSS_WG_MEMORY);
}

ulong xpushmem_signal_wait_until(long sig_addr, int cmp, ulong cmp_value) {
  uint call = XPUSHMEM_DEVICE_CALL_SIGNAL_WAIT_UNTIL;
  if (ready(call) || check_cmp(cmp, call)) return 0;
  ulong polls = 0;
  uint spin = 1;
  for (;;) {
    ulong v = __spirv_AtomicLoad((__global ulong *)sig_addr, SCOPE_CROSS_DEVICE, SEM_ACQUIRE | SEM_CROSS_WG_MEMORY);
    if (cmp_u64(v, cmp, cmp_value)) return v;
    if (xpushmem_device_backoff(&polls, &spin, call, sig_addr)) return 0;
  }
}

/* ---- point-to-point synchronisation and atomics ------------------------------------------------------------ */

#define CMP_OF_short cmp_i32
#define CMP_OF_ushort cmp_u32
#define CMP_OF_int cmp_i32
#define CMP_OF_long cmp_i64
#define CMP_OF_uint cmp_u32
#define CMP_OF_ulong cmp_u64
#define CMPF(T) CMP_OF_##T

#define ALOAD(U, p) __spirv_AtomicLoad((__global U *)(p), SCOPE_CROSS_DEVICE, SEM_ACQUIRE | SEM_CROSS_WG_MEMORY)
#define ALOAD_uint(p) ALOAD(uint, p)
#define ALOAD_ulong(p) ALOAD(ulong, p)

static int check_align(ulong addr, ulong size, uint call) {
  if (addr & (size - 1)) return record(XPUSHMEM_DEVICE_ERROR_BAD_ARGUMENT, call, (long)addr);
  return 0;
}

/* 16-bit words: the device has 32- and 64-bit atomics only, so a 16-bit atomic reads, or compare-and-swaps, the
 * aligned 32-bit word that contains it (little-endian: the half at addr & 2). A CAS that fails because the other
 * half changed retries with the new word, so updates of either half are never lost. */
static uint load16(ulong addr) {
  uint w = __spirv_AtomicLoad((__global uint *)(addr & ~3ul), SCOPE_CROSS_DEVICE, SEM_ACQUIRE | SEM_CROSS_WG_MEMORY);
  return (addr & 2) ? w >> 16 : w & 0xffffu;
}
#define ALOAD16_short(p) ((short)load16(p))
#define ALOAD16_ushort(p) ((ushort)load16(p))

/* A fetch (cmp == neu == 0 and !cas) or compare-and-swap of the aligned 32-bit word w: through this device's
 * mapping (via < 0), or through the host proxy on PE via (w is then this PE's symmetric address: the fabric's
 * 32-bit atomics on the containing word, so the fabric needs no 16-bit width). The previous value in *old; 0 or
 * the error code. */
static int word32(ulong w, int via, int cas, uint neu, uint cmp, uint *old) {
  if (via >= 0) {
    ulong o = 0;
    int e = proxy_amo(w, 4, cas ? XPUSHMEM_AMO_CODE_COMPARE_SWAP : XPUSHMEM_AMO_CODE_FETCH, neu, cmp, via, &o);
    *old = (uint)o;
    return e;
  }
  __global uint *p = (__global uint *)w;
  *old = cas ? __spirv_AtomicCompareExchange(p, SCOPE_CROSS_DEVICE, SEM, SEM, neu, cmp)
             : __spirv_AtomicLoad(p, SCOPE_CROSS_DEVICE, SEM);
  return 0;
}

#define RMW16_SET 0
#define RMW16_CAS 1
#define RMW16_ADD 2
#define RMW16_FETCH 3
/* Applies op to the 16-bit word at a (2-aligned: a peer's address, or with via >= 0 this PE's symmetric address
 * of a word of PE via, reached through the proxy); the old value in *out; 0 or the error code. */
static __attribute__((noinline)) int rmw16(ulong a, int via, int op, ushort value, ushort cond, ushort *out) {
  ulong w = a & ~3ul;
  uint shift = (a & 2) ? 16 : 0;
  uint old = 0;
  *out = 0;
  int e = word32(w, via, 0, 0, 0, &old);
  while (!e) {
    ushort cur = (ushort)(old >> shift);
    *out = cur;
    ushort nv = op == RMW16_ADD ? (ushort)(cur + value) : value;
    if (op == RMW16_FETCH || (op == RMW16_CAS && cur != cond)) return 0;
    uint neu = (old & ~(0xffffu << shift)) | ((uint)nv << shift);
    uint prev = 0;
    e = word32(w, via, 1, neu, old, &prev);
    if (!e && prev == old) return 0;
    old = prev;
  }
  return e;
}

#define DEFINE_WAITS(NAME, T, LOAD, CMP)                                                                                  \
  int xpushmem_##NAME##_test(long ivar, int cmp, T value) {                                                        \
    if (check_cmp(cmp, XPUSHMEM_DEVICE_CALL_TEST) || check_align(ivar, sizeof(T), XPUSHMEM_DEVICE_CALL_TEST))      \
      return 0;                                                                                                    \
    return CMP((T)LOAD(ivar), cmp, value);                                                                 \
  }                                                                                                                \
  int xpushmem_##NAME##_wait_until(long ivar, int cmp, T value) {                                                  \
    uint call = XPUSHMEM_DEVICE_CALL_WAIT_UNTIL;                                                                   \
    int e = ready(call);                                                                                           \
    if (!e) e = check_cmp(cmp, call);                                                                              \
    if (!e) e = check_align(ivar, sizeof(T), call);                                                                \
    ulong polls = 0;                                                                                               \
    uint spin = 1;                                                                                                 \
    while (!e && !CMP((T)LOAD(ivar), cmp, value)) e = xpushmem_device_backoff(&polls, &spin, call, ivar);                  \
    return e;                                                                                                      \
  }                                                                                                                \
  /* status[i] != 0 excludes ivars[i] (status may be 0: none excluded). */                                         \
  int xpushmem_##NAME##_wait_until_all(long ivars, ulong nelems, long status, int cmp, T value) {                  \
    for (ulong i = 0; i < nelems; i++) {                                                                           \
      if (status && ((const __global int *)status)[i]) continue;                                                   \
      int e = xpushmem_##NAME##_wait_until(ivars + i * sizeof(T), cmp, value);                                     \
      if (e) return e;                                                                                             \
    }                                                                                                              \
    return 0;                                                                                                      \
  }                                                                                                                \
  /* One pass over the eligible ivars: the satisfied indices go to out (if any), at most max of them; *eligible  \
   * tells whether any ivar is eligible. A separate function keeps the polling loops simple for llvm-spirv. */    \
  static __attribute__((noinline)) ulong scan_##NAME(long ivars, ulong nelems, long status, int cmp, T value,     \
                                                     __global ulong *out, ulong max, int *eligible) {             \
    ulong found = 0;                                                                                               \
    for (ulong i = 0; i < nelems && found < max; i++) {                                                            \
      if (status && ((const __global int *)status)[i]) continue;                                                   \
      *eligible = 1;                                                                                               \
      if (CMP((T)LOAD(ivars + i * sizeof(T)), cmp, value)) {                                               \
        if (out) out[found] = i;                                                                                   \
        found++;                                                                                                   \
      }                                                                                                            \
    }                                                                                                              \
    return found;                                                                                                  \
  }                                                                                                                \
  /* Waits until at least one eligible ivar is satisfied; writes the satisfied indices; returns their count. */    \
  ulong xpushmem_##NAME##_wait_until_some(long ivars, ulong nelems, long indices, long status, int cmp, T value) { \
    uint call = XPUSHMEM_DEVICE_CALL_WAIT_UNTIL;                                                                   \
    if (ready(call) || check_cmp(cmp, call)) return 0;                                                             \
    ulong polls = 0, found = 0;                                                                                    \
    uint spin = 1;                                                                                                 \
    int eligible = 0;                                                                                              \
    while (!(found = scan_##NAME(ivars, nelems, status, cmp, value, (__global ulong *)indices, nelems, &eligible)) \
           && eligible && !xpushmem_device_backoff(&polls, &spin, call, ivars)) {                                                  \
    }                                                                                                              \
    return found;                                                                                                  \
  }                                                                                                                \
  /* The index of one satisfied ivar, or ~0 when none is eligible or on error. */                                  \
  ulong xpushmem_##NAME##_wait_until_any(long ivars, ulong nelems, long status, int cmp, T value) {                \
    uint call = XPUSHMEM_DEVICE_CALL_WAIT_UNTIL;                                                                   \
    if (ready(call) || check_cmp(cmp, call)) return ~0ul;                                                          \
    ulong polls = 0, idx = 0;                                                                                      \
    uint spin = 1;                                                                                                 \
    int eligible = 0;                                                                                              \
    while (!scan_##NAME(ivars, nelems, status, cmp, value, 0, 1, &eligible)) {                                     \
      if (!eligible || xpushmem_device_backoff(&polls, &spin, call, ivars)) return ~0ul;                                           \
    }                                                                                                              \
    /* the first satisfied index */                                                                                \
    while (idx < nelems && ((status && ((const __global int *)status)[idx]) ||                                     \
                            !CMP((T)LOAD(ivars + idx * sizeof(T)), cmp, value)))                           \
      idx++;                                                                                                       \
    return idx < nelems ? idx : ~0ul;                                                                              \
  }

#define DEFINE_AMO(NAME, T, U)                                                                                     \
  DEFINE_WAITS(NAME, T, ALOAD_##U, CMP_OF_##T)                                                                     \
  T xpushmem_##NAME##_atomic_fetch(long src, int pe) {                                                             \
    ulong a = 0;                                                                                                   \
    int e = peer_or_proxy(src, sizeof(T), pe, XPUSHMEM_DEVICE_CALL_ATOMIC, &a);                                    \
    if (e == PROXIED) return (T)proxy_fetch(src, sizeof(T), XPUSHMEM_AMO_CODE_FETCH, 0, 0, pe);                    \
    if (e) return (T)0;                                                                                            \
    return (T)__spirv_AtomicLoad((__global U *)a, SCOPE_CROSS_DEVICE, SEM);                                        \
  }                                                                                                                \
  int xpushmem_##NAME##_atomic_set(long dest, T value, int pe) {                                                   \
    ulong a = 0;                                                                                                   \
    int e = peer_or_proxy(dest, sizeof(T), pe, XPUSHMEM_DEVICE_CALL_ATOMIC, &a);                                   \
    if (e == PROXIED) return proxy_amo(dest, sizeof(T), XPUSHMEM_AMO_CODE_SET, (ulong)(U)value, 0, pe, &a);        \
    if (!e) __spirv_AtomicStore((__global U *)a, SCOPE_CROSS_DEVICE, SEM, (U)value);                               \
    return e;                                                                                                      \
  }                                                                                                                \
  T xpushmem_##NAME##_atomic_compare_swap(long dest, T cond, T value, int pe) {                                    \
    ulong a = 0;                                                                                                   \
    int e = peer_or_proxy(dest, sizeof(T), pe, XPUSHMEM_DEVICE_CALL_ATOMIC, &a);                                   \
    if (e == PROXIED)                                                                                              \
      return (T)proxy_fetch(dest, sizeof(T), XPUSHMEM_AMO_CODE_COMPARE_SWAP, (ulong)(U)value, (ulong)(U)cond, pe); \
    if (e) return (T)0;                                                                                            \
    return (T)__spirv_AtomicCompareExchange((__global U *)a, SCOPE_CROSS_DEVICE, SEM, SEM, (U)value, (U)cond);     \
  }                                                                                                                \
  T xpushmem_##NAME##_atomic_fetch_inc(long dest, int pe) {                                                        \
    return xpushmem_##NAME##_atomic_fetch_add(dest, (T)1, pe);                                                     \
  }                                                                                                                \
  int xpushmem_##NAME##_atomic_inc(long dest, int pe) {                                                            \
    return xpushmem_##NAME##_atomic_add(dest, (T)1, pe);                                                           \
  }                                                                                                                \
  DEFINE_RMW(NAME, T, U, swap, __spirv_AtomicExchange, SWAP)                                                       \
  DEFINE_RMW(NAME, T, U, fetch_add, __spirv_AtomicIAdd, FETCH_ADD)                                                 \
  DEFINE_RMW(NAME, T, U, fetch_and, __spirv_AtomicAnd, FETCH_AND)                                                  \
  DEFINE_RMW(NAME, T, U, fetch_or, __spirv_AtomicOr, FETCH_OR)                                                     \
  DEFINE_RMW(NAME, T, U, fetch_xor, __spirv_AtomicXor, FETCH_XOR)                                                  \
  DEFINE_NOFETCH(NAME, T, U, add, FETCH_ADD)                                                                       \
  DEFINE_NOFETCH(NAME, T, U, and, FETCH_AND)                                                                       \
  DEFINE_NOFETCH(NAME, T, U, or, FETCH_OR)                                                                         \
  DEFINE_NOFETCH(NAME, T, U, xor, FETCH_XOR)

#define DEFINE_RMW(NAME, T, U, OP, FN, CODE)                                                                       \
  T xpushmem_##NAME##_atomic_##OP(long dest, T value, int pe) {                                                    \
    ulong a = 0;                                                                                                   \
    int e = peer_or_proxy(dest, sizeof(T), pe, XPUSHMEM_DEVICE_CALL_ATOMIC, &a);                                   \
    if (e == PROXIED) return (T)proxy_fetch(dest, sizeof(T), XPUSHMEM_AMO_CODE_##CODE, (ulong)(U)value, 0, pe);    \
    if (e) return (T)0;                                                                                            \
    return (T)FN((__global U *)a, SCOPE_CROSS_DEVICE, SEM, (U)value);                                              \
  }
/* The non-fetching forms report errors; the value is dropped. */
#define DEFINE_NOFETCH(NAME, T, U, OP, CODE)                                                                       \
  int xpushmem_##NAME##_atomic_##OP(long dest, T value, int pe) {                                                  \
    ulong a = 0;                                                                                                   \
    int e = peer_or_proxy(dest, sizeof(T), pe, XPUSHMEM_DEVICE_CALL_ATOMIC, &a);                                   \
    if (e == PROXIED) return proxy_amo(dest, sizeof(T), XPUSHMEM_AMO_CODE_##CODE, (ulong)(U)value, 0, pe, &a);     \
    if (!e) (void)xpushmem_##NAME##_atomic_fetch_##OP(dest, value, pe);                                            \
    return e;                                                                                                      \
  }

/* fetch_add must exist before fetch_inc uses it. */
#define DECLARE_FETCH_ADD(NAME, T, U) T xpushmem_##NAME##_atomic_fetch_add(long dest, T value, int pe);
XPUSHMEM_AMO_TYPES(DECLARE_FETCH_ADD)
XPUSHMEM_AMO_TYPES(DEFINE_AMO)

/* 16-bit waits (OpenSHMEM's short forms) and the 16-bit atomics extension, through rmw16/load16. */
#define DEFINE_WAIT16(NAME, T) DEFINE_WAITS(NAME, T, ALOAD16_##T, CMP_OF_##T)
XPUSHMEM_WAIT16_TYPES(DEFINE_WAIT16)

/* A 16-bit atomic's word: its address here in *a with *via = -1, or (a PE reached through the proxy) this PE's
 * symmetric address with *via = pe. */
static int peer16(long addr, int pe, ulong *a, int *via) {
  *via = -1;
  int e = peer_or_proxy(addr, 2, pe, XPUSHMEM_DEVICE_CALL_ATOMIC, a);
  if (e == PROXIED) {
    *a = (ulong)addr;
    *via = pe;
    e = 0;
  }
  return e ? e : check_align(addr, 2, XPUSHMEM_DEVICE_CALL_ATOMIC);
}
/* One 16-bit atomic: the old value in *out (0 on error); 0 or the error code. */
static int amo16(long addr, int pe, int op, ushort value, ushort cond, ushort *out) {
  ulong a = 0;
  int via = -1;
  *out = 0;
  int e = peer16(addr, pe, &a, &via);
  return e ? e : rmw16(a, via, op, value, cond, out);
}
#define DEFINE_AMO16(NAME, T)                                                                                      \
  T xpushmemx_##NAME##_atomic_fetch(long src, int pe) {                                                            \
    ushort old = 0;                                                                                                \
    (void)amo16(src, pe, RMW16_FETCH, 0, 0, &old);                                                                 \
    return (T)old;                                                                                                 \
  }                                                                                                                \
  int xpushmemx_##NAME##_atomic_set(long dest, T value, int pe) {                                                  \
    ushort old = 0;                                                                                                \
    return amo16(dest, pe, RMW16_SET, (ushort)value, 0, &old);                                                     \
  }                                                                                                                \
  T xpushmemx_##NAME##_atomic_swap(long dest, T value, int pe) {                                                   \
    ushort old = 0;                                                                                                \
    (void)amo16(dest, pe, RMW16_SET, (ushort)value, 0, &old);                                                      \
    return (T)old;                                                                                                 \
  }                                                                                                                \
  T xpushmemx_##NAME##_atomic_compare_swap(long dest, T cond, T value, int pe) {                                   \
    ushort old = 0;                                                                                                \
    (void)amo16(dest, pe, RMW16_CAS, (ushort)value, (ushort)cond, &old);                                           \
    return (T)old;                                                                                                 \
  }                                                                                                                \
  T xpushmemx_##NAME##_atomic_fetch_add(long dest, T value, int pe) {                                              \
    ushort old = 0;                                                                                                \
    (void)amo16(dest, pe, RMW16_ADD, (ushort)value, 0, &old);                                                      \
    return (T)old;                                                                                                 \
  }                                                                                                                \
  int xpushmemx_##NAME##_atomic_add(long dest, T value, int pe) {                                                  \
    ushort old = 0;                                                                                                \
    return amo16(dest, pe, RMW16_ADD, (ushort)value, 0, &old);                                                     \
  }
XPUSHMEM_WAIT16_TYPES(DEFINE_AMO16)

/* ---- ordering and barriers ---------------------------------------------------------------------------------- */

/* With a host proxy, fence is a quiet of the proxy's requests (the fabric orders nothing without completion). */
int xpushmem_fence(void) {
  fence_all();
  return ST.proxy ? proxy_quiet(XPUSHMEM_DEVICE_CALL_ORDER) : 0;
}

int xpushmem_quiet(void) {
  fence_all();
  return ST.proxy ? proxy_quiet(XPUSHMEM_DEVICE_CALL_ORDER) : 0;
}

/* Every member adds 1 to every member's arrive[team], then waits until its own count reaches epoch * size. A
 * member this device does not map gets its 1 through the host proxy (a posted, non-fetching add; the proxy first
 * completes this PE's earlier requests, so the barrier also completes them: quiet); the wait stays on the local
 * counter, and gives up early when the proxy reports a failure (a member that died: PeerLost at the launch).
 * Not inlined: the group forms run it in item 0 alone, and inlined into that branch of every group barrier and
 * collective, its loops are what a vectorising JIT compiles slowest (Intel's OpenCL CPU runtime took 65 s for the
 * team kernels of the tests at sub-groups of 8-32, 18 s with this and proxy_post kept out of line; a call costs
 * nothing beside a barrier's cross-device atomics). */
static __attribute__((noinline)) int team_barrier(int team, uint call) {
  int e = team_ok(team, call);
  if (e) return e;
  XpushmemDeviceTeam t = team_at(team);
  fence_all();
  if (ST.proxy && (e = proxy_quiet(call))) return e;
  __global ulong *epochs = (__global ulong *)ST.epoch;
  __global ulong *mine = (__global ulong *)(ST.my_base + ST.scratch_offset) + team;
  ulong epoch = epochs[team] + 1;
  epochs[team] = epoch;
  ulong counter = ST.scratch_offset + (ulong)team * sizeof(ulong);
  for (int i = 0; i < t.size; i++) {
    int pe = t.start + i * t.stride;
    ulong b = (pe >= 0 && pe < ST.n_pes) ? base_of(pe) : 0;
    if (b != 0)
      __spirv_AtomicIAdd((__global ulong *)(b + counter), SCOPE_CROSS_DEVICE, SEM, 1ul);
    else if (proxied(pe))
      e = proxy_post(XPUSHMEM_PROXY_OP_SIGNAL, pe, 0, 0, 0, counter, 1, XPUSHMEM_DEVICE_SIGNAL_OP_ADD, 0, call);
    else
      e = record(XPUSHMEM_DEVICE_ERROR_BAD_PE, call, pe);
    if (e) return e;
  }
  ulong target = epoch * (ulong)t.size, polls = 0;
  uint spin = 1;
  while (__spirv_AtomicLoad(mine, SCOPE_CROSS_DEVICE, SEM) < target) {
    e = xpushmem_device_backoff(&polls, &spin, call, (long)mine);
    if (e) return e;
  }
  fence_all();
  return 0;
}

int xpushmem_barrier_all(void) { return team_barrier(XPUSHMEM_TEAM_WORLD, XPUSHMEM_DEVICE_CALL_BARRIER); }
int xpushmem_sync_all(void) { return team_barrier(XPUSHMEM_TEAM_WORLD, XPUSHMEM_DEVICE_CALL_BARRIER); }
int xpushmem_team_sync(int team) { return team_barrier(team, XPUSHMEM_DEVICE_CALL_TEAM_SYNC); }

/* Every item fences and meets the group; item 0 runs the PE barrier; the group meets again. Returns the module's
 * first recorded error (the same value in every item). */
static int group_barrier(int team, uint call, Group g) {
  fence_all();
  group_sync(g);
  if (g.id == 0) team_barrier(team, call);
  group_sync(g);
  return (int)ST.error;
}

#define DEFINE_GROUP_BARRIERS(SUFFIX, KIND)                                                                        \
  int xpushmemx_barrier_all_##SUFFIX(void) {                                                                       \
    return group_barrier(XPUSHMEM_TEAM_WORLD, XPUSHMEM_DEVICE_CALL_BARRIER, group_of(KIND));                        \
  }                                                                                                                \
  int xpushmemx_sync_all_##SUFFIX(void) {                                                                          \
    return group_barrier(XPUSHMEM_TEAM_WORLD, XPUSHMEM_DEVICE_CALL_BARRIER, group_of(KIND));                        \
  }                                                                                                                \
  int xpushmemx_team_sync_##SUFFIX(int team) {                                                                     \
    return group_barrier(team, XPUSHMEM_DEVICE_CALL_TEAM_SYNC, group_of(KIND));                                    \
  }
DEFINE_GROUP_BARRIERS(work_group, GROUP_WORK)
DEFINE_GROUP_BARRIERS(sub_group, GROUP_SUB)

/* ---- group collectives (work-group and sub-group forms, one body each) ------------------------------------- */
/* Members this device maps are read and written directly; the others through the host proxy (puts and gets
 * posted by item 0 without waiting: the closing barrier completes them, as it quiets first). */

static int member(XpushmemDeviceTeam t, int i) { return t.start + i * t.stride; }

/* Checks the team (every item does, so every item returns the same verdict). */
static int coll_team(int team, XpushmemDeviceTeam *t) {
  int e = team_ok(team, XPUSHMEM_DEVICE_CALL_COLLECTIVE);
  if (e) return e;
  *t = team_at(team);
  return 0;
}

static int alltoallmem(int team, long dest, long src, ulong nbytes_per_pe, Group g) {
  uint call = XPUSHMEM_DEVICE_CALL_COLLECTIVE;
  XpushmemDeviceTeam t;
  int e = coll_team(team, &t);
  if (e) return e;
  if ((e = group_barrier(team, call, g))) return e;
  for (int j = 0; j < t.size && !e; j++)
    e = put_share_nbi(dest + (ulong)t.my_pe * nbytes_per_pe, src + (ulong)j * nbytes_per_pe, nbytes_per_pe,
                      member(t, j), g.id, g.count);
  return group_barrier(team, call, g);
}

static int broadcastmem(int team, long dest, long src, ulong nbytes, int pe_root, Group g) {
  uint call = XPUSHMEM_DEVICE_CALL_COLLECTIVE;
  XpushmemDeviceTeam t;
  int e = coll_team(team, &t);
  if (e) return e;
  if (pe_root < 0 || pe_root >= t.size) return record(XPUSHMEM_DEVICE_ERROR_BAD_PE, call, pe_root);
  if ((e = group_barrier(team, call, g))) return e;
  get_share_nbi(dest, src, nbytes, member(t, pe_root), g.id, g.count);
  return group_barrier(team, call, g);
}

static int fcollectmem(int team, long dest, long src, ulong nbytes, Group g) {
  uint call = XPUSHMEM_DEVICE_CALL_COLLECTIVE;
  XpushmemDeviceTeam t;
  int e = coll_team(team, &t);
  if (e) return e;
  if ((e = group_barrier(team, call, g))) return e;
  for (int j = 0; j < t.size && !e; j++)
    e = put_share_nbi(dest + (ulong)t.my_pe * nbytes, src, nbytes, member(t, j), g.id, g.count);
  return group_barrier(team, call, g);
}

#define DEFINE_GROUP_COLLECTIVES(SUFFIX, KIND)                                                                     \
  int xpushmemx_alltoallmem_##SUFFIX(int team, long dest, long src, ulong nbytes_per_pe) {                         \
    return alltoallmem(team, dest, src, nbytes_per_pe, group_of(KIND));                                            \
  }                                                                                                                \
  int xpushmemx_broadcastmem_##SUFFIX(int team, long dest, long src, ulong nbytes, int pe_root) {                  \
    return broadcastmem(team, dest, src, nbytes, pe_root, group_of(KIND));                                         \
  }                                                                                                                \
  int xpushmemx_fcollectmem_##SUFFIX(int team, long dest, long src, ulong nbytes) {                                \
    return fcollectmem(team, dest, src, nbytes, group_of(KIND));                                                   \
  }
DEFINE_GROUP_COLLECTIVES(work_group, GROUP_WORK)
DEFINE_GROUP_COLLECTIVES(sub_group, GROUP_SUB)

/* Reductions: between two team barriers every item reduces its share of the elements, reading every member's
 * source directly, in member order, and folding it into dest (half and bfloat16 values are combined in float
 * and rounded back at every step). dest must not overlap src (the sources are read while results are written). */
static float bf16_to_float(ushort b) { return as_float((uint)b << 16); }

static ushort float_to_bf16(float f) { /* round to nearest even; NaN stays NaN */
  uint x = as_uint(f);
  if ((x & 0x7fffffff) > 0x7f800000) return (ushort)((x >> 16) | 0x40);
  return (ushort)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

#define LOAD_int8(p) (*(const __global char *)(p))
#define LOAD_int16(p) (*(const __global short *)(p))
#define LOAD_int32(p) (*(const __global int *)(p))
#define LOAD_int64(p) (*(const __global long *)(p))
#define LOAD_uint8(p) (*(const __global uchar *)(p))
#define LOAD_uint16(p) (*(const __global ushort *)(p))
#define LOAD_uint32(p) (*(const __global uint *)(p))
#define LOAD_uint64(p) (*(const __global ulong *)(p))
#define LOAD_half(p) vload_half(0, (const __global half *)(p))
#define LOAD_bfloat16(p) bf16_to_float(*(const __global ushort *)(p))
#define LOAD_float(p) (*(const __global float *)(p))
#define LOAD_double(p) (*(const __global double *)(p))
#define STORE_int8(p, v) (*(__global char *)(p) = (v))
#define STORE_int16(p, v) (*(__global short *)(p) = (v))
#define STORE_int32(p, v) (*(__global int *)(p) = (v))
#define STORE_int64(p, v) (*(__global long *)(p) = (v))
#define STORE_uint8(p, v) (*(__global uchar *)(p) = (v))
#define STORE_uint16(p, v) (*(__global ushort *)(p) = (v))
#define STORE_uint32(p, v) (*(__global uint *)(p) = (v))
#define STORE_uint64(p, v) (*(__global ulong *)(p) = (v))
#define STORE_half(p, v) vstore_half_rte((v), 0, (__global half *)(p))
#define STORE_bfloat16(p, v) (*(__global ushort *)(p) = float_to_bf16(v))
#define STORE_float(p, v) (*(__global float *)(p) = (v))
#define STORE_double(p, v) (*(__global double *)(p) = (v))

#define OP_sum(a, b) ((a) + (b))
#define OP_prod(a, b) ((a) * (b))
#define OP_min(a, b) ((b) < (a) ? (b) : (a))
#define OP_max(a, b) ((b) > (a) ? (b) : (a))
#define OP_and(a, b) ((a) & (b))
#define OP_or(a, b) ((a) | (b))
#define OP_xor(a, b) ((a) ^ (b))

/* Operations of the generic reduction, in the order of the header's lists. */
#define ROP_sum 0
#define ROP_prod 1
#define ROP_min 2
#define ROP_max 3
#define ROP_and 4
#define ROP_or 5
#define ROP_xor 6

/* One fold per type (the operation is a runtime value, so the module holds 12 loops rather than 64): this item's
 * share of member source s folded into dest. */
#define FOLD_INT(NAME, T, ACC)                                                                                     \
  static __attribute__((noinline)) void fold_##NAME(ulong dest, ulong s, int first, ulong n, ulong id,           \
                                                    ulong count, int op) {                                         \
    for (ulong i = id; i < n; i += count) {                                                                        \
      ACC v = LOAD_##NAME(s + i * sizeof(T));                                                                      \
      if (!first) {                                                                                                \
        ACC a = LOAD_##NAME(dest + i * sizeof(T));                                                                 \
        switch (op) {                                                                                              \
        case ROP_sum: v = OP_sum(a, v); break;                                                                     \
        case ROP_prod: v = OP_prod(a, v); break;                                                                   \
        case ROP_min: v = OP_min(a, v); break;                                                                     \
        case ROP_max: v = OP_max(a, v); break;                                                                     \
        case ROP_and: v = OP_and(a, v); break;                                                                     \
        case ROP_or: v = OP_or(a, v); break;                                                                       \
        default: v = OP_xor(a, v); break;                                                                          \
        }                                                                                                          \
      }                                                                                                            \
      STORE_##NAME(dest + i * sizeof(T), v);                                                                       \
    }                                                                                                              \
  }
#define FOLD_FLOAT(NAME, T, ACC)                                                                                   \
  static __attribute__((noinline)) void fold_##NAME(ulong dest, ulong s, int first, ulong n, ulong id,           \
                                                    ulong count, int op) {                                         \
    for (ulong i = id; i < n; i += count) {                                                                        \
      ACC v = LOAD_##NAME(s + i * sizeof(T));                                                                      \
      if (!first) {                                                                                                \
        ACC a = LOAD_##NAME(dest + i * sizeof(T));                                                                 \
        switch (op) {                                                                                              \
        case ROP_sum: v = OP_sum(a, v); break;                                                                     \
        case ROP_prod: v = OP_prod(a, v); break;                                                                   \
        case ROP_min: v = OP_min(a, v); break;                                                                     \
        default: v = OP_max(a, v); break;                                                                          \
        }                                                                                                          \
      }                                                                                                            \
      STORE_##NAME(dest + i * sizeof(T), v);                                                                       \
    }                                                                                                              \
  }
XPUSHMEM_REDUCE_INT_TYPES(FOLD_INT)
XPUSHMEM_REDUCE_FLOAT_TYPES(FOLD_FLOAT)

/* Type numbers of the generic reduction, in list order. */
enum {
#define TYPE_ENUM(NAME, T, ACC) RTYPE_##NAME,
  XPUSHMEM_REDUCE_INT_TYPES(TYPE_ENUM) XPUSHMEM_REDUCE_FLOAT_TYPES(TYPE_ENUM)
};

/* The reduction: between two team barriers, in rounds of at most XPUSHMEM_DEVICE_REDUCE_SCRATCH_BYTES of the
 * source, every member's chunk is folded into dest in member order (the same order and arithmetic whether a member
 * is mapped or not, so results are bit-identical across placements): a mapped member's chunk is read in place, a
 * member on another node is pulled first into this PE's scratch area (abi::ScratchLayout::reduce, in the heap's
 * tail, where the proxy may write) by item 0 through the proxy, the group meeting before and after the fold. */
static __attribute__((noinline)) int reduce_group(int team, ulong dest, ulong src, ulong nreduce, ulong size,
                                                  int type, int op, Group g) {
  uint call = XPUSHMEM_DEVICE_CALL_COLLECTIVE;
  XpushmemDeviceTeam t;
  int e = coll_team(team, &t);
  if (e) return e;
  ulong bytes = nreduce * size;
  if (dest < src + bytes && src < dest + bytes) return record(XPUSHMEM_DEVICE_ERROR_BAD_ARGUMENT, call, dest);
  if ((e = group_barrier(team, call, g))) return e;
  ulong chunk = XPUSHMEM_DEVICE_REDUCE_SCRATCH_BYTES / size;
  for (ulong first = 0; first < nreduce && !e; first += chunk) {
    ulong n = nreduce - first < chunk ? nreduce - first : chunk, off = first * size;
    for (int m = 0; m < t.size && !e; m++) {
      ulong s = 0;
      e = peer_or_proxy(src + off, n * size, member(t, m), call, &s);
      if (e == PROXIED) {
        s = ST.reduce_scratch;
        e = 0;
        group_sync(g); /* every item is done with the previous contents */
        if (g.id == 0)
          proxy_post(XPUSHMEM_PROXY_OP_GET, member(t, m), s, src + off - ST.my_base, n * size, 0, 0, 0, 1, call);
        group_sync(g); /* a failed get is recorded (and returned by the closing barrier); the loop stays uniform */
      }
      if (e) break;
      switch (type) {
#define FOLD_CASE(NAME, T, ACC)                                                                                    \
  case RTYPE_##NAME: fold_##NAME(dest + off, s, m == 0, n, g.id, g.count, op); break;
        XPUSHMEM_REDUCE_INT_TYPES(FOLD_CASE)
        XPUSHMEM_REDUCE_FLOAT_TYPES(FOLD_CASE)
      }
    }
  }
  return group_barrier(team, call, g);
}

#define DEFINE_REDUCE(NAME, T, ACC, OP)                                                                            \
  int xpushmemx_##NAME##_##OP##_reduce_work_group(int team, long dest, long src, ulong nreduce) {                  \
    return reduce_group(team, dest, src, nreduce, sizeof(T), RTYPE_##NAME, ROP_##OP, group_of(GROUP_WORK));        \
  }                                                                                                                \
  int xpushmemx_##NAME##_##OP##_reduce_sub_group(int team, long dest, long src, ulong nreduce) {                   \
    return reduce_group(team, dest, src, nreduce, sizeof(T), RTYPE_##NAME, ROP_##OP, group_of(GROUP_SUB));         \
  }
#define DEFINE_REDUCE_INT(NAME, T, ACC)                                                                            \
  DEFINE_REDUCE(NAME, T, ACC, sum)                                                                                 \
  DEFINE_REDUCE(NAME, T, ACC, prod)                                                                                \
  DEFINE_REDUCE(NAME, T, ACC, min)                                                                                 \
  DEFINE_REDUCE(NAME, T, ACC, max)                                                                                 \
  DEFINE_REDUCE(NAME, T, ACC, and)                                                                                 \
  DEFINE_REDUCE(NAME, T, ACC, or)                                                                                  \
  DEFINE_REDUCE(NAME, T, ACC, xor)
#define DEFINE_REDUCE_FLOAT(NAME, T, ACC)                                                                          \
  DEFINE_REDUCE(NAME, T, ACC, sum)                                                                                 \
  DEFINE_REDUCE(NAME, T, ACC, prod)                                                                                \
  DEFINE_REDUCE(NAME, T, ACC, min)                                                                                 \
  DEFINE_REDUCE(NAME, T, ACC, max)
XPUSHMEM_REDUCE_INT_TYPES(DEFINE_REDUCE_INT)
XPUSHMEM_REDUCE_FLOAT_TYPES(DEFINE_REDUCE_FLOAT)
