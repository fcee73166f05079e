/* alltoall, alltoalls, fcollect, collect. */
#include <stdio.h>
#include <shmem.h>

int main(void) {
    shmem_init();
    int me = shmem_my_pe(), npes = shmem_n_pes();
    const int K = 3;
    int *src = shmem_malloc((size_t)(npes * K) * sizeof(int) * 2), *dst = shmem_malloc((size_t)(npes * K) * sizeof(int) * 2);
    for (int j = 0; j < npes * K; j++) src[j] = me * 100 + j;
    shmem_barrier_all();
    if (shmem_alltoall(SHMEM_TEAM_WORLD, dst, src, K) != 0) return 1;
    for (int i = 0; i < npes; i++)
        for (int k = 0; k < K; k++)
            if (dst[i * K + k] != i * 100 + me * K + k) { printf("alltoall [%d][%d] = %d\n", i, k, dst[i * K + k]); return 1; }
    if (shmem_int_fcollect(SHMEM_TEAM_WORLD, dst, src, 2) != 0) return 1;
    for (int i = 0; i < npes; i++)
        if (dst[2 * i] != i * 100 || dst[2 * i + 1] != i * 100 + 1) { printf("fcollect\n"); return 1; }
    /* collect: PE i contributes i + 1 elements */
    if (shmem_collect(SHMEM_TEAM_WORLD, dst, src, (size_t)me + 1) != 0) return 1;
    int at = 0;
    for (int i = 0; i < npes; i++)
        for (int k = 0; k <= i; k++)
            if (dst[at++] != i * 100 + k) { printf("collect [%d]\n", at - 1); return 1; }
    long *ls = shmem_malloc((size_t)npes * 2 * sizeof(long)), *ld = shmem_calloc((size_t)npes * 2, sizeof(long));
    for (int j = 0; j < npes * 2; j++) ls[j] = me * 10 + j;
    shmem_barrier_all();
    if (shmem_long_alltoalls(SHMEM_TEAM_WORLD, ld, ls, 2, 2, 1) != 0) return 1;
    for (int i = 0; i < npes; i++)
        if (ld[2 * i] != i * 10 + 2 * me) { printf("alltoalls [%d] = %ld\n", i, ld[2 * i]); return 1; }
    shmem_free(ld); shmem_free(ls); shmem_free(dst); shmem_free(src);
    printf("alltoall OK on PE %d of %d\n", me, npes);
    shmem_finalize();
    return 0;
}
