/* long double and complex collectives on static arrays: team reductions (long double min/max/sum/prod, complex
 * sum/prod) over the world and over the even PEs, in place too, the active-set longdouble *_to_all, and the long
 * double data-movement collectives; typed and C11 generic. Results are compared exactly with a reference
 * computed here, folding the members' values in member order as the library documents (the values are not
 * exactly representable, so another order would round differently). */
#include "check.h"
#include <complex.h>
#include <string.h>

#define N 5
#define MAXPE 8
static long double ls[N], ld[N], lin[N];
static float complex fs[N], fd[N];
static double complex zs[N], zd[N], zin[N];
static long double lb[N], lc[N * MAXPE], la[N * MAXPE], lsa[N * MAXPE * 2], lda[N * MAXPE * 3];
static long pSync[SHMEM_REDUCE_SYNC_SIZE];
static long double pWrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE + N];

static long double lval(int p, int i) { return (p + 1) / 3.0L + i / 7.0L; }
static long double lmul(int p, int i) { return 1.0L + (p + 1) / 3000.0L - i / 7000.0L; }
static long double lperm(int p, int i, int n) { return ((p * 7 + i * 3) % n + 0.5L) / 3.0L; }
static float complex fval(int p, int i) { return (p + 1) / 3.0f + I * ((i - p) / 7.0f); }
static double complex zval(int p, int i) { return 1.0 + (p + 1) / 300.0 + I * ((i + p) / 700.0); }

/* member k of a team of n PEs starting at 0 with stride `st` is PE k * st */
static void check_ld(const char *what, int n, int st, long double (*v)(int, int), int op, const long double *got) {
    for (int i = 0; i < N; i++) {
        long double acc = v(0, i);
        for (int k = 1; k < n; k++) {
            long double x = v(k * st, i);
            acc = op == 0 ? acc + x : acc * x;
        }
        CHECK(got[i] == acc, "%s [%d]: %.21Lg, expected %.21Lg", what, i, got[i], acc);
    }
}

