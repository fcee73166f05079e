/* OpenSHMEM 1.6 additions: interleaved block transfers (typed, sized, C11 generic, on a context of a team, long
 * double), shmem_signal_add/_set (plain and on a context), shmem_pe_quiet, sessions, shmem_query_initialized,
 * prefix sums of every kind of SUM type (integer, floating, long double, complex; typed and C11 generic).
 * Every value is checked against one computed here (long double and complex: added in member order, as the
 * library documents; the values are not exactly representable, so another order would round differently). */
#include "check.h"
#include <complex.h>
#include <pthread.h>
#include <string.h>

#define NB 4   /* blocks */
#define BS 3   /* elements per block */
#define SST 5  /* source stride */
#define DST 4  /* destination stride */

static int src_i[NB * SST], dst_i[NB * DST];
static long double src_ld[NB * SST], dst_ld[NB * DST];
static uint32_t src_32[NB * SST], dst_32[NB * DST];
static uint64_t sig;

static int expect_block(int owner, int k) { return 1000 * owner + k; }
static long double ldval(int pe, int k) { return (pe + 1) / 3.0L + k / 7.0L; }
static float complex cfval(int pe, int k) { return (pe + 1) / 3.0f + I * ((k - pe) / 7.0f); }
static double complex czval(int pe, int k) { return (pe + 1) / 300.0 + k / 7.0 + I * ((k + pe) / 700.0); }

#ifdef XPUSHMEM_SHMEM_H
/* Another thread's use of a SHMEM_CTX_PRIVATE context: an error naming the option (return mode). */
static shmem_ctx_t private_ctx;
static int private_dest;
static void *use_private(void *arg) {
    (void)arg;
    shmem_ctx_int_p(private_ctx, &private_dest, 1, shmem_my_pe());
    return strstr(xpushmem_last_error(), "SHMEM_CTX_PRIVATE") != NULL ? (void *)1 : NULL;
}
#endif

