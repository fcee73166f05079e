/* check.h plus ZE(call): a Level Zero call that must succeed, for the C test programs that drive Level Zero. */
#ifndef XPUSHMEM_TEST_ZE_CHECK_H
#define XPUSHMEM_TEST_ZE_CHECK_H
#include <level_zero/ze_api.h>

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

#endif
