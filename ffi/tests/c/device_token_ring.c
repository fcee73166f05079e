/* Device-initiated communication from C with only Level Zero and xpushmem.h: the runtime's Level Zero handles
 * (xpushmemx_ze_get_handles), our own module from SPIR-V linked with the installed device library, its state set
 * with xpushmemx_ze_module_init, our own immediate command list and launch. The kernel (examples/device/
 * token_ring.cl) passes a token round the ring with putmem_signal; PE k must get k, PE 0 gets n back.
 * Usage: device_token_ring MODULE.spv (run with XPUSHMEM_HEAP=device). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <xpushmem.h>

#include "ze_check.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s MODULE.spv\n", argv[0]);
    return 2;
  }
  FILE *f = fopen(argv[1], "rb");
  if (!f) {
    perror(argv[1]);
    return 1;
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *il = malloc((size_t)size);
  if (!il || fread(il, 1, (size_t)size, f) != (size_t)size) {
    fprintf(stderr, "reading %s failed\n", argv[1]);
    return 1;
  }
  fclose(f);

  OK(xpushmem_init());
  int me = xpushmem_my_pe(), n = xpushmem_n_pes();
  ze_driver_handle_t driver;
  ze_device_handle_t device;
  ze_context_handle_t context;
  OK(xpushmemx_ze_get_handles((void **)&driver, (void **)&device, (void **)&context));

  ze_module_desc_t mdesc = {.stype = ZE_STRUCTURE_TYPE_MODULE_DESC,
                            .format = ZE_MODULE_FORMAT_IL_SPIRV,
                            .inputSize = (size_t)size,
                            .pInputModule = il};
  ze_module_handle_t module;
  ZE(zeModuleCreate(context, device, &mdesc, &module, NULL));
  OK(xpushmemx_ze_module_init(module));
  ze_kernel_desc_t kdesc = {.stype = ZE_STRUCTURE_TYPE_KERNEL_DESC, .pKernelName = "token_ring"};
  ze_kernel_handle_t kernel;
  ZE(zeKernelCreate(module, &kdesc, &kernel));

  int64_t *token = xpushmem_calloc(1, sizeof(int64_t));
  uint64_t *sig = xpushmem_calloc(1, sizeof(uint64_t));
  int64_t *out = xpushmem_calloc(3, sizeof(int64_t));
  if (!token || !sig || !out) {
    fprintf(stderr, "xpushmem_calloc: %s\n", xpushmem_last_error());
    return 1;
  }
  ZE(zeKernelSetArgumentValue(kernel, 0, sizeof(token), &token));
  ZE(zeKernelSetArgumentValue(kernel, 1, sizeof(sig), &sig));
  ZE(zeKernelSetArgumentValue(kernel, 2, sizeof(out), &out));
  ZE(zeKernelSetGroupSize(kernel, 1, 1, 1));
  ze_command_queue_desc_t qdesc = {.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC,
                                   .mode = ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS};
  ze_command_list_handle_t list;
  ZE(zeCommandListCreateImmediate(context, device, &qdesc, &list));
  OK(xpushmem_barrier_all());
  /* The kernel waits for a signal: launch it cooperatively, after checking that its groups can all be resident. */
  uint32_t max_groups = 0;
  OK(xpushmemx_ze_check_cooperative(kernel, 1, &max_groups));
  if (max_groups < 1 || xpushmemx_ze_check_cooperative(kernel, max_groups + 1, NULL) != XPUSHMEM_ERROR_INVALID_ARGUMENT ||
      !strstr(xpushmem_last_error(), "group_count")) {
    fprintf(stderr, "PE %d: %u + 1 groups were not refused: %s\n", me, max_groups, xpushmem_last_error());
    return 1;
  }
  ze_group_count_t groups = {1, 1, 1};
  ZE(zeCommandListAppendLaunchCooperativeKernel(list, kernel, &groups, NULL, 0, NULL)); /* synchronous */

  /* Team numbers for kernels: the predefined teams' are fixed, a split team's is a slot past them, a bad handle is
   * an error. */
  xpushmem_team_t all;
  OK(xpushmem_team_split_strided(XPUSHMEM_TEAM_WORLD, 0, 1, n, NULL, 0, &all));
  int split_id = xpushmemx_team_device_id(all);
  if (xpushmemx_team_device_id(XPUSHMEM_TEAM_WORLD) != 0 || xpushmemx_team_device_id(XPUSHMEM_TEAM_SHARED) != 1 ||
      split_id < 2 || xpushmemx_team_device_id(12345) != -1 || !strstr(xpushmem_last_error(), "team")) {
    fprintf(stderr, "PE %d: team device ids: split %d: %s\n", me, split_id, xpushmem_last_error());
    return 1;
  }
  OK(xpushmem_team_destroy(all));

  int64_t got[3];
  OK(xpushmem_getmem(got, out, sizeof(got), me)); /* device memory: read through the runtime */
  int64_t want = me == 0 ? n : me;
  OK(xpushmem_barrier_all());
  ZE(zeCommandListDestroy(list));
  ZE(zeKernelDestroy(kernel));
  ZE(zeModuleDestroy(module));
  if (got[0] != want || got[2] != 0) {
    fprintf(stderr, "PE %d: token %lld (status %lld), expected %lld\n", me, (long long)got[0], (long long)got[2],
            (long long)want);
    return 1;
  }
  printf("device_token_ring OK on PE %d of %d (token %lld)\n", me, n, (long long)got[0]);
  OK(xpushmem_finalize());
  free(il);
  return 0;
}
