/* Co-residency kernel of tests/tests/device/device_lib.rs: every work-group's item 0 adds 1 to this PE's counter, then
 * waits until every group of the launch has arrived (groups that wait on each other: all must be resident).
 * status[g] = the wait's result. */
#include "xpushmem_device.h"

__kernel void k_groups_meet(__global ulong *counter, ulong base, __global int *status) {
  if (get_local_id(0) != 0) return;
  int me = xpushmem_my_pe();
  xpushmem_uint64_atomic_add((long)counter, 1, me);
  status[get_group_id(0)] =
      xpushmem_uint64_wait_until((long)counter, XPUSHMEM_CMP_GE, base + get_num_groups(0));
}
