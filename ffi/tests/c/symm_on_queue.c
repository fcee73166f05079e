/* symm_mem's collectives from C (xpushmem_ops.h): one_shot_all_reduce (plain and with a local input copied in),
 * two_shot_all_reduce in place and out of place, reduce_scatter_out, memset32 and stream_write_value32 enqueued on
 * the program's own Level Zero immediate command list with the _on_queue entry points, one xpushmem_ops_queue_wait,
 * every result checked against sums the program computes itself (small integers: exact in float32). Outputs and
 * local inputs live outside the symmetric heap (host USM of the runtime's context), as a framework's tensors do.
 * Then bad arguments: upstream's message from the entry point on the rank that passed them, "rejected its
 * arguments" from every other rank's queue_wait; a memset32 count of 0 refused at once everywhere; and the
 * synchronous entry point works after the errors. Run with XPUSHMEM_HEAP=device. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xpushmem.h>
#include <xpushmem_ops.h>

#include "ze_check.h"

enum { N = 96 };

static XpushmemOpsTensor t1(void *data, int32_t dtype, int64_t *size) {
  XpushmemOpsTensor t = {.data = data, .dtype = dtype, .ndim = 1, .sizes = size, .strides = NULL};
  return t;
}

static float value(int pe, int i) { return (float)(100 * pe + i); }

/* The sum over the PEs of value(pe, i). */
static float sum(int n, int i) {
  float s = 0;
  for (int pe = 0; pe < n; pe++) s += value(pe, i);
  return s;
}

