/* Kernels of tests/tests/device/device_lib.rs: OpenCL C calling the xpushmem device library (linked from its bitcode).
 * Addresses are passed to the library as longs (see include/xpushmem_device.h). */
#include "xpushmem_device.h"

#define GID() get_global_id(0)
#define LID() get_local_id(0)

/* Writes my_pe, n_pes and the library's view of the heap (ptr of `probe` on every PE) into out[0..2+n]. */
__kernel void k_queries(__global long *out, __global long *probe) {
  if (GID() != 0) return;
  int n = xpushmem_n_pes();
  out[0] = xpushmem_my_pe();
  out[1] = n;
  for (int pe = 0; pe < n; pe++) out[2 + pe] = xpushmem_ptr((long)probe, pe);
  out[2 + n] = xpushmem_team_my_pe(XPUSHMEM_TEAM_WORLD);
  out[3 + n] = xpushmem_team_n_pes(XPUSHMEM_TEAM_WORLD);
}

/* Ring: the work-group puts src to the right neighbour's dst and signals it (op, value); item 0 then waits until
 * its own signal equals `expect` and copies the received data to out (every item after the group barrier). */
__kernel void k_ring(__global uchar *dst, __global const uchar *src, ulong n, __global ulong *sig, ulong value,
                     int op, ulong expect, __global uchar *out, __global int *status) {
  int me = xpushmem_my_pe(), np = xpushmem_n_pes();
  int e = xpushmemx_putmem_signal_work_group((long)dst, (long)src, n, (long)sig, value, op, (me + 1) % np);
  if (LID() == 0) {
    ulong got = xpushmem_signal_wait_until((long)sig, XPUSHMEM_CMP_EQ, expect);
    status[0] = e;
    status[1] = got == expect;
  }
  barrier(CLK_GLOBAL_MEM_FENCE);
  for (ulong i = LID(); i < n; i += get_local_size(0)) out[i] = dst[i];
}

/* Every work-item does `per_item` fetch_adds of 1 on word@pe; the largest old value it saw goes to maxold[gid]. */
__kernel void k_fetch_add(__global ulong *word, int pe, int per_item, __global ulong *maxold) {
  ulong m = 0;
  for (int i = 0; i < per_item; i++) {
    ulong old = xpushmem_uint64_atomic_fetch_add((long)word, 1, pe);
    m = old > m ? old : m;
  }
  maxold[GID()] = m;
}

/* One work-item: compare_swap(word@pe0, 0 -> me+1); the old value goes to out[0], a fetch of the word to out[1]
 * after a barrier. */
__kernel void k_elect(__global int *word, __global int *out) {
  int me = xpushmem_my_pe();
  out[0] = xpushmem_int_atomic_compare_swap((long)word, 0, me + 1, 0);
  xpushmem_barrier_all();
  out[1] = xpushmem_int_atomic_fetch((long)word, 0);
}

/* `iters` rounds of: write (iter, me) into the right neighbour's slot, barrier, check the slot the left neighbour
 * wrote, barrier. Mismatches are counted into bad[0]; the last value seen goes to bad[1]. One work-group; the
 * _work_group barrier when `wg` is set, else item 0 alone runs xpushmem_barrier_all. */
__kernel void k_barrier(__global long *slot, int iters, int wg, __global long *bad) {
  int me = xpushmem_my_pe(), np = xpushmem_n_pes();
  int right = (me + 1) % np, left = (me + np - 1) % np;
  long mismatches = 0, last = -1;
  for (int it = 0; it < iters; it++) {
    if (LID() == 0) xpushmem_long_p((long)slot, (long)it * np + me, right);
    if (wg) {
      xpushmemx_barrier_all_work_group();
    } else {
      if (LID() == 0) xpushmem_barrier_all();
      barrier(CLK_GLOBAL_MEM_FENCE);
    }
    last = *(volatile __global long *)slot;
    mismatches += last != (long)it * np + left;
    if (wg) {
      xpushmemx_sync_all_work_group();
    } else {
      barrier(CLK_GLOBAL_MEM_FENCE);
      if (LID() == 0) xpushmem_sync_all();
      barrier(CLK_GLOBAL_MEM_FENCE);
    }
  }
  if (LID() == 0) {
    bad[0] = mismatches;
    bad[1] = last;
  }
}

/* Writer (to `pe`): for i in 1..=n: a = i; fence; b = i. */
__kernel void k_fence_writer(__global long *a, __global long *b, long n, int pe) {
  for (long i = 1; i <= n; i++) {
    xpushmem_long_p((long)a, i, pe);
    xpushmem_fence();
    xpushmem_long_p((long)b, i, pe);
  }
  xpushmem_quiet();
}

