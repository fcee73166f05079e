/* Host on-queue kernels: the kernels behind `xpushmemx_<op>_on_queue` (C) and `OnQueue` (Rust,
 * shmem/src/device/onqueue.rs). Each is launched as ONE work-group on a caller's Level Zero command list and does
 * its op through the device library (xpushmem_device.cl), so a PE on another node is reached through the host
 * proxy exactly as a user kernel's call is. Every address argument is this PE's address of a symmetric object (the
 * library translates it for the target PE); sizes are bytes for the *mem kernels, elements for the typed ones.
 *
 * Every kernel ends with xq_finish: each work-item quiets (blocking forms: the op is complete at its target when
 * the kernel has finished, so the launch's signal event means remote completion), then work-item 0 writes the
 * op's status record in host memory: word 1 = the library's error code (0: none), then word 0 = 1 (release). The
 * host waits for word 0, then reads the module's recorded error (the call and its argument) as it does after a
 * user kernel's launch.
 *
 * Built by build.sh into prebuilt/xpushmem_queue.spv (linked with the device library of the same build); the
 * runtime embeds that file, and prebuilt_device_library_matches_its_source checks it against a fresh build. */
#include "xpushmem_device.h"

void __attribute__((overloadable)) __spirv_AtomicStore(__global ulong *p, int scope, int sem, ulong v);

/* Kinds of xq_rma: the values of OnQueue's RmaKind (shmem/src/device/onqueue.rs). */
#define XQ_PUT 0
#define XQ_GET 1
#define XQ_PUT_NBI 2
#define XQ_GET_NBI 3

/* Kinds of xq_sync and xq_coll. */
#define XQ_BARRIER_ALL 0
#define XQ_SYNC_ALL 1
#define XQ_TEAM_SYNC 2
#define XQ_BROADCAST 0
#define XQ_FCOLLECT 1
#define XQ_ALLTOALL 2

/* Types of xq_wait_until (ivar width and signedness). */
#define XQ_I32 0
#define XQ_U32 1
#define XQ_I64 2
#define XQ_U64 3
#define XQ_SIGNAL 4

static void xq_finish(long status, int err, int quiet) {
  if (quiet) xpushmem_quiet();
  work_group_barrier(CLK_GLOBAL_MEM_FENCE);
  if (get_local_id(0) == 0) {
    __global ulong *st = (__global ulong *)status;
    st[1] = (ulong)(uint)err;
    /* CrossDevice scope (0), Release | CrossWorkgroupMemory (0x4 | 0x200), as the device library's signals. */
    __spirv_AtomicStore(st, 0, 0x204, 1ul);
  }
}

/* putmem/getmem (+ _nbi: no quiet; complete at the next on-queue quiet). */
__kernel void xq_rma(int kind, long dest, long src, ulong nbytes, int pe, long status) {
  int e;
  if (kind == XQ_PUT || kind == XQ_PUT_NBI) {
    e = kind == XQ_PUT ? xpushmemx_putmem_work_group(dest, src, nbytes, pe)
                       : xpushmemx_putmem_nbi_work_group(dest, src, nbytes, pe);
  } else {
    e = kind == XQ_GET ? xpushmemx_getmem_work_group(dest, src, nbytes, pe)
                       : xpushmemx_getmem_nbi_work_group(dest, src, nbytes, pe);
  }
  xq_finish(status, e, kind == XQ_PUT || kind == XQ_GET);
}

/* Strided iput/iget of `nelems` elements of `esize` bytes: element i goes from src + i*sst*esize to
 * dest + i*dst*esize (strides in elements), the work-items sharing the elements. */
__kernel void xq_strided(int get, long dest, long src, long dst, long sst, ulong nelems, ulong esize, int pe,
                         long status) {
  int e = 0;
  for (ulong i = get_local_id(0); i < nelems; i += get_local_size(0)) {
    long d = dest + (long)i * dst * (long)esize, s = src + (long)i * sst * (long)esize;
    int r = get ? xpushmem_getmem(d, s, esize, pe) : xpushmem_putmem(d, s, esize, pe);
    if (r && !e) e = r;
  }
  xq_finish(status, e, 1);
}

__kernel void xq_putmem_signal(int nbi, long dest, long src, ulong nbytes, long sig, ulong signal, int sig_op,
                               int pe, long status) {
  int e = nbi ? xpushmemx_putmem_signal_nbi_work_group(dest, src, nbytes, sig, signal, sig_op, pe)
              : xpushmemx_putmem_signal_work_group(dest, src, nbytes, sig, signal, sig_op, pe);
  xq_finish(status, e, !nbi);
}

