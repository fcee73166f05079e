/* A token travels round the ring of PEs, passed kernel to kernel with putmem_signal: PE 0 sends 1, every other PE
 * waits for its signal, records the token it got in out[0] and sends token + 1 on; PE 0 finally records the token
 * that came back (n). One work-item per PE. Used by examples/src/bin/device_token_ring.rs and the C program
 * ffi/tests/c/device_token_ring.c. */
#include "xpushmem_device.h"

__kernel void token_ring(__global long *token, __global ulong *sig, __global long *out) {
  int me = xpushmem_my_pe(), n = xpushmem_n_pes();
  if (me != 0) {
    xpushmem_signal_wait_until((long)sig, XPUSHMEM_CMP_EQ, 1);
    out[0] = *token;
  }
  out[1] = me == 0 ? 1 : out[0] + 1; /* the outgoing token; a put's source must be global memory */
  int err = xpushmem_putmem_signal((long)token, (long)&out[1], sizeof(long), (long)sig, 1, XPUSHMEM_SIGNAL_SET,
                                   (me + 1) % n);
  if (me == 0) {
    xpushmem_signal_wait_until((long)sig, XPUSHMEM_CMP_EQ, 1);
    out[0] = *token;
  }
  out[2] = err;
}
