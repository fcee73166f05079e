// xpushmem_torch.cpp: the PyTorch drop-in of xpushmem.
//
// Built at import time by `xpushmem.torch` against the *installed* torch (torch.utils.cpp_extension.load) and
// linked to libxpushmem.so. It provides
//   * a c10d SymmetricMemoryAllocator named "NVSHMEM" for DeviceType::XPU (device heap) and DeviceType::CPU
//     (memfd host heap, mapped in every process of the node), with its SymmetricMemory handles;
//   * the kernels of the symm_mem NVSHMEM op family for the XPU and CPU dispatch keys, calling the xpushmem-ops
//     C ABI (xpushmem_ops_*, exported by libxpushmem.so).
// Registrations happen in install() (called from Python), never in static initialisers, so that a failure
// (e.g. a kernel signature that does not match the installed torch) becomes a Python exception, not an abort.
//
// Errors: every failure is a TORCH_CHECK(false, msg) with the library's message (xpushmem_last_error() or
// xpushmem_ops_last_error()), which Python sees as RuntimeError.

#include <torch/extension.h>
#include <torch/library.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "xpushmem.h"

// XPU builds of torch: the MemPool allocator (torch.xpu.MemPool(symm_mem.get_mempool_allocator("xpu")) and the
// implicit pool of symm_mem.empty) needs torch's XPUPluggableAllocator, which needs the SYCL headers. The Python
// loader defines XPUSHMEM_TORCH_WITH_XPU when it finds them next to an XPU torch.
#if defined(XPUSHMEM_TORCH_WITH_XPU)
#include <c10/xpu/XPUStream.h>
#include <sycl/ext/oneapi/backend/level_zero.hpp>
#include <variant>
#include <torch/csrc/xpu/XPUPluggableAllocator.h>
#endif

// ---------------------------------------------------------------------------------------------------------------
// The xpushmem-ops C ABI (ops/src/capi.rs). libxpushmem.so exports it when the ops crate is linked into it; the
// references are weak so that this shim still loads (and reports precisely what is missing) when it is not.
extern "C" {
typedef struct {
  void* data;
  int32_t dtype;
  int32_t ndim;
  const int64_t* sizes;
  const int64_t* strides;
} xpushmem_ops_tensor;

#define XPUSHMEM_OPS_WEAK __attribute__((weak))
XPUSHMEM_OPS_WEAK const char* xpushmem_ops_last_error(void);
XPUSHMEM_OPS_WEAK int xpushmem_ops_all_to_all_vdev(const xpushmem_ops_tensor*, const xpushmem_ops_tensor*,
                                                   const xpushmem_ops_tensor*, const xpushmem_ops_tensor*,
                                                   const int32_t*, int32_t);
XPUSHMEM_OPS_WEAK int xpushmem_ops_all_to_all_vdev_2d(const xpushmem_ops_tensor*, const xpushmem_ops_tensor*,
                                                      const xpushmem_ops_tensor*, const xpushmem_ops_tensor*,
                                                      const int32_t*, int32_t, const int64_t*);
XPUSHMEM_OPS_WEAK int xpushmem_ops_all_to_all_vdev_2d_offset(const xpushmem_ops_tensor*, const xpushmem_ops_tensor*,
                                                             const xpushmem_ops_tensor*, const xpushmem_ops_tensor*,
                                                             const int32_t*, int32_t);
XPUSHMEM_OPS_WEAK int xpushmem_ops_nvshmem_all_to_all(const xpushmem_ops_tensor*, const xpushmem_ops_tensor*,
                                                      const int32_t*, int32_t);
XPUSHMEM_OPS_WEAK int xpushmem_ops_tile_reduce(const xpushmem_ops_tensor*, const xpushmem_ops_tensor*, int64_t,
                                               const int32_t*, int32_t, const char*);
XPUSHMEM_OPS_WEAK int xpushmem_ops_multi_root_tile_reduce(const xpushmem_ops_tensor*, int32_t,
                                                          const xpushmem_ops_tensor*, const int64_t*, int32_t,
                                                          const int32_t*, int32_t, const char*);
XPUSHMEM_OPS_WEAK int xpushmem_ops_nvshmem_broadcast(const xpushmem_ops_tensor*, int64_t, const int32_t*, int32_t);
XPUSHMEM_OPS_WEAK int xpushmem_ops_nvshmem_put(const xpushmem_ops_tensor*, int64_t);
XPUSHMEM_OPS_WEAK int xpushmem_ops_nvshmem_get(const xpushmem_ops_tensor*, int64_t);
XPUSHMEM_OPS_WEAK int xpushmem_ops_nvshmem_put_with_signal(const xpushmem_ops_tensor*, const xpushmem_ops_tensor*,
                                                           int64_t, int64_t);
XPUSHMEM_OPS_WEAK int xpushmem_ops_nvshmem_wait_for_signal(const xpushmem_ops_tensor*, int64_t, int64_t);
// The device path (ffi/src/ops.rs): the same ops appended to a Level Zero command list without waiting.
XPUSHMEM_OPS_WEAK int xpushmem_ops_path(void);
// The EP ops' path: also the device's with PEs on other nodes under XPUSHMEM_OPS_PATH=auto (their kernels reach
// them through the host proxy).
XPUSHMEM_OPS_WEAK int xpushmem_ops_ep_path(void);
XPUSHMEM_OPS_WEAK int xpushmem_ops_queue_poll(void);
XPUSHMEM_OPS_WEAK int xpushmem_ops_queue_wait(void);
XPUSHMEM_OPS_WEAK int xpushmem_ops_all_to_all_vdev_on_queue(const xpushmem_ops_tensor*, const xpushmem_ops_tensor*,
                                                            const xpushmem_ops_tensor*, const xpushmem_ops_tensor*,
                                                            const int32_t*, int32_t, void*);
XPUSHMEM_OPS_WEAK int xpushmem_ops_all_to_all_vdev_2d_on_queue(const xpushmem_ops_tensor*, const xpushmem_ops_tensor*,
                                                               const xpushmem_ops_tensor*, const xpushmem_ops_tensor*,
                                                               const int32_t*, int32_t, const int64_t*, void*);
XPUSHMEM_OPS_WEAK int xpushmem_ops_all_to_all_vdev_2d_offset_on_queue(const xpushmem_ops_tensor*,
                                                                      const xpushmem_ops_tensor*,
                                                                      const xpushmem_ops_tensor*,
                                                                      const xpushmem_ops_tensor*, const int32_t*,
                                                                      int32_t, void*);
XPUSHMEM_OPS_WEAK int xpushmem_ops_nvshmem_all_to_all_on_queue(const xpushmem_ops_tensor*, const xpushmem_ops_tensor*,
                                                               const int32_t*, int32_t, void*);
XPUSHMEM_OPS_WEAK int xpushmem_ops_tile_reduce_on_queue(const xpushmem_ops_tensor*, const xpushmem_ops_tensor*,
                                                        int64_t, const int32_t*, int32_t, const char*, void*);
XPUSHMEM_OPS_WEAK int xpushmem_ops_multi_root_tile_reduce_on_queue(const xpushmem_ops_tensor*, int32_t,
                                                                   const xpushmem_ops_tensor*, const int64_t*, int32_t,
                                                                   const int32_t*, int32_t, const char*, void*);
XPUSHMEM_OPS_WEAK int xpushmem_ops_nvshmem_broadcast_on_queue(const xpushmem_ops_tensor*, int64_t, const int32_t*,
                                                              int32_t, void*);
XPUSHMEM_OPS_WEAK int xpushmem_ops_nvshmem_put_on_queue(const xpushmem_ops_tensor*, int64_t, void*);
XPUSHMEM_OPS_WEAK int xpushmem_ops_nvshmem_get_on_queue(const xpushmem_ops_tensor*, int64_t, void*);
XPUSHMEM_OPS_WEAK int xpushmem_ops_nvshmem_put_with_signal_on_queue(const xpushmem_ops_tensor*,
                                                                    const xpushmem_ops_tensor*, int64_t, int64_t,
                                                                    void*);
XPUSHMEM_OPS_WEAK int xpushmem_ops_nvshmem_wait_for_signal_on_queue(const xpushmem_ops_tensor*, int64_t, int64_t,
                                                                    void*);
// symm_mem's collectives (ops/device/symm_mem.cl): device path only; local tensors may lie outside the heap.
XPUSHMEM_OPS_WEAK int xpushmem_ops_one_shot_all_reduce(const xpushmem_ops_tensor*, const xpushmem_ops_tensor*,
                                                       const char*, const xpushmem_ops_tensor*, const int32_t*,
                                                       int32_t);
XPUSHMEM_OPS_WEAK int xpushmem_ops_one_shot_all_reduce_on_queue(const xpushmem_ops_tensor*,
                                                                const xpushmem_ops_tensor*, const char*,
                                                                const xpushmem_ops_tensor*, const int32_t*, int32_t,
                                                                void*);
XPUSHMEM_OPS_WEAK int xpushmem_ops_two_shot_all_reduce(const xpushmem_ops_tensor*, const xpushmem_ops_tensor*,
                                                       const char*, const int32_t*, int32_t);
XPUSHMEM_OPS_WEAK int xpushmem_ops_two_shot_all_reduce_on_queue(const xpushmem_ops_tensor*,
                                                                const xpushmem_ops_tensor*, const char*,
                                                                const int32_t*, int32_t, void*);
XPUSHMEM_OPS_WEAK int xpushmem_ops_reduce_scatter_out(const xpushmem_ops_tensor*, int32_t, const xpushmem_ops_tensor*,
                                                      const int32_t*, int32_t);
XPUSHMEM_OPS_WEAK int xpushmem_ops_reduce_scatter_out_on_queue(const xpushmem_ops_tensor*, int32_t,
                                                               const xpushmem_ops_tensor*, const int32_t*, int32_t,
                                                               void*);
XPUSHMEM_OPS_WEAK int xpushmem_ops_memset32(const xpushmem_ops_tensor*, int64_t, int64_t, int64_t);
XPUSHMEM_OPS_WEAK int xpushmem_ops_memset32_on_queue(const xpushmem_ops_tensor*, int64_t, int64_t, int64_t, void*);
XPUSHMEM_OPS_WEAK int xpushmem_ops_stream_write_value32(const xpushmem_ops_tensor*, int64_t, int64_t);
XPUSHMEM_OPS_WEAK int xpushmem_ops_stream_write_value32_on_queue(const xpushmem_ops_tensor*, int64_t, int64_t,
                                                                 void*);
// The symm_mem handle's signal pad (xpo_pad): mode 1 barrier, 2 put_signal, 3 wait_signal.
XPUSHMEM_OPS_WEAK int xpushmem_ops_init(void);
XPUSHMEM_OPS_WEAK int xpushmem_ops_signal_pad(int32_t, void*, int64_t, int32_t, int32_t, const int32_t*, int32_t);
XPUSHMEM_OPS_WEAK int xpushmem_ops_signal_pad_on_queue(int32_t, void*, int64_t, int32_t, int32_t, const int32_t*,
                                                       int32_t, void*);
}

namespace sm = c10d::symmetric_memory;

