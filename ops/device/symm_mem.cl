/* symm_mem.cl: the rest of PyTorch's symm_mem kernels (CUDASymmetricMemoryOps.cu) for Intel GPUs, on xpushmem's
 * device library: one-shot and two-shot all-reduce, reduce-scatter (flat or split along the last dimension),
 * memset32 and stream_write_value32. Part of the op kernels' module: xpushmem_ops.cl includes this file after its
 * group sync step, status record and bfloat16 conversions, which these kernels share. The host side is
 * ops/src/symm.rs (argument checks with upstream's messages, digest, the slice partition); the CPU registration
 * (triton-bridge/xpushmem/torch/_symm_ops.py) implements the same semantics in host code.
 *
 * Launch: one work-group of XPO_GROUP_SIZE items per PE, every member of the group at once. `buf` is this PE's
 * address of the tensor inside its symmetric allocation; the members' copies are found with xpushmem_ptr. Where
 * upstream barriers on the handle's signal pad, these kernels take a sync step of the group (the op sync region):
 * before the reads (every member has written its input; the entry step also carries each rank's host verdict
 * and argument digest, so either every rank runs or every rank fails) and after them (no member changes its
 * buffer while another still reads it).
 *
 * Reductions: "sum" over float32 and bfloat16. Members' values are added in group-rank order 0, 1, ..., w-1 in the
 * element type (bfloat16: in float, rounded to nearest even after every addition), as upstream's load_and_reduce,
 * so every PE computes bit-identical results. */

/* Whether every member's copy of `buf` is reachable (then so is every element of it: one heap per member). */
__attribute__((noinline)) static int symm_reachable(__global const int *pes, int w, long buf) {
  int all = 1;
  for (int r = 0; r < w; r++) all &= xpushmem_ptr(buf, pes[r]) != 0;
  return all;
}

/* Element i of `buf` summed over the group in rank order (every copy reachable: symm_reachable). */
__attribute__((noinline)) static float symm_sum(__global const int *pes, int w, int dtype, long buf, long esz,
                                                long i) {
  float acc = load_elem(dtype, (ulong)xpushmem_ptr(buf + i * esz, pes[0]));
  for (int r = 1; r < w; r++) {
    acc += load_elem(dtype, (ulong)xpushmem_ptr(buf + i * esz, pes[r]));
    if (dtype == XPO_DTYPE_BF16) acc = as_float((uint)f32_to_bf16(acc) << 16);
  }
  return acc;
}

/* Copy element i from `src` to `dst` bit for bit (2- or 4-byte elements). */
static void symm_copy(long dst, long src, long esz, long i) {
  if (esz == 4)
    ((__global uint *)dst)[i] = ((__global const uint *)src)[i];
  else
    ((__global ushort *)dst)[i] = ((__global const ushort *)src)[i];
}

/* Publish every work-item's stores, take one sync step of the group with this rank's verdict `v` (and `digest`),
 * and give the work-group the step's verdict: v's own code when it has one, else the step's. */
static verdict_t symm_sync(__local long *slot, long region, __global const int *pes, int w, int me, verdict_t v,
                           ulong digest) {
  xpushmem_fence();
  wg_barrier();
  if (get_local_id(0) == 0) {
    verdict_t s = ok();
    if (sync_step(region, pes, w, me, v.code, digest, &s) || !v.code) v = s;
  }
  v = share(slot, v);
  xpushmem_fence();
  return v;
}

/* The phases, each loop a function of its own (noinline): llvm-spirv-14 lays out consecutive loops of one
 * function in an order spirv-val rejects (as in xpushmem_ops.cl). The kernel checks first that every member's
 * copy of buf is reachable. */
__attribute__((noinline)) static void symm_copy_in(long buf, long local_in, long local_numel, long esz) {
  for (long i = get_local_id(0); i < local_numel; i += get_local_size(0)) symm_copy(buf, local_in, esz, i);
}

/* out[i] = sum of buf[first + i], i < n. */
__attribute__((noinline)) static void symm_reduce_into(__global const int *pes, int w, int dtype, long esz, long buf,
                                                      long first, long out, long n) {
  for (long i = get_local_id(0); i < n; i += get_local_size(0))
    store_elem(dtype, (ulong)(out + i * esz), symm_sum(pes, w, dtype, buf, esz, first + i));
}

/* Element i's sum written into every member's buf (this rank's copy first, then the next ranks'). */
__attribute__((noinline)) static void symm_store_all(__global const int *pes, int w, int me, int dtype, long buf,
                                                    long esz, long i, float s) {
  for (int step = 0; step < w; step++) {
    int r = me + step < w ? me + step : me + step - w;
    store_elem(dtype, (ulong)xpushmem_ptr(buf + i * esz, pes[r]), s);
  }
}

__attribute__((noinline)) static void symm_two_shot_inplace(__global const int *pes, int w, int me, int dtype,
                                                           long esz, long buf, long lo, long hi) {
  for (long i = lo + get_local_id(0); i < hi; i += get_local_size(0))
    symm_store_all(pes, w, me, dtype, buf, esz, i, symm_sum(pes, w, dtype, buf, esz, i));
}

/* out[lo, hi) = the sums, written into this rank's own buf. */
__attribute__((noinline)) static void symm_reduce_own(__global const int *pes, int w, int dtype, long esz, long buf,
                                                     long lo, long hi) {
  for (long i = lo + get_local_id(0); i < hi; i += get_local_size(0))
    store_elem(dtype, (ulong)(buf + i * esz), symm_sum(pes, w, dtype, buf, esz, i));
}

