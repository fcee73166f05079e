/* shmem_align returns addresses aligned to every power of two up to a quarter of the heap, on every PE (half the
 * heap and more when such an offset is free, NULL on every PE otherwise), and the memory is
 * symmetric (a put to the neighbour's copy lands at the same offset). */
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
    /* the largest alignments, half the heap, the whole heap and twice that: an address aligned to it on every PE,
     * or NULL on every PE when no such offset is free (the specification's null return) */
    static long got[3];
    for (int i = 0; i < 3; i++) {
        size_t a = (heap / 2) << i;
        long *p = shmem_align(a, sizeof(long));
        CHECK(p == NULL || (uintptr_t)p % a == 0, "shmem_align(%zu) returned %p", a, (void *)p);
        got[i] = p != NULL;
        shmem_barrier_all();
        long any = 0;
        for (int pe = 0; pe < npes; pe++) any += shmem_long_g(&got[i], pe);
        CHECK(any == 0 || any == npes, "shmem_align(%zu): %ld of %d PEs got memory", a, any, npes);
        shmem_barrier_all();
        if (p) shmem_free(p);
    }
    CHECK(got[0] == 1, "shmem_align(heap / 2) failed in an empty heap");
    PASS("align");
    shmem_finalize();
    return 0;
}