namespace xpushmem_torch {
namespace {

constexpr const char* kBackendName = "NVSHMEM";
constexpr size_t kAlign = 256;

std::string last_error() {
  const char* m = xpushmem_last_error();
  return (m && *m) ? std::string(m) : std::string("(no message)");
}

void check_rc(int rc, const char* what) {
  TORCH_CHECK(rc == XPUSHMEM_SUCCESS, "xpushmem: ", what, " failed (", xpushmemx_error_name(rc), "): ",
              last_error());
}

size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

// The limit of a wait whose caller passed timeout 0: XPUSHMEM_TIMEOUT_MS (default 300000; 0 = none).
size_t default_timeout_ms() {
  const char* v = std::getenv("XPUSHMEM_TIMEOUT_MS");
  if (v == nullptr || *v == '\0') return 300000;
  char* end = nullptr;
  unsigned long long ms = std::strtoull(v, &end, 10);
  return (end && *end == '\0') ? static_cast<size_t>(ms) : 300000;
}

// ------------------------------------------------------------------------------------------------ runtime ----
// The runtime is started lazily, on the first symmetric allocation, from the default process group ("0"):
// rank 0 makes a unique ID, publishes it in the group's store, every rank starts with it (NVSHMEM's
// NVSHMEMX_INIT_WITH_UNIQUEID). One runtime serves one heap kind: host (CPU tensors) or device (XPU tensors).
struct Runtime {
  std::mutex mu;
  bool up = false;
  c10::DeviceType heap_device = c10::DeviceType::CPU;
  int my_pe = -1;
  int n_pes = 0;
};

Runtime& runtime() {
  static Runtime* rt = new Runtime();  // leaked on purpose: tensors may be freed during interpreter teardown
  return *rt;
}

c10::intrusive_ptr<c10d::ProcessGroup> resolve_group(const std::string& name) {
  TORCH_CHECK(c10d::is_process_group_registered(name), "xpushmem: no process group is registered under the name '",
              name, "' (call torch.distributed.init_process_group() first)");
  return c10d::resolve_process_group(name);
}

void ensure_runtime(c10::DeviceType dev, int device_idx) {
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lk(rt.mu);
  if (rt.up) {
    TORCH_CHECK(rt.heap_device == dev, "xpushmem: the symmetric heap of this process holds ",
                c10::DeviceTypeName(rt.heap_device), " memory (XPUSHMEM_HEAP=",
                rt.heap_device == c10::DeviceType::CPU ? "host" : "device", "); it cannot also serve ",
                c10::DeviceTypeName(dev), " tensors");
    return;
  }
  if (!xpushmemx_initialized()) {
    // The heap kind follows the first allocation's device unless the user chose it.
    if (std::getenv("XPUSHMEM_HEAP") == nullptr) {
      setenv("XPUSHMEM_HEAP", dev == c10::DeviceType::CPU ? "host" : "device", 0);
    }
    if (dev != c10::DeviceType::CPU && std::getenv("XPUSHMEM_DEVICE") == nullptr && device_idx >= 0) {
      setenv("XPUSHMEM_DEVICE", std::to_string(device_idx).c_str(), 0);
    }
    // Without a default process group the process is a world of one (upstream's allocator serves a single
    // process, as in SymmMemSingleProcTest): its own unique ID, no store.
    const bool alone = !c10d::is_process_group_registered("0");
    c10::intrusive_ptr<c10d::Store> store;
    int rank = 0;
    int size = 1;
    if (!alone) {
      auto pg = resolve_group("0");
      store = pg->getStore();
      TORCH_CHECK(store, "xpushmem: the default process group has no store to exchange the unique ID");
      rank = pg->getRank();
      size = pg->getSize();
    }
    xpushmemx_uniqueid_t uid;
    std::memset(&uid, 0, sizeof(uid));
    const std::string key = "xpushmem/torch/uniqueid";
    if (rank == 0) {
      check_rc(xpushmemx_get_uniqueid(&uid), "xpushmemx_get_uniqueid");
      const auto* b = reinterpret_cast<const uint8_t*>(&uid);
      if (!alone) store->set(key, std::vector<uint8_t>(b, b + sizeof(uid)));
    } else {
      std::vector<uint8_t> v = store->get(key);
      TORCH_CHECK(v.size() == sizeof(uid), "xpushmem: the unique ID in the store has ", v.size(),
                  " bytes, expected ", sizeof(uid));
      std::memcpy(&uid, v.data(), sizeof(uid));
    }
    xpushmemx_init_attr_t attr;
    std::memset(&attr, 0, sizeof(attr));
    check_rc(xpushmemx_set_attr_uniqueid_args(rank, size, &uid, &attr), "xpushmemx_set_attr_uniqueid_args");
#if defined(XPUSHMEM_TORCH_WITH_XPU)
    // A device heap starts on torch's own Level Zero driver, device and context (the SYCL platform, device and the
    // device context torch's streams are created in) rather than on ones the runtime opens itself: the heap and
    // the op kernels then live in the context of the current stream's command list, so current_stream_list()
    // finds it and the ops enqueue on the stream without synchronising it. UNVERIFIED on hardware (see
    // docs/HARDWARE.md); the handles stay torch's (the runtime never destroys them).
    const char* heap_env = std::getenv("XPUSHMEM_HEAP");
    if (dev == c10::DeviceType::XPU && heap_env != nullptr && std::string(heap_env) == "device") {
      const sycl::device& sdev = c10::xpu::get_raw_device(static_cast<c10::DeviceIndex>(device_idx));
      ze_driver_handle_t ze_driver = sycl::get_native<sycl::backend::ext_oneapi_level_zero>(sdev.get_platform());
      ze_device_handle_t ze_device = sycl::get_native<sycl::backend::ext_oneapi_level_zero>(sdev);
      ze_context_handle_t ze_context =
          sycl::get_native<sycl::backend::ext_oneapi_level_zero>(c10::xpu::get_device_context());
      check_rc(xpushmemx_set_attr_ze_handles(&attr, ze_driver, ze_device, ze_context),
               "xpushmemx_set_attr_ze_handles");
    }
#endif
    check_rc(xpushmemx_init_attr(XPUSHMEMX_INIT_WITH_UNIQUEID, &attr), "xpushmemx_init_attr");
    // The ops' device path (collective, like the start): the handle's pad kernels need it set up on every PE.
    if (dev == c10::DeviceType::XPU && xpushmem_ops_init != nullptr && xpushmem_ops_init() != 0) {
      const char* m = xpushmem_ops_last_error ? xpushmem_ops_last_error() : nullptr;
      TORCH_CHECK(false, "xpushmem: xpushmem_ops_init failed: ", (m && *m) ? m : "(no message)");
    }
  }
  // A heap chosen by the user (XPUSHMEM_HEAP, or a runtime started outside torch) must suit this device.
  if (const char* heap = std::getenv("XPUSHMEM_HEAP")) {
    const bool host = std::string(heap) == "host";
    TORCH_CHECK(host == (dev == c10::DeviceType::CPU), "xpushmem: XPUSHMEM_HEAP=", heap, " cannot hold ",
                c10::DeviceTypeName(dev), " tensors (", dev == c10::DeviceType::CPU ? "host" : "device",
                " heap needed)");
  }
  // Errors must come back as codes (RuntimeError in Python), never abort the interpreter.
  check_rc(xpushmemx_set_error_mode(XPUSHMEMX_ERROR_MODE_RETURN), "xpushmemx_set_error_mode");
  rt.my_pe = xpushmem_my_pe();
  rt.n_pes = xpushmem_n_pes();
  rt.heap_device = dev;
  rt.up = true;
}

int my_pe() {
  Runtime& rt = runtime();
  TORCH_CHECK(rt.up, "xpushmem: the runtime is not started (no symmetric allocation was made yet)");
  return rt.my_pe;
}

// Synchronise the current stream of `device` (host-driven operations follow work already queued on it).
void sync_device(const c10::Device& device) {
  if (device.type() == c10::DeviceType::CPU) return;
  c10::impl::VirtualGuardImpl impl(device.type());
  impl.synchronizeStream(impl.getStream(device));
}

// ------------------------------------------------------------------------------------------- exchanges ----
// How the rendezvous exchanges went (tests): over a group's store, or through its allgather.
std::atomic<int64_t> g_store_exchanges{0};
std::atomic<int64_t> g_pg_exchanges{0};

// The device of `pg`'s collectives: CPU when it has a CPU backend, else the current device of its first type.
c10::Device collective_device(const c10d::ProcessGroup& pg) {
  const auto types = pg.getDeviceTypes();
  for (const auto& d : types) {
    if (d.type() == c10::DeviceType::CPU) return c10::Device(c10::DeviceType::CPU);
  }
  TORCH_CHECK(!types.empty(), "xpushmem: process group '", pg.getGroupName(), "' has no backend for an allgather");
  c10::impl::VirtualGuardImpl impl(types.front().type());
  return impl.getDevice();
}

// Every rank's `mine`, in group-rank order, through the group's allgather: the lengths, then the records padded to
// the longest.
std::vector<std::vector<uint8_t>> allgather_bytes(c10d::ProcessGroup& pg, const std::vector<uint8_t>& mine) {
  const int size = pg.getSize();
  const c10::Device dev = collective_device(pg);
  auto gather = [&](const at::Tensor& in) {
    std::vector<at::Tensor> input{in.to(dev)};
    std::vector<std::vector<at::Tensor>> output(1);
    for (int r = 0; r < size; ++r) output[0].push_back(at::empty_like(input[0]));
    pg.allgather(output, input)->wait();
    return output[0];
  };
  const auto lens = gather(at::tensor({static_cast<int64_t>(mine.size())}, at::kLong));
  std::vector<int64_t> len(size);
  int64_t longest = 0;
  for (int r = 0; r < size; ++r) {
    len[r] = lens[r].cpu().item<int64_t>();
    longest = std::max(longest, len[r]);
  }
  at::Tensor rec = at::zeros({std::max<int64_t>(longest, 1)}, at::kByte);
  if (!mine.empty()) std::memcpy(rec.data_ptr<uint8_t>(), mine.data(), mine.size());
  const auto recs = gather(rec);
  std::vector<std::vector<uint8_t>> all(size);
  for (int r = 0; r < size; ++r) {
    const at::Tensor h = recs[r].cpu().contiguous();
    all[r].assign(h.data_ptr<uint8_t>(), h.data_ptr<uint8_t>() + len[r]);
  }
  return all;
}

// Every rank's `mine`, in group-rank order: through the group's allgather when the group asks for it
// (use_pg_for_symm_mem_rendezvous, upstream's process-group option for worlds where the store is the bottleneck),
// else over its store under `prefix` + rank.
std::vector<std::vector<uint8_t>> exchange(const c10::intrusive_ptr<c10d::ProcessGroup>& pg, const std::string& name,
                                           const std::string& prefix, const std::vector<uint8_t>& mine) {
  if (pg->getUsePgForSymmMemRendezvous()) {
    ++g_pg_exchanges;
    return allgather_bytes(*pg, mine);
  }
  ++g_store_exchanges;
  auto store = pg->getStore();
  TORCH_CHECK(store, "xpushmem: process group '", name, "' has no store for the rendezvous");
  store->set(prefix + std::to_string(pg->getRank()), mine);
  std::vector<std::string> keys;
  for (int r = 0; r < pg->getSize(); ++r) keys.push_back(prefix + std::to_string(r));
  return store->multiGet(keys);
}

// ------------------------------------------------------------------------------------------ group ranks ----
// group name -> global PEs in group-rank order, all-gathered once over the group's store. An entry belongs to one
// process group object: a name recycled by a new group (destroy_process_group() resets torch's name counter, so the
// next new_group() may get the same name for other ranks) gets a fresh entry, with its own rendezvous count and team.
struct GroupRanks {
  std::optional<c10::weak_intrusive_ptr<c10d::ProcessGroup>> pg;  // the group the entry was made for (none: alone)
  int rank = 0;
  std::vector<int> global;
  uint64_t rendezvous_seq = 0;  // rendezvous of this group so far (store keys of the next one)
  uint64_t alloc_seq = 0;       // allocations on this group so far (store keys of their free agreement)
  int32_t team = -1;            // the xpushmem team of the group's ranks, made by its first allocation

  // Whether the entry is that of `pg` (the same object, still alive).
  bool is(const c10::intrusive_ptr<c10d::ProcessGroup>& p) const {
    if (!pg) return false;
    auto held = pg->lock();
    return held && held.get() == p.get();
  }
  std::string pes() const {
    std::string out;
    for (size_t i = 0; i < global.size(); ++i) out += (i ? ", " : "") + std::to_string(global[i]);
    return out;
  }
};

std::mutex g_groups_mu;
std::unordered_map<std::string, std::shared_ptr<GroupRanks>>& groups() {
  static auto* m = new std::unordered_map<std::string, std::shared_ptr<GroupRanks>>();
  return *m;
}

std::shared_ptr<GroupRanks> group_ranks(const std::string& name) {
  if (name == "0" && !c10d::is_process_group_registered(name)) {
    // No default group: the runtime is a world of one (ensure_runtime).
    TORCH_CHECK(runtime().n_pes == 1, "xpushmem: no default process group, but the runtime has ", runtime().n_pes,
                " PEs");
    static const auto alone = [] {
      auto g = std::make_shared<GroupRanks>();
      g->global = {0};
      return g;
    }();
    return alone;
  }
  auto pg = resolve_group(name);
  std::lock_guard<std::mutex> lk(g_groups_mu);
  auto it = groups().find(name);
  if (it != groups().end() && it->second->is(pg)) return it->second;
  auto g = std::make_shared<GroupRanks>();
  g->pg = c10::weak_intrusive_ptr<c10d::ProcessGroup>(pg);
  g->rank = pg->getRank();
  const int size = pg->getSize();
  const int me = my_pe();
  if (name == "0") {
    TORCH_CHECK(size == runtime().n_pes, "xpushmem: the default group has ", size, " ranks but the runtime has ",
                runtime().n_pes, " PEs");
    for (int r = 0; r < size; ++r) g->global.push_back(r);
  } else {
    const auto* b = reinterpret_cast<const uint8_t*>(&me);
    auto vals = exchange(pg, name, "xpushmem/torch/r2g/" + name + "/", std::vector<uint8_t>(b, b + 4));
    for (int r = 0; r < size; ++r) {
      TORCH_CHECK(vals[r].size() == 4, "xpushmem: bad global-rank record of rank ", r, " of group ", name);
      int v;
      std::memcpy(&v, vals[r].data(), 4);
      g->global.push_back(v);
    }
  }
  TORCH_CHECK(g->global[g->rank] == me, "xpushmem: group ", name, ": rank ", g->rank, " maps to PE ",
              g->global[g->rank], " but this process is PE ", me);
  groups()[name] = g;
  return g;
}

// The first rendezvous of an allocation on a group is a synchronisation point of the group (as with NVSHMEM,
// whose rendezvous all-gathers over the store): when it returns, every rank of the group has made the allocation
// and entered the rendezvous, so peers' buffers and signal pads may be used. The ranks also check that they
// agree on the group's global PEs.
void rendezvous_sync(const std::string& name, GroupRanks& g) {
  static std::mutex mu;
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lk(mu);
    seq = g.rendezvous_seq++;  // counted per group object: a recycled name starts again with its new ranks
  }
  if (g.global.size() == 1) return;
  auto pg = resolve_group(name);
  const std::string prefix = "xpushmem/torch/rdv/" + name + "/" + std::to_string(seq) + "/";
  std::string mine;
  for (int pe : g.global) mine += std::to_string(pe) + ",";
  auto all = exchange(pg, name, prefix, std::vector<uint8_t>(mine.begin(), mine.end()));
  for (size_t r = 0; r < all.size(); ++r) {
    TORCH_CHECK(std::string(all[r].begin(), all[r].end()) == mine, "xpushmem: rendezvous on group ", name,
                ": rank ", r, " sees the group as PEs [", std::string(all[r].begin(), all[r].end()),
                "], this rank as [", mine, "]");
  }
}

// The xpushmem team of group `name`'s ranks (made among them only, at the group's first allocation: the other
// ranks never call). Where the team scope is impossible (the fabric: PEs on other nodes) this fails with the
// runtime's reason; host and device heaps on one node (CPU and XPU tensors) have it. Called by every rank of the group, in the same order (an allocation on the group is collective over it).
int32_t group_team(const std::string& name, GroupRanks& g) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lk(mu);
  if (g.team >= 0) return g.team;
  // The tag tells this group's team from another one of the same ranks: FNV-1a of the name (the same on every rank).
  uint64_t tag = 0xcbf29ce484222325ull;
  for (unsigned char c : name) tag = (tag ^ c) * 0x100000001b3ull;
  std::vector<int> pes(g.global.begin(), g.global.end());
  int32_t t = -1;
  const int rc = xpushmem_team_of_members(pes.data(), static_cast<int>(pes.size()), tag, &t);
  TORCH_CHECK(rc == XPUSHMEM_SUCCESS, "xpushmem: an allocation on process group '", name, "' (PEs [", g.pes(),
              "]) lives on that group's ranks only, in a team of them, which could not be made (",
              xpushmemx_error_name(rc), "): ", last_error());
  g.team = t;
  return t;
}

