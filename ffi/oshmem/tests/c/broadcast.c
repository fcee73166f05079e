/* Broadcast from every root in turn, typed and bytes. */
#include <stdio.h>
#include <shmem.h>

int main(void) {
    shmem_init();
    int me = shmem_my_pe(), npes = shmem_n_pes();
    long *src = shmem_malloc(64 * sizeof(long)), *dst = shmem_malloc(64 * sizeof(long));
    for (int root = 0; root < npes; root++) {
        for (int i = 0; i < 64; i++) { src[i] = me * 1000 + i; dst[i] = -1; }
        shmem_barrier_all();
        if (shmem_broadcast(SHMEM_TEAM_WORLD, dst, src, 64, root) != 0) return 1;
        for (int i = 0; i < 64; i++)
            if (dst[i] != root * 1000 + i) { printf("PE %d root %d: dst[%d]=%ld\n", me, root, i, dst[i]); return 1; }
    }
    char *bs = shmem_malloc(10), *bd = shmem_calloc(10, 1);
    if (me == 1) for (int i = 0; i < 10; i++) bs[i] = (char)('a' + i);
    shmem_barrier_all();
    if (shmem_broadcastmem(SHMEM_TEAM_WORLD, bd, bs, 10, 1) != 0) return 1;
    for (int i = 0; i < 10; i++) if (bd[i] != 'a' + i) { printf("broadcastmem\n"); return 1; }
    shmem_free(bd); shmem_free(bs); shmem_free(dst); shmem_free(src);
    printf("broadcast OK on PE %d of %d\n", me, npes);
    shmem_finalize();
    return 0;
}
