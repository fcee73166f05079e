/* The short and unsigned short point-to-point synchronisation routines (OpenSHMEM 1.5 table 11): every wait and
 * test form, typed and through the C11 generics, on global arrays where two 16-bit variables share each 4-byte
 * word (PE p writes slot p everywhere), signed comparisons on negative values, a skip mask, and a test_any poll
 * that must see every index (fair start). */
#include "check.h"
#include <stdint.h>

#define MAXPE 8
static short s[MAXPE + 1];
static unsigned short u[MAXPE + 1];
static short one_s;
static unsigned short one_u;

int main(void) {
    shmem_init();
    int me = shmem_my_pe(), npes = shmem_n_pes();
    CHECK(npes <= MAXPE, "at most %d PEs", MAXPE);
    size_t n = (size_t)npes, idx[MAXPE + 1];
    int right = (me + 1) % npes, left = (me + npes - 1) % npes;

    /* nothing written yet */
    CHECK(shmem_short_test(&one_s, SHMEM_CMP_EQ, 0) == 1, "short_test before");
    CHECK(shmem_test(&one_u, SHMEM_CMP_GT, 0) == 0, "generic ushort test before");
    CHECK(shmem_short_test_any(s, n, NULL, SHMEM_CMP_LT, 0) == SIZE_MAX, "test_any before");
    CHECK(shmem_ushort_test_some(u, n, idx, NULL, SHMEM_CMP_GE, 0x8000) == 0, "test_some before");
    CHECK(shmem_test_all(s, n, NULL, SHMEM_CMP_EQ, 0) == 1, "generic test_all before");
    shmem_barrier_all();

    shmem_short_p(&one_s, (short)(-1 - me), right);
    shmem_p(&one_u, (unsigned short)(0xF000 + me), right);
    for (int pe = 0; pe < npes; pe++) {
        shmem_short_p(&s[me], (short)(-1 - me), pe);
        shmem_ushort_p(&u[me], (unsigned short)(0x8000 + me), pe);
    }
    shmem_short_wait_until(&one_s, SHMEM_CMP_EQ, (short)(-1 - left));
    shmem_wait_until(&one_u, SHMEM_CMP_EQ, (unsigned short)(0xF000 + left));
    CHECK(one_s == -1 - left && one_u == 0xF000 + left, "scalar waits: %d %u", one_s, one_u);

    short vs[MAXPE];
    unsigned short vu[MAXPE];
    for (int i = 0; i < npes; i++) vs[i] = (short)(-1 - i), vu[i] = (unsigned short)(0x8000 + i);
    shmem_short_wait_until_all(s, n, NULL, SHMEM_CMP_LT, 0);
    shmem_wait_until_all(u, n, NULL, SHMEM_CMP_GE, 0x8000);
    shmem_short_wait_until_all_vector(s, n, NULL, SHMEM_CMP_EQ, vs);
    shmem_wait_until_all_vector(u, n, NULL, SHMEM_CMP_EQ, vu);
    for (int i = 0; i < npes; i++) CHECK(s[i] == vs[i] && u[i] == vu[i], "slot %d: %d %u", i, s[i], u[i]);
    CHECK(s[npes] == 0 && shmem_short_test(&s[npes], SHMEM_CMP_EQ, 0) == 1, "the slot after the set is untouched");
    CHECK(shmem_ushort_test(&u[npes], SHMEM_CMP_EQ, 0) == 1, "ushort slot after the set");
    /* signed and unsigned comparisons: -1 < 0 for short, 0x8000 > 0x7fff for unsigned short */
    CHECK(shmem_short_test(&s[0], SHMEM_CMP_LT, 0) == 1, "short -1 < 0");
    CHECK(shmem_short_test(&s[0], SHMEM_CMP_GE, 0) == 0, "short -1 >= 0 is false");
    CHECK(shmem_ushort_test(&u[0], SHMEM_CMP_GT, 0x7fff) == 1, "ushort 0x8000 > 0x7fff");
    CHECK(shmem_short_test_all(s, n, NULL, SHMEM_CMP_LT, 0) == 1, "test_all");
    CHECK(shmem_ushort_test_all_vector(u, n, NULL, SHMEM_CMP_EQ, vu) == 1, "test_all_vector");
    CHECK(shmem_test_all_vector(s, n, NULL, SHMEM_CMP_EQ, vs) == 1, "generic test_all_vector");

    /* every slot but the last skipped */
    int status[MAXPE];
    for (int i = 0; i < npes; i++) status[i] = i != npes - 1;
    CHECK(shmem_short_wait_until_any(s, n, status, SHMEM_CMP_EQ, (short)-npes) == n - 1, "wait_until_any");
    CHECK(shmem_ushort_wait_until_any_vector(u, n, status, SHMEM_CMP_EQ, vu) == n - 1, "wait_until_any_vector");
    CHECK(shmem_wait_until_any(u, n, status, SHMEM_CMP_GE, 0x8000) == n - 1, "generic wait_until_any");
    CHECK(shmem_short_test_any(s, n, status, SHMEM_CMP_GT, 0) == SIZE_MAX, "test_any none");
    CHECK(shmem_test_any_vector(s, n, status, SHMEM_CMP_EQ, vs) == n - 1, "generic test_any_vector");
    CHECK(shmem_short_wait_until_some(s, n, idx, NULL, SHMEM_CMP_LE, -1) == n, "wait_until_some");
    for (size_t i = 0; i < n; i++) CHECK(idx[i] == i, "wait_until_some idx[%zu] = %zu", i, idx[i]);
    CHECK(shmem_wait_until_some(u, n, idx, status, SHMEM_CMP_GE, 0x8000) == 1 && idx[0] == n - 1, "generic wait_until_some");
    CHECK(shmem_ushort_wait_until_some_vector(u, n, idx, NULL, SHMEM_CMP_EQ, vu) == n, "wait_until_some_vector");
    CHECK(shmem_wait_until_some_vector(s, n, idx, NULL, SHMEM_CMP_EQ, vs) == n, "generic wait_until_some_vector");
    CHECK(shmem_short_test_some_vector(s, n, idx, NULL, SHMEM_CMP_NE, vs) == 0, "test_some_vector none");
    CHECK(shmem_test_some(u, n, idx, NULL, SHMEM_CMP_EQ, (unsigned short)(0x8000 + npes - 1)) == 1 && idx[0] == n - 1,
          "generic test_some");
    CHECK(shmem_test_some_vector(u, n, idx, NULL, SHMEM_CMP_EQ, vu) == n, "generic test_some_vector");
    CHECK(shmem_ushort_test_any_vector(u, n, NULL, SHMEM_CMP_EQ, vu) < n, "test_any_vector");
    CHECK(shmem_test(&s[npes - 1], SHMEM_CMP_EQ, (short)-npes) == 1, "generic short test");
    shmem_wait_until_all_vector(u, n, status, SHMEM_CMP_EQ, vu);
    CHECK(shmem_test_any(s, n, NULL, SHMEM_CMP_LT, 0) < n, "generic test_any");

    /* poll test_any until every index has been reported (the spec's example; needs a rotating start) */
    int seen[MAXPE] = {0}, count = 0;
    for (int t = 0; t < 4 * npes && count < npes; t++) {
        size_t i = shmem_short_test_any(s, n, NULL, SHMEM_CMP_LT, 0);
        CHECK(i < n, "test_any poll gave %zu", i);
        if (!seen[i]) seen[i] = 1, count++;
    }
    CHECK(count == npes, "test_any reported %d of %d indices", count, npes);

    shmem_barrier_all();
    PASS("waits16");
    shmem_finalize();
    return 0;
}