// ---------------------------------------------------------------------------------------- allocations ----
struct Block {
  void* base = nullptr;
  size_t size = 0;       // what the caller asked for (the tensor's bytes)
  size_t pad_off = 0;    // byte offset of the signal pad from base
  size_t pad_size = 0;
  c10::Device device{c10::DeviceType::CPU};
  std::string group = "0";             // the group it was allocated on ("0": the world)
  std::shared_ptr<GroupRanks> granks;  // that group's entry, for an allocation on a group (null: the world)
};

// The per-(allocation, group) peer tables shared by every handle on that allocation.
struct PeerInfo {
  std::shared_ptr<Block> block;
  std::string group;
  std::shared_ptr<GroupRanks> granks;  // the entry of the group object the handle was made on
  int rank = 0;
  int world = 0;
  std::vector<int> r2g;
  std::vector<void*> buffers;
  std::vector<void*> pads;
  bool direct = true;
  at::Tensor buffers_dev, pads_dev, r2g_dev;  // on the allocation's device
};

class XpSymmetricMemory;

class XpAllocator : public sm::SymmetricMemoryAllocator {
 public:
  explicit XpAllocator(c10::DeviceType dev) : dev_(dev) {}

  void* alloc(size_t size, int device_idx, const std::optional<std::string>& group_name) override;
  void free(void* ptr) override;
  size_t get_alloc_size(void* ptr) override;
  c10::intrusive_ptr<sm::SymmetricMemory> rendezvous(void* ptr,
                                                     const std::optional<std::string>& group_name) override;
  bool has_multicast_support(int /*device_idx*/) override { return false; }
  c10::DeviceType supported_device_type() override { return dev_; }
  std::string name() override { return kBackendName; }
  bool has_allocation(void* ptr) override {
    std::lock_guard<std::mutex> lk(mu_);
    return find_locked(ptr) != nullptr;
  }

  // Statistics for tests: live allocations, frees waiting for every rank, allocations released.
  std::vector<int64_t> stats() {
    std::lock_guard<std::mutex> lk(mu_);
    size_t pending = pending_.size();
    for (const auto& [g, p] : group_pending_) pending += p.size();
    return {static_cast<int64_t>(blocks_.size()), static_cast<int64_t>(pending), released_};
  }

 private:
  std::shared_ptr<Block> find_locked(void* ptr) {
    auto p = reinterpret_cast<uintptr_t>(ptr);
    auto it = blocks_.upper_bound(p);
    if (it == blocks_.begin()) return nullptr;
    --it;
    const auto& b = it->second;
    const uintptr_t base = reinterpret_cast<uintptr_t>(b->base);
    // A pointer inside [base, base + size) belongs to it; the base itself always does (size 0).
    if (p == base || p < base + b->size) return b;
    return nullptr;
  }
  void release_agreed_frees();
  void release_group_frees(const std::string& name, GroupRanks& g);

  c10::DeviceType dev_;
  std::mutex mu_;
  std::map<uintptr_t, std::shared_ptr<Block>> blocks_;
  std::set<uintptr_t> pending_;  // world allocations freed by torch here, not yet released everywhere
  // Allocations on a group, freed by torch here, by the group entry they were made on.
  std::map<std::shared_ptr<GroupRanks>, std::set<uintptr_t>> group_pending_;
  uint64_t alloc_seq_ = 0;  // world allocations so far
  int64_t released_ = 0;
  std::map<std::pair<uintptr_t, std::string>, std::shared_ptr<PeerInfo>> peers_;
};

class XpSymmetricMemory : public sm::SymmetricMemory {
 public:
  XpSymmetricMemory(std::shared_ptr<PeerInfo> info, size_t offset) : info_(std::move(info)), offset_(offset) {}

  std::vector<void*> get_buffer_ptrs() override { return info_->buffers; }
  std::vector<void*> get_signal_pad_ptrs() override { return info_->pads; }
  void** get_buffer_ptrs_dev() override { return static_cast<void**>(info_->buffers_dev.data_ptr()); }
  void** get_signal_pad_ptrs_dev() override { return static_cast<void**>(info_->pads_dev.data_ptr()); }
  size_t get_buffer_size() override { return info_->block->size; }
  size_t get_offset() override { return offset_; }
  bool has_multicast_support() override { return false; }
  void* get_multicast_ptr() override { return nullptr; }
  int get_rank() override { return info_->rank; }
  int get_world_size() override { return info_->world; }
  c10::Device get_device() override { return info_->block->device; }
  const std::vector<int>& get_rank_to_global_rank() override { return info_->r2g; }
  int* get_rank_to_global_rank_dev() override { return static_cast<int*>(info_->r2g_dev.data_ptr()); }
  bool world_within_direct_access() override { return info_->direct; }

  // On XPU devices (the ops' device path) the pad operations are one kernel (xpo_pad) on the current stream, as
  // upstream's CUDA kernels are; on CPU, and on XPU without the device path, the host protocol below.
  void barrier(int channel, size_t timeout_ms) override {
    check_channel(channel);
    if (pad_on_device()) return pad_kernel(1, 0, channel, "barrier");
    sync_device(get_device());
    check_rc(xpushmem_quiet(), "xpushmem_quiet");
    const auto deadline = deadline_of(timeout_ms);
    for (int r = 0; r < info_->world; ++r) signal_peer(r, channel, timeout_ms, deadline, "barrier");
    for (int r = 0; r < info_->world; ++r) await_peer(r, channel, timeout_ms, deadline, "barrier");
  }

  void put_signal(int dst_rank, int channel, size_t timeout_ms) override {
    sm::check_rank(dst_rank, info_->world);
    check_channel(channel);
    if (pad_on_device()) return pad_kernel(2, dst_rank, channel, "put_signal");
    sync_device(get_device());
    check_rc(xpushmem_quiet(), "xpushmem_quiet");  // release: earlier puts complete before the signal
    signal_peer(dst_rank, channel, timeout_ms, deadline_of(timeout_ms), "put_signal");
  }

  void wait_signal(int src_rank, int channel, size_t timeout_ms) override {
    sm::check_rank(src_rank, info_->world);
    check_channel(channel);
    if (pad_on_device()) return pad_kernel(3, src_rank, channel, "wait_signal");
    sync_device(get_device());
    await_peer(src_rank, channel, timeout_ms, deadline_of(timeout_ms), "wait_signal");
  }

 private:
  using Clock = std::chrono::steady_clock;

  // Whether the pad operations run as the xpo_pad kernel: an XPU device, the ops' device path, the entry points
  // exported. The kernel's waits are bounded by XPUSHMEM_TIMEOUT_MS (the device library's bound), not timeout_ms.
  bool pad_on_device() const {
    return info_->block->device.type() == c10::DeviceType::XPU && xpushmem_ops_path != nullptr &&
           &xpushmem_ops_signal_pad != nullptr && &xpushmem_ops_signal_pad_on_queue != nullptr &&
           xpushmem_ops_path() == 1;
  }
  void pad_kernel(int32_t mode, int32_t rank, int32_t channel, const char* what);

  size_t limit_ms(size_t timeout_ms) const { return timeout_ms ? timeout_ms : default_timeout_ms(); }
  std::optional<Clock::time_point> deadline_of(size_t timeout_ms) const {
    const size_t ms = limit_ms(timeout_ms);
    if (ms == 0) return std::nullopt;
    return Clock::now() + std::chrono::milliseconds(ms);
  }

  void check_channel(int channel) const {
    const size_t max_channel = info_->block->pad_size / sizeof(uint32_t) / static_cast<size_t>(info_->world);
    TORCH_CHECK(channel >= 0 && static_cast<size_t>(channel) < max_channel, "channel ", channel,
                " exceeds the maximum supported channel: channels must be in [0, ", max_channel,
                ") for a signal pad of ", info_->block->pad_size, " bytes and world size ", info_->world);
  }

  // The address (on this PE) of the signal word `slot` of the pad; the runtime addresses the peer's copy.
  uint32_t* slot_addr(size_t slot) const {
    auto* pad = static_cast<char*>(info_->block->base) + info_->block->pad_off;
    return reinterpret_cast<uint32_t*>(pad) + slot;
  }

  // Atomically move the word `slot` of PE `pe` from `from` to `to`, retrying until it holds `from`: the runtime's
  // wait (its back-off, its lost-peer check), bounded by what is left of `deadline` (none: no limit). Fails like
  // every other wait of the runtime, with XPUSHMEM_ERROR_TIMEOUT or XPUSHMEM_ERROR_PEER_LOST.
  void cas_until(size_t slot, int pe, uint32_t from, uint32_t to, size_t timeout_ms,
                 const std::optional<Clock::time_point>& deadline, const char* what, int peer_rank,
                 int channel) {
    uint64_t left_ms = 0;  // 0: the runtime's XPUSHMEM_TIMEOUT_MS, which is this wait's limit without a deadline
    if (deadline) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now()).count();
      left_ms = left > 0 ? static_cast<uint64_t>(left) : 1;  // past the deadline: one last bounded try
    }
    const int rc = xpushmemx_uint32_atomic_compare_swap_until(slot_addr(slot), from, to, pe, left_ms);
    TORCH_CHECK(rc == XPUSHMEM_SUCCESS, "xpushmem: ", what, " failed (", xpushmemx_error_name(rc), ", limit ",
                limit_ms(timeout_ms), " ms; rank ", info_->rank, ", peer rank ", peer_rank, ", channel ", channel,
                ", group ", info_->group, "): ", last_error());
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }

  // Signal rank `r`: its word [channel * W + my rank] goes 0 -> 1 (waits while a previous signal is unconsumed).
  void signal_peer(int r, int channel, size_t timeout_ms, const std::optional<Clock::time_point>& deadline,
                   const char* what) {
    const size_t slot = static_cast<size_t>(channel) * info_->world + info_->rank;
    cas_until(slot, info_->r2g[r], 0, 1, timeout_ms, deadline, what, r, channel);
  }

  // Consume rank `r`'s signal: my word [channel * W + r] goes 1 -> 0.
  void await_peer(int r, int channel, size_t timeout_ms, const std::optional<Clock::time_point>& deadline,
                  const char* what) {
    const size_t slot = static_cast<size_t>(channel) * info_->world + r;
    cas_until(slot, info_->r2g[info_->rank], 1, 0, timeout_ms, deadline, what, r, channel);
  }

  std::shared_ptr<PeerInfo> info_;
  size_t offset_;
};

// Without a group (or on the default group "0") an allocation is collective over the world; with a group name it is
// collective over that group's ranks only (the other ranks never call): a team-scoped allocation on the team of the
// group's ranks, at an address symmetric among them.
void* XpAllocator::alloc(size_t size, int device_idx, const std::optional<std::string>& group_name) {
  const std::string group = group_name.value_or("0");
  ensure_runtime(dev_, device_idx);
  std::shared_ptr<GroupRanks> g;
  int32_t team = -1;
  if (group != "0") {
    g = group_ranks(group);       // collective over the group the first time
    team = group_team(group, *g);  // the same
  }
  std::lock_guard<std::mutex> lk(mu_);
  if (g) {
    release_group_frees(group, *g);
  } else {
    release_agreed_frees();
  }
  const size_t pad_size = sm::get_signal_pad_size();
  const size_t pad_off = round_up(size, kAlign);
  void* base = g ? xpushmem_team_align(team, kAlign, pad_off + pad_size) : xpushmem_align(kAlign, pad_off + pad_size);
  TORCH_CHECK(base != nullptr, "xpushmem: symmetric allocation of ", size, " bytes (+", pad_size,
              " bytes of signal pad) on ", g ? "process group '" + group + "' (PEs [" + g->pes() + "])" : "the world",
              " failed: ", last_error());
  // The signal pad starts zeroed (it may reuse memory of a freed allocation), on every rank before any rank can
  // signal into it: zero, then a barrier (a peer may rendezvous and signal as soon as its alloc returns).
  std::vector<uint8_t> zeros(pad_size, 0);
  check_rc(xpushmem_putmem(static_cast<char*>(base) + pad_off, zeros.data(), pad_size, my_pe()),
           "xpushmem_putmem (zeroing the signal pad)");
  check_rc(xpushmem_quiet(), "xpushmem_quiet");
  if (g) {
    check_rc(xpushmem_barrier(team), "xpushmem_barrier (the group's team)");
  } else {
    check_rc(xpushmem_barrier_all(), "xpushmem_barrier_all");
  }
  auto b = std::make_shared<Block>();
  b->base = base;
  b->size = size;
  b->pad_off = pad_off;
  b->pad_size = pad_size;
  b->device = dev_ == c10::DeviceType::CPU ? c10::Device(dev_)
                                           : c10::Device(dev_, static_cast<c10::DeviceIndex>(device_idx));
  b->group = group;
  b->granks = g;
  blocks_[reinterpret_cast<uintptr_t>(base)] = b;
  if (g) {
    ++g->alloc_seq;
  } else {
    ++alloc_seq_;
  }
  return base;
}

// torch frees a tensor whenever its last reference dies, at different moments on different ranks, while
// xpushmem_free is collective. So free() only records the block; at the next (collective) alloc, the ranks agree
// over the default group's store on the blocks every rank has freed and release exactly those, in address order.
void XpAllocator::free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lk(mu_);
  auto it = blocks_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == blocks_.end()) return;
  for (auto p = peers_.begin(); p != peers_.end();) {
    p = (p->first.first == it->first) ? peers_.erase(p) : std::next(p);
  }
  if (it->second->granks) {
    group_pending_[it->second->granks].insert(it->first);
  } else {
    pending_.insert(it->first);
  }
  blocks_.erase(it);
}

