/* xpushmem_ops.cl: PyTorch's NVSHMEM op family as kernels over the xpushmem device library.
 *
 * Every kernel runs as ONE work-group per PE (XPO_GROUP_SIZE items) and takes its group as an int array of
 * global PEs in group-rank order. The semantics are the host path's (ops/src/a2a.rs, tile.rs, p2p.rs; the layout
 * rules of ops/src/plan.rs), including its verdicts: every collective op starts with a sync step that exchanges
 * each rank's "rejected?" flag and the digest of its symmetric arguments, so either every rank proceeds or every
 * rank fails (with its own error, or "rank r rejected its arguments", or a mismatch), and ends with one that
 * carries the receive-side verdict. A kernel finishes by writing its status record (host memory): code and
 * arguments, then `done = seq`.
 *
 * Sync region (symmetric, XPO_SYNC_WORDS_PER_PE words per PE of the world), per PE:
 *   flag[n]          flag[src] = number of sync messages src has sent to this PE (monotone)
 *   pay[n][2][2]     the message's (error, digest), double-buffered by the message number's parity
 *   sent[n], seen[n] this PE's own counters (messages sent to / received from each PE)
 * A sender can run at most one message ahead of a receiver that is still reading (it needs the receiver's next
 * message to finish its own step), so two payload slots suffice and no word is ever reset.
 */
#include "xpushmem_device.h"
#include "xpushmem_ops_abi.h"

/* Every op kernel is declared XPO_KERNEL. Its work-item 0 spins in the device library's waits, whose time limit is
 * counted in polls (timeout_polls), so how long a poll takes is part of how soon a kernel gives up on a peer (the
 * device cannot see a dead mapped peer: its wait runs out, then the host names the peer). Intel's OpenCL CPU
 * runtime (ze-emu) vectorizes a kernel 16 work-items wide when its heuristic finds that profitable, and one
 * work-item's spin in a 16-wide kernel polls 30 to 50 times slower than in a scalar one: a kernel that crossed the
 * heuristic's line (xpo_ep_dispatch with its non-blocking cross-node puts) took 9 to 17 s instead of 0.3 s to give
 * up on a dead peer. A vector vec_type_hint tells that runtime the kernel is vectorized already, so no op kernel
 * is (they all compile to scalar code, whatever the kernel's body). It is only a hint: what a GPU compiler makes of
 * it is not verified. */
#define XPO_KERNEL __kernel __attribute__((vec_type_hint(float4)))

#define FLAG(r, n, p) ((r) + 8ul * (ulong)(p))
#define PAY(r, n, p, par, k) ((r) + 8ul * ((ulong)(n) + 4ul * (ulong)(p) + 2ul * (par) + (k)))
#define SENT(r, n, p) ((__global ulong *)((r) + 8ul * (5ul * (ulong)(n) + (ulong)(p))))
#define SEEN(r, n, p) ((__global ulong *)((r) + 8ul * (6ul * (ulong)(n) + (ulong)(p))))

#define LMAX 0x7fffffffffffffffl

void __attribute__((overloadable)) __spirv_AtomicStore(__global ulong *p, int scope, int sem, ulong v);

typedef struct {
  long code, a, b, c;
} verdict_t;

/* One sync step of the group (work-item 0 only): send (err, digest) to every member, wait for every member's.
 * Fills *v with this rank's verdict: its own code, else a failed peer (the lowest PE), else a peer with another
 * digest (the lowest PE). Returns non-zero when a wait gave up (v holds XPO_ERR_TIMEOUT). */
/* The send half of a sync step: 0, or 1 with *v set when a member is unreachable. Each loop of a sync step is a
 * function of its own (noinline): llvm-spirv-14 lays out consecutive loops of one function in an order spirv-val
 * rejects. A mapped member's payload is stored directly, then its flag set; a member the device does not map (a
 * PE on another node) gets both through the host proxy in one put-with-signal (data, then the signal), whose
 * source is this PE's own copy of the payload: the message to itself (k = 0, always mapped), in its heap, where
 * the proxy reads sources. */
