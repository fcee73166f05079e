/* The symm_mem handle's signal-pad operations from C (xpushmem_ops_signal_pad and _on_queue, ops/device/
 * xpushmem_ops.cl's xpo_pad), on the program's own Level Zero immediate command list:
 *   - barrier rounds alternating channels 0 and 1: before each, every PE puts its round's value into every peer's
 *     slot [round][me] with nvshmem_put_on_queue (same list, before the barrier); after it, every slot [round][src]
 *     holds value(round, src) (computed here), and the pad is all zero again (every signal consumed);
 *   - put_signal / wait_signal ping-pong between ranks 0 and 1 on channel 2, each message a put before the signal;
 *   - bad channel and rank arguments: the host version's messages, nothing enqueued.
 * With argument "timeout" (run with a short XPUSHMEM_TIMEOUT_MS): every PE waits for a signal no one sends, and gets
 * the timeout error naming the op, its rank, the peer rank and the channel; its pad stays zero.
 * Run with XPUSHMEM_HEAP=device. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xpushmem.h>
#include <xpushmem_ops.h>

#include "ze_check.h"

enum { ROUNDS = 4, PINGS = 3, CHANNELS = 4, BARRIER = 1, PUT_SIGNAL = 2, WAIT_SIGNAL = 3 };

static int64_t value(int round, int src) { return 1000 * (round + 1) + src; }

static XpushmemOpsTensor t1(void *data, int64_t *size) {
  XpushmemOpsTensor t = {.data = data, .dtype = 8 /* int64 */, .ndim = 1, .sizes = size, .strides = NULL};
  return t;
}

/* Collective: every PE checks that its pad is all zero. */
static void pad_is_zero(const uint32_t *pad, int words, int me, const char *when) {
  uint32_t got[64];
  OK(xpushmem_getmem(got, pad, (size_t)words * 4, me));
  for (int i = 0; i < words; i++) CHECK(got[i] == 0, "%s: pad word %d = %u, want 0", when, i, got[i]);
  /* No PE signals again before every PE has checked its pad. */
  xpushmem_barrier_all();
}