// release_agreed_frees() for the allocations on group `name` (entry `g`): at the next allocation on the group, its
// ranks agree over the group's exchange on the blocks every rank has freed and release exactly those on the group's
// team, in address order. Blocks of an earlier group object of a recycled name stay (their group is gone).
void XpAllocator::release_group_frees(const std::string& name, GroupRanks& g) {
  std::shared_ptr<GroupRanks> key;
  for (auto& [k, v] : group_pending_) {
    if (k.get() == &g) key = k;
  }
  std::set<uint64_t> mine_set;
  const uintptr_t heap = reinterpret_cast<uintptr_t>(xpushmemx_heap_base());
  if (key) {
    for (auto p : group_pending_[key]) mine_set.insert(p - heap);
  }
  std::set<uint64_t> agreed = mine_set;
  if (g.global.size() > 1) {
    std::vector<uint8_t> mine(mine_set.size() * sizeof(uint64_t));
    size_t i = 0;
    for (auto off : mine_set) std::memcpy(mine.data() + i++ * sizeof(uint64_t), &off, sizeof(uint64_t));
    const std::string prefix = "xpushmem/torch/gfree/" + std::string(c10::DeviceTypeName(dev_)) + "/" +
                               std::to_string(g.alloc_seq) + "/";
    auto all = exchange(resolve_group(name), name, prefix, mine);
    for (const auto& rec : all) {
      std::set<uint64_t> theirs;
      for (size_t k = 0; k + sizeof(uint64_t) <= rec.size(); k += sizeof(uint64_t)) {
        uint64_t off;
        std::memcpy(&off, rec.data() + k, sizeof(uint64_t));
        theirs.insert(off);
      }
      std::set<uint64_t> both;
      std::set_intersection(agreed.begin(), agreed.end(), theirs.begin(), theirs.end(),
                            std::inserter(both, both.begin()));
      agreed = std::move(both);
    }
  }
  for (uint64_t off : agreed) {
    check_rc(xpushmem_team_free(g.team, reinterpret_cast<void*>(heap + off)), "xpushmem_team_free");
    group_pending_[key].erase(heap + off);
    ++released_;
  }
  if (key && group_pending_[key].empty()) group_pending_.erase(key);
}

void XpAllocator::release_agreed_frees() {
  const bool alone = !c10d::is_process_group_registered("0");  // a world of one (ensure_runtime)
  auto pg = alone ? c10::intrusive_ptr<c10d::ProcessGroup>() : resolve_group("0");
  if (alone || pg->getSize() == 1) {
    for (auto p : pending_) check_rc(xpushmem_free(reinterpret_cast<void*>(p)), "xpushmem_free");
    released_ += static_cast<int64_t>(pending_.size());
    pending_.clear();
    return;
  }
  auto store = pg->getStore();
  const int rank = pg->getRank();
  const int size = pg->getSize();
  const std::string prefix = "xpushmem/torch/free/" + std::string(c10::DeviceTypeName(dev_)) + "/" +
                             std::to_string(alloc_seq_) + "/";
  std::vector<uint8_t> mine(pending_.size() * sizeof(uint64_t));
  size_t i = 0;
  for (auto p : pending_) {
    uint64_t off = p - reinterpret_cast<uintptr_t>(xpushmemx_heap_base());
    std::memcpy(mine.data() + i++ * sizeof(uint64_t), &off, sizeof(uint64_t));
  }
  store->set(prefix + std::to_string(rank), mine);
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(prefix + std::to_string(r));
  auto all = store->multiGet(keys);
  std::set<uint64_t> agreed;
  for (int r = 0; r < size; ++r) {
    std::set<uint64_t> theirs;
    for (size_t k = 0; k + sizeof(uint64_t) <= all[r].size(); k += sizeof(uint64_t)) {
      uint64_t off;
      std::memcpy(&off, all[r].data() + k, sizeof(uint64_t));
      theirs.insert(off);
    }
    if (r == 0) {
      agreed = std::move(theirs);
    } else {
      std::set<uint64_t> both;
      std::set_intersection(agreed.begin(), agreed.end(), theirs.begin(), theirs.end(),
                            std::inserter(both, both.begin()));
      agreed = std::move(both);
    }
  }
  const uintptr_t heap = reinterpret_cast<uintptr_t>(xpushmemx_heap_base());
  for (uint64_t off : agreed) {
    check_rc(xpushmem_free(reinterpret_cast<void*>(heap + off)), "xpushmem_free");
    pending_.erase(heap + off);
    ++released_;
  }
}

size_t XpAllocator::get_alloc_size(void* ptr) {
  std::lock_guard<std::mutex> lk(mu_);
  auto b = find_locked(ptr);
  TORCH_CHECK(b, "xpushmem: ", ptr, " is not a symmetric allocation of the ", kBackendName, " (xpushmem) ",
              c10::DeviceTypeName(dev_), " allocator");
  return b->size;
}

at::Tensor device_array(const std::vector<int64_t>& v, c10::ScalarType t, const c10::Device& d) {
  auto host = at::tensor(v, at::TensorOptions().dtype(at::kLong)).to(t);
  return d.type() == c10::DeviceType::CPU ? host : host.to(d);
}

c10::intrusive_ptr<sm::SymmetricMemory> XpAllocator::rendezvous(void* ptr,
                                                                const std::optional<std::string>& group_name) {
  std::string group;
  std::shared_ptr<Block> b;
  {
    std::lock_guard<std::mutex> lk(mu_);
    b = find_locked(ptr);
    // Not a symmetric allocation: no handle (None in Python), as upstream's allocators answer. has_allocation()
    // (is_symm_mem_tensor) asks the same find_locked, so the two agree on what counts.
    if (!b) return nullptr;
    // No group: the one the allocation was made on (upstream's rendezvous takes the allocation's group_name).
    group = group_name.value_or(b->group);
    auto it = peers_.find({reinterpret_cast<uintptr_t>(b->base), group});
    // A handle made on an earlier group object of a recycled name is not this group's.
    const bool current = it != peers_.end() &&
                         (!it->second->granks->pg || (c10d::is_process_group_registered(group) &&
                                                      it->second->granks->is(resolve_group(group))));
    if (current) {
      return c10::make_intrusive<XpSymmetricMemory>(it->second, static_cast<char*>(ptr) -
                                                                     static_cast<char*>(b->base));
    }
  }
  auto g = group_ranks(group);  // collective over the group the first time
  if (b->granks) {
    // An allocation on a group lives on that group's ranks only: a rendezvous group must be among them.
    for (int pe : g->global) {
      TORCH_CHECK(std::find(b->granks->global.begin(), b->granks->global.end(), pe) != b->granks->global.end(),
                  "xpushmem: rendezvous on process group '", group, "' of an allocation made on process group '",
                  b->group, "' (PEs [", b->granks->pes(), "]): PE ", pe, " of group '", group,
                  "' has no copy of it (an allocation on a group lives on that group's ranks only)");
    }
  }
  rendezvous_sync(group, *g);  // collective every time, like NVSHMEM's per-allocation exchange
  auto info = std::make_shared<PeerInfo>();
  info->block = b;
  info->group = group;
  info->granks = g;
  info->rank = g->rank;
  info->world = static_cast<int>(g->global.size());
  info->r2g = g->global;
  std::vector<int64_t> bufs, pads, r2g;
  for (int r = 0; r < info->world; ++r) {
    void* p = xpushmem_ptr(b->base, g->global[r]);
    void* s = xpushmem_ptr(static_cast<char*>(b->base) + b->pad_off, g->global[r]);
    info->direct = info->direct && p != nullptr && s != nullptr;
    info->buffers.push_back(p);
    info->pads.push_back(s);
    bufs.push_back(reinterpret_cast<int64_t>(p));
    pads.push_back(reinterpret_cast<int64_t>(s));
    r2g.push_back(g->global[r]);
  }
  info->buffers_dev = device_array(bufs, at::kLong, b->device);
  info->pads_dev = device_array(pads, at::kLong, b->device);
  info->r2g_dev = device_array(r2g, at::kInt, b->device);
  {
    std::lock_guard<std::mutex> lk(mu_);
    peers_[{reinterpret_cast<uintptr_t>(b->base), group}] = info;
  }
  return c10::make_intrusive<XpSymmetricMemory>(info, static_cast<char*>(ptr) - static_cast<char*>(b->base));
}

c10::intrusive_ptr<XpAllocator>& allocator_for(c10::DeviceType dev) {
  static auto* cpu = new c10::intrusive_ptr<XpAllocator>(c10::make_intrusive<XpAllocator>(c10::DeviceType::CPU));
  static auto* xpu = new c10::intrusive_ptr<XpAllocator>(c10::make_intrusive<XpAllocator>(c10::DeviceType::XPU));
  return dev == c10::DeviceType::CPU ? *cpu : *xpu;
}

// -------------------------------------------------------------------------------------------- op kernels ----
// Which xpushmem-ops symbols libxpushmem.so lacks (empty: all present).
std::vector<std::string> missing_ops_symbols() {
  std::vector<std::string> missing;
#define XPUSHMEM_CHECK_SYM(s) \
  if (&s == nullptr) missing.push_back(#s);
  XPUSHMEM_CHECK_SYM(xpushmem_ops_last_error)
  XPUSHMEM_CHECK_SYM(xpushmem_ops_all_to_all_vdev)
  XPUSHMEM_CHECK_SYM(xpushmem_ops_all_to_all_vdev_2d)
  XPUSHMEM_CHECK_SYM(xpushmem_ops_all_to_all_vdev_2d_offset)
  XPUSHMEM_CHECK_SYM(xpushmem_ops_nvshmem_all_to_all)
  XPUSHMEM_CHECK_SYM(xpushmem_ops_tile_reduce)
  XPUSHMEM_CHECK_SYM(xpushmem_ops_multi_root_tile_reduce)
  XPUSHMEM_CHECK_SYM(xpushmem_ops_nvshmem_broadcast)
  XPUSHMEM_CHECK_SYM(xpushmem_ops_nvshmem_put)
  XPUSHMEM_CHECK_SYM(xpushmem_ops_nvshmem_get)
  XPUSHMEM_CHECK_SYM(xpushmem_ops_nvshmem_put_with_signal)
  XPUSHMEM_CHECK_SYM(xpushmem_ops_nvshmem_wait_for_signal)
  XPUSHMEM_CHECK_SYM(xpushmem_ops_one_shot_all_reduce)
  XPUSHMEM_CHECK_SYM(xpushmem_ops_two_shot_all_reduce)
  XPUSHMEM_CHECK_SYM(xpushmem_ops_reduce_scatter_out)
  XPUSHMEM_CHECK_SYM(xpushmem_ops_memset32)
  XPUSHMEM_CHECK_SYM(xpushmem_ops_stream_write_value32)
  XPUSHMEM_CHECK_SYM(xpushmem_ops_one_shot_all_reduce_on_queue)
  XPUSHMEM_CHECK_SYM(xpushmem_ops_two_shot_all_reduce_on_queue)
  XPUSHMEM_CHECK_SYM(xpushmem_ops_reduce_scatter_out_on_queue)
  XPUSHMEM_CHECK_SYM(xpushmem_ops_memset32_on_queue)
  XPUSHMEM_CHECK_SYM(xpushmem_ops_stream_write_value32_on_queue)
#undef XPUSHMEM_CHECK_SYM
  return missing;
}

template <typename F>
F* require_op(F* fn, const char* name) {
  TORCH_CHECK(fn != nullptr, "xpushmem: ", name, " is not exported by libxpushmem.so (the xpushmem-ops C ABI ",
              "is not linked into it; check with `nm -D libxpushmem.so | grep xpushmem_ops_`)");
  return fn;
}
#define XPUSHMEM_OP(name) require_op(&name, #name)

void check_ops_rc(int rc, const char* what) {
  if (rc == 0) return;
  const char* m = xpushmem_ops_last_error ? xpushmem_ops_last_error() : nullptr;
  TORCH_CHECK(false, (m && *m) ? std::string(m) : std::string(what) + " failed with code " + std::to_string(rc));
}

int32_t dtype_code(c10::ScalarType t, const char* arg) {
  switch (t) {
    case at::kFloat: return 0;
    case at::kHalf: return 1;
    case at::kBFloat16: return 2;
    case at::kDouble: return 3;
    case at::kChar: return 4;
    case at::kByte: return 5;
    case at::kShort: return 6;
    case at::kInt: return 7;
    case at::kLong: return 8;
    // Unsigned and boolean types move like the signed type of their width (data movement, signal pads).
    case at::kBool: return 5;
    case at::kUInt16: return 6;
    case at::kUInt32: return 7;
    case at::kUInt64: return 8;
    default:
      TORCH_CHECK(false, "xpushmem: ", arg, " has dtype ", t, ", which the xpushmem ops do not support");
  }
}

// A tensor as the ops C ABI takes it; owns the size/stride arrays.
struct OpsTensor {
  std::vector<int64_t> sizes, strides;
  xpushmem_ops_tensor t{};
  OpsTensor(const at::Tensor& x, const char* arg) : OpsTensor(x, dtype_code(x.scalar_type(), arg)) {}
  // With the ops dtype code given (e.g. fp8 payloads moved as bytes).
  OpsTensor(const at::Tensor& x, int32_t dtype) {
    sizes = x.sizes().vec();
    strides = x.strides().vec();
    t.data = x.numel() ? x.data_ptr() : nullptr;
    t.dtype = dtype;
    t.ndim = static_cast<int32_t>(x.dim());
    t.sizes = sizes.data();
    t.strides = strides.data();
  }
  const xpushmem_ops_tensor* get() const { return &t; }
};

void check_device(const at::Tensor& t, const char* op, const char* arg) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::CPU || t.device().type() == c10::DeviceType::XPU, op, ": ",
              arg, " is on ", t.device(), "; the xpushmem kernels serve CPU and XPU tensors");
}

