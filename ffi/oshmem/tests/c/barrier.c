/* Barriers: after each barrier every PE sees every other PE's round number. */
#include <stdio.h>
#include <shmem.h>

int main(void) {
    shmem_init();
    int me = shmem_my_pe(), npes = shmem_n_pes();
    int *round = shmem_calloc((size_t)npes, sizeof(int));
    for (int r = 1; r <= 50; r++) {
        for (int pe = 0; pe < npes; pe++) shmem_int_p(&round[me], r, pe);
        shmem_barrier_all();
        for (int pe = 0; pe < npes; pe++)
            if (round[pe] != r) { printf("PE %d round %d: PE %d at %d\n", me, r, pe, round[pe]); return 1; }
        shmem_barrier_all();
    }
    shmem_sync_all();
    if (shmem_team_sync(SHMEM_TEAM_WORLD) != 0) return 1;
    shmem_free(round);
    printf("barrier OK on PE %d of %d\n", me, npes);
    shmem_finalize();
    return 0;
}
