/* symm_mem's collective kernels (PyTorch's CUDASymmetricMemoryOps.cu) for Intel GPUs, on xpushmem's device
 * library: one-shot and two-shot all-reduce, reduce-scatter (flat or split along the last dimension), memset32 and
 * stream_write_value32. The CPU registration (xpushmem/torch/_symm_ops.py) is their reference.
 *
 * Launch: one work-group per PE, every PE of the world (the handle's group) at once; all work-items of the group
 * call each kernel. `buf` is this PE's address of the tensor inside its symmetric allocation; the peers' copies are
 * found with xpushmem_ptr. Synchronisation is the library's work-group barrier over the world
 * (xpushmemx_barrier_all_work_group), where upstream uses the handle's signal pad: before the reads (every PE has
 * written its input) and after them (no PE changes its buffer while a peer still reads it).
 *
 * Reductions: "sum" over float (suffix _f32) and bfloat16 (_bf16, stored as ushort). Peers' values are added in
 * rank order 0, 1, ..., n-1 in the element type (bfloat16: in float, rounded to nearest even at every step), as
 * upstream's load_and_reduce, so every PE computes bit-identical results.
 *
 * status[0] (one int): 0, or the first error code of a library call, or -1 when a peer's copy is unreachable.
 *
 * Build: clang-14 -cc1 -triple spir64-unknown-unknown -cl-std=CL2.0 -finclude-default-header -O2 -emit-llvm-bc
 * -I shmem/device-lib/include -x cl symm_mem.cl -o k.bc, then shmem/device-lib/link.sh k.bc
 * libxpushmem_device-<version>.bc symm_mem.spv (tests/tests/symm_kernels.rs does both). */
#include "xpushmem_device.h"

static float bf16_to_f32(ushort b) { return as_float((uint)b << 16); }

static ushort f32_to_bf16(float f) {
  uint u = as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u); /* NaN stays a (quiet) NaN */
  u += 0x7fffu + ((u >> 16) & 1u);                                        /* round to nearest, ties to even */
  return (ushort)(u >> 16);
}

static float add_f32(float a, float b) { return a + b; }
static ushort add_bf16(ushort a, ushort b) { return f32_to_bf16(bf16_to_f32(a) + bf16_to_f32(b)); }

/* Record the first failure of a library call (or of a peer lookup) for the host. */
static void note(int e, __global int *status) {
  if (e != 0 && get_local_id(0) == 0 && status[0] == 0) status[0] = e;
}

static int barrier_world(__global int *status) {
  int e = xpushmemx_barrier_all_work_group();
  note(e, status);
  return e;
}

