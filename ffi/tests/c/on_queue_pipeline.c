/* The host on-queue forms from C with only Level Zero and xpushmem.h: a pipeline on one immediate command list
 * (put with signal to the next PE -> wait on this PE's signal -> an int64 sum reduction of what arrived -> a
 * broadcast of the reduction from PE 0, which signals an event) and one step on a second list chained to it by that
 * event (a get of the next PE's broadcast result, waiting for the event and signalling another), one
 * xpushmemx_queue_wait; every buffer checked against values this program computes itself. Then the bad arguments,
 * each refused at once naming the argument: a NULL list, wait events without an array, a list of another Level
 * Zero context, a wait event and a signal event from a pool of another context, a non-symmetric address, a count
 * that overflows, a bad PE; and an op still works after them. Last, a device wait that gives up is reported by
 * xpushmemx_queue_wait as XPUSHMEM_ERROR_TIMEOUT. Run with XPUSHMEM_HEAP=device and XPUSHMEM_TIMEOUT_MS. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xpushmem.h>

#include "ze_check.h"

enum { N = 40 };

static int64_t value(int pe, int i) { return 1000 * (int64_t)pe + i; }

/* A host-visible event pool of two events in `context`. */
static void events(ze_context_handle_t context, ze_device_handle_t device, ze_event_pool_handle_t *pool,
                   ze_event_handle_t ev[2]) {
  ze_event_pool_desc_t pdesc = {.stype = ZE_STRUCTURE_TYPE_EVENT_POOL_DESC,
                                .flags = ZE_EVENT_POOL_FLAG_HOST_VISIBLE,
                                .count = 2};
  ZE(zeEventPoolCreate(context, &pdesc, 1, &device, pool));
  for (uint32_t i = 0; i < 2; i++) {
    ze_event_desc_t edesc = {.stype = ZE_STRUCTURE_TYPE_EVENT_DESC,
                             .index = i,
                             .signal = ZE_EVENT_SCOPE_FLAG_HOST,
                             .wait = ZE_EVENT_SCOPE_FLAG_HOST};
    ZE(zeEventCreate(*pool, &edesc, &ev[i]));
  }
}

