/* Contexts, non-blocking AMOs, the generic interfaces with a context, wait/test generics, and error returns in
 * XPUSHMEM_ERROR_MODE=return. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <shmem.h>

/* Native team calls (libxpushmem_oshmem exports them; xpushmem.h is not on this program's include path). A
 * shmem_team_t is the native team id plus one. */
extern int xpushmem_team_n_pes(int32_t team);
extern int xpushmem_team_my_pe(int32_t team);
extern int xpushmem_int_sum_reduce(int32_t team, int *dest, const int *source, size_t nreduce);

#define FAIL(...) do { printf(__VA_ARGS__); printf("\n"); return 1; } while (0)

int main(void) {
    int provided = -1;
    if (shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided) != 0 || provided != SHMEM_THREAD_MULTIPLE) FAIL("init_thread");
    int me = shmem_my_pe(), npes = shmem_n_pes();
    int right = (me + 1) % npes, left = (me + npes - 1) % npes;
    shmem_ctx_t ctx = SHMEM_CTX_INVALID;
    if (shmem_ctx_create(SHMEM_CTX_PRIVATE, &ctx) != 0 || ctx == SHMEM_CTX_INVALID) FAIL("ctx_create");
    shmem_team_t t = SHMEM_TEAM_INVALID;
    if (shmem_ctx_get_team(ctx, &t) != 0 || t != SHMEM_TEAM_WORLD) FAIL("ctx_get_team");
    long *w = shmem_calloc(8, sizeof(long));
    double *d = shmem_calloc(4, sizeof(double));
    /* context RMA and AMO, plain and generic */
    shmem_ctx_long_p(ctx, &w[0], 10 + me, right);
    shmem_put(ctx, &w[1], &w[0], 0, right);
    shmem_atomic_add(ctx, &w[2], 5L, 0);
    shmem_ctx_double_put(SHMEM_CTX_DEFAULT, d, (double[]){1.5, 2.5}, 2, right);
    shmem_ctx_quiet(ctx);
    shmem_barrier_all();
    if (w[0] != 10 + left || d[1] != 2.5) FAIL("ctx put");
    if (me == 0 && w[2] != 5L * npes) FAIL("ctx atomic_add %ld", w[2]);
    long old = -1;
    shmem_atomic_fetch_add_nbi(&old, &w[3], 2L, right);
    shmem_long_atomic_compare_swap_nbi(&w[4], &w[5], 0L, 9L, right);
    shmem_quiet();
    if (old < 0) FAIL("fetch_add_nbi");
    shmem_barrier_all();
    if (w[3] != 2 || w[5] != 9) FAIL("nbi amos %ld %ld", w[3], w[5]);
    if (shmem_atomic_fetch(&w[5], me) != 9L) FAIL("generic fetch");
    if (shmem_atomic_fetch(ctx, &w[5], left) != 9L) FAIL("generic ctx fetch");
    /* wait/test generics */
    if (shmem_test(&w[5], SHMEM_CMP_EQ, 9L) != 1) FAIL("test");
    shmem_wait_until_all(&w[3], 3, NULL, SHMEM_CMP_GE, 0L);
    size_t idx[3];
    if (shmem_test_some(&w[3], 3, idx, NULL, SHMEM_CMP_EQ, 9L) != 1 || idx[0] != 2) FAIL("test_some");
    shmem_ctx_destroy(ctx);
    shmem_barrier_all();

    /* errors: return mode, messages in xpushmem_last_error() */
    if (xpushmemx_set_error_mode(0) != 0) FAIL("set_error_mode");
    shmem_long_p(&w[0], 1, -1);
    if (strstr(xpushmem_last_error(), "invalid PE -1") == NULL) FAIL("message: %s", xpushmem_last_error());
    shmem_long_put(w, w, 1, npes);
    if (strstr(xpushmem_last_error(), "invalid PE") == NULL) FAIL("message: %s", xpushmem_last_error());
    long stack = 0;
    shmem_long_p(&stack, 1, 0);
    if (strstr(xpushmem_last_error(), "not symmetric") == NULL) FAIL("message: %s", xpushmem_last_error());
    shmem_ctx_long_p(ctx, &w[0], 1, 0); /* destroyed context */
    if (strstr(xpushmem_last_error(), "not a live context") == NULL) FAIL("message: %s", xpushmem_last_error());
    if (shmem_long_sum_reduce(SHMEM_TEAM_INVALID, w, w, 1) == 0) FAIL("reduce on an invalid team");
    if (shmem_team_my_pe(SHMEM_TEAM_INVALID) != -1) FAIL("team_my_pe invalid");
    if (shmem_ptr(w, right) == NULL) FAIL("ptr");
    /* one team table for both APIs: a team split here is usable with the native calls */
    shmem_team_t last = SHMEM_TEAM_INVALID;
    if (shmem_team_split_strided(SHMEM_TEAM_WORLD, 1, 1, npes - 1, NULL, 0, &last) != 0) FAIL("split");
    if (me >= 1) {
        int32_t nat = (int32_t)((uintptr_t)last - 1);
        if (xpushmem_team_n_pes(nat) != npes - 1 || xpushmem_team_my_pe(nat) != me - 1) FAIL("native view of a team");
        int *x = (int *)&w[6];
        *x = me;
        if (xpushmem_int_sum_reduce(nat, x, x, 1) != 0 || *x != npes * (npes - 1) / 2) FAIL("native reduce on a shmem team %d", *x);
    } else if (last != SHMEM_TEAM_INVALID) FAIL("PE 0 got a team");
    shmem_team_destroy(last); /* SHMEM_TEAM_INVALID on PE 0: no effect */
    if (xpushmem_team_n_pes(0) != npes) FAIL("native world");
    shmem_barrier_all();
    shmem_free(d);
    shmem_free(w);
    printf("api OK on PE %d of %d\n", me, npes);
    shmem_finalize();
    return 0;
}