// Group -> its global PEs (group-rank order).
std::vector<int32_t> group_pes(const std::string& group_name) {
  auto g = group_ranks(group_name);
  return std::vector<int32_t>(g->global.begin(), g->global.end());
}

void prepare(const at::Tensor& t) {
  ensure_runtime(t.device().type(), t.device().has_index() ? t.device().index() : 0);
  sync_device(t.device());
}

// Start the runtime for `t`'s device (no stream synchronisation: run_op decides).
void ensure_rt(const at::Tensor& t) {
  ensure_runtime(t.device().type(), t.device().has_index() ? t.device().index() : 0);
}

// The Level Zero command list behind the current XPU stream of `device`, or nullptr when there is none to append to
// (CPU tensors, a torch without XPU/SYCL headers, a SYCL queue on a regular Level Zero command queue rather than an
// immediate command list, or a SYCL context other than the runtime's: the op kernels are built in the runtime's;
// ensure_runtime starts the runtime on torch's context, so this holds unless the runtime was started outside
// torch). UNVERIFIED on hardware (no PyPI torch has XPU; see docs/HARDWARE.md): for an in-order
// queue on immediate command lists, sycl::get_native returns the list SYCL itself appends to, so work appended here
// is ordered with the stream's kernels before and after it.
void* current_stream_list(const c10::Device& device) {
#if defined(XPUSHMEM_TORCH_WITH_XPU)
  if (device.type() != c10::DeviceType::XPU) return nullptr;
  sycl::queue& q = c10::xpu::getCurrentXPUStream(device.index()).queue();
  // Our kernels live in the runtime's Level Zero context: only a list of that same context can take them.
  void *driver = nullptr, *dev = nullptr, *ctx = nullptr;
  if (xpushmemx_ze_get_handles(&driver, &dev, &ctx) != 0) return nullptr;
  auto sycl_ctx = sycl::get_native<sycl::backend::ext_oneapi_level_zero>(q.get_context());
  if (static_cast<void*>(sycl_ctx) != ctx) return nullptr;
  auto native = sycl::get_native<sycl::backend::ext_oneapi_level_zero>(q);
  if (auto* list = std::get_if<ze_command_list_handle_t>(&native)) return static_cast<void*>(*list);
  return nullptr;
#else
  (void)device;
  return nullptr;
#endif
}

// Whether the ops take the device path: the op family's (xpushmem_ops_path), or with `ep` the EP ops'
// (xpushmem_ops_ep_path, which a library older than it lacks: then the op family's).
bool device_path_on(bool ep) {
  if (ep && xpushmem_ops_ep_path != nullptr) return xpushmem_ops_ep_path() == 1;
  return xpushmem_ops_path != nullptr && xpushmem_ops_path() == 1;
}

// The current stream's Level Zero list for an op on the device path (an XPU tensor, XPUSHMEM_OPS_PATH resolving to
// device for the op family, or with `ep` for the EP ops; an immediate list behind the stream: current_stream_list),
// or nullptr. Before answering it raises an earlier queued op's error (as CUDA raises asynchronous errors at a later
// call). The one way every on-queue op of the shim (run_op_on, run_symm, the token switch's) finds its list.
void* device_path_list(const c10::Device& device, bool ep = false) {
  if (device.type() != c10::DeviceType::XPU || !device_path_on(ep) || xpushmem_ops_queue_poll == nullptr) {
    return nullptr;
  }
  check_ops_rc(xpushmem_ops_queue_poll(), "an earlier queued op");
  return current_stream_list(device);
}

// Run an op. On the device path (device_path_list) its kernel is appended to the current stream's list and the call
// returns without synchronising. Otherwise the stream is synchronised and the synchronous entry point runs (the host
// path, or the device path on the runtime's own queue).
template <typename Sync, typename OnQueue>
void run_op_on(const c10::Device& device, Sync sync_fn, OnQueue queue_fn, const char* what) {
  ensure_runtime(device.type(), device.has_index() ? device.index() : 0);
  void* list = device_path_list(device);
  if (list != nullptr) {
    check_ops_rc(queue_fn(list), what);
  } else {
    sync_device(device);
    check_ops_rc(sync_fn(), what);
  }
}

template <typename Sync, typename OnQueue>
void run_op(const at::Tensor& t, Sync sync_fn, OnQueue queue_fn, const char* what) {
  run_op_on(t.device(), sync_fn, queue_fn, what);
}

// The pad kernel on the current stream (or, without an immediate list behind it, on the runtime's own queue after
// synchronising the stream).
void XpSymmetricMemory::pad_kernel(int32_t mode, int32_t rank, int32_t channel, const char* what) {
  void* pad = static_cast<char*>(info_->block->base) + info_->block->pad_off;
  const auto pad_bytes = static_cast<int64_t>(info_->block->pad_size);
  const std::vector<int32_t> pes(info_->r2g.begin(), info_->r2g.end());
  run_op_on(
      info_->block->device,
      [&] { return xpushmem_ops_signal_pad(mode, pad, pad_bytes, channel, rank, pes.data(), info_->world); },
      [&](void* list) {
        return xpushmem_ops_signal_pad_on_queue(mode, pad, pad_bytes, channel, rank, pes.data(), info_->world,
                                                list);
      },
      what);
}

void nvshmem_put(at::Tensor& tensor, const int64_t peer) {
  check_device(tensor, "nvshmem_put", "tensor");
  TORCH_CHECK(tensor.is_contiguous(), "put op currently supports contiguous tensors only");
  ensure_rt(tensor);
  TORCH_CHECK(peer >= 0 && peer < runtime().n_pes, "peer must be smaller than world size (got peer ", peer,
              ", world size ", runtime().n_pes, ")");
  OpsTensor t(tensor, "tensor");
  run_op(
      tensor, [&] { return XPUSHMEM_OP(xpushmem_ops_nvshmem_put)(t.get(), peer); },
      [&](void* list) { return XPUSHMEM_OP(xpushmem_ops_nvshmem_put_on_queue)(t.get(), peer, list); },
      "xpushmem_ops_nvshmem_put");
}

void nvshmem_get(at::Tensor& tensor, const int64_t peer) {
  check_device(tensor, "nvshmem_get", "tensor");
  TORCH_CHECK(tensor.is_contiguous(), "get op currently supports contiguous tensors only");
  ensure_rt(tensor);
  TORCH_CHECK(peer >= 0 && peer < runtime().n_pes, "peer must be smaller than world size (got peer ", peer,
              ", world size ", runtime().n_pes, ")");
  OpsTensor t(tensor, "tensor");
  run_op(
      tensor, [&] { return XPUSHMEM_OP(xpushmem_ops_nvshmem_get)(t.get(), peer); },
      [&](void* list) { return XPUSHMEM_OP(xpushmem_ops_nvshmem_get_on_queue)(t.get(), peer, list); },
      "xpushmem_ops_nvshmem_get");
}

// nvshmem_get_out(Tensor(a!) dst, SymmetricMemory hdl, int offset, int size, int peer): boxed, because the
// TorchBind handle has no unboxed C++ signature to match. `peer` is group-relative.
void nvshmem_get_out_boxed(const c10::OperatorHandle& /*op*/, torch::jit::Stack* stack) {
  const int64_t peer = torch::jit::pop(*stack).toInt();
  const int64_t size = torch::jit::pop(*stack).toInt();
  const int64_t offset = torch::jit::pop(*stack).toInt();
  auto hdl = torch::jit::pop(*stack).toCustomClass<sm::SymmetricMemory>();
  at::Tensor dst = torch::jit::pop(*stack).toTensor();
  check_device(dst, "symm_mem.get", "dst");
  TORCH_CHECK(dst.device() == hdl->get_device(), "symm_mem.get: dst must be on the same device as hdl");
  TORCH_CHECK(dst.is_contiguous(), "symm_mem.get: dst must be contiguous");
  TORCH_CHECK(offset >= 0, "symm_mem.get: offset must be non-negative");
  TORCH_CHECK(size >= 0, "symm_mem.get: size must be non-negative");
  TORCH_CHECK(dst.numel() >= size, "symm_mem.get: dst has ", dst.numel(), " elements, fewer than size ", size);
  const int world = hdl->get_world_size();
  TORCH_CHECK(peer >= 0 && peer < world, "symm_mem.get: invalid peer ", peer, " (must be in [0, ", world, "))");
  const size_t esz = dst.element_size();
  const size_t hdl_off = hdl->get_offset();
  const size_t buf = hdl->get_buffer_size();
  TORCH_CHECK(hdl_off % esz == 0, "symm_mem.get: handle offset is not element-aligned");
  TORCH_CHECK(static_cast<size_t>(offset) * esz <= buf, "symm_mem.get: offset ", offset, " exceeds the buffer");
  const size_t start = hdl_off + static_cast<size_t>(offset) * esz;
  const size_t nbytes = static_cast<size_t>(size) * esz;
  TORCH_CHECK(start <= buf && nbytes <= buf - start, "symm_mem.get: requested range [", start, ", ",
              start + nbytes, ") exceeds the symmetric allocation of ", buf, " bytes");
  if (nbytes == 0) return;
  prepare(dst);
  const int global_peer = hdl->get_rank_to_global_rank().at(peer);
  void* local_base = hdl->get_buffer_ptrs().at(hdl->get_rank());
  TORCH_CHECK(local_base != nullptr, "symm_mem.get: the handle has no local buffer pointer");
  const void* src = static_cast<const char*>(local_base) + start;
  check_rc(xpushmem_getmem(dst.data_ptr(), src, nbytes, global_peer), "xpushmem_getmem");
}

at::Tensor nvshmem_broadcast(at::Tensor& input, const int64_t root, const std::string& group_name) {
  check_device(input, "nvshmem_broadcast", "input");
  ensure_rt(input);
  auto pes = group_pes(group_name);
  TORCH_CHECK(root >= 0 && root < static_cast<int64_t>(pes.size()), "root must be smaller than group size (got ",
              root, ", group size ", pes.size(), ")");
  OpsTensor t(input, "input");
  run_op(
      input, [&] { return XPUSHMEM_OP(xpushmem_ops_nvshmem_broadcast)(t.get(), root, pes.data(), pes.size()); },
      [&](void* list) { return XPUSHMEM_OP(xpushmem_ops_nvshmem_broadcast_on_queue)(t.get(), root, pes.data(), pes.size(), list); },
      "xpushmem_ops_nvshmem_broadcast");
  return input;
}

void nvshmem_put_with_signal(at::Tensor& tensor, at::Tensor& sigpad, int64_t signal, int64_t peer) {
  check_device(tensor, "nvshmem_put_with_signal", "tensor");
  ensure_rt(tensor);
  OpsTensor t(tensor, "tensor"), s(sigpad, "sigpad");
  run_op(
      tensor, [&] { return XPUSHMEM_OP(xpushmem_ops_nvshmem_put_with_signal)(t.get(), s.get(), signal, peer); },
      [&](void* list) { return XPUSHMEM_OP(xpushmem_ops_nvshmem_put_with_signal_on_queue)(t.get(), s.get(), signal, peer, list); },
      "xpushmem_ops_nvshmem_put_with_signal");
}

void nvshmem_wait_for_signal(at::Tensor& sigpad, int64_t signal, int64_t peer) {
  check_device(sigpad, "nvshmem_wait_for_signal", "sigpad");
  ensure_rt(sigpad);
  OpsTensor s(sigpad, "sigpad");
  run_op(
      sigpad, [&] { return XPUSHMEM_OP(xpushmem_ops_nvshmem_wait_for_signal)(s.get(), signal, peer); },
      [&](void* list) { return XPUSHMEM_OP(xpushmem_ops_nvshmem_wait_for_signal_on_queue)(s.get(), signal, peer, list); },
      "xpushmem_ops_nvshmem_wait_for_signal");
}

at::Tensor nvshmem_all_to_all(at::Tensor& input, at::Tensor& out, std::string group_name) {
  check_device(input, "nvshmem_all_to_all", "input");
  ensure_rt(input);
  auto pes = group_pes(group_name);
  OpsTensor i(input, "input"), o(out, "out");
  run_op(
      input, [&] { return XPUSHMEM_OP(xpushmem_ops_nvshmem_all_to_all)(i.get(), o.get(), pes.data(), pes.size()); },
      [&](void* list) { return XPUSHMEM_OP(xpushmem_ops_nvshmem_all_to_all_on_queue)(i.get(), o.get(), pes.data(), pes.size(), list); },
      "xpushmem_ops_nvshmem_all_to_all");
  return out;
}

void all_to_all_vdev(at::Tensor& input, at::Tensor& out, at::Tensor& in_splits, at::Tensor& out_splits_offsets,
                     std::string group_name) {
  check_device(input, "all_to_all_vdev", "input");
  TORCH_CHECK(input.device() == out.device(), "all_to_all_vdev: input and out must be on the same device");
  ensure_rt(input);
  auto pes = group_pes(group_name);
  OpsTensor i(input, "input"), o(out, "out"), s(in_splits, "in_splits"), so(out_splits_offsets, "out_splits_offsets");
  run_op(
      input, [&] { return XPUSHMEM_OP(xpushmem_ops_all_to_all_vdev)(i.get(), o.get(), s.get(), so.get(), pes.data(), pes.size()); },
      [&](void* list) { return XPUSHMEM_OP(xpushmem_ops_all_to_all_vdev_on_queue)(i.get(), o.get(), s.get(), so.get(), pes.data(), pes.size(), list); },
      "xpushmem_ops_all_to_all_vdev");
}

