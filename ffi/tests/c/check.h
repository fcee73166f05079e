/* Assertion helpers of the C test programs. */
#ifndef XPUSHMEM_TEST_CHECK_H
#define XPUSHMEM_TEST_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "CHECK failed at %s:%d: %s: ", __FILE__, __LINE__, #cond);   \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fprintf(stderr, "\n");                                                        \
            fflush(stderr);                                                               \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

/* A native call that must succeed (returns an error code). */
#define OK(call)                                                                          \
    do {                                                                                  \
        int rc_ = (call);                                                                 \
        if (rc_ != 0) {                                                                   \
            fprintf(stderr, "%s:%d: %s failed with %d (%s): %s\n", __FILE__, __LINE__,   \
                    #call, rc_, xpushmemx_error_name(rc_), xpushmem_last_error());        \
            fflush(stderr);                                                               \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

/* A native call that must fail with `code` and a message containing `text`. */
#define FAILS(call, code, text)                                                           \
    do {                                                                                  \
        int rc_ = (call);                                                                 \
        CHECK(rc_ == (code), "%s returned %d (%s), expected %d (%s); last error: %s",      \
              #call, rc_, xpushmemx_error_name(rc_), (code), xpushmemx_error_name(code),   \
              xpushmem_last_error());                                                     \
        CHECK(strstr(xpushmem_last_error(), (text)) != NULL,                               \
              "message of %s lacks \"%s\": %s", #call, (text), xpushmem_last_error());     \
    } while (0)

#endif
