/* Kernels of tests/tests/fabric/fabric_device.rs: device-initiated operations on PEs reached through the fabric, which the
 * device library sends through the host proxy ring. */
#include "xpushmem_device.h"

/* putmem_signal (work-group form when wg) of n bytes to the right neighbour (ADD value), then wait for the left
 * neighbour's signal: status[0] the put's result, status[1] the signal seen. */
__kernel void k_px_put_signal(__global uchar *dst, __global const uchar *src, ulong n, __global ulong *sig,
                              ulong value, int wg, __global long *status) {
  int me = xpushmem_my_pe(), npes = xpushmem_n_pes();
  int right = (me + 1) % npes;
  int e = 0;
  if (wg)
    e = xpushmemx_putmem_signal_work_group((long)dst, (long)src, n, (long)sig, value, XPUSHMEM_SIGNAL_ADD, right);
  else if (get_local_id(0) == 0)
    e = xpushmem_putmem_signal((long)dst, (long)src, n, (long)sig, value, XPUSHMEM_SIGNAL_ADD, right);
  if (get_local_id(0) == 0) {
    status[0] = e;
    status[1] = (long)xpushmem_signal_wait_until((long)sig, XPUSHMEM_CMP_GE, value);
  }
}

/* To the right neighbour: putmem_nbi of n bytes, long_p of 1000 + me, quiet, then signal_op SET 1; then wait for the
 * left neighbour's signal. status[0..3] the four results, status[4] the signal seen. */
__kernel void k_px_put_quiet(__global uchar *dst, __global const uchar *src, ulong n, __global long *val,
                             __global ulong *sig, __global long *status) {
  int me = xpushmem_my_pe(), npes = xpushmem_n_pes();
  int right = (me + 1) % npes;
  status[0] = xpushmem_putmem_nbi((long)dst, (long)src, n, right);
  status[1] = xpushmem_long_p((long)val, 1000 + me, right);
  status[2] = xpushmem_quiet();
  status[3] = xpushmemx_signal_op((long)sig, 1, XPUSHMEM_SIGNAL_SET, right);
  status[4] = (long)xpushmem_signal_wait_until((long)sig, XPUSHMEM_CMP_GE, 1);
}

/* getmem of n bytes of the right neighbour's src into dst; status[0] the result. */
__kernel void k_px_get(__global uchar *dst, __global const uchar *src, ulong n, __global long *status) {
  int me = xpushmem_my_pe(), npes = xpushmem_n_pes();
  status[0] = xpushmem_getmem((long)dst, (long)src, n, (me + 1) % npes);
}

/* A blocking put to the right neighbour (for the proxy that never answers); status[0] the result. */
__kernel void k_px_put(__global uchar *dst, __global const uchar *src, ulong n, __global long *status) {
  int me = xpushmem_my_pe(), npes = xpushmem_n_pes();
  status[0] = xpushmem_putmem((long)dst, (long)src, n, (me + 1) % npes);
}

/* A blocking put of n bytes to PE `pe` (a team-scoped allocation's other member); status[0] the result. */
__kernel void k_px_put_to(__global uchar *dst, __global const uchar *src, ulong n, int pe, __global long *status) {
  status[0] = xpushmem_putmem((long)dst, (long)src, n, pe);
}

/* Atomics on PE 0's words (through the proxy from every other PE): `iters` fetch_adds of me + 1 on word (out[0]: 1
 * when each returned more than the previous), `iters` uint incs on w32, a compare_swap election on elect (out[1]:
 * the value it returned), then a fetch, a 32-bit fetch_xor of 0 and a set of 7 on spare (out[2..4]). */
__kernel void k_px_atomics(__global ulong *word, __global uint *w32, __global ulong *elect, __global ulong *spare,
                           int iters, __global long *out) {
  int me = xpushmem_my_pe();
  ulong prev = 0;
  long mono = 1;
  for (int i = 0; i < iters; i++) {
    ulong old = xpushmem_ulong_atomic_fetch_add((long)word, (ulong)(me + 1), 0);
    if (i > 0 && old <= prev) mono = 0;
    prev = old;
    xpushmem_uint_atomic_inc((long)w32, 0);
  }
  out[0] = mono;
  out[1] = (long)xpushmem_ulong_atomic_compare_swap((long)elect, 0ul, (ulong)(me + 100), 0);
  out[2] = (long)xpushmem_ulong_atomic_fetch((long)word, 0);
  out[3] = (long)xpushmem_uint_atomic_fetch_xor((long)w32, 0u, 0);
  out[4] = xpushmem_ulong_atomic_set((long)spare, 7ul, 0);
}

/* Typed g of the right neighbour's src (32 bytes): char at 1, short at 2, int at 4, long at 8, float at 16, double
 * at 24, uchar at 3, ushort at 6; the values' bits in out[0..8]. */
__kernel void k_px_g(__global const uchar *src, __global long *out) {
  int me = xpushmem_my_pe(), npes = xpushmem_n_pes();
  int right = (me + 1) % npes;
  long s = (long)src;
  out[0] = xpushmem_char_g(s + 1, right);
  out[1] = xpushmem_short_g(s + 2, right);
  out[2] = xpushmem_int_g(s + 4, right);
  out[3] = xpushmem_long_g(s + 8, right);
  out[4] = as_int(xpushmem_float_g(s + 16, right));
  out[5] = as_long(xpushmem_double_g(s + 24, right));
  out[6] = xpushmem_uchar_g(s + 3, right);
  out[7] = xpushmem_ushort_g(s + 6, right);
}

/* One work-item's world barrier (for the peer that dies); status[0] the result. */
__kernel void k_px_barrier(__global long *status) { status[0] = xpushmem_barrier_all(); }

/* For the peer that dies: a non-blocking put with signal of n bytes to the right neighbour (through the proxy), then
 * a wait for this PE's own signal word, which only that neighbour would raise; status[0] and status[1] the results. */
__kernel void k_px_put_signal_nbi_wait(__global uchar *dst, __global const uchar *src, ulong n, __global ulong *sig,
                                       __global long *status) {
  int right = (xpushmem_my_pe() + 1) % xpushmem_n_pes();
  status[0] = xpushmem_putmem_signal_nbi((long)dst, (long)src, n, (long)sig, 1, XPUSHMEM_SIGNAL_ADD, right);
  status[1] = (long)xpushmem_signal_wait_until((long)sig, XPUSHMEM_CMP_GE, 1);
}
