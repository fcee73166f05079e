/* Shared by the conformance programs: CHECK prints the failing condition with the PE and exits non-zero. */
#ifndef CONFORMANCE_CHECK_H
#define CONFORMANCE_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include <shmem.h>

#define CHECK(cond, ...)                                                                          \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            printf("PE %d: check failed at %s:%d: %s: ", shmem_my_pe(), __FILE__, __LINE__, #cond); \
            printf(__VA_ARGS__);                                                                  \
            printf("\n");                                                                         \
            fflush(stdout);                                                                       \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

#define PASS(name)                                                                    \
    do {                                                                              \
        printf(name " OK on PE %d of %d\n", shmem_my_pe(), shmem_n_pes());           \
        fflush(stdout);                                                               \
    } while (0)
#endif
