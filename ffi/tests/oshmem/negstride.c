/* shmem_team_split_strided with a negative stride (OpenSHMEM 1.6): the members start, start + stride, ... in that
 * (descending) order. The reversed world and every other PE counted down from the last: numbering, translation,
 * membership, collectives whose results depend on the member order (broadcast root, fcollect, collect, alltoall),
 * a context on the reversed team (its PE numbers are the team's), a split of the reversed team with a negative
 * stride (the world's order again), and invalid triplets (nonzero return and SHMEM_TEAM_INVALID on every PE). On
 * global arrays. */
#include "check.h"

#define MAXPE 8
static int src[MAXPE], dst[MAXPE * 2];
static long lsum, lsrc;
static int hits, mine;

int main(void) {
    shmem_init();
    int me = shmem_my_pe(), npes = shmem_n_pes();
    CHECK(npes <= MAXPE, "at most %d PEs", MAXPE);

    /* the reversed world */
    shmem_team_t rev;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, npes - 1, -1, npes, NULL, 0, &rev) == 0, "split -1");
    CHECK(rev != SHMEM_TEAM_INVALID, "every PE is a member");
    CHECK(shmem_team_n_pes(rev) == npes && shmem_team_my_pe(rev) == npes - 1 - me, "my_pe %d", shmem_team_my_pe(rev));
    for (int k = 0; k < npes; k++) {
        CHECK(shmem_team_translate_pe(rev, k, SHMEM_TEAM_WORLD) == npes - 1 - k, "translate %d", k);
        CHECK(shmem_team_translate_pe(SHMEM_TEAM_WORLD, k, rev) == npes - 1 - k, "translate back %d", k);
    }
    /* member k contributes the world number of member k: results in member order */
    src[0] = me;
    CHECK(shmem_int_fcollect(rev, dst, src, 1) == 0, "fcollect");
    for (int k = 0; k < npes; k++) CHECK(dst[k] == npes - 1 - k, "fcollect [%d] = %d", k, dst[k]);
    CHECK(shmem_int_broadcast(rev, dst, src, 1, 0) == 0, "broadcast");
    CHECK(dst[0] == npes - 1, "broadcast from member 0 (PE %d) gave %d", npes - 1, dst[0]);
    /* collect: member k gives k % 2 + 1 elements, each its world number */
    int mk = npes - 1 - me;
    src[0] = src[1] = me;
    CHECK(shmem_int_collect(rev, dst, src, (size_t)(mk % 2 + 1)) == 0, "collect");
    for (int k = 0, at = 0; k < npes; k++)
        for (int j = 0; j < k % 2 + 1; j++, at++) CHECK(dst[at] == npes - 1 - k, "collect [%d] = %d", at, dst[at]);
    /* alltoall: block k of my source goes to member k; it holds my world number * 10 + k */
    for (int k = 0; k < npes; k++) src[k] = me * 10 + k;
    CHECK(shmem_int_alltoall(rev, dst, src, 1) == 0, "alltoall");
    for (int k = 0; k < npes; k++) CHECK(dst[k] == (npes - 1 - k) * 10 + mk, "alltoall [%d] = %d", k, dst[k]);
    lsrc = me + 1;
    CHECK(shmem_long_sum_reduce(rev, &lsum, &lsrc, 1) == 0 && lsum == (long)npes * (npes + 1) / 2, "sum %ld", lsum);
    shmem_team_sync(rev);

    /* a context on the reversed team addresses the team's PE numbers: its member 0 is PE npes - 1 */
    shmem_ctx_t rctx;
    CHECK(shmem_team_create_ctx(rev, 0, &rctx) == 0, "team_create_ctx");
    mine = me;
    shmem_barrier_all();
    shmem_ctx_int_atomic_add(rctx, &hits, 1, 0);
    CHECK(shmem_ctx_int_g(rctx, &mine, 0) == npes - 1, "ctx g from team member 0");
    CHECK(shmem_ctx_int_g(rctx, &mine, npes - 1) == 0, "ctx g from the last team member");
    shmem_ctx_quiet(rctx);
    shmem_barrier_all();
    CHECK(hits == (me == npes - 1 ? npes : 0), "ctx atomic_add landed on team member 0: hits %d", hits);
    shmem_ctx_destroy(rctx);

    /* a split of the reversed team, counted down again: the world's order */
    shmem_team_t fwd;
    CHECK(shmem_team_split_strided(rev, npes - 1, -1, npes, NULL, 0, &fwd) == 0, "split of split");
    CHECK(shmem_team_my_pe(fwd) == me && shmem_team_translate_pe(fwd, me, SHMEM_TEAM_WORLD) == me, "fwd numbering");
    src[0] = me;
    CHECK(shmem_int_fcollect(fwd, dst, src, 1) == 0, "fwd fcollect");
    for (int k = 0; k < npes; k++) CHECK(dst[k] == k, "fwd fcollect [%d] = %d", k, dst[k]);
    shmem_team_destroy(fwd);

    /* every other PE counted down from the last: PEs npes-1, npes-3, ... */
    int half = (npes + 1) / 2;
    shmem_team_t odd;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, npes - 1, -2, half, NULL, 0, &odd) == 0, "split -2");
    int member = (npes - 1 - me) % 2 == 0;
    CHECK((odd != SHMEM_TEAM_INVALID) == member, "membership of PE %d", me);
    if (member) {
        CHECK(shmem_team_my_pe(odd) == (npes - 1 - me) / 2, "odd my_pe %d", shmem_team_my_pe(odd));
        src[0] = me;
        CHECK(shmem_int_fcollect(odd, dst, src, 1) == 0, "odd fcollect");
        for (int k = 0; k < half; k++) CHECK(dst[k] == npes - 1 - 2 * k, "odd fcollect [%d] = %d", k, dst[k]);
        shmem_team_destroy(odd);
    }

    /* invalid triplets: below PE 0, past the last PE, a zero stride; nonzero and SHMEM_TEAM_INVALID everywhere */
    shmem_team_t bad = SHMEM_TEAM_WORLD;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, npes - 1, -1, npes + 1, NULL, 0, &bad) != 0 && bad == SHMEM_TEAM_INVALID,
          "below PE 0");
    bad = SHMEM_TEAM_WORLD;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, -1, 2, NULL, 0, &bad) != 0 && bad == SHMEM_TEAM_INVALID, "0, -1, 2");
    bad = SHMEM_TEAM_WORLD;
    CHECK(shmem_team_split_strided(rev, 0, -2, 2, NULL, 0, &bad) != 0 && bad == SHMEM_TEAM_INVALID, "rev 0, -2, 2");
    bad = SHMEM_TEAM_WORLD;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, npes - 1, 0, 2, NULL, 0, &bad) != 0 && bad == SHMEM_TEAM_INVALID, "stride 0");
    /* a team of one with any stride */
    shmem_team_t one;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, -3, 1, NULL, 0, &one) == 0, "size 1, stride -3");
    CHECK((one != SHMEM_TEAM_INVALID) == (me == 0), "team of PE 0");
    if (me == 0) shmem_team_destroy(one);

    shmem_team_destroy(rev);
    shmem_barrier_all();
    PASS("negstride");
    shmem_finalize();
    return 0;
}
