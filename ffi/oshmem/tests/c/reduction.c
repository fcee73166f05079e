/* Reductions over the world and over a strided team. */
#include <stdio.h>
#include <shmem.h>

int main(void) {
    shmem_init();
    int me = shmem_my_pe(), npes = shmem_n_pes();
    int *x = shmem_malloc(4 * sizeof(int)), *r = shmem_malloc(4 * sizeof(int));
    double *d = shmem_malloc(2 * sizeof(double)), *dr = shmem_malloc(2 * sizeof(double));
    unsigned *u = shmem_malloc(sizeof(unsigned)), *ur = shmem_malloc(sizeof(unsigned));
    for (int i = 0; i < 4; i++) x[i] = me + i;
    d[0] = me + 0.5; d[1] = 2.0;
    *u = 1u << me;
    shmem_barrier_all();
    if (shmem_int_sum_reduce(SHMEM_TEAM_WORLD, r, x, 4) != 0) return 1;
    for (int i = 0; i < 4; i++)
        if (r[i] != npes * (npes - 1) / 2 + npes * i) { printf("sum [%d] = %d\n", i, r[i]); return 1; }
    if (shmem_max_reduce(SHMEM_TEAM_WORLD, r, x, 4) != 0 || r[0] != npes - 1) { printf("max\n"); return 1; }
    if (shmem_min_reduce(SHMEM_TEAM_WORLD, r, x, 4) != 0 || r[3] != 3) { printf("min\n"); return 1; }
    if (shmem_double_prod_reduce(SHMEM_TEAM_WORLD, dr, d, 2) != 0) return 1;
    double p = 1;
    for (int pe = 0; pe < npes; pe++) p *= pe + 0.5;
    if (dr[0] != p || dr[1] != (double)(1 << npes)) { printf("prod %g %g\n", dr[0], dr[1]); return 1; }
    if (shmem_or_reduce(SHMEM_TEAM_WORLD, ur, u, 1) != 0 || *ur != (1u << npes) - 1) { printf("or %u\n", *ur); return 1; }
    /* the even PEs as a team */
    shmem_team_t even = SHMEM_TEAM_INVALID;
    if (shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (npes + 1) / 2, NULL, 0, &even) != 0) return 1;
    if (me % 2 == 0) {
        if (even == SHMEM_TEAM_INVALID || shmem_team_my_pe(even) != me / 2) { printf("team\n"); return 1; }
        if (shmem_team_translate_pe(even, 0, SHMEM_TEAM_WORLD) != 0) { printf("translate\n"); return 1; }
        if (shmem_int_sum_reduce(even, r, x, 1) != 0) return 1;
        int want = 0;
        for (int pe = 0; pe < npes; pe += 2) want += pe;
        if (r[0] != want) { printf("team sum %d, expected %d\n", r[0], want); return 1; }
        shmem_team_destroy(even);
    } else if (even != SHMEM_TEAM_INVALID) { printf("odd PE got a team\n"); return 1; }
    shmem_barrier_all();
    shmem_free(ur); shmem_free(u); shmem_free(dr); shmem_free(d); shmem_free(r); shmem_free(x);
    printf("reduction OK on PE %d of %d\n", me, npes);
    shmem_finalize();
    return 0;
}
