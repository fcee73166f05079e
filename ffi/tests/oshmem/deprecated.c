/* Names from before OpenSHMEM 1.5 that old programs use: start_pes, _my_pe, _num_pes, shmalloc/shrealloc/
 * shmemalign/shfree, the pre-1.4 atomics (typed and C11 generic), shmem_wait, shmem_wait_until, shmem_TYPE_wait,
 * the cache calls (no-ops), the _SHMEM_* constants and the strided active-set alltoalls32/64, on globals. */
#include "check.h"
#include <stdint.h>

#define MAXPE 8
#define NE 2
static long pSync[_SHMEM_BCAST_SYNC_SIZE];
static long pSync2[SHMEM_ALLTOALLS_SYNC_SIZE];
static int ic, iwin, winners;
static long lc;
static long long llc;
static float fv;
static double dv, dswap;
static long flag;
static short sflag;
static int iflag;
static long long llflag;
static int32_t s32[MAXPE * NE * 2], d32[MAXPE * NE * 3];
static int64_t s64[MAXPE * NE], d64[MAXPE * NE * 2];

int main(void) {
    for (int i = 0; i < _SHMEM_BCAST_SYNC_SIZE; i++) pSync[i] = _SHMEM_SYNC_VALUE;
    for (int i = 0; i < SHMEM_ALLTOALLS_SYNC_SIZE; i++) pSync2[i] = SHMEM_SYNC_VALUE;
    start_pes(0);
    int me = _my_pe(), npes = _num_pes();
    CHECK(me == shmem_my_pe() && npes == shmem_n_pes(), "_my_pe %d _num_pes %d", me, npes);
    CHECK(npes <= MAXPE, "at most %d PEs", MAXPE);
    int right = (me + 1) % npes, left = (me + npes - 1) % npes;
    shmem_clear_cache_inv();
    shmem_set_cache_inv();
    shmem_set_cache_line_inv(&ic);
    shmem_clear_cache_line_inv(&ic);
    shmem_udcflush();
    shmem_udcflush_line(&ic);

    /* memory */
    long *a = (long *)shmalloc(16 * sizeof(long));
    CHECK(a != NULL, "shmalloc");
    for (int i = 0; i < 16; i++) a[i] = me * 100 + i;
    a = (long *)shrealloc(a, 64 * sizeof(long));
    CHECK(a != NULL, "shrealloc");
    for (int i = 0; i < 16; i++) CHECK(a[i] == me * 100 + i, "shrealloc kept a[%d] = %ld", i, a[i]);
    long *b = (long *)shmemalign(4096, 64);
    CHECK(b != NULL && (uintptr_t)b % 4096 == 0, "shmemalign %p", (void *)b);
    shmem_barrier_all();
    CHECK(shmem_long_g(&a[3], right) == right * 100 + 3, "a[3] of PE %d", right);
    shmem_barrier_all();
    shfree(b);
    shfree(a);

    /* pre-1.4 atomics, all on PE 0's globals */
    shmem_int_inc(&ic, 0);
    shmem_int_add(&ic, 2, 0);
    CHECK(shmem_int_finc(&ic, 0) >= 3, "finc");
    CHECK(shmem_int_fadd(&ic, 10, 0) >= 4, "fadd");
    shmem_long_add(&lc, me + 1, 0);
    shmem_long_inc(&lc, 0);
    (void)shmem_long_fadd(&lc, 1, 0);
    (void)shmem_long_finc(&lc, 0);
    shmem_longlong_inc(&llc, 0);
    shmem_longlong_add(&llc, 3, 0);
    (void)shmem_longlong_finc(&llc, 0);
    (void)shmem_longlong_fadd(&llc, 5, 0);
    shmem_inc(&llc, 0);       /* generic */
    shmem_add(&lc, 5L, 0);    /* generic */
    (void)shmem_fadd(&ic, 1, 0);
    (void)shmem_finc(&ic, 0);
    if (shmem_int_cswap(&iwin, 0, me + 1, 0) == 0) shmem_int_inc(&winners, 0);
    (void)shmem_cswap(&iwin, -5, -6, 0); /* never matches */
    shmem_barrier_all();
    long long nn = npes;
    CHECK(shmem_int_fetch(&ic, 0) == 16 * npes, "ic = %d", shmem_int_fetch(&ic, 0));
    CHECK(shmem_long_fetch(&lc, 0) == nn * (nn + 1) / 2 + 8 * nn, "lc = %ld", shmem_long_fetch(&lc, 0));
    CHECK(shmem_longlong_fetch(&llc, 0) == 11 * nn, "llc = %lld", shmem_longlong_fetch(&llc, 0));
    CHECK(shmem_fetch(&winners, 0) == 1, "winners %d", shmem_fetch(&winners, 0));
    int w = shmem_fetch(&iwin, 0);
    CHECK(w >= 1 && w <= npes, "iwin %d", w);
    shmem_barrier_all();

    /* swap, fetch, set on float, double, long (typed and generic) */
    shmem_float_set(&fv, (float)me + 0.5f, right);
    double old = shmem_double_swap(&dv, (double)me, right);
    CHECK(old == 0.0 || old == (double)left, "double_swap old %g", old);
    shmem_set(&lc, 0L, 0);
    shmem_barrier_all();
    CHECK(shmem_float_fetch(&fv, me) == (float)left + 0.5f, "float_fetch %g", (double)shmem_float_fetch(&fv, me));
    CHECK(shmem_fetch(&dv, me) == (double)left, "generic double fetch %g", shmem_fetch(&dv, me));
    CHECK(shmem_long_fetch(&lc, 0) == 0, "generic set");
    CHECK(shmem_swap(&dswap, 1.5, right) == 0.0, "generic swap");
    CHECK(shmem_int_swap(&iflag, 0, me) == 0 && shmem_long_swap(&flag, 0, me) == 0 && shmem_longlong_swap(&llflag, 0, me) == 0,
          "integer swaps");
    shmem_barrier_all();
    CHECK(dswap == 1.5, "dswap %g", dswap);

    /* shmem_wait, shmem_TYPE_wait, shmem_wait_until */
    shmem_long_p(&flag, 1, right);
    shmem_short_p(&sflag, 7, right);
    shmem_int_p(&iflag, 9, right);
    shmem_longlong_p(&llflag, 11, right);
    shmem_wait(&flag, 0);
    shmem_short_wait(&sflag, 0);
    shmem_int_wait(&iflag, 0);
    shmem_long_wait(&flag, 0);
    shmem_longlong_wait(&llflag, 0);
    CHECK(flag == 1 && sflag == 7 && iflag == 9 && llflag == 11, "waits: %ld %d %d %lld", flag, sflag, iflag, llflag);
    shmem_barrier_all();
    shmem_long_p(&flag, 5, right);
#ifdef XPUSHMEM_SHMEM_H
    /* the OpenSHMEM 1.2 function on a long (Open MPI declares only the generic of that name) */
    (shmem_wait_until)(&flag, _SHMEM_CMP_EQ, 5);
#endif
    shmem_wait_until(&flag, SHMEM_CMP_GE, 5);
    shmem_barrier_all();

    /* strided alltoalls over the world: element k of the block for member j sits at s[(j * NE + k) * sst] and lands
     * at d[(me * NE + k) * dst] on member j */
    for (int i = 0; i < MAXPE * NE * 3; i++) d32[i] = -1;
    for (int i = 0; i < MAXPE * NE * 2; i++) d64[i] = -1;
    for (int j = 0; j < npes; j++)
        for (int k = 0; k < NE; k++) {
            s32[(j * NE + k) * 2] = me * 1000 + j * 10 + k;
            s64[j * NE + k] = ((int64_t)me << 40) | (j * 10 + k);
        }
    shmem_alltoalls32(d32, s32, 3, 2, NE, 0, 0, npes, pSync2);
    shmem_alltoalls64(d64, s64, 2, 1, NE, 0, 0, npes, pSync2);
    for (int p = 0; p < npes; p++)
        for (int k = 0; k < NE; k++) {
            int i = p * NE + k;
            CHECK(d32[i * 3] == p * 1000 + me * 10 + k, "alltoalls32 d[%d] = %d", i * 3, d32[i * 3]);
            CHECK(d32[i * 3 + 1] == -1 && d32[i * 3 + 2] == -1, "alltoalls32 wrote a gap at %d", i * 3);
            CHECK(d64[i * 2] == (((int64_t)p << 40) | (me * 10 + k)), "alltoalls64 d[%d]", i * 2);
            CHECK(d64[i * 2 + 1] == -1, "alltoalls64 wrote a gap at %d", i * 2 + 1);
        }
    for (int i = 0; i < SHMEM_ALLTOALLS_SYNC_SIZE; i++) CHECK(pSync2[i] == SHMEM_SYNC_VALUE, "pSync2[%d]", i);
    /* and over the even PEs (logPE_stride 1): member index me / 2 */
    int nev = (npes + 1) / 2;
    if (me % 2 == 0) {
        for (int i = 0; i < MAXPE * NE * 3; i++) d32[i] = -1;
        shmem_alltoalls32(d32, s32, 1, 2, NE, 0, 1, nev, pSync);
        for (int q = 0; q < nev; q++)
            for (int k = 0; k < NE; k++)
                CHECK(d32[q * NE + k] == 2 * q * 1000 + me / 2 * 10 + k, "even alltoalls32 d[%d] = %d", q * NE + k,
                      d32[q * NE + k]);
    }
    shmem_barrier_all();
    PASS("deprecated");
    shmem_finalize();
    return 0;
}
