/* Signals (put_signal in every form, signal_fetch, signal_wait_until), point-to-point synchronisation for every
 * type (wait_until, test and their _all/_any/_some/_vector and _ex forms), ordering and barriers. */
#include <stdint.h>
#include <stddef.h>
#include "xpushmem.h"
#include "check.h"

#define WAIT_TYPES(X)                                                                  \
    X(int, int) X(long, long) X(longlong, long long) X(uint, unsigned int)              \
    X(ulong, unsigned long) X(ulonglong, unsigned long long) X(int32, int32_t)          \
    X(int64, int64_t) X(uint32, uint32_t) X(uint64, uint64_t) X(size, size_t)           \
    X(ptrdiff, ptrdiff_t)

/* Every PE sets its slot ivars[me] = 1 on every PE; the sets are then waited and tested in every form. */
#define TEST_WAIT(NAME, T)                                                                        \
    static void wait_##NAME(int me, int npes) {                                                   \
        int right = (me + 1) % npes;                                                              \
        T *one = (T *)xpushmem_calloc(1, sizeof(T));                                              \
        T *iv = (T *)xpushmem_calloc((size_t)npes, sizeof(T));                                    \
        CHECK(one && iv, "calloc");                                                               \
        CHECK(xpushmem_##NAME##_test(one, XPUSHMEM_CMP_EQ, (T)0) == 1, #NAME ": test before");    \
        CHECK(xpushmem_##NAME##_test(one, XPUSHMEM_CMP_GT, (T)0) == 0, #NAME ": test GT before"); \
        int r = -1;                                                                               \
        OK(xpushmem_##NAME##_test_ex(&r, one, XPUSHMEM_CMP_NE, (T)0));                            \
        CHECK(r == 0, #NAME ": test_ex");                                                         \
        size_t idx[8], cnt = 99;                                                                  \
        CHECK(xpushmem_##NAME##_test_any(iv, (size_t)npes, NULL, XPUSHMEM_CMP_EQ, (T)1) == SIZE_MAX, #NAME ": test_any none"); \
        CHECK(xpushmem_##NAME##_test_some(iv, (size_t)npes, idx, NULL, XPUSHMEM_CMP_EQ, (T)1) == 0, #NAME ": test_some none"); \
        OK(xpushmem_barrier_all());                                                               \
        OK(xpushmem_##NAME##_p(one, (T)7, right));                                                \
        for (int pe = 0; pe < npes; pe++) OK(xpushmem_##NAME##_atomic_set(&iv[me], (T)1, pe));    \
        OK(xpushmem_##NAME##_wait_until(one, XPUSHMEM_CMP_EQ, (T)7));                             \
        OK(xpushmem_##NAME##_wait_until_all(iv, (size_t)npes, NULL, XPUSHMEM_CMP_EQ, (T)1));      \
        CHECK(xpushmem_##NAME##_test_all(iv, (size_t)npes, NULL, XPUSHMEM_CMP_EQ, (T)1) == 1, #NAME ": test_all"); \
        int status[8] = {0};                                                                      \
        status[0] = 1; /* skip slot 0 */                                                          \
        size_t any = xpushmem_##NAME##_wait_until_any(iv, (size_t)npes, status, XPUSHMEM_CMP_EQ, (T)1); \
        CHECK(any >= 1 && any < (size_t)npes, #NAME ": wait_until_any %zu", any); /* any unskipped */ \
        OK(xpushmem_##NAME##_wait_until_any_ex(&cnt, iv, (size_t)npes, NULL, XPUSHMEM_CMP_GE, (T)1)); \
        CHECK(cnt < (size_t)npes, #NAME ": wait_until_any_ex");                                   \
        size_t n = xpushmem_##NAME##_wait_until_some(iv, (size_t)npes, idx, status, XPUSHMEM_CMP_EQ, (T)1); \
        CHECK(n == (size_t)npes - 1 && idx[0] == 1, #NAME ": wait_until_some %zu", n);           \
        OK(xpushmem_##NAME##_wait_until_some_ex(&cnt, iv, (size_t)npes, idx, NULL, XPUSHMEM_CMP_EQ, (T)1)); \
        CHECK(cnt == (size_t)npes && idx[npes - 1] == (size_t)npes - 1, #NAME ": wait_until_some_ex"); \
        any = xpushmem_##NAME##_test_any(iv, (size_t)npes, status, XPUSHMEM_CMP_EQ, (T)1);     \
        CHECK(any >= 1 && any < (size_t)npes, #NAME ": test_any %zu", any);                       \
        CHECK(xpushmem_##NAME##_test_some(iv, (size_t)npes, idx, NULL, XPUSHMEM_CMP_LT, (T)1) == 0, #NAME ": test_some LT"); \
        OK(xpushmem_##NAME##_test_all_ex(&cnt, iv, (size_t)npes, NULL, XPUSHMEM_CMP_EQ, (T)1));   \
        CHECK(cnt == 1, #NAME ": test_all_ex");                                                   \
        OK(xpushmem_##NAME##_test_any_ex(&cnt, iv, (size_t)npes, NULL, XPUSHMEM_CMP_EQ, (T)1));   \
        CHECK(cnt < (size_t)npes, #NAME ": test_any_ex");                                         \
        OK(xpushmem_##NAME##_test_some_ex(&cnt, iv, (size_t)npes, idx, NULL, XPUSHMEM_CMP_EQ, (T)1)); \
        CHECK(cnt == (size_t)npes, #NAME ": test_some_ex");                                       \
        /* vector forms: slot i compared with vals[i] */                                          \
        T vals[8];                                                                                \
        for (int i = 0; i < npes; i++) vals[i] = (T)1;                                            \
        OK(xpushmem_##NAME##_wait_until_all_vector(iv, (size_t)npes, NULL, XPUSHMEM_CMP_EQ, vals)); \
        vals[0] = (T)2;                                                                           \
        CHECK(xpushmem_##NAME##_test_all_vector(iv, (size_t)npes, NULL, XPUSHMEM_CMP_EQ, vals) == 0, #NAME ": test_all_vector"); \
        any = xpushmem_##NAME##_test_any_vector(iv, (size_t)npes, NULL, XPUSHMEM_CMP_EQ, vals); \
        CHECK(any >= 1 && any < (size_t)npes, #NAME ": test_any_vector %zu", any);                \
        CHECK(xpushmem_##NAME##_test_some_vector(iv, (size_t)npes, idx, NULL, XPUSHMEM_CMP_EQ, vals) == (size_t)npes - 1, #NAME ": test_some_vector"); \
        CHECK(xpushmem_##NAME##_wait_until_any_vector(iv, (size_t)npes, NULL, XPUSHMEM_CMP_LT, vals) == 0, #NAME ": wait_until_any_vector"); \
        CHECK(xpushmem_##NAME##_wait_until_some_vector(iv, (size_t)npes, idx, NULL, XPUSHMEM_CMP_EQ, vals) == (size_t)npes - 1, #NAME ": wait_until_some_vector"); \
        OK(xpushmem_##NAME##_wait_until_any_vector_ex(&cnt, iv, (size_t)npes, NULL, XPUSHMEM_CMP_EQ, vals)); \
        CHECK(cnt >= 1 && cnt < (size_t)npes, #NAME ": wait_until_any_vector_ex");                \
        OK(xpushmem_##NAME##_wait_until_some_vector_ex(&cnt, iv, (size_t)npes, idx, NULL, XPUSHMEM_CMP_NE, vals)); \
        CHECK(cnt == 1 && idx[0] == 0, #NAME ": wait_until_some_vector_ex");                      \
        OK(xpushmem_##NAME##_test_all_vector_ex(&cnt, iv, (size_t)npes, status, XPUSHMEM_CMP_EQ, vals)); \
        CHECK(cnt == 1, #NAME ": test_all_vector_ex with slot 0 skipped");                        \
        OK(xpushmem_##NAME##_test_any_vector_ex(&cnt, iv, (size_t)npes, NULL, XPUSHMEM_CMP_NE, vals)); \
        CHECK(cnt == 0, #NAME ": test_any_vector_ex");                                            \
        OK(xpushmem_##NAME##_test_some_vector_ex(&cnt, iv, (size_t)npes, idx, NULL, XPUSHMEM_CMP_EQ, vals)); \
        CHECK(cnt == (size_t)npes - 1, #NAME ": test_some_vector_ex");                            \
        /* all masked: any -> SIZE_MAX, some -> 0, all -> immediately */                          \
        int allmask[8] = {1, 1, 1, 1, 1, 1, 1, 1};                                                \
        CHECK(xpushmem_##NAME##_wait_until_any(iv, (size_t)npes, allmask, XPUSHMEM_CMP_EQ, (T)9) == SIZE_MAX, #NAME ": all masked"); \
        OK(xpushmem_barrier_all());                                                               \
        OK(xpushmem_free(iv));                                                                    \
        OK(xpushmem_free(one));                                                                   \
    }

WAIT_TYPES(TEST_WAIT)

static void test_signals(int me, int npes) {
    int right = (me + 1) % npes, left = (me + npes - 1) % npes;
    enum { M = 16 };
    double *d = xpushmem_calloc(M, sizeof(double));
    int *ib = xpushmem_calloc(M, sizeof(int));
    uint64_t *b64 = xpushmem_calloc(M, sizeof(uint64_t));
    char *bm = xpushmem_calloc(M, 1);
    uint64_t *sig = xpushmem_calloc(8, sizeof(uint64_t));
    CHECK(d && ib && b64 && bm && sig, "calloc");
    double sd[M]; int si[M]; uint64_t s64[M]; char sm[M];
    for (int i = 0; i < M; i++) { sd[i] = me + i / 4.0; si[i] = me * 100 + i; s64[i] = (uint64_t)me << 32 | (uint64_t)i; sm[i] = (char)(me + i); }
    CHECK(xpushmem_signal_fetch(&sig[0]) == 0, "signal_fetch 0");
    OK(xpushmem_barrier_all());
    /* a pipeline: data then signal, several forms, each with its own signal word */
    OK(xpushmem_double_put_signal(d, sd, M, &sig[0], 1, XPUSHMEM_SIGNAL_SET, right));
    OK(xpushmem_int_put_signal_nbi(ib, si, M, &sig[1], 5, XPUSHMEM_SIGNAL_ADD, right));
    OK(xpushmem_put64_signal(b64, s64, M, &sig[2], 3, XPUSHMEM_SIGNAL_SET, right));
    OK(xpushmem_putmem_signal_nbi(bm, sm, M, &sig[3], 1, XPUSHMEM_SIGNAL_ADD, right));
    OK(xpushmem_putmem_signal(bm, sm, 0, &sig[3], 1, XPUSHMEM_SIGNAL_ADD, right));
    OK(xpushmem_put32_signal_nbi(&ib[0], si, 1, &sig[4], 9, XPUSHMEM_SIGNAL_SET, right));
    OK(xpushmem_quiet());
    CHECK(xpushmem_signal_wait_until(&sig[0], XPUSHMEM_CMP_EQ, 1) == 1, "wait sig0");
    uint64_t v = 0;
    OK(xpushmem_signal_wait_until_ex(&v, &sig[1], XPUSHMEM_CMP_GE, 5));
    CHECK(v == 5, "sig1 %llu", (unsigned long long)v);
    OK(xpushmem_signal_wait_until_ex(&v, &sig[2], XPUSHMEM_CMP_EQ, 3));
    CHECK(xpushmem_signal_wait_until(&sig[3], XPUSHMEM_CMP_EQ, 2) == 2, "sig3 added twice");
    CHECK(xpushmem_signal_wait_until(&sig[4], XPUSHMEM_CMP_NE, 0) == 9, "sig4");
    OK(xpushmem_signal_fetch_ex(&v, &sig[2]));
    CHECK(v == 3, "signal_fetch_ex");
    for (int i = 0; i < M; i++) {
        CHECK(d[i] == left + i / 4.0, "double put_signal data [%d]", i);
        CHECK(ib[i] == left * 100 + i, "int put_signal_nbi data [%d]", i);
        CHECK(b64[i] == ((uint64_t)left << 32 | (uint64_t)i), "put64_signal data");
        CHECK(bm[i] == (char)(left + i), "putmem_signal_nbi data");
    }
    /* signal only (0 elements) */
    OK(xpushmem_uint64_put_signal(b64, s64, 0, &sig[5], 42, XPUSHMEM_SIGNAL_SET, right));
    CHECK(xpushmem_signal_wait_until(&sig[5], XPUSHMEM_CMP_EQ, 42) == 42, "signal only");
    /* fence between puts to one PE, sync_all */
    OK(xpushmem_barrier_all());
    OK(xpushmem_int_p(&ib[0], 1, right));
    OK(xpushmem_fence());
    OK(xpushmem_int_p(&ib[1], 2, right));
    OK(xpushmem_quiet());
    OK(xpushmem_sync_all());
    CHECK(ib[0] == 1 && ib[1] == 2, "fence/quiet/sync_all");
    OK(xpushmem_barrier_all());
    OK(xpushmem_free(sig));
    OK(xpushmem_free(bm));
    OK(xpushmem_free(b64));
    OK(xpushmem_free(ib));
    OK(xpushmem_free(d));
}

int main(void) {
    int provided = -1;
    OK(xpushmem_init_thread(XPUSHMEM_THREAD_SERIALIZED, &provided));
    CHECK(provided == XPUSHMEM_THREAD_SERIALIZED, "provided %d", provided);
    CHECK(xpushmemx_initialized() == 1, "initialized");
    int me = xpushmem_my_pe(), npes = xpushmem_n_pes();
    CHECK(npes <= 8, "this test supports up to 8 PEs");
#define RUN(NAME, T) wait_##NAME(me, npes);
    WAIT_TYPES(RUN)
    test_signals(me, npes);
    int major = -1, minor = -1;
    xpushmem_info_get_version(&major, &minor);
    char name[XPUSHMEM_MAX_NAME_LEN];
    xpushmem_info_get_name(name);
    CHECK(major == XPUSHMEM_MAJOR_VERSION && minor == XPUSHMEM_MINOR_VERSION && strncmp(name, "xpushmem", 8) == 0, "info");
    printf("native_sync OK on PE %d of %d\n", me, npes);
    OK(xpushmem_finalize());
    CHECK(xpushmemx_initialized() == 0, "finalized");
    return 0;
}