int main(void) {
  OK(xpushmem_ops_init());
  int me = xpushmem_my_pe(), n = xpushmem_n_pes();
  CHECK(xpushmem_ops_path() == 1, "the device path on a device heap (got %d)", xpushmem_ops_path());
  ze_driver_handle_t driver;
  ze_device_handle_t device;
  ze_context_handle_t context;
  OK(xpushmemx_ze_get_handles((void **)&driver, (void **)&device, (void **)&context));
  ze_command_list_handle_t list = ze_compute_list(context, device);
  /* Local tensors: host USM of the runtime's context. */
  ze_host_mem_alloc_desc_t hdesc = {.stype = ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC};
  float *out1, *out2, *out3, *out4, *local;
  uint32_t *words;
  ZE(zeMemAllocHost(context, &hdesc, N * 4, 64, (void **)&out1));
  ZE(zeMemAllocHost(context, &hdesc, N * 4, 64, (void **)&out2));
  ZE(zeMemAllocHost(context, &hdesc, N * 4, 64, (void **)&out3));
  ZE(zeMemAllocHost(context, &hdesc, N * 4, 64, (void **)&out4));
  ZE(zeMemAllocHost(context, &hdesc, N * 4, 64, (void **)&local));
  ZE(zeMemAllocHost(context, &hdesc, 16, 64, (void **)&words));
  memset(words, 0, 16);

  float *a = xpushmem_malloc(N * 4), *b = xpushmem_malloc(N * 4), *c = xpushmem_malloc(N * 4);
  float *d = xpushmem_malloc(N * 4), *e = xpushmem_malloc(N * 4);
  uint32_t *sig = xpushmem_calloc(8, 4);
  CHECK(a && b && c && d && e && sig, "allocations");
  float host[N];
  for (int i = 0; i < N; i++) host[i] = value(me, i);
  OK(xpushmem_putmem(a, host, sizeof host, me));
  OK(xpushmem_putmem(c, host, sizeof host, me));
  OK(xpushmem_putmem(d, host, sizeof host, me));
  OK(xpushmem_putmem(e, host, sizeof host, me));
  for (int i = 0; i < N; i++) local[i] = value(me, i);
  xpushmem_barrier_all();

  int64_t nn = N, per = N / n, eight = 8, four = 4;
  XpushmemOpsTensor ta = t1(a, 0, &nn), tb = t1(b, 0, &nn), tc = t1(c, 0, &nn), td = t1(d, 0, &nn),
                    te = t1(e, 0, &nn);
  XpushmemOpsTensor o1 = t1(out1, 0, &nn), o2 = t1(out2, 0, &nn), o3 = t1(out3, 0, &nn), o4 = t1(out4, 0, &per),
                    tl = t1(local, 0, &nn), ts = t1(sig, 7, &eight), tw = t1(words, 7, &four);
  /* b is filled by the copy variant from the local input. */
  OK(xpushmem_ops_one_shot_all_reduce_on_queue(&ta, NULL, "sum", &o1, NULL, 0, list));
  OK(xpushmem_ops_one_shot_all_reduce_on_queue(&tb, &tl, NULL, &o2, NULL, 0, list));
  OK(xpushmem_ops_two_shot_all_reduce_on_queue(&tc, NULL, "sum", NULL, 0, list));
  OK(xpushmem_ops_two_shot_all_reduce_on_queue(&td, &o3, "sum", NULL, 0, list));
  OK(xpushmem_ops_reduce_scatter_out_on_queue(&te, 0, &o4, NULL, 0, list));
  OK(xpushmem_ops_memset32_on_queue(&ts, 2, 0xdeadbeefll, 5, list));
  OK(xpushmem_ops_stream_write_value32_on_queue(&tw, 3, 7, list));
  OK(xpushmem_ops_queue_wait());
  float inplace[N];
  uint32_t sigs[8];
  OK(xpushmem_getmem(inplace, c, sizeof inplace, me));
  OK(xpushmem_getmem(sigs, sig, sizeof sigs, me));
  for (int i = 0; i < N; i++) {
    CHECK(out1[i] == sum(n, i), "one_shot out[%d] = %g, want %g", i, out1[i], sum(n, i));
    CHECK(out2[i] == sum(n, i), "one_shot copy out[%d] = %g", i, out2[i]);
    CHECK(inplace[i] == sum(n, i), "two_shot in place [%d] = %g", i, inplace[i]);
    CHECK(out3[i] == sum(n, i), "two_shot out[%d] = %g", i, out3[i]);
  }
  for (int i = 0; i < per; i++) CHECK(out4[i] == sum(n, me * per + i), "reduce_scatter out[%d] = %g", i, out4[i]);
  for (int i = 0; i < 8; i++)
    CHECK(sigs[i] == (i >= 2 && i < 7 ? 0xdeadbeefu : 0u), "memset32 word %d = %#x", i, sigs[i]);
  CHECK(words[0] == 0 && words[1] == 0 && words[2] == 0 && words[3] == 7, "stream_write_value32: %u %u %u %u",
        words[0], words[1], words[2], words[3]);

  /* Bad arguments on the last PE: its own error at once (upstream's message), the others' at queue_wait. */
  int bad = n - 1;
  xpushmem_barrier_all();
  int rc = xpushmem_ops_one_shot_all_reduce_on_queue(&ta, NULL, me == bad ? "avg" : "sum", &o1, NULL, 0, list);
  if (me == bad) {
    CHECK(rc == XPUSHMEM_ERROR_INVALID_ARGUMENT, "rc %d: %s", rc, xpushmem_last_error());
    CHECK(strstr(xpushmem_last_error(), "one_shot_all_reduce: only sum is supported for now."), "%s",
          xpushmem_last_error());
    OK(xpushmem_ops_queue_wait()); /* already reported */
  } else {
    OK(rc);
    rc = xpushmem_ops_queue_wait();
    CHECK(rc == XPUSHMEM_ERROR_INVALID_ARGUMENT, "rc %d: %s", rc, xpushmem_last_error());
    CHECK(strstr(xpushmem_last_error(), "rejected its arguments"), "%s", xpushmem_last_error());
  }
  rc = xpushmem_ops_memset32_on_queue(&ts, 0, 1, 0, list);
  CHECK(rc == XPUSHMEM_ERROR_INVALID_ARGUMENT, "memset32 count 0: rc %d", rc);
  CHECK(strstr(xpushmem_last_error(), "symm_mem::memset32_: count must be a positive integer (got 0)"), "%s",
        xpushmem_last_error());
  /* The synchronous entry point (the runtime's own queue) works after the errors. */
  OK(xpushmem_putmem(c, host, sizeof host, me));
  xpushmem_barrier_all();
  OK(xpushmem_ops_two_shot_all_reduce(&tc, NULL, NULL, NULL, 0));
  OK(xpushmem_getmem(inplace, c, sizeof inplace, me));
  for (int i = 0; i < N; i++) CHECK(inplace[i] == sum(n, i), "two_shot after the errors [%d] = %g", i, inplace[i]);
  xpushmem_barrier_all();
  ZE(zeCommandListDestroy(list));
  ZE(zeMemFree(context, out1));
  ZE(zeMemFree(context, out2));
  ZE(zeMemFree(context, out3));
  ZE(zeMemFree(context, out4));
  ZE(zeMemFree(context, local));
  ZE(zeMemFree(context, words));
  printf("symm_on_queue OK on PE %d of %d\n", me, n);
  OK(xpushmem_ops_finalize());
  return 0;
}
