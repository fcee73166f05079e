/* Test kernels for ze-emu and the device path: OpenCL C that calls SPIR-V builtins directly (see
 * shared/research/device_substrate_probe.md: OpenCL-C atomics on generic pointers fail to JIT on the CPU runtime).
 * Build: shmem/device-lib/build.sh OUTDIR  ->  OUTDIR/test_kernels.spv */
typedef unsigned long u64;
typedef unsigned int u32;
#define G __global

u64 __attribute__((overloadable)) __spirv_AtomicIAdd(G u64 *p, int scope, int sem, u64 v);
u64 __attribute__((overloadable)) __spirv_AtomicLoad(G u64 *p, int scope, int sem);
void __attribute__((overloadable)) __spirv_MemoryBarrier(int scope, int sem);
void __attribute__((overloadable, convergent)) __spirv_ControlBarrier(int exec, int mem, int sem);
u64 __attribute__((overloadable)) __spirv_BuiltInGlobalInvocationId(int dim);
u64 __attribute__((overloadable)) __spirv_BuiltInGlobalSize(int dim);
u64 __attribute__((overloadable)) __spirv_BuiltInLocalInvocationId(int dim);
u64 __attribute__((overloadable)) __spirv_BuiltInWorkgroupSize(int dim);

#define SCOPE_CROSS_DEVICE 0
#define SCOPE_WORKGROUP 2
#define SEM_RELEASE 0x4
#define SEM_SEQ_CST 0x10
#define SEM_CROSS_WG_MEMORY 0x200

/* Program-scope variable, for zeModuleGetGlobalPointer. */
G u64 xpushmem_test_counter = 42;

/* put with signal: dst[i] = src[i] * 2 for i < n (work-items stride over n), CrossDevice release fence, then
 * work-item 0 atomically adds sigval to *sig (CrossDevice scope, release). dst and sig may point into a peer's
 * heap (an IPC mapping). The signal follows the data only with one work-group (the barrier before it is the
 * work-group's); with more, a reader must wait for the kernel's completion instead. */
__kernel void put_signal(G u32 *dst, G const u32 *src, u64 n, G u64 *sig, u64 sigval) {
  u64 gid = __spirv_BuiltInGlobalInvocationId(0), gsz = __spirv_BuiltInGlobalSize(0);
  for (u64 i = gid; i < n; i += gsz) dst[i] = src[i] * 2u;
  __spirv_MemoryBarrier(SCOPE_CROSS_DEVICE, SEM_SEQ_CST | SEM_CROSS_WG_MEMORY);
  __spirv_ControlBarrier(SCOPE_WORKGROUP, SCOPE_WORKGROUP, SEM_SEQ_CST | SEM_CROSS_WG_MEMORY);
  if (gid == 0) __spirv_AtomicIAdd(sig, SCOPE_CROSS_DEVICE, SEM_RELEASE | SEM_CROSS_WG_MEMORY, sigval);
}

/* Every work-item adds 1 to *counter and writes its global id into ids[gid]; exercises 3 dimensions and a
 * local-memory argument. */
__kernel void count_ids(G u64 *counter, G u32 *ids, __local u32 *scratch) {
  u64 x = __spirv_BuiltInGlobalInvocationId(0);
  u64 y = __spirv_BuiltInGlobalInvocationId(1);
  u64 w = __spirv_BuiltInGlobalSize(0);
  u64 lid = __spirv_BuiltInLocalInvocationId(1) * __spirv_BuiltInWorkgroupSize(0) + __spirv_BuiltInLocalInvocationId(0);
  scratch[lid] = (u32)(y * w + x);
  __spirv_ControlBarrier(SCOPE_WORKGROUP, SCOPE_WORKGROUP, SEM_SEQ_CST | 0x100);
  ids[y * w + x] = scratch[lid];
  __spirv_AtomicIAdd(counter, SCOPE_CROSS_DEVICE, SEM_SEQ_CST | SEM_CROSS_WG_MEMORY, 1);
}

/* Adds the program-scope counter's value to *out. */
__kernel void read_global(G u64 *out) {
  if (__spirv_BuiltInGlobalInvocationId(0) == 0) *out = xpushmem_test_counter;
}

/* Work-item 0 of each work-group adds 1 to *started, then waits for *word to become non-zero, at most `limit`
 * reads; seen[group] = the number of reads it took, or ~0 when it gave up. A launch of as many groups as can be
 * resident occupies every worker of the engine it runs on while it waits (ze-emu's test of its second compute
 * engine). */
__kernel void wait_word(G u64 *word, u64 limit, G u64 *seen, G u64 *started) {
  if (__spirv_BuiltInLocalInvocationId(0) != 0) return;
  u64 g = __spirv_BuiltInGlobalInvocationId(0) / __spirv_BuiltInWorkgroupSize(0);
  __spirv_AtomicIAdd(started, SCOPE_CROSS_DEVICE, SEM_SEQ_CST | SEM_CROSS_WG_MEMORY, 1);
  u64 n = 0;
  while (n < limit && __spirv_AtomicLoad(word, SCOPE_CROSS_DEVICE, SEM_SEQ_CST | SEM_CROSS_WG_MEMORY) == 0) n++;
  seen[g] = n < limit ? n : ~0ul;
}
