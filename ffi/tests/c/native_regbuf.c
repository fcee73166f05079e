/* Registered user buffers (xpushmemx_buffer_register/unregister): non-blocking puts from a registered buffer and
 * gets into one (1 MiB and a few bytes), the buffers changed only after quiet, the data checked on the target;
 * unregistering with a put in flight completes it first; every bad input fails naming its argument. Run at 2 PEs
 * on shared memory and over the fabric. */
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "xpushmem.h"
#include "check.h"

#define BIG ((1 << 17) + 3)
#define SMALL 5
#define REF(pe, i, salt) ((uint64_t)(pe) * 1000003u + (uint64_t)(i) * 7u + (uint64_t)(salt))

int main(void) {
    OK(xpushmem_init());
    int me = xpushmem_my_pe(), npes = xpushmem_n_pes();
    int right = (me + 1) % npes, left = (me + npes - 1) % npes;
    size_t total = BIG + SMALL;
    uint64_t *dst = (uint64_t *)xpushmem_calloc(total, sizeof(uint64_t));
    CHECK(dst != NULL, "calloc: %s", xpushmem_last_error());
    uint64_t *src = (uint64_t *)malloc(total * sizeof(uint64_t));
    uint64_t *back = (uint64_t *)malloc(total * sizeof(uint64_t));
    CHECK(src != NULL && back != NULL, "malloc");
    for (size_t i = 0; i < total; i++) src[i] = REF(me, i, 1);

    /* Puts from a registered buffer: a large and a small one, the buffer changed only after quiet. */
    OK(xpushmemx_buffer_register(src, total * sizeof(uint64_t)));
    OK(xpushmem_uint64_put_nbi(dst, src, BIG, right));
    OK(xpushmem_putmem_nbi(dst + BIG, src + BIG, SMALL * sizeof(uint64_t), right));
    OK(xpushmem_quiet());
    memset(src, 0, total * sizeof(uint64_t));
    OK(xpushmem_barrier_all());
    for (size_t i = 0; i < total; i++)
        CHECK(dst[i] == REF(left, i, 1), "put from a registered buffer: dst[%zu] = %llu", i,
              (unsigned long long)dst[i]);
    OK(xpushmem_barrier_all());

    /* Gets into a registered buffer (the right neighbour's dst holds what this PE put). */
    memset(back, 0xff, total * sizeof(uint64_t));
    OK(xpushmemx_buffer_register(back, total * sizeof(uint64_t)));
    OK(xpushmem_uint64_get_nbi(back, dst, BIG, right));
    OK(xpushmem_getmem_nbi(back + BIG, dst + BIG, SMALL * sizeof(uint64_t), right));
    OK(xpushmem_quiet());
    for (size_t i = 0; i < total; i++)
        CHECK(back[i] == REF(me, i, 1), "get into a registered buffer: back[%zu] = %llu", i,
              (unsigned long long)back[i]);
    OK(xpushmem_barrier_all());

    /* Bad input, each naming its argument and value. */
    FAILS(xpushmemx_buffer_register(NULL, 8), XPUSHMEM_ERROR_INVALID_ARGUMENT, "addr");
    FAILS(xpushmemx_buffer_register(src, 0), XPUSHMEM_ERROR_INVALID_ARGUMENT, "len");
    FAILS(xpushmemx_buffer_register(src + 8, 16), XPUSHMEM_ERROR_INVALID_ARGUMENT,
          "overlaps the registered range");
    FAILS(xpushmemx_buffer_register(dst, 8), XPUSHMEM_ERROR_INVALID_ARGUMENT, "symmetric heap");
    FAILS(xpushmemx_buffer_unregister(src + 1), XPUSHMEM_ERROR_INVALID_ARGUMENT,
          "no registered range starts there");

    /* Unregistering with a put in flight completes it first: the buffer may change right after. */
    for (size_t i = 0; i < BIG; i++) src[i] = REF(me, i, 2);
    OK(xpushmem_uint64_put_nbi(dst, src, BIG, right));
    OK(xpushmemx_buffer_unregister(src));
    memset(src, 0, BIG * sizeof(uint64_t));
    OK(xpushmem_barrier_all());
    for (size_t i = 0; i < BIG; i++)
        CHECK(dst[i] == REF(left, i, 2), "put completed by unregister: dst[%zu] = %llu", i,
              (unsigned long long)dst[i]);
    OK(xpushmemx_buffer_unregister(back));
    FAILS(xpushmemx_buffer_unregister(back), XPUSHMEM_ERROR_INVALID_ARGUMENT, "no registered range");
    OK(xpushmem_barrier_all());
    free(src);
    free(back);
    OK(xpushmem_free(dst));
    printf("native_regbuf OK on PE %d of %d\n", me, npes);
    OK(xpushmem_finalize());
    return 0;
}