int main(void) {
  OK(xpushmem_init());
  int me = xpushmem_my_pe(), n = xpushmem_n_pes();
  int next = (me + 1) % n, prev = (me + n - 1) % n;
  ze_driver_handle_t driver;
  ze_device_handle_t device;
  ze_context_handle_t context;
  OK(xpushmemx_ze_get_handles((void **)&driver, (void **)&device, (void **)&context));
  ze_command_list_handle_t list = ze_compute_list(context, device);
  ze_command_list_handle_t list2 = ze_compute_list(context, device);
  ze_event_pool_handle_t pool;
  ze_event_handle_t ev[2];
  events(context, device, &pool, ev);

  int64_t *src = xpushmem_malloc(N * 8), *data = xpushmem_calloc(N, 8), *red = xpushmem_calloc(N, 8);
  int64_t *bc = xpushmem_calloc(N, 8), *got = xpushmem_calloc(N, 8);
  uint64_t *sig = xpushmem_calloc(1, 8);
  CHECK(src && data && red && bc && got && sig, "allocations");
  int64_t host[N];
  for (int i = 0; i < N; i++) host[i] = value(me, i);
  OK(xpushmem_int64_put(src, host, N, me));
  OK(xpushmem_barrier_all());

  /* The pipeline on `list`. */
  OK(xpushmemx_putmem_signal_on_queue(data, src, N * 8, sig, 1, XPUSHMEM_SIGNAL_ADD, next, list, 0, NULL, NULL));
  OK(xpushmemx_signal_wait_until_on_queue(sig, XPUSHMEM_CMP_GE, 1, list, 0, NULL, NULL));
  OK(xpushmemx_int64_sum_reduce_on_queue(XPUSHMEM_TEAM_WORLD, red, data, N, list, 0, NULL, NULL));
  OK(xpushmemx_int64_broadcast_on_queue(XPUSHMEM_TEAM_WORLD, bc, red, N, 0, list, 0, NULL, ev[0]));
  /* One step on the second list, after the broadcast (its event); it signals ev[1]. */
  OK(xpushmemx_int64_get_on_queue(got, bc, N, next, list2, 1, &ev[0], ev[1]));
  ZE(zeEventHostSynchronize(ev[1], UINT64_MAX));
  OK(xpushmemx_queue_wait());

  int64_t h[N];
  OK(xpushmem_int64_get(h, data, N, me));
  for (int i = 0; i < N; i++) CHECK(h[i] == value(prev, i), "data[%d] = %lld from PE %d", i, (long long)h[i], prev);
  uint64_t s = 0;
  OK(xpushmem_uint64_get(&s, sig, 1, me));
  CHECK(s == 1, "signal %llu", (unsigned long long)s);
  for (int which = 0; which < 3; which++) {
    int64_t *buf = which == 0 ? red : which == 1 ? bc : got;
    OK(xpushmem_int64_get(h, buf, N, me));
    for (int i = 0; i < N; i++) {
      int64_t want = 0;
      for (int p = 0; p < n; p++) want += value(p, i);
      CHECK(h[i] == want, "%s[%d] = %lld, expected %lld", which == 0 ? "red" : which == 1 ? "bc" : "got", i,
            (long long)h[i], (long long)want);
    }
  }

  OK(xpushmem_barrier_all()); /* every PE has read its buffers before the next PE writes its signal again */

  /* Bad arguments: refused at once, naming the argument. */
  FAILS(xpushmemx_putmem_on_queue(data, src, 8, next, NULL, 0, NULL, NULL), XPUSHMEM_ERROR_INVALID_ARGUMENT,
        "ze_command_list");
  FAILS(xpushmemx_putmem_on_queue(data, src, 8, next, list, 1, NULL, NULL), XPUSHMEM_ERROR_INVALID_ARGUMENT,
        "wait_events");
  ze_context_desc_t cdesc = {.stype = ZE_STRUCTURE_TYPE_CONTEXT_DESC};
  ze_context_handle_t other;
  ZE(zeContextCreate(driver, &cdesc, &other));
  ze_command_list_handle_t foreign = ze_compute_list(other, device);
  FAILS(xpushmemx_putmem_on_queue(data, src, 8, next, foreign, 0, NULL, NULL), XPUSHMEM_ERROR_INVALID_ARGUMENT,
        "another Level Zero context");
  CHECK(strstr(xpushmem_last_error(), "ze_command_list") != NULL, "names the list: %s", xpushmem_last_error());
  ze_event_pool_handle_t opool;
  ze_event_handle_t oev[2];
  events(other, device, &opool, oev);
  FAILS(xpushmemx_putmem_on_queue(data, src, 8, next, list, 1, &oev[0], NULL), XPUSHMEM_ERROR_INVALID_ARGUMENT,
        "wait_events");
  FAILS(xpushmemx_quiet_on_queue(list, 0, NULL, oev[1]), XPUSHMEM_ERROR_INVALID_ARGUMENT, "signal_event");
  int64_t private_buf[4];
  FAILS(xpushmemx_int64_put_on_queue(private_buf, src, 4, next, list, 0, NULL, NULL), XPUSHMEM_ERROR_NOT_SYMMETRIC,
        "argument dest");
  FAILS(xpushmemx_int64_put_on_queue(data, src, SIZE_MAX / 4, next, list, 0, NULL, NULL),
        XPUSHMEM_ERROR_INVALID_ARGUMENT, "nelems");
  FAILS(xpushmemx_int64_put_on_queue(data, src, 4, n, list, 0, NULL, NULL), XPUSHMEM_ERROR_INVALID_PE, "");

  /* Ops after the errors: signal_set and signal_add on the next PE's word, waited for on this PE's list. */
  OK(xpushmemx_signal_set_on_queue(sig, 10, next, list, 0, NULL, NULL));
  OK(xpushmemx_barrier_all_on_queue(list, 0, NULL, NULL));
  OK(xpushmemx_signal_add_on_queue(sig, 5, next, list, 0, NULL, NULL));
  OK(xpushmemx_signal_wait_until_on_queue(sig, XPUSHMEM_CMP_EQ, 15, list, 0, NULL, NULL));
  OK(xpushmemx_barrier_all_on_queue(list, 0, NULL, NULL));
  OK(xpushmemx_queue_wait());
  OK(xpushmem_uint64_get(&s, sig, 1, me));
  CHECK(s == 15, "signal after set 10 and add 5: %llu", (unsigned long long)s);

  /* A device-side error: a wait nobody ends gives up (XPUSHMEM_TIMEOUT_MS), reported by xpushmemx_queue_wait as
   * the blocking form's timeout, naming the entry point; then the list works again. */
  uint64_t *never = xpushmem_calloc(1, 8);
  CHECK(never, "allocation");
  OK(xpushmemx_signal_wait_until_on_queue(never, XPUSHMEM_CMP_EQ, 12345, list, 0, NULL, NULL));
  FAILS(xpushmemx_queue_wait(), XPUSHMEM_ERROR_TIMEOUT, "signal_wait_until_on_queue");
  OK(xpushmemx_barrier_all_on_queue(list, 0, NULL, NULL));
  OK(xpushmemx_queue_wait());

  ZE(zeEventDestroy(oev[0]));
  ZE(zeEventDestroy(oev[1]));
  ZE(zeEventPoolDestroy(opool));
  ZE(zeCommandListDestroy(foreign));
  ZE(zeContextDestroy(other));
  ZE(zeEventDestroy(ev[0]));
  ZE(zeEventDestroy(ev[1]));
  ZE(zeEventPoolDestroy(pool));
  ZE(zeCommandListDestroy(list2));
  ZE(zeCommandListDestroy(list));
  printf("on_queue_pipeline OK on PE %d of %d\n", me, n);
  fflush(stdout);
  OK(xpushmem_finalize());
  return 0;
}
