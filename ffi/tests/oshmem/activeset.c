/* The deprecated active-set collectives (OpenSHMEM 1.4, still used by old programs) on static arrays with pSync
 * work arrays: barrier and shmem_sync loops over the world and over the even PEs, broadcast, fcollect, collect, alltoall and
 * *_to_all reductions (integer, floating and complex), every result checked against a value computed here. */
#include "check.h"
#include <complex.h>

#define N 8
static long pSync[SHMEM_REDUCE_SYNC_SIZE];
static long pSync2[SHMEM_BARRIER_SYNC_SIZE];
static int iwrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE + N];
static double dwrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE + N];
static long lwrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE + N];
static double complex zwrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE + N];
static short swrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE + N];
static long counter;
static long synced; /* shmem_sync rounds */
static int64_t b_src[N], b_dst[N];
static int32_t f_src[N], f_dst[N * 8];
static int64_t c_src[N], c_dst[N * 8];
static int64_t a_src[N * 8], a_dst[N * 8];
static int i_src[N], i_dst[N];
static double d_src[N], d_dst[N];
static long l_src[N], l_dst[N];
static short s_src[N], s_dst[N];
static double complex z_src[N], z_sum[N], z_prod[N];

int main(void) {
    for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++) pSync[i] = SHMEM_SYNC_VALUE;
    for (int i = 0; i < SHMEM_BARRIER_SYNC_SIZE; i++) pSync2[i] = SHMEM_SYNC_VALUE;
    shmem_init();
    int me = shmem_my_pe(), npes = shmem_n_pes();

    /* barrier loop over the world */
    for (int k = 1; k <= 20; k++) {
        shmem_long_atomic_inc(&counter, 0);
        shmem_barrier(0, 0, npes, pSync);
        CHECK(shmem_long_atomic_fetch(&counter, 0) >= (long)k * npes, "round %d", k);
        shmem_barrier(0, 0, npes, pSync);
    }
    /* a barrier over the even PEs only */
    int nev = (npes + 1) / 2;
    if (me % 2 == 0)
        for (int k = 0; k < 10; k++) shmem_barrier(0, 1, nev, pSync2);
    shmem_barrier_all();
    for (int i = 0; i < SHMEM_BARRIER_SYNC_SIZE; i++) CHECK(pSync2[i] == SHMEM_SYNC_VALUE, "pSync2[%d] = %ld", i, pSync2[i]);

    /* shmem_sync over the world and over the even PEs: after the first sync of a round every member has counted
     * in exactly that round's number of times (its increments completed by shmem_quiet before the sync) */
    for (int k = 1; k <= 10; k++) {
        shmem_long_atomic_inc(&synced, 0);
        shmem_quiet();
        shmem_sync(0, 0, npes, pSync);
        CHECK(shmem_long_atomic_fetch(&synced, 0) == (long)k * npes, "sync round %d: %ld", k, shmem_long_atomic_fetch(&synced, 0));
        shmem_sync(0, 0, npes, pSync);
    }
    shmem_barrier_all();
    if (me == 0) synced = 0;
    shmem_barrier_all();
    if (me % 2 == 0)
        for (int k = 1; k <= 10; k++) {
            shmem_long_atomic_inc(&synced, 0);
            shmem_quiet();
            shmem_sync(0, 1, nev, pSync2);
            CHECK(shmem_long_atomic_fetch(&synced, 0) == (long)k * nev, "even sync round %d", k);
            shmem_sync(0, 1, nev, pSync2);
        }
    shmem_barrier_all();
    for (int i = 0; i < SHMEM_BARRIER_SYNC_SIZE; i++)
        CHECK(pSync[i] == SHMEM_SYNC_VALUE && pSync2[i] == SHMEM_SYNC_VALUE, "pSync[%d] = %ld, pSync2 %ld", i, pSync[i], pSync2[i]);
    shmem_barrier_all(); /* every PE has read its pSync before the next collective uses it */

    /* broadcast from the last member */
    int root = npes - 1;
    for (int i = 0; i < N; i++) b_src[i] = me * 100 + i, b_dst[i] = -1;
    shmem_broadcast64(b_dst, b_src, N, root, 0, 0, npes, pSync);
    for (int i = 0; i < N; i++)
        CHECK(b_dst[i] == (me == root ? -1 : root * 100 + i), "broadcast b_dst[%d] = %ld", i, (long)b_dst[i]);

    /* fcollect and collect (member p contributes p % 3 + 1 elements) */
    for (int i = 0; i < N; i++) f_src[i] = me * 10 + i, c_src[i] = me * 10 + i;
    shmem_fcollect32(f_dst, f_src, 2, 0, 0, npes, pSync);
    for (int p = 0; p < npes; p++)
        for (int i = 0; i < 2; i++) CHECK(f_dst[2 * p + i] == p * 10 + i, "fcollect [%d]", 2 * p + i);
    shmem_collect64(c_dst, c_src, (size_t)(me % 3 + 1), 0, 0, npes, pSync);
    int k = 0;
    for (int p = 0; p < npes; p++)
        for (int i = 0; i < p % 3 + 1; i++, k++) CHECK(c_dst[k] == p * 10 + i, "collect [%d] = %ld", k, (long)c_dst[k]);
    /* The same pSync serves the next collective: a member that has left collect may already count in at the first
     * member for the alltoall below. So pSync is read between two barriers: every member is past collect, and none
     * enters the alltoall before every member has read it. */
    shmem_barrier_all();
    for (int i = 0; i < SHMEM_COLLECT_SYNC_SIZE; i++) CHECK(pSync[i] == SHMEM_SYNC_VALUE, "pSync[%d] = %ld", i, pSync[i]);
    shmem_barrier_all();

    /* alltoall: block j of PE p goes to block p of PE j */
    for (int j = 0; j < npes; j++) a_src[j] = me * 1000 + j;
    shmem_alltoall64(a_dst, a_src, 1, 0, 0, npes, pSync);
    for (int p = 0; p < npes; p++) CHECK(a_dst[p] == p * 1000 + me, "alltoall [%d] = %ld", p, (long)a_dst[p]);

    /* reductions */
    for (int i = 0; i < N; i++) {
        i_src[i] = me + i;
        d_src[i] = (me == i % npes) ? 100.0 + i : (double)me;
        l_src[i] = (i < 3) ? me + 1 : 1;
        s_src[i] = (short)(0x7f ^ (1 << (me % 7)));
        z_src[i] = (me + 1) + i * I;
    }
    shmem_int_sum_to_all(i_dst, i_src, N, 0, 0, npes, iwrk, pSync);
    shmem_double_max_to_all(d_dst, d_src, N, 0, 0, npes, dwrk, pSync);
    shmem_long_prod_to_all(l_dst, l_src, N, 0, 0, npes, lwrk, pSync);
    shmem_short_and_to_all(s_dst, s_src, N, 0, 0, npes, swrk, pSync);
    shmem_complexd_sum_to_all(z_sum, z_src, N, 0, 0, npes, zwrk, pSync);
    shmem_complexd_prod_to_all(z_prod, z_src, N, 0, 0, npes, zwrk, pSync);
    long fact = 1;
    short sand = 0x7f;
    for (int p = 0; p < npes; p++) fact *= p + 1, sand &= (short)(0x7f ^ (1 << (p % 7)));
    for (int i = 0; i < N; i++) {
        CHECK(i_dst[i] == npes * i + npes * (npes - 1) / 2, "int sum [%d] = %d", i, i_dst[i]);
        double dmax = 100.0 + i > npes - 1 ? 100.0 + i : npes - 1;
        CHECK(d_dst[i] == dmax, "double max [%d] = %g", i, d_dst[i]);
        CHECK(l_dst[i] == (i < 3 ? fact : 1), "long prod [%d] = %ld", i, l_dst[i]);
        CHECK(s_dst[i] == sand, "short and [%d] = %d", i, s_dst[i]);
        double complex zs = 0, zp = 1;
        for (int p = 0; p < npes; p++) zs += (p + 1) + i * I, zp *= (p + 1) + i * I;
        CHECK(creal(z_sum[i]) == creal(zs) && cimag(z_sum[i]) == cimag(zs), "complex sum [%d]", i);
        CHECK(cabs(z_prod[i] - zp) <= 1e-9 * cabs(zp), "complex prod [%d]", i);
    }
    /* in place: dest == source */
    shmem_int_max_to_all(i_src, i_src, N, 0, 0, npes, iwrk, pSync);
    for (int i = 0; i < N; i++) CHECK(i_src[i] == npes - 1 + i, "in-place max [%d] = %d", i, i_src[i]);
    for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++) CHECK(pSync[i] == SHMEM_SYNC_VALUE, "pSync[%d] = %ld", i, pSync[i]);
    PASS("activeset");
    shmem_finalize();
    return 0;
}