__attribute__((noinline)) static int sync_send(ulong region, __global const int *pes, int w, int me, long err,
                                               ulong digest, verdict_t *v) {
  int npes = xpushmem_n_pes();
  int my_pe = xpushmem_my_pe();
  int bad = 0;
  long own = 0;
  for (int k = 0; k < w; k++) {
    int p = pes[(me + k) % w];
    __global ulong *sent = SENT(region, npes, p);
    ulong s = *sent + 1;
    *sent = s;
    long dst = (long)PAY(region, npes, my_pe, s & 1ul, 0);
    long pay = xpushmem_ptr(dst, p);
    int e = 0;
    if (pay != 0) {
      ((volatile __global ulong *)pay)[0] = (ulong)err;
      ((volatile __global ulong *)pay)[1] = digest;
      if (p == my_pe) own = pay;
      xpushmemx_signal_op((long)FLAG(region, npes, my_pe), s, XPUSHMEM_SIGNAL_SET, p);
    } else if (own != 0) {
      e = xpushmem_putmem_signal(dst, own, 16ul, (long)FLAG(region, npes, my_pe), s, XPUSHMEM_SIGNAL_SET, p);
    } else {
      e = 1;
    }
    if (e && !bad) {
      bad = 1;
      v->code = XPO_ERR_DEVICE;
      v->a = p;
    }
  }
  return bad;
}

/* The receive half: waits for every member's message; r[0..3] = failed rank, its PE, differing rank, its PE. */
__attribute__((noinline)) static int sync_recv(ulong region, __global const int *pes, int w, int me, ulong digest,
                                               verdict_t *v, int *r) {
  int npes = xpushmem_n_pes();
  int bad = 0;
  r[0] = -1;
  r[1] = 0x7fffffff;
  r[2] = -1;
  r[3] = 0x7fffffff;
  for (int k = 0; k < w; k++) {
    int rk = (me + k) % w;
    int p = pes[rk];
    __global ulong *seen = SEEN(region, npes, p);
    ulong want = *seen + 1;
    *seen = want;
    ulong got = bad ? 0 : xpushmem_signal_wait_until((long)FLAG(region, npes, p), XPUSHMEM_CMP_GE, want);
    if (got < want) {
      if (!bad) {
        bad = 1;
        v->code = XPO_ERR_TIMEOUT;
        v->a = p;
      }
    } else {
      volatile __global ulong *pay = (volatile __global ulong *)PAY(region, npes, p, want & 1ul, 0);
      ulong e = pay[0], d = pay[1];
      if (e && p < r[1]) {
        r[0] = rk;
        r[1] = p;
      }
      if (d != digest && p < r[3]) {
        r[2] = rk;
        r[3] = p;
      }
    }
  }
  return bad;
}

/* One sync step of the group (work-item 0 only): send (err, digest) to every member, wait for every member's.
 * Fills *v with this rank's verdict: its own code, else a failed peer (the lowest PE), else a peer with another
 * digest (the lowest PE). Returns non-zero when a wait gave up or a member was unreachable (v says which). */
static int sync_step(ulong region, __global const int *pes, int w, int me, long err, ulong digest, verdict_t *v) {
  int r[4];
  if (sync_send(region, pes, w, me, err, digest, v)) return 1;
  if (sync_recv(region, pes, w, me, digest, v, r)) return 1;
  if (err) {
    v->code = err;
  } else if (r[0] >= 0) {
    v->code = XPO_ERR_PEER_FAILED;
    v->a = r[0];
    v->b = r[1];
  } else if (r[2] >= 0) {
    v->code = XPO_ERR_MISMATCH;
    v->a = r[2];
    v->b = r[3];
  }
  return 0;
}

/* The status record: arguments first, then done = seq (release). */
static void finish(long status, ulong seq, verdict_t v) {
  __global ulong *st = (__global ulong *)status;
  st[1] = (ulong)v.code;
  st[2] = (ulong)v.a;
  st[3] = (ulong)v.b;
  st[4] = (ulong)v.c;
  xpushmem_quiet();
  /* CrossDevice scope (0), Release | CrossWorkgroupMemory (0x4 | 0x200), as the device library's signals. */
  __spirv_AtomicStore(st, 0, 0x204, seq);
}

static verdict_t ok(void) {
  verdict_t v;
  v.code = 0;
  v.a = 0;
  v.b = 0;
  v.c = 0;
  return v;
}

