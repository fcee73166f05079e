/* Put/get ring: each PE puts its block to the right neighbour, then gets it back from there. */
#include <stdio.h>
#include <shmem.h>

#define N 1024

int main(void) {
    shmem_init();
    int me = shmem_my_pe(), npes = shmem_n_pes();
    int right = (me + 1) % npes, left = (me + npes - 1) % npes;
    long *dst = shmem_malloc(N * sizeof(long));
    long src[N], back[N];
    for (int i = 0; i < N; i++) src[i] = me * 100000L + i;
    shmem_long_put(dst, src, N, right);
    shmem_barrier_all();
    for (int i = 0; i < N; i++)
        if (dst[i] != left * 100000L + i) { printf("PE %d: dst[%d] = %ld\n", me, i, dst[i]); return 1; }
    shmem_get(back, dst, N, right); /* C11 generic */
    shmem_barrier_all();
    for (int i = 0; i < N; i++)
        if (back[i] != src[i]) { printf("PE %d: back[%d] = %ld\n", me, i, back[i]); return 1; }
    /* p/g around the ring with the generic interface */
    shmem_p(&dst[0], (long)(me + 7), right);
    shmem_barrier_all();
    if (dst[0] != left + 7 || shmem_g(&dst[0], right) != me + 7) { printf("PE %d: p/g\n", me); return 1; }
    shmem_barrier_all();
    shmem_free(dst);
    printf("ring OK on PE %d of %d\n", me, npes);
    shmem_finalize();
    return 0;
}