int main(void) {
    for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++) pSync[i] = SHMEM_SYNC_VALUE;
    shmem_init();
    int me = shmem_my_pe(), npes = shmem_n_pes();
    CHECK(npes <= MAXPE, "at most %d PEs", MAXPE);

    /* long double sum and product over the world */
    for (int i = 0; i < N; i++) ls[i] = lval(me, i);
    CHECK(shmem_longdouble_sum_reduce(SHMEM_TEAM_WORLD, ld, ls, N) == 0, "sum_reduce");
    check_ld("longdouble sum", npes, 1, lval, 0, ld);
    for (int i = 0; i < N; i++) ls[i] = lmul(me, i);
    CHECK(shmem_prod_reduce(SHMEM_TEAM_WORLD, ld, ls, N) == 0, "generic prod_reduce");
    check_ld("longdouble prod", npes, 1, lmul, 1, ld);
    /* min and max: every member's values are a permutation */
    for (int i = 0; i < N; i++) ls[i] = lperm(me, i, npes);
    CHECK(shmem_longdouble_min_reduce(SHMEM_TEAM_WORLD, ld, ls, N) == 0, "min_reduce");
    for (int i = 0; i < N; i++) {
        long double m = lperm(0, i, npes);
        for (int p = 1; p < npes; p++) m = lperm(p, i, npes) < m ? lperm(p, i, npes) : m;
        CHECK(ld[i] == m && m == 0.5L / 3.0L, "min [%d] = %Lg", i, ld[i]);
    }
    CHECK(shmem_max_reduce(SHMEM_TEAM_WORLD, ld, ls, N) == 0, "generic max_reduce");
    for (int i = 0; i < N; i++) CHECK(ld[i] == (npes - 1 + 0.5L) / 3.0L, "max [%d] = %Lg", i, ld[i]);
    /* in place */
    for (int i = 0; i < N; i++) lin[i] = lval(me, i);
    CHECK(shmem_longdouble_sum_reduce(SHMEM_TEAM_WORLD, lin, lin, N) == 0, "in-place sum_reduce");
    check_ld("in-place longdouble sum", npes, 1, lval, 0, lin);

    /* complex sum and product over the world */
    for (int i = 0; i < N; i++) fs[i] = fval(me, i), zs[i] = zval(me, i);
    CHECK(shmem_complexf_sum_reduce(SHMEM_TEAM_WORLD, fd, fs, N) == 0, "complexf_sum_reduce");
    CHECK(shmem_complexd_prod_reduce(SHMEM_TEAM_WORLD, zd, zs, N) == 0, "complexd_prod_reduce");
    for (int i = 0; i < N; i++) {
        float complex fa = fval(0, i);
        double complex za = zval(0, i);
        for (int p = 1; p < npes; p++) fa = fa + fval(p, i), za = za * zval(p, i);
        CHECK(fd[i] == fa, "complexf sum [%d]: %g%+gi, expected %g%+gi", i, crealf(fd[i]), cimagf(fd[i]), crealf(fa), cimagf(fa));
        CHECK(zd[i] == za, "complexd prod [%d]: %.17g%+.17gi, expected %.17g%+.17gi", i, creal(zd[i]), cimag(zd[i]), creal(za), cimag(za));
    }
    CHECK(shmem_sum_reduce(SHMEM_TEAM_WORLD, zd, zs, N) == 0, "generic complexd sum");
    CHECK(shmem_prod_reduce(SHMEM_TEAM_WORLD, fd, fs, N) == 0, "generic complexf prod");
    for (int i = 0; i < N; i++) {
        float complex fa = fval(0, i);
        double complex za = zval(0, i);
        for (int p = 1; p < npes; p++) fa = fa * fval(p, i), za = za + zval(p, i);
        CHECK(fd[i] == fa && zd[i] == za, "generic complex [%d]", i);
    }
    for (int i = 0; i < N; i++) zin[i] = zval(me, i);
    CHECK(shmem_complexd_sum_reduce(SHMEM_TEAM_WORLD, zin, zin, N) == 0, "in-place complexd sum");
    for (int i = 0; i < N; i++) CHECK(zin[i] == zd[i], "in-place complexd sum [%d]", i);

    /* over the even PEs: a strided team and the active set (0, 1, nev) */
    int nev = (npes + 1) / 2;
    shmem_team_t even;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, nev, NULL, 0, &even) == 0, "split");
    for (int i = 0; i < N; i++) ls[i] = lval(me, i);
    if (me % 2 == 0) {
        CHECK(shmem_longdouble_sum_reduce(even, ld, ls, N) == 0, "even sum_reduce");
        check_ld("even longdouble sum", nev, 2, lval, 0, ld);
        for (int i = 0; i < N; i++) ld[i] = -1;
        shmem_longdouble_sum_to_all(ld, ls, N, 0, 1, nev, pWrk, pSync);
        check_ld("even longdouble sum_to_all", nev, 2, lval, 0, ld);
        shmem_team_destroy(even);
    } else {
        CHECK(even == SHMEM_TEAM_INVALID, "odd PEs are not in the even team");
    }
    shmem_barrier_all();
    for (int i = 0; i < N; i++) ls[i] = lmul(me, i);
    shmem_longdouble_prod_to_all(ld, ls, N, 0, 0, npes, pWrk, pSync);
    check_ld("longdouble prod_to_all", npes, 1, lmul, 1, ld);
    for (int i = 0; i < N; i++) ls[i] = lperm(me, i, npes);
    shmem_longdouble_max_to_all(ld, ls, N, 0, 0, npes, pWrk, pSync);
    for (int i = 0; i < N; i++) CHECK(ld[i] == (npes - 1 + 0.5L) / 3.0L, "max_to_all [%d]", i);
    shmem_longdouble_min_to_all(ld, ls, N, 0, 0, npes, pWrk, pSync);
    for (int i = 0; i < N; i++) CHECK(ld[i] == 0.5L / 3.0L, "min_to_all [%d]", i);
    for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++) CHECK(pSync[i] == SHMEM_SYNC_VALUE, "pSync[%d]", i);

    /* long double data movement */
    int root = npes - 1;
    for (int i = 0; i < N; i++) ls[i] = lval(me, i), lb[i] = -1;
    CHECK(shmem_longdouble_broadcast(SHMEM_TEAM_WORLD, lb, ls, N, root) == 0, "broadcast");
    for (int i = 0; i < N; i++) CHECK(lb[i] == lval(root, i), "broadcast [%d]", i);
    CHECK(shmem_fcollect(SHMEM_TEAM_WORLD, lc, ls, N) == 0, "generic fcollect");
    for (int p = 0; p < npes; p++)
        for (int i = 0; i < N; i++) CHECK(lc[p * N + i] == lval(p, i), "fcollect [%d]", p * N + i);
    memset(lc, 0, sizeof lc);
    CHECK(shmem_longdouble_collect(SHMEM_TEAM_WORLD, lc, ls, (size_t)(me % 2 + 1)) == 0, "collect");
    for (int p = 0, k = 0; p < npes; p++)
        for (int i = 0; i < p % 2 + 1; i++, k++) CHECK(lc[k] == lval(p, i), "collect [%d]", k);
    for (int p = 0; p < npes; p++) la[p] = lval(me, p);
    CHECK(shmem_longdouble_alltoall(SHMEM_TEAM_WORLD, lc, la, 1) == 0, "alltoall");
    for (int p = 0; p < npes; p++) CHECK(lc[p] == lval(p, me), "alltoall [%d]", p);
    for (int i = 0; i < N * MAXPE * 3; i++) lda[i] = -1;
    for (int p = 0; p < npes; p++) lsa[2 * p] = lval(me, p);
    CHECK(shmem_alltoalls(SHMEM_TEAM_WORLD, lda, lsa, 3, 2, 1) == 0, "generic alltoalls");
    for (int p = 0; p < npes; p++) {
        CHECK(lda[3 * p] == lval(p, me), "alltoalls [%d]: %Lg", 3 * p, lda[3 * p]);
        CHECK(lda[3 * p + 1] == -1 && lda[3 * p + 2] == -1, "alltoalls wrote a gap after %d", 3 * p);
    }

    shmem_barrier_all();
    PASS("ldcomplex");
    shmem_finalize();
    return 0;
}