/* out[lo, hi) = member pe's buf[lo, hi), bit for bit. */
__attribute__((noinline)) static void symm_pull(int pe, long esz, long buf, long out, long lo, long hi) {
  long src = xpushmem_ptr(buf, pe);
  for (long i = lo + get_local_id(0); i < hi; i += get_local_size(0)) symm_copy(out, src, esz, i);
}

__attribute__((noinline)) static void symm_gather(__global const int *pes, int w, int me, long esz, long buf,
                                                 long out, long numel, long per_rank) {
  for (int step = 0; step < w; step++) {
    int r = me + step < w ? me + step : me + step - w;
    symm_pull(pes[r], esz, buf, out, min(per_rank * r, numel), min(per_rank * (r + 1), numel));
  }
}

/* Split along the last dimension: out[j, k] = sum of buf[j, me * per_rank + k]. */
__attribute__((noinline)) static void symm_reduce_rows(__global const int *pes, int w, int me, int dtype, long esz,
                                                      long buf, long out, long rows, long last_dim, long per_rank) {
  for (long row = 0; row < rows; row++)
    symm_reduce_into(pes, w, dtype, esz, buf, row * last_dim + per_rank * me, out + row * per_rank * esz,
                            per_rank);
}

/* mode XPO_SYMM_ONE_SHOT[_COPY]: out[i] = sum of buf[i], i < numel (with _COPY, local_numel elements of local_in
 *   are first written into this PE's buf);
 * XPO_SYMM_TWO_SHOT_INPLACE: rank me sums elements [me * per_rank, (me + 1) * per_rank) and writes them into every
 *   member's buf;
 * XPO_SYMM_TWO_SHOT_OUT: rank me sums its slice into its own buf; after a sync step every rank gathers the slices
 *   into out;
 * XPO_SYMM_REDUCE_SCATTER: last_dim == 0: out[i] = sum of buf[me * per_rank + i], i < per_rank (flat); else buf is
 *   [numel / last_dim, last_dim] and out[j, k] = sum of buf[j, me * per_rank + k], k < per_rank. */
XPO_KERNEL void xpo_symm_reduce(long region, long pes_addr, int w, int me, int mode, int dtype, long buf,
                                long local_in, long local_numel, long out, long numel, long per_rank, long last_dim,
                                ulong digest, uint host_err, long status, ulong seq) {
  __local long slot[4];
  __global const int *pes = (__global const int *)pes_addr;
  const long esz = dtype == XPO_DTYPE_F32 ? 4 : 2;
  verdict_t v = ok();
  if (host_err) {
    v.code = XPO_ERR_HOST_REJECT;
  } else if (!symm_reachable(pes, w, buf)) {
    v.code = XPO_ERR_DEVICE;
  } else if (mode == XPO_SYMM_ONE_SHOT_COPY) {
    symm_copy_in(buf, local_in, local_numel, esz);
  }
  v = symm_sync(slot, region, pes, w, me, v, digest);
  if (v.code) {
    if (get_local_id(0) == 0) finish(status, seq, v);
    return;
  }
  const long lo = min(per_rank * me, numel), hi = min(per_rank * (me + 1), numel);
  if (mode == XPO_SYMM_ONE_SHOT || mode == XPO_SYMM_ONE_SHOT_COPY) {
    symm_reduce_into(pes, w, dtype, esz, buf, 0, out, numel);
  } else if (mode == XPO_SYMM_TWO_SHOT_INPLACE) {
    symm_two_shot_inplace(pes, w, me, dtype, esz, buf, lo, hi);
  } else if (mode == XPO_SYMM_TWO_SHOT_OUT) {
    symm_reduce_own(pes, w, dtype, esz, buf, lo, hi);
    v = symm_sync(slot, region, pes, w, me, ok(), 0);
    if (v.code) {
      if (get_local_id(0) == 0) finish(status, seq, v);
      return;
    }
    symm_gather(pes, w, me, esz, buf, out, numel, per_rank);
  } else if (last_dim == 0) {
    symm_reduce_into(pes, w, dtype, esz, buf, per_rank * me, out, per_rank);
  } else {
    symm_reduce_rows(pes, w, me, dtype, esz, buf, out, numel / last_dim, last_dim, per_rank);
  }
  v = symm_sync(slot, region, pes, w, me, ok(), 0);
  if (get_local_id(0) == 0) finish(status, seq, v);
}

void __attribute__((overloadable)) __spirv_AtomicStore(__global uint *p, int scope, int sem, uint v);

/* kind XPO_WRITE32_MEMSET: count 32-bit words at addr set to val (no communication);
 * XPO_WRITE32_STREAM: one 32-bit release store of val at addr after a CrossDevice fence (everything this PE
 * stored before, on this queue, is visible to whoever sees the value: cuStreamWriteValue32's ordering). */
XPO_KERNEL void xpo_symm_write32(int kind, long addr, long count, uint val, long status, ulong seq) {
  __global uint *p = (__global uint *)addr;
  if (kind == XPO_WRITE32_MEMSET) {
    for (long i = get_local_id(0); i < count; i += get_local_size(0)) p[i] = val;
  } else if (get_local_id(0) == 0) {
    xpushmem_fence();
    /* CrossDevice scope (0), Release | CrossWorkgroupMemory (0x4 | 0x200). */
    __spirv_AtomicStore(p, 0, 0x204, val);
  }
  xpushmem_fence();
  wg_barrier();
  if (get_local_id(0) == 0) finish(status, seq, ok());
}
