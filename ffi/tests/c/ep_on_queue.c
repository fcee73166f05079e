/* Expert-parallel dispatch and combine from C on the device path (xpushmem_ops.h): a token switch, a routing made
 * with xpushmem_ops_ep_create_routing_on_queue from a topk_idx in host USM of the runtime's context (as a
 * framework's tensors are), then dispatch and combine on the program's own immediate list, one
 * xpushmem_ops_queue_wait. Checked against what the program computes itself: the received row count against the
 * host path's routing (xpushmem_ops_ep_create_routing, host arrays), every received row's token and local expert
 * ids, and combine(dispatch(x)) = x times the number of ranks the token went to (flat: each rank returns the
 * token once). Then an expert id out of range on the last PE: its queue_wait names the value and position, the
 * others' say "rejected its arguments"; the next routing works. Run with XPUSHMEM_HEAP=device, on one node or on
 * the simulated nodes of XPUSHMEM_TEST_NODES. */
#define _POSIX_C_SOURCE 200112L /* setenv */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xpushmem.h>
#include <xpushmem_ops.h>

#include "ze_check.h"

enum { N = 6, K = 2, H = 4 };

static XpushmemOpsTensor t2(void *data, int32_t dtype, int64_t *sizes) {
  XpushmemOpsTensor t = {.data = data, .dtype = dtype, .ndim = 2, .sizes = sizes, .strides = NULL};
  return t;
}

static XpushmemOpsTensor t1(void *data, int32_t dtype, int64_t *size) {
  XpushmemOpsTensor t = {.data = data, .dtype = dtype, .ndim = 1, .sizes = size, .strides = NULL};
  return t;
}

/* Token t of rank pe: experts (t + pe) % e and (3t + 1) % e, the second -1 when equal or t = 5. */
static int64_t expert(int pe, int t, int j, int e) {
  int64_t a = (t + pe) % e, b = (3 * t + 1) % e;
  if (j == 0) return a;
  return (b == a || t == 5) ? -1 : b;
}

static float value(int pe, int t, int c) { return (float)(100 * pe + 10 * t + c); }

