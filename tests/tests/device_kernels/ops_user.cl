/* A user kernel of the ops' queue-ordering test (tests/tests/ops/ops_device.rs): it adds `k` to every byte of
 * `buf[0..n)`, one work-group. Plain OpenCL C, not linked with the device library. */
__kernel void user_add(__global uchar *buf, ulong n, uint k) {
  for (ulong i = get_local_id(0); i < n; i += get_local_size(0)) buf[i] = (uchar)(buf[i] + k);
}