__kernel void xq_signal_op(long sig, ulong signal, int sig_op, int pe, long status) {
  int e = 0;
  if (get_local_id(0) == 0) e = xpushmemx_signal_op(sig, signal, sig_op, pe);
  xq_finish(status, e, 1);
}

/* wait_until on a local symmetric variable (signal_wait_until for XQ_SIGNAL); a wait that gives up is recorded as
 * the library's Timeout. */
__kernel void xq_wait_until(long ivar, int type, int cmp, ulong value, long status) {
  int e = 0;
  if (get_local_id(0) == 0) {
    switch (type) {
    case XQ_I32: e = xpushmem_int32_wait_until(ivar, cmp, (int)value); break;
    case XQ_U32: e = xpushmem_uint32_wait_until(ivar, cmp, (uint)value); break;
    case XQ_I64: e = xpushmem_int64_wait_until(ivar, cmp, (long)value); break;
    case XQ_U64: e = xpushmem_uint64_wait_until(ivar, cmp, value); break;
    default: xpushmem_signal_wait_until(ivar, cmp, value); break;
    }
  }
  xq_finish(status, e, 0);
}

__kernel void xq_quiet(long status) { xq_finish(status, 0, 1); }

__kernel void xq_sync(int kind, int team, long status) {
  int e;
  if (kind == XQ_BARRIER_ALL) {
    e = xpushmemx_barrier_all_work_group();
  } else if (kind == XQ_SYNC_ALL) {
    e = xpushmemx_sync_all_work_group();
  } else {
    e = xpushmemx_team_sync_work_group(team);
  }
  xq_finish(status, e, 0);
}

/* broadcast (root: the team's member number), fcollect, alltoall; sizes in bytes (per member for alltoall). */
__kernel void xq_coll(int kind, int team, long dest, long src, ulong nbytes, int root, long status) {
  int e;
  if (kind == XQ_BROADCAST) {
    e = xpushmemx_broadcastmem_work_group(team, dest, src, nbytes, root);
  } else if (kind == XQ_FCOLLECT) {
    e = xpushmemx_fcollectmem_work_group(team, dest, src, nbytes);
  } else {
    e = xpushmemx_alltoallmem_work_group(team, dest, src, nbytes);
  }
  xq_finish(status, e, 0);
}

/* Strided all-to-all (OpenSHMEM alltoalls): element k of the block member i sends to member j is
 * src[(j*nelems + k)*sst] on i, stored at dest[(i*nelems + k)*dst] on j. A team sync before (every member's source
 * is ready) and after (every store has landed). */
/* One block of xq_alltoalls (to member j); a function of its own (noinline): llvm-spirv-14 lays out nested loops
 * of one function in an order spirv-val rejects. */
__attribute__((noinline)) static int xq_alltoalls_block(int team, int j, int me, long dest, long src, long dst,
                                                        long sst, ulong nelems, ulong esize) {
  int e = 0;
  int pe = xpushmem_team_translate_pe(team, j, XPUSHMEM_TEAM_WORLD);
  for (ulong k = get_local_id(0); k < nelems; k += get_local_size(0)) {
    long d = dest + (long)(((ulong)me * nelems + k) * (ulong)dst * esize);
    long s = src + (long)(((ulong)j * nelems + k) * (ulong)sst * esize);
    int r = xpushmem_putmem(d, s, esize, pe);
    if (r && !e) e = r;
  }
  return e;
}

__attribute__((noinline)) static int xq_alltoalls_blocks(int team, int n, int me, long dest, long src, long dst,
                                                         long sst, ulong nelems, ulong esize) {
  int e = 0;
  for (int j = 0; j < n; j++) {
    int r = xq_alltoalls_block(team, j, me, dest, src, dst, sst, nelems, esize);
    if (r && !e) e = r;
  }
  return e;
}

__kernel void xq_alltoalls(int team, long dest, long src, long dst, long sst, ulong nelems, ulong esize,
                           long status) {
  int e = xpushmemx_team_sync_work_group(team);
  int n = xpushmem_team_n_pes(team), me = xpushmem_team_my_pe(team);
  if (!e && n > 0 && me >= 0) {
    e = xq_alltoalls_blocks(team, n, me, dest, src, dst, sst, nelems, esize);
    xpushmem_quiet();
    int r = xpushmemx_team_sync_work_group(team);
    if (r && !e) e = r;
  }
  xq_finish(status, e, 0);
}