int main(void) {
  /* Simulated nodes (XPUSHMEM_TEST_NODES, one character per PE, from ffi/tests/ops_queue.rs): this PE's node,
   * before the runtime starts. PEs of other nodes are reached through the fabric, from the kernels through the host
   * proxy; XPUSHMEM_OPS_PATH=auto still takes the EP ops' device path (xpushmem_ops_ep_path). */
  const char *nodes = getenv("XPUSHMEM_TEST_NODES"), *rank = getenv("XPUSHMEM_BOOTSTRAP_RANK");
  if (nodes) {
    CHECK(rank && atoi(rank) >= 0 && (size_t)atoi(rank) < strlen(nodes), "a node in XPUSHMEM_TEST_NODES=%s for rank %s",
          nodes, rank ? rank : "(unset)");
    char node[2] = {nodes[atoi(rank)], 0};
    setenv("XPUSHMEM_NODE_ID", node, 1);
  }
  OK(xpushmem_ops_init());
  CHECK(xpushmem_ops_ep_path() == 1, "the EP ops' path: %d", xpushmem_ops_ep_path());
  if (nodes) {
    int local = 0;
    for (size_t i = 0; i < strlen(nodes); i++) local += nodes[i] == nodes[atoi(rank)];
    CHECK(xpushmem_team_n_pes(XPUSHMEM_TEAM_SHARED) == local, "PEs on this node: %d, expected %d",
          xpushmem_team_n_pes(XPUSHMEM_TEAM_SHARED), local);
  }
  int me = xpushmem_my_pe(), n = xpushmem_n_pes();
  int e = 2 * n, l = 2;
  ze_driver_handle_t driver;
  ze_device_handle_t device;
  ze_context_handle_t context;
  OK(xpushmemx_ze_get_handles((void **)&driver, (void **)&device, (void **)&context));
  ze_command_list_handle_t list = ze_compute_list(context, device);
  int64_t sw, state_bytes, cap = N * n;
  OK(xpushmem_ops_ep_create(NULL, 0, e, N, cap, H * 4, K, &sw));
  OK(xpushmem_ops_ep_state_bytes(sw, &state_bytes));
  ze_host_mem_alloc_desc_t hd = {.stype = ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC};
  int64_t *idx, *oi, *state;
  float *x, *w, *out, *ow, *back;
  ZE(zeMemAllocHost(context, &hd, N * K * 8, 64, (void **)&idx));
  ZE(zeMemAllocHost(context, &hd, N * K * 4, 64, (void **)&w));
  ZE(zeMemAllocHost(context, &hd, N * H * 4, 64, (void **)&x));
  ZE(zeMemAllocHost(context, &hd, cap * H * 4, 64, (void **)&out));
  ZE(zeMemAllocHost(context, &hd, cap * K * 4, 64, (void **)&ow));
  ZE(zeMemAllocHost(context, &hd, cap * K * 8, 64, (void **)&oi));
  ZE(zeMemAllocHost(context, &hd, N * H * 4, 64, (void **)&back));
  ZE(zeMemAllocHost(context, &hd, state_bytes, 64, (void **)&state));
  memset(out, 0, cap * H * 4);
  for (int t = 0; t < N; t++) {
    for (int j = 0; j < K; j++) {
      idx[t * K + j] = expert(me, t, j, e);
      w[t * K + j] = 0.5f;
    }
    for (int c = 0; c < H; c++) x[t * H + c] = value(me, t, c);
  }
  /* The host path's routing of the same topk_idx: the reference row count. */
  int64_t host_routing, host_rows, dev_routing;
  OK(xpushmem_ops_ep_create_routing(sw, idx, N, K, 0, NULL, &host_rows, &host_routing));
  int64_t s_idx[2] = {N, K}, s_x[2] = {N, H}, s_out[2] = {cap, H}, s_ow[2] = {cap, K}, s_state = state_bytes;
  XpushmemOpsTensor ti = t2(idx, 8, s_idx), tw = t2(w, 0, s_idx), tx = t2(x, 0, s_x), to = t2(out, 0, s_out),
                    tow = t2(ow, 0, s_ow), toi = t2(oi, 8, s_ow), tb = t2(back, 0, s_x),
                    tst = t1(state, 5, &s_state);
  OK(xpushmem_ops_ep_create_routing_on_queue(sw, &ti, 0, &tst, &dev_routing, list));
  OK(xpushmem_ops_ep_dispatch_on_queue(sw, dev_routing, &tx, &tw, &to, &tow, &toi, list));
  OK(xpushmem_ops_ep_combine_on_queue(sw, dev_routing, &to, &tb, list));
  OK(xpushmem_ops_queue_wait());
  int64_t rows = state[0];
  CHECK(rows == host_rows, "received rows %lld, the host path's %lld", (long long)rows, (long long)host_rows);
  /* The received rows: sources in rank order, tokens in order; each row's local ids. */
  int64_t row = 0;
  for (int s = 0; s < n; s++) {
    for (int t = 0; t < N; t++) {
      int here = 0;
      for (int j = 0; j < K; j++) here |= expert(s, t, j, e) >= 0 && expert(s, t, j, e) / l == me;
      if (!here) continue;
      for (int c = 0; c < H; c++)
        CHECK(out[row * H + c] == value(s, t, c), "row %lld col %d = %g", (long long)row, c, out[row * H + c]);
      for (int j = 0; j < K; j++) {
        int64_t x2 = expert(s, t, j, e), want = x2 >= 0 && x2 / l == me ? x2 - me * l : -1;
        CHECK(oi[row * K + j] == want, "row %lld idx %d = %lld, want %lld", (long long)row, j,
              (long long)oi[row * K + j], (long long)want);
        CHECK(ow[row * K + j] == (want >= 0 ? 0.5f : 0.0f), "row %lld weight %d", (long long)row, j);
      }
      row++;
    }
  }
  CHECK(row == rows, "%lld rows expected, %lld received", (long long)row, (long long)rows);
  for (int t = 0; t < N; t++) {
    int dests = 0;
    for (int d = 0; d < n; d++) {
      int here = 0;
      for (int j = 0; j < K; j++) here |= expert(me, t, j, e) >= 0 && expert(me, t, j, e) / l == d;
      dests += here;
    }
    for (int c = 0; c < H; c++)
      CHECK(back[t * H + c] == dests * value(me, t, c), "combined token %d col %d = %g, want %g", t, c,
            back[t * H + c], dests * value(me, t, c));
  }
  /* An expert id out of range on the last PE: the device's verdict, through queue_wait, on every PE. */
  int bad = n - 1;
  if (me == bad) idx[1] = e;
  int64_t r2;
  OK(xpushmem_ops_ep_create_routing_on_queue(sw, &ti, 0, &tst, &r2, list));
  int rc = xpushmem_ops_queue_wait();
  CHECK(rc == XPUSHMEM_ERROR_INVALID_ARGUMENT, "rc %d: %s", rc, xpushmem_last_error());
  if (me == bad) {
    char want[64];
    snprintf(want, sizeof want, "topk_idx = %d at [0, 1]", e);
    CHECK(strstr(xpushmem_last_error(), want), "%s", xpushmem_last_error());
  } else {
    CHECK(strstr(xpushmem_last_error(), "rejected its arguments"), "%s", xpushmem_last_error());
  }
  OK(xpushmem_ops_ep_routing_destroy(r2));
  idx[1] = expert(me, 0, 1, e);
  OK(xpushmem_ops_ep_create_routing_on_queue(sw, &ti, 0, &tst, &r2, list));
  OK(xpushmem_ops_queue_wait());
  CHECK(state[0] == host_rows, "the routing after the error: %lld rows", (long long)state[0]);
  OK(xpushmem_ops_ep_routing_destroy(r2));
  OK(xpushmem_ops_ep_routing_destroy(dev_routing));
  OK(xpushmem_ops_ep_routing_destroy(host_routing));
  OK(xpushmem_ops_ep_destroy(sw));
  ZE(zeCommandListDestroy(list));
  void *bufs[] = {idx, w, x, out, ow, oi, back, state};
  for (int i = 0; i < 8; i++) ZE(zeMemFree(context, bufs[i]));
  printf("ep_on_queue OK on PE %d of %d\n", me, n);
  OK(xpushmem_ops_finalize());
  return 0;
}