void all_to_all_vdev_2d(at::Tensor& input, at::Tensor& out, at::Tensor& in_splits, at::Tensor& out_splits_offsets,
                        std::string group_name, std::optional<int64_t> major_align) {
  check_device(input, "all_to_all_vdev_2d", "input");
  ensure_rt(input);
  auto pes = group_pes(group_name);
  OpsTensor i(input, "input"), o(out, "out"), s(in_splits, "in_splits"), so(out_splits_offsets, "out_splits_offsets");
  const int64_t align = major_align.value_or(1);
  run_op(
      input, [&] { return XPUSHMEM_OP(xpushmem_ops_all_to_all_vdev_2d)(i.get(), o.get(), s.get(), so.get(), pes.data(), pes.size(), major_align ? &align : nullptr); },
      [&](void* list) { return XPUSHMEM_OP(xpushmem_ops_all_to_all_vdev_2d_on_queue)(i.get(), o.get(), s.get(), so.get(), pes.data(), pes.size(), major_align ? &align : nullptr, list); },
      "xpushmem_ops_all_to_all_vdev_2d");
}

void all_to_all_vdev_2d_offset(at::Tensor& input, at::Tensor& out, at::Tensor& in_splits_offsets,
                               at::Tensor& out_splits_offsets, std::string group_name) {
  check_device(input, "all_to_all_vdev_2d_offset", "input");
  ensure_rt(input);
  auto pes = group_pes(group_name);
  OpsTensor i(input, "input"), o(out, "out"), s(in_splits_offsets, "in_splits_offsets"),
      so(out_splits_offsets, "out_splits_offsets");
  run_op(
      input, [&] { return XPUSHMEM_OP(xpushmem_ops_all_to_all_vdev_2d_offset)(i.get(), o.get(), s.get(), so.get(), pes.data(), pes.size()); },
      [&](void* list) { return XPUSHMEM_OP(xpushmem_ops_all_to_all_vdev_2d_offset_on_queue)(i.get(), o.get(), s.get(), so.get(), pes.data(), pes.size(), list); },
      "xpushmem_ops_all_to_all_vdev_2d_offset");
}

void tile_reduce(at::Tensor& in_tile, at::Tensor& out_tile, int64_t root, std::string group_name,
                 std::string reduce_op) {
  check_device(in_tile, "tile_reduce", "in_tile");
  ensure_rt(in_tile);
  auto pes = group_pes(group_name);
  OpsTensor i(in_tile, "in_tile"), o(out_tile, "out_tile");
  run_op(
      in_tile, [&] { return XPUSHMEM_OP(xpushmem_ops_tile_reduce)(i.get(), o.get(), root, pes.data(), pes.size(), reduce_op.c_str()); },
      [&](void* list) { return XPUSHMEM_OP(xpushmem_ops_tile_reduce_on_queue)(i.get(), o.get(), root, pes.data(), pes.size(), reduce_op.c_str(), list); },
      "xpushmem_ops_tile_reduce");
}

void multi_root_tile_reduce(c10::ArrayRef<at::Tensor> in_tiles, at::Tensor& out_tile, c10::ArrayRef<int64_t> roots,
                            std::string group_name, std::string reduce_op) {
  check_device(out_tile, "multi_root_tile_reduce", "out_tile");
  ensure_rt(out_tile);
  auto pes = group_pes(group_name);
  std::vector<OpsTensor> tiles;
  tiles.reserve(in_tiles.size());
  for (const auto& t : in_tiles) tiles.emplace_back(t, "in_tiles");
  std::vector<xpushmem_ops_tensor> descs;
  for (const auto& t : tiles) descs.push_back(t.t);
  OpsTensor o(out_tile, "out_tile");
  std::vector<int64_t> r(roots.begin(), roots.end());
  run_op(
      out_tile, [&] { return XPUSHMEM_OP(xpushmem_ops_multi_root_tile_reduce)(descs.data(), descs.size(), o.get(), r.data(), r.size(), pes.data(), pes.size(), reduce_op.c_str()); },
      [&](void* list) { return XPUSHMEM_OP(xpushmem_ops_multi_root_tile_reduce_on_queue)(descs.data(), descs.size(), o.get(), r.data(), r.size(), pes.data(), pes.size(), reduce_op.c_str(), list); },
      "xpushmem_ops_multi_root_tile_reduce");
}

// ------------------------------------------------------------------- symm_mem's collectives on XPU ----
// one_shot_all_reduce[_copy][_out], two_shot_all_reduce_[out], reduce_scatter_out, memset32_,
// stream_write_value32_ for XPU tensors: the device kernels of ops/device/symm_mem.cl, appended to the current
// stream's Level Zero list (run_op) by the xpushmem_ops_* C entry points, which make upstream's argument checks with
// upstream's messages. (CPU tensors: xpushmem/torch/_symm_ops.py, host code with the same checks.) Local tensors
// (out, local_input, a non-symmetric memset32_ target) are torch's own device memory, used in stream order.

// Like check_ops_rc, with AT_DISPATCH's exception type for upstream's "not implemented for" dtype errors.
void check_symm_rc(int rc, const char* what) {
  if (rc == 0) return;
  const char* m = xpushmem_ops_last_error ? xpushmem_ops_last_error() : nullptr;
  const std::string msg = (m && *m) ? std::string(m) : std::string(what) + " failed with code " + std::to_string(rc);
  TORCH_CHECK_NOT_IMPLEMENTED(msg.find("\" not implemented for '") == std::string::npos, msg);
  TORCH_CHECK(false, msg);
}

// run_op for the symm ops: their error type (check_symm_rc), and no host path behind the synchronous entry point.
template <typename Sync, typename OnQueue>
void run_symm(const at::Tensor& t, Sync sync_fn, OnQueue queue_fn, const char* what) {
  ensure_rt(t);
  TORCH_CHECK(t.device().type() == c10::DeviceType::XPU, what, ": the C++ symm kernels serve XPU tensors");
  void* list = device_path_list(t.device());
  if (list != nullptr) {
    check_symm_rc(queue_fn(list), what);
  } else {
    sync_device(t.device());
    check_symm_rc(sync_fn(), what);
  }
}

at::Tensor one_shot_out_impl(const at::Tensor& input, const at::Tensor* local_input, const std::string& reduce_op,
                             const std::string& group_name, at::Tensor out) {
  check_device(input, "one_shot_all_reduce", "input");
  ensure_rt(input);
  auto pes = group_pes(group_name);
  OpsTensor i(input, "input"), o(out, "out");
  std::optional<OpsTensor> l;
  if (local_input != nullptr) l.emplace(*local_input, "local_input");
  const xpushmem_ops_tensor* lp = l ? l->get() : nullptr;
  run_symm(
      input,
      [&] {
        return XPUSHMEM_OP(xpushmem_ops_one_shot_all_reduce)(i.get(), lp, reduce_op.c_str(), o.get(), pes.data(),
                                                             pes.size());
      },
      [&](void* list) {
        return XPUSHMEM_OP(xpushmem_ops_one_shot_all_reduce_on_queue)(i.get(), lp, reduce_op.c_str(), o.get(),
                                                                      pes.data(), pes.size(), list);
      },
      "xpushmem_ops_one_shot_all_reduce");
  return out;
}

at::Tensor one_shot_all_reduce_xpu(const at::Tensor& input, std::string reduce_op, std::string group_name) {
  return one_shot_out_impl(input, nullptr, reduce_op, group_name, at::empty_like(input));
}

at::Tensor one_shot_all_reduce_out_xpu(const at::Tensor& input, std::string reduce_op, std::string group_name,
                                       at::Tensor out) {
  return one_shot_out_impl(input, nullptr, reduce_op, group_name, out);
}

at::Tensor one_shot_all_reduce_copy_xpu(const at::Tensor& symm_buffer, const at::Tensor& local_input,
                                        std::string reduce_op, std::string group_name) {
  return one_shot_out_impl(symm_buffer, &local_input, reduce_op, group_name, at::empty_like(local_input));
}

at::Tensor one_shot_all_reduce_copy_out_xpu(const at::Tensor& symm_buffer, const at::Tensor& local_input,
                                            std::string reduce_op, std::string group_name, at::Tensor out) {
  return one_shot_out_impl(symm_buffer, &local_input, reduce_op, group_name, out);
}

at::Tensor two_shot_impl(at::Tensor input, const at::Tensor* output, const std::string& reduce_op,
                         const std::string& group_name) {
  check_device(input, "two_shot_all_reduce", "input");
  ensure_rt(input);
  auto pes = group_pes(group_name);
  OpsTensor i(input, "input");
  std::optional<OpsTensor> o;
  if (output != nullptr) o.emplace(*output, "output");
  const xpushmem_ops_tensor* op = o ? o->get() : nullptr;
  run_symm(
      input,
      [&] {
        return XPUSHMEM_OP(xpushmem_ops_two_shot_all_reduce)(i.get(), op, reduce_op.c_str(), pes.data(), pes.size());
      },
      [&](void* list) {
        return XPUSHMEM_OP(xpushmem_ops_two_shot_all_reduce_on_queue)(i.get(), op, reduce_op.c_str(), pes.data(),
                                                                      pes.size(), list);
      },
      "xpushmem_ops_two_shot_all_reduce");
  return output != nullptr ? *output : input;
}

at::Tensor two_shot_all_reduce_xpu(at::Tensor input, std::string reduce_op, std::string group_name) {
  return two_shot_impl(input, nullptr, reduce_op, group_name);
}

at::Tensor two_shot_all_reduce_out_xpu(at::Tensor input, std::string reduce_op, std::string group_name,
                                       at::Tensor output) {
  return two_shot_impl(input, &output, reduce_op, group_name);
}

at::Tensor reduce_scatter_out_xpu(at::Tensor input, std::string group_name, bool split_last_dim,
                                  at::Tensor output) {
  check_device(input, "reduce_scatter", "input");
  ensure_rt(input);
  auto pes = group_pes(group_name);
  OpsTensor i(input, "input"), o(output, "output");
  const int32_t split = split_last_dim ? 1 : 0;
  run_symm(
      input,
      [&] {
        return XPUSHMEM_OP(xpushmem_ops_reduce_scatter_out)(i.get(), split, o.get(), pes.data(), pes.size());
      },
      [&](void* list) {
        return XPUSHMEM_OP(xpushmem_ops_reduce_scatter_out_on_queue)(i.get(), split, o.get(), pes.data(), pes.size(),
                                                                     list);
      },
      "xpushmem_ops_reduce_scatter_out");
  return output;
}

// The C ABI has no uint32 code: upstream's uint32 check here, the rest (flat, contiguous, offsets, val) there.
void check_flat_u32(const at::Tensor& input, const char* op) {
  TORCH_CHECK(input.dim() == 1 && input.is_contiguous() && input.scalar_type() == c10::ScalarType::UInt32,
              "symm_mem::", op, ": input must be a flat, contiguous uint32 tensor.");
}

at::Tensor memset32_xpu(at::Tensor& input, int64_t offset, int64_t val, int64_t count) {
  check_flat_u32(input, "memset32_");
  OpsTensor i(input, "input");
  run_symm(
      input, [&] { return XPUSHMEM_OP(xpushmem_ops_memset32)(i.get(), offset, val, count); },
      [&](void* list) { return XPUSHMEM_OP(xpushmem_ops_memset32_on_queue)(i.get(), offset, val, count, list); },
      "xpushmem_ops_memset32");
  return input;
}

at::Tensor stream_write_value32_xpu(at::Tensor& input, int64_t offset, int64_t val) {
  check_flat_u32(input, "stream_write_value32_");
  OpsTensor i(input, "input");
  run_symm(
      input, [&] { return XPUSHMEM_OP(xpushmem_ops_stream_write_value32)(i.get(), offset, val); },
      [&](void* list) { return XPUSHMEM_OP(xpushmem_ops_stream_write_value32_on_queue)(i.get(), offset, val, list); },
      "xpushmem_ops_stream_write_value32");
  return input;
}

// The symm ops this file registers for XPU (xpushmem/torch/_symm_ops.py registers the others, and all of them for
// CPU): names as torch's schemas have them.
const std::vector<std::string>& symm_device_ops() {
  static const auto* v = new std::vector<std::string>{
      "one_shot_all_reduce", "one_shot_all_reduce_out", "one_shot_all_reduce_copy", "one_shot_all_reduce_copy_out",
      "two_shot_all_reduce_", "two_shot_all_reduce_out", "reduce_scatter_out",    "memset32_",
      "stream_write_value32_"};
  return *v;
}

bool has_op(const char* name);

void register_symm_kernels(torch::Library& lib) {
  auto has = [](const char* n) { return has_op((std::string("symm_mem::") + n).c_str()); };
  if (has("one_shot_all_reduce")) lib.impl("one_shot_all_reduce", TORCH_FN(one_shot_all_reduce_xpu));
  if (has("one_shot_all_reduce_out")) lib.impl("one_shot_all_reduce_out", TORCH_FN(one_shot_all_reduce_out_xpu));
  if (has("one_shot_all_reduce_copy")) lib.impl("one_shot_all_reduce_copy", TORCH_FN(one_shot_all_reduce_copy_xpu));
  if (has("one_shot_all_reduce_copy_out")) {
    lib.impl("one_shot_all_reduce_copy_out", TORCH_FN(one_shot_all_reduce_copy_out_xpu));
  }
  if (has("two_shot_all_reduce_")) lib.impl("two_shot_all_reduce_", TORCH_FN(two_shot_all_reduce_xpu));
  if (has("two_shot_all_reduce_out")) lib.impl("two_shot_all_reduce_out", TORCH_FN(two_shot_all_reduce_out_xpu));
  if (has("reduce_scatter_out")) lib.impl("reduce_scatter_out", TORCH_FN(reduce_scatter_out_xpu));
  if (has("memset32_")) lib.impl("memset32_", TORCH_FN(memset32_xpu));
  if (has("stream_write_value32_")) lib.impl("stream_write_value32_", TORCH_FN(stream_write_value32_xpu));
}

// ------------------------------------------------------------------------------------------ registration ----
std::mutex g_install_mu;
std::vector<std::unique_ptr<torch::Library>>& libraries() {
  static auto* v = new std::vector<std::unique_ptr<torch::Library>>();
  return *v;
}
std::set<std::string>& installed_keys() {
  static auto* s = new std::set<std::string>();
  return *s;
}