/* collect (sizes that differ per member): this member's `nbytes` of `src` go to `dest` (already advanced by the
 * host to this member's offset: the sum of the sizes of the members before it) on every member, one work-group copy
 * per member. A function of its own (noinline), as xq_alltoalls_blocks. */
__attribute__((noinline)) static int xq_collect_blocks(int team, int n, long dest, long src, ulong nbytes) {
  int e = 0;
  for (int j = 0; j < n; j++) {
    int r = xpushmemx_putmem_work_group(dest, src, nbytes, xpushmem_team_translate_pe(team, j, XPUSHMEM_TEAM_WORLD));
    if (r && !e) e = r;
  }
  return e;
}

/* A team sync before (every member's destination is free) and after (every copy has landed). */
__kernel void xq_collect(int team, long dest, long src, ulong nbytes, long status) {
  int e = xpushmemx_team_sync_work_group(team);
  int n = xpushmem_team_n_pes(team);
  if (!e && n > 0) {
    e = xq_collect_blocks(team, n, dest, src, nbytes);
    xpushmem_quiet();
    int r = xpushmemx_team_sync_work_group(team);
    if (r && !e) e = r;
  }
  xq_finish(status, e, 0);
}

/* Reductions: one kernel per device-library reduction (type x op). */
#define XQ_REDUCE(NAME, T, ACC, OP)                                                                               \
  __kernel void xq_reduce_##NAME##_##OP(int team, long dest, long src, ulong nreduce, long status) {              \
    xq_finish(status, xpushmemx_##NAME##_##OP##_reduce_work_group(team, dest, src, nreduce), 0);                   \
  }
#define XQ_REDUCE_INT(NAME, T, ACC)                                                                               \
  XQ_REDUCE(NAME, T, ACC, sum)                                                                                    \
  XQ_REDUCE(NAME, T, ACC, prod)                                                                                   \
  XQ_REDUCE(NAME, T, ACC, min)                                                                                    \
  XQ_REDUCE(NAME, T, ACC, max)                                                                                    \
  XQ_REDUCE(NAME, T, ACC, and)                                                                                    \
  XQ_REDUCE(NAME, T, ACC, or)                                                                                     \
  XQ_REDUCE(NAME, T, ACC, xor)
#define XQ_REDUCE_FLOAT(NAME, T, ACC)                                                                             \
  XQ_REDUCE(NAME, T, ACC, sum)                                                                                    \
  XQ_REDUCE(NAME, T, ACC, prod)                                                                                   \
  XQ_REDUCE(NAME, T, ACC, min)                                                                                    \
  XQ_REDUCE(NAME, T, ACC, max)
XPUSHMEM_REDUCE_INT_TYPES(XQ_REDUCE_INT)
XQ_REDUCE_FLOAT(float, float, float)
XQ_REDUCE_FLOAT(double, double, double)

/* Prefix sums (the host API's sum_inscan/sum_exscan): a team sync (every member's source is ready), member `me`
 * reads the sources of members 0..me (inclusive) or 0..me-1 (exclusive) element by element with the library's
 * typed g, in member order, then a team sync (no member's source is overwritten while another reads it). */
#define XQ_SCAN(NAME, T)                                                                                          \
  __kernel void xq_scan_##NAME(int exclusive, int team, long dest, long src, ulong nelems, long status) {        \
    int e = xpushmemx_team_sync_work_group(team);                                                                 \
    int me = xpushmem_team_my_pe(team);                                                                           \
    if (!e && me >= 0) {                                                                                          \
      int upto = exclusive ? me : me + 1;                                                                         \
      for (ulong k = get_local_id(0); k < nelems; k += get_local_size(0)) {                                      \
        T acc = (T)0;                                                                                             \
        for (int j = 0; j < upto; j++) {                                                                          \
          acc += xpushmem_##NAME##_g(src + (long)(k * sizeof(T)),                                                 \
                                     xpushmem_team_translate_pe(team, j, XPUSHMEM_TEAM_WORLD));                   \
        }                                                                                                         \
        ((__global T *)dest)[k] = acc;                                                                            \
      }                                                                                                           \
      int r = xpushmemx_team_sync_work_group(team);                                                               \
      if (r) e = r;                                                                                               \
    }                                                                                                             \
    xq_finish(status, e, 0);                                                                                      \
  }
XQ_SCAN(int8, char)
XQ_SCAN(int16, short)
XQ_SCAN(int32, int)
XQ_SCAN(int64, long)
XQ_SCAN(uint8, uchar)
XQ_SCAN(uint16, ushort)
XQ_SCAN(uint32, uint)
XQ_SCAN(uint64, ulong)
XQ_SCAN(float, float)
XQ_SCAN(double, double)
