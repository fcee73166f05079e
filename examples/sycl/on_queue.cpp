// The host on-queue forms from SYCL: xpushmem runs on the SYCL queue's own Level Zero driver, device and context,
// and each xpushmemx_*_on_queue op is appended to the queue's native Level Zero immediate command list, after the
// SYCL events it depends on (their native ze_event_handle_t), signalling a Level Zero event that is wrapped back
// into a sycl::event the program (or the next SYCL kernel) waits on. Intel SHMEM's
// `ishmemx_int_sum_reduce_on_queue(team, dest, src, n, q, deps)` is this program's `reduce_on_queue`.
//
// Build (oneAPI DPC++): icpx -fsycl on_queue.cpp $(pkg-config --cflags --libs xpushmem) -lze_loader
// Run:                 UR_L0_USE_IMMEDIATE_COMMANDLISTS=1 XPUSHMEM_HEAP=device xpushmem-run -n 2 ./on_queue
// The queue must be in order and use immediate command lists (the variable above; a queue on a regular command
// queue has no list to append to: the program says so). CI compiles this file with -fsyntax-only against the SYCL
// headers of the intel-sycl-rt wheel (scripts/check-shim-xpu.sh).
#include <level_zero/ze_api.h>
#include <xpushmem.h>

#include <cstdio>
#include <cstdlib>
#include <sycl/ext/oneapi/backend/level_zero.hpp>
#include <sycl/sycl.hpp>
#include <variant>
#include <vector>

namespace l0 = sycl::ext::oneapi::level_zero;
constexpr auto L0 = sycl::backend::ext_oneapi_level_zero;

static void check(int rc, const char *what) {
  if (rc != 0) {
    std::fprintf(stderr, "%s failed: %s\n", what, xpushmem_last_error());
    std::exit(1);
  }
}

// The native ze_event_handle_t of each SYCL event (all of the queue's Level Zero context).
static std::vector<ze_event_handle_t> native_events(const std::vector<sycl::event> &deps) {
  std::vector<ze_event_handle_t> v;
  for (const sycl::event &e : deps) v.push_back(sycl::get_native<L0>(e));
  return v;
}

// `n` ints of every PE's `src` summed into every PE's `dest`, on `q` after `deps`; the returned event completes
// with the reduction (Intel SHMEM's ishmemx_int_sum_reduce_on_queue).
static sycl::event reduce_on_queue(sycl::queue &q, ze_event_pool_handle_t pool, uint32_t index, int *dest,
                                   const int *src, size_t n, const std::vector<sycl::event> &deps) {
  auto native = sycl::get_native<L0>(q);
  auto *list = std::get_if<ze_command_list_handle_t>(&native);
  if (list == nullptr) {
    std::fprintf(stderr, "the SYCL queue has no immediate command list: set UR_L0_USE_IMMEDIATE_COMMANDLISTS=1\n");
    std::exit(1);
  }
  ze_event_desc_t edesc = {ZE_STRUCTURE_TYPE_EVENT_DESC, nullptr, index, ZE_EVENT_SCOPE_FLAG_HOST,
                           ZE_EVENT_SCOPE_FLAG_HOST};
  ze_event_handle_t done = nullptr;
  if (zeEventCreate(pool, &edesc, &done) != ZE_RESULT_SUCCESS) std::exit(1);
  std::vector<ze_event_handle_t> waits = native_events(deps);
  check(xpushmemx_int_sum_reduce_on_queue(XPUSHMEM_TEAM_WORLD, dest, src, n, *list, (uint32_t)waits.size(),
                                          waits.data(), done),
        "xpushmemx_int_sum_reduce_on_queue");
  // The Level Zero event as a SYCL event (the program keeps ownership and destroys it).
  return sycl::make_event<L0>({done, l0::ownership::keep}, q.get_context());
}

int main() {
  sycl::queue q{sycl::gpu_selector_v, sycl::property::queue::in_order{}};
  // xpushmem adopts the queue's Level Zero handles, so lists, events and memory are of one context.
  xpushmemx_init_attr_t attr{};
  attr.version = XPUSHMEMX_INIT_ATTR_VERSION;
  check(xpushmemx_set_attr_ze_handles(&attr, sycl::get_native<L0>(q.get_device().get_platform()),
                                      sycl::get_native<L0>(q.get_device()), sycl::get_native<L0>(q.get_context())),
        "xpushmemx_set_attr_ze_handles");
  check(xpushmemx_init_attr(0, &attr), "xpushmemx_init_attr");
  int me = xpushmem_my_pe(), npes = xpushmem_n_pes();
  constexpr size_t N = 1024;
  int *src = static_cast<int *>(xpushmem_malloc(N * sizeof(int)));
  int *dest = static_cast<int *>(xpushmem_malloc(N * sizeof(int)));
  ze_event_pool_handle_t pool = nullptr;
  ze_event_pool_desc_t pdesc = {ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, nullptr, ZE_EVENT_POOL_FLAG_HOST_VISIBLE, 1};
  ze_device_handle_t dev = sycl::get_native<L0>(q.get_device());
  if (zeEventPoolCreate(sycl::get_native<L0>(q.get_context()), &pdesc, 1, &dev, &pool) != ZE_RESULT_SUCCESS) return 1;

  // A SYCL kernel fills the source; the reduction waits for it; a SYCL kernel after the reduction checks it.
  sycl::event filled = q.parallel_for(sycl::range<1>(N), [=](sycl::id<1> i) { src[i] = me + (int)i[0]; });
  sycl::event reduced = reduce_on_queue(q, pool, 0, dest, src, N, {filled});
  int *bad = sycl::malloc_shared<int>(1, q);
  *bad = 0;
  q.submit([&](sycl::handler &h) {
     h.depends_on(reduced);
     h.parallel_for(sycl::range<1>(N), [=](sycl::id<1> i) {
       int want = npes * (int)i[0] + npes * (npes - 1) / 2;
       if (dest[i] != want) sycl::atomic_ref<int, sycl::memory_order::relaxed, sycl::memory_scope::device>(*bad) += 1;
     });
   }).wait();
  check(xpushmemx_queue_wait(), "xpushmemx_queue_wait");  // device-side errors of the on-queue ops
  std::printf("on_queue (SYCL) on PE %d of %d: %s\n", me, npes, *bad ? "WRONG" : "OK");
  sycl::free(bad, q);
  xpushmem_free(dest);
  xpushmem_free(src);
  check(xpushmem_finalize(), "xpushmem_finalize");
  return 0;
}