/* Reader: until b == n, load b then a; a < b is a violation (counted in out[0]); out[1] = observations. */
__kernel void k_fence_reader(__global long *a, __global long *b, long n, __global long *out) {
  int me = xpushmem_my_pe();
  long bad = 0, seen = 0, bv = 0;
  xpushmem_long_wait_until((long)b, XPUSHMEM_CMP_GE, 1);
  while (bv < n) {
    bv = xpushmem_long_atomic_fetch((long)b, me);
    long av = xpushmem_long_atomic_fetch((long)a, me);
    bad += av < bv;
    seen++;
  }
  out[0] = bad;
  out[1] = seen;
}

/* Work-group copies: put (mode 0) or get (mode 1) n bytes with the _work_group forms. */
__kernel void k_wg_copy(__global uchar *dst, __global const uchar *src, ulong n, int pe, int mode,
                        __global int *status) {
  int e = mode == 0 ? xpushmemx_putmem_work_group((long)dst, (long)src, n, pe)
                    : xpushmemx_getmem_work_group((long)dst, (long)src, n, pe);
  if (LID() == 0) status[0] = e;
}

/* A wait nobody satisfies: ends with the library's timeout. */
__kernel void k_wait_forever(__global ulong *sig, __global ulong *out) {
  out[0] = xpushmem_signal_wait_until((long)sig, XPUSHMEM_CMP_EQ, 12345);
}

/* Collectives on the world team (one work-group). */
__kernel void k_alltoall(__global uchar *dst, __global const uchar *src, ulong n, __global int *status) {
  int e = xpushmemx_alltoallmem_work_group(XPUSHMEM_TEAM_WORLD, (long)dst, (long)src, n);
  if (LID() == 0) status[0] = e;
}
__kernel void k_broadcast(__global uchar *dst, __global const uchar *src, ulong n, int root, __global int *status) {
  int e = xpushmemx_broadcastmem_work_group(XPUSHMEM_TEAM_WORLD, (long)dst, (long)src, n, root);
  if (LID() == 0) status[0] = e;
}
__kernel void k_fcollect(__global uchar *dst, __global const uchar *src, ulong n, __global int *status) {
  int e = xpushmemx_fcollectmem_work_group(XPUSHMEM_TEAM_WORLD, (long)dst, (long)src, n);
  if (LID() == 0) status[0] = e;
}

/* Point-to-point families and the remaining atomics, PE `src_pe` (one item) acting on PE `dst_pe`'s words:
 * the source sets ivars[3], ivars[1], ivars[0], ivars[2] to 1..4 (int atomic_set, with a fence between); the
 * destination waits with _any, then _some, then _all, then tests. Then the source runs the integer atomics on
 * words[0..6] of the destination and both record their results in out. */
__kernel void k_p2p(__global int *ivars, __global ulong *words, __global long *out, __global ulong *indices,
                    int src_pe, int dst_pe) {
  int me = xpushmem_my_pe();
  if (me == src_pe) {
    int order[4] = {3, 1, 0, 2};
    for (int k = 0; k < 4; k++) {
      xpushmem_int_atomic_set((long)&ivars[order[k]], k + 1, dst_pe);
      xpushmem_fence();
    }
    out[0] = xpushmem_uint64_atomic_fetch_inc((long)&words[0], dst_pe);  /* 10 -> 11 */
    out[1] = xpushmem_uint64_atomic_swap((long)&words[1], 77, dst_pe);    /* 20 -> 77 */
    out[2] = xpushmem_uint64_atomic_fetch_and((long)&words[2], 0xf0, dst_pe); /* 0xff -> 0xf0 */
    out[3] = xpushmem_uint64_atomic_fetch_or((long)&words[3], 0x0f, dst_pe);  /* 0xf0 -> 0xff */
    out[4] = xpushmem_uint64_atomic_fetch_xor((long)&words[4], 0xff, dst_pe); /* 0x0f -> 0xf0 */
    xpushmem_uint64_atomic_inc((long)&words[5], dst_pe);                       /* 5 -> 6 */
    xpushmem_uint64_atomic_add((long)&words[5], 4, dst_pe);                    /* -> 10 */
    xpushmem_ulong_p((long)&words[6], 0x1234, dst_pe);
    out[5] = (long)xpushmem_ulong_g((long)&words[6], dst_pe);
    xpushmem_quiet();
  } else if (me == dst_pe) {
    ulong any = xpushmem_int_wait_until_any((long)ivars, 4, 0, XPUSHMEM_CMP_GE, 1);
    out[0] = (long)any;
    out[1] = ((volatile __global int *)ivars)[any];
    ulong some = xpushmem_int_wait_until_some((long)ivars, 4, (long)indices, 0, XPUSHMEM_CMP_GE, 1);
    out[2] = (long)some;
    out[3] = xpushmem_int_wait_until_all((long)ivars, 4, 0, XPUSHMEM_CMP_GE, 1);
    out[4] = xpushmem_int_test((long)&ivars[2], XPUSHMEM_CMP_EQ, 4);
    out[5] = xpushmem_int_test((long)&ivars[2], XPUSHMEM_CMP_LT, 4);
  }
}