#define DEFINE_SYMM_KERNELS(SUF, T, ADD)                                                                           \
  static __global T *peer_##SUF(__global T *buf, int pe, __global int *status) {                                   \
    long p = xpushmem_ptr((long)buf, pe);                                                                           \
    if (p == 0) note(-1, status);                                                                                   \
    return (__global T *)p;                                                                                         \
  }                                                                                                                 \
                                                                                                                    \
  /* The sum over the PEs of element i of their copies of buf, in rank order. */                                  \
  static T reduce_##SUF(__global T *buf, ulong i, int n, __global int *status) {                                   \
    T acc = peer_##SUF(buf, 0, status)[i];                                                                          \
    for (int r = 1; r < n; ++r) acc = ADD(acc, peer_##SUF(buf, r, status)[i]);                                     \
    return acc;                                                                                                     \
  }                                                                                                                 \
                                                                                                                    \
  /* one_shot_all_reduce[_copy][_out]: out[i] = sum of buf[i] over the PEs, i < numel. With copy != 0, the first */ \
  /* local_numel elements of local_in are first written into this PE's buf. */                                    \
  __kernel void k_one_shot_all_reduce_##SUF(__global T *buf, __global const T *local_in, uint copy,                \
                                            ulong local_numel, __global T *out, ulong numel,                      \
                                            __global int *status) {                                               \
    const ulong lid = get_local_id(0), lsz = get_local_size(0);                                                    \
    const int n = xpushmem_n_pes();                                                                                 \
    if (copy)                                                                                                       \
      for (ulong i = lid; i < local_numel; i += lsz) buf[i] = local_in[i];                                         \
    barrier_world(status);                                                                                          \
    for (ulong i = lid; i < numel; i += lsz) out[i] = reduce_##SUF(buf, i, n, status);                             \
    barrier_world(status);                                                                                          \
  }                                                                                                                 \
                                                                                                                    \
  /* two_shot_all_reduce_: PE r reduces elements [r * per_rank, (r + 1) * per_rank) and writes them into every */ \
  /* PE's buf. */                                                                                                  \
  __kernel void k_two_shot_all_reduce_inplace_##SUF(__global T *buf, ulong numel, ulong per_rank,                  \
                                                    __global int *status) {                                       \
    const ulong lid = get_local_id(0), lsz = get_local_size(0);                                                    \
    const int me = xpushmem_my_pe(), n = xpushmem_n_pes();                                                          \
    const ulong lo = min(per_rank * me, numel), hi = min(per_rank * (me + 1), numel);                              \
    barrier_world(status);                                                                                          \
    for (ulong i = lo + lid; i < hi; i += lsz) {                                                                    \
      T v = reduce_##SUF(buf, i, n, status);                                                                        \
      for (int step = 0; step < n; ++step) peer_##SUF(buf, (me + step) % n, status)[i] = v;                         \
    }                                                                                                               \
    barrier_world(status);                                                                                          \
  }                                                                                                                 \
                                                                                                                    \
  /* two_shot_all_reduce_out: PE r reduces its slice into its own buf, then every PE gathers the slices into out. */ \
  __kernel void k_two_shot_all_reduce_out_##SUF(__global T *buf, __global T *out, ulong numel, ulong per_rank,     \
                                                __global int *status) {                                           \
    const ulong lid = get_local_id(0), lsz = get_local_size(0);                                                    \
    const int me = xpushmem_my_pe(), n = xpushmem_n_pes();                                                          \
    const ulong lo = min(per_rank * me, numel), hi = min(per_rank * (me + 1), numel);                              \
    barrier_world(status);                                                                                          \
    for (ulong i = lo + lid; i < hi; i += lsz) buf[i] = reduce_##SUF(buf, i, n, status);                           \
    barrier_world(status);                                                                                          \
    for (int step = 0; step < n; ++step) {                                                                          \
      const int r = (me + step) % n;                                                                                \
      const ulong rlo = min(per_rank * r, numel), rhi = min(per_rank * (r + 1), numel);                            \
      __global T *src = peer_##SUF(buf, r, status);                                                                 \
      for (ulong i = rlo + lid; i < rhi; i += lsz) out[i] = src[i];                                                 \
    }                                                                                                               \
    barrier_world(status);                                                                                          \
  }                                                                                                                 \
                                                                                                                    \
  /* reduce_scatter_out: last_dim == 0: out[i] = sum of buf[me * numel / n + i], i < numel / n (a flat tensor); */ \
  /* else buf is [numel / last_dim, last_dim] and out[j, k] = sum of buf[j, me * (last_dim / n) + k]. */           \
  __kernel void k_reduce_scatter_##SUF(__global T *buf, __global T *out, ulong numel, ulong last_dim,              \
                                       __global int *status) {                                                    \
    const ulong lid = get_local_id(0), lsz = get_local_size(0);                                                    \
    const int me = xpushmem_my_pe(), n = xpushmem_n_pes();                                                          \
    const ulong per_rank = numel / n;                                                                               \
    barrier_world(status);                                                                                          \
    if (last_dim == 0) {                                                                                            \
      for (ulong i = lid; i < per_rank; i += lsz) out[i] = reduce_##SUF(buf, per_rank * me + i, n, status);        \
    } else {                                                                                                        \
      const ulong w = last_dim / n, rows = numel / last_dim;                                                        \
      for (ulong row = 0; row < rows; ++row)                                                                        \
        for (ulong k = lid; k < w; k += lsz)                                                                        \
          out[row * w + k] = reduce_##SUF(buf, row * last_dim + w * me + k, n, status);                             \
    }                                                                                                               \
    barrier_world(status);                                                                                          \
  }

DEFINE_SYMM_KERNELS(f32, float, add_f32)
DEFINE_SYMM_KERNELS(bf16, ushort, add_bf16)

/* memset32_: count words from word offset set to val (no communication). */
__kernel void k_memset32(__global uint *p, ulong offset, uint val, ulong count) {
  for (ulong i = get_local_id(0) + get_group_id(0) * get_local_size(0); i < count;
       i += get_local_size(0) * get_num_groups(0))
    p[offset + i] = val;
}

/* stream_write_value32_: one 32-bit atomic store after a fence (everything this PE stored before is visible to any
 * PE that sees the value; cuStreamWriteValue32's ordering). p must be symmetric (the library's atomics). */
__kernel void k_stream_write_value32(__global uint *p, ulong offset, uint val, __global int *status) {
  if (get_global_id(0) != 0) return;
  note(xpushmem_fence(), status);
  note(xpushmem_uint32_atomic_set((long)(p + offset), val, xpushmem_my_pe()), status);
}
