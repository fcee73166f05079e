/* check.h plus ZE(call): a Level Zero call that must succeed, and ze_compute_list, for the C test programs that
 * drive Level Zero. */
#ifndef XPUSHMEM_TEST_ZE_CHECK_H
#define XPUSHMEM_TEST_ZE_CHECK_H
#include <level_zero/ze_api.h>
#include <stdint.h>
#include <string.h>

#include "check.h"

#define ZE(call)                                                                          \
    do {                                                                                  \
        ze_result_t r_ = (call);                                                          \
        if (r_ != ZE_RESULT_SUCCESS) {                                                    \
            fprintf(stderr, "%s:%d: %s = 0x%x\n", __FILE__, __LINE__, #call, (unsigned)r_); \
            fflush(stderr);                                                               \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

/* An immediate command list on the device's first compute queue group, in `context`. */
static inline ze_command_list_handle_t ze_compute_list(ze_context_handle_t context, ze_device_handle_t device) {
    uint32_t ngroups = 0;
    ZE(zeDeviceGetCommandQueueGroupProperties(device, &ngroups, NULL));
    ze_command_queue_group_properties_t props[8];
    for (uint32_t i = 0; i < 8; i++) {
        memset(&props[i], 0, sizeof props[i]);
        props[i].stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES;
    }
    if (ngroups > 8) ngroups = 8;
    ZE(zeDeviceGetCommandQueueGroupProperties(device, &ngroups, props));
    uint32_t ordinal = 0;
    while (ordinal < ngroups && !(props[ordinal].flags & ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE)) ordinal++;
    CHECK(ordinal < ngroups, "a compute queue group");
    ze_command_queue_desc_t qdesc = {.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC,
                                     .ordinal = ordinal,
                                     .mode = ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS};
    ze_command_list_handle_t list;
    ZE(zeCommandListCreateImmediate(context, device, &qdesc, &list));
    return list;
}

#endif
