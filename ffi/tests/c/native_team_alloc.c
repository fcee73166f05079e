/* Team-scoped allocations through the C ABI (issue #30, item 6): the PEs but PE 0 allocate on their team while PE 0
 * does not call; then every PE allocates on a split team of all of them (the members' histories differ, the address
 * is still symmetric among them), with data moving between members; a mismatched size fails on every member; the
 * world's free refuses a team allocation; xpushmem_team_free frees it.
 * Prints "native_team_alloc OK on PE <me> of <n>" at the end. */
#include <stdint.h>
#include <stddef.h>
#include "xpushmem.h"
#include "check.h"

int main(void) {
    OK(xpushmem_init());
    int me = xpushmem_my_pe(), npes = xpushmem_n_pes();
    xpushmem_team_t rest = XPUSHMEM_TEAM_INVALID, all = XPUSHMEM_TEAM_INVALID;
    OK(xpushmem_team_split_strided(XPUSHMEM_TEAM_WORLD, 1, 1, npes - 1, NULL, 0, &rest));
    OK(xpushmem_team_split_strided(XPUSHMEM_TEAM_WORLD, 0, 1, npes, NULL, 0, &all));

    long *c = NULL;
    if (me != 0) {
        c = (long *)xpushmem_team_malloc(rest, 100 * sizeof(long));
        CHECK(c != NULL, "team_malloc on the team without PE 0: %s", xpushmem_last_error());
        int r = xpushmem_team_my_pe(rest), k = xpushmem_team_n_pes(rest);
        int next = xpushmem_team_translate_pe(rest, (r + 1) % k, XPUSHMEM_TEAM_WORLD);
        int prev = xpushmem_team_translate_pe(rest, (r + k - 1) % k, XPUSHMEM_TEAM_WORLD);
        for (int i = 0; i < 100; i++) OK(xpushmem_long_p(&c[i], me * 1000 + i, next));
        OK(xpushmem_quiet());
        OK(xpushmem_team_sync(rest));
        for (int i = 0; i < 100; i++) CHECK(c[i] == prev * 1000 + i, "c[%d] = %ld from PE %d", i, c[i], prev);
    }

    int *b = (int *)xpushmem_team_calloc(all, 256, sizeof(int));
    CHECK(b != NULL, "team_calloc on every PE: %s", xpushmem_last_error());
    for (int i = 0; i < 256; i++) CHECK(b[i] == 0, "team_calloc: b[%d] = %d", i, b[i]);
    OK(xpushmem_barrier_all());
    for (int i = 0; i < 256; i++) OK(xpushmem_int_p(&b[i], me + 7 + i, (me + 1) % npes));
    OK(xpushmem_barrier_all());
    for (int i = 0; i < 256; i++)
        CHECK(b[i] == (me + npes - 1) % npes + 7 + i, "b[%d] = %d", i, b[i]);

    void *m = xpushmem_team_malloc(all, me == npes - 1 ? 64 : 128);
    CHECK(m == NULL && xpushmem_last_error_code() == XPUSHMEM_ERROR_MISMATCH, "mismatched team_malloc: %s",
          xpushmem_last_error());
    CHECK(xpushmem_free(b) != 0 && strstr(xpushmem_last_error(), "team_free") != NULL, "world free of a team block: %s",
          xpushmem_last_error());
    OK(xpushmem_team_free(all, b));
    if (me != 0) OK(xpushmem_team_free(rest, c));
    if (rest != XPUSHMEM_TEAM_INVALID) OK(xpushmem_team_destroy(rest));
    OK(xpushmem_team_destroy(all));
    OK(xpushmem_finalize());
    printf("native_team_alloc OK on PE %d of %d\n", me, npes);
    return 0;
}
