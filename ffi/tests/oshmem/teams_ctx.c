/* Spec-exact returns of the team and context calls (OpenSHMEM 1.5/1.6 define a nonzero return, with the output
 * handle set to the INVALID value, for an invalid handle or a team that cannot be created: no abort even in the
 * default abort mode), shmem_info_get_name, fair _any forms, and collect into a buffer below its source. */
#include "check.h"
#include <string.h>

#define NV 8
static int flags[NV];

int main(void) {
    shmem_init();
    int me = shmem_my_pe(), npes = shmem_n_pes();
    char name[SHMEM_MAX_NAME_LEN];
    shmem_info_get_name(name);
    CHECK(strcmp(name, SHMEM_VENDOR_STRING) == 0, "name \"%s\" vs SHMEM_VENDOR_STRING \"%s\"", name, SHMEM_VENDOR_STRING);

    /* invalid handles: nonzero returns, INVALID outputs, no abort */
    shmem_team_t t = SHMEM_TEAM_WORLD, x = SHMEM_TEAM_WORLD, y = SHMEM_TEAM_WORLD;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_INVALID, 0, 1, 1, NULL, 0, &t) != 0 && t == SHMEM_TEAM_INVALID, "split of INVALID");
    CHECK(shmem_team_split_2d(SHMEM_TEAM_INVALID, 1, NULL, 0, &x, NULL, 0, &y) != 0 && x == SHMEM_TEAM_INVALID &&
              y == SHMEM_TEAM_INVALID, "split_2d of INVALID");
    shmem_team_config_t cfg;
    CHECK(shmem_team_get_config(SHMEM_TEAM_INVALID, SHMEM_TEAM_NUM_CONTEXTS, &cfg) != 0, "get_config of INVALID");
    shmem_ctx_t ctx = SHMEM_CTX_DEFAULT;
    CHECK(shmem_team_create_ctx(SHMEM_TEAM_INVALID, 0, &ctx) != 0 && ctx == SHMEM_CTX_INVALID, "create_ctx on INVALID");
    shmem_team_t of = SHMEM_TEAM_WORLD;
    CHECK(shmem_ctx_get_team(SHMEM_CTX_INVALID, &of) != 0 && of == SHMEM_TEAM_INVALID, "ctx_get_team of INVALID");
    CHECK(shmem_team_my_pe(SHMEM_TEAM_INVALID) == -1 && shmem_team_n_pes(SHMEM_TEAM_INVALID) == -1, "my_pe/n_pes of INVALID");
    CHECK(shmem_team_translate_pe(SHMEM_TEAM_INVALID, 0, SHMEM_TEAM_WORLD) == -1, "translate from INVALID");
    shmem_team_destroy(SHMEM_TEAM_INVALID); /* no operation */
    /* shmem_ctx_quiet, _fence and _destroy on SHMEM_CTX_INVALID: "no operation is performed" (the specification),
     * also in the default abort mode; the public suite's shmem_team_context quiets the context it failed to create */
    shmem_ctx_quiet(SHMEM_CTX_INVALID);
    shmem_ctx_fence(SHMEM_CTX_INVALID);
    shmem_ctx_destroy(SHMEM_CTX_INVALID);
    ctx = SHMEM_CTX_DEFAULT;
    CHECK(shmem_team_create_ctx(SHMEM_TEAM_INVALID, 0, &ctx) != 0, "create_ctx on INVALID");
    shmem_ctx_quiet(ctx);
    shmem_ctx_destroy(ctx);

    /* accessibility: every PE of the job is accessible via the data transfer routines, on this node or over the
     * network (whether shmem_ptr reaches it or not), and so is a symmetric address there; nothing else is */
    int on_stack = 0;
    for (int p = 0; p < npes; p++) {
        CHECK(shmem_pe_accessible(p) == 1, "shmem_pe_accessible(%d) = 0 (shmem_ptr: %p)", p, shmem_ptr(flags, p));
        CHECK(shmem_addr_accessible(flags, p) == 1, "shmem_addr_accessible(global, %d) = 0", p);
        CHECK(shmem_addr_accessible(&on_stack, p) == 0, "shmem_addr_accessible(stack, %d) = 1", p);
    }
    CHECK(shmem_pe_accessible(-1) == 0 && shmem_pe_accessible(npes) == 0, "PEs -1 and %d accessible", npes);
    CHECK(shmem_team_ptr(SHMEM_TEAM_INVALID, flags, 0) == NULL, "team_ptr on INVALID");
    CHECK(shmem_team_ptr(SHMEM_TEAM_WORLD, flags, me) == (void *)flags, "team_ptr to self");

    /* an invalid triplet: nonzero on every PE, INVALID handle */
    t = SHMEM_TEAM_WORLD;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, npes + 1, NULL, 0, &t) != 0 && t == SHMEM_TEAM_INVALID,
          "split with size %d of %d PEs", npes + 1, npes);

    /* contexts know their team */
    CHECK(shmem_ctx_get_team(SHMEM_CTX_DEFAULT, &of) == 0 && of == SHMEM_TEAM_WORLD, "default context's team");
    shmem_team_t evens;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (npes + 1) / 2, NULL, 0, &evens) == 0, "split evens");
    if (evens != SHMEM_TEAM_INVALID) {
        CHECK(shmem_team_ptr(evens, flags, 0) == shmem_ptr(flags, 0), "team_ptr to the even team's PE 0");
        CHECK(shmem_team_ptr(evens, flags, shmem_team_n_pes(evens)) == NULL, "team_ptr past the team");
        CHECK(shmem_team_create_ctx(evens, 0, &ctx) == 0 && ctx != SHMEM_CTX_INVALID, "ctx on evens");
        CHECK(shmem_ctx_get_team(ctx, &of) == 0 && of == evens, "ctx's team");
        shmem_ctx_destroy(ctx);
        shmem_team_destroy(evens);
    } else {
        CHECK(me % 2 == 1, "PE %d not in the even team", me);
    }

    /* fair _any: with every variable satisfied, repeated calls report every index (rotating start) */
    for (int i = 0; i < NV; i++) flags[i] = 1;
    int seen[NV] = {0}, seen_w[NV] = {0};
    for (int k = 0; k < NV; k++) {
        size_t i = shmem_int_test_any(flags, NV, NULL, SHMEM_CMP_EQ, 1);
        CHECK(i < NV, "test_any %zu", i);
        seen[i] = 1;
    }
    for (int k = 0; k < NV; k++) {
        size_t j = shmem_int_wait_until_any(flags, NV, NULL, SHMEM_CMP_EQ, 1);
        CHECK(j < NV, "wait_until_any %zu", j);
        seen_w[j] = 1;
    }
    for (int i = 0; i < NV; i++) CHECK(seen[i] && seen_w[i], "index %d never reported", i);

    /* collect into a destination allocated below its source (the destination's extent is only known after the
     * exchange: no false overlap) */
    long *dest = shmem_malloc(sizeof(long) * 2 * npes);
    long *src = shmem_malloc(sizeof(long) * 2);
    CHECK(dest < src, "allocation order");
    int mine = me % 2 + 1; /* 1 or 2 elements */
    src[0] = 10 * me;
    src[1] = 10 * me + 1;
    CHECK(shmem_long_collect(SHMEM_TEAM_WORLD, dest, src, mine) == 0, "collect");
    int k = 0;
    for (int p = 0; p < npes; p++)
        for (int e = 0; e < p % 2 + 1; e++, k++) CHECK(dest[k] == 10 * p + e, "dest[%d] = %ld", k, dest[k]);