static void wg_barrier(void) { work_group_barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE); }

/* Share item 0's verdict with the work-group. */
static verdict_t share(__local long *slot, verdict_t v) {
  if (get_local_id(0) == 0) {
    slot[0] = v.code;
    slot[1] = v.a;
    slot[2] = v.b;
    slot[3] = v.c;
  }
  wg_barrier();
  verdict_t r;
  r.code = slot[0];
  r.a = slot[1];
  r.b = slot[2];
  r.c = slot[3];
  wg_barrier();
  return r;
}

/* ---- all_to_all_vdev, _2d (dispatch) and _2d_offset (combine) ------------------------------------------------ */

/* Local checks of the send side (the host path's plan::split_offsets, or the 2d_offset column checks). */
static verdict_t check_sends(int mode, __global const long *sp, long n, long in_rows) {
  verdict_t v = ok();
  if (mode == XPO_MODE_2D_OFFSET) {
    for (long i = 0; i < n; i++) {
      long c = sp[i], o = sp[n + i];
      if (c < 0 || o < 0) {
        v.code = XPO_ERR_CHUNK_NEGATIVE;
      } else if (c > 0 && (ulong)o + (ulong)c > (ulong)in_rows) {
        v.code = XPO_ERR_CHUNK_PAST_INPUT;
      }
      if (v.code) {
        v.a = i;
        v.b = c;
        v.c = o;
        return v;
      }
    }
    return v;
  }
  long acc = 0;
  for (long i = 0; i < n; i++) {
    long s = sp[i];
    if (s < 0) {
      v.code = XPO_ERR_SPLIT_NEGATIVE;
      v.a = i;
      v.b = s;
      return v;
    }
    if (acc > LMAX - s) {
      v.code = XPO_ERR_SPLIT_OVERFLOW;
      return v;
    }
    acc += s;
  }
  if (acc > in_rows) {
    v.code = XPO_ERR_SPLIT_EXCEEDS;
    v.a = acc;
    v.b = in_rows;
  }
  return v;
}

/* Rows reserved by a block of `total` rows (plan::aligned_len); -1 on overflow. */
static long aligned_len(long total, long align) {
  if (align == 0) return total;
  if (total > LMAX - (align - 1)) return -1;
  long up = (total + align - 1) / align * align;
  return up > align ? up : align;
}

