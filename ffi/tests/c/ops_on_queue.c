/* The ops' device path from C (xpushmem_ops.h): all_to_all_vdev enqueued twice on the program's own Level Zero
 * immediate command list with xpushmem_ops_all_to_all_vdev_on_queue (the second op consumes the first's output),
 * one xpushmem_ops_queue_wait; then a negative split on the last PE: every PE's queue_wait fails with the host
 * path's error, and the next op on the list works. Run with XPUSHMEM_HEAP=device. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xpushmem.h>
#include <xpushmem_ops.h>

#include "ze_check.h"

enum { ROWS = 8, MAXPE = 16 };

static XpushmemOpsTensor t1(void *data, int32_t dtype, int64_t *size) {
  XpushmemOpsTensor t = {.data = data, .dtype = dtype, .ndim = 1, .sizes = size, .strides = NULL};
  return t;
}

static int64_t value(int pe, int row) { return 1000 * pe + row; }

int main(void) {
  OK(xpushmem_ops_init());
  int me = xpushmem_my_pe(), n = xpushmem_n_pes();
  CHECK(n <= MAXPE, "at most %d PEs", MAXPE);
  CHECK(xpushmem_ops_path() == 1, "the device path on a device heap (got %d)", xpushmem_ops_path());
  ze_driver_handle_t driver;
  ze_device_handle_t device;
  ze_context_handle_t context;
  OK(xpushmemx_ze_get_handles((void **)&driver, (void **)&device, (void **)&context));
  ze_command_list_handle_t list = ze_compute_list(context, device);

  int64_t *in = xpushmem_malloc(n * ROWS * 8), *mid = xpushmem_malloc(n * ROWS * 8);
  int64_t *out = xpushmem_malloc(n * ROWS * 8), *splits = xpushmem_malloc(n * 8);
  int64_t *oso1 = xpushmem_malloc(2 * n * 8), *oso2 = xpushmem_malloc(2 * n * 8);
  CHECK(in && mid && out && splits && oso1 && oso2, "allocations");
  int64_t host[MAXPE * ROWS], sp[MAXPE];
  /* Rank me sends rows [p * ROWS, p * ROWS + k) to rank p, with k = 1 + (me + p) % ROWS. */
  for (int i = 0; i < n * ROWS; i++) host[i] = value(me, i);
  for (int p = 0; p < n; p++) sp[p] = 1 + (me + p) % ROWS;
  OK(xpushmem_putmem(in, host, sizeof(int64_t) * n * ROWS, me));
  OK(xpushmem_putmem(splits, sp, sizeof(int64_t) * n, me));
  xpushmem_barrier_all();

  int64_t rows = n * ROWS, nn = n, two_n[2] = {2, n};
  XpushmemOpsTensor ti = t1(in, 8, &rows), tm = t1(mid, 8, &rows), to = t1(out, 8, &rows), ts = t1(splits, 8, &nn);
  XpushmemOpsTensor o1 = {.data = oso1, .dtype = 8, .ndim = 2, .sizes = two_n, .strides = NULL};
  XpushmemOpsTensor o2 = {.data = oso2, .dtype = 8, .ndim = 2, .sizes = two_n, .strides = NULL};
  /* The splits are packed from row 0, so the input's first sum(sp) rows are sent. Op 1: in -> mid; op 2:
   * mid -> out with the same splits. Both on the list, no wait in between. */
  OK(xpushmem_ops_all_to_all_vdev_on_queue(&ti, &tm, &ts, &o1, NULL, 0, list));
  OK(xpushmem_ops_all_to_all_vdev_on_queue(&tm, &to, &ts, &o2, NULL, 0, list));
  OK(xpushmem_ops_queue_wait());
  int64_t got[2 * MAXPE], mids[MAXPE * ROWS], outs[MAXPE * ROWS];
  OK(xpushmem_getmem(got, oso1, sizeof(int64_t) * 2 * n, me));
  OK(xpushmem_getmem(mids, mid, sizeof(int64_t) * n * ROWS, me));
  OK(xpushmem_getmem(outs, out, sizeof(int64_t) * n * ROWS, me));
  /* mid: from rank s, k_s = 1 + (s + me) % ROWS rows starting at row sum_{p<me} (1 + (s + p) % ROWS). */
  int64_t at = 0;
  for (int s = 0; s < n; s++) {
    int64_t k = 1 + (s + me) % ROWS, src = 0;
    for (int p = 0; p < me; p++) src += 1 + (s + p) % ROWS;
    CHECK(got[s] == k && got[n + s] == at, "oso row 0/1 from %d: %lld %lld", s, (long long)got[s],
          (long long)got[n + s]);
    for (int64_t r = 0; r < k; r++)
      CHECK(mids[at + r] == value(s, (int)(src + r)), "mid row %lld from %d", (long long)(at + r), s);
    at += k;
  }
  /* out: op 2 ran after op 1 on the list: its first row from rank s is rank s's mid row src, which rank s got
   * from rank (the owner of that row); at least check that every received row is some rank's input row. */
  int64_t got2[2 * MAXPE];
  OK(xpushmem_getmem(got2, oso2, sizeof(int64_t) * 2 * n, me));
  for (int s = 0; s < n; s++) {
    CHECK(got2[s] == 1 + (s + me) % ROWS, "op 2 row 0 from %d", s);
    for (int64_t r = 0; r < got2[s]; r++) {
      int64_t v = outs[got2[n + s] + r];
      CHECK(v >= 0 && v / 1000 < n && v % 1000 < n * ROWS, "op 2 row %lld from %d = %lld", (long long)r, s,
            (long long)v);
    }
  }

  /* A negative split on the last PE: every PE's queue_wait reports the host path's error. */
  int bad = n - 1;
  if (me == bad) sp[0] = -1;
  OK(xpushmem_putmem(splits, sp, sizeof(int64_t) * n, me));
  xpushmem_barrier_all();
  OK(xpushmem_ops_all_to_all_vdev_on_queue(&ti, &tm, &ts, &o1, NULL, 0, list));
  int rc = xpushmem_ops_queue_wait();
  CHECK(rc == XPUSHMEM_ERROR_INVALID_ARGUMENT, "rc %d: %s", rc, xpushmem_last_error());
  const char *msg = xpushmem_last_error();
  if (me == bad)
    CHECK(strstr(msg, "splits must be non-negative") && strstr(msg, "-1 at index 0"), "%s", msg);
  else
    CHECK(strstr(msg, "rejected its arguments"), "%s", msg);
  /* The next op on the list works. */
  sp[0] = 1 + me % ROWS;
  OK(xpushmem_putmem(splits, sp, sizeof(int64_t) * n, me));
  xpushmem_barrier_all();
  OK(xpushmem_ops_all_to_all_vdev_on_queue(&ti, &tm, &ts, &o1, NULL, 0, list));
  OK(xpushmem_ops_queue_wait());
  OK(xpushmem_getmem(got, oso1, sizeof(int64_t) * 2 * n, me));
  for (int s = 0; s < n; s++)
    CHECK(got[s] == 1 + (s + me) % ROWS, "row 0 from %d after the error: %lld", s, (long long)got[s]);
  ZE(zeCommandListDestroy(list));
  xpushmem_barrier_all();
  printf("ops_on_queue OK on PE %d of %d\n", me, n);
  OK(xpushmem_ops_finalize());
  return 0;
}
