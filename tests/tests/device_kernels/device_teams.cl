/* Team kernels of tests/tests/device/device_lib.rs: split teams made on the host, used from kernels by their device
 * number (Team::device_id). */
#include "xpushmem_device.h"

#define LID() get_local_id(0)

/* `team` as this PE's kernel sees it: out[0] my_pe, out[1] n_pes, out[2 + w] translate_pe(WORLD, w, team) for
 * every world PE w, out[2 + nw + i] translate_pe(team, i, WORLD) for every member i. */
__kernel void k_team_queries(int team, __global int *out) {
  if (get_global_id(0) != 0) return;
  int nw = xpushmem_n_pes(), tn = xpushmem_team_n_pes(team);
  out[0] = xpushmem_team_my_pe(team);
  out[1] = tn;
  for (int w = 0; w < nw; w++) out[2 + w] = xpushmem_team_translate_pe(XPUSHMEM_TEAM_WORLD, w, team);
  for (int i = 0; i < tn; i++) out[2 + nw + i] = xpushmem_team_translate_pe(team, i, XPUSHMEM_TEAM_WORLD);
}

/* `iters` rounds on `team`: item 0 writes it * tn + me into the right team neighbour's slot, the team meets, every
 * item reads its own slot (mismatches with the left neighbour's value are counted), the team meets again. `mode`
 * selects the barrier: 0 item 0 alone runs xpushmem_team_sync, 1 the _work_group form, 2 the _sub_group form (the
 * _sg kernels: one work-group of one sub-group). bad = {mismatches, last, errors}. */
static void team_sync_rounds(int team, int iters, int mode, __global long *slot, __global long *bad) {
  int me = xpushmem_team_my_pe(team), tn = xpushmem_team_n_pes(team);
  int right = xpushmem_team_translate_pe(team, (me + 1) % tn, XPUSHMEM_TEAM_WORLD);
  int left = (me + tn - 1) % tn;
  long mismatches = 0, last = -1;
  int e = 0;
  for (int it = 0; it < iters; it++) {
    if (LID() == 0) e |= xpushmem_long_p((long)slot, (long)it * tn + me, right);
    if (mode == 1) {
      e |= xpushmemx_team_sync_work_group(team);
    } else if (mode == 2) {
      e |= xpushmemx_team_sync_sub_group(team);
    } else {
      if (LID() == 0) e |= xpushmem_team_sync(team);
      barrier(CLK_GLOBAL_MEM_FENCE);
    }
    last = *(volatile __global long *)slot;
    mismatches += last != (long)it * tn + left;
    if (mode == 1) {
      e |= xpushmemx_team_sync_work_group(team);
    } else if (mode == 2) {
      e |= xpushmemx_team_sync_sub_group(team);
    } else {
      barrier(CLK_GLOBAL_MEM_FENCE);
      if (LID() == 0) e |= xpushmem_team_sync(team);
      barrier(CLK_GLOBAL_MEM_FENCE);
    }
  }
  if (LID() == 0) {
    bad[0] = mismatches;
    bad[1] = last;
    bad[2] = e;
  }
}

/* A group collective on `team`, the _sub_group form when `sg` is set, else the _work_group form: 0 broadcastmem (n
 * bytes from member `root`), 1 int64 sum reduce (n elements), 2 fcollectmem (n bytes), 3 alltoallmem (n bytes per
 * PE), 4 half sum, 5 half prod, 6 bfloat16 sum, 7 bfloat16 prod reductions (n elements); any other `which`:
 * status -1. */
static void team_coll(int team, int which, __global uchar *dst, __global const uchar *src, ulong n, int root,
                      __global int *status, int sg) {
  long d = (long)dst, s = (long)src;
  int e = -1;
  switch (which) {
  case 0: e = sg ? xpushmemx_broadcastmem_sub_group(team, d, s, n, root) : xpushmemx_broadcastmem_work_group(team, d, s, n, root); break;
  case 1: e = sg ? xpushmemx_int64_sum_reduce_sub_group(team, d, s, n) : xpushmemx_int64_sum_reduce_work_group(team, d, s, n); break;
  case 2: e = sg ? xpushmemx_fcollectmem_sub_group(team, d, s, n) : xpushmemx_fcollectmem_work_group(team, d, s, n); break;
  case 3: e = sg ? xpushmemx_alltoallmem_sub_group(team, d, s, n) : xpushmemx_alltoallmem_work_group(team, d, s, n); break;
  case 4: e = sg ? xpushmemx_half_sum_reduce_sub_group(team, d, s, n) : xpushmemx_half_sum_reduce_work_group(team, d, s, n); break;
  case 5: e = sg ? xpushmemx_half_prod_reduce_sub_group(team, d, s, n) : xpushmemx_half_prod_reduce_work_group(team, d, s, n); break;
  case 6: e = sg ? xpushmemx_bfloat16_sum_reduce_sub_group(team, d, s, n) : xpushmemx_bfloat16_sum_reduce_work_group(team, d, s, n); break;
  case 7: e = sg ? xpushmemx_bfloat16_prod_reduce_sub_group(team, d, s, n) : xpushmemx_bfloat16_prod_reduce_work_group(team, d, s, n); break;
  }
  if (LID() == 0) status[0] = e;
}

__kernel void k_team_sync(int team, int iters, int mode, __global long *slot, __global long *bad) {
  team_sync_rounds(team, iters, mode, slot, bad);
}
__kernel void k_team_coll(int team, int which, __global uchar *dst, __global const uchar *src, ulong n, int root,
                          __global int *status) {
  team_coll(team, which, dst, src, n, root, status, 0);
}

/* The sub-group forms in kernels built for sub-groups of 8, 16 and 32 (the CPU runtime offers 4 to 64). */
#define SUB_GROUP_KERNELS(SIZE)                                                                                    \
  __kernel __attribute__((intel_reqd_sub_group_size(SIZE))) void k_team_sync_sg##SIZE(                            \
      int team, int iters, int mode, __global long *slot, __global long *bad) {                                    \
    team_sync_rounds(team, iters, mode, slot, bad);                                                                \
  }                                                                                                                \
  __kernel __attribute__((intel_reqd_sub_group_size(SIZE))) void k_team_coll_sg##SIZE(                            \
      int team, int which, __global uchar *dst, __global const uchar *src, ulong n, int root,                      \
      __global int *status) {                                                                                      \
    team_coll(team, which, dst, src, n, root, status, 1);                                                          \
  }
SUB_GROUP_KERNELS(8)
SUB_GROUP_KERNELS(16)
SUB_GROUP_KERNELS(32)