int main(void) {
    int init = -1;
    shmem_query_initialized(&init);
    CHECK(init == 0, "initialized before shmem_init: %d", init);
    int provided = -1;
    CHECK(shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided) == 0 && provided == SHMEM_THREAD_MULTIPLE, "init_thread");
    shmem_query_initialized(&init);
    CHECK(init == 1, "initialized after shmem_init: %d", init);
    shmem_init(); /* 1.6: a second initialisation, matched by a second shmem_finalize below */
    int me = shmem_my_pe(), npes = shmem_n_pes(), right = (me + 1) % npes, left = (me + npes - 1) % npes;

    for (int k = 0; k < NB * SST; k++) {
        src_i[k] = expect_block(me, k);
        src_ld[k] = (long double)expect_block(me, k) / 3.0L;
        src_32[k] = (uint32_t)expect_block(me, k);
    }
    for (int k = 0; k < NB * DST; k++) {
        dst_i[k] = -1;
        dst_ld[k] = -1.0L;
        dst_32[k] = 0xffffffffu;
    }
    shmem_barrier_all();

    /* ibput to the right neighbour: block b of my source (elements b*SST .. b*SST+BS-1) lands at b*DST there */
    shmem_int_ibput(dst_i, src_i, DST, SST, BS, NB, right);
    shmem_longdouble_ibput(dst_ld, src_ld, DST, SST, BS, NB, right);
    shmem_ibput32(dst_32, src_32, DST, SST, BS, NB, right);
    shmem_barrier_all();
    for (int b = 0; b < NB; b++)
        for (int k = 0; k < DST; k++) {
            int at = b * DST + k;
            int want = k < BS ? expect_block(left, b * SST + k) : -1;
            CHECK(dst_i[at] == want, "ibput int dst[%d] = %d, want %d", at, dst_i[at], want);
            long double wl = k < BS ? (long double)want / 3.0L : -1.0L;
            CHECK(dst_ld[at] == wl, "ibput long double dst[%d]", at);
            uint32_t w32 = k < BS ? (uint32_t)want : 0xffffffffu;
            CHECK(dst_32[at] == w32, "ibput32 dst[%d] = %u, want %u", at, dst_32[at], w32);
        }

    /* ibget from the left neighbour's source into a local buffer, the generic and the context forms */
    int got[NB * DST];
    memset(got, 0xff, sizeof got);
    shmem_ibget(got, src_i, DST, SST, BS, NB, left);
    for (int b = 0; b < NB; b++)
        for (int k = 0; k < BS; k++)
            CHECK(got[b * DST + k] == expect_block(left, b * SST + k), "ibget got[%d] = %d", b * DST + k, got[b * DST + k]);
    CHECK(got[DST - 1] == -1, "ibget wrote between blocks");
    /* block size 1 is iget */
    int one[NB], ione[NB];
    shmem_ctx_int_ibget(SHMEM_CTX_DEFAULT, one, src_i, 1, SST, 1, NB, left);
    shmem_int_iget(ione, src_i, 1, SST, NB, left);
    CHECK(memcmp(one, ione, sizeof one) == 0, "ibget with bsize 1 differs from iget");

    /* shmem_team_get_config with a mask of 0 performs no action, config NULL or not (1.6) */
    shmem_team_config_t tc = {.num_contexts = -7};
    CHECK(shmem_team_get_config(SHMEM_TEAM_WORLD, 0, NULL) == 0, "get_config(mask 0, NULL)");
    CHECK(shmem_team_get_config(SHMEM_TEAM_WORLD, 0, &tc) == 0 && tc.num_contexts == -7, "get_config(mask 0) wrote");

    /* a context on the reversed world: PE numbers relative to that team */
    shmem_team_t rev;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, npes - 1, -1, npes, NULL, 0, &rev) == 0, "reversed world");
    shmem_ctx_t ctx;
    CHECK(shmem_team_create_ctx(rev, 0, &ctx) == 0, "ctx on the reversed world");
    int rev_right = shmem_team_translate_pe(SHMEM_TEAM_WORLD, right, rev);
    shmem_barrier_all();
    for (int k = 0; k < NB * DST; k++) dst_i[k] = -1;
    shmem_barrier_all();
    shmem_ibput(ctx, dst_i, src_i, DST, SST, BS, NB, rev_right);
    shmem_ctx_quiet(ctx);
    shmem_barrier_all();
    CHECK(dst_i[(NB - 1) * DST + BS - 1] == expect_block(left, (NB - 1) * SST + BS - 1), "ctx ibput through the team");

    /* signals without data: set then add, plain and on the context */
    sig = 0;
    shmem_barrier_all();
    shmem_signal_set(SHMEM_CTX_DEFAULT, &sig, 10, right);
    shmem_quiet();
    shmem_barrier_all();
    CHECK(shmem_signal_fetch(&sig) == 10, "signal_set: %llu", (unsigned long long)shmem_signal_fetch(&sig));
    shmem_barrier_all();
    shmem_signal_add(&sig, 5, right);
    shmem_ctx_signal_add(SHMEM_CTX_DEFAULT, &sig, 0, right);
    shmem_signal_add(ctx, &sig, 7, rev_right); /* C11: with a context, shmem_ctx_signal_add */
    shmem_signal_add(&sig, 1, me);
    int pes[2] = {right, me};
    shmem_pe_quiet(pes, 2);
    shmem_barrier_all();
    CHECK(shmem_signal_fetch(&sig) == 23, "signal_add: %llu", (unsigned long long)shmem_signal_fetch(&sig));
    shmem_barrier_all();
    shmem_ctx_signal_set(ctx, &sig, 42, rev_right);
    shmem_ctx_pe_quiet(ctx, &rev_right, 1);
    CHECK(shmem_signal_wait_until(&sig, SHMEM_CMP_EQ, 42) == 42, "ctx signal_set");

    /* sessions are hints: start, work, stop; on SHMEM_CTX_INVALID no action */
    shmem_ctx_session_config_t cfg = {.total_ops = 8};
    shmem_ctx_session_start(ctx, SHMEM_CTX_SESSION_BATCH, &cfg, SHMEM_CTX_SESSION_TOTAL_OPS);
    shmem_ctx_int_p(ctx, &dst_i[0], 77, rev_right);
    shmem_ctx_session_stop(ctx);
    shmem_ctx_session_start(SHMEM_CTX_INVALID, 0, NULL, 0);
    shmem_ctx_session_stop(SHMEM_CTX_INVALID);
    shmem_ctx_pe_quiet(SHMEM_CTX_INVALID, pes, 2);
    shmem_barrier_all();
    CHECK(dst_i[0] == 77, "put inside a session");

    /* prefix sums: member i gets the sum over members 0..i (inscan) or 0..i-1 (exscan, 0 on member 0) */
    enum { NS = 3 };
    long *ssrc = shmem_malloc(NS * sizeof(long)), *sdst = shmem_malloc(NS * sizeof(long));
    double *dsrc = shmem_malloc(NS * sizeof(double)), *ddst = shmem_malloc(NS * sizeof(double));
    long double *lsrc = shmem_malloc(NS * sizeof(long double)), *ldst = shmem_malloc(NS * sizeof(long double));
    float complex *fsrc = shmem_malloc(NS * sizeof(float complex)), *fdst = shmem_malloc(NS * sizeof(float complex));
    double complex *zsrc = shmem_malloc(NS * sizeof(double complex)), *zdst = shmem_malloc(NS * sizeof(double complex));
    for (int k = 0; k < NS; k++) {
        ssrc[k] = 10 * (me + 1) + k;
        dsrc[k] = 0.5 * (me + 1) + k;
        lsrc[k] = ldval(me, k);
        fsrc[k] = cfval(me, k);
        zsrc[k] = czval(me, k);
    }
    shmem_barrier_all();
    for (int pass = 0; pass < 4; pass++) {
        shmem_team_t team = pass < 2 ? SHMEM_TEAM_WORLD : rev;
        int inclusive = pass % 2 == 0;
        int my = shmem_team_my_pe(team);
        int rc = inclusive ? shmem_long_sum_inscan(team, sdst, ssrc, NS) : shmem_sum_exscan(team, sdst, ssrc, NS);
        CHECK(rc == 0, "long scan pass %d", pass);
        rc = inclusive ? shmem_sum_inscan(team, ddst, dsrc, NS) : shmem_double_sum_exscan(team, ddst, dsrc, NS);
        CHECK(rc == 0, "double scan pass %d", pass);
        rc = inclusive ? shmem_longdouble_sum_inscan(team, ldst, lsrc, NS) : shmem_sum_exscan(team, ldst, lsrc, NS);
        CHECK(rc == 0, "long double scan pass %d", pass);
        rc = inclusive ? shmem_sum_inscan(team, fdst, fsrc, NS) : shmem_complexf_sum_exscan(team, fdst, fsrc, NS);
        CHECK(rc == 0, "complexf scan pass %d", pass);
        rc = inclusive ? shmem_complexd_sum_inscan(team, zdst, zsrc, NS) : shmem_sum_exscan(team, zdst, zsrc, NS);
        CHECK(rc == 0, "complexd scan pass %d", pass);
        for (int k = 0; k < NS; k++) {
            long wl = 0;
            double wd = 0;
            long double wld = 0;
            float complex wf = 0;
            double complex wz = 0;
            for (int m = 0; m < (inclusive ? my + 1 : my); m++) {
                int pe = shmem_team_translate_pe(team, m, SHMEM_TEAM_WORLD);
                wl += 10 * (pe + 1) + k;
                wd += 0.5 * (pe + 1) + k;
                wld += ldval(pe, k);
                wf += cfval(pe, k);
                wz += czval(pe, k);
            }
            CHECK(sdst[k] == wl, "pass %d: long scan [%d] = %ld, want %ld", pass, k, sdst[k], wl);
            CHECK(ddst[k] == wd, "pass %d: double scan [%d] = %g, want %g", pass, k, ddst[k], wd);
            CHECK(ldst[k] == wld, "pass %d: long double scan [%d] = %.21Lg, want %.21Lg", pass, k, ldst[k], wld);
            CHECK(fdst[k] == wf, "pass %d: complexf scan [%d] = %.9g%+.9gi, want %.9g%+.9gi", pass, k, crealf(fdst[k]),
                  cimagf(fdst[k]), crealf(wf), cimagf(wf));
            CHECK(zdst[k] == wz, "pass %d: complexd scan [%d] = %.17g%+.17gi, want %.17g%+.17gi", pass, k,
                  creal(zdst[k]), cimag(zdst[k]), creal(wz), cimag(wz));
        }
    }
    /* in place (dest == source), long double over the reversed world */
    for (int k = 0; k < NS; k++) ldst[k] = ldval(me, k);
    CHECK(shmem_longdouble_sum_inscan(rev, ldst, ldst, NS) == 0, "in-place long double inscan");
    for (int k = 0; k < NS; k++) {
        long double w = 0;
        for (int m = 0; m <= shmem_team_my_pe(rev); m++) w += ldval(shmem_team_translate_pe(rev, m, SHMEM_TEAM_WORLD), k);
        CHECK(ldst[k] == w, "in-place long double inscan [%d] = %.21Lg, want %.21Lg", k, ldst[k], w);
    }
    shmem_free(zdst);
    shmem_free(zsrc);
    shmem_free(fdst);
    shmem_free(fsrc);
    shmem_free(ldst);
    shmem_free(lsrc);
    shmem_free(ddst);
    shmem_free(dsrc);
    shmem_free(sdst);
    shmem_free(ssrc);