int main(int argc, char **argv) {
  OK(xpushmem_ops_init());
  int me = xpushmem_my_pe(), n = xpushmem_n_pes();
  CHECK(n >= 2 && n <= 16, "2..16 PEs (got %d)", n);
  CHECK(xpushmem_ops_path() == 1, "the device path on a device heap (got %d)", xpushmem_ops_path());
  int words = CHANNELS * n;
  int64_t pad_bytes = (int64_t)words * 4;
  uint32_t *pad = xpushmem_calloc((size_t)words, 4);
  int32_t pes[16];
  for (int r = 0; r < n; r++) pes[r] = r;
  CHECK(pad != NULL, "pad allocation");
  xpushmem_barrier_all();

  if (argc > 1 && strcmp(argv[1], "timeout") == 0) {
    int src = (me + 1) % n;
    int rc = xpushmem_ops_signal_pad(WAIT_SIGNAL, pad, pad_bytes, 3, src, pes, n);
    CHECK(rc == XPUSHMEM_ERROR_TIMEOUT, "an unsignalled wait_signal: rc %d (%s)", rc, xpushmem_last_error());
    char want[128];
    snprintf(want, sizeof want, "wait_signal waited");
    CHECK(strstr(xpushmem_last_error(), want), "message lacks \"%s\": %s", want, xpushmem_last_error());
    snprintf(want, sizeof want, "rank %d, peer rank %d, channel 3", me, src);
    CHECK(strstr(xpushmem_last_error(), want), "message lacks \"%s\": %s", want, xpushmem_last_error());
    pad_is_zero(pad, words, me, "after the timeout");
    printf("signal_pad_on_queue OK on PE %d of %d\n", me, n);
    OK(xpushmem_ops_finalize());
    return 0;
  }

  ze_driver_handle_t driver;
  ze_device_handle_t device;
  ze_context_handle_t context;
  OK(xpushmemx_ze_get_handles((void **)&driver, (void **)&device, (void **)&context));
  ze_command_list_handle_t list = ze_compute_list(context, device);

  /* Barrier rounds: slot [round][src] of every PE receives src's value before src's barrier. */
  int64_t *slots = xpushmem_calloc((size_t)ROUNDS * n, 8);
  CHECK(slots != NULL, "slots allocation");
  int64_t one = 1;
  xpushmem_barrier_all();
  for (int round = 0; round < ROUNDS; round++) {
    int64_t v = value(round, me);
    int64_t *mine = slots + round * n + me;
    OK(xpushmem_putmem(mine, &v, 8, me));
    XpushmemOpsTensor t = t1(mine, &one);
    for (int p = 0; p < n; p++)
      if (p != me) OK(xpushmem_ops_nvshmem_put_on_queue(&t, p, list));
    OK(xpushmem_ops_signal_pad_on_queue(BARRIER, pad, pad_bytes, round % 2, 0, pes, n, list));
    OK(xpushmem_ops_queue_wait());
    int64_t got[16];
    OK(xpushmem_getmem(got, slots + round * n, (size_t)n * 8, me));
    for (int src = 0; src < n; src++)
      CHECK(got[src] == value(round, src), "round %d (channel %d): slot of rank %d = %lld, want %lld", round,
            round % 2, src, (long long)got[src], (long long)value(round, src));
  }
  /* Every PE has consumed every signal of its pad once every PE has passed the last barrier. */
  xpushmem_barrier_all();
  pad_is_zero(pad, words, me, "after the barriers");

  /* Ping-pong on channel 2: rank 0 sends k, rank 1 answers 10 * k + 1, each message a put before put_signal. */
  int64_t *box = xpushmem_calloc(PINGS, 8);
  CHECK(box != NULL, "box allocation");
  xpushmem_barrier_all();
  for (int k = 0; k < PINGS && me < 2; k++) {
    int other = 1 - me;
    XpushmemOpsTensor t = t1(box + k, &one);
    if (me == 0) {
      int64_t v = k + 5;
      OK(xpushmem_putmem(box + k, &v, 8, me));
      OK(xpushmem_ops_nvshmem_put_on_queue(&t, other, list));
      OK(xpushmem_ops_signal_pad_on_queue(PUT_SIGNAL, pad, pad_bytes, 2, other, pes, n, list));
      OK(xpushmem_ops_signal_pad_on_queue(WAIT_SIGNAL, pad, pad_bytes, 2, other, pes, n, list));
      OK(xpushmem_ops_queue_wait());
      int64_t got;
      OK(xpushmem_getmem(&got, box + k, 8, me));
      CHECK(got == 10 * (k + 5) + 1, "ping %d: answer %lld, want %lld", k, (long long)got,
            (long long)(10 * (k + 5) + 1));
    } else {
      OK(xpushmem_ops_signal_pad_on_queue(WAIT_SIGNAL, pad, pad_bytes, 2, other, pes, n, list));
      OK(xpushmem_ops_queue_wait());
      int64_t got;
      OK(xpushmem_getmem(&got, box + k, 8, me));
      CHECK(got == k + 5, "ping %d: received %lld, want %d", k, (long long)got, k + 5);
      int64_t answer = 10 * got + 1;
      OK(xpushmem_putmem(box + k, &answer, 8, me));
      OK(xpushmem_ops_nvshmem_put_on_queue(&t, other, list));
      OK(xpushmem_ops_signal_pad_on_queue(PUT_SIGNAL, pad, pad_bytes, 2, other, pes, n, list));
      OK(xpushmem_ops_queue_wait());
    }
  }
  xpushmem_barrier_all();
  pad_is_zero(pad, words, me, "after the ping-pong");

  /* Bad arguments: refused at once with the host version's messages. */
  char want[160];
  snprintf(want, sizeof want,
           "channel %d exceeds the maximum supported channel: channels must be in [0, %d) for a signal pad of %lld "
           "bytes and world size %d",
           CHANNELS, CHANNELS, (long long)pad_bytes, n);
  FAILS(xpushmem_ops_signal_pad_on_queue(BARRIER, pad, pad_bytes, CHANNELS, 0, pes, n, list),
        XPUSHMEM_ERROR_INVALID_ARGUMENT, want);
  FAILS(xpushmem_ops_signal_pad(PUT_SIGNAL, pad, pad_bytes, -1, 0, pes, n), XPUSHMEM_ERROR_INVALID_ARGUMENT,
        "channel -1 exceeds the maximum supported channel");
  snprintf(want, sizeof want, "put_signal: rank must be in [0, %d)", n);
  FAILS(xpushmem_ops_signal_pad_on_queue(PUT_SIGNAL, pad, pad_bytes, 0, n, pes, n, list),
        XPUSHMEM_ERROR_INVALID_ARGUMENT, want);
  snprintf(want, sizeof want, "wait_signal: rank must be in [0, %d)", n);
  FAILS(xpushmem_ops_signal_pad(WAIT_SIGNAL, pad, pad_bytes, 0, -1, pes, n), XPUSHMEM_ERROR_INVALID_ARGUMENT, want);
  FAILS(xpushmem_ops_signal_pad(7, pad, pad_bytes, 0, 0, pes, n), XPUSHMEM_ERROR_INVALID_ARGUMENT, "mode");
  OK(xpushmem_ops_queue_wait()); /* nothing was enqueued by the refused calls */
  pad_is_zero(pad, words, me, "after the refused calls");

  /* The synchronous entry point (the runtime's own queue): one more barrier. */
  OK(xpushmem_ops_signal_pad(BARRIER, pad, pad_bytes, 1, 0, pes, n));
  pad_is_zero(pad, words, me, "after the synchronous barrier");
  ZE(zeCommandListDestroy(list));
  printf("signal_pad_on_queue OK on PE %d of %d\n", me, n);
  OK(xpushmem_ops_finalize());
  return 0;
}