bool has_op(const char* name) {
  return c10::Dispatcher::singleton().findSchema({name, ""}).has_value();
}

void register_kernels(c10::DispatchKey key) {
  auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, "symm_mem", key, __FILE__, __LINE__);
  lib->impl("nvshmem_put", TORCH_FN(nvshmem_put));
  lib->impl("nvshmem_get", TORCH_FN(nvshmem_get));
  lib->impl("nvshmem_get_out", torch::CppFunction::makeFromBoxedFunction<&nvshmem_get_out_boxed>());
  lib->impl("nvshmem_broadcast", TORCH_FN(nvshmem_broadcast));
  lib->impl("nvshmem_put_with_signal", TORCH_FN(nvshmem_put_with_signal));
  lib->impl("nvshmem_wait_for_signal", TORCH_FN(nvshmem_wait_for_signal));
  lib->impl("nvshmem_all_to_all", TORCH_FN(nvshmem_all_to_all));
  lib->impl("all_to_all_vdev", TORCH_FN(all_to_all_vdev));
  lib->impl("all_to_all_vdev_2d", TORCH_FN(all_to_all_vdev_2d));
  lib->impl("all_to_all_vdev_2d_offset", TORCH_FN(all_to_all_vdev_2d_offset));
  lib->impl("tile_reduce", TORCH_FN(tile_reduce));
  lib->impl("multi_root_tile_reduce", TORCH_FN(multi_root_tile_reduce));
  // The vendor-neutral aliases (pytorch PR #178514), when this torch defines them.
  if (has_op("symm_mem::shmem_put")) lib->impl("shmem_put", TORCH_FN(nvshmem_put));
  if (has_op("symm_mem::shmem_get")) lib->impl("shmem_get", TORCH_FN(nvshmem_get));
  if (has_op("symm_mem::shmem_broadcast")) lib->impl("shmem_broadcast", TORCH_FN(nvshmem_broadcast));
  if (has_op("symm_mem::shmem_put_with_signal")) lib->impl("shmem_put_with_signal", TORCH_FN(nvshmem_put_with_signal));
  if (has_op("symm_mem::shmem_wait_for_signal")) {
    lib->impl("shmem_wait_for_signal", TORCH_FN(nvshmem_wait_for_signal));
  }
  if (has_op("symm_mem::shmem_all_to_all")) lib->impl("shmem_all_to_all", TORCH_FN(nvshmem_all_to_all));
  if (has_op("symm_mem::shmem_get_out")) {
    lib->impl("shmem_get_out", torch::CppFunction::makeFromBoxedFunction<&nvshmem_get_out_boxed>());
  }
  if (key == c10::DispatchKey::XPU) register_symm_kernels(*lib);
  libraries().push_back(std::move(lib));
}

#if defined(XPUSHMEM_TORCH_WITH_XPU)
// symm_mem's MemPool allocator for XPU: segments come from the xpushmem XPU allocator (so a MemPool's tensors
// are symmetric; like any symmetric allocation, the pool must grow in the same order on every rank).
void register_xpu_mempool_allocator() {
  auto pluggable = torch::xpu::XPUPluggableAllocator::createCustomAllocator(
      [](size_t size, int device, sycl::queue* /*queue*/) -> void* {
        return allocator_for(c10::DeviceType::XPU)->alloc(size, device, std::nullopt);
      },
      [](void* ptr, size_t /*size*/, int /*device*/, sycl::queue* /*queue*/) {
        allocator_for(c10::DeviceType::XPU)->free(ptr);
      });
  sm::register_mempool_allocator(c10::DeviceType::XPU, pluggable);
}
#endif

#if defined(XPUSHMEM_TORCH_WITH_XPU)
// The Level Zero module behind a kernel compiled by Intel's Triton: its driver's `kernel.module` is a PyCapsule
// "kernel_bundle" over a sycl::kernel_bundle<executable> made from one Level Zero module. For the Triton kernel-load
// hook (xpushmem._xpushmem_triton), which hands the module to xpushmemx_ze_module_init.
uint64_t ze_module_of_kernel_bundle(const py::capsule& bundle) {
  const char* name = bundle.name();
  TORCH_CHECK(name != nullptr && std::string(name) == "kernel_bundle",
              "ze_module_of_kernel_bundle: expected a \"kernel_bundle\" capsule, got \"", name ? name : "", "\"");
  auto* kb = bundle.get_pointer<sycl::kernel_bundle<sycl::bundle_state::executable>>();
  TORCH_CHECK(kb != nullptr, "ze_module_of_kernel_bundle: the capsule holds no kernel bundle");
  auto modules = sycl::get_native<sycl::backend::ext_oneapi_level_zero>(*kb);
  TORCH_CHECK(modules.size() == 1, "ze_module_of_kernel_bundle: the kernel bundle holds ", modules.size(),
              " Level Zero modules, expected 1");
  return reinterpret_cast<uint64_t>(modules[0]);
}
#endif

bool xpu_mempool_supported() {
#if defined(XPUSHMEM_TORCH_WITH_XPU)
  return true;
#else
  return false;
#endif
}

// Register the allocators and kernels. CPU always; XPU when `xpu` (the torch build has XPU). Idempotent.
// The "NVSHMEM" name (symm_mem.set_backend("NVSHMEM")) is advertised for the XPU allocator when XPU is
// registered, else for the CPU one when `advertise_cpu` (false on a machine whose CUDA NVSHMEM backend owns the
// name); the CPU allocator is in any case the CPU backend.
void install(bool xpu, bool advertise_cpu) {
  std::lock_guard<std::mutex> lk(g_install_mu);
  if (!installed_keys().count("CPU")) {
    sm::register_allocator(c10::DeviceType::CPU, allocator_for(c10::DeviceType::CPU));
    register_kernels(c10::DispatchKey::CPU);
    installed_keys().insert("CPU");
  }
  if (xpu && !installed_keys().count("XPU")) {
    register_kernels(c10::DispatchKey::XPU);
    // TORCH_SYMMMEM=NVSHMEM makes it the XPU default at once; otherwise symm_mem.set_backend("NVSHMEM").
    const char* sel = std::getenv("TORCH_SYMMMEM");
    if (sel != nullptr && std::string(sel) == kBackendName) {
      sm::register_allocator(c10::DeviceType::XPU, allocator_for(c10::DeviceType::XPU));
    }
#if defined(XPUSHMEM_TORCH_WITH_XPU)
    register_xpu_mempool_allocator();
#endif
    installed_keys().insert("XPU");
  }
  if (xpu) {
    sm::register_availability(kBackendName, allocator_for(c10::DeviceType::XPU));
  } else if (advertise_cpu) {
    sm::register_availability(kBackendName, allocator_for(c10::DeviceType::CPU));
  }
}

// Test helper for torches without XPU (where install() registers nothing for XPU): register the XPU symm kernels
// in a scratch library, so that the dispatcher checks each C++ signature against torch's schema, and return the ops
// that then have an XPU kernel; the registrations are dropped on return.
std::vector<std::string> check_xpu_symm_registration() {
  std::lock_guard<std::mutex> lk(g_install_mu);
  TORCH_CHECK(!installed_keys().count("XPU"), "check_xpu_symm_registration: the XPU kernels are installed already");
  std::vector<std::string> registered;
  torch::Library lib(torch::Library::IMPL, "symm_mem", c10::DispatchKey::XPU, __FILE__, __LINE__);
  register_symm_kernels(lib);
  for (const auto& n : symm_device_ops()) {
    auto op = c10::Dispatcher::singleton().findSchema({"symm_mem::" + n, ""});
    if (op.has_value() && op->hasKernelForDispatchKey(c10::DispatchKey::XPU)) registered.push_back(n);
  }
  return registered;
}

// A tensor over `numel` elements of `base`'s allocation starting `byte_offset` bytes in, with its own storage
// (so that its storage pointer lies inside the allocation, as with a MemPool sub-allocation). Test helper.
at::Tensor tensor_inside(const at::Tensor& base, int64_t byte_offset, int64_t numel) {
  TORCH_CHECK(byte_offset >= 0 && byte_offset % base.element_size() == 0, "byte_offset must be a non-negative ",
              "multiple of the element size");
  const c10::Storage& storage = base.storage();
  TORCH_CHECK((byte_offset + numel * base.element_size()) <= static_cast<int64_t>(storage.nbytes()),
              "the range exceeds the base tensor's storage");
  void* p = static_cast<char*>(storage.mutable_data()) + byte_offset;
  auto keep = std::make_shared<c10::Storage>(storage);  // the view keeps the allocation alive
  return at::from_blob(p, {numel}, [keep](void*) {}, base.options());
}


// ---------------------------------------------------------------------------- expert parallel (token switch) ----
// xpushmem.torch.TokenSwitch and xpushmem.ep.Buffer: ops/src/ep through ffi/src/ep.rs (switches and routings are
// integer handles). CPU tensors take the host path (raw host arrays, the call returns with the data in place); XPU
// tensors the device path: the kernels appended to the current stream's Level Zero list (device_path_list, as the
// symm ops) through xpushmem_ops_ep_*_on_queue, returning without a host synchronisation; a routing's state lives
// in an XPU tensor the caller keeps (xpushmem_ops_ep_state_bytes). Python (xpushmem/torch/token_switch.py) checks the
// shapes and allocates the outputs; these functions check devices and contiguity.
}  // namespace
}  // namespace xpushmem_torch

extern "C" {
XPUSHMEM_OPS_WEAK int xpushmem_ops_ep_create(const int32_t*, int32_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                             int64_t*);
XPUSHMEM_OPS_WEAK int xpushmem_ops_ep_destroy(int64_t);
XPUSHMEM_OPS_WEAK int xpushmem_ops_ep_create_routing(int64_t, const int64_t*, int64_t, int64_t, int32_t, int64_t*,
                                                     int64_t*, int64_t*);
XPUSHMEM_OPS_WEAK int xpushmem_ops_ep_routing_destroy(int64_t);
XPUSHMEM_OPS_WEAK int xpushmem_ops_ep_dispatch(int64_t, int64_t, const void*, int32_t, int64_t, const float*, void*,
                                               int64_t, float*, int64_t, int64_t*, int64_t);
XPUSHMEM_OPS_WEAK int xpushmem_ops_ep_combine(int64_t, int64_t, const void*, int64_t, int32_t, int64_t, void*);
XPUSHMEM_OPS_WEAK int xpushmem_ops_ep_state_bytes(int64_t, int64_t*);
XPUSHMEM_OPS_WEAK int xpushmem_ops_ep_recv_rows(int64_t, void**, int64_t*);
XPUSHMEM_OPS_WEAK int xpushmem_ops_ep_create_routing_on_queue(int64_t, const xpushmem_ops_tensor*, int32_t,
                                                              const xpushmem_ops_tensor*, int64_t*, void*);
XPUSHMEM_OPS_WEAK int xpushmem_ops_ep_dispatch_on_queue(int64_t, int64_t, const xpushmem_ops_tensor*,
                                                        const xpushmem_ops_tensor*, const xpushmem_ops_tensor*,
                                                        const xpushmem_ops_tensor*, const xpushmem_ops_tensor*, void*);
XPUSHMEM_OPS_WEAK int xpushmem_ops_ep_combine_on_queue(int64_t, int64_t, const xpushmem_ops_tensor*,
                                                       const xpushmem_ops_tensor*, void*);
}

namespace xpushmem_torch {
namespace {

// Every tensor of one call is on `dev` (its first tensor's device), CPU or XPU, and contiguous.
void ep_check(const at::Tensor& t, const c10::Device& dev, const char* op, const char* arg) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::CPU || t.device().type() == c10::DeviceType::XPU, op, ": ", arg,
              " is on ", t.device(), "; the token switch runs on CPU tensors (host path) and XPU tensors (device "
              "kernels on the current stream)");
  TORCH_CHECK(t.device() == dev, op, ": ", arg, " is on ", t.device(), ", the call's first tensor on ", dev);
  TORCH_CHECK(t.is_contiguous(), op, ": ", arg, " must be contiguous");
}

// The ops dtype code of a token tensor: fp8 payloads move as bytes (dispatch only; combine needs a float dtype).
int32_t ep_dtype(const at::Tensor& t, const char* arg) {
  if (t.is_floating_point() && t.element_size() == 1) return 5;
  return dtype_code(t.scalar_type(), arg);
}

// The list an XPU call of the token switch is appended to (device_path_list); an error naming why when there is
// none: the EP ops have no synchronous device entry point to fall back to.
void* ep_list(const c10::Device& dev, const char* op) {
  ensure_runtime(dev.type(), dev.has_index() ? dev.index() : 0);
  void* list = device_path_list(dev, true);
  if (list != nullptr) return list;
  const bool device_path = device_path_on(true);
  TORCH_CHECK(false, op, ": XPU tensors run as device kernels appended to the current XPU stream's Level Zero ",
              "immediate command list, and there is none to append to: ",
              device_path ? "the stream's queue is not an immediate command list of the runtime's Level Zero context "
                            "(or this shim was built without the SYCL headers)"
                          : "the ops' device path is off (XPUSHMEM_OPS_PATH=host, or a host heap)");
  return nullptr;
}

// A token switch on the group (collective over the world) whose buffers are on the heap of `device` ("cpu": host
// heap, host path; "xpu[:i]": device heap, device path); its handle.
int64_t ep_create(const std::string& group_name, int64_t num_experts, int64_t max_dispatch, int64_t max_recv,
                  int64_t max_token_bytes, int64_t max_topk, const std::string& device) {
  const c10::Device dev(device);
  TORCH_CHECK(dev.type() == c10::DeviceType::CPU || dev.type() == c10::DeviceType::XPU,
              "TokenSwitch: device must be cpu or xpu, got '", device, "'");
  ensure_runtime(dev.type(), dev.has_index() ? dev.index() : 0);
  std::vector<int32_t> pes = group_pes(group_name);
  int64_t h = 0;
  check_ops_rc(XPUSHMEM_OP(xpushmem_ops_ep_create)(pes.data(), static_cast<int32_t>(pes.size()), num_experts,
                                                   max_dispatch, max_recv, max_token_bytes, max_topk, &h),
               "xpushmem_ops_ep_create");
  return h;
}

