/* xpushmem device library, runtime part: kernels the host runtime launches on a Device heap.
 *
 * Host-initiated atomics on device memory (a peer's heap mapped through IPC, or our own) cannot be done with
 * CPU atomics on a discrete GPU, so the runtime launches one work-item of these kernels: it applies the
 * operation with a device-scope atomic (CrossDevice scope, so peers' kernels and copy engines observe it)
 * and writes the previous value to `result` (host-visible memory).
 *
 * Built with build.sh (clang-14 -> spir64 bitcode -> llvm-spirv-14 -> SPIR-V 1.x); the runtime embeds
 * prebuilt/xpushmem_device.spv, and a test checks that the committed file matches a fresh build.
 * SPIR-V builtins are called directly (OpenCL-C generic-pointer atomics fail to JIT on Intel's CPU runtime). */
typedef unsigned long u64;
typedef unsigned int u32;
#define G __global

#define SCOPE_CROSS_DEVICE 0
#define SEM_SEQ_CST 0x10
#define SEM_CROSS_WG_MEMORY 0x200
#define SEM (SEM_SEQ_CST | SEM_CROSS_WG_MEMORY)

#define DECLARE_ATOMICS(T)                                                                                       \
  T __attribute__((overloadable)) __spirv_AtomicLoad(G T *p, int scope, int sem);                                \
  void __attribute__((overloadable)) __spirv_AtomicStore(G T *p, int scope, int sem, T v);                       \
  T __attribute__((overloadable)) __spirv_AtomicExchange(G T *p, int scope, int sem, T v);                       \
  T __attribute__((overloadable)) __spirv_AtomicCompareExchange(G T *p, int scope, int eq, int neq, T v, T cmp); \
  T __attribute__((overloadable)) __spirv_AtomicIAdd(G T *p, int scope, int sem, T v);                           \
  T __attribute__((overloadable)) __spirv_AtomicAnd(G T *p, int scope, int sem, T v);                            \
  T __attribute__((overloadable)) __spirv_AtomicOr(G T *p, int scope, int sem, T v);                             \
  T __attribute__((overloadable)) __spirv_AtomicXor(G T *p, int scope, int sem, T v);
DECLARE_ATOMICS(u64)
DECLARE_ATOMICS(u32)

/* Operation codes, shared with shmem/src/device (AmoCode). */
#define OP_FETCH 0
#define OP_SET 1
#define OP_SWAP 2
#define OP_COMPARE_SWAP 3
#define OP_FETCH_ADD 4
#define OP_FETCH_AND 5
#define OP_FETCH_OR 6
#define OP_FETCH_XOR 7

#define AMO_BODY(T)                                                                          \
  T old = 0;                                                                                 \
  switch (op) {                                                                              \
  case OP_FETCH: old = __spirv_AtomicLoad(target, SCOPE_CROSS_DEVICE, SEM); break;           \
  case OP_SET: __spirv_AtomicStore(target, SCOPE_CROSS_DEVICE, SEM, (T)operand); break;      \
  case OP_SWAP: old = __spirv_AtomicExchange(target, SCOPE_CROSS_DEVICE, SEM, (T)operand); break; \
  case OP_COMPARE_SWAP:                                                                      \
    old = __spirv_AtomicCompareExchange(target, SCOPE_CROSS_DEVICE, SEM, SEM, (T)operand, (T)cond); \
    break;                                                                                   \
  case OP_FETCH_ADD: old = __spirv_AtomicIAdd(target, SCOPE_CROSS_DEVICE, SEM, (T)operand); break; \
  case OP_FETCH_AND: old = __spirv_AtomicAnd(target, SCOPE_CROSS_DEVICE, SEM, (T)operand); break; \
  case OP_FETCH_OR: old = __spirv_AtomicOr(target, SCOPE_CROSS_DEVICE, SEM, (T)operand); break;   \
  case OP_FETCH_XOR: old = __spirv_AtomicXor(target, SCOPE_CROSS_DEVICE, SEM, (T)operand); break; \
  }                                                                                          \
  *result = (u64)old;

/* One atomic on a 64-bit word; the previous value goes to *result. Launch with one work-item. */
__kernel void xpushmem_amo64(G u64 *target, u32 op, u64 operand, u64 cond, G u64 *result) { AMO_BODY(u64) }

/* One atomic on a 32-bit word; the previous value (zero-extended) goes to *result. One work-item. */
__kernel void xpushmem_amo32(G u32 *target, u32 op, u64 operand, u64 cond, G u64 *result) { AMO_BODY(u32) }