XPO_KERNEL void xpo_a2av(long region, long pes_addr, int w, int me, int mode, int ne, long align, long input,
                         long in_rows, long out, long out_rows, long row_bytes, long splits, long oso, ulong digest,
                         uint host_err, long status, ulong seq) {
  __local long slot[4];
  __local long chunk[4];
  __global const int *pes = (__global const int *)pes_addr;
  int id = get_local_id(0);
  long n = (long)w * ne;
  int rank_in = mode != XPO_MODE_2D_OFFSET;
  __global const long *sp = (__global const long *)splits;
  __global long *o = (__global long *)oso;

  /* 1. local checks + entry verdict */
  verdict_t v = ok();
  if (id == 0) {
    verdict_t mine = ok();
    if (host_err)
      mine.code = XPO_ERR_HOST_REJECT;
    else
      mine = check_sends(mode, sp, n, in_rows);
    if (!sync_step(region, pes, w, me, mine.code, digest, &v) && mine.code) v = mine;
  }
  v = share(slot, v);
  if (v.code) {
    if (id == 0) finish(status, seq, v);
    return;
  }

  /* 2. push: every receiver's entries of row 0 (counts) and row 1 (source rows), then a sync step */
  if (id == 0) {
    /* sender entry t goes to (rank p, index i): dispatch t = p * ne + e -> i = e * W + me; combine
     * t = e * W + p -> i = me * ne + e (plan::Exchange). Nested loops: no division (llvm-spirv-14 cannot take
     * the `freeze` LLVM emits for a division and remainder pair). */
    long acc = 0;
    for (long a = 0; a < (rank_in ? w : ne) && !v.code; a++) {
      for (long b = 0; b < (rank_in ? ne : w); b++) {
        long t = rank_in ? a * ne + b : a * w + b;
        long p = rank_in ? a : b;
        long i = rank_in ? b * w + me : (long)me * ne + a;
        long cnt = sp[t];
        long src = mode == XPO_MODE_2D_OFFSET ? sp[n + t] : acc;
        acc += cnt;
        long r0 = xpushmem_ptr((long)&o[i], pes[p]);
        long r1 = xpushmem_ptr((long)&o[n + i], pes[p]);
        if (r0 == 0 || r1 == 0) {
          v.code = XPO_ERR_DEVICE;
          v.a = pes[p];
          break;
        }
        *(__global long *)r0 = cnt;
        *(__global long *)r1 = src;
      }
    }
    xpushmem_quiet();
    verdict_t s = ok();
    if (sync_step(region, pes, w, me, v.code, 0, &s) || !v.code) v = s;
  }
  v = share(slot, v);
  if (v.code) {
    if (id == 0) finish(status, seq, v);
    return;
  }

  /* 3. receive: the layout (plan::recv_layout) and its bounds, then every chunk pulled in order */
  long major = rank_in ? ne : w, minor = rank_in ? w : ne;
  if (id == 0) {
    long start = 0, wend = 0;
    for (long b = 0; b < major && !v.code; b++) {
      long acc = start;
      for (long j = 0; j < minor; j++) {
        long c = o[b * minor + j];
        if (c < 0) {
          v.code = XPO_ERR_RECV_NEGATIVE;
          v.a = c;
          break;
        }
        if (acc > LMAX - c) {
          v.code = XPO_ERR_RECV_OVERFLOW;
          break;
        }
        if (c > 0 && acc + c > wend) wend = acc + c;
        acc += c;
      }
      if (v.code) break;
      long len = aligned_len(acc - start, align);
      if (len < 0 || start > LMAX - len) {
        v.code = XPO_ERR_RECV_OVERFLOW;
        break;
      }
      start += len;
    }
    if (!v.code && wend > out_rows) {
      v.code = XPO_ERR_OUT_TOO_SMALL;
      v.a = wend;
      v.b = out_rows;
    }
  }
  v = share(slot, v);
  long start = 0, acc = 0, bstart = 0;
  if (!v.code) {
    for (long b = 0; b < major; b++) {
      for (long j = 0; j < minor; j++) {
        long i = b * minor + j;
        if (id == 0) {
          if (j == 0) {
            bstart = start;
            acc = start;
          }
          long c = o[i];
          chunk[0] = c;
          chunk[1] = o[n + i];
          chunk[2] = acc;
          chunk[3] = pes[rank_in ? j : b];
          acc += c;
          if (j == minor - 1) start += aligned_len(acc - bstart, align);
        }
        wg_barrier();
        long c = chunk[0];
        int e = 0;
        if (c > 0)
          e = xpushmemx_getmem_work_group(out + chunk[2] * row_bytes, input + chunk[1] * row_bytes,
                                          (ulong)(c * row_bytes), (int)chunk[3]);
        if (id == 0) {
          if (e && !v.code) {
            v.code = XPO_ERR_DEVICE;
            v.a = e;
          }
          o[n + i] = chunk[2];
        }
        wg_barrier();
      }
    }
  }

  /* 4. exit: the receive-side verdict (peers' inputs are no longer read once every rank is here) */
  if (id == 0) {
    xpushmem_quiet();
    verdict_t s = ok();
    long err = v.code;
    if (sync_step(region, pes, w, me, err, 0, &s) || !err) v = s;
    finish(status, seq, v);
  }
}

/* ---- nvshmem_all_to_all -------------------------------------------------------------------------------------- */

XPO_KERNEL void xpo_a2a(long region, long pes_addr, int w, int me, long input, long out, long chunk_bytes,
                        ulong digest, uint host_err, long status, ulong seq) {
  __local long slot[4];
  __global const int *pes = (__global const int *)pes_addr;
  int id = get_local_id(0);
  verdict_t v = ok();
  if (id == 0) {
    long err = host_err ? XPO_ERR_HOST_REJECT : 0;
    sync_step(region, pes, w, me, err, digest, &v);
  }
  v = share(slot, v);
  if (v.code) {
    if (id == 0) finish(status, seq, v);
    return;
  }
  int e = 0;
  for (int k = 0; k < w; k++) {
    int peer = (me + k) % w;
    int r = xpushmemx_getmem_work_group(out + peer * chunk_bytes, input + me * chunk_bytes, (ulong)chunk_bytes,
                                        pes[peer]);
    if (r && !e) e = r;
  }
  if (id == 0) {
    xpushmem_quiet();
    verdict_t s = ok();
    long err = e ? XPO_ERR_DEVICE : 0;
    if (sync_step(region, pes, w, me, err, 0, &s) || !err) v = s;
    else v.code = XPO_ERR_DEVICE, v.a = e;
    finish(status, seq, v);
  }
}