void ep_destroy(int64_t sw) { check_ops_rc(XPUSHMEM_OP(xpushmem_ops_ep_destroy)(sw), "xpushmem_ops_ep_destroy"); }

// This PE's receive rows of the host switch `sw` as a uint8 CPU tensor over them (no copy, nothing owned: the
// switch's memory, valid while it lives; token_switch.py keeps the switch open while it hands out views). A flat
// dispatch into them writes no copy, a flat combine of them reads them where they are.
at::Tensor ep_recv_rows(int64_t sw) {
  void* p = nullptr;
  int64_t n = 0;
  check_ops_rc(XPUSHMEM_OP(xpushmem_ops_ep_recv_rows)(sw, &p, &n), "xpushmem_ops_ep_recv_rows");
  return at::from_blob(p, {n}, [](void*) {}, at::TensorOptions().dtype(at::kByte).device(at::kCPU));
}

// Bytes of the XPU state tensor of one routing of `sw` (the device path's `state`).
int64_t ep_state_bytes(int64_t sw) {
  int64_t n = 0;
  check_ops_rc(XPUSHMEM_OP(xpushmem_ops_ep_state_bytes)(sw, &n), "xpushmem_ops_ep_state_bytes");
  return n;
}

// (routing handle, this rank's dispatch output rows). CPU: `expert_counts` (int64, one per local expert) if given
// receives the pairs each local expert receives. XPU: `state` (uint8, ep_state_bytes) is required and receives
// them (and the rows) on the device, in stream order; the rows are returned as -1 (not known without a wait).
std::tuple<int64_t, int64_t> ep_create_routing(int64_t sw, const at::Tensor& topk_idx, int64_t layout,
                                               std::optional<at::Tensor> expert_counts,
                                               std::optional<at::Tensor> state) {
  const char* op = "create_routing";
  const c10::Device dev = topk_idx.device();
  ep_check(topk_idx, dev, op, "topk_idx");
  TORCH_CHECK(topk_idx.scalar_type() == at::kLong && topk_idx.dim() == 2, op, ": topk_idx must be int64 [N, K], got ",
              topk_idx.scalar_type(), " ", topk_idx.sizes());
  int64_t rows = 0, h = 0;
  if (dev.type() == c10::DeviceType::XPU) {
    TORCH_CHECK(state.has_value(), op, ": an XPU routing needs its state tensor (uint8, ep_state_bytes)");
    TORCH_CHECK(!expert_counts.has_value(), op, ": expert_counts is for CPU routings (an XPU routing keeps the ",
                "counts in its state)");
    ep_check(*state, dev, op, "state");
    TORCH_CHECK(state->scalar_type() == at::kByte && state->dim() == 1, op, ": state must be uint8 [bytes], got ",
                state->scalar_type(), " ", state->sizes());
    OpsTensor idx(topk_idx, "topk_idx"), st(*state, "state");
    void* list = ep_list(dev, op);
    py::gil_scoped_release nogil;
    check_ops_rc(XPUSHMEM_OP(xpushmem_ops_ep_create_routing_on_queue)(sw, idx.get(), static_cast<int32_t>(layout),
                                                                       st.get(), &h, list),
                 "xpushmem_ops_ep_create_routing_on_queue");
    return {h, -1};
  }
  TORCH_CHECK(!state.has_value(), op, ": state is for XPU routings (a CPU routing keeps its state in the library)");
  int64_t* counts = nullptr;
  if (expert_counts.has_value()) {
    ep_check(*expert_counts, dev, op, "expert_counts");
    TORCH_CHECK(expert_counts->scalar_type() == at::kLong, op, ": expert_counts must be int64");
    counts = expert_counts->data_ptr<int64_t>();
  }
  {
    py::gil_scoped_release nogil;
    check_ops_rc(XPUSHMEM_OP(xpushmem_ops_ep_create_routing)(sw, topk_idx.data_ptr<int64_t>(), topk_idx.size(0),
                                                              topk_idx.size(1), static_cast<int32_t>(layout), counts,
                                                              &rows, &h),
                 "xpushmem_ops_ep_create_routing");
  }
  return {h, rows};
}

void ep_routing_destroy(int64_t r) {
  check_ops_rc(XPUSHMEM_OP(xpushmem_ops_ep_routing_destroy)(r), "xpushmem_ops_ep_routing_destroy");
}

// CPU: writes the received rows of the outputs. XPU: appended to the current stream (outputs of at least
// max_recv_tokens_per_rank rows).
void ep_dispatch(int64_t sw, int64_t r, const at::Tensor& tokens, const at::Tensor& topk_weights,
                 at::Tensor& out_tokens, at::Tensor& out_topk_weights, std::optional<at::Tensor> out_topk_idx) {
  const char* op = "dispatch";
  const c10::Device dev = tokens.device();
  ep_check(tokens, dev, op, "tokens");
  ep_check(topk_weights, dev, op, "topk_weights");
  ep_check(out_tokens, dev, op, "out_tokens");
  ep_check(out_topk_weights, dev, op, "out_topk_weights");
  TORCH_CHECK(tokens.dim() == 2 && out_tokens.dim() == 2 && out_tokens.size(1) == tokens.size(1), op,
              ": tokens and out_tokens must be [N, H] and [rows, H], got ", tokens.sizes(), " and ",
              out_tokens.sizes());
  TORCH_CHECK(out_tokens.scalar_type() == tokens.scalar_type(), op, ": out_tokens has dtype ",
              out_tokens.scalar_type(), ", tokens ", tokens.scalar_type());
  TORCH_CHECK(topk_weights.scalar_type() == at::kFloat && out_topk_weights.scalar_type() == at::kFloat, op,
              ": topk_weights and out_topk_weights must be float32");
  if (out_topk_idx.has_value()) {
    ep_check(*out_topk_idx, dev, op, "out_topk_idx");
    TORCH_CHECK(out_topk_idx->scalar_type() == at::kLong, op, ": out_topk_idx must be int64");
  }
  const int32_t dt = ep_dtype(tokens, "tokens");
  if (dev.type() == c10::DeviceType::XPU) {
    OpsTensor x(tokens, dt), w(topk_weights, "topk_weights"), o(out_tokens, dt), ow(out_topk_weights, "out_topk_weights");
    std::optional<OpsTensor> oi;
    if (out_topk_idx.has_value()) oi.emplace(*out_topk_idx, "out_topk_idx");
    void* list = ep_list(dev, op);
    py::gil_scoped_release nogil;
    check_ops_rc(XPUSHMEM_OP(xpushmem_ops_ep_dispatch_on_queue)(sw, r, x.get(), w.get(), o.get(), ow.get(),
                                                                 oi ? oi->get() : nullptr, list),
                 "xpushmem_ops_ep_dispatch_on_queue");
    return;
  }
  int64_t* idx = nullptr;
  int64_t idx_len = 0;
  if (out_topk_idx.has_value()) {
    // Present but empty (no rows received) is still present: never NULL, which means absent.
    static int64_t no_rows = 0;
    idx = out_topk_idx->numel() ? out_topk_idx->data_ptr<int64_t>() : &no_rows;
    idx_len = out_topk_idx->numel();
  }
  const int64_t hidden = tokens.size(1);
  py::gil_scoped_release nogil;
  check_ops_rc(XPUSHMEM_OP(xpushmem_ops_ep_dispatch)(
                   sw, r, tokens.data_ptr(), dt, hidden, topk_weights.data_ptr<float>(), out_tokens.data_ptr(),
                   out_tokens.size(0), out_topk_weights.data_ptr<float>(), out_topk_weights.numel(), idx, idx_len),
               "xpushmem_ops_ep_dispatch");
}

void ep_combine(int64_t sw, int64_t r, const at::Tensor& expert_tokens, at::Tensor& out) {
  const char* op = "combine";
  const c10::Device dev = expert_tokens.device();
  ep_check(expert_tokens, dev, op, "expert_tokens");
  ep_check(out, dev, op, "out");
  TORCH_CHECK(expert_tokens.dim() == 2 && out.dim() == 2 && out.size(1) == expert_tokens.size(1), op,
              ": expert_tokens and out must be [rows, H] and [N, H], got ", expert_tokens.sizes(), " and ",
              out.sizes());
  TORCH_CHECK(out.scalar_type() == expert_tokens.scalar_type(), op, ": out has dtype ", out.scalar_type(),
              ", expert_tokens ", expert_tokens.scalar_type());
  const int32_t dt = dtype_code(expert_tokens.scalar_type(), "expert_tokens");
  if (dev.type() == c10::DeviceType::XPU) {
    OpsTensor y(expert_tokens, dt), o(out, dt);
    void* list = ep_list(dev, op);
    py::gil_scoped_release nogil;
    check_ops_rc(XPUSHMEM_OP(xpushmem_ops_ep_combine_on_queue)(sw, r, y.get(), o.get(), list),
                 "xpushmem_ops_ep_combine_on_queue");
    return;
  }
  py::gil_scoped_release nogil;
  check_ops_rc(XPUSHMEM_OP(xpushmem_ops_ep_combine)(sw, r, expert_tokens.data_ptr(), expert_tokens.size(0), dt,
                                                    expert_tokens.size(1), out.data_ptr()),
               "xpushmem_ops_ep_combine");
}

void register_ep(py::module_& m) {
  m.def("ep_create", &ep_create, py::arg("group_name"), py::arg("num_experts"), py::arg("max_dispatch_tokens"),
        py::arg("max_recv_tokens"), py::arg("max_token_bytes"), py::arg("max_topk"), py::arg("device") = "cpu",
        "A token switch on the group (collective over the world) on the heap of `device`; its handle.");
  m.def("ep_destroy", &ep_destroy, py::arg("switch"), "Free a token switch (collective over the world).");
  m.def("ep_recv_rows", &ep_recv_rows, py::arg("switch"),
        "This PE's receive rows of a host switch as a uint8 CPU tensor over them (the switch's memory).");
  m.def("ep_state_bytes", &ep_state_bytes, py::arg("switch"),
        "Bytes of the uint8 state tensor of one XPU routing of the switch.");
  m.def("ep_create_routing", &ep_create_routing, py::arg("switch"), py::arg("topk_idx"), py::arg("layout"),
        py::arg("expert_counts") = py::none(), py::arg("state") = py::none(),
        "(routing handle, dispatch output rows, -1 on XPU); collective over the group.");
  m.def("ep_routing_destroy", &ep_routing_destroy, py::arg("routing"));
  m.def("ep_dispatch", &ep_dispatch, py::arg("switch"), py::arg("routing"), py::arg("tokens"),
        py::arg("topk_weights"), py::arg("out_tokens"), py::arg("out_topk_weights"),
        py::arg("out_topk_idx") = py::none());
  m.def("ep_combine", &ep_combine, py::arg("switch"), py::arg("routing"), py::arg("expert_tokens"), py::arg("out"));
}
}  // namespace
}  // namespace xpushmem_torch

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using namespace xpushmem_torch;
  m.doc() = "xpushmem's PyTorch symmetric-memory backend and symm_mem kernels (CPU, XPU)";
  m.def("install", &install, py::arg("xpu"), py::arg("advertise_cpu"),
        "Register the NVSHMEM-named allocators and the symm_mem kernels (CPU; XPU when xpu=True).");
  m.def("missing_ops_symbols", &missing_ops_symbols,
        "xpushmem-ops C functions that libxpushmem.so does not export (empty when complete).");
  m.def("xpu_mempool_supported", &xpu_mempool_supported,
        "Whether this build registers the XPU MemPool allocator (needs the SYCL headers at build time).");
#if defined(XPUSHMEM_TORCH_WITH_XPU)
  m.def("ze_module_of_kernel_bundle", &ze_module_of_kernel_bundle, py::arg("bundle"),
        "The ze_module_handle_t (as an int) behind a kernel bundle capsule of Intel's Triton driver.");
#endif
  m.def("symm_device_ops", &symm_device_ops,
        "The symm_mem ops the shim registers for XPU as device kernels (the others come from _symm_ops.py).");
  m.def("check_xpu_symm_registration", &check_xpu_symm_registration,
        "Test helper (torch without XPU): register the XPU symm kernels in a scratch library against torch's "
        "schemas; the ops that got an XPU kernel.");
  m.def("runtime_started", []() { return runtime().up; });
  m.def(
      "ops_queue_wait",
      []() {
        if (xpushmem_ops_queue_wait != nullptr) check_ops_rc(xpushmem_ops_queue_wait(), "xpushmem_ops_queue_wait");
      },
      "Wait for the ops enqueued on XPU streams (synchronise the streams first) and raise the first failure");
  m.def("my_pe", []() { return runtime().up ? runtime().my_pe : -1; });
  m.def("n_pes", []() { return runtime().up ? runtime().n_pes : 0; });
  m.def("allocator_stats", [](const std::string& device) {
    return allocator_for(c10::Device(device).type())->stats();
  }, py::arg("device"), "[live allocations, frees pending on some rank, allocations released]");
  m.def("rendezvous_exchanges", []() {
    return std::vector<int64_t>{g_store_exchanges.load(), g_pg_exchanges.load()};
  }, "[rendezvous exchanges over a group's store, through a group's allgather] (tests)");
  m.def("tensor_inside", &tensor_inside, py::arg("base"), py::arg("byte_offset"), py::arg("numel"));
  register_ep(m);
  m.def("library_version", []() {
    char name[XPUSHMEM_MAX_NAME_LEN] = {0};
    xpushmem_info_get_name(name);
    return std::string(name);
  });
}
