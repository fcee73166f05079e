/* The runtime started on the program's own Level Zero handles, as a framework (SYCL, PyTorch XPU) holds them:
 * the program opens the driver, device and context through the loader, gives them to xpushmemx_init_attr with
 * xpushmemx_set_attr_ze_handles, creates its own immediate command list in its context and runs all_to_all_vdev
 * on it with xpushmem_ops_all_to_all_vdev_on_queue. Also the errors: NULL handles, handles with a host heap, a
 * bad version. Run with XPUSHMEM_HEAP=device under the launcher. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xpushmem.h>
#include <xpushmem_ops.h>

#include "ze_check.h"

enum { ROWS = 8, MAXPE = 16 };

static int64_t value(int pe, int row) { return 1000 * pe + row; }

int main(void) {
  /* The "framework": driver, device 0 and a context of its own. */
  ZE(zeInit(0));
  uint32_t count = 1;
  ze_driver_handle_t driver;
  ZE(zeDriverGet(&count, &driver));
  count = 1;
  ze_device_handle_t device;
  ZE(zeDeviceGet(driver, &count, &device));
  ze_context_desc_t cdesc = {.stype = ZE_STRUCTURE_TYPE_CONTEXT_DESC};
  ze_context_handle_t context;
  ZE(zeContextCreate(driver, &cdesc, &context));

  xpushmemx_init_attr_t attr;
  memset(&attr, 0, sizeof attr);
  attr.version = XPUSHMEMX_INIT_ATTR_VERSION;
  attr.thread_level = XPUSHMEM_THREAD_MULTIPLE;
  /* Errors first: each names the wrong argument, and none starts the runtime. */
  CHECK(xpushmemx_set_attr_ze_handles(NULL, driver, device, context) == XPUSHMEM_ERROR_INVALID_ARGUMENT &&
            strstr(xpushmem_last_error(), "attr"), "NULL attr: %s", xpushmem_last_error());
  CHECK(xpushmemx_set_attr_ze_handles(&attr, driver, NULL, context) == XPUSHMEM_ERROR_INVALID_ARGUMENT &&
            strstr(xpushmem_last_error(), "device") && strstr(xpushmem_last_error(), "ze_device_handle_t"),
        "NULL device: %s", xpushmem_last_error());
  CHECK(attr.version == XPUSHMEMX_INIT_ATTR_VERSION && attr.ze_driver == NULL, "a failed setter leaves attr alone");
  OK(xpushmemx_set_attr_ze_handles(&attr, driver, device, context));
  CHECK(attr.version == XPUSHMEMX_INIT_ATTR_VERSION_ZE_HANDLES && attr.ze_context == (void *)context, "set");
  attr.ze_context = NULL;
  CHECK(xpushmemx_init_attr(0, &attr) == XPUSHMEM_ERROR_INVALID_ARGUMENT &&
            strstr(xpushmem_last_error(), "attr->ze_context"), "NULL attr->ze_context: %s", xpushmem_last_error());
  attr.ze_context = context;
  attr.version = 3;
  CHECK(xpushmemx_init_attr(0, &attr) == XPUSHMEM_ERROR_INVALID_ARGUMENT &&
            strstr(xpushmem_last_error(), "attr->version = 3"), "version 3: %s", xpushmem_last_error());
  attr.version = XPUSHMEMX_INIT_ATTR_VERSION_ZE_HANDLES;
  const char *heap = getenv("XPUSHMEM_HEAP");
  CHECK(heap && strcmp(heap, "device") == 0, "run with XPUSHMEM_HEAP=device");
  setenv("XPUSHMEM_HEAP", "host", 1);
  CHECK(xpushmemx_init_attr(0, &attr) == XPUSHMEM_ERROR_INVALID_ARGUMENT &&
            strstr(xpushmem_last_error(), "XPUSHMEM_HEAP = host"), "handles with a host heap: %s", xpushmem_last_error());
  CHECK(!xpushmemx_initialized(), "no runtime after the errors");
  setenv("XPUSHMEM_HEAP", "device", 1);

  /* Start on the program's handles: the runtime reports them back as its own. */
  OK(xpushmemx_init_attr(0, &attr));
  OK(xpushmem_ops_init());
  int me = xpushmem_my_pe(), n = xpushmem_n_pes();
  CHECK(n <= MAXPE, "at most %d PEs", MAXPE);
  CHECK(xpushmem_ops_path() == 1, "the device path on a device heap (got %d)", xpushmem_ops_path());
  void *rt_driver = NULL, *rt_device = NULL, *rt_context = NULL;
  OK(xpushmemx_ze_get_handles(&rt_driver, &rt_device, &rt_context));
  CHECK(rt_driver == (void *)driver && rt_device == (void *)device && rt_context == (void *)context,
        "the runtime works in the program's handles");

  /* The program's own immediate list, in its context. */
  ze_command_list_handle_t list = ze_compute_list(context, device);

  int64_t *in = xpushmem_malloc(n * ROWS * 8), *out = xpushmem_malloc(n * ROWS * 8);
  int64_t *splits = xpushmem_malloc(n * 8), *oso = xpushmem_malloc(2 * n * 8);
  CHECK(in && out && splits && oso, "allocations");
  int64_t host[MAXPE * ROWS], sp[MAXPE];
  /* Rank me sends k = 1 + (me + p) % ROWS rows to rank p, packed from row 0. */
  for (int i = 0; i < n * ROWS; i++) host[i] = value(me, i);
  for (int p = 0; p < n; p++) sp[p] = 1 + (me + p) % ROWS;
  OK(xpushmem_putmem(in, host, sizeof(int64_t) * n * ROWS, me));
  OK(xpushmem_putmem(splits, sp, sizeof(int64_t) * n, me));
  xpushmem_barrier_all();

  int64_t rows = n * ROWS, nn = n, two_n[2] = {2, n};
  XpushmemOpsTensor ti = {.data = in, .dtype = 8, .ndim = 1, .sizes = &rows, .strides = NULL};
  XpushmemOpsTensor to = {.data = out, .dtype = 8, .ndim = 1, .sizes = &rows, .strides = NULL};
  XpushmemOpsTensor ts = {.data = splits, .dtype = 8, .ndim = 1, .sizes = &nn, .strides = NULL};
  XpushmemOpsTensor tso = {.data = oso, .dtype = 8, .ndim = 2, .sizes = two_n, .strides = NULL};
  OK(xpushmem_ops_all_to_all_vdev_on_queue(&ti, &to, &ts, &tso, NULL, 0, list));
  OK(xpushmem_ops_queue_wait());
  int64_t got[2 * MAXPE], outs[MAXPE * ROWS];
  OK(xpushmem_getmem(got, oso, sizeof(int64_t) * 2 * n, me));
  OK(xpushmem_getmem(outs, out, sizeof(int64_t) * n * ROWS, me));
  /* From rank s: k_s = 1 + (s + me) % ROWS rows, rank s's rows from sum_{p<me} (1 + (s + p) % ROWS). */
  int64_t at = 0;
  for (int s = 0; s < n; s++) {
    int64_t k = 1 + (s + me) % ROWS, src = 0;
    for (int p = 0; p < me; p++) src += 1 + (s + p) % ROWS;
    CHECK(got[s] == k && got[n + s] == at, "out_splits_offsets from %d: %lld %lld", s, (long long)got[s],
          (long long)got[n + s]);
    for (int64_t r = 0; r < k; r++)
      CHECK(outs[at + r] == value(s, (int)(src + r)), "row %lld from %d", (long long)(at + r), s);
    at += k;
  }
  ZE(zeCommandListDestroy(list));
  xpushmem_barrier_all();
  printf("ops_on_framework_handles OK on PE %d of %d\n", me, n);
  OK(xpushmem_ops_finalize());
  /* The runtime did not destroy the program's context. */
  ZE(zeCommandListDestroy(ze_compute_list(context, device)));
  ZE(zeContextDestroy(context));
  return 0;
}