#ifdef XPUSHMEM_SHMEM_H /* xpushmem's extensions (the Open MPI cross-check skips this part) */
    /* a real overlap fails on every PE (return mode) */
    xpushmemx_set_error_mode(XPUSHMEMX_ERROR_MODE_RETURN);
    CHECK(shmem_long_collect(SHMEM_TEAM_WORLD, dest, dest, 1) != 0, "overlapping collect succeeded");
    CHECK(strstr(xpushmem_last_error(), "overlap") != NULL, "message: %s", xpushmem_last_error());
    xpushmemx_set_error_mode(XPUSHMEMX_ERROR_MODE_ABORT);
#endif
    shmem_free(src);
    shmem_free(dest);

    /* back-to-back collectives on the world (the public suite's shmem_team_b2b_collectives, with every destination
     * large enough for its result: that program gives collect, fcollect and alltoall a destination of NELEMS
     * elements, so at 2 PEs and more their results run into the source allocated after it) */
    enum { B2B = 10, ITERS = 20 };
    long *bd = shmem_malloc(sizeof(long) * B2B * npes), *bs = shmem_malloc(sizeof(long) * B2B * npes);
    for (int i = 0; i < B2B * npes; i++) bs[i] = 1000 * me + i;
    for (int it = 0; it < ITERS; it++) {
        CHECK(shmem_long_broadcast(SHMEM_TEAM_WORLD, bd, bs, B2B, 0) == 0, "broadcast %d", it);
        CHECK(bd[B2B - 1] == B2B - 1, "broadcast %d: %ld", it, bd[B2B - 1]);
    }
    for (int it = 0; it < ITERS; it++) {
        CHECK(shmem_long_sum_reduce(SHMEM_TEAM_WORLD, bd, bs, B2B) == 0, "reduce %d", it);
        CHECK(bd[1] == 1000L * npes * (npes - 1) / 2 + npes, "reduce %d: %ld", it, bd[1]);
    }
    for (int it = 0; it < ITERS; it++) {
        CHECK(shmem_long_collect(SHMEM_TEAM_WORLD, bd, bs, B2B) == 0, "collect %d", it);
        CHECK(bd[B2B * npes - 1] == 1000L * (npes - 1) + B2B - 1, "collect %d", it);
        CHECK(shmem_long_fcollect(SHMEM_TEAM_WORLD, bd, bs, B2B) == 0, "fcollect %d", it);
        CHECK(bd[B2B * npes - 1] == 1000L * (npes - 1) + B2B - 1, "fcollect %d", it);
    }
    for (int it = 0; it < ITERS; it++) {
        CHECK(shmem_long_alltoall(SHMEM_TEAM_WORLD, bd, bs, 1) == 0, "alltoall %d", it);
        CHECK(bd[npes - 1] == 1000L * (npes - 1) + me, "alltoall %d", it);
        CHECK(shmem_long_alltoalls(SHMEM_TEAM_WORLD, bd, bs, 1, 1, 1) == 0, "alltoalls %d", it);
        CHECK(bd[npes - 1] == 1000L * (npes - 1) + me, "alltoalls %d", it);
    }
    shmem_free(bs);
    shmem_free(bd);

    /* the team synchronisation: C11's shmem_sync(team) and shmem_team_sync, on the world and on the even PEs
     * (after a sync every member's quieted put has landed) */
    static long arrived[2 * 8];
    shmem_team_t sevens = SHMEM_TEAM_INVALID;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (npes + 1) / 2, NULL, 0, &sevens) == 0, "split evens");
    for (int k = 1; k <= 5; k++) {
        shmem_long_p(&arrived[me % 16], k, 0);
        shmem_quiet();
        CHECK(shmem_sync(SHMEM_TEAM_WORLD) == 0, "shmem_sync(world)");
        if (me == 0)
            for (int p = 0; p < npes && p < 16; p++) CHECK(shmem_long_g(&arrived[p], 0) == k, "round %d: PE %d", k, p);
        CHECK(shmem_team_sync(SHMEM_TEAM_WORLD) == 0, "shmem_team_sync(world)");
        if (sevens != SHMEM_TEAM_INVALID) CHECK(shmem_sync(sevens) == 0 && shmem_team_sync(sevens) == 0, "sync evens");
    }
    shmem_team_destroy(sevens);
    PASS("teams_ctx");
    shmem_finalize();
    return 0;
}
