/* shmem_align returns addresses aligned to every power of two up to a quarter of the heap, on every PE, and the
 * memory is symmetric (a put to the neighbour's copy lands at the same offset). */
#include "check.h"
#include <stdint.h>

size_t xpushmemx_heap_size(void); /* extension of libxpushmem, exported by the OpenSHMEM library too */

int main(void) {
    shmem_init();
    int me = shmem_my_pe(), npes = shmem_n_pes();
    size_t heap = xpushmemx_heap_size();
    CHECK(heap >= (1u << 20), "heap of %zu bytes", heap);
    int tried = 0;
    for (size_t a = 1; a <= heap / 4; a <<= 1) {
        long *p = shmem_align(a, 2 * sizeof(long));
        CHECK(p != NULL, "shmem_align(%zu) returned NULL", a);
        CHECK((uintptr_t)p % a == 0, "shmem_align(%zu) returned %p", a, (void *)p);
        p[0] = -1;
        shmem_barrier_all();
        shmem_long_p(p, me, (me + 1) % npes);
        shmem_barrier_all();
        CHECK(p[0] == (me + npes - 1) % npes, "alignment %zu: got %ld", a, p[0]);
        shmem_free(p);
        tried++;
    }
    /* a second live allocation at a large alignment next to a small one */
    char *small = shmem_malloc(100);
    double *big = shmem_align(heap / 8, sizeof(double));
    CHECK(small != NULL && big != NULL && (uintptr_t)big % (heap / 8) == 0, "%p %p", (void *)small, (void *)big);
    shmem_free(big);
    shmem_free(small);
    CHECK(tried >= 20, "only %d alignments tried", tried);
    PASS("align");
    shmem_finalize();
    return 0;
}