#ifdef XPUSHMEM_SHMEM_H /* xpushmem's extensions: errors in return mode */
    xpushmemx_set_error_mode(XPUSHMEMX_ERROR_MODE_RETURN);
    shmem_int_ibput(dst_i, src_i, BS - 1, SST, BS, NB, right);
    CHECK(strstr(xpushmem_last_error(), "dst") != NULL, "a stride below bsize: %s", xpushmem_last_error());
    int bad = npes;
    shmem_pe_quiet(&bad, 1);
    CHECK(strstr(xpushmem_last_error(), "invalid PE") != NULL, "pe_quiet on PE %d: %s", bad, xpushmem_last_error());
    /* shmem_ctx_create's options are kept: a private context works in its thread and is refused in another */
    CHECK(shmem_ctx_create(SHMEM_CTX_PRIVATE | SHMEM_CTX_NOSTORE, &private_ctx) == 0, "private context");
    shmem_ctx_int_p(private_ctx, &private_dest, 5, me);
    shmem_ctx_quiet(private_ctx);
    CHECK(private_dest == 5, "a put on the private context in its own thread");
    pthread_t th;
    void *refused = NULL;
    CHECK(pthread_create(&th, NULL, use_private, NULL) == 0 && pthread_join(th, &refused) == 0, "thread");
    CHECK(refused != NULL && private_dest == 5, "another thread used a SHMEM_CTX_PRIVATE context");
    shmem_ctx_destroy(private_ctx);
    shmem_ctx_t shared_ctx;
    CHECK(shmem_ctx_create(SHMEM_CTX_SERIALIZED, &shared_ctx) == 0, "serialized context");
    private_ctx = shared_ctx;
    CHECK(pthread_create(&th, NULL, use_private, NULL) == 0 && pthread_join(th, &refused) == 0, "thread");
    CHECK(refused == NULL && private_dest == 1, "a shareable context refused in another thread");
    shmem_ctx_destroy(shared_ctx);
    xpushmemx_set_error_mode(XPUSHMEMX_ERROR_MODE_ABORT);
#endif
    shmem_ctx_destroy(ctx);
    shmem_team_destroy(rev);
    shmem_finalize(); /* not the last: a barrier, the library stays initialised */
    shmem_query_initialized(&init);
    CHECK(init == 1 && shmem_n_pes() == npes, "initialized after the first of two shmem_finalize: %d", init);
    PASS("v16");
    shmem_finalize();
    shmem_query_initialized(&init);
    CHECK(init == 0, "initialized after shmem_finalize: %d", init);
    return 0;
}