/* ---- nvshmem_broadcast: non-roots pull the root's runs (runs: pairs of (local address, bytes)) --------------- */

XPO_KERNEL void xpo_bcast(long region, long pes_addr, int w, int me, int root, long runs, long nruns, ulong digest,
                          uint host_err, long status, ulong seq) {
  __local long slot[4];
  __global const int *pes = (__global const int *)pes_addr;
  __global const long *rv = (__global const long *)runs;
  int id = get_local_id(0);
  verdict_t v = ok();
  if (id == 0) sync_step(region, pes, w, me, host_err ? XPO_ERR_HOST_REJECT : 0, digest, &v);
  v = share(slot, v);
  if (v.code) {
    if (id == 0) finish(status, seq, v);
    return;
  }
  int e = 0;
  if (me != root) {
    for (long k = 0; k < nruns; k++) {
      int r = xpushmemx_getmem_work_group(rv[2 * k], rv[2 * k], (ulong)rv[2 * k + 1], pes[root]);
      if (r && !e) e = r;
    }
  }
  if (id == 0) {
    xpushmem_quiet();
    verdict_t s = ok();
    long err = e ? XPO_ERR_DEVICE : 0;
    if (sync_step(region, pes, w, me, err, 0, &s) || !err) v = s;
    else v.code = XPO_ERR_DEVICE, v.a = e;
    finish(status, seq, v);
  }
}

/* ---- tile_reduce / multi_root_tile_reduce: the root sums the rank's tiles in f32, in group-rank order -------- */

/* Bit-exact ports of ops/src/dtype.rs (f16_to_f32, f32_to_f16, f32_to_bf16), so both paths round alike. */
static float f16_to_f32(ushort h) {
  uint sign = ((uint)(h & 0x8000u)) << 16;
  uint exp = (h >> 10) & 0x1fu;
  uint man = h & 0x3ffu;
  uint bits;
  /* `exp` goes through a volatile: otherwise LLVM turns the tests into a switch on an i5/i15 value, which
   * llvm-spirv-14 rejects. */
  volatile uint ev = exp;
  uint ex = ev;
  if (ex == 0x1fu) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (ex == 0) {
    if (man == 0) {
      bits = sign;
    } else {
      uint e = 113u, m = man;
      while ((m & 0x400u) == 0) {
        m <<= 1;
        e -= 1;
      }
      bits = sign | (e << 23) | ((m & 0x3ffu) << 13);
    }
  } else {
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  }
  return as_float(bits);
}

static ushort f32_to_f16(float x) {
  uint b = as_uint(x);
  ushort sign = (ushort)((b >> 16) & 0x8000u);
  int exp = (int)((b >> 23) & 0xffu);
  uint man = b & 0x7fffffu;
  if (exp == 0xff) {
    ushort nan = man != 0 ? (ushort)(0x200u | (man >> 13)) : 0;
    return sign | 0x7c00 | nan;
  }
  int e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    uint m = man | 0x800000u;
    uint shift = (uint)(14 - e);
    uint hlf = 1u << (shift - 1);
    uint rem = m & ((1u << shift) - 1);
    uint r = m >> shift;
    if (rem > hlf || (rem == hlf && (r & 1u))) r += 1;
    return sign | (ushort)r;
  }
  uint r = ((uint)e << 10) | (man >> 13);
  uint rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r += 1;
  return sign | (ushort)r;
}

static ushort f32_to_bf16(float x) {
  uint b = as_uint(x);
  if (isnan(x)) return (ushort)((b >> 16) | 0x40u);
  uint r = b + (0x7fffu + ((b >> 16) & 1u));
  return (ushort)(r >> 16);
}

