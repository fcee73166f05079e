/* Teams and collectives of the native API: every team call, every collective family (typed for several types,
 * and the byte forms) on the world, a strided team, the row and column teams of a 2-D split, and teams of one,
 * with results checked against values computed here from the inputs; zero-length calls; the algorithm
 * extension; and the error returns (invalid team handles, roots out of range, counts that differ between PEs).
 * Prints "teams_collectives OK on PE <me> of <n>" at the end. */
#include <stdint.h>
#include <stddef.h>
#include "xpushmem.h"
#include "check.h"

#define NE 5          /* elements per block */
#define MAXPE 16
#define BUF (64 * 1024) /* bytes of each symmetric buffer */

static unsigned char *S, *D; /* symmetric source and destination */
static int ME, NPES;

/* The input of member m, element i (small values: sums and products of a few stay exact in every type). */
static int val(int m, int i) { return (m * 7 + i * 3 + 1) % 23; }
/* The element i of the block member m sends to member j (alltoall). */
static int val2(int m, int j, int i) { return (m * 5 + j * 11 + i) % 31; }
/* How many elements member m contributes to a collect (0 for some members). */
static int cnt(int m) { return m % 3; }

#define SENT 99

/* ---- data movement, for one type ------------------------------------------------------------------------- */
#define MOVE_TEST(N, T)                                                                                        \
    static void move_##N(xpushmem_team_t team) {                                                              \
        int n = xpushmem_team_n_pes(team), me = xpushmem_team_my_pe(team);                                    \
        T *src = (T *)S, *dst = (T *)D;                                                                       \
        /* broadcast from every root */                                                                       \
        for (int root = 0; root < n; root++) {                                                                \
            for (int i = 0; i < NE + 1; i++) { src[i] = (T)val(me, i); dst[i] = (T)SENT; }                   \
            OK(xpushmem_##N##_broadcast(team, dst, src, NE, root));                                           \
            for (int i = 0; i < NE; i++)                                                                      \
                CHECK(dst[i] == (T)val(root, i), #N " broadcast root %d [%d]", root, i);                      \
            CHECK(dst[NE] == (T)SENT, #N " broadcast wrote past nelems");                                     \
        }                                                                                                     \
        /* fcollect */                                                                                        \
        for (int i = 0; i < NE; i++) src[i] = (T)val(me, i);                                                  \
        for (int i = 0; i < n * NE + 1; i++) dst[i] = (T)SENT;                                                \
        OK(xpushmem_##N##_fcollect(team, dst, src, NE));                                                      \
        for (int j = 0; j < n; j++)                                                                           \
            for (int i = 0; i < NE; i++)                                                                      \
                CHECK(dst[j * NE + i] == (T)val(j, i), #N " fcollect [%d][%d]", j, i);                        \
        CHECK(dst[n * NE] == (T)SENT, #N " fcollect wrote past the end");                                     \
        /* collect: member m gives cnt(m) elements */                                                         \
        for (int i = 0; i < NE; i++) src[i] = (T)val(me, i);                                                  \
        for (int i = 0; i < n * NE; i++) dst[i] = (T)SENT;                                                    \
        OK(xpushmem_##N##_collect(team, dst, src, (size_t)cnt(me)));                                          \
        {                                                                                                     \
            int at = 0;                                                                                       \
            for (int j = 0; j < n; j++)                                                                       \
                for (int i = 0; i < cnt(j); i++, at++)                                                        \
                    CHECK(dst[at] == (T)val(j, i), #N " collect from %d [%d]", j, i);                         \
            CHECK(dst[at] == (T)SENT, #N " collect wrote past the end");                                      \
        }                                                                                                     \
        /* alltoall */                                                                                        \
        for (int j = 0; j < n; j++)                                                                           \
            for (int i = 0; i < NE; i++) src[j * NE + i] = (T)val2(me, j, i);                                 \
        for (int i = 0; i < n * NE; i++) dst[i] = (T)SENT;                                                    \
        OK(xpushmem_##N##_alltoall(team, dst, src, NE));                                                      \
        for (int j = 0; j < n; j++)                                                                           \
            for (int i = 0; i < NE; i++)                                                                      \
                CHECK(dst[j * NE + i] == (T)val2(j, me, i), #N " alltoall from %d [%d]", j, i);               \
        /* alltoalls: dst stride 2, src stride 3 */                                                           \
        for (int k = 0; k < n * NE * 3; k++) src[k] = (T)SENT;                                                \
        for (int j = 0; j < n; j++)                                                                           \
            for (int i = 0; i < NE; i++) src[(j * NE + i) * 3] = (T)val2(me, j, i);                           \
        for (int k = 0; k < n * NE * 2; k++) dst[k] = (T)SENT;                                                \
        OK(xpushmem_##N##_alltoalls(team, dst, src, 2, 3, NE));                                               \
        for (int j = 0; j < n; j++)                                                                           \
            for (int i = 0; i < NE; i++) {                                                                    \
                CHECK(dst[(j * NE + i) * 2] == (T)val2(j, me, i), #N " alltoalls from %d [%d]", j, i);        \
                CHECK(dst[(j * NE + i) * 2 + 1] == (T)SENT, #N " alltoalls wrote a gap");                     \
            }                                                                                                 \
        /* zero-length calls change nothing, with symmetric or NULL pointers */                               \
        for (int i = 0; i < 4; i++) dst[i] = (T)SENT;                                                         \
        OK(xpushmem_##N##_broadcast(team, dst, src, 0, 0));                                                   \
        OK(xpushmem_##N##_fcollect(team, dst, src, 0));                                                       \
        OK(xpushmem_##N##_alltoall(team, dst, src, 0));                                                       \
        OK(xpushmem_##N##_alltoalls(team, dst, src, 1, 1, 0));                                                \
        OK(xpushmem_##N##_broadcast(team, NULL, NULL, 0, 0));                                                 \
        OK(xpushmem_##N##_fcollect(team, NULL, NULL, 0));                                                     \
        for (int i = 0; i < 4; i++) CHECK(dst[i] == (T)SENT, #N " zero-length call wrote [%d]", i);           \
    }

MOVE_TEST(int, int)
MOVE_TEST(double, double)
MOVE_TEST(char, char)
MOVE_TEST(uint8, uint8_t)
MOVE_TEST(longlong, long long)
MOVE_TEST(float, float)
MOVE_TEST(uint16, uint16_t)
MOVE_TEST(size, size_t)

/* ---- reductions, for one type ---------------------------------------------------------------------------- */
static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }

/* min/max/sum/prod reduce and reducescatter, sum inscan/exscan: inputs val(m, i) - 5 when signed (negative
 * values too), prod over (m + i) % 3 + 1. */
#define ARITH_TEST(N, T, SIGNED)                                                                               \
    static void arith_##N(xpushmem_team_t team) {                                                             \
        int n = xpushmem_team_n_pes(team), me = xpushmem_team_my_pe(team);                                   \
        T *src = (T *)S, *dst = (T *)D;                                                                       \
        int off = (SIGNED) ? 5 : 0;                                                                           \
        int emin[NE], emax[NE];                                                                               \
        T esum[NE], eprod[NE];                                                                                \
        for (int i = 0; i < NE; i++) {                                                                        \
            emin[i] = 1000; emax[i] = -1000; esum[i] = 0; eprod[i] = 1;                                       \
            for (int m = 0; m < n; m++) {                                                                     \
                int v = val(m, i) - off;                                                                      \
                emin[i] = imin(emin[i], v); emax[i] = imax(emax[i], v);                                       \
                esum[i] = (T)(esum[i] + (T)v);                                                                \
                eprod[i] = (T)(eprod[i] * (T)((m + i) % 3 + 1));                                              \
            }                                                                                                 \
        }                                                                                                     \
        for (int i = 0; i < NE; i++) src[i] = (T)(val(me, i) - off);                                          \
        OK(xpushmem_##N##_min_reduce(team, dst, src, NE));                                                    \
        for (int i = 0; i < NE; i++) CHECK(dst[i] == (T)emin[i], #N " min_reduce [%d]", i);                   \
        OK(xpushmem_##N##_max_reduce(team, dst, src, NE));                                                    \
        for (int i = 0; i < NE; i++) CHECK(dst[i] == (T)emax[i], #N " max_reduce [%d]", i);                   \
        OK(xpushmem_##N##_sum_reduce(team, dst, src, NE));                                                    \
        for (int i = 0; i < NE; i++) CHECK(dst[i] == esum[i], #N " sum_reduce [%d]", i);                      \
        /* in place */                                                                                        \
        for (int i = 0; i < NE; i++) dst[i] = (T)((me + i) % 3 + 1);                                          \
        OK(xpushmem_##N##_prod_reduce(team, dst, dst, NE));                                                   \
        for (int i = 0; i < NE; i++) CHECK(dst[i] == eprod[i], #N " prod_reduce in place [%d]", i);           \
        OK(xpushmem_##N##_sum_reduce(team, dst, src, 0));                                                     \
        /* reducescatter: src holds n blocks; block b of member m is val(m, b * NE + k) */                    \
        for (int b = 0; b < n; b++)                                                                           \
            for (int k = 0; k < NE; k++) src[b * NE + k] = (T)(val(me, b * NE + k) - off);                    \
        for (int k = 0; k < NE + 1; k++) dst[k] = (T)SENT;                                                    \
        OK(xpushmem_##N##_sum_reducescatter(team, dst, src, NE));                                             \
        for (int k = 0; k < NE; k++) {                                                                        \
            T e = 0;                                                                                          \
            for (int m = 0; m < n; m++) e = (T)(e + (T)(val(m, me * NE + k) - off));                          \
            CHECK(dst[k] == e, #N " sum_reducescatter [%d]", k);                                              \
        }                                                                                                     \
        CHECK(dst[NE] == (T)SENT, #N " reducescatter wrote past nelems");                                     \
        OK(xpushmem_##N##_max_reducescatter(team, dst, src, NE));                                             \
        for (int k = 0; k < NE; k++) {                                                                        \
            int e = -1000;                                                                                    \
            for (int m = 0; m < n; m++) e = imax(e, val(m, me * NE + k) - off);                               \
            CHECK(dst[k] == (T)e, #N " max_reducescatter [%d]", k);                                           \
        }                                                                                                     \
        OK(xpushmem_##N##_min_reducescatter(team, dst, src, NE));                                             \
        for (int k = 0; k < NE; k++) {                                                                        \
            int e = 1000;                                                                                     \
            for (int m = 0; m < n; m++) e = imin(e, val(m, me * NE + k) - off);                               \
            CHECK(dst[k] == (T)e, #N " min_reducescatter [%d]", k);                                           \
        }                                                                                                     \
        for (int b = 0; b < n; b++)                                                                           \
            for (int k = 0; k < NE; k++) src[b * NE + k] = (T)((me + b + k) % 3 + 1);                         \
        OK(xpushmem_##N##_prod_reducescatter(team, dst, src, NE));                                            \
        for (int k = 0; k < NE; k++) {                                                                        \
            T e = 1;                                                                                          \
            for (int m = 0; m < n; m++) e = (T)(e * (T)((m + me + k) % 3 + 1));                               \
            CHECK(dst[k] == e, #N " prod_reducescatter [%d]", k);                                             \
        }                                                                                                     \
        /* scans */                                                                                           \
        for (int i = 0; i < NE; i++) src[i] = (T)(val(me, i) - off);                                          \
        OK(xpushmemx_##N##_sum_inscan(team, dst, src, NE));                                                   \
        for (int i = 0; i < NE; i++) {                                                                        \
            T e = 0;                                                                                          \
            for (int m = 0; m <= me; m++) e = (T)(e + (T)(val(m, i) - off));                                  \
            CHECK(dst[i] == e, #N " sum_inscan [%d]", i);                                                     \
        }                                                                                                     \
        OK(xpushmemx_##N##_sum_exscan(team, dst, src, NE));                                                   \
        for (int i = 0; i < NE; i++) {                                                                        \
            T e = 0;                                                                                          \
            for (int m = 0; m < me; m++) e = (T)(e + (T)(val(m, i) - off));                                   \
            CHECK(dst[i] == e, #N " sum_exscan [%d]", i);                                                     \
        }                                                                                                     \
        OK(xpushmemx_##N##_sum_inscan(team, NULL, NULL, 0));                                                  \
        OK(xpushmem_##N##_sum_reducescatter(team, NULL, NULL, 0));                                            \
    }

ARITH_TEST(int, int, 1)
ARITH_TEST(long, long, 1)
ARITH_TEST(double, double, 1)
ARITH_TEST(float, float, 1)
ARITH_TEST(int8, int8_t, 1)
ARITH_TEST(uint64, uint64_t, 0)
ARITH_TEST(uchar, unsigned char, 0)
ARITH_TEST(size, size_t, 0)

/* and/or/xor reduce and reducescatter on bit patterns of member and element numbers */
static unsigned bits(int m, int i) { return (unsigned)((0x5au ^ (unsigned)(m * 37 + i * 11)) | (1u << ((m + i) % 7))) & 0xffu; }

#define BITWISE_TEST(N, T)                                                                                     \
    static void bitwise_##N(xpushmem_team_t team) {                                                           \
        int n = xpushmem_team_n_pes(team), me = xpushmem_team_my_pe(team);                                   \
        T *src = (T *)S, *dst = (T *)D;                                                                       \
        for (int i = 0; i < NE; i++) src[i] = (T)bits(me, i);                                                 \
        OK(xpushmem_##N##_and_reduce(team, dst, src, NE));                                                    \
        for (int i = 0; i < NE; i++) {                                                                        \
            T e = (T)~(T)0;                                                                                   \
            for (int m = 0; m < n; m++) e = (T)(e & (T)bits(m, i));                                           \
            CHECK(dst[i] == e, #N " and_reduce [%d]", i);                                                     \
        }                                                                                                     \
        OK(xpushmem_##N##_or_reduce(team, dst, src, NE));                                                     \
        for (int i = 0; i < NE; i++) {                                                                        \
            T e = 0;                                                                                          \
            for (int m = 0; m < n; m++) e = (T)(e | (T)bits(m, i));                                           \
            CHECK(dst[i] == e, #N " or_reduce [%d]", i);                                                      \
        }                                                                                                     \
        OK(xpushmem_##N##_xor_reduce(team, dst, src, NE));                                                    \
        for (int i = 0; i < NE; i++) {                                                                        \
            T e = 0;                                                                                          \
            for (int m = 0; m < n; m++) e = (T)(e ^ (T)bits(m, i));                                           \
            CHECK(dst[i] == e, #N " xor_reduce [%d]", i);                                                     \
        }                                                                                                     \
        for (int k = 0; k < n * NE; k++) src[k] = (T)bits(me, k);                                             \
        OK(xpushmem_##N##_and_reducescatter(team, dst, src, NE));                                             \
        for (int k = 0; k < NE; k++) {                                                                        \
            T e = (T)~(T)0;                                                                                   \
            for (int m = 0; m < n; m++) e = (T)(e & (T)bits(m, me * NE + k));                                 \
            CHECK(dst[k] == e, #N " and_reducescatter [%d]", k);                                              \
        }                                                                                                     \
        OK(xpushmem_##N##_or_reducescatter(team, dst, src, NE));                                              \
        for (int k = 0; k < NE; k++) {                                                                        \
            T e = 0;                                                                                          \
            for (int m = 0; m < n; m++) e = (T)(e | (T)bits(m, me * NE + k));                                 \
            CHECK(dst[k] == e, #N " or_reducescatter [%d]", k);                                               \
        }                                                                                                     \
        OK(xpushmem_##N##_xor_reducescatter(team, dst, src, NE));                                             \
        for (int k = 0; k < NE; k++) {                                                                        \
            T e = 0;                                                                                          \
            for (int m = 0; m < n; m++) e = (T)(e ^ (T)bits(m, me * NE + k));                                 \
            CHECK(dst[k] == e, #N " xor_reducescatter [%d]", k);                                              \
        }                                                                                                     \
        OK(xpushmem_##N##_xor_reduce(team, dst, src, 0));                                                     \
    }

BITWISE_TEST(uint32, uint32_t)
BITWISE_TEST(int64, int64_t)
BITWISE_TEST(uchar, unsigned char)
BITWISE_TEST(ulonglong, unsigned long long)

/* ---- byte forms ------------------------------------------------------------------------------------------ */
static void mem_forms(xpushmem_team_t team) {
    int n = xpushmem_team_n_pes(team), me = xpushmem_team_my_pe(team);
    int root = n - 1;
    for (int i = 0; i < 8; i++) { S[i] = (unsigned char)val(me, i); D[i] = SENT; }
    OK(xpushmem_broadcastmem(team, D, S, 7, root));
    for (int i = 0; i < 7; i++) CHECK(D[i] == (unsigned char)val(root, i), "broadcastmem [%d]", i);
    CHECK(D[7] == SENT, "broadcastmem wrote past nelems");
    OK(xpushmem_fcollectmem(team, D, S, 3));
    for (int j = 0; j < n; j++)
        for (int i = 0; i < 3; i++) CHECK(D[j * 3 + i] == (unsigned char)val(j, i), "fcollectmem [%d][%d]", j, i);
    OK(xpushmem_collectmem(team, D, S, (size_t)cnt(me)));
    int at = 0;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < cnt(j); i++, at++) CHECK(D[at] == (unsigned char)val(j, i), "collectmem %d [%d]", j, i);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < 3; i++) S[j * 3 + i] = (unsigned char)val2(me, j, i);
    OK(xpushmem_alltoallmem(team, D, S, 3));
    for (int j = 0; j < n; j++)
        for (int i = 0; i < 3; i++) CHECK(D[j * 3 + i] == (unsigned char)val2(j, me, i), "alltoallmem %d [%d]", j, i);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < 3; i++) S[(j * 3 + i) * 2] = (unsigned char)val2(me, j, i);
    OK(xpushmem_alltoallsmem(team, D, S, 1, 2, 3));
    for (int j = 0; j < n; j++)
        for (int i = 0; i < 3; i++) CHECK(D[j * 3 + i] == (unsigned char)val2(j, me, i), "alltoallsmem %d [%d]", j, i);
    OK(xpushmem_broadcastmem(team, NULL, NULL, 0, 0));
    OK(xpushmem_collectmem(team, D, S, 0));
    OK(xpushmem_alltoallmem(team, D, S, 0));
}

/* Every family on `team` (called by its members only), with barriers and syncs of the team in between. */
static void all_on(xpushmem_team_t team) {
    CHECK(xpushmem_team_n_pes(team) >= 1 && xpushmem_team_my_pe(team) >= 0, "team numbers");
    move_int(team); move_double(team); move_char(team); move_uint8(team);
    OK(xpushmem_barrier(team));
    move_longlong(team); move_float(team); move_uint16(team); move_size(team);
    OK(xpushmem_team_sync(team));
    arith_int(team); arith_long(team); arith_double(team); arith_float(team);
    OK(xpushmem_sync(team));
    arith_int8(team); arith_uint64(team); arith_uchar(team); arith_size(team);
    bitwise_uint32(team); bitwise_int64(team); bitwise_uchar(team); bitwise_ulonglong(team);
    mem_forms(team);
    OK(xpushmem_barrier(team));
}

/* The world PE of member `m` of `team`, checked both ways with translate_pe. */
static int world_pe(xpushmem_team_t team, int m) {
    int w = xpushmem_team_translate_pe(team, m, XPUSHMEM_TEAM_WORLD);
    CHECK(w >= 0 && w < NPES, "translate member %d: %d", m, w);
    CHECK(xpushmem_team_translate_pe(XPUSHMEM_TEAM_WORLD, w, team) == m, "translate back %d", w);
    int x = -2;
    OK(xpushmem_team_translate_pe_ex(&x, team, m, XPUSHMEM_TEAM_WORLD));
    CHECK(x == w, "translate_pe_ex %d", x);
    return w;
}

static void errors(void) {
    int *src = (int *)S, *dst = (int *)D;
    char expect[128];
    /* invalid and unknown team handles: an error on every PE (each passes it) */
    FAILS(xpushmem_int_broadcast(XPUSHMEM_TEAM_INVALID, dst, src, 1, 0), XPUSHMEM_ERROR_INVALID_ARGUMENT, "xpushmem_int_broadcast");
    CHECK(strstr(xpushmem_last_error(), "invalid team") != NULL, "message: %s", xpushmem_last_error());
    FAILS(xpushmem_long_sum_reduce(12345, (long *)dst, (long *)src, 1), XPUSHMEM_ERROR_INVALID_ARGUMENT, "not a live team");
    FAILS(xpushmem_fcollectmem(-7, dst, src, 1), XPUSHMEM_ERROR_INVALID_ARGUMENT, "team = -7");
    FAILS(xpushmem_int_sum_reducescatter(XPUSHMEM_TEAM_INVALID, dst, src, 1), XPUSHMEM_ERROR_INVALID_ARGUMENT, "invalid team");
    FAILS(xpushmemx_int_sum_inscan(99, dst, src, 1), XPUSHMEM_ERROR_INVALID_ARGUMENT, "xpushmemx_int_sum_inscan");
    FAILS(xpushmem_barrier(XPUSHMEM_TEAM_INVALID), XPUSHMEM_ERROR_INVALID_ARGUMENT, "xpushmem_barrier");
    FAILS(xpushmem_team_sync(4242), XPUSHMEM_ERROR_INVALID_ARGUMENT, "not a live team");
    FAILS(xpushmem_sync(XPUSHMEM_TEAM_INVALID), XPUSHMEM_ERROR_INVALID_ARGUMENT, "xpushmem_sync");
    CHECK(xpushmem_team_my_pe(XPUSHMEM_TEAM_INVALID) == -1, "my_pe of the invalid team");
    CHECK(xpushmem_team_n_pes(XPUSHMEM_TEAM_INVALID) == -1, "n_pes of the invalid team");
    CHECK(xpushmem_team_my_pe(777) == -1 && xpushmem_last_error_code() == XPUSHMEM_ERROR_INVALID_ARGUMENT, "my_pe 777");
    CHECK(strstr(xpushmem_last_error(), "xpushmem_team_my_pe") != NULL, "message: %s", xpushmem_last_error());
    int v = 5;
    FAILS(xpushmem_team_my_pe_ex(&v, XPUSHMEM_TEAM_INVALID), XPUSHMEM_ERROR_INVALID_ARGUMENT, "invalid team");
    FAILS(xpushmem_team_n_pes_ex(&v, 31337), XPUSHMEM_ERROR_INVALID_ARGUMENT, "team = 31337");
    CHECK(xpushmem_team_translate_pe(XPUSHMEM_TEAM_INVALID, 0, XPUSHMEM_TEAM_WORLD) == -1, "translate invalid");
    CHECK(xpushmem_team_translate_pe(XPUSHMEM_TEAM_WORLD, NPES, XPUSHMEM_TEAM_WORLD) == -1, "translate pe n");
    CHECK(xpushmem_team_translate_pe(XPUSHMEM_TEAM_WORLD, -1, XPUSHMEM_TEAM_WORLD) == -1, "translate pe -1");
    FAILS(xpushmem_team_translate_pe_ex(&v, XPUSHMEM_TEAM_WORLD, NPES, XPUSHMEM_TEAM_WORLD), XPUSHMEM_ERROR_INVALID_PE, "src_pe");
    FAILS(xpushmem_team_translate_pe_ex(&v, XPUSHMEM_TEAM_WORLD, 0, XPUSHMEM_TEAM_INVALID), XPUSHMEM_ERROR_INVALID_ARGUMENT, "invalid team");
    xpushmem_team_config_t cfg = {7};
    FAILS(xpushmem_team_get_config(XPUSHMEM_TEAM_INVALID, XPUSHMEM_TEAM_NUM_CONTEXTS, &cfg), XPUSHMEM_ERROR_INVALID_ARGUMENT, "xpushmem_team_get_config");
    FAILS(xpushmem_team_get_config(XPUSHMEM_TEAM_WORLD, XPUSHMEM_TEAM_NUM_CONTEXTS, NULL), XPUSHMEM_ERROR_INVALID_ARGUMENT, "config");
    FAILS(xpushmem_team_destroy(XPUSHMEM_TEAM_WORLD), XPUSHMEM_ERROR_INVALID_ARGUMENT, "predefined");
    FAILS(xpushmem_team_destroy(XPUSHMEM_TEAM_SHARED), XPUSHMEM_ERROR_INVALID_ARGUMENT, "predefined");
    FAILS(xpushmem_team_destroy(555), XPUSHMEM_ERROR_INVALID_ARGUMENT, "not a live team");
    OK(xpushmem_team_destroy(XPUSHMEM_TEAM_INVALID)); /* no effect */
    xpushmem_team_t t = 3;
    FAILS(xpushmem_team_split_strided(XPUSHMEM_TEAM_INVALID, 0, 1, 1, NULL, 0, &t), XPUSHMEM_ERROR_INVALID_ARGUMENT, "xpushmem_team_split_strided");
    CHECK(t == XPUSHMEM_TEAM_INVALID, "failed split left %d", t);
    FAILS(xpushmem_team_split_strided(XPUSHMEM_TEAM_WORLD, 0, 1, 1, NULL, 0, NULL), XPUSHMEM_ERROR_INVALID_ARGUMENT, "new_team");
    /* a split beyond the parent: an error on every PE */
    t = 3;
    CHECK(xpushmem_team_split_strided(XPUSHMEM_TEAM_WORLD, 0, 1, NPES + 1, NULL, 0, &t) != 0, "split past the parent");
    CHECK(t == XPUSHMEM_TEAM_INVALID, "failed split left %d", t);
    FAILS(xpushmem_team_split_strided(XPUSHMEM_TEAM_WORLD, -1, 1, 1, NULL, 0, &t), XPUSHMEM_ERROR_INVALID_ARGUMENT, "start");
    FAILS(xpushmem_team_split_strided(XPUSHMEM_TEAM_WORLD, 0, 1, 1, &cfg, 2, &t), XPUSHMEM_ERROR_INVALID_ARGUMENT, "config_mask");
    xpushmem_team_t x = 3, y = 3;
    FAILS(xpushmem_team_split_2d(XPUSHMEM_TEAM_INVALID, 1, NULL, 0, &x, NULL, 0, &y), XPUSHMEM_ERROR_INVALID_ARGUMENT, "xpushmem_team_split_2d");
    CHECK(x == XPUSHMEM_TEAM_INVALID && y == XPUSHMEM_TEAM_INVALID, "failed 2-D split left %d %d", x, y);
    OK(xpushmem_barrier_all());

    /* roots out of range: every PE passes the same bad root, every PE gets InvalidPe */
    snprintf(expect, sizeof expect, "invalid PE %d", NPES);
    FAILS(xpushmem_int_broadcast(XPUSHMEM_TEAM_WORLD, dst, src, 2, NPES), XPUSHMEM_ERROR_INVALID_PE, expect);
    FAILS(xpushmem_broadcastmem(XPUSHMEM_TEAM_WORLD, dst, src, 2, -1), XPUSHMEM_ERROR_INVALID_PE, "invalid PE -1");
    /* different counts on different PEs: an error on every PE */
    FAILS(xpushmem_int_broadcast(XPUSHMEM_TEAM_WORLD, dst, src, ME == 0 ? 3 : 2, 0), XPUSHMEM_ERROR_MISMATCH, "collective mismatch");
    FAILS(xpushmem_long_sum_reduce(XPUSHMEM_TEAM_WORLD, (long *)dst, (long *)src, ME == NPES - 1 ? 1 : 2), XPUSHMEM_ERROR_MISMATCH, "mismatch");
    FAILS(xpushmem_int_fcollect(XPUSHMEM_TEAM_WORLD, dst, src, (size_t)(ME % 2 + 1)), XPUSHMEM_ERROR_MISMATCH, "mismatch");
    FAILS(xpushmem_int_alltoall(XPUSHMEM_TEAM_WORLD, dst, src, ME == 0 ? 1 : 2), XPUSHMEM_ERROR_MISMATCH, "mismatch");
    FAILS(xpushmemx_int_sum_exscan(XPUSHMEM_TEAM_WORLD, dst, src, ME == 0 ? 1 : 2), XPUSHMEM_ERROR_MISMATCH, "mismatch");
    FAILS(xpushmem_int_sum_reducescatter(XPUSHMEM_TEAM_WORLD, dst, src, ME == 0 ? 1 : 2), XPUSHMEM_ERROR_MISMATCH, "mismatch");
    /* one PE with a bad argument the runtime checks (a stride of 0): every PE gets an error */
    int rc = xpushmem_int_alltoalls(XPUSHMEM_TEAM_WORLD, dst, src, 1, ME == 0 ? 0 : 1, 1);
    CHECK(rc == (ME == 0 ? XPUSHMEM_ERROR_INVALID_ARGUMENT : XPUSHMEM_ERROR_MISMATCH), "alltoalls sst 0: %d %s", rc, xpushmem_last_error());
    /* the world still works after all that */
    src[0] = ME + 1;
    OK(xpushmem_int_sum_reduce(XPUSHMEM_TEAM_WORLD, dst, src, 1));
    CHECK(dst[0] == NPES * (NPES + 1) / 2, "sum after errors %d", dst[0]);
}

static void algorithms(void) {
    FAILS(xpushmemx_set_algorithm("nonesuch", "ring"), XPUSHMEM_ERROR_INVALID_ARGUMENT, "unknown collective");
    FAILS(xpushmemx_set_algorithm("reduce", "bogus"), XPUSHMEM_ERROR_INVALID_ARGUMENT, "recursive-doubling");
    FAILS(xpushmemx_set_algorithm(NULL, "ring"), XPUSHMEM_ERROR_INVALID_ARGUMENT, "collective");
    CHECK(xpushmemx_get_algorithm("nonesuch") == NULL, "get unknown");
    CHECK(strcmp(xpushmemx_get_algorithm("reduce"), "auto") == 0, "default auto");
    const char *sets[][2] = {
        {"barrier", "tree"}, {"broadcast", "binomial"}, {"collect", "ring"}, {"alltoall", "pairwise"},
        {"reduce", "ring"}, {"reducescatter", "linear"}, {"scan", "chain"},
    };
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) {
        OK(xpushmemx_set_algorithm(sets[k][0], sets[k][1]));
        CHECK(strcmp(xpushmemx_get_algorithm(sets[k][0]), sets[k][1]) == 0, "get %s", sets[k][0]);
    }
    CHECK(strcmp(xpushmemx_get_algorithm("fcollect"), "ring") == 0, "fcollect alias");
    all_on(XPUSHMEM_TEAM_WORLD);
    OK(xpushmemx_set_algorithm("reduce", "recursive-doubling"));
    OK(xpushmemx_set_algorithm("broadcast", "pipelined"));
    OK(xpushmemx_set_algorithm("barrier", "dissemination"));
    OK(xpushmemx_set_algorithm("collect", "direct"));
    OK(xpushmemx_set_algorithm("alltoall", "direct"));
    OK(xpushmemx_set_algorithm("scan", "linear"));
    arith_int(XPUSHMEM_TEAM_WORLD); arith_double(XPUSHMEM_TEAM_WORLD);
    move_int(XPUSHMEM_TEAM_WORLD); mem_forms(XPUSHMEM_TEAM_WORLD);
    OK(xpushmem_barrier(XPUSHMEM_TEAM_WORLD));
    /* a disagreement between PEs is an error on every PE */
    OK(xpushmemx_set_algorithm("reduce", ME == 0 ? "linear" : "ring"));
    int *src = (int *)S, *dst = (int *)D;
    FAILS(xpushmem_int_sum_reduce(XPUSHMEM_TEAM_WORLD, dst, src, 4), XPUSHMEM_ERROR_MISMATCH, "mismatch");
    const char *all[] = {"barrier", "broadcast", "collect", "alltoall", "reduce", "reducescatter", "scan"};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        OK(xpushmemx_set_algorithm(all[k], k % 2 ? NULL : "auto"));
        CHECK(strcmp(xpushmemx_get_algorithm(all[k]), "auto") == 0, "reset %s", all[k]);
    }
}

int main(void) {
    OK(xpushmem_init());
    ME = xpushmem_my_pe();
    NPES = xpushmem_n_pes();
    CHECK(NPES <= MAXPE, "too many PEs");
    S = xpushmem_align(64, BUF);
    D = xpushmem_align(64, BUF);
    CHECK(S != NULL && D != NULL, "alloc: %s", xpushmem_last_error());

    /* predefined teams */
    CHECK(xpushmem_team_my_pe(XPUSHMEM_TEAM_WORLD) == ME, "world my_pe");
    CHECK(xpushmem_team_n_pes(XPUSHMEM_TEAM_WORLD) == NPES, "world n_pes");
    CHECK(xpushmem_team_n_pes(XPUSHMEM_TEAM_SHARED) == NPES, "shared n_pes (one node)");
    CHECK(xpushmem_team_translate_pe(XPUSHMEM_TEAM_SHARED, ME, XPUSHMEM_TEAM_WORLD) == ME, "shared->world");
    int v = -1;
    OK(xpushmem_team_my_pe_ex(&v, XPUSHMEM_TEAM_SHARED));
    CHECK(v == ME, "my_pe_ex");
    OK(xpushmem_team_n_pes_ex(&v, XPUSHMEM_TEAM_WORLD));
    CHECK(v == NPES, "n_pes_ex");
    xpushmem_team_config_t cfg = {-5};
    OK(xpushmem_team_get_config(XPUSHMEM_TEAM_WORLD, XPUSHMEM_TEAM_NUM_CONTEXTS, &cfg));
    CHECK(cfg.num_contexts >= 0, "world num_contexts %d", cfg.num_contexts);

    OK(xpushmem_barrier_all());
    all_on(XPUSHMEM_TEAM_WORLD);
    OK(xpushmem_barrier_all());
    all_on(XPUSHMEM_TEAM_SHARED);
    OK(xpushmem_barrier_all());

    /* strided: the odd PEs (PE 1, 3, ...), with a config */
    xpushmem_team_t odd = 3;
    xpushmem_team_config_t c3 = {3};
    int nodd = NPES / 2;
    OK(xpushmem_team_split_strided(XPUSHMEM_TEAM_WORLD, 1, 2, nodd, &c3, XPUSHMEM_TEAM_NUM_CONTEXTS, &odd));
    if (ME % 2 == 1) {
        CHECK(odd != XPUSHMEM_TEAM_INVALID && odd != XPUSHMEM_TEAM_WORLD && odd != XPUSHMEM_TEAM_SHARED, "odd team %d", odd);
        CHECK(xpushmem_team_my_pe(odd) == ME / 2 && xpushmem_team_n_pes(odd) == nodd, "odd numbers");
        xpushmem_team_config_t got = {0};
        OK(xpushmem_team_get_config(odd, XPUSHMEM_TEAM_NUM_CONTEXTS, &got));
        CHECK(got.num_contexts == 3, "odd config %d", got.num_contexts);
        for (int m = 0; m < nodd; m++) CHECK(world_pe(odd, m) == 2 * m + 1, "odd member %d", m);
        CHECK(xpushmem_team_translate_pe(XPUSHMEM_TEAM_WORLD, 0, odd) == -1, "PE 0 is not odd");
        all_on(odd);
        OK(xpushmem_team_destroy(odd));
        CHECK(xpushmem_team_my_pe(odd) == -1, "destroyed team still answers");
        FAILS(xpushmem_int_sum_reduce(odd, (int *)D, (int *)S, 1), XPUSHMEM_ERROR_INVALID_ARGUMENT, "not a live team");
    } else {
        CHECK(odd == XPUSHMEM_TEAM_INVALID, "even PE got team %d", odd);
        OK(xpushmem_team_destroy(odd));
    }
    OK(xpushmem_barrier_all());

    /* a split of a split: the even PEs, then every other one of those (PE 0, 4, ...) */
    xpushmem_team_t even = XPUSHMEM_TEAM_INVALID, quarter = XPUSHMEM_TEAM_INVALID;
    OK(xpushmem_team_split_strided(XPUSHMEM_TEAM_WORLD, 0, 2, (NPES + 1) / 2, NULL, 0, &even));
    if (ME % 2 == 0) {
        int ne = xpushmem_team_n_pes(even);
        OK(xpushmem_team_split_strided(even, 0, 2, (ne + 1) / 2, NULL, 0, &quarter));
        if (ME % 4 == 0) {
            CHECK(xpushmem_team_my_pe(quarter) == ME / 4, "quarter numbers");
            for (int m = 0; m < xpushmem_team_n_pes(quarter); m++) CHECK(world_pe(quarter, m) == 4 * m, "quarter %d", m);
            all_on(quarter);
        } else {
            CHECK(quarter == XPUSHMEM_TEAM_INVALID, "not in the quarter");
        }
        OK(xpushmem_team_destroy(quarter));
        all_on(even);
        OK(xpushmem_team_destroy(even));
    }
    OK(xpushmem_barrier_all());

    /* a team of one: PE NPES-1 alone */
    xpushmem_team_t one = XPUSHMEM_TEAM_INVALID;
    OK(xpushmem_team_split_strided(XPUSHMEM_TEAM_WORLD, NPES - 1, 1, 1, NULL, 0, &one));
    if (ME == NPES - 1) {
        CHECK(xpushmem_team_n_pes(one) == 1 && xpushmem_team_my_pe(one) == 0, "team of one");
        CHECK(world_pe(one, 0) == ME, "team of one member");
        all_on(one);
        OK(xpushmem_team_destroy(one));
    } else {
        CHECK(one == XPUSHMEM_TEAM_INVALID, "not in the team of one");
    }
    OK(xpushmem_barrier_all());

    /* 2-D: rows of 2 (x-axis: numbered by column), columns (y-axis: numbered by row) */
    xpushmem_team_t row = 3, col = 3;
    xpushmem_team_config_t c1 = {1}, c2 = {2};
    OK(xpushmem_team_split_2d(XPUSHMEM_TEAM_WORLD, 2, &c1, XPUSHMEM_TEAM_NUM_CONTEXTS, &row, &c2, XPUSHMEM_TEAM_NUM_CONTEXTS, &col));
    {
        int nrows = (NPES + 1) / 2;
        int rowlen = (ME / 2 == nrows - 1 && NPES % 2) ? 1 : 2;
        CHECK(xpushmem_team_my_pe(row) == ME % 2 && xpushmem_team_n_pes(row) == rowlen, "row numbers");
        int collen = nrows - ((ME % 2 == 1 && NPES % 2) ? 1 : 0);
        CHECK(xpushmem_team_my_pe(col) == ME / 2 && xpushmem_team_n_pes(col) == collen, "col numbers %d %d", xpushmem_team_n_pes(col), collen);
        for (int m = 0; m < rowlen; m++) CHECK(world_pe(row, m) == (ME / 2) * 2 + m, "row member %d", m);
        for (int m = 0; m < collen; m++) CHECK(world_pe(col, m) == 2 * m + ME % 2, "col member %d", m);
        CHECK(xpushmem_team_translate_pe(row, ME % 2, col) == ME / 2, "row -> col");
        xpushmem_team_config_t got = {0};
        OK(xpushmem_team_get_config(col, XPUSHMEM_TEAM_NUM_CONTEXTS, &got));
        CHECK(got.num_contexts == 2, "col config");
        all_on(row);
        OK(xpushmem_barrier_all());
        all_on(col);
        OK(xpushmem_barrier_all());
        OK(xpushmem_team_destroy(row));
        OK(xpushmem_team_destroy(col));
    }
    OK(xpushmem_barrier_all());

    /* 2-D with rows of 1: every x-axis team is a team of one, the y-axis team is everyone */
    OK(xpushmem_team_split_2d(XPUSHMEM_TEAM_WORLD, 1, NULL, 0, &row, NULL, 0, &col));
    CHECK(xpushmem_team_n_pes(row) == 1 && xpushmem_team_n_pes(col) == NPES && xpushmem_team_my_pe(col) == ME, "xrange 1");
    all_on(row);
    OK(xpushmem_barrier_all());
    arith_int(col);
    move_double(col);
    OK(xpushmem_team_destroy(row));
    OK(xpushmem_team_destroy(col));
    OK(xpushmem_barrier_all());

    errors();
    OK(xpushmem_barrier_all());
    algorithms();
    OK(xpushmem_barrier_all());

    OK(xpushmem_free(S));
    OK(xpushmem_free(D));
    OK(xpushmem_finalize());
    printf("teams_collectives OK on PE %d of %d\n", ME, NPES);
    return 0;
}
