/* Every RMA family of the native API, for every standard type: put, get, p, g, g_ex, iput, iget, nbi,
 * sized (8..128) and byte forms; run at 2 and 4 PEs. */
#include <stdint.h>
#include <stddef.h>
#include "xpushmem.h"
#include "check.h"

#define RMA_TYPES(X)                                                                    \
    X(float, float) X(double, double) X(longdouble, long double) X(char, char)           \
    X(schar, signed char) X(short, short) X(int, int) X(long, long)                      \
    X(longlong, long long) X(uchar, unsigned char) X(ushort, unsigned short)             \
    X(uint, unsigned int) X(ulong, unsigned long) X(ulonglong, unsigned long long)       \
    X(int8, int8_t) X(int16, int16_t) X(int32, int32_t) X(int64, int64_t)                \
    X(uint8, uint8_t) X(uint16, uint16_t) X(uint32, uint32_t) X(uint64, uint64_t)        \
    X(size, size_t) X(ptrdiff, ptrdiff_t)

#define N 8

#define TEST_RMA(NAME, T)                                                                         \
    static void test_##NAME(int me, int npes) {                                                   \
        int right = (me + 1) % npes, left = (me + npes - 1) % npes;                               \
        T *buf = (T *)xpushmem_calloc(6 * N, sizeof(T));                                          \
        CHECK(buf != NULL, #NAME ": calloc: %s", xpushmem_last_error());                          \
        T src[3 * N];                                                                             \
        for (int i = 0; i < 3 * N; i++) src[i] = (T)(me * 10 + i);                                \
        /* put to the right, get back from the right */                                           \
        OK(xpushmem_##NAME##_put(buf, src, N, right));                                            \
        OK(xpushmem_barrier_all());                                                               \
        for (int i = 0; i < N; i++)                                                               \
            CHECK(buf[i] == (T)(left * 10 + i), #NAME ": put: buf[%d]", i);                       \
        T got[3 * N];                                                                             \
        OK(xpushmem_##NAME##_get(got, buf, N, right));                                            \
        for (int i = 0; i < N; i++) CHECK(got[i] == (T)(me * 10 + i), #NAME ": get: [%d]", i);    \
        /* p, g, g_ex */                                                                          \
        OK(xpushmem_##NAME##_p(&buf[N], (T)(me + 1), right));                                     \
        OK(xpushmem_barrier_all());                                                               \
        CHECK(buf[N] == (T)(left + 1), #NAME ": p");                                              \
        CHECK(xpushmem_##NAME##_g(&buf[N], right) == (T)(me + 1), #NAME ": g");                   \
        T v = 0;                                                                                  \
        OK(xpushmem_##NAME##_g_ex(&v, &buf[N], left));                                            \
        CHECK(v == (T)((left + npes - 1) % npes + 1), #NAME ": g_ex");                                \
        /* iput: src stride 2 -> dest stride 3, 4 elements, into buf[2N..] on the right */        \
        OK(xpushmem_##NAME##_iput(&buf[2 * N], src, 3, 2, 4, right));                             \
        OK(xpushmem_barrier_all());                                                               \
        for (int i = 0; i < 4; i++)                                                               \
            CHECK(buf[2 * N + 3 * i] == (T)(left * 10 + 2 * i), #NAME ": iput [%d]", i);          \
        CHECK(buf[2 * N + 1] == (T)0, #NAME ": iput wrote between strides");                      \
        /* iget: from the right's buf[2N..] at stride 3 into got at stride 2 */                   \
        memset(got, 0, sizeof got);                                                               \
        OK(xpushmem_##NAME##_iget(got, &buf[2 * N], 2, 3, 4, right));                             \
        for (int i = 0; i < 4; i++)                                                               \
            CHECK(got[2 * i] == (T)(me * 10 + 2 * i), #NAME ": iget [%d]", i);                    \
        /* nbi forms, completed by quiet */                                                       \
        OK(xpushmem_##NAME##_put_nbi(&buf[4 * N], &src[N], N, right));                            \
        OK(xpushmem_quiet());                                                                     \
        OK(xpushmem_barrier_all());                                                               \
        OK(xpushmem_##NAME##_get_nbi(got, &buf[4 * N], N, left));                                 \
        OK(xpushmem_quiet());                                                                     \
        int ll = (left + npes - 1) % npes;                                                        \
        for (int i = 0; i < N; i++)                                                               \
            CHECK(got[i] == (T)(ll * 10 + N + i), #NAME ": nbi [%d]", i);                         \
        /* zero elements is a no-op */                                                            \
        OK(xpushmem_##NAME##_put(buf, src, 0, right));                                            \
        OK(xpushmem_free(buf));                                                                   \
    }

RMA_TYPES(TEST_RMA)

typedef struct { uint64_t lo, hi; } u128;

static void test_sized(int me, int npes) {
    int right = (me + 1) % npes, left = (me + npes - 1) % npes;
    uint8_t *b8 = xpushmem_malloc(64);
    uint16_t *b16 = xpushmem_malloc(64 * 2);
    uint32_t *b32 = xpushmem_malloc(64 * 4);
    uint64_t *b64 = xpushmem_malloc(64 * 8);
    u128 *b128 = xpushmem_align(16, 64 * 16);
    char *bm = xpushmem_malloc(100);
    CHECK(b8 && b16 && b32 && b64 && b128 && bm, "sized allocations: %s", xpushmem_last_error());
    CHECK(((uintptr_t)b128 & 15) == 0, "align(16)");
    uint8_t s8[8]; uint16_t s16[8]; uint32_t s32[8]; uint64_t s64[8]; u128 s128[8]; char sm[100];
    for (int i = 0; i < 8; i++) {
        s8[i] = (uint8_t)(me + i); s16[i] = (uint16_t)(1000 * me + i); s32[i] = (uint32_t)(100000 * me + i);
        s64[i] = ((uint64_t)me << 40) + (uint64_t)i; s128[i].lo = (uint64_t)me; s128[i].hi = (uint64_t)i + 7;
    }
    for (int i = 0; i < 100; i++) sm[i] = (char)(me + i);
    OK(xpushmem_put8(b8, s8, 8, right));
    OK(xpushmem_put16(b16, s16, 8, right));
    OK(xpushmem_put32(b32, s32, 8, right));
    OK(xpushmem_put64(b64, s64, 8, right));
    OK(xpushmem_put128(b128, s128, 8, right));
    OK(xpushmem_putmem(bm, sm, 100, right));
    OK(xpushmem_put64_nbi(&b64[8], s64, 8, right));
    OK(xpushmem_putmem_nbi(&b8[16], sm, 8, right));
    OK(xpushmem_iput32(&b32[16], s32, 2, 1, 4, right));
    OK(xpushmem_iput128(&b128[16], s128, 2, 1, 4, right));
    OK(xpushmem_iput8(&b8[32], s8, 2, 1, 4, right));
    OK(xpushmem_iput16(&b16[32], s16, 2, 1, 4, right));
    OK(xpushmem_iput64(&b64[32], s64, 2, 1, 4, right));
    OK(xpushmem_barrier_all());
    for (int i = 0; i < 8; i++) {
        CHECK(b8[i] == (uint8_t)(left + i), "put8");
        CHECK(b16[i] == (uint16_t)(1000 * left + i), "put16");
        CHECK(b32[i] == (uint32_t)(100000 * left + i), "put32");
        CHECK(b64[i] == ((uint64_t)left << 40) + (uint64_t)i, "put64");
        CHECK(b64[8 + i] == ((uint64_t)left << 40) + (uint64_t)i, "put64_nbi");
        CHECK(b128[i].lo == (uint64_t)left && b128[i].hi == (uint64_t)i + 7, "put128 [%d]", i);
        CHECK(b8[16 + i] == (uint8_t)(left + i), "putmem_nbi");
    }
    for (int i = 0; i < 4; i++) {
        CHECK(b32[16 + 2 * i] == (uint32_t)(100000 * left + i), "iput32 [%d]", i);
        CHECK(b128[16 + 2 * i].lo == (uint64_t)left && b128[16 + 2 * i].hi == (uint64_t)i + 7, "iput128 [%d]", i);
        CHECK(b128[17 + 2 * i].lo == 0 || i == 3, "iput128 wrote between strides");
        CHECK(b8[32 + 2 * i] == (uint8_t)(left + i), "iput8");
        CHECK(b16[32 + 2 * i] == (uint16_t)(1000 * left + i), "iput16");
        CHECK(b64[32 + 2 * i] == ((uint64_t)left << 40) + (uint64_t)i, "iput64");
    }
    for (int i = 0; i < 100; i++) CHECK(bm[i] == (char)(left + i), "putmem [%d]", i);
    uint8_t g8[8]; uint16_t g16[8]; uint32_t g32[8]; uint64_t g64[8]; u128 g128[8]; char gm[100];
    OK(xpushmem_get8(g8, b8, 8, right));
    OK(xpushmem_get16(g16, b16, 8, right));
    OK(xpushmem_get32(g32, b32, 8, right));
    OK(xpushmem_get64(g64, b64, 8, right));
    OK(xpushmem_get128(g128, b128, 8, right));
    OK(xpushmem_getmem(gm, bm, 100, right));
    for (int i = 0; i < 8; i++) {
        CHECK(g8[i] == s8[i] && g16[i] == s16[i] && g32[i] == s32[i] && g64[i] == s64[i], "get sized [%d]", i);
        CHECK(g128[i].lo == s128[i].lo && g128[i].hi == s128[i].hi, "get128 [%d]", i);
    }
    CHECK(memcmp(gm, sm, 100) == 0, "getmem");
    memset(g128, 0, sizeof g128);
    OK(xpushmem_iget128(g128, &b128[16], 1, 2, 4, right));
    OK(xpushmem_get64_nbi(g64, &b64[8], 8, right));
    OK(xpushmem_getmem_nbi(gm, bm, 10, left));
    OK(xpushmem_iget32(g32, &b32[16], 1, 2, 4, right));
    OK(xpushmem_iget8(g8, &b8[32], 1, 2, 4, right));
    OK(xpushmem_iget16(g16, &b16[32], 1, 2, 4, right));
    OK(xpushmem_iget64(g64, &b64[32], 1, 2, 4, right));
    OK(xpushmem_get8_nbi(g8 + 4, b8, 4, right));
    OK(xpushmem_get16_nbi(g16 + 4, b16, 4, right));
    OK(xpushmem_get32_nbi(g32 + 4, b32, 4, right));
    OK(xpushmem_get128_nbi(g128 + 4, b128, 4, right));
    OK(xpushmem_quiet());
    for (int i = 0; i < 4; i++) {
        CHECK(g128[i].lo == (uint64_t)me && g128[i].hi == (uint64_t)i + 7, "iget128 [%d]", i);
        CHECK(g32[i] == (uint32_t)(100000 * me + i), "iget32");
        CHECK(g8[i] == (uint8_t)(me + i) && g8[4 + i] == (uint8_t)(me + i), "iget8/get8_nbi");
        CHECK(g16[i] == (uint16_t)(1000 * me + i) && g16[4 + i] == (uint16_t)(1000 * me + i), "iget16/get16_nbi");
        CHECK(g64[i] == ((uint64_t)me << 40) + (uint64_t)i, "iget64");
    }
    int ll = (left + npes - 1) % npes;
    for (int i = 0; i < 10; i++) CHECK(gm[i] == (char)(ll + i), "getmem_nbi");
    /* the other nbi puts */
    OK(xpushmem_put8_nbi(b8, s8, 1, right));
    OK(xpushmem_put16_nbi(b16, s16, 1, right));
    OK(xpushmem_put32_nbi(b32, s32, 1, right));
    OK(xpushmem_put128_nbi(b128, s128, 1, right));
    OK(xpushmem_barrier_all());
    OK(xpushmem_free(bm));
    OK(xpushmem_free(b128));
    OK(xpushmem_free(b64));
    OK(xpushmem_free(b32));
    OK(xpushmem_free(b16));
    OK(xpushmem_free(b8));
}

static void test_memory(int me, int npes) {
    /* calloc zeroes, realloc keeps contents, ptr reaches peers on this node, malloc(0) is NULL */
    int *z = xpushmem_calloc(100, sizeof(int));
    CHECK(z != NULL, "calloc");
    for (int i = 0; i < 100; i++) CHECK(z[i] == 0, "calloc zeroed");
    for (int i = 0; i < 100; i++) z[i] = me + i;
    int *r = xpushmem_realloc(z, 200 * sizeof(int));
    CHECK(r != NULL, "realloc: %s", xpushmem_last_error());
    for (int i = 0; i < 100; i++) CHECK(r[i] == me + i, "realloc kept [%d]", i);
    int right = (me + 1) % npes;
    int *rp = xpushmem_ptr(r, right);
    CHECK(rp != NULL, "ptr to a node peer");
    CHECK(rp[5] == right + 5, "load through ptr");
    CHECK(xpushmem_ptr(r, me) == (void *)r, "ptr to self is the address");
    CHECK(xpushmem_pe_accessible(right) == 1 && xpushmem_pe_accessible(npes) == 0, "pe_accessible");
    CHECK(xpushmem_addr_accessible(r, right) == 1, "addr_accessible");
    int local = 0;
    CHECK(xpushmem_addr_accessible(&local, right) == 0, "stack address is not symmetric");
    CHECK(xpushmem_malloc(0) == NULL, "malloc(0) is NULL");
    OK(xpushmem_free(NULL));
    OK(xpushmem_barrier_all());
    OK(xpushmem_free(r));
    void *a = xpushmem_align(4096, 10);
    CHECK(a != NULL && ((uintptr_t)a % 4096) == 0, "align(4096)");
    OK(xpushmem_free(a));
    CHECK(xpushmemx_heap_base() != NULL && xpushmemx_heap_size() > 0, "heap base/size");
}

int main(void) {
    OK(xpushmem_init());
    int me = xpushmem_my_pe(), npes = xpushmem_n_pes();
    CHECK(me >= 0 && npes >= 2 && me < npes, "my_pe %d n_pes %d", me, npes);
    int provided = -1;
    OK(xpushmem_query_thread(&provided));
    CHECK(provided == XPUSHMEM_THREAD_MULTIPLE, "thread level %d", provided);
#define RUN(NAME, T) test_##NAME(me, npes);
    RMA_TYPES(RUN)
    test_sized(me, npes);
    test_memory(me, npes);
    OK(xpushmem_barrier_all());
    printf("native_rma OK on PE %d of %d\n", me, npes);
    OK(xpushmem_finalize());
    return 0;
}