static float load_elem(int dtype, ulong addr) {
  if (dtype == XPO_DTYPE_F32) return *(__global const float *)addr;
  ushort h = *(__global const ushort *)addr;
  return dtype == XPO_DTYPE_F16 ? f16_to_f32(h) : as_float((uint)h << 16);
}

static void store_elem(int dtype, ulong addr, float v) {
  if (dtype == XPO_DTYPE_F32)
    *(__global float *)addr = v;
  else
    *(__global ushort *)addr = dtype == XPO_DTYPE_F16 ? f32_to_f16(v) : f32_to_bf16(v);
}

/* This work-item's rows of the sum over the group's tiles; 1 when a member's copy is unreachable. */
__attribute__((noinline)) static int reduce_tile(__global const int *pes, int w, int dtype, long rows, long cols,
                                                 long in_addr, long in_s0, long in_s1, long out_addr, long out_s0,
                                                 long out_s1) {
  long esz = dtype == XPO_DTYPE_F32 ? 4 : 2;
  int e = 0;
  for (long i = get_local_id(0); i < rows; i += get_local_size(0)) {
    for (long j = 0; j < cols; j++) {
      long off = (i * in_s0 + j * in_s1) * esz;
      float acc = 0.0f;
      for (int r = 0; r < w; r++) {
        long src = xpushmem_ptr(in_addr + off, pes[r]);
        if (src == 0)
          e = 1;
        else
          acc += load_elem(dtype, (ulong)src);
      }
      store_elem(dtype, (ulong)(out_addr + (i * out_s0 + j * out_s1) * esz), acc);
    }
  }
  return e;
}

/* `active`: whether this rank is the root of the tile at `in_addr` (strides in elements). */
XPO_KERNEL void xpo_tile(long region, long pes_addr, int w, int me, int active, int dtype, long rows, long cols,
                         long in_addr, long in_s0, long in_s1, long out_addr, long out_s0, long out_s1, ulong digest,
                         uint host_err, long status, ulong seq) {
  __local long slot[4];
  __global const int *pes = (__global const int *)pes_addr;
  int id = get_local_id(0);
  verdict_t v = ok();
  if (id == 0) sync_step(region, pes, w, me, host_err ? XPO_ERR_HOST_REJECT : 0, digest, &v);
  v = share(slot, v);
  if (v.code) {
    if (id == 0) finish(status, seq, v);
    return;
  }
  int e = active ? reduce_tile(pes, w, dtype, rows, cols, in_addr, in_s0, in_s1, out_addr, out_s0, out_s1) : 0;
  __local int failed;
  if (id == 0) failed = 0;
  wg_barrier();
  if (e) failed = 1;
  wg_barrier();
  if (id == 0) {
    xpushmem_quiet();
    verdict_t s = ok();
    long err = failed ? XPO_ERR_DEVICE : 0;
    if (sync_step(region, pes, w, me, err, 0, &s) || !err) v = s;
    else v.code = XPO_ERR_DEVICE;
    finish(status, seq, v);
  }
}

/* ---- nvshmem_put / get / put_with_signal / wait_for_signal (global PEs, no group) --------------------------- */

XPO_KERNEL void xpo_rma(int kind, long addr, long nbytes, int peer, long sig, ulong signal, long status, ulong seq) {
  int e = 0;
  verdict_t v = ok();
  if (kind == XPO_RMA_PUT) {
    e = xpushmemx_putmem_work_group(addr, addr, (ulong)nbytes, peer);
  } else if (kind == XPO_RMA_GET) {
    e = xpushmemx_getmem_work_group(addr, addr, (ulong)nbytes, peer);
  } else if (kind == XPO_RMA_PUT_SIGNAL) {
    e = xpushmemx_putmem_signal_work_group(addr, addr, (ulong)nbytes, sig, signal, XPUSHMEM_SIGNAL_SET, peer);
  } else if (get_local_id(0) == 0) {
    ulong got = xpushmem_signal_wait_until(sig, XPUSHMEM_CMP_EQ, signal);
    if (got != signal || xpushmem_signal_fetch(sig) != signal) {
      v.code = XPO_ERR_TIMEOUT;
      v.a = xpushmem_my_pe();
    }
  }
  if (get_local_id(0) == 0) {
    if (e && !v.code) {
      v.code = XPO_ERR_DEVICE;
      v.a = e;
    }
    xpushmem_quiet();
    finish(status, seq, v);
  }
}

