/* Runtime kernels: what the host runtime itself launches on a Device heap (not part of the user-facing device
 * library, xpushmem_device.cl).
 *
 * Host-initiated atomics on device memory (a peer's heap mapped through IPC, or our own) cannot be done with
 * CPU atomics on a discrete GPU, so the runtime launches one work-item of these kernels: it applies the
 * operation with a device-scope atomic (CrossDevice scope, so peers' kernels and copy engines observe it)
 * and writes the previous value to `result` (host-visible memory).
 *
 * Built with build.sh (clang-14 -> spir64 bitcode -> llvm-spirv-14 -> SPIR-V 1.x); the runtime embeds
 * prebuilt/xpushmem_runtime.spv, and a test checks that the committed file matches a fresh build.
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

/* Operation codes: XpushmemAmoCode, generated from shmem/src/abi.rs. */
#include "xpushmem_device_abi.h"
#define OP_FETCH XPUSHMEM_AMO_CODE_FETCH
#define OP_SET XPUSHMEM_AMO_CODE_SET
#define OP_SWAP XPUSHMEM_AMO_CODE_SWAP
#define OP_COMPARE_SWAP XPUSHMEM_AMO_CODE_COMPARE_SWAP
#define OP_FETCH_ADD XPUSHMEM_AMO_CODE_FETCH_ADD
#define OP_FETCH_AND XPUSHMEM_AMO_CODE_FETCH_AND
#define OP_FETCH_OR XPUSHMEM_AMO_CODE_FETCH_OR
#define OP_FETCH_XOR XPUSHMEM_AMO_CODE_FETCH_XOR

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
