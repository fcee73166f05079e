/* Reduction kernel of tests/tests/device/device_lib.rs: one kernel that calls the library's reduction number `which`
 * (the order of XPUSHMEM_REDUCE_INT_TYPES x sum,prod,min,max,and,or,xor, then XPUSHMEM_REDUCE_FLOAT_TYPES x
 * sum,prod,min,max), so that the module stays small for the CPU runtime's JIT. */
#include "xpushmem_device.h"

#define CASE(NAME, OP)                                                                                             \
  if (which == k++) e = xpushmemx_##NAME##_##OP##_reduce_work_group(XPUSHMEM_TEAM_WORLD, (long)dst, (long)src, n);
#define CASES_INT(NAME, T, ACC) CASE(NAME, sum) CASE(NAME, prod) CASE(NAME, min) CASE(NAME, max) CASE(NAME, and) \
  CASE(NAME, or) CASE(NAME, xor)
#define CASES_FLOAT(NAME, T, ACC) CASE(NAME, sum) CASE(NAME, prod) CASE(NAME, min) CASE(NAME, max)

__kernel void k_reduce(__global uchar *dst, __global const uchar *src, ulong n, int which, __global int *status) {
  int k = 0, e = -1;
  XPUSHMEM_REDUCE_INT_TYPES(CASES_INT)
  XPUSHMEM_REDUCE_FLOAT_TYPES(CASES_FLOAT)
  if (get_local_id(0) == 0) status[0] = e;
}
