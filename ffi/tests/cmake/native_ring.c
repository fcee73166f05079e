/* The CMake project's native program: each PE puts its number to its right neighbour, checked after a barrier;
 * the op family's header compiles and its library call links (xpushmem::ops). */
#include <stdio.h>
#include <xpushmem.h>
#include <xpushmem_ops.h>

int main(void) {
    if (xpushmem_init() != 0) return 1;
    int me = xpushmem_my_pe(), n = xpushmem_n_pes();
    int *slot = xpushmem_malloc(sizeof(int));
    if (slot == NULL) return 2;
    *slot = -1;
    xpushmem_barrier_all();
    if (xpushmem_int_p(slot, me, (me + 1) % n) != 0) return 3;
    xpushmem_barrier_all();
    int left = (me + n - 1) % n;
    if (*slot != left) {
        printf("PE %d: got %d, expected %d\n", me, *slot, left);
        return 4;
    }
    (void)xpushmem_ops_last_error_code();
    printf("native_ring OK on PE %d of %d\n", me, n);
    xpushmem_free(slot);
    xpushmem_finalize();
    return 0;
}
