/* RMA, signal, sub-group and 16-bit kernels of tests/tests/device/device_lib.rs. */
#include "xpushmem_device.h"

#define LID() get_local_id(0)

/* One work-group per PE: group g moves this PE's block to or from PE g with the per-work-item calls (item 0) or
 * the _work_group form (mode 9). Puts write src to block `me` of PE g's dst; gets read PE g's src into block g of
 * this PE's dst. status[g] = the call's result. */
__kernel void k_rma_groups(int mode, __global uchar *dst, __global const uchar *src, ulong n, __global ulong *sig,
                           __global int *status) {
  int g = get_group_id(0), me = xpushmem_my_pe();
  long put_to = (long)(dst + (ulong)me * n), get_to = (long)(dst + (ulong)g * n), s = (long)src;
  int e = 0;
  if (mode == 9) {
    e = xpushmemx_putmem_work_group(put_to, s, n, g);
  } else if (LID() == 0) {
    switch (mode) {
    case 0: e = xpushmem_putmem(put_to, s, n, g); break;
    case 1: e = xpushmem_int_put(put_to, s, n / 4, g); break;
    case 2: e = xpushmem_putmem_nbi(put_to, s, n, g); xpushmem_quiet(); break;
    case 3: e = xpushmem_double_put_nbi(put_to, s, n / 8, g); xpushmem_quiet(); break;
    case 4: e = xpushmem_getmem(get_to, s, n, g); break;
    case 5: e = xpushmem_long_get(get_to, s, n / 8, g); break;
    case 6: e = xpushmem_getmem_nbi(get_to, s, n, g); xpushmem_quiet(); break;
    case 7: e = xpushmem_short_get_nbi(get_to, s, n / 2, g); xpushmem_quiet(); break;
    case 8: e = xpushmem_putmem_signal_nbi(put_to, s, n, (long)sig, 1, XPUSHMEM_SIGNAL_ADD, g); break;
    default: e = -1;
    }
  }
  if (LID() == 0) status[g] = e;
}

/* Waits until this PE's signal reaches `expect`: out = {wait's value, signal_fetch}. */
__kernel void k_signal_check(__global ulong *sig, ulong expect, __global ulong *out) {
  if (get_global_id(0) != 0) return;
  out[0] = xpushmem_signal_wait_until((long)sig, XPUSHMEM_CMP_GE, expect);
  out[1] = xpushmem_signal_fetch((long)sig);
}

/* Sub-group forms: sub-group s of PE me works with PE (me + s) % np on block s of n bytes. Puts send src block s
 * to block (me * nsg + s) of that PE's dst (modes 0 putmem, 1 putmem_nbi + quiet, 4 putmem_signal, 5
 * putmem_signal_nbi, signal ADD 1); gets read that PE's src block s into this PE's dst block s (2 getmem, 3
 * getmem_nbi + quiet). status[s] = the call's result; info = {sub-group size, sub-groups}. */
#define SG_BODY                                                                                                    \
  int me = xpushmem_my_pe(), np = xpushmem_n_pes();                                                                \
  uint s = get_sub_group_id(), nsg = get_num_sub_groups();                                                         \
  int pe = (me + (int)s) % np;                                                                                     \
  long from = (long)(src + s * n), put_to = (long)(dst + ((ulong)me * nsg + s) * n), get_to = (long)(dst + s * n); \
  int e = -1;                                                                                                      \
  switch (mode) {                                                                                                  \
  case 0: e = xpushmemx_putmem_sub_group(put_to, from, n, pe); break;                                              \
  case 1: e = xpushmemx_putmem_nbi_sub_group(put_to, from, n, pe); xpushmem_quiet(); break;                        \
  case 2: e = xpushmemx_getmem_sub_group(get_to, (long)(src + s * n), n, pe); break;                               \
  case 3: e = xpushmemx_getmem_nbi_sub_group(get_to, (long)(src + s * n), n, pe); xpushmem_quiet(); break;         \
  case 4: e = xpushmemx_putmem_signal_sub_group(put_to, from, n, (long)sig, 1, XPUSHMEM_SIGNAL_ADD, pe); break;     \
  case 5: e = xpushmemx_putmem_signal_nbi_sub_group(put_to, from, n, (long)sig, 1, XPUSHMEM_SIGNAL_ADD, pe); break; \
  }                                                                                                                \
  if (get_sub_group_local_id() == 0) status[s] = e;                                                                \
  if (LID() == 0) {                                                                                                \
    info[0] = get_sub_group_size();                                                                                \
    info[1] = nsg;                                                                                                 \
  }

__kernel __attribute__((intel_reqd_sub_group_size(8))) void k_sg8(int mode, __global uchar *dst,
                                                                   __global const uchar *src, ulong n,
                                                                   __global ulong *sig, __global int *status,
                                                                   __global int *info) {
  SG_BODY
}

__kernel __attribute__((intel_reqd_sub_group_size(16))) void k_sg16(int mode, __global uchar *dst,
                                                                     __global const uchar *src, ulong n,
                                                                     __global ulong *sig, __global int *status,
                                                                     __global int *info) {
  SG_BODY
}

/* 16-bit words (one work-group): every item adds 1 `iters` times to counts[me] on PE 0 (the PEs' counters share
 * 32-bit words); every item adds 1 to elect[1] on PE 0 while item 0 competes with compare_swap(elect[0], 0 ->
 * me + 1); item 0 sets flags[me] = -(me + 1) on the right neighbour and waits for its own flags[left].
 * out = {compare_swap's old value, wait's result, short test EQ, ushort test GT 0x8000, fetch of flags[left],
 * short wait_until_any LT 0 over flags[0..np], ushort wait_until_some GE 0x8000 (count; indices[0]), short
 * wait_until_all EQ over flags[left..left+1]}. */
__kernel void k_short(__global ushort *counts, __global short *elect, __global short *flags, int iters,
                      __global long *out, __global ulong *indices) {
  int me = xpushmem_my_pe(), np = xpushmem_n_pes();
  int right = (me + 1) % np, left = (me + np - 1) % np;
  for (int i = 0; i < iters; i++) xpushmemx_ushort_atomic_fetch_add((long)&counts[me], 1, 0);
  xpushmemx_short_atomic_add((long)&elect[1], 1, 0);
  if (LID() == 0) {
    out[0] = xpushmemx_short_atomic_compare_swap((long)&elect[0], 0, (short)(me + 1), 0);
    xpushmemx_short_atomic_set((long)&flags[me], (short)-(me + 1), right);
    out[1] = xpushmem_short_wait_until((long)&flags[left], XPUSHMEM_CMP_EQ, (short)-(left + 1));
    out[2] = xpushmem_short_test((long)&flags[left], XPUSHMEM_CMP_EQ, (short)-(left + 1));
    out[3] = xpushmem_ushort_test((long)&flags[left], XPUSHMEM_CMP_GT, (ushort)0x8000);
    out[4] = xpushmemx_short_atomic_fetch((long)&flags[left], me);
    out[5] = (long)xpushmem_short_wait_until_any((long)flags, np, 0, XPUSHMEM_CMP_LT, 0);
    out[6] = (long)xpushmem_ushort_wait_until_some((long)flags, np, (long)indices, 0, XPUSHMEM_CMP_GE, 0x8000);
    out[7] = xpushmem_short_wait_until_all((long)&flags[left], 1, 0, XPUSHMEM_CMP_EQ, (short)-(left + 1));
  }
}