/* ---- the symm_mem handle's signal pad: barrier, put_signal, wait_signal ---------------------------------------- */

/* The device library's bounded back-off (xpushmem_device.cl): nonzero once the wait has given up (a Timeout, or a
 * failure the host proxy recorded). */
int xpushmem_device_backoff(ulong *polls, uint *spin, uint call, ulong addr);

/* Move the 32-bit word at `addr` (this PE's address of a symmetric word) of `pe` from `from` to `to`, retrying with
 * the library's back-off: 0, 1 when the bound ran out, 2 when `pe`'s copy is unreachable, 3 when the wait ended on
 * another recorded error (a failure of the host proxy: the module's error says which). */
__attribute__((noinline)) static int pad_cas(long addr, int pe, uint from, uint to) {
  if (xpushmem_ptr(addr, pe) == 0) return 2;
  ulong polls = 0;
  uint spin = 1;
  for (;;) {
    if (xpushmem_uint32_atomic_compare_swap(addr, from, to, pe) == from) return 0;
    int e = xpushmem_device_backoff(&polls, &spin, XPUSHMEM_DEVICE_CALL_ATOMIC, (ulong)addr);
    if (e) return e == XPUSHMEM_DEVICE_ERROR_TIMEOUT ? 1 : 3;
  }
}

static void pad_fail(verdict_t *v, int e, int rank, int channel, int pe) {
  v->code = e == 1 ? XPO_ERR_PAD_TIMEOUT : XPO_ERR_DEVICE;
  v->a = e == 1 ? rank : pe;
  v->b = channel;
}

/* Signal every rank (barrier) or `peer` (put_signal): its word [channel * w + me] goes 0 -> 1. */
__attribute__((noinline)) static int pad_signal(__global const int *pes, int w, int me, long pad, int channel,
                                                int first, int last, verdict_t *v) {
  for (int r = first; r < last; r++) {
    int e = pad_cas(pad + 4l * ((long)channel * w + me), pes[r], 0u, 1u);
    if (e) {
      pad_fail(v, e, r, channel, pes[r]);
      return 1;
    }
  }
  return 0;
}

/* Consume the signal of every rank (barrier) or `peer` (wait_signal): my word [channel * w + r] goes 1 -> 0. */
__attribute__((noinline)) static int pad_await(__global const int *pes, int w, int me, long pad, int channel,
                                               int first, int last, verdict_t *v) {
  for (int r = first; r < last; r++) {
    int e = pad_cas(pad + 4l * ((long)channel * w + r), pes[me], 1u, 0u);
    if (e) {
      pad_fail(v, e, r, channel, pes[me]);
      return 1;
    }
  }
  return 0;
}

/* `pad`: this PE's address of the handle's signal pad (symmetric); `pes`: the handle's rank -> global PE table.
 * Release before a signal (earlier writes of this PE are visible to the peer first), acquire after a wait. */
XPO_KERNEL void xpo_pad(long pes_addr, int w, int me, int mode, long pad, int channel, int peer, long status,
                        ulong seq) {
  if (get_local_id(0) != 0) return;
  __global const int *pes = (__global const int *)pes_addr;
  verdict_t v = ok();
  xpushmem_fence();
  if (mode == XPO_PAD_BARRIER) {
    if (!pad_signal(pes, w, me, pad, channel, 0, w, &v)) pad_await(pes, w, me, pad, channel, 0, w, &v);
  } else if (mode == XPO_PAD_PUT_SIGNAL) {
    pad_signal(pes, w, me, pad, channel, peer, peer + 1, &v);
  } else {
    pad_await(pes, w, me, pad, channel, peer, peer + 1, &v);
  }
  xpushmem_fence();
  finish(status, seq, v);
}

/* ---- symm_mem's collectives (one-/two-shot all-reduce, reduce-scatter, memset32, stream_write_value32) ---- */
#include "symm_mem.cl"

/* ---- expert-parallel dispatch and combine (TokenSwitch) ------------------------------------------------------ */
#include "ep.cl"
