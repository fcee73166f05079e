/* Every atomic of the native API for every AMO type, including the _ex variants; 2 and 4 PEs. */
#include <stdint.h>
#include <stddef.h>
#include "xpushmem.h"
#include "check.h"

#define AMO_STD(X)                                                                     \
    X(int, int) X(long, long) X(longlong, long long) X(uint, unsigned int)              \
    X(ulong, unsigned long) X(ulonglong, unsigned long long) X(int32, int32_t)          \
    X(int64, int64_t) X(uint32, uint32_t) X(uint64, uint64_t) X(size, size_t)           \
    X(ptrdiff, ptrdiff_t)

#define AMO_BITWISE(X)                                                                 \
    X(uint, unsigned int) X(ulong, unsigned long) X(ulonglong, unsigned long long)      \
    X(int32, int32_t) X(int64, int64_t) X(uint32, uint32_t) X(uint64, uint64_t)

#define AMO_FLOAT(X) X(float, float) X(double, double)

#define TEST_STD(NAME, T)                                                                         \
    static void std_##NAME(int me, int npes) {                                                    \
        int right = (me + 1) % npes, left = (me + npes - 1) % npes;                               \
        T *w = (T *)xpushmem_calloc(8, sizeof(T));                                                \
        CHECK(w != NULL, "calloc");                                                               \
        /* w[0] on PE 0: a counter everyone adds to */                                            \
        T old = xpushmem_##NAME##_atomic_fetch_add(&w[0], (T)2, 0);                               \
        CHECK(old % 2 == 0 && old < (T)(2 * npes), #NAME ": fetch_add old");                      \
        OK(xpushmem_barrier_all());                                                               \
        OK(xpushmem_##NAME##_atomic_add(&w[0], (T)1, 0));                                         \
        OK(xpushmem_##NAME##_atomic_inc(&w[0], 0));                                               \
        T f = 0;                                                                                  \
        OK(xpushmem_##NAME##_atomic_fetch_inc_ex(&f, &w[0], 0));                                  \
        OK(xpushmem_##NAME##_atomic_fetch_add_ex(&f, &w[0], (T)3, 0));                            \
        old = xpushmem_##NAME##_atomic_fetch_inc(&w[0], 0);                                       \
        OK(xpushmem_barrier_all());                                                               \
        T total = xpushmem_##NAME##_atomic_fetch(&w[0], 0);                                       \
        CHECK(total == (T)(9 * npes), #NAME ": counter %lld", (long long)total);                  \
        OK(xpushmem_##NAME##_atomic_fetch_ex(&f, &w[0], 0));                                      \
        CHECK(f == total, #NAME ": fetch_ex");                                                    \
        /* compare_swap: exactly one PE wins */                                                   \
        OK(xpushmem_barrier_all());                                                               \
        T prev = xpushmem_##NAME##_atomic_compare_swap(&w[0], total, (T)(100 + me), 0);           \
        if (prev == total) OK(xpushmem_##NAME##_atomic_inc(&w[1], 0));                            \
        OK(xpushmem_barrier_all());                                                               \
        if (me == 0) {                                                                            \
            CHECK(w[1] == (T)1, #NAME ": %lld compare_swap winners", (long long)w[1]);            \
            CHECK(w[0] >= (T)100 && w[0] < (T)(100 + npes), #NAME ": cswap value");               \
        }                                                                                         \
        OK(xpushmem_##NAME##_atomic_compare_swap_ex(&f, &w[2], (T)0, (T)(me + 1), right));        \
        CHECK(f == (T)0, #NAME ": compare_swap_ex old");                                          \
        /* set / swap / fetch on the right neighbour */                                           \
        OK(xpushmem_##NAME##_atomic_set(&w[3], (T)(me + 5), right));                              \
        OK(xpushmem_barrier_all());                                                               \
        CHECK(w[2] == (T)(left + 1), #NAME ": compare_swap_ex stored");                           \
        CHECK(xpushmem_##NAME##_atomic_fetch(&w[3], me) == (T)(left + 5), #NAME ": set/fetch");   \
        OK(xpushmem_barrier_all());                                                               \
        T s = xpushmem_##NAME##_atomic_swap(&w[3], (T)(me + 50), right);                          \
        CHECK(s == (T)(me + 5), #NAME ": swap old");                                              \
        OK(xpushmem_barrier_all());                                                               \
        OK(xpushmem_##NAME##_atomic_swap_ex(&f, &w[3], (T)7, me));                                \
        CHECK(f == (T)(left + 50), #NAME ": swap_ex old");                                        \
        OK(xpushmem_barrier_all());                                                               \
        OK(xpushmem_free(w));                                                                     \
    }

#define TEST_BITWISE(NAME, T)                                                                     \
    static void bit_##NAME(int me, int npes) {                                                    \
        T *w = (T *)xpushmem_calloc(4, sizeof(T));                                                \
        CHECK(w != NULL, "calloc");                                                               \
        w[1] = (T)~(T)0;                                                                          \
        OK(xpushmem_barrier_all());                                                               \
        T bit = (T)((T)1 << me), f = 0;                                                           \
        OK(xpushmem_##NAME##_atomic_or(&w[0], bit, 0));                                           \
        (void)xpushmem_##NAME##_atomic_fetch_or(&w[2], bit, 0);                                   \
        OK(xpushmem_##NAME##_atomic_fetch_or_ex(&f, &w[3], bit, 0));                              \
        OK(xpushmem_##NAME##_atomic_and(&w[1], (T)~bit, 0));                                      \
        OK(xpushmem_barrier_all());                                                               \
        T all = (T)(((T)1 << npes) - 1);                                                          \
        if (me == 0) {                                                                            \
            CHECK(w[0] == all && w[2] == all && w[3] == all, #NAME ": or");                       \
            CHECK(w[1] == (T)~all, #NAME ": and");                                                \
        }                                                                                         \
        OK(xpushmem_barrier_all());                                                               \
        (void)xpushmem_##NAME##_atomic_fetch_and(&w[0], (T)~bit, 0);                              \
        OK(xpushmem_##NAME##_atomic_fetch_and_ex(&f, &w[2], (T)~bit, 0));                         \
        OK(xpushmem_##NAME##_atomic_xor(&w[3], bit, 0));                                          \
        OK(xpushmem_##NAME##_atomic_xor(&w[1], bit, 0));                                          \
        OK(xpushmem_barrier_all());                                                               \
        if (me == 0) CHECK(w[0] == 0 && w[2] == 0 && w[3] == 0 && w[1] == (T)~(T)0, #NAME ": and/xor"); \
        OK(xpushmem_barrier_all());                                                               \
        T o = xpushmem_##NAME##_atomic_fetch_xor(&w[0], bit, 0);                                  \
        (void)o;                                                                                  \
        OK(xpushmem_##NAME##_atomic_fetch_xor_ex(&f, &w[0], bit, 0));                             \
        OK(xpushmem_barrier_all());                                                               \
        if (me == 0) CHECK(w[0] == 0, #NAME ": fetch_xor twice");                                 \
        OK(xpushmem_barrier_all());                                                               \
        OK(xpushmem_free(w));                                                                     \
    }

#define TEST_FLOAT(NAME, T)                                                                       \
    static void flt_##NAME(int me, int npes) {                                                    \
        int right = (me + 1) % npes, left = (me + npes - 1) % npes;                               \
        T *w = (T *)xpushmem_calloc(2, sizeof(T));                                                \
        CHECK(w != NULL, "calloc");                                                               \
        OK(xpushmem_##NAME##_atomic_set(&w[0], (T)me + (T)0.5, right));                           \
        OK(xpushmem_barrier_all());                                                               \
        CHECK(xpushmem_##NAME##_atomic_fetch(&w[0], me) == (T)left + (T)0.5, #NAME ": set");      \
        OK(xpushmem_barrier_all());                                                               \
        T old = xpushmem_##NAME##_atomic_swap(&w[0], (T)-1.25, right);                            \
        CHECK(old == (T)me + (T)0.5, #NAME ": swap");                                             \
        T f = 0;                                                                                  \
        OK(xpushmem_barrier_all());                                                               \
        OK(xpushmem_##NAME##_atomic_fetch_ex(&f, &w[0], left));                                   \
        CHECK(f == (T)-1.25, #NAME ": fetch_ex");                                                 \
        OK(xpushmem_barrier_all());                                                               \
        OK(xpushmem_##NAME##_atomic_swap_ex(&f, &w[1], (T)2.5, right));                           \
        CHECK(f == (T)0, #NAME ": swap_ex");                                                      \
        OK(xpushmem_barrier_all());                                                               \
        OK(xpushmem_free(w));                                                                     \
    }

AMO_STD(TEST_STD)
AMO_BITWISE(TEST_BITWISE)
AMO_FLOAT(TEST_FLOAT)

int main(void) {
    OK(xpushmem_init());
    int me = xpushmem_my_pe(), npes = xpushmem_n_pes();
#define RUN_STD(NAME, T) std_##NAME(me, npes);
#define RUN_BIT(NAME, T) bit_##NAME(me, npes);
#define RUN_FLT(NAME, T) flt_##NAME(me, npes);
    AMO_STD(RUN_STD)
    AMO_BITWISE(RUN_BIT)
    AMO_FLOAT(RUN_FLT)
    printf("native_amo OK on PE %d of %d\n", me, npes);
    OK(xpushmem_finalize());
    return 0;
}
